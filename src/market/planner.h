/* src/market/planner.h - the what-if planner: the time, cost and risk of training
 * a job on a cluster of market offers, before renting it, by Monte Carlo
 * over the simulated market (src/market/market-model.h).
 *
 * Pure computation: no libuv, no curses, no files except
 * sd_plan_scaling_load(); single-threaded; deterministic for a seed.
 *
 * One simulated run of a configuration
 * ------------------------------------
 * A fresh struct sd_market (the catalog's market model with everything on:
 * lifetimes with the hour-0 mass, the 24 h cap and the time-of-day profile,
 * same-zone batch revocations, boot times, notices, capacity/stockouts) is
 * started at a model clock hour drawn uniformly from the day (runs start at
 * any time; or a fixed hour, sd_plan_options.start_hour).  At time 0 the
 * configuration's servers are requested; each is usable once the market
 * says it booted plus join_seconds (the worker starting and joining
 * training).  Training starts when every initial server that booted is
 * usable, and proceeds at the cluster's throughput (below) until the job's
 * work is done.  Then every server is released.
 *
 * Revocations.  When the market gives a server notice (or revokes it with
 * none), the server stops training (its worker leaves at the notice: a
 * graceful leave loses no work) and, unless the replacement policy is NONE,
 * a replacement is requested at once (SAME offer, CHEAPEST transient offer
 * of that GPU, or the cheapest in ANOTHER zone than the revoking one); a
 * request the market refuses (capacity, storm) is retried every
 * retry_seconds.  Overheads, per parallelism mode:
 *   ALLREDUCE (spotdeck's engine: synchronous data-parallel SGD): every
 *     change of membership (a leave or a join) stops the whole cluster for
 *     recovery_seconds (a new generation forms and the state is broadcast).
 *   PARAMETER_SERVER (the seeds' asynchronous TF setup): workers come and go
 *     without stopping the others; the parameters live on the on-demand PS.
 * If the last worker goes, training stops; with ALLREDUCE the parameters
 * survive only in the last checkpoint (forced at a notice of at least
 * SD_PLAN_CHECKPOINT_SECONDS, when forced_checkpoint is set, as spotdeck's
 * controller does when the last workers are under notice), so the work
 * since then is lost and the next worker to join restores it
 * (recovery_seconds).  With chief = FAILS_RUN (the ICAC monitor) losing the
 * first server stops the run: it counts as failed.  With RESTARTS (CM-DARE's
 * saving hook) losing the chief costs the work since the last checkpoint
 * plus recovery_seconds.  A run that has no worker and nothing coming (no
 * replacement policy) fails, as does one not done within horizon_seconds.
 *
 * Cluster throughput, images per second, from the workers in training
 * (each server contributes gpu_count workers of the offer's images_per_sec
 * times the job's speed_factor):
 *   ALLREDUCE:        sum of worker speeds x efficiency(n), n = workers;
 *                     efficiency(n) = s(n) / (n s(1)) from the scaling
 *                     series of the job's model on K80 (the one series of
 *                     the seeds that the PS does not cap; 0.998 at n = 8),
 *                     or a measured constant (efficiency_measured > 0).
 *   PARAMETER_SERVER: f(offered), offered = sum of worker steps/s; f is the
 *                     measured throughput of the PS setup against offered
 *                     load: every point of every series of the job's model
 *                     with this many PS (K80 and P100 pooled), placed at
 *                     x = n s(1), y = s(n) (points at the same x: their
 *                     mean), joined by straight lines through (0, 0), flat
 *                     after the last point.  With no series
 *                     for that many PS, k PS are k 1-PS curves side by side
 *                     (f_k(x) = k f_1(x / k), an estimate).
 * Scaling series: data/scaling-2019.json (tools/build-scaling.py from
 * CM-DARE's speed_and_cluster_size measurements, Apache-2.0).
 *
 * Time and money.  ACCOUNT_PROVIDER: time runs from the request to done;
 * each server costs from its request to its revocation or release, by the
 * offer's billing rules (sd_bill_usd: GCE per second with a 1-minute
 * minimum); PS servers likewise for the whole run.  ACCOUNT_TRAINING: time
 * runs from the training start to done, and each server costs its seconds
 * inside that window at its hourly price, no minimum: how the ICAC files
 * measured durations (step 0 to step 64,000) and cost (cost.csv / duration
 * is exactly the cluster's hourly price for the on-demand runs;
 * seeds/derived/icac_unit_prices_implied.csv).
 *
 * Units: seconds, USD, images; times are market seconds from the request.
 */
