/* tests/engine/test-gradcheck.c - every backward function of engine/layers.h
 * against central finite differences of its forward function.
 *
 * Loss: L = sum_i y_i g_i over the layer output y with a fixed random g (for
 * softmax cross-entropy, L = scale * the returned loss).  L is accumulated in
 * double; the layers themselves are float32.  For each checked element p of an
 * input or parameter:
 *   numeric  n = (L(p + eps) - L(p - eps)) / (2 eps)
 *   analytic a = the backward function's dx / dw / db / dgamma / dbeta
 *   error      = |a - n| / max(FLOOR, |a| + |n|)
 * and the check fails when the largest error over the tensor exceeds TOL.
 *
 *   Layers linear in the checked tensor (linear, conv2d, relu, maxpool,
 *   avgpool) get inputs, parameters and g on the grid k/64 and eps = 1/64:
 *   every product and partial sum is then exact in float32, so the finite
 *   difference is exact too and only a wrong gradient can miss.  (Kinks of
 *   relu and maxpool are kept further than eps from every input.)  So do
 *   the piecewise-linear leaky ReLU and clip; sigmoid and tanh are smooth
 *   and get N(0, 4) inputs and eps = 1e-2.
 *   Batch-norm and softmax are nonlinear and get N(0,1) data, eps = 1e-2
 *   (5e-2 for the fused batch-norm, see EPS_BNACT);
 *   truncation (O(eps^2)) and float32 rounding of L stay below 1e-3 of the
 *   gradient scale, so:
 *
 *   TOL = 1e-2, FLOOR = 1e-3 for every check.
 *
 * oneDNN convolutions run its direct kernels here (SPOTDECK_WINOGRAD=0, see
 * main).
 *
 * The fused batch-norm + residual + ReLU and the option-A shortcut of the
 * channel-blocked ResNets (engine/layers-blocked.c) are checked in NCHW and
 * in blocks of 8 and 16 channels.
 *
 * Convolutions are checked on both paths of engine/layers.h (im2col +
 * OpenBLAS, and oneDNN where the build has it), at odd small shapes and at
 * every convolution shape of resnet20/32 and cnn (channels, plane, kernel,
 * stride and padding as in the model, batch 2, MAX_CHECKS_MODEL random
 * elements per tensor); at the model shapes the oneDNN path must really run
 * (no silent fallback to im2col).
 *
 * The general layers of ONNX models (engine/layers-general.c): convolutions
 * with groups (depthwise included), dilation, rectangular kernels and
 * strides and asymmetric pads, whose forward is also compared with the
 * definition (exactly, on the grid); padded average pooling with both
 * divisors (and its corner window against the definition); Add, Sub, Mul
 * and Div of two activations and of an activation and a scalar or
 * per-channel constant on either side, the constant's gradient included
 * (Div smooth: divisors kept in [0.5, 2.5], eps 1e-2); dropout's gradient
 * through a fixed mask.
 *
 * Also checked: parameter gradients ACCUMULATE (a buffer holding P gets
 * P + 2 G after two calls, within 1e-4 relative), dx is overwritten (it is
 * pre-filled with NaN), and dx = NULL gives the same parameter gradients.
 * Prints one line per check; exits 1 when any check fails.
 */
#include "engine/blas.h"
#include "engine/layers.h"
#include "src/base/rng.h"
#include "tests/check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL 1e-2
#define FLOOR 1e-3
#define ACC_TOL 1e-4
#define EPS_GRID (1.0f / 64.0f)
#define EPS_SMOOTH 1e-2f
/* The fused batch-norm in blocked layouts (8 or 16 channels a block): its
 * worst dx error measured 4.9e-3 at eps 1e-2 (blk8; float32 rounding of L
 * over 2 eps dominates), 2.4e-3 at 5e-2, where truncation (O(eps^2)) is
 * still smaller: 5e-2 doubles the margin to the 1e-2 tolerance. */
#define EPS_BNACT 5e-2f
/* Tensors larger than this are checked at this many random elements. */
#define MAX_CHECKS 200
/* Fewer at the model-sized convolutions, where one forward pass costs
 * milliseconds: on the exact grid any wrong gradient element shows, and a
 * wrong kernel gets many elements wrong. */
#define MAX_CHECKS_MODEL 24
static size_t max_checks = MAX_CHECKS;

static struct sd_rng rng;

static float *falloc(size_t count)
{
	float *p = calloc(count ? count : 1, sizeof(float));
	if (!p) {
		fprintf(stderr, "test-gradcheck: out of memory\n");
		exit(1);
	}
	return p;
}

/* Random values on the grid k/64, |k| <= 64 * range. */
static void fill_grid(float *p, size_t count, int range)
{
	for (size_t i = 0; i < count; i++)
		p[i] = (float)((int)sd_rng_below(&rng, 2u * 64u * range + 1u) - 64 * range) / 64.0f;
}

static void fill_normal(float *p, size_t count)
{
	for (size_t i = 0; i < count; i++)
		p[i] = sd_rng_normal(&rng);
}

static void fill_nan(float *p, size_t count)
{
	for (size_t i = 0; i < count; i++)
		p[i] = NAN;
}

static double dot_f64(const float *y, const float *g, size_t count)
{
	double s = 0.0;
	for (size_t i = 0; i < count; i++)
		s += (double)y[i] * g[i];
	return s;
}

/* A layer under test: loss() runs the forward pass with the current contents
 * of the tensors and returns L. */
struct case_ops {
	double (*loss)(void *ctx);
	void *ctx;
};

/* Compares analytic gradient a of tensor p (count elements) with central
 * differences of ops->loss, on all elements or MAX_CHECKS random ones. */
static void check_grad(const char *name, const char *tensor, float *p, size_t count,
                       const float *a, const struct case_ops *ops, float eps)
{
	double worst = 0.0;
	size_t worst_at = 0, checks = count < max_checks ? count : max_checks;
	for (size_t t = 0; t < checks; t++) {
		size_t i = count <= max_checks ? t : sd_rng_below(&rng, (uint32_t)count);
		float keep = p[i];
		p[i] = keep + eps;
		double lp = ops->loss(ops->ctx);
		p[i] = keep - eps;
		double lm = ops->loss(ops->ctx);
		p[i] = keep;
		double num = (lp - lm) / (2.0 * (double)eps);
		double an = a[i];
		double den = fabs(an) + fabs(num);
		double err = fabs(an - num) / (den > FLOOR ? den : FLOOR);
		if (!(err <= worst) || isnan(err)) {
			worst = isnan(err) ? INFINITY : err;
			worst_at = i;
		}
	}
	check_report(worst <= TOL, "%-36s d%-6s max rel err %.2e over %zu of %zu (tol %.0e, floor %.0e, worst at %zu: analytic %.6g)",
	             name, tensor, worst, checks, count, TOL, FLOOR, worst_at, (double)a[worst_at]);
}

/* grad2 must be init + 2 * grad1 (backward called twice on a buffer that held
 * init), within ACC_TOL relative to the largest magnitude involved. */
