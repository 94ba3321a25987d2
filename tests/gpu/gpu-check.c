/* tests/gpu/gpu-check.c - the CUDA backend's checks on a GPU, one subcommand
 * each, driven by tests/gpu/run.sh.  Every subcommand exits 0 when its
 * checks pass, 1 when one fails, 77 (with "SKIP: reason" on stderr) when this
 * host has no usable CUDA device, 2 on a usage error.
 *
 *   probe                 the device, the libraries, the plugin (one JSON line)
 *   layers                every layer forward and backward against the CPU
 *                         reference (engine/layers.h) at the models' shapes,
 *                         with the tolerances in the table below
 *   (MODEL N takes an optional BATCH; default 64 for cnn, 128 for the ResNets)
 *   trajectory MODEL N    N steps of MODEL on the CPU and on the GPU from the
 *                         same seed and data: every tensor's update after step
 *                         1, the loss of steps 1-5 (1e-5), and then per-step
 *                         loss, parameters, batch-norm statistics and test loss
 *                         within 10x of how far CPU runs nudged by 1 ulp at
 *                         every step drift (fp32 training amplifies rounding
 *                         differences: see DRIFT_FACTOR)
 *   determinism MODEL N   N steps twice on the GPU in this process: the same
 *                         losses and parameters, bit for bit
 *                         With SD_GPU_CHECK_ADAMW=1 in the environment, the
 *                         model commands train with AdamW (lr 1e-3, betas
 *                         0.9/0.95, weight decay 0.1) after clip_grad_norm 1
 *                         on both sides, instead of SGD.
 *   losses MODEL N        N steps on the GPU; prints losses and checksum (run.sh
 *                         compares two processes' output)
 *   nccl                  NCCL through engine/comm.h's backend at world size 1,
 *                         device and host buffers; with N > 1 visible GPUs also
 *                         world size N (one process per GPU), then a rank that
 *                         vanishes: the others fail within the timeout
 *   throughput MODEL BATCH STEPS
 *                         images/s of whole training steps (upload, forward,
 *                         backward, SGD, the loss read back), one JSON line
 *   gpt-grad GPT.onnx BATCH
 *                         a language model exported to ONNX: one step on the
 *                         CPU and on the GPU, the loss and every parameter
 *                         tensor's gradient compared, the evaluation loss,
 *                         the GPU's gradients the same bits twice
 *                         (SPOTDECK_FUSE=off: the unfused graph)
 *   gpt-trajectory GPT.onnx STEPS BATCH
 *                         SGD steps on both, the GPU's loss per step within
 *                         the drift band of CPU runs nudged by 1 ulp
 *   gpt-throughput GPT.onnx BATCH STEPS
 *                         tokens/s of whole GPU training steps, one JSON line
 *
 * Models use synthetic data of the real datasets' shapes: cnn on 1x28x28
 * (Fashion-MNIST's), resnet20/32 on 3x32x32 (CIFAR-10's), 10 classes.
X
 * over the whole tensor; NaN never passes.
 */
#include "config.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engine/backend.h"
#include "engine/comm-backend.h"
#include "engine/comm.h"
#include "src/base/errors.h"
#include "engine/layers.h"
#include "engine/model-graph.h"
#include "engine/onnx.h"
#include "engine/optim.h"
#include "src/base/rng.h"
#include "engine/train.h"

void openblas_set_num_threads(int num_threads);

static int failures;
static const struct sd_backend_ops *ops;
static struct sd_backend_choice choice;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Opens the CUDA backend or exits 77 saying why. */
static void need_gpu(void)
{
	char *why = NULL;
	if (sd_backend_choose(&choice, SD_BACKEND_WANT_CUDA, -1, &why) < 0) {
		fprintf(stderr, "SKIP: no usable CUDA device: %s\n", why);
		exit(77);
	}
	ops = choice.ops;
}

/* ---- data and comparisons ----------------------------------------------- */

static float *rnd(size_t n, uint64_t seed, float scale)
{
	struct sd_rng r;
	sd_rng_seed(&r, seed, 99);
	float *p = malloc((n ? n : 1) * sizeof(float));
	for (size_t i = 0; i < n; i++)
		p[i] = scale * sd_rng_normal(&r);
	return p;
}

static float *copy_of(const float *p, size_t n)
{
	float *q = malloc((n ? n : 1) * sizeof(float));
	memcpy(q, p, n * sizeof(float));
	return q;
}

/* The error of a against the reference b: the larger of ||a - b|| / ||b||
 * (the whole tensor, in double) and max|a - b| / (10 max|b|) (so that one
 * wrong element among millions still shows); +inf when a has a NaN (an
 * element the GPU never wrote stays NaN: the device outputs are
 * NaN-poisoned). */
static double rel_err(const float *a, const float *b, size_t n)
{
	double num = 0, den = 0, dmax = 0, bmax = 0;
	for (size_t i = 0; i < n; i++) {
		if (isnan(a[i]) || isnan(b[i]))
			return INFINITY;
		double d = (double)a[i] - b[i];
		num += d * d;
		den += (double)b[i] * b[i];
		dmax = fmax(dmax, fabs(d));
		bmax = fmax(bmax, fabs((double)b[i]));
	}
	if (den == 0)
		return fmax(sqrt(num), dmax);
	return fmax(sqrt(num / den), dmax / (10 * bmax));
}

static void report(const char *what, double err, double tol)
{
	int ok = err <= tol;
	printf("  %-44s rel.err %9.2e  tol %7.1e  %s\n", what, err, tol, ok ? "ok" : "FAIL");
	if (!ok)
		failures++;
}

static void must(int rc, const char *what, char *why)
{
	if (rc < 0) {
		printf("  %-44s FAIL: %s\n", what, why ? why : "?");
		failures++;
	}
	free(why);
}

/* ---- layers -------------------------------------------------------------- */

/* Tolerances, strict float32 on both sides: the GPU sums in another order
 * (and cuDNN may use FFT or Winograd algorithms, deterministic ones only),
 * so results differ by rounding; an indexing or formula bug gives errors
 * of order 1.  Reductions over many terms (weight gradients over n*oh*ow
 * positions, batch-norm's backward) get more room. */
#define TOL_EXACT 0.0
#define TOL_ELEM 1e-6      /* elementwise in float/double (softmax, pooling means) */
#define TOL_GEMM 2e-5      /* linear layers, k <= 3136 */
#define TOL_CONV 5e-4      /* convolution forward and data gradient (Winograd
                            * and FFT algorithms round more than direct ones) */
#define TOL_CONV_W 2e-3    /* weight and bias gradients */
#define TOL_BN 1e-5        /* batch-norm forward, statistics */
#define TOL_BN_BWD 1e-4    /* batch-norm backward */

static void check_linear(int n, int in, int out)
{
	const struct sd_backend_layer_ops *L = ops->layers;
	char name[96];
	float *x = rnd((size_t)n * in, 1, 1), *w = rnd((size_t)out * in, 2, 0.05f), *b = rnd(out, 3, 1);
	float *y = malloc((size_t)n * out * 4), *yr = malloc((size_t)n * out * 4);
	char *why = NULL;
	sd_linear_forward(yr, x, w, b, n, in, out);
	must(L->linear_forward(y, x, w, b, n, in, out, &why), "linear forward", why);
	snprintf(name, sizeof name, "linear %dx%d->%d forward", n, in, out);
	report(name, rel_err(y, yr, (size_t)n * out), TOL_GEMM);

	float *dy = rnd((size_t)n * out, 4, 1), *dx0 = rnd((size_t)n * in, 5, 1);
	float *dx = copy_of(dx0, (size_t)n * in), *dxr = calloc((size_t)n * in, 4);
	float *dw = malloc((size_t)out * in * 4), *dwr = calloc((size_t)out * in, 4);
	float *db = malloc(out * 4), *dbr = calloc(out, 4);
	sd_linear_backward(dxr, dwr, dbr, dy, x, w, n, in, out);
	for (size_t i = 0; i < (size_t)n * in; i++)
		dxr[i] += dx0[i];     /* acc_dx = 1: a second consumer's gradient */
	why = NULL;
	must(L->linear_backward(dx, dw, db, dy, x, w, n, in, out, 1, &why), "linear backward", why);
	snprintf(name, sizeof name, "linear %dx%d->%d dx (+=)", n, in, out);
	report(name, rel_err(dx, dxr, (size_t)n * in), TOL_GEMM);
	snprintf(name, sizeof name, "linear %dx%d->%d dw", n, in, out);
	report(name, rel_err(dw, dwr, (size_t)out * in), TOL_GEMM);
	snprintf(name, sizeof name, "linear %dx%d->%d db", n, in, out);
	report(name, rel_err(db, dbr, out), TOL_GEMM);
	free(x); free(w); free(b); free(y); free(yr); free(dy); free(dx0); free(dx); free(dxr);
	free(dw); free(dwr); free(db); free(dbr);
}

