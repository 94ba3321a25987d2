/* tests/market/test-planner.c - unit tests of the planner (src/market/planner.c) on small
 * hand-made catalogs whose answers can be worked out by hand: fixed boot
 * times, servers that are surely revoked within the hour, a capacity of 1.
 *
 *  1. On-demand runs: time = boot + join + work / speed, exactly; money by
 *     the provider's billing (with its 60 s minimum) or over the training
 *     window only.
 *  2. Throughput: all-reduce efficiency from the K80 series; the parameter
 *     server curve against offered load, and k PS from the 1-PS curve.
 *  3. Revocations: with no replacement a lone spot server never finishes;
 *     with replacements it does, later; losing the chief fails the run.
 *  4. Checkpoints: work since the last one is lost when the last worker goes
 *     without notice; a forced checkpoint at the notice keeps it.
 *  5. Stockouts: a refused request is retried, the run goes on without it.
 *  6. Replacement policy: "cheapest" moves to the cheaper zone.
 *  7. Determinism, Pareto frontier, speed-up and saving, durations, bad
 *     input (sizes, scaling files). */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/market/catalog.h"
#include "src/market/planner.h"
#include "tests/check.h"

#define OFFER(id, zone, spot, usd, cap, notice, boot, rev) \
	"{\"id\": \"" id "\", \"provider\": \"gce\", \"region\": \"r\", \"zone\": \"" zone "\", " \
	"\"gpu\": \"K80\", \"gpu_count\": 1, \"transient\": " spot ", \"usd_per_hour\": " usd ", " \
	"\"price_source\": \"estimated: test\", \"images_per_sec\": 100, \"speed_source\": \"estimated: test\", " \
	"\"capacity\": {\"servers\": " cap ", \"source\": \"estimated: test\"}, \"notice_seconds\": " notice ", " \
	"\"billing\": {\"unit\": \"per_second\", \"minimum_seconds\": 60}, " \
	"\"boot\": {\"quantiles_seconds\": [" boot ", " boot "], \"source\": \"estimated: test\"}" rev "}"
/* Every server is revoked within its first hour. */
#define SURE ", \"revocation\": {\"model\": \"empirical\", \"max_lifetime_hours\": 1, " \
	"\"lifetime_cdf\": [[1, 1.0]], \"cdf_source\": \"estimated: test\"}"

static const char catalog_text[] =
	"{\"format\": \"spotdeck-catalog\", \"version\": 1, \"name\": \"planner-test\", \"offers\": ["
	OFFER("gce/z-a/k80/spot", "z-a", "true", "0.36", "8", "30", "100", SURE) ","
	OFFER("gce/z-a/k80/on-demand", "z-a", "false", "3.6", "8", "0", "100", "") ","
	OFFER("gce/z-b/k80/spot", "z-b", "true", "0.036", "8", "30", "100", SURE) ","
	OFFER("gce/z-b/k80/on-demand", "z-b", "false", "3.6", "8", "0", "100", "") ","
	OFFER("gce/z-c/k80/spot", "z-c", "true", "0.36", "8", "0", "100", SURE) ","
	OFFER("gce/z-d/k80/on-demand", "z-d", "false", "3.6", "8", "0", "10", "") ","
	OFFER("gce/z-e/k80/on-demand", "z-e", "false", "3.6", "1", "0", "100", "")
	"]}";

/* K80: s(n) = 1, 1.8, 2.4, 3.2 steps/s; P100: 2.5, 4.  Batch 100 images. */
static const char scaling_text[] =
	"{\"format\": \"spotdeck-scaling\", \"version\": 1, \"series\": ["
	"{\"model\": \"m\", \"gpu\": \"K80\", \"parameter_servers\": 1, \"batch_per_worker\": 100, "
	" \"steps_per_second\": [1, 1.8, 2.4, 3.2]},"
	"{\"model\": \"m\", \"gpu\": \"P100\", \"parameter_servers\": 1, \"batch_per_worker\": 100, "
	" \"steps_per_second\": [2.5, 4]}]}";

static struct sd_catalog *cat;
static struct sd_plan_scaling sc;

static const struct sd_offer *offer(const char *id)
{
	const struct sd_offer *o = sd_catalog_find(cat, id);
	if (!o) {
		fprintf(stderr, "test-planner: no offer %s\n", id);
		exit(1);
	}
	return o;
}

