/* src/market/autopilot.c - the autopilot's policy: the objective's parser, the
 * closed-form estimate of a cluster's remaining time and cost, and the
 * greedy choice of actions (see autopilot.h for the model). */
#include "src/market/autopilot.h"

#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "src/base/errors.h"
#include "src/market/market-model.h"
#include "src/market/replacement.h"

/* ---- the objective ---------------------------------------------------------- */

void sd_autopilot_objective_init(struct sd_autopilot_objective *o)
{
	memset(o, 0, sizeof *o);
	o->goal = SD_AUTOPILOT_DEADLINE;
	o->confidence = SD_AUTOPILOT_CONFIDENCE;
	o->max_servers = 8;
	o->every_seconds = SD_AUTOPILOT_EVERY_SECONDS;
	o->hold_seconds = SD_AUTOPILOT_HOLD_SECONDS;
	o->max_price_age_seconds = SD_AUTOPILOT_MAX_PRICE_AGE_SECONDS;
}

/* A duration field: a number of seconds or a string such as "6h". */
static int parse_seconds(const cJSON *v, const char *name, const char *field, double *out, char **why)
{
	char what[128];
	snprintf(what, sizeof what, "%s: autopilot.%s", name, field);
	if (cJSON_IsNumber(v)) {
		if (!(v->valuedouble > 0) || !isfinite(v->valuedouble))
			return sd_why(why, "%s: expected a positive number of seconds, got %g", what, v->valuedouble);
		*out = v->valuedouble;
		return 0;
	}
	if (cJSON_IsString(v))
		return sd_plan_parse_duration(v->valuestring, what, out, why);
	return sd_why(why, "%s: expected a duration such as \"6h\" or a number of seconds", what);
}

/* A pattern has the four parts of an offer id, provider/zone/gpu/kind. */
static bool pattern_shape_ok(const char *p)
{
	int slashes = 0;
	for (const char *c = p; *c; c++)
		slashes += *c == '/';
	return slashes == 3 && p[0] != '/' && p[strlen(p) - 1] != '/' && !strstr(p, "//");
}

static int parse_allow(struct sd_autopilot_objective *out, const cJSON *a, const struct sd_catalog *cat,
                       const char *name, char **why)
{
	int n = cJSON_IsArray(a) ? cJSON_GetArraySize(a) : -1;
	if (n < 1 || n > SD_AUTOPILOT_MAX_ALLOW)
		return sd_why(why, "%s: autopilot.allow: expected an array of 1 to %d offer patterns such as "
		              "\"gce/*/v100/spot\"", name, SD_AUTOPILOT_MAX_ALLOW);
	for (int i = 0; i < n; i++) {
		const cJSON *v = cJSON_GetArrayItem(a, i);
		if (!cJSON_IsString(v) || !v->valuestring[0] || strlen(v->valuestring) >= sizeof out->allow[0] ||
		    !pattern_shape_ok(v->valuestring))
			return sd_why(why, "%s: autopilot.allow[%d]: expected a pattern provider/zone/gpu/kind such as "
			              "\"gce/*/v100/spot\" (at most %zu bytes)", name, i, sizeof out->allow[0] - 1);
		snprintf(out->allow[i], sizeof out->allow[i], "%s", v->valuestring);
		bool any = !cat;
		for (int k = 0; cat && k < cat->noffers && !any; k++)
			any = fnmatch(out->allow[i], cat->offers[k].id, FNM_PATHNAME | FNM_CASEFOLD) == 0;
		if (!any)
			return sd_why(why, "%s: autopilot.allow[%d]: \"%s\" matches no offer of %s", name, i,
			              v->valuestring, cat->file);
	}
	out->nallow = n;
	return 0;
}

int sd_autopilot_objective_parse(struct sd_autopilot_objective *out, const void *json, const struct sd_catalog *cat,
                                 const char *name, char **why)
{
	const cJSON *o = json;
	sd_autopilot_objective_init(out);
	if (!name)
		name = "job";
	if (!cJSON_IsObject(o))
		return sd_why(why, "%s: autopilot: expected an object such as {\"deadline\": \"6h\"}", name);
	static const char *const known[] = { "deadline", "budget", "confidence", "allow", "max_servers",
	                                     "max_usd_per_hour", "every", "hold", "max_price_age" };
	for (const cJSON *it = o->child; it; it = it->next) {
		bool ok = false;
		for (size_t k = 0; k < sizeof known / sizeof known[0] && !ok; k++)
			ok = it->string && !strcmp(it->string, known[k]);
		if (!ok)
			return sd_why(why, "%s: autopilot.%s: unknown field (known: deadline, budget, confidence, allow, "
			              "max_servers, max_usd_per_hour, every, hold, max_price_age)", name, it->string ? it->string : "?");
	}
	const cJSON *dl = cJSON_GetObjectItemCaseSensitive(o, "deadline");
	const cJSON *bd = cJSON_GetObjectItemCaseSensitive(o, "budget");
	if ((dl != NULL) == (bd != NULL))
		return sd_why(why, "%s: autopilot: expected exactly one of deadline and budget", name);
	if (dl) {
		out->goal = SD_AUTOPILOT_DEADLINE;
		if (parse_seconds(dl, name, "deadline", &out->deadline_seconds, why) < 0)
			return -1;
	} else {
		out->goal = SD_AUTOPILOT_BUDGET;
		if (!cJSON_IsNumber(bd) || !(bd->valuedouble > 0) || !isfinite(bd->valuedouble))
			return sd_why(why, "%s: autopilot.budget: expected a positive amount of USD", name);
		out->budget_usd = bd->valuedouble;
	}
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "confidence");
	if (v) {
		if (!cJSON_IsNumber(v) || !(v->valuedouble > 0) || !(v->valuedouble < 1))
			return sd_why(why, "%s: autopilot.confidence: expected a probability between 0 and 1 (exclusive)",
			              name);
		out->confidence = v->valuedouble;
	}
	v = cJSON_GetObjectItemCaseSensitive(o, "allow");
	if (v && parse_allow(out, v, cat, name, why) < 0)
		return -1;
	v = cJSON_GetObjectItemCaseSensitive(o, "max_servers");
	if (v) {
		if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < 1 ||
		    v->valuedouble > SD_PLAN_MAX_SERVERS)
			return cJSON_IsNumber(v)
			       ? sd_why(why, "%s: autopilot.max_servers: expected an integer from 1 to %d, got %g", name,
			                SD_PLAN_MAX_SERVERS, v->valuedouble)
			       : sd_why(why, "%s: autopilot.max_servers: expected an integer from 1 to %d, got another type",
			                name, SD_PLAN_MAX_SERVERS);
		out->max_servers = (int)v->valuedouble;
	}
	v = cJSON_GetObjectItemCaseSensitive(o, "max_usd_per_hour");
	if (v) {
		if (!cJSON_IsNumber(v) || !(v->valuedouble > 0) || !isfinite(v->valuedouble))
			return sd_why(why, "%s: autopilot.max_usd_per_hour: expected a positive amount of USD per hour",
			              name);
		out->max_usd_per_hour = v->valuedouble;
	}
	v = cJSON_GetObjectItemCaseSensitive(o, "every");
	if (v && parse_seconds(v, name, "every", &out->every_seconds, why) < 0)
		return -1;
	v = cJSON_GetObjectItemCaseSensitive(o, "hold");
	if (v && parse_seconds(v, name, "hold", &out->hold_seconds, why) < 0)
		return -1;
	v = cJSON_GetObjectItemCaseSensitive(o, "max_price_age");
	if (v && parse_seconds(v, name, "max_price_age", &out->max_price_age_seconds, why) < 0)
		return -1;
	return 0;
}