static void check_conv(int n, int c, int h, int k, int r, int stride, int pad, int bias)
{
	const struct sd_backend_layer_ops *L = ops->layers;
	struct sd_conv2d_shape s;
	sd_conv2d_shape_init(&s, n, c, h, h, k, r, stride, pad);
	size_t xn = (size_t)n * c * h * h, yn = (size_t)n * k * s.oh * s.ow, wn = (size_t)k * c * r * r;
	char tag[64], name[112];
	snprintf(tag, sizeof tag, "conv %dx%dx%d k%d %dx%d/%d", c, h, h, k, r, r, stride);
	float *x = rnd(xn, 11, 1), *w = rnd(wn, 12, sqrtf(2.0f / (c * r * r)));
	float *b = bias ? rnd(k, 13, 1) : NULL;
	float *y = malloc(yn * 4), *yr = malloc(yn * 4);
	float *ws = malloc((sd_conv2d_workspace_floats(&s) + 1) * 4);
	char *why = NULL;
	sd_conv2d_forward(yr, x, w, b, &s, ws);
	must(L->conv2d_forward(y, x, w, b, &s, &why), tag, why);
	snprintf(name, sizeof name, "%s forward", tag);
	report(name, rel_err(y, yr, yn), TOL_CONV);

	float *dy = rnd(yn, 14, 1);
	float *dx = malloc(xn * 4), *dxr = calloc(xn, 4);
	float *dw = malloc(wn * 4), *dwr = calloc(wn, 4);
	float *db = bias ? malloc(k * 4) : NULL, *dbr = bias ? calloc(k, 4) : NULL;
	sd_conv2d_backward(dxr, dwr, dbr, dy, x, w, &s, ws);
	why = NULL;
	must(L->conv2d_backward(dx, dw, db, dy, x, w, &s, 0, &why), tag, why);
	snprintf(name, sizeof name, "%s dx", tag);
	report(name, rel_err(dx, dxr, xn), TOL_CONV);
	snprintf(name, sizeof name, "%s dw", tag);
	report(name, rel_err(dw, dwr, wn), TOL_CONV_W);
	if (bias) {
		snprintf(name, sizeof name, "%s db", tag);
		report(name, rel_err(db, dbr, k), TOL_CONV_W);
	}
	/* dx += (the executor's second-consumer case). */
	float *dx0 = rnd(xn, 15, 1), *dxa = copy_of(dx0, xn);
	why = NULL;
	must(L->conv2d_backward(dxa, dw, db, dy, x, w, &s, 1, &why), tag, why);
	for (size_t i = 0; i < xn; i++)
		dx0[i] += dxr[i];
	snprintf(name, sizeof name, "%s dx (+=)", tag);
	report(name, rel_err(dxa, dx0, xn), TOL_CONV);
	free(x); free(w); free(b); free(y); free(yr); free(ws); free(dy); free(dx); free(dxr);
	free(dw); free(dwr); free(db); free(dbr); free(dx0); free(dxa);
}

static void check_bn(int n, int c, int hw)
{
	const struct sd_backend_layer_ops *L = ops->layers;
	size_t cnt = (size_t)n * c * hw;
	char tag[64], name[112];
	snprintf(tag, sizeof tag, "batch-norm n%d c%d hw%d", n, c, hw);
	float *x = rnd(cnt, 21, 2), *g = rnd(c, 22, 1), *be = rnd(c, 23, 1);
	for (size_t i = 0; i < cnt; i++)
		x[i] += 0.5f;       /* a mean away from zero */
	float *rm = rnd(c, 24, 0.1f), *rv = rnd(c, 25, 0.1f);
	for (int i = 0; i < c; i++)
		rv[i] = 1 + fabsf(rv[i]);
	float *rm2 = copy_of(rm, c), *rv2 = copy_of(rv, c);
	float *y = malloc(cnt * 4), *yr = malloc(cnt * 4);
	float *mean = malloc(c * 4), *inv = malloc(c * 4), *meanr = malloc(c * 4), *invr = malloc(c * 4);
	char *why = NULL;
	sd_batchnorm_forward_train(yr, meanr, invr, rm2, rv2, x, g, be, n, c, hw, SD_BN_MOMENTUM,
	                           SD_BN_EPS);
	must(L->bn_forward_train(y, mean, inv, rm, rv, x, g, be, n, c, hw, &why), tag, why);
	snprintf(name, sizeof name, "%s train forward", tag);
	report(name, rel_err(y, yr, cnt), TOL_BN);
	snprintf(name, sizeof name, "%s saved mean, 1/std", tag);
	report(name, fmax(rel_err(mean, meanr, c), rel_err(inv, invr, c)), TOL_BN);
	snprintf(name, sizeof name, "%s running mean, var", tag);
	report(name, fmax(rel_err(rm, rm2, c), rel_err(rv, rv2, c)), TOL_BN);

	why = NULL;
	must(L->bn_forward_eval(y, x, g, be, rm2, rv2, n, c, hw, &why), tag, why);
	sd_batchnorm_forward_eval(yr, x, g, be, rm2, rv2, n, c, hw, SD_BN_EPS);
	snprintf(name, sizeof name, "%s eval forward", tag);
	report(name, rel_err(y, yr, cnt), TOL_BN);

	float *dy = rnd(cnt, 26, 1), *dx = malloc(cnt * 4), *dxr = malloc(cnt * 4);
	float *dg = malloc(c * 4), *db = malloc(c * 4), *dgr = calloc(c, 4), *dbr = calloc(c, 4);
	sd_batchnorm_backward(dxr, dgr, dbr, dy, x, meanr, invr, g, n, c, hw);
	why = NULL;
	/* The GPU's own saved statistics, as in the executor. */
	must(L->bn_backward(dx, dg, db, dy, x, mean, inv, g, n, c, hw, 0, &why), tag, why);
	snprintf(name, sizeof name, "%s dx", tag);
	report(name, rel_err(dx, dxr, cnt), TOL_BN_BWD);
	snprintf(name, sizeof name, "%s dgamma, dbeta", tag);
	report(name, fmax(rel_err(dg, dgr, c), rel_err(db, dbr, c)), TOL_BN_BWD);
	float *dx0 = rnd(cnt, 27, 1), *dxa = copy_of(dx0, cnt);
	why = NULL;
	must(L->bn_backward(dxa, dg, db, dy, x, mean, inv, g, n, c, hw, 1, &why), tag, why);
	for (size_t i = 0; i < cnt; i++)
		dx0[i] += dxr[i];
	snprintf(name, sizeof name, "%s dx (+=)", tag);
	report(name, rel_err(dxa, dx0, cnt), TOL_BN_BWD);
	free(x); free(g); free(be); free(rm); free(rv); free(rm2); free(rv2); free(y); free(yr);
	free(mean); free(inv); free(meanr); free(invr); free(dy); free(dx); free(dxr); free(dg);
	free(db); free(dgr); free(dbr); free(dx0); free(dxa);
}

static void check_pool(int max, int n, int c, int h, int k, int s)
{
	const struct sd_backend_layer_ops *L = ops->layers;
	int oh = (h - k) / s + 1;
	size_t xn = (size_t)n * c * h * h, yn = (size_t)n * c * oh * oh;
	char tag[64], name[112];
	snprintf(tag, sizeof tag, "%s %dx%dx%d %dx%d/%d", max ? "max-pool" : "avg-pool", c, h, h, k,
	         k, s);
	/* Random normals: no ties inside a window (ties may pick another
	 * element; the models' ReLU zeroes those gradients anyway). */
	float *x = rnd(xn, 31, 1), *y = malloc(yn * 4), *yr = malloc(yn * 4);
	int32_t *arg = malloc(yn * sizeof(int32_t));
	char *why = NULL;
	if (max) {
		sd_maxpool_forward(yr, arg, x, n, c, h, h, k, s);
		must(L->maxpool_forward(y, x, n, c, h, h, k, s, &why), tag, why);
	} else {
		sd_avgpool_forward(yr, x, n, c, h, h, k, s);
		must(L->avgpool_forward(y, x, n, c, h, h, k, s, &why), tag, why);
	}
	snprintf(name, sizeof name, "%s forward", tag);
	report(name, rel_err(y, yr, yn), max ? TOL_EXACT : TOL_ELEM);
	float *dy = rnd(yn, 32, 1), *dx = malloc(xn * 4), *dxr = malloc(xn * 4);
	if (max)
		sd_maxpool_backward(dxr, dy, arg, n, c, h, h, k, s);
	else
		sd_avgpool_backward(dxr, dy, n, c, h, h, k, s);
	why = NULL;
	if (max)
		must(L->maxpool_backward(dx, dy, x, yr, n, c, h, h, k, s, 0, &why), tag, why);
	else
		must(L->avgpool_backward(dx, dy, x, yr, n, c, h, h, k, s, 0, &why), tag, why);
	snprintf(name, sizeof name, "%s dx", tag);
	report(name, rel_err(dx, dxr, xn), max ? TOL_EXACT : TOL_ELEM);
	free(x); free(y); free(yr); free(arg); free(dy); free(dx); free(dxr);
}

