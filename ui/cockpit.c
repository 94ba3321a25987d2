/* ui/cockpit.c - the terminal and the loop: curses set-up and teardown,
 * keys, resize and timers on libuv, emergency restore.  What to draw and
 * what keys mean is ui/screen.c's business.
 *
 * Keys: libuv's uv_tty_t would hand us raw bytes and leave escape
 * sequences (arrows, F1, Shift-Tab) to a hand-written decoder.  Instead the
 * cockpit opens /dev/tty for input (a file description of its own, so the
 * O_NONBLOCK that uv_poll sets never reaches stdout, which curses writes
 * with blocking writes), watches it with a uv_poll_t and lets curses read
 * and decode the keys from terminfo, through a pad so that reading never
 * refreshes a window behind the render's back. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <langinfo.h>
#include <locale.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "src/base/errors.h"
#include "ui/cockpit.h"
#include "ui/pane.h"
#include "ui/screen.h"
#include "ui/theme.h"
#include "ui/tui.h"

#define MAX_KEYS_PER_READ 256   /* keys handled per poll wake-up (a paste) */
#define IDLE_READS_MAX 64       /* wake-ups without a key before the tty counts as gone */

struct sd_cockpit {
	uv_loop_t *loop;
	const struct sd_cockpit_ops *ops;
	void *ctx;
	uv_poll_t keys;
	uv_signal_t winch;
	uv_timer_t refresh, render;
	int open_handles;
	int tty_fd;
	FILE *tty_in;
	SCREEN *scr;
	WINDOW *input;              /* a pad: wgetch on it never refreshes */
	struct sd_screen *screen;
	FILE *log;
	int saved_stderr;
	uint64_t last_render;
	unsigned long version;      /* view->version last seen by the refresh timer */
	int have_version;
	int closing;
	int idle_reads;
	char dirs[4][512];
	const char *dirp[4];
	int ndirs;
};

/* The cockpit that holds the terminal; compared, never dereferenced, by a
 * second sd_cockpit_destroy() of the same pointer. */
static struct sd_cockpit *active;

/* What sd_cockpit_emergency_restore() needs, prepared while curses starts
 * so that the signal path only calls write(2), dup2(2), tcsetattr(3). */
static volatile sig_atomic_t emergency_armed;
static struct termios emergency_termios;
static char emergency_seq[512];
static size_t emergency_len;
static int emergency_stderr = -1;

