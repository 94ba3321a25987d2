/* engine/data.c - dataset loaders (IDX, CIFAR-10 binary, synthetic, npy),
 * the per-epoch shuffle, sample gathering and augmentation.  See data.h for
 * the formats. */
#include "engine/data.h"

#include "src/base/errors.h"
#include "src/base/rng.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <zlib.h>

/* Normalisation constants: mean and standard deviation of pixel / 255 over
 * each dataset's training set, one pair per channel.
 *   Fashion-MNIST 0.2860 / 0.3530: computed over the 60000 training images of
 *     Zalando's release (github.com/zalandoresearch/fashion-mnist);
 *     tests/engine/test-data.c re-checks them against the installed files.
 *   MNIST 0.1307 / 0.3081: the training-set values used by PyTorch's
 *     reference example (github.com/pytorch/examples, mnist/main.py).
 *   CIFAR-10 (0.4914, 0.4822, 0.4465) / (0.2470, 0.2435, 0.2616): per-channel
 *     population statistics of the 50000 training images (R, G, B).  Some
 *     code uses std (0.2023, 0.1994, 0.2010), which is the mean of per-image
 *     stds, not the dataset's std. */
struct sd_norm {
	int channels;
	float mean[3];
	float std[3];
};

static const struct sd_norm sd_norm_fashion = { 1, { 0.2860f }, { 0.3530f } };
static const struct sd_norm sd_norm_mnist = { 1, { 0.1307f }, { 0.3081f } };
static const struct sd_norm sd_norm_cifar10 = {
	3, { 0.4914f, 0.4822f, 0.4465f }, { 0.2470f, 0.2435f, 0.2616f }
};

/* IDX magic numbers: 0x00 0x00, type 0x08 (unsigned byte), number of
 * dimensions (LeCun et al., yann.lecun.com/exdb/mnist, "THE IDX FILE FORMAT"). */
#define SD_IDX_MAGIC_IMAGES 2051u
#define SD_IDX_MAGIC_LABELS 2049u

/* CIFAR-10 binary: every file holds exactly 10000 records of one label byte
 * and 3 * 32 * 32 pixel bytes (cs.toronto.edu/~kriz/cifar.html). */
#define SD_CIFAR_RECORD 3073
#define SD_CIFAR_RECORDS_PER_FILE 10000
#define SD_CIFAR_PIXELS 3072

/* Upper bound on samples in any file, so a corrupt header cannot make us
 * allocate absurd amounts before we notice the data is not there. */
#define SD_MAX_SAMPLES (1 << 24)

/* Read chunk for the gzip stream; large chunks keep zlib's inner loop busy
 * instead of the call overhead. */
#define SD_READ_CHUNK (1u << 20)

const char *sd_dataset_default_dir(const char *name)
{
	if (name && strcmp(name, "fashion-mnist") == 0)
		return "/usr/share/datasets/fashion-mnist";
	return NULL;
}

void sd_dataset_free(struct sd_dataset *ds)
{
	if (!ds)
		return;
	free(ds->images);
	free(ds->labels);
	if (ds->src) {
		sd_npy_close(&ds->src->x);
		free(ds->src);
	}
	memset(ds, 0, sizeof *ds);
}

/* Fills a 256-entry table per channel so decoding is a lookup per pixel. */
static void sd_norm_table(const struct sd_norm *norm, float table[3][256])
{
	for (int ch = 0; ch < norm->channels; ch++)
		for (int p = 0; p < 256; p++)
			table[ch][p] = ((float)p / 255.0f - norm->mean[ch]) / norm->std[ch];
}

/* Checks that dir exists and is a directory; the hint tells the user how to
 * get the data, which for fashion-mnist is a Debian package. */
static int sd_check_dir(const char *name, const char *dir, char **why)
{
	struct stat st;
	if (stat(dir, &st) != 0) {
		if (errno == ENOENT && strcmp(name, "fashion-mnist") == 0)
			return sd_why(why, "%s: no such directory (install the Debian package "
			              "dataset-fashion-mnist, or give another data directory: spotdeck-worker --data-dir, or data_dir in the job file)", dir);
		if (errno == ENOENT)
			return sd_why(why, "%s: no such directory (data_dir in the job file, or spotdeck-worker --data-dir)", dir);
		return sd_why(why, "%s: %s", dir, strerror(errno));
	}
	if (!S_ISDIR(st.st_mode))
		return sd_why(why, "%s: not a directory", dir);
	return 0;
}

static char *sd_path_join(const char *dir, const char *file, const char *suffix)
{
	size_t len = strlen(dir) + 1 + strlen(file) + strlen(suffix) + 1;
	char *path = sd_malloc(len);
	snprintf(path, len, "%s/%s%s", dir, file, suffix);
	return path;
}

/* An open IDX file: the gzip handle (which also reads plain files) and the
 * path we report in messages. */
struct sd_idx {
	gzFile gz;
	char *path;
};

static void sd_idx_close(struct sd_idx *f)
{
	if (f->gz)
		gzclose(f->gz);
	free(f->path);
	f->gz = NULL;
	f->path = NULL;
}

/* Opens dir/base.gz, or dir/base when the .gz file does not exist, so both
 * the distributed files and hand-decompressed ones work. */
