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
 * also compiled for AVX2 + FMA and AVX-512 and the best one the CPU has runs
 * (GCC's target_clones); they differ in the last bits (FMA), never across
 * runs on one machine.
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

/* Below this many elements a parallel region costs more than it saves. */
#define SD_BLK_OMP_MIN 32768

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define SD_CLONES __attribute__((target_clones("arch=skylake-avx512", "arch=haswell", "default")))
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
	#pragma omp parallel for schedule(static) if ((size_t)n * c * hw >= SD_BLK_OMP_MIN)
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
	#pragma omp parallel for schedule(static) if ((size_t)n * c * hw >= SD_BLK_OMP_MIN)
	for (int t = 0; t < n * ncb; t++) {
		const int i = t / ncb, cb = t % ncb;
		const float *s = src + sd_plane(i, cb, ncb, hw, blk);
		float *d = dst + ((size_t)i * c + (size_t)cb * blk) * hw;
		for (int j = 0; j < blk; j++)
			for (int p = 0; p < hw; p++)
				d[(size_t)j * hw + p] = s[(size_t)p * blk + j];
	}
}

/* ------------------------------------------------ batch-norm statistics */

/* Sums of x and x^2 over count floats, lane by lane: lane j gets elements
 * j, j + W, j + 2W ... (W = 8 or 16).  In double, lanes independent, so the
 * order is fixed. */
static inline __attribute__((always_inline)) void
sd_sums_w(const float *restrict x, size_t count, int W, double *restrict s, double *restrict q)
{
	size_t i = 0;
	for (; i + (size_t)W <= count; i += W)
		for (int j = 0; j < W; j++) {
			double v = x[i + j];
			s[j] += v;
			q[j] += v * v;
		}
	for (int j = 0; i < count; i++, j++) {
		double v = x[i];
		s[j] += v;
		q[j] += v * v;
	}
}

/* Sums of x and x^2 per channel lane of channel block cb over samples
 * [i0, i1): s, q: blk doubles each, overwritten. */
SD_CLONES
static void sd_bn_sums(double *s, double *q, const float *x, int i0, int i1, int cb, int ncb,
                       int hw, int blk)
{
	double as[16] = { 0 }, aq[16] = { 0 };
	for (int i = i0; i < i1; i++) {
		const float *xp = x + sd_plane(i, cb, ncb, hw, blk);
		const size_t cnt = (size_t)hw * blk;
		if (blk == 16)
			sd_sums_w(xp, cnt, 16, as, aq);
		else
			sd_sums_w(xp, cnt, 8, as, aq);   /* blk 8, or blk 1 in 8 lanes */
	}
	if (blk == 1) {
		s[0] = ((as[0] + as[1]) + (as[2] + as[3])) + ((as[4] + as[5]) + (as[6] + as[7]));
		q[0] = ((aq[0] + aq[1]) + (aq[2] + aq[3])) + ((aq[4] + aq[5]) + (aq[6] + aq[7]));
	} else {
		for (int j = 0; j < blk; j++) {
			s[j] = as[j];
			q[j] = aq[j];
		}
	}
}

/* dz = relu ? (y > 0 ? dy : 0) : dy, and the sums of dz and dz (x - mean)
 * per lane, as sd_sums_w. */
static inline __attribute__((always_inline)) void
sd_bwd_sums_w(const float *restrict dy, const float *restrict y, const float *restrict x,
              size_t count, int W, const float *restrict mean, int relu, double *restrict s,
              double *restrict q)
{
	size_t i = 0;
	for (; i + (size_t)W <= count; i += W)
		for (int j = 0; j < W; j++) {
			float g = relu && !(y[i + j] > 0.0f) ? 0.0f : dy[i + j];
			s[j] += g;
			q[j] += (double)g * ((double)x[i + j] - mean[j]);
		}
	for (int j = 0; i < count; i++, j++) {
		float g = relu && !(y[i] > 0.0f) ? 0.0f : dy[i];
		s[j] += g;
		q[j] += (double)g * ((double)x[i] - mean[j]);
	}
}

