/* tests/market/test-autopilot.c - the autopilot's policy (src/market/autopilot.c) on
 * hand-built states over data/gce-2019.json: it adds when the deadline
 * slips, swaps to a cheaper offer only when the saving covers the swap,
 * leaves a zone in a revocation burst, swaps back to a cheaper pool that
 * reopens (and only once when it reopens and closes at every look), lets
 * a run be late rather than rescue it in a rare refusal state (on
 * data/market-2026.json),
 * respects every limit, does not flap
 * on a price oscillating around its swap threshold, checkpoints when every
 * server is under notice, is deterministic, and reads its objective with
 * one-line errors; and the planner runs it (--policy autopilot). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/market/autopilot.h"
#include "src/market/catalog.h"
#include "src/market/planner.h"
#include "tests/check.h"

static struct sd_catalog *cat;
static struct sd_plan_scaling sc;

static const struct sd_offer *offer(const char *id)
{
	const struct sd_offer *o = sd_catalog_find(cat, id);
	if (!o) {
		fprintf(stderr, "test-autopilot: no offer %s\n", id);
		exit(1);
	}
	return o;
}

#define SEEDS_JOB (64000.0 * 128)
#define P100_EAST "gce/us-east1-c/p100/spot"
#define P100_WEST "gce/us-west1-b/p100/spot"

/* A state of n ready servers of `id`, old enough to be moved, `done` of
 * the seeds' job done, `elapsed` into the run. */
static struct sd_autopilot_server srv[80];

static struct sd_autopilot_state state(const char *id, int n, double done, double elapsed)
{
	for (int i = 0; i < n; i++)
		srv[i] = (struct sd_autopilot_server){ .id = i, .offer = offer(id), .age_seconds = elapsed, .ready = true };
	return (struct sd_autopilot_state){ .cat = cat, .images_total = SEEDS_JOB, .images_done = done * SEEDS_JOB,
	                                    .speed_factor = 1, .elapsed_seconds = elapsed, .spent_usd = 0,
	                                    .servers = srv, .nservers = n, .manual_cap = -1, .hazard_scale = 1 };
}

static struct sd_autopilot_objective deadline(double seconds)
{
	struct sd_autopilot_objective o;
	sd_autopilot_objective_init(&o);
	o.deadline_seconds = seconds;
	return o;
}

static struct sd_autopilot_params params(void)
{
	struct sd_autopilot_params p;
	sd_autopilot_params_init(&p);
	p.scaling = &sc;
	return p;
}

static struct sd_autopilot_action act[SD_AUTOPILOT_MAX_ACTIONS];

static int decide(const struct sd_autopilot_objective *o, const struct sd_autopilot_state *st)
{
	struct sd_autopilot_params p = params();
	char *why = NULL;
	int n = sd_autopilot_decide(o, st, &p, act, SD_AUTOPILOT_MAX_ACTIONS, &why);
	if (n < 0) {
		CHECK(0, "decide: %s", why);
		free(why);
		return 0;
	}
	CHECK(n >= 1);
	return n;
}

static int count(int n, enum sd_autopilot_kind k)
{
	int c = 0;
	for (int i = 0; i < n; i++)
		c += act[i].kind == k;
	return c;
}

/* The one P100 server of the seeds' job takes about 1h29m. */
static void test_adds_when_deadline_slips(void)
{
	/* On track: 2 h for a job one server does in 1h29m. */
	struct sd_autopilot_objective o = deadline(2 * 3600);
	struct sd_autopilot_state st = state(P100_EAST, 1, 0.0, 120);
	int n = decide(&o, &st);
	CHECK_INT(act[0].kind, SD_AUTOPILOT_NOTHING);
	CHECK(act[0].p_before >= 0.95, "p %.3f", act[0].p_before);
	CHECK(strstr(act[0].reason, "on track") != NULL, "%s", act[0].reason);
	(void)n;

	/* Slipping: half the job left, 30 min to go. */
	o = deadline(3600);
	st = state(P100_EAST, 1, 0.5, 1800);
	n = decide(&o, &st);
	CHECK(count(n, SD_AUTOPILOT_ADD) >= 1, "%s", act[0].reason);
	CHECK_INT(act[0].kind, SD_AUTOPILOT_ADD);
	CHECK(act[0].p_before < 0.95 && act[n - 1].p_after >= 0.95, "P %.3f -> %.3f", act[0].p_before,
	      act[n - 1].p_after);
	CHECK(act[0].p_after > act[0].p_before);
	CHECK(act[n - 1].time_after < act[0].time_before);
	CHECK(strstr(act[0].reason, "the deadline slips") && strstr(act[0].reason, "P(done by deadline)"), "%s",
	      act[0].reason);
	/* Each add is a transient offer (on-demand costs 3x per image). */
	for (int i = 0; i < n; i++)
		CHECK(act[i].kind != SD_AUTOPILOT_ADD || act[i].offer->transient, "%s", act[i].reason);
	/* The same state decides the same (deterministic). */
	char first[256];
	snprintf(first, sizeof first, "%s", act[0].reason);
	int n2 = decide(&o, &st);
	CHECK_INT(n2, n);
	CHECK_STR(act[0].reason, first);
}

/* A server whose price went up: swapped when much work remains, not when
 * the saving cannot pay for the new server's boot and join. */