static int sd_idx_open(struct sd_idx *f, const char *dir, const char *base, char **why)
{
	struct stat st;
	f->gz = NULL;
	f->path = sd_path_join(dir, base, ".gz");
	if (stat(f->path, &st) != 0 && errno == ENOENT) {
		char *plain = sd_path_join(dir, base, "");
		if (stat(plain, &st) != 0 && errno == ENOENT) {
			sd_why(why, "%s: no such file (nor %s)", f->path, plain);
			free(plain);
			sd_idx_close(f);
			return -1;
		}
		free(f->path);
		f->path = plain;
	}
	errno = 0;
	f->gz = gzopen(f->path, "rb");
	if (!f->gz) {
		int e = errno;
		sd_why(why, "%s: cannot open: %s", f->path, e ? strerror(e) : "out of memory");
		sd_idx_close(f);
		return -1;
	}
	/* A bigger input buffer than zlib's 8 KiB default halves the syscalls. */
	gzbuffer(f->gz, 256 * 1024);
	return 0;
}

/* Reads up to len bytes, looping over gzread's int-sized calls.  Returns the
 * count read, or -1 with *why set when zlib reports a real error (a stream
 * cut short is not an error here: the caller sees the short count and
 * reports the truncation with the numbers). */
static long long sd_idx_read(struct sd_idx *f, void *buf, size_t len, char **why)
{
	size_t done = 0;
	while (done < len) {
		size_t want = len - done;
		if (want > SD_READ_CHUNK)
			want = SD_READ_CHUNK;
		int got = gzread(f->gz, (unsigned char *)buf + done, (unsigned)want);
		if (got < 0) {
			int code;
			const char *msg = gzerror(f->gz, &code);
			if (code == Z_ERRNO)
				return sd_why(why, "%s: read error: %s", f->path, strerror(errno));
			/* zlib prefixes the message with the path; we add our own. */
			size_t plen = strlen(f->path);
			if (msg && strncmp(msg, f->path, plen) == 0 && strncmp(msg + plen, ": ", 2) == 0)
				msg += plen + 2;
			return sd_why(why, "%s: gzip error: %s", f->path, msg ? msg : "unknown");
		}
		if (got == 0)
			break;
		done += (size_t)got;
	}
	return (long long)done;
}

static uint32_t sd_be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Reads exactly len bytes that the header promised, then checks that the
 * file ends there.  what names the data in the message ("image data"). */
static int sd_idx_read_body(struct sd_idx *f, unsigned char *buf, size_t len,
                            const char *what, char **why)
{
	long long got = sd_idx_read(f, buf, len, why);
	if (got < 0)
		return -1;
	if ((size_t)got < len) {
		int code;
		gzerror(f->gz, &code);
		/* Z_BUF_ERROR: the gzip stream itself was cut off. */
		return sd_why(why, "%s: truncated: expected %zu bytes of %s, got %lld%s", f->path,
		              len, what, got, code == Z_BUF_ERROR ? " (gzip stream cut off)" : "");
	}
	unsigned char extra;
	got = sd_idx_read(f, &extra, 1, why);
	if (got < 0)
		return -1;
	if (got > 0)
		return sd_why(why, "%s: trailing data after the %zu bytes of %s the header "
		              "announces", f->path, len, what);
	return 0;
}

/* Reads and checks an IDX header: magic, then ndims big-endian u32 sizes. */
static int sd_idx_header(struct sd_idx *f, uint32_t magic, int ndims, uint32_t *dims,
                         char **why)
{
	unsigned char head[16];
	size_t len = 4 + 4 * (size_t)ndims;
	long long got = sd_idx_read(f, head, len, why);
	if (got < 0)
		return -1;
	int code;
	gzerror(f->gz, &code);
	const char *cut = code == Z_BUF_ERROR ? " (gzip stream cut off)" : "";
	if (got < 4)
		return sd_why(why, "%s: truncated: %lld bytes, shorter than the IDX magic%s",
		              f->path, got, cut);
	uint32_t m = sd_be32(head);
	if (m != magic)
		return sd_why(why, "%s: wrong magic 0x%08x, expected 0x%08x (IDX %s file)",
		              f->path, m, magic, ndims == 3 ? "image" : "label");
	if ((size_t)got < len)
		return sd_why(why, "%s: truncated: expected a %zu-byte header, got %lld bytes%s",
		              f->path, len, got, cut);
	for (int i = 0; i < ndims; i++)
		dims[i] = sd_be32(head + 4 + 4 * i);
	return 0;
}

