/* tests/engine/test-onnx-export.c - the ONNX writer (engine/onnx-export.h) without
 * Python: what it writes, read back by the engine's own loader.
 *
 *   - the built-in cnn and mlp, exported and loaded again
 *     (sd_model_create_onnx): the same tensors by name, the same parameter
 *     bytes, the same loss on the same batch;
 *   - resnet20: the graph decoded with protobuf-c has the expected nodes
 *     (19 convolutions and batch-norms, 9 adds, a Slice and a Pad per
 *     downsampling block), and its initializers the parameters and running
 *     statistics, byte for byte; and the loader takes the file back (its
 *     option-A shortcuts, Slice + Pad, lower onto the shortcut add): the
 *     same parameters and statistics, the same loss in inference, and 5
 *     SGD steps side by side with the built-in model give the same losses
 *     and parameters (within 1e-6: the same node list, so in practice the
 *     same bits);
 *   - a model from an ONNX file (tests/engine/onnx-gen.h), its parameters changed
 *     as training would: the file written back with them, loaded again, has
 *     them; trained state of another size is refused.
 * tests/app/test-export.sh checks the numbers against PyTorch. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/model.h"
#include "engine/onnx-export.h"
#include "engine/onnx.h"
#include "engine/optim.h"
#include "src/base/rng.h"
#include "onnx/onnx.pb-c.h"
#include "tests/check.h"
#include "tests/engine/onnx-gen.h"

/* A batch of n random (c, h, w) images and labels. */
static float *batch(int n, int c, int h, int w, uint8_t *labels, uint64_t seed)
{
	struct sd_rng r;
	sd_rng_seed(&r, seed, 0);
	size_t f = (size_t)n * c * h * w;
	float *x = malloc(f * sizeof *x);
	for (size_t i = 0; i < f; i++)
		x[i] = sd_rng_normal(&r);
	for (int i = 0; i < n; i++)
		labels[i] = (uint8_t)(i % 10);
	return x;
}

static void round_trip(const char *name, int c, int h, int w)
{
	struct sd_model *m = NULL, *back = NULL;
	char *why = NULL;
	CHECK(sd_model_create(&m, name, c, h, w, 10, 8, &why) == 0, "%s: %s", name, why);
	if (!m)
		return;
	sd_model_init(m, 7);
	struct sd_export ex;
	CHECK(sd_onnx_export_model(m, "test", &ex, &why) == 0, "%s: export: %s", name, why);
	CHECK(sd_model_create_onnx(&back, ex.onnx, ex.onnx_len, name, 8, &why) == 0,
	      "%s: the engine does not load its own export: %s", name, why);
	if (back) {
		int n1, n2;
		const struct sd_tensor_info *a = sd_model_tensors(m, &n1), *b = sd_model_tensors(back, &n2);
		CHECK_INT(n1, n2);
		CHECK_INT(ex.ntensors, n1);
		for (int i = 0; i < n1 && i < n2; i++) {
			CHECK(!strcmp(a[i].name, b[i].name), "%s: tensor %d is %s, was %s", name, i,
			      b[i].name, a[i].name);
			CHECK_INT(a[i].count, b[i].count);
		}
		CHECK_INT(sd_model_param_count(m), sd_model_param_count(back));
		CHECK(!memcmp(sd_model_params(m), sd_model_params(back),
		              sd_model_param_count(m) * sizeof(float)),
		      "%s: the parameters changed on the way", name);
		uint8_t labels[8];
		float *x = batch(8, c, h, w, labels, 3);
		double l1 = 0, l2 = 0;
		int c1 = 0, c2 = 0;
		CHECK(sd_model_eval_batch(m, x, labels, 8, &l1, &c1, &why) == 0, "%s", why);
		CHECK(sd_model_eval_batch(back, x, labels, 8, &l2, &c2, &why) == 0, "%s", why);
		CHECK(fabs(l1 - l2) <= 1e-5 * fabs(l1), "%s: loss %.9g, after the round trip %.9g",
		      name, l1, l2);
		CHECK_INT(c1, c2);
		printf("%-8s %d tensors, %zu bytes of ONNX; loss %.7f before, %.7f after\n", name,
		       ex.ntensors, ex.onnx_len, l1 / 8, l2 / 8);
		free(x);
	}
	sd_export_free(&ex);
	sd_model_destroy(back);
	sd_model_destroy(m);
	free(why);
}

static int count_op(const Onnx__GraphProto *g, const char *op)
{
	int n = 0;
	for (size_t i = 0; i < g->n_node; i++)
		n += !strcmp(g->node[i]->op_type, op);
	return n;
}

static const Onnx__TensorProto *find_init(const Onnx__GraphProto *g, const char *name)
{
	for (size_t i = 0; i < g->n_initializer; i++)
		if (!strcmp(g->initializer[i]->name, name))
			return g->initializer[i];
	return NULL;
}

