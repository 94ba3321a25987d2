/* src/app/whatif.c - the cockpit's what-if view (see whatif.h). */
#include "config.h"

#include "src/app/whatif.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/errors.h"

/* ---- commands -------------------------------------------------------------- */

static void appendf(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void appendf(char *buf, size_t len, const char *fmt, ...)
{
	size_t n = strlen(buf);
	if (n + 1 >= len)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf + n, len - n, fmt, ap);
	va_end(ap);
}

void sd_whatif_commands(const struct sd_whatif_in *in, const struct sd_plan_config *cfg, char *cmds, size_t cmds_len,
                        char *summary, size_t summary_len)
{
	/* The offers the configuration wants, with counts. */
	const struct sd_offer *want[SD_PLAN_MAX_SERVERS];
	int nwant = cfg->servers;
	for (int i = 0; i < nwant; i++)
		want[i] = cfg->offers[i % cfg->noffers];
	bool keep[SD_WHATIF_MAX_LIVE] = { false };
	for (int l = 0; l < in->nlive; l++) {
		for (int i = 0; i < nwant; i++) {
			if (want[i] == in->live_offer[l]) {
				keep[l] = true;
				want[i] = want[--nwant];
				break;
			}
		}
	}
	cmds[0] = summary[0] = 0;
	/* Adds first, so the run trains on while the new servers boot. */
	for (int i = 0; i < nwant; i++)
		appendf(cmds, cmds_len, "add %s\n", want[i]->id);
	int ndrop = in->nlocal;
	for (int l = 0; l < in->nlive; l++)
		ndrop += !keep[l];
	for (int l = 0; l < in->nlive; l++)
		if (!keep[l])
			appendf(cmds, cmds_len, "drop %s\n", in->live_id[l]);
	for (int l = 0; l < in->nlocal; l++)
		appendf(cmds, cmds_len, "drop %s\n", in->local_id[l]);
	if (nwant) {
		/* "add 8: 4 x gce/a/v100/spot, 4 x gce/b/v100/spot" */
		appendf(summary, summary_len, "add %d:", nwant);
		bool done[SD_PLAN_MAX_SERVERS] = { false };
		for (int i = 0; i < nwant; i++) {
			if (done[i])
				continue;
			int k = 0;
			for (int j = i; j < nwant; j++)
				if (want[j] == want[i]) {
					done[j] = true;
					k++;
				}
			appendf(summary, summary_len, "%s %d x %s", i ? "," : "", k, want[i]->id);
		}
	}
	if (ndrop) {
		appendf(summary, summary_len, "%sdrop", nwant ? "; " : "");
		for (int l = 0; l < in->nlive; l++)
			if (!keep[l])
				appendf(summary, summary_len, " %s", in->live_id[l]);
		for (int l = 0; l < in->nlocal; l++)
			appendf(summary, summary_len, " %s", in->local_id[l]);
	}
	if (!nwant && !ndrop)
		snprintf(summary, summary_len, "no change");
}

/* ---- planning ---------------------------------------------------------------- */

static int cmp_rows(const void *a, const void *b)
{
	const struct sd_view_whatif *x = a, *y = b;
	bool fx = isfinite(x->cost_p50_usd), fy = isfinite(y->cost_p50_usd);
	if (fx != fy)
		return fx ? -1 : 1;
	if (fx && x->cost_p50_usd != y->cost_p50_usd)
		return x->cost_p50_usd < y->cost_p50_usd ? -1 : 1;
	if (x->current != y->current)
		return x->current ? -1 : 1;
	return strcmp(x->label, y->label);
}

