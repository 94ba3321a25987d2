# tests/data.mk: datasets and the checkpoint container (engine/data.c,
# engine/checkpoint.c).  Both tests write their fixtures at run time into a
# mkdtemp() directory, so no binary files live in the repository.
check_PROGRAMS += tests/test-data tests/test-checkpoint
TESTS += tests/test-data tests/test-checkpoint

tests_test_data_SOURCES = tests/test-data.c tests/check.h tests/tmpdir.h
tests_test_data_CPPFLAGS = $(AM_CPPFLAGS) $(ZLIB_CFLAGS)
tests_test_data_LDADD = $(SD_ENGINE_LIBS)

tests_test_checkpoint_SOURCES = tests/test-checkpoint.c tests/check.h tests/tmpdir.h
tests_test_checkpoint_CPPFLAGS = $(AM_CPPFLAGS) $(ZLIB_CFLAGS)
tests_test_checkpoint_LDADD = $(SD_ENGINE_LIBS)

# Loading Fashion-MNIST against zlib reading the same files; `make bench`.
noinst_PROGRAMS += tests/bench/bench-data
tests_bench_bench_data_SOURCES = tests/bench/bench-data.c tests/bench/bench.h
tests_bench_bench_data_CPPFLAGS = $(AM_CPPFLAGS) $(ZLIB_CFLAGS)
tests_bench_bench_data_LDADD = $(SD_ENGINE_LIBS)

# The npy dataset (engine/npy.c and its part of engine/data.c): headers,
# dtypes, layouts, gathering, augmentation and malformed files.
check_PROGRAMS += tests/test-npy
TESTS += tests/test-npy
tests_test_npy_SOURCES = tests/test-npy.c tests/npy-write.h tests/check.h tests/tmpdir.h
tests_test_npy_LDADD = $(SD_ENGINE_LIBS)

# The .npy header reader's fuzz target: a plain program that replays
# mutated .npy files (see the file for the libFuzzer build).
check_PROGRAMS += tests/fuzz/fuzz-npy
TESTS += tests/fuzz/fuzz-npy
tests_fuzz_fuzz_npy_SOURCES = tests/fuzz/fuzz-npy.c tests/fuzz/mutate.h tests/npy-write.h \
	tests/check.h
tests_fuzz_fuzz_npy_LDADD = $(SD_ENGINE_LIBS)
