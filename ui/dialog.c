/* ui/dialog.c - offer picker, confirmation and help overlay. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "ui/dialog.h"
#include "ui/keys.h"

/* ---- help: built from the key table ---- */

#define HELP_MAX 64

struct help_line {
	const char *label;      /* NULL: a section title in text */
	char text[96];
};

/* Fills the help lines: keys of the main screen, keys of the dialogs,
 * symbols.  Returns the count; *split is where the dialogs' keys start. */
static int help_lines(struct help_line *l, int *split, const struct sd_glyphs *g, const char *theme)
{
	int n = 0;
	l[n].label = NULL;
	snprintf(l[n++].text, sizeof l[0].text, "Keys");
	for (int i = 0; i < sd_nkeys && n < HELP_MAX; i++) {
		if (sd_keys[i].label && sd_keys[i].help && (sd_keys[i].ctx & SD_CTX_MAIN)) {
			l[n].label = sd_keys[i].label;
			snprintf(l[n++].text, sizeof l[0].text, "%s", sd_keys[i].help);
		}
	}
	*split = n;
	l[n].label = NULL;
	snprintf(l[n++].text, sizeof l[0].text, "In dialogs");
	for (int i = 0; i < sd_nkeys && n < HELP_MAX; i++) {
		if (sd_keys[i].label && sd_keys[i].help && !(sd_keys[i].ctx & SD_CTX_MAIN)) {
			l[n].label = sd_keys[i].label;
			snprintf(l[n++].text, sizeof l[0].text, "%s", sd_keys[i].help);
		}
	}
	l[n].label = NULL;
	snprintf(l[n++].text, sizeof l[0].text, "Symbols");
	static const char *const sym_labels[] = { "~", "*", NULL };
	static const char *const sym_text[] = {
		"emulated GPU speed",
		"estimated price",
		"revocation",
	};
	for (int i = 0; i < 3 && n < HELP_MAX; i++) {
		l[n].label = sym_labels[i] ? sym_labels[i] : g->str[SD_G_MARK];
		snprintf(l[n++].text, sizeof l[0].text, "%s", sym_text[i]);
	}
	if (n < HELP_MAX) {
		l[n].label = "theme";
		snprintf(l[n++].text, sizeof l[0].text, "%s (t: next)", theme ? theme : "?");
	}
	return n;
}

/* Width of the label column for lines [from, to): the longest label and
 * a blank. */
static int help_label_w(const struct help_line *l, int from, int to)
{
	int w = 0;
	for (int i = from; i < to; i++) {
		int n = l[i].label ? (int)strlen(l[i].label) : 0;
		if (n > w)
			w = n;
	}
	return w + 1;
}

/* Width of lines [from, to) with a label column of LW. */
static int help_col_w(const struct help_line *l, int from, int to, int lw, const struct sd_glyphs *g)
{
	int w = 0;
	for (int i = from; i < to; i++) {
		int n = (l[i].label ? lw : 0) + sd_width(g, l[i].text);
		if (n > w)
			w = n;
	}
	return w;
}

/* ---- placing ---- */

void sd_modal_place(struct sd_modal *m, int lines, int cols, const struct sd_view *v, const struct sd_glyphs *g)
{
	if (m->win) {
		delwin(m->win);
		m->win = NULL;
	}
	int h = 0, w = 0;
	switch (m->kind) {
	case SD_MODAL_NONE:
		return;
	case SD_MODAL_PICKER: {
		int n = v->offers && v->noffers > 0 ? v->noffers : 1;
		h = n + 5;
		w = 100;
		break;
	}
	case SD_MODAL_WHATIF:
		sd_whatif_size(v, &h, &w);
		break;
	case SD_MODAL_CONFIRM:
		h = 7 + (int)strlen(m->question) / 96;
		w = (int)strlen(m->question) + 6;
		if (w < 50)
			w = 50;
		if (w > 100)
			w = 100;
		break;
	case SD_MODAL_HELP: {
		struct help_line l[HELP_MAX];
		int split, n = help_lines(l, &split, g, "high-contrast");
		h = n + 3;
		w = help_col_w(l, 0, n, help_label_w(l, 0, n), g) + 4;
		if (h > lines - 2) {
			/* Two columns: the main keys left, the rest right. */
			int left = help_col_w(l, 0, split, help_label_w(l, 0, split), g);
			int right = help_col_w(l, split, n, help_label_w(l, split, n), g);
			h = (split > n - split ? split : n - split) + 3;
			w = left + right + 7;
		}
		break;
	}
	}
	if (w > cols - 2)
		w = cols - 2;
	if (h > lines - 2)
		h = lines - 2;
	if (h < 5)
		h = 5;
	if (w < 20)
		w = 20;
	m->h = h;
	m->w = w;
	m->win = newwin(h, w, (lines - h) / 2, (cols - w) / 2);
	m->dirty = 1;
}

void sd_modal_close(struct sd_modal *m)
{
	if (m->win)
		delwin(m->win);
	m->win = NULL;
	m->kind = SD_MODAL_NONE;
	m->dirty = 0;
}

unsigned sd_modal_ctx(const struct sd_modal *m)
{
	switch (m->kind) {
	case SD_MODAL_PICKER:
	case SD_MODAL_WHATIF: return SD_CTX_PICKER;
	case SD_MODAL_CONFIRM: return SD_CTX_CONFIRM;
	case SD_MODAL_HELP: return SD_CTX_HELP;
	case SD_MODAL_NONE: break;
	}
	return SD_CTX_MAIN;
}

