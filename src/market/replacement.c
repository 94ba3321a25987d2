/* src/market/replacement.c - see replacement.h. */
#include "config.h"

#include "src/market/replacement.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "src/market/market-model.h"

/* Scores this close are a tie (then the lower c, then catalog order win), so
 * that an event decayed to nothing no longer decides anything. */
#define TIE_REL 1e-3

/* A refused request's pool is taken to refuse for this long on average when
 * the catalog has no storm to say (model seconds; replacement.h, r_stockout). */
#define STOCKOUT_MEAN_S 3600.0

double sd_replacement_usd_per_mimage(const struct sd_offer *o)
{
	double ips = o->images_per_sec * o->gpu_count;
	return ips > 0 ? o->usd_per_hour / (ips * 3600) * 1e6 : INFINITY;
}

double sd_replacement_usd_per_mimage_now(const struct sd_replacement_input *in, const struct sd_offer *o)
{
	if (!in->usd_per_hour)
		return sd_replacement_usd_per_mimage(o);
	double ips = o->images_per_sec * o->gpu_count;
	return ips > 0 ? in->usd_per_hour[o->index] / (ips * 3600) * 1e6 : INFINITY;
}

static int same_zone(const struct sd_replacement_event *e, const struct sd_offer *o)
{
	if (!e->zone || !o->zone || strcmp(e->zone, o->zone) != 0)
		return 0;
	/* Zone names are the provider's own: compare providers when known. */
	return !e->offer || !e->offer->provider || !o->provider || !strcmp(e->offer->provider, o->provider);
}

/* replacement.h, r_storm: P(a server of o launched a model seconds after a
 * revocation of o is revoked within the horizon because o's pool is in a
 * storm). */
static double storm_risk(const struct sd_offer *o, double a)
{
	const struct sd_markov_state *c = &o->revocation.calm, *s = &o->revocation.storm;
	if (!(s->mean_hours > 0) || !(c->mean_hours > 0))
		return 0;
	double pi_s = s->mean_hours / (s->mean_hours + c->mean_hours), pi_c = 1 - pi_s;
	double den = pi_s * s->per_hour + pi_c * c->per_hour;
	if (!(den > 0))
		return 0;
	double p_storm = pi_s * s->per_hour / den;             /* Bayes, at the revocation */
	double m = 1 / s->mean_hours;                          /* per hour */
	double still = exp(-a / 3600 * m);                     /* storm not over after a */
	double k = s->per_hour + m, h = SD_REPLACEMENT_HORIZON_S / 3600;
	double hit = k > 0 ? s->per_hour / k * (1 - exp(-k * h)) : 0;
	return p_storm * still * hit;
}

/* replacement.h, r_stockout for a refused request of unknown length. */
static double refusal_risk(const struct sd_offer *o, double a)
{
	double d = o->revocation.model == SD_REVOCATION_MARKOV && o->revocation.storm.mean_hours > 0
	               ? o->revocation.storm.mean_hours * 3600 : STOCKOUT_MEAN_S;
	return exp(-a / d);
}

void sd_replacement_risk(const struct sd_replacement_input *in, const struct sd_offer *o,
                     struct sd_replacement_risk *out)
{
	memset(out, 0, sizeof *out);
	out->event = -1;
	out->base = o->transient ? sd_market_p_revoked_within(o, SD_REPLACEMENT_HORIZON_S, 1) : 0;
	double worst = 0;
	double scale = in->hazard_scale > 0 ? in->hazard_scale : 1;
	const struct sd_revocation *rv = &o->revocation;
	for (int i = 0; i < in->nevents; i++) {
		const struct sd_replacement_event *e = &in->events[i];
		if (!same_zone(e, o))
			continue;
		double age = in->now - e->t;           /* market seconds */
		if (!(age >= 0))
			age = 0;
		double a = age * scale;                /* model seconds */
		double v = 0;
		if (e->kind == SD_REPLACEMENT_REVOKED) {
			if (rv->has_batch && (rv->batch.scope == SD_BATCH_ZONE || e->offer == o)) {
				double w = rv->batch.window_seconds;
				double b = rv->batch.probability * (w > 0 ? exp(-a / w) : a <= 0);
				out->batch = fmax(out->batch, b);
				v = fmax(v, b);
			}
			if (rv->model == SD_REVOCATION_MARKOV && e->offer == o) {
				double s = storm_risk(o, a);
				out->storm = fmax(out->storm, s);
				v = fmax(v, s);
			}
		} else if (e->seconds >= 0) {
			/* The zone takes no request until the stockout ends. */
			if ((!e->offer || e->offer == o) && age < e->seconds)
				v = out->stockout = 1;
		} else if (!e->offer || e->offer == o) {
			double s = refusal_risk(o, a);
			out->stockout = fmax(out->stockout, s);
			v = fmax(v, s);
		}
		if (v > worst) {
			worst = v;
			out->event = i;
		}
	}
	out->recent = 1 - (1 - out->batch) * (1 - out->storm) * (1 - out->stockout);
}

