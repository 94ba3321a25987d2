/* tests/bench/bench-allreduce.c - all-reduce throughput of engine/comm.h
 * (Gloo over loopback TCP) at the gradient sizes of our models, against a
 * memcpy of the same buffer measured in the same run.
 *
 * usage: bench-allreduce [-r RANKS] [-i ITERATIONS]
 *
 * Forks RANKS processes (default 2) that rendezvous through a directory store
 * in a mkdtemp() directory.  For each buffer size every rank all-reduces the
 * buffer ITERATIONS times (default 200, after 10 warm-up rounds); rank 0
 * reports the median time per all-reduce and the algorithm bandwidth
 * (buffer bytes / time, as nccl-tests' "algbw"; for 2 ranks the bus
 * bandwidth is the same number).  memcpy GB/s is bytes copied per second for
 * the same buffer size, so the ratio says how far the all-reduce is from a
 * plain local copy of the gradients. */
#include "config.h"

#include "engine/comm.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Gradient sizes (parameter counts) of the models the engine trains. */
static const struct {
	const char *name;
	size_t floats;
} sizes[] = {
	{"cnn", 421642},      /* the engine's CIFAR-10 CNN */
	{"resnet32", 464154}, /* ResNet-32 for CIFAR-10 (He et al. 2016, ~0.46M) */
};

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

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Median seconds per memcpy of `bytes`, over `iters` copies. */
static double time_memcpy(size_t bytes, int iters)
{
	char *src = malloc(bytes), *dst = malloc(bytes);
	double *t = malloc((size_t)iters * sizeof *t);
	if (!src || !dst || !t) {
		fprintf(stderr, "bench-allreduce: out of memory\n");
		exit(1);
	}
	memset(src, 1, bytes);
	memset(dst, 2, bytes);
	for (int i = 0; i < 10; i++)
		memcpy(dst, src, bytes);
	for (int i = 0; i < iters; i++) {
		double t0 = now_s();
		memcpy(dst, src, bytes);
		/* Keep the copy from being optimised away. */
		__asm__ volatile("" : : "r"(dst) : "memory");
		t[i] = now_s() - t0;
	}
	double m = median(t, iters);
	free(src);
	free(dst);
	free(t);
	return m;
}

static int run_rank(int rank, int ranks, int iters, struct sd_dir_store *store)
{
	char *why = NULL;
	struct sd_comm *c = NULL;
	if (sd_comm_create(&c, SD_COMM_GLOO, rank, ranks, 1, &sd_dir_store_ops, store, 10000,
			   &why) < 0) {
		fprintf(stderr, "rank %d: %s\n", rank, why);
		return 1;
	}
	double *t = malloc((size_t)iters * sizeof *t);
	if (!t)
		return 1;
	if (rank == 0)
		printf("%-9s %8s %9s %10s %11s %11s %7s\n", "buffer", "floats", "MB",
		       "ms/allred", "algbw GB/s", "memcpy GB/s", "ratio");
	for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
		size_t n = sizes[s].floats, bytes = n * sizeof(float);
		float *buf = malloc(bytes);
		if (!buf)
			return 1;
		for (size_t i = 0; i < n; i++)
			buf[i] = (float)rank;
		int bad = 0;
		for (int i = 0; i < 10 && !bad; i++)
			bad = sd_comm_allreduce_sum(c, buf, n, &why) < 0;
		/* Sanity check of the warm-up result: 10 rounds of doubling
		 * sums of 0..ranks-1. */
		float want = (float)(ranks * (ranks - 1) / 2);
		for (int i = 1; i < 10; i++)
			want *= (float)ranks;
		if (!bad && buf[n - 1] != want) {
			fprintf(stderr, "rank %d: wrong sum %g, want %g\n", rank, buf[n - 1], want);
			return 1;
		}
		/* Zeros from here on: repeated doubling would reach inf. */
		memset(buf, 0, bytes);
		bad = bad || sd_comm_barrier(c, &why) < 0;
		for (int i = 0; i < iters && !bad; i++) {
			double t0 = now_s();
			bad = sd_comm_allreduce_sum(c, buf, n, &why) < 0;
			t[i] = now_s() - t0;
		}
		if (bad) {
			fprintf(stderr, "rank %d: %s\n", rank, why);
			return 1;
		}
		free(buf);
		double ar = median(t, iters);
		/* Measure memcpy while the peers wait in the barrier, so
		 * both numbers come from an otherwise idle machine. */
		if (rank == 0) {
			double mc = time_memcpy(bytes, iters);
			double algbw = (double)bytes / ar / 1e9, mcbw = (double)bytes / mc / 1e9;
			printf("%-9s %8zu %9.2f %10.3f %11.2f %11.2f %7.3f\n", sizes[s].name, n,
			       (double)bytes / 1e6, ar * 1e3, algbw, mcbw, algbw / mcbw);
		}
		if (sd_comm_barrier(c, &why) < 0) {
			fprintf(stderr, "rank %d: %s\n", rank, why);
			return 1;
		}
	}
	/* Latency of the small metric reductions done every step. */
	double m[4] = {1, 2, 3, 4};
	for (int i = 0; i < iters; i++) {
		double t0 = now_s();
		if (sd_comm_allreduce_sum_f64(c, m, 4, &why) < 0) {
			fprintf(stderr, "rank %d: %s\n", rank, why);
			return 1;
		}
		t[i] = now_s() - t0;
	}
	if (rank == 0)
		printf("metrics   allreduce of 4 doubles: %.1f us median\n", median(t, iters) * 1e6);
	free(t);
	sd_comm_destroy(c);
	return 0;
}

int main(int argc, char **argv)
{
	int ranks = 2, iters = 200, opt;
	while ((opt = getopt(argc, argv, "r:i:")) != -1) {
		if (opt == 'r')
			ranks = atoi(optarg);
		else if (opt == 'i')
			iters = atoi(optarg);
		else {
			fprintf(stderr, "usage: %s [-r RANKS] [-i ITERATIONS]\n", argv[0]);
			return 2;
		}
	}
	if (ranks < 1 || ranks > 64 || iters < 1) {
		fprintf(stderr, "%s: need 1 <= RANKS <= 64 and ITERATIONS >= 1\n", argv[0]);
		return 2;
	}
	const char *tmp = getenv("TMPDIR");
	char dir[256];
	snprintf(dir, sizeof dir, "%s/bench-allreduce-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	char *why = NULL;
	struct sd_dir_store store;
	if (sd_dir_store_init(&store, dir, &why) < 0) {
		fprintf(stderr, "%s\n", why);
		return 1;
	}
	const char *host = getenv("SPOTDECK_COMM_HOST");
	printf("bench-allreduce: %d ranks, Gloo TCP on %s, %d iterations, medians\n", ranks,
	       host && *host ? host : "127.0.0.1", iters);
	fflush(stdout);
	int failed = 0;
	for (int r = 0; r < ranks; r++) {
		pid_t p = fork();
		if (p < 0) {
			perror("fork");
			failed = 1;
			break;
		}
		if (p == 0) {
			int rc = run_rank(r, ranks, iters, &store);
			fflush(NULL);
			_exit(rc);
		}
	}
	int status;
	while (wait(&status) > 0)
		failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
	DIR *d = opendir(dir);
	if (d) {
		struct dirent *e;
		char path[512];
		while ((e = readdir(d)))
			if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
				snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
				unlink(path);
			}
		closedir(d);
	}
	rmdir(dir);
	sd_dir_store_fini(&store);
	return failed;
}
