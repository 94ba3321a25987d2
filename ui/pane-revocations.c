/* ui/pane-revocations.c - revocations: the log (newest first: when, which
 * server, zone, GPU, its lifetime, the notice it got, steps lost, seconds
 * to recover, the offer the autopilot replaced it with, marked "A ") and statistics per GPU and per zone (count, mean lifetime). */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ui/format.h"
#include "ui/pane.h"

enum { RC_TIME, RC_SERVER, RC_GPU, RC_LIFE, RC_LOST, RC_ZONE, RC_RECOV, RC_NOTICE, RC_REPL, RC_N };

static const struct sd_col rev_cols[RC_N] = {
	[RC_TIME] = { "time", 7, 0, 0, 1, 0, 0 },
	[RC_SERVER] = { "server", 6, 0, 0, 0, 0, 0 },
	[RC_GPU] = { "GPU", 4, 1, 0, 0, 0, 0 },
	[RC_LIFE] = { "life", 6, 0, 0, 1, 0, 0 },
	[RC_LOST] = { "lost", 4, 3, 0, 1, 0, 0 },
	/* The zone drops first: the per-zone statistics below still name it,
	 * while notice and recovery exist only in the log. */
	[RC_ZONE] = { "zone", 13, 6, 1, 0, 0, 0 },
	[RC_RECOV] = { "recov", 6, 4, 0, 1, 0, 0 },
	[RC_NOTICE] = { "notice", 6, 5, 0, 1, 0, 0 },
	/* Which replacements the autopilot made: "A " and the offer it chose. */
	[RC_REPL] = { "replaced by", 30, 2, 0, 0, 0, 0 },
};

#define MAX_GROUPS 32

struct group {
	char name[32];
	int n;
	double life_sum;
	int life_n;
};

/* Adds a revocation to the group NAME (the last group collects overflow). */
static int group_add(struct group *g, int ng, const char *name, double life)
{
	int i;
	for (i = 0; i < ng; i++) {
		if (strcmp(g[i].name, name) == 0)
			break;
	}
	if (i == ng) {
		if (ng == MAX_GROUPS) {
			i = ng - 1;
			snprintf(g[i].name, sizeof g[i].name, "other");
		} else {
			memset(&g[i], 0, sizeof g[i]);
			snprintf(g[i].name, sizeof g[i].name, "%s", name[0] ? name : "?");
			ng++;
		}
	}
	g[i].n++;
	if (isfinite(life) && life >= 0) {
		g[i].life_sum += life;
		g[i].life_n++;
	}
	return ng;
}

/* Writes groups as "V100 2x 41m  K80 1x 1h02m ..." after LABEL on row Y,
 * wrapping onto at most ROWS rows; returns rows used. */
static int draw_groups(WINDOW *w, const struct sd_draw *d, int y, int x, int width, int rows,
                       const char *label, struct group *g, int ng)
{
	if (rows <= 0)
		return 0;
	/* Most revoked first. */
	for (int i = 1; i < ng; i++) {
		struct group t = g[i];
		int j = i;
		while (j > 0 && g[j - 1].n < t.n) {
			g[j] = g[j - 1];
			j--;
		}
		g[j] = t;
	}
	int row = 0, cx = 0;
	wattrset(w, d->a[SD_STYLE_LABEL]);
	cx += sd_put(w, d->g, y, x, label, width);
	for (int i = 0; i < ng; i++) {
		char item[80], life[16];
		if (g[i].life_n > 0)
			sd_fmt_duration(life, sizeof life, g[i].life_sum / g[i].life_n);
		else
			snprintf(life, sizeof life, "-");
		snprintf(item, sizeof item, "%s %dx %s", g[i].name, g[i].n, life);
		int iw = sd_width(d->g, item);
		if (cx + 2 + iw > width && cx > 0) {
			if (++row >= rows)
				break;
			cx = 2;
		} else {
			cx += 2;
		}
		wattrset(w, d->a[SD_STYLE_NORMAL]);
		cx += sd_put(w, d->g, y + row, x + cx, item, width - cx);
	}
	return row + 1;
}

