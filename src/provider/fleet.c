/* src/provider/fleet.c - the run's servers over any provider; see fleet.h.
 * Worker processes (spawn, SIGTERM/SIGKILL escalation, exit) are in
 * launcher.c; this file keeps states, money and the journal. */
#include "config.h"

#include "src/provider/fleet-internal.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/errors.h"

/* The "reason" journaled when a running machine's worker could not be
 * started at all (its "error" says why); the owner learns it from
 * sd_fleet_event.launch_error, not from this text. */
#define LAUNCH_FAILED "the worker could not be started"

static const char *const state_names[] = { "requested", "provisioning", "booting", "joining",
                                           "training", "notice", "revoked", "released", "failed" };

const char *sd_server_state_name(enum sd_server_state st)
{
	return (unsigned)st < sizeof state_names / sizeof state_names[0] ? state_names[st] : "?";
}

int sd_server_state_gone(enum sd_server_state st)
{
	return st == SD_SERVER_REVOKED || st == SD_SERVER_RELEASED || st == SD_SERVER_FAILED;
}

double sd_fleet_now(const struct sd_fleet *f)
{
	return (double)(uv_now(f->loop) - f->t0_ms) / 1000.0;
}

/* Per-second billing from the request with the offer's minimum, at the price
 * the server was acquired at (a later price change applies to new servers). */
static double server_usd(const struct sd_fleet *f, const struct server *s)
{
	if (!s->offer || s->never_held || s->unpriced)
		return 0;
	if (s->cloud_usd >= 0)
		return s->cloud_usd;
	double end = s->t_end >= 0 ? s->t_end : sd_fleet_now(f);
	double billed = fmax(end - s->t_request, s->offer->billing_minimum_seconds);
	return s->usd_per_hour * billed / 3600;
}

/* An event about s at provider time t (the market's own time for market
 * events, so the journal is exact and reproducible). */
cJSON *fl_server_event_at(const struct sd_fleet *f, const struct server *s, double t)
{
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "server", s->id);
	cJSON_AddStringToObject(ev, "offer", s->offer ? s->offer->id : "local");
	cJSON_AddStringToObject(ev, "state", state_names[s->st]);
	cJSON_AddNumberToObject(ev, "market_time", t);
	if (s->offer) {
		cJSON_AddStringToObject(ev, "zone", s->offer->zone);
		cJSON_AddStringToObject(ev, "gpu", s->offer->gpu);
		cJSON_AddBoolToObject(ev, "transient", s->offer->transient);
		if (s->unpriced) {
			/* Unknown, never 0 (spotdeck-hosts(5)). */
			cJSON_AddNullToObject(ev, "usd_per_hour");
			cJSON_AddNullToObject(ev, "usd");
		} else {
			cJSON_AddNumberToObject(ev, "usd_per_hour", s->usd_per_hour);
			cJSON_AddNumberToObject(ev, "usd", server_usd(f, s));
		}
	}
	return ev;
}

cJSON *fl_server_event(const struct sd_fleet *f, const struct server *s)
{
	return fl_server_event_at(f, s, sd_fleet_now(f));
}

/* s went: a swap waiting for it as the replacement failed (journaled as
 * swap_failed; the old server stays), and one waiting to release it has
 * nothing left to release. */
static void swaps_server_gone(struct sd_fleet *f, struct server *s)
{
	if (s->replaces[0]) {
		cJSON *ev = cJSON_CreateObject();
		cJSON_AddStringToObject(ev, "server", s->replaces);
		cJSON_AddStringToObject(ev, "replacement", s->id);
		char reason[64];
		snprintf(reason, sizeof reason, "the replacement was %s before it trained", state_names[s->st]);
		cJSON_AddStringToObject(ev, "reason", reason);
		s->replaces[0] = '\0';
		fl_journal(f, SD_EV_SWAP_FAILED, ev);
	}
	for (struct server *n = f->servers; n; n = n->next)
		if (!strcmp(n->replaces, s->id))
			n->replaces[0] = '\0';
}

