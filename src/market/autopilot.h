/* src/market/autopilot.h - the autopilot's policy: given a run's state and its
 * objective, which servers to add, swap or drop, and why.
 *
 * Pure computation: no libuv, no curses, no clock, no files; deterministic
 * for its inputs (and the seed of its Monte Carlo figures).  The same
 * function decides in the live controller and inside the planner's
 * simulated runs (planner.h, policy SD_PLAN_REPLACE_AUTOPILOT), so what
 * `spotdeck plan --policy autopilot` reports is what the live autopilot does.
 *
 * The objective
 * -------------
 * DEADLINE: finish within deadline_seconds of the run's start with
 * P(done by the deadline) >= confidence (0.95), at the lowest expected
 * cost.  BUDGET: spend at most budget_usd in all, finishing as early as
 * that allows.  Limits, both goals: the offers allowed (fnmatch(3) patterns
 * over offer ids, '*' never crossing a '/': "gce/ * /v100/spot" without the
 * spaces), max_servers, and an hourly burn cap max_usd_per_hour (0: none).
 *
 * The estimate behind every choice
 * --------------------------------
 * Each candidate cluster (today's, or today's after one action) is scored by
 * a closed-form estimate of the remaining time T and cost C, cheap enough
 * to evaluate for every candidate at every event of every simulated run:
 *
 *   lambda_o  revocations per second of a server of offer o:
 *             -ln(1 - r_o) / H, r_o = 1 - (1 - r_base)(1 - r_recent), both
 *             from the replacement scorer (replacement.h: the market
 *             model's P(revoked within H = 1 h) and the risk of the zone's
 *             recent revocations), in market seconds (x hazard_scale).
 *   q_o       the wait before a server of o can be had, when its pool
 *             refused a request lately: P(still refusing) (replacement.h's
 *             r_stockout) x the refusal's mean length (the storm's mean
 *             dwell for calm/storm offers, else 1 h of model time); it
 *             adds to the boot and join of a planned server, and its
 *             spread (an exponential length: sd = mean) to sigma_T, so
 *             the autopilot waits for a cheap pool while the deadline
 *             allows and goes elsewhere when it does not.  A refusal is
 *             over once the pool reopens: the market has room there
 *             (available > 0), or a server of the offer was requested
 *             after it (the pool granted a request since).
 *   d_o       what one revocation costs in server-seconds: the
 *             replacement's median boot + join_seconds + recovery_seconds.
 *   a_o       its availability, 1 / (1 + lambda_o d_o).
 *   R         cluster images/s: eff(n) sum_o a_o v_o (1 - 2 recovery
 *             sum_o lambda_o), v_o the server's speed (measured, else the
 *             catalog's images_per_sec x gpu_count x speed_factor), eff(n)
 *             the all-reduce efficiency of n workers (sd_plan_efficiency).
 *   T         solves W = R T - eff sum_(booting o) a_o v_o min(w_o, T):
 *             the work left W at rate R, less what booting servers miss
 *             while they boot and join (w_o: median boot + join - age).
 *   sigma_T   sqrt(sum_o lambda_o T (v_o eff d_o b_o / R)^2 + (0.03 T)^2):
 *             Poisson revocations, each a loss of d_o seconds of o's work,
 *             b_o = 1 + p_batch (servers in o's zone - 1) for the zone's
 *             batches; 3 % for boot times and the rest (an estimate).
 *   P         Phi((deadline - elapsed - T) / sigma_T).
 *   C         spent + sum_o price_o T + what a swap pays twice (the old
 *             server until the new one joins).
 *
 * Decisions (at most `max` actions, each applied to the candidate state
 * before the next is chosen):
 *   1. Every training server is under notice: "checkpoint now".
 *   2. A zone in a same-zone revocation burst (2 or more revocations within
 *      SD_AUTOPILOT_BURST_SECONDS of model time, the seeds' batches):
 *      its non-manual servers are swapped to the best offer outside any
 *      burst, and no action ever adds or swaps into such a zone.
 *   3. DEADLINE, P < confidence: for each offer, the fewest more servers
 *      of it that reach the confidence, and their C; add one server of
 *      the offer with the lowest such C (the next turn of the loop adds
 *      the next, re-chosen).  A server a refusing pool has not granted yet
 *      is not billed (C counts its wait at no cost).  When the cheapest
 *      offer by that lookahead cannot be had now (its pool refuses, or
 *      its zone is in a burst that passes at a known time) and the chosen
 *      offer would still reach the confidence if requested only
 *      every_seconds from now, the cheap one is waited for instead: asked
 *      again (an ADD that may be refused) or, for a burst, a NOTHING with
 *      `waiting` set and the burst's end in its reason.  If no offer
 *      reaches it, the one with the
 *      lowest C among those that shorten T.  No rescue in a rare state:
 *      when a calm/storm pool (the storms are what refuse requests) has
 *      refused the run's requests for longer than all but 1 - confidence
 *      of runs see, by the model's odds (the storm's stationary share x
 *      exp(-refusing / the storm's mean dwell)), the confidence, a share
 *      of runs, is spent on this one's lateness: it adds the server with
 *      the lowest C that shortens T (a refusing pool asked again), at most
 *      2 % dearer than the cluster, instead of dearer offers that would
 *      make it on time.  After an add to a pool that refused lately, the
 *      decision stops: the answer (a grant: the pool reopened) changes
 *      the picture.  BUDGET, C within the budget:
 *      add the offer that shortens T most with C still within 95 % of it.
 *   4. Otherwise look for savings: a drop or a swap that keeps P >=
 *      confidence (DEADLINE) or T within 2 % (BUDGET), taken only when the
 *      saving exceeds the action's own cost once more (hysteresis: a swap
 *      pays for the boot and join it causes, then again as margin), is at
 *      least 3 % of the money still to spend (an estimate: no penny moves a
 *      server, as every move pauses the cluster), and the
 *      server is older than hold_seconds, so a price oscillating around a
 *      threshold cannot make the autopilot flap.  This is also how it
 *      moves back to a cheaper pool it left (a refusal, a burst) once that
 *      pool reopens or the burst has passed: the same swap, under the
 *      same rule, so a pool reopening and closing at every look makes one
 *      swap at most.  BUDGET over its budget:
 *      the action that saves most.
 * Never: more than max_servers (nor more than manual_cap while the
 * operator's last add or drop holds), an hourly burn above the cap, an
 * offer outside allow, an offer with no room (available 0), a zone in a
 * burst, or touching a server the operator added or swapped (manual);
 * any decision on prices older than max_price_age_seconds (a lone NOTHING
 * "holding, the newest price is N min old"); a drop or swap of the last
 * training server while checkpoint_lost_images exceeds
 * SD_AUTOPILOT_MAX_LOST_SHARE of the job (a CHECKPOINT instead, saying
 * so; the move waits for a later look).
 *
 * The figures: with params->runs > 0 the decision's before/after figures
 * (P(done by deadline), expected cost, median time) come from the planner's
 * Monte Carlo over the remaining work (sd_plan_simulate, the current
 * servers ready, new ones booting, lost servers replaced in kind), with the
 * same seed for both, so their difference is the action's, not the
 * sampling's.  With runs = 0 (the planner's own simulated runs, where a
 * nested Monte Carlo would cost runs^2) they are the estimate's.  The
 * choice itself never depends on them, so the live autopilot and the
 * simulated one decide alike.
 *
 * Units: seconds (market time), USD, images.
 */
