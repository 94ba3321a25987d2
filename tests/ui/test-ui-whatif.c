/* tests/ui/test-ui-whatif.c - the cockpit's what-if dialog and the header's
 * savings on a virtual terminal (newterm on /dev/null, read back through
 * curscr), as test-ui-screen does for the rest:
 *  - w sends "plan" and opens the dialog, which says it is planning and
 *    that its figures are simulated;
 *  - rows arriving in the view are drawn, the frontier marked;
 *  - j and Enter on a row ask to switch to it, y sends the row's add and
 *    drop commands one by one, in order; n sends nothing;
 *  - Enter on the running cluster's row sends nothing;
 *  - the header shows "saved $X vs on-demand" (with * when an on-demand
 *    price behind it is estimated), and nothing while nothing was saved;
 *  - the help lists w. */
#include "config.h"

#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "tests/ui-fixture.h"
#include "ui/pane.h"
#include "ui/screen.h"
#include "ui/tui.h"

#include "tests/check.h"

static char cmds[16][256];
static int ncmds;

static int cmd(void *ctx, const char *line, char **why)
{
	(void)ctx;
	(void)why;
	if (ncmds < 16)
		snprintf(cmds[ncmds], sizeof cmds[0], "%s", line);
	ncmds++;
	return 0;
}

static char screen_text[200 * 60 * 4];

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

/* The screen line holding S, for messages. */
static const char *line_with(const char *s)
{
	static char line[512];
	const char *t = grab(), *hit = strstr(t, s);
	if (!hit)
		return "(not on screen)";
	const char *a = hit, *b = hit;
	while (a > t && a[-1] != '\n')
		a--;
	while (*b && *b != '\n')
		b++;
	snprintf(line, sizeof line, "%.*s", (int)(b - a), a);
	return line;
}

static void render(struct sd_screen *s, const struct sd_view *v)
{
	static uint64_t now = 1000;
	now += 100;
	sd_screen_update(s, v, now);
	sd_screen_render(s);
}

static void key(struct sd_screen *s, const struct sd_view *v, int k)
{
	sd_screen_key(s, k);
	render(s, v);
}

static struct sd_view_whatif rows[3];

static void fill_rows(struct sd_view *v)
{
	memset(rows, 0, sizeof rows);
	snprintf(rows[0].label, sizeof rows[0].label, "now: 4x K80 spot");
	rows[0].current = 1;
	rows[0].servers = 4;
	rows[0].transient = 1;
	rows[0].time_p50_s = 1500, rows[0].time_p90_s = 1900;
	rows[0].cost_p50_usd = 0.41, rows[0].cost_p90_usd = 0.52;
	snprintf(rows[0].summary, sizeof rows[0].summary, "no change");
	snprintf(rows[1].label, sizeof rows[1].label, "8x V100 spot");
	rows[1].servers = 8;
	rows[1].transient = 1;
	rows[1].pareto = 1;
	rows[1].time_p50_s = 420, rows[1].time_p90_s = 480;
	rows[1].cost_p50_usd = 0.93, rows[1].cost_p90_usd = 1.10;
	rows[1].revocations = 0.25;
	snprintf(rows[1].summary, sizeof rows[1].summary, "add 2: 2 x gce/us-west1-b/v100/spot; drop s1 s2");
	snprintf(rows[1].commands, sizeof rows[1].commands,
	         "add gce/us-west1-b/v100/spot\nadd gce/us-west1-b/v100/spot\ndrop s1\ndrop s2\n");
	snprintf(rows[2].label, sizeof rows[2].label, "1x K80 on-demand");
	rows[2].servers = 1;
	rows[2].time_p50_s = 5400, rows[2].time_p90_s = 5410;
	rows[2].cost_p50_usd = 1.08, rows[2].cost_p90_usd = 1.09;
	snprintf(rows[2].summary, sizeof rows[2].summary, "add 1: 1 x gce/us-west1-b/k80/on-demand; drop s1 s2 s3 s4");
	snprintf(rows[2].commands, sizeof rows[2].commands, "add gce/us-west1-b/k80/on-demand\n");
	v->whatif = rows;
	v->nwhatif = 3;
	v->whatif_busy = 0;
	snprintf(v->whatif_note, sizeof v->whatif_note, "simulated: 0.4 M images left, 300 runs per row");
	v->whatif_version++;
	v->version++;
}

