/* src/controller/autopilot.c - the live autopilot: the run's state handed to
 * the policy (src/market/autopilot.h, the same function the planner's
 * simulated runs call), its decisions journaled with their reasons and
 * figures, and its actions announced, then carried out through the command
 * table like the operator's (command events with "by": "autopilot").
 *
 * One action at a time: the first of a decision is announced
 * CTL_AP_ANNOUNCE_S seconds before it runs (the cockpit's status line
 * shows it; `autopilot hold` or the cockpit's A cancels it), and after it
 * ran the policy decides again on the new picture, since the decision's
 * later actions were planned on the first one.  The policy runs when the
 * picture changes (a revocation, a notice, a stockout, a server that starts
 * training or goes), and at least every `every` seconds of run time.
 *
 * What it respects: a server the operator added or swapped in is never
 * swapped or dropped by it (the policy's `manual`), and after the
 * operator's drop it never adds above the servers left then (the policy's
 * manual_cap), so no manual action is undone.  A policy error or no market
 * to decide on switches it off with a journaled reason; the run goes on. */
#include "config.h"

#include "src/controller/internal.h"

static double now_s(const struct sd_controller *c)
{
	return ctl_run_time_s(c);
}

static const struct sd_catalog *ap_catalog(const struct sd_controller *c)
{
	return c->fleet ? sd_fleet_catalog(c->fleet) : NULL;
}

/* Journals an autopilot event of kind `what` with the objective's goal. */
static cJSON *ap_event(struct sd_controller *c, const char *what)
{
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "what", what);
	cJSON_AddBoolToObject(ev, "on", c->ap.on);
	if (c->ap.have_obj) {
		const struct sd_autopilot_objective *o = &c->ap.obj;
		bool deadline = o->goal == SD_AUTOPILOT_DEADLINE;
		cJSON_AddStringToObject(ev, "goal", deadline ? "deadline" : "budget");
		if (deadline) {
			cJSON_AddNumberToObject(ev, "deadline_s", o->deadline_seconds);
			/* The wall clock of the deadline, for a cockpit's HH:MM. */
			cJSON_AddNumberToObject(ev, "deadline_at", c->t0 + o->deadline_seconds);
		} else {
			cJSON_AddNumberToObject(ev, "budget_usd", o->budget_usd);
		}
	}
	return ev;
}

/* Switches it off, journaling why; the run goes on. */
static void ap_off(struct sd_controller *c, const char *reason)
{
	c->ap.epoch++;
	c->ap.on = 0;
	c->ap.pending = 0;
	cJSON *ev = ap_event(c, "off");
	cJSON_AddStringToObject(ev, "reason", reason);
	ctl_journal(c, SD_EV_AUTOPILOT, ev);
}

static void ap_on(struct sd_controller *c)
{
	c->ap.epoch++;
	c->ap.on = 1;
	c->ap.replan = 1;
	c->ap.held_line[0] = 0;
	ctl_journal(c, SD_EV_AUTOPILOT, ap_event(c, "on"));
}

int ctl_ap_init(struct sd_controller *c, char **why)
{
	struct ctl_autopilot *ap = &c->ap;
	ap->manual_cap = -1;
	ap->last_decide = -1;
	ap->p_on_time = -1;
	sd_autopilot_objective_init(&ap->obj);
	if (!c->job.autopilot[0])
		return 0;
	const char *file = c->opts.job_file ? c->opts.job_file : "job";
	const struct sd_catalog *cat = ap_catalog(c);
	if (!cat)
		return sd_why(why, "%s: autopilot: the provider has no market catalog to decide on", file);
	if (sd_autopilot_objective_parse_text(&ap->obj, c->job.autopilot, cat, file, why) < 0)
		return -1;
	ap->have_obj = 1;
	ap->on = 1;
	return 0;
}

/* The number in a server id "s12", or -1 (a local worker's id is too). */
static int server_number(const char *id)
{
	if (id[0] != 's' || !id[1])
		return -1;
	char *end;
	long n = strtol(id + 1, &end, 10);
	return *end || n < 0 || n > 1000000 ? -1 : (int)n;
}

