/* tests/gpu/fake/fake-plugin.c - a stand-in for the CUDA backend plugin
 * (engine/backend-plugin.h) whose "device" is this CPU: the device model is
 * a second host copy of the model run by engine/layers.c, the single-layer
 * entry points call the CPU layers with the plugin's conventions (parameter
 * gradients overwritten, dx += on request).  With tests/gpu/fake's libcuda,
 * it lets tests/engine/test-gpu-run.sh drive tests/gpu/run.sh, gpu-check and the
 * elastic workers' device paths end to end on a host without a GPU.  It
 * computes exactly what the CPU does, so every comparison it takes part in
 * passes with zero error: it checks the scripts and the plumbing, never a GPU. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend-plugin.h"
#include "src/base/errors.h"
#include "engine/layers.h"
#include "engine/model-graph.h"
#include "engine/optim.h"
#include "tests/gpu/fake/hostdev.h"

static const char *versions(void) { return "fake CUDA stand-in (CPU), no NCCL"; }

static int device_count(int *count, char **why)
{
	const char *n = getenv("SD_FAKE_GPUS");
	*count = n ? atoi(n) : 1;
	return 0;
}

static int device_open(int index, struct sd_backend_device *info, char **why)
{
	memset(info, 0, sizeof *info);
	info->index = index;
	snprintf(info->name, sizeof info->name, "NVIDIA FK100 (fake %d)", index);
	snprintf(info->uuid, sizeof info->uuid, "GPU-fake-%d", index);
	info->memory_gib = 1;
	info->cc_major = 9;
	info->multiprocessors = 1;
	return 0;
}

/* A train step: the CPU's. */
static int train_batch(struct sd_dev_model *d, const float *x, const uint8_t *y, int n,
                       float scale, double *loss, int *correct, char **why)
{
	return sd_model_train_batch(d->m, x, y, n, scale, loss, correct, why);
}

static int train_indexed(struct sd_dev_model *d, const int32_t *idx, int n, float scale,
                         double *loss_sum, int *correct, char **why)
{
	return hostdev_train_indexed(d, idx, n, scale, loss_sum, correct, why, train_batch);
}

static const char *describe(struct sd_dev_model *d) { return "fake executor (CPU layers)"; }

static void *host_alloc(size_t bytes) { return malloc(bytes ? bytes : 1); }
static void host_free(void *p) { free(p); }

/* ---- single layers: the CPU's, with the plugin's conventions ------------ */

static void add_back(float *dx, const float *old, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dx[i] += old[i];
}

static float *saved(const float *p, size_t n, int want)
{
	if (!want)
		return NULL;
	float *q = malloc(n * sizeof(float));
	memcpy(q, p, n * sizeof(float));
	return q;
}

static int l_linear_forward(float *y, const float *x, const float *w, const float *b, int n,
                            int in, int out, char **why)
{
	sd_linear_forward(y, x, w, b, n, in, out);
	return 0;
}

static int l_linear_backward(float *dx, float *dw, float *db, const float *dy, const float *x,
                             const float *w, int n, int in, int out, int acc, char **why)
{
	float *old = dx ? saved(dx, (size_t)n * in, acc) : NULL;
	memset(dw, 0, (size_t)out * in * sizeof(float));
	if (db)
		memset(db, 0, (size_t)out * sizeof(float));
	sd_linear_backward(dx, dw, db, dy, x, w, n, in, out);
	if (old)
		add_back(dx, old, (size_t)n * in);
	free(old);
	return 0;
}

static int l_conv_forward(float *y, const float *x, const float *w, const float *b,
                          const struct sd_conv2d_shape *s, char **why)
{
	float *ws = malloc((sd_conv2d_workspace_floats(s) + 1) * sizeof(float));
	sd_conv2d_forward(y, x, w, b, s, ws);
	free(ws);
	return 0;
}

