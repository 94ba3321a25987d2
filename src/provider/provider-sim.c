/* src/provider/provider-sim.c - local servers and the simulated spot market; see
 * provider.h.  Market time runs with the wall clock from the provider's
 * creation; the market model (src/market/market-model.c) decides boot times and
 * revocations, this file turns them into processes, states and money. */
#include "config.h"

#include "src/provider/provider.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/errors.h"
#include "src/market/market-model.h"
#include "src/market/trace.h"

/* One scheduled step of a trace replay. */
enum action_kind { ACT_NOTICE, ACT_REVOKE, ACT_STOCKOUT, ACT_PRICE, ACT_COMMAND };
struct action {
	double t;
	enum action_kind kind;
	const struct sd_trace_event *ev;
	double notice;                   /* ACT_NOTICE / ACT_REVOKE: notice seconds */
};

struct stockout {
	char zone[64];
	double until;
};

enum state { ST_REQUESTED, ST_PROVISIONING, ST_BOOTING, ST_JOINING, ST_TRAINING, ST_NOTICE,
             ST_REVOKED, ST_RELEASED, ST_FAILED };
static const char *const state_names[] = { "requested", "provisioning", "booting", "joining",
                                           "training", "notice", "revoked", "released", "failed" };

struct server {
	char id[16];
	const struct sd_offer *offer;    /* NULL: local */
	sd_server_id mid;                /* market id (0: local) */
	enum state st;
	double t_request;                /* market seconds */
	double t_end;                    /* billing end, < 0 while billed */
	double t_notice;                 /* < 0: no notice */
	int releasing;                   /* operator asked for it back */
	uv_process_t proc;
	int proc_live;                   /* spawned and not yet exited */
	int proc_open, timer_open;       /* handles not yet closed */
	int handles;                     /* open handles (proc, timer) */
	uv_timer_t timer;                /* SIGTERM/SIGKILL escalation */
	int term_sent;
	double t_notice_end;             /* when the notice runs out */
	double usd_per_hour;             /* the offer's price when acquired */
	int price_estimated;             /* ... and that price was an estimate */
	double trace_revoke_at;          /* a trace revokes it then (< 0: no) */
	struct sd_provider *p;
	struct server *next;
};

struct sd_provider {
	uv_loop_t *loop;
	struct sd_provider_config cfg;
	char worker_path[4096], run_dir[4096];
	struct sd_provider_hooks hooks;
	void *ctx;
	struct sd_catalog *cat;          /* as loaded: read-only */
	double *price;                   /* per catalog offer (by index): its price now, USD/h */
	struct sd_market *market;
	uv_timer_t market_timer;
	uint64_t t0_ms;
	double max_speed;                /* fastest offer's images/s per server */
	struct server *servers;
	int next_id;
	double usd_done;                 /* money of servers already gone */
	int closing;
	/* trace replay */
	struct action *actions;
	int nactions, next_action;
	uv_timer_t trace_timer;
	struct stockout stockouts[64];
	int nstockouts;
};

static double mnow(const struct sd_provider *p)
{
	return (double)(uv_now(p->loop) - p->t0_ms) / 1000.0;
}

/* Per-second billing from the request with the offer's minimum, at the price
 * the server was acquired at (a later price change applies to new servers). */
static double server_usd(const struct sd_provider *p, const struct server *s)
{
	if (!s->offer)
		return 0;
	double end = s->t_end >= 0 ? s->t_end : mnow(p);
	double billed = fmax(end - s->t_request, s->offer->billing_minimum_seconds);
	return s->usd_per_hour * billed / 3600;
}

/* An event about s at market time t (the market's own time for market
 * events, so the journal is exact and reproducible). */
static cJSON *server_event_at(const struct sd_provider *p, const struct server *s, double t)
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
		cJSON_AddNumberToObject(ev, "usd_per_hour", s->usd_per_hour);
		cJSON_AddNumberToObject(ev, "usd", server_usd(p, s));
	}
	return ev;
}

