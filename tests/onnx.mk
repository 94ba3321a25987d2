# tests/onnx.mk: ONNX models (engine/onnx.c): the same training numbers as
# PyTorch, one-line errors for malformed files, and the loader's fuzz target.
check_PROGRAMS += tests/onnx-train
tests_onnx_train_SOURCES = tests/onnx-train.c
tests_onnx_train_LDADD = $(SD_ENGINE_LIBS)
TESTS += tests/test-onnx-torch.sh
EXTRA_DIST += tests/test-onnx-torch.sh tests/onnx_torch_ref.py
