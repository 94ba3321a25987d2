/* src/market/market-model.c - lifetimes, boot times, risk, billing and the
 * event-driven market core (see market-model.h for the model itself). */
#include "src/market/market-model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/errors.h"

/* ---- random numbers ------------------------------------------------------ */

/* Uniform in [0, 1) with 53 random bits (sd_rng_uniform has 24, too coarse
 * for sampling hour-resolution CDFs tens of thousands of times). */
static double u01(struct sd_rng *r)
{
	uint64_t a = sd_rng_u32(r) >> 5, b = sd_rng_u32(r) >> 6;
	return ((double)a * 67108864.0 + (double)b) / 9007199254740992.0;
}

/* Standard exponential (mean 1). */
static double exp1(struct sd_rng *r)
{
	return -log1p(-u01(r));
}

/* ---- time-of-day table for empirical offers ---------------------------- */

#define NROW (24 * SD_TOD_SUB)

struct sd_tod_table {
	int nb;            /* whole-hour lifetime bins before the cap */
	double *F;         /* nb + 1 values: CDF at hours 0..nb */
	double *cum;       /* NROW rows of nb + 1 cumulative probabilities; the
	                    * last column (survive to the cap) ends each row at 1 */
	double w[24];      /* hour weights, mean 1 */
	int sinkhorn_iterations;
};

/* The catalog CDF at `h` hours: straight lines through (0, 0) and the
 * points; constant after the last point. */
static double cdf_at(const struct sd_revocation *r, double h)
{
	if (h <= 0)
		return 0;
	double h0 = 0, f0 = 0;
	for (int i = 0; i < r->ncdf; i++) {
		if (h <= r->cdf_hours[i])
			return f0 + (r->cdf_fraction[i] - f0) * (h - h0) / (r->cdf_hours[i] - h0);
		h0 = r->cdf_hours[i];
		f0 = r->cdf_fraction[i];
	}
	return f0;
}

int sd_market_prepare_offer(struct sd_offer *o, char **why)
{
	struct sd_revocation *r = &o->revocation;
	if (r->model != SD_REVOCATION_EMPIRICAL)
		return 0;
	const int nb = r->max_lifetime_hours, nc = nb + 1;
	struct sd_tod_table *t = sd_calloc(1, sizeof *t);
	t->nb = nb;
	t->F = sd_calloc((size_t)nc, sizeof *t->F);
	t->cum = sd_calloc((size_t)NROW * (size_t)nc, sizeof *t->cum);
	memcpy(t->w, r->hour_weights, sizeof t->w);
	for (int k = 0; k <= nb; k++)
		t->F[k] = cdf_at(r, k);

	double *p = sd_calloc((size_t)nc, sizeof *p), *b = sd_calloc((size_t)nc, sizeof *b);
	double *col = sd_calloc((size_t)nc, sizeof *col);
	double *ker = t->cum;  /* the kernel is built in place of the table */
	for (int k = 0; k < nb; k++)
		p[k] = fmax(0, t->F[k + 1] - t->F[k]);
	p[nb] = fmax(0, 1 - t->F[nb]);
	for (int i = 0; i < NROW; i++) {
		int l = i / SD_TOD_SUB;
		double a = ((i % SD_TOD_SUB) + 0.5) / SD_TOD_SUB;
		for (int k = 0; k < nb; k++)
			ker[i * nc + k] = p[k] * ((1 - a) * t->w[(l + k) % 24] + a * t->w[(l + k + 1) % 24]);
		ker[i * nc + nb] = p[nb];
	}
	for (int k = 0; k < nc; k++)
		b[k] = 1;

	/* Sinkhorn scaling: each row (a launch time) sums to 1 after dividing by
	 * r_i; scale the columns until their mean over launch times is p_k.
	 * Converges geometrically; 1e-12 is reached in tens to a few hundred
	 * iterations for the shipped catalogs. */
	int rc = 0, it;
	double err = 1;
	for (it = 0; it < 3000; it++) {
		memset(col, 0, sizeof *col * (size_t)nc);
		for (int i = 0; i < NROW; i++) {
			const double *row = ker + (size_t)i * nc;
			double s = 0;
			for (int k = 0; k < nc; k++)
				s += b[k] * row[k];
			if (!(s > 0)) {
				rc = sd_why(why, "no lifetime is possible for launches at clock hour %d (weights are zero "
				            "wherever the CDF rises)", i / SD_TOD_SUB);
				goto out;
			}
			for (int k = 0; k < nc; k++)
				col[k] += b[k] * row[k] / s;
		}
		err = 0;
		for (int k = 0; k < nc; k++) {
			col[k] /= NROW;
			err = fmax(err, fabs(col[k] - p[k]));
		}
		if (err < 1e-12)
			break;
		for (int k = 0; k < nc; k++) {
			if (p[k] > 0) {
				if (!(col[k] > 0)) {
					rc = sd_why(why, "lifetime hour %d of the CDF cannot happen: its clock hours all have "
					            "weight 0", k);
					goto out;
				}
				b[k] *= p[k] / col[k];
			}
		}
	}
	if (err > 1e-7) {
		rc = sd_why(why, "these weights make the lifetime CDF impossible to keep (the fit stops %.2g away)", err);
		goto out;
	}
	t->sinkhorn_iterations = it;
	for (int i = 0; i < NROW; i++) {
		double *row = t->cum + (size_t)i * nc, s = 0, acc = 0;
		for (int k = 0; k < nc; k++)
			s += b[k] * row[k];
		for (int k = 0; k < nc; k++) {
			acc += b[k] * row[k] / s;
			row[k] = acc;
		}
		row[nb] = 1;
	}
out:
	free(p);
	free(b);
	free(col);
	if (rc < 0) {
		free(t->F);
		free(t->cum);
		free(t);
		return rc;
	}
	r->tod = t;
	return 0;
}

