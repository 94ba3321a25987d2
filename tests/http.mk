# tests/http.mk: what the cloud providers stand on: HTTP on the
# controller's loop (src/provider/http/http.c), checked against
# tests/fake-cloud/faults.py by tests/test-http.sh, and the clouds' bodies.
check_PROGRAMS += tests/test-http
TESTS += tests/test-http.sh
EXTRA_DIST += tests/test-http.sh tests/fake-cloud/faults.py

tests_test_http_SOURCES = tests/test-http.c tests/check.h
tests_test_http_CPPFLAGS = $(AM_CPPFLAGS) $(UV_CFLAGS) $(CURL_CFLAGS) $(CJSON_CFLAGS)
tests_test_http_LDADD = $(SD_PROVIDER_LIBS) $(UV_LIBS) $(CURL_LIBS) $(CJSON_LIBS)

# The Compute Engine v1 bodies the gce provider builds and reads
# (src/provider/gce/gce-api.c), against the shapes Google documents.
check_PROGRAMS += tests/test-gce-api
TESTS += tests/test-gce-api
tests_test_gce_api_SOURCES = tests/test-gce-api.c tests/check.h
tests_test_gce_api_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS)
tests_test_gce_api_LDADD = $(SD_PROVIDER_LIBS) $(CJSON_LIBS)

# The EC2 Query API's XML answers the aws provider reads
# (src/provider/aws/aws-api.c), in the shapes AWS documents.
check_PROGRAMS += tests/test-gce-price
TESTS += tests/test-gce-price
tests_test_gce_price_SOURCES = tests/test-gce-price.c tests/check.h
tests_test_gce_price_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS)
tests_test_gce_price_LDADD = $(SD_PROVIDER_LIBS) $(CJSON_LIBS) -lm
check_PROGRAMS += tests/test-ec2-api
TESTS += tests/test-ec2-api
tests_test_ec2_api_SOURCES = tests/test-ec2-api.c tests/check.h
tests_test_ec2_api_LDADD = $(SD_PROVIDER_LIBS)