void fl_set_state(struct sd_fleet *f, struct server *s, enum sd_server_state st)
{
	if (s->st == st)
		return;
	s->st = st;
	struct sd_fleet_event ev = { .type = SD_EV_STATE, .server = s->id, .state = st };
	fl_emit(f, &ev, fl_server_event(f, s));
	if (fl_gone(s))
		swaps_server_gone(f, s);
}

int fl_gone(const struct server *s)
{
	return sd_server_state_gone(s->st);
}

struct server *fl_find(const struct sd_fleet *f, const char *id)
{
	for (struct server *s = f->servers; s; s = s->next)
		if (!strcmp(s->id, id))
			return s;
	return NULL;
}

/* Billing stops at t (once). */
static void stop_billing(struct sd_fleet *f, struct server *s, double t)
{
	if (s->t_end < 0) {
		s->t_end = t;
		f->usd_done += server_usd(f, s);
	}
}

/* The machine goes back to its provider (once). */
static void give_back(struct sd_fleet *f, struct server *s)
{
	if (s->provider_holds && f->p) {
		s->provider_holds = 0;
		f->ops->release(f->p, s->id);
	}
}

void fl_finish_server(struct sd_fleet *f, struct server *s, enum sd_server_state st)
{
	/* A detached worker (launcher.c) of a server that ends here (its host
	 * failed, the provider took it): nothing follows it any more; the
	 * controller stops it through its connection. */
	int was_detached = s->detached;
	s->detached = 0;
	stop_billing(f, s, sd_fleet_now(f));
	if (!fl_gone(s))
		fl_set_state(f, s, st);
	give_back(f, s);
	fl_launcher_server_done(s);
	if (was_detached && !sd_fleet_running(f) && f->hooks.idle)
		f->hooks.idle(f->ctx);
}

void fl_released(struct sd_fleet *f, struct server *s)
{
	fl_finish_server(f, s, SD_SERVER_RELEASED);
	fl_journal(f, SD_EV_RELEASED, fl_server_event(f, s));
}

/* The provider never had a machine for s (refused, or no capacity): it
 * is not billed.  Inside the request (still "requested") it goes without
 * a state event, since the request itself fails; later it is failed. */
static void never_held(struct sd_fleet *f, struct server *s)
{
	s->never_held = 1;
	s->provider_holds = 0;
	if (s->st != SD_SERVER_REQUESTED) {
		fl_finish_server(f, s, SD_SERVER_FAILED);
		return;
	}
	s->st = SD_SERVER_FAILED;
	s->t_end = s->t_request;
	fl_launcher_server_done(s);
}

/* ---- events from the provider ---- */

static void on_notice(struct sd_fleet *f, struct server *s, const struct sd_provider_event *ev)
{
	if (s->st == SD_SERVER_NOTICE)
		return;
	s->t_notice = ev->time;
	s->t_notice_end = ev->ends_at;
	double secs = ev->ends_at - ev->time;
	fl_set_state(f, s, SD_SERVER_NOTICE);
	cJSON *e = fl_server_event_at(f, s, ev->time);
	cJSON_AddNumberToObject(e, "seconds", secs);
	cJSON_AddBoolToObject(e, "capped", ev->capped);
	if (ev->batch_size)
		cJSON_AddNumberToObject(e, "batch_size", ev->batch_size);
	fl_journal(f, SD_EV_NOTICE, e);
	f->hooks.notice(f->ctx, s->id, secs);
}

int sd_fleet_cloud_notice(struct sd_fleet *f, const char *server, double seconds, const cJSON *fields)
{
	struct server *s = fl_find(f, server);
	if (s && !fl_gone(s) && !s->cloud_noticed) {
		/* Kept even when already under notice: the provider asks for it
		 * when it judges a stopped VM (sd_fleet_cloud_noticed). */
		s->cloud_noticed = 1;
		const char *src = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(fields, "source"));
		snprintf(s->notice_source, sizeof s->notice_source, "%s", src ? src : "");
	}
	if (!s || fl_gone(s) || s->st == SD_SERVER_NOTICE)
		return 0;
	double now = sd_fleet_now(f);
	s->t_notice = now;
	/* An unknown deadline (-1): the cockpit shows no countdown. */
	s->t_notice_end = seconds >= 0 ? now + seconds : now;
	fl_set_state(f, s, SD_SERVER_NOTICE);
	cJSON *e = fl_server_event_at(f, s, now);
	cJSON_AddNumberToObject(e, "seconds", seconds);
	const cJSON *it;
	cJSON_ArrayForEach(it, fields)
		if (it->string && !cJSON_HasObjectItem(e, it->string)) {
			cJSON *copy = cJSON_Duplicate(it, 1);
			if (!copy)
				sd_oom();
			cJSON_AddItemToObject(e, it->string, copy);
		}
	fl_journal(f, SD_EV_NOTICE, e);
	return 1;
}

