/* tests/engine/test-conv-bf16.c - the bf16 precision of the oneDNN
 * convolution path (engine/layers.h, SD_CONV_BF16) against the float32
 * im2col path, element by element, within a derived bound; and a short
 * training run in bf16 against float32.
 *
 * The bound.  bf16 keeps 8 significant bits, so rounding a float32 to bf16
 * (round to nearest even) moves it by at most u = 2^-8 of itself.  A bf16
 * call rounds both operands of every product (x and w forward, dy and w for
 * the input gradient, x and dy for the weight gradient); the product of two
 * bf16 numbers is exact in float32 and oneDNN sums the K products in float32
 * (AMX and AVX512-BF16 accumulate in float32), as the im2col reference does
 * in its own order.  So for an output o = sum_i a_i b_i of K terms:
 *     |o_bf16 - o_ref| <= ((1 + u)^2 - 1) S + 2 K 2^-24 S,   S = sum |a_i b_i|
 * (the operands' rounding, then each float32 summation's gamma_K ~ K 2^-24).
 * S is computed by the reference path itself on |a| and |b|.  K is c r r
 * forward (plus one for the bias), k r r for the input gradient, n oh ow for
 * the weight and bias gradients.  With c r r = 144 that is 2^-7 + 1.7e-5:
 * about 1e-2 relative per dot product, as expected of bf16.
 *
 * Also checked, so that the bound cannot pass by bf16 not running: the
 * kernels oneDNN names are bf16 ones and each output's worst error is at
 * least VISIBLE times that of the float32 precision on the same path (which
 * is checked against the float32 part of the bound, 2 K 2^-24 S); and no
 * oneDNN call fell back to im2col.
 *
 * Training: resnet20 and cnn on synthetic data, STEPS steps from the same
 * seed in float32 and in bf16 on the oneDNN path.  The band is measured, not
 * guessed: the spread of the float32 run against itself with its training
 * images rounded to bf16 (one bf16 rounding of the data, what bf16 does to
 * the first convolution's input), times BAND_FACTOR for the rounding of
 * every later convolution's inputs; every step's mean loss in bf16 must
 * stay within it of float32's, and the bf16 run must differ from float32's
 * at all.
 * SKIPs (77) where oneDNN has no bf16 kernels on this CPU. */
#include <math.h>
#include <stdint.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/layers.h"
#include "engine/model-graph.h"
#include "tests/check.h"
#include "tests/engine/bf16-test.h"

#define U_BF16 0x1p-8
#define EPS_F32 0x1p-24
#define STEPS 8
/* bf16's worst error over float32's on the same oneDNN path, at least: a
 * float32 kernel run in its place gives about 1x; bf16 gives 500x and more. */
#define VISIBLE 64.0
#define BATCH 32
/* Rounding every convolution's inputs each step moves the loss more than
 * one rounding of the data.  Measured here (AMX, 2 threads, lr 0.01): the
 * bf16 run's worst step drifted 2.1x the data-rounding spread for resnet20
 * and 1.9x for the cnn (0.7x and 1.0x at lr 0.05).  With resnet20's last
 * stage taking its weight gradients as swapped forward convolutions
 * (engine/conv-dnnl.c, sd_use_wgrad_swap: the same products summed in
 * another order, the same worst error per element as checked above)
 * resnet20 drifted 6.2x (2 threads; 3.8x on 1): once any activation's bf16
 * rounding flips, the run follows another path, so the drift measures
 * chaos as much as precision.  8 leaves room for other CPUs' kernels; a
 * wrong kernel moves the loss by far more (a dropped term: percents). */
#define BAND_FACTOR 8.0

static float *absdup(const float *a, size_t n)
{
	float *p = fill(n, 0, 0.0f);
	for (size_t i = 0; i < n; i++)
		p[i] = fabsf(a[i]);
	return p;
}

/* Worst |got - ref| / (S bound_factor) and worst |got - ref| / S over n. */
static void worst(const float *got, const float *ref, const float *s, size_t n, double factor,
                  double *over, double *rel)
{
	*over = *rel = 0.0;
	for (size_t i = 0; i < n; i++) {
		double e = fabs((double)got[i] - ref[i]), S = s[i] > 1e-30f ? s[i] : 1e-30;
		if (e / (S * factor) > *over)
			*over = e / (S * factor);
		if (e / S > *rel)
			*rel = e / S;
	}
}

/* x rounded to the nearest bf16 (ties to even), as oneDNN's reorders do. */
struct pass_result {
	double over, rel;
};

/* Forward and backward of shape s on the oneDNN path in the current
 * precision (blocked layout blk when blk > 1, else NCHW), results in NCHW. */
