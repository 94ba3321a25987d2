/* tests/ui/test-ui-screen.c - the cockpit's screen (ui/screen.c) on a virtual
 * terminal (newterm writing to a temporary file, read back through curscr
 * and, for hostile text, as the bytes sent to the terminal): layout and
 * titles at 120x40, 80x24 and a sweep of sizes, the too-small screen,
 * redraw of only the panes whose data changed, every key of the key table
 * and the commands they send, themes, the revocation highlight, the ASCII
 * fallback, and views no glue should send (NaN, control characters, bad
 * counts, NULL arrays) drawn without a crash or a byte that could reach the
 * terminal as a control sequence.
 *
 * curscr can never hold a raw ESC, BEL or CR (curses shows a control
 * character it is given as ^[, ^G, ^M), so reading it back proves nothing
 * about the sanitiser in ui/tui.c: the hostile test asserts that the
 * sanitiser's '?' replacements are what is on the screen, and scans the bytes
 * curses actually wrote to the terminal for the hostile sequences. */
#include "config.h"

#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "tests/ui-fixture.h"
#include "ui/format.h"
#include "ui/pane.h"
#include "ui/screen.h"
#include "ui/tui.h"

#include "tests/check.h"

/* ---- the command callback: records the last line ---- */

static char last_cmd[256];
static int ncmds;
static int refuse;              /* next command fails */

static int cmd(void *ctx, const char *line, char **why)
{
	snprintf(last_cmd, sizeof last_cmd, "%s", line);
	ncmds++;
	if (refuse) {
		refuse = 0;
		*why = strdup("refused for the test");
		return -1;
	}
	return 0;
}

/* ---- the virtual screen ---- */

static char screen_text[300 * 100 * 4];

/* Reads curscr back as UTF-8 lines into screen_text. */
static const char *grab(void)
{
	size_t off = 0;
	wchar_t line[512];
	char mb[2048];
	for (int y = 0; y < LINES; y++) {
		int n = mvwinnwstr(curscr, y, 0, line, COLS < 511 ? COLS : 511);
		if (n < 0)
			n = 0;
		line[n] = 0;
		size_t k = wcstombs(mb, line, sizeof mb - 1);
		if (k == (size_t)-1)
			k = 0;
		mb[k] = '\0';
		off += (size_t)snprintf(screen_text + off, sizeof screen_text - off, "%s\n", mb);
	}
	return screen_text;
}

static int on_screen(const char *s)
{
	return strstr(grab(), s) != NULL;
}

static void resize(int lines, int cols, struct sd_screen *s)
{
	resizeterm(lines, cols);
	sd_screen_resize(s);
}

static int render(struct sd_screen *s, const struct sd_view *v)
{
	static uint64_t now = 1000;
	now += 100;
	sd_screen_update(s, v, now);
	return sd_screen_render(s);
}

/* The attributes of the first cell of the first line holding TEXT. */
static attr_t attr_of(const char *text)
{
	const char *t = grab();
	const char *hit = strstr(t, text);
	if (!hit)
		return 0;
	int y = 0;
	for (const char *p = t; p < hit; p++)
		y += *p == '\n';
	/* The column: count characters, not bytes, up to the hit. */
	const char *line = hit;
	while (line > t && line[-1] != '\n')
		line--;
	int x = (int)mbstowcs(NULL, line, 0);
	char tmp[1024];
	snprintf(tmp, sizeof tmp, "%.*s", (int)(hit - line), line);
	x = (int)mbstowcs(NULL, tmp, 0);
	return mvwinch(curscr, y, x) & (A_ATTRIBUTES | A_COLOR);
}

static struct sd_screen *make(int utf8, const char *const *dirs, int ndirs)
{
	struct sd_screen *s = NULL;
	struct sd_screen_cfg cfg = {
		.command = cmd, .utf8 = utf8, .theme_dirs = dirs, .ntheme_dirs = ndirs, .bell = 2,
	};
	char *why = NULL;
	if (sd_screen_create(&s, &cfg, &why) != 0) {
		fprintf(stderr, "sd_screen_create: %s\n", why ? why : "?");
		exit(1);
	}
	return s;
}

/* ---- tests ---- */

