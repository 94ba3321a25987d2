/* tests/engine/test-tokens.c - token files (engine/tokens.h): both formats
 * read back id for id, every malformed file refused in one line naming it,
 * the vocabulary and block checks, and the windows: deterministic, in
 * range, uniform, independent of how a batch is split, x and y one token
 * apart, evaluation windows fixed and inside the file.  The llm.c files are
 * written the way its data_common.py writes them (256 int32, then uint16). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/errors.h"
#include "engine/tokens.h"
#include "tests/check.h"
#include "tests/tmpdir.h"

static char dir[256];

/* Writes an llm.c file of n tokens tok[] with the given header fields;
 * extra_bytes appended after the tokens (to damage the length). */
static char *write_llmc(const char *name, int32_t magic, int32_t version, int32_t count,
                        const uint16_t *tok, size_t n, size_t extra_bytes)
{
	size_t len = SD_TOKENS_LLMC_HEADER_INTS * 4 + n * 2 + extra_bytes;
	unsigned char *buf = calloc(1, len);
	int32_t header[SD_TOKENS_LLMC_HEADER_INTS] = { magic, version, count };
	memcpy(buf, header, sizeof header);
	memcpy(buf + sizeof header, tok, n * 2);
	char *path = path_join(dir, name);
	write_raw(path, buf, len);
	free(buf);
	return path;
}

static char *write_u16(const char *name, const uint16_t *tok, size_t n, size_t extra_bytes)
{
	size_t len = n * 2 + extra_bytes;
	unsigned char *buf = calloc(1, len ? len : 1);
	memcpy(buf, tok, n * 2);
	char *path = path_join(dir, name);
	write_raw(path, buf, len);
	free(buf);
	return path;
}

/* sd_tokens_open fails and its message contains every one of the parts. */
static void expect_refused(const char *path, const char *part1, const char *part2)
{
	struct sd_tokens t;
	char *why = NULL;
	int rc = sd_tokens_open(&t, path, &why);
	CHECK(rc == -1, "%s opened", path);
	CHECK(why && strstr(why, path), "message names the file: %s", why ? why : "(none)");
	CHECK(why && strstr(why, part1), "'%s' in: %s", part1, why ? why : "(none)");
	if (part2)
		CHECK(why && strstr(why, part2), "'%s' in: %s", part2, why ? why : "(none)");
	CHECK(why && !strchr(why, '\n'), "one line: %s", why ? why : "(none)");
	free(why);
}

static void test_formats(void)
{
	enum { N = 5000 };
	uint16_t tok[N];
	for (int i = 0; i < N; i++)
		tok[i] = (uint16_t)((i * 7919u + 13u) % 50257u);
	char *p1 = write_llmc("llmc.bin", SD_TOKENS_LLMC_MAGIC, 1, N, tok, N, 0);
	char *p2 = write_u16("raw.bin", tok, N, 0);
	const char *paths[2] = { p1, p2 };
	for (int f = 0; f < 2; f++) {
		struct sd_tokens t;
		char *why = NULL;
		CHECK(sd_tokens_open(&t, paths[f], &why) == 0, "%s", why ? why : "");
		free(why);
		CHECK_INT(t.format, f == 0 ? SD_TOKENS_LLMC : SD_TOKENS_RAW_U16);
		CHECK_INT(t.count, N);
		int same = t.count == N && memcmp(t.tok, tok, sizeof tok) == 0;
		CHECK(same, "%s: the ids read back differ", paths[f]);
		why = NULL;
		CHECK(sd_tokens_check_vocab(&t, 50257, &why) == 0, "%s", why ? why : "");
		free(why);
		why = NULL;
		CHECK(sd_tokens_check_vocab(&t, 50000, &why) == -1);
		/* The first id >= 50000: i * 7919 + 13 mod 50257 first reaches it at
		 * the i computed here, independently of the reader. */
		int first = -1;
		for (int i = 0; i < N && first < 0; i++)
			if ((i * 7919u + 13u) % 50257u >= 50000u)
				first = i;
		char want[64];
		snprintf(want, sizeof want, "at position %d is not below", first);
		CHECK(why && strstr(why, want) && strstr(why, paths[f]), "%s", why ? why : "(none)");
		free(why);
		sd_tokens_close(&t);
	}
	free(p1);
	free(p2);
}