static void run_dnn(const struct sd_conv2d_shape *s, int blk, int first, const float *x,
                    const float *w, const float *b, const float *dy, float *y, float *dx,
                    float *dw, float *db)
{
	const size_t nx = (size_t)s->n * s->c * s->h * s->w, ny = (size_t)s->n * s->k * s->oh * s->ow;
	size_t wsn = blk > 1 ? sd_conv2d_workspace_floats_blocked(s, blk, blk)
	                     : sd_conv2d_workspace_floats(s);
	float *ws = fill(wsn, 0, 0.0f);
	sd_conv2d_set_path(SD_CONV_ONEDNN);
	if (blk > 1) {
		float *xb = fill(nx, 0, 0), *yb = fill(ny, 0, 0), *dyb = fill(ny, 0, 0), *dxb = fill(nx, 0, 0);
		sd_layout_to_blocked(xb, x, s->n, s->c, s->h * s->w, blk);
		sd_layout_to_blocked(dyb, dy, s->n, s->k, s->oh * s->ow, blk);
		sd_conv2d_forward_blocked(yb, xb, w, b, s, blk, blk, ws);
		sd_conv2d_backward_blocked(first ? NULL : dxb, dw, db, dyb, xb, w, s, blk, blk, ws);
		sd_layout_from_blocked(y, yb, s->n, s->k, s->oh * s->ow, blk);
		sd_layout_from_blocked(dx, dxb, s->n, s->c, s->h * s->w, blk);
		/* The same calls again with the input kept from forward to
		 * backward (struct sd_conv2d_keep): the same bits, and in bf16 the
		 * keep filled by the forward (else this checks nothing). */
		const size_t nw = (size_t)s->k * s->c * s->r * s->r;
		float *ky = fill(ny, 0, 0), *kdx = fill(nx, 0, 0), *kdw = fill(nw, 0, 0);
		float *kdb = fill(s->k, 0, 0), *zdw = fill(nw, 0, 0), *zdb = fill(s->k, 0, 0);
		memset(dxb, 0, nx * sizeof *dxb);
		struct sd_conv2d_keep keep = { 0 };
		sd_conv2d_forward_blocked_kept(ky, xb, w, b, s, blk, blk, ws, &keep);
		const int filled = keep.valid;
		sd_conv2d_backward_blocked_kept(first ? NULL : kdx, kdw, db ? kdb : NULL, dyb, xb, w, s,
		                                blk, blk, ws, &keep, NULL);
		sd_conv2d_backward_blocked(first ? NULL : dxb, zdw, db ? zdb : NULL, dyb, xb, w, s, blk,
		                           blk, ws);
		const int bf16 = sd_conv2d_get_precision() == SD_CONV_BF16;
		check_report(filled == bf16 && !keep.valid,
		             "n%d c%d k%d %s: the forward kept its input %s (%d), the backward "
		             "used it up", s->n, s->c, s->k, sd_conv2d_precision_name(sd_conv2d_get_precision()),
		             bf16 ? "in bf16" : "only in bf16", filled);
		check_report(!memcmp(ky, yb, ny * sizeof *ky) && !memcmp(kdx, dxb, nx * sizeof *kdx) &&
		             !memcmp(kdw, zdw, nw * sizeof *kdw) && !memcmp(kdb, zdb, s->k * sizeof *kdb),
		             "n%d c%d k%d %s: the same bits with the input kept", s->n, s->c, s->k,
		             sd_conv2d_precision_name(sd_conv2d_get_precision()));
		sd_conv2d_keep_free(&keep);
		/* x given only in bf16 NHWC by its producer (keep.x_bf16_only,
		 * float32 x left as NaN): forward and backward the same bits as
		 * converting x; refused by oneDNN (kernels other than those the
		 * copy was made for) and on im2col, those of the float32 x
		 * rounded to bf16, widened from the copy. */
		float *xnan = fill(nx, 0, 0);
		for (size_t e = 0; e < nx; e++)
			xnan[e] = NAN;
		struct sd_conv2d_keep kx = { 0 };
		uint16_t *xh = sd_conv2d_keep_prepare(&kx, s, db != NULL, blk, blk, xnan);
		if (bf16 && xh) {
			float *xr = fill(nx, 0, 0), *ry = fill(ny, 0, 0), *rdx = fill(nx, 0, 0);
			float *rdw = fill(nw, 0, 0), *rdb = fill(s->k, 0, 0);
			const size_t hw = (size_t)s->h * s->w;
			for (int i = 0; i < s->n; i++)
				for (int ch = 0; ch < s->c; ch++)
					for (size_t q = 0; q < hw; q++) {
						const size_t at = (((size_t)i * (s->c / blk) + ch / blk) * hw + q) *
						                  blk + ch % blk;
						float v = to_bf16(xb[at]);
						uint32_t u;
						memcpy(&u, &v, sizeof u);
						xh[((size_t)i * hw + q) * s->c + ch] = (uint16_t)(u >> 16);
						xr[at] = v;
					}
			for (int mode = 0; mode < 3; mode++) {
				/* 0: oneDNN reads the copy; 1: oneDNN refuses it (its
				 * kernels are not those it was made for); 2: im2col. */
				const unsigned long plan = kx.plan;
				memset(ky, 0, ny * sizeof *ky), memset(kdx, 0, nx * sizeof *kdx);
				memset(kdw, 0, nw * sizeof *kdw), memset(kdb, 0, s->k * sizeof *kdb);
				kx.filled = 1;
				kx.x_bf16_only = 1;
				if (mode == 1)
					kx.plan = plan + 1;
				sd_conv2d_set_path(mode == 2 ? SD_CONV_IM2COL : SD_CONV_ONEDNN);
				sd_conv2d_forward_blocked_kept(ky, xnan, w, b, s, blk, blk, ws, &kx);
				sd_conv2d_backward_blocked_kept(first ? NULL : kdx, kdw, db ? kdb : NULL, dyb,
				                                xnan, w, s, blk, blk, ws, &kx, NULL);
				const float *wy = yb, *wdx = dxb, *wdw = zdw, *wdb = zdb;
				if (mode > 0) {
					sd_conv2d_set_path(SD_CONV_IM2COL);
					memset(rdw, 0, nw * sizeof *rdw), memset(rdb, 0, s->k * sizeof *rdb);
					sd_conv2d_forward_blocked(ry, xr, w, b, s, blk, blk, ws);
					sd_conv2d_backward_blocked(first ? NULL : rdx, rdw, db ? rdb : NULL, dyb, xr,
					                           w, s, blk, blk, ws);
					wy = ry, wdx = rdx, wdw = rdw, wdb = rdb;
				}
				sd_conv2d_set_path(SD_CONV_ONEDNN);
				kx.plan = plan;
				check_report(!memcmp(ky, wy, ny * sizeof *ky) &&
				             (first || !memcmp(kdx, wdx, nx * sizeof *kdx)) &&
				             !memcmp(kdw, wdw, nw * sizeof *kdw) &&
				             (!db || !memcmp(kdb, wdb, s->k * sizeof *kdb)),
				             "n%d c%d k%d bf16: x given in bf16 only, %s: the same bits as %s",
				             s->n, s->c, s->k,
				             mode == 0 ? "read by oneDNN" : mode == 1 ? "refused by oneDNN"
				                                                      : "on im2col",
				             mode == 0 ? "converting x" : "im2col on x rounded to bf16");
			}
			free(xr), free(ry), free(rdx), free(rdw), free(rdb);
		}
		sd_conv2d_keep_free(&kx);
		free(xnan);
		/* dy given only in bf16 NHWC by its producer (keep_dy, float32 dy
		 * left as NaN): the same bits as converting dy, on oneDNN; and on
		 * im2col (a fallback), those of the float32 dy rounded to bf16. */
		struct sd_conv2d_keep kdy = { 0 };
		uint16_t *dyh = sd_conv2d_keep_prepare_dy(&kdy, s, db != NULL, blk, blk, dyb, !first);
		if (bf16 && dyh) {
			float *nan = fill(ny, 0, 0), *dyr = fill(ny, 0, 0);
			const size_t ohw = (size_t)s->oh * s->ow;
			for (size_t e = 0; e < ny; e++)
				nan[e] = NAN;
			for (int i = 0; i < s->n; i++)
				for (int ch = 0; ch < s->k; ch++)
					for (size_t q = 0; q < ohw; q++) {
						const size_t at = (((size_t)i * (s->k / blk) + ch / blk) * ohw + q) * blk + ch % blk;
						float v = to_bf16(dyb[at]);
						uint32_t u;
						memcpy(&u, &v, sizeof u);
						dyh[((size_t)i * ohw + q) * s->k + ch] = (uint16_t)(u >> 16);
						dyr[at] = v;
					}
			memset(kdw, 0, nw * sizeof *kdw), memset(kdb, 0, s->k * sizeof *kdb);
			memcpy(dyb, nan, ny * sizeof *dyb);   /* the producer wrote no float32 dy */
			kdy.filled = 1;
			sd_conv2d_backward_blocked_kept(first ? NULL : kdx, kdw, db ? kdb : NULL, dyb, xb,
			                                w, s, blk, blk, ws, NULL, &kdy);
			check_report(!memcmp(kdx, dxb, nx * sizeof *kdx) && !memcmp(kdw, zdw, nw * sizeof *kdw) &&
			             (!db || !memcmp(kdb, zdb, s->k * sizeof *kdb)) && !kdy.filled,
			             "n%d c%d k%d bf16: the same bits with dy given in bf16 only", s->n, s->c,
			             s->k);
			/* The im2col fallback reads it too. */
			float *rdx = fill(nx, 0, 0), *rdw = fill(nw, 0, 0), *rdb = fill(s->k, 0, 0);
			memset(kdw, 0, nw * sizeof *kdw), memset(kdb, 0, s->k * sizeof *kdb);
			memset(kdx, 0, nx * sizeof *kdx);
			kdy.filled = 1;
			sd_conv2d_set_path(SD_CONV_IM2COL);
			sd_conv2d_backward_blocked_kept(first ? NULL : kdx, kdw, db ? kdb : NULL, dyb, xb,
			                                w, s, blk, blk, ws, NULL, &kdy);
			sd_conv2d_backward_blocked(first ? NULL : rdx, rdw, db ? rdb : NULL, dyr, xb, w, s,
			                           blk, blk, ws);
			sd_conv2d_set_path(SD_CONV_ONEDNN);
			check_report(!memcmp(kdx, rdx, nx * sizeof *kdx) && !memcmp(kdw, rdw, nw * sizeof *kdw) &&
			             (!db || !memcmp(kdb, rdb, s->k * sizeof *kdb)),
			             "n%d c%d k%d bf16: im2col reads dy given in bf16 only as its float32 "
			             "value", s->n, s->c, s->k);
			free(nan), free(dyr), free(rdx), free(rdw), free(rdb);
		} else {
			/* On AMX the kernels read dy in NHWC bf16, which its producer
			 * can write; AVX512-BF16 alone (a Zen 4, or here with
			 * ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16) reads nChw16c, so
			 * nothing is offered and dy is converted per call. */
			const int amx = bf16 && sd_conv2d_bf16_isa() && !strcmp(sd_conv2d_bf16_isa(), "AMX");
			check_report(!amx && !dyh, "n%d c%d k%d %s: dy's bf16 layout offered %s", s->n,
			             s->c, s->k, bf16 ? "bf16" : "fp32",
			             amx ? "(it is not)" : bf16 ? "only to AMX kernels" : "only in bf16");
		}
		sd_conv2d_keep_free(&kdy);
		free(ky), free(kdx), free(kdw), free(kdb), free(zdw), free(zdb);
		free(xb), free(yb), free(dyb), free(dxb);
	} else {
		sd_conv2d_forward(y, x, w, b, s, ws);
		sd_conv2d_backward(first ? NULL : dx, dw, db, dy, x, w, s, ws);
	}
	free(ws);
}

/* The float32 im2col reference of the same calls. */
static void run_ref(const struct sd_conv2d_shape *s, int first, const float *x, const float *w,
                    const float *b, const float *dy, float *y, float *dx, float *dw, float *db)
{
	float *ws = fill(sd_conv2d_workspace_floats(s), 0, 0.0f);
	sd_conv2d_set_path(SD_CONV_IM2COL);
	sd_conv2d_forward(y, x, w, b, s, ws);
	sd_conv2d_backward(first ? NULL : dx, dw, db, dy, x, w, s, ws);
	free(ws);
}

/* swapped: 1 when the bf16 weight gradient must run as the forward
 * convolution of x^T and dy^T (engine/conv-dnnl.c, sd_use_wgrad_swap), 0
 * when it must not, -1 either way. */
static void check_shape(int n, int c, int hw, int k, int r, int stride, int bias, int first,
                        int blk, int swapped)
{
	struct sd_conv2d_shape s;
	if (sd_conv2d_shape_init(&s, n, c, hw, hw, k, r, stride, r / 2) < 0)
		exit(1);
	const size_t nx = (size_t)s.n * c * hw * hw, nw = (size_t)k * c * r * r,
	             ny = (size_t)s.n * k * s.oh * s.ow;
	float *x = fill(nx, 1, 4.0f), *w = fill(nw, 2, 0.5f), *b = bias ? fill(k, 3, 1.0f) : NULL;
	float *dy = fill(ny, 4, 2.0f);
	float *ax = absdup(x, nx), *aw = absdup(w, nw), *ab = bias ? absdup(b, k) : NULL;
	float *ady = absdup(dy, ny);
	/* The reference, and the sums of magnitudes S of every output. */
	float *ry = fill(ny, 0, 0), *rdx = fill(nx, 0, 0), *rdw = fill(nw, 0, 0), *rdb = fill(k, 0, 0);
	float *sy = fill(ny, 0, 0), *sdx = fill(nx, 0, 0), *sdw = fill(nw, 0, 0), *sdb = fill(k, 0, 0);
	run_ref(&s, first, x, w, b, dy, ry, rdx, rdw, bias ? rdb : NULL);
	run_ref(&s, first, ax, aw, ab, ady, sy, sdx, sdw, bias ? sdb : NULL);
	const double kf = (double)c * r * r + 1, kd = (double)k * r * r,
	             kw = (double)s.n * s.oh * s.ow;
	const double op = (1 + U_BF16) * (1 + U_BF16) - 1;
	char label[96];
	snprintf(label, sizeof label, "n%d c%d %dx%d k%d r%d s%d%s%s, %s", s.n, c, hw, hw, k, r,
	         stride, bias ? " bias" : "", first ? " (no dx)" : "",
	         blk > 1 ? "blocked" : "NCHW");
	struct pass_result fp32_res[4];
	for (int prec = SD_CONV_FP32; prec <= SD_CONV_BF16; prec++) {
		sd_conv2d_set_precision((enum sd_conv_precision)prec);
		float *y = fill(ny, 0, 0), *dx = fill(nx, 0, 0), *dw = fill(nw, 0, 0), *db = fill(k, 0, 0);
		run_dnn(&s, blk, first, x, w, b, dy, y, dx, dw, bias ? db : NULL);
		/* bf16: the operands' rounding plus two float32 sums; float32:
		 * the two sums alone. */
		const double o = prec == SD_CONV_BF16 ? op : 0.0;
		struct pass_result res[4];
		worst(y, ry, sy, ny, o + 2 * kf * EPS_F32, &res[0].over, &res[0].rel);
		worst(dw, rdw, sdw, nw, o + 2 * kw * EPS_F32, &res[1].over, &res[1].rel);
		res[2] = res[3] = (struct pass_result){ 0, 0 };
		if (!first)
			worst(dx, rdx, sdx, nx, o + 2 * kd * EPS_F32, &res[2].over, &res[2].rel);
		if (bias)
			worst(db, rdb, sdb, k, o + 2 * kw * EPS_F32, &res[3].over, &res[3].rel);
		const char *names[4] = { "y", "dw", "dx", "db" };
		for (int i = 0; i < 4; i++) {
			if ((i == 2 && first) || (i == 3 && !bias))
				continue;
			check_report(res[i].over <= 1.0,
			             "%-40s %s %-2s worst error %.2e of its sum of |terms|, %.2f of the bound",
			             label, sd_conv2d_precision_name((enum sd_conv_precision)prec), names[i],
			             res[i].rel, res[i].over);
		}
		if (prec == SD_CONV_FP32) {
			memcpy(fp32_res, res, sizeof res);
		} else {
			int visible = 1;
			for (int i = 0; i < 4; i++)
				visible &= res[i].rel >= VISIBLE * fp32_res[i].rel;
			check_report(visible,
			             "%-40s bf16 rounding is visible: worst errors y %.0fx, dw %.0fx "
			             "float32's (>= %.0fx)", label, res[0].rel / fp32_res[0].rel,
			             res[1].rel / fp32_res[1].rel, VISIBLE);
			char impl[160];
			sd_conv2d_describe(&s, bias, impl, sizeof impl);
			check_report(strstr(impl, "bf16") != NULL, "%-40s bf16 kernels: %s", label, impl);
			if (swapped >= 0)
				check_report((strstr(impl, "x^T * dy^T") != NULL) == swapped,
				             "%-40s weight gradient %sas a forward of x^T and dy^T", label,
				             swapped ? "" : "not ");
		}
		free(y), free(dx), free(dw), free(db);
	}
	sd_conv2d_set_precision(SD_CONV_FP32);
	free(x), free(w), free(b), free(dy), free(ax), free(aw), free(ab), free(ady);
	free(ry), free(rdx), free(rdw), free(rdb), free(sy), free(sdx), free(sdw), free(sdb);
}


