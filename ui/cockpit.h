/* ui/cockpit.h - the full-screen cockpit on a libuv loop.
 *
 * The cockpit renders a read-only snapshot of the run (struct sd_view,
 * ui/view.h) that its owner provides through ops->view, and sends command
 * lines back through ops->command: the same command table as the headless
 * input.  It never sees sockets, processes, providers or the engine.
 *
 * On the loop it holds: a poll handle on the terminal (keys), a signal
 * handle for SIGWINCH (resize), a refresh timer that asks for the view
 * (SD_COCKPIT_POLL_MS) and a render timer.  Events never draw: a key, a
 * resize or a moved view->version marks panes dirty (each pane compares a
 * hash of the part of the view it shows), and the render timer redraws only
 * the dirty panes (wnoutrefresh each, one doupdate).  Renders for a moved
 * version come at most every SD_COCKPIT_FRAME_MS; a key or a resize is
 * drawn on the next loop turn.
 *
 * Terminal hygiene: while the cockpit runs, stderr goes to opts->log_path
 * (so that nothing writes behind curses), the terminal is in curses mode
 * on the alternate screen, and sd_cockpit_destroy() or, on SIGSEGV, SIGABRT,
 * SIGBUS or SIGFPE, the handler the cockpit installs for them (it calls
 * sd_cockpit_emergency_restore(), then lets the signal take its course with
 * the action installed before the cockpit) puts it back.  One cockpit at a
 * time: it owns the terminal.
 */
#ifndef SD_UI_COCKPIT_H
#define SD_UI_COCKPIT_H

#include <uv.h>

#include "ui/view.h"

#define SD_COCKPIT_POLL_MS 200  /* how often the view is asked for */
#define SD_COCKPIT_FRAME_MS 50  /* at most 20 renders a second */

struct sd_cockpit;

struct sd_cockpit_ops {
	/* Fills or refreshes the view and returns it.  Called before each
	 * render and on the refresh timer; the view must stay valid and
	 * unchanged until the next call.  Bump view->version whenever
	 * anything shown changes (elapsed time included): the cockpit
	 * renders only when it moves or on a key/resize.  Zero the view's
	 * arrays (calloc/memset) so that padding does not look like a change. */
	const struct sd_view *(*view)(void *ctx);
	/* Runs a command line ("add OFFER", "swap SERVER OFFER", "drop SERVER",
	 * "checkpoint", "pause", "resume", "quit").  Returns 0, or -1 with
	 * *why (caller frees, may stay NULL) shown on the status line.  It may
	 * call sd_cockpit_destroy() (e.g. on "quit"). */
	int (*command)(void *ctx, const char *line, char **why);
};

struct sd_cockpit_opts {
	const char *theme;          /* name or path; NULL: "default" ("mono" when NO_COLOR is set) */
	const char *theme_dirs[4];  /* searched in order, NULL entries skipped, e.g.
	                             * ~/.config/spotdeck/themes, SD_DATADIR "/themes", "themes" */
	int bell;                   /* on revocation: 0 nothing, 1 bell, 2 flash */
	const char *log_path;       /* stderr and the cockpit's diagnostics go here
	                             * (appended) while it runs; NULL: stderr stays */
};

/* Takes over the terminal (stdin/stdout must be one) on LOOP.  OPS and CTX
 * must outlive the cockpit; O is copied.  Returns 0, or -1 with *why
 * (caller frees) and the terminal untouched: "not a terminal", a theme
 * error naming the file, line and key, an unknown $TERM, or "a cockpit is
 * already running". */
int sd_cockpit_create(struct sd_cockpit **out, uv_loop_t *loop, const struct sd_cockpit_ops *ops,
                      void *ctx, const struct sd_cockpit_opts *o, char **why);

/* Restores the terminal (endwin, stderr back) at once and closes the loop
 * handles; the memory goes when the loop has run their close callbacks
 * (run the loop once more before uv_loop_close, as for any handle).  Safe to
 * call twice, from ops->command, and with NULL. */
void sd_cockpit_destroy(struct sd_cockpit *c);

/* Async-signal-safe terminal restore for SIGSEGV/SIGABRT/SIGBUS handlers:
 * leaves the alternate screen, shows the cursor, resets attributes and the
 * saved terminal modes with write(2) and tcsetattr(3) only, and puts
 * stderr back so the crash report is seen.  Does nothing when no cockpit
 * holds the terminal. */
void sd_cockpit_emergency_restore(void);

/* Tells the cockpit a server was revoked: bell or flash (opts->bell) and
 * the server's row highlighted; the suggestion itself comes in the view. */
void sd_cockpit_notify_revocation(struct sd_cockpit *c, const char *server);

/* Tells the cockpit the run refused one of its commands (why: the run's
 * words); shown as a note that outlives the run's next message. */
void sd_cockpit_notify_refused(struct sd_cockpit *c, const char *why);

#endif