static void test_dialog(struct ui_fixture *f, struct sd_screen *s)
{
	struct sd_view *v = &f->view;
	render(s, v);
	ncmds = 0;
	key(s, v, 'w');
	CHECK(ncmds == 1 && !strcmp(cmds[0], "plan"), "w sent %d commands, first '%s'", ncmds, cmds[0]);
	CHECK(sd_screen_modal(s) && !strcmp(sd_screen_modal(s), "whatif"), "the what-if dialog is open");
	CHECK(on_screen("What if") && on_screen("(simulated)"), "title: %s", line_with("What if"));

	/* The run says it is planning. */
	v->whatif_busy = 1;
	snprintf(v->whatif_note, sizeof v->whatif_note, "planning the remaining work");
	v->whatif_version++;
	v->version++;
	render(s, v);
	CHECK(on_screen("planning..."), "busy note: %s", line_with("planning"));

	/* The rows arrive. */
	fill_rows(v);
	render(s, v);
	CHECK(on_screen("now: 4x K80 spot") && on_screen("8x V100 spot") && on_screen("1x K80 on-demand"),
	      "rows drawn");
	CHECK(on_screen("* 8x V100 spot"), "the frontier row is marked: %s", line_with("8x V100 spot"));
	CHECK(on_screen("7m00s") && on_screen("$0.93"), "figures: %s", line_with("8x V100 spot"));
	CHECK(on_screen("simulated: 0.4 M images left"), "note: %s", line_with("images left"));
	CHECK(on_screen("no change"), "the selected row's summary: %s", line_with("no change"));

	/* Enter on the running cluster: nothing to switch. */
	ncmds = 0;
	key(s, v, '\n');
	CHECK(ncmds == 0 && sd_screen_modal(s) && !strcmp(sd_screen_modal(s), "whatif"),
	      "Enter on the running cluster sent %d commands", ncmds);

	/* j, Enter: the confirmation names the row and what it does. */
	key(s, v, 'j');
	CHECK(on_screen("add 2: 2 x gce/us-west1-b/v100/spot; drop s1 s2"), "summary: %s", line_with("add 2"));
	key(s, v, '\n');
	CHECK(sd_screen_modal(s) && !strcmp(sd_screen_modal(s), "confirm"), "Enter asks first");
	CHECK(on_screen("Switch to 8x V100 spot"), "question: %s", line_with("Switch"));
	/* The confirmation replaces the table: no row of it is left behind
	 * on the panes (they are drawn again where it was). */
	CHECK(!on_screen("1x K80 on-demand"), "the table is still on screen: %s", line_with("1x K80 on-demand"));
	CHECK(!on_screen("What if: the remaining work"), "the table's frame is still on screen: %s",
	      line_with("What if: the remaining work"));
	CHECK(ncmds == 0, "nothing sent before yes (%d)", ncmds);
	key(s, v, 'n');
	CHECK(ncmds == 0 && !sd_screen_modal(s), "no: nothing sent (%d), dialog closed", ncmds);

	/* Again, and yes: the four commands, in order. */
	key(s, v, 'w');
	fill_rows(v);
	render(s, v);
	ncmds = 0;
	key(s, v, 'j');
	key(s, v, '\n');
	key(s, v, 'y');
	CHECK(ncmds == 4, "yes sent %d commands", ncmds);
	const char *want[] = { "add gce/us-west1-b/v100/spot", "add gce/us-west1-b/v100/spot", "drop s1", "drop s2" };
	for (int i = 0; i < 4 && i < ncmds; i++)
		CHECK_STR(cmds[i], want[i]);
	CHECK(!sd_screen_modal(s), "the dialog is closed after the switch");

	/* Esc closes it. */
	key(s, v, 'w');
	key(s, v, 27);
	CHECK(!sd_screen_modal(s), "Esc closes the what-if dialog");
}

static void test_header(struct ui_fixture *f, struct sd_screen *s)
{
	struct sd_view *v = &f->view;
	v->usd_saved = 0;
	v->version++;
	render(s, v);
	CHECK(!on_screen("vs on-demand"), "nothing saved, nothing shown");
	v->usd_saved = 1.23;
	v->version++;
	render(s, v);
	CHECK(on_screen("saved $1.23 vs on-demand"), "header: %s", line_with("spent"));
	v->usd_saved_estimated = 1;
	v->version++;
	render(s, v);
	CHECK(on_screen("saved $1.23* vs on-demand"), "estimated: %s", line_with("saved"));
}

static void test_help(struct sd_screen *s, const struct sd_view *v)
{
	key((struct sd_screen *)s, v, '?');
	CHECK(on_screen("what if: plan the rest on another cluster"), "help lists w");
	key((struct sd_screen *)s, v, 'x');
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!setlocale(LC_ALL, "C.UTF-8"))
		setlocale(LC_ALL, "");
	setenv("LINES", "40", 1);
	setenv("COLUMNS", "120", 1);
	FILE *out = fopen("/dev/null", "w"), *in = fopen("/dev/null", "r");
	SCREEN *scr = out && in ? newterm("xterm-256color", out, in) : NULL;
	if (!scr) {
		fprintf(stderr, "SKIP: no xterm-256color terminfo entry\n");
		return 77;
	}
	set_term(scr);
	static struct ui_fixture f;
	ui_fixture_init(&f, 4);
	struct sd_screen *s = NULL;
	struct sd_screen_cfg cfg = { .command = cmd, .utf8 = 1 };
	char *why = NULL;
	if (sd_screen_create(&s, &cfg, &why) != 0) {
		fprintf(stderr, "sd_screen_create: %s\n", why ? why : "?");
		return 1;
	}
	test_dialog(&f, s);
	printf("ok: w plans, the rows are drawn, Enter and y switch with the row's commands\n");
	test_header(&f, s);
	printf("ok: saved vs on-demand in the header\n");
	test_help(s, &f.view);
	printf("ok: help lists w\n");
	sd_screen_destroy(s);
	endwin();
	delscreen(scr);
	fclose(out);
	fclose(in);
	return check_exit("test-ui-whatif");
}
