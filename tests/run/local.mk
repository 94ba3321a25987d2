# tests/run/local.mk: the tests of src/run/ (run directory lock, journal file, control socket).
# The lock, the journal file and base's atomic write, on a scratch
# directory.
check_PROGRAMS += tests/run/test-run-files
TESTS += tests/run/test-run-files
tests_run_test_run_files_SOURCES = tests/run/test-run-files.c tests/check.h tests/tmpdir.h
tests_run_test_run_files_CPPFLAGS = $(AM_CPPFLAGS)
tests_run_test_run_files_LDADD = $(SD_RUN_LIBS)
