/* engine/layers.c - CPU reference layers of the training engine (see layers.h).
 *
 * Convolutions are lowered to matrix products (im2col, Chellapilla et al. 2006,
 * "High performance convolutional neural networks for document processing")
 * and handed to OpenBLAS; everything else is plain loops.
 *
 * Reproducibility: every OpenMP loop here uses schedule(static) and gives each
 * output element (or each reduction) to exactly one thread, which computes it
 * in a fixed order.  No float atomics, no reduction clauses across threads.
 * So the results do not even depend on the OpenMP thread count; only the BLAS
 * partitioning can make them depend on the OpenBLAS thread count.
 */
#include "engine/layers.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

/* Below this many elements a parallel region costs more than it saves
 * (waking the second thread is a few microseconds). */
#define SD_OMP_MIN 32768

/* Target size in floats of one convolution chunk (column matrix plus GEMM
 * output).  Whole-batch GEMMs are not the fastest: a 64-sample column matrix of
 * the cnn's second layer is 40 MB, and writing and re-reading it costs more
 * than the bigger GEMM saves.  Chunks of about this size keep the column
 * matrix within a few MB, where the measured sgemm rate already peaks
 * (tests/bench/bench-layers). */
#ifndef SD_CONV_CHUNK_FLOATS
#define SD_CONV_CHUNK_FLOATS (1u << 20)
#endif

/* Sum of x[0 .. len) in double.  Eight independent partial sums let the
 * compiler vectorise and pipeline the additions while the fixed lane order
 * keeps the result reproducible. */
static double sd_sum_f64(const float *x, size_t len)
{
	double acc[8] = { 0 };
	size_t i = 0;
	for (; i + 8 <= len; i += 8)
		for (int j = 0; j < 8; j++)
			acc[j] += x[i + j];
	double tail = 0.0;
	for (; i < len; i++)
		tail += x[i];
	return ((acc[0] + acc[1]) + (acc[2] + acc[3])) +
	       ((acc[4] + acc[5]) + (acc[6] + acc[7])) + tail;
}

/* Sum of (x[i] - m)^2 in double, same lane scheme as sd_sum_f64. */
static double sd_sumsq_centered_f64(const float *x, size_t len, double m)
{
	double acc[8] = { 0 };
	size_t i = 0;
	for (; i + 8 <= len; i += 8)
		for (int j = 0; j < 8; j++) {
			double d = x[i + j] - m;
			acc[j] += d * d;
		}
	double tail = 0.0;
	for (; i < len; i++) {
		double d = x[i] - m;
		tail += d * d;
	}
	return ((acc[0] + acc[1]) + (acc[2] + acc[3])) +
	       ((acc[4] + acc[5]) + (acc[6] + acc[7])) + tail;
}

/* Sum of dy[i] * (x[i] - m) in double, same lane scheme as sd_sum_f64. */
static double sd_dot_centered_f64(const float *dy, const float *x, size_t len, double m)
{
	double acc[8] = { 0 };
	size_t i = 0;
	for (; i + 8 <= len; i += 8)
		for (int j = 0; j < 8; j++)
			acc[j] += (double)dy[i + j] * (x[i + j] - m);
	double tail = 0.0;
	for (; i < len; i++)
		tail += (double)dy[i] * (x[i] - m);
	return ((acc[0] + acc[1]) + (acc[2] + acc[3])) +
	       ((acc[4] + acc[5]) + (acc[6] + acc[7])) + tail;
}

/* ---------------------------------------------------------------- linear */

void sd_linear_forward(float *y, const float *x, const float *w, const float *b,
                       int n, int in, int out)
{
	/* Starting from the bias and letting the GEMM add (beta = 1) saves a
	 * second pass over y. */
	float beta = 0.0f;
	if (b) {
		for (int i = 0; i < n; i++)
			memcpy(y + (size_t)i * out, b, sizeof(float) * out);
		beta = 1.0f;
	}
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, out, in,
	            1.0f, x, in, w, in, beta, y, out);
}

