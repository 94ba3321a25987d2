# src/: programs' mains, controller, protocol, providers.
bin_PROGRAMS += spotdeck-worker spotdeck
spotdeck_worker_SOURCES = src/worker-main.c src/worker-agent.c src/worker-agent.h
spotdeck_worker_CPPFLAGS = $(AM_CPPFLAGS) $(OPENBLAS_CFLAGS) $(CJSON_CFLAGS)
spotdeck_worker_LDADD = $(SD_PROTO_LIBS) $(SD_COMM_LIBS) $(SD_ENGINE_LIBS)

spotdeck_SOURCES = src/main.c src/controller.c src/controller.h src/provider.h src/provider-sim.c \
	src/view-model.c src/view-model.h src/plan-cli.c src/plan-cli.h \
	src/whatif.c src/whatif.h src/whatif-run.c
spotdeck_CPPFLAGS = $(AM_CPPFLAGS) $(UV_CFLAGS) $(CJSON_CFLAGS)
spotdeck_LDADD = $(SD_UI_LIBS) $(SD_PROTO_LIBS) $(SD_TRACE_LIBS) $(SD_MARKET_LIBS) $(SD_ENGINE_LIBS) $(UV_LIBS)
include src/proto.mk
include src/trace.mk
