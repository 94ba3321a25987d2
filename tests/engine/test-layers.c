/* tests/engine/test-layers.c - engine/layers.h against naive direct implementations
 * written here in double precision (direct convolution loops rather than
 * im2col, window loops for pooling, textbook batch-norm and softmax), on random
 * data at small odd shapes and at the shapes of the `cnn` and resnet20/32
 * models; plus reproducibility: the same call twice gives bit-identical
 * results with 2 OpenMP and 2 OpenBLAS threads, conv/batch-norm/pooling give
 * the same bits with 1 or 2 OpenMP threads on the im2col path.
 *
 * Convolutions run on both paths (engine/layers.h sd_conv_path): im2col +
 * OpenBLAS and, where the build has it, oneDNN, each against the direct
 * double loops at every cnn and resnet20/32 shape; the oneDNN path must
 * really be taken at those shapes (a silent fallback to im2col fails), and
 * at the full resnet batch (128) its backward is also compared with the
 * im2col path's, with the same tolerance.  oneDNN splits its weight-gradient
 * sums by thread count, so for it "omp 1v2" is a tolerance check (rel err
 * <= TOL_THREADS) rather than bit identity; repeated calls with the same
 * threads stay bit-identical.
 *
 * `test-layers --avx512` runs only the check that the AVX-512 kernels give
 * the same bits as the portable ones (tests/engine/test-layers-avx512.sh).  Without
 * AVX-512 both paths are the portable one and the comparison would prove
 * nothing, so there it reports SKIP (exit 77) with the reason.
 *
 * Error of a value a against the reference r of a tensor:
 *   |a - r| / max(|r|, mean |r| over the tensor)   must be <= 1e-4.
 * The floor keeps outputs that cancel to nearly zero from dividing by ~0;
 * float32 rounding of sums of a few thousand terms is far below 1e-4 of the
 * typical magnitude.  Integer outputs (argmax, correct count) must be equal.
 * Prints one line per check; exits 1 when any check fails.
 */
#include "engine/blas.h"
#include "engine/layers.h"
#include "src/base/rng.h"
#include "tests/check.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL 1e-4
/* oneDNN path, 1 against 2 threads: sums of thousands of float32 terms taken
 * in two orders.  On Intel CPUs they stayed within 1e-5; on an AVX-512 AMD
 * EPYC oneDNN 2.6 splits the weight-gradient sums differently by thread
 * count, and an element whose sum nearly cancels (-1.0022 from 12,544 terms
 * of magnitude ~1, whose sums are typically ~112) moved by 4.7e-4: 4e-6 of
 * a typical sum, but 3.3e-4 by the element-relative measure of compare(). */
#define TOL_THREADS 1e-3

static struct sd_rng rng;
/* The tolerance compare() holds to; TOL except where a check says. */
static double tol = TOL;

static void *xalloc(size_t bytes)
{
	void *p = calloc(1, bytes ? bytes : 1);
	if (!p) {
		fprintf(stderr, "test-layers: out of memory\n");
		exit(1);
	}
	return p;
}

static float *falloc(size_t count)
{
	return xalloc(count * sizeof(float));
}

static double *dalloc(size_t count)
{
	return xalloc(count * sizeof(double));
}

static void fill_normal(float *p, size_t count, float scale)
{
	for (size_t i = 0; i < count; i++)
		p[i] = scale * sd_rng_normal(&rng);
}

/* Largest error of a against ref (see the top of the file); prints a line. */
static void compare(const char *name, const char *what, const float *a, const double *ref,
                    size_t count)
{
	double mean = 0.0;
	for (size_t i = 0; i < count; i++)
		mean += fabs(ref[i]);
	mean /= (double)(count ? count : 1);
	double worst = 0.0;
	size_t at = 0;
	for (size_t i = 0; i < count; i++) {
		double den = fabs(ref[i]) > mean ? fabs(ref[i]) : mean;
		double err = fabs(a[i] - ref[i]) / (den > 0.0 ? den : 1.0);
		if (!(err <= worst)) {
			worst = isnan(err) ? INFINITY : err;
			at = i;
		}
	}
	check_report(worst <= tol, "%-40s %-8s max rel err %.2e (tol %.0e, %zu values, worst at %zu: %.7g vs %.7g)",
	             name, what, worst, tol, count, at, count ? (double)a[at] : 0.0, count ? ref[at] : 0.0);
}

static void compare_same(const char *name, const char *what, const void *a, const void *b,
                         size_t bytes)
{
	check_report(memcmp(a, b, bytes) == 0, "%-40s %-8s bit-identical", name, what);
}

/* ---------------------------------------------------------------- conv2d */

/* Direct convolution: y[n][k][oy][ox] = b[k] + sum_{c,i,j} w[k][c][i][j]
 * x[n][c][oy*s+i-p][ox*s+j-p]. */
static void ref_conv_forward(double *y, const float *x, const float *w, const float *b,
                             const struct sd_conv2d_shape *s)
{
	const int oh = s->oh, ow = s->ow, r = s->r;
	for (int n = 0; n < s->n; n++)
		for (int k = 0; k < s->k; k++) {
			double *yp = y + ((size_t)n * s->k + k) * oh * ow;
			for (int p = 0; p < oh * ow; p++)
				yp[p] = b ? b[k] : 0.0;
			for (int c = 0; c < s->c; c++) {
				const float *xp = x + ((size_t)n * s->c + c) * s->h * s->w;
				for (int i = 0; i < r; i++)
					for (int j = 0; j < r; j++) {
						double wv = w[(((size_t)k * s->c + c) * r + i) * r + j];
						for (int oy = 0; oy < oh; oy++) {
							int iy = oy * s->stride + i - s->pad;
							if (iy < 0 || iy >= s->h)
								continue;
							for (int ox = 0; ox < ow; ox++) {
								int ix = ox * s->stride + j - s->pad;
								if (ix >= 0 && ix < s->w)
									yp[oy * ow + ox] += wv * xp[iy * s->w + ix];
							}
						}
					}
			}
		}
}

/* The adjoint loops of ref_conv_forward: dx, dw, db (all overwritten). */
static void ref_conv_backward(double *dx, double *dw, double *db, const float *dy,
                              const float *x, const float *w, const struct sd_conv2d_shape *s)
{
	const int oh = s->oh, ow = s->ow, r = s->r;
	memset(dx, 0, sizeof(double) * s->n * s->c * s->h * s->w);
	memset(dw, 0, sizeof(double) * s->k * s->c * r * r);
	memset(db, 0, sizeof(double) * s->k);
	for (int n = 0; n < s->n; n++)
		for (int k = 0; k < s->k; k++) {
			const float *gp = dy + ((size_t)n * s->k + k) * oh * ow;
			for (int p = 0; p < oh * ow; p++)
				db[k] += gp[p];
			for (int c = 0; c < s->c; c++) {
				const float *xp = x + ((size_t)n * s->c + c) * s->h * s->w;
				double *dxp = dx + ((size_t)n * s->c + c) * s->h * s->w;
				for (int i = 0; i < r; i++)
					for (int j = 0; j < r; j++) {
						size_t wi = (((size_t)k * s->c + c) * r + i) * r + j;
						double wv = w[wi], acc = 0.0;
						for (int oy = 0; oy < oh; oy++) {
							int iy = oy * s->stride + i - s->pad;
							if (iy < 0 || iy >= s->h)
								continue;
							for (int ox = 0; ox < ow; ox++) {
								int ix = ox * s->stride + j - s->pad;
								if (ix < 0 || ix >= s->w)
									continue;
								double g = gp[oy * ow + ox];
								acc += g * xp[iy * s->w + ix];
								dxp[iy * s->w + ix] += g * wv;
							}
						}
						dw[wi] += acc;
					}
			}
		}
}

