/* engine/layers-general.c - the layers ONNX models need beyond the built-in
 * networks' (see layers.h, "General layers"): convolutions with groups,
 * dilation, rectangular kernels and asymmetric padding; average pooling
 * with padding; elementwise arithmetic with broadcast constants; dropout.
 *
 * These are the reference implementations, written for being right and
 * reproducible before being fast: the convolution is im2col + one OpenBLAS
 * GEMM per sample and group, run sample after sample (so the weight
 * gradient is summed in one fixed order and the result is the same bits
 * for a fixed OpenBLAS thread count); the elementwise layers give each
 * output element, and each per-channel reduction, to one thread. */
#include "engine/layers.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

#include "src/base/rng.h"

/* ---------------------------------------------------- general convolution */

int sd_gconv_shape_init(struct sd_gconv_shape *s)
{
	if (s->n < 0 || s->c < 1 || s->h < 1 || s->w < 1 || s->k < 1 || s->kh < 1 || s->kw < 1 ||
	    s->sh < 1 || s->sw < 1 || s->dh < 1 || s->dw < 1 || s->groups < 1 ||
	    s->pt < 0 || s->pl < 0 || s->pb < 0 || s->pr < 0 || s->c % s->groups ||
	    s->k % s->groups)
		return -1;
	/* The extent of a dilated kernel: (kh - 1) dh + 1 rows. */
	long eh = (long)(s->kh - 1) * s->dh + 1, ew = (long)(s->kw - 1) * s->dw + 1;
	long hh = (long)s->h + s->pt + s->pb, ww = (long)s->w + s->pl + s->pr;
	if (eh > hh || ew > ww)
		return -1;
	s->oh = (int)((hh - eh) / s->sh + 1);
	s->ow = (int)((ww - ew) / s->sw + 1);
	return 0;
}

/* Rows of one group's column matrix: its input channels times the kernel. */
static size_t gconv_rows(const struct sd_gconv_shape *s)
{
	return (size_t)(s->c / s->groups) * s->kh * s->kw;
}

size_t sd_gconv_workspace_floats(const struct sd_gconv_shape *s)
{
	/* The column matrix and, in backward, its gradient. */
	return 2 * gconv_rows(s) * (size_t)s->oh * s->ow;
}

/* col (rows, oh ow) from the cg input planes at x (one group of one sample). */
static void gconv_im2col(float *col, const float *x, const struct sd_gconv_shape *s)
{
	const int cg = s->c / s->groups;
	const size_t ohw = (size_t)s->oh * s->ow;
	for (int ci = 0; ci < cg; ci++) {
		const float *xp = x + (size_t)ci * s->h * s->w;
		for (int i = 0; i < s->kh; i++)
			for (int j = 0; j < s->kw; j++) {
				float *row = col + (((size_t)ci * s->kh + i) * s->kw + j) * ohw;
				for (int oy = 0; oy < s->oh; oy++) {
					const int y = oy * s->sh - s->pt + i * s->dh;
					float *r = row + (size_t)oy * s->ow;
					if (y < 0 || y >= s->h) {
						memset(r, 0, (size_t)s->ow * sizeof(float));
						continue;
					}
					for (int ox = 0; ox < s->ow; ox++) {
						const int xx = ox * s->sw - s->pl + j * s->dw;
						r[ox] = xx >= 0 && xx < s->w ? xp[(size_t)y * s->w + xx] : 0.0f;
					}
				}
			}
	}
}

/* dx (cg planes) += the adjoint of gconv_im2col applied to dcol. */
static void gconv_col2im(float *dx, const float *dcol, const struct sd_gconv_shape *s)
{
	const int cg = s->c / s->groups;
	const size_t ohw = (size_t)s->oh * s->ow;
	for (int ci = 0; ci < cg; ci++) {
		float *dp = dx + (size_t)ci * s->h * s->w;
		for (int i = 0; i < s->kh; i++)
			for (int j = 0; j < s->kw; j++) {
				const float *row = dcol + (((size_t)ci * s->kh + i) * s->kw + j) * ohw;
				for (int oy = 0; oy < s->oh; oy++) {
					const int y = oy * s->sh - s->pt + i * s->dh;
					if (y < 0 || y >= s->h)
						continue;
					const float *r = row + (size_t)oy * s->ow;
					for (int ox = 0; ox < s->ow; ox++) {
						const int xx = ox * s->sw - s->pl + j * s->dw;
						if (xx >= 0 && xx < s->w)
							dp[(size_t)y * s->w + xx] += r[ox];
					}
				}
			}
	}
}