/* Loads one IDX image file and its label file (MNIST layout). */
static int sd_load_idx(struct sd_dataset *ds, const char *dir, enum sd_split split,
                       const struct sd_norm *norm, char **why)
{
	const char *img_base = split == SD_SPLIT_TRAIN ? "train-images-idx3-ubyte"
	                                                : "t10k-images-idx3-ubyte";
	const char *lab_base = split == SD_SPLIT_TRAIN ? "train-labels-idx1-ubyte"
	                                                : "t10k-labels-idx1-ubyte";
	struct sd_idx img = { 0 }, lab = { 0 };
	unsigned char *raw = NULL;
	uint32_t idims[3], ldims[1];
	int rc = -1;

	if (sd_idx_open(&img, dir, img_base, why) < 0)
		goto out;
	if (sd_idx_open(&lab, dir, lab_base, why) < 0)
		goto out;
	if (sd_idx_header(&img, SD_IDX_MAGIC_IMAGES, 3, idims, why) < 0)
		goto out;
	if (sd_idx_header(&lab, SD_IDX_MAGIC_LABELS, 1, ldims, why) < 0)
		goto out;
	/* Both datasets are 28x28; anything else is a different file. */
	if (idims[1] != 28 || idims[2] != 28) {
		sd_why(why, "%s: wrong dimensions %ux%u, expected 28x28", img.path,
		       idims[1], idims[2]);
		goto out;
	}
	if (idims[0] == 0 || idims[0] > SD_MAX_SAMPLES) {
		sd_why(why, "%s: implausible image count %u", img.path, idims[0]);
		goto out;
	}
	if (ldims[0] != idims[0]) {
		sd_why(why, "%s: %u labels, but %s has %u images", lab.path, ldims[0],
		       img.path, idims[0]);
		goto out;
	}

	size_t n = idims[0];
	size_t pixels = (size_t)idims[1] * idims[2];
	raw = sd_malloc(n * pixels);
	if (sd_idx_read_body(&img, raw, n * pixels, "image data", why) < 0)
		goto out;
	ds->labels = sd_malloc(n);
	if (sd_idx_read_body(&lab, ds->labels, n, "label data", why) < 0)
		goto out;
	for (size_t i = 0; i < n; i++) {
		if (ds->labels[i] >= 10) {
			sd_why(why, "%s: label %u of sample %zu out of range (10 classes)",
			       lab.path, ds->labels[i], i);
			goto out;
		}
	}

	float table[3][256];
	sd_norm_table(norm, table);
	ds->images = sd_malloc(n * pixels * sizeof(float));
	for (size_t i = 0; i < n * pixels; i++)
		ds->images[i] = table[0][raw[i]];
	ds->pad[0] = table[0][0];
	ds->n = (int)n;
	ds->c = 1;
	ds->h = (int)idims[1];
	ds->w = (int)idims[2];
	ds->classes = 10;
	rc = 0;
out:
	free(raw);
	sd_idx_close(&img);
	sd_idx_close(&lab);
	return rc;
}

/* Reads one CIFAR-10 binary file of exactly 10000 records into images and
 * labels starting at sample first. */
static int sd_load_cifar_file(struct sd_dataset *ds, const char *path, size_t first,
                              const float table[3][256], char **why)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		if (errno == ENOENT)
			return sd_why(why, "%s: no such file", path);
		return sd_why(why, "%s: cannot open: %s", path, strerror(errno));
	}
	struct stat st;
	if (fstat(fileno(f), &st) != 0) {
		int e = errno;
		fclose(f);
		return sd_why(why, "%s: cannot stat: %s", path, strerror(e));
	}
	if (!S_ISREG(st.st_mode)) {
		fclose(f);
		return sd_why(why, "%s: not a regular file", path);
	}
	long long size = (long long)st.st_size;
	long long want = (long long)SD_CIFAR_RECORD * SD_CIFAR_RECORDS_PER_FILE;
	if (size % SD_CIFAR_RECORD != 0) {
		fclose(f);
		return sd_why(why, "%s: wrong length: %lld bytes is not a multiple of the "
		              "%d-byte record", path, size, SD_CIFAR_RECORD);
	}
	if (size != want) {
		fclose(f);
		return sd_why(why, "%s: wrong length: %lld records, expected %d", path,
		              size / SD_CIFAR_RECORD, SD_CIFAR_RECORDS_PER_FILE);
	}

	unsigned char *raw = sd_malloc((size_t)want);
	size_t got = fread(raw, 1, (size_t)want, f);
	int err = ferror(f) ? errno : 0;
	fclose(f);
	if (got != (size_t)want) {
		free(raw);
		if (err)
			return sd_why(why, "%s: read error: %s", path, strerror(err));
		return sd_why(why, "%s: truncated: expected %lld bytes, got %zu (file shrank "
		              "while reading)", path, want, got);
	}
	for (size_t r = 0; r < SD_CIFAR_RECORDS_PER_FILE; r++) {
		const unsigned char *rec = raw + r * SD_CIFAR_RECORD;
		if (rec[0] >= 10) {
			unsigned label = rec[0];
			free(raw);
			return sd_why(why, "%s: label %u of record %zu out of range (10 classes)",
			              path, label, r);
		}
		ds->labels[first + r] = rec[0];
		/* The record's pixels are already R, G, B planes: NCHW as is. */
		float *dst = ds->images + (first + r) * SD_CIFAR_PIXELS;
		for (int ch = 0; ch < 3; ch++)
			for (int p = 0; p < 1024; p++)
				dst[ch * 1024 + p] = table[ch][rec[1 + ch * 1024 + p]];
	}
	free(raw);
	return 0;
}

/* Where a CIFAR-10 split's files are: the official tarball unpacks into
 * cifar-10-batches-bin/, so the directory above it is accepted too (dir
 * itself when it holds first, or has no such subdirectory).  Malloc'd. */
