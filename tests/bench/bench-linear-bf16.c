/* tests/bench/bench-linear-bf16.c - a linear layer's GEMMs in float32
 * (OpenBLAS sgemm, sd_linear_forward/backward in fp32 precision) against
 * bf16 through oneDNN's matmul (engine/matmul-dnnl.h, called directly so
 * that shapes below the rule are measured too), at the linear shapes of
 * the built-in models and of examples/char-gpt: the table behind
 * sd_linear_dnnl_bf16_wins (engine/matmul-dnnl.c).
 *
 * usage: bench-linear-bf16 [-t threads] [-r repeats]
 *
 * Each row times one forward (y = x w^T + b) and one backward (dx and dw;
 * the bias gradient is the same float32 code on both sides and is left
 * out), medians of `repeats` calls of each precision, alternated, after two
 * warm-up calls, in wall and in process-CPU microseconds (the latter the
 * figure least moved by other processes on a shared machine, the former
 * what a run waits), and fp32 / bf16 (above 1: bf16 is faster).  bf16's times
 * include the float32 -> bf16 reorders of x, w and dy a training step pays.
 * Also prints the CPU model, oneDNN's kernel names per shape, the rule's
 * verdict per shape and the fraction of the machine other processes took
 * during the run.  Exits 77 where oneDNN has no bf16 kernels. */
#include "tests/bench/timing.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/layers.h"
#include "engine/matmul-dnnl.h"

void openblas_set_num_threads(int num_threads);

struct shape {
	const char *what;
	int n, in, out;
};

static const struct shape shapes[] = {
	{ "resnet fc (batch 128)", 128, 64, 10 },
	{ "mlp fc1 (batch 64)", 64, 784, 256 },
	{ "mlp fc2", 64, 256, 10 },
	{ "cnn fc1 (batch 64)", 64, 3136, 128 },
	{ "cnn fc2", 64, 128, 10 },
	{ "cnn fc1 (batch 256)", 256, 3136, 128 },
	{ "gpt qkv (64 x 64 tokens)", 4096, 128, 384 },
	{ "gpt attn proj", 4096, 128, 128 },
	{ "gpt mlp fc", 4096, 128, 512 },
	{ "gpt mlp proj", 4096, 512, 128 },
	{ "gpt lm head", 4096, 128, 256 },
	{ "gpt qkv (8 x 64 tokens)", 512, 128, 384 },
	{ "gpt mlp proj (8 x 64)", 512, 512, 128 },
	{ "2^18 multiply-adds", 64, 128, 32 },
	{ "2^20 multiply-adds", 64, 256, 64 },
	{ "2^21 multiply-adds", 64, 256, 128 },
	{ "2^21, other sides", 128, 128, 128 },
	{ "2^22 multiply-adds", 64, 512, 128 },
	{ "square 256", 256, 256, 256 },
	{ "square 1024", 1024, 1024, 1024 },
};

static float *fill(size_t n, unsigned seed)
{
	float *p = malloc((n ? n : 1) * sizeof *p);
	if (!p)
		exit(1);
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1664525u + 1013904223u;
		p[i] = (float)(seed >> 8) / 16777216.0f - 0.5f;
	}
	return p;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* One forward + backward, bf16 through oneDNN or float32 through the
 * sgemm; exits on a oneDNN failure. */
static void call(const struct shape *s, int bf16, float *y, float *x, float *w, float *b,
                 float *dy, float *dx, float *dw)
{
	if (bf16) {
		if (sd_linear_dnnl_forward_bf16(y, x, w, b, s->n, s->in, s->out) < 0 ||
		    sd_linear_dnnl_backward_bf16(dx, dw, dy, x, w, s->n, s->in, s->out, 1) < 0) {
			fprintf(stderr, "bench-linear-bf16: %s: oneDNN call failed\n", s->what);
			exit(1);
		}
	} else {
		sd_linear_forward(y, x, w, b, s->n, s->in, s->out);
		sd_linear_backward(dx, dw, NULL, dy, x, w, s->n, s->in, s->out);
	}
}

/* Medians of `repeats` calls of each precision, alternated (fp32, bf16,
 * fp32, ...) so that a change in the machine's load hits both alike, after
 * two warm-up calls of each: wall and process-CPU microseconds, [0] fp32,
 * [1] bf16. */
