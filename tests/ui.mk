# tests/ui.mk: the cockpit (ui/): theme parser, screen and layout on a
# virtual terminal, tmux-driven end-to-end runs, theme fuzzing, redraw bench.
UI_TEST_CPPFLAGS = $(AM_CPPFLAGS) $(NCURSES_CFLAGS) $(UV_CFLAGS)

# The driver the tmux tests run (a fixture run behind the real cockpit).
check_PROGRAMS += tests/test-ui-render
tests_test_ui_render_SOURCES = tests/test-ui-render.c tests/ui-fixture.c tests/ui-fixture.h
tests_test_ui_render_CPPFLAGS = $(UI_TEST_CPPFLAGS)
tests_test_ui_render_LDADD = $(SD_UI_LIBS)

UI_TESTS = tests/test-ui-theme tests/test-ui-screen tests/fuzz/fuzz-theme
check_PROGRAMS += $(UI_TESTS)
TESTS += $(UI_TESTS) tests/test-ui-render.sh
EXTRA_DIST += tests/test-ui-render.sh tests/tmux-lib.sh

tests_test_ui_theme_SOURCES = tests/test-ui-theme.c tests/check.h
tests_test_ui_theme_CPPFLAGS = $(UI_TEST_CPPFLAGS)
tests_test_ui_theme_LDADD = $(SD_UI_LIBS)

tests_test_ui_screen_SOURCES = tests/test-ui-screen.c tests/ui-fixture.c tests/ui-fixture.h \
	tests/check.h
tests_test_ui_screen_CPPFLAGS = $(UI_TEST_CPPFLAGS)
tests_test_ui_screen_LDADD = $(SD_UI_LIBS)

# Built as a plain program with a main() that replays mutated themes; see
# the file for the libFuzzer build.
tests_fuzz_fuzz_theme_SOURCES = tests/fuzz/fuzz-theme.c tests/check.h tests/fuzz/mutate.h
tests_fuzz_fuzz_theme_CPPFLAGS = $(UI_TEST_CPPFLAGS)
tests_fuzz_fuzz_theme_LDADD = $(SD_UI_LIBS)

# Full redraw of a 200x60 screen with 64 servers against the 2 ms target
# and against a peer blitting the same frames' cells; run by hand or
# `make bench`.
noinst_PROGRAMS += tests/bench/bench-ui
tests_bench_bench_ui_SOURCES = tests/bench/bench-ui.c tests/bench/bench.h tests/ui-fixture.c tests/ui-fixture.h
tests_bench_bench_ui_CPPFLAGS = $(UI_TEST_CPPFLAGS)
tests_bench_bench_ui_LDADD = $(SD_UI_LIBS)