int sd_fleet_cloud_noticed(const struct sd_fleet *f, const char *server, const char **source)
{
	const struct server *s = fl_find(f, server);
	if (source)
		*source = s && s->cloud_noticed ? s->notice_source : "";
	return s && s->cloud_noticed;
}

/* The provider took the machine at ev->time. */
static void on_revoked(struct sd_fleet *f, struct server *s, const struct sd_provider_event *ev)
{
	double t = ev->time;
	s->provider_holds = 0;   /* it is the provider's again */
	stop_billing(f, s, t);
	cJSON *e = fl_server_event_at(f, s, t);
	cJSON_ReplaceItemInObject(e, "state", cJSON_CreateString("revoked"));
	cJSON_AddNumberToObject(e, "lifetime_s", t - ev->launched_at);
	cJSON_AddNumberToObject(e, "notice_s", s->t_notice >= 0 ? t - s->t_notice : 0);
	cJSON_AddBoolToObject(e, "capped", ev->capped);
	if (ev->settled_by)
		cJSON_AddStringToObject(e, "settled_by", ev->settled_by);
	if (ev->message)
		cJSON_AddStringToObject(e, "detail", ev->message);
	cJSON_AddNumberToObject(e, "billed_s",
	                        fmax(s->t_end - s->t_request, s->offer->billing_minimum_seconds));
	fl_journal(f, SD_EV_REVOKED, e);
	fl_set_state(f, s, SD_SERVER_REVOKED);
	/* The provider takes the machine: ACPI shutdown, then power off. */
	if (!fl_launcher_shutdown(f, s))
		fl_finish_server(f, s, SD_SERVER_REVOKED);
}

static void on_stockout(struct sd_fleet *f, struct server *s, const struct sd_provider_event *ev)
{
	cJSON *e = cJSON_CreateObject();
	cJSON_AddStringToObject(e, "server", s->id);
	cJSON_AddStringToObject(e, "offer", s->offer->id);
	cJSON_AddStringToObject(e, "zone", ev->zone ? ev->zone : s->offer->zone);
	cJSON_AddStringToObject(e, "reason", ev->code ? ev->code : "ZONE_RESOURCE_POOL_EXHAUSTED");
	cJSON_AddStringToObject(e, "detail", ev->message ? ev->message : "");
	fl_journal(f, SD_EV_STOCKOUT, e);
	if (f->acquiring == s)
		snprintf(f->acquire_error, sizeof f->acquire_error,
		         "%s: %s: the zone has no capacity for this offer now (%s)", s->offer->id,
		         ev->zone ? ev->zone : s->offer->zone, ev->code ? ev->code : "ZONE_RESOURCE_POOL_EXHAUSTED");
	never_held(f, s);
}

static void on_failed(struct sd_fleet *f, struct server *s, const struct sd_provider_event *ev)
{
	cJSON *e = fl_server_event_at(f, s, ev->time);
	cJSON_AddStringToObject(e, "code", ev->code ? ev->code : "FAILED");
	cJSON_AddStringToObject(e, "error", ev->message ? ev->message : "");
	if (ev->settled_by)
		cJSON_AddStringToObject(e, "settled_by", ev->settled_by);
	fl_journal(f, SD_EV_ERROR, e);
	if (f->acquiring == s) {
		snprintf(f->acquire_error, sizeof f->acquire_error, "%s: %s", s->offer->id,
		         ev->message ? ev->message : ev->code ? ev->code : "failed");
		never_held(f, s);
		return;
	}
	s->provider_holds = 0;
	fl_finish_server(f, s, SD_SERVER_FAILED);
}