static void check_relu(size_t count)
{
	const struct sd_backend_layer_ops *L = ops->layers;
	float *x = rnd(count, 41, 1), *y = malloc(count * 4), *yr = malloc(count * 4);
	char *why = NULL;
	sd_relu_forward(yr, x, count);
	must(L->relu_forward(y, x, count, &why), "relu", why);
	report("relu forward", rel_err(y, yr, count), TOL_EXACT);
	float *dy = rnd(count, 42, 1), *dx = malloc(count * 4), *dxr = malloc(count * 4);
	sd_relu_backward(dxr, dy, yr, count);
	why = NULL;
	must(L->relu_backward(dx, dy, yr, count, &why), "relu", why);
	report("relu backward", rel_err(dx, dxr, count), TOL_EXACT);
	free(x); free(y); free(yr); free(dy); free(dx); free(dxr);
}

/* engine/model.c's shortcut, written out plainly as the reference. */
static void check_shortcut(int n, int c, int h, int cb, int s)
{
	const struct sd_backend_layer_ops *L = ops->layers;
	int hb = h * s, pad = (c - cb) / 2;
	size_t an = (size_t)n * c * h * h, bn = (size_t)n * cb * hb * hb;
	char tag[64], name[112];
	snprintf(tag, sizeof tag, "shortcut %d<-%dx%dx%d", c, cb, hb, hb);
	float *a = rnd(an, 51, 1), *b = rnd(bn, 52, 1), *y = malloc(an * 4), *yr = malloc(an * 4);
	float *dy = rnd(an, 53, 1), *dbr = calloc(bn, 4);
	for (int i = 0; i < n; i++)
		for (int ch = 0; ch < c; ch++)
			for (int yy = 0; yy < h; yy++)
				for (int xx = 0; xx < h; xx++) {
					size_t o = (((size_t)i * c + ch) * h + yy) * h + xx;
					int bc = ch - pad;
					yr[o] = a[o];
					if (bc >= 0 && bc < cb) {
						size_t bo = (((size_t)i * cb + bc) * hb + yy * s) * hb + xx * s;
						yr[o] = a[o] + b[bo];
						dbr[bo] += dy[o];
					}
				}
	char *why = NULL;
	must(L->shortcut_forward(y, a, b, n, c, h, h, cb, s, &why), tag, why);
	snprintf(name, sizeof name, "%s forward", tag);
	report(name, rel_err(y, yr, an), TOL_EXACT);
	float *da = malloc(an * 4), *db = malloc(bn * 4);
	why = NULL;
	must(L->shortcut_backward(da, db, dy, n, c, h, h, cb, s, 0, 0, &why), tag, why);
	snprintf(name, sizeof name, "%s d(main), d(shortcut)", tag);
	report(name, fmax(rel_err(da, dy, an), rel_err(db, dbr, bn)), TOL_EXACT);
	free(a); free(b); free(y); free(yr); free(dy); free(dbr); free(da); free(db);
}

static void check_softmax(int n, int classes)
{
	const struct sd_backend_layer_ops *L = ops->layers;
	size_t cnt = (size_t)n * classes;
	float *lg = rnd(cnt, 61, 3), *p = malloc(cnt * 4), *d = malloc(cnt * 4), *dr = malloc(cnt * 4);
	uint8_t *lab = malloc(n);
	for (int i = 0; i < n; i++)
		lab[i] = (uint8_t)((i * 7) % classes);
	int cr = 0, cg = 0;
	double lr = sd_softmax_xent_forward(p, &cr, lg, lab, n, classes), lgpu = 0;
	sd_softmax_xent_backward(dr, p, lab, n, classes, 1.0f / n);
	char *why = NULL;
	must(L->softmax_xent(d, &lgpu, &cg, lg, lab, n, classes, 1.0f / n, &why), "softmax", why);
	report("softmax cross-entropy dlogits", rel_err(d, dr, cnt), TOL_ELEM);
	report("softmax cross-entropy loss sum", fabs(lgpu - lr) / lr, 1e-12);
	report("softmax cross-entropy correct count", cg == cr ? 0 : 1, TOL_EXACT);
	free(lg); free(p); free(d); free(dr); free(lab);
}

static void check_sgd(size_t count)
{
	const struct sd_backend_layer_ops *L = ops->layers;
	float *p = rnd(count, 71, 1), *v = rnd(count, 72, 0.1f), *g = rnd(count, 73, 0.01f);
	float *pr = copy_of(p, count), *vr = copy_of(v, count);
	sd_sgd_step(pr, vr, g, count, 0.05f, 0.9f, 5e-4f);
	char *why = NULL;
	must(L->sgd_step(p, v, g, count, 0.05f, 0.9f, 5e-4f, &why), "sgd", why);
	/* Rounded as the CPU's: the same bits. */
	report("SGD momentum update (bitwise)", fmax(rel_err(p, pr, count), rel_err(v, vr, count)),
	       TOL_EXACT);
	free(p); free(v); free(g); free(pr); free(vr);
}

static void check_adamw(size_t count, long step)
{
	const struct sd_backend_layer_ops *L = ops->layers;
	float *p = rnd(count, 81, 1), *m = rnd(count, 82, 0.01f), *g = rnd(count, 84, 0.01f);
	/* A second moment is a running mean of squares: positive. */
	float *v = rnd(count, 83, 1e-4f);
	for (size_t i = 0; i < count; i++)
		v[i] = fabsf(v[i]);
	float *pr = copy_of(p, count), *mr = copy_of(m, count), *vr = copy_of(v, count);
	struct sd_adamw_scalars k;
	sd_adamw_scalars(&k, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, step);
	sd_adamw_step(pr, mr, vr, g, count, &k);
	char *why = NULL;
	must(L->adamw_step(p, m, v, g, count, &k, &why), "adamw", why);
	char what[64];
	snprintf(what, sizeof what, "AdamW update, step %ld (bitwise)", step);
	report(what, fmax(rel_err(p, pr, count), fmax(rel_err(m, mr, count), rel_err(v, vr, count))),
	       TOL_EXACT);
	free(p); free(m); free(v); free(g); free(pr); free(mr); free(vr);
}

/* The clip norm's sum of squares: the CPU's order, so the same bits. */
static void check_sumsq(size_t count)
{
	const struct sd_backend_layer_ops *L = ops->layers;
	float *x = rnd(count, 91, 1);
	/* Magnitudes over 2^-20..2^20, so that the order shows in the bits. */
	for (size_t i = 0; i < count; i++)
		x[i] = ldexpf(x[i], (int)(i * 2654435761u % 41) - 20);
	double want = sd_sumsq(x, count), got = -1;
	char *why = NULL;
	must(L->sumsq(x, count, &got, &why), "sumsq", why);
	char what[64];
	snprintf(what, sizeof what, "gradient sum of squares, %zu (bitwise)", count);
	report(what, memcmp(&got, &want, sizeof got) ? fabs(got - want) / want + 1e-300 : 0,
	       TOL_EXACT);
	free(x);
}

static int cmd_layers(void)
{
	need_gpu();
	printf("layers on %s (CPU reference: engine/layers.h)\n", choice.device.name);
	/* cnn's layers (1x28x28) */
	check_conv(8, 1, 28, 32, 5, 1, 2, 1);
	check_conv(8, 32, 14, 64, 5, 1, 2, 1);
	check_pool(1, 8, 32, 28, 2, 2);
	check_pool(1, 8, 64, 14, 2, 2);
	check_linear(8, 3136, 128);
	check_linear(8, 128, 10);
	/* resnet32's layers (3x32x32) */
	check_conv(8, 3, 32, 16, 3, 1, 1, 0);
	check_conv(8, 16, 32, 16, 3, 1, 1, 0);
	check_conv(8, 16, 32, 32, 3, 2, 1, 0);
	check_conv(8, 64, 8, 64, 3, 1, 1, 0);
	check_bn(8, 16, 32 * 32);
	check_bn(8, 64, 8 * 8);
	check_pool(0, 8, 64, 8, 8, 1);
	check_linear(8, 64, 10);
	check_shortcut(8, 16, 32, 16, 1);
	check_shortcut(8, 32, 16, 16, 2);
	/* Counts divisible by 4 take the 16-byte kernels, others the scalar ones. */
	check_relu(8 * 16 * 32 * 32);
	check_relu(8 * 16 * 32 * 32 + 3);
	check_softmax(128, 10);
	check_sgd(464152);
	check_sgd(1001);
	check_adamw(464152, 1);
	check_adamw(1001, 37);
	check_sumsq(464152);
	check_sumsq(1100003);   /* more than 256 blocks */
	check_sumsq(4095);
	return failures ? 1 : 0;
}

