/* tests/provider/gce/test-gce-price.c - a Spot VM's price from Billing Catalog pages
 * (src/provider/gce/gce-price.h), in the SKU shapes of cloud-apis.md section
 * 1.5: the core, RAM and GPU SKUs of the VM taken, and not the OnDemand,
 * custom, workstation, 80GB, other-currency or other-region ones listed
 * before them; a region priced only with every rate; units + nanos; the
 * page token escaped; a page that is not one refused; the cache's entries
 * found by their whole key, aged out, and replaced. */
#include "config.h"
#include "src/provider/gce/gce-price.h"

#include "tests/check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SKU(desc, group, usage, region, units, nanos, cur, unit)                                           \
	"{\"skuId\":\"X\",\"description\":\"" desc "\",\"category\":{\"resourceFamily\":\"Compute\","      \
	"\"resourceGroup\":\"" group "\",\"usageType\":\"" usage "\"},\"serviceRegions\":[\"" region "\"],"  \
	"\"pricingInfo\":[{\"pricingExpression\":{\"usageUnit\":\"" unit "\",\"tieredRates\":[{"              \
	"\"startUsageAmount\":0,\"unitPrice\":{\"currencyCode\":\"" cur "\",\"units\":\"" units "\","         \
	"\"nanos\":" nanos "}}]}}]}"

/* Page 1: every decoy first, then us-central1's real rates. */
static const char page1[] = "{\"skus\":["
	SKU("N1 Predefined Instance Core running in Americas", "CPU", "OnDemand", "us-central1", "0", "31611000", "USD", "h") ","
	SKU("Spot Preemptible N1 Custom Instance Core running in Americas", "CPU", "Preemptible", "us-central1", "0", "7400000", "USD", "h") ","
	SKU("Spot Preemptible N2 Instance Core running in Americas", "CPU", "Preemptible", "us-central1", "0", "8000000", "USD", "h") ","
	SKU("Spot Preemptible N1 Predefined Instance Core running in Americas", "CPU", "Preemptible", "us-central1", "0", "6980000", "USD", "h") ","
	SKU("Spot Preemptible N1 Predefined Instance Ram running in Americas", "RAM", "Preemptible", "us-central1", "0", "936000", "USD", "GiBy.h") ","
	SKU("Nvidia Tesla T4 Virtual Workstation GPU attached to Spot Preemptible VMs running in Americas", "GPU", "Preemptible", "us-central1", "0", "210000000", "USD", "h") ","
	SKU("Nvidia Tesla T4 GPU attached to Spot Preemptible VMs running in Americas", "GPU", "Preemptible", "us-central1", "0", "140000000", "USD", "h") ","
	SKU("Nvidia Tesla T4 GPU attached to Spot Preemptible VMs running in EMEA", "GPU", "Preemptible", "europe-west4", "0", "160000000", "EUR", "h")
	"],\"nextPageToken\":\"a/b+c=\"}";
/* Page 2: europe-west4's rates; its T4 in USD this time. */
static const char page2[] = "{\"skus\":["
	SKU("Spot Preemptible N1 Predefined Instance Core running in EMEA", "CPU", "Preemptible", "europe-west4", "0", "7680000", "USD", "h") ","
	SKU("Spot Preemptible N1 Predefined Instance Ram running in EMEA", "RAM", "Preemptible", "europe-west4", "0", "1030000", "USD", "GiBy.h") ","
	SKU("Nvidia Tesla T4 GPU attached to Spot Preemptible VMs running in EMEA", "GPU", "Preemptible", "europe-west4", "1", "160000000", "USD", "h") ","
	SKU("Spot Preemptible N1 Predefined Instance Core running in APAC", "CPU", "Preemptible", "asia-east1", "0", "9000000", "USD", "h")
	"],\"nextPageToken\":\"\"}";

static const char a100[] = "{\"skus\":["
	SKU("Nvidia A100 80GB GPU attached to Spot Preemptible VMs running in Americas", "GPU", "Preemptible", "us-central1", "1", "570000000", "USD", "h") ","
	SKU("Nvidia Tesla A100 GPU attached to Spot Preemptible VMs running in Americas", "GPU", "Preemptible", "us-central1", "1", "100000000", "USD", "h")
	"]}";