void sd_linear_backward(float *dx, float *dw, float *db, const float *dy,
                        const float *x, const float *w, int n, int in, int out)
{
	/* dx (n, in) = dy (n, out) . w (out, in) */
	if (dx)
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, in, out,
		            1.0f, dy, out, w, in, 0.0f, dx, in);
	/* dw (out, in) += dy^T (out, n) . x (n, in) */
	cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, n,
	            1.0f, dy, out, x, in, 1.0f, dw, in);
	if (db) {
		/* Column sums in double, rows in order, so db does not depend on
		 * the batch split. */
		for (int o = 0; o < out; o++) {
			double s = 0.0;
			for (int i = 0; i < n; i++)
				s += dy[(size_t)i * out + o];
			db[o] += (float)s;
		}
	}
}

/* ---------------------------------------------------------------- conv2d */

int sd_conv2d_shape_init(struct sd_conv2d_shape *s, int n, int c, int h, int w,
                         int k, int r, int stride, int pad)
{
	memset(s, 0, sizeof(*s));
	if (n <= 0 || c <= 0 || h <= 0 || w <= 0 || k <= 0 || r <= 0 ||
	    stride <= 0 || pad < 0)
		return -1;
	/* The padded input must hold at least one window; the subtraction below
	 * cannot overflow since every operand is a positive int. */
	if ((long)h + 2L * pad < r || (long)w + 2L * pad < r)
		return -1;
	s->n = n;
	s->c = c;
	s->h = h;
	s->w = w;
	s->k = k;
	s->r = r;
	s->stride = stride;
	s->pad = pad;
	s->oh = (int)(((long)h + 2L * pad - r) / stride + 1);
	s->ow = (int)(((long)w + 2L * pad - r) / stride + 1);
	return 0;
}

/* Samples per chunk: as many as fit SD_CONV_CHUNK_FLOATS, at least one, and
 * spread evenly so the last chunk is not a sliver.  Depends on the shape only,
 * which makes workspace size and summation order a function of the shape. */
static int sd_conv2d_chunk(const struct sd_conv2d_shape *s)
{
	size_t per = ((size_t)s->c * s->r * s->r + (size_t)s->k) * s->oh * s->ow;
	size_t b = SD_CONV_CHUNK_FLOATS / (per ? per : 1);
	if (b < 1)
		b = 1;
	if (b >= (size_t)s->n)
		return s->n;
	size_t chunks = ((size_t)s->n + b - 1) / b;
	return (int)(((size_t)s->n + chunks - 1) / chunks);
}

size_t sd_conv2d_workspace_floats(const struct sd_conv2d_shape *s)
{
	/* Column matrix (c r r, B oh ow) then the GEMM output or the reordered
	 * output gradient (k, B oh ow). */
	size_t b = (size_t)sd_conv2d_chunk(s);
	return ((size_t)s->c * s->r * s->r + (size_t)s->k) * b * s->oh * s->ow;
}

/* One row of the column matrix for one input plane: out[oh][ow] =
 * x[oh*stride + ki - pad][ow*stride + kj - pad], zero outside the plane. */
static void sd_im2col_plane(float *restrict out, const float *restrict xp,
                            const struct sd_conv2d_shape *s, int ki, int kj)
{
	const int h = s->h, w = s->w, oh = s->oh, ow = s->ow;
	const int st = s->stride, pad = s->pad;
	/* Output columns whose input column lies inside the plane:
	 * 0 <= ow*st + kj - pad < w. */
	int lo = pad - kj > 0 ? (pad - kj + st - 1) / st : 0;
	int hi = w + pad - kj > 0 ? (w + pad - kj + st - 1) / st : 0;
	if (hi > ow)
		hi = ow;
	if (lo > hi)
		lo = hi;
	for (int y = 0; y < oh; y++, out += ow) {
		int iy = y * st + ki - pad;
		if (iy < 0 || iy >= h) {
			memset(out, 0, sizeof(float) * ow);
			continue;
		}
		/* Input column of output column x is x*st + off; indexing
		 * with the offset keeps every pointer inside the plane. */
		const float *src = xp + (size_t)iy * w;
		const int off = kj - pad;
		for (int x = 0; x < lo; x++)
			out[x] = 0.0f;
		/* Rows are short (tens of floats), so an inline vector loop
		 * beats a call to memcpy. */
		if (st == 1) {
			#pragma omp simd
			for (int x = lo; x < hi; x++)
				out[x] = src[x + off];
		} else {
			#pragma omp simd
			for (int x = lo; x < hi; x++)
				out[x] = src[x * st + off];
		}
		for (int x = hi; x < ow; x++)
			out[x] = 0.0f;
	}
}