/* oneDNN is in this build (sd_conv2d_onednn_version() != NULL). */
static int have_onednn;

/* Sets the convolution path; for oneDNN, checks that shape s (bias or not)
 * really takes it when must is set (the model shapes), so that a silent
 * fallback to im2col cannot pass as a oneDNN result.  Returns 0 when the
 * path is set and will be taken, -1 to skip (oneDNN not built). */
static int use_path(enum sd_conv_path path, const char *name, const struct sd_conv2d_shape *s,
                    int bias, int must)
{
	sd_conv2d_set_path(path);
	if (path != SD_CONV_ONEDNN)
		return 0;
	if (!have_onednn)
		return -1;
	if (sd_conv2d_path(s, bias) != SD_CONV_ONEDNN) {
		char impl[160];
		sd_conv2d_describe(s, bias, impl, sizeof impl);
		check_report(!must, "%-40s oneDNN has no JIT kernels here (%s): im2col runs", name,
		             impl);
		return must ? -1 : 0;
	}
	return 0;
}

/* Forward (and, when backward is set, backward) against the direct loops,
 * then the same calls again for bit-identity, on one path. */
static void test_conv_path(enum sd_conv_path path, const char *label, int n, int c, int h,
                           int w, int k, int r, int stride, int pad, int backward)
{
	struct sd_conv2d_shape s;
	char name[128];
	snprintf(name, sizeof(name), "conv[%s] %s n%d c%d %dx%d k%d r%d s%d p%d",
	         sd_conv2d_path_name(path), label, n, c, h, w, k, r, stride, pad);
	if (sd_conv2d_shape_init(&s, n, c, h, w, k, r, stride, pad)) {
		check_report(0, "%-40s shape rejected", name);
		return;
	}
	/* Model shapes (labelled cnn*, resnet) must run on oneDNN itself. */
	int must = strcmp(label, "small") != 0;
	if (use_path(path, name, &s, 1, must) < 0 || use_path(path, name, &s, 0, must) < 0)
		return;
	const size_t nx = (size_t)n * c * h * w, nw = (size_t)k * c * r * r;
	const size_t ny = (size_t)n * k * s.oh * s.ow, nws = sd_conv2d_workspace_floats(&s);
	float *x = falloc(nx), *wt = falloc(nw), *b = falloc(k), *y = falloc(ny);
	float *ws = falloc(nws);
	double *ry = dalloc(ny);
	fill_normal(x, nx, 1.0f);
	fill_normal(wt, nw, 1.0f / sqrtf((float)(c * r * r)));
	fill_normal(b, k, 0.1f);
	/* Garbage in the workspace: its contents must not matter. */
	fill_normal(ws, nws, 100.0f);
	sd_conv2d_forward(y, x, wt, b, &s, ws);
	ref_conv_forward(ry, x, wt, b, &s);
	compare(name, "y", y, ry, ny);

	float *y2 = falloc(ny);
	fill_normal(ws, nws, 100.0f);
	sd_conv2d_forward(y2, x, wt, b, &s, ws);
	compare_same(name, "y again", y, y2, ny * sizeof(float));
	/* No bias is the same as a zero bias. */
	float *zb = falloc(k);
	sd_conv2d_forward(y2, x, wt, NULL, &s, ws);
	sd_conv2d_forward(y, x, wt, zb, &s, ws);
	compare_same(name, "y nobias", y, y2, ny * sizeof(float));
	free(zb);

	if (backward) {
		float *dy = falloc(ny), *dx = falloc(nx), *dw = falloc(nw), *db = falloc(k);
		double *rdx = dalloc(nx), *rdw = dalloc(nw), *rdb = dalloc(k);
		fill_normal(dy, ny, 1.0f);
		for (size_t i = 0; i < nx; i++)
			dx[i] = NAN;
		sd_conv2d_backward(dx, dw, db, dy, x, wt, &s, ws);
		ref_conv_backward(rdx, rdw, rdb, dy, x, wt, &s);
		compare(name, "dx", dx, rdx, nx);
		compare(name, "dw", dw, rdw, nw);
		compare(name, "db", db, rdb, k);

		float *dx2 = falloc(nx), *dw2 = falloc(nw), *db2 = falloc(k);
		fill_normal(ws, nws, 100.0f);
		sd_conv2d_backward(dx2, dw2, db2, dy, x, wt, &s, ws);
		compare_same(name, "dx again", dx, dx2, nx * sizeof(float));
		compare_same(name, "dw again", dw, dw2, nw * sizeof(float));
		compare_same(name, "db again", db, db2, k * sizeof(float));
		free(dy), free(dx), free(dw), free(db), free(rdx), free(rdw), free(rdb);
		free(dx2), free(dw2), free(db2);
	}
	free(x), free(wt), free(b), free(y), free(y2), free(ws), free(ry);
	sd_conv2d_set_path(SD_CONV_AUTO);
}

static void test_conv(const char *label, int n, int c, int h, int w, int k, int r,
                      int stride, int pad, int backward)
{
	test_conv_path(SD_CONV_IM2COL, label, n, c, h, w, k, r, stride, pad, backward);
	test_conv_path(SD_CONV_ONEDNN, label, n, c, h, w, k, r, stride, pad, backward);
}

/* The oneDNN path against the im2col path at a full batch, forward and
 * backward (dx unless first, the model's first layer, has none; the bias as
 * the model has it): the direct double loops are too slow at batch 128. */
static void test_conv_cross(const char *label, int n, int c, int h, int w, int k, int r,
                            int stride, int pad, int bias, int first)
{
	struct sd_conv2d_shape s;
	char name[128];
	snprintf(name, sizeof(name), "conv[onednn vs im2col] %s n%d c%d %dx%d k%d r%d s%d",
	         label, n, c, h, w, k, r, stride);
	if (sd_conv2d_shape_init(&s, n, c, h, w, k, r, stride, pad)) {
		check_report(0, "%-40s shape rejected", name);
		return;
	}
	if (use_path(SD_CONV_ONEDNN, name, &s, bias, 1) < 0)
		return;
	const size_t nx = (size_t)n * c * h * w, nw = (size_t)k * c * r * r;
	const size_t ny = (size_t)n * k * s.oh * s.ow, nws = sd_conv2d_workspace_floats(&s);
	float *x = falloc(nx), *wt = falloc(nw), *dy = falloc(ny), *ws = falloc(nws);
	float *b = falloc(k), *out[2];
	const size_t cap = ny + nx + nw + k;
	fill_normal(x, nx, 1.0f);
	fill_normal(wt, nw, 1.0f / sqrtf((float)(c * r * r)));
	fill_normal(b, k, 0.1f);
	fill_normal(dy, ny, 1.0f);
	for (int v = 0; v < 2; v++) {
		sd_conv2d_set_path(v ? SD_CONV_ONEDNN : SD_CONV_IM2COL);
		out[v] = falloc(cap);
		float *y = out[v], *dx = y + ny, *dw = dx + nx, *db = dw + nw;
		sd_conv2d_forward(y, x, wt, bias ? b : NULL, &s, ws);
		sd_conv2d_backward(first ? NULL : dx, dw, bias ? db : NULL, dy, x, wt, &s, ws);
	}
	sd_conv2d_set_path(SD_CONV_AUTO);
	double *ref = dalloc(cap);
	for (size_t i = 0; i < cap; i++)
		ref[i] = out[0][i];
	compare(name, "y", out[1], ref, ny);
	if (!first)
		compare(name, "dx", out[1] + ny, ref + ny, nx);
	compare(name, "dw", out[1] + ny + nx, ref + ny + nx, nw);
	if (bias)
		compare(name, "db", out[1] + ny + nx + nw, ref + ny + nx + nw, k);
	free(out[0]), free(out[1]), free(ref), free(x), free(wt), free(dy), free(ws), free(b);
}