static int is_manual(const struct ctl_autopilot *ap, const char *id)
{
	for (int i = 0; i < ap->nmanual; i++)
		if (!strcmp(ap->manual[i], id))
			return 1;
	return 0;
}

/* The measured images/s of the worker on server id, 0 when none yet. */
static double measured_ips(const struct sd_controller *c, const char *id)
{
	for (const struct conn *k = c->conns; k; k = k->next)
		if (k->authed && !strcmp(k->server_id, id) && k->ips > 0)
			return k->ips;
	return 0;
}

/* The policy's state from what the controller knows.  Returns the number
 * of servers put in sv (room for max). */
static int build_servers(struct sd_controller *c, struct sd_autopilot_server *sv, int max, double *speed_factor)
{
	struct sd_server_info si[256];
	int n = sd_fleet_list(c->fleet, si, 256), ns = 0;
	double ratio_sum = 0;
	int ratio_n = 0;
	for (int i = 0; i < n && i < 256 && ns < max; i++) {
		const struct sd_server_info *s = &si[i];
		int id = server_number(s->id);
		if (s->gone || !s->offer || id < 0)
			continue;   /* local workers have no offer: not the market's */
		double ips = s->state == SD_SERVER_TRAINING ? measured_ips(c, s->id) : 0;
		sv[ns++] = (struct sd_autopilot_server){ .id = id, .offer = s->offer, .age_seconds = fmax(0, s->uptime_s),
		                                         .ready = s->state == SD_SERVER_TRAINING,
		                                         .notice = s->state == SD_SERVER_NOTICE,
		                                         .manual = is_manual(&c->ap, s->id), .images_per_sec = ips };
		double cat_ips = s->offer->images_per_sec * (s->offer->gpu_count > 0 ? s->offer->gpu_count : 1);
		if (ips > 0 && cat_ips > 0) {
			ratio_sum += ips / cat_ips;
			ratio_n++;
		}
	}
	/* The job's speed against the catalog's ResNet-32 figures, as measured
	 * on the servers that train (1 until one has). */
	*speed_factor = ratio_n ? ratio_sum / ratio_n : 1;
	return ns;
}

/* The command line that carries out action a. */
static void action_line(const struct sd_autopilot_action *a, char *out, size_t len)
{
	switch (a->kind) {
	case SD_AUTOPILOT_ADD: snprintf(out, len, "add %s", a->offer->id); break;
	case SD_AUTOPILOT_SWAP: snprintf(out, len, "swap s%d %s", a->server, a->offer->id); break;
	case SD_AUTOPILOT_DROP: snprintf(out, len, "drop s%d", a->server); break;
	case SD_AUTOPILOT_CHECKPOINT: snprintf(out, len, "checkpoint"); break;
	case SD_AUTOPILOT_NOTHING: snprintf(out, len, "nothing"); break;
	}
}

static void add_figures(cJSON *ev, const struct sd_autopilot_action *a)
{
	cJSON_AddStringToObject(ev, "reason", a->reason);
	if (isfinite(a->p_before)) {
		cJSON_AddNumberToObject(ev, "p_before", a->p_before);
		cJSON_AddNumberToObject(ev, "p_after", a->p_after);
	}
	cJSON_AddNumberToObject(ev, "cost_before", a->cost_before);
	cJSON_AddNumberToObject(ev, "cost_after", a->cost_after);
	cJSON_AddNumberToObject(ev, "time_before", a->time_before);
	cJSON_AddNumberToObject(ev, "time_after", a->time_after);
}

/* One decision handed to the thread pool: the policy's Monte Carlo
 * figures take milliseconds to seconds (more at a storm's hazard), and
 * nothing on the loop may block.  Everything the policy reads is copied
 * in; the catalog is the fleet's and lives as long as the controller. */
struct ap_work {
	uv_work_t req;
	struct sd_controller *c;
	struct sd_autopilot_objective obj;
	struct sd_autopilot_state st;
	struct sd_autopilot_params pp;
	struct sd_autopilot_server sv[SD_PLAN_MAX_SERVERS];
	struct sd_autopilot_revocation rv[CTL_AP_REVS_MAX];
	double *prices;
	struct sd_autopilot_action act[8];
	int na;
	char *why;
	long epoch;     /* ap->epoch when it was asked */
};

