# tests/provider/gce/local.mk: Google Compute Engine (src/provider/gce/) against the fakes in tests/fake-cloud/.
# The Compute Engine v1 bodies the gce provider builds and reads
# (src/provider/gce/gce-api.c), against the shapes Google documents.
check_PROGRAMS += tests/provider/gce/test-gce-api
TESTS += tests/provider/gce/test-gce-api
tests_provider_gce_test_gce_api_SOURCES = tests/provider/gce/test-gce-api.c tests/check.h
tests_provider_gce_test_gce_api_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS)
tests_provider_gce_test_gce_api_LDADD = $(SD_PROVIDER_LIBS) $(CJSON_LIBS)

# The billing catalog's prices the gce provider reads (src/provider/gce/gce-price.c).
check_PROGRAMS += tests/provider/gce/test-gce-price
TESTS += tests/provider/gce/test-gce-price
tests_provider_gce_test_gce_price_SOURCES = tests/provider/gce/test-gce-price.c tests/check.h
tests_provider_gce_test_gce_price_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS)
tests_provider_gce_test_gce_price_LDADD = $(SD_PROVIDER_LIBS) $(CJSON_LIBS) -lm
# GCE service-account credentials (src/provider/gce/gce-auth.c):
# the C unit test (runs without Python) and the script that checks the
# JWT assertion with an independent implementation, PyJWT.  The C program
# is built from the module's source alone, so it needs no other library of
# ours and the script can use it as a JWT signer.  The script is not named
# test-gce-auth.sh: with TEST_EXTENSIONS = .sh its log would be
# tests/provider/gce/test-gce-auth.log, the C test's, and only one of the two would run.
check_PROGRAMS += tests/provider/gce/test-gce-auth
TESTS += tests/provider/gce/test-gce-auth tests/provider/gce/test-gce-auth-pyjwt.sh
EXTRA_DIST += tests/provider/gce/test-gce-auth-pyjwt.sh

tests_provider_gce_test_gce_auth_SOURCES = tests/provider/gce/test-gce-auth.c src/provider/gce/gce-auth.c src/provider/gce/gce-auth.h \
	src/provider/http/secret-file.c src/provider/http/secret-file.h \
	tests/check.h tests/tmpdir.h
tests_provider_gce_test_gce_auth_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS) $(CRYPTO_CFLAGS)
tests_provider_gce_test_gce_auth_LDADD = $(CJSON_LIBS) $(CRYPTO_LIBS)
# The fake clouds the providers are tested against
# (real clouds are out of reach of the test machines).  tests/fake-cloud/
# gce.py fakes Compute Engine v1, its token endpoint, in-VM metadata and
# the billing catalog; tests/provider/gce/test-fake-gce.sh checks the fake itself.
TESTS += tests/provider/gce/test-fake-gce.sh
EXTRA_DIST += tests/provider/gce/test-fake-gce.sh
# spotdeck doctor --provider gce against the fake: key, token, quotas,
# zones, image, prices, and the ways a run could not start.
TESTS += tests/provider/gce/test-gce-doctor.sh
EXTRA_DIST += tests/provider/gce/test-gce-doctor.sh
# A Spot VM's life on Compute Engine (src/provider/gce/gce-vm.c) against the fake.
check_PROGRAMS += tests/provider/gce/test-gce-vm
TESTS += tests/provider/gce/test-gce-vm.sh
EXTRA_DIST += tests/provider/gce/test-gce-vm.sh
tests_provider_gce_test_gce_vm_SOURCES = tests/provider/gce/test-gce-vm.c tests/check.h
tests_provider_gce_test_gce_vm_CPPFLAGS = $(AM_CPPFLAGS) $(UV_CFLAGS) $(CJSON_CFLAGS)
tests_provider_gce_test_gce_vm_LDADD = $(SD_PROVIDER_LIBS) $(UV_LIBS) $(CJSON_LIBS)
# The gce provider end to end: Spot VMs with a real sshd each (gce.py
# --vm-sshd), a preemption, a stockout, the workers trained over ssh.
TESTS += tests/provider/gce/test-gce-train.sh
EXTRA_DIST += tests/provider/gce/test-gce-train.sh
# A preempted VM told from a crashed one although the preempted operation
# comes late: by the worker's notice, the late operation, or a bounded wait.
TESTS += tests/provider/gce/test-gce-preempt.sh
EXTRA_DIST += tests/provider/gce/test-gce-preempt.sh
# A killed controller's VMs found by the run's label and deleted on --resume.
TESTS += tests/provider/gce/test-gce-orphans.sh
EXTRA_DIST += tests/provider/gce/test-gce-orphans.sh
