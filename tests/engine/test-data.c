/* tests/engine/test-data.c - dataset loading, validation of bad input, the epoch
 * shuffle, gathering and synthetic data.
 *
 * The real Fashion-MNIST files (Debian package dataset-fashion-mnist) are
 * checked against an independent minimal gzip read here; when they are not
 * installed that part is skipped, the rest still runs and the test reports
 * SKIP (77) with the reason.  Every bad-input fixture is written at run time
 * into a mkdtemp() directory with zlib.  How long loading takes is a
 * benchmark's business (tests/bench/bench-data), not a check here. */
#include "engine/data.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <zlib.h>

#include "tests/check.h"
#include "tests/tmpdir.h"

static char tmpdir[4096];

/* A fresh, empty fixture directory under tmpdir. */
static char *fixture_dir(const char *name)
{
	char *dir = path_join(tmpdir, name);
	if (mkdir(dir, 0755) != 0) {
		perror(dir);
		exit(1);
	}
	return dir;
}

static void put_be32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

/* Writes an IDX file: magic, ndims sizes, then len bytes of data; gzip'd
 * when gz is set, plain otherwise. */
static void write_idx(const char *path, int gz, uint32_t magic, int ndims,
                      const uint32_t *dims, const unsigned char *data, size_t len)
{
	unsigned char head[16];
	put_be32(head, magic);
	for (int i = 0; i < ndims; i++)
		put_be32(head + 4 + 4 * i, dims[i]);
	size_t head_len = 4 + 4 * (size_t)ndims;
	if (gz) {
		gzFile f = gzopen(path, "wb");
		if (!f || gzwrite(f, head, (unsigned)head_len) != (int)head_len
		    || (len && gzwrite(f, data, (unsigned)len) != (int)len) || gzclose(f) != Z_OK) {
			fprintf(stderr, "%s: cannot write fixture\n", path);
			exit(1);
		}
		return;
	}
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(head, 1, head_len, f) != head_len || fwrite(data, 1, len, f) != len
	    || fclose(f) != 0) {
		fprintf(stderr, "%s: cannot write fixture\n", path);
		exit(1);
	}
}

/* A small IDX dataset of n 28x28 images (and labels) with the given quirks:
 * the counts and magic written into the headers, how many bytes of image
 * data really follow, and labels. */
struct idx_spec {
	int gz;
	const char *prefix;          /* "train" or "t10k" */
	uint32_t img_magic, lab_magic;
	uint32_t img_n, rows, cols, lab_n;
	size_t img_bytes;            /* image data actually written */
	size_t lab_bytes;            /* label data actually written */
	int bad_label_at;            /* index whose label becomes 10, or -1 */
};

static struct idx_spec good_spec(uint32_t n)
{
	struct idx_spec s = { 1, "train", 2051, 2049, n, 28, 28, n, (size_t)n * 784, n, -1 };
	return s;
}

/* Pixel values used by every fixture, so loads can be checked exactly. */
static unsigned char fixture_pixel(size_t i)
{
	return (unsigned char)((i * 7 + i / 784) & 0xff);
}

static void write_idx_pair(const char *dir, const struct idx_spec *s)
{
	size_t img_cap = s->img_bytes + 1;
	unsigned char *img = malloc(img_cap);
	for (size_t i = 0; i < img_cap; i++)
		img[i] = fixture_pixel(i);
	size_t lab_cap = s->lab_bytes + 1;
	unsigned char *lab = malloc(lab_cap);
	for (size_t i = 0; i < lab_cap; i++)
		lab[i] = (unsigned char)(i % 10);
	if (s->bad_label_at >= 0 && (size_t)s->bad_label_at < lab_cap)
		lab[s->bad_label_at] = 10;

	char name[64];
	snprintf(name, sizeof name, "%s-images-idx3-ubyte%s", s->prefix, s->gz ? ".gz" : "");
	char *path = path_join(dir, name);
	uint32_t idims[3] = { s->img_n, s->rows, s->cols };
	write_idx(path, s->gz, s->img_magic, 3, idims, img, s->img_bytes);
	free(path);
	snprintf(name, sizeof name, "%s-labels-idx1-ubyte%s", s->prefix, s->gz ? ".gz" : "");
	path = path_join(dir, name);
	uint32_t ldims[1] = { s->lab_n };
	write_idx(path, s->gz, s->lab_magic, 1, ldims, lab, s->lab_bytes);
	free(path);
	free(img);
	free(lab);
}

