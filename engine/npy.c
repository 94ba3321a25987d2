/* engine/npy.c - the .npy header reader and file mapping; see npy.h for the
 * format and what is accepted. */
#include "engine/npy.h"

#include "src/base/errors.h"
#include "src/base/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* "\x93NUMPY" then major and minor version (numpy.lib.format). */
static const unsigned char sd_npy_magic[6] = { 0x93, 'N', 'U', 'M', 'P', 'Y' };

static const struct {
	const char *descr;
	enum sd_npy_dtype dtype;
	size_t itemsize;
} sd_npy_dtypes[] = {
	{ "|u1", SD_NPY_U1, 1 }, { "|i1", SD_NPY_I1, 1 }, { "<u2", SD_NPY_U2, 2 },
	{ "<i2", SD_NPY_I2, 2 }, { "<u4", SD_NPY_U4, 4 }, { "<i4", SD_NPY_I4, 4 },
	{ "<u8", SD_NPY_U8, 8 }, { "<i8", SD_NPY_I8, 8 }, { "<f2", SD_NPY_F2, 2 },
	{ "<f4", SD_NPY_F4, 4 },
};

#define SD_NPY_NDTYPES (sizeof sd_npy_dtypes / sizeof sd_npy_dtypes[0])

/* A position in the header text. */
struct sd_npy_cursor {
	const char *p, *end;
};

/* numpy pads the dict with spaces and ends it with '\n'. */
static void sd_npy_ws(struct sd_npy_cursor *c)
{
	while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
		c->p++;
}

static int sd_npy_eat(struct sd_npy_cursor *c, char ch)
{
	sd_npy_ws(c);
	if (c->p < c->end && *c->p == ch) {
		c->p++;
		return 1;
	}
	return 0;
}

/* What is at c for a message: the next few printable characters. */
static const char *sd_npy_near(const struct sd_npy_cursor *c, char *buf, size_t size)
{
	size_t n = 0;
	const char *p = c->p;
	if (p >= c->end)
		return "the end of the header";
	buf[n++] = '\'';
	while (p < c->end && n + 5 < size && n < 17) {
		unsigned char ch = (unsigned char)*p++;
		buf[n++] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
	}
	if (p < c->end && n + 4 < size) {
		memcpy(buf + n, "...", 3);
		n += 3;
	}
	buf[n++] = '\'';
	buf[n] = '\0';
	return buf;
}

/* Replaces what is not printable ASCII in s by '?', for a message that
 * quotes it (one line, whatever bytes the file held). */
static char *sd_npy_printable(char *s)
{
	for (char *p = s; *p; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
			*p = '?';
	return s;
}

/* A Python string literal in single or double quotes, without escapes
 * (numpy writes none for the keys and dtypes it accepts).  0, or -1 when
 * there is none, it has an escape, or it is longer than size - 1. */
static int sd_npy_string(struct sd_npy_cursor *c, char *out, size_t size)
{
	sd_npy_ws(c);
	if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
		return -1;
	char q = *c->p++;
	size_t n = 0;
	while (c->p < c->end && *c->p != q) {
		if (*c->p == '\\' || n + 1 >= size)
			return -1;
		out[n++] = *c->p++;
	}
	if (c->p >= c->end)
		return -1;
	c->p++;
	out[n] = '\0';
	return 0;
}

/* A tuple of non-negative integers: "()", "(5,)", "(2, 3)", "(2, 3,)".
 * Python 2's long suffix "L" (old numpy files) is accepted. */
static int sd_npy_shape(struct sd_npy_cursor *c, struct sd_npy_header *h)
{
	if (!sd_npy_eat(c, '('))
		return -1;
	h->ndim = 0;
	if (sd_npy_eat(c, ')'))
		return 0;
	for (;;) {
		sd_npy_ws(c);
		if (c->p >= c->end || *c->p < '0' || *c->p > '9')
			return -1;
		uint64_t v = 0;
		while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
			unsigned d = (unsigned)(*c->p++ - '0');
			if (v > (UINT64_MAX - d) / 10)
				return -1;
			v = v * 10 + d;
		}
		if (c->p < c->end && *c->p == 'L')
			c->p++;
		if (h->ndim >= SD_NPY_MAX_DIMS)
			return -2;
		h->shape[h->ndim++] = v;
		if (sd_npy_eat(c, ')'))
			/* "(5)" is the integer 5 in Python, not a tuple. */
			return h->ndim == 1 ? -1 : 0;
		if (!sd_npy_eat(c, ','))
			return -1;
		if (sd_npy_eat(c, ')'))
			return 0;
	}
}

