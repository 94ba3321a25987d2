# tests/sigv4.mk: AWS Signature Version 4 (src/provider/sigv4.c): its unit
# test (the AWS documentation's example, encodings, errors) and the same
# signer checked against botocore's SigV4Auth on EC2 requests.
check_PROGRAMS += tests/test-sigv4
TESTS += tests/test-sigv4 tests/test-sigv4-botocore.sh
EXTRA_DIST += tests/test-sigv4-botocore.sh

# Built from the source rather than libsdprovider.a, so that the test links
# libcrypto and nothing else of the provider layer.
tests_test_sigv4_SOURCES = tests/test-sigv4.c tests/check.h src/provider/sigv4.c src/provider/sigv4.h
tests_test_sigv4_CPPFLAGS = $(AM_CPPFLAGS) $(CRYPTO_CFLAGS)
tests_test_sigv4_LDADD = $(CRYPTO_LIBS)