static int ds_is_empty(const struct sd_dataset *ds)
{
	return ds->images == NULL && ds->labels == NULL && ds->n == 0;
}

/* Loads and expects failure: -1, an empty dataset, and a one-line message
 * containing both the file (or directory) and the phrase. */
static void expect_load_fail(const char *name, const char *dir, enum sd_split split,
                             const char *file, const char *phrase, int line)
{
	struct sd_dataset ds;
	char *why = NULL;
	int rc = sd_dataset_load(&ds, name, dir, split, &why);
	int ok = rc == -1 && why && ds_is_empty(&ds) && strstr(why, file)
	         && strstr(why, phrase) && !strchr(why, '\n');
	if (!ok) {
		fprintf(stderr, "%s:%d: FAIL: load of %s from %s: rc %d, message '%s'; expected "
		        "-1 and a one-line message with '%s' and '%s'\n", __FILE__, line, name, dir,
		        rc, why ? why : "(null)", file, phrase);
		check_failures++;
	} else {
		printf("  ok: %s\n", why);
	}
	if (rc == 0)
		sd_dataset_free(&ds);
	free(why);
}

#define EXPECT_FAIL(name, dir, split, file, phrase) \
	expect_load_fail(name, dir, split, file, phrase, __LINE__)

static void test_idx_good(void)
{
	struct sd_dataset ds;
	char *why = NULL;

	/* gzip'd, train split, MNIST normalisation. */
	char *dir = fixture_dir("good-gz");
	struct idx_spec s = good_spec(20);
	write_idx_pair(dir, &s);
	/* A garbage uncompressed file next to the .gz must be ignored. */
	char *junk = path_join(dir, "train-images-idx3-ubyte");
	write_raw(junk, "junk", 4);
	free(junk);
	int rc = sd_dataset_load(&ds, "mnist", dir, SD_SPLIT_TRAIN, &why);
	CHECK_INT(rc, 0);
	if (rc == 0) {
		CHECK_INT(ds.n, 20);
		CHECK_INT(ds.c, 1);
		CHECK_INT(ds.h, 28);
		CHECK_INT(ds.w, 28);
		CHECK_INT(ds.classes, 10);
		CHECK(strcmp(ds.name, "mnist") == 0);
		int bad = 0;
		for (size_t i = 0; i < 20 * 784; i++) {
			float want = ((float)fixture_pixel(i) / 255.0f - 0.1307f) / 0.3081f;
			if (fabsf(ds.images[i] - want) > 1e-6f)
				bad++;
		}
		CHECK_INT(bad, 0);
		for (int i = 0; i < 20; i++)
			CHECK_INT(ds.labels[i], i % 10);
		sd_dataset_free(&ds);
		CHECK(ds_is_empty(&ds));
	} else {
		fprintf(stderr, "  %s\n", why);
	}
	free(why);
	why = NULL;
	free(dir);

	/* Uncompressed files, test split, Fashion-MNIST normalisation. */
	dir = fixture_dir("good-plain");
	s = good_spec(7);
	s.gz = 0;
	s.prefix = "t10k";
	write_idx_pair(dir, &s);
	rc = sd_dataset_load(&ds, "fashion-mnist", dir, SD_SPLIT_TEST, &why);
	CHECK_INT(rc, 0);
	if (rc == 0) {
		CHECK_INT(ds.n, 7);
		float want = ((float)fixture_pixel(100) / 255.0f - 0.2860f) / 0.3530f;
		CHECK(fabsf(ds.images[100] - want) <= 1e-6f);
		sd_dataset_free(&ds);
	} else {
		fprintf(stderr, "  %s\n", why);
	}
	free(why);
	/* The train split is not in that directory. */
	char *want_file = path_join(dir, "train-images-idx3-ubyte.gz");
	EXPECT_FAIL("fashion-mnist", dir, SD_SPLIT_TRAIN, want_file, "no such file");
	free(want_file);
	free(dir);
}