/* The batch-norm's bf16 copy of its output (sd_batchnorm_act_forward_train_bf16,
 * what the next convolution reads in bf16 instead of converting y itself):
 * every element of the NHWC copy is y's element rounded to bf16. */
static void check_bn_bf16_copy(void)
{
	const int n = 3, c = 48, hw = 40, blk = 16;
	const size_t nx = (size_t)n * c * hw;
	float *x = fill(nx, 5, 6.0f), *r = fill(nx, 6, 2.0f), *y = fill(nx, 0, 0);
	float *gamma = fill(c, 7, 1.0f), *beta = fill(c, 8, 1.0f);
	float *mean = fill(c, 0, 0), *invstd = fill(c, 0, 0), *rm = fill(c, 0, 0), *rv = fill(c, 0, 0);
	uint16_t *yh = calloc(nx, sizeof *yh);
	sd_batchnorm_act_forward_train_bf16(y, yh, mean, invstd, rm, rv, x, NULL, 0, r, gamma, beta, n,
	                                    c, hw, blk, 1, 0.1f, 1e-5f);
	size_t bad = 0, zeros = 0;
	for (int i = 0; i < n; i++)
		for (int ch = 0; ch < c; ch++)
			for (int p = 0; p < hw; p++) {
				float v = y[(((size_t)i * (c / blk) + ch / blk) * hw + p) * blk + ch % blk];
				uint32_t want;
				v = to_bf16(v);
				memcpy(&want, &v, sizeof want);
				bad += yh[((size_t)i * hw + p) * c + ch] != (uint16_t)(want >> 16);
				zeros += v == 0.0f;
			}
	check_report(bad == 0 && zeros > 0 && zeros < nx,
	             "batch-norm + add + relu writes y rounded to bf16, NHWC: %zu of %zu differ "
	             "(%zu zeros from the relu)", bad, nx, zeros);
	/* Its backward, dx only in bf16 NHWC, against the float32 dx rounded;
	 * the residual's gradient as ever. */
	float *dy = fill(nx, 9, 3.0f), *dx = fill(nx, 0, 0), *dr = fill(nx, 0, 0);
	float *dr2 = fill(nx, 0, 0), *dg = fill(c, 0, 0), *db = fill(c, 0, 0);
	sd_batchnorm_act_backward(dx, dr, dg, db, dy, y, x, mean, invstd, gamma, n, c, hw, blk, 1);
	sd_batchnorm_act_backward_bf16(NULL, yh, dr2, dg, db, dy, y, NULL, NULL, x, NULL, 0, 0, mean,
	                               invstd, gamma, n, c, hw, blk, 1);
	bad = 0;
	for (int i = 0; i < n; i++)
		for (int ch = 0; ch < c; ch++)
			for (int p = 0; p < hw; p++) {
				float v = to_bf16(dx[(((size_t)i * (c / blk) + ch / blk) * hw + p) * blk +
				                     ch % blk]);
				uint32_t want;
				memcpy(&want, &v, sizeof want);
				bad += yh[((size_t)i * hw + p) * c + ch] != (uint16_t)(want >> 16);
			}
	check_report(bad == 0 && !memcmp(dr, dr2, nx * sizeof *dr),
	             "its backward writes dx rounded to bf16, NHWC: %zu of %zu differ; the "
	             "residual's gradient unchanged", bad, nx);
	free(dy), free(dx), free(dr), free(dr2), free(dg), free(db);
	free(x), free(r), free(y), free(gamma), free(beta), free(mean), free(invstd), free(rm);
	free(rv), free(yh);
}

/* The float32 value of bf16 bits h (exact). */
static float bf16_f32(uint16_t h)
{
	const uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}

/* sd_accumulate_nhwc_bf16 (conv1's bf16 dx, a further contribution to a
 * residual block's float32 gradient) on g (n, c, hw) in nChw16c and h bf16
 * NHWC (n, hw, c): the number of elements, of n c hw, whose sum is not
 * exactly g + (float)h, element (i, ch, p) of each addressed by hand. */
static size_t accumulate_bf16_bad(const float *g, const uint16_t *h, int n, int c, int hw)
{
	const int blk = 16;
	const size_t nx = (size_t)n * c * hw;
	float *got = fill(nx, 0, 0);
	memcpy(got, g, nx * sizeof(float));
	sd_accumulate_nhwc_bf16(got, h, n, c, hw);
	size_t bad = 0;
	for (int i = 0; i < n; i++)
		for (int ch = 0; ch < c; ch++)
			for (int p = 0; p < hw; p++) {
				const size_t at = (((size_t)i * (c / blk) + ch / blk) * hw + p) * blk + ch % blk;
				const float want = g[at] + bf16_f32(h[((size_t)i * hw + p) * c + ch]);
				bad += memcmp(&want, &got[at], sizeof want) != 0;
			}
	free(got);
	return bad;
}

/* The residual group's ReLU mask in bits (sd_batchnorm_act_forward_train_bits
 * beside y's bf16 copy, read by sd_batchnorm_act_backward_bits instead of
 * the copy): every bit is "copy > 0", a channel of positive denormal y
 * (gamma 0, beta 1e-40, no residual there: the copy holds +0) included; and
 * every backward output, dx in float32 and in bf16 NHWC, dr, dgamma,
 * dbeta, has the same bits as with the copy.  xnhwc: x given in bf16 NHWC
 * (as a bf16 convolution writes it), else float32 in layout 16. */
static void check_bn_bf16_bits(int n, int c, int hw, int xnhwc)
{
	const int blk = 16;
	const size_t nx = (size_t)n * c * hw;
	float *x = fill(nx, 31, 4.0f), *r = fill(nx, 32, 2.0f), *y = fill(nx, 0, 0);
	float *gamma = fill(c, 33, 1.0f), *beta = fill(c, 34, 1.0f);
	float *mean = fill(c, 0, 0), *invstd = fill(c, 0, 0), *rm = fill(c, 0, 0), *rv = fill(c, 0, 0);
	uint16_t *yh = calloc(nx, sizeof *yh), *bits = calloc(nx / 16, sizeof *bits);
	uint16_t *xh = calloc(nx, sizeof *xh);
	const int dch = 3;   /* the denormal channel */
	gamma[dch] = 0.0f;
	beta[dch] = 1e-40f;
	for (int i = 0; i < n; i++)
		for (int ch = 0; ch < c; ch++)
			for (int p = 0; p < hw; p++) {
				const size_t at = (((size_t)i * (c / blk) + ch / blk) * hw + p) * blk +
				                  ch % blk;
				uint32_t u;
				x[at] = to_bf16(x[at]);
				memcpy(&u, &x[at], sizeof u);
				xh[((size_t)i * hw + p) * c + ch] = (uint16_t)(u >> 16);
				if (ch == dch)
					r[at] = 0.0f;
			}
	sd_batchnorm_act_forward_train_bits(y, yh, bits, mean, invstd, rm, rv, xnhwc ? NULL : x,
	                                    xnhwc ? xh : NULL, xnhwc, r, gamma, beta, n, c, hw, blk,
	                                    1, 0.1f, 1e-5f);
	size_t bad = 0, ones = 0, denormal = 0;
	for (size_t k = 0; k < nx; k++) {
		const int bit = bits[k / 16] >> (k % 16) & 1;
		bad += bit != (bf16_f32(yh[k]) > 0.0f);
		ones += bit;
	}
	for (int i = 0; i < n; i++)
		for (int p = 0; p < hw; p++) {
			const size_t at = (((size_t)i * (c / blk) + dch / blk) * hw + p) * blk + dch % blk;
			const size_t k = ((size_t)i * hw + p) * c + dch;
			denormal += y[at] > 0.0f && !(bits[k / 16] >> (k % 16) & 1);
		}
	check_report(bad == 0 && ones > 0 && ones < nx && denormal == (size_t)n * hw,
	             "batch-norm + add + relu, n %d c %d hw %d, x %s: ReLU bit mask = bf16 copy > 0, "
	             "%zu of %zu differ (%zu set), %zu of %d denormal y unset", n, c, hw,
	             xnhwc ? "bf16 NHWC" : "float32", bad, nx, ones, denormal, n * hw);
	float *dy = fill(nx, 35, 3.0f);
	float *o[2][5];
	uint16_t *dxh[2];
	for (int v = 0; v < 2; v++) {
		for (int j = 0; j < 5; j++)
			o[v][j] = fill(j < 3 ? nx : (size_t)c, 0, 0);
		dxh[v] = calloc(nx, sizeof *dxh[v]);
		/* v 0: the mask from the copy; v 1: from the bits.  dx in
		 * float32 then in bf16 (dgamma, dbeta accumulate both). */
		sd_batchnorm_act_backward_bits(o[v][0], NULL, o[v][1], o[v][3], o[v][4], dy, NULL, yh,
		                               v ? bits : NULL, NULL, xnhwc ? NULL : x,
		                               xnhwc ? xh : NULL, xnhwc, 0, mean, invstd, gamma, n, c,
		                               hw, blk, 1);
		sd_batchnorm_act_backward_bits(NULL, dxh[v], o[v][2], o[v][3], o[v][4], dy, NULL, yh,
		                               v ? bits : NULL, NULL, xnhwc ? NULL : x,
		                               xnhwc ? xh : NULL, xnhwc, 0, mean, invstd, gamma, n, c,
		                               hw, blk, 1);
	}
	const size_t fb = nx * sizeof(float), cb = (size_t)c * sizeof(float);
	check_report(!memcmp(o[0][0], o[1][0], fb) && !memcmp(o[0][1], o[1][1], fb) &&
	             !memcmp(o[0][2], o[1][2], fb) && !memcmp(o[0][3], o[1][3], cb) &&
	             !memcmp(o[0][4], o[1][4], cb) && !memcmp(dxh[0], dxh[1], nx * sizeof *dxh[0]),
	             "its backward with the bit mask: dx (float32, bf16), dr, dgamma, dbeta the "
	             "same bits as with the bf16 copy");
	for (int v = 0; v < 2; v++) {
		for (int j = 0; j < 5; j++)
			free(o[v][j]);
		free(dxh[v]);
	}
	free(dy), free(x), free(r), free(y), free(gamma), free(beta), free(mean), free(invstd);
	free(rm), free(rv), free(yh), free(bits), free(xh);
}

