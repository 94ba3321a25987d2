/* tests/engine/test-comm.c - engine/comm.h with the Gloo and the shared-memory
 * backends, ranks as forked processes on this host (Gloo over loopback),
 * rendezvous through the directory store.  The multi-rank cases run once
 * per backend, their names prefixed "gloo" or "shm".
 *
 *   store       directory store round trip, key encoding, get timeout
 *   single      world size 1: no store, no network, collectives are no-ops
 *   args        argument errors and a rendezvous whose peer never comes
 *   allreduce   4 ranks, 1 Mi floats: exact sums, bit-identical on all ranks
 *   broadcast   4 ranks, 10 MB from root 2
 *   dead peer   generation 1 of 4, rank 3 SIGKILLs itself after a barrier:
 *               ranks 0-2 get SD_COMM_EPEER well within the timeout, then
 *               form generation 2 of 3 and all-reduce correctly; after
 *               both generations no descriptor or thread is left over
 *   stuck peer  as above but rank 3 stops (SIGSTOP) with its sockets open:
 *               the others must fail by timeout, not hang
 *   pair        world size 2, which all-reduces by a direct exchange of
 *               halves, not Gloo's ring: exact sums at 1, 2, 3 and 1 Mi
 *               floats and in double; then rank 1 dies (SIGKILL) or stops
 *               (SIGSTOP): rank 0 gets SD_COMM_EPEER, and from a stopped
 *               peer not before the full timeout (a wait on Gloo's pair
 *               timeout, a fifth of it, would fail early)
 *   shm only    a SIGKILLed peer is named as dead (its robust mutex), not
 *               waited out to the timeout; chunks larger than one slot;
 *               no segment is left in /dev/shm afterwards
 *
 * Built without Gloo, only store and single run (plus the "not built"
 * error) and the test reports SKIP (77).
 *
 * Every child is checked by exit status; the parent kills everything that
 * outlives its deadline, so a hang fails the test instead of blocking make.
 *
 * Times are printed, never checked against a bound that a loaded machine
 * could miss: a wait must last at least its timeout (a lower bound that no
 * load can break), and an upper bound is only a hang guard many times the
 * timeout.  How fast failures are detected is measured, with targets, by
 * tests/bench/bench-allreduce. */
#include "config.h"

#include "engine/comm.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/tmpdir.h"

#define NRANKS 4
#define TIMEOUT_MS 2000
#define ALLREDUCE_COUNT (1u << 20)
#define BROADCAST_BYTES (10u * 1000 * 1000)
/* A call that should give up after its timeout and is still waiting after
 * this long hangs (the bound is a safety net, not a speed target). */
#define HANG_S 30.0

static char g_root[256];     /* mkdtemp directory holding one store per case */
static enum sd_comm_backend g_backend = SD_COMM_GLOO;
/* Every rank process forked, for the /dev/shm leftover check. */
static pid_t g_children[256];
static int g_nchildren;
static int g_failures;

/* ---- helpers ------------------------------------------------------------ */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Prints a failure with the rank that saw it; in children the caller then
 * exits non-zero, so the parent counts it. */
static void fail(int rank, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(int rank, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "FAIL [rank %d] ", rank);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	g_failures++;
}

#define CHECK(rank, cond, ...)                                                           \
	do {                                                                             \
		if (!(cond)) {                                                           \
			fail(rank, __VA_ARGS__);                                         \
			return 1;                                                        \
		}                                                                        \
	} while (0)

/* FNV-1a over bytes: a digest each rank publishes so the parent can check
 * that all ranks hold bit-identical results. */
static uint64_t fnv1a(const void *p, size_t n)
{
	const unsigned char *b = p;
	uint64_t h = 14695981039346656037ull;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 1099511628211ull;
	}
	return h;
}

static void store_path(char *out, size_t cap, const char *name)
{
	snprintf(out, cap, "%s/%s", g_root, name);
}

static void rm_store(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *e;
	char path[512];
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		unlink(path);
	}
	closedir(d);
	rmdir(dir);
}

/* What the parent expects from each child. */
enum expect {
	EXPECT_EXIT0,     /* exits with status 0 */
	EXPECT_SELFKILL,  /* dies of SIGKILL by itself */
	EXPECT_STOPPED,   /* stops itself; the parent kills it at the end */
};

struct rank_args {
	struct sd_dir_store *store;
	int rank;
};

typedef int (*rank_fn)(struct rank_args *a);

