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
 * Reproducibility: statistics are summed per plane (one sample, one
 * channel block) in float, the planes merged in double per fixed group of
 * samples (the groups depend on the batch and the channel count, never on
 * the thread count) in a fixed order, and the groups merged in order; every
 * other output element is written by one thread.  So the results are the
 * same bits for any number of OpenMP threads.
 *
 * Speed: these passes are bound by memory, so each reads its tensors once
 * with whole-register vectors (16 floats) and few operations per element:
 * float sums in registers, double only once per plane.  The build targets
 * baseline x86-64, so the per-element loops are also compiled for AVX2 and
 * AVX-512 and the best one the CPU has runs (GCC's target_clones, which
 * picks by CPU feature).  The clones compute the same operations in the
 * same order.
 *
 * Cache order: the statistics pass of each thread walks its samples from
 * the last to the first, and the pass after it from the first to the last.
 * The tensor's producer (a convolution, or the statistics pass itself)
 * wrote or read it from first to last, so each pass starts on the samples
 * still in the core's own cache (a ResNet's planes are 1 to 8 MiB, the
 * core's L2 about 2 MiB).  Only the order of whole planes changes; the
 * merges are in the same fixed order whatever the thread count.
 */
#include "engine/layers.h"

#include <math.h>
#include <omp.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Sample groups of the statistics, at most; fewer when c is large so that
 * the partial sums fit in SD_BN_PARTIALS doubles on the stack (which is
 * what limits c to SD_BN_CHANNELS_MAX, layers.h). */
#define SD_BN_GROUPS 8
#define SD_BN_PARTIALS (2 * SD_BN_CHANNELS_MAX)
/* Pixels per task of the pass that also writes a bf16 NHWC copy: every
 * channel block of 64 pixels, 4 KiB of float32 input per block. */
#define SD_BN_BF16_RUN 64

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

/* Inside "omp parallel": this thread's share of tasks [0, count), a
 * contiguous run in thread order as "omp for schedule(static)" would give
 * (to within one task), run from its end: "cache order" above. */
#define SD_TASKS_BACKWARDS(t, count)                                               \
	for (int t##_me = omp_get_thread_num(), t##_nt = omp_get_num_threads(),     \
	         t = sd_block_of((count), t##_nt, t##_me + 1) - 1;                  \
	     t >= sd_block_of((count), t##_nt, t##_me); t--)

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

/* ------------------------------------------------ vectors of 16 lanes
 *
 * The batch-norm loops run over one plane (one sample, one channel block:
 * hw blk floats) 16 floats at a time: one pixel of 16 channels (blk 16), two
 * pixels of 8 channels (blk 8: lane j is channel j % 8) or 16 pixels of one
 * channel (NCHW, blk 1: every lane the same channel).  GCC's vector
 * extensions keep the 16 lanes in one AVX-512 register, two AVX2 ones or
 * four SSE2 ones: each clone does the same operations in the same order.
 * A plane's length is a multiple of 16 except in NCHW and in blk 8 with an
 * odd hw; that tail runs element by element, each element on the lane it
 * would have had in a whole vector.  Loads and stores are macros: a function
 * taking or returning a 64-byte vector would change ABI between clones. */
#define SD_VL 16
typedef float sd_vf __attribute__((vector_size(SD_VL * sizeof(float))));
typedef int sd_vi __attribute__((vector_size(SD_VL * sizeof(int))));

#define SD_LD(p) __extension__({ sd_vf v_; memcpy(&v_, (p), sizeof v_); v_; })
#define SD_ST(p, v) do { sd_vf v_ = (v); memcpy((p), &v_, sizeof v_); } while (0)
typedef unsigned sd_vu __attribute__((vector_size(SD_VL * sizeof(unsigned))));
typedef uint16_t sd_vh __attribute__((vector_size(SD_VL * sizeof(uint16_t))));

/* The 16 lanes of v rounded to bf16, to nearest with ties to even, and
 * stored at p (32 bytes): the bits oneDNN's float32 -> bf16 reorder gives
 * (vcvtneps2bf16, which also turns denormals into zeros of their sign), so
 * a convolution reads the same bf16 input whoever converted it. */
#define SD_ST_BF16(p, v) do { \
	sd_vu u_ = (sd_vu)(v); \
	sd_vu r_ = (u_ + 0x7fffu + ((u_ >> 16) & 1u)) >> 16; \
	sd_vu z_ = (sd_vu)((u_ & 0x7f800000u) == 0); \
	r_ = (r_ & ~z_) | ((u_ >> 16) & 0x8000u & z_); \
	sd_vh h_ = __builtin_convertvector(r_, sd_vh); \
	memcpy((p), &h_, sizeof h_); \
} while (0)
/* x's vector holding float i (a multiple of 16) of a plane whose vectors
 * lie xs floats apart: 16 in the blocked layouts, c in NHWC (one pixel's 16
 * channels of the block, then the next pixel's). */
#define SD_XV(x, i, xs) ((x) + (i) / SD_VL * (xs))
/* The 16 bf16 values at p (32 bytes) widened to float32 (exactly). */
#define SD_LD_BF16(p) __extension__({ \
	sd_vh h_; \
	memcpy(&h_, (p), sizeof h_); \
	(sd_vf)(__builtin_convertvector(h_, sd_vu) << 16); \
})
/* dy's vector holding float i (SD_XV): widened from the bf16 dyh where
 * dyh is not NULL (a backward-data convolution's bf16 dx), else dy's. */
#define SD_LD_DY(dy, dyh, i, ds) \
	((dyh) ? SD_LD_BF16(SD_XV(dyh, i, ds)) : SD_LD(SD_XV(dy, i, ds)))
/* The ReLU mask's keep value of float i recomputed from x (relu 2): the
 * forward's (x - mean) scale + shift (sd_bn_apply_v), with mk holding the
 * 16 lanes of scale then of shift: positive exactly where y was. */
#define SD_XMASK(x, xb, i, xs, mv, mk) \
	((SD_LDX(x, xb, i, xs) - (mv)) * SD_LD(mk) + SD_LD((mk) + SD_VL))
/* x's 16 values at vector i (SD_XV) as float32: x points at float32, or
 * when xb is set at bf16 values, widened.  xb is a constant at every call
 * (the kernels are specialised per x type), so the test folds away. */
#define SD_LDX(x, xb, i, xs) \
	((xb) ? SD_LD_BF16(SD_XV((const uint16_t *)(x), i, xs)) \
	      : SD_LD(SD_XV((const float *)(x), i, xs)))
/* One value of x (the scalar tails). */
#define SD_X1(x, xb, i) \
	((xb) ? sd_bf16_f32(((const uint16_t *)(x))[i]) : ((const float *)(x))[i])
/* v where keep > 0, else +0 (a NaN in keep gives 0, as "keep > 0 ? v : 0"). */
#define SD_MASK_POS(v, keep) ((sd_vf)((sd_vi)(v) & ((keep) > (sd_vf){ 0 })))
/* The ReLU bit mask (relu 3): one uint16 per vector of 16 lanes, bit j for
 * lane j.  SD_MASK_BIT_LANES: lane j's bit. */
#define SD_MASK_BIT_LANES ((sd_vi){ 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, \
                                    8192, 16384, 32768 })
/* v where bits has lane j's bit set, else +0. */
#define SD_MASK_BITS(v, bits) \
	((sd_vf)((sd_vi)(v) & ((((sd_vi){ 0 } + (int)(bits)) & SD_MASK_BIT_LANES) != 0)))
/* The bits of the lanes of v, a ReLU output (+0 or positive, no NaN), whose
 * bf16 rounding (SD_ST_BF16) is > 0: exactly the normal ones (a denormal
 * rounds to +0), i.e. bits >= FLT_MIN's; the same mask as bf16(y) > 0. */
