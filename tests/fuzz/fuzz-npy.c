/* tests/fuzz/fuzz-npy.c - fuzzes the .npy header reader (engine/npy.c) and
 * checks what it does with each input:
 *   - refused: one line that starts with the file name, and the header
 *     struct left zeroed;
 *   - accepted: a version of 1 to 3, a dtype of the accepted list with its
 *     item size, at most SD_NPY_MAX_DIMS dimensions whose product is the
 *     element count, the data offset the preamble announces, and data that
 *     ends exactly at the end of the input; every element of the array is
 *     then read (integers through sd_npy_int_at, halves through
 *     sd_npy_half_to_float), so a bound the parser got wrong is a read past
 *     the buffer that ASan reports.
 *
 * With libFuzzer:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -DSD_LIBFUZZER -D_GNU_SOURCE -I. \
 *     tests/fuzz/fuzz-npy.c engine/npy.c src/base/errors.c -o fuzz-npy
 * Without it (as `make check` builds it) main() runs the files named on the
 * command line, or, with none, a built-in corpus of valid .npy files
 * (versions 1.0, 2.0 and 3.0, several dtypes and shapes, built as numpy.save
 * lays them out) with 20,000 deterministic mutations each. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/npy.h"
#include "tests/check.h"
#include "tests/engine/npy-write.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static long n_accepted;

static const char *const accepted_descrs[] = {
	"|u1", "|i1", "<u2", "<i2", "<u4", "<i4", "<u8", "<i8", "<f2", "<f4",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sd_npy_header h;
	char *why = NULL;
	/* A copy of exactly size bytes, so ASan sees any read beyond it. */
	uint8_t *copy = malloc(size ? size : 1);
	FUZZ_ASSERT(copy != NULL);
	if (size)
		memcpy(copy, data, size);
	int rc = sd_npy_parse(copy, size, "fuzz.npy", &h, &why);
	if (rc != 0) {
		FUZZ_ASSERT(rc == -1);
		FUZZ_ASSERT(why != NULL && strncmp(why, "fuzz.npy: ", 10) == 0);
		if (strchr(why, '\n') || strlen(why) >= 400)
			fprintf(stderr, "fuzz-npy: message [%s]\n", why);
		FUZZ_ASSERT(strchr(why, '\n') == NULL && strlen(why) < 400);
		FUZZ_ASSERT(h.count == 0 && h.ndim == 0 && h.data_offset == 0);
		free(why);
		free(copy);
		return 0;
	}
	FUZZ_ASSERT(why == NULL);
	n_accepted++;
	FUZZ_ASSERT(h.version >= 1 && h.version <= 3 && copy[6] == h.version && copy[7] == 0);
	size_t prefix = h.version == 1 ? 10 : 12;
	size_t hlen = h.version == 1 ? (size_t)copy[8] | (size_t)copy[9] << 8
	              : (size_t)copy[8] | (size_t)copy[9] << 8 | (size_t)copy[10] << 16 |
	                (size_t)copy[11] << 24;
	FUZZ_ASSERT(h.data_offset == prefix + hlen);
	int known = 0;
	for (size_t i = 0; i < sizeof accepted_descrs / sizeof accepted_descrs[0]; i++)
		known |= strcmp(h.descr, accepted_descrs[i]) == 0;
	FUZZ_ASSERT(known);
	FUZZ_ASSERT(h.itemsize == (size_t)(h.descr[2] - '0'));
	FUZZ_ASSERT(h.ndim >= 0 && h.ndim <= SD_NPY_MAX_DIMS);
	uint64_t count = 1;
	for (int i = 0; i < h.ndim; i++)
		count *= h.shape[i];
	FUZZ_ASSERT(count == h.count);
	FUZZ_ASSERT(h.data_bytes == h.count * h.itemsize);
	FUZZ_ASSERT(h.data_offset + h.data_bytes == size);
	const unsigned char *d = copy + h.data_offset;
	volatile double sink = 0;
	for (uint64_t i = 0; i < h.count; i++) {
		if (h.dtype == SD_NPY_F2)
			sink += sd_npy_half_to_float((uint16_t)(d[2 * i] | d[2 * i + 1] << 8));
		else if (h.dtype == SD_NPY_F4)
			sink += d[4 * i + 3];
		else
			sink += (double)sd_npy_int_at(&h, d, i);
	}
	(void)sink;
	free(copy);
	return 0;
}

#ifndef SD_LIBFUZZER

/* ---- the built-in driver ---- */

#define MUTATIONS 20000
#define MAX_INPUT 4096

#define FUZZ_SEED 0x6e7079f022ull

static const char *const tokens[] = {
	"\x93NUMPY", "\x01\x00", "\x02\x00", "\x03\x00", "{", "}", "(", ")", ",", ":", "'", "\"",
	" ", "\n", "L", "'descr'", "'fortran_order'", "'shape'", "True", "False", "'<f4'", "'|u1'",
	"'<f8'", "'>i4'", "'<U3'", "[('a', '<f4')]", "0", "18446744073709551615",
	"18446744073709551616", "4294967296", "(65536, 65536, 65536, 65536)", "(,)", "()",
	"\xff\xff", "\xff\xff\xff\xff", "\x80", "\xc3\xa9",
};

#define NTOKENS (sizeof tokens / sizeof tokens[0])

#include "tests/fuzz/mutate.h"

int main(int argc, char **argv)
{
	if (argc > 1)
		return fuzz_run_files("fuzz-npy", argc, argv);
	/* The corpus, built as numpy.save writes files (tests/engine/npy-write.h). */
	static const struct {
		int version;
		const char *descr, *shape;
		size_t bytes;
	} seeds[] = {
		{ 1, "|u1", "3, 2, 2", 12 }, { 2, "<f4", "2, 1, 2, 2", 32 }, { 3, "<f2", "4, 3", 24 },
		{ 1, "<i8", "5,", 40 }, { 2, "<u2", "", 2 }, { 3, "|i1", "2, 2, 2, 1, 1", 8 },
		{ 1, "<u4", "0, 7", 0 }, { 1, "<i4", "3,", 12 },
	};
	size_t nseeds = sizeof seeds / sizeof seeds[0];
	char *buf = malloc(MAX_INPUT);
	if (!buf)
		return 99;
	long runs = 0;
	for (size_t c = 0; c < nseeds; c++) {
		unsigned char payload[64];
		for (size_t i = 0; i < sizeof payload; i++)
			payload[i] = (unsigned char)(i * 29 + c);
		size_t base;
		unsigned char *seed = npy_build(seeds[c].version, seeds[c].descr, seeds[c].shape,
		                                payload, seeds[c].bytes, &base);
		/* Unmutated, every file of the corpus is valid. */
		long before = n_accepted;
		LLVMFuzzerTestOneInput(seed, base);
		if (n_accepted != before + 1) {
			fprintf(stderr, "fuzz-npy: corpus entry %zu refused\n", c);
			return 1;
		}
		for (int m = 0; m < MUTATIONS; m++) {
			size_t len = mutate_copy(buf, (const char *)seed, base);
			LLVMFuzzerTestOneInput((const uint8_t *)buf, len);
			runs++;
		}
		free(seed);
	}
	free(buf);
	printf("fuzz-npy: %ld mutated inputs (%ld accepted), no crash, invariants held\n", runs,
	       n_accepted - (long)nseeds);
	return 0;
}

#endif
