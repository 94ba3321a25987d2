/* tests/onnx-train.c - trains an ONNX model on batches from a file, for
 * tests/test-onnx-torch.sh (tests/onnx_torch_ref.py writes the model and
 * the batches, and checks what this prints against PyTorch's run).
 *
 *   onnx-train MODEL.onnx BATCHES OUT LR MOMENTUM WEIGHT_DECAY
 *
 * BATCHES (little-endian): "SDOB", int32 steps, batch, c, h, w, then per
 * step float32 x[batch][c][h][w] and int32 labels[batch].  Each step is one
 * sd_model_train_batch (gradients of the mean loss) and one sd_sgd_step
 * (PyTorch's SGD convention) from the file's initial weights.
 *
 * OUT (text): "loss STEP MEAN_LOSS" per step; then per parameter tensor
 * "tensor NAME COUNT" and a line of its values; then "buffers COUNT" and a
 * line of the batch-norm running statistics (per batch-norm node in graph
 * order, the mean then the variance).  Values as %.9g, exact for float32.
 * Exit status 0, or 1 with the error on stderr.
 *
 * With BATCHES "-" it only loads the model and prints one line: "input CxHxW
 * classes K params P buffers B nodes N engine_nodes E". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/model.h"
#include "engine/onnx.h"
#include "engine/optim.h"

static int die(const char *what, char *why)
{
	fprintf(stderr, "onnx-train: %s: %s\n", what, why ? why : "failed");
	free(why);
	return 1;
}

static void print_floats(FILE *f, const float *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%s%.9g", i ? " " : "", (double)v[i]);
	fputc('\n', f);
}

int main(int argc, char **argv)
{
	if (argc != 7) {
		fprintf(stderr, "usage: onnx-train MODEL.onnx BATCHES OUT LR MOMENTUM WEIGHT_DECAY\n");
		return 2;
	}
	float lr = strtof(argv[4], NULL), mom = strtof(argv[5], NULL), wd = strtof(argv[6], NULL);
	char *why = NULL;
	uint8_t *bytes;
	size_t len;
	if (sd_onnx_read_file(argv[1], &bytes, &len, &why) < 0)
		return die("model", why);
	if (!strcmp(argv[2], "-")) {
		/* Only load: the shape, classes and counts, one line. */
		struct sd_onnx_info info;
		if (sd_onnx_check(bytes, len, argv[1], &info, &why) < 0)
			return die("model", why);
		printf("input %dx%dx%d classes %d params %zu buffers %zu nodes %d engine_nodes %d\n",
		       info.c, info.h, info.w, info.classes, info.params, info.buffers, info.nodes,
		       info.engine_nodes);
		free(bytes);
		return 0;
	}
	FILE *bf = fopen(argv[2], "rb");
	if (!bf)
		return die(argv[2], NULL);
	char magic[4];
	int32_t hdr[5];
	if (fread(magic, 1, 4, bf) != 4 || memcmp(magic, "SDOB", 4) ||
	    fread(hdr, sizeof hdr[0], 5, bf) != 5)
		return die(argv[2], NULL);
	int steps = hdr[0], batch = hdr[1];
	size_t per = (size_t)hdr[2] * hdr[3] * hdr[4];
	struct sd_model *m;
	if (sd_model_create_onnx(&m, bytes, len, argv[1], batch, &why) < 0)
		return die("model", why);
	free(bytes);
	/* Which layout the executor chose (stderr, for the test's log). */
	fprintf(stderr, "onnx-train: %s: activation layout blk %d\n", argv[1],
	        sd_model_channel_block(m));
	size_t np = sd_model_param_count(m);
	float *vel = calloc(np ? np : 1, sizeof(float));
	float *x = malloc((size_t)batch * per * sizeof(float));
	int32_t *lab32 = malloc((size_t)batch * sizeof(int32_t));
	uint8_t *lab = malloc((size_t)batch);
	FILE *out = fopen(argv[3], "w");
	if (!vel || !x || !lab32 || !lab || !out)
		return die("memory or output", NULL);
	for (int s = 0; s < steps; s++) {
		if (fread(x, sizeof(float), (size_t)batch * per, bf) != (size_t)batch * per ||
		    fread(lab32, sizeof(int32_t), (size_t)batch, bf) != (size_t)batch)
			return die(argv[2], NULL);
		for (int i = 0; i < batch; i++)
			lab[i] = (uint8_t)lab32[i];
		double loss;
		if (sd_model_train_batch(m, x, lab, batch, 1.0f / (float)batch, &loss, NULL, &why) < 0)
			return die("train", why);
		sd_sgd_step(sd_model_params(m), vel, sd_model_grads(m), np, lr, mom, wd);
		fprintf(out, "loss %d %.12g\n", s + 1, loss / batch);
	}
	int nt;
	const struct sd_tensor_info *t = sd_model_tensors(m, &nt);
	for (int i = 0; i < nt; i++) {
		fprintf(out, "tensor %s %zu\n", t[i].name, t[i].count);
		print_floats(out, sd_model_params(m) + t[i].offset, t[i].count);
	}
	fprintf(out, "buffers %zu\n", sd_model_buffer_count(m));
	print_floats(out, sd_model_buffers(m), sd_model_buffer_count(m));
	fclose(out);
	fclose(bf);
	free(vel);
	free(x);
	free(lab32);
	free(lab);
	sd_model_destroy(m);
	return 0;
}