/* Column matrix of samples n0 .. n0+nb-1: col (c r r, nb oh ow), row
 * (ci, ki, kj), column (b, y, x).  Rows are independent, so threads split
 * them. */
static void sd_im2col(float *col, const float *x, const struct sd_conv2d_shape *s,
                      int n0, int nb)
{
	const int rr = s->r * s->r, rows = s->c * rr;
	const size_t ohw = (size_t)s->oh * s->ow, hw = (size_t)s->h * s->w;
	const size_t ld = (size_t)nb * ohw;

	#pragma omp parallel for schedule(static) if ((size_t)rows * ld >= SD_OMP_MIN)
	for (int row = 0; row < rows; row++) {
		int ci = row / rr, ki = (row % rr) / s->r, kj = row % s->r;
		for (int b = 0; b < nb; b++)
			sd_im2col_plane(col + row * ld + b * ohw,
			                x + ((size_t)(n0 + b) * s->c + ci) * hw, s, ki, kj);
	}
}

/* Adds the column-matrix gradient back onto the input planes of samples
 * n0 .. n0+nb-1 (the adjoint of sd_im2col), overwriting dx there.  Each
 * thread owns whole (sample, channel) planes and adds the r*r contributions
 * in kernel order, so the sums are reproducible. */
static void sd_col2im(float *dx, const float *dcol, const struct sd_conv2d_shape *s,
                      int n0, int nb)
{
	const int r = s->r, rr = r * r, h = s->h, w = s->w;
	const int oh = s->oh, ow = s->ow, st = s->stride, pad = s->pad;
	const size_t ohw = (size_t)oh * ow, hw = (size_t)h * w;
	const size_t ld = (size_t)nb * ohw;
	const int planes = nb * s->c;

	#pragma omp parallel for schedule(static) if ((size_t)planes * hw * rr >= SD_OMP_MIN)
	for (int pl = 0; pl < planes; pl++) {
		int b = pl / s->c, ci = pl % s->c;
		float *restrict dp = dx + ((size_t)(n0 + b) * s->c + ci) * hw;
		memset(dp, 0, sizeof(float) * hw);
		for (int ki = 0; ki < r; ki++)
			for (int kj = 0; kj < r; kj++) {
				const float *restrict src = dcol + (size_t)(ci * rr + ki * r + kj) * ld + b * ohw;
				int lo = pad - kj > 0 ? (pad - kj + st - 1) / st : 0;
				int hi = w + pad - kj > 0 ? (w + pad - kj + st - 1) / st : 0;
				if (hi > ow)
					hi = ow;
				if (lo > hi)
					lo = hi;
				for (int y = 0; y < oh; y++) {
					int iy = y * st + ki - pad;
					if (iy < 0 || iy >= h)
						continue;
					float *restrict drow = dp + (size_t)iy * w;
					const float *restrict srow = src + (size_t)y * ow;
					const int off = kj - pad;
					if (st == 1) {
						#pragma omp simd
						for (int x = lo; x < hi; x++)
							drow[x + off] += srow[x];
					} else {
						#pragma omp simd
						for (int x = lo; x < hi; x++)
							drow[x * st + off] += srow[x];
					}
				}
			}
	}
}

/* True when the column matrix of one sample is the sample itself (1x1
 * kernel, stride 1, no padding), so im2col can be skipped. */
static int sd_conv2d_is_pointwise(const struct sd_conv2d_shape *s)
{
	return s->r == 1 && s->stride == 1 && s->pad == 0;
}