static void check_accumulates(const char *name, const char *tensor, const float *init,
                              const float *grad1, const float *grad2, size_t count)
{
	double worst = 0.0;
	for (size_t i = 0; i < count; i++) {
		double want = (double)init[i] + 2.0 * grad1[i];
		double scale = fabs(init[i]) + 2.0 * fabs(grad1[i]);
		double err = fabs(grad2[i] - want) / (scale > 1e-30 ? scale : 1e-30);
		if (!(err <= worst))
			worst = isnan(err) ? INFINITY : err;
	}
	check_report(worst <= ACC_TOL, "%-36s d%-6s accumulates: max rel err %.2e (tol %.0e)",
	             name, tensor, worst, ACC_TOL);
}

static void check_same(const char *name, const char *what, const float *a, const float *b,
                       size_t count)
{
	double worst = 0.0;
	for (size_t i = 0; i < count; i++) {
		double d = fabs((double)a[i] - b[i]) / (fabs(a[i]) + 1e-30);
		if (!(d <= worst))
			worst = isnan(d) ? INFINITY : d;
	}
	check_report(worst <= ACC_TOL, "%-36s %s: max rel diff %.2e (tol %.0e)", name, what, worst, ACC_TOL);
}

/* ---------------------------------------------------------------- linear */

struct linear_ctx {
	int n, in, out;
	float *x, *w, *b, *y, *g;
};

static double linear_loss(void *p)
{
	struct linear_ctx *c = p;
	sd_linear_forward(c->y, c->x, c->w, c->b, c->n, c->in, c->out);
	return dot_f64(c->y, c->g, (size_t)c->n * c->out);
}

static void test_linear(int n, int in, int out, int bias)
{
	char name[96];
	snprintf(name, sizeof(name), "linear n%d %d->%d %s", n, in, out, bias ? "bias" : "no-bias");
	struct linear_ctx c = { n, in, out, falloc((size_t)n * in), falloc((size_t)out * in),
		                bias ? falloc(out) : NULL, falloc((size_t)n * out),
		                falloc((size_t)n * out) };
	fill_grid(c.x, (size_t)n * in, 2);
	fill_grid(c.w, (size_t)out * in, 1);
	if (bias)
		fill_grid(c.b, out, 1);
	fill_grid(c.g, (size_t)n * out, 1);
	float *dx = falloc((size_t)n * in), *dw = falloc((size_t)out * in);
	float *db = bias ? falloc(out) : NULL;
	fill_nan(dx, (size_t)n * in);
	linear_loss(&c);
	sd_linear_backward(dx, dw, db, c.g, c.x, c.w, n, in, out);
	struct case_ops ops = { linear_loss, &c };
	check_grad(name, "x", c.x, (size_t)n * in, dx, &ops, EPS_GRID);
	check_grad(name, "w", c.w, (size_t)out * in, dw, &ops, EPS_GRID);
	if (bias)
		check_grad(name, "b", c.b, out, db, &ops, EPS_GRID);

	/* Accumulation, and dx = NULL. */
	float *w0 = falloc((size_t)out * in), *w2 = falloc((size_t)out * in);
	float *b0 = falloc(out), *b2 = falloc(out);
	fill_normal(w0, (size_t)out * in);
	fill_normal(b0, out);
	memcpy(w2, w0, sizeof(float) * out * in);
	memcpy(b2, b0, sizeof(float) * out);
	sd_linear_backward(NULL, w2, bias ? b2 : NULL, c.g, c.x, c.w, n, in, out);
	sd_linear_backward(NULL, w2, bias ? b2 : NULL, c.g, c.x, c.w, n, in, out);
	check_accumulates(name, "w", w0, dw, w2, (size_t)out * in);
	if (bias)
		check_accumulates(name, "b", b0, db, b2, out);
	free(w0), free(w2), free(b0), free(b2);
	free(c.x), free(c.w), free(c.b), free(c.y), free(c.g), free(dx), free(dw), free(db);
}

/* ---------------------------------------------------------------- conv2d */

struct conv_ctx {
	struct sd_conv2d_shape s;
	float *x, *w, *b, *y, *g, *ws;
};

static double conv_loss(void *p)
{
	struct conv_ctx *c = p;
	sd_conv2d_forward(c->y, c->x, c->w, c->b, &c->s, c->ws);
	return dot_f64(c->y, c->g, (size_t)c->s.n * c->s.k * c->s.oh * c->s.ow);
}

/* oneDNN is in this build. */
static int have_onednn;

static void test_conv_path(enum sd_conv_path path, int model, int n, int ch, int h, int w,
                           int k, int r, int stride, int pad, int bias)
{
	char name[96];
	struct conv_ctx c;
	if (sd_conv2d_shape_init(&c.s, n, ch, h, w, k, r, stride, pad)) {
		check_report(0, "conv shape n%d c%d %dx%d k%d r%d s%d p%d rejected", n, ch, h, w, k, r,
		             stride, pad);
		return;
	}
	snprintf(name, sizeof(name), "conv[%s] n%d c%d %dx%d k%d r%d s%d p%d%s",
	         sd_conv2d_path_name(path), n, ch, h, w, k, r, stride, pad, bias ? "" : " nobias");
	if (path == SD_CONV_ONEDNN && !have_onednn)
		return;
	sd_conv2d_set_path(path);
	if (path == SD_CONV_ONEDNN && sd_conv2d_path(&c.s, bias) != SD_CONV_ONEDNN) {
		/* Small odd shapes may lack JIT kernels (im2col then runs and
		 * is checked anyway); model shapes must have them. */
		check_report(!model, "%-36s oneDNN has no JIT kernels here: im2col runs", name);
		if (model)
			return;
	}
	const size_t nx = (size_t)n * ch * h * w, nw = (size_t)k * ch * r * r;
	const size_t ny = (size_t)n * k * c.s.oh * c.s.ow;
	c.x = falloc(nx);
	c.w = falloc(nw);
	c.b = bias ? falloc(k) : NULL;
	c.y = falloc(ny);
	c.g = falloc(ny);
	c.ws = falloc(sd_conv2d_workspace_floats(&c.s));
	fill_grid(c.x, nx, 2);
	fill_grid(c.w, nw, 1);
	if (bias)
		fill_grid(c.b, k, 1);
	fill_grid(c.g, ny, 1);
	float *dx = falloc(nx), *dw = falloc(nw), *db = bias ? falloc(k) : NULL;
	fill_nan(dx, nx);
	conv_loss(&c);
	sd_conv2d_backward(dx, dw, db, c.g, c.x, c.w, &c.s, c.ws);
	struct case_ops ops = { conv_loss, &c };
	check_grad(name, "x", c.x, nx, dx, &ops, EPS_GRID);
	check_grad(name, "w", c.w, nw, dw, &ops, EPS_GRID);
	if (bias)
		check_grad(name, "b", c.b, k, db, &ops, EPS_GRID);

	/* dx = NULL must give the same parameter gradients, and two calls
	 * must add twice onto what the buffers held. */
	float *w0 = falloc(nw), *w2 = falloc(nw), *b0 = falloc(k), *b2 = falloc(k);
	float *dwn = falloc(nw), *dbn = falloc(k);
	sd_conv2d_backward(NULL, dwn, bias ? dbn : NULL, c.g, c.x, c.w, &c.s, c.ws);
	check_same(name, "dw with dx=NULL", dw, dwn, nw);
	fill_normal(w0, nw);
	fill_normal(b0, k);
	memcpy(w2, w0, sizeof(float) * nw);
	memcpy(b2, b0, sizeof(float) * k);
	sd_conv2d_backward(NULL, w2, bias ? b2 : NULL, c.g, c.x, c.w, &c.s, c.ws);
	sd_conv2d_backward(dx, w2, bias ? b2 : NULL, c.g, c.x, c.w, &c.s, c.ws);
	check_accumulates(name, "w", w0, dw, w2, nw);
	if (bias)
		check_accumulates(name, "b", b0, db, b2, k);
	free(w0), free(w2), free(b0), free(b2), free(dwn), free(dbn);
	free(c.x), free(c.w), free(c.b), free(c.y), free(c.g), free(c.ws);
	free(dx), free(dw), free(db);
	sd_conv2d_set_path(SD_CONV_AUTO);
}

