/* engine/cuda/dnn.c - one layer at a time on device pointers: convolution,
 * batch-norm and pooling through cuDNN, the linear layer through cuBLAS.
 * See cuda-internal.h.
 *
 * Which cuDNN API: the per-operation ("legacy") one - cudnnConvolution*,
 * cudnnBatchNormalization*, cudnnPooling* - not the v9 graph API.  Reasons:
 * it exists unchanged in every cuDNN 9.x, so the plugin runs against whatever
 * 9.x the GPU host ships (a PyTorch wheel's, typically older or newer than
 * the headers here); it maps one-to-one onto our per-node executor and its
 * per-layer CPU reference; every call is capturable into a CUDA graph, which
 * is what removes the launch overhead that dominates models this small; and
 * the graph API's advantage, fusing operations (conv + bias + ReLU), needs
 * its C++ frontend or hundreds of lines of backend descriptors per pattern.
 * cuDNN 9 marks this API deprecated (cudnn_ops.h, CUDNN_DEPRECATED) without a
 * removal date; all of it is in this file, so moving to the graph API later
 * touches nothing else.
 *
 * Determinism: only algorithms cuDNN reports as CUDNN_DETERMINISTIC are used,
 * and max pooling uses CUDNN_POOLING_MAX_DETERMINISTIC (cuDNN's plain max
 * pooling backward uses atomics; developer guide, "Reproducibility").
 * Math: strict float32 (CUDNN_FMA_MATH, cuBLAS default math) unless
 * SPOTDECK_CUDA_TF32=1 lets both use TF32 tensor cores.
 */
#include "config.h"

#include "engine/cuda/cuda-internal.h"
#include "src/base/errors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- errors ------------------------------------------------------------- */

/* "cudnnConvolutionForward(env->dnn, ...)" -> "cudnnConvolutionForward". */
static const char *fn_name(const char *call, char *buf, size_t len)
{
	size_t n = strcspn(call, "(");
	if (n >= len)
		n = len - 1;
	memcpy(buf, call, n);
	buf[n] = 0;
	return buf;
}

int cu_fail_cuda(char **why, const char *what, cudaError_t e)
{
	char fn[96];
	/* Leave no sticky launch error behind for the next, unrelated call. */
	(void)cudaGetLastError();
	return sd_why(why, "CUDA %s: %s (%s)", fn_name(what, fn, sizeof fn), cudaGetErrorString(e),
	              cudaGetErrorName(e));
}

int cu_fail_dnn(char **why, const char *what, cudnnStatus_t s)
{
	char fn[96];
	return sd_why(why, "cuDNN %s: %s", fn_name(what, fn, sizeof fn), cudnnGetErrorString(s));
}

int cu_fail_blas(char **why, const char *what, cublasStatus_t s)
{
	char fn[96];
	return sd_why(why, "cuBLAS %s: %s", fn_name(what, fn, sizeof fn), cublasGetStatusString(s));
}

int cu_env_flag(const char *name, int dflt)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return dflt;
	return strcmp(v, "0") != 0 && strcmp(v, "no") != 0 && strcmp(v, "off") != 0;
}

/* ---- handles ------------------------------------------------------------ */

static const float one = 1.0f, zero = 0.0f;

/* cuBLAS workspace: NVIDIA recommends 32 MiB on Hopper (cuBLAS docs,
 * cublasSetWorkspace); a graph must not allocate, so we hand it one. */
#define BLAS_WS_BYTES (32u << 20)

int cu_env_init(struct cu_env *env, cudaStream_t stream, size_t ws_bytes, int max_ones,
                char **why)
{
	memset(env, 0, sizeof *env);
	env->stream = stream;
	env->tf32 = cu_env_flag("SPOTDECK_CUDA_TF32", 0);
	const char *algo = getenv("SPOTDECK_CUDA_CONV_ALGO");
	env->find = algo && !strcmp(algo, "find");
	DNN_TRY(cudnnCreate(&env->dnn));
	DNN_TRY(cudnnSetStream(env->dnn, stream));
	BLAS_TRY(cublasCreate(&env->blas));
	BLAS_TRY(cublasSetStream(env->blas, stream));
	BLAS_TRY(cublasSetMathMode(env->blas, env->tf32 ? CUBLAS_TF32_TENSOR_OP_MATH
	                                                : CUBLAS_DEFAULT_MATH));
	void *bws = NULL;
	CU_TRY(cudaMalloc(&bws, BLAS_WS_BYTES));
	BLAS_TRY(cublasSetWorkspace(env->blas, bws, BLAS_WS_BYTES));
	env->blas_ws = bws;
	if (ws_bytes) {
		CU_TRY(cudaMalloc(&env->ws, ws_bytes));
		env->ws_bytes = ws_bytes;
	}
	float *ones = NULL;
	CU_TRY(cudaMalloc((void **)&ones, (size_t)(max_ones > 0 ? max_ones : 1) * sizeof(float)));
	env->ones = ones;
	CU_TRY(cu_fill(stream, ones, 1.0f, (size_t)(max_ones > 0 ? max_ones : 1)));
	return 0;
}

