/* tests/market/test-market-calibration.c - does the simulated market reproduce the
 * measurements it was built from?
 *
 * 1. For every GPU x region of data/gce-2019.json, >= 10,000 lifetimes drawn
 *    with sd_lifetime_sample() for launches spread evenly over the day must
 *    give the seeds' lifetime CDF (seeds/derived/cmdare_lifetime_cdf_by_region
 *    .csv, as embedded in the catalog) at 1, 3, 12 and 24 h within +-3
 *    percentage points.
 * 2. The clock hours of those revocations, per GPU, must correlate with the
 *    seeds' histogram (seeds/derived/cmdare_revocations_by_hour_of_day.csv)
 *    with Pearson r >= 0.9.
 * 3. The same CDF check through the whole market core (struct sd_market)
 *    with batch revocations on, which pull some revocations forward.
 * 4. market-2026.json: sampled calm/storm lifetimes agree with the exact
 *    P(revoked within t) the UI shows.
 * 5. The market is deterministic for a seed.
 * 6. The catalog's reference numbers against the seeds' CSV files themselves,
 *    which ship in data/ (byte-identical copies of
 *    ../shared/data/seeds/derived/, Apache-2.0 as data/LICENSE-Apache-2.0.txt);
 *    where ../shared/data is next to the source tree the copies are also
 *    compared with it byte for byte.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/rng.h"
#include "src/market/catalog.h"
#include "src/market/market-model.h"
#include "tests/check.h"

static const double check_hours[4] = { 1, 3, 12, 24 };
#define TOL_PP 3.0

static double pearson(const double *x, const double *y, int n)
{
	double mx = 0, my = 0, sxy = 0, sxx = 0, syy = 0;
	for (int i = 0; i < n; i++) {
		mx += x[i] / n;
		my += y[i] / n;
	}
	for (int i = 0; i < n; i++) {
		sxy += (x[i] - mx) * (y[i] - my);
		sxx += (x[i] - mx) * (x[i] - mx);
		syy += (y[i] - my) * (y[i] - my);
	}
	return sxy / sqrt(sxx * syy);
}

/* The catalog's reference CDF at h hours (same interpolation as the model's). */
static double ref_cdf(const struct sd_revocation *r, double h)
{
	double h0 = 0, f0 = 0;
	for (int i = 0; i < r->ncdf; i++) {
		if (h <= r->cdf_hours[i])
			return f0 + (r->cdf_fraction[i] - f0) * (h - h0) / (r->cdf_hours[i] - h0);
		h0 = r->cdf_hours[i];
		f0 = r->cdf_fraction[i];
	}
	return f0;
}

static double u01(struct sd_rng *r)
{
	return (sd_rng_u32(r) + 0.5) / 4294967296.0;
}

struct gpu_hist {
	const char *gpu;
	double sim[24];        /* revocations per clock hour, weighted by the seeds' VM counts */
	const double *seeds;   /* the catalog's measured counts */
};

