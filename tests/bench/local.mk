# tests/bench/local.mk: benchmarks (built by make check, run by make bench).
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

# oneDNN bf16 convolutions against oneDNN fp32 at every resnet32 shape,
# with the f32<->bf16 reorders a real step pays; run by hand (taskset -c 0
# tests/bench/bench-conv-bf16 -t 1), it is not a test.  Needs oneDNN.
if HAVE_DNNL
noinst_PROGRAMS += tests/bench/bench-conv-bf16
tests_bench_bench_conv_bf16_SOURCES = tests/bench/bench-conv-bf16.c tests/bench/timing.h
tests_bench_bench_conv_bf16_CPPFLAGS = $(AM_CPPFLAGS) $(DNNL_CFLAGS)
tests_bench_bench_conv_bf16_LDADD = $(DNNL_LIBS)
# A linear layer's GEMMs, OpenBLAS fp32 against oneDNN bf16 matmul, at the
# built-in models' and the example GPT's shapes: the table behind
# sd_linear_dnnl_bf16_wins (engine/matmul-dnnl.c); run by hand
# (tests/bench/bench-linear-bf16 -t 2), it is not a test.
noinst_PROGRAMS += tests/bench/bench-linear-bf16
tests_bench_bench_linear_bf16_SOURCES = tests/bench/bench-linear-bf16.c tests/bench/timing.h
tests_bench_bench_linear_bf16_LDADD = $(SD_ENGINE_LIBS)
# spotdeck bf16 against its own fp32 and PyTorch's autocast bf16 on
# resnet32, batch 128, 2 threads, in one run (by hand, like engine-vs-torch).
EXTRA_DIST += tests/bench/bf16-vs-torch tests/bench/bf16_torch_resnet.py
endif

# Long soak (not a test): resnet20 on Fashion-MNIST padded to 32x32, 3 epochs
# per convolution path, accuracies compared (tests/bench/soak-accuracy).
noinst_PROGRAMS += tests/bench/soak-accuracy
tests_bench_soak_accuracy_SOURCES = tests/bench/soak-accuracy.c
tests_bench_soak_accuracy_CPPFLAGS = $(AM_CPPFLAGS) $(OPENBLAS_CFLAGS)
tests_bench_soak_accuracy_LDADD = $(SD_ENGINE_LIBS)
EXTRA_DIST += tests/bench/torch_resnet.py

# Loading Fashion-MNIST against zlib reading the same files; `make bench`.
noinst_PROGRAMS += tests/bench/bench-data
tests_bench_bench_data_SOURCES = tests/bench/bench-data.c tests/bench/bench.h
tests_bench_bench_data_CPPFLAGS = $(AM_CPPFLAGS) $(ZLIB_CFLAGS)
tests_bench_bench_data_LDADD = $(SD_ENGINE_LIBS)

# Benchmarks: built by `make check`/`make bench`, run by `make bench` only.
noinst_PROGRAMS += tests/bench/bench-sgemm
tests_bench_bench_sgemm_SOURCES = tests/bench/bench-sgemm.c
tests_bench_bench_sgemm_CPPFLAGS = $(AM_CPPFLAGS) $(OPENBLAS_CFLAGS)
tests_bench_bench_sgemm_LDADD = $(SD_ENGINE_LIBS)
EXTRA_DIST += tests/bench/engine-vs-torch tests/bench/torch_cnn.py tests/bench/run-all.sh \
	tests/bench/elastic-bench tests/bench/scaling.py tests/bench/ddp-vs-torch \
	tests/bench/torch_ddp_cnn.py tests/bench/torch_common.py tests/bench/liveness-bench \
	tests/bench/onnx-vs-builtin tests/bench/gpt-torch
noinst_PROGRAMS += tests/bench/bench-market