/* The residual group's r read in bf16 NHWC (sd_batchnorm_act_forward_train_rbf,
 * as the previous group's copy for its next convolution holds it) against
 * float32 r in layout 16 holding the same bf16 values: the bf16 copy, its
 * bit mask, float32 y where written, mean, invstd and the running
 * statistics all the same bits.  mode 0: y in bf16 only (the identity
 * shortcut's case), 1: float32 y too (option A's next reader), 2: float32
 * y only (the pool's), 3: as 0 with x float32 in layout 16. */
static void check_bn_r_bf16(int n, int c, int hw, int mode)
{
	const int blk = 16, xnhwc = mode != 3;
	const size_t nx = (size_t)n * c * hw;
	float *x = fill(nx, 41, 4.0f), *r = fill(nx, 42, 3.0f);
	float *gamma = fill(c, 43, 1.0f), *beta = fill(c, 44, 1.0f);
	uint16_t *xh = calloc(nx, sizeof *xh), *rh = calloc(nx, sizeof *rh);
	for (int i = 0; i < n; i++)
		for (int ch = 0; ch < c; ch++)
			for (int p = 0; p < hw; p++) {
				const size_t at = (((size_t)i * (c / blk) + ch / blk) * hw + p) * blk +
				                  ch % blk;
				const size_t k = ((size_t)i * hw + p) * c + ch;
				uint32_t u;
				x[at] = to_bf16(x[at]);
				memcpy(&u, &x[at], sizeof u);
				xh[k] = (uint16_t)(u >> 16);
				r[at] = to_bf16(r[at]);
				memcpy(&u, &r[at], sizeof u);
				rh[k] = (uint16_t)(u >> 16);
			}
	/* v 0: float32 r; v 1: bf16 r.  Outputs: y, mean, invstd, rm, rv. */
	float *o[2][5];
	uint16_t *yh[2], *bits[2];
	for (int v = 0; v < 2; v++) {
		for (int j = 0; j < 5; j++)
			o[v][j] = fill(j ? (size_t)c : nx, j == 4 ? 45 : 0, j == 4 ? 1.0f : 0.0f);
		yh[v] = mode == 2 ? NULL : calloc(nx, sizeof *yh[v]);
		bits[v] = mode == 2 ? NULL : calloc(nx / 16, sizeof *bits[v]);
		sd_batchnorm_act_forward_train_rbf(mode == 0 || mode == 3 ? NULL : o[v][0], yh[v],
		                                   bits[v], o[v][1], o[v][2], o[v][3], o[v][4],
		                                   xnhwc ? NULL : x, xnhwc ? xh : NULL, xnhwc,
		                                   v ? NULL : r, v ? rh : NULL, gamma, beta, n, c, hw,
		                                   blk, 1, 0.1f, 1e-5f);
	}
	const size_t fb = nx * sizeof(float), cb = (size_t)c * sizeof(float);
	int same = !memcmp(o[0][0], o[1][0], fb);
	for (int j = 1; j < 5; j++)
		same = same && !memcmp(o[0][j], o[1][j], cb);
	if (mode != 2)
		same = same && !memcmp(yh[0], yh[1], nx * sizeof *yh[0]) &&
		       !memcmp(bits[0], bits[1], nx / 16 * sizeof *bits[0]);
	/* The outputs must hold something: y (or its copy) positive somewhere. */
	size_t pos = 0;
	for (size_t k = 0; k < nx; k++)
		pos += mode == 2 ? o[1][0][k] > 0.0f : bf16_f32(yh[1][k]) > 0.0f;
	static const char *const what[] = { "y in bf16 only", "float32 y and bf16", "float32 y only",
		                            "y in bf16 only, x float32" };
	check_report(same && pos > 0 && pos < nx,
	             "batch-norm + add + relu, n %d c %d hw %d, %s: r in bf16 NHWC gives the same "
	             "bits as float32 r of those values (y, copy, mask, mean, invstd, running "
	             "stats; %zu of %zu positive)", n, c, hw, what[mode], pos, nx);
	for (int v = 0; v < 2; v++) {
		for (int j = 0; j < 5; j++)
			free(o[v][j]);
		free(yh[v]), free(bits[v]);
	}
	free(x), free(r), free(gamma), free(beta), free(xh), free(rh);
}

/* The batch-norm backward's ReLU mask read from y's bf16 NHWC copy
 * (sd_batchnorm_act_backward_bf16's ybf) instead of y, which is passed as
 * NULL: every output, dx in float32 and in bf16, dr, dgamma and dbeta, the
 * same bits as the float32 backward given y = the copy widened back to
 * float32.  A few elements of y are positive denormals, which the copy holds
 * as +0: their gradient must be masked (dr 0 there). */
static void check_bn_bf16_mask(int n, int c, int hw)
{
	const int blk = 16;
	const size_t nx = (size_t)n * c * hw;
	float *x = fill(nx, 21, 4.0f), *y = fill(nx, 22, 3.0f), *dy = fill(nx, 23, 2.0f);
	float *gamma = fill(c, 24, 1.0f), *mean = fill(c, 25, 0.5f), *invstd = fill(c, 26, 0.5f);
	float *yw = fill(nx, 0, 0);
	uint16_t *yh = calloc(nx, sizeof *yh), *dxh = calloc(nx, sizeof *dxh);
	size_t planted = 0;
	for (int ch = 0; ch < c; ch++)
		invstd[ch] += 1.0f;   /* positive */
	for (size_t e = 0; e < nx; e++)
		if (e % 97 == 5) {
			y[e] = 1e-40f;   /* a positive denormal */
			planted++;
		}
	/* yh = y rounded to bf16 (denormals to +0), NHWC; yw = it widened. */
	for (int i = 0; i < n; i++)
		for (int ch = 0; ch < c; ch++)
			for (int p = 0; p < hw; p++) {
				const size_t at = (((size_t)i * (c / blk) + ch / blk) * hw + p) * blk +
				                  ch % blk;
				float v = fabsf(y[at]) < 0x1p-126f ? 0.0f * y[at] : to_bf16(y[at]);
				uint32_t u;
				memcpy(&u, &v, sizeof u);
				yh[((size_t)i * hw + p) * c + ch] = (uint16_t)(u >> 16);
				yw[at] = v;
			}
	float *dx = fill(nx, 0, 0), *dr = fill(nx, 0, 0), *dg = fill(c, 0, 0), *db = fill(c, 0, 0);
	float *dx2 = fill(nx, 0, 0), *dr2 = fill(nx, 0, 0), *dg2 = fill(c, 0, 0);
	float *db2 = fill(c, 0, 0), *dr3 = fill(nx, 0, 0), *dg3 = fill(c, 0, 0);
	float *db3 = fill(c, 0, 0);
	sd_batchnorm_act_backward(dx, dr, dg, db, dy, yw, x, mean, invstd, gamma, n, c, hw, blk, 1);
	sd_batchnorm_act_backward_bf16(dx2, NULL, dr2, dg2, db2, dy, NULL, yh, NULL, x, NULL, 0, 0,
	                               mean, invstd, gamma, n, c, hw, blk, 1);
	sd_batchnorm_act_backward_bf16(NULL, dxh, dr3, dg3, db3, dy, NULL, yh, NULL, x, NULL, 0, 0,
	                               mean, invstd, gamma, n, c, hw, blk, 1);
	size_t bad = 0, masked = 0;
	for (int i = 0; i < n; i++)
		for (int ch = 0; ch < c; ch++)
			for (int p = 0; p < hw; p++) {
				const size_t at = (((size_t)i * (c / blk) + ch / blk) * hw + p) * blk +
				                  ch % blk;
				float v = to_bf16(dx[at]);
				uint32_t want;
				memcpy(&want, &v, sizeof want);
				bad += dxh[((size_t)i * hw + p) * c + ch] != (uint16_t)(want >> 16);
				masked += y[at] > 0.0f && yw[at] == 0.0f && dr2[at] == 0.0f && dy[at] != 0.0f;
			}
	const size_t fb = nx * sizeof(float), cb = (size_t)c * sizeof(float);
	check_report(!memcmp(dx, dx2, fb) && !memcmp(dr, dr2, fb) && !memcmp(dg, dg2, cb) &&
	             !memcmp(db, db2, cb) && !memcmp(dr, dr3, fb) && !memcmp(dg, dg3, cb) &&
	             !memcmp(db, db3, cb) && bad == 0 && masked == planted && planted > 0,
	             "batch-norm backward, n %d c %d hw %d, ReLU mask from y's bf16 copy: dx, dr, "
	             "dgamma, dbeta as float32's with y = the copy; bf16 dx %zu of %zu differ; "
	             "%zu of %zu denormal y masked", n, c, hw, bad, nx, masked, planted);
	free(x), free(y), free(dy), free(gamma), free(mean), free(invstd), free(yw), free(yh);
	free(dxh), free(dx), free(dr), free(dg), free(db), free(dx2), free(dr2), free(dg2);
	free(db2), free(dr3), free(dg3), free(db3);
}

