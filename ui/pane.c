/* ui/pane.c - what the panes share: frames, lists that follow their row by
 * id, server states, and the offer table (market pane and pickers). */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ui/format.h"
#include "ui/pane.h"

void sd_pane_frame(struct sd_pane *p, const struct sd_draw *d, const char *title, const char *legend)
{
	WINDOW *w = p->win;
	wattrset(w, d->focused ? d->a[SD_STYLE_FOCUS] : d->a[SD_STYLE_BORDER]);
	sd_frame(w, d->g);
	if (title && p->w > 6) {
		wattrset(w, d->focused ? d->a[SD_STYLE_FOCUS] : d->a[SD_STYLE_TITLE]);
		mvwaddch(w, 0, 1, ' ');
		int n = sd_put(w, d->g, 0, 2, title, p->w - 5);
		mvwaddch(w, 0, 2 + n, ' ');
	}
	if (legend && p->h > 2) {
		int lw = sd_width(d->g, legend);
		int room = p->w - 4;
		if (room > 6) {
			if (lw > room - 2)
				lw = room - 2;
			int x = p->w - 2 - lw - 2;
			if (x < 1)
				x = 1;
			wattrset(w, d->a[SD_STYLE_DIM]);
			mvwaddch(w, p->h - 1, x, ' ');
			sd_put(w, d->g, p->h - 1, x + 1, legend, lw);
			mvwaddch(w, p->h - 1, x + 1 + lw, ' ');
		}
	}
	wattrset(w, d->a[SD_STYLE_NORMAL]);
}

int sd_list_resolve(struct sd_list *l, const struct sd_view *v, int n, sd_row_id_fn id, int rows)
{
	if (n <= 0) {
		l->sel = -1;
		l->top = 0;
		return -1;
	}
	int idx = -1;
	if (l->sel_id[0]) {
		/* The row it was on first (the usual case), then a search. */
		if (l->sel >= 0 && l->sel < n && strcmp(id(v, l->sel), l->sel_id) == 0)
			idx = l->sel;
		for (int i = 0; i < n && idx < 0; i++) {
			if (strcmp(id(v, i), l->sel_id) == 0)
				idx = i;
		}
	}
	if (idx < 0) {
		/* Its row went away: stay at the same place. */
		idx = l->sel < 0 ? 0 : l->sel >= n ? n - 1 : l->sel;
		snprintf(l->sel_id, sizeof l->sel_id, "%s", id(v, idx));
	}
	l->sel = idx;
	if (rows > 0) {
		if (idx < l->top)
			l->top = idx;
		if (idx >= l->top + rows)
			l->top = idx - rows + 1;
		if (l->top > n - rows)
			l->top = n - rows;
		if (l->top < 0)
			l->top = 0;
	}
	return idx;
}

int sd_list_nav(struct sd_list *l, enum sd_nav how, const struct sd_view *v, int n, sd_row_id_fn id, int page)
{
	int cur = sd_list_resolve(l, v, n, id, 0);
	if (cur < 0)
		return SD_KEY_HANDLED;
	if (page < 1)
		page = 1;
	int to = cur;
	switch (how) {
	case SD_NAV_UP: to = cur - 1; break;
	case SD_NAV_DOWN: to = cur + 1; break;
	case SD_NAV_PGUP: to = cur - page; break;
	case SD_NAV_PGDN: to = cur + page; break;
	case SD_NAV_HOME: to = 0; break;
	case SD_NAV_END: to = n - 1; break;
	}
	if (to < 0)
		to = 0;
	if (to >= n)
		to = n - 1;
	if (to == cur)
		return SD_KEY_HANDLED;
	l->sel = to;
	snprintf(l->sel_id, sizeof l->sel_id, "%s", id(v, to));
	return SD_KEY_HANDLED | SD_KEY_REDRAW;
}

const char *sd_offer_id(const struct sd_view *v, int i)
{
	return v->offers[i].id;
}

const char *sd_server_id(const struct sd_view *v, int i)
{
	return v->servers[i].id;
}