static void test_conv(int n, int ch, int h, int w, int k, int r, int stride, int pad, int bias)
{
	test_conv_path(SD_CONV_IM2COL, 0, n, ch, h, w, k, r, stride, pad, bias);
	test_conv_path(SD_CONV_ONEDNN, 0, n, ch, h, w, k, r, stride, pad, bias);
}

/* A convolution of one of the models, batch 2: both paths. */
static void test_conv_model(int ch, int hw, int k, int r, int stride, int pad, int bias)
{
	max_checks = MAX_CHECKS_MODEL;
	test_conv_path(SD_CONV_IM2COL, 1, 2, ch, hw, hw, k, r, stride, pad, bias);
	test_conv_path(SD_CONV_ONEDNN, 1, 2, ch, hw, hw, k, r, stride, pad, bias);
	max_checks = MAX_CHECKS;
}

/* ------------------------------------------------------------ batch norm */

struct bn_ctx {
	int n, c, hw;
	float *x, *gamma, *beta, *y, *g, *mean, *invstd, *rmean, *rvar;
};

static double bn_loss(void *p)
{
	struct bn_ctx *c = p;
	sd_batchnorm_forward_train(c->y, c->mean, c->invstd, c->rmean, c->rvar, c->x, c->gamma,
	                           c->beta, c->n, c->c, c->hw, 0.1f, 1e-5f);
	return dot_f64(c->y, c->g, (size_t)c->n * c->c * c->hw);
}

static void test_batchnorm(int n, int ch, int hw)
{
	char name[96];
	snprintf(name, sizeof(name), "batchnorm train n%d c%d hw%d", n, ch, hw);
	const size_t nx = (size_t)n * ch * hw;
	struct bn_ctx c = { n, ch, hw, falloc(nx), falloc(ch), falloc(ch), falloc(nx), falloc(nx),
		            falloc(ch), falloc(ch), falloc(ch), falloc(ch) };
	fill_normal(c.x, nx);
	/* A per-channel offset and scale, as real activations have. */
	for (size_t i = 0; i < nx; i++) {
		int chn = (int)(i / hw % ch);
		c.x[i] = c.x[i] * (0.5f + chn) + (float)chn - 1.0f;
	}
	for (int i = 0; i < ch; i++) {
		c.gamma[i] = 0.5f + sd_rng_uniform(&rng);
		c.beta[i] = sd_rng_normal(&rng);
	}
	fill_normal(c.g, nx);
	float *dx = falloc(nx), *dgamma = falloc(ch), *dbeta = falloc(ch);
	fill_nan(dx, nx);
	bn_loss(&c);
	sd_batchnorm_backward(dx, dgamma, dbeta, c.g, c.x, c.mean, c.invstd, c.gamma, n, ch, hw);
	struct case_ops ops = { bn_loss, &c };
	check_grad(name, "x", c.x, nx, dx, &ops, EPS_SMOOTH);
	check_grad(name, "gamma", c.gamma, ch, dgamma, &ops, EPS_SMOOTH);
	check_grad(name, "beta", c.beta, ch, dbeta, &ops, EPS_SMOOTH);

	float *g0 = falloc(ch), *g2 = falloc(ch), *b0 = falloc(ch), *b2 = falloc(ch);
	fill_normal(g0, ch);
	fill_normal(b0, ch);
	memcpy(g2, g0, sizeof(float) * ch);
	memcpy(b2, b0, sizeof(float) * ch);
	bn_loss(&c);
	sd_batchnorm_backward(dx, g2, b2, c.g, c.x, c.mean, c.invstd, c.gamma, n, ch, hw);
	sd_batchnorm_backward(dx, g2, b2, c.g, c.x, c.mean, c.invstd, c.gamma, n, ch, hw);
	check_accumulates(name, "gamma", g0, dgamma, g2, ch);
	check_accumulates(name, "beta", b0, dbeta, b2, ch);
	free(g0), free(g2), free(b0), free(b2);
	free(c.x), free(c.gamma), free(c.beta), free(c.y), free(c.g), free(c.mean);
	free(c.invstd), free(c.rmean), free(c.rvar), free(dx), free(dgamma), free(dbeta);
}

/* ------------------------------------- fused batch-norm, blocked layouts */

struct bn_act_ctx {
	int n, c, hw, blk, relu;
	float *x, *r, *gamma, *beta, *y, *g, *mean, *invstd, *rmean, *rvar;
};

static double bn_act_loss(void *p)
{
	struct bn_act_ctx *c = p;
	sd_batchnorm_act_forward_train(c->y, c->mean, c->invstd, c->rmean, c->rvar, c->x, c->r,
	                               c->gamma, c->beta, c->n, c->c, c->hw, c->blk, c->relu, 0.1f,
	                               1e-5f);
	return dot_f64(c->y, c->g, (size_t)c->n * c->c * c->hw);
}

/* y = relu(bn(x) + r) in layout blk.  The residual is chosen so that every
 * pre-activation is at least 0.25 from the ReLU's kink (a perturbation of
 * eps moves it by far less), which keeps central differences valid. */
