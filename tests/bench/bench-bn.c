/* tests/bench/bench-bn.c - the fused batch-norm (+ residual) + ReLU kernels
 * of engine/layers-blocked.c at the ResNet-32 shapes (batch 128), forward in
 * training mode and backward, against a plain copy of the same tensor: the
 * per-layer figure behind the "bn+relu" and "bn+add+relu" rows of
 * bench-train --profile.
 *
 * usage: bench-bn [-t threads] [-r repeats] [-n batch] [-k blk] [-c] [-b [-m]]
 *
 * For each shape: the best of `repeats` calls after one warm-up call (the
 * minimum is the figure least disturbed by other processes on a shared
 * machine), in milliseconds, and the memory traffic it stands for in GB/s:
 * the forward reads x twice (statistics, then the output) and r once and
 * writes y; the backward reads dy, y and x twice and writes dx and, with a
 * residual, dr.  "copy" is memcpy of one tensor (read + write), the rate a
 * pass over memory can reach here.  -c times in process CPU time instead of
 * wall time: with -t 1, the figure a busy machine disturbs least.  -b: the
 * forward also writes its bf16 NHWC copy of y (what a bf16 step has it do
 * for the next convolution, sd_batchnorm_act_forward_train_bf16) and the
 * backward writes dx in bf16 NHWC instead of float32 (for the convolution
 * that produced x, sd_batchnorm_act_backward_bf16), as a bf16 step does.
 * -m (with -b): the backward also reads its ReLU mask from the bf16 copy of
 * y instead of y (what a bf16 step does where the copy is kept).  The GB/s
 * count each tensor at its width.  Prints the
 * CPU model, the thread count and the fraction of the machine's CPU time
 * other processes took during the run. */
#include "engine/layers.h"
#include "src/base/rng.h"
#include "tests/bench/bench.h"
#include "tests/bench/timing.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The clock the timings read: wall (CLOCK_MONOTONIC) or process CPU time. */
static clockid_t bench_clock = CLOCK_MONOTONIC;

