# tests/planner.mk: the what-if planner (src/market/planner.c): its unit tests, the
# seeds' configurations, the CLI and its benchmark.
PLANNER_TESTS = tests/test-planner-seeds
check_PROGRAMS += $(PLANNER_TESTS)
TESTS += $(PLANNER_TESTS)

tests_test_planner_seeds_SOURCES = tests/test-planner-seeds.c tests/check.h
tests_test_planner_seeds_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS)
tests_test_planner_seeds_LDADD = $(SD_MARKET_LIBS) $(SD_ENGINE_LIBS)

PLANNER_UNIT = tests/test-planner
check_PROGRAMS += $(PLANNER_UNIT)
TESTS += $(PLANNER_UNIT)
tests_test_planner_SOURCES = tests/test-planner.c tests/check.h
tests_test_planner_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS)
tests_test_planner_LDADD = $(SD_MARKET_LIBS) $(SD_ENGINE_LIBS)

TESTS += tests/test-plan-cli.sh
EXTRA_DIST += tests/test-plan-cli.sh

noinst_PROGRAMS += tests/bench/bench-planner
tests_bench_bench_planner_SOURCES = tests/bench/bench-planner.c
tests_bench_bench_planner_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS)
tests_bench_bench_planner_LDADD = $(SD_MARKET_LIBS) $(SD_ENGINE_LIBS)

# The cockpit's what-if rows (src/app/whatif.c, pure) and its dialog.
WHATIF_TESTS = tests/test-whatif tests/test-ui-whatif
check_PROGRAMS += $(WHATIF_TESTS)
TESTS += $(WHATIF_TESTS)
tests_test_whatif_SOURCES = tests/test-whatif.c src/app/whatif.c src/app/whatif.h tests/check.h
tests_test_whatif_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS) $(UV_CFLAGS)
tests_test_whatif_LDADD = $(SD_MARKET_LIBS) $(SD_ENGINE_LIBS)
tests_test_ui_whatif_SOURCES = tests/test-ui-whatif.c tests/ui-fixture.c tests/ui-fixture.h tests/check.h
tests_test_ui_whatif_CPPFLAGS = $(AM_CPPFLAGS) $(NCURSES_CFLAGS) $(UV_CFLAGS)
tests_test_ui_whatif_LDADD = $(SD_UI_LIBS)

# The what-if view end to end in the real cockpit (tmux, real workers).
TESTS += tests/test-ui-whatif-e2e.sh
EXTRA_DIST += tests/test-ui-whatif-e2e.sh

# The autopilot's policy (src/market/autopilot.c): unit tests on hand-built
# states, and its benchmark against the other policies (make bench).
AUTOPILOT_TESTS = tests/test-autopilot
check_PROGRAMS += $(AUTOPILOT_TESTS)
TESTS += $(AUTOPILOT_TESTS)
tests_test_autopilot_SOURCES = tests/test-autopilot.c tests/check.h
tests_test_autopilot_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS)
tests_test_autopilot_LDADD = $(SD_MARKET_LIBS) $(SD_ENGINE_LIBS)

noinst_PROGRAMS += tests/bench/autopilot-bench
tests_bench_autopilot_bench_SOURCES = tests/bench/autopilot-bench.c tests/bench/bench.h
tests_bench_autopilot_bench_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS)
tests_bench_autopilot_bench_LDADD = $(SD_MARKET_LIBS) $(SD_ENGINE_LIBS)