static cJSON *server_event(const struct sd_provider *p, const struct server *s)
{
	return server_event_at(p, s, mnow(p));
}

static void set_state(struct sd_provider *p, struct server *s, enum state st)
{
	if (s->st == st)
		return;
	s->st = st;
	p->hooks.journal(p->ctx, SD_EV_STATE, server_event(p, s));
}

static int gone(const struct server *s)
{
	return s->st == ST_REVOKED || s->st == ST_RELEASED || s->st == ST_FAILED;
}

static struct server *find(const struct sd_provider *p, const char *id)
{
	for (struct server *s = p->servers; s; s = s->next)
		if (!strcmp(s->id, id))
			return s;
	return NULL;
}

static struct server *find_market(const struct sd_provider *p, sd_server_id mid)
{
	for (struct server *s = p->servers; s; s = s->next)
		if (s->mid == mid)
			return s;
	return NULL;
}

/* Servers stay in the list after their handles close, so the cockpit can
 * show revoked and released ones for a while; sd_provider_free frees them. */
static void on_handle_closed(uv_handle_t *h)
{
	struct server *s = h->data;
	s->handles--;
}

/* Stops billing and forgets the server once its process is gone too. */
static void finish_server(struct sd_provider *p, struct server *s, enum state st)
{
	if (s->t_end < 0) {
		s->t_end = mnow(p);
		p->usd_done += server_usd(p, s);
	}
	if (!gone(s))
		set_state(p, s, st);
	if (s->mid && p->market) {
		sd_market_release(p->market, s->mid);
		s->mid = 0;
	}
	if (!s->proc_live && s->timer_open) {
		s->timer_open = 0;
		uv_close((uv_handle_t *)&s->timer, on_handle_closed);
	}
}

static void on_escalate(uv_timer_t *t)
{
	struct server *s = t->data;
	if (!s->proc_live)
		return;
	if (!s->term_sent) {
		s->term_sent = 1;
		uv_process_kill(&s->proc, SIGTERM);
		uv_timer_start(&s->timer, on_escalate, (uint64_t)(s->p->cfg.grace_seconds * 1000), 0);
	} else {
		uv_process_kill(&s->proc, SIGKILL);
	}
}

static void on_proc_exit(uv_process_t *proc, int64_t status, int sig)
{
	struct server *s = proc->data;
	struct sd_provider *p = s->p;
	s->proc_live = 0;
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "server", s->id);
	/* A process ended by a signal has no exit status (null), not 0. */
	if (sig) {
		cJSON_AddNullToObject(ev, "exit_status");
		cJSON_AddNumberToObject(ev, "signal", sig);
	} else {
		cJSON_AddNumberToObject(ev, "exit_status", (double)status);
	}
	p->hooks.journal(p->ctx, SD_EV_SERVER_EXIT, ev);
	uv_timer_stop(&s->timer);
	s->proc_open = 0;
	uv_close((uv_handle_t *)proc, on_handle_closed);
	if (!gone(s)) {
		if (s->releasing) {
			finish_server(p, s, ST_RELEASED);
			p->hooks.journal(p->ctx, SD_EV_RELEASED, server_event(p, s));
		} else if (s->st == ST_NOTICE) {
			/* The worker left under notice; the machine (and its bill)
			 * lasts until the provider takes it. */
		} else {
			finish_server(p, s, ST_FAILED);
		}
	} else if (s->timer_open) {
		s->timer_open = 0;
		uv_close((uv_handle_t *)&s->timer, on_handle_closed);
	}
	if (!sd_provider_running(p) && p->hooks.idle)
		p->hooks.idle(p->ctx);
}