static void test_lifetime_cdf(const struct sd_catalog *c)
{
	struct gpu_hist g[8];
	int ng = 0;
	printf("\n1. Lifetime CDF, model (sd_lifetime_sample, launches spread evenly over the day) vs seeds\n");
	printf("   %-28s %6s |  %-13s|  %-13s|  %-13s|  %-13s| %s\n", "offer", "n", "<=1 h", "<=3 h", "<=12 h",
	       "<=24 h", "max |diff|");
	printf("   %-28s %6s |  model  seeds|  model  seeds|  model  seeds|  model  seeds|\n", "", "");
	for (int i = 0; i < c->noffers; i++) {
		const struct sd_offer *o = &c->offers[i];
		const struct sd_revocation *r = &o->revocation;
		if (r->model != SD_REVOCATION_EMPIRICAL)
			continue;
		int min_servers = 0;
		for (int j = 0; j < c->noffers; j++) {
			const struct sd_revocation *rj = &c->offers[j].revocation;
			if (rj->model == SD_REVOCATION_EMPIRICAL && !strcmp(c->offers[j].gpu, o->gpu) &&
			    (!min_servers || rj->cdf_servers < min_servers))
				min_servers = rj->cdf_servers;
		}
		/* Regions sampled in proportion to the seeds' VM counts (>= 10,000
		 * each) so that the per-GPU histogram is weighted like the seeds'. */
		long n = min_servers > 0 && r->cdf_servers > 0 ? 10000L * r->cdf_servers / min_servers : 10000;
		struct gpu_hist *gh = NULL;
		for (int k = 0; k < ng; k++)
			if (!strcmp(g[k].gpu, o->gpu))
				gh = &g[k];
		if (!gh && ng < 8) {
			gh = &g[ng++];
			memset(gh, 0, sizeof *gh);
			gh->gpu = o->gpu;
			gh->seeds = r->has_hour_counts ? r->hour_counts : NULL;
		}
		struct sd_rng rng;
		sd_rng_seed(&rng, 20190101, (uint64_t)i);
		long within[4] = { 0 };
		for (long s = 0; s < n; s++) {
			double launch = 24 * u01(&rng);
			struct sd_lifetime lt;
			sd_lifetime_sample(o, launch, 1, &rng, &lt);
			CHECK(lt.seconds >= 0 && lt.seconds <= 24 * 3600.0, "%s: lifetime %g s", o->id, lt.seconds);
			if (lt.capped)
				continue;
			double h = lt.seconds / 3600;
			for (int k = 0; k < 4; k++)
				within[k] += h <= check_hours[k];
			if (gh)
				gh->sim[(int)floor(launch + h) % 24] += (double)(r->cdf_servers ? r->cdf_servers : 1) / n;
		}
		double worst = 0;
		printf("   %-28s %6ld |", o->id, n);
		for (int k = 0; k < 4; k++) {
			double model = 100.0 * within[k] / n, seeds = 100 * ref_cdf(r, check_hours[k]);
			worst = fmax(worst, fabs(model - seeds));
			printf(" %5.1f%% %5.1f%%|", model, seeds);
			CHECK(fabs(model - seeds) <= TOL_PP, "%s: CDF at %g h: model %.2f%% vs seeds %.2f%%", o->id,
			      check_hours[k], model, seeds);
		}
		printf(" %4.2f pp%s\n", worst, worst <= TOL_PP ? "" : "  <-- FAIL");
	}

	printf("\n2. Revocations per clock hour (share of the GPU's revocations, %%), model vs seeds\n");
	printf("   hour");
	for (int k = 0; k < ng; k++)
		printf(" | %5s model  seeds", g[k].gpu);
	printf("\n");
	double tot_sim[8] = { 0 }, tot_seeds[8] = { 0 };
	for (int k = 0; k < ng; k++)
		for (int h = 0; h < 24; h++) {
			tot_sim[k] += g[k].sim[h];
			tot_seeds[k] += g[k].seeds ? g[k].seeds[h] : 0;
		}
	for (int h = 0; h < 24; h++) {
		printf("   %4d", h);
		for (int k = 0; k < ng; k++)
			printf(" |       %5.1f  %5.1f", 100 * g[k].sim[h] / tot_sim[k],
			       g[k].seeds ? 100 * g[k].seeds[h] / tot_seeds[k] : 0);
		printf("\n");
	}
	printf("   r   ");
	for (int k = 0; k < ng; k++) {
		CHECK(g[k].seeds != NULL, "%s: catalog lacks hour_of_day_revocations", g[k].gpu);
		if (!g[k].seeds)
			continue;
		double rr = pearson(g[k].sim, g[k].seeds, 24);
		printf(" |   Pearson %6.3f  ", rr);
		CHECK(rr >= 0.9, "%s: hour-of-day Pearson r = %.3f < 0.9", g[k].gpu, rr);
	}
	printf("\n");
}

/* ---- 3. through the market core, with batches ----------------------------- */

struct collect {
	long revoked, capped, within[4], batches, batched;
	uint64_t last_batch;
};

static void collect_cb(void *ctx, const struct sd_market_event *ev)
{
	struct collect *c = ctx;
	if (ev->kind == SD_MARKET_CAPPED) {
		c->capped++;
	} else if (ev->kind == SD_MARKET_REVOKED) {
		c->revoked++;
		double h = (ev->time - ev->launched_at) / 3600;
		for (int k = 0; k < 4; k++)
			c->within[k] += h <= check_hours[k] + 1e-9;
		if (ev->batch_size > 1) {
			c->batched++;
			if (ev->batch != c->last_batch)
				c->batches++;
			c->last_batch = ev->batch;
		}
	}
}

