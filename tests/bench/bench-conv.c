/* tests/bench/bench-conv.c - the two convolution paths of engine/layers.h
 * (im2col + OpenBLAS, oneDNN) side by side at every convolution shape of the
 * resnet20/32 models (batch 128) and the cnn (batch 64): the table that
 * sd_conv2d_path's "auto" choice in engine/layers.c comes from.
 *
 * usage: bench-conv [-t threads] [-r repeats] [-n resnet-batch] [-c]
 *
 * For each shape and path: forward, backward with dx (backward without dx
 * for the first layer of each model, which has no input gradient), best of
 * `repeats` runs after one warm-up run (the minimum is the figure least
 * disturbed by other processes on a shared machine), in milliseconds, and
 * the ratio im2col / oneDNN of forward + backward: above 1 oneDNN is faster.
 * The last column says what auto picks now.  Also prints the fraction of the
 * machine's CPU time other processes took during the run.  -c times in
 * process CPU time instead of wall time: with -t 1, the figure a busy
 * machine disturbs least. */
#include "engine/blas.h"
#include "engine/layers.h"
#include "src/base/rng.h"
#include "tests/bench/timing.h"

#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The clock time_path reads: wall (CLOCK_MONOTONIC) or process CPU time. */
static clockid_t bench_clock = CLOCK_MONOTONIC;

