// engine/cuda/kernels.cu - the CUDA backend's own kernels: only what cuDNN
// and cuBLAS do not provide (see cuda-internal.h).  Each launcher enqueues on
// the given stream and returns the launch's error; none synchronises, so all
// of them can be captured into a CUDA graph.
//
// Numerics follow engine/layers.c and engine/optim.c so the two backends can
// be compared element by element: the loss is computed per row in double and
// summed in a fixed order, and the SGD update is rounded step by step with
// __fmul_rn/__fadd_rn (no fused multiply-add, which the CPU build does not
// use either), so it gives the CPU's bits.
#include "engine/cuda/cuda-internal.h"

#include <math.h>

namespace {

constexpr int kThreads = 256;

// Enough blocks to fill the device, each thread striding over the rest.
inline unsigned blocks_for(size_t count)
{
	size_t b = (count + kThreads - 1) / kThreads;
	if (b > 4096)
		b = 4096;
	return b ? (unsigned)b : 1u;
}

__global__ void fill_kernel(float *p, float v, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		p[i] = v;
}

__global__ void relu_forward_kernel(float *y, const float *x, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		float v = x[i];
		y[i] = v > 0.0f ? v : 0.0f;
	}
}

// 16-byte accesses when every pointer is aligned and the count divides by 4.
__global__ void relu_forward_kernel4(float4 *y, const float4 *x, size_t n4)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4;
	     i += (size_t)gridDim.x * blockDim.x) {
		float4 v = x[i];
		v.x = v.x > 0.0f ? v.x : 0.0f;
		v.y = v.y > 0.0f ? v.y : 0.0f;
		v.z = v.z > 0.0f ? v.z : 0.0f;
		v.w = v.w > 0.0f ? v.w : 0.0f;
		y[i] = v;
	}
}

__global__ void relu_backward_kernel(float *dx, const float *dy, const float *y, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		float g = dy[i];
		dx[i] = y[i] > 0.0f ? g : 0.0f;
	}
}

__global__ void relu_backward_kernel4(float4 *dx, const float4 *dy, const float4 *y, size_t n4)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4;
	     i += (size_t)gridDim.x * blockDim.x) {
		float4 g = dy[i], v = y[i];
		g.x = v.x > 0.0f ? g.x : 0.0f;
		g.y = v.y > 0.0f ? g.y : 0.0f;
		g.z = v.z > 0.0f ? g.z : 0.0f;
		g.w = v.w > 0.0f ? g.w : 0.0f;
		dx[i] = g;
	}
}

__global__ void add_into_kernel(float *dst, const float *src, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		dst[i] += src[i];
}

__global__ void bias_rows_kernel(float *y, const float *b, size_t n, int out)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		y[i] += b[i % out];
}

// One thread per output element of the shortcut (engine/model.c's
// shortcut_forward): channels outside b's range copy a unchanged.
__global__ void shortcut_forward_kernel(float *y, const float *a, const float *b, int n, int c,
                                        int h, int w, int cb, int s)
{
	const size_t total = (size_t)n * c * h * w;
	const int pad = (c - cb) / 2, hb = h * s, wb = w * s;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
	     i += (size_t)gridDim.x * blockDim.x) {
		int ww = (int)(i % w);
		int hh = (int)((i / w) % h);
		int ch = (int)((i / ((size_t)w * h)) % c);
		size_t img = i / ((size_t)w * h * c);
		int bc = ch - pad;
		if (bc < 0 || bc >= cb) {
			y[i] = a[i];
			continue;
		}
		y[i] = a[i] + b[((img * cb + bc) * hb + (size_t)hh * s) * wb + (size_t)ww * s];
	}
}

// One thread per element of b's gradient: the subsampled positions take the
// matching dy, the others 0 (engine/model.c's shortcut_backward after its
// memset), then = or += as the graph needs.
__global__ void shortcut_backward_kernel(float *db, const float *dy, int n, int c, int h, int w,
                                         int cb, int s, int acc)
{
	const int pad = (c - cb) / 2, hb = h * s, wb = w * s;
	const size_t total = (size_t)n * cb * hb * wb;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
	     i += (size_t)gridDim.x * blockDim.x) {
		int x = (int)(i % wb);
		int yy = (int)((i / wb) % hb);
		int bc = (int)((i / ((size_t)wb * hb)) % cb);
		size_t img = i / ((size_t)wb * hb * cb);
		float v = 0.0f;
		if (x % s == 0 && yy % s == 0 && yy / s < h && x / s < w)
			v = 0.0f + dy[((img * c + bc + pad) * h + yy / s) * w + x / s];
		db[i] = acc ? db[i] + v : v;
	}
}