/* nChw16c (n, c, hw) -> NHWC. */
static float *to_nhwc(const float *a, int n, int c, int hw)
{
	const int blk = 16;
	float *o = fill((size_t)n * c * hw, 0, 0);
	for (int i = 0; i < n; i++)
		for (int ch = 0; ch < c; ch++)
			for (int p = 0; p < hw; p++)
				o[((size_t)i * hw + p) * c + ch] =
					a[(((size_t)i * (c / blk) + ch / blk) * hw + p) * blk + ch % blk];
	return o;
}

/* The outputs of one batch-norm forward + backward in the checks below:
 * out 0 y, 1 dx, 2 dr, 3 dbeta (nx floats each), 4 mean, 5 invstd, 6 and 7
 * the running mean and variance, 8 dgamma (c floats each), zeroed; h 0 y's
 * bf16 copy, 1 dx in bf16 (nx each). */
static void bn_outs_new(float **out, uint16_t **h, size_t nx, int c)
{
	for (int o = 0; o < 9; o++)
		out[o] = fill(o < 4 ? nx : (size_t)c, 0, 0);
	h[0] = calloc(nx, sizeof(uint16_t));
	h[1] = calloc(nx, sizeof(uint16_t));
}

static void bn_outs_free(float **out, uint16_t **h)
{
	for (int o = 0; o < 9; o++)
		free(out[o]);
	free(h[0]), free(h[1]);
}

/* The batch-norm passes reading x (x_nhwc, as the bf16 convolutions'
 * forward writes it) and dy (dy_nhwc, as their backward-data writes it) in
 * float32 NHWC instead of nChw16c, each and both: the same arithmetic in the
 * same order, so every output the same bits, with and without the residual,
 * the bf16 copy of y, the bf16 mask and the bf16 dx. */
static void check_bn_x_nhwc(int n, int c, int hw, int residual)
{
	const int blk = 16;
	const size_t nx = (size_t)n * c * hw;
	float *x = fill(nx, 31, 5.0f), *r = fill(nx, 32, 2.0f);
	float *gamma = fill(c, 33, 1.0f), *beta = fill(c, 34, 1.0f), *dy = fill(nx, 35, 3.0f);
	float *xn = to_nhwc(x, n, c, hw), *dyn = to_nhwc(dy, n, c, hw);
	int same_x = 1, same_dy = 1;
	for (int mode = 0; mode < 4; mode++) {
		/* bit 0: y's bf16 copy (and the mask from it); bit 1: dx in bf16.
		 * Variant k: bit 0 x NHWC, bit 1 dy NHWC. */
		float *out[4][9];
		uint16_t *h[4][2];
		for (int k = 0; k < 4; k++) {
			const int xk = k & 1, dk = k >> 1;
			bn_outs_new(out[k], h[k], nx, c);
			float *y = out[k][0], *dx = out[k][1], *dr = out[k][2];
			float *mean = out[k][4], *is = out[k][5], *rm = out[k][6], *rv = out[k][7];
			float *dg = out[k][8], *db = out[k][3];
			sd_batchnorm_act_forward_train_bf16(y, mode & 1 ? h[k][0] : NULL, mean, is, rm, rv,
			                                    xk ? xn : x, NULL, xk, residual ? r : NULL, gamma,
			                                    beta, n, c, hw, blk, 1, 0.1f, 1e-5f);
			sd_batchnorm_act_backward_bf16(mode & 2 ? NULL : dx, mode & 2 ? h[k][1] : NULL,
			                               residual ? dr : NULL, dg, db, dk ? dyn : dy, y,
			                               mode & 1 ? h[k][0] : NULL, NULL, xk ? xn : x, NULL, xk, dk,
			                               mean, is, gamma, n, c, hw, blk, 1);
		}
		for (int k = 1; k < 4; k++) {
			int same = 1;
			for (int o = 0; o < 9; o++)
				same &= !memcmp(out[0][o], out[k][o],
				                (o < 4 ? nx : (size_t)c) * sizeof(float));
			same &= !memcmp(h[0][0], h[k][0], nx * 2) && !memcmp(h[0][1], h[k][1], nx * 2);
			if (k == 1)
				same_x &= same;
			else
				same_dy &= same;
		}
		for (int k = 0; k < 4; k++) {
			bn_outs_free(out[k], h[k]);
		}
	}
	check_report(same_x, "batch-norm%s, n %d c %d hw %d, x in float32 NHWC: every output of "
	             "the forward and backward the same bits as x in nChw16c",
	             residual ? " + add" : "", n, c, hw);
	check_report(same_dy, "batch-norm%s, n %d c %d hw %d, dy in float32 NHWC (x in either "
	             "layout): every output of the backward the same bits as dy in nChw16c",
	             residual ? " + add" : "", n, c, hw);
	free(x), free(xn), free(r), free(gamma), free(beta), free(dy), free(dyn);
}

/* The bf16 backward-data asked for dx in bf16 (keep.dx_bf16_ok, as for a
 * batch-norm group whose dy it is all of): where it says it wrote that
 * (dx_nhwc SD_DX_NHWC_BF16), each element is the float32 NHWC dx of the
 * same call rounded to bf16 (oneDNN sums in float32 and rounds once), and
 * that dx agrees with the double reference of the bf16-rounded x, w, dy. */
static void check_dx_bf16(int n, int c, int hw, int k)
{
	const int blk = 16;
	struct sd_conv2d_shape s;
	sd_conv2d_shape_init(&s, n, c, hw, hw, k, 3, 1, 1);
	const size_t nx = (size_t)n * c * hw * hw, ny = (size_t)n * k * hw * hw;
	const size_t nw = (size_t)k * c * 9;
	float *x = fill(nx, 71, 1.0f), *w = fill(nw, 72, 0.2f), *dy = fill(ny, 73, 1.0f);
	for (size_t e = 0; e < nx; e++)
		x[e] = to_bf16(x[e]);
	for (size_t e = 0; e < nw; e++)
		w[e] = to_bf16(w[e]);
	for (size_t e = 0; e < ny; e++)
		dy[e] = to_bf16(dy[e]);
	float *ws = fill(sd_conv2d_workspace_floats_blocked(&s, blk, blk), 0, 0);
	float *dx32 = fill(nx, 0, 0), *dx16 = fill(nx, 0, 0), *dw = fill(nw, 0, 0);
	float *dyb = fill(ny, 0, 0), *xb = fill(nx, 0, 0);
	sd_layout_to_blocked(dyb, dy, n, k, hw * hw, blk);
	sd_layout_to_blocked(xb, x, n, c, hw * hw, blk);
	const enum sd_conv_precision was = sd_conv2d_get_precision();
	sd_conv2d_set_precision(SD_CONV_BF16);
	sd_conv2d_set_path(SD_CONV_ONEDNN);
	int said[2] = { 0, 0 };
	for (int half = 0; half < 2; half++) {
		struct sd_conv2d_keep keep = { 0 };
		keep.dx_nhwc_ok = 1;
		keep.dx_bf16_ok = half;
		sd_conv2d_backward_blocked_kept(half ? dx16 : dx32, dw, NULL, dyb, xb, w, &s, blk, blk,
		                                ws, &keep, NULL);
		said[half] = keep.dx_nhwc;
		sd_conv2d_keep_free(&keep);
	}
	sd_conv2d_set_precision(was);
	free(xb);
	/* 16 channels: the float32 dx in nChw16c is NHWC byte for byte. */
	if (said[1] != SD_DX_NHWC_BF16 || !(said[0] == SD_DX_NHWC_F32 || (c == 16 && !said[0]))) {
		/* AMX's kernels write it (measured with oneDNN 2.6.3); others
		 * may not, and keep float32. */
		if (!strcmp(sd_conv2d_bf16_isa(), "AMX"))
			check_report(0, "bf16 backward-data n %d c %d hw %d on AMX: dx in bf16 NHWC "
			             "(said %d, %d)", n, c, hw, said[0], said[1]);
		else
			check_report(said[1] == said[0] && !memcmp(dx16, dx32, nx * sizeof(float)),
			             "bf16 backward-data n %d c %d hw %d on %s: no bf16 dx kernel, dx "
			             "stays as without asking (said %d, %d), the same bits", n, c, hw,
			             sd_conv2d_bf16_isa(), said[0], said[1]);
		free(x), free(w), free(dy), free(ws), free(dx32), free(dx16), free(dw), free(dyb);
		return;
	}
	/* The double reference: dx(i, ch, p) = sum over (kk, ry, rx) of
	 * dy(i, kk, output pixel) w(kk, ch, ry, rx); x's layout is irrelevant
	 * to dx. */
	const uint16_t *h = (const uint16_t *)dx16;
	size_t bad = 0;
	double err = 0.0, norm = 0.0;
	for (int i = 0; i < n; i++)
		for (int yy = 0; yy < hw; yy++)
			for (int xx = 0; xx < hw; xx++)
				for (int ch = 0; ch < c; ch++) {
					double ref = 0.0;
					for (int kk = 0; kk < k; kk++)
						for (int ry = 0; ry < 3; ry++)
							for (int rx = 0; rx < 3; rx++) {
								const int oy = yy + 1 - ry, ox = xx + 1 - rx;
								if (oy < 0 || oy >= hw || ox < 0 || ox >= hw)
									continue;
								ref += (double)dy[(((size_t)i * k + kk) * hw + oy) * hw + ox] *
								       w[(((size_t)kk * c + ch) * 3 + ry) * 3 + rx];
							}
					const size_t at = (((size_t)i * hw + yy) * hw + xx) * c + ch;
					const float r32 = to_bf16(dx32[at]);
					uint32_t u;
					memcpy(&u, &r32, sizeof u);
					bad += h[at] != (uint16_t)(u >> 16);
					const uint32_t g32 = (uint32_t)h[at] << 16;
					float g;
					memcpy(&g, &g32, sizeof g);
					err += (g - ref) * (g - ref);
					norm += ref * ref;
				}
	const double rel = sqrt(err / norm);
	check_report(bad == 0 && rel < 4e-3,
	             "bf16 backward-data n %d c %d hw %d k %d, dx asked for in bf16: %zu of %zu "
	             "differ from the float32 dx rounded; against the double reference %.2e "
	             "(bf16's rounding 2^-9 = 1.95e-03 an element)", n, c, hw, k, bad, nx, rel);
	/* ... and added as a further contribution (a residual block's input
	 * gradient): each sum the float32 one plus that rounded dx, exactly. */
	float *g = fill(nx, 74, 2.0f);
	const size_t abad = accumulate_bf16_bad(g, h, n, c, hw * hw);
	check_report(abad == 0, "bf16 backward-data n %d c %d hw %d k %d, dx added to a float32 "
	             "gradient in nChw16c: %zu of %zu sums differ from g + (float)dx", n, c, hw, k,
	             abad, nx);
	free(g);
	free(x), free(w), free(dy), free(ws), free(dx32), free(dx16), free(dw), free(dyb);
}

