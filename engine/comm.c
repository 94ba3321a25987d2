/* engine/comm.c - backend dispatch for collectives, and the directory store.
 * See comm.h for the contract and comm-backend.h for what a backend provides. */
#include "config.h"

#include "engine/comm.h"
#include "engine/backend.h"
#include "engine/comm-backend.h"
#include "src/base/errors.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

struct sd_comm {
	enum sd_comm_backend backend;
	int rank;
	int world_size;
	long generation;
	int aborted;
	/* NULL for world_size 1, which needs no backend at all. */
	const struct sd_comm_backend_ops *ops;
	void *impl;
};

/* The compiled-in ops for `backend`, or NULL with *why set. */
static const struct sd_comm_backend_ops *comm_backend_ops(enum sd_comm_backend backend, char **why)
{
	switch (backend) {
	case SD_COMM_GLOO:
#ifdef HAVE_GLOO
		return &sd_comm_gloo_ops;
#else
		sd_why(why, "comm: built without Gloo (install libgloo-dev and reconfigure)");
		return NULL;
#endif
	case SD_COMM_SHM:
		return &sd_comm_shm_ops;
	case SD_COMM_NCCL: {
		/* NCCL lives in the CUDA backend plugin, with the CUDA libraries
		 * it needs (engine/backend-plugin.h). */
		char *err = NULL;
		const struct sd_backend_ops *plugin = sd_backend_plugin(&err);
		if (!plugin) {
			sd_why(why, "comm: NCCL needs the CUDA backend: %s", err);
			free(err);
			return NULL;
		}
		if (!plugin->nccl) {
			sd_why(why, "comm: the CUDA backend was built without NCCL (configure found no nccl.h)");
			return NULL;
		}
		return plugin->nccl;
	}
	}
	sd_why(why, "comm: unknown backend %d", (int)backend);
	return NULL;
}

int sd_comm_create(struct sd_comm **out, enum sd_comm_backend backend, int rank,
		   int world_size, long generation, const struct sd_store_ops *store,
		   void *store_ctx, int timeout_ms, char **why)
{
	*out = NULL;
	if (world_size < 1 || rank < 0 || rank >= world_size)
		return sd_why(why, "comm: rank %d out of range for world size %d", rank, world_size);
	if (timeout_ms <= 0)
		return sd_why(why, "comm: timeout must be positive (got %d ms)", timeout_ms);
	if (generation < 0)
		return sd_why(why, "comm: negative generation %ld", generation);

	struct sd_comm *c = sd_calloc(1, sizeof *c);
	c->backend = backend;
	c->rank = rank;
	c->world_size = world_size;
	c->generation = generation;
	if (world_size == 1) {
		/* Single-worker runs must work in every build and on hosts
		 * without networking, so no backend is involved. */
		if (backend != SD_COMM_GLOO && backend != SD_COMM_NCCL && backend != SD_COMM_SHM) {
			free(c);
			return sd_why(why, "comm: unknown backend %d", (int)backend);
		}
		*out = c;
		return 0;
	}
	if (!store || !store->set || !store->get) {
		free(c);
		return sd_why(why, "comm: world size %d needs a rendezvous store", world_size);
	}
	c->ops = comm_backend_ops(backend, why);
	if (!c->ops) {
		free(c);
		return SD_COMM_ENOTBUILT;
	}
	char prefix[48];
	snprintf(prefix, sizeof prefix, "gen/%ld/", generation);
	int rc = c->ops->create(&c->impl, rank, world_size, prefix, store, store_ctx, timeout_ms, why);
	if (rc < 0) {
		free(c);
		return rc;
	}
	*out = c;
	return 0;
}

/* Common checks before a collective; returns 1 when there is nothing to do. */
static int comm_check(struct sd_comm *c, const char *op, int *rc, char **why)
{
	if (!c) {
		*rc = sd_why(why, "comm %s: NULL communicator", op);
		return 1;
	}
	if (c->aborted) {
		sd_why(why, "comm %s: communicator of generation %ld was aborted by an earlier "
			    "failure; destroy it and join a new generation", op, c->generation);
		*rc = SD_COMM_EPEER;
		return 1;
	}
	*rc = 0;
	return !c->ops;
}

/* Records an abort after a failed collective (arguments were checked before,
 * so any failure means the group is out of step), so later calls fail fast
 * and peers still waiting on us see our connections close now rather than at
 * their timeout. */
static int comm_result(struct sd_comm *c, int rc)
{
	if (rc < 0 && !c->aborted) {
		c->aborted = 1;
		c->ops->abort(c->impl);
	}
	return rc;
}

