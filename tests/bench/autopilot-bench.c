/* tests/bench/autopilot-bench.c - the autopilot against the policies users have
 * today, on the same simulated markets with the same seeds, and the time of
 * one live decision.
 *
 * For each catalog (data/gce-2019.json, the Feb-2019 trace catalog
 * data/gce-2019-02.json, data/market-2026.json) and each job (the seeds'
 * ResNet-32, 64,000 steps of 128 images, with a 2 h deadline; the same
 * three times longer with a 6 h deadline):
 *   - the on-demand reference: the cheapest on-demand cluster (every GPU
 *     group of the catalog, 1 to 16 servers) whose P(done by the deadline)
 *     is at least 0.95, by mean cost;
 *   - for each of the policies none, same, cheapest and other-zone, what a
 *     user who plans does: the cheapest spot cluster (same groups and
 *     sizes, one zone per run as `spotdeck plan` places them) that meets
 *     the deadline with P >= 0.95 under that policy (else the most likely
 *     to), simulated `runs` times;
 *   - the autopilot, starting from no server at all (it chooses the
 *     cluster), with the deadline as its objective and its default limits
 *     (8 servers, every offer of the catalog), with the same seeds.
 * Each row: mean cost, median and p90 time, P(done by the deadline),
 * revocations per run.  Targets (the issue's): the autopilot's mean cost
 * <= 0.4x the on-demand reference with P >= 0.95, and below `same` and
 * `cheapest` (by 0.1 % at least: a tie misses) at equal or better P (0.005
 * of slack for sampling), on every catalog and job.  Seeds' job deadline:
 * 2 h, the 3x job's 6 h (AUTOPILOT_BENCH_DEADLINE_H=1 halves both);
 * AUTOPILOT_BENCH_CATALOG=market-2026.json runs one catalog.
 *
 * Then one decision's time: a state of 64 ready spot servers (8 of each
 * of the first 8 spot offers of gce-2019.json), the 16 in us-central1-c
 * just after two revocations there (a burst: they are swapped out),
 * decided with the planner's Monte Carlo figures from 2,000 simulated runs
 * (1,000 of the cluster before, 1,000 after; target <= 50 ms of one
 * core's CPU), and with the estimate alone.
 *
 * Usage: autopilot-bench [RUNS]   (default 2000; fewer for a quick look)
 * Exit 1 when a target is missed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "src/market/autopilot.h"
#include "src/market/catalog.h"
#include "src/market/planner.h"
#include "tests/bench/bench.h"

#define MAX_CFG 512

static double cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void cpu_model(void)
{
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[512];
	while (f && fgets(line, sizeof line, f)) {
		if (!strncmp(line, "model name", 10)) {
			char *c = strchr(line, ':');
			printf("CPU: %s", c ? c + 2 : line);
			break;
		}
	}
	if (f)
		fclose(f);
}

struct ctx {
	const struct sd_catalog *cat;
	const struct sd_plan_scaling *sc;
	struct sd_plan_job job;
	struct sd_plan_options opt;
};

static int sim(const struct ctx *x, const struct sd_plan_config *c, struct sd_plan_result *r)
{
	char *why = NULL;
	if (sd_plan_simulate(x->cat, x->sc, &x->job, c, &x->opt, r, &why) < 0) {
		fprintf(stderr, "autopilot-bench: %s: %s\n", c->label, why);
		free(why);
		exit(1);
	}
	return 0;
}

static bool want_spot(const struct sd_offer *o, void *ctx)
{
	(void)ctx;
	return o->transient;
}

static bool want_od(const struct sd_offer *o, void *ctx)
{
	(void)ctx;
	return !o->transient;
}

/* The cheapest configuration of `want`'s offers meeting P >= 0.95 under
 * `policy` (else the likeliest); its result in *best. */
static struct sd_plan_config pick(const struct ctx *x, bool (*want)(const struct sd_offer *, void *),
                                  enum sd_plan_replace policy, struct sd_plan_result *best)
{
	static struct sd_plan_config cfgs[MAX_CFG];
	int sizes[16];
	for (int i = 0; i < 16; i++)
		sizes[i] = i + 1;
	struct sd_plan_config base;
	sd_plan_config_init(&base, NULL, 1);
	base.placement = SD_PLAN_PLACE_ONE_ZONE;
	base.replace = policy;
	char *why = NULL;
	int n = sd_plan_configs(x->cat, &base, sizes, 16, want, NULL, cfgs, MAX_CFG, &why);
	if (n < 1) {
		fprintf(stderr, "autopilot-bench: %s\n", why ? why : "no configuration");
		exit(1);
	}
	int bi = -1;
	for (int i = 0; i < n; i++) {
		struct sd_plan_result r;
		sim(x, &cfgs[i], &r);
		bool ok = r.p_deadline >= 0.95, bok = bi >= 0 && best->p_deadline >= 0.95;
		if (bi < 0 || (ok && !bok) || (ok && bok && r.cost_mean < best->cost_mean) ||
		    (!ok && !bok && r.p_deadline > best->p_deadline)) {
			*best = r;
			bi = i;
		}
	}
	return cfgs[bi];
}