SD_CLONES
static void sd_bn_bwd_sums(double *s, double *q, const float *dy, const float *y,
                           const float *x, const float *mean_blk, int relu, int i0, int i1,
                           int cb, int ncb, int hw, int blk)
{
	double as[16] = { 0 }, aq[16] = { 0 };
	float m[16];
	for (int j = 0; j < 16; j++)
		m[j] = mean_blk[blk == 1 ? 0 : j % blk];
	for (int i = i0; i < i1; i++) {
		const size_t off = sd_plane(i, cb, ncb, hw, blk), cnt = (size_t)hw * blk;
		if (blk == 16)
			sd_bwd_sums_w(dy + off, y + off, x + off, cnt, 16, m, relu, as, aq);
		else
			sd_bwd_sums_w(dy + off, y + off, x + off, cnt, 8, m, relu, as, aq);
	}
	if (blk == 1) {
		s[0] = ((as[0] + as[1]) + (as[2] + as[3])) + ((as[4] + as[5]) + (as[6] + as[7]));
		q[0] = ((aq[0] + aq[1]) + (aq[2] + aq[3])) + ((aq[4] + aq[5]) + (aq[6] + aq[7]));
	} else {
		for (int j = 0; j < blk; j++) {
			s[j] = as[j];
			q[j] = aq[j];
		}
	}
}

/* -------------------------------------------------- batch-norm passes */

/* y = act((x - mean) scale + shift (+ r)) over one channel block's plane;
 * mean, scale, shift: blk lanes (1 for NCHW). */
static inline __attribute__((always_inline)) void
sd_bn_apply_w(float *restrict y, const float *restrict x, const float *restrict r, size_t hw,
              int W, const float *restrict mean, const float *restrict scale,
              const float *restrict shift, int relu)
{
	for (size_t p = 0; p < hw; p++)
		for (int j = 0; j < W; j++) {
			size_t e = p * W + j;
			float v = (x[e] - mean[j]) * scale[j] + shift[j];
			if (r)
				v += r[e];
			y[e] = relu ? (v > 0.0f ? v : 0.0f) : v;
		}
}

SD_CLONES
static void sd_bn_apply(float *y, const float *x, const float *r, size_t hw, int blk,
                        const float *mean, const float *scale, const float *shift, int relu)
{
	/* Specialised per (blk, residual, relu): the branches leave the loop. */
	if (blk == 16) {
		if (r)
			relu ? sd_bn_apply_w(y, x, r, hw, 16, mean, scale, shift, 1)
			     : sd_bn_apply_w(y, x, r, hw, 16, mean, scale, shift, 0);
		else
			relu ? sd_bn_apply_w(y, x, NULL, hw, 16, mean, scale, shift, 1)
			     : sd_bn_apply_w(y, x, NULL, hw, 16, mean, scale, shift, 0);
	} else if (blk == 8) {
		if (r)
			relu ? sd_bn_apply_w(y, x, r, hw, 8, mean, scale, shift, 1)
			     : sd_bn_apply_w(y, x, r, hw, 8, mean, scale, shift, 0);
		else
			relu ? sd_bn_apply_w(y, x, NULL, hw, 8, mean, scale, shift, 1)
			     : sd_bn_apply_w(y, x, NULL, hw, 8, mean, scale, shift, 0);
	} else {
		if (r)
			relu ? sd_bn_apply_w(y, x, r, hw, 1, mean, scale, shift, 1)
			     : sd_bn_apply_w(y, x, r, hw, 1, mean, scale, shift, 0);
		else
			relu ? sd_bn_apply_w(y, x, NULL, hw, 1, mean, scale, shift, 1)
			     : sd_bn_apply_w(y, x, NULL, hw, 1, mean, scale, shift, 0);
	}
}

/* dz = masked dy; dx = k1 (dz - mdy - (x - mean) is mdyx); dr = dz. */
static inline __attribute__((always_inline)) void
sd_bn_bwd_apply_w(float *restrict dx, float *restrict dr, const float *restrict dy,
                  const float *restrict y, const float *restrict x, size_t hw, int W,
                  const float *restrict mean, const float *restrict is, const float *restrict k1,
                  const float *restrict mdy, const float *restrict mdyx, int relu)
{
	for (size_t p = 0; p < hw; p++)
		for (int j = 0; j < W; j++) {
			size_t e = p * W + j;
			float g = relu && !(y[e] > 0.0f) ? 0.0f : dy[e];
			float xh = (x[e] - mean[j]) * is[j];
			dx[e] = k1[j] * (g - mdy[j] - xh * mdyx[j]);
			if (dr)
				dr[e] = g;
		}
}