static void test_swap_only_when_it_pays(void)
{
	double *price = calloc((size_t)cat->noffers, sizeof *price);
	for (int i = 0; i < cat->noffers; i++)
		price[i] = cat->offers[i].usd_per_hour;
	const struct sd_offer *east = offer(P100_EAST);
	price[east->index] *= 2.5;
	struct sd_autopilot_objective o = deadline(24 * 3600);
	struct sd_autopilot_state st = state(P100_EAST, 2, 0.0, 3600);
	st.images_total = 3 * SEEDS_JOB;
	st.usd_per_hour = price;
	int n = decide(&o, &st);
	CHECK(count(n, SD_AUTOPILOT_SWAP) >= 1, "%s", act[0].reason);
	CHECK_INT(act[0].kind, SD_AUTOPILOT_SWAP);
	CHECK(act[0].offer && act[0].offer != east && act[0].cost_after < act[0].cost_before, "%s", act[0].reason);
	CHECK(strstr(act[0].reason, "swap s0") || strstr(act[0].reason, "swap s1"), "%s", act[0].reason);

	/* Two minutes of work left: nothing pays for a boot and a join. */
	st.images_done = st.images_total - 2 * 60 * 2 * east->images_per_sec;
	n = decide(&o, &st);
	CHECK_INT(count(n, SD_AUTOPILOT_SWAP), 0);
	CHECK_INT(act[0].kind, SD_AUTOPILOT_NOTHING);

	/* The same price gap on a server younger than the hold: kept. */
	st.images_done = 0;
	srv[0].age_seconds = srv[1].age_seconds = 600;
	n = decide(&o, &st);
	CHECK_INT(count(n, SD_AUTOPILOT_SWAP), 0);
	free(price);
}

/* Two revocations in one zone within the hour: its servers move out, and
 * nothing moves in; one revocation alone is not a burst. */
static void test_leaves_burst_zone(void)
{
	const struct sd_offer *east = offer(P100_EAST);
	struct sd_autopilot_revocation rv[2] = { { east, 300, false }, { east, 240, false } };
	struct sd_autopilot_objective o = deadline(6 * 3600);
	struct sd_autopilot_state st = state(P100_EAST, 2, 0.1, 900);
	st.images_total = 3 * SEEDS_JOB;
	st.revocations = rv;
	st.nrevocations = 2;
	int n = decide(&o, &st);
	CHECK_INT(count(n, SD_AUTOPILOT_SWAP), 2);
	for (int i = 0; i < n; i++) {
		CHECK(!act[i].offer || act[i].offer->zone_index != east->zone_index, "%s", act[i].reason);
		if (act[i].kind == SD_AUTOPILOT_SWAP)
			CHECK(strstr(act[i].reason, "revocation burst") != NULL, "%s", act[i].reason);
	}
	/* Behind schedule in a burst: the adds go elsewhere too. */
	o = deadline(1800 + 900);
	n = decide(&o, &st);
	for (int i = 0; i < n; i++)
		CHECK(!act[i].offer || act[i].offer->zone_index != east->zone_index, "%s", act[i].reason);
	/* A manual server stays, burst or not. */
	o = deadline(6 * 3600);
	srv[0].manual = srv[1].manual = true;
	n = decide(&o, &st);
	CHECK_INT(count(n, SD_AUTOPILOT_SWAP), 0);
	/* One revocation: no burst. */
	srv[0].manual = srv[1].manual = false;
	st.nrevocations = 1;
	n = decide(&o, &st);
	CHECK_INT(count(n, SD_AUTOPILOT_SWAP), 0);
}

/* Prices with the east P100 pool far cheaper than the rest: the offer
 * worth waiting for. */
static double *cheap_east_prices(void)
{
	double *price = calloc((size_t)cat->noffers, sizeof *price);
	for (int i = 0; i < cat->noffers; i++)
		price[i] = cat->offers[i].usd_per_hour;
	price[offer(P100_EAST)->index] = 0.2;
	return price;
}

/* The cheap pool's zone is in a revocation burst and no server is left:
 * with time to spare it waits for the burst to pass (nothing, saying so,
 * flagged as a wait) rather than paying for a dearer pool; when the
 * deadline has no room for the wait, it adds the dearer pool at once. */
static void test_waits_for_burst(void)
{
	double *price = cheap_east_prices();
	const struct sd_offer *east = offer(P100_EAST);
	struct sd_autopilot_revocation rv[2] = { { east, 300, false }, { east, 240, false } };
	struct sd_autopilot_objective o = deadline(6 * 3600);
	struct sd_autopilot_state st = state(P100_EAST, 0, 0.1, 900);
	st.images_total = 3 * SEEDS_JOB;
	st.usd_per_hour = price;
	st.revocations = rv;
	st.nrevocations = 2;
	int n = decide(&o, &st);
	CHECK_INT(n, 1);
	CHECK_INT(act[0].kind, SD_AUTOPILOT_NOTHING);
	CHECK(act[0].waiting, "%s", act[0].reason);
	/* The burst passes an hour after the older of the two revocations. */
	CHECK(strstr(act[0].reason, "waiting 55 min for the revocation burst in us-east1-c") != NULL, "%s",
	      act[0].reason);
	/* 25 minutes to the deadline: no time to wait, the dearer pool now. */
	o = deadline(900 + 25 * 60);
	n = decide(&o, &st);
	CHECK(count(n, SD_AUTOPILOT_ADD) >= 1, "%s", act[0].reason);
	for (int i = 0; i < n; i++)
		CHECK(!act[i].waiting, "%s", act[i].reason);
	for (int i = 0; i < n; i++)
		CHECK(!act[i].offer || act[i].offer->zone_index != east->zone_index, "%s", act[i].reason);
	free(price);
}

