/* engine/layers.h - CPU reference layers of the training engine.
 *
 * Every tensor is float32 in row-major NCHW order (N = batch, C = channels,
 * H = height, W = width) unless a comment says otherwise.  Forward functions
 * overwrite their outputs.  Backward functions OVERWRITE the input gradient
 * (dx) and ACCUMULATE (+=) into parameter gradients (dw, db, dgamma, dbeta), so
 * a model zeroes its gradient buffer once per step (the llm.c convention).
 * dx may be NULL when the caller does not need it (first layer).
 * No function allocates; callers own every buffer.  GEMMs go through OpenBLAS
 * (cblas_sgemm), convolutions through OpenBLAS or oneDNN (sd_conv2d_path); the
 * number of threads is whatever openblas_set_num_threads() and OpenMP were
 * given, and results are bit-identical for a fixed thread count.  (The
 * oneDNN path keeps a process-wide cache of its compiled kernels: the only
 * memory this module allocates.)
 */
#ifndef SD_ENGINE_LAYERS_H
#define SD_ENGINE_LAYERS_H

/* Elements below which a layer's OpenMP parallel region costs more than it
 * saves (measured on the CPU kernels of layers.c, layers-blocked.c and
 * layers-general.c, which all use it). */
#define SD_LAYERS_OMP_MIN 32768

#include <stddef.h>
#include <stdint.h>

/* Linear (fully connected): y[n][o] = b[o] + sum_i x[n][i] * w[o][i].
 * x: (n, in)   w: (out, in)   b: (out) or NULL   y: (n, out).
 * OpenBLAS's sgemm; in bf16 precision (sd_conv2d_set_precision below) and
 * for the shapes engine/matmul-dnnl.h's rule takes, oneDNN's bf16 matmul. */
void sd_linear_forward(float *y, const float *x, const float *w, const float *b,
                       int n, int in, int out);
/* dy: (n, out) -> dx: (n, in) overwritten (may be NULL); dw: (out, in) +=;
 * db: (out) += (may be NULL when the layer has no bias). */
void sd_linear_backward(float *dx, float *dw, float *db, const float *dy,
                        const float *x, const float *w, int n, int in, int out);

/* 2-D convolution with square kernel r x r, equal stride and zero padding. */
struct sd_conv2d_shape {
	int n, c, h, w;     /* input (N, C, H, W) */
	int k, r;           /* output channels, kernel size */
	int stride, pad;
	int oh, ow;         /* output H, W: filled by sd_conv2d_shape_init */
};
/* Fills oh = (h + 2 pad - r) / stride + 1 and ow likewise.
 * Returns 0, or -1 when the shape is empty or the kernel does not fit. */
int sd_conv2d_shape_init(struct sd_conv2d_shape *s, int n, int c, int h, int w,
                         int k, int r, int stride, int pad);
/* Floats of scratch memory sd_conv2d_forward/backward need for shape s, on
 * whichever path they take (the larger of the two paths' needs, so the
 * workspace stays big enough when the path is changed later), at the
 * OpenMP thread count of this call: oneDNN's kernels and scratchpads are
 * built per count, and a call under another count may need more (on an
 * AVX-512 AMD EPYC, 2 threads needed more than 1).  The same holds for
 * sd_conv2d_workspace_floats_blocked. */
size_t sd_conv2d_workspace_floats(const struct sd_conv2d_shape *s);
/* x: (n, c, h, w)  w: (k, c, r, r)  b: (k) or NULL  y: (n, k, oh, ow).
 * ws: sd_conv2d_workspace_floats(s) floats, contents undefined on return. */
void sd_conv2d_forward(float *y, const float *x, const float *w, const float *b,
                       const struct sd_conv2d_shape *s, float *ws);
/* dy: (n, k, oh, ow) -> dx: (n, c, h, w) overwritten (may be NULL);
 * dw: (k, c, r, r) +=; db: (k) += (may be NULL). */
void sd_conv2d_backward(float *dx, float *dw, float *db, const float *dy,
                        const float *x, const float *w,
                        const struct sd_conv2d_shape *s, float *ws);

/* Convolution paths.  Both compute the same function; they differ in speed
 * and in the rounding of the sums (see test-layers for the bounds).
 *   SD_CONV_IM2COL  im2col + OpenBLAS, always built: the reference.
 *   SD_CONV_ONEDNN  oneDNN's direct convolutions (engine/conv-dnnl.h), where
 *                   the build has oneDNN and oneDNN has JIT kernels for the
 *                   shape; any other shape runs im2col.
 *   SD_CONV_AUTO    per shape, the faster of the two according to the table
 *                   in layers.c (measured with tests/bench/bench-conv).
 * The choice is fixed per shape, never timed while training, so the same
 * run makes the same choices and gives the same bits. */
enum sd_conv_path { SD_CONV_AUTO, SD_CONV_IM2COL, SD_CONV_ONEDNN };

