/* src/app/view-model.c - see view-model.h. */
#include "config.h"

#include "src/app/view-model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "src/base/errors.h"
#include "src/market/market-model.h"
#include "src/market/replacement.h"
#include "src/market/planner.h"
#include "src/provider/fleet.h"
#include "src/app/whatif.h"
#include "src/app/plan-cli.h"

#define MAX_SERVERS 256
#define MAX_REVOCATIONS 256
#define MAX_ZONE_EVENTS 64   /* revocations and stockouts the scorer weighs */

struct hist {
	char id[32];
	struct sd_view_series ips;
};

struct sd_view_model {
	struct sd_controller *c;
	struct sd_view v;
	struct sd_view_offer *offers;
	struct sd_view_server servers[MAX_SERVERS];
	struct sd_view_revocation rev[MAX_REVOCATIONS];
	/* Recoveries from a server's loss journaled before its revocation (a
	 * notice makes the worker leave before the kill): a ring of the last 16. */
	struct { char server[32]; double recovery_s; long steps_lost; } early[16];
	int nearly;
	struct hist hist[MAX_SERVERS];
	int nhist;
	double last_hist_t;
	/* The last MAX_ZONE_EVENTS revocations and stockouts (a ring from
	 * zev_head), with their zones' names owned here. */
	struct sd_replacement_event zev[MAX_ZONE_EVENTS];
	char zev_zone[MAX_ZONE_EVENTS][64];
	int nzev, zev_head;
	int *available;            /* per catalog offer, for the scorer */
	/* The catalog's speeds are ResNet-32's; another model's are estimated
	 * from training FLOPs per image, as the planner does (plan-cli.c:
	 * CM-DARE found step time close to proportional to them): the
	 * catalog's img/s times speed_factor, marked '~' when it is not 1. */
	double speed_factor;
	int speed_estimated;
	/* A language model: tokens per sample (block_size), the factor from
	 * the controller's samples (windows) to the view's tokens; 1 for
	 * images. */
	double per_sample;
	struct sd_view_whatif whatif[SD_WHATIF_MAX_ROWS];
};

/* The model in a GPU's name, for a 5-column cell: the first word with a
 * digit after the vendor's words ("NVIDIA H200" -> "H200", "NVIDIA H100 80GB
 * HBM3" -> "H100", "NVIDIA A100-SXM4-80GB" -> "A100", "NVIDIA GeForce RTX
 * 4090" -> "4090"); the first word when none has one. */
static void gpu_short_name(char *out, size_t len, const char *device)
{
	char buf[64];
	snprintf(buf, sizeof buf, "%s", device);
	const char *pick = NULL;
	for (char *save = NULL, *tok = strtok_r(buf, " -", &save); tok;
	     tok = strtok_r(NULL, " -", &save)) {
		if (!pick && strcmp(tok, "NVIDIA") && strcmp(tok, "GeForce") && strcmp(tok, "Tesla"))
			pick = tok;
		if (strpbrk(tok, "0123456789")) {
			pick = tok;
			break;
		}
	}
	snprintf(out, len, "%s", pick ? pick : device);
}

static const char *str(const cJSON *ev, const char *k)
{
	const cJSON *i = cJSON_GetObjectItemCaseSensitive(ev, k);
	return cJSON_IsString(i) ? i->valuestring : "";
}

static double num(const cJSON *ev, const char *k, double dflt)
{
	const cJSON *i = cJSON_GetObjectItemCaseSensitive(ev, k);
	return cJSON_IsNumber(i) ? i->valuedouble : dflt;
}