static void row(const char *policy, const struct sd_plan_config *c, const struct sd_plan_result *r)
{
	printf("  %-10s %-22s $%8.3f %8.1fm %8.1fm %8.3f %7.2f\n", policy, c->label, r->cost_mean, r->time_p50 / 60,
	       r->time_p90 / 60, r->p_deadline, r->revocations_mean);
}

static void compare(const char *cat, const char *job, const struct ctx *x)
{
	printf("\n%s, %s, deadline %.0f h, %d runs per row (seed %llu, the same for every row)\n", cat, job,
	       x->opt.deadline_seconds / 3600, x->opt.runs, (unsigned long long)x->opt.seed);
	printf("  %-10s %-22s %9s %9s %9s %8s %7s\n", "policy", "cluster", "mean cost", "median", "p90",
	       "P(time)", "revoc.");
	struct sd_plan_result od, res[5];
	struct sd_plan_config odc = pick(x, want_od, SD_PLAN_REPLACE_SAME, &od);
	row("on-demand", &odc, &od);
	struct sd_plan_config cfg[5];
	const enum sd_plan_replace pol[4] = { SD_PLAN_REPLACE_NONE, SD_PLAN_REPLACE_SAME, SD_PLAN_REPLACE_CHEAPEST,
	                                      SD_PLAN_REPLACE_OTHER_ZONE };
	for (int i = 0; i < 4; i++) {
		cfg[i] = pick(x, want_spot, pol[i], &res[i]);
		row(sd_plan_replace_name(pol[i]), &cfg[i], &res[i]);
	}
	/* The autopilot chooses its cluster itself, from nothing. */
	cfg[4] = cfg[1];
	cfg[4].servers = 0;
	cfg[4].replace = SD_PLAN_REPLACE_AUTOPILOT;
	snprintf(cfg[4].label, sizeof cfg[4].label, "its own");
	double t0 = cpu_s();
	sim(x, &cfg[4], &res[4]);
	double dt = cpu_s() - t0;
	row("autopilot", &cfg[4], &res[4]);
	printf("  (autopilot: %.2f s CPU for %d runs, %.2f ms a run)\n", dt, x->opt.runs, 1e3 * dt / x->opt.runs);
	char what[256];
	const struct sd_plan_result *a = &res[4];
	snprintf(what, sizeof what, "%s %s: autopilot mean cost / on-demand reference's", cat, job);
	bench_ratio("autopilot-bench", what, a->cost_mean / od.cost_mean, 0.4, 1);
	snprintf(what, sizeof what, "%s %s: autopilot P(on time) / 0.95", cat, job);
	bench_ratio("autopilot-bench", what, a->p_deadline / 0.95, 1, 0);
	for (int i = 1; i <= 2; i++) {
		snprintf(what, sizeof what, "%s %s: autopilot mean cost / %s's", cat, job, sd_plan_replace_name(pol[i]));
		/* "Lower": a tie (the same cluster, no revocation to act on) misses. */
		bench_ratio("autopilot-bench", what, a->cost_mean / res[i].cost_mean, 0.999, 1);
		if (a->p_deadline + 0.005 < res[i].p_deadline) {
			printf("  MISSED: autopilot P(on time) %.3f below %s's %.3f\n", a->p_deadline,
			       sd_plan_replace_name(pol[i]), res[i].p_deadline);
			bench_missed++;
		}
	}
}