static char *sd_cifar_base(const char *dir, const char *first)
{
	char *sub = sd_path_join(dir, "cifar-10-batches-bin", "");
	char *probe = sd_path_join(dir, first, "");
	struct stat st;
	int in_sub = stat(probe, &st) != 0 && stat(sub, &st) == 0 && S_ISDIR(st.st_mode);
	free(probe);
	if (in_sub)
		return sub;
	free(sub);
	char *copy = sd_malloc(strlen(dir) + 1);
	return strcpy(copy, dir);
}

static int sd_load_cifar10(struct sd_dataset *ds, const char *dir, enum sd_split split,
                           char **why)
{
	static const char *const train[] = {
		"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
		"data_batch_4.bin", "data_batch_5.bin",
	};
	static const char *const test[] = { "test_batch.bin" };
	const char *const *files = split == SD_SPLIT_TRAIN ? train : test;
	int nfiles = split == SD_SPLIT_TRAIN ? 5 : 1;

	char *base = sd_cifar_base(dir, files[0]);

	size_t n = (size_t)nfiles * SD_CIFAR_RECORDS_PER_FILE;
	ds->images = sd_malloc(n * SD_CIFAR_PIXELS * sizeof(float));
	ds->labels = sd_malloc(n);
	float table[3][256];
	sd_norm_table(&sd_norm_cifar10, table);
	for (int ch = 0; ch < 3; ch++)
		ds->pad[ch] = table[ch][0];
	for (int i = 0; i < nfiles; i++) {
		char *path = sd_path_join(base, files[i], "");
		int rc = sd_load_cifar_file(ds, path, (size_t)i * SD_CIFAR_RECORDS_PER_FILE,
		                            table, why);
		free(path);
		if (rc < 0) {
			free(base);
			return -1;
		}
	}
	free(base);
	ds->n = (int)n;
	ds->c = 3;
	ds->h = 32;
	ds->w = 32;
	ds->classes = 10;
	return 0;
}

/* Opens one IDX file of dir and reads its header (sd_idx_header). */
static int sd_idx_check(const char *dir, const char *base, uint32_t magic, int ndims, char **why)
{
	struct sd_idx f = { 0 };
	uint32_t dims[3];
	int rc = sd_idx_open(&f, dir, base, why);
	if (rc == 0)
		rc = sd_idx_header(&f, magic, ndims, dims, why);
	if (rc == 0 && ndims == 3 && (dims[1] != 28 || dims[2] != 28))
		rc = sd_why(why, "%s: wrong dimensions %ux%u, expected 28x28", f.path, dims[1], dims[2]);
	sd_idx_close(&f);
	return rc;
}

int sd_dataset_check(const char *name, const char *dir, char **why)
{
	if (!name || (strcmp(name, "fashion-mnist") && strcmp(name, "mnist") && strcmp(name, "cifar10")))
		return 0;
	if (!dir || !dir[0])
		dir = sd_dataset_default_dir(name);
	if (!dir)
		return sd_why(why, "%s: no default data directory; pass --data-dir", name);
	if (sd_check_dir(name, dir, why) < 0)
		return -1;
	if (strcmp(name, "cifar10") != 0) {
		static const char *const base[4] = { "train-images-idx3-ubyte", "train-labels-idx1-ubyte",
		                                     "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte" };
		for (int i = 0; i < 4; i++)
			if (sd_idx_check(dir, base[i], i % 2 ? SD_IDX_MAGIC_LABELS : SD_IDX_MAGIC_IMAGES,
			                 i % 2 ? 1 : 3, why) < 0)
				return -1;
		return 0;
	}
	static const char *const files[6] = { "data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
	                                      "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin" };
	char *base = sd_cifar_base(dir, files[0]);
	struct stat st;
	int rc = 0;
	for (int i = 0; i < 6 && rc == 0; i++) {
		char *path = sd_path_join(base, files[i], "");
		long long want = (long long)SD_CIFAR_RECORD * SD_CIFAR_RECORDS_PER_FILE;
		if (stat(path, &st) != 0)
			rc = sd_why(why, "%s: %s", path, strerror(errno));
		else if ((long long)st.st_size != want)
			rc = sd_why(why, "%s: %lld bytes, expected %lld (10000 records of %d bytes)", path,
			            (long long)st.st_size, want, SD_CIFAR_RECORD);
		free(path);
	}
	free(base);
	return rc;
}

int sd_dataset_load(struct sd_dataset *ds, const char *name, const char *dir,
                    enum sd_split split, char **why)
{
	memset(ds, 0, sizeof *ds);
	if (!name)
		return sd_why(why, "no dataset name given");
	if (split != SD_SPLIT_TRAIN && split != SD_SPLIT_TEST)
		return sd_why(why, "%s: unknown split %d", name, (int)split);

	const struct sd_norm *norm = NULL;
	int cifar = 0;
	if (strcmp(name, "fashion-mnist") == 0)
		norm = &sd_norm_fashion;
	else if (strcmp(name, "mnist") == 0)
		norm = &sd_norm_mnist;
	else if (strcmp(name, "cifar10") == 0)
		cifar = 1;
	else if (strcmp(name, "synthetic") == 0)
		return sd_why(why, "synthetic: has no files; it is generated from the seed");
	else if (strcmp(name, "npy") == 0)
		return sd_why(why, "npy: both splits load together (sd_dataset_load_npy)");
	else
		return sd_why(why, "%s: unknown dataset (fashion-mnist, mnist, cifar10, "
		              "synthetic, npy)", name);