/* ---------------------------------------------------------------- linear */

static void test_linear(int n, int in, int out)
{
	char name[128];
	snprintf(name, sizeof(name), "linear n%d %d->%d", n, in, out);
	float *x = falloc((size_t)n * in), *w = falloc((size_t)out * in), *b = falloc(out);
	float *y = falloc((size_t)n * out), *dy = falloc((size_t)n * out);
	float *dx = falloc((size_t)n * in), *dw = falloc((size_t)out * in), *db = falloc(out);
	double *ry = dalloc((size_t)n * out), *rdx = dalloc((size_t)n * in);
	double *rdw = dalloc((size_t)out * in), *rdb = dalloc(out);
	fill_normal(x, (size_t)n * in, 1.0f);
	fill_normal(w, (size_t)out * in, 1.0f / sqrtf((float)in));
	fill_normal(b, out, 0.1f);
	fill_normal(dy, (size_t)n * out, 1.0f);
	for (int i = 0; i < n; i++)
		for (int o = 0; o < out; o++) {
			double acc = b[o];
			for (int j = 0; j < in; j++)
				acc += (double)x[(size_t)i * in + j] * w[(size_t)o * in + j];
			ry[(size_t)i * out + o] = acc;
			rdb[o] += dy[(size_t)i * out + o];
		}
	for (int i = 0; i < n; i++)
		for (int j = 0; j < in; j++) {
			double acc = 0.0;
			for (int o = 0; o < out; o++)
				acc += (double)dy[(size_t)i * out + o] * w[(size_t)o * in + j];
			rdx[(size_t)i * in + j] = acc;
		}
	for (int o = 0; o < out; o++)
		for (int j = 0; j < in; j++) {
			double acc = 0.0;
			for (int i = 0; i < n; i++)
				acc += (double)dy[(size_t)i * out + o] * x[(size_t)i * in + j];
			rdw[(size_t)o * in + j] = acc;
		}
	sd_linear_forward(y, x, w, b, n, in, out);
	compare(name, "y", y, ry, (size_t)n * out);
	sd_linear_backward(dx, dw, db, dy, x, w, n, in, out);
	compare(name, "dx", dx, rdx, (size_t)n * in);
	compare(name, "dw", dw, rdw, (size_t)out * in);
	compare(name, "db", db, rdb, out);
	free(x), free(w), free(b), free(y), free(dy), free(dx), free(dw), free(db);
	free(ry), free(rdx), free(rdw), free(rdb);
}

/* ------------------------------------------------------------ batch norm */

static void test_batchnorm(int n, int c, int hw)
{
	char name[128];
	snprintf(name, sizeof(name), "batchnorm n%d c%d hw%d", n, c, hw);
	const size_t nx = (size_t)n * c * hw, m = (size_t)n * hw;
	const float momentum = 0.1f, eps = 1e-5f;
	float *x = falloc(nx), *y = falloc(nx), *gamma = falloc(c), *beta = falloc(c);
	float *mean = falloc(c), *invstd = falloc(c), *rm = falloc(c), *rv = falloc(c);
	double *ry = dalloc(nx), *rmean = dalloc(c), *rinv = dalloc(c);
	double *rrm = dalloc(c), *rrv = dalloc(c), *rey = dalloc(nx);
	fill_normal(x, nx, 1.0f);
	for (size_t i = 0; i < nx; i++)
		x[i] = 3.0f + 2.0f * x[i];   /* mean far from 0, as after a ReLU */
	for (int i = 0; i < c; i++) {
		gamma[i] = 0.5f + sd_rng_uniform(&rng);
		beta[i] = sd_rng_normal(&rng);
		rm[i] = sd_rng_normal(&rng);
		rv[i] = 0.5f + sd_rng_uniform(&rng);
	}
	for (int ch = 0; ch < c; ch++) {
		double s = 0.0, ss = 0.0;
		for (int i = 0; i < n; i++)
			for (int p = 0; p < hw; p++)
				s += x[((size_t)i * c + ch) * hw + p];
		double mu = s / (double)m;
		for (int i = 0; i < n; i++)
			for (int p = 0; p < hw; p++) {
				double d = x[((size_t)i * c + ch) * hw + p] - mu;
				ss += d * d;
			}
		double var = ss / (double)m;
		rmean[ch] = mu;
		rinv[ch] = 1.0 / sqrt(var + eps);
		rrm[ch] = (1.0 - momentum) * rm[ch] + momentum * mu;
		rrv[ch] = (1.0 - momentum) * rv[ch] + momentum * (m > 1 ? ss / (double)(m - 1) : var);
		for (int i = 0; i < n; i++)
			for (int p = 0; p < hw; p++) {
				size_t at = ((size_t)i * c + ch) * hw + p;
				ry[at] = (x[at] - mu) * rinv[ch] * gamma[ch] + beta[ch];
			}
	}
	/* Eval mode with the running statistics after the update. */
	sd_batchnorm_forward_train(y, mean, invstd, rm, rv, x, gamma, beta, n, c, hw, momentum, eps);
	compare(name, "y", y, ry, nx);
	compare(name, "mean", mean, rmean, c);
	compare(name, "invstd", invstd, rinv, c);
	compare(name, "run_mean", rm, rrm, c);
	compare(name, "run_var", rv, rrv, c);
	for (int ch = 0; ch < c; ch++)
		for (int i = 0; i < n; i++)
			for (int p = 0; p < hw; p++) {
				size_t at = ((size_t)i * c + ch) * hw + p;
				rey[at] = (x[at] - (double)rm[ch]) / sqrt((double)rv[ch] + eps) * gamma[ch] + beta[ch];
			}
	sd_batchnorm_forward_eval(y, x, gamma, beta, rm, rv, n, c, hw, eps);
	compare(name, "y eval", y, rey, nx);

	/* Backward against the textbook formula in double. */
	float *dy = falloc(nx), *dx = falloc(nx), *dg = falloc(c), *dbt = falloc(c);
	double *rdx = dalloc(nx), *rdg = dalloc(c), *rdb = dalloc(c);
	fill_normal(dy, nx, 1.0f);
	for (int ch = 0; ch < c; ch++) {
		double sdy = 0.0, sdyx = 0.0, is = invstd[ch], mu = mean[ch];
		for (int i = 0; i < n; i++)
			for (int p = 0; p < hw; p++) {
				size_t at = ((size_t)i * c + ch) * hw + p;
				sdy += dy[at];
				sdyx += dy[at] * (x[at] - mu) * is;
			}
		rdg[ch] = sdyx;
		rdb[ch] = sdy;
		for (int i = 0; i < n; i++)
			for (int p = 0; p < hw; p++) {
				size_t at = ((size_t)i * c + ch) * hw + p;
				double xh = (x[at] - mu) * is;
				rdx[at] = gamma[ch] * is / (double)m * ((double)m * dy[at] - sdy - xh * sdyx);
			}
	}
	sd_batchnorm_backward(dx, dg, dbt, dy, x, mean, invstd, gamma, n, c, hw);
	compare(name, "dx", dx, rdx, nx);
	compare(name, "dgamma", dg, rdg, c);
	compare(name, "dbeta", dbt, rdb, c);
	free(x), free(y), free(gamma), free(beta), free(mean), free(invstd), free(rm), free(rv);
	free(ry), free(rmean), free(rinv), free(rrm), free(rrv), free(rey);
	free(dy), free(dx), free(dg), free(dbt), free(rdx), free(rdg), free(rdb);
}

