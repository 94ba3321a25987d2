/* tests/app/test-whatif.c - the cockpit's what-if rows (src/app/whatif.c) on a
 * hand-made market: the add/drop commands that switch a running cluster to
 * a row keep the servers a row can use, add the missing ones first and
 * drop the rest (local workers too); the table has the running cluster
 * (already up: no boot, no join) and every GPU x size x kind, sorted by
 * median cost with the frontier marked. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/market/catalog.h"
#include "src/market/planner.h"
#include "src/app/whatif.h"
#include "tests/check.h"

#define OFFER(id, zone, gpu, spot, usd, ips) \
	"{\"id\": \"" id "\", \"provider\": \"gce\", \"region\": \"r\", \"zone\": \"" zone "\", " \
	"\"gpu\": \"" gpu "\", \"gpu_count\": 1, \"transient\": " spot ", \"usd_per_hour\": " usd ", " \
	"\"price_source\": \"estimated: test\", \"images_per_sec\": " ips ", \"speed_source\": \"estimated: test\", " \
	"\"capacity\": {\"servers\": 16, \"source\": \"estimated: test\"}, \"notice_seconds\": 30, " \
	"\"billing\": {\"unit\": \"per_second\", \"minimum_seconds\": 60}, " \
	"\"boot\": {\"quantiles_seconds\": [100, 100], \"source\": \"estimated: test\"}%s}"

static char catalog_text[8192];

static void make_catalog(void)
{
	const char *rev = ", \"revocation\": {\"model\": \"empirical\", \"max_lifetime_hours\": 2, "
	                  "\"lifetime_cdf\": [[1, 0.1], [2, 0.2]], \"cdf_source\": \"estimated: test\"}";
	snprintf(catalog_text, sizeof catalog_text,
	         "{\"format\": \"spotdeck-catalog\", \"version\": 1, \"name\": \"whatif-test\", \"offers\": ["
	         OFFER("gce/z-a/k80/spot", "z-a", "K80", "true", "0.25", "100") ","
	         OFFER("gce/z-a/k80/on-demand", "z-a", "K80", "false", "0.75", "100") ","
	         OFFER("gce/z-b/k80/spot", "z-b", "K80", "true", "0.25", "100") ","
	         OFFER("gce/z-a/v100/spot", "z-a", "V100", "true", "0.85", "340") "]}",
	         rev, "", rev, rev);
}

static struct sd_catalog *cat;

static const struct sd_offer *offer(const char *id)
{
	const struct sd_offer *o = sd_catalog_find(cat, id);
	if (!o) {
		fprintf(stderr, "test-whatif: no offer %s\n", id);
		exit(1);
	}
	return o;
}

static void input(struct sd_whatif_in *in, int nlocal)
{
	memset(in, 0, sizeof *in);
	in->cat = cat;
	snprintf(in->job.model, sizeof in->job.model, "resnet32");
	in->job.images = 720000;
	in->job.done_images = 360000;
	in->job.speed_factor = 1;
	in->job.batch_per_worker = 128;
	sd_plan_options_init(&in->opt);
	in->opt.runs = 100;
	in->join_seconds = 10;
	in->recovery_seconds = 2;
	in->nlive = 2;
	in->live_offer[0] = in->live_offer[1] = offer("gce/z-a/k80/spot");
	snprintf(in->live_id[0], sizeof in->live_id[0], "s1");
	snprintf(in->live_id[1], sizeof in->live_id[1], "s3");
	in->nlocal = nlocal;
	for (int i = 0; i < nlocal; i++)
		snprintf(in->local_id[i], sizeof in->local_id[i], "l%d", i + 1);
}

static void test_commands(void)
{
	struct sd_whatif_in in;
	input(&in, 1);
	char cmds[1024], sum[160];
	struct sd_plan_config c;

	/* 4 K80 spot in z-a: keep s1 and s3, add two, drop the local worker. */
	sd_plan_config_init(&c, offer("gce/z-a/k80/spot"), 4);
	sd_whatif_commands(&in, &c, cmds, sizeof cmds, sum, sizeof sum);
	CHECK_STR(cmds, "add gce/z-a/k80/spot\nadd gce/z-a/k80/spot\ndrop l1\n");
	CHECK_STR(sum, "add 2: 2 x gce/z-a/k80/spot; drop l1");

	/* 3 spread over z-a and z-b: z-a, z-b, z-a; s1 and s3 stay. */
	sd_plan_config_init(&c, offer("gce/z-a/k80/spot"), 3);
	c.offers[c.noffers++] = offer("gce/z-b/k80/spot");
	input(&in, 0);
	sd_whatif_commands(&in, &c, cmds, sizeof cmds, sum, sizeof sum);
	CHECK_STR(cmds, "add gce/z-b/k80/spot\n");
	CHECK_STR(sum, "add 1: 1 x gce/z-b/k80/spot");

	/* One on-demand K80: add it first, then drop both. */
	sd_plan_config_init(&c, offer("gce/z-a/k80/on-demand"), 1);
	sd_whatif_commands(&in, &c, cmds, sizeof cmds, sum, sizeof sum);
	CHECK_STR(cmds, "add gce/z-a/k80/on-demand\ndrop s1\ndrop s3\n");
	CHECK_STR(sum, "add 1: 1 x gce/z-a/k80/on-demand; drop s1 s3");

	/* A smaller cluster of the same: drop the extra one only. */
	sd_plan_config_init(&c, offer("gce/z-a/k80/spot"), 1);
	sd_whatif_commands(&in, &c, cmds, sizeof cmds, sum, sizeof sum);
	CHECK_STR(cmds, "drop s3\n");

	/* The same cluster: nothing to do. */
	sd_plan_config_init(&c, offer("gce/z-a/k80/spot"), 2);
	sd_whatif_commands(&in, &c, cmds, sizeof cmds, sum, sizeof sum);
	CHECK_STR(cmds, "");
	CHECK_STR(sum, "no change");
}