/* The cloud's own statement of a server's running time: it replaces the
 * estimate, in the server's cost and in the money spent. */
static void on_billed(struct sd_fleet *f, struct server *s, const struct sd_provider_event *ev)
{
	if (s->never_held || s->unpriced || s->cloud_usd >= 0 || !(ev->run_seconds >= 0))
		return;
	double estimate = server_usd(f, s);
	double billed = fmax(ev->run_seconds, s->offer->billing_minimum_seconds);
	double usd = s->usd_per_hour * billed / 3600;
	if (s->t_end >= 0)
		f->usd_done += usd - estimate;
	s->cloud_usd = usd;
	cJSON *e = cJSON_CreateObject();
	cJSON_AddStringToObject(e, "server", s->id);
	cJSON_AddStringToObject(e, "offer", s->offer->id);
	cJSON_AddNumberToObject(e, "run_s", round(ev->run_seconds * 1000) / 1000);
	cJSON_AddNumberToObject(e, "billed_s", round(billed * 1000) / 1000);
	cJSON_AddNumberToObject(e, "usd_per_hour", s->usd_per_hour);
	cJSON_AddNumberToObject(e, "usd", usd);
	cJSON_AddNumberToObject(e, "usd_estimate", estimate);
	if (ev->billing_source)
		cJSON_AddStringToObject(e, "source", ev->billing_source);
	fl_journal(f, SD_EV_BILLED, e);
}

/* A server acquired before its offer had a price (the cloud's prices were
 * still being asked for: aws.c) takes the one known when it boots, which is
 * before it bills. */
static void take_late_price(struct sd_fleet *f, struct server *s)
{
	if (!s->unpriced || !f->p || !f->ops->prices)
		return;
	double price = f->ops->prices(f->p)[s->offer->index];
	if (isfinite(price)) {
		s->usd_per_hour = price;
		s->unpriced = 0;
	}
}

void sd_fleet_report(struct sd_fleet *f, const struct sd_provider_event *ev)
{
	struct server *s = ev->server ? fl_find(f, ev->server) : NULL;
	if (s && s->offer && ev->kind == SD_PROVIDER_BILLED) {
		on_billed(f, s, ev);
		return;
	}
	if (!s || !s->offer || fl_gone(s) || f->closing)
		return;   /* late news of a server the fleet let go */
	if (f->acquiring == s && (ev->kind == SD_PROVIDER_PROVISIONED || ev->kind == SD_PROVIDER_RUNNING)) {
		/* Inside the acquire call: after the acquired event. */
		f->acquire_deferred = *ev;
		f->acquire_deferred.server = NULL;
		f->acquire_deferred.address = NULL;
		f->has_deferred = 1;
		return;
	}
	char *why = NULL;
	switch (ev->kind) {
	case SD_PROVIDER_PROVISIONED:
		take_late_price(f, s);
		fl_set_state(f, s, SD_SERVER_BOOTING);
		break;
	case SD_PROVIDER_RUNNING:
		take_late_price(f, s);
		fl_set_state(f, s, SD_SERVER_BOOTING);
		if (fl_launcher_spawn(f, s, ev->pace, &why) < 0) {
			cJSON *e = fl_server_event(f, s);
			cJSON_AddStringToObject(e, "reason", LAUNCH_FAILED);
			cJSON_AddStringToObject(e, "error", why);
			struct sd_fleet_event fe = { .type = SD_EV_ERROR, .server = s->id, .launch_error = why };
			fl_emit(f, &fe, e);
			fl_finish_server(f, s, SD_SERVER_FAILED);
		}
		break;
	case SD_PROVIDER_NOTICE:
		on_notice(f, s, ev);
		break;
	case SD_PROVIDER_REVOKED:
		on_revoked(f, s, ev);
		break;
	case SD_PROVIDER_STOCKOUT:
		on_stockout(f, s, ev);
		break;
	case SD_PROVIDER_FAILED:
		on_failed(f, s, ev);
		break;
	case SD_PROVIDER_BILLED:
		break;   /* above */
	}
	free(why);
}

