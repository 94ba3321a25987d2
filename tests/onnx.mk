# tests/onnx.mk: ONNX models (engine/onnx.c): the same training numbers as
# PyTorch, one-line errors for malformed files, and the loader's fuzz target.
check_PROGRAMS += tests/onnx-train
tests_onnx_train_SOURCES = tests/onnx-train.c
tests_onnx_train_LDADD = $(SD_ENGINE_LIBS)
TESTS += tests/test-onnx-torch.sh tests/test-adamw-torch.sh
EXTRA_DIST += tests/test-onnx-torch.sh tests/test-adamw-torch.sh tests/onnx_torch_ref.py

# The ONNX writer read back by the engine's own loader (no Python needed).
check_PROGRAMS += tests/test-onnx-export
TESTS += tests/test-onnx-export
tests_test_onnx_export_SOURCES = tests/test-onnx-export.c tests/onnx-gen.h tests/check.h
tests_test_onnx_export_CPPFLAGS = $(AM_CPPFLAGS) $(PROTOBUF_C_CFLAGS)
tests_test_onnx_export_LDADD = $(SD_ENGINE_LIBS)

# `spotdeck export`: runs written back out as ONNX and safetensors, loaded
# into PyTorch, scored as the runs scored them.
TESTS += tests/test-export.sh
EXTRA_DIST += tests/test-export.sh tests/export_check.py

# The loader on a tiny model tests/onnx-gen.h writes with protobuf-c, whole
# and broken 14 ways (no Python needed).
check_PROGRAMS += tests/test-onnx-bad
TESTS += tests/test-onnx-bad
tests_test_onnx_bad_SOURCES = tests/test-onnx-bad.c tests/onnx-gen.h tests/check.h tests/tmpdir.h
tests_test_onnx_bad_CPPFLAGS = $(AM_CPPFLAGS) $(PROTOBUF_C_CFLAGS)
tests_test_onnx_bad_LDADD = $(SD_ENGINE_LIBS)

# Built as a plain program with a main() that replays mutated models; see
# the file for the libFuzzer build.
check_PROGRAMS += tests/fuzz/fuzz-onnx
TESTS += tests/fuzz/fuzz-onnx
tests_fuzz_fuzz_onnx_SOURCES = tests/fuzz/fuzz-onnx.c tests/onnx-gen.h tests/check.h \
	tests/fuzz/mutate.h
tests_fuzz_fuzz_onnx_CPPFLAGS = $(AM_CPPFLAGS) $(PROTOBUF_C_CFLAGS)
tests_fuzz_fuzz_onnx_LDADD = $(SD_ENGINE_LIBS)

# spotdeck-worker trains an ONNX file on Fashion-MNIST and refuses one of
# another shape; an elastic worker builds the model from the bytes a (fake)
# controller sends and refuses corrupted ones; tests/onnx-gen writes the file.
check_PROGRAMS += tests/onnx-gen
tests_onnx_gen_SOURCES = tests/onnx-gen.c tests/onnx-gen.h
tests_onnx_gen_CPPFLAGS = $(AM_CPPFLAGS) $(PROTOBUF_C_CFLAGS)
tests_onnx_gen_LDADD = $(SD_ENGINE_LIBS)
TESTS += tests/test-onnx-worker.sh tests/test-worker-model-xfer.sh
EXTRA_DIST += tests/test-onnx-worker.sh tests/test-worker-model-xfer.sh

# The examples a newcomer starts from (examples/) export, check and train.
TESTS += tests/test-examples.sh
EXTRA_DIST += tests/test-examples.sh examples/common.py examples/fashion-cnn/export.py \
	examples/cifar-resnet18/export.py

# The example ResNet-18 through a killed worker and a killed controller.
TESTS += tests/test-elastic-onnx-resnet.sh
EXTRA_DIST += tests/test-elastic-onnx-resnet.sh
