# tests/base/local.mk: the tests of src/base/ (the helpers every layer shares).
# Its tests link src/base alone, so base needs nothing above it: the shared
# JSON validator and describer, and the command input's way past an
# over-long line.
check_PROGRAMS += tests/base/test-base-json tests/base/test-line-skip tests/base/test-big-alloc
TESTS += tests/base/test-base-json tests/base/test-line-skip tests/base/test-big-alloc
tests_base_test_base_json_SOURCES = tests/base/test-base-json.c tests/check.h
tests_base_test_base_json_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS)
tests_base_test_base_json_LDADD = $(SD_BASE_LIBS) -lm
tests_base_test_line_skip_SOURCES = tests/base/test-line-skip.c tests/check.h
tests_base_test_line_skip_CPPFLAGS = $(AM_CPPFLAGS)
tests_base_test_line_skip_LDADD = $(SD_BASE_LIBS)
tests_base_test_big_alloc_SOURCES = tests/base/test-big-alloc.c tests/check.h
tests_base_test_big_alloc_CPPFLAGS = $(AM_CPPFLAGS)
tests_base_test_big_alloc_LDADD = $(SD_BASE_LIBS)
