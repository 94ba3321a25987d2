/* src/market/planner.c - the what-if planner: Monte Carlo runs of a configuration
 * over the market model (see planner.h for the model). */
#include "src/market/planner.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cJSON.h>

#include "src/base/errors.h"
#include "src/base/rng.h"
#include "src/market/market-model.h"
#include "src/market/autopilot.h"

/* ---- scaling files --------------------------------------------------------- */

#define SCALING_MAX_BYTES (4u << 20)
#define SCALING_MAX_SERIES 4096

static int parse_series(struct sd_plan_series *s, const cJSON *o, const char *file, int i, char **why)
{
	if (!cJSON_IsObject(o))
		return sd_why(why, "%s: series[%d]: expected an object", file, i);
	const char *keys[] = { "model", "gpu" };
	char *dst[] = { s->model, s->gpu };
	size_t cap[] = { sizeof s->model, sizeof s->gpu };
	for (int k = 0; k < 2; k++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, keys[k]);
		if (!cJSON_IsString(v) || !v->valuestring[0] || strlen(v->valuestring) >= cap[k])
			return sd_why(why, "%s: series[%d].%s: expected a non-empty string of at most %zu bytes",
			              file, i, keys[k], cap[k] - 1);
		memcpy(dst[k], v->valuestring, strlen(v->valuestring) + 1);
	}
	const char *ikeys[] = { "parameter_servers", "batch_per_worker" };
	int *idst[] = { &s->parameter_servers, &s->batch_per_worker };
	for (int k = 0; k < 2; k++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, ikeys[k]);
		if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < 1 ||
		    v->valuedouble > 65536)
			return sd_why(why, "%s: series[%d].%s: expected an integer from 1 to 65536", file, i, ikeys[k]);
		*idst[k] = (int)v->valuedouble;
	}
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "steps_per_second");
	int n = cJSON_IsArray(a) ? cJSON_GetArraySize(a) : 0;
	if (n < 1 || n > 16)
		return sd_why(why, "%s: series[%d].steps_per_second: expected an array of 1 to 16 numbers", file, i);
	s->n = n;
	for (int j = 0; j < n; j++) {
		const cJSON *v = cJSON_GetArrayItem(a, j);
		if (!cJSON_IsNumber(v) || !(v->valuedouble > 0) || !isfinite(v->valuedouble))
			return sd_why(why, "%s: series[%d].steps_per_second[%d]: expected a positive number", file, i, j);
		s->steps_per_second[j] = v->valuedouble;
	}
	return 0;
}

int sd_plan_scaling_parse(struct sd_plan_scaling *out, const char *text, size_t len,
                          const char *name, char **why)
{
	memset(out, 0, sizeof *out);
	if (!name)
		name = "scaling";
	if (len > SCALING_MAX_BYTES)
		return sd_why(why, "%s: larger than %u bytes", name, SCALING_MAX_BYTES);
	const char *end = NULL;
	cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
	if (!root) {
		long line = 1, col = 1;
		for (const char *p = text; end && p < end && p < text + len; p++) {
			if (*p == '\n') {
				line++;
				col = 1;
			} else {
				col++;
			}
		}
		return sd_why(why, "%s: invalid JSON at line %ld, column %ld", name, line, col);
	}
	int rc = 0;
	const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
	const cJSON *ver = cJSON_GetObjectItemCaseSensitive(root, "version");
	const cJSON *ser = cJSON_GetObjectItemCaseSensitive(root, "series");
	if (!cJSON_IsObject(root)) {
		rc = sd_why(why, "%s: expected a JSON object", name);
	} else if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "spotdeck-scaling")) {
		rc = sd_why(why, "%s: format: expected \"spotdeck-scaling\"", name);
	} else if (!cJSON_IsNumber(ver) || ver->valuedouble != 1) {
		rc = sd_why(why, "%s: version: expected 1", name);
	} else if (!cJSON_IsArray(ser) || cJSON_GetArraySize(ser) < 1 || cJSON_GetArraySize(ser) > SCALING_MAX_SERIES) {
		rc = sd_why(why, "%s: series: expected an array of 1 to %d series", name, SCALING_MAX_SERIES);
	} else {
		out->nseries = cJSON_GetArraySize(ser);
		out->series = sd_calloc((size_t)out->nseries, sizeof *out->series);
		for (int i = 0; i < out->nseries && rc == 0; i++)
			rc = parse_series(&out->series[i], cJSON_GetArrayItem(ser, i), name, i, why);
		if (rc < 0)
			sd_plan_scaling_free(out);
	}
	cJSON_Delete(root);
	return rc;
}

int sd_plan_scaling_load(struct sd_plan_scaling *out, const char *path, char **why)
{
	memset(out, 0, sizeof *out);
	FILE *f = fopen(path, "rb");
	if (!f)
		return sd_why(why, "%s: %s", path, strerror(errno));
	char *buf = sd_malloc(SCALING_MAX_BYTES + 1);
	size_t n = fread(buf, 1, SCALING_MAX_BYTES + 1, f);
	int err = ferror(f);
	fclose(f);
	int rc;
	if (err)
		rc = sd_why(why, "%s: read error", path);
	else
		rc = sd_plan_scaling_parse(out, buf, n, path, why);
	free(buf);
	return rc;
}

void sd_plan_scaling_free(struct sd_plan_scaling *s)
{
	if (!s)
		return;
	free(s->series);
	s->series = NULL;
	s->nseries = 0;
}

/* ---- throughput ----------------------------------------------------------- */

#define MAX_CURVE 256

/* The throughput model of one configuration, prepared once. */
struct speed_model {
	enum sd_plan_parallel parallel;
	int batch;                     /* PS: images per worker step */
	/* ALLREDUCE */
	double measured;               /* > 0: constant efficiency */
	double eff[17];                /* eff[n] for n = 1..neff */
	int neff;
	/* PS: f(x) through (0,0) and these points, x increasing */
	double x[MAX_CURVE], y[MAX_CURVE];
	int np;
};

static int cmp_point(const void *a, const void *b)
{
	const double *p = a, *q = b;
	return (p[0] > q[0]) - (p[0] < q[0]);
}

