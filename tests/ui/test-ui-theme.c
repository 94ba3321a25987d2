/* tests/ui/test-ui-theme.c - the theme parser (good files, and malformed ones
 * whose message must name file, line and key), theme lookup and listing,
 * palette degradation; and the cockpit's pure helpers: number formats and
 * table column fitting.  No terminal needed. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ui/format.h"
#include "ui/theme.h"
#include "ui/tui.h"

#include "tests/check.h"

static const char *srcdir(void)
{
	const char *s = getenv("top_srcdir");
	return s && *s ? s : ".";
}

static int parse(struct sd_theme *t, const char *text, char **why)
{
	*why = NULL;
	return sd_theme_parse(t, text, strlen(text), "t.theme", why);
}

/* ---- good themes ---- */

static void test_good(void)
{
	struct sd_theme t;
	char *why;
	int rc = parse(&t, "selection = black on cyan, bold\n"
	                   "ok=#ff0000\n"
	                   "  warn\t=\tcolor208   # orange\n"
	                   "crit = 160 on default underline reverse\n"
	                   "\n# a comment\n"
	                   "on-demand = bright-magenta\r\n"
	                   "header = ON blue BOLD\n", &why);
	CHECK(rc == 0, "%s", why ? why : "");
	free(why);
	CHECK(t.st[SD_STYLE_SELECTION].fg == 0 && t.st[SD_STYLE_SELECTION].bg == 6, "selection %d/%d",
	      t.st[SD_STYLE_SELECTION].fg, t.st[SD_STYLE_SELECTION].bg);
	CHECK(t.st[SD_STYLE_SELECTION].attrs == SD_ATTR_BOLD, "attrs %u", t.st[SD_STYLE_SELECTION].attrs);
	CHECK(t.st[SD_STYLE_SELECTION].line == 1, "line %u", t.st[SD_STYLE_SELECTION].line);
	CHECK(t.st[SD_STYLE_OK].fg == 196, "#ff0000 -> %d", t.st[SD_STYLE_OK].fg);
	CHECK(t.st[SD_STYLE_WARN].fg == 208, "color208 -> %d", t.st[SD_STYLE_WARN].fg);
	CHECK(t.st[SD_STYLE_CRIT].fg == 160 && t.st[SD_STYLE_CRIT].bg == SD_COLOR_DEFAULT, "crit");
	CHECK(t.st[SD_STYLE_CRIT].attrs == (SD_ATTR_UNDERLINE | SD_ATTR_REVERSE), "crit attrs");
	CHECK(t.st[SD_STYLE_ONDEMAND].fg == 13 && t.st[SD_STYLE_ONDEMAND].line == 7, "on-demand alias");
	CHECK(t.st[SD_STYLE_HEADER].fg == SD_COLOR_DEFAULT && t.st[SD_STYLE_HEADER].bg == 4 &&
	      t.st[SD_STYLE_HEADER].attrs == SD_ATTR_BOLD, "header: background only");
	/* Keys left out keep the built-in default. */
	struct sd_theme b;
	sd_theme_builtin(&b, 0);
	CHECK(memcmp(&t.st[SD_STYLE_CHART], &b.st[SD_STYLE_CHART], sizeof b.st[0]) == 0, "chart kept its default");
	CHECK(strcmp(t.name, "t") == 0, "name '%s'", t.name);

	/* A byte-order mark, no final newline, an empty file. */
	rc = parse(&t, "\xef\xbb\xbfok = green", &why);
	CHECK(rc == 0 && t.st[SD_STYLE_OK].fg == 2, "BOM: %s", why ? why : "");
	free(why);
	rc = parse(&t, "", &why);
	CHECK(rc == 0, "empty file: %s", why ? why : "");
	free(why);

	/* The mono built-in has no colour at all. */
	sd_theme_builtin(&b, 1);
	for (int i = 0; i < SD_STYLE_COUNT; i++)
		CHECK(b.st[i].fg == SD_COLOR_DEFAULT && b.st[i].bg == SD_COLOR_DEFAULT, "mono %s has colour",
		      sd_style_names[i]);
	CHECK(b.st[SD_STYLE_SELECTION].attrs & SD_ATTR_REVERSE, "mono selection is reverse");
}

/* ---- malformed themes ---- */

