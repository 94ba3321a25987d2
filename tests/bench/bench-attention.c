/* tests/bench/bench-attention.c - milliseconds per call of the fused
 * causal attention (engine/layers-seq.h) forward and backward, and of
 * layer norm forward + backward, against PyTorch 1.13 run side by side on
 * the same shapes and thread count.  torch 1.13 has no fused
 * scaled_dot_product_attention, so its side is the composition a GPT
 * export runs: q k^T * scale, masked_fill(-inf), softmax, @ v, with
 * autograd for the backward.  Default shape: B 8, H 4, T 64, D 32 (the
 * example GPT's attention at batch 8; layer norm over its (B T, 128)
 * activations), 2 threads.  Prints the CPU model, the machine's load
 * before and the CPU time other processes took during the run, and one
 * "ratio:" line per kernel (torch ms / spotdeck ms, no target).  Without
 * torch, prints spotdeck's times only.
 * Usage: bench-attention [-t threads] [-r repeats] [-b B] [-h H] [-T T] [-d D] */
#include "engine/blas.h"
#include "engine/layers-seq.h"
#include "src/base/rng.h"
#include "tests/bench/bench.h"
#include "tests/bench/timing.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The torch side: prints "att_fwd att_bwd ln" in ms (best of repeats; the
 * backward timed alone, after an untimed forward, as spotdeck's is). */
static const char torch_script[] =
	"import sys, time, torch\n"
	"b, h, t, d, c, threads, reps = map(int, sys.argv[1:8])\n"
	"torch.set_num_threads(threads)\n"
	"g = torch.Generator().manual_seed(1)\n"
	"q, k, v = (torch.randn(b, h, t, d, generator=g).requires_grad_() for _ in range(3))\n"
	"dy = torch.randn(b, h, t, d, generator=g)\n"
	"mask = torch.tril(torch.ones(t, t, dtype=torch.bool))\n"
	"scale = 1.0 / d ** 0.5\n"
	"def att():\n"
	"    a = (q @ k.transpose(-2, -1)) * scale\n"
	"    a = a.masked_fill(~mask, float('-inf'))\n"
	"    return torch.softmax(a, dim=-1) @ v\n"
	"x = torch.randn(b * t, c, generator=g).requires_grad_()\n"
	"ln = torch.nn.LayerNorm(c)\n"
	"dx = torch.randn(b * t, c, generator=g)\n"
	"def best(f):\n"
	"    f()\n"
	"    r = []\n"
	"    for _ in range(reps):\n"
	"        t0 = time.perf_counter(); f(); r.append(time.perf_counter() - t0)\n"
	"    return min(r) * 1e3\n"
	"def fwd():\n"
	"    with torch.no_grad(): att()\n"
	"def bwd():\n"
	"    r = []\n"
	"    for _ in range(reps + 1):\n"
	"        y = att()\n"
	"        t0 = time.perf_counter(); y.backward(dy); r.append(time.perf_counter() - t0)\n"
	"    return min(r[1:]) * 1e3\n"
	"def ln_fb():\n"
	"    y = ln(x); y.backward(dx)\n"
	"print('%.4f %.4f %.4f' % (best(fwd), bwd(), best(ln_fb)))\n";

/* Best of repeats, in ms, of the calls below (after one warm-up). */
#define BEST(out, reps, stmt) do { \
	stmt; \
	double best_ = 1e30; \
	for (int r_ = 0; r_ < (reps); r_++) { \
		double t0_ = now_s(); \
		stmt; \
		double dt_ = now_s() - t0_; \
		best_ = dt_ < best_ ? dt_ : best_; \
	} \
	(out) = best_ * 1e3; \
} while (0)