void sd_gconv_forward(float *y, const float *x, const float *w, const float *b,
                      const struct sd_gconv_shape *s, float *ws)
{
	const int g = s->groups, cg = s->c / g, kg = s->k / g;
	const size_t rows = gconv_rows(s), ohw = (size_t)s->oh * s->ow, hw = (size_t)s->h * s->w;
	for (int n = 0; n < s->n; n++)
		for (int q = 0; q < g; q++) {
			const float *xg = x + ((size_t)n * s->c + (size_t)q * cg) * hw;
			float *yg = y + ((size_t)n * s->k + (size_t)q * kg) * ohw;
			gconv_im2col(ws, xg, s);
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kg, (int)ohw, (int)rows,
			            1.0f, w + (size_t)q * kg * rows, (int)rows, ws, (int)ohw, 0.0f, yg,
			            (int)ohw);
			if (b)
				for (int o = 0; o < kg; o++) {
					const float bo = b[q * kg + o];
					float *yp = yg + (size_t)o * ohw;
					for (size_t e = 0; e < ohw; e++)
						yp[e] += bo;
				}
		}
}

void sd_gconv_backward(float *dx, float *dw, float *db, const float *dy, const float *x,
                       const float *w, const struct sd_gconv_shape *s, float *ws)
{
	const int g = s->groups, cg = s->c / g, kg = s->k / g;
	const size_t rows = gconv_rows(s), ohw = (size_t)s->oh * s->ow, hw = (size_t)s->h * s->w;
	float *col = ws, *dcol = ws + rows * ohw;
	if (dx)
		memset(dx, 0, (size_t)s->n * s->c * hw * sizeof(float));
	for (int n = 0; n < s->n; n++)
		for (int q = 0; q < g; q++) {
			const float *xg = x + ((size_t)n * s->c + (size_t)q * cg) * hw;
			const float *dyg = dy + ((size_t)n * s->k + (size_t)q * kg) * ohw;
			const float *wg = w + (size_t)q * kg * rows;
			gconv_im2col(col, xg, s);
			/* dW_g += dY_g col^T */
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, kg, (int)rows, (int)ohw,
			            1.0f, dyg, (int)ohw, col, (int)ohw, 1.0f, dw + (size_t)q * kg * rows,
			            (int)rows);
			if (db)
				for (int o = 0; o < kg; o++) {
					const float *gp = dyg + (size_t)o * ohw;
					double acc = 0.0;
					for (size_t e = 0; e < ohw; e++)
						acc += gp[e];
					db[q * kg + o] += (float)acc;
				}
			if (!dx)
				continue;
			/* dcol = W_g^T dY_g, then scattered back onto the input. */
			cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)rows, (int)ohw, kg,
			            1.0f, wg, (int)rows, dyg, (int)ohw, 0.0f, dcol, (int)ohw);
			gconv_col2im(dx + ((size_t)n * s->c + (size_t)q * cg) * hw, dcol, s);
		}
}

/* ------------------------------------------------ padded average pooling */

/* The divisor of window (oy, ox): k^2, or the input elements it covers. */
static float avgpool_divisor(int oy, int ox, int h, int w, int k, int s, int pad, int count_pad)
{
	if (count_pad)
		return (float)(k * k);
	int y0 = oy * s - pad, x0 = ox * s - pad, y1 = y0 + k, x1 = x0 + k;
	y0 = y0 < 0 ? 0 : y0;
	x0 = x0 < 0 ? 0 : x0;
	y1 = y1 > h ? h : y1;
	x1 = x1 > w ? w : x1;
	return (float)((y1 - y0) * (x1 - x0));
}

