// engine/cuda/kernels-seq.cu - the CUDA backend's kernels for the
// language-model ops (OP_SEQ nodes, enum sd_seq_op in engine/model-graph.h)
// and the elementwise OP_BINARY / OP_DROPOUT (p = 0) nodes a GPT's graph
// holds.  The matrix products (SEQ_LINEAR, SEQ_BMM, the attention's two
// products) are cuBLAS calls in exec.c; these are the rest.
//
// Written to be obviously right rather than fast: one thread block per row
// for the row reductions (layer norm, softmax, cross-entropy), grid-stride
// loops for elementwise work.  Every reduction has a fixed order, so two
// runs give the same bits:
//   - parameter gradients summed over rows (layer-norm gamma/beta, a
//     per-channel constant, a linear layer's bias) go through a two-stage
//     column sum: fixed chunks of kColChunk rows summed in row order into a
//     partial (double), then the partials summed in chunk order;
//   - the embedding's scatter-add backward is sort-free and atomic-free:
//     one block per table row scans every position's id in order and adds
//     the rows of dy that picked it.
// Semantics (what each op computes) are engine/model-seq.c's and
// engine/layers-seq.h's; the formulas are repeated at each kernel.
// "acc" arguments: 1 adds into the destination (a second reader's
// gradient), 0 overwrites it.
#include "engine/cuda/cuda-internal.h"

#include <math.h>

namespace {

// engine/layers.h's enum sd_binop (that header is C99, not C++); exec.c
// checks at compile time that the values agree.
enum { SD_BIN_ADD, SD_BIN_SUB, SD_BIN_MUL, SD_BIN_DIV };

constexpr int kThreads = 256;
constexpr int kColChunk = 32;

inline unsigned blocks_for(size_t count)
{
	size_t b = (count + kThreads - 1) / kThreads;
	if (b > 4096)
		b = 4096;
	return b ? (unsigned)b : 1u;
}

#define GRID_STRIDE(i, n) \
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); \
	     i += (size_t)gridDim.x * blockDim.x)

__device__ inline void store(float *dst, size_t i, float v, int acc)
{
	dst[i] = acc ? dst[i] + v : v;
}

// Block-wide sum of one double per thread (blockDim.x == kThreads); every
// thread gets the result.  Fixed tree order.
__device__ double block_sum(double v, double *sh)
{
	sh[threadIdx.x] = v;
	__syncthreads();
	for (int s = kThreads / 2; s > 0; s >>= 1) {
		if ((int)threadIdx.x < s)
			sh[threadIdx.x] += sh[threadIdx.x + s];
		__syncthreads();
	}
	double r = sh[0];
	__syncthreads();
	return r;
}

__device__ float block_max(float v, float *sh)
{
	sh[threadIdx.x] = v;
	__syncthreads();
	for (int s = kThreads / 2; s > 0; s >>= 1) {
		if ((int)threadIdx.x < s)
			sh[threadIdx.x] = fmaxf(sh[threadIdx.x], sh[threadIdx.x + s]);
		__syncthreads();
	}
	float r = sh[0];
	__syncthreads();
	return r;
}

// ---- embedding ------------------------------------------------------------

// The id of row r: token ids as float in ids_f (exact below 2^24), or the
// node's constant positions idx (T of them, the same for every sample).
__device__ inline int row_id(const float *ids_f, const int32_t *idx, size_t r, int T)
{
	return ids_f ? (int)ids_f[r] : idx[r % (size_t)T];
}

// out (rows, C) = table[id(r)]; an id outside [0, V) gives a zero row.
__global__ void embed_forward_kernel(float *out, const float *ids_f, const int32_t *idx,
                                     const float *table, size_t rows, int T, int C, int V)
{
	GRID_STRIDE(e, rows * (size_t)C) {
		size_t r = e / C;
		int c = (int)(e % C);
		int id = row_id(ids_f, idx, r, T);
		out[e] = id >= 0 && id < V ? table[(size_t)id * C + c] : 0.0f;
	}
}

