# ui/: the ncurses cockpit (panes, dialogs, charts, themes, key table) as a
# library the spotdeck program links; it reads ui/view.h and, of src/, only
# src/base/ (one-line errors).
noinst_LIBRARIES += ui/libsdui.a
ui_libsdui_a_CPPFLAGS = $(AM_CPPFLAGS) $(NCURSES_CFLAGS) $(UV_CFLAGS)
ui_libsdui_a_SOURCES = \
	ui/view.h \
	ui/cockpit.c ui/cockpit.h \
	ui/screen.c ui/screen.h \
	ui/dialog.c ui/dialog.h ui/dialog-whatif.c \
	ui/keys.c ui/keys.h \
	ui/pane.c ui/pane.h \
	ui/pane-header.c ui/pane-market.c ui/pane-cluster.c \
	ui/pane-revocations.c ui/pane-charts.c ui/pane-status.c \
	ui/chart.c ui/chart.h \
	ui/tui.c ui/tui.h \
	ui/format.c ui/format.h \
	ui/theme.c ui/theme.h

# What a program that opens the cockpit links.
SD_UI_LIBS = ui/libsdui.a $(NCURSES_LIBS) $(UV_LIBS) $(SD_BASE_LIBS) -lm