static void clog_(struct sd_cockpit *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void clog_(struct sd_cockpit *c, const char *fmt, ...)
{
	if (!c->log)
		return;
	va_list ap;
	va_start(ap, fmt);
	fputs("cockpit: ", c->log);
	vfprintf(c->log, fmt, ap);
	fputc('\n', c->log);
	fflush(c->log);
	va_end(ap);
}

static void emergency_add(const char *cap)
{
	const char *s = tigetstr(cap);
	if (!s || s == (const char *)-1)
		return;
	size_t n = strlen(s);
	if (emergency_len + n < sizeof emergency_seq) {
		memcpy(emergency_seq + emergency_len, s, n);
		emergency_len += n;
	}
}

void sd_cockpit_emergency_restore(void)
{
	if (!emergency_armed)
		return;
	emergency_armed = 0;
	ssize_t r = write(STDOUT_FILENO, emergency_seq, emergency_len);
	(void)r;
	tcsetattr(STDOUT_FILENO, TCSANOW, &emergency_termios);
	if (emergency_stderr >= 0)
		dup2(emergency_stderr, STDERR_FILENO);
}

/* While a cockpit holds the terminal, a crash (these signals) gives it
 * back before the process dies: the handler restores it, puts back the
 * action that was there before (the default, or a sanitizer's that reports
 * the crash) and raises the signal again.  SA_RESETHAND: a second fault
 * inside the handler dies at once. */
static const int fatal_signals[] = { SIGSEGV, SIGABRT, SIGBUS, SIGFPE };
#define NFATAL (int)(sizeof fatal_signals / sizeof fatal_signals[0])
static struct sigaction fatal_old[NFATAL];
static int fatal_installed;

static void on_fatal_signal(int sig)
{
	sd_cockpit_emergency_restore();
	for (int i = 0; i < NFATAL; i++)
		if (fatal_signals[i] == sig)
			sigaction(sig, &fatal_old[i], NULL);
	raise(sig);   /* SA_NODEFER: delivered now, to the action put back */
}

static void fatal_handlers_install(void)
{
	if (fatal_installed)
		return;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_fatal_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESETHAND | SA_NODEFER;
	for (int i = 0; i < NFATAL; i++)
		sigaction(fatal_signals[i], &sa, &fatal_old[i]);
	fatal_installed = 1;
}

static void fatal_handlers_remove(void)
{
	if (!fatal_installed)
		return;
	for (int i = 0; i < NFATAL; i++)
		sigaction(fatal_signals[i], &fatal_old[i], NULL);
	fatal_installed = 0;
}

/* ---- rendering ---- */

static void on_render(uv_timer_t *t);

static uint64_t now_ms(struct sd_cockpit *c)
{
	return uv_now(c->loop);
}

/* Schedules a render on the next loop turn.  Renders the view asks for
 * are throttled to one a frame; a key or a resize (URGENT) is drawn on the
 * next turn, so that a keypress shows at once. */
static void request_render(struct sd_cockpit *c, int urgent)
{
	if (c->closing)
		return;
	uint64_t now = now_ms(c), due = c->last_render + SD_COCKPIT_FRAME_MS;
	uint64_t delay = urgent || due <= now ? 0 : due - now;
	if (uv_is_active((uv_handle_t *)&c->render)) {
		if (!urgent || uv_timer_get_due_in(&c->render) == 0)
			return;
		uv_timer_stop(&c->render);
	}
	uv_timer_start(&c->render, on_render, delay, 0);
}

static void on_render(uv_timer_t *t)
{
	struct sd_cockpit *c = t->data;
	if (c->closing)
		return;
	const struct sd_view *v = c->ops->view(c->ctx);
	if (v) {
		c->version = v->version;
		c->have_version = 1;
	}
	sd_screen_update(c->screen, v, now_ms(c));
	if (sd_screen_dirty(c->screen))
		sd_screen_render(c->screen);
	c->last_render = now_ms(c);
}

/* The refresh timer: asks for the view; only a moved version (or a note or
 * highlight running out) leads to a render. */
static void on_refresh(uv_timer_t *t)
{
	struct sd_cockpit *c = t->data;
	if (c->closing)
		return;
	const struct sd_view *v = c->ops->view(c->ctx);
	int due;
	if (!v || !c->have_version || v->version != c->version) {
		if (v) {
			c->version = v->version;
			c->have_version = 1;
		}
		due = sd_screen_update(c->screen, v, now_ms(c));
	} else {
		due = sd_screen_expire(c->screen, now_ms(c));
	}
	if (due)
		request_render(c, 0);
}

/* ---- input ---- */

static void read_keys(struct sd_cockpit *c)
{
	int got = 0;
	while (!c->closing && got < MAX_KEYS_PER_READ) {
		int ch = wgetch(c->input);
		if (ch == ERR)
			break;
		got++;
		sd_screen_key(c->screen, ch);
	}
	if (c->closing)
		return;     /* a command closed the cockpit: draw nothing more */
	if (got) {
		c->idle_reads = 0;
		request_render(c, 1);
	} else if (++c->idle_reads > IDLE_READS_MAX) {
		/* Readable without a key, again and again: the terminal hung up.
		 * Stop watching it rather than spin; SIGHUP is the owner's. */
		uv_poll_stop(&c->keys);
		clog_(c, "terminal input closed; no more keys");
	}
}

static void on_keys(uv_poll_t *h, int status, int events)
{
	struct sd_cockpit *c = h->data;
	if (c->closing)
		return;
	if (status < 0 || (events & UV_DISCONNECT)) {
		uv_poll_stop(&c->keys);
		clog_(c, "terminal input: %s", status < 0 ? uv_strerror(status) : "disconnected");
		return;
	}
	read_keys(c);
}

static void on_winch(uv_signal_t *h, int signum)
{
	struct sd_cockpit *c = h->data;
	if (c->closing)
		return;
	struct winsize ws;
	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0)
		resizeterm(ws.ws_row, ws.ws_col);
	sd_screen_resize(c->screen);
	/* resizeterm queued a KEY_RESIZE; any key behind it is real. */
	read_keys(c);
	request_render(c, 1);
}

/* ---- teardown ---- */

static void free_cockpit(struct sd_cockpit *c)
{
	sd_screen_destroy(c->screen);
	if (c->input)
		delwin(c->input);
	if (c->scr)
		delscreen(c->scr);
	if (c->tty_in)
		fclose(c->tty_in);
	else if (c->tty_fd >= 0)
		close(c->tty_fd);
	if (c->log)
		fclose(c->log);
	free(c);
}

static void on_closed(uv_handle_t *h)
{
	struct sd_cockpit *c = h->data;
	if (--c->open_handles == 0)
		free_cockpit(c);
}

