/* tests/engine/test-conv-paths.c - whole models on the two convolution paths of
 * engine/layers.h: im2col + OpenBLAS (plain NCHW model, the reference) and
 * oneDNN (for the ResNets: channel-blocked activations and fused batch-norm
 * + residual + ReLU; for the cnn: per-call oneDNN convolutions), trained
 * from the same seed on the same synthetic batches, 2 threads.
 *
 * Checked, for resnet20 (3x32x32) and cnn (1x28x28), batch 32:
 *   layout     the oneDNN resnet really is channel-blocked, the im2col one
 *              NCHW (else the comparisons below would compare a path with
 *              itself);
 *   gradient   of the first step from identical parameters:
 *              ||g_dnn - g_ref|| <= TOL_GRAD ||g_ref||, summed loss within
 *              TOL_LOSS relative, batch-norm running statistics within
 *              TOL_LOSS (norm-wise relative);
 *   training   STEPS steps on each path: every step's mean loss within
 *              TOL_TRAIN relative (the paths round differently; the
 *              difference grows slowly with the steps, it must stay small);
 *   determinism a second oneDNN run gives bit-identical losses and
 *              parameters (same seed, same thread count);
 *   checkpoints written on one path and read on the other give the
 *              bit-identical parameters, momentum and batch-norm buffers
 *              (they are parameters, nothing path-specific), evaluate to the
 *              same test loss within TOL_LOSS, and train on.
 * Tolerances: float32 sums of the same terms in another order differ by a
 * few 1e-7 relative per layer; over 20 layers that stays under 1e-5 for the
 * loss and the forward statistics.  The gradient is more sensitive: a ReLU
 * input within rounding of 0 passes its gradient on one path and not on the
 * other, and one such element moves a batch-norm's beta gradient by ~1e-3
 * of its size.  That is the model's own sensitivity, not the path's: the
 * test also measures it on the reference path alone, by scaling the input
 * by (1 + 2^-23), which moves the resnet20 gradient by ~8e-4; so TOL_GRAD is
 * 1e-2, still far below what a wrong kernel does (a dropped shortcut
 * gradient or a misplaced channel block gives 1e-1 and more).  TOL_TRAIN
 * allows the same divergence carried through STEPS steps of SGD.
 * The oneDNN resnet20 runs oneDNN's Winograd kernels wherever
 * engine/conv-dnnl.c picks them (float32 3x3 stride-1: every 32- and
 * 64-channel convolution, the 16-channel weight gradients), so these
 * comparisons are also what holds Winograd's rounding to the tolerances.
 * SKIPs (77) when the build has no oneDNN. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/blas.h"
#include "engine/engine.h"
#include "engine/layers.h"
#include "tests/check.h"
#include "tests/tmpdir.h"

void openblas_set_num_threads(int num_threads);

#define BATCH 32
#define STEPS 6
#define TOL_GRAD 1e-2
#define TOL_LOSS 1e-5
#define TOL_TRAIN 1e-2

static char tmpdir[4096];

static struct sd_trainer *make(const char *model, enum sd_conv_path path)
{
	struct sd_train_config cfg;
	sd_train_config_defaults(&cfg);
	snprintf(cfg.model, sizeof cfg.model, "%s", model);
	snprintf(cfg.dataset, sizeof cfg.dataset, "synthetic");
	cfg.global_batch = BATCH;
	cfg.eval_batch = 64;
	cfg.synthetic_samples = 8 * BATCH;
	int resnet = !strncmp(model, "resnet", 6);
	cfg.synthetic_c = resnet ? 3 : 1;
	cfg.synthetic_h = cfg.synthetic_w = resnet ? 32 : 28;
	cfg.warmup_steps = 2;
	cfg.seed = 11;
	sd_conv2d_set_path(path);
	char *why = NULL;
	struct sd_trainer *t;
	if (sd_trainer_create(&t, &cfg, &why) < 0) {
		fprintf(stderr, "test-conv-paths: %s\n", why);
		exit(1);
	}
	return t;
}

/* One step of t on its path; returns the mean loss. */
static double step(struct sd_trainer *t, enum sd_conv_path path)
{
	char *why = NULL;
	double loss;
	sd_conv2d_set_path(path);
	if (sd_trainer_step(t, &loss, NULL, &why) < 0) {
		fprintf(stderr, "test-conv-paths: %s\n", why);
		exit(1);
	}
	return loss;
}