	if (!dir)
		dir = sd_dataset_default_dir(name);
	if (!dir)
		return sd_why(why, "%s: no default data directory; pass --data-dir", name);
	if (sd_check_dir(name, dir, why) < 0)
		return -1;

	int rc = cifar ? sd_load_cifar10(ds, dir, split, why)
	               : sd_load_idx(ds, dir, split, norm, why);
	if (rc < 0) {
		sd_dataset_free(ds);
		return -1;
	}
	snprintf(ds->name, sizeof ds->name, "%s", name);
	return 0;
}

int sd_dataset_synthetic(struct sd_dataset *ds, int n, int c, int h, int w,
                         int classes, uint64_t seed, char **why)
{
	return sd_dataset_synthetic_split(ds, SD_SPLIT_TRAIN, n, c, h, w, classes, seed, why);
}

int sd_dataset_synthetic_split(struct sd_dataset *ds, enum sd_split split, int n, int c, int h,
                               int w, int classes, uint64_t seed, char **why)
{
	memset(ds, 0, sizeof *ds);
	if (n <= 0 || c <= 0 || h <= 0 || w <= 0)
		return sd_why(why, "synthetic: bad shape n=%d c=%d h=%d w=%d (all must be > 0)",
		              n, c, h, w);
	if (classes < 1 || classes > 256)
		return sd_why(why, "synthetic: %d classes (labels are bytes: 1 to 256)", classes);
	/* Keep every index, including n * sample size, inside size_t and the
	 * sample size inside int for callers that use int offsets. */
	size_t sample = (size_t)c * (size_t)h * (size_t)w;
	if (sample > INT_MAX || (size_t)n > SIZE_MAX / sizeof(float) / sample
	    || (size_t)classes > SIZE_MAX / sizeof(float) / sample)
		return sd_why(why, "synthetic: shape %dx%dx%dx%d too large", n, c, h, w);

	/* Separate streams for the class means, labels and noise, so changing n
	 * keeps the class means (and the first samples) the same.  Both splits
	 * share the class means; the test split draws its own labels and noise. */
	uint64_t own = split == SD_SPLIT_TEST ? 0x10u : 0;
	struct sd_rng rmean, rlabel, rnoise;
	sd_rng_seed(&rmean, seed, 0x5e7d0001u);
	sd_rng_seed(&rlabel, seed, 0x5e7d0002u + own);
	sd_rng_seed(&rnoise, seed, 0x5e7d0003u + own);

	float *means = sd_malloc((size_t)classes * sample * sizeof(float));
	for (size_t i = 0; i < (size_t)classes * sample; i++)
		means[i] = sd_rng_normal(&rmean);

	ds->images = sd_malloc((size_t)n * sample * sizeof(float));
	ds->labels = sd_malloc((size_t)n);
	for (size_t i = 0; i < (size_t)n; i++) {
		uint8_t label = (uint8_t)sd_rng_below(&rlabel, (uint32_t)classes);
		const float *mean = means + label * sample;
		float *x = ds->images + i * sample;
		/* Noise as large as the spread of the means: classes overlap per
		 * pixel but separate clearly over the whole image. */
		for (size_t j = 0; j < sample; j++)
			x[j] = mean[j] + sd_rng_normal(&rnoise);
		ds->labels[i] = label;
	}
	free(means);
	snprintf(ds->name, sizeof ds->name, "synthetic");
	ds->n = n;
	ds->c = c;
	ds->h = h;
	ds->w = w;
	ds->classes = classes;
	return 0;
}

void sd_epoch_permutation(int32_t *perm, int n, uint64_t seed, int epoch)
{
	if (n <= 0)
		return;
	struct sd_rng r;
	/* The stream depends on the epoch, so each epoch's order is independent
	 * of the ones before it and needs no state carried between epochs. */
	sd_rng_seed(&r, seed, 0x5eed0000u + (uint64_t)(uint32_t)epoch);
	for (int i = 0; i < n; i++)
		perm[i] = i;
	/* Fisher-Yates (Knuth, TAOCP vol. 2, algorithm P), from the top down. */
	for (int i = n - 1; i > 0; i--) {
		int j = (int)sd_rng_below(&r, (uint32_t)i + 1u);
		int32_t t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
	}
}

/* ---- npy datasets ---- */

int sd_layout_parse(const char *s, enum sd_layout *out)
{
	if (!strcmp(s, "NCHW"))
		*out = SD_LAYOUT_NCHW;
	else if (!strcmp(s, "NHWC"))
		*out = SD_LAYOUT_NHWC;
	else
		return -1;
	return 0;
}

int sd_augment_parse(const char *s, enum sd_augment *out)
{
	if (!strcmp(s, "none"))
		*out = SD_AUGMENT_NONE;
	else if (!strcmp(s, "crop4+flip"))
		*out = SD_AUGMENT_CROP4_FLIP;
	else
		return -1;
	return 0;
}