static void job_of(struct sd_plan_job *j, double images)
{
	memset(j, 0, sizeof *j);
	snprintf(j->model, sizeof j->model, "m");
	j->images = images;
	j->speed_factor = 1;
	j->batch_per_worker = 100;
}

static struct sd_plan_config config(const char *id, int servers)
{
	struct sd_plan_config c;
	sd_plan_config_init(&c, offer(id), servers);
	snprintf(c.label, sizeof c.label, "%dx %s", servers, id);
	c.join_seconds = 0;
	return c;
}

static struct sd_plan_result run(const struct sd_plan_config *c, double images, int runs)
{
	struct sd_plan_job j;
	job_of(&j, images);
	struct sd_plan_options o;
	sd_plan_options_init(&o);
	o.runs = runs;
	o.seed = 7;
	struct sd_plan_result r;
	char *why = NULL;
	memset(&r, 0, sizeof r);
	if (sd_plan_simulate(cat, &sc, &j, c, &o, &r, &why) < 0) {
		CHECK(0, "%s: %s", c->label, why);
		free(why);
	}
	return r;
}

static bool near(double a, double b, double tol)
{
	return fabs(a - b) <= tol;
}

static void test_on_demand(void)
{
	/* 100 images/s, 360,000 images: 3,600 s of training after a 100 s boot. */
	struct sd_plan_config c = config("gce/z-a/k80/on-demand", 1);
	struct sd_plan_result r = run(&c, 360000, 50);
	CHECK(r.completed == 50 && r.failed == 0, "%d completed, %d failed", r.completed, r.failed);
	CHECK(near(r.time_p10, 3700, 1e-6) && near(r.time_p50, 3700, 1e-6) && near(r.time_p90, 3700, 1e-6),
	      "time %.6f %.6f %.6f, want 3700", r.time_p10, r.time_p50, r.time_p90);
	CHECK(near(r.train_p50, 3600, 1e-6), "training %.6f, want 3600", r.train_p50);
	CHECK(near(r.cost_mean, 3.7, 1e-9), "cost %.9f, want 3.6 $/h x 3700 s = 3.7", r.cost_mean);
	CHECK(r.revocations_mean == 0 && r.p_revoked == 0 && r.p_refused == 0);

	c.join_seconds = 50;
	r = run(&c, 360000, 5);
	CHECK(near(r.time_p50, 3750, 1e-6), "with a 50 s join: %.6f, want 3750", r.time_p50);

	c.join_seconds = 0;
	c.accounting = SD_PLAN_ACCOUNT_TRAINING;
	r = run(&c, 360000, 5);
	CHECK(near(r.time_p50, 3600, 1e-6) && near(r.cost_mean, 3.6, 1e-9),
	      "training window: %.6f s $%.9f, want 3600 s $3.6", r.time_p50, r.cost_mean);

	/* 10 s boot + 1 s of work: billed the 60 s minimum. */
	c = config("gce/z-d/k80/on-demand", 1);
	r = run(&c, 100, 3);
	CHECK(near(r.time_p50, 11, 1e-9) && near(r.cost_mean, 0.06, 1e-12),
	      "11 s billed as 60 s: %.9f s $%.12f, want 11 s $0.06", r.time_p50, r.cost_mean);
}

