/* src/market/market-model.h - the simulated spot market: lifetimes, boot times,
 * revocation risk, billing, and an event-driven core that runs many servers.
 *
 * Units: seconds of market time unless a name says hours; USD.  "Model time"
 * is market time multiplied by hazard_scale: with hazard_scale X everything
 * the catalog describes (lifetimes, the 24 h cap, the day's clock, batch
 * windows, storms) runs X times faster, so a 5-minute demo with X = 288 shows
 * a whole 2019 GCE day.  notice_seconds is a protocol timing and is never
 * scaled; boot times are scaled by boot_scale instead.
 *
 * The lifetime model for SD_REVOCATION_EMPIRICAL offers
 * ----------------------------------------------------
 * The seeds give (a) a lifetime CDF per GPU and region in whole hours
 * (seeds/derived/cmdare_lifetime_cdf_by_region.csv) and (b) revocation counts
 * per clock hour per GPU (seeds/derived/cmdare_revocations_by_hour_of_day.csv).
 * Both must hold at once.  If lifetimes were drawn from the CDF alone, a
 * server launched at a uniformly random time would be revoked at a uniformly
 * random clock hour; if instead the hazard were simply multiplied by a
 * clock-hour weight, the CDF would drift.  So the model lets the lifetime
 * distribution depend on the launch time of day, as little as needed:
 *
 *   P(lifetime in hour bin k | launch at clock time L)
 *       = b_k * p_k * mean of w(clock) over that bin / r(L)
 *
 * where p_k are the CDF's hourly increments (k = cap means "survived to the
 * cap"), w the catalog's 24 hour_of_day_weights, r(L) normalises each launch
 * time, and the b_k are found on load by Sinkhorn scaling so that, averaged
 * over launches spread evenly over the day, bin k gets exactly p_k.  The CDF
 * therefore holds at every whole hour (in expectation), while revocations
 * move towards the clock hours with high w.  Within the chosen hour the
 * density is again proportional to w of the clock hour.  The weights in the
 * shipped catalog were fitted by tools/build-catalog.py so that the
 * resulting clock-hour histogram matches (b); tests/market/test-market-calibration
 * checks both.
 *
 * The lifetime model for SD_REVOCATION_MARKOV offers
 * -------------------------------------------------
 * reference/market-data.md section 7: each pool alternates between calm and
 * storm with exponential dwell times; while in a state every live server is
 * revoked at that state's hourly rate.  Inside one struct sd_market all
 * servers of an offer see the same storm (that is what correlates them);
 * sd_lifetime_sample() draws a private path started from the stationary
 * distribution.  New requests for a transient offer fail during a storm.
 */
#ifndef SD_MARKET_MARKET_MODEL_H
#define SD_MARKET_MARKET_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "src/base/rng.h"
#include "src/market/catalog.h"

/* Launch-time sub-bins per hour used by the time-of-day fit
 * (tools/build-catalog.py uses the same formulation). */
#define SD_TOD_SUB 12
/* A Markov lifetime longer than this much model time is reported as
 * INFINITY (no revocation): about ten years. */
#define SD_MARKOV_HORIZON_HOURS 87600.0

struct sd_lifetime {
	double seconds;   /* launch to revocation or cap, market seconds; INFINITY: never */
	bool capped;      /* true: stopped by the provider's maximum lifetime, not revoked */
};

/* Prepares derived tables for an offer (called by the catalog loader).
 * Returns 0, or -1 with a message (no file or path prefix) in *why when the
 * hour weights make the lifetime CDF impossible to keep. */
int sd_market_prepare_offer(struct sd_offer *o, char **why);
/* Frees what sd_market_prepare_offer() made. */
void sd_market_release_offer(struct sd_offer *o);

/* Draws one lifetime for a server of offer `o` launched at model clock hour
 * launch_hour_of_day in [0, 24) (local time of the catalog's clock), with
 * revocations hazard_scale (> 0) times faster.  Uses three to a few dozen
 * numbers from rng.  On-demand offers give {INFINITY, false}. */
void sd_lifetime_sample(const struct sd_offer *o, double launch_hour_of_day,
                        double hazard_scale, struct sd_rng *rng, struct sd_lifetime *out);

/* Draws a boot time (request to usable) in seconds: the catalog's empirical
 * quantiles, linearly interpolated, times boot_scale (>= 0). */
double sd_boot_sample(const struct sd_offer *o, double boot_scale, struct sd_rng *rng);

/* P(revoked within `seconds` of launch) for a launch at a random time of day,
 * with hazard_scale as above; capped survivors do not count as revoked.
 * Empirical: the catalog's CDF, interpolated.  Markov: exact, from the
 * stationary start.  0 for on-demand offers.  For the UI's "P(revoked
 * within 1 h)". */
double sd_market_p_revoked_within(const struct sd_offer *o, double seconds, double hazard_scale);

