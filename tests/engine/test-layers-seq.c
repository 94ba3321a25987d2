/* tests/engine/test-layers-seq.c - the transformer kernels of
 * engine/layers-seq.h against references written here in double
 * precision, and their backward passes against central finite differences
 * of those references.
 *
 * For every kernel:
 *   forward   the float kernel against the double reference on random
 *             data (odd shapes, and shapes large enough for the OpenMP
 *             paths to run);
 *   backward  the float kernel's gradients against central differences
 *             (step 1e-5, in double) of L = sum(dy * f(inputs)) computed
 *             with the double reference, for every input and parameter
 *             element: the truncation error (~h^2) and rounding (~1e-16 |L|
 *             / h) are both below 1e-9, far under the tolerance, so the
 *             check is on the float kernel alone;
 *   contracts parameter gradients accumulate (pre-filled buffers keep
 *             their contents), in-place calls give the same bits, and the
 *             same call with 1 and 2 OpenMP threads gives the same bits
 *             where layers-seq.h promises it (2 threads repeated otherwise).
 * The row kernels' AVX-512 twins must give the same bits as the baseline
 * ones (SD_LAYERS_NO_AVX512 set), on CPUs that have AVX-512F.
 * The fused causal attention is also compared with the unfused
 * composition of this file's kernels (batched matmul, scale, mask,
 * softmax, batched matmul), forward and backward; the measured max
 * difference is printed and must stay below TOL_FUSED.
 *
 * Error of a value a against the reference r of a tensor (as test-layers):
 *   |a - r| / max(|r|, mean |r| over the tensor)   must be <= TOL (1e-4).
 * Float32 rounding of the sums here (at most a few thousand terms) is
 * about 1e-6 of that; 1e-4 leaves room without hiding a wrong formula
 * (a missing term is an O(1) error).
 */
#include "engine/blas.h"
#include "engine/layers-seq.h"
#include "src/base/rng.h"
#include "tests/check.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL 1e-4
/* Fused against unfused attention.  The fused kernel folds the scale into
 * the scores' GEMM (alpha), masks by truncating each softmax row instead
 * of adding -inf, and skips the key blocks above the diagonal, so its GEMMs
 * sum over fewer (zero) terms with OpenBLAS's kernels splitting the sums
 * differently: measured max difference 3.0e-6 at B 8 H 4 T 64 D 32 (0 at
 * the small shapes, a single block), forward and backward.  1e-5 is far
 * below what a wrong mask or scale gives (O(1)). */
#define TOL_FUSED 1e-5
/* Central-difference step. */
#define FD_H 1e-5

static struct sd_rng rng;