static int spawn(struct sd_provider *p, struct server *s, char **why)
{
	char port[16], tokfile[4200], logpath[4200], pace[32];
	snprintf(port, sizeof port, "127.0.0.1:%d", p->cfg.port);
	snprintf(tokfile, sizeof tokfile, "%s/token", p->run_dir);
	snprintf(logpath, sizeof logpath, "%s/logs/%s.log", p->run_dir, s->id);
	int logfd = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (logfd < 0)
		return sd_why(why, "%s: %s", logpath, strerror(errno));
	char *args[12];
	int n = 0;
	args[n++] = p->worker_path;
	args[n++] = (char *)"--connect";
	args[n++] = port;
	args[n++] = (char *)"--token-file";
	args[n++] = tokfile;
	args[n++] = (char *)"--server-id";
	args[n++] = s->id;
	if (s->offer && p->cfg.emulate && p->max_speed > 0) {
		/* Emulated GPU: the worker runs at this fraction of its own speed,
		 * the offer's measured speed relative to the fastest offer's. */
		snprintf(pace, sizeof pace, "%.6f",
		         s->offer->images_per_sec * s->offer->gpu_count / p->max_speed);
		args[n++] = (char *)"--pace";
		args[n++] = pace;
	}
	args[n] = NULL;
	uv_stdio_container_t stdio[3];
	stdio[0].flags = UV_IGNORE;
	stdio[1].flags = UV_INHERIT_FD;
	stdio[1].data.fd = logfd;
	stdio[2].flags = UV_INHERIT_FD;
	stdio[2].data.fd = logfd;
	uv_process_options_t po;
	memset(&po, 0, sizeof po);
	po.file = p->worker_path;
	po.args = args;
	po.exit_cb = on_proc_exit;
	po.stdio = stdio;
	po.stdio_count = 3;
	/* Its own session: a hangup of the operator's terminal must not kill
	 * the servers (the controller stops them itself, with a checkpoint). */
	po.flags = UV_PROCESS_DETACHED;
	s->proc.data = s;
	int rc = uv_spawn(p->loop, &s->proc, &po);
	close(logfd);
	if (rc < 0)
		return sd_why(why, "%s: cannot start: %s", p->worker_path, uv_strerror(rc));
	s->proc_live = 1;
	s->proc_open = 1;
	s->handles++;
	cJSON *ev = server_event(p, s);
	cJSON_AddNumberToObject(ev, "pid", s->proc.pid);
	if (s->offer && p->cfg.emulate)
		cJSON_AddStringToObject(ev, "pace", pace);
	p->hooks.journal(p->ctx, SD_EV_STARTED, ev);
	return 0;
}

static void notice_server(struct sd_provider *p, struct server *s, double t, double ends_at,
                          int capped, int batch_size)
{
	s->t_notice = t;
	s->t_notice_end = ends_at;
	double secs = ends_at - t;
	set_state(p, s, ST_NOTICE);
	cJSON *e = server_event_at(p, s, t);
	cJSON_AddNumberToObject(e, "seconds", secs);
	cJSON_AddBoolToObject(e, "capped", capped);
	if (batch_size)
		cJSON_AddNumberToObject(e, "batch_size", batch_size);
	p->hooks.journal(p->ctx, SD_EV_NOTICE, e);
	p->hooks.notice(p->ctx, s->id, secs);
}

/* The provider takes the server at market time t. */
static void revoke_server(struct sd_provider *p, struct server *s, double t, double launched,
                          int capped)
{
	if (s->t_end < 0) {
		s->t_end = t;
		p->usd_done += server_usd(p, s);
	}
	cJSON *e = server_event_at(p, s, t);
	cJSON_ReplaceItemInObject(e, "state", cJSON_CreateString("revoked"));
	cJSON_AddNumberToObject(e, "lifetime_s", t - launched);
	cJSON_AddNumberToObject(e, "notice_s", s->t_notice >= 0 ? t - s->t_notice : 0);
	cJSON_AddBoolToObject(e, "capped", capped);
	cJSON_AddNumberToObject(e, "billed_s", fmax(s->t_end - s->t_request, s->offer->billing_minimum_seconds));
	p->hooks.journal(p->ctx, SD_EV_REVOKED, e);
	set_state(p, s, ST_REVOKED);
	if (s->proc_live) {
		/* The provider takes the machine: ACPI shutdown, then power off. */
		s->term_sent = 0;
		on_escalate(&s->timer);
	} else {
		finish_server(p, s, ST_REVOKED);
	}
}

