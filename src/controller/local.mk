# src/controller/: the elastic controller on libuv — worker connections,
# rendezvous store, generations and batch split, checkpoints, journal,
# commands, run directory and resume.  Includes provider/, proto/, engine/.
noinst_LIBRARIES += src/controller/libsdcontroller.a
src_controller_libsdcontroller_a_SOURCES = src/controller/controller.c src/controller/controller.h
src_controller_libsdcontroller_a_CPPFLAGS = $(AM_CPPFLAGS) $(UV_CFLAGS) $(CJSON_CFLAGS)
SD_CONTROLLER_LIBS = src/controller/libsdcontroller.a