int sd_autopilot_objective_parse_text(struct sd_autopilot_objective *out, const char *text,
                                      const struct sd_catalog *cat, const char *name, char **why)
{
	cJSON *root = cJSON_Parse(text);
	if (!root) {
		sd_autopilot_objective_init(out);
		/* Quoting the text at the error says nothing when the error is
		 * that the text ended (a missing brace or quote): say that. */
		const char *at = cJSON_GetErrorPtr();
		if (!at || !*at)
			return sd_why(why, "%s: autopilot: invalid JSON: the text ends early (a missing '}', ']' or "
			              "'\"'?)", name ? name : "job");
		return sd_why(why, "%s: autopilot: invalid JSON near '%.20s'", name ? name : "job", at);
	}
	int rc = sd_autopilot_objective_parse(out, root, cat, name, why);
	cJSON_Delete(root);
	return rc;
}

bool sd_autopilot_allows(const struct sd_autopilot_objective *obj, const struct sd_offer *o)
{
	if (!obj->nallow)
		return true;
	for (int i = 0; i < obj->nallow; i++)
		if (fnmatch(obj->allow[i], o->id, FNM_PATHNAME | FNM_CASEFOLD) == 0)
			return true;
	return false;
}

void sd_autopilot_params_init(struct sd_autopilot_params *p)
{
	memset(p, 0, sizeof *p);
	snprintf(p->model, sizeof p->model, "resnet32");
	p->join_seconds = SD_PLAN_JOIN_SECONDS;
	p->recovery_seconds = SD_PLAN_RECOVERY_SECONDS;
	p->seed = 1;
}

const char *sd_autopilot_kind_name(enum sd_autopilot_kind k)
{
	static const char *const names[] = { "nothing", "add", "swap", "drop", "checkpoint" };
	return (unsigned)k < 5 ? names[k] : "?";
}

/* ---- the estimate ------------------------------------------------------------- */

/* What a decision knows of each catalog offer, computed once. */
struct offer_info {
	double lambda;     /* revocations per market second */
	double boot;       /* median boot, market seconds */
	double price;      /* USD/h now */
	double speed;      /* images/s of a server at the catalog's speed */
	double refuse_wait;/* expected wait until it takes requests again (refusals), s */
	bool burst;        /* its zone is in a revocation burst */
	double burst_left; /* burst: market seconds until it passes */
	bool allowed;      /* allow patterns, room left */
};

/* One server of a candidate cluster. */
struct cand {
	const struct sd_offer *o;
	double speed;      /* images/s */
	double wait;       /* seconds until it trains */
	int id;            /* caller's id, -1 for a planned one */
	bool manual, notice;
	double age;
	double extra_usd;  /* paid on top (the old server of a swap until this joins) */
	double wait_sd;    /* spread of the wait (a refusal's length is exponential) */
	double unbilled;   /* the part of the wait its pool refuses: nothing is billed */
};

struct ctx {
	const struct sd_autopilot_objective *obj;
	const struct sd_autopilot_state *st;
	const struct sd_autopilot_params *pp;
	struct offer_info *info;
	int *zone_count;   /* per catalog zone, scratch of estimate() (all 0 between calls) */
	bool past_burst;   /* can_take looks past bursts (the wait for one to pass) */
	double eff_cache[SD_PLAN_MAX_SERVERS * 8 + 2];
	int neff;
};

struct est {
	double t, sigma, cost, p, burn;
};

static double boot_median(const struct sd_offer *o)
{
	if (o->nboot < 1)
		return 0;
	double h = (o->nboot - 1) * 0.5;
	int i = (int)floor(h);
	if (i >= o->nboot - 1)
		return o->boot_quantiles[o->nboot - 1];
	return o->boot_quantiles[i] + (h - i) * (o->boot_quantiles[i + 1] - o->boot_quantiles[i]);
}

static double efficiency(struct ctx *c, int workers)
{
	if (workers < 1)
		return 1;
	if (workers < c->neff && c->eff_cache[workers] > 0)
		return c->eff_cache[workers];
	double e = sd_plan_efficiency(c->pp->scaling, c->pp->model, workers);
	if (workers < c->neff)
		c->eff_cache[workers] = e;
	return e;
}

static double phi(double x)
{
	return 0.5 * erfc(-x / sqrt(2.0));
}