#define SD_BF16_POS_BITS(v) __extension__({ \
	sd_vi k_ = ((sd_vi)(v) >= 0x00800000) & SD_MASK_BIT_LANES; \
	int b_ = 0; \
	for (int j_ = 0; j_ < SD_VL; j_++) \
		b_ |= k_[j_]; \
	(uint16_t)b_; \
})

/* Element off of x, float32 or (xb) bf16: x's pointer advanced by its type. */
static inline const void *sd_xat(const void *x, int xb, size_t off)
{
	return (const char *)x + off * (xb ? sizeof(uint16_t) : sizeof(float));
}

/* The float32 value of bf16 bits h (exact: bf16 is float32's upper half). */
static inline float sd_bf16_f32(uint16_t h)
{
	const uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}

/* The channel (within its block) of lane j in layout blk. */
static inline int sd_lane_ch(int j, int blk)
{
	return blk == 16 ? j : blk == 8 ? j % 8 : 0;
}

/* Per-lane constants of channel block cb: lane j gets the value of its
 * channel. */
static void sd_lanes(float *dst, const float *per_channel, int cb, int blk)
{
	for (int j = 0; j < SD_VL; j++)
		dst[j] = per_channel[cb * blk + sd_lane_ch(j, blk)];
}

/* The 16 lane values added per channel of the block, in lane order, in
 * double: out gets blk values. */
static void sd_fold(double *out, const float *lanes, int blk)
{
	for (int ch = 0; ch < blk; ch++)
		out[ch] = 0.0;
	for (int j = 0; j < SD_VL; j++)
		out[sd_lane_ch(j, blk)] += lanes[j];
}

/* ------------------------------------------------ batch-norm statistics
 *
 * Mean and variance in blocks: each plane (hw values per channel, at most
 * a few thousand) is summed in float, then its squared deviations from its
 * own mean are summed in float while the plane is still in the core's
 * cache (the corrected two-pass algorithm, Chan, Golub & LeVeque 1983:
 * no cancellation whatever the mean), and the planes' (count, mean, sum of
 * squared deviations) are merged in double, from the group's last sample
 * to its first, with Chan's pairwise update.  A float sum of n values is good to about n 2^-24
 * relative at worst; with 4 (sums) or 2 (deviations) accumulators per lane
 * n is at most hw / 2 per accumulator. */

/* s = per-lane sums of x over count floats, vectors xs apart (SD_XV);
 * x bf16 where xb is set (SD_LDX). */
static inline __attribute__((always_inline)) void
sd_plane_sum(float *restrict s, const void *restrict x, int xb,
             size_t count, size_t xs)
{
	sd_vf a0 = { 0 }, a1 = { 0 }, a2 = { 0 }, a3 = { 0 };
	size_t i = 0;
	for (; i + 4 * SD_VL <= count; i += 4 * SD_VL) {
		a0 += SD_LDX(x, xb, i, xs);
		a1 += SD_LDX(x, xb, i + SD_VL, xs);
		a2 += SD_LDX(x, xb, i + 2 * SD_VL, xs);
		a3 += SD_LDX(x, xb, i + 3 * SD_VL, xs);
	}
	for (; i + SD_VL <= count; i += SD_VL)
		a0 += SD_LDX(x, xb, i, xs);
	SD_ST(s, (a0 + a1) + (a2 + a3));
	for (int j = 0; i < count; i++, j++)
		s[j] += SD_X1(x, xb, i);
}

/* d, q = per-lane sums of (x - m) and (x - m)^2 over count floats, vectors
 * xs apart (x bf16 where xb is set); m: 16 lanes. */
static inline __attribute__((always_inline)) void
sd_plane_dev(float *restrict d, float *restrict q, const void *restrict x, int xb,
             size_t count, const float *restrict m, size_t xs)
{
	const sd_vf mv = SD_LD(m);
	sd_vf d0 = { 0 }, d1 = { 0 }, q0 = { 0 }, q1 = { 0 };
	size_t i = 0;
	for (; i + 2 * SD_VL <= count; i += 2 * SD_VL) {
		sd_vf u0 = SD_LDX(x, xb, i, xs) - mv, u1 = SD_LDX(x, xb, i + SD_VL, xs) - mv;
		d0 += u0;
		q0 += u0 * u0;
		d1 += u1;
		q1 += u1 * u1;
	}
	for (; i + SD_VL <= count; i += SD_VL) {
		sd_vf u = SD_LDX(x, xb, i, xs) - mv;
		d0 += u;
		q0 += u * u;
	}
	SD_ST(d, d0 + d1);
	SD_ST(q, q0 + q1);
	for (int j = 0; i < count; i++, j++) {
		float u = SD_X1(x, xb, i) - m[j];
		d[j] += u;
		q[j] += u * u;
	}
}

/* Offset of the first element of channel block cb of sample i in x: layout
 * blk, or NHWC (blk 16) when nhwc; its vectors then lie sd_xs apart. */
static inline size_t sd_xplane(int i, int cb, int ncb, int hw, int blk, int nhwc)
{
	return nhwc ? ((size_t)i * hw * ncb + (size_t)cb) * 16 : sd_plane(i, cb, ncb, hw, blk);
}

static inline size_t sd_xs(int ncb, int nhwc)
{
	return nhwc ? (size_t)ncb * 16 : SD_VL;
}

/* Sample i's plane of channel block cb merged into mean, m2 (samples
 * i1 - 1 down to i + 1 merged already).  xb (constant): x is bf16, NHWC. */
static inline __attribute__((always_inline)) void
sd_bn_stats_plane(double *restrict mean, double *restrict m2, const void *x, int xb, int i,
                  int i1, int cb, int ncb, int hw, int blk, int nhwc)
{
	const size_t xs = sd_xs(ncb, nhwc);
	const size_t cnt = (size_t)hw * blk;
	const double nb = (double)hw;
	float lanes[SD_VL], ml[SD_VL], dl[SD_VL], ql[SD_VL], mc[16];
	double ps[16], pd[16], pq[16];
	const void *xp = sd_xat(x, xb, sd_xplane(i, cb, ncb, hw, blk, nhwc));
	if (nhwc)
		sd_plane_sum(lanes, xp, xb, cnt, xs);
	else
		sd_plane_sum(lanes, xp, 0, cnt, SD_VL);
	sd_fold(ps, lanes, blk);
	for (int ch = 0; ch < blk; ch++)
		mc[ch] = (float)(ps[ch] / nb);
	for (int j = 0; j < SD_VL; j++)
		ml[j] = mc[sd_lane_ch(j, blk)];
	if (nhwc)
		sd_plane_dev(dl, ql, xp, xb, cnt, ml, xs);
	else
		sd_plane_dev(dl, ql, xp, 0, cnt, ml, SD_VL);
	sd_fold(pd, dl, blk);
	sd_fold(pq, ql, blk);
	const double na = (double)(i1 - 1 - i) * hw, nn = na + nb;
	for (int ch = 0; ch < blk; ch++) {
		/* The plane's own mean and squared deviations (the sum of the
		 * deviations corrects for mc's rounding), merged. */
		const double mb = (double)mc[ch] + pd[ch] / nb;
		double m2b = pq[ch] - pd[ch] * pd[ch] / nb;
		if (m2b < 0.0)
			m2b = 0.0;
		const double delta = mb - mean[ch];
		mean[ch] += delta * (nb / nn);
		m2[ch] += m2b + delta * delta * (na * nb / nn);
	}
}

/* Mean and sum of squared deviations of each channel of block cb over
 * samples [i0, i1): mean, m2: blk doubles each, overwritten.  xb: x is
 * bf16 (n, hw, c), NHWC (nhwc set, blk 16), else float32. */
