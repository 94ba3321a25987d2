/* engine/layers-seq.h - CPU kernels of decoder-only transformers (GPT-2 /
 * nanoGPT shape): layer normalisation, softmax over the last axis, GELU,
 * token embeddings, batched matrix products, fused causal self-attention
 * and the next-token cross-entropy.
 *
 * Conventions are those of engine/layers.h: float32, row-major, forward
 * functions OVERWRITE their outputs, backward functions OVERWRITE the input
 * gradients (dx, dq, ...; NULL when the caller does not need one, where a
 * comment says so) and ACCUMULATE (+=) into parameter gradients (dgamma,
 * dbeta, dtable).  Nothing allocates; callers own every buffer.  GEMMs go
 * through OpenBLAS's cblas_sgemm, one call per matrix of a batch: Debian
 * 12's OpenBLAS (0.3.21) declares neither cblas_sgemm_batch nor a strided
 * variant in <cblas.h>.  Loops run on OpenMP threads when their work
 * reaches SD_LAYERS_OMP_MIN elements; every output element (and every
 * parameter-gradient element) is computed by one thread in a fixed order,
 * so results are bit-identical for a fixed thread count (and, for all but
 * the GEMM-based kernels, for any thread count).  The row kernels (layer
 * norm, softmax, GELU, cross-entropy) have AVX-512 twins used where the
 * CPU has AVX-512F (off with SD_LAYERS_NO_AVX512 in the environment, as in
 * engine/layers.c) that give the same bits as the baseline code.
 * exp and erf are computed inline (Cephes's expf polynomial, Abramowitz &
 * Stegun 7.1.26, see layers-seq.c) so the loops vectorise: about 1 ulp
 * for exp and 1.5e-7 absolute for erf, as PyTorch's vectorised CPU
 * kernels.
 *
 * Shapes: B = batch, T = time (sequence length), C = channels, H = heads,
 * D = C / H (channels per head), V = vocabulary, N = rows (B * T when a
 * (B, T, C) activation is seen as rows of C).  Every dimension must be
 * >= 1: the kernels do not check for empty tensors.
 */
#ifndef SD_ENGINE_LAYERS_SEQ_H
#define SD_ENGINE_LAYERS_SEQ_H

#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------ layer norm
 * Layer normalisation over the last axis (Ba, Kiros & Hinton 2016,
 * torch.nn.LayerNorm, ONNX LayerNormalization with axis = -1):
 *   mean = sum_c x / C,  var = sum_c (x - mean)^2 / C  (biased),
 *   rstd = 1 / sqrt(var + eps),  y = (x - mean) * rstd * gamma + beta.
 * x, y: (n, c); gamma: (c); beta: (c) or NULL (no bias); mean, rstd: (n),
 * written for the backward pass (both NULL in inference).  Statistics are
 * computed in double (two passes), so y matches a double-precision
 * reference to float rounding.  y may equal x. */
void sd_layernorm_forward(float *y, float *mean, float *rstd, const float *x,
                          const float *gamma, const float *beta, int n, int c, float eps);
/* dy: (n, c) -> dx: (n, c) overwritten (may be NULL);
 *   dx = rstd * (g - mean_c(g) - xhat * mean_c(g * xhat)),  g = dy * gamma,
 *   xhat = (x - mean) * rstd;
 * dgamma: (c) += sum_n dy * xhat; dbeta: (c) += sum_n dy (either may be NULL).
 * x is the forward input, mean/rstd what forward saved.  dx must not alias
 * x or dy.  dgamma/dbeta are summed over the rows in row order by the
 * thread that owns the channel, so they do not depend on the thread count. */
void sd_layernorm_backward(float *dx, float *dgamma, float *dbeta, const float *dy,
                           const float *x, const float *mean, const float *rstd,
                           const float *gamma, int n, int c);

/* --------------------------------------------------- softmax, last axis
 * y[r][j] = exp(x[r][j] - m) / sum_l exp(x[r][l] - m), m = max_l x[r][l]
 * (subtracting the row maximum keeps exp from overflowing; the result is
 * the same function).  A row that is entirely -infinity gives NaN, as in
 * PyTorch.  x, y: (rows, len); y may equal x. */
void sd_softmax_lastdim_forward(float *y, const float *x, int rows, int len);
/* dx = y * (dy - sum_j dy[j] y[j]) per row (the softmax Jacobian applied
 * to dy), overwritten; y is the forward output; dx may equal dy. */
void sd_softmax_lastdim_backward(float *dx, const float *dy, const float *y, int rows, int len);

/* ------------------------------------------------------------------ GELU
 * Gaussian error linear unit (Hendrycks & Gimpel 2016), elementwise:
 *   SD_GELU_ERF   y = x/2 (1 + erf(x / sqrt 2))            (exact; torch's
 *                 default, the Erf chain of an ONNX export)
 *   SD_GELU_TANH  y = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
 *                 (GPT-2's approximation, torch approximate='tanh')
 * x, y: (count); y may equal x. */
enum sd_gelu_kind { SD_GELU_ERF, SD_GELU_TANH };
void sd_gelu_forward(float *y, const float *x, size_t count, enum sd_gelu_kind kind);
/* dx = dy * dgelu/dx (x), overwritten; x is the forward input; dx may equal dy. */
void sd_gelu_backward(float *dx, const float *dy, const float *x, size_t count,
                      enum sd_gelu_kind kind);