#ifndef SD_MARKET_AUTOPILOT_H
#define SD_MARKET_AUTOPILOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "src/market/catalog.h"
#include "src/market/planner.h"

/* Two revocations in one zone within this much model time are a burst:
 * the seeds' batches gather within the hour (the catalog's batch window;
 * reference/seeds.md 2.3). */
#define SD_AUTOPILOT_BURST_SECONDS 3600.0
/* Default confidence of a deadline: the P(on time) >= 0.95. */
#define SD_AUTOPILOT_CONFIDENCE 0.95
/* Default re-planning interval and hold of a new server: 10 and 30 minutes
 * (estimates: a few times the 79 s join, so that a swap has time to pay). */
#define SD_AUTOPILOT_EVERY_SECONDS 600.0
#define SD_AUTOPILOT_HOLD_SECONDS 1800.0
/* Prices older than this are stale: the autopilot holds (an estimate: spot
 * prices move at most hourly on the providers of the catalogs). */
#define SD_AUTOPILOT_MAX_PRICE_AGE_SECONDS 3600.0
/* A drop or swap of the last training server may lose at most this share
 * of the job's work (what it trained since the last checkpoint); more,
 * and the autopilot asks for a checkpoint first (an estimate). */
#define SD_AUTOPILOT_MAX_LOST_SHARE 0.02
#define SD_AUTOPILOT_MAX_ALLOW 16
#define SD_AUTOPILOT_MAX_ACTIONS 64