static void test_idx_bad(void)
{
	char *dir, *img, *lab;
	char phrase[128];

	/* Missing directory, with the hint for the Debian package. */
	dir = path_join(tmpdir, "no-such-dir");
	EXPECT_FAIL("fashion-mnist", dir, SD_SPLIT_TRAIN, dir,
	            ": no such directory (install the Debian package dataset-fashion-mnist"
	            ", or give another data directory: spotdeck-worker --data-dir, or data_dir in the job file)");
	EXPECT_FAIL("mnist", dir, SD_SPLIT_TRAIN, dir, "no such directory");
	free(dir);

	/* A file where the directory should be. */
	dir = path_join(tmpdir, "a-file");
	write_raw(dir, "x", 1);
	EXPECT_FAIL("fashion-mnist", dir, SD_SPLIT_TRAIN, dir, "not a directory");
	free(dir);

	/* Truncated image data inside a complete gzip stream. */
	dir = fixture_dir("truncated");
	struct idx_spec s = good_spec(20);
	s.img_bytes = 20 * 784 - 100;
	write_idx_pair(dir, &s);
	img = path_join(dir, "train-images-idx3-ubyte.gz");
	snprintf(phrase, sizeof phrase, "truncated: expected %d bytes of image data, got %d",
	         20 * 784, 20 * 784 - 100);
	EXPECT_FAIL("fashion-mnist", dir, SD_SPLIT_TRAIN, img, phrase);

	/* The gzip stream itself cut in half. */
	size_t len;
	s = good_spec(20);
	write_idx_pair(dir, &s);
	unsigned char *bytes = read_raw(img, &len);
	write_raw(img, bytes, len / 2);
	EXPECT_FAIL("fashion-mnist", dir, SD_SPLIT_TRAIN, img, "truncated: expected");
	/* Cut inside the gzip header. */
	write_raw(img, bytes, 5);
	EXPECT_FAIL("fashion-mnist", dir, SD_SPLIT_TRAIN, img, "truncated");
	/* Corrupt compressed data: zlib's checks (or the gzip CRC) must fire. */
	bytes[len / 2] ^= 0x55;
	bytes[len / 2 + 1] ^= 0xaa;
	write_raw(img, bytes, len);
	EXPECT_FAIL("fashion-mnist", dir, SD_SPLIT_TRAIN, img, "gzip error: ");
	/* The gzip trailer's CRC alone corrupted. */
	bytes[len / 2] ^= 0x55;
	bytes[len / 2 + 1] ^= 0xaa;
	bytes[len - 8] ^= 0x01;
	write_raw(img, bytes, len);
	EXPECT_FAIL("fashion-mnist", dir, SD_SPLIT_TRAIN, img, "gzip error");
	free(bytes);

	/* Trailing data after what the header announces. */
	s = good_spec(20);
	s.img_bytes = 20 * 784 + 3;
	write_idx_pair(dir, &s);
	EXPECT_FAIL("fashion-mnist", dir, SD_SPLIT_TRAIN, img, "trailing data");

	/* Wrong magic in either file. */
	s = good_spec(20);
	s.img_magic = 2049;
	write_idx_pair(dir, &s);
	EXPECT_FAIL("fashion-mnist", dir, SD_SPLIT_TRAIN, img, "wrong magic 0x00000801");
	lab = path_join(dir, "train-labels-idx1-ubyte.gz");
	s = good_spec(20);
	s.lab_magic = 0x12345678;
	write_idx_pair(dir, &s);
	EXPECT_FAIL("fashion-mnist", dir, SD_SPLIT_TRAIN, lab, "wrong magic");

	/* Wrong dimensions. */
	s = good_spec(20);
	s.rows = 27;
	s.img_bytes = 20 * 27 * 28;
	write_idx_pair(dir, &s);
	EXPECT_FAIL("fashion-mnist", dir, SD_SPLIT_TRAIN, img, "wrong dimensions 27x28");

	/* Label count disagrees with image count. */
	s = good_spec(20);
	s.lab_n = 19;
	s.lab_bytes = 19;
	write_idx_pair(dir, &s);
	EXPECT_FAIL("fashion-mnist", dir, SD_SPLIT_TRAIN, lab, "19 labels, but");

	/* Labels truncated. */
	s = good_spec(20);
	s.lab_bytes = 12;
	write_idx_pair(dir, &s);
	EXPECT_FAIL("fashion-mnist", dir, SD_SPLIT_TRAIN, lab,
	            "truncated: expected 20 bytes of label data, got 12");

	/* Label out of range. */
	s = good_spec(20);
	s.bad_label_at = 13;
	write_idx_pair(dir, &s);
	EXPECT_FAIL("fashion-mnist", dir, SD_SPLIT_TRAIN, lab, "label 10 of sample 13 out of range");

	/* Empty and absurd counts. */
	s = good_spec(0);
	write_idx_pair(dir, &s);
	EXPECT_FAIL("fashion-mnist", dir, SD_SPLIT_TRAIN, img, "implausible image count 0");
	s = good_spec(20);
	s.img_n = s.lab_n = 0xffffffffu;
	write_idx_pair(dir, &s);
	EXPECT_FAIL("fashion-mnist", dir, SD_SPLIT_TRAIN, img, "implausible image count");

	/* Empty file and a header cut short. */
	write_raw(img, "", 0);
	EXPECT_FAIL("fashion-mnist", dir, SD_SPLIT_TRAIN, img, "truncated");
	write_raw(img, "\0\0\x08\x03\0\0", 6);
	EXPECT_FAIL("fashion-mnist", dir, SD_SPLIT_TRAIN, img, "truncated: expected a 16-byte header");

	/* Missing label file. */
	s = good_spec(20);
	write_idx_pair(dir, &s);
	unlink(lab);
	EXPECT_FAIL("fashion-mnist", dir, SD_SPLIT_TRAIN, lab, "no such file");
	free(img);
	free(lab);
	free(dir);

	/* Names without a default directory or unknown. */
	EXPECT_FAIL("mnist", NULL, SD_SPLIT_TRAIN, "mnist", "no default data directory");
	EXPECT_FAIL("imagenet", NULL, SD_SPLIT_TRAIN, "imagenet", "unknown dataset");
	EXPECT_FAIL("synthetic", NULL, SD_SPLIT_TRAIN, "synthetic", "no files");
}