// dtable[v] += dy[r] for every row r with id(r) == v, in row order, each
// element of row v of dtable owned by one thread of block v (so the adds
// are plain float adds in the CPU's order: the same bits as
// sd_embedding_backward).  The block reads the ids a tile of kThreads rows
// at a time into shared flags, then adds the flagged rows of dy.
__global__ void embed_backward_kernel(float *dtable, const float *dy, const float *ids_f,
                                      const int32_t *idx, size_t rows, int T, int C, int V)
{
	__shared__ int hit[kThreads];
	for (int v = blockIdx.x; v < V; v += gridDim.x)
		for (size_t r0 = 0; r0 < rows; r0 += kThreads) {
			size_t r = r0 + threadIdx.x;
			hit[threadIdx.x] = r < rows && row_id(ids_f, idx, r, T) == v;
			if (__syncthreads_or(hit[threadIdx.x]))
				for (int j = 0; j < kThreads; j++)
					if (hit[j])
						for (int c = threadIdx.x; c < C; c += blockDim.x)
							dtable[(size_t)v * C + c] += dy[(r0 + j) * C + c];
			__syncthreads();   // hit[] is rewritten by the next tile
		}
}

// ---- layer norm -----------------------------------------------------------

// Block per row: mean and biased variance in double, two passes (as
// layers-seq.c), y = (x - mean) rstd gamma + beta.
__global__ void layernorm_forward_kernel(float *y, float *mean, float *rstd, const float *x,
                                         const float *gamma, const float *beta, int C, float eps)
{
	__shared__ double sh[kThreads];
	size_t r = blockIdx.x;
	const float *xr = x + r * C;
	double s = 0;
	for (int c = threadIdx.x; c < C; c += blockDim.x)
		s += xr[c];
	double mu = block_sum(s, sh) / C;
	double q = 0;
	for (int c = threadIdx.x; c < C; c += blockDim.x) {
		double d = xr[c] - mu;
		q += d * d;
	}
	double var = block_sum(q, sh) / C;
	float m = (float)mu, rs = (float)(1.0 / sqrt(var + (double)eps));
	if (threadIdx.x == 0 && mean) {
		mean[r] = m;
		rstd[r] = rs;
	}
	float *yr = y + r * C;
	for (int c = threadIdx.x; c < C; c += blockDim.x)
		yr[c] = (xr[c] - m) * rs * gamma[c] + (beta ? beta[c] : 0.0f);
}

// dx = rstd (g - mean(g) - xhat mean(g xhat)), g = dy gamma.
__global__ void layernorm_backward_dx_kernel(float *dx, int acc, const float *dy, const float *x,
                                             const float *mean, const float *rstd,
                                             const float *gamma, int C)
{
	__shared__ double sh[kThreads];
	size_t r = blockIdx.x;
	const float m = mean[r], rs = rstd[r];
	double sg = 0, sgx = 0;
	for (int c = threadIdx.x; c < C; c += blockDim.x) {
		float g = dy[r * C + c] * gamma[c];
		float xh = (x[r * C + c] - m) * rs;
		sg += g;
		sgx += (double)g * xh;
	}
	float mg = (float)(block_sum(sg, sh) / C);
	float mgx = (float)(block_sum(sgx, sh) / C);
	for (int c = threadIdx.x; c < C; c += blockDim.x) {
		float g = dy[r * C + c] * gamma[c];
		float xh = (x[r * C + c] - m) * rs;
		store(dx, r * C + c, rs * (g - mg - xh * mgx), acc);
	}
}

// ---- column sums (parameter gradients over rows) --------------------------

// What one element adds to a column's parameter gradient.
enum col_term {
	COL_DY,          // dy                       (a bias, layer-norm beta)
	COL_DY_XHAT,     // dy (x - mean[r]) rstd[r] (layer-norm gamma)
	COL_DK           // d(x op k)/dk dy          (SEQ_BIAS's trained constant)
};

struct col_args {
	enum col_term term;
	const float *dy, *x, *k;
	const float *mean, *rstd;
	int op, k_first, kc;
};

