/* src/provider/sim/sim.c - the `sim` provider: the simulated spot market
 * (DESIGN.md "Market and providers").  The market model
 * (src/market/market-model.c) samples each machine's boot time and decides
 * when it is revoked, with a notice first; a trace (src/market/trace.h)
 * can replace its revocations with scripted ones, close zones, change
 * prices and issue operator commands at fixed market times.  A machine that
 * boots is reported RUNNING and the fleet starts a local spotdeck-worker on
 * it, paced to the offer's GPU speed when emulating.  Market time is the
 * fleet's clock (sd_fleet_now). */
#include "config.h"

#include "src/provider/provider.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/errors.h"
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

/* A machine of the market, by the fleet's server id. */
struct machine {
	char id[16];
	const struct sd_offer *offer;
	sd_server_id mid;                /* market id; 0 once the market forgot it */
	double t_request;
	int noticed;
	int gone;                        /* revoked, or given back */
	struct machine *next;
};

struct sim_provider {
	uv_loop_t *loop;
	struct sd_fleet *fleet;
	struct sd_catalog *cat;          /* as loaded: read-only */
	double *price;                   /* per catalog offer (by index): its price now, USD/h */
	struct sd_market *market;
	uv_timer_t market_timer, trace_timer;
	int emulate;
	double notice_scale;
	double max_speed;                /* fastest offer's images/s per server */
	struct machine *machines;
	int closing;
	struct action *actions;          /* trace replay */
	int nactions, next_action;
	struct stockout stockouts[64];
	int nstockouts;
};

static double mnow(const struct sim_provider *p)
{
	return sd_fleet_now(p->fleet);
}

static struct machine *find(const struct sim_provider *p, const char *id)
{
	for (struct machine *m = p->machines; m; m = m->next)
		if (!strcmp(m->id, id))
			return m;
	return NULL;
}

static struct machine *find_market(const struct sim_provider *p, sd_server_id mid)
{
	for (struct machine *m = p->machines; m; m = m->next)
		if (m->mid == mid)
			return m;
	return NULL;
}

static void forget_market(struct sim_provider *p, struct machine *m)
{
	if (m->mid && p->market)
		sd_market_release(p->market, m->mid);
	m->mid = 0;
}

static void report(struct sim_provider *p, struct sd_provider_event *ev)
{
	sd_fleet_report(p->fleet, ev);
}

static void notice_machine(struct sim_provider *p, struct machine *m, double t, double ends_at,
                           int capped, int batch_size)
{
	m->noticed = 1;
	struct sd_provider_event ev = { .kind = SD_PROVIDER_NOTICE, .server = m->id, .time = t,
	                                .ends_at = ends_at, .capped = capped, .batch_size = batch_size };
	report(p, &ev);
}

static void revoke_machine(struct sim_provider *p, struct machine *m, double t, double launched,
                           int capped)
{
	m->gone = 1;
	struct sd_provider_event ev = { .kind = SD_PROVIDER_REVOKED, .server = m->id, .time = t,
	                                .launched_at = launched, .capped = capped };
	report(p, &ev);
}

static void on_market_event(void *ctx, const struct sd_market_event *ev)
{
	struct sim_provider *p = ctx;
	if (ev->kind == SD_MARKET_STORM_BEGIN || ev->kind == SD_MARKET_STORM_END) {
		cJSON *e = cJSON_CreateObject();
		cJSON_AddStringToObject(e, "offer", ev->offer->id);
		cJSON_AddStringToObject(e, "zone", ev->offer->zone);
		cJSON_AddNumberToObject(e, "market_time", ev->time);
		sd_fleet_journal(p->fleet, ev->kind == SD_MARKET_STORM_BEGIN ? SD_EV_STORM_BEGIN
		                                                             : SD_EV_STORM_END, e);
		return;
	}
	struct machine *m = find_market(p, ev->server);
	if (!m || m->gone)
		return;
	switch (ev->kind) {
	case SD_MARKET_BOOTED: {
		/* Emulated GPU: the worker runs at the offer's measured speed
		 * relative to the fastest offer's. */
		double pace = p->emulate && p->max_speed > 0
		              ? m->offer->images_per_sec * m->offer->gpu_count / p->max_speed : 0;
		struct sd_provider_event e = { .kind = SD_PROVIDER_RUNNING, .server = m->id,
		                               .time = ev->time, .pace = pace };
		report(p, &e);
		break;
	}
	case SD_MARKET_NOTICE:
		notice_machine(p, m, ev->time, ev->ends_at, ev->capped, ev->batch ? ev->batch_size : 0);
		break;
	case SD_MARKET_REVOKED:
	case SD_MARKET_CAPPED:
		m->mid = 0;   /* the market forgot it already */
		revoke_machine(p, m, ev->time, ev->launched_at, ev->kind == SD_MARKET_CAPPED);
		break;
	default:
		break;
	}
}

static void arm_market(struct sim_provider *p);