#define CIFAR_REC 3073
#define CIFAR_FILE_BYTES ((size_t)CIFAR_REC * 10000)

static unsigned char cifar_pixel(size_t rec, size_t i)
{
	return (unsigned char)((rec * 31 + i * 13 + i / 1024) & 0xff);
}

static unsigned char *cifar_fixture(void)
{
	unsigned char *buf = malloc(CIFAR_FILE_BYTES);
	for (size_t r = 0; r < 10000; r++) {
		unsigned char *rec = buf + r * CIFAR_REC;
		rec[0] = (unsigned char)((r * 3) % 10);
		for (size_t i = 0; i < 3072; i++)
			rec[1 + i] = cifar_pixel(r, i);
	}
	return buf;
}

static void test_cifar(void)
{
	static const float mean[3] = { 0.4914f, 0.4822f, 0.4465f };
	static const float std[3] = { 0.2470f, 0.2435f, 0.2616f };
	unsigned char *buf = cifar_fixture();
	char *dir = fixture_dir("cifar");
	char *sub = path_join(dir, "cifar-10-batches-bin");
	mkdir(sub, 0755);
	char *file = path_join(sub, "test_batch.bin");
	write_raw(file, buf, CIFAR_FILE_BYTES);

	/* Passing the directory above cifar-10-batches-bin works. */
	struct sd_dataset ds;
	char *why = NULL;
	int rc = sd_dataset_load(&ds, "cifar10", dir, SD_SPLIT_TEST, &why);
	CHECK_INT(rc, 0);
	if (rc == 0) {
		CHECK_INT(ds.n, 10000);
		CHECK_INT(ds.c, 3);
		CHECK_INT(ds.h, 32);
		CHECK_INT(ds.w, 32);
		CHECK_INT(ds.classes, 10);
		int bad = 0;
		for (size_t r = 0; r < 10000; r += 997) {
			if (ds.labels[r] != (r * 3) % 10)
				bad++;
			for (size_t i = 0; i < 3072; i += 5) {
				int ch = (int)(i / 1024);
				float want = ((float)cifar_pixel(r, i) / 255.0f - mean[ch]) / std[ch];
				if (fabsf(ds.images[r * 3072 + i] - want) > 1e-6f)
					bad++;
			}
		}
		CHECK_INT(bad, 0);
		sd_dataset_free(&ds);
	} else {
		fprintf(stderr, "  %s\n", why);
	}
	free(why);

	/* Train split: data_batch_1.bin is missing. */
	char *missing = path_join(sub, "data_batch_1.bin");
	EXPECT_FAIL("cifar10", sub, SD_SPLIT_TRAIN, missing, "no such file");
	free(missing);

	/* Label 12. */
	buf[5 * CIFAR_REC] = 12;
	write_raw(file, buf, CIFAR_FILE_BYTES);
	EXPECT_FAIL("cifar10", sub, SD_SPLIT_TEST, file, "label 12 of record 5 out of range");
	buf[5 * CIFAR_REC] = 0;

	/* Not a whole number of records, and the wrong number of them. */
	write_raw(file, buf, CIFAR_FILE_BYTES - 1);
	EXPECT_FAIL("cifar10", sub, SD_SPLIT_TEST, file, "wrong length");
	EXPECT_FAIL("cifar10", sub, SD_SPLIT_TEST, file, "not a multiple of the 3073-byte record");
	write_raw(file, buf, CIFAR_FILE_BYTES - CIFAR_REC);
	EXPECT_FAIL("cifar10", sub, SD_SPLIT_TEST, file, "wrong length: 9999 records, expected 10000");
	write_raw(file, buf, 0);
	EXPECT_FAIL("cifar10", sub, SD_SPLIT_TEST, file, "wrong length: 0 records");

	free(file);
	free(sub);
	free(dir);
	free(buf);
}