static void on_market_event(void *ctx, const struct sd_market_event *ev)
{
	struct sd_provider *p = ctx;
	if (ev->kind == SD_MARKET_STORM_BEGIN || ev->kind == SD_MARKET_STORM_END) {
		cJSON *e = cJSON_CreateObject();
		cJSON_AddStringToObject(e, "offer", ev->offer->id);
		cJSON_AddStringToObject(e, "zone", ev->offer->zone);
		cJSON_AddNumberToObject(e, "market_time", ev->time);
		p->hooks.journal(p->ctx, ev->kind == SD_MARKET_STORM_BEGIN ? SD_EV_STORM_BEGIN : SD_EV_STORM_END, e);
		return;
	}
	struct server *s = find_market(p, ev->server);
	if (!s)
		return;
	char *why = NULL;
	switch (ev->kind) {
	case SD_MARKET_BOOTED:
		set_state(p, s, ST_BOOTING);
		if (spawn(p, s, &why) < 0) {
			cJSON *e = server_event(p, s);
			cJSON_AddStringToObject(e, "error", why);
			p->hooks.journal(p->ctx, SD_EV_ERROR, e);
			finish_server(p, s, ST_FAILED);
		}
		break;
	case SD_MARKET_NOTICE:
		notice_server(p, s, ev->time, ev->ends_at, ev->capped, ev->batch ? ev->batch_size : 0);
		break;
	case SD_MARKET_REVOKED:
	case SD_MARKET_CAPPED:
		s->mid = 0;   /* the market forgot it already */
		revoke_server(p, s, ev->time, ev->launched_at, ev->kind == SD_MARKET_CAPPED);
		break;
	default:
		break;
	}
	free(why);
}

static void arm_market(struct sd_provider *p);

static void on_market_timer(uv_timer_t *t)
{
	struct sd_provider *p = t->data;
	sd_market_advance(p->market, mnow(p), on_market_event, p);
	arm_market(p);
}

static void arm_market(struct sd_provider *p)
{
	if (!p->market || p->closing)
		return;
	double next = sd_market_next_event_time(p->market);
	if (!isfinite(next)) {
		uv_timer_stop(&p->market_timer);
		return;
	}
	double delay = next - mnow(p);
	uv_timer_start(&p->market_timer, on_market_timer, delay > 0 ? (uint64_t)ceil(delay * 1000) : 0, 0);
}

static int cmp_action(const void *a, const void *b)
{
	const struct action *x = a, *y = b;
	if (x->t != y->t)
		return x->t < y->t ? -1 : 1;
	/* Same time: file order (the trace is sorted), notices before revokes. */
	if (x->ev->line != y->ev->line)
		return x->ev->line - y->ev->line;
	return (int)x->kind - (int)y->kind;
}

static void build_actions(struct sd_provider *p, const struct sd_trace *tr)
{
	double max_notice = 0;
	for (int i = 0; p->cat && i < p->cat->noffers; i++)
		max_notice = fmax(max_notice, p->cat->offers[i].notice_seconds);
	max_notice *= p->cfg.notice_scale > 0 ? p->cfg.notice_scale : 1;
	p->actions = sd_calloc((size_t)tr->n * 2 + 1, sizeof *p->actions);
	for (int i = 0; i < tr->n; i++) {
		const struct sd_trace_event *e = &tr->events[i];
		struct action *a = &p->actions[p->nactions++];
		a->t = e->t;
		a->ev = e;
		switch (e->kind) {
		case SD_TRACE_REVOKE:
			a->kind = ACT_REVOKE;
			a->notice = e->seconds >= 0 ? e->seconds : max_notice;
			struct action *n = &p->actions[p->nactions++];
			*n = *a;
			n->kind = ACT_NOTICE;
			n->t = fmax(0, e->t - a->notice);
			break;
		case SD_TRACE_STOCKOUT: a->kind = ACT_STOCKOUT; break;
		case SD_TRACE_PRICE: a->kind = ACT_PRICE; break;
		case SD_TRACE_COMMAND: a->kind = ACT_COMMAND; break;
		}
	}
	qsort(p->actions, (size_t)p->nactions, sizeof *p->actions, cmp_action);
}