SD_CLONES
static void sd_bn_stats(double *mean, double *m2, const void *x, int xb, int i0, int i1,
                        int cb, int ncb, int hw, int blk, int nhwc)
{
	for (int ch = 0; ch < blk; ch++)
		mean[ch] = m2[ch] = 0.0;
	if (xb)
		for (int i = i1 - 1; i >= i0; i--)
			sd_bn_stats_plane(mean, m2, x, 1, i, i1, cb, ncb, hw, blk, 1);
	else
		for (int i = i1 - 1; i >= i0; i--)
			sd_bn_stats_plane(mean, m2, x, 0, i, i1, cb, ncb, hw, blk, nhwc);
}

/* sd_bn_stats of every channel block at once, x NHWC (blk 16): sample by
 * sample, its blocks one after the other, so the first block's strided
 * reads bring in whole cache lines that the next blocks find in cache.
 * Each block's arithmetic and order are sd_bn_stats's: the same bits.
 * part: block cb's mean and m2 at part + cb * pstride, 16 doubles each. */
SD_CLONES
static void sd_bn_stats_nhwc(double *part, size_t pstride, const void *x, int xb, int i0,
                             int i1, int ncb, int hw)
{
	for (int cb = 0; cb < ncb; cb++)
		for (int ch = 0; ch < 32; ch++)
			part[cb * pstride + ch] = 0.0;
#define SD_STATS_NHWC(xb_) \
	for (int i = i1 - 1; i >= i0; i--) \
		for (int cb = 0; cb < ncb; cb++) \
			sd_bn_stats_plane(part + cb * pstride, part + cb * pstride + 16, x, xb_, i, i1, \
			                  cb, ncb, hw, 16, 1)
	if (xb)
		SD_STATS_NHWC(1);
	else
		SD_STATS_NHWC(0);
#undef SD_STATS_NHWC
}

/* dz = relu ? (y > 0 ? dy : 0) : dy; s, q = per-lane sums of dz and
 * dz (x - mean) over count floats, float as the statistics; mean: 16 lanes.
 * yh, when not NULL (relu, count a multiple of 16): the ReLU mask read from
 * y's bf16 copy instead, 16 values every ystride elements; relu 3: from
 * the bit mask there, one uint16 (SD_MASK_BITS) every ystride.  x's vectors
 * lie xs apart, dy's ds apart (SD_XV); x bf16 where xb (constant) is set;
 * dyh, when not NULL: dy read there in bf16 instead (SD_LD_DY; count a
 * multiple of 16). */
static inline __attribute__((always_inline)) void
sd_plane_bwd_sums(float *restrict s, float *restrict q, const float *restrict dy,
                  const uint16_t *restrict dyh, const float *restrict y,
                  const void *restrict x, int xb, size_t count, const float *restrict mean,
                  int relu, const uint16_t *restrict yh, size_t ystride, size_t xs, size_t ds,
                  const float *restrict mk)
{
	const sd_vf mv = SD_LD(mean);
	sd_vf s0 = { 0 }, s1 = { 0 }, q0 = { 0 }, q1 = { 0 };
	size_t i = 0;
	for (; i + 2 * SD_VL <= count; i += 2 * SD_VL) {
		sd_vf g0 = SD_LD_DY(dy, dyh, i, ds), g1 = SD_LD_DY(dy, dyh, i + SD_VL, ds);
		if (relu == 2) {
			g0 = SD_MASK_POS(g0, SD_XMASK(x, xb, i, xs, mv, mk));
			g1 = SD_MASK_POS(g1, SD_XMASK(x, xb, i + SD_VL, xs, mv, mk));
		} else if (relu == 3) {
			g0 = SD_MASK_BITS(g0, yh[i / SD_VL * ystride]);
			g1 = SD_MASK_BITS(g1, yh[(i / SD_VL + 1) * ystride]);
		} else if (relu && yh) {
			g0 = SD_MASK_POS(g0, SD_LD_BF16(yh + i / SD_VL * ystride));
			g1 = SD_MASK_POS(g1, SD_LD_BF16(yh + (i / SD_VL + 1) * ystride));
		} else if (relu) {
			g0 = SD_MASK_POS(g0, SD_LD(y + i));
			g1 = SD_MASK_POS(g1, SD_LD(y + i + SD_VL));
		}
		s0 += g0;
		q0 += g0 * (SD_LDX(x, xb, i, xs) - mv);
		s1 += g1;
		q1 += g1 * (SD_LDX(x, xb, i + SD_VL, xs) - mv);
	}
	for (; i + SD_VL <= count; i += SD_VL) {
		sd_vf g = SD_LD_DY(dy, dyh, i, ds);
		if (relu == 2)
			g = SD_MASK_POS(g, SD_XMASK(x, xb, i, xs, mv, mk));
		else if (relu == 3)
			g = SD_MASK_BITS(g, yh[i / SD_VL * ystride]);
		else if (relu && yh)
			g = SD_MASK_POS(g, SD_LD_BF16(yh + i / SD_VL * ystride));
		else if (relu)
			g = SD_MASK_POS(g, SD_LD(y + i));
		s0 += g;
		q0 += g * (SD_LDX(x, xb, i, xs) - mv);
	}
	SD_ST(s, s0 + s1);
	SD_ST(q, q0 + q1);
	for (int j = 0; i < count; i++, j++) {
		float g = relu == 2 ? ((SD_X1(x, xb, i) - mean[j]) * mk[j] + mk[SD_VL + j] > 0.0f
		                       ? dy[i] : 0.0f)
		          : relu && !(y[i] > 0.0f) ? 0.0f : dy[i];
		s[j] += g;
		q[j] += g * (SD_X1(x, xb, i) - mean[j]);
	}
}

/* Sums of dz and dz (x - mean) per channel of block cb over samples
 * [i0, i1): s, q: blk doubles each, overwritten; each plane in float,
 * the planes added in double from the last sample to the first.  xb: x
 * is bf16 (n, hw, c), NHWC (blk 16; x_nhwc set), else float32. */
SD_CLONES
static void sd_bn_bwd_sums(double *s, double *q, const float *dy, const float *y,
                           const uint16_t *ybf, const void *x, int xb,
                           const float *mean_lanes, int relu, int i0, int i1, int cb, int ncb,
                           int hw, int blk, int x_nhwc, int dy_nhwc, const float *mk)
{
	const size_t cnt = (size_t)hw * blk;
	float sl[SD_VL], ql[SD_VL];
	double ps[16], pq[16];
	for (int ch = 0; ch < blk; ch++)
		s[ch] = q[ch] = 0.0;
	for (int i = i1 - 1; i >= i0; i--) {
		const size_t off = sd_plane(i, cb, ncb, hw, blk);
		/* ybf: NHWC, sample i's pixel 0, channel cb * 16 (blk 16). */
		const size_t ybc = ((size_t)i * hw * ncb + (size_t)cb) * 16, yst = (size_t)ncb * 16;
		/* relu 3: ybf is the bit mask, one uint16 per 16 of those. */
		const size_t ymc = ybc / 16, ymst = ncb;
		const void *xp = sd_xat(x, xb, sd_xplane(i, cb, ncb, hw, blk, x_nhwc));
		const float *dyp = dy + sd_xplane(i, cb, ncb, hw, blk, dy_nhwc);
		/* dy bf16 NHWC (SD_DX_NHWC_BF16): the same element offsets. */
		const uint16_t *dyh = dy_nhwc == SD_DX_NHWC_BF16
			? (const uint16_t *)dy + sd_xplane(i, cb, ncb, hw, blk, 1) : NULL;
		/* x or dy NHWC: their strides at run time; else constant. */
		const size_t xs = sd_xs(ncb, x_nhwc), ds = sd_xs(ncb, dy_nhwc);
#define SD_SUMS(dy_, dyh_, y_, relu_, yh_, xb_, xs_, ds_) \
	sd_plane_bwd_sums(sl, ql, dy_, dyh_, y_, xp, xb_, cnt, mean_lanes, relu_, yh_, \
	                  (relu_) == 3 ? ymst : yst, xs_, ds_, mk)
		/* relu 2: the mask from x (mk). */
#define SD_SUMS_R(dy_, dyh_, xb_, xs_, ds_) \
	(relu == 2    ? SD_SUMS(dy_, dyh_, NULL, 2, NULL, xb_, xs_, ds_) \
	 : relu == 3   ? SD_SUMS(dy_, dyh_, NULL, 3, ybf + ymc, xb_, xs_, ds_) \
	 : relu && ybf ? SD_SUMS(dy_, dyh_, NULL, 1, ybf + ybc, xb_, xs_, ds_) \
	 : relu        ? SD_SUMS(dy_, dyh_, y + off, 1, NULL, xb_, xs_, ds_) \
	               : SD_SUMS(dy_, dyh_, y + off, 0, NULL, xb_, xs_, ds_))
		if (dyh && xb)
			SD_SUMS_R(NULL, dyh, 1, xs, ds);
		else if (dyh)
			SD_SUMS_R(NULL, dyh, 0, xs, ds);
		else if (xb)
			SD_SUMS_R(dyp, NULL, 1, xs, ds);
		else if (x_nhwc || dy_nhwc)
			SD_SUMS_R(dyp, NULL, 0, xs, ds);
		else
			SD_SUMS_R(dyp, NULL, 0, SD_VL, SD_VL);
#undef SD_SUMS_R
#undef SD_SUMS
		sd_fold(ps, sl, blk);
		sd_fold(pq, ql, blk);
		for (int ch = 0; ch < blk; ch++) {
			s[ch] += ps[ch];
			q[ch] += pq[ch];
		}
	}
}