/* Sets the process-wide path (initially from the environment variable
 * SPOTDECK_CONV = auto, im2col or onednn; auto when unset).  Call between
 * convolutions, not during one. */
void sd_conv2d_set_path(enum sd_conv_path p);
enum sd_conv_path sd_conv2d_get_path(void);
/* "auto", "im2col", "onednn". */
const char *sd_conv2d_path_name(enum sd_conv_path p);
/* Parses a path name; returns 0, or -1 with *why naming the bad value. */
int sd_conv2d_parse_path(const char *name, enum sd_conv_path *out, char **why);
/* Checks SPOTDECK_CONV: 0 when unset or valid, else -1 with *why (a
 * program calls it at start-up to refuse a misspelt value; the layers
 * themselves fall back to auto). */
int sd_conv2d_check_env(char **why);
/* The path a call with shape s (with a bias or not) takes now:
 * SD_CONV_IM2COL or SD_CONV_ONEDNN.  A backward call asking for dx on a shape
 * whose input gradient oneDNN has no JIT kernel for (3 input channels) runs
 * im2col whatever this says. */
enum sd_conv_path sd_conv2d_path(const struct sd_conv2d_shape *s, int bias);
/* Convolution precision, process-wide like the path.
 *   SD_CONV_FP32  float32 everywhere (the default).
 *   SD_CONV_BF16  the oneDNN path's primitives read bfloat16 x, w and dy
 *                 (8 significant bits; converted from our float32 buffers in
 *                 the workspace each call) and write float32 y, dx, dw and
 *                 db: every product is exact in float32 and summed in
 *                 float32, so an output differs from float32's by at most
 *                 about 2^-7 of the sum of its terms' magnitudes (the two
 *                 operands' rounding, 2^-8 each; tests/engine/test-conv-bf16
 *                 derives it).  Linear layers (sd_linear_forward and
 *                 sd_linear_backward) likewise run their GEMMs on bf16 x, w
 *                 and dy through oneDNN's matmul, for the shapes where that
 *                 beats the float32 sgemm (engine/matmul-dnnl.h's rule;
 *                 tests/engine/test-linear-bf16 holds them to the same
 *                 bound); their bias gradient stays float32.  Weights,
 *                 gradients, batch-norm statistics and everything else stay
 *                 float32, and so do convolutions on the im2col path.
 *                 Only where oneDNN has bf16 kernels for this CPU
 *                 (AVX512-BF16 or AMX: sd_conv2d_bf16_available);
 *                 elsewhere a call runs as in float32.
 *                 tests/bench/bench-conv-bf16 and bench-linear-bf16
 *                 measure it.
 * Call between convolutions, not during one; bits are reproducible as in
 * float32 (same input, thread count and CPU, same bits). */
enum sd_conv_precision { SD_CONV_FP32, SD_CONV_BF16 };
void sd_conv2d_set_precision(enum sd_conv_precision p);
enum sd_conv_precision sd_conv2d_get_precision(void);
/* "fp32", "bf16". */
const char *sd_conv2d_precision_name(enum sd_conv_precision p);
/* Parses a precision name; returns 0, or -1 with *why naming the bad value. */
int sd_conv2d_parse_precision(const char *name, enum sd_conv_precision *out, char **why);
/* 1 when this build has oneDNN and oneDNN dispatches to an ISA with bf16
 * instructions on this CPU (avx512_core_bf16 or avx512_core_amx), else 0. */
int sd_conv2d_bf16_available(void);
/* The instructions oneDNN's bf16 kernels use on this CPU, for reports:
 * "AMX" (avx512_core_amx) or "AVX512-BF16" (avx512_core_bf16); NULL where
 * sd_conv2d_bf16_available is 0. */
const char *sd_conv2d_bf16_isa(void);
/* oneDNN calls that had kernels for their shape and failed anyway, so that
 * im2col ran in their place (same results, less speed): 0 unless something
 * is broken.  The tests check that it stays 0. */
unsigned long sd_conv2d_fallbacks(void);
/* oneDNN's version ("2.6.3") when the build has oneDNN, else NULL. */
const char *sd_conv2d_onednn_version(void);
/* Writes oneDNN's names of its kernels for shape s into buf (len bytes):
 * "fwd / bwd-data / bwd-weights", e.g. "jit:avx2 / jit:avx2 / jit:avx2";
 * a pass oneDNN would run with naive or GEMM kernels, which this engine does
 * not use, shows as "ref:any" or "gemm:jit".  For benchmarks and tests. */
void sd_conv2d_describe(const struct sd_conv2d_shape *s, int bias, char *buf, size_t len);