static int l_conv_backward(float *dx, float *dw, float *db, const float *dy, const float *x,
                           const float *w, const struct sd_conv2d_shape *s, int acc, char **why)
{
	size_t xn = (size_t)s->n * s->c * s->h * s->w;
	float *old = dx ? saved(dx, xn, acc) : NULL;
	float *ws = malloc((sd_conv2d_workspace_floats(s) + 1) * sizeof(float));
	memset(dw, 0, (size_t)s->k * s->c * s->r * s->r * sizeof(float));
	if (db)
		memset(db, 0, (size_t)s->k * sizeof(float));
	sd_conv2d_backward(dx, dw, db, dy, x, w, s, ws);
	if (old)
		add_back(dx, old, xn);
	free(old);
	free(ws);
	return 0;
}

static int l_bn_train(float *y, float *mean, float *invstd, float *rm, float *rv, const float *x,
                      const float *g, const float *b, int n, int c, int hw, char **why)
{
	sd_batchnorm_forward_train(y, mean, invstd, rm, rv, x, g, b, n, c, hw, SD_BN_MOMENTUM,
	                           SD_BN_EPS);
	return 0;
}

static int l_bn_eval(float *y, const float *x, const float *g, const float *b, const float *rm,
                     const float *rv, int n, int c, int hw, char **why)
{
	sd_batchnorm_forward_eval(y, x, g, b, rm, rv, n, c, hw, SD_BN_EPS);
	return 0;
}

static int l_bn_backward(float *dx, float *dg, float *db, const float *dy, const float *x,
                         const float *mean, const float *invstd, const float *g, int n, int c,
                         int hw, int acc, char **why)
{
	size_t cnt = (size_t)n * c * hw;
	float *old = saved(dx, cnt, acc);
	memset(dg, 0, (size_t)c * sizeof(float));
	memset(db, 0, (size_t)c * sizeof(float));
	sd_batchnorm_backward(dx, dg, db, dy, x, mean, invstd, g, n, c, hw);
	if (old)
		add_back(dx, old, cnt);
	free(old);
	return 0;
}

static int l_relu_forward(float *y, const float *x, size_t count, char **why)
{
	sd_relu_forward(y, x, count);
	return 0;
}

static int l_relu_backward(float *dx, const float *dy, const float *y, size_t count, char **why)
{
	sd_relu_backward(dx, dy, y, count);
	return 0;
}

static int l_max_forward(float *y, const float *x, int n, int c, int h, int w, int k, int s,
                         char **why)
{
	size_t yn = (size_t)n * c * ((h - k) / s + 1) * ((w - k) / s + 1);
	int32_t *arg = malloc(yn * sizeof(int32_t));
	sd_maxpool_forward(y, arg, x, n, c, h, w, k, s);
	free(arg);
	return 0;
}

static int l_max_backward(float *dx, const float *dy, const float *x, const float *y, int n,
                          int c, int h, int w, int k, int s, int acc, char **why)
{
	size_t yn = (size_t)n * c * ((h - k) / s + 1) * ((w - k) / s + 1), xn = (size_t)n * c * h * w;
	int32_t *arg = malloc(yn * sizeof(int32_t));
	float *yy = malloc(yn * sizeof(float)), *old = saved(dx, xn, acc);
	sd_maxpool_forward(yy, arg, x, n, c, h, w, k, s);
	sd_maxpool_backward(dx, dy, arg, n, c, h, w, k, s);
	if (old)
		add_back(dx, old, xn);
	free(old);
	free(yy);
	free(arg);
	return 0;
}

static int l_avg_forward(float *y, const float *x, int n, int c, int h, int w, int k, int s,
                         char **why)
{
	sd_avgpool_forward(y, x, n, c, h, w, k, s);
	return 0;
}

static int l_avg_backward(float *dx, const float *dy, const float *x, const float *y, int n,
                          int c, int h, int w, int k, int s, int acc, char **why)
{
	size_t xn = (size_t)n * c * h * w;
	float *old = saved(dx, xn, acc);
	sd_avgpool_backward(dx, dy, n, c, h, w, k, s);
	if (old)
		add_back(dx, old, xn);
	free(old);
	return 0;
}

static int l_short_forward(float *y, const float *a, const float *b, int n, int c, int h, int w,
                           int cb, int s, char **why)
{
	int hb = h * s, wb = w * s, pad = (c - cb) / 2;
	for (int i = 0; i < n; i++)
		for (int ch = 0; ch < c; ch++)
			for (int yy = 0; yy < h; yy++)
				for (int xx = 0; xx < w; xx++) {
					size_t o = (((size_t)i * c + ch) * h + yy) * w + xx;
					int bc = ch - pad;
					y[o] = bc < 0 || bc >= cb ? a[o]
					       : a[o] + b[(((size_t)i * cb + bc) * hb + yy * s) * wb + xx * s];
				}
	return 0;
}