/* The cheap pool refused a request a minute ago: with time to spare it is
 * asked again (its wait is not billed), not a dearer one; with no time to
 * spare the dearer one is taken. */
static void test_waits_for_refusing_pool(void)
{
	double *price = cheap_east_prices();
	const struct sd_offer *east = offer(P100_EAST);
	struct sd_autopilot_revocation rv[1] = { { east, 60, true } };
	struct sd_autopilot_objective o = deadline(900 + 90 * 60);
	struct sd_autopilot_state st = state(P100_EAST, 0, 0.0, 900);
	st.images_total = 3 * SEEDS_JOB;
	st.usd_per_hour = price;
	st.revocations = rv;
	st.nrevocations = 1;
	int n = decide(&o, &st);
	CHECK_INT(act[0].kind, SD_AUTOPILOT_ADD);
	CHECK(act[0].offer == east, "%s", act[0].reason);
	CHECK(strstr(act[0].reason, "which refuses") != NULL, "%s", act[0].reason);
	o = deadline(900 + 45 * 60);
	n = decide(&o, &st);
	CHECK(count(n, SD_AUTOPILOT_ADD) >= 1, "%s", act[0].reason);
	CHECK(act[0].kind == SD_AUTOPILOT_ADD && act[0].offer != east, "%s", act[0].reason);
	free(price);
}

/* Applies a decision's actions to the hand-built servers (as the live
 * controller would once they are carried out): a swap gives the server
 * its new offer and makes it new, a drop removes it, an add brings one. */
static void apply(struct sd_autopilot_state *st, int n, int id, int *swaps, int *adds, int *drops)
{
	for (int i = 0; i < n; i++) {
		int k = 0;
		while (k < st->nservers && srv[k].id != act[i].server)
			k++;
		if (act[i].kind == SD_AUTOPILOT_SWAP && k < st->nservers) {
			++*swaps;
			srv[k].offer = act[i].offer;
			srv[k].age_seconds = 0;
		} else if (act[i].kind == SD_AUTOPILOT_DROP && k < st->nservers) {
			++*drops;
			srv[k] = srv[--st->nservers];
		} else if (act[i].kind == SD_AUTOPILOT_ADD) {
			++*adds;
			srv[st->nservers++] = (struct sd_autopilot_server){ .id = id + i, .offer = act[i].offer,
			                                                    .ready = true };
		}
	}
}

/* The run left the cheap east pool for the dearer west one: east refused
 * its request (a stockout), or its zone was in a revocation burst.  While
 * east refuses, or the burst lasts, the server stays in the west; once east
 * reopens (the market has room there again, or the burst is over) it is
 * swapped back, as the saving pays for the swap's boot and join twice; not
 * when the work left is too little for a saving to cover the join; and a
 * pool that reopens and closes again at every look makes at most one swap. */
