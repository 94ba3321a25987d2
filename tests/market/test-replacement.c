/* tests/market/test-replacement.c - the replacement scorer (src/market/replacement.h):
 * recent revocations and stockouts of a zone weigh against it for
 * a while, by the catalog's batch and storm models, and the suggestion says
 * why.  On a small catalog of three identical K80 zones (so that only the
 * events decide): the zone that just revoked is passed over, then the zone
 * revoked 18 s before that too; both come back once their events fade; a
 * stockout closes a zone for exactly its length; a refused request fades;
 * a batch scoped to one offer spares the zone's other offers; the storm
 * term of a Markov offer equals replacement.h's formula.  On the shipped
 * catalogs, under random events, the suggestion is always the lowest score
 * among the offers it may suggest.  The market's price now, when given,
 * decides instead of the catalog's. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/market/catalog.h"
#include "src/market/market-model.h"
#include "src/market/replacement.h"
#include "tests/check.h"

#define K80 "\"gpu\": \"K80\", \"gpu_count\": 1, \"transient\": true, \"usd_per_hour\": 0.25,\n" \
	"\"price_source\": \"measured: test\", \"images_per_sec\": 500, \"speed_source\": \"measured: test\",\n" \
	"\"capacity\": {\"servers\": 8, \"source\": \"estimated: test\"}, \"notice_seconds\": 30,\n" \
	"\"billing\": {\"unit\": \"per_second\", \"minimum_seconds\": 60},\n" \
	"\"boot\": {\"quantiles_seconds\": [70, 80, 90], \"source\": \"measured: test\"},\n" \
	"\"revocation\": {\"model\": \"empirical\", \"max_lifetime_hours\": 3,\n" \
	"  \"lifetime_cdf\": [[1, 0.2], [2, 0.3], [3, 0.4]], \"cdf_source\": \"measured: test\",\n" \
	"  \"batch\": {\"probability\": 0.2, \"sizes\": [[2, 1]], \"window_hours\": 1,\n" \
	"            \"spread_seconds\": 60, \"scope\": \"zone\", \"source\": \"measured: test\"}}}"
#define MARKOV(gpu) "\"gpu\": \"" gpu "\", \"gpu_count\": 1, \"transient\": true, \"usd_per_hour\": 0.2,\n" \
	"\"price_source\": \"quoted: test\", \"images_per_sec\": 100, \"speed_source\": \"estimated: test\",\n" \
	"\"capacity\": {\"servers\": 8, \"source\": \"estimated: test\"}, \"notice_seconds\": 120,\n" \
	"\"billing\": {\"unit\": \"per_second\", \"minimum_seconds\": 60},\n" \
	"\"boot\": {\"quantiles_seconds\": [70, 80], \"source\": \"estimated: test\"},\n" \
	"\"revocation\": {\"model\": \"markov\",\n" \
	"  \"calm\": {\"per_hour\": 0.0004, \"mean_hours\": 8, \"source\": \"measured: test\"},\n" \
	"  \"storm\": {\"per_hour\": 0.5, \"mean_hours\": 2, \"source\": \"measured: test\"},\n" \
	"  \"batch\": {\"probability\": 0.3, \"sizes\": [[2, 1]], \"window_hours\": 1,\n" \
	"            \"spread_seconds\": 60, \"scope\": \"offer\", \"source\": \"measured: test\"}}}"

/* Offers 0-2: the same K80 in zones z-a, z-b, z-c; 3: on-demand (never
 * suggested); 4, 5: two Markov offers in one zone, dearer per image. */
static const char catalog[] =
	"{\"format\": \"spotdeck-catalog\", \"version\": 1, \"name\": \"t\", \"offers\": [\n"
	"{\"id\": \"gce/z-a/k80/spot\", \"provider\": \"gce\", \"region\": \"z\", \"zone\": \"z-a\", " K80 ",\n"
	"{\"id\": \"gce/z-b/k80/spot\", \"provider\": \"gce\", \"region\": \"z\", \"zone\": \"z-b\", " K80 ",\n"
	"{\"id\": \"gce/z-c/k80/spot\", \"provider\": \"gce\", \"region\": \"z\", \"zone\": \"z-c\", " K80 ",\n"
	"{\"id\": \"gce/z-c/k80/on-demand\", \"provider\": \"gce\", \"region\": \"z\", \"zone\": \"z-c\",\n"
	" \"gpu\": \"K80\", \"gpu_count\": 1, \"transient\": false, \"usd_per_hour\": 0.01,\n"
	" \"price_source\": \"measured: test\", \"images_per_sec\": 500, \"speed_source\": \"measured: test\",\n"
	" \"capacity\": {\"servers\": 8, \"source\": \"estimated: test\"}, \"notice_seconds\": 0,\n"
	" \"billing\": {\"unit\": \"per_minute\", \"minimum_seconds\": 60},\n"
	" \"boot\": {\"quantiles_seconds\": [70, 80], \"source\": \"measured: test\"}},\n"
	"{\"id\": \"aws/y-a/t4/spot\", \"provider\": \"aws\", \"region\": \"y\", \"zone\": \"y-a\", " MARKOV("T4") ",\n"
	"{\"id\": \"aws/y-a/l4/spot\", \"provider\": \"aws\", \"region\": \"y\", \"zone\": \"y-a\", " MARKOV("L4") "\n"
	"]}\n";

