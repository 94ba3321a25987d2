/* src/provider/fleet.h - the run's servers, whatever provider they come from.
 *
 * The fleet owns what every provider shares (provider.h): server ids ("s1",
 * "s2", ... continuing after a resumed run's last), one server-state enum,
 * billing (per second from the request, at the offer's price when acquired,
 * with the offer's billing minimum), journaling every change, and the
 * spotdeck-worker processes it starts on running machines.  Two kinds of
 * server:
 *   - "local": a spotdeck-worker process started at once, no provider, no
 *     price (headless --workers N, `add` without an offer);
 *   - an offer of the provider's catalog: the provider reports the
 *     machine's life (provider.h) and the fleet acts on it.
 *
 * Server states: requested -> provisioning -> booting -> joining -> training
 * -> (notice ->) revoked | released | failed.  Every change is journaled as
 * a "state" event; acquisitions, notices, revocations, releases and
 * stockouts have their own events (spotdeck(1) JOURNAL).  All callbacks run
 * on the loop thread. */
#ifndef SD_PROVIDER_FLEET_H
#define SD_PROVIDER_FLEET_H

#include <cJSON.h>
#include <stddef.h>
#include <uv.h>

#include "src/market/catalog.h"
#include "src/proto/events.h"
#include "src/provider/provider.h"

struct sd_fleet;

enum sd_server_state {
	SD_SERVER_REQUESTED,
	SD_SERVER_PROVISIONING,
	SD_SERVER_BOOTING,
	SD_SERVER_JOINING,
	SD_SERVER_TRAINING,
	SD_SERVER_NOTICE,
	SD_SERVER_REVOKED,
	SD_SERVER_RELEASED,
	SD_SERVER_FAILED,
};
/* "requested", ... "failed": the journal's and the cockpit's names. */
const char *sd_server_state_name(enum sd_server_state st);
/* Revoked, released or failed. */
int sd_server_state_gone(enum sd_server_state st);

/* What the fleet tells its owner about an event, typed: the owner decides
 * on these members, never on the journal fields' strings. */
struct sd_fleet_event {
	enum sd_event_type type;
	const char *server;            /* the server it concerns; NULL: none, or
	                                * not needed for a decision */
	/* SD_EV_STATE: the server's new state. */
	enum sd_server_state state;
	/* SD_EV_SERVER_EXIT: the worker process's exit status (-1 when a
	 * signal ended it) and that signal (0: none). */
	int exit_status, signal;
	/* SD_EV_ERROR: the server's worker (or the command that starts it
	 * there, such as ssh) could not be started at all, and why; the server
	 * fails next.  launch_error is NULL for any other error. */
	const char *launch_error;
};

struct sd_fleet_hooks {
	/* An event happened: journal fields (owned by the hook from then on)
	 * under ev->type, and act on ev (borrowed for the call). */
	void (*journal)(void *ctx, const struct sd_fleet_event *ev, cJSON *fields);
	/* The server's worker must leave at its next step boundary: its server
	 * goes in `seconds`. */
	void (*notice)(void *ctx, const char *server, double seconds);
	/* The last worker process exited (used while shutting down). */
	void (*idle)(void *ctx);
	/* A trace's operator command comes due (a command line). */
	void (*command)(void *ctx, const char *line);
};

struct sd_fleet_config {
	const struct sd_provider_ops *provider;   /* NULL: local servers only */
	struct sd_provider_env env;   /* loop and fleet are filled in by the fleet */
	const char *worker_path;    /* spotdeck-worker */
	const char *connect;        /* "HOST:PORT" this host's workers dial (the
	                             * controller's listening address; copied) */
	const char *advertise;      /* "HOST:PORT" workers on other hosts dial
	                             * (copied); NULL: none was given, and a
	                             * provider that reaches its hosts over ssh
	                             * carries their links (sd_provider_env's
	                             * direct) */
	const char *run_dir;        /* token file and logs/ live there */
	double grace_seconds;       /* SIGTERM -> SIGKILL (default 5) */
	/* A resumed run's history: server ids continue after s<last_server>,
	 * and usd_before (USD the run's servers cost before the resume, from
	 * its journal) counts in sd_fleet_usd_spent.  0 for a new run. */
	int last_server;
	double usd_before;
};

/* Creates the fleet and its provider (cfg->provider->check, then create).
 * Returns 0 or -1 with *why (a bad catalog names its file and field). */
int sd_fleet_create(struct sd_fleet **out, uv_loop_t *loop, const struct sd_fleet_config *cfg,
                    const struct sd_fleet_hooks *hooks, void *ctx, char **why);

/* 0 when a local worker can train with this fleet's servers; -1 with *why
 * when not: a provider that launches workers on other hosts and a
 * controller they dial beyond loopback (a local worker's collectives
 * listen on loopback, which those hosts cannot reach). */
int sd_fleet_local_possible(const struct sd_fleet *f, char **why);

/* Requests a server of offer_id ("local" or a catalog offer id).  On success
 * copies its id into server (len bytes) and returns 0: the request is out,
 * a later stockout or failure arrives as a state change.  -1 with *why: an
 * unknown offer, no provider, "local" where sd_fleet_local_possible says
 * no, or a refusal the provider knew at once (a stockout, journaled as
 * "stockout" with its zone and reason). */
int sd_fleet_acquire(struct sd_fleet *f, const char *offer_id, char *server, size_t len, char **why);

/* Gives a server back: a notice to its worker, SIGTERM after the notice
 * (0 s for local ones), SIGKILL after the grace period; billing stops when
 * the server goes. */