static void test_swaps_back_to_reopened_pool(void)
{
	double *price = cheap_east_prices();
	const struct sd_offer *east = offer(P100_EAST), *west = offer(P100_WEST);
	int *room = calloc((size_t)cat->noffers, sizeof *room);
	for (int i = 0; i < cat->noffers; i++)
		room[i] = -1;
	struct sd_autopilot_objective o = deadline(24 * 3600);
	/* The west server, an hour old; east refused a request when it was
	 * taken, and again a minute ago. */
	struct sd_autopilot_revocation rv[2] = { { east, 3700, true }, { east, 60, true } };
	struct sd_autopilot_state st = state(P100_WEST, 1, 0.1, 3700);
	st.images_total = 3 * SEEDS_JOB;
	st.usd_per_hour = price;
	st.available = room;
	st.revocations = rv;
	st.nrevocations = 2;
	room[east->index] = 0;
	int n = decide(&o, &st);
	CHECK_INT(count(n, SD_AUTOPILOT_SWAP), 0);
	CHECK_INT(act[0].kind, SD_AUTOPILOT_NOTHING);
	/* Reopened: room there again. */
	room[east->index] = 4;
	n = decide(&o, &st);
	CHECK_INT(count(n, SD_AUTOPILOT_SWAP), 1);
	CHECK(act[0].kind == SD_AUTOPILOT_SWAP && act[0].offer == east && act[0].server == 0, "%s", act[0].reason);
	CHECK(act[0].cost_after < act[0].cost_before, "%s", act[0].reason);
	/* The saving pays for the swap twice: it is net of the swap's cost,
	 * the old server billed at west's price while the new one boots (the
	 * catalog's median boot of east) and joins, and exceeds it again. */
	double boot = east->nboot % 2 ? east->boot_quantiles[east->nboot / 2]
	                              : (east->boot_quantiles[east->nboot / 2 - 1] + east->boot_quantiles[east->nboot / 2]) / 2;
	double join_usd = price[west->index] * (boot + SD_PLAN_JOIN_SECONDS) / 3600;
	CHECK(act[0].cost_before - act[0].cost_after > join_usd, "saving $%.3f, join $%.3f", act[0].cost_before -
	      act[0].cost_after, join_usd);
	/* Less work left, less saving: by bisection the least work left at
	 * which it still swaps back; there the saving covers the join twice
	 * (so a saving smaller than the join moves nothing), and with less
	 * work than that, no swap. */
	double rate = west->images_per_sec, lo = 60 * rate, hi = 0.9 * st.images_total;
	double saving_at = 0;
	for (int it = 0; it < 30; it++) {
		double mid = (lo + hi) / 2;
		st.images_done = st.images_total - mid;
		n = decide(&o, &st);
		if (count(n, SD_AUTOPILOT_SWAP) > 0) {
			hi = mid;
			saving_at = act[0].cost_before - act[0].cost_after;
		} else {
			lo = mid;
		}
	}
	CHECK(hi > 60 * rate * 1.01, "swaps back with %.0f s of work left", hi / rate);
	CHECK(saving_at > join_usd * 0.999 && saving_at < 1.2 * join_usd, "saving $%.4f at the threshold, join $%.4f", saving_at, join_usd);
	st.images_done = st.images_total - 0.9 * hi;
	n = decide(&o, &st);
	CHECK_INT(count(n, SD_AUTOPILOT_SWAP), 0);
	CHECK_INT(act[0].kind, SD_AUTOPILOT_NOTHING);
	st.images_done = 0.1 * st.images_total;

	/* A burst in east (two revocations within the hour) made it leave;
	 * while the burst lasts it stays, once it is over it swaps back. */
	struct sd_autopilot_revocation burst[2] = { { east, 1500, false }, { east, 1400, false } };
	st.revocations = burst;
	st.available = NULL;
	n = decide(&o, &st);
	CHECK_INT(count(n, SD_AUTOPILOT_SWAP), 0);
	burst[0].age_seconds = 3 * 3600 + 100;
	burst[1].age_seconds = 3 * 3600;
	n = decide(&o, &st);
	CHECK(count(n, SD_AUTOPILOT_SWAP) == 1 && act[0].offer == east, "%s", act[0].reason);

	/* East reopens and closes again at every look, ten minutes apart:
	 * the servers evolve with the actions; one swap at most, never back. */
	st.revocations = rv;
	st.available = room;
	rv[0].age_seconds = rv[1].age_seconds = 3700;
	st = state(P100_WEST, 1, 0.1, 3700);
	st.images_total = 3 * SEEDS_JOB;
	st.usd_per_hour = price;
	st.available = room;
	st.revocations = rv;
	st.nrevocations = 2;
	int swaps = 0, adds = 0, drops = 0;
	for (int turn = 0; turn < 30; turn++) {
		room[east->index] = turn % 2 ? 4 : 0;
		n = decide(&o, &st);
		apply(&st, n, 100 + 10 * turn, &swaps, &adds, &drops);
		for (int i = 0; i < st.nservers; i++)
			srv[i].age_seconds += 600;
		for (int i = 0; i < 2; i++)
			rv[i].age_seconds += 600;
		st.elapsed_seconds += 600;
		st.images_done = fmin(st.images_total * 0.9, st.images_done + west->images_per_sec * 600);
	}
	CHECK(swaps == 1, "%d swaps", swaps);
	CHECK(st.nservers == 1 && srv[0].offer == east, "%d servers, s%d on %s", st.nservers, srv[0].id,
	      srv[0].offer->id);
	CHECK_INT(adds, 0);
	CHECK_INT(drops, 0);
	free(room);
	free(price);
}

/* On data/market-2026.json (calm/storm pools): the cheap Azure T4 pool has
 * refused every request, once a minute, for the run's first 4 h, with all
 * the 3x job left and 70 minutes to its deadline (no time to wait: only
 * dearer offers make it).  A storm that long is rarer than the
 * 5 % of runs the confidence leaves late (the storm's 20 % share x
 * exp(-4 h / 2 h) = 2.7 %): no rescue by dearer offers, the T4 pool asked
 * again, saying why.  After 20 minutes of refusals (16 %) it rescues. */