/* Runs fn in n forked ranks over a fresh store `name` and checks every
 * child's fate against expect[] within deadline_s seconds.  Returns 1 if all
 * went as expected.  If keep is not NULL the store is handed back there (the
 * caller finishes it); otherwise it is removed when all went well. */
static int run_ranks(const char *name, int n, rank_fn fn, const enum expect *expect,
		     double deadline_s, struct sd_dir_store *keep)
{
	char dir[512];
	char *why = NULL;
	struct sd_dir_store store;
	store_path(dir, sizeof dir, name);
	if (sd_dir_store_init(&store, dir, &why) < 0) {
		fail(-1, "%s: %s", name, why);
		free(why);
		if (keep)
			keep->dir = NULL;
		return 0;
	}
	double t0 = now_s();
	pid_t pids[NRANKS];
	int done[NRANKS] = {0};
	fflush(NULL);
	for (int r = 0; r < n; r++) {
		pids[r] = fork();
		if (pids[r] < 0) {
			fail(-1, "%s: fork: %s", name, strerror(errno));
			n = r;
			break;
		}
		if (g_nchildren < (int)(sizeof g_children / sizeof g_children[0]))
			g_children[g_nchildren++] = pids[r];
		if (pids[r] == 0) {
			/* Backstop in case the parent is gone. */
			alarm((unsigned)deadline_s + 5);
			struct rank_args a = {&store, r};
			int rc = fn(&a);
			fflush(NULL);
			_exit(rc ? 1 : 0);
		}
	}
	int left = 0;
	for (int r = 0; r < n; r++)
		left += expect[r] != EXPECT_STOPPED;
	int ok = 1;
	while (left > 0) {
		int status;
		pid_t p = waitpid(-1, &status, WNOHANG);
		if (p == 0) {
			if (now_s() - t0 > deadline_s) {
				fail(-1, "%s: ranks still running after %.0f s (hang); killing them",
				     name, deadline_s);
				ok = 0;
				break;
			}
			usleep(2000);
			continue;
		}
		if (p < 0) {
			fail(-1, "%s: waitpid: %s", name, strerror(errno));
			ok = 0;
			break;
		}
		for (int r = 0; r < n; r++) {
			if (pids[r] != p)
				continue;
			done[r] = 1;
			left -= expect[r] != EXPECT_STOPPED;
			if (expect[r] == EXPECT_EXIT0 &&
			    !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
				fail(r, "%s: rank exited with status 0x%x", name, status);
				ok = 0;
			} else if (expect[r] == EXPECT_SELFKILL &&
				   !(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)) {
				fail(r, "%s: rank should have died of SIGKILL, status 0x%x", name,
				     status);
				ok = 0;
			} else if (expect[r] == EXPECT_STOPPED) {
				fail(r, "%s: stopped rank ended by itself, status 0x%x", name,
				     status);
				ok = 0;
			}
		}
	}
	/* Reap the rest: stopped ranks on purpose, others after a hang. */
	for (int r = 0; r < n; r++) {
		if (done[r])
			continue;
		kill(pids[r], SIGKILL);
		int status;
		if (waitpid(pids[r], &status, 0) == pids[r] && expect[r] == EXPECT_SELFKILL &&
		    !(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL))
			ok = 0;
	}
	printf("%-4s %-12s %s  %.2f s\n", g_backend == SD_COMM_SHM ? "shm" : "gloo", name,
	       ok ? "ok  " : "FAIL", now_s() - t0);
	if (keep) {
		*keep = store;
		return ok;
	}
	sd_dir_store_fini(&store);
	if (ok)
		rm_store(dir);
	return ok;
}

/* Entries in a /proc directory: open descriptors or threads of this process,
 * to check that destroying a communicator (even an aborted one) releases its
 * sockets and joins its transport thread. */
static int count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return -1;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* Creates the communicator of one rank, or reports why not. */
static struct sd_comm *join(struct rank_args *a, int world, long gen, int timeout_ms)
{
	struct sd_comm *c = NULL;
	char *why = NULL;
	int rc = sd_comm_create(&c, g_backend, a->rank, world, gen, &sd_dir_store_ops,
				a->store, timeout_ms, &why);
	if (rc < 0) {
		fail(a->rank, "sd_comm_create gen %ld: rc %d: %s", gen, rc, why);
		free(why);
		return NULL;
	}
	return c;
}

/* Exactly representable values whose sums over 4 ranks stay exact in float:
 * multiples of 1/4 below 1024. */
static float exact_value(int rank, size_t i)
{
	return (float)((i * 7 + (size_t)rank * 13) % 4096) * 0.25f;
}

