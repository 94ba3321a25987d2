# tests/controller/local.mk: the controller (src/controller/): elastic generations, faults, resume, journal, the live autopilot.
# The example ResNet-18 through a killed worker and a killed controller.
TESTS += tests/controller/test-elastic-onnx-resnet.sh
EXTRA_DIST += tests/controller/test-elastic-onnx-resnet.sh
TESTS += tests/controller/test-elastic-accuracy.sh tests/controller/test-elastic-fault.sh \
	tests/controller/test-elastic-pin.sh tests/controller/test-elastic-min-workers.sh
EXTRA_DIST += tests/controller/test-elastic-accuracy.sh tests/controller/test-elastic-fault.sh \
	tests/controller/soak-kill.sh tests/controller/test-elastic-pin.sh \
	tests/controller/test-elastic-min-workers.sh

TESTS += tests/controller/test-elastic-onnx.sh tests/controller/test-elastic-ops.sh \
	tests/controller/test-elastic-resume.sh tests/controller/test-elastic-resume-stream.sh \
	tests/controller/test-elastic-protocol.sh tests/controller/test-controller-listen.sh
EXTRA_DIST += tests/controller/test-elastic-onnx.sh tests/controller/test-elastic-ops.sh \
	tests/controller/test-elastic-resume.sh tests/controller/test-elastic-resume-stream.sh \
	tests/controller/test-elastic-protocol.sh tests/controller/test-controller-listen.sh
# A swap whose replacement ends before it trains frees its slot.
TESTS += tests/controller/test-swap-pending.sh
EXTRA_DIST += tests/controller/test-swap-pending.sh
TESTS += tests/controller/test-autopilot-live.sh
EXTRA_DIST += tests/controller/test-autopilot-live.sh
# The live autopilot's time and cost within the planner's p10-p90 band.
TESTS += tests/controller/test-autopilot-band.sh
EXTRA_DIST += tests/controller/test-autopilot-band.sh
# A journal that cannot be written (full disk) is said once; the run goes on.
TESTS += tests/controller/test-journal-full.sh
EXTRA_DIST += tests/controller/test-journal-full.sh
# A silent worker, a bad joiner, the journal's steps.
TESTS += tests/controller/test-elastic-silent.sh tests/controller/test-elastic-bad-joiner.sh \
	tests/controller/test-elastic-journal.sh tests/controller/test-elastic-adopted-step.sh \
	tests/controller/test-elastic-buckets.sh
EXTRA_DIST += tests/controller/test-elastic-silent.sh tests/controller/test-elastic-bad-joiner.sh \
	tests/controller/test-elastic-journal.sh tests/controller/test-elastic-adopted-step.sh \
	tests/controller/test-elastic-buckets.sh
# Each generation's slices tile the global batch and every sample of an
# epoch is trained once across re-forms (the workers' SD_TEST_SAMPLE_LOG).
TESTS += tests/controller/test-elastic-samples.sh
EXTRA_DIST += tests/controller/test-elastic-samples.sh

# A worker joining an AdamW run gets both moments; checksums stay equal.
TESTS += tests/controller/test-elastic-adamw.sh
EXTRA_DIST += tests/controller/test-elastic-adamw.sh
# The example char-GPT (small) through a killed worker, a killed controller
# and a --resume refused for a model file exported again.
TESTS += tests/controller/test-elastic-gpt.sh
EXTRA_DIST += tests/controller/test-elastic-gpt.sh
# The job's precision: auto's pick journaled in worker_ready/worker_joined,
# a bf16 checkpoint resumed in fp32 and back.
TESTS += tests/controller/test-elastic-bf16.sh
EXTRA_DIST += tests/controller/test-elastic-bf16.sh
# A --resume on other data (.npy files written again, job.json pointed
# elsewhere) is refused, naming both files' SHA-256s.
TESTS += tests/controller/test-resume-data.sh
EXTRA_DIST += tests/controller/test-resume-data.sh