static void test_no_rescue_in_rare_state(void)
{
	char path[4096], *why = NULL;
	const char *top = getenv("top_srcdir");
	snprintf(path, sizeof path, "%s/data/market-2026.json", top ? top : SD_SRCDIR);
	struct sd_catalog *m26 = NULL;
	if (sd_catalog_load(&m26, path, &why) < 0) {
		CHECK(0, "%s", why);
		free(why);
		return;
	}
	const struct sd_offer *t4 = sd_catalog_find(m26, "azure/eastus-1/t4/spot");
	CHECK(t4 != NULL);
	if (!t4) {
		sd_catalog_free(m26);
		return;
	}
	struct sd_autopilot_revocation rv[241];
	int nr = 0;
	for (int a = 60; a <= 4 * 3600; a += 60)
		rv[nr++] = (struct sd_autopilot_revocation){ t4, a, true };
	struct sd_autopilot_objective o = deadline(4 * 3600 + 70 * 60);
	o.every_seconds = 3600;   /* the next look too late to wait for it */
	struct sd_autopilot_state st = { .cat = m26, .images_total = 3 * SEEDS_JOB, .images_done = 0,
	                                 .speed_factor = 1, .elapsed_seconds = 4 * 3600, .spent_usd = 0,
	                                 .servers = srv, .nservers = 0, .revocations = rv, .nrevocations = nr,
	                                 .manual_cap = -1, .hazard_scale = 1 };
	int n = decide(&o, &st);
	CHECK(n >= 1 && act[0].kind == SD_AUTOPILOT_ADD && act[0].offer == t4, "%s", act[0].reason);
	CHECK(strstr(act[0].reason, "late, and no rescue") != NULL, "%s", act[0].reason);
	for (int i = 0; i < n; i++)
		CHECK(act[i].kind != SD_AUTOPILOT_ADD || act[i].offer == t4, "%s", act[i].reason);
	/* Twenty minutes of refusals: not rare, a rescue by other offers. */
	st.nrevocations = 20;
	st.elapsed_seconds = 4 * 3600;
	n = decide(&o, &st);
	int other = 0;
	for (int i = 0; i < n; i++)
		other += act[i].kind == SD_AUTOPILOT_ADD && act[i].offer != t4;
	CHECK(other >= 1, "%s", act[0].reason);
	CHECK(strstr(act[0].reason, "late, and no rescue") == NULL, "%s", act[0].reason);
	sd_catalog_free(m26);
}

/* Prices older than the objective's limit: it holds, says so, and moves
 * nothing even when the deadline slips; within the limit it adds. */
static void test_holds_on_stale_prices(void)
{
	struct sd_autopilot_objective o = deadline(3600);
	struct sd_autopilot_state st = state(P100_EAST, 1, 0.5, 1800);
	st.price_age_seconds = 3600 + 90;
	int n = decide(&o, &st);
	CHECK_INT(n, 1);
	CHECK_INT(act[0].kind, SD_AUTOPILOT_NOTHING);
	CHECK(strstr(act[0].reason, "holding, the newest price is 61 min old (limit 60 min)") != NULL, "%s",
	      act[0].reason);
	st.price_age_seconds = 3500;
	n = decide(&o, &st);
	CHECK_INT(act[0].kind, SD_AUTOPILOT_ADD);
	/* The limit is the job's. */
	char *why = NULL;
	CHECK_INT(sd_autopilot_objective_parse_text(&o, "{\"deadline\": \"1h\", \"max_price_age\": \"3h\"}", cat,
	                                            "job.json", &why), 0);
	CHECK(o.max_price_age_seconds == 3 * 3600, "%g", o.max_price_age_seconds);
	o.deadline_seconds = 3600;
	st.price_age_seconds = 2 * 3600 + 60;
	n = decide(&o, &st);
	CHECK_INT(act[0].kind, SD_AUTOPILOT_ADD);
	CHECK_INT(sd_autopilot_objective_parse_text(&o, "{\"deadline\": \"1h\", \"max_price_age\": 0}", cat,
	                                            "job.json", &why), -1);
	CHECK(why && strstr(why, "autopilot.max_price_age") != NULL, "%s", why ? why : "");
	free(why);
}

/* The last training server in a burst zone, with much work since the last
 * checkpoint: not swapped out (the work would be lost), a checkpoint asked
 * for instead, saying why; with the work saved, swapped. */
static void test_checkpoint_guard(void)
{
	const struct sd_offer *east = offer(P100_EAST);
	struct sd_autopilot_revocation rv[2] = { { east, 300, false }, { east, 240, false } };
	struct sd_autopilot_objective o = deadline(6 * 3600);
	struct sd_autopilot_state st = state(P100_EAST, 1, 0.3, 3600);
	st.images_total = 3 * SEEDS_JOB;
	st.revocations = rv;
	st.nrevocations = 2;
	st.checkpoint_lost_images = 0.05 * st.images_total;
	int n = decide(&o, &st);
	CHECK_INT(count(n, SD_AUTOPILOT_SWAP), 0);
	CHECK_INT(count(n, SD_AUTOPILOT_DROP), 0);
	CHECK_INT(act[0].kind, SD_AUTOPILOT_CHECKPOINT);
	CHECK(strstr(act[0].reason, "s0 is the last training server and moving it would lose 1228800 images") != NULL,
	      "%s", act[0].reason);
	/* 1 % of the job since the checkpoint: within the limit, it moves. */
	st.checkpoint_lost_images = 0.01 * st.images_total;
	n = decide(&o, &st);
	CHECK_INT(act[0].kind, SD_AUTOPILOT_SWAP);
	/* Another server trains beside it: nothing is lost, it moves. */
	st = state(P100_EAST, 2, 0.3, 3600);
	st.images_total = 3 * SEEDS_JOB;
	st.revocations = rv;
	st.nrevocations = 2;
	st.checkpoint_lost_images = 0.05 * st.images_total;
	n = decide(&o, &st);
	CHECK(count(n, SD_AUTOPILOT_SWAP) >= 1, "%s", act[0].reason);
}