#ifndef SD_MARKET_PLANNER_H
#define SD_MARKET_PLANNER_H

#include <stdbool.h>
#include <stdint.h>

#include "src/market/catalog.h"

/* ---- defaults: the seeds' figures --------------------------------------- */

/* A worker starting and joining training after its server booted: the TF
 * cold start of ResNet-32, 78.74 s (CM-DARE Sigmetrics2020_redraws.ipynb
 * cell 17; seeds/derived/cmdare_overhead_measurements.csv). */
#define SD_PLAN_JOIN_SECONDS 78.74
/* Re-forming training after a membership change: the TF warm restart of
 * ResNet-32, 19.04 s (same file and cell). */
#define SD_PLAN_RECOVERY_SECONDS 19.04
/* Checkpoint every 4,000 steps of 128 images per worker (the ICAC runs'
 * ckpt_frequency, training_job.py; reference/seeds.md 1.3). */
#define SD_PLAN_CHECKPOINT_IMAGES (4000.0 * 128)
/* Writing a ResNet-32 checkpoint (16 MB) to cloud storage: 3.38 s (CM-DARE
 * checkpoint/aggregated.csv; reference/seeds.md 2.8).  A notice shorter
 * than this leaves no time for the forced checkpoint. */
#define SD_PLAN_CHECKPOINT_SECONDS 3.38
/* A parameter-server VM (CPU only, on-demand), USD/h: 0.0000397 $/s in the
 * ICAC data_processor.py (seeds/derived/icac_unit_prices_implied.csv). */
#define SD_PLAN_PS_USD_PER_HOUR 0.1429
/* Retry of a refused request; estimated (GCE gives no retry advice). */
#define SD_PLAN_RETRY_SECONDS 60.0
/* A run not done after this long has failed (30 days). */
#define SD_PLAN_HORIZON_SECONDS (30 * 86400.0)
/* Most servers in one configuration. */
#define SD_PLAN_MAX_SERVERS 256

/* ---- scaling data -------------------------------------------------------- */

struct sd_plan_series {
	char model[32];            /* "resnet32", "resnet15", "shake-shake-small", ... */
	char gpu[16];              /* "K80", "P100" */
	int parameter_servers;     /* 1 or more */
	int batch_per_worker;      /* images per worker step (128) */
	int n;                     /* points: workers 1..n */
	double steps_per_second[16];  /* global steps/s with i + 1 workers */
};

struct sd_plan_scaling {
	int nseries;
	struct sd_plan_series *series;
};

/* Reads a scaling file (format: data/README.md; the keys "format"
 * ("spotdeck-scaling"), "version" (1), "series" [{model, gpu,
 * parameter_servers, batch_per_worker, steps_per_second [1..16 positive
 * numbers]}], anything else ignored).  Returns 0 and a caller-owned table
 * (free with sd_plan_scaling_free), or -1 with a one-line message naming the
 * file and the field in *why. */
int sd_plan_scaling_load(struct sd_plan_scaling *out, const char *path, char **why);
int sd_plan_scaling_parse(struct sd_plan_scaling *out, const char *text, size_t len,
                          const char *name_for_errors, char **why);
void sd_plan_scaling_free(struct sd_plan_scaling *s);

/* ---- a configuration ----------------------------------------------------- */

enum sd_plan_parallel { SD_PLAN_ALLREDUCE, SD_PLAN_PARAMETER_SERVER };
enum sd_plan_replace {
	SD_PLAN_REPLACE_NONE,      /* revoked workers are not replaced (the seeds) */
	SD_PLAN_REPLACE_SAME,      /* the same offer again */
	SD_PLAN_REPLACE_CHEAPEST,  /* the cheapest transient offer of the same GPU */
	SD_PLAN_REPLACE_OTHER_ZONE,/* the cheapest of those outside the revoking zone */
	SD_PLAN_REPLACE_AUTOPILOT, /* the autopilot's policy (autopilot.h) decides */
};
struct sd_autopilot_objective;
enum sd_plan_chief {
	SD_PLAN_CHIEF_NONE,        /* no worker is special (spotdeck) */
	SD_PLAN_CHIEF_FAILS_RUN,   /* losing server 0 ends the run as failed (ICAC monitor) */
	SD_PLAN_CHIEF_RESTARTS,    /* losing it costs the work since the last checkpoint (CM-DARE) */
};
enum sd_plan_placement {
	SD_PLAN_PLACE_SPREAD,      /* server i on offers[i % noffers] */
	SD_PLAN_PLACE_ONE_ZONE,    /* each run puts every server on one of the
	                            * offers, drawn uniformly (the ICAC design:
	                            * each run in one zone) */
};
/* What "time" and "cost" count. */
enum sd_plan_accounting {
	SD_PLAN_ACCOUNT_PROVIDER,  /* time from the request; money by the provider's rules */
	SD_PLAN_ACCOUNT_TRAINING,  /* both over the training window only (the seeds') */
};

