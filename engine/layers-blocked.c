/* engine/layers-blocked.c - layers in channel-blocked layouts and the fused
 * batch-norm + residual + ReLU kernels (see layers.h, "channel-blocked
 * layouts").
 *
 * The ResNet's batch-norms, residual adds and ReLUs are passes over memory
 * with a few operations per element; fused, a block's tail reads the
 * convolution output once for the statistics and once more to write the
 * activated result (instead of BN stats, BN apply, add, ReLU: six passes),
 * and its backward reads dy, y and x twice and writes dx and the residual's
 * gradient once.
 *
 * Reproducibility: statistics are summed per fixed group of samples (the
 * groups depend on the batch and the channel count, never on the thread
 * count) in double precision, and the groups are added in order; every
 * other output element is written by one thread.  So the results are the
 * same bits for any number of OpenMP threads.
 *
 * Speed: the build targets baseline x86-64, so the per-element loops are
 * also compiled for AVX2 and AVX-512 and the best one the CPU has runs
 * (GCC's target_clones, which picks by CPU feature).  The clones compute
 * the same operations in the same order.
 */
#include "engine/layers.h"

#include <math.h>
#include <omp.h>
#include <stddef.h>
#include <string.h>

/* Sample groups of the statistics, at most; fewer when c is large so that
 * the partial sums fit in SD_BN_PARTIALS doubles on the stack (which is
 * what limits c to SD_BN_CHANNELS_MAX, layers.h). */
#define SD_BN_GROUPS 8
#define SD_BN_PARTIALS (2 * SD_BN_CHANNELS_MAX)

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define SD_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define SD_CLONES
#endif

/* Offset of the first element of channel block cb of sample i. */
static inline size_t sd_plane(int i, int cb, int ncb, int hw, int blk)
{
	return ((size_t)i * ncb + cb) * (size_t)hw * blk;
}

static int sd_bn_groups(int n, int c)
{
	int g = n < SD_BN_GROUPS ? n : SD_BN_GROUPS;
	while (g > 1 && (size_t)g * 2 * c > SD_BN_PARTIALS)
		g--;
	return g;
}

static int sd_block_of(int count, int parts, int i)
{
	return (int)((long)count * i / parts);
}

/* ------------------------------------------------------------- layouts */

void sd_layout_to_blocked(float *dst, const float *src, int n, int c, int hw, int blk)
{
	const int ncb = c / blk;
	#pragma omp parallel for schedule(static) if ((size_t)n * c * hw >= SD_LAYERS_OMP_MIN)
	for (int t = 0; t < n * ncb; t++) {
		const int i = t / ncb, cb = t % ncb;
		float *d = dst + sd_plane(i, cb, ncb, hw, blk);
		const float *s = src + ((size_t)i * c + (size_t)cb * blk) * hw;
		for (int p = 0; p < hw; p++)
			for (int j = 0; j < blk; j++)
				d[(size_t)p * blk + j] = s[(size_t)j * hw + p];
	}
}

void sd_layout_from_blocked(float *dst, const float *src, int n, int c, int hw, int blk)
{
	const int ncb = c / blk;
	#pragma omp parallel for schedule(static) if ((size_t)n * c * hw >= SD_LAYERS_OMP_MIN)
	for (int t = 0; t < n * ncb; t++) {
		const int i = t / ncb, cb = t % ncb;
		const float *s = src + sd_plane(i, cb, ncb, hw, blk);
		float *d = dst + ((size_t)i * c + (size_t)cb * blk) * hw;
		for (int j = 0; j < blk; j++)
			for (int p = 0; p < hw; p++)
				d[(size_t)j * hw + p] = s[(size_t)p * blk + j];
	}
}