/* The batch-norm backward reading dy in bf16 NHWC (dy_nhwc
 * SD_DX_NHWC_BF16, as the bf16 backward-data writes it where it is all of
 * dy): every output the same bits as dy rounded to bf16 and given in
 * float32 nChw16c (widening is exact; the same arithmetic after it), with
 * and without the residual, the bf16 mask and the bf16 dx, x in either
 * layout. */
static void check_bn_dy_bf16(int n, int c, int hw, int residual)
{
	const int blk = 16;
	const size_t nx = (size_t)n * c * hw;
	float *x = fill(nx, 51, 5.0f), *r = fill(nx, 52, 2.0f);
	float *gamma = fill(c, 53, 1.0f), *beta = fill(c, 54, 1.0f), *dy = fill(nx, 55, 3.0f);
	for (size_t e = 0; e < nx; e++)
		dy[e] = to_bf16(dy[e]);
	float *xn = to_nhwc(x, n, c, hw), *dyn = to_nhwc(dy, n, c, hw);
	uint16_t *dyh = calloc(nx, sizeof(uint16_t));
	for (size_t e = 0; e < nx; e++) {
		uint32_t u;
		memcpy(&u, &dyn[e], sizeof u);
		dyh[e] = (uint16_t)(u >> 16);
	}
	int same = 1;
	for (int mode = 0; mode < 8; mode++) {
		/* bit 0: the bf16 mask; bit 1: dx in bf16; bit 2: x NHWC.
		 * Variant k 0: dy float32 nChw16c, 1: dy bf16 NHWC. */
		float *out[2][9];
		uint16_t *h[2][2];
		const int xk = mode >> 2 & 1;
		for (int k = 0; k < 2; k++) {
			bn_outs_new(out[k], h[k], nx, c);
			float *y = out[k][0], *dx = out[k][1], *dr = out[k][2];
			float *mean = out[k][4], *is = out[k][5], *rm = out[k][6], *rv = out[k][7];
			float *dg = out[k][8], *db = out[k][3];
			sd_batchnorm_act_forward_train_bf16(y, mode & 1 ? h[k][0] : NULL, mean, is, rm, rv,
			                                    xk ? xn : x, NULL, xk, residual ? r : NULL, gamma,
			                                    beta, n, c, hw, blk, 1, 0.1f, 1e-5f);
			sd_batchnorm_act_backward_bf16(mode & 2 ? NULL : dx, mode & 2 ? h[k][1] : NULL,
			                               residual ? dr : NULL, dg, db,
			                               k ? (const float *)dyh : dy, y,
			                               mode & 1 ? h[k][0] : NULL, NULL, xk ? xn : x, NULL, xk,
			                               k ? SD_DX_NHWC_BF16 : 0, mean, is, gamma, n, c, hw,
			                               blk, 1);
		}
		for (int o = 0; o < 9; o++)
			same &= !memcmp(out[0][o], out[1][o], (o < 4 ? nx : (size_t)c) * sizeof(float));
		same &= !memcmp(h[0][0], h[1][0], nx * 2) && !memcmp(h[0][1], h[1][1], nx * 2);
		for (int k = 0; k < 2; k++) {
			bn_outs_free(out[k], h[k]);
		}
	}
	check_report(same, "batch-norm%s, n %d c %d hw %d, dy in bf16 NHWC: every output of the "
	             "backward the same bits as dy rounded to bf16 in float32 nChw16c",
	             residual ? " + add" : "", n, c, hw);
	free(x), free(xn), free(r), free(gamma), free(beta), free(dy), free(dyn), free(dyh);
}

/* The batch-norm + ReLU backward recomputing its mask from x (mask_beta:
 * (x - mean) invstd gamma + beta > 0, the forward's arithmetic) instead of
 * reading float32 y: every output the same bits, dx in float32 and in
 * bf16, x (float32 in either layout, or bf16 NHWC as the convolution
 * writes it) and dy (float32, bf16). */
static void check_bn_mask_from_x(int n, int c, int hw)
{
	const int blk = 16;
	const size_t nx = (size_t)n * c * hw;
	float *x = fill(nx, 61, 5.0f), *gamma = fill(c, 63, 1.0f), *beta = fill(c, 64, 1.0f);
	float *dy = fill(nx, 65, 3.0f);
	for (size_t e = 0; e < nx; e++)
		dy[e] = to_bf16(dy[e]);
	float *xn = to_nhwc(x, n, c, hw), *dyn = to_nhwc(dy, n, c, hw);
	uint16_t *dyh = calloc(nx, sizeof(uint16_t)), *xh = calloc(nx, sizeof(uint16_t));
	for (size_t e = 0; e < nx; e++) {
		uint32_t u, v;
		memcpy(&u, &dyn[e], sizeof u);
		dyh[e] = (uint16_t)(u >> 16);
		const float r = to_bf16(xn[e]);
		memcpy(&v, &r, sizeof v);
		xh[e] = (uint16_t)(v >> 16);
	}
	int same = 1;
	size_t kept = 0;
	for (int mode = 0; mode < 16; mode++) {
		/* bit 0: dx in bf16; bit 1: x NHWC; bit 2: dy bf16 NHWC; bit 3:
		 * x bf16 NHWC.  Variant k 0: the mask from float32 y, 1: from x. */
		const int xk = mode >> 1 & 1, dk = mode >> 2 & 1, xb = mode >> 3 & 1;
		const float *xf = xb ? NULL : xk ? xn : x;
		const uint16_t *xbf = xb ? xh : NULL;
		float *out[2][8];
		uint16_t *h[2];
		for (int k = 0; k < 2; k++) {
			for (int o = 0; o < 8; o++)
				out[k][o] = fill(o < 2 ? nx : (size_t)c, 0, 0);
			h[k] = calloc(nx, sizeof(uint16_t));
			float *y = out[k][0], *dx = out[k][1], *mean = out[k][2], *is = out[k][3];
			float *rm = out[k][4], *rv = out[k][5], *dg = out[k][6], *db = out[k][7];
			sd_batchnorm_act_forward_train_bf16(y, NULL, mean, is, rm, rv, xf, xbf, xk, NULL,
			                                    gamma, beta, n, c, hw, blk, 1, 0.1f, 1e-5f);
			for (size_t e = 0; k == 0 && mode == 0 && e < nx; e++)
				kept += y[e] > 0.0f;
			sd_batchnorm_act_backward_bf16(mode & 1 ? NULL : dx, mode & 1 ? h[k] : NULL, NULL,
			                               dg, db, dk ? (const float *)dyh : dy,
			                               k ? NULL : y, NULL, k ? beta : NULL, xf, xbf, xk,
			                               dk ? SD_DX_NHWC_BF16 : 0, mean, is, gamma, n, c,
			                               hw, blk, 1);
		}
		for (int o = 1; o < 8; o++)
			same &= !memcmp(out[0][o], out[1][o], (o < 2 ? nx : (size_t)c) * sizeof(float));
		same &= !memcmp(h[0], h[1], nx * 2);
		for (int k = 0; k < 2; k++) {
			for (int o = 0; o < 8; o++)
				free(out[k][o]);
			free(h[k]);
		}
	}
	check_report(same && kept > nx / 4 && kept < nx * 3 / 4,
	             "batch-norm + ReLU, n %d c %d hw %d, mask recomputed from x: every output of "
	             "the backward the same bits as the mask from float32 y (%zu of %zu kept)", n,
	             c, hw, kept, nx);
	free(x), free(xn), free(gamma), free(beta), free(dy), free(dyn), free(dyh), free(xh);
}

/* A double-precision batch-norm + (residual) + ReLU, forward and backward,
 * of x (nChw16c) against out (y, dx, dr, dbeta, mean, invstd, ... as
 * check_bn_x_bf16 lays them out): the worst error over its tolerance,
 * TOL_BN times the sum of the magnitudes of the terms of each output
 * (float32 sums of hw n terms: the statistics' float planes and double
 * merges stay well inside it).  The ReLU mask is the float32 y's, so a
 * y within rounding of 0 does not count as an error. */
#define TOL_BN 1e-5
static double bn_vs_double(const float *x, const float *r, const float *dy, const float *gamma,
                           const float *beta, float *const *out, int n, int c, int hw)
{
	const int blk = 16, ncb = c / blk;
	const double m = (double)n * hw;
	double worst = 0.0;
#define AT(i, ch, p) ((((size_t)(i) * ncb + (ch) / blk) * hw + (p)) * blk + (ch) % blk)
	for (int ch = 0; ch < c; ch++) {
		double mu = 0.0, var = 0.0, ax = 0.0;
		for (int i = 0; i < n; i++)
			for (int p = 0; p < hw; p++)
				mu += x[AT(i, ch, p)], ax += fabs(x[AT(i, ch, p)]);
		mu /= m;
		for (int i = 0; i < n; i++)
			for (int p = 0; p < hw; p++)
				var += (x[AT(i, ch, p)] - mu) * (x[AT(i, ch, p)] - mu);
		var /= m;
		const double is = 1.0 / sqrt(var + 1e-5);
		worst = fmax(worst, fabs(out[4][ch] - mu) / (TOL_BN * (ax / m) + 1e-30));
		worst = fmax(worst, fabs(out[5][ch] - is) / (TOL_BN * is));
		double sdz = 0.0, sdzx = 0.0;
		for (int i = 0; i < n; i++)
			for (int p = 0; p < hw; p++) {
				const size_t e = AT(i, ch, p);
				const double xh = (x[e] - mu) * is, rr = r ? r[e] : 0.0;
				const double v = xh * gamma[ch] + beta[ch] + rr;
				const double yref = v > 0.0 ? v : 0.0;
				const double tol = TOL_BN * (fabs(xh * gamma[ch]) + fabs(beta[ch]) + fabs(rr));
				worst = fmax(worst, fabs(out[0][e] - yref) / tol);
				const double dz = out[0][e] > 0.0f ? dy[e] : 0.0;
				sdz += dz;
				sdzx += dz * xh;
			}
		for (int i = 0; i < n; i++)
			for (int p = 0; p < hw; p++) {
				const size_t e = AT(i, ch, p);
				const double xh = (x[e] - mu) * is;
				const double dz = out[0][e] > 0.0f ? dy[e] : 0.0;
				const double k1 = gamma[ch] * is;
				const double dxr = k1 * (dz - sdz / m - xh * sdzx / m);
				const double tol = TOL_BN * fabs(k1) *
				                   (fabs(dz) + fabs(sdz / m) + fabs(xh * sdzx / m)) + 1e-30;
				worst = fmax(worst, fabs(out[1][e] - dxr) / tol);
			}
	}
#undef AT
	return worst;
}
/* The bf16 convolution's output left for a fused batch-norm (struct
 * sd_conv2d_keep): y_nhwc_ok alone, float32 NHWC, the same bits as the
 * forward's nChw16c y; with y_bf16_ok too, bf16 NHWC, each element the
 * float32 y rounded to nearest even (the kernels sum in float32 and round
 * once at the end).  AMX's kernels must offer the bf16 output. */