static void estimate(struct ctx *c, const struct cand *v, int n, struct est *e)
{
	const struct sd_autopilot_state *st = c->st;
	double join = c->pp->join_seconds, rec = c->pp->recovery_seconds;
	int workers = 0;
	double burn = 0, extra = 0, lam_sum = 0, avail_speed = 0;
	double unbilled_usd = 0;
	for (int i = 0; i < n; i++) {
		workers += v[i].o->gpu_count;
		burn += c->info[v[i].o->index].price;
		extra += v[i].extra_usd;
	}
	double eff = efficiency(c, workers);
	for (int i = 0; i < n; i++) {
		const struct offer_info *in = &c->info[v[i].o->index];
		double d = in->boot + join + rec;
		double a = 1 / (1 + in->lambda * d);
		avail_speed += a * v[i].speed;
		lam_sum += in->lambda;
	}
	double pause = fmin(0.9, 2 * rec * lam_sum);
	double rate = eff * avail_speed * (1 - pause);
	double work = fmax(0, st->images_total - st->images_done);
	e->burn = burn;
	if (!(rate > 0)) {
		e->t = e->sigma = INFINITY;
		e->cost = INFINITY;
		e->p = 0;
		return;
	}
	/* Booting servers miss their boot and join; a fixed point in two steps. */
	double t = work / rate;
	for (int it = 0; it < 3; it++) {
		double missed = 0;
		int joins = 0;
		for (int i = 0; i < n; i++) {
			if (v[i].wait > 0) {
				const struct offer_info *in = &c->info[v[i].o->index];
				missed += eff * v[i].speed / (1 + in->lambda * (in->boot + join + rec)) * fmin(v[i].wait, t);
				joins++;
			}
		}
		t = (work + missed) / rate + joins * rec;
	}
	double var = 0.03 * t * 0.03 * t;
	for (int i = 0; i < n; i++)
		c->zone_count[v[i].o->zone_index]++;
	for (int i = 0; i < n; i++) {
		const struct offer_info *in = &c->info[v[i].o->index];
		if (!(in->lambda > 0))
			continue;
		int same_zone = c->zone_count[v[i].o->zone_index];
		const struct sd_revocation *rv = &v[i].o->revocation;
		double b = 1 + (rv->has_batch ? rv->batch.probability : 0) * (same_zone - 1);
		double loss = v[i].speed * eff * (in->boot + join + rec) * b / rate;
		var += in->lambda * t * loss * loss;
	}
	for (int i = 0; i < n; i++) {
		double miss = v[i].speed * eff * fmin(v[i].wait_sd, t) / rate;
		var += miss * miss;
	}
	for (int i = 0; i < n; i++)
		c->zone_count[v[i].o->zone_index] = 0;
	e->t = t;
	e->sigma = sqrt(var);
	/* A server is billed from the moment its request is granted: not
	 * while its pool refuses. */
	for (int i = 0; i < n; i++)
		unbilled_usd += c->info[v[i].o->index].price * fmin(v[i].unbilled, t) / 3600;
	e->cost = st->spent_usd + burn * t / 3600 - unbilled_usd + extra;
	double left = c->obj->deadline_seconds - st->elapsed_seconds;
	e->p = c->obj->goal == SD_AUTOPILOT_DEADLINE ? phi((left - t) / e->sigma) : NAN;
}

/* ---- candidates ----------------------------------------------------------------- */

/* Whether a refused request says nothing of its pool any more: the pool
 * reopened, as the market says (room for servers of the offer,
 * available > 0), or as a request of the same offer granted after the
 * refusal shows (a server of it younger than the refusal). */
static bool refusal_over(const struct sd_autopilot_state *st, const struct sd_autopilot_revocation *r)
{
	if (!r->refused)
		return false;
	if (st->available && st->available[r->offer->index] > 0)
		return true;
	for (int i = 0; i < st->nservers; i++)
		if (st->servers[i].offer == r->offer && st->servers[i].age_seconds < r->age_seconds)
			return true;
	return false;
}

static void info_init(struct ctx *c)
{
	const struct sd_autopilot_state *st = c->st;
	const struct sd_catalog *cat = st->cat;
	double hz = st->hazard_scale > 0 ? st->hazard_scale : 1;
	struct sd_replacement_event *ev = sd_calloc((size_t)st->nrevocations + 1, sizeof *ev);
	int nev = 0;
	for (int i = 0; i < st->nrevocations; i++) {
		if (refusal_over(st, &st->revocations[i]))
			continue;
		ev[nev++] = (struct sd_replacement_event){ .kind = st->revocations[i].refused ? SD_REPLACEMENT_STOCKOUT
		                                                                              : SD_REPLACEMENT_REVOKED,
		                                           .t = -st->revocations[i].age_seconds,
		                                           .zone = st->revocations[i].offer->zone,
		                                           .offer = st->revocations[i].offer, .seconds = -1 };
	}
	struct sd_replacement_input in = { .cat = cat, .usd_per_hour = st->usd_per_hour, .available = st->available,
	                                   .events = ev, .nevents = nev, .now = 0,
	                                   .hazard_scale = hz };
	for (int k = 0; k < cat->noffers; k++) {
		const struct sd_offer *o = &cat->offers[k];
		struct offer_info *f = &c->info[k];
		f->price = st->usd_per_hour ? st->usd_per_hour[k] : o->usd_per_hour;
		f->speed = o->images_per_sec * o->gpu_count * st->speed_factor;
		f->boot = boot_median(o);
		if (o->transient) {
			struct sd_replacement_risk r;
			sd_replacement_risk(&in, o, &r);
			/* A pool that refuses requests is a wait, not a revocation:
			 * P(still refusing) times its mean length (the storm's for
			 * calm/storm offers, else an hour; replacement.h). */
			double d = o->revocation.model == SD_REVOCATION_MARKOV && o->revocation.storm.mean_hours > 0
			               ? o->revocation.storm.mean_hours * 3600 : 3600;
			f->refuse_wait = r.stockout * d / hz;
			double p = 1 - (1 - r.base) * (1 - r.batch) * (1 - r.storm);
			p = fmin(p, 0.999);
			f->lambda = -log1p(-p) / SD_REPLACEMENT_HORIZON_S * hz;
		}
		/* A burst: two revocations in the zone within the window. */
		int recent = 0;
		double young[2] = { INFINITY, INFINITY };  /* the two newest ages in the window */
		for (int i = 0; i < st->nrevocations; i++) {
			const struct sd_autopilot_revocation *r = &st->revocations[i];
			if (r->refused || r->offer->zone_index != o->zone_index ||
			    r->age_seconds * hz > SD_AUTOPILOT_BURST_SECONDS)
				continue;
			recent++;
			if (r->age_seconds < young[0]) {
				young[1] = young[0];
				young[0] = r->age_seconds;
			} else if (r->age_seconds < young[1]) {
				young[1] = r->age_seconds;
			}
		}
		f->burst = recent >= 2 && o->transient;  /* on-demand servers are not revoked */
		/* It passes when the second newest revocation leaves the window. */
		f->burst_left = f->burst ? fmax(0, SD_AUTOPILOT_BURST_SECONDS / hz - young[1]) : 0;
		f->allowed = sd_autopilot_allows(c->obj, o) && !(st->available && st->available[k] == 0) &&
		             f->price > 0;
	}
	free(ev);
}

/* Whether a server of o may join the n servers of v (with v[skip]
 * leaving in exchange, skip >= 0: a swap). */
static bool can_take(const struct ctx *c, const struct cand *v, int n, int skip, const struct sd_offer *o)
{
	const struct offer_info *f = &c->info[o->index];
	if (!f->allowed || (f->burst && !c->past_burst))
		return false;
	int after = skip >= 0 ? n : n + 1;
	if (after > c->obj->max_servers || (c->st->manual_cap >= 0 && after > c->st->manual_cap && skip < 0))
		return false;
	double burn = f->price;
	int live = 0;
	for (int i = 0; i < n; i++) {
		if (i == skip)
			continue;
		burn += c->info[v[i].o->index].price;
		live += v[i].o == o;
	}
	if (c->obj->max_usd_per_hour > 0 && burn > c->obj->max_usd_per_hour + 1e-9)
		return false;
	return o->capacity <= 0 || live < o->capacity;
}

