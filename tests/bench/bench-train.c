/* tests/bench/bench-train.c - images/s of whole training steps (forward,
 * backward and the SGD update: what spotdeck-worker --standalone runs per
 * step) of one model on synthetic data, timed over warm steps only.
 *
 * usage: bench-train [--model NAME] [--batch N] [--threads N] [--warmup N]
 *                    [--steps N] [--precision fp32|bf16] [--profile | --profile-cpu]
 *
 * Prints one JSON line: images_per_sec (timed steps only), images per
 * second of the process's CPU time (see below), the median step,
 * flops_per_image (sd_model_flops_per_sample), the convolution path of each
 * conv node, and busy_other (the fraction of the machine's CPU time other
 * processes took during the timed steps: only figures taken near 0 compare
 * across runs).  --profile adds, on stderr, a table of the milliseconds each
 * node took per step, forward and backward, and the totals per kind of node;
 * --profile-cpu the same in process CPU time (meaningful with --threads 1
 * on a busy machine).
 * Synthetic CIFAR shapes (3x32x32, 10 classes) for the resnets, 1x28x28 for
 * mlp and cnn.  NAME may be an ONNX file (PATH.onnx, engine/onnx.h): the
 * synthetic images then take the file's input shape (10 classes, as the
 * synthetic data set has), as spotdeck-worker would train it.  --precision
 * is the trainer's (engine/train.h): bf16 runs the oneDNN convolutions on
 * bf16 inputs where the CPU has bf16 kernels, and fails where it has not. */
#include "engine/blas.h"
#include "engine/layers.h"
#include "engine/model.h"
#include "engine/onnx.h"
#include "engine/train.h"
#include "tests/bench/timing.h"

#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static int usage(void)
{
	fprintf(stderr, "usage: bench-train [--model NAME] [--batch N] [--threads N] [--warmup N] "
	        "[--steps N] [--precision fp32|bf16] [--profile | --profile-cpu]\n");
	return 2;
}