void fl_emit(struct sd_fleet *f, const struct sd_fleet_event *ev, cJSON *fields)
{
	f->hooks.journal(f->ctx, ev, fields);
}

void fl_journal(struct sd_fleet *f, enum sd_event_type type, cJSON *fields)
{
	struct sd_fleet_event ev = { .type = type };
	fl_emit(f, &ev, fields);
}

void sd_fleet_journal(struct sd_fleet *f, enum sd_event_type type, cJSON *ev)
{
	fl_journal(f, type, ev);
}

void sd_fleet_command(struct sd_fleet *f, const char *line)
{
	if (f->hooks.command)
		f->hooks.command(f->ctx, line);
}

/* ---- life ---- */

static int create_provider(struct sd_fleet *f, const struct sd_fleet_config *cfg, char **why)
{
	const struct sd_provider_ops *ops = cfg->provider;
	f->env = cfg->env;
	f->env.loop = f->loop;
	f->env.fleet = f;
	f->env.advertise = f->advertise;
	f->env.direct = f->direct;
	f->env.connect = f->connect;
	f->env.run_dir = f->run_dir;
	cJSON *empty = NULL;
	if (!f->env.settings)
		f->env.settings = empty = cJSON_CreateObject();
	const char *file = f->env.settings_file ? f->env.settings_file : "job";
	int rc = sd_provider_check_settings(ops, f->env.settings, file, why);
	if (rc == 0)
		rc = ops->create(&f->p, &f->env, why);
	cJSON_Delete(empty);
	f->env.settings = NULL;   /* borrowed for create only */
	if (rc < 0)
		return -1;
	f->ops = ops;
	/* A provider whose prices never change: the catalog's. */
	const struct sd_catalog *cat = ops->catalog ? ops->catalog(f->p) : NULL;
	if (cat && !ops->prices) {
		f->catalog_prices = sd_malloc((size_t)cat->noffers * sizeof *f->catalog_prices + 1);
		for (int i = 0; i < cat->noffers; i++)
			f->catalog_prices[i] = cat->offers[i].usd_per_hour;
	}
	return 0;
}

int sd_fleet_create(struct sd_fleet **out, uv_loop_t *loop, const struct sd_fleet_config *cfg,
                    const struct sd_fleet_hooks *hooks, void *ctx, char **why)
{
	*out = NULL;
	struct sd_fleet *f = sd_calloc(1, sizeof *f);
	f->loop = loop;
	f->t0_ms = uv_now(loop);
	f->grace_seconds = cfg->grace_seconds > 0 ? cfg->grace_seconds : 5;
	snprintf(f->worker_path, sizeof f->worker_path, "%s", cfg->worker_path);
	snprintf(f->run_dir, sizeof f->run_dir, "%s", cfg->run_dir);
	snprintf(f->connect, sizeof f->connect, "%s", cfg->connect ? cfg->connect : "");
	snprintf(f->advertise, sizeof f->advertise, "%s", cfg->advertise ? cfg->advertise : f->connect);
	f->direct = cfg->advertise != NULL;
	f->emulate = cfg->env.emulate && cfg->provider && cfg->provider->emulated;
	f->next_id = cfg->last_server > 0 ? cfg->last_server : 0;
	f->usd_done = cfg->usd_before > 0 ? cfg->usd_before : 0;
	f->hooks = *hooks;
	f->ctx = ctx;
	if (cfg->provider && create_provider(f, cfg, why) < 0) {
		free(f);
		return -1;
	}
	*out = f;
	return 0;
}

static struct server *new_server(struct sd_fleet *f, const struct sd_offer *o)
{
	struct server *s = sd_calloc(1, sizeof *s);
	s->f = f;
	s->offer = o;
	s->t_request = sd_fleet_now(f);
	s->t_end = -1;
	s->t_notice = -1;
	s->cloud_usd = -1;
	const double *price = f->p && f->ops->prices ? f->ops->prices(f->p) : NULL;
	s->usd_per_hour = o ? (price ? price[o->index] : o->usd_per_hour) : 0;
	s->unpriced = o && !isfinite(s->usd_per_hour);
	if (s->unpriced)
		s->usd_per_hour = 0;
	s->price_estimated = o && o->price_source && !strncmp(o->price_source, "estimated", 9);
	snprintf(s->id, sizeof s->id, "s%d", ++f->next_id);
	fl_launcher_server_init(f, s);
	s->next = f->servers;
	f->servers = s;
	return s;
}