enum sd_autopilot_goal { SD_AUTOPILOT_DEADLINE, SD_AUTOPILOT_BUDGET };

struct sd_autopilot_objective {
	enum sd_autopilot_goal goal;
	double deadline_seconds;   /* DEADLINE: from the run's start, > 0 */
	double budget_usd;         /* BUDGET: the whole run's, > 0 */
	double confidence;         /* DEADLINE: P(done by it) to hold, (0, 1) */
	int nallow;                /* 0: every offer of the catalog */
	char allow[SD_AUTOPILOT_MAX_ALLOW][96];  /* fnmatch patterns over offer ids */
	int max_servers;           /* 1 .. SD_PLAN_MAX_SERVERS (default 8) */
	double max_usd_per_hour;   /* burn cap of the whole cluster, 0: none */
	double every_seconds;      /* re-plan at least this often, > 0 */
	double hold_seconds;       /* no swap or drop of a server younger, >= 0 */
	double max_price_age_seconds;  /* hold (do nothing) when the newest price
	                            * is older, > 0 (default 1 h) */
};

/* Defaults: DEADLINE with no deadline yet (0), confidence 0.95, every
 * offer, 8 servers, no burn cap, every 10 min, hold 30 min, prices up to
 * SD_AUTOPILOT_MAX_PRICE_AGE_SECONDS old. */
void sd_autopilot_objective_init(struct sd_autopilot_objective *o);

/* Reads the job file's "autopilot" object (spotdeck-job(5)):
 *   {"deadline": "6h" | seconds, "budget": USD (exactly one of the two),
 *    "confidence": 0.95, "allow": ["gce/ * /v100/spot", ...],
 *    "max_servers": 8, "max_usd_per_hour": 10, "every": "10m", "hold": "30m",
 *    "max_price_age": "1h"}
 * Unknown keys are errors (a misspelt limit must not be ignored).  Returns
 * 0, or -1 with a one-line, caller-freed message in *why naming `name`
 * (the file) and the field: "job.json: autopilot.max_servers: expected an
 * integer from 1 to 256, got 0". */
int sd_autopilot_objective_parse(struct sd_autopilot_objective *out, const void *cjson_object,
                                 const struct sd_catalog *cat, const char *name, char **why);
/* The same from JSON text (the CLI's --autopilot, the tests). */
int sd_autopilot_objective_parse_text(struct sd_autopilot_objective *out, const char *text,
                                      const struct sd_catalog *cat, const char *name, char **why);

/* Whether the objective allows offer o (its allow patterns). */
bool sd_autopilot_allows(const struct sd_autopilot_objective *obj, const struct sd_offer *o);

/* One server of the run. */
struct sd_autopilot_server {
	int id;                    /* the caller's server number (actions name it) */
	const struct sd_offer *offer;  /* from state->cat */
	double age_seconds;        /* since it was requested, >= 0 */
	bool ready;                /* training; false: booting or joining */
	bool notice;               /* under a revocation notice */
	bool manual;               /* the operator added or swapped it: never touched */
	double images_per_sec;     /* measured, whole server; 0: the catalog's */
};

