# tests/comm.mk: collectives (engine/comm.*): forked ranks on loopback.
check_PROGRAMS += tests/test-comm
TESTS += tests/test-comm

tests_test_comm_SOURCES = tests/test-comm.c tests/tmpdir.h
tests_test_comm_LDADD = $(SD_COMM_LIBS) $(SD_ENGINE_LIBS)
tests_test_comm_LDFLAGS = $(AM_LDFLAGS) $(SD_COMM_LINK_FLAGS)
# The Gloo backend is C++: link with the C++ driver so its runtime comes along
# in the right order (the .cxx file never exists and is never compiled; it
# only tells automake which linker to use).
nodist_EXTRA_tests_test_comm_SOURCES = dummy.cxx

# All-reduce bandwidth on loopback against memcpy; run by hand or `make bench`.
noinst_PROGRAMS += tests/bench/bench-allreduce
tests_bench_bench_allreduce_SOURCES = tests/bench/bench-allreduce.c tests/bench/bench.h
tests_bench_bench_allreduce_LDADD = $(SD_COMM_LIBS) $(SD_ENGINE_LIBS)
tests_bench_bench_allreduce_LDFLAGS = $(AM_LDFLAGS) $(SD_COMM_LINK_FLAGS)
nodist_EXTRA_tests_bench_bench_allreduce_SOURCES = dummy.cxx
