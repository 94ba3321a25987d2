/* src/market/catalog.h - market catalogs: what the simulated market sells and how
 * its transient servers are revoked.
 *
 * A catalog is a JSON file (format in spotdeck-catalog(5)); the shipped ones
 * are data/gce-2019.json (the seeds' 2019 GCE measurements) and
 * data/market-2026.json (today's AWS/GCP/Azure GPU market), both written by
 * tools/build-catalog.py from ../shared/data.  Every number in a catalog comes
 * with a "source" string saying whether it was measured (and from which
 * file), quoted, documented by the provider, fitted or estimated.
 *
 * Units everywhere: time in seconds unless a field name says hours; money in
 * USD; prices in USD per hour per server (the whole VM, all its GPUs);
 * throughput in images per second per GPU for the seeds' workload (ResNet-32,
 * CIFAR-10, batch 128 per worker).
 *
 * Ownership: a struct sd_catalog owns every string and array reachable from
 * it; all of it stays valid, and must be treated as read-only, until
 * sd_catalog_free().  The loader is not thread-safe only in that cJSON's
 * allocator hooks are global; distinct catalogs may be used from distinct
 * threads.
 */
#ifndef SD_MARKET_CATALOG_H
#define SD_MARKET_CATALOG_H

#include <stdbool.h>
#include <stddef.h>

/* Catalog files larger than this are refused (the shipped ones are ~0.1 MB). */
#define SD_CATALOG_MAX_BYTES (16u << 20)
/* Limits the parser enforces, so that a hostile file cannot make the model
 * allocate or compute without bound. */
#define SD_CATALOG_MAX_OFFERS 4096
#define SD_CATALOG_MAX_LIFETIME_HOURS 168  /* empirical model: one week */

enum sd_revocation_model {
	SD_REVOCATION_NONE = 0,   /* on-demand: never revoked */
	SD_REVOCATION_EMPIRICAL,  /* measured lifetime CDF + hour-of-day + cap */
	SD_REVOCATION_MARKOV,     /* calm/storm Markov-modulated Poisson hazard */
};

enum sd_batch_scope {
	SD_BATCH_ZONE,   /* companions come from any transient offer in the zone */
	SD_BATCH_OFFER,  /* companions come from the same offer (type and zone) */
};

enum sd_billing_unit {
	SD_BILL_PER_SECOND,
	SD_BILL_PER_MINUTE,  /* each started minute is billed */
	SD_BILL_PER_HOUR,    /* each started hour is billed */
};

/* Same-zone batch revocations.  When a server's revocation comes due, with
 * `probability` the provider takes others along: a size is drawn from
 * sizes/size_weights (the first server included), and that many - 1 other
 * servers whose own revocation was due within `window_seconds` are revoked
 * within `spread_seconds` of the first.  Pulling forward only revocations that
 * were due anyway keeps each server's lifetime distribution (see
 * market-model.h).  Source of the 2019 numbers: the Feb-2019 ICAC lifetime
 * trace (seeds/transient-deep-learning/data/lifetime/lifetime.csv). */
struct sd_batch {
	double probability;       /* [0, 1] */
	int nsizes;               /* >= 1 */
	int *sizes;               /* each in [2, 1024] */
	double *size_weights;     /* each > 0, relative */
	double window_seconds;    /* model time, >= 0 */
	double spread_seconds;    /* model time, >= 0 ("same minute": 60) */
	enum sd_batch_scope scope;
	const char *source;
};

/* One state of the calm/storm process (reference/market-data.md section 7). */
struct sd_markov_state {
	double per_hour;          /* revocation hazard per server-hour, >= 0 */
	double mean_hours;        /* mean dwell time in this state, > 0 */
	const char *source;
};

struct sd_tod_table;          /* derived by market-model.c; opaque */

struct sd_revocation {
	enum sd_revocation_model model;