int main(int argc, char **argv)
{
	sd_blas_select_kernel(argv);
	const char *model = "resnet32", *precision = "fp32";
	int batch = 128, threads = 2, warmup = 3, steps = 10, profile = 0, cpu_clock = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--profile") || !strcmp(a, "--profile-cpu")) {
			profile = 1;
			cpu_clock = !strcmp(a, "--profile-cpu");
			continue;
		}
		if (!v)
			return usage();
		i++;
		if (!strcmp(a, "--model"))
			model = v;
		else if (!strcmp(a, "--batch"))
			batch = atoi(v);
		else if (!strcmp(a, "--threads"))
			threads = atoi(v);
		else if (!strcmp(a, "--warmup"))
			warmup = atoi(v);
		else if (!strcmp(a, "--steps"))
			steps = atoi(v);
		else if (!strcmp(a, "--precision"))
			precision = v;
		else
			return usage();
	}
	if (batch < 1 || threads < 1 || warmup < 0 || steps < 1)
		return usage();
	openblas_set_num_threads(threads);
	omp_set_num_threads(threads);

	struct sd_train_config cfg;
	sd_train_config_defaults(&cfg);
	snprintf(cfg.model, sizeof cfg.model, "%s", model);
	snprintf(cfg.precision, sizeof cfg.precision, "%s", precision);
	snprintf(cfg.dataset, sizeof cfg.dataset, "synthetic");
	cfg.global_batch = batch;
	cfg.eval_batch = batch;
	cfg.synthetic_samples = 4 * batch;
	int resnet = !strncmp(model, "resnet", 6);
	cfg.synthetic_c = resnet ? 3 : 1;
	cfg.synthetic_h = cfg.synthetic_w = resnet ? 32 : 28;
	cfg.epochs = (warmup + steps) / 4 + 1;
	struct sd_trainer *t;
	char *why = NULL;
	if (sd_onnx_is_path(model)) {
		uint8_t *bytes;
		size_t len;
		struct sd_onnx_info info;
		if (sd_onnx_read_file(model, &bytes, &len, &why) < 0 ||
		    sd_onnx_check(bytes, len, model, &info, &why) < 0) {
			fprintf(stderr, "bench-train: %s\n", why);
			free(why);
			return 1;
		}
		free(bytes);
		cfg.synthetic_c = info.c;
		cfg.synthetic_h = info.h;
		cfg.synthetic_w = info.w;
	}
	if (sd_trainer_create(&t, &cfg, &why) < 0) {
		fprintf(stderr, "bench-train: %s\n", why);
		free(why);
		return 1;
	}
	for (int i = 0; i < warmup; i++)
		if (sd_trainer_step(t, NULL, NULL, &why) < 0)
			goto fail;
	if (profile)
		sd_model_profile_start(t->model, cpu_clock);
	double *st = calloc((size_t)steps, sizeof(double));
	if (!st)
		return 1;
	double busy0 = machine_busy_s(), own0 = process_cpu_s(), wall0 = now_s();
	for (int i = 0; i < steps; i++) {
		double t0 = now_s();
		if (sd_trainer_step(t, NULL, NULL, &why) < 0)
			goto fail;
		st[i] = now_s() - t0;
	}
	double wall = now_s() - wall0;
	double busy = machine_busy_s() - busy0, own = process_cpu_s() - own0;
	/* Images per second of this process's CPU time: with one thread, the
	 * figure least disturbed by other processes on a shared machine (time
	 * spent waiting for a core is not counted); with more, threads
	 * spin-waiting at barriers count too. */
	double cpu_ips = own > 0 ? (double)steps * batch / own : 0.0;
	long procs = sysconf(_SC_NPROCESSORS_ONLN);
	double other = busy0 >= 0 && procs > 0 ? (busy - own) / (wall * (double)procs) : -1.0;
	if (other < 0 && busy0 >= 0)
		other = 0;
	qsort(st, (size_t)steps, sizeof *st, cmp_double);
	double med = steps % 2 ? st[steps / 2] : 0.5 * (st[steps / 2 - 1] + st[steps / 2]);

	if (profile) {
		int n;
		const struct sd_node_time *nt = sd_model_profile(t->model, &n);
		double tf = 0, tb = 0;
		const char *ops[] = { "conv", "batchnorm", "relu", "add", "maxpool", "avgpool",
		                      "linear", "bn+relu", "bn+add+relu" };
		enum { NOPS = sizeof ops / sizeof ops[0] };
		double of[NOPS] = { 0 }, ob[NOPS] = { 0 };
		fprintf(stderr, "%-16s %-11s %9s %9s   (%s ms per step, mean of %d)\n", "node", "op",
		        "fwd", "bwd", cpu_clock ? "CPU" : "wall", steps);
		for (int i = 0; i < n; i++) {
			double f = nt[i].forward_s * 1e3 / steps, b = nt[i].backward_s * 1e3 / steps;
			fprintf(stderr, "%-16s %-11s %9.2f %9.2f\n", nt[i].name, nt[i].op, f, b);
			tf += f;
			tb += b;
			for (int k = 0; k < NOPS; k++)
				if (!strcmp(nt[i].op, ops[k])) {
					of[k] += f;
					ob[k] += b;
				}
		}
		for (int k = 0; k < NOPS; k++)
			if (of[k] + ob[k] > 0)
				fprintf(stderr, "%-16s %-11s %9.2f %9.2f\n", "all", ops[k], of[k], ob[k]);
		fprintf(stderr, "%-16s %-11s %9.2f %9.2f  (step median %.2f ms)\n", "total", "", tf, tb,
		        med * 1e3);
	}
	printf("{\"engine\": \"spotdeck\", \"model\": \"%s\", \"precision\": \"%s\", "
	       "\"batch\": %d, \"threads\": %d, \"steps\": %d, \"warmup\": %d, \"images_per_sec\": %.2f, \"images_per_cpu_sec\": %.2f, "
	       "\"step_ms_median\": %.3f, "
	       "\"flops_per_image\": %.0f, \"busy_other\": %.3f, \"blas_kernel\": \"%s\", "
	       "\"conv_path\": \"%s\", \"layout_block\": %d, \"onednn\": \"%s\"}\n",
	       model, precision, batch, threads, steps, warmup, (double)steps * batch / wall, cpu_ips, med * 1e3,
	       sd_model_flops_per_sample(t->model), other, sd_blas_kernel(),
	       sd_conv2d_path_name(sd_conv2d_get_path()), sd_model_channel_block(t->model),
	       sd_conv2d_onednn_version() ? sd_conv2d_onednn_version() : "none");
	free(st);
	sd_trainer_destroy(t);
	return 0;
fail:
	fprintf(stderr, "bench-train: %s\n", why);
	free(why);
	sd_trainer_destroy(t);
	return 1;
}
