# tests/train.mk: the worker's training runs (standalone mode).
TESTS += tests/test-train-accuracy.sh tests/test-train-determinism.sh tests/test-worker-bad-input.sh \
	tests/test-train-npy.sh tests/test-train-adamw.sh
EXTRA_DIST += tests/lib.sh tests/test-train-accuracy.sh tests/test-train-determinism.sh \
	tests/test-worker-bad-input.sh tests/test-train-npy.sh tests/test-train-adamw.sh

# Benchmarks: built by `make check`/`make bench`, run by `make bench` only.
noinst_PROGRAMS += tests/bench/bench-sgemm
tests_bench_bench_sgemm_SOURCES = tests/bench/bench-sgemm.c
tests_bench_bench_sgemm_CPPFLAGS = $(AM_CPPFLAGS) $(OPENBLAS_CFLAGS)
tests_bench_bench_sgemm_LDADD = $(SD_ENGINE_LIBS)
EXTRA_DIST += tests/bench/engine-vs-torch tests/bench/torch_cnn.py tests/bench/run-all.sh tests/bench/elastic-bench \
	tests/bench/scaling.py tests/bench/ddp-vs-torch tests/bench/torch_ddp_cnn.py tests/bench/torch_common.py \
	tests/bench/liveness-bench tests/bench/onnx-vs-builtin
EXTRA_DIST += tests/elastic.py
TESTS += tests/test-elastic-accuracy.sh tests/test-elastic-fault.sh tests/test-elastic-pin.sh \
	tests/test-elastic-min-workers.sh
EXTRA_DIST += tests/test-elastic-accuracy.sh tests/test-elastic-fault.sh tests/soak-kill.sh \
	tests/test-elastic-pin.sh tests/test-elastic-min-workers.sh

check_PROGRAMS += tests/test-parity
TESTS += tests/test-parity
tests_test_parity_SOURCES = tests/test-parity.c
tests_test_parity_CPPFLAGS = $(AM_CPPFLAGS) $(OPENBLAS_CFLAGS)
tests_test_parity_LDADD = $(SD_COMM_LIBS) $(SD_ENGINE_LIBS)
# The grad-ready hook and the bucket plan of the overlapped all-reduce.
check_PROGRAMS += tests/test-grad-sync
TESTS += tests/test-grad-sync
tests_test_grad_sync_SOURCES = tests/test-grad-sync.c tests/check.h
tests_test_grad_sync_CPPFLAGS = $(AM_CPPFLAGS) $(OPENBLAS_CFLAGS)
tests_test_grad_sync_LDADD = $(SD_COMM_LIBS) $(SD_ENGINE_LIBS)
TESTS += tests/test-elastic-onnx.sh tests/test-elastic-ops.sh tests/test-elastic-adamw.sh tests/test-elastic-resume.sh tests/test-elastic-resume-stream.sh tests/test-elastic-protocol.sh tests/test-spotdeck-bad-input.sh tests/test-controller-listen.sh
EXTRA_DIST += tests/test-elastic-onnx.sh tests/test-elastic-ops.sh tests/test-elastic-adamw.sh tests/test-elastic-resume.sh tests/test-elastic-resume-stream.sh tests/test-elastic-protocol.sh tests/test-spotdeck-bad-input.sh tests/test-controller-listen.sh
TESTS += tests/test-sim-market.sh
EXTRA_DIST += tests/test-sim-market.sh
TESTS += tests/test-sim-trace.sh
EXTRA_DIST += tests/test-sim-trace.sh
# Over-long command lines on headless stdin.
TESTS += tests/test-headless-stdin.sh
EXTRA_DIST += tests/test-headless-stdin.sh
# A swap whose replacement ends before it trains frees its slot.
TESTS += tests/test-swap-pending.sh
EXTRA_DIST += tests/test-swap-pending.sh
TESTS += tests/test-autopilot-live.sh
EXTRA_DIST += tests/test-autopilot-live.sh
# A journal that cannot be written (full disk) is said once; the run goes on.
TESTS += tests/test-journal-full.sh
EXTRA_DIST += tests/test-journal-full.sh
# Extra command arguments are refused with the usage.
TESTS += tests/test-command-args.sh
EXTRA_DIST += tests/test-command-args.sh
# Issue 9: a silent worker, a bad joiner, the journal's steps.
TESTS += tests/test-elastic-silent.sh tests/test-elastic-bad-joiner.sh tests/test-elastic-journal.sh \
	tests/test-elastic-adopted-step.sh tests/test-elastic-buckets.sh
EXTRA_DIST += tests/test-elastic-silent.sh tests/test-elastic-bad-joiner.sh tests/test-elastic-journal.sh \
	tests/test-elastic-adopted-step.sh tests/test-elastic-buckets.sh
# Each generation's slices tile the global batch and every sample of an
# epoch is trained once across re-forms (the workers' SD_TEST_SAMPLE_LOG).
TESTS += tests/test-elastic-samples.sh
EXTRA_DIST += tests/test-elastic-samples.sh
# Issue 12: the worker's cloud preemption-notice watcher against a fake of
# the three metadata services.
TESTS += tests/test-worker-notice.sh
EXTRA_DIST += tests/test-worker-notice.sh tests/fake-metadata.py
# A worker that re-executes itself for OpenBLAS's kernel keeps its name.
TESTS += tests/test-worker-exec-name.sh
EXTRA_DIST += tests/test-worker-exec-name.sh
