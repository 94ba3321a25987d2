/* tests/engine/test-linear-bf16.c - the bf16 precision of linear layers
 * (engine/matmul-dnnl.h: oneDNN's matmul on bf16 x, w and dy, float32
 * outputs) against a double-precision reference, element by element,
 * within a derived bound; float32 unchanged; and short training runs of the
 * mlp and the cnn in bf16 against float32.
 *
 * The bound (as tests/engine/test-conv-bf16 derives it for convolutions).
 * Rounding a float32 to bf16 (8 significant bits, round to nearest even)
 * moves it by at most u = 2^-8 of itself, and a bf16 GEMM rounds both
 * operands of every product (x and w forward, dy and w for dx, dy and x for
 * dw); a product of two bf16 numbers is exact in float32 and oneDNN's AMX
 * and AVX512-BF16 kernels sum in float32.  So for an output o = sum_i a_i b_i
 * of K terms (plus the bias forward, plus dw's previous value backward):
 *     |o_bf16 - o_ref| <= ((1 + u)^2 - 1) S + 2 (K + 1) 2^-24 S,
 *     S = sum |a_i b_i| (+ |b| or |dw_0|)
 * with o_ref and S computed here in double.  float32 must meet the second
 * term alone.  So that the bound cannot pass by bf16 not running, bf16's
 * worst error (relative to S) must also be at least VISIBLE times
 * float32's, and oneDNN must name bf16 kernels for the shape.
 *
 * Float32 unchanged: in fp32 precision, and in bf16 precision for a shape
 * the rule leaves to the sgemm, sd_linear_forward/backward give the same
 * bits; the bias gradient is the same float32 sum in both precisions.
 *
 * Training: the mlp and the cnn on synthetic data, STEPS steps from the
 * same seed in float32 and in bf16 (cnn: its convolutions and linear
 * layers; mlp: its 784 -> 256 layer).  The band is measured as in
 * test-conv-bf16: the spread of the float32 run against itself on training
 * images rounded to bf16 (exactly what bf16 does to the mlp's first layer
 * input), times BAND_FACTOR for the rounding of every later GEMM's inputs.
 * SKIPs (77) where oneDNN has no bf16 kernels on this CPU. */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/layers.h"
#include "engine/matmul-dnnl.h"
#include "engine/model.h"
#include "tests/check.h"
#include "tests/engine/bf16-test.h"

#define U_BF16 0x1p-8
#define EPS_F32 0x1p-24
#define VISIBLE 64.0
#define STEPS 8
#define BATCH 32
/* Measured here (AMX, 2 threads, lr 0.01, 8 steps): see the report lines;
 * 4 as in test-conv-bf16 leaves room for other CPUs' kernels, and a wrong
 * GEMM moves the loss by far more. */
#define BAND_FACTOR 4.0

static float *dup(const float *a, size_t n)
{
	float *p = fill(n, 0, 0.0f);
	memcpy(p, a, n * sizeof *p);
	return p;
}

/* The double reference of one linear layer: y = x w^T + b, dx = dy w,
 * dw = dw0 + dy^T x, and each output's S (sum of |terms|). */
struct reference {
	double *y, *sy, *dx, *sdx, *dw, *sdw;
};

static void reference(struct reference *r, const float *x, const float *w, const float *b,
                      const float *dy, const float *dw0, int n, int in, int out)
{
	r->y = calloc((size_t)n * out, sizeof(double));
	r->sy = calloc((size_t)n * out, sizeof(double));
	r->dx = calloc((size_t)n * in, sizeof(double));
	r->sdx = calloc((size_t)n * in, sizeof(double));
	r->dw = calloc((size_t)out * in, sizeof(double));
	r->sdw = calloc((size_t)out * in, sizeof(double));
	if (!r->y || !r->sy || !r->dx || !r->sdx || !r->dw || !r->sdw)
		exit(1);
	for (int i = 0; i < n; i++)
		for (int o = 0; o < out; o++) {
			double v = b ? b[o] : 0.0, s = b ? fabs(b[o]) : 0.0;
			for (int k = 0; k < in; k++) {
				double t = (double)x[(size_t)i * in + k] * w[(size_t)o * in + k];
				v += t, s += fabs(t);
			}
			r->y[(size_t)i * out + o] = v, r->sy[(size_t)i * out + o] = s;
		}
	for (int i = 0; i < n; i++)
		for (int k = 0; k < in; k++) {
			double v = 0.0, s = 0.0;
			for (int o = 0; o < out; o++) {
				double t = (double)dy[(size_t)i * out + o] * w[(size_t)o * in + k];
				v += t, s += fabs(t);
			}
			r->dx[(size_t)i * in + k] = v, r->sdx[(size_t)i * in + k] = s;
		}
	for (int o = 0; o < out; o++)
		for (int k = 0; k < in; k++) {
			double v = dw0[(size_t)o * in + k], s = fabs(v);
			for (int i = 0; i < n; i++) {
				double t = (double)dy[(size_t)i * out + o] * x[(size_t)i * in + k];
				v += t, s += fabs(t);
			}
			r->dw[(size_t)o * in + k] = v, r->sdw[(size_t)o * in + k] = s;
		}
}