static void test_layout(struct ui_fixture *f)
{
	struct sd_screen *s = make(1, NULL, 0);
	resize(40, 120, s);
	int n = render(s, &f->view);
	CHECK(n == 6, "first render drew %d panes", n);
	static const char *const want[] = {
		"Cluster (4 servers", "Market (9 offers)", "Training", "Revocations (3)", "SIMULATED market",
		"cnn on fashion-mnist, batch 256", "step 1234/23400", "epoch 3/10", "loss 0.4123", "acc 85.21%",
		"4321 img/s", "elapsed 12:34", "ETA 1h02m", "spent $1.23", "now $4.56/h",
		"hazard x30, boot x0.1, seed 42", "~ emulated GPU speed", "* estimated price",
		"gce/us-west1-b/v100x1/spot", "notice 23s", "booting", "by GPU", "V100 2x", "s92",
		"a add", "? help", "q quit", "step 1234: loss 0.4123",
	};
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
		CHECK(on_screen(want[i]), "'%s' missing at 120x40", want[i]);
	CHECK(strstr(grab(), "\u2588") || strstr(grab(), "\u2587"), "no UTF-8 bars");
	/* The fixture's revocations (V100, K80, V100 in us-west1-b, us-east1-c,
	 * us-west1-b) grouped by GPU and by zone, most revoked first: each group
	 * once, with its own count. */
	const char *t = grab();
	const char *gpu = strstr(t, "by GPU"), *zone = strstr(t, "by zone");
	const char *v100 = gpu ? strstr(gpu, "V100 2x") : NULL, *k80 = gpu ? strstr(gpu, "K80 1x") : NULL;
	const char *west = zone ? strstr(zone, "us-west1-b 2x") : NULL;
	const char *east = zone ? strstr(zone, "us-east1-c 1x") : NULL;
	CHECK(v100 && k80 && v100 < k80 && (!zone || k80 < zone), "by GPU: want 'V100 2x' then 'K80 1x'");
	CHECK(west && east && west < east, "by zone: want 'us-west1-b 2x' then 'us-east1-c 1x'");
	CHECK(!strstr(t, "V100 1x"), "by GPU: V100 counted in two groups");

	/* Nothing changed: nothing drawn. */
	CHECK(!sd_screen_update(s, &f->view, 5000), "unchanged view marks panes dirty");
	CHECK(sd_screen_render(s) == 0, "unchanged view redrew panes");
	/* One change, one pane. */
	f->offers[2].usd_per_hour = 0.99;
	CHECK(render(s, &f->view) == 1, "an offer's price should redraw the market only");
	f->view.step++;
	CHECK(render(s, &f->view) == 1, "the step should redraw the header only");
	f->servers[0].uptime_s += 1;
	CHECK(render(s, &f->view) == 1, "an uptime should redraw the cluster only");
	snprintf(f->view.message, sizeof f->view.message, "hello from the run");
	CHECK(render(s, &f->view) == 1 && on_screen("hello from the run"), "message: status only");
	sd_view_series_push(&f->view.loss_hist, f->view.elapsed_s + 1, 0.3f);
	CHECK(render(s, &f->view) == 1, "a loss sample should redraw the charts only");

	/* 80x24: everything still there. */
	resize(24, 80, s);
	CHECK(render(s, &f->view) == 6, "resize redraws all");
	static const char *const small[] = { "Cluster (", "Market (9 offers)", "Training", "Revocations (3)",
	                                     "SIMULATED market", "epoch 3/10", "a add" };
	for (size_t i = 0; i < sizeof small / sizeof small[0]; i++)
		CHECK(on_screen(small[i]), "'%s' missing at 80x24", small[i]);

	resize(24, 79, s);
	render(s, &f->view);
	CHECK(on_screen("terminal too small: 79x24"), "79x24 not too small");
	resize(23, 80, s);
	render(s, &f->view);
	CHECK(on_screen("terminal too small: 80x23"), "80x23 not too small");
	resize(24, 80, s);
	render(s, &f->view);
	CHECK(!on_screen("too small") && on_screen("Cluster ("), "back from too small");
	sd_screen_destroy(s);
}

static void test_sizes(void)
{
	static struct ui_fixture big;
	ui_fixture_init(&big, 64);
	struct sd_screen *s = make(1, NULL, 0);
	int checked = 0;
	for (int h = 24; h <= 80; h += 7) {
		for (int w = 80; w <= 260; w += 23) {
			resize(h, w, s);
			render(s, &big.view);
			ui_fixture_tick(&big, 1);
			render(s, &big.view);
			const char *t = grab();
			CHECK(strstr(t, "Cluster (64 servers") && strstr(t, "Market (") && strstr(t, "Training") &&
			      strstr(t, "Revocations (") && strstr(t, "SIMULATED market"), "titles at %dx%d", w, h);
			checked++;
		}
	}
	/* Scrolling the cluster to its last server. */
	resize(40, 120, s);
	render(s, &big.view);
	sd_screen_key(s, KEY_END);
	render(s, &big.view);
	CHECK(on_screen("s64 "), "End did not reach s64");
	CHECK(on_screen("/64"), "no scroll position in the title");
	sd_screen_destroy(s);
	printf("ok: %d sizes from 80x24 to 260x80 with 64 servers\n", checked);
}

