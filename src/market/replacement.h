/* src/market/replacement.h - which offer to suggest when a server must be replaced,
 * and why in a few words.  Pure computation over a catalog and a list of
 * recent market events: no UI, no libuv, no clock of its own (the caller
 * passes "now").
 *
 * Why not just the cheapest offer
 * -------------------------------
 * The seeds measured that revocations come in batches in the same zone and
 * minute (reference/seeds.md 2.3: 4 P100s in us-west1-b in one minute, 3+3
 * K80s in us-central1-c), and today's traces show storms during which a pool
 * revokes and refuses servers (reference/market-data.md 5 and 7).  The
 * cheapest offer per image is therefore a poor replacement when its zone has
 * just revoked a server or refused one: that is where the next revocation is
 * most likely (SkyPilot #10021 reports exactly this: the replacement landing
 * in the zone that had just preempted).
 *
 * The score
 * ---------
 * For an offer o let c(o) be its USD per million images at the catalog's
 * speed, usd_per_hour / (images_per_sec x gpu_count x 3600) x 1e6 (the
 * market pane's $/Mimg), and r(o) the probability that recent events make a
 * server of o launched now be lost within the horizon H = 1 h of model time
 * (refused, or revoked).  A server lost within H is counted as having bought
 * nothing in it: its boot, the group's re-formation and the steps since the
 * last checkpoint are lost and a replacement must boot.  If each attempt
 * survives H with probability 1 - r, the number of attempts until one does
 * is geometric with mean 1 / (1 - r), so the expected cost per million
 * images is at most
 *
 *     score(o) = c(o) / (1 - r(o)).
 *
 * The suggestion is the transient offer with room left (available != 0)
 * with the lowest score.  Scores within 0.1 % of each other tie; a tie goes
 * to the lower market risk r_base (below), then the lower c, then catalog
 * order.  An offer with r = 1 (its zone takes no request now) is never
 * suggested.
 *
 * The market model's own P(revoked within H), r_base, breaks ties but is not
 * in the score: it is what the market pane shows beside $/Mimg, and the
 * per-zone figures behind it rest on few servers (10 to 48 per GPU and
 * region in the seeds' trace: 0 of 10 P100s revoked in europe-west1-b's
 * first hour, a 95 % interval of 0-31 %), too few to rank zones of equal
 * price against evidence of the last minutes.
 *
 * The risk of recent events
 * -------------------------
 *     r(o) = 1 - (1 - r_batch(o)) (1 - r_storm(o)) (1 - r_stockout(o))
 *
 * treating the causes as independent.  Ages a are in model seconds (market
 * seconds x hazard_scale), the time base of every catalog number, so a demo
 * with hazard_scale 30 forgets a zone's events 30 times sooner.  Of several
 * events of one kind the one giving the highest value counts (several
 * revocations of one batch are one piece of evidence, not several).
 *
 *  r_batch    a revocation within o's batch scope (its zone for
 *             SD_BATCH_ZONE, its own offer for SD_BATCH_OFFER), a ago:
 *             p x exp(-a / w), where p = batch.probability is the measured
 *             share of revocations that took others along (20.8 % of the
 *             Feb-2019 GCE revocations, 35 % of the 2021 g4dn removals) and
 *             w = batch.window_seconds is the catalog's window over which a
 *             batch gathers its members (1 h).  0 for an offer without a
 *             batch model.  (The trace behind the 2019 figure shows the
 *             zone's other servers revoked within the next hour 3x as often
 *             as at other times, 7 of 235, after the batch's own minute: p
 *             is the larger, catalog-given, bound.)
 *  r_storm    (SD_REVOCATION_MARKOV offers) a revocation of o itself, a ago,
 *             is evidence that o's pool is in a storm.  By Bayes with the
 *             stationary shares pi of the mean dwell times and the hourly
 *             rates lambda, P(storm | a revocation) = pi_s l_s / (pi_s l_s +
 *             pi_c l_c); the storm is still on after a with P = exp(-a m),
 *             m = 1 / storm.mean (exponential dwell); and a server launched
 *             in a storm is revoked before it ends and within H with P =
 *             l_s / (l_s + m) (1 - exp(-(l_s + m) H)).  r_storm is the product.
 *  r_stockout a stockout of o's zone (a trace's zone_exhausted, whole zone)
 *             of known length: 1 until it ends, 0 after.  A refused request
 *             of o (ZONE_RESOURCE_POOL_EXHAUSTED, length unknown) a ago:
 *             exp(-a / d), the chance the pool still refuses, with d the
 *             storm's mean dwell for Markov offers (their storms are what
 *             refuse requests) and else 1 h of model time (the shortest mean
 *             "down-run", time until a spot can be had again, measured on
 *             AWS p3 in 2023 was 0.8 h: reference/market-data.md 5).
 *
 * Units: seconds, USD.  Offers and events are the caller's; nothing here
 * allocates.
 */
