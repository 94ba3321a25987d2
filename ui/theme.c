/* ui/theme.c - theme files: parser, search path, listing, palette. */
#include "config.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ui/theme.h"

#include "src/base/errors.h"

const char *const sd_style_names[SD_STYLE_COUNT] = {
	[SD_STYLE_NORMAL] = "normal",
	[SD_STYLE_BORDER] = "border",
	[SD_STYLE_TITLE] = "title",
	[SD_STYLE_FOCUS] = "focus",
	[SD_STYLE_HEADER] = "header",
	[SD_STYLE_LABEL] = "label",
	[SD_STYLE_DIM] = "dim",
	[SD_STYLE_OK] = "ok",
	[SD_STYLE_WARN] = "warn",
	[SD_STYLE_CRIT] = "crit",
	[SD_STYLE_SPOT] = "spot",
	[SD_STYLE_ONDEMAND] = "ondemand",
	[SD_STYLE_SELECTION] = "selection",
	[SD_STYLE_CHART] = "chart",
	[SD_STYLE_CHART_ALT] = "chart-alt",
	[SD_STYLE_MARKER] = "marker",
	[SD_STYLE_EMULATED] = "emulated",
	[SD_STYLE_SIMULATED] = "simulated",
	[SD_STYLE_STATUS] = "status",
	[SD_STYLE_KEY] = "key",
	[SD_STYLE_DIALOG] = "dialog",
	[SD_STYLE_HIGHLIGHT] = "highlight",
};

/* The built-in themes, in the file syntax so that one parser serves all.
 * The colour one is the same as themes/default.theme and is what a theme
 * file's missing keys fall back to. */
static const char *const builtin_color[SD_STYLE_COUNT] = {
	[SD_STYLE_NORMAL] = "default",
	[SD_STYLE_BORDER] = "blue",
	[SD_STYLE_TITLE] = "bold cyan",
	[SD_STYLE_FOCUS] = "bold yellow",
	[SD_STYLE_HEADER] = "bold bright-white on blue",
	[SD_STYLE_LABEL] = "cyan",
	[SD_STYLE_DIM] = "bright-black",
	[SD_STYLE_OK] = "green",
	[SD_STYLE_WARN] = "yellow",
	[SD_STYLE_CRIT] = "bold red",
	[SD_STYLE_SPOT] = "cyan",
	[SD_STYLE_ONDEMAND] = "magenta",
	[SD_STYLE_SELECTION] = "black on cyan",
	[SD_STYLE_CHART] = "green",
	[SD_STYLE_CHART_ALT] = "cyan",
	[SD_STYLE_MARKER] = "bold red",
	[SD_STYLE_EMULATED] = "yellow",
	[SD_STYLE_SIMULATED] = "bold black on yellow",
	[SD_STYLE_STATUS] = "bright-white on blue",
	[SD_STYLE_KEY] = "bold yellow on blue",
	[SD_STYLE_DIALOG] = "bright-white on black",
	[SD_STYLE_HIGHLIGHT] = "bold bright-white on red",
};

static const char *const builtin_mono[SD_STYLE_COUNT] = {
	[SD_STYLE_NORMAL] = "normal",
	[SD_STYLE_BORDER] = "dim",
	[SD_STYLE_TITLE] = "bold",
	[SD_STYLE_FOCUS] = "bold underline",
	[SD_STYLE_HEADER] = "reverse",
	[SD_STYLE_LABEL] = "bold",
	[SD_STYLE_DIM] = "dim",
	[SD_STYLE_OK] = "normal",
	[SD_STYLE_WARN] = "bold",
	[SD_STYLE_CRIT] = "bold underline",
	[SD_STYLE_SPOT] = "normal",
	[SD_STYLE_ONDEMAND] = "normal",
	[SD_STYLE_SELECTION] = "reverse",
	[SD_STYLE_CHART] = "normal",
	[SD_STYLE_CHART_ALT] = "normal",
	[SD_STYLE_MARKER] = "bold",
	[SD_STYLE_EMULATED] = "underline",
	[SD_STYLE_SIMULATED] = "reverse bold",
	[SD_STYLE_STATUS] = "reverse",
	[SD_STYLE_KEY] = "reverse bold",
	[SD_STYLE_DIALOG] = "normal",
	[SD_STYLE_HIGHLIGHT] = "reverse bold",
};