/* Fills buf with exact_value, all-reduces it over world ranks and compares
 * every element with the exact sum. */
static int allreduce_exact(struct sd_comm *c, int world, size_t count)
{
	int rank = sd_comm_rank(c);
	char *why = NULL;
	float *buf = malloc(count * sizeof *buf);
	CHECK(rank, buf, "out of memory");
	for (size_t i = 0; i < count; i++)
		buf[i] = exact_value(rank, i);
	int rc = sd_comm_allreduce_sum(c, buf, count, &why);
	if (rc < 0) {
		fail(rank, "allreduce of %zu floats: rc %d: %s", count, rc, why);
		free(why);
		free(buf);
		return 1;
	}
	for (size_t i = 0; i < count; i++) {
		float want = 0;
		for (int r = 0; r < world; r++)
			want += exact_value(r, i);
		if (buf[i] != want) {
			fail(rank, "allreduce element %zu: got %.9g, want %.9g", i, buf[i], want);
			free(buf);
			return 1;
		}
	}
	free(buf);
	return 0;
}

/* ---- cases -------------------------------------------------------------- */

static void multi_rank_cases(void);
static int rank_chunks(struct rank_args *a);
static void shm_leftovers(void);
static unsigned char pattern(size_t i);

static void test_store(void)
{
	char dir[512], *why = NULL;
	struct sd_dir_store s;
	store_path(dir, sizeof dir, "store");
	double t0 = now_s();
	int ok = sd_dir_store_init(&s, dir, &why) == 0;
	if (!ok) {
		fail(-1, "store init: %s", why);
		free(why);
		return;
	}
	const char *key = "gen/7/a key.with/odd chars%";
	ok &= sd_dir_store_ops.set(&s, key, "hello", 5, &why) == 0;
	ok &= sd_dir_store_ops.set(&s, key, "world!", 6, &why) == 0; /* replaces */
	ok &= sd_dir_store_ops.set(&s, "empty", "", 0, &why) == 0;
	void *v = NULL;
	size_t len = 0;
	ok &= sd_dir_store_ops.get(&s, key, &v, &len, 0, &why) == 0 && len == 6 &&
	      memcmp(v, "world!", 6) == 0;
	free(v);
	v = NULL;
	ok &= sd_dir_store_ops.get(&s, "empty", &v, &len, 0, &why) == 0 && v && len == 0;
	free(v);
	v = NULL;
	double t1 = now_s();
	int rc = sd_dir_store_ops.get(&s, "gen/7/missing", &v, &len, 100, &why);
	double waited = now_s() - t1;
	if (rc != SD_COMM_ETIMEDOUT || waited < 0.09 || waited > HANG_S || !why) {
		fail(-1, "store get of a missing key: rc %d after %.3f s (%s)", rc, waited,
		     why ? why : "no message");
		ok = 0;
	}
	/* A key in a flat directory: nothing but encoded names, no subdirectory. */
	struct stat st;
	char path[600];
	snprintf(path, sizeof path, "%s/gen", dir);
	ok &= stat(path, &st) < 0;
	free(why);
	sd_dir_store_fini(&s);
	if (!ok)
		fail(-1, "store: round trip failed");
	printf("%-10s %s  %.2f s\n", "store", ok ? "ok  " : "FAIL", now_s() - t0);
	rm_store(dir);
}

static void test_single(void)
{
	double t0 = now_s();
	int before = g_failures;
	for (int b = SD_COMM_GLOO; b <= SD_COMM_NCCL; b++) {
		struct sd_comm *c = NULL;
		char *why = NULL;
		if (sd_comm_create(&c, (enum sd_comm_backend)b, 0, 1, 0, NULL, NULL, 1000, &why) < 0) {
			fail(0, "single (backend %d): %s", b, why);
			free(why);
			continue;
		}
		float f[3] = {1.5f, -2, 3};
		double d[2] = {0.1, 7};
		unsigned char bytes[4] = {1, 2, 3, 4};
		if (sd_comm_rank(c) != 0 || sd_comm_world_size(c) != 1 ||
		    sd_comm_allreduce_sum(c, f, 3, &why) < 0 ||
		    sd_comm_allreduce_sum_f64(c, d, 2, &why) < 0 ||
		    sd_comm_broadcast(c, bytes, 4, 0, &why) < 0 || sd_comm_barrier(c, &why) < 0 ||
		    f[0] != 1.5f || f[1] != -2 || f[2] != 3 || d[0] != 0.1 || d[1] != 7 ||
		    bytes[3] != 4)
			fail(0, "single (backend %d): %s", b, why ? why : "wrong result");
		if (sd_comm_broadcast(c, bytes, 4, 1, &why) != SD_COMM_EFAIL || !why)
			fail(0, "single: broadcast from root 1 of 1 should fail");
		free(why);
		sd_comm_destroy(c);
	}
	sd_comm_destroy(NULL);
	printf("%-10s %s  %.2f s\n", "single", g_failures == before ? "ok  " : "FAIL",
	       now_s() - t0);
}