const char *sd_revocation_id(const struct sd_view *v, int i)
{
	/* Shown newest first. */
	return v->revocations[v->nrevocations - 1 - i].server;
}

enum sd_style sd_state_style(const char *state)
{
	static const struct { const char *state; enum sd_style style; } map[] = {
		{ "training", SD_STYLE_OK },
		{ "notice", SD_STYLE_CRIT }, { "revoked", SD_STYLE_CRIT }, { "failed", SD_STYLE_CRIT },
		{ "released", SD_STYLE_DIM },
		{ "requested", SD_STYLE_WARN }, { "provisioning", SD_STYLE_WARN },
		{ "booting", SD_STYLE_WARN }, { "joining", SD_STYLE_WARN }, { "paused", SD_STYLE_WARN },
	};
	for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
		if (strcmp(state, map[i].state) == 0)
			return map[i].style;
	}
	return SD_STYLE_NORMAL;
}

int sd_state_live(const char *state)
{
	return strcmp(state, "revoked") != 0 && strcmp(state, "released") != 0 &&
	       strcmp(state, "failed") != 0 && state[0] != '\0';
}

/* ---- the offer table ---- */

enum { OC_ID, OC_USDH, OC_USDM, OC_PREV, OC_IPS, OC_AVAIL, OC_GPU, OC_TYPE, OC_N };

static const struct sd_col offer_cols[OC_N] = {
	/* The id names provider, zone, GPU and type already: the GPU and
	 * type columns give way to a readable id. */
	[OC_ID] = { "offer", 20, 0, 1, 0, 32, 0 },
	[OC_USDH] = { "$/h", 6, 0, 0, 1, 0, 0 },
	[OC_USDM] = { "$/Mimg", 6, 0, 0, 1, 0, 0 },
	[OC_PREV] = { "P(rev)", 6, 2, 0, 1, 0, 0 },
	[OC_IPS] = { "img/s", 6, 3, 0, 1, 0, 0 },
	[OC_AVAIL] = { "avail", 5, 4, 0, 1, 0, 0 },
	[OC_GPU] = { "GPU", 7, 5, 0, 0, 0, 1 },
	[OC_TYPE] = { "type", 4, 6, 0, 0, 0, 1 },
};

static enum sd_style risk_style(double p)
{
	if (!isfinite(p))
		return SD_STYLE_DIM;
	return p < 0.10 ? SD_STYLE_OK : p < 0.30 ? SD_STYLE_WARN : SD_STYLE_CRIT;
}

