# src/run/: what one run is on disk and on its socket, under the
# controller and the app that use it: the control socket's protocol
# (control-proto.h).  Includes proto/ and base/.
noinst_LIBRARIES += src/run/libsdrun.a
src_run_libsdrun_a_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS)
src_run_libsdrun_a_SOURCES = src/run/control-proto.c src/run/control-proto.h
SD_RUN_LIBS = src/run/libsdrun.a $(SD_BASE_LIBS)