/* Fills the policy's state from what the controller knows now. */
static void ap_fill(struct sd_controller *c, struct ap_work *w)
{
	struct ctl_autopilot *ap = &c->ap;
	const struct sd_catalog *cat = ap_catalog(c);
	double speed_factor;
	int ns = build_servers(c, w->sv, SD_PLAN_MAX_SERVERS, &speed_factor);
	double now = now_s(c);
	for (int i = 0; i < ap->nrevs; i++)
		w->rv[i] = (struct sd_autopilot_revocation){ ap->revs[i].o, fmax(0, now - ap->revs[i].t),
		                                             ap->revs[i].refused };
	w->prices = sd_calloc((size_t)cat->noffers, sizeof *w->prices);
	memcpy(w->prices, sd_fleet_prices(c->fleet), sizeof *w->prices * (size_t)cat->noffers);
	double batch = c->job.train.global_batch;
	w->st = (struct sd_autopilot_state){
		.cat = cat, .usd_per_hour = w->prices,
		.images_total = batch * (double)c->total_steps,
		.images_done = fmin(batch * (double)c->total_steps, batch * (double)c->step),
		.speed_factor = speed_factor, .elapsed_seconds = now, .spent_usd = sd_fleet_usd_spent(c->fleet),
		.servers = w->sv, .nservers = ns, .revocations = w->rv, .nrevocations = ap->nrevs,
		.manual_cap = ap->manual_cap, .hazard_scale = c->job.hazard_scale > 0 ? c->job.hazard_scale : 1,
	};
	/* What the last training server would take with it: the steps since
	 * the last checkpoint, or every step without one. */
	long since = c->latest_ckpt[0] ? c->step - c->latest_ckpt_step : c->step;
	w->st.checkpoint_lost_images = batch * (double)(since > 0 ? since : 0);
	w->st.price_age_seconds = sd_fleet_price_age(c->fleet);
	w->obj = ap->obj;
	sd_autopilot_params_init(&w->pp);
	/* The sim provider's boot knob shortens boots; a worker's join on the
	 * controller's host is its boot's share too (an estimate: the catalog's
	 * join is a cloud VM's). */
	double boot_scale = c->job.boot_scale > 0 ? c->job.boot_scale : 1;
	w->pp.join_seconds = SD_PLAN_JOIN_SECONDS * fmin(1, boot_scale);
	w->pp.runs = 100;   /* the figures' Monte Carlo, 50 runs before and 50 after */
	w->pp.seed = c->job.market_seed + (uint64_t)c->step;
}

static void ap_work_run(uv_work_t *req)
{
	struct ap_work *w = req->data;
	w->na = sd_autopilot_decide(&w->obj, &w->st, &w->pp, w->act, 8, &w->why);
}

static void ap_decided(struct sd_controller *c, struct ap_work *w);

static void ap_work_done(uv_work_t *req, int status)
{
	struct ap_work *w = req->data;
	struct sd_controller *c = w->c;
	c->ap.deciding = 0;
	if (status == 0 && c->ap.on && !c->exiting && !c->closing)
		ap_decided(c, w);
	free(w->prices);
	free(w->why);
	free(w);
}

/* One decision: the policy on the thread pool, then ap_decided. */
static void ap_decide(struct sd_controller *c)
{
	struct ctl_autopilot *ap = &c->ap;
	ap->replan = 0;
	ap->last_decide = now_s(c);
	if (!ap_catalog(c) || !sd_fleet_prices(c->fleet)) {
		ap_off(c, "no market to decide on: the provider has no catalog or prices");
		return;
	}
	struct ap_work *w = sd_calloc(1, sizeof *w);
	w->c = c;
	w->req.data = w;
	ap_fill(c, w);
	w->epoch = ap->epoch;
	ap->deciding = 1;
	if (uv_queue_work(c->loop, &w->req, ap_work_run, ap_work_done) < 0) {
		ap_work_run(&w->req);
		ap_work_done(&w->req, 0);
	}
}