void sd_conv2d_forward(float *y, const float *x, const float *w, const float *b,
                       const struct sd_conv2d_shape *s, float *ws)
{
	const int crr = s->c * s->r * s->r, kk = s->k;
	const size_t ohw = (size_t)s->oh * s->ow, hw = (size_t)s->h * s->w;
	const int chunk = sd_conv2d_chunk(s);
	float *col = ws;
	float *out = ws + (size_t)crr * chunk * ohw;

	for (int n0 = 0; n0 < s->n; n0 += chunk) {
		int nb = s->n - n0 < chunk ? s->n - n0 : chunk;
		const size_t ld = (size_t)nb * ohw;
		const float *cm = col;
		if (nb == 1 && sd_conv2d_is_pointwise(s))
			cm = x + (size_t)n0 * s->c * hw;
		else
			sd_im2col(col, x, s, n0, nb);
		if (nb == 1) {
			/* One sample: the GEMM result already is the NCHW
			 * output, so write it in place. */
			float *yn = y + (size_t)n0 * kk * ohw;
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kk, (int)ld, crr,
			            1.0f, w, crr, cm, (int)ld, 0.0f, yn, (int)ld);
			if (b) {
				#pragma omp parallel for schedule(static) if ((size_t)kk * ohw >= SD_OMP_MIN)
				for (int k = 0; k < kk; k++) {
					float *yk = yn + (size_t)k * ohw;
					float bk = b[k];
					#pragma omp simd
					for (size_t p = 0; p < ohw; p++)
						yk[p] += bk;
				}
			}
			continue;
		}
		/* out (k, nb oh ow) = w (k, c r r) . col (c r r, nb oh ow) */
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kk, (int)ld, crr,
		            1.0f, w, crr, cm, (int)ld, 0.0f, out, (int)ld);
		/* Reorder (k, b, p) -> (b, k, p) and add the bias on the way. */
		const int rows = nb * kk;
		#pragma omp parallel for schedule(static) if ((size_t)rows * ohw >= SD_OMP_MIN)
		for (int row = 0; row < rows; row++) {
			int bi = row / kk, k = row % kk;
			const float *restrict src = out + (size_t)k * ld + (size_t)bi * ohw;
			float *restrict dst = y + ((size_t)(n0 + bi) * kk + k) * ohw;
			float bk = b ? b[k] : 0.0f;
			#pragma omp simd
			for (size_t p = 0; p < ohw; p++)
				dst[p] = src[p] + bk;
		}
	}
}

void sd_conv2d_backward(float *dx, float *dw, float *db, const float *dy,
                        const float *x, const float *w,
                        const struct sd_conv2d_shape *s, float *ws)
{
	const int crr = s->c * s->r * s->r, kk = s->k;
	const size_t ohw = (size_t)s->oh * s->ow, hw = (size_t)s->h * s->w;
	const int chunk = sd_conv2d_chunk(s);
	float *col = ws;
	float *dyr = ws + (size_t)crr * chunk * ohw;

	if (db) {
		/* One thread per output channel, samples in order. */
		#pragma omp parallel for schedule(static) if ((size_t)s->n * kk * ohw >= SD_OMP_MIN)
		for (int k = 0; k < kk; k++) {
			double acc = 0.0;
			for (int i = 0; i < s->n; i++)
				acc += sd_sum_f64(dy + ((size_t)i * kk + k) * ohw, ohw);
			db[k] += (float)acc;
		}
	}

	for (int n0 = 0; n0 < s->n; n0 += chunk) {
		int nb = s->n - n0 < chunk ? s->n - n0 : chunk;
		const size_t ld = (size_t)nb * ohw;
		const int pointwise = nb == 1 && sd_conv2d_is_pointwise(s);
		const float *cm = col;
		const float *g = dyr;
		if (pointwise)
			cm = x + (size_t)n0 * s->c * hw;
		else
			sd_im2col(col, x, s, n0, nb);
		if (nb == 1) {
			g = dy + (size_t)n0 * kk * ohw;
		} else {
			/* Reorder (b, k, p) -> (k, b, p) so one GEMM covers the
			 * whole chunk. */
			const int rows = nb * kk;
			#pragma omp parallel for schedule(static) if ((size_t)rows * ohw >= SD_OMP_MIN)
			for (int row = 0; row < rows; row++) {
				int k = row / nb, bi = row % nb;
				memcpy(dyr + (size_t)k * ld + (size_t)bi * ohw,
				       dy + ((size_t)(n0 + bi) * kk + k) * ohw, sizeof(float) * ohw);
			}
		}
		/* dw (k, c r r) += g (k, nb oh ow) . col^T (nb oh ow, c r r) */
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, kk, crr, (int)ld,
		            1.0f, g, (int)ld, cm, (int)ld, 1.0f, dw, crr);
		if (!dx)
			continue;
		if (pointwise) {
			/* The column gradient is dx itself. */
			cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, crr, (int)ld, kk,
			            1.0f, w, crr, g, (int)ld, 0.0f,
			            dx + (size_t)n0 * s->c * hw, (int)ld);
			continue;
		}
		/* dcol (c r r, nb oh ow) = w^T (c r r, k) . g (k, nb oh ow); the
		 * column matrix is no longer needed, so it takes its place. */
		cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, crr, (int)ld, kk,
		            1.0f, w, crr, g, (int)ld, 0.0f, col, (int)ld);
		sd_col2im(dx, col, s, n0, nb);
	}
}

