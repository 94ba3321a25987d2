/* tests/bench/bench-planner.c - how long the planner takes for 10,000
 * simulated runs of an 8-server configuration (the target: under
 * 1 s), against a peer measured in the same run: the market core alone
 * (sd_market_new, 8 launches, every event of the same span of market time
 * with no planner logic), which is the floor the planner builds on.
 *
 * Configurations: 8 transient K80 on data/gce-2019.json (all-reduce,
 * replacements), the seeds' 8-spot setup on data/gce-2019-02.json
 * (parameter server, no replacement) and 8 transient V100 on AWS in
 * data/market-2026.json (calm/storm market).  Prints wall and CPU time (the
 * CPU time is what to read on a loaded machine).
 *
 * Usage: bench-planner [RUNS]   (default 10000; data from $top_srcdir or the sources)
 * Exit status 1 if the gce-2019 configuration takes 1 s of CPU or more. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "src/market/catalog.h"
#include "src/market/market-model.h"
#include "src/market/planner.h"

static double clock_s(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static struct sd_catalog *load(const char *top, const char *name)
{
	char path[4096], *why = NULL;
	struct sd_catalog *c = NULL;
	snprintf(path, sizeof path, "%s/data/%s", top, name);
	if (sd_catalog_load(&c, path, &why) < 0) {
		fprintf(stderr, "bench-planner: %s\n", why);
		exit(1);
	}
	return c;
}

/* The peer: the market alone for `runs` runs of `span` seconds each. */
static double peer(const struct sd_catalog *cat, const struct sd_plan_config *c, int runs, double span, long *events)
{
	double t0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
	for (int r = 0; r < runs; r++) {
		struct sd_market_knobs k;
		sd_market_knobs_init(&k);
		k.seed = (uint64_t)r + 1;
		k.start_hour_of_day = fmod(r * 0.37, 24);
		struct sd_market *m;
		if (sd_market_new(&m, cat, &k, NULL) < 0)
			exit(1);
		for (int i = 0; i < c->servers; i++)
			sd_market_launch(m, c->offers[c->placement == SD_PLAN_PLACE_ONE_ZONE ? r % c->noffers : i % c->noffers],
			                 NULL, NULL);
		*events += sd_market_advance(m, span, NULL, NULL);
		sd_market_free(m);
	}
	return clock_s(CLOCK_PROCESS_CPUTIME_ID) - t0;
}

static int bench(const char *name, const struct sd_catalog *cat, const struct sd_plan_scaling *sc,
                 const struct sd_plan_config *c, int runs, int must_pass)
{
	struct sd_plan_job job = { .images = 64000.0 * 128, .speed_factor = 1, .batch_per_worker = 128 };
	snprintf(job.model, sizeof job.model, "resnet32");
	struct sd_plan_options opt;
	sd_plan_options_init(&opt);
	opt.runs = runs;
	struct sd_plan_result r;
	char *why = NULL;
	double w0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
	if (sd_plan_simulate(cat, sc, &job, c, &opt, &r, &why) < 0) {
		fprintf(stderr, "bench-planner: %s: %s\n", name, why);
		free(why);
		return 1;
	}
	double wall = clock_s(CLOCK_MONOTONIC) - w0, cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
	long events = 0;
	double p = peer(cat, c, runs, r.time_p50, &events);
	printf("bench-planner %-34s %d runs x %d servers: %.3f s CPU (%.3f s wall), %.2fx the 1 s target\n", name, runs,
	       c->servers, cpu, wall, cpu / 1.0);
	printf("  median %.0f s, mean $%.3f, %.2f revocations/run; %.1f us/run\n", r.time_p50, r.cost_mean,
	       r.revocations_mean, 1e6 * cpu / runs);
	printf("  peer (the market alone: same servers, %ld events over the median span): %.3f s CPU; planner/peer = %.2fx\n",
	       events, p, cpu / (p > 0 ? p : 1e-9));
	if (must_pass && cpu >= 1.0) {
		printf("  FAIL: slower than the 1 s target\n");
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *top = getenv("top_srcdir");
	if (!top)
		top = SD_SRCDIR;  /* the sources' data/, also from a separate build tree */
	int runs = argc > 1 ? atoi(argv[1]) : 10000;
	if (runs < 1)
		runs = 10000;
	char path[4096], *why = NULL;
	struct sd_plan_scaling sc;
	snprintf(path, sizeof path, "%s/data/scaling-2019.json", top);
	if (sd_plan_scaling_load(&sc, path, &why) < 0) {
		fprintf(stderr, "bench-planner: %s\n", why);
		return 1;
	}
	struct sd_catalog *gce = load(top, "gce-2019.json"), *feb = load(top, "gce-2019-02.json"),
	                  *mk = load(top, "market-2026.json");
	int fail = 0;

	struct sd_plan_config c;
	sd_plan_config_init(&c, NULL, 8);
	for (int i = 0; i < gce->noffers; i++)
		if (gce->offers[i].transient && !strcmp(gce->offers[i].gpu, "K80"))
			c.offers[c.noffers++] = &gce->offers[i];
	c.placement = SD_PLAN_PLACE_ONE_ZONE;
	fail |= bench("gce-2019 8x K80 spot, all-reduce", gce, &sc, &c, runs, 1);

	sd_plan_config_init(&c, NULL, 8);
	for (int i = 0; i < feb->noffers; i++)
		if (feb->offers[i].transient && !strcmp(feb->offers[i].gpu, "K80"))
			c.offers[c.noffers++] = &feb->offers[i];
	c.placement = SD_PLAN_PLACE_ONE_ZONE;
	c.parallel = SD_PLAN_PARAMETER_SERVER;
	c.replace = SD_PLAN_REPLACE_NONE;
	c.chief = SD_PLAN_CHIEF_FAILS_RUN;
	c.accounting = SD_PLAN_ACCOUNT_TRAINING;
	fail |= bench("gce-2019-02 8x K80 spot, seeds' PS", feb, &sc, &c, runs, 0);

	sd_plan_config_init(&c, NULL, 8);
	for (int i = 0; i < mk->noffers; i++)
		if (mk->offers[i].transient && !strcmp(mk->offers[i].gpu, "V100") && !strcmp(mk->offers[i].provider, "aws") &&
		    mk->offers[i].gpu_count == 1 && c.noffers < 64)
			c.offers[c.noffers++] = &mk->offers[i];
	if (c.noffers) {
		c.placement = SD_PLAN_PLACE_ONE_ZONE;
		fail |= bench("market-2026 8x V100 spot aws", mk, &sc, &c, runs, 0);
	}
	sd_catalog_free(gce);
	sd_catalog_free(feb);
	sd_catalog_free(mk);
	sd_plan_scaling_free(&sc);
	return fail;
}