struct sd_view_model *sd_view_model_new(struct sd_controller *c)
{
	struct sd_view_model *vm = sd_calloc(1, sizeof *vm);
	vm->c = c;
	const struct sd_job *j = sd_controller_job(c);
	struct sd_view *v = &vm->v;
	/* An ONNX model is a path: its file name is what the cockpit shows. */
	const char *model = strrchr(j->train.model, '/');
	model = model ? model + 1 : j->train.model;
	snprintf(v->job, sizeof v->job, "%.40s on %s, global batch %d", model,
	         j->train.dataset, j->train.global_batch);
	snprintf(v->provider, sizeof v->provider, "%s", j->provider);
	v->autopilot_p = -1;   /* no decision yet */
	vm->speed_factor = 1;
	struct sd_plan_job pj;
	char *why = NULL;
	int planned = sd_plan_job_from_train(&pj, &j->train, 1, &why) == 0;
	if (planned && isfinite(pj.speed_factor) && pj.speed_factor > 0 &&
	    fabs(pj.speed_factor - 1) > 1e-9) {
		vm->speed_factor = pj.speed_factor;
		vm->speed_estimated = 1;
	}
	/* A language model whose FLOPs per window are not known: no offer
	 * speed at all rather than ResNet-32's images counted as windows. */
	if (!strcmp(j->train.dataset, "tokens") && !planned)
		vm->speed_factor = NAN;
	free(why);   /* no known size or shape: the catalog's speeds, as labelled */
	const struct sd_catalog *cat = sd_fleet_catalog(sd_controller_fleet(c));
	v->simulated = sd_fleet_simulated(sd_controller_fleet(c));
	if (cat) {
		const char *base = strrchr(cat->file, '/');
		snprintf(v->catalog, sizeof v->catalog, "%s", base ? base + 1 : cat->file);
		vm->offers = sd_calloc((size_t)cat->noffers, sizeof *vm->offers);
		vm->available = sd_calloc((size_t)cat->noffers, sizeof *vm->available);
	}
	v->hazard_scale = j->hazard_scale;
	v->boot_scale = j->boot_scale;
	v->seed = j->market_seed;
	v->test_accuracy = -1;
	v->val_loss = -1;
	v->eta_s = -1;
	/* A language model trains on tokens (dataset tokens, the only one it
	 * takes): rates in tokens, evaluation as validation loss.  The
	 * journal's run_start says the same ("unit": "tokens"). */
	v->unit_tokens = !strcmp(j->train.dataset, "tokens");
	vm->per_sample = v->unit_tokens && j->train.block_size > 0 ? j->train.block_size : 1;
	if (v->unit_tokens)
		vm->speed_estimated = 1;   /* the catalog measured ResNet-32, never a GPT */
	v->servers = vm->servers;
	v->revocations = vm->rev;
	return vm;
}

void sd_view_model_free(struct sd_view_model *vm)
{
	if (!vm)
		return;
	sd_whatif_forget(vm);
	free(vm->offers);
	free(vm->available);
	free(vm);
}

void sd_view_model_set_whatif(struct sd_view_model *vm, const struct sd_view_whatif *rows, int n,
                              const char *note, int busy)
{
	struct sd_view *v = &vm->v;
	if (rows) {
		n = n < SD_WHATIF_MAX_ROWS ? n : SD_WHATIF_MAX_ROWS;
		memcpy(vm->whatif, rows, sizeof *rows * (size_t)n);
		v->whatif = vm->whatif;
		v->nwhatif = n;
	}
	snprintf(v->whatif_note, sizeof v->whatif_note, "%s", note ? note : "");
	v->whatif_busy = busy;
	v->whatif_version++;
	v->version++;
}

/* What the servers billed so far would have cost more on-demand. */
static void saved(struct sd_view *v, const struct sd_catalog *cat, const struct sd_server_info *si, int ns)
{
	bool est = false;
	v->usd_saved = 0;
	for (int i = 0; cat && i < ns; i++)
		v->usd_saved += sd_plan_saved_usd(cat, si[i].offer, si[i].usd, &est);
	v->usd_saved_estimated = est;
}

static int cmp_offer(const void *a, const void *b)
{
	const struct sd_view_offer *x = a, *y = b;
	return (x->usd_per_mimage > y->usd_per_mimage) - (x->usd_per_mimage < y->usd_per_mimage);
}