void sd_market_release_offer(struct sd_offer *o)
{
	struct sd_tod_table *t = o->revocation.tod;
	if (t) {
		free(t->F);
		free(t->cum);
		free(t);
		o->revocation.tod = NULL;
	}
}

static double wrap_hour(double h)
{
	if (!isfinite(h))
		return 0;
	h = fmod(h, 24);
	if (h < 0)
		h += 24;
	return h >= 24 ? 0 : h;
}

static const double *tod_row(const struct sd_tod_table *t, double hour)
{
	int i = (int)(hour * SD_TOD_SUB);
	if (i < 0)
		i = 0;
	if (i >= NROW)
		i = NROW - 1;
	return t->cum + (size_t)i * (size_t)(t->nb + 1);
}

/* Lifetime in model hours for an empirical offer; *capped if it reached the
 * cap. */
static double sample_empirical(const struct sd_revocation *r, double hour, struct sd_rng *rng, bool *capped)
{
	const struct sd_tod_table *t = r->tod;
	const double *row = tod_row(t, hour);
	double u = u01(rng);
	int lo = 0, hi = t->nb;  /* first k with row[k] > u; row[nb] = 1 > u */
	while (lo < hi) {
		int mid = (lo + hi) / 2;
		if (row[mid] > u)
			hi = mid;
		else
			lo = mid + 1;
	}
	int k = lo;
	if (k == t->nb) {
		*capped = true;
		return t->nb;
	}
	*capped = false;
	/* Within hour bin k the clock crosses one hour boundary, 1 - a into the
	 * bin; the density on each side is proportional to that clock hour's
	 * weight. */
	int l = (int)hour;
	double a = hour - l;
	double w1 = (1 - a) * t->w[(l + k) % 24], w2 = a * t->w[(l + k + 1) % 24];
	double u2 = u01(rng), u3 = u01(rng), off;
	if (!(w1 + w2 > 0))
		off = u3;
	else if (u2 * (w1 + w2) < w1)
		off = u3 * (1 - a);
	else
		off = (1 - a) + u3 * a;
	return k + off;
}

/* Lifetime in model hours from the stationary calm/storm process;
 * INFINITY beyond the horizon. */
static double sample_markov(const struct sd_revocation *r, struct sd_rng *rng)
{
	const struct sd_markov_state *s[2] = { &r->calm, &r->storm };
	if (!(s[0]->per_hour > 0) && !(s[1]->per_hour > 0))
		return INFINITY;
	double f = s[1]->mean_hours / (s[0]->mean_hours + s[1]->mean_hours);
	int st = u01(rng) < f;
	double e = exp1(rng), t = 0;
	for (long n = 0; n < 10000000 && t < SD_MARKOV_HORIZON_HOURS; n++) {
		double d = s[st]->mean_hours * exp1(rng);  /* memoryless: also right for the first, partial dwell */
		double lam = s[st]->per_hour;
		if (lam * d >= e)
			return t + e / lam;
		e -= lam * d;
		t += d;
		st = !st;
	}
	return INFINITY;
}

