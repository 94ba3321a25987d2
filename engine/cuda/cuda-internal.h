/* engine/cuda/cuda-internal.h - shared by the files of the CUDA backend
 * plugin (spotdeck-cuda.so) and nothing else.
 *
 *   kernels-seq.cu  the language-model ops' kernels (engine/model-seq.c's
 *                semantics), deterministic reductions
 *   kernels.cu   our own kernels, for what cuDNN and cuBLAS lack: ReLU,
 *                the ResNet shortcut, bias rows, softmax cross-entropy with
 *                a deterministic loss reduction, fused SGD-momentum, the
 *                batch gather from a device-resident dataset, fills
 *   dnn.c        one layer at a time on device pointers: convolution,
 *                batch-norm and pooling through cuDNN's (legacy,
 *                per-operation) API, the linear layer through cuBLAS
 *   exec.c       the model executor: device blocks, activations, plans per
 *                batch size, CUDA graphs, the train/eval/SGD entry points
 *   selftest.c   single-layer entry points over host arrays (tests/gpu)
 *   plugin.c     the ops table, devices, versions, page-locked memory
 *
 * Every tensor is float32 NCHW as in engine/layers.h.  Functions return 0 or
 * -1 with *why (src/base/errors.h); kernels' launchers return the launch's
 * cudaError_t.  Everything a layer enqueues goes on env->stream.
 */
#ifndef SD_ENGINE_CUDA_CUDA_INTERNAL_H
#define SD_ENGINE_CUDA_CUDA_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "engine/optim.h"

/* ---- kernels.cu ---------------------------------------------------------- */

/* The step's metrics as the loss kernel leaves them on the device. */
struct cu_metrics {
	double loss_sum;   /* summed cross-entropy, in double as the CPU's */
	int correct;       /* rows whose arg-max (first on ties) is the label */
	int pad;
};

cudaError_t cu_fill(cudaStream_t st, float *p, float value, size_t count);
/* y = max(x, 0); y may equal x. */
cudaError_t cu_relu_forward(cudaStream_t st, float *y, const float *x, size_t count);
/* dx = y > 0 ? dy : 0; dx may equal dy. */
cudaError_t cu_relu_backward(cudaStream_t st, float *dx, const float *dy, const float *y,
                             size_t count);
/* dst += src. */
cudaError_t cu_add_into(cudaStream_t st, float *dst, const float *src, size_t count);
/* y: (n, out) += b: (out) on every row. */
cudaError_t cu_bias_rows(cudaStream_t st, float *y, const float *b, int n, int out);
/* y = a + S(b): a, y (n, c, h, w); b (n, cb, h*s, w*s); see
 * engine/backend-plugin.h for S. */
cudaError_t cu_shortcut_forward(cudaStream_t st, float *y, const float *a, const float *b,
                                int n, int c, int h, int w, int cb, int s);
/* db (=, or += with acc) S^T(dy). */
cudaError_t cu_shortcut_backward(cudaStream_t st, float *db, const float *dy, int n, int c,
                                 int h, int w, int cb, int s, int acc);
/* Per row of logits (n, classes): row_loss = -log softmax[label] (double),
 * row_correct = arg-max == label; with dlogits != NULL also
 * dlogits = (softmax - onehot) * scale.  As engine/layers.c's
 * sd_softmax_xent_forward/backward, a label >= classes gives a NaN loss. */
cudaError_t cu_softmax_xent(cudaStream_t st, float *dlogits, double *row_loss, int *row_correct,
                            const float *logits, const uint8_t *labels, int n, int classes,
                            float scale);
/* out = sums of row_loss and row_correct over n rows, one block, in a fixed
 * order: the same bits on every run. */
cudaError_t cu_metrics_reduce(cudaStream_t st, struct cu_metrics *out, const double *row_loss,
                              const int *row_correct, int n);
/* The batch from the device-resident training set: x (n, img) and y (n)
 * get samples idx[0..n) of data (N, img) and labels (N). */