int sd_replacement_suggest(const struct sd_replacement_input *in, struct sd_replacement_choice *out)
{
	memset(out, 0, sizeof *out);
	out->offer = -1;
	out->event = -1;
	const struct sd_catalog *cat = in->cat;
	if (!cat)
		return -1;
	double best = INFINITY, min_c = INFINITY;
	/* The lowest score; within TIE_REL of it, the lowest market risk, then
	 * the lowest c, then the first. */
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < cat->noffers; i++) {
			const struct sd_offer *o = &cat->offers[i];
			if (!o->transient || (in->available && in->available[i] == 0))
				continue;
			struct sd_replacement_risk r;
			sd_replacement_risk(in, o, &r);
			double c = sd_replacement_usd_per_mimage_now(in, o);
			if (!(r.recent < 1) || !isfinite(c))
				continue;
			double score = c / (1 - r.recent);
			if (pass == 0) {
				best = fmin(best, score);
				min_c = fmin(min_c, c);
			} else if (score <= best * (1 + TIE_REL) &&
			           (out->offer < 0 || r.base < out->risk.base ||
			            (r.base == out->risk.base && c < out->usd_per_mimage))) {
				out->offer = i;
				out->score = score;
				out->usd_per_mimage = c;
				out->risk = r;
			}
		}
	if (out->offer < 0)
		return -1;
	out->cheapest = out->usd_per_mimage <= min_c * (1 + TIE_REL);

	/* Why not a cheaper (or as cheap) offer: the cheapest that recent
	 * events alone put behind the suggestion (even out of reach, r = 1)
	 * names the event; else an event the suggestion itself bears. */
	int why = -1;
	double why_c = INFINITY;
	for (int i = 0; i < cat->noffers; i++) {
		const struct sd_offer *o = &cat->offers[i];
		if (i == out->offer || !o->transient || (in->available && in->available[i] == 0))
			continue;
		double c = sd_replacement_usd_per_mimage_now(in, o);
		if (!(c <= out->usd_per_mimage * (1 + TIE_REL)) || !(c < why_c))
			continue;
		struct sd_replacement_risk r;
		sd_replacement_risk(in, o, &r);
		/* Passed over for its recent events: it lost, and without them it
		 * would have been as good as the suggestion. */
		double band = out->score * (1 + TIE_REL);
		if (r.event < 0 || !(r.recent > 0) || c > band || (r.recent < 1 && c / (1 - r.recent) <= band))
			continue;
		why = r.event;
		why_c = c;
	}
	if (why >= 0) {
		out->event = why;
		out->passed_over = 1;
	} else if (out->risk.event >= 0 && out->risk.recent >= 0.01) {
		out->event = out->risk.event;
		out->passed_over = 0;
	}
	return 0;
}

/* "18s", "3m05s", "2h10m", as the cockpit writes durations. */
static void fmt_age(char *buf, size_t n, double s)
{
	long t = s > 0 && s < 1e9 ? (long)(s + 0.5) : 0;
	if (t < 60)
		snprintf(buf, n, "%lds", t);
	else if (t < 3600)
		snprintf(buf, n, "%ldm%02lds", t / 60, t % 60);
	else
		snprintf(buf, n, "%ldh%02ldm", t / 3600, (t % 3600) / 60);
}

char *sd_replacement_explain(const struct sd_replacement_input *in, const struct sd_replacement_choice *c,
                         char *buf, size_t n)
{
	if (!n)
		return buf;
	buf[0] = '\0';
	if (c->offer < 0)
		return buf;
	const char *basis = c->cheapest ? "cheapest $/Mimg" : "best $/Mimg for its risk";
	if (c->event < 0 || c->event >= in->nevents) {
		snprintf(buf, n, "%s", basis);
		return buf;
	}
	const struct sd_replacement_event *e = &in->events[c->event];
	char age[32];
	fmt_age(age, sizeof age, in->now - e->t);
	const char *what = e->kind == SD_REPLACEMENT_REVOKED ? "revoked" : "out of stock";
	snprintf(buf, n, "%s%s%s %s %s ago", basis, c->passed_over ? "; " : " despite ",
	         e->zone ? e->zone : "?", what, age);
	return buf;
}