/* ------------------------------------------------ vectors of 4 lanes
 *
 * The loops below run over whole pixels: blk channel lanes (8 or 16) of
 * floats, in groups of 4 (G = blk / 4 groups).  NCHW planes (blk 1) run
 * over 8 consecutive pixels of one channel at a time, G = 2, every lane
 * the same channel.  GCC's vector extensions keep the lanes in registers on
 * every target (two SSE2 halves, one AVX2 register, or part of an AVX-512
 * one); sums are in double, 4 lanes per vector. */
typedef float sd_v4f __attribute__((vector_size(16)));
typedef int sd_v4i __attribute__((vector_size(16)));
typedef double sd_v4d __attribute__((vector_size(32)));

static inline sd_v4f sd_ld(const float *p)
{
	sd_v4f v;
	memcpy(&v, p, sizeof v);
	return v;
}

static inline void sd_st(float *p, sd_v4f v)
{
	memcpy(p, &v, sizeof v);
}

/* 4 floats widened to doubles (a macro: a function returning a 32-byte
 * vector would have a different ABI in the AVX clones). */
#define sd_wide(v) __builtin_convertvector((v), sd_v4d)

/* v where keep > 0, else +0 (a NaN in keep gives 0, as "keep > 0 ? v : 0"). */
static inline sd_v4f sd_mask_pos(sd_v4f v, sd_v4f keep)
{
	const sd_v4f zero = { 0.0f, 0.0f, 0.0f, 0.0f };
	return (sd_v4f)((sd_v4i)v & (keep > zero));
}

/* Pixels of layout blk handled per vector step, and groups of 4 in it. */
static inline int sd_step(int blk)
{
	return blk == 1 ? 8 : blk;
}

/* ------------------------------------------------ batch-norm statistics */

/* Sums of x and x^2 over count floats of one plane, per lane group
 * (G groups of 4 lanes; count a multiple of 4 G except in NCHW, whose tail
 * goes to lane 0 upwards). */
static inline __attribute__((always_inline)) void
sd_sums_g(const float *restrict x, size_t count, int G, sd_v4d *restrict s, sd_v4d *restrict q)
{
	size_t i = 0;
	const size_t step = 4 * (size_t)G;
	for (; i + step <= count; i += step)
		for (int k = 0; k < G; k++) {
			sd_v4d v = sd_wide(sd_ld(x + i + 4 * k));
			s[k] += v;
			q[k] += v * v;
		}
	for (int j = 0; i < count; i++, j++) {
		double v = x[i];
		s[j / 4][j % 4] += v;
		q[j / 4][j % 4] += v * v;
	}
}

/* The lanes of G groups folded into blk per-channel sums (NCHW: all 8
 * lanes are the one channel). */
static void sd_fold(double *out, const sd_v4d *acc, int G, int blk)
{
	if (blk == 1) {
		out[0] = ((acc[0][0] + acc[0][1]) + (acc[0][2] + acc[0][3])) +
		         ((acc[1][0] + acc[1][1]) + (acc[1][2] + acc[1][3]));
		return;
	}
	for (int k = 0; k < G; k++)
		for (int j = 0; j < 4; j++)
			out[4 * k + j] = acc[k][j];
}

/* Sums of x and x^2 per channel lane of channel block cb over samples
 * [i0, i1): s, q: blk doubles each, overwritten. */
SD_CLONES
static void sd_bn_sums(double *s, double *q, const float *x, int i0, int i1, int cb, int ncb,
                       int hw, int blk)
{
	sd_v4d as[4] = { 0 }, aq[4] = { 0 };
	const int G = sd_step(blk) / 4;
	const size_t cnt = (size_t)hw * blk;
	for (int i = i0; i < i1; i++) {
		const float *xp = x + sd_plane(i, cb, ncb, hw, blk);
		if (G == 4)
			sd_sums_g(xp, cnt, 4, as, aq);
		else
			sd_sums_g(xp, cnt, 2, as, aq);
	}
	sd_fold(s, as, G, blk);
	sd_fold(q, aq, G, blk);
}