static void rev_draw(struct sd_pane *p, const struct sd_view *v, const struct sd_draw *d)
{
	WINDOW *w = p->win;
	int n = v->revocations && v->nrevocations > 0 ? v->nrevocations : 0;
	int iw = p->w - 3, ih = p->h - 2;
	int x = 2;
	char title[64], buf[80], tmp[32];
	snprintf(title, sizeof title, "Revocations (%d)", n);
	sd_pane_frame(p, d, title, NULL);
	if (ih <= 0 || iw <= 4)
		return;
	if (n == 0) {
		wattrset(w, d->a[SD_STYLE_DIM]);
		sd_put(w, d->g, 1, x, "no revocations yet", iw);
		return;
	}

	struct group gpu[MAX_GROUPS], zone[MAX_GROUPS];
	int ngpu = 0, nzone = 0;
	for (int i = 0; i < n; i++) {
		const struct sd_view_revocation *r = &v->revocations[i];
		ngpu = group_add(gpu, ngpu, r->gpu, r->lifetime_s);
		nzone = group_add(zone, nzone, r->zone, r->lifetime_s);
	}

	/* Statistics take the bottom rows: one each when space is short. */
	int stat_rows = ih >= 10 ? 4 : ih >= 4 ? 2 : ih >= 3 ? 1 : 0;
	int log_rows = ih - 1 - stat_rows;
	if (log_rows < 1) {
		stat_rows = 0;
		log_rows = ih - 1;
	}
	int xs[RC_N], ws[RC_N];
	/* The autopilot's column only once it replaced something: the
	 * other columns keep their room until then. */
	int ncols = RC_REPL;
	for (int i = 0; i < n && ncols == RC_REPL; i++)
		if (v->revocations[i].replaced_by[0])
			ncols = RC_N;
	sd_cols_fit(rev_cols, ncols, iw, xs, ws);
	wattrset(w, d->a[SD_STYLE_LABEL]);
	sd_cols_title(w, d->g, 1, x, rev_cols, ncols, xs, ws);
	int sel = sd_list_resolve(&p->list, v, n, sd_revocation_id, log_rows);
	for (int r = 0; r < log_rows && p->list.top + r < n; r++) {
		int i = p->list.top + r;
		const struct sd_view_revocation *rv = &v->revocations[n - 1 - i];
		int y = 2 + r;
		int bar = i == sel && d->focused;
		attr_t base = bar ? d->a[SD_STYLE_SELECTION] : d->a[SD_STYLE_NORMAL];
		if (bar) {
			wattrset(w, base);
			sd_blank(w, y, 1, p->w - 2);
		}
#define CELL(col, style, ...) do { \
		snprintf(buf, sizeof buf, __VA_ARGS__); \
		wattrset(w, bar ? base : d->a[style]); \
		sd_cols_cell(w, d->g, y, x, rev_cols, col, xs, ws, buf); \
	} while (0)
		CELL(RC_TIME, SD_STYLE_DIM, "%s", sd_fmt_clock(tmp, sizeof tmp, rv->t));
		CELL(RC_SERVER, SD_STYLE_CRIT, "%.*s", (int)sizeof rv->server, rv->server);
		CELL(RC_GPU, SD_STYLE_NORMAL, "%.*s", (int)sizeof rv->gpu, rv->gpu);
		CELL(RC_LIFE, SD_STYLE_NORMAL, "%s", sd_fmt_duration(tmp, sizeof tmp, rv->lifetime_s));
		if (rv->steps_lost >= 0)
			CELL(RC_LOST, rv->steps_lost > 0 ? SD_STYLE_WARN : SD_STYLE_NORMAL, "%ld", rv->steps_lost);
		else
			CELL(RC_LOST, SD_STYLE_DIM, "-");
		CELL(RC_NOTICE, SD_STYLE_NORMAL, "%s", sd_fmt_duration(tmp, sizeof tmp, rv->notice_s));
		CELL(RC_ZONE, SD_STYLE_NORMAL, "%.*s", (int)sizeof rv->zone, rv->zone);
		if (isfinite(rv->recovery_s) && rv->recovery_s >= 0)
			CELL(RC_RECOV, SD_STYLE_NORMAL, rv->recovery_s < 10 ? "%.2fs" : "%.0fs",
			     rv->recovery_s < 1e5 ? rv->recovery_s : 1e5);
		else
			CELL(RC_RECOV, SD_STYLE_WARN, "...");
		if (ncols == RC_N && rv->replaced_by[0])
			CELL(RC_REPL, SD_STYLE_OK, "A %.*s", (int)sizeof rv->replaced_by, rv->replaced_by);
#undef CELL
	}
	if (stat_rows > 0) {
		/* Right under the log when it is short, one blank row between. */
		int shown = n - p->list.top < log_rows ? n - p->list.top : log_rows;
		int y = 2 + (shown + 1 < log_rows ? shown + 1 : log_rows);
		int half = stat_rows / 2 > 0 ? stat_rows / 2 : 1;
		int used = draw_groups(w, d, y, x, iw, stat_rows > 1 ? half : 1, "by GPU", gpu, ngpu);
		if (stat_rows > used)
			draw_groups(w, d, y + used, x, iw, stat_rows - used, "by zone", zone, nzone);
	}
}

static uint64_t rev_signature(const struct sd_pane *p, const struct sd_view *v)
{
	uint64_t h = sd_hash(SD_HASH_INIT, &v->nrevocations, sizeof v->nrevocations);
	if (v->revocations && v->nrevocations > 0)
		h = sd_hash(h, v->revocations, (size_t)v->nrevocations * sizeof *v->revocations);
	return h;
}

static int rev_nav(struct sd_pane *p, enum sd_nav how, const struct sd_view *v)
{
	int n = v->revocations && v->nrevocations > 0 ? v->nrevocations : 0;
	return sd_list_nav(&p->list, how, v, n, sd_revocation_id, p->h - 5);
}

const struct sd_pane_ops sd_pane_revocations_ops = {
	.name = "revocations",
	.focusable = 1,
	.draw = rev_draw,
	.signature = rev_signature,
	.nav = rev_nav,
};
