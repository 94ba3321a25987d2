/* src/provider/gce/gce-price.h - a Spot VM's price from the Cloud Billing
 * Catalog, read and cached.  No I/O on the network here: the gce provider
 * and `spotdeck doctor` send the requests (services.skus, paged) and hand
 * each page to sd_gce_price_page.
 *
 * What a Spot VM costs an hour, in USD (cloud-apis.md section 1.5, as
 * SkyPilot's sky/catalog/data_fetchers/fetch_gcp.py prices it):
 *
 *     vCPUs x the family's Spot core SKU
 *   + memory in GiB x the family's Spot RAM SKU
 *   + GPUs x the GPU's Spot SKU
 *
 * A SKU is Spot when its category.usageType is "Preemptible".  The core
 * SKU has resourceGroup "CPU" and the words FAMILY and "Core" in its
 * description ("Spot Preemptible N1 Predefined Instance Core running in
 * Americas"), the RAM SKU resourceGroup "RAM" and the words FAMILY and
 * "Ram"; custom, sole-tenant and commitment SKUs are not the VM's.  The
 * GPU SKU has resourceGroup "GPU" and the model's word ("Nvidia Tesla T4
 * GPU attached to Spot Preemptible VMs running in Americas"); a
 * workstation SKU is not it, and "80GB" must be in it exactly when the
 * accelerator's name says 80gb.  A SKU applies to the regions in its
 * serviceRegions; its price is pricingInfo[0]'s first tiered rate,
 * unitPrice units + nanos / 1e9, in USD.  The first matching SKU of a
 * region wins. */
#ifndef SD_PROVIDER_GCE_GCE_PRICE_H
#define SD_PROVIDER_GCE_GCE_PRICE_H

#include <stddef.h>

/* The Compute Engine service in the Billing Catalog, and the API's root
 * (a test points the provider at a fake's "http://127.0.0.1:PORT/v1"). */
#define SD_GCE_BILLING_SERVICE "6F81-5844-456A"
#define SD_GCE_BILLING_ROOT "https://cloudbilling.googleapis.com/v1"
#define SD_GCE_PRICE_REGIONS 32
/* A run reads at most this many pages before it gives up on a price. */
#define SD_GCE_PRICE_MAX_PAGES 100

/* One SKU's rate: USD an hour (per vCPU, per GiB or per GPU); < 0 when
 * no SKU matched yet. */
struct sd_gce_rate {
	double usd;
	char sku[160];                 /* the SKU's description */
};

struct sd_gce_price_sheet {
	char family[16];               /* "N1": the machine type's first part, upper case */
	char gpu_model[32];            /* "T4"; "" without an accelerator */
	int gpu_80gb;                  /* the accelerator's name says 80gb */
	int nregions;
	char regions[SD_GCE_PRICE_REGIONS][64];
	struct sd_gce_rate core[SD_GCE_PRICE_REGIONS], ram[SD_GCE_PRICE_REGIONS], gpu[SD_GCE_PRICE_REGIONS];
	int pages, skus;               /* read so far */
};

/* A sheet for MACHINE_TYPE ("n1-standard-8") with ACCELERATOR
 * ("nvidia-tesla-t4", or NULL when the machine type bundles its GPUs or has
 * none) in the N distinct REGIONS (at most SD_GCE_PRICE_REGIONS; the rest
 * are dropped). */
void sd_gce_price_init(struct sd_gce_price_sheet *s, const char *machine_type, const char *accelerator,
		       const char *const *regions, int n);

/* The index of REGION in the sheet, -1 when it is not one of its regions. */
int sd_gce_price_region(const struct sd_gce_price_sheet *s, const char *region);

/* Reads one services.skus answer (JSON, LEN bytes): every SKU that prices
 * the sheet's VM in one of its regions is taken.  Copies nextPageToken into
 * NEXT ("" on the last page).  0, or -1 with ERR when the body is not a
 * page of SKUs. */
int sd_gce_price_page(struct sd_gce_price_sheet *s, const char *json, size_t len, char *next, size_t nextlen,
		      char *err, size_t errlen);

/* The URL of the catalog's page TOKEN (NULL or "": the first) under ROOT
 * into OUT, the token escaped as a query value.  -1 when it does not fit. */
int sd_gce_price_page_url(const char *root, const char *token, char *out, size_t outlen);

/* 1 when region K has every rate its VM needs (the GPU's only with an
 * accelerator); 1 when every region has, for K < 0. */
int sd_gce_price_complete(const struct sd_gce_price_sheet *s, int k);

/* The VM's price in region K: VCPUS x core + MEMORY_GIB x RAM + GPUS x
 * GPU, USD an hour; NAN when a rate is missing.  With WHY (WHYLEN bytes)
 * the sum in words ("8 vCPU x $0.006980 + 30 GiB x $0.000936 + 1 T4 x
 * $0.140000"). */
double sd_gce_price_vm(const struct sd_gce_price_sheet *s, int k, int vcpus, double memory_gib, int gpus,
		       char *why, size_t whylen);

/* ---- the cache ----
 * $XDG_CACHE_HOME/spotdeck/gce-prices.json (default ~/.cache/...): one
 * entry per catalog root, machine type, accelerator, count and region,
 * with the VM's price, the sum in words and when the catalog was read.
 * A run takes an entry younger than MAX_AGE_S seconds instead of reading
 * the catalog again.  A missing or unreadable cache is a miss; a cache
 * that cannot be written is left as it was. */
struct sd_gce_price_key {
	const char *billing_root, *machine_type, *accelerator; /* accelerator "" when none */
	int gpus;
	const char *region;
};

/* The cache file's path into OUT; -1 when neither XDG_CACHE_HOME nor HOME
 * is set or it does not fit. */
int sd_gce_price_cache_path(char *out, size_t outlen);

/* 0 with *USD, WHY and *READ_AT (seconds since the epoch) from a fresh
 * entry for KEY; -1 when there is none no older than MAX_AGE_S at NOW. */
int sd_gce_price_cache_get(const char *path, const struct sd_gce_price_key *key, double now, double max_age_s,
			   double *usd, char *why, size_t whylen, double *read_at);

/* Puts (or replaces) KEY's entry; the file is written whole and renamed
 * into place, its directory made when missing.  0, or -1 with ERR. */
int sd_gce_price_cache_put(const char *path, const struct sd_gce_price_key *key, double usd, const char *why,
			   double read_at, char *err, size_t errlen);

#endif
