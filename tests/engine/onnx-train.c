/* tests/engine/onnx-train.c - trains an ONNX model on batches from a file, for
 * tests/engine/test-onnx-torch.sh (tests/engine/onnx_torch_ref.py writes the model and
 * the batches, and checks what this prints against PyTorch's run).
 *
 *   onnx-train MODEL.onnx BATCHES OUT LR MOMENTUM WEIGHT_DECAY
 *              [OPTIMIZER BETA1 BETA2 EPS CLIP [WARMUP]]
 *
 * BATCHES (little-endian): "SDOB", int32 steps, batch, c, h, w, then per
 * step float32 x[batch][c][h][w] and int32 labels[batch].  Each step is one
 * sd_model_train_batch (gradients of the mean loss) and one sd_optim_step
 * from the file's initial weights: SGD (PyTorch's convention) unless
 * OPTIMIZER is given ("sgd" or "adamw", with AdamW's betas and eps, and
 * CLIP the clip_grad_norm, 0 for none), at a constant learning rate LR, or
 * with WARMUP the trainer's schedule (sd_lr_at): WARMUP steps of linear
 * warm-up to LR, then a cosine down to 0 at the last step.
 *
 * OUT (text): "loss STEP MEAN_LOSS" per step (and, with CLIP > 0, "norm
 * STEP GRADIENT_NORM": the global norm before clipping); then per parameter tensor
 * "tensor NAME COUNT" and a line of its values; then "buffers COUNT" and a
 * line of the batch-norm running statistics (per batch-norm node in graph
 * order, the mean then the variance); then "eval_loss MEAN_LOSS": the
 * trained model's inference loss on the first step's batch.  Values as
 * %.9g, exact for float32.  Exit status 0, or 1 with the error on stderr.
 *
 * The trained model is also written back as OUT.onnx (sd_onnx_export_file:
 * the same file with the trained initializers), for the reference to read.
 *
 * A model with dropout draws its masks from noise seed = the step number
 * (sd_model_set_noise) and writes them to OUT.masks: per step, per dropout
 * node in graph order, batch x (C x H x W) bytes 0 or 1 in NCHW order (what
 * PyTorch multiplies by), so the reference can train with the same masks.
 *
 * With BATCHES "-" it only loads the model and prints one line: "input CxHxW
 * classes K params P buffers B nodes N engine_nodes E".  With BATCHES "-"
 * and OUT the name of a built-in model (engine/model.h), it also builds that
 * model for the same input and classes and checks that the two node lists
 * are the same: op by op the kinds, activation shapes, convolution, pooling,
 * linear and shortcut settings, parameter tensor shapes, batch-norm
 * fusion marks, and the activation layout chosen (sd_model_channel_block);
 * it prints "same as NAME: ..." or the first difference (exit status 1). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/model-graph.h"
#include "engine/model.h"
#include "engine/onnx-export.h"
#include "engine/onnx.h"
#include "engine/optim.h"

static int die(const char *what, char *why)
{
	fprintf(stderr, "onnx-train: %s: %s\n", what, why ? why : "failed");
	free(why);
	return 1;
}

static const char *op_name(enum sd_op op)
{
	static const char *const names[] = { "conv", "batchnorm", "relu", "maxpool", "avgpool",
	                                     "linear", "add", "activation", "concat", "gconv",
	                                     "arith", "dropout" };
	return (unsigned)op < sizeof names / sizeof names[0] ? names[op] : "?";
}

/* The built-in model name's node list against m's; 0 when the same. */
static int same_as_builtin(struct sd_model *m, const char *name)
{
	struct sd_model *b;
	char *why = NULL;
	if (sd_model_create(&b, name, m->c, m->h, m->w, m->classes, m->max_batch, &why) < 0)
		return die(name, why);
	int bad = 0;
	if (m->nnodes != b->nnodes) {
		printf("differs from %s: %d engine nodes, %s has %d\n", name, m->nnodes, name,
		       b->nnodes);
		bad = 1;
	}
	for (int i = 0; !bad && i < m->nnodes; i++) {
		const struct node *x = &m->nodes[i], *y = &b->nodes[i];
		const struct act *xi = &m->acts[x->in], *yi = &b->acts[y->in];
		const struct act *xo = &m->acts[x->out], *yo = &b->acts[y->out];
		int same = x->op == y->op && xi->c == yi->c && xi->h == yi->h && xi->w == yi->w &&
		           xo->c == yo->c && xo->h == yo->h && xo->w == yo->w && x->fuse == y->fuse &&
		           x->fused_from == y->fused_from && (x->w_off == SD_NO_TENSOR) ==
		           (y->w_off == SD_NO_TENSOR) && (x->b_off == SD_NO_TENSOR) ==
		           (y->b_off == SD_NO_TENSOR) && x->w_off == y->w_off && x->b_off == y->b_off;
		switch (x->op) {
		case OP_CONV:
			same = same && x->conv.k == y->conv.k && x->conv.r == y->conv.r &&
			       x->conv.stride == y->conv.stride && x->conv.pad == y->conv.pad;
			break;
		case OP_ADD: {
			const struct act *x2 = &m->acts[x->in2], *y2 = &b->acts[y->in2];
			/* The shortcut reads the same activation: the block's input. */
			same = same && x->s == y->s && x2->c == y2->c && x2->h == y2->h &&
			       x2->w == y2->w && x->in2 == y->in2 && x->in == y->in;
			break;
		}
		case OP_MAXPOOL:
		case OP_AVGPOOL:
			same = same && x->k == y->k && x->s == y->s && x->pad == y->pad;
			break;
		case OP_LINEAR:
			same = same && x->fc_in == y->fc_in && x->fc_out == y->fc_out;
			break;
		default:
			break;
		}
		if (!same) {
			printf("differs from %s at engine node %d: %s (%s, %dx%dx%d -> %dx%dx%d) against "
			       "%s (%s, %dx%dx%d -> %dx%dx%d)\n", name, i, x->name, op_name(x->op),
			       xi->c, xi->h, xi->w, xo->c, xo->h, xo->w, y->name,
			       op_name(y->op), yi->c, yi->h, yi->w, yo->c, yo->h, yo->w);
			bad = 1;
		}
	}
	if (!bad && (m->nparams != b->nparams || m->nbuffers != b->nbuffers ||
	             m->ntensors != b->ntensors || m->nacts != b->nacts)) {
		printf("differs from %s: %zu params, %zu buffers, %d tensors, %d activations "
		       "against %zu, %zu, %d, %d\n", name, m->nparams, m->nbuffers, m->ntensors,
		       m->nacts, b->nparams, b->nbuffers, b->ntensors, b->nacts);
		bad = 1;
	}
	for (int i = 0; !bad && i < m->ntensors; i++)
		if (m->tensors[i].offset != b->tensors[i].offset ||
		    m->tensors[i].count != b->tensors[i].count ||
		    memcmp(m->tensors[i].shape, b->tensors[i].shape, sizeof m->tensors[i].shape)) {
			printf("differs from %s: tensor %d (%s) against %s\n", name, i,
			       m->tensors[i].name, b->tensors[i].name);
			bad = 1;
		}
	if (!bad && sd_model_channel_block(m) != sd_model_channel_block(b)) {
		printf("differs from %s: activation layout blk %d, %s runs blk %d\n", name,
		       sd_model_channel_block(m), name, sd_model_channel_block(b));
		bad = 1;
	}
	if (!bad)
		printf("same as %s: %d engine nodes, %zu params, %zu buffers, layout blk %d\n", name,
		       m->nnodes, m->nparams, m->nbuffers, sd_model_channel_block(m));
	sd_model_destroy(b);
	return bad;
}