// One thread per row: classes is small (10 here), and the row's loss is
// computed exactly as sd_softmax_xent_forward does, in double.
__global__ void softmax_xent_kernel(float *dlogits, double *row_loss, int *row_correct,
                                    const float *logits, const uint8_t *labels, int n,
                                    int classes, float scale)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n)
		return;
	const float *l = logits + (size_t)i * classes;
	int arg = 0;
	float mx = l[0];
	for (int j = 1; j < classes; j++)
		if (l[j] > mx) {
			mx = l[j];
			arg = j;
		}
	double sum = 0.0;
	for (int j = 0; j < classes; j++)
		sum += exp((double)l[j] - mx);
	double inv = 1.0 / sum;
	int y = labels[i];
	if (y >= classes) {
		row_loss[i] = nan("");
		row_correct[i] = 0;
	} else {
		row_loss[i] = log(sum) - ((double)l[y] - mx);
		row_correct[i] = arg == y;
	}
	if (dlogits) {
		float *d = dlogits + (size_t)i * classes;
		for (int j = 0; j < classes; j++) {
			float p = (float)(exp((double)l[j] - mx) * inv);
			d[j] = (j == y ? p - 1.0f : p) * scale;
		}
	}
}

// One block: each thread sums rows tid, tid + blockDim, ... in order, then a
// tree over the threads in a fixed pattern.  No atomics: the same bits on
// every run.
__global__ void metrics_reduce_kernel(struct cu_metrics *out, const double *row_loss,
                                      const int *row_correct, int n)
{
	__shared__ double sl[kThreads];
	__shared__ int sc[kThreads];
	int t = threadIdx.x;
	double l = 0.0;
	int c = 0;
	for (int i = t; i < n; i += kThreads) {
		l += row_loss[i];
		c += row_correct[i];
	}
	sl[t] = l;
	sc[t] = c;
	__syncthreads();
	for (int half = kThreads / 2; half > 0; half /= 2) {
		if (t < half) {
			sl[t] += sl[t + half];
			sc[t] += sc[t + half];
		}
		__syncthreads();
	}
	if (t == 0) {
		out->loss_sum = sl[0];
		out->correct = sc[0];
		out->pad = 0;
	}
}

// One thread per float (four with 16-byte accesses) of the batch: sample
// row of x takes sample idx[row] of data; the row's first thread also
// copies its label.  Consecutive threads read consecutive addresses of one
// sample.
__global__ void gather_kernel(float *x, uint8_t *y, const float *data, const uint8_t *labels,
                              const int32_t *idx, int n, size_t img)
{
	const size_t total = (size_t)n * img;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
	     i += (size_t)gridDim.x * blockDim.x) {
		size_t row = i / img, j = i % img;
		size_t src = (size_t)idx[row];
		x[i] = data[src * img + j];
		if (j == 0)
			y[row] = labels[src];
	}
}

__global__ void gather_kernel4(float4 *x, uint8_t *y, const float4 *data, const uint8_t *labels,
                               const int32_t *idx, int n, size_t img4)
{
	const size_t total = (size_t)n * img4;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
	     i += (size_t)gridDim.x * blockDim.x) {
		size_t row = i / img4, j = i % img4;
		size_t src = (size_t)idx[row];
		x[i] = data[src * img4 + j];
		if (j == 0)
			y[row] = labels[src];
	}
}

__device__ __forceinline__ void sgd_one(float &p, float &v, float g, float lr, float mom, float wd)
{
	g = __fadd_rn(g, __fmul_rn(wd, p));
	v = __fadd_rn(__fmul_rn(mom, v), g);
	p = __fsub_rn(p, __fmul_rn(lr, v));
}

// One AdamW element in engine/optim.c's order, each operation rounded
// alone; sqrt and division are IEEE-rounded in CUDA by default (nvcc's
// -prec-sqrt/-prec-div are on without --use_fast_math), like sqrtf and /.
__device__ __forceinline__ void adamw_one(float &p, float &m, float &v, float g,
                                          const struct sd_adamw_scalars &k)
{
	p = __fmul_rn(p, k.decay);
	m = __fadd_rn(__fmul_rn(m, k.beta1), __fmul_rn(k.one_minus_beta1, g));
	v = __fadd_rn(__fmul_rn(v, k.beta2), __fmul_rn(__fmul_rn(k.one_minus_beta2, g), g));
	float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), k.bc2_sqrt), k.eps);
	p = __fadd_rn(p, __fdiv_rn(__fmul_rn(k.neg_step_size, m), denom));
}

__global__ void adamw_kernel(float *p, float *m, float *v, const float *g, size_t n,
                             struct sd_adamw_scalars k)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		float pp = p[i], mm = m[i], vv = v[i];
		adamw_one(pp, mm, vv, g[i], k);
		p[i] = pp;
		m[i] = mm;
		v[i] = vv;
	}
}