static void test_market_cdf(const struct sd_catalog *c)
{
	printf("\n3. Lifetime CDF through struct sd_market with batch revocations on (10,000 launches per offer\n"
	       "   spread over a day, one zone), and how many revocations came in batches\n");
	printf("   %-28s |  <=1 h  |  <=3 h  | <=12 h  | <=24 h  | max |diff| | in batches\n", "offer");
	for (int i = 0; i < c->noffers; i++) {
		const struct sd_offer *o = &c->offers[i];
		const struct sd_revocation *r = &o->revocation;
		if (r->model != SD_REVOCATION_EMPIRICAL)
			continue;
		struct sd_market_knobs k;
		sd_market_knobs_init(&k);
		k.seed = 7 + (uint64_t)i;
		k.enforce_capacity = false;
		struct sd_market *m = NULL;
		char *why = NULL;
		CHECK(sd_market_new(&m, c, &k, &why) == 0, "%s", why ? why : "");
		free(why);
		if (!m)
			return;
		struct collect col = { 0 };
		struct sd_rng rng;
		sd_rng_seed(&rng, 99, (uint64_t)i);
		const long n = 10000;
		for (long s = 0; s < n; s++) {
			double t = (s + u01(&rng)) * 86400.0 / n;
			sd_market_advance(m, t, collect_cb, &col);
			CHECK(sd_market_launch(m, o, NULL, NULL) == 0, "launch");
		}
		sd_market_advance(m, 3 * 86400.0, collect_cb, &col);
		CHECK(col.revoked + col.capped == n, "%s: %ld ended of %ld", o->id, col.revoked + col.capped, n);
		CHECK(sd_market_live_total(m) == 0, "%d still live", sd_market_live_total(m));
		double worst = 0;
		printf("   %-28s |", o->id);
		for (int q = 0; q < 4; q++) {
			double model = 100.0 * col.within[q] / n, seeds = 100 * ref_cdf(r, check_hours[q]);
			worst = fmax(worst, fabs(model - seeds));
			printf(" %5.1f%%  |", model);
			CHECK(fabs(model - seeds) <= TOL_PP, "%s: market CDF at %g h: %.2f%% vs seeds %.2f%%", o->id,
			      check_hours[q], model, seeds);
		}
		printf("  %4.2f pp   | %4.1f%% of revocations, %ld batches\n", worst,
		       col.revoked ? 100.0 * col.batched / col.revoked : 0, col.batches);
		sd_market_free(m);
	}
}

/* ---- 4. calm/storm offers ------------------------------------------------- */

static void test_markov(const struct sd_catalog *c)
{
	static const double hours[4] = { 1, 24, 168, 720 };
	printf("\n4. market-2026 calm/storm lifetimes: sampled vs exact P(revoked within t)\n");
	printf("   %-32s |   <=1 h exact  |  <=24 h exact  | <=168 h exact  | <=720 h exact\n", "offer");
	for (int i = 0; i < c->noffers; i++) {
		const struct sd_offer *o = &c->offers[i];
		if (o->revocation.model != SD_REVOCATION_MARKOV)
			continue;
		struct sd_rng rng;
		sd_rng_seed(&rng, 2026, (uint64_t)i);
		const long n = 20000;
		long within[4] = { 0 };
		for (long s = 0; s < n; s++) {
			struct sd_lifetime lt;
			sd_lifetime_sample(o, 24 * u01(&rng), 1, &rng, &lt);
			CHECK(!lt.capped, "%s: capped", o->id);
			for (int k = 0; k < 4; k++)
				within[k] += lt.seconds <= hours[k] * 3600;
		}
		printf("   %-32s |", o->id);
		for (int k = 0; k < 4; k++) {
			double sim = 100.0 * within[k] / n, exact = 100 * sd_market_p_revoked_within(o, hours[k] * 3600, 1);
			printf(" %5.1f%% %5.1f%% |", sim, exact);
			CHECK(fabs(sim - exact) <= 1.5, "%s: P(<= %g h) sampled %.2f%% vs exact %.2f%%", o->id, hours[k],
			      sim, exact);
		}
		printf("\n");
	}
}

/* ---- 5. determinism and the launch-hour-dependent risk -------------------- */