int sd_comm_allreduce_sum(struct sd_comm *c, float *buf, size_t count, char **why)
{
	int rc;
	if (comm_check(c, "allreduce", &rc, why) || count == 0)
		return rc;
	if (!buf)
		return sd_why(why, "comm allreduce: NULL buffer");
	return comm_result(c, c->ops->allreduce_sum_f32(c->impl, buf, count, why));
}

int sd_comm_allreduce_sum_f64(struct sd_comm *c, double *buf, size_t count, char **why)
{
	int rc;
	if (comm_check(c, "allreduce", &rc, why) || count == 0)
		return rc;
	if (!buf)
		return sd_why(why, "comm allreduce: NULL buffer");
	return comm_result(c, c->ops->allreduce_sum_f64(c->impl, buf, count, why));
}

int sd_comm_broadcast(struct sd_comm *c, void *buf, size_t bytes, int root, char **why)
{
	int rc;
	if (c && (root < 0 || root >= c->world_size))
		return sd_why(why, "comm broadcast: root %d out of range for world size %d", root,
			      c->world_size);
	if (comm_check(c, "broadcast", &rc, why) || bytes == 0)
		return rc;
	if (!buf)
		return sd_why(why, "comm broadcast: NULL buffer");
	return comm_result(c, c->ops->broadcast(c->impl, buf, bytes, root, why));
}

int sd_comm_barrier(struct sd_comm *c, char **why)
{
	int rc;
	if (comm_check(c, "barrier", &rc, why))
		return rc;
	return comm_result(c, c->ops->barrier(c->impl, why));
}

int sd_comm_rank(const struct sd_comm *c)
{
	return c->rank;
}

int sd_comm_world_size(const struct sd_comm *c)
{
	return c->world_size;
}

const char *sd_comm_backend_name(const struct sd_comm *c)
{
	return c->ops ? c->ops->name : "none";
}

long sd_comm_generation(const struct sd_comm *c)
{
	return c->generation;
}

int sd_comm_is_aborted(const struct sd_comm *c)
{
	return c->aborted;
}

void sd_comm_destroy(struct sd_comm *c)
{
	if (!c)
		return;
	if (c->ops)
		c->ops->destroy(c->impl);
	free(c);
}

/* ---- Choosing the backend of a generation -------------------------------- */

/* This host's identity for the shared-memory backend, in out: the boot id
 * (one kernel), the IPC namespace and /dev/shm (one segment namespace).
 * Empty when shared memory is off (SPOTDECK_COMM=gloo) or cannot be told.
 * SPOTDECK_COMM_HOST_ID replaces it (tests: ranks "on other hosts"). */
static void host_identity(char *out, size_t n)
{
	out[0] = '\0';
	const char *force = getenv("SPOTDECK_COMM");
	if (force && !strcmp(force, "gloo"))
		return;
	const char *fake = getenv("SPOTDECK_COMM_HOST_ID");
	if (fake) {
		snprintf(out, n, "%.60s", fake);
		return;
	}
	char boot[64] = "";
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
	if (f) {
		if (!fgets(boot, sizeof boot, f))
			boot[0] = '\0';
		fclose(f);
	}
	boot[strcspn(boot, "\n")] = '\0';
	struct stat ipc, shm;
	if (!boot[0] || stat("/proc/self/ns/ipc", &ipc) < 0 || stat("/dev/shm", &shm) < 0)
		return;
	snprintf(out, n, "%.40s:%lx:%lx:%lx", boot, (unsigned long)ipc.st_ino,
	         (unsigned long)shm.st_dev, (unsigned long)shm.st_ino);
}

