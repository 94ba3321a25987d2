/* engine/matmul-dnnl.h - the GEMMs of linear layers in bf16 through oneDNN's
 * matmul primitive (private to engine/; callers use sd_linear_forward and
 * sd_linear_backward of layers.h, which choose between this path and
 * OpenBLAS's cblas_sgemm).
 *
 * In bf16 precision (layers.h, SD_CONV_BF16) a linear layer's three GEMMs
 *     forward          y (n, out)  = x (n, in) . w^T (in, out) + b
 *     input gradient   dx (n, in)  = dy (n, out) . w (out, in)
 *     weight gradient  dw (out, in) += dy^T (out, n) . x (n, in)
 * read x, w and dy rounded to bfloat16 (round to nearest even, oneDNN's
 * reorder, into buffers this module owns) and write float32: the products
 * of two bf16 numbers are exact in float32 and oneDNN's AMX / AVX512-BF16
 * kernels sum them in float32.  The bias, the bias gradient (summed by
 * layers.c in double, from the float32 dy) and everything the layer's
 * caller holds (weights, gradients, optimizer state) stay float32.
 *
 * Which shapes take this path is a fixed rule (sd_linear_dnnl_bf16_wins,
 * measured with tests/bench/bench-linear-bf16, the times in matmul-dnnl.c),
 * never a timing taken during training, so a run makes the same choices and
 * gives the same bits for the same input, thread count and CPU.
 *
 * Primitives are built once per (n, in, out, bias, OpenMP thread count) and
 * kept in a process-wide cache of SD_MATMUL_PLANS_MAX plans (the least
 * recently used is dropped); building one JIT-compiles its kernels
 * (milliseconds), so the first call of a shape is slow.  Calls are
 * serialised by the cache's lock (the bf16 copies live in the plan).
 */
#ifndef SD_ENGINE_MATMUL_DNNL_H
#define SD_ENGINE_MATMUL_DNNL_H

#include <stddef.h>

#define SD_MATMUL_PLANS_MAX 64

/* 1 when bf16 precision should run the linear layer x (n, in) -> y (n, out)
 * through oneDNN: the build has oneDNN, oneDNN has bf16 kernels on this CPU
 * (sd_conv2d_dnnl_bf16_available) and the shape is one where they beat the
 * float32 sgemm (the rule in matmul-dnnl.c); else 0.  Does not look at the
 * precision: layers.c does. */
int sd_linear_dnnl_bf16_wins(int n, int in, int out);

/* y = x w^T (+ b) with x and w rounded to bf16; shapes as sd_linear_forward
 * (x (n, in), w (out, in), b (out) or NULL, y (n, out) overwritten).
 * Returns 0, or -1 (y undefined; the caller runs the float32 GEMM) when the
 * build has no oneDNN, oneDNN has no bf16 JIT kernel for the shape, or a
 * oneDNN call failed (counted by sd_linear_dnnl_failures). */
int sd_linear_dnnl_forward_bf16(float *y, const float *x, const float *w, const float *b,
                                int n, int in, int out);
/* dx = dy w (overwritten; may be NULL) and dw += dy^T x with dy, w and x
 * rounded to bf16; shapes as sd_linear_backward; bias: whether the layer
 * has one (its forward's plan is reused).  The bias gradient is the
 * caller's.  Returns 0; or -1 with dx and dw untouched when there is no
 * bf16 kernel for the shape (the caller runs the float32 GEMMs); or -1 when
 * a oneDNN call failed (sd_linear_dnnl_failures counts it; dw may then hold
 * part of the sum: the tests require that count to stay 0). */
int sd_linear_dnnl_backward_bf16(float *dx, float *dw, const float *dy, const float *x,
                                 const float *w, int n, int in, int out, int bias);

/* oneDNN's names of the three kernels for shape (n, in, out), forward /
 * input gradient / weight gradient (e.g. "brg:avx512_core_amx / ..."), into
 * buf (len bytes, NUL-terminated); "not built" without oneDNN. */
void sd_linear_dnnl_describe(int n, int in, int out, int bias, char *buf, size_t len);

/* Calls that had kernels and failed all the same (their caller then ran the
 * float32 GEMM): 0 unless something is broken; the tests check it. */
unsigned long sd_linear_dnnl_failures(void);

#endif
