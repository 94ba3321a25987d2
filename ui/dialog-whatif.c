/* ui/dialog-whatif.c - the what-if dialog (key w): the planner's table for
 * the job's remaining work on every cluster of the market, the running one
 * first among equals, sorted by median cost, the time/cost frontier
 * marked.  Enter on a row asks to switch to it (ui/screen.c turns the row's
 * commands into a confirmation).  The figures are simulated and the dialog
 * says so. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "ui/dialog.h"
#include "ui/format.h"

const char *sd_whatif_row_id(const struct sd_view *v, int i)
{
	return v->whatif[i].label;
}

int sd_whatif_rows(const struct sd_view *v)
{
	return v->whatif && v->nwhatif > 0 ? v->nwhatif : 0;
}

void sd_whatif_size(const struct sd_view *v, int *h, int *w)
{
	int n = sd_whatif_rows(v);
	*h = (n ? n : 1) + 7;   /* frame, note, title row, rows, summary, footer */
	*w = 96;
}

void sd_whatif_draw(struct sd_modal *m, const struct sd_view *v, const struct sd_draw *d)
{
	WINDOW *win = m->win;
	int n = sd_whatif_rows(v), inner = m->w - 4;
	wattrset(win, d->a[SD_STYLE_SIMULATED]);
	char note[256];
	snprintf(note, sizeof note, "%s%.*s", v->whatif_busy ? "planning... " : "", (int)sizeof v->whatif_note,
	         v->whatif_note[0] ? v->whatif_note : "simulated");
	sd_put(win, d->g, 1, 2, note, inner);
	wattrset(win, d->a[SD_STYLE_TITLE]);
	char head[160];
	snprintf(head, sizeof head, "  %-24s %8s %8s %8s %8s %6s %6s", "cluster", "time", "p90", "cost", "p90",
	         "revoc.", "failed");
	sd_put(win, d->g, 2, 2, head, inner);
	int rows = m->h - 6;
	int sel = sd_list_resolve(&m->list, v, n, sd_whatif_row_id, rows);
	for (int r = 0; r < rows && m->list.top + r < n; r++) {
		int i = m->list.top + r;
		const struct sd_view_whatif *x = &v->whatif[i];
		char t50[24], t90[24], c50[24], c90[24], fl[24], line[256];
		sd_fmt_duration(t50, sizeof t50, x->time_p50_s);
		sd_fmt_duration(t90, sizeof t90, x->time_p90_s);
		sd_fmt_usd(c50, sizeof c50, x->cost_p50_usd);
		sd_fmt_usd(c90, sizeof c90, x->cost_p90_usd);
		sd_fmt_pct(fl, sizeof fl, x->failed, 1);
		snprintf(line, sizeof line, "%c %-24.24s %8s %8s %8s %8s %6.2f %6s", x->pareto ? '*' : ' ', x->label, t50,
		         t90, c50, c90, x->revocations, fl);
		enum sd_style st = i == sel ? SD_STYLE_SELECTION : x->current ? SD_STYLE_OK
		                   : x->transient ? SD_STYLE_SPOT : SD_STYLE_ONDEMAND;
		wattrset(win, d->a[st]);
		sd_blank(win, 3 + r, 1, m->w - 2);
		sd_put(win, d->g, 3 + r, 2, line, inner);
	}
	wattrset(win, d->a[SD_STYLE_DIALOG]);
	if (sel >= 0)
		sd_put(win, d->g, m->h - 3, 2, v->whatif[sel].summary, inner);
	else if (!v->whatif_busy)
		sd_put(win, d->g, m->h - 3, 2, "nothing planned", inner);
	const char *keys[] = { "Enter", "switch to it", "Esc", "close", "j/k", "move", "*", "frontier" };
	/* The footer helper lives in dialog.c; draw the same way here. */
	int x = 2;
	for (int i = 0; i + 1 < 8 && x < m->w - 2; i += 2) {
		wattrset(win, d->a[SD_STYLE_KEY]);
		x += sd_put(win, d->g, m->h - 2, x, keys[i], m->w - 2 - x) + 1;
		wattrset(win, d->a[SD_STYLE_DIALOG]);
		if (x < m->w - 2)
			x += sd_put(win, d->g, m->h - 2, x, keys[i + 1], m->w - 2 - x) + 2;
	}
}