/* Remembers a revocation or stockout for the scorer (src/market/replacement.h). */
static void zone_event(struct sd_view_model *vm, enum sd_replacement_event_kind kind, double t,
                       const char *zone, const char *offer_id, double seconds)
{
	const struct sd_catalog *cat = sd_fleet_catalog(sd_controller_fleet(vm->c));
	if (!cat || !zone[0])
		return;
	int i = (vm->zev_head + vm->nzev) % MAX_ZONE_EVENTS;
	if (vm->nzev == MAX_ZONE_EVENTS)
		vm->zev_head = (vm->zev_head + 1) % MAX_ZONE_EVENTS;
	else
		vm->nzev++;
	snprintf(vm->zev_zone[i], sizeof vm->zev_zone[i], "%s", zone);
	vm->zev[i] = (struct sd_replacement_event){
		.kind = kind, .t = t, .zone = vm->zev_zone[i],
		.offer = offer_id ? sd_catalog_find(cat, offer_id) : NULL, .seconds = seconds,
	};
}

/* The replacement the scorer suggests now for the server in
 * v->suggestion_for, and why; recomputed on every refresh, so that zones
 * whose events have faded come back and the ages in the reason stay true. */
static void suggest(struct sd_view_model *vm)
{
	struct sd_view *v = &vm->v;
	struct sd_fleet *p = sd_controller_fleet(vm->c);
	const struct sd_catalog *cat = sd_fleet_catalog(p);
	if (!cat || !v->suggestion_for[0] || !v->simulated)
		return;   /* the scorer needs the market model's prices and hazards */
	for (int i = 0; i < cat->noffers; i++) {
		int live = sd_fleet_live(p, &cat->offers[i]);
		vm->available[i] = live < 0 ? -1 : cat->offers[i].capacity - live;
	}
	/* The ring in time order, as the scorer's events. */
	struct sd_replacement_event ev[MAX_ZONE_EVENTS];
	for (int i = 0; i < vm->nzev; i++)
		ev[i] = vm->zev[(vm->zev_head + i) % MAX_ZONE_EVENTS];
	struct sd_replacement_input in = {
		.cat = cat, .usd_per_hour = sd_fleet_prices(p), .available = vm->available,
		.events = ev, .nevents = vm->nzev,
		.now = v->elapsed_s, .hazard_scale = v->hazard_scale,
	};
	struct sd_replacement_choice ch;
	if (sd_replacement_suggest(&in, &ch) < 0) {
		v->suggestion[0] = v->suggestion_why[0] = '\0';
		return;
	}
	snprintf(v->suggestion, sizeof v->suggestion, "%s", cat->offers[ch.offer].id);
	sd_replacement_explain(&in, &ch, v->suggestion_why, sizeof v->suggestion_why);
}

/* Each event type the view follows has one handler here (the table
 * below); ev is the journal object, t its "t". */
typedef void (*event_fn)(struct sd_view_model *vm, const cJSON *ev, double t);

/* A step: the series, and the recovery a step after a loss reports, given
 * to the revocation it follows (or kept until that revocation arrives). */
static void on_step(struct sd_view_model *vm, const cJSON *ev, double t)
{
	struct sd_view *v = &vm->v;
	/* A language model's steps carry tokens_per_sec alone; journals
	 * written before that carry images_per_sec (windows) for it too. */
	double rate = num(ev, "tokens_per_sec", -1);
	if (rate < 0)
		rate = num(ev, "images_per_sec", 0) * vm->per_sample;
	sd_view_series_push(&v->throughput, t, (float)rate);
	sd_view_series_push(&v->loss_hist, t, (float)num(ev, "loss", 0));
	if (num(ev, "recovery_s", -1) < 0)
		return;
	double rs = num(ev, "recovery_s", 0);
	long lost = (long)num(ev, "steps_lost", 0);
	const cJSON *who = cJSON_GetObjectItemCaseSensitive(ev, "lost_servers");
	const cJSON *w;
	cJSON_ArrayForEach(w, who) {
		if (!cJSON_IsString(w))
			continue;
		int i = v->nrevocations - 1;
		while (i >= 0 && (strcmp(vm->rev[i].server, w->valuestring) || vm->rev[i].recovery_s >= 0))
			i--;
		if (i >= 0) {
			vm->rev[i].recovery_s = rs;
			vm->rev[i].steps_lost = lost;
		} else {
			int e = vm->nearly++ % 16;
			snprintf(vm->early[e].server, sizeof vm->early[e].server, "%s", w->valuestring);
			vm->early[e].recovery_s = rs;
			vm->early[e].steps_lost = lost;
		}
	}
}

