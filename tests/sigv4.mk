# tests/sigv4.mk: AWS Signature Version 4 (src/provider/http/sigv4.c): its unit
# test (the AWS documentation's example, encodings, errors) and the same
# signer checked against botocore's SigV4Auth on EC2 requests.
check_PROGRAMS += tests/test-sigv4
TESTS += tests/test-sigv4 tests/test-sigv4-botocore.sh
EXTRA_DIST += tests/test-sigv4-botocore.sh

# Built from the source rather than libsdprovider.a, so that the test links
# libcrypto and nothing else of the provider layer.
tests_test_sigv4_SOURCES = tests/test-sigv4.c tests/check.h src/provider/http/sigv4.c src/provider/http/sigv4.h\
	src/provider/http/secret-file.c src/provider/http/secret-file.h
tests_test_sigv4_CPPFLAGS = $(AM_CPPFLAGS) $(CRYPTO_CFLAGS)
tests_test_sigv4_LDADD = $(CRYPTO_LIBS)

# The AWS credential chain (src/provider/aws/aws-creds.c): environment, shared
# credentials and config files, profiles, refusals; and the same chain
# against botocore's on the same files and variables.
check_PROGRAMS += tests/test-aws-creds
TESTS += tests/test-aws-creds tests/test-aws-creds-botocore.sh
EXTRA_DIST += tests/test-aws-creds-botocore.sh
tests_test_aws_creds_SOURCES = tests/test-aws-creds.c tests/check.h tests/tmpdir.h \
	src/provider/aws/aws-creds.c src/provider/aws/aws-creds.h src/provider/http/secret-file.c src/provider/http/secret-file.h
tests_test_aws_creds_CPPFLAGS = $(AM_CPPFLAGS) $(CRYPTO_CFLAGS) $(INIH_CFLAGS) $(CJSON_CFLAGS)
tests_test_aws_creds_LDADD = $(CRYPTO_LIBS) $(INIH_LIBS) $(CJSON_LIBS)