void sd_avgpool_pad_forward(float *y, const float *x, int n, int c, int h, int w, int k, int s,
                            int pad, int count_pad)
{
	const int oh = (h + 2 * pad - k) / s + 1, ow = (w + 2 * pad - k) / s + 1;
	const size_t hw = (size_t)h * w, ohw = (size_t)oh * ow;
	const int planes = n * c;
	#pragma omp parallel for schedule(static) if ((size_t)planes * hw >= SD_LAYERS_OMP_MIN)
	for (int pl = 0; pl < planes; pl++) {
		const float *xp = x + (size_t)pl * hw;
		float *yp = y + (size_t)pl * ohw;
		for (int oy = 0; oy < oh; oy++)
			for (int ox = 0; ox < ow; ox++) {
				double acc = 0.0;
				for (int i = 0; i < k; i++) {
					const int yy = oy * s - pad + i;
					if (yy < 0 || yy >= h)
						continue;
					for (int j = 0; j < k; j++) {
						const int xx = ox * s - pad + j;
						if (xx >= 0 && xx < w)
							acc += xp[(size_t)yy * w + xx];
					}
				}
				yp[oy * ow + ox] =
					(float)(acc / avgpool_divisor(oy, ox, h, w, k, s, pad, count_pad));
			}
	}
}

void sd_avgpool_pad_backward(float *dx, const float *dy, int n, int c, int h, int w, int k,
                             int s, int pad, int count_pad)
{
	const int oh = (h + 2 * pad - k) / s + 1, ow = (w + 2 * pad - k) / s + 1;
	const size_t hw = (size_t)h * w, ohw = (size_t)oh * ow;
	const int planes = n * c;
	#pragma omp parallel for schedule(static) if ((size_t)planes * hw >= SD_LAYERS_OMP_MIN)
	for (int pl = 0; pl < planes; pl++) {
		float *dp = dx + (size_t)pl * hw;
		const float *gp = dy + (size_t)pl * ohw;
		memset(dp, 0, sizeof(float) * hw);
		for (int oy = 0; oy < oh; oy++)
			for (int ox = 0; ox < ow; ox++) {
				const float g = gp[oy * ow + ox] /
				                avgpool_divisor(oy, ox, h, w, k, s, pad, count_pad);
				for (int i = 0; i < k; i++) {
					const int yy = oy * s - pad + i;
					if (yy < 0 || yy >= h)
						continue;
					for (int j = 0; j < k; j++) {
						const int xx = ox * s - pad + j;
						if (xx >= 0 && xx < w)
							dp[(size_t)yy * w + xx] += g;
					}
				}
			}
	}
}

/* ------------------------------------------------- elementwise arithmetic */

static inline float binop(enum sd_binop op, float u, float v)
{
	switch (op) {
	case SD_BIN_ADD: return u + v;
	case SD_BIN_SUB: return u - v;
	case SD_BIN_MUL: return u * v;
	case SD_BIN_DIV: return u / v;
	}
	return 0.0f;
}

/* d(u op v)/du and /dv, times g. */
static inline float binop_du(enum sd_binop op, float g, float v)
{
	return op == SD_BIN_MUL ? g * v : op == SD_BIN_DIV ? g / v : g;
}

static inline float binop_dv(enum sd_binop op, float g, float u, float v)
{
	switch (op) {
	case SD_BIN_ADD: return g;
	case SD_BIN_SUB: return -g;
	case SD_BIN_MUL: return g * u;
	case SD_BIN_DIV: return -g * u / (v * v);
	}
	return 0.0f;
}

void sd_binary_forward(float *y, const float *a, const float *b, size_t count, enum sd_binop op)
{
	#pragma omp parallel for schedule(static) if (count >= SD_LAYERS_OMP_MIN)
	for (size_t e = 0; e < count; e++)
		y[e] = binop(op, a[e], b[e]);
}

void sd_binary_backward(float *da, float *db, const float *dy, const float *a, const float *b,
                        size_t count, enum sd_binop op)
{
	#pragma omp parallel for schedule(static) if (count >= SD_LAYERS_OMP_MIN)
	for (size_t e = 0; e < count; e++) {
		const float g = dy[e];
		if (da)
			da[e] = binop_du(op, g, b[e]);
		if (db)
			db[e] = binop_dv(op, g, a[e], b[e]);
	}
}