int sd_fleet_release(struct sd_fleet *f, const char *server, const char *reason, char **why);
/* Replaces server `old` with a new one of offer_id: the new one is
 * acquired now (its id into server) and `old` is released once the new
 * one's worker trains, so the cluster never shrinks in between.  Journals
 * "swap"; if the new one goes before it trains, "swap_failed" and `old`
 * stays.  -1 with *why: no such server, or the acquire failed. */
int sd_fleet_swap(struct sd_fleet *f, const char *old, const char *offer_id, char *server, size_t len,
                  char **why);
/* The run is over: every server is released as its worker exits. */
void sd_fleet_release_all(struct sd_fleet *f);

/* Passes the answer about an earlier controller's VMs (WHAT: "adopt",
 * "delete", "keep") to the provider: 0, or -1 with *why (no provider asks,
 * no question open, or a WHAT it does not take). */
int sd_fleet_answer_orphans(struct sd_fleet *f, const char *what, char **why);

/* The controller reports what the worker on a server does. */
enum sd_worker_event { SD_WORKER_CONNECTED, SD_WORKER_TRAINING, SD_WORKER_GONE };
void sd_fleet_worker_event(struct sd_fleet *f, const char *server, enum sd_worker_event e);

/* The worker on server heard its cloud's own preemption notice
 * (src/worker/notice-watch.h): the server goes under notice, its server
 * leaves in `seconds` (-1 unknown), and a "notice" event is journaled with
 * the server's fields, seconds and every field of `fields` (source, event,
 * deadline: borrowed).  The worker leaves by itself; a local server whose
 * worker left under notice is released.  Returns 1 when journaled, 0 when
 * the server is not the fleet's (a worker started by hand), is gone or
 * already under notice: the caller journals it then. */
int sd_fleet_cloud_notice(struct sd_fleet *f, const char *server, double seconds, const cJSON *fields);

/* Whether the id names a server that exists (any state but gone). */
int sd_fleet_has_server(const struct sd_fleet *f, const char *server);
/* Whether the id names a server that failed: its worker has no business
 * training.  remote_only: only a server whose worker ran on another host
 * (the provider's launch; a lost ssh session it could not recover), whose
 * worker may still run; a local worker's exit closes its connection. */
int sd_fleet_server_failed(const struct sd_fleet *f, const char *server, int remote_only);
/* Worker processes still running. */
int sd_fleet_running(const struct sd_fleet *f);
/* Sends sig to every worker process. */
void sd_fleet_signal_all(struct sd_fleet *f, int sig);

/* Money: USD billed so far over all servers, and USD/hour of the live ones,
 * each server at the rate it is billed at (its offer's price when it was
 * acquired).  Local servers have no price: they are left out, and
 * sd_fleet_price_gaps says how many, so that a total is never shown as
 * complete when part of the cluster's cost is unknown. */
double sd_fleet_usd_spent(const struct sd_fleet *f);
double sd_fleet_usd_per_hour(const struct sd_fleet *f);
/* What the two totals above cannot vouch for, counted over every server of
 * the run (ran_*) and over the live ones (live_*): servers without a price
 * (local: cost unknown, not zero) and servers billed at an estimated price
 * (the catalog's price_source says "estimated"). */
struct sd_price_gaps {
	int ran_unpriced, live_unpriced;
	int ran_estimated, live_estimated;
};
void sd_fleet_price_gaps(const struct sd_fleet *f, struct sd_price_gaps *g);

/* A server as the cockpit shows it. */
struct sd_server_info {
	const char *id;                 /* valid until the fleet changes */
	const struct sd_offer *offer;   /* NULL: local (no price, cost unknown) */
	enum sd_server_state state;
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
int sd_fleet_list(const struct sd_fleet *f, struct sd_server_info *out, int max);
/* Machines of offer o held now (for availability), -1 unknown / no provider. */
int sd_fleet_live(const struct sd_fleet *f, const struct sd_offer *o);

/* The provider's name ("sim"), "" without one. */
const char *sd_fleet_provider_name(const struct sd_fleet *f);
/* The provider's catalog, NULL without one.  Read-only: its offers'
 * usd_per_hour are the prices at the start; the prices now (which a trace
 * changes) come from the two functions below. */
const struct sd_catalog *sd_fleet_catalog(const struct sd_fleet *f);
/* 1 when the market is the simulator's (its offers, prices and
 * revocations are modelled, and the what-if planner may replay them); 0
 * for real machines and for local servers only. */
int sd_fleet_simulated(const struct sd_fleet *f);
/* USD/hour now per catalog offer (by sd_offer.index), valid while f lives
 * and changing only on the loop thread; NULL without a catalog.  A new
 * server is billed at its offer's price here when acquired. */
const double *sd_fleet_prices(const struct sd_fleet *f);
/* Seconds since those prices were last confirmed by the market (the
 * provider's price_age; 0 for prices that do not go stale or without a
 * provider): the autopilot holds when it passes its limit. */
double sd_fleet_price_age(const struct sd_fleet *f);
/* The same for one offer of sd_fleet_catalog(f); NAN for any other. */
double sd_fleet_offer_usd_per_hour(const struct sd_fleet *f, const struct sd_offer *o);

/* SIGKILLs the local processes still running and starts the provider's
 * close (provider.h), which may take seconds (ssh cleans its hosts) and
 * never blocks the loop.  DONE(ARG) (NULL: none) is called once the
 * provider is done and every killed process has exited (no child of the
 * fleet is left), perhaps before this returns; run the
 * loop until then, and then until the close callbacks ran, before
 * sd_fleet_free. */
void sd_fleet_close(struct sd_fleet *f, void (*done)(void *arg), void *arg);
void sd_fleet_free(struct sd_fleet *f);

#endif
