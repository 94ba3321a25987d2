# tests/provider/http/local.mk: the HTTP client and request signing the clouds use (src/provider/http/).
# What the cloud providers stand on: HTTP on the
# controller's loop (src/provider/http/http.c), checked against
# tests/fake-cloud/faults.py by tests/provider/http/test-http.sh, and the clouds' bodies.
check_PROGRAMS += tests/provider/http/test-http
TESTS += tests/provider/http/test-http.sh
EXTRA_DIST += tests/provider/http/test-http.sh
tests_provider_http_test_http_SOURCES = tests/provider/http/test-http.c tests/check.h
tests_provider_http_test_http_CPPFLAGS = $(AM_CPPFLAGS) $(UV_CFLAGS) $(CURL_CFLAGS) $(CJSON_CFLAGS)
tests_provider_http_test_http_LDADD = $(SD_PROVIDER_LIBS) $(UV_LIBS) $(CURL_LIBS) $(CJSON_LIBS)

# test (the AWS documentation's example, encodings, errors) and the same
# signer checked against botocore's SigV4Auth on EC2 requests.
check_PROGRAMS += tests/provider/http/test-sigv4
TESTS += tests/provider/http/test-sigv4 tests/provider/http/test-sigv4-botocore.sh
EXTRA_DIST += tests/provider/http/test-sigv4-botocore.sh

# Built from the source rather than libsdprovider.a, so that the test links
# libcrypto and nothing else of the provider layer.
tests_provider_http_test_sigv4_SOURCES = tests/provider/http/test-sigv4.c tests/check.h src/provider/http/sigv4.c src/provider/http/sigv4.h\
	src/provider/http/secret-file.c src/provider/http/secret-file.h
tests_provider_http_test_sigv4_CPPFLAGS = $(AM_CPPFLAGS) $(CRYPTO_CFLAGS)
tests_provider_http_test_sigv4_LDADD = $(CRYPTO_LIBS)