	/* SD_REVOCATION_EMPIRICAL.  lifetime_cdf is F(hours) = fraction of
	 * servers revoked within that many hours of launch, with F(0) = 0 implied
	 * and straight lines between points; hours strictly increase and the last
	 * point is at max_lifetime_hours, where the survivors are stopped
	 * ("capped": GCE's 24 h preemptible limit, not a revocation).  The first
	 * point (1 h in the shipped catalog) holds the hour-0 early-revocation
	 * mass. */
	int max_lifetime_hours;   /* [1, SD_CATALOG_MAX_LIFETIME_HOURS] */
	int ncdf;
	double *cdf_hours;        /* ncdf values */
	double *cdf_fraction;     /* ncdf values in [0, 1], non-decreasing */
	int cdf_servers;          /* servers behind the CDF, 0 if not given */
	const char *cdf_source;
	/* Relative revocation hazard per clock hour 0..23, normalised to mean 1
	 * on load; all 1 when the catalog gives none. */
	double hour_weights[24];
	bool has_hour_weights;
	/* The measured revocations per clock hour the weights were fitted to
	 * (for tests and the UI); valid if has_hour_counts. */
	double hour_counts[24];
	bool has_hour_counts;
	const char *hour_source;  /* NULL if neither array is given */

	/* SD_REVOCATION_MARKOV */
	struct sd_markov_state calm, storm;

	/* Either model. */
	bool has_batch;
	struct sd_batch batch;

	/* Derived on load (SD_REVOCATION_EMPIRICAL only); used by market-model.c. */
	struct sd_tod_table *tod;
};

struct sd_offer {
	const char *id;           /* unique in the catalog, e.g. "gce/us-west1-b/v100/spot" */
	const char *provider;     /* "gce", "aws", "azure", ... */
	const char *region;
	const char *zone;
	const char *machine_type; /* NULL if not given */
	const char *gpu;          /* "K80", "V100", "H100", ... */
	int gpu_count;            /* [1, 64] */
	bool transient;           /* spot/preemptible; false: on-demand */
	double usd_per_hour;      /* > 0, whole server */
	const char *price_source;
	double images_per_sec;    /* > 0, per GPU; paces emulated workers */
	const char *speed_source;
	int capacity;             /* servers of this offer obtainable at once */
	const char *capacity_source;
	double notice_seconds;    /* warning before a revocation, [0, 3600] */
	const char *notice_source; /* NULL if not given */
	enum sd_billing_unit billing_unit;
	double billing_minimum_seconds;
	const char *billing_source; /* NULL if not given */
	/* Boot time (request to usable), seconds: nboot quantiles at
	 * probabilities i/(nboot-1), non-decreasing. */
	int nboot;
	double *boot_quantiles;
	const char *boot_source;
	struct sd_revocation revocation;  /* model NONE iff !transient */
	const char *notes;        /* NULL if none */

	int index;                /* position in sd_catalog.offers */
	int zone_index;           /* index into sd_catalog.zones */
};

struct sd_catalog_source {
	const char *name;
	const char *licence;
};

struct sd_arena;

struct sd_catalog {
	const char *file;         /* the name used in error messages */
	const char *name;
	const char *description;  /* NULL if not given */
	const char *period;       /* time_base.period, NULL if not given */
	const char *hour_of_day_clock;
	const char *lifetime_origin;
	int nsources;
	struct sd_catalog_source *sources;
	int noffers;
	struct sd_offer *offers;
	int nzones;
	const char **zones;       /* distinct "provider/zone" keys */
	struct sd_arena *arena;   /* owns everything above */
};

/* Reads and validates the catalog at `path`.  On success stores a new
 * catalog in *out (free with sd_catalog_free) and returns 0.  On failure
 * returns -1 and stores a one-line, caller-freed message in *why (if why is
 * not NULL) that names the file, the JSON path of the field and the problem:
 *   gce-2019.json: offers[3].usd_per_hour: expected a positive number, got "abc"
 * Errors: unreadable or oversized file, invalid JSON (with line:column),
 * missing or unknown keys, wrong types, values out of range, a decreasing
 * CDF, hour weights not 24, duplicate offer ids, and time-of-day weights the
 * lifetime CDF cannot be kept under. */
int sd_catalog_load(struct sd_catalog **out, const char *path, char **why);

/* Same, from `len` bytes at `text` (need not be NUL-terminated);
 * name_for_errors starts every message and becomes catalog->file. */
int sd_catalog_parse(struct sd_catalog **out, const char *text, size_t len,
                     const char *name_for_errors, char **why);

/* Frees a catalog and everything it owns; NULL is fine. */
void sd_catalog_free(struct sd_catalog *c);

/* The offer with this id, or NULL. */
const struct sd_offer *sd_catalog_find(const struct sd_catalog *c, const char *id);

#endif