/* ---- drawing ---- */

static void frame(struct sd_modal *m, const struct sd_draw *d, const char *title)
{
	WINDOW *w = m->win;
	wattrset(w, d->a[SD_STYLE_DIALOG]);
	for (int y = 0; y < m->h; y++)
		sd_blank(w, y, 0, m->w);
	wattrset(w, d->a[SD_STYLE_FOCUS]);
	sd_frame(w, d->g);
	mvwaddch(w, 0, 1, ' ');
	int n = sd_put(w, d->g, 0, 2, title, m->w - 5);
	mvwaddch(w, 0, 2 + n, ' ');
}

/* Footer hints "key word  key word" on the last inner row. */
static void footer(struct sd_modal *m, const struct sd_draw *d, const char *const *pairs, int npairs)
{
	int x = 2, y = m->h - 2;
	for (int i = 0; i + 1 < npairs && x < m->w - 2; i += 2) {
		wattrset(m->win, d->a[SD_STYLE_KEY]);
		x += sd_put(m->win, d->g, y, x, pairs[i], m->w - 2 - x);
		wattrset(m->win, d->a[SD_STYLE_DIALOG]);
		x += 1;
		if (x < m->w - 2)
			x += sd_put(m->win, d->g, y, x, pairs[i + 1], m->w - 2 - x) + 2;
	}
}

static void draw_help(struct sd_modal *m, const struct sd_draw *d)
{
	struct help_line l[HELP_MAX];
	int split, n = help_lines(l, &split, d->g, d->theme);
	int rows = m->h - 3;
	int two = n > rows;
	int inner = m->w - 4;
	/* A left column longer than the window (a short terminal) goes on at
	 * the top of the right one: no key is left out. */
	if (two && split > rows)
		split = rows;
	int lw[2], x0[2], cw[2];
	if (two) {
		lw[0] = help_label_w(l, 0, split);
		lw[1] = help_label_w(l, split, n);
		int left = help_col_w(l, 0, split, lw[0], d->g);
		int right = help_col_w(l, split, n, lw[1], d->g);
		/* Short of room, both columns give up the same share. */
		if (left + right + 3 > inner) {
			int over = left + right + 3 - inner;
			left -= over / 2;
			right -= over - over / 2;
		}
		x0[0] = 2, cw[0] = left;
		x0[1] = 2 + left + 3, cw[1] = m->w - 2 - x0[1];
	} else {
		lw[0] = lw[1] = help_label_w(l, 0, n);
		x0[0] = x0[1] = 2;
		cw[0] = cw[1] = inner;
	}
	frame(m, d, "Help: spotdeck cockpit");
	for (int i = 0; i < n; i++) {
		int col = two && i >= split;
		int row = col ? i - split : i;
		int x = x0[col], w = cw[col];
		if (row >= rows || w <= 0)
			continue;
		int y = 1 + row;
		if (!l[i].label) {
			wattrset(m->win, d->a[SD_STYLE_TITLE]);
			sd_put(m->win, d->g, y, x, l[i].text, w);
			continue;
		}
		wattrset(m->win, d->a[SD_STYLE_KEY]);
		sd_put(m->win, d->g, y, x, l[i].label, lw[col] < w ? lw[col] - 1 : w);
		wattrset(m->win, d->a[SD_STYLE_DIALOG]);
		if (w > lw[col])
			sd_put(m->win, d->g, y, x + lw[col], l[i].text, w - lw[col]);
	}
	static const char *const keys[] = { "any key", "closes this help" };
	footer(m, d, keys, 2);
}

void sd_modal_draw(struct sd_modal *m, const struct sd_view *v, const struct sd_draw *d)
{
	if (!m->win)
		return;
	werase(m->win);
	switch (m->kind) {
	case SD_MODAL_NONE:
		break;
	case SD_MODAL_PICKER: {
		frame(m, d, m->title);
		sd_offer_table(m->win, 1, 1, m->h - 3, m->w - 2, v, &m->list, d, 1);
		const char *keys[] = { "Enter", m->verb, "Esc", "cancel", "j/k", "move" };
		footer(m, d, keys, 6);
		break;
	}
	case SD_MODAL_CONFIRM: {
		frame(m, d, m->title);
		wattrset(m->win, d->a[SD_STYLE_DIALOG]);
		/* The question, wrapped at blanks over the rows there are. */
		const char *q = m->question;
		int y = 2, width = m->w - 4;
		while (*q && y < m->h - 2) {
			int len = (int)strlen(q), cut = len;
			if (len > width) {
				cut = width;
				while (cut > 0 && q[cut] != ' ')
					cut--;
				if (cut == 0)
					cut = width;
			}
			char line[512];
			snprintf(line, sizeof line, "%.*s", cut, q);
			sd_put(m->win, d->g, y++, 2, line, width);
			q += cut;
			while (*q == ' ')
				q++;
		}
		const char *keys[] = { "y", m->yes[0] ? m->yes : "yes", "n", m->no[0] ? m->no : "no (Esc)" };
		footer(m, d, keys, 4);
		break;
	}
	case SD_MODAL_HELP:
		draw_help(m, d);
		break;
	case SD_MODAL_WHATIF:
		frame(m, d, "What if: the remaining work on another cluster (simulated)");
		sd_whatif_draw(m, v, d);
		m->whatif_version = v->whatif_version;
		break;
	}
}