__device__ inline float col_value(const col_args &a, size_t r, int c, int C)
{
	size_t e = r * C + c;
	float g = a.dy[e];
	switch (a.term) {
	case COL_DY:
		return g;
	case COL_DY_XHAT:
		return g * ((a.x[e] - a.mean[r]) * a.rstd[r]);
	case COL_DK: {
		float kv = a.k[a.kc == 1 ? 0 : c];
		float u = a.k_first ? kv : a.x[e], v = a.k_first ? a.x[e] : kv;
		// d(u op v)/du, /dv times g; the constant is u when k_first.
		float du = a.op == SD_BIN_MUL ? g * v : a.op == SD_BIN_DIV ? g / v : g;
		float dv = a.op == SD_BIN_ADD ? g : a.op == SD_BIN_SUB ? -g
		           : a.op == SD_BIN_MUL ? g * u : -g * u / (v * v);
		return a.k_first ? du : dv;
	}
	}
	return 0.0f;
}

// partial[chunk][c] = sum of rows chunk*kColChunk .. +kColChunk, in order.
__global__ void colsum_partial_kernel(double *partial, col_args a, size_t rows, int C)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x;
	size_t chunk = blockIdx.y;
	if (c >= C)
		return;
	size_t r0 = chunk * kColChunk, r1 = r0 + kColChunk < rows ? r0 + kColChunk : rows;
	double s = 0;
	for (size_t r = r0; r < r1; r++)
		s += col_value(a, r, c, C);
	partial[chunk * C + c] = s;
}

// out[c] += sum over chunks, in chunk order (out[0] only when scalar: every
// column summed, column after column).
__global__ void colsum_fold_kernel(float *out, const double *partial, size_t chunks, int C,
                                   int scalar)
{
	if (scalar) {
		if (blockIdx.x == 0 && threadIdx.x == 0) {
			double s = 0;
			for (int c = 0; c < C; c++)
				for (size_t k = 0; k < chunks; k++)
					s += partial[k * C + c];
			out[0] += (float)s;
		}
		return;
	}
	int c = blockIdx.x * blockDim.x + threadIdx.x;
	if (c >= C)
		return;
	double s = 0;
	for (size_t k = 0; k < chunks; k++)
		s += partial[k * C + c];
	out[c] += (float)s;
}

// ---- softmax over the last axis -------------------------------------------

// Block per row of len; causal: row r of every (T, T) block (T = len) sees
// columns 0 .. r % T only, the rest get probability 0 (the attention's
// mask, -inf above the diagonal).
__global__ void softmax_forward_kernel(float *y, const float *x, int len, int causal)
{
	__shared__ double sh[kThreads];
	__shared__ float shf[kThreads];
	size_t r = blockIdx.x;
	int valid = causal ? (int)(r % (size_t)len) + 1 : len;
	const float *xr = x + r * len;
	float *yr = y + r * len;
	float mx = -INFINITY;
	for (int j = threadIdx.x; j < valid; j += blockDim.x)
		mx = fmaxf(mx, xr[j]);
	mx = block_max(mx, shf);
	double s = 0;
	for (int j = threadIdx.x; j < valid; j += blockDim.x)
		s += expf(xr[j] - mx);
	float inv = (float)(1.0 / block_sum(s, sh));
	for (int j = threadIdx.x; j < len; j += blockDim.x)
		yr[j] = j < valid ? expf(xr[j] - mx) * inv : 0.0f;
}

// dx = scale y (dy - sum_j dy_j y_j); dx may equal dy (each row is read
// whole before it is written).
__global__ void softmax_backward_kernel(float *dx, int acc, const float *dy, const float *y,
                                        int len, float scale)
{
	__shared__ double sh[kThreads];
	size_t r = blockIdx.x;
	const float *dyr = dy + r * len, *yr = y + r * len;
	double s = 0;
	for (int j = threadIdx.x; j < len; j += blockDim.x)
		s += (double)dyr[j] * yr[j];
	float dot = (float)block_sum(s, sh);
	for (int j = threadIdx.x; j < len; j += blockDim.x) {
		float v = scale * (yr[j] * (dyr[j] - dot));
		store(dx, r * len + j, v, acc);
	}
}

// ---- elementwise ----------------------------------------------------------

__global__ void maskfill_kernel(float *y, int acc, const float *x, const uint8_t *mask,
                                size_t per, size_t n, float fill, int backward)
{
	GRID_STRIDE(e, n) {
		int masked = mask[e % per];
		// Forward: y = mask ? fill : x.  Backward (x = dy): dx = mask ? 0 : dy.
		float v = masked ? (backward ? 0.0f : fill) : x[e];
		if (backward)
			store(y, e, v, acc);
		else
			y[e] = v;
	}
}