static bool may_touch(const struct ctx *c, const struct cand *s, bool burst)
{
	return s->id >= 0 && !s->manual && !s->notice && (burst || s->age >= c->obj->hold_seconds) && s->wait <= 0;
}

/* Servers of one offer that may be touched are alike to the estimate:
 * only the first of them is tried. */
static bool first_of_offer(const struct ctx *c, const struct cand *v, int i, bool burst)
{
	for (int j = 0; j < i; j++)
		if (v[j].o == v[i].o && may_touch(c, &v[j], burst))
			return false;
	return true;
}

/* Whether moving v[i] (a drop, or a swap: the old server leaves) would
 * lose too much work: it is the last training server and the work since
 * the last checkpoint is more than SD_AUTOPILOT_MAX_LOST_SHARE of the job. */
static bool loses_work(const struct ctx *c, const struct cand *v, int n, int i)
{
	for (int j = 0; j < n; j++)
		if (j != i && v[j].wait <= 0)
			return false;
	return c->st->checkpoint_lost_images > SD_AUTOPILOT_MAX_LOST_SHARE * c->st->images_total;
}

static struct cand planned(const struct ctx *c, const struct sd_offer *o)
{
	const struct offer_info *f = &c->info[o->index];
	return (struct cand){ .o = o, .speed = f->speed, .wait = f->boot + c->pp->join_seconds + f->refuse_wait,
	                      .wait_sd = f->refuse_wait, .unbilled = f->refuse_wait, .id = -1 };
}

static void fmt_usd(double v, char *out, size_t len)
{
	if (!isfinite(v))
		snprintf(out, len, "-");
	else if (v < 10)
		snprintf(out, len, "$%.2f", v);
	else
		snprintf(out, len, "$%.0f", v);
}

static void fmt_figures(const struct sd_autopilot_objective *obj, const struct sd_autopilot_action *a, char *out,
                        size_t len)
{
	char c0[32], c1[32];
	fmt_usd(a->cost_before, c0, sizeof c0);
	fmt_usd(a->cost_after, c1, sizeof c1);
	if (obj->goal == SD_AUTOPILOT_DEADLINE)
		snprintf(out, len, "P(done by deadline) %.2f -> %.2f, expected cost %s -> %s", a->p_before, a->p_after,
		         c0, c1);
	else
		snprintf(out, len, "expected time %.0fm -> %.0fm, expected cost %s -> %s", a->time_before / 60,
		         a->time_after / 60, c0, c1);
}

/* ---- Monte Carlo figures ------------------------------------------------------ */

/* The planner's figures for a cluster: P(done by the deadline), mean total
 * cost and median remaining time, lost servers replaced in kind.  Returns
 * -1 when the planner cannot take it (more than 64 servers, none). */
static int monte_carlo(const struct ctx *c, const struct cand *v, int n, struct est *e, char **why)
{
	if (n < 1 || n > 64)
		return -1;
	const struct sd_autopilot_state *st = c->st;
	struct sd_plan_config cfg;
	sd_plan_config_init(&cfg, NULL, n);
	snprintf(cfg.label, sizeof cfg.label, "autopilot");
	cfg.placement = SD_PLAN_PLACE_SPREAD;
	cfg.join_seconds = c->pp->join_seconds;
	cfg.recovery_seconds = c->pp->recovery_seconds;
	cfg.initial_ready = true;
	/* Ready servers first: the planner boots the ones after initial_ready_count. */
	int k = 0;
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < n; i++)
			if ((v[i].wait <= 0) == (pass == 0))
				cfg.offers[k++] = v[i].o;
	int ready = 0;
	for (int i = 0; i < n; i++)
		ready += v[i].wait <= 0;
	if (ready == 0)
		cfg.initial_ready = false;
	cfg.initial_ready_count = ready;
	cfg.noffers = n;
	struct sd_plan_job job = { .images = st->images_total, .done_images = st->images_done,
	                           .speed_factor = st->speed_factor, .batch_per_worker = 128 };
	snprintf(job.model, sizeof job.model, "%s", c->pp->model);
	struct sd_plan_options opt;
	sd_plan_options_init(&opt);
	opt.runs = c->pp->runs / 2 > 0 ? c->pp->runs / 2 : 1;  /* half before, half after */
	opt.seed = c->pp->seed;
	opt.hazard_scale = st->hazard_scale > 0 ? st->hazard_scale : 1;
	double left = c->obj->deadline_seconds - st->elapsed_seconds;
	opt.deadline_seconds = c->obj->goal == SD_AUTOPILOT_DEADLINE ? fmax(left, 1e-3) : 0;
	struct sd_plan_result r;
	if (sd_plan_simulate(st->cat, c->pp->scaling, &job, &cfg, &opt, &r, why) < 0)
		return -1;
	double extra = 0;
	for (int i = 0; i < n; i++)
		extra += v[i].extra_usd;
	e->t = r.time_p50;
	e->cost = st->spent_usd + r.cost_mean + extra;
	e->p = c->obj->goal == SD_AUTOPILOT_DEADLINE ? (left > 0 ? r.p_deadline : 0) : NAN;
	return 0;
}

/* ---- the decision ---------------------------------------------------------------- */

static int check_state(const struct sd_autopilot_objective *obj, const struct sd_autopilot_state *st, char **why)
{
	if (!st->cat)
		return sd_why(why, "autopilot: no catalog");
	if (!(st->images_total > 0) || !(st->images_done >= 0) || st->images_done > st->images_total)
		return sd_why(why, "autopilot: work must be positive (done %g of %g images)", st->images_done,
		              st->images_total);
	if (!(st->speed_factor > 0))
		return sd_why(why, "autopilot: speed factor must be positive, got %g", st->speed_factor);
	if (st->nservers < 0 || st->nservers > SD_PLAN_MAX_SERVERS)
		return sd_why(why, "autopilot: %d servers, at most %d", st->nservers, SD_PLAN_MAX_SERVERS);
	for (int i = 0; i < st->nservers; i++) {
		const struct sd_offer *o = st->servers[i].offer;
		if (!o || o < st->cat->offers || o >= st->cat->offers + st->cat->noffers)
			return sd_why(why, "autopilot: server %d: offer not from the catalog", st->servers[i].id);
	}
	for (int i = 0; i < st->nrevocations; i++) {
		const struct sd_offer *o = st->revocations[i].offer;
		if (!o || o < st->cat->offers || o >= st->cat->offers + st->cat->noffers)
			return sd_why(why, "autopilot: revocation %d: offer not from the catalog", i);
	}
	if (obj->goal == SD_AUTOPILOT_DEADLINE && !(obj->deadline_seconds > 0))
		return sd_why(why, "autopilot: a deadline goal needs a deadline");
	if (obj->goal == SD_AUTOPILOT_BUDGET && !(obj->budget_usd > 0))
		return sd_why(why, "autopilot: a budget goal needs a budget");
	return 0;
}

