# tests/gpu.mk: the CUDA backend.  test-backend checks everything that runs
# without a GPU (in make check); tests/gpu/ holds what needs one
# (tests/gpu/run.sh, run on a GPU host from the bundle tests/gpu/pack.sh makes).
check_PROGRAMS += tests/test-backend
TESTS += tests/test-backend
tests_test_backend_SOURCES = tests/test-backend.c tests/check.h tests/tmpdir.h
tests_test_backend_CPPFLAGS = $(AM_CPPFLAGS) $(OPENBLAS_CFLAGS)
tests_test_backend_LDADD = $(SD_COMM_LIBS) $(SD_ENGINE_LIBS)
nodist_EXTRA_tests_test_backend_SOURCES = dummy.cxx
if HAVE_CUDA
tests_test_backend_CPPFLAGS += -DSD_TEST_HAVE_PLUGIN
endif
if SANITIZERS
tests_test_backend_CPPFLAGS += -DSD_TEST_SANITIZERS
endif