/* The exported resnet20 loaded back trains as the model it came from. */
static void reload_trains(struct sd_model *m, const struct sd_export *ex)
{
	struct sd_model *back = NULL;
	char *why = NULL;
	CHECK(sd_model_create_onnx(&back, ex->onnx, ex->onnx_len, "resnet20.onnx", 2, &why) == 0,
	      "the loader does not take the exported resnet20: %s", why);
	if (!back) {
		free(why);
		return;
	}
	const size_t np = sd_model_param_count(m), nb = sd_model_buffer_count(m);
	CHECK_INT(sd_model_param_count(back), np);
	CHECK_INT(sd_model_buffer_count(back), nb);
	if (sd_model_param_count(back) != np || sd_model_buffer_count(back) != nb) {
		sd_model_destroy(back);
		return;
	}
	CHECK(!memcmp(sd_model_params(back), sd_model_params(m), np * sizeof(float)),
	      "reloaded resnet20: parameters differ");
	CHECK(!memcmp(sd_model_buffers(back), sd_model_buffers(m), nb * sizeof(float)),
	      "reloaded resnet20: running statistics differ");
	uint8_t labels[2];
	float *x = batch(2, 3, 32, 32, labels, 11);
	double l1 = 0, l2 = 0;
	CHECK(sd_model_eval_batch(m, x, labels, 2, &l1, NULL, &why) == 0, "%s", why);
	CHECK(sd_model_eval_batch(back, x, labels, 2, &l2, NULL, &why) == 0, "%s", why);
	CHECK(fabs(l1 - l2) <= 1e-6 * fabs(l1), "reloaded resnet20: eval loss %.9g, was %.9g", l2,
	      l1);
	float *v1 = calloc(np, sizeof(float)), *v2 = calloc(np, sizeof(float));
	double first = 0, last = 0, worst = 0;
	for (int s = 0; s < 5; s++) {
		free(x);
		x = batch(2, 3, 32, 32, labels, 100 + (uint64_t)s);
		CHECK(sd_model_train_batch(m, x, labels, 2, 0.5f, &l1, NULL, &why) == 0, "%s", why);
		CHECK(sd_model_train_batch(back, x, labels, 2, 0.5f, &l2, NULL, &why) == 0, "%s", why);
		sd_sgd_step(sd_model_params(m), v1, sd_model_grads(m), np, 0.05f, 0.9f, 5e-4f);
		sd_sgd_step(sd_model_params(back), v2, sd_model_grads(back), np, 0.05f, 0.9f, 5e-4f);
		double e = fabs(l1 - l2) / fabs(l1);
		worst = e > worst ? e : worst;
		if (s == 0)
			first = l2 / 2;
		last = l2 / 2;
	}
	double dp = 0, norm = 0;
	for (size_t i = 0; i < np; i++) {
		double d = (double)sd_model_params(m)[i] - sd_model_params(back)[i];
		dp += d * d;
		norm += (double)sd_model_params(m)[i] * sd_model_params(m)[i];
	}
	dp = sqrt(dp / norm);
	CHECK(worst <= 1e-6 && dp <= 1e-6, "reloaded resnet20 trains apart from the built-in: loss "
	      "rel. diff %.2e, parameters %.2e", worst, dp);
	printf("resnet20 reloaded from its export: 5 steps, loss %.5f -> %.5f, largest loss "
	       "difference from the built-in %.1e, parameters %.1e\n", first, last, worst, dp);
	free(x), free(v1), free(v2), free(why);
	sd_model_destroy(back);
}

