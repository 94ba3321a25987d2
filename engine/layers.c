/* engine/layers.c - CPU reference layers of the training engine (see layers.h).
 *
 * Convolutions are lowered to matrix products (im2col, Chellapilla et al. 2006,
 * "High performance convolutional neural networks for document processing")
 * and handed to OpenBLAS; everything else is plain loops.
 *
 * Threads.  OpenBLAS (the pthreads build Debian ships) keeps its own worker
 * threads, and OpenMP keeps others; on a 2-core machine the two pools fight
 * over the cores: an OpenMP worker spins for milliseconds after each parallel
 * region while the OpenBLAS worker needs that core for the next GEMM, and the
 * step runs 2-8x slower (measured with tests/bench/bench-layers).  So the
 * layers that call BLAS give all cores to OpenMP: for the duration of the call
 * OpenBLAS is set to one thread (openblas_set_num_threads, restored on
 * return), and the OpenMP threads each run whole samples (or blocks of rows)
 * with single-threaded GEMMs.  That also keeps each sample's column matrix in
 * the core's own L2 cache instead of streaming a batch-sized one through
 * memory.  The thread count is omp_get_max_threads(); with one OpenMP thread
 * OpenBLAS is left alone and uses its own threads inside each GEMM.
 *
 * Reproducibility: every OpenMP loop gives each output element (or
 * reduction) to one thread, which computes it in a fixed order; no float
 * atomics, no reduction clauses.  Where samples are handed out dynamically
 * (conv), each sample's result does not depend on the thread that ran it, and
 * the weight gradient is summed per fixed group of samples (a few per
 * processor, independent of the thread count) with the groups added in order.
 * So conv, batch-norm, pooling and the elementwise layers give the same bits
 * for any OpenMP thread count; linear layers split their GEMMs by thread and
 * are reproducible for a fixed thread count.
 *
 * Measured on the 2-core AVX-512 VM this was written on (bench-layers, cnn,
 * batch 64, forward + backward, OPENBLAS_CORETYPE=SkylakeX, quiet machine):
 * 23-26 ms per step, 2500-2800 images/s, against 1100-1300 for PyTorch 1.13
 * (tests/bench/torch_cnn.py) there.  OpenBLAS 0.3.21 does not recognise that
 * CPU model and falls back to SSE3 kernels (openblas_get_config() says
 * "Prescott"): every GEMM is then 4-5x slower (about 780 images/s) unless
 * OPENBLAS_CORETYPE is set before the process starts.
 */
#include "engine/layers.h"
#include "engine/matmul-dnnl.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "engine/blas.h"
#include "engine/conv-dnnl.h"
#include "src/base/errors.h"

/* The build targets baseline x86-64 (SSE2), so a few row kernels where wide
 * masked vectors pay off have an AVX-512 twin chosen at run time; every
 * other loop is plain C that the compiler vectorises.  SD_LAYERS_NO_AVX512
 * in the environment forces the portable path (tests compare the two). */
#if defined(__x86_64__) && defined(__GNUC__)
#define SD_AVX512 1
#include <immintrin.h>

static int sd_have_avx512(void)
{
	return __builtin_cpu_supports("avx512f") && !getenv("SD_LAYERS_NO_AVX512");
}
#endif

static int sd_par(size_t work)
{
	return work >= SD_LAYERS_OMP_MIN;
}

/* Most sample groups (and workspace slots) a convolution uses. */
#define SD_MAX_SLOTS 64

/* First of `parts` near-equal blocks of count items: block i is
 * [sd_block(count, parts, i), sd_block(count, parts, i + 1)). */
static int sd_block(int count, int parts, int i)
{
	return (int)((long)count * i / parts);
}

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

/* 1 when a linear layer of this shape runs its GEMMs in bf16 through oneDNN
 * (engine/matmul-dnnl.h): bf16 precision, and the shape is one where that
 * beats the float32 sgemm.  Never timed while training. */
static int sd_linear_bf16(int n, int in, int out)
{
	return sd_conv2d_get_precision() == SD_CONV_BF16 && sd_linear_dnnl_bf16_wins(n, in, out);
}

void sd_linear_forward(float *y, const float *x, const float *w, const float *b,
                       int n, int in, int out)
{
	if (n <= 0 || out <= 0)
		return;
	if (sd_linear_bf16(n, in, out) && sd_linear_dnnl_forward_bf16(y, x, w, b, n, in, out) == 0)
		return;
	struct sd_blas_team tm;
	sd_blas_team_begin(&tm);
	const int parts = tm.threads < n ? tm.threads : n;
	/* Each thread a block of rows: y[rows] = x[rows] . w^T (+ b). */
	#pragma omp parallel for schedule(static) num_threads(parts) \
		if (sd_par((size_t)n * in * out / 16))
	for (int t = 0; t < parts; t++) {
		int r0 = sd_block(n, parts, t), rows = sd_block(n, parts, t + 1) - r0;
		float *yr = y + (size_t)r0 * out;
		/* Starting from the bias and letting the GEMM add (beta = 1)
		 * saves a second pass over y. */
		float beta = 0.0f;
		if (b) {
			for (int i = 0; i < rows; i++)
				memcpy(yr + (size_t)i * out, b, sizeof(float) * out);
			beta = 1.0f;
		}
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, out, in,
		            1.0f, x + (size_t)r0 * in, in, w, in, beta, yr, out);
	}
	sd_blas_team_end(&tm);
}

/* db (out) += column sums of dy (n, out), in double, rows in order: what
 * sd_linear_backward's float32 path does per block of columns, for the bf16
 * path (whose bias gradient stays float32). */
static void sd_linear_bias_grad(float *db, const float *dy, int n, int out)
{
	double *acc = sd_calloc((size_t)out, sizeof *acc);
	for (int i = 0; i < n; i++) {
		const float *row = dy + (size_t)i * out;
		for (int o = 0; o < out; o++)
			acc[o] += row[o];
	}
	for (int o = 0; o < out; o++)
		db[o] += (float)acc[o];
	free(acc);
}

void sd_linear_backward(float *dx, float *dw, float *db, const float *dy,
                        const float *x, const float *w, int n, int in, int out)
{
	if (n <= 0 || out <= 0)
		return;
	if (sd_linear_bf16(n, in, out) &&
	    sd_linear_dnnl_backward_bf16(dx, dw, dy, x, w, n, in, out, db != NULL) == 0) {
		if (db)
			sd_linear_bias_grad(db, dy, n, out);
		return;
	}
	struct sd_blas_team tm;
	sd_blas_team_begin(&tm);
	const int px = tm.threads < n ? tm.threads : n;
	const int pw = tm.threads < out ? tm.threads : out;
	const int par = sd_par((size_t)n * in * out / 16);
	#pragma omp parallel num_threads(px > pw ? px : pw) if (par)
	{
		/* dx[rows] (rows, in) = dy[rows] (rows, out) . w (out, in) */
		if (dx) {
			#pragma omp for schedule(static)
			for (int t = 0; t < px; t++) {
				int r0 = sd_block(n, px, t), rows = sd_block(n, px, t + 1) - r0;
				cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, in, out,
				            1.0f, dy + (size_t)r0 * out, out, w, in, 0.0f,
				            dx + (size_t)r0 * in, in);
			}
		}
		/* dw[o0..] (outs, in) += dy^T[o0..] (outs, n) . x (n, in): each
		 * thread owns whole rows of dw, so nothing is summed across
		 * threads. */
		#pragma omp for schedule(static)
		for (int t = 0; t < pw; t++) {
			int o0 = sd_block(out, pw, t), outs = sd_block(out, pw, t + 1) - o0;
			cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, outs, in, n,
			            1.0f, dy + o0, out, x, in, 1.0f, dw + (size_t)o0 * in, in);
			/* Column sums in double, rows in order, a row at a time
			 * (a column at a time strides through dy and was 14 % of a
			 * GPT step: n = batch x 64 positions). */
			if (db && outs > 0) {
				double *acc = sd_calloc((size_t)outs, sizeof *acc);
				for (int i = 0; i < n; i++) {
					const float *row = dy + (size_t)i * out + o0;
					for (int o = 0; o < outs; o++)
						acc[o] += row[o];
				}
				for (int o = 0; o < outs; o++)
					db[o0 + o] += (float)acc[o];
				free(acc);
			}
		}
	}
	sd_blas_team_end(&tm);
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