static double rel(double a, double b)
{
	double d = fabs(a - b), s = fabs(b) > 1e-30 ? fabs(b) : 1e-30;
	return d / s;
}

/* ||a - b|| / ||b|| over n floats. */
static double rel_norm(const float *a, const float *b, size_t n)
{
	double d = 0.0, r = 0.0;
	for (size_t i = 0; i < n; i++) {
		double e = (double)a[i] - b[i];
		d += e * e;
		r += (double)b[i] * b[i];
	}
	return sqrt(d) / (r > 0.0 ? sqrt(r) : 1.0);
}

static void compare_paths(const char *model)
{
	struct sd_trainer *ref = make(model, SD_CONV_IM2COL);
	struct sd_trainer *dnn = make(model, SD_CONV_ONEDNN);
	int resnet = !strncmp(model, "resnet", 6);
	int blk = sd_model_channel_block(dnn->model);
	check_report(sd_model_channel_block(ref->model) == 1, "%-9s im2col model is NCHW (block %d)",
	             model, sd_model_channel_block(ref->model));
	if (resnet)
		check_report(blk == 8 || blk == 16, "%-9s oneDNN model is channel-blocked (block %d)",
		             model, blk);

	/* First step's gradient from the same parameters and batch. */
	size_t np = sd_model_param_count(ref->model), nb = sd_model_buffer_count(ref->model);
	double lr_, ld;
	int cr, cd;
	char *why = NULL;
	sd_conv2d_set_path(SD_CONV_IM2COL);
	if (sd_trainer_local_grad(ref, 0, 0, BATCH, &lr_, &cr, &why) < 0)
		exit(1);
	sd_conv2d_set_path(SD_CONV_ONEDNN);
	if (sd_trainer_local_grad(dnn, 0, 0, BATCH, &ld, &cd, &why) < 0)
		exit(1);
	double eg = rel_norm(sd_model_grads(dnn->model), sd_model_grads(ref->model), np);
	check_report(eg <= TOL_GRAD, "%-9s step-1 gradient ||dnn - ref|| / ||ref|| = %.2e (tol %.0e)",
	             model, eg, TOL_GRAD);
	check_report(rel(ld, lr_) <= TOL_LOSS, "%-9s step-1 loss %.9g vs %.9g, rel %.1e (tol %.0e)",
	             model, ld, lr_, rel(ld, lr_), TOL_LOSS);
	if (nb) {
		double eb = rel_norm(sd_model_buffers(dnn->model), sd_model_buffers(ref->model), nb);
		check_report(eb <= TOL_LOSS, "%-9s batch-norm running statistics: rel %.1e (tol %.0e)",
		             model, eb, TOL_LOSS);
	}
	/* The reference path's own sensitivity (see the top of the file). */
	struct sd_trainer *pert = make(model, SD_CONV_IM2COL);
	const size_t nimg = (size_t)pert->train.n * pert->train.c * pert->train.h * pert->train.w;
	for (size_t i = 0; i < nimg; i++)
		pert->train.images[i] *= 1.0f + 0x1p-23f;
	double lp;
	int cp;
	sd_conv2d_set_path(SD_CONV_IM2COL);
	if (sd_trainer_local_grad(pert, 0, 0, BATCH, &lp, &cp, &why) < 0)
		exit(1);
	printf("%-9s (im2col alone, input x (1 + 2^-23): gradient moves %.2e)\n", model,
	       rel_norm(sd_model_grads(pert->model), sd_model_grads(ref->model), np));
	sd_trainer_destroy(pert);
	sd_trainer_apply(ref);
	sd_trainer_apply(dnn);

	/* Training on, and a second oneDNN run from scratch. */
	struct sd_trainer *dnn2 = make(model, SD_CONV_ONEDNN);
	double l2 = step(dnn2, SD_CONV_ONEDNN);
	(void)l2;
	double worst = 0.0;
	int same = 1;
	for (int s = 1; s < STEPS; s++) {
		double a = step(ref, SD_CONV_IM2COL), b = step(dnn, SD_CONV_ONEDNN);
		double c = step(dnn2, SD_CONV_ONEDNN);
		if (rel(b, a) > worst)
			worst = rel(b, a);
		same &= memcmp(&b, &c, sizeof b) == 0;
	}
	check_report(worst <= TOL_TRAIN, "%-9s %d steps: mean loss max rel diff %.2e (tol %.0e)",
	             model, STEPS, worst, TOL_TRAIN);
	check_report(same && memcmp(sd_model_params(dnn->model), sd_model_params(dnn2->model),
	                            np * sizeof(float)) == 0,
	             "%-9s two oneDNN runs: bit-identical losses and parameters", model);

	/* Checkpoints across paths, both ways. */
	for (int dir = 0; dir < 2; dir++) {
		struct sd_trainer *from = dir ? dnn : ref;
		enum sd_conv_path to_path = dir ? SD_CONV_IM2COL : SD_CONV_ONEDNN;
		enum sd_conv_path from_path = dir ? SD_CONV_ONEDNN : SD_CONV_IM2COL;
		char *path = path_join(tmpdir, dir ? "dnn.sdckpt" : "ref.sdckpt");
		if (sd_trainer_save(from, path, &why) < 0) {
			fprintf(stderr, "test-conv-paths: %s\n", why);
			exit(1);
		}
		struct sd_trainer *to = make(model, to_path);
		int rc = sd_trainer_load(to, path, &why);
		check_report(rc == 0, "%-9s checkpoint %s -> %s loads%s%s", model,
		             sd_conv2d_path_name(from_path), sd_conv2d_path_name(to_path),
		             rc ? ": " : "", rc ? why : "");
		if (rc == 0) {
			int eq = memcmp(sd_model_params(to->model), sd_model_params(from->model),
			                np * sizeof(float)) == 0 &&
			         memcmp(to->velocity, from->velocity, np * sizeof(float)) == 0 &&
			         (!nb || memcmp(sd_model_buffers(to->model), sd_model_buffers(from->model),
			                        nb * sizeof(float)) == 0) &&
			         to->step == from->step;
			check_report(eq, "%-9s   parameters, momentum, buffers and step bit-identical",
			             model);
			double tl_from, tl_to, acc_from, acc_to;
			sd_conv2d_set_path(from_path);
			sd_trainer_evaluate(from, &tl_from, &acc_from, NULL);
			sd_conv2d_set_path(to_path);
			sd_trainer_evaluate(to, &tl_to, &acc_to, NULL);
			check_report(rel(tl_to, tl_from) <= TOL_LOSS,
			             "%-9s   test loss %.9g vs %.9g on the other path, rel %.1e (tol %.0e)",
			             model, tl_to, tl_from, rel(tl_to, tl_from), TOL_LOSS);
			double a = step(to, to_path), b = step(from, from_path);
			check_report(rel(a, b) <= TOL_TRAIN,
			             "%-9s   next step on each path: %.7g vs %.7g (tol %.0e)", model, a, b,
			             TOL_TRAIN);
		}
		sd_trainer_destroy(to);
		free(path);
	}
	sd_conv2d_set_path(SD_CONV_AUTO);
	sd_trainer_destroy(ref);
	sd_trainer_destroy(dnn);
	sd_trainer_destroy(dnn2);
}

int main(int argc, char **argv)
{
	sd_blas_select_kernel(argv);
	(void)argc;
	if (!sd_conv2d_onednn_version()) {
		fprintf(stderr, "SKIP: this build has no oneDNN (configure found no libdnnl-dev): "
		        "only the im2col path exists\n");
		return 77;
	}
	openblas_set_num_threads(2);
	omp_set_num_threads(2);
	make_tmpdir(tmpdir, sizeof tmpdir, "sd-conv-paths.XXXXXX");
	compare_paths("resnet20");
	compare_paths("cnn");
	rm_tree(tmpdir);
	/* A oneDNN call that fails quietly falls back to im2col: right
	 * results, so only this count shows it. */
	check_report(sd_conv2d_fallbacks() == 0, "oneDNN calls that failed and fell back to im2col: %lu",
	             sd_conv2d_fallbacks());
	return check_exit("test-conv-paths");
}
