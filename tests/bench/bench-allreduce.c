/* tests/bench/bench-allreduce.c - all-reduce throughput of engine/comm.h
 * (Gloo over loopback TCP) at the gradient sizes of our models, against a
 * memcpy of the same buffer measured in the same run.
 *
 * usage: bench-allreduce [-r RANKS] [-i ITERATIONS] [-b gloo|shm]
 *
 * -b picks the backend (default gloo: TCP on loopback; shm: the shared-memory
 * backend that generations on one host use).
 *
 * Forks RANKS processes (default 2) that rendezvous through a directory store
 * in a mkdtemp() directory.  For each buffer size every rank all-reduces the
 * buffer ITERATIONS times (default 200, after 10 warm-up rounds); rank 0
 * reports the median time per all-reduce and the algorithm bandwidth
 * (buffer bytes / time, as nccl-tests' "algbw"; for 2 ranks the bus
 * bandwidth is the same number).  memcpy GB/s is bytes copied per second for
 * the same buffer size, so the ratio says how far the all-reduce is from a
 * plain local copy of the gradients.  The buffer sizes are the parameter
 * counts of the engine's own models (sd_model_param_count): cnn on
 * Fashion-MNIST (1x28x28, 10 classes) and resnet32 on CIFAR-10 (3x32x32).
 *
 * Then how fast a group notices a lost member (the figures test-comm prints
 * but does not bound): 3 ranks with a 2 s timeout, rank 2 SIGKILLed (its
 * sockets close: the others must fail at once, target <= 0.25 x the
 * timeout) or SIGSTOPped (sockets open: only the timeout ends the wait,
 * target <= the timeout + 1.5 s), and a collective on the aborted
 * communicator (target <= 0.05 x the timeout).  Each against the timeout
 * the ranks were given.
 *
 * Prints "ratio:" lines (tests/bench/bench.h); exit status 1 when a target
 * is missed or a rank fails. */
#include "config.h"

#include "engine/comm.h"
#include "engine/model.h"
#include "tests/bench/bench.h"

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

static enum sd_comm_backend backend = SD_COMM_GLOO;
#include <unistd.h>

/* Gradient sizes (parameter counts) of the models the engine trains, from
 * the engine itself (main fills them in). */
static struct {
	const char *name;
	int c, h, w;
	size_t floats;
} sizes[] = {
	{"cnn", 1, 28, 28, 0},      /* Fashion-MNIST, the default job */
	{"resnet32", 3, 32, 32, 0}, /* CIFAR-10, the seeds' workload */
};

