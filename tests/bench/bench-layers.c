/* tests/bench/bench-layers.c - throughput of one training step of the `cnn`
 * model on the CPU layers (engine/layers.h):
 *
 *   conv 5x5x32 pad 2 (1x28x28) -> relu -> maxpool 2 -> conv 5x5x64 pad 2
 *   -> relu -> maxpool 2 -> fc 3136->128 -> relu -> fc 128->10 -> softmax xent
 *
 * at batch 64, forward and backward, no optimiser (that is the same for every
 * engine).  Prints images/s from the median step time and the median
 * milliseconds of each layer, so a regression points at its layer.
 *
 * usage: bench-layers [-t threads] [-o omp-threads] [-b blas-threads]
 *                     [-s steps] [-n batch]
 * -t sets both thread counts; the default is 2 (the comparison against
 * PyTorch is made on 2 cores).  -o and -b set OpenMP or OpenBLAS alone, to
 * see how the two thread pools get along. */
#include "engine/layers.h"
#include "src/base/rng.h"
#include "tests/bench/bench.h"
#include "tests/bench/timing.h"

#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum {
	L_CONV1, L_RELU1, L_POOL1, L_CONV2, L_RELU2, L_POOL2, L_FC1, L_RELU3, L_FC2, L_XENT,
	L_COUNT
};
static const char *const layer_names[L_COUNT] = {
	"conv1 5x5x32", "relu1", "maxpool1", "conv2 5x5x64", "relu2", "maxpool2",
	"fc1 3136x128", "relu3", "fc2 128x10", "softmax-xent",
};


/* GFLOP/s of a 1024^3 sgemm with `threads` OpenBLAS threads: tells how much
 * of the machine the run had (the same code is 2x slower on a shared core). */
static double sgemm_gflops(int threads)
{
	const int m = 1024;
	float *a = calloc((size_t)m * m, sizeof(float)), *b = calloc((size_t)m * m, sizeof(float));
	float *c = calloc((size_t)m * m, sizeof(float));
	double best = 0.0;
	if (!a || !b || !c)
		exit(1);
	openblas_set_num_threads(threads);
	for (int r = 0; r < 5; r++) {
		double t0 = now_s();
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, m, m, 1.0f, a, m, b, m,
		            0.0f, c, m);
		double g = 2.0 * m * m * m / (now_s() - t0) / 1e9;
		if (g > best)
			best = g;
	}
	free(a), free(b), free(c);
	return best;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Buffer of count floats; exits on OOM, which is fine for a benchmark. */
static float *falloc(size_t count)
{
	float *p = aligned_alloc(64, ((count * sizeof(float)) + 63) / 64 * 64);
	if (!p) {
		fprintf(stderr, "bench-layers: out of memory\n");
		exit(1);
	}
	memset(p, 0, count * sizeof(float));
	return p;
}

static void fill_normal(float *p, size_t count, float scale, struct sd_rng *rng)
{
	for (size_t i = 0; i < count; i++)
		p[i] = scale * sd_rng_normal(rng);
}

