/* ui/screen.c - layout, theme colours, key actions, and the one place that
 * draws: sd_screen_render() redraws the panes marked dirty, one
 * wnoutrefresh() each, then a single doupdate() (tmux's discipline: events
 * only mark, the render draws). */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ui/dialog.h"
#include "ui/format.h"
#include "ui/keys.h"
#include "ui/pane.h"
#include "ui/screen.h"

/* Panes, in drawing order.  Tab cycles over the focusable ones. */
enum { P_HEADER, P_CLUSTER, P_MARKET, P_CHARTS, P_REVOCATIONS, P_STATUS, P_COUNT };

static const struct sd_pane_ops *const pane_ops[P_COUNT] = {
	[P_HEADER] = &sd_pane_header_ops,
	[P_CLUSTER] = &sd_pane_cluster_ops,
	[P_MARKET] = &sd_pane_market_ops,
	[P_CHARTS] = &sd_pane_charts_ops,
	[P_REVOCATIONS] = &sd_pane_revocations_ops,
	[P_STATUS] = &sd_pane_status_ops,
};

#define MIN_COLS 80
#define MIN_LINES 24
#define NOTE_MS 8000            /* how long the UI's own note stays */
#define HIGHLIGHT_MS 30000      /* how long a revoked server's row stays lit */
#define MAX_THEMES 32

struct sd_screen {
	struct sd_screen_cfg cfg;
	struct sd_theme theme;
	struct sd_glyphs g;
	struct sd_draw d;
	int default_colors;         /* use_default_colors() worked */
	struct sd_pane panes[P_COUNT];
	int focus;
	const struct sd_view *v;
	struct sd_view empty;
	int lines, cols;
	int too_small, small_dirty;
	int header_h, cluster_h;
	struct sd_modal modal;
	int hard;                   /* clearok at the next render */
	int bell;                   /* pending: 1 beep, 2 flash */
	uint64_t now;
	char note[256];
	enum sd_style note_style;
	uint64_t note_until;
	int note_until_message;     /* the note goes when the run's message changes */
	char note_message[160];
	char highlight[32];
	uint64_t highlight_until;
	char orphans_answered[400]; /* the orphans question this cockpit answered */
};