static void on_market_timer(uv_timer_t *t)
{
	struct sim_provider *p = t->data;
	sd_market_advance(p->market, mnow(p), on_market_event, p);
	arm_market(p);
}

static void arm_market(struct sim_provider *p)
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

/* ---- trace replay ---- */

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

static void build_actions(struct sim_provider *p, const struct sd_trace *tr)
{
	double max_notice = 0;
	for (int i = 0; i < p->cat->noffers; i++)
		max_notice = fmax(max_notice, p->cat->offers[i].notice_seconds);
	max_notice *= p->notice_scale;
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

static void trace_skipped(struct sim_provider *p, const struct action *a, const char *why)
{
	cJSON *e = cJSON_CreateObject();
	cJSON_AddNumberToObject(e, "line", a->ev->line);
	cJSON_AddNumberToObject(e, "market_time", a->t);
	cJSON_AddStringToObject(e, "reason", why);
	sd_fleet_journal(p->fleet, SD_EV_TRACE_SKIPPED, e);
}

static void close_zone(struct sim_provider *p, const struct action *a)
{
	const struct sd_trace_event *e = a->ev;
	struct stockout *so = NULL;
	for (int i = 0; i < p->nstockouts; i++)
		if (!strcmp(p->stockouts[i].zone, e->zone))
			so = &p->stockouts[i];
	if (!so && p->nstockouts < 64)
		so = &p->stockouts[p->nstockouts++];
	if (!so)
		return;
	snprintf(so->zone, sizeof so->zone, "%s", e->zone);
	so->until = e->t + e->seconds;
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "zone", e->zone);
	cJSON_AddNumberToObject(j, "market_time", a->t);
	cJSON_AddNumberToObject(j, "seconds", e->seconds);
	sd_fleet_journal(p->fleet, SD_EV_ZONE_EXHAUSTED, j);
}

static void change_price(struct sim_provider *p, const struct action *a)
{
	const struct sd_offer *o = sd_catalog_find(p->cat, a->ev->offer);
	if (!o) {
		trace_skipped(p, a, "no such offer in the catalog");
		return;
	}
	/* The market's price now; the catalog keeps the one it was loaded with. */
	p->price[o->index] = a->ev->usd_per_hour;
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "offer", o->id);
	cJSON_AddNumberToObject(j, "usd_per_hour", a->ev->usd_per_hour);
	cJSON_AddNumberToObject(j, "market_time", a->t);
	sd_fleet_journal(p->fleet, SD_EV_PRICE, j);
}

static void run_action(struct sim_provider *p, const struct action *a)
{
	const struct sd_trace_event *e = a->ev;
	struct machine *m = NULL;
	if (a->kind == ACT_NOTICE || a->kind == ACT_REVOKE) {
		m = find(p, e->server);
		if (!m || m->gone) {
			if (a->kind == ACT_REVOKE)
				trace_skipped(p, a, "no such market server at that time");
			return;
		}
	}
	switch (a->kind) {
	case ACT_NOTICE:
		if (!m->noticed)
			notice_machine(p, m, a->t, e->t, 0, 0);
		break;
	case ACT_REVOKE:
		forget_market(p, m);
		revoke_machine(p, m, a->t, m->t_request, 0);
		break;
	case ACT_STOCKOUT:
		close_zone(p, a);
		break;
	case ACT_PRICE:
		change_price(p, a);
		break;
	case ACT_COMMAND:
		sd_fleet_command(p->fleet, e->command);
		break;
	}
}

static void arm_trace(struct sim_provider *p);

static void on_trace_timer(uv_timer_t *t)
{
	struct sim_provider *p = t->data;
	double now = mnow(p);
	while (!p->closing && p->next_action < p->nactions &&
	       p->actions[p->next_action].t <= now + 1e-9) {
		/* Let the market catch up first so events interleave in time order. */
		sd_market_advance(p->market, fmax(sd_market_now(p->market), p->actions[p->next_action].t),
		                  on_market_event, p);
		run_action(p, &p->actions[p->next_action++]);
	}
	arm_market(p);
	arm_trace(p);
}

static void arm_trace(struct sim_provider *p)
{
	if (p->closing || p->next_action >= p->nactions)
		return;
	double delay = p->actions[p->next_action].t - mnow(p);
	uv_timer_start(&p->trace_timer, on_trace_timer, delay > 0 ? (uint64_t)ceil(delay * 1000) : 0, 0);
}

static int zone_exhausted(const struct sim_provider *p, const char *zone)
{
	for (int i = 0; i < p->nstockouts; i++)
		if (!strcmp(p->stockouts[i].zone, zone) && mnow(p) < p->stockouts[i].until)
			return 1;
	return 0;
}

/* ---- the operations ---- */