struct sd_plan_job {
	char model[32];            /* the scaling series to use ("resnet32") */
	double images;             /* work: images to process (steps x global batch), > 0 */
	double speed_factor;       /* job speed / the catalog's ResNet-32 speed, > 0 (1) */
	int batch_per_worker;      /* PARAMETER_SERVER: images per worker step (128) */
	double done_images;        /* images already done (the cockpit's remaining work), >= 0 */
};

struct sd_plan_config {
	char label[64];            /* "8x K80 spot" (shown; not interpreted) */
	int servers;               /* 1 .. SD_PLAN_MAX_SERVERS */
	int noffers;               /* 1 .. 64 */
	const struct sd_offer *offers[64];   /* from the planner's catalog */
	enum sd_plan_placement placement;
	enum sd_plan_parallel parallel;
	int parameter_servers;     /* PARAMETER_SERVER: >= 1 */
	double ps_usd_per_hour;    /* per PS, >= 0 */
	enum sd_plan_replace replace;
	enum sd_plan_chief chief;
	enum sd_plan_accounting accounting;
	double checkpoint_images;  /* checkpoint interval in images, > 0 */
	bool forced_checkpoint;    /* checkpoint when the last workers get notice */
	double join_seconds;       /* >= 0 */
	double recovery_seconds;   /* >= 0 */
	double retry_seconds;      /* > 0 */
	double efficiency_measured;/* ALLREDUCE: > 0 replaces the scaling series */
	bool initial_ready;        /* the initial servers are up and training at time 0
	                            * (the cockpit's "as it runs now"): no boot, no
	                            * join; their lifetimes still start at 0 */
	int initial_ready_count;   /* with initial_ready: > 0, only the first this many
	                            * servers are; the others boot (0: all of them) */
	/* AUTOPILOT: the objective (the caller's, outliving the simulation),
	 * with opt->deadline_seconds or opt->budget_usd standing in when NULL.
	 * The policy runs at time 0, at each revocation or notice, when a
	 * server joins, and every objective->every_seconds; its actions are
	 * carried out at once (a swap's old server leaves when the new one
	 * joins); a request the market refuses waits for the next decision. */
	const struct sd_autopilot_objective *autopilot;
};

/* Fills in the defaults above for `servers` servers of `offer` (spread,
 * ALLREDUCE, 1 PS at SD_PLAN_PS_USD_PER_HOUR if switched to PS, replace
 * SAME, chief NONE, ACCOUNT_PROVIDER, forced checkpoint on). */
void sd_plan_config_init(struct sd_plan_config *c, const struct sd_offer *offer, int servers);

struct sd_plan_options {
	uint64_t seed;             /* runs of a configuration depend on (seed, run) only */
	int runs;                  /* simulated runs per configuration, 1 .. 10,000,000 */
	double deadline_seconds;   /* > 0: P(done within it) is computed; 0: none */
	double budget_usd;         /* > 0: P(cost within it) is computed; 0: none */
	double start_hour;         /* [0, 24): every run starts at this model clock
	                            * hour; < 0: drawn per run */
	double hazard_scale;       /* market knobs (1 = as measured; see */
	double boot_scale;         /* struct sd_market_knobs): a demo market */
	double notice_scale;       /* runs faster, and so must its plans */
	/* Called about every 1/64 of the runs, may be NULL. */
	void (*progress)(void *ctx, long done, long total);
	void *progress_ctx;
};

void sd_plan_options_init(struct sd_plan_options *o);

/* ---- results ------------------------------------------------------------- */

