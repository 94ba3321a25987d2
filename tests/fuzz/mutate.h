/* tests/fuzz/mutate.h - what the fuzz targets' plain main() (when not built
 * with libFuzzer) shares: running the target on files named on the command
 * line (reproducers), a splitmix64 generator (Steele, Lea, Flood 2014), so
 * a failure reproduces on every run, and one-step mutations of a JSON-ish
 * input (bit flips, meaningful bytes, truncation, inserted bytes or tokens,
 * duplicated or deleted chunks).
 *
 * The including file declares LLVMFuzzerTestOneInput() and may define,
 * before including this header:
 *   FUZZ_SEED       the generator's start state (uint64): rnd(), rnd_below()
 *   and also
 *   MAX_INPUT       the size of the buffers mutated (bytes)
 *   tokens[], NTOKENS   strings worth inserting for its format:
 *                   mutate_once(), mutate_copy() */
#ifndef SD_TESTS_FUZZ_MUTATE_H
#define SD_TESTS_FUZZ_MUTATE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The whole file in a new buffer (caller frees), or NULL. */
static inline char *fuzz_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	size_t cap = 1 << 16, n = 0, got;
	char *buf = malloc(cap);
	while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
		n += got;
		if (n == cap) {
			char *nb = realloc(buf, cap *= 2);
			if (!nb)
				free(buf);
			buf = nb;
		}
	}
	fclose(f);
	*len = n;
	return buf;
}

/* Runs the target on each file ARGV[1..ARGC-1]; returns 0, or 1 after
 * saying (as PROG) which file could not be read. */
static inline int fuzz_run_files(const char *prog, int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		size_t len = 0;
		char *s = fuzz_read_file(argv[i], &len);
		if (!s) {
			fprintf(stderr, "%s: %s: cannot read\n", prog, argv[i]);
			return 1;
		}
		LLVMFuzzerTestOneInput((const uint8_t *)s, len);
		free(s);
	}
	return 0;
}

#ifdef FUZZ_SEED

static uint64_t rng_state = FUZZ_SEED;

static inline uint64_t rnd(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static inline size_t rnd_below(size_t n)
{
	return n ? (size_t)(rnd() % n) : 0;
}

#ifdef NTOKENS

static const char interesting_bytes[] = "\"{}[]:,\\\n\r\0000-e.+ \t\x7f\x80\xff";

/* Applies one random mutation to buf (len bytes, room for MAX_INPUT);
 * returns the new length. */
static inline size_t mutate_once(char *buf, size_t len)
{
	switch (rnd_below(7)) {
	case 0:   /* flip a bit */
		if (len)
			buf[rnd_below(len)] ^= (char)(1u << rnd_below(8));
		return len;
	case 1:   /* replace a byte, by a random or a meaningful one */
		if (len) {
			size_t at = rnd_below(len);
			buf[at] = rnd_below(2) ? (char)rnd()
			        : interesting_bytes[rnd_below(sizeof interesting_bytes - 1)];
		}
		return len;
	case 2:   /* truncate */
		return rnd_below(len + 1);
	case 3: { /* insert random bytes */
		size_t n = rnd_below(8) + 1, at = rnd_below(len + 1);
		if (len + n > MAX_INPUT)
			return len;
		memmove(buf + at + n, buf + at, len - at);
		for (size_t i = 0; i < n; i++)
			buf[at + i] = (char)rnd();
		return len + n;
	}
	case 4: { /* insert a token */
		const char *t = tokens[rnd_below(NTOKENS)];
		size_t n = strlen(t), at = rnd_below(len + 1);
		if (len + n > MAX_INPUT)
			return len;
		memmove(buf + at + n, buf + at, len - at);
		memcpy(buf + at, t, n);
		return len + n;
	}
	case 5: { /* duplicate a chunk somewhere */
		if (!len)
			return len;
		size_t from = rnd_below(len), n = rnd_below(len - from) + 1, at = rnd_below(len + 1);
		if (len + n > MAX_INPUT)
			return len;
		char tmp[MAX_INPUT];
		memcpy(tmp, buf + from, n);
		memmove(buf + at + n, buf + at, len - at);
		memcpy(buf + at, tmp, n);
		return len + n;
	}
	default: { /* delete a chunk */
		if (!len)
			return len;
		size_t from = rnd_below(len), n = rnd_below(len - from) + 1;
		memmove(buf + from, buf + from + n, len - from - n);
		return len - n;
	}
	}
}

/* Copies seed (len bytes) into buf (room for MAX_INPUT) and applies one to
 * three mutations; returns the new length. */
static inline size_t mutate_copy(char *buf, const char *seed, size_t len)
{
	memcpy(buf, seed, len);
	int rounds = 1 + (int)rnd_below(3);
	for (int k = 0; k < rounds; k++)
		len = mutate_once(buf, len);
	return len;
}

#endif /* NTOKENS */
#endif /* FUZZ_SEED */

#endif