/* True when the column matrix of a sample is the sample itself (1x1 kernel,
 * stride 1, no padding), so im2col and col2im are skipped. */
static int sd_conv2d_is_pointwise(const struct sd_conv2d_shape *s)
{
	return s->r == 1 && s->stride == 1 && s->pad == 0;
}

/* Layout of a convolution's workspace: one column-matrix slot per thread
 * (at most one thread per processor), then one weight-gradient partial per
 * sample group.  The groups are fixed by the machine and the batch, not by the
 * thread count: the weight gradient is summed within each group in sample
 * order and the groups are added in order, so the result does not depend on
 * how many threads ran or which took which group.  There are several groups
 * per processor so that a thread slowed down by another process on its core
 * does not hold up the rest (groups are handed out dynamically). */
struct sd_conv2d_ws {
	int threads_max;   /* column slots */
	int groups;        /* weight-gradient partials */
	size_t col;        /* floats of a column slot (0 for a pointwise kernel) */
	size_t dw;         /* floats of a weight-gradient partial */
};

/* Groups per processor (see struct sd_conv2d_ws). */
#define SD_GROUPS_PER_PROC 4

static void sd_conv2d_ws_layout(struct sd_conv2d_ws *l, const struct sd_conv2d_shape *s)
{
	int p = omp_get_num_procs();
	if (p > SD_MAX_SLOTS)
		p = SD_MAX_SLOTS;
	if (p < 1)
		p = 1;
	l->threads_max = p < s->n ? p : s->n;
	l->groups = p * SD_GROUPS_PER_PROC < s->n ? p * SD_GROUPS_PER_PROC : s->n;
	/* Rounded to 16 floats (64 bytes) so slots do not share cache lines. */
	l->col = sd_conv2d_is_pointwise(s) ? 0 :
	         ((size_t)s->c * s->r * s->r * s->oh * s->ow + 15) / 16 * 16;
	l->dw = ((size_t)s->k * s->c * s->r * s->r + 15) / 16 * 16;
}

static size_t sd_conv2d_im2col_workspace_floats(const struct sd_conv2d_shape *s)
{
	struct sd_conv2d_ws l;
	sd_conv2d_ws_layout(&l, s);
	return (size_t)l.threads_max * l.col + (size_t)l.groups * l.dw;
}

/* Output columns x whose input column x*st + off lies inside a row of width
 * w: lo <= x < hi, clamped to 0 .. ow. */
static void sd_valid_cols(int *lo, int *hi, int w, int ow, int st, int off)
{
	int l = off < 0 ? (-off + st - 1) / st : 0;
	int h = w - off > 0 ? (w - off + st - 1) / st : 0;
	if (h > ow)
		h = ow;
	if (l > h)
		l = h;
	*lo = l;
	*hi = h;
}

/* One row (ci, ki, kj) of the column matrix for one input plane:
 * out[y][x] = xp[y*st + ki - pad][x*st + kj - pad], zero outside the plane. */