/* ------------------------------------------------------------ batch norm */

void sd_batchnorm_forward_train(float *y, float *mean, float *invstd,
                                float *running_mean, float *running_var,
                                const float *x, const float *gamma, const float *beta,
                                int n, int c, int hw, float momentum, float eps)
{
	const size_t m = (size_t)n * hw;
	/* Each channel is one thread's job from start to end: its statistics are
	 * summed in sample order and never combined across threads. */
	#pragma omp parallel for schedule(static) if (m * c >= SD_OMP_MIN)
	for (int ch = 0; ch < c; ch++) {
		double s = 0.0;
		for (int i = 0; i < n; i++)
			s += sd_sum_f64(x + ((size_t)i * c + ch) * hw, hw);
		double mu = s / (double)m;
		/* Two passes (mean, then squared deviations) avoid the
		 * cancellation of E[x^2] - E[x]^2. */
		double ss = 0.0;
		for (int i = 0; i < n; i++)
			ss += sd_sumsq_centered_f64(x + ((size_t)i * c + ch) * hw, hw, mu);
		double var = ss / (double)m;
		double is = 1.0 / sqrt(var + (double)eps);
		mean[ch] = (float)mu;
		invstd[ch] = (float)is;
		double unbiased = m > 1 ? ss / (double)(m - 1) : var;
		running_mean[ch] = (1.0f - momentum) * running_mean[ch] + momentum * (float)mu;
		running_var[ch] = (1.0f - momentum) * running_var[ch] + momentum * (float)unbiased;

		const float fm = (float)mu, scale = (float)is * gamma[ch], shift = beta[ch];
		for (int i = 0; i < n; i++) {
			const float *restrict xp = x + ((size_t)i * c + ch) * hw;
			float *restrict yp = y + ((size_t)i * c + ch) * hw;
			#pragma omp simd
			for (int p = 0; p < hw; p++)
				yp[p] = (xp[p] - fm) * scale + shift;
		}
	}
}

void sd_batchnorm_forward_eval(float *y, const float *x, const float *gamma,
                               const float *beta, const float *running_mean,
                               const float *running_var, int n, int c, int hw, float eps)
{
	const int planes = n * c;
	#pragma omp parallel for schedule(static) if ((size_t)planes * hw >= SD_OMP_MIN)
	for (int pl = 0; pl < planes; pl++) {
		int ch = pl % c;
		const float fm = running_mean[ch];
		const float scale = (float)(gamma[ch] / sqrt((double)running_var[ch] + eps));
		const float shift = beta[ch];
		const float *restrict xp = x + (size_t)pl * hw;
		float *restrict yp = y + (size_t)pl * hw;
		#pragma omp simd
		for (int p = 0; p < hw; p++)
			yp[p] = (xp[p] - fm) * scale + shift;
	}
}

void sd_batchnorm_backward(float *dx, float *dgamma, float *dbeta, const float *dy,
                           const float *x, const float *mean, const float *invstd,
                           const float *gamma, int n, int c, int hw)
{
	const size_t m = (size_t)n * hw;
	/* With xhat = (x - mean) invstd the gradient is
	 *   dx = gamma invstd (dy - mean(dy) - xhat mean(dy xhat)),
	 * dgamma = sum(dy xhat), dbeta = sum(dy) (Ioffe & Szegedy 2015, sec. 3). */
	#pragma omp parallel for schedule(static) if (m * c >= SD_OMP_MIN)
	for (int ch = 0; ch < c; ch++) {
		const double mu = mean[ch], is = invstd[ch];
		double sdy = 0.0, sdyx = 0.0;
		for (int i = 0; i < n; i++) {
			size_t off = ((size_t)i * c + ch) * hw;
			sdy += sd_sum_f64(dy + off, hw);
			sdyx += sd_dot_centered_f64(dy + off, x + off, hw, mu);
		}
		sdyx *= is; /* sum(dy xhat) */
		dbeta[ch] += (float)sdy;
		dgamma[ch] += (float)sdyx;
		if (!dx)
			continue;
		const float k1 = (float)(gamma[ch] * is);
		const float mdy = (float)(sdy / (double)m);
		const float mdyx = (float)(sdyx / (double)m);
		const float fm = (float)mu, fis = (float)is;
		for (int i = 0; i < n; i++) {
			size_t off = ((size_t)i * c + ch) * hw;
			const float *restrict dyp = dy + off;
			const float *restrict xp = x + off;
			float *restrict dxp = dx + off;
			#pragma omp simd
			for (int p = 0; p < hw; p++) {
				float xh = (xp[p] - fm) * fis;
				dxp[p] = k1 * (dyp[p] - mdy - xh * mdyx);
			}
		}
	}
}

