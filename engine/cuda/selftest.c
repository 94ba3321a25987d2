/* engine/cuda/selftest.c - single-layer entry points over host arrays
 * (struct sd_backend_layer_ops, engine/backend-plugin.h) for tests/gpu.
 *
 * Each call copies its inputs to fresh device buffers, runs the same dnn.c
 * function or kernel the executor runs for that layer, copies the outputs
 * back and frees everything: slow, but it tests exactly the production code
 * path on the shapes the test chooses.  Calls use one lazily created stream
 * and handle set on the calling thread's current device.
 */
#include "config.h"

#include "engine/cuda/cuda-internal.h"
#include "src/base/errors.h"
#include "engine/model-graph.h"

#include <stdlib.h>
#include <string.h>

static struct cu_env tenv;
static int tenv_ready;

/* Device buffers of one call, freed together. */
struct bufs {
	void *p[16];
	int n;
};

static void bufs_free(struct bufs *b)
{
	for (int i = 0; i < b->n; i++)
		cudaFree(b->p[i]);
	b->n = 0;
}

static int env_get(char **why)
{
	if (tenv_ready)
		return 0;
	cudaStream_t st;
	CU_TRY(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
	/* Ones for bias gradients of up to 1 << 16 rows. */
	if (cu_env_init(&tenv, st, 64u << 20, 1 << 16, why) < 0) {
		cu_env_fini(&tenv);
		cudaStreamDestroy(st);
		return -1;
	}
	tenv_ready = 1;
	return 0;
}

/* A device copy of `bytes` bytes at h, or NaN-filled when h is NULL. */
static float *dev(struct bufs *b, const void *h, size_t bytes, char **why)
{
	void *d = NULL;
	if (b->n == (int)(sizeof b->p / sizeof b->p[0])) {
		sd_why(why, "selftest: too many buffers");
		return NULL;
	}
	if (cudaMalloc(&d, bytes ? bytes : 4) != cudaSuccess) {
		cu_fail_cuda(why, "cudaMalloc", cudaGetLastError());
		return NULL;
	}
	b->p[b->n++] = d;
	/* Outputs start as NaN (all bits set), so an element the layer forgot
	 * to write shows in the caller's comparison.  On the layer's stream:
	 * it does not wait for the legacy default stream (non-blocking), and a
	 * plain cudaMemcpy from pageable memory may return before its DMA is
	 * done. */
	cudaError_t e = h ? cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, tenv.stream)
	                  : cudaMemsetAsync(d, 0xff, bytes ? bytes : 4, tenv.stream);
	if (e != cudaSuccess) {
		cu_fail_cuda(why, h ? "cudaMemcpy" : "cudaMemset", e);
		return NULL;
	}
	return d;
}

static int back(void *h, const void *d, size_t bytes, char **why)
{
	CU_TRY(cudaMemcpyAsync(h, d, bytes, cudaMemcpyDeviceToHost, tenv.stream));
	CU_TRY(cudaStreamSynchronize(tenv.stream));
	return 0;
}