/* --------------------------------------------------------------- pooling */

static void test_pool(int n, int c, int h, int w, int k, int s)
{
	char name[128];
	snprintf(name, sizeof(name), "pool n%d c%d %dx%d k%d s%d", n, c, h, w, k, s);
	const int oh = (h - k) / s + 1, ow = (w - k) / s + 1;
	const size_t nx = (size_t)n * c * h * w, ny = (size_t)n * c * oh * ow;
	float *x = falloc(nx), *y = falloc(ny), *dy = falloc(ny), *dx = falloc(nx);
	int32_t *am = xalloc(ny * sizeof(int32_t)), *ram = xalloc(ny * sizeof(int32_t));
	double *rmax = dalloc(ny), *ravg = dalloc(ny), *rdx = dalloc(nx);
	fill_normal(x, nx, 1.0f);
	/* Some exact ties, so "first maximum" is exercised. */
	for (size_t i = 0; i < nx; i += 7)
		x[i] = 0.5f;
	fill_normal(dy, ny, 1.0f);
	for (int pl = 0; pl < n * c; pl++)
		for (int oy = 0; oy < oh; oy++)
			for (int ox = 0; ox < ow; ox++) {
				const float *xp = x + (size_t)pl * h * w;
				size_t o = ((size_t)pl * oh + oy) * ow + ox;
				int best = -1;
				double sum = 0.0;
				for (int i = 0; i < k; i++)
					for (int j = 0; j < k; j++) {
						int at = (oy * s + i) * w + ox * s + j;
						sum += xp[at];
						if (best < 0 || xp[at] > xp[best])
							best = at;
					}
				rmax[o] = xp[best];
				ram[o] = best;
				ravg[o] = sum / (k * k);
			}
	sd_maxpool_forward(y, am, x, n, c, h, w, k, s);
	compare(name, "max y", y, rmax, ny);
	check_report(memcmp(am, ram, ny * sizeof(int32_t)) == 0, "%-40s %-8s equal to the first maximum",
	             name, "argmax");
	memset(rdx, 0, nx * sizeof(double));
	for (size_t o = 0; o < ny; o++)
		rdx[o / ((size_t)oh * ow) * h * w + ram[o]] += dy[o];
	for (size_t i = 0; i < nx; i++)
		dx[i] = NAN;
	sd_maxpool_backward(dx, dy, am, n, c, h, w, k, s);
	compare(name, "max dx", dx, rdx, nx);

	sd_avgpool_forward(y, x, n, c, h, w, k, s);
	compare(name, "avg y", y, ravg, ny);
	memset(rdx, 0, nx * sizeof(double));
	for (int pl = 0; pl < n * c; pl++)
		for (int oy = 0; oy < oh; oy++)
			for (int ox = 0; ox < ow; ox++)
				for (int i = 0; i < k; i++)
					for (int j = 0; j < k; j++)
						rdx[(size_t)pl * h * w + (oy * s + i) * w + ox * s + j] +=
							dy[((size_t)pl * oh + oy) * ow + ox] / (double)(k * k);
	for (size_t i = 0; i < nx; i++)
		dx[i] = NAN;
	sd_avgpool_backward(dx, dy, n, c, h, w, k, s);
	compare(name, "avg dx", dx, rdx, nx);
	free(x), free(y), free(dy), free(dx), free(am), free(ram), free(rmax), free(ravg), free(rdx);
}

/* ------------------------------------------------------- relu, softmax */

static void test_relu(size_t count)
{
	char name[128];
	snprintf(name, sizeof(name), "relu %zu", count);
	float *x = falloc(count), *y = falloc(count), *dy = falloc(count), *dx = falloc(count);
	double *ry = dalloc(count), *rdx = dalloc(count);
	fill_normal(x, count, 1.0f);
	fill_normal(dy, count, 1.0f);
	for (size_t i = 0; i < count; i++) {
		ry[i] = x[i] > 0.0f ? x[i] : 0.0;
		rdx[i] = x[i] > 0.0f ? dy[i] : 0.0;
	}
	sd_relu_forward(y, x, count);
	compare(name, "y", y, ry, count);
	sd_relu_backward(dx, dy, y, count);
	compare(name, "dx", dx, rdx, count);
	sd_relu_forward(x, x, count);   /* in place */
	compare(name, "y inplace", x, ry, count);
	free(x), free(y), free(dy), free(dx), free(ry), free(rdx);
}

static void test_xent(int n, int classes, float spread)
{
	char name[128];
	snprintf(name, sizeof(name), "softmax-xent n%d classes%d spread%g", n, classes, (double)spread);
	const size_t nl = (size_t)n * classes;
	float *logits = falloc(nl), *probs = falloc(nl), *d = falloc(nl);
	double *rp = dalloc(nl), *rd = dalloc(nl);
	uint8_t *labels = xalloc((size_t)n);
	fill_normal(logits, nl, spread);
	for (int i = 0; i < n; i++)
		labels[i] = (uint8_t)sd_rng_below(&rng, (uint32_t)classes);
	double rloss = 0.0;
	int rcorrect = 0;
	const float scale = 1.0f / (float)n;
	for (int i = 0; i < n; i++) {
		const float *l = logits + (size_t)i * classes;
		double mx = l[0], sum = 0.0;
		int arg = 0;
		for (int j = 1; j < classes; j++)
			if (l[j] > mx) {
				mx = l[j];
				arg = j;
			}
		for (int j = 0; j < classes; j++)
			sum += exp(l[j] - mx);
		for (int j = 0; j < classes; j++) {
			rp[(size_t)i * classes + j] = exp(l[j] - mx) / sum;
			rd[(size_t)i * classes + j] = (rp[(size_t)i * classes + j] - (j == labels[i])) * scale;
		}
		rloss += -(l[labels[i]] - mx - log(sum));
		rcorrect += arg == labels[i];
	}
	int correct = -1;
	double loss = sd_softmax_xent_forward(probs, &correct, logits, labels, n, classes);
	compare(name, "probs", probs, rp, nl);
	double lerr = fabs(loss - rloss) / (fabs(rloss) > 1e-30 ? fabs(rloss) : 1e-30);
	check_report(lerr <= 1e-9 && isfinite(loss), "%-40s %-8s %.12g vs %.12g, rel err %.1e (tol 1e-9)",
	             name, "loss", loss, rloss, lerr);
	check_report(correct == rcorrect, "%-40s %-8s %d vs %d", name, "correct", correct, rcorrect);
	sd_softmax_xent_backward(d, probs, labels, n, classes, scale);
	compare(name, "dlogits", d, rd, nl);
	free(logits), free(probs), free(d), free(rp), free(rd), free(labels);
}

/* ------------------------------------------------------ reproducibility */

/* Runs conv forward+backward, batch-norm, pooling with `omp` OpenMP threads
 * and writes a checksum-free concatenation of every output to out. */
struct repro {
	struct sd_conv2d_shape s;
	float *x, *w, *b, *dy, *ws;
	size_t nx, nw, ny;
};