/* Batch normalisation over (N, H, W) per channel (Ioffe & Szegedy 2015).
 * Training mode normalises with the batch statistics (biased variance),
 * saves mean and invstd = 1/sqrt(var + eps) for the backward pass, and updates
 * running_mean/running_var with running = (1-momentum) running + momentum batch,
 * using the unbiased variance for running_var (PyTorch's convention).
 * x, y: (n, c, hw)  gamma, beta, mean, invstd, running_*: (c). */
void sd_batchnorm_forward_train(float *y, float *mean, float *invstd,
                                float *running_mean, float *running_var,
                                const float *x, const float *gamma, const float *beta,
                                int n, int c, int hw, float momentum, float eps);
/* Inference mode: normalises with running_mean/running_var. */
void sd_batchnorm_forward_eval(float *y, const float *x, const float *gamma,
                               const float *beta, const float *running_mean,
                               const float *running_var, int n, int c, int hw, float eps);
/* dx overwritten; dgamma, dbeta +=.  mean/invstd are what forward_train saved. */
void sd_batchnorm_backward(float *dx, float *dgamma, float *dbeta, const float *dy,
                           const float *x, const float *mean, const float *invstd,
                           const float *gamma, int n, int c, int hw);

/* ReLU: y = max(x, 0) over count elements; y may equal x (in place). */
void sd_relu_forward(float *y, const float *x, size_t count);
/* dx = dy where y > 0 else 0; dx may equal dy. */
void sd_relu_backward(float *dx, const float *dy, const float *y, size_t count);

/* Elementwise activations other than ReLU (the ONNX ops of the same
 * names), out of place:
 *   SD_ACT_LEAKY_RELU  y = x > 0 ? x : a x        (a: the slope, 0.01 in PyTorch)
 *   SD_ACT_SIGMOID     y = 1 / (1 + exp(-x))
 *   SD_ACT_TANH        y = tanh(x)
 *   SD_ACT_CLIP        y = min(max(x, a), b)      (ReLU6: a = 0, b = 6)
 * Backward: dx = dy * dy/dx, from x (leaky, clip) or y (sigmoid, tanh);
 * clip passes the gradient where a <= x <= b, as torch.clamp does. */
enum sd_act_kind { SD_ACT_LEAKY_RELU, SD_ACT_SIGMOID, SD_ACT_TANH, SD_ACT_CLIP };
void sd_act_forward(float *y, const float *x, size_t count, enum sd_act_kind kind, float a,
                    float b);
/* dx overwritten; may equal dy. */
void sd_act_backward(float *dx, const float *dy, const float *x, const float *y, size_t count,
                     enum sd_act_kind kind, float a, float b);

/* dst += src over count elements (a second contribution to a gradient);
 * dst and src must not overlap.  Each element is one addition, so the
 * result is the same bits for any thread count. */
void sd_accumulate(float *restrict dst, const float *restrict src, size_t count);

/* Max pooling, window k x k, stride s, no padding; oh = (h - k) / s + 1.
 * x: (n, c, h, w) -> y: (n, c, oh, ow); argmax: (n, c, oh, ow) index into the
 * input plane (0 .. h*w-1) of the maximum, first one on ties. */
void sd_maxpool_forward(float *y, int32_t *argmax, const float *x,
                        int n, int c, int h, int w, int k, int s);
/* dx: (n, c, h, w) overwritten (zero except at argmax positions). */
void sd_maxpool_backward(float *dx, const float *dy, const int32_t *argmax,
                         int n, int c, int h, int w, int k, int s);

/* Max pooling with pad rows and columns of -infinity on every side (as
 * PyTorch's MaxPool2d(padding=pad), pad < k): oh = (h + 2 pad - k) / s + 1;
 * argmax as above (never a padding position, since every window holds at
 * least one input element when pad < k). */
void sd_maxpool_pad_forward(float *y, int32_t *argmax, const float *x, int n, int c, int h,
                            int w, int k, int s, int pad);
void sd_maxpool_pad_backward(float *dx, const float *dy, const int32_t *argmax, int n, int c,
                             int h, int w, int k, int s, int pad);

/* Average pooling, window k x k, stride s, no padding (k = h = w, s = 1 gives
 * global average pooling). */
void sd_avgpool_forward(float *y, const float *x, int n, int c, int h, int w, int k, int s);
void sd_avgpool_backward(float *dx, const float *dy, int n, int c, int h, int w, int k, int s);

/* Softmax cross-entropy.  logits: (n, classes); labels: (n), 0..classes-1.
 * Writes probs: (n, classes) and returns the SUM (not mean) of -log p[label]
 * over the n rows, in double precision, so data-parallel workers can add
 * their partial sums exactly. *correct (may be NULL) gets the number of rows
 * whose arg-max equals the label. */
double sd_softmax_xent_forward(float *probs, int *correct, const float *logits,
                               const uint8_t *labels, int n, int classes);
/* dlogits = (probs - onehot(label)) * scale, overwritten.  For data-parallel
 * SGD pass scale = 1 / global_batch so an all-reduce SUM gives the mean. */