/* -------------------------------------------------- batch-norm passes */

/* y = act((x - mean) scale + shift (+ r)) over one plane of count floats;
 * mean, scale, shift: 16 lanes; x's vectors xs apart (SD_XV), bf16 where xb
 * (constant) is set.  rh, when not NULL (r NULL): r in bf16, its vectors
 * hstride apart as yh's (NHWC), widened (exactly) as read. */
static inline __attribute__((always_inline)) void
sd_bn_apply_v(float *restrict y, const void *restrict x, int xb, const float *restrict r,
              const uint16_t *restrict rh, size_t count,
              const float *restrict mean, const float *restrict scale,
              const float *restrict shift, int relu, uint16_t *restrict yh, size_t hstride,
              size_t xs, uint16_t *restrict ym)
{
	const sd_vf mu = SD_LD(mean), sc = SD_LD(scale), sh = SD_LD(shift);
	size_t i = 0;
	for (; i + SD_VL <= count; i += SD_VL) {
		sd_vf v = (SD_LDX(x, xb, i, xs) - mu) * sc + sh;
		if (r)
			v += SD_LD(r + i);
		else if (rh)
			v += SD_LD_BF16(rh + i / SD_VL * hstride);
		if (relu)
			v = SD_MASK_POS(v, v);
		if (y)
			SD_ST(y + i, v);
		if (yh)
			SD_ST_BF16(yh + i / SD_VL * hstride, v);
		if (ym)
			ym[i / SD_VL * (hstride / 16)] = SD_BF16_POS_BITS(v);
	}
	for (int j = 0; i < count; i++, j++) {
		float v = (SD_X1(x, xb, i) - mean[j]) * scale[j] + shift[j];
		if (r)
			v += r[i];
		else if (rh)
			v += sd_bf16_f32(rh[i / SD_VL * hstride + i % SD_VL]);
		if (y)
			y[i] = relu ? (v > 0.0f ? v : 0.0f) : v;
	}
}

/* yh, when not NULL: a bf16 copy of y too, one pixel's 16 channels (blk 16)
 * every hstride elements (NHWC: hstride = c); y may then be NULL (the copy
 * only).  ym, when not NULL (relu, yh set): the bit mask of yh > 0 too, one
 * uint16 (SD_BF16_POS_BITS) every hstride / 16.  xnhwc: x is NHWC too, its
 * vectors hstride apart; xb: x is then bf16 (else float32).  rh, when not
 * NULL (r NULL, blk 16): the residual in bf16, laid out as yh (hstride). */
SD_CLONES
static void sd_bn_apply(float *y, const void *x, int xb, const float *r, const uint16_t *rh,
                        size_t count,
                        const float *mean, const float *scale, const float *shift, int relu,
                        uint16_t *yh, size_t hstride, int xnhwc, uint16_t *ym)
{
	/* Specialised per (float32 y, residual, relu, bf16 copy, x's layout
	 * and type): no test in the loop. */
#define SD_APPLY(y_, r_, relu_, yh_, xb_, xs_) \
	sd_bn_apply_v(y_, x, xb_, r_, NULL, count, mean, scale, shift, relu_, yh_, yh_ ? hstride : 0, \
	              xs_, NULL)
	if (ym) {
		/* With the bit mask: the residual group's case (bf16 x, float32
		 * y) specialised, the others tested in the loop. */
		if (xnhwc && xb && y && r && relu)
			sd_bn_apply_v(y, x, 1, r, NULL, count, mean, scale, shift, 1, yh, hstride,
			              hstride, ym);
		/* The residual read from the previous group's bf16 copy, y
		 * in bf16 only (an identity shortcut's next reader does the
		 * same) or in float32 too (option A's, the average pool). */
		else if (xnhwc && xb && !y && rh && relu)
			sd_bn_apply_v(NULL, x, 1, NULL, rh, count, mean, scale, shift, 1, yh, hstride,
			              hstride, ym);
		else if (xnhwc && xb && y && rh && relu)
			sd_bn_apply_v(y, x, 1, NULL, rh, count, mean, scale, shift, 1, yh, hstride,
			              hstride, ym);
		else
			sd_bn_apply_v(y, x, xb, r, rh, count, mean, scale, shift, relu, yh, hstride,
			              xnhwc ? hstride : SD_VL, ym);
		return;
	}
	if (rh) {
		/* Without the copy's bits: the last group (the pool reads y). */
		sd_bn_apply_v(y, x, xb, NULL, rh, count, mean, scale, shift, relu, yh, hstride,
		              xnhwc ? hstride : SD_VL, NULL);
		return;
	}
#define SD_APPLY_R(y_, yh_, xb_, xs_) \
	(r ? (relu ? SD_APPLY(y_, r, 1, yh_, xb_, xs_) : SD_APPLY(y_, r, 0, yh_, xb_, xs_)) \
	   : (relu ? SD_APPLY(y_, NULL, 1, yh_, xb_, xs_) : SD_APPLY(y_, NULL, 0, yh_, xb_, xs_)))
	if (xnhwc && xb) {
		if (yh && y)
			SD_APPLY_R(y, yh, 1, hstride);
		else if (yh)
			SD_APPLY_R(NULL, yh, 1, hstride);
		else
			SD_APPLY_R(y, NULL, 1, hstride);
	} else if (xnhwc) {
		if (yh && y)
			SD_APPLY_R(y, yh, 0, hstride);
		else if (yh)
			SD_APPLY_R(NULL, yh, 0, hstride);
		else
			SD_APPLY_R(y, NULL, 0, hstride);
	} else if (yh && y) {
		SD_APPLY_R(y, yh, 0, SD_VL);
	} else if (yh) {
		SD_APPLY_R(NULL, yh, 0, SD_VL);
	} else {
		SD_APPLY_R(y, NULL, 0, SD_VL);
	}
#undef SD_APPLY_R
#undef SD_APPLY
}

