# tests/gce-auth.mk: GCE service-account credentials (src/provider/gce/gce-auth.c):
# the C unit test (runs without Python) and the script that checks the
# JWT assertion with an independent implementation, PyJWT.  The C program
# is built from the module's source alone, so it needs no other library of
# ours and the script can use it as a JWT signer.  The script is not named
# test-gce-auth.sh: with TEST_EXTENSIONS = .sh its log would be
# tests/test-gce-auth.log, the C test's, and only one of the two would run.
check_PROGRAMS += tests/test-gce-auth
TESTS += tests/test-gce-auth tests/test-gce-auth-pyjwt.sh
EXTRA_DIST += tests/test-gce-auth-pyjwt.sh

tests_test_gce_auth_SOURCES = tests/test-gce-auth.c src/provider/gce/gce-auth.c src/provider/gce/gce-auth.h \
	src/provider/http/secret-file.c src/provider/http/secret-file.h \
	tests/check.h tests/tmpdir.h
tests_test_gce_auth_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS) $(CRYPTO_CFLAGS)
tests_test_gce_auth_LDADD = $(CJSON_LIBS) $(CRYPTO_LIBS)