static void test_args(void)
{
	double t0 = now_s();
	int before = g_failures;
	char dir[512], *why = NULL;
	struct sd_dir_store s;
	struct sd_comm *c = (struct sd_comm *)&s; /* must be reset to NULL on failure */
	store_path(dir, sizeof dir, "args");
	if (sd_dir_store_init(&s, dir, &why) < 0) {
		fail(-1, "args: %s", why);
		free(why);
		return;
	}
	if (sd_comm_create(&c, SD_COMM_GLOO, 2, 2, 0, &sd_dir_store_ops, &s, 1000, &why) !=
		    SD_COMM_EFAIL || c || !why)
		fail(-1, "create with rank == world size should fail");
	if (sd_comm_create(&c, SD_COMM_GLOO, 0, 2, 0, &sd_dir_store_ops, &s, 0, &why) !=
		    SD_COMM_EFAIL)
		fail(-1, "create with timeout 0 should fail");
	if (sd_comm_create(&c, SD_COMM_GLOO, 0, 2, 0, NULL, NULL, 1000, &why) != SD_COMM_EFAIL)
		fail(-1, "create of world size 2 without a store should fail");
	/* Rank 1 never comes: rank 0 must give up, and not before the timeout. */
	double t1 = now_s();
	int rc = sd_comm_create(&c, SD_COMM_GLOO, 0, 2, 5, &sd_dir_store_ops, &s, 300, &why);
	double waited = now_s() - t1;
	if (rc != SD_COMM_ETIMEDOUT || c || waited < 0.27 || waited > HANG_S)
		fail(-1, "lonely rendezvous: rc %d after %.2f s: %s", rc, waited, why);
	else
		printf("           lonely rendezvous fails after %.2f s: %s\n", waited, why);
	free(why);
	sd_dir_store_fini(&s);
	rm_store(dir);
	printf("%-10s %s  %.2f s\n", "args", g_failures == before ? "ok  " : "FAIL", now_s() - t0);
}

static int rank_allreduce(struct rank_args *a)
{
	int rank = a->rank;
	char *why = NULL;
	struct sd_comm *c = join(a, NRANKS, 1, TIMEOUT_MS);
	if (!c)
		return 1;
	CHECK(rank, sd_comm_rank(c) == rank && sd_comm_world_size(c) == NRANKS &&
			    sd_comm_generation(c) == 1, "rank/world size/generation getters");
	if (allreduce_exact(c, NRANKS, ALLREDUCE_COUNT) || allreduce_exact(c, NRANKS, 3) ||
	    allreduce_exact(c, NRANKS, 1))
		return 1;

	/* Values whose float sums depend on the order of addition: results
	 * must still be bit-identical on every rank (checked by the parent
	 * through the digests) and close to the exact sum. */
	size_t n = ALLREDUCE_COUNT;
	float *buf = malloc(n * sizeof *buf);
	CHECK(rank, buf, "out of memory");
	for (size_t i = 0; i < n; i++)
		buf[i] = 1.0f / (float)(1 + i % 977 + (size_t)rank * 3) + 1e-3f * (float)rank;
	int rc = sd_comm_allreduce_sum(c, buf, n, &why);
	CHECK(rank, rc == 0, "allreduce: %s", why);
	for (size_t i = 0; i < n; i++) {
		double want = 0;
		for (int r = 0; r < NRANKS; r++)
			want += (double)(1.0f / (float)(1 + i % 977 + (size_t)r * 3) +
					 1e-3f * (float)r);
		CHECK(rank, fabs(buf[i] - want) <= 1e-6 * fabs(want) + 1e-7,
		      "inexact allreduce element %zu: got %.9g, want %.9g", i, buf[i], want);
	}
	char key[64], digest[32];
	snprintf(key, sizeof key, "digest/%d", rank);
	snprintf(digest, sizeof digest, "%016llx", (unsigned long long)fnv1a(buf, n * sizeof *buf));
	free(buf);
	CHECK(rank, sd_dir_store_ops.set(a->store, key, digest, 16, &why) == 0, "%s", why);

	double m[3] = {rank, 1.0, 0.1 * rank};
	rc = sd_comm_allreduce_sum_f64(c, m, 3, &why);
	CHECK(rank, rc == 0, "allreduce f64: %s", why);
	CHECK(rank, m[0] == 6 && m[1] == 4 && fabs(m[2] - 0.6) < 1e-12,
	      "allreduce f64: got %g %g %g", m[0], m[1], m[2]);
	CHECK(rank, sd_comm_barrier(c, &why) == 0, "barrier: %s", why);
	sd_comm_destroy(c);
	return 0;
}

