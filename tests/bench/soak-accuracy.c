/* tests/bench/soak-accuracy.c - a long soak, not a test: trains the same
 * ResNet on real data once per convolution path (im2col + OpenBLAS, the
 * reference; oneDNN) from the same seed and prints the test accuracy of
 * each after every epoch, then whether the oneDNN path ends within
 * --margin points (default 0.5) of the reference.
 *
 * Data: Debian has no CIFAR-10 package, so Fashion-MNIST (the Debian package
 * dataset-fashion-mnist; all 60000 training and 10000 test images) is padded
 * from 28x28 to 32x32 with the value of a black pixel, two on each side:
 * the ResNets then see CIFAR's 32x32 planes (stride-2 stages at 16 and 8).
 * Training is what spotdeck-worker --standalone runs (engine/train.h:
 * SGD with momentum 0.9, weight decay 5e-4, cosine schedule with 100
 * warm-up steps, lr 0.05, batch 128, seed 1), through the same sd_trainer
 * calls; only the datasets are swapped in after the trainer is built (the
 * trainer has no padding option).
 *
 * usage: soak-accuracy [--model resnet20] [--epochs 3] [--threads 2]
 *                      [--path both|im2col|onednn] [--margin 0.5]
 *                      [--precision fp32|bf16|both]
 *                      [--data-dir /usr/share/datasets/fashion-mnist]
 * --precision both (issue 40's accuracy soak) trains on the oneDNN path
 * twice instead, in fp32 (the reference) and in bf16 (engine/train.h
 * "precision"), and compares those two; --path is then ignored.
 * Exit status: 0 when the oneDNN path (or the bf16 run) is within the
 * margin (or only one run ran), 1 when not, 77 when the data or oneDNN (or
 * oneDNN's bf16 kernels, for bf16) is missing.
 * On 2 quiet cores 3 epochs of resnet20 take roughly 10 minutes on oneDNN
 * and 20 on im2col. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/engine.h"

void openblas_set_num_threads(int num_threads);

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ds (n, 1, 28, 28) padded to (n, 1, 32, 32) with value bg. */
static void pad32(struct sd_dataset *out, const struct sd_dataset *in, float bg)
{
	const int h = 32, w = 32, p = (32 - in->h) / 2;
	*out = *in;
	out->h = h;
	out->w = w;
	out->images = malloc((size_t)in->n * h * w * sizeof(float));
	out->labels = malloc((size_t)in->n);
	if (!out->images || !out->labels) {
		fprintf(stderr, "soak-accuracy: out of memory\n");
		exit(1);
	}
	memcpy(out->labels, in->labels, (size_t)in->n);
	for (int i = 0; i < in->n; i++) {
		float *o = out->images + (size_t)i * h * w;
		const float *s = in->images + (size_t)i * in->h * in->w;
		for (int y = 0; y < h; y++)
			for (int x = 0; x < w; x++) {
				int sy = y - p, sx = x - p;
				o[y * w + x] = sy >= 0 && sy < in->h && sx >= 0 && sx < in->w
				               ? s[sy * in->w + sx] : bg;
			}
	}
}

/* Trains on one path; returns the final test accuracy (fraction). */
static double run(const char *model, int epochs, enum sd_conv_path path, const char *precision,
                  const struct sd_dataset *train, const struct sd_dataset *test)
{
	struct sd_train_config cfg;
	sd_train_config_defaults(&cfg);
	snprintf(cfg.model, sizeof cfg.model, "%s", model);
	snprintf(cfg.dataset, sizeof cfg.dataset, "synthetic");
	cfg.epochs = epochs;
	cfg.global_batch = 128;
	snprintf(cfg.precision, sizeof cfg.precision, "%s", precision);
	/* A synthetic stand-in of the same size and shape builds the trainer
	 * (model, steps per epoch, schedule); the real data replaces it. */
	cfg.synthetic_samples = train->n;
	cfg.synthetic_c = train->c;
	cfg.synthetic_h = train->h;
	cfg.synthetic_w = train->w;
	sd_conv2d_set_path(path);
	struct sd_trainer *t;
	char *why = NULL;
	if (sd_trainer_create(&t, &cfg, &why) < 0) {
		fprintf(stderr, "soak-accuracy: %s\n", why);
		exit(1);
	}
	sd_dataset_free(&t->train);
	sd_dataset_free(&t->test);
	t->train = *train;
	t->test = *test;
	double t0 = now_s(), acc = 0.0;
	while (t->step < t->total_steps) {
		double loss;
		if (sd_trainer_step(t, &loss, NULL, &why) < 0) {
			fprintf(stderr, "soak-accuracy: %s\n", why);
			exit(1);
		}
		if (t->step % t->steps_per_epoch == 0) {
			double tl;
			if (sd_trainer_evaluate(t, &tl, &acc, &why) < 0) {
				fprintf(stderr, "soak-accuracy: %s\n", why);
				exit(1);
			}
			printf("{\"path\": \"%s\", \"precision\": \"%s\", \"layout_block\": %d, "
			       "\"epoch\": %ld, \"step\": %ld, \"last_train_loss\": %.5f, "
			       "\"test_loss\": %.5f, \"test_accuracy\": %.4f, \"seconds\": %.0f}\n",
			       sd_conv2d_path_name(path), sd_conv2d_precision_name(t->precision),
			       sd_model_channel_block(t->model),
			       t->step / t->steps_per_epoch, t->step, loss, tl, acc, now_s() - t0);
			fflush(stdout);
		}
	}
	/* The datasets belong to the caller. */
	memset(&t->train, 0, sizeof t->train);
	memset(&t->test, 0, sizeof t->test);
	sd_trainer_destroy(t);
	return acc;
}

