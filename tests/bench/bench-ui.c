/* tests/bench/bench-ui.c - what a cockpit frame costs: a full redraw of a
 * 200x60 screen showing 64 servers (every pane drawn, one doupdate), with
 * the figures moving between frames as a live run's do, against the 2 ms
 * target and against a peer measured in the same run: repainting the same
 * screen with plain text through the same curses (the floor any curses UI
 * pays).  Also: the same after ^L (clearok: every cell re-sent), the usual
 * frame (only the header and charts changed), and the ASCII fallback.
 * Output goes to a temporary file, so bytes per frame are reported too.
 *
 * Usage: bench-ui [FRAMES]   (default 300)
 * Exit status 1 if the full redraw takes 2 ms or more. */
#include "config.h"

#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "tests/ui-fixture.h"
#include "ui/screen.h"
#include "ui/tui.h"

#define TARGET_MS 2.0
#define COLS_ 200
#define LINES_ 60
#define SERVERS 64

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmd(void *ctx, const char *line, char **why)
{
	return 0;
}

static FILE *out;

static long out_bytes(void)
{
	fflush(out);
	struct stat st;
	return fstat(fileno(out), &st) == 0 ? (long)st.st_size : 0;
}

struct result {
	double ms;
	double bytes;
};

enum mode { FULL, HARD, USUAL };

static struct result frames(struct sd_screen *s, struct ui_fixture *f, int n, enum mode m)
{
	uint64_t t_ms = 0;
	double total = 0;
	long b0 = out_bytes();
	for (int i = 0; i < n; i++) {
		if (m == USUAL) {
			/* A step went by: header, charts, status move; servers not. */
			f->view.step++;
			f->view.elapsed_s += 0.5;
			sd_view_series_push(&f->view.throughput, f->view.elapsed_s, (float)(4000 + i % 500));
			snprintf(f->view.message, sizeof f->view.message, "step %ld", f->view.step);
			f->view.version++;
		} else {
			ui_fixture_tick(f, 1);
		}
		double t0 = now_s();
		if (m != USUAL)
			sd_screen_invalidate(s, m == HARD);
		sd_screen_update(s, &f->view, t_ms += 50);
		sd_screen_render(s);
		total += now_s() - t0;
	}
	return (struct result){ total / n * 1e3, (double)(out_bytes() - b0) / n };
}

/* The peer: the whole screen as plain text, one character changing per
 * line and frame so that every line is sent. */
static struct result plain(int n)
{
	char line[COLS_ + 1];
	double total = 0;
	long b0 = out_bytes();
	for (int i = 0; i < n; i++) {
		double t0 = now_s();
		werase(stdscr);
		for (int y = 0; y < LINES_; y++) {
			for (int x = 0; x < COLS_; x++)
				line[x] = (char)('a' + (x + y + i) % 26);
			line[COLS_] = '\0';
			mvaddnstr(y, 0, line, COLS_);
		}
		wnoutrefresh(stdscr);
		doupdate();
		total += now_s() - t0;
	}
	return (struct result){ total / n * 1e3, (double)(out_bytes() - b0) / n };
}

static struct sd_screen *make(int utf8)
{
	struct sd_screen *s = NULL;
	struct sd_screen_cfg cfg = { .command = cmd, .utf8 = utf8 };
	char *why = NULL;
	if (sd_screen_create(&s, &cfg, &why) != 0) {
		fprintf(stderr, "bench-ui: %s\n", why ? why : "screen");
		exit(2);
	}
	return s;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 300;
	if (n < 10)
		n = 10;
	if (!setlocale(LC_ALL, "C.UTF-8"))
		setlocale(LC_ALL, "");
	setenv("LINES", "60", 1);
	setenv("COLUMNS", "200", 1);
	out = tmpfile();
	FILE *in = fopen("/dev/null", "r");
	SCREEN *scr = out && in ? newterm("xterm-256color", out, in) : NULL;
	if (!scr) {
		fprintf(stderr, "bench-ui: cannot open a virtual xterm-256color screen\n");
		return 2;
	}
	set_term(scr);
	static struct ui_fixture f;
	ui_fixture_init(&f, SERVERS);

	struct sd_screen *s = make(1);
	frames(s, &f, 20, FULL);        /* warm-up */
	struct result full = frames(s, &f, n, FULL);
	struct result hard = frames(s, &f, n, HARD);
	struct result usual = frames(s, &f, n, USUAL);
	sd_screen_destroy(s);
	s = make(0);
	frames(s, &f, 20, FULL);
	struct result ascii = frames(s, &f, n, FULL);
	sd_screen_destroy(s);
	clearok(curscr, TRUE);
	plain(20);
	struct result peer = plain(n);

	endwin();
	delscreen(scr);
	fclose(in);
	fclose(out);

	printf("bench-ui: %dx%d screen, %d servers, %d frames each\n", COLS_, LINES_, SERVERS, n);
	printf("  %-34s %7.3f ms  %7.0f B/frame  %5.2fx the %.0f ms target  %5.2fx the peer\n",
	       "full redraw, UTF-8 (all panes)", full.ms, full.bytes, full.ms / TARGET_MS, TARGET_MS, full.ms / peer.ms);
	printf("  %-34s %7.3f ms  %7.0f B/frame  %5.2fx the %.0f ms target  %5.2fx the peer\n",
	       "full redraw after ^L (clearok)", hard.ms, hard.bytes, hard.ms / TARGET_MS, TARGET_MS, hard.ms / peer.ms);
	printf("  %-34s %7.3f ms  %7.0f B/frame  %5.2fx the %.0f ms target  %5.2fx the peer\n",
	       "full redraw, ASCII fallback", ascii.ms, ascii.bytes, ascii.ms / TARGET_MS, TARGET_MS, ascii.ms / peer.ms);
	printf("  %-34s %7.3f ms  %7.0f B/frame  %5.2fx the %.0f ms target  %5.2fx the peer\n",
	       "usual frame (a step went by)", usual.ms, usual.bytes, usual.ms / TARGET_MS, TARGET_MS, usual.ms / peer.ms);
	printf("  %-34s %7.3f ms  %7.0f B/frame  (peer: plain-text repaint of every cell)\n",
	       "peer", peer.ms, peer.bytes);
	if (full.ms >= TARGET_MS) {
		printf("bench-ui: FAIL: full redraw %.3f ms >= %.0f ms\n", full.ms, TARGET_MS);
		return 1;
	}
	return 0;
}
