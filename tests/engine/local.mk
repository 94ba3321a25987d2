# tests/engine/local.mk: the training engine (engine/): layers, gradients, optimizer, data, checkpoints, collectives, ONNX, the CUDA backend without a GPU.
check_PROGRAMS += tests/engine/test-gradcheck tests/engine/test-layers
TESTS += tests/engine/test-gradcheck tests/engine/test-layers

tests_engine_test_gradcheck_SOURCES = tests/engine/test-gradcheck.c tests/check.h
tests_engine_test_gradcheck_CPPFLAGS = $(AM_CPPFLAGS) $(OPENBLAS_CFLAGS)
tests_engine_test_gradcheck_LDADD = $(SD_ENGINE_LIBS)

# The option-A shortcut's fast blk 8 / 16 paths against its definition, bit
# for bit.
check_PROGRAMS += tests/engine/test-shortcut
TESTS += tests/engine/test-shortcut
tests_engine_test_shortcut_SOURCES = tests/engine/test-shortcut.c tests/check.h
tests_engine_test_shortcut_LDADD = $(SD_ENGINE_LIBS)

# Dropout: its statistics, masks a function of (seed, sample), inference
# the identity, replays the same, and a model with it learns.
check_PROGRAMS += tests/engine/test-dropout
TESTS += tests/engine/test-dropout
tests_engine_test_dropout_SOURCES = tests/engine/test-dropout.c tests/check.h
tests_engine_test_dropout_LDADD = $(SD_ENGINE_LIBS)

tests_engine_test_layers_SOURCES = tests/engine/test-layers.c tests/check.h
tests_engine_test_layers_CPPFLAGS = $(AM_CPPFLAGS) $(OPENBLAS_CFLAGS)
tests_engine_test_layers_LDADD = $(SD_ENGINE_LIBS)

# The AVX-512 kernels against the portable ones: SKIP without AVX-512.
TESTS += tests/engine/test-layers-avx512.sh
EXTRA_DIST += tests/engine/test-layers-avx512.sh
TESTS += tests/engine/test-conv-bf16-avx512bf16.sh
EXTRA_DIST += tests/engine/test-conv-bf16-avx512bf16.sh

# Whole models on both convolution paths: gradients, training, determinism
# and checkpoints across paths (SKIPs without oneDNN).
check_PROGRAMS += tests/engine/test-conv-paths
TESTS += tests/engine/test-conv-paths
tests_engine_test_conv_paths_SOURCES = tests/engine/test-conv-paths.c tests/check.h tests/tmpdir.h
tests_engine_test_conv_paths_CPPFLAGS = $(AM_CPPFLAGS) $(OPENBLAS_CFLAGS)
tests_engine_test_conv_paths_LDADD = $(SD_ENGINE_LIBS)

# The optimizer and the learning-rate schedules against double-precision
# references written from their definitions.
check_PROGRAMS += tests/engine/test-optim
TESTS += tests/engine/test-optim
tests_engine_test_optim_SOURCES = tests/engine/test-optim.c tests/check.h
tests_engine_test_optim_LDADD = $(SD_ENGINE_LIBS)
# PyTorch, one-line errors for malformed files, and the loader's fuzz target.
check_PROGRAMS += tests/engine/onnx-train
tests_engine_onnx_train_SOURCES = tests/engine/onnx-train.c
tests_engine_onnx_train_LDADD = $(SD_ENGINE_LIBS)
TESTS += tests/engine/test-onnx-torch.sh
EXTRA_DIST += tests/engine/test-onnx-torch.sh tests/engine/onnx_torch_ref.py

# The ONNX writer read back by the engine's own loader (no Python needed).
check_PROGRAMS += tests/engine/test-onnx-export
TESTS += tests/engine/test-onnx-export
tests_engine_test_onnx_export_SOURCES = tests/engine/test-onnx-export.c tests/engine/onnx-gen.h tests/check.h
tests_engine_test_onnx_export_CPPFLAGS = $(AM_CPPFLAGS) $(PROTOBUF_C_CFLAGS)
tests_engine_test_onnx_export_LDADD = $(SD_ENGINE_LIBS)

EXTRA_DIST += tests/engine/export_check.py

# The loader on a tiny model tests/engine/onnx-gen.h writes with protobuf-c, whole
# and broken 14 ways (no Python needed).
check_PROGRAMS += tests/engine/test-onnx-bad
TESTS += tests/engine/test-onnx-bad
tests_engine_test_onnx_bad_SOURCES = tests/engine/test-onnx-bad.c tests/engine/onnx-gen.h tests/check.h tests/tmpdir.h
tests_engine_test_onnx_bad_CPPFLAGS = $(AM_CPPFLAGS) $(PROTOBUF_C_CFLAGS)
tests_engine_test_onnx_bad_LDADD = $(SD_ENGINE_LIBS)