static const struct { const char *name; int color; } color_names[] = {
	{ "default", SD_COLOR_DEFAULT }, { "none", SD_COLOR_DEFAULT },
	{ "black", 0 }, { "red", 1 }, { "green", 2 }, { "yellow", 3 },
	{ "blue", 4 }, { "magenta", 5 }, { "cyan", 6 }, { "white", 7 },
	{ "bright-black", 8 }, { "grey", 8 }, { "gray", 8 },
	{ "bright-red", 9 }, { "bright-green", 10 }, { "bright-yellow", 11 },
	{ "bright-blue", 12 }, { "bright-magenta", 13 }, { "bright-cyan", 14 },
	{ "bright-white", 15 },
};

static const struct { const char *name; unsigned bit; } attr_names[] = {
	{ "bold", SD_ATTR_BOLD }, { "dim", SD_ATTR_DIM },
	{ "underline", SD_ATTR_UNDERLINE }, { "reverse", SD_ATTR_REVERSE },
	{ "standout", SD_ATTR_STANDOUT }, { "italic", SD_ATTR_ITALIC },
	{ "normal", 0 },
};

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Copies N bytes of S into OUT for quoting in a one-line message: at most
 * 40 characters, anything unprintable as '?'. */
static const char *quote(char *out, size_t outn, const char *s, size_t n)
{
	size_t j = 0;
	for (size_t i = 0; i < n && j + 4 < outn; i++) {
		if (j >= 40) {
			memcpy(out + j, "...", 3);
			j += 3;
			break;
		}
		unsigned char ch = (unsigned char)s[i];
		out[j++] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : '?';
	}
	out[j] = '\0';
	return out;
}

void sd_theme_palette_rgb(int i, int *r, int *g, int *b)
{
	static const unsigned char base16[16][3] = {
		{ 0, 0, 0 }, { 205, 0, 0 }, { 0, 205, 0 }, { 205, 205, 0 },
		{ 0, 0, 238 }, { 205, 0, 205 }, { 0, 205, 205 }, { 229, 229, 229 },
		{ 127, 127, 127 }, { 255, 0, 0 }, { 0, 255, 0 }, { 255, 255, 0 },
		{ 92, 92, 255 }, { 255, 0, 255 }, { 0, 255, 255 }, { 255, 255, 255 },
	};
	static const unsigned char level[6] = { 0, 95, 135, 175, 215, 255 };
	if (i < 0 || i > 255)
		i = 0;
	if (i < 16) {
		*r = base16[i][0], *g = base16[i][1], *b = base16[i][2];
	} else if (i < 232) {
		int k = i - 16;
		*r = level[k / 36], *g = level[(k / 6) % 6], *b = level[k % 6];
	} else {
		*r = *g = *b = 8 + 10 * (i - 232);
	}
}

/* Palette entry in [lo, hi) nearest to (r, g, b) in RGB distance. */
static int nearest_rgb(int r, int g, int b, int lo, int hi)
{
	int best = lo;
	long bestd = -1;
	for (int i = lo; i < hi; i++) {
		int pr, pg, pb;
		sd_theme_palette_rgb(i, &pr, &pg, &pb);
		long d = (long)(pr - r) * (pr - r) + (long)(pg - g) * (pg - g) + (long)(pb - b) * (pb - b);
		if (bestd < 0 || d < bestd)
			bestd = d, best = i;
	}
	return best;
}

int sd_theme_nearest(int i, int ncolors)
{
	if (i < 0 || i < ncolors)
		return i;
	if (ncolors <= 0)
		return SD_COLOR_DEFAULT;
	if (ncolors > 256)
		ncolors = 256;
	int r, g, b;
	sd_theme_palette_rgb(i, &r, &g, &b);
	/* Bright colours on an 8-colour terminal become their normal ones
	 * rather than whatever grey is nearest. */
	if (i >= 8 && i < 16 && ncolors >= 8)
		return i - 8;
	return nearest_rgb(r, g, b, 0, ncolors);
}

static int hexval(int ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	ch = tolower(ch);
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	return -1;
}

/* Parses colour word W (N bytes).  Returns 0 with *out set, 1 when W is not
 * a colour word at all, -1 when it looks like one but is invalid (message
 * in err). */