static void test_keys(struct ui_fixture *f)
{
	const char *dir = getenv("top_srcdir");
	char themes[1024];
	snprintf(themes, sizeof themes, "%s/themes", dir && *dir ? dir : ".");
	const char *dirs[] = { themes };
	struct sd_screen *s = make(1, dirs, 1);
	resize(40, 120, s);
	render(s, &f->view);
	const char *first = f->view.offers[0].id, *second = f->view.offers[1].id;
	char want[256];

	sd_screen_key(s, 'a');
	render(s, &f->view);
	CHECK(sd_screen_modal(s) && strcmp(sd_screen_modal(s), "picker") == 0, "a: no picker");
	CHECK(on_screen("Add a server") && on_screen("Enter add"), "picker not drawn");
	sd_screen_key(s, '\r');
	snprintf(want, sizeof want, "add %s", first);
	CHECK(strcmp(last_cmd, want) == 0, "a Enter sent '%s'", last_cmd);
	CHECK(!sd_screen_modal(s), "picker still open");
	render(s, &f->view);
	CHECK(on_screen("sent: add") && !on_screen("Add a server"), "picker not gone or no note");

	sd_screen_key(s, 'a');
	sd_screen_key(s, 'j');
	sd_screen_key(s, 27);
	CHECK(!sd_screen_modal(s), "Esc did not close the picker");
	ncmds = 0;
	sd_screen_key(s, 'a');
	sd_screen_key(s, 'q');
	CHECK(!sd_screen_modal(s) && ncmds == 0, "q in the picker should cancel, not quit");

	sd_screen_key(s, '?');
	render(s, &f->view);
	CHECK(on_screen("Help: spotdeck cockpit") && on_screen("drop the selected server") &&
	      on_screen("In dialogs"), "help");
	sd_screen_key(s, 'z');
	CHECK(!sd_screen_modal(s), "any key should close help");

	/* The cluster has the focus: j selects s2, d asks, y drops. */
	sd_screen_key(s, 'j');
	sd_screen_key(s, 'd');
	render(s, &f->view);
	CHECK(on_screen("Drop s2 (K80 in us-west1-b, training)?"), "drop question");
	sd_screen_key(s, 'y');
	CHECK(strcmp(last_cmd, "drop s2") == 0, "d y sent '%s'", last_cmd);
	sd_screen_key(s, 'd');
	sd_screen_key(s, 'n');
	CHECK(!sd_screen_modal(s) && strcmp(last_cmd, "drop s2") == 0, "n did not cancel");

	sd_screen_key(s, 's');
	render(s, &f->view);
	CHECK(on_screen("Swap s2 (K80 in us-west1-b) for"), "swap title");
	sd_screen_key(s, KEY_DOWN);
	sd_screen_key(s, KEY_ENTER);
	snprintf(want, sizeof want, "swap s2 %s", second);
	CHECK(strcmp(last_cmd, want) == 0, "s Down Enter sent '%s'", last_cmd);

	sd_screen_key(s, 'p');
	CHECK(strcmp(last_cmd, "pause") == 0, "p sent '%s'", last_cmd);
	f->view.paused = 1;
	f->view.version++;
	render(s, &f->view);
	CHECK(on_screen("PAUSED") && on_screen("p resume"), "paused header/hint");
	sd_screen_key(s, 'p');
	CHECK(strcmp(last_cmd, "resume") == 0, "p sent '%s' while paused", last_cmd);
	f->view.paused = 0;

	sd_screen_key(s, 'c');
	CHECK(strcmp(last_cmd, "checkpoint") == 0, "c sent '%s'", last_cmd);
	refuse = 1;
	sd_screen_key(s, 'c');
	render(s, &f->view);
	CHECK(on_screen("refused for the test"), "refusal not on the status line");
	sd_screen_key(s, 27);
	render(s, &f->view);
	CHECK(!on_screen("refused for the test"), "Esc did not clear the note");

	ncmds = 0;
	sd_screen_key(s, 'r');
	render(s, &f->view);
	CHECK(ncmds == 0 && on_screen("no suggestion to accept"), "r without a suggestion");
	ui_fixture_revoke(f, "s3");
	sd_screen_revocation(s, "s3");
	render(s, &f->view);
	CHECK(on_screen("r: replace s3 with gce/"), "suggestion not shown");
	attr_t hl = attr_of("s3   us-central1-c");
	CHECK(PAIR_NUMBER(hl) == SD_STYLE_HIGHLIGHT + 1, "revoked row not highlighted (pair %d)", (int)PAIR_NUMBER(hl));
	sd_screen_key(s, 'r');
	snprintf(want, sizeof want, "add %s", first);
	CHECK(strcmp(last_cmd, want) == 0, "r sent '%s'", last_cmd);
	sd_screen_key(s, 27);
	render(s, &f->view);
	CHECK(PAIR_NUMBER(attr_of("s3   us-central1-c")) != SD_STYLE_HIGHLIGHT + 1, "Esc kept the highlight");

	/* Focus: Tab goes cluster -> market -> revocations -> cluster; Enter
	 * in the market opens the picker at the selected offer. */
	sd_screen_key(s, '\t');
	sd_screen_key(s, 'j');
	sd_screen_key(s, '\r');
	CHECK(sd_screen_modal(s) && strcmp(sd_screen_modal(s), "picker") == 0, "Enter in the market");
	sd_screen_key(s, '\r');
	snprintf(want, sizeof want, "add %s", second);
	CHECK(strcmp(last_cmd, want) == 0, "market j Enter Enter sent '%s'", last_cmd);
	sd_screen_key(s, '\t');
	sd_screen_key(s, '\t');
	sd_screen_key(s, 'd');
	CHECK(sd_screen_modal(s) && strcmp(sd_screen_modal(s), "confirm") == 0, "d after a Tab round");
	sd_screen_key(s, 27);

	/* Themes from the directory, in order. */
	CHECK(strcmp(sd_screen_theme(s), "default") == 0, "theme %s", sd_screen_theme(s));
	sd_screen_key(s, 't');
	CHECK(strcmp(sd_screen_theme(s), "high-contrast") == 0, "t -> %s", sd_screen_theme(s));
	sd_screen_key(s, 't');
	sd_screen_key(s, 't');
	CHECK(strcmp(sd_screen_theme(s), "mono") == 0, "t t t -> %s", sd_screen_theme(s));
	render(s, &f->view);
	CHECK(PAIR_NUMBER(attr_of("Cluster (")) == 0, "mono theme still has colour");
	sd_screen_key(s, 't');
	CHECK(strcmp(sd_screen_theme(s), "default") == 0, "wraps to %s", sd_screen_theme(s));

	/* Quit asks while servers live, not otherwise. */
	ncmds = 0;
	sd_screen_key(s, 'q');
	CHECK(sd_screen_modal(s) && strcmp(sd_screen_modal(s), "confirm") == 0 && ncmds == 0, "q should ask");
	render(s, &f->view);
	CHECK(on_screen("Quit spotdeck?"), "quit question");
	sd_screen_key(s, 'y');
	CHECK(strcmp(last_cmd, "quit") == 0, "q y sent '%s'", last_cmd);
	for (int i = 0; i < f->view.nservers; i++)
		snprintf(f->servers[i].state, sizeof f->servers[i].state, "released");
	f->view.version++;
	render(s, &f->view);
	last_cmd[0] = '\0';
	sd_screen_key(s, 'q');
	CHECK(!sd_screen_modal(s) && strcmp(last_cmd, "quit") == 0, "q with no live server should quit at once");

	/* Keys that mean nothing here are not handled. */
	CHECK(sd_screen_key(s, 'Z') == 0, "Z handled");
	CHECK(sd_screen_key(s, KEY_RESIZE) == 0, "KEY_RESIZE handled");
	sd_screen_destroy(s);
}