/* dz = masked dy; dx = k1 (dz - mdy - (x - mean) is mdyx); dr = dz. */
static inline __attribute__((always_inline)) void
sd_bn_bwd_apply_v(float *restrict dx, float *restrict dr, const float *restrict dy,
                  const uint16_t *restrict dyh, const float *restrict y,
                  const void *restrict x, int xb, size_t count, const float *restrict mean,
                  const float *restrict is, const float *restrict k1,
                  const float *restrict mdy, const float *restrict mdyx, int relu,
                  uint16_t *restrict dxh, size_t hstride, const uint16_t *restrict yh,
                  size_t xs, size_t ds, const float *restrict mk)
{
	const sd_vf mu = SD_LD(mean), iv = SD_LD(is), a = SD_LD(k1), b = SD_LD(mdy);
	const sd_vf d = SD_LD(mdyx);
	size_t i = 0;
	for (; i + SD_VL <= count; i += SD_VL) {
		sd_vf g = SD_LD_DY(dy, dyh, i, ds);
		if (relu == 2)
			g = SD_MASK_POS(g, SD_XMASK(x, xb, i, xs, mu, mk));
		else if (relu == 3)
			g = SD_MASK_BITS(g, yh[i / SD_VL * (hstride / 16)]);
		else if (relu && yh)
			g = SD_MASK_POS(g, SD_LD_BF16(yh + i / SD_VL * hstride));
		else if (relu)
			g = SD_MASK_POS(g, SD_LD(y + i));
		sd_vf xh = (SD_LDX(x, xb, i, xs) - mu) * iv;
		if (dxh)
			SD_ST_BF16(dxh + i / SD_VL * hstride, a * (g - b - xh * d));
		else
			SD_ST(dx + i, a * (g - b - xh * d));
		if (dr)
			SD_ST(dr + i, g);
	}
	for (int j = 0; i < count; i++, j++) {
		float g = relu == 2 ? ((SD_X1(x, xb, i) - mean[j]) * mk[j] + mk[SD_VL + j] > 0.0f
		                       ? dy[i] : 0.0f)
		          : relu && !(y[i] > 0.0f) ? 0.0f : dy[i];
		float xh = (SD_X1(x, xb, i) - mean[j]) * is[j];
		if (dx)
			dx[i] = k1[j] * (g - mdy[j] - xh * mdyx[j]);
		if (dr)
			dr[i] = g;
	}
}

/* dxh, when not NULL: dx written in bf16 there instead, one pixel's 16
 * channels (blk 16) every hstride elements (NHWC: hstride = c).  yh, when
 * not NULL (relu, blk 16): the ReLU mask read from y's bf16 copy, laid out
 * as dxh, instead of from y; relu 3: yh is the bit mask, one uint16
 * (SD_MASK_BITS) every hstride / 16.  xnhwc, dynhwc: x, dy are NHWC too, their
 * vectors hstride apart; dynhwc SD_DX_NHWC_BF16: dy is bf16 there; xb: x
 * is bf16 (xnhwc set), else float32. */
SD_CLONES
static void sd_bn_bwd_apply(float *dx, float *dr, const float *dy, const float *y,
                            const void *x, int xb, size_t count, const float *mean,
                            const float *is,
                            const float *k1, const float *mdy, const float *mdyx, int relu,
                            uint16_t *dxh, size_t hstride, const uint16_t *yh, int xnhwc,
                            int dynhwc, const float *mk)
{
	/* Specialised per (dx in bf16, residual, mask, x's type, x's and dy's
	 * layouts: both blocked, or strides at run time): no test in the
	 * loop. */
	const size_t xs = xnhwc ? hstride : SD_VL, ds = dynhwc ? hstride : SD_VL;
	const uint16_t *dyh = dynhwc == SD_DX_NHWC_BF16 ? (const uint16_t *)dy : NULL;
#define SD_BWD(dx_, dxh_, dr_, relu_, yh_) \
	(dyh && xb \
	 ? sd_bn_bwd_apply_v(dx_, dr_, NULL, dyh, y, x, 1, count, mean, is, k1, mdy, mdyx, relu_, \
	                     dxh_, hstride, yh_, xs, ds, mk) \
	 : dyh \
	 ? sd_bn_bwd_apply_v(dx_, dr_, NULL, dyh, y, x, 0, count, mean, is, k1, mdy, mdyx, relu_, \
	                     dxh_, hstride, yh_, xs, ds, mk) \
	 : xb \
	 ? sd_bn_bwd_apply_v(dx_, dr_, dy, NULL, y, x, 1, count, mean, is, k1, mdy, mdyx, relu_, \
	                     dxh_, hstride, yh_, xs, ds, mk) \
	 : xnhwc || dynhwc \
	 ? sd_bn_bwd_apply_v(dx_, dr_, dy, NULL, y, x, 0, count, mean, is, k1, mdy, mdyx, relu_, \
	                     dxh_, hstride, yh_, xs, ds, mk) \
	 : sd_bn_bwd_apply_v(dx_, dr_, dy, NULL, y, x, 0, count, mean, is, k1, mdy, mdyx, relu_, \
	                     dxh_, hstride, yh_, SD_VL, SD_VL, mk))
#define SD_BWD_MASKS(dx_, dxh_, dr_) \
	(relu == 2 ? SD_BWD(dx_, dxh_, dr_, 2, NULL) \
	 : relu == 3 ? SD_BWD(dx_, dxh_, dr_, 3, yh) \
	 : relu && yh ? SD_BWD(dx_, dxh_, dr_, 1, yh) : relu ? SD_BWD(dx_, dxh_, dr_, 1, NULL) \
	              : SD_BWD(dx_, dxh_, dr_, 0, NULL))
	if (dxh) {
		if (dr)
			SD_BWD_MASKS(NULL, dxh, dr);
		else
			SD_BWD_MASKS(NULL, dxh, NULL);
	} else if (dr) {
		SD_BWD_MASKS(dx, NULL, dr);
	} else {
		SD_BWD_MASKS(dx, NULL, NULL);
	}
#undef SD_BWD_MASKS
#undef SD_BWD
}

void sd_batchnorm_act_forward_train(float *y, float *mean, float *invstd,
                                    float *running_mean, float *running_var,
                                    const float *x, const float *r, const float *gamma,
                                    const float *beta, int n, int c, int hw, int blk,
                                    int relu, float momentum, float eps)
{
	sd_batchnorm_act_forward_train_bf16(y, NULL, mean, invstd, running_mean, running_var, x,
	                                    NULL, 0, r, gamma, beta, n, c, hw, blk, relu, momentum,
	                                    eps);
}

void sd_batchnorm_act_forward_train_bf16(float *y, uint16_t *ybf, float *mean, float *invstd,
                                         float *running_mean, float *running_var,
                                         const float *x, const uint16_t *xbf, int x_nhwc,
                                         const float *r, const float *gamma, const float *beta,
                                         int n, int c, int hw, int blk, int relu, float momentum,
                                         float eps)
{
	sd_batchnorm_act_forward_train_bits(y, ybf, NULL, mean, invstd, running_mean, running_var,
	                                    x, xbf, x_nhwc, r, gamma, beta, n, c, hw, blk, relu,
	                                    momentum, eps);
}

void sd_batchnorm_act_forward_train_bits(float *y, uint16_t *ybf, uint16_t *ybits, float *mean,
                                         float *invstd, float *running_mean,
                                         float *running_var, const float *x,
                                         const uint16_t *xbf, int x_nhwc, const float *r,
                                         const float *gamma, const float *beta, int n, int c,
                                         int hw, int blk, int relu, float momentum, float eps)
{
	sd_batchnorm_act_forward_train_rbf(y, ybf, ybits, mean, invstd, running_mean, running_var,
	                                   x, xbf, x_nhwc, r, NULL, gamma, beta, n, c, hw, blk, relu,
	                                   momentum, eps);
}

