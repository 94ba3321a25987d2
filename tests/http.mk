# tests/http.mk: HTTP on the controller's loop (src/provider/http.c, issue
# 13), checked against tests/fake-cloud/faults.py by tests/test-http.sh.
check_PROGRAMS += tests/test-http
TESTS += tests/test-http.sh
EXTRA_DIST += tests/test-http.sh tests/fake-cloud/faults.py

tests_test_http_SOURCES = tests/test-http.c tests/check.h
tests_test_http_CPPFLAGS = $(AM_CPPFLAGS) $(UV_CFLAGS) $(CURL_CFLAGS) $(CJSON_CFLAGS)
tests_test_http_LDADD = $(SD_PROVIDER_LIBS) $(UV_LIBS) $(CURL_LIBS) $(CJSON_LIBS)