/* Leaves curses and puts stderr back; idempotent. */
static void restore_terminal(struct sd_cockpit *c)
{
	emergency_armed = 0;
	fatal_handlers_remove();
	if (c->scr) {
		set_term(c->scr);
		curs_set(1);
		endwin();
		fflush(stdout);
	}
	if (c->saved_stderr >= 0) {
		fflush(stderr);
		dup2(c->saved_stderr, STDERR_FILENO);
		close(c->saved_stderr);
		c->saved_stderr = -1;
		emergency_stderr = -1;
	}
}

void sd_cockpit_destroy(struct sd_cockpit *c)
{
	if (!c || c != active)
		return;
	active = NULL;
	c->closing = 1;
	restore_terminal(c);
	clog_(c, "closed");
	uv_handle_t *hs[] = { (uv_handle_t *)&c->keys, (uv_handle_t *)&c->winch,
	                      (uv_handle_t *)&c->refresh, (uv_handle_t *)&c->render };
	if (c->open_handles == 0) {
		free_cockpit(c);
		return;
	}
	for (int i = 0; i < 4; i++) {
		if (!uv_is_closing(hs[i]))
			uv_close(hs[i], on_closed);
	}
}

/* ---- start ---- */

static const char *no_color(void)
{
	const char *e = getenv("NO_COLOR");
	return e && *e ? e : NULL;
}

/* Curses on the terminal (c->tty_in for keys, stdout for output) and the
 * input pad keys are read from.  0, or -1 with *why. */
static int start_curses(struct sd_cockpit *c, char **why)
{
	use_tioctl(TRUE);
	c->scr = newterm(NULL, stdout, c->tty_in);
	if (!c->scr) {
		const char *term = getenv("TERM");
		sd_why(why, "cannot drive terminal type '%s' (no terminfo entry?)", term ? term : "");
		return -1;
	}
	set_term(c->scr);
	cbreak();
	noecho();
	nonl();
	intrflush(stdscr, FALSE);
	leaveok(stdscr, TRUE);
	curs_set(0);
	set_escdelay(25);
	c->input = newpad(1, 1);
	if (!c->input) {
		sd_why(why, "curses: cannot create the input pad");
		return -1;
	}
	keypad(c->input, TRUE);
	nodelay(c->input, TRUE);
	return 0;
}

/* What a fatal signal writes to give the terminal back (the handlers
 * cannot call curses), and the handlers themselves. */
static void arm_emergency(struct sd_cockpit *c)
{
	emergency_len = 0;
	emergency_add("sgr0");
	emergency_add("cnorm");
	emergency_add("rmkx");
	emergency_add("rmcup");
	emergency_stderr = c->saved_stderr;
	emergency_armed = 1;
	fatal_handlers_install();
}

/* The loop's handles: keys, SIGWINCH, the refresh and render timers;
 * c->open_handles counts those initialised, for the close on failure.
 * 0, or -1 with *why. */
static int start_handles(struct sd_cockpit *c, char **why)
{
	int rc;
	if ((rc = uv_poll_init(c->loop, &c->keys, c->tty_fd)) != 0) {
		sd_why(why, "terminal input: %s", uv_strerror(rc));
		return -1;
	}
	c->keys.data = c;
	c->open_handles++;
	uv_signal_init(c->loop, &c->winch);
	c->winch.data = c;
	c->open_handles++;
	uv_timer_init(c->loop, &c->refresh);
	c->refresh.data = c;
	c->open_handles++;
	uv_timer_init(c->loop, &c->render);
	c->render.data = c;
	c->open_handles++;
	uv_poll_start(&c->keys, UV_READABLE | UV_DISCONNECT, on_keys);
	uv_signal_start(&c->winch, on_winch, SIGWINCH);
	uv_timer_start(&c->refresh, on_refresh, SD_COCKPIT_POLL_MS, SD_COCKPIT_POLL_MS);
	return 0;
}

/* The first frame now, not a timer tick later. */
static void first_frame(struct sd_cockpit *c)
{
	const struct sd_view *v = c->ops->view(c->ctx);
	if (v) {
		c->version = v->version;
		c->have_version = 1;
	}
	sd_screen_update(c->screen, v, now_ms(c));
	sd_screen_render(c->screen);
	c->last_render = now_ms(c);
}

/* Undoes a create that failed once c existed with its terminal open: the
 * terminal and stderr back, and c freed (through the handles' close
 * callbacks when some were initialised). */