void sd_lifetime_sample(const struct sd_offer *o, double launch_hour_of_day,
                        double hazard_scale, struct sd_rng *rng, struct sd_lifetime *out)
{
	const struct sd_revocation *r = &o->revocation;
	double h = INFINITY;
	out->capped = false;
	if (r->model == SD_REVOCATION_EMPIRICAL && r->tod)
		h = sample_empirical(r, wrap_hour(launch_hour_of_day), rng, &out->capped);
	else if (r->model == SD_REVOCATION_MARKOV)
		h = sample_markov(r, rng);
	out->seconds = h * 3600 / hazard_scale;
}

double sd_boot_sample(const struct sd_offer *o, double boot_scale, struct sd_rng *rng)
{
	if (o->nboot < 1)
		return 0;
	double pos = u01(rng) * (o->nboot - 1);
	int j = (int)pos;
	if (j >= o->nboot - 1)
		return o->boot_quantiles[o->nboot - 1] * boot_scale;
	double q = o->boot_quantiles[j] + (pos - j) * (o->boot_quantiles[j + 1] - o->boot_quantiles[j]);
	return q * boot_scale;
}

/* exp(M t) for a 2x2 matrix whose off-diagonal entries are both positive
 * (so its eigenvalues are real and distinct). */
static void expm2(const double M[2][2], double t, double E[2][2])
{
	double tr = M[0][0] + M[1][1], det = M[0][0] * M[1][1] - M[0][1] * M[1][0];
	double disc = sqrt(fmax(0, tr * tr / 4 - det));
	double m1 = tr / 2 + disc, m2 = tr / 2 - disc;
	if (disc < 1e-12 * (fabs(tr) + 1)) {
		double e = exp(m1 * t);
		for (int i = 0; i < 2; i++)
			for (int j = 0; j < 2; j++)
				E[i][j] = e * ((i == j) + (M[i][j] - (i == j) * m1) * t);
		return;
	}
	double e1 = exp(m1 * t), e2 = exp(m2 * t);
	for (int i = 0; i < 2; i++)
		for (int j = 0; j < 2; j++)
			E[i][j] = (e1 * (M[i][j] - (i == j) * m2) - e2 * (M[i][j] - (i == j) * m1)) / (m1 - m2);
}

static double markov_p_within(const struct sd_revocation *r, double hours)
{
	double a = 1 / r->calm.mean_hours, b = 1 / r->storm.mean_hours;
	double M[2][2] = { { -a - r->calm.per_hour, a }, { b, -b - r->storm.per_hour } };
	double E[2][2];
	expm2(M, hours, E);
	double pc = r->calm.mean_hours / (r->calm.mean_hours + r->storm.mean_hours), ps = 1 - pc;
	double surv = pc * (E[0][0] + E[0][1]) + ps * (E[1][0] + E[1][1]);
	return fmin(1, fmax(0, 1 - surv));
}

double sd_market_p_revoked_within(const struct sd_offer *o, double seconds, double hazard_scale)
{
	const struct sd_revocation *r = &o->revocation;
	double h = fmax(0, seconds) * hazard_scale / 3600;
	if (r->model == SD_REVOCATION_EMPIRICAL)
		return cdf_at(r, fmin(h, r->max_lifetime_hours));
	if (r->model == SD_REVOCATION_MARKOV)
		return markov_p_within(r, h);
	return 0;
}

double sd_market_p_revoked_within_at(const struct sd_offer *o, double launch_hour_of_day,
                                     double seconds, double hazard_scale)
{
	const struct sd_revocation *r = &o->revocation;
	if (r->model != SD_REVOCATION_EMPIRICAL || !r->tod)
		return sd_market_p_revoked_within(o, seconds, hazard_scale);
	const struct sd_tod_table *t = r->tod;
	double hour = wrap_hour(launch_hour_of_day);
	const double *row = tod_row(t, hour);
	double h = fmax(0, seconds) * hazard_scale / 3600;
	if (h >= t->nb)
		return row[t->nb - 1];
	int k = (int)h;
	double f = h - k, before = k ? row[k - 1] : 0, mass = row[k] - before;
	int l = (int)hour;
	double a = hour - l;
	double w1 = (1 - a) * t->w[(l + k) % 24], w2 = a * t->w[(l + k + 1) % 24], part;
	if (!(w1 + w2 > 0))
		part = f;
	else if (f <= 1 - a)
		part = w1 * (1 - a > 0 ? f / (1 - a) : 1) / (w1 + w2);
	else
		part = (w1 + w2 * (a > 0 ? (f - (1 - a)) / a : 1)) / (w1 + w2);
	return before + mass * part;
}