static void test_throughput(void)
{
	/* All-reduce: efficiency(4) = 3.2 / (4 x 1) = 0.8 of 4 x 100 images/s. */
	struct sd_plan_config c = config("gce/z-a/k80/on-demand", 4);
	struct sd_plan_result r = run(&c, 360000, 5);
	CHECK(near(r.train_p50, 360000 / 320.0, 1e-6), "all-reduce 4 workers: %.6f s, want 1125", r.train_p50);
	c.efficiency_measured = 0.5;
	r = run(&c, 360000, 5);
	CHECK(near(r.train_p50, 360000 / 200.0, 1e-6), "measured efficiency 0.5: %.6f s, want 1800", r.train_p50);

	/* PS: the pooled points are (1, 1) (2, 1.8) (2.5, 2.5) (3, 2.4) (4, 3.2)
	 * (5, 4); offered 5 steps/s gives 4 steps/s = 400 images/s. */
	c = config("gce/z-a/k80/on-demand", 5);
	c.parallel = SD_PLAN_PARAMETER_SERVER;
	r = run(&c, 360000, 5);
	CHECK(near(r.train_p50, 900, 1e-6), "PS, 5 workers: %.6f s, want 900", r.train_p50);
	/* 3 workers: 2.4 steps/s (the K80 point). */
	c.servers = 3;
	r = run(&c, 360000, 5);
	CHECK(near(r.train_p50, 1500, 1e-6), "PS, 3 workers: %.6f s, want 1500", r.train_p50);
	/* 2 PS, no 2-PS series: f2(5) = 2 f1(2.5) = 2 x 2.5 = 5 steps/s. */
	c.servers = 5;
	c.parameter_servers = 2;
	r = run(&c, 360000, 5);
	CHECK(near(r.train_p50, 720, 1e-6), "2 PS, 5 workers: %.6f s, want 720", r.train_p50);
	/* And the PS is billed (0.1429 $/h each, per second, whole run). */
	CHECK(near(r.cost_mean, 5 * 3.6 * 820 / 3600 + 2 * SD_PLAN_PS_USD_PER_HOUR * 820 / 3600, 1e-9),
	      "cost with 2 PS: %.9f", r.cost_mean);

	/* A model with no series cannot be planned beyond one worker. */
	struct sd_plan_job j;
	job_of(&j, 1000);
	snprintf(j.model, sizeof j.model, "vgg");
	struct sd_plan_options o;
	sd_plan_options_init(&o);
	o.runs = 2;
	char *why = NULL;
	c = config("gce/z-a/k80/on-demand", 2);
	CHECK(sd_plan_simulate(cat, &sc, &j, &c, &o, &r, &why) < 0 && why && strstr(why, "no K80 scaling series"),
	      "%s", why ? why : "(accepted)");
	free(why);
}

static void test_revocations(void)
{
	/* 10 h of work on one server that lives under an hour: never done. */
	struct sd_plan_config c = config("gce/z-a/k80/spot", 1);
	c.replace = SD_PLAN_REPLACE_NONE;
	struct sd_plan_result r = run(&c, 3600000, 200);
	CHECK(r.failed == 200 && r.completed == 0 && r.p_revoked == 1, "no replacement: %d failed, P(rev) %g",
	      r.failed, r.p_revoked);
	CHECK(isnan(r.time_p50) && r.failed_cost_mean > 0);

	/* 2 h of work with replacements: done, after more than one revocation. */
	c.replace = SD_PLAN_REPLACE_SAME;
	r = run(&c, 720000, 200);
	CHECK(r.completed == 200, "with replacements %d of 200 done", r.completed);
	CHECK(r.revocations_mean >= 2, "revocations per run %.2f (a server lives < 1 h, the job needs 2 h)",
	      r.revocations_mean);
	CHECK(r.time_p10 > 7200 + 100 * (1 + 2), "p10 %.0f s: two replacements' boots at least", r.time_p10);

	/* Losing the chief fails the run (ICAC's monitor), replacements or not. */
	c = config("gce/z-a/k80/spot", 2);
	c.chief = SD_PLAN_CHIEF_FAILS_RUN;
	r = run(&c, 720000, 200);
	CHECK(r.failed == 200, "chief fails the run: %d of 200 failed", r.failed);
	c.chief = SD_PLAN_CHIEF_NONE;
	r = run(&c, 720000, 200);
	CHECK(r.completed == 200, "no chief: %d of 200 done", r.completed);
}

