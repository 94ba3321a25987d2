# src/market/: the market, no libuv — catalogs of offers (cJSON), the market
# model and simulation core, market traces (scripted revocations, stockouts,
# prices and commands of a deterministic simulated-market run), the
# replacement scorer and the cost/speed planner.  Shared by the simulator
# provider, the what-if dialog and `spotdeck plan`; includes only base/
# (errors, rng, JSON checks), not the engine.  Programs link
# $(SD_MARKET_LIBS).
noinst_LIBRARIES += src/market/libsdmarket.a
src_market_libsdmarket_a_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS)
src_market_libsdmarket_a_SOURCES = \
	src/market/catalog.c src/market/catalog.h \
	src/market/market-model.c src/market/market-model.h \
	src/market/replacement.c src/market/replacement.h \
	src/market/planner.c src/market/planner.h \
	src/market/trace.c src/market/trace.h \
	src/market/autopilot.c src/market/autopilot.h
SD_MARKET_LIBS = src/market/libsdmarket.a $(SD_BASE_LIBS)
# A program that reads traces only links the same library.
SD_TRACE_LIBS = $(SD_MARKET_LIBS)