static void reference_free(struct reference *r)
{
	free(r->y), free(r->sy), free(r->dx), free(r->sdx), free(r->dw), free(r->sdw);
}

/* Worst |got - ref| / bound and worst |got - ref| / S over len outputs,
 * bound = (bf16 ? (1 + u)^2 - 1 : 0) S + 2 (K + 1) 2^-24 S. */
static void worst(const float *got, const double *ref, const double *s, size_t len, int k,
                  int bf16, double *over, double *rel)
{
	const double factor = (bf16 ? (1 + U_BF16) * (1 + U_BF16) - 1 : 0.0) +
	                      2.0 * (k + 1) * EPS_F32;
	*over = *rel = 0.0;
	for (size_t i = 0; i < len; i++) {
		double e = fabs((double)got[i] - ref[i]), S = s[i] > 1e-30 ? s[i] : 1e-30;
		if (e / (S * factor) > *over)
			*over = e / (S * factor);
		if (e / S > *rel)
			*rel = e / S;
	}
}

/* One layer's forward and backward through sd_linear_* in precision prec,
 * or (direct) through the oneDNN calls themselves. */
static void run(enum sd_conv_precision prec, int direct, float *y, float *dx, float *dw,
                float *db, const float *x, const float *w, const float *b, const float *dy, int n,
                int in, int out)
{
	sd_conv2d_set_precision(prec);
	if (direct) {
		check_report(sd_linear_dnnl_forward_bf16(y, x, w, b, n, in, out) == 0 &&
		             sd_linear_dnnl_backward_bf16(dx, dw, dy, x, w, n, in, out, b != NULL) == 0,
		             "(%d, %d) -> %d: oneDNN's bf16 matmul ran", n, in, out);
		/* The bias gradient is the caller's (layers.c): none here. */
		(void)db;
	} else {
		sd_linear_forward(y, x, w, b, n, in, out);
		sd_linear_backward(dx, dw, db, dy, x, w, n, in, out);
	}
	sd_conv2d_set_precision(SD_CONV_FP32);
}

/* A layer x (n, in) -> (n, out), with a bias or not.  direct: a shape the
 * rule leaves to the sgemm, run through the oneDNN calls directly so that
 * their numbers are checked at small sizes too. */
static void check_layer(int n, int in, int out, int bias, int direct)
{
	const size_t nx = (size_t)n * in, nw = (size_t)out * in, ny = (size_t)n * out;
	float *x = fill(nx, 1 + n, 2.0f), *w = fill(nw, 2 + in, 1.0f);
	float *b = bias ? fill((size_t)out, 3 + out, 1.0f) : NULL;
	float *dy = fill(ny, 4 + n, 3.0f), *dw0 = fill(nw, 5, 0.5f);
	struct reference r;
	reference(&r, x, w, b, dy, dw0, n, in, out);
	char label[64];
	snprintf(label, sizeof label, "(%d, %d) -> %d%s%s", n, in, out, bias ? " +bias" : "",
	         direct ? " direct" : "");
	const int wins = sd_linear_dnnl_bf16_wins(n, in, out);
	if (!direct)
		check_report(wins, "%-28s the rule runs it in bf16 on oneDNN", label);

	double over[2][3], rel[2][3];
	float *db[2] = { NULL, NULL }, *yy[2], *dxx[2], *dww[2];
	for (int h = 0; h < 2; h++) {
		yy[h] = fill(ny, 0, 0), dxx[h] = fill(nx, 0, 0), dww[h] = dup(dw0, nw);
		db[h] = bias ? fill((size_t)out, 0, 0) : NULL;
		run(h ? SD_CONV_BF16 : SD_CONV_FP32, h && direct, yy[h], dxx[h], dww[h], db[h], x, w,
		    b, dy, n, in, out);
		worst(yy[h], r.y, r.sy, ny, in, h, &over[h][0], &rel[h][0]);
		worst(dxx[h], r.dx, r.sdx, nx, out, h, &over[h][1], &rel[h][1]);
		worst(dww[h], r.dw, r.sdw, nw, n, h, &over[h][2], &rel[h][2]);
	}
	static const char *const pass[3] = { "y", "dx", "dw" };
	for (int p = 0; p < 3; p++) {
		check_report(over[0][p] <= 1.0, "%-28s fp32 %-2s worst error %.2e of its sum of "
		             "|terms|, %.2f of the float32 bound", label, pass[p], rel[0][p], over[0][p]);
		check_report(over[1][p] <= 1.0, "%-28s bf16 %-2s worst error %.2e of its sum of "
		             "|terms|, %.2f of the bf16 bound", label, pass[p], rel[1][p], over[1][p]);
		check_report(rel[1][p] >= VISIBLE * rel[0][p] && rel[1][p] > 0,
		             "%-28s bf16 %-2s error is bf16's: %.0fx float32's", label, pass[p],
		             rel[0][p] > 0 ? rel[1][p] / rel[0][p] : INFINITY);
	}
	if (bias && !direct)
		check_report(!memcmp(db[0], db[1], (size_t)out * sizeof(float)),
		             "%-28s bf16 db: float32's bits", label);
	if (!direct) {
		/* The dispatch: bf16 precision's sd_linear_* are oneDNN's calls. */
		float *y2 = fill(ny, 0, 0), *dx2 = fill(nx, 0, 0), *dw2 = dup(dw0, nw);
		run(SD_CONV_BF16, 1, y2, dx2, dw2, NULL, x, w, b, dy, n, in, out);
		check_report(!memcmp(y2, yy[1], ny * sizeof *y2) && !memcmp(dx2, dxx[1], nx * sizeof *dx2) &&
		             !memcmp(dw2, dww[1], nw * sizeof *dw2),
		             "%-28s sd_linear_* in bf16 give oneDNN's bits, and again the same", label);
		free(y2), free(dx2), free(dw2);
		char impl[160];
		sd_linear_dnnl_describe(n, in, out, bias, impl, sizeof impl);
		check_report(strstr(impl, "bf16") && !strstr(impl, "ref"), "%-28s bf16 kernels: %s",
		             label, impl);
	}
	for (int h = 0; h < 2; h++)
		free(yy[h]), free(dxx[h]), free(dww[h]), free(db[h]);
	reference_free(&r);
	free(x), free(w), free(b), free(dy), free(dw0);
}

