# tests/engine.mk: tests and benchmark of the engine's CPU layers.
check_PROGRAMS += tests/test-gradcheck tests/test-layers
TESTS += tests/test-gradcheck tests/test-layers

tests_test_gradcheck_SOURCES = tests/test-gradcheck.c tests/check.h
tests_test_gradcheck_CPPFLAGS = $(AM_CPPFLAGS) $(OPENBLAS_CFLAGS)
tests_test_gradcheck_LDADD = $(SD_ENGINE_LIBS)

# Dropout: its statistics, masks a function of (seed, sample), inference
# the identity, replays the same, and a model with it learns.
check_PROGRAMS += tests/test-dropout
TESTS += tests/test-dropout
tests_test_dropout_SOURCES = tests/test-dropout.c tests/check.h
tests_test_dropout_LDADD = $(SD_ENGINE_LIBS)

tests_test_layers_SOURCES = tests/test-layers.c tests/check.h
tests_test_layers_CPPFLAGS = $(AM_CPPFLAGS) $(OPENBLAS_CFLAGS)
tests_test_layers_LDADD = $(SD_ENGINE_LIBS)

# The AVX-512 kernels against the portable ones: SKIP without AVX-512.
TESTS += tests/test-layers-avx512.sh
EXTRA_DIST += tests/test-layers-avx512.sh

# Images/s of one cnn training step at batch 64 with per-layer times; run it
# by hand (tests/bench/bench-layers [-t threads]), it is not a test.
noinst_PROGRAMS += tests/bench/bench-layers
tests_bench_bench_layers_SOURCES = tests/bench/bench-layers.c tests/bench/bench.h tests/bench/timing.h
tests_bench_bench_layers_CPPFLAGS = $(AM_CPPFLAGS) $(OPENBLAS_CFLAGS)
tests_bench_bench_layers_LDADD = $(SD_ENGINE_LIBS)

# Images/s of whole training steps of a model (warm steps only), with
# --profile a per-node table; tests/bench/engine-vs-torch runs it.
noinst_PROGRAMS += tests/bench/bench-train
tests_bench_bench_train_SOURCES = tests/bench/bench-train.c tests/bench/timing.h
tests_bench_bench_train_CPPFLAGS = $(AM_CPPFLAGS) $(OPENBLAS_CFLAGS)
tests_bench_bench_train_LDADD = $(SD_ENGINE_LIBS)

# The two convolution paths side by side at every resnet and cnn shape: the
# table behind sd_conv2d_path's "auto" (engine/layers.c).
noinst_PROGRAMS += tests/bench/bench-conv
tests_bench_bench_conv_SOURCES = tests/bench/bench-conv.c tests/bench/timing.h
tests_bench_bench_conv_CPPFLAGS = $(AM_CPPFLAGS) $(OPENBLAS_CFLAGS)
tests_bench_bench_conv_LDADD = $(SD_ENGINE_LIBS)

# The fused batch-norm kernels at the resnet32 shapes, forward and backward,
# against a plain copy: run it by hand (tests/bench/bench-bn [-t threads] [-c]).
noinst_PROGRAMS += tests/bench/bench-bn
tests_bench_bench_bn_SOURCES = tests/bench/bench-bn.c tests/bench/timing.h
tests_bench_bench_bn_LDADD = $(SD_ENGINE_LIBS)

# Whole models on both convolution paths: gradients, training, determinism
# and checkpoints across paths (SKIPs without oneDNN).
check_PROGRAMS += tests/test-conv-paths
TESTS += tests/test-conv-paths
tests_test_conv_paths_SOURCES = tests/test-conv-paths.c tests/check.h tests/tmpdir.h
tests_test_conv_paths_CPPFLAGS = $(AM_CPPFLAGS) $(OPENBLAS_CFLAGS)
tests_test_conv_paths_LDADD = $(SD_ENGINE_LIBS)

# Long soak (not a test): resnet20 on Fashion-MNIST padded to 32x32, 3 epochs
# per convolution path, accuracies compared (tests/bench/soak-accuracy).
noinst_PROGRAMS += tests/bench/soak-accuracy
tests_bench_soak_accuracy_SOURCES = tests/bench/soak-accuracy.c
tests_bench_soak_accuracy_CPPFLAGS = $(AM_CPPFLAGS) $(OPENBLAS_CFLAGS)
tests_bench_soak_accuracy_LDADD = $(SD_ENGINE_LIBS)
EXTRA_DIST += tests/bench/torch_resnet.py

# The optimizer and the learning-rate schedules against double-precision
# references written from their definitions.
check_PROGRAMS += tests/test-optim
TESTS += tests/test-optim
tests_test_optim_SOURCES = tests/test-optim.c tests/check.h
tests_test_optim_LDADD = $(SD_ENGINE_LIBS)