/* dz = relu ? (y > 0 ? dy : 0) : dy; sums of dz and dz (x - mean) per lane
 * group, as sd_sums_g.  mean: 4 G lanes. */
static inline __attribute__((always_inline)) void
sd_bwd_sums_g(const float *restrict dy, const float *restrict y, const float *restrict x,
              size_t count, int G, const float *restrict mean, int relu, sd_v4d *restrict s,
              sd_v4d *restrict q)
{
	sd_v4d m[4];
	for (int k = 0; k < G; k++)
		m[k] = sd_wide(sd_ld(mean + 4 * k));
	size_t i = 0;
	const size_t step = 4 * (size_t)G;
	for (; i + step <= count; i += step)
		for (int k = 0; k < G; k++) {
			sd_v4f g = sd_ld(dy + i + 4 * k);
			if (relu)
				g = sd_mask_pos(g, sd_ld(y + i + 4 * k));
			sd_v4d gd = sd_wide(g);
			s[k] += gd;
			q[k] += gd * (sd_wide(sd_ld(x + i + 4 * k)) - m[k]);
		}
	for (int j = 0; i < count; i++, j++) {
		float g = relu && !(y[i] > 0.0f) ? 0.0f : dy[i];
		s[j / 4][j % 4] += g;
		q[j / 4][j % 4] += (double)g * ((double)x[i] - mean[j]);
	}
}

SD_CLONES
static void sd_bn_bwd_sums(double *s, double *q, const float *dy, const float *y,
                           const float *x, const float *mean_lanes, int relu, int i0, int i1,
                           int cb, int ncb, int hw, int blk)
{
	sd_v4d as[4] = { 0 }, aq[4] = { 0 };
	const int G = sd_step(blk) / 4;
	const size_t cnt = (size_t)hw * blk;
	for (int i = i0; i < i1; i++) {
		const size_t off = sd_plane(i, cb, ncb, hw, blk);
		if (G == 4)
			sd_bwd_sums_g(dy + off, y + off, x + off, cnt, 4, mean_lanes, relu, as, aq);
		else if (relu)
			sd_bwd_sums_g(dy + off, y + off, x + off, cnt, 2, mean_lanes, 1, as, aq);
		else
			sd_bwd_sums_g(dy + off, y + off, x + off, cnt, 2, mean_lanes, 0, as, aq);
	}
	sd_fold(s, as, G, blk);
	sd_fold(q, aq, G, blk);
}

/* -------------------------------------------------- batch-norm passes */

/* y = act((x - mean) scale + shift (+ r)) over one plane of count floats;
 * mean, scale, shift: 4 G lanes. */
static inline __attribute__((always_inline)) void
sd_bn_apply_g(float *restrict y, const float *restrict x, const float *restrict r, size_t count,
              int G, const float *restrict mean, const float *restrict scale,
              const float *restrict shift, int relu)
{
	sd_v4f mu[4], sc[4], sh[4];
	for (int k = 0; k < G; k++) {
		mu[k] = sd_ld(mean + 4 * k);
		sc[k] = sd_ld(scale + 4 * k);
		sh[k] = sd_ld(shift + 4 * k);
	}
	size_t i = 0;
	const size_t step = 4 * (size_t)G;
	for (; i + step <= count; i += step)
		for (int k = 0; k < G; k++) {
			sd_v4f v = (sd_ld(x + i + 4 * k) - mu[k]) * sc[k] + sh[k];
			if (r)
				v += sd_ld(r + i + 4 * k);
			sd_st(y + i + 4 * k, relu ? sd_mask_pos(v, v) : v);
		}
	for (int j = 0; i < count; i++, j++) {
		float v = (x[i] - mean[j]) * scale[j] + shift[j];
		if (r)
			v += r[i];
		y[i] = relu ? (v > 0.0f ? v : 0.0f) : v;
	}
}

