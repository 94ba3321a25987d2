/* ui/chart.c - bar charts and sparklines. */
#include "config.h"

#include <math.h>

#include "ui/chart.h"
#include "ui/pane.h"

#define CHART_MAX_W 1024

int sd_series_range(const struct sd_view_series *s, double *lo, double *hi, double *t0, double *t1)
{
	int n = sd_series_len(s), k = 0;
	for (int i = 0; i < n; i++) {
		double v = sd_series_at(s, i), t = sd_series_t(s, i);
		if (!isfinite(v) || !isfinite(t))
			continue;
		if (k == 0) {
			*lo = *hi = v;
			*t0 = *t1 = t;
		} else {
			if (v < *lo) *lo = v;
			if (v > *hi) *hi = v;
			if (t < *t0) *t0 = t;
			if (t > *t1) *t1 = t;
		}
		k++;
	}
	return k;
}

int sd_chart_col(double t, double t0, double t1, int width)
{
	if (width <= 0 || !isfinite(t) || t < t0 || t > t1)
		return -1;
	if (!(t1 > t0))
		return width - 1;
	double f = (t - t0) / (t1 - t0);
	int c = (int)(f * (width - 1) + 0.5);
	if (c < 0) c = 0;
	if (c >= width) c = width - 1;
	return c;
}

/* Eighths of H cells for V in [LO, HI]. */
static int eighths(double v, double lo, double hi, int h)
{
	if (!isfinite(v) || !(hi > lo))
		return isfinite(v) && v > lo ? h * 8 : 0;
	double f = (v - lo) / (hi - lo);
	if (f <= 0)
		return 0;
	if (f > 1)
		f = 1;
	int e = (int)(f * h * 8 + 0.5);
	return e < 1 ? 1 : e;
}

void sd_chart(WINDOW *w, const struct sd_glyphs *g, int y, int x, int h, int width,
              const struct sd_view_series *s, double t0, double t1, double lo, double hi)
{
	if (h <= 0 || width <= 0)
		return;
	if (width > CHART_MAX_W)
		width = CHART_MAX_W;
	int level[CHART_MAX_W];
	double best[CHART_MAX_W];
	for (int c = 0; c < width; c++)
		level[c] = -1, best[c] = -INFINITY;
	int n = sd_series_len(s);
	for (int i = 0; i < n; i++) {
		double v = sd_series_at(s, i);
		int c = sd_chart_col(sd_series_t(s, i), t0, t1, width);
		if (c < 0 || !isfinite(v))
			continue;
		if (level[c] < 0 || v > best[c])
			best[c] = v, level[c] = eighths(v, lo, hi, h);
	}
	/* Columns between samples repeat the previous one: a series sampled
	 * more sparsely than the chart is wide still reads as a line. */
	int first = -1;
	for (int c = 0; c < width; c++) {
		if (level[c] >= 0) {
			if (first < 0)
				first = c;
		} else if (first >= 0 && c > 0) {
			level[c] = level[c - 1];
		}
	}
	for (int r = 0; r < h; r++) {
		int base = (h - 1 - r) * 8;     /* eighths below this row */
		wmove(w, y + r, x);
		for (int c = 0; c < width; c++) {
			int k = level[c] - base;
			if (level[c] < 0 || k <= 0)
				waddch(w, ' ');
			else
				sd_glyph_put(w, g, (enum sd_glyph)(SD_G_BAR1 + (k >= 8 ? 7 : k - 1)));
		}
	}
}

void sd_sparkline(WINDOW *w, const struct sd_glyphs *g, int y, int x, int width,
                  const struct sd_view_series *s, double lo, double hi)
{
	if (width <= 0)
		return;
	int n = sd_series_len(s);
	int start = n > width ? n - width : 0;
	int pad = width - (n - start);
	wmove(w, y, x);
	for (int i = 0; i < pad; i++)
		waddch(w, ' ');
	for (int i = start; i < n; i++) {
		double v = sd_series_at(s, i);
		if (!isfinite(v)) {
			waddch(w, ' ');
			continue;
		}
		int lv = 0;
		if (hi > lo) {
			double f = (v - lo) / (hi - lo);
			lv = (int)(f * 7 + 0.5);
			if (lv < 0) lv = 0;
			if (lv > 7) lv = 7;
		} else if (v > 0) {
			lv = 7;
		}
		sd_glyph_put(w, g, (enum sd_glyph)(SD_G_BAR1 + lv));
	}
}