void sd_softmax_xent_backward(float *dlogits, const float *probs, const uint8_t *labels,
                              int n, int classes, float scale);

/* ------------------------------------------------ channel-blocked layouts
 * (engine/layers-blocked.c)
 *
 * oneDNN's convolution kernels read and write activations with the channels
 * in blocks of blk: an (n, c, h, w) tensor stored as (n, c / blk, h, w, blk),
 * blk consecutive channels of one pixel next to each other (oneDNN's nChw8c
 * on AVX2 machines, nChw16c on AVX-512 ones).  A model whose activations stay
 * in that layout saves two reorders per convolution call (one per tensor it
 * reads or writes); the functions here are the rest of a ResNet in that
 * layout.  blk is 1 (plain NCHW), 8 or 16, and c must be a multiple of blk.
 * Element (i, ch, p) of a plane of hw pixels is at
 *   ((i * (c / blk) + ch / blk) * hw + p) * blk + ch % blk.
 * Like the rest of this file: outputs overwritten, parameter gradients
 * accumulated, nothing allocated, results independent of the thread count.
 * The batch-norm functions keep their per-channel sums on the stack and take
 * at most SD_BN_CHANNELS_MAX channels.
 */
#define SD_BN_CHANNELS_MAX 2048

/* dst = src converted from NCHW to layout blk, and back.  (n, c, hw). */
void sd_layout_to_blocked(float *dst, const float *src, int n, int c, int hw, int blk);
void sd_layout_from_blocked(float *dst, const float *src, int n, int c, int hw, int blk);
/* dst += src, dst (n, c, hw) in layout 16 (nChw16c), src float32 NHWC
 * (n, hw, c), as oneDNN's AMX backward-data kernels write a gradient
 * (sd_conv2d_keep's dx_nhwc); c a multiple of 16.  Each element is one
 * addition: the same bits as reordering src to layout 16 and calling
 * sd_accumulate, for any thread count, without the reordered copy. */
void sd_accumulate_nhwc(float *restrict dst, const float *restrict src, int n, int c, int hw);
/* dst += (float)src, dst as above, src bf16 NHWC (n, hw, c) as oneDNN's AMX
 * backward-data kernels write it where asked (sd_conv2d_keep's dx_bf16_ok:
 * a further contribution to a float32 gradient, rounded to bf16 as
 * PyTorch's autocast keeps a convolution's input gradient).  Widening is
 * exact, so each element is one float32 addition: dst + the bf16 value
 * (the upper 16 bits of a float32, the lower zero).  With c 16 NHWC is
 * nChw16c.  c a multiple of 16. */
void sd_accumulate_nhwc_bf16(float *restrict dst, const uint16_t *restrict src, int n, int c,
                             int hw);

/* The channel block oneDNN's kernels want for shape s (8 or 16), or 0 when
 * the build has no oneDNN or it has no JIT kernels for the shape. */
int sd_conv2d_block(const struct sd_conv2d_shape *s);
/* Convolution with x, dx in layout xblk and y, dy in layout yblk.  oneDNN
 * runs it when it has JIT kernels for those layouts; otherwise (and always
 * when the path is forced to im2col) the tensors are converted to NCHW in
 * the workspace and the im2col path runs, so any layout works everywhere.
 * ws: sd_conv2d_workspace_floats_blocked(s, xblk, yblk) floats. */
size_t sd_conv2d_workspace_floats_blocked(const struct sd_conv2d_shape *s, int xblk, int yblk);
void sd_conv2d_forward_blocked(float *y, const float *x, const float *w, const float *b,
                               const struct sd_conv2d_shape *s, int xblk, int yblk, float *ws);
void sd_conv2d_backward_blocked(float *dx, float *dw, float *db, const float *dy,
                                const float *x, const float *w,
                                const struct sd_conv2d_shape *s, int xblk, int yblk,
                                float *ws);
/* A convolution input kept from the forward pass to the weight-gradient
 * pass of the same training step, in the bf16 layout of oneDNN's kernels.
 * A bf16 step converts each convolution's float32 input to bf16 for the
 * forward kernel and again, the same bytes, for the weight gradient; with a
 * keep the forward converts into it and the backward reads it (a ResNet-32
 * step at batch 128 converts about 37 M elements less, 222 MB of traffic).
 * One per convolution node, zeroed at creation; the calls below own and
 * grow buf (freed by sd_conv2d_keep_free).  The backward uses it only when
 * the forward just before it filled it from the same x pointer with the
 * same kernels, and the caller must not have changed x in between (the
 * backward reads x then anyway).  Unused in float32 and on im2col. */