int sd_comm_choose_backend(enum sd_comm_backend *out, int rank, int world_size, long generation,
			   const char *nccl_device, const struct sd_store_ops *store,
			   void *store_ctx, int timeout_ms, char **why)
{
	*out = SD_COMM_GLOO;
	if (world_size < 1 || rank < 0 || rank >= world_size)
		return sd_why(why, "comm: rank %d out of range for world size %d", rank, world_size);
	if (world_size == 1)
		return 0;
	if (!store || !store->set || !store->get)
		return sd_why(why, "comm: world size %d needs a rendezvous store", world_size);
	/* What this rank offers: "nccl:<device uuid>" or "host", then
	 * "|<host identity>" (empty when shared memory is off).  The device
	 * comes first, so that an older worker, which reads only that, decides
	 * NCCL the same way; an older worker's offer has no '|', which rules
	 * shared memory out for everybody. */
	char mine[256], key[96], id[160];
	host_identity(id, sizeof id);
	/* And what /dev/shm has free, in MiB: a segment that does not fit
	 * would fail the generation at its rendezvous (or, not reserved,
	 * kill a worker with SIGBUS later), and the next one would choose the
	 * same way; so the choice takes the smallest figure offered. */
	struct statvfs vfs;
	unsigned long long free_mib = 0;
	if (id[0] && statvfs("/dev/shm", &vfs) == 0)
		free_mib = (unsigned long long)vfs.f_bavail * vfs.f_frsize >> 20;
	if (nccl_device && *nccl_device)
		snprintf(mine, sizeof mine, "nccl:%.80s|%s|%llu", nccl_device, id, free_mib);
	else
		snprintf(mine, sizeof mine, "host|%s|%llu", id, free_mib);
	snprintf(key, sizeof key, "gen/%ld/device/%d", generation, rank);
	int rc = store->set(store_ctx, key, mine, strlen(mine), why);
	if (rc < 0)
		return rc;
	char **offers = sd_calloc((size_t)world_size, sizeof *offers);
	int nccl = 1, shm = 1;
	unsigned long long need_mib = (sd_comm_shm_bytes(world_size) >> 20) + 1, min_free = ~0ull;
	for (int r = 0; r < world_size && rc == 0; r++) {
		if (r == rank) {
			offers[r] = strdup(mine);
			if (!offers[r])
				sd_oom();
		} else {
			void *v = NULL;
			size_t len = 0;
			snprintf(key, sizeof key, "gen/%ld/device/%d", generation, r);
			rc = store->get(store_ctx, key, &v, &len, timeout_ms, why);
			if (rc < 0)
				break;
			offers[r] = sd_malloc(len + 1);
			memcpy(offers[r], v, len);
			offers[r][len] = 0;
			free(v);
		}
		if (strncmp(offers[r], "nccl:", 5))
			nccl = 0;
		/* NCCL refuses two ranks on one device ("Duplicate GPU detected"). */
		for (int q = 0; q < r && nccl; q++)
			if (!strcmp(offers[q], offers[r]))
				nccl = 0;
		/* Shared memory: every rank on this host (the same identity),
		 * none with shared memory off, room for the segment. */
		const char *id_r = strchr(offers[r], '|'), *id_0 = strchr(offers[0], '|');
		size_t len_r = id_r ? strcspn(id_r + 1, "|") : 0;
		if (!id_r || !id_0 || len_r == 0 || len_r != strcspn(id_0 + 1, "|") ||
		    strncmp(id_r + 1, id_0 + 1, len_r) || id_r[1 + len_r] != '|') {
			shm = 0;
		} else {
			unsigned long long f = strtoull(id_r + 2 + len_r, NULL, 10);
			min_free = f < min_free ? f : min_free;
		}
	}
	if (min_free < need_mib)
		shm = 0;
	for (int r = 0; r < world_size; r++)
		free(offers[r]);
	free(offers);
	if (rc < 0)
		return rc;
	*out = nccl ? SD_COMM_NCCL : shm ? SD_COMM_SHM : SD_COMM_GLOO;
	return 0;
}

/* ---- Directory store ---------------------------------------------------- */

/* Longest encoded key; keeps "dir/.tmp-PID-N-KEY" under NAME_MAX. */
#define DIR_STORE_MAX_NAME 200

/* Encodes key into a flat file name: [A-Za-z0-9_-] stay, every other byte
 * (notably '/' and '.', so no name starts with a dot) becomes %XX.  Returns
 * 0, or -1 if the result would not fit in DIR_STORE_MAX_NAME. */
static int dir_store_encode(const char *key, char out[DIR_STORE_MAX_NAME + 1])
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = 0;
	for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
		int plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			    (*p >= '0' && *p <= '9') || *p == '_' || *p == '-';
		if (n + (plain ? 1 : 3) > DIR_STORE_MAX_NAME)
			return -1;
		if (plain) {
			out[n++] = (char)*p;
		} else {
			out[n++] = '%';
			out[n++] = hex[*p >> 4];
			out[n++] = hex[*p & 15];
		}
	}
	out[n] = '\0';
	return n ? 0 : -1;
}

int sd_dir_store_init(struct sd_dir_store *s, const char *dir, char **why)
{
	s->dir = NULL;
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return sd_why(why, "dir store: cannot create %s: %s", dir, strerror(errno));
	struct stat st;
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
		return sd_why(why, "dir store: %s is not a directory", dir);
	s->dir = strdup(dir);
	if (!s->dir)
		sd_oom();
	return 0;
}