int main(int argc, char **argv)
{
	int threads = 2, reps = 50, b = 8, h = 4, t = 64, d = 32;
	sd_blas_select_kernel(argv);
	for (int i = 1; i + 1 < argc; i += 2) {
		int v = atoi(argv[i + 1]);
		if (!strcmp(argv[i], "-t"))
			threads = v;
		else if (!strcmp(argv[i], "-r"))
			reps = v;
		else if (!strcmp(argv[i], "-b"))
			b = v;
		else if (!strcmp(argv[i], "-h"))
			h = v;
		else if (!strcmp(argv[i], "-T"))
			t = v;
		else if (!strcmp(argv[i], "-d"))
			d = v;
		else
			threads = 0;
	}
	if (threads < 1 || reps < 1 || b < 1 || h < 1 || t < 1 || d < 1) {
		fprintf(stderr, "usage: bench-attention [-t threads] [-r repeats] [-b B] [-h H] [-T T] [-d D]\n");
		return 2;
	}
	omp_set_num_threads(threads);
	openblas_set_num_threads(threads);
	int c = h * d, n = b * t;
	size_t na = (size_t)b * h * t * d, nt = (size_t)b * h * t * t, nc = (size_t)n * c;
	float *q = bench_falloc(na), *k = bench_falloc(na), *v = bench_falloc(na), *y = bench_falloc(na), *dy = bench_falloc(na);
	float *dq = bench_falloc(na), *dk = bench_falloc(na), *dv = bench_falloc(na), *probs = bench_falloc(nt),
	      *ws = bench_falloc(nt);
	float *x = bench_falloc(nc), *ly = bench_falloc(nc), *ldy = bench_falloc(nc), *ldx = bench_falloc(nc);
	float *gamma = bench_falloc(c), *beta = bench_falloc(c), *dg = bench_falloc(c), *db = bench_falloc(c);
	float *mean = bench_falloc(n), *rstd = bench_falloc(n);
	struct sd_rng rng;
	sd_rng_seed(&rng, 1, 1);
	for (size_t i = 0; i < na; i++) {
		q[i] = sd_rng_normal(&rng);
		k[i] = sd_rng_normal(&rng);
		v[i] = sd_rng_normal(&rng);
		dy[i] = sd_rng_normal(&rng);
	}
	for (size_t i = 0; i < nc; i++) {
		x[i] = sd_rng_normal(&rng);
		ldy[i] = sd_rng_normal(&rng);
	}
	for (int i = 0; i < c; i++)
		gamma[i] = 1.0f;
	float scale = 1.0f / sqrtf((float)d);

	char cpu[256];
	bench_cpu_model(cpu, sizeof cpu);
	double load = -1.0;
	FILE *lf = fopen("/proc/loadavg", "r");
	if (lf) {
		if (fscanf(lf, "%lf", &load) != 1)
			load = -1.0;
		fclose(lf);
	}
	printf("CPU: %s; OpenBLAS kernel %s; %d threads; load %.2f before\n", cpu, sd_blas_kernel(),
	       threads, load);
	printf("attention B %d H %d T %d D %d, layer norm (%d, %d); best of %d, wall ms\n", b, h, t,
	       d, n, c, reps);

	double busy0 = machine_busy_s(), own0 = process_cpu_s(), wall0 = now_s();
	double af, ab, lnt;
	BEST(af, reps, sd_attention_causal_forward(y, probs, q, k, v, b, h, t, d, scale));
	BEST(ab, reps, sd_attention_causal_backward(dq, dk, dv, dy, q, k, v, probs, ws, b, h, t, d,
	                                            scale));
	BEST(lnt, reps, (sd_layernorm_forward(ly, mean, rstd, x, gamma, beta, n, c, 1e-5f),
	                 sd_layernorm_backward(ldx, dg, db, ldy, x, mean, rstd, gamma, n, c)));
	double other = machine_busy_s() - busy0 - (process_cpu_s() - own0);
	printf("%-28s %10s %10s\n", "", "spotdeck", "torch");

	char cmd[8192];
	snprintf(cmd, sizeof cmd, "/usr/bin/python3 -c \"$BENCH_ATT_PY\" %d %d %d %d %d %d %d 2>/dev/null",
	         b, h, t, d, c, threads, reps);
	setenv("BENCH_ATT_PY", torch_script, 1);
	double tf = 0, tb = 0, tl = 0;
	int have_torch = 0;
	FILE *p = popen(cmd, "r");
	if (p) {
		have_torch = fscanf(p, "%lf %lf %lf", &tf, &tb, &tl) == 3;
		if (pclose(p) != 0)
			have_torch = 0;
	}
	if (have_torch) {
		printf("%-28s %10.3f %10.3f\n", "attention forward", af, tf);
		printf("%-28s %10.3f %10.3f\n", "attention backward", ab, tb);
		printf("%-28s %10.3f %10.3f\n", "layer norm forward+backward", lnt, tl);
	} else {
		printf("%-28s %10.3f %10s\n", "attention forward", af, "-");
		printf("%-28s %10.3f %10s\n", "attention backward", ab, "-");
		printf("%-28s %10.3f %10s\n", "layer norm forward+backward", lnt, "-");
		printf("(no torch: /usr/bin/python3 cannot import torch)\n");
	}
	printf("other processes took %.2f CPU s during %.2f s of spotdeck timing\n", other,
	       now_s() - wall0);
	if (have_torch) {
		bench_ratio("bench-attention", "attention forward, torch ms / spotdeck ms", tf / af, 0, 0);
		bench_ratio("bench-attention", "attention backward, torch ms / spotdeck ms", tb / ab, 0, 0);
		bench_ratio("bench-attention", "layer norm fwd+bwd, torch ms / spotdeck ms", tl / lnt, 0,
		            0);
	}
	return bench_exit();
}