int main(int argc, char **argv)
{
	sd_blas_select_kernel(argv);
	const char *model = "resnet20", *which = "both", *prec = "fp32";
	const char *dir = "/usr/share/datasets/fashion-mnist";
	int epochs = 3, threads = 2;
	double margin = 0.5;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--model"))
			model = argv[i + 1];
		else if (!strcmp(argv[i], "--epochs"))
			epochs = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--threads"))
			threads = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--path"))
			which = argv[i + 1];
		else if (!strcmp(argv[i], "--margin"))
			margin = atof(argv[i + 1]);
		else if (!strcmp(argv[i], "--precision"))
			prec = argv[i + 1];
		else if (!strcmp(argv[i], "--data-dir"))
			dir = argv[i + 1];
		else {
			fprintf(stderr, "soak-accuracy: unknown option %s\n", argv[i]);
			return 2;
		}
	}
	if (epochs < 1 || threads < 1) {
		fprintf(stderr, "soak-accuracy: --epochs and --threads must be positive\n");
		return 2;
	}
	int both_prec = !strcmp(prec, "both");
	if (!both_prec && strcmp(prec, "fp32") && strcmp(prec, "bf16")) {
		fprintf(stderr, "soak-accuracy: --precision %s: not fp32, bf16 or both\n", prec);
		return 2;
	}
	if (both_prec)
		which = "onednn";
	int ref = strcmp(which, "onednn") != 0, dnn = strcmp(which, "im2col") != 0;
	if (dnn && !sd_conv2d_onednn_version()) {
		fprintf(stderr, "SKIP: this build has no oneDNN\n");
		return 77;
	}
	if (strcmp(prec, "fp32") && !sd_conv2d_bf16_available()) {
		fprintf(stderr, "SKIP: oneDNN has no bf16 kernels on this CPU\n");
		return 77;
	}
	openblas_set_num_threads(threads);
	omp_set_num_threads(threads);
	struct sd_dataset tr28, te28, tr, te;
	char *why = NULL;
	if (sd_dataset_load(&tr28, "fashion-mnist", dir, SD_SPLIT_TRAIN, &why) < 0 ||
	    sd_dataset_load(&te28, "fashion-mnist", dir, SD_SPLIT_TEST, &why) < 0) {
		fprintf(stderr, "SKIP: %s (Debian package dataset-fashion-mnist)\n", why);
		return 77;
	}
	/* The value the loader gives a black pixel: the minimum over the data. */
	float bg = tr28.images[0];
	for (size_t i = 0; i < (size_t)tr28.n * tr28.h * tr28.w; i++)
		if (tr28.images[i] < bg)
			bg = tr28.images[i];
	pad32(&tr, &tr28, bg);
	pad32(&te, &te28, bg);
	sd_dataset_free(&tr28);
	sd_dataset_free(&te28);
	printf("# %s, %d epochs, Fashion-MNIST padded to 32x32 (%d train, %d test), batch 128, "
	       "%d threads, precision %s, oneDNN %s\n", model, epochs, tr.n, te.n, threads, prec,
	       sd_conv2d_onednn_version() ? sd_conv2d_onednn_version() : "not built");
	fflush(stdout);
	if (both_prec) {
		double a32 = run(model, epochs, SD_CONV_ONEDNN, "fp32", &tr, &te);
		double a16 = run(model, epochs, SD_CONV_ONEDNN, "bf16", &tr, &te);
		sd_dataset_free(&tr);
		sd_dataset_free(&te);
		double d = 100.0 * (a16 - a32);
		printf("# test accuracy after %d epochs: fp32 %.2f%%, bf16 %.2f%%, difference %+.2f "
		       "points (allowed +-%.1f): %s\n", epochs, 100.0 * a32, 100.0 * a16, d, margin,
		       fabs(d) <= margin ? "ok" : "OUTSIDE");
		return fabs(d) <= margin ? 0 : 1;
	}
	double a_ref = ref ? run(model, epochs, SD_CONV_IM2COL, prec, &tr, &te) : NAN;
	double a_dnn = dnn ? run(model, epochs, SD_CONV_ONEDNN, prec, &tr, &te) : NAN;
	sd_dataset_free(&tr);
	sd_dataset_free(&te);
	if (!ref || !dnn)
		return 0;
	double d = 100.0 * (a_dnn - a_ref);
	printf("# test accuracy after %d epochs: im2col %.2f%%, oneDNN %.2f%%, difference %+.2f points "
	       "(allowed +-%.1f): %s\n", epochs, 100.0 * a_ref, 100.0 * a_dnn, d, margin,
	       fabs(d) <= margin ? "ok" : "OUTSIDE");
	return fabs(d) <= margin ? 0 : 1;
}