/* The decision came back: journaled, and its first action announced. */
static void ap_decided(struct sd_controller *c, struct ap_work *w)
{
	struct ctl_autopilot *ap = &c->ap;
	double now = now_s(c);
	if (w->na < 0) {
		char reason[400];
		snprintf(reason, sizeof reason, "policy error: %s", w->why ? w->why : "?");
		ap_off(c, reason);
		return;
	}
	/* The operator acted, or changed the goal, while it decided: the next
	 * tick decides again on the new picture. */
	if (w->epoch != ap->epoch)
		return;
	const struct sd_autopilot_action *a = &w->act[0];
	int na = w->na;
	ap->p_on_time = isfinite(a->p_after) ? a->p_after : -1;
	char line[160];
	action_line(a, line, sizeof line);
	bool held = ap->held_line[0] && !strcmp(line, ap->held_line) && now < ap->held_until;
	if (a->kind == SD_AUTOPILOT_NOTHING || held) {
		/* The same "nothing" at every tick says nothing new. */
		char head[192];
		snprintf(head, sizeof head, "%.*s", (int)strcspn(a->reason, ";"), a->reason);
		if (held)
			snprintf(head, sizeof head, "held: %s", line);
		if (!strcmp(head, ap->last_nothing))
			return;
		snprintf(ap->last_nothing, sizeof ap->last_nothing, "%s", head);
		cJSON *ev = ap_event(c, "decided");
		cJSON_AddStringToObject(ev, "action", held ? "nothing" : line);
		add_figures(ev, a);
		if (held)
			cJSON_AddStringToObject(ev, "held", line);
		ctl_journal(c, SD_EV_AUTOPILOT, ev);
		return;
	}
	ap->last_nothing[0] = 0;
	cJSON *ev = ap_event(c, "decided");
	cJSON_AddStringToObject(ev, "action", line);
	cJSON_AddNumberToObject(ev, "actions", na);
	add_figures(ev, a);
	ctl_journal(c, SD_EV_AUTOPILOT, ev);
	ap->pending = 1;
	snprintf(ap->pending_line, sizeof ap->pending_line, "%s", line);
	snprintf(ap->pending_reason, sizeof ap->pending_reason, "%s", a->reason);
	ap->pending_at = now + CTL_AP_ANNOUNCE_S;
	ev = ap_event(c, "pending");
	cJSON_AddStringToObject(ev, "action", line);
	cJSON_AddNumberToObject(ev, "in_s", CTL_AP_ANNOUNCE_S);
	cJSON_AddStringToObject(ev, "reason", a->reason);
	ctl_journal(c, SD_EV_AUTOPILOT, ev);
}

/* Another actor changed the cluster: the announced action was planned on
 * the picture before, so it is dropped and decided again. */
static void cancel_pending(struct sd_controller *c, const char *why)
{
	c->ap.epoch++;
	if (!c->ap.pending)
		return;
	c->ap.pending = 0;
	cJSON *ev = ap_event(c, "held");
	cJSON_AddStringToObject(ev, "action", c->ap.pending_line);
	cJSON_AddStringToObject(ev, "reason", why);
	ctl_journal(c, SD_EV_AUTOPILOT, ev);
}

/* The server the announced action names into out (drop sN, swap sN
 * OFFER); false for an action that names none, or none announced. */
static bool pending_server(const struct ctl_autopilot *ap, char *out, size_t len)
{
	if (!ap->pending || (strncmp(ap->pending_line, "drop ", 5) && strncmp(ap->pending_line, "swap ", 5)))
		return false;
	const char *arg = ap->pending_line + 5;
	snprintf(out, len, "%.*s", (int)strcspn(arg, " "), arg);
	return true;
}

/* Whether the announced action names `server`. */
static bool pending_names(const struct ctl_autopilot *ap, const char *server)
{
	char id[64];
	return server && pending_server(ap, id, sizeof id) && !strcmp(id, server);
}

/* The announced action's time came: run it as the operator's would run. */
static void ap_carry_out(struct sd_controller *c)
{
	struct ctl_autopilot *ap = &c->ap;
	/* The last look: a move naming a server that is gone by now, whatever
	 * way it went, is withdrawn. */
	char id[64];
	if (pending_server(ap, id, sizeof id) && !sd_fleet_has_server(c->fleet, id)) {
		char reason[128];
		snprintf(reason, sizeof reason, "%s left before the announced action ran", id);
		cancel_pending(c, reason);
		ap->replan = 1;
		return;
	}
	ap->pending = 0;
	char *why = NULL;
	/* Journaled by the command table with "by": "autopilot"; a refusal
	 * (a stockout, a server gone meanwhile) is the policy's news at the
	 * next decision, not a reason to stop. */
	ctl_command_by(c, ap->pending_line, "autopilot", &why);
	free(why);
	ap->replan = 1;
}

