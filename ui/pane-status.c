/* ui/pane-status.c - the status line: on the left the UI's own note while
 * it lasts (a command's error, "sent: ..."), else the suggestion after a
 * revocation and why ("r: replace s3 with gce/... (cheapest $/Mimg)"), else
 * the run's last message; on the right the key
 * hints, taken from the key table and dropped by priority when short of
 * room. */
#include "config.h"

#include <math.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ui/keys.h"
#include "ui/pane.h"

#define MAX_HINTS 16

struct hint {
	const char *key, *word;
	int prio;
	int w;
};

static int hint_order(const void *a, const void *b)
{
	const struct sd_key *x = *(const struct sd_key *const *)a, *y = *(const struct sd_key *const *)b;
	return x->hint_prio - y->hint_prio;
}

static void status_draw(struct sd_pane *p, const struct sd_view *v, const struct sd_draw *d)
{
	WINDOW *w = p->win;
	char msg[256];
	enum sd_style mstyle = SD_STYLE_STATUS;

	wattrset(w, d->a[SD_STYLE_STATUS]);
	sd_blank(w, 0, 0, p->w);

	if (d->note && d->note[0]) {
		/* The operator just acted: the answer to that comes first, for
		 * the few seconds a note lasts. */
		snprintf(msg, sizeof msg, "%s", d->note);
		mstyle = d->note_style;
	} else if (v->autopilot_pending[0]) {
		/* The autopilot's move, while the operator can still hold it. */
		double in = v->autopilot_pending_at - v->elapsed_s;
		snprintf(msg, sizeof msg, "autopilot: %.*s in %.0f s - A to hold", (int)sizeof v->autopilot_pending,
		         v->autopilot_pending, in > 0 ? ceil(in) : 0);
		mstyle = SD_STYLE_WARN;
	} else if (v->suggestion[0]) {
		if (v->suggestion_for[0])
			snprintf(msg, sizeof msg, "r: replace %.*s with %.*s", (int)sizeof v->suggestion_for,
			         v->suggestion_for, (int)sizeof v->suggestion, v->suggestion);
		else
			snprintf(msg, sizeof msg, "r: add %.*s", (int)sizeof v->suggestion, v->suggestion);
		if (v->suggestion_why[0]) {
			size_t l = strlen(msg);
			snprintf(msg + l, sizeof msg - l, " (%.*s)", (int)sizeof v->suggestion_why,
			         v->suggestion_why);
		}
		mstyle = SD_STYLE_WARN;
	} else {
		snprintf(msg, sizeof msg, "%.*s", (int)sizeof v->message, v->message);
	}

	/* Hints in the table's hint order; drop from the end until the
	 * message keeps at least half the line (or all of itself; a suggestion
	 * all of itself). */
	const struct sd_key *keys[MAX_HINTS];
	int n = 0;
	for (int i = 0; i < sd_nkeys && n < MAX_HINTS; i++) {
		if (sd_keys[i].hint && (sd_keys[i].ctx & SD_CTX_MAIN) && sd_key_offered(&sd_keys[i], v))
			keys[n++] = &sd_keys[i];
	}
	qsort(keys, (size_t)n, sizeof keys[0], hint_order);
	int widths[MAX_HINTS], total = 0;
	for (int i = 0; i < n; i++) {
		const char *word = v->paused && keys[i]->hint_paused ? keys[i]->hint_paused : keys[i]->hint;
		widths[i] = (int)strlen(sd_key_hint_label(keys[i])) + 1 + (int)strlen(word) + 2;
		total += widths[i];
	}
	int mw = sd_width(d->g, msg);
	int want = mw < p->w / 2 ? mw : p->w / 2;
	/* A suggestion and its reason are worth more than the hints (the
	 * help lists the keys): they may take all the room but two hints. */
	if (mstyle == SD_STYLE_WARN && (v->suggestion[0] || v->autopilot_pending[0]) && !(d->note && d->note[0]))
		want = mw;
	while (n > 2 && total + want + 2 > p->w) {
		n--;
		total -= widths[n];
	}

	wattrset(w, d->a[mstyle]);
	sd_put(w, d->g, 0, 1, msg, p->w - total - 2 > 0 ? p->w - total - 2 : 0);

	int x = p->w - total;
	if (x < 1)
		x = 1;
	for (int i = 0; i < n && x < p->w; i++) {
		const char *word = v->paused && keys[i]->hint_paused ? keys[i]->hint_paused : keys[i]->hint;
		wattrset(w, d->a[SD_STYLE_KEY]);
		x += sd_put(w, d->g, 0, x, sd_key_hint_label(keys[i]), p->w - x);
		wattrset(w, d->a[SD_STYLE_STATUS]);
		x += 1;
		x += sd_put(w, d->g, 0, x, word, p->w - x) + 2;
	}
}

static uint64_t status_signature(const struct sd_pane *p, const struct sd_view *v)
{
	uint64_t h = sd_hash(SD_HASH_INIT, v->message, strnlen(v->message, sizeof v->message));
	h = sd_hash(h, v->suggestion, strnlen(v->suggestion, sizeof v->suggestion));
	h = sd_hash(h, v->suggestion_for, strnlen(v->suggestion_for, sizeof v->suggestion_for));
	h = sd_hash(h, v->suggestion_why, strnlen(v->suggestion_why, sizeof v->suggestion_why));
	h = sd_hash(h, &v->simulated, sizeof v->simulated);
	h = sd_hash(h, v->autopilot_pending, strnlen(v->autopilot_pending, sizeof v->autopilot_pending));
	if (v->autopilot_pending[0]) {
		/* Its countdown moves every second. */
		long in = (long)ceil(v->autopilot_pending_at - v->elapsed_s);
		h = sd_hash(h, &in, sizeof in);
	}
	return sd_hash(h, &v->paused, sizeof v->paused);
}

const struct sd_pane_ops sd_pane_status_ops = {
	.name = "status",
	.focusable = 0,
	.draw = status_draw,
	.signature = status_signature,
	.nav = NULL,
};