static void on_epoch(struct sd_view_model *vm, const cJSON *ev, double t)
{
	if (vm->v.unit_tokens)
		sd_view_series_push(&vm->v.acc_hist, t, (float)num(ev, "val_loss", 0));
	else
		sd_view_series_push(&vm->v.acc_hist, t, (float)num(ev, "test_accuracy", 0));
}

static void on_revoked(struct sd_view_model *vm, const cJSON *ev, double t)
{
	struct sd_view *v = &vm->v;
	if (v->nrevocations == MAX_REVOCATIONS) {
		memmove(vm->rev, vm->rev + 1, (MAX_REVOCATIONS - 1) * sizeof vm->rev[0]);
		v->nrevocations--;
	}
	struct sd_view_revocation *r = &vm->rev[v->nrevocations++];
	memset(r, 0, sizeof *r);
	r->t = t;
	snprintf(r->server, sizeof r->server, "%s", str(ev, "server"));
	snprintf(r->zone, sizeof r->zone, "%s", str(ev, "zone"));
	snprintf(r->gpu, sizeof r->gpu, "%s", str(ev, "gpu"));
	r->lifetime_s = num(ev, "lifetime_s", 0);
	r->notice_s = num(ev, "notice_s", 0);
	r->recovery_s = -1;
	r->steps_lost = -1;   /* "-" until training goes on */
	for (int i = 0; i < 16 && i < vm->nearly; i++)
		if (!strcmp(vm->early[i].server, r->server)) {
			r->recovery_s = vm->early[i].recovery_s;
			r->steps_lost = vm->early[i].steps_lost;
			vm->early[i].server[0] = '\0';
			break;
		}
	if (v->nmarks < (int)(sizeof v->revocation_marks / sizeof v->revocation_marks[0]))
		v->revocation_marks[v->nmarks++] = t;
	if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ev, "capped")))
		zone_event(vm, SD_REPLACEMENT_REVOKED, t, r->zone, str(ev, "offer"), -1);
	snprintf(v->suggestion_for, sizeof v->suggestion_for, "%s", r->server);
	if (v->elapsed_s < t)
		v->elapsed_s = t;   /* the scorer's "now" before the next refresh */
	suggest(vm);
	snprintf(v->message, sizeof v->message, "%s revoked (%s %s) after %.0f s",
	         r->server, r->gpu, r->zone, r->lifetime_s);
}

static void on_notice(struct sd_view_model *vm, const cJSON *ev, double t)
{
	(void)t;
	snprintf(vm->v.message, sizeof vm->v.message, "%s: revocation notice, %.1f s left",
	         str(ev, "server"), num(ev, "seconds", 0));
}

static void on_stockout(struct sd_view_model *vm, const cJSON *ev, double t)
{
	snprintf(vm->v.message, sizeof vm->v.message, "%s: stockout in %s (%s)", str(ev, "offer"),
	         str(ev, "zone"), str(ev, "reason"));
	zone_event(vm, SD_REPLACEMENT_STOCKOUT, t, str(ev, "zone"), str(ev, "offer"), -1);
}

/* A trace closed a whole zone for a known time. */
static void on_zone_exhausted(struct sd_view_model *vm, const cJSON *ev, double t)
{
	zone_event(vm, SD_REPLACEMENT_STOCKOUT, t, str(ev, "zone"), NULL, num(ev, "seconds", -1));
}