int sd_offer_table(WINDOW *win, int y, int x, int h, int w, const struct sd_view *v,
                   struct sd_list *l, const struct sd_draw *d, int show_sel)
{
	int xs[OC_N], ws[OC_N];
	int n = v->offers ? v->noffers : 0;
	int estimated = 0, modelled = 0, speeds = 0;
	if (h < 1 || w < 4)
		return 0;
	/* A language model's run counts tokens where an image run counts
	 * images (struct sd_view unit_tokens). */
	struct sd_col cols[OC_N];
	memcpy(cols, offer_cols, sizeof cols);
	if (v->unit_tokens) {
		cols[OC_USDM].title = "$/Mtok";
		cols[OC_USDM].width = 7;   /* "0.0013*": a small model's tokens are cheap */
		cols[OC_IPS].title = "tok/s";
	}
	/* Column 0 is a gutter for the selection mark. */
	sd_cols_fit(cols, OC_N, w - 1, xs, ws);
	wattrset(win, d->a[SD_STYLE_LABEL]);
	sd_cols_title(win, d->g, y, x + 1, cols, OC_N, xs, ws);
	int rows = h - 1;
	int sel = sd_list_resolve(l, v, n, sd_offer_id, rows);
	if (n == 0 && rows > 0) {
		wattrset(win, d->a[SD_STYLE_DIM]);
		sd_put(win, d->g, y + 1, x + 1, "no offers", w - 1);
	}
	for (int r = 0; r < rows && l->top + r < n; r++) {
		int i = l->top + r;
		const struct sd_view_offer *o = &v->offers[i];
		int yy = y + 1 + r;
		int selected = i == sel;
		int bar = selected && show_sel;
		char buf[80], tmp[32];
		attr_t base = bar ? d->a[SD_STYLE_SELECTION] : d->a[SD_STYLE_NORMAL];
		wattrset(win, base);
		if (bar)
			sd_blank(win, yy, x, w);
		if (selected && !show_sel) {
			wattrset(win, d->a[SD_STYLE_DIM]);
			wmove(win, yy, x);
			sd_glyph_put(win, d->g, SD_G_SELECT);
			wattrset(win, base);
		}
#define CELL(col, style, ...) do { \
		snprintf(buf, sizeof buf, __VA_ARGS__); \
		wattrset(win, bar ? base : d->a[style]); \
		sd_cols_cell(win, d->g, yy, x + 1, cols, col, xs, ws, buf); \
	} while (0)
		CELL(OC_ID, SD_STYLE_NORMAL, "%.*s", (int)sizeof o->id, o->id);
		if (o->price_estimated)
			estimated = 1;
		if (isfinite(o->usd_per_hour) && o->usd_per_hour >= 0 && o->usd_per_hour < 1e5)
			CELL(OC_USDH, o->price_estimated ? SD_STYLE_WARN : SD_STYLE_NORMAL, "%.2f%s",
			     o->usd_per_hour, o->price_estimated ? "*" : "");
		else
			CELL(OC_USDH, SD_STYLE_DIM, "-");
		if (isfinite(o->usd_per_mimage) && o->usd_per_mimage >= 0 && o->usd_per_mimage < 1e5)
			/* A language model: two significant digits below 0.1, so that a cost per
			 * million tokens of a small model is not all 0.00. */
			CELL(OC_USDM, SD_STYLE_NORMAL,
			     v->unit_tokens && o->usd_per_mimage < 0.1 ? "%.2g%s" : "%.2f%s",
			     o->usd_per_mimage, o->price_estimated ? "*" : "");
		else
			CELL(OC_USDM, SD_STYLE_DIM, "-");
		/* '~': the calibrated market's estimate for a real cloud's offer. */
		CELL(OC_PREV, risk_style(o->p_revoked_1h), "%s%s", o->p_revoked_modelled ? "~" : "",
		     o->transient ? sd_fmt_pct(tmp, sizeof tmp, o->p_revoked_1h, 0) : "0%");
		modelled |= o->p_revoked_modelled != 0;
		CELL(OC_IPS, SD_STYLE_NORMAL, "%s%s", o->speed_estimated && isfinite(o->images_per_sec) ? "~" : "",
		     sd_fmt_rate(tmp, sizeof tmp, o->images_per_sec));
		if (o->available < 0)
			CELL(OC_AVAIL, SD_STYLE_DIM, "?");
		else
			CELL(OC_AVAIL, o->available == 0 ? SD_STYLE_CRIT : SD_STYLE_NORMAL, "%d", o->available);
		if (o->gpus > 1)
			CELL(OC_GPU, SD_STYLE_NORMAL, "%.8sx%d", o->gpu, o->gpus);
		else
			CELL(OC_GPU, SD_STYLE_NORMAL, "%.*s", (int)sizeof o->gpu, o->gpu);
		CELL(OC_TYPE, o->transient ? SD_STYLE_SPOT : SD_STYLE_ONDEMAND, "%s", o->transient ? "spot" : "od");
#undef CELL
	}
	/* A later row may be an estimate too; the legend is for the table. */
	for (int i = 0; i < n; i++) {
		estimated |= v->offers[i].price_estimated != 0;
		modelled |= v->offers[i].p_revoked_modelled != 0;
		speeds |= v->offers[i].speed_estimated != 0;
	}
	wattrset(win, d->a[SD_STYLE_NORMAL]);
	return (estimated ? SD_OFFERS_ESTIMATED : 0) | (modelled ? SD_OFFERS_MODELLED : 0) |
	       (speeds ? SD_OFFERS_SPEED_ESTIMATED : 0);
}