#ifndef SD_MARKET_REPLACEMENT_H
#define SD_MARKET_REPLACEMENT_H

#include <stddef.h>

#include "src/market/catalog.h"

/* The planning horizon H, in model seconds (see above). */
#define SD_REPLACEMENT_HORIZON_S 3600.0

enum sd_replacement_event_kind {
	SD_REPLACEMENT_REVOKED,      /* a server of `offer` was revoked */
	SD_REPLACEMENT_STOCKOUT,     /* a request was refused (offer set, seconds < 0) or
	                          * the zone takes no request for `seconds` (offer NULL) */
};

/* One thing that happened in a zone. */
struct sd_replacement_event {
	enum sd_replacement_event_kind kind;
	double t;                        /* when, market seconds on the caller's clock */
	const char *zone;                /* the zone, as sd_offer.zone spells it */
	const struct sd_offer *offer;    /* the offer it happened to; NULL: the whole zone */
	double seconds;                  /* STOCKOUT: how long the zone refuses, < 0 unknown */
};

struct sd_replacement_input {
	const struct sd_catalog *cat;
	/* Per catalog offer (by index): its price now, USD/hour (the market's,
	 * which a trace changes); NULL: the catalog's usd_per_hour. */
	const double *usd_per_hour;
	/* Per catalog offer (by index): servers that can still be acquired, -1
	 * unknown; NULL: unknown for all. */
	const int *available;
	const struct sd_replacement_event *events;
	int nevents;
	double now;                      /* market seconds, same clock as events' t */
	double hazard_scale;             /* model seconds per market second, > 0 */
};

/* The risk of one offer now (each a probability in [0, 1]): recent is r(o)
 * above, from batch, storm and stockout; base is r_base; event: index of
 * the event that weighed most (-1 none). */
struct sd_replacement_risk {
	double recent, base, batch, storm, stockout;
	int event;
};

/* r(o) and its parts, as above. */
void sd_replacement_risk(const struct sd_replacement_input *in, const struct sd_offer *o,
                     struct sd_replacement_risk *out);

/* What the scorer suggests. */
struct sd_replacement_choice {
	int offer;                       /* catalog index, -1: nothing to suggest */
	double score;                    /* its USD per million images, recent risk counted */
	double usd_per_mimage;           /* its c */
	struct sd_replacement_risk risk;     /* its r */
	int cheapest;                    /* it also has the lowest c of the eligible offers */
	/* The event that most changed the choice: the one that weighed most on
	 * the offer with the lowest c that was passed over (passed_over = 1),
	 * or else, when the suggestion itself bears a recent event, that one
	 * (passed_over = 0); -1 when no recent event mattered. */
	int event;
	int passed_over;
};

/* Scores every transient offer with room left and fills *out.  Returns 0,
 * or -1 when no offer can be suggested (out->offer = -1). */
int sd_replacement_suggest(const struct sd_replacement_input *in, struct sd_replacement_choice *out);

/* Says why in a few words, for the status line: "cheapest $/Mimg",
 * "cheapest $/Mimg; us-east1-c revoked 18s ago", "best $/Mimg for its risk;
 * us-east1-c out of stock 5s ago", "cheapest $/Mimg despite us-west1-b
 * revoked 2m05s ago".  Ages are market seconds to in->now.  Writes at most n
 * bytes (NUL included) to buf and returns buf. */
char *sd_replacement_explain(const struct sd_replacement_input *in, const struct sd_replacement_choice *c,
                         char *buf, size_t n);

/* USD per million images of o at the catalog's speed and price. */
double sd_replacement_usd_per_mimage(const struct sd_offer *o);
/* The same at in's price now for o (in->usd_per_hour, else the catalog's). */
double sd_replacement_usd_per_mimage_now(const struct sd_replacement_input *in, const struct sd_offer *o);

#endif
