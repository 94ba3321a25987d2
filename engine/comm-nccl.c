/* engine/comm-nccl.c - the NCCL backend of engine/comm.h (CUDA device
 * buffers).  Compiled only when configure found CUDA and nccl.h.
 *
 * Rendezvous: rank 0 makes an ncclUniqueId and publishes it in the store
 * under "gen/<generation>/nccl-id"; the others fetch it from there.
 *
 * Timeouts: NCCL has no timeout of its own, so the communicator is created
 * non-blocking (ncclConfig_t.blocking = 0, NCCL >= 2.14) and every call is
 * followed by polling ncclCommGetAsyncError (and, for collectives, the
 * stream) until it is done, has failed or timeout_ms has passed.  A failure
 * or timeout returns SD_COMM_EPEER; comm.c then calls nccl_abort, whose
 * ncclCommAbort stops the kernels still waiting on the dead peer
 * (NCCL user guide, "Fault Tolerance" / "Communicator Creation and
 * Management Functions").
 *
 * Stream ordering: the caller's buffers may have been written by kernels on
 * any stream, so each collective first waits for the device to be idle
 * (cudaDeviceSynchronize), then runs on the communicator's own stream and
 * waits for that stream: on return the result is in buf, as with Gloo.
 *
 * Buffers: device memory (the trainer's gradient and state blocks) is used
 * in place; host memory (the worker's small metric vectors) is copied
 * through a device buffer, so the worker's code is the same for both
 * backends.
 *
 * Built into the CUDA backend plugin (engine/cuda/), which hands these ops
 * to engine/comm.c; nothing else links NCCL. */
#include "config.h"

#include "engine/comm-backend.h"
#include "src/base/errors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime.h>
#include <nccl.h>

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 14, 0)
#error "the NCCL backend needs NCCL >= 2.14 (non-blocking communicators)"
#endif

struct nccl_comm {
	ncclComm_t comm; /* NULL once aborted */
	cudaStream_t stream;
	float *scratch; /* one device float, for the barrier */
	void *staging;  /* device copy of host buffers, staging_bytes */
	size_t staging_bytes;
	int rank;
	int size;
	int timeout_ms;
};

static long long nccl_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int nccl_fail(struct nccl_comm *n, const char *op, ncclResult_t r, char **why)
{
	const char *detail = n->comm ? ncclGetLastError(n->comm) : NULL;
	sd_why(why, "nccl %s (rank %d of %d): %s%s%s", op, n->rank, n->size,
	       ncclGetErrorString(r), detail && *detail ? ": " : "", detail ? detail : "");
	return SD_COMM_EPEER;
}

/* Waits until the communicator leaves ncclInProgress (and, if stream_too,
 * the stream has drained), polling every 50 us at first and backing off to
 * 1 ms.  Returns 0, or SD_COMM_EPEER on an error or after timeout_ms. */
static int nccl_wait(struct nccl_comm *n, const char *op, int stream_too, char **why)
{
	long long deadline = nccl_now_ms() + n->timeout_ms;
	long sleep_us = 50;
	for (;;) {
		ncclResult_t state = ncclSuccess;
		ncclResult_t r = ncclCommGetAsyncError(n->comm, &state);
		if (r != ncclSuccess)
			return nccl_fail(n, op, r, why);
		if (state != ncclSuccess && state != ncclInProgress)
			return nccl_fail(n, op, state, why);
		if (state == ncclSuccess) {
			if (!stream_too)
				return 0;
			cudaError_t e = cudaStreamQuery(n->stream);
			if (e == cudaSuccess)
				return 0;
			if (e != cudaErrorNotReady) {
				sd_why(why, "nccl %s (rank %d of %d): CUDA: %s", op, n->rank, n->size,
				       cudaGetErrorString(e));
				return SD_COMM_EPEER;
			}
		}
		if (nccl_now_ms() >= deadline) {
			sd_why(why, "nccl %s (rank %d of %d): not done after %d ms (a peer is dead "
				    "or stuck)", op, n->rank, n->size, n->timeout_ms);
			return SD_COMM_EPEER;
		}
		usleep((useconds_t)sleep_us);
		sleep_us = sleep_us * 2 > 1000 ? 1000 : sleep_us * 2;
	}
}