static void test_refusals(void)
{
	uint16_t tok[600];
	for (int i = 0; i < 600; i++)
		tok[i] = (uint16_t)i;
	char *p;
	p = write_llmc("short.bin", SD_TOKENS_LLMC_MAGIC, 1, 600, tok, 599, 0);
	expect_refused(p, "says 600 tokens", "truncated");
	free(p);
	p = write_llmc("long.bin", SD_TOKENS_LLMC_MAGIC, 1, 600, tok, 600, 2);
	expect_refused(p, "says 600 tokens", "1202 bytes");
	free(p);
	p = write_llmc("version.bin", SD_TOKENS_LLMC_MAGIC, 2, 600, tok, 600, 0);
	expect_refused(p, "version 2", NULL);
	free(p);
	p = write_llmc("u32.bin", SD_TOKENS_LLMC_MAGIC_U32, 7, 300, tok, 600, 0);
	expect_refused(p, "uint32 tokens", NULL);
	free(p);
	p = write_llmc("magic.bin", 20240519, 1, 600, tok, 600, 0);
	expect_refused(p, "wrong magic 20240519", "20240520");
	free(p);
	p = write_u16("odd.bin", tok, 600, 1);
	expect_refused(p, "1201 bytes, an odd number", NULL);
	free(p);
	p = write_u16("empty.bin", tok, 0, 0);
	expect_refused(p, "empty", NULL);
	free(p);
	p = path_join(dir, "missing.bin");
	expect_refused(p, "no such file", NULL);
	free(p);
	expect_refused(dir, "not a regular file", NULL);
	/* A headerless file of 1024 bytes or more whose first ints are not a
	 * header matching its length is token ids, not a damaged header. */
	p = write_u16("raw-long.bin", tok, 600, 0);
	struct sd_tokens t;
	char *why = NULL;
	CHECK(sd_tokens_open(&t, p, &why) == 0, "%s", why ? why : "");
	free(why);
	CHECK_INT(t.format, SD_TOKENS_RAW_U16);
	CHECK_INT(t.count, 600);
	why = NULL;
	CHECK(sd_tokens_check_block(&t, 599, &why) == 0);
	CHECK(sd_tokens_check_block(&t, 600, &why) == -1);
	CHECK(why && strstr(why, "600 tokens, fewer than block_size + 1 = 601"), "%s",
	      why ? why : "(none)");
	free(why);
	sd_tokens_close(&t);
	free(p);
}