/* ------------------------------------------------------------------ relu */

void sd_relu_forward(float *y, const float *x, size_t count)
{
	/* No restrict: y may alias x. */
	#pragma omp parallel for simd schedule(static) if (count >= SD_OMP_MIN)
	for (size_t i = 0; i < count; i++) {
		float v = x[i];
		y[i] = v > 0.0f ? v : 0.0f;
	}
}

void sd_relu_backward(float *dx, const float *dy, const float *y, size_t count)
{
	/* Both loads are unconditional so the select vectorises; a branch
	 * on the sign of y would mispredict half the time. */
	#pragma omp parallel for simd schedule(static) if (count >= SD_OMP_MIN)
	for (size_t i = 0; i < count; i++) {
		float g = dy[i];
		dx[i] = y[i] > 0.0f ? g : 0.0f;
	}
}

/* --------------------------------------------------------------- pooling */

void sd_maxpool_forward(float *y, int32_t *argmax, const float *x,
                        int n, int c, int h, int w, int k, int s)
{
	const int oh = (h - k) / s + 1, ow = (w - k) / s + 1;
	const size_t hw = (size_t)h * w, ohw = (size_t)oh * ow;
	const int planes = n * c;
	#pragma omp parallel for schedule(static) if ((size_t)planes * hw >= SD_OMP_MIN)
	for (int pl = 0; pl < planes; pl++) {
		const float *xp = x + (size_t)pl * hw;
		float *yp = y + (size_t)pl * ohw;
		int32_t *ap = argmax + (size_t)pl * ohw;
		for (int oy = 0; oy < oh; oy++) {
			float *restrict yr = yp + (size_t)oy * ow;
			int32_t *restrict ar = ap + (size_t)oy * ow;
			const int base = oy * s * w;
			#pragma omp simd
			for (int ox = 0; ox < ow; ox++) {
				yr[ox] = xp[base + ox * s];
				ar[ox] = base + ox * s;
			}
			/* Window positions in row-major order, a whole output row
			 * at a time so the compare-and-select vectorises; the
			 * strict comparison keeps the first maximum on ties. */
			for (int i = 0; i < k; i++)
				for (int j = 0; j < k; j++) {
					if (i == 0 && j == 0)
						continue;
					const int off = (oy * s + i) * w + j;
					const float *restrict xr = xp + off;
					#pragma omp simd
					for (int ox = 0; ox < ow; ox++) {
						float v = xr[ox * s], cur = yr[ox];
						int gt = v > cur;
						yr[ox] = gt ? v : cur;
						ar[ox] = gt ? off + ox * s : ar[ox];
					}
				}
		}
	}
}

void sd_maxpool_backward(float *dx, const float *dy, const int32_t *argmax,
                         int n, int c, int h, int w, int k, int s)
{
	const int oh = (h - k) / s + 1, ow = (w - k) / s + 1;
	const size_t hw = (size_t)h * w, ohw = (size_t)oh * ow;
	const int planes = n * c;
	/* One thread per plane: overlapping windows (k > s) add into the same
	 * input element in output order. */
	#pragma omp parallel for schedule(static) if ((size_t)planes * hw >= SD_OMP_MIN)
	for (int pl = 0; pl < planes; pl++) {
		float *dp = dx + (size_t)pl * hw;
		const float *gp = dy + (size_t)pl * ohw;
		const int32_t *ap = argmax + (size_t)pl * ohw;
		memset(dp, 0, sizeof(float) * hw);
		for (size_t o = 0; o < ohw; o++)
			dp[ap[o]] += gp[o];
	}
}