static int speed_model_init(struct speed_model *sm, const struct sd_plan_scaling *sc,
                            const struct sd_plan_job *job, const struct sd_plan_config *cfg, char **why)
{
	memset(sm, 0, sizeof *sm);
	sm->parallel = cfg->parallel;
	sm->batch = job->batch_per_worker > 0 ? job->batch_per_worker : 128;
	if (cfg->parallel == SD_PLAN_ALLREDUCE) {
		if (cfg->efficiency_measured > 0) {
			sm->measured = fmin(cfg->efficiency_measured, 1.0);
			return 0;
		}
		const struct sd_plan_series *k80 = NULL;
		for (int i = 0; sc && i < sc->nseries; i++) {
			const struct sd_plan_series *s = &sc->series[i];
			if (!strcmp(s->model, job->model) && !strcasecmp(s->gpu, "K80") &&
			    (!k80 || s->parameter_servers < k80->parameter_servers))
				k80 = s;
		}
		if (!k80) {
			/* One worker per server and one server need no scaling. */
			int gpus = 0;
			for (int i = 0; i < cfg->noffers; i++)
				gpus = gpus > cfg->offers[i]->gpu_count ? gpus : cfg->offers[i]->gpu_count;
			if (cfg->servers == 1 && gpus == 1) {
				sm->measured = 1;
				return 0;
			}
			return sd_why(why, "no K80 scaling series for model '%s' in the scaling data", job->model);
		}
		sm->neff = k80->n;
		for (int n = 1; n <= k80->n; n++)
			sm->eff[n] = k80->steps_per_second[n - 1] / (n * k80->steps_per_second[0]);
		return 0;
	}
	/* PARAMETER_SERVER: pool every series of the model with this many PS;
	 * else scale the 1-PS ones. */
	int want = cfg->parameter_servers, have = 0;
	for (int pass = 0; pass < 2 && !sm->np; pass++) {
		have = pass == 0 ? want : 1;
		for (int i = 0; sc && i < sc->nseries; i++) {
			const struct sd_plan_series *s = &sc->series[i];
			if (strcmp(s->model, job->model) || s->parameter_servers != have)
				continue;
			double k = (double)want / have;
			for (int n = 1; n <= s->n && sm->np < MAX_CURVE; n++) {
				/* Steps are per worker batch; rescale if the series used another batch. */
				double scale = (double)s->batch_per_worker / sm->batch;
				sm->x[sm->np] = k * n * s->steps_per_second[0] * scale;
				sm->y[sm->np] = k * s->steps_per_second[n - 1] * scale;
				sm->np++;
			}
		}
		if (want == 1)
			break;
	}
	if (!sm->np)
		return sd_why(why, "no parameter-server scaling series for model '%s' in the scaling data", job->model);
	double pts[MAX_CURVE][2];
	for (int i = 0; i < sm->np; i++) {
		pts[i][0] = sm->x[i];
		pts[i][1] = sm->y[i];
	}
	qsort(pts, (size_t)sm->np, sizeof pts[0], cmp_point);
	/* Points at the same offered load (two GPU types measured at the same
	 * speed) become their mean, so the curve is a function. */
	int m = 0;
	for (int i = 0; i < sm->np;) {
		int j = i;
		double sum = 0;
		while (j < sm->np && pts[j][0] == pts[i][0])
			sum += pts[j++][1];
		sm->x[m] = pts[i][0];
		sm->y[m++] = sum / (j - i);
		i = j;
	}
	sm->np = m;
	return 0;
}

/* Cluster images/s for `workers` workers whose single speeds sum to ips. */
static double speed_model_rate(const struct speed_model *sm, double ips, int workers)
{
	if (workers <= 0 || !(ips > 0))
		return 0;
	if (sm->parallel == SD_PLAN_ALLREDUCE) {
		if (sm->measured > 0)
			return ips * (workers == 1 ? 1 : sm->measured);
		int n = workers < sm->neff ? workers : sm->neff;
		return ips * sm->eff[n];
	}
	double x = ips / sm->batch, x0 = 0, y0 = 0;
	for (int i = 0; i < sm->np; i++) {
		if (x <= sm->x[i])
			return (y0 + (sm->y[i] - y0) * (x - x0) / (sm->x[i] - x0)) * sm->batch;
		x0 = sm->x[i];
		y0 = sm->y[i];
	}
	return y0 * sm->batch;
}

double sd_plan_efficiency(const struct sd_plan_scaling *sc, const char *model, int workers)
{
	const struct sd_plan_series *k80 = NULL;
	for (int i = 0; sc && i < sc->nseries; i++) {
		const struct sd_plan_series *x = &sc->series[i];
		if (!strcmp(x->model, model) && !strcasecmp(x->gpu, "K80") &&
		    (!k80 || x->parameter_servers < k80->parameter_servers))
			k80 = x;
	}
	if (!k80 || workers < 1)
		return 1;
	int n = workers < k80->n ? workers : k80->n;
	return k80->steps_per_second[n - 1] / (n * k80->steps_per_second[0]);
}

/* ---- one simulated run ----------------------------------------------------- */

enum { S_BOOTING, S_JOINING, S_TRAINING, S_GONE };

struct psrv {
	sd_server_id id;
	const struct sd_offer *o;
	int state;
	bool initial, chief, billed_end, noticed;
	double requested, ready_at, ended;
	int replaces;                 /* AUTOPILOT swap: the server it replaces, -1 none */
	bool leaving;                 /* AUTOPILOT: a swap will release it */
};

/* A revocation, as the autopilot's state lists them. */
struct revlog {
	const struct sd_offer *o;
	double t;
	bool refused;
};

struct retry {
	double at;
	const struct sd_offer *from;  /* the server this replaces (policy input) */
	const struct sd_offer *want;  /* SAME: this offer */
};

struct sim {
	const struct sd_catalog *cat;
	const struct sd_plan_job *job;
	const struct sd_plan_config *cfg;
	const struct speed_model *sm;
	struct sd_market *m;
	struct psrv *srv;
	int nsrv, srvcap;
	struct retry *retry;
	int nretry, retrycap;
	double t, done, total, ckpt, pause_until, start_t;
	bool started, failed, finished;
	int pending_initial, ntrain, workers;
	double ips;                   /* sum of single speeds of training workers */
	int revocations;
	int refused;                  /* requests the market refused at first */
	int initial_seq;              /* initial servers requested so far */
	/* AUTOPILOT */
	const struct sd_plan_scaling *scaling;
	const struct sd_autopilot_objective *obj;
	struct revlog *revs;
	int nrevs, revcap;
	double next_decide, hazard_scale;
	bool replan, in_policy;
	bool ap_waiting;              /* the policy's last request was refused: it tries again */
};