static int acquire_offer(struct sd_fleet *f, struct server *s, char **why)
{
	f->acquiring = s;
	f->has_deferred = 0;
	f->acquire_error[0] = '\0';
	char *err = NULL;
	int rc = f->ops->acquire(f->p, s->id, s->offer, &err);
	f->acquiring = NULL;
	if (rc < 0) {
		never_held(f, s);
		rc = sd_why(why, "%s", err ? err : "refused by the provider");
		free(err);
		if (f->servers == s && !s->proc_live) {
			/* Refused at once (a host cooling down, its slots in use): no
			 * server ever was; the add's error says why.  Its id is free
			 * again, and no failed row stays behind on the screen. */
			f->servers = s->next;
			s->next = f->refused;
			f->refused = s;
			f->next_id--;
		}
		return rc;
	}
	if (fl_gone(s))   /* it failed inside the call: a stockout, say */
		return sd_why(why, "%s", f->acquire_error);
	s->provider_holds = 1;
	cJSON *ev = fl_server_event(f, s);
	cJSON_AddBoolToObject(ev, "emulated", f->emulate);
	cJSON_AddStringToObject(ev, "provider", f->ops->name);
	fl_journal(f, SD_EV_ACQUIRED, ev);
	if (s->st == SD_SERVER_REQUESTED)
		fl_set_state(f, s, SD_SERVER_PROVISIONING);
	if (f->has_deferred) {
		f->has_deferred = 0;
		f->acquire_deferred.server = s->id;
		sd_fleet_report(f, &f->acquire_deferred);
	}
	return 0;
}

int sd_fleet_local_possible(const struct sd_fleet *f, char **why)
{
	/* Local workers' collectives listen on loopback: only hosts on this
	 * machine could reach them, which an advertised loopback address says
	 * (direct links).  Links through ssh say nothing of where the hosts
	 * are, and the controller listening on loopback is then the common
	 * case (behind NAT), not a sign of local hosts. */
	if (f->ops && f->ops->launch && f->p && (!f->direct || !sd_host_is_loopback(f->advertise, 1)))
		return sd_why(why, "a local worker cannot train with %s's hosts (its collectives listen on loopback, "
		              "which the hosts cannot reach)", f->ops->name);
	return 0;
}

int sd_fleet_acquire(struct sd_fleet *f, const char *offer_id, char *server, size_t len, char **why)
{
	const struct sd_offer *o = NULL;
	const struct sd_catalog *cat = sd_fleet_catalog(f);
	if (strcmp(offer_id, "local")) {
		if (!cat)
			return sd_why(why, "%s: no market catalog loaded (only 'local' servers)", offer_id);
		o = sd_catalog_find(cat, offer_id);
		if (!o)
			return sd_why(why, "%s: no such offer in %s", offer_id, cat->file);
	}
	char *no_local = NULL;
	if (!o && sd_fleet_local_possible(f, &no_local) < 0) {
		sd_why(why, "local: %s", no_local);
		free(no_local);
		return -1;
	}
	struct server *s = new_server(f, o);
	if (o) {
		if (acquire_offer(f, s, why) < 0)
			return -1;
	} else {
		fl_journal(f, SD_EV_ACQUIRED, fl_server_event(f, s));
		fl_set_state(f, s, SD_SERVER_BOOTING);
		if (fl_launcher_spawn(f, s, 0, why) < 0) {
			fl_finish_server(f, s, SD_SERVER_FAILED);
			return -1;
		}
	}
	snprintf(server, len, "%s", s->id);
	return 0;
}

int sd_fleet_release(struct sd_fleet *f, const char *server, const char *reason, char **why)
{
	(void)reason;
	struct server *s = fl_find(f, server);
	if (!s || fl_gone(s))
		return sd_why(why, "no such server");
	s->releasing = 1;
	if (!fl_worker_live(s)) {
		/* Still provisioning: nothing runs yet, stop billing now. */
		fl_released(f, s);
		return 0;
	}
	f->hooks.notice(f->ctx, s->id, 0);
	/* If the worker does not leave by itself, terminate it. */
	fl_launcher_terminate_later(f, s);
	return 0;
}