/* ---- whole models ------------------------------------------------------- */

static void model_config(struct sd_train_config *c, const char *model, int batch)
{
	sd_train_config_defaults(c);
	snprintf(c->model, sizeof c->model, "%s", model);
	snprintf(c->dataset, sizeof c->dataset, "synthetic");
	c->global_batch = batch;
	c->synthetic_samples = batch * 40;
	c->eval_batch = 500;
	c->seed = 3;
	/* Many epochs: the schedule never ends inside a throughput run. */
	c->epochs = 10000;
	const char *adamw = getenv("SD_GPU_CHECK_ADAMW");
	if (adamw && !strcmp(adamw, "1")) {
		snprintf(c->optimizer, sizeof c->optimizer, "adamw");
		c->lr = 1e-3f;
		c->betas[1] = 0.95f;
		c->weight_decay = 0.1f;
		c->clip_grad_norm = 1.0f;
	}
	if (!strcmp(model, "cnn")) {
		c->synthetic_c = 1;
		c->synthetic_h = c->synthetic_w = 28;
	} else {
		c->synthetic_c = 3;
		c->synthetic_h = c->synthetic_w = 32;
	}
}

static int default_batch(const char *model)
{
	return !strcmp(model, "cnn") ? 64 : 128;
}

static struct sd_trainer *make_trainer(const char *model, int batch, const char *backend)
{
	struct sd_train_config c;
	model_config(&c, model, batch);
	snprintf(c.backend, sizeof c.backend, "%s", backend);
	struct sd_trainer *t = NULL;
	char *why = NULL;
	if (sd_trainer_create(&t, &c, &why) < 0) {
		fprintf(stderr, "gpu-check: %s on %s: %s\n", model, backend, why);
		exit(1);
	}
	return t;
}

static int run_steps(struct sd_trainer *t, int steps, double *losses)
{
	for (int s = 0; s < steps; s++) {
		double acc;
		char *why = NULL;
		if (sd_trainer_step(t, &losses[s], &acc, &why) < 0) {
			printf("  step %d FAIL: %s\n", s + 1, why);
			free(why);
			return -1;
		}
	}
	return 0;
}

/* Nudges every parameter by one unit in the last place, up or down by a hash
 * of its index: a difference of the size of one rounding, the yardstick for
 * how far this model's training amplifies rounding differences. */
static void nudge_ulp(float *p, size_t n, uint32_t salt)
{
	for (size_t j = 0; j < n; j++) {
		uint32_t h = ((uint32_t)j ^ salt * 0x9e3779b9u) * 2654435761u;
		p[j] = nextafterf(p[j], (h >> 15) & 1 ? INFINITY : -INFINITY);
	}
}

/* The worst tensor's update error of run a against run b since p0:
 * ||(a - p0) - (b - p0)|| / ||b - p0|| per tensor; its name in *worst. */
static double update_err(const float *a, const float *b, const float *p0,
                         const struct sd_tensor_info *ti, int nt, const char **worst)
{
	double wt = 0;
	*worst = nt ? ti[0].name : "";
	for (int i = 0; i < nt; i++) {
		double num = 0, den = 0;
		for (size_t j = ti[i].offset; j < ti[i].offset + ti[i].count; j++) {
			double ua = (double)a[j] - p0[j], ub = (double)b[j] - p0[j];
			num += (ua - ub) * (ua - ub);
			den += ub * ub;
		}
		double e = den > 0 ? sqrt(num / den) : sqrt(num);
		if (isnan(e) || e > wt) {
			wt = isnan(e) ? INFINITY : e;
			*worst = ti[i].name;
		}
	}
	return wt;
}

/* Steps [from, to) of the yardstick's run k, its parameters nudged by 1 ulp
 * before each (the pattern from k and the step). */
static int run_nudged(struct sd_trainer *n, int k, int from, int to, double *losses)
{
	size_t np = sd_model_param_count(n->model);
	for (int s = from; s < to; s++) {
		nudge_ulp(sd_model_params(n->model), np, (uint32_t)(k * 100003 + s));
		if (run_steps(n, 1, losses + s) < 0)
			return -1;
	}
	return 0;
}

/* The yardstick: NUDGED CPU runs, each from a start nudged by 1 ulp and
 * nudged again before every step (another pattern per run).  How far they
 * drift from the plain CPU run is how far this model's training amplifies
 * rounding differences of the size the GPU makes at every step (other
 * summation orders, other convolution algorithms).  Over 20 steps that
 * drift is not small: cnn's loss passes a fork at step 10 where a nudge of
 * 1 ulp takes the other branch, and its runs end 6 % apart. */
#define NUDGED 3
/* How much further than the yardstick's largest drift so far the GPU may
 * be from the CPU. */
#define DRIFT_FACTOR 10.0
/* The first steps are compared without the yardstick: rounding differences
 * have not grown yet (the GPU ran within 2e-6 of the CPU there on an H200),
 * and a wrong gradient anywhere shows at once. */
#define EARLY_STEPS 5
#define EARLY_TOL 1e-5

