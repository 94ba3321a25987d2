/* engine/comm-shm.c - the shared-memory backend of engine/comm.h, for a
 * generation whose ranks all run on one host (the same kernel, IPC
 * namespace and /dev/shm: sd_comm_choose_backend checks that).
 *
 * Why not Gloo there: Gloo's only transport in Debian is TCP, and on one
 * host every gradient byte then crosses the kernel's loopback twice, on the
 * cores that compute (measured: about 2 ms of a 18 ms step for
 * cnn's 1.8 MB at 2 ranks).  Here a rank copies its buffer into its slot of
 * a POSIX shared-memory segment, each rank sums its share of the elements
 * over all slots (in rank order, so every element is reduced once, in a
 * fixed order: the result is bit-identical on every rank and independent of
 * timing), and every rank copies the sum back: 3 passes over memory and two
 * barriers per chunk of SHM_SLOT_BYTES.
 *
 * Segment layout: a header (magic, world size, the barrier counter, the
 * abort flag), one robust process-shared mutex per rank, each on a cache
 * line of its own, then two sets of slots (world_size x SHM_SLOT_BYTES
 * each).  Consecutive operations alternate between the two sets, so an
 * operation needs no barrier after its last read: the next use of the same
 * set is two operations later, behind a barrier every rank passes only
 * after that read.
 *
 * Waiting: a barrier spins briefly, then sleeps on a futex on the counter
 * (a rank that arrives wakes sleepers).  A sleeper wakes every
 * SHM_CHECK_MS to see whether a peer is gone: each rank holds its own
 * robust mutex from the rendezvous to sd_comm_destroy, so a peer that died
 * shows as EOWNERDEAD (the kernel releases robust mutexes of a dead thread)
 * and a peer that left as an unheld mutex.  A peer that is alive but stuck
 * fails the collective after timeout_ms, as on Gloo.  abort() sets the
 * segment's abort flag and wakes everybody, so peers still waiting fail at
 * once.
 *
 * The segment is unlinked as soon as every rank has mapped it, so nothing
 * stays in /dev/shm after the ranks exit, however they exit.  A rank 0
 * killed during the rendezvous can leave one behind; the next rendezvous
 * on the host removes segments whose creator no longer exists (in its pid
 * namespace: the name records which).
 */
#include "config.h"

#include "engine/comm-backend.h"
#include "src/base/errors.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdarg.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* One rank's slot: the most bytes one barrier round moves per rank.  2 MiB
 * holds cnn's and resnet32's whole gradient (1.8 MB) in one round; two sets
 * of world_size slots make the segment 4 MiB per rank. */
#define SHM_SLOT_BYTES ((size_t)2 << 20)
/* Each rank's share of a chunk starts on a 64-byte line (16 floats). */
#define SHM_LINE 64
/* How often a waiting rank checks its peers' mutexes. */
#define SHM_CHECK_MS 5
/* Spins before sleeping on the futex (a few microseconds). */
#define SHM_SPINS 256
#define SHM_MAGIC 0x53444d31u /* "SDM1" */
/* Name prefix in /dev/shm:
 * spotdeck-comm-<creator's pid namespace inode>-<creator pid>-<generation>-<random>. */
#define SHM_PREFIX "spotdeck-comm-"

struct shm_rank {
	pthread_mutex_t alive;
	char pad[SHM_LINE - sizeof(pthread_mutex_t) % SHM_LINE];
};

struct shm_header {
	uint32_t magic;
	uint32_t world;
	uint64_t slot_bytes;
	_Atomic uint32_t attached;
	char pad0[SHM_LINE - 20];
	/* Barrier k (k = 1, 2, ...) is passed when arrive reaches k * world
	 * (mod 2^32); the futex word. */
	_Atomic uint32_t arrive;
	_Atomic uint32_t sleepers;
	_Atomic uint32_t aborted;
	char pad1[SHM_LINE - 12];
	struct shm_rank ranks[];
};

struct shm_comm {
	struct shm_header *h;
	size_t map_bytes;
	size_t slot_bytes;
	unsigned char *slots[2]; /* set s: slots[s] + rank * slot_bytes */
	int rank, world, timeout_ms;
	int locked;              /* this rank holds ranks[rank].alive */
	uint32_t passed;         /* barriers this rank has passed */
	int set;                 /* the slot set the next operation uses */
	char name[96];
};

static size_t header_bytes(int world)
{
	size_t b = sizeof(struct shm_header) + (size_t)world * sizeof(struct shm_rank);
	return (b + 4095) & ~(size_t)4095;
}

size_t sd_comm_shm_bytes(int world)
{
	return header_bytes(world) + 2 * (size_t)world * SHM_SLOT_BYTES;
}

