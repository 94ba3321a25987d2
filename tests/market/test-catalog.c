/* tests/market/test-catalog.c - catalog loader: the shipped catalogs load, and each
 * kind of malformed catalog is refused with one line naming the file, the
 * JSON path of the field and the problem. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/market/catalog.h"
#include "src/market/market-model.h"
#include "tests/check.h"

/* A small valid catalog; the cases below break one thing each. */
static const char base[] =
	"{\n"
	"  \"format\": \"spotdeck-catalog\", \"version\": 1, \"name\": \"t\",\n"
	"  \"offers\": [\n"
	"    {\"id\": \"gce/z-a/k80/spot\", \"provider\": \"gce\", \"region\": \"z\", \"zone\": \"z-a\",\n"
	"     \"gpu\": \"K80\", \"gpu_count\": 1, \"transient\": true, \"usd_per_hour\": 0.25,\n"
	"     \"price_source\": \"measured: test\", \"images_per_sec\": 587, \"speed_source\": \"measured: test\",\n"
	"     \"capacity\": {\"servers\": 8, \"source\": \"estimated: test\"}, \"notice_seconds\": 30,\n"
	"     \"billing\": {\"unit\": \"per_second\", \"minimum_seconds\": 60},\n"
	"     \"boot\": {\"quantiles_seconds\": [70, 80, 90], \"source\": \"measured: test\"},\n"
	"     \"revocation\": {\"model\": \"empirical\", \"max_lifetime_hours\": 3,\n"
	"       \"lifetime_cdf\": [[1, 0.2], [2, 0.3], [3, 0.4]], \"cdf_source\": \"measured: test\",\n"
	"       \"hour_of_day_weights\": [1,1,1,1,1,1,1,1,1,1,4,1,1,1,1,1,1,1,1,1,1,1,1,1],\n"
	"       \"hour_of_day_source\": \"fitted: test\",\n"
	"       \"batch\": {\"probability\": 0.2, \"sizes\": [[2, 2], [3, 1]], \"window_hours\": 1,\n"
	"                 \"spread_seconds\": 60, \"scope\": \"zone\", \"source\": \"measured: test\"}}},\n"
	"    {\"id\": \"gce/z-a/k80/on-demand\", \"provider\": \"gce\", \"region\": \"z\", \"zone\": \"z-a\",\n"
	"     \"gpu\": \"K80\", \"gpu_count\": 1, \"transient\": false, \"usd_per_hour\": 0.72,\n"
	"     \"price_source\": \"measured: test\", \"images_per_sec\": 587, \"speed_source\": \"measured: test\",\n"
	"     \"capacity\": {\"servers\": 8, \"source\": \"estimated: test\"}, \"notice_seconds\": 0,\n"
	"     \"billing\": {\"unit\": \"per_minute\", \"minimum_seconds\": 60},\n"
	"     \"boot\": {\"quantiles_seconds\": [70, 80], \"source\": \"measured: test\"}},\n"
	"    {\"id\": \"aws/y-a/t4/spot\", \"provider\": \"aws\", \"region\": \"y\", \"zone\": \"y-a\",\n"
	"     \"gpu\": \"T4\", \"gpu_count\": 1, \"transient\": true, \"usd_per_hour\": 0.2,\n"
	"     \"price_source\": \"quoted: test\", \"images_per_sec\": 1000, \"speed_source\": \"estimated: test\",\n"
	"     \"capacity\": {\"servers\": 8, \"source\": \"estimated: test\"}, \"notice_seconds\": 120,\n"
	"     \"billing\": {\"unit\": \"per_second\", \"minimum_seconds\": 60},\n"
	"     \"boot\": {\"quantiles_seconds\": [70, 80], \"source\": \"estimated: test\"},\n"
	"     \"revocation\": {\"model\": \"markov\",\n"
	"       \"calm\": {\"per_hour\": 0.0004, \"mean_hours\": 8, \"source\": \"measured: test\"},\n"
	"       \"storm\": {\"per_hour\": 0.5, \"mean_hours\": 2, \"source\": \"measured: test\"}}}\n"
	"  ]\n"
	"}\n";

/* base with the first occurrence of `from` replaced by `to` (caller frees). */
static char *subst(const char *from, const char *to)
{
	const char *p = strstr(base, from);
	if (!p) {
		printf("FAIL: test case pattern not in base: %s\n", from);
		check_failures++;
		return strdup(base);
	}
	size_t a = (size_t)(p - base), nf = strlen(from), nt = strlen(to);
	char *s = malloc(sizeof base + nt);
	memcpy(s, base, a);
	memcpy(s + a, to, nt);
	strcpy(s + a + nt, p + nf);
	return s;
}