static int sim_create(struct sd_provider **out, const struct sd_provider_env *env, char **why)
{
	*out = NULL;
	if (!env->catalog_path)
		return sd_why(why, "provider sim: no market catalog given");
	struct sim_provider *p = sd_calloc(1, sizeof *p);
	p->loop = env->loop;
	p->fleet = env->fleet;
	p->emulate = env->emulate;
	p->notice_scale = env->notice_scale > 0 ? env->notice_scale : 1;
	if (sd_catalog_load(&p->cat, env->catalog_path, why) < 0) {
		free(p);
		return -1;
	}
	struct sd_market_knobs k;
	sd_market_knobs_init(&k);
	k.seed = env->seed;
	k.hazard_scale = env->hazard_scale;
	k.boot_scale = env->boot_scale;
	k.notice_scale = p->notice_scale;
	if (env->trace)
		k.hazard_scale = 1e-6;   /* the trace alone revokes */
	if (sd_market_new(&p->market, p->cat, &k, why) < 0) {
		sd_catalog_free(p->cat);
		free(p);
		return -1;
	}
	p->price = sd_malloc((size_t)p->cat->noffers * sizeof *p->price + 1);
	for (int i = 0; i < p->cat->noffers; i++) {
		const struct sd_offer *o = &p->cat->offers[i];
		p->price[i] = o->usd_per_hour;
		if (o->images_per_sec * o->gpu_count > p->max_speed)
			p->max_speed = o->images_per_sec * o->gpu_count;
	}
	uv_timer_init(p->loop, &p->market_timer);
	p->market_timer.data = p;
	uv_timer_init(p->loop, &p->trace_timer);
	p->trace_timer.data = p;
	if (env->trace) {
		build_actions(p, env->trace);
		arm_trace(p);
	}
	*out = (struct sd_provider *)(void *)p;
	return 0;
}

static int sim_acquire(struct sd_provider *base, const char *server, const struct sd_offer *o,
                       char **why)
{
	struct sim_provider *p = (struct sim_provider *)(void *)base;
	(void)why;
	struct machine *m = sd_calloc(1, sizeof *m);
	snprintf(m->id, sizeof m->id, "%s", server);
	m->offer = o;
	m->t_request = mnow(p);
	m->next = p->machines;
	p->machines = m;
	sd_market_advance(p->market, mnow(p), on_market_event, p);
	char *detail = NULL;
	int rc = zone_exhausted(p, o->zone) ? SD_MARKET_EFULL : sd_market_launch(p->market, o, &m->mid, &detail);
	if (rc < 0) {
		/* The market knows at once; a cloud says so inside its operation. */
		m->gone = 1;
		struct sd_provider_event ev = {
			.kind = SD_PROVIDER_STOCKOUT, .server = server, .time = mnow(p), .zone = o->zone,
			.code = rc == SD_MARKET_EINVAL ? "INVALID_OFFER" : "ZONE_RESOURCE_POOL_EXHAUSTED",
			.message = detail ? detail : "",
		};
		report(p, &ev);
		free(detail);
		return 0;
	}
	arm_market(p);
	return 0;
}

static void sim_release(struct sd_provider *base, const char *server)
{
	struct sim_provider *p = (struct sim_provider *)(void *)base;
	struct machine *m = find(p, server);
	if (!m)
		return;
	m->gone = 1;
	forget_market(p, m);
	arm_market(p);
}

static const struct sd_catalog *sim_catalog(const struct sd_provider *base)
{
	const struct sim_provider *p = (const struct sim_provider *)(const void *)base;
	return p->cat;
}

static const double *sim_prices(const struct sd_provider *base)
{
	const struct sim_provider *p = (const struct sim_provider *)(const void *)base;
	return p->price;
}

static int sim_live(const struct sd_provider *base, const struct sd_offer *o)
{
	const struct sim_provider *p = (const struct sim_provider *)(const void *)base;
	return sd_market_live(p->market, o);
}

/* The simulator's machines are local processes the fleet owns: nothing
 * of its own to wait for. */
static void sim_close(struct sd_provider *base, sd_provider_closed_cb done, void *arg)
{
	struct sim_provider *p = (struct sim_provider *)(void *)base;
	p->closing = 1;
	uv_timer_stop(&p->market_timer);
	uv_close((uv_handle_t *)&p->market_timer, NULL);
	uv_close((uv_handle_t *)&p->trace_timer, NULL);
	done(arg);
}

static void sim_free(struct sd_provider *base)
{
	struct sim_provider *p = (struct sim_provider *)(void *)base;
	while (p->machines) {
		struct machine *m = p->machines;
		p->machines = m->next;
		free(m);
	}
	sd_market_free(p->market);
	sd_catalog_free(p->cat);
	free(p->price);
	free(p->actions);
	free(p);
}

const struct sd_provider_ops sd_provider_sim = {
	.name = "sim",
	.description = "the simulated spot market (GCE 2019 measurements), local worker processes",
	.emulated = 1,
	.check = NULL,
	.create = sim_create,
	.acquire = sim_acquire,
	.release = sim_release,
	.catalog = sim_catalog,
	.prices = sim_prices,
	.live = sim_live,
	.close = sim_close,
	.free = sim_free,
};