SD_CLONES
static void sd_bn_bwd_apply(float *dx, float *dr, const float *dy, const float *y,
                            const float *x, size_t hw, int blk, const float *mean,
                            const float *is, const float *k1, const float *mdy,
                            const float *mdyx, int relu)
{
	if (blk == 16) {
		if (dr)
			sd_bn_bwd_apply_w(dx, dr, dy, y, x, hw, 16, mean, is, k1, mdy, mdyx, relu);
		else
			sd_bn_bwd_apply_w(dx, NULL, dy, y, x, hw, 16, mean, is, k1, mdy, mdyx, relu);
	} else if (blk == 8) {
		if (dr)
			sd_bn_bwd_apply_w(dx, dr, dy, y, x, hw, 8, mean, is, k1, mdy, mdyx, relu);
		else
			sd_bn_bwd_apply_w(dx, NULL, dy, y, x, hw, 8, mean, is, k1, mdy, mdyx, relu);
	} else {
		if (dr)
			sd_bn_bwd_apply_w(dx, dr, dy, y, x, hw, 1, mean, is, k1, mdy, mdyx, relu);
		else
			sd_bn_bwd_apply_w(dx, NULL, dy, y, x, hw, 1, mean, is, k1, mdy, mdyx, relu);
	}
}

/* Per-lane constants of channel block cb (lane j is channel cb blk + j). */
static void sd_lanes(float *dst, const float *per_channel, int cb, int blk)
{
	for (int j = 0; j < blk; j++)
		dst[j] = per_channel[cb * blk + j];
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
	#pragma omp parallel for schedule(static) if (total >= SD_BLK_OMP_MIN)
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
	#pragma omp parallel for schedule(static) if (total >= SD_BLK_OMP_MIN)
	for (int t = 0; t < n * ncb; t++) {
		const int i = t / ncb, cb = t % ncb;
		float mu[16], scale[16], shift[16];
		for (int j = 0; j < blk; j++) {
			const int ch = cb * blk + j;
			mu[j] = mean[ch];
			scale[j] = invstd[ch] * gamma[ch];
			shift[j] = beta[ch];
		}
		const size_t off = sd_plane(i, cb, ncb, hw, blk);
		sd_bn_apply(y + off, x + off, r ? r + off : NULL, (size_t)hw, blk, mu, scale, shift,
		            relu);
	}
}

void sd_batchnorm_act_forward_eval(float *y, const float *x, const float *r,
                                   const float *gamma, const float *beta,
                                   const float *running_mean, const float *running_var,
                                   int n, int c, int hw, int blk, int relu, float eps)
{
	const int ncb = c / blk;
	#pragma omp parallel for schedule(static) if ((size_t)n * c * hw >= SD_BLK_OMP_MIN)
	for (int t = 0; t < n * ncb; t++) {
		const int i = t / ncb, cb = t % ncb;
		float mu[16], scale[16], shift[16];
		for (int j = 0; j < blk; j++) {
			const int ch = cb * blk + j;
			mu[j] = running_mean[ch];
			scale[j] = (float)(gamma[ch] / sqrt((double)running_var[ch] + eps));
			shift[j] = beta[ch];
		}
		const size_t off = sd_plane(i, cb, ncb, hw, blk);
		sd_bn_apply(y + off, x + off, r ? r + off : NULL, (size_t)hw, blk, mu, scale, shift,
		            relu);
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
	#pragma omp parallel for schedule(static) if (total >= SD_BLK_OMP_MIN)
	for (int t = 0; t < tasks; t++) {
		const int cb = t / groups, g = t % groups;
		double *s = part + (size_t)t * 2 * blk;
		sd_bn_bwd_sums(s, s + blk, dy, y, x, mean + cb * blk, relu, sd_block_of(n, groups, g),
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
	#pragma omp parallel for schedule(static) if (total >= SD_BLK_OMP_MIN)
	for (int t = 0; t < n * ncb; t++) {
		const int i = t / ncb, cb = t % ncb;
		float mu[16], is[16], a[16], b[16], d[16];
		sd_lanes(mu, mean, cb, blk);
		sd_lanes(is, invstd, cb, blk);
		sd_lanes(a, k1, cb, blk);
		sd_lanes(b, mdy, cb, blk);
		sd_lanes(d, mdyx, cb, blk);
		const size_t off = sd_plane(i, cb, ncb, hw, blk);
		sd_bn_bwd_apply(dx + off, dr ? dr + off : NULL, dy + off, y + off, x + off, (size_t)hw,
		                blk, mu, is, a, b, d, relu);
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
	#pragma omp parallel for schedule(static) if ((size_t)n * c * h * w >= SD_BLK_OMP_MIN)
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
	#pragma omp parallel for schedule(static) if ((size_t)n * c * h * w >= SD_BLK_OMP_MIN)
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
	#pragma omp parallel for schedule(static) if ((size_t)n * c * hw >= SD_BLK_OMP_MIN)
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
	#pragma omp parallel for schedule(static) if ((size_t)n * c * hw >= SD_BLK_OMP_MIN)
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
