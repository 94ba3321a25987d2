/* engine/comm.h - collectives between training workers, behind one C API.
 *
 * A communicator joins `world_size` processes of one *generation*: the set
 * of workers that trains together until one of them is lost.  When a peer
 * dies, every collective on the communicator fails within about the
 * communicator's timeout (it never hangs), the communicator is aborted, and
 * the survivors destroy it and create a new one in a higher generation
 * (DESIGN.md, "Control plane: Elasticity").
 *
 * Backends:
 *   SD_COMM_GLOO  CPU buffers, TCP transport (Gloo).  Each rank listens on
 *                 the address named by the environment variable
 *                 SPOTDECK_COMM_HOST (a host name, an IP address or a network
 *                 interface name such as "eth0"); the default, 127.0.0.1,
 *                 only reaches peers on the same host.
 *   SD_COMM_SHM   CPU buffers, every rank on this host: a POSIX shared-memory
 *                 segment (engine/comm-shm.c), no sockets, no kernel copies.
 *                 A peer that dies is noticed within milliseconds (its robust
 *                 mutex), one that hangs after timeout_ms.
 *   SD_COMM_NCCL  CUDA device buffers (NCCL; small host buffers are staged
 *                 through the device).  NCCL lives in the CUDA backend plugin
 *                 (engine/backend.h), which this loads on first use.
 *
 * Rendezvous goes through a key-value store supplied by the caller (in
 * production the controller, over the worker's control connection).  Every
 * key a communicator writes or reads is prefixed with "gen/<generation>/",
 * so generations never see each other's addresses.
 *
 * Errors: every function that can fail returns 0 on success or one of the
 * negative `enum sd_comm_error` codes, and stores a malloc'd one-line message
 * in *why (caller frees; see src/base/errors.h; why may be NULL).  Nothing here
 * exits, aborts the process or lets a C++ exception escape.
 *
 * Threads: a communicator must be used by one thread at a time.  Distinct
 * communicators are independent.
 *
 * Signals: the Gloo backend writes to sockets whose peer may have died; it
 * blocks SIGPIPE in the calling thread for the duration of each call and in
 * the transport's own thread, so a dead peer is reported as an error and
 * never kills the process with SIGPIPE.  The process's SIGPIPE disposition
 * is left alone. */
#ifndef SD_ENGINE_COMM_H
#define SD_ENGINE_COMM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Negative return codes.  Anything not listed is a plain -1 (SD_COMM_EFAIL). */
enum sd_comm_error {
	/* Invalid argument, I/O error on the store, internal error. */
	SD_COMM_EFAIL = -1,
	/* A peer died, closed its connection or did not answer within the
	 * timeout.  The communicator is now aborted: every further collective
	 * fails at once with this code.  Destroy it and re-form the group in a
	 * new generation. */
	SD_COMM_EPEER = -2,
	/* A store get found no value within its timeout (in sd_comm_create: a
	 * peer never published its address). */
	SD_COMM_ETIMEDOUT = -3,
	/* The backend is not compiled into this build (no Gloo, no NCCL). */
	SD_COMM_ENOTBUILT = -4,
};

/* Rendezvous key-value store supplied by the caller.  Keys are NUL-terminated
 * strings of printable ASCII (they contain '/'); values are opaque bytes, at
 * most a few kilobytes.  Both functions may be called from the thread that
 * calls sd_comm_create only.  Return 0 or a negative code with *why set. */
struct sd_store_ops {
	/* Stores `len` bytes at `value` (copied) under `key`, replacing any
	 * earlier value.  The value must become visible to get() in other
	 * processes atomically (never half-written). */
	int (*set)(void *ctx, const char *key, const void *value, size_t len, char **why);
	/* Waits until `key` exists, then stores a malloc'd copy of its value in
	 * *value (caller frees; a 0-byte value is still a valid pointer) and its
	 * length in *len.  timeout_ms < 0 waits forever; 0 checks once.  A key
	 * still missing after timeout_ms returns SD_COMM_ETIMEDOUT. */
	int (*get)(void *ctx, const char *key, void **value, size_t *len, int timeout_ms,
		   char **why);
};

enum sd_comm_backend { SD_COMM_GLOO, SD_COMM_NCCL, SD_COMM_SHM };

/* Decides which backend generation `generation` uses, so that all its ranks
 * agree without asking the controller: every rank calls this with its offer
 * (nccl_device: the UUID of the CUDA device its model runs on, when NCCL can
 * use it, else NULL) and publishes it under "gen/<g>/device/<rank>"; the
 * answer is SD_COMM_NCCL when every rank offers a device and no two offer
 * the same one (NCCL refuses two ranks on one GPU); else SD_COMM_SHM when
 * every rank runs on this host (the same boot id, IPC namespace and
 * /dev/shm), none has SPOTDECK_COMM=gloo in its environment, and the
 * smallest free space any rank saw in /dev/shm holds the segment; else
 * SD_COMM_GLOO (host memory; a rank on a device stages its buffers through
 * the host).  Every rank reads the same offers, so every rank gets the same
 * answer.  World
 * size 1 answers SD_COMM_GLOO at once without the store.  Errors: as the
 * store's get (SD_COMM_ETIMEDOUT when a rank never published). */