static double clock_s(void)
{
	struct timespec t;
	clock_gettime(bench_clock, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

struct shape {
	int c, hw, residual;
};

int main(int argc, char **argv)
{
	int threads = 2, repeats = 10, n = 128, blk = 16, bf16_copy = 0, bf16_mask = 0;
	for (int i = 1; i < argc; i += 2) {
		if (!strcmp(argv[i], "-c")) {
			bench_clock = CLOCK_PROCESS_CPUTIME_ID;
			i--;
			continue;
		}
		if (i + 1 >= argc)
			break;
		if (!strcmp(argv[i], "-t"))
			threads = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-r"))
			repeats = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-n"))
			n = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-k"))
			blk = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-b"))
			bf16_copy = 1;
		else if (!strcmp(argv[i], "-m"))
			bf16_mask = 1;
	}
	if (threads < 1 || repeats < 1 || n < 1 || (blk != 1 && blk != 8 && blk != 16) ||
	    (bf16_mask && (!bf16_copy || blk != 16))) {
		fprintf(stderr, "usage: bench-bn [-t threads] [-r repeats] [-n batch] [-k 1|8|16] [-c] "
		        "[-b [-m]] (-m with -b and -k 16)\n");
		return 2;
	}
	omp_set_num_threads(threads);
	/* The three stages of ResNet-32 (CIFAR, 32x32 input): every block ends
	 * in bn+add+relu, its first half in bn+relu. */
	const struct shape shapes[] = {
		{ 16, 1024, 0 }, { 16, 1024, 1 }, { 32, 256, 0 },
		{ 32, 256, 1 },  { 64, 64, 0 },   { 64, 64, 1 },
	};
	char cpu[256];
	bench_cpu_model(cpu, sizeof cpu);
	printf("CPU: %s; %d threads; batch %d, layout blk %d; best of %d, %s ms\n", cpu, threads, n,
	       blk, repeats, bench_clock == CLOCK_MONOTONIC ? "wall" : "process CPU");
	printf("%-18s %8s %8s %8s %8s %8s %8s\n", "shape", "copy", "GB/s", "fwd", "GB/s", "bwd",
	       "GB/s");
	double busy0 = machine_busy_s(), own0 = process_cpu_s(), wall0 = now_s();
	double sum_f = 0.0, sum_b = 0.0;
	for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
		const struct shape *sh = &shapes[si];
		const int c = sh->c, hw = sh->hw;
		const size_t nx = (size_t)n * c * hw;
		float *x = bench_falloc(nx), *r = bench_falloc(nx), *y = bench_falloc(nx), *dy = bench_falloc(nx);
		float *dx = bench_falloc(nx), *dr = bench_falloc(nx), *cp = bench_falloc(nx);
		float *gamma = bench_falloc(c), *beta = bench_falloc(c), *mean = bench_falloc(c), *invstd = bench_falloc(c);
		float *rm = bench_falloc(c), *rv = bench_falloc(c), *dg = bench_falloc(c), *db = bench_falloc(c);
		uint16_t *yh = bf16_copy ? (uint16_t *)bench_falloc((nx + 1) / 2) : NULL;
		uint16_t *dxh = bf16_copy && blk == 16 ? (uint16_t *)bench_falloc((nx + 1) / 2) : NULL;
		struct sd_rng rng;
		sd_rng_seed(&rng, 7, 7);
		for (size_t i = 0; i < nx; i++) {
			x[i] = 1.0f + sd_rng_normal(&rng);
			r[i] = sd_rng_normal(&rng);
			dy[i] = sd_rng_normal(&rng);
		}
		for (int i = 0; i < c; i++) {
			gamma[i] = 1.0f;
			rv[i] = 1.0f;
		}
		double tc = 1e30, tf = 1e30, tb = 1e30;
		for (int rep = 0; rep <= repeats; rep++) {
			double t0 = clock_s();
			memcpy(cp, x, nx * sizeof(float));
			double t1 = clock_s();
			sd_batchnorm_act_forward_train_bf16(y, yh, mean, invstd, rm, rv, x, NULL, 0,
			                                    sh->residual ? r : NULL, gamma, beta, n, c, hw,
			                                    blk, 1, 0.1f, 1e-5f);
			double t2 = clock_s();
			sd_batchnorm_act_backward_bf16(dxh ? NULL : dx, dxh, sh->residual ? dr : NULL, dg,
			                               db, dy, y, bf16_mask ? yh : NULL, NULL, x, NULL, 0, 0,
			                               mean,
			                               invstd, gamma, n, c, hw, blk, 1);
			double t3 = clock_s();
			if (rep == 0)
				continue;   /* warm-up: faults the pages in */
			if (t1 - t0 < tc)
				tc = t1 - t0;
			if (t2 - t1 < tf)
				tf = t2 - t1;
			if (t3 - t2 < tb)
				tb = t3 - t2;
		}
		const double gb = (double)nx * sizeof(float) / 1e9;
		/* In float32 widths: the bf16 copies are half of one. */
		const double fwd_bytes = gb * (3 + sh->residual + 0.5 * bf16_copy);
		const double bwd_bytes = gb * (7 + sh->residual - 0.5 * bf16_copy - 1.0 * bf16_mask);
		char label[48];
		snprintf(label, sizeof label, "c%d hw%d%s", c, hw, sh->residual ? " +res" : "");
		printf("%-18s %8.2f %8.1f %8.2f %8.1f %8.2f %8.1f\n", label, tc * 1e3, 2 * gb / tc,
		       tf * 1e3, fwd_bytes / tf, tb * 1e3, bwd_bytes / tb);
		/* ResNet-32: per stage 5 bn+relu and 5 bn+add+relu (plus the
		 * stem's bn+relu in the first). */
		const int count = sh->residual ? 5 : (si == 0 ? 6 : 5);
		sum_f += count * tf;
		sum_b += count * tb;
		free(x), free(r), free(y), free(dy), free(dx), free(dr), free(cp), free(gamma);
		free(beta), free(mean), free(invstd), free(rm), free(rv), free(dg), free(db);
		free(yh), free(dxh);
	}
	printf("resnet32 step, every batch-norm: forward %.1f ms, backward %.1f ms\n", sum_f * 1e3,
	       sum_b * 1e3);
	double wall = now_s() - wall0, busy = machine_busy_s() - busy0, own = process_cpu_s() - own0;
	long procs = sysconf(_SC_NPROCESSORS_ONLN);
	if (busy0 >= 0 && procs > 0)
		printf("other processes used %.0f%% of the %ld CPUs during the run\n",
		       100.0 * (busy - own > 0 ? busy - own : 0) / (wall * (double)procs), procs);
	return 0;
}