// sd_sumsq's order (engine/optim.h): 256 threads, thread j summing
// elements j, j + 256, ... of its block sequentially, then the pairwise
// fold.  __dadd_rn/__dmul_rn keep nvcc from fusing into FMA.
__device__ __forceinline__ double fold256(double *s, int j)
{
	for (int w = 128; w >= 1; w /= 2) {
		__syncthreads();
		if (j < w)
			s[j] = __dadd_rn(s[j], s[j + w]);
	}
	__syncthreads();
	return s[0];
}

__global__ void sumsq_blocks_kernel(double *partial, const float *x, size_t n)
{
	__shared__ double s[256];
	const int j = threadIdx.x;
	const size_t lo = (size_t)blockIdx.x * SD_SUMSQ_BLOCK;
	double acc = 0.0;
	for (size_t i = lo + j; i < lo + SD_SUMSQ_BLOCK && i < n; i += 256) {
		double d = (double)x[i];
		acc = __dadd_rn(acc, __dmul_rn(d, d));
	}
	s[j] = acc;
	double total = fold256(s, j);
	if (j == 0)
		partial[blockIdx.x] = total;
}

__global__ void sumsq_fold_kernel(double *out, const double *partial, size_t nb)
{
	__shared__ double s[256];
	const int j = threadIdx.x;
	double acc = 0.0;
	for (size_t b = j; b < nb; b += 256)
		acc = __dadd_rn(acc, partial[b]);
	s[j] = acc;
	double total = fold256(s, j);
	if (j == 0)
		*out = total;
}

__global__ void scale_kernel(float *x, size_t n, float coef)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		x[i] = __fmul_rn(x[i], coef);
}

__global__ void sgd_kernel(float *p, float *v, const float *g, size_t n, float lr, float mom,
                           float wd)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		float pp = p[i], vv = v[i];
		sgd_one(pp, vv, g[i], lr, mom, wd);
		v[i] = vv;
		p[i] = pp;
	}
}

__global__ void sgd_kernel4(float4 *p, float4 *v, const float4 *g, size_t n4, float lr,
                            float mom, float wd)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4;
	     i += (size_t)gridDim.x * blockDim.x) {
		float4 pp = p[i], vv = v[i], gg = g[i];
		sgd_one(pp.x, vv.x, gg.x, lr, mom, wd);
		sgd_one(pp.y, vv.y, gg.y, lr, mom, wd);
		sgd_one(pp.z, vv.z, gg.z, lr, mom, wd);
		sgd_one(pp.w, vv.w, gg.w, lr, mom, wd);
		v[i] = vv;
		p[i] = pp;
	}
}

inline bool aligned16(const void *p)
{
	return ((uintptr_t)p & 15) == 0;
}

} // namespace

extern "C" cudaError_t cu_fill(cudaStream_t st, float *p, float value, size_t count)
{
	if (!count)
		return cudaSuccess;
	fill_kernel<<<blocks_for(count), kThreads, 0, st>>>(p, value, count);
	return cudaGetLastError();
}

extern "C" cudaError_t cu_relu_forward(cudaStream_t st, float *y, const float *x, size_t count)
{
	if (!count)
		return cudaSuccess;
	if (count % 4 == 0 && aligned16(x) && aligned16(y))
		relu_forward_kernel4<<<blocks_for(count / 4), kThreads, 0, st>>>(
			(float4 *)y, (const float4 *)x, count / 4);
	else
		relu_forward_kernel<<<blocks_for(count), kThreads, 0, st>>>(y, x, count);
	return cudaGetLastError();
}

extern "C" cudaError_t cu_relu_backward(cudaStream_t st, float *dx, const float *dy,
                                        const float *y, size_t count)
{
	if (!count)
		return cudaSuccess;
	if (count % 4 == 0 && aligned16(dx) && aligned16(dy) && aligned16(y))
		relu_backward_kernel4<<<blocks_for(count / 4), kThreads, 0, st>>>(
			(float4 *)dx, (const float4 *)dy, (const float4 *)y, count / 4);
	else
		relu_backward_kernel<<<blocks_for(count), kThreads, 0, st>>>(dx, dy, y, count);
	return cudaGetLastError();
}

extern "C" cudaError_t cu_add_into(cudaStream_t st, float *dst, const float *src, size_t count)
{
	if (!count)
		return cudaSuccess;
	add_into_kernel<<<blocks_for(count), kThreads, 0, st>>>(dst, src, count);
	return cudaGetLastError();
}