struct hash {
	uint64_t h;
	long n, storms;
};

static void hash_cb(void *ctx, const struct sd_market_event *ev)
{
	struct hash *hs = ctx;
	uint64_t v[4];
	double t = ev->time;
	memcpy(&v[0], &t, 8);
	v[1] = (uint64_t)ev->kind;
	v[2] = ev->server;
	v[3] = ev->batch;
	for (int i = 0; i < 4; i++)
		hs->h = (hs->h ^ v[i]) * 1099511628211ull;
	hs->n++;
	hs->storms += ev->kind == SD_MARKET_STORM_BEGIN;
}

static struct hash run_market(const struct sd_catalog *c, uint64_t seed)
{
	struct sd_market_knobs k;
	sd_market_knobs_init(&k);
	k.seed = seed;
	k.hazard_scale = 50;
	struct sd_market *m = NULL;
	struct hash hs = { 14695981039346656037ull, 0, 0 };
	if (sd_market_new(&m, c, &k, NULL) < 0)
		return hs;
	for (int step = 0; step < 200; step++) {
		for (int i = 0; i < c->noffers; i++)
			while (sd_market_live(m, &c->offers[i]) < 3 && sd_market_launch(m, &c->offers[i], NULL, NULL) == 0)
				;
		sd_market_advance(m, (step + 1) * 60.0, hash_cb, &hs);
	}
	sd_market_free(m);
	return hs;
}

static void test_determinism(const struct sd_catalog *gce, const struct sd_catalog *mk)
{
	struct hash a = run_market(gce, 5), b = run_market(gce, 5), d = run_market(gce, 6);
	CHECK(a.n > 100 && a.h == b.h && a.n == b.n, "same seed, same events (%ld vs %ld)", a.n, b.n);
	CHECK(a.h != d.h, "different seed, different events");
	struct hash x = run_market(mk, 5), y = run_market(mk, 5);
	CHECK(x.n > 100 && x.h == y.h, "market-2026: same seed, same events");
	CHECK(x.storms > 0, "market-2026 at 50x for 200 min shows storms (%ld)", x.storms);
	printf("\n5. Determinism: gce-2019 %ld events, market-2026 %ld events (%ld storms) identical on rerun\n",
	       a.n, x.n, x.storms);

	/* Averaged over launch hours, the hour-dependent P(revoked within t)
	 * must equal the catalog CDF at whole hours (between them the model's
	 * shape follows the clock-hour weights, so it is not a straight line). */
	double worst = 0;
	for (int i = 0; i < gce->noffers; i++) {
		const struct sd_offer *o = &gce->offers[i];
		if (o->revocation.model != SD_REVOCATION_EMPIRICAL)
			continue;
		for (double h = 1; h <= 24; h += 1) {
			double avg = 0;
			const int nl = 24 * 60;
			for (int l = 0; l < nl; l++)
				avg += sd_market_p_revoked_within_at(o, (l + 0.5) * 24.0 / nl, h * 3600, 1) / nl;
			worst = fmax(worst, fabs(avg - sd_market_p_revoked_within(o, h * 3600, 1)));
		}
	}
	CHECK(worst < 1e-4, "mean over launch hours of P(revoked within t | hour) is off by %.4f", worst);
	printf("   P(revoked within t | launch hour), averaged over the day, matches the CDF at whole hours to %.1e\n",
	       worst);
}

/* ---- the catalog's reference numbers against the CSV files ------------- */

/* Where ../shared/data is present, data/NAME must be its byte-identical copy. */
static void same_as_shared(const char *top, const char *name)
{
	char ours[4096], theirs[4096];
	snprintf(ours, sizeof ours, "%s/data/%s", top, name);
	snprintf(theirs, sizeof theirs, "%s/../shared/data/seeds/derived/%s", top, name);
	FILE *a = fopen(theirs, "rb");
	if (!a)
		return;
	FILE *b = fopen(ours, "rb");
	int ca, cb;
	long off = 0;
	do {
		ca = getc(a);
		cb = b ? getc(b) : EOF - 1;
		off++;
	} while (ca == cb && ca != EOF);
	CHECK(ca == cb, "%s differs from %s at byte %ld", ours, theirs, off);
	fclose(a);
	if (b)
		fclose(b);
}