/* The element count of dims as "(a, b, c)" for messages. */
static const char *sd_shape_text(const struct sd_npy_header *h, char *buf, size_t size)
{
	size_t n = 0;
	buf[n++] = '(';
	for (int i = 0; i < h->ndim && n + 24 < size; i++)
		n += (size_t)snprintf(buf + n, size - n, "%s%llu", i ? ", " : "",
		                      (unsigned long long)h->shape[i]);
	if (h->ndim == 1 && n + 2 < size)
		buf[n++] = ',';
	buf[n++] = ')';
	buf[n] = '\0';
	return buf;
}

/* Opens dir/<split>_x.npy and checks its dtype and shape; sets c, h, w. */
static int sd_npy_open_x(struct sd_dataset *ds, const char *dir, const char *split,
                         const struct sd_data_options *opt, char **why)
{
	char *path = sd_path_join(dir, split, "_x.npy");
	ds->src = sd_calloc(1, sizeof *ds->src);
	int rc = sd_npy_open(&ds->src->x, path, why);
	free(path);
	if (rc < 0)
		return -1;
	const struct sd_npy_header *h = &ds->src->x.h;
	const char *p = ds->src->x.path;
	char shape[160];
	if (h->dtype != SD_NPY_U1 && h->dtype != SD_NPY_F2 && h->dtype != SD_NPY_F4)
		return sd_why(why, "%s: images of dtype '%s': expected |u1 (uint8), <f2 (float16) "
		              "or <f4 (float32)", p, h->descr);
	uint64_t n, c, hh, w;
	if (h->ndim == 3) {
		n = h->shape[0];
		c = 1;
		hh = h->shape[1];
		w = h->shape[2];
	} else if (h->ndim == 4 && opt->layout == SD_LAYOUT_NCHW) {
		n = h->shape[0];
		c = h->shape[1];
		hh = h->shape[2];
		w = h->shape[3];
	} else if (h->ndim == 4) {
		n = h->shape[0];
		hh = h->shape[1];
		w = h->shape[2];
		c = h->shape[3];
	} else {
		return sd_why(why, "%s: shape %s: expected (n, %s or (n, h, w)", p,
		              sd_shape_text(h, shape, sizeof shape),
		              opt->layout == SD_LAYOUT_NCHW ? "c, h, w) for layout NCHW"
		                                            : "h, w, c) for layout NHWC");
	}
	if (n == 0)
		return sd_why(why, "%s: no samples (shape %s)", p, sd_shape_text(h, shape, sizeof shape));
	if (c == 0 || hh == 0 || w == 0)
		return sd_why(why, "%s: empty images (shape %s)", p,
		              sd_shape_text(h, shape, sizeof shape));
	/* Sample indices are int32 (the permutation) and a sample's size an
	 * int for the models; keep to both. */
	if (n > SD_MAX_SAMPLES || c > 4096 || hh > 65536 || w > 65536 || c * hh * w > INT_MAX)
		return sd_why(why, "%s: shape %s too large (at most %d samples of at most %d values)",
		              p, sd_shape_text(h, shape, sizeof shape), SD_MAX_SAMPLES, INT_MAX);
	if (opt->norm_channels > 0 && (uint64_t)opt->norm_channels != c)
		return sd_why(why, "%s: %llu channels (layout %s, shape %s), but normalize gives %d "
		              "mean/std values", p, (unsigned long long)c,
		              opt->layout == SD_LAYOUT_NCHW ? "NCHW" : "NHWC",
		              sd_shape_text(h, shape, sizeof shape), opt->norm_channels);
	ds->n = (int)n;
	ds->c = (int)c;
	ds->h = (int)hh;
	ds->w = (int)w;
	ds->src->layout = h->ndim == 3 ? SD_LAYOUT_NCHW : opt->layout;
	for (int ch = 0; ch < SD_DATA_MAX_CHANNELS; ch++) {
		int on = opt->norm_channels > 0 && ch < opt->norm_channels;
		ds->src->mean[ch] = on ? opt->mean[ch] : 0.0f;
		ds->src->std[ch] = on ? opt->std[ch] : 1.0f;
	}
	/* The same expression as sd_norm_table, so uint8 data with a built-in
	 * dataset's constants gives the very floats that dataset's loader does. */
	if (h->dtype == SD_NPY_U1) {
		for (int ch = 0; ch < SD_DATA_MAX_CHANNELS; ch++)
			for (int px = 0; px < 256; px++)
				ds->src->table[ch][px] = ((float)px / 255.0f - ds->src->mean[ch]) /
				                         ds->src->std[ch];
		ds->src->table_ok = 1;
	}
	for (int ch = 0; ch < SD_DATA_MAX_CHANNELS; ch++)
		ds->pad[ch] = h->dtype == SD_NPY_U1 ? ds->src->table[ch][0]
		              : (0.0f - ds->src->mean[ch]) / ds->src->std[ch];
	return 0;
}

/* Opens dir/<split>_y.npy, checks it against ds's sample count and keeps
 * its labels as bytes; *max_label: the largest. */