/* Parses `text` as "t.json"; expects failure with every `want` substring. */
static void expect_error(const char *label, const char *text, size_t len, const char *want1, const char *want2)
{
	struct sd_catalog *c = (struct sd_catalog *)1;
	char *why = NULL;
	int rc = sd_catalog_parse(&c, text, len, "t.json", &why);
	CHECK(rc == -1, "%s: rc = %d", label, rc);
	CHECK(c == NULL, "%s: catalog not NULL on error", label);
	CHECK(why != NULL, "%s: no message", label);
	if (why) {
		CHECK(!strncmp(why, "t.json", 6), "%s: message does not start with the file: %s", label, why);
		CHECK(!strchr(why, '\n'), "%s: message is not one line: %s", label, why);
		CHECK(!want1 || strstr(why, want1), "%s: want \"%s\" in: %s", label, want1, why);
		CHECK(!want2 || strstr(why, want2), "%s: want \"%s\" in: %s", label, want2, why);
		printf("ok   %-28s %s\n", label, why);
	}
	free(why);
	sd_catalog_free(rc == 0 ? c : NULL);
}

static void expect_subst_error(const char *label, const char *from, const char *to,
                               const char *want1, const char *want2)
{
	char *s = subst(from, to);
	expect_error(label, s, strlen(s), want1, want2);
	free(s);
}