/* One decision with 64 servers, figures from `runs` Monte Carlo runs. */
static void decision_time(const struct sd_catalog *cat, const struct sd_plan_scaling *sc, int runs)
{
	struct sd_autopilot_server sv[64];
	int n = 0;
	for (int i = 0; i < cat->noffers && n < 64; i++) {
		const struct sd_offer *o = &cat->offers[i];
		if (!o->transient)
			continue;
		for (int k = 0; k < 8 && n < 64; k++, n++)
			sv[n] = (struct sd_autopilot_server){ .id = n, .offer = o, .age_seconds = 7200, .ready = true };
	}
	struct sd_autopilot_objective obj;
	sd_autopilot_objective_init(&obj);
	obj.deadline_seconds = 6 * 3600;
	obj.max_servers = 64;
	/* Two revocations in the first servers' zone: a burst to leave, so the
	 * decision has actions and their Monte Carlo figures. */
	struct sd_autopilot_revocation rv[2] = { { sv[0].offer, 120, false }, { sv[0].offer, 60, false } };
	struct sd_autopilot_state st = { .cat = cat, .images_total = 3 * 64000.0 * 128, .images_done = 64000.0 * 128,
	                                 .speed_factor = 1, .elapsed_seconds = 1800, .spent_usd = 10,
	                                 .servers = sv, .nservers = n, .revocations = rv, .nrevocations = 2,
	                                 .manual_cap = -1, .hazard_scale = 1 };
	struct sd_autopilot_params pp;
	sd_autopilot_params_init(&pp);
	pp.scaling = sc;
	struct sd_autopilot_action act[SD_AUTOPILOT_MAX_ACTIONS];
	char *why = NULL;
	for (int pass = 0; pass < 2; pass++) {
		pp.runs = pass == 0 ? runs : 0;
		int reps = 5, na = 0;
		double t0 = cpu_s();
		for (int r = 0; r < reps; r++) {
			na = sd_autopilot_decide(&obj, &st, &pp, act, SD_AUTOPILOT_MAX_ACTIONS, &why);
			if (na < 0) {
				fprintf(stderr, "autopilot-bench: %s\n", why);
				exit(1);
			}
		}
		double ms = 1e3 * (cpu_s() - t0) / reps;
		printf("one decision, %d servers, %s: %.1f ms CPU, %d action(s); first: %s\n", n,
		       pass == 0 ? "Monte Carlo figures" : "estimate only", ms, na, act[0].reason);
		if (pass == 0) {
			char what[128];
			snprintf(what, sizeof what, "one decision (64 servers, %d simulated runs) / 50 ms", runs);
			bench_ratio("autopilot-bench", what, ms / 50, 1, 1);
		}
	}
}

static struct sd_catalog *load(const char *top, const char *name)
{
	char path[4096], *why = NULL;
	struct sd_catalog *c = NULL;
	snprintf(path, sizeof path, "%s/data/%s", top, name);
	if (sd_catalog_load(&c, path, &why) < 0) {
		fprintf(stderr, "autopilot-bench: %s\n", why);
		exit(1);
	}
	return c;
}

int main(int argc, char **argv)
{
	const char *top = getenv("top_srcdir");
	if (!top)
		top = SD_SRCDIR;
	int runs = argc > 1 ? atoi(argv[1]) : 2000;
	double deadline_h = getenv("AUTOPILOT_BENCH_DEADLINE_H") ? atof(getenv("AUTOPILOT_BENCH_DEADLINE_H")) : 2;
	if (runs < 1)
		runs = 2000;
	cpu_model();
	char path[4096], *why = NULL;
	struct sd_plan_scaling sc;
	snprintf(path, sizeof path, "%s/data/scaling-2019.json", top);
	if (sd_plan_scaling_load(&sc, path, &why) < 0) {
		fprintf(stderr, "autopilot-bench: %s\n", why);
		return 1;
	}
	const char *names[3] = { "gce-2019.json", "gce-2019-02.json", "market-2026.json" };
	const char *only = getenv("AUTOPILOT_BENCH_CATALOG");
	struct sd_catalog *gce = NULL;
	for (int k = 0; k < 3; k++) {
		if (only && strcmp(only, names[k]))
			continue;
		struct sd_catalog *cat = load(top, names[k]);
		for (int j = 0; j < 2; j++) {
			struct ctx x = { .cat = cat, .sc = &sc };
			x.job = (struct sd_plan_job){ .images = (j ? 3 : 1) * 64000.0 * 128, .speed_factor = 1,
			                              .batch_per_worker = 128 };
			snprintf(x.job.model, sizeof x.job.model, "resnet32");
			sd_plan_options_init(&x.opt);
			x.opt.runs = runs;
			x.opt.seed = 1;
			x.opt.deadline_seconds = (j ? 3 : 1) * deadline_h * 3600.0;
			compare(names[k], j ? "3x the seeds' job" : "the seeds' job", &x);
		}
		if (k == 0)
			gce = cat;
		else
			sd_catalog_free(cat);
	}
	printf("\n");
	if (!gce)
		gce = load(top, "gce-2019.json");
	decision_time(gce, &sc, 2000);
	sd_catalog_free(gce);
	sd_plan_scaling_free(&sc);
	return bench_exit();
}