static void on_ap_timer(uv_timer_t *t)
{
	struct sd_controller *c = t->data;
	struct ctl_autopilot *ap = &c->ap;
	if (!ap->on || c->exiting || c->quitting || c->finishing || c->closing)
		return;
	double now = now_s(c);
	/* Paused, the operator is in the middle of something: nothing moves,
	 * and an announced action runs no sooner than 5 s after resume. */
	if (c->paused) {
		if (ap->pending)
			ap->pending_at = fmax(ap->pending_at, now + CTL_AP_ANNOUNCE_S);
		return;
	}
	if (ap->pending) {
		if (now >= ap->pending_at)
			ap_carry_out(c);
		return;
	}
	if (ap->deciding)
		return;
	if (!ap->replan && ap->last_decide >= 0 && now - ap->last_decide < ap->obj.every_seconds)
		return;
	/* The work's size comes with the first worker's join. */
	if (c->total_steps <= 0)
		return;
	ap_decide(c);
}

void ctl_ap_start(struct sd_controller *c)
{
	uv_timer_start(&c->ap.timer, on_ap_timer, 250, 250);
	if (c->ap.on)
		ctl_journal(c, SD_EV_AUTOPILOT, ap_event(c, "on"));
}

void ctl_ap_close(struct sd_controller *c)
{
	uv_close((uv_handle_t *)&c->ap.timer, NULL);
}

static void note_revocation(struct ctl_autopilot *ap, const struct sd_offer *o, double t, int refused)
{
	int i = ap->nrevs < CTL_AP_REVS_MAX ? ap->nrevs++ : ap->revs_head;
	if (ap->nrevs == CTL_AP_REVS_MAX && i == ap->revs_head)
		ap->revs_head = (ap->revs_head + 1) % CTL_AP_REVS_MAX;
	ap->revs[i].o = o;
	ap->revs[i].t = t;
	ap->revs[i].refused = refused;
}

void ctl_ap_on_event(struct sd_controller *c, enum sd_event_type type, const cJSON *fields)
{
	struct ctl_autopilot *ap = &c->ap;
	const char *server = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(fields, "server"));
	const struct sd_catalog *cat = ap_catalog(c);
	const char *offer = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(fields, "offer"));
	const struct sd_offer *o = cat && offer ? sd_catalog_find(cat, offer) : NULL;
	bool capped = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(fields, "capped"));
	bool leaving = type == SD_EV_NOTICE || type == SD_EV_REVOKED;
	double notice_s = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(fields, "notice_s"));
	switch (type) {
	case SD_EV_NOTICE:
		if (o && !capped)
			note_revocation(ap, o, now_s(c), 0);
		ap->replan = 1;
		break;
	case SD_EV_REVOKED:
		/* One revocation, whether it came with a notice or not. */
		if (o && !capped && !(notice_s > 0))
			note_revocation(ap, o, now_s(c), 0);
		ap->replan = 1;
		break;
	case SD_EV_STOCKOUT:
		if (o)
			note_revocation(ap, o, now_s(c), 1);
		ap->replan = 1;
		break;
	case SD_EV_STATE: {
		const char *st = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(fields, "state"));
		leaving = st && (!strcmp(st, "released") || !strcmp(st, "failed"));
		if (st && (leaving || !strcmp(st, "training")))
			ap->replan = 1;
		break;
	}
	case SD_EV_SWAP_FAILED:
		ap->replan = 1;
		break;
	default:
		break;
	}
	if (!leaving)
		return;
	/* The server an announced drop or swap names is leaving (a notice,
	 * a revocation, released or failed): the move would find it gone, so
	 * it is withdrawn and decided again on the cluster left.  A decision
	 * still on the thread pool was made on the cluster before: the epoch
	 * discards it, and the replan decides again. */
	if (pending_names(ap, server)) {
		char why[128];
		snprintf(why, sizeof why, "%s left before the announced action ran", server);
		cancel_pending(c, why);
	} else {
		ap->epoch++;
	}
}