static void on_worker_lost(struct sd_view_model *vm, const cJSON *ev, double t)
{
	(void)t;
	snprintf(vm->v.message, sizeof vm->v.message, "%s lost: %s", str(ev, "server"), str(ev, "reason"));
}

static void on_job_error(struct sd_view_model *vm, const cJSON *ev, double t)
{
	(void)t;
	snprintf(vm->v.message, sizeof vm->v.message, "%s cannot load the job: %s", str(ev, "server"),
	         str(ev, "error"));
}

static void on_acquired(struct sd_view_model *vm, const cJSON *ev, double t)
{
	struct sd_view *v = &vm->v;
	(void)t;
	snprintf(v->message, sizeof v->message, "%s requested: %s", str(ev, "server"), str(ev, "offer"));
	/* The operator reacted: the suggestion has done its job. */
	v->suggestion[0] = v->suggestion_for[0] = v->suggestion_why[0] = 0;
}

static void on_checkpoint(struct sd_view_model *vm, const cJSON *ev, double t)
{
	(void)t;
	snprintf(vm->v.message, sizeof vm->v.message, "checkpoint at step %.0f (%s)", num(ev, "step", 0),
	         str(ev, "reason"));
}

/* An add or swap the autopilot ran: the replacement of the oldest
 * revocation since its last replacement (revocations before that one are
 * not its to replace), if any; the offer is the command's last word
 * ("add OFFER", "swap sN OFFER"). */
static void mark_replacement(struct sd_view_model *vm, const char *command, int ok)
{
	if (!ok || (strncmp(command, "add ", 4) && strncmp(command, "swap ", 5)))
		return;
	const char *offer = strrchr(command, ' ') + 1;
	int last = vm->v.nrevocations - 1;
	while (last >= 0 && !vm->rev[last].replaced_by[0])
		last--;
	if (last + 1 < vm->v.nrevocations)
		snprintf(vm->rev[last + 1].replaced_by, sizeof vm->rev[last + 1].replaced_by, "%s", offer);
}

/* A command that failed shows its error; an orphans command that went
 * through answered the question. */
static void on_command(struct sd_view_model *vm, const cJSON *ev, double t)
{
	struct sd_view *v = &vm->v;
	(void)t;
	if (!strcmp(str(ev, "by"), "autopilot")) {
		v->autopilot_pending[0] = 0;   /* the announced action ran */
		mark_replacement(vm, str(ev, "command"), cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ev, "ok")));
	}
	if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ev, "ok"))) {
		snprintf(v->message, sizeof v->message, "%s", str(ev, "error"));
	} else if (!strncmp(str(ev, "command"), "orphans ", 8)) {
		v->orphans_question[0] = '\0';
		v->orphans_asked = 0;
	}
}

/* reason, then what it concerns and the system's word, when given */
static void on_error(struct sd_view_model *vm, const cJSON *ev, double t)
{
	(void)t;
	const char *path = str(ev, "path"), *srv = str(ev, "server"), *err = str(ev, "error");
	const char *what = path[0] ? path : srv;
	snprintf(vm->v.message, sizeof vm->v.message, "error: %s%s%s%s%s%s", str(ev, "reason"),
	         what[0] ? " (" : "", what, what[0] ? ")" : "", err[0] ? ": " : "", err);
}

static void on_journal_resumed(struct sd_view_model *vm, const cJSON *ev, double t)
{
	(void)t;
	snprintf(vm->v.message, sizeof vm->v.message, "journal writes again (%.0f events lost): %s",
	         num(ev, "lost", 0), str(ev, "path"));
}

/* An orphan VM: asked about (one event per VM, the question grows until
 * answered), or what became of it. */
