/* ui/tui.c - glyph sets, safe text output and table columns. */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "ui/tui.h"

static const wchar_t utf8_glyphs[SD_G_COUNT] = {
	0x2581, 0x2582, 0x2583, 0x2584, 0x2585, 0x2586, 0x2587, 0x2588,
	0x25b2, 0x00b7, 0x2026, 0x25b6,
};
static const char *const utf8_strs[SD_G_COUNT] = {
	"\u2581", "\u2582", "\u2583", "\u2584", "\u2585", "\u2586", "\u2587", "\u2588",
	"\u25b2", "\u00b7", "\u2026", "\u25b6",
};
/* Rising ink for the eight bar levels, then marker, separator, ellipsis,
 * selection. */
static const char ascii_glyphs[SD_G_COUNT + 1] = "_.,-:=+#^.>>";
static const char *const ascii_strs[SD_G_COUNT] = {
	"_", ".", ",", "-", ":", "=", "+", "#", "^", ".", ">", ">",
};
static const wchar_t utf8_box[8] = { 0x2502, 0x2502, 0x2500, 0x2500, 0x250c, 0x2510, 0x2514, 0x2518 };

void sd_glyphs_init(struct sd_glyphs *g, int utf8)
{
	memset(g, 0, sizeof *g);
	g->utf8 = utf8;
	for (int i = 0; i < SD_G_COUNT; i++) {
		g->ascii[i] = ascii_glyphs[i];
		g->str[i] = utf8 ? utf8_strs[i] : ascii_strs[i];
		if (utf8) {
			wchar_t wc[2] = { utf8_glyphs[i], 0 };
			setcchar(&g->cc[i], wc, A_NORMAL, 0, NULL);
		}
	}
	if (utf8) {
		for (int i = 0; i < 8; i++) {
			wchar_t wc[2] = { utf8_box[i], 0 };
			setcchar(&g->box[i], wc, A_NORMAL, 0, NULL);
		}
	}
}

void sd_glyph_put(WINDOW *w, const struct sd_glyphs *g, enum sd_glyph id)
{
	if (g->utf8)
		wadd_wch(w, &g->cc[id]);
	else
		waddch(w, (chtype)(unsigned char)g->ascii[id]);
}

void sd_frame(WINDOW *w, const struct sd_glyphs *g)
{
	/* wborder renders with the window background only, not its current
	 * attributes, so the attributes go into each character. */
	attr_t a;
	short pair;
	wattr_get(w, &a, &pair, NULL);
	a &= ~A_COLOR;
	if (g->utf8) {
		cchar_t c[8];
		for (int i = 0; i < 8; i++) {
			wchar_t wc[2] = { utf8_box[i], 0 };
			setcchar(&c[i], wc, a, pair, NULL);
		}
		wborder_set(w, &c[0], &c[1], &c[2], &c[3], &c[4], &c[5], &c[6], &c[7]);
	} else {
		chtype at = a | (chtype)COLOR_PAIR(pair);
		wborder(w, '|' | at, '|' | at, '-' | at, '-' | at, '+' | at, '+' | at, '+' | at, '+' | at);
	}
}

static const char spaces[] = "                                                                "
                             "                                                                ";

void sd_blank(WINDOW *w, int y, int x, int n)
{
	if (wmove(w, y, x) == ERR)
		return;
	while (n > 0) {
		int k = n < (int)sizeof spaces - 1 ? n : (int)sizeof spaces - 1;
		waddnstr(w, spaces, k);
		n -= k;
	}
}

#define PUT_MAX 512

/* Decodes S into printable wide characters of at most MAXW columns (one
 * less plus an ellipsis when it does not fit).  Returns the count; *cols
 * gets their width, *cut whether the text was cut. */
static int decode(const struct sd_glyphs *g, const char *s, int maxw, wchar_t *out, int *cols, int *cut)
{
	int n = 0, w = 0;
	int widths[PUT_MAX];
	mbstate_t st;
	memset(&st, 0, sizeof st);
	*cut = 0;
	size_t len = strlen(s);
	size_t i = 0;
	while (i < len && n < PUT_MAX - 1) {
		wchar_t wc;
		int cw;
		unsigned char ch = (unsigned char)s[i];
		if (ch < 0x80 || !g->utf8) {
			wc = (ch >= 0x20 && ch < 0x7f) ? (wchar_t)ch : L'?';
			cw = 1;
			i++;
		} else {
			size_t k = mbrtowc(&wc, s + i, len - i, &st);
			if (k == (size_t)-1 || k == (size_t)-2 || k == 0) {
				memset(&st, 0, sizeof st);
				wc = L'?';
				k = 1;
			}
			i += k;
			cw = wcwidth(wc);
			if (cw == 0)
				continue;       /* combining marks: dropped, not guessed at */
			if (cw < 0 || cw > 2)
				wc = L'?', cw = 1;
		}
		if (w + cw > maxw) {
			*cut = 1;
			break;
		}
		widths[n] = cw;
		out[n++] = wc;
		w += cw;
	}
	if (i < len && !*cut)
		*cut = 1;
	if (*cut) {
		/* Room for the ellipsis. */
		while (n > 0 && w + 1 > maxw) {
			w -= widths[--n];
		}
	}
	*cols = w;
	out[n] = 0;
	return n;
}

