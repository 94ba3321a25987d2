# tests/worker/local.mk: the worker program (src/worker/): standalone training runs, bad input, notices, the model transfer.
TESTS += tests/worker/test-onnx-worker.sh tests/worker/test-worker-model-xfer.sh
EXTRA_DIST += tests/worker/test-onnx-worker.sh tests/worker/test-worker-model-xfer.sh

TESTS += tests/worker/test-train-accuracy.sh tests/worker/test-train-determinism.sh \
	tests/worker/test-worker-bad-input.sh tests/worker/test-train-npy.sh
EXTRA_DIST += tests/worker/test-train-accuracy.sh tests/worker/test-train-determinism.sh \
	tests/worker/test-worker-bad-input.sh tests/worker/test-train-npy.sh

# The worker's cloud preemption-notice watcher against a fake of
# the three metadata services.
TESTS += tests/worker/test-worker-notice.sh
EXTRA_DIST += tests/worker/test-worker-notice.sh
# A worker that re-executes itself for OpenBLAS's kernel keeps its name.
TESTS += tests/worker/test-worker-exec-name.sh
EXTRA_DIST += tests/worker/test-worker-exec-name.sh

check_PROGRAMS += tests/worker/test-notice-watch
TESTS += tests/worker/test-notice-watch
tests_worker_test_notice_watch_SOURCES = tests/worker/test-notice-watch.c
tests_worker_test_notice_watch_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS) $(CURL_CFLAGS)
tests_worker_test_notice_watch_LDADD = $(SD_WORKER_LIBS) $(SD_PROTO_LIBS) $(SD_ENGINE_LIBS)

# AdamW + clipping in the standalone trainer: resumed bit for bit, the
# other optimizer's checkpoint refused.
TESTS += tests/worker/test-train-adamw.sh
EXTRA_DIST += tests/worker/test-train-adamw.sh

# Dataset tokens' bad input (token files, block_size, the model's kind,
# vocabulary and time dimension): one line each before anything starts.
TESTS += tests/worker/test-tokens-bad-input.sh
EXTRA_DIST += tests/worker/test-tokens-bad-input.sh

# A language model's windows per step, whatever the rank split.
check_PROGRAMS += tests/worker/test-lm-windows
TESTS += tests/worker/test-lm-windows
tests_worker_test_lm_windows_SOURCES = tests/worker/test-lm-windows.c tests/check.h tests/tmpdir.h
tests_worker_test_lm_windows_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS)
tests_worker_test_lm_windows_LDADD = $(SD_ENGINE_LIBS) -lm
# A small GPT trained elastically end to end on token files: the loss
# falls, the workers' windows tile each batch, val_loss and perplexity in
# the journal.
TESTS += tests/worker/test-train-tokens.sh
EXTRA_DIST += tests/worker/test-train-tokens.sh
# --standalone evaluates the end of a run once (epoch line and done line).
TESTS += tests/worker/test-standalone-eval-once.sh
EXTRA_DIST += tests/worker/test-standalone-eval-once.sh
# An eval-mode ONNX export is warned about in one line at the start.
TESTS += tests/worker/test-eval-export-warning.sh
EXTRA_DIST += tests/worker/test-eval-export-warning.sh