struct sd_conv2d_keep {
	void *buf;              /* owned; NULL until a bf16 forward needs it */
	size_t bytes;           /* allocated size of buf */
	const float *x;         /* the input held, when valid */
	unsigned long plan;     /* serial number of the kernels that filled it */
	int filled;             /* written by x's producer for the next forward */
	int valid;              /* filled by the last forward, not used since */
	int x_bf16_only;        /* set by x's producer with filled: it wrote x
	                         * in bf16 only, float32 x is unset.  The
	                         * forward and backward then read the bf16 copy
	                         * or widen it back to float32 (im2col), never
	                         * x; the producer clears it when it writes x
	                         * in float32 again */
	int y_nhwc_ok;          /* set by the caller: the forward may leave y
	                         * float32 NHWC, (n, oh, ow, k), where the bf16
	                         * kernels write that, instead of reordering it
	                         * to layout yblk */
	int y_nhwc;             /* set by the forward: it did (else y is in
	                         * layout yblk) */
	int y_bf16_ok;          /* set by the caller with y_nhwc_ok: the
	                         * forward may write y in bf16 NHWC instead
	                         * (the kernels' rounding, to nearest even),
	                         * in the first half of y's buffer, where the
	                         * kernels offer a bf16 NHWC output */
	int y_bf16;             /* set by the forward: it did (y_nhwc set too;
	                         * y's buffer then holds n oh ow k uint16_t
	                         * and no float32 value) */
	int dx_nhwc_ok;         /* set by the caller: the backward may leave dx
	                         * float32 NHWC, (n, h, w, c), where the bf16
	                         * backward-data kernels write that, instead of
	                         * reordering it to layout xblk */
	int dx_bf16_ok;         /* set by the caller, with dx_nhwc_ok: dx's
	                         * reader reads bf16 (a batch-norm backward
	                         * whose dy dx is all of, or a widening add
	                         * of a further contribution), so dx may be
	                         * written bf16 NHWC instead, in dx's first
	                         * n*c*h*w*2 bytes */
	int dx_nhwc;            /* set by the backward: SD_DX_NHWC_F32 or
	                         * SD_DX_NHWC_BF16 where it did so, else 0
	                         * (dx is in layout xblk) */
};
/* sd_conv2d_keep's dx_nhwc, and the dy_nhwc of the batch-norm backward. */
#define SD_DX_NHWC_F32 1
#define SD_DX_NHWC_BF16 2
void sd_conv2d_keep_free(struct sd_conv2d_keep *keep);
/* Where x's producer may write the bf16 copy the next forward of (s, bias,
 * xblk, yblk) in the current precision would convert x into: keep's buffer
 * (grown to fit), (n, h, w, c) bf16 (NHWC, what oneDNN's AMX kernels read),
 * or NULL when that forward converts nothing or to another layout.  Having
 * written all of it, the producer sets keep->filled; the forward then reads
 * it instead of converting x (and clears filled, whatever it ran). */
uint16_t *sd_conv2d_keep_prepare(struct sd_conv2d_keep *keep, const struct sd_conv2d_shape *s,
                                 int bias, int xblk, int yblk, const float *x);
/* The same for the output gradient dy of the next backward (need_dx as its
 * dx != NULL): where dy's producer may write it in bf16, NHWC, which both
 * backward passes then read instead of converting dy; NULL when they do
 * not convert it to that one layout.  The producer that writes only the
 * bf16 copy (sd_batchnorm_act_backward_bf16) leaves the float32 dy unset:
 * the backward passed keep_dy then never reads it. */
uint16_t *sd_conv2d_keep_prepare_dy(struct sd_conv2d_keep *keep,
                                    const struct sd_conv2d_shape *s, int bias, int xblk,
                                    int yblk, const float *dy, int need_dx);
/* sd_conv2d_forward/backward_blocked with x's keep, and in the backward
 * dy's keep as well (NULL: none; both NULL: the calls above). */
void sd_conv2d_forward_blocked_kept(float *y, const float *x, const float *w, const float *b,
                                    const struct sd_conv2d_shape *s, int xblk, int yblk,
                                    float *ws, struct sd_conv2d_keep *keep);
void sd_conv2d_backward_blocked_kept(float *dx, float *dw, float *db, const float *dy,
                                     const float *x, const float *w,
                                     const struct sd_conv2d_shape *s, int xblk, int yblk,
                                     float *ws, struct sd_conv2d_keep *keep,
                                     struct sd_conv2d_keep *keep_dy);
/* Whether sd_conv2d_*_blocked would run shape s on oneDNN (1) or convert
 * and run im2col (0), dx included when need_dx. */
int sd_conv2d_blocked_on_onednn(const struct sd_conv2d_shape *s, int bias, int xblk, int yblk,
                                int need_dx);