static int l_short_backward(float *da, float *db, const float *dy, int n, int c, int h, int w,
                            int cb, int s, int acc_a, int acc_b, char **why)
{
	int hb = h * s, wb = w * s, pad = (c - cb) / 2;
	size_t an = (size_t)n * c * h * w, bn = (size_t)n * cb * hb * wb;
	for (size_t i = 0; i < an; i++)
		da[i] = acc_a ? da[i] + dy[i] : dy[i];
	if (!acc_b)
		memset(db, 0, bn * sizeof(float));
	for (int i = 0; i < n; i++)
		for (int bc = 0; bc < cb; bc++)
			for (int yy = 0; yy < h; yy++)
				for (int xx = 0; xx < w; xx++)
					db[(((size_t)i * cb + bc) * hb + yy * s) * wb + xx * s] +=
						dy[(((size_t)i * c + bc + pad) * h + yy) * w + xx];
	return 0;
}

static int l_softmax(float *d, double *loss, int *correct, const float *logits,
                     const uint8_t *labels, int n, int classes, float scale, char **why)
{
	float *p = malloc((size_t)n * classes * sizeof(float));
	*loss = sd_softmax_xent_forward(p, correct, logits, labels, n, classes);
	sd_softmax_xent_backward(d, p, labels, n, classes, scale);
	free(p);
	return 0;
}

static int l_sgd(float *p, float *v, const float *g, size_t n, float lr, float m, float wd,
                 char **why)
{
	sd_sgd_step(p, v, g, n, lr, m, wd);
	return 0;
}

static int l_adamw(float *p, float *m, float *v, const float *g, size_t n,
                   const struct sd_adamw_scalars *s, char **why)
{
	sd_adamw_step(p, m, v, g, n, s);
	return 0;
}

static int l_sumsq(const float *x, size_t n, double *out, char **why)
{
	*out = sd_sumsq(x, n);
	return 0;
}

static const struct sd_backend_layer_ops layers = {
	.linear_forward = l_linear_forward, .linear_backward = l_linear_backward,
	.conv2d_forward = l_conv_forward, .conv2d_backward = l_conv_backward,
	.bn_forward_train = l_bn_train, .bn_forward_eval = l_bn_eval, .bn_backward = l_bn_backward,
	.relu_forward = l_relu_forward, .relu_backward = l_relu_backward,
	.maxpool_forward = l_max_forward, .maxpool_backward = l_max_backward,
	.avgpool_forward = l_avg_forward, .avgpool_backward = l_avg_backward,
	.shortcut_forward = l_short_forward, .shortcut_backward = l_short_backward,
	.softmax_xent = l_softmax, .sgd_step = l_sgd, .adamw_step = l_adamw, .sumsq = l_sumsq,
};

static const struct sd_backend_ops fake_ops = {
	.abi = SD_BACKEND_ABI,
	.model_size = sizeof(struct sd_model),
	.node_size = sizeof(struct node),
	.name = "cuda",
	.versions = versions,
	.device_count = device_count,
	.device_open = device_open,
	.model_create = hostdev_create,
	.model_destroy = hostdev_destroy,
	.model_upload = hostdev_upload,
	.model_download = hostdev_download,
	.model_block = hostdev_block,
	.train_batch = train_batch,
	.dataset_upload = hostdev_dataset_upload,
	.train_indexed = train_indexed,
	.eval_batch = hostdev_eval,
	.sgd_step = hostdev_sgd,
	.adamw_step = hostdev_adamw,
	.grad_sumsq = hostdev_grad_sumsq,
	.grad_scale = hostdev_grad_scale,
	.model_describe = describe,
	.host_alloc = host_alloc,
	.host_free = host_free,
	.layers = &layers,
};

__attribute__((visibility("default"))) const struct sd_backend_ops *sd_backend_plugin_entry(void);

const struct sd_backend_ops *sd_backend_plugin_entry(void)
{
	return &fake_ops;
}
