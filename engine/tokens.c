/* engine/tokens.c - token files and their windows; tokens.h gives the
 * formats and the sources. */
#include "engine/tokens.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "src/base/errors.h"
#include "src/base/file.h"
#include "src/base/rng.h"

#define SD_TOKENS_HEADER_BYTES (SD_TOKENS_LLMC_HEADER_INTS * 4)

static int32_t sd_tokens_le32(const unsigned char *p)
{
	return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	                 (uint32_t)p[3] << 24);
}

/* Decides the format from the first bytes and the length; fills format,
 * tok and count.  The map stays the caller's. */
static int sd_tokens_frame(struct sd_tokens *t, const unsigned char *map, size_t len,
                           const char *path, char **why)
{
	if (len == 0)
		return sd_why(why, "%s: empty file, no tokens", path);
	if (len >= SD_TOKENS_HEADER_BYTES) {
		int32_t magic = sd_tokens_le32(map), version = sd_tokens_le32(map + 4);
		int32_t n = sd_tokens_le32(map + 8);
		uint64_t body = len - SD_TOKENS_HEADER_BYTES;
		if (magic == SD_TOKENS_LLMC_MAGIC_U32)
			return sd_why(why, "%s: llm.c token file of uint32 tokens (magic %d); only its uint16 "
			              "files (magic %d, vocabularies up to 65,536) are read",
			              path, magic, SD_TOKENS_LLMC_MAGIC);
		if (magic == SD_TOKENS_LLMC_MAGIC) {
			if (version != SD_TOKENS_LLMC_VERSION)
				return sd_why(why, "%s: llm.c token file version %d; version %d (uint16 tokens) "
				              "is read", path, version, SD_TOKENS_LLMC_VERSION);
			if (n < 0 || (uint64_t)n * 2 != body)
				return sd_why(why, "%s: the llm.c header says %d tokens (%lld bytes after the "
				              "1024-byte header) but the file has %llu bytes after it%s",
				              path, n, (long long)n * 2, (unsigned long long)body,
				              (uint64_t)n * 2 > body ? ": truncated" : "");
			t->format = SD_TOKENS_LLMC;
			t->tok = (const uint16_t *)(const void *)(map + SD_TOKENS_HEADER_BYTES);
			t->count = (uint64_t)n;
			if (t->count == 0)
				return sd_why(why, "%s: the llm.c header says 0 tokens", path);
			return 0;
		}
		/* A header of another magic whose count fits the length exactly is
		 * a damaged or foreign llm.c-style file, not 512 token ids. */
		if (n > 0 && (uint64_t)n * 2 == body)
			return sd_why(why, "%s: wrong magic %d in a 1024-byte header (llm.c's is %d); a "
			              "headerless nanoGPT file cannot look like this", path, magic,
			              SD_TOKENS_LLMC_MAGIC);
	}
	if (len % 2)
		return sd_why(why, "%s: %zu bytes, an odd number: not uint16 tokens (nanoGPT's "
		              "headerless format) and no llm.c header (magic %d)", path, len,
		              SD_TOKENS_LLMC_MAGIC);
	t->format = SD_TOKENS_RAW_U16;
	t->tok = (const uint16_t *)(const void *)map;
	t->count = len / 2;
	return 0;
}

int sd_tokens_open(struct sd_tokens *t, const char *path, char **why)
{
	memset(t, 0, sizeof *t);
	void *map;
	size_t len;
	if (sd_map_file(path, &map, &len, why) < 0)
		return -1;
	if (sd_tokens_frame(t, map, len, path, why) < 0) {
		if (map)
			munmap(map, len);
		memset(t, 0, sizeof *t);
		return -1;
	}
	t->map = map;
	t->map_len = len;
	t->path = strdup(path);
	if (!t->path)
		sd_oom();
	return 0;
}

void sd_tokens_close(struct sd_tokens *t)
{
	if (!t)
		return;
	if (t->map && t->map_len)
		munmap(t->map, t->map_len);
	free(t->path);
	memset(t, 0, sizeof *t);
}

int sd_tokens_check_vocab(const struct sd_tokens *t, uint32_t vocab, char **why)
{
	for (uint64_t i = 0; i < t->count; i++)
		if (t->tok[i] >= vocab)
			return sd_why(why, "%s: token %u at position %llu is not below the model's "
			              "vocabulary of %u", t->path, (unsigned)t->tok[i],
			              (unsigned long long)i, vocab);
	return 0;
}

int sd_tokens_check_block(const struct sd_tokens *t, int block, char **why)
{
	if (block < 1)
		return sd_why(why, "%s: block_size %d: must be at least 1", t->path, block);
	if (t->count < (uint64_t)block + 1)
		return sd_why(why, "%s: %llu tokens, fewer than block_size + 1 = %d", t->path,
		              (unsigned long long)t->count, block + 1);
	return 0;
}

uint64_t sd_tokens_epoch_windows(const struct sd_tokens *t, int block)
{
	return block > 0 ? t->count / (uint64_t)block : 0;
}

/* Uniform in [0, bound), bound >= 1, from a PCG32 stream: one draw below
 * 2^32, else 64-bit values by rejection of the top partial range. */
static uint64_t sd_tokens_below(struct sd_rng *r, uint64_t bound)
{
	if (bound <= UINT32_MAX)
		return sd_rng_below(r, (uint32_t)bound);
	uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
	for (;;) {
		uint64_t v = (uint64_t)sd_rng_u32(r) << 32 | sd_rng_u32(r);
		if (v < limit)
			return v % bound;
	}
}

uint64_t sd_tokens_train_start(const struct sd_tokens *t, int block, uint64_t seed,
                               uint64_t epoch, uint64_t index)
{
	/* One PCG32 stream per window (the stream selector is the window's
	 * index) of a seed that the epoch changes, so any worker computes any
	 * window's start without drawing the ones before it.  The constant is
	 * 2^64 / the golden ratio (Knuth's multiplicative hashing), which
	 * spreads consecutive epochs over the seed space. */
	struct sd_rng r;
	sd_rng_seed(&r, seed ^ (epoch + 1) * 0x9E3779B97F4A7C15ULL, index);
	return sd_tokens_below(&r, t->count - (uint64_t)block);
}

uint64_t sd_tokens_eval_windows(const struct sd_tokens *t, int block)
{
	return block > 0 && t->count > 0 ? (t->count - 1) / (uint64_t)block : 0;
}

void sd_tokens_window(const struct sd_tokens *t, uint64_t start, int block, int32_t *x,
                      int32_t *y)
{
	const uint16_t *p = t->tok + start;
	for (int j = 0; j < block; j++) {
		x[j] = p[j];
		y[j] = p[j + 1];
	}
}
