# tests/planner.mk: the what-if planner (src/planner.c): its unit tests, the
# seeds' configurations, the CLI and its benchmark.
PLANNER_TESTS = tests/test-planner-seeds
check_PROGRAMS += $(PLANNER_TESTS)
TESTS += $(PLANNER_TESTS)

tests_test_planner_seeds_SOURCES = tests/test-planner-seeds.c tests/check.h
tests_test_planner_seeds_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS)
tests_test_planner_seeds_LDADD = $(SD_MARKET_LIBS) $(SD_ENGINE_LIBS)