static double offer_ips(const struct sim *s, const struct sd_offer *o)
{
	return o->images_per_sec * o->gpu_count * s->job->speed_factor;
}

static double current_rate(const struct sim *s)
{
	if (!s->started || s->t < s->pause_until || s->ntrain <= 0)
		return 0;
	return speed_model_rate(s->sm, s->ips, s->workers);
}

static double last_checkpoint(const struct sim *s)
{
	double iv = s->cfg->checkpoint_images;
	double k = floor(s->done / iv) * iv;
	return fmax(s->ckpt, fmin(k, s->done));
}

/* Whether the offer can be launched now. */
static bool can_launch(const struct sim *s, const struct sd_offer *o)
{
	return sd_market_live(s->m, o) < o->capacity && !(o->transient && sd_market_in_storm(s->m, o));
}

/* What to request: `want` when a request names its offer (an initial
 * server, or SAME), else the replacement of a server of `from` under the
 * config's policy; NULL when nothing fits now. */
static const struct sd_offer *pick_replacement(const struct sim *s, const struct sd_offer *from,
                                               const struct sd_offer *want)
{
	enum sd_plan_replace p = s->cfg->replace;
	if (want)
		return want;
	if ((p != SD_PLAN_REPLACE_CHEAPEST && p != SD_PLAN_REPLACE_OTHER_ZONE) || !from)
		return from;
	const struct sd_offer *best = NULL;
	for (int i = 0; i < s->cat->noffers; i++) {
		const struct sd_offer *o = &s->cat->offers[i];
		if (!o->transient || strcmp(o->gpu, from->gpu) || o->gpu_count != from->gpu_count ||
		    strcmp(o->provider, from->provider) || !can_launch(s, o))
			continue;
		if (p == SD_PLAN_REPLACE_OTHER_ZONE && o->zone_index == from->zone_index)
			continue;
		if (!best || o->usd_per_hour < best->usd_per_hour)
			best = o;
	}
	return best;
}

static void push_retry(struct sim *s, double at, const struct sd_offer *from, const struct sd_offer *want)
{
	if (s->nretry == s->retrycap) {
		s->retrycap = s->retrycap ? 2 * s->retrycap : 8;
		struct retry *r = realloc(s->retry, sizeof *r * (size_t)s->retrycap);
		if (!r)
			sd_oom();
		s->retry = r;
	}
	s->retry[s->nretry++] = (struct retry){ at, from, want };
}

/* Requests a server of `o` now; false if the market refused. */
static bool request(struct sim *s, const struct sd_offer *o, bool initial, bool chief)
{
	sd_server_id id;
	if (!o || sd_market_launch(s->m, o, &id, NULL) < 0)
		return false;
	if (s->nsrv == s->srvcap) {
		s->srvcap = s->srvcap ? 2 * s->srvcap : 16;
		struct psrv *p = realloc(s->srv, sizeof *p * (size_t)s->srvcap);
		if (!p)
			sd_oom();
		s->srv = p;
	}
	s->srv[s->nsrv++] = (struct psrv){ .id = id, .o = o, .state = S_BOOTING, .initial = initial,
	                                   .chief = chief, .requested = s->t, .ended = NAN, .replaces = -1 };
	bool ready = initial && s->cfg->initial_ready &&
	             (s->cfg->initial_ready_count <= 0 || s->initial_seq < s->cfg->initial_ready_count);
	if (initial)
		s->initial_seq++;
	if (ready) {
		/* Already training: its boot event is ignored. */
		s->srv[s->nsrv - 1].state = S_TRAINING;
		s->ntrain++;
		s->workers += o->gpu_count;
		s->ips += offer_ips(s, o);
	} else if (initial) {
		s->pending_initial++;
	}
	return true;
}

static void request_replacement(struct sim *s, const struct sd_offer *from)
{
	if (s->cfg->replace == SD_PLAN_REPLACE_AUTOPILOT) {
		/* The policy decides, unless it is its own action. */
		s->replan |= !s->in_policy;
		return;
	}
	if (s->cfg->replace == SD_PLAN_REPLACE_NONE)
		return;
	const struct sd_offer *want = s->cfg->replace == SD_PLAN_REPLACE_SAME ? from : NULL;
	const struct sd_offer *o = pick_replacement(s, from, want);
	if (!request(s, o, false, false)) {
		s->refused++;
		push_retry(s, s->t + s->cfg->retry_seconds, from, want);
	}
}

/* A membership change of a started ALLREDUCE cluster pauses it. */
static void regroup(struct sim *s)
{
	if (s->started && s->cfg->parallel == SD_PLAN_ALLREDUCE)
		s->pause_until = fmax(s->pause_until, s->t + s->cfg->recovery_seconds);
}

/* Server p leaves training or the run (notice, revocation, cap). */
static void server_leaves(struct sim *s, struct psrv *p, bool graceful)
{
	int was = p->state;
	if (was == S_GONE)
		return;
	p->state = S_GONE;
	/* A swap whose new server is lost before it trains keeps the old one. */
	if (p->replaces >= 0 && was != S_TRAINING)
		s->srv[p->replaces].leaving = false;
	if (p->initial && (was == S_BOOTING || was == S_JOINING))
		s->pending_initial--;
	if (p->chief && s->cfg->chief == SD_PLAN_CHIEF_FAILS_RUN) {
		s->failed = true;
		return;
	}
	if (was == S_TRAINING) {
		s->ntrain--;
		s->workers -= p->o->gpu_count;
		s->ips -= offer_ips(s, p->o);
		if (s->ntrain == 0)
			s->ips = 0;
		if (s->started && s->done < s->total) {
			if (p->chief && s->cfg->chief == SD_PLAN_CHIEF_RESTARTS) {
				s->done = last_checkpoint(s);
				s->pause_until = fmax(s->pause_until, s->t + s->cfg->recovery_seconds);
			} else if (s->ntrain == 0 && s->cfg->parallel == SD_PLAN_ALLREDUCE) {
				/* The parameters live only in the checkpoint now. */
				if (graceful && s->cfg->forced_checkpoint)
					s->ckpt = s->done;
				s->done = last_checkpoint(s);
			} else if (s->ntrain > 0) {
				regroup(s);
			}
		}
	}
	if (p->chief) {
		/* The chief's duties move to the oldest server still there. */
		p->chief = false;
		for (int i = 0; i < s->nsrv; i++) {
			if (s->srv[i].state != S_GONE) {
				s->srv[i].chief = true;
				break;
			}
		}
	}
	request_replacement(s, p->o);
}