static void trace_skipped(struct sd_provider *p, const struct action *a, const char *why)
{
	cJSON *e = cJSON_CreateObject();
	cJSON_AddNumberToObject(e, "line", a->ev->line);
	cJSON_AddNumberToObject(e, "market_time", a->t);
	cJSON_AddStringToObject(e, "reason", why);
	p->hooks.journal(p->ctx, SD_EV_TRACE_SKIPPED, e);
}

static void run_action(struct sd_provider *p, const struct action *a)
{
	const struct sd_trace_event *e = a->ev;
	struct server *s = NULL;
	if (a->kind == ACT_NOTICE || a->kind == ACT_REVOKE) {
		s = find(p, e->server);
		if (!s || gone(s) || !s->offer) {
			if (a->kind == ACT_REVOKE)
				trace_skipped(p, a, "no such market server at that time");
			return;
		}
	}
	switch (a->kind) {
	case ACT_NOTICE:
		if (s->st != ST_NOTICE)
			notice_server(p, s, a->t, e->t, 0, 0);
		break;
	case ACT_REVOKE:
		if (s->mid && p->market) {
			sd_market_release(p->market, s->mid);
			s->mid = 0;
		}
		revoke_server(p, s, a->t, s->t_request, 0);
		break;
	case ACT_STOCKOUT: {
		struct stockout *so = NULL;
		for (int i = 0; i < p->nstockouts; i++)
			if (!strcmp(p->stockouts[i].zone, e->zone))
				so = &p->stockouts[i];
		if (!so && p->nstockouts < 64)
			so = &p->stockouts[p->nstockouts++];
		if (!so)
			break;
		snprintf(so->zone, sizeof so->zone, "%s", e->zone);
		so->until = e->t + e->seconds;
		cJSON *j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "zone", e->zone);
		cJSON_AddNumberToObject(j, "market_time", a->t);
		cJSON_AddNumberToObject(j, "seconds", e->seconds);
		p->hooks.journal(p->ctx, SD_EV_ZONE_EXHAUSTED, j);
		break;
	}
	case ACT_PRICE: {
		const struct sd_offer *o = p->cat ? sd_catalog_find(p->cat, e->offer) : NULL;
		if (!o) {
			trace_skipped(p, a, "no such offer in the catalog");
			break;
		}
		/* The market's price now; the catalog keeps the one it was loaded with. */
		p->price[o->index] = e->usd_per_hour;
		cJSON *j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "offer", o->id);
		cJSON_AddNumberToObject(j, "usd_per_hour", e->usd_per_hour);
		cJSON_AddNumberToObject(j, "market_time", a->t);
		p->hooks.journal(p->ctx, SD_EV_PRICE, j);
		break;
	}
	case ACT_COMMAND:
		if (p->hooks.command)
			p->hooks.command(p->ctx, e->command);
		break;
	}
}

static void arm_trace(struct sd_provider *p);

static void on_trace_timer(uv_timer_t *t)
{
	struct sd_provider *p = t->data;
	double now = mnow(p);
	while (p->next_action < p->nactions && p->actions[p->next_action].t <= now + 1e-9) {
		/* Let the market catch up first so events interleave in time order. */
		if (p->market)
			sd_market_advance(p->market, fmax(sd_market_now(p->market), p->actions[p->next_action].t),
			                  on_market_event, p);
		run_action(p, &p->actions[p->next_action++]);
	}
	arm_market(p);
	arm_trace(p);
}

