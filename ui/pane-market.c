/* ui/pane-market.c - the market: offers sorted by cost-efficiency ($ per
 * million images at the offer's speed), with price, speed, P(revoked within
 * 1 h) and availability.  Estimated prices carry a '*', a real cloud's
 * P(revoked) (the calibrated market's model) a '~'; the speeds are a
 * catalog's (ResNet-32, the seeds' workload), as the frame says, or that
 * speed scaled to the job's model by its training FLOPs ('~' before them),
 * or unknown (ssh hosts).  A language model's are its GPUs' estimate, and
 * the frame says it trains on the servers' CPUs for now. */
#include "config.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "ui/pane.h"

static void market_draw(struct sd_pane *p, const struct sd_view *v, const struct sd_draw *d)
{
	char title[64];
	int n = v->offers && v->noffers > 0 ? v->noffers : 0;
	int rows = p->h - 3;
	int marks = sd_offer_table(p->win, 1, 1, p->h - 2, p->w - 2, v, &p->list, d, d->focused);
	int est = marks & SD_OFFERS_ESTIMATED;
	snprintf(title, sizeof title, "Market (%d offer%s)", n, n == 1 ? "" : "s");
	if (n > rows && rows > 0) {
		size_t l = strlen(title);
		snprintf(title + l, sizeof title - l, " %d-%d/%d", p->list.top + 1,
		         p->list.top + rows < n ? p->list.top + rows : n, n);
	}
	/* Catalog speeds were measured on the seeds' workload (ResNet-32),
	 * whatever this job's model: say so where there is room.  Offers of
	 * real machines (ssh hosts) have no speed before a run measures one,
	 * and no such label. */
	int quoted = 0;
	for (int i = 0; i < n; i++)
		quoted |= isfinite(v->offers[i].images_per_sec);
	const char *foot = !quoted ? (est ? "* estimated price" : NULL)
	                   /* A language model trains on the servers' CPUs
	                    * for now (engine/train.c): the GPU speeds are
	                    * not what it gets. */
	                   : v->unit_tokens
	                     ? (est ? "~ GPU tok/s, LM trains on CPUs; * est. price"
	                            : "~ GPU tok/s from FLOPs; LM trains on CPUs for now")
	                   : (marks & SD_OFFERS_SPEED_ESTIMATED)
	                     ? (est ? "~ img/s est. from FLOPs, * estimated price" : "~ img/s estimated from FLOPs")
	                   : est ? "ResNet-32 img/s, * estimated price" : "ResNet-32 img/s";
	/* A real cloud's P(revoked) is a model's estimate, not a measurement. */
	if (marks & SD_OFFERS_MODELLED)
		foot = est ? "~ P(rev) model estimate, * estimated price" : "~ P(rev) model estimate";
	if (foot && (int)strlen(foot) + (int)strlen(title) + 10 > p->w)
		foot = marks & SD_OFFERS_MODELLED ? "~ model P(rev)"
		       : v->unit_tokens && quoted ? "LM trains on CPUs" : est ? "* estimated price" : NULL;
	sd_pane_frame(p, d, title, foot);
}

static uint64_t market_signature(const struct sd_pane *p, const struct sd_view *v)
{
	uint64_t h = sd_hash(SD_HASH_INIT, &v->noffers, sizeof v->noffers);
	h = sd_hash(h, &v->unit_tokens, sizeof v->unit_tokens);
	if (v->offers && v->noffers > 0)
		h = sd_hash(h, v->offers, (size_t)v->noffers * sizeof *v->offers);
	return h;
}

static int market_nav(struct sd_pane *p, enum sd_nav how, const struct sd_view *v)
{
	return sd_list_nav(&p->list, how, v, v->offers ? v->noffers : 0, sd_offer_id, p->h - 4);
}

const struct sd_pane_ops sd_pane_market_ops = {
	.name = "market",
	.focusable = 1,
	.draw = market_draw,
	.signature = market_signature,
	.nav = market_nav,
};
