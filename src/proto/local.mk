# src/proto/: the control-plane wire protocol (protocol.*) and the job file
# (job.*), with their unit tests and fuzzers.  Includes base/ and engine/
# (the training settings a job file carries).
noinst_LIBRARIES += src/proto/libsdproto.a
src_proto_libsdproto_a_SOURCES = src/proto/protocol.c src/proto/protocol.h src/proto/job.c src/proto/job.h \
	src/proto/events.c src/proto/events.h
src_proto_libsdproto_a_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS) $(OPENBLAS_CFLAGS)
# What a program using the protocol or the job file links (with $(SD_ENGINE_LIBS)).
SD_PROTO_LIBS = src/proto/libsdproto.a $(SD_BASE_LIBS)

check_PROGRAMS += tests/test-protocol tests/test-job tests/fuzz/fuzz-protocol tests/fuzz/fuzz-job
TESTS += tests/test-protocol tests/test-job tests/fuzz/fuzz-protocol tests/fuzz/fuzz-job

tests_test_protocol_SOURCES = tests/test-protocol.c
tests_test_protocol_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS)
tests_test_protocol_LDADD = $(SD_PROTO_LIBS) $(SD_ENGINE_LIBS)

tests_test_job_SOURCES = tests/test-job.c
tests_test_job_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS) $(OPENBLAS_CFLAGS)
tests_test_job_LDADD = $(SD_PROTO_LIBS) $(SD_ENGINE_LIBS)

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
check_PROGRAMS += tests/test-events
TESTS += tests/test-events
tests_test_events_SOURCES = tests/test-events.c tests/check.h
tests_test_events_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS)
tests_test_events_LDADD = $(SD_PROTO_LIBS) $(SD_ENGINE_LIBS)