static void create_failed(struct sd_cockpit *c)
{
	emergency_armed = 0;
	fatal_handlers_remove();
	if (c->scr) {
		endwin();
		fflush(stdout);
	}
	if (c->saved_stderr >= 0) {
		dup2(c->saved_stderr, STDERR_FILENO);
		close(c->saved_stderr);
		c->saved_stderr = -1;
		emergency_stderr = -1;
	}
	if (c->open_handles) {
		/* Handles exist: free through their close callbacks. */
		c->closing = 1;
		uv_handle_t *hs[] = { (uv_handle_t *)&c->keys, (uv_handle_t *)&c->winch,
		                      (uv_handle_t *)&c->refresh, (uv_handle_t *)&c->render };
		for (int i = 0; i < c->open_handles; i++)
			uv_close(hs[i], on_closed);
		return;
	}
	free_cockpit(c);
}

int sd_cockpit_create(struct sd_cockpit **out, uv_loop_t *loop, const struct sd_cockpit_ops *ops,
                      void *ctx, const struct sd_cockpit_opts *o, char **why)
{
	static const struct sd_cockpit_opts none;
	struct sd_theme theme;
	if (!o)
		o = &none;
	*out = NULL;
	if (active) {
		sd_why(why, "a cockpit is already running");
		return -1;
	}
	if (!isatty(STDOUT_FILENO)) {
		sd_why(why, "not a terminal: standard output is not a terminal (use --headless)");
		return -1;
	}
	struct sd_cockpit *c = calloc(1, sizeof *c);
	if (!c) {
		sd_why(why, "out of memory");
		return -1;
	}
	c->loop = loop;
	c->ops = ops;
	c->ctx = ctx;
	c->saved_stderr = -1;
	c->tty_fd = open("/dev/tty", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (c->tty_fd < 0) {
		sd_why(why, "not a terminal: /dev/tty: %s", strerror(errno));
		free(c);
		return -1;
	}
	for (int i = 0; i < 4; i++) {
		if (o->theme_dirs[i] && *o->theme_dirs[i]) {
			snprintf(c->dirs[c->ndirs], sizeof c->dirs[0], "%s", o->theme_dirs[i]);
			c->dirp[c->ndirs] = c->dirs[c->ndirs];
			c->ndirs++;
		}
	}

	/* Everything that can fail with a message comes before curses. */
	/* The user's locale for characters (UTF-8 or not); numbers stay "C"
	 * so that no decimal comma reaches the journal or the protocol. */
	setlocale(LC_ALL, "");
	setlocale(LC_NUMERIC, "C");
	int utf8 = strcmp(nl_langinfo(CODESET), "UTF-8") == 0;
	const char *tname = o->theme ? o->theme : no_color() ? "mono" : "default";
	if (sd_theme_load(&theme, tname, c->dirp, c->ndirs, why) != 0) {
		close(c->tty_fd);
		free(c);
		return -1;
	}
	if (o->log_path) {
		c->log = fopen(o->log_path, "a");
		if (!c->log) {
			sd_why(why, "%s: %s", o->log_path, strerror(errno));
			close(c->tty_fd);
			free(c);
			return -1;
		}
		setvbuf(c->log, NULL, _IOLBF, 0);
	}
	c->tty_in = fdopen(c->tty_fd, "r");
	if (!c->tty_in || tcgetattr(STDOUT_FILENO, &emergency_termios) != 0) {
		sd_why(why, "not a terminal: %s", strerror(errno));
		goto fail;
	}
	if (c->log) {
		fflush(stderr);
		c->saved_stderr = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
		if (c->saved_stderr >= 0)
			dup2(fileno(c->log), STDERR_FILENO);
	}
	if (start_curses(c, why) < 0)
		goto fail;
	arm_emergency(c);

	struct sd_screen_cfg cfg = {
		.command = ops->command,
		.ctx = ctx,
		.theme = &theme,
		.theme_dirs = c->dirp,
		.ntheme_dirs = c->ndirs,
		.utf8 = utf8,
		.bell = o->bell,
		.log = c->log,
	};
	if (sd_screen_create(&c->screen, &cfg, why) != 0)
		goto fail;

	if (start_handles(c, why) < 0)
		goto fail;

	active = c;
	clog_(c, "started: %dx%d, %s, theme %s", COLS, LINES, utf8 ? "UTF-8" : "ASCII", sd_screen_theme(c->screen));
	first_frame(c);
	*out = c;
	return 0;

fail:
	create_failed(c);
	return -1;
}

void sd_cockpit_notify_revocation(struct sd_cockpit *c, const char *server)
{
	if (!c || c != active)
		return;
	sd_screen_revocation(c->screen, server);
	request_render(c, 1);
}

void sd_cockpit_notify_refused(struct sd_cockpit *c, const char *why)
{
	if (!c || c != active)
		return;
	sd_screen_refused(c->screen, why);
	request_render(c, 0);
}

