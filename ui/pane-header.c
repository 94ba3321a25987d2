/* ui/pane-header.c - the header: the job and where the run stands (step,
 * epoch, loss, accuracy, speed, time, money), and the market it runs on:
 * a "SIMULATED market" label and the simulator's knobs when the market is
 * the simulator.  Its height follows the width (ui/screen.c asks). */
#include "config.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ui/format.h"
#include "ui/pane.h"

struct item {
	char text[128];
	enum sd_style style;
};

#define MAX_ITEMS 16

struct header_items {
	struct item id[6], run[MAX_ITEMS];
	int nid, nrun;
	struct item right;          /* row 0, right-aligned; text "" none */
};

static int any_emulated(const struct sd_view *v)
{
	for (int i = 0; v->servers && i < v->nservers; i++) {
		if (v->servers[i].emulated)
			return 1;
	}
	return 0;
}

static void add(struct item *arr, int *n, int max, enum sd_style st, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

static void add(struct item *arr, int *n, int max, enum sd_style st, const char *fmt, ...)
{
	if (*n >= max)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(arr[*n].text, sizeof arr[*n].text, fmt, ap);
	va_end(ap);
	arr[*n].style = st;
	(*n)++;
}

static void header_items(struct header_items *h, const struct sd_view *v)
{
	char a[32], b[32];
	int em = any_emulated(v);
	memset(h, 0, sizeof *h);
#define ID(st, ...) add(h->id, &h->nid, 6, st, __VA_ARGS__)
#define RUN(st, ...) add(h->run, &h->nrun, MAX_ITEMS, st, __VA_ARGS__)
	ID(SD_STYLE_HEADER, "spotdeck");
	ID(SD_STYLE_HEADER, "%.*s", (int)sizeof v->job, v->job[0] ? v->job : "(no job)");
	ID(SD_STYLE_HEADER, "gen %ld, %d worker%s", v->generation, v->world_size, v->world_size == 1 ? "" : "s");
	if (v->paused)
		ID(SD_STYLE_WARN, "PAUSED");
	/* A background run: the cockpits attached to it (this one included),
	 * and whether this one only watches. */
	if (v->clients > 0)
		ID(SD_STYLE_HEADER, "%d attached", v->clients);
	if (v->read_only)
		ID(SD_STYLE_WARN, "read-only");
	if (v->ended[0])
		RUN(SD_STYLE_WARN, "ENDED: %.100s", v->ended);
	if (v->autopilot_goal[0] && !v->autopilot_on)
		RUN(SD_STYLE_HEADER, "autopilot: off");
	else if (v->autopilot_goal[0] && v->autopilot_p >= 0)
		RUN(SD_STYLE_HEADER, "autopilot: %.*s, P(on time) %.2f", (int)sizeof v->autopilot_goal,
		    v->autopilot_goal, v->autopilot_p);
	else if (v->autopilot_goal[0])
		RUN(SD_STYLE_HEADER, "autopilot: %.*s", (int)sizeof v->autopilot_goal, v->autopilot_goal);

	if (v->total_steps > 0)
		RUN(SD_STYLE_HEADER, "step %ld/%ld", v->step, v->total_steps);
	else
		RUN(SD_STYLE_HEADER, "step %ld", v->step);
	RUN(SD_STYLE_HEADER, "epoch %d/%d", v->epoch, v->epochs);
	/* A negative loss is the glue's "none yet" (cross-entropy is >= 0). */
	RUN(SD_STYLE_HEADER, "loss %s", v->loss < 0 ? "-" : sd_fmt_num(a, sizeof a, v->loss, 4));
	if (v->unit_tokens) {
		/* A language model: validation loss (nats per token) and its
		 * perplexity, exp(val loss), where an image model shows accuracy. */
		RUN(SD_STYLE_HEADER, "val loss %s", v->val_loss < 0 ? "-"
		    : sd_fmt_num(a, sizeof a, v->val_loss, 4));
		RUN(SD_STYLE_HEADER, "ppl %s", v->val_loss < 0 ? "-"
		    : sd_fmt_num(a, sizeof a, exp(v->val_loss), 4));
	} else {
		/* Accuracy is a fraction; a glue passing percent still reads right. */
		double acc = v->test_accuracy > 1.0 && v->test_accuracy <= 100.0
		             ? v->test_accuracy / 100 : v->test_accuracy;
		RUN(SD_STYLE_HEADER, "acc %s", acc < 0 ? "-" : sd_fmt_pct(a, sizeof a, acc, 2));
	}
	RUN(em ? SD_STYLE_EMULATED : SD_STYLE_HEADER, "%s%s %s", em ? "~" : "",
	    sd_fmt_rate(a, sizeof a, v->images_per_sec), v->unit_tokens ? "tokens/s" : "img/s");
	RUN(SD_STYLE_HEADER, "elapsed %s", sd_fmt_clock(a, sizeof a, v->elapsed_s));
	RUN(SD_STYLE_HEADER, "ETA %s", v->eta_s < 0 ? "-" : sd_fmt_duration(a, sizeof a, v->eta_s));
	/* Servers without a price (local) are unknown, not free: "+?". */
	RUN(SD_STYLE_HEADER, "spent %s",
	    sd_fmt_usd_part(a, sizeof a, v->usd_spent, v->spent_estimated > 0, v->spent_unpriced > 0));
	if (v->usd_saved > 0)
		RUN(SD_STYLE_OK, "saved %s%s vs on-demand", sd_fmt_usd(a, sizeof a, v->usd_saved),
		    v->usd_saved_estimated ? "*" : "");
	RUN(SD_STYLE_HEADER, "now %s/h",
	    sd_fmt_usd_part(b, sizeof b, v->usd_per_hour, v->rate_estimated > 0, v->rate_unpriced > 0));
	if (v->simulated) {
		snprintf(h->right.text, sizeof h->right.text, "SIMULATED market");
		h->right.style = SD_STYLE_SIMULATED;
		RUN(SD_STYLE_HEADER, "%.*s %.*s, hazard x%g, boot x%g, seed %llu",
		    (int)sizeof v->provider, v->provider[0] ? v->provider : "sim",
		    (int)sizeof v->catalog, v->catalog[0] ? v->catalog : "-",
		    isfinite(v->hazard_scale) ? v->hazard_scale : 0,
		    isfinite(v->boot_scale) ? v->boot_scale : 0, (unsigned long long)v->seed);
	} else if (v->provider[0]) {
		/* Real machines (the ssh provider's hosts): nothing simulated. */
		snprintf(h->right.text, sizeof h->right.text, "real market: %.*s %.*s", (int)sizeof v->provider,
		         v->provider, (int)sizeof v->catalog, v->catalog);
		h->right.style = SD_STYLE_HEADER;
	}
	if (em)
		RUN(SD_STYLE_EMULATED, "~ emulated GPU speed");
#undef ID
#undef RUN
}

/* Lays ITEMS out left to right from row Y, two blanks apart, wrapping at
 * width W; an item wider than a whole row is cut.  Draws when WIN is not
 * NULL.  Returns the rows used. */
static int flow(WINDOW *win, const struct sd_draw *d, const struct sd_glyphs *g, int y, int w,
                const struct item *it, int n)
{
	int x = 1, rows = n > 0 ? 1 : 0;
	for (int i = 0; i < n; i++) {
		int iw = sd_width(g, it[i].text);
		if (x > 1 && x + iw > w - 1) {
			y++;
			rows++;
			x = 1;
		}
		if (win) {
			if (y >= getmaxy(win))
				break;
			wattrset(win, d->a[it[i].style]);
			sd_put(win, g, y, x, it[i].text, w - 1 - x);
		}
		x += (iw < w - 1 - x ? iw : w - 1 - x) + 2;
	}
	return rows;
}

/* Row 0: the identity items cut to what the right label leaves. */
static void row0(WINDOW *win, const struct sd_draw *d, int w, const struct header_items *h)
{
	int rw = h->right.text[0] ? sd_width(d->g, h->right.text) : 0;
	int limit = w - 1 - (rw ? rw + 2 : 0);
	int x = 1;
	for (int i = 0; i < h->nid && x < limit; i++) {
		wattrset(win, d->a[h->id[i].style]);
		x += sd_put(win, d->g, 0, x, h->id[i].text, limit - x) + 2;
	}
	if (rw) {
		wattrset(win, d->a[h->right.style]);
		sd_put(win, d->g, 0, w - 1 - rw > 1 ? w - 1 - rw : 1, h->right.text, w - 2);
	}
}

int sd_pane_header_rows(const struct sd_view *v, int width, const struct sd_glyphs *g)
{
	struct header_items h;
	header_items(&h, v);
	return 1 + flow(NULL, NULL, g, 1, width, h.run, h.nrun);
}

static void header_draw(struct sd_pane *p, const struct sd_view *v, const struct sd_draw *d)
{
	struct header_items h;
	header_items(&h, v);
	wattrset(p->win, d->a[SD_STYLE_HEADER]);
	for (int y = 0; y < p->h; y++)
		sd_blank(p->win, y, 0, p->w);
	row0(p->win, d, p->w, &h);
	flow(p->win, d, d->g, 1, p->w, h.run, h.nrun);
}

static uint64_t header_signature(const struct sd_pane *p, const struct sd_view *v)
{
	/* Everything from the job name to the market seed, as laid out in
	 * struct sd_view, and whether any speed is emulated. */
	const char *start = (const char *)&v->job;
	const char *end = (const char *)&v->seed + sizeof v->seed;
	int em = any_emulated(v);
	uint64_t h = sd_hash(SD_HASH_INIT, start, (size_t)(end - start));
	h = sd_hash(h, &v->clients, sizeof v->clients);
	h = sd_hash(h, &v->read_only, sizeof v->read_only);
	h = sd_hash(h, v->ended, strlen(v->ended));
	h = sd_hash(h, &v->autopilot_on, sizeof v->autopilot_on);
	h = sd_hash(h, v->autopilot_goal, strnlen(v->autopilot_goal, sizeof v->autopilot_goal));
	h = sd_hash(h, &v->autopilot_p, sizeof v->autopilot_p);
	return sd_hash(h, &em, sizeof em);
}

const struct sd_pane_ops sd_pane_header_ops = {
	.name = "header",
	.focusable = 0,
	.draw = header_draw,
	.signature = header_signature,
	.nav = NULL,
};