void sd_dir_store_fini(struct sd_dir_store *s)
{
	free(s->dir);
	s->dir = NULL;
}

static int dir_store_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len > 0) {
		ssize_t w = write(fd, p, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

static int dir_store_set(void *ctx, const char *key, const void *value, size_t len, char **why)
{
	/* Makes temporary names unique between threads of one process. */
	static unsigned long counter;
	unsigned long serial = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
	struct sd_dir_store *s = ctx;
	char name[DIR_STORE_MAX_NAME + 1];
	if (dir_store_encode(key, name) < 0)
		return sd_why(why, "dir store: key '%.64s' is empty or too long", key);
	char path[PATH_MAX], tmp[PATH_MAX];
	int n1 = snprintf(path, sizeof path, "%s/%s", s->dir, name);
	int n2 = snprintf(tmp, sizeof tmp, "%s/.tmp-%ld-%lu-%s", s->dir, (long)getpid(), serial,
			  name);
	if (n1 < 0 || n2 < 0 || (size_t)n1 >= sizeof path || (size_t)n2 >= sizeof tmp)
		return sd_why(why, "dir store: path too long for key '%.64s'", key);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return sd_why(why, "dir store: cannot create %s: %s", tmp, strerror(errno));
	if (dir_store_write_all(fd, value, len) < 0) {
		int e = errno;
		close(fd);
		unlink(tmp);
		return sd_why(why, "dir store: cannot write %s: %s", tmp, strerror(e));
	}
	if (close(fd) < 0) {
		int e = errno;
		unlink(tmp);
		return sd_why(why, "dir store: cannot write %s: %s", tmp, strerror(e));
	}
	/* rename() replaces the name atomically: readers see the old value,
	 * no value, or the whole new value, never a partial file. */
	if (rename(tmp, path) < 0) {
		int e = errno;
		unlink(tmp);
		return sd_why(why, "dir store: cannot rename %s to %s: %s", tmp, path, strerror(e));
	}
	return 0;
}

/* Reads the whole file at path into a malloc'd buffer.  Returns 0, 1 if the
 * file does not exist (yet), or -1 with *why set. */
static int dir_store_read(const char *path, void **value, size_t *len, char **why)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return 1;
		return sd_why(why, "dir store: cannot open %s: %s", path, strerror(errno));
	}
	size_t cap = 256, n = 0;
	char *buf = sd_malloc(cap);
	for (;;) {
		if (n == cap) {
			cap *= 2;
			char *bigger = realloc(buf, cap);
			if (!bigger)
				sd_oom();
			buf = bigger;
		}
		ssize_t r = read(fd, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;
			free(buf);
			close(fd);
			return sd_why(why, "dir store: cannot read %s: %s", path, strerror(e));
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	*value = buf;
	*len = n;
	return 0;
}

static long long dir_store_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int dir_store_get(void *ctx, const char *key, void **value, size_t *len, int timeout_ms,
			 char **why)
{
	struct sd_dir_store *s = ctx;
	char name[DIR_STORE_MAX_NAME + 1];
	*value = NULL;
	*len = 0;
	if (dir_store_encode(key, name) < 0)
		return sd_why(why, "dir store: key '%.64s' is empty or too long", key);
	char path[PATH_MAX];
	int n = snprintf(path, sizeof path, "%s/%s", s->dir, name);
	if (n < 0 || (size_t)n >= sizeof path)
		return sd_why(why, "dir store: path too long for key '%.64s'", key);
	long long deadline = dir_store_now_ms() + timeout_ms;
	/* Rendezvous keys usually appear within milliseconds, so poll fast at
	 * first and back off to keep an idle wait cheap. */
	long sleep_us = 1000;
	for (;;) {
		int rc = dir_store_read(path, value, len, why);
		if (rc <= 0)
			return rc;
		long long now = dir_store_now_ms();
		if (timeout_ms >= 0 && now >= deadline) {
			sd_why(why, "dir store: key '%s' did not appear within %d ms", key, timeout_ms);
			return SD_COMM_ETIMEDOUT;
		}
		long wait_us = sleep_us;
		if (timeout_ms >= 0 && (deadline - now) * 1000 < wait_us)
			wait_us = (long)(deadline - now) * 1000;
		usleep((useconds_t)wait_us);
		sleep_us = sleep_us * 2 > 20000 ? 20000 : sleep_us * 2;
	}
}

const struct sd_store_ops sd_dir_store_ops = {
	.set = dir_store_set,
	.get = dir_store_get,
};
