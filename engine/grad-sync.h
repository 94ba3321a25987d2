/* engine/grad-sync.h - the gradient all-reduce of a data-parallel step,
 * overlapped with the backward pass.
 *
 * The gradient buffer (one block, model.h) is cut into *buckets* at the
 * model's ready points (sd_model_grad_ready_points): walking backward's
 * order from the end of the buffer, a bucket closes at the first point where
 * it holds at least bucket_floats floats; what is left at offset 0 is the
 * last bucket.  As soon as backward has completed a bucket's gradients (the
 * model's grad-ready hook), a communication thread of this object starts
 * its all-reduce while backward goes on; the step then waits only for what
 * is still in flight.  This is PyTorch DDP's gradient bucketing (Li et al.,
 * "PyTorch Distributed: Experiences on Accelerating Data Parallel
 * Training", VLDB 2020, section 3.2.3) and Horovod's tensor fusion, with
 * buckets in backward order.
 *
 * The last bucket (offset 0, the first layers, whose gradients come last)
 * can carry a few floats of the caller's after the gradients (the elastic
 * worker's step metrics and its vote to change): they are copied with that
 * bucket into a staging buffer, so the step still costs no extra round
 * trip.
 *
 * Every rank must use the same model and bucket_floats: the buckets are
 * then the same on every rank (they depend on the model's structure only,
 * never on timing), and every rank issues the same collectives in the same
 * order.  Results are bit-identical on every rank (engine/comm.h); against
 * one all-reduce of the whole buffer only the summation order of some
 * elements may differ (3 or more ranks).
 *
 * Threads: the object's thread is the only user of the communicator
 * between sd_grad_sync_begin and the end of the step (finish or abandon);
 * outside a step the caller may use the communicator as before.  The model
 * must not be used for anything but the step's sd_model_train_batch in
 * between either.  Only for models whose gradients are in host memory.
 */
#ifndef SD_ENGINE_GRAD_SYNC_H
#define SD_ENGINE_GRAD_SYNC_H

#include <stddef.h>

#include "engine/comm.h"
#include "engine/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Default bucket size in floats: 256 Ki floats (1 MiB), PyTorch DDP's
 * first bucket.  Measured (cnn, 2 workers x 1 thread): on
 * loopback 0 (one bucket), 256 KiB and 1 MiB all trained at 3,900-4,000
 * images/s at global batch 64; over a 2 Gbit/s shaped link
 * (tests/bench/ddp-vs-torch's second table) 1 MiB gave 2,909 and 256 KiB
 * 3,013 against 2,368 for one bucket.  4 KiB (a bucket per layer) cost 20 %
 * on loopback: each bucket is a round trip. */
#define SD_GRAD_SYNC_DEFAULT_FLOATS (256u * 1024u)
/* Most extra floats the last bucket carries. */
#define SD_GRAD_SYNC_EXTRA_MAX 8

struct sd_grad_sync;

/* Plans m's buckets for bucket_floats (0: one bucket, no overlap) and
 * starts the communication thread (idle until a step begins).  m must
 * outlive the object.  Returns 0, or -1 with *why (the thread could not be
 * started). */
int sd_grad_sync_create(struct sd_grad_sync **out, struct sd_model *m, size_t bucket_floats,
                        char **why);
/* Stops and joins the thread (call outside a step) and frees everything.
 * NULL is a no-op. */
void sd_grad_sync_destroy(struct sd_grad_sync *s);

/* The number of buckets, and bucket k's gradients [*begin, *end) (k = 0 is
 * the first all-reduced, the one at the buffer's end). */
int sd_grad_sync_buckets(const struct sd_grad_sync *s);
void sd_grad_sync_bucket(const struct sd_grad_sync *s, int k, size_t *begin, size_t *end);

/* Starts a step on communicator c: from now on each bucket backward
 * completes is all-reduced on c.  Call it just before the step's
 * sd_model_train_batch (through sd_trainer_local_grad). */
void sd_grad_sync_begin(struct sd_grad_sync *s, struct sd_comm *c);

/* Ends the step: starts the buckets not yet started, the last one with
 * extra[0..nextra) after its gradients (nextra <= SD_GRAD_SYNC_EXTRA_MAX;
 * on return extra holds their sums), and waits for all.  On return the
 * gradient buffer holds the sum over ranks.  Returns 0, or the first
 * failed collective's code (engine/comm.h: SD_COMM_EPEER when a peer
 * failed; the communicator is then aborted) with *why; the buffer is then
 * undefined. */
int sd_grad_sync_finish(struct sd_grad_sync *s, float *extra, int nextra, char **why);

/* Ends the step without starting more buckets: waits for those in flight
 * (a collective with a dead or stuck peer fails within the communicator's
 * timeout) and drops their results.  For a step the caller gives up on. */
void sd_grad_sync_abandon(struct sd_grad_sync *s);

#ifdef __cplusplus
}
#endif

#endif