# spotdeck-worker trains an ONNX file on Fashion-MNIST and refuses one of
# another shape; an elastic worker builds the model from the bytes a (fake)
# controller sends and refuses corrupted ones; tests/engine/onnx-gen writes the file.
check_PROGRAMS += tests/engine/onnx-gen
tests_engine_onnx_gen_SOURCES = tests/engine/onnx-gen.c tests/engine/onnx-gen.h
tests_engine_onnx_gen_CPPFLAGS = $(AM_CPPFLAGS) $(PROTOBUF_C_CFLAGS)
tests_engine_onnx_gen_LDADD = $(SD_ENGINE_LIBS)
EXTRA_DIST += examples/common.py examples/fashion-cnn/export.py examples/cifar-resnet18/export.py

# engine/checkpoint.c).  Both tests write their fixtures at run time into a
# mkdtemp() directory, so no binary files live in the repository.
check_PROGRAMS += tests/engine/test-data tests/engine/test-checkpoint
TESTS += tests/engine/test-data tests/engine/test-checkpoint

tests_engine_test_data_SOURCES = tests/engine/test-data.c tests/check.h tests/tmpdir.h
tests_engine_test_data_CPPFLAGS = $(AM_CPPFLAGS) $(ZLIB_CFLAGS)
tests_engine_test_data_LDADD = $(SD_ENGINE_LIBS)

tests_engine_test_checkpoint_SOURCES = tests/engine/test-checkpoint.c tests/check.h tests/tmpdir.h
tests_engine_test_checkpoint_CPPFLAGS = $(AM_CPPFLAGS) $(ZLIB_CFLAGS)
tests_engine_test_checkpoint_LDADD = $(SD_ENGINE_LIBS)

# The npy dataset (engine/npy.c and its part of engine/data.c): headers,
# dtypes, layouts, gathering, augmentation and malformed files.
check_PROGRAMS += tests/engine/test-npy
TESTS += tests/engine/test-npy
tests_engine_test_npy_SOURCES = tests/engine/test-npy.c tests/engine/npy-write.h tests/check.h tests/tmpdir.h
tests_engine_test_npy_LDADD = $(SD_ENGINE_LIBS)

check_PROGRAMS += tests/engine/test-parity
TESTS += tests/engine/test-parity
tests_engine_test_parity_SOURCES = tests/engine/test-parity.c
tests_engine_test_parity_CPPFLAGS = $(AM_CPPFLAGS) $(OPENBLAS_CFLAGS)
tests_engine_test_parity_LDADD = $(SD_COMM_LIBS) $(SD_ENGINE_LIBS)
# The grad-ready hook and the bucket plan of the overlapped all-reduce.
check_PROGRAMS += tests/engine/test-grad-sync
TESTS += tests/engine/test-grad-sync
tests_engine_test_grad_sync_SOURCES = tests/engine/test-grad-sync.c tests/check.h
tests_engine_test_grad_sync_CPPFLAGS = $(AM_CPPFLAGS) $(OPENBLAS_CFLAGS)
tests_engine_test_grad_sync_LDADD = $(SD_COMM_LIBS) $(SD_ENGINE_LIBS)
check_PROGRAMS += tests/engine/test-comm
TESTS += tests/engine/test-comm

tests_engine_test_comm_SOURCES = tests/engine/test-comm.c tests/tmpdir.h
tests_engine_test_comm_LDADD = $(SD_COMM_LIBS) $(SD_ENGINE_LIBS)
tests_engine_test_comm_LDFLAGS = $(AM_LDFLAGS) $(SD_COMM_LINK_FLAGS)
# The Gloo backend is C++: link with the C++ driver so its runtime comes along
# in the right order (the .cxx file never exists and is never compiled; it
# only tells automake which linker to use).
nodist_EXTRA_tests_engine_test_comm_SOURCES = dummy.cxx

# without a GPU (in make check); tests/gpu/ holds what needs one
# (tests/gpu/run.sh, run on a GPU host from the bundle tests/gpu/pack.sh makes).
check_PROGRAMS += tests/engine/test-backend
TESTS += tests/engine/test-backend
tests_engine_test_backend_SOURCES = tests/engine/test-backend.c tests/check.h tests/tmpdir.h tests/gpu/fake/hostdev.h
tests_engine_test_backend_CPPFLAGS = $(AM_CPPFLAGS) $(OPENBLAS_CFLAGS)
tests_engine_test_backend_LDADD = $(SD_COMM_LIBS) $(SD_ENGINE_LIBS)
nodist_EXTRA_tests_engine_test_backend_SOURCES = dummy.cxx
if HAVE_CUDA
tests_engine_test_backend_CPPFLAGS += -DSD_TEST_HAVE_PLUGIN
endif