static void test_ascii(struct ui_fixture *f)
{
	struct sd_screen *s = make(0, NULL, 0);
	resize(40, 120, s);
	render(s, &f->view);
	const char *t = grab();
	int bad = 0;
	for (const unsigned char *p = (const unsigned char *)t; *p; p++)
		bad += *p >= 0x80;
	CHECK(bad == 0, "%d non-ASCII bytes in ASCII mode", bad);
	CHECK(strstr(t, "^ revocation") && strstr(t, "+ Cluster (") && strchr(t, '#'), "ASCII glyphs");
	sd_screen_destroy(s);
}

/* ---- the bytes sent to the terminal ---- */

static FILE *term_out;          /* the virtual terminal's output file */

/* Everything curses wrote to the terminal since offset *from (which it
 * advances); a NUL-terminated malloc'd copy (NULs in it become 0x01),
 * length in *len. */
static char *term_bytes_since(long *from, size_t *len)
{
	fflush(term_out);
	long end = ftell(term_out);
	size_t n = end > *from ? (size_t)(end - *from) : 0;
	char *buf = malloc(n + 1);
	if (!buf)
		abort();
	size_t got = 0;
	if (fseek(term_out, *from, SEEK_SET) == 0)
		got = fread(buf, 1, n, term_out);
	fseek(term_out, end, SEEK_SET);
	for (size_t i = 0; i < got; i++)
		if (!buf[i])
			buf[i] = 1;
	buf[got] = '\0';
	*len = got;
	*from = end;
	return buf;
}

/* Whether needle occurs in the len bytes of hay. */
static int has_bytes(const char *hay, size_t len, const char *needle)
{
	return memmem(hay, len, needle, strlen(needle)) != NULL;
}

