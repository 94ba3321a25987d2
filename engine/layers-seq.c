/* engine/layers-seq.c - CPU kernels of decoder-only transformers (see
 * layers-seq.h).
 *
 * Threads follow engine/layers.c: plain loops split their rows (or, for
 * parameter gradients, their channels) over OpenMP threads once the work
 * reaches SD_LAYERS_OMP_MIN elements, each output element computed by one
 * thread in a fixed order.  Kernels that call cblas_sgemm per matrix of a
 * batch (matmul, attention) run whole matrices on OpenMP threads with
 * OpenBLAS set to one thread for the call: on the 2-core machines this
 * engine targets the two thread pools otherwise fight over the cores (see
 * "Threads" in engine/layers.c).
 *
 * Sums that feed a normalisation (layer-norm statistics, softmax
 * denominators, the cross-entropy's log-sum-exp) are taken in double, in
 * eight fixed lanes that the compiler vectorises, so they are accurate to
 * float rounding of the result and independent of the thread count.
 */
#include "engine/layers-seq.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "engine/blas.h"
#include "engine/layers.h"

/* The loops over sd_exp (softmax, GELU, cross-entropy) clamp and select
 * with float comparisons; under GCC's default -ftrapping-math those may
 * not be turned into vector blends (an ordered comparison of a NaN raises
 * an exception flag), and the loops stay scalar.  Nothing here reads the
 * exception flags, and the values are the same either way.
 * fp-contract=off: no fused multiply-adds, so that every float operation
 * rounds as written, in the AVX-512 twins below as in the baseline code
 * (and in a vectorised loop as in its scalar tail): the same bits on every
 * x86-64 machine for the same inputs. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("no-trapping-math", "fp-contract=off")
#endif

/* The row kernels (layer norm, softmax, GELU, cross-entropy) are plain C
 * that the compiler vectorises.  The build targets baseline x86-64 (4-wide
 * SSE2), so on x86-64 each row kernel is compiled twice from one body: as
 * is, and as an AVX-512 twin (16 floats wide), chosen per call where the
 * CPU has AVX-512F, unless SD_LAYERS_NO_AVX512 is set in the environment
 * (as for engine/layers.c).  The twins do the same operations in the same
 * order (explicit lanes for every sum, no fused multiply-adds), so they give
 * the same bits; tests/engine/test-layers-seq checks that they do. */