void cu_env_fini(struct cu_env *env)
{
	if (env->dnn)
		cudnnDestroy(env->dnn);
	if (env->blas)
		cublasDestroy(env->blas);
	cudaFree(env->blas_ws);
	cudaFree(env->ws);
	cudaFree((void *)env->ones);
	memset(env, 0, sizeof *env);
}

/* ---- convolution -------------------------------------------------------- */

static int set4d(cudnnTensorDescriptor_t d, int n, int c, int h, int w, char **why)
{
	DNN_TRY(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, w));
	return 0;
}

/* Whether a perf result's math is allowed: strict float32 refuses tensor-op
 * math (TF32 on Ampere and later). */
static int math_ok(const struct cu_env *env, cudnnMathType_t m)
{
	if (env->tf32)
		return m != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
	return m == CUDNN_FMA_MATH || m == CUDNN_DEFAULT_MATH;
}

/* The first (fastest, by cuDNN's heuristics or measurement) algorithm of
 * perf[0..n) that worked, is deterministic, uses allowed math and fits the
 * workspace.  One macro for the three perf types, which share field names. */
#define PICK(perf, n, env, out, found) do { \
	for (int i_ = 0; i_ < (n) && !(found); i_++) \
		if ((perf)[i_].status == CUDNN_STATUS_SUCCESS && \
		    (perf)[i_].determinism == CUDNN_DETERMINISTIC && \
		    math_ok((env), (perf)[i_].mathType) && (perf)[i_].memory <= (env)->ws_bytes) { \
			(out) = (perf)[i_].algo; \
			(found) = 1; \
		} \
} while (0)

/* Deterministic algorithms that cuDNN supports for every 2-D float
 * convolution, used when the search finds none and when a chosen one fails
 * on its first run. */
#define SAFE_FWD CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM
#define SAFE_BWD_DATA CUDNN_CONVOLUTION_BWD_DATA_ALGO_1
#define SAFE_BWD_FILTER CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1