static void test_allreduce(void)
{
	static const enum expect all_exit[NRANKS] = {0};
	struct sd_dir_store store;
	char dir[512], *why = NULL;
	if (!run_ranks("allreduce", NRANKS, rank_allreduce, all_exit, 60, &store)) {
		sd_dir_store_fini(&store);
		return;
	}
	/* Bit-identical results: every rank published a digest of its sums. */
	char first[17] = "";
	int ok = 1;
	for (int r = 0; r < NRANKS; r++) {
		char key[64];
		void *v = NULL;
		size_t len = 0;
		snprintf(key, sizeof key, "digest/%d", r);
		if (sd_dir_store_ops.get(&store, key, &v, &len, 0, &why) < 0 || len != 16) {
			fail(r, "allreduce: no digest: %s", why ? why : "bad length");
			ok = 0;
		} else if (r == 0) {
			memcpy(first, v, 16);
		} else if (memcmp(first, v, 16) != 0) {
			fail(r, "allreduce: result differs from rank 0's (digest %.16s vs %s)",
			     (char *)v, first);
			ok = 0;
		}
		free(v);
	}
	free(why);
	if (ok)
		printf("           all ranks bit-identical (digest %s)\n", first);
	store_path(dir, sizeof dir, "allreduce");
	sd_dir_store_fini(&store);
	if (ok)
		rm_store(dir);
}

static unsigned char pattern(size_t i)
{
	return (unsigned char)(i * 31 + (i >> 13));
}

static int rank_broadcast(struct rank_args *a)
{
	int rank = a->rank;
	char *why = NULL;
	struct sd_comm *c = join(a, NRANKS, 1, TIMEOUT_MS);
	if (!c)
		return 1;
	unsigned char *buf = malloc(BROADCAST_BYTES);
	CHECK(rank, buf, "out of memory");
	for (size_t i = 0; i < BROADCAST_BYTES; i++)
		buf[i] = rank == 2 ? pattern(i) : 0xEE;
	int rc = sd_comm_broadcast(c, buf, BROADCAST_BYTES, 2, &why);
	CHECK(rank, rc == 0, "broadcast: rc %d: %s", rc, why);
	for (size_t i = 0; i < BROADCAST_BYTES; i++)
		CHECK(rank, buf[i] == pattern(i), "broadcast byte %zu: got 0x%02x, want 0x%02x", i,
		      buf[i], pattern(i));
	free(buf);
	/* An out-of-range root is refused before any traffic. */
	CHECK(rank, sd_comm_broadcast(c, &rc, sizeof rc, NRANKS, &why) == SD_COMM_EFAIL,
	      "broadcast from root %d of %d should fail", NRANKS, NRANKS);
	CHECK(rank, !sd_comm_is_aborted(c), "argument error must not abort the communicator");
	CHECK(rank, sd_comm_barrier(c, &why) == 0, "barrier: %s", why);
	free(why);
	sd_comm_destroy(c);
	return 0;
}

/* An all-reduce while rank `gone` has left: it must fail with
 * SD_COMM_EPEER and a one-line message (kept in *why) rather than hang (the
 * parent's deadline); how fast is tests/bench/bench-allreduce's business,
 * *took says how long it took.  Returns 0, or 1 after reporting. */
static int allreduce_without(struct sd_comm *c, int gone, double *took, char **why)
{
	int rank = sd_comm_rank(c);
	float *buf = malloc(ALLREDUCE_COUNT * sizeof *buf);
	CHECK(rank, buf, "out of memory");
	for (size_t i = 0; i < ALLREDUCE_COUNT; i++)
		buf[i] = exact_value(rank, i);
	double t0 = now_s();
	int rc = sd_comm_allreduce_sum(c, buf, ALLREDUCE_COUNT, why);
	*took = now_s() - t0;
	free(buf);
	CHECK(rank, rc == SD_COMM_EPEER, "allreduce with rank %d gone: rc %d, want %d (%s)", gone, rc,
	      SD_COMM_EPEER, *why ? *why : "");
	CHECK(rank, *why && !strchr(*why, '\n'), "error message missing or not one line");
	printf("           rank %d: failed after %.3f s: %s\n", rank, *took, *why);
	CHECK(rank, *took < HANG_S, "allreduce took %.2f s to fail", *took);
	return 0;
}