extern "C" cudaError_t cu_bias_rows(cudaStream_t st, float *y, const float *b, int n, int out)
{
	size_t count = (size_t)n * out;
	if (!count)
		return cudaSuccess;
	bias_rows_kernel<<<blocks_for(count), kThreads, 0, st>>>(y, b, count, out);
	return cudaGetLastError();
}

extern "C" cudaError_t cu_shortcut_forward(cudaStream_t st, float *y, const float *a,
                                           const float *b, int n, int c, int h, int w, int cb,
                                           int s)
{
	size_t count = (size_t)n * c * h * w;
	if (!count)
		return cudaSuccess;
	shortcut_forward_kernel<<<blocks_for(count), kThreads, 0, st>>>(y, a, b, n, c, h, w, cb, s);
	return cudaGetLastError();
}

extern "C" cudaError_t cu_shortcut_backward(cudaStream_t st, float *db, const float *dy, int n,
                                            int c, int h, int w, int cb, int s, int acc)
{
	size_t count = (size_t)n * cb * h * s * w * s;
	if (!count)
		return cudaSuccess;
	shortcut_backward_kernel<<<blocks_for(count), kThreads, 0, st>>>(db, dy, n, c, h, w, cb, s,
	                                                                 acc);
	return cudaGetLastError();
}

extern "C" cudaError_t cu_softmax_xent(cudaStream_t st, float *dlogits, double *row_loss,
                                       int *row_correct, const float *logits,
                                       const uint8_t *labels, int n, int classes, float scale)
{
	if (n <= 0)
		return cudaSuccess;
	softmax_xent_kernel<<<(n + 127) / 128, 128, 0, st>>>(dlogits, row_loss, row_correct, logits,
	                                                     labels, n, classes, scale);
	return cudaGetLastError();
}

extern "C" cudaError_t cu_metrics_reduce(cudaStream_t st, struct cu_metrics *out,
                                         const double *row_loss, const int *row_correct, int n)
{
	metrics_reduce_kernel<<<1, kThreads, 0, st>>>(out, row_loss, row_correct, n);
	return cudaGetLastError();
}

extern "C" cudaError_t cu_gather(cudaStream_t st, float *x, uint8_t *y, const float *data,
                                 const uint8_t *labels, const int32_t *idx, int n, size_t img)
{
	size_t count = (size_t)n * img;
	if (!count)
		return cudaSuccess;
	if (img % 4 == 0 && aligned16(x) && aligned16(data))
		gather_kernel4<<<blocks_for(count / 4), kThreads, 0, st>>>(
			(float4 *)x, y, (const float4 *)data, labels, idx, n, img / 4);
	else
		gather_kernel<<<blocks_for(count), kThreads, 0, st>>>(x, y, data, labels, idx, n, img);
	return cudaGetLastError();
}

extern "C" cudaError_t cu_sgd(cudaStream_t st, float *params, float *velocity,
                              const float *grads, size_t count, float lr, float momentum,
                              float weight_decay)
{
	if (!count)
		return cudaSuccess;
	if (count % 4 == 0 && aligned16(params) && aligned16(velocity) && aligned16(grads))
		sgd_kernel4<<<blocks_for(count / 4), kThreads, 0, st>>>(
			(float4 *)params, (float4 *)velocity, (const float4 *)grads, count / 4, lr,
			momentum, weight_decay);
	else
		sgd_kernel<<<blocks_for(count), kThreads, 0, st>>>(params, velocity, grads, count, lr,
		                                                    momentum, weight_decay);
	return cudaGetLastError();
}

extern "C" cudaError_t cu_adamw(cudaStream_t st, float *params, float *m, float *v,
                                const float *grads, size_t count, struct sd_adamw_scalars s)
{
	if (!count)
		return cudaSuccess;
	adamw_kernel<<<blocks_for(count), kThreads, 0, st>>>(params, m, v, grads, count, s);
	return cudaGetLastError();
}

extern "C" cudaError_t cu_sumsq(cudaStream_t st, double *out, double *partial, const float *x,
                                size_t count)
{
	size_t nb = (count + SD_SUMSQ_BLOCK - 1) / SD_SUMSQ_BLOCK;
	if (nb == 0)
		return cudaMemsetAsync(out, 0, sizeof(double), st);
	if (nb > 0x7fffffffu)
		return cudaErrorInvalidValue;
	sumsq_blocks_kernel<<<(unsigned)nb, 256, 0, st>>>(partial, x, count);
	sumsq_fold_kernel<<<1, 256, 0, st>>>(out, partial, nb);
	return cudaGetLastError();
}

extern "C" cudaError_t cu_scale(cudaStream_t st, float *x, size_t count, float coef)
{
	if (!count)
		return cudaSuccess;
	scale_kernel<<<blocks_for(count), kThreads, 0, st>>>(x, count, coef);
	return cudaGetLastError();
}
