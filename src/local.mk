# src/: programs' mains, controller, protocol, providers.
bin_PROGRAMS += spotdeck-worker
spotdeck_worker_SOURCES = src/worker-main.c
spotdeck_worker_CPPFLAGS = $(AM_CPPFLAGS) $(OPENBLAS_CFLAGS) $(CJSON_CFLAGS)
spotdeck_worker_LDADD = $(SD_ENGINE_LIBS)
include src/proto.mk