/* Every limit while the deadline is hopeless, so the autopilot wants more. */
static void test_limits(void)
{
	struct sd_autopilot_objective o = deadline(1800 + 600);
	struct sd_autopilot_state st = state(P100_EAST, 1, 0.0, 1800);
	st.images_total = 10 * SEEDS_JOB;
	o.max_servers = 5;
	int n = decide(&o, &st);
	CHECK_INT(count(n, SD_AUTOPILOT_ADD), 4);

	/* Burn cap: 1 P100 at $0.551/h plus at most $1.2/h more. */
	o.max_servers = 64;
	o.max_usd_per_hour = 1.75;
	n = decide(&o, &st);
	double burn = offer(P100_EAST)->usd_per_hour;
	for (int i = 0; i < n; i++)
		if (act[i].kind == SD_AUTOPILOT_ADD)
			burn += act[i].offer->usd_per_hour;
	CHECK(burn <= 1.75 + 1e-9, "burn %.3f", burn);
	CHECK(count(n, SD_AUTOPILOT_ADD) >= 1);

	/* Allow: V100 spot only. */
	char *why = NULL;
	CHECK(sd_autopilot_objective_parse_text(&o, "{\"deadline\": 2400, \"allow\": [\"gce/*/v100/spot\"], "
	                                        "\"max_servers\": 6}", cat, "t.json", &why) == 0, "%s", why);
	n = decide(&o, &st);
	CHECK_INT(count(n, SD_AUTOPILOT_ADD), 5);
	for (int i = 0; i < n; i++)
		CHECK(!act[i].offer || (!strcmp(act[i].offer->gpu, "V100") && act[i].offer->transient), "%s",
		      act[i].reason);

	/* No room in an offer: never asked for. */
	int *avail = malloc(sizeof *avail * (size_t)cat->noffers);
	for (int i = 0; i < cat->noffers; i++)
		avail[i] = strcmp(cat->offers[i].gpu, "V100") ? -1 : 0;
	st.available = avail;
	o.nallow = 0;
	n = decide(&o, &st);
	for (int i = 0; i < n; i++)
		CHECK(!act[i].offer || strcmp(act[i].offer->gpu, "V100"), "%s", act[i].reason);
	st.available = NULL;
	free(avail);

	/* The operator's last drop set the size: no add above it. */
	st.manual_cap = 1;
	n = decide(&o, &st);
	CHECK_INT(count(n, SD_AUTOPILOT_ADD), 0);
}

/* A price replayed every 10 minutes, oscillating 2 % around the price at
 * which the autopilot starts to swap: at most one swap in 40 turns. */
static void test_no_flapping(void)
{
	double *price = calloc((size_t)cat->noffers, sizeof *price);
	for (int i = 0; i < cat->noffers; i++)
		price[i] = cat->offers[i].usd_per_hour;
	const struct sd_offer *east = offer(P100_EAST);
	struct sd_autopilot_objective o = deadline(48 * 3600);
	struct sd_autopilot_state st = state(P100_EAST, 2, 0.0, 3600);
	st.images_total = 10 * SEEDS_JOB;
	st.usd_per_hour = price;
	/* The threshold, by bisection on east's price. */
	double lo = east->usd_per_hour, hi = 4 * east->usd_per_hour;
	for (int it = 0; it < 30; it++) {
		double mid = (lo + hi) / 2;
		price[east->index] = mid;
		int n = decide(&o, &st);
		if (count(n, SD_AUTOPILOT_SWAP) > 0)
			hi = mid;
		else
			lo = mid;
	}
	double threshold = hi;
	CHECK(threshold > east->usd_per_hour * 1.03 && threshold < 4 * east->usd_per_hour, "threshold %.4f",
	      threshold);
	/* Replay: the servers evolve with the actions (a swap changes the
	 * server's offer and makes it new, a drop removes it, an add would
	 * bring one). */
	int swaps = 0, drops = 0, adds = 0;
	double rate = 2 * east->images_per_sec;
	for (int turn = 0; turn < 40; turn++) {
		price[east->index] = threshold * (turn % 2 ? 0.98 : 1.02);
		int n = decide(&o, &st);
		for (int i = 0; i < n; i++) {
			int k = 0;
			while (k < st.nservers && srv[k].id != act[i].server)
				k++;
			if (act[i].kind == SD_AUTOPILOT_SWAP && k < st.nservers) {
				swaps++;
				srv[k].offer = act[i].offer;
				srv[k].age_seconds = 0;
			} else if (act[i].kind == SD_AUTOPILOT_DROP && k < st.nservers) {
				drops++;
				srv[k] = srv[--st.nservers];
			} else if (act[i].kind == SD_AUTOPILOT_ADD) {
				adds++;
				srv[st.nservers] = (struct sd_autopilot_server){ .id = 100 + turn, .offer = act[i].offer,
				                                                 .ready = true };
				st.nservers++;
			}
		}
		for (int i = 0; i < st.nservers; i++)
			srv[i].age_seconds += 600;
		st.elapsed_seconds += 600;
		st.images_done = fmin(st.images_total * 0.9, st.images_done + rate * 600);
	}
	CHECK(swaps == 1, "%d swaps", swaps);
	/* What a swap left behind is never undone: no server comes back. */
	CHECK_INT(adds, 0);
	CHECK(drops <= 1, "%d drops", drops);
	free(price);
}

static void test_checkpoint(void)
{
	struct sd_autopilot_objective o = deadline(6 * 3600);
	struct sd_autopilot_state st = state(P100_EAST, 2, 0.3, 1800);
	srv[0].notice = srv[1].notice = true;
	int n = decide(&o, &st);
	CHECK_INT(act[0].kind, SD_AUTOPILOT_CHECKPOINT);
	/* And it replaces them. */
	CHECK(count(n, SD_AUTOPILOT_ADD) >= 1, "%s", n > 1 ? act[1].reason : act[0].reason);
	srv[1].notice = false;
	n = decide(&o, &st);
	CHECK_INT(count(n, SD_AUTOPILOT_CHECKPOINT), 0);
}