double sd_bill_usd(const struct sd_offer *o, double seconds)
{
	double s = seconds > 0 ? seconds : 0;
	switch (o->billing_unit) {
	case SD_BILL_PER_SECOND: break;
	case SD_BILL_PER_MINUTE: s = ceil(s / 60) * 60; break;
	case SD_BILL_PER_HOUR: s = ceil(s / 3600) * 3600; break;
	}
	if (s < o->billing_minimum_seconds)
		s = o->billing_minimum_seconds;
	return o->usd_per_hour * s / 3600;
}

/* ---- the market core ----------------------------------------------------- */

struct srv {
	uint32_t gen;
	bool live, booted, noticed, capped;
	int offer;
	int heap;             /* position in the heap, -1 if none */
	int znext, zprev;     /* live servers of the same zone; -1 ends */
	int next_free;
	double launched, t_boot, t_notice, t_end;
	uint64_t batch;
	int batch_size;
};

/* Per-offer state: live count and, for Markov offers, the storm path.
 * Segment j covers [seg_t[j], seg_t[j+1]) (the last one ends at path_end)
 * and is a storm if seg_storm[j]. */
struct pool {
	int live;
	bool markov;
	double *seg_t;
	unsigned char *seg_storm;
	int nseg, segcap;
	double path_end;
	int cur;              /* segment the market clock is in; -1 before start */
	int heap;             /* the pending switch event, -1 if none */
	struct sd_rng rng;
};

struct hnode {
	double t;
	uint64_t seq;
	int32_t ref;          /* >= 0: server slot; < 0: pool -1-ref */
};

struct sd_market {
	const struct sd_catalog *cat;
	struct sd_market_knobs k;
	double now;
	struct sd_rng rng, brng;
	struct srv *srv;
	int nsrv, srvcap, free_head, live_total;
	struct pool *pool;
	int *zone_head;
	struct hnode *heap;
	int hn, hcap;
	uint64_t seq, batch_seq;
	int *cand;
	double *cand_t;
	int candcap;
};

void sd_market_knobs_init(struct sd_market_knobs *k)
{
	memset(k, 0, sizeof *k);
	k->seed = 1;
	k->hazard_scale = 1;
	k->boot_scale = 1;
	k->notice_scale = 1;
	k->start_hour_of_day = 0;
	k->batches = true;
	k->storms = true;
	k->enforce_capacity = true;
}

/* -- binary min-heap keyed by (time, seq), with positions kept in the
 * owners so that entries can be moved or removed in O(log n). */

static void heap_setpos(struct sd_market *m, int pos)
{
	int32_t ref = m->heap[pos].ref;
	if (ref >= 0)
		m->srv[ref].heap = pos;
	else
		m->pool[-1 - ref].heap = pos;
}

