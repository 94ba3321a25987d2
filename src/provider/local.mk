# src/provider/: where servers come from — provider.h and the simulated
# market's provider (provider-sim.c: catalog offers, revocations, stockouts,
# local worker processes).  Includes market/ and engine/.
noinst_LIBRARIES += src/provider/libsdprovider.a
src_provider_libsdprovider_a_SOURCES = src/provider/provider.h src/provider/provider-sim.c
src_provider_libsdprovider_a_CPPFLAGS = $(AM_CPPFLAGS) $(UV_CFLAGS) $(CJSON_CFLAGS)
SD_PROVIDER_LIBS = src/provider/libsdprovider.a
