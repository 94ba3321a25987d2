# tests/fake-cloud.mk: the fake clouds the providers are tested against
# (real clouds are out of reach of the test machines).  tests/fake-cloud/
# gce.py fakes Compute Engine v1, its token endpoint, in-VM metadata and
# the billing catalog; tests/test-fake-gce.sh checks the fake itself.
TESTS += tests/test-fake-gce.sh
EXTRA_DIST += tests/test-fake-gce.sh tests/fake-cloud/gce.py tests/fake-cloud/fakevm.py
# spotdeck doctor --provider gce against the fake: key, token, quotas,
# zones, image, prices, and the ways a run could not start.
TESTS += tests/test-gce-doctor.sh
EXTRA_DIST += tests/test-gce-doctor.sh tests/fake-cloud/gce-env.sh
# A Spot VM's life on Compute Engine (src/provider/gce/gce-vm.c) against the fake.
check_PROGRAMS += tests/test-gce-vm
TESTS += tests/test-gce-vm.sh
EXTRA_DIST += tests/test-gce-vm.sh
tests_test_gce_vm_SOURCES = tests/test-gce-vm.c tests/check.h
tests_test_gce_vm_CPPFLAGS = $(AM_CPPFLAGS) $(UV_CFLAGS) $(CJSON_CFLAGS)
tests_test_gce_vm_LDADD = $(SD_PROVIDER_LIBS) $(UV_LIBS) $(CJSON_LIBS)
# The gce provider end to end: Spot VMs with a real sshd each (gce.py
# --vm-sshd), a preemption, a stockout, the workers trained over ssh.
TESTS += tests/test-gce-train.sh
EXTRA_DIST += tests/test-gce-train.sh tests/fake-cloud/gce-vms.sh tests/fake-cloud/gce_run.py
# A preempted VM told from a crashed one although the preempted operation
# comes late: by the worker's notice, the late operation, or a bounded wait.
TESTS += tests/test-gce-preempt.sh
EXTRA_DIST += tests/test-gce-preempt.sh
# A killed controller's VMs found by the run's label and deleted on --resume.
TESTS += tests/test-gce-orphans.sh
EXTRA_DIST += tests/test-gce-orphans.sh
# tests/fake-cloud/ec2.py fakes the EC2 Query API (SigV4-checked) and IMDSv2;
# tests/test-fake-ec2.sh checks it with botocore-signed requests.
TESTS += tests/test-fake-ec2.sh
EXTRA_DIST += tests/test-fake-ec2.sh tests/fake-cloud/ec2.py
# spotdeck doctor --provider aws against the fake EC2.
TESTS += tests/test-aws-doctor.sh
EXTRA_DIST += tests/test-aws-doctor.sh
# The aws provider end to end: Spot instances with a real sshd each (ec2.py
# --vm-sshd, the key from the launch's cloud-config), a lost RunInstances
# answer, an interruption, InsufficientInstanceCapacity, the money.
TESTS += tests/test-aws-train.sh
EXTRA_DIST += tests/test-aws-train.sh
EXTRA_DIST += tests/fake-cloud/ec2-vms.sh tests/fake-cloud/aws_run.py tests/fake-cloud/cloud_run.py
# An interrupted instance told from a crashed one: by the worker's IMDS
# notice, the stateReason, or a bounded wait when it is gone unexplained.
TESTS += tests/test-aws-preempt.sh
EXTRA_DIST += tests/test-aws-preempt.sh
# A killed controller's instances found by the run's tag and terminated on --resume.
TESTS += tests/test-aws-orphans.sh
EXTRA_DIST += tests/test-aws-orphans.sh
# The cockpit's keypress to screen with 200 EC2 requests in flight (make bench).
EXTRA_DIST += tests/bench/cloud-cockpit-bench
# The calibrated market's revocation model on the cloud providers' offers
# (src/provider/cloud-vm.c).
check_PROGRAMS += tests/test-cloud-model
TESTS += tests/test-cloud-model
tests_test_cloud_model_SOURCES = tests/test-cloud-model.c tests/check.h
tests_test_cloud_model_CPPFLAGS = $(AM_CPPFLAGS) $(UV_CFLAGS) $(CJSON_CFLAGS)
tests_test_cloud_model_LDADD = $(SD_APP_LIBS) $(SD_CONTROLLER_LIBS) $(SD_PROVIDER_LIBS) $(SD_UI_LIBS) \
	$(SD_PROTO_LIBS) $(SD_MARKET_LIBS) $(SD_ENGINE_LIBS) $(UV_LIBS)