static void test_checkpoints(void)
{
	/* No notice: the last worker's going loses the work since the last
	 * checkpoint, so rare checkpoints make the job longer. */
	struct sd_plan_config c = config("gce/z-c/k80/spot", 1);
	c.recovery_seconds = 0;
	c.checkpoint_images = 100 * 60.0;  /* every minute of work */
	struct sd_plan_result often = run(&c, 360000, 400);
	c.checkpoint_images = 100 * 900.0; /* every 15 minutes */
	struct sd_plan_result rare = run(&c, 360000, 400);
	CHECK(often.completed == 400 && rare.completed == 400);
	CHECK(rare.time_mean > often.time_mean + 300, "checkpoint every 15 min: %.0f s, every minute: %.0f s",
	      rare.time_mean, often.time_mean);

	/* With a 30 s notice, a forced checkpoint keeps everything even when
	 * the periodic ones never come; without it a 2 h job never finishes. */
	c = config("gce/z-a/k80/spot", 1);
	c.checkpoint_images = 1e15;
	struct sd_plan_result forced = run(&c, 720000, 40);
	c.forced_checkpoint = false;
	struct sd_plan_result lost = run(&c, 720000, 40);
	CHECK(forced.completed == 40, "forced checkpoint: %d of 40 done", forced.completed);
	CHECK(lost.failed == 40, "no checkpoint at all: %d of 40 failed", lost.failed);
}

static void test_stockout(void)
{
	/* Capacity 1: the second server is refused and retried every 60 s; the
	 * first trains alone. */
	struct sd_plan_config c = config("gce/z-e/k80/on-demand", 2);
	struct sd_plan_result r = run(&c, 360000, 5);
	CHECK(r.completed == 5 && near(r.time_p50, 3700, 1e-6), "capacity 1: %.6f s, want 3700", r.time_p50);
	CHECK(r.p_refused == 1, "runs with a refused request: %g", r.p_refused);
	/* The retry of an initial server asks for that server's offer, whatever
	 * the replacement policy: never a cheaper spot one in its place. */
	c.replace = SD_PLAN_REPLACE_CHEAPEST;
	r = run(&c, 360000, 5);
	CHECK(near(r.time_p50, 3700, 1e-6) && r.revocations_mean == 0, "capacity 1, cheapest: %.6f s, %.2f revocations",
	      r.time_p50, r.revocations_mean);
}

static void test_policy(void)
{
	/* Replacements of z-a servers: "same" stays at 0.36 $/h, "cheapest"
	 * and "other-zone" move to z-b at 0.036 $/h. */
	struct sd_plan_config c = config("gce/z-a/k80/spot", 1);
	c.accounting = SD_PLAN_ACCOUNT_TRAINING;
	struct sd_plan_result same = run(&c, 720000, 200);
	c.replace = SD_PLAN_REPLACE_CHEAPEST;
	struct sd_plan_result cheap = run(&c, 720000, 200);
	c.replace = SD_PLAN_REPLACE_OTHER_ZONE;
	struct sd_plan_result other = run(&c, 720000, 200);
	CHECK(cheap.cost_mean < 0.6 * same.cost_mean, "cheapest $%.3f, same $%.3f", cheap.cost_mean, same.cost_mean);
	CHECK(other.cost_mean < 0.6 * same.cost_mean, "other zone $%.3f, same $%.3f", other.cost_mean, same.cost_mean);
	enum sd_plan_replace p;
	CHECK(sd_plan_replace_parse("other-zone", &p) == 0 && p == SD_PLAN_REPLACE_OTHER_ZONE);
	CHECK(sd_plan_replace_parse("nearest", &p) < 0);
	CHECK_STR(sd_plan_replace_name(SD_PLAN_REPLACE_CHEAPEST), "cheapest");
}