void sd_batchnorm_act_forward_train_rbf(float *y, uint16_t *ybf, uint16_t *ybits, float *mean,
                                        float *invstd, float *running_mean, float *running_var,
                                        const float *x, const uint16_t *xbf, int x_nhwc,
                                        const float *r, const uint16_t *rbf, const float *gamma,
                                        const float *beta, int n, int c, int hw, int blk,
                                        int relu, float momentum, float eps)
{
	if (blk != 16)
		ybf = NULL;
	if (r || blk != 16)
		rbf = NULL;
	if (!ybf || !relu)
		ybits = NULL;
	/* x in bf16 NHWC: read there, widened, by the same passes. */
	const int xb = xbf && blk == 16;
	const void *xv = xb ? (const void *)xbf : (const void *)x;
	x_nhwc = x_nhwc || xb;
	const int ncb = c / blk, groups = sd_bn_groups(n, c), tasks = ncb * groups;
	const size_t m = (size_t)n * hw, total = m * c;
	double part[SD_BN_PARTIALS];
	/* Per group: task (cb, g) writes the mean and squared deviations of
	 * its blk channels over its samples. */
	/* x NHWC: task g takes every block of its samples (sd_bn_stats_nhwc). */
	const int all_blocks = x_nhwc && ncb > 1;
	#pragma omp parallel if (total >= SD_LAYERS_OMP_MIN)
	SD_TASKS_BACKWARDS(t, all_blocks ? groups : tasks) {
		const int cb = all_blocks ? 0 : t / groups, g = all_blocks ? t : t % groups;
		double *s = part + ((size_t)cb * groups + g) * 2 * blk;
		const int i0 = sd_block_of(n, groups, g), i1 = sd_block_of(n, groups, g + 1);
		if (all_blocks)
			sd_bn_stats_nhwc(s, (size_t)groups * 2 * blk, xv, xb, i0, i1, ncb, hw);
		else
			sd_bn_stats(s, s + blk, xv, xb, i0, i1, cb, ncb, hw, blk, x_nhwc);
	}
	for (int ch = 0; ch < c; ch++) {
		const int cb = ch / blk, j = ch % blk;
		/* The groups merged in order, as the planes were. */
		double mu = 0.0, ss = 0.0, na = 0.0;
		for (int g = 0; g < groups; g++) {
			const double *pg = part + ((size_t)cb * groups + g) * 2 * blk;
			const double nb = (double)(sd_block_of(n, groups, g + 1) -
			                           sd_block_of(n, groups, g)) * hw;
			const double nn = na + nb, delta = pg[j] - mu;
			mu += delta * (nb / nn);
			ss += pg[blk + j] + delta * delta * (na * nb / nn);
			na = nn;
		}
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
	if (ybf && ncb > 1) {
		/* The bf16 copy in NHWC: a pixel's channel blocks share its
		 * cache lines there, so each task writes a run of pixels of
		 * every block (whole lines) rather than one block's plane (a
		 * part of every line, read back from memory by each block). */
		const int run = hw < SD_BN_BF16_RUN ? hw : SD_BN_BF16_RUN, runs = (hw + run - 1) / run;
		#pragma omp parallel for schedule(static) if (total >= SD_LAYERS_OMP_MIN)
		for (int t = 0; t < n * runs; t++) {
			const int i = t / runs, p0 = t % runs * run;
			const int np = hw - p0 < run ? hw - p0 : run;
			for (int cb = 0; cb < ncb; cb++) {
				float mu[SD_VL], scale[SD_VL], shift[SD_VL];
				sd_lanes(mu, mean, cb, blk);
				sd_lanes(scale, scale_c, cb, blk);
				sd_lanes(shift, beta, cb, blk);
				const size_t off = sd_plane(i, cb, ncb, hw, blk) + (size_t)p0 * blk;
				/* NHWC: sample i's pixel p0, channel cb * 16. */
				const size_t hoff = ((size_t)i * hw + p0) * c + (size_t)cb * 16;
				sd_bn_apply(y ? y + off : NULL, sd_xat(xv, xb, x_nhwc ? hoff : off), xb,
				            r ? r + off : NULL, rbf ? rbf + hoff : NULL, (size_t)np * blk, mu, scale, shift, relu,
				            ybf + hoff, (size_t)c, x_nhwc, ybits ? ybits + hoff / 16 : NULL);
			}
		}
		return;
	}
	#pragma omp parallel for schedule(static) if (total >= SD_LAYERS_OMP_MIN)
	for (int t = 0; t < n * ncb; t++) {
		const int i = t / ncb, cb = t % ncb;
		float mu[SD_VL], scale[SD_VL], shift[SD_VL];
		sd_lanes(mu, mean, cb, blk);
		sd_lanes(scale, scale_c, cb, blk);
		sd_lanes(shift, beta, cb, blk);
		const size_t off = sd_plane(i, cb, ncb, hw, blk);
		/* NHWC: sample i's pixel 0, channel cb * 16 (one block: ncb 1). */
		uint16_t *yh = ybf ? ybf + (size_t)i * hw * c + (size_t)cb * 16 : NULL;
		uint16_t *ym = ybits ? ybits + ((size_t)i * hw * c + (size_t)cb * 16) / 16 : NULL;
		/* rbf: NHWC as yh (pixels c apart). */
		const uint16_t *rh = rbf ? rbf + (size_t)i * hw * c + (size_t)cb * 16 : NULL;
		sd_bn_apply(y ? y + off : NULL, sd_xat(xv, xb, sd_xplane(i, cb, ncb, hw, blk, x_nhwc)),
		            xb, r ? r + off : NULL, rh, (size_t)hw * blk, mu, scale, shift, relu, yh, (size_t)c,
		            x_nhwc, ym);
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
		float mu[SD_VL], scale[SD_VL], shift[SD_VL];
		sd_lanes(mu, running_mean, cb, blk);
		sd_lanes(scale, scale_c, cb, blk);
		sd_lanes(shift, beta, cb, blk);
		const size_t off = sd_plane(i, cb, ncb, hw, blk);
		sd_bn_apply(y + off, x + off, 0, r ? r + off : NULL, NULL, (size_t)hw * blk, mu, scale, shift,
		            relu, NULL, 0, 0, NULL);
	}
}

void sd_batchnorm_act_backward(float *dx, float *dr, float *dgamma, float *dbeta,
                               const float *dy, const float *y, const float *x,
                               const float *mean, const float *invstd, const float *gamma,
                               int n, int c, int hw, int blk, int relu)
{
	sd_batchnorm_act_backward_bf16(dx, NULL, dr, dgamma, dbeta, dy, y, NULL, NULL, x, NULL, 0, 0,
	                               mean,
	                               invstd, gamma, n, c, hw, blk, relu);
}

void sd_batchnorm_act_backward_bf16(float *dx, uint16_t *dxbf, float *dr, float *dgamma,
                                    float *dbeta, const float *dy, const float *y,
                                    const uint16_t *ybf, const float *mask_beta,
                                    const float *x, const uint16_t *xbf, int x_nhwc,
                                    int dy_nhwc, const float *mean,
                                    const float *invstd, const float *gamma, int n, int c,
                                    int hw, int blk, int relu)
{
	sd_batchnorm_act_backward_bits(dx, dxbf, dr, dgamma, dbeta, dy, y, ybf, NULL, mask_beta, x,
	                               xbf, x_nhwc, dy_nhwc, mean, invstd, gamma, n, c, hw, blk,
	                               relu);
}

void sd_batchnorm_act_backward_bits(float *dx, uint16_t *dxbf, float *dr, float *dgamma,
                                    float *dbeta, const float *dy, const float *y,
                                    const uint16_t *ybf, const uint16_t *ybits,
                                    const float *mask_beta, const float *x,
                                    const uint16_t *xbf, int x_nhwc, int dy_nhwc,
                                    const float *mean, const float *invstd,
                                    const float *gamma, int n, int c, int hw, int blk, int relu)
{
	if (blk != 16) {
		dxbf = NULL;
		ybf = NULL;
		mask_beta = NULL;
	}
	/* x in bf16 NHWC (as the forward's): read there, widened. */
	const int xb = xbf && blk == 16;
	const void *xv = xb ? (const void *)xbf : (const void *)x;
	x_nhwc = x_nhwc || xb;
	if (!relu) {
		ybf = NULL;
		mask_beta = NULL;
	}
	/* The mask from x (relu 2 below): each block's forward scale (the
	 * same float product) and shift. */
	float mscale[SD_BN_CHANNELS_MAX];
	if (mask_beta) {
		ybf = NULL;
		relu = 2;
		for (int ch = 0; ch < c; ch++)
			mscale[ch] = invstd[ch] * gamma[ch];
	} else if (ybf && ybits) {
		/* The bit mask of ybf > 0 instead (relu 3): an eighth of
		 * its bytes; ybf then stands for it below. */
		ybf = ybits;
		relu = 3;
	}
	/* ybf's offsets: one uint16 per 16 elements in the bit mask. */
	const size_t ydiv = relu == 3 ? 16 : 1;
	const int ncb = c / blk, groups = sd_bn_groups(n, c), tasks = ncb * groups;
	const size_t m = (size_t)n * hw, total = m * c;
	double part[SD_BN_PARTIALS];
	float k1[SD_BN_CHANNELS_MAX], mdy[SD_BN_CHANNELS_MAX], mdyx[SD_BN_CHANNELS_MAX];
	#pragma omp parallel if (total >= SD_LAYERS_OMP_MIN)
	SD_TASKS_BACKWARDS(t, tasks) {
		const int cb = t / groups, g = t % groups;
		double *s = part + (size_t)t * 2 * blk;
		float mu[SD_VL], mk[2 * SD_VL];
		sd_lanes(mu, mean, cb, blk);
		if (mask_beta) {
			sd_lanes(mk, mscale, cb, blk);
			sd_lanes(mk + SD_VL, mask_beta, cb, blk);
		}
		sd_bn_bwd_sums(s, s + blk, dy, mask_beta ? NULL : y, ybf, xv, xb, mu, relu,
		               sd_block_of(n, groups, g), sd_block_of(n, groups, g + 1), cb, ncb, hw,
		               blk, x_nhwc, dy_nhwc, mask_beta ? mk : NULL);
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
	/* With a bf16 NHWC dx or mask, runs of pixels of every channel block
	 * per task (see sd_batchnorm_act_forward_train_bf16), else whole
	 * planes. */
	const int nhwc = (dxbf || ybf || x_nhwc || dy_nhwc) && ncb > 1;
	const int run = nhwc ? (hw < SD_BN_BF16_RUN ? hw : SD_BN_BF16_RUN) : hw;
	const int runs = (hw + run - 1) / run, inner = nhwc ? ncb : 1;
	const int outer = inner == 1 ? ncb : 1;
	#pragma omp parallel for schedule(static) if (total >= SD_LAYERS_OMP_MIN)
	for (int t = 0; t < n * outer * runs; t++) {
		const int i = t / (outer * runs), p0 = t % runs * run;
		const int np = hw - p0 < run ? hw - p0 : run;
		for (int k = 0; k < inner; k++) {
			const int cb = inner == 1 ? t / runs % outer : k;
			float mu[SD_VL], is[SD_VL], a[SD_VL], b[SD_VL], d[SD_VL], mk[2 * SD_VL];
			sd_lanes(mu, mean, cb, blk);
			if (mask_beta) {
				sd_lanes(mk, mscale, cb, blk);
				sd_lanes(mk + SD_VL, mask_beta, cb, blk);
			}
			sd_lanes(is, invstd, cb, blk);
			sd_lanes(a, k1, cb, blk);
			sd_lanes(b, mdy, cb, blk);
			sd_lanes(d, mdyx, cb, blk);
			const size_t off = sd_plane(i, cb, ncb, hw, blk) + (size_t)p0 * blk;
			/* NHWC: sample i's pixel p0, channel cb * 16. */
			const size_t hoff = ((size_t)i * hw + p0) * c + (size_t)cb * 16;
			sd_bn_bwd_apply(dx ? dx + off : NULL, dr ? dr + off : NULL,
			                dy_nhwc == SD_DX_NHWC_BF16
			                        ? (const float *)((const uint16_t *)dy + hoff)
			                        : dy + (dy_nhwc ? hoff : off),
			                ybf || mask_beta ? NULL : y + off,
			                sd_xat(xv, xb, x_nhwc ? hoff : off), xb, (size_t)np * blk, mu,
			                is, a, b, d, relu, dxbf ? dxbf + hoff : NULL, (size_t)c,
			                ybf ? ybf + hoff / ydiv : NULL, x_nhwc, dy_nhwc,
			                mask_beta ? mk : NULL);
		}
	}
}

/* ------------------------------------------------------------ accumulate */

SD_CLONES
void sd_accumulate_nhwc(float *restrict dst, const float *restrict src, int n, int c, int hw)
{
	const int ncb = c / 16;
	const size_t total = (size_t)n * c * hw;
	/* Per sample: src read once in order, dst written as its ncb planes. */
	#pragma omp parallel for schedule(static) if (total >= SD_LAYERS_OMP_MIN)
	for (int i = 0; i < n; i++) {
		const float *s = src + (size_t)i * hw * c;
		for (int p = 0; p < hw; p++)
			for (int cb = 0; cb < ncb; cb++) {
				float *d = dst + sd_plane(i, cb, ncb, hw, 16) + (size_t)p * 16;
				const sd_vf sum = SD_LD(d) + SD_LD(s + ((size_t)p * ncb + cb) * 16);
				SD_ST(d, sum);
			}
	}
}

SD_CLONES
void sd_accumulate_nhwc_bf16(float *restrict dst, const uint16_t *restrict src, int n, int c,
                             int hw)
{
	const int ncb = c / 16;
	const size_t total = (size_t)n * c * hw;
	/* sd_accumulate_nhwc's order, src widened as read (SD_LD_BF16). */
	#pragma omp parallel for schedule(static) if (total >= SD_LAYERS_OMP_MIN)
	for (int i = 0; i < n; i++) {
		const uint16_t *s = src + (size_t)i * hw * c;
		for (int p = 0; p < hw; p++)
			for (int cb = 0; cb < ncb; cb++) {
				float *d = dst + sd_plane(i, cb, ncb, hw, 16) + (size_t)p * 16;
				const sd_vf sum = SD_LD(d) + SD_LD_BF16(s + ((size_t)p * ncb + cb) * 16);
				SD_ST(d, sum);
			}
	}
}

/* -------------------------------------------------------------- shortcut */

/* Offset of element (i, ch, yy, xx) of an (., c, h, w) tensor in layout blk. */
static inline size_t sd_at(int i, int ch, int yy, int xx, int c, int h, int w, int blk)
{
	return (((size_t)i * (c / blk) + ch / blk) * ((size_t)h * w) + (size_t)yy * w + xx) * blk +
	       ch % blk;
}

/* The general loops, element by element (any blk). */
static void sd_shortcut_forward_any(float *r, const float *b, int n, int c, int h, int w, int cb,
                                    int hb, int wb, int s, int blk)
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

static void sd_shortcut_backward_any(float *db, const float *dr, int n, int c, int h, int w,
                                     int cb, int hb, int wb, int s, int blk)
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

/* Where the blk lanes of one channel block come from, in the blocked
 * layouts: lane j holds source channel off + j (off may be negative) of a
 * tensor of src_c channels.  Those with 0 <= off + j < src_c lie in source
 * blocks a and a + 1 (consecutive channels span at most two blocks): lane j
 * is lane idx[j] of a's pixel followed by b's (b = a + 1, or a when a is the
 * last block and no lane needs it), and keep[j] is all ones; the other
 * lanes are zeros (keep 0).  any: whether some lane has a source. */
struct sd_shortcut_lanes {
	int a, b, any;
	int idx[16], keep[16];
};

static void sd_shortcut_lanes(struct sd_shortcut_lanes *l, int off, int src_c, int blk)
{
	const int j0 = off < 0 ? -off : 0, j1 = src_c - off < blk ? src_c - off : blk;
	l->any = j0 < j1;
	l->a = l->any ? (off + j0) / blk : 0;
	l->b = l->a + 1 < src_c / blk ? l->a + 1 : l->a;
	for (int j = 0; j < blk; j++) {
		const int in = j >= j0 && j < j1;
		l->idx[j] = in ? off + j - l->a * blk : 0;
		l->keep[j] = in ? -1 : 0;
	}
}

/* The blk lanes of one pixel as struct sd_shortcut_lanes says, from the
 * pixel at pa (block a) and at pb (block b): bit copies and +0, as the
 * general loops give.  VF, VI: vector types of blk floats and ints. */
#define SD_SC_PIXEL(VF, VI, pa, pb, idx, keep) __extension__({ \
	VF a_, b_; \
	memcpy(&a_, (pa), sizeof a_); \
	memcpy(&b_, (pb), sizeof b_); \
	(VF)((VI)__builtin_shuffle(a_, b_, (idx)) & (keep)); \
})
#define SD_SC_ST(VF, p, v) do { VF v_ = (v); memcpy((p), &v_, sizeof v_); } while (0)

