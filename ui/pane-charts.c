/* ui/pane-charts.c - training charts over one time axis: global throughput
 * as bars with a marker under each revocation, then loss and test accuracy. */
#include "config.h"

#include <math.h>
#include <stdio.h>

#include "ui/chart.h"
#include "ui/format.h"
#include "ui/pane.h"

#define LABEL_W 11

/* Accuracy as a fraction: the view documents no unit, and a glue that
 * passes percent (85.2) must not read as 8520 %. */
static double acc_frac(double a)
{
	return a > 1.0 && a <= 100.0 ? a / 100.0 : a;
}

/* Widens [t0, t1] by S's time range. */
static void span(const struct sd_view_series *s, double *t0, double *t1, int *have)
{
	double lo, hi, a, b;
	if (sd_series_range(s, &lo, &hi, &a, &b) == 0)
		return;
	if (!*have || a < *t0) *t0 = a;
	if (!*have || b > *t1) *t1 = b;
	*have = 1;
}

/* A labelled chart of S in rows [Y, Y+H): the label column shows NAME and
 * VALUE; the chart's floor sits a little under the series' minimum so the
 * lowest sample still shows (ZERO: the floor is 0 and the top covers NOW,
 * the value shown, too). */
static void labelled(WINDOW *w, const struct sd_draw *d, int y, int h, int cw,
                     const char *name, const char *value, double now, const struct sd_view_series *s,
                     double t0, double t1, int zero, enum sd_style style)
{
	double lo = 0, hi = 0, a, b;
	int k = sd_series_range(s, &lo, &hi, &a, &b);
	wattrset(w, d->a[SD_STYLE_LABEL]);
	if (h >= 2) {
		sd_put(w, d->g, y, 1, name, LABEL_W - 1);
		wattrset(w, d->a[style]);
		sd_put(w, d->g, y + 1, 1, value, LABEL_W - 1);
	} else {
		char both[48];
		int nl = sd_put(w, d->g, y, 1, name, LABEL_W - 1);
		wattrset(w, d->a[style]);
		snprintf(both, sizeof both, "%s", value);
		sd_put(w, d->g, y, 1 + nl + 1, both, LABEL_W - 2 - nl);
	}
	if (k == 0 || cw <= 0)
		return;
	if (zero) {
		lo = 0;
		/* The scale covers the value shown beside it (a rate newer than
		 * the last sample must not read above "max"). */
		if (now > hi)
			hi = now;
		if (!(hi > 0))
			hi = 1;
	} else {
		double pad = (hi - lo) / 8;
		if (!(pad > 0))
			pad = fabs(hi) > 0 ? fabs(hi) / 8 : 1;
		lo -= pad;
	}
	wattrset(w, d->a[style]);
	sd_chart(w, d->g, y, LABEL_W, h, cw, s, t0, t1, lo, hi);
	if (h >= 3 && zero) {
		/* The scale, next to the top of the bars. */
		char top[16];
		wattrset(w, d->a[SD_STYLE_DIM]);
		sd_put(w, d->g, y + 2, 1, "max", 4);
		sd_put(w, d->g, y + 2, 5, sd_fmt_rate(top, sizeof top, hi), LABEL_W - 6);
	}
}