void sd_binary_const_forward(float *y, const float *x, const float *k, int kc, int n, int c,
                             int hw, enum sd_binop op, int k_first)
{
	const int planes = n * c;
	#pragma omp parallel for schedule(static) if ((size_t)planes * hw >= SD_LAYERS_OMP_MIN)
	for (int pl = 0; pl < planes; pl++) {
		const float kv = k[kc == 1 ? 0 : pl % c];
		const float *xp = x + (size_t)pl * hw;
		float *yp = y + (size_t)pl * hw;
		if (k_first)
			for (int e = 0; e < hw; e++)
				yp[e] = binop(op, kv, xp[e]);
		else
			for (int e = 0; e < hw; e++)
				yp[e] = binop(op, xp[e], kv);
	}
}

/* The constant's gradient over channel ch (all channels when kc is 1) of
 * every sample, summed in double in a fixed order. */
static double const_grad(const float *dy, const float *x, float kv, int n, int c, int hw,
                         int ch0, int ch1, enum sd_binop op, int k_first)
{
	double acc = 0.0;
	for (int i = 0; i < n; i++)
		for (int ch = ch0; ch < ch1; ch++) {
			const size_t base = ((size_t)i * c + ch) * hw;
			for (int e = 0; e < hw; e++) {
				const float g = dy[base + e], xv = x[base + e];
				acc += k_first ? binop_du(op, g, xv) : binop_dv(op, g, xv, kv);
			}
		}
	return acc;
}

void sd_binary_const_backward(float *dx, float *dk, const float *dy, const float *x,
                              const float *k, int kc, int n, int c, int hw, enum sd_binop op,
                              int k_first)
{
	const int planes = n * c;
	if (dx) {
		#pragma omp parallel for schedule(static) if ((size_t)planes * hw >= SD_LAYERS_OMP_MIN)
		for (int pl = 0; pl < planes; pl++) {
			const float kv = k[kc == 1 ? 0 : pl % c];
			const float *gp = dy + (size_t)pl * hw, *xp = x + (size_t)pl * hw;
			float *dp = dx + (size_t)pl * hw;
			if (k_first)
				for (int e = 0; e < hw; e++)
					dp[e] = binop_dv(op, gp[e], kv, xp[e]);
			else
				for (int e = 0; e < hw; e++)
					dp[e] = binop_du(op, gp[e], kv);
		}
	}
	if (!dk)
		return;
	if (kc == 1) {
		dk[0] += (float)const_grad(dy, x, k[0], n, c, hw, 0, c, op, k_first);
		return;
	}
	#pragma omp parallel for schedule(static) if ((size_t)planes * hw >= SD_LAYERS_OMP_MIN)
	for (int ch = 0; ch < c; ch++)
		dk[ch] += (float)const_grad(dy, x, k[ch], n, c, hw, ch, ch + 1, op, k_first);
}

/* ----------------------------------------------------------------- dropout */

void sd_dropout_forward(float *y, uint8_t *mask, const float *x, int n, size_t per, float p,
                        uint64_t seed, uint64_t first_stream)
{
	const float scale = 1.0f / (1.0f - p);
	#pragma omp parallel for schedule(static) if ((size_t)n * per >= SD_LAYERS_OMP_MIN)
	for (int i = 0; i < n; i++) {
		struct sd_rng r;
		sd_rng_seed(&r, seed, first_stream + (uint64_t)i);
		const size_t base = (size_t)i * per;
		for (size_t e = 0; e < per; e++) {
			const int keep = sd_rng_uniform(&r) >= p;
			mask[base + e] = (uint8_t)keep;
			y[base + e] = keep ? x[base + e] * scale : 0.0f;
		}
	}
}

void sd_dropout_backward(float *dx, const float *dy, const uint8_t *mask, size_t count, float p)
{
	const float scale = 1.0f / (1.0f - p);
	#pragma omp parallel for schedule(static) if (count >= SD_LAYERS_OMP_MIN)
	for (size_t e = 0; e < count; e++)
		dx[e] = mask[e] ? dy[e] * scale : 0.0f;
}