static int conv_pick(struct cu_conv *c, const struct cu_env *env, int backward, float *x,
                     float *w, float *y, float *dy, float *dx, float *dw, char **why)
{
	int got = 0, found = 0;
	cudnnConvolutionFwdAlgoPerf_t fp[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
	cudnnConvolutionBwdDataAlgoPerf_t dp[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
	cudnnConvolutionBwdFilterAlgoPerf_t wp[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
	int measure = env->find && x && w && y;

	c->fwd = SAFE_FWD;
	if (measure)
		DNN_TRY(cudnnFindConvolutionForwardAlgorithmEx(env->dnn, c->x, x, c->w, w, c->conv,
		                                               c->y, y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
		                                               &got, fp, env->ws, env->ws_bytes));
	else
		DNN_TRY(cudnnGetConvolutionForwardAlgorithm_v7(env->dnn, c->x, c->w, c->conv, c->y,
		                                               CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, fp));
	PICK(fp, got, env, c->fwd, found);
	if (!backward)
		return 0;

	found = 0;
	c->bwd_data = SAFE_BWD_DATA;
	if (measure && dy && dx)
		DNN_TRY(cudnnFindConvolutionBackwardDataAlgorithmEx(
			env->dnn, c->w, w, c->y, dy, c->conv, c->x, dx,
			CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, dp, env->ws, env->ws_bytes));
	else
		DNN_TRY(cudnnGetConvolutionBackwardDataAlgorithm_v7(
			env->dnn, c->w, c->y, c->conv, c->x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, dp));
	PICK(dp, got, env, c->bwd_data, found);

	found = 0;
	c->bwd_filter = SAFE_BWD_FILTER;
	if (measure && dy && dw)
		DNN_TRY(cudnnFindConvolutionBackwardFilterAlgorithmEx(
			env->dnn, c->x, x, c->y, dy, c->conv, c->w, dw,
			CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, wp, env->ws, env->ws_bytes));
	else
		DNN_TRY(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
			env->dnn, c->x, c->y, c->conv, c->w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got,
			wp));
	PICK(wp, got, env, c->bwd_filter, found);
	return 0;
}

int cu_conv_init(struct cu_conv *c, const struct cu_env *env, const struct sd_conv2d_shape *s,
                 int has_bias, int backward, float *x, float *w, float *y, float *dy, float *dx,
                 float *dw, char **why)
{
	memset(c, 0, sizeof *c);
	c->s = *s;
	c->has_bias = has_bias;
	DNN_TRY(cudnnCreateTensorDescriptor(&c->x));
	DNN_TRY(cudnnCreateTensorDescriptor(&c->y));
	DNN_TRY(cudnnCreateTensorDescriptor(&c->bias));
	DNN_TRY(cudnnCreateFilterDescriptor(&c->w));
	DNN_TRY(cudnnCreateConvolutionDescriptor(&c->conv));
	if (set4d(c->x, s->n, s->c, s->h, s->w, why) < 0 ||
	    set4d(c->y, s->n, s->k, s->oh, s->ow, why) < 0 || set4d(c->bias, 1, s->k, 1, 1, why) < 0)
		return -1;
	DNN_TRY(cudnnSetFilter4dDescriptor(c->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, s->k, s->c,
	                                   s->r, s->r));
	/* Cross-correlation, as engine/layers.c (and every framework). */
	DNN_TRY(cudnnSetConvolution2dDescriptor(c->conv, s->pad, s->pad, s->stride, s->stride, 1, 1,
	                                        CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
	DNN_TRY(cudnnSetConvolutionMathType(c->conv, env->tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
	int oh = 0, ow = 0, on = 0, oc = 0;
	DNN_TRY(cudnnGetConvolution2dForwardOutputDim(c->conv, c->x, c->w, &on, &oc, &oh, &ow));
	if (on != s->n || oc != s->k || oh != s->oh || ow != s->ow)
		return sd_why(why, "cuDNN convolution output %dx%dx%dx%d, the model expects %dx%dx%dx%d",
		              on, oc, oh, ow, s->n, s->k, s->oh, s->ow);
	return conv_pick(c, env, backward, x, w, y, dy, dx, dw, why);
}

void cu_conv_fini(struct cu_conv *c)
{
	if (c->x)
		cudnnDestroyTensorDescriptor(c->x);
	if (c->y)
		cudnnDestroyTensorDescriptor(c->y);
	if (c->bias)
		cudnnDestroyTensorDescriptor(c->bias);
	if (c->w)
		cudnnDestroyFilterDescriptor(c->w);
	if (c->conv)
		cudnnDestroyConvolutionDescriptor(c->conv);
	memset(c, 0, sizeof *c);
}

int cu_conv_forward(const struct cu_env *env, struct cu_conv *c, float *y, const float *x,
                    const float *w, const float *b, char **why)
{
	cudnnStatus_t st = cudnnConvolutionForward(env->dnn, &one, c->x, x, c->w, w, c->conv, c->fwd,
	                                           env->ws, env->ws_bytes, &zero, c->y, y);
	if (st != CUDNN_STATUS_SUCCESS && !c->checked && c->fwd != SAFE_FWD) {
		/* The chosen algorithm refused this configuration on its first
		 * run: fall back to the one that always works. */
		c->fwd = SAFE_FWD;
		st = cudnnConvolutionForward(env->dnn, &one, c->x, x, c->w, w, c->conv, c->fwd, env->ws,
		                             env->ws_bytes, &zero, c->y, y);
	}
	if (st != CUDNN_STATUS_SUCCESS)
		return cu_fail_dnn(why, "cudnnConvolutionForward", st);
	if (c->has_bias)
		DNN_TRY(cudnnAddTensor(env->dnn, &one, c->bias, b, &one, c->y, y));
	return 0;
}

int cu_conv_backward(const struct cu_env *env, struct cu_conv *c, float *dx, int acc_dx,
                     float *dw, float *db, const float *dy, const float *x, const float *w,
                     char **why)
{
	if (c->has_bias && db)
		DNN_TRY(cudnnConvolutionBackwardBias(env->dnn, &one, c->y, dy, &zero, c->bias, db));
	cudnnStatus_t st = cudnnConvolutionBackwardFilter(env->dnn, &one, c->x, x, c->y, dy, c->conv,
	                                                  c->bwd_filter, env->ws, env->ws_bytes,
	                                                  &zero, c->w, dw);
	if (st != CUDNN_STATUS_SUCCESS && !c->checked && c->bwd_filter != SAFE_BWD_FILTER) {
		c->bwd_filter = SAFE_BWD_FILTER;
		st = cudnnConvolutionBackwardFilter(env->dnn, &one, c->x, x, c->y, dy, c->conv,
		                                    c->bwd_filter, env->ws, env->ws_bytes, &zero, c->w, dw);
	}
	if (st != CUDNN_STATUS_SUCCESS)
		return cu_fail_dnn(why, "cudnnConvolutionBackwardFilter", st);
	if (dx) {
		st = cudnnConvolutionBackwardData(env->dnn, &one, c->w, w, c->y, dy, c->conv, c->bwd_data,
		                                  env->ws, env->ws_bytes, acc_dx ? &one : &zero, c->x, dx);
		if (st != CUDNN_STATUS_SUCCESS && !c->checked && c->bwd_data != SAFE_BWD_DATA) {
			c->bwd_data = SAFE_BWD_DATA;
			st = cudnnConvolutionBackwardData(env->dnn, &one, c->w, w, c->y, dy, c->conv,
			                                  c->bwd_data, env->ws, env->ws_bytes,
			                                  acc_dx ? &one : &zero, c->x, dx);
		}
		if (st != CUDNN_STATUS_SUCCESS)
			return cu_fail_dnn(why, "cudnnConvolutionBackwardData", st);
	}
	return 0;
}

/* ---- batch-norm --------------------------------------------------------- */

int cu_bn_init(struct cu_bn *b, int n, int c, int hw, double momentum, double eps, char **why)
{
	memset(b, 0, sizeof *b);
	b->n = n;
	b->c = c;
	b->hw = hw;
	b->momentum = momentum;
	b->eps = eps;
	if (!(eps >= CUDNN_BN_MIN_EPSILON) || !(momentum >= 0.0 && momentum <= 1.0))
		return sd_why(why, "batch-norm epsilon %g or momentum %g outside what cuDNN takes",
		              eps, momentum);
	DNN_TRY(cudnnCreateTensorDescriptor(&b->x));
	DNN_TRY(cudnnCreateTensorDescriptor(&b->p));
	/* (n, c, hw, 1): batch-norm only cares about the channel axis. */
	if (set4d(b->x, n, c, hw, 1, why) < 0)
		return -1;
	DNN_TRY(cudnnDeriveBNTensorDescriptor(b->p, b->x, CUDNN_BATCHNORM_SPATIAL));
	return 0;
}

void cu_bn_fini(struct cu_bn *b)
{
	if (b->x)
		cudnnDestroyTensorDescriptor(b->x);
	if (b->p)
		cudnnDestroyTensorDescriptor(b->p);
	memset(b, 0, sizeof *b);
}

int cu_bn_forward_train(const struct cu_env *env, const struct cu_bn *b, float *y,
                        float *save_mean, float *save_invstd, float *running_mean,
                        float *running_var, const float *x, const float *gamma,
                        const float *beta, char **why)
{
	/* CUDNN_BATCHNORM_SPATIAL, not _PERSISTENT: the persistent kernels may
	 * reduce with atomics. */
	DNN_TRY(cudnnBatchNormalizationForwardTraining(
		env->dnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, b->x, x, b->x, y, b->p, gamma, beta,
		b->momentum, running_mean, running_var, b->eps, save_mean, save_invstd));
	return 0;
}

int cu_bn_forward_eval(const struct cu_env *env, const struct cu_bn *b, float *y, const float *x,
                       const float *gamma, const float *beta, const float *running_mean,
                       const float *running_var, char **why)
{
	DNN_TRY(cudnnBatchNormalizationForwardInference(
		env->dnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, b->x, x, b->x, y, b->p, gamma, beta,
		running_mean, running_var, b->eps));
	return 0;
}

int cu_bn_backward(const struct cu_env *env, const struct cu_bn *b, float *dx, int acc_dx,
                   float *dgamma, float *dbeta, const float *dy, const float *x,
                   const float *save_mean, const float *save_invstd, const float *gamma,
                   char **why)
{
	DNN_TRY(cudnnBatchNormalizationBackward(
		env->dnn, CUDNN_BATCHNORM_SPATIAL, &one, acc_dx ? &one : &zero, &one, &zero, b->x, x,
		b->x, dy, b->x, dx, b->p, gamma, dgamma, dbeta, b->eps, save_mean, save_invstd));
	return 0;
}

/* ---- pooling ------------------------------------------------------------ */

int cu_pool_init(struct cu_pool *p, int max, int n, int c, int h, int w, int k, int s, char **why)
{
	memset(p, 0, sizeof *p);
	DNN_TRY(cudnnCreatePoolingDescriptor(&p->desc));
	DNN_TRY(cudnnCreateTensorDescriptor(&p->x));
	DNN_TRY(cudnnCreateTensorDescriptor(&p->y));
	DNN_TRY(cudnnSetPooling2dDescriptor(p->desc,
	                                    max ? CUDNN_POOLING_MAX_DETERMINISTIC
	                                        : CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING,
	                                    CUDNN_NOT_PROPAGATE_NAN, k, k, 0, 0, s, s));
	int oh = (h - k) / s + 1, ow = (w - k) / s + 1;
	if (set4d(p->x, n, c, h, w, why) < 0 || set4d(p->y, n, c, oh, ow, why) < 0)
		return -1;
	int on, oc, ph, pw;
	DNN_TRY(cudnnGetPooling2dForwardOutputDim(p->desc, p->x, &on, &oc, &ph, &pw));
	if (ph != oh || pw != ow)
		return sd_why(why, "cuDNN pooling output %dx%d, the model expects %dx%d", ph, pw, oh, ow);
	return 0;
}

void cu_pool_fini(struct cu_pool *p)
{
	if (p->desc)
		cudnnDestroyPoolingDescriptor(p->desc);
	if (p->x)
		cudnnDestroyTensorDescriptor(p->x);
	if (p->y)
		cudnnDestroyTensorDescriptor(p->y);
	memset(p, 0, sizeof *p);
}

int cu_pool_forward(const struct cu_env *env, const struct cu_pool *p, float *y, const float *x,
                    char **why)
{
	DNN_TRY(cudnnPoolingForward(env->dnn, p->desc, &one, p->x, x, &zero, p->y, y));
	return 0;
}

int cu_pool_backward(const struct cu_env *env, const struct cu_pool *p, float *dx, int acc_dx,
                     const float *dy, const float *x, const float *y, char **why)
{
	DNN_TRY(cudnnPoolingBackward(env->dnn, p->desc, &one, p->y, y, p->y, dy, p->x, x,
	                             acc_dx ? &one : &zero, p->x, dx));
	return 0;
}

/* ---- linear ------------------------------------------------------------- */

/* Row-major y (n, out) = x (n, in) . W^T + b, W (out, in).  cuBLAS is
 * column-major, where row-major y is y^T (out x n) = W^T' . x^T with W's
 * buffer read as the column-major (in x out) matrix W^T, hence op T. */
int cu_linear_forward(const struct cu_env *env, float *y, const float *x, const float *w,
                      const float *b, int n, int in, int out, char **why)
{
	BLAS_TRY(cublasSgemm(env->blas, CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, &one, w, in, x, in,
	                     &zero, y, out));
	if (b)
		CU_TRY(cu_bias_rows(env->stream, y, b, n, out));
	return 0;
}

int cu_linear_backward(const struct cu_env *env, float *dx, int acc_dx, float *dw, float *db,
                       const float *dy, const float *x, const float *w, int n, int in, int out,
                       char **why)
{
	/* dW (out, in) = dy^T . x; column-major: dW^T (in x out) = x^T . dy. */
	BLAS_TRY(cublasSgemm(env->blas, CUBLAS_OP_N, CUBLAS_OP_T, in, out, n, &one, x, in, dy, out,
	                     &zero, dw, in));
	/* db (out) = dy^T . 1: column-major dy^T (out x n) times ones (n). */
	if (db)
		BLAS_TRY(cublasSgemv(env->blas, CUBLAS_OP_N, out, n, &one, dy, out, env->ones, 1, &zero,
		                     db, 1));
	/* dx (n, in) = dy . W; column-major: dx^T (in x n) = W^T (in x out) . dy^T. */
	if (dx)
		BLAS_TRY(cublasSgemm(env->blas, CUBLAS_OP_N, CUBLAS_OP_N, in, n, out, &one, w, in, dy,
		                     out, acc_dx ? &one : &zero, dx, in));
	return 0;
}