static void check_conv_y_bf16(int n, int c, int hw, int k)
{
	struct sd_conv2d_shape s;
	if (sd_conv2d_shape_init(&s, n, c, hw, hw, k, 3, 1, 1) < 0)
		exit(1);
	const int blk = 16;
	const size_t nx = (size_t)n * c * hw * hw, ny = (size_t)n * k * s.oh * s.ow;
	float *x = fill(nx, 41, 4.0f), *w = fill((size_t)k * c * 9, 42, 0.5f);
	float *ws = fill(sd_conv2d_workspace_floats_blocked(&s, blk, blk), 0, 0);
	float *y0 = fill(ny, 0, 0), *y1 = fill(ny, 0, 0), *y2 = fill(ny, 0, 0);
	sd_conv2d_set_precision(SD_CONV_BF16);
	sd_conv2d_set_path(SD_CONV_ONEDNN);
	struct sd_conv2d_keep k0 = { 0 }, k1 = { .y_nhwc_ok = 1 };
	struct sd_conv2d_keep k2 = { .y_nhwc_ok = 1, .y_bf16_ok = 1 };
	sd_conv2d_forward_blocked_kept(y0, x, w, NULL, &s, blk, blk, ws, &k0);
	sd_conv2d_forward_blocked_kept(y1, x, w, NULL, &s, blk, blk, ws, &k1);
	sd_conv2d_forward_blocked_kept(y2, x, w, NULL, &s, blk, blk, ws, &k2);
	float *y0n = to_nhwc(y0, n, k, s.oh * s.ow);
	const uint16_t *y2h = (const uint16_t *)(const void *)y2;
	size_t bad1 = 0, bad2 = 0;
	for (size_t i = 0; i < ny; i++) {
		const float want = k1.y_nhwc ? y0n[i] : y0[i];
		bad1 += memcmp(&y1[i], &want, sizeof want) != 0;
		uint32_t u = (uint32_t)y2h[i] << 16;
		float got2;
		memcpy(&got2, &u, sizeof got2);
		if (!k2.y_bf16)
			got2 = y2[i];
		const float want2 = k2.y_bf16 ? to_bf16(y0n[i]) : k2.y_nhwc ? y0n[i] : y0[i];
		bad2 += memcmp(&got2, &want2, sizeof want2) != 0;
	}
	check_report(!k0.y_nhwc && !k0.y_bf16 && !k1.y_bf16 && bad1 == 0,
	             "conv n%d c%d %dx%d k%d bf16, y_nhwc_ok: y %s, %zu of %zu differ from the "
	             "nChw16c forward's", n, c, hw, hw, k,
	             k1.y_nhwc ? "float32 NHWC" : "nChw16c", bad1, ny);
	check_report(bad2 == 0 && (k2.y_bf16 ? k2.y_nhwc : 1),
	             "conv n%d c%d %dx%d k%d bf16, y_bf16_ok: y %s, %zu of %zu differ from the "
	             "float32 forward's%s", n, c, hw, hw, k,
	             k2.y_bf16 ? "bf16 NHWC" : "float32 (no bf16 output offered)", bad2, ny,
	             k2.y_bf16 ? " rounded to bf16" : "");
	if (!strcmp(sd_conv2d_bf16_isa(), "AMX"))
		check_report(k2.y_bf16, "conv n%d c%d %dx%d k%d: the AMX kernels write y in bf16 NHWC",
		             n, c, hw, hw, k);
	sd_conv2d_set_precision(SD_CONV_FP32);
	sd_conv2d_keep_free(&k0), sd_conv2d_keep_free(&k1), sd_conv2d_keep_free(&k2);
	free(x), free(w), free(ws), free(y0), free(y1), free(y2), free(y0n);
}

/* The batch-norm passes reading x in bf16 NHWC (xbf, as the bf16
 * convolution writes it for them): every output of the forward and the
 * backward the same bits as float32 x in nChw16c holding the same bf16
 * values (the passes widen x exactly and do the same arithmetic), with
 * and without the residual, y's bf16 copy and mask, dx in bf16; and those
 * outputs against a double-precision batch-norm of the bf16-rounded x:
 * mean, invstd, y and dx within a few float32 roundings of each term. */
static void check_bn_x_bf16(int n, int c, int hw, int residual)
{
	const int blk = 16;
	const size_t nx = (size_t)n * c * hw;
	float *x = fill(nx, 51, 5.0f), *r = fill(nx, 52, 2.0f), *dy = fill(nx, 55, 3.0f);
	float *gamma = fill(c, 53, 1.0f), *beta = fill(c, 54, 1.0f);
	for (size_t i = 0; i < nx; i++)
		x[i] = to_bf16(x[i] + 0.75f);   /* a mean away from 0 */
	float *xn = to_nhwc(x, n, c, hw);
	uint16_t *xh = calloc(nx, sizeof *xh);
	for (size_t i = 0; i < nx; i++) {
		uint32_t u;
		memcpy(&u, &xn[i], sizeof u);
		xh[i] = (uint16_t)(u >> 16);
	}
	int same = 1;
	double worst = 0.0;   /* error over the tolerance */
	for (int mode = 0; mode < 4; mode++) {
		/* bit 0: y's bf16 copy and the mask from it; bit 1: dx in bf16.
		 * Variant k: 0 x float32 nChw16c, 1 x bf16 NHWC. */
		float *out[2][9];
		uint16_t *h[2][2];
		for (int k = 0; k < 2; k++) {
			bn_outs_new(out[k], h[k], nx, c);
			float *y = out[k][0], *dx = out[k][1], *dr = out[k][2];
			float *mean = out[k][4], *is = out[k][5], *rm = out[k][6], *rv = out[k][7];
			sd_batchnorm_act_forward_train_bf16(y, mode & 1 ? h[k][0] : NULL, mean, is, rm, rv,
			                                    k ? NULL : x, k ? xh : NULL, 0,
			                                    residual ? r : NULL, gamma, beta, n, c, hw,
			                                    blk, 1, 0.1f, 1e-5f);
			sd_batchnorm_act_backward_bf16(mode & 2 ? NULL : dx, mode & 2 ? h[k][1] : NULL,
			                               residual ? dr : NULL, out[k][8], out[k][3], dy, y,
			                               mode & 1 ? h[k][0] : NULL, NULL, k ? NULL : x,
			                               k ? xh : NULL, 0, 0, mean, is, gamma, n, c, hw,
			                               blk, 1);
		}
		for (int o = 0; o < 9; o++)
			same &= !memcmp(out[0][o], out[1][o], (o < 4 ? nx : (size_t)c) * sizeof(float));
		same &= !memcmp(h[0][0], h[1][0], nx * 2) && !memcmp(h[0][1], h[1][1], nx * 2);
		if (mode == 0)
			worst = bn_vs_double(x, residual ? r : NULL, dy, gamma, beta, out[1], n, c, hw);
		for (int k = 0; k < 2; k++) {
			bn_outs_free(out[k], h[k]);
		}
	}
	check_report(same, "batch-norm%s, n %d c %d hw %d, x in bf16 NHWC: every output of the "
	             "forward and backward the same bits as float32 x in nChw16c holding those "
	             "values", residual ? " + add" : "", n, c, hw);
	check_report(worst <= 1.0, "batch-norm%s, n %d c %d hw %d, x in bf16 NHWC: mean, invstd, y, "
	             "dx against double on the bf16-rounded x, worst %.2f of the tolerance",
	             residual ? " + add" : "", n, c, hw, worst);
	free(x), free(xn), free(xh), free(r), free(gamma), free(beta), free(dy);
}

/* sd_accumulate_nhwc (a further gradient contribution left by the bf16
 * backward-data in float32 NHWC): the same bits as converting it to nChw16c
 * and adding with sd_accumulate, element by element. */
static void check_accumulate_nhwc(int n, int c, int hw)
{
	const size_t nx = (size_t)n * c * hw;
	float *a = fill(nx, 41, 3.0f), *b = fill(nx, 42, 3.0f), *a2 = fill(nx, 0, 0);
	float *bn = to_nhwc(b, n, c, hw);
	memcpy(a2, a, nx * sizeof(float));
	sd_accumulate(a, b, nx);
	sd_accumulate_nhwc(a2, bn, n, c, hw);
	size_t bad = 0;
	for (size_t e = 0; e < nx; e++)
		bad += memcmp(&a[e], &a2[e], sizeof(float)) != 0;
	check_report(bad == 0, "gradient contribution added from NHWC, n %d c %d hw %d: %zu of %zu "
	             "differ from nChw16c + sd_accumulate", n, c, hw, bad, nx);
	free(a), free(b), free(a2), free(bn);
}

/* sd_accumulate_nhwc_bf16 on random float32 nChw16c sums and bf16 NHWC
 * contributions of mixed magnitudes (so that most sums round): each
 * element g + (float)h exactly, at the right address. */
static void check_accumulate_nhwc_bf16(int n, int c, int hw)
{
	const size_t nx = (size_t)n * c * hw;
	float *g = fill(nx, 43, 3.0f), *d = fill(nx, 44, 3.0f);
	uint16_t *h = calloc(nx, sizeof(uint16_t));
	for (size_t e = 0; e < nx; e++) {
		const float v = to_bf16(d[e] * (e % 3 ? 1.0f : 0x1p-7f));
		uint32_t u;
		memcpy(&u, &v, sizeof u);
		h[e] = (uint16_t)(u >> 16);
	}
	const size_t bad = accumulate_bf16_bad(g, h, n, c, hw);
	check_report(bad == 0, "bf16 gradient contribution widened and added from NHWC, n %d c %d "
	             "hw %d: %zu of %zu differ from g + (float)h", n, c, hw, bad, nx);
	free(g), free(d), free(h);
}