// Forward y[b][o] = x[b][src[o]]; backward dx[b][src[o]] (+)= dy[b][o] (src
// is a permutation, so no two threads write one element).
__global__ void transpose_kernel(float *y, int acc, const float *x, const uint32_t *src,
                                 size_t per, size_t n, int backward)
{
	GRID_STRIDE(e, n) {
		size_t b = e / per, o = e % per;
		size_t s = b * per + src[o];
		if (backward)
			store(y, s, x[e], acc);
		else
			y[e] = x[s];
	}
}

// Forward out (rows, sn) = in (rows, sk)[:, off : off + sn]; backward dx
// (rows, sk) = dy in those columns, 0 elsewhere (acc: only added there).
__global__ void slice_kernel(float *y, int acc, const float *x, size_t rows, int sk, int sn,
                             int off, int backward)
{
	if (!backward) {
		GRID_STRIDE(e, rows * (size_t)sn) {
			size_t r = e / sn;
			int j = (int)(e % sn);
			y[e] = x[r * sk + off + j];
		}
		return;
	}
	GRID_STRIDE(e, rows * (size_t)sk) {
		size_t r = e / sk;
		int j = (int)(e % sk);
		float v = j >= off && j < off + sn ? x[r * sn + (j - off)] : 0.0f;
		store(y, e, v, acc);
	}
}

// f(x) and f'(x) of the unary ops (enum cu_unary).
__device__ inline float unary_f(int op, float x, float e)
{
	switch (op) {
	case CU_UN_ERF:
		return erff(x);
	case CU_UN_POW:
		return e == 0.5f ? sqrtf(x) : e == 2.0f ? x * x : e == 3.0f ? x * x * x : powf(x, e);
	case CU_UN_GELU_ERF:
		return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
	case CU_UN_GELU_TANH: {
		const float k = 0.7978845608028654f;   // sqrt(2 / pi)
		return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
	}
	case CU_UN_TANH:
		return tanhf(x);
	default:   // CU_UN_COPY
		return x;
	}
}

__device__ inline float unary_df(int op, float x, float e)
{
	switch (op) {
	case CU_UN_ERF:
		return 1.1283791670955126f * expf(-x * x);   // 2 / sqrt(pi) exp(-x^2)
	case CU_UN_POW:
		return e == 0.5f ? 0.5f / sqrtf(x) : e == 2.0f ? 2.0f * x
		       : e == 3.0f ? 3.0f * x * x : e * powf(x, e - 1.0f);
	case CU_UN_GELU_ERF: {
		// Phi(x) + x phi(x)
		float cdf = 0.5f * (1.0f + erff(x * 0.70710678118654752f));
		float pdf = 0.3989422804014327f * expf(-0.5f * x * x);
		return cdf + x * pdf;
	}
	case CU_UN_GELU_TANH: {
		const float k = 0.7978845608028654f;
		float u = k * (x + 0.044715f * x * x * x);
		float t = tanhf(u);
		float du = k * (1.0f + 3.0f * 0.044715f * x * x);
		return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
	}
	case CU_UN_TANH: {
		float t = tanhf(x);
		return 1.0f - t * t;
	}
	default:
		return 1.0f;
	}
}

// Forward y = f(x); backward (y = dx, dy given) dx (+)= dy f'(x).
__global__ void unary_kernel(float *y, int acc, const float *x, const float *dy, size_t n,
                             int op, float e)
{
	GRID_STRIDE(i, n) {
		if (dy)
			store(y, i, dy[i] * unary_df(op, x[i], e), acc);
		else
			y[i] = unary_f(op, x[i], e);
	}
}

__device__ inline float binop(int op, float u, float v)
{
	return op == SD_BIN_ADD ? u + v : op == SD_BIN_SUB ? u - v : op == SD_BIN_MUL ? u * v : u / v;
}

// y = x op k or k op x (k_first), k[kc == 1 ? 0 : e % C].
__global__ void bias_forward_kernel(float *y, const float *x, const float *k, size_t n, int C,
                                    int kc, int op, int k_first)
{
	GRID_STRIDE(e, n) {
		float kv = k[kc == 1 ? 0 : (int)(e % C)];
		y[e] = k_first ? binop(op, kv, x[e]) : binop(op, x[e], kv);
	}
}