static void on_orphan(struct sd_view_model *vm, const cJSON *ev, double t)
{
	struct sd_view *v = &vm->v;
	(void)t;
	if (strcmp(str(ev, "action"), "ask")) {
		snprintf(v->message, sizeof v->message, "orphan %s: %s%s%s", str(ev, "instance"), str(ev, "action"),
		         str(ev, "server")[0] ? " by " : "", str(ev, "server"));
		return;
	}
	size_t n = strlen(v->orphans_question);
	if (v->orphans_asked++ == 0)
		n = (size_t)snprintf(v->orphans_question, sizeof v->orphans_question,
		                     "an earlier controller of this run left VMs running (billed):");
	if (n < sizeof v->orphans_question)
		snprintf(v->orphans_question + n, sizeof v->orphans_question - n, "%s %s in %s",
		         v->orphans_asked > 1 ? "," : "", str(ev, "instance"), str(ev, "zone"));
	snprintf(v->message, sizeof v->message, "orphan %s in %s: the run waits for orphans adopt, delete or keep",
	         str(ev, "instance"), str(ev, "zone"));
}

/* The autopilot's goal, decisions and announced action; the command it ran
 * (or the operator's hold) clears the announcement. */
static void on_autopilot(struct sd_view_model *vm, const cJSON *ev, double t)
{
	struct sd_view *v = &vm->v;
	const char *what = str(ev, "what"), *goal = str(ev, "goal");
	v->autopilot_on = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ev, "on"));
	if (!strcmp(goal, "deadline")) {
		time_t at = (time_t)num(ev, "deadline_at", 0);
		struct tm tm;
		char hm[8] = "?";
		if (at > 0 && localtime_r(&at, &tm))
			strftime(hm, sizeof hm, "%H:%M", &tm);
		snprintf(v->autopilot_goal, sizeof v->autopilot_goal, "deadline %s", hm);
	} else if (!strcmp(goal, "budget")) {
		snprintf(v->autopilot_goal, sizeof v->autopilot_goal, "budget $%.2f", num(ev, "budget_usd", 0));
	}
	if (!strcmp(what, "decided") && cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(ev, "p_after")))
		v->autopilot_p = num(ev, "p_after", -1);
	/* A hold on stale prices is news the status line says (other
	 * "nothing" decisions are not). */
	if (!strcmp(what, "decided") && !strncmp(str(ev, "reason"), "nothing: holding", 16))
		snprintf(v->message, sizeof v->message, "autopilot %.*s", (int)strcspn(str(ev, "reason"), ";"),
		         str(ev, "reason"));
	if (!strcmp(what, "pending")) {
		snprintf(v->autopilot_pending, sizeof v->autopilot_pending, "%s", str(ev, "action"));
		v->autopilot_pending_at = t + num(ev, "in_s", 0);
	} else if (!strcmp(what, "held") || !strcmp(what, "off")) {
		v->autopilot_pending[0] = 0;
		snprintf(v->message, sizeof v->message, "autopilot %s: %s", what, str(ev, "reason"));
	}
}

static void on_done(struct sd_view_model *vm, const cJSON *ev, double t)
{
	(void)t;
	if (vm->v.unit_tokens)
		snprintf(vm->v.message, sizeof vm->v.message, "done: val loss %.4f, perplexity %.3f",
		         num(ev, "val_loss", 0), num(ev, "perplexity", 0));
	else
		snprintf(vm->v.message, sizeof vm->v.message, "done: test accuracy %.4f",
		         num(ev, "test_accuracy", 0));
}

/* The events the view follows; the others only bump its version. */
static const event_fn on_event[SD_EV_COUNT] = {
	[SD_EV_STEP] = on_step,
	[SD_EV_EPOCH] = on_epoch,
	[SD_EV_REVOKED] = on_revoked,
	[SD_EV_NOTICE] = on_notice,
	[SD_EV_STOCKOUT] = on_stockout,
	[SD_EV_ZONE_EXHAUSTED] = on_zone_exhausted,
	[SD_EV_WORKER_LOST] = on_worker_lost,
	[SD_EV_JOB_ERROR] = on_job_error,
	[SD_EV_ACQUIRED] = on_acquired,
	[SD_EV_CHECKPOINT] = on_checkpoint,
	[SD_EV_COMMAND] = on_command,
	[SD_EV_ERROR] = on_error,
	[SD_EV_JOURNAL_RESUMED] = on_journal_resumed,
	[SD_EV_ORPHAN] = on_orphan,
	[SD_EV_DONE] = on_done,
	[SD_EV_AUTOPILOT] = on_autopilot,
};