static int sd_npy_read_y(struct sd_dataset *ds, const char *dir, const char *split,
                         int classes, int64_t *max_label, char **why)
{
	char *path = sd_path_join(dir, split, "_y.npy");
	struct sd_npy_file y;
	int rc = sd_npy_open(&y, path, why);
	free(path);
	if (rc < 0)
		return -1;
	char shape[160];
	rc = -1;
	if (y.h.dtype == SD_NPY_F2 || y.h.dtype == SD_NPY_F4) {
		sd_why(why, "%s: labels of dtype '%s': expected integer class ids (|u1, |i1, <i2, "
		       "<u2, <i4, <u4, <i8, <u8)", y.path, y.h.descr);
		goto out;
	}
	if (y.h.ndim != 1) {
		sd_why(why, "%s: shape %s: expected (n,), one class id per sample", y.path,
		       sd_shape_text(&y.h, shape, sizeof shape));
		goto out;
	}
	if (y.h.shape[0] != (uint64_t)ds->n) {
		sd_why(why, "%s: %llu labels, but %s has %d samples", y.path,
		       (unsigned long long)y.h.shape[0], ds->src->x.path, ds->n);
		goto out;
	}
	ds->labels = sd_malloc((size_t)ds->n);
	int64_t top = -1;
	for (int i = 0; i < ds->n; i++) {
		int64_t v = sd_npy_int_at(&y.h, y.data, (uint64_t)i);
		/* Out of range when given classes; otherwise beyond what a byte
		 * label holds. */
		int limit = classes > 0 ? classes : SD_DATA_MAX_CLASSES;
		if (v < 0 || v >= limit) {
			if (v < 0)
				sd_why(why, "%s: label of sample %d is negative", y.path, i);
			else if (classes > 0)
				sd_why(why, "%s: label %lld of sample %d out of range (classes %d)", y.path,
				       (long long)v, i, classes);
			else
				sd_why(why, "%s: label %lld of sample %d beyond %d classes (labels are "
				       "bytes)", y.path, (long long)v, i, SD_DATA_MAX_CLASSES);
			goto out;
		}
		if (v > top)
			top = v;
		ds->labels[i] = (uint8_t)v;
	}
	*max_label = top;
	rc = 0;
out:
	sd_npy_close(&y);
	return rc;
}

int sd_dataset_load_npy(struct sd_dataset *train, struct sd_dataset *test, const char *dir,
                        const struct sd_data_options *opt, char **why)
{
	memset(train, 0, sizeof *train);
	memset(test, 0, sizeof *test);
	if (!dir || !*dir)
		return sd_why(why, "npy: no data directory; set data_dir in the job file or pass "
		              "--data-dir");
	if (opt->norm_channels < 0 || opt->norm_channels > SD_DATA_MAX_CHANNELS)
		return sd_why(why, "normalize: %d channels (1 to %d)", opt->norm_channels,
		              SD_DATA_MAX_CHANNELS);
	for (int ch = 0; ch < opt->norm_channels; ch++)
		if (!(opt->std[ch] > 0) || !isfinite(opt->mean[ch]) || !isfinite(opt->std[ch]))
			return sd_why(why, "normalize: std[%d] is %g, mean[%d] %g: std must be a "
			              "positive number, mean a finite one", ch, opt->std[ch], ch,
			              opt->mean[ch]);
	if (opt->classes == 1 || opt->classes < 0 || opt->classes > SD_DATA_MAX_CLASSES)
		return sd_why(why, "classes: %d (a classifier has 2 to %d; 0 takes the labels' "
		              "largest + 1)", opt->classes, SD_DATA_MAX_CLASSES);
	if (sd_check_dir("npy", dir, why) < 0)
		return -1;
	int64_t top_train = -1, top_test = -1;
	if (sd_npy_open_x(train, dir, "train", opt, why) < 0 ||
	    sd_npy_read_y(train, dir, "train", opt->classes, &top_train, why) < 0 ||
	    sd_npy_open_x(test, dir, "test", opt, why) < 0 ||
	    sd_npy_read_y(test, dir, "test", opt->classes, &top_test, why) < 0)
		goto fail;
	if (test->c != train->c || test->h != train->h || test->w != train->w) {
		sd_why(why, "%s: images of %dx%dx%d (c x h x w), but %s has %dx%dx%d",
		       test->src->x.path, test->c, test->h, test->w, train->src->x.path, train->c,
		       train->h, train->w);
		goto fail;
	}
	int classes = opt->classes > 0 ? opt->classes
	              : (int)(top_train > top_test ? top_train : top_test) + 1;
	if (classes < 2) {
		sd_why(why, "%s: every label is %d: a classifier needs at least 2 classes (set "
		       "\"classes\" if the other classes are absent from the data)",
		       train->src->x.path, classes - 1);
		goto fail;
	}
	train->classes = test->classes = classes;
	snprintf(train->name, sizeof train->name, "npy");
	snprintf(test->name, sizeof test->name, "npy");
	return 0;
fail:
	sd_dataset_free(train);
	sd_dataset_free(test);
	return -1;
}

/* Element e of a mapped float array as a float (little-endian, npy.h). */
static float sd_source_float(const struct sd_dataset_source *s, const unsigned char *base,
                             size_t e)
{
	if (s->x.h.dtype == SD_NPY_F2)
		return sd_npy_half_to_float((uint16_t)(base[2 * e] | base[2 * e + 1] << 8));
	uint32_t bits = (uint32_t)base[4 * e] | (uint32_t)base[4 * e + 1] << 8 |
	                (uint32_t)base[4 * e + 2] << 16 | (uint32_t)base[4 * e + 3] << 24;
	float v;
	memcpy(&v, &bits, sizeof v);
	return v;
}