static void *xalloc(size_t bytes)
{
	void *p = calloc(1, bytes ? bytes : 1);
	if (!p) {
		fprintf(stderr, "test-layers-seq: out of memory\n");
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

static void to_double(double *d, const float *f, size_t count)
{
	for (size_t i = 0; i < count; i++)
		d[i] = f[i];
}

/* Largest error of a against ref, with tolerance tol; prints a line;
 * returns the error. */
static double compare_tol(const char *name, const char *what, const float *a, const double *ref,
                          size_t count, double tol)
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
	check_report(worst <= tol,
	             "%-34s %-10s max rel err %.2e (tol %.0e, %zu values, worst at %zu: %.7g vs %.7g)",
	             name, what, worst, tol, count, at, count ? (double)a[at] : 0.0,
	             count ? ref[at] : 0.0);
	return worst;
}

static double compare(const char *name, const char *what, const float *a, const double *ref,
                      size_t count)
{
	return compare_tol(name, what, a, ref, count, TOL);
}

static void compare_same(const char *name, const char *what, const void *a, const void *b,
                         size_t bytes)
{
	check_report(memcmp(a, b, bytes) == 0, "%-34s %-10s bit-identical", name, what);
}

/* sum(w * y) in double. */
static double dot_wd(const float *w, const double *y, size_t count)
{
	double s = 0.0;
	for (size_t i = 0; i < count; i++)
		s += w[i] * y[i];
	return s;
}

/* Central differences of loss() with respect to every element of p (count
 * doubles that loss() reads), into g. */
typedef double (*loss_fn)(void *ctx);
static void fd_grad(double *g, double *p, size_t count, loss_fn loss, void *ctx)
{
	for (size_t i = 0; i < count; i++) {
		double keep = p[i];
		p[i] = keep + FD_H;
		double lp = loss(ctx);
		p[i] = keep - FD_H;
		double lm = loss(ctx);
		p[i] = keep;
		g[i] = (lp - lm) / (2 * FD_H);
	}
}

/* ------------------------------------------------------------ layer norm */

static void ref_layernorm(double *y, const double *x, const double *gamma, const double *beta,
                          int n, int c, double eps)
{
	for (int r = 0; r < n; r++) {
		const double *xr = x + (size_t)r * c;
		double m = 0.0, v = 0.0;
		for (int j = 0; j < c; j++)
			m += xr[j];
		m /= c;
		for (int j = 0; j < c; j++)
			v += (xr[j] - m) * (xr[j] - m);
		v /= c;
		double rs = 1.0 / sqrt(v + eps);
		for (int j = 0; j < c; j++)
			y[(size_t)r * c + j] = (xr[j] - m) * rs * gamma[j] + (beta ? beta[j] : 0.0);
	}
}

struct ln_ctx {
	double *x, *gamma, *beta, *y;
	const float *dy;
	int n, c;
	double eps;
};

static double ln_loss(void *p)
{
	struct ln_ctx *s = p;
	ref_layernorm(s->y, s->x, s->gamma, s->beta, s->n, s->c, s->eps);
	return dot_wd(s->dy, s->y, (size_t)s->n * s->c);
}

static void test_layernorm(int n, int c, int fd)
{
	char name[64];
	snprintf(name, sizeof name, "layernorm %dx%d", n, c);
	size_t nc = (size_t)n * c;
	float eps = 1e-5f;
	float *x = falloc(nc), *y = falloc(nc), *dy = falloc(nc), *dx = falloc(nc);
	float *gamma = falloc(c), *beta = falloc(c), *dgamma = falloc(c), *dbeta = falloc(c);
	float *mean = falloc(n), *rstd = falloc(n);
	fill_normal(x, nc, 2.0f);
	for (int r = 0; r < n; r++) /* rows off-centre, as activations are */
		for (int j = 0; j < c; j++)
			x[(size_t)r * c + j] += 3.0f * (r % 5);
	fill_normal(gamma, c, 1.0f);
	fill_normal(beta, c, 1.0f);
	fill_normal(dy, nc, 1.0f);
	/* Pre-filled parameter gradients: backward must add to them. */
	fill_normal(dgamma, c, 1.0f);
	fill_normal(dbeta, c, 1.0f);
	double *dg0 = dalloc(c), *db0 = dalloc(c);
	to_double(dg0, dgamma, c);
	to_double(db0, dbeta, c);

	struct ln_ctx s = { dalloc(nc), dalloc(c), dalloc(c), dalloc(nc), dy, n, c, eps };
	to_double(s.x, x, nc);
	to_double(s.gamma, gamma, c);
	to_double(s.beta, beta, c);
	sd_layernorm_forward(y, mean, rstd, x, gamma, beta, n, c, eps);
	ref_layernorm(s.y, s.x, s.gamma, s.beta, n, c, eps);
	compare(name, "y", y, s.y, nc);
	sd_layernorm_backward(dx, dgamma, dbeta, dy, x, mean, rstd, gamma, n, c);

	double *g = dalloc(nc);
	if (fd) {
		fd_grad(g, s.x, nc, ln_loss, &s);
		compare(name, "dx (fd)", dx, g, nc);
		fd_grad(g, s.gamma, c, ln_loss, &s);
		for (int j = 0; j < c; j++)
			g[j] += dg0[j];
		compare(name, "dgamma+=", dgamma, g, c);
		fd_grad(g, s.beta, c, ln_loss, &s);
		for (int j = 0; j < c; j++)
			g[j] += db0[j];
		compare(name, "dbeta+=", dbeta, g, c);
	} else {
		/* Too many elements for differences: the textbook gradient in double. */
		for (int r = 0; r < n; r++) {
			const double *xr = s.x + (size_t)r * c;
			double m = 0.0, v = 0.0, a = 0.0, b = 0.0;
			for (int j = 0; j < c; j++)
				m += xr[j];
			m /= c;
			for (int j = 0; j < c; j++)
				v += (xr[j] - m) * (xr[j] - m);
			double rs = 1.0 / sqrt(v / c + eps);
			for (int j = 0; j < c; j++) {
				double gj = dy[(size_t)r * c + j] * s.gamma[j];
				a += gj;
				b += gj * (xr[j] - m) * rs;
				dg0[j] += dy[(size_t)r * c + j] * (xr[j] - m) * rs;
				db0[j] += dy[(size_t)r * c + j];
			}
			for (int j = 0; j < c; j++)
				g[(size_t)r * c + j] = rs * (dy[(size_t)r * c + j] * s.gamma[j] - a / c -
				                             (xr[j] - m) * rs * b / c);
		}
		compare(name, "dx", dx, g, nc);
		compare(name, "dgamma+=", dgamma, dg0, c);
		compare(name, "dbeta+=", dbeta, db0, c);
	}

	/* No bias, no saved statistics (inference), in place. */
	float *y2 = falloc(nc);
	memcpy(y2, x, nc * sizeof(float));
	sd_layernorm_forward(y2, NULL, NULL, y2, gamma, NULL, n, c, eps);
	ref_layernorm(s.y, s.x, s.gamma, NULL, n, c, eps);
	compare(name, "y no-bias", y2, s.y, nc);

	/* Thread counts: the same bits with 1 and 2 threads. */
	float *dx1 = falloc(nc), *dg1 = falloc(c), *dg2 = falloc(c);
	omp_set_num_threads(1);
	sd_layernorm_forward(y2, mean, rstd, x, gamma, beta, n, c, eps);
	sd_layernorm_backward(dx1, dg1, NULL, dy, x, mean, rstd, gamma, n, c);
	omp_set_num_threads(2);
	sd_layernorm_forward(y, mean, rstd, x, gamma, beta, n, c, eps);
	sd_layernorm_backward(dx, dg2, NULL, dy, x, mean, rstd, gamma, n, c);
	omp_set_num_threads(1);
	compare_same(name, "omp 1v2", y, y2, nc * sizeof(float));
	compare_same(name, "bwd 1v2", dx, dx1, nc * sizeof(float));
	compare_same(name, "dg 1v2", dg1, dg2, c * sizeof(float));

	free(x); free(y); free(dy); free(dx); free(gamma); free(beta); free(dgamma); free(dbeta);
	free(mean); free(rstd); free(dg0); free(db0); free(s.x); free(s.gamma); free(s.beta);
	free(s.y); free(g); free(y2); free(dx1); free(dg1); free(dg2);
}

/* --------------------------------------------------------------- softmax */

static void ref_softmax(double *y, const double *x, int rows, int len)
{
	for (int r = 0; r < rows; r++) {
		const double *xr = x + (size_t)r * len;
		double m = -INFINITY, s = 0.0;
		for (int j = 0; j < len; j++)
			m = xr[j] > m ? xr[j] : m;
		for (int j = 0; j < len; j++)
			s += exp(xr[j] - m);
		for (int j = 0; j < len; j++)
			y[(size_t)r * len + j] = exp(xr[j] - m) / s;
	}
}

struct sm_ctx {
	double *x, *y;
	const float *dy;
	int rows, len;
};

static double sm_loss(void *p)
{
	struct sm_ctx *s = p;
	ref_softmax(s->y, s->x, s->rows, s->len);
	return dot_wd(s->dy, s->y, (size_t)s->rows * s->len);
}

static void test_softmax(int rows, int len, int fd)
{
	char name[64];
	snprintf(name, sizeof name, "softmax %dx%d", rows, len);
	size_t cnt = (size_t)rows * len;
	float *x = falloc(cnt), *y = falloc(cnt), *dy = falloc(cnt), *dx = falloc(cnt);
	fill_normal(x, cnt, 3.0f);
	/* Rows shifted far from zero: exp would overflow without the max. */
	for (int r = 0; r < rows; r++)
		for (int j = 0; j < len; j++)
			x[(size_t)r * len + j] += (r % 3 == 1) ? 500.0f : (r % 3 == 2 ? -300.0f : 0.0f);
	fill_normal(dy, cnt, 1.0f);
	struct sm_ctx s = { dalloc(cnt), dalloc(cnt), dy, rows, len };
	to_double(s.x, x, cnt);
	sd_softmax_lastdim_forward(y, x, rows, len);
	ref_softmax(s.y, s.x, rows, len);
	compare(name, "y", y, s.y, cnt);
	sd_softmax_lastdim_backward(dx, dy, y, rows, len);
	double *g = dalloc(cnt);
	if (fd) {
		fd_grad(g, s.x, cnt, sm_loss, &s);
		compare(name, "dx (fd)", dx, g, cnt);
	} else {
		for (int r = 0; r < rows; r++) {
			double dot = 0.0;
			for (int j = 0; j < len; j++)
				dot += dy[(size_t)r * len + j] * s.y[(size_t)r * len + j];
			for (int j = 0; j < len; j++)
				g[(size_t)r * len + j] = s.y[(size_t)r * len + j] *
				                         (dy[(size_t)r * len + j] - dot);
		}
		compare(name, "dx", dx, g, cnt);
	}
	/* In place (y = x, dx = dy) and 1 v 2 threads: the same bits. */
	float *a = falloc(cnt), *b = falloc(cnt);
	memcpy(a, x, cnt * sizeof(float));
	omp_set_num_threads(2);
	sd_softmax_lastdim_forward(a, a, rows, len);
	compare_same(name, "in place", a, y, cnt * sizeof(float));
	memcpy(b, dy, cnt * sizeof(float));
	sd_softmax_lastdim_backward(b, b, y, rows, len);
	omp_set_num_threads(1);
	compare_same(name, "bwd in pl", b, dx, cnt * sizeof(float));
	free(x); free(y); free(dy); free(dx); free(s.x); free(s.y); free(g); free(a); free(b);
}

/* ------------------------------------------------------------------ GELU */

static double ref_gelu(double x, enum sd_gelu_kind kind)
{
	if (kind == SD_GELU_TANH)
		return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
	return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
}

static void test_gelu(enum sd_gelu_kind kind, size_t count)
{
	char name[64];
	snprintf(name, sizeof name, "gelu %s %zu", kind == SD_GELU_TANH ? "tanh" : "erf", count);
	float *x = falloc(count), *y = falloc(count), *dy = falloc(count), *dx = falloc(count);
	double *r = dalloc(count), *g = dalloc(count);
	fill_normal(x, count, 2.5f);
	fill_normal(dy, count, 1.0f);
	sd_gelu_forward(y, x, count, kind);
	sd_gelu_backward(dx, dy, x, count, kind);
	for (size_t i = 0; i < count; i++) {
		r[i] = ref_gelu(x[i], kind);
		/* Elementwise, so one difference per element gives the gradient. */
		g[i] = dy[i] * (ref_gelu(x[i] + FD_H, kind) - ref_gelu(x[i] - FD_H, kind)) /
		       (2 * FD_H);
	}
	compare(name, "y", y, r, count);
	compare(name, "dx (fd)", dx, g, count);
	float *a = falloc(count);
	omp_set_num_threads(2);
	sd_gelu_forward(a, x, count, kind);
	compare_same(name, "omp 1v2", a, y, count * sizeof(float));
	memcpy(a, dy, count * sizeof(float));
	sd_gelu_backward(a, a, x, count, kind);
	compare_same(name, "bwd in pl", a, dx, count * sizeof(float));
	omp_set_num_threads(1);
	free(x); free(y); free(dy); free(dx); free(r); free(g); free(a);
}

/* ------------------------------------------------------------- embedding */

static void test_embedding(int n, int c, int vocab)
{
	char name[64];
	snprintf(name, sizeof name, "embedding n%d c%d V%d", n, c, vocab);
	float *table = falloc((size_t)vocab * c), *out = falloc((size_t)n * c);
	float *dout = falloc((size_t)n * c), *dtab = falloc((size_t)vocab * c);
	int32_t *ids = xalloc((size_t)n * sizeof(int32_t));
	fill_normal(table, (size_t)vocab * c, 1.0f);
	fill_normal(dout, (size_t)n * c, 1.0f);
	fill_normal(dtab, (size_t)vocab * c, 1.0f);
	/* Few distinct ids, so most repeat many times (as frequent tokens do). */
	for (int i = 0; i < n; i++)
		ids[i] = (int32_t)sd_rng_below(&rng, (uint32_t)(vocab < 7 ? vocab : 7)) *
		         (vocab / 7 > 1 ? vocab / 7 : 1);
	int rc = sd_embedding_forward(out, ids, table, n, c, vocab);
	int same = rc == 0;
	for (int i = 0; i < n && same; i++)
		same = !memcmp(out + (size_t)i * c, table + (size_t)ids[i] * c, (size_t)c * sizeof(float));
	check_report(same, "%-34s %-10s rows equal the table's", name, "out");

	/* Backward: dtable (pre-filled) + the scatter of dout, in double. */
	double *ref = dalloc((size_t)vocab * c);
	to_double(ref, dtab, (size_t)vocab * c);
	for (int i = 0; i < n; i++)
		for (int j = 0; j < c; j++)
			ref[(size_t)ids[i] * c + j] += dout[(size_t)i * c + j];
	float *d1 = falloc((size_t)vocab * c);
	memcpy(d1, dtab, (size_t)vocab * c * sizeof(float));
	omp_set_num_threads(1);
	sd_embedding_backward(d1, dout, ids, n, c, vocab);
	compare(name, "dtable+=", d1, ref, (size_t)vocab * c);
	omp_set_num_threads(2);
	sd_embedding_backward(dtab, dout, ids, n, c, vocab);
	omp_set_num_threads(1);
	compare_same(name, "bwd 1v2", d1, dtab, (size_t)vocab * c * sizeof(float));

	/* An id out of range: -1, its row zero, the others written. */
	ids[n / 2] = vocab;
	memset(out, 0x7f, (size_t)n * c * sizeof(float));
	rc = sd_embedding_forward(out, ids, table, n, c, vocab);
	int zero = 1;
	for (int j = 0; j < c; j++)
		zero &= out[(size_t)(n / 2) * c + j] == 0.0f;
	check_report(rc == -1 && zero &&
	             !memcmp(out, table + (size_t)ids[0] * c, (size_t)c * sizeof(float)),
	             "%-34s %-10s id %d >= vocab: returns %d, row zeroed", name, "bad id", vocab, rc);
	free(table); free(out); free(dout); free(dtab); free(ids); free(ref); free(d1);
}

/* ---------------------------------------------------- batched matmul */

/* Element (r, col) of op(M) for M stored (rows, cols) or, transposed,
 * (cols, rows). */
static double op_at(const double *m, int trans, int r, int col, int rows, int cols)
{
	return trans ? m[(size_t)col * rows + r] : m[(size_t)r * cols + col];
}

struct mm_ctx {
	double *a, *b, *y;
	const float *dy;
	int batch, m, k, n, ta, tb;
};

static void ref_matmul(double *y, const double *a, const double *b, int batch, int m, int k,
                       int n, int ta, int tb)
{
	for (int i = 0; i < batch; i++)
		for (int r = 0; r < m; r++)
			for (int col = 0; col < n; col++) {
				double s = 0.0;
				for (int l = 0; l < k; l++)
					s += op_at(a + (size_t)i * m * k, ta, r, l, m, k) *
					     op_at(b + (size_t)i * k * n, tb, l, col, k, n);
				y[((size_t)i * m + r) * n + col] = s;
			}
}

static double mm_loss(void *p)
{
	struct mm_ctx *s = p;
	ref_matmul(s->y, s->a, s->b, s->batch, s->m, s->k, s->n, s->ta, s->tb);
	return dot_wd(s->dy, s->y, (size_t)s->batch * s->m * s->n);
}

static void test_matmul(int batch, int m, int k, int n, int ta, int tb, int fd)
{
	char name[64];
	snprintf(name, sizeof name, "matmul %dx(%d,%d,%d)%s%s", batch, m, k, n, ta ? " A^T" : "",
	         tb ? " B^T" : "");
	size_t na = (size_t)batch * m * k, nb = (size_t)batch * k * n, ny = (size_t)batch * m * n;
	float *a = falloc(na), *b = falloc(nb), *y = falloc(ny), *dy = falloc(ny);
	float *da = falloc(na), *db = falloc(nb);
	fill_normal(a, na, 1.0f);
	fill_normal(b, nb, 1.0f);
	fill_normal(dy, ny, 1.0f);
	struct mm_ctx s = { dalloc(na), dalloc(nb), dalloc(ny), dy, batch, m, k, n, ta, tb };
	to_double(s.a, a, na);
	to_double(s.b, b, nb);
	omp_set_num_threads(2);
	sd_matmul_batched_forward(y, a, b, batch, m, k, n, ta, tb);
	ref_matmul(s.y, s.a, s.b, batch, m, k, n, ta, tb);
	compare(name, "y", y, s.y, ny);
	sd_matmul_batched_backward(da, db, dy, a, b, batch, m, k, n, ta, tb, 0);
	double *g = dalloc(na), *gb = dalloc(nb);
	if (fd) {
		fd_grad(g, s.a, na, mm_loss, &s);
		fd_grad(gb, s.b, nb, mm_loss, &s);
	} else {
		/* Too many elements for differences: dop(A) = dY op(B)^T and
		 * dop(B) = op(A)^T dY in double, stored in A's and B's layouts. */
		for (int i = 0; i < batch; i++) {
			const double *ai = s.a + (size_t)i * m * k, *bi = s.b + (size_t)i * k * n;
			const float *dyi = dy + (size_t)i * m * n;
			for (int r = 0; r < m; r++)
				for (int l = 0; l < k; l++) {
					double acc = 0.0;
					for (int col = 0; col < n; col++)
						acc += dyi[(size_t)r * n + col] * op_at(bi, tb, l, col, k, n);
					g[(size_t)i * m * k + (ta ? (size_t)l * m + r : (size_t)r * k + l)] = acc;
				}
			for (int l = 0; l < k; l++)
				for (int col = 0; col < n; col++) {
					double acc = 0.0;
					for (int r = 0; r < m; r++)
						acc += op_at(ai, ta, r, l, m, k) * dyi[(size_t)r * n + col];
					gb[(size_t)i * k * n + (tb ? (size_t)col * k + l : (size_t)l * n + col)] = acc;
				}
		}
	}
	compare(name, fd ? "da (fd)" : "da", da, g, na);
	compare(name, fd ? "db (fd)" : "db", db, gb, nb);
	/* accumulate: a second call adds the same gradient again. */
	sd_matmul_batched_backward(da, NULL, dy, a, b, batch, m, k, n, ta, tb, 1);
	for (size_t i = 0; i < na; i++)
		g[i] *= 2;
	compare(name, "da acc x2", da, g, na);
	omp_set_num_threads(1);
	free(a); free(b); free(y); free(dy); free(da); free(db); free(s.a); free(s.b); free(s.y);
	free(g); free(gb);
}

/* ------------------------------------------ fused causal self-attention */

struct at_ctx {
	double *q, *k, *v, *y;
	const float *dy;
	int b, h, t, d;
	double scale;
};

static void ref_attention(double *y, const double *q, const double *k, const double *v, int b,
                          int h, int t, int d, double scale)
{
	double *s = dalloc((size_t)t);
	for (int p = 0; p < b * h; p++) {
		const double *qp = q + (size_t)p * t * d, *kp = k + (size_t)p * t * d;
		const double *vp = v + (size_t)p * t * d;
		for (int i = 0; i < t; i++) {
			double m = -INFINITY, sum = 0.0;
			for (int j = 0; j <= i; j++) {
				double dot = 0.0;
				for (int l = 0; l < d; l++)
					dot += qp[(size_t)i * d + l] * kp[(size_t)j * d + l];
				s[j] = dot * scale;
				m = s[j] > m ? s[j] : m;
			}
			for (int j = 0; j <= i; j++)
				sum += (s[j] = exp(s[j] - m));
			for (int l = 0; l < d; l++) {
				double acc = 0.0;
				for (int j = 0; j <= i; j++)
					acc += s[j] / sum * vp[(size_t)j * d + l];
				y[((size_t)p * t + i) * d + l] = acc;
			}
		}
	}
	free(s);
}

static double at_loss(void *p)
{
	struct at_ctx *s = p;
	ref_attention(s->y, s->q, s->k, s->v, s->b, s->h, s->t, s->d, s->scale);
	return dot_wd(s->dy, s->y, (size_t)s->b * s->h * s->t * s->d);
}

/* The unfused chain a GPT export computes, with this file's kernels:
 * s = q k^T (batched matmul), s *= scale, s[j > i] = -inf, p = softmax(s),
 * y = p v; backward through the same chain.  ws: 2 (B H T T) floats. */
static void unfused_attention(float *y, float *dq, float *dk, float *dv, const float *dy,
                              const float *q, const float *k, const float *v, float *ws, int b,
                              int h, int t, int d, float scale)
{
	int bh = b * h;
	size_t tt = (size_t)bh * t * t;
	float *p = ws, *dp = ws + tt;
	sd_matmul_batched_forward(p, q, k, bh, t, d, t, 0, 1);
	for (size_t i = 0; i < tt; i++) {
		size_t row = i / t % t, col = i % t;
		p[i] = col > row ? -INFINITY : p[i] * scale;
	}
	sd_softmax_lastdim_forward(p, p, bh * t, t);
	sd_matmul_batched_forward(y, p, v, bh, t, t, d, 0, 0);
	sd_matmul_batched_backward(dp, dv, dy, p, v, bh, t, t, d, 0, 0, 0);
	sd_softmax_lastdim_backward(dp, dp, p, bh * t, t);
	for (size_t i = 0; i < tt; i++)
		dp[i] *= scale;
	sd_matmul_batched_backward(dq, dk, dp, q, k, bh, t, d, t, 0, 1, 0);
}

static void test_attention(int b, int h, int t, int d, int fd)
{
	char name[64];
	snprintf(name, sizeof name, "attention B%d H%d T%d D%d", b, h, t, d);
	size_t n = (size_t)b * h * t * d, tt = (size_t)b * h * t * t;
	float scale = 1.0f / sqrtf((float)d);
	float *q = falloc(n), *k = falloc(n), *v = falloc(n), *y = falloc(n), *dy = falloc(n);
	float *dq = falloc(n), *dk = falloc(n), *dv = falloc(n), *probs = falloc(tt);
	float *ws = falloc(2 * tt);
	fill_normal(q, n, 1.0f);
	fill_normal(k, n, 1.0f);
	fill_normal(v, n, 1.0f);
	fill_normal(dy, n, 1.0f);
	struct at_ctx s = { dalloc(n), dalloc(n), dalloc(n), dalloc(n), dy, b, h, t, d, scale };
	to_double(s.q, q, n);
	to_double(s.k, k, n);
	to_double(s.v, v, n);
	omp_set_num_threads(2);
	sd_attention_causal_forward(y, probs, q, k, v, b, h, t, d, scale);
	sd_attention_causal_backward(dq, dk, dv, dy, q, k, v, probs, ws, b, h, t, d, scale);
	ref_attention(s.y, s.q, s.k, s.v, b, h, t, d, scale);
	compare(name, "y", y, s.y, n);
	int upper0 = 1;
	for (size_t i = 0; i < tt; i++)
		if (i % t > i / t % t)
			upper0 &= probs[i] == 0.0f;
	check_report(upper0, "%-34s %-10s zero above the diagonal", name, "probs");
	if (!fd) {
		/* Too many elements for differences everywhere: 32 random elements
		 * of each of q, k and v. */
		enum { SAMPLES = 32 };
		double *ins[3] = { s.q, s.k, s.v };
		const float *outs[3] = { dq, dk, dv };
		const char *what[3] = { "dq (fd32)", "dk (fd32)", "dv (fd32)" };
		for (int w = 0; w < 3; w++) {
			float got[SAMPLES];
			double want[SAMPLES];
			for (int i = 0; i < SAMPLES; i++) {
				size_t at = sd_rng_below(&rng, (uint32_t)n);
				fd_grad(&want[i], ins[w] + at, 1, at_loss, &s);
				got[i] = outs[w][at];
			}
			compare(name, what[w], got, want, SAMPLES);
		}
	} else {
		double *g = dalloc(n);
		fd_grad(g, s.q, n, at_loss, &s);
		compare(name, "dq (fd)", dq, g, n);
		fd_grad(g, s.k, n, at_loss, &s);
		compare(name, "dk (fd)", dk, g, n);
		fd_grad(g, s.v, n, at_loss, &s);
		compare(name, "dv (fd)", dv, g, n);
		free(g);
	}

	/* Fused against the unfused chain of this file's kernels. */
	float *uy = falloc(n), *udq = falloc(n), *udk = falloc(n), *udv = falloc(n);
	double *r = dalloc(n);
	unfused_attention(uy, udq, udk, udv, dy, q, k, v, ws, b, h, t, d, scale);
	double worst = 0.0, e;
	to_double(r, uy, n);
	e = compare_tol(name, "y~unfused", y, r, n, TOL_FUSED);
	worst = e > worst ? e : worst;
	to_double(r, udq, n);
	e = compare_tol(name, "dq~unfused", dq, r, n, TOL_FUSED);
	worst = e > worst ? e : worst;
	to_double(r, udk, n);
	e = compare_tol(name, "dk~unfused", dk, r, n, TOL_FUSED);
	worst = e > worst ? e : worst;
	to_double(r, udv, n);
	e = compare_tol(name, "dv~unfused", dv, r, n, TOL_FUSED);
	worst = e > worst ? e : worst;
	printf("%-34s fused vs unfused: max rel difference %.2e\n", name, worst);

	/* Same thread count, same bits. */
	sd_attention_causal_forward(uy, ws, q, k, v, b, h, t, d, scale);
	compare_same(name, "y again", uy, y, n * sizeof(float));
	sd_attention_causal_backward(udq, udk, udv, dy, q, k, v, probs, ws, b, h, t, d, scale);
	compare_same(name, "dq again", udq, dq, n * sizeof(float));
	compare_same(name, "dk again", udk, dk, n * sizeof(float));
	/* Gradients not asked for (NULL) leave the others as they were. */
	memset(udq, 0, n * sizeof(float));
	memset(udv, 0, n * sizeof(float));
	sd_attention_causal_backward(NULL, udk, NULL, dy, q, k, v, probs, ws, b, h, t, d, scale);
	compare_same(name, "dk alone", udk, dk, n * sizeof(float));
	sd_attention_causal_backward(udq, NULL, udv, dy, q, k, v, probs, ws, b, h, t, d, scale);
	compare_same(name, "dq w/o dk", udq, dq, n * sizeof(float));
	compare_same(name, "dv w/o dk", udv, dv, n * sizeof(float));
	omp_set_num_threads(1);
	free(q); free(k); free(v); free(y); free(dy); free(dq); free(dk); free(dv); free(probs);
	free(ws); free(s.q); free(s.k); free(s.v); free(s.y); free(uy); free(udq); free(udk);
	free(udv); free(r);
}

/* ------------------------------------------------ sequence cross-entropy */

struct xe_ctx {
	double *x;
	const int32_t *tg;
	int n, v;
};

static double xe_loss(void *p)
{
	struct xe_ctx *s = p;
	double total = 0.0;
	for (int r = 0; r < s->n; r++) {
		if (s->tg[r] < 0)
			continue;
		const double *xr = s->x + (size_t)r * s->v;
		double m = -INFINITY, sum = 0.0;
		for (int j = 0; j < s->v; j++)
			m = xr[j] > m ? xr[j] : m;
		for (int j = 0; j < s->v; j++)
			sum += exp(xr[j] - m);
		total += m + log(sum) - xr[s->tg[r]];
	}
	return total;
}

static void test_xent(int n, int v, int fd)
{
	char name[64];
	snprintf(name, sizeof name, "cross-entropy n%d V%d", n, v);
	size_t cnt = (size_t)n * v;
	float scale = 1.0f / (float)n;
	float *x = falloc(cnt), *g = falloc(cnt), *g2 = falloc(cnt);
	int32_t *tg = xalloc((size_t)n * sizeof(int32_t));
	fill_normal(x, cnt, 2.0f);
	for (int r = 0; r < n; r++) {
		tg[r] = (int32_t)sd_rng_below(&rng, (uint32_t)v);
		if (r % 4 == 3) /* far from zero: exp overflows without the max */
			for (int j = 0; j < v; j++)
				x[(size_t)r * v + j] += 1e4f;
	}
	tg[n / 3] = -100; /* PyTorch's ignore_index */
	struct xe_ctx s = { dalloc(cnt), tg, n, v };
	to_double(s.x, x, cnt);
	double loss = sd_cross_entropy_seq_forward_backward(g, x, tg, n, v, scale);
	double ref = xe_loss(&s);
	check_report(fabs(loss - ref) <= 1e-6 * fabs(ref),
	             "%-34s %-10s %.9g vs %.9g (rel err %.1e, tol 1e-6)",
	             name, "loss", loss, ref, fabs(loss - ref) / fabs(ref));
	double *gr = dalloc(cnt);
	if (fd)
		fd_grad(gr, s.x, cnt, xe_loss, &s);
	else
		for (int r = 0; r < n; r++) {
			const double *xr = s.x + (size_t)r * v;
			double m = -INFINITY, sum = 0.0;
			for (int j = 0; j < v; j++)
				m = xr[j] > m ? xr[j] : m;
			for (int j = 0; j < v; j++)
				sum += exp(xr[j] - m);
			for (int j = 0; j < v; j++)
				gr[(size_t)r * v + j] = tg[r] < 0 ? 0.0 : exp(xr[j] - m) / sum - (j == tg[r]);
		}
	for (size_t i = 0; i < cnt; i++)
		gr[i] *= scale;
	compare(name, fd ? "dlogits(fd)" : "dlogits", g, gr, cnt);
	int zero = 1;
	for (int j = 0; j < v; j++)
		zero &= g[(size_t)(n / 3) * v + j] == 0.0f;
	check_report(zero, "%-34s %-10s ignored row has zero gradient", name, "ignore");

	/* In place, 2 threads, loss only: the same bits. */
	memcpy(g2, x, cnt * sizeof(float));
	omp_set_num_threads(2);
	double l2 = sd_cross_entropy_seq_forward_backward(g2, g2, tg, n, v, scale);
	double l3 = sd_cross_entropy_seq_forward_backward(NULL, x, tg, n, v, scale);
	omp_set_num_threads(1);
	compare_same(name, "in pl 2thr", g2, g, cnt * sizeof(float));
	check_report(l2 == loss && l3 == loss,
	             "%-34s %-10s loss bit-identical (in place, 2 threads, no grad)",
	             name, "loss");
	tg[0] = v;
	double bad = sd_cross_entropy_seq_forward_backward(g2, x, tg, n, v, scale);
	check_report(isnan(bad), "%-34s %-10s target >= V gives NaN", name, "bad tgt");
	free(x); free(g); free(g2); free(tg); free(s.x); free(gr);
}

/* ----------------------------------------------- AVX-512 twins, bit for bit
 * engine/layers-seq.c compiles its row kernels twice (baseline and
 * AVX-512) and promises the same bits from both: run every kernel with the
 * AVX-512 twins and with SD_LAYERS_NO_AVX512 set, at odd lengths that
 * exercise the vector tails, and compare. */

/* Runs every row kernel on fixed inputs; writes all outputs to out, in
 * order, and returns how many floats it wrote. */
static size_t run_all_kernels(float *out, const float *in, int n, int c)
{
	size_t nc = (size_t)n * c, o = 0;
	const float *x = in, *dy = in + nc, *gamma = in + 2 * nc, *beta = gamma + c;
	float *mean = falloc(n), *rstd = falloc(n);
	int32_t *tg = xalloc((size_t)n * sizeof(int32_t));
	for (int r = 0; r < n; r++)
		tg[r] = (r * 7) % c;
	sd_layernorm_forward(out + o, mean, rstd, x, gamma, beta, n, c, 1e-5f);
	o += nc;
	sd_layernorm_backward(out + o, out + o + nc, out + o + nc + c, dy, x, mean, rstd, gamma, n, c);
	o += nc + 2 * (size_t)c;
	sd_softmax_lastdim_forward(out + o, x, n, c);
	sd_softmax_lastdim_backward(out + o + nc, dy, out + o, n, c);
	o += 2 * nc;
	for (int kind = 0; kind < 2; kind++) {
		sd_gelu_forward(out + o, x, nc, (enum sd_gelu_kind)kind);
		sd_gelu_backward(out + o + nc, dy, x, nc, (enum sd_gelu_kind)kind);
		o += 2 * nc;
	}
	double loss = sd_cross_entropy_seq_forward_backward(out + o, x, tg, n, c, 0.5f);
	o += nc;
	memcpy(out + o, &loss, sizeof loss);
	o += 2;
	/* Attention: one (batch, head) of n positions, D = c; k = dy, v = x. */
	float *pr = falloc((size_t)n * n), *ws = falloc((size_t)n * n);
	sd_attention_causal_forward(out + o, pr, x, dy, x, 1, 1, n, c, 0.3f);
	memcpy(out + o + nc, pr, (size_t)n * n * sizeof(float));
	o += nc + (size_t)n * n;
	sd_attention_causal_backward(out + o, out + o + nc, out + o + 2 * nc, dy, x, dy, x, pr, ws,
	                             1, 1, n, c, 0.3f);
	o += 3 * nc;
	free(mean); free(rstd); free(ws); free(tg); free(pr);
	return o;
}

static void test_twins(void)
{
	if (!__builtin_cpu_supports("avx512f")) {
		printf("%-34s no AVX-512F on this CPU: only the baseline kernels run here\n", "twins");
		return;
	}
	if (getenv("SD_LAYERS_NO_AVX512")) {
		printf("%-34s SD_LAYERS_NO_AVX512 is set: the AVX-512 twins are off\n", "twins");
		return;
	}
	const int n = 29, c = 133;   /* odd, so every vector loop has a tail */
	size_t nc = (size_t)n * c, cap = 20 * nc + 4 * (size_t)c + 2 * (size_t)n * n + 16;
	float *in = falloc(2 * nc + 2 * (size_t)c), *a = falloc(cap), *b = falloc(cap);
	fill_normal(in, 2 * nc + 2 * (size_t)c, 2.0f);
	omp_set_num_threads(1);
	size_t na = run_all_kernels(a, in, n, c);
	setenv("SD_LAYERS_NO_AVX512", "1", 1);
	size_t nb = run_all_kernels(b, in, n, c);
	unsetenv("SD_LAYERS_NO_AVX512");
	check_report(na == nb && na <= cap, "%-34s %-10s %zu floats written", "twins", "count", na);
	compare_same("twins: AVX-512 v baseline", "all", a, b, na * sizeof(float));
	free(in); free(a); free(b);
}

int main(int argc, char **argv)
{
	(void)argc;
	sd_blas_select_kernel(argv);
	setvbuf(stdout, NULL, _IOLBF, 0);
	sd_rng_seed(&rng, 20261206, 36);
	openblas_set_num_threads(1);
	omp_set_num_threads(1);
	printf("transformer kernels vs double references: |a-r| / max(|r|, mean|r|) <= %g\n", TOL);

	test_layernorm(9, 37, 1);
	test_layernorm(512, 128, 0);      /* the example GPT: B 8 x T 64 rows, C 128 */
	test_softmax(7, 13, 1);
	test_softmax(1024, 64, 0);
	test_gelu(SD_GELU_ERF, 1000);
	test_gelu(SD_GELU_TANH, 1000);
	test_gelu(SD_GELU_ERF, 65536);
	test_gelu(SD_GELU_TANH, 65536);
	test_embedding(37, 11, 50);
	test_embedding(512, 128, 256);
	test_matmul(3, 5, 7, 4, 0, 0, 1);
	test_matmul(3, 5, 7, 4, 0, 1, 1);
	test_matmul(3, 5, 7, 4, 1, 0, 1);
	test_matmul(3, 5, 7, 4, 1, 1, 1);
	test_matmul(32, 64, 32, 64, 0, 1, 0);  /* q k^T of the example GPT */
	test_attention(2, 2, 7, 5, 1);
	test_attention(1, 3, 1, 4, 1);      /* one position: y = v */
	test_attention(1, 2, 70, 3, 1);     /* causal blocks of 32, 32 and 6 */
	test_attention(8, 4, 64, 32, 0);    /* the example GPT's shape */
	test_xent(9, 11, 1);
	test_xent(512, 256, 0);
	test_twins();
	return check_exit("test-layers-seq");
}