cudaError_t cu_gather(cudaStream_t st, float *x, uint8_t *y, const float *data,
                      const uint8_t *labels, const int32_t *idx, int n, size_t img);
/* engine/optim.h's update, rounded as the CPU's (no fused multiply-add), so
 * it gives the same bits as sd_sgd_step. */
cudaError_t cu_sgd(cudaStream_t st, float *params, float *velocity, const float *grads,
                   size_t count, float lr, float momentum, float weight_decay);
/* sd_adamw_step, each operation rounded as the CPU's: the same bits.  The
 * scalars are engine/optim.h's struct sd_adamw_scalars, by value. */
cudaError_t cu_adamw(cudaStream_t st, float *params, float *m, float *v, const float *grads,
                     size_t count, struct sd_adamw_scalars s);
/* *out (device memory) = sd_sumsq(x, count), in its order: one block of 256
 * threads per SD_SUMSQ_BLOCK elements into partial (device memory, at least
 * ceil(count / SD_SUMSQ_BLOCK) doubles), then one block folds those. */
cudaError_t cu_sumsq(cudaStream_t st, double *out, double *partial, const float *x,
                     size_t count);
/* x[0..count) *= coef. */
cudaError_t cu_scale(cudaStream_t st, float *x, size_t count, float coef);


/* ---- kernels-seq.cu: the language-model ops (engine/model-seq.c's
 * semantics; shapes are its rows x last axis).  "acc": 1 adds into the
 * destination, 0 overwrites it.  Parameter gradients are always ADDED
 * (the executor zeroes the gradient block before a language model's
 * backward, since a tied table gets two contributions).  "scratch": device
 * memory of at least cu_colsum_scratch_bytes(rows, C) bytes, for the
 * deterministic two-stage column sums. */
enum cu_unary { CU_UN_COPY, CU_UN_ERF, CU_UN_POW, CU_UN_GELU_ERF, CU_UN_GELU_TANH, CU_UN_TANH };
size_t cu_colsum_scratch_bytes(size_t rows, int C);
/* out (rows, C) = table (V, C) rows picked by the float ids ids_f (rows of
 * them) or, when ids_f is NULL, by the constant idx (T of them, repeated
 * per sample); an id outside [0, V) gives zeros. */
cudaError_t cu_embed_forward(cudaStream_t st, float *out, const float *ids_f, const int32_t *idx,
                             const float *table, size_t rows, int T, int C, int V);
/* dtable += the scatter of dy, deterministic (no atomics, row order). */
cudaError_t cu_embed_backward(cudaStream_t st, float *dtable, const float *dy, const float *ids_f,
                              const int32_t *idx, size_t rows, int T, int C, int V);
/* Layer norm over C (layers-seq.h); mean, rstd (rows) may be NULL (eval);
 * beta may be NULL. */
cudaError_t cu_layernorm_forward(cudaStream_t st, float *y, float *mean, float *rstd,
                                 const float *x, const float *gamma, const float *beta,
                                 size_t rows, int C, float eps);
/* dx (NULL: not wanted), dgamma, dbeta (+=, either NULL). */
cudaError_t cu_layernorm_backward(cudaStream_t st, float *dx, int acc, float *dgamma,
                                  float *dbeta, const float *dy, const float *x,
                                  const float *mean, const float *rstd, const float *gamma,
                                  size_t rows, int C, double *scratch);
/* out (C) += the column sums of dy (rows, C): a bias's gradient. */
cudaError_t cu_colsum_dy(cudaStream_t st, float *out, const float *dy, size_t rows, int C,
                         double *scratch);
/* Softmax of rows of len; causal: row r sees columns 0 .. r % len (the
 * others get 0), the fused attention's masked softmax. */
cudaError_t cu_softmax_forward(cudaStream_t st, float *y, const float *x, size_t rows, int len,
                               int causal);