static size_t repro_run(const struct repro *r, float *out)
{
	size_t at = 0;
	const struct sd_conv2d_shape *s = &r->s;
	float *dw = out + at + r->ny + r->nx, *db = dw + r->nw;
	memset(dw, 0, sizeof(float) * (r->nw + s->k));
	sd_conv2d_forward(out + at, r->x, r->w, r->b, s, r->ws);
	at += r->ny;
	sd_conv2d_backward(out + at, dw, db, r->dy, r->x, r->w, s, r->ws);
	at += r->nx + r->nw + s->k;
	const int hw = s->oh * s->ow;
	float *mean = out + at, *inv = mean + s->k, *rm = inv + s->k, *rv = rm + s->k;
	memset(rm, 0, sizeof(float) * 2 * s->k);
	at += 4 * (size_t)s->k;
	sd_batchnorm_forward_train(out + at, mean, inv, rm, rv, r->dy, r->b, r->b, s->n, s->k, hw,
	                           0.1f, 1e-5f);
	at += r->ny;
	float *dg = out + at + r->ny, *dbt = dg + s->k;
	memset(dg, 0, sizeof(float) * 2 * s->k);
	sd_batchnorm_backward(out + at, dg, dbt, r->dy, r->dy, mean, inv, r->b, s->n, s->k, hw);
	at += r->ny + 2 * (size_t)s->k;
	int32_t *am = (int32_t *)(out + at + r->ny / 4);
	sd_maxpool_forward(out + at, am, r->dy, s->n, s->k, s->oh, s->ow, 2, 2);
	at += r->ny / 2;
	sd_avgpool_forward(out + at, r->dy, s->n, s->k, s->oh, s->ow, 3, 1);
	at += r->ny;
	return at;
}

static void test_repro_path(enum sd_conv_path path, int n, int c, int h, int w, int k, int rr,
                            int stride, int pad)
{
	char name[128];
	snprintf(name, sizeof(name), "repro[%s] n%d c%d %dx%d k%d r%d s%d p%d",
	         sd_conv2d_path_name(path), n, c, h, w, k, rr, stride, pad);
	struct repro r;
	if (sd_conv2d_shape_init(&r.s, n, c, h, w, k, rr, stride, pad)) {
		check_report(0, "%-40s shape rejected", name);
		return;
	}
	/* Checked with 2 and with 1 thread: oneDNN builds kernels per count. */
	omp_set_num_threads(2);
	if (use_path(path, name, &r.s, 1, 1) < 0)
		return;
	omp_set_num_threads(1);
	if (use_path(path, name, &r.s, 1, 1) < 0)
		return;
	r.nx = (size_t)n * c * h * w;
	r.nw = (size_t)k * c * rr * rr;
	r.ny = (size_t)n * k * r.s.oh * r.s.ow;
	r.x = falloc(r.nx);
	r.w = falloc(r.nw);
	r.b = falloc(k);
	r.dy = falloc(r.ny);
	/* The workspace for both thread counts (layers.h: its size is the
	 * current count's; 1 thread is current here). */
	size_t ws1 = sd_conv2d_workspace_floats(&r.s);
	omp_set_num_threads(2);
	size_t ws2 = sd_conv2d_workspace_floats(&r.s);
	r.ws = falloc(ws1 > ws2 ? ws1 : ws2);
	fill_normal(r.x, r.nx, 1.0f);
	fill_normal(r.w, r.nw, 0.1f);
	fill_normal(r.b, k, 1.0f);
	fill_normal(r.dy, r.ny, 1.0f);
	size_t cap = 6 * r.ny + r.nx + r.nw + 8 * (size_t)k;
	float *a = falloc(cap), *b = falloc(cap), *c1 = falloc(cap);

	openblas_set_num_threads(2);
	omp_set_num_threads(2);
	size_t used = repro_run(&r, a);
	repro_run(&r, b);
	compare_same(name, "2 thr", a, b, used * sizeof(float));
	/* layers.c promises that conv, batch-norm and pooling do not depend
	 * on the OpenMP thread count.  With 2 OpenMP threads the layers run
	 * OpenBLAS single-threaded inside, so compare against 1 OpenMP thread
	 * with a single-threaded OpenBLAS. */
	omp_set_num_threads(1);
	openblas_set_num_threads(1);
	repro_run(&r, c1);
	if (path == SD_CONV_IM2COL) {
		compare_same(name, "omp 1v2", a, c1, used * sizeof(float));
	} else {
		/* Reported, then held to TOL_THREADS. */
		double *ref = dalloc(used);
		for (size_t i = 0; i < used; i++)
			ref[i] = c1[i];
		int same = memcmp(a, c1, used * sizeof(float)) == 0;
		printf("%-40s omp 1v2  %s\n", name, same ? "bit-identical" : "differ in the last bits");
		double keep = tol;
		tol = TOL_THREADS;
		compare(name, "omp 1v2", a, ref, used);
		tol = keep;
		free(ref);
	}
	sd_conv2d_set_path(SD_CONV_AUTO);
	free(r.x), free(r.w), free(r.b), free(r.dy), free(r.ws), free(a), free(b), free(c1);
}

static void test_repro(int n, int c, int h, int w, int k, int rr, int stride, int pad)
{
	test_repro_path(SD_CONV_IM2COL, n, c, h, w, k, rr, stride, pad);
	test_repro_path(SD_CONV_ONEDNN, n, c, h, w, k, rr, stride, pad);
}

/* The AVX-512 kernels (im2col, col2im, 2x2 max pool) must give the same bits
 * as the portable loops, which SD_LAYERS_NO_AVX512 selects. */
static void test_paths(int n, int c, int h, int w, int k, int rr, int pad)
{
	char name[128];
	snprintf(name, sizeof(name), "paths n%d c%d %dx%d k%d r%d p%d", n, c, h, w, k, rr, pad);
	struct sd_conv2d_shape s;
	if (sd_conv2d_shape_init(&s, n, c, h, w, k, rr, 1, pad)) {
		check_report(0, "%-40s shape rejected", name);
		return;
	}
	const size_t nx = (size_t)n * c * h * w, nw = (size_t)k * c * rr * rr;
	const size_t ny = (size_t)n * k * s.oh * s.ow, nws = sd_conv2d_workspace_floats(&s);
	const int ph = s.oh / 2, pw = s.ow / 2;
	const size_t np = (size_t)n * k * ph * pw;
	float *x = falloc(nx), *wt = falloc(nw), *dy = falloc(ny), *ws = falloc(nws);
	float *out[2], *pooled[2];
	int32_t *am[2];
	const size_t cap = ny + nx + nw + ny;
	sd_conv2d_set_path(SD_CONV_IM2COL);   /* the kernels compared are im2col's */
	fill_normal(x, nx, 1.0f);
	fill_normal(wt, nw, 0.2f);
	fill_normal(dy, ny, 1.0f);
	for (int v = 0; v < 2; v++) {
		if (v)
			setenv("SD_LAYERS_NO_AVX512", "1", 1);
		out[v] = falloc(cap);
		pooled[v] = falloc(np);
		am[v] = xalloc(np * sizeof(int32_t));
		float *y = out[v], *dx = y + ny, *dw = dx + nx, *dxp = dw + nw;
		sd_conv2d_forward(y, x, wt, NULL, &s, ws);
		sd_conv2d_backward(dx, dw, NULL, dy, x, wt, &s, ws);
		sd_maxpool_forward(pooled[v], am[v], y, n, k, s.oh, s.ow, 2, 2);
		sd_maxpool_backward(dxp, y, am[v], n, k, s.oh, s.ow, 2, 2);
	}
	unsetenv("SD_LAYERS_NO_AVX512");
	sd_conv2d_set_path(SD_CONV_AUTO);
	compare_same(name, "conv", out[0], out[1], cap * sizeof(float));
	compare_same(name, "maxpool", pooled[0], pooled[1], np * sizeof(float));
	compare_same(name, "argmax", am[0], am[1], np * sizeof(int32_t));
	for (int v = 0; v < 2; v++)
		free(out[v]), free(pooled[v]), free(am[v]);
	free(x), free(wt), free(dy), free(ws);
}