static void test_bn_act(int n, int ch, int hw, int blk, int relu)
{
	char name[96];
	snprintf(name, sizeof(name), "bn-act n%d c%d hw%d blk%d%s", n, ch, hw, blk,
	         relu ? " +res relu" : " +res");
	const size_t nx = (size_t)n * ch * hw;
	struct bn_act_ctx c = { n, ch, hw, blk, relu, falloc(nx), falloc(nx), falloc(ch),
		                falloc(ch), falloc(nx), falloc(nx), falloc(ch), falloc(ch),
		                falloc(ch), falloc(ch) };
	fill_normal(c.x, nx);
	for (size_t i = 0; i < nx; i++)
		c.x[i] = c.x[i] * 1.5f + 0.5f;
	for (int i = 0; i < ch; i++) {
		c.gamma[i] = 0.5f + sd_rng_uniform(&rng);
		c.beta[i] = sd_rng_normal(&rng);
	}
	/* r = target - bn(x), target = +-(0.25 .. 1.25). */
	int keep = c.relu;
	c.relu = 0;
	bn_act_loss(&c);
	c.relu = keep;
	for (size_t i = 0; i < nx; i++) {
		float t = 0.25f + sd_rng_uniform(&rng);
		c.r[i] = (sd_rng_uniform(&rng) < 0.5f ? -t : t) - c.y[i];
	}
	fill_normal(c.g, nx);
	float *dx = falloc(nx), *dr = falloc(nx), *dgamma = falloc(ch), *dbeta = falloc(ch);
	fill_nan(dx, nx);
	fill_nan(dr, nx);
	bn_act_loss(&c);
	sd_batchnorm_act_backward(dx, dr, dgamma, dbeta, c.g, c.y, c.x, c.mean, c.invstd, c.gamma, n,
	                          ch, hw, blk, relu);
	struct case_ops ops = { bn_act_loss, &c };
	check_grad(name, "x", c.x, nx, dx, &ops, EPS_BNACT);
	check_grad(name, "r", c.r, nx, dr, &ops, EPS_BNACT);
	check_grad(name, "gamma", c.gamma, ch, dgamma, &ops, EPS_BNACT);
	check_grad(name, "beta", c.beta, ch, dbeta, &ops, EPS_BNACT);
	free(c.x), free(c.r), free(c.gamma), free(c.beta), free(c.y), free(c.g), free(c.mean);
	free(c.invstd), free(c.rmean), free(c.rvar), free(dx), free(dr), free(dgamma), free(dbeta);
}

struct shortcut_ctx {
	int n, c, h, w, cb, s, blk;
	float *b, *r, *g, *y;
};

/* Option-A shortcut, then global average pooling (both linear): grid data. */
static double shortcut_loss(void *p)
{
	struct shortcut_ctx *c = p;
	sd_shortcut_forward(c->r, c->b, c->n, c->c, c->h, c->w, c->cb, c->h * c->s, c->w * c->s,
	                    c->s, c->blk);
	sd_global_avgpool_forward(c->y, c->r, c->n, c->c, c->h * c->w, c->blk);
	return dot_f64(c->y, c->g, (size_t)c->n * c->c);
}

static void test_shortcut(int n, int ch, int h, int w, int cb, int s, int blk)
{
	char name[96];
	snprintf(name, sizeof(name), "shortcut+gavg n%d %d->%d %dx%d s%d blk%d", n, cb, ch, h, w, s,
	         blk);
	const size_t nb = (size_t)n * cb * h * s * w * s, nr = (size_t)n * ch * h * w;
	struct shortcut_ctx c = { n, ch, h, w, cb, s, blk, falloc(nb), falloc(nr),
		                  falloc((size_t)n * ch), falloc((size_t)n * ch) };
	fill_grid(c.b, nb, 2);
	fill_grid(c.g, (size_t)n * ch, 1);
	float *dr = falloc(nr), *db = falloc(nb);
	fill_nan(dr, nr);
	shortcut_loss(&c);
	sd_global_avgpool_backward(dr, c.g, n, ch, h * w, blk);
	sd_shortcut_backward(db, dr, n, ch, h, w, cb, h * s, w * s, s, blk);
	struct case_ops ops = { shortcut_loss, &c };
	check_grad(name, "b", c.b, nb, db, &ops, EPS_GRID);
	free(c.b), free(c.r), free(c.g), free(c.y), free(dr), free(db);
}

/* ------------------------------------------------------------------ relu */

struct relu_ctx {
	size_t count;
	float *x, *y, *g;
};

static double relu_loss(void *p)
{
	struct relu_ctx *c = p;
	sd_relu_forward(c->y, c->x, c->count);
	return dot_f64(c->y, c->g, c->count);
}

static void test_relu(size_t count)
{
	char name[96];
	snprintf(name, sizeof(name), "relu %zu", count);
	struct relu_ctx c = { count, falloc(count), falloc(count), falloc(count) };
	fill_grid(c.x, count, 2);
	/* Keep every input at least 2 eps away from the kink at 0. */
	for (size_t i = 0; i < count; i++)
		if (fabsf(c.x[i]) < 2.0f * EPS_GRID)
			c.x[i] = c.x[i] < 0.0f ? -0.25f : 0.25f;
	fill_grid(c.g, count, 1);
	float *dx = falloc(count);
	fill_nan(dx, count);
	relu_loss(&c);
	sd_relu_backward(dx, c.g, c.y, count);
	struct case_ops ops = { relu_loss, &c };
	check_grad(name, "x", c.x, count, dx, &ops, EPS_GRID);
	/* In place (dx = dy), as the header allows. */
	float *inplace = falloc(count);
	memcpy(inplace, c.g, sizeof(float) * count);
	sd_relu_backward(inplace, inplace, c.y, count);
	check_same(name, "in-place backward", dx, inplace, count);
	free(inplace);
	free(c.x), free(c.y), free(c.g), free(dx);
}

/* ------------------------------------------------- other activations */

struct act_ctx {
	size_t count;
	enum sd_act_kind kind;
	float a, b;
	float *x, *y, *g;
};

static double act_loss(void *p)
{
	struct act_ctx *c = p;
	sd_act_forward(c->y, c->x, c->count, c->kind, c->a, c->b);
	return dot_f64(c->y, c->g, c->count);
}

/* Leaky ReLU and clip are piecewise linear: the exact grid, inputs kept
 * 2 eps from the kinks.  Sigmoid and tanh are smooth: N(0, 1) inputs,
 * eps 1e-2 like batch-norm. */
static void test_act(enum sd_act_kind kind, const char *what, float a, float b, size_t count)
{
	char name[96];
	snprintf(name, sizeof(name), "%s %zu", what, count);
	struct act_ctx c = { count, kind, a, b, falloc(count), falloc(count), falloc(count) };
	int smooth = kind == SD_ACT_SIGMOID || kind == SD_ACT_TANH;
	if (smooth) {
		for (size_t i = 0; i < count; i++)
			c.x[i] = 2.0f * sd_rng_normal(&rng);
	} else {
		fill_grid(c.x, count, 2);
		for (size_t i = 0; i < count; i++) {
			if (fabsf(c.x[i]) < 2.0f * EPS_GRID)
				c.x[i] = c.x[i] < 0.0f ? -0.25f : 0.25f;
			if (kind == SD_ACT_CLIP && (fabsf(c.x[i] - a) < 2.0f * EPS_GRID ||
			                            fabsf(c.x[i] - b) < 2.0f * EPS_GRID))
				c.x[i] += 4.0f * EPS_GRID;
		}
	}
	fill_grid(c.g, count, 1);
	float *dx = falloc(count);
	fill_nan(dx, count);
	act_loss(&c);
	sd_act_backward(dx, c.g, c.x, c.y, count, kind, a, b);
	struct case_ops ops = { act_loss, &c };
	check_grad(name, "x", c.x, count, dx, &ops, smooth ? EPS_SMOOTH : EPS_GRID);
	/* In place (dx = dy), as the header allows; y again from the
	 * unperturbed x (check_grad's last forward ran on a nudged one). */
	act_loss(&c);
	float *inplace = falloc(count);
	memcpy(inplace, c.g, sizeof(float) * count);
	sd_act_backward(inplace, inplace, c.x, c.y, count, kind, a, b);
	check_same(name, "in-place backward", dx, inplace, count);
	free(inplace);
	free(c.x), free(c.y), free(c.g), free(dx);
}

