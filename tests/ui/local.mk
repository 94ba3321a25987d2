# tests/ui/local.mk: the curses cockpit (ui/): screens, panes, themes, rendering.
check_PROGRAMS += tests/ui/test-ui-whatif
TESTS += tests/ui/test-ui-whatif
tests_ui_test_ui_whatif_SOURCES = tests/ui/test-ui-whatif.c tests/ui-fixture.c tests/ui-fixture.h tests/check.h
tests_ui_test_ui_whatif_CPPFLAGS = $(AM_CPPFLAGS) $(NCURSES_CFLAGS) $(UV_CFLAGS)
tests_ui_test_ui_whatif_LDADD = $(SD_UI_LIBS)

# The theme parser, screen and layout on a
# virtual terminal, tmux-driven end-to-end runs, theme fuzzing, redraw bench.
UI_TEST_CPPFLAGS = $(AM_CPPFLAGS) $(NCURSES_CFLAGS) $(UV_CFLAGS)

# The driver the tmux tests run (a fixture run behind the real cockpit).
check_PROGRAMS += tests/ui/test-ui-render
tests_ui_test_ui_render_SOURCES = tests/ui/test-ui-render.c tests/ui-fixture.c tests/ui-fixture.h
tests_ui_test_ui_render_CPPFLAGS = $(UI_TEST_CPPFLAGS)
tests_ui_test_ui_render_LDADD = $(SD_UI_LIBS)

check_PROGRAMS += tests/ui/test-ui-theme tests/ui/test-ui-screen
TESTS += tests/ui/test-ui-theme tests/ui/test-ui-screen tests/ui/test-ui-render.sh
EXTRA_DIST += tests/ui/test-ui-render.sh
tests_ui_test_ui_theme_SOURCES = tests/ui/test-ui-theme.c tests/check.h
tests_ui_test_ui_theme_CPPFLAGS = $(UI_TEST_CPPFLAGS)
tests_ui_test_ui_theme_LDADD = $(SD_UI_LIBS)

tests_ui_test_ui_screen_SOURCES = tests/ui/test-ui-screen.c tests/ui-fixture.c tests/ui-fixture.h \
	tests/check.h
tests_ui_test_ui_screen_CPPFLAGS = $(UI_TEST_CPPFLAGS)
tests_ui_test_ui_screen_LDADD = $(SD_UI_LIBS)