static void sd_im2col_plane(float *restrict out, const float *restrict xp,
                            const struct sd_conv2d_shape *s, int ki, int kj)
{
	const int h = s->h, w = s->w, oh = s->oh, ow = s->ow;
	const int st = s->stride, off = kj - s->pad;
	int lo, hi;
	sd_valid_cols(&lo, &hi, w, ow, st, off);
	for (int y = 0; y < oh; y++, out += ow) {
		int iy = y * st + ki - s->pad;
		if (iy < 0 || iy >= h) {
			for (int x = 0; x < ow; x++)
				out[x] = 0.0f;
			continue;
		}
		/* Indexing with the offset, rather than moving the row pointer
		 * by it, keeps every pointer inside the plane. */
		const float *src = xp + (size_t)iy * w;
		for (int x = 0; x < lo; x++)
			out[x] = 0.0f;
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

/* dp[y*st + ki - pad][x*st + kj - pad] += src[y][x] inside the plane: the
 * adjoint of sd_im2col_plane for one row of the column matrix. */
static void sd_col2im_plane(float *restrict dp, const float *restrict src,
                            const struct sd_conv2d_shape *s, int ki, int kj)
{
	const int h = s->h, w = s->w, oh = s->oh, ow = s->ow;
	const int st = s->stride, off = kj - s->pad;
	int lo, hi;
	sd_valid_cols(&lo, &hi, w, ow, st, off);
	for (int y = 0; y < oh; y++) {
		int iy = y * st + ki - s->pad;
		if (iy < 0 || iy >= h)
			continue;
		float *restrict drow = dp + (size_t)iy * w;
		const float *restrict srow = src + (size_t)y * ow;
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

#ifdef SD_AVX512
/* Lanes from .. to-1 of a 16-lane mask, clamped to 0 .. 16. */
static inline __mmask16 sd_mask16(int from, int to)
{
	if (from < 0)
		from = 0;
	if (to > 16)
		to = 16;
	if (to <= from)
		return 0;
	return (__mmask16)(((1u << to) - 1u) & ~((1u << from) - 1u));
}

/* p + i floats as an address only: masked AVX-512 loads and stores never touch
 * masked-off lanes, so p + i may point before or past the row. */
static inline const float *sd_at(const float *p, ptrdiff_t i)
{
	return (const float *)((uintptr_t)p + (uintptr_t)(i * (ptrdiff_t)sizeof(float)));
}

/* Largest zero-padded input plane (floats) the stride-1 AVX-512 kernels copy
 * to the stack; bigger planes take the scalar path. */
#define SD_PAD_MAX 8192

/* Copies input plane xp (h, w) into buf as a zero-padded (h + 2 pad, w + 2 pad)
 * plane followed by 16 zero floats, so that row reads may overrun; buf holds
 * SD_PAD_MAX + 32 floats (the zeroing runs in whole vectors). */
__attribute__((target("avx512f")))
static void sd_pad_plane_avx512(float *buf, const float *xp, int h, int w, int pad)
{
	const int wp = w + 2 * pad, total = (h + 2 * pad) * wp + 16;
	for (int i = 0; i < total; i += 16)
		_mm512_storeu_ps(buf + i, _mm512_setzero_ps());
	for (int y = 0; y < h; y++) {
		float *dst = buf + (size_t)(y + pad) * wp + pad;
		const float *src = xp + (size_t)y * w;
		for (int x0 = 0; x0 < w; x0 += 16) {
			__mmask16 m = sd_mask16(0, w - x0);
			_mm512_mask_storeu_ps(dst + x0, m, _mm512_maskz_loadu_ps(m, src + x0));
		}
	}
}

/* sd_im2col for stride 1 and planes up to SD_PAD_MAX.  The cnn and resnet
 * rows are 8 to 32 floats, where the scalar loops spend their time on loop
 * control and edge cases rather than copying; from a zero-padded copy of the
 * plane every output row is plain 16-float loads with one masked store at the
 * row end.  Values are copies, so identical to the scalar path. */
__attribute__((target("avx512f")))
static void sd_im2col_s1_avx512(float *col, const float *xn, const struct sd_conv2d_shape *s)
{
	const int r = s->r, rr = r * r, ow = s->ow, oh = s->oh, pad = s->pad;
	const int wp = s->w + 2 * pad;
	const size_t ohw = (size_t)oh * ow, hw = (size_t)s->h * s->w;
	const __mmask16 tail = sd_mask16(0, ow % 16 ? ow % 16 : 16);
	float buf[SD_PAD_MAX + 32] __attribute__((aligned(64)));

	for (int ci = 0; ci < s->c; ci++) {
		sd_pad_plane_avx512(buf, xn + ci * hw, s->h, s->w, pad);
		for (int ki = 0; ki < r; ki++)
			for (int kj = 0; kj < r; kj++) {
				float *out = col + (size_t)(ci * rr + ki * r + kj) * ohw;
				for (int y = 0; y < oh; y++, out += ow) {
					const float *src = buf + (size_t)(y + ki) * wp + kj;
					int x0 = 0;
					for (; x0 + 16 < ow; x0 += 16)
						_mm512_storeu_ps(out + x0, _mm512_loadu_ps(src + x0));
					_mm512_mask_storeu_ps(out + x0, tail, _mm512_loadu_ps(src + x0));
				}
			}
	}
}

/* sd_col2im for stride 1 and planes up to SD_PAD_MAX: sums into a zero-padded
 * plane on the stack (no bounds checks), then copies its interior to dx.
 * Every element receives the same additions in the same (ki, kj) order as in
 * the scalar path, so the bits are identical. */
__attribute__((target("avx512f")))
static void sd_col2im_s1_avx512(float *dxn, const float *dcol, const struct sd_conv2d_shape *s)
{
	const int r = s->r, rr = r * r, h = s->h, w = s->w, ow = s->ow, oh = s->oh;
	const int pad = s->pad, wp = w + 2 * pad, total = (h + 2 * pad) * wp + 16;
	const size_t ohw = (size_t)oh * ow, hw = (size_t)h * w;
	const __mmask16 tail = sd_mask16(0, ow % 16 ? ow % 16 : 16);
	float buf[SD_PAD_MAX + 32] __attribute__((aligned(64)));

	for (int ci = 0; ci < s->c; ci++) {
		for (int i = 0; i < total; i += 16)
			_mm512_storeu_ps(buf + i, _mm512_setzero_ps());
		for (int ki = 0; ki < r; ki++)
			for (int kj = 0; kj < r; kj++) {
				const float *src = dcol + (size_t)(ci * rr + ki * r + kj) * ohw;
				for (int y = 0; y < oh; y++, src += ow) {
					float *d = buf + (size_t)(y + ki) * wp + kj;
					int x0 = 0;
					for (; x0 + 16 < ow; x0 += 16)
						_mm512_storeu_ps(d + x0, _mm512_add_ps(_mm512_loadu_ps(d + x0),
						                                       _mm512_loadu_ps(src + x0)));
					/* Lanes past the row keep their value: the full
					 * store writes them back unchanged. */
					__m512 a = _mm512_loadu_ps(d + x0);
					a = _mm512_mask_add_ps(a, tail, a, _mm512_maskz_loadu_ps(tail, src + x0));
					_mm512_storeu_ps(d + x0, a);
				}
			}
		float *dp = dxn + ci * hw;
		for (int y = 0; y < h; y++) {
			const float *src = buf + (size_t)(y + pad) * wp + pad;
			for (int x0 = 0; x0 < w; x0 += 16) {
				__mmask16 m = sd_mask16(0, w - x0);
				_mm512_mask_storeu_ps(dp + (size_t)y * w + x0, m, _mm512_maskz_loadu_ps(m, src + x0));
			}
		}
	}
}

/* Whether the stride-1 AVX-512 im2col/col2im apply to shape s. */
static int sd_conv2d_avx512_s1(const struct sd_conv2d_shape *s)
{
	return s->stride == 1 &&
	       ((long)s->h + 2L * s->pad) * ((long)s->w + 2L * s->pad) <= SD_PAD_MAX &&
	       sd_have_avx512();
}
#endif

/* Column matrix of one sample xn (c, h, w): col (c r r, oh ow), row
 * (ci, ki, kj). */
static void sd_im2col(float *col, const float *xn, const struct sd_conv2d_shape *s)
{
	const int rr = s->r * s->r;
	const size_t ohw = (size_t)s->oh * s->ow, hw = (size_t)s->h * s->w;
#ifdef SD_AVX512
	if (sd_conv2d_avx512_s1(s)) {
		sd_im2col_s1_avx512(col, xn, s);
		return;
	}
#endif
	for (int ci = 0; ci < s->c; ci++)
		for (int k = 0; k < rr; k++)
			sd_im2col_plane(col + (size_t)(ci * rr + k) * ohw, xn + ci * hw, s,
			                k / s->r, k % s->r);
}

/* Adds the column-matrix gradient dcol (c r r, oh ow) of one sample back onto
 * its input planes dxn (c, h, w), overwriting them: the adjoint of
 * sd_im2col.  Contributions reach each element in (ki, kj) order. */
static void sd_col2im(float *dxn, const float *dcol, const struct sd_conv2d_shape *s)
{
	const int rr = s->r * s->r;
	const size_t ohw = (size_t)s->oh * s->ow, hw = (size_t)s->h * s->w;
#ifdef SD_AVX512
	if (sd_conv2d_avx512_s1(s)) {
		sd_col2im_s1_avx512(dxn, dcol, s);
		return;
	}
#endif
	for (int ci = 0; ci < s->c; ci++) {
		float *dp = dxn + ci * hw;
		memset(dp, 0, sizeof(float) * hw);
		for (int k = 0; k < rr; k++)
			sd_col2im_plane(dp, dcol + (size_t)(ci * rr + k) * ohw, s, k / s->r, k % s->r);
	}
}

static void sd_conv2d_forward_im2col(float *y, const float *x, const float *w, const float *b,
                                     const struct sd_conv2d_shape *s, float *ws)
{
	const int crr = s->c * s->r * s->r, kk = s->k;
	const size_t ohw = (size_t)s->oh * s->ow, hw = (size_t)s->h * s->w;
	struct sd_conv2d_ws l;
	struct sd_blas_team tm;
	sd_conv2d_ws_layout(&l, s);
	sd_blas_team_begin(&tm);

	/* Threads take whole samples: im2col into the thread's slot, one GEMM
	 * straight into the NCHW output, then the bias.  A sample's result does
	 * not depend on the thread, so the samples can be handed out
	 * dynamically. */
	#pragma omp parallel num_threads(tm.threads < l.threads_max ? tm.threads : l.threads_max)
	{
		float *col = ws + (size_t)omp_get_thread_num() * l.col;
		#pragma omp for schedule(dynamic, 1)
		for (int i = 0; i < s->n; i++) {
			const float *xi = x + (size_t)i * s->c * hw;
			float *yi = y + (size_t)i * kk * ohw;
			const float *cm = xi;
			if (!sd_conv2d_is_pointwise(s)) {
				sd_im2col(col, xi, s);
				cm = col;
			}
			/* y_i (k, oh ow) = w (k, c r r) . col (c r r, oh ow) */
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kk, (int)ohw, crr,
			            1.0f, w, crr, cm, (int)ohw, 0.0f, yi, (int)ohw);
			if (b)
				for (int k = 0; k < kk; k++) {
					float *yk = yi + (size_t)k * ohw;
					const float bk = b[k];
					#pragma omp simd
					for (size_t p = 0; p < ohw; p++)
						yk[p] += bk;
				}
		}
	}
	sd_blas_team_end(&tm);
}

static void sd_conv2d_backward_im2col(float *dx, float *dw, float *db, const float *dy,
                                      const float *x, const float *w,
                                      const struct sd_conv2d_shape *s, float *ws)
{
	const int crr = s->c * s->r * s->r, kk = s->k;
	const size_t ohw = (size_t)s->oh * s->ow, hw = (size_t)s->h * s->w;
	const size_t nw = (size_t)kk * crr;
	struct sd_conv2d_ws l;
	struct sd_blas_team tm;
	sd_conv2d_ws_layout(&l, s);
	sd_blas_team_begin(&tm);
	float *parts = ws + (size_t)l.threads_max * l.col;

	#pragma omp parallel num_threads(tm.threads < l.threads_max ? tm.threads : l.threads_max)
	{
		float *col = ws + (size_t)omp_get_thread_num() * l.col;
		/* db: one thread per output channel, samples in order. */
		if (db) {
			#pragma omp for schedule(static) nowait
			for (int k = 0; k < kk; k++) {
				double acc = 0.0;
				for (int i = 0; i < s->n; i++)
					acc += sd_sum_f64(dy + ((size_t)i * kk + k) * ohw, ohw);
				db[k] += (float)acc;
			}
		}
		/* Group g runs its samples in order: weight gradient into the
		 * group's partial (kept transposed, (c r r, k)), then the input
		 * gradient through the column matrix, whose slot it reuses. */
		#pragma omp for schedule(dynamic, 1)
		for (int g = 0; g < l.groups; g++) {
			float *dwg = parts + (size_t)g * l.dw;
			memset(dwg, 0, sizeof(float) * nw);
			for (int i = sd_block(s->n, l.groups, g); i < sd_block(s->n, l.groups, g + 1); i++) {
				const float *xi = x + (size_t)i * s->c * hw;
				const float *gi = dy + (size_t)i * kk * ohw;
				const float *cm = xi;
				if (!sd_conv2d_is_pointwise(s)) {
					sd_im2col(col, xi, s);
					cm = col;
				}
				/* dw_g^T (c r r, k) += col (c r r, oh ow) . dy_i^T: the
				 * transposed product is 15-40% faster in OpenBLAS for
				 * every cnn and resnet shape (few output channels make
				 * a short, wide dw). */
				cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, crr, kk, (int)ohw,
				            1.0f, cm, (int)ohw, gi, (int)ohw, 1.0f, dwg, kk);
				if (!dx)
					continue;
				float *dxi = dx + (size_t)i * s->c * hw;
				/* dcol (c r r, oh ow) = w^T (c r r, k) . dy_i (k, oh ow);
				 * for a pointwise kernel that is dx_i itself. */
				float *dcol = sd_conv2d_is_pointwise(s) ? dxi : col;
				cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, crr, (int)ohw, kk,
				            1.0f, w, crr, gi, (int)ohw, 0.0f, dcol, (int)ohw);
				if (dcol != dxi)
					sd_col2im(dxi, dcol, s);
			}
		}
		/* dw += the (transposed) group partials, added in group order. */
		#pragma omp for schedule(static)
		for (int j = 0; j < crr; j++)
			for (int k = 0; k < kk; k++) {
				size_t e = (size_t)j * kk + k;
				float acc = parts[e];
				for (int g = 1; g < l.groups; g++)
					acc += parts[(size_t)g * l.dw + e];
				dw[(size_t)k * crr + j] += acc;
			}
	}
	sd_blas_team_end(&tm);
}

/* ---------------------------------------------------- convolution paths */

/* The path set by sd_conv2d_set_path or SPOTDECK_CONV; -1 until first read. */
static int sd_conv_path_set = -1;

static const char *const sd_conv_path_names[] = {
	[SD_CONV_AUTO] = "auto", [SD_CONV_IM2COL] = "im2col", [SD_CONV_ONEDNN] = "onednn",
};

const char *sd_conv2d_path_name(enum sd_conv_path p)
{
	return (unsigned)p < sizeof sd_conv_path_names / sizeof sd_conv_path_names[0]
	       ? sd_conv_path_names[p] : "?";
}

int sd_conv2d_parse_path(const char *name, enum sd_conv_path *out, char **why)
{
	for (int p = SD_CONV_AUTO; p <= SD_CONV_ONEDNN; p++)
		if (!strcmp(name, sd_conv_path_names[p])) {
			*out = (enum sd_conv_path)p;
			return 0;
		}
	return sd_why(why, "convolution path '%s': expected auto, im2col or onednn", name);
}

int sd_conv2d_check_env(char **why)
{
	const char *v = getenv("SPOTDECK_CONV");
	enum sd_conv_path p;
	if (!v || !*v || sd_conv2d_parse_path(v, &p, NULL) == 0)
		return 0;
	return sd_why(why, "SPOTDECK_CONV=%s: expected auto, im2col or onednn", v);
}

void sd_conv2d_set_path(enum sd_conv_path p)
{
	sd_conv_path_set = (int)p;
}

enum sd_conv_path sd_conv2d_get_path(void)
{
	if (sd_conv_path_set < 0) {
		/* Same value from every thread that races here. */
		const char *v = getenv("SPOTDECK_CONV");
		enum sd_conv_path p = SD_CONV_AUTO;
		if (v && *v && sd_conv2d_parse_path(v, &p, NULL) < 0)
			p = SD_CONV_AUTO;
		sd_conv_path_set = (int)p;
	}
	return (enum sd_conv_path)sd_conv_path_set;
}

/* The precision set by sd_conv2d_set_precision; float32 until then.  Read
 * by engine/conv-dnnl.c when it picks a plan. */
static enum sd_conv_precision sd_conv_precision_set = SD_CONV_FP32;

static const char *const sd_conv_precision_names[] = {
	[SD_CONV_FP32] = "fp32", [SD_CONV_BF16] = "bf16",
};

void sd_conv2d_set_precision(enum sd_conv_precision p)
{
	sd_conv_precision_set = p;
}

enum sd_conv_precision sd_conv2d_get_precision(void)
{
	return sd_conv_precision_set;
}

const char *sd_conv2d_precision_name(enum sd_conv_precision p)
{
	return (unsigned)p < sizeof sd_conv_precision_names / sizeof sd_conv_precision_names[0]
	       ? sd_conv_precision_names[p] : "?";
}

int sd_conv2d_parse_precision(const char *name, enum sd_conv_precision *out, char **why)
{
	for (int p = SD_CONV_FP32; p <= SD_CONV_BF16; p++)
		if (!strcmp(name, sd_conv_precision_names[p])) {
			*out = (enum sd_conv_precision)p;
			return 0;
		}
	return sd_why(why, "precision '%s': expected fp32 or bf16", name);
}

int sd_conv2d_bf16_available(void)
{
	return sd_conv2d_dnnl_bf16_available();
}

const char *sd_conv2d_bf16_isa(void)
{
	return sd_conv2d_dnnl_bf16_isa();
}

unsigned long sd_conv2d_fallbacks(void)
{
	return sd_conv2d_dnnl_failures();
}

const char *sd_conv2d_onednn_version(void)
{
	return sd_conv2d_dnnl_version();
}

void sd_conv2d_describe(const struct sd_conv2d_shape *s, int bias, char *buf, size_t len)
{
	sd_conv2d_dnnl_describe(s, bias, buf, len);
}

/* Where auto takes oneDNN for a call through sd_conv2d_forward/backward
 * (NCHW buffers, so oneDNN's time includes reordering x, y, dy and dx to and
 * from its blocked layout).  Measured with tests/bench/bench-conv -t 1 -c
 * (process CPU time, one thread: the figure a busy machine disturbs least)
 * on the 2-core AMD EPYC (Zen 3, AVX2) this was written on, OpenBLAS 0.3.21
 * "Zen" kernels, oneDNN 2.6.3 jit:avx2; ms forward + backward, im2col ->
 * oneDNN:
 *   resnet 3->16   32x32 s1 (no dx)   8.2 ->  5.9   oneDNN
 *   resnet 16->16  32x32 s1          52.8 -> 29.1   oneDNN
 *   resnet 16->32  32x32 s2          23.3 -> 18.0   oneDNN
 *   resnet 32->32  16x16 s1          46.1 -> 25.5   oneDNN
 *   resnet 32->64  16x16 s2          19.6 -> 17.3   oneDNN
 *   resnet 64->64  8x8   s1          38.5 -> 23.9   oneDNN
 *   cnn 1->32 5x5  28x28 (no dx)      5.7 -> 12.2   im2col: oneDNN's weight
 *                                                   gradient for one input
 *                                                   channel is 3x slower
 *   cnn 32->64 5x5 14x14             72.3 -> 44.2   oneDNN
 * (The ResNets do not take this path when oneDNN runs all their
 * convolutions: they keep their activations blocked, model.c.)  Shapes not
 * in the table: oneDNN when the input has at least 8 channels (its kernels
 * fill whole vectors of channels), im2col below.  A table, not a timing at
 * start-up: a start-up timing on a shared machine picks by noise, and two
 * runs with the same seed could then take different paths and round
 * differently. */
static const struct {
	int c, h, w, k, r, stride, pad, onednn;
} sd_conv_table[] = {
	{ 3, 32, 32, 16, 3, 1, 1, 1 },
	{ 16, 32, 32, 16, 3, 1, 1, 1 },
	{ 16, 32, 32, 32, 3, 2, 1, 1 },
	{ 32, 16, 16, 32, 3, 1, 1, 1 },
	{ 32, 16, 16, 64, 3, 2, 1, 1 },
	{ 64, 8, 8, 64, 3, 1, 1, 1 },
	{ 1, 28, 28, 32, 5, 1, 2, 0 },
	{ 32, 14, 14, 64, 5, 1, 2, 1 },
};

static int sd_conv2d_auto_onednn(const struct sd_conv2d_shape *s)
{
	for (size_t i = 0; i < sizeof sd_conv_table / sizeof sd_conv_table[0]; i++)
		if (sd_conv_table[i].c == s->c && sd_conv_table[i].h == s->h &&
		    sd_conv_table[i].w == s->w && sd_conv_table[i].k == s->k &&
		    sd_conv_table[i].r == s->r && sd_conv_table[i].stride == s->stride &&
		    sd_conv_table[i].pad == s->pad)
			return sd_conv_table[i].onednn;
	return s->c >= 8;
}

enum sd_conv_path sd_conv2d_path(const struct sd_conv2d_shape *s, int bias)
{
	enum sd_conv_path want = sd_conv2d_get_path();
	if (want == SD_CONV_IM2COL || (want == SD_CONV_AUTO && !sd_conv2d_auto_onednn(s)))
		return SD_CONV_IM2COL;
	return sd_conv2d_dnnl_supported(s, bias) ? SD_CONV_ONEDNN : SD_CONV_IM2COL;
}

size_t sd_conv2d_workspace_floats(const struct sd_conv2d_shape *s)
{
	size_t f = sd_conv2d_im2col_workspace_floats(s);
	/* Both bias variants: the caller's choice is not known yet. */
	for (int bias = 0; bias < 2; bias++) {
		size_t d = sd_conv2d_dnnl_workspace_floats(s, bias);
		if (d > f)
			f = d;
	}
	return f;
}

void sd_conv2d_forward(float *y, const float *x, const float *w, const float *b,
                       const struct sd_conv2d_shape *s, float *ws)
{
	if (sd_conv2d_path(s, b != NULL) == SD_CONV_ONEDNN &&
	    sd_conv2d_dnnl_forward(y, x, w, b, s, ws) == 0)
		return;
	sd_conv2d_forward_im2col(y, x, w, b, s, ws);
}

void sd_conv2d_backward(float *dx, float *dw, float *db, const float *dy,
                        const float *x, const float *w,
                        const struct sd_conv2d_shape *s, float *ws)
{
	/* A refused or failed oneDNN call leaves dw and db untouched. */
	if (sd_conv2d_path(s, db != NULL) == SD_CONV_ONEDNN &&
	    sd_conv2d_dnnl_backward(dx, dw, db, dy, x, w, s, ws) == 0)
		return;
	sd_conv2d_backward_im2col(dx, dw, db, dy, x, w, s, ws);
}

/* ---------------------------------------- convolutions, blocked layouts */

int sd_conv2d_block(const struct sd_conv2d_shape *s)
{
	return sd_conv2d_dnnl_block(s);
}

int sd_conv2d_blocked_on_onednn(const struct sd_conv2d_shape *s, int bias, int xblk, int yblk,
                                int need_dx)
{
	return sd_conv2d_get_path() != SD_CONV_IM2COL &&
	       sd_conv2d_dnnl_blocked_supported(s, bias, xblk, yblk, need_dx);
}

/* Workspace of the converting im2col fallback: NCHW copies of x (or dx), of
 * y (or dy), of dx, then im2col's own. */
static size_t sd_conv2d_fallback_floats(const struct sd_conv2d_shape *s)
{
	const size_t nx = (size_t)s->n * s->c * s->h * s->w;
	const size_t ny = (size_t)s->n * s->k * s->oh * s->ow;
	return 2 * nx + ny + sd_conv2d_im2col_workspace_floats(s);
}

size_t sd_conv2d_workspace_floats_blocked(const struct sd_conv2d_shape *s, int xblk, int yblk)
{
	size_t f = sd_conv2d_fallback_floats(s);
	for (int bias = 0; bias < 2; bias++) {
		size_t d = sd_conv2d_dnnl_workspace_floats_blocked(s, bias, xblk, yblk);
		if (d > f)
			f = d;
	}
	return f;
}

void sd_conv2d_forward_blocked(float *y, const float *x, const float *w, const float *b,
                               const struct sd_conv2d_shape *s, int xblk, int yblk, float *ws)
{
	sd_conv2d_forward_blocked_kept(y, x, w, b, s, xblk, yblk, ws, NULL);
}

uint16_t *sd_conv2d_keep_prepare(struct sd_conv2d_keep *keep, const struct sd_conv2d_shape *s,
                                 int bias, int xblk, int yblk, const float *x)
{
	keep->filled = 0;
	if (sd_conv2d_get_path() == SD_CONV_IM2COL)
		return NULL;
	return sd_conv2d_dnnl_keep_prepare(keep, s, bias, xblk, yblk, x);
}

void sd_conv2d_keep_free(struct sd_conv2d_keep *keep)
{
	free(keep->buf);
	memset(keep, 0, sizeof *keep);
}

/* dst (n, c, hw) float32 NCHW from src (n, hw, c) bf16 NHWC (bf16 is
 * float32's upper half: exact). */
static void sd_widen_nhwc_bf16(float *dst, const uint16_t *src, int n, int c, size_t hw)
{
	for (int i = 0; i < n; i++)
		for (int ch = 0; ch < c; ch++)
			for (size_t p = 0; p < hw; p++) {
				uint32_t u = (uint32_t)src[((size_t)i * hw + p) * c + ch] << 16;
				memcpy(&dst[((size_t)i * c + ch) * hw + p], &u, sizeof u);
			}
}

void sd_conv2d_forward_blocked_kept(float *y, const float *x, const float *w, const float *b,
                                    const struct sd_conv2d_shape *s, int xblk, int yblk,
                                    float *ws, struct sd_conv2d_keep *keep)
{
	int rc = sd_conv2d_get_path() == SD_CONV_IM2COL
		? -1 : sd_conv2d_dnnl_forward_blocked(y, x, w, b, s, xblk, yblk, ws, keep);
	if (keep)
		keep->filled = 0;
	if (rc == 0)
		return;
	if (keep) {
		keep->valid = 0;
		keep->y_nhwc = 0;   /* im2col writes layout yblk, float32 */
		keep->y_bf16 = 0;
	}
	const size_t nx = (size_t)s->n * s->c * s->h * s->w;
	float *xp = ws, *yp = xp + nx, *rest = yp + (size_t)s->n * s->k * s->oh * s->ow + nx;
	const float *xin = x;
	if (keep && keep->x_bf16_only) {
		/* x only in bf16 (its producer skipped the float32 one). */
		sd_widen_nhwc_bf16(xp, keep->buf, s->n, s->c, (size_t)s->h * s->w);
		xin = xp;
	} else if (xblk > 1) {
		sd_layout_from_blocked(xp, x, s->n, s->c, s->h * s->w, xblk);
		xin = xp;
	}
	sd_conv2d_forward_im2col(yblk > 1 ? yp : y, xin, w, b, s, rest);
	if (yblk > 1)
		sd_layout_to_blocked(y, yp, s->n, s->k, s->oh * s->ow, yblk);
}

void sd_conv2d_backward_blocked(float *dx, float *dw, float *db, const float *dy,
                                const float *x, const float *w,
                                const struct sd_conv2d_shape *s, int xblk, int yblk,
                                float *ws)
{
	sd_conv2d_backward_blocked_kept(dx, dw, db, dy, x, w, s, xblk, yblk, ws, NULL, NULL);
}

uint16_t *sd_conv2d_keep_prepare_dy(struct sd_conv2d_keep *keep,
                                    const struct sd_conv2d_shape *s, int bias, int xblk,
                                    int yblk, const float *dy, int need_dx)
{
	keep->filled = 0;
	if (sd_conv2d_get_path() == SD_CONV_IM2COL)
		return NULL;
	return sd_conv2d_dnnl_keep_prepare_dy(keep, s, bias, xblk, yblk, dy, need_dx);
}

void sd_conv2d_backward_blocked_kept(float *dx, float *dw, float *db, const float *dy,
                                     const float *x, const float *w,
                                     const struct sd_conv2d_shape *s, int xblk, int yblk,
                                     float *ws, struct sd_conv2d_keep *keep,
                                     struct sd_conv2d_keep *keep_dy)
{
	int rc = sd_conv2d_get_path() == SD_CONV_IM2COL
		? -1 : sd_conv2d_dnnl_backward_blocked(dx, dw, db, dy, x, w, s, xblk, yblk, ws, keep,
		                                       keep_dy);
	if (keep) {
		keep->valid = 0;
		if (rc != 0)
			keep->dx_nhwc = 0;   /* im2col writes layout xblk */
	}
	/* dy only in bf16 (its producer skipped the float32 one). */
	const uint16_t *dy_bf16 = keep_dy && keep_dy->filled && keep_dy->x == dy ? keep_dy->buf
	                                                                         : NULL;
	if (keep_dy)
		keep_dy->filled = 0;
	if (rc == 0)
		return;
	const size_t nx = (size_t)s->n * s->c * s->h * s->w;
	const size_t ny = (size_t)s->n * s->k * s->oh * s->ow;
	float *xp = ws, *dyp = xp + nx, *dxp = dyp + ny, *rest = dxp + nx;
	const float *xin = x, *dyin = dy;
	if (keep && keep->x_bf16_only) {
		sd_widen_nhwc_bf16(xp, keep->buf, s->n, s->c, (size_t)s->h * s->w);
		xin = xp;
	} else if (xblk > 1) {
		sd_layout_from_blocked(xp, x, s->n, s->c, s->h * s->w, xblk);
		xin = xp;
	}
	if (dy_bf16) {
		/* NHWC bf16 -> NCHW float32: bf16 is float32's upper half. */
		const size_t ohw = (size_t)s->oh * s->ow;
		for (int i = 0; i < s->n; i++)
			for (int ch = 0; ch < s->k; ch++)
				for (size_t p = 0; p < ohw; p++) {
					uint32_t u = (uint32_t)dy_bf16[((size_t)i * ohw + p) * s->k + ch] << 16;
					memcpy(&dyp[((size_t)i * s->k + ch) * ohw + p], &u, sizeof u);
				}
		dyin = dyp;
	} else if (yblk > 1) {
		sd_layout_from_blocked(dyp, dy, s->n, s->k, s->oh * s->ow, yblk);
		dyin = dyp;
	}
	float *dxout = dx && xblk > 1 ? dxp : dx;
	sd_conv2d_backward_im2col(dxout, dw, db, dyin, xin, w, s, rest);
	if (dx && xblk > 1)
		sd_layout_to_blocked(dx, dxp, s->n, s->c, s->h * s->w, xblk);
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
	#pragma omp parallel for schedule(static) if (sd_par(m * c))
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
	#pragma omp parallel for schedule(static) if (sd_par((size_t)planes * hw))
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
	#pragma omp parallel for schedule(static) if (sd_par(m * c))
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

/* ------------------------------------------------------------ accumulate */

void sd_accumulate(float *restrict dst, const float *restrict src, size_t count)
{
	#pragma omp parallel for simd schedule(static) if (sd_par(count))
	for (size_t i = 0; i < count; i++)
		dst[i] += src[i];
}

/* ------------------------------------------------------------------ relu */

void sd_relu_forward(float *y, const float *x, size_t count)
{
	/* No restrict: y may alias x. */
	#pragma omp parallel for simd schedule(static) if (sd_par(count))
	for (size_t i = 0; i < count; i++) {
		float v = x[i];
		y[i] = v > 0.0f ? v : 0.0f;
	}
}

void sd_relu_backward(float *dx, const float *dy, const float *y, size_t count)
{
	/* Both loads are unconditional so the select vectorises; a branch
	 * on the sign of y would mispredict half the time. */
	#pragma omp parallel for simd schedule(static) if (sd_par(count))
	for (size_t i = 0; i < count; i++) {
		float g = dy[i];
		dx[i] = y[i] > 0.0f ? g : 0.0f;
	}
}

/* ------------------------------------------------- other activations */

void sd_act_forward(float *y, const float *x, size_t count, enum sd_act_kind kind, float a,
                    float b)
{
	switch (kind) {
	case SD_ACT_LEAKY_RELU:
		#pragma omp parallel for simd schedule(static) if (sd_par(count))
		for (size_t i = 0; i < count; i++)
			y[i] = x[i] > 0.0f ? x[i] : a * x[i];
		break;
	case SD_ACT_SIGMOID:
		#pragma omp parallel for schedule(static) if (sd_par(count))
		for (size_t i = 0; i < count; i++)
			y[i] = 1.0f / (1.0f + expf(-x[i]));
		break;
	case SD_ACT_TANH:
		#pragma omp parallel for schedule(static) if (sd_par(count))
		for (size_t i = 0; i < count; i++)
			y[i] = tanhf(x[i]);
		break;
	case SD_ACT_CLIP:
		#pragma omp parallel for simd schedule(static) if (sd_par(count))
		for (size_t i = 0; i < count; i++)
			y[i] = fminf(fmaxf(x[i], a), b);
		break;
	}
}

void sd_act_backward(float *dx, const float *dy, const float *x, const float *y, size_t count,
                     enum sd_act_kind kind, float a, float b)
{
	switch (kind) {
	case SD_ACT_LEAKY_RELU:
		#pragma omp parallel for simd schedule(static) if (sd_par(count))
		for (size_t i = 0; i < count; i++)
			dx[i] = x[i] > 0.0f ? dy[i] : a * dy[i];
		break;
	case SD_ACT_SIGMOID:
		#pragma omp parallel for simd schedule(static) if (sd_par(count))
		for (size_t i = 0; i < count; i++)
			dx[i] = dy[i] * y[i] * (1.0f - y[i]);
		break;
	case SD_ACT_TANH:
		#pragma omp parallel for simd schedule(static) if (sd_par(count))
		for (size_t i = 0; i < count; i++)
			dx[i] = dy[i] * (1.0f - y[i] * y[i]);
		break;
	case SD_ACT_CLIP:
		#pragma omp parallel for simd schedule(static) if (sd_par(count))
		for (size_t i = 0; i < count; i++)
			dx[i] = x[i] >= a && x[i] <= b ? dy[i] : 0.0f;
		break;
	}
}

/* --------------------------------------------------------------- pooling */

/* One plane of max pooling, any window and stride.  The select is written
 * without branches (the comparison outcome is random on real data); the
 * window is scanned in row-major order with a strict comparison, so ties keep
 * the first maximum. */
static void sd_maxpool_plane(float *restrict yp, int32_t *restrict ap, const float *restrict xp,
                             int w, int oh, int ow, int k, int s)
{
	for (int oy = 0; oy < oh; oy++)
		for (int ox = 0; ox < ow; ox++) {
			int32_t best = oy * s * w + ox * s;
			float bv = xp[best];
			for (int i = 0; i < k; i++)
				for (int j = 0; j < k; j++) {
					int32_t idx = (oy * s + i) * w + ox * s + j;
					float v = xp[idx];
					int32_t gt = v > bv;
					best += (idx - best) & -gt;
					bv = v > bv ? v : bv;
				}
			yp[oy * ow + ox] = bv;
			ap[oy * ow + ox] = best;
		}
}

#ifdef SD_AVX512
/* sd_maxpool_plane for the 2x2 stride 2 window of the cnn, 16 outputs at a
 * time: the even and odd input columns are split with a permute and the four
 * window positions compared in the same order as the scalar scan, so the
 * outputs and the argmax tie-breaking are identical to it. */
__attribute__((target("avx512f")))
static void sd_maxpool_plane_2x2_avx512(float *restrict yp, int32_t *restrict ap,
                                        const float *restrict xp, int w, int oh, int ow)
{
	const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24,
	                                       26, 28, 30);
	const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
	for (int oy = 0; oy < oh; oy++) {
		const float *r0 = xp + (size_t)2 * oy * w, *r1 = r0 + w;
		for (int ox = 0; ox < ow; ox += 16) {
			const int n = ow - ox < 16 ? ow - ox : 16;
			const __mmask16 mlo = sd_mask16(0, 2 * n), mhi = sd_mask16(0, 2 * n - 16);
			__m512 a0 = _mm512_maskz_loadu_ps(mlo, r0 + 2 * ox);
			__m512 a1 = _mm512_maskz_loadu_ps(mhi, sd_at(r0, 2 * ox + 16));
			__m512 b0 = _mm512_maskz_loadu_ps(mlo, r1 + 2 * ox);
			__m512 b1 = _mm512_maskz_loadu_ps(mhi, sd_at(r1, 2 * ox + 16));
			__m512 v0 = _mm512_permutex2var_ps(a0, even, a1);
			__m512 v1 = _mm512_permutex2var_ps(a0, odd, a1);
			__m512 v2 = _mm512_permutex2var_ps(b0, even, b1);
			__m512 v3 = _mm512_permutex2var_ps(b0, odd, b1);
			__m512i i0 = _mm512_add_epi32(_mm512_set1_epi32(2 * oy * w + 2 * ox),
			                              _mm512_slli_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 1));
			__m512 bv = v0;
			__m512i bi = i0;
			__mmask16 g = _mm512_cmp_ps_mask(v1, bv, _CMP_GT_OQ);
			bv = _mm512_mask_blend_ps(g, bv, v1);
			bi = _mm512_mask_blend_epi32(g, bi, _mm512_add_epi32(i0, _mm512_set1_epi32(1)));
			g = _mm512_cmp_ps_mask(v2, bv, _CMP_GT_OQ);
			bv = _mm512_mask_blend_ps(g, bv, v2);
			bi = _mm512_mask_blend_epi32(g, bi, _mm512_add_epi32(i0, _mm512_set1_epi32(w)));
			g = _mm512_cmp_ps_mask(v3, bv, _CMP_GT_OQ);
			bv = _mm512_mask_blend_ps(g, bv, v3);
			bi = _mm512_mask_blend_epi32(g, bi, _mm512_add_epi32(i0, _mm512_set1_epi32(w + 1)));
			const __mmask16 mo = sd_mask16(0, n);
			_mm512_mask_storeu_ps(yp + (size_t)oy * ow + ox, mo, bv);
			_mm512_mask_storeu_epi32(ap + (size_t)oy * ow + ox, mo, bi);
		}
	}
}
#endif

