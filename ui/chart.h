/* ui/chart.h - sparklines and bar charts from view series, in eighths of a
 * cell (▁▂▃▄▅▆▇█) or their ASCII fallback. */
#ifndef SD_UI_CHART_H
#define SD_UI_CHART_H

#include "ui/tui.h"
#include "ui/view.h"

/* Finite samples of S: *lo and *hi their range, *t0 and *t1 their time range.
 * Returns how many (0: the outputs are untouched). */
int sd_series_range(const struct sd_view_series *s, double *lo, double *hi, double *t0, double *t1);

/* Column (0..WIDTH-1) of time T in a chart spanning [T0, T1], -1 outside. */
int sd_chart_col(double t, double t0, double t1, int width);

/* Bar chart of S over time: samples placed by time in [T0, T1] across
 * WIDTH columns (the highest sample of a column wins, gaps repeat the
 * previous column), values scaled from LO (empty) to HI (H full cells),
 * drawn in the H x WIDTH area at (Y, X) with the window's attributes.  A
 * finite value above LO always shows at least one eighth. */
void sd_chart(WINDOW *w, const struct sd_glyphs *g, int y, int x, int h, int width,
              const struct sd_view_series *s, double t0, double t1, double lo, double hi);

/* One-row sparkline of the last WIDTH samples of S (one per column, right
 * aligned), scaled to [LO, HI]; every finite sample shows at least ▁. */
void sd_sparkline(WINDOW *w, const struct sd_glyphs *g, int y, int x, int width,
                  const struct sd_view_series *s, double lo, double hi);

#endif