static void nccl_release(struct nccl_comm *n)
{
	if (n->comm)
		ncclCommAbort(n->comm);
	if (n->scratch)
		cudaFree(n->scratch);
	if (n->staging)
		cudaFree(n->staging);
	if (n->stream)
		cudaStreamDestroy(n->stream);
	free(n);
}

static int nccl_create(void **impl, int rank, int world_size, const char *key_prefix,
		       const struct sd_store_ops *store, void *store_ctx, int timeout_ms,
		       char **why)
{
	*impl = NULL;
	struct nccl_comm *n = sd_calloc(1, sizeof *n);
	n->rank = rank;
	n->size = world_size;
	n->timeout_ms = timeout_ms;

	char key[96];
	snprintf(key, sizeof key, "%snccl-id", key_prefix);
	ncclUniqueId id;
	int rc;
	if (rank == 0) {
		ncclResult_t r = ncclGetUniqueId(&id);
		if (r != ncclSuccess) {
			rc = nccl_fail(n, "get unique id", r, why);
			goto fail;
		}
		rc = store->set(store_ctx, key, &id, sizeof id, why);
		if (rc < 0)
			goto fail;
	} else {
		void *value = NULL;
		size_t len = 0;
		rc = store->get(store_ctx, key, &value, &len, timeout_ms, why);
		if (rc < 0)
			goto fail;
		if (len != sizeof id) {
			free(value);
			rc = sd_why(why, "nccl rendezvous: %s holds %zu bytes, want %zu", key, len,
				    sizeof id);
			goto fail;
		}
		memcpy(&id, value, sizeof id);
		free(value);
	}

	cudaError_t e = cudaStreamCreateWithFlags(&n->stream, cudaStreamNonBlocking);
	if (e == cudaSuccess)
		e = cudaMalloc((void **)&n->scratch, sizeof *n->scratch);
	if (e != cudaSuccess) {
		rc = sd_why(why, "nccl (rank %d): CUDA: %s", rank, cudaGetErrorString(e));
		goto fail;
	}

	ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
	config.blocking = 0;
	ncclResult_t r = ncclCommInitRankConfig(&n->comm, world_size, id, rank, &config);
	if (r != ncclSuccess && r != ncclInProgress) {
		rc = nccl_fail(n, "init", r, why);
		goto fail;
	}
	rc = nccl_wait(n, "init", 0, why);
	if (rc < 0)
		goto fail;
	*impl = n;
	return 0;
fail:
	nccl_release(n);
	return rc;
}

/* Before a collective: the kernels that wrote the caller's buffer may be on
 * any stream, so wait for the whole device. */
static int nccl_prepare(struct nccl_comm *n, const char *op, char **why)
{
	cudaError_t e = cudaDeviceSynchronize();
	if (e != cudaSuccess) {
		sd_why(why, "nccl %s (rank %d of %d): CUDA: %s", op, n->rank, n->size,
		       cudaGetErrorString(e));
		return SD_COMM_EPEER;
	}
	return 0;
}

/* After enqueueing a collective that returned r: wait for it to finish. */
static int nccl_finish(struct nccl_comm *n, const char *op, ncclResult_t r, char **why)
{
	if (r != ncclSuccess && r != ncclInProgress)
		return nccl_fail(n, op, r, why);
	return nccl_wait(n, op, 1, why);
}

/* Whether p is host memory, which NCCL cannot read: the small vectors the
 * worker reduces (step metrics, the generation's step table) live there. */
static int nccl_is_host(const void *p)
{
	struct cudaPointerAttributes a;
	if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
		(void)cudaGetLastError();
		return 1;
	}
	return a.type == cudaMemoryTypeUnregistered || a.type == cudaMemoryTypeHost;
}