void sd_avgpool_forward(float *y, const float *x, int n, int c, int h, int w, int k, int s)
{
	const int oh = (h - k) / s + 1, ow = (w - k) / s + 1;
	const size_t hw = (size_t)h * w, ohw = (size_t)oh * ow;
	const int planes = n * c;
	const double inv = 1.0 / ((double)k * k);
	#pragma omp parallel for schedule(static) if ((size_t)planes * hw >= SD_OMP_MIN)
	for (int pl = 0; pl < planes; pl++) {
		const float *xp = x + (size_t)pl * hw;
		float *yp = y + (size_t)pl * ohw;
		for (int oy = 0; oy < oh; oy++)
			for (int ox = 0; ox < ow; ox++) {
				/* Double keeps global pooling over large planes exact
				 * to float precision. */
				double acc = 0.0;
				for (int i = 0; i < k; i++) {
					const float *row = xp + (size_t)(oy * s + i) * w + ox * s;
					for (int j = 0; j < k; j++)
						acc += row[j];
				}
				yp[oy * ow + ox] = (float)(acc * inv);
			}
	}
}

void sd_avgpool_backward(float *dx, const float *dy, int n, int c, int h, int w, int k, int s)
{
	const int oh = (h - k) / s + 1, ow = (w - k) / s + 1;
	const size_t hw = (size_t)h * w, ohw = (size_t)oh * ow;
	const int planes = n * c;
	const float inv = (float)(1.0 / ((double)k * k));
	#pragma omp parallel for schedule(static) if ((size_t)planes * hw >= SD_OMP_MIN)
	for (int pl = 0; pl < planes; pl++) {
		float *dp = dx + (size_t)pl * hw;
		const float *gp = dy + (size_t)pl * ohw;
		memset(dp, 0, sizeof(float) * hw);
		for (int oy = 0; oy < oh; oy++)
			for (int ox = 0; ox < ow; ox++) {
				float g = gp[oy * ow + ox] * inv;
				for (int i = 0; i < k; i++) {
					float *row = dp + (size_t)(oy * s + i) * w + ox * s;
					for (int j = 0; j < k; j++)
						row[j] += g;
				}
			}
	}
}

/* -------------------------------------------------------- softmax + xent */

double sd_softmax_xent_forward(float *probs, int *correct, const float *logits,
                               const uint8_t *labels, int n, int classes)
{
	double loss = 0.0;
	int hits = 0;
	/* Rows in order: the loss is a sequential double sum, so it is the same
	 * whatever the thread count (n is a batch, the work is tiny). */
	for (int i = 0; i < n; i++) {
		const float *l = logits + (size_t)i * classes;
		float *p = probs + (size_t)i * classes;
		int arg = 0;
		float mx = l[0];
		for (int j = 1; j < classes; j++)
			if (l[j] > mx) {
				mx = l[j];
				arg = j;
			}
		/* Subtracting the maximum keeps exp() <= 1 (no overflow) and the
		 * sum >= 1 (no log of zero). */
		double sum = 0.0;
		for (int j = 0; j < classes; j++)
			sum += exp((double)l[j] - mx);
		double inv = 1.0 / sum;
		for (int j = 0; j < classes; j++)
			p[j] = (float)(exp((double)l[j] - mx) * inv);
		int y = labels[i];
		if (y >= classes) {
			/* A label outside the classes is a caller bug; NaN makes
			 * the loss show it instead of reading past the row. */
			loss = NAN;
			continue;
		}
		loss += log(sum) - ((double)l[y] - mx);
		hits += arg == y;
	}
	if (correct)
		*correct = hits;
	return loss;
}

void sd_softmax_xent_backward(float *dlogits, const float *probs, const uint8_t *labels,
                              int n, int classes, float scale)
{
	for (int i = 0; i < n; i++) {
		const float *p = probs + (size_t)i * classes;
		float *d = dlogits + (size_t)i * classes;
		for (int j = 0; j < classes; j++)
			d[j] = p[j] * scale;
		if (labels[i] < classes)
			d[labels[i]] = (p[labels[i]] - 1.0f) * scale;
	}
}
