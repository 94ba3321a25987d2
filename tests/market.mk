# tests/market.mk: catalog loader, market model calibration, catalog fuzzing,
# market benchmark.
MARKET_TESTS = tests/test-market-calibration tests/test-catalog tests/fuzz/fuzz-catalog tests/test-replacement
check_PROGRAMS += $(MARKET_TESTS)
TESTS += $(MARKET_TESTS)
noinst_PROGRAMS += tests/bench/bench-market

tests_test_market_calibration_SOURCES = tests/test-market-calibration.c tests/check.h
tests_test_market_calibration_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS)
tests_test_market_calibration_LDADD = $(SD_MARKET_LIBS) $(SD_ENGINE_LIBS)

tests_test_catalog_SOURCES = tests/test-catalog.c tests/check.h
tests_test_catalog_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS)
tests_test_catalog_LDADD = $(SD_MARKET_LIBS) $(SD_ENGINE_LIBS)

# The replacement scorer.
tests_test_replacement_SOURCES = tests/test-replacement.c tests/check.h
tests_test_replacement_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS)
tests_test_replacement_LDADD = $(SD_MARKET_LIBS) $(SD_ENGINE_LIBS)

# Built as a plain program with a main() that replays mutated catalogs;
# see the file for the libFuzzer build.
tests_fuzz_fuzz_catalog_SOURCES = tests/fuzz/fuzz-catalog.c tests/fuzz/mutate.h
tests_fuzz_fuzz_catalog_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS)
tests_fuzz_fuzz_catalog_LDADD = $(SD_MARKET_LIBS) $(SD_ENGINE_LIBS)

tests_bench_bench_market_SOURCES = tests/bench/bench-market.c tests/bench/bench.h
tests_bench_bench_market_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS)
tests_bench_bench_market_LDADD = $(SD_MARKET_LIBS) $(SD_ENGINE_LIBS)

# A market price change moves the sim provider's price now and leaves the
# catalog as loaded.
check_PROGRAMS += tests/test-provider-price
TESTS += tests/test-provider-price
tests_test_provider_price_SOURCES = tests/test-provider-price.c tests/check.h
tests_test_provider_price_CPPFLAGS = $(AM_CPPFLAGS) $(UV_CFLAGS) $(CJSON_CFLAGS)
tests_test_provider_price_LDADD = $(SD_PROVIDER_LIBS) $(SD_PROTO_LIBS) $(SD_TRACE_LIBS) $(SD_MARKET_LIBS) $(SD_ENGINE_LIBS) $(UV_LIBS)

# A provider from the test suite alone: spotdeck's own main with
# tests/provider-script.c linked in, which registers the "script" provider;
# test-provider-script.sh runs a headless job over it with a revocation.
check_PROGRAMS += tests/spotdeck-script
tests_spotdeck_script_SOURCES = src/main.c tests/provider-script.c
tests_spotdeck_script_CPPFLAGS = $(AM_CPPFLAGS) $(UV_CFLAGS) $(CJSON_CFLAGS)
tests_spotdeck_script_LDADD = $(spotdeck_LDADD)
TESTS += tests/test-provider-script.sh
EXTRA_DIST += tests/test-provider-script.sh