SD_CLONES
static void sd_bn_apply(float *y, const float *x, const float *r, size_t count, int blk,
                        const float *mean, const float *scale, const float *shift, int relu)
{
	/* Specialised per (lane groups, residual, relu): no test in the loop. */
	if (sd_step(blk) == 16) {
		if (r)
			relu ? sd_bn_apply_g(y, x, r, count, 4, mean, scale, shift, 1)
			     : sd_bn_apply_g(y, x, r, count, 4, mean, scale, shift, 0);
		else
			relu ? sd_bn_apply_g(y, x, NULL, count, 4, mean, scale, shift, 1)
			     : sd_bn_apply_g(y, x, NULL, count, 4, mean, scale, shift, 0);
	} else {
		if (r)
			relu ? sd_bn_apply_g(y, x, r, count, 2, mean, scale, shift, 1)
			     : sd_bn_apply_g(y, x, r, count, 2, mean, scale, shift, 0);
		else
			relu ? sd_bn_apply_g(y, x, NULL, count, 2, mean, scale, shift, 1)
			     : sd_bn_apply_g(y, x, NULL, count, 2, mean, scale, shift, 0);
	}
}

/* dz = masked dy; dx = k1 (dz - mdy - (x - mean) is mdyx); dr = dz. */
static inline __attribute__((always_inline)) void
sd_bn_bwd_apply_g(float *restrict dx, float *restrict dr, const float *restrict dy,
                  const float *restrict y, const float *restrict x, size_t count, int G,
                  const float *restrict mean, const float *restrict is, const float *restrict k1,
                  const float *restrict mdy, const float *restrict mdyx, int relu)
{
	sd_v4f mu[4], iv[4], a[4], b[4], d[4];
	for (int k = 0; k < G; k++) {
		mu[k] = sd_ld(mean + 4 * k);
		iv[k] = sd_ld(is + 4 * k);
		a[k] = sd_ld(k1 + 4 * k);
		b[k] = sd_ld(mdy + 4 * k);
		d[k] = sd_ld(mdyx + 4 * k);
	}
	size_t i = 0;
	const size_t step = 4 * (size_t)G;
	for (; i + step <= count; i += step)
		for (int k = 0; k < G; k++) {
			sd_v4f g = sd_ld(dy + i + 4 * k);
			if (relu)
				g = sd_mask_pos(g, sd_ld(y + i + 4 * k));
			sd_v4f xh = (sd_ld(x + i + 4 * k) - mu[k]) * iv[k];
			sd_st(dx + i + 4 * k, a[k] * (g - b[k] - xh * d[k]));
			if (dr)
				sd_st(dr + i + 4 * k, g);
		}
	for (int j = 0; i < count; i++, j++) {
		float g = relu && !(y[i] > 0.0f) ? 0.0f : dy[i];
		float xh = (x[i] - mean[j]) * is[j];
		dx[i] = k1[j] * (g - mdy[j] - xh * mdyx[j]);
		if (dr)
			dr[i] = g;
	}
}

SD_CLONES
static void sd_bn_bwd_apply(float *dx, float *dr, const float *dy, const float *y,
                            const float *x, size_t count, int blk, const float *mean,
                            const float *is, const float *k1, const float *mdy,
                            const float *mdyx, int relu)
{
	const int G = sd_step(blk) / 4;
	if (G == 4) {
		if (dr)
			relu ? sd_bn_bwd_apply_g(dx, dr, dy, y, x, count, 4, mean, is, k1, mdy, mdyx, 1)
			     : sd_bn_bwd_apply_g(dx, dr, dy, y, x, count, 4, mean, is, k1, mdy, mdyx, 0);
		else
			relu ? sd_bn_bwd_apply_g(dx, NULL, dy, y, x, count, 4, mean, is, k1, mdy, mdyx, 1)
			     : sd_bn_bwd_apply_g(dx, NULL, dy, y, x, count, 4, mean, is, k1, mdy, mdyx, 0);
	} else {
		if (dr)
			relu ? sd_bn_bwd_apply_g(dx, dr, dy, y, x, count, 2, mean, is, k1, mdy, mdyx, 1)
			     : sd_bn_bwd_apply_g(dx, dr, dy, y, x, count, 2, mean, is, k1, mdy, mdyx, 0);
		else
			relu ? sd_bn_bwd_apply_g(dx, NULL, dy, y, x, count, 2, mean, is, k1, mdy, mdyx, 1)
			     : sd_bn_bwd_apply_g(dx, NULL, dy, y, x, count, 2, mean, is, k1, mdy, mdyx, 0);
	}
}