static void slog(struct sd_screen *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void slog(struct sd_screen *s, const char *fmt, ...)
{
	if (!s->cfg.log)
		return;
	char when[32];
	time_t t = time(NULL);
	struct tm tm;
	localtime_r(&t, &tm);
	strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
	fprintf(s->cfg.log, "%s cockpit: ", when);
	va_list ap;
	va_start(ap, fmt);
	vfprintf(s->cfg.log, fmt, ap);
	va_end(ap);
	fputc('\n', s->cfg.log);
	fflush(s->cfg.log);
}

static int nservers(const struct sd_view *v)
{
	return v->servers && v->nservers > 0 ? v->nservers : 0;
}

static int noffers(const struct sd_view *v)
{
	return v->offers && v->noffers > 0 ? v->noffers : 0;
}

static void mark_all(struct sd_screen *s)
{
	for (int i = 0; i < P_COUNT; i++)
		s->panes[i].dirty = 1;
	s->small_dirty = 1;
	if (s->modal.kind)
		s->modal.dirty = 1;
}

/* ---- theme ---- */

static attr_t curses_attrs(unsigned a)
{
	attr_t r = A_NORMAL;
	if (a & SD_ATTR_BOLD) r |= A_BOLD;
	if (a & SD_ATTR_DIM) r |= A_DIM;
	if (a & SD_ATTR_UNDERLINE) r |= A_UNDERLINE;
	if (a & SD_ATTR_REVERSE) r |= A_REVERSE;
	if (a & SD_ATTR_STANDOUT) r |= A_STANDOUT;
#ifdef A_ITALIC
	if (a & SD_ATTR_ITALIC) r |= A_ITALIC;
#endif
	return r;
}

/* Turns the theme's styles into attributes: one colour pair per meaning,
 * colours the terminal lacks mapped to the nearest it has, none at all on
 * a terminal without colour. */
static void apply_theme(struct sd_screen *s)
{
	int colors = has_colors() ? COLORS : 0;
	for (int i = 0; i < SD_STYLE_COUNT; i++) {
		const struct sd_theme_style *st = &s->theme.st[i];
		attr_t a = curses_attrs(st->attrs);
		if (colors >= 8 && COLOR_PAIRS > SD_STYLE_COUNT && (st->fg >= 0 || st->bg >= 0)) {
			int fg = st->fg >= 0 ? sd_theme_nearest(st->fg, colors) : -1;
			int bg = st->bg >= 0 ? sd_theme_nearest(st->bg, colors) : -1;
			if (!s->default_colors) {
				if (fg < 0) fg = COLOR_WHITE;
				if (bg < 0) bg = COLOR_BLACK;
			}
			init_pair((short)(i + 1), (short)fg, (short)bg);
			a |= COLOR_PAIR(i + 1);
		}
		s->d.a[i] = a;
	}
	s->d.theme = s->theme.name;
	for (int i = 0; i < P_COUNT; i++) {
		if (s->panes[i].win)
			wbkgdset(s->panes[i].win, ' ' | s->d.a[SD_STYLE_NORMAL]);
	}
	wbkgdset(stdscr, ' ' | s->d.a[SD_STYLE_NORMAL]);
	mark_all(s);
}

/* ---- layout ---- */

static int clampi(int v, int lo, int hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

static void want_sizes(struct sd_screen *s, int *header_h, int *cluster_h)
{
	int body;
	*header_h = clampi(sd_pane_header_rows(s->v, s->cols, &s->g), 2, 4);
	body = s->lines - *header_h - 1;
	*cluster_h = clampi(nservers(s->v) + 3, 6, body * 2 / 5);
}

static void place(struct sd_screen *s, int i, int y, int x, int h, int w)
{
	struct sd_pane *p = &s->panes[i];
	if (p->win)
		delwin(p->win);
	p->win = newwin(h, w, y, x);
	p->y = y, p->x = x, p->h = h, p->w = w;
	p->dirty = 1;
	if (p->win) {
		wbkgdset(p->win, ' ' | s->d.a[SD_STYLE_NORMAL]);
		/* Wide characters at the right edge must not scroll it. */
		scrollok(p->win, FALSE);
		leaveok(p->win, TRUE);
	}
}

static void layout(struct sd_screen *s)
{
	getmaxyx(stdscr, s->lines, s->cols);
	s->too_small = s->cols < MIN_COLS || s->lines < MIN_LINES;
	for (int i = 0; i < P_COUNT; i++) {
		if (s->panes[i].win)
			delwin(s->panes[i].win);
		s->panes[i].win = NULL;
	}
	mark_all(s);
	if (s->too_small) {
		if (s->modal.win) {
			delwin(s->modal.win);
			s->modal.win = NULL;
		}
		return;
	}
	int W = s->cols, H = s->lines;
	want_sizes(s, &s->header_h, &s->cluster_h);
	int body_y = s->header_h;
	int body_h = H - s->header_h - 1;
	int rest_h = body_h - s->cluster_h;
	int market_w = W * 3 / 5;
	int charts_h = (rest_h + 1) / 2;
	place(s, P_HEADER, 0, 0, s->header_h, W);
	place(s, P_CLUSTER, body_y, 0, s->cluster_h, W);
	place(s, P_MARKET, body_y + s->cluster_h, 0, rest_h, market_w);
	place(s, P_CHARTS, body_y + s->cluster_h, market_w, charts_h, W - market_w);
	place(s, P_REVOCATIONS, body_y + s->cluster_h + charts_h, market_w, rest_h - charts_h, W - market_w);
	place(s, P_STATUS, H - 1, 0, 1, W);
	if (s->modal.kind)
		sd_modal_place(&s->modal, H, W, s->v, &s->g);
}

/* ---- the UI's own note on the status line ---- */

static void set_note(struct sd_screen *s, enum sd_style style, int until_message, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void set_note(struct sd_screen *s, enum sd_style style, int until_message, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s->note, sizeof s->note, fmt, ap);
	va_end(ap);
	s->note_style = style;
	s->note_until = s->now + NOTE_MS;
	s->note_until_message = until_message;
	snprintf(s->note_message, sizeof s->note_message, "%.*s", (int)sizeof s->v->message, s->v->message);
	s->panes[P_STATUS].dirty = 1;
}

static int run_command(struct sd_screen *s, const char *line)
{
	char *why = NULL;
	int rc = s->cfg.command ? s->cfg.command(s->cfg.ctx, line, &why) : -1;
	if (rc != 0) {
		set_note(s, SD_STYLE_CRIT, 0, "%s", why ? why : "command refused");
		slog(s, "command '%s' failed: %s", line, why ? why : "?");
	} else {
		/* Until the run answers with a message of its own. */
		set_note(s, SD_STYLE_OK, 1, "sent: %s", line);
		slog(s, "command '%s'", line);
	}
	free(why);
	return SD_KEY_HANDLED | SD_KEY_REDRAW;
}

/* ---- public ---- */

int sd_screen_create(struct sd_screen **out, const struct sd_screen_cfg *cfg, char **why)
{
	struct sd_screen *s = calloc(1, sizeof *s);
	if (!s) {
		if (why)
			*why = strdup("out of memory");
		return -1;
	}
	s->cfg = *cfg;
	if (cfg->theme)
		s->theme = *cfg->theme;
	else
		sd_theme_builtin(&s->theme, 0);
	sd_glyphs_init(&s->g, cfg->utf8);
	s->d.g = &s->g;
	s->d.highlight = s->highlight;
	s->d.note = s->note;
	s->v = &s->empty;
	for (int i = 0; i < P_COUNT; i++)
		s->panes[i].ops = pane_ops[i];
	s->focus = P_CLUSTER;
	if (has_colors()) {
		start_color();
		s->default_colors = use_default_colors() == OK;
	}
	apply_theme(s);
	layout(s);
	*out = s;
	return 0;
}

void sd_screen_destroy(struct sd_screen *s)
{
	if (!s)
		return;
	sd_modal_close(&s->modal);
	for (int i = 0; i < P_COUNT; i++) {
		if (s->panes[i].win)
			delwin(s->panes[i].win);
	}
	free(s);
}

static int open_confirm(struct sd_screen *s, const char *title, const char *command, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int close_modal(struct sd_screen *s);

/* The provider's question about an earlier controller's VMs (view.h): a
 * dialog that needs y (adopt) or n (delete), opened once no other dialog
 * is open, its text following the question as it grows.  A watching
 * (read-only) cockpit only shows it in the status line. */
static void ask_orphans(struct sd_screen *s)
{
	const char *q = s->v->orphans_question;
	int open = s->modal.kind == SD_MODAL_CONFIRM && s->modal.command_no[0];
	if (!q[0] || s->v->read_only || !strcmp(q, s->orphans_answered)) {
		if (open && !q[0])
			close_modal(s);   /* answered elsewhere (another cockpit, a command) */
		return;
	}
	if (open) {
		if (strncmp(s->modal.question, q, strlen(q))) {
			snprintf(s->modal.question, sizeof s->modal.question, "%s. y: this run's servers adopt them "
			         "(no new VMs where one is left); n: delete them.", q);
			if (!s->too_small)
				sd_modal_place(&s->modal, s->lines, s->cols, s->v, &s->g);
			s->modal.dirty = 1;
		}
		return;
	}
	if (s->modal.kind != SD_MODAL_NONE)
		return;
	open_confirm(s, "VMs of an earlier controller", "orphans adopt", "%s. y: this run's servers adopt them (no new "
	             "VMs where one is left); n: delete them.", q);
	snprintf(s->modal.command_no, sizeof s->modal.command_no, "orphans delete");
	snprintf(s->modal.yes, sizeof s->modal.yes, "adopt");
	snprintf(s->modal.no, sizeof s->modal.no, "delete");
}

int sd_screen_update(struct sd_screen *s, const struct sd_view *v, uint64_t now_ms)
{
	s->v = v ? v : &s->empty;
	s->now = now_ms;
	if (!s->too_small) {
		int hh, ch;
		want_sizes(s, &hh, &ch);
		if (hh != s->header_h || ch != s->cluster_h)
			layout(s);
	}
	for (int i = 0; i < P_COUNT; i++) {
		struct sd_pane *p = &s->panes[i];
		uint64_t sig = p->ops->signature(p, s->v);
		if (sig != p->sig) {
			p->sig = sig;
			p->dirty = 1;
		}
	}
	if (s->modal.kind == SD_MODAL_PICKER && s->panes[P_MARKET].dirty)
		s->modal.dirty = 1;
	ask_orphans(s);
	if (s->modal.kind == SD_MODAL_WHATIF && s->modal.whatif_version != s->v->whatif_version) {
		if (!s->too_small)   /* the rows decide its height */
			sd_modal_place(&s->modal, s->lines, s->cols, s->v, &s->g);
		s->modal.dirty = 1;
	}
	return sd_screen_expire(s, now_ms);
}

int sd_screen_expire(struct sd_screen *s, uint64_t now_ms)
{
	s->now = now_ms;
	if (s->note[0] && (now_ms >= s->note_until ||
	    (s->note_until_message && strncmp(s->note_message, s->v->message, sizeof s->note_message) != 0))) {
		s->note[0] = '\0';
		s->panes[P_STATUS].dirty = 1;
	}
	if (s->highlight[0] && now_ms >= s->highlight_until) {
		s->highlight[0] = '\0';
		s->panes[P_CLUSTER].dirty = 1;
	}
	return sd_screen_dirty(s);
}

int sd_screen_dirty(const struct sd_screen *s)
{
	if (s->hard || s->bell)
		return 1;
	if (s->too_small)
		return s->small_dirty;
	for (int i = 0; i < P_COUNT; i++) {
		if (s->panes[i].dirty)
			return 1;
	}
	return s->modal.kind && s->modal.dirty;
}

void sd_screen_invalidate(struct sd_screen *s, int hard)
{
	mark_all(s);
	if (hard)
		s->hard = 1;
}

void sd_screen_resize(struct sd_screen *s)
{
	layout(s);
	s->hard = 1;
}

static void draw_too_small(struct sd_screen *s)
{
	char a[80], b[80];
	werase(stdscr);
	wattrset(stdscr, s->d.a[SD_STYLE_CRIT]);
	snprintf(a, sizeof a, "terminal too small: %dx%d", s->cols, s->lines);
	snprintf(b, sizeof b, "spotdeck needs at least %dx%d", MIN_COLS, MIN_LINES);
	int y = s->lines / 2 - 1;
	if (y < 0)
		y = 0;
	int xa = (s->cols - (int)strlen(a)) / 2, xb = (s->cols - (int)strlen(b)) / 2;
	sd_put(stdscr, &s->g, y, xa > 0 ? xa : 0, a, s->cols);
	wattrset(stdscr, s->d.a[SD_STYLE_NORMAL]);
	if (y + 1 < s->lines)
		sd_put(stdscr, &s->g, y + 1, xb > 0 ? xb : 0, b, s->cols);
	wnoutrefresh(stdscr);
}

int sd_screen_render(struct sd_screen *s)
{
	int n = 0;
	if (s->too_small) {
		if (s->small_dirty || s->hard) {
			draw_too_small(s);
			s->small_dirty = 0;
			n = 1;
		}
	} else {
		for (int i = 0; i < P_COUNT; i++) {
			struct sd_pane *p = &s->panes[i];
			if (!p->dirty || !p->win)
				continue;
			werase(p->win);
			s->d.focused = i == s->focus;
			p->ops->draw(p, s->v, &s->d);
			wnoutrefresh(p->win);
			p->dirty = 0;
			n++;
		}
		/* The dialog stays on top of whatever was redrawn under it. */
		if (s->modal.kind && s->modal.win && (s->modal.dirty || n > 0)) {
			s->d.focused = 1;
			sd_modal_draw(&s->modal, s->v, &s->d);
			wnoutrefresh(s->modal.win);
			s->modal.dirty = 0;
		}
	}
	if (s->hard) {
		clearok(curscr, TRUE);
		s->hard = 0;
	}
	if (s->bell == 1)
		beep();
	else if (s->bell == 2)
		flash();
	s->bell = 0;
	doupdate();
	return n;
}

int sd_screen_key(struct sd_screen *s, int key)
{
	if (key == KEY_RESIZE || key == ERR)
		return 0;
	const struct sd_key *k = sd_key_find(sd_modal_ctx(&s->modal), key);
	if (!k || !k->run)
		return 0;
	int flags = k->run(s, key);
	if (flags & SD_KEY_LAYOUT)
		mark_all(s);
	return flags;
}

void sd_screen_refused(struct sd_screen *s, const char *why)
{
	set_note(s, SD_STYLE_CRIT, 0, "%s", why && why[0] ? why : "command refused");
	slog(s, "command refused: %s", s->note);
}

void sd_screen_revocation(struct sd_screen *s, const char *server)
{
	snprintf(s->highlight, sizeof s->highlight, "%s", server ? server : "");
	s->highlight_until = s->now + HIGHLIGHT_MS;
	s->panes[P_CLUSTER].dirty = 1;
	s->panes[P_REVOCATIONS].dirty = 1;
	/* A revocation outranks an older note: its suggestion shows at once. */
	s->note[0] = '\0';
	s->panes[P_STATUS].dirty = 1;
	s->bell = s->cfg.bell;
	slog(s, "revocation of %s", s->highlight);
}

const char *sd_screen_theme(const struct sd_screen *s)
{
	return s->theme.name;
}

const char *sd_screen_modal(const struct sd_screen *s)
{
	switch (s->modal.kind) {
	case SD_MODAL_PICKER: return "picker";
	case SD_MODAL_CONFIRM: return "confirm";
	case SD_MODAL_HELP: return "help";
	case SD_MODAL_WHATIF: return "whatif";
	case SD_MODAL_NONE: break;
	}
	return NULL;
}

/* ---- actions (the key table's run functions) ---- */

static int open_modal(struct sd_screen *s, enum sd_modal_kind kind)
{
	s->modal.kind = kind;
	if (!s->too_small)
		sd_modal_place(&s->modal, s->lines, s->cols, s->v, &s->g);
	s->modal.dirty = 1;
	return SD_KEY_HANDLED | SD_KEY_REDRAW;
}

static int close_modal(struct sd_screen *s)
{
	sd_modal_close(&s->modal);
	/* What was under it must come back. */
	mark_all(s);
	return SD_KEY_HANDLED | SD_KEY_REDRAW;
}

static int open_picker(struct sd_screen *s, const char *verb, const char *prefix, const char *title,
                       const char *preselect)
{
	if (noffers(s->v) == 0) {
		set_note(s, SD_STYLE_WARN, 0, "no offers in the market");
		return SD_KEY_HANDLED | SD_KEY_REDRAW;
	}
	if (s->modal.kind != SD_MODAL_NONE)
		close_modal(s);
	memset(&s->modal, 0, sizeof s->modal);
	snprintf(s->modal.verb, sizeof s->modal.verb, "%s", verb);
	snprintf(s->modal.prefix, sizeof s->modal.prefix, "%s", prefix);
	snprintf(s->modal.title, sizeof s->modal.title, "%s", title);
	if (preselect)
		snprintf(s->modal.list.sel_id, sizeof s->modal.list.sel_id, "%s", preselect);
	return open_modal(s, SD_MODAL_PICKER);
}

static int open_confirm(struct sd_screen *s, const char *title, const char *command, const char *fmt, ...)
{
	/* A confirmation opened from another modal (Enter on a what-if row)
	 * replaces it: its window goes and what was under it comes back. */
	if (s->modal.kind != SD_MODAL_NONE)
		close_modal(s);
	memset(&s->modal, 0, sizeof s->modal);
	snprintf(s->modal.title, sizeof s->modal.title, "%s", title);
	snprintf(s->modal.command, sizeof s->modal.command, "%s", command);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s->modal.question, sizeof s->modal.question, fmt, ap);
	va_end(ap);
	return open_modal(s, SD_MODAL_CONFIRM);
}

/* The server selected in the cluster pane, or NULL. */
static const struct sd_view_server *selected_server(struct sd_screen *s)
{
	struct sd_pane *p = &s->panes[P_CLUSTER];
	int i = sd_list_resolve(&p->list, s->v, nservers(s->v), sd_server_id, 0);
	return i < 0 ? NULL : &s->v->servers[i];
}

/* The add picker's title, in the run's unit (a language model's tokens). */
static const char *picker_title(const struct sd_view *v)
{
	return v && v->unit_tokens ? "Add a server: offers by $ per million tokens"
	                           : "Add a server: offers by $ per million images";
}

int sd_act_add(struct sd_screen *s, int key)
{
	return open_picker(s, "add", "add ", picker_title(s->v), NULL);
}

int sd_act_enter(struct sd_screen *s, int key)
{
	if (s->focus == P_MARKET) {
		struct sd_pane *p = &s->panes[P_MARKET];
		int i = sd_list_resolve(&p->list, s->v, noffers(s->v), sd_offer_id, 0);
		return open_picker(s, "add", "add ", picker_title(s->v),
		                   i >= 0 ? s->v->offers[i].id : NULL);
	}
	if (s->focus == P_CLUSTER)
		return sd_act_swap(s, key);
	return SD_KEY_HANDLED;
}

int sd_act_swap(struct sd_screen *s, int key)
{
	const struct sd_view_server *sv = selected_server(s);
	if (!sv) {
		set_note(s, SD_STYLE_WARN, 0, "no server to swap");
		return SD_KEY_HANDLED | SD_KEY_REDRAW;
	}
	if (!sd_state_live(sv->state)) {
		set_note(s, SD_STYLE_WARN, 0, "%.31s is %.15s: nothing to swap (a to add a server)", sv->id, sv->state);
		return SD_KEY_HANDLED | SD_KEY_REDRAW;
	}
	char prefix[64], title[128];
	snprintf(prefix, sizeof prefix, "swap %.31s ", sv->id);
	snprintf(title, sizeof title, "Swap %.31s (%.15s in %.31s) for", sv->id, sv->gpu, sv->zone);
	return open_picker(s, "swap", prefix, title, NULL);
}

int sd_act_drop(struct sd_screen *s, int key)
{
	const struct sd_view_server *sv = selected_server(s);
	if (!sv) {
		set_note(s, SD_STYLE_WARN, 0, "no server to drop");
		return SD_KEY_HANDLED | SD_KEY_REDRAW;
	}
	if (!sd_state_live(sv->state)) {
		set_note(s, SD_STYLE_WARN, 0, "%.31s is %.15s already: nothing to drop", sv->id, sv->state);
		return SD_KEY_HANDLED | SD_KEY_REDRAW;
	}
	char cmd[64];
	snprintf(cmd, sizeof cmd, "drop %.31s", sv->id);
	return open_confirm(s, "Drop a server", cmd, "Drop %.31s (%.15s in %.31s, %.15s)? It is released at once.",
	                    sv->id, sv->gpu, sv->zone, sv->state);
}

int sd_act_checkpoint(struct sd_screen *s, int key)
{
	return run_command(s, "checkpoint");
}

int sd_act_pause(struct sd_screen *s, int key)
{
	return run_command(s, s->v->paused ? "resume" : "pause");
}

/* A: the announced action is held; without one the autopilot is switched
 * off, or on (the controller says when it has no goal yet). */
int sd_act_autopilot(struct sd_screen *s, int key)
{
	if (s->v->autopilot_pending[0])
		return run_command(s, "autopilot hold");
	return run_command(s, s->v->autopilot_on ? "autopilot off" : "autopilot on");
}

int sd_act_accept(struct sd_screen *s, int key)
{
	if (!s->v->suggestion[0]) {
		set_note(s, SD_STYLE_WARN, 0, "no suggestion to accept");
		return SD_KEY_HANDLED | SD_KEY_REDRAW;
	}
	char line[96];
	snprintf(line, sizeof line, "add %.*s", (int)sizeof s->v->suggestion, s->v->suggestion);
	return run_command(s, line);
}

int sd_act_theme(struct sd_screen *s, int key)
{
	char names[MAX_THEMES][64];
	int n = sd_theme_list(s->cfg.theme_dirs, s->cfg.ntheme_dirs, names, MAX_THEMES);
	int cur = -1;
	for (int i = 0; i < n; i++) {
		if (strcmp(names[i], s->theme.name) == 0)
			cur = i;
	}
	/* Try each next name in turn; a broken file is reported and skipped. */
	for (int k = 1; k <= n; k++) {
		const char *name = names[(cur + k + n) % n];
		struct sd_theme t;
		char *why = NULL;
		if (sd_theme_load(&t, name, s->cfg.theme_dirs, s->cfg.ntheme_dirs, &why) != 0) {
			set_note(s, SD_STYLE_CRIT, 0, "%s", why ? why : "theme error");
			slog(s, "theme: %s", why ? why : "?");
			free(why);
			return SD_KEY_HANDLED | SD_KEY_REDRAW;
		}
		if (strcmp(t.name, s->theme.name) == 0 && n > 1)
			continue;
		s->theme = t;
		apply_theme(s);
		set_note(s, SD_STYLE_OK, 0, "theme %s", s->theme.name);
		return SD_KEY_HANDLED | SD_KEY_LAYOUT | SD_KEY_REDRAW;
	}
	return SD_KEY_HANDLED;
}

/* The what-if dialog: asks the run to plan (the rows arrive in the view)
 * and shows what it has meanwhile. */
int sd_act_whatif(struct sd_screen *s, int key)
{
	if (!sd_whatif_offered(s->v)) {
		/* Real machines (the ssh provider): nothing to replay.  Short
		 * enough for the status line of 80 columns beside two hints. */
		set_note(s, SD_STYLE_WARN, 0, "what if: none for %s hosts (it replays the simulator)", s->v->provider);
		return SD_KEY_HANDLED | SD_KEY_REDRAW;
	}
	run_command(s, "plan");
	memset(&s->modal, 0, sizeof s->modal);
	return open_modal(s, SD_MODAL_WHATIF);
}

int sd_act_help(struct sd_screen *s, int key)
{
	memset(&s->modal, 0, sizeof s->modal);
	return open_modal(s, SD_MODAL_HELP);
}

int sd_act_quit(struct sd_screen *s, int key)
{
	int live = 0;
	for (int i = 0; i < nservers(s->v); i++)
		live += sd_state_live(s->v->servers[i].state);
	/* A read-only cockpit only leaves: nothing to confirm. */
	if (live == 0 || s->v->read_only)
		return run_command(s, "quit");
	return open_confirm(s, "Quit", "quit", "Quit spotdeck? %d server%s still run%s: the run checkpoints and releases them.%s",
	                    live, live == 1 ? "" : "s", live == 1 ? "s" : "",
	                    s->v->clients > 0 ? " (x detaches and leaves it running.)" : "");
}

int sd_act_detach(struct sd_screen *s, int key)
{
	return run_command(s, "detach");
}

static int focusable_next(const struct sd_screen *s, int from, int dir)
{
	int i = from;
	for (int k = 0; k < P_COUNT; k++) {
		i = (i + dir + P_COUNT) % P_COUNT;
		if (pane_ops[i]->focusable)
			return i;
	}
	return from;
}

static int move_focus(struct sd_screen *s, int dir)
{
	int to = focusable_next(s, s->focus, dir);
	s->panes[s->focus].dirty = 1;
	s->panes[to].dirty = 1;
	s->focus = to;
	return SD_KEY_HANDLED | SD_KEY_REDRAW;
}

int sd_act_focus_next(struct sd_screen *s, int key)
{
	return move_focus(s, 1);
}

int sd_act_focus_prev(struct sd_screen *s, int key)
{
	return move_focus(s, -1);
}

int sd_act_nav(struct sd_screen *s, int key)
{
	enum sd_nav how;
	switch (key) {
	case 'k': case KEY_UP: how = SD_NAV_UP; break;
	case 'j': case KEY_DOWN: how = SD_NAV_DOWN; break;
	case KEY_PPAGE: how = SD_NAV_PGUP; break;
	case KEY_NPAGE: how = SD_NAV_PGDN; break;
	case 'g': case KEY_HOME: how = SD_NAV_HOME; break;
	default: how = SD_NAV_END; break;
	}
	if (s->modal.kind == SD_MODAL_WHATIF) {
		int f = sd_list_nav(&s->modal.list, how, s->v, sd_whatif_rows(s->v), sd_whatif_row_id, s->modal.h - 6);
		if (f & SD_KEY_REDRAW)
			s->modal.dirty = 1;
		return f;
	}
	if (s->modal.kind == SD_MODAL_PICKER) {
		int f = sd_list_nav(&s->modal.list, how, s->v, noffers(s->v), sd_offer_id, s->modal.h - 4);
		if (f & SD_KEY_REDRAW)
			s->modal.dirty = 1;
		return f;
	}
	struct sd_pane *p = &s->panes[s->focus];
	if (!p->ops->nav)
		return SD_KEY_HANDLED;
	int f = p->ops->nav(p, how, s->v);
	if (f & SD_KEY_REDRAW)
		p->dirty = 1;
	return f;
}

int sd_act_escape(struct sd_screen *s, int key)
{
	s->note[0] = '\0';
	s->highlight[0] = '\0';
	s->panes[P_STATUS].dirty = 1;
	s->panes[P_CLUSTER].dirty = 1;
	return SD_KEY_HANDLED | SD_KEY_REDRAW;
}

int sd_act_redraw(struct sd_screen *s, int key)
{
	sd_screen_invalidate(s, 1);
	return SD_KEY_HANDLED | SD_KEY_REDRAW;
}

/* Enter on a what-if row: the switch, after a confirmation. */
static int pick_whatif(struct sd_screen *s)
{
	int i = sd_list_resolve(&s->modal.list, s->v, sd_whatif_rows(s->v), sd_whatif_row_id, 0);
	if (i < 0)
		return SD_KEY_HANDLED;
	const struct sd_view_whatif *r = &s->v->whatif[i];
	if (!r->commands[0]) {
		set_note(s, SD_STYLE_WARN, 0, "%.63s: that is the cluster running now", r->label);
		return SD_KEY_HANDLED | SD_KEY_REDRAW;
	}
	char title[96], when[24], usd[24];
	snprintf(title, sizeof title, "Switch to %.63s", r->label);
	return open_confirm(s, title, r->commands, "Switch to %.63s (simulated: %s, %s)? %.159s",
	                    r->label, sd_fmt_duration(when, sizeof when, r->time_p50_s),
	                    sd_fmt_usd(usd, sizeof usd, r->cost_p50_usd), r->summary);
}

int sd_act_pick(struct sd_screen *s, int key)
{
	if (s->modal.kind == SD_MODAL_WHATIF)
		return pick_whatif(s);
	int i = sd_list_resolve(&s->modal.list, s->v, noffers(s->v), sd_offer_id, 0);
	if (i < 0)
		return close_modal(s);
	char line[256];
	snprintf(line, sizeof line, "%s%.*s", s->modal.prefix, (int)sizeof s->v->offers[i].id, s->v->offers[i].id);
	close_modal(s);
	return run_command(s, line);
}

int sd_act_confirm(struct sd_screen *s, int key)
{
	/* One command per line (a what-if switch is several adds and drops). */
	char lines[sizeof s->modal.command];
	snprintf(lines, sizeof lines, "%s", s->modal.command);
	if (s->modal.command_no[0])   /* the orphans question: not asked again */
		snprintf(s->orphans_answered, sizeof s->orphans_answered, "%s", s->v->orphans_question);
	close_modal(s);
	int f = SD_KEY_HANDLED | SD_KEY_REDRAW;
	for (char *save = NULL, *l = strtok_r(lines, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
		f |= run_command(s, l);
	return f;
}

int sd_act_cancel(struct sd_screen *s, int key)
{
	if (s->modal.kind == SD_MODAL_CONFIRM && s->modal.command_no[0]) {
		if (key != 'n' && key != 'N') {
			set_note(s, SD_STYLE_WARN, 0, "the run waits for an answer: y adopts, n deletes");
			return SD_KEY_HANDLED | SD_KEY_REDRAW;
		}
		char no[sizeof s->modal.command_no];
		snprintf(no, sizeof no, "%s", s->modal.command_no);
		snprintf(s->orphans_answered, sizeof s->orphans_answered, "%s", s->v->orphans_question);
		close_modal(s);
		return run_command(s, no);
	}
	return close_modal(s);
}