static void test_malformed(void)
{
	static const char not_json[] = "{ \"format\": \"spotdeck-catalog\", offers: [] }";
	expect_error("not JSON", not_json, sizeof not_json - 1, "t.json:1:", "not valid JSON");
	expect_error("empty file", "", 0, "t.json:1:1", "unexpected end of file");
	expect_error("truncated", base, sizeof base / 2, "t.json:", "not valid JSON");
	static const char nul[] = "{\"a\": \"b\0\"}";
	expect_error("NUL byte", nul, sizeof nul - 1, "NUL byte at offset 8", NULL);
	expect_error("root not an object", "[1, 2]", 6, "expected an object, got an array", NULL);

	expect_subst_error("misspelt key", "\"offers\": [", "\"offerz\": [", "t.json: unknown key \"offerz\"", NULL);
	{
		/* Drop the offers key entirely: keep the text valid JSON. */
		static const char no_offers[] = "{\"format\": \"spotdeck-catalog\", \"version\": 1, \"name\": \"t\"}";
		expect_error("no offers", no_offers, sizeof no_offers - 1, "t.json: missing \"offers\"", NULL);
	}
	{
		static const char no_offers[] = "{\"format\": \"spotdeck-catalog\", \"version\": 1, \"name\": \"t\", \"offers\": []}";
		expect_error("empty offers", no_offers, sizeof no_offers - 1, "t.json: offers: expected at least 1 entry, got 0", NULL);
	}
	expect_subst_error("negative price", "\"usd_per_hour\": 0.25", "\"usd_per_hour\": -1",
	                   "t.json: offers[0].usd_per_hour: expected a positive number", "got -1");
	expect_subst_error("price not a number", "\"usd_per_hour\": 0.25", "\"usd_per_hour\": \"abc\"",
	                   "offers[0].usd_per_hour: expected a positive number", "got \"abc\"");
	expect_subst_error("CDF decreasing", "[2, 0.3]", "[2, 0.1]",
	                   "offers[0].revocation.lifetime_cdf[1][1]: the CDF decreases", NULL);
	expect_subst_error("fraction > 1", "[3, 0.4]", "[3, 1.5]",
	                   "offers[0].revocation.lifetime_cdf[2][1]: expected a number from 0 to 1", "got 1.5");
	expect_subst_error("hours not increasing", "[2, 0.3]", "[1, 0.3]",
	                   "offers[0].revocation.lifetime_cdf[1][0]: hours must increase", NULL);
	expect_subst_error("CDF not at cap", "\"max_lifetime_hours\": 3", "\"max_lifetime_hours\": 4",
	                   "offers[0].revocation.lifetime_cdf: the last point is at 3 h", NULL);
	expect_subst_error("wrong type (bool)", "\"transient\": true", "\"transient\": \"yes\"",
	                   "offers[0].transient: expected true or false, got \"yes\"", NULL);
	expect_subst_error("23 hour weights", "[1,1,1,1,1,1,1,1,1,1,4,", "[1,1,1,1,1,1,1,1,1,4,",
	                   "offers[0].revocation.hour_of_day_weights: expected 24 numbers", "got 23");
	expect_subst_error("weights all zero", "[1,1,1,1,1,1,1,1,1,1,4,1,1,1,1,1,1,1,1,1,1,1,1,1]",
	                   "[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]",
	                   "offers[0].revocation.hour_of_day_weights: all 24 weights are zero", NULL);
	expect_subst_error("negative weight", "[1,1,1,1,1,1,1,1,1,1,4,", "[1,1,1,1,1,-1,1,1,1,1,4,",
	                   "offers[0].revocation.hour_of_day_weights[5]: expected a non-negative number", NULL);
	expect_subst_error("weights impossible", "[1,1,1,1,1,1,1,1,1,1,4,1,1,1,1,1,1,1,1,1,1,1,1,1]",
	                   "[0,0,0,0,0,0,0,0,0,0,1,0,0,0,0,0,0,0,0,0,0,0,0,0]",
	                   "offers[0].revocation.hour_of_day_weights:", NULL);
	expect_subst_error("gpu count 0", "\"gpu_count\": 1", "\"gpu_count\": 0",
	                   "offers[0].gpu_count: expected an integer from 1 to 64, got 0", NULL);
	expect_subst_error("gpu count 1.5", "\"gpu_count\": 1", "\"gpu_count\": 1.5",
	                   "offers[0].gpu_count: expected an integer", "got 1.5");
	expect_subst_error("duplicate offer id", "\"gce/z-a/k80/on-demand\"", "\"gce/z-a/k80/spot\"",
	                   "offers[1].id: \"gce/z-a/k80/spot\" is already the id of offers[0]", NULL);
	expect_subst_error("unknown key", "\"gpu_count\": 1,", "\"gpu_count\": 1, \"colour\": \"red\",",
	                   "offers[0]: unknown key \"colour\"", NULL);
	expect_subst_error("duplicate key", "\"gpu_count\": 1,", "\"gpu_count\": 1, \"gpu_count\": 2,",
	                   "offers[0]: key \"gpu_count\" appears twice", NULL);
	expect_subst_error("key of the other model", "\"model\": \"markov\",", "\"model\": \"markov\", \"cdf_source\": \"measured: x\",",
	                   "offers[2].revocation: unknown key \"cdf_source\" (not used by the markov model)", NULL);
	expect_subst_error("unknown model", "\"model\": \"empirical\"", "\"model\": \"weibull\"",
	                   "offers[0].revocation.model: expected \"empirical\" or \"markov\", got \"weibull\"", NULL);
	expect_subst_error("source without kind", "\"price_source\": \"quoted: test\"", "\"price_source\": \"somewhere\"",
	                   "offers[2].price_source: expected a source starting with measured:", NULL);
	expect_subst_error("missing field", "\"images_per_sec\": 587, ", "",
	                   "offers[0]: missing \"images_per_sec\"", NULL);
	expect_subst_error("on-demand revoked", "\"boot\": {\"quantiles_seconds\": [70, 80], \"source\": \"measured: test\"}}",
	                   "\"boot\": {\"quantiles_seconds\": [70, 80], \"source\": \"measured: test\"},"
	                   " \"revocation\": {\"model\": \"markov\"}}",
	                   "offers[1].revocation: on-demand offers", NULL);
	expect_subst_error("transient unrevoked", "\"transient\": false", "\"transient\": true",
	                   "offers[1]: a transient offer needs \"revocation\"", NULL);
	expect_subst_error("boot quantiles decrease", "[70, 80, 90]", "[70, 90, 80]",
	                   "offers[0].boot.quantiles_seconds[2]: quantiles must not decrease", NULL);
	expect_subst_error("batch size 1", "[[2, 2], [3, 1]]", "[[1, 2], [3, 1]]",
	                   "offers[0].revocation.batch.sizes[0][0]: expected an integer from 2 to 1024, got 1", NULL);
	expect_subst_error("batch probability", "\"probability\": 0.2", "\"probability\": 2",
	                   "offers[0].revocation.batch.probability: expected a number from 0 to 1, got 2", NULL);
	expect_subst_error("storm dwell 0", "\"per_hour\": 0.5, \"mean_hours\": 2", "\"per_hour\": 0.5, \"mean_hours\": 0",
	                   "offers[2].revocation.storm.mean_hours: expected a positive number", NULL);
	expect_subst_error("version 2", "\"version\": 1", "\"version\": 2",
	                   "t.json: version: version 2 is not supported", NULL);
	expect_subst_error("infinite number", "\"usd_per_hour\": 0.25", "\"usd_per_hour\": 1e999",
	                   "offers[0].usd_per_hour: expected a positive number", NULL);
	expect_subst_error("billing unit", "\"unit\": \"per_minute\"", "\"unit\": \"per_fortnight\"",
	                   "offers[1].billing.unit: expected \"per_second\", \"per_minute\" or \"per_hour\"", NULL);
	expect_subst_error("id with a space", "\"gce/z-a/k80/spot\"", "\"gce/z-a k80\"",
	                   "offers[0].id: expected a name without spaces", NULL);
	expect_subst_error("trailing text", "  ]\n}\n", "  ]\n}\n}", "t.json:33:1: unexpected text after the JSON value", NULL);

	struct sd_catalog *c = NULL;
	char *why = NULL;
	CHECK(sd_catalog_load(&c, "/nonexistent/x.json", &why) == -1, "load of a missing file");
	CHECK(why && strstr(why, "/nonexistent/x.json: cannot open"), "message: %s", why ? why : "(none)");
	free(why);
}