static void test_bad(void)
{
	char big[SD_THEME_MAX_BYTES + 64];
	memset(big, '#', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	char longline[SD_THEME_MAX_LINE + 40];
	snprintf(longline, sizeof longline, "ok = %*s", SD_THEME_MAX_LINE, "red");
	const struct { const char *text, *want; } cases[] = {
		{ "okk = red\n", "t.theme:1: unknown key 'okk'" },
		{ "ok = gren\n", "t.theme:1: key 'ok': bad colour or attribute 'gren'" },
		{ "# c\n\nok red\n", "t.theme:3: key 'ok': missing '='" },
		{ "ok = red\nwarn = yellow\nok = green\n", "t.theme:3: key 'ok': duplicate (first set on line 1)" },
		{ "ok = color300\n", "t.theme:1: key 'ok': colour 'color300' out of range 0-255" },
		{ "ok = 256\n", "t.theme:1: key 'ok': colour '256' out of range 0-255" },
		{ "ok =   # nothing\n", "t.theme:1: key 'ok': empty value" },
		{ "ok = red green\n", "t.theme:1: key 'ok': two foreground colours ('red' and 'green')" },
		{ "ok = red on\n", "t.theme:1: key 'ok': 'on' must be followed by a background colour" },
		{ "ok = red on bold\n", "t.theme:1: key 'ok': 'on' must be followed by a colour, not 'bold'" },
		{ "ok = on red on blue\n", "t.theme:1: key 'ok': 'on' given twice" },
		{ "ok = #12345\n", "t.theme:1: key 'ok': bad colour '#12345' (expected #rrggbb)" },
		{ "ok = #12345g\n", "t.theme:1: key 'ok': bad colour '#12345g' (expected #rrggbb)" },
		{ "ok = color1x\n", "t.theme:1: key 'ok': bad colour 'color1x'" },
		{ "= red\n", "t.theme:1: missing key before '='" },
		{ "ok = red\x01\n", "t.theme:1: key 'ok': control character 0x01" },
		{ "warn = yellow\nOK = red\n", "t.theme:2: unknown key 'OK'" },
		{ "ondemand = red\non-demand = blue\n", "t.theme:2: key 'ondemand': duplicate (first set on line 1)" },
		{ "ok\x7f = red\n", "t.theme:1: key 'ok?': control character 0x7f" },
		{ longline, "t.theme:1: line longer than 512 bytes" },
		{ big, "t.theme: larger than 64 KiB" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct sd_theme t;
		char *why = NULL;
		int rc = parse(&t, cases[i].text, &why);
		CHECK(rc == -1, "case %zu accepted", i);
		CHECK(why && strncmp(why, cases[i].want, strlen(cases[i].want)) == 0,
		      "case %zu: got \"%s\", want \"%s...\"", i, why ? why : "(null)", cases[i].want);
		CHECK(why && !strchr(why, '\n'), "case %zu: message has a newline", i);
		if (why)
			printf("ok: %s\n", why);
		free(why);
	}
}

/* ---- files, lookup, listing ---- */

static void test_files(void)
{
	char dir[1024], path[1100];
	snprintf(dir, sizeof dir, "%s/themes", srcdir());
	const char *dirs[] = { "/nonexistent/themes", dir };
	static const char *const names[] = { "default", "light", "high-contrast", "mono" };
	struct sd_theme t, b;
	char *why = NULL;
	for (int i = 0; i < 4; i++) {
		int rc = sd_theme_load(&t, names[i], dirs, 2, &why);
		CHECK(rc == 0, "%s: %s", names[i], why ? why : "");
		free(why);
		why = NULL;
		CHECK(strcmp(t.name, names[i]) == 0, "name %s", t.name);
		/* Every shipped theme sets every key (no silent fallbacks). */
		for (int k = 0; k < SD_STYLE_COUNT && rc == 0; k++)
			CHECK(t.st[k].line > 0, "%s does not set '%s'", names[i], sd_style_names[k]);
	}
	/* The file and the built-in default are the same theme. */
	CHECK(sd_theme_load(&t, "default", dirs, 2, &why) == 0, "default");
	sd_theme_builtin(&b, 0);
	for (int k = 0; k < SD_STYLE_COUNT; k++)
		CHECK(t.st[k].fg == b.st[k].fg && t.st[k].bg == b.st[k].bg && t.st[k].attrs == b.st[k].attrs,
		      "default.theme and the built-in differ at '%s'", sd_style_names[k]);
	sd_theme_builtin(&b, 1);
	CHECK(sd_theme_load(&t, "mono", dirs, 2, &why) == 0, "mono");
	for (int k = 0; k < SD_STYLE_COUNT; k++)
		CHECK(t.st[k].attrs == b.st[k].attrs && t.st[k].fg < 0 && t.st[k].bg < 0,
		      "mono.theme and the built-in mono differ at '%s'", sd_style_names[k]);

	/* By path. */
	snprintf(path, sizeof path, "%s/light.theme", dir);
	CHECK(sd_theme_load(&t, path, NULL, 0, &why) == 0 && strcmp(t.name, "light") == 0, "by path");

	/* Not found: the message names the theme and where it looked. */
	CHECK(sd_theme_load(&t, "nope", dirs, 2, &why) == -1, "nope found");
	CHECK(why && strstr(why, "theme 'nope': not found (looked in /nonexistent/themes, ") == why, "%s", why);
	free(why);
	why = NULL;
	CHECK(sd_theme_load(&t, "/nonexistent/x.theme", NULL, 0, &why) == -1, "missing path");
	CHECK(why && strstr(why, "/nonexistent/x.theme: No such file") == why, "%s", why);
	free(why);
	why = NULL;
	/* The built-ins when no directory has them. */
	CHECK(sd_theme_load(&t, "default", NULL, 0, &why) == 0 && strcmp(t.name, "default") == 0, "builtin default");
	CHECK(sd_theme_load(&t, "mono", NULL, 0, &why) == 0 && strcmp(t.name, "mono") == 0, "builtin mono");

	char list[16][64];
	int n = sd_theme_list(dirs, 2, list, 16);
	CHECK(n == 4, "%d themes", n);
	CHECK(n == 4 && strcmp(list[0], "default") == 0 && strcmp(list[1], "high-contrast") == 0 &&
	      strcmp(list[2], "light") == 0 && strcmp(list[3], "mono") == 0, "order");
	n = sd_theme_list(NULL, 0, list, 16);
	CHECK(n == 1 && strcmp(list[0], "default") == 0, "empty list has default");
}

static void test_palette(void)
{
	CHECK(sd_theme_nearest(196, 256) == 196, "in range");
	CHECK(sd_theme_nearest(196, 8) == 1, "196 on 8 colours -> %d", sd_theme_nearest(196, 8));
	CHECK(sd_theme_nearest(9, 8) == 1, "bright red on 8 colours");
	CHECK(sd_theme_nearest(15, 8) == 7, "bright white on 8 colours");
	CHECK(sd_theme_nearest(21, 16) == 12 || sd_theme_nearest(21, 16) == 4, "blue -> %d", sd_theme_nearest(21, 16));
	CHECK(sd_theme_nearest(232, 8) == 0, "near-black grey -> %d", sd_theme_nearest(232, 8));
	CHECK(sd_theme_nearest(SD_COLOR_DEFAULT, 8) == SD_COLOR_DEFAULT, "default stays");
}

/* ---- formats ---- */

static void test_formats(void)
{
	char b[32];
	static const struct { double v; const char *want; } dur[] = {
		{ 0, "0s" }, { 59.4, "59s" }, { 61, "1m01s" }, { 3720, "1h02m" }, { 90000, "1d01h" },
		{ -1, "-" }, { NAN, "-" }, { INFINITY, "-" }, { 1e12, "-" },
	};
	for (size_t i = 0; i < sizeof dur / sizeof dur[0]; i++)
		CHECK(strcmp(sd_fmt_duration(b, sizeof b, dur[i].v), dur[i].want) == 0, "duration %g: %s", dur[i].v, b);
	CHECK(strcmp(sd_fmt_clock(b, sizeof b, 754), "12:34") == 0, "%s", b);
	CHECK(strcmp(sd_fmt_clock(b, sizeof b, 3723), "1:02:03") == 0, "%s", b);
	CHECK(strcmp(sd_fmt_clock(b, sizeof b, NAN), "-") == 0, "%s", b);
	CHECK(strcmp(sd_fmt_rate(b, sizeof b, 812.4), "812") == 0, "%s", b);
	CHECK(strcmp(sd_fmt_rate(b, sizeof b, 12345), "12.3k") == 0, "%s", b);
	CHECK(strcmp(sd_fmt_rate(b, sizeof b, 120345), "120k") == 0, "%s", b);
	CHECK(strcmp(sd_fmt_rate(b, sizeof b, 99960), "100k") == 0, "%s", b);
	CHECK(strcmp(sd_fmt_rate(b, sizeof b, 999600), "1.00M") == 0, "%s", b);
	CHECK(strcmp(sd_fmt_rate(b, sizeof b, 1.5e6), "1.50M") == 0, "%s", b);
	CHECK(strcmp(sd_fmt_rate(b, sizeof b, -3), "-") == 0, "%s", b);
	CHECK(strcmp(sd_fmt_usd(b, sizeof b, 0.744), "$0.74") == 0, "%s", b);
	CHECK(strcmp(sd_fmt_usd(b, sizeof b, 1234), "$1234") == 0, "%s", b);
	CHECK(strcmp(sd_fmt_usd(b, sizeof b, 12345), "$12.3k") == 0, "%s", b);
	CHECK(strcmp(sd_fmt_usd(b, sizeof b, 1e300), ">$10M") == 0, "%s", b);
	CHECK(strcmp(sd_fmt_pct(b, sizeof b, 0.123, 1), "12.3%") == 0, "%s", b);
	CHECK(strcmp(sd_fmt_pct(b, sizeof b, 0.05, 1), "5%") == 0, "%s", b);
	CHECK(strcmp(sd_fmt_pct(b, sizeof b, 0.005, 1), "0.5%") == 0, "%s", b);
	CHECK(strcmp(sd_fmt_pct(b, sizeof b, 7, 1), "-") == 0, "%s", b);
	CHECK(strcmp(sd_fmt_num(b, sizeof b, 0.41234, 3), "0.412") == 0, "%s", b);
	CHECK(strcmp(sd_fmt_num(b, sizeof b, 1e300, 3), "-") == 0, "%s", b);
}

/* ---- columns ---- */

static void test_cols(void)
{
	static const struct sd_col c[] = {
		{ "id", 10, 0, 1, 0, 20, 0 },     /* flex, wants 20 */
		{ "a", 5, 0, 0, 1, 0, 0 },
		{ "b", 5, 2, 0, 1, 0, 0 },
		{ "c", 5, 3, 0, 1, 0, 0 },
		{ "y", 4, 4, 0, 0, 0, 1 },        /* yields to id */
	};
	int xs[5], ws[5];
	/* Everything fits and id gets its want. */
	int used = sd_cols_fit(c, 5, 60, xs, ws);
	CHECK(used == 60 && ws[4] == 4 && ws[0] == 60 - (5 + 5 + 5 + 4) - 4, "wide: used %d id %d", used, ws[0]);
	CHECK(xs[1] == ws[0] + 1, "x of a: %d", xs[1]);
	/* 10+5+5+5+4 + 4 gaps = 33 fits 33, but id is short of its want:
	 * the yielding column goes. */
	sd_cols_fit(c, 5, 33, xs, ws);
	CHECK(ws[4] == 0 && ws[0] == 15, "yield: y %d id %d", ws[4], ws[0]);
	/* Narrower: drop by priority, c (3) before b (2). */
	sd_cols_fit(c, 5, 23, xs, ws);
	CHECK(ws[3] == 0 && ws[2] == 5 && ws[4] == 0, "drop c: b %d c %d", ws[2], ws[3]);
	sd_cols_fit(c, 5, 16, xs, ws);
	CHECK(ws[2] == 0 && ws[3] == 0 && ws[1] == 5 && ws[0] == 10, "drop b too: id %d a %d", ws[0], ws[1]);
	/* Narrower than what never drops: id shrinks, nothing passes the edge. */
	used = sd_cols_fit(c, 5, 9, xs, ws);
	for (int i = 0; i < 5; i++)
		CHECK(ws[i] == 0 || xs[i] + ws[i] <= 9, "column %d at %d+%d past 9", i, xs[i], ws[i]);
	CHECK(used <= 9, "used %d", used);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	test_good();
	test_bad();
	test_files();
	test_palette();
	test_formats();
	test_cols();
	return check_exit("test-ui-theme");
}
