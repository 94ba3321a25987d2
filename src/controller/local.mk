# src/controller/: the elastic controller on libuv, one job per file (see
# internal.h): worker connections and messages, rendezvous store,
# generations and liveness, checkpoint sink and resume streams, commands,
# run directory, journal, life cycle, the live autopilot.  Includes
# provider/, market/ (the autopilot's policy), proto/, engine/.
noinst_LIBRARIES += src/controller/libsdcontroller.a
src_controller_libsdcontroller_a_SOURCES = src/controller/controller.h src/controller/internal.h \
	src/controller/controller.c src/controller/rundir.c src/controller/journal.c src/controller/store.c src/controller/conn.c \
	src/controller/generation.c src/controller/checkpoint.c src/controller/commands.c \
	src/controller/autopilot.c
src_controller_libsdcontroller_a_CPPFLAGS = $(AM_CPPFLAGS) $(UV_CFLAGS) $(CJSON_CFLAGS)
SD_CONTROLLER_LIBS = src/controller/libsdcontroller.a $(SD_RUN_LIBS)
