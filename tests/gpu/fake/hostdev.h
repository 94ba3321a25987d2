/* tests/gpu/fake/hostdev.h - a "device" model that lives in host memory: the
 * executor half of engine/backend.h's model ops, run by the CPU layers, for
 * the two stand-ins that need one (tests/engine/test-backend.c's in-process
 * backend and tests/gpu/fake/fake-plugin.c, the plugin run.sh's self-test
 * loads).  Each includes this once; the functions are static so that each
 * stand-in keeps its own, and unused ones cost nothing.
 *
 * Shapes: blocks are the model's own contiguous buffers (params and grads of
 * nparams floats, buffers of nbuffers) plus a velocity and AdamW's second
 * moment of nparams floats each; the
 * "device-resident" training set is data_n images of c*h*w floats and labels.
 * Allocation failures abort (test code).  Needs src/base/errors.h,
 * engine/model-graph.h and engine/optim.h included first. */
#ifndef SD_TESTS_HOSTDEV_H
#define SD_TESTS_HOSTDEV_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct sd_dev_model {
	float *data;              /* the "device-resident" training set */
	uint8_t *data_labels;
	int data_n;
	struct sd_model *m;       /* the "device" copy: its params, grads, buffers */
	float *velocity;
	float *second;            /* AdamW's second moment */
	int max_batch;
};

/* A model of m's shape, blocks zeroed (create copies no values). */
static inline int hostdev_create(struct sd_dev_model **out, const struct sd_model *m, int max_batch,
                                 char **why)
{
	struct sd_dev_model *d = calloc(1, sizeof *d);
	if (sd_model_create(&d->m, m->name, m->c, m->h, m->w, m->classes, max_batch, why) < 0) {
		free(d);
		return -1;
	}
	memset(d->m->params, 0, d->m->nparams * sizeof(float));
	memset(d->m->buffers, 0, (d->m->nbuffers ? d->m->nbuffers : 1) * sizeof(float));
	d->velocity = calloc(m->nparams ? m->nparams : 1, sizeof(float));
	d->second = calloc(m->nparams ? m->nparams : 1, sizeof(float));
	d->max_batch = max_batch;
	*out = d;
	return 0;
}

static inline void hostdev_destroy(struct sd_dev_model *d)
{
	sd_model_destroy(d->m);
	free(d->velocity);
	free(d->second);
	free(d->data);
	free(d->data_labels);
	free(d);
}

/* Block b and its length in floats (*n). */
static inline float *hostdev_block_len(struct sd_dev_model *d, enum sd_dev_block b, size_t *n)
{
	*n = b == SD_DEV_BUFFERS ? d->m->nbuffers : d->m->nparams;
	switch (b) {
	case SD_DEV_PARAMS: return d->m->params;
	case SD_DEV_GRADS: return d->m->grads;
	case SD_DEV_VELOCITY: return d->velocity;
	case SD_DEV_BUFFERS: return d->m->buffers;
	case SD_DEV_SECOND: return d->second;
	}
	return NULL;
}

static inline float *hostdev_block(struct sd_dev_model *d, enum sd_dev_block b)
{
	size_t n;
	return hostdev_block_len(d, b, &n);
}

static inline int hostdev_upload(struct sd_dev_model *d, enum sd_dev_block b, const float *host,
                                 char **why)
{
	size_t n;
	float *p = hostdev_block_len(d, b, &n);
	memcpy(p, host, n * sizeof(float));
	return 0;
}

static inline int hostdev_download(struct sd_dev_model *d, enum sd_dev_block b, float *host,
                                   char **why)
{
	size_t n;
	const float *p = hostdev_block_len(d, b, &n);
	memcpy(host, p, n * sizeof(float));
	return 0;
}

static inline int hostdev_dataset_upload(struct sd_dev_model *d, const float *images,
                                         const uint8_t *labels, int n, char **why)
{
	size_t img = (size_t)d->m->c * d->m->h * d->m->w;
	free(d->data);
	free(d->data_labels);
	d->data = malloc((size_t)n * img * sizeof(float));
	d->data_labels = malloc((size_t)n);
	memcpy(d->data, images, (size_t)n * img * sizeof(float));
	memcpy(d->data_labels, labels, (size_t)n);
	d->data_n = n;
	return 0;
}

typedef int (*hostdev_train_fn)(struct sd_dev_model *d, const float *x, const uint8_t *labels, int n,
                                float scale, double *loss_sum, int *correct, char **why);

/* The gather the CUDA executor's kernel does (samples idx[0..n) of the
 * uploaded set), then train() on the batch. */
static inline int hostdev_train_indexed(struct sd_dev_model *d, const int32_t *idx, int n, float scale,
                                        double *loss_sum, int *correct, char **why,
                                        hostdev_train_fn train)
{
	size_t img = (size_t)d->m->c * d->m->h * d->m->w;
	float *x = malloc(((size_t)n * img + 1) * sizeof(float));
	uint8_t *y = malloc((size_t)n + 1);
	for (int i = 0; i < n; i++) {
		if (idx[i] < 0 || idx[i] >= d->data_n) {
			free(x);
			free(y);
			return sd_why(why, "sample %d outside the training set", idx[i]);
		}
		memcpy(x + (size_t)i * img, d->data + (size_t)idx[i] * img, img * sizeof(float));
		y[i] = d->data_labels[idx[i]];
	}
	int rc = train(d, x, y, n, scale, loss_sum, correct, why);
	free(x);
	free(y);
	return rc;
}

/* Evaluation in chunks of max_batch, as the CUDA executor does. */
static inline int hostdev_eval(struct sd_dev_model *d, const float *x, const uint8_t *labels, int n,
                               double *loss_sum, int *correct, char **why)
{
	double total = 0;
	int right = 0;
	size_t img = (size_t)d->m->c * d->m->h * d->m->w;
	for (int off = 0; off < n; off += d->max_batch) {
		int nb = n - off < d->max_batch ? n - off : d->max_batch;
		double l;
		int c;
		if (sd_model_eval_batch(d->m, x + off * img, labels + off, nb, &l, &c, why) < 0)
			return -1;
		total += l;
		right += c;
	}
	*loss_sum = total;
	*correct = right;
	return 0;
}

static inline int hostdev_sgd(struct sd_dev_model *d, float lr, float momentum, float wd, char **why)
{
	sd_sgd_step(d->m->params, d->velocity, d->m->grads, d->m->nparams, lr, momentum, wd);
	return 0;
}

static inline int hostdev_adamw(struct sd_dev_model *d, const struct sd_adamw_scalars *s,
                                char **why)
{
	sd_adamw_step(d->m->params, d->velocity, d->second, d->m->grads, d->m->nparams, s);
	return 0;
}

static inline int hostdev_grad_sumsq(struct sd_dev_model *d, double *sumsq, char **why)
{
	*sumsq = sd_sumsq(d->m->grads, d->m->nparams);
	return 0;
}

static inline int hostdev_grad_scale(struct sd_dev_model *d, float coef, char **why)
{
	sd_grad_scale(d->m->grads, d->m->nparams, coef);
	return 0;
}

#endif