int sd_whatif_compute(const struct sd_whatif_in *in, struct sd_view_whatif *rows, int max, char *note,
                      size_t note_len, char **why)
{
	struct sd_plan_scaling sc = { 0 };
	bool have_sc = in->scaling_path[0] && sd_plan_scaling_load(&sc, in->scaling_path, NULL) == 0;
	struct sd_plan_config base;
	sd_plan_config_init(&base, NULL, 1);
	base.join_seconds = in->join_seconds;
	base.recovery_seconds = in->recovery_seconds;
	base.checkpoint_images = in->checkpoint_images > 0 ? in->checkpoint_images : base.checkpoint_images;
	if (!have_sc)
		base.efficiency_measured = 1;  /* no scaling data: linear, an assumption */

	int cap = max < SD_WHATIF_MAX_ROWS ? max : SD_WHATIF_MAX_ROWS;
	struct sd_plan_config *cfgs = sd_calloc((size_t)cap, sizeof *cfgs);
	static const int sizes[] = { 1, 2, 4, 8 };
	int n = 0;
	if (in->nlive > 0 && cap > 0) {
		/* The cluster as it runs now, as a fresh cluster of the same servers. */
		struct sd_plan_config c = base;
		c.servers = in->nlive;
		c.noffers = in->nlive < 64 ? in->nlive : 64;
		for (int i = 0; i < c.noffers; i++)
			c.offers[i] = in->live_offer[i];
		c.initial_ready = true;
		bool same = true;
		for (int i = 1; i < in->nlive && same; i++)
			same = !strcmp(in->live_offer[i]->gpu, in->live_offer[0]->gpu) &&
			       in->live_offer[i]->transient == in->live_offer[0]->transient &&
			       in->live_offer[i]->gpu_count == in->live_offer[0]->gpu_count;
		if (same)
			snprintf(c.label, sizeof c.label, "now: %dx %s%s %s", in->nlive,
			         in->live_offer[0]->gpu_count > 1 ? "multi-GPU " : "", in->live_offer[0]->gpu,
			         in->live_offer[0]->transient ? "spot" : "on-demand");
		else
			snprintf(c.label, sizeof c.label, "now: %d servers, mixed", in->nlive);
		cfgs[n++] = c;
	}
	int m = sd_plan_configs(in->cat, &base, sizes, 4, NULL, NULL, cfgs + n, cap - n, why);
	if (m < 0) {
		free(cfgs);
		if (have_sc)
			sd_plan_scaling_free(&sc);
		return -1;
	}
	n += m;
	struct sd_plan_result *res = sd_calloc((size_t)n, sizeof *res);
	int rc = 0;
	for (int i = 0; i < n && rc == 0; i++)
		rc = sd_plan_simulate(in->cat, have_sc ? &sc : NULL, &in->job, &cfgs[i], &in->opt, &res[i], why);
	if (rc == 0) {
		sd_plan_pareto(res, n);
		for (int i = 0; i < n; i++) {
			struct sd_view_whatif *r = &rows[i];
			memset(r, 0, sizeof *r);
			snprintf(r->label, sizeof r->label, "%s", cfgs[i].label);
			r->current = i == 0 && in->nlive > 0;
			r->servers = cfgs[i].servers;
			r->transient = cfgs[i].offers[0]->transient;
			r->time_p50_s = res[i].time_p50;
			r->time_p90_s = res[i].time_p90;
			r->cost_p50_usd = res[i].cost_p50;
			r->cost_p90_usd = res[i].cost_p90;
			r->revocations = res[i].revocations_mean;
			r->failed = (double)res[i].failed / res[i].runs;
			r->pareto = res[i].pareto;
			sd_whatif_commands(in, &cfgs[i], r->commands, sizeof r->commands, r->summary, sizeof r->summary);
		}
		qsort(rows, (size_t)n, sizeof *rows, cmp_rows);
		/* At most 92 columns: the dialog's width less its frame. */
		double left = in->job.images - in->job.done_images;
		snprintf(note, note_len, "simulated: %.3g M %s left, %d runs/row; %s; %s scaling",
		         left * (in->tokens_per_sample > 0 ? in->tokens_per_sample : 1) / 1e6,
		         in->tokens_per_sample > 0 ? "tokens" : "images", in->opt.runs,
		         in->speed_measured ? "speed measured in this run" : "catalog speed (none measured)",
		         have_sc ? "seeds'" : "linear");
	}
	free(res);
	free(cfgs);
	if (have_sc)
		sd_plan_scaling_free(&sc);
	return rc < 0 ? -1 : n;
}