static struct sd_catalog *cat;
static struct sd_replacement_event ev[16];
static int nev;
static int avail[8];
static struct sd_replacement_input in;

static void reset(double hazard_scale)
{
	nev = 0;
	for (int i = 0; i < 8; i++)
		avail[i] = -1;
	in = (struct sd_replacement_input){ .cat = cat, .available = avail, .events = ev, .hazard_scale = hazard_scale };
}

static void event(enum sd_replacement_event_kind kind, double t, int offer, const char *zone, double seconds)
{
	const struct sd_offer *o = offer >= 0 ? &cat->offers[offer] : NULL;
	ev[nev++] = (struct sd_replacement_event){
		.kind = kind, .t = t, .zone = o ? o->zone : zone, .offer = o, .seconds = seconds,
	};
	in.nevents = nev;
}

/* Suggests at `now`; checks the offer and the reason. */
static void expect(const char *what, double now, int want, const char *why)
{
	in.now = now;
	struct sd_replacement_choice c;
	char buf[128];
	int rc = sd_replacement_suggest(&in, &c);
	sd_replacement_explain(&in, &c, buf, sizeof buf);
	int ok = rc == 0 && c.offer == want && (!why || !strcmp(buf, why));
	check_report(ok, "%-44s -> %s (%s)", what, rc == 0 ? cat->offers[c.offer].id : "none", buf);
	if (!ok)
		fprintf(stderr, "    want %s (%s)\n", cat->offers[want].id, why ? why : "any reason");
}

static double near(double a, double b)
{
	return fabs(a - b) <= 1e-12 + 1e-9 * fabs(b);
}

static void test_zones(void)
{
	const double hz = 30;   /* the demo's hazard scale: 1 market s = 30 model s */
	reset(hz);
	expect("no events", 0, 0, "cheapest $/Mimg");

	/* The case: z-a revokes, then z-b 18 s later. */
	event(SD_REPLACEMENT_REVOKED, 100, 0, NULL, -1);
	expect("z-a revoked", 100, 1, "cheapest $/Mimg; z-a revoked 0s ago");
	struct sd_replacement_risk r;
	in.now = 100;
	sd_replacement_risk(&in, &cat->offers[0], &r);
	CHECK(near(r.batch, 0.2) && near(r.recent, 0.2) && r.event == 0,
	      "z-a at age 0: batch %g (want the catalog's 0.2), recent %g", r.batch, r.recent);
	event(SD_REPLACEMENT_REVOKED, 118, 1, NULL, -1);
	expect("then z-b revoked 18 s later", 118, 2, "cheapest $/Mimg; z-a revoked 18s ago");
	in.now = 118;
	sd_replacement_risk(&in, &cat->offers[0], &r);
	CHECK(near(r.batch, 0.2 * exp(-18.0 * hz / 3600)), "z-a after 18 s: batch %g, want 0.2 exp(-18 x 30 / 3600)",
	      r.batch);
	sd_replacement_risk(&in, &cat->offers[2], &r);
	CHECK(r.event < 0 && r.recent == 0, "z-c bears nothing: event %d, recent %g", r.event, r.recent);
	/* With no room in z-c, z-a (the older event, faded more) comes first;
	 * with z-b out too, z-a despite its revocation. */
	avail[2] = 0;
	expect("z-c has no room", 130, 0, "cheapest $/Mimg; z-b revoked 12s ago");
	avail[1] = 0;
	expect("z-b has none either", 130, 0, "cheapest $/Mimg despite z-a revoked 30s ago");
	avail[1] = avail[2] = -1;
	/* Eight batch windows of model time later both are forgotten. */
	expect("8 windows later", 118 + 8 * 3600 / hz, 0, "cheapest $/Mimg");
}