/* ------------------------------------------------ channel-blocked layouts */

/* Offset of (i, ch, p) in layout blk (layers.h), written here independently. */
static size_t blk_at(int i, int ch, int p, int c, int hw, int blk)
{
	return (((size_t)i * (c / blk) + ch / blk) * hw + p) * blk + ch % blk;
}

static void test_layout(int n, int c, int hw, int blk)
{
	char name[128];
	snprintf(name, sizeof(name), "layout n%d c%d hw%d blk%d", n, c, hw, blk);
	const size_t cnt = (size_t)n * c * hw;
	float *x = falloc(cnt), *b = falloc(cnt), *back = falloc(cnt);
	fill_normal(x, cnt, 1.0f);
	sd_layout_to_blocked(b, x, n, c, hw, blk);
	int ok = 1;
	for (int i = 0; i < n; i++)
		for (int ch = 0; ch < c; ch++)
			for (int p = 0; p < hw; p++)
				ok &= b[blk_at(i, ch, p, c, hw, blk)] == x[((size_t)i * c + ch) * hw + p];
	check_report(ok, "%-40s to_blocked puts every element where layers.h says", name);
	sd_layout_from_blocked(back, b, n, c, hw, blk);
	compare_same(name, "roundtrip", x, back, cnt * sizeof(float));
	free(x), free(b), free(back);
}

/* NCHW double tensor -> layout blk, as double (for compare()). */
static void to_blk_d(double *dst, const double *src, int n, int c, int hw, int blk)
{
	for (int i = 0; i < n; i++)
		for (int ch = 0; ch < c; ch++)
			for (int p = 0; p < hw; p++)
				dst[blk_at(i, ch, p, c, hw, blk)] = src[((size_t)i * c + ch) * hw + p];
}

/* The mean of test_bn_act's x: 3 as after a convolution; far larger than
 * the standard deviation (2) in the check that the statistics have no
 * cancellation (E[x^2] - E[x]^2 in float would lose every digit at 1000). */
static float bn_x_mean = 3.0f;

/* The fused batch-norm (+ residual) (+ ReLU) of layers-blocked.c against the
 * textbook formulas in double, in NCHW, then placed in layout blk. */
static void test_bn_act(int n, int c, int hw, int blk, int relu, int residual)
{
	char name[128];
	snprintf(name, sizeof(name), "bn-act n%d c%d hw%d blk%d%s%s mean %g", n, c, hw, blk,
	         residual ? " +res" : "", relu ? " relu" : "", (double)bn_x_mean);
	const size_t nx = (size_t)n * c * hw, m = (size_t)n * hw;
	const float momentum = 0.1f, eps = 1e-5f;
	float *x = falloc(nx), *r = falloc(nx), *y = falloc(nx), *gamma = falloc(c), *beta = falloc(c);
	float *mean = falloc(c), *invstd = falloc(c), *rm = falloc(c), *rv = falloc(c);
	float *xb = falloc(nx), *rb = falloc(nx), *dy = falloc(nx), *dyb = falloc(nx);
	float *dx = falloc(nx), *dr = falloc(nx), *dg = falloc(c), *dbt = falloc(c);
	double *ry = dalloc(nx), *ryb = dalloc(nx), *rmean = dalloc(c), *rinv = dalloc(c);
	double *rrm = dalloc(c), *rrv = dalloc(c), *rdx = dalloc(nx), *rdr = dalloc(nx);
	double *rdxb = dalloc(nx), *rdrb = dalloc(nx), *rdg = dalloc(c), *rdb = dalloc(c);
	fill_normal(x, nx, 1.0f);
	for (size_t i = 0; i < nx; i++)
		x[i] = bn_x_mean + 2.0f * x[i];   /* mean far from 0, as after a convolution */
	fill_normal(r, nx, 1.0f);
	fill_normal(dy, nx, 1.0f);
	for (int i = 0; i < c; i++) {
		gamma[i] = 0.5f + sd_rng_uniform(&rng);
		beta[i] = sd_rng_normal(&rng);
		rm[i] = sd_rng_normal(&rng);
		rv[i] = 0.5f + sd_rng_uniform(&rng);
	}
	sd_layout_to_blocked(xb, x, n, c, hw, blk);
	sd_layout_to_blocked(rb, r, n, c, hw, blk);
	sd_layout_to_blocked(dyb, dy, n, c, hw, blk);
	for (int ch = 0; ch < c; ch++) {
		double su = 0.0, ss = 0.0;
		for (int i = 0; i < n; i++)
			for (int p = 0; p < hw; p++)
				su += x[((size_t)i * c + ch) * hw + p];
		double mu = su / (double)m;
		for (int i = 0; i < n; i++)
			for (int p = 0; p < hw; p++) {
				double d = x[((size_t)i * c + ch) * hw + p] - mu;
				ss += d * d;
			}
		rmean[ch] = mu;
		rinv[ch] = 1.0 / sqrt(ss / (double)m + eps);
		rrm[ch] = (1.0 - momentum) * rm[ch] + momentum * mu;
		rrv[ch] = (1.0 - momentum) * rv[ch] + momentum * (m > 1 ? ss / (double)(m - 1) : ss);
		for (int i = 0; i < n; i++)
			for (int p = 0; p < hw; p++) {
				size_t at = ((size_t)i * c + ch) * hw + p;
				double v = (x[at] - mu) * rinv[ch] * gamma[ch] + beta[ch];
				if (residual)
					v += r[at];
				ry[at] = relu && v < 0.0 ? 0.0 : v;
			}
	}
	to_blk_d(ryb, ry, n, c, hw, blk);
	sd_batchnorm_act_forward_train(y, mean, invstd, rm, rv, xb, residual ? rb : NULL, gamma, beta,
	                               n, c, hw, blk, relu, momentum, eps);
	compare(name, "y", y, ryb, nx);
	compare(name, "mean", mean, rmean, c);
	compare(name, "invstd", invstd, rinv, c);
	compare(name, "run_mean", rm, rrm, c);
	compare(name, "run_var", rv, rrv, c);

	/* Backward: the mask comes from the y just computed (the reference's
	 * own y could put a value within rounding of 0 on the other side). */
	for (int ch = 0; ch < c; ch++) {
		double sdy = 0.0, sdyx = 0.0, is = invstd[ch], mu = mean[ch];
		for (int i = 0; i < n; i++)
			for (int p = 0; p < hw; p++) {
				size_t at = ((size_t)i * c + ch) * hw + p;
				double g = relu && !(y[blk_at(i, ch, p, c, hw, blk)] > 0.0f) ? 0.0 : dy[at];
				rdr[at] = g;
				sdy += g;
				sdyx += g * (x[at] - mu) * is;
			}
		rdg[ch] = sdyx;
		rdb[ch] = sdy;
		for (int i = 0; i < n; i++)
			for (int p = 0; p < hw; p++) {
				size_t at = ((size_t)i * c + ch) * hw + p;
				double xh = (x[at] - mu) * is;
				rdx[at] = gamma[ch] * is / (double)m * ((double)m * rdr[at] - sdy - xh * sdyx);
			}
	}
	to_blk_d(rdxb, rdx, n, c, hw, blk);
	to_blk_d(rdrb, rdr, n, c, hw, blk);
	for (size_t i = 0; i < nx; i++)
		dx[i] = dr[i] = NAN;
	sd_batchnorm_act_backward(dx, residual ? dr : NULL, dg, dbt, dyb, y, xb, mean, invstd, gamma,
	                          n, c, hw, blk, relu);
	compare(name, "dx", dx, rdxb, nx);
	if (residual)
		compare(name, "dres", dr, rdrb, nx);
	compare(name, "dgamma", dg, rdg, c);
	compare(name, "dbeta", dbt, rdb, c);

	/* Eval mode with the updated running statistics. */
	for (int ch = 0; ch < c; ch++)
		for (int i = 0; i < n; i++)
			for (int p = 0; p < hw; p++) {
				size_t at = ((size_t)i * c + ch) * hw + p;
				double v = (x[at] - (double)rm[ch]) / sqrt((double)rv[ch] + eps) * gamma[ch] +
				           beta[ch];
				if (residual)
					v += r[at];
				ry[at] = relu && v < 0.0 ? 0.0 : v;
			}
	to_blk_d(ryb, ry, n, c, hw, blk);
	sd_batchnorm_act_forward_eval(y, xb, residual ? rb : NULL, gamma, beta, rm, rv, n, c, hw, blk,
	                              relu, eps);
	compare(name, "y eval", y, ryb, nx);

	/* Same bits with 1 and 2 threads (fixed sample groups). */
	float *y1 = falloc(nx), *y2 = falloc(nx), *dx1 = falloc(nx), *dx2 = falloc(nx);
	float *st = falloc(8 * (size_t)c);
	for (int t = 1; t <= 2; t++) {
		omp_set_num_threads(t);
		float *yy = t == 1 ? y1 : y2, *dd = t == 1 ? dx1 : dx2;
		memset(st, 0, 8 * (size_t)c * sizeof(float));
		sd_batchnorm_act_forward_train(yy, st, st + c, st + 2 * c, st + 3 * c, xb,
		                               residual ? rb : NULL, gamma, beta, n, c, hw, blk, relu,
		                               momentum, eps);
		sd_batchnorm_act_backward(dd, NULL, st + 4 * c, st + 5 * c, dyb, yy, xb, st, st + c,
		                          gamma, n, c, hw, blk, relu);
		memcpy(t == 1 ? dg : dbt, st + 4 * c, (size_t)c * sizeof(float));
	}
	omp_set_num_threads(1);
	compare_same(name, "omp 1v2", y1, y2, nx * sizeof(float));
	compare_same(name, "dx 1v2", dx1, dx2, nx * sizeof(float));
	compare_same(name, "dg 1v2", dg, dbt, (size_t)c * sizeof(float));
	free(y1), free(y2), free(dx1), free(dx2), free(st);
	free(x), free(r), free(y), free(gamma), free(beta), free(mean), free(invstd), free(rm);
	free(rv), free(xb), free(rb), free(dy), free(dyb), free(dx), free(dr), free(dg), free(dbt);
	free(ry), free(ryb), free(rmean), free(rinv), free(rrm), free(rrv), free(rdx), free(rdr);
	free(rdxb), free(rdrb), free(rdg), free(rdb);
}

