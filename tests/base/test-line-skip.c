/* tests/base/test-line-skip.c - sd_line_reader_skip (src/base/line-reader.h), the way a
 * command input refuses an over-long line whole: fed in
 * chunks of every size, a stream of short lines and over-long ones gives
 * back exactly the short lines, in order, and one -1 per over-long line -
 * never a piece of a refused line, whether its newline came in the chunk
 * that overflowed, in a later chunk, or right at the limit. */
#include "config.h"

#include "src/base/line-reader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/check.h"

#define MAX 16   /* longest line, newline included */

/* Feeds TEXT in chunks of CHUNK bytes, skipping every refused line; writes
 * the lines it got, each followed by '|', to OUT and returns the number of
 * refusals. */
static int run(const char *text, size_t chunk, char *out, size_t outsz)
{
	struct sd_line_reader r;
	sd_line_reader_init(&r, MAX);
	size_t n = strlen(text), o = 0;
	int refused = 0;
	out[0] = '\0';
	for (size_t off = 0; off < n; off += chunk) {
		sd_line_reader_feed(&r, text + off, off + chunk <= n ? chunk : n - off);
		const char *line;
		size_t len;
		char *why = NULL;
		int rc;
		while ((rc = sd_line_reader_next(&r, &line, &len, &why)) != 0) {
			if (rc < 0) {
				refused++;
				free(why);
				why = NULL;
				sd_line_reader_skip(&r);
				continue;
			}
			o += (size_t)snprintf(out + o, outsz - o, "%.*s|", (int)len, line);
		}
	}
	sd_line_reader_free(&r);
	return refused;
}

int main(void)
{
	/* Lines of 15 bytes + newline are the longest allowed; 16 is one over.
	 * The refused ones hold "quit"/"help" at their ends, the way the
	 * issue's 10 MiB line did. */
	static const char text[] =
		"a\n"
		"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxquit\n"     /* long, ends in a command */
		"bb\n"
		"123456789012345\n"                                   /* exactly MAX with its newline */
		"1234567890123456\n"                                  /* one over */
		"c\n"
		"yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyhelp\n"
		"\n"                                                  /* an empty line is a line */
		"dd\n";
	const char *want = "a|bb|123456789012345|c||dd|";
	char got[512];
	int bad = 0;
	for (size_t chunk = 1; chunk <= sizeof text; chunk++) {
		int refused = run(text, chunk, got, sizeof got);
		if ((strcmp(got, want) != 0 || refused != 3) && ++bad <= 3) {
			CHECK(0, "chunks of %zu: lines '%s' (want '%s'), %d refused (want 3)", chunk, got, want,
			      refused);
		} else if (strcmp(got, want) != 0 || refused != 3) {
			check_failures++;   /* counted, not printed: three say enough */
		}
	}
	printf("ok   %zu chunk sizes: lines '%s', 3 refused whole%s\n", sizeof text, want,
	       bad ? " (NOT for all)" : "");

	/* Skip on a reader that has not overflowed changes nothing. */
	struct sd_line_reader r;
	sd_line_reader_init(&r, MAX);
	sd_line_reader_feed(&r, "ab", 2);
	sd_line_reader_skip(&r);
	sd_line_reader_feed(&r, "c\n", 2);
	const char *line;
	size_t len;
	char *why = NULL;
	CHECK_INT(sd_line_reader_next(&r, &line, &len, &why), 1);
	CHECK(len == 3 && !memcmp(line, "abc", 3), "got '%.*s'", (int)len, line);
	sd_line_reader_free(&r);
	printf("ok   skip without an over-long line is a no-op\n");
	return check_exit("test-line-skip");
}