/* Whether a saving is worth an action: it exceeds `margin` (a swap's own
 * cost, counted once more) and SAVING_SHARE of the money still to spend,
 * so that pennies never move servers (each move pauses the cluster and
 * bets on the estimate). */
#define SAVING_SHARE 0.03
static bool worth(const struct est *cur, const struct est *after, const struct sd_autopilot_state *st, double margin)
{
	double saving = cur->cost - after->cost;
	return saving > margin && saving >= SAVING_SHARE * (cur->cost - st->spent_usd);
}

/* Whether `a` (after an action) is better than the best so far `b`. */
static bool better_cost(const struct est *a, const struct est *b)
{
	return a->cost < b->cost - 1e-9 || (fabs(a->cost - b->cost) <= 1e-9 && a->p > b->p);
}

/* One decision's working state: the candidate cluster `v` (n servers,
 * room for `cap`), a scratch copy `w`, the estimate `cur` of `v`, and the
 * best action found in this turn with its estimate `be`, the index `bi`
 * into `v` of the server it swaps or drops, and why (`what`). */
struct turn {
	struct ctx *c;
	struct cand *v, *w;
	int n, cap;
	struct est cur, be;
	struct sd_autopilot_action best;
	int bi;
	const char *what;
	char what_buf[224];  /* `what` when it is written out */
	char wait_why[224];  /* non-empty: it waits for a burst to pass, and why */
	int guarded;         /* a server not moved for want of a checkpoint, -1 none */
};

static bool goal_is_deadline(const struct turn *t)
{
	return t->c->obj->goal == SD_AUTOPILOT_DEADLINE;
}

/* The servers that stay (those under notice are going: plan without them)
 * as candidates; counts the ready ones and the ready ones under notice. */
static void turn_seed(struct turn *t, int *ready, int *ready_noticed)
{
	const struct sd_autopilot_state *st = t->c->st;
	*ready = *ready_noticed = 0;
	t->n = 0;
	for (int i = 0; i < st->nservers; i++) {
		const struct sd_autopilot_server *s = &st->servers[i];
		const struct offer_info *f = &t->c->info[s->offer->index];
		*ready += s->ready;
		*ready_noticed += s->ready && s->notice;
		if (s->notice)
			continue;
		t->v[t->n++] = (struct cand){ .o = s->offer, .id = s->id, .manual = s->manual, .age = s->age_seconds,
		                              .speed = s->images_per_sec > 0 ? s->images_per_sec : f->speed,
		                              .wait = s->ready ? 0 : fmax(1, f->boot + t->c->pp->join_seconds -
		                                                                     s->age_seconds) };
	}
}

/* First rule: leave a zone in a revocation burst, for the cheapest offer
 * elsewhere. */
static void propose_burst_swap(struct turn *t)
{
	struct ctx *c = t->c;
	const struct sd_catalog *cat = c->st->cat;
	for (int i = 0; i < t->n && t->bi < 0; i++) {
		if (!c->info[t->v[i].o->index].burst || !may_touch(c, &t->v[i], true) || !first_of_offer(c, t->v, i, true))
			continue;
		for (int k = 0; k < cat->noffers; k++) {
			const struct sd_offer *o = &cat->offers[k];
			if (o->zone_index == t->v[i].o->zone_index || !can_take(c, t->v, t->n, i, o))
				continue;
			memcpy(t->w, t->v, sizeof *t->v * (size_t)t->n);
			t->w[i] = planned(c, o);
			t->w[i].extra_usd = c->info[t->v[i].o->index].price * t->w[i].wait / 3600;
			struct est e;
			estimate(c, t->w, t->n, &e);
			if (t->best.kind == SD_AUTOPILOT_NOTHING || better_cost(&e, &t->be)) {
				t->be = e;
				t->best.kind = SD_AUTOPILOT_SWAP;
				t->best.offer = o;
				t->best.server = t->v[i].id;
				t->bi = i;
			}
		}
		if (t->bi >= 0)
			t->what = "its zone is in a revocation burst";
	}
}

/* The fewest more servers of o (up to the cap) that reach the confidence,
 * appended to t->v[t->n..), each planned `delay` seconds late; their
 * count in *m, the cluster's estimate in *e. */
static void lookahead(struct turn *t, const struct sd_offer *o, double delay, int *m, struct est *e)
{
	struct ctx *c = t->c;
	*m = t->n;
	*e = t->cur;
	while (*m < t->cap && can_take(c, t->v, *m, -1, o)) {
		t->v[*m] = planned(c, o);
		t->v[*m].wait += delay;
		t->v[*m].unbilled += delay;  /* requested only then */
		(*m)++;
		estimate(c, t->v, *m, e);
		if (e->p >= c->obj->confidence)
			break;
	}
}

/* How rare the state is in which a rescue is wanted: P(a run finds offer
 * o's pool refusing for as long as it has now), by the market model's own
 * odds.  For a calm/storm offer (the storms are what refuse requests;
 * replacement.h) that is the storm's stationary share pi_s = storm.mean /
 * (calm.mean + storm.mean) times P(a storm lasts `refusing` more seconds
 * of model time), exp(-refusing / storm.mean): the dwell is exponential.
 * 1 (not rare) for other offers or a pool that does not refuse. */
static double refusal_rarity(const struct ctx *c, const struct sd_offer *o)
{
	const struct sd_autopilot_state *st = c->st;
	const struct sd_revocation *rv = &o->revocation;
	if (rv->model != SD_REVOCATION_MARKOV || !(rv->storm.mean_hours > 0) || !(rv->calm.mean_hours > 0))
		return 1;
	double oldest = -1, newest = INFINITY;
	bool over = false;
	for (int i = 0; i < st->nrevocations; i++) {
		const struct sd_autopilot_revocation *r = &st->revocations[i];
		if (!r->refused || r->offer != o)
			continue;
		oldest = fmax(oldest, r->age_seconds);
		newest = fmin(newest, r->age_seconds);
		over |= refusal_over(st, r);
	}
	if (oldest < 0)
		return 1;
	/* Refusing from the oldest refusal until now, or until the newest
	 * when the pool took a request since. */
	double span = oldest - (over ? newest : 0);
	double hz = st->hazard_scale > 0 ? st->hazard_scale : 1;
	double share = rv->storm.mean_hours / (rv->calm.mean_hours + rv->storm.mean_hours);
	return share * exp(-span * hz / (rv->storm.mean_hours * 3600));
}

/* Whether the run is in a state too rare to buy its way back on time: a
 * pool of the catalog refused its requests for longer than all but
 * RESCUE_RARITY x (1 - confidence) of runs see (refusal_rarity).  The
 * confidence is a share of runs (the P(on time) >= 0.95), not of
 * every state: such a run spends that share on lateness rather than on a
 * rescue by dearer offers, which costs several times the run (on
 * market-2026.json's 3x job the T4 pool refusing for 3 h and more: 3 % of
 * runs, $0.5 to $0.9 more each; RESCUE_RARITY an estimate).  The offer
 * that refused in *which (the rarest). */