/* Option-A shortcut and global average pooling in layout blk against their
 * definitions, written out here in NCHW. */
static void test_shortcut_pool(int n, int c, int h, int w, int cb, int s, int blk)
{
	char name[128];
	const int hb = h * s, wb = w * s, pad = (c - cb) / 2;
	snprintf(name, sizeof(name), "shortcut n%d %dx%dx%d->%dx%dx%d blk%d", n, cb, hb, wb, c, h, w,
	         blk);
	const size_t nb = (size_t)n * cb * hb * wb, nr = (size_t)n * c * h * w;
	float *b = falloc(nb), *bb = falloc(nb), *r = falloc(nr), *dr = falloc(nr), *drb = falloc(nr);
	float *db = falloc(nb), *db0 = falloc(nb);
	double *rr = dalloc(nr), *rrb = dalloc(nr), *rdb = dalloc(nb), *rdbb = dalloc(nb);
	fill_normal(b, nb, 1.0f);
	fill_normal(dr, nr, 1.0f);
	fill_normal(db0, nb, 1.0f);
	for (int i = 0; i < n; i++)
		for (int ch = 0; ch < c; ch++)
			for (int y = 0; y < h; y++)
				for (int x = 0; x < w; x++) {
					int bc = ch - pad;
					rr[(((size_t)i * c + ch) * h + y) * w + x] =
						bc >= 0 && bc < cb ? b[(((size_t)i * cb + bc) * hb + y * s) * wb + x * s]
						: 0.0;
				}
	for (size_t i = 0; i < nb; i++)
		rdb[i] = db0[i];
	for (int i = 0; i < n; i++)
		for (int bc = 0; bc < cb; bc++)
			for (int y = 0; y < h; y++)
				for (int x = 0; x < w; x++)
					rdb[(((size_t)i * cb + bc) * hb + y * s) * wb + x * s] +=
						dr[(((size_t)i * c + bc + pad) * h + y) * w + x];
	sd_layout_to_blocked(bb, b, n, cb, hb * wb, blk);
	sd_layout_to_blocked(drb, dr, n, c, h * w, blk);
	sd_layout_to_blocked(db, db0, n, cb, hb * wb, blk);
	to_blk_d(rrb, rr, n, c, h * w, blk);
	to_blk_d(rdbb, rdb, n, cb, hb * wb, blk);
	sd_shortcut_forward(r, bb, n, c, h, w, cb, hb, wb, s, blk);
	compare(name, "r", r, rrb, nr);
	sd_shortcut_backward(db, drb, n, c, h, w, cb, hb, wb, s, blk);
	compare(name, "db +=", db, rdbb, nb);

	/* Global average pooling of r: y (n, c); backward spreads dy / hw. */
	float *y = falloc((size_t)n * c), *dy = falloc((size_t)n * c), *dx = falloc(nr);
	double *ry = dalloc((size_t)n * c), *rdx = dalloc(nr), *rdxb = dalloc(nr);
	fill_normal(dy, (size_t)n * c, 1.0f);
	for (int i = 0; i < n; i++)
		for (int ch = 0; ch < c; ch++) {
			double acc = 0.0;
			for (int p = 0; p < h * w; p++)
				acc += rr[((size_t)i * c + ch) * h * w + p];
			ry[(size_t)i * c + ch] = acc / (h * w);
			for (int p = 0; p < h * w; p++)
				rdx[((size_t)i * c + ch) * h * w + p] = dy[(size_t)i * c + ch] / (double)(h * w);
		}
	to_blk_d(rdxb, rdx, n, c, h * w, blk);
	snprintf(name, sizeof(name), "global-avgpool n%d c%d %dx%d blk%d", n, c, h, w, blk);
	sd_global_avgpool_forward(y, r, n, c, h * w, blk);
	compare(name, "y", y, ry, (size_t)n * c);
	for (size_t i = 0; i < nr; i++)
		dx[i] = NAN;
	sd_global_avgpool_backward(dx, dy, n, c, h * w, blk);
	compare(name, "dx", dx, rdxb, nr);
	free(b), free(bb), free(r), free(dr), free(drb), free(db), free(db0), free(rr), free(rrb);
	free(rdb), free(rdbb), free(y), free(dy), free(dx), free(ry), free(rdx), free(rdxb);
}

/* The AVX-512 kernels against the portable loops, where the CPU has them. */
static int main_avx512(void)
{
	__builtin_cpu_init();
	if (!__builtin_cpu_supports("avx512f")) {
		check_skip("this CPU has no AVX-512F: engine/layers.c runs only its portable loops here, "
		           "so there is nothing to compare them with");
		return check_exit("test-layers --avx512");
	}
	if (getenv("SD_LAYERS_NO_AVX512")) {
		check_skip("SD_LAYERS_NO_AVX512 is set in the environment: the AVX-512 kernels are off");
		return check_exit("test-layers --avx512");
	}
	printf("AVX-512 kernels against the portable loops, bit for bit\n");
	test_paths(4, 3, 28, 28, 8, 5, 2);
	test_paths(3, 4, 13, 11, 5, 3, 1);   /* odd planes, odd pooled size */
	test_paths(2, 3, 40, 33, 4, 3, 0);   /* rows longer than 32 floats */
	test_paths(2, 2, 9, 9, 3, 1, 0);
	test_paths(2, 2, 6, 7, 3, 5, 3);     /* padding beyond half the kernel */
	return check_exit("test-layers --avx512");
}