# tests/engine/test-gpu-run.sh: pack.sh and run.sh without a GPU - run.sh must SKIP
# here, and must pass end to end against a stand-in driver and plugin that
# compute on the CPU (tests/gpu/fake/: never installed, never packed).
TESTS += tests/engine/test-gpu-run.sh
EXTRA_DIST += tests/engine/test-gpu-run.sh

# Token files for language models (engine/tokens.c): llm.c's and nanoGPT's
# formats, the refusals, and the training and evaluation windows.
check_PROGRAMS += tests/engine/test-tokens
TESTS += tests/engine/test-tokens
tests_engine_test_tokens_SOURCES = tests/engine/test-tokens.c tests/check.h tests/tmpdir.h
tests_engine_test_tokens_LDADD = $(SD_ENGINE_LIBS) -lm

# AdamW with gradient-norm clipping and the warm-up + cosine schedule on an
# exported MLP against PyTorch 1.13, within the drift of 1-ulp nudged runs.
TESTS += tests/engine/test-adamw-torch.sh
EXTRA_DIST += tests/engine/test-adamw-torch.sh

# The bf16 precision of the oneDNN convolutions against float32 within a
# derived bound, and a short bf16 training run within a measured band;
# SKIPs where oneDNN has no bf16 kernels.
check_PROGRAMS += tests/engine/test-conv-bf16
TESTS += tests/engine/test-conv-bf16
tests_engine_test_conv_bf16_SOURCES = tests/engine/test-conv-bf16.c tests/check.h tests/engine/bf16-test.h
tests_engine_test_conv_bf16_CPPFLAGS = $(AM_CPPFLAGS) $(OPENBLAS_CFLAGS)
tests_engine_test_conv_bf16_LDADD = $(SD_ENGINE_LIBS)

# The bf16 linear layers (oneDNN matmul) against a double reference within a
# derived bound, fp32 unchanged, and short mlp and cnn bf16 training runs
# within a measured band of fp32; SKIPs where oneDNN has no bf16 kernels.
check_PROGRAMS += tests/engine/test-linear-bf16
TESTS += tests/engine/test-linear-bf16
tests_engine_test_linear_bf16_SOURCES = tests/engine/test-linear-bf16.c tests/check.h tests/engine/bf16-test.h
tests_engine_test_linear_bf16_LDADD = $(SD_ENGINE_LIBS)

# The char-level GPT's ONNX export (examples/char-gpt, a small config, opsets
# 14 to 17, exact and tanh GELU) computes PyTorch's loss, gradients, eval
# loss and SGD trajectory, fused and unfused (SKIPs without torch and onnx).
check_PROGRAMS += tests/engine/test-gpt-onnx
tests_engine_test_gpt_onnx_SOURCES = tests/engine/test-gpt-onnx.c
tests_engine_test_gpt_onnx_LDADD = $(SD_ENGINE_LIBS)
TESTS += tests/engine/test-gpt-torch.sh
EXTRA_DIST += tests/engine/test-gpt-torch.sh tests/engine/gpt_torch_ref.py

# The transformer kernels (engine/layers-seq.h) against double references,
# finite differences, and the fused attention against the unfused chain.
check_PROGRAMS += tests/engine/test-layers-seq
TESTS += tests/engine/test-layers-seq
tests_engine_test_layers_seq_SOURCES = tests/engine/test-layers-seq.c tests/check.h
tests_engine_test_layers_seq_CPPFLAGS = $(AM_CPPFLAGS) $(OPENBLAS_CFLAGS)
tests_engine_test_layers_seq_LDADD = $(SD_ENGINE_LIBS)
# The same kernels against PyTorch's autograd (SKIPs without torch): the C
# driver writes inputs and results, the Python side recomputes them.
check_PROGRAMS += tests/engine/test-layers-seq-dump
tests_engine_test_layers_seq_dump_SOURCES = tests/engine/test-layers-seq-dump.c
tests_engine_test_layers_seq_dump_LDADD = $(SD_ENGINE_LIBS)
TESTS += tests/engine/test-layers-seq-torch.sh
EXTRA_DIST += tests/engine/test-layers-seq-torch.sh tests/engine/layers_seq_torch.py

# Checkpoints across precisions: a bf16 run resumes in fp32 and back, bit
# for bit where it must; and the trainer's "auto" precision.  SKIPs where
# oneDNN has no bf16 kernels.
check_PROGRAMS += tests/engine/test-resume-bf16
TESTS += tests/engine/test-resume-bf16
tests_engine_test_resume_bf16_SOURCES = tests/engine/test-resume-bf16.c tests/check.h tests/engine/bf16-test.h
tests_engine_test_resume_bf16_CPPFLAGS = $(AM_CPPFLAGS) $(OPENBLAS_CFLAGS)
tests_engine_test_resume_bf16_LDADD = $(SD_ENGINE_LIBS)