// dx (+)= d(x op k)/dx dy.
__global__ void bias_backward_kernel(float *dx, int acc, const float *dy, const float *x,
                                     const float *k, size_t n, int C, int kc, int op, int k_first)
{
	GRID_STRIDE(e, n) {
		float g = dy[e], kv = k[kc == 1 ? 0 : (int)(e % C)];
		float u = k_first ? kv : x[e], v = k_first ? x[e] : kv;
		float du = op == SD_BIN_MUL ? g * v : op == SD_BIN_DIV ? g / v : g;
		float dv = op == SD_BIN_ADD ? g : op == SD_BIN_SUB ? -g
		           : op == SD_BIN_MUL ? g * u : -g * u / (v * v);
		store(dx, e, k_first ? dv : du, acc);
	}
}

// y = a op b (same shape).
__global__ void binary_forward_kernel(float *y, const float *a, const float *b, size_t n, int op)
{
	GRID_STRIDE(e, n)
		y[e] = binop(op, a[e], b[e]);
}

// Gradient of one operand (which: 0 = a, 1 = b) of y = a op b.
__global__ void binary_backward_kernel(float *d, int acc, const float *dy, const float *a,
                                       const float *b, size_t n, int op, int which)
{
	GRID_STRIDE(e, n) {
		float g = dy[e], u = a[e], v = b[e];
		float r;
		if (which == 0)
			r = op == SD_BIN_MUL ? g * v : op == SD_BIN_DIV ? g / v : g;
		else
			r = op == SD_BIN_ADD ? g : op == SD_BIN_SUB ? -g
			    : op == SD_BIN_MUL ? g * u : -g * u / (v * v);
		store(d, e, r, acc);
	}
}

__global__ void ids_to_float_kernel(float *x, const int32_t *ids, size_t n)
{
	GRID_STRIDE(i, n)
		x[i] = (float)ids[i];
}

// ---- sequence cross-entropy -----------------------------------------------

// Block per row of V logits: row_loss = log sum exp(l - max) + max - l[y]
// (double); dlogits (may equal logits, may be NULL) = (softmax - onehot)
// scale; a negative target adds nothing and gets a zero gradient; a target
// >= V gives NaN.
__global__ void seq_xent_kernel(float *dlogits, double *row_loss, const float *logits,
                                const int32_t *y, int V, float scale)
{
	__shared__ double sh[kThreads];
	__shared__ float shf[kThreads];
	size_t r = blockIdx.x;
	const float *l = logits + r * V;
	int t = y[r];
	float mx = -INFINITY;
	for (int j = threadIdx.x; j < V; j += blockDim.x)
		mx = fmaxf(mx, l[j]);
	mx = block_max(mx, shf);
	double s = 0;
	for (int j = threadIdx.x; j < V; j += blockDim.x)
		s += exp((double)l[j] - mx);
	double sum = block_sum(s, sh);
	if (threadIdx.x == 0)
		row_loss[r] = t < 0 ? 0.0 : t >= V ? NAN : log(sum) + mx - (double)l[t];
	if (!dlogits)
		return;
	__syncthreads();   // every read of row r above precedes an in-place write
	float *d = dlogits + r * V;
	for (int j = threadIdx.x; j < V; j += blockDim.x) {
		float p = (float)(exp((double)l[j] - mx) / sum);
		d[j] = t < 0 ? 0.0f : (p - (j == t ? 1.0f : 0.0f)) * scale;
	}
}

// out[0] = sum of n doubles in index order (one thread: a fixed order; n is
// at most batch * T).
__global__ void sum_rows_kernel(struct cu_metrics *out, const double *row_loss, size_t n)
{
	if (blockIdx.x || threadIdx.x)
		return;
	double s = 0;
	for (size_t i = 0; i < n; i++)
		s += row_loss[i];
	out->loss_sum = s;
	out->correct = 0;
}

}  // namespace

// ---- launchers --------------------------------------------------------------

