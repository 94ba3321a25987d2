/* engine/npy.h - a strict reader of NumPy's .npy files (format versions 1.0,
 * 2.0 and 3.0), for datasets users bring as arrays saved with numpy.save.
 *
 * The format (numpy.org/doc/stable/reference/generated/numpy.lib.format.html):
 *   bytes 0-5   magic "\x93NUMPY"
 *   bytes 6-7   major, minor version: 1.0, 2.0 or 3.0
 *   then        header length HLEN: little-endian uint16 (1.0) or uint32
 *               (2.0, 3.0)
 *   then        HLEN bytes: a Python literal dict with exactly the keys
 *               'descr', 'fortran_order' and 'shape', padded with spaces
 *               and ended by '\n' (latin-1 in 1.0 and 2.0, utf-8 in 3.0)
 *   then        the array's data, C order, shape product * itemsize bytes.
 *
 * No Debian package reads .npy from C ("apt-cache search numpy | grep -i dev"
 * lists only libboost-numpy-dev, Boost.Python's bridge into a running
 * Python), so this reader parses the header dict itself, and only as much
 * of Python's literal syntax as numpy.save writes for plain arrays: strings
 * in single or double quotes, True/False, a tuple of non-negative integers.
 * Anything else (structured dtypes, object arrays, other keys) is refused.
 *
 * Accepted dtypes ('descr'): '|u1', '|i1', '<u2', '<i2', '<u4', '<i4',
 * '<u8', '<i8', '<f2', '<f4'.  Big-endian ('>') arrays are refused with a
 * message that says how to convert them (arr.astype('<f4')): numpy.save
 * writes the machine's order, which on every machine spotdeck runs on is
 * little-endian. */
#ifndef SD_ENGINE_NPY_H
#define SD_ENGINE_NPY_H

#include <stddef.h>
#include <stdint.h>

enum sd_npy_dtype {
	SD_NPY_U1, SD_NPY_I1, SD_NPY_U2, SD_NPY_I2, SD_NPY_U4, SD_NPY_I4,
	SD_NPY_U8, SD_NPY_I8, SD_NPY_F2, SD_NPY_F4,
};

/* Arrays of more dimensions than this are refused (datasets need 4). */
#define SD_NPY_MAX_DIMS 8

struct sd_npy_header {
	int version;                    /* 1, 2 or 3 (the major version) */
	enum sd_npy_dtype dtype;
	size_t itemsize;                /* bytes per element: 1, 2, 4 or 8 */
	char descr[8];                  /* as written: "<f4" */
	int ndim;                       /* 0 .. SD_NPY_MAX_DIMS */
	uint64_t shape[SD_NPY_MAX_DIMS];
	uint64_t count;                 /* product of shape (1 for ndim 0) */
	size_t data_offset;             /* bytes from the file's start to the data */
	size_t data_bytes;              /* count * itemsize */
};

/* Parses the .npy file whose first len bytes are buf (the whole file) and
 * checks that the data the header announces is all there and nothing
 * follows it.  path only names the file in messages.  Returns 0, or -1 with
 * *why "PATH: PROBLEM" (wrong magic, unsupported version, header length
 * beyond the file, header not a dict, a missing, repeated or unknown key,
 * bad shape literal, unsupported dtype, Fortran order, truncated data,
 * trailing bytes); the caller frees *why. */
int sd_npy_parse(const void *buf, size_t len, const char *path, struct sd_npy_header *h,
                 char **why);

/* An .npy file mapped read-only: map is the whole file, data points at the
 * array's first byte.  Pages are read when touched, so a worker that reads
 * only its share of the samples reads only their pages. */
struct sd_npy_file {
	struct sd_npy_header h;
	void *map;
	size_t map_len;
	const unsigned char *data;
	char *path;                     /* owned, for messages */
};

/* Opens, maps and parses path.  Returns 0, or -1 with *why naming the file
 * (no such file, not a regular file, or sd_npy_parse's messages); on error
 * f holds nothing. */
int sd_npy_open(struct sd_npy_file *f, const char *path, char **why);
void sd_npy_close(struct sd_npy_file *f);

/* Element i of an integer array as int64 (uint64 values above INT64_MAX
 * come back as -1, which every caller treats as out of range). */
int64_t sd_npy_int_at(const struct sd_npy_header *h, const unsigned char *data, uint64_t i);

/* IEEE 754 binary16 to float, exactly (every half is a float). */
float sd_npy_half_to_float(uint16_t h);

#endif