/* Batch-norm fused with an optional residual add and ReLU, in one pass over
 * memory after the statistics: y = act(bn(x) + r), act = ReLU when relu is
 * set, else identity; r (same shape as x) may be NULL.  Statistics and the
 * running-average update as sd_batchnorm_forward_train, except that mean and
 * variance are computed per plane (one sample's hw pixels of a channel) in
 * float with the two-pass algorithm, whose sums of squared deviations have
 * no cancellation, and the planes merged in double (Chan's pairwise update):
 * about 1e-7 relative, as the double-precision reference in
 * tests/engine/test-layers checks.
 * x, y, r: (n, c, hw) in layout blk; gamma, beta, mean, invstd, running_*: (c). */
void sd_batchnorm_act_forward_train(float *y, float *mean, float *invstd,
                                    float *running_mean, float *running_var,
                                    const float *x, const float *r, const float *gamma,
                                    const float *beta, int n, int c, int hw, int blk,
                                    int relu, float momentum, float eps);
/* Inference mode: running statistics. */
void sd_batchnorm_act_forward_eval(float *y, const float *x, const float *r,
                                   const float *gamma, const float *beta,
                                   const float *running_mean, const float *running_var,
                                   int n, int c, int hw, int blk, int relu, float eps);
/* As sd_batchnorm_act_forward_train, and when ybf is not NULL and blk is 16,
 * a copy of y rounded to bf16 (to nearest even, denormals to zero: the bits
 * oneDNN's reorder gives) in ybf, (n, hw, c) (NHWC), for the bf16
 * convolution that reads y next (sd_conv2d_keep_prepare).  With ybf (and
 * blk 16), y may be NULL: the bf16 copy is then the only one written (2
 * bytes an element instead of 6), for a y that nothing reads in float32
 * (see struct sd_conv2d_keep's x_bf16_only).  x_nhwc (blk 16 only): x is
 * float32 (n, hw, c), NHWC, as oneDNN's AMX convolutions write it
 * (sd_conv2d_keep's y_nhwc), instead of layout blk; the same arithmetic in
 * the same order, so the same bits as x in layout blk.  xbf, when not NULL
 * (blk 16 only): x is bf16 (n, hw, c), NHWC, as oneDNN's AMX convolutions
 * write it (sd_conv2d_keep's y_bf16), read there and widened to float32
 * (exact) in registers; x is then not read (may be NULL) and x_nhwc is
 * implied.  The passes' arithmetic is the same as on float32 x holding
 * those bf16 values: statistics, y and its copy in float32 as ever. */
void sd_batchnorm_act_forward_train_bf16(float *y, uint16_t *ybf, float *mean, float *invstd,
                                         float *running_mean, float *running_var,
                                         const float *x, const uint16_t *xbf, int x_nhwc,
                                         const float *r, const float *gamma, const float *beta,
                                         int n, int c, int hw, int blk, int relu, float momentum,
                                         float eps);
/* As sd_batchnorm_act_forward_train_bf16, and when ybits is not NULL, ybf
 * is written and relu is set: the ReLU mask "bf16(y) > 0" of the copy in
 * bits too, (n * hw * c / 16) uint16, element k of ybf (NHWC) at bit k % 16
 * of ybits[k / 16]: an eighth of ybf's bytes, for the backward
 * (sd_batchnorm_act_backward_bits) to read instead of ybf.  Caller owns it. */
void sd_batchnorm_act_forward_train_bits(float *y, uint16_t *ybf, uint16_t *ybits, float *mean,
                                         float *invstd, float *running_mean,
                                         float *running_var, const float *x,
                                         const uint16_t *xbf, int x_nhwc, const float *r,
                                         const float *gamma, const float *beta, int n, int c,
                                         int hw, int blk, int relu, float momentum, float eps);
/* As sd_batchnorm_act_forward_train_bits, and when rbf is not NULL, r is
 * NULL and blk is 16: the residual r read in bf16, (n, hw, c) NHWC (the
 * layout of ybf: for c 16 the same as blk 16's, for more channels each
 * pixel's c values together), as the previous group wrote it for its next
 * convolution (ybf there), widened to float32 (exactly) in registers: the
 * same arithmetic and bits as float32 r holding those bf16 values.  This
 * is PyTorch autocast's residual stream in bf16.  Caller owns rbf. */
void sd_batchnorm_act_forward_train_rbf(float *y, uint16_t *ybf, uint16_t *ybits, float *mean,
                                        float *invstd, float *running_mean, float *running_var,
                                        const float *x, const uint16_t *xbf, int x_nhwc,
                                        const float *r, const uint16_t *rbf, const float *gamma,
                                        const float *beta, int n, int c, int hw, int blk,
                                        int relu, float momentum, float eps);
/* Backward of sd_batchnorm_act_forward_train.  dz = dy where y > 0 (relu) or
 * dy; dx = the batch-norm input gradient of dz (overwritten); dr = dz, the
 * residual's gradient (overwritten; may be NULL); dgamma, dbeta +=.  y is
 * the forward output, x its input, mean/invstd what it saved. */