static void test_windows(void)
{
	enum { N = 100000, BLOCK = 64, DRAWS = 200000, BINS = 10 };
	uint16_t *tok = malloc(N * sizeof *tok);
	for (int i = 0; i < N; i++)
		tok[i] = (uint16_t)(i % 65521);
	char *p = write_u16("win.bin", tok, N, 0);
	struct sd_tokens t;
	char *why = NULL;
	CHECK(sd_tokens_open(&t, p, &why) == 0, "%s", why ? why : "");
	free(why);
	CHECK_INT(sd_tokens_epoch_windows(&t, BLOCK), N / BLOCK);
	CHECK_INT(sd_tokens_eval_windows(&t, BLOCK), (N - 1) / BLOCK);

	/* In range, deterministic, and uniform over the valid starts: each of
	 * 10 equal bins within 4 standard deviations of DRAWS / 10. */
	long bins[BINS] = { 0 };
	uint64_t max_start = 0, first_start = sd_tokens_train_start(&t, BLOCK, 42, 0, 0);
	int same_epoch1 = 0;
	for (uint64_t i = 0; i < DRAWS; i++) {
		uint64_t s = sd_tokens_train_start(&t, BLOCK, 42, 0, i);
		if (s > max_start)
			max_start = s;
		bins[s * BINS / (N - BLOCK)]++;
		same_epoch1 += s == sd_tokens_train_start(&t, BLOCK, 42, 1, i);
	}
	CHECK(max_start <= N - BLOCK - 1, "start %llu leaves no room for block + 1 tokens",
	      (unsigned long long)max_start);
	CHECK(max_start >= N - BLOCK - 100, "the last starts are never drawn: max %llu",
	      (unsigned long long)max_start);
	CHECK_INT(sd_tokens_train_start(&t, BLOCK, 42, 0, 0), first_start);
	double sd = sqrt(DRAWS * 0.1 * 0.9);
	for (int b = 0; b < BINS; b++)
		CHECK(fabs(bins[b] - DRAWS / 10.0) < 4 * sd, "bin %d has %ld of %d draws", b, bins[b],
		      DRAWS);
	/* Another epoch or seed draws other windows (equal starts by chance:
	 * about DRAWS / (N - BLOCK) = 2). */
	CHECK(same_epoch1 < 20, "epochs 0 and 1 share %d of %d starts", same_epoch1, DRAWS);
	int same_seed = 0;
	for (uint64_t i = 0; i < 1000; i++)
		same_seed += sd_tokens_train_start(&t, BLOCK, 42, 0, i) ==
		             sd_tokens_train_start(&t, BLOCK, 43, 0, i);
	CHECK(same_seed < 5, "seeds 42 and 43 share %d of 1000 starts", same_seed);

	/* A global batch of 256 windows split 3 ways or 5 ways, each member
	 * drawing its contiguous slice from its offset: the same windows. */
	uint64_t whole[256];
	for (int i = 0; i < 256; i++)
		whole[i] = sd_tokens_train_start(&t, BLOCK, 7, 3, 17 * 256 + i);
	const int splits[2][5] = { { 100, 90, 66, 0, 0 }, { 51, 51, 51, 51, 52 } };
	for (int s = 0; s < 2; s++) {
		int off = 0, mismatch = 0;
		for (int m = 0; m < 5 && splits[s][m]; m++) {
			for (int j = 0; j < splits[s][m]; j++)
				mismatch += sd_tokens_train_start(&t, BLOCK, 7, 3, 17 * 256 + off + j) !=
				            whole[off + j];
			off += splits[s][m];
		}
		CHECK_INT(off, 256);
		CHECK_INT(mismatch, 0);
	}

	/* x is the window, y the same shifted by one. */
	int32_t x[BLOCK], y[BLOCK];
	uint64_t s = sd_tokens_train_start(&t, BLOCK, 42, 0, 5);
	sd_tokens_window(&t, s, BLOCK, x, y);
	int bad = 0;
	for (int j = 0; j < BLOCK; j++)
		bad += x[j] != (int32_t)((s + j) % 65521) || y[j] != (int32_t)((s + j + 1) % 65521);
	CHECK_INT(bad, 0);
	/* The last evaluation window's last target is the file's last token or
	 * before it. */
	uint64_t last = (sd_tokens_eval_windows(&t, BLOCK) - 1) * BLOCK;
	CHECK(last + BLOCK <= N - 1, "eval window at %llu runs past the file",
	      (unsigned long long)last);
	sd_tokens_window(&t, last, BLOCK, x, y);
	CHECK_INT(y[BLOCK - 1], (int32_t)((last + BLOCK) % 65521));
	sd_tokens_close(&t);
	free(p);
	free(tok);
}

int main(void)
{
	make_tmpdir(dir, sizeof dir, "sd-tokens-XXXXXX");
	test_formats();
	test_refusals();
	test_windows();
	rm_tree(dir);
	return check_exit("test-tokens");
}