static int cmd_trajectory(const char *model, int steps, int batch)
{
	need_gpu();
	struct sd_trainer *g = make_trainer(model, batch, "cuda");
	if (!g->dev) {
		/* A graph the device code refuses trains on the CPU: comparing
		 * that with the CPU would prove nothing. */
		printf("FAIL: %s does not run on the GPU: %s\n", model, g->backend.reason);
		return 1;
	}
	struct sd_trainer *c = make_trainer(model, batch, "cpu");
	struct sd_trainer *n[NUDGED];
	printf("%s, batch %d, %d steps: GPU (%s) against the CPU; yardstick: %d CPU runs nudged "
	       "by 1 ulp at every step\n", model, batch, steps, g->backend.reason, NUDGED);
	size_t np = sd_model_param_count(c->model), nb = sd_model_buffer_count(c->model);
	float *p0 = copy_of(sd_model_params(c->model), np);
	double *lg = calloc(steps, sizeof *lg), *lc = calloc(steps, sizeof *lc);
	double *ln[NUDGED];
	for (int k = 0; k < NUDGED; k++) {
		n[k] = make_trainer(model, batch, "cpu");
		ln[k] = calloc(steps, sizeof(double));
	}
	int nt;
	const struct sd_tensor_info *ti = sd_model_tensors(c->model, &nt);
	char *why = NULL;
	char name[128];
	const char *wname;
	/* One step: each tensor's update is the first gradient (plus weight
	 * decay), so a wrong gradient anywhere shows as an update of the wrong
	 * size or direction. */
	int first = steps < 1 ? steps : 1;
	if (run_steps(g, first, lg) < 0 || run_steps(c, first, lc) < 0)
		return 1;
	double en = 0;
	for (int k = 0; k < NUDGED; k++) {
		if (run_nudged(n[k], k, 0, first, ln[k]) < 0)
			return 1;
		en = fmax(en, update_err(sd_model_params(n[k]->model), sd_model_params(c->model), p0,
		                         ti, nt, &wname));
	}
	must(sd_trainer_sync_host(g, &why), "download", NULL);
	double eg = update_err(sd_model_params(g->model), sd_model_params(c->model), p0, ti, nt,
	                       &wname);
	printf("    after step 1: updates, worst tensor: gpu %.1e (%s), nudged cpu %.1e\n", eg, wname,
	       en);
	report("updates after step 1 / allowed", eg / fmax(1e-3, DRIFT_FACTOR * en), 1.0);
	if (run_steps(g, steps - first, lg + first) < 0 || run_steps(c, steps - first, lc + first) < 0)
		return 1;
	for (int k = 0; k < NUDGED; k++)
		if (run_nudged(n[k], k, first, steps, ln[k]) < 0)
			return 1;
	double early = 0, worst = 0, drift = 0;
	int wstep = 0;
	for (int s = 0; s < steps; s++) {
		double e = fabs(lg[s] - lc[s]) / fabs(lc[s]);
		double d = 0;
		for (int k = 0; k < NUDGED; k++)
			d = fmax(d, fabs(ln[k][s] - lc[s]) / fabs(lc[s]));
		drift = fmax(drift, d);
		printf("    step %2d  loss gpu %.7f  cpu %.7f  rel.diff gpu %.1e  nudged cpu %.1e\n",
		       s + 1, lg[s], lc[s], e, d);
		if (isnan(e))
			e = INFINITY;
		if (s < EARLY_STEPS)
			early = fmax(early, e);
		double r = e / fmax(1e-4, DRIFT_FACTOR * drift);
		if (r > worst) {
			worst = r;
			wstep = s + 1;
		}
	}
	snprintf(name, sizeof name, "loss, steps 1-%d, worst", steps < EARLY_STEPS ? steps : EARLY_STEPS);
	report(name, early, EARLY_TOL);
	snprintf(name, sizeof name, "loss / allowed, worst (step %d)", wstep);
	report(name, worst, 1.0);
	must(sd_trainer_sync_host(g, &why), "download", NULL);
	const float *pc = sd_model_params(c->model);
	double dg = rel_err(sd_model_params(g->model), pc, np), dn = 0, bg = 0, bn = 0;
	for (int k = 0; k < NUDGED; k++)
		dn = fmax(dn, rel_err(sd_model_params(n[k]->model), pc, np));
	printf("    parameters after %d steps: gpu %.1e, nudged cpu %.1e from the cpu's\n", steps, dg,
	       dn);
	report("parameters / allowed", dg / fmax(1e-4, DRIFT_FACTOR * dn), 1.0);
	if (nb) {
		const float *bc = sd_model_buffers(c->model);
		bg = rel_err(sd_model_buffers(g->model), bc, nb);
		for (int k = 0; k < NUDGED; k++)
			bn = fmax(bn, rel_err(sd_model_buffers(n[k]->model), bc, nb));
		printf("    batch-norm running statistics: gpu %.1e, nudged cpu %.1e from the cpu's\n",
		       bg, bn);
		report("batch-norm statistics / allowed", bg / fmax(1e-4, DRIFT_FACTOR * bn), 1.0);
	}
	double tlg, tag, tlc, tac, tn = 0;
	must(sd_trainer_evaluate(g, &tlg, &tag, &why), "evaluate (GPU)", why);
	why = NULL;
	must(sd_trainer_evaluate(c, &tlc, &tac, &why), "evaluate (CPU)", why);
	for (int k = 0; k < NUDGED; k++) {
		double tl, ta;
		why = NULL;
		must(sd_trainer_evaluate(n[k], &tl, &ta, &why), "evaluate (nudged CPU)", why);
		tn = fmax(tn, fabs(tl - tlc) / fabs(tlc));
	}
	double tg = fabs(tlg - tlc) / fabs(tlc);
	printf("    test loss gpu %.6f cpu %.6f (rel.diff %.1e, nudged cpu %.1e), accuracy gpu %.4f "
	       "cpu %.4f\n", tlg, tlc, tg, tn, tag, tac);
	report("test loss / allowed", tg / fmax(1e-3, DRIFT_FACTOR * tn), 1.0);
	free(p0);
	free(lg);
	free(lc);
	for (int k = 0; k < NUDGED; k++) {
		free(ln[k]);
		sd_trainer_destroy(n[k]);
	}
	sd_trainer_destroy(g);
	sd_trainer_destroy(c);
	return failures ? 1 : 0;
}

static void print_losses(const char *model, struct sd_trainer *t, const double *l, int steps)
{
	printf("{\"model\":\"%s\",\"losses\":[", model);
	for (int s = 0; s < steps; s++)
		printf("%s%.17g", s ? "," : "", l[s]);
	printf("],\"checksum\":\"%08x\"}\n", sd_trainer_param_checksum(t));
}

static int cmd_losses(const char *model, int steps, int batch)
{
	need_gpu();
	struct sd_trainer *t = make_trainer(model, batch, "cuda");
	double *l = calloc(steps, sizeof *l);
	if (run_steps(t, steps, l) < 0)
		return 1;
	print_losses(model, t, l, steps);
	free(l);
	sd_trainer_destroy(t);
	return 0;
}

static int cmd_determinism(const char *model, int steps, int batch)
{
	need_gpu();
	double *l[2];
	uint32_t sum[2];
	for (int run = 0; run < 2; run++) {
		struct sd_trainer *t = make_trainer(model, batch, "cuda");
		l[run] = calloc(steps, sizeof(double));
		if (run_steps(t, steps, l[run]) < 0)
			return 1;
		sum[run] = sd_trainer_param_checksum(t);
		if (run == 0)
			printf("%s on %s: %s\n", model, t->backend.device.name, t->backend.reason);
		sd_trainer_destroy(t);
	}
	int same = memcmp(l[0], l[1], steps * sizeof(double)) == 0 && sum[0] == sum[1];
	double worst = 0;
	for (int s = 0; s < steps; s++)
		worst = fmax(worst, fabs(l[0][s] - l[1][s]) / fabs(l[1][s]));
	printf("  two runs: losses %s (worst rel.diff %.1e), parameter checksums %08x %08x  %s\n",
	       same ? "identical" : "differ", worst, sum[0], sum[1], same ? "ok" : "FAIL");
	free(l[0]);
	free(l[1]);
	return same ? 0 : 1;
}

/* ---- NCCL ---------------------------------------------------------------- */

/* A device buffer for NCCL to work on: the gradient block of a small
 * device model (the plugin has no bare allocator in its ops table). */
struct dev_buf {
	struct sd_model *m;
	struct sd_dev_model *dm;
	float *dev;
	size_t n;
};

static int dev_buf_open(struct dev_buf *b, char **why)
{
	memset(b, 0, sizeof *b);
	if (sd_model_create(&b->m, "mlp", 1, 32, 32, 10, 1, why) < 0 ||
	    ops->model_create(&b->dm, b->m, 1, why) < 0)
		return -1;
	b->n = sd_model_param_count(b->m);
	b->dev = ops->model_block(b->dm, SD_DEV_GRADS);
	return 0;
}

static void dev_buf_close(struct dev_buf *b)
{
	if (b->dm)
		ops->model_destroy(b->dm);
	sd_model_destroy(b->m);
}

/* One rank of a world-size-N run (a process of its own, on GPU `rank`).
 * vanish: the last rank exits right after joining, as a SIGKILLed worker;
 * the others' all-reduce must then fail with SD_COMM_EPEER within the
 * timeout (ncclCommAbort), not hang. */
static int nccl_rank(int rank, int world, const char *store_dir, int vanish)
{
	char *why = NULL;
	struct sd_backend_device info;
	if (ops->device_open(rank, &info, &why) < 0) {
		printf("  rank %d: %s  FAIL\n", rank, why);
		return 1;
	}
	struct sd_dir_store st;
	if (sd_dir_store_init(&st, store_dir, &why) < 0)
		return 1;
	struct dev_buf b;
	if (dev_buf_open(&b, &why) < 0) {
		printf("  rank %d: device buffer: %s  FAIL\n", rank, why);
		return 1;
	}
	struct sd_comm *c = NULL;
	int rc = sd_comm_create(&c, SD_COMM_NCCL, rank, world, vanish ? 2 : 1, &sd_dir_store_ops, &st,
	                        vanish ? 5000 : 20000, &why);
	if (rc < 0) {
		printf("  rank %d: create: %s  FAIL\n", rank, why);
		return 1;
	}
	if (vanish && rank == world - 1)
		_exit(0);
	float *h = malloc(b.n * sizeof(float));
	for (size_t i = 0; i < b.n; i++)
		h[i] = (float)(rank + 1) + (float)(i % 7);
	int ok = ops->model_upload(b.dm, SD_DEV_GRADS, h, &why) == 0;
	double t0 = now_s();
	rc = ok ? sd_comm_allreduce_sum(c, b.dev, b.n, &why) : -1;
	if (vanish) {
		ok = rc == SD_COMM_EPEER;
		printf("  rank %d: all-reduce with a vanished peer: %s after %.1f s (%s)  %s\n", rank,
		       ok ? "failed" : "did not fail", now_s() - t0, why ? why : "", ok ? "ok" : "FAIL");
		sd_comm_destroy(c);
		return ok ? 0 : 1;
	}
	ok = rc == 0 && ops->model_download(b.dm, SD_DEV_GRADS, h, &why) == 0;
	double base = (double)world * (world + 1) / 2;
	for (size_t i = 0; ok && i < b.n; i++)
		ok = h[i] == (float)(base + (double)world * (i % 7));
	double x[2] = { rank, 1 };
	if (ok)
		ok = sd_comm_allreduce_sum_f64(c, x, 2, &why) == 0 && x[1] == world &&
		     x[0] == (double)world * (world - 1) / 2;
	unsigned char bytes[5] = { 0 };
	if (rank == 0)
		memcpy(bytes, "nccl", 5);
	if (ok)
		ok = sd_comm_broadcast(c, bytes, 5, 0, &why) == 0 && !memcmp(bytes, "nccl", 5);
	if (ok)
		ok = sd_comm_barrier(c, &why) == 0;
	printf("  rank %d of %d: all-reduce (device %zu floats, host f64), broadcast, barrier  %s%s%s\n",
	       rank, world, b.n, ok ? "ok" : "FAIL", why ? ": " : "", why ? why : "");
	free(h);
	sd_comm_destroy(c);
	dev_buf_close(&b);
	sd_dir_store_fini(&st);
	return ok ? 0 : 1;
}