extern "C" cudaError_t cu_embed_forward(cudaStream_t st, float *out, const float *ids_f,
                                        const int32_t *idx, const float *table, size_t rows,
                                        int T, int C, int V)
{
	embed_forward_kernel<<<blocks_for(rows * C), kThreads, 0, st>>>(out, ids_f, idx, table, rows,
	                                                                 T, C, V);
	return cudaGetLastError();
}

extern "C" cudaError_t cu_embed_backward(cudaStream_t st, float *dtable, const float *dy,
                                         const float *ids_f, const int32_t *idx, size_t rows,
                                         int T, int C, int V)
{
	unsigned g = V < 65535 ? (unsigned)V : 65535u;
	embed_backward_kernel<<<g, kThreads, 0, st>>>(dtable, dy, ids_f, idx, rows, T, C, V);
	return cudaGetLastError();
}

extern "C" cudaError_t cu_layernorm_forward(cudaStream_t st, float *y, float *mean, float *rstd,
                                            const float *x, const float *gamma,
                                            const float *beta, size_t rows, int C, float eps)
{
	if (!rows)
		return cudaSuccess;
	layernorm_forward_kernel<<<(unsigned)rows, kThreads, 0, st>>>(y, mean, rstd, x, gamma, beta,
	                                                              C, eps);
	return cudaGetLastError();
}

static cudaError_t colsum(cudaStream_t st, float *out, const col_args &a, size_t rows, int C,
                          int scalar, double *scratch)
{
	size_t chunks = (rows + kColChunk - 1) / kColChunk;
	dim3 grid((unsigned)((C + kThreads - 1) / kThreads), (unsigned)chunks);
	colsum_partial_kernel<<<grid, kThreads, 0, st>>>(scratch, a, rows, C);
	cudaError_t e = cudaGetLastError();
	if (e != cudaSuccess)
		return e;
	colsum_fold_kernel<<<(unsigned)((C + kThreads - 1) / kThreads), kThreads, 0, st>>>(
		out, scratch, chunks, C, scalar);
	return cudaGetLastError();
}

extern "C" size_t cu_colsum_scratch_bytes(size_t rows, int C)
{
	return (rows + kColChunk - 1) / kColChunk * (size_t)C * sizeof(double);
}

extern "C" cudaError_t cu_layernorm_backward(cudaStream_t st, float *dx, int acc, float *dgamma,
                                             float *dbeta, const float *dy, const float *x,
                                             const float *mean, const float *rstd,
                                             const float *gamma, size_t rows, int C,
                                             double *scratch)
{
	if (!rows)
		return cudaSuccess;
	if (dx) {
		layernorm_backward_dx_kernel<<<(unsigned)rows, kThreads, 0, st>>>(dx, acc, dy, x, mean,
		                                                                  rstd, gamma, C);
		cudaError_t e = cudaGetLastError();
		if (e != cudaSuccess)
			return e;
	}
	col_args a = {};
	a.dy = dy;
	a.x = x;
	a.mean = mean;
	a.rstd = rstd;
	if (dgamma) {
		a.term = COL_DY_XHAT;
		cudaError_t e = colsum(st, dgamma, a, rows, C, 0, scratch);
		if (e != cudaSuccess)
			return e;
	}
	if (dbeta) {
		a.term = COL_DY;
		return colsum(st, dbeta, a, rows, C, 0, scratch);
	}
	return cudaSuccess;
}

extern "C" cudaError_t cu_colsum_dy(cudaStream_t st, float *out, const float *dy, size_t rows,
                                    int C, double *scratch)
{
	col_args a = {};
	a.term = COL_DY;
	a.dy = dy;
	return colsum(st, out, a, rows, C, 0, scratch);
}

extern "C" cudaError_t cu_softmax_forward(cudaStream_t st, float *y, const float *x, size_t rows,
                                          int len, int causal)
{
	if (!rows)
		return cudaSuccess;
	softmax_forward_kernel<<<(unsigned)rows, kThreads, 0, st>>>(y, x, len, causal);
	return cudaGetLastError();
}

extern "C" cudaError_t cu_softmax_backward(cudaStream_t st, float *dx, int acc, const float *dy,
                                           const float *y, size_t rows, int len, float scale)
{
	if (!rows)
		return cudaSuccess;
	softmax_backward_kernel<<<(unsigned)rows, kThreads, 0, st>>>(dx, acc, dy, y, len, scale);
	return cudaGetLastError();
}