/* --------------------------------------------------------------- pooling */

struct pool_ctx {
	int n, c, h, w, k, s, oh, ow, max, pad;
	float *x, *y, *g;
	int32_t *argmax;
};

static double pool_loss(void *p)
{
	struct pool_ctx *c = p;
	if (c->max && c->pad)
		sd_maxpool_pad_forward(c->y, c->argmax, c->x, c->n, c->c, c->h, c->w, c->k, c->s,
		                       c->pad);
	else if (c->max)
		sd_maxpool_forward(c->y, c->argmax, c->x, c->n, c->c, c->h, c->w, c->k, c->s);
	else
		sd_avgpool_forward(c->y, c->x, c->n, c->c, c->h, c->w, c->k, c->s);
	return dot_f64(c->y, c->g, (size_t)c->n * c->c * c->oh * c->ow);
}

/* max: 1 for max pooling (pad: its padding), 0 for average pooling. */
static void test_pool_pad(int max, int n, int ch, int h, int w, int k, int s, int pad)
{
	char name[96];
	snprintf(name, sizeof(name), "%s n%d c%d %dx%d k%d s%d%s", max ? "maxpool" : "avgpool",
	         n, ch, h, w, k, s, pad ? " pad" : "");
	if (pad)
		snprintf(name + strlen(name), sizeof(name) - strlen(name), "%d", pad);
	struct pool_ctx c = { n, ch, h, w, k, s, (h + 2 * pad - k) / s + 1,
		              (w + 2 * pad - k) / s + 1, max, pad, NULL, NULL, NULL, NULL };
	const size_t nx = (size_t)n * ch * h * w, ny = (size_t)n * ch * c.oh * c.ow;
	c.x = falloc(nx);
	c.y = falloc(ny);
	c.g = falloc(ny);
	c.argmax = calloc(ny, sizeof(int32_t));
	if (!c.argmax)
		exit(1);
	if (max) {
		/* Distinct values 4 eps apart in random order: perturbing one by
		 * eps never changes which element is the maximum. */
		for (size_t i = 0; i < nx; i++)
			c.x[i] = (float)((double)i * 4.0 * EPS_GRID - (double)nx * 2.0 * EPS_GRID);
		for (size_t i = nx; i > 1; i--) {
			size_t j = sd_rng_below(&rng, (uint32_t)i);
			float t = c.x[i - 1];
			c.x[i - 1] = c.x[j];
			c.x[j] = t;
		}
	} else {
		fill_grid(c.x, nx, 2);
	}
	fill_grid(c.g, ny, 1);
	float *dx = falloc(nx);
	fill_nan(dx, nx);
	pool_loss(&c);
	if (max && pad)
		sd_maxpool_pad_backward(dx, c.g, c.argmax, n, ch, h, w, k, s, pad);
	else if (max)
		sd_maxpool_backward(dx, c.g, c.argmax, n, ch, h, w, k, s);
	else
		sd_avgpool_backward(dx, c.g, n, ch, h, w, k, s);
	struct case_ops ops = { pool_loss, &c };
	check_grad(name, "x", c.x, nx, dx, &ops, EPS_GRID);
	free(c.x), free(c.y), free(c.g), free(c.argmax), free(dx);
}

static void test_pool(int max, int n, int ch, int h, int w, int k, int s)
{
	test_pool_pad(max, n, ch, h, w, k, s, 0);
}

/* ---------------------------------------------- padded average pooling */

struct avgpad_ctx {
	int n, c, h, w, k, s, pad, count_pad, oh, ow;
	float *x, *y, *g;
};

static double avgpad_loss(void *p)
{
	struct avgpad_ctx *c = p;
	sd_avgpool_pad_forward(c->y, c->x, c->n, c->c, c->h, c->w, c->k, c->s, c->pad,
	                       c->count_pad);
	return dot_f64(c->y, c->g, (size_t)c->n * c->c * c->oh * c->ow);
}

/* Also against the definition at two windows: the corner (padding in it)
 * and the first full one, where both divisors agree. */
static void test_avgpool_pad(int n, int ch, int h, int w, int k, int s, int pad, int count_pad)
{
	char name[96];
	snprintf(name, sizeof(name), "avgpool n%d c%d %dx%d k%d s%d pad%d %s", n, ch, h, w, k, s,
	         pad, count_pad ? "count-pad" : "no-count-pad");
	struct avgpad_ctx c = { n, ch, h, w, k, s, pad, count_pad, (h + 2 * pad - k) / s + 1,
		                (w + 2 * pad - k) / s + 1, NULL, NULL, NULL };
	const size_t nx = (size_t)n * ch * h * w, ny = (size_t)n * ch * c.oh * c.ow;
	c.x = falloc(nx);
	c.y = falloc(ny);
	c.g = falloc(ny);
	fill_grid(c.x, nx, 2);
	fill_grid(c.g, ny, 1);
	float *dx = falloc(nx);
	fill_nan(dx, nx);
	avgpad_loss(&c);
	/* Window (0, 0) covers rows and columns 0 .. k - pad - 1. */
	double corner = 0.0;
	for (int i = 0; i < k - pad; i++)
		for (int j = 0; j < k - pad; j++)
			corner += c.x[(size_t)i * w + j];
	corner /= count_pad ? (double)k * k : (double)(k - pad) * (k - pad);
	check_report(fabs(c.y[0] - corner) <= 1e-6 * (1.0 + fabs(corner)),
	             "%-36s corner window %.7g, by definition %.7g", name, (double)c.y[0], corner);
	sd_avgpool_pad_backward(dx, c.g, n, ch, h, w, k, s, pad, count_pad);
	struct case_ops ops = { avgpad_loss, &c };
	check_grad(name, "x", c.x, nx, dx, &ops, EPS_GRID);
	free(c.x), free(c.y), free(c.g), free(dx);
}

/* ---------------------------------------------------- general convolution */

struct gconv_ctx {
	struct sd_gconv_shape s;
	float *x, *w, *b, *y, *g, *ws;
};