/* A revocation the run saw, or a request the market refused. */
struct sd_autopilot_revocation {
	const struct sd_offer *offer;  /* the revoked server's offer, or the refused one */
	double age_seconds;        /* how long ago, market seconds, >= 0 */
	bool refused;              /* a refused request (capacity, storm), not a revocation */
};

struct sd_autopilot_state {
	const struct sd_catalog *cat;
	const double *usd_per_hour;    /* per catalog offer, the price now; NULL: the catalog's */
	const int *available;          /* per catalog offer, servers to be had, -1 unknown; NULL: unknown */
	double images_total;           /* the job's work, > 0 */
	double images_done;            /* [0, images_total] */
	double speed_factor;           /* job speed / the catalog's ResNet-32 speed, > 0 */
	double elapsed_seconds;        /* since the run's start: the deadline's clock */
	double spent_usd;              /* billed so far */
	const struct sd_autopilot_server *servers;
	int nservers;
	const struct sd_autopilot_revocation *revocations;
	int nrevocations;
	int manual_cap;                /* -1: none; else no adds above this many servers */
	double hazard_scale;           /* model seconds per market second, > 0 (1) */
	double price_age_seconds;      /* age of the newest price in usd_per_hour; 0: fresh */
	double checkpoint_lost_images; /* work lost if the last training server left now:
	                                * images since the last checkpoint (all done
	                                * work when there is none); 0: none lost (a
	                                * leaving server checkpoints) */
};

/* How it estimates, and its Monte Carlo figures. */
struct sd_autopilot_params {
	const struct sd_plan_scaling *scaling;  /* may be NULL: efficiency 1 */
	char model[32];            /* the scaling series ("resnet32") */
	double join_seconds;       /* SD_PLAN_JOIN_SECONDS */
	double recovery_seconds;   /* SD_PLAN_RECOVERY_SECONDS */
	int runs;                  /* simulated runs of the figures, half before the
	                            * decision and half after; 0: the estimate's */
	uint64_t seed;
};

void sd_autopilot_params_init(struct sd_autopilot_params *p);

enum sd_autopilot_kind {
	SD_AUTOPILOT_NOTHING,
	SD_AUTOPILOT_ADD,          /* request a server of `offer` */
	SD_AUTOPILOT_SWAP,         /* request `offer`; release `server` once it joined */
	SD_AUTOPILOT_DROP,         /* release `server` now */
	SD_AUTOPILOT_CHECKPOINT,   /* write a checkpoint now */
};

struct sd_autopilot_action {
	enum sd_autopilot_kind kind;
	int server;                /* SWAP, DROP: the caller's id; else -1 */
	const struct sd_offer *offer;  /* ADD, SWAP: from state->cat; else NULL */
	/* The figures behind it: before the decision and after it (the whole
	 * decision's with Monte Carlo, this step's with the estimate). */
	double p_before, p_after;  /* P(done by the deadline); NAN for BUDGET */
	double cost_before, cost_after;  /* expected total cost of the run, USD */
	double time_before, time_after;  /* expected remaining time, seconds */
	bool waiting;              /* NOTHING: it waits for a zone's revocation burst
	                            * to pass (a cheaper offer there) while a dearer
	                            * one can still be had at the next look; the
	                            * caller decides again by then */
	char reason[256];          /* "add gce/us-east1-c/p100/spot: the deadline slips;
	                            * P(done by deadline) 0.71 -> 0.96, expected cost
	                            * $31 -> $34" */
};

/* Decides.  Fills out[0..n) with n >= 1 actions (a lone NOTHING says why
 * not) and returns n, at most max (>= 1); or -1 with a one-line message in
 * *why for a bad state (an offer not from the catalog, no work, ...). */
int sd_autopilot_decide(const struct sd_autopilot_objective *obj, const struct sd_autopilot_state *st,
                        const struct sd_autopilot_params *params, struct sd_autopilot_action *out, int max,
                        char **why);

const char *sd_autopilot_kind_name(enum sd_autopilot_kind k);

#endif