extern "C" cudaError_t cu_maskfill(cudaStream_t st, float *y, int acc, const float *x,
                                   const uint8_t *mask, size_t per, size_t n, float fill,
                                   int backward)
{
	maskfill_kernel<<<blocks_for(n), kThreads, 0, st>>>(y, acc, x, mask, per, n, fill, backward);
	return cudaGetLastError();
}

extern "C" cudaError_t cu_transpose(cudaStream_t st, float *y, int acc, const float *x,
                                    const uint32_t *src, size_t per, size_t n, int backward)
{
	transpose_kernel<<<blocks_for(n), kThreads, 0, st>>>(y, acc, x, src, per, n, backward);
	return cudaGetLastError();
}

extern "C" cudaError_t cu_slice(cudaStream_t st, float *y, int acc, const float *x, size_t rows,
                                int sk, int sn, int off, int backward)
{
	slice_kernel<<<blocks_for(rows * (backward ? sk : sn)), kThreads, 0, st>>>(y, acc, x, rows,
	                                                                          sk, sn, off,
	                                                                          backward);
	return cudaGetLastError();
}

extern "C" cudaError_t cu_unary(cudaStream_t st, float *y, int acc, const float *x,
                                const float *dy, size_t n, enum cu_unary op, float e)
{
	unary_kernel<<<blocks_for(n), kThreads, 0, st>>>(y, acc, x, dy, n, (int)op, e);
	return cudaGetLastError();
}

extern "C" cudaError_t cu_bias_forward(cudaStream_t st, float *y, const float *x, const float *k,
                                       size_t n, int C, int kc, int op, int k_first)
{
	bias_forward_kernel<<<blocks_for(n), kThreads, 0, st>>>(y, x, k, n, C, kc, op, k_first);
	return cudaGetLastError();
}

extern "C" cudaError_t cu_bias_backward(cudaStream_t st, float *dx, int acc, float *dk,
                                        const float *dy, const float *x, const float *k,
                                        size_t n, int C, int kc, int op, int k_first,
                                        double *scratch)
{
	if (dx) {
		bias_backward_kernel<<<blocks_for(n), kThreads, 0, st>>>(dx, acc, dy, x, k, n, C, kc, op,
		                                                         k_first);
		cudaError_t e = cudaGetLastError();
		if (e != cudaSuccess)
			return e;
	}
	if (!dk)
		return cudaSuccess;
	col_args a = {};
	a.term = COL_DK;
	a.dy = dy;
	a.x = x;
	a.k = k;
	a.op = op;
	a.k_first = k_first;
	a.kc = kc;
	return colsum(st, dk, a, n / C, C, kc == 1, scratch);
}

extern "C" cudaError_t cu_binary_forward(cudaStream_t st, float *y, const float *a,
                                         const float *b, size_t n, int op)
{
	binary_forward_kernel<<<blocks_for(n), kThreads, 0, st>>>(y, a, b, n, op);
	return cudaGetLastError();
}

extern "C" cudaError_t cu_binary_backward(cudaStream_t st, float *d, int acc, const float *dy,
                                          const float *a, const float *b, size_t n, int op,
                                          int which)
{
	binary_backward_kernel<<<blocks_for(n), kThreads, 0, st>>>(d, acc, dy, a, b, n, op, which);
	return cudaGetLastError();
}

extern "C" cudaError_t cu_ids_to_float(cudaStream_t st, float *x, const int32_t *ids, size_t n)
{
	ids_to_float_kernel<<<blocks_for(n), kThreads, 0, st>>>(x, ids, n);
	return cudaGetLastError();
}

extern "C" cudaError_t cu_seq_xent(cudaStream_t st, float *dlogits, double *row_loss,
                                   struct cu_metrics *out, const float *logits, const int32_t *y,
                                   size_t rows, int V, float scale)
{
	if (rows) {
		seq_xent_kernel<<<(unsigned)rows, kThreads, 0, st>>>(dlogits, row_loss, logits, y, V,
		                                                     scale);
		cudaError_t e = cudaGetLastError();
		if (e != cudaSuccess)
			return e;
	}
	sum_rows_kernel<<<1, 1, 0, st>>>(out, row_loss, rows);
	return cudaGetLastError();
}
