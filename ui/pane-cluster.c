/* ui/pane-cluster.c - the cluster: one row per server with its state, rank,
 * speed (and its history as a sparkline), the last step's compute and
 * communication time, uptime and cost.  Speeds paced to an emulated GPU
 * carry a '~'; a server just revoked is highlighted.  $/h is the rate the
 * server is billed at (its price when acquired), '*' when that price is an
 * estimate; a local server has no type and no price: "-", not "od" and $0.
 * "prec" is the precision its worker computes in (fp32 or bf16, the job's
 * "precision" as resolved there), the first column to go when narrow. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ui/chart.h"
#include "ui/format.h"
#include "ui/pane.h"

enum { CC_ID, CC_ZONE, CC_GPU, CC_TYPE, CC_STATE, CC_RANK, CC_IPS, CC_HIST, CC_SPLIT, CC_PREC,
       CC_UPTIME, CC_USDH, CC_USD, CC_N };

static const struct sd_col cluster_cols[CC_N] = {
	[CC_ID] = { "id", 4, 0, 0, 0, 0, 0 },
	[CC_ZONE] = { "zone", 14, 5, 0, 0, 0, 0 },
	[CC_GPU] = { "GPU", 5, 4, 0, 0, 0, 0 },
	[CC_TYPE] = { "type", 4, 7, 0, 0, 0, 0 },
	[CC_STATE] = { "state", 12, 0, 0, 0, 0, 0 },
	[CC_RANK] = { "rank", 4, 6, 0, 1, 0, 0 },
	[CC_IPS] = { "img/s", 6, 0, 0, 1, 0, 0 },
	[CC_HIST] = { "history", 10, 3, 1, 0, 0, 0 },
	[CC_SPLIT] = { "comp/comm", 11, 2, 0, 1, 0, 0 },
	[CC_PREC] = { "prec", 4, 10, 0, 0, 0, 0 },
	[CC_UPTIME] = { "uptime", 6, 8, 0, 1, 0, 0 },
	[CC_USDH] = { "$/h", 6, 9, 0, 1, 0, 0 },
	[CC_USD] = { "$ so far", 8, 1, 0, 1, 0, 0 },
};

static int server_count(const struct sd_view *v)
{
	return v->servers && v->nservers > 0 ? v->nservers : 0;
}

static void cluster_draw(struct sd_pane *p, const struct sd_view *v, const struct sd_draw *d)
{
	WINDOW *w = p->win;
	int n = server_count(v);
	int xs[CC_N], ws[CC_N];
	int x = 2, width = p->w - 3;        /* column 1 is the selection gutter */
	int rows = p->h - 3;
	int emulated = 0, estimated = 0;
	char buf[80], tmp[32];

	/* A language model's workers train tokens (struct sd_view unit_tokens). */
	struct sd_col cols[CC_N];
	memcpy(cols, cluster_cols, sizeof cols);
	if (v->unit_tokens)
		cols[CC_IPS].title = "tok/s";
	sd_cols_fit(cols, CC_N, width, xs, ws);
	wattrset(w, d->a[SD_STYLE_LABEL]);
	sd_cols_title(w, d->g, 1, x, cols, CC_N, xs, ws);

	/* One scale for every sparkline, so rows compare at a glance. */
	double hist_max = 0;
	for (int i = 0; i < n; i++) {
		const struct sd_view_series *s = &v->servers[i].ips;
		int len = sd_series_len(s);
		for (int k = 0; k < len; k++) {
			double val = sd_series_at(s, k);
			if (isfinite(val) && val > hist_max)
				hist_max = val;
		}
		emulated |= v->servers[i].emulated != 0;
		estimated |= v->servers[i].price_estimated && !v->servers[i].local;
	}

	int sel = sd_list_resolve(&p->list, v, n, sd_server_id, rows);
	if (n == 0 && rows > 0) {
		wattrset(w, d->a[SD_STYLE_DIM]);
		sd_put(w, d->g, 2, x, "no servers: press a to add one", width);
	}
	for (int r = 0; r < rows && p->list.top + r < n; r++) {
		int i = p->list.top + r;
		const struct sd_view_server *sv = &v->servers[i];
		int y = 2 + r;
		int hl = d->highlight && d->highlight[0] && strcmp(d->highlight, sv->id) == 0;
		int bar = (i == sel && d->focused) || hl;
		attr_t base = hl ? d->a[SD_STYLE_HIGHLIGHT] : bar ? d->a[SD_STYLE_SELECTION] : d->a[SD_STYLE_NORMAL];
		wattrset(w, base);
		if (bar)
			sd_blank(w, y, 1, p->w - 2);
		if (i == sel && (!d->focused || hl)) {
			wmove(w, y, 1);
			if (!bar)
				wattrset(w, d->a[SD_STYLE_DIM]);
			sd_glyph_put(w, d->g, SD_G_SELECT);
		}
#define CELL(col, style, ...) do { \
		snprintf(buf, sizeof buf, __VA_ARGS__); \
		wattrset(w, bar ? base : d->a[style]); \
		sd_cols_cell(w, d->g, y, x, cols, col, xs, ws, buf); \
	} while (0)
		CELL(CC_ID, SD_STYLE_NORMAL, "%.*s", (int)sizeof sv->id, sv->id);
		CELL(CC_ZONE, SD_STYLE_NORMAL, "%.*s", (int)sizeof sv->zone, sv->zone);
		CELL(CC_GPU, SD_STYLE_NORMAL, "%.*s", (int)sizeof sv->gpu, sv->gpu);
		if (sv->local)
			CELL(CC_TYPE, SD_STYLE_DIM, "-");
		else
			CELL(CC_TYPE, sv->transient ? SD_STYLE_SPOT : SD_STYLE_ONDEMAND, "%s",
			     sv->transient ? "spot" : "od");
		if (strcmp(sv->state, "notice") == 0 || (isfinite(sv->notice_left_s) && sv->notice_left_s > 0))
			CELL(CC_STATE, SD_STYLE_CRIT, "notice %s", sd_fmt_duration(tmp, sizeof tmp, sv->notice_left_s));
		else
			CELL(CC_STATE, sd_state_style(sv->state), "%.*s", (int)sizeof sv->state, sv->state);
		if (sv->rank >= 0)
			CELL(CC_RANK, SD_STYLE_NORMAL, "%d", sv->rank);
		else
			CELL(CC_RANK, SD_STYLE_DIM, "-");
		if (sv->rank < 0 && !(sv->images_per_sec > 0))
			CELL(CC_IPS, SD_STYLE_DIM, "-");     /* not training: no speed to label */
		else
			CELL(CC_IPS, sv->emulated ? SD_STYLE_EMULATED : SD_STYLE_NORMAL, "%s%s",
			     sv->emulated ? "~" : "", sd_fmt_rate(tmp, sizeof tmp, sv->images_per_sec));
		if (ws[CC_HIST] > 0) {
			wattrset(w, bar ? base : d->a[SD_STYLE_CHART]);
			sd_sparkline(w, d->g, y, x + xs[CC_HIST], ws[CC_HIST], &sv->ips, 0, hist_max);
		}
		if (isfinite(sv->compute_ms) && isfinite(sv->comm_ms) && sv->compute_ms >= 0 && sv->comm_ms >= 0 &&
		    sv->compute_ms + sv->comm_ms > 0 && sv->compute_ms < 1e7 && sv->comm_ms < 1e7)
			CELL(CC_SPLIT, SD_STYLE_NORMAL, "%.0f/%.0fms", sv->compute_ms, sv->comm_ms);
		else
			CELL(CC_SPLIT, SD_STYLE_DIM, "-");
		if (sv->precision[0])
			CELL(CC_PREC, SD_STYLE_NORMAL, "%.*s", (int)sizeof sv->precision, sv->precision);
		else
			CELL(CC_PREC, SD_STYLE_DIM, "-");
		CELL(CC_UPTIME, SD_STYLE_NORMAL, "%s", sd_fmt_duration(tmp, sizeof tmp, sv->uptime_s));
		/* No rate for a local server (unknown) nor a gone one (not billed). */
		if (!sv->local && sd_state_live(sv->state) && isfinite(sv->usd_per_hour) &&
		    sv->usd_per_hour > 0 && sv->usd_per_hour < 1e5)
			CELL(CC_USDH, sv->price_estimated ? SD_STYLE_WARN : SD_STYLE_NORMAL, "%.2f%s",
			     sv->usd_per_hour, sv->price_estimated ? "*" : "");
		else
			CELL(CC_USDH, SD_STYLE_DIM, "-");
		if (sv->local)
			CELL(CC_USD, SD_STYLE_DIM, "-");
		else
			CELL(CC_USD, SD_STYLE_NORMAL, "%s", sd_fmt_usd(tmp, sizeof tmp, sv->usd_so_far));