/* The header dict between text and end. */
static int sd_npy_dict(const char *text, const char *end, const char *path,
                       struct sd_npy_header *h, char **why)
{
	struct sd_npy_cursor c = { text, end };
	char near[32], key[32], descr[32];
	int seen_descr = 0, seen_fortran = 0, seen_shape = 0;
	if (memchr(text, '\0', (size_t)(end - text)))
		return sd_why(why, "%s: header: has a NUL byte; not a .npy header", path);
	if (!sd_npy_eat(&c, '{'))
		return sd_why(why, "%s: header: not a dict (starts with %s)", path,
		              sd_npy_near(&c, near, sizeof near));
	for (;;) {
		if (sd_npy_eat(&c, '}'))
			break;
		const char *at = c.p;
		if (sd_npy_string(&c, key, sizeof key) < 0) {
			c.p = at;
			sd_npy_ws(&c);
			return sd_why(why, "%s: header: expected a quoted key or '}', found %s", path,
			              sd_npy_near(&c, near, sizeof near));
		}
		int *seen = !strcmp(key, "descr") ? &seen_descr
		            : !strcmp(key, "fortran_order") ? &seen_fortran
		            : !strcmp(key, "shape") ? &seen_shape : NULL;
		if (!seen)
			return sd_why(why, "%s: header: unknown key '%s' (a .npy header has 'descr', "
			              "'fortran_order' and 'shape')", path, sd_npy_printable(key));
		if (*seen)
			return sd_why(why, "%s: header: key '%s' given twice", path, key);
		*seen = 1;
		if (!sd_npy_eat(&c, ':'))
			return sd_why(why, "%s: header: expected ':' after '%s', found %s", path, key,
			              sd_npy_near(&c, near, sizeof near));
		sd_npy_ws(&c);
		if (!strcmp(key, "descr")) {
			at = c.p;
			if (sd_npy_string(&c, descr, sizeof descr) < 0) {
				c.p = at;
				return sd_why(why, "%s: header: 'descr' is not a plain dtype string (found "
				              "%s); structured and object arrays are not read", path,
				              sd_npy_near(&c, near, sizeof near));
			}
			size_t i = 0;
			while (i < SD_NPY_NDTYPES && strcmp(descr, sd_npy_dtypes[i].descr) != 0)
				i++;
			if (i == SD_NPY_NDTYPES) {
				sd_npy_printable(descr);
				if (descr[0] == '>')
					return sd_why(why, "%s: dtype '%s' is big-endian; convert it with "
					              "arr.astype('<%s') before numpy.save", path, descr,
					              descr + 1);
				return sd_why(why, "%s: unsupported dtype '%s' (read: |u1, |i1, <u2, "
				              "<i2, <u4, <i4, <u8, <i8, <f2, <f4)", path, descr);
			}
			h->dtype = sd_npy_dtypes[i].dtype;
			h->itemsize = sd_npy_dtypes[i].itemsize;
			snprintf(h->descr, sizeof h->descr, "%.7s", descr);
		} else if (!strcmp(key, "fortran_order")) {
			size_t left = (size_t)(c.end - c.p);
			if (left >= 5 && memcmp(c.p, "False", 5) == 0) {
				c.p += 5;
			} else if (left >= 4 && memcmp(c.p, "True", 4) == 0) {
				return sd_why(why, "%s: Fortran order (column-major) data is not read; "
				              "save numpy.ascontiguousarray(arr) instead", path);
			} else {
				return sd_why(why, "%s: header: 'fortran_order' is not True or False "
				              "(found %s)", path, sd_npy_near(&c, near, sizeof near));
			}
		} else {
			at = c.p;
			int rc = sd_npy_shape(&c, h);
			if (rc == -2)
				return sd_why(why, "%s: header: 'shape' has more than %d dimensions", path,
				              SD_NPY_MAX_DIMS);
			if (rc < 0) {
				c.p = at;
				return sd_why(why, "%s: header: bad shape literal %s (expected a tuple of "
				              "non-negative integers such as (60000, 28, 28))", path,
				              sd_npy_near(&c, near, sizeof near));
			}
		}
		if (sd_npy_eat(&c, ','))
			continue;
		if (sd_npy_eat(&c, '}'))
			break;
		return sd_why(why, "%s: header: expected ',' or '}' after '%s', found %s", path, key,
		              sd_npy_near(&c, near, sizeof near));
	}
	sd_npy_ws(&c);
	if (c.p != c.end)
		return sd_why(why, "%s: header: text after the dict: %s", path,
		              sd_npy_near(&c, near, sizeof near));
	const char *missing = !seen_descr ? "descr" : !seen_fortran ? "fortran_order"
	                      : !seen_shape ? "shape" : NULL;
	if (missing)
		return sd_why(why, "%s: header: missing key '%s'", path, missing);
	return 0;
}