static void arm_trace(struct sd_provider *p)
{
	if (p->closing || p->next_action >= p->nactions)
		return;
	double delay = p->actions[p->next_action].t - mnow(p);
	uv_timer_start(&p->trace_timer, on_trace_timer, delay > 0 ? (uint64_t)ceil(delay * 1000) : 0, 0);
}

static int zone_exhausted(const struct sd_provider *p, const char *zone)
{
	for (int i = 0; i < p->nstockouts; i++)
		if (!strcmp(p->stockouts[i].zone, zone) && mnow(p) < p->stockouts[i].until)
			return 1;
	return 0;
}

int sd_provider_create(struct sd_provider **out, uv_loop_t *loop,
                       const struct sd_provider_config *cfg,
                       const struct sd_provider_hooks *hooks, void *ctx, char **why)
{
	*out = NULL;
	struct sd_provider *p = sd_calloc(1, sizeof *p);
	p->loop = loop;
	p->cfg = *cfg;
	if (!(p->cfg.grace_seconds > 0))
		p->cfg.grace_seconds = 5;
	snprintf(p->worker_path, sizeof p->worker_path, "%s", cfg->worker_path);
	snprintf(p->run_dir, sizeof p->run_dir, "%s", cfg->run_dir);
	p->next_id = cfg->last_server > 0 ? cfg->last_server : 0;
	p->usd_done = cfg->usd_before > 0 ? cfg->usd_before : 0;
	p->hooks = *hooks;
	p->ctx = ctx;
	p->t0_ms = uv_now(loop);
	if (cfg->catalog_path) {
		if (sd_catalog_load(&p->cat, cfg->catalog_path, why) < 0) {
			free(p);
			return -1;
		}
		struct sd_market_knobs k;
		sd_market_knobs_init(&k);
		k.seed = cfg->seed;
		k.hazard_scale = cfg->hazard_scale;
		k.boot_scale = cfg->boot_scale;
		k.notice_scale = cfg->notice_scale > 0 ? cfg->notice_scale : 1;
		if (cfg->trace)
			k.hazard_scale = 1e-6;   /* the trace alone revokes */
		if (sd_market_new(&p->market, p->cat, &k, why) < 0) {
			sd_catalog_free(p->cat);
			free(p);
			return -1;
		}
		p->price = sd_malloc((size_t)p->cat->noffers * sizeof *p->price);
		for (int i = 0; i < p->cat->noffers; i++) {
			const struct sd_offer *o = &p->cat->offers[i];
			p->price[i] = o->usd_per_hour;
			if (o->images_per_sec * o->gpu_count > p->max_speed)
				p->max_speed = o->images_per_sec * o->gpu_count;
		}
	}
	uv_timer_init(loop, &p->market_timer);
	p->market_timer.data = p;
	uv_timer_init(loop, &p->trace_timer);
	p->trace_timer.data = p;
	if (cfg->trace) {
		build_actions(p, cfg->trace);
		arm_trace(p);
	}
	*out = p;
	return 0;
}