static double gconv_loss(void *p)
{
	struct gconv_ctx *c = p;
	sd_gconv_forward(c->y, c->x, c->w, c->b, &c->s, c->ws);
	return dot_f64(c->y, c->g, (size_t)c->s.n * c->s.k * c->s.oh * c->s.ow);
}

/* The definition, one output element at a time (double sums). */
static double gconv_direct(const struct gconv_ctx *c, int n, int o, int oy, int ox)
{
	const struct sd_gconv_shape *s = &c->s;
	const int cg = s->c / s->groups, q = o / (s->k / s->groups);
	double acc = c->b ? c->b[o] : 0.0;
	for (int ci = 0; ci < cg; ci++)
		for (int i = 0; i < s->kh; i++)
			for (int j = 0; j < s->kw; j++) {
				int y = oy * s->sh - s->pt + i * s->dh, x = ox * s->sw - s->pl + j * s->dw;
				if (y < 0 || y >= s->h || x < 0 || x >= s->w)
					continue;
				acc += (double)c->w[(((size_t)o * cg + ci) * s->kh + i) * s->kw + j] *
				       c->x[(((size_t)n * s->c + q * cg + ci) * s->h + y) * s->w + x];
			}
	return acc;
}

static void test_gconv(int n, int ch, int h, int w, int k, int kh, int kw, int sh, int sw,
                       int dil_h, int dil_w, int pt, int pl, int pb, int pr, int groups, int bias)
{
	char name[96];
	struct gconv_ctx c = { .s = { n, ch, h, w, k, kh, kw, sh, sw, dil_h, dil_w, pt, pl, pb, pr,
	                              groups, 0, 0 } };
	snprintf(name, sizeof(name), "gconv c%d %dx%d k%d %dx%d s%d,%d d%d,%d p%d%d%d%d g%d%s", ch,
	         h, w, k, kh, kw, sh, sw, dil_h, dil_w, pt, pl, pb, pr, groups, bias ? "" : " nobias");
	if (sd_gconv_shape_init(&c.s)) {
		check_report(0, "%s: shape rejected", name);
		return;
	}
	/* The output size as PyTorch's Conv2d documents it. */
	const int want_oh = (h + pt + pb - dil_h * (kh - 1) - 1) / sh + 1;
	const int want_ow = (w + pl + pr - dil_w * (kw - 1) - 1) / sw + 1;
	check_report(c.s.oh == want_oh && c.s.ow == want_ow, "%-36s output %dx%d (expected %dx%d)",
	             name, c.s.oh, c.s.ow, want_oh, want_ow);
	const size_t nx = (size_t)n * ch * h * w, nw = (size_t)k * (ch / groups) * kh * kw;
	const size_t ny = (size_t)n * k * c.s.oh * c.s.ow;
	c.x = falloc(nx);
	c.w = falloc(nw);
	c.b = bias ? falloc(k) : NULL;
	c.y = falloc(ny);
	c.g = falloc(ny);
	c.ws = falloc(sd_gconv_workspace_floats(&c.s));
	fill_grid(c.x, nx, 2);
	fill_grid(c.w, nw, 1);
	if (bias)
		fill_grid(c.b, k, 1);
	fill_grid(c.g, ny, 1);
	gconv_loss(&c);
	/* Forward against the definition: on the grid every sum is exact. */
	double worst = 0.0;
	for (int i = 0; i < n; i++)
		for (int o = 0; o < k; o++)
			for (int oy = 0; oy < c.s.oh; oy++)
				for (int ox = 0; ox < c.s.ow; ox++) {
					double want = gconv_direct(&c, i, o, oy, ox);
					double got = c.y[(((size_t)i * k + o) * c.s.oh + oy) * c.s.ow + ox];
					if (!(fabs(got - want) <= worst))
						worst = isnan(got) ? INFINITY : fabs(got - want);
				}
	check_report(worst == 0.0, "%-36s forward vs definition: max abs diff %.2e (exact)", name,
	             worst);
	float *dx = falloc(nx), *dw = falloc(nw), *db = bias ? falloc(k) : NULL;
	fill_nan(dx, nx);
	sd_gconv_backward(dx, dw, db, c.g, c.x, c.w, &c.s, c.ws);
	struct case_ops ops = { gconv_loss, &c };
	check_grad(name, "x", c.x, nx, dx, &ops, EPS_GRID);
	check_grad(name, "w", c.w, nw, dw, &ops, EPS_GRID);
	if (bias)
		check_grad(name, "b", c.b, k, db, &ops, EPS_GRID);
	float *w0 = falloc(nw), *w2 = falloc(nw), *dwn = falloc(nw);
	sd_gconv_backward(NULL, dwn, NULL, c.g, c.x, c.w, &c.s, c.ws);
	check_same(name, "dw with dx=NULL", dw, dwn, nw);
	fill_normal(w0, nw);
	memcpy(w2, w0, sizeof(float) * nw);
	sd_gconv_backward(NULL, w2, NULL, c.g, c.x, c.w, &c.s, c.ws);
	sd_gconv_backward(dx, w2, NULL, c.g, c.x, c.w, &c.s, c.ws);
	check_accumulates(name, "w", w0, dw, w2, nw);
	free(w0), free(w2), free(dwn);
	free(c.x), free(c.w), free(c.b), free(c.y), free(c.g), free(c.ws);
	free(dx), free(dw), free(db);
}

/* ------------------------------------------------ elementwise arithmetic */

static const char *const binop_names[] = { "add", "sub", "mul", "div" };

struct bin_ctx {
	int n, c, hw, kc, k_first;
	enum sd_binop op;
	float *a, *b, *k, *y, *g;   /* b: the second activation, or NULL (then k) */
};

static double bin_loss(void *p)
{
	struct bin_ctx *c = p;
	const size_t count = (size_t)c->n * c->c * c->hw;
	if (c->b)
		sd_binary_forward(c->y, c->a, c->b, count, c->op);
	else
		sd_binary_const_forward(c->y, c->a, c->k, c->kc, c->n, c->c, c->hw, c->op,
		                        c->k_first);
	return dot_f64(c->y, c->g, count);
}

/* Divisors are kept in [0.5, 2.5] in magnitude and Div is smooth (eps
 * 1e-2, N(0,1) data elsewhere); the others are exact on the grid.  kc 0:
 * two activations; 1 or c: a constant broadcast from that many values. */