/* The dropout masks of the last training batch (nb samples), in NCHW. */
static int write_masks(FILE *f, const struct sd_model *m, int nb)
{
	for (int i = 0; i < m->nnodes; i++) {
		const struct node *n = &m->nodes[i];
		if (n->op != OP_DROPOUT)
			continue;
		const struct act *a = &m->acts[n->in];
		const int blk = a->blk, hw = a->h * a->w;
		for (int s = 0; s < nb; s++)
			for (int c = 0; c < a->c; c++)
				for (int p = 0; p < hw; p++) {
					size_t at = (((size_t)s * (a->c / blk) + c / blk) * hw + p) * blk +
					            c % blk;
					if (fputc(n->drop_mask[at], f) == EOF)
						return -1;
				}
	}
	return 0;
}

static void print_floats(FILE *f, const float *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%s%.9g", i ? " " : "", (double)v[i]);
	fputc('\n', f);
}

int main(int argc, char **argv)
{
	if (argc != 7 && argc != 12 && argc != 13) {
		fprintf(stderr, "usage: onnx-train MODEL.onnx BATCHES OUT LR MOMENTUM WEIGHT_DECAY "
		        "[OPTIMIZER BETA1 BETA2 EPS CLIP [WARMUP]]\n");
		return 2;
	}
	float lr = strtof(argv[4], NULL);
	struct sd_optim_settings opt = { .kind = SD_OPTIM_SGD, .momentum = strtof(argv[5], NULL),
	                                 .weight_decay = strtof(argv[6], NULL) };
	struct sd_lr_schedule sched = { .kind = SD_LR_CONSTANT, .base_lr = lr };
	if (argc == 13) {
		sched.kind = SD_LR_COSINE;
		sched.warmup_steps = strtol(argv[12], NULL, 10);
	}
	if (argc >= 12) {
		if (sd_optim_kind_parse(argv[7], &opt.kind) < 0) {
			fprintf(stderr, "onnx-train: optimizer: expected sgd or adamw, got '%s'\n", argv[7]);
			return 2;
		}
		opt.beta1 = strtof(argv[8], NULL);
		opt.beta2 = strtof(argv[9], NULL);
		opt.eps = strtof(argv[10], NULL);
		opt.clip_grad_norm = strtof(argv[11], NULL);
	}
	char *why = NULL;
	uint8_t *bytes;
	size_t len;
	if (sd_onnx_read_file(argv[1], &bytes, &len, &why) < 0)
		return die("model", why);
	if (!strcmp(argv[2], "-")) {
		/* Only load: the shape, classes and counts, one line. */
		struct sd_onnx_info info;
		if (sd_onnx_check(bytes, len, argv[1], &info, &why) < 0) {
			free(bytes);
			return die("model", why);
		}
		printf("input %dx%dx%d classes %d params %zu buffers %zu nodes %d engine_nodes %d\n",
		       info.c, info.h, info.w, info.classes, info.params, info.buffers, info.nodes,
		       info.engine_nodes);
		int rc = 0;
		if (strcmp(argv[3], "-")) {
			struct sd_model *m;
			if (sd_model_create_onnx(&m, bytes, len, argv[1], 8, &why) < 0) {
				free(bytes);
				return die("model", why);
			}
			rc = same_as_builtin(m, argv[3]);
			sd_model_destroy(m);
		}
		free(bytes);
		return rc;
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
	sched.total_steps = steps;
	size_t per = (size_t)hdr[2] * hdr[3] * hdr[4];
	struct sd_model *m;
	if (sd_model_create_onnx(&m, bytes, len, argv[1], batch, &why) < 0)
		return die("model", why);
	/* Which layout the executor chose (stderr, for the test's log). */
	fprintf(stderr, "onnx-train: %s: activation layout blk %d\n", argv[1],
	        sd_model_channel_block(m));
	size_t np = sd_model_param_count(m);
	float *vel = calloc(np ? np : 1, sizeof(float));
	float *second = calloc(np ? np : 1, sizeof(float));
	float *x = malloc((size_t)batch * per * sizeof(float));
	int32_t *lab32 = malloc((size_t)batch * sizeof(int32_t));
	uint8_t *lab = malloc((size_t)batch);
	FILE *out = fopen(argv[3], "w");
	if (!vel || !second || !x || !lab32 || !lab || !out)
		return die("memory or output", NULL);
	FILE *masks = NULL;
	float *x0 = NULL;
	uint8_t *lab0 = malloc((size_t)batch);
	if (!lab0 || !(x0 = malloc((size_t)batch * per * sizeof(float))))
		return die("memory", NULL);
	if (sd_model_has_dropout(m)) {
		char path[4096];
		snprintf(path, sizeof path, "%s.masks", argv[3]);
		if (!(masks = fopen(path, "wb")))
			return die(path, NULL);
	}
	for (int s = 0; s < steps; s++) {
		if (fread(x, sizeof(float), (size_t)batch * per, bf) != (size_t)batch * per ||
		    fread(lab32, sizeof(int32_t), (size_t)batch, bf) != (size_t)batch)
			return die(argv[2], NULL);
		for (int i = 0; i < batch; i++)
			lab[i] = (uint8_t)lab32[i];
		if (s == 0) {
			memcpy(x0, x, (size_t)batch * per * sizeof(float));
			memcpy(lab0, lab, (size_t)batch);
		}
		double loss;
		sd_model_set_noise(m, (uint64_t)s + 1, 0);
		if (sd_model_train_batch(m, x, lab, batch, 1.0f / (float)batch, &loss, NULL, &why) < 0)
			return die("train", why);
		if (masks && write_masks(masks, m, batch) < 0)
			return die("masks", NULL);
		double norm = sd_optim_step(&opt, sd_model_params(m), vel, second, sd_model_grads(m), np,
		                            sd_lr_at(&sched, s), s);
		fprintf(out, "loss %d %.12g\n", s + 1, loss / batch);
		if (opt.clip_grad_norm > 0)
			fprintf(out, "norm %d %.12g\n", s + 1, norm);
	}
	int nt;
	const struct sd_tensor_info *t = sd_model_tensors(m, &nt);
	for (int i = 0; i < nt; i++) {
		fprintf(out, "tensor %s %zu\n", t[i].name, t[i].count);
		print_floats(out, sd_model_params(m) + t[i].offset, t[i].count);
	}
	fprintf(out, "buffers %zu\n", sd_model_buffer_count(m));
	print_floats(out, sd_model_buffers(m), sd_model_buffer_count(m));
	double eval_loss;
	if (steps > 0) {
		if (sd_model_eval_batch(m, x0, lab0, batch, &eval_loss, NULL, &why) < 0)
			return die("eval", why);
		fprintf(out, "eval_loss %.12g\n", eval_loss / batch);
	}
	if (masks && fclose(masks) != 0)
		return die("masks", NULL);
	struct sd_export ex;
	if (sd_onnx_export_file(bytes, len, argv[1], sd_model_params(m), np, sd_model_buffers(m),
	                        sd_model_buffer_count(m), &ex, &why) < 0)
		return die("export", why);
	char path[4096];
	snprintf(path, sizeof path, "%s.onnx", argv[3]);
	FILE *ef = fopen(path, "wb");
	if (!ef || fwrite(ex.onnx, 1, ex.onnx_len, ef) != ex.onnx_len || fclose(ef) != 0)
		return die(path, NULL);
	sd_export_free(&ex);
	free(bytes);
	free(x0);
	free(lab0);
	fclose(out);
	fclose(bf);
	free(vel);
	free(second);
	free(x);
	free(lab32);
	free(lab);
	sd_model_destroy(m);
	return 0;
}