int sd_provider_acquire(struct sd_provider *p, const char *offer_id, char *server, size_t len,
                        char **why)
{
	const struct sd_offer *o = NULL;
	if (strcmp(offer_id, "local")) {
		if (!p->cat)
			return sd_why(why, "%s: no market catalog loaded (only 'local' servers)", offer_id);
		o = sd_catalog_find(p->cat, offer_id);
		if (!o)
			return sd_why(why, "%s: no such offer in %s", offer_id, p->cat->file);
	}
	struct server *s = sd_calloc(1, sizeof *s);
	s->p = p;
	s->offer = o;
	s->t_request = mnow(p);
	s->t_end = -1;
	s->t_notice = -1;
	s->trace_revoke_at = -1;
	s->usd_per_hour = o ? p->price[o->index] : 0;
	s->price_estimated = o && o->price_source && !strncmp(o->price_source, "estimated", 9);
	snprintf(s->id, sizeof s->id, "s%d", ++p->next_id);
	uv_timer_init(p->loop, &s->timer);
	s->timer.data = s;
	s->timer_open = 1;
	s->handles = 1;
	s->next = p->servers;
	p->servers = s;
	if (o) {
		sd_market_advance(p->market, mnow(p), on_market_event, p);
		int rc = zone_exhausted(p, o->zone) ? SD_MARKET_EFULL : sd_market_launch(p->market, o, &s->mid, why);
		if (rc < 0) {
			cJSON *e = cJSON_CreateObject();
			cJSON_AddStringToObject(e, "offer", o->id);
			cJSON_AddStringToObject(e, "zone", o->zone);
			cJSON_AddStringToObject(e, "reason", rc == SD_MARKET_EINVAL ? "INVALID_OFFER"
			                        : "ZONE_RESOURCE_POOL_EXHAUSTED");
			cJSON_AddStringToObject(e, "detail", why && *why ? *why : "");
			p->hooks.journal(p->ctx, SD_EV_STOCKOUT, e);
			s->st = ST_FAILED;
			s->t_end = s->t_request;
			s->timer_open = 0;
			uv_close((uv_handle_t *)&s->timer, on_handle_closed);
			return sd_why(why, "%s: %s: the zone has no capacity for this offer now "
			              "(ZONE_RESOURCE_POOL_EXHAUSTED)", o->id, o->zone);
		}
	}
	cJSON *ev = server_event(p, s);
	if (o)
		cJSON_AddBoolToObject(ev, "emulated", p->cfg.emulate);
	p->hooks.journal(p->ctx, SD_EV_ACQUIRED, ev);
	if (o) {
		set_state(p, s, ST_PROVISIONING);
		arm_market(p);
	} else {
		set_state(p, s, ST_BOOTING);
		if (spawn(p, s, why) < 0) {
			finish_server(p, s, ST_FAILED);
			return -1;
		}
	}
	snprintf(server, len, "%s", s->id);
	return 0;
}

int sd_provider_release(struct sd_provider *p, const char *server, const char *reason, char **why)
{
	struct server *s = find(p, server);
	if (!s || gone(s))
		return sd_why(why, "drop %s: no such server", server);
	s->releasing = 1;
	if (!s->proc_live) {
		/* Still provisioning: nothing runs yet, stop billing now. */
		finish_server(p, s, ST_RELEASED);
		p->hooks.journal(p->ctx, SD_EV_RELEASED, server_event(p, s));
		return 0;
	}
	p->hooks.notice(p->ctx, s->id, 0);
	/* If the worker does not leave by itself, terminate it. */
	s->term_sent = 0;
	uv_timer_start(&s->timer, on_escalate, (uint64_t)(p->cfg.grace_seconds * 1000), 0);
	return 0;
}

void sd_provider_worker_event(struct sd_provider *p, const char *server, enum sd_worker_event e)
{
	struct server *s = find(p, server);
	if (!s || gone(s) || s->st == ST_NOTICE)
		return;
	if (e == SD_WORKER_CONNECTED)
		set_state(p, s, ST_JOINING);
	else if (e == SD_WORKER_TRAINING)
		set_state(p, s, ST_TRAINING);
}

void sd_provider_release_all(struct sd_provider *p)
{
	for (struct server *s = p->servers; s; s = s->next) {
		if (gone(s))
			continue;
		s->releasing = 1;
		if (!s->proc_live) {
			finish_server(p, s, ST_RELEASED);
			p->hooks.journal(p->ctx, SD_EV_RELEASED, server_event(p, s));
		}
	}
}

int sd_provider_has_server(const struct sd_provider *p, const char *server)
{
	const struct server *s = find(p, server);
	return s && !gone(s);
}

int sd_provider_running(const struct sd_provider *p)
{
	int n = 0;
	for (const struct server *s = p->servers; s; s = s->next)
		n += s->proc_live;
	return n;
}

void sd_provider_signal_all(struct sd_provider *p, int sig)
{
	for (struct server *s = p->servers; s; s = s->next)
		if (s->proc_live)
			uv_process_kill(&s->proc, sig);
}