static void time_calls(const struct shape *s, int repeats, double wall[2], double cpu[2],
                       float *y, float *x, float *w, float *b, float *dy, float *dx, float *dw)
{
	double *t = malloc(sizeof *t * (size_t)repeats * 4);
	if (!t)
		exit(1);
	for (int r = -2; r < repeats; r++)
		for (int h = 0; h < 2; h++) {
			double t0 = now_s(), c0 = process_cpu_s();
			call(s, h, y, x, w, b, dy, dx, dw);
			if (r >= 0) {
				t[(size_t)(2 * h) * repeats + r] = (now_s() - t0) * 1e6;
				t[(size_t)(2 * h + 1) * repeats + r] = (process_cpu_s() - c0) * 1e6;
			}
		}
	for (int k = 0; k < 4; k++)
		qsort(t + (size_t)k * repeats, (size_t)repeats, sizeof *t, cmp_double);
	for (int h = 0; h < 2; h++) {
		wall[h] = t[(size_t)(2 * h) * repeats + repeats / 2];
		cpu[h] = t[(size_t)(2 * h + 1) * repeats + repeats / 2];
	}
	free(t);
}

static void print_cpu(void)
{
	char line[4096], model[256] = "?";
	int amx = 0, bf16 = 0;
	FILE *f = fopen("/proc/cpuinfo", "r");
	while (f && fgets(line, sizeof line, f)) {
		if (!strncmp(line, "model name", 10) && strchr(line, ':'))
			snprintf(model, sizeof model, "%s", strchr(line, ':') + 2);
		if (!strncmp(line, "flags", 5)) {
			amx = strstr(line, " amx_bf16") != NULL;
			bf16 = strstr(line, " avx512_bf16") != NULL;
		}
	}
	if (f)
		fclose(f);
	model[strcspn(model, "\n")] = 0;
	printf("CPU: %s; amx_bf16 %s, avx512_bf16 %s; oneDNN bf16 kernels: %s\n", model,
	       amx ? "yes" : "no", bf16 ? "yes" : "no", sd_conv2d_bf16_isa());
}

int main(int argc, char **argv)
{
	int threads = 2, repeats = 21, opt;
	while ((opt = getopt(argc, argv, "t:r:")) != -1) {
		if (opt == 't')
			threads = atoi(optarg);
		else if (opt == 'r')
			repeats = atoi(optarg);
		else
			break;
	}
	if (threads < 1 || repeats < 1 || optind < argc) {
		fprintf(stderr, "usage: bench-linear-bf16 [-t threads] [-r repeats]\n");
		return 2;
	}
	if (!sd_conv2d_bf16_available()) {
		fprintf(stderr, "SKIP: bench-linear-bf16: oneDNN has no bf16 kernels here\n");
		return 77;
	}
	openblas_set_num_threads(threads);
	omp_set_num_threads(threads);
	sd_conv2d_set_precision(SD_CONV_FP32);
	print_cpu();
	printf("threads %d, median of %d calls; microseconds per forward + backward (dx, dw)\n",
	       threads, repeats);
	printf("%-26s %5s %5s %5s %9s %9s %6s %9s %9s %6s %5s  %s\n", "shape", "n", "in", "out",
	       "fp32 us", "bf16 us", "ratio", "fp32 cpu", "bf16 cpu", "ratio", "rule",
	       "oneDNN kernels (fwd / dx / dw)");
	double busy0 = machine_busy_s(), cpu0 = process_cpu_s(), wall0 = now_s();
	for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
		const struct shape *s = &shapes[i];
		size_t nx = (size_t)s->n * s->in, nw = (size_t)s->out * s->in,
		       ny = (size_t)s->n * s->out;
		float *x = fill(nx, 1), *w = fill(nw, 2), *b = fill((size_t)s->out, 3);
		float *dy = fill(ny, 4), *y = fill(ny, 0), *dx = fill(nx, 0), *dw = fill(nw, 0);
		double wall[2], cpu[2];
		time_calls(s, repeats, wall, cpu, y, x, w, b, dy, dx, dw);
		char impl[160];
		sd_linear_dnnl_describe(s->n, s->in, s->out, 1, impl, sizeof impl);
		printf("%-26s %5d %5d %5d %9.1f %9.1f %6.2f %9.1f %9.1f %6.2f %5s  %s\n", s->what,
		       s->n, s->in, s->out, wall[0], wall[1], wall[0] / wall[1], cpu[0], cpu[1],
		       cpu[0] / cpu[1], sd_linear_dnnl_bf16_wins(s->n, s->in, s->out) ? "bf16" : "fp32",
		       impl);
		free(x), free(w), free(b), free(dy), free(y), free(dx), free(dw);
	}
	double wall = now_s() - wall0, busy = machine_busy_s() - busy0, cpu = process_cpu_s() - cpu0;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	if (busy0 >= 0 && ncpu > 0)
		printf("other processes took %.0f %% of the machine during the run\n",
		       100.0 * (busy - cpu) / (wall * (double)ncpu));
	return sd_linear_dnnl_failures() ? 1 : 0;
}