/* Per-lane constants of channel block cb: sd_step(blk) lanes, lane j the
 * channel cb blk + j (NCHW: every lane channel cb). */
static void sd_lanes(float *dst, const float *per_channel, int cb, int blk)
{
	for (int j = 0; j < sd_step(blk); j++)
		dst[j] = per_channel[cb * blk + (blk == 1 ? 0 : j)];
}

void sd_batchnorm_act_forward_train(float *y, float *mean, float *invstd,
                                    float *running_mean, float *running_var,
                                    const float *x, const float *r, const float *gamma,
                                    const float *beta, int n, int c, int hw, int blk,
                                    int relu, float momentum, float eps)
{
	const int ncb = c / blk, groups = sd_bn_groups(n, c), tasks = ncb * groups;
	const size_t m = (size_t)n * hw, total = m * c;
	double part[SD_BN_PARTIALS];
	/* Partial sums: task (cb, g) writes its 2 blk doubles. */
	#pragma omp parallel for schedule(static) if (total >= SD_LAYERS_OMP_MIN)
	for (int t = 0; t < tasks; t++) {
		const int cb = t / groups, g = t % groups;
		double *s = part + (size_t)t * 2 * blk;
		sd_bn_sums(s, s + blk, x, sd_block_of(n, groups, g), sd_block_of(n, groups, g + 1), cb,
		           ncb, hw, blk);
	}
	for (int ch = 0; ch < c; ch++) {
		const int cb = ch / blk, j = ch % blk;
		double s = 0.0, q = 0.0;
		for (int g = 0; g < groups; g++) {
			const double *pg = part + ((size_t)cb * groups + g) * 2 * blk;
			s += pg[j];
			q += pg[blk + j];
		}
		double mu = s / (double)m;
		double ss = q - s * mu;   /* sum of squared deviations */
		if (ss < 0.0)
			ss = 0.0;
		double var = ss / (double)m;
		double is = 1.0 / sqrt(var + (double)eps);
		mean[ch] = (float)mu;
		invstd[ch] = (float)is;
		double unbiased = m > 1 ? ss / (double)(m - 1) : var;
		running_mean[ch] = (1.0f - momentum) * running_mean[ch] + momentum * (float)mu;
		running_var[ch] = (1.0f - momentum) * running_var[ch] + momentum * (float)unbiased;
	}
	float scale_c[SD_BN_CHANNELS_MAX];
	for (int ch = 0; ch < c; ch++)
		scale_c[ch] = invstd[ch] * gamma[ch];
	#pragma omp parallel for schedule(static) if (total >= SD_LAYERS_OMP_MIN)
	for (int t = 0; t < n * ncb; t++) {
		const int i = t / ncb, cb = t % ncb;
		float mu[16], scale[16], shift[16];
		sd_lanes(mu, mean, cb, blk);
		sd_lanes(scale, scale_c, cb, blk);
		sd_lanes(shift, beta, cb, blk);
		const size_t off = sd_plane(i, cb, ncb, hw, blk);
		sd_bn_apply(y + off, x + off, r ? r + off : NULL, (size_t)hw * blk, blk, mu, scale,
		            shift, relu);
	}
}