void sd_batchnorm_act_backward(float *dx, float *dr, float *dgamma, float *dbeta,
                               const float *dy, const float *y, const float *x,
                               const float *mean, const float *invstd, const float *gamma,
                               int n, int c, int hw, int blk, int relu);
/* As sd_batchnorm_act_backward, but when dxbf is not NULL and blk is 16, dx
 * is written there instead, rounded to bf16 (as the forward's copy) in
 * NHWC, (n, hw, c), for the bf16 convolution that produced x
 * (sd_conv2d_keep_prepare_dy); dx is then not written and may be NULL.
 * When ybf is not NULL, blk is 16 and relu is set, the ReLU mask is read
 * from ybf, y's bf16 NHWC copy (n, hw, c) that the forward wrote
 * (sd_batchnorm_act_forward_train_bf16), 2 bytes an element instead of y's
 * 4 (the pass is bound by memory), and y is not read (may be NULL).  The
 * mask is then "bf16(y) > 0": the same as "y > 0" except where y is a
 * positive float32 denormal, which rounds to +0 (and which the next bf16
 * convolution read as 0).  x_nhwc: x in NHWC, as the forward's; xbf: x in
 * bf16 NHWC, as the forward's (x then not read, may be NULL).  dy_nhwc
 * (blk 16 only): dy is float32 (n, hw, c), NHWC, as oneDNN's AMX
 * backward-data kernels write it (sd_conv2d_keep's dx_nhwc); the same
 * arithmetic in the same order, so the same bits as dy in layout blk.
 * dy_nhwc SD_DX_NHWC_BF16: dy is bf16 (n, hw, c) at dy's first bytes
 * instead (sd_conv2d_keep's dx_bf16_ok), widened exactly as read.
 * mask_beta (c floats, relu, blk 16, no residual r in the forward; else
 * NULL): the ReLU mask recomputed from x as the forward's (x - mean)
 * (invstd gamma) + beta > 0, the same float operations, so the same mask
 * as float32 y > 0 (not the bf16 copy's, which is 0 on a positive
 * denormal); y and ybf are then not read.  dx
 * and dr are written in layout blk whatever x's and dy's layouts. */
void sd_batchnorm_act_backward_bf16(float *dx, uint16_t *dxbf, float *dr, float *dgamma,
                                    float *dbeta, const float *dy, const float *y,
                                    const uint16_t *ybf, const float *mask_beta,
                                    const float *x, const uint16_t *xbf, int x_nhwc,
                                    int dy_nhwc, const float *mean,
                                    const float *invstd, const float *gamma, int n, int c,
                                    int hw, int blk, int relu);
/* As sd_batchnorm_act_backward_bf16, and when ybits is not NULL with ybf
 * (and no mask_beta): the mask read from ybits, the bit mask the forward
 * wrote beside ybf (sd_batchnorm_act_forward_train_bits), instead of ybf:
 * the same mask, so the same bits of every output; ybf is then not read. */
void sd_batchnorm_act_backward_bits(float *dx, uint16_t *dxbf, float *dr, float *dgamma,
                                    float *dbeta, const float *dy, const float *y,
                                    const uint16_t *ybf, const uint16_t *ybits,
                                    const float *mask_beta, const float *x,
                                    const uint16_t *xbf, int x_nhwc, int dy_nhwc,
                                    const float *mean, const float *invstd,
                                    const float *gamma, int n, int c, int hw, int blk, int relu);

/* The parameter-free residual shortcut of the CIFAR ResNets ("option A",
 * He et al. 2016, section 4.2): r (n, c, h, w) from b (n, cb, hb, wb) by
 * taking every s-th row and column and padding the channels with zeros,
 * (c - cb) / 2 on each side:
 *   r[i][ch][y][x] = b[i][ch - pad][y s][x s] if 0 <= ch - pad < cb, else 0.
 * Both in layout blk (c and cb multiples of it). */
void sd_shortcut_forward(float *r, const float *b, int n, int c, int h, int w, int cb, int hb,
                         int wb, int s, int blk);
/* db += the adjoint applied to dr (positions not sampled get nothing). */
void sd_shortcut_backward(float *db, const float *dr, int n, int c, int h, int w, int cb,
                          int hb, int wb, int s, int blk);
/* db = the adjoint applied to dr: every element of db (n, cb, hb, wb)
 * written, +0 where not sampled, else +0 + dr's value; the same bits as
 * zeroing db and then sd_shortcut_backward, in one pass over db. */
void sd_shortcut_backward_set(float *db, const float *dr, int n, int c, int h, int w, int cb,
                              int hb, int wb, int s, int blk);

/* Global average pooling of x (n, c, hw) in layout blk to y (n, c) (the same
 * in every layout), and its backward (dx overwritten). */
void sd_global_avgpool_forward(float *y, const float *x, int n, int c, int hw, int blk);
void sd_global_avgpool_backward(float *dx, const float *dy, int n, int c, int hw, int blk);