/* Sample k of a mapped dataset into dst as float32 NCHW.  The uint8 path
 * is a table lookup per element (the table holds sd_norm_table's
 * expression); floats are normalised as they are read. */
static void sd_source_sample(const struct sd_dataset *ds, size_t k, float *dst)
{
	const struct sd_dataset_source *s = ds->src;
	size_t c = (size_t)ds->c, hw = (size_t)ds->h * ds->w, sample = c * hw;
	const unsigned char *base = s->x.data + k * sample * s->x.h.itemsize;
	int nchw = s->layout == SD_LAYOUT_NCHW;
	for (size_t ch = 0; ch < c; ch++) {
		size_t tc = ch < SD_DATA_MAX_CHANNELS ? ch : 0;   /* > 16 only unnormalised */
		float mean = s->mean[tc], std = s->std[tc];
		float *out = dst + ch * hw;
		if (s->x.h.dtype == SD_NPY_U1) {
			const float *table = s->table[tc];
			if (nchw) {
				const unsigned char *in = base + ch * hw;
				for (size_t p = 0; p < hw; p++)
					out[p] = table[in[p]];
			} else {
				for (size_t p = 0; p < hw; p++)
					out[p] = table[base[p * c + ch]];
			}
		} else {
			for (size_t p = 0; p < hw; p++)
				out[p] = (sd_source_float(s, base, nchw ? ch * hw + p : p * c + ch) - mean) / std;
		}
	}
}

/* Sample k of ds into dst as float32 NCHW, whatever holds it. */
static void sd_dataset_sample(const struct sd_dataset *ds, size_t k, float *dst)
{
	size_t sample = (size_t)ds->c * ds->h * ds->w;
	if (ds->src)
		sd_source_sample(ds, k, dst);
	else
		memcpy(dst, ds->images + k * sample, sample * sizeof(float));
}

void sd_dataset_materialize(const struct sd_dataset *ds, float *images)
{
	size_t sample = (size_t)ds->c * ds->h * ds->w;
	for (int k = 0; k < ds->n; k++)
		sd_dataset_sample(ds, (size_t)k, images + (size_t)k * sample);
}

void sd_dataset_gather(const struct sd_dataset *ds, const int32_t *perm, int pos,
                       int count, float *images, uint8_t *labels)
{
	sd_dataset_gather_train(ds, perm, pos, count, SD_AUGMENT_NONE, 0, 0, images, labels);
}

/* The padding on each side for SD_AUGMENT_CROP4_FLIP. */
#define SD_CROP_PAD 4

/* Crops and flips src (c, h, w) into dst as sd_augment describes: dst[y][x]
 * is src[y + oy - 4][x' + ox - 4] with x' = w - 1 - x when flipped, else x,
 * or the channel's pad value outside src. */
static void sd_crop_flip(const struct sd_dataset *ds, const float *src, float *dst, int oy,
                         int ox, int flip)
{
	int h = ds->h, w = ds->w;
	for (int ch = 0; ch < ds->c; ch++) {
		float pad = ch < SD_DATA_MAX_CHANNELS ? ds->pad[ch] : 0.0f;
		const float *in = src + (size_t)ch * h * w;
		float *out = dst + (size_t)ch * h * w;
		for (int y = 0; y < h; y++) {
			int sy = y + oy - SD_CROP_PAD;
			for (int x = 0; x < w; x++) {
				int sx = (flip ? w - 1 - x : x) + ox - SD_CROP_PAD;
				out[(size_t)y * w + x] = sy >= 0 && sy < h && sx >= 0 && sx < w
				                         ? in[(size_t)sy * w + sx] : pad;
			}
		}
	}
}

void sd_dataset_gather_train(const struct sd_dataset *ds, const int32_t *perm, int pos,
                             int count, enum sd_augment aug, uint64_t seed, int epoch,
                             float *images, uint8_t *labels)
{
	size_t sample = (size_t)ds->c * ds->h * ds->w;
	float *tmp = images && aug != SD_AUGMENT_NONE ? sd_malloc(sample * sizeof(float)) : NULL;
	for (int i = 0; i < count; i++) {
		size_t k = perm ? (size_t)perm[pos + i] : (size_t)(pos + i);
		if (images && !tmp) {
			sd_dataset_sample(ds, k, images + (size_t)i * sample);
		} else if (images) {
			/* A stream per (epoch, global position): the same draws
			 * whichever worker gathers the sample. */
			struct sd_rng r;
			uint64_t stream = 0x6175670000000000ull | (uint64_t)(uint32_t)epoch << 24 |
			                  (uint64_t)(uint32_t)(pos + i);
			sd_rng_seed(&r, seed ^ ((uint64_t)(uint32_t)epoch * 0x9e3779b97f4a7c15ull),
			            stream);
			int oy = (int)sd_rng_below(&r, 2 * SD_CROP_PAD + 1);
			int ox = (int)sd_rng_below(&r, 2 * SD_CROP_PAD + 1);
			int flip = (int)(sd_rng_u32(&r) >> 31);
			sd_dataset_sample(ds, k, tmp);
			sd_crop_flip(ds, tmp, images + (size_t)i * sample, oy, ox, flip);
		}
		if (labels)
			labels[i] = ds->labels[k];
	}
	free(tmp);
}