/* Reads an IDX file's body with plain zlib, independently of data.c. */
static unsigned char *gz_body(const char *path, size_t skip, size_t len)
{
	gzFile f = gzopen(path, "rb");
	if (!f) {
		perror(path);
		exit(1);
	}
	unsigned char *buf = malloc(len + skip);
	size_t done = 0;
	while (done < len + skip) {
		int got = gzread(f, buf + done, (unsigned)(len + skip - done));
		if (got <= 0)
			break;
		done += (size_t)got;
	}
	gzclose(f);
	if (done != len + skip) {
		fprintf(stderr, "%s: short independent read\n", path);
		exit(1);
	}
	memmove(buf, buf + skip, len);
	return buf;
}

static void test_fashion_real(void)
{
	const char *dir = sd_dataset_default_dir("fashion-mnist");
	CHECK(dir && strcmp(dir, "/usr/share/datasets/fashion-mnist") == 0);
	struct stat st;
	if (!dir || stat(dir, &st) != 0) {
		check_skip("the real Fashion-MNIST files: %s not installed (Debian package "
		           "dataset-fashion-mnist)", dir ? dir : "(no default directory)");
		return;
	}

	struct sd_dataset ds;
	char *why = NULL;
	int rc = sd_dataset_load(&ds, "fashion-mnist", NULL, SD_SPLIT_TRAIN, &why);
	CHECK_INT(rc, 0);
	if (rc != 0) {
		fprintf(stderr, "  %s\n", why);
		free(why);
		return;
	}
	printf("  fashion-mnist train loaded\n");
	CHECK_INT(ds.n, 60000);
	CHECK_INT(ds.c, 1);
	CHECK_INT(ds.h, 28);
	CHECK_INT(ds.w, 28);
	CHECK_INT(ds.classes, 10);
	int count[10] = { 0 };
	long long sum = 0;
	for (int i = 0; i < ds.n; i++) {
		if (ds.labels[i] < 10)
			count[ds.labels[i]]++;
		sum += ds.labels[i];
	}
	for (int k = 0; k < 10; k++)
		CHECK_INT(count[k], 6000);

	/* Labels and every pixel against an independent read of the files. */
	char *lab_path = path_join(dir, "train-labels-idx1-ubyte.gz");
	unsigned char *lab = gz_body(lab_path, 8, 60000);
	long long sum2 = 0;
	for (int i = 0; i < 60000; i++)
		sum2 += lab[i];
	CHECK_INT(sum, sum2);
	CHECK(memcmp(lab, ds.labels, 60000) == 0);
	free(lab);
	free(lab_path);

	char *img_path = path_join(dir, "train-images-idx3-ubyte.gz");
	size_t npix = (size_t)60000 * 784;
	unsigned char *img = gz_body(img_path, 16, npix);
	long long bad = 0;
	double m = 0, m2 = 0;
	for (size_t i = 0; i < npix; i++) {
		float want = ((float)img[i] / 255.0f - 0.2860f) / 0.3530f;
		if (fabsf(ds.images[i] - want) > 1e-6f)
			bad++;
		m += ds.images[i];
		m2 += (double)ds.images[i] * ds.images[i];
	}
	CHECK_INT(bad, 0);
	/* A pixel spelled out, so a reader sees the formula at work. */
	size_t px = 14 * 28 + 14;
	CHECK(fabsf(ds.images[px] - ((float)img[px] / 255.0f - 0.2860f) / 0.3530f) <= 1e-6f);
	free(img);
	free(img_path);
	/* The constants are the training set's statistics, so the normalised
	 * data has mean 0 and standard deviation 1 (to their 4 digits). */
	m /= (double)npix;
	double sd = sqrt(m2 / (double)npix - m * m);
	printf("  normalised train mean %.5f std %.5f\n", m, sd);
	CHECK(fabs(m) < 1e-3);
	CHECK(fabs(sd - 1.0) < 1e-3);
	sd_dataset_free(&ds);

	rc = sd_dataset_load(&ds, "fashion-mnist", dir, SD_SPLIT_TEST, &why);
	CHECK_INT(rc, 0);
	if (rc != 0) {
		fprintf(stderr, "  %s\n", why);
		free(why);
		return;
	}
	printf("  fashion-mnist test loaded\n");
	CHECK_INT(ds.n, 10000);
	memset(count, 0, sizeof count);
	for (int i = 0; i < ds.n; i++)
		if (ds.labels[i] < 10)
			count[ds.labels[i]]++;
	for (int k = 0; k < 10; k++)
		CHECK_INT(count[k], 1000);
	sd_dataset_free(&ds);
}