double sd_provider_usd_spent(const struct sd_provider *p)
{
	double usd = p->usd_done;
	for (const struct server *s = p->servers; s; s = s->next)
		if (s->t_end < 0)
			usd += server_usd(p, s);
	return usd;
}

double sd_provider_usd_per_hour(const struct sd_provider *p)
{
	double r = 0;
	for (const struct server *s = p->servers; s; s = s->next)
		if (s->t_end < 0 && s->offer)
			r += s->usd_per_hour;
	return r;
}

void sd_provider_price_gaps(const struct sd_provider *p, struct sd_price_gaps *g)
{
	memset(g, 0, sizeof *g);
	for (const struct server *s = p->servers; s; s = s->next) {
		int live = s->t_end < 0;
		if (!s->offer) {
			g->ran_unpriced++;
			g->live_unpriced += live;
		} else if (s->price_estimated) {
			g->ran_estimated++;
			g->live_estimated += live;
		}
	}
}

int sd_provider_list(const struct sd_provider *p, struct sd_server_info *out, int max)
{
	int n = 0;
	for (const struct server *s = p->servers; s; s = s->next)
		n++;
	/* The list is newest first; hand it out oldest first. */
	int total = n, i = 0;
	for (const struct server *s = p->servers; s; s = s->next, i++) {
		int at = total - 1 - i;
		if (at >= max)
			continue;
		struct sd_server_info *o = &out[at];
		double now = mnow(p);
		o->id = s->id;
		o->offer = s->offer;
		o->state = state_names[s->st];
		o->uptime_s = (s->t_end >= 0 ? s->t_end : now) - s->t_request;
		o->usd = server_usd(p, s);
		o->usd_per_hour = s->usd_per_hour;
		o->price_estimated = s->price_estimated;
		o->notice_left_s = s->st == ST_NOTICE ? fmax(0, s->t_notice_end - now) : 0;
		o->emulated = s->offer && p->cfg.emulate;
		o->gone = gone(s);
		o->gone_for_s = s->t_end >= 0 ? now - s->t_end : 0;
	}
	return total < max ? total : max;
}

int sd_provider_live(const struct sd_provider *p, const struct sd_offer *o)
{
	return p->market ? sd_market_live(p->market, o) : -1;
}

const struct sd_catalog *sd_provider_catalog(const struct sd_provider *p)
{
	return p->cat;
}

const double *sd_provider_prices(const struct sd_provider *p)
{
	return p->price;
}

double sd_provider_offer_usd_per_hour(const struct sd_provider *p, const struct sd_offer *o)
{
	if (!p->cat || o < p->cat->offers || o >= p->cat->offers + p->cat->noffers)
		return NAN;
	return p->price[o->index];
}

void sd_provider_close(struct sd_provider *p)
{
	p->closing = 1;
	uv_timer_stop(&p->market_timer);
	uv_close((uv_handle_t *)&p->market_timer, NULL);
	uv_close((uv_handle_t *)&p->trace_timer, NULL);
	for (struct server *s = p->servers, *next; s; s = next) {
		next = s->next;   /* s may be freed by the close callbacks later */
		if (s->proc_live)
			uv_process_kill(&s->proc, SIGKILL);
		if (s->t_end < 0) {
			s->t_end = mnow(p);
			p->usd_done += server_usd(p, s);
		}
		if (s->proc_open) {
			s->proc_open = 0;
			uv_close((uv_handle_t *)&s->proc, on_handle_closed);
		}
		if (s->timer_open) {
			s->timer_open = 0;
			uv_close((uv_handle_t *)&s->timer, on_handle_closed);
		}
	}
}

void sd_provider_free(struct sd_provider *p)
{
	if (!p)
		return;
	while (p->servers) {
		struct server *s = p->servers;
		p->servers = s->next;
		free(s);
	}
	sd_market_free(p->market);
	sd_catalog_free(p->cat);
	free(p->price);
	free(p->actions);
	free(p);
}