static struct psrv *find_srv(struct sim *s, sd_server_id id)
{
	for (int i = s->nsrv - 1; i >= 0; i--)
		if (s->srv[i].id == id)
			return &s->srv[i];
	return NULL;
}

static void log_revocation(struct sim *s, const struct sd_offer *o, bool refused)
{
	if (s->cfg->replace != SD_PLAN_REPLACE_AUTOPILOT)
		return;
	if (s->nrevs == s->revcap) {
		s->revcap = s->revcap ? 2 * s->revcap : 16;
		struct revlog *r = realloc(s->revs, sizeof *r * (size_t)s->revcap);
		if (!r)
			sd_oom();
		s->revs = r;
	}
	s->revs[s->nrevs++] = (struct revlog){ o, s->t, refused };
}

static void on_market(void *ctx, const struct sd_market_event *ev)
{
	struct sim *s = ctx;
	if (s->failed || s->finished || !ev->server)
		return;
	struct psrv *p = find_srv(s, ev->server);
	if (!p)
		return;
	switch (ev->kind) {
	case SD_MARKET_BOOTED:
		if (p->state == S_BOOTING) {
			p->state = S_JOINING;
			p->ready_at = ev->time + s->cfg->join_seconds;
		}
		break;
	case SD_MARKET_NOTICE:
		p->noticed = true;
		if (!ev->capped) {
			s->revocations++;
			log_revocation(s, p->o, false);
		}
		/* A notice too short to write a checkpoint is no notice. */
		server_leaves(s, p, ev->ends_at - ev->time >= SD_PLAN_CHECKPOINT_SECONDS);
		break;
	case SD_MARKET_REVOKED:
	case SD_MARKET_CAPPED:
		if (!p->noticed && ev->kind == SD_MARKET_REVOKED) {
			s->revocations++;
			log_revocation(s, p->o, false);
		}
		p->billed_end = true;
		p->ended = ev->time;
		server_leaves(s, p, false);
		break;
	default:
		break;
	}
}

/* Moves training time forward to t (no event in between). */
static void advance_to(struct sim *s, double t)
{
	double r = current_rate(s);
	if (r > 0 && t > s->t)
		s->done = fmin(s->total, s->done + r * (t - s->t));
	s->t = t;
}

static bool nothing_coming(const struct sim *s)
{
	if (s->ntrain > 0 || s->nretry > 0 || s->ap_waiting)
		return false;
	for (int i = 0; i < s->nsrv; i++)
		if (s->srv[i].state == S_BOOTING || s->srv[i].state == S_JOINING)
			return false;
	return true;
}

struct run_out {
	bool completed;
	double time, train, cost;
	int revocations, refused;
};

static double run_cost(const struct sim *s, double t_end)
{
	const struct sd_plan_config *c = s->cfg;
	double usd = 0;
	bool window = c->accounting == SD_PLAN_ACCOUNT_TRAINING;
	for (int i = 0; i < s->nsrv; i++) {
		const struct psrv *p = &s->srv[i];
		double end = p->billed_end ? fmin(p->ended, t_end) : t_end;
		if (window) {
			if (s->started)
				usd += p->o->usd_per_hour * fmax(0, end - fmax(p->requested, s->start_t)) / 3600;
		} else {
			usd += sd_bill_usd(p->o, end - p->requested);
		}
	}
	if (c->parallel == SD_PLAN_PARAMETER_SERVER && c->ps_usd_per_hour > 0) {
		double span = window ? (s->started ? t_end - s->start_t : 0) : fmax(t_end, 60);
		usd += c->parameter_servers * c->ps_usd_per_hour * span / 3600;
	}
	return usd;
}

/* Server p leaves at the autopilot's word (a drop, or the old half of a
 * swap): released, billed until now, no replacement asked for. */
static void autopilot_release(struct sim *s, struct psrv *p)
{
	if (p->state == S_GONE)
		return;
	sd_market_release(s->m, p->id);
	p->billed_end = true;
	p->ended = s->t;
	bool was = s->in_policy;
	s->in_policy = true;
	server_leaves(s, p, true);
	s->in_policy = was;
}

/* Runs the autopilot's policy on the run as it stands and carries out
 * what it decides.  Returns -1 with *why when the policy refused the state. */