int sd_comm_choose_backend(enum sd_comm_backend *out, int rank, int world_size, long generation,
			   const char *nccl_device, const struct sd_store_ops *store,
			   void *store_ctx, int timeout_ms, char **why);

/* Opaque communicator, created by sd_comm_create. */
struct sd_comm;

/* Joins generation `generation` as `rank` (0 <= rank < world_size) and
 * connects to every other rank (full mesh).  All world_size ranks must call
 * this with the same backend, world_size, generation and store.
 *
 * timeout_ms (> 0) bounds the rendezvous and every later collective.  The
 * rendezvous: every peer's address must be in the store within timeout_ms of
 * this call, and each TCP connection to a peer must be made within about
 * timeout_ms of its address being there (so a peer that died after
 * publishing its address costs at most about 2 x timeout_ms in all; Gloo's
 * own 5 x multiplier for connects is divided out).  A collective that a dead
 * or stuck peer keeps from completing fails with SD_COMM_EPEER after at most
 * about timeout_ms.  Choose it well above the slowest healthy collective
 * (the controller derives it from the measured step time).
 *
 * world_size 1 never touches the network or the store (store may then be
 * NULL) and works in every build; its collectives return at once.
 *
 * On success *out is a new communicator (free with sd_comm_destroy).
 * Errors: SD_COMM_EFAIL (bad argument), SD_COMM_ENOTBUILT, SD_COMM_ETIMEDOUT
 * (a peer did not publish its address in time), SD_COMM_EPEER (connecting to
 * a peer failed), or a store error code; *out is then NULL. */
int sd_comm_create(struct sd_comm **out, enum sd_comm_backend backend, int rank,
		   int world_size, long generation, const struct sd_store_ops *store,
		   void *store_ctx, int timeout_ms, char **why);

/* In place: on return every rank's buf[0..count) holds the element-wise sum
 * over all ranks of their buf.  The result is bit-identical on every rank
 * (each element is reduced once, in a fixed order, then copied), but the
 * summation order is the backend's, so it may differ in the last bits from a
 * sequential sum.  All ranks must pass the same count.  Gloo: host memory;
 * NCCL: device memory, or host memory copied through the device (meant for
 * small vectors).  Errors: SD_COMM_EFAIL for a bad argument (nothing
 * happened, the communicator stays usable); SD_COMM_EPEER when a peer failed
 * (the communicator is now aborted and buf's contents are undefined).  Any
 * other failure inside the backend also aborts the communicator. */
int sd_comm_allreduce_sum(struct sd_comm *c, float *buf, size_t count, char **why);

/* As sd_comm_allreduce_sum, in double precision; meant for small metric
 * reductions (loss sums, sample counts, step times). */
int sd_comm_allreduce_sum_f64(struct sd_comm *c, double *buf, size_t count, char **why);

/* Copies `bytes` bytes at buf on rank `root` into buf on every other rank.
 * All ranks must pass the same bytes and root.  Errors as for
 * sd_comm_allreduce_sum (buf undefined on non-root ranks after SD_COMM_EPEER). */
int sd_comm_broadcast(struct sd_comm *c, void *buf, size_t bytes, int root, char **why);

/* Returns once every rank has entered the barrier.  Errors: SD_COMM_EPEER. */
int sd_comm_barrier(struct sd_comm *c, char **why);

/* This process's rank and the number of ranks, as given to sd_comm_create. */
int sd_comm_rank(const struct sd_comm *c);
int sd_comm_world_size(const struct sd_comm *c);

/* The backend's name: "gloo", "shm" or "nccl"; "none" for world size 1. */
const char *sd_comm_backend_name(const struct sd_comm *c);

/* The generation given to sd_comm_create. */
long sd_comm_generation(const struct sd_comm *c);

/* Nonzero once a collective has failed with SD_COMM_EPEER. */
int sd_comm_is_aborted(const struct sd_comm *c);

/* Closes all connections and frees the communicator.  Never blocks on peers,
 * so it is safe (and expected) after a failed collective.  NULL is a no-op. */
void sd_comm_destroy(struct sd_comm *c);

/* A store over a directory that all ranks can see (one file per key, written
 * to a temporary name and renamed into place, so readers never see a partial
 * value).  For tests and single-host runs; get() polls the directory (every
 * 1 ms at first, backing off to 20 ms).  Keys are encoded into file names
 * ('/' and other punctuation become %XX), so the directory stays flat. */
struct sd_dir_store {
	char *dir; /* owned, malloc'd */
};

/* Makes `dir` a store, creating the directory (mode 0700) if it does not
 * exist.  Errors: SD_COMM_EFAIL (the directory cannot be created). */
int sd_dir_store_init(struct sd_dir_store *s, const char *dir, char **why);

/* Frees what init allocated; the directory and its files stay. */
void sd_dir_store_fini(struct sd_dir_store *s);

/* Pass with a `struct sd_dir_store *` as the ops' ctx. */
extern const struct sd_store_ops sd_dir_store_ops;

#ifdef __cplusplus
}
#endif

#endif
