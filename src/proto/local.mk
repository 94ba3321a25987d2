# src/proto/: the control-plane wire protocol (protocol.*) and the job file
# (job.*), with their unit tests and fuzzers.  Includes base/ and engine/
# (the training settings a job file carries).
noinst_LIBRARIES += src/proto/libsdproto.a
src_proto_libsdproto_a_SOURCES = src/proto/protocol.c src/proto/protocol.h src/proto/job.c src/proto/job.h \
	src/proto/events.c src/proto/events.h
src_proto_libsdproto_a_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS) $(OPENBLAS_CFLAGS)
# What a program using the protocol or the job file links (with $(SD_ENGINE_LIBS)).
SD_PROTO_LIBS = src/proto/libsdproto.a $(SD_BASE_LIBS)