#define F(n) ((size_t)(n) * sizeof(float))
#define BEGIN struct bufs B = { .n = 0 }; if (env_get(why) < 0) return -1; int rc = -1
#define END out: bufs_free(&B); return rc
#define NEED(ptr) do { if (!(ptr)) goto out; } while (0)
#define RUN(call) do { if ((call) < 0) goto out; } while (0)
#define KERNEL(call) do { cudaError_t e_ = (call); \
	if (e_ != cudaSuccess) { cu_fail_cuda(why, #call, e_); goto out; } } while (0)

static int t_linear_forward(float *y, const float *x, const float *w, const float *b, int n,
                            int in, int out, char **why)
{
	BEGIN;
	float *dx = dev(&B, x, F((size_t)n * in), why), *dw = NULL, *db = NULL, *dy = NULL;
	NEED(dx);
	NEED(dw = dev(&B, w, F((size_t)out * in), why));
	if (b)
		NEED(db = dev(&B, b, F(out), why));
	NEED(dy = dev(&B, NULL, F((size_t)n * out), why));
	RUN(cu_linear_forward(&tenv, dy, dx, dw, db, n, in, out, why));
	RUN(back(y, dy, F((size_t)n * out), why));
	rc = 0;
	END;
}

static int t_linear_backward(float *dx, float *dw, float *db, const float *dy, const float *x,
                             const float *w, int n, int in, int out, int acc_dx, char **why)
{
	BEGIN;
	float *ddx = NULL, *ddw, *ddb = NULL, *ddy, *dxx, *dww;
	NEED(ddy = dev(&B, dy, F((size_t)n * out), why));
	NEED(dxx = dev(&B, x, F((size_t)n * in), why));
	NEED(dww = dev(&B, w, F((size_t)out * in), why));
	NEED(ddw = dev(&B, NULL, F((size_t)out * in), why));
	if (db)
		NEED(ddb = dev(&B, NULL, F(out), why));
	if (dx)
		NEED(ddx = dev(&B, acc_dx ? dx : NULL, F((size_t)n * in), why));
	RUN(cu_linear_backward(&tenv, ddx, acc_dx, ddw, ddb, ddy, dxx, dww, n, in, out, why));
	RUN(back(dw, ddw, F((size_t)out * in), why));
	if (db)
		RUN(back(db, ddb, F(out), why));
	if (dx)
		RUN(back(dx, ddx, F((size_t)n * in), why));
	rc = 0;
	END;
}

static size_t xin(const struct sd_conv2d_shape *s) { return (size_t)s->n * s->c * s->h * s->w; }
static size_t yout(const struct sd_conv2d_shape *s) { return (size_t)s->n * s->k * s->oh * s->ow; }
static size_t wsz(const struct sd_conv2d_shape *s) { return (size_t)s->k * s->c * s->r * s->r; }

static int t_conv2d_forward(float *y, const float *x, const float *w, const float *b,
                            const struct sd_conv2d_shape *s, char **why)
{
	BEGIN;
	struct cu_conv c;
	memset(&c, 0, sizeof c);
	float *dx, *dw, *db = NULL, *dy;
	NEED(dx = dev(&B, x, F(xin(s)), why));
	NEED(dw = dev(&B, w, F(wsz(s)), why));
	if (b)
		NEED(db = dev(&B, b, F(s->k), why));
	NEED(dy = dev(&B, NULL, F(yout(s)), why));
	RUN(cu_conv_init(&c, &tenv, s, b != NULL, 0, dx, dw, dy, NULL, NULL, NULL, why));
	RUN(cu_conv_forward(&tenv, &c, dy, dx, dw, db, why));
	RUN(back(y, dy, F(yout(s)), why));
	rc = 0;
out:
	cu_conv_fini(&c);
	bufs_free(&B);
	return rc;
}

static int t_conv2d_backward(float *dx, float *dw, float *db, const float *dy, const float *x,
                             const float *w, const struct sd_conv2d_shape *s, int acc_dx,
                             char **why)
{
	BEGIN;
	struct cu_conv c;
	memset(&c, 0, sizeof c);
	float *ddx = NULL, *ddw, *ddb = NULL, *ddy, *dxx, *dww;
	NEED(ddy = dev(&B, dy, F(yout(s)), why));
	NEED(dxx = dev(&B, x, F(xin(s)), why));
	NEED(dww = dev(&B, w, F(wsz(s)), why));
	NEED(ddw = dev(&B, NULL, F(wsz(s)), why));
	if (db)
		NEED(ddb = dev(&B, NULL, F(s->k), why));
	if (dx)
		NEED(ddx = dev(&B, acc_dx ? dx : NULL, F(xin(s)), why));
	RUN(cu_conv_init(&c, &tenv, s, db != NULL, 1, dxx, dww, NULL, ddy, ddx, ddw, why));
	RUN(cu_conv_backward(&tenv, &c, ddx, acc_dx, ddw, ddb, ddy, dxx, dww, why));
	RUN(back(dw, ddw, F(wsz(s)), why));
	if (db)
		RUN(back(db, ddb, F(s->k), why));
	if (dx)
		RUN(back(dx, ddx, F(xin(s)), why));
	rc = 0;
out:
	cu_conv_fini(&c);
	bufs_free(&B);
	return rc;
}

static int t_bn_forward_train(float *y, float *mean, float *invstd, float *running_mean,
                              float *running_var, const float *x, const float *gamma,
                              const float *beta, int n, int c, int hw, char **why)
{
	BEGIN;
	struct cu_bn bn;
	memset(&bn, 0, sizeof bn);
	size_t cnt = (size_t)n * c * hw;
	float *dx, *dy, *dm, *ds, *drm, *drv, *dg, *db;
	NEED(dx = dev(&B, x, F(cnt), why));
	NEED(dy = dev(&B, NULL, F(cnt), why));
	NEED(dm = dev(&B, NULL, F(c), why));
	NEED(ds = dev(&B, NULL, F(c), why));
	NEED(drm = dev(&B, running_mean, F(c), why));
	NEED(drv = dev(&B, running_var, F(c), why));
	NEED(dg = dev(&B, gamma, F(c), why));
	NEED(db = dev(&B, beta, F(c), why));
	RUN(cu_bn_init(&bn, n, c, hw, SD_BN_MOMENTUM, SD_BN_EPS, why));
	RUN(cu_bn_forward_train(&tenv, &bn, dy, dm, ds, drm, drv, dx, dg, db, why));
	RUN(back(y, dy, F(cnt), why));
	RUN(back(mean, dm, F(c), why));
	RUN(back(invstd, ds, F(c), why));
	RUN(back(running_mean, drm, F(c), why));
	RUN(back(running_var, drv, F(c), why));
	rc = 0;
out:
	cu_bn_fini(&bn);
	bufs_free(&B);
	return rc;
}

static int t_bn_forward_eval(float *y, const float *x, const float *gamma, const float *beta,
                             const float *running_mean, const float *running_var, int n, int c,
                             int hw, char **why)
{
	BEGIN;
	struct cu_bn bn;
	memset(&bn, 0, sizeof bn);
	size_t cnt = (size_t)n * c * hw;
	float *dx, *dy, *drm, *drv, *dg, *db;
	NEED(dx = dev(&B, x, F(cnt), why));
	NEED(dy = dev(&B, NULL, F(cnt), why));
	NEED(drm = dev(&B, running_mean, F(c), why));
	NEED(drv = dev(&B, running_var, F(c), why));
	NEED(dg = dev(&B, gamma, F(c), why));
	NEED(db = dev(&B, beta, F(c), why));
	RUN(cu_bn_init(&bn, n, c, hw, SD_BN_MOMENTUM, SD_BN_EPS, why));
	RUN(cu_bn_forward_eval(&tenv, &bn, dy, dx, dg, db, drm, drv, why));
	RUN(back(y, dy, F(cnt), why));
	rc = 0;
out:
	cu_bn_fini(&bn);
	bufs_free(&B);
	return rc;
}

static int t_bn_backward(float *dx, float *dgamma, float *dbeta, const float *dy, const float *x,
                         const float *mean, const float *invstd, const float *gamma, int n,
                         int c, int hw, int acc_dx, char **why)
{
	BEGIN;
	struct cu_bn bn;
	memset(&bn, 0, sizeof bn);
	size_t cnt = (size_t)n * c * hw;
	float *ddx, *ddy, *dxx, *dm, *ds, *dg, *ddg, *ddb;
	NEED(ddx = dev(&B, acc_dx ? dx : NULL, F(cnt), why));
	NEED(ddy = dev(&B, dy, F(cnt), why));
	NEED(dxx = dev(&B, x, F(cnt), why));
	NEED(dm = dev(&B, mean, F(c), why));
	NEED(ds = dev(&B, invstd, F(c), why));
	NEED(dg = dev(&B, gamma, F(c), why));
	NEED(ddg = dev(&B, NULL, F(c), why));
	NEED(ddb = dev(&B, NULL, F(c), why));
	RUN(cu_bn_init(&bn, n, c, hw, SD_BN_MOMENTUM, SD_BN_EPS, why));
	RUN(cu_bn_backward(&tenv, &bn, ddx, acc_dx, ddg, ddb, ddy, dxx, dm, ds, dg, why));
	RUN(back(dx, ddx, F(cnt), why));
	RUN(back(dgamma, ddg, F(c), why));
	RUN(back(dbeta, ddb, F(c), why));
	rc = 0;
out:
	cu_bn_fini(&bn);
	bufs_free(&B);
	return rc;
}

static int t_relu_forward(float *y, const float *x, size_t count, char **why)
{
	BEGIN;
	float *d;
	NEED(d = dev(&B, x, F(count), why));
	KERNEL(cu_relu_forward(tenv.stream, d, d, count));
	RUN(back(y, d, F(count), why));
	rc = 0;
	END;
}

static int t_relu_backward(float *dx, const float *dy, const float *y, size_t count, char **why)
{
	BEGIN;
	float *dd, *dyy;
	NEED(dd = dev(&B, dy, F(count), why));
	NEED(dyy = dev(&B, y, F(count), why));
	KERNEL(cu_relu_backward(tenv.stream, dd, dd, dyy, count));
	RUN(back(dx, dd, F(count), why));
	rc = 0;
	END;
}

static int pool_fwd(int max, float *y, const float *x, int n, int c, int h, int w, int k, int s,
                    char **why)
{
	BEGIN;
	struct cu_pool p;
	memset(&p, 0, sizeof p);
	int oh = (h - k) / s + 1, ow = (w - k) / s + 1;
	size_t xi = (size_t)n * c * h * w, yo = (size_t)n * c * oh * ow;
	float *dx, *dy;
	NEED(dx = dev(&B, x, F(xi), why));
	NEED(dy = dev(&B, NULL, F(yo), why));
	RUN(cu_pool_init(&p, max, n, c, h, w, k, s, why));
	RUN(cu_pool_forward(&tenv, &p, dy, dx, why));
	RUN(back(y, dy, F(yo), why));
	rc = 0;
out:
	cu_pool_fini(&p);
	bufs_free(&B);
	return rc;
}

static int pool_bwd(int max, float *dx, const float *dy, const float *x, const float *y, int n,
                    int c, int h, int w, int k, int s, int acc_dx, char **why)
{
	BEGIN;
	struct cu_pool p;
	memset(&p, 0, sizeof p);
	int oh = (h - k) / s + 1, ow = (w - k) / s + 1;
	size_t xi = (size_t)n * c * h * w, yo = (size_t)n * c * oh * ow;
	float *ddx, *ddy, *dxx, *dyy;
	NEED(ddx = dev(&B, acc_dx ? dx : NULL, F(xi), why));
	NEED(ddy = dev(&B, dy, F(yo), why));
	NEED(dxx = dev(&B, x, F(xi), why));
	NEED(dyy = dev(&B, y, F(yo), why));
	RUN(cu_pool_init(&p, max, n, c, h, w, k, s, why));
	RUN(cu_pool_backward(&tenv, &p, ddx, acc_dx, ddy, dxx, dyy, why));
	RUN(back(dx, ddx, F(xi), why));
	rc = 0;
out:
	cu_pool_fini(&p);
	bufs_free(&B);
	return rc;
}

static int t_maxpool_forward(float *y, const float *x, int n, int c, int h, int w, int k, int s,
                             char **why)
{
	return pool_fwd(1, y, x, n, c, h, w, k, s, why);
}

static int t_maxpool_backward(float *dx, const float *dy, const float *x, const float *y, int n,
                              int c, int h, int w, int k, int s, int acc_dx, char **why)
{
	return pool_bwd(1, dx, dy, x, y, n, c, h, w, k, s, acc_dx, why);
}

static int t_avgpool_forward(float *y, const float *x, int n, int c, int h, int w, int k, int s,
                             char **why)
{
	return pool_fwd(0, y, x, n, c, h, w, k, s, why);
}

static int t_avgpool_backward(float *dx, const float *dy, const float *x, const float *y, int n,
                              int c, int h, int w, int k, int s, int acc_dx, char **why)
{
	return pool_bwd(0, dx, dy, x, y, n, c, h, w, k, s, acc_dx, why);
}

static int t_shortcut_forward(float *y, const float *a, const float *b, int n, int c, int h,
                              int w, int cb, int s, char **why)
{
	BEGIN;
	size_t ca = (size_t)n * c * h * w, cbn = (size_t)n * cb * h * s * w * s;
	float *dy, *da, *db;
	NEED(da = dev(&B, a, F(ca), why));
	NEED(db = dev(&B, b, F(cbn), why));
	NEED(dy = dev(&B, NULL, F(ca), why));
	KERNEL(cu_shortcut_forward(tenv.stream, dy, da, db, n, c, h, w, cb, s));
	RUN(back(y, dy, F(ca), why));
	rc = 0;
	END;
}

/* As the executor: the main branch copies (or adds) dy, the shortcut
 * scatters it back. */
static int t_shortcut_backward(float *da, float *db, const float *dy, int n, int c, int h, int w,
                               int cb, int s, int acc_da, int acc_db, char **why)
{
	BEGIN;
	size_t ca = (size_t)n * c * h * w, cbn = (size_t)n * cb * h * s * w * s;
	float *ddy, *dda, *ddb;
	NEED(ddy = dev(&B, dy, F(ca), why));
	NEED(dda = dev(&B, acc_da ? da : NULL, F(ca), why));
	NEED(ddb = dev(&B, acc_db ? db : NULL, F(cbn), why));
	if (acc_da)
		KERNEL(cu_add_into(tenv.stream, dda, ddy, ca));
	else
		KERNEL(cudaMemcpyAsync(dda, ddy, F(ca), cudaMemcpyDeviceToDevice, tenv.stream));
	KERNEL(cu_shortcut_backward(tenv.stream, ddb, ddy, n, c, h, w, cb, s, acc_db));
	RUN(back(da, dda, F(ca), why));
	RUN(back(db, ddb, F(cbn), why));
	rc = 0;
	END;
}

static int t_softmax_xent(float *dlogits, double *loss_sum, int *correct, const float *logits,
                          const uint8_t *labels, int n, int classes, float scale, char **why)
{
	BEGIN;
	size_t cnt = (size_t)n * classes;
	float *dl, *dd;
	uint8_t *dlab;
	double *rl;
	int *rc_;
	struct cu_metrics *dm, hm;
	NEED(dl = dev(&B, logits, F(cnt), why));
	NEED(dd = dev(&B, NULL, F(cnt), why));
	NEED(dlab = (uint8_t *)dev(&B, labels, (size_t)n, why));
	NEED(rl = (double *)dev(&B, NULL, (size_t)n * sizeof(double), why));
	NEED(rc_ = (int *)dev(&B, NULL, (size_t)n * sizeof(int), why));
	NEED(dm = (struct cu_metrics *)dev(&B, NULL, sizeof *dm, why));
	KERNEL(cu_softmax_xent(tenv.stream, dd, rl, rc_, dl, dlab, n, classes, scale));
	KERNEL(cu_metrics_reduce(tenv.stream, dm, rl, rc_, n));
	RUN(back(dlogits, dd, F(cnt), why));
	RUN(back(&hm, dm, sizeof hm, why));
	*loss_sum = hm.loss_sum;
	*correct = hm.correct;
	rc = 0;
	END;
}

static int t_sgd_step(float *params, float *velocity, const float *grads, size_t count, float lr,
                      float momentum, float weight_decay, char **why)
{
	BEGIN;
	float *dp, *dv, *dg;
	NEED(dp = dev(&B, params, F(count), why));
	NEED(dv = dev(&B, velocity, F(count), why));
	NEED(dg = dev(&B, grads, F(count), why));
	KERNEL(cu_sgd(tenv.stream, dp, dv, dg, count, lr, momentum, weight_decay));
	RUN(back(params, dp, F(count), why));
	RUN(back(velocity, dv, F(count), why));
	rc = 0;
	END;
}

static int t_adamw_step(float *params, float *m, float *v, const float *grads, size_t count,
                        const struct sd_adamw_scalars *s, char **why)
{
	BEGIN;
	float *dp, *dm, *dv, *dg;
	NEED(dp = dev(&B, params, F(count), why));
	NEED(dm = dev(&B, m, F(count), why));
	NEED(dv = dev(&B, v, F(count), why));
	NEED(dg = dev(&B, grads, F(count), why));
	KERNEL(cu_adamw(tenv.stream, dp, dm, dv, dg, count, *s));
	RUN(back(params, dp, F(count), why));
	RUN(back(m, dm, F(count), why));
	RUN(back(v, dv, F(count), why));
	rc = 0;
	END;
}

static int t_sumsq(const float *x, size_t count, double *out, char **why)
{
	BEGIN;
	size_t nb = (count + SD_SUMSQ_BLOCK - 1) / SD_SUMSQ_BLOCK;
	float *dx;
	double *dsum;
	NEED(dx = dev(&B, x, F(count), why));
	NEED(dsum = (double *)dev(&B, NULL, (1 + nb) * sizeof(double), why));
	KERNEL(cu_sumsq(tenv.stream, dsum, dsum + 1, dx, count));
	RUN(back(out, dsum, sizeof(double), why));
	rc = 0;
	END;
}

const struct sd_backend_layer_ops cu_layer_ops = {
	.linear_forward = t_linear_forward,
	.linear_backward = t_linear_backward,
	.conv2d_forward = t_conv2d_forward,
	.conv2d_backward = t_conv2d_backward,
	.bn_forward_train = t_bn_forward_train,
	.bn_forward_eval = t_bn_forward_eval,
	.bn_backward = t_bn_backward,
	.relu_forward = t_relu_forward,
	.relu_backward = t_relu_backward,
	.maxpool_forward = t_maxpool_forward,
	.maxpool_backward = t_maxpool_backward,
	.avgpool_forward = t_avgpool_forward,
	.avgpool_backward = t_avgpool_backward,
	.shortcut_forward = t_shortcut_forward,
	.shortcut_backward = t_shortcut_backward,
	.softmax_xent = t_softmax_xent,
	.sgd_step = t_sgd_step,
	.adamw_step = t_adamw_step,
	.sumsq = t_sumsq,
};