struct sd_plan_result {
	int runs, completed, failed;
	/* Over completed runs (NAN when none), as the accounting counts. */
	double time_p10, time_p50, time_p90, time_mean;
	/* Training start to done, whatever the accounting. */
	double train_p50, train_mean;
	double cost_p10, cost_p50, cost_p90, cost_mean;
	/* Over all runs. */
	double p_deadline;         /* done within the deadline (failed: not); NAN without one */
	double p_budget;           /* completed at a cost within the budget; NAN without one */
	double revocations_mean;   /* revocations (and notices) per run */
	double p_revoked;          /* runs with at least one revocation */
	double p_revoked_completed;/* completed runs with at least one, among them; NAN if none */
	double p_refused;          /* runs in which the market refused a request
	                            * (capacity or storm; retried, the run went on
	                            * with fewer servers meanwhile) */
	double failed_cost_mean;   /* money spent by failed runs, NAN when none */
	/* Filled by sd_plan_compare (NAN until then). */
	double speedup;            /* one on-demand server's median time / this one's */
	double saving;             /* 1 - mean cost / mean cost of the same servers on-demand */
	bool pareto;               /* on the time/cost frontier (sd_plan_pareto) */
};

/* Simulates opt->runs runs of `cfg` over `cat` with `scaling` (may be NULL
 * for ALLREDUCE with efficiency_measured > 0 or for single-worker configs).
 * Returns 0, or -1 with a one-line message (bad configuration: no offers, an
 * offer not from `cat`, size 0, a missing scaling series, ...). */
int sd_plan_simulate(const struct sd_catalog *cat, const struct sd_plan_scaling *scaling,
                     const struct sd_plan_job *job, const struct sd_plan_config *cfg,
                     const struct sd_plan_options *opt, struct sd_plan_result *out, char **why);

/* Configurations of `base`'s settings for every group of the catalog's
 * offers that `want` accepts (NULL: all), times every size in sizes[]: a
 * group is the offers of one GPU type and count, one provider, transient
 * or not; groups come in catalog order, transient before on-demand for each
 * GPU type, each group's offers in catalog order.  Labels read "8x K80
 * spot" ("2x 8xA100 on-demand aws" when the catalog has several
 * providers).  Stores at most max in out; returns how many, or -1 with a
 * message when there would be more. */
int sd_plan_configs(const struct sd_catalog *cat, const struct sd_plan_config *base, const int *sizes, int nsizes,
                    bool (*want)(const struct sd_offer *o, void *ctx), void *ctx, struct sd_plan_config *out,
                    int max, char **why);

/* The same configuration on on-demand offers (each offer replaced by the
 * catalog's on-demand offer of the same provider, zone, GPU type and count;
 * no replacement needed).  Returns 0, or -1 with a message if one has no
 * on-demand twin. */
int sd_plan_config_on_demand(const struct sd_catalog *cat, const struct sd_plan_config *cfg,
                             struct sd_plan_config *out, char **why);

/* The baseline of speedup: one on-demand server, on the on-demand twins of
 * the configuration's offers with its placement (so one on-demand server
 * of a one-server on-demand configuration is that configuration). */
int sd_plan_config_baseline(const struct sd_catalog *cat, const struct sd_plan_config *cfg,
                            struct sd_plan_config *out, char **why);

/* Fills r->speedup and r->saving from the baseline's and the on-demand
 * twin's results. */
void sd_plan_compare(struct sd_plan_result *r, const struct sd_plan_result *baseline,
                     const struct sd_plan_result *on_demand);

/* Marks r[i].pareto for the results no other one beats on both median time
 * and median cost (one at least as good on both and better on one);
 * results with no completed run are never on it. */
void sd_plan_pareto(struct sd_plan_result *r, int n);

/* What a server of transient offer o that was billed billed_usd would have
 * cost more on the catalog's on-demand offer of the same zone, GPU type and
 * count (both per-second with the same minimum, so the bill scales with the
 * price): billed_usd x (on-demand price / o's price - 1).  0 for on-demand
 * offers or without a twin; *estimated (may be NULL) is set when the twin's
 * price is an estimate.  The cockpit's "saved $X vs on-demand". */
double sd_plan_saved_usd(const struct sd_catalog *cat, const struct sd_offer *o, double billed_usd, bool *estimated);

/* The all-reduce efficiency of `workers` workers of `model`: s(n) / (n
 * s(1)) from its K80 series (as the planner's throughput model, flat after
 * the last point); 1 without scaling data or a series. */
double sd_plan_efficiency(const struct sd_plan_scaling *scaling, const char *model, int workers);

/* Names as the CLI and JSON write them ("autopilot" included). */
const char *sd_plan_replace_name(enum sd_plan_replace r);
int sd_plan_replace_parse(const char *s, enum sd_plan_replace *out);

/* Parses a duration: "90", "90s", "45m", "2h", "1.5h", "1d", "1h30m".
 * Returns 0 and seconds (> 0, finite), or -1 with a message naming `what`. */
int sd_plan_parse_duration(const char *s, const char *what, double *seconds, char **why);

#endif