/* Same for a launch at a given model clock hour (empirical offers depend on
 * it; others do not). */
double sd_market_p_revoked_within_at(const struct sd_offer *o, double launch_hour_of_day,
                                     double seconds, double hazard_scale);

/* Money for holding a server of offer `o` for `seconds` (>= 0):
 * usd_per_hour * max(billed seconds, minimum) / 3600, where billed seconds
 * round up to the billing unit (GCE, AWS: per second, 60 s minimum). */
double sd_bill_usd(const struct sd_offer *o, double seconds);

/* ------------------------------------------------------------------------
 * The market core: a deterministic, event-driven simulation of N servers.
 * Single-threaded; the caller drives it by advancing market time, typically
 * from a libuv timer set to sd_market_next_event_time().
 * ---------------------------------------------------------------------- */

struct sd_market;
typedef uint64_t sd_server_id;  /* never 0 */

struct sd_market_knobs {
	uint64_t seed;
	double hazard_scale;       /* > 0; 1 = as measured */
	double boot_scale;         /* >= 0; 1 = as measured */
	double notice_scale;       /* > 0; notice = offer's notice_seconds x this (demos
	                            * shrink it with the hazard, so a notice still fits
	                            * inside a shortened lifetime) */
	double start_hour_of_day;  /* model clock hour at market time 0, [0, 24) */
	bool batches;              /* same-zone batch revocations (default on) */
	bool storms;               /* calm/storm switching for Markov offers (default on;
	                            * off: calm forever) */
	bool enforce_capacity;     /* refuse launches beyond capacity or in a storm (default on) */
};

/* Fills in the defaults: seed 1, scales 1, hour 0, everything on. */
void sd_market_knobs_init(struct sd_market_knobs *k);

enum sd_market_event_kind {
	SD_MARKET_BOOTED,        /* the server finished booting */
	SD_MARKET_NOTICE,        /* it will go at ends_at (revoked, or capped if `capped`) */
	SD_MARKET_REVOKED,       /* the provider took it; the server is gone */
	SD_MARKET_CAPPED,        /* stopped at the maximum lifetime; the server is gone */
	SD_MARKET_STORM_BEGIN,   /* offer's pool entered a storm (server = 0) */
	SD_MARKET_STORM_END,     /* and left it */
};

struct sd_market_event {
	enum sd_market_event_kind kind;
	double time;              /* market seconds; events arrive in time order */
	sd_server_id server;      /* 0 for storm events */
	const struct sd_offer *offer;
	double launched_at;       /* server events */
	double ends_at;           /* NOTICE, REVOKED, CAPPED: when it goes */
	bool capped;              /* NOTICE: the coming end is the lifetime cap */
	uint64_t batch;           /* 0: alone; equal values: one batch revocation */
	int batch_size;           /* servers in that batch (1 if alone) */
};

/* Called for each event; may call sd_market_launch() (the new server starts
 * at ev->time) and sd_market_release(). */
typedef void (*sd_market_event_cb)(void *ctx, const struct sd_market_event *ev);

/* Creates a market over the offers of `cat` (which must outlive it), at
 * market time 0.  Returns 0, or -1 with a message for bad knobs. */
int sd_market_new(struct sd_market **out, const struct sd_catalog *cat,
                  const struct sd_market_knobs *knobs, char **why);
void sd_market_free(struct sd_market *m);

/* Error codes of sd_market_launch(). */
#define SD_MARKET_EINVAL (-1)  /* offer not from this market's catalog */
#define SD_MARKET_EFULL  (-2)  /* capacity reached */
#define SD_MARKET_ESTORM (-3)  /* the pool is in a storm; spot requests fail */

/* Launches a server of `o` at the current market time: samples its boot
 * time and lifetime and schedules its events.  Returns 0 and the id in *id,
 * or a negative SD_MARKET_E* code with a message in *why. */
int sd_market_launch(struct sd_market *m, const struct sd_offer *o, sd_server_id *id, char **why);

/* Releases a live server (the operator dropped it); its pending events are
 * cancelled.  Returns 0, or -1 if `id` is not live. */
int sd_market_release(struct sd_market *m, sd_server_id id);

/* Runs every event due at or before now_seconds (>= the current time), in
 * time order (ties: in the order they were scheduled), calling cb for each;
 * then sets the market time to now_seconds.  Returns the number of events. */
long sd_market_advance(struct sd_market *m, double now_seconds, sd_market_event_cb cb, void *ctx);

double sd_market_now(const struct sd_market *m);
/* Time of the next pending event, INFINITY if none. */
double sd_market_next_event_time(const struct sd_market *m);
/* Live servers of an offer, and in total. */
int sd_market_live(const struct sd_market *m, const struct sd_offer *o);
int sd_market_live_total(const struct sd_market *m);
/* Whether the offer's pool is in a storm now (false for non-Markov offers). */
bool sd_market_in_storm(const struct sd_market *m, const struct sd_offer *o);

#endif