static void cross_check_csv(const struct sd_catalog *c, const char *top)
{
	char path[4096], line[512];
	same_as_shared(top, "cmdare_lifetime_cdf_by_region.csv");
	same_as_shared(top, "cmdare_revocations_by_hour_of_day.csv");
	snprintf(path, sizeof path, "%s/data/cmdare_lifetime_cdf_by_region.csv", top);
	FILE *f = fopen(path, "r");
	CHECK(f != NULL, "%s: cannot open (it ships with the source tree)", path);
	if (!f)
		return;
	int checked = 0;
	while (fgets(line, sizeof line, f)) {
		char gpu[32], region[64];
		int n, h, cnt;
		double frac;
		if (sscanf(line, "%31[^,],%63[^,],%d,%d,%lf,%d", gpu, region, &n, &h, &frac, &cnt) != 6 || h > 24)
			continue;
		for (int i = 0; i < c->noffers; i++) {
			const struct sd_offer *o = &c->offers[i];
			if (o->revocation.model != SD_REVOCATION_EMPIRICAL || strcmp(o->gpu, gpu) || strcmp(o->region, region))
				continue;
			CHECK(fabs(ref_cdf(&o->revocation, h) - frac) < 1e-6, "%s: catalog CDF at %d h %.6f, CSV %.6f",
			      o->id, h, ref_cdf(&o->revocation, h), frac);
			CHECK(o->revocation.cdf_servers == n, "%s: %d servers, CSV %d", o->id, o->revocation.cdf_servers, n);
			checked++;
		}
	}
	fclose(f);
	snprintf(path, sizeof path, "%s/data/cmdare_revocations_by_hour_of_day.csv", top);
	f = fopen(path, "r");
	CHECK(f != NULL, "%s: cannot open (it ships with the source tree)", path);
	double counts[3][24] = { { 0 } };
	static const char *const gpus[3] = { "K80", "P100", "V100" };
	while (f && fgets(line, sizeof line, f)) {
		char gpu[32];
		int h, n;
		if (sscanf(line, "%31[^,],%d,%d", gpu, &h, &n) != 3)
			continue;
		for (int g = 0; g < 3; g++)
			if (!strcmp(gpu, gpus[g]))
				counts[g][h % 24] += n;
	}
	int have_hours = f != NULL;
	if (f)
		fclose(f);
	for (int g = 0; g < 3 && have_hours; g++) {
		double total = 0;
		for (int h = 0; h < 24; h++)
			total += counts[g][h];
		CHECK(total > 0, "%s: no revocations by hour of day read from the CSV", gpus[g]);
	}
	for (int i = 0; have_hours && i < c->noffers; i++) {
		const struct sd_offer *o = &c->offers[i];
		if (o->revocation.model != SD_REVOCATION_EMPIRICAL)
			continue;
		for (int g = 0; g < 3; g++)
			if (!strcmp(o->gpu, gpus[g]))
				for (int h = 0; h < 24; h++)
					CHECK(o->revocation.hour_counts[h] == counts[g][h], "%s: hour %d: %g vs CSV %g", o->id,
					      h, o->revocation.hour_counts[h], counts[g][h]);
	}
	CHECK(checked == 12 * 24, "cross-checked %d CDF points", checked);
	printf("\nCross-check: the catalog's %d CDF points and hour counts equal the seeds' CSV files\n", checked);
}

static struct sd_catalog *load(const char *top, const char *name)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/data/%s", top, name);
	struct sd_catalog *c = NULL;
	char *why = NULL;
	if (sd_catalog_load(&c, path, &why) < 0) {
		printf("FAIL %s\n", why);
		check_failures++;
	}
	free(why);
	return c;
}

int main(void)
{
	const char *top = getenv("top_srcdir");
	if (!top)
		top = ".";
	struct sd_catalog *gce = load(top, "gce-2019.json"), *mk = load(top, "market-2026.json");
	if (!gce || !mk)
		return 1;
	test_lifetime_cdf(gce);
	test_market_cdf(gce);
	test_markov(mk);
	test_determinism(gce, mk);
	cross_check_csv(gce, top);
	sd_catalog_free(gce);
	sd_catalog_free(mk);
	putchar('\n');
	return check_exit("test-market-calibration");
}
