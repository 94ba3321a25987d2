/* tests/engine/test-dropout.c - dropout in training (engine/layers.h
 * sd_dropout_*, the OP_DROPOUT node ONNX's Dropout lowers to).
 *
 * Layer:
 *   - the fraction of zeroed elements over 200000 draws is within 5 binomial
 *     standard deviations of p (p = 0.3 and 0.5), and every surviving value
 *     is exactly x * (1 / (1 - p)) (float, as PyTorch computes it);
 *   - a sample's mask depends on (seed, its stream) only: samples 2 and 3 of
 *     a batch from stream 10 get the masks of samples 0 and 1 of a batch from
 *     stream 12; another seed gives another mask.
 * Model (engine/model-graph.h: fc1 -> relu -> dropout -> fc2):
 *   - inference is the identity: the same eval loss as the model without
 *     the dropout node, bit for bit;
 *   - training draws: its loss differs from the eval loss at the same
 *     weights, a replay with the same noise seed gives the same gradients
 *     bit for bit, another seed other ones;
 *   - a global batch split over two workers (first_sample 0 and 4) draws the
 *     masks of the whole batch: the two halves' losses add up to the whole
 *     batch's (within 1e-6 relative: only the order of the sums differs);
 *   - it learns: 300 SGD steps on a 4-class problem with dropout 0.5 take
 *     the eval loss below a quarter of the initial one.
 */
#include "engine/layers.h"
#include "engine/model-graph.h"
#include "engine/model.h"
#include "engine/optim.h"
#include "src/base/rng.h"
#include "tests/check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_statistics(float p)
{
	const int n = 4;
	const size_t per = 50000, count = (size_t)n * per;
	float *x = malloc(count * sizeof(float)), *y = malloc(count * sizeof(float));
	uint8_t *mask = malloc(count);
	if (!x || !y || !mask)
		exit(1);
	for (size_t i = 0; i < count; i++)
		x[i] = 0.5f + (float)(i % 13) * 0.37f;
	sd_dropout_forward(y, mask, x, n, per, p, 12345, 0);
	size_t zeros = 0, bad_scale = 0, bad_mask = 0;
	const float scale = 1.0f / (1.0f - p);
	for (size_t i = 0; i < count; i++) {
		if (y[i] == 0.0f)
			zeros++;
		else if (y[i] != x[i] * scale)
			bad_scale++;
		if ((y[i] != 0.0f) != (mask[i] != 0))
			bad_mask++;
	}
	double mean = (double)count * p, sd = sqrt((double)count * p * (1.0 - p));
	check_report(fabs((double)zeros - mean) <= 5.0 * sd,
	             "p %.2f: %zu of %zu zeroed, expected %.0f +- %.0f (5 sd)", (double)p, zeros,
	             count, mean, 5.0 * sd);
	check_report(bad_scale == 0, "p %.2f: every kept value is exactly x * %.9g (%zu are not)",
	             (double)p, (double)scale, bad_scale);
	check_report(bad_mask == 0, "p %.2f: the mask says which were kept (%zu disagree)",
	             (double)p, bad_mask);
	free(x), free(y), free(mask);
}

static void test_streams(void)
{
	const size_t per = 1000;
	float x[4 * 1000], y[4 * 1000], y2[2 * 1000];
	uint8_t m4[4 * 1000], m2[2 * 1000], m2s[2 * 1000];
	for (size_t i = 0; i < 4 * per; i++)
		x[i] = 1.0f;
	sd_dropout_forward(y, m4, x, 4, per, 0.5f, 777, 10);
	sd_dropout_forward(y2, m2, x + 2 * per, 2, per, 0.5f, 777, 12);
	check_report(!memcmp(m4 + 2 * per, m2, 2 * per),
	             "samples 2, 3 of stream 10 get the masks of samples 0, 1 of stream 12");
	sd_dropout_forward(y2, m2s, x + 2 * per, 2, per, 0.5f, 778, 12);
	size_t same = 0;
	for (size_t i = 0; i < 2 * per; i++)
		same += m2s[i] == m2[i];
	/* Independent masks agree on about half the elements. */
	check_report(same > 800 && same < 1200, "another seed: %zu of 2000 mask elements agree "
	             "(independent: about 1000)", same);
}

/* fc1 (in -> hid) -> relu -> [dropout p] -> fc2 (hid -> classes). */
static struct sd_model *mlp(int in, int hid, int classes, int batch, float p)
{
	struct sd_model *m = sd_graph_new(p > 0 ? "mlp-dropout" : "mlp", in, 1, 1, batch);
	struct node *n = sd_graph_node(m, OP_LINEAR, 0, "fc1");
	n->out = sd_graph_act(m, hid, 1, 1);
	n->fc_in = in;
	n->fc_out = hid;
	n->w_off = sd_graph_tensor(m, "fc1", "weight", 2, hid, in, 0, 0);
	n->b_off = sd_graph_tensor(m, "fc1", "bias", 1, hid, 0, 0, 0);
	int a = n->out;
	n = sd_graph_node(m, OP_RELU, a, "relu");
	m->acts[a].consumers--;   /* in place */
	n->out = a;
	if (p > 0) {
		n = sd_graph_node(m, OP_DROPOUT, a, "drop");
		n->out = sd_graph_act(m, hid, 1, 1);
		n->drop_p = p;
		a = n->out;
	}
	n = sd_graph_node(m, OP_LINEAR, a, "fc2");
	n->out = sd_graph_act(m, classes, 1, 1);
	n->fc_in = hid;
	n->fc_out = classes;
	n->w_off = sd_graph_tensor(m, "fc2", "weight", 2, classes, hid, 0, 0);
	n->b_off = sd_graph_tensor(m, "fc2", "bias", 1, classes, 0, 0, 0);
	char *why = NULL;
	if (sd_graph_finish(m, classes, &why) < 0) {
		fprintf(stderr, "test-dropout: %s\n", why);
		exit(1);
	}
	sd_model_init(m, 7);
	return m;
}

