# tests/engine.mk: tests and benchmark of the engine's CPU layers.
check_PROGRAMS += tests/test-gradcheck tests/test-layers
TESTS += tests/test-gradcheck tests/test-layers

tests_test_gradcheck_SOURCES = tests/test-gradcheck.c tests/check.h
tests_test_gradcheck_CPPFLAGS = $(AM_CPPFLAGS) $(OPENBLAS_CFLAGS)
tests_test_gradcheck_LDADD = $(SD_ENGINE_LIBS)

tests_test_layers_SOURCES = tests/test-layers.c tests/check.h
tests_test_layers_CPPFLAGS = $(AM_CPPFLAGS) $(OPENBLAS_CFLAGS)
tests_test_layers_LDADD = $(SD_ENGINE_LIBS)

# The AVX-512 kernels against the portable ones: SKIP without AVX-512.
TESTS += tests/test-layers-avx512.sh
EXTRA_DIST += tests/test-layers-avx512.sh

# Images/s of one cnn training step at batch 64 with per-layer times; run it
# by hand (tests/bench/bench-layers [-t threads]), it is not a test.
noinst_PROGRAMS += tests/bench/bench-layers
tests_bench_bench_layers_SOURCES = tests/bench/bench-layers.c tests/bench/bench.h
tests_bench_bench_layers_CPPFLAGS = $(AM_CPPFLAGS) $(OPENBLAS_CFLAGS)
tests_bench_bench_layers_LDADD = $(SD_ENGINE_LIBS)