static void test_budget(void)
{
	struct sd_autopilot_objective o;
	char *why = NULL;
	CHECK(sd_autopilot_objective_parse_text(&o, "{\"budget\": 3}", cat, "t.json", &why) == 0, "%s", why);
	struct sd_autopilot_state st = state(P100_EAST, 1, 0.0, 120);
	int n = decide(&o, &st);
	CHECK(count(n, SD_AUTOPILOT_ADD) >= 1, "%s", act[0].reason);
	CHECK(act[n - 1].cost_after <= 3 && act[n - 1].time_after < act[0].time_before, "%s", act[n - 1].reason);
	/* Spent all but a cent: nothing more. */
	st.spent_usd = 2.99;
	n = decide(&o, &st);
	CHECK_INT(count(n, SD_AUTOPILOT_ADD), 0);
}

static void bad(const char *json, const char *want)
{
	struct sd_autopilot_objective o;
	char *why = NULL;
	int rc = sd_autopilot_objective_parse_text(&o, json, cat, "job.json", &why);
	CHECK(rc == -1, "accepted %s", json);
	if (rc == -1) {
		CHECK(why && strstr(why, want) && !strchr(why, '\n') && !strncmp(why, "job.json: ", 10),
		      "%s: got '%s', want '%s'", json, why ? why : "(null)", want);
	}
	free(why);
}

static void test_objective_errors(void)
{
	struct sd_autopilot_objective o;
	char *why = NULL;
	CHECK(sd_autopilot_objective_parse_text(&o, "{\"deadline\": \"6h\", \"confidence\": 0.9, \"max_servers\": 4, "
	                                        "\"max_usd_per_hour\": 3.5, \"every\": \"5m\", \"hold\": 900, "
	                                        "\"allow\": [\"gce/*/p100/*\"]}", cat, "job.json", &why) == 0,
	      "%s", why);
	CHECK_INT(o.goal, SD_AUTOPILOT_DEADLINE);
	CHECK(o.deadline_seconds == 6 * 3600 && o.confidence == 0.9 && o.max_servers == 4 &&
	      o.max_usd_per_hour == 3.5 && o.every_seconds == 300 && o.hold_seconds == 900 && o.nallow == 1);
	CHECK(sd_autopilot_allows(&o, offer(P100_WEST)) && sd_autopilot_allows(&o, offer("gce/us-west1-b/p100/on-demand")));
	CHECK(!sd_autopilot_allows(&o, offer("gce/us-west1-b/v100/spot")));
	bad("{\"deadline\": \"6h\", \"max_server\": 4}", "autopilot.max_server: unknown field");
	bad("{\"deadline\": \"6h\", \"budget\": 4}", "exactly one of deadline and budget");
	bad("{\"max_servers\": 4}", "exactly one of deadline and budget");
	bad("{\"deadline\": \"6x\"}", "autopilot.deadline");
	bad("{\"deadline\": -5}", "autopilot.deadline: expected a positive number of seconds");
	bad("{\"budget\": \"lots\"}", "autopilot.budget: expected a positive amount of USD");
	bad("{\"deadline\": 60, \"max_servers\": 0}", "autopilot.max_servers: expected an integer from 1 to 256");
	bad("{\"deadline\": 60, \"max_servers\": 2.5}", "autopilot.max_servers: expected an integer from 1 to 256, got 2.5");
	bad("{\"deadline\": 60, \"max_servers\": \"4\"}", "autopilot.max_servers: expected an integer from 1 to 256, got another type");
	bad("{\"deadline\": 60, \"confidence\": 1.5}", "autopilot.confidence");
	bad("{\"deadline\": 60, \"allow\": [\"gce/v100\"]}", "autopilot.allow[0]: expected a pattern");
	bad("{\"deadline\": 60, \"allow\": [\"gce/*/p100/spot\", \"aws/*/v100/spot\"]}",
	    "autopilot.allow[1]: \"aws/*/v100/spot\" matches no offer");
	bad("{\"deadline\": 60, \"allow\": []}", "autopilot.allow: expected an array");
	bad("{\"deadline\": 60, \"max_usd_per_hour\": -1}", "autopilot.max_usd_per_hour");
	bad("{\"deadline\": 60, \"every\": true}", "autopilot.every: expected a duration");
	bad("[1, 2]", "autopilot: expected an object");
	bad("{\"deadline\": ", "autopilot: invalid JSON: the text ends early");
	bad("{\"deadline\": 60 \"budget\": 4}", "autopilot: invalid JSON near '\"budget\": 4}'");
}