static int autopilot_step(struct sim *s, char **why)
{
	const struct sd_plan_config *c = s->cfg;
	s->replan = false;
	s->ap_waiting = false;
	s->next_decide = s->t + s->obj->every_seconds;
	struct sd_autopilot_server *sv = sd_calloc((size_t)s->nsrv + 1, sizeof *sv);
	int n = 0;
	for (int i = 0; i < s->nsrv; i++) {
		const struct psrv *p = &s->srv[i];
		if (p->state == S_GONE)
			continue;
		sv[n++] = (struct sd_autopilot_server){ .id = i, .offer = p->o, .age_seconds = s->t - p->requested,
		                                        .ready = p->state == S_TRAINING,
		                                        .notice = p->noticed || p->leaving };
	}
	/* Only the last hours of revocations weigh (replacement.h). */
	struct sd_autopilot_revocation *rv = sd_calloc((size_t)s->nrevs + 1, sizeof *rv);
	int nr = 0;
	double scale = s->hazard_scale > 0 ? s->hazard_scale : 1;
	for (int i = 0; i < s->nrevs; i++)
		if ((s->t - s->revs[i].t) * scale <= 6 * 3600.0)
			rv[nr++] = (struct sd_autopilot_revocation){ s->revs[i].o, s->t - s->revs[i].t, s->revs[i].refused };
	struct sd_autopilot_state st = { .cat = s->cat, .images_total = s->total, .images_done = s->done,
	                                 .speed_factor = s->job->speed_factor, .elapsed_seconds = s->t,
	                                 .spent_usd = run_cost(s, s->t), .servers = sv, .nservers = n,
	                                 .revocations = rv, .nrevocations = nr, .manual_cap = -1,
	                                 .hazard_scale = scale };
	struct sd_autopilot_params pp;
	sd_autopilot_params_init(&pp);
	pp.scaling = s->scaling;
	snprintf(pp.model, sizeof pp.model, "%s", s->job->model);
	pp.join_seconds = c->join_seconds;
	pp.recovery_seconds = c->recovery_seconds;
	struct sd_autopilot_action act[16];
	int na = sd_autopilot_decide(s->obj, &st, &pp, act, 16, why);
	free(sv);
	free(rv);
	if (na < 0)
		return -1;
	s->in_policy = true;
	for (int i = 0; i < na; i++) {
		const struct sd_autopilot_action *a = &act[i];
		bool refused = false;
		switch (a->kind) {
		case SD_AUTOPILOT_ADD:
			refused = !request(s, a->offer, false, false);
			break;
		case SD_AUTOPILOT_SWAP:
			refused = !request(s, a->offer, false, false);
			if (!refused) {
				s->srv[s->nsrv - 1].replaces = a->server;
				s->srv[a->server].leaving = true;
			}
			break;
		case SD_AUTOPILOT_DROP:
			autopilot_release(s, &s->srv[a->server]);
			break;
		case SD_AUTOPILOT_CHECKPOINT:
			s->ckpt = s->done;
			break;
		case SD_AUTOPILOT_NOTHING:
			break;
		}
		if (a->kind == SD_AUTOPILOT_NOTHING && a->waiting) {
			/* It waits for a burst to pass: the run goes on with
			 * nothing coming until its next look. */
			s->ap_waiting = true;
		}
		if (refused) {
			/* The actions after it were planned on it: decide again
			 * when a request may be retried, knowing of the refusal. */
			s->refused++;
			log_revocation(s, a->offer, true);
			s->next_decide = s->t + c->retry_seconds;
			s->ap_waiting = true;
			break;
		}
	}
	s->in_policy = false;
	return 0;
}

static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static bool c_is_autopilot(const struct sim *s)
{
	return s->cfg->replace == SD_PLAN_REPLACE_AUTOPILOT;
}

/* Starts run `run` of the simulation: its own market (seeded from the
 * options' seed and the run number, so every policy sees the same markets)
 * and a cleared state.  Returns -1 with *why when the market cannot be made. */
static int sim_reset(struct sim *s, const struct sd_plan_options *opt, long run, struct sd_rng *rng, char **why)
{
	sd_rng_seed(rng, mix64(opt->seed) ^ 0x706c616eull, (uint64_t)run);
	struct sd_market_knobs k;
	sd_market_knobs_init(&k);
	k.seed = mix64(opt->seed * 0x100000001b3ull + (uint64_t)run);
	k.hazard_scale = opt->hazard_scale > 0 ? opt->hazard_scale : 1;
	s->hazard_scale = k.hazard_scale;
	k.boot_scale = opt->boot_scale >= 0 ? opt->boot_scale : 1;
	k.notice_scale = opt->notice_scale > 0 ? opt->notice_scale : 1;
	k.start_hour_of_day = opt->start_hour >= 0 && opt->start_hour < 24 ? opt->start_hour
	                      : 24.0 * sd_rng_u32(rng) / 4294967296.0;
	if (sd_market_new(&s->m, s->cat, &k, why) < 0)
		return -1;
	s->nsrv = s->nretry = 0;
	s->t = 0;
	s->done = s->ckpt = s->job->done_images;
	s->total = s->job->images;
	s->pause_until = 0;
	s->start_t = 0;
	s->started = s->failed = s->finished = false;
	s->pending_initial = s->ntrain = s->workers = 0;
	s->ips = 0;
	s->revocations = 0;
	s->refused = 0;
	s->initial_seq = 0;
	s->nrevs = 0;
	s->next_decide = 0;
	s->replan = c_is_autopilot(s);
	s->in_policy = s->ap_waiting = false;
	return 0;
}

/* Requests the configuration's servers at time 0. */
static void sim_request_initial(struct sim *s, struct sd_rng *rng)
{
	const struct sd_plan_config *c = s->cfg;
	int zone = c->placement == SD_PLAN_PLACE_ONE_ZONE ? (int)sd_rng_below(rng, (uint32_t)c->noffers) : 0;
	for (int i = 0; i < c->servers; i++) {
		const struct sd_offer *o = c->offers[c->placement == SD_PLAN_PLACE_ONE_ZONE ? zone : i % c->noffers];
		if (!request(s, o, true, i == 0)) {
			s->refused++;
			push_retry(s, c->retry_seconds, o, o);
		}
	}
	if (s->nsrv > 0)
		s->srv[0].chief = true;  /* the first server that could be had */
}

/* The time of the next thing that changes the run's rate or membership,
 * no later than t_fin (the end of training at the current rate). */
static double sim_next_time(const struct sim *s, double t_fin)
{
	double t_next = fmin(t_fin, sd_market_next_event_time(s->m));
	if (s->pause_until > s->t)
		t_next = fmin(t_next, s->pause_until);
	for (int i = 0; i < s->nsrv; i++)
		if (s->srv[i].state == S_JOINING)
			t_next = fmin(t_next, s->srv[i].ready_at);
	for (int i = 0; i < s->nretry; i++)
		t_next = fmin(t_next, s->retry[i].at);
	if (c_is_autopilot(s))
		t_next = fmin(t_next, fmax(s->next_decide, s->t));
	return t_next;
}

/* Workers that finished joining start training; requests due again are
 * made again. */
static void sim_joins_and_retries(struct sim *s)
{
	for (int i = 0; i < s->nsrv; i++) {
		struct psrv *p = &s->srv[i];
		if (p->state != S_JOINING || p->ready_at > s->t)
			continue;
		p->state = S_TRAINING;
		if (p->initial)
			s->pending_initial--;
		s->ntrain++;
		s->workers += p->o->gpu_count;
		s->ips += offer_ips(s, p->o);
		regroup(s);
		if (c_is_autopilot(s)) {
			/* A swap is done when the new server trains. */
			if (p->replaces >= 0)
				autopilot_release(s, &s->srv[p->replaces]);
			s->replan = true;
		}
	}
	for (int i = 0; i < s->nretry; i++) {
		if (s->retry[i].at > s->t)
			continue;
		struct retry rt = s->retry[i];
		s->retry[i--] = s->retry[--s->nretry];
		const struct sd_offer *o = pick_replacement(s, rt.from, rt.want);
		if (!request(s, o, false, false))
			push_retry(s, s->t + s->cfg->retry_seconds, rt.from, rt.want);
	}
}