/* The forward for layout B (8 or 16): one task per (sample, block of r),
 * r's plane written in order, a whole pixel of B channels per store. */
#define SD_SHORTCUT_FORWARD(B, VF, VI)                                                        \
SD_CLONES static void sd_shortcut_forward_##B(float *restrict r, const float *restrict b,     \
                                              int n, int c, int h, int w, int cb, int hb,      \
                                              int wb, int s)                                   \
{                                                                                              \
	const int ncb = c / B, nbb = cb / B, pad = (c - cb) / 2;                               \
	const size_t hw = (size_t)h * w, hwb = (size_t)hb * wb;                                \
	_Pragma("omp parallel for schedule(static) if ((size_t)n * c * hw >= SD_LAYERS_OMP_MIN)") \
	for (int t = 0; t < n * ncb; t++) {                                                    \
		const int i = t / ncb, ob = t % ncb;                                           \
		struct sd_shortcut_lanes l;                                                    \
		sd_shortcut_lanes(&l, ob * B - pad, cb, B);                                    \
		float *d = r + sd_plane(i, ob, ncb, hw, B);                                    \
		if (!l.any) {                                                                  \
			memset(d, 0, hw * B * sizeof(float));                                  \
			continue;                                                              \
		}                                                                              \
		const float *pa = b + sd_plane(i, l.a, nbb, hwb, B);                           \
		const float *pb = b + sd_plane(i, l.b, nbb, hwb, B);                           \
		VI idx, keep;                                                                  \
		memcpy(&idx, l.idx, sizeof idx);                                               \
		memcpy(&keep, l.keep, sizeof keep);                                            \
		for (int yy = 0; yy < h; yy++) {                                               \
			const size_t row = (size_t)yy * s * wb;                                \
			for (int xx = 0; xx < w; xx++) {                                       \
				const size_t q = (row + (size_t)xx * s) * B;                   \
				SD_SC_ST(VF, d, SD_SC_PIXEL(VF, VI, pa + q, pb + q, idx, keep)); \
				d += B;                                                        \
			}                                                                      \
		}                                                                              \
	}                                                                                      \
}

