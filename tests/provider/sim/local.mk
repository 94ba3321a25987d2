# tests/provider/sim/local.mk: the simulated market provider (src/provider/sim/).
TESTS += tests/provider/sim/test-sim-market.sh
EXTRA_DIST += tests/provider/sim/test-sim-market.sh
TESTS += tests/provider/sim/test-sim-trace.sh
EXTRA_DIST += tests/provider/sim/test-sim-trace.sh
# A market price change moves the sim provider's price now and leaves the
# catalog as loaded.
check_PROGRAMS += tests/provider/sim/test-provider-price
TESTS += tests/provider/sim/test-provider-price
tests_provider_sim_test_provider_price_SOURCES = tests/provider/sim/test-provider-price.c tests/check.h
tests_provider_sim_test_provider_price_CPPFLAGS = $(AM_CPPFLAGS) $(UV_CFLAGS) $(CJSON_CFLAGS)
tests_provider_sim_test_provider_price_LDADD = $(SD_PROVIDER_LIBS) $(SD_PROTO_LIBS) $(SD_TRACE_LIBS) $(SD_MARKET_LIBS) $(SD_ENGINE_LIBS) $(UV_LIBS)