static int near(double a, double b)
{
	return fabs(a - b) < 1e-12;
}

int main(void)
{
	const char *regions[] = {"us-central1", "europe-west4", "us-central1"};
	struct sd_gce_price_sheet *s = calloc(1, sizeof *s);
	char next[256], err[256], why[200];
	sd_gce_price_init(s, "n1-standard-8", "nvidia-tesla-t4", regions, 3);
	CHECK_STR(s->family, "N1");
	CHECK_STR(s->gpu_model, "T4");
	CHECK_INT(s->nregions, 2);   /* the repeated region once */

	CHECK_INT(sd_gce_price_page(s, page1, sizeof page1 - 1, next, sizeof next, err, sizeof err), 0);
	CHECK_STR(next, "a/b+c=");
	CHECK_INT(sd_gce_price_complete(s, 0), 1);
	CHECK_INT(sd_gce_price_complete(s, 1), 0);   /* the EUR T4 is not a USD price */
	CHECK_INT(sd_gce_price_complete(s, -1), 0);
	CHECK(isnan(sd_gce_price_vm(s, 1, 8, 30, 1, why, sizeof why)));
	CHECK(near(s->core[0].usd, 0.00698), "core %.9f (\"%s\")", s->core[0].usd, s->core[0].sku);
	CHECK(near(s->ram[0].usd, 0.000936), "ram %.9f", s->ram[0].usd);
	CHECK(near(s->gpu[0].usd, 0.14), "gpu %.9f (\"%s\")", s->gpu[0].usd, s->gpu[0].sku);
	CHECK_STR(s->gpu[0].sku, "Nvidia Tesla T4 GPU attached to Spot Preemptible VMs running in Americas");
	double usd = sd_gce_price_vm(s, 0, 8, 30, 1, why, sizeof why);
	CHECK(near(usd, 8 * 0.00698 + 30 * 0.000936 + 0.14), "vm %.9f", usd);
	CHECK_STR(why, "8 vCPU x $0.006980 + 30 GiB x $0.000936 + 1 T4 x $0.140000");
	CHECK(near(sd_gce_price_vm(s, 0, 8, 30, 2, NULL, 0), usd + 0.14));

	CHECK_INT(sd_gce_price_page(s, page2, sizeof page2 - 1, next, sizeof next, err, sizeof err), 0);
	CHECK_STR(next, "");
	CHECK_INT(sd_gce_price_complete(s, -1), 1);
	CHECK(near(s->gpu[1].usd, 1.16), "units + nanos: %.9f", s->gpu[1].usd);
	CHECK(near(sd_gce_price_vm(s, 1, 4, 15, 1, NULL, 0), 4 * 0.00768 + 15 * 0.00103 + 1.16));
	CHECK_INT(sd_gce_price_region(s, "asia-east1"), -1);
	CHECK_INT(s->pages, 2);
	CHECK_INT(s->skus, 12);

	/* A page that is not one; nothing is taken from it. */
	CHECK_INT(sd_gce_price_page(s, "{\"skus\":{}}", 11, next, sizeof next, err, sizeof err), -1);
	CHECK(strstr(err, "\"skus\" is not an array") != NULL, "%s", err);
	CHECK_INT(sd_gce_price_page(s, "<html>", 6, next, sizeof next, err, sizeof err), -1);
	CHECK(strstr(err, "not JSON") != NULL, "%s", err);

	/* 80GB only for an 80gb accelerator, and the other way round. */
	sd_gce_price_init(s, "a2-highgpu-1g", "nvidia-a100-80gb", regions, 1);
	CHECK_INT(sd_gce_price_page(s, a100, sizeof a100 - 1, next, sizeof next, err, sizeof err), 0);
	CHECK(near(s->gpu[0].usd, 1.57), "a100-80gb %.9f", s->gpu[0].usd);
	sd_gce_price_init(s, "a2-highgpu-1g", "nvidia-tesla-a100", regions, 1);
	CHECK_INT(sd_gce_price_page(s, a100, sizeof a100 - 1, next, sizeof next, err, sizeof err), 0);
	CHECK(near(s->gpu[0].usd, 1.1), "a100 %.9f", s->gpu[0].usd);

	/* The page URL: the token escaped as a query value. */
	char url[512];
	CHECK_INT(sd_gce_price_page_url("http://h/v1", "a/b+c=", url, sizeof url), 0);
	CHECK_STR(url, "http://h/v1/services/6F81-5844-456A/skus?currencyCode=USD&pageToken=a%2Fb%2Bc%3D");
	CHECK_INT(sd_gce_price_page_url("http://h/v1", NULL, url, sizeof url), 0);
	CHECK_STR(url, "http://h/v1/services/6F81-5844-456A/skus?currencyCode=USD");
	CHECK_INT(sd_gce_price_page_url("http://h/v1", "x", url, 20), -1);

	/* The cache: made with its directories, found by the whole key only,
	 * aged out, an entry replaced rather than added. */
	char dir[] = "/tmp/test-gce-price.XXXXXX", path[300], cmd[400];
	CHECK(mkdtemp(dir) != NULL);
	snprintf(path, sizeof path, "%s/a/b/gce-prices.json", dir);
	struct sd_gce_price_key k = { "http://h/v1", "n1-standard-8", "nvidia-tesla-t4", 1, "us-central1" };
	double got = 0, at = 0;
	CHECK_INT(sd_gce_price_cache_get(path, &k, 1000, 86400, &got, why, sizeof why, &at), -1);
	CHECK(sd_gce_price_cache_put(path, &k, 0.22392, "sum 1", 1000, err, sizeof err) == 0, "%s", err);
	CHECK_INT(sd_gce_price_cache_get(path, &k, 1500, 86400, &got, why, sizeof why, &at), 0);
	CHECK(got == 0.22392 && at == 1000, "%g at %g", got, at);
	CHECK_STR(why, "sum 1");
	CHECK_INT(sd_gce_price_cache_get(path, &k, 1000 + 86401, 86400, &got, why, sizeof why, &at), -1);
	struct sd_gce_price_key other[] = {
		{ "http://h2/v1", "n1-standard-8", "nvidia-tesla-t4", 1, "us-central1" },
		{ "http://h/v1", "n1-standard-4", "nvidia-tesla-t4", 1, "us-central1" },
		{ "http://h/v1", "n1-standard-8", "nvidia-l4", 1, "us-central1" },
		{ "http://h/v1", "n1-standard-8", "nvidia-tesla-t4", 2, "us-central1" },
		{ "http://h/v1", "n1-standard-8", "nvidia-tesla-t4", 1, "europe-west4" },
	};
	for (size_t i = 0; i < sizeof other / sizeof other[0]; i++)
		CHECK(sd_gce_price_cache_get(path, &other[i], 1500, 86400, &got, why, sizeof why, &at) == -1,
		      "key %zu", i);
	CHECK_INT(sd_gce_price_cache_put(path, &other[4], 0.24392, "sum 2", 2000, err, sizeof err), 0);
	CHECK_INT(sd_gce_price_cache_put(path, &k, 0.3, "sum 3", 3000, err, sizeof err), 0);
	CHECK_INT(sd_gce_price_cache_get(path, &k, 3000, 86400, &got, why, sizeof why, &at), 0);
	CHECK(got == 0.3 && at == 3000, "%g at %g", got, at);
	CHECK_INT(sd_gce_price_cache_get(path, &other[4], 3000, 86400, &got, why, sizeof why, &at), 0);
	CHECK(got == 0.24392, "%g", got);
	snprintf(cmd, sizeof cmd, "test \"$(grep -c '\"region\"' %s)\" = 2", path);
	CHECK_INT(system(cmd), 0);
	/* A file that is not a cache is a miss, and is replaced. */
	FILE *f = fopen(path, "w");
	fputs("not json", f);
	fclose(f);
	CHECK_INT(sd_gce_price_cache_get(path, &k, 3000, 86400, &got, why, sizeof why, &at), -1);
	CHECK_INT(sd_gce_price_cache_put(path, &k, 0.3, "sum 3", 3000, err, sizeof err), 0);
	CHECK_INT(sd_gce_price_cache_get(path, &k, 3000, 86400, &got, why, sizeof why, &at), 0);
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	CHECK_INT(system(cmd), 0);
	free(s);
	return check_exit("test-gce-price");
}