static void test_base(void)
{
	struct sd_catalog *c = NULL;
	char *why = NULL;
	int rc = sd_catalog_parse(&c, base, sizeof base - 1, "t.json", &why);
	CHECK(rc == 0, "base catalog: %s", why ? why : "");
	free(why);
	if (rc)
		return;
	CHECK(c->noffers == 3, "%d offers", c->noffers);
	CHECK(c->nzones == 2, "%d zones", c->nzones);
	const struct sd_offer *o = sd_catalog_find(c, "gce/z-a/k80/spot");
	CHECK(o && o->revocation.model == SD_REVOCATION_EMPIRICAL, "find spot offer");
	const struct sd_offer *od = sd_catalog_find(c, "gce/z-a/k80/on-demand");
	CHECK(od && !od->transient && od->revocation.model == SD_REVOCATION_NONE, "find on-demand offer");
	CHECK(sd_catalog_find(c, "nope") == NULL, "find unknown id");
	if (o && od) {
		/* Hour weights are normalised to mean 1: 23 ones and a 4 -> 24/27. */
		CHECK(fabs(o->revocation.hour_weights[0] - 24.0 / 27) < 1e-12, "weight %g", o->revocation.hour_weights[0]);
		/* Billing: price x max(seconds, minimum) / 3600. */
		CHECK(fabs(sd_bill_usd(o, 30) - 0.25 * 60 / 3600) < 1e-12, "minimum billed");
		CHECK(fabs(sd_bill_usd(o, 3600) - 0.25) < 1e-12, "one hour");
		CHECK(fabs(sd_bill_usd(o, 90.5) - 0.25 * 90.5 / 3600) < 1e-12, "per second");
		CHECK(fabs(sd_bill_usd(od, 61) - 0.72 * 120 / 3600) < 1e-12, "per minute rounds up");
		CHECK(sd_market_p_revoked_within(od, 1e6, 1) == 0, "on-demand is never revoked");
		CHECK(fabs(sd_market_p_revoked_within(o, 3600, 1) - 0.2) < 1e-12, "P(1 h) = CDF");
		CHECK(fabs(sd_market_p_revoked_within(o, 1800, 2) - 0.2) < 1e-12, "hazard scale 2");
		CHECK(fabs(sd_market_p_revoked_within(o, 1e9, 1) - 0.4) < 1e-12, "capped survivors are not revoked");
	}
	sd_catalog_free(c);
}

static void test_shipped(const char *dir, const char *name, int min_offers)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/data/%s", dir, name);
	struct sd_catalog *c = NULL;
	char *why = NULL;
	int rc = sd_catalog_load(&c, path, &why);
	CHECK(rc == 0, "%s: %s", path, why ? why : "");
	free(why);
	if (rc)
		return;
	CHECK(c->noffers >= min_offers, "%s: %d offers", name, c->noffers);
	int transient = 0;
	for (int i = 0; i < c->noffers; i++) {
		const struct sd_offer *o = &c->offers[i];
		transient += o->transient;
		CHECK(o->transient == (o->revocation.model != SD_REVOCATION_NONE), "%s", o->id);
		CHECK(sd_catalog_find(c, o->id) == o, "%s: id unique", o->id);
		CHECK(o->nboot >= 2 && o->boot_quantiles[0] > 30 && o->boot_quantiles[o->nboot - 1] < 300,
		      "%s: boot quantiles", o->id);
	}
	printf("ok   %s: %d offers (%d transient) in %d zones\n", name, c->noffers, transient, c->nzones);
	sd_catalog_free(c);
}

int main(void)
{
	const char *dir = getenv("top_srcdir");
	if (!dir)
		dir = ".";
	test_base();
	test_malformed();
	test_shipped(dir, "gce-2019.json", 24);
	test_shipped(dir, "market-2026.json", 40);
	return check_exit("test-catalog");
}
