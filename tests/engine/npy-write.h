/* tests/engine/npy-write.h - builds .npy files in memory, as numpy.save lays them out
 * (numpy.org/doc/stable/reference/generated/numpy.lib.format.html): magic
 * "\x93NUMPY", version, little-endian header length (uint16 in 1.0, uint32
 * in 2.0 and 3.0), the dict padded with spaces and ended by '\n' so that the
 * data starts at a multiple of 64 bytes, then the data.  Header only; used by
 * tests/engine/test-npy.c and tests/fuzz/fuzz-npy.c. */
#ifndef SD_TESTS_NPY_WRITE_H
#define SD_TESTS_NPY_WRITE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A new buffer (caller frees) of *len bytes: a version-VERSION .npy file
 * whose header dict is DICT verbatim (e.g. "{'descr': '<f4',
 * 'fortran_order': False, 'shape': (2, 3), }") and whose data is DATA. */
static inline unsigned char *npy_build_raw(int version, const char *dict, const void *data,
                                           size_t data_len, size_t *len)
{
	size_t prefix = version == 1 ? 10 : 12;
	size_t dlen = strlen(dict);
	size_t total = prefix + dlen + 1;
	size_t padded = (total + 63) / 64 * 64;
	size_t hlen = padded - prefix;
	unsigned char *b = malloc(padded + data_len + 1);
	memcpy(b, "\x93NUMPY", 6);
	b[6] = (unsigned char)version;
	b[7] = 0;
	b[8] = (unsigned char)(hlen & 0xff);
	b[9] = (unsigned char)(hlen >> 8 & 0xff);
	if (version != 1) {
		b[10] = (unsigned char)(hlen >> 16 & 0xff);
		b[11] = (unsigned char)(hlen >> 24 & 0xff);
	}
	memcpy(b + prefix, dict, dlen);
	memset(b + prefix + dlen, ' ', padded - prefix - dlen);
	b[padded - 1] = '\n';
	if (data_len)
		memcpy(b + padded, data, data_len);
	*len = padded + data_len;
	return b;
}

/* The dict numpy writes for DESCR and SHAPE (a tuple literal's inside,
 * e.g. "2, 3" or "5,"). */
static inline unsigned char *npy_build(int version, const char *descr, const char *shape,
                                       const void *data, size_t data_len, size_t *len)
{
	char dict[256];
	snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }",
	         descr, shape);
	return npy_build_raw(version, dict, data, data_len, len);
}

#endif