static double mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* sd_why, returning code instead of -1. */
static int why_code(char **why, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int why_code(char **why, int code, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	sd_why(why, "%s", msg);
	return code;
}

static void futex_wake_all(_Atomic uint32_t *w)
{
	syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static void futex_wait_ms(_Atomic uint32_t *w, uint32_t val, int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT, val, &ts, NULL, 0);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/* 0 while every peer holds its mutex; else SD_COMM_EPEER with *why naming
 * the first peer that died or left. */
static int peers_alive(struct shm_comm *c, char **why)
{
	for (int r = 0; r < c->world; r++) {
		if (r == c->rank)
			continue;
		pthread_mutex_t *m = &c->h->ranks[r].alive;
		int e = pthread_mutex_trylock(m);
		if (e == EBUSY)
			continue;
		if (e == 0) {
			pthread_mutex_unlock(m);
			return why_code(why, SD_COMM_EPEER, "comm (shm): rank %d left the group", r);
		}
		if (e == EOWNERDEAD) {
			/* Leave it marked, so every other peer sees the death too. */
			pthread_mutex_unlock(m);
		}
		return why_code(why, SD_COMM_EPEER, "comm (shm): rank %d died (process gone)", r);
	}
	return 0;
}

/* Waits until every rank has arrived at this rank's next barrier. */
static int shm_barrier_wait(struct shm_comm *c, const char *op, char **why)
{
	struct shm_header *h = c->h;
	uint32_t target = (c->passed + 1) * (uint32_t)c->world;
	uint32_t cur = atomic_fetch_add(&h->arrive, 1) + 1;
	if (atomic_load(&h->sleepers))
		futex_wake_all(&h->arrive);
	int spins = 0;
	double start = 0, last_check = 0;
	while ((int32_t)(cur - target) < 0) {
		if (atomic_load(&h->aborted))
			return why_code(why, SD_COMM_EPEER,
			                   "comm (shm) %s: a peer aborted the group", op);
		if (spins < SHM_SPINS) {
			spins++;
			cpu_relax();
			cur = atomic_load(&h->arrive);
			continue;
		}
		double now = mono_ms();
		if (start == 0)
			start = last_check = now;
		if (now - last_check >= SHM_CHECK_MS) {
			last_check = now;
			int rc = peers_alive(c, why);
			if (rc < 0)
				return rc;
		}
		if (now - start >= c->timeout_ms)
			return why_code(why, SD_COMM_EPEER,
			                   "comm (shm) %s: peers did not arrive within %d ms", op,
			                   c->timeout_ms);
		atomic_fetch_add(&h->sleepers, 1);
		cur = atomic_load(&h->arrive);
		if ((int32_t)(cur - target) < 0 && !atomic_load(&h->aborted))
			futex_wait_ms(&h->arrive, cur, SHM_CHECK_MS);
		atomic_fetch_sub(&h->sleepers, 1);
		cur = atomic_load(&h->arrive);
	}
	c->passed++;
	return 0;
}

static unsigned char *slot(struct shm_comm *c, int set, int rank)
{
	return c->slots[set] + (size_t)rank * c->slot_bytes;
}

/* Element range [*lo, *hi) of a chunk of n elements of size esz that rank r
 * reduces: equal shares, each starting on a cache line. */
static void share(size_t n, size_t esz, int r, int world, size_t *lo, size_t *hi)
{
	size_t per_line = SHM_LINE / esz;
	size_t lines = (n + per_line - 1) / per_line;
	size_t a = lines * (size_t)r / (size_t)world, b = lines * (size_t)(r + 1) / (size_t)world;
	*lo = a * per_line < n ? a * per_line : n;
	*hi = b * per_line < n ? b * per_line : n;
}

static void reduce_f32(struct shm_comm *c, int set, size_t lo, size_t hi)
{
	float *dst = (float *)slot(c, set, 0);
	for (int q = 1; q < c->world; q++) {
		const float *src = (const float *)slot(c, set, q);
		for (size_t i = lo; i < hi; i++)
			dst[i] += src[i];
	}
}

static void reduce_f64(struct shm_comm *c, int set, size_t lo, size_t hi)
{
	double *dst = (double *)slot(c, set, 0);
	for (int q = 1; q < c->world; q++) {
		const double *src = (const double *)slot(c, set, q);
		for (size_t i = lo; i < hi; i++)
			dst[i] += src[i];
	}
}

/* The all-reduce of count elements of size esz, a slot at a time. */
static int shm_allreduce(struct shm_comm *c, void *buf, size_t count, size_t esz,
                         void (*reduce)(struct shm_comm *, int, size_t, size_t), char **why)
{
	size_t per = c->slot_bytes / esz;
	for (size_t off = 0; off < count; off += per) {
		size_t n = count - off < per ? count - off : per;
		unsigned char *b = (unsigned char *)buf + off * esz;
		int s = c->set;
		c->set ^= 1;
		memcpy(slot(c, s, c->rank), b, n * esz);
		int rc = shm_barrier_wait(c, "allreduce", why);
		if (rc < 0)
			return rc;
		size_t lo, hi;
		share(n, esz, c->rank, c->world, &lo, &hi);
		reduce(c, s, lo, hi);
		rc = shm_barrier_wait(c, "allreduce", why);
		if (rc < 0)
			return rc;
		memcpy(b, slot(c, s, 0), n * esz);
	}
	return 0;
}

static int shm_allreduce_f32(void *impl, float *buf, size_t count, char **why)
{
	return shm_allreduce(impl, buf, count, sizeof(float), reduce_f32, why);
}

static int shm_allreduce_f64(void *impl, double *buf, size_t count, char **why)
{
	return shm_allreduce(impl, buf, count, sizeof(double), reduce_f64, why);
}

static int shm_broadcast(void *impl, void *buf, size_t bytes, int root, char **why)
{
	struct shm_comm *c = impl;
	for (size_t off = 0; off < bytes; off += c->slot_bytes) {
		size_t n = bytes - off < c->slot_bytes ? bytes - off : c->slot_bytes;
		unsigned char *b = (unsigned char *)buf + off;
		int s = c->set;
		c->set ^= 1;
		if (c->rank == root)
			memcpy(slot(c, s, root), b, n);
		int rc = shm_barrier_wait(c, "broadcast", why);
		if (rc < 0)
			return rc;
		if (c->rank != root)
			memcpy(b, slot(c, s, root), n);
	}
	return 0;
}

static int shm_barrier(void *impl, char **why)
{
	struct shm_comm *c = impl;
	/* A barrier uses no slots, but the set still turns: the operation two
	 * ahead may write the set the previous one read. */
	c->set ^= 1;
	return shm_barrier_wait(c, "barrier", why);
}

static void shm_abort(void *impl)
{
	struct shm_comm *c = impl;
	if (!c || !c->h)
		return;
	atomic_store(&c->h->aborted, 1);
	futex_wake_all(&c->h->arrive);
}

static void shm_destroy(void *impl)
{
	struct shm_comm *c = impl;
	if (!c)
		return;
	if (c->h) {
		if (c->locked)
			pthread_mutex_unlock(&c->h->ranks[c->rank].alive);
		munmap(c->h, c->map_bytes);
	}
	free(c);
}

/* The inode of this process's pid namespace (0 if unknown): a pid in a
 * segment's name means something only in the namespace it came from, and
 * containers that share /dev/shm and IPC (docker --ipc=host) need not
 * share pids. */
static unsigned long pid_ns(void)
{
	struct stat st;
	return stat("/proc/self/ns/pid", &st) == 0 ? (unsigned long)st.st_ino : 0;
}

/* Removes segments in /dev/shm made by a rank 0 that no longer exists (it
 * died between creating one and every rank mapping it): only those made in
 * this pid namespace, where the creator's pid can be looked up. */
static void sweep_stale(void)
{
	unsigned long ns = pid_ns();
	DIR *d = opendir("/dev/shm");
	if (!d || !ns) {
		if (d)
			closedir(d);
		return;
	}
	struct dirent *e;
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, SHM_PREFIX, strlen(SHM_PREFIX)))
			continue;
		char *end;
		unsigned long ens = strtoul(e->d_name + strlen(SHM_PREFIX), &end, 10);
		if (ens != ns || *end != '-')
			continue;
		long pid = strtol(end + 1, NULL, 10);
		if (pid > 0 && kill((pid_t)pid, 0) < 0 && errno == ESRCH) {
			char n[300];
			snprintf(n, sizeof n, "/%s", e->d_name);
			shm_unlink(n);
		}
	}
	closedir(d);
}