static void test_compare_and_determinism(void)
{
	struct sd_plan_config spot = config("gce/z-a/k80/spot", 2), od, base;
	char *why = NULL;
	CHECK(sd_plan_config_on_demand(cat, &spot, &od, &why) == 0);
	CHECK(od.offers[0] == offer("gce/z-a/k80/on-demand") && od.servers == 2);
	CHECK(sd_plan_config_baseline(cat, &spot, &base, &why) == 0);
	CHECK(base.servers == 1 && base.noffers == 1 && base.offers[0] == offer("gce/z-a/k80/on-demand"));
	struct sd_plan_result rs = run(&spot, 720000, 300), ro = run(&od, 720000, 300), rb = run(&base, 720000, 300);
	sd_plan_compare(&rs, &rb, &ro);
	CHECK(near(rs.speedup, rb.time_p50 / rs.time_p50, 1e-12) && near(rs.saving, 1 - rs.cost_mean / ro.cost_mean, 1e-12),
	      "speed-up %g, saving %g", rs.speedup, rs.saving);
	CHECK(rs.saving > 0.5, "spot at a tenth of the price saves %.2f", rs.saving);

	struct sd_plan_result again = run(&spot, 720000, 300);
	CHECK(again.time_p50 == rs.time_p50 && again.cost_mean == rs.cost_mean &&
	      again.revocations_mean == rs.revocations_mean, "same seed, same result");
	struct sd_plan_job j;
	job_of(&j, 720000);
	struct sd_plan_options o;
	sd_plan_options_init(&o);
	o.runs = 300;
	o.seed = 8;
	struct sd_plan_result other;
	CHECK(sd_plan_simulate(cat, &sc, &j, &spot, &o, &other, &why) == 0);
	CHECK(other.time_mean != rs.time_mean, "another seed, other runs");
	/* Deadline and budget probabilities. */
	o.seed = 7;
	o.deadline_seconds = rs.time_p50;
	o.budget_usd = 1e9;
	CHECK(sd_plan_simulate(cat, &sc, &j, &spot, &o, &other, &why) == 0);
	CHECK(other.p_deadline >= 0.5 && other.p_deadline < 0.7, "P(within the median) %.3f", other.p_deadline);
	CHECK(other.p_budget == 1.0, "P(within a huge budget) %.3f", other.p_budget);
	o.deadline_seconds = rs.time_p10 - 1e-6;
	o.budget_usd = rs.cost_p10 - 1e-9;
	CHECK(sd_plan_simulate(cat, &sc, &j, &spot, &o, &other, &why) == 0);
	CHECK(other.p_deadline < 0.1 && other.p_budget < 0.1, "P(before p10) %.3f, P(under p10 cost) %.3f",
	      other.p_deadline, other.p_budget);
	free(why);

	/* Pareto: (time, cost) = (1, 3) (2, 2) (3, 1) on, (3, 3) and (2, 2.5) off. */
	struct sd_plan_result r[5];
	double tc[5][2] = { { 1, 3 }, { 2, 2 }, { 3, 1 }, { 3, 3 }, { 2, 2.5 } };
	for (int i = 0; i < 5; i++) {
		memset(&r[i], 0, sizeof r[i]);
		r[i].completed = 1;
		r[i].time_p50 = tc[i][0];
		r[i].cost_p50 = tc[i][1];
	}
	sd_plan_pareto(r, 5);
	CHECK(r[0].pareto && r[1].pareto && r[2].pareto && !r[3].pareto && !r[4].pareto);
}

static void test_saved(void)
{
	/* Billed $0.36 on z-a spot (0.36 $/h): on-demand (3.6 $/h) would have
	 * been $3.60, so $3.24 saved; an on-demand server saves nothing. */
	bool est = false;
	CHECK(near(sd_plan_saved_usd(cat, offer("gce/z-a/k80/spot"), 0.36, &est), 3.24, 1e-12));
	CHECK(est, "the test catalog's prices are all estimates");
	CHECK(sd_plan_saved_usd(cat, offer("gce/z-a/k80/on-demand"), 1.0, NULL) == 0);
	/* z-c has no on-demand K80: no twin, nothing claimed. */
	CHECK(sd_plan_saved_usd(cat, offer("gce/z-c/k80/spot"), 1.0, NULL) == 0);
	CHECK(sd_plan_saved_usd(cat, NULL, 1.0, NULL) == 0);
}

