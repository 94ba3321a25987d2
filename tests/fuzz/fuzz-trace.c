/* tests/fuzz/fuzz-trace.c - fuzz target for sd_trace_parse.
 *
 * With libFuzzer:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -DSD_LIBFUZZER -D_GNU_SOURCE -I. \
 *     -I/usr/include/cjson tests/fuzz/fuzz-trace.c src/market/trace.c src/base/errors.c \
 *     -lcjson -lm -o fuzz-trace
 *   ./fuzz-trace
 * Without it (as `make check` builds it) main() runs the target over the
 * files named on the command line, or, with none, over the built-in corpus
 * and 5,000 deterministic mutations of each entry (byte flips, truncations,
 * insertions of bytes and JSON tokens).  Under --enable-sanitizers that finds
 * memory errors; in any build it checks the contract: every input either
 * parses into events sorted by t whose fields keep the documented ranges, or
 * fails with one line that starts with "fuzz.jsonl:".
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/market/trace.h"

static long n_ok, n_err, n_bad;

/* Counts a broken contract; under libFuzzer, crashes so that it keeps the
 * input. */
static void broken(const char *what, const char *detail)
{
	n_bad++;
	fprintf(stderr, "fuzz-trace: %s: %s\n", what, detail);
#ifdef SD_LIBFUZZER
	abort();
#endif
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Whether a field is a NUL-terminated string within its array. */
static int terminated(const char *s, size_t cap)
{
	return memchr(s, '\0', cap) != NULL;
}

/* Checks what the header promises about a parsed trace. */
static const char *check_trace(const struct sd_trace *tr)
{
	if (tr->n < 0 || tr->n > SD_TRACE_MAX_EVENTS || (tr->n && !tr->events) || !tr->file)
		return "bad shape";
	for (int i = 0; i < tr->n; i++) {
		const struct sd_trace_event *e = &tr->events[i];
		if (!isfinite(e->t) || e->t < 0)
			return "t out of range";
		if (i && (e->t < e[-1].t || (e->t == e[-1].t && e->line <= e[-1].line)))
			return "not sorted stably";
		if (e->line < 1)
			return "bad line number";
		if (!terminated(e->server, sizeof e->server) || !terminated(e->zone, sizeof e->zone) ||
		    !terminated(e->offer, sizeof e->offer) || !terminated(e->command, sizeof e->command))
			return "unterminated string";
		switch (e->kind) {
		case SD_TRACE_REVOKE:
			if (!e->server[0] || isnan(e->seconds))
				return "bad revoke";
			break;
		case SD_TRACE_STOCKOUT:
			if (!e->zone[0] || !isfinite(e->seconds) || e->seconds < 0)
				return "bad stockout";
			break;
		case SD_TRACE_PRICE:
			if (!e->offer[0] || !isfinite(e->usd_per_hour) || e->usd_per_hour <= 0)
				return "bad price";
			break;
		case SD_TRACE_COMMAND:
			if (!e->command[0] || strchr(e->command, '\n'))
				return "bad command";
			break;
		default:
			return "unknown kind";
		}
	}
	return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sd_trace tr;
	char *why = NULL;
	if (sd_trace_parse(&tr, (const char *)data, size, "fuzz.jsonl", &why) == 0) {
		n_ok++;
		const char *bad = check_trace(&tr);
		if (bad)
			broken("parsed trace breaks the contract", bad);
	} else {
		n_err++;
		if (!why || strncmp(why, "fuzz.jsonl:", 11) || strchr(why, '\n') || tr.events || tr.file)
			broken("bad error", why ? why : "(none)");
	}
	sd_trace_free(&tr);
	free(why);
	return 0;
}

#ifndef SD_LIBFUZZER

#include "tests/fuzz/mutate.h"

/* A seed of every line the parser knows, and some it skips. */
static const char *const corpus[] = {
	"# trace\n"
	"{\"t\": 12.5, \"event\": \"revoke\", \"server\": \"s2\"}\n"
	"{\"t\": 12.5, \"event\": \"revoke\", \"server\": \"s3\", \"notice\": 3}\n"
	"\n"
	"{\"t\": 30, \"event\": \"stockout\", \"zone\": \"us-east1-c\", \"seconds\": 60}\n"
	"{\"t\": 40, \"event\": \"price\", \"offer\": \"gce/us-west1-b/k80/spot\", \"usd_per_hour\": 0.31}\n"
	"{\"t\": 5, \"event\": \"command\", \"command\": \"add gce/us-west1-b/k80/spot\"}\r\n",

	"{\"type\":\"run_start\",\"time\":1767000000.1,\"t\":0,\"job\":\"j\"}\n"
	"{\"type\":\"step\",\"time\":1767000003.5,\"t\":3.4,\"step\":50,\"loss\":2.1}\n"
	"{\"type\":\"command\",\"time\":1767000004,\"t\":4.25,\"command\":\"add gce/us-west1-b/k80/spot\",\"ok\":true}\n"
	"{\"type\":\"command\",\"time\":1767000004.5,\"t\":4.5,\"command\":\"add x\",\"ok\":false,\"error\":\"e\"}\n"
	"{\"type\":\"generation\",\"t\":5,\"generation\":2,\"workers\":[\"s1\",\"s2\"]}\n"
	"{\"type\":\"revoked\",\"t\":9,\"server\":\"s2\",\"market_time\":20,\"notice_s\":3,\"capped\":false}\n"
	"{\"type\":\"stockout\",\"t\":10,\"offer\":\"o\",\"zone\":\"z\",\"reason\":\"ZONE_RESOURCE_POOL_EXHAUSTED\"}\n"
	"{\"type\":\"price\",\"t\":11,\"market_time\":19.5,\"offer\":\"gce/us-east1-c/k80/spot\",\"usd_per_hour\":0.2}\n",

	"\xef\xbb\xbf{\"event\":\"stockout\",\"t\":0,\"zone\":\"z\",\"seconds\":0}\n"
	"  # indented\n"
	"{\"t\":1e3,\"event\":\"command\",\"command\":\"workers 4\"}",
};

/* Bits of JSON worth inserting. */
static const char *const tokens[] = {
	"-1", "0", "1e999", "-0", "null", "true", "false", "\"\"", "[]", "{}", "[[", "]]", "\"x\":", ",", "\n", "#",
	"\"\\u0000\"", "\"\\n\"", "\r", "\"event\":", "\"type\":", "\"revoke\"", "\"revoked\"", "\"price\"",
	"\"command\"", "\"t\":", "\"server\":\"0123456789012345678901234567890123\"", "\"ok\":true", "\"",
};

/* xorshift64*: the fallback's own generator, so the fuzzer needs nothing
 * but the parser. */
static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static uint32_t below(uint32_t bound)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return (uint32_t)((rng_state * 0x2545f4914f6cdd1du) >> 32) % bound;
}