static void test_binary(enum sd_binop op, int n, int ch, int hw, int kc, int k_first)
{
	char name[96];
	snprintf(name, sizeof(name), "%s n%d c%d hw%d %s%s", binop_names[op], n, ch, hw,
	         kc == 0 ? "act-act" : kc == 1 ? "scalar" : "per-channel",
	         kc && k_first ? " const-first" : "");
	const size_t count = (size_t)n * ch * hw, nk = kc ? (size_t)kc : 1;
	struct bin_ctx c = { n, ch, hw, kc, k_first, op, falloc(count), kc ? NULL : falloc(count),
		             falloc(nk), falloc(count), falloc(count) };
	const int smooth = op == SD_BIN_DIV;
	fill_grid(c.a, count, 2);
	if (c.b)
		fill_grid(c.b, count, 2);
	fill_grid(c.k, nk, 2);
	fill_grid(c.g, count, 1);
	/* The divisor away from zero. */
	if (smooth) {
		float *div = kc ? (k_first ? c.a : c.k) : c.b;
		size_t nd = kc && !k_first ? nk : count;
		for (size_t i = 0; i < nd; i++)
			div[i] = (div[i] < 0 ? -1.0f : 1.0f) * (0.5f + fabsf(div[i]) / 2.0f);
	}
	float *da = falloc(count), *db = falloc(count), *dk = falloc(nk);
	fill_nan(da, count);
	fill_nan(db, count);
	bin_loss(&c);
	struct case_ops ops = { bin_loss, &c };
	const float eps = smooth ? EPS_SMOOTH : EPS_GRID;
	if (c.b) {
		sd_binary_backward(da, db, c.g, c.a, c.b, count, op);
		check_grad(name, "a", c.a, count, da, &ops, eps);
		check_grad(name, "b", c.b, count, db, &ops, eps);
		/* The same activation on both sides (x op x): the sum of both. */
		float *sa = falloc(count), *sb = falloc(count), *sum = falloc(count), *b = c.b;
		c.b = c.a;
		sd_binary_backward(sa, sb, c.g, c.a, c.a, count, op);
		for (size_t i = 0; i < count; i++)
			sum[i] = sa[i] + sb[i];
		if (op != SD_BIN_SUB && op != SD_BIN_DIV)   /* x - x, x / x: constant */
			check_grad(name, "x(x op x)", c.a, count, sum, &ops, eps);
		free(sa), free(sb), free(sum), free(b);
	} else {
		sd_binary_const_backward(da, dk, c.g, c.a, c.k, kc, n, ch, hw, op, k_first);
		check_grad(name, "x", c.a, count, da, &ops, eps);
		check_grad(name, "k", c.k, nk, dk, &ops, eps);
		/* dk accumulates; dx = NULL leaves it the same. */
		float *k0 = falloc(nk), *k2 = falloc(nk);
		fill_normal(k0, nk);
		memcpy(k2, k0, nk * sizeof(float));
		sd_binary_const_backward(NULL, k2, c.g, c.a, c.k, kc, n, ch, hw, op, k_first);
		sd_binary_const_backward(da, k2, c.g, c.a, c.k, kc, n, ch, hw, op, k_first);
		check_accumulates(name, "k", k0, dk, k2, nk);
		free(k0), free(k2);
	}
	free(c.a), free(c.k), free(c.y), free(c.g), free(da), free(db), free(dk);
}

/* --------------------------------------------------------------- dropout */

struct drop_ctx {
	int n;
	size_t per;
	float p;
	float *x, *y, *g;
	uint8_t *mask;
};

static double drop_loss(void *p)
{
	struct drop_ctx *c = p;
	/* The same seed every call: the same mask, so L is linear in x. */
	sd_dropout_forward(c->y, c->mask, c->x, c->n, c->per, c->p, 99, 5);
	return dot_f64(c->y, c->g, (size_t)c->n * c->per);
}

static void test_dropout(int n, size_t per, float p)
{
	char name[96];
	snprintf(name, sizeof(name), "dropout n%d per%zu p%g", n, per, (double)p);
	const size_t count = (size_t)n * per;
	struct drop_ctx c = { n, per, p, falloc(count), falloc(count), falloc(count),
		              malloc(count) };
	if (!c.mask)
		exit(1);
	fill_grid(c.x, count, 2);
	fill_grid(c.g, count, 1);
	float *dx = falloc(count);
	fill_nan(dx, count);
	drop_loss(&c);
	sd_dropout_backward(dx, c.g, c.mask, count, p);
	struct case_ops ops = { drop_loss, &c };
	/* 1 / (1 - p) is exact on the grid only for p = 0.5. */
	check_grad(name, "x", c.x, count, dx, &ops, p == 0.5f ? EPS_GRID : EPS_SMOOTH);
	float *inplace = falloc(count);
	memcpy(inplace, c.g, sizeof(float) * count);
	sd_dropout_backward(inplace, inplace, c.mask, count, p);
	check_same(name, "in-place backward", dx, inplace, count);
	free(inplace), free(dx);
	free(c.x), free(c.y), free(c.g), free(c.mask);
}

/* -------------------------------------------------------- softmax + xent */

struct xent_ctx {
	int n, classes;
	float scale;
	float *logits, *probs;
	uint8_t *labels;
};

static double xent_loss(void *p)
{
	struct xent_ctx *c = p;
	return c->scale * sd_softmax_xent_forward(c->probs, NULL, c->logits, c->labels, c->n,
	                                          c->classes);
}

static void test_xent(int n, int classes, float spread)
{
	char name[96];
	snprintf(name, sizeof(name), "softmax-xent n%d classes%d spread%g", n, classes,
	         (double)spread);
	struct xent_ctx c = { n, classes, 1.0f / (float)n, falloc((size_t)n * classes),
		              falloc((size_t)n * classes), malloc((size_t)n) };
	if (!c.labels)
		exit(1);
	fill_normal(c.logits, (size_t)n * classes);
	for (size_t i = 0; i < (size_t)n * classes; i++)
		c.logits[i] *= spread;
	for (int i = 0; i < n; i++)
		c.labels[i] = (uint8_t)sd_rng_below(&rng, (uint32_t)classes);
	float *d = falloc((size_t)n * classes);
	fill_nan(d, (size_t)n * classes);
	xent_loss(&c);
	sd_softmax_xent_backward(d, c.probs, c.labels, n, classes, c.scale);
	struct case_ops ops = { xent_loss, &c };
	check_grad(name, "logits", c.logits, (size_t)n * classes, d, &ops, EPS_SMOOTH);
	free(c.logits), free(c.probs), free(c.labels), free(d);
}