void sd_maxpool_forward(float *y, int32_t *argmax, const float *x,
                        int n, int c, int h, int w, int k, int s)
{
	const int oh = (h - k) / s + 1, ow = (w - k) / s + 1;
	const size_t hw = (size_t)h * w, ohw = (size_t)oh * ow;
	const int planes = n * c;
#ifdef SD_AVX512
	const int fast = k == 2 && s == 2 && sd_have_avx512();
#else
	const int fast = 0;
#endif
	#pragma omp parallel for schedule(static) if (sd_par((size_t)planes * hw))
	for (int pl = 0; pl < planes; pl++) {
		const float *xp = x + (size_t)pl * hw;
		float *yp = y + (size_t)pl * ohw;
		int32_t *ap = argmax + (size_t)pl * ohw;
#ifdef SD_AVX512
		if (fast) {
			sd_maxpool_plane_2x2_avx512(yp, ap, xp, w, oh, ow);
			continue;
		}
#endif
		(void)fast;
		sd_maxpool_plane(yp, ap, xp, w, oh, ow, k, s);
	}
}

#ifdef SD_AVX512
/* Input gradient of one plane of the 2x2 stride 2 max pool, written in one
 * pass: each window's four elements get dy or zero by comparing the argmax
 * with their index, 16 windows at a time.  0 + dy as in the scalar path (so
 * a -0 gradient becomes +0 there too). */