/* 1 when perm is a permutation of 0..n-1. */
static int is_permutation(const int32_t *perm, int n)
{
	unsigned char *seen = calloc((size_t)n + 1, 1);
	int ok = 1;
	for (int i = 0; i < n && ok; i++) {
		if (perm[i] < 0 || perm[i] >= n || seen[perm[i]])
			ok = 0;
		else
			seen[perm[i]] = 1;
	}
	free(seen);
	return ok;
}

static void test_permutation(void)
{
	enum { N = 60000 };
	int32_t *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
	sd_epoch_permutation(a, N, 42, 0);
	CHECK(is_permutation(a, N));
	sd_epoch_permutation(b, N, 42, 0);
	CHECK(memcmp(a, b, N * sizeof *a) == 0);
	sd_epoch_permutation(b, N, 42, 1);
	CHECK(is_permutation(b, N));
	CHECK(memcmp(a, b, N * sizeof *a) != 0);
	sd_epoch_permutation(b, N, 43, 0);
	CHECK(memcmp(a, b, N * sizeof *a) != 0);

	/* Shuffled, not nearly the identity: few fixed points, and the first
	 * half holds about half of the low indices. */
	int fixed = 0, low = 0;
	for (int i = 0; i < N; i++) {
		fixed += a[i] == i;
		low += i < N / 2 && a[i] < N / 2;
	}
	CHECK(fixed < 20);
	CHECK(low > N / 4 - 600 && low < N / 4 + 600);

	/* Every position equally likely for element 0 (chi-square-ish check over
	 * 10 buckets and 2000 epochs of n = 10). */
	int hist[10] = { 0 };
	int32_t small[10];
	for (int e = 0; e < 2000; e++) {
		sd_epoch_permutation(small, 10, 7, e);
		CHECK(is_permutation(small, 10));
		for (int i = 0; i < 10; i++)
			if (small[i] == 0)
				hist[i]++;
	}
	for (int i = 0; i < 10; i++)
		CHECK(hist[i] > 120 && hist[i] < 280);

	/* Edge sizes. */
	int32_t one[1] = { 99 };
	sd_epoch_permutation(one, 1, 1, 1);
	CHECK_INT(one[0], 0);
	sd_epoch_permutation(one, 0, 1, 1);   /* writes nothing */
	CHECK_INT(one[0], 0);
	free(a);
	free(b);
}

/* Samples [from, to) of ds that the nearest of the 10 class means (sample
 * floats each) classifies right. */
static int nearest_mean_right(const struct sd_dataset *ds, int from, int to, const double *means,
                              size_t sample)
{
	int right = 0;
	for (int i = from; i < to; i++) {
		int best = -1;
		double best_d = 0;
		for (int k = 0; k < 10; k++) {
			double d = 0;
			for (size_t j = 0; j < sample; j++) {
				double t = ds->images[i * sample + j] - means[k * sample + j];
				d += t * t;
			}
			if (best < 0 || d < best_d) {
				best = k;
				best_d = d;
			}
		}
		right += best == ds->labels[i];
	}
	return right;
}