int main(int argc, char **argv)
{
	/* The same OpenBLAS kernel as the worker runs (engine/blas.h), so the
	 * results checked here are those training gets. */
	sd_blas_select_kernel(argv);
	(void)argc;
	/* oneDNN's direct kernels only: its Winograd ones (engine/conv-dnnl.c)
	 * transform through fractions like 1/6 that are not on the grid, so
	 * their forward is not exact there and the finite difference of L
	 * carries their rounding (~5e-4 of a small gradient) - the grid
	 * argument above needs exact sums.  The gradient formulas are the same
	 * for both kernels; Winograd's rounding is checked against im2col on
	 * whole ResNets in test-conv-paths. */
	setenv("SPOTDECK_WINOGRAD", "0", 1);
	sd_rng_seed(&rng, 20240601, 7);
	printf("gradient check: error = |a-n| / max(%g, |a|+|n|) must be <= %g\n", FLOOR, TOL);
	const char *ver = sd_conv2d_onednn_version();
	have_onednn = ver != NULL;
	printf("convolution paths: im2col%s%s\n", ver ? " and oneDNN " : " only (no oneDNN in this build)",
	       ver ? ver : "");

	test_linear(3, 7, 5, 1);
	test_linear(4, 9, 6, 0);
	test_linear(1, 1, 1, 1);

	/* conv2d: kernel 1/3/5, stride 1/2, padding 0/1/2, odd and non-square
	 * planes, a single sample (the one-sample paths), with and without bias. */
	test_conv(2, 3, 7, 7, 4, 1, 1, 0, 1);
	test_conv(1, 3, 5, 6, 4, 1, 1, 0, 1);
	test_conv(2, 3, 7, 7, 4, 1, 2, 0, 1);
	test_conv(2, 3, 7, 7, 4, 3, 1, 1, 1);
	test_conv(2, 3, 8, 8, 4, 3, 2, 1, 1);
	test_conv(2, 3, 7, 9, 4, 3, 2, 1, 0);
	test_conv(2, 2, 6, 6, 3, 3, 1, 0, 1);
	test_conv(2, 2, 7, 7, 3, 3, 2, 0, 1);
	test_conv(2, 3, 7, 7, 4, 5, 1, 2, 1);
	test_conv(1, 3, 6, 5, 4, 5, 1, 2, 0);
	test_conv(2, 3, 9, 9, 4, 5, 2, 2, 1);
	test_conv(2, 2, 7, 7, 3, 5, 1, 0, 1);
	test_conv(2, 2, 4, 4, 3, 5, 1, 1, 1);  /* kernel larger than the plane */
	test_conv(2, 2, 3, 3, 2, 3, 3, 2, 1);  /* stride larger than the kernel */
	/* Big enough per sample that the batch is split into several GEMM
	 * chunks, the last one a single sample (SD_CONV_CHUNK_FLOATS in
	 * engine/layers.c); checked at random elements. */
	test_conv(3, 16, 32, 32, 8, 5, 1, 2, 1);
	/* Every convolution of resnet20/32 (no bias: batch-norm follows) and
	 * of cnn (with bias). */
	test_conv_model(3, 32, 16, 3, 1, 1, 0);
	test_conv_model(16, 32, 16, 3, 1, 1, 0);
	test_conv_model(16, 32, 32, 3, 2, 1, 0);
	test_conv_model(32, 16, 32, 3, 1, 1, 0);
	test_conv_model(32, 16, 64, 3, 2, 1, 0);
	test_conv_model(64, 8, 64, 3, 1, 1, 0);
	test_conv_model(1, 28, 32, 5, 1, 2, 1);
	test_conv_model(32, 14, 64, 5, 1, 2, 1);

	test_batchnorm(4, 3, 5);
	test_batchnorm(8, 4, 1);
	test_batchnorm(2, 2, 9);
	/* The fused batch-norm and the shortcut of the channel-blocked ResNets,
	 * in NCHW and both block sizes. */
	for (int blk = 1; blk <= 16; blk = blk == 1 ? 8 : 2 * blk) {
		test_bn_act(3, 16, 5, blk, 1);
		test_bn_act(2, 32, 4, blk, 0);
		test_shortcut(2, 32, 3, 3, 16, 2, blk);
		test_shortcut(2, 16, 4, 4, 16, 1, blk);
	}

	test_relu(1000);
	test_act(SD_ACT_LEAKY_RELU, "leaky relu 0.125", 0.125f, 0, 1000);
	test_act(SD_ACT_SIGMOID, "sigmoid", 0, 0, 1000);
	test_act(SD_ACT_TANH, "tanh", 0, 0, 1000);
	test_act(SD_ACT_CLIP, "clip [0, 1.5]", 0.0f, 1.5f, 1000);

	test_pool(1, 2, 3, 6, 6, 2, 2);
	test_pool(1, 2, 3, 7, 7, 2, 2);   /* odd plane: last row/column unused */
	test_pool(1, 2, 2, 7, 7, 3, 2);   /* overlapping windows */
	test_pool(1, 1, 2, 5, 6, 2, 1);
	test_pool_pad(1, 2, 3, 8, 8, 3, 2, 1);   /* ResNet-18's stem pooling */
	test_pool_pad(1, 1, 2, 5, 7, 2, 1, 1);
	test_pool(0, 2, 3, 6, 6, 2, 2);
	test_pool(0, 2, 2, 7, 7, 3, 1);   /* overlapping windows */
	test_pool(0, 2, 3, 5, 5, 2, 2);
	test_pool(0, 3, 4, 8, 8, 8, 1);   /* global average pooling */

	/* Padded average pooling, both divisors: PyTorch's AvgPool2d(3, 1, 1)
	 * and AvgPool2d(2, 2, 1), odd planes. */
	for (int cp = 0; cp <= 1; cp++) {
		test_avgpool_pad(2, 3, 6, 6, 3, 1, 1, cp);
		test_avgpool_pad(2, 2, 7, 5, 2, 2, 1, cp);
		test_avgpool_pad(1, 2, 5, 5, 5, 2, 2, cp);
	}

	/* General convolutions: depthwise, grouped, dilated, rectangular
	 * kernels and strides, asymmetric pads, and the plain case (which
	 * the fast path runs in models) for the definition check. */
	test_gconv(2, 4, 6, 6, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 4, 1);   /* depthwise */
	test_gconv(2, 4, 7, 7, 8, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 4, 0);   /* depthwise x2, strided */
	test_gconv(2, 4, 6, 5, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2, 1);   /* 2 groups */
	test_gconv(2, 3, 9, 9, 4, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 1, 1);   /* dilation 2 */
	test_gconv(1, 2, 8, 7, 3, 3, 2, 1, 2, 2, 1, 1, 0, 2, 1, 1, 1);   /* all of it */
	test_gconv(2, 3, 5, 6, 4, 1, 3, 1, 1, 1, 1, 0, 1, 0, 1, 1, 0);   /* 1x3 */
	test_gconv(2, 3, 6, 6, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1);   /* plain */

	/* Arithmetic: each op between two activations, and with a scalar and
	 * a per-channel constant on either side. */
	for (int op = SD_BIN_ADD; op <= SD_BIN_DIV; op++) {
		test_binary((enum sd_binop)op, 2, 3, 5, 0, 0);
		for (int kf = 0; kf <= 1; kf++) {
			test_binary((enum sd_binop)op, 2, 3, 5, 1, kf);
			test_binary((enum sd_binop)op, 2, 3, 5, 3, kf);
		}
	}

	test_dropout(3, 200, 0.5f);
	test_dropout(2, 333, 0.3f);

	test_xent(4, 10, 1.0f);
	test_xent(3, 7, 5.0f);

	/* A oneDNN call that fails quietly falls back to im2col: right
	 * results, so only this count shows it. */
	check_report(sd_conv2d_fallbacks() == 0, "oneDNN calls that failed and fell back to im2col: %lu",
	             sd_conv2d_fallbacks());
	return check_exit("test-gradcheck");
}