/* NCCL itself at world size 1 (engine/comm.c never calls a backend for one
 * rank, so this goes to the plugin's NCCL ops directly), on device memory:
 * ncclCommInitRankConfig, all-reduce, broadcast, barrier, abort. */
static int nccl_world1(const char *store_dir)
{
	char *why = NULL;
	const struct sd_comm_backend_ops *n = ops->nccl;
	struct sd_dir_store st;
	if (sd_dir_store_init(&st, store_dir, &why) < 0)
		return 1;
	void *impl = NULL;
	int rc = n->create(&impl, 0, 1, "gen/0/", &sd_dir_store_ops, &st, 20000, &why);
	if (rc < 0) {
		printf("  world size 1: create: %s  FAIL\n", why);
		return 1;
	}
	struct dev_buf b;
	if (dev_buf_open(&b, &why) < 0) {
		printf("  world size 1: device buffer: %s  FAIL\n", why);
		return 1;
	}
	size_t np = b.n;
	float *host = rnd(np, 81, 1), *back = malloc(np * sizeof(float));
	float *dev = b.dev;
	int ok = ops->model_upload(b.dm, SD_DEV_GRADS, host, &why) == 0;
	ok = ok && n->allreduce_sum_f32(impl, dev, np, &why) == 0;
	ok = ok && ops->model_download(b.dm, SD_DEV_GRADS, back, &why) == 0;
	ok = ok && !memcmp(host, back, np * sizeof(float));
	double x[3] = { 1.5, -2, 3 };
	ok = ok && n->allreduce_sum_f64(impl, x, 3, &why) == 0 && x[0] == 1.5 && x[2] == 3;
	ok = ok && n->broadcast(impl, dev, np * sizeof(float), 0, &why) == 0;
	ok = ok && n->barrier(impl, &why) == 0;
	printf("  world size 1: all-reduce on device (%zu floats) and host memory, broadcast, "
	       "barrier  %s%s%s\n", np, ok ? "ok" : "FAIL", why ? ": " : "", why ? why : "");
	n->abort(impl);
	n->destroy(impl);
	dev_buf_close(&b);
	free(host);
	free(back);
	sd_dir_store_fini(&st);
	return ok ? 0 : 1;
}

static int cmd_nccl(void)
{
	need_gpu();
	if (!ops->nccl) {
		printf("  the plugin was built without NCCL  FAIL\n");
		return 1;
	}
	char dir[] = "/tmp/spotdeck-nccl-XXXXXX";
	if (!mkdtemp(dir))
		return 1;
	int count = 0;
	char *why = NULL;
	ops->device_count(&count, &why);
	int bad = nccl_world1(dir);
	if (count > 1) {
		int world = count > 8 ? 8 : count;
		/* One process per GPU, as the workers.  This process has
		 * initialised CUDA, which a forked child cannot use, so each
		 * rank is this program again (the "nccl-rank" subcommand). */
		char exe[4096];
		ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
		exe[len > 0 ? len : 0] = 0;
		for (int vanish = 0; vanish < 2; vanish++) {
			pid_t pids[8];
			for (int r = 0; r < world; r++) {
				char rs[16], ws[16], vs[4];
				snprintf(rs, sizeof rs, "%d", r);
				snprintf(ws, sizeof ws, "%d", world);
				snprintf(vs, sizeof vs, "%d", vanish);
				fflush(stdout);
				pids[r] = fork();
				if (pids[r] == 0) {
					execl(exe, exe, "nccl-rank", rs, ws, dir, vs, (char *)NULL);
					_exit(127);
				}
			}
			for (int r = 0; r < world; r++) {
				int st = 0;
				waitpid(pids[r], &st, 0);
				bad |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
			}
		}
	} else {
		printf("  world size N: only %d GPU visible, not run\n", count);
	}
	free(why);
	char cmd[256];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "gpu-check: cannot remove %s\n", dir);
	return bad ? 1 : 0;
}

/* ---- throughput ---------------------------------------------------------- */

static int cmd_throughput(const char *model, int batch, int steps)
{
	need_gpu();
	struct sd_trainer *t = make_trainer(model, batch, "cuda");
	if (!t->dev) {
		fprintf(stderr, "gpu-check: %s does not run on the GPU: %s\n", model, t->backend.reason);
		return 1;
	}
	int warm = steps < 20 ? 1 : 20;   /* plans, graphs, algorithm search */
	double *l = calloc(steps + warm, sizeof *l);
	if (run_steps(t, warm, l) < 0)
		return 1;
	double t0 = now_s();
	if (run_steps(t, steps, l + warm) < 0)
		return 1;
	double dt = now_s() - t0;
	printf("{\"engine\":\"spotdeck\",\"model\":\"%s\",\"batch\":%d,\"steps\":%d,"
	       "\"images_per_sec\":%.1f,\"ms_per_step\":%.4f,\"last_loss\":%.6f,"
	       "\"flops_per_image\":%.0f,\"device\":\"%s\",\"how\":\"%s\"}\n",
	       model, batch, steps, steps * (double)batch / dt, dt * 1000 / steps, l[steps + warm - 1],
	       sd_model_flops_per_sample(t->model), t->backend.device.name,
	       ops->model_describe(t->dev));
	free(l);
	sd_trainer_destroy(t);
	return 0;
}

static int cmd_probe(void)
{
	need_gpu();
	struct sd_backend_device dev[16];
	char *why = NULL;
	int n = sd_backend_list_devices(dev, 16, &why);
	printf("{\"device\":\"%s\",\"uuid\":\"%s\",\"visible\":%d,\"memory_gib\":%.1f,"
	       "\"cc\":\"%d.%d\",\"sms\":%d,\"plugin\":\"%s\",\"libraries\":\"%s\",\"nccl\":%s}\n",
	       choice.device.name, choice.device.uuid, n, choice.device.memory_gib,
	       choice.device.cc_major, choice.device.cc_minor, choice.device.multiprocessors,
	       sd_backend_plugin_path(), ops->versions(), ops->nccl ? "true" : "false");
	free(why);
	return 0;
}

/* ---- language models (an ONNX GPT) ---------------------------------------- */

/* SD_GPU_CHECK_HOST_GPT=1: the gpt-* commands run their "device" side on a
 * second CPU copy of the model, loaded from the same file (make check's
 * self-test of these commands where there is no GPU; the comparisons are
 * then of two equal computations and say nothing about a device). */
static const char *host_gpt_file;
struct host_gpt {
	struct sd_model *m;
	float *vel;
};

static int host_create(struct sd_dev_model **out, const struct sd_model *m, int max_batch,
                       char **why)
{
	(void)m;
	uint8_t *bytes = NULL;
	size_t len = 0;
	struct host_gpt *h = calloc(1, sizeof *h);
	if (sd_onnx_read_file(host_gpt_file, &bytes, &len, why) < 0 ||
	    sd_model_create_onnx(&h->m, bytes, len, host_gpt_file, max_batch, why) < 0) {
		free(bytes);
		free(h);
		return -1;
	}
	free(bytes);
	h->vel = calloc(sd_model_param_count(h->m) + 1, sizeof(float));
	*out = (struct sd_dev_model *)h;
	return 0;
}

static void host_destroy(struct sd_dev_model *d)
{
	struct host_gpt *h = (struct host_gpt *)d;
	sd_model_destroy(h->m);
	free(h->vel);
	free(h);
}

static float *host_block(struct host_gpt *h, enum sd_dev_block b)
{
	return b == SD_DEV_PARAMS ? sd_model_params(h->m) : b == SD_DEV_GRADS ? sd_model_grads(h->m)
	       : b == SD_DEV_VELOCITY ? h->vel : NULL;
}