__attribute__((target("avx512f")))
static void sd_maxpool_back_plane_2x2_avx512(float *dp, const float *gp, const int32_t *ap,
                                             int h, int w, int oh, int ow)
{
	const __m512i lane2 = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26,
	                                        28, 30);
	/* Interleave even-column values e and odd-column values o. */
	const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
	const __m512i hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30,
	                                     15, 31);
	const __m512 zero = _mm512_setzero_ps();
	for (int oy = 0; oy < oh; oy++) {
		float *r0 = dp + (size_t)2 * oy * w, *r1 = r0 + w;
		for (int ox = 0; ox < ow; ox += 16) {
			const int n = ow - ox < 16 ? ow - ox : 16;
			const __mmask16 m = sd_mask16(0, n);
			__m512i am = _mm512_maskz_loadu_epi32(m, ap + (size_t)oy * ow + ox);
			__m512 g = _mm512_add_ps(_mm512_maskz_loadu_ps(m, gp + (size_t)oy * ow + ox), zero);
			__m512i rel = _mm512_sub_epi32(am, _mm512_add_epi32(_mm512_set1_epi32(2 * oy * w + 2 * ox), lane2));
			__m512 e0 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(rel, _mm512_setzero_si512()), g);
			__m512 o0 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(rel, _mm512_set1_epi32(1)), g);
			__m512 e1 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(rel, _mm512_set1_epi32(w)), g);
			__m512 o1 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(rel, _mm512_set1_epi32(w + 1)), g);
			const __mmask16 ml = sd_mask16(0, 2 * n), mh = sd_mask16(0, 2 * n - 16);
			_mm512_mask_storeu_ps(r0 + 2 * ox, ml, _mm512_permutex2var_ps(e0, lo, o0));
			_mm512_mask_storeu_ps(r1 + 2 * ox, ml, _mm512_permutex2var_ps(e1, lo, o1));
			float *r0h = (float *)sd_at(r0, 2 * ox + 16), *r1h = (float *)sd_at(r1, 2 * ox + 16);
			_mm512_mask_storeu_ps(r0h, mh, _mm512_permutex2var_ps(e0, hi, o0));
			_mm512_mask_storeu_ps(r1h, mh, _mm512_permutex2var_ps(e1, hi, o1));
		}
		/* An odd width leaves a last column outside every window. */
		for (int x = 2 * ow; x < w; x++)
			r0[x] = r1[x] = 0.0f;
	}
	/* Likewise an odd height leaves a last row. */
	if (2 * oh < h)
		memset(dp + (size_t)2 * oh * w, 0, sizeof(float) * (size_t)(h - 2 * oh) * w);
}
#endif