void sd_batchnorm_act_forward_eval(float *y, const float *x, const float *r,
                                   const float *gamma, const float *beta,
                                   const float *running_mean, const float *running_var,
                                   int n, int c, int hw, int blk, int relu, float eps)
{
	const int ncb = c / blk;
	float scale_c[SD_BN_CHANNELS_MAX];
	for (int ch = 0; ch < c; ch++)
		scale_c[ch] = (float)(gamma[ch] / sqrt((double)running_var[ch] + eps));
	#pragma omp parallel for schedule(static) if ((size_t)n * c * hw >= SD_LAYERS_OMP_MIN)
	for (int t = 0; t < n * ncb; t++) {
		const int i = t / ncb, cb = t % ncb;
		float mu[16], scale[16], shift[16];
		sd_lanes(mu, running_mean, cb, blk);
		sd_lanes(scale, scale_c, cb, blk);
		sd_lanes(shift, beta, cb, blk);
		const size_t off = sd_plane(i, cb, ncb, hw, blk);
		sd_bn_apply(y + off, x + off, r ? r + off : NULL, (size_t)hw * blk, blk, mu, scale,
		            shift, relu);
	}
}

void sd_batchnorm_act_backward(float *dx, float *dr, float *dgamma, float *dbeta,
                               const float *dy, const float *y, const float *x,
                               const float *mean, const float *invstd, const float *gamma,
                               int n, int c, int hw, int blk, int relu)
{
	const int ncb = c / blk, groups = sd_bn_groups(n, c), tasks = ncb * groups;
	const size_t m = (size_t)n * hw, total = m * c;
	double part[SD_BN_PARTIALS];
	float k1[SD_BN_CHANNELS_MAX], mdy[SD_BN_CHANNELS_MAX], mdyx[SD_BN_CHANNELS_MAX];
	#pragma omp parallel for schedule(static) if (total >= SD_LAYERS_OMP_MIN)
	for (int t = 0; t < tasks; t++) {
		const int cb = t / groups, g = t % groups;
		double *s = part + (size_t)t * 2 * blk;
		float mu[16];
		sd_lanes(mu, mean, cb, blk);
		sd_bn_bwd_sums(s, s + blk, dy, y, x, mu, relu, sd_block_of(n, groups, g),
		               sd_block_of(n, groups, g + 1), cb, ncb, hw, blk);
	}
	/* With xhat = (x - mean) invstd and dz the masked dy:
	 *   dx = gamma invstd (dz - mean(dz) - xhat mean(dz xhat)),
	 * dgamma = sum(dz xhat), dbeta = sum(dz) (Ioffe & Szegedy 2015). */
	for (int ch = 0; ch < c; ch++) {
		const int cb = ch / blk, j = ch % blk;
		double s = 0.0, q = 0.0;
		for (int g = 0; g < groups; g++) {
			const double *pg = part + ((size_t)cb * groups + g) * 2 * blk;
			s += pg[j];
			q += pg[blk + j];
		}
		q *= invstd[ch];   /* sum(dz xhat) */
		dbeta[ch] += (float)s;
		dgamma[ch] += (float)q;
		k1[ch] = (float)(gamma[ch] * (double)invstd[ch]);
		mdy[ch] = (float)(s / (double)m);
		mdyx[ch] = (float)(q / (double)m);
	}
	#pragma omp parallel for schedule(static) if (total >= SD_LAYERS_OMP_MIN)
	for (int t = 0; t < n * ncb; t++) {
		const int i = t / ncb, cb = t % ncb;
		float mu[16], is[16], a[16], b[16], d[16];
		sd_lanes(mu, mean, cb, blk);
		sd_lanes(is, invstd, cb, blk);
		sd_lanes(a, k1, cb, blk);
		sd_lanes(b, mdy, cb, blk);
		sd_lanes(d, mdyx, cb, blk);
		const size_t off = sd_plane(i, cb, ncb, hw, blk);
		sd_bn_bwd_apply(dx + off, dr ? dr + off : NULL, dy + off, y + off, x + off,
		                (size_t)hw * blk, blk, mu, is, a, b, d, relu);
	}
}

