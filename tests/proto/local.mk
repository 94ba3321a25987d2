# tests/proto/local.mk: the tests of src/proto/ (the worker protocol, the job file, the typed events).
check_PROGRAMS += tests/proto/test-protocol tests/proto/test-job tests/fuzz/fuzz-protocol tests/fuzz/fuzz-job
TESTS += tests/proto/test-protocol tests/proto/test-job tests/fuzz/fuzz-protocol tests/fuzz/fuzz-job

tests_proto_test_protocol_SOURCES = tests/proto/test-protocol.c
tests_proto_test_protocol_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS)
tests_proto_test_protocol_LDADD = $(SD_PROTO_LIBS) $(SD_ENGINE_LIBS)

tests_proto_test_job_SOURCES = tests/proto/test-job.c
tests_proto_test_job_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS) $(OPENBLAS_CFLAGS)
tests_proto_test_job_LDADD = $(SD_PROTO_LIBS) $(SD_ENGINE_LIBS)

# The fuzzers run as tests over built-in corpora with deterministic
# mutations.  For coverage-guided runs build them with clang, e.g.
#   clang -DSD_LIBFUZZER -fsanitize=fuzzer,address,undefined -I. -I/usr/include/cjson \
#     tests/fuzz/fuzz-protocol.c src/proto/protocol.c src/base/*.c -lcjson -lm
tests_fuzz_fuzz_protocol_SOURCES = tests/fuzz/fuzz-protocol.c tests/fuzz/mutate.h
tests_fuzz_fuzz_protocol_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS)
tests_fuzz_fuzz_protocol_LDADD = $(SD_PROTO_LIBS) $(SD_ENGINE_LIBS)

tests_fuzz_fuzz_job_SOURCES = tests/fuzz/fuzz-job.c tests/fuzz/mutate.h
tests_fuzz_fuzz_job_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS) $(OPENBLAS_CFLAGS)
tests_fuzz_fuzz_job_LDADD = $(SD_PROTO_LIBS) $(SD_ENGINE_LIBS)

# The journal's event types: named, distinct, documented in spotdeck(1).
check_PROGRAMS += tests/proto/test-events
TESTS += tests/proto/test-events
tests_proto_test_events_SOURCES = tests/proto/test-events.c tests/check.h
tests_proto_test_events_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS)
tests_proto_test_events_LDADD = $(SD_PROTO_LIBS) $(SD_ENGINE_LIBS)