static int simulate_one(struct sim *s, const struct sd_plan_options *opt, long run, struct run_out *out,
                        char **why)
{
	struct sd_rng rng;
	if (sim_reset(s, opt, run, &rng, why) < 0)
		return -1;
	sim_request_initial(s, &rng);
	const struct sd_plan_config *c = s->cfg;
	long guard = 0;
	while (!s->failed && !s->finished) {
		if (++guard > 10000000) {
			s->failed = true;
			break;
		}
		if (!s->started && s->pending_initial == 0 && s->ntrain > 0) {
			s->started = true;
			s->start_t = s->t;
		}
		if (c_is_autopilot(s) && (s->replan || s->t >= s->next_decide) && autopilot_step(s, why) < 0) {
			sd_market_free(s->m);
			s->m = NULL;
			return -1;
		}
		if (nothing_coming(s)) {
			s->failed = true;
			break;
		}
		double r = current_rate(s);
		double t_fin = r > 0 ? s->t + (s->total - s->done) / r : INFINITY;
		double t_next = sim_next_time(s, t_fin);
		if (!(t_next <= SD_PLAN_HORIZON_SECONDS)) {
			advance_to(s, SD_PLAN_HORIZON_SECONDS);
			s->failed = true;
			break;
		}
		if (t_next >= t_fin) {
			s->t = t_fin;
			s->done = s->total;
			s->finished = true;
			break;
		}
		advance_to(s, t_next);
		sim_joins_and_retries(s);
		sd_market_advance(s->m, s->t, on_market, s);
	}
	out->completed = s->finished;
	out->revocations = s->revocations;
	out->refused = s->refused;
	out->train = s->started ? s->t - s->start_t : NAN;
	out->time = c->accounting == SD_PLAN_ACCOUNT_TRAINING ? out->train : s->t;
	out->cost = run_cost(s, s->t);
	sd_market_free(s->m);
	s->m = NULL;
	return 0;
}

/* ---- configurations and results -------------------------------------------- */

void sd_plan_config_init(struct sd_plan_config *c, const struct sd_offer *offer, int servers)
{
	memset(c, 0, sizeof *c);
	c->servers = servers;
	if (offer) {
		c->noffers = 1;
		c->offers[0] = offer;
	}
	c->placement = SD_PLAN_PLACE_SPREAD;
	c->parallel = SD_PLAN_ALLREDUCE;
	c->parameter_servers = 1;
	c->ps_usd_per_hour = SD_PLAN_PS_USD_PER_HOUR;
	c->replace = SD_PLAN_REPLACE_SAME;
	c->chief = SD_PLAN_CHIEF_NONE;
	c->accounting = SD_PLAN_ACCOUNT_PROVIDER;
	c->checkpoint_images = SD_PLAN_CHECKPOINT_IMAGES;
	c->forced_checkpoint = true;
	c->join_seconds = SD_PLAN_JOIN_SECONDS;
	c->recovery_seconds = SD_PLAN_RECOVERY_SECONDS;
	c->retry_seconds = SD_PLAN_RETRY_SECONDS;
}

void sd_plan_options_init(struct sd_plan_options *o)
{
	memset(o, 0, sizeof *o);
	o->seed = 1;
	o->runs = 2000;
	o->start_hour = -1;
	o->hazard_scale = 1;
	o->boot_scale = 1;
	o->notice_scale = 1;
}

static bool from_catalog(const struct sd_catalog *cat, const struct sd_offer *o)
{
	return o && o >= cat->offers && o < cat->offers + cat->noffers;
}

