# src/: the two programs' mains, over the layers in the folders below (each
# with its own local.mk and library; tests/layers.txt says which may include
# which, tests/test-include-layers.sh checks it).  From the bottom:
#   base/        errors, allocation, PRNG, JSON helpers (included from
#                Makefile.am before engine/, which uses it too)
#   proto/       wire protocol and job file
#   market/      catalogs, market model, traces, replacement scorer, planner
#   worker/      the worker agent (spotdeck-worker)
#   provider/    where servers come from (the simulator today)
#   run/         a run's directory, lock and control socket protocol
#   controller/  the elastic controller
#   app/         view model, what-if, `spotdeck plan`
include src/proto/local.mk
include src/market/local.mk
include src/worker/local.mk
include src/provider/local.mk
include src/run/local.mk
include src/controller/local.mk
include src/app/local.mk

bin_PROGRAMS += spotdeck-worker spotdeck
spotdeck_worker_SOURCES = src/worker-main.c
spotdeck_worker_CPPFLAGS = $(AM_CPPFLAGS) $(OPENBLAS_CFLAGS) $(CJSON_CFLAGS)
spotdeck_worker_LDADD = $(SD_WORKER_LIBS) $(SD_PROTO_LIBS) $(SD_COMM_LIBS) $(SD_ENGINE_LIBS)

spotdeck_SOURCES = src/main.c
spotdeck_CPPFLAGS = $(AM_CPPFLAGS) $(UV_CFLAGS) $(CJSON_CFLAGS)
spotdeck_LDADD = $(SD_APP_LIBS) $(SD_CONTROLLER_LIBS) $(SD_PROVIDER_LIBS) $(SD_UI_LIBS) \
	$(SD_PROTO_LIBS) $(SD_MARKET_LIBS) $(SD_ENGINE_LIBS) $(UV_LIBS)