static int near_1800(double t)
{
	return t >= 1800 - 1e-6 && t < 1800 * 1.05;
}

static void test_rows(void)
{
	struct sd_whatif_in in;
	input(&in, 0);
	struct sd_view_whatif rows[SD_WHATIF_MAX_ROWS];
	char note[192], *why = NULL;
	int n = sd_whatif_compute(&in, rows, SD_WHATIF_MAX_ROWS, note, sizeof note, &why);
	/* The running cluster + (K80 spot [z-a, z-b], K80 on-demand, V100 spot) x 4 sizes. */
	CHECK_INT(n, 1 + 3 * 4);
	CHECK(strstr(note, "simulated") && strstr(note, "0.36 M images left") && strstr(note, "catalog speed (none measured)"), "%s",
	      note);
	/* A language model's samples are windows of block_size tokens: the
	 * same work is 64 times as many tokens. */
	in.tokens_per_sample = 64;
	CHECK(sd_whatif_compute(&in, rows, SD_WHATIF_MAX_ROWS, note, sizeof note, &why) == n &&
	      strstr(note, "23 M tokens left"), "%s", note);
	in.tokens_per_sample = 0;
	int now = -1, pareto = 0;
	for (int i = 0; i < n; i++) {
		if (rows[i].current)
			now = i;
		pareto += rows[i].pareto;
		if (i > 0)
			CHECK(rows[i - 1].cost_p50_usd <= rows[i].cost_p50_usd, "sorted by median cost at row %d", i);
	}
	CHECK(now >= 0, "the running cluster has a row");
	if (now >= 0) {
		CHECK_STR(rows[now].label, "now: 2x K80 spot");
		CHECK_STR(rows[now].commands, "");
		/* Up already: 360,000 images at 2 x 100 x efficiency(2) images/s,
		 * no boot and no join; a fresh 2x K80 spot in z-a takes 100 s of
		 * boot and 10 s of join more (without revocations). */
		struct sd_plan_config fresh;
		sd_plan_config_init(&fresh, offer("gce/z-a/k80/spot"), 2);
		fresh.join_seconds = 10;
		fresh.recovery_seconds = 2;
		struct sd_plan_scaling none = { 0 };
		fresh.efficiency_measured = 1;
		struct sd_plan_result r;
		CHECK(sd_plan_simulate(cat, &none, &in.job, &fresh, &in.opt, &r, &why) == 0);
		CHECK(r.time_p10 > rows[now].time_p50_s + 50 && near_1800(rows[now].time_p50_s), "fresh p10 %.0f s, running median %.0f s", r.time_p10,
		      rows[now].time_p50_s);
	}
	CHECK(pareto >= 1);
	/* Every other row says how to get there. */
	for (int i = 0; i < n; i++)
		if (!rows[i].current)
			CHECK(strstr(rows[i].commands, "add ") || strstr(rows[i].commands, "drop "), "%s: '%s'",
			      rows[i].label, rows[i].commands);
	free(why);
}

int main(void)
{
	char *why = NULL;
	make_catalog();
	if (sd_catalog_parse(&cat, catalog_text, strlen(catalog_text), "whatif-test.json", &why) < 0) {
		fprintf(stderr, "test-whatif: %s\n", why);
		return 1;
	}
	test_commands();
	test_rows();
	sd_catalog_free(cat);
	return check_exit("test-whatif");
}
