/* tests/engine/test-layers-seq-dump.c - the C half of
 * tests/engine/test-layers-seq-torch.sh: runs layer norm, both GELUs and
 * the fused causal attention of engine/layers-seq.h forward and backward on
 * random inputs, and writes inputs and results as raw little-endian float32
 * files DIR/NAME.f32 for tests/engine/layers_seq_torch.py to compare
 * with PyTorch's autograd.  Shapes are written to DIR/shapes.txt.
 * Usage: test-layers-seq-dump DIR.  Exits 1 when a file cannot be written. */
#include "engine/blas.h"
#include "engine/layers-seq.h"
#include "src/base/rng.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

static const char *dir;
static struct sd_rng rng;

/* Every buffer, freed at the end (the sanitizer build checks for leaks). */
static float *owned[64];
static int nowned;

static float *falloc(size_t count)
{
	float *p = calloc(count, sizeof(float));
	if (!p || nowned == (int)(sizeof owned / sizeof owned[0])) {
		fprintf(stderr, "test-layers-seq-dump: out of memory\n");
		exit(1);
	}
	owned[nowned++] = p;
	return p;
}

static float *normal(size_t count, float scale)
{
	float *p = falloc(count);
	for (size_t i = 0; i < count; i++)
		p[i] = scale * sd_rng_normal(&rng);
	return p;
}

static void put(const char *name, const float *p, size_t count)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s.f32", dir, name);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(p, sizeof(float), count, f) != count || fclose(f) != 0) {
		fprintf(stderr, "test-layers-seq-dump: %s: cannot write\n", path);
		exit(1);
	}
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: test-layers-seq-dump DIR\n");
		return 1;
	}
	sd_blas_select_kernel(argv);
	dir = argv[1];
	sd_rng_seed(&rng, 20261206, 7);
	omp_set_num_threads(2);

	/* Layer norm: rows off-centre, eps as torch's default. */
	const int n = 64, c = 128;
	const float eps = 1e-5f;
	float *x = normal((size_t)n * c, 2.0f), *gamma = normal(c, 1.0f), *beta = normal(c, 1.0f);
	for (int i = 0; i < n * c; i++)
		x[i] += 1.5f;
	float *dy = normal((size_t)n * c, 1.0f), *y = falloc((size_t)n * c);
	float *dx = falloc((size_t)n * c), *dg = falloc(c), *db = falloc(c);
	float *mean = falloc(n), *rstd = falloc(n);
	sd_layernorm_forward(y, mean, rstd, x, gamma, beta, n, c, eps);
	sd_layernorm_backward(dx, dg, db, dy, x, mean, rstd, gamma, n, c);
	put("ln_x", x, (size_t)n * c);
	put("ln_gamma", gamma, c);
	put("ln_beta", beta, c);
	put("ln_dy", dy, (size_t)n * c);
	put("ln_y", y, (size_t)n * c);
	put("ln_dx", dx, (size_t)n * c);
	put("ln_dgamma", dg, c);
	put("ln_dbeta", db, c);

	/* GELU, both forms, over a range that reaches the tails. */
	const size_t g = 4096;
	float *gx = normal(g, 3.0f), *gdy = normal(g, 1.0f), *gy = falloc(g), *gdx = falloc(g);
	put("gelu_x", gx, g);
	put("gelu_dy", gdy, g);
	sd_gelu_forward(gy, gx, g, SD_GELU_ERF);
	sd_gelu_backward(gdx, gdy, gx, g, SD_GELU_ERF);
	put("gelu_erf_y", gy, g);
	put("gelu_erf_dx", gdx, g);
	sd_gelu_forward(gy, gx, g, SD_GELU_TANH);
	sd_gelu_backward(gdx, gdy, gx, g, SD_GELU_TANH);
	put("gelu_tanh_y", gy, g);
	put("gelu_tanh_dx", gdx, g);

	/* Causal attention at a small GPT's head shape; T = 40 spans a whole
	 * and a partial causal block (SD_ATT_BLOCK, 32). */
	const int b = 2, h = 4, t = 40, d = 16;
	const size_t na = (size_t)b * h * t * d, nt = (size_t)b * h * t * t;
	const float scale = 1.0f / sqrtf((float)d);
	float *q = normal(na, 1.0f), *k = normal(na, 1.0f), *v = normal(na, 1.0f);
	float *ady = normal(na, 1.0f), *ay = falloc(na), *probs = falloc(nt), *ws = falloc(nt);
	float *dq = falloc(na), *dk = falloc(na), *dv = falloc(na);
	sd_attention_causal_forward(ay, probs, q, k, v, b, h, t, d, scale);
	sd_attention_causal_backward(dq, dk, dv, ady, q, k, v, probs, ws, b, h, t, d, scale);
	put("att_q", q, na);
	put("att_k", k, na);
	put("att_v", v, na);
	put("att_dy", ady, na);
	put("att_y", ay, na);
	put("att_dq", dq, na);
	put("att_dk", dk, na);
	put("att_dv", dv, na);

	char path[4096];
	snprintf(path, sizeof path, "%s/shapes.txt", dir);
	FILE *f = fopen(path, "w");
	if (!f || fprintf(f, "%d %d %g\n%zu\n%d %d %d %d %.9g\n", n, c, (double)eps, g, b, h, t, d,
	                  (double)scale) < 0 || fclose(f) != 0) {
		fprintf(stderr, "test-layers-seq-dump: %s: cannot write\n", path);
		return 1;
	}
	for (int i = 0; i < nowned; i++)
		free(owned[i]);
	return 0;
}
