# tests/market/local.mk: the market model, catalogs, traces, the planner and the autopilot policy (src/market/).
# The catalog loader and the market model's calibration.
check_PROGRAMS += tests/market/test-market-calibration tests/market/test-catalog \
	tests/market/test-replacement
TESTS += tests/market/test-market-calibration tests/market/test-catalog \
	tests/market/test-replacement
tests_market_test_market_calibration_SOURCES = tests/market/test-market-calibration.c tests/check.h
tests_market_test_market_calibration_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS)
tests_market_test_market_calibration_LDADD = $(SD_MARKET_LIBS) $(SD_ENGINE_LIBS)

tests_market_test_catalog_SOURCES = tests/market/test-catalog.c tests/check.h
tests_market_test_catalog_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS)
tests_market_test_catalog_LDADD = $(SD_MARKET_LIBS) $(SD_ENGINE_LIBS)

# The replacement scorer.
tests_market_test_replacement_SOURCES = tests/market/test-replacement.c tests/check.h
tests_market_test_replacement_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS)
tests_market_test_replacement_LDADD = $(SD_MARKET_LIBS) $(SD_ENGINE_LIBS)

# The what-if planner (src/market/planner.c): its unit tests, the
# seeds' configurations, the CLI and its benchmark.
check_PROGRAMS += tests/market/test-planner-seeds
TESTS += tests/market/test-planner-seeds

tests_market_test_planner_seeds_SOURCES = tests/market/test-planner-seeds.c tests/check.h
tests_market_test_planner_seeds_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS)
tests_market_test_planner_seeds_LDADD = $(SD_MARKET_LIBS) $(SD_ENGINE_LIBS)

check_PROGRAMS += tests/market/test-planner
TESTS += tests/market/test-planner
tests_market_test_planner_SOURCES = tests/market/test-planner.c tests/check.h
tests_market_test_planner_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS)
tests_market_test_planner_LDADD = $(SD_MARKET_LIBS) $(SD_ENGINE_LIBS)

# The autopilot's policy (src/market/autopilot.c): unit tests on hand-built
# states, and its benchmark against the other policies (make bench).
check_PROGRAMS += tests/market/test-autopilot
TESTS += tests/market/test-autopilot
tests_market_test_autopilot_SOURCES = tests/market/test-autopilot.c tests/check.h
tests_market_test_autopilot_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS)
tests_market_test_autopilot_LDADD = $(SD_MARKET_LIBS) $(SD_ENGINE_LIBS)

check_PROGRAMS += tests/market/test-trace tests/fuzz/fuzz-trace
TESTS += tests/market/test-trace tests/fuzz/fuzz-trace

tests_market_test_trace_SOURCES = tests/market/test-trace.c
tests_market_test_trace_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS)
tests_market_test_trace_LDADD = $(SD_TRACE_LIBS) $(SD_ENGINE_LIBS)

# A plain program replaying deterministic mutations under `make check`; see
# the file for the libFuzzer build.
tests_fuzz_fuzz_trace_SOURCES = tests/fuzz/fuzz-trace.c
tests_fuzz_fuzz_trace_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS)
tests_fuzz_fuzz_trace_LDADD = $(SD_TRACE_LIBS) $(SD_ENGINE_LIBS)
