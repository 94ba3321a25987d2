/* src/app/whatif-run.c - the what-if view's planning on the libuv thread pool:
 * the snapshot of the run taken on the loop thread, sd_whatif_compute on a
 * pool thread, the rows handed to the view model back on the loop thread
 * (see whatif.h). */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/errors.h"
#include "src/app/plan-cli.h"
#include "src/provider/fleet.h"
#include "src/app/whatif.h"

/* ---- on the thread pool ------------------------------------------------------- */

struct plan_req {
	uv_work_t work;
	struct sd_whatif_in in;
	/* in.cat: the provider's catalog at the market's prices now, a
	 * snapshot (the loop thread may change prices while the plan runs);
	 * its offers are copies, everything else is the provider's. */
	struct sd_catalog cat_now;
	struct sd_offer *offers_now;
	struct sd_view_whatif rows[SD_WHATIF_MAX_ROWS];
	int n;
	char note[192];
	char *why;
	struct sd_view_model *vm;     /* NULL once forgotten */
	struct plan_req *next;
};

/* Plans in flight; touched on the loop thread only. */
static struct plan_req *inflight;

static void plan_work(uv_work_t *w)
{
	struct plan_req *r = w->data;
	r->n = sd_whatif_compute(&r->in, r->rows, SD_WHATIF_MAX_ROWS, r->note, sizeof r->note, &r->why);
}

static void plan_done(uv_work_t *w, int status)
{
	struct plan_req *r = w->data;
	for (struct plan_req **pp = &inflight; *pp; pp = &(*pp)->next) {
		if (*pp == r) {
			*pp = r->next;
			break;
		}
	}
	if (r->vm) {
		if (status < 0)
			sd_view_model_set_whatif(r->vm, NULL, 0, "the plan was cancelled", 0);
		else if (r->n < 0)
			sd_view_model_set_whatif(r->vm, NULL, 0, r->why ? r->why : "the plan failed", 0);
		else
			sd_view_model_set_whatif(r->vm, r->rows, r->n, r->note, 0);
	}
	free(r->why);
	free(r->offers_now);
	free(r);
}

int sd_whatif_request(uv_loop_t *loop, struct sd_controller *ctl, struct sd_view_model *vm, char **why)
{
	for (struct plan_req *r = inflight; r; r = r->next)
		if (r->vm == vm)
			return sd_why(why, "plan: already planning; the table fills in when it is done");
	struct sd_fleet *p = sd_controller_fleet(ctl);
	const struct sd_catalog *cat = sd_fleet_catalog(p);
	if (!cat)
		return sd_why(why, "plan: no market to plan on (local workers only)");
	if (!sd_fleet_simulated(p))
		return sd_why(why, "plan: the what-if planner replays the simulated market; provider %s has "
		              "real machines with no revocation model", sd_fleet_provider_name(p));
	const struct sd_job *job = sd_controller_job(ctl);
	struct sd_run_status st;
	sd_controller_status(ctl, &st);
	if (st.total_steps <= 0)
		return sd_why(why, "plan: the run's length is not known yet (no worker has loaded the "
		              "job); try again once it trains");
	if (st.step >= st.total_steps)
		return sd_why(why, "plan: no work left to plan");

	struct plan_req *r = sd_calloc(1, sizeof *r);
	struct sd_whatif_in *in = &r->in;
	if (sd_plan_job_from_train(&in->job, &job->train, st.total_steps, why) < 0) {
		free(r);
		return -1;
	}
	r->cat_now = *cat;
	r->offers_now = sd_malloc((size_t)cat->noffers * sizeof *r->offers_now);
	memcpy(r->offers_now, cat->offers, (size_t)cat->noffers * sizeof *r->offers_now);
	const double *price = sd_fleet_prices(p);
	for (int i = 0; i < cat->noffers; i++)
		r->offers_now[i].usd_per_hour = price[i];
	r->cat_now.offers = r->offers_now;
	in->cat = &r->cat_now;
	in->job.done_images = (double)st.step * job->train.global_batch;
	sd_plan_options_init(&in->opt);
	in->opt.runs = SD_WHATIF_RUNS;
	in->opt.hazard_scale = job->hazard_scale > 0 ? job->hazard_scale : 1;
	in->opt.boot_scale = job->boot_scale >= 0 ? job->boot_scale : 1;
	in->opt.notice_scale = job->notice_scale > 0 ? job->notice_scale : 1;
	/* The market's clock started at hour 0 with the run. */
	in->opt.start_hour = fmod(st.elapsed_s * in->opt.hazard_scale / 3600, 24);
	in->join_seconds = SD_PLAN_JOIN_SECONDS * in->opt.boot_scale;
	in->recovery_seconds = SD_PLAN_RECOVERY_SECONDS * in->opt.boot_scale;
	if (!strcmp(job->train.dataset, "tokens"))
		in->tokens_per_sample = job->train.block_size;
	in->checkpoint_images = job->checkpoint_every > 0 ? (double)job->checkpoint_every * job->train.global_batch : 0;

	struct sd_server_info si[256];
	int ns = sd_fleet_list(p, si, 256);
	double catalog_ips = 0;
	for (int i = 0; i < ns; i++) {
		/* A server under notice is going anyway. */
		if (si[i].gone || si[i].state == SD_SERVER_NOTICE)
			continue;
		if (si[i].offer && in->nlive < SD_WHATIF_MAX_LIVE) {
			in->live_offer[in->nlive] = &r->offers_now[si[i].offer->index];
			snprintf(in->live_id[in->nlive++], sizeof in->live_id[0], "%s", si[i].id);
			if (si[i].state == SD_SERVER_TRAINING)
				catalog_ips += si[i].offer->images_per_sec * si[i].offer->gpu_count;
		} else if (!si[i].offer && in->nlocal < SD_WHATIF_MAX_LIVE) {
			snprintf(in->local_id[in->nlocal++], sizeof in->local_id[0], "%s", si[i].id);
		}
	}
	/* Measured in this run: the job's speed against the catalog's figures
	 * for the servers training now. */
	if (st.images_per_sec > 0 && catalog_ips > 0) {
		in->job.speed_factor = st.images_per_sec / catalog_ips;
		in->speed_measured = true;
	}
	if (sd_plan_data_path("scaling-2019.json", in->scaling_path, sizeof in->scaling_path) < 0)
		in->scaling_path[0] = 0;

	r->vm = vm;
	r->work.data = r;
	int rc = uv_queue_work(loop, &r->work, plan_work, plan_done);
	if (rc < 0) {
		free(r->offers_now);
		free(r);
		return sd_why(why, "plan: %s", uv_strerror(rc));
	}
	r->next = inflight;
	inflight = r;
	sd_view_model_set_whatif(vm, NULL, 0, "planning the remaining work on every cluster of the market...", 1);
	return 0;
}

void sd_whatif_forget(struct sd_view_model *vm)
{
	for (struct plan_req *r = inflight; r; r = r->next)
		if (r->vm == vm)
			r->vm = NULL;
}