static double clock_s(void)
{
	struct timespec t;
	clock_gettime(bench_clock, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static float *falloc(size_t count)
{
	float *p = aligned_alloc(64, (count * sizeof(float) + 63) / 64 * 64);
	if (!p) {
		fprintf(stderr, "bench-conv: out of memory\n");
		exit(1);
	}
	memset(p, 0, count * sizeof(float));
	return p;
}

struct shape {
	const char *model;
	int n, c, hw, k, r, stride, pad, bias, first;
};

/* Best forward and backward milliseconds of shape s on the current path. */
static void time_path(const struct sd_conv2d_shape *s, int bias, int first, int repeats,
                      double *fwd_ms, double *bwd_ms)
{
	const size_t nx = (size_t)s->n * s->c * s->h * s->w, nw = (size_t)s->k * s->c * s->r * s->r;
	const size_t ny = (size_t)s->n * s->k * s->oh * s->ow;
	float *x = falloc(nx), *w = falloc(nw), *b = falloc(s->k), *y = falloc(ny);
	float *dy = falloc(ny), *dx = falloc(nx), *dw = falloc(nw), *db = falloc(s->k);
	float *ws = falloc(sd_conv2d_workspace_floats(s));
	struct sd_rng rng;
	sd_rng_seed(&rng, 5, 5);
	for (size_t i = 0; i < nx; i++)
		x[i] = sd_rng_normal(&rng);
	for (size_t i = 0; i < nw; i++)
		w[i] = 0.1f * sd_rng_normal(&rng);
	for (size_t i = 0; i < ny; i++)
		dy[i] = sd_rng_normal(&rng);
	*fwd_ms = *bwd_ms = 1e30;
	for (int r = 0; r <= repeats; r++) {
		double t0 = clock_s();
		sd_conv2d_forward(y, x, w, bias ? b : NULL, s, ws);
		double t1 = clock_s();
		sd_conv2d_backward(first ? NULL : dx, dw, bias ? db : NULL, dy, x, w, s, ws);
		double t2 = clock_s();
		if (r == 0)
			continue;   /* warm-up: builds oneDNN's kernels, faults pages in */
		if ((t1 - t0) * 1e3 < *fwd_ms)
			*fwd_ms = (t1 - t0) * 1e3;
		if ((t2 - t1) * 1e3 < *bwd_ms)
			*bwd_ms = (t2 - t1) * 1e3;
	}
	free(x), free(w), free(b), free(y), free(dy), free(dx), free(dw), free(db), free(ws);
}

int main(int argc, char **argv)
{
	sd_blas_select_kernel(argv);
	int threads = 2, repeats = 5, nres = 128;
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
			nres = atoi(argv[i + 1]);
	}
	if (threads < 1 || repeats < 1 || nres < 1) {
		fprintf(stderr, "usage: bench-conv [-t threads] [-r repeats] [-n resnet-batch] [-c]\n");
		return 2;
	}
	openblas_set_num_threads(threads);
	omp_set_num_threads(threads);
	const struct shape shapes[] = {
		{ "resnet", nres, 3, 32, 16, 3, 1, 1, 0, 1 },
		{ "resnet", nres, 16, 32, 16, 3, 1, 1, 0, 0 },
		{ "resnet", nres, 16, 32, 32, 3, 2, 1, 0, 0 },
		{ "resnet", nres, 32, 16, 32, 3, 1, 1, 0, 0 },
		{ "resnet", nres, 32, 16, 64, 3, 2, 1, 0, 0 },
		{ "resnet", nres, 64, 8, 64, 3, 1, 1, 0, 0 },
		{ "cnn", 64, 1, 28, 32, 5, 1, 2, 1, 1 },
		{ "cnn", 64, 32, 14, 64, 5, 1, 2, 1, 0 },
	};
	const char *ver = sd_conv2d_onednn_version();
	printf("oneDNN: %s; OpenBLAS kernel %s; %d threads; best of %d, %s ms\n",
	       ver ? ver : "not built", sd_blas_kernel(), threads, repeats,
	       bench_clock == CLOCK_MONOTONIC ? "wall" : "process CPU");
	printf("%-6s %-26s %8s %8s %8s %8s %7s  %-6s %s\n", "model", "shape", "i2c fwd", "i2c bwd",
	       "dnn fwd", "dnn bwd", "ratio", "auto", "oneDNN kernels (fwd / bwd-data / bwd-weights)");
	double busy0 = machine_busy_s(), own0 = process_cpu_s(), wall0 = now_s();
	for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
		const struct shape *sh = &shapes[i];
		struct sd_conv2d_shape s;
		if (sd_conv2d_shape_init(&s, sh->n, sh->c, sh->hw, sh->hw, sh->k, sh->r, sh->stride,
		                         sh->pad) < 0)
			return 1;
		double f[2], b[2];
		char label[64];
		snprintf(label, sizeof label, "n%d c%d %dx%d k%d r%d s%d%s", s.n, s.c, s.h, s.w, s.k,
		         s.r, s.stride, sh->first ? " (no dx)" : "");
		sd_conv2d_set_path(SD_CONV_AUTO);
		const char *pick = sd_conv2d_path(&s, sh->bias) == SD_CONV_ONEDNN ? "onednn" : "im2col";
		sd_conv2d_set_path(SD_CONV_IM2COL);
		time_path(&s, sh->bias, sh->first, repeats, &f[0], &b[0]);
		sd_conv2d_set_path(SD_CONV_ONEDNN);
		int dnn = sd_conv2d_path(&s, sh->bias) == SD_CONV_ONEDNN;
		if (dnn)
			time_path(&s, sh->bias, sh->first, repeats, &f[1], &b[1]);
		char impl[160];
		sd_conv2d_describe(&s, sh->bias, impl, sizeof impl);
		if (dnn)
			printf("%-6s %-26s %8.2f %8.2f %8.2f %8.2f %7.2f  %-6s %s\n", sh->model, label,
			       f[0], b[0], f[1], b[1], (f[0] + b[0]) / (f[1] + b[1]), pick, impl);
		else
			printf("%-6s %-26s %8.2f %8.2f %8s %8s %7s  %-6s %s\n", sh->model, label, f[0],
			       b[0], "-", "-", "-", pick, impl);
		fflush(stdout);
	}
	double wall = now_s() - wall0, busy = machine_busy_s() - busy0, own = process_cpu_s() - own0;
	long procs = sysconf(_SC_NPROCESSORS_ONLN);
	if (busy0 >= 0 && procs > 0)
		printf("other processes used %.0f%% of the %ld CPUs during the run\n",
		       100.0 * (busy - own > 0 ? busy - own : 0) / (wall * (double)procs), procs);
	return 0;
}
