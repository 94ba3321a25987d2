/* src/app/whatif.h - the cockpit's what-if view (key w): the planner
 * (src/market/planner.h) run for the current job's remaining work from the
 * current state, over every GPU x size x spot/on-demand cluster of the
 * market and the cluster as it runs now, each row turned into the add and
 * drop commands that would switch the run to it.
 *
 * From the run: the remaining work ((total - done) steps of the global
 * batch); the market's knobs (hazard, boot and notice scales) and its clock
 * hour now; the live servers and their offers; and the cluster's measured
 * images/s, which sets the job's speed against the catalog's ResNet-32
 * figures ("measured in this run"; before the first step the ratio of
 * model FLOPs stands in).  Each row's servers are spread over its offers
 * (server i on offer i mod n), so its commands name concrete offers;
 * joining and recovery take the seeds' times x the market's boot scale.
 * 300 runs per row, seed 1.  The planning runs on the libuv thread pool;
 * the rows reach the view through sd_view_model_set_whatif.
 */
#ifndef SD_APP_WHATIF_H
#define SD_APP_WHATIF_H

#include <stddef.h>
#include <uv.h>

#include "src/market/catalog.h"
#include "src/controller/controller.h"
#include "src/market/planner.h"
#include "src/app/view-model.h"
#include "ui/view.h"

#define SD_WHATIF_MAX_ROWS 128
#define SD_WHATIF_MAX_LIVE 64
#define SD_WHATIF_RUNS 300

/* Everything a plan needs, copied on the loop thread. */
struct sd_whatif_in {
	const struct sd_catalog *cat;     /* the market now (the provider's catalog at its
	                                   * prices now); outlives the plan */
	struct sd_plan_job job;           /* the remaining work */
	struct sd_plan_options opt;
	double join_seconds, recovery_seconds;
	double checkpoint_images;
	int nlive;                        /* live servers with a catalog offer */
	const struct sd_offer *live_offer[SD_WHATIF_MAX_LIVE];
	char live_id[SD_WHATIF_MAX_LIVE][32];
	int nlocal;                       /* live servers without one ("local") */
	char local_id[SD_WHATIF_MAX_LIVE][32];
	char scaling_path[4096];          /* "" none: linear scaling is assumed */
	bool speed_measured;              /* job.speed_factor comes from this run */
	int tokens_per_sample;            /* a language model's block_size (its samples are
	                                   * windows of tokens), else 0 */
};

/* The add/drop command lines that turn the live servers into cfg (whose
 * servers are spread over its offers): live servers on an offer cfg wants
 * are kept, the rest dropped; the missing ones added.  cmds gets one
 * command per line, summary a one-line account ("no change" when none). */
void sd_whatif_commands(const struct sd_whatif_in *in, const struct sd_plan_config *cfg, char *cmds, size_t cmds_len,
                        char *summary, size_t summary_len);

/* Plans every row (blocking; pure but for reading the scaling file).
 * Stores at most max rows, sorted by median cost, with the frontier
 * marked, and a one-line note; returns the row count or -1 with *why. */
int sd_whatif_compute(const struct sd_whatif_in *in, struct sd_view_whatif *rows, int max, char *note,
                      size_t note_len, char **why);

/* Takes the snapshot from the controller and plans it on LOOP's thread
 * pool; the view model shows "planning" at once and the rows when done.
 * Returns 0, or -1 with *why (no market, nothing left to do, a plan
 * already running). */
int sd_whatif_request(uv_loop_t *loop, struct sd_controller *ctl, struct sd_view_model *vm, char **why);

/* The view model is going away: plans in flight deliver nowhere. */
void sd_whatif_forget(struct sd_view_model *vm);

#endif