#define FAULT_TIMEOUT_MS 2000

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
	if (sd_comm_create(&c, backend, rank, ranks, 1, &sd_dir_store_ops, store, 10000,
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
			char what[96];
			snprintf(what, sizeof what, "all-reduce / memcpy bandwidth, %s (%zu floats)", sizes[s].name, n);
			bench_ratio("bench-allreduce", what, algbw / mcbw, 0, 0);
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

/* ---- failure detection ---- */

/* One rank of the fault case: all-reduce after a barrier; rank 2 leaves by
 * `sig` instead.  Survivors publish "took/RANK" (seconds to fail) and
 * "again/RANK" (seconds for a collective on the aborted communicator). */
static int fault_rank(int rank, long gen, int sig, struct sd_dir_store *store)
{
	char *why = NULL;
	struct sd_comm *c = NULL;
	if (sd_comm_create(&c, backend, rank, 3, gen, &sd_dir_store_ops, store, FAULT_TIMEOUT_MS,
	                   &why) < 0 || sd_comm_barrier(c, &why) < 0) {
		fprintf(stderr, "rank %d: %s\n", rank, why);
		return 1;
	}
	if (rank == 2) {
		raise(sig);
		for (;;)
			pause();
	}
	size_t n = 1u << 20;
	float *buf = calloc(n, sizeof *buf);
	if (!buf)
		return 1;
	double t0 = now_s();
	int rc = sd_comm_allreduce_sum(c, buf, n, &why);
	double took = now_s() - t0;
	float x = 1;
	t0 = now_s();
	int rc2 = sd_comm_allreduce_sum(c, &x, 1, &why);
	double again = now_s() - t0;
	free(buf);
	if (rc >= 0 || rc2 >= 0) {
		fprintf(stderr, "rank %d: the all-reduce with rank 2 gone did not fail\n", rank);
		return 1;
	}
	char key[32], val[32];
	snprintf(key, sizeof key, "took/%d", rank);
	snprintf(val, sizeof val, "%.6f", took);
	sd_dir_store_ops.set(store, key, val, strlen(val), &why);
	snprintf(key, sizeof key, "again/%d", rank);
	snprintf(val, sizeof val, "%.6f", again);
	sd_dir_store_ops.set(store, key, val, strlen(val), &why);
	sd_comm_destroy(c);
	return 0;
}

static double store_num(struct sd_dir_store *store, const char *key)
{
	void *v = NULL;
	size_t len = 0;
	char *why = NULL, buf[32];
	double x = -1;
	if (sd_dir_store_ops.get(store, key, &v, &len, 0, &why) == 0 && len < sizeof buf) {
		memcpy(buf, v, len);
		buf[len] = '\0';
		x = atof(buf);
	}
	free(v);
	free(why);
	return x;
}

/* Runs the fault case with rank 2 leaving by sig; *took and *again get the
 * slowest survivor's seconds.  Returns 0, or -1 when a rank failed. */
static int fault_case(long gen, int sig, struct sd_dir_store *store, double *took, double *again)
{
	pid_t pids[3];
	fflush(NULL);
	for (int r = 0; r < 3; r++) {
		pids[r] = fork();
		if (pids[r] == 0) {
			alarm(60);
			_exit(fault_rank(r, gen, sig, store));
		}
	}
	int bad = 0, status;
	for (int r = 0; r < 2; r++)
		if (waitpid(pids[r], &status, 0) != pids[r] || !WIFEXITED(status) || WEXITSTATUS(status))
			bad = 1;
	kill(pids[2], SIGKILL);
	waitpid(pids[2], &status, 0);
	*took = *again = 0;
	for (int r = 0; r < 2 && !bad; r++) {
		char key[32];
		snprintf(key, sizeof key, "took/%d", r);
		double t = store_num(store, key);
		snprintf(key, sizeof key, "again/%d", r);
		double a = store_num(store, key);
		if (t < 0 || a < 0)
			bad = 1;
		if (t > *took)
			*took = t;
		if (a > *again)
			*again = a;
	}
	/* The next case reads its own keys. */
	for (int r = 0; r < 2; r++) {
		char key[32];
		snprintf(key, sizeof key, "took/%d", r);
		sd_dir_store_ops.set(store, key, "-1", 2, NULL);
		snprintf(key, sizeof key, "again/%d", r);
		sd_dir_store_ops.set(store, key, "-1", 2, NULL);
	}
	return bad ? -1 : 0;
}

int main(int argc, char **argv)
{
	int ranks = 2, iters = 200, opt;
	while ((opt = getopt(argc, argv, "r:i:b:")) != -1) {
		if (opt == 'r')
			ranks = atoi(optarg);
		else if (opt == 'i')
			iters = atoi(optarg);
		else if (opt == 'b' && (!strcmp(optarg, "gloo") || !strcmp(optarg, "shm")))
			backend = strcmp(optarg, "shm") ? SD_COMM_GLOO : SD_COMM_SHM;
		else {
			fprintf(stderr, "usage: %s [-r RANKS] [-i ITERATIONS] [-b gloo|shm]\n", argv[0]);
			return 2;
		}
	}
	if (ranks < 1 || ranks > 64 || iters < 1) {
		fprintf(stderr, "%s: need 1 <= RANKS <= 64 and ITERATIONS >= 1\n", argv[0]);
		return 2;
	}
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		struct sd_model *m = NULL;
		char *why = NULL;
		if (sd_model_create(&m, sizes[i].name, sizes[i].c, sizes[i].h, sizes[i].w, 10, 1, &why) < 0) {
			fprintf(stderr, "bench-allreduce: %s: %s\n", sizes[i].name, why);
			return 1;
		}
		sizes[i].floats = sd_model_param_count(m);
		sd_model_destroy(m);
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

	/* Failure detection, against the timeout the ranks were given. */
	double timeout = FAULT_TIMEOUT_MS / 1000.0, dead, dead_again, stuck, stuck_again;
	if (fault_case(101, SIGKILL, &store, &dead, &dead_again) < 0 ||
	    fault_case(102, SIGSTOP, &store, &stuck, &stuck_again) < 0) {
		fprintf(stderr, "bench-allreduce: a fault case failed\n");
		failed = 1;
	} else {
		printf("failure detection, 3 ranks, %.0f ms timeout: rank 2 SIGKILLed: the others fail after %.3f s; "
		       "SIGSTOPped: after %.3f s; a collective on the aborted communicator: %.6f s\n",
		       timeout * 1e3, dead, stuck, dead_again > stuck_again ? dead_again : stuck_again);
		bench_ratio("bench-allreduce", "dead peer noticed after / the timeout", dead / timeout, 0.25, 1);
		bench_ratio("bench-allreduce", "stuck peer given up on after / the timeout", stuck / timeout,
		            (timeout + 1.5) / timeout, 1);
		bench_ratio("bench-allreduce", "collective on an aborted communicator / the timeout",
		            (dead_again > stuck_again ? dead_again : stuck_again) / timeout, 0.05, 1);
	}
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
	return failed ? 1 : bench_exit();
}