static void test_synthetic_and_gather(void)
{
	struct sd_dataset a, b, c;
	char *why = NULL;
	CHECK_INT(sd_dataset_synthetic(&a, 2000, 3, 8, 8, 10, 1234, &why), 0);
	CHECK_INT(sd_dataset_synthetic(&b, 2000, 3, 8, 8, 10, 1234, &why), 0);
	CHECK_INT(sd_dataset_synthetic(&c, 2000, 3, 8, 8, 10, 1235, &why), 0);
	size_t sample = 3 * 8 * 8;
	CHECK_INT(a.n, 2000);
	CHECK_INT(a.c, 3);
	CHECK_INT(a.h, 8);
	CHECK_INT(a.w, 8);
	CHECK_INT(a.classes, 10);
	CHECK(strcmp(a.name, "synthetic") == 0);
	CHECK(memcmp(a.images, b.images, 2000 * sample * sizeof(float)) == 0);
	CHECK(memcmp(a.labels, b.labels, 2000) == 0);
	CHECK(memcmp(a.images, c.images, 2000 * sample * sizeof(float)) != 0);

	/* Labels roughly uniform. */
	int count[10] = { 0 };
	for (int i = 0; i < a.n; i++) {
		CHECK(a.labels[i] < 10);
		if (a.labels[i] < 10)
			count[a.labels[i]]++;
	}
	for (int k = 0; k < 10; k++)
		CHECK(count[k] > 120 && count[k] < 280);

	/* Learnable: nearest class mean (estimated on the first half) classifies
	 * the second half nearly perfectly. */
	double *means = calloc(10 * sample, sizeof *means);
	int nk[10] = { 0 };
	for (int i = 0; i < 1000; i++) {
		nk[a.labels[i]]++;
		for (size_t j = 0; j < sample; j++)
			means[a.labels[i] * sample + j] += a.images[i * sample + j];
	}
	for (int k = 0; k < 10; k++)
		for (size_t j = 0; j < sample; j++)
			means[k * sample + j] /= nk[k] ? nk[k] : 1;
	int right = nearest_mean_right(&a, 1000, 2000, means, sample);
	printf("  synthetic nearest-mean accuracy %.3f\n", right / 1000.0);
	CHECK(right > 950);
	/* The test split has the same classes (means), its own samples: the
	 * training split's class means classify it as well. */
	struct sd_dataset ts;
	CHECK_INT(sd_dataset_synthetic_split(&ts, SD_SPLIT_TEST, 1000, 3, 8, 8, 10, 1234, &why), 0);
	CHECK(memcmp(ts.images, a.images, 1000 * sample * sizeof(float)) != 0);
	right = nearest_mean_right(&ts, 0, 1000, means, sample);
	printf("  synthetic test split, nearest training mean: accuracy %.3f\n", right / 1000.0);
	CHECK(right > 950);
	sd_dataset_free(&ts);
	free(means);

	/* Gather copies exactly the permuted samples. */
	int32_t *perm = malloc(2000 * sizeof *perm);
	sd_epoch_permutation(perm, 2000, 5, 3);
	float *img = malloc(64 * sample * sizeof(float));
	uint8_t lab[64];
	sd_dataset_gather(&a, perm, 100, 64, img, lab);
	int bad = 0;
	for (int i = 0; i < 64; i++) {
		bad += lab[i] != a.labels[perm[100 + i]];
		bad += memcmp(img + i * sample, a.images + (size_t)perm[100 + i] * sample,
		              sample * sizeof(float)) != 0;
	}
	CHECK_INT(bad, 0);
	/* The last positions of the epoch. */
	sd_dataset_gather(&a, perm, 2000 - 64, 64, img, lab);
	CHECK_INT(lab[63], a.labels[perm[1999]]);
	/* No permutation: the identity order; labels only. */
	sd_dataset_gather(&a, NULL, 7, 64, img, lab);
	CHECK(memcmp(img, a.images + 7 * sample, 64 * sample * sizeof(float)) == 0);
	CHECK(memcmp(lab, a.labels + 7, 64) == 0);
	memset(lab, 0xff, sizeof lab);
	sd_dataset_gather(&a, NULL, 9, 64, NULL, lab);
	CHECK(memcmp(lab, a.labels + 9, 64) == 0);
	free(img);
	free(perm);

	sd_dataset_free(&a);
	sd_dataset_free(&b);
	sd_dataset_free(&c);

	/* Bad shapes. */
	struct sd_dataset d;
	CHECK_INT(sd_dataset_synthetic(&d, 0, 1, 2, 2, 10, 1, &why), -1);
	CHECK(why && strstr(why, "synthetic"));
	CHECK(ds_is_empty(&d));
	CHECK_INT(sd_dataset_synthetic(&d, 10, 1, 2, 2, 0, 1, &why), -1);
	CHECK_INT(sd_dataset_synthetic(&d, 10, 1, 2, 2, 257, 1, &why), -1);
	CHECK_INT(sd_dataset_synthetic(&d, 10, -1, 2, 2, 10, 1, &why), -1);
	CHECK_INT(sd_dataset_synthetic(&d, 1 << 30, 1 << 20, 1 << 20, 1 << 20, 10, 1, &why), -1);
	CHECK(why && strstr(why, "too large"));
	free(why);
}

