/* tests/bench/bench-ui.c - what a cockpit frame costs: a full redraw of a
 * 200x60 screen showing 64 servers (every pane drawn, one doupdate), with
 * the figures moving between frames as a live run's do, against the 2 ms
 * target and against a peer measured in the same run on the same frames.
 *
 * The peer does like work: after each cockpit frame, the cells that frame
 * left on the screen (characters, attributes and colours, read back from
 * curscr) are written as they are into every cell of a second curses
 * screen, which then sends its terminal what changed.  So both sides put the
 * same picture up and send the same changes; the difference is what the
 * cockpit costs over blitting its finished picture: laying out and
 * formatting the panes.  Both terminals write to temporary files, so bytes
 * per frame are reported too (they should be about equal).
 *
 * Modes: the full redraw (every pane re-rendered, curses sends the changed
 * cells); the same after ^L (clearok on both screens: every cell re-sent);
 * the usual frame (a step went by: only dirty panes redrawn; the peer still
 * writes every cell, as a UI without dirty tracking would); the ASCII
 * fallback's full redraw.
 *
 * Usage: bench-ui [FRAMES]   (default 300)
 * Prints "ratio:" lines (tests/bench/bench.h); exit status 1 if the full
 * redraw takes 2 ms or more. */
#include "config.h"

#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "tests/bench/bench.h"
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

/* The two virtual terminals: the cockpit's and the peer's. */
static SCREEN *scr_cockpit, *scr_peer;
static FILE *out_cockpit, *out_peer;

static long out_bytes(FILE *out)
{
	fflush(out);
	struct stat st;
	return fstat(fileno(out), &st) == 0 ? (long)st.st_size : 0;
}

/* One frame's picture, as curses holds it. */
static cchar_t cells[LINES_][COLS_ + 1];

struct result {
	double ms, peer_ms;
	double bytes, peer_bytes;
};

enum mode { FULL, HARD, USUAL };

static struct result frames(struct sd_screen *s, struct ui_fixture *f, int n, enum mode m)
{
	uint64_t t_ms = 0;
	double total = 0, peer = 0;
	long b0 = out_bytes(out_cockpit), p0 = out_bytes(out_peer);
	for (int i = 0; i < n; i++) {
		set_term(scr_cockpit);
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
		/* What the frame left on the screen (not timed). */
		for (int y = 0; y < LINES_; y++)
			mvwin_wchnstr(curscr, y, 0, cells[y], COLS_);

		/* The peer puts the same cells up on its own screen. */
		set_term(scr_peer);
		t0 = now_s();
		if (m == HARD)
			clearok(curscr, TRUE);
		for (int y = 0; y < LINES_; y++)
			mvwadd_wchnstr(stdscr, y, 0, cells[y], COLS_);
		wnoutrefresh(stdscr);
		doupdate();
		peer += now_s() - t0;
	}
	set_term(scr_cockpit);
	return (struct result){ total / n * 1e3, peer / n * 1e3, (double)(out_bytes(out_cockpit) - b0) / n,
	                        (double)(out_bytes(out_peer) - p0) / n };
}

static struct sd_screen *make(int utf8)
{
	struct sd_screen *s = NULL;
	struct sd_screen_cfg cfg = { .command = cmd, .utf8 = utf8 };
	char *why = NULL;
	set_term(scr_cockpit);
	if (sd_screen_create(&s, &cfg, &why) != 0) {
		fprintf(stderr, "bench-ui: %s\n", why ? why : "screen");
		exit(2);
	}
	return s;
}

static void row(const char *name, struct result r)
{
	printf("  %-32s %7.3f ms %7.0f B/frame   peer %7.3f ms %7.0f B/frame\n", name, r.ms, r.bytes, r.peer_ms,
	       r.peer_bytes);
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
	out_cockpit = tmpfile();
	out_peer = tmpfile();
	FILE *in1 = fopen("/dev/null", "r"), *in2 = fopen("/dev/null", "r");
	scr_cockpit = out_cockpit && in1 ? newterm("xterm-256color", out_cockpit, in1) : NULL;
	scr_peer = out_peer && in2 ? newterm("xterm-256color", out_peer, in2) : NULL;
	if (!scr_cockpit || !scr_peer) {
		fprintf(stderr, "SKIP: bench-ui: cannot open a virtual xterm-256color screen\n");
		return 77;
	}
	/* The peer's screen gets the same colour pairs as the cockpit's (the
	 * cells it copies refer to them by number). */
	set_term(scr_peer);
	start_color();
	use_default_colors();
	static struct ui_fixture f;
	ui_fixture_init(&f, SERVERS);

	struct sd_screen *s = make(1);
	set_term(scr_peer);
	for (short p = 1; p < COLOR_PAIRS && p < 256; p++) {
		short fg, bg;
		set_term(scr_cockpit);
		int got = pair_content(p, &fg, &bg);
		set_term(scr_peer);
		if (got == OK)
			init_pair(p, fg, bg);
	}
	frames(s, &f, 20, FULL);        /* warm-up */
	struct result full = frames(s, &f, n, FULL);
	struct result hard = frames(s, &f, n, HARD);
	struct result usual = frames(s, &f, n, USUAL);
	sd_screen_destroy(s);
	s = make(0);
	frames(s, &f, 20, FULL);
	struct result ascii = frames(s, &f, n, FULL);
	sd_screen_destroy(s);

	set_term(scr_peer);
	endwin();
	set_term(scr_cockpit);
	endwin();
	delscreen(scr_peer);
	delscreen(scr_cockpit);
	fclose(in1);
	fclose(in2);
	fclose(out_cockpit);
	fclose(out_peer);

	printf("bench-ui: %dx%d screen, %d servers, %d frames each; the peer blits each frame's finished cells\n",
	       COLS_, LINES_, SERVERS, n);
	row("full redraw, UTF-8 (all panes)", full);
	row("full redraw after ^L (clearok)", hard);
	row("full redraw, ASCII fallback", ascii);
	row("usual frame (a step went by)", usual);
	bench_ratio("bench-ui", "full redraw / the 2 ms target", full.ms / TARGET_MS, 1.0, 1);
	bench_ratio("bench-ui", "full redraw / peer blit of the same cells", full.ms / full.peer_ms, 0, 1);
	bench_ratio("bench-ui", "full redraw after ^L / peer blit after ^L", hard.ms / hard.peer_ms, 0, 1);
	bench_ratio("bench-ui", "ASCII full redraw / peer blit of the same cells", ascii.ms / ascii.peer_ms, 0, 1);
	bench_ratio("bench-ui", "usual frame (dirty panes) / peer blit of every cell", usual.ms / usual.peer_ms, 0, 1);
	return bench_exit();
}