static int parse_color(const char *w, size_t n, int *out, char *err, size_t errn)
{
	char q[64];
	for (size_t i = 0; i < ARRAY_LEN(color_names); i++) {
		if (strlen(color_names[i].name) == n && strncasecmp(color_names[i].name, w, n) == 0) {
			*out = color_names[i].color;
			return 0;
		}
	}
	const char *digits = w;
	size_t nd = n;
	if (n > 5 && strncasecmp(w, "color", 5) == 0)
		digits = w + 5, nd = n - 5;
	else if (n > 6 && strncasecmp(w, "colour", 6) == 0)
		digits = w + 6, nd = n - 6;
	if (nd > 0 && isdigit((unsigned char)digits[0])) {
		long val = 0;
		for (size_t i = 0; i < nd; i++) {
			if (!isdigit((unsigned char)digits[i])) {
				snprintf(err, errn, "bad colour '%s'", quote(q, sizeof q, w, n));
				return -1;
			}
			if (val < 100000)
				val = val * 10 + (digits[i] - '0');
		}
		if (val > 255) {
			snprintf(err, errn, "colour '%s' out of range 0-255", quote(q, sizeof q, w, n));
			return -1;
		}
		*out = (int)val;
		return 0;
	}
	if (n >= 1 && w[0] == '#') {
		int v[6];
		if (n != 7) {
			snprintf(err, errn, "bad colour '%s' (expected #rrggbb)", quote(q, sizeof q, w, n));
			return -1;
		}
		for (int i = 0; i < 6; i++) {
			v[i] = hexval((unsigned char)w[1 + i]);
			if (v[i] < 0) {
				snprintf(err, errn, "bad colour '%s' (expected #rrggbb)", quote(q, sizeof q, w, n));
				return -1;
			}
		}
		*out = nearest_rgb(v[0] * 16 + v[1], v[2] * 16 + v[3], v[4] * 16 + v[5], 16, 256);
		return 0;
	}
	return 1;
}

/* Parses value V (N bytes) into *st; returns 0 or -1 with a message. */
static int parse_value(struct sd_theme_style *st, const char *v, size_t n, char *err, size_t errn)
{
	char q[64], q2[64];
	int have_fg = 0, have_bg = 0, want_bg = 0;
	const char *fg_word = NULL;
	size_t fg_len = 0;
	struct sd_theme_style s = { SD_COLOR_DEFAULT, SD_COLOR_DEFAULT, 0, 0 };
	size_t i = 0, nwords = 0;
	while (i < n) {
		while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
			i++;
		if (i >= n)
			break;
		size_t start = i;
		while (i < n && v[i] != ' ' && v[i] != '\t' && v[i] != ',')
			i++;
		const char *w = v + start;
		size_t wl = i - start;
		nwords++;
		if (wl == 2 && strncasecmp(w, "on", 2) == 0) {
			if (want_bg || have_bg) {
				snprintf(err, errn, "'on' given twice");
				return -1;
			}
			want_bg = 1;
			continue;
		}
		int c;
		int rc = parse_color(w, wl, &c, err, errn);
		if (rc < 0)
			return -1;
		if (rc == 0) {
			if (want_bg) {
				s.bg = (int16_t)c;
				have_bg = 1;
				want_bg = 0;
			} else if (have_fg) {
				snprintf(err, errn, "two foreground colours ('%s' and '%s'); use 'on' before a background",
				         quote(q, sizeof q, fg_word, fg_len), quote(q2, sizeof q2, w, wl));
				return -1;
			} else {
				s.fg = (int16_t)c;
				have_fg = 1;
				fg_word = w, fg_len = wl;
			}
			continue;
		}
		if (want_bg) {
			snprintf(err, errn, "'on' must be followed by a colour, not '%s'", quote(q, sizeof q, w, wl));
			return -1;
		}
		size_t k;
		for (k = 0; k < ARRAY_LEN(attr_names); k++) {
			if (strlen(attr_names[k].name) == wl && strncasecmp(attr_names[k].name, w, wl) == 0)
				break;
		}
		if (k == ARRAY_LEN(attr_names)) {
			snprintf(err, errn, "bad colour or attribute '%s'", quote(q, sizeof q, w, wl));
			return -1;
		}
		s.attrs |= (uint16_t)attr_names[k].bit;
	}
	if (nwords == 0) {
		snprintf(err, errn, "empty value");
		return -1;
	}
	if (want_bg) {
		snprintf(err, errn, "'on' must be followed by a background colour");
		return -1;
	}
	*st = s;
	return 0;
}

/* Index of style key K (N bytes), or -1. */
static int style_index(const char *k, size_t n)
{
	if (n == 9 && memcmp(k, "on-demand", 9) == 0)
		return SD_STYLE_ONDEMAND;
	for (int i = 0; i < SD_STYLE_COUNT; i++) {
		if (strlen(sd_style_names[i]) == n && memcmp(sd_style_names[i], k, n) == 0)
			return i;
	}
	return -1;
}

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && strcmp(s + n - m, suffix) == 0;
}