static void test_stockouts(void)
{
	reset(30);
	event(SD_REPLACEMENT_STOCKOUT, 0, -1, "z-a", 300);          /* a trace closes z-a for 300 s */
	expect("z-a closed for 300 s, at 10 s", 10, 1, "cheapest $/Mimg; z-a out of stock 10s ago");
	in.now = 299.5;
	struct sd_replacement_risk r;
	sd_replacement_risk(&in, &cat->offers[0], &r);
	CHECK(r.recent == 1 && r.stockout == 1, "z-a at 299.5 s: risk %g", r.recent);
	expect("z-a closed, after 300 s", 300, 0, "cheapest $/Mimg");

	reset(30);
	event(SD_REPLACEMENT_STOCKOUT, 0, 1, NULL, -1);             /* a refused request of z-b's K80 */
	event(SD_REPLACEMENT_STOCKOUT, 0, 0, NULL, -1);             /* and of z-a's */
	expect("z-a, z-b refused just now", 0, 2, "cheapest $/Mimg; z-a out of stock 0s ago");
	in.now = 120;   /* 1 h of model time: the refusal still weighs exp(-1) */
	sd_replacement_risk(&in, &cat->offers[0], &r);
	CHECK(near(r.stockout, exp(-1)), "refusal after 1 h of model time: %g, want exp(-1)", r.stockout);

	/* Refused just before: the dear Markov offers beat the cheap K80s. */
	reset(30);
	for (int i = 0; i < 3; i++)
		event(SD_REPLACEMENT_STOCKOUT, 0, i, NULL, -1);
	expect("every K80 refused 1 s ago", 1, 4, "best $/Mimg for its risk; z-a out of stock 1s ago");
}

static void test_scopes(void)
{
	reset(1);
	const struct sd_offer *t4 = &cat->offers[4], *l4 = &cat->offers[5];
	event(SD_REPLACEMENT_REVOKED, 0, 4, NULL, -1);
	in.now = 0;
	struct sd_replacement_risk r;
	sd_replacement_risk(&in, t4, &r);
	/* replacement.h, r_storm, with the catalog's numbers written out. */
	double pi_s = 2.0 / (2 + 8), post = pi_s * 0.5 / (pi_s * 0.5 + (1 - pi_s) * 0.0004);
	double m = 1 / 2.0, hit = 0.5 / (0.5 + m) * (1 - exp(-(0.5 + m)));
	CHECK(near(r.storm, post * hit), "storm term %.9f, want %.9f", r.storm, post * hit);
	CHECK(near(r.batch, 0.3), "T4's own batch term %g, want 0.3", r.batch);
	in.now = 3600;   /* one hour on: the storm goes on with P exp(-1/2) */
	sd_replacement_risk(&in, t4, &r);
	CHECK(near(r.storm, post * exp(-m) * hit), "storm term after 1 h: %g", r.storm);
	sd_replacement_risk(&in, l4, &r);
	CHECK(r.event < 0 && r.batch == 0 && r.storm == 0,
	      "the L4 beside it (batch scope 'offer', its own pool): event %d batch %g storm %g", r.event, r.batch,
	      r.storm);
	printf("ok   Markov T4 revoked: storm term %.4f (Bayes %.4f x hit %.4f), batch 0.3; the L4 in its zone spared\n",
	       post * hit, post, hit);
}

/* On a shipped catalog, random events: the suggestion is eligible and has
 * the lowest score; a reason's event is a real one. */
/* The price now (in.usd_per_hour, the market's) decides, not the catalog's:
 * with z-a's K80 dearer than the catalog says, z-b is the cheapest. */