static bool heap_less(const struct hnode *a, const struct hnode *b)
{
	return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static void heap_up(struct sd_market *m, int i)
{
	struct hnode x = m->heap[i];
	while (i > 0) {
		int p = (i - 1) / 2;
		if (!heap_less(&x, &m->heap[p]))
			break;
		m->heap[i] = m->heap[p];
		heap_setpos(m, i);
		i = p;
	}
	m->heap[i] = x;
	heap_setpos(m, i);
}

static void heap_down(struct sd_market *m, int i)
{
	struct hnode x = m->heap[i];
	for (;;) {
		int c = 2 * i + 1;
		if (c >= m->hn)
			break;
		if (c + 1 < m->hn && heap_less(&m->heap[c + 1], &m->heap[c]))
			c++;
		if (!heap_less(&m->heap[c], &x))
			break;
		m->heap[i] = m->heap[c];
		heap_setpos(m, i);
		i = c;
	}
	m->heap[i] = x;
	heap_setpos(m, i);
}

static void heap_push(struct sd_market *m, int32_t ref, double t)
{
	if (m->hn == m->hcap) {
		m->hcap = m->hcap ? 2 * m->hcap : 1024;
		struct hnode *h = realloc(m->heap, sizeof *h * (size_t)m->hcap);
		if (!h)
			sd_oom();
		m->heap = h;
	}
	m->heap[m->hn] = (struct hnode){ .t = t, .seq = m->seq++, .ref = ref };
	heap_up(m, m->hn++);
}

static void heap_move(struct sd_market *m, int pos, double t)
{
	m->heap[pos].t = t;
	m->heap[pos].seq = m->seq++;
	heap_up(m, pos);
	heap_down(m, m->heap[pos].ref >= 0 ? m->srv[m->heap[pos].ref].heap : m->pool[-1 - m->heap[pos].ref].heap);
}

static void heap_remove(struct sd_market *m, int pos)
{
	int32_t ref = m->heap[pos].ref;
	if (ref >= 0)
		m->srv[ref].heap = -1;
	else
		m->pool[-1 - ref].heap = -1;
	if (--m->hn == pos)
		return;
	m->heap[pos] = m->heap[m->hn];
	heap_setpos(m, pos);
	heap_up(m, pos);
	int32_t moved = m->heap[pos].ref;
	int np = moved >= 0 ? m->srv[moved].heap : m->pool[-1 - moved].heap;
	heap_down(m, np);
}

/* -- storm paths */

static void path_append(struct pool *p, double t, bool storm)
{
	if (p->nseg == p->segcap) {
		p->segcap = p->segcap ? 2 * p->segcap : 64;
		double *st = realloc(p->seg_t, sizeof *st * (size_t)p->segcap);
		if (!st)
			sd_oom();
		p->seg_t = st;
		unsigned char *ss = realloc(p->seg_storm, (size_t)p->segcap);
		if (!ss)
			sd_oom();
		p->seg_storm = ss;
	}
	p->seg_t[p->nseg] = t;
	p->seg_storm[p->nseg] = storm;
	p->nseg++;
}

/* Dwell time in market seconds for a state. */
static double dwell(const struct sd_market *m, const struct sd_offer *o, struct pool *p, bool storm)
{
	const struct sd_markov_state *s = storm ? &o->revocation.storm : &o->revocation.calm;
	return s->mean_hours * 3600 / m->k.hazard_scale * exp1(&p->rng);
}

/* Makes sure segment `j` exists (its start is known). */
static void path_ensure(const struct sd_market *m, const struct sd_offer *o, struct pool *p, int j)
{
	while (p->nseg <= j) {
		bool storm = !p->seg_storm[p->nseg - 1];
		double t = p->path_end;
		path_append(p, t, storm);
		p->path_end = t + dwell(m, o, p, storm);
	}
}

static double seg_end(const struct sd_market *m, const struct sd_offer *o, struct pool *p, int j)
{
	path_ensure(m, o, p, j + 1);
	return p->seg_t[j + 1];
}

/* The segment containing time t (>= the current one's start). */
static int path_find(const struct sd_market *m, const struct sd_offer *o, struct pool *p, double t)
{
	int j = p->cur < 0 ? 0 : p->cur;
	while (seg_end(m, o, p, j) <= t)
		j++;
	return j;
}

/* Drops segments the market clock has left behind. */
static void path_compact(struct pool *p)
{
	if (p->cur < 1024 || p->cur < p->nseg / 2)
		return;
	int drop = p->cur;
	memmove(p->seg_t, p->seg_t + drop, sizeof *p->seg_t * (size_t)(p->nseg - drop));
	memmove(p->seg_storm, p->seg_storm + drop, (size_t)(p->nseg - drop));
	p->nseg -= drop;
	p->cur -= drop;
}

/* Revocation time (market seconds, absolute) for a server launched now on
 * a Markov offer: integrate the pool's hazard along the shared path. */
static double markov_end(struct sd_market *m, const struct sd_offer *o, struct pool *p)
{
	const struct sd_revocation *r = &o->revocation;
	double X = m->k.hazard_scale, e = exp1(&m->rng), t = m->now;
	if (!m->k.storms || !p->markov) {
		double rate = r->calm.per_hour * X / 3600;
		return rate > 0 ? t + e / rate : INFINITY;
	}
	if (!(r->calm.per_hour > 0) && !(r->storm.per_hour > 0))
		return INFINITY;
	double horizon = m->now + SD_MARKOV_HORIZON_HOURS * 3600 / X;
	int j = path_find(m, o, p, t);
	while (t < horizon) {
		double end = seg_end(m, o, p, j);
		double rate = (p->seg_storm[j] ? r->storm.per_hour : r->calm.per_hour) * X / 3600;
		if (rate * (end - t) >= e)
			return t + e / rate;
		e -= rate * (end - t);
		t = end;
		j++;
	}
	return INFINITY;
}

int sd_market_new(struct sd_market **out, const struct sd_catalog *cat,
                  const struct sd_market_knobs *knobs, char **why)
{
	*out = NULL;
	struct sd_market_knobs k;
	if (knobs)
		k = *knobs;
	else
		sd_market_knobs_init(&k);
	if (!(k.hazard_scale > 0) || !isfinite(k.hazard_scale) || k.hazard_scale > 1e9)
		return sd_why(why, "market: hazard scale must be a positive number, got %g", k.hazard_scale);
	if (!(k.notice_scale > 0) || !isfinite(k.notice_scale) || k.notice_scale > 1e6)
		return sd_why(why, "market: notice scale must be a positive number, got %g", k.notice_scale);
	if (!(k.boot_scale >= 0) || !isfinite(k.boot_scale) || k.boot_scale > 1e6)
		return sd_why(why, "market: boot scale must be a number >= 0, got %g", k.boot_scale);
	if (!(k.start_hour_of_day >= 0 && k.start_hour_of_day < 24))
		return sd_why(why, "market: start hour must be in [0, 24), got %g", k.start_hour_of_day);

	struct sd_market *m = sd_calloc(1, sizeof *m);
	m->cat = cat;
	m->k = k;
	m->free_head = -1;
	sd_rng_seed(&m->rng, k.seed, 1);
	sd_rng_seed(&m->brng, k.seed, 2);
	m->pool = sd_calloc((size_t)cat->noffers, sizeof *m->pool);
	m->zone_head = sd_calloc((size_t)cat->nzones + 1, sizeof *m->zone_head);
	for (int z = 0; z < cat->nzones; z++)
		m->zone_head[z] = -1;
	for (int i = 0; i < cat->noffers; i++) {
		const struct sd_offer *o = &cat->offers[i];
		struct pool *p = &m->pool[i];
		p->heap = -1;
		p->cur = -1;
		if (o->revocation.model != SD_REVOCATION_MARKOV || !k.storms)
			continue;
		p->markov = true;
		sd_rng_seed(&p->rng, k.seed, 1000 + (uint64_t)i);
		const struct sd_revocation *r = &o->revocation;
		double f = r->storm.mean_hours / (r->calm.mean_hours + r->storm.mean_hours);
		bool storm = u01(&p->rng) < f;
		path_append(p, 0, storm);
		p->path_end = dwell(m, o, p, storm);
		heap_push(m, -1 - i, 0);  /* announces the first segment */
	}
	*out = m;
	return 0;
}

void sd_market_free(struct sd_market *m)
{
	if (!m)
		return;
	for (int i = 0; i < m->cat->noffers; i++) {
		free(m->pool[i].seg_t);
		free(m->pool[i].seg_storm);
	}
	free(m->pool);
	free(m->zone_head);
	free(m->srv);
	free(m->heap);
	free(m->cand);
	free(m->cand_t);
	free(m);
}

/* The server's next event: 0 boot, 1 notice, 2 end; INFINITY if none. */
static double srv_next(const struct srv *s, int *kind)
{
	double t = INFINITY;
	*kind = -1;
	if (!s->booted && s->t_boot < s->t_end) {
		t = s->t_boot;
		*kind = 0;
	}
	if (isfinite(s->t_end)) {
		if (!s->noticed && s->t_notice < t) {
			t = s->t_notice;
			*kind = 1;
		}
		if (s->t_end < t) {
			t = s->t_end;
			*kind = 2;
		}
	}
	return t;
}

static void srv_schedule(struct sd_market *m, int slot)
{
	int kind;
	struct srv *s = &m->srv[slot];
	double t = srv_next(s, &kind);
	if (!isfinite(t)) {
		if (s->heap >= 0)
			heap_remove(m, s->heap);
	} else if (s->heap >= 0) {
		heap_move(m, s->heap, t);
	} else {
		heap_push(m, slot, t);
	}
}

static void srv_unlink_free(struct sd_market *m, int slot)
{
	struct srv *s = &m->srv[slot];
	if (s->heap >= 0)
		heap_remove(m, s->heap);
	int z = m->cat->offers[s->offer].zone_index;
	if (s->zprev >= 0)
		m->srv[s->zprev].znext = s->znext;
	else
		m->zone_head[z] = s->znext;
	if (s->znext >= 0)
		m->srv[s->znext].zprev = s->zprev;
	m->pool[s->offer].live--;
	m->live_total--;
	s->live = false;
	s->gen++;
	s->next_free = m->free_head;
	m->free_head = slot;
}

static sd_server_id srv_id(const struct sd_market *m, int slot)
{
	return ((uint64_t)m->srv[slot].gen << 32) | (uint64_t)(slot + 1);
}

static int srv_slot(const struct sd_market *m, sd_server_id id)
{
	uint64_t lo = id & 0xffffffffu;
	if (lo == 0 || lo > (uint64_t)m->nsrv)
		return -1;
	int slot = (int)(lo - 1);
	if (!m->srv[slot].live || m->srv[slot].gen != (uint32_t)(id >> 32))
		return -1;
	return slot;
}

bool sd_market_in_storm(const struct sd_market *m, const struct sd_offer *o)
{
	if (o < m->cat->offers || o >= m->cat->offers + m->cat->noffers)
		return false;
	struct pool *p = &m->pool[o->index];
	if (!p->markov)
		return false;
	int j = path_find(m, o, p, m->now);
	return p->seg_storm[j];
}

int sd_market_launch(struct sd_market *m, const struct sd_offer *o, sd_server_id *id, char **why)
{
	if (o < m->cat->offers || o >= m->cat->offers + m->cat->noffers)
		return sd_why(why, "market: offer is not from this market's catalog"), SD_MARKET_EINVAL;
	struct pool *p = &m->pool[o->index];
	if (m->k.enforce_capacity) {
		if (p->live >= o->capacity)
			return sd_why(why, "%s: capacity of %d servers reached", o->id, o->capacity), SD_MARKET_EFULL;
		if (o->transient && sd_market_in_storm(m, o))
			return sd_why(why, "%s: no capacity (the pool is in a storm)", o->id), SD_MARKET_ESTORM;
	}
	int slot = m->free_head;
	if (slot >= 0) {
		m->free_head = m->srv[slot].next_free;
	} else {
		if (m->nsrv == m->srvcap) {
			m->srvcap = m->srvcap ? 2 * m->srvcap : 256;
			struct srv *s = realloc(m->srv, sizeof *s * (size_t)m->srvcap);
			if (!s)
				sd_oom();
			m->srv = s;
		}
		slot = m->nsrv++;
		m->srv[slot].gen = 1;
	}
	struct srv *s = &m->srv[slot];
	uint32_t gen = s->gen;
	*s = (struct srv){ .gen = gen, .live = true, .offer = o->index, .heap = -1, .launched = m->now, .batch_size = 1 };
	s->t_boot = m->now + sd_boot_sample(o, m->k.boot_scale, &m->rng);
	s->t_end = INFINITY;
	if (o->revocation.model == SD_REVOCATION_EMPIRICAL) {
		struct sd_lifetime lt;
		double hour = m->k.start_hour_of_day + m->now * m->k.hazard_scale / 3600;
		sd_lifetime_sample(o, hour, m->k.hazard_scale, &m->rng, &lt);
		s->t_end = m->now + lt.seconds;
		s->capped = lt.capped;
	} else if (o->revocation.model == SD_REVOCATION_MARKOV) {
		s->t_end = markov_end(m, o, p);
	}
	if (isfinite(s->t_end))
		s->t_notice = fmax(m->now, s->t_end - o->notice_seconds * m->k.notice_scale);
	int z = o->zone_index;
	s->zprev = -1;
	s->znext = m->zone_head[z];
	if (s->znext >= 0)
		m->srv[s->znext].zprev = slot;
	m->zone_head[z] = slot;
	p->live++;
	m->live_total++;
	srv_schedule(m, slot);
	if (id)
		*id = srv_id(m, slot);
	return 0;
}

int sd_market_release(struct sd_market *m, sd_server_id id)
{
	int slot = srv_slot(m, id);
	if (slot < 0)
		return -1;
	srv_unlink_free(m, slot);
	return 0;
}

/* At the notice of `slot`'s revocation: maybe take others along.  Only
 * servers whose own revocation was due within the window are candidates,
 * the soonest first, so each server's lifetime moves by at most the window
 * and only servers that were going to be revoked anyway are revoked. */
static void maybe_batch(struct sd_market *m, int slot)
{
	struct srv *s = &m->srv[slot];
	const struct sd_offer *o = &m->cat->offers[s->offer];
	const struct sd_batch *b = &o->revocation.batch;
	if (u01(&m->brng) >= b->probability)
		return;
	double tot = 0, acc = 0;
	for (int i = 0; i < b->nsizes; i++)
		tot += b->size_weights[i];
	double u = u01(&m->brng) * tot;
	int size = b->sizes[b->nsizes - 1];
	for (int i = 0; i < b->nsizes; i++) {
		acc += b->size_weights[i];
		if (u < acc) {
			size = b->sizes[i];
			break;
		}
	}
	int need = size - 1;
	if (need > m->candcap) {
		m->candcap = need;
		free(m->cand);
		free(m->cand_t);
		m->cand = sd_malloc(sizeof *m->cand * (size_t)need);
		m->cand_t = sd_malloc(sizeof *m->cand_t * (size_t)need);
	}
	double X = m->k.hazard_scale, tr = s->t_end, last = tr + b->window_seconds / X;
	int n = 0;
	for (int q = m->zone_head[o->zone_index]; q >= 0; q = m->srv[q].znext) {
		const struct srv *c = &m->srv[q];
		if (q == slot || c->batch || c->noticed || c->capped || !(c->t_end > tr) || c->t_end > last)
			continue;
		if (b->scope == SD_BATCH_OFFER && c->offer != s->offer)
			continue;
		if (!m->cat->offers[c->offer].transient)
			continue;
		/* Keep the `need` soonest, sorted. */
		if (n == need && c->t_end >= m->cand_t[n - 1])
			continue;
		int i = n < need ? n++ : n - 1;
		while (i > 0 && m->cand_t[i - 1] > c->t_end) {
			m->cand[i] = m->cand[i - 1];
			m->cand_t[i] = m->cand_t[i - 1];
			i--;
		}
		m->cand[i] = q;
		m->cand_t[i] = c->t_end;
	}
	if (n == 0)
		return;
	uint64_t id = ++m->batch_seq;
	s->batch = id;
	s->batch_size = n + 1;
	for (int i = 0; i < n; i++) {
		struct srv *c = &m->srv[m->cand[i]];
		const struct sd_offer *co = &m->cat->offers[c->offer];
		c->t_end = fmin(c->t_end, tr + u01(&m->brng) * b->spread_seconds / X);
		c->t_notice = fmax(m->now, fmax(c->launched, c->t_end - co->notice_seconds * m->k.notice_scale));
		c->batch = id;
		c->batch_size = n + 1;
		srv_schedule(m, m->cand[i]);
	}
}

long sd_market_advance(struct sd_market *m, double now_seconds, sd_market_event_cb cb, void *ctx)
{
	long count = 0;
	if (!(now_seconds >= m->now))
		return 0;
	while (m->hn > 0 && m->heap[0].t <= now_seconds) {
		struct hnode top = m->heap[0];
		struct sd_market_event ev = { .time = top.t };
		m->now = top.t;
		if (top.ref < 0) {
			int i = -1 - top.ref;
			struct pool *p = &m->pool[i];
			const struct sd_offer *o = &m->cat->offers[i];
			p->cur++;
			path_compact(p);
			heap_move(m, p->heap, seg_end(m, o, p, p->cur));
			if (!p->seg_storm[p->cur] && p->cur == 0)
				continue;  /* starting calm: nothing to announce */
			ev.kind = p->seg_storm[p->cur] ? SD_MARKET_STORM_BEGIN : SD_MARKET_STORM_END;
			ev.offer = o;
			ev.batch_size = 0;
		} else {
			int slot = top.ref, kind;
			struct srv *s = &m->srv[slot];
			srv_next(s, &kind);
			const struct sd_offer *o = &m->cat->offers[s->offer];
			if (kind == 1 && m->k.batches && o->revocation.has_batch && !s->capped && !s->batch)
				maybe_batch(m, slot);
			s = &m->srv[slot];
			ev.server = srv_id(m, slot);
			ev.offer = o;
			ev.launched_at = s->launched;
			ev.ends_at = s->t_end;
			ev.capped = s->capped;
			ev.batch = s->batch;
			ev.batch_size = s->batch_size;
			if (kind == 0) {
				ev.kind = SD_MARKET_BOOTED;
				s->booted = true;
				srv_schedule(m, slot);
			} else if (kind == 1) {
				ev.kind = SD_MARKET_NOTICE;
				s->noticed = true;
				srv_schedule(m, slot);
			} else {
				ev.kind = s->capped ? SD_MARKET_CAPPED : SD_MARKET_REVOKED;
				srv_unlink_free(m, slot);
			}
		}
		count++;
		if (cb)
			cb(ctx, &ev);
	}
	m->now = now_seconds;
	return count;
}

double sd_market_now(const struct sd_market *m)
{
	return m->now;
}

double sd_market_next_event_time(const struct sd_market *m)
{
	return m->hn > 0 ? m->heap[0].t : INFINITY;
}

int sd_market_live(const struct sd_market *m, const struct sd_offer *o)
{
	if (o < m->cat->offers || o >= m->cat->offers + m->cat->noffers)
		return 0;
	return m->pool[o->index].live;
}

int sd_market_live_total(const struct sd_market *m)
{
	return m->live_total;
}