#define RESCUE_RARITY 1.0
static bool rare_state(const struct ctx *c, const struct sd_offer **which, double *rarity)
{
	const struct sd_autopilot_state *st = c->st;
	*which = NULL;
	*rarity = 1;
	if (c->obj->goal != SD_AUTOPILOT_DEADLINE)
		return false;
	for (int i = 0; i < st->nrevocations; i++) {
		const struct sd_offer *o = st->revocations[i].offer;
		if (!st->revocations[i].refused)
			continue;
		double q = refusal_rarity(c, o);
		if (q < *rarity) {
			*rarity = q;
			*which = o;
		}
	}
	return *which && *rarity <= RESCUE_RARITY * (1 - c->obj->confidence);
}

/* Behind the deadline in a rare state (rare_state): no rescue; the one
 * server with the lowest expected cost of the run that shortens it (a
 * refusing pool is asked again: a wait bills nothing), while that costs at
 * most 2 % more than the cluster as it is. */
static void propose_add_rare(struct turn *t, const struct sd_offer *which, double rarity)
{
	struct ctx *c = t->c;
	const struct sd_catalog *cat = c->st->cat;
	for (int k = 0; k < cat->noffers; k++) {
		const struct sd_offer *o = &cat->offers[k];
		if (!can_take(c, t->v, t->n, -1, o))
			continue;
		t->v[t->n] = planned(c, o);
		struct est e;
		estimate(c, t->v, t->n + 1, &e);
		if (!(e.t < t->cur.t * 0.995) || !(t->n == 0 || !isfinite(t->cur.cost) || e.cost <= t->cur.cost * 1.02))
			continue;
		if (t->best.kind == SD_AUTOPILOT_NOTHING || better_cost(&e, &t->be)) {
			t->be = e;
			t->best.kind = SD_AUTOPILOT_ADD;
			t->best.offer = o;
		}
	}
	if (t->best.kind == SD_AUTOPILOT_ADD) {
		snprintf(t->what_buf, sizeof t->what_buf,
		         "late, and no rescue: %s refused requests for longer than a run sees with P %.3f, rarer "
		         "than the deadline's %.2f allows; the cheapest server that shortens the run",
		         which->id, rarity, 1 - c->obj->confidence);
		t->what = t->what_buf;
	}
}

/* Behind a deadline: look ahead for the fewest servers of each offer that
 * would reach the confidence, and what they would cost; one server of the
 * cheapest such offer now, the rest at the next turns (re-chosen then).
 *
 * An offer that cannot be had now costs nothing while it cannot: a pool
 * that refuses requests, or one in a zone whose revocation burst will pass
 * (at a known time).  Waiting for the cheapest of those is free as long as
 * the offer chosen above can still be had later: when that offer would
 * still reach the confidence if requested only at the next planned look
 * (every_seconds from now), the refusing pool is asked again (an add that
 * may be refused), or, for a burst, nothing is done until it passes; the
 * dearer offer is taken at the last look that leaves it enough time. */
static void propose_add_lookahead(struct turn *t)
{
	struct ctx *c = t->c;
	const struct sd_catalog *cat = c->st->cat;
	const struct sd_offer *cheap = NULL;
	struct est cheap_e = { 0 };
	for (int k = 0; k < cat->noffers; k++) {
		const struct sd_offer *o = &cat->offers[k];
		const struct offer_info *f = &c->info[k];
		int m;
		struct est e;
		c->past_burst = f->burst;
		lookahead(t, o, f->burst_left, &m, &e);
		c->past_burst = false;
		if (m == t->n)
			continue;
		if (!f->burst && e.p >= c->obj->confidence &&
		    (t->best.kind == SD_AUTOPILOT_NOTHING || better_cost(&e, &t->be))) {
			t->be = e;
			t->best.kind = SD_AUTOPILOT_ADD;
			t->best.offer = o;
		}
		if ((f->refuse_wait > 0 || f->burst) && (!cheap || e.cost < cheap_e.cost)) {
			cheap = o;
			cheap_e = e;
		}
	}
	if (t->best.kind != SD_AUTOPILOT_ADD)
		return;
	t->what = t->n > 0 ? "the deadline slips" : "to meet the deadline";
	if (cheap && cheap != t->best.offer && cheap_e.cost < t->be.cost - 1e-9) {
		int m;
		struct est late;
		lookahead(t, t->best.offer, c->obj->every_seconds, &m, &late);
		if (late.p >= c->obj->confidence) {
			const struct offer_info *f = &c->info[cheap->index];
			if (f->burst) {
				/* Nothing to do but wait: say so. */
				snprintf(t->wait_why, sizeof t->wait_why,
				         "waiting %.0f min for the revocation burst in %s to pass (%s is cheaper), %s still "
				         "meets the deadline if taken at the next look",
				         ceil(f->burst_left / 60), cheap->zone, cheap->id, t->best.offer->id);
				t->best.kind = SD_AUTOPILOT_NOTHING;
				t->best.offer = NULL;
				t->be = t->cur;
				return;
			}
			t->best.offer = cheap;
			t->what = "waiting for the cheaper pool, which refuses: the dearer offer still meets the "
			          "deadline if taken at the next look";
		}
	}
	t->v[t->n] = planned(c, t->best.offer);
	estimate(c, t->v, t->n + 1, &t->be);
}

/* Behind, and no lookahead reached the goal: the one server that helps
 * most (deadline: reaching the confidence first, then cost; budget: the
 * fastest run the budget allows). */
static void propose_add_faster(struct turn *t, double budget_left)
{
	struct ctx *c = t->c;
	const struct sd_catalog *cat = c->st->cat;
	bool deadline = goal_is_deadline(t), reached = false;
	for (int k = 0; k < cat->noffers; k++) {
		const struct sd_offer *o = &cat->offers[k];
		if (!can_take(c, t->v, t->n, -1, o))
			continue;
		t->v[t->n] = planned(c, o);
		struct est e;
		estimate(c, t->v, t->n + 1, &e);
		if (!(e.t < t->cur.t * 0.995))
			continue;
		bool ok;
		if (deadline) {
			bool r = e.p >= c->obj->confidence;
			ok = t->best.kind == SD_AUTOPILOT_NOTHING || (r && !reached) ||
			     (r == reached && better_cost(&e, &t->be));
			if (ok)
				reached = r;
		} else {
			ok = e.cost <= budget_left * 0.95 && (t->best.kind == SD_AUTOPILOT_NOTHING || e.t < t->be.t - 1e-9);
		}
		if (ok) {
			t->be = e;
			t->best.kind = SD_AUTOPILOT_ADD;
			t->best.offer = o;
		}
	}
	if (t->best.kind == SD_AUTOPILOT_ADD)
		t->what = deadline ? (t->n > 0 ? "the deadline slips" : "to meet the deadline")
		                   : "the budget allows a faster run";
}