static void charts_draw(struct sd_pane *p, const struct sd_view *v, const struct sd_draw *d)
{
	WINDOW *w = p->win;
	int ih = p->h - 2, cw = p->w - 1 - LABEL_W;
	int nmarks = v->nmarks < 0 ? 0 : v->nmarks > 64 ? 64 : v->nmarks;
	char val[32], tmp[32];

	sd_pane_frame(p, d, "Training", nmarks > 0 ? (d->g->utf8 ? "\u25b2 revocation" : "^ revocation") : NULL);
	if (ih <= 0 || cw <= 2)
		return;

	int loss_h = ih >= 12 ? 2 : 1, acc_h = loss_h, mark_h = 1;
	int thr_h = ih - loss_h - acc_h - mark_h;
	if (thr_h < 1) {
		mark_h = 0;
		thr_h = ih - loss_h - acc_h;
	}
	if (thr_h < 1) {
		acc_h = 0;
		thr_h = ih - loss_h;
	}
	if (thr_h < 1) {
		loss_h = 0;
		thr_h = ih;
	}

	double t0 = 0, t1 = 0;
	int have = 0;
	span(&v->throughput, &t0, &t1, &have);
	span(&v->loss_hist, &t0, &t1, &have);
	span(&v->acc_hist, &t0, &t1, &have);

	int y = 1;
	snprintf(val, sizeof val, "%s", sd_fmt_rate(tmp, sizeof tmp, v->images_per_sec));
	labelled(w, d, y, thr_h, cw, v->unit_tokens ? "tokens/s" : "img/s", val, v->images_per_sec,
	         &v->throughput, t0, t1, 1, SD_STYLE_CHART);
	y += thr_h;
	if (mark_h) {
		wattrset(w, d->a[SD_STYLE_DIM]);
		sd_put(w, d->g, y, 1, "revoked", LABEL_W - 1);
		wattrset(w, d->a[SD_STYLE_MARKER]);
		for (int i = 0; i < nmarks && have; i++) {
			int c = sd_chart_col(v->revocation_marks[i], t0, t1, cw);
			if (c >= 0) {
				wmove(w, y, LABEL_W + c);
				sd_glyph_put(w, d->g, SD_G_MARK);
			}
		}
		y += mark_h;
	}
	if (loss_h) {
		if (v->loss < 0)
			snprintf(val, sizeof val, "-");
		else
			sd_fmt_num(val, sizeof val, v->loss, 3);
		labelled(w, d, y, loss_h, cw, "loss", val, 0,
		         &v->loss_hist, t0, t1, 0, SD_STYLE_CHART_ALT);
		y += loss_h;
	}
	if (acc_h && v->unit_tokens) {
		/* A language model: the validation loss in acc_hist. */
		if (v->val_loss < 0)
			snprintf(val, sizeof val, "-");
		else
			sd_fmt_num(val, sizeof val, v->val_loss, 3);
		labelled(w, d, y, acc_h, cw, "val loss", val, 0, &v->acc_hist, t0, t1, 0,
		         SD_STYLE_CHART_ALT);
	} else if (acc_h) {
		double a = acc_frac(v->test_accuracy);
		if (a < 0)
			snprintf(val, sizeof val, "-");
		else
			sd_fmt_pct(val, sizeof val, a, 1);
		labelled(w, d, y, acc_h, cw, "acc", val, 0, &v->acc_hist, t0, t1, 0, SD_STYLE_CHART_ALT);
	}
}

static uint64_t charts_signature(const struct sd_pane *p, const struct sd_view *v)
{
	uint64_t h = sd_hash(SD_HASH_INIT, &v->throughput, sizeof v->throughput);
	h = sd_hash(h, &v->loss_hist, sizeof v->loss_hist);
	h = sd_hash(h, &v->acc_hist, sizeof v->acc_hist);
	h = sd_hash(h, v->revocation_marks, sizeof v->revocation_marks);
	h = sd_hash(h, &v->nmarks, sizeof v->nmarks);
	h = sd_hash(h, &v->images_per_sec, sizeof v->images_per_sec);
	h = sd_hash(h, &v->loss, sizeof v->loss);
	h = sd_hash(h, &v->test_accuracy, sizeof v->test_accuracy);
	h = sd_hash(h, &v->val_loss, sizeof v->val_loss);
	h = sd_hash(h, &v->unit_tokens, sizeof v->unit_tokens);
	return h;
}

const struct sd_pane_ops sd_pane_charts_ops = {
	.name = "charts",
	.focusable = 0,
	.draw = charts_draw,
	.signature = charts_signature,
	.nav = NULL,
};
