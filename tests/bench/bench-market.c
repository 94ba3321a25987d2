/* tests/bench/bench-market.c - the market core alone (no workers): keep
 * 10,000 servers live (each revoked or capped one is replaced at once) over
 * the transient offers of a catalog, through 24 h of market time advanced in
 * 1 s ticks as a provider's timer would.  Prints the wall time, its ratio to
 * the 1 s target, and the ratio to a peer measured in the same run: drawing
 * the same number of lifetimes and boot times with no event core at all.
 *
 * Usage: bench-market [CATALOG.json ...]   (default: data/gce-2019.json and
 * data/market-2026.json under $top_srcdir or .)
 * Prints "ratio:" lines (tests/bench/bench.h); exit status 1 if the
 * gce-2019 run takes 1 s or more. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "src/base/rng.h"
#include "tests/bench/bench.h"
#include "src/market/catalog.h"
#include "src/market/market-model.h"

#define SERVERS 10000
#define DAY 86400

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct run {
	struct sd_market *m;
	long events, launches, revoked, capped, batched, notices;
	int failed_launch;
};

static void on_event(void *ctx, const struct sd_market_event *ev)
{
	struct run *r = ctx;
	r->events++;
	if (ev->kind == SD_MARKET_NOTICE)
		r->notices++;
	if (ev->kind != SD_MARKET_REVOKED && ev->kind != SD_MARKET_CAPPED)
		return;
	if (ev->kind == SD_MARKET_REVOKED)
		r->revoked++;
	else
		r->capped++;
	r->batched += ev->batch_size > 1;
	if (sd_market_launch(r->m, ev->offer, NULL, NULL) == 0)
		r->launches++;
	else
		r->failed_launch = 1;
}

static int bench(const char *path, bool must_pass)
{
	struct sd_catalog *c = NULL;
	char *why = NULL;
	if (sd_catalog_load(&c, path, &why) < 0) {
		fprintf(stderr, "bench-market: %s\n", why);
		free(why);
		return 1;
	}
	const struct sd_offer *tr[SD_CATALOG_MAX_OFFERS];
	int ntr = 0;
	for (int i = 0; i < c->noffers; i++)
		if (c->offers[i].transient)
			tr[ntr++] = &c->offers[i];

	struct sd_market_knobs k;
	sd_market_knobs_init(&k);
	k.seed = 42;
	k.enforce_capacity = false;  /* 10,000 servers exceed any zone's capacity */
	struct run r = { 0 };
	double t0 = now_s();
	if (sd_market_new(&r.m, c, &k, &why) < 0) {
		fprintf(stderr, "bench-market: %s\n", why);
		free(why);
		sd_catalog_free(c);
		return 1;
	}
	for (int i = 0; i < SERVERS; i++)
		if (sd_market_launch(r.m, tr[i % ntr], NULL, NULL) == 0)
			r.launches++;
	for (int s = 1; s <= DAY; s++)
		sd_market_advance(r.m, s, on_event, &r);
	double wall = now_s() - t0;
	int live = sd_market_live_total(r.m);
	sd_market_free(r.m);

	/* Peer: the sampling work alone, same number of servers. */
	struct sd_rng rng;
	sd_rng_seed(&rng, 42, 1);
	double t1 = now_s(), sink = 0;
	for (long i = 0; i < r.launches; i++) {
		const struct sd_offer *o = tr[i % ntr];
		struct sd_lifetime lt;
		sd_lifetime_sample(o, (double)(i % 24), 1, &rng, &lt);
		sink += lt.seconds + sd_boot_sample(o, 1, &rng);
	}
	double peer = now_s() - t1;

	printf("bench-market %-16s %d live servers through 24 h in 1 s ticks: %.3f s wall, %.2fx the 1 s target\n",
	       c->name, live, wall, wall / 1.0);
	printf("  %ld events (%ld notices, %ld revoked, %ld capped, %ld in batches), %ld launches, %.0f ns/event\n",
	       r.events, r.notices, r.revoked, r.capped, r.batched, r.launches, 1e9 * wall / (double)(r.events ? r.events : 1));
	printf("  peer (sampling the same %ld lifetimes and boots, no event core): %.4f s; market/peer = %.1fx%s\n",
	       r.launches, peer, wall / (peer > 0 ? peer : 1e-9), sink < 0 ? " " : "");
	int fail = 0;
	if (live != SERVERS || r.failed_launch) {
		printf("  FAIL: %d servers live at the end (want %d)\n", live, SERVERS);
		fail = 1;
	}
	char what[128];
	snprintf(what, sizeof what, "%s 24 h of %d servers / the 1 s target", c->name, SERVERS);
	bench_ratio("bench-market", what, wall / 1.0, must_pass ? 1.0 : 0, 1);
	snprintf(what, sizeof what, "%s market core / sampling the same lifetimes alone", c->name);
	bench_ratio("bench-market", what, wall / (peer > 0 ? peer : 1e-9), 0, 1);
	sd_catalog_free(c);
	return fail;
}

int main(int argc, char **argv)
{
	int fail = 0;
	if (argc > 1) {
		for (int i = 1; i < argc; i++)
			fail |= bench(argv[i], strstr(argv[i], "gce-2019") != NULL);
		return fail ? 1 : bench_exit();
	}
	const char *top = getenv("top_srcdir");
	char path[4096];
	snprintf(path, sizeof path, "%s/data/gce-2019.json", top ? top : ".");
	fail |= bench(path, true);
	snprintf(path, sizeof path, "%s/data/market-2026.json", top ? top : ".");
	fail |= bench(path, false);
	return fail ? 1 : bench_exit();
}
