/* ui/screen.h - the cockpit's screen: layout, panes, dialogs, theme
 * colours, key actions and the one place that redraws.
 *
 * It knows curses but not libuv: ui/cockpit.c owns the terminal and the
 * loop and calls these; tests and the bench drive it directly on a screen
 * made with newterm().  Time comes in as milliseconds from the caller. */
#ifndef SD_UI_SCREEN_H
#define SD_UI_SCREEN_H

#include <stdint.h>
#include <stdio.h>

#include "ui/theme.h"
#include "ui/view.h"

struct sd_screen;

struct sd_screen_cfg {
	/* Runs a command line; 0, or -1 with *why (caller frees). */
	int (*command)(void *ctx, const char *line, char **why);
	void *ctx;
	const struct sd_theme *theme;   /* the first theme (copied) */
	const char *const *theme_dirs;  /* searched by `t` for the next theme */
	int ntheme_dirs;
	int utf8;                       /* UTF-8 glyphs, else ASCII */
	int bell;                       /* on revocation: 0 none, 1 beep, 2 flash */
	FILE *log;                      /* diagnostics, NULL none */
};

/* Creates the screen on the current curses SCREEN (colours started here)
 * at its size (LINES x COLS).  Returns 0 or -1 with *why (caller frees). */
int sd_screen_create(struct sd_screen **out, const struct sd_screen_cfg *cfg, char **why);

/* Deletes its windows; the curses SCREEN stays. */
void sd_screen_destroy(struct sd_screen *s);

/* Takes a new view (valid until the next call) at time NOW_MS; marks the
 * panes whose part of it changed.  Returns whether a render is due. */
int sd_screen_update(struct sd_screen *s, const struct sd_view *v, uint64_t now_ms);

/* Time passes without a new view: lets the UI's note and the revocation
 * highlight run out.  Returns whether a render is due. */
int sd_screen_expire(struct sd_screen *s, uint64_t now_ms);

/* The run refused a command this screen sent earlier (an attached
 * cockpit hears so later): shown as the UI's own note, in the error style,
 * for its usual seconds, not as the run's message the next one replaces. */
void sd_screen_refused(struct sd_screen *s, const char *why);

/* Handles one key; returns SD_KEY_* flags (ui/pane.h). */
int sd_screen_key(struct sd_screen *s, int key);

/* Lays the panes out again at the current LINES x COLS (after resizeterm). */
void sd_screen_resize(struct sd_screen *s);

/* Marks everything for redraw (clearok when HARD: the terminal's own
 * contents are not trusted, as after ^L). */
void sd_screen_invalidate(struct sd_screen *s, int hard);

/* Whether anything is marked for redraw. */
int sd_screen_dirty(const struct sd_screen *s);

/* Draws what is marked (wnoutrefresh each) and does one doupdate().
 * Returns the number of panes drawn. */
int sd_screen_render(struct sd_screen *s);

/* A server was revoked: bell or flash, and its row highlighted. */
void sd_screen_revocation(struct sd_screen *s, const char *server);

/* The current theme's name. */
const char *sd_screen_theme(const struct sd_screen *s);

/* Which dialog is open: NULL, "picker", "confirm", "help" or "whatif". */
const char *sd_screen_modal(const struct sd_screen *s);

/* ---- key actions, referenced by the key table (ui/keys.c) ---- */
int sd_act_add(struct sd_screen *s, int key);
int sd_act_swap(struct sd_screen *s, int key);
int sd_act_drop(struct sd_screen *s, int key);
int sd_act_checkpoint(struct sd_screen *s, int key);
int sd_act_pause(struct sd_screen *s, int key);
int sd_act_autopilot(struct sd_screen *s, int key);
int sd_act_theme(struct sd_screen *s, int key);
int sd_act_help(struct sd_screen *s, int key);
int sd_act_whatif(struct sd_screen *s, int key);
int sd_act_quit(struct sd_screen *s, int key);
int sd_act_detach(struct sd_screen *s, int key);
int sd_act_accept(struct sd_screen *s, int key);
int sd_act_focus_next(struct sd_screen *s, int key);
int sd_act_focus_prev(struct sd_screen *s, int key);
int sd_act_nav(struct sd_screen *s, int key);
int sd_act_enter(struct sd_screen *s, int key);
int sd_act_escape(struct sd_screen *s, int key);
int sd_act_redraw(struct sd_screen *s, int key);
int sd_act_pick(struct sd_screen *s, int key);
int sd_act_confirm(struct sd_screen *s, int key);
int sd_act_cancel(struct sd_screen *s, int key);

#endif