int sd_put(WINDOW *w, const struct sd_glyphs *g, int y, int x, const char *s, int maxw)
{
	if (!s || maxw <= 0)
		return 0;
	/* Fast path: printable ASCII that fits, the common case. */
	int i;
	for (i = 0; i <= maxw; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (ch == 0 || ch < 0x20 || ch >= 0x7f)
			break;
	}
	if (s[i] == '\0' && i <= maxw) {
		if (i > 0)
			mvwaddnstr(w, y, x, s, i);
		return i;
	}
	wchar_t buf[PUT_MAX];
	int cols = 0, cut = 0;
	int n = decode(g, s, maxw < PUT_MAX - 1 ? maxw : PUT_MAX - 1, buf, &cols, &cut);
	if (wmove(w, y, x) == ERR)
		return 0;
	if (n > 0)
		waddnwstr(w, buf, n);
	if (cut && cols + 1 <= maxw) {
		sd_glyph_put(w, g, SD_G_ELLIPSIS);
		cols++;
	}
	return cols;
}

int sd_width(const struct sd_glyphs *g, const char *s)
{
	if (!s)
		return 0;
	size_t i;
	for (i = 0; s[i]; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (ch >= 0x80)
			break;
	}
	if (!s[i])
		return (int)i;
	wchar_t buf[PUT_MAX];
	int cols = 0, cut = 0;
	decode(g, s, PUT_MAX - 1, buf, &cols, &cut);
	return cols;
}

int sd_put_right(WINDOW *win, const struct sd_glyphs *g, int y, int x, const char *s, int w)
{
	int sw = sd_width(g, s);
	if (sw >= w)
		return sd_put(win, g, y, x, s, w);
	return sd_put(win, g, y, x + w - sw, s, sw);
}

int sd_cols_fit(const struct sd_col *c, int n, int width, int *xs, int *ws)
{
	int total = 0, nactive = 0;
	for (int i = 0; i < n; i++) {
		ws[i] = c[i].width;
		total += c[i].width;
		nactive++;
	}
	total += nactive > 0 ? nactive - 1 : 0;
	while (total > width) {
		int drop = -1;
		for (int i = 0; i < n; i++) {
			if (ws[i] > 0 && c[i].prio > 0 && (drop < 0 || c[i].prio >= c[drop].prio))
				drop = i;
		}
		if (drop < 0)
			break;
		total -= ws[drop] + (nactive > 1 ? 1 : 0);
		ws[drop] = 0;
		nactive--;
	}
	/* Yielding columns make way for a flex column short of its want. */
	for (;;) {
		int short_by = 0;
		for (int i = 0; i < n; i++) {
			if (ws[i] > 0 && c[i].flex && c[i].want > c[i].width)
				short_by += c[i].want - c[i].width;
		}
		if (short_by <= width - total)
			break;
		int drop = -1;
		for (int i = 0; i < n; i++) {
			if (ws[i] > 0 && c[i].yields && (drop < 0 || c[i].prio >= c[drop].prio))
				drop = i;
		}
		if (drop < 0)
			break;
		total -= ws[drop] + (nactive > 1 ? 1 : 0);
		ws[drop] = 0;
		nactive--;
	}
	int nflex = 0;
	for (int i = 0; i < n; i++)
		nflex += ws[i] > 0 && c[i].flex;
	if (total < width && nflex > 0) {
		int spare = width - total, k = 0;
		for (int i = 0; i < n; i++) {
			if (ws[i] > 0 && c[i].flex) {
				int share = spare / nflex + (k < spare % nflex ? 1 : 0);
				ws[i] += share;
				k++;
			}
		}
		total = width;
	} else if (total > width) {
		/* Still too wide with only the columns that never drop: shrink
		 * the flexible ones, and clip what is left at the edge. */
		for (int i = 0; i < n && total > width; i++) {
			if (ws[i] > 0 && c[i].flex) {
				int can = ws[i] - 3;
				int take = total - width < can ? total - width : can;
				if (take > 0) {
					ws[i] -= take;
					total -= take;
				}
			}
		}
	}
	int x = 0;
	for (int i = 0; i < n; i++) {
		xs[i] = x;
		if (ws[i] > 0) {
			if (x + ws[i] > width)
				ws[i] = width - x > 0 ? width - x : 0;
			x += ws[i] + 1;
		}
	}
	return total < width ? total : width;
}

void sd_cols_cell(WINDOW *w, const struct sd_glyphs *g, int y, int x,
                  const struct sd_col *c, int i, const int *xs, const int *ws, const char *s)
{
	if (ws[i] <= 0)
		return;
	if (c[i].right)
		sd_put_right(w, g, y, x + xs[i], s, ws[i]);
	else
		sd_put(w, g, y, x + xs[i], s, ws[i]);
}

void sd_cols_title(WINDOW *w, const struct sd_glyphs *g, int y, int x,
                   const struct sd_col *c, int n, const int *xs, const int *ws)
{
	for (int i = 0; i < n; i++)
		sd_cols_cell(w, g, y, x, c, i, xs, ws, c[i].title);
}

uint64_t sd_hash(uint64_t h, const void *p, size_t n)
{
	/* FNV-1a over 8-byte words (then the tail bytes): fast enough to
	 * hash 64 servers' histories on every frame. */
	const unsigned char *b = p;
	while (n >= 8) {
		uint64_t w;
		memcpy(&w, b, 8);
		h = (h ^ w) * 0x100000001b3ull;
		h ^= h >> 29;
		b += 8;
		n -= 8;
	}
	while (n--) {
		h = (h ^ *b++) * 0x100000001b3ull;
	}
	return h;
}