/* ------------------------------------------------------- general layers
 * (engine/layers-general.c): what ONNX models use beyond the built-in
 * networks.  Same conventions as above: NCHW, outputs overwritten,
 * parameter gradients accumulated, nothing allocated, the same bits for a
 * fixed thread count.
 */

/* A convolution in all generality (ONNX Conv): groups (the c input and k
 * output channels split into `groups` equal parts, part q of the output
 * reading only part q of the input; groups = c = k is depthwise), a kh x kw
 * kernel dilated by (dh, dw), strides (sh, sw), zero padding pt (top), pl
 * (left), pb (bottom), pr (right).  Weight (k, c / groups, kh, kw). */
struct sd_gconv_shape {
	int n, c, h, w;             /* input (N, C, H, W) */
	int k, kh, kw;              /* output channels, kernel */
	int sh, sw, dh, dw;         /* strides, dilations */
	int pt, pl, pb, pr;         /* pads */
	int groups;
	int oh, ow;                 /* filled by sd_gconv_shape_init */
};
/* Fills oh = (h + pt + pb - (kh - 1) dh - 1) / sh + 1 and ow likewise.
 * Returns 0, or -1 when a field is out of range, c or k is not a multiple
 * of groups, or the dilated kernel does not fit the padded input. */
int sd_gconv_shape_init(struct sd_gconv_shape *s);
/* Floats of scratch memory forward and backward need (independent of n). */
size_t sd_gconv_workspace_floats(const struct sd_gconv_shape *s);
/* x: (n, c, h, w)  w: (k, c / groups, kh, kw)  b: (k) or NULL  y: (n, k, oh, ow). */
void sd_gconv_forward(float *y, const float *x, const float *w, const float *b,
                      const struct sd_gconv_shape *s, float *ws);
/* dx overwritten (may be NULL); dw, db (may be NULL) +=. */
void sd_gconv_backward(float *dx, float *dw, float *db, const float *dy, const float *x,
                       const float *w, const struct sd_gconv_shape *s, float *ws);

/* Average pooling, window k x k, stride s, pad zero rows and columns on
 * every side (pad <= k / 2, as PyTorch's AvgPool2d requires), floor
 * rounding: oh = (h + 2 pad - k) / s + 1.  The divisor is k^2 when
 * count_pad is set (PyTorch's count_include_pad=True, ONNX's
 * count_include_pad=1), else the number of input elements in the window. */
void sd_avgpool_pad_forward(float *y, const float *x, int n, int c, int h, int w, int k, int s,
                            int pad, int count_pad);
void sd_avgpool_pad_backward(float *dx, const float *dy, int n, int c, int h, int w, int k,
                             int s, int pad, int count_pad);

/* Elementwise arithmetic (ONNX Add, Sub, Mul, Div): y = u op v. */
enum sd_binop { SD_BIN_ADD, SD_BIN_SUB, SD_BIN_MUL, SD_BIN_DIV };
/* Two tensors of count elements: y = a op b (a may equal b). */
void sd_binary_forward(float *y, const float *a, const float *b, size_t count, enum sd_binop op);
/* da, db overwritten with the gradients of a and b (either may be NULL). */
void sd_binary_backward(float *da, float *db, const float *dy, const float *a, const float *b,
                        size_t count, enum sd_binop op);
/* A tensor x (n, c, hw) and a constant k broadcast over it, kc values: one
 * (a scalar) or c (one per channel).  y = x op k, or y = k op x when
 * k_first. */
void sd_binary_const_forward(float *y, const float *x, const float *k, int kc, int n, int c,
                             int hw, enum sd_binop op, int k_first);
/* dx overwritten (may be NULL); dk (kc values) += the constant's gradient
 * (NULL for a constant that is not trained), summed in double. */
void sd_binary_const_backward(float *dx, float *dk, const float *dy, const float *x,
                              const float *k, int kc, int n, int c, int hw, enum sd_binop op,
                              int k_first);

/* Inverted dropout (Srivastava et al. 2014, as torch.nn.Dropout in
 * training): each element is zeroed with probability p, the others scaled
 * by 1 / (1 - p) (computed in float, as PyTorch does): y = x mask / (1 - p).
 * x, y: (n, per); mask: (n, per), 1 kept, 0 dropped.  Sample i's mask is
 * the first `per` uniforms of the PCG32 stream (seed, first_stream + i)
 * (src/base/rng.h), an element dropped when its uniform is below p: so a
 * sample's mask depends on (seed, its stream) only, not on the batch it
 * runs in or the thread count.  0 <= p < 1. */
void sd_dropout_forward(float *y, uint8_t *mask, const float *x, int n, size_t per, float p,
                        uint64_t seed, uint64_t first_stream);
/* dx = dy mask / (1 - p), overwritten (may equal dy). */
void sd_dropout_backward(float *dx, const float *dy, const uint8_t *mask, size_t count, float p);

#endif