#undef CELL
	}

	int live = 0;
	for (int i = 0; i < n; i++)
		live += sd_state_live(v->servers[i].state);
	char title[96];
	snprintf(title, sizeof title, "Cluster (%d server%s, %d live, gen %ld)", n, n == 1 ? "" : "s", live,
	         v->generation);
	if (n > rows && rows > 0) {
		size_t l = strlen(title);
		snprintf(title + l, sizeof title - l, " %d-%d/%d", p->list.top + 1,
		         p->list.top + rows < n ? p->list.top + rows : n, n);
	}
	const char *foot = emulated && estimated ? "~ emulated GPU speed, * estimated price"
	                   : emulated ? "~ emulated GPU speed" : estimated ? "* estimated price" : NULL;
	if (foot && (int)strlen(foot) + (int)strlen(title) + 10 > p->w)
		foot = emulated ? "~ emulated GPU speed" : foot;
	sd_pane_frame(p, d, title, foot);
}

static uint64_t cluster_signature(const struct sd_pane *p, const struct sd_view *v)
{
	uint64_t h = sd_hash(SD_HASH_INIT, &v->nservers, sizeof v->nservers);
	h = sd_hash(h, &v->generation, sizeof v->generation);
	h = sd_hash(h, &v->unit_tokens, sizeof v->unit_tokens);
	if (server_count(v))
		h = sd_hash(h, v->servers, (size_t)v->nservers * sizeof *v->servers);
	return h;
}

static int cluster_nav(struct sd_pane *p, enum sd_nav how, const struct sd_view *v)
{
	return sd_list_nav(&p->list, how, v, server_count(v), sd_server_id, p->h - 3);
}

const struct sd_pane_ops sd_pane_cluster_ops = {
	.name = "cluster",
	.focusable = 1,
	.draw = cluster_draw,
	.signature = cluster_signature,
	.nav = cluster_nav,
};