#define IN 16
#define HID 64
#define CLASSES 4
#define BATCH 8

/* A learnable problem: class prototypes plus noise. */
static void make_data(float *x, uint8_t *y, int n, struct sd_rng *r, const float *proto)
{
	for (int i = 0; i < n; i++) {
		y[i] = (uint8_t)sd_rng_below(r, CLASSES);
		for (int j = 0; j < IN; j++)
			x[i * IN + j] = proto[y[i] * IN + j] + 0.5f * sd_rng_normal(r);
	}
}

static void test_model(void)
{
	char *why = NULL;
	struct sd_model *d = mlp(IN, HID, CLASSES, BATCH, 0.5f), *plain = mlp(IN, HID, CLASSES,
	                                                                      BATCH, 0);
	CHECK_INT(sd_model_has_dropout(d), 1);
	CHECK_INT(sd_model_has_dropout(plain), 0);
	CHECK_INT(sd_model_param_count(d), sd_model_param_count(plain));
	const size_t np = sd_model_param_count(d);
	memcpy(sd_model_params(plain), sd_model_params(d), np * sizeof(float));
	struct sd_rng r;
	sd_rng_seed(&r, 3, 4);
	float proto[CLASSES * IN], x[BATCH * IN];
	uint8_t y[BATCH];
	for (int i = 0; i < CLASSES * IN; i++)
		proto[i] = sd_rng_normal(&r);
	make_data(x, y, BATCH, &r, proto);

	double le, lp, lt, lt2;
	CHECK(sd_model_eval_batch(d, x, y, BATCH, &le, NULL, &why) == 0, "%s", why);
	CHECK(sd_model_eval_batch(plain, x, y, BATCH, &lp, NULL, &why) == 0, "%s", why);
	check_report(le == lp, "inference: eval loss %.9g, without the dropout node %.9g", le, lp);

	float *g1 = malloc(np * sizeof(float)), *g2 = malloc(np * sizeof(float));
	if (!g1 || !g2)
		exit(1);
	sd_model_set_noise(d, 42, 0);
	CHECK(sd_model_train_batch(d, x, y, BATCH, 1.0f / BATCH, &lt, NULL, &why) == 0, "%s", why);
	memcpy(g1, sd_model_grads(d), np * sizeof(float));
	check_report(lt != le, "training draws: train loss %.9g, eval loss %.9g", lt, le);
	sd_model_set_noise(d, 42, 0);
	CHECK(sd_model_train_batch(d, x, y, BATCH, 1.0f / BATCH, &lt2, NULL, &why) == 0, "%s", why);
	check_report(lt2 == lt && !memcmp(g1, sd_model_grads(d), np * sizeof(float)),
	             "replay with the same seed: loss %.9g again (%.9g), same gradients", lt2, lt);
	sd_model_set_noise(d, 43, 0);
	CHECK(sd_model_train_batch(d, x, y, BATCH, 1.0f / BATCH, &lt2, NULL, &why) == 0, "%s", why);
	check_report(memcmp(g1, sd_model_grads(d), np * sizeof(float)) != 0,
	             "another seed: other gradients (loss %.9g)", lt2);

	/* The batch split over two workers. */
	double h1, h2;
	sd_model_set_noise(d, 42, 0);
	CHECK(sd_model_train_batch(d, x, y, BATCH / 2, 1.0f / BATCH, &h1, NULL, &why) == 0, "%s",
	      why);
	sd_model_set_noise(d, 42, BATCH / 2);
	CHECK(sd_model_train_batch(d, x + BATCH / 2 * IN, y + BATCH / 2, BATCH / 2, 1.0f / BATCH,
	                           &h2, NULL, &why) == 0, "%s", why);
	check_report(fabs(h1 + h2 - lt) <= 1e-6 * fabs(lt),
	             "split batch: halves %.9g + %.9g = %.9g, whole batch %.9g", h1, h2, h1 + h2, lt);

	/* It learns. */
	float *vel = calloc(np, sizeof(float));
	const int test_n = BATCH;
	float tx[BATCH * IN];
	uint8_t ty[BATCH];
	make_data(tx, ty, test_n, &r, proto);
	double l0, l1;
	CHECK(sd_model_eval_batch(d, tx, ty, test_n, &l0, NULL, &why) == 0, "%s", why);
	for (int s = 0; s < 300; s++) {
		make_data(x, y, BATCH, &r, proto);
		sd_model_set_noise(d, 1000 + (uint64_t)s, 0);
		CHECK(sd_model_train_batch(d, x, y, BATCH, 1.0f / BATCH, NULL, NULL, &why) == 0, "%s",
		      why);
		sd_sgd_step(sd_model_params(d), vel, sd_model_grads(d), np, 0.05f, 0.9f, 0.0f);
	}
	CHECK(sd_model_eval_batch(d, tx, ty, test_n, &l1, NULL, &why) == 0, "%s", why);
	check_report(l1 < 0.25 * l0, "300 steps with dropout 0.5: eval loss %.3g -> %.3g",
	             l0 / test_n, l1 / test_n);
	free(vel), free(g1), free(g2);
	sd_model_destroy(d);
	sd_model_destroy(plain);
}

int main(void)
{
	test_statistics(0.3f);
	test_statistics(0.5f);
	test_streams();
	test_model();
	return check_exit("test-dropout");
}
