/* tests/fuzz/fuzz-theme.c - fuzzes the theme parser (ui/theme.c) and checks
 * what it does with any input: a refused theme gets one printable line that
 * starts with the file name and a line number; an accepted one has every
 * colour in -1..255 and only known attributes, and, written back out as a
 * theme file, parses to the same styles.
 *
 * Built with -DSD_LIBFUZZER -fsanitize=fuzzer this is a libFuzzer target:
 *   clang -DSD_LIBFUZZER -fsanitize=fuzzer,address -I. -Ibuild \
 *         tests/fuzz/fuzz-theme.c ui/theme.c -o fuzz-theme
 * Otherwise main() runs the four shipped themes (from $top_srcdir/themes; one
 * that cannot be read fails the run) and a set of tricky built-in lines, each
 * with 5,000 deterministic random mutations, so `make check` fuzzes on every
 * run. */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/check.h"
#include "ui/theme.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define ALL_ATTRS (SD_ATTR_BOLD | SD_ATTR_DIM | SD_ATTR_UNDERLINE | SD_ATTR_REVERSE | \
                   SD_ATTR_STANDOUT | SD_ATTR_ITALIC)

/* Writes T back as theme text (every key, colours as numbers). */
static size_t write_theme(const struct sd_theme *t, char *buf, size_t n)
{
	static const char *const attrs[] = { "bold", "dim", "underline", "reverse", "standout", "italic" };
	size_t off = 0;
	for (int i = 0; i < SD_STYLE_COUNT; i++) {
		const struct sd_theme_style *s = &t->st[i];
		off += (size_t)snprintf(buf + off, n - off, "%s =", sd_style_names[i]);
		int words = 0;
		for (int k = 0; k < 6; k++) {
			if (s->attrs & (1u << k)) {
				off += (size_t)snprintf(buf + off, n - off, " %s", attrs[k]);
				words++;
			}
		}
		if (s->fg >= 0) {
			off += (size_t)snprintf(buf + off, n - off, " color%d", s->fg);
			words++;
		}
		if (s->bg >= 0) {
			off += (size_t)snprintf(buf + off, n - off, " on %d", s->bg);
			words++;
		}
		if (!words)
			off += (size_t)snprintf(buf + off, n - off, " default");
		off += (size_t)snprintf(buf + off, n - off, "\n");
	}
	return off;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sd_theme t, u;
	char *why = NULL;
	if (sd_theme_parse(&t, (const char *)data, size, "fuzz.theme", &why) != 0) {
		FUZZ_ASSERT(why != NULL);
		FUZZ_ASSERT(strncmp(why, "fuzz.theme:", 11) == 0);
		for (const unsigned char *p = (const unsigned char *)why; *p; p++)
			FUZZ_ASSERT(*p >= 0x20 && *p < 0x7f);
		free(why);
		return 0;
	}
	FUZZ_ASSERT(why == NULL);
	for (int i = 0; i < SD_STYLE_COUNT; i++) {
		FUZZ_ASSERT(t.st[i].fg >= -1 && t.st[i].fg <= 255);
		FUZZ_ASSERT(t.st[i].bg >= -1 && t.st[i].bg <= 255);
		FUZZ_ASSERT((t.st[i].attrs & ~ALL_ATTRS) == 0);
	}
	char buf[4096];
	size_t n = write_theme(&t, buf, sizeof buf);
	int rc = sd_theme_parse(&u, buf, n, "again.theme", &why);
	if (rc != 0)
		fprintf(stderr, "fuzz-theme: written theme refused: %s\n%s", why ? why : "?", buf);
	FUZZ_ASSERT(rc == 0);
	for (int i = 0; i < SD_STYLE_COUNT; i++) {
		FUZZ_ASSERT(u.st[i].fg == t.st[i].fg);
		FUZZ_ASSERT(u.st[i].bg == t.st[i].bg);
		FUZZ_ASSERT(u.st[i].attrs == t.st[i].attrs);
	}
	return 0;
}

#ifndef SD_LIBFUZZER

/* ---- the built-in driver ---- */

static const char *const builtin_corpus[] = {
	"# default\nnormal = default\nborder = blue\ntitle = bold cyan\nselection = black on cyan\n"
	"header = bold bright-white on blue\ncrit = bold red\nchart-alt = #00afff\n",
	"ok = color28\r\nwarn = 130 # orange\r\nondemand = on 17\r\non-demand = x\r\n",
	"\xef\xbb\xbfstatus=reverse,bold\nkey = reverse bold\ndim=dim\n\n\n  # spaces\n\tlabel\t=\tunderline\n",
	"ok = red green\n= blue\nok\nok = on\nok = #12345g\nwarn = color256\n",
};