void sd_theme_builtin(struct sd_theme *t, int mono)
{
	memset(t, 0, sizeof *t);
	snprintf(t->name, sizeof t->name, "%s", mono ? "mono" : "default");
	for (int i = 0; i < SD_STYLE_COUNT; i++) {
		const char *spec = mono ? builtin_mono[i] : builtin_color[i];
		char err[160];
		int rc = parse_value(&t->st[i], spec, strlen(spec), err, sizeof err);
		/* The built-in specs are constants checked by tests/ui/test-ui-theme. */
		if (rc != 0)
			t->st[i] = (struct sd_theme_style){ SD_COLOR_DEFAULT, SD_COLOR_DEFAULT, 0, 0 };
		t->st[i].line = 0;
	}
}

int sd_theme_parse(struct sd_theme *t, const char *text, size_t len, const char *file, char **why)
{
	char err[200], q[64];
	if (!file)
		file = "theme";
	sd_theme_builtin(t, 0);
	snprintf(t->file, sizeof t->file, "%s", file);
	/* Its name is the file name without directory and ".theme". */
	const char *base = strrchr(file, '/');
	base = base ? base + 1 : file;
	size_t bl = strlen(base);
	if (ends_with(base, ".theme"))
		bl -= 6;
	if (bl >= sizeof t->name)
		bl = sizeof t->name - 1;
	memcpy(t->name, base, bl);
	t->name[bl] = '\0';
	if (len > SD_THEME_MAX_BYTES) {
		sd_why(why, "%s: larger than %d KiB", file, SD_THEME_MAX_BYTES / 1024);
		return -1;
	}
	size_t pos = 0;
	unsigned lineno = 0;
	/* A UTF-8 byte-order mark is not part of the first key. */
	if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0)
		pos = 3;
	while (pos < len) {
		lineno++;
		const char *line = text + pos;
		const char *nl = memchr(line, '\n', len - pos);
		size_t n = nl ? (size_t)(nl - line) : len - pos;
		pos += n + (nl ? 1 : 0);
		if (n > 0 && line[n - 1] == '\r')
			n--;
		if (n > SD_THEME_MAX_LINE) {
			sd_why(why, "%s:%u: line longer than %d bytes", file, lineno, SD_THEME_MAX_LINE);
			return -1;
		}
		size_t i = 0;
		while (i < n && (line[i] == ' ' || line[i] == '\t'))
			i++;
		if (i == n || line[i] == '#')
			continue;
		/* The key: up to '=' or a blank. */
		size_t ks = i;
		while (i < n && line[i] != '=' && line[i] != ' ' && line[i] != '\t')
			i++;
		size_t kl = i - ks;
		const char *key = line + ks;
		while (i < n && (line[i] == ' ' || line[i] == '\t'))
			i++;
		if (kl == 0) {
			sd_why(why, "%s:%u: missing key before '='", file, lineno);
			return -1;
		}
		if (i >= n || line[i] != '=') {
			sd_why(why, "%s:%u: key '%s': missing '=' (expected 'key = value')",
			        file, lineno, quote(q, sizeof q, key, kl));
			return -1;
		}
		i++;
		/* Control characters never reach the terminal through a message or
		 * a style, so refuse them wherever they are. */
		for (size_t j = 0; j < n; j++) {
			unsigned char ch = (unsigned char)line[j];
			if ((ch < 0x20 && ch != '\t') || ch == 0x7f) {
				sd_why(why, "%s:%u: key '%s': control character 0x%02x",
				        file, lineno, quote(q, sizeof q, key, kl), ch);
				return -1;
			}
		}
		/* Trailing comment: '#' at the start of a word and followed by a
		 * blank or the end of the line ('#rrggbb' is a colour). */
		size_t vend = n;
		for (size_t j = i; j < n; j++) {
			if (line[j] == '#' && (j == i || line[j - 1] == ' ' || line[j - 1] == '\t') &&
			    (j + 1 == n || line[j + 1] == ' ' || line[j + 1] == '\t')) {
				vend = j;
				break;
			}
		}
		int idx = style_index(key, kl);
		if (idx < 0) {
			sd_why(why, "%s:%u: unknown key '%s' (keys: normal, border, title, focus, header, label, "
			        "dim, ok, warn, crit, spot, ondemand, selection, chart, chart-alt, marker, "
			        "emulated, simulated, status, key, dialog, highlight)",
			        file, lineno, quote(q, sizeof q, key, kl));
			return -1;
		}
		if (t->st[idx].line != 0) {
			sd_why(why, "%s:%u: key '%s': duplicate (first set on line %u)",
			        file, lineno, sd_style_names[idx], t->st[idx].line);
			return -1;
		}
		struct sd_theme_style st;
		if (parse_value(&st, line + i, vend - i, err, sizeof err) != 0) {
			sd_why(why, "%s:%u: key '%s': %s", file, lineno, sd_style_names[idx], err);
			return -1;
		}
		st.line = (uint16_t)(lineno > 65535 ? 65535 : lineno);
		t->st[idx] = st;
	}
	return 0;
}