int sd_npy_parse(const void *buf, size_t len, const char *path, struct sd_npy_header *out,
                 char **why)
{
	const unsigned char *b = buf;
	struct sd_npy_header h;
	memset(&h, 0, sizeof h);
	memset(out, 0, sizeof *out);
	size_t m = len < sizeof sd_npy_magic ? len : sizeof sd_npy_magic;
	if (m > 0 && memcmp(b, sd_npy_magic, m) != 0)
		return sd_why(why, "%s: wrong magic: not a .npy file (those start with \"\\x93NUMPY\")",
		              path);
	if (len < 8)
		return sd_why(why, "%s: truncated: %zu bytes, shorter than the .npy magic and "
		              "version", path, len);
	unsigned major = b[6], minor = b[7];
	if (!(major >= 1 && major <= 3) || minor != 0)
		return sd_why(why, "%s: unsupported .npy format version %u.%u (1.0, 2.0 and 3.0 are "
		              "read)", path, major, minor);
	h.version = (int)major;
	size_t prefix = major == 1 ? 10 : 12;
	if (len < prefix)
		return sd_why(why, "%s: truncated: %zu bytes, shorter than the %zu-byte preamble of "
		              "a version %u.0 file", path, len, prefix, major);
	uint64_t hlen = major == 1 ? (uint64_t)b[8] | (uint64_t)b[9] << 8
	                : (uint64_t)b[8] | (uint64_t)b[9] << 8 | (uint64_t)b[10] << 16 |
	                  (uint64_t)b[11] << 24;
	if (hlen > len - prefix)
		return sd_why(why, "%s: header length %llu runs past the end of the file (%zu bytes)",
		              path, (unsigned long long)hlen, len);
	h.data_offset = prefix + (size_t)hlen;
	if (sd_npy_dict((const char *)b + prefix, (const char *)b + h.data_offset, path, &h,
	                why) < 0)
		return -1;
	uint64_t count = 1;
	for (int i = 0; i < h.ndim; i++) {
		if (h.shape[i] != 0 && count > UINT64_MAX / h.shape[i])
			return sd_why(why, "%s: shape's element count overflows", path);
		count *= h.shape[i];
	}
	size_t avail = len - h.data_offset;
	if (count > avail / h.itemsize) {
		char shape[160];
		size_t n = 0;
		for (int i = 0; i < h.ndim && n < sizeof shape; i++)
			n += (size_t)snprintf(shape + n, sizeof shape - n, "%s%llu", i ? ", " : "",
			                      (unsigned long long)h.shape[i]);
		if (h.ndim == 0)
			shape[0] = '\0';
		else if (h.ndim == 1 && n + 1 < sizeof shape)
			snprintf(shape + n, sizeof shape - n, ",");   /* Python's 1-tuple */
		return sd_why(why, "%s: truncated: shape (%s) of %s needs %llu bytes of data, the "
		              "file has %zu", path, shape, h.descr,
		              (unsigned long long)count * (unsigned long long)h.itemsize, avail);
	}
	h.count = count;
	h.data_bytes = (size_t)count * h.itemsize;
	if (avail != h.data_bytes)
		return sd_why(why, "%s: %zu bytes after the %zu bytes of data the header announces",
		              path, avail - h.data_bytes, h.data_bytes);
	*out = h;
	return 0;
}

