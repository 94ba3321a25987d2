# src/trace.mk: market trace files (src/trace.*), the scripted revocations,
# stockouts, prices and operator commands of a deterministic simulated-market
# run, with their unit test and fuzzer.
noinst_LIBRARIES += src/libsdtrace.a
src_libsdtrace_a_SOURCES = src/trace.c src/trace.h
src_libsdtrace_a_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS)
# What a program reading traces links (with $(SD_ENGINE_LIBS), for errors.c).
SD_TRACE_LIBS = src/libsdtrace.a $(CJSON_LIBS)

check_PROGRAMS += tests/test-trace tests/fuzz/fuzz-trace
TESTS += tests/test-trace tests/fuzz/fuzz-trace

tests_test_trace_SOURCES = tests/test-trace.c
tests_test_trace_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS)
tests_test_trace_LDADD = $(SD_TRACE_LIBS) $(SD_ENGINE_LIBS)

# A plain program replaying deterministic mutations under `make check`; see
# the file for the libFuzzer build.
tests_fuzz_fuzz_trace_SOURCES = tests/fuzz/fuzz-trace.c
tests_fuzz_fuzz_trace_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS)
tests_fuzz_fuzz_trace_LDADD = $(SD_TRACE_LIBS) $(SD_ENGINE_LIBS)