/* sd_dataset_check: the headers only, so a missing or misnamed file, a
 * wrong magic or image size fails it, and a file whose images are cut
 * short (only a load finds that) passes it. */
static void expect_check(const char *name, const char *dir, const char *phrase, int line)
{
	char *why = NULL;
	int rc = sd_dataset_check(name, dir, &why);
	int ok = phrase ? rc == -1 && why && strstr(why, phrase) && !strchr(why, '\n') : rc == 0 && !why;
	if (!ok) {
		fprintf(stderr, "%s:%d: FAIL: check of %s in %s: rc %d, message '%s'; expected %s%s\n", __FILE__,
		        line, name, dir, rc, why ? why : "(null)", phrase ? "-1 with " : "0", phrase ? phrase : "");
		check_failures++;
	} else {
		printf("  ok: check of %s in %s: %s\n", name, dir, why ? why : "passes");
	}
	free(why);
}

static void test_check(void)
{
	char *dir = fixture_dir("check");
	struct idx_spec s = good_spec(5);
	write_idx_pair(dir, &s);
	s.prefix = "t10k";
	s.gz = 0;
	write_idx_pair(dir, &s);
	expect_check("fashion-mnist", dir, NULL, __LINE__);
	expect_check("mnist", dir, NULL, __LINE__);
	/* Datasets without such files pass whatever the directory. */
	expect_check("synthetic", "/nonexistent", NULL, __LINE__);
	char *gone = path_join(tmpdir, "check-gone");
	expect_check("fashion-mnist", gone, "check-gone: no such directory (install the Debian package", __LINE__);
	expect_check("cifar10", gone, "check-gone: no such directory (data_dir in the job file", __LINE__);
	free(gone);
	/* The test labels missing; then a label file where the images go. */
	char *lab = path_join(dir, "t10k-labels-idx1-ubyte");
	char *img = path_join(dir, "t10k-images-idx3-ubyte");
	rename(lab, img);
	expect_check("fashion-mnist", dir, "t10k-images-idx3-ubyte: wrong magic 0x00000801", __LINE__);
	unlink(img);
	expect_check("fashion-mnist", dir, "t10k-images-idx3-ubyte.gz: no such file", __LINE__);
	/* Good headers over images cut short: a header check passes them. */
	s.img_bytes = 100;
	write_idx_pair(dir, &s);
	expect_check("fashion-mnist", dir, NULL, __LINE__);
	s.rows = 27;
	write_idx_pair(dir, &s);
	expect_check("fashion-mnist", dir, "t10k-images-idx3-ubyte: wrong dimensions 27x28", __LINE__);
	/* cifar10: six batch files of 10,000 records. */
	expect_check("cifar10", dir, "data_batch_1.bin: No such file or directory", __LINE__);
	free(lab);
	free(img);
	free(dir);
}

int main(void)
{
	/* Progress lines and failures interleave in the log in order. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	make_tmpdir(tmpdir, sizeof tmpdir, "sd-test-data.XXXXXX");
	printf("idx fixtures\n");
	test_idx_good();
	test_idx_bad();
	printf("the start's check of the files\n");
	test_check();
	printf("cifar10 fixtures\n");
	test_cifar();
	printf("fashion-mnist\n");
	test_fashion_real();
	printf("permutation\n");
	test_permutation();
	printf("synthetic and gather\n");
	test_synthetic_and_gather();
	rm_tree(tmpdir);
	return check_exit("test-data");
}