static int init_mutexes(struct shm_header *h, int world, char **why)
{
	pthread_mutexattr_t a;
	if (pthread_mutexattr_init(&a) || pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED) ||
	    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST))
		return sd_why(why, "comm (shm): robust process-shared mutexes unsupported");
	for (int r = 0; r < world; r++)
		if (pthread_mutex_init(&h->ranks[r].alive, &a)) {
			pthread_mutexattr_destroy(&a);
			return sd_why(why, "comm (shm): pthread_mutex_init failed");
		}
	pthread_mutexattr_destroy(&a);
	return 0;
}

static int shm_create(void **impl, int rank, int world, const char *key_prefix,
                      const struct sd_store_ops *store, void *store_ctx, int timeout_ms,
                      char **why)
{
	*impl = NULL;
	struct shm_comm *c = sd_calloc(1, sizeof *c);
	c->rank = rank;
	c->world = world;
	c->timeout_ms = timeout_ms;
	c->slot_bytes = SHM_SLOT_BYTES;
	size_t hb = header_bytes(world);
	c->map_bytes = sd_comm_shm_bytes(world);
	char key[160];
	snprintf(key, sizeof key, "%sshm/name", key_prefix);
	double deadline = mono_ms() + timeout_ms;
	int fd = -1, rc = 0;
	if (rank == 0) {
		sweep_stale();
		unsigned rnd = (unsigned)(mono_ms() * 1000) ^ ((unsigned)getpid() << 12);
		/* "gen/<g>/" names the generation: keep <g>. */
		const char *g = key_prefix + (strncmp(key_prefix, "gen/", 4) ? 0 : 4);
		int glen = (int)strcspn(g, "/");
		snprintf(c->name, sizeof c->name, "/" SHM_PREFIX "%lu-%ld-%.*s-%08x", pid_ns(),
		         (long)getpid(), glen > 30 ? 30 : glen, g, rnd);
		fd = shm_open(c->name, O_CREAT | O_EXCL | O_RDWR, 0600);
		if (fd < 0) {
			rc = sd_why(why, "comm (shm): shm_open %s: %s", c->name, strerror(errno));
			goto fail;
		}
		/* Reserved now: tmpfs would otherwise hand out pages at the
		 * first touch, and a full /dev/shm would then kill a rank with
		 * SIGBUS in the middle of a collective. */
		int e = posix_fallocate(fd, 0, (off_t)c->map_bytes);
		if (e) {
			rc = sd_why(why, "comm (shm): %zu bytes in /dev/shm: %s", c->map_bytes,
			            strerror(e));
			goto fail;
		}
	} else {
		void *v = NULL;
		size_t len = 0;
		rc = store->get(store_ctx, key, &v, &len, timeout_ms, why);
		if (rc < 0)
			goto fail;
		snprintf(c->name, sizeof c->name, "%.*s", (int)(len < 95 ? len : 95), (char *)v);
		free(v);
		fd = shm_open(c->name, O_RDWR, 0);
		if (fd < 0) {
			rc = why_code(why, SD_COMM_EPEER, "comm (shm): shm_open %s: %s", c->name,
			                 strerror(errno));
			goto fail;
		}
		struct stat st;
		if (fstat(fd, &st) < 0 || (size_t)st.st_size != c->map_bytes) {
			rc = sd_why(why, "comm (shm): %s is not a segment for %d ranks", c->name, world);
			goto fail;
		}
	}
	void *m = mmap(NULL, c->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		rc = sd_why(why, "comm (shm): mmap %zu bytes: %s", c->map_bytes, strerror(errno));
		goto fail;
	}
	close(fd);
	fd = -1;
	c->h = m;
	c->slots[0] = (unsigned char *)m + hb;
	c->slots[1] = c->slots[0] + (size_t)world * c->slot_bytes;
	if (rank == 0) {
		c->h->world = (uint32_t)world;
		c->h->slot_bytes = c->slot_bytes;
		if ((rc = init_mutexes(c->h, world, why)) < 0)
			goto fail;
		c->h->magic = SHM_MAGIC;
		rc = store->set(store_ctx, key, c->name + 0, strlen(c->name), why);
		if (rc < 0)
			goto fail;
	} else if (c->h->magic != SHM_MAGIC || c->h->world != (uint32_t)world ||
	           c->h->slot_bytes != c->slot_bytes) {
		rc = sd_why(why, "comm (shm): %s was made for another group", c->name);
		goto fail;
	}
	if (pthread_mutex_lock(&c->h->ranks[rank].alive) != 0) {
		rc = sd_why(why, "comm (shm): cannot take rank %d's mutex", rank);
		goto fail;
	}
	c->locked = 1;
	atomic_fetch_add(&c->h->attached, 1);
	/* Every rank waits for all to hold their mutex: from here on, a
	 * mutex nobody holds means its rank left. */
	while ((int)atomic_load(&c->h->attached) < world) {
		if (atomic_load(&c->h->aborted) || mono_ms() > deadline) {
			rc = why_code(why, SD_COMM_EPEER,
			                 "comm (shm): %d of %d ranks mapped %s within %d ms",
			                 (int)atomic_load(&c->h->attached), world, c->name, timeout_ms);
			goto fail;
		}
		usleep(200);
	}
	if (rank == 0)
		shm_unlink(c->name);
	*impl = c;
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	if (rank == 0 && c->name[0])
		shm_unlink(c->name);
	if (c->h)
		shm_abort(c);
	shm_destroy(c);
	return rc;
}

const struct sd_comm_backend_ops sd_comm_shm_ops = {
	.name = "shm",
	.create = shm_create,
	.allreduce_sum_f32 = shm_allreduce_f32,
	.allreduce_sum_f64 = shm_allreduce_f64,
	.broadcast = shm_broadcast,
	.barrier = shm_barrier,
	.abort = shm_abort,
	.destroy = shm_destroy,
};