/* Shared by the dead-peer and stuck-peer cases: how rank 3 leaves. */
static int g_leave_signal;

/* shm: a killed peer is seen dead (its robust mutex), never waited out to
 * the timeout; a stopped one is waited out, never called dead.  A rank may
 * instead see the abort of a peer that noticed first.  1 after reporting. */
static int shm_wrong_reason(const char *why)
{
	int dead = strstr(why, " died ") != NULL, timeout = strstr(why, " within ") != NULL;
	int aborted = strstr(why, "aborted the group") != NULL;
	int ok = g_leave_signal == SIGKILL ? (dead || aborted) && !timeout
	                                   : (timeout || aborted) && !dead;
	if (!ok)
		fail(-1, "shm: a peer %s, but the collective said '%s'",
		     g_leave_signal == SIGKILL ? "was killed" : "stopped", why);
	return !ok;
}

static int rank_fault(struct rank_args *a)
{
	int rank = a->rank;
	char *why = NULL;
	int fds = count_entries("/proc/self/fd"), threads = count_entries("/proc/self/task");
	struct sd_comm *c = join(a, NRANKS, 1, TIMEOUT_MS);
	if (!c)
		return 1;
	/* Make sure everyone is connected before rank 3 leaves, so what is
	 * tested is a failing collective and not a failing rendezvous. */
	CHECK(rank, sd_comm_barrier(c, &why) == 0, "barrier: %s", why);
	if (rank == 3) {
		raise(g_leave_signal);
		/* SIGSTOP: the parent SIGKILLs us once the others are done. */
		for (;;)
			pause();
	}
	double took;
	if (allreduce_without(c, 3, &took, &why))
		return 1;
	(void)took;
	/* Shared memory tells a dead peer (its robust mutex) from a stuck
	 * one (the timeout). */
	if (g_backend == SD_COMM_SHM && shm_wrong_reason(why))
		return 1;
	CHECK(rank, sd_comm_is_aborted(c), "communicator should be aborted");
	/* A collective on an aborted communicator fails at once, without
	 * touching the transport: the error is the communicator's own. */
	float x = 1;
	free(why);
	why = NULL;
	int rc = sd_comm_allreduce_sum(c, &x, 1, &why);
	CHECK(rank, rc == SD_COMM_EPEER && why && strstr(why, "was aborted by an earlier"),
	      "a collective on an aborted communicator: rc %d, '%s'", rc, why ? why : "(none)");
	sd_comm_destroy(c);

	/* The survivors re-form without rank 3. */
	c = join(a, NRANKS - 1, 2, TIMEOUT_MS);
	if (!c)
		return 1;
	if (allreduce_exact(c, NRANKS - 1, ALLREDUCE_COUNT))
		return 1;
	CHECK(rank, sd_comm_barrier(c, &why) == 0, "barrier in generation 2: %s", why);
	free(why);
	sd_comm_destroy(c);
	int fds_after = count_entries("/proc/self/fd");
	int threads_after = count_entries("/proc/self/task");
	CHECK(rank, fds_after == fds && threads_after == threads,
	      "leak after two generations: %d -> %d descriptors, %d -> %d threads", fds,
	      fds_after, threads, threads_after);
	return 0;
}

/* The pair case: see the top. */
static int rank_pair(struct rank_args *a)
{
	int rank = a->rank;
	char *why = NULL;
	struct sd_comm *c = join(a, 2, 1, TIMEOUT_MS);
	if (!c)
		return 1;
	static const size_t counts[] = { 1, 2, 3, ALLREDUCE_COUNT };
	for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
		if (allreduce_exact(c, 2, counts[i]))
			return 1;
	double m[3] = { rank + 1, 0.5, 1e-3 * rank };
	CHECK(rank, sd_comm_allreduce_sum_f64(c, m, 3, &why) == 0, "allreduce f64: %s", why);
	CHECK(rank, m[0] == 3 && m[1] == 1 && m[2] == 1e-3, "allreduce f64: got %g %g %g", m[0], m[1],
	      m[2]);
	CHECK(rank, sd_comm_barrier(c, &why) == 0, "barrier: %s", why);
	if (rank == 1) {
		raise(g_leave_signal);
		for (;;)
			pause();
	}
	double took;
	if (allreduce_without(c, 1, &took, &why))
		return 1;
	if (g_backend == SD_COMM_SHM && shm_wrong_reason(why))
		return 1;
	if (g_leave_signal == SIGSTOP)
		CHECK(rank, took >= TIMEOUT_MS / 1000.0 * 0.95,
		      "a stopped peer failed the pair after %.3f s, before the %d ms timeout", took,
		      TIMEOUT_MS);
	free(why);
	sd_comm_destroy(c);
	return 0;
}

