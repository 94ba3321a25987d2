# src/run/: what one run is on disk and on its socket, under the
# controller that writes it and the app that serves and reads it: the
# directory's lock (run-lock.h), the journal file's opening and whole-line
# appends (journal-file.h), the control socket's protocol
# (control-proto.h) and its server on the run's loop (control-server.h; the
# view it sends is the program's, a JSON object here).  Includes proto/ and
# base/.
noinst_LIBRARIES += src/run/libsdrun.a
src_run_libsdrun_a_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS) $(UV_CFLAGS)
src_run_libsdrun_a_SOURCES = src/run/control-proto.c src/run/control-proto.h \
	src/run/run-lock.c src/run/run-lock.h \
	src/run/journal-file.c src/run/journal-file.h \
	src/run/control-server.c src/run/control-server.h
SD_RUN_LIBS = src/run/libsdrun.a $(UV_LIBS) $(SD_BASE_LIBS)