/* Savings: drops and swaps that keep the goal and pay twice. */
static void propose_saving(struct turn *t, double budget_left)
{
	struct ctx *c = t->c;
	const struct sd_catalog *cat = c->st->cat;
	bool deadline = goal_is_deadline(t);
	bool over = !deadline && t->cur.cost > budget_left;
	for (int i = 0; i < t->n; i++) {
		if (!may_touch(c, &t->v[i], false) || !first_of_offer(c, t->v, i, false))
			continue;
		/* Drop. */
		memcpy(t->w, t->v, sizeof *t->v * (size_t)t->n);
		t->w[i] = t->w[t->n - 1];
		struct est e;
		estimate(c, t->w, t->n - 1, &e);
		bool keeps = deadline ? e.p >= c->obj->confidence : (over || e.t <= t->cur.t * 1.02);
		if (keeps && e.cost < t->be.cost && (over || worth(&t->cur, &e, c->st, 0))) {
			t->be = e;
			t->best.kind = SD_AUTOPILOT_DROP;
			t->best.server = t->v[i].id;
			t->best.offer = NULL;
			t->bi = i;
			t->what = over ? "over the budget" : "the goal holds without it";
		}
		/* Swap. */
		for (int k = 0; k < cat->noffers; k++) {
			const struct sd_offer *o = &cat->offers[k];
			if (o == t->v[i].o || !can_take(c, t->v, t->n, i, o))
				continue;
			memcpy(t->w, t->v, sizeof *t->v * (size_t)t->n);
			t->w[i] = planned(c, o);
			/* The old server is billed until the new one joins. */
			t->w[i].extra_usd = c->info[t->v[i].o->index].price * t->w[i].wait / 3600;
			estimate(c, t->w, t->n, &e);
			double cost_of_swap = t->w[i].extra_usd;
			keeps = deadline ? e.p >= c->obj->confidence : (over || e.t <= t->cur.t * 1.02);
			/* Hysteresis: the saving, the swap's cost already in it,
			 * must cover that cost once more. */
			if (keeps && worth(&t->cur, &e, c->st, cost_of_swap) && e.cost < t->be.cost) {
				t->be = e;
				t->best.kind = SD_AUTOPILOT_SWAP;
				t->best.server = t->v[i].id;
				t->best.offer = o;
				t->bi = i;
				t->what = over ? "over the budget" : "cheaper, the saving pays for the swap twice";
			}
		}
	}
}

/* Writes the chosen action's figures and reason, then applies it to the
 * candidate cluster so the next turn plans from there. */
static void turn_commit(struct turn *t, struct sd_autopilot_action *out)
{
	struct ctx *c = t->c;
	struct sd_autopilot_action *b = &t->best;
	b->p_before = t->cur.p;
	b->p_after = t->be.p;
	b->cost_before = t->cur.cost;
	b->cost_after = t->be.cost;
	b->time_before = t->cur.t;
	b->time_after = t->be.t;
	char fig[160];
	fmt_figures(c->obj, b, fig, sizeof fig);
	if (b->kind == SD_AUTOPILOT_ADD)
		snprintf(b->reason, sizeof b->reason, "add %s: %s; %s", b->offer->id, t->what, fig);
	else if (b->kind == SD_AUTOPILOT_SWAP)
		snprintf(b->reason, sizeof b->reason, "swap s%d %s -> %s: %s; %s", b->server, t->v[t->bi].o->id,
		         b->offer->id, t->what, fig);
	else
		snprintf(b->reason, sizeof b->reason, "drop s%d %s: %s; %s", b->server, t->v[t->bi].o->id, t->what, fig);
	*out = *b;
	if (b->kind == SD_AUTOPILOT_ADD) {
		t->v[t->n++] = planned(c, b->offer);
	} else if (b->kind == SD_AUTOPILOT_SWAP) {
		double extra = c->info[t->v[t->bi].o->index].price *
		               (c->info[b->offer->index].boot + c->pp->join_seconds) / 3600;
		t->v[t->bi] = planned(c, b->offer);
		t->v[t->bi].extra_usd = extra;
	} else {
		t->v[t->bi] = t->v[--t->n];
	}
	t->cur = t->be;
}

/* The single "nothing" action, with the figures of the cluster as it is. */
static void nothing_action(const struct turn *t, struct sd_autopilot_action *out)
{
	const struct sd_autopilot_objective *obj = t->c->obj;
	const struct est *cur = &t->cur;
	*out = (struct sd_autopilot_action){ .kind = SD_AUTOPILOT_NOTHING, .server = -1, .p_before = cur->p,
	                                     .p_after = cur->p, .cost_before = cur->cost, .cost_after = cur->cost,
	                                     .time_before = cur->t, .time_after = cur->t };
	char fig[160];
	fmt_figures(obj, out, fig, sizeof fig);
	out->waiting = t->wait_why[0] != 0;
	char why[sizeof t->wait_why + sizeof fig + 16];
	snprintf(why, sizeof why, "nothing: %s; %s",
	         out->waiting ? t->wait_why
	         : goal_is_deadline(t) ? (cur->p >= obj->confidence ? "on track, no saving pays for itself"
	                                                            : "behind, but no allowed offer would help")
	                               : "no faster cluster within the budget, no saving pays for itself",
	         fig);
	snprintf(out->reason, sizeof out->reason, "%.255s", why);
}

/* Replaces the closed-form figures of the decision's actions by the
 * planner's Monte Carlo ones for the whole decision (cluster before all
 * actions, cluster after them). */
static void simulated_figures(const struct turn *t, struct sd_autopilot_action *out, int na)
{
	const struct sd_autopilot_state *st = t->c->st;
	struct cand *before = sd_calloc((size_t)t->cap, sizeof *before);
	int nb = 0;
	for (int i = 0; i < st->nservers; i++) {
		const struct sd_autopilot_server *s = &st->servers[i];
		if (s->notice)
			continue;
		before[nb++] = (struct cand){ .o = s->offer, .wait = s->ready ? 0 : 1 };
	}
	struct est e0, e1;
	if (monte_carlo(t->c, before, nb, &e0, NULL) == 0 && monte_carlo(t->c, t->v, t->n, &e1, NULL) == 0) {
		for (int i = 0; i < na; i++) {
			if (out[i].kind == SD_AUTOPILOT_CHECKPOINT)
				continue;
			out[i].p_before = e0.p;
			out[i].p_after = e1.p;
			out[i].cost_before = e0.cost;
			out[i].cost_after = e1.cost;
			out[i].time_before = e0.t;
			out[i].time_after = e1.t;
			char fig[160];
			fmt_figures(t->c->obj, &out[i], fig, sizeof fig);
			char *semi = strrchr(out[i].reason, ';');
			if (semi)
				snprintf(semi, sizeof out[i].reason - (size_t)(semi - out[i].reason), "; %s (simulated)", fig);
		}
	}
	free(before);
}