void sd_npy_close(struct sd_npy_file *f)
{
	if (!f)
		return;
	if (f->map && f->map_len)
		munmap(f->map, f->map_len);
	free(f->path);
	memset(f, 0, sizeof *f);
}

int sd_npy_open(struct sd_npy_file *f, const char *path, char **why)
{
	memset(f, 0, sizeof *f);
	void *map;
	size_t len;
	if (sd_map_file(path, &map, &len, why) < 0)
		return -1;
	if (sd_npy_parse(map, len, path, &f->h, why) < 0) {
		if (map)
			munmap(map, len);
		return -1;
	}
	f->map = map;
	f->map_len = len;
	f->data = (const unsigned char *)map + f->h.data_offset;
	f->path = strdup(path);
	if (!f->path)
		sd_oom();
	return 0;
}

int64_t sd_npy_int_at(const struct sd_npy_header *h, const unsigned char *data, uint64_t i)
{
	const unsigned char *p = data + i * h->itemsize;
	uint64_t u = 0;
	/* Little-endian by construction (npy.h), whatever the host's order. */
	for (size_t k = 0; k < h->itemsize; k++)
		u |= (uint64_t)p[k] << (8 * k);
	switch (h->dtype) {
	case SD_NPY_U1: case SD_NPY_U2: case SD_NPY_U4:
		return (int64_t)u;
	case SD_NPY_U8:
		return u > (uint64_t)INT64_MAX ? -1 : (int64_t)u;
	case SD_NPY_I1:
		return (int8_t)(uint8_t)u;
	case SD_NPY_I2:
		return (int16_t)(uint16_t)u;
	case SD_NPY_I4:
		return (int32_t)(uint32_t)u;
	case SD_NPY_I8:
		return (int64_t)u;
	case SD_NPY_F2: case SD_NPY_F4:
		break;
	}
	return -1;
}

float sd_npy_half_to_float(uint16_t x)
{
	uint32_t sign = (uint32_t)(x >> 15) << 31;
	uint32_t exp = (x >> 10) & 0x1f, mant = x & 0x3ffu;
	uint32_t bits;
	if (exp == 0x1f) {
		bits = sign | 0x7f800000u | mant << 13;            /* inf, NaN */
	} else if (exp != 0) {
		bits = sign | (exp + 112) << 23 | mant << 13;      /* normal: rebias 15 -> 127 */
	} else if (mant == 0) {
		bits = sign;                                       /* zero */
	} else {
		/* Subnormal half: normalise the mantissa into a normal float. */
		int e = 113;
		while (!(mant & 0x400u)) {
			mant <<= 1;
			e--;
		}
		bits = sign | (uint32_t)e << 23 | (mant & 0x3ffu) << 13;
	}
	float f;
	memcpy(&f, &bits, sizeof f);
	return f;
}