int main(int argc, char **argv)
{
	/* The same OpenBLAS kernel as the worker runs (engine/blas.h), so the
	 * results checked here are those training gets. */
	sd_blas_select_kernel(argv);
	sd_rng_seed(&rng, 20240602, 3);
	openblas_set_num_threads(1);
	omp_set_num_threads(1);
	if (argc > 1 && !strcmp(argv[1], "--avx512"))
		return main_avx512();
	printf("layers vs direct double loops: |a-r| / max(|r|, mean|r|) must be <= %g\n", TOL);
	openblas_set_num_threads(1);
	omp_set_num_threads(1);
	const char *ver = sd_conv2d_onednn_version();
	have_onednn = ver != NULL;
	if (have_onednn)
		printf("convolutions on both paths: im2col + OpenBLAS and oneDNN %s\n", ver);
	else
		printf("convolutions on the im2col path only: this build has no oneDNN\n");

	/* Small odd shapes first: every padding/stride/edge combination. */
	test_conv("small", 3, 3, 7, 9, 5, 3, 1, 1, 1);
	test_conv("small", 2, 4, 9, 7, 3, 3, 2, 1, 1);
	test_conv("small", 2, 2, 8, 8, 3, 5, 2, 2, 1);
	test_conv("small", 3, 3, 6, 6, 4, 1, 1, 0, 1);
	test_conv("small", 1, 3, 6, 6, 4, 1, 1, 0, 1);
	test_conv("small", 2, 3, 7, 7, 4, 1, 2, 0, 1);
	test_conv("small", 2, 2, 5, 5, 3, 4, 1, 0, 1);
	/* The cnn model at batch 64. */
	test_conv("cnn1", 64, 1, 28, 28, 32, 5, 1, 2, 1);
	test_conv("cnn2", 64, 32, 14, 14, 64, 5, 1, 2, 1);
	/* resnet20/32 convolutions at batch 128 (forward) and 16 (backward,
	 * to keep the direct loops quick). */
	test_conv("resnet", 128, 3, 32, 32, 16, 3, 1, 1, 0);
	test_conv("resnet", 128, 16, 32, 32, 16, 3, 1, 1, 0);
	test_conv("resnet", 128, 16, 32, 32, 32, 3, 2, 1, 0);
	test_conv("resnet", 128, 32, 16, 16, 32, 3, 1, 1, 0);
	test_conv("resnet", 128, 32, 16, 16, 64, 3, 2, 1, 0);
	test_conv("resnet", 128, 64, 8, 8, 64, 3, 1, 1, 0);
	test_conv("resnet", 128, 16, 32, 32, 32, 1, 2, 0, 0);
	test_conv("resnet", 16, 3, 32, 32, 16, 3, 1, 1, 1);
	test_conv("resnet", 16, 16, 32, 32, 16, 3, 1, 1, 1);
	test_conv("resnet", 16, 16, 32, 32, 32, 3, 2, 1, 1);
	test_conv("resnet", 16, 32, 16, 16, 64, 3, 2, 1, 1);
	test_conv("resnet", 16, 64, 8, 8, 64, 3, 1, 1, 1);
	test_conv("resnet", 16, 16, 32, 32, 32, 1, 2, 0, 1);
	/* oneDNN against im2col at the models' own batches, 2 threads (as
	 * training runs), every convolution shape of resnet20/32 and cnn. */
	omp_set_num_threads(2);
	test_conv_cross("resnet", 128, 3, 32, 32, 16, 3, 1, 1, 0, 1);
	test_conv_cross("resnet", 128, 16, 32, 32, 16, 3, 1, 1, 0, 0);
	test_conv_cross("resnet", 128, 16, 32, 32, 32, 3, 2, 1, 0, 0);
	test_conv_cross("resnet", 128, 32, 16, 16, 32, 3, 1, 1, 0, 0);
	test_conv_cross("resnet", 128, 32, 16, 16, 64, 3, 2, 1, 0, 0);
	test_conv_cross("resnet", 128, 64, 8, 8, 64, 3, 1, 1, 0, 0);
	test_conv_cross("cnn", 64, 1, 28, 28, 32, 5, 1, 2, 1, 1);
	test_conv_cross("cnn", 64, 32, 14, 14, 64, 5, 1, 2, 1, 0);
	omp_set_num_threads(1);

	test_linear(3, 7, 5);
	test_linear(64, 3136, 128);
	test_linear(64, 128, 10);
	test_linear(128, 64, 10);

	test_batchnorm(4, 3, 5);
	test_batchnorm(128, 16, 1024);
	test_batchnorm(128, 64, 64);
	test_batchnorm(64, 128, 1);

	/* Channel-blocked layouts: both block sizes whatever oneDNN picks
	 * here, at the resnet shapes (channels and planes; batch 16 or 32 to
	 * keep the double loops quick) and odd small ones. */
	for (int blk = 1; blk <= 16; blk = blk == 1 ? 8 : 2 * blk) {
		test_layout(3, 16, 5, blk);
		test_layout(32, 64, 64, blk);
		test_bn_act(3, 16, 7, blk, 1, 1);
		test_bn_act(8, 32, 1, blk, 0, 0);
		test_bn_act(5, 16, 9, blk, 1, 0);
		test_bn_act(16, 16, 1024, blk, 1, 0);
		test_bn_act(16, 16, 1024, blk, 1, 1);
		test_bn_act(16, 32, 256, blk, 1, 1);
		test_bn_act(32, 64, 64, blk, 1, 1);
		bn_x_mean = 1000.0f;
		test_bn_act(16, 16, 1024, blk, 1, 1);
		test_bn_act(8, 32, 1, blk, 0, 0);
		bn_x_mean = 3.0f;
		test_shortcut_pool(3, 32, 5, 5, 16, 2, blk);
		test_shortcut_pool(16, 32, 16, 16, 16, 2, blk);
		test_shortcut_pool(16, 64, 8, 8, 32, 2, blk);
		test_shortcut_pool(4, 16, 8, 8, 16, 1, blk);
	}

	test_pool(64, 32, 28, 28, 2, 2);
	test_pool(64, 64, 14, 14, 2, 2);
	test_pool(2, 3, 7, 7, 3, 2);
	test_pool(2, 3, 7, 6, 2, 1);
	test_pool(128, 64, 8, 8, 8, 1);   /* global average pooling of resnet */

	test_relu(64 * 32 * 28 * 28);
	test_relu(13);

	test_xent(64, 10, 1.0f);
	test_xent(5, 10, 300.0f);   /* exp() would overflow without the max shift */
	test_xent(3, 1, 1.0f);

	test_repro(64, 32, 14, 14, 64, 5, 1, 2);
	test_repro(32, 16, 32, 32, 32, 3, 2, 1);
	test_repro(16, 16, 32, 32, 16, 3, 1, 1);

	/* A oneDNN call that fails quietly falls back to im2col: right
	 * results, so only this count shows it. */
	check_report(sd_conv2d_fallbacks() == 0, "oneDNN calls that failed and fell back to im2col: %lu",
	             sd_conv2d_fallbacks());
	return check_exit("test-layers");
}