/* The backward for layout B: one task per (sample, block of db), each
 * sampled pixel of db given dr's value added (db's own, or +0 when set:
 * every element of the plane written, +0 where nothing is sampled, the
 * bits of memset and then "+="). */
#define SD_SHORTCUT_BACKWARD(B, VF, VI)                                                       \
SD_CLONES static void sd_shortcut_backward_##B(float *restrict db, const float *restrict dr,  \
                                               int n, int c, int h, int w, int cb, int hb,     \
                                               int wb, int s, int set)                         \
{                                                                                              \
	const int ncb = c / B, nbb = cb / B, pad = (c - cb) / 2;                               \
	const size_t hw = (size_t)h * w, hwb = (size_t)hb * wb;                                \
	_Pragma("omp parallel for schedule(static) if ((size_t)n * c * hw >= SD_LAYERS_OMP_MIN)") \
	for (int t = 0; t < n * nbb; t++) {                                                    \
		const int i = t / nbb, sb = t % nbb;                                           \
		struct sd_shortcut_lanes l;                                                    \
		sd_shortcut_lanes(&l, sb * B + pad, c, B);                                     \
		float *d = db + sd_plane(i, sb, nbb, hwb, B);                                  \
		const float *pa = dr + sd_plane(i, l.a, ncb, hw, B);                           \
		const float *pb = dr + sd_plane(i, l.b, ncb, hw, B);                           \
		VI idx, keep;                                                                  \
		memcpy(&idx, l.idx, sizeof idx);                                               \
		memcpy(&keep, l.keep, sizeof keep);                                            \
		const VF zero = { 0 };                                                         \
		for (int yb = 0, yy = 0; yb < hb; yb++) {                                      \
			float *drow = d + (size_t)yb * wb * B;                                 \
			if (yy >= h || yb != yy * s) {                                         \
				if (set)                                                       \
					memset(drow, 0, (size_t)wb * B * sizeof(float));       \
				continue;                                                      \
			}                                                                      \
			const float *qa = pa + (size_t)yy * w * B, *qb = pb + (size_t)yy * w * B; \
			for (int xb = 0, xx = 0; xb < wb; xb++) {                              \
				float *p = drow + (size_t)xb * B;                              \
				if (xx >= w || xb != xx * s) {                                 \
					if (set)                                               \
						SD_SC_ST(VF, p, zero);                         \
					continue;                                              \
				}                                                              \
				VF old;                                                        \
				memcpy(&old, p, sizeof old);                                   \
				const size_t q = (size_t)xx * B;                               \
				SD_SC_ST(VF, p, (set ? zero : old) +                           \
				         SD_SC_PIXEL(VF, VI, qa + q, qb + q, idx, keep));      \
				xx++;                                                          \
			}                                                                      \
			yy++;                                                                  \
		}                                                                              \
	}                                                                                      \
}

typedef float sd_vf8 __attribute__((vector_size(8 * sizeof(float))));
typedef int sd_vi8 __attribute__((vector_size(8 * sizeof(int))));
SD_SHORTCUT_FORWARD(16, sd_vf, sd_vi)
SD_SHORTCUT_FORWARD(8, sd_vf8, sd_vi8)
SD_SHORTCUT_BACKWARD(16, sd_vf, sd_vi)
SD_SHORTCUT_BACKWARD(8, sd_vf8, sd_vi8)

void sd_shortcut_forward(float *r, const float *b, int n, int c, int h, int w, int cb, int hb,
                         int wb, int s, int blk)
{
	if (blk == 16)
		sd_shortcut_forward_16(r, b, n, c, h, w, cb, hb, wb, s);
	else if (blk == 8)
		sd_shortcut_forward_8(r, b, n, c, h, w, cb, hb, wb, s);
	else
		sd_shortcut_forward_any(r, b, n, c, h, w, cb, hb, wb, s, blk);
}

void sd_shortcut_backward(float *db, const float *dr, int n, int c, int h, int w, int cb,
                          int hb, int wb, int s, int blk)
{
	if (blk == 16)
		sd_shortcut_backward_16(db, dr, n, c, h, w, cb, hb, wb, s, 0);
	else if (blk == 8)
		sd_shortcut_backward_8(db, dr, n, c, h, w, cb, hb, wb, s, 0);
	else
		sd_shortcut_backward_any(db, dr, n, c, h, w, cb, hb, wb, s, blk);
}

void sd_shortcut_backward_set(float *db, const float *dr, int n, int c, int h, int w, int cb,
                              int hb, int wb, int s, int blk)
{
	if (blk == 16)
		sd_shortcut_backward_16(db, dr, n, c, h, w, cb, hb, wb, s, 1);
	else if (blk == 8)
		sd_shortcut_backward_8(db, dr, n, c, h, w, cb, hb, wb, s, 1);
	else {
		memset(db, 0, (size_t)n * cb * hb * wb * sizeof(float));
		sd_shortcut_backward_any(db, dr, n, c, h, w, cb, hb, wb, s, blk);
	}
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