static void resnet(void)
{
	struct sd_model *m = NULL;
	char *why = NULL;
	CHECK(sd_model_create(&m, "resnet20", 3, 32, 32, 10, 2, &why) == 0, "%s", why);
	if (!m)
		return;
	sd_model_init(m, 5);
	/* Running statistics a trained model would have: not 0 and 1. */
	float *buf = sd_model_buffers(m);
	for (size_t i = 0; i < sd_model_buffer_count(m); i++)
		buf[i] = 0.25f + 0.001f * (float)i;
	struct sd_export ex;
	CHECK(sd_onnx_export_model(m, "test", &ex, &why) == 0, "export: %s", why);
	Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, ex.onnx_len, ex.onnx);
	CHECK(mp && mp->graph, "the export does not decode");
	if (mp && mp->graph) {
		const Onnx__GraphProto *g = mp->graph;
		CHECK_INT(mp->n_opset_import, 1);
		CHECK_INT(mp->opset_import[0]->version, 13);
		CHECK_INT(count_op(g, "Conv"), 19);
		CHECK_INT(count_op(g, "BatchNormalization"), 19);
		CHECK_INT(count_op(g, "Add"), 9);
		CHECK_INT(count_op(g, "Slice"), 2);
		CHECK_INT(count_op(g, "Pad"), 2);
		CHECK_INT(count_op(g, "GlobalAveragePool"), 1);
		CHECK_INT(count_op(g, "Gemm"), 1);
		/* Parameters, and gamma, beta, mean, variance per batch-norm. */
		CHECK_INT(g->n_initializer, 19 + 19 * 4 + 2);
		int nt;
		const struct sd_tensor_info *ti = sd_model_tensors(m, &nt);
		for (int i = 0; i < nt; i++) {
			const Onnx__TensorProto *t = find_init(g, ti[i].name);
			CHECK(t != NULL, "no initializer %s", ti[i].name);
			if (t)
				CHECK(t->raw_data.len == ti[i].count * sizeof(float) &&
				      !memcmp(t->raw_data.data, sd_model_params(m) + ti[i].offset,
				              t->raw_data.len), "initializer %s: not the parameter",
				      ti[i].name);
		}
		/* The last batch-norm's running variance: the last 64 buffers. */
		const Onnx__TensorProto *rv = find_init(g, "s3.b3.bn2.running_var");
		CHECK(rv && rv->raw_data.len == 64 * sizeof(float) &&
		      !memcmp(rv->raw_data.data, buf + sd_model_buffer_count(m) - 64, 64 * sizeof(float)),
		      "s3.b3.bn2.running_var is not the last running variance");
		printf("resnet20 %zu nodes, %zu initializers, %zu bytes of ONNX\n", g->n_node,
		       g->n_initializer, ex.onnx_len);
	}
	reload_trains(m, &ex);
	if (mp)
		onnx__model_proto__free_unpacked(mp, NULL);
	sd_export_free(&ex);
	sd_model_destroy(m);
	free(why);
}

static void from_file(void)
{
	size_t len;
	uint8_t *bytes = gen_model_bytes_shape(GEN_OK, 28, 28, 10, NULL, &len);
	struct sd_model *m = NULL, *back = NULL;
	char *why = NULL;
	CHECK(sd_model_create_onnx(&m, bytes, len, "gen.onnx", 4, &why) == 0, "%s", why);
	if (!m) {
		free(bytes);
		return;
	}
	float *p = sd_model_params(m);
	size_t np = sd_model_param_count(m);
	for (size_t i = 0; i < np; i++)
		p[i] += 0.5f + 0.01f * (float)i;
	struct sd_export ex;
	CHECK(sd_onnx_export_file(bytes, len, "gen.onnx", p, np, sd_model_buffers(m),
	                          sd_model_buffer_count(m), &ex, &why) == 0, "%s", why);
	CHECK_INT(ex.ntensors, 4);
	CHECK(sd_model_create_onnx(&back, ex.onnx, ex.onnx_len, "back.onnx", 4, &why) == 0,
	      "the written file does not load: %s", why);
	if (back) {
		CHECK_INT(sd_model_param_count(back), np);
		CHECK(!memcmp(sd_model_params(back), p, np * sizeof(float)),
		      "the written file does not hold the trained parameters");
	}
	/* The same nodes, in the same order, under the same names. */
	Onnx__ModelProto *a = onnx__model_proto__unpack(NULL, len, bytes);
	Onnx__ModelProto *b = onnx__model_proto__unpack(NULL, ex.onnx_len, ex.onnx);
	CHECK(a && b && a->graph->n_node == b->graph->n_node, "another graph");
	for (size_t i = 0; a && b && i < a->graph->n_node && i < b->graph->n_node; i++)
		CHECK(!strcmp(a->graph->node[i]->op_type, b->graph->node[i]->op_type) &&
		      !strcmp(a->graph->node[i]->output[0], b->graph->node[i]->output[0]),
		      "node %zu differs", i);
	if (a)
		onnx__model_proto__free_unpacked(a, NULL);
	if (b)
		onnx__model_proto__free_unpacked(b, NULL);
	sd_export_free(&ex);
	free(why);
	why = NULL;
	CHECK(sd_onnx_export_file(bytes, len, "gen.onnx", p, np - 1, sd_model_buffers(m),
	                          sd_model_buffer_count(m), &ex, &why) == -1,
	      "state of another size accepted");
	CHECK(why && strstr(why, "gen.onnx: the model has") && strstr(why, "another file?"),
	      "message: %s", why ? why : "(none)");
	if (why)
		printf("refused   %s\n", why);
	free(why);
	sd_model_destroy(back);
	sd_model_destroy(m);
	free(bytes);
}

int main(void)
{
	round_trip("cnn", 1, 28, 28);
	round_trip("mlp", 3, 8, 8);
	resnet();
	from_file();
	return check_exit("test-onnx-export");
}