tests_bench_bench_market_SOURCES = tests/bench/bench-market.c tests/bench/bench.h
tests_bench_bench_market_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS)
tests_bench_bench_market_LDADD = $(SD_MARKET_LIBS) $(SD_ENGINE_LIBS)

noinst_PROGRAMS += tests/bench/bench-planner
tests_bench_bench_planner_SOURCES = tests/bench/bench-planner.c
tests_bench_bench_planner_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS)
tests_bench_bench_planner_LDADD = $(SD_MARKET_LIBS) $(SD_ENGINE_LIBS)

noinst_PROGRAMS += tests/bench/autopilot-bench
tests_bench_autopilot_bench_SOURCES = tests/bench/autopilot-bench.c tests/bench/bench.h
tests_bench_autopilot_bench_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS)
tests_bench_autopilot_bench_LDADD = $(SD_MARKET_LIBS) $(SD_ENGINE_LIBS)
# All-reduce bandwidth on loopback against memcpy; run by hand or `make bench`.
noinst_PROGRAMS += tests/bench/bench-allreduce
tests_bench_bench_allreduce_SOURCES = tests/bench/bench-allreduce.c tests/bench/bench.h
tests_bench_bench_allreduce_LDADD = $(SD_COMM_LIBS) $(SD_ENGINE_LIBS)
tests_bench_bench_allreduce_LDFLAGS = $(AM_LDFLAGS) $(SD_COMM_LINK_FLAGS)
nodist_EXTRA_tests_bench_bench_allreduce_SOURCES = dummy.cxx
# Full redraw of a 200x60 screen with 64 servers against the 2 ms target
# and against a peer blitting the same frames' cells; run by hand or
# `make bench`.
noinst_PROGRAMS += tests/bench/bench-ui
tests_bench_bench_ui_SOURCES = tests/bench/bench-ui.c tests/bench/bench.h tests/ui-fixture.c tests/ui-fixture.h
tests_bench_bench_ui_CPPFLAGS = $(UI_TEST_CPPFLAGS)
tests_bench_bench_ui_LDADD = $(SD_UI_LIBS)
EXTRA_DIST += tests/bench/cockpit-bench tests/bench/attach-bench
# The cockpit's keypress to screen with 200 EC2 requests in flight (make bench).
EXTRA_DIST += tests/bench/cloud-cockpit-bench

# The fused batch-norm kernels at the resnet32 shapes, forward and backward,
# against a plain copy: run it by hand (tests/bench/bench-bn [-t threads] [-c]).
noinst_PROGRAMS += tests/bench/bench-bn
tests_bench_bench_bn_SOURCES = tests/bench/bench-bn.c tests/bench/timing.h
tests_bench_bench_bn_LDADD = $(SD_ENGINE_LIBS)

# The fused causal attention and layer norm against PyTorch's composition
# at the example GPT's shape; run by hand (tests/bench/bench-attention [-t 2]).
noinst_PROGRAMS += tests/bench/bench-attention
tests_bench_bench_attention_SOURCES = tests/bench/bench-attention.c tests/bench/bench.h tests/bench/timing.h
tests_bench_bench_attention_CPPFLAGS = $(AM_CPPFLAGS) $(OPENBLAS_CFLAGS)
tests_bench_bench_attention_LDADD = $(SD_ENGINE_LIBS)
# The example char-GPT against PyTorch: tokens/s (gpt-vs-torch, make bench).
EXTRA_DIST += tests/bench/gpt-vs-torch
# Its learning against PyTorch's, the same steps and settings (gpt-learn, make soak).
EXTRA_DIST += tests/bench/gpt-learn tests/bench/gpt-learn-soak.sh
# The example char-GPT against llm.c's train_gpt2.c on a matched configuration
# (gpt-vs-llmc, make bench; LLMC_DIR names an llm.c checkout, else SKIP).
EXTRA_DIST += tests/bench/gpt-vs-llmc tests/bench/llmc_ckpt.py tests/bench/llmc_reference.py