static void mutate_and_run(const char *src, size_t len)
{
	size_t cap = len + 8 * 64;
	char *buf = malloc(cap);
	if (!buf)
		abort();
	memcpy(buf, src, len);
	size_t n = len;
	int kind = (int)below(4);
	int edits = 1 + (int)below(8);
	for (int e = 0; e < edits && n > 0; e++) {
		size_t at = below((uint32_t)n);
		switch (kind) {
		case 0:  /* flip a bit */
			buf[at] = (char)(buf[at] ^ (1 << below(8)));
			break;
		case 1:  /* truncate, once */
			n = at;
			e = edits;
			break;
		case 2: {  /* insert a token */
			const char *t = tokens[below(sizeof tokens / sizeof tokens[0])];
			size_t tl = strlen(t);
			if (n + tl > cap)
				break;
			memmove(buf + at + tl, buf + at, n - at);
			memcpy(buf + at, t, tl);
			n += tl;
			break;
		}
		default:  /* insert a random byte */
			if (n + 1 > cap)
				break;
			memmove(buf + at + 1, buf + at, n - at);
			buf[at] = (char)below(256);
			n++;
			break;
		}
	}
	LLVMFuzzerTestOneInput((const uint8_t *)buf, n);
	free(buf);
}

int main(int argc, char **argv)
{
	if (argc > 1) {
		if (fuzz_run_files("fuzz-trace", argc, argv))
			return 1;
	} else {
		size_t nseeds = sizeof corpus / sizeof corpus[0];
		for (size_t i = 0; i < nseeds; i++) {
			LLVMFuzzerTestOneInput((const uint8_t *)corpus[i], strlen(corpus[i]));
			if (n_ok != (long)i + 1) {
				fprintf(stderr, "fuzz-trace: corpus entry %zu does not parse\n", i);
				return 1;
			}
		}
		for (size_t i = 0; i < nseeds; i++)
			for (int it = 0; it < 5000; it++)
				mutate_and_run(corpus[i], strlen(corpus[i]));
	}
	printf("fuzz-trace: %ld inputs parsed, %ld refused, %ld broke the contract\n", n_ok, n_err, n_bad);
	return n_bad ? 1 : 0;
}

#endif