/* ------------------------------------------------------------- embedding
 * Token (or position) embedding, ONNX Gather on axis 0 of a table:
 * out[i] = table[ids[i]].  ids: (n) int32 in [0, vocab); table: (vocab, c);
 * out: (n, c).  Returns 0, or -1 when an id lies outside [0, vocab) (its
 * row of out is then set to zero, the others are still written). */
int sd_embedding_forward(float *out, const int32_t *ids, const float *table, int n, int c,
                         int vocab);
/* dtable[ids[i]] += dout[i] for i = 0 .. n-1 (dtable: (vocab, c), ACCUMULATED;
 * repeated ids add up).  Each thread owns a block of channels and walks the
 * ids in order, so there are no atomics and the sums have the same order
 * (and bits) for any thread count.  Ids outside [0, vocab) are skipped. */
void sd_embedding_backward(float *dtable, const float *dout, const int32_t *ids, int n, int c,
                           int vocab);

/* ---------------------------------------------------- batched matmul
 * ONNX MatMul with batch dimensions: for each of `batch` matrices,
 *   Y[b] = op(A[b]) op(B[b]),  op(A): (m, k), op(B): (k, n), Y[b]: (m, n),
 * where op(A) = A (A[b] stored (m, k)) or, when trans_a, A^T (A[b] stored
 * (k, m)), and likewise op(B) = B (stored (k, n)) or B^T (stored (n, k))
 * when trans_b.  The matrices of a batch are contiguous: A is (batch, m, k)
 * or (batch, k, m), B (batch, k, n) or (batch, n, k), Y (batch, m, n).
 * One cblas_sgemm per matrix, the batch split across OpenMP threads (each
 * with single-threaded OpenBLAS, as engine/layers.c does). */
void sd_matmul_batched_forward(float *y, const float *a, const float *b, int batch, int m,
                               int k, int n, int trans_a, int trans_b);
/* dy: (batch, m, n) -> da (same layout as a) and db (same layout as b),
 * each OVERWRITTEN, or ADDED TO when accumulate is set (for an operand
 * that is also used elsewhere, or a parameter); either may be NULL.
 * dop(A) = dY op(B)^T, dop(B) = op(A)^T dY, transposed back to the
 * stored layout. */
void sd_matmul_batched_backward(float *da, float *db, const float *dy, const float *a,
                                const float *b, int batch, int m, int k, int n, int trans_a,
                                int trans_b, int accumulate);

/* ------------------------------------------ fused causal self-attention
 * y = softmax(q k^T * scale + mask) v per (batch, head), mask[i][j] = 0 for
 * j <= i and -infinity for j > i (a query at time i sees keys 0 .. i), as
 * the MatMul -> Mul/Div -> Where/Add -> Softmax -> MatMul chain of a GPT
 * export computes; scale is usually 1 / sqrt(D).
 * q, k, v, y: (B, H, T, D).  probs: (B, H, T, T), written: the softmax
 * probabilities, which the backward pass reads (this kernel SAVES THE
 * PROBABILITIES rather than the row max and sum: for the T of a CPU-sized
 * model it is less work than recomputing q k^T, and backward stays pure
 * GEMMs); entries above the diagonal are exactly 0.  The scores are q k^T
 * by cblas_sgemm into probs, then masked and normalised in place, then
 * y = probs v by cblas_sgemm, in blocks of 32 query rows that skip the
 * keys above the diagonal.  Parallel over the B * H (batch, head) pairs,
 * each computed by one thread. */
void sd_attention_causal_forward(float *y, float *probs, const float *q, const float *k,
                                 const float *v, int b, int h, int t, int d, float scale);
/* dy: (B, H, T, D) -> dq, dk, dv: (B, H, T, D), OVERWRITTEN (any may be
 * NULL when not needed).  q, k, v, probs as forward took and wrote them.
 * ws: B * H * T * T
 * floats of scratch (the size of probs), contents undefined on return.
 *   dv = P^T dy,  dP = dy v^T,  dS = P * (dP - rowsum(P * dP)) * scale,
 *   dq = dS k,    dk = dS^T q. */
void sd_attention_causal_backward(float *dq, float *dk, float *dv, const float *dy,
                                  const float *q, const float *k, const float *v,
                                  const float *probs, float *ws, int b, int h, int t, int d,
                                  float scale);

/* ------------------------------------------------ sequence cross-entropy
 * Next-token loss over n positions: logits (n, V), targets (n) int32.
 * Returns the SUM over rows of -log softmax(logits[i])[targets[i]] in
 * double (as sd_softmax_xent_forward does, so workers' partial sums add
 * exactly), and writes dlogits = (softmax(logits[i]) - onehot(targets[i]))
 * * scale, overwritten (pass scale = 1 / the global number of positions for
 * a mean loss).  A negative target marks a row to ignore (PyTorch's
 * ignore_index = -100): it adds no loss and gets a zero gradient.
 * dlogits may be NULL (evaluation) or equal logits (in place, saving a
 * (n, V) buffer).  Returns NAN when a target is >= V (a caller's bug: token
 * ids are checked when the data are loaded). */
double sd_cross_entropy_seq_forward_backward(float *dlogits, const float *logits,
                                             const int32_t *targets, int n, int v, float scale);

#endif