#define MUTATIONS 5000
#define MAX_INPUT 8192

#define FUZZ_SEED 0x5eed7e3e5eed7e3eull

/* rnd(): splitmix64, as the other targets'; the mutations below are the
 * theme format's own. */
#include "tests/fuzz/mutate.h"

/* Bytes a theme parser finds interesting. */
static const char interesting[] = "=#, \t\n\r0123456789onbdruaeflckwgy-\x01\x7f\xff";

static size_t mutate(uint8_t *buf, size_t len, size_t cap)
{
	int steps = 1 + (int)(rnd() % 4);
	for (int s = 0; s < steps; s++) {
		size_t pos = len ? (size_t)(rnd() % len) : 0;
		switch (rnd() % 7) {
		case 0:         /* flip a bit */
			if (len)
				buf[pos] ^= (uint8_t)(1u << (rnd() % 8));
			break;
		case 1:         /* replace with an interesting byte */
			if (len)
				buf[pos] = (uint8_t)interesting[rnd() % (sizeof interesting - 1)];
			break;
		case 2:         /* truncate */
			len = pos;
			break;
		case 3:         /* insert a byte */
			if (len < cap) {
				memmove(buf + pos + 1, buf + pos, len - pos);
				buf[pos] = (uint8_t)interesting[rnd() % (sizeof interesting - 1)];
				len++;
			}
			break;
		case 4: {       /* duplicate a chunk (duplicate keys) */
			size_t n = 1 + (size_t)(rnd() % 40);
			if (pos + n > len)
				n = len - pos;
			if (len + n <= cap) {
				memmove(buf + pos + n, buf + pos, len - pos);
				len += n;
			}
			break;
		}
		case 5: {       /* delete a chunk */
			size_t n = 1 + (size_t)(rnd() % 20);
			if (pos + n > len)
				n = len - pos;
			memmove(buf + pos, buf + pos + n, len - pos - n);
			len -= n;
			break;
		}
		default: {      /* a random byte */
			if (len)
				buf[pos] = (uint8_t)rnd();
			break;
		}
		}
	}
	return len;
}

static int run_one(const char *name, const uint8_t *seed, size_t len, uint8_t *buf)
{
	if (len > MAX_INPUT)
		len = MAX_INPUT;
	LLVMFuzzerTestOneInput(seed, len);
	for (int m = 0; m < MUTATIONS; m++) {
		memcpy(buf, seed, len);
		size_t n = mutate(buf, len, MAX_INPUT);
		LLVMFuzzerTestOneInput(buf, n);
	}
	printf("ok: %s: %d mutations\n", name, MUTATIONS);
	return MUTATIONS + 1;
}

int main(int argc, char **argv)
{
	static uint8_t buf[MAX_INPUT + 64], seed[MAX_INPUT + 64];
	static const char *const shipped[] = { "default", "light", "high-contrast", "mono" };
	const char *top = getenv("top_srcdir");
	long runs = 0;
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* Files named on the command line replace the corpus (reproducers). */
	if (argc > 1) {
		for (int i = 1; i < argc; i++) {
			FILE *f = fopen(argv[i], "rb");
			if (!f) {
				perror(argv[i]);
				return 1;
			}
			size_t n = fread(seed, 1, MAX_INPUT, f);
			fclose(f);
			LLVMFuzzerTestOneInput(seed, n);
			printf("ok: %s\n", argv[i]);
		}
		return 0;
	}
	for (int i = 0; i < 4; i++) {
		char path[1024];
		snprintf(path, sizeof path, "%s/themes/%s.theme", top && *top ? top : ".", shipped[i]);
		FILE *f = fopen(path, "rb");
		if (!f) {
			/* The shipped themes are the corpus that matters most: a
			 * missing one fails instead of quietly shrinking the run. */
			fprintf(stderr, "fuzz-theme: FAIL: %s: cannot open a shipped theme (set top_srcdir "
			        "to the source tree)\n", path);
			check_failures++;
			continue;
		}
		size_t n = fread(seed, 1, MAX_INPUT, f);
		fclose(f);
		runs += run_one(path, seed, n, buf);
	}
	for (size_t i = 0; i < sizeof builtin_corpus / sizeof builtin_corpus[0]; i++) {
		char name[32];
		snprintf(name, sizeof name, "built-in #%zu", i);
		size_t n = strlen(builtin_corpus[i]);
		memcpy(seed, builtin_corpus[i], n);
		runs += run_one(name, seed, n, buf);
	}
	printf("fuzz-theme: %ld inputs, no invariant broken\n", runs);
	return check_exit("fuzz-theme");
}

#endif