#define SD_SEQ_BODY static inline __attribute__((always_inline))
#if defined(__x86_64__) && defined(__GNUC__)
#define SD_SEQ_AVX512 __attribute__((target("avx512f")))
/* Defines NAME (baseline) and NAME_avx512 from NAME_body. */
#define SD_SEQ_TWINS_VOID(name, params, args) \
	static void name params { name##_body args; } \
	SD_SEQ_AVX512 static void name##_avx512 params { name##_body args; }
#define SD_SEQ_TWINS(type, name, params, args) \
	static type name params { return name##_body args; } \
	SD_SEQ_AVX512 static type name##_avx512 params { return name##_body args; }
#define SD_SEQ_CALL(avx, name, ...) ((avx) ? name##_avx512(__VA_ARGS__) : name(__VA_ARGS__))

static int sd_seq_avx512(void)
{
	return __builtin_cpu_supports("avx512f") && !getenv("SD_LAYERS_NO_AVX512");
}
#else
#define SD_SEQ_TWINS_VOID(name, params, args) \
	static void name params { name##_body args; }
#define SD_SEQ_TWINS(type, name, params, args) \
	static type name params { return name##_body args; }
#define SD_SEQ_CALL(avx, name, ...) ((void)(avx), name(__VA_ARGS__))

static int sd_seq_avx512(void)
{
	return 0;
}
#endif

static int sd_seq_par(size_t work)
{
	return work >= SD_LAYERS_OMP_MIN;
}

/* Combines eight lane sums in a fixed order. */
SD_SEQ_BODY double sd_lanes8(const double acc[8], double tail)
{
	return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) +
	       tail;
}

/* Sum of x[0 .. len) in double, eight lanes. */
SD_SEQ_BODY double sd_seq_sum(const float *x, int len)
{
	double acc[8] = { 0 };
	int i = 0;
	for (; i + 8 <= len; i += 8)
		for (int j = 0; j < 8; j++)
			acc[j] += x[i + j];
	double tail = 0.0;
	for (; i < len; i++)
		tail += x[i];
	return sd_lanes8(acc, tail);
}

/* Sum of a[i] * b[i] in double, eight lanes. */
SD_SEQ_BODY double sd_seq_dot(const float *a, const float *b, int len)
{
	double acc[8] = { 0 };
	int i = 0;
	for (; i + 8 <= len; i += 8)
		for (int j = 0; j < 8; j++)
			acc[j] += (double)a[i + j] * b[i + j];
	double tail = 0.0;
	for (; i < len; i++)
		tail += (double)a[i] * b[i];
	return sd_lanes8(acc, tail);
}

/* Largest of x[0 .. len), len >= 1. */
SD_SEQ_BODY float sd_seq_max(const float *x, int len)
{
	float m = x[0];
	for (int i = 1; i < len; i++)
		m = x[i] > m ? x[i] : m;
	return m;
}

/* exp(x) in float without a call into libm, so that loops over it
 * vectorise (glibc's expf is a scalar call; its vector twins are only
 * declared under -ffast-math).  Cephes's expf (S. Moshier, cephes/single/
 * expf.c): x = n ln 2 + r with n = round(x / ln 2) and ln 2 split in two
 * constants (Cody & Waite) so r is exact, then a degree-6 polynomial for
 * exp(r) on |r| <= ln2 / 2 and 2^n from the exponent bits; about 1 ulp from
 * the true value (tests/engine/test-layers-seq checks the kernels that use
 * it against double).  Rounding uses the 1.5 * 2^23 trick, exact for
 * |x / ln 2| < 2^22.  x < -87.3 gives 0 (exp(-87.3) = 1.2e-38, the edge of
 * the normal floats), x > 88.3 gives exp(88.3) (no caller reaches it:
 * every argument here is <= 0), NaN gives NaN. */
SD_SEQ_BODY float sd_exp(float x)
{
	float xc = x > 88.3f ? 88.3f : (x < -87.3f ? -87.3f : x);
	float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
	float r = xc - n * 0.693359375f - n * -2.12194440e-4f;
	float p = 1.9875691500e-4f;
	p = p * r + 1.3981999507e-3f;
	p = p * r + 8.3334519073e-3f;
	p = p * r + 4.1665795894e-2f;
	p = p * r + 1.6666665459e-1f;
	p = p * r + 5.0000001201e-1f;
	p = p * r * r + r + 1.0f;
	union { int32_t i; float f; } e = { .i = ((int32_t)n + 127) << 23 };
	float y = p * e.f;
	y = x < -87.3f ? 0.0f : y;
	return x != x ? x : y;
}

/* The standard normal CDF Phi(x) = (1 + erf(x / sqrt 2)) / 2 through
 * erfc(z) = (a1 t + ... + a5 t^5) exp(-z^2), t = 1 / (1 + p z), z = |x| /
 * sqrt 2 >= 0 (Abramowitz & Stegun 1964, 7.1.26: |error of erf| <= 1.5e-7,
 * the approximation PyTorch's vectorised erf uses too).  Phi(x) = 1 -
 * erfc(z) / 2 for x >= 0 and erfc(z) / 2 for x < 0: the lower tail never
 * computes 1 + erf(x) with erf near -1, which would cancel.  *pdf (if not
 * NULL) gets phi(x) = exp(-x^2 / 2) / sqrt(2 pi) from the same exp. */
SD_SEQ_BODY float sd_normal_cdf(float x, float *pdf)
{
	float z = (x < 0.0f ? -x : x) * 0.70710678118654752f;
	float t = 1.0f / (1.0f + 0.3275911f * z);
	float poly = 1.061405429f;
	poly = poly * t - 1.453152027f;
	poly = poly * t + 1.421413741f;
	poly = poly * t - 0.284496736f;
	poly = poly * t + 0.254829592f;
	poly *= t;
	float e = sd_exp(-z * z);
	float half_erfc = 0.5f * poly * e;
	if (pdf)
		*pdf = 0.39894228040143268f * e;
	return x < 0.0f ? half_erfc : 1.0f - half_erfc;
}

/* ------------------------------------------------------------ layer norm */

/* One row of sd_layernorm_forward. */
SD_SEQ_BODY void
sd_layernorm_row_body(float *yr, float *mean, float *rstd, const float *xr, const float *gamma,
                      const float *beta, int c, float eps)
{
	double m = sd_seq_sum(xr, c) / c;
	double acc[8] = { 0 };
	int i = 0;
	for (; i + 8 <= c; i += 8)
		for (int j = 0; j < 8; j++) {
			double dv = xr[i + j] - m;
			acc[j] += dv * dv;
		}
	double tail = 0.0;
	for (; i < c; i++)
		tail += (xr[i] - m) * (xr[i] - m);
	double var = sd_lanes8(acc, tail) / c;
	float rs = (float)(1.0 / sqrt(var + eps));
	float mf = (float)m;
	if (mean)
		*mean = mf;
	if (rstd)
		*rstd = rs;
	if (beta) {
		#pragma omp simd
		for (int j = 0; j < c; j++)
			yr[j] = (xr[j] - mf) * rs * gamma[j] + beta[j];
	} else {
		#pragma omp simd
		for (int j = 0; j < c; j++)
			yr[j] = (xr[j] - mf) * rs * gamma[j];
	}
}
SD_SEQ_TWINS_VOID(sd_layernorm_row,
	(float *yr, float *mean, float *rstd, const float *xr, const float *gamma, const float *beta,
	 int c, float eps),
	(yr, mean, rstd, xr, gamma, beta, c, eps))

void sd_layernorm_forward(float *y, float *mean, float *rstd, const float *x,
                          const float *gamma, const float *beta, int n, int c, float eps)
{
	int avx = sd_seq_avx512();
	#pragma omp parallel for schedule(static) if (sd_seq_par((size_t)n * c))
	for (int r = 0; r < n; r++)
		SD_SEQ_CALL(avx, sd_layernorm_row, y + (size_t)r * c, mean ? mean + r : NULL,
		            rstd ? rstd + r : NULL, x + (size_t)r * c, gamma, beta, c, eps);
}

/* Channels per block of the parameter-gradient pass: each block's sums sit
 * in double on the stack while the rows stream by. */
#define SD_LN_CBLK 64

/* One row of sd_layernorm_backward's dx. */
SD_SEQ_BODY void
sd_layernorm_row_backward_body(float *dxr, const float *dyr, const float *xr, float m, float rs,
                               const float *gamma, int c)
{
	/* sum_c g and sum_c g * xhat, g = dy * gamma. */
	double sg[8] = { 0 }, sgx[8] = { 0 };
	int i = 0;
	for (; i + 8 <= c; i += 8)
		for (int j = 0; j < 8; j++) {
			double g = (double)dyr[i + j] * gamma[i + j];
			sg[j] += g;
			sgx[j] += g * ((xr[i + j] - m) * rs);
		}
	double tg = 0.0, tgx = 0.0;
	for (; i < c; i++) {
		double g = (double)dyr[i] * gamma[i];
		tg += g;
		tgx += g * ((xr[i] - m) * rs);
	}
	float a = (float)(sd_lanes8(sg, tg) / c);
	float bterm = (float)(sd_lanes8(sgx, tgx) / c);
	#pragma omp simd
	for (int j = 0; j < c; j++) {
		float xhat = (xr[j] - m) * rs;
		dxr[j] = rs * (dyr[j] * gamma[j] - a - xhat * bterm);
	}
}
SD_SEQ_TWINS_VOID(sd_layernorm_row_backward,
	(float *dxr, const float *dyr, const float *xr, float m, float rs, const float *gamma, int c),
	(dxr, dyr, xr, m, rs, gamma, c))

/* dgamma, dbeta += over all n rows for channels [c0, c0 + len), len <=
 * SD_LN_CBLK, summed in double in row order. */
SD_SEQ_BODY void
sd_layernorm_params_body(float *dgamma, float *dbeta, const float *dy, const float *x,
                         const float *mean, const float *rstd, int n, int c, int c0, int len)
{
	double ag[SD_LN_CBLK] = { 0 }, ab[SD_LN_CBLK] = { 0 };
	for (int r = 0; r < n; r++) {
		const float *xr = x + (size_t)r * c + c0, *dyr = dy + (size_t)r * c + c0;
		float m = mean[r], rs = rstd[r];
		#pragma omp simd
		for (int j = 0; j < len; j++) {
			ag[j] += (double)dyr[j] * ((xr[j] - m) * rs);
			ab[j] += dyr[j];
		}
	}
	for (int j = 0; j < len; j++) {
		if (dgamma)
			dgamma[c0 + j] += (float)ag[j];
		if (dbeta)
			dbeta[c0 + j] += (float)ab[j];
	}
}
SD_SEQ_TWINS_VOID(sd_layernorm_params,
	(float *dgamma, float *dbeta, const float *dy, const float *x, const float *mean,
	 const float *rstd, int n, int c, int c0, int len),
	(dgamma, dbeta, dy, x, mean, rstd, n, c, c0, len))

void sd_layernorm_backward(float *dx, float *dgamma, float *dbeta, const float *dy,
                           const float *x, const float *mean, const float *rstd,
                           const float *gamma, int n, int c)
{
	int avx = sd_seq_avx512();
	int par = sd_seq_par((size_t)n * c);
	if (dx) {
		#pragma omp parallel for schedule(static) if (par)
		for (int r = 0; r < n; r++)
			SD_SEQ_CALL(avx, sd_layernorm_row_backward, dx + (size_t)r * c, dy + (size_t)r * c,
			            x + (size_t)r * c, mean[r], rstd[r], gamma, c);
	}
	if (!dgamma && !dbeta)
		return;
	int blocks = (c + SD_LN_CBLK - 1) / SD_LN_CBLK;
	#pragma omp parallel for schedule(static) if (par && blocks > 1)
	for (int bk = 0; bk < blocks; bk++) {
		int c0 = bk * SD_LN_CBLK;
		SD_SEQ_CALL(avx, sd_layernorm_params, dgamma, dbeta, dy, x, mean, rstd, n, c, c0,
		                    c - c0 < SD_LN_CBLK ? c - c0 : SD_LN_CBLK);
	}
}

/* --------------------------------------------------- softmax, last axis */

/* One row: y = softmax(x); y may equal x. */
SD_SEQ_BODY void
sd_softmax_row_body(float *y, const float *x, int len)
{
	float m = sd_seq_max(x, len);
	#pragma omp simd
	for (int j = 0; j < len; j++)
		y[j] = sd_exp(x[j] - m);
	float inv = (float)(1.0 / sd_seq_sum(y, len));
	#pragma omp simd
	for (int j = 0; j < len; j++)
		y[j] *= inv;
}
SD_SEQ_TWINS_VOID(sd_softmax_row,
	(float *y, const float *x, int len),
	(y, x, len))

void sd_softmax_lastdim_forward(float *y, const float *x, int rows, int len)
{
	int avx = sd_seq_avx512();
	#pragma omp parallel for schedule(static) if (sd_seq_par((size_t)rows * len))
	for (int r = 0; r < rows; r++)
		SD_SEQ_CALL(avx, sd_softmax_row, y + (size_t)r * len, x + (size_t)r * len, len);
}

/* One row of the softmax backward, times scale: dx = y (dy - sum(dy y))
 * scale; dx may equal dy. */
SD_SEQ_BODY void
sd_softmax_row_backward_body(float *dxr, const float *dyr, const float *yr, int len, float scale)
{
	float s = (float)sd_seq_dot(dyr, yr, len);
	#pragma omp simd
	for (int j = 0; j < len; j++)
		dxr[j] = yr[j] * (dyr[j] - s) * scale;
}
SD_SEQ_TWINS_VOID(sd_softmax_row_backward,
	(float *dxr, const float *dyr, const float *yr, int len, float scale),
	(dxr, dyr, yr, len, scale))

void sd_softmax_lastdim_backward(float *dx, const float *dy, const float *y, int rows, int len)
{
	int avx = sd_seq_avx512();
	#pragma omp parallel for schedule(static) if (sd_seq_par((size_t)rows * len))
	for (int r = 0; r < rows; r++)
		SD_SEQ_CALL(avx, sd_softmax_row_backward, dx + (size_t)r * len, dy + (size_t)r * len,
		            y + (size_t)r * len, len, 1.0f);
}

/* ------------------------------------------------------------------ GELU */

/* sqrt(2 / pi) and the cubic coefficient of GPT-2's
 * approximation (Hendrycks & Gimpel 2016, section 2). */
#define SD_SQRT_2_OVER_PI 0.7978845608028654f
#define SD_GELU_CUBIC 0.044715f

/* The tanh form through the logistic function: with u = sqrt(2/pi) (x +
 * 0.044715 x^3) and s = 1 / (1 + exp(-2u)),
 *   (1 + tanh u) / 2 = s,   (1 - tanh^2 u) / 2 = 2 s (1 - s),
 * so y = x s and dy/dx = s + 2 x s (1 - s) du/dx.  1 - s is computed as
 * exp(-2u) s, never as a difference: for u < -4 the textbook 1 - t * t
 * loses most of its digits to float rounding of t near -1 (an absolute
 * error of ~2e-6 in the gradient, measured against double, where this
 * form gives ~1e-7).  2u is clamped to +-80 so exp stays finite (s is
 * then 0 or 1 to float precision).  Returns s; *one_minus (if not NULL)
 * gets 1 - s. */
SD_SEQ_BODY float sd_gelu_tanh_sigmoid(float x, float *one_minus)
{
	float u2 = 2.0f * SD_SQRT_2_OVER_PI * (x + SD_GELU_CUBIC * x * x * x);
	u2 = u2 > 80.0f ? 80.0f : (u2 < -80.0f ? -80.0f : u2);
	float e = sd_exp(-u2);
	float s = 1.0f / (1.0f + e);
	if (one_minus)
		*one_minus = e * s;
	return s;
}

/* GELU over one block of elements (forward: dy NULL, writes y = gelu(x);
 * backward: writes y = dy * gelu'(x)); y may equal x or dy. */
SD_SEQ_BODY void
sd_gelu_block_body(float *y, const float *dy, const float *x, size_t count, enum sd_gelu_kind kind)
{
	if (kind == SD_GELU_TANH && !dy) {
		#pragma omp simd
		for (size_t i = 0; i < count; i++)
			y[i] = x[i] * sd_gelu_tanh_sigmoid(x[i], NULL);
	} else if (kind == SD_GELU_TANH) {
		#pragma omp simd
		for (size_t i = 0; i < count; i++) {
			float v = x[i], sc;
			float s = sd_gelu_tanh_sigmoid(v, &sc);
			float du = SD_SQRT_2_OVER_PI * (1.0f + 3.0f * SD_GELU_CUBIC * v * v);
			y[i] = dy[i] * (s + 2.0f * v * s * sc * du);
		}
	} else if (!dy) {
		#pragma omp simd
		for (size_t i = 0; i < count; i++)
			y[i] = x[i] * sd_normal_cdf(x[i], NULL);
	} else {
		#pragma omp simd
		for (size_t i = 0; i < count; i++) {
			float pdf;
			float cdf = sd_normal_cdf(x[i], &pdf);
			y[i] = dy[i] * (cdf + x[i] * pdf);
		}
	}
}
SD_SEQ_TWINS_VOID(sd_gelu_block,
	(float *y, const float *dy, const float *x, size_t count, enum sd_gelu_kind kind),
	(y, dy, x, count, kind))

/* Elements per block of the GELU loops. */
#define SD_GELU_BLOCK 4096

static void sd_gelu_run(float *y, const float *dy, const float *x, size_t count,
                        enum sd_gelu_kind kind)
{
	int avx = sd_seq_avx512();
	size_t blocks = (count + SD_GELU_BLOCK - 1) / SD_GELU_BLOCK;
	#pragma omp parallel for schedule(static) if (sd_seq_par(count) && blocks > 1)
	for (size_t bk = 0; bk < blocks; bk++) {
		size_t i0 = bk * SD_GELU_BLOCK;
		size_t len = count - i0 < SD_GELU_BLOCK ? count - i0 : SD_GELU_BLOCK;
		SD_SEQ_CALL(avx, sd_gelu_block, y + i0, dy ? dy + i0 : NULL, x + i0, len, kind);
	}
}

void sd_gelu_forward(float *y, const float *x, size_t count, enum sd_gelu_kind kind)
{
	sd_gelu_run(y, NULL, x, count, kind);
}

void sd_gelu_backward(float *dx, const float *dy, const float *x, size_t count,
                      enum sd_gelu_kind kind)
{
	sd_gelu_run(dx, dy, x, count, kind);
}

/* ------------------------------------------------------------- embedding */

int sd_embedding_forward(float *out, const int32_t *ids, const float *table, int n, int c,
                         int vocab)
{
	int bad = 0;
	#pragma omp parallel for schedule(static) if (sd_seq_par((size_t)n * c)) reduction(|:bad)
	for (int i = 0; i < n; i++) {
		float *o = out + (size_t)i * c;
		if (ids[i] < 0 || ids[i] >= vocab) {
			memset(o, 0, (size_t)c * sizeof(float));
			bad = 1;
		} else {
			memcpy(o, table + (size_t)ids[i] * c, (size_t)c * sizeof(float));
		}
	}
	return bad ? -1 : 0;
}

void sd_embedding_backward(float *dtable, const float *dout, const int32_t *ids, int n, int c,
                           int vocab)
{
	/* Channel blocks of 16 floats (one cache line): each thread walks every
	 * id in order for its own channels. */
	int blocks = (c + 15) / 16;
	#pragma omp parallel for schedule(static) if (sd_seq_par((size_t)n * c) && blocks > 1)
	for (int bk = 0; bk < blocks; bk++) {
		int c0 = bk * 16, len = c - c0 < 16 ? c - c0 : 16;
		for (int i = 0; i < n; i++) {
			if (ids[i] < 0 || ids[i] >= vocab)
				continue;
			float *d = dtable + (size_t)ids[i] * c + c0;
			const float *s = dout + (size_t)i * c + c0;
			#pragma omp simd
			for (int j = 0; j < len; j++)
				d[j] += s[j];
		}
	}
}

/* ---------------------------------------------------- batched matmul */

/* C (m, n) = alpha op(A) op(B) + beta C, row-major, A given as stored with
 * leading dimension lda (and B likewise). */
static void sd_sgemm(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                     const float *b, int ldb, float beta, float *c, int ldc)
{
	cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
	            m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

/* Whether a batch of `batch` GEMMs of `work` multiply-adds each runs its
 * matrices on OpenMP threads (else one at a time, OpenBLAS threading each). */
static int sd_batch_par(int threads, int batch, size_t work)
{
	return threads > 1 && batch > 1 && (size_t)batch * work >= SD_LAYERS_OMP_MIN;
}

void sd_matmul_batched_forward(float *y, const float *a, const float *b, int batch, int m,
                               int k, int n, int trans_a, int trans_b)
{
	struct sd_blas_team tm;
	int lda = trans_a ? m : k, ldb = trans_b ? k : n;
	size_t sa = (size_t)m * k, sb = (size_t)k * n, sy = (size_t)m * n;
	int par = sd_batch_par(omp_get_max_threads(), batch, sa * n);
	if (par)
		sd_blas_team_begin(&tm);
	#pragma omp parallel for schedule(static) if (par)
	for (int i = 0; i < batch; i++)
		sd_sgemm(trans_a, trans_b, m, n, k, 1.0f, a + i * sa, lda, b + i * sb, ldb, 0.0f,
		         y + i * sy, n);
	if (par)
		sd_blas_team_end(&tm);
}

void sd_matmul_batched_backward(float *da, float *db, const float *dy, const float *a,
                                const float *b, int batch, int m, int k, int n, int trans_a,
                                int trans_b, int accumulate)
{
	struct sd_blas_team tm;
	float beta = accumulate ? 1.0f : 0.0f;
	int lda = trans_a ? m : k, ldb = trans_b ? k : n;
	size_t sa = (size_t)m * k, sb = (size_t)k * n, sy = (size_t)m * n;
	int par = sd_batch_par(omp_get_max_threads(), batch, sa * n);
	if (par)
		sd_blas_team_begin(&tm);
	#pragma omp parallel for schedule(static) if (par)
	for (int i = 0; i < batch; i++) {
		const float *ai = a + i * sa, *bi = b + i * sb, *dyi = dy + i * sy;
		if (da) {
			if (!trans_a) /* dA (m, k) = dY op(B)^T */
				sd_sgemm(0, !trans_b, m, k, n, 1.0f, dyi, n, bi, ldb, beta,
				         da + i * sa, k);
			else /* dA (k, m) = op(B) dY^T */
				sd_sgemm(trans_b, 1, k, m, n, 1.0f, bi, ldb, dyi, n, beta,
				         da + i * sa, m);
		}
		if (db) {
			if (!trans_b) /* dB (k, n) = op(A)^T dY */
				sd_sgemm(!trans_a, 0, k, n, m, 1.0f, ai, lda, dyi, n, beta,
				         db + i * sb, n);
			else /* dB (n, k) = dY^T op(A) */
				sd_sgemm(1, trans_a, n, k, m, 1.0f, dyi, n, ai, lda, beta,
				         db + i * sb, k);
		}
	}
	if (par)
		sd_blas_team_end(&tm);
}

/* ------------------------------------------ fused causal self-attention */

/* Rows of queries (and columns of keys) per block of the causal GEMMs:
 * blocks above the diagonal are skipped, which saves a quarter of the
 * work at T = 2 blocks and approaches half for long sequences, at the cost
 * of more, smaller GEMM calls. */
#define SD_ATT_BLOCK 32

void sd_attention_causal_forward(float *y, float *probs, const float *q, const float *k,
                                 const float *v, int b, int h, int t, int d, float scale)
{
	int avx = sd_seq_avx512();
	struct sd_blas_team tm;
	int pairs = b * h;
	size_t std = (size_t)t * d, stt = (size_t)t * t;
	int par = sd_batch_par(omp_get_max_threads(), pairs, stt * d);
	if (par)
		sd_blas_team_begin(&tm);
	#pragma omp parallel for schedule(static) if (par)
	for (int p = 0; p < pairs; p++) {
		float *s = probs + p * stt;
		const float *qp = q + p * std, *kp = k + p * std, *vp = v + p * std;
		float *yp = y + p * std;
		/* Per block of query rows [i0, i1), only keys 0 .. i1 - 1 matter:
		 * scores s = scale q k^T, the causal softmax, y = s v. */
		for (int i0 = 0; i0 < t; i0 += SD_ATT_BLOCK) {
			int i1 = i0 + SD_ATT_BLOCK < t ? i0 + SD_ATT_BLOCK : t;
			float *sb = s + (size_t)i0 * t;
			sd_sgemm(0, 1, i1 - i0, i1, d, scale, qp + (size_t)i0 * d, d, kp, d, 0.0f, sb, t);
			for (int i = i0; i < i1; i++) {
				float *row = s + (size_t)i * t;
				SD_SEQ_CALL(avx, sd_softmax_row, row, row, i + 1);
				memset(row + i + 1, 0, (size_t)(t - i - 1) * sizeof(float));
			}
			sd_sgemm(0, 0, i1 - i0, d, i1, 1.0f, sb, t, vp, d, 0.0f, yp + (size_t)i0 * d, d);
		}
	}
	if (par)
		sd_blas_team_end(&tm);
}

void sd_attention_causal_backward(float *dq, float *dk, float *dv, const float *dy,
                                  const float *q, const float *k, const float *v,
                                  const float *probs, float *ws, int b, int h, int t, int d,
                                  float scale)
{
	int avx = sd_seq_avx512();
	struct sd_blas_team tm;
	int pairs = b * h;
	size_t std = (size_t)t * d, stt = (size_t)t * t;
	int par = sd_batch_par(omp_get_max_threads(), pairs, stt * d);
	if (par)
		sd_blas_team_begin(&tm);
	#pragma omp parallel for schedule(static) if (par)
	for (int p = 0; p < pairs; p++) {
		const float *pp = probs + p * stt, *dyp = dy + p * std;
		const float *qp = q + p * std, *kp = k + p * std, *vp = v + p * std;
		float *ds = ws + p * stt;
		/* Query blocks [i0, i1): dP = dy v^T over keys 0 .. i1 - 1, then
		 * dS = P (dP - rowsum(P dP)) scale in place, then dq = dS k. */
		for (int i0 = 0; i0 < t; i0 += SD_ATT_BLOCK) {
			int i1 = i0 + SD_ATT_BLOCK < t ? i0 + SD_ATT_BLOCK : t;
			float *db = ds + (size_t)i0 * t;
			sd_sgemm(0, 1, i1 - i0, i1, d, 1.0f, dyp + (size_t)i0 * d, d, vp, d, 0.0f, db, t);
			for (int i = i0; i < i1; i++) {
				float *dr = ds + (size_t)i * t;
				SD_SEQ_CALL(avx, sd_softmax_row_backward, dr, dr, pp + (size_t)i * t, i + 1,
				            scale);
				memset(dr + i + 1, 0, (size_t)(t - i - 1) * sizeof(float));
			}
			if (dq)
				sd_sgemm(0, 0, i1 - i0, d, i1, 1.0f, db, t, kp, d, 0.0f,
				         dq + p * std + (size_t)i0 * d, d);
		}
		/* Key blocks [j0, j1): only queries j0 .. t - 1 see them:
		 * dv = P^T dy, dk = dS^T q. */
		for (int j0 = 0; j0 < t; j0 += SD_ATT_BLOCK) {
			int j1 = j0 + SD_ATT_BLOCK < t ? j0 + SD_ATT_BLOCK : t;
			size_t at = (size_t)j0 * t + j0;
			if (dv)
				sd_sgemm(1, 0, j1 - j0, d, t - j0, 1.0f, pp + at, t, dyp + (size_t)j0 * d, d,
				         0.0f, dv + p * std + (size_t)j0 * d, d);
			if (dk)
				sd_sgemm(1, 0, j1 - j0, d, t - j0, 1.0f, ds + at, t, qp + (size_t)j0 * d, d,
				         0.0f, dk + p * std + (size_t)j0 * d, d);
		}
	}
	if (par)
		sd_blas_team_end(&tm);
}

/* ------------------------------------------------ sequence cross-entropy */

/* Rows are summed in this many fixed chunks (whatever the thread count),
 * whose partial sums are then added in order. */
#define SD_XENT_CHUNKS 64

/* One row of the cross-entropy: returns -log softmax(x)[tg] (tg in
 * [0, v)) and writes g = (softmax(x) - onehot(tg)) scale when g is not
 * NULL (g may equal x). */
SD_SEQ_BODY double
sd_xent_row_body(float *g, const float *x, int tg, int v, float scale)
{
	float m = sd_seq_max(x, v);
	float xt = x[tg];
	double sum;
	if (g) {
		#pragma omp simd
		for (int j = 0; j < v; j++)
			g[j] = sd_exp(x[j] - m);
		sum = sd_seq_sum(g, v);
		float f = (float)(scale / sum);
		#pragma omp simd
		for (int j = 0; j < v; j++)
			g[j] *= f;
		g[tg] -= scale;
	} else {
		double acc[8] = { 0 }, tail = 0.0;
		int j = 0;
		for (; j + 8 <= v; j += 8)
			for (int l = 0; l < 8; l++)
				acc[l] += sd_exp(x[j + l] - m);
		for (; j < v; j++)
			tail += sd_exp(x[j] - m);
		sum = sd_lanes8(acc, tail);
	}
	return (double)m + log(sum) - xt;
}
SD_SEQ_TWINS(double, sd_xent_row,
	(float *g, const float *x, int tg, int v, float scale),
	(g, x, tg, v, scale))

double sd_cross_entropy_seq_forward_backward(float *dlogits, const float *logits,
                                             const int32_t *targets, int n, int v, float scale)
{
	int avx = sd_seq_avx512();
	double part[SD_XENT_CHUNKS] = { 0 };
	int bad = 0;
	#pragma omp parallel for schedule(static) if (sd_seq_par((size_t)n * v)) reduction(|:bad)
	for (int ch = 0; ch < SD_XENT_CHUNKS; ch++) {
		int r0 = (int)((long)n * ch / SD_XENT_CHUNKS);
		int r1 = (int)((long)n * (ch + 1) / SD_XENT_CHUNKS);
		double loss = 0.0;
		for (int r = r0; r < r1; r++) {
			float *g = dlogits ? dlogits + (size_t)r * v : NULL;
			int tg = targets[r];
			if (tg >= v) {
				bad = 1;
				tg = -1;
			}
			if (tg < 0) {
				if (g)
					memset(g, 0, (size_t)v * sizeof(float));
				continue;
			}
			loss += SD_SEQ_CALL(avx, sd_xent_row, g, logits + (size_t)r * v, tg, v, scale);
		}
		part[ch] = loss;
	}
	if (bad)
		return NAN;
	double total = 0.0;
	for (int ch = 0; ch < SD_XENT_CHUNKS; ch++)
		total += part[ch];
	return total;
}