/* The actions of one decision, in order of the rules: a checkpoint when
 * every training server is under notice, then per turn the first rule
 * that finds something (leave a burst zone, add when behind, save). */
static int decide_turns(struct turn *t, struct sd_autopilot_action *out, int max)
{
	const struct sd_autopilot_objective *obj = t->c->obj;
	int ready, ready_noticed;
	turn_seed(t, &ready, &ready_noticed);
	estimate(t->c, t->v, t->n, &t->cur);
	int na = 0;
	if (ready > 0 && ready_noticed == ready && max > na) {
		const struct est *cur = &t->cur;
		out[na] = (struct sd_autopilot_action){ .kind = SD_AUTOPILOT_CHECKPOINT, .server = -1,
		                                        .p_before = cur->p, .p_after = cur->p, .cost_before = cur->cost,
		                                        .cost_after = cur->cost, .time_before = cur->t,
		                                        .time_after = cur->t };
		snprintf(out[na].reason, sizeof out[na].reason,
		         "checkpoint now: every training server is under notice, the work since the last checkpoint "
		         "would be lost");
		na++;
	}
	if (obj->max_price_age_seconds > 0 && t->c->st->price_age_seconds > obj->max_price_age_seconds) {
		/* Every figure rests on the prices: none is decided on stale ones. */
		nothing_action(t, &out[0]);
		char fig[160];
		fmt_figures(obj, &out[0], fig, sizeof fig);
		snprintf(out[0].reason, sizeof out[0].reason,
		         "nothing: holding, the newest price is %.0f min old (limit %.0f min); %s",
		         floor(t->c->st->price_age_seconds / 60), floor(obj->max_price_age_seconds / 60), fig);
		return 1;
	}
	bool deadline = goal_is_deadline(t);
	double budget_left = obj->budget_usd;
	while (na < max && na < SD_AUTOPILOT_MAX_ACTIONS) {
		t->best = (struct sd_autopilot_action){ .kind = SD_AUTOPILOT_NOTHING, .server = -1 };
		t->be = t->cur;
		t->bi = -1;
		t->what = "";
		propose_burst_swap(t);
		bool behind = deadline ? t->cur.p < obj->confidence : t->cur.cost <= budget_left * 0.95 || t->n == 0;
		const struct sd_offer *rare_offer;
		double rarity;
		bool rare = t->best.kind == SD_AUTOPILOT_NOTHING && behind && deadline &&
		            rare_state(t->c, &rare_offer, &rarity);
		if (rare)
			propose_add_rare(t, rare_offer, rarity);
		else if (t->best.kind == SD_AUTOPILOT_NOTHING && behind && deadline)
			propose_add_lookahead(t);
		if (t->wait_why[0])
			break;
		if (t->best.kind == SD_AUTOPILOT_NOTHING && behind && !rare)
			propose_add_faster(t, budget_left);
		if (t->best.kind == SD_AUTOPILOT_NOTHING)
			propose_saving(t, budget_left);
		if ((t->best.kind == SD_AUTOPILOT_DROP || t->best.kind == SD_AUTOPILOT_SWAP) &&
		    loses_work(t->c, t->v, t->n, t->bi)) {
			t->guarded = t->best.server;
			break;
		}
		if (t->best.kind == SD_AUTOPILOT_NOTHING)
			break;
		turn_commit(t, &out[na++]);
		/* A request to a pool that refused lately: its answer changes
		 * the picture (a grant says the pool reopened), so the next
		 * server is chosen at the next look, knowing it. */
		if (out[na - 1].kind == SD_AUTOPILOT_ADD && t->c->info[out[na - 1].offer->index].refuse_wait > 0)
			break;
	}
	if (t->guarded >= 0 && na < max && (na == 0 || out[na - 1].kind != SD_AUTOPILOT_CHECKPOINT)) {
		/* A move that would lose the work since the last checkpoint:
		 * none is made; a checkpoint first, the move at a later look. */
		const struct est *cur = &t->cur;
		out[na] = (struct sd_autopilot_action){ .kind = SD_AUTOPILOT_CHECKPOINT, .server = -1,
		                                        .p_before = cur->p, .p_after = cur->p, .cost_before = cur->cost,
		                                        .cost_after = cur->cost, .time_before = cur->t,
		                                        .time_after = cur->t };
		snprintf(out[na].reason, sizeof out[na].reason,
		         "checkpoint now: s%d is the last training server and moving it would lose %.0f images "
		         "trained since the last checkpoint; not moved until one is written",
		         t->guarded, t->c->st->checkpoint_lost_images);
		na++;
	}
	if (na == 0 || (t->wait_why[0] && na < max)) {
		/* Nothing more, or a wait the caller must know of. */
		nothing_action(t, &out[na]);
		na++;
	} else if (t->c->pp->runs > 0 && out[na - 1].kind != SD_AUTOPILOT_CHECKPOINT) {
		simulated_figures(t, out, na);
	}
	return na;
}

int sd_autopilot_decide(const struct sd_autopilot_objective *obj, const struct sd_autopilot_state *st,
                        const struct sd_autopilot_params *params, struct sd_autopilot_action *out, int max,
                        char **why)
{
	if (max < 1)
		return sd_why(why, "autopilot: room for no action");
	if (check_state(obj, st, why) < 0)
		return -1;
	struct sd_autopilot_params defp;
	if (!params) {
		sd_autopilot_params_init(&defp);
		params = &defp;
	}
	struct ctx c = { .obj = obj, .st = st, .pp = params, .neff = (int)(sizeof c.eff_cache / sizeof c.eff_cache[0]) };
	memset(c.eff_cache, 0, sizeof c.eff_cache);
	c.info = sd_calloc((size_t)st->cat->noffers, sizeof *c.info);
	c.zone_count = sd_calloc((size_t)st->cat->nzones + 1, sizeof *c.zone_count);
	info_init(&c);
	struct turn t = { .c = &c, .cap = SD_PLAN_MAX_SERVERS + SD_AUTOPILOT_MAX_ACTIONS + 1, .guarded = -1 };
	t.v = sd_calloc((size_t)t.cap, sizeof *t.v);
	t.w = sd_calloc((size_t)t.cap, sizeof *t.w);
	int na = decide_turns(&t, out, max);
	free(t.v);
	free(t.w);
	free(c.info);
	free(c.zone_count);
	return na;
}
