/* tests/bench/bench-sgemm.c - the machine's single-precision GEMM peak as
 * OpenBLAS reaches it, the yardstick for the engine's GFLOP/s.
 * usage: bench-sgemm [THREADS] [N]; prints {"sgemm_gflops": X, ...}. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "engine/blas.h"

void openblas_set_num_threads(int num_threads);
char *openblas_get_corename(void);

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	/* Measure the kernel the engine runs (engine/blas.h). */
	sd_blas_select_kernel(argv);
	int threads = argc > 1 ? atoi(argv[1]) : 2;
	int n = argc > 2 ? atoi(argv[2]) : 2048;
	if (threads < 1 || n < 64) {
		fprintf(stderr, "usage: bench-sgemm [THREADS>=1] [N>=64]\n");
		return 2;
	}
	openblas_set_num_threads(threads);
	float *a = malloc(sizeof(float) * n * n), *b = malloc(sizeof(float) * n * n),
	      *c = malloc(sizeof(float) * n * n);
	if (!a || !b || !c)
		return 1;
	for (long i = 0; i < (long)n * n; i++) {
		a[i] = (float)(i % 7) * 0.1f;
		b[i] = (float)(i % 5) * 0.1f;
	}
	double best = 0;
	for (int rep = 0; rep < 5; rep++) {
		double t0 = now();
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
		double g = 2.0 * n * n * (double)n / (now() - t0) / 1e9;
		if (g > best)
			best = g;
	}
	printf("{\"sgemm_gflops\": %.1f, \"n\": %d, \"threads\": %d, \"kernel\": \"%s\"}\n", best, n,
	       threads, openblas_get_corename());
	free(a);
	free(b);
	free(c);
	return 0;
}