void sd_fleet_release_all(struct sd_fleet *f)
{
	for (struct server *s = f->servers; s; s = s->next) {
		if (fl_gone(s))
			continue;
		s->releasing = 1;
		if (!fl_worker_live(s))
			fl_released(f, s);
	}
}

int sd_fleet_answer_orphans(struct sd_fleet *f, const char *what, char **why)
{
	if (!f->p || !f->ops->answer_orphans)
		return sd_why(why, "the %s provider asks nothing about orphans",
			      f->ops ? f->ops->name : "local");
	return f->ops->answer_orphans(f->p, what, why);
}

void sd_fleet_worker_event(struct sd_fleet *f, const char *server, enum sd_worker_event e)
{
	struct server *s = fl_find(f, server);
	if (s && e == SD_WORKER_GONE && s->detached) {
		fl_launcher_worker_gone(f, s);
		return;
	}
	if (s)
		s->worker_out = e == SD_WORKER_GONE;
	if (!s || fl_gone(s) || s->st == SD_SERVER_NOTICE)
		return;
	if (e == SD_WORKER_CONNECTED) {
		fl_set_state(f, s, SD_SERVER_JOINING);
	} else if (e == SD_WORKER_TRAINING) {
		fl_set_state(f, s, SD_SERVER_TRAINING);
		if (s->replaces[0]) {
			/* The swap is done: the old server goes. */
			char old[16];
			memcpy(old, s->replaces, sizeof old);
			s->replaces[0] = '\0';
			sd_fleet_release(f, old, "swapped", NULL);
		}
	}
}

int sd_fleet_swap(struct sd_fleet *f, const char *old, const char *offer_id, char *server, size_t len,
                  char **why)
{
	if (!sd_fleet_has_server(f, old))
		return sd_why(why, "no server '%s'", old);
	char id[16];
	if (sd_fleet_acquire(f, offer_id, id, sizeof id, why) < 0)
		return -1;
	struct server *s = fl_find(f, id);
	snprintf(s->replaces, sizeof s->replaces, "%s", old);
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "server", old);
	cJSON_AddStringToObject(ev, "replacement", id);
	cJSON_AddStringToObject(ev, "offer", offer_id);
	fl_journal(f, SD_EV_SWAP, ev);
	snprintf(server, len, "%s", id);
	return 0;
}

int sd_fleet_has_server(const struct sd_fleet *f, const char *server)
{
	const struct server *s = fl_find(f, server);
	return s && !fl_gone(s);
}

int sd_fleet_server_failed(const struct sd_fleet *f, const char *server, int remote_only)
{
	const struct server *s = fl_find(f, server);
	return s && s->st == SD_SERVER_FAILED && (s->remote || !remote_only);
}

double sd_fleet_usd_spent(const struct sd_fleet *f)
{
	double usd = f->usd_done;
	for (const struct server *s = f->servers; s; s = s->next)
		if (s->t_end < 0)
			usd += server_usd(f, s);
	return usd;
}

double sd_fleet_usd_per_hour(const struct sd_fleet *f)
{
	double r = 0;
	for (const struct server *s = f->servers; s; s = s->next)
		if (s->t_end < 0 && s->offer)
			r += s->usd_per_hour;
	return r;
}

void sd_fleet_price_gaps(const struct sd_fleet *f, struct sd_price_gaps *g)
{
	memset(g, 0, sizeof *g);
	for (const struct server *s = f->servers; s; s = s->next) {
		int live = s->t_end < 0;
		if (s->never_held)
			continue;   /* never billed: nothing to vouch for */
		if (!s->offer || s->unpriced) {
			g->ran_unpriced++;
			g->live_unpriced += live;
		} else if (s->price_estimated) {
			g->ran_estimated++;
			g->live_estimated += live;
		}
	}
}

