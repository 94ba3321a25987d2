/* tests/bench/bench-data.c - what loading the Fashion-MNIST training set
 * costs (engine/data.c: gunzip, IDX checks, normalisation to float32),
 * against a peer measured in the same run: zlib's gzread of the same two
 * files into memory, the decompression any loader pays.  Median of 5 loads
 * each.  Target: loading <= 3x the peer (the figure tests/engine/test-data used to
 * bound at 10 s on any machine).
 *
 * Usage: bench-data [DIR]   (default /usr/share/datasets/fashion-mnist)
 * Prints "ratio:" lines (tests/bench/bench.h); exit status 1 when the target
 * is missed, 77 when the data set is not installed. */
#include "engine/data.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <zlib.h>

#include "tests/bench/bench.h"

#define RUNS 5
#define TARGET 3.0

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Bytes of DIR/NAME after gunzip, read whole into memory; -1 on error. */
static long gunzip_file(const char *dir, const char *name)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	gzFile f = gzopen(path, "rb");
	if (!f)
		return -1;
	size_t cap = 64u << 20, len = 0;
	unsigned char *buf = malloc(cap);
	if (!buf) {
		gzclose(f);
		return -1;
	}
	for (;;) {
		int n = gzread(f, buf + len, (unsigned)(cap - len > (1u << 30) ? (1u << 30) : cap - len));
		if (n <= 0)
			break;
		len += (size_t)n;
		if (len == cap) {
			unsigned char *more = realloc(buf, cap *= 2);
			if (!more)
				break;
			buf = more;
		}
	}
	gzclose(f);
	free(buf);
	return (long)len;
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : "/usr/share/datasets/fashion-mnist";
	struct stat st;
	if (stat(dir, &st) != 0) {
		fprintf(stderr, "SKIP: bench-data: %s not installed (Debian package dataset-fashion-mnist)\n", dir);
		return 77;
	}
	double load[RUNS], peer[RUNS];
	long bytes = 0;
	for (int i = 0; i < RUNS; i++) {
		struct sd_dataset ds;
		char *why = NULL;
		double t0 = now_s();
		if (sd_dataset_load(&ds, "fashion-mnist", dir, SD_SPLIT_TRAIN, &why) != 0) {
			fprintf(stderr, "bench-data: %s\n", why);
			return 1;
		}
		load[i] = now_s() - t0;
		sd_dataset_free(&ds);
		t0 = now_s();
		long a = gunzip_file(dir, "train-images-idx3-ubyte.gz");
		long b = gunzip_file(dir, "train-labels-idx1-ubyte.gz");
		peer[i] = now_s() - t0;
		if (a < 0 || b < 0) {
			fprintf(stderr, "bench-data: cannot gunzip the files in %s\n", dir);
			return 1;
		}
		bytes = a + b;
	}
	qsort(load, RUNS, sizeof load[0], cmp_double);
	qsort(peer, RUNS, sizeof peer[0], cmp_double);
	double l = load[RUNS / 2], p = peer[RUNS / 2];
	printf("bench-data: fashion-mnist train (60000 images, %ld bytes unpacked), median of %d:\n", bytes, RUNS);
	printf("  sd_dataset_load        %.3f s\n", l);
	printf("  peer: gzread the files %.3f s\n", p);
	bench_ratio("bench-data", "sd_dataset_load / gzread of the same files", l / p, TARGET, 1);
	return bench_exit();
}
