/* tests/fuzz/fuzz-catalog.c - fuzz target for sd_catalog_parse.
 *
 * With libFuzzer:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -DSD_LIBFUZZER -I. \
 *     -I/usr/include/cjson tests/fuzz/fuzz-catalog.c src/market/catalog.c \
 *     src/market/market-model.c src/base/errors.c src/base/rng.c -lcjson -lm -o fuzz-catalog
 *   ./fuzz-catalog data/
 * Without it (as `make check` builds it) main() runs the target over the
 * files named on the command line, or, with none, over 2000 deterministic
 * mutations of the shipped catalogs (byte flips, truncations, inserted and
 * deleted bytes, spliced JSON tokens).  Under --enable-sanitizers that finds
 * memory errors; otherwise it checks the contract: every input either
 * parses or fails with one line that starts with the file name.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/rng.h"
#include "src/market/catalog.h"
#include "src/market/market-model.h"

static long n_ok, n_err, n_bad;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sd_catalog *c = NULL;
	char *why = NULL;
	if (sd_catalog_parse(&c, (const char *)data, size, "fuzz.json", &why) == 0) {
		n_ok++;
		/* Touch what a user of a catalog would: sample from every offer. */
		struct sd_rng rng;
		sd_rng_seed(&rng, 1, 1);
		for (int i = 0; i < c->noffers && i < 64; i++) {
			struct sd_lifetime lt;
			const struct sd_offer *o = &c->offers[i];
			if (o->revocation.model == SD_REVOCATION_EMPIRICAL)
				sd_lifetime_sample(o, 13.5, 1, &rng, &lt);
			(void)sd_boot_sample(o, 1, &rng);
			(void)sd_market_p_revoked_within_at(o, 7.25, 3600, 1);
			(void)sd_bill_usd(o, 61);
		}
		sd_catalog_free(c);
	} else {
		n_err++;
		if (!why || strncmp(why, "fuzz.json", 9) || strchr(why, '\n')) {
			n_bad++;
			fprintf(stderr, "bad error message: %s\n", why ? why : "(none)");
		}
	}
	free(why);
	return 0;
}

#ifndef SD_LIBFUZZER

#include "tests/fuzz/mutate.h"

/* Bits of JSON that make interesting splices. */
static const char *const tokens[] = {
	"-1", "0", "1e999", "-0", "null", "true", "\"\"", "[]", "{}", "[[", "]]", "\"x\":", ",", "\"\\u0000\"",
	"24", "25", "0.5", "1.5", "\"empirical\"", "\"markov\"", "\"per_hour\"", "2147483648", "NaN", "\"",
};

static void mutate_and_run(const char *src, size_t len, struct sd_rng *rng)
{
	size_t cap = len + 64;
	char *buf = malloc(cap);
	memcpy(buf, src, len);
	size_t n = len;
	int kind = (int)sd_rng_below(rng, 5);
	int edits = 1 + (int)sd_rng_below(rng, 4);
	for (int e = 0; e < edits && n > 0; e++) {
		size_t at = sd_rng_below(rng, (uint32_t)n);
		switch (kind) {
		case 0:  /* flip bits */
			buf[at] = (char)(buf[at] ^ (1 << sd_rng_below(rng, 8)));
			break;
		case 1:  /* truncate */
			n = at;
			e = edits;
			break;
		case 2: {  /* splice a token in place of 1-8 bytes */
			const char *t = tokens[sd_rng_below(rng, sizeof tokens / sizeof tokens[0])];
			size_t tl = strlen(t), del = 1 + sd_rng_below(rng, 8);
			if (at + del > n)
				del = n - at;
			if (n - del + tl > cap)
				break;
			memmove(buf + at + tl, buf + at + del, n - at - del);
			memcpy(buf + at, t, tl);
			n = n - del + tl;
			break;
		}
		case 3: {  /* delete a run */
			size_t del = 1 + sd_rng_below(rng, 32);
			if (at + del > n)
				del = n - at;
			memmove(buf + at, buf + at + del, n - at - del);
			n -= del;
			break;
		}
		default:  /* change a digit (keeps the JSON valid, tests validation) */
			for (size_t k = 0; k < n; k++) {
				size_t p = (at + k) % n;
				if (buf[p] >= '0' && buf[p] <= '9') {
					buf[p] = (char)('0' + sd_rng_below(rng, 10));
					break;
				}
			}
			break;
		}
	}
	LLVMFuzzerTestOneInput((const uint8_t *)buf, n);
	free(buf);
}

int main(int argc, char **argv)
{
	if (argc > 1) {
		if (fuzz_run_files("fuzz-catalog", argc, argv))
			return 1;
	} else {
		const char *top = getenv("top_srcdir");
		static const char *const names[] = { "gce-2019.json", "market-2026.json" };
		char *seed[2];
		size_t len[2];
		for (int i = 0; i < 2; i++) {
			char path[4096];
			snprintf(path, sizeof path, "%s/data/%s", top ? top : ".", names[i]);
			seed[i] = fuzz_read_file(path, &len[i]);
			if (!seed[i]) {
				fprintf(stderr, "fuzz-catalog: %s: cannot read\n", path);
				return 1;
			}
			LLVMFuzzerTestOneInput((const uint8_t *)seed[i], len[i]);
			if (n_ok != i + 1) {
				fprintf(stderr, "fuzz-catalog: the shipped %s does not parse\n", names[i]);
				return 1;
			}
		}
		struct sd_rng rng;
		sd_rng_seed(&rng, 0xf022, 7);
		for (int it = 0; it < 2000; it++) {
			int which = (int)sd_rng_below(&rng, 2);
			mutate_and_run(seed[which], len[which], &rng);
		}
		free(seed[0]);
		free(seed[1]);
	}
	printf("fuzz-catalog: %ld inputs parsed, %ld refused, %ld with a bad message\n", n_ok, n_err, n_bad);
	return n_bad ? 1 : 0;
}

#endif