/* A view that breaks every rule a glue might break. */
static void test_hostile(void)
{
	static struct sd_view v;
	static struct sd_view_server sv[300];
	static struct sd_view_offer of[3];
	static struct sd_view_revocation rv[2];
	struct sd_screen *s = make(1, NULL, 0);
	resize(40, 120, s);

	memset(&v, 0, sizeof v);
	render(s, &v);
	CHECK(on_screen("Cluster (0 servers") && on_screen("no servers") && on_screen("no offers") &&
	      on_screen("no revocations yet"), "empty view");
	sd_screen_key(s, 'a');
	sd_screen_key(s, 'd');
	sd_screen_key(s, 's');
	CHECK(!sd_screen_modal(s), "dialogs opened on an empty view");

	/* Counts without arrays, negative counts. */
	v.nservers = 5;
	v.noffers = -3;
	v.nrevocations = 7;
	v.nmarks = 1000;
	v.version++;
	render(s, &v);

	/* Strings with escapes and broken UTF-8, numbers that are not. */
	snprintf(v.job, sizeof v.job, "evil \x1b[31mred\x1b[0m\r job \xff\xfe \xe2\x82");
	snprintf(v.message, sizeof v.message, "bell\a and \r carriage \x1b]0;title\a");
	snprintf(v.suggestion, sizeof v.suggestion, "\x1b[2J");
	v.loss = NAN;
	v.test_accuracy = INFINITY;
	v.images_per_sec = -INFINITY;
	v.eta_s = NAN;
	v.usd_spent = 1e308;
	v.elapsed_s = -5;
	v.hazard_scale = NAN;
	v.throughput.len = 100000;
	v.throughput.head = -7;
	v.loss_hist.len = 500;
	v.loss_hist.head = 3;
	for (int i = 0; i < SD_VIEW_HIST; i++) {
		v.loss_hist.v[i] = i % 3 ? NAN : (float)i;
		v.loss_hist.t[i] = i % 5 ? i : NAN;
		v.acc_hist.v[i] = 1e30f;
		v.acc_hist.t[i] = 1e300;
	}
	v.acc_hist.len = SD_VIEW_HIST;
	for (int i = 0; i < 300; i++) {
		memset(&sv[i], 0, sizeof sv[i]);
		snprintf(sv[i].id, sizeof sv[i].id, "s%d\x1b[K", i);
		snprintf(sv[i].zone, sizeof sv[i].zone, "z\xc3\x28\t\n");
		snprintf(sv[i].state, sizeof sv[i].state, i % 2 ? "training" : "weird\x07");
		sv[i].images_per_sec = i % 3 ? NAN : 1e300;
		sv[i].compute_ms = -1;
		sv[i].comm_ms = INFINITY;
		sv[i].uptime_s = NAN;
		sv[i].usd_per_hour = -2;
		sv[i].notice_left_s = i % 4 ? NAN : 1e12;
		sv[i].ips.len = i % 7 == 0 ? -4 : 1000;
		sv[i].ips.head = i;
		sv[i].rank = i - 150;
	}
	for (int i = 0; i < 3; i++) {
		memset(&of[i], 0, sizeof of[i]);
		snprintf(of[i].id, sizeof of[i].id, "offer\x1b[%d;1H%s", i, "\xe6\x97\xa5\xe6\x9c\xac");
		of[i].usd_per_hour = NAN;
		of[i].usd_per_mimage = INFINITY;
		of[i].p_revoked_1h = 7;
		of[i].available = -9;
		of[i].gpus = 1000000;
		of[i].transient = 1;
	}
	for (int i = 0; i < 2; i++) {
		memset(&rv[i], 0, sizeof rv[i]);
		snprintf(rv[i].server, sizeof rv[i].server, "\x1b");
		rv[i].t = NAN;
		rv[i].lifetime_s = -1;
		rv[i].steps_lost = -5;
		rv[i].recovery_s = NAN;
	}
	v.servers = sv;
	v.nservers = 300;
	v.offers = of;
	v.noffers = 3;
	v.revocations = rv;
	v.nrevocations = 2;
	v.version++;
	sd_screen_key(s, 27);   /* clear the notes of the keys above: the message shows */
	long sent = ftell(term_out);
	for (int h = 24; h <= 60; h += 36) {
		resize(h, h == 24 ? 80 : 200, s);
		render(s, &v);
		const char *t = grab();
		CHECK(!strchr(t, '\x1b') && !strchr(t, '\a') && !strchr(t, '\r'), "a control character reached the screen");
		/* curses shows a control character it is given as ^X: none may
		 * be on screen, and the sanitiser's '?' must be there instead. */
		CHECK(!strstr(t, "^["), "an ESC reached curses (shown as ^[)");
		CHECK(!strstr(t, "^G") && !strstr(t, "^M") && !strstr(t, "^I") && !strstr(t, "^J"),
		      "a BEL, CR, TAB or LF reached curses (shown as ^G, ^M, ^I, ^J)");
		CHECK(strstr(t, "evil ?[31mred?[0m? job"), "the job's ESCs and CR not replaced by '?' in the header");
		/* Later the status line holds the notes of the keys below, and
		 * the cluster is scrolled to its end. */
		if (h == 24) {
			CHECK(strstr(t, "r: add ?[2J"), "the suggestion's ESC not replaced by '?' on the status line");
			CHECK(strstr(t, "\u2502 s0?"), "the server id's ESC not replaced by '?' in the cluster pane");
			CHECK(strstr(t, " z?(?? "), "the zone's TAB and LF not replaced by '?'");
			CHECK(strstr(t, " weird? "), "the state's BEL not replaced by '?'");
		} else {
			CHECK(strstr(t, "offer?[0;1H"), "the offer id's ESC not replaced by '?' in the market pane");
		}
		/* What curses sent to the terminal: none of the hostile sequences. */
		size_t n;
		char *bytes = term_bytes_since(&sent, &n);
		CHECK(n > 0, "nothing was written to the terminal");
		static const char *const raw[] = { "\x1b[31mred", "\x1b[0m\r job", "\x1b]0;title", "bell\a",
		                                   "\r carriage", "s0\x1b[K", "offer\x1b[0;1H", "weird\a",
		                                   "add \x1b[2J", "z\xc3\x28\t" };
		for (size_t i = 0; i < sizeof raw / sizeof raw[0]; i++)
			CHECK(!has_bytes(bytes, n, raw[i]), "hostile sequence #%zu sent to the terminal at %dx%d", i,
			      h == 24 ? 80 : 200, h);
		free(bytes);
		CHECK(!strstr(t, "nan") && !strstr(t, "inf"), "nan/inf on screen");
		sd_screen_key(s, KEY_END);
		sd_screen_key(s, 'a');
		render(s, &v);
		sd_screen_key(s, '\r');
		sd_screen_key(s, '?');
		render(s, &v);
		sd_screen_key(s, 27);
		sd_screen_key(s, 'd');
		render(s, &v);
		sd_screen_key(s, 'y');
		render(s, &v);
	}
	sd_screen_destroy(s);
}