void ctl_ap_operator_added(struct sd_controller *c, const char *server)
{
	struct ctl_autopilot *ap = &c->ap;
	if (ap->nmanual < CTL_AP_MANUAL_MAX)
		snprintf(ap->manual[ap->nmanual++], sizeof ap->manual[0], "%s", server);
	ap->manual_cap = -1;   /* the operator wants more: the drop's cap is over */
	ap->replan = 1;
	cancel_pending(c, "the operator changed the cluster");
}

void ctl_ap_operator_dropped(struct sd_controller *c, const char *server)
{
	struct ctl_autopilot *ap = &c->ap;
	struct sd_server_info si[256];
	int n = sd_fleet_list(c->fleet, si, 256), live = 0;
	for (int i = 0; i < n && i < 256; i++)
		live += !si[i].gone && si[i].offer && strcmp(si[i].id, server) != 0;
	/* Never more than the operator left: adding back would undo the drop. */
	ap->manual_cap = live;
	ap->replan = 1;
	cancel_pending(c, "the operator changed the cluster");
}

/* autopilot on|off|hold|deadline DURATION|budget USD */
int ctl_cmd_autopilot(struct sd_controller *c, int argc, char **argv, char **why)
{
	struct ctl_autopilot *ap = &c->ap;
	const char *verb = argv[1];
	bool goal = !strcmp(verb, "deadline") || !strcmp(verb, "budget");
	if (goal != (argc == 3))
		return goal ? sd_why(why, "autopilot %s: expected a value (usage: autopilot %s %s)", verb, verb,
		                     !strcmp(verb, "deadline") ? "DURATION (6h, 90m, seconds)" : "USD")
		            : sd_why(why, "autopilot %s: takes no value", verb);
	if (!strcmp(verb, "on")) {
		if (!ap->have_obj)
			return sd_why(why, "autopilot on: no goal yet: give autopilot deadline DURATION or autopilot "
			              "budget USD, or the job's \"autopilot\"");
		if (!ap->on)
			ap_on(c);
		return 0;
	}
	if (!strcmp(verb, "off")) {
		if (ap->on)
			ap_off(c, "the operator switched it off");
		return 0;
	}
	if (!strcmp(verb, "hold")) {
		if (!ap->pending)
			return sd_why(why, "autopilot hold: no action is announced");
		snprintf(ap->held_line, sizeof ap->held_line, "%s", ap->pending_line);
		/* Not the same move again before the next planned look. */
		ap->held_until = now_s(c) + ap->obj.every_seconds;
		cancel_pending(c, "held by the operator");
		return 0;
	}
	if (!goal)
		return sd_why(why, "autopilot: '%s': expected on, off, hold, deadline DURATION or budget USD", verb);
	const struct sd_catalog *cat = ap_catalog(c);
	if (!cat)
		return sd_why(why, "autopilot %s: the provider has no market catalog to decide on", verb);
	/* The job's limits stay; the goal is the one given. */
	cJSON *obj = c->job.autopilot[0] ? cJSON_Parse(c->job.autopilot) : cJSON_CreateObject();
	if (!obj)
		sd_oom();
	cJSON_DeleteItemFromObjectCaseSensitive(obj, "deadline");
	cJSON_DeleteItemFromObjectCaseSensitive(obj, "budget");
	char *end;
	double usd = strtod(argv[2], &end);
	if (!*end && end != argv[2])
		cJSON_AddNumberToObject(obj, "budget", usd);
	else
		cJSON_AddStringToObject(obj, verb, argv[2]);
	char *text = cJSON_PrintUnformatted(obj);
	cJSON_Delete(obj);
	if (!text)
		sd_oom();
	struct sd_autopilot_objective o;
	int rc = sd_autopilot_objective_parse_text(&o, text, cat, "autopilot command", why);
	free(text);
	if (rc < 0)
		return -1;
	ap->obj = o;
	ap->have_obj = 1;
	ap->pending = 0;
	ap->last_nothing[0] = 0;
	ap_on(c);
	return 0;
}