static int check_config(const struct sd_catalog *cat, const struct sd_plan_job *job,
                        const struct sd_plan_config *c, const struct sd_plan_options *opt, char **why)
{
	/* The autopilot may start from nothing and choose the cluster itself. */
	int least = c->replace == SD_PLAN_REPLACE_AUTOPILOT ? 0 : 1;
	if (c->servers < least || c->servers > SD_PLAN_MAX_SERVERS)
		return sd_why(why, "%s: cluster size must be 1 to %d servers, got %d", c->label, SD_PLAN_MAX_SERVERS,
		              c->servers);
	if (c->noffers < 1 || c->noffers > 64)
		return sd_why(why, "%s: needs 1 to 64 offers, got %d", c->label, c->noffers);
	for (int i = 0; i < c->noffers; i++)
		if (!from_catalog(cat, c->offers[i]))
			return sd_why(why, "%s: offer %d is not from the catalog", c->label, i);
	if (!(job->images > 0) || !isfinite(job->images) || !(job->done_images >= 0) || job->done_images > job->images)
		return sd_why(why, "job: work must be a positive number of images (done %g of %g)", job->done_images,
		              job->images);
	if (!(job->speed_factor > 0) || !isfinite(job->speed_factor))
		return sd_why(why, "job: speed factor must be positive, got %g", job->speed_factor);
	if (!(c->checkpoint_images > 0) || !(c->join_seconds >= 0) || !(c->recovery_seconds >= 0) ||
	    !(c->retry_seconds > 0) || !(c->ps_usd_per_hour >= 0))
		return sd_why(why, "%s: checkpoint interval and retry must be positive, join and recovery >= 0", c->label);
	if (c->parallel == SD_PLAN_PARAMETER_SERVER && (c->parameter_servers < 1 || c->parameter_servers > 64))
		return sd_why(why, "%s: parameter servers must be 1 to 64, got %d", c->label, c->parameter_servers);
	if (opt->runs < 1 || opt->runs > 10000000)
		return sd_why(why, "runs must be 1 to 10000000, got %d", opt->runs);
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Quantile q of n sorted values, linear between order statistics (type 7). */
static double quantile(const double *v, int n, double q)
{
	if (n <= 0)
		return NAN;
	double h = (n - 1) * q;
	int i = (int)floor(h);
	if (i >= n - 1)
		return v[n - 1];
	return v[i] + (h - i) * (v[i + 1] - v[i]);
}

int sd_plan_simulate(const struct sd_catalog *cat, const struct sd_plan_scaling *scaling,
                     const struct sd_plan_job *job, const struct sd_plan_config *cfg,
                     const struct sd_plan_options *opt, struct sd_plan_result *out, char **why)
{
	if (check_config(cat, job, cfg, opt, why) < 0)
		return -1;
	struct speed_model sm;
	if (speed_model_init(&sm, scaling, job, cfg, why) < 0)
		return -1;
	struct sim s = { .cat = cat, .job = job, .cfg = cfg, .sm = &sm, .scaling = scaling };
	struct sd_autopilot_objective defobj;
	if (cfg->replace == SD_PLAN_REPLACE_AUTOPILOT) {
		s.obj = cfg->autopilot;
		if (!s.obj) {
			/* The planner's own deadline or budget, every other limit
			 * the objective's default. */
			sd_autopilot_objective_init(&defobj);
			if (opt->deadline_seconds > 0) {
				defobj.deadline_seconds = opt->deadline_seconds;
			} else if (opt->budget_usd > 0) {
				defobj.goal = SD_AUTOPILOT_BUDGET;
				defobj.budget_usd = opt->budget_usd;
			} else {
				return sd_why(why, "%s: the autopilot needs a deadline or a budget", cfg->label);
			}
			s.obj = &defobj;
		}
	}
	int n = opt->runs;
	double *times = sd_malloc(sizeof *times * (size_t)n), *costs = sd_malloc(sizeof *costs * (size_t)n);
	double *trains = sd_malloc(sizeof *trains * (size_t)n);
	double sum_t = 0, sum_tr = 0, sum_c = 0, sum_fc = 0, sum_rev = 0;
	long within_deadline = 0, within_budget = 0, revoked = 0, revoked_completed = 0, refused = 0;
	int completed = 0, failed = 0, rc = 0;
	long every = n / 64 > 0 ? n / 64 : 1;
	for (long r = 0; r < n; r++) {
		struct run_out ro;
		if (simulate_one(&s, opt, r, &ro, why) < 0) {
			rc = -1;
			break;
		}
		sum_rev += ro.revocations;
		revoked += ro.revocations > 0;
		refused += ro.refused > 0;
		if (ro.completed) {
			times[completed] = ro.time;
			trains[completed] = ro.train;
			costs[completed] = ro.cost;
			sum_t += ro.time;
			sum_tr += ro.train;
			sum_c += ro.cost;
			completed++;
			revoked_completed += ro.revocations > 0;
			within_deadline += opt->deadline_seconds > 0 && ro.time <= opt->deadline_seconds;
			within_budget += opt->budget_usd > 0 && ro.cost <= opt->budget_usd;
		} else {
			failed++;
			sum_fc += ro.cost;
		}
		if (opt->progress && (r + 1) % every == 0)
			opt->progress(opt->progress_ctx, r + 1, n);
	}
	free(s.srv);
	free(s.retry);
	free(s.revs);
	if (rc == 0) {
		struct sd_plan_result *o = out;
		memset(o, 0, sizeof *o);
		o->runs = n;
		o->completed = completed;
		o->failed = failed;
		qsort(times, (size_t)completed, sizeof *times, cmp_double);
		qsort(costs, (size_t)completed, sizeof *costs, cmp_double);
		qsort(trains, (size_t)completed, sizeof *trains, cmp_double);
		o->time_p10 = quantile(times, completed, 0.1);
		o->time_p50 = quantile(times, completed, 0.5);
		o->time_p90 = quantile(times, completed, 0.9);
		o->time_mean = completed ? sum_t / completed : NAN;
		o->train_p50 = quantile(trains, completed, 0.5);
		o->train_mean = completed ? sum_tr / completed : NAN;
		o->cost_p10 = quantile(costs, completed, 0.1);
		o->cost_p50 = quantile(costs, completed, 0.5);
		o->cost_p90 = quantile(costs, completed, 0.9);
		o->cost_mean = completed ? sum_c / completed : NAN;
		o->p_deadline = opt->deadline_seconds > 0 ? (double)within_deadline / n : NAN;
		o->p_budget = opt->budget_usd > 0 ? (double)within_budget / n : NAN;
		o->revocations_mean = sum_rev / n;
		o->p_revoked = (double)revoked / n;
		o->p_revoked_completed = completed ? (double)revoked_completed / completed : NAN;
		o->p_refused = (double)refused / n;
		o->failed_cost_mean = failed ? sum_fc / failed : NAN;
		o->speedup = o->saving = NAN;
	}
	free(times);
	free(costs);
	free(trains);
	return rc;
}

static bool same_group(const struct sd_offer *a, const struct sd_offer *b)
{
	return !strcasecmp(a->gpu, b->gpu) && a->gpu_count == b->gpu_count && a->transient == b->transient &&
	       !strcmp(a->provider, b->provider);
}

int sd_plan_configs(const struct sd_catalog *cat, const struct sd_plan_config *base, const int *sizes, int nsizes,
                    bool (*want)(const struct sd_offer *o, void *ctx), void *ctx, struct sd_plan_config *out,
                    int max, char **why)
{
	int n = 0, nprov = 0;
	for (int i = 0; i < cat->noffers; i++) {
		int seen = 0;
		for (int j = 0; j < i && !seen; j++)
			seen = !strcmp(cat->offers[j].provider, cat->offers[i].provider);
		nprov += !seen;
	}
	bool *used = sd_calloc((size_t)cat->noffers, sizeof *used);
	for (int g = 0; g < cat->noffers; g++) {
		/* Each GPU type once, at its first offer: spot groups, then on-demand. */
		bool first = true;
		for (int j = 0; j < g && first; j++)
			first = strcasecmp(cat->offers[j].gpu, cat->offers[g].gpu) != 0;
		if (!first)
			continue;
		for (int kind = 1; kind >= 0; kind--) {
			for (int i = g; i < cat->noffers; i++) {
				const struct sd_offer *o = &cat->offers[i];
				if (used[i] || strcasecmp(o->gpu, cat->offers[g].gpu) || o->transient != kind ||
				    (want && !want(o, ctx)))
					continue;
				struct sd_plan_config c = *base;
				c.noffers = 0;
				for (int j = i; j < cat->noffers && c.noffers < 64; j++) {
					const struct sd_offer *x = &cat->offers[j];
					if (!used[j] && same_group(x, o) && (!want || want(x, ctx))) {
						used[j] = true;
						c.offers[c.noffers++] = x;
					}
				}
				char gpu[32];
				if (o->gpu_count > 1)
					snprintf(gpu, sizeof gpu, "%dx%s", o->gpu_count, o->gpu);
				else
					snprintf(gpu, sizeof gpu, "%s", o->gpu);
				for (int k = 0; k < nsizes; k++) {
					if (n == max) {
						free(used);
						return sd_why(why, "too many configurations (at most %d)", max);
					}
					c.servers = sizes[k];
					snprintf(c.label, sizeof c.label, "%dx %s %s%s%s", sizes[k], gpu, kind ? "spot" : "on-demand",
					         nprov > 1 ? " " : "", nprov > 1 ? o->provider : "");
					out[n++] = c;
				}
			}
		}
	}
	free(used);
	return n;
}

static const struct sd_offer *on_demand_twin(const struct sd_catalog *cat, const struct sd_offer *o)
{
	if (!o->transient)
		return o;
	for (int i = 0; i < cat->noffers; i++) {
		const struct sd_offer *x = &cat->offers[i];
		if (!x->transient && x->zone_index == o->zone_index && !strcmp(x->gpu, o->gpu) &&
		    x->gpu_count == o->gpu_count)
			return x;
	}
	return NULL;
}

int sd_plan_config_on_demand(const struct sd_catalog *cat, const struct sd_plan_config *cfg,
                             struct sd_plan_config *out, char **why)
{
	struct sd_plan_config c = *cfg;
	for (int i = 0; i < c.noffers; i++) {
		if (!from_catalog(cat, c.offers[i]))
			return sd_why(why, "%s: offer %d is not from the catalog", cfg->label, i);
		const struct sd_offer *t = on_demand_twin(cat, c.offers[i]);
		if (!t)
			return sd_why(why, "%s: no on-demand offer like %s in the catalog", cfg->label, c.offers[i]->id);
		c.offers[i] = t;
	}
	*out = c;
	return 0;
}

int sd_plan_config_baseline(const struct sd_catalog *cat, const struct sd_plan_config *cfg,
                            struct sd_plan_config *out, char **why)
{
	struct sd_plan_config c;
	if (sd_plan_config_on_demand(cat, cfg, &c, why) < 0)
		return -1;
	c.servers = 1;
	*out = c;
	return 0;
}

double sd_plan_saved_usd(const struct sd_catalog *cat, const struct sd_offer *o, double billed_usd, bool *estimated)
{
	if (!o || !o->transient || !(o->usd_per_hour > 0) || !(billed_usd > 0) || !from_catalog(cat, o))
		return 0;
	const struct sd_offer *d = on_demand_twin(cat, o);
	if (!d || d == o)
		return 0;
	if (estimated && d->price_source && !strncmp(d->price_source, "estimated", 9))
		*estimated = true;
	return billed_usd * (d->usd_per_hour / o->usd_per_hour - 1);
}

void sd_plan_compare(struct sd_plan_result *r, const struct sd_plan_result *baseline,
                     const struct sd_plan_result *on_demand)
{
	r->speedup = baseline && r->time_p50 > 0 ? baseline->time_p50 / r->time_p50 : NAN;
	r->saving = on_demand && on_demand->cost_mean > 0 ? 1 - r->cost_mean / on_demand->cost_mean : NAN;
}

void sd_plan_pareto(struct sd_plan_result *r, int n)
{
	for (int i = 0; i < n; i++) {
		r[i].pareto = r[i].completed > 0 && isfinite(r[i].time_p50) && isfinite(r[i].cost_p50);
		for (int j = 0; j < n && r[i].pareto; j++) {
			if (j == i || !(r[j].completed > 0) || !isfinite(r[j].time_p50) || !isfinite(r[j].cost_p50))
				continue;
			bool le = r[j].time_p50 <= r[i].time_p50 && r[j].cost_p50 <= r[i].cost_p50;
			bool lt = r[j].time_p50 < r[i].time_p50 || r[j].cost_p50 < r[i].cost_p50;
			if (le && lt)
				r[i].pareto = false;
		}
	}
}

/* ---- names and durations ---------------------------------------------------- */

static const char *const replace_names[] = { "none", "same", "cheapest", "other-zone", "autopilot" };

const char *sd_plan_replace_name(enum sd_plan_replace r)
{
	return (unsigned)r < 5 ? replace_names[r] : "?";
}

int sd_plan_replace_parse(const char *s, enum sd_plan_replace *out)
{
	for (int i = 0; i < 5; i++) {
		if (!strcmp(s, replace_names[i])) {
			*out = (enum sd_plan_replace)i;
			return 0;
		}
	}
	return -1;
}

int sd_plan_parse_duration(const char *s, const char *what, double *seconds, char **why)
{
	const char *p = s;
	double total = 0;
	int parts = 0;
	while (*p) {
		char *end;
		errno = 0;
		if (!isdigit((unsigned char)*p) && *p != '.')
			goto bad;
		double v = strtod(p, &end);
		if (end == p || errno || !isfinite(v) || v < 0)
			goto bad;
		p = end;
		double unit = 1;
		switch (*p) {
		case 'd': unit = 86400; p++; break;
		case 'h': unit = 3600; p++; break;
		case 'm': unit = 60; p++; break;
		case 's': unit = 1; p++; break;
		case '\0': if (parts) goto bad; break;  /* a bare number is seconds, alone only */
		default: goto bad;
		}
		total += v * unit;
		parts++;
	}
	if (parts && total > 0 && isfinite(total) && total <= 10 * 365 * 86400.0) {
		*seconds = total;
		return 0;
	}
	if (parts && total == 0)
		return sd_why(why, "%s: '%s': must be longer than 0", what, s);
	if (parts)
		return sd_why(why, "%s: '%s': longer than 10 years, the most it takes", what, s);
bad:
	return sd_why(why, "%s: cannot read '%s' as a duration (e.g. 90s, 45m, 2h, 1h30m, 1d)", what, s);
}