/* The throughput chart's "max" covers the rate shown beside it, even when
 * that rate is newer (higher) than every sample of the series. */
static void test_chart_max(struct ui_fixture *f)
{
	struct sd_screen *s = make(1, NULL, 0);
	resize(40, 120, s);
	float top = 0;
	for (int i = 0; i < f->view.throughput.len; i++) {
		float x = f->view.throughput.v[(f->view.throughput.head + i) % SD_VIEW_HIST];
		if (x > top)
			top = x;
	}
	f->view.images_per_sec = 3.0 * top;
	f->view.version++;
	render(s, &f->view);
	char want[32], rate[16];
	snprintf(want, sizeof want, "max %s", sd_fmt_rate(rate, sizeof rate, f->view.images_per_sec));
	CHECK(on_screen(want), "'%s' not on screen (series top %.0f)", want, top);
	sd_screen_destroy(s);
}

/* A language model's run (unit_tokens): tokens/s where an image run says
 * img/s (header, charts, cluster and market columns, $/Mtok, the add
 * picker's title), the
 * validation loss and its perplexity where it shows accuracy. */
static void test_language_model(struct ui_fixture *f)
{
	struct sd_screen *s = make(1, NULL, 0);
	resize(40, 120, s);
	f->view.unit_tokens = 1;
	f->view.test_accuracy = -1;
	f->view.val_loss = 1.234;
	f->view.images_per_sec = 54321;
	/* A small model's tokens are cheap: $0.00127 per million shows as
	 * 0.0013, not 0.00. */
	const double usdm = f->view.offers[0].usd_per_mimage;
	const int est = f->view.offers[0].price_estimated;
	f->view.offers[0].usd_per_mimage = 0.00127;
	f->view.offers[0].price_estimated = 0;
	/* The fixture's status line is an image run's. */
	snprintf(f->view.message, sizeof f->view.message, "done: val loss 1.2340, perplexity 3.435");
	f->view.version++;
	render(s, &f->view);
	char vl[32], ppl[32], rate[32], want[64];
	sd_fmt_num(vl, sizeof vl, f->view.val_loss, 4);
	sd_fmt_num(ppl, sizeof ppl, exp(f->view.val_loss), 4);
	snprintf(want, sizeof want, "val loss %s", vl);
	CHECK(on_screen(want), "'%s' missing from the header", want);
	snprintf(want, sizeof want, "ppl %s", ppl);
	CHECK(on_screen(want), "'%s' missing from the header", want);
	CHECK(!strcmp(ppl, "3.4349"), "perplexity of val loss 1.234 shown as %s, exp(1.234) = 3.4349", ppl);
	snprintf(want, sizeof want, "%s tokens/s", sd_fmt_rate(rate, sizeof rate, 54321));
	CHECK(on_screen(want), "'%s' missing from the header", want);
	static const char *const lm[] = { "tok/s", "$/Mtok", "val loss", "tokens/s" };
	for (size_t i = 0; i < sizeof lm / sizeof lm[0]; i++)
		CHECK(on_screen(lm[i]), "'%s' missing from a language model's screen", lm[i]);
	CHECK(!on_screen("img/s") && !on_screen("acc ") && !on_screen("$/Mimg"),
	      "a language model's screen still speaks of images or accuracy:\n%s", grab());
	CHECK(on_screen(" 0.0013 "), "$0.00127 per million tokens not shown as 0.0013:\n%s", grab());
	/* The market's tokens/s are its GPUs' estimate; the trainer keeps a
	 * language model on the CPUs for now, and the frame says so. */
	CHECK(on_screen("LM trains on CPUs"), "the market does not say a language model trains on "
	      "the servers' CPUs:\n%s", grab());
	f->view.offers[0].usd_per_mimage = usdm;
	f->view.offers[0].price_estimated = est;
	/* The add picker ranks offers by dollars per million tokens. */
	sd_screen_key(s, 'a');
	render(s, &f->view);
	CHECK(on_screen("offers by $ per million tokens"), "a: the picker does not speak of tokens");
	sd_screen_key(s, 27);
	render(s, &f->view);
	/* No evaluation yet: a dash, not a number. */
	f->view.val_loss = -1;
	f->view.version++;
	render(s, &f->view);
	CHECK(on_screen("val loss -") && on_screen("ppl -"), "no evaluation yet, but a val loss shown");
	sd_screen_destroy(s);
}