/* STEPS mean losses of a fresh trainer in precision prec. */
static void losses(const char *model, enum sd_conv_precision prec, int round_data, double *out)
{
	sd_conv2d_set_path(SD_CONV_ONEDNN);
	struct sd_trainer *t = bf16_trainer(model, prec, round_data, BATCH);
	check_report(sd_conv2d_get_precision() == prec, "%-9s trainer set precision %s", model,
	             sd_conv2d_precision_name(prec));
	for (int i = 0; i < STEPS; i++) {
		char *why = NULL;
		if (sd_trainer_step(t, &out[i], NULL, &why) < 0) {
			fprintf(stderr, "test-conv-bf16: %s\n", why);
			exit(1);
		}
	}
	sd_trainer_destroy(t);
	sd_conv2d_set_precision(SD_CONV_FP32);
}

/* The float32 y of the groups that write their output in bf16 only for an
 * identity residual's sake (model-graph.h's bn_y_res): nothing may read
 * it.  Two copies of model from one seed train the same batches in bf16,
 * one with those buffers filled with NaN before each batch: the losses and
 * every gradient must be the same bits, and the NaN still there after (no
 * float32 y written); the evaluation, float32 throughout, writes them and
 * agrees too. */
static void check_residual_stream(const char *model)
{
	enum { N = 16 };
	sd_conv2d_set_path(SD_CONV_ONEDNN);
	sd_conv2d_set_precision(SD_CONV_BF16);
	struct sd_model *m[2];
	for (int v = 0; v < 2; v++) {
		char *why = NULL;
		if (sd_model_create(&m[v], model, 3, 32, 32, 10, N, &why) < 0) {
			fprintf(stderr, "test-conv-bf16: %s\n", why);
			exit(1);
		}
		sd_model_init(m[v], 7);
	}
	if (sd_model_channel_block(m[0]) != 16) {
		check_skip("%s: not in layout 16 here: no bf16 residual stream", model);
		goto out;
	}
	float *x = fill((size_t)N * 3 * 32 * 32, 51, 2.0f);
	uint8_t labels[N];
	for (int i = 0; i < N; i++)
		labels[i] = (uint8_t)(i * 7 % 10);
	int writers = 0, same = 1, float32_y = 0;
	size_t unwritten = 0, poisoned = 0;
	for (int step = 0; step < 2; step++) {
		double loss[2];
		for (int v = 0; v < 2; v++) {
			for (int h = 0; v && h < m[v]->nnodes; h++) {
				const struct node *n = &m[v]->nodes[h];
				if (!n->bn_y_res)
					continue;
				const struct act *a = &m[v]->acts[n->fuse == FUSE_ADD_RELU
				                                  ? m[v]->nodes[h + 1].out : n->out];
				const size_t f = (size_t)N * a->c * a->h * a->w;
				for (size_t k = 0; k < f; k++)
					a->val[k] = NAN;
				writers += step == 0;
			}
			char *why = NULL;
			if (sd_model_train_batch(m[v], x, labels, N, 1.0f / N, &loss[v], NULL, &why) < 0) {
				fprintf(stderr, "test-conv-bf16: %s\n", why);
				exit(1);
			}
		}
		same = same && loss[0] == loss[1] &&
		       !memcmp(m[0]->grads, m[1]->grads, m[0]->nparams * sizeof(float));
		for (int h = 0; h < m[1]->nnodes; h++) {
			const struct node *n = &m[1]->nodes[h];
			if (!n->bn_y_res)
				continue;
			/* Without a bf16 copy (AVX512-BF16's kernels take no
			 * bf16 NHWC input from it) y is float32 as before. */
			if (!n->bn_ybf) {
				float32_y++;
				continue;
			}
			const struct act *a = &m[1]->acts[n->fuse == FUSE_ADD_RELU
			                                  ? m[1]->nodes[h + 1].out : n->out];
			const size_t f = (size_t)N * a->c * a->h * a->w;
			for (size_t k = 0; k < f; k++)
				unwritten += isnan(a->val[k]);
			poisoned += f;
		}
	}
	double el[2];
	for (int v = 0; v < 2; v++) {
		char *why = NULL;
		if (sd_model_eval_batch(m[v], x, labels, N, &el[v], NULL, &why) < 0) {
			fprintf(stderr, "test-conv-bf16: %s\n", why);
			exit(1);
		}
	}
	/* On AMX every one of them writes bf16 only. */
	const int amx = !strcmp(sd_conv2d_bf16_isa(), "AMX");
	check_report(writers > 0 && (!amx || !float32_y) && same && unwritten == poisoned &&
	             el[0] == el[1] && isfinite(el[0]),
	             "%-9s %d groups may write y in bf16 only for an identity residual (%d group-steps "
	             "wrote float32 y on %s): with their float32 y NaN, 2 bf16 steps' losses and "
	             "gradients the same bits (%s), y left unwritten (%zu of %zu NaN); evaluation "
	             "%.6f vs %.6f", model, writers, float32_y, sd_conv2d_bf16_isa(),
	             same ? "yes" : "no", unwritten, poisoned, el[0], el[1]);
	free(x);
out:
	sd_model_destroy(m[0]);
	sd_model_destroy(m[1]);
	sd_conv2d_set_precision(SD_CONV_FP32);
}

static void check_training(const char *model)
{
	double f[STEPS], p[STEPS], h[STEPS];
	losses(model, SD_CONV_FP32, 0, f);
	losses(model, SD_CONV_FP32, 1, p);
	losses(model, SD_CONV_BF16, 0, h);
	bf16_band_check(model, STEPS, f, p, h, BAND_FACTOR);
}

/* usage: test-conv-bf16 [--expect-isa AMX|AVX512-BF16]: with it, fails
 * unless oneDNN's bf16 kernels use those instructions (so a run capped by
 * ONEDNN_MAX_CPU_ISA cannot quietly test AMX again). */
int main(int argc, char **argv)
{
	bf16_require_kernels();
	if (argc == 3 && !strcmp(argv[1], "--expect-isa")) {
		if (strcmp(sd_conv2d_bf16_isa(), argv[2])) {
			fprintf(stderr, "FAIL: oneDNN's bf16 kernels use %s, expected %s\n",
			        sd_conv2d_bf16_isa(), argv[2]);
			return 1;
		}
		printf("bf16 kernels on %s\n", argv[2]);
	} else if (argc != 1) {
		fprintf(stderr, "usage: test-conv-bf16 [--expect-isa AMX|AVX512-BF16]\n");
		return 2;
	}
	omp_set_num_threads(2);
	unsigned long fallbacks = sd_conv2d_fallbacks();
	check_shape(8, 3, 32, 16, 3, 1, 0, 1, 1, 0);
	check_shape(8, 16, 32, 16, 3, 1, 0, 0, 1, 0);
	check_shape(8, 32, 16, 64, 3, 2, 0, 0, 1, 0);
	check_shape(8, 64, 8, 64, 3, 1, 0, 0, 1, 0);
	check_shape(8, 32, 14, 64, 5, 1, 1, 0, 1, 0);
	/* The weight gradients taken as forward convolutions (batch 32 and
	 * more, small images, many channels): resnet32's last stage and the
	 * stride-2 convolution into it, also channel-blocked with the kept x. */
	const int swap = !strcmp(sd_conv2d_bf16_isa(), "AMX") ? 1 : -1;
	check_shape(32, 64, 8, 64, 3, 1, 0, 0, 1, swap);
	check_shape(32, 32, 16, 64, 3, 2, 0, 0, 1, swap);
	check_shape(32, 64, 8, 64, 3, 1, 1, 0, 1, 0);
	check_shape(32, 64, 8, 64, 3, 1, 0, 0, 16, swap);
	check_shape(32, 32, 16, 64, 3, 2, 0, 0, 16, swap);
	struct sd_conv2d_shape bs;
	sd_conv2d_shape_init(&bs, 8, 16, 32, 32, 32, 3, 2, 1);
	int blk = sd_conv2d_block(&bs);
	if (blk > 1)
		check_shape(8, 16, 32, 32, 3, 2, 0, 0, blk, 0);
	else
		check_skip("no channel-blocked oneDNN layout for the blocked check");
	check_bn_bf16_copy();
	check_bn_bf16_mask(3, 48, 40);
	check_bn_bf16_bits(3, 48, 40, 0);
	check_bn_bf16_bits(3, 48, 40, 1);
	check_bn_bf16_bits(2, 16, 36, 0);
	check_bn_bf16_bits(2, 16, 36, 1);
	for (int mode = 0; mode < 4; mode++) {
		check_bn_r_bf16(3, 48, 40, mode);
		check_bn_r_bf16(2, 16, 36, mode);
	}
	check_bn_r_bf16(2, 64, 20, 0);
	check_bn_bf16_mask(2, 16, 100);
	check_bn_bf16_mask(2, 32, 130);
	check_bn_x_nhwc(3, 48, 40, 1);
	check_bn_x_nhwc(2, 32, 130, 0);
	check_bn_x_nhwc(2, 16, 100, 1);
	check_bn_x_bf16(3, 48, 40, 1);
	check_bn_x_bf16(2, 32, 130, 0);
	check_bn_x_bf16(2, 16, 100, 1);
	check_conv_y_bf16(8, 16, 32, 16);
	check_conv_y_bf16(8, 32, 16, 32);
	check_conv_y_bf16(8, 64, 8, 64);
	check_dx_bf16(4, 16, 12, 16);
	check_dx_bf16(4, 32, 8, 32);
	check_bn_dy_bf16(3, 48, 40, 1);
	check_bn_dy_bf16(2, 32, 130, 0);
	check_bn_dy_bf16(2, 16, 100, 1);
	check_bn_mask_from_x(3, 48, 40);
	check_bn_mask_from_x(2, 16, 100);
	check_accumulate_nhwc(3, 64, 37);
	check_accumulate_nhwc(2, 16, 100);
	check_accumulate_nhwc_bf16(3, 64, 37);
	check_accumulate_nhwc_bf16(2, 32, 50);
	check_accumulate_nhwc_bf16(2, 16, 100);
	check_residual_stream("resnet20");
	check_training("resnet20");
	check_training("cnn");
	check_report(sd_conv2d_fallbacks() == fallbacks, "no oneDNN call fell back to im2col (%lu)",
	             sd_conv2d_fallbacks() - fallbacks);
	return check_exit("test-conv-bf16");
}
