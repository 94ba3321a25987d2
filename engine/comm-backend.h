/* engine/comm-backend.h - what engine/comm.c needs from each backend
 * (comm-gloo.cc, comm-shm.c, comm-nccl.c).  Private to the comm module.
 *
 * comm.c validates arguments, handles world_size 1, namespaces store keys,
 * and remembers that a communicator is aborted; a backend only talks to its
 * library.  Every function returns 0 or a negative enum sd_comm_error with a
 * one-line message in *why; a collective that fails because of a peer must
 * return SD_COMM_EPEER, after which comm.c calls abort() and never again
 * calls a collective on that impl. */
#ifndef SD_ENGINE_COMM_BACKEND_H
#define SD_ENGINE_COMM_BACKEND_H

#include "engine/comm.h"

#ifdef __cplusplus
extern "C" {
#endif

struct sd_comm_backend_ops {
	const char *name;
	/* Rendezvous through store; every key it uses must be prefixed with
	 * key_prefix ("gen/<generation>/").  On success *impl is set. */
	int (*create)(void **impl, int rank, int world_size, const char *key_prefix,
		      const struct sd_store_ops *store, void *store_ctx, int timeout_ms,
		      char **why);
	int (*allreduce_sum_f32)(void *impl, float *buf, size_t count, char **why);
	int (*allreduce_sum_f64)(void *impl, double *buf, size_t count, char **why);
	int (*broadcast)(void *impl, void *buf, size_t bytes, int root, char **why);
	int (*barrier)(void *impl, char **why);
	/* Tears the connections down so that peers still blocked in a
	 * collective with us fail promptly instead of waiting for the timeout. */
	void (*abort)(void *impl);
	void (*destroy)(void *impl);
};

extern const struct sd_comm_backend_ops sd_comm_shm_ops;
/* Bytes of /dev/shm the shared-memory backend takes for world ranks. */
size_t sd_comm_shm_bytes(int world);
#ifdef HAVE_GLOO
extern const struct sd_comm_backend_ops sd_comm_gloo_ops;
#endif
#ifdef HAVE_NCCL
extern const struct sd_comm_backend_ops sd_comm_nccl_ops;
#endif

#ifdef __cplusplus
}
#endif

#endif