/* Real machines (the ssh provider): the header says the market is real,
 * with no SIMULATED label and no simulator knobs; an unknown price is "-". */
static void test_real_market(struct ui_fixture *f)
{
	f->view.simulated = 0;
	snprintf(f->view.provider, sizeof f->view.provider, "ssh");
	snprintf(f->view.catalog, sizeof f->view.catalog, "hosts");
	f->offers[0].usd_per_hour = NAN;
	struct sd_screen *s = make(1, NULL, 0);
	resize(40, 120, s);
	render(s, &f->view);
	CHECK(on_screen("real market: ssh hosts"), "no 'real market: ssh hosts' in the header");
	CHECK(!on_screen("SIMULATED") && !on_screen("hazard x"), "a real market is labelled simulated");
	CHECK(!on_screen("nan") && !on_screen("NaN"), "an unknown price printed as nan");
	/* w: no what-if dialog (it replays the simulator), a note instead. */
	ncmds = 0;
	sd_screen_key(s, 'w');
	render(s, &f->view);
	CHECK(!sd_screen_modal(s) && ncmds == 0, "w on a real market opened %s, sent %d commands",
	      sd_screen_modal(s) ? sd_screen_modal(s) : "nothing", ncmds);
	CHECK(on_screen("what if: none for ssh hosts (it replays the simulator)"),
	      "w on a real market: no whole note saying why");
	/* Without a note, the key bar has room for every hint but w's. */
	sd_screen_key(s, 27);
	f->view.message[0] = '\0';
	f->view.version++;
	render(s, &f->view);
	CHECK(!on_screen("what-if") && on_screen("detach"), "the key bar offers w on a real market");
	/* Hosts have no speed before a run measures one: no "ResNet-32 img/s"
	 * label under the market (the fixture's catalog speeds had one). */
	CHECK(on_screen("ResNet-32 img/s"), "the catalog's speeds lost their label");
	/* Speeds scaled to another model are estimates: '~' before each and
	 * a legend that says where they come from. */
	for (int i = 0; i < f->view.noffers; i++)
		f->offers[i].speed_estimated = 1;
	f->view.version++;
	render(s, &f->view);
	CHECK(on_screen("img/s est. from FLOPs") || on_screen("img/s estimated from FLOPs"),
	      "estimated speeds without their legend");
	CHECK(!on_screen("ResNet-32 img/s"), "estimated speeds labelled as the catalog's ResNet-32 figures");
	{
		char want[32];
		char rate[16];
		snprintf(want, sizeof want, "~%s", sd_fmt_rate(rate, sizeof rate, f->offers[0].images_per_sec));
		CHECK(on_screen(want), "no '%s' (an estimated speed) on screen", want);
	}
	for (int i = 0; i < f->view.noffers; i++)
		f->offers[i].speed_estimated = 0;
	for (int i = 0; i < f->view.noffers; i++)
		f->offers[i].images_per_sec = NAN;
	f->view.version++;
	render(s, &f->view);
	CHECK(!on_screen("ResNet-32"), "hosts' unknown speeds labelled as the catalog's ResNet-32 figures");
	/* A refusal the run sends later (an attached cockpit's command):
	 * the run's next message does not replace it. */
	sd_screen_refused(s, "add ssh/h1: host h1's one slot is in use");
	snprintf(f->view.message, sizeof f->view.message, "checkpoint at step 400 written");
	f->view.version++;
	render(s, &f->view);
	CHECK(on_screen("host h1's one slot is in use") && !on_screen("checkpoint at step 400"),
	      "a refusal heard later gave way to the run's next message");
	sd_screen_destroy(s);
}

/* The provider's question about an earlier controller's VMs: the dialog
 * opens by itself, Esc and q do not close it, y sends "orphans adopt" and
 * n "orphans delete"; answered, it is not asked again by this cockpit; a
 * watching cockpit never opens it; answered elsewhere, it closes. */