/* An all-reduce (root < 0) or broadcast of count elements at buf.  Host
 * buffers go through a device copy (n->staging, grown as needed). */
static int nccl_collective(struct nccl_comm *n, const char *op, void *buf, size_t count,
			   ncclDataType_t type, size_t elem, int root, char **why)
{
	int rc = nccl_prepare(n, op, why);
	if (rc < 0)
		return rc;
	size_t bytes = count * elem;
	void *dbuf = buf;
	int host = nccl_is_host(buf);
	cudaError_t e = cudaSuccess;
	if (host) {
		if (n->staging_bytes < bytes) {
			cudaFree(n->staging);
			n->staging = NULL;
			n->staging_bytes = 0;
			e = cudaMalloc(&n->staging, bytes);
			if (e == cudaSuccess)
				n->staging_bytes = bytes;
		}
		if (e == cudaSuccess)
			e = cudaMemcpyAsync(n->staging, buf, bytes, cudaMemcpyHostToDevice, n->stream);
		if (e != cudaSuccess) {
			sd_why(why, "nccl %s (rank %d of %d): staging: CUDA: %s", op, n->rank, n->size,
			       cudaGetErrorString(e));
			return SD_COMM_EPEER;
		}
		dbuf = n->staging;
	}
	ncclResult_t r = root < 0
		? ncclAllReduce(dbuf, dbuf, count, type, ncclSum, n->comm, n->stream)
		: ncclBroadcast(dbuf, dbuf, count, type, root, n->comm, n->stream);
	rc = nccl_finish(n, op, r, why);
	if (rc == 0 && host) {
		e = cudaMemcpyAsync(buf, dbuf, bytes, cudaMemcpyDeviceToHost, n->stream);
		if (e == cudaSuccess)
			e = cudaStreamSynchronize(n->stream);
		if (e != cudaSuccess) {
			sd_why(why, "nccl %s (rank %d of %d): staging: CUDA: %s", op, n->rank, n->size,
			       cudaGetErrorString(e));
			return SD_COMM_EPEER;
		}
	}
	return rc;
}

static int nccl_allreduce_f32(void *impl, float *buf, size_t count, char **why)
{
	return nccl_collective(impl, "allreduce", buf, count, ncclFloat32, sizeof(float), -1, why);
}

static int nccl_allreduce_f64(void *impl, double *buf, size_t count, char **why)
{
	return nccl_collective(impl, "allreduce", buf, count, ncclFloat64, sizeof(double), -1, why);
}

static int nccl_broadcast(void *impl, void *buf, size_t bytes, int root, char **why)
{
	return nccl_collective(impl, "broadcast", buf, bytes, ncclUint8, 1, root, why);
}

/* NCCL has no barrier; an all-reduce of one device float serves as one. */
static int nccl_barrier(void *impl, char **why)
{
	struct nccl_comm *n = impl;
	int rc = nccl_prepare(n, "barrier", why);
	if (rc < 0)
		return rc;
	return nccl_finish(n, "barrier",
			   ncclAllReduce(n->scratch, n->scratch, 1, ncclFloat32, ncclSum, n->comm,
					 n->stream),
			   why);
}

static void nccl_abort(void *impl)
{
	struct nccl_comm *n = impl;
	if (n->comm) {
		ncclCommAbort(n->comm);
		n->comm = NULL;
	}
}

/* ncclCommAbort rather than ncclCommDestroy: destroy may synchronise with
 * peers, and sd_comm_destroy must never block on them.  Every collective has
 * completed (or failed) by the time destroy runs, so nothing is lost. */
static void nccl_destroy(void *impl)
{
	nccl_release(impl);
}

const struct sd_comm_backend_ops sd_comm_nccl_ops = {
	.name = "nccl",
	.create = nccl_create,
	.allreduce_sum_f32 = nccl_allreduce_f32,
	.allreduce_sum_f64 = nccl_allreduce_f64,
	.broadcast = nccl_broadcast,
	.barrier = nccl_barrier,
	.abort = nccl_abort,
	.destroy = nccl_destroy,
};