int main(int argc, char **argv)
{
	int omp = 2, blas = 2, steps = 50, n = 64;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "-t"))
			omp = blas = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-o"))
			omp = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-b"))
			blas = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-s"))
			steps = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-n"))
			n = atoi(argv[i + 1]);
	}
	if (omp < 1 || blas < 1 || steps < 1 || n < 1) {
		fprintf(stderr, "usage: bench-layers [-t threads] [-o omp-threads] "
		        "[-b blas-threads] [-s steps] [-n batch]\n");
		return 2;
	}
	double gf1 = sgemm_gflops(1), gfn = sgemm_gflops(blas);
	openblas_set_num_threads(blas);
	omp_set_num_threads(omp);

	char *cfg = openblas_get_config();
	printf("OpenBLAS: %s\n", cfg);
	const char *wp = getenv("OMP_WAIT_POLICY");
	printf("threads: OpenMP %d, OpenBLAS %d, OMP_WAIT_POLICY=%s; batch %d, %d steps\n",
	       omp, blas, wp ? wp : "(unset)", n, steps);
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f") && !strstr(cfg, "Skylake") && !strstr(cfg, "Cooperlake") &&
	    !strstr(cfg, "SapphireRapids"))
		printf("WARNING: the CPU has AVX-512 but OpenBLAS chose a slower kernel "
		       "(it does not know this CPU model); set OPENBLAS_CORETYPE=SkylakeX\n");

	struct sd_conv2d_shape c1, c2;
	if (sd_conv2d_shape_init(&c1, n, 1, 28, 28, 32, 5, 1, 2) ||
	    sd_conv2d_shape_init(&c2, n, 32, 14, 14, 64, 5, 1, 2)) {
		fprintf(stderr, "bench-layers: bad conv shape\n");
		return 1;
	}
	size_t ws_n = sd_conv2d_workspace_floats(&c1);
	if (sd_conv2d_workspace_floats(&c2) > ws_n)
		ws_n = sd_conv2d_workspace_floats(&c2);

	struct sd_rng rng;
	sd_rng_seed(&rng, 42, 1);
	const size_t a0 = (size_t)n * 784, a1 = (size_t)n * 32 * 784, a2 = (size_t)n * 32 * 196;
	const size_t a3 = (size_t)n * 64 * 196, a4 = (size_t)n * 3136, a5 = (size_t)n * 128;
	const size_t a6 = (size_t)n * 10;
	float *x = falloc(a0), *h1 = falloc(a1), *r1 = falloc(a1), *p1 = falloc(a2);
	float *h2 = falloc(a3), *r2 = falloc(a3), *p2 = falloc(a4), *h3 = falloc(a5);
	float *r3 = falloc(a5), *h4 = falloc(a6), *probs = falloc(a6);
	float *g1 = falloc(a1), *gp1 = falloc(a2), *g2 = falloc(a3), *gp2 = falloc(a4);
	float *g3 = falloc(a5), *g4 = falloc(a6);
	int32_t *am1 = malloc(sizeof(int32_t) * a2), *am2 = malloc(sizeof(int32_t) * a4);
	float *w1 = falloc(32 * 25), *b1 = falloc(32), *w2 = falloc(64 * 800), *b2 = falloc(64);
	float *w3 = falloc(128 * 3136), *b3 = falloc(128), *w4 = falloc(10 * 128), *b4 = falloc(10);
	float *dw1 = falloc(32 * 25), *db1 = falloc(32), *dw2 = falloc(64 * 800), *db2 = falloc(64);
	float *dw3 = falloc(128 * 3136), *db3 = falloc(128), *dw4 = falloc(10 * 128), *db4 = falloc(10);
	float *ws = falloc(ws_n);
	uint8_t *labels = malloc((size_t)n);
	if (!am1 || !am2 || !labels) {
		fprintf(stderr, "bench-layers: out of memory\n");
		return 1;
	}
	fill_normal(x, a0, 1.0f, &rng);
	fill_normal(w1, 32 * 25, 0.2f, &rng);
	fill_normal(w2, 64 * 800, 0.035f, &rng);
	fill_normal(w3, 128 * 3136, 0.018f, &rng);
	fill_normal(w4, 10 * 128, 0.09f, &rng);
	for (int i = 0; i < n; i++)
		labels[i] = (uint8_t)sd_rng_below(&rng, 10);

	printf("sgemm 1024^3: %.0f GFLOP/s on 1 thread, %.0f on %d\n", gf1, gfn, blas);

	const int warmup = 5;
	double *lf = calloc((size_t)steps * L_COUNT, sizeof(double));
	double *lb = calloc((size_t)steps * L_COUNT, sizeof(double));
	double *st = calloc((size_t)steps, sizeof(double));
	if (!lf || !lb || !st)
		return 1;
	double sink = 0.0, busy0 = 0.0, own0 = 0.0, wall0 = 0.0;
	for (int it = -warmup; it < steps; it++) {
		if (it == 0) {
			busy0 = machine_busy_s();
			own0 = process_cpu_s();
			wall0 = now_s();
		}
		double t[2 * L_COUNT + 1];
		int k = 0;
		t[k++] = now_s();
		sd_conv2d_forward(h1, x, w1, b1, &c1, ws); t[k++] = now_s();
		sd_relu_forward(r1, h1, a1); t[k++] = now_s();
		sd_maxpool_forward(p1, am1, r1, n, 32, 28, 28, 2, 2); t[k++] = now_s();
		sd_conv2d_forward(h2, p1, w2, b2, &c2, ws); t[k++] = now_s();
		sd_relu_forward(r2, h2, a3); t[k++] = now_s();
		sd_maxpool_forward(p2, am2, r2, n, 64, 14, 14, 2, 2); t[k++] = now_s();
		sd_linear_forward(h3, p2, w3, b3, n, 3136, 128); t[k++] = now_s();
		sd_relu_forward(r3, h3, a5); t[k++] = now_s();
		sd_linear_forward(h4, r3, w4, b4, n, 128, 10); t[k++] = now_s();
		sink += sd_softmax_xent_forward(probs, NULL, h4, labels, n, 10); t[k++] = now_s();
		/* Backward in reverse order; each timestamp closes a layer. */
		sd_softmax_xent_backward(g4, probs, labels, n, 10, 1.0f / (float)n); t[k++] = now_s();
		sd_linear_backward(g3, dw4, db4, g4, r3, w4, n, 128, 10); t[k++] = now_s();
		sd_relu_backward(g3, g3, r3, a5); t[k++] = now_s();
		sd_linear_backward(gp2, dw3, db3, g3, p2, w3, n, 3136, 128); t[k++] = now_s();
		sd_maxpool_backward(g2, gp2, am2, n, 64, 14, 14, 2, 2); t[k++] = now_s();
		sd_relu_backward(g2, g2, r2, a3); t[k++] = now_s();
		sd_conv2d_backward(gp1, dw2, db2, g2, p1, w2, &c2, ws); t[k++] = now_s();
		sd_maxpool_backward(g1, gp1, am1, n, 32, 28, 28, 2, 2); t[k++] = now_s();
		sd_relu_backward(g1, g1, r1, a1); t[k++] = now_s();
		/* The first layer needs no input gradient. */
		sd_conv2d_backward(NULL, dw1, db1, g1, x, w1, &c1, ws); t[k++] = now_s();
		if (it < 0)
			continue;
		st[it] = t[2 * L_COUNT] - t[0];
		for (int l = 0; l < L_COUNT; l++) {
			lf[(size_t)l * steps + it] = t[l + 1] - t[l];
			lb[(size_t)l * steps + it] = t[2 * L_COUNT - l] - t[2 * L_COUNT - l - 1];
		}
	}
	double busy = machine_busy_s() - busy0, own = process_cpu_s() - own0;
	double wall = now_s() - wall0;
	long procs = sysconf(_SC_NPROCESSORS_ONLN);
	double step_med = median(st, steps);
	if (busy0 >= 0.0 && procs > 0)
		printf("other processes used %.0f%% of the %ld CPUs during the run "
		       "(numbers are only meaningful near 0%%)\n",
		       100.0 * (busy - own > 0.0 ? busy - own : 0.0) / (wall * (double)procs), procs);
	printf("step (fwd+bwd): median %.3f ms -> %.0f images/s (best %.0f)\n", step_med * 1e3,
	       (double)n / step_med, (double)n / st[0]);
	printf("%-14s %9s %9s\n", "layer", "fwd ms", "bwd ms");
	double sf = 0.0, sb = 0.0;
	for (int l = 0; l < L_COUNT; l++) {
		double mf = median(lf + (size_t)l * steps, steps);
		double mb = median(lb + (size_t)l * steps, steps);
		sf += mf;
		sb += mb;
		printf("%-14s %9.3f %9.3f\n", layer_names[l], mf * 1e3, mb * 1e3);
	}
	printf("%-14s %9.3f %9.3f\n", "sum of medians", sf * 1e3, sb * 1e3);
	/* Against the machine's own sgemm peak, measured above (the engine
	 * against PyTorch is tests/bench/engine-vs-torch). */
	double flops = 0;
	{
		/* conv: 2*k*c*r*r*oh*ow per sample, fc: 2*in*out; backward ~2x. */
		double fwd = 2.0 * 32 * 1 * 25 * 784 + 2.0 * 64 * 32 * 25 * 196 + 2.0 * 3136 * 128 + 2.0 * 128 * 10;
		flops = 3 * fwd * n;
	}
	bench_ratio("bench-layers", "cnn step GFLOP/s / sgemm GFLOP/s on the same threads",
	            flops / step_med / 1e9 / gfn, 0, 0);
	if (sink != sink)
		printf("(loss is NaN)\n");
	return 0;
}