static void test_orphans(struct ui_fixture *f)
{
	struct sd_screen *s = make(1, NULL, 0);
	resize(40, 120, s);
	render(s, &f->view);
	CHECK(!sd_screen_modal(s), "a dialog before any question");
	snprintf(f->view.orphans_question, sizeof f->view.orphans_question,
	         "an earlier controller of this run left VMs running (billed): sd-ab-s1 in us-central1-a");
	f->view.orphans_asked = 1;
	f->view.version++;
	render(s, &f->view);
	CHECK(sd_screen_modal(s) && !strcmp(sd_screen_modal(s), "confirm"), "the question opened %s",
	      sd_screen_modal(s) ? sd_screen_modal(s) : "nothing");
	CHECK(on_screen("sd-ab-s1 in us-central1-a") && on_screen("adopt") && on_screen("delete"),
	      "the question or its answers are not on the screen:\n%s", grab());
	/* A second VM listed: the open dialog names both. */
	size_t n = strlen(f->view.orphans_question);
	snprintf(f->view.orphans_question + n, sizeof f->view.orphans_question - n, ", sd-ab-s2 in us-central1-b");
	f->view.orphans_asked = 2;
	f->view.version++;
	render(s, &f->view);
	CHECK(on_screen("sd-ab-s2") && on_screen(" them. "), "the grown question:\n%s", grab());
	ncmds = 0;
	sd_screen_key(s, 27);
	sd_screen_key(s, 'q');
	render(s, &f->view);
	CHECK(sd_screen_modal(s) && ncmds == 0, "Esc or q closed the question (or sent %d commands)", ncmds);
	sd_screen_key(s, 'y');
	CHECK(!strcmp(last_cmd, "orphans adopt") && ncmds == 1, "y sent '%s' (%d)", last_cmd, ncmds);
	render(s, &f->view);   /* the run has not answered yet: not asked again */
	CHECK(!sd_screen_modal(s), "the answered question opened again");
	/* A new question (another start) is asked; n deletes. */
	snprintf(f->view.orphans_question, sizeof f->view.orphans_question,
	         "an earlier controller of this run left VMs running (billed): sd-cd-s3 in europe-west4-a");
	f->view.version++;
	render(s, &f->view);
	sd_screen_key(s, 'n');
	CHECK(!strcmp(last_cmd, "orphans delete") && !sd_screen_modal(s), "n sent '%s'", last_cmd);
	/* Answered in another cockpit: the open dialog goes. */
	snprintf(f->view.orphans_question, sizeof f->view.orphans_question, "left VMs: sd-ef-s4 in us-central1-a");
	f->view.version++;
	render(s, &f->view);
	CHECK(sd_screen_modal(s) != NULL, "the third question did not open");
	f->view.orphans_question[0] = '\0';
	f->view.orphans_asked = 0;
	f->view.version++;
	render(s, &f->view);
	CHECK(!sd_screen_modal(s), "answered elsewhere, the dialog stayed open");
	sd_screen_destroy(s);
	/* A read-only cockpit only watches. */
	s = make(1, NULL, 0);
	resize(40, 120, s);
	snprintf(f->view.orphans_question, sizeof f->view.orphans_question, "left VMs: sd-gh-s5 in us-central1-a");
	f->view.read_only = 1;
	f->view.version++;
	render(s, &f->view);
	CHECK(!sd_screen_modal(s), "a read-only cockpit opened the question");
	f->view.read_only = 0;
	f->view.orphans_question[0] = '\0';
	sd_screen_destroy(s);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!setlocale(LC_ALL, "C.UTF-8"))
		setlocale(LC_ALL, "");
	setenv("LINES", "40", 1);
	setenv("COLUMNS", "120", 1);
	/* The terminal writes to a file, so the bytes sent can be read back. */
	FILE *out = tmpfile(), *in = fopen("/dev/null", "r");
	term_out = out;
	SCREEN *scr = out && in ? newterm("xterm-256color", out, in) : NULL;
	if (!scr) {
		fprintf(stderr, "SKIP: no xterm-256color terminfo entry (Debian package ncurses-base)\n");
		return 77;
	}
	set_term(scr);

	static struct ui_fixture f;
	ui_fixture_init(&f, 4);
	test_layout(&f);
	printf("ok: layout, titles and figures at 120x40 and 80x24; one pane redrawn per change; too-small screen\n");
	test_sizes();
	ui_fixture_init(&f, 4);
	test_keys(&f);
	printf("ok: keys: a s d c p r t ? q Tab j/k Enter Esc and the commands they send\n");
	ui_fixture_init(&f, 4);
	test_ascii(&f);
	printf("ok: ASCII fallback\n");
	test_hostile();
	printf("ok: hostile views\n");
	ui_fixture_init(&f, 4);
	test_orphans(&f);
	printf("ok: the orphans question opens by itself, needs y (adopt) or n (delete), is not asked twice\n");
	ui_fixture_init(&f, 4);
	test_chart_max(&f);
	printf("ok: the throughput chart's max covers the current rate\n");
	ui_fixture_init(&f, 4);
	test_language_model(&f);
	printf("ok: a language model's run: tokens/s, tok/s, $/Mtok, val loss and perplexity\n");
	ui_fixture_init(&f, 4);
	test_real_market(&f);
	printf("ok: a real market: no SIMULATED label, unknown price not shown as a number, w says why no what-if\n");

	endwin();
	delscreen(scr);
	fclose(out);
	fclose(in);
	return check_exit("test-ui-screen");
}