void sd_view_model_on_event(struct sd_view_model *vm, const struct sd_event *ev)
{
	vm->v.version++;
	if ((unsigned)ev->type < SD_EV_COUNT && on_event[ev->type])
		on_event[ev->type](vm, ev->fields, ev->t);
}

static struct hist *hist_for(struct sd_view_model *vm, const char *id)
{
	for (int i = 0; i < vm->nhist; i++)
		if (!strcmp(vm->hist[i].id, id))
			return &vm->hist[i];
	if (vm->nhist == MAX_SERVERS) {
		memmove(vm->hist, vm->hist + 1, (MAX_SERVERS - 1) * sizeof vm->hist[0]);
		vm->nhist--;
	}
	struct hist *h = &vm->hist[vm->nhist++];
	memset(h, 0, sizeof *h);
	size_t n = strnlen(id, sizeof h->id - 1);
	memcpy(h->id, id, n);
	return h;
}

void sd_view_model_set_clients(struct sd_view_model *vm, int clients)
{
	vm->v.clients = clients;
	vm->v.version++;
}

const struct sd_view *sd_view_model_refresh(struct sd_view_model *vm)
{
	struct sd_view *v = &vm->v;
	struct sd_controller *c = vm->c;
	struct sd_fleet *p = sd_controller_fleet(c);
	struct sd_run_status st;
	sd_controller_status(c, &st);
	v->version++;   /* elapsed time and live figures move on every refresh */
	v->step = st.step;
	v->total_steps = st.total_steps;
	v->epoch = st.epoch;
	v->epochs = st.epochs;
	v->loss = st.loss;
	v->test_accuracy = st.test_accuracy;
	v->val_loss = st.val_loss;
	v->images_per_sec = st.images_per_sec * vm->per_sample;
	v->elapsed_s = st.elapsed_s;
	v->eta_s = st.eta_s;
	v->paused = st.paused;
	v->generation = st.generation;
	v->world_size = st.world_size;
	v->usd_spent = sd_fleet_usd_spent(p);
	v->usd_per_hour = sd_fleet_usd_per_hour(p);
	struct sd_price_gaps gaps;
	sd_fleet_price_gaps(p, &gaps);
	v->spent_unpriced = gaps.ran_unpriced;
	v->rate_unpriced = gaps.live_unpriced;
	v->spent_estimated = gaps.ran_estimated;
	v->rate_estimated = gaps.live_estimated;

	suggest(vm);

	const struct sd_catalog *cat = sd_fleet_catalog(p);
	v->noffers = 0;
	if (cat) {
		v->offers = vm->offers;
		for (int i = 0; i < cat->noffers; i++) {
			const struct sd_offer *o = &cat->offers[i];
			struct sd_view_offer *vo = &vm->offers[v->noffers++];
			memset(vo, 0, sizeof *vo);
			snprintf(vo->id, sizeof vo->id, "%s", o->id);
			snprintf(vo->provider, sizeof vo->provider, "%s", o->provider);
			snprintf(vo->region, sizeof vo->region, "%s", o->region);
			snprintf(vo->zone, sizeof vo->zone, "%s", o->zone);
			snprintf(vo->gpu, sizeof vo->gpu, "%s", o->gpu);
			vo->gpus = o->gpu_count;
			vo->transient = o->transient;
			vo->usd_per_hour = sd_fleet_offer_usd_per_hour(p, o);   /* the market's now */
			vo->images_per_sec = o->images_per_sec * o->gpu_count * vm->speed_factor;
			vo->images_per_sec *= vm->per_sample;   /* a language model's windows: tokens */
			vo->speed_estimated = vm->speed_estimated;
			/* USD per million images (tokens) at the offer's speed. */
			vo->usd_per_mimage = vo->usd_per_hour / (vo->images_per_sec * 3600) * 1e6;
			vo->p_revoked_1h = !o->transient ? 0
			                   : o->revocation.model == SD_REVOCATION_NONE ? NAN   /* real: unknown */
			                   : sd_market_p_revoked_within(o, 3600, 1);
			vo->p_revoked_modelled = o->transient && o->revocation.model != SD_REVOCATION_NONE &&
			                         !sd_fleet_simulated(p);
			int live = sd_fleet_live(p, o);
			vo->available = live < 0 ? -1 : o->capacity - live;
			vo->price_estimated = o->price_source && !strncmp(o->price_source, "estimated", 9);
		}
		qsort(vm->offers, (size_t)v->noffers, sizeof *vm->offers, cmp_offer);
	}

	struct sd_server_info si[MAX_SERVERS];
	struct sd_worker_info wi[MAX_SERVERS];
	int ns = sd_fleet_list(p, si, MAX_SERVERS);
	int nw = sd_controller_workers(c, wi, MAX_SERVERS);
	saved(v, cat, si, ns);
	int sample = v->elapsed_s - vm->last_hist_t >= 1.0;
	if (sample)
		vm->last_hist_t = v->elapsed_s;
	v->nservers = 0;
	/* Live servers first (oldest first), then those gone in the last minute,
	 * so the selection and the picker start on servers one can act on. */
	for (int pass = 0; pass < 2; pass++)
	for (int i = 0; i < ns; i++) {
		if (si[i].gone != pass || (si[i].gone && si[i].gone_for_s > 60))
			continue;
		struct sd_view_server *s = &vm->servers[v->nservers++];
		memset(s, 0, sizeof *s);
		snprintf(s->id, sizeof s->id, "%s", si[i].id);
		snprintf(s->offer, sizeof s->offer, "%s", si[i].offer ? si[i].offer->id : "local");
		snprintf(s->zone, sizeof s->zone, "%s", si[i].offer ? si[i].offer->zone : "localhost");
		snprintf(s->gpu, sizeof s->gpu, "%s", si[i].offer ? si[i].offer->gpu : "CPU");
		s->transient = si[i].offer ? si[i].offer->transient : 0;
		s->local = si[i].offer == NULL;
		/* A paused run holds its workers at a step boundary: say so rather
		 * than "training" (the provider's state for a server in the job). */
		snprintf(s->state, sizeof s->state, "%s",
		         st.paused && si[i].state == SD_SERVER_TRAINING ? "paused" : sd_server_state_name(si[i].state));
		s->rank = -1;
		s->uptime_s = si[i].uptime_s;
		/* The rate billing uses, not the offer's price now (a trace or
		 * the market may have moved it since). */
		s->usd_per_hour = si[i].gone ? 0 : si[i].usd_per_hour;
		s->price_estimated = si[i].price_estimated;
		/* A host without a price: its money so far is unknown, not $0. */
		s->usd_so_far = isnan(si[i].usd_per_hour) ? NAN : si[i].usd;
		s->emulated = si[i].emulated;
		s->notice_left_s = si[i].notice_left_s;
		for (int w = 0; w < nw; w++)
			if (!strcmp(wi[w].server, si[i].id)) {
				s->rank = wi[w].rank;
				s->images_per_sec = wi[w].images_per_sec * vm->per_sample;
				s->compute_ms = wi[w].compute_ms;
				s->comm_ms = wi[w].comm_ms;
				/* A worker on a real GPU: show that GPU, not the offer's. */
				if (wi[w].device[0])
					gpu_short_name(s->gpu, sizeof s->gpu, wi[w].device);
				snprintf(s->precision, sizeof s->precision, "%s", wi[w].precision);
			}
		struct hist *h = hist_for(vm, s->id);
		if (sample)
			sd_view_series_push(&h->ips, v->elapsed_s, (float)s->images_per_sec);
		s->ips = h->ips;
	}
	return v;
}
