/* src/provider/provider.h - acquiring and releasing servers.
 *
 * One provider object serves two kinds of server:
 *   - "local": a spotdeck-worker process started at once, no market, no cost
 *     (headless --workers N, the `add` command without an offer);
 *   - an offer of the simulated market (the `sim` provider, DESIGN.md "Market
 *     and providers"): the request waits for the offer's sampled boot time,
 *     then a local spotdeck-worker starts and joins; the market model
 *     (src/market/market-model.h) decides when the provider revokes it, with a
 *     notice first; the server is billed per second with the offer's minimum.
 * A real cloud (gce) will sit behind the same functions.
 *
 * Server states: requested -> provisioning -> booting -> joining -> training
 * -> (notice ->) revoked | released | failed.  Every change is journaled
 * through hooks->journal as a "state" event; acquisitions, notices,
 * revocations, releases and stockouts have their own events (spotdeck(1)).
 * All callbacks run on the loop thread.
 */
#ifndef SD_PROVIDER_H
#define SD_PROVIDER_H

#include <cJSON.h>
#include <stddef.h>
#include <uv.h>

#include "src/market/catalog.h"
#include "src/proto/events.h"

struct sd_provider;

struct sd_provider_hooks {
	/* Appends an event to the run's journal; takes ownership of ev. */
	void (*journal)(void *ctx, enum sd_event_type type, cJSON *ev);
	/* The server's worker must leave at its next step boundary: its server
	 * goes in `seconds`. */
	void (*notice)(void *ctx, const char *server, double seconds);
	/* The last server process exited (used while shutting down). */
	void (*idle)(void *ctx);
	/* A trace's operator command comes due (a command line). */
	void (*command)(void *ctx, const char *line);
};

struct sd_provider_config {
	const char *catalog_path;   /* NULL: no market (local servers only) */
	double hazard_scale, boot_scale, notice_scale;
	unsigned long long seed;
	int emulate;                /* pace workers to their offer's GPU speed */
	const char *worker_path;    /* spotdeck-worker */
	int port;                   /* controller port on 127.0.0.1 */
	const char *run_dir;        /* token file and logs/ live there */
	double grace_seconds;       /* SIGTERM -> SIGKILL (default 5) */
	/* A market trace (src/market/trace.h) to replay, or NULL.  With a trace the
	 * market model's own revocations are off: the trace alone revokes
	 * servers, closes zones (stockouts), changes prices and issues
	 * commands, at its market times, so a run is deterministic.  A revoke
	 * without "notice" gets the catalog's longest notice x notice_scale. */
	const struct sd_trace *trace;
	/* A resumed run's history: server ids continue after s<last_server>,
	 * and usd_before (USD the run's servers cost before the resume, from
	 * its journal) counts in sd_provider_usd_spent.  0 for a new run. */
	int last_server;
	double usd_before;
};

/* Loads the catalog (when given) and creates the market.  Returns 0 or -1
 * with *why naming the catalog file and field for a bad catalog. */
int sd_provider_create(struct sd_provider **out, uv_loop_t *loop,
                       const struct sd_provider_config *cfg,
                       const struct sd_provider_hooks *hooks, void *ctx, char **why);

/* Requests a server of offer_id ("local" or a catalog offer id).  On success
 * copies its id ("s1", "s2", ...) into server (len bytes) and returns 0.
 * Errors (-1, *why): unknown offer, no catalog, stockout (journaled as
 * "stockout" with GCE's ZONE_RESOURCE_POOL_EXHAUSTED reason). */
int sd_provider_acquire(struct sd_provider *p, const char *offer_id, char *server, size_t len,
                        char **why);

/* Gives a server back: a notice to its worker, SIGTERM after the notice
 * (0 s for local ones), SIGKILL after the grace period; billing stops when
 * the server goes.  replaced_by: journaled for swaps (NULL otherwise). */
int sd_provider_release(struct sd_provider *p, const char *server, const char *reason,
                        char **why);

/* The run is over: every server is released as its worker exits. */
void sd_provider_release_all(struct sd_provider *p);

/* The controller reports what the worker on a server does. */
enum sd_worker_event { SD_WORKER_CONNECTED, SD_WORKER_TRAINING, SD_WORKER_GONE };
void sd_provider_worker_event(struct sd_provider *p, const char *server, enum sd_worker_event e);

/* Whether the id names a server that exists (any state but gone). */
int sd_provider_has_server(const struct sd_provider *p, const char *server);
/* Server processes still running. */
int sd_provider_running(const struct sd_provider *p);
/* Sends sig to every server process. */
void sd_provider_signal_all(struct sd_provider *p, int sig);
/* Money: USD billed so far over all servers, and USD/hour of the live ones,
 * each server at the rate it is billed at (its offer's price when it was
 * acquired).  Local servers have no price: they are left out, and
 * sd_provider_price_gaps says how many, so that a total is never shown as
 * complete when part of the cluster's cost is unknown. */
double sd_provider_usd_spent(const struct sd_provider *p);
double sd_provider_usd_per_hour(const struct sd_provider *p);
/* What the two totals above cannot vouch for, counted over every server of
 * the run (ran_*) and over the live ones (live_*): servers without a price
 * (local: cost unknown, not zero) and servers billed at an estimated price
 * (the catalog's price_source says "estimated"). */
struct sd_price_gaps {
	int ran_unpriced, live_unpriced;
	int ran_estimated, live_estimated;
};
void sd_provider_price_gaps(const struct sd_provider *p, struct sd_price_gaps *g);
/* A server as the cockpit shows it. */
struct sd_server_info {
	const char *id;                 /* valid until the provider changes */
	const struct sd_offer *offer;   /* NULL: local (no price, cost unknown) */
	const char *state;
	double uptime_s;                /* since the request */
	double usd;                     /* billed so far (0 for local: unknown) */
	double usd_per_hour;            /* the rate it is billed at: its offer's price
	                                 * when acquired, which a later price change
	                                 * does not touch; 0 for local */
	int price_estimated;            /* that rate is the catalog's estimate */
	double notice_left_s;           /* > 0 under notice */
	int emulated;
	int gone;                       /* revoked, released or failed */
	double gone_for_s;              /* how long ago it went */
};
/* Fills out[0..max) with every server (oldest first); returns how many. */
int sd_provider_list(const struct sd_provider *p, struct sd_server_info *out, int max);
/* Servers of offer o running now (for availability), -1 without a market. */
int sd_provider_live(const struct sd_provider *p, const struct sd_offer *o);

/* The catalog as loaded, NULL without a market.  Read-only: its offers'
 * usd_per_hour are the prices at the start; the market's prices now (which
 * a trace changes) come from the two functions below. */
const struct sd_catalog *sd_provider_catalog(const struct sd_provider *p);
/* The market's prices now, USD/hour per catalog offer (by sd_offer.index),
 * valid while p lives and changing only on the loop thread; NULL without a
 * market.  A new server is billed at its offer's price here when acquired. */
const double *sd_provider_prices(const struct sd_provider *p);
/* The same for one offer of sd_provider_catalog(p); NAN for any other. */
double sd_provider_offer_usd_per_hour(const struct sd_provider *p, const struct sd_offer *o);

/* SIGKILLs processes still running and closes every handle; run the loop
 * until the close callbacks ran, then sd_provider_free. */
void sd_provider_close(struct sd_provider *p);
void sd_provider_free(struct sd_provider *p);

#endif