static void test_bad_input(void)
{
	char *why = NULL;
	struct sd_plan_config c = config("gce/z-a/k80/on-demand", 0);
	struct sd_plan_job j;
	job_of(&j, 1000);
	struct sd_plan_options o;
	sd_plan_options_init(&o);
	struct sd_plan_result r;
	CHECK(sd_plan_simulate(cat, &sc, &j, &c, &o, &r, &why) < 0 && strstr(why, "cluster size must be 1 to 256"),
	      "%s", why ? why : "(accepted)");
	struct sd_offer stranger = *offer("gce/z-a/k80/on-demand");
	c = config("gce/z-a/k80/on-demand", 1);
	c.offers[0] = &stranger;
	CHECK(sd_plan_simulate(cat, &sc, &j, &c, &o, &r, &why) < 0 && why && strstr(why, "not from the catalog"), "%s", why ? why : "(accepted)");

	double s;
	CHECK(sd_plan_parse_duration("2h", "--deadline", &s, &why) == 0 && s == 7200);
	CHECK(sd_plan_parse_duration("1h30m", "--deadline", &s, &why) == 0 && s == 5400);
	CHECK(sd_plan_parse_duration("90", "--deadline", &s, &why) == 0 && s == 90);
	CHECK(sd_plan_parse_duration("1.5d", "--deadline", &s, &why) == 0 && s == 129600);
	CHECK(sd_plan_parse_duration("0", "--deadline", &s, &why) < 0 && strstr(why, "'0': must be longer than 0"),
	      "0 -> %s", why);
	CHECK(sd_plan_parse_duration("4000d", "--deadline", &s, &why) < 0 && strstr(why, "longer than 10 years"),
	      "4000d -> %s", why);
	const char *bad[] = { "", "soon", "2x", "h", "-1h", "1h30", "nan", "1e999h" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		int rc = sd_plan_parse_duration(bad[i], "--deadline", &s, &why);
		CHECK(rc < 0 && why && strstr(why, "--deadline: cannot read") && !strchr(why, '\n'), "'%s' -> %s", bad[i],
		      rc < 0 && why ? why : "accepted");
	}

	struct sd_plan_scaling t;
	static const struct {
		const char *text, *want;
	} cases[] = {
		{ "{\"format\": \"spotdeck-scaling\", \"version\": 1, \"series\": [", "s.json: invalid JSON at line 1" },
		{ "{\"format\": \"other\", \"version\": 1, \"series\": []}", "s.json: format: expected \"spotdeck-scaling\"" },
		{ "{\"format\": \"spotdeck-scaling\", \"version\": 2, \"series\": []}", "s.json: version: expected 1" },
		{ "{\"format\": \"spotdeck-scaling\", \"version\": 1, \"series\": []}", "s.json: series: expected an array" },
		{ "{\"format\": \"spotdeck-scaling\", \"version\": 1, \"series\": [{\"model\": \"m\", \"gpu\": \"K80\", "
		  "\"parameter_servers\": 1, \"batch_per_worker\": 128, \"steps_per_second\": [1, -2]}]}",
		  "s.json: series[0].steps_per_second[1]: expected a positive number" },
		{ "{\"format\": \"spotdeck-scaling\", \"version\": 1, \"series\": [{\"model\": \"m\", \"gpu\": \"K80\", "
		  "\"parameter_servers\": 1.5, \"batch_per_worker\": 128, \"steps_per_second\": [1]}]}",
		  "s.json: series[0].parameter_servers: expected an integer" },
		{ "{\"format\": \"spotdeck-scaling\", \"version\": 1, \"series\": [{\"gpu\": \"K80\", "
		  "\"parameter_servers\": 1, \"batch_per_worker\": 128, \"steps_per_second\": [1]}]}",
		  "s.json: series[0].model: expected a non-empty string" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		int rc = sd_plan_scaling_parse(&t, cases[i].text, strlen(cases[i].text), "s.json", &why);
		CHECK(rc < 0 && why && !strncmp(why, cases[i].want, strlen(cases[i].want)), "case %zu: %s", i,
		      rc < 0 && why ? why : "accepted");
		if (rc == 0)
			sd_plan_scaling_free(&t);
	}
	CHECK(sd_plan_scaling_load(&t, "/nonexistent/scaling.json", &why) < 0 &&
	      why && strstr(why, "/nonexistent/scaling.json: No such file"), "%s", why ? why : "(accepted)");
	free(why);
}

int main(void)
{
	char *why = NULL;
	if (sd_catalog_parse(&cat, catalog_text, sizeof catalog_text - 1, "planner-test.json", &why) < 0 ||
	    sd_plan_scaling_parse(&sc, scaling_text, sizeof scaling_text - 1, "scaling-test.json", &why) < 0) {
		fprintf(stderr, "test-planner: %s\n", why);
		return 1;
	}
	test_on_demand();
	test_throughput();
	test_revocations();
	test_checkpoints();
	test_stockout();
	test_policy();
	test_compare_and_determinism();
	test_saved();
	test_bad_input();
	sd_plan_scaling_free(&sc);
	sd_catalog_free(cat);
	return check_exit("test-planner");
}