int sd_fleet_list(const struct sd_fleet *f, struct sd_server_info *out, int max)
{
	int total = 0, i = 0;
	for (const struct server *s = f->servers; s; s = s->next)
		total++;
	/* The list is newest first; hand it out oldest first. */
	double now = sd_fleet_now(f);
	for (const struct server *s = f->servers; s; s = s->next, i++) {
		int at = total - 1 - i;
		if (at >= max)
			continue;
		struct sd_server_info *o = &out[at];
		o->id = s->id;
		o->offer = s->offer;
		o->state = s->st;
		o->uptime_s = (s->t_end >= 0 ? s->t_end : now) - s->t_request;
		o->usd = server_usd(f, s);
		o->usd_per_hour = s->unpriced ? NAN : s->usd_per_hour;
		o->price_estimated = s->price_estimated;
		o->notice_left_s = s->st == SD_SERVER_NOTICE ? fmax(0, s->t_notice_end - now) : 0;
		o->emulated = s->offer && f->emulate;
		o->gone = fl_gone(s);
		o->gone_for_s = s->t_end >= 0 ? now - s->t_end : 0;
	}
	return total < max ? total : max;
}

int sd_fleet_live(const struct sd_fleet *f, const struct sd_offer *o)
{
	return f->p && f->ops->live ? f->ops->live(f->p, o) : -1;
}

int sd_fleet_simulated(const struct sd_fleet *f)
{
	return f->p && f->ops->emulated;
}

const char *sd_fleet_provider_name(const struct sd_fleet *f)
{
	return f->ops ? f->ops->name : "";
}

const struct sd_catalog *sd_fleet_catalog(const struct sd_fleet *f)
{
	return f->p && f->ops->catalog ? f->ops->catalog(f->p) : NULL;
}

const double *sd_fleet_prices(const struct sd_fleet *f)
{
	if (!sd_fleet_catalog(f))
		return NULL;
	const double *p = f->ops->prices ? f->ops->prices(f->p) : NULL;
	return p ? p : f->catalog_prices;
}

double sd_fleet_price_age(const struct sd_fleet *f)
{
	return f->p && f->ops->price_age ? f->ops->price_age(f->p) : 0;
}

double sd_fleet_offer_usd_per_hour(const struct sd_fleet *f, const struct sd_offer *o)
{
	const struct sd_catalog *cat = sd_fleet_catalog(f);
	if (!cat || o < cat->offers || o >= cat->offers + cat->noffers)
		return NAN;
	return sd_fleet_prices(f)[o->index];
}

/* The close is done once the provider is and every process the close
 * killed has exited: done is called, once. */
static void close_done_maybe(struct sd_fleet *f)
{
	if (f->provider_closed && f->closing_procs == 0 && f->closed) {
		void (*done)(void *) = f->closed;
		f->closed = NULL;
		done(f->closed_arg);
	}
}

void fl_close_proc_exited(struct sd_fleet *f)
{
	f->closing_procs--;
	close_done_maybe(f);
}

static void on_provider_closed(void *arg)
{
	struct sd_fleet *f = arg;
	f->provider_closed = 1;
	close_done_maybe(f);
}

void sd_fleet_close(struct sd_fleet *f, void (*done)(void *arg), void *arg)
{
	f->closing = 1;
	f->closed = done;
	f->closed_arg = arg;
	/* The local processes first (a worker here, or the ssh session of one
	 * on a host, which runs on in its own session there): the provider's
	 * close, which may take seconds on the loop, then sees no exit of
	 * theirs, and what it ends on the hosts has no session left. */
	for (struct server *s = f->servers; s; s = s->next) {
		stop_billing(f, s, sd_fleet_now(f));
		fl_launcher_close(s);
	}
	if (f->p)
		f->ops->close(f->p, on_provider_closed, f);
	else
		on_provider_closed(f);
}

void sd_fleet_free(struct sd_fleet *f)
{
	if (!f)
		return;
	while (f->servers) {
		struct server *s = f->servers;
		f->servers = s->next;
		free(s);
	}
	while (f->refused) {
		struct server *s = f->refused;
		f->refused = s->next;
		free(s);
	}
	if (f->p)
		f->ops->free(f->p);
	free(f->catalog_prices);
	free(f);
}