/* -------------------------------------------------------------- shortcut */

/* Offset of element (i, ch, yy, xx) of an (., c, h, w) tensor in layout blk. */
static inline size_t sd_at(int i, int ch, int yy, int xx, int c, int h, int w, int blk)
{
	return (((size_t)i * (c / blk) + ch / blk) * ((size_t)h * w) + (size_t)yy * w + xx) * blk +
	       ch % blk;
}

void sd_shortcut_forward(float *r, const float *b, int n, int c, int h, int w, int cb, int hb,
                         int wb, int s, int blk)
{
	const int pad = (c - cb) / 2;
	#pragma omp parallel for schedule(static) if ((size_t)n * c * h * w >= SD_LAYERS_OMP_MIN)
	for (int i = 0; i < n; i++)
		for (int ch = 0; ch < c; ch++) {
			const int bc = ch - pad;
			for (int yy = 0; yy < h; yy++)
				for (int xx = 0; xx < w; xx++)
					r[sd_at(i, ch, yy, xx, c, h, w, blk)] =
						bc >= 0 && bc < cb
						? b[sd_at(i, bc, yy * s, xx * s, cb, hb, wb, blk)] : 0.0f;
		}
}

void sd_shortcut_backward(float *db, const float *dr, int n, int c, int h, int w, int cb,
                          int hb, int wb, int s, int blk)
{
	const int pad = (c - cb) / 2;
	/* One thread per sample: with s = 1 no two outputs share an input, and
	 * with s > 1 the sampled positions are distinct too. */
	#pragma omp parallel for schedule(static) if ((size_t)n * c * h * w >= SD_LAYERS_OMP_MIN)
	for (int i = 0; i < n; i++)
		for (int bc = 0; bc < cb; bc++)
			for (int yy = 0; yy < h; yy++)
				for (int xx = 0; xx < w; xx++)
					db[sd_at(i, bc, yy * s, xx * s, cb, hb, wb, blk)] +=
						dr[sd_at(i, bc + pad, yy, xx, c, h, w, blk)];
}

/* ------------------------------------------------------ global average */

void sd_global_avgpool_forward(float *y, const float *x, int n, int c, int hw, int blk)
{
	const int ncb = c / blk;
	const double inv = 1.0 / hw;
	#pragma omp parallel for schedule(static) if ((size_t)n * c * hw >= SD_LAYERS_OMP_MIN)
	for (int t = 0; t < n * ncb; t++) {
		const int i = t / ncb, cb = t % ncb;
		const float *xp = x + sd_plane(i, cb, ncb, hw, blk);
		double acc[16] = { 0 };
		for (int p = 0; p < hw; p++)
			for (int j = 0; j < blk; j++)
				acc[j] += xp[(size_t)p * blk + j];
		for (int j = 0; j < blk; j++)
			y[(size_t)i * c + cb * blk + j] = (float)(acc[j] * inv);
	}
}

void sd_global_avgpool_backward(float *dx, const float *dy, int n, int c, int hw, int blk)
{
	const int ncb = c / blk;
	const float inv = (float)(1.0 / hw);
	#pragma omp parallel for schedule(static) if ((size_t)n * c * hw >= SD_LAYERS_OMP_MIN)
	for (int t = 0; t < n * ncb; t++) {
		const int i = t / ncb, cb = t % ncb;
		float *dp = dx + sd_plane(i, cb, ncb, hw, blk);
		float g[16];
		for (int j = 0; j < blk; j++)
			g[j] = dy[(size_t)i * c + cb * blk + j] * inv;
		for (int p = 0; p < hw; p++)
			for (int j = 0; j < blk; j++)
				dp[(size_t)p * blk + j] = g[j];
	}
}