void sd_maxpool_backward(float *dx, const float *dy, const int32_t *argmax,
                         int n, int c, int h, int w, int k, int s)
{
	const int oh = (h - k) / s + 1, ow = (w - k) / s + 1;
	const size_t hw = (size_t)h * w, ohw = (size_t)oh * ow;
	const int planes = n * c;
#ifdef SD_AVX512
	const int fast = k == 2 && s == 2 && sd_have_avx512();
#else
	const int fast = 0;
#endif
	/* One thread per plane: overlapping windows (k > s) add into the same
	 * input element in output order. */
	#pragma omp parallel for schedule(static) if (sd_par((size_t)planes * hw))
	for (int pl = 0; pl < planes; pl++) {
		float *dp = dx + (size_t)pl * hw;
		const float *gp = dy + (size_t)pl * ohw;
		const int32_t *ap = argmax + (size_t)pl * ohw;
#ifdef SD_AVX512
		if (fast) {
			sd_maxpool_back_plane_2x2_avx512(dp, gp, ap, h, w, oh, ow);
			continue;
		}
#endif
		(void)fast;
		memset(dp, 0, sizeof(float) * hw);
		for (size_t o = 0; o < ohw; o++)
			dp[ap[o]] += gp[o];
	}
}

void sd_maxpool_pad_forward(float *y, int32_t *argmax, const float *x, int n, int c, int h,
                            int w, int k, int s, int pad)
{
	const int oh = (h + 2 * pad - k) / s + 1, ow = (w + 2 * pad - k) / s + 1;
	const size_t hw = (size_t)h * w, ohw = (size_t)oh * ow;
	const int planes = n * c;
	#pragma omp parallel for schedule(static) if (sd_par((size_t)planes * hw))
	for (int pl = 0; pl < planes; pl++) {
		const float *xp = x + (size_t)pl * hw;
		float *yp = y + (size_t)pl * ohw;
		int32_t *ap = argmax + (size_t)pl * ohw;
		for (int oy = 0; oy < oh; oy++)
			for (int ox = 0; ox < ow; ox++) {
				int y0 = oy * s - pad, x0 = ox * s - pad;
				float best = -INFINITY;
				int32_t at = -1;
				for (int i = y0 < 0 ? 0 : y0; i < y0 + k && i < h; i++)
					for (int j = x0 < 0 ? 0 : x0; j < x0 + k && j < w; j++) {
						float v = xp[(size_t)i * w + j];
						/* First maximum wins; NaN propagates, as in PyTorch. */
						if (at < 0 || v > best || (v != v && best == best)) {
							best = v;
							at = (int32_t)(i * w + j);
						}
					}
				yp[(size_t)oy * ow + ox] = best;
				ap[(size_t)oy * ow + ox] = at;
			}
	}
}

void sd_maxpool_pad_backward(float *dx, const float *dy, const int32_t *argmax, int n, int c,
                             int h, int w, int k, int s, int pad)
{
	const int oh = (h + 2 * pad - k) / s + 1, ow = (w + 2 * pad - k) / s + 1;
	const size_t hw = (size_t)h * w, ohw = (size_t)oh * ow;
	const int planes = n * c;
	/* One thread per plane: overlapping windows add in output order. */
	#pragma omp parallel for schedule(static) if (sd_par((size_t)planes * hw))
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
	#pragma omp parallel for schedule(static) if (sd_par((size_t)planes * hw))
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
	#pragma omp parallel for schedule(static) if (sd_par((size_t)planes * hw))
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
