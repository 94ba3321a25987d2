# src/market.mk: market model, catalogs, sim provider.
# libsdmarket.a: catalog loader (cJSON), the market model/simulation core and
# the what-if planner (Monte Carlo over the market model).
# It needs engine/errors.c and engine/rng.c from the engine library.
noinst_LIBRARIES += src/libsdmarket.a
src_libsdmarket_a_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS)
src_libsdmarket_a_SOURCES = \
	src/catalog.c src/catalog.h \
	src/market-model.c src/market-model.h \
	src/replacement.c src/replacement.h \
	src/planner.c src/planner.h
# Link programs using the market with $(SD_MARKET_LIBS) $(SD_ENGINE_LIBS).
SD_MARKET_LIBS = src/libsdmarket.a $(CJSON_LIBS)