/* Reads PATH whole (at most the theme size limit + 1 byte); caller frees. */
static char *read_file(const char *path, size_t *len, char **why)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		sd_why(why, "%s: %s", path, strerror(errno));
		return NULL;
	}
	char *buf = malloc(SD_THEME_MAX_BYTES + 2);
	if (!buf) {
		fclose(f);
		sd_why(why, "%s: out of memory", path);
		return NULL;
	}
	size_t n = fread(buf, 1, SD_THEME_MAX_BYTES + 1, f);
	int err = ferror(f);
	fclose(f);
	if (err) {
		sd_why(why, "%s: read error", path);
		free(buf);
		return NULL;
	}
	buf[n] = '\0';
	*len = n;
	return buf;
}

int sd_theme_load(struct sd_theme *t, const char *name, const char *const *dirs, int ndirs, char **why)
{
	char path[1024];
	if (!name || !*name) {
		sd_why(why, "theme name is empty");
		return -1;
	}
	if (strchr(name, '/') || ends_with(name, ".theme")) {
		snprintf(path, sizeof path, "%s", name);
	} else {
		int found = 0;
		for (int i = 0; i < ndirs && !found; i++) {
			if (!dirs[i] || !*dirs[i])
				continue;
			snprintf(path, sizeof path, "%s/%s.theme", dirs[i], name);
			FILE *f = fopen(path, "rb");
			if (f) {
				fclose(f);
				found = 1;
			}
		}
		if (!found) {
			if (strcmp(name, "default") == 0 || strcmp(name, "mono") == 0) {
				sd_theme_builtin(t, name[0] == 'm');
				return 0;
			}
			char looked[600] = "";
			size_t off = 0;
			for (int i = 0; i < ndirs; i++) {
				if (!dirs[i] || !*dirs[i])
					continue;
				int w = snprintf(looked + off, sizeof looked - off, "%s%s", off ? ", " : "", dirs[i]);
				if (w < 0 || (size_t)w >= sizeof looked - off)
					break;
				off += (size_t)w;
			}
			sd_why(why, "theme '%s': not found (looked in %s)", name, off ? looked : "no directories");
			return -1;
		}
	}
	size_t len = 0;
	char *text = read_file(path, &len, why);
	if (!text)
		return -1;
	int rc = sd_theme_parse(t, text, len, path, why);
	free(text);
	if (rc != 0)
		return -1;
	return 0;
}

static int cmp_names(const void *a, const void *b)
{
	const char *x = a, *y = b;
	if (strcmp(x, "default") == 0)
		return strcmp(y, "default") == 0 ? 0 : -1;
	if (strcmp(y, "default") == 0)
		return 1;
	return strcmp(x, y);
}

int sd_theme_list(const char *const *dirs, int ndirs, char (*names)[64], int max)
{
	int n = 0;
	if (max <= 0)
		return 0;
	for (int i = 0; i < ndirs; i++) {
		if (!dirs[i] || !*dirs[i])
			continue;
		DIR *d = opendir(dirs[i]);
		if (!d)
			continue;
		struct dirent *e;
		while ((e = readdir(d)) != NULL && n < max) {
			size_t l = strlen(e->d_name);
			if (l <= 6 || l - 6 >= 64 || !ends_with(e->d_name, ".theme") || e->d_name[0] == '.')
				continue;
			char stem[64];
			memcpy(stem, e->d_name, l - 6);
			stem[l - 6] = '\0';
			int dup = 0;
			for (int k = 0; k < n && !dup; k++)
				dup = strcmp(names[k], stem) == 0;
			if (!dup)
				memcpy(names[n++], stem, sizeof stem);
		}
		closedir(d);
	}
	int have_default = 0;
	for (int k = 0; k < n; k++)
		have_default |= strcmp(names[k], "default") == 0;
	if (!have_default) {
		if (n == max)
			n--;
		snprintf(names[n++], 64, "default");
	}
	qsort(names, (size_t)n, sizeof names[0], cmp_names);
	return n;
}
