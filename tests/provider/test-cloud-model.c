/* tests/provider/test-cloud-model.c - the revocation model the cloud providers give
 * their offers (src/provider/cloud-vm.c, sd_cloud_catalog_model): each
 * offer takes the calibrated market's (data/market-2026.json) Spot offer of
 * its provider and GPU in its own region, else in another region of that
 * provider, else none; the default catalog path (gce-2019.json) leads to
 * market-2026.json beside it; P(revoked within 1 h) then equals the
 * market's own for that offer.  A missing catalog is a one-line error and
 * leaves every offer without a model. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/market/catalog.h"
#include "src/market/market-model.h"
#include "src/provider/cloud-vm.h"
#include "tests/check.h"

static const struct sd_offer *find(const struct sd_catalog *c, const char *id)
{
	for (int i = 0; i < c->noffers; i++)
		if (!strcmp(c->offers[i].id, id))
			return &c->offers[i];
	CHECK(0, "no offer %s in %s", id, c->file);
	return NULL;
}

/* The offer's model is the market's offer M's: the same arrays, the same
 * P(revoked within 1 h). */
static void same_model(const struct sd_offer *o, const struct sd_offer *m)
{
	if (!o || !m)
		return;
	CHECK(o->revocation.model == m->revocation.model, "%s: model %d, market's %s %d", o->id, o->revocation.model,
	      m->id, m->revocation.model);
	double a = sd_market_p_revoked_within(o, 3600, 1), b = sd_market_p_revoked_within(m, 3600, 1);
	CHECK(a > 0 && a < 1 && fabs(a - b) < 1e-12, "%s: P(revoked 1 h) %.6f, %s's %.6f", o->id, a, m->id, b);
}

int main(void)
{
	const char *top = getenv("top_srcdir");
	char dflt[4200], mpath[4200];
	snprintf(dflt, sizeof dflt, "%s/data/gce-2019.json", top ? top : ".");
	snprintf(mpath, sizeof mpath, "%s/data/market-2026.json", top ? top : ".");
	struct sd_catalog *market = NULL;
	char *why = NULL;
	if (sd_catalog_load(&market, mpath, &why) < 0) {
		fprintf(stderr, "test-cloud-model: %s\n", why);
		return 1;
	}

	/* aws: T4 in us-east-2, whose model (the market's us-east-2a) differs
	 * from us-east-1's, listed first; K80, which no aws offer of the
	 * market has, gets none. */
	const struct sd_offer *e1 = find(market, "aws/us-east-1a/t4/spot"), *e2 = find(market, "aws/us-east-2a/t4/spot");
	CHECK(e1 && e2 && e1->index < e2->index &&
	      sd_market_p_revoked_within(e1, 3600, 1) != sd_market_p_revoked_within(e2, 3600, 1),
	      "the market's T4 models of us-east-1 and us-east-2 must differ for this test to mean anything");
	char z1[] = "us-east-2a", z2[] = "us-east-2b";
	char *aws_zones[] = { z1, z2 };
	struct sd_cloud_offer_spec aws = { .provider = "aws", .region = "us-east-2", .machine_type = "g4dn.xlarge",
		                           .gpu = "T4", .gpu_count = 1, .usd_per_hour = NAN };
	struct sd_cloud_catalog a = { 0 };
	sd_cloud_catalog_build(&a, &aws, aws_zones, 2);
	CHECK_STR(a.cat.offers[1].id, "aws/us-east-2b/t4/spot");
	CHECK_INT(a.cat.offers[0].revocation.model, SD_REVOCATION_NONE);
	CHECK_INT(sd_cloud_catalog_model(&a, dflt, &why), 2);
	same_model(&a.cat.offers[0], e2);
	same_model(&a.cat.offers[1], e2);
	sd_cloud_catalog_free(&a);
	aws.gpu = "K80";
	sd_cloud_catalog_build(&a, &aws, aws_zones, 2);
	CHECK_INT(sd_cloud_catalog_model(&a, mpath, &why), 0);
	CHECK_INT(a.cat.offers[0].revocation.model, SD_REVOCATION_NONE);
	sd_cloud_catalog_free(&a);

	/* gce: regions from the zones; L4 in us-east4 is the market's own
	 * region, in europe-west4 (none there) another region's. */
	char z3[] = "us-east4-a", z4[] = "europe-west4-b";
	char *gce_zones[] = { z3, z4 };
	struct sd_cloud_offer_spec gce = { .provider = "gce", .machine_type = "g2-standard-8", .gpu = "L4",
		                           .gpu_count = 1, .usd_per_hour = NAN };
	struct sd_cloud_catalog g = { 0 };
	sd_cloud_catalog_build(&g, &gce, gce_zones, 2);
	CHECK_STR(g.cat.offers[0].region, "us-east4");
	CHECK_STR(g.cat.offers[1].region, "europe-west4");
	CHECK_INT(sd_cloud_catalog_model(&g, NULL, &why), -1);   /* NULL: market-2026.json in the cwd, absent */
	CHECK(why && strstr(why, "market-2026.json") != NULL, "error: %s", why ? why : "(none)");
	free(why);
	why = NULL;
	CHECK_INT(g.cat.offers[0].revocation.model, SD_REVOCATION_NONE);
	CHECK_INT(sd_cloud_catalog_model(&g, mpath, &why), 2);
	same_model(&g.cat.offers[0], find(market, "gce/us-east4-a/l4/spot"));
	same_model(&g.cat.offers[1], find(market, "gce/us-central1-a/l4/spot"));
	sd_cloud_catalog_free(&g);

	sd_catalog_free(market);
	return check_exit("test-cloud-model");
}