/* dx = scale y (dy - rowsum(dy y)); dx may equal dy. */
cudaError_t cu_softmax_backward(cudaStream_t st, float *dx, int acc, const float *dy,
                                const float *y, size_t rows, int len, float scale);
/* Forward y = mask[e % per] ? fill : x; backward (x = dy, y = dx) masked
 * positions get 0.  n = samples * per. */
cudaError_t cu_maskfill(cudaStream_t st, float *y, int acc, const float *x, const uint8_t *mask,
                        size_t per, size_t n, float fill, int backward);
/* Forward y[b][o] = x[b][src[o]]; backward dx[b][src[o]] = dy[b][o]. */
cudaError_t cu_transpose(cudaStream_t st, float *y, int acc, const float *x, const uint32_t *src,
                         size_t per, size_t n, int backward);
/* Forward y (rows, sn) = x (rows, sk)[:, off:off+sn]; backward the reverse,
 * zero outside the slice. */
cudaError_t cu_slice(cudaStream_t st, float *y, int acc, const float *x, size_t rows, int sk,
                     int sn, int off, int backward);
/* dy NULL: y = f(x); else y (= dx) gets dy f'(x).  e: POW's exponent. */
cudaError_t cu_unary(cudaStream_t st, float *y, int acc, const float *x, const float *dy,
                     size_t n, enum cu_unary op, float e);
/* SEQ_BIAS: y = x op k (k op x when k_first), k of kc values (1 or C). */
cudaError_t cu_bias_forward(cudaStream_t st, float *y, const float *x, const float *k, size_t n,
                            int C, int kc, int op, int k_first);
/* dx (NULL: not wanted), dk (+=, NULL for a fixed constant). */
cudaError_t cu_bias_backward(cudaStream_t st, float *dx, int acc, float *dk, const float *dy,
                             const float *x, const float *k, size_t n, int C, int kc, int op,
                             int k_first, double *scratch);
/* OP_BINARY of two same-shape activations; backward of operand which (0:
 * a, 1: b). */
cudaError_t cu_binary_forward(cudaStream_t st, float *y, const float *a, const float *b,
                              size_t n, int op);
cudaError_t cu_binary_backward(cudaStream_t st, float *d, int acc, const float *dy,
                               const float *a, const float *b, size_t n, int op, int which);
/* x = (float)ids: a language model's input activation. */
cudaError_t cu_ids_to_float(cudaStream_t st, float *x, const int32_t *ids, size_t n);
/* Next-token cross-entropy over rows of V logits (layers-seq.h's
 * sd_cross_entropy_seq_forward_backward): row_loss (rows, double), out->
 * loss_sum their sum in row order, dlogits (NULL, or may equal logits). */
cudaError_t cu_seq_xent(cudaStream_t st, float *dlogits, double *row_loss, struct cu_metrics *out,
                        const float *logits, const int32_t *y, size_t rows, int V, float scale);

#ifdef __cplusplus
}
#endif

/* The rest is host C for dnn.c, exec.c, selftest.c and plugin.c. */
#ifndef __CUDACC__
#include <cublas_v2.h>
#include <cudnn.h>

#include "engine/backend-plugin.h"
#include "engine/layers.h"

/* Error helpers: store "what: library message" in *why, return -1. */
int cu_fail_cuda(char **why, const char *what, cudaError_t e);
int cu_fail_dnn(char **why, const char *what, cudnnStatus_t s);
int cu_fail_blas(char **why, const char *what, cublasStatus_t s);