/* shm: buffers of several slots (2 MiB each) and not a multiple of one,
 * both ways (float sums, double sums, a broadcast from rank 1). */
static int rank_chunks(struct rank_args *a)
{
	int rank = a->rank;
	char *why = NULL;
	struct sd_comm *c = join(a, 2, 1, TIMEOUT_MS);
	if (!c)
		return 1;
	size_t n = (5u << 20) / sizeof(float) + 7;
	if (allreduce_exact(c, 2, n))
		return 1;
	size_t nd = (3u << 20) / sizeof(double) + 3;
	double *d = malloc(nd * sizeof *d);
	CHECK(rank, d, "out of memory");
	for (size_t i = 0; i < nd; i++)
		d[i] = (double)i * 0.5 + rank;
	CHECK(rank, sd_comm_allreduce_sum_f64(c, d, nd, &why) == 0, "allreduce f64: %s", why);
	for (size_t i = 0; i < nd; i++)
		CHECK(rank, d[i] == (double)i + 1, "f64 element %zu: got %.17g, want %zu", i, d[i],
		      i + 1);
	free(d);
	size_t nb = (4u << 20) + 13;
	unsigned char *b = malloc(nb);
	CHECK(rank, b, "out of memory");
	for (size_t i = 0; i < nb; i++)
		b[i] = rank == 1 ? pattern(i) : 0;
	CHECK(rank, sd_comm_broadcast(c, b, nb, 1, &why) == 0, "broadcast: %s", why);
	for (size_t i = 0; i < nb; i++)
		CHECK(rank, b[i] == pattern(i), "broadcast byte %zu", i);
	free(b);
	CHECK(rank, sd_comm_barrier(c, &why) == 0, "barrier: %s", why);
	sd_comm_destroy(c);
	return 0;
}

/* No shared-memory segment of ours is left in /dev/shm after all the
 * cases above (their creators were this test's children). */
static void shm_leftovers(void)
{
	DIR *d = opendir("/dev/shm");
	if (!d) {
		fail(-1, "shm: cannot read /dev/shm: %s", strerror(errno));
		return;
	}
	struct dirent *e;
	int left = 0;
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, "spotdeck-comm-", 14))
			continue;
		/* Only ours: the name gives the creator's pid namespace and pid. */
		char *end;
		strtoul(e->d_name + 14, &end, 10);
		long pid = *end == '-' ? strtol(end + 1, NULL, 10) : 0;
		int ours = 0;
		for (int i = 0; i < g_nchildren; i++)
			ours |= (long)g_children[i] == pid;
		if (ours) {
			fail(-1, "shm: segment %s left in /dev/shm", e->d_name);
			left++;
		}
	}
	closedir(d);
	printf("shm  %-12s %s\n", "leftovers", left ? "FAIL" : "ok  ");
}

/* A rank 0 killed between creating its segment and every rank mapping it
 * leaves the segment behind; the next rendezvous on the host removes it,
 * but only one made in its own pid namespace (a pid from another, as
 * between containers sharing /dev/shm, says nothing here), and never one
 * whose creator lives. */
