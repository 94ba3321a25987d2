# tests/provider/aws/local.mk: AWS EC2 (src/provider/aws/) against the fakes in tests/fake-cloud/.
# The EC2 Query API's XML answers the aws provider reads
# (src/provider/aws/aws-api.c), in the shapes AWS documents.
check_PROGRAMS += tests/provider/aws/test-aws-api
TESTS += tests/provider/aws/test-aws-api
tests_provider_aws_test_aws_api_SOURCES = tests/provider/aws/test-aws-api.c tests/check.h
tests_provider_aws_test_aws_api_LDADD = $(SD_PROVIDER_LIBS)
# The AWS credential chain (src/provider/aws/aws-creds.c): environment, shared
# credentials and config files, profiles, refusals; and the same chain
# against botocore's on the same files and variables.
check_PROGRAMS += tests/provider/aws/test-aws-creds
TESTS += tests/provider/aws/test-aws-creds tests/provider/aws/test-aws-creds-botocore.sh
EXTRA_DIST += tests/provider/aws/test-aws-creds-botocore.sh
tests_provider_aws_test_aws_creds_SOURCES = tests/provider/aws/test-aws-creds.c tests/check.h tests/tmpdir.h \
	src/provider/aws/aws-creds.c src/provider/aws/aws-creds.h src/provider/http/secret-file.c src/provider/http/secret-file.h
tests_provider_aws_test_aws_creds_CPPFLAGS = $(AM_CPPFLAGS) $(CRYPTO_CFLAGS) $(INIH_CFLAGS) $(CJSON_CFLAGS)
tests_provider_aws_test_aws_creds_LDADD = $(CRYPTO_LIBS) $(INIH_LIBS) $(CJSON_LIBS)
# tests/fake-cloud/ec2.py fakes the EC2 Query API (SigV4-checked) and IMDSv2;
# tests/provider/aws/test-fake-ec2.sh checks it with botocore-signed requests.
TESTS += tests/provider/aws/test-fake-ec2.sh
EXTRA_DIST += tests/provider/aws/test-fake-ec2.sh
# spotdeck doctor --provider aws against the fake EC2.
TESTS += tests/provider/aws/test-aws-doctor.sh
EXTRA_DIST += tests/provider/aws/test-aws-doctor.sh
# The aws provider end to end: Spot instances with a real sshd each (ec2.py
# --vm-sshd, the key from the launch's cloud-config), a lost RunInstances
# answer, an interruption, InsufficientInstanceCapacity, the money.
TESTS += tests/provider/aws/test-aws-train.sh
EXTRA_DIST += tests/provider/aws/test-aws-train.sh
# An interrupted instance told from a crashed one: by the worker's IMDS
# notice, the stateReason, or a bounded wait when it is gone unexplained.
TESTS += tests/provider/aws/test-aws-preempt.sh
EXTRA_DIST += tests/provider/aws/test-aws-preempt.sh
# A killed controller's instances found by the run's tag and terminated on --resume.
TESTS += tests/provider/aws/test-aws-orphans.sh
EXTRA_DIST += tests/provider/aws/test-aws-orphans.sh