#define CU_TRY(call) do { cudaError_t e_ = (call); \
	if (e_ != cudaSuccess) return cu_fail_cuda(why, #call, e_); } while (0)
#define DNN_TRY(call) do { cudnnStatus_t s_ = (call); \
	if (s_ != CUDNN_STATUS_SUCCESS) return cu_fail_dnn(why, #call, s_); } while (0)
#define BLAS_TRY(call) do { cublasStatus_t s_ = (call); \
	if (s_ != CUBLAS_STATUS_SUCCESS) return cu_fail_blas(why, #call, s_); } while (0)

/* What every layer call needs: the libraries' handles bound to one stream,
 * the shared workspace, a column of ones for bias gradients, the math. */
struct cu_env {
	cudaStream_t stream;
	cudnnHandle_t dnn;
	cublasHandle_t blas;
	void *ws;                 /* cuDNN workspace, ws_bytes */
	void *blas_ws;            /* cuBLAS's own workspace */
	size_t ws_bytes;
	const float *ones;        /* at least max_batch ones */
	int tf32;                 /* 1: TF32 tensor cores allowed (SPOTDECK_CUDA_TF32=1) */
	int find;                 /* 1: convolution algorithms by measurement (cudnnFind*) */
};

/* A convolution at one batch size: descriptors and the chosen algorithms.
 * Only deterministic algorithms are ever chosen (cuDNN developer guide,
 * "Reproducibility"), so two runs give the same bits. */
struct cu_conv {
	struct sd_conv2d_shape s;
	int has_bias;
	cudnnTensorDescriptor_t x, y, bias;
	cudnnFilterDescriptor_t w;
	cudnnConvolutionDescriptor_t conv;
	cudnnConvolutionFwdAlgo_t fwd;
	cudnnConvolutionBwdDataAlgo_t bwd_data;
	cudnnConvolutionBwdFilterAlgo_t bwd_filter;
	int checked;              /* ran once: the algorithms are known to work */
};
/* Builds the descriptors and picks algorithms that fit env->ws_bytes; with
 * env->find, measures them on the given buffers (x, w, y, dy, dx, dw: device
 * memory of the layer's shapes that may be overwritten; NULL = heuristics). */
int cu_conv_init(struct cu_conv *c, const struct cu_env *env, const struct sd_conv2d_shape *s,
                 int has_bias, int backward, float *x, float *w, float *y, float *dy, float *dx,
                 float *dw, char **why);
void cu_conv_fini(struct cu_conv *c);
int cu_conv_forward(const struct cu_env *env, struct cu_conv *c, float *y, const float *x,
                    const float *w, const float *b, char **why);
/* dx (NULL: not needed) = or += (acc_dx); dw, db (NULL without bias) =. */
int cu_conv_backward(const struct cu_env *env, struct cu_conv *c, float *dx, int acc_dx,
                     float *dw, float *db, const float *dy, const float *x, const float *w,
                     char **why);

/* Spatial batch-norm (per channel over N, H, W) through cuDNN with the
 * node's momentum (the batch's weight in the running averages, as
 * engine/layers.h's and cuDNN's exponentialAverageFactor) and epsilon (the
 * built-in models': 0.1 and 1e-5; an ONNX model's: its own); cuDNN's running
 * variance uses the unbiased estimate, as the CPU's. */
struct cu_bn {
	int n, c, hw;
	double momentum, eps;
	cudnnTensorDescriptor_t x, p;
};
int cu_bn_init(struct cu_bn *b, int n, int c, int hw, double momentum, double eps, char **why);
void cu_bn_fini(struct cu_bn *b);
int cu_bn_forward_train(const struct cu_env *env, const struct cu_bn *b, float *y,
                        float *save_mean, float *save_invstd, float *running_mean,
                        float *running_var, const float *x, const float *gamma,
                        const float *beta, char **why);
int cu_bn_forward_eval(const struct cu_env *env, const struct cu_bn *b, float *y, const float *x,
                       const float *gamma, const float *beta, const float *running_mean,
                       const float *running_var, char **why);
int cu_bn_backward(const struct cu_env *env, const struct cu_bn *b, float *dx, int acc_dx,
                   float *dgamma, float *dbeta, const float *dy, const float *x,
                   const float *save_mean, const float *save_invstd, const float *gamma,
                   char **why);

/* Max (cuDNN's deterministic max mode) or average pooling, k x k window,
 * stride s, no padding. */
struct cu_pool {
	cudnnPoolingDescriptor_t desc;
	cudnnTensorDescriptor_t x, y;
};
int cu_pool_init(struct cu_pool *p, int max, int n, int c, int h, int w, int k, int s, char **why);
void cu_pool_fini(struct cu_pool *p);
int cu_pool_forward(const struct cu_env *env, const struct cu_pool *p, float *y, const float *x,
                    char **why);
int cu_pool_backward(const struct cu_env *env, const struct cu_pool *p, float *dx, int acc_dx,
                     const float *dy, const float *x, const float *y, char **why);

/* Linear layer through cuBLAS SGEMM/SGEMV (row-major (n, in) x (out, in)^T
 * computed as the column-major product of the transposes). */
int cu_linear_forward(const struct cu_env *env, float *y, const float *x, const float *w,
                      const float *b, int n, int in, int out, char **why);
int cu_linear_backward(const struct cu_env *env, float *dx, int acc_dx, float *dw, float *db,
                       const float *dy, const float *x, const float *w, int n, int in, int out,
                       char **why);

/* Creates handles bound to stream, sets the math mode from env's flags and
 * gives cuBLAS its own workspace (needed for CUDA graph capture). */
int cu_env_init(struct cu_env *env, cudaStream_t stream, size_t ws_bytes, int max_ones,
                char **why);
void cu_env_fini(struct cu_env *env);

/* plugin.c: the page-locked allocator, and the NCCL ops (NULL without). */
void *cu_host_alloc(size_t bytes);
void cu_host_free(void *p);

/* selftest.c */
extern const struct sd_backend_layer_ops cu_layer_ops;

/* exec.c: the device model entry points of the ops table. */
int cu_model_create(struct sd_dev_model **out, const struct sd_model *m, int max_batch,
                    char **why);
void cu_model_destroy(struct sd_dev_model *d);
int cu_model_upload(struct sd_dev_model *d, enum sd_dev_block b, const float *host, char **why);
int cu_model_download(struct sd_dev_model *d, enum sd_dev_block b, float *host, char **why);
float *cu_model_block(struct sd_dev_model *d, enum sd_dev_block b);
int cu_train_batch(struct sd_dev_model *d, const float *x, const uint8_t *labels, int n,
                   float grad_scale, double *loss_sum, int *correct, char **why);
int cu_dataset_upload(struct sd_dev_model *d, const float *images, const uint8_t *labels, int n,
                      char **why);
int cu_train_indexed(struct sd_dev_model *d, const int32_t *idx, int n, float grad_scale,
                     double *loss_sum, int *correct, char **why);
int cu_eval_batch(struct sd_dev_model *d, const float *x, const uint8_t *labels, int n,
                  double *loss_sum, int *correct, char **why);
int cu_train_tokens(struct sd_dev_model *d, const int32_t *x, const int32_t *y, int n,
                    float grad_scale, double *loss_sum, char **why);
int cu_eval_tokens(struct sd_dev_model *d, const int32_t *x, const int32_t *y, int n,
                   double *loss_sum, char **why);
int cu_sgd_step(struct sd_dev_model *d, float lr, float momentum, float weight_decay, char **why);
int cu_adamw_step(struct sd_dev_model *d, const struct sd_adamw_scalars *s, char **why);
int cu_grad_sumsq(struct sd_dev_model *d, double *sumsq, char **why);
int cu_grad_scale(struct sd_dev_model *d, float coef, char **why);
const char *cu_model_describe(struct sd_dev_model *d);

/* Environment switches read once per model (documented in
 * man/spotdeck-worker.1): SPOTDECK_CUDA_TF32, SPOTDECK_CUDA_CONV_ALGO,
 * SPOTDECK_CUDA_GRAPHS. */
int cu_env_flag(const char *name, int dflt);
#endif /* !__CUDACC__ */

#endif