static void shm_sweep(void)
{
	struct stat st;
	if (stat("/proc/self/ns/pid", &st) < 0) {
		printf("shm  %-12s skipped: no /proc/self/ns/pid\n", "sweep");
		return;
	}
	pid_t gone = fork();
	if (gone == 0)
		_exit(0);
	waitpid(gone, NULL, 0);
	char stale[96], foreign[96], live[96];
	snprintf(stale, sizeof stale, "/spotdeck-comm-%lu-%ld-0-00000000", (unsigned long)st.st_ino,
	         (long)gone);
	snprintf(foreign, sizeof foreign, "/spotdeck-comm-%lu-%ld-0-00000000",
	         (unsigned long)st.st_ino + 1, (long)gone);
	snprintf(live, sizeof live, "/spotdeck-comm-%lu-%ld-0-00000000", (unsigned long)st.st_ino,
	         (long)getpid());
	const char *names[3] = {stale, foreign, live};
	for (int i = 0; i < 3; i++) {
		int fd = shm_open(names[i], O_CREAT | O_RDWR, 0600);
		if (fd < 0) {
			fail(-1, "shm sweep: shm_open %s: %s", names[i], strerror(errno));
			return;
		}
		close(fd);
	}
	static const enum expect pair_exit[2] = {EXPECT_EXIT0, EXPECT_EXIT0};
	run_ranks("sweep rdv", 2, rank_chunks, pair_exit, 60, NULL);
	int kept[3];
	for (int i = 0; i < 3; i++) {
		int fd = shm_open(names[i], O_RDWR, 0);
		kept[i] = fd >= 0;
		if (fd >= 0) {
			close(fd);
			shm_unlink(names[i]);
		}
	}
	if (kept[0])
		fail(-1, "shm sweep: %s (creator pid %ld gone, this pid namespace) was not removed",
		     stale, (long)gone);
	if (!kept[1])
		fail(-1, "shm sweep: %s (another pid namespace) was removed", foreign);
	if (!kept[2])
		fail(-1, "shm sweep: %s (creator alive) was removed", live);
	printf("shm  %-12s %s\n", "sweep", !kept[0] && kept[1] && kept[2] ? "ok  " : "FAIL");
}

int main(void)
{
	/* Everything below reports failures itself; buffered output from the
	 * children must not be duplicated by forks. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	make_tmpdir(g_root, sizeof g_root, "test-comm-XXXXXX");
	double t0 = now_s();

	test_store();
	test_single();
#ifndef HAVE_GLOO
	struct sd_comm *c = NULL;
	char *why = NULL;
	struct sd_dir_store s = {g_root};
	if (sd_comm_create(&c, SD_COMM_GLOO, 0, 2, 0, &sd_dir_store_ops, &s, 100, &why) !=
		    SD_COMM_ENOTBUILT || !why)
		fail(0, "world size 2 without Gloo should fail with SD_COMM_ENOTBUILT");
	else
		printf("           %s\n", why);
	free(why);
	fprintf(stderr, "SKIP: built without Gloo (Debian package libgloo-dev): the multi-rank cases\n");
	rmdir(g_root);
	return g_failures ? 1 : 77;
#endif
	test_args();
	for (int b = 0; b < 2; b++) {
		g_backend = b ? SD_COMM_SHM : SD_COMM_GLOO;
		multi_rank_cases();
	}
	if (g_backend == SD_COMM_SHM) {
		shm_sweep();
		shm_leftovers();
	}

	printf("total      %.2f s, %d failure(s)\n", now_s() - t0, g_failures);
	if (!g_failures)
		rmdir(g_root);
	else
		printf("stores kept in %s\n", g_root);
	return g_failures ? 1 : 0;
}

static void multi_rank_cases(void)
{
	test_allreduce();

	static const enum expect all_exit[NRANKS] = {0};
	run_ranks("broadcast", NRANKS, rank_broadcast, all_exit, 60, NULL);

	static const enum expect dead[NRANKS] = {EXPECT_EXIT0, EXPECT_EXIT0, EXPECT_EXIT0,
						 EXPECT_SELFKILL};
	g_leave_signal = SIGKILL;
	run_ranks("dead peer", NRANKS, rank_fault, dead, 60, NULL);

	static const enum expect stuck[NRANKS] = {EXPECT_EXIT0, EXPECT_EXIT0, EXPECT_EXIT0,
						  EXPECT_STOPPED};
	g_leave_signal = SIGSTOP;
	run_ranks("stuck peer", NRANKS, rank_fault, stuck, 60, NULL);

	static const enum expect pair_dead[2] = {EXPECT_EXIT0, EXPECT_SELFKILL};
	static const enum expect pair_stuck[2] = {EXPECT_EXIT0, EXPECT_STOPPED};
	g_leave_signal = SIGKILL;
	run_ranks("pair dead", 2, rank_pair, pair_dead, 60, NULL);
	g_leave_signal = SIGSTOP;
	run_ranks("pair stuck", 2, rank_pair, pair_stuck, 60, NULL);
	static const enum expect pair_exit[2] = {EXPECT_EXIT0, EXPECT_EXIT0};
	if (g_backend == SD_COMM_SHM)
		run_ranks("chunks", 2, rank_chunks, pair_exit, 60, NULL);
}
