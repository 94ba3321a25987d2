/* engine/conv-dnnl.h - 2-D convolutions through oneDNN (private to engine/;
 * callers use sd_conv2d_forward/backward of layers.h, which choose between
 * this path and im2col + OpenBLAS).
 *
 * oneDNN (https://github.com/oneapi-src/oneDNN, Debian's libdnnl 2.6) runs
 * "direct" convolutions: JIT-generated kernels that read the input in a
 * channel-blocked layout (nChw8c on AVX2, nChw16c on AVX-512: 8 or 16
 * channels of one pixel next to each other) and never build a column
 * matrix.  On plain NCHW buffers it falls back to its own im2col + GEMM,
 * which is slower than ours, so this path reorders: our NCHW input into the
 * blocked layout, the blocked result back to NCHW, and OIHW weights into the
 * blocked weight layout each pass wants, all inside the caller's workspace.
 *
 * Shapes and conventions are those of sd_conv2d_forward/backward: x (n, c, h,
 * w), w (k, c, r, r), b (k) or NULL, y (n, k, oh, ow), float32; forward
 * overwrites y, backward overwrites dx (may be NULL) and ACCUMULATES into dw
 * and db.  Primitives are built once per shape, bias or not, and OpenMP
 * thread count (oneDNN splits its work for the thread count it sees when a
 * primitive is built) and kept in a process-wide cache; building one JIT-
 * compiles its kernels (milliseconds), so the first call of a shape is slow.
 *
 * Reproducibility: oneDNN's CPU convolutions give the same bits for the same
 * input, thread count and CPU (no atomics); unlike the im2col path the bits
 * change with the thread count (the weight gradient is reduced over a
 * thread-dependent split of the batch).
 */
#ifndef SD_ENGINE_CONV_DNNL_H
#define SD_ENGINE_CONV_DNNL_H

#include <stddef.h>

#include "engine/layers.h"

/* 1 when this build has oneDNN and its JIT kernels (not its reference or
 * GEMM fallbacks) run the forward and weight-gradient passes of shape s,
 * else 0.  The input-gradient pass may still lack one (a 3-channel input:
 * oneDNN 2.6 has only reference loops for it); sd_conv2d_dnnl_backward then
 * refuses calls that ask for dx, and the caller runs im2col.  The first call
 * for a shape builds and caches its primitives. */
int sd_conv2d_dnnl_supported(const struct sd_conv2d_shape *s, int bias);

/* Floats of workspace the two calls below need for shape s (0 when
 * unsupported); the caller may pass a larger workspace. */
size_t sd_conv2d_dnnl_workspace_floats(const struct sd_conv2d_shape *s, int bias);

/* Forward and backward as sd_conv2d_forward/backward.  ws: at least
 * sd_conv2d_dnnl_workspace_floats(s, b != NULL) floats, contents undefined on
 * return.  Return 0, or -1 when the shape is unsupported or oneDNN failed
 * (outputs then undefined; the caller runs the im2col path instead). */
int sd_conv2d_dnnl_forward(float *y, const float *x, const float *w, const float *b,
                           const struct sd_conv2d_shape *s, float *ws);
int sd_conv2d_dnnl_backward(float *dx, float *dw, float *db, const float *dy,
                            const float *x, const float *w,
                            const struct sd_conv2d_shape *s, float *ws);

/* Channel-blocked activations.  A buffer in layout blk (8 or 16) holds an
 * (n, c, h, w) tensor as (n, c / blk, h, w, blk): blk consecutive channels of
 * one pixel next to each other (oneDNN's nChw8c / nChw16c); blk 1 is NCHW.
 * A model that keeps its activations in the layout oneDNN's kernels read
 * and write saves the reorders of the calls above. */

/* The channel block of the layout oneDNN's kernels want for shape s (8 on
 * AVX2, 16 on AVX-512 machines), or 0 when the shape is unsupported or the
 * build has no oneDNN. */
int sd_conv2d_dnnl_block(const struct sd_conv2d_shape *s);
/* 1 when shape s runs with JIT kernels on x in layout xblk (1, 8 or 16) and
 * y in layout yblk (8 or 16), dx included when need_dx, else 0. */
int sd_conv2d_dnnl_blocked_supported(const struct sd_conv2d_shape *s, int bias, int xblk,
                                     int yblk, int need_dx);
/* Workspace floats of the two calls below (0 when unsupported). */
size_t sd_conv2d_dnnl_workspace_floats_blocked(const struct sd_conv2d_shape *s, int bias,
                                               int xblk, int yblk);
/* As sd_conv2d_dnnl_forward/backward with x and dx in layout xblk, y and dy
 * in layout yblk (w, dw, b, db as ever: OIHW and (k)).  Return 0, or -1
 * (dw, db untouched) when unsupported or oneDNN failed.  keep (layers.h's
 * struct sd_conv2d_keep) or NULL: a bf16 forward converts x into it, and
 * the backward after it reads it instead of converting x again. */
int sd_conv2d_dnnl_forward_blocked(float *y, const float *x, const float *w, const float *b,
                                   const struct sd_conv2d_shape *s, int xblk, int yblk,
                                   float *ws, struct sd_conv2d_keep *keep);
int sd_conv2d_dnnl_backward_blocked(float *dx, float *dw, float *db, const float *dy,
                                    const float *x, const float *w,
                                    const struct sd_conv2d_shape *s, int xblk, int yblk,
                                    float *ws, struct sd_conv2d_keep *keep,
                                    struct sd_conv2d_keep *keep_dy);

/* sd_conv2d_keep_prepare (layers.h) on oneDNN. */
uint16_t *sd_conv2d_dnnl_keep_prepare(struct sd_conv2d_keep *keep,
                                      const struct sd_conv2d_shape *s, int bias, int xblk,
                                      int yblk, const float *x);
/* sd_conv2d_keep_prepare_dy (layers.h) on oneDNN. */
uint16_t *sd_conv2d_dnnl_keep_prepare_dy(struct sd_conv2d_keep *keep,
                                         const struct sd_conv2d_shape *s, int bias, int xblk,
                                         int yblk, const float *dy, int need_dx);

/* Writes oneDNN's names of the kernels it runs for shape s, forward /
 * backward-data / backward-weights (e.g. "jit:avx2 / jit:avx2 / jit:avx2"),
 * into buf (len bytes, NUL-terminated); "unsupported" when a pass has no JIT
 * kernel, "not built" without oneDNN. */
void sd_conv2d_dnnl_describe(const struct sd_conv2d_shape *s, int bias, char *buf, size_t len);

/* Calls so far that had usable kernels and failed all the same (their caller
 * then ran im2col): 0 unless something is broken; the tests check it. */
unsigned long sd_conv2d_dnnl_failures(void);

/* 1 when oneDNN runs bf16 convolutions with bf16 instructions here (its
 * effective ISA is avx512_core_bf16 or avx512_core_amx), else 0.  Plans are
 * built in the precision sd_conv2d_get_precision says when they are first
 * asked for (one plan per shape and precision). */
int sd_conv2d_dnnl_bf16_available(void);
/* "AMX" or "AVX512-BF16": the ISA of those kernels; NULL when there are none. */
const char *sd_conv2d_dnnl_bf16_isa(void);

/* oneDNN's version ("2.6.3"), or NULL when the build has no oneDNN. */
const char *sd_conv2d_dnnl_version(void);

#endif