/* A shape the rule leaves to the sgemm: bf16 precision gives float32's bits. */
static void check_fp32_kept(int n, int in, int out)
{
	const size_t nx = (size_t)n * in, nw = (size_t)out * in, ny = (size_t)n * out;
	float *x = fill(nx, 7, 2.0f), *w = fill(nw, 8, 1.0f), *b = fill((size_t)out, 9, 1.0f);
	float *dy = fill(ny, 10, 3.0f);
	float *y[2], *dx[2], *dw[2], *db[2];
	for (int h = 0; h < 2; h++) {
		y[h] = fill(ny, 0, 0), dx[h] = fill(nx, 0, 0), dw[h] = fill(nw, 0, 0);
		db[h] = fill((size_t)out, 0, 0);
		run(h ? SD_CONV_BF16 : SD_CONV_FP32, 0, y[h], dx[h], dw[h], db[h], x, w, b, dy, n, in,
		    out);
	}
	check_report(!sd_linear_dnnl_bf16_wins(n, in, out) &&
	             !memcmp(y[0], y[1], ny * sizeof(float)) &&
	             !memcmp(dx[0], dx[1], nx * sizeof(float)) &&
	             !memcmp(dw[0], dw[1], nw * sizeof(float)) &&
	             !memcmp(db[0], db[1], (size_t)out * sizeof(float)),
	             "(%d, %d) -> %d: below the rule, bf16 precision gives float32's bits", n, in, out);
	for (int h = 0; h < 2; h++)
		free(y[h]), free(dx[h]), free(dw[h]), free(db[h]);
	free(x), free(w), free(b), free(dy);
}

static void losses(const char *model, enum sd_conv_precision prec, int round_data, double *out)
{
	struct sd_trainer *t = bf16_trainer(model, prec, round_data, BATCH);
	check_report(t->precision == prec && (prec == SD_CONV_FP32 ||
	                                      sd_model_bf16_linears(t->model) > 0),
	             "%-4s trainer runs %s (%s; %d linear layers the bf16 rule takes)", model,
	             sd_conv2d_precision_name(prec), t->precision_reason,
	             sd_model_bf16_linears(t->model));
	for (int i = 0; i < STEPS; i++) {
		char *why = NULL;
		if (sd_trainer_step(t, &out[i], NULL, &why) < 0) {
			fprintf(stderr, "test-linear-bf16: %s\n", why);
			exit(1);
		}
	}
	sd_trainer_destroy(t);
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

int main(void)
{
	bf16_require_kernels();
	omp_set_num_threads(2);
	unsigned long failures = sd_linear_dnnl_failures();
	/* The mlp's and cnn's first layers, a GPT-like one, odd sizes. */
	check_layer(32, 784, 256, 1, 0);
	check_layer(16, 3136, 128, 1, 0);
	check_layer(256, 128, 384, 0, 0);
	check_layer(67, 301, 129, 1, 0);
	check_layer(5, 33, 7, 1, 1);
	check_layer(64, 256, 10, 0, 1);
	check_fp32_kept(64, 256, 10);
	check_fp32_kept(128, 64, 10);
	check_training("mlp");
	check_training("cnn");
	check_report(sd_linear_dnnl_failures() == failures, "no oneDNN matmul call failed (%lu)",
	             sd_linear_dnnl_failures() - failures);
	return check_exit("test-linear-bf16");
}