static int host_upload(struct sd_dev_model *d, enum sd_dev_block b, const float *host, char **why)
{
	struct host_gpt *h = (struct host_gpt *)d;
	float *p = host_block(h, b);
	if (!p)
		return sd_why(why, "host stand-in: no block %d", (int)b);
	memcpy(p, host, sd_model_param_count(h->m) * sizeof(float));
	return 0;
}

static int host_download(struct sd_dev_model *d, enum sd_dev_block b, float *host, char **why)
{
	struct host_gpt *h = (struct host_gpt *)d;
	float *p = host_block(h, b);
	if (!p)
		return sd_why(why, "host stand-in: no block %d", (int)b);
	memcpy(host, p, sd_model_param_count(h->m) * sizeof(float));
	return 0;
}

static int host_train_tokens(struct sd_dev_model *d, const int32_t *x, const int32_t *y, int n,
                             float grad_scale, double *loss_sum, char **why)
{
	return sd_model_train_tokens(((struct host_gpt *)d)->m, x, y, n, grad_scale, loss_sum, why);
}

static int host_eval_tokens(struct sd_dev_model *d, const int32_t *x, const int32_t *y, int n,
                            double *loss_sum, char **why)
{
	return sd_model_eval_tokens(((struct host_gpt *)d)->m, x, y, n, loss_sum, why);
}

static int host_sgd(struct sd_dev_model *d, float lr, float momentum, float weight_decay,
                    char **why)
{
	(void)why;
	struct host_gpt *h = (struct host_gpt *)d;
	sd_sgd_step(sd_model_params(h->m), h->vel, sd_model_grads(h->m), sd_model_param_count(h->m),
	            lr, momentum, weight_decay);
	return 0;
}

static const char *host_describe(struct sd_dev_model *d)
{
	(void)d;
	return "host stand-in (SD_GPU_CHECK_HOST_GPT=1): a second CPU copy, not a device";
}

static const struct sd_backend_ops host_gpt_ops = {
	.name = "host",
	.model_create = host_create,
	.model_destroy = host_destroy,
	.model_upload = host_upload,
	.model_download = host_download,
	.sgd_step = host_sgd,
	.model_describe = host_describe,
	.train_tokens = host_train_tokens,
	.eval_tokens = host_eval_tokens,
};

/* need_gpu() for the gpt-* commands on file. */
static void need_gpu_gpt(const char *file)
{
	const char *h = getenv("SD_GPU_CHECK_HOST_GPT");
	if (h && !strcmp(h, "1")) {
		host_gpt_file = file;
		ops = &host_gpt_ops;
		snprintf(choice.device.name, sizeof choice.device.name, "host stand-in");
		return;
	}
	need_gpu();
}


/* The CPU model of an ONNX GPT for batches of up to batch windows. */
static struct sd_model *gpt_load(const char *file, int batch)
{
	uint8_t *bytes = NULL;
	size_t len = 0;
	struct sd_model *m = NULL;
	char *why = NULL;
	if (sd_onnx_read_file(file, &bytes, &len, &why) < 0 ||
	    sd_model_create_onnx(&m, bytes, len, file, batch, &why) < 0) {
		fprintf(stderr, "gpu-check: %s: %s\n", file, why);
		exit(1);
	}
	free(bytes);
	if (!sd_model_seq_len(m)) {
		fprintf(stderr, "gpu-check: %s is not a language model\n", file);
		exit(1);
	}
	return m;
}

/* The device copy of m with m's parameters; exits when it cannot be made. */
static struct sd_dev_model *gpt_device(struct sd_model *m, int batch)
{
	struct sd_dev_model *d = NULL;
	char *why = NULL;
	if (!ops->train_tokens) {
		fprintf(stderr, "gpu-check: the plugin has no train_tokens\n");
		exit(1);
	}
	if (ops->model_create(&d, m, batch, &why) < 0 ||
	    ops->model_upload(d, SD_DEV_PARAMS, sd_model_params(m), &why) < 0) {
		printf("  device model FAIL: %s\n", why);
		exit(1);
	}
	return d;
}

/* Token windows with a pattern to learn: sample b of step s counts up from
 * a random start by a random stride (mod the vocabulary); y is x shifted
 * by one (the next token). */
static void gpt_batch(int32_t *x, int32_t *y, int batch, int T, int V, uint64_t seed)
{
	struct sd_rng r;
	sd_rng_seed(&r, seed, 7);
	for (int b = 0; b < batch; b++) {
		uint32_t at = sd_rng_below(&r, (uint32_t)V), by = 1 + sd_rng_below(&r, 7);
		for (int t = 0; t <= T; t++) {
			int32_t tok = (int32_t)((at + (uint64_t)by * t) % (uint32_t)V);
			if (t < T)
				x[(size_t)b * T + t] = tok;
			if (t > 0)
				y[(size_t)b * T + t - 1] = tok;
		}
	}
}

/* gpt-grad: one training step of the GPT on the CPU and on the GPU from the
 * same parameters and windows: the loss, and every parameter tensor's
 * gradient (which exercises every node's forward and backward: a wrong
 * op shows in the gradients of the tensors before it), the evaluation
 * loss, and the GPU's gradients bit-identical on a second step.
 * SPOTDECK_FUSE=off in the environment makes the unfused graph (BMM,
 * scale, mask, softmax, BMM; the GELU chains) the one compared. */
#define TOL_GPT_LOSS 1e-5
#define TOL_GPT_GRAD 2e-3   /* float32 sums in other orders through ~30 nodes */
static int cmd_gpt_grad(const char *file, int batch)
{
	need_gpu_gpt(file);
	struct sd_model *m = gpt_load(file, batch);
	struct sd_dev_model *d = gpt_device(m, batch);
	const int T = sd_model_seq_len(m), V = m->classes;
	const size_t cnt = (size_t)batch * T, np = sd_model_param_count(m);
	int32_t *x = malloc(cnt * sizeof *x), *y = malloc(cnt * sizeof *y);
	gpt_batch(x, y, batch, T, V, 11);
	const float scale = 1.0f / (float)cnt;
	double lc = 0, lg = 0, ec = 0, eg = 0;
	char *why = NULL;
	printf("%s: batch %d, T %d, vocabulary %d, %zu parameters, fusion %s\n", file, batch, T, V,
	       np, getenv("SPOTDECK_FUSE") ? getenv("SPOTDECK_FUSE") : "on");
	if (sd_model_train_tokens(m, x, y, batch, scale, &lc, &why) < 0) {
		printf("  CPU step FAIL: %s\n", why);
		return 1;
	}
	must(ops->train_tokens(d, x, y, batch, scale, &lg, &why), "GPU step", why);
	why = NULL;
	report("loss (summed over positions)", fabs(lg - lc) / fabs(lc), TOL_GPT_LOSS);
	float *g = malloc(np * sizeof *g), *g2 = malloc(np * sizeof *g2);
	must(ops->model_download(d, SD_DEV_GRADS, g, &why), "download gradients", why);
	why = NULL;
	int nt = 0;
	const struct sd_tensor_info *ti = sd_model_tensors(m, &nt);
	for (int i = 0; i < nt; i++) {
		char what[64];
		snprintf(what, sizeof what, "d %s", ti[i].name);
		report(what, rel_err(g + ti[i].offset, sd_model_grads(m) + ti[i].offset, ti[i].count),
		       TOL_GPT_GRAD);
	}
	must(ops->train_tokens(d, x, y, batch, scale, &lg, &why), "GPU step again", why);
	why = NULL;
	must(ops->model_download(d, SD_DEV_GRADS, g2, &why), "download gradients", why);
	why = NULL;
	int same = !memcmp(g, g2, np * sizeof *g);
	printf("  %-44s %s\n", "second GPU step: the same gradient bits", same ? "ok" : "FAIL");
	failures += !same;
	if (sd_model_eval_tokens(m, x, y, batch, &ec, &why) < 0) {
		printf("  CPU eval FAIL: %s\n", why);
		return 1;
	}
	must(ops->eval_tokens(d, x, y, batch, &eg, &why), "GPU eval", why);
	report("evaluation loss", fabs(eg - ec) / fabs(ec), TOL_GPT_LOSS);
	printf("  loss CPU %.9g GPU %.9g (per position %.6f)\n", lc, lg, lc / (double)cnt);
	free(g);
	free(g2);
	free(x);
	free(y);
	ops->model_destroy(d);
	sd_model_destroy(m);
	return failures ? 1 : 0;
}

/* steps SGD steps (lr 0.1, momentum 0.9) of m from its current parameters
 * on the CPU; losses per step (mean per position).  nudge: after every
 * step each parameter moves by 1 ulp (nudge_ulp, salted by nudge and the
 * step), 0 for none. */