/* The planner runs the same policy in its simulated runs. */
static void test_in_planner(void)
{
	struct sd_plan_config c;
	sd_plan_config_init(&c, offer(P100_EAST), 0);
	snprintf(c.label, sizeof c.label, "autopilot");
	c.replace = SD_PLAN_REPLACE_AUTOPILOT;
	struct sd_plan_job j = { .images = 3 * SEEDS_JOB, .speed_factor = 1, .batch_per_worker = 128 };
	snprintf(j.model, sizeof j.model, "resnet32");
	struct sd_plan_options opt;
	sd_plan_options_init(&opt);
	opt.runs = 200;
	opt.seed = 3;
	opt.deadline_seconds = 3 * 3600;
	struct sd_plan_result r1, r2;
	char *why = NULL;
	CHECK(sd_plan_simulate(cat, &sc, &j, &c, &opt, &r1, &why) == 0, "%s", why);
	CHECK(sd_plan_simulate(cat, &sc, &j, &c, &opt, &r2, &why) == 0, "%s", why);
	CHECK(r1.completed == 200 && r1.p_deadline >= 0.95, "completed %d, P %.3f", r1.completed, r1.p_deadline);
	CHECK(r1.cost_mean == r2.cost_mean && r1.time_p50 == r2.time_p50, "not deterministic");
	/* One P100 spot takes 4h27m: the autopilot must have added servers. */
	CHECK(r1.time_p50 < 3 * 3600, "median %.0f s", r1.time_p50);
	/* On-demand prices are 2.8x: it stays far below them. */
	CHECK(r1.cost_mean < 0.45 * 3 * SEEDS_JOB / offer("gce/us-east1-c/p100/on-demand")->images_per_sec / 3600 *
	                     offer("gce/us-east1-c/p100/on-demand")->usd_per_hour, "mean $%.3f", r1.cost_mean);
	/* Started on 2 V100s with a day to go, it moves to the P100, 18 %
	 * cheaper per image (a swap releases the old server once the new one
	 * trains, a drop at once): cheaper than relaunching V100s. */
	struct sd_autopilot_objective obj;
	CHECK(sd_autopilot_objective_parse_text(&obj, "{\"deadline\": \"24h\", \"hold\": \"1m\", \"max_servers\": 2}", cat,
	                                        "t.json", &why) == 0, "%s", why);
	struct sd_plan_config v100;
	sd_plan_config_init(&v100, offer("gce/us-west1-b/v100/spot"), 2);
	snprintf(v100.label, sizeof v100.label, "2x V100");
	struct sd_plan_result same, ap;
	opt.deadline_seconds = 24 * 3600;
	CHECK(sd_plan_simulate(cat, &sc, &j, &v100, &opt, &same, &why) == 0, "%s", why);
	v100.replace = SD_PLAN_REPLACE_AUTOPILOT;
	v100.autopilot = &obj;
	CHECK(sd_plan_simulate(cat, &sc, &j, &v100, &opt, &ap, &why) == 0, "%s", why);
	/* It ends on one P100, the cheapest per image, so the run costs about
	 * what one P100 would for all the work; a swap that kept its old V100
	 * billed to the end would cost 14 % more than that. */
	const struct sd_offer *p100 = offer(P100_WEST);
	double p100_usd = j.images / p100->images_per_sec / 3600 * p100->usd_per_hour;
	CHECK(ap.completed == 200 && ap.cost_mean < 0.9 * same.cost_mean && ap.cost_mean < 1.09 * p100_usd,
	      "autopilot $%.3f, same $%.3f, one P100 $%.3f", ap.cost_mean, same.cost_mean, p100_usd);
	/* Without a deadline or budget it says so. */
	opt.deadline_seconds = 0;
	CHECK(sd_plan_simulate(cat, &sc, &j, &c, &opt, &r1, &why) == -1);
	CHECK(why && strstr(why, "needs a deadline or a budget"), "%s", why ? why : "(null)");
	free(why);
	/* Other policies still need a server. */
	c.replace = SD_PLAN_REPLACE_SAME;
	opt.deadline_seconds = 3600;
	why = NULL;
	CHECK(sd_plan_simulate(cat, &sc, &j, &c, &opt, &r1, &why) == -1);
	free(why);
	CHECK_STR(sd_plan_replace_name(SD_PLAN_REPLACE_AUTOPILOT), "autopilot");
	enum sd_plan_replace p;
	CHECK(sd_plan_replace_parse("autopilot", &p) == 0 && p == SD_PLAN_REPLACE_AUTOPILOT);
}

int main(void)
{
	char path[4096], *why = NULL;
	const char *top = getenv("top_srcdir");
	if (!top)
		top = SD_SRCDIR;
	snprintf(path, sizeof path, "%s/data/gce-2019.json", top);
	if (sd_catalog_load(&cat, path, &why) < 0) {
		fprintf(stderr, "test-autopilot: %s\n", why);
		return 1;
	}
	snprintf(path, sizeof path, "%s/data/scaling-2019.json", top);
	if (sd_plan_scaling_load(&sc, path, &why) < 0) {
		fprintf(stderr, "test-autopilot: %s\n", why);
		return 1;
	}
	test_adds_when_deadline_slips();
	test_swap_only_when_it_pays();
	test_leaves_burst_zone();
	test_waits_for_burst();
	test_waits_for_refusing_pool();
	test_swaps_back_to_reopened_pool();
	test_no_rescue_in_rare_state();
	test_holds_on_stale_prices();
	test_checkpoint_guard();
	test_limits();
	test_no_flapping();
	test_checkpoint();
	test_budget();
	test_objective_errors();
	test_in_planner();
	sd_plan_scaling_free(&sc);
	sd_catalog_free(cat);
	return check_exit("test-autopilot");
}