static void test_live_prices(void)
{
	reset(30);
	expect("catalog prices", 0, 0, "cheapest $/Mimg");
	/* The catalog's own $/Mimg, as the status line quotes it: only the
	 * ranking was checked above, which any constant factor keeps. */
	CHECK(near(sd_replacement_usd_per_mimage(&cat->offers[0]), 0.25 / (500 * 3600.0) * 1e6),
	      "z-a at the catalog's price: %g $/Mimg", sd_replacement_usd_per_mimage(&cat->offers[0]));
	double price[6];
	for (int i = 0; i < cat->noffers && i < 6; i++)
		price[i] = cat->offers[i].usd_per_hour;
	price[0] = 0.5;
	in.usd_per_hour = price;
	expect("z-a's price now 0.50 (catalog 0.25)", 0, 1, "cheapest $/Mimg");
	struct sd_replacement_choice c;
	in.now = 0;
	int rc = sd_replacement_suggest(&in, &c);
	CHECK(rc == 0 && near(c.usd_per_mimage, 0.25 / (500 * 3600.0) * 1e6),
	      "its $/Mimg %g, want z-b's at 0.25/h", c.usd_per_mimage);
	CHECK(near(sd_replacement_usd_per_mimage_now(&in, &cat->offers[0]), 0.5 / (500 * 3600.0) * 1e6),
	      "z-a at the price now: %g", sd_replacement_usd_per_mimage_now(&in, &cat->offers[0]));
}

static void test_shipped(const char *path)
{
	struct sd_catalog *c = NULL;
	char *why = NULL;
	if (sd_catalog_load(&c, path, &why) < 0) {
		CHECK(0, "%s: %s", path, why ? why : "?");
		free(why);
		return;
	}
	static struct sd_replacement_event e[32];
	static int av[SD_CATALOG_MAX_OFFERS];
	unsigned seed = 12345;
	int bad = 0, moved = 0, trials = 400;
	struct sd_replacement_choice first;
	for (int trial = 0; trial < trials; trial++) {
		int n = trial % 8;
		for (int k = 0; k < n; k++) {
			seed = seed * 1103515245u + 12345u;
			const struct sd_offer *o = &c->offers[(seed >> 8) % (unsigned)c->noffers];
			seed = seed * 1103515245u + 12345u;
			int kind = (seed >> 8) % 3;
			e[k] = (struct sd_replacement_event){
				.kind = kind == 0 ? SD_REPLACEMENT_REVOKED : SD_REPLACEMENT_STOCKOUT,
				.t = (double)((seed >> 12) % 600), .zone = o->zone, .offer = kind == 2 ? NULL : o,
				.seconds = kind == 2 ? 120 : -1,
			};
		}
		for (int i = 0; i < c->noffers; i++) {
			seed = seed * 1103515245u + 12345u;
			av[i] = (seed >> 8) % 10 == 0 ? 0 : -1;
		}
		struct sd_replacement_input pin = { .cat = c, .available = av, .events = e, .nevents = n,
		                                .now = 600, .hazard_scale = 30 };
		struct sd_replacement_choice ch;
		if (sd_replacement_suggest(&pin, &ch) < 0)
			continue;
		if (trial == 0)
			first = ch;
		else
			moved += ch.offer != first.offer;
		const struct sd_offer *best = &c->offers[ch.offer];
		int ok = best->transient && av[ch.offer] != 0 && ch.risk.recent < 1;
		for (int i = 0; ok && i < c->noffers; i++) {
			const struct sd_offer *o = &c->offers[i];
			if (!o->transient || av[i] == 0)
				continue;
			struct sd_replacement_risk r;
			sd_replacement_risk(&pin, o, &r);
			if (r.recent < 1 && sd_replacement_usd_per_mimage(o) / (1 - r.recent) < ch.score * (1 - 1e-9))
				ok = 0;
		}
		if (ch.event >= 0 && (ch.event >= n || strcmp(e[ch.event].zone, "") == 0))
			ok = 0;
		if (!ok && ++bad <= 3)
			CHECK(0, "%s trial %d: suggested %s (score %g) is not the lowest eligible", path, trial, best->id,
			      ch.score);
		else if (!ok)
			check_failures++;
	}
	check_report(bad == 0 && moved > 0, "%s: %d random event sets, suggestion always the lowest eligible score "
	             "(moved off the event-free choice in %d)", path, trials, moved);
	sd_catalog_free(c);
}

int main(int argc, char **argv)
{
	char *why = NULL;
	if (sd_catalog_parse(&cat, catalog, sizeof catalog - 1, "replacement-test.json", &why) < 0) {
		fprintf(stderr, "test catalog: %s\n", why);
		return 1;
	}
	test_zones();
	test_stockouts();
	test_scopes();
	test_live_prices();
	sd_catalog_free(cat);
	const char *data = getenv("top_srcdir") ? getenv("top_srcdir") : ".";
	char path[4096];
	snprintf(path, sizeof path, "%s/data/gce-2019.json", data);
	test_shipped(path);
	snprintf(path, sizeof path, "%s/data/market-2026.json", data);
	test_shipped(path);
	return check_exit("test-replacement");
}