static int gpt_cpu_steps(struct sd_model *m, int batch, int steps, double *losses, uint32_t nudge)
{
	const int T = sd_model_seq_len(m);
	const size_t cnt = (size_t)batch * T, np = sd_model_param_count(m);
	int32_t *x = malloc(cnt * sizeof *x), *y = malloc(cnt * sizeof *y);
	float *vel = calloc(np ? np : 1, sizeof *vel);
	for (int s = 0; s < steps; s++) {
		char *why = NULL;
		gpt_batch(x, y, batch, T, m->classes, 100 + (uint64_t)s);
		if (sd_model_train_tokens(m, x, y, batch, 1.0f / (float)cnt, &losses[s], &why) < 0) {
			printf("  CPU step %d FAIL: %s\n", s + 1, why);
			free(why);
			return -1;
		}
		losses[s] /= (double)cnt;
		sd_sgd_step(sd_model_params(m), vel, sd_model_grads(m), np, 0.1f, 0.9f, 0.0f);
		if (nudge)
			nudge_ulp(sd_model_params(m), np, nudge + 1000u * (uint32_t)s);
	}
	free(vel);
	free(x);
	free(y);
	return 0;
}

/* gpt-trajectory: steps SGD steps on the CPU and on the GPU from the same
 * parameters and windows; the GPU's loss at every step against the CPU's,
 * within 10x (DRIFT_FACTOR) the spread of two CPU runs whose parameters
 * are nudged by 1 ulp after every step (the yardstick of how far this
 * model's training amplifies a rounding per step, as cmd_trajectory's), or
 * 1e-5 relative, whichever is larger. */
static int cmd_gpt_trajectory(const char *file, int steps, int batch)
{
	need_gpu_gpt(file);
	struct sd_model *m = gpt_load(file, batch);
	const size_t np = sd_model_param_count(m);
	float *p0 = copy_of(sd_model_params(m), np);
	struct sd_dev_model *d = gpt_device(m, batch);
	const int T = sd_model_seq_len(m);
	const size_t cnt = (size_t)batch * T;
	double *lc = calloc(steps, sizeof *lc), *lg = calloc(steps, sizeof *lg);
	double *ln[2] = { calloc(steps, sizeof(double)), calloc(steps, sizeof(double)) };
	int32_t *x = malloc(cnt * sizeof *x), *y = malloc(cnt * sizeof *y);
	for (int s = 0; s < steps; s++) {
		char *why = NULL;
		gpt_batch(x, y, batch, T, m->classes, 100 + (uint64_t)s);
		if (ops->train_tokens(d, x, y, batch, 1.0f / (float)cnt, &lg[s], &why) < 0 ||
		    ops->sgd_step(d, 0.1f, 0.9f, 0.0f, &why) < 0) {
			printf("  GPU step %d FAIL: %s\n", s + 1, why);
			return 1;
		}
		lg[s] /= (double)cnt;
	}
	if (gpt_cpu_steps(m, batch, steps, lc, 0) < 0)
		return 1;
	for (int k = 0; k < 2; k++) {
		memcpy(sd_model_params(m), p0, np * sizeof(float));
		if (gpt_cpu_steps(m, batch, steps, ln[k], 17u + (uint32_t)k) < 0)
			return 1;
	}
	printf("%s: %d SGD steps at batch %d (lr 0.1, momentum 0.9), loss per position\n", file,
	       steps, batch);
	printf("  step   CPU          GPU          |GPU-CPU|   CPU 1-ulp spread  verdict\n");
	for (int s = 0; s < steps; s++) {
		double spread = fmax(fabs(ln[0][s] - lc[s]), fabs(ln[1][s] - lc[s]));
		double tol = fmax(DRIFT_FACTOR * spread, 1e-5 * fabs(lc[s]));
		double diff = fabs(lg[s] - lc[s]);
		int ok = diff <= tol && !isnan(lg[s]);
		printf("  %4d   %.8f   %.8f   %.2e    %.2e          %s\n", s + 1, lc[s], lg[s], diff,
		       spread, ok ? "ok" : "FAIL");
		failures += !ok;
	}
	int learned = lc[steps - 1] < lc[0];
	printf("  the CPU run learns (last loss below the first): %s\n", learned ? "yes" : "no");
	ops->model_destroy(d);
	sd_model_destroy(m);
	return failures ? 1 : 0;
}

/* gpt-throughput: tokens/s of whole GPU training steps (upload, forward,
 * backward, SGD, the loss read back) of an ONNX GPT; one JSON line. */
static int cmd_gpt_throughput(const char *file, int batch, int steps)
{
	need_gpu_gpt(file);
	/* The host copy only holds the graph and the parameters: batch 1 (GPT-2
	 * small's host buffers at batch 8 would be 77 GB of address space). */
	struct sd_model *m = gpt_load(file, 1);
	struct sd_dev_model *d = gpt_device(m, batch);
	const int T = sd_model_seq_len(m);
	const size_t cnt = (size_t)batch * T;
	int32_t *x = malloc(cnt * sizeof *x), *y = malloc(cnt * sizeof *y);
	gpt_batch(x, y, batch, T, m->classes, 5);
	double l = 0, t0 = 0;
	int warm = steps < 10 ? 1 : 3;
	for (int s = 0; s < warm + steps; s++) {
		char *why = NULL;
		if (s == warm)
			t0 = now_s();
		if (ops->train_tokens(d, x, y, batch, 1.0f / (float)cnt, &l, &why) < 0 ||
		    ops->sgd_step(d, 0.01f, 0.9f, 0.0f, &why) < 0) {
			printf("  GPU step %d FAIL: %s\n", s + 1, why);
			return 1;
		}
	}
	double dt = now_s() - t0;
	printf("{\"engine\":\"spotdeck\",\"model\":\"%s\",\"batch\":%d,\"block\":%d,\"steps\":%d,"
	       "\"tokens_per_sec\":%.1f,\"ms_per_step\":%.4f,\"last_loss\":%.6f,"
	       "\"flops_per_token\":%.0f,\"device\":\"%s\",\"how\":\"%s\"}\n",
	       file, batch, T, steps, steps * (double)cnt / dt, dt * 1000 / steps, l / (double)cnt,
	       sd_model_flops_per_sample(m) / T, choice.device.name, ops->model_describe(d));
	ops->model_destroy(d);
	sd_model_destroy(m);
	return 0;
}

static int usage(void)
{
	fprintf(stderr, "usage: gpu-check probe | layers | trajectory MODEL STEPS [BATCH] | "
	        "determinism MODEL STEPS [BATCH] | losses MODEL STEPS [BATCH] | nccl | "
	        "throughput MODEL BATCH STEPS | gpt-grad GPT.onnx BATCH | "
	        "gpt-trajectory GPT.onnx STEPS BATCH | gpt-throughput GPT.onnx BATCH STEPS\n");
	return 2;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return usage();
	int threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (threads < 1)
		threads = 1;
	if (!getenv("OMP_NUM_THREADS")) {
		openblas_set_num_threads(threads);
		omp_set_num_threads(threads);
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	const char *c = argv[1];
	if (!strcmp(c, "probe"))
		return cmd_probe();
	if (!strcmp(c, "layers"))
		return cmd_layers();
	if (!strcmp(c, "nccl"))
		return cmd_nccl();
	if (!strcmp(c, "nccl-rank") && argc == 6) {
		need_gpu();
		return nccl_rank(atoi(argv[2]), atoi(argv[3]), argv[4], atoi(argv[5]));
	}
	/* MODEL STEPS [BATCH]: the batch defaults to the model's (64, 128). */
	if (argc == 4 || argc == 5) {
		int steps = atoi(argv[3]);
		int batch = argc == 5 ? atoi(argv[4]) : default_batch(argv[2]);
		if (steps < 1 || batch < 1)
			return usage();
		if (!strcmp(c, "trajectory"))
			return cmd_trajectory(argv[2], steps, batch);
		if (!strcmp(c, "determinism"))
			return cmd_determinism(argv[2], steps, batch);
		if (!strcmp(c, "losses"))
			return cmd_losses(argv[2], steps, batch);
	}
	if (argc == 4 && !strcmp(c, "gpt-grad"))
		return cmd_gpt_grad(argv[2], atoi(argv[3]));
	if (argc == 5 && !strcmp(c, "gpt-trajectory"))
		return cmd_gpt_trajectory(argv[2], atoi(argv[3]), atoi(argv[4]));
	if (argc == 5 && !strcmp(c, "gpt-throughput"))
		return cmd_gpt_throughput(argv[2], atoi(argv[3]), atoi(argv[4]));
	if (argc == 5 && !strcmp(c, "throughput"))
		return cmd_throughput(argv[2], atoi(argv[3]), atoi(argv[4]));
	return usage();
}
