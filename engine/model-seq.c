/* engine/model-seq.c - the CPU executor's language-model ops (OP_SEQ nodes,
 * enum sd_seq_op in model-graph.h): what engine/onnx.c lowers a GPT's export
 * to, forward and backward.  Activations are (nb, per-sample dims) row-major;
 * "rows" below is every per-sample dimension but the last.
 *
 * Formulas: LayerNorm (Ba et al. 2016) with the biased variance and its
 * backward dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)), as
 * PyTorch's layer_norm; softmax's backward dx = y (dy - sum(dy y)); erf's
 * derivative 2/sqrt(pi) exp(-x^2); cross-entropy as PyTorch's
 * F.cross_entropy (log-sum-exp with the row's maximum subtracted).  Sums
 * over a row are taken in double.
 *
 * These kernels are the straightforward loops (help-kern's
 * engine/layers-seq.c is to replace them with tuned ones); the matrix
 * products go through OpenBLAS. */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/errors.h"
#include "engine/layers.h"
#include "engine/model-graph.h"

static size_t act_floats(const struct act *a) { return (size_t)a->c * a->h * a->w; }
static void transpose_map(const struct node *n, size_t per, uint32_t *src);

void sd_seq_finish(struct sd_model *m)
{
	for (int i = 0; i < m->nnodes; i++) {
		struct node *n = &m->nodes[i];
		if (n->op != OP_SEQ)
			continue;
		if (n->seq == SEQ_TRANSPOSE) {
			const size_t per = act_floats(&m->acts[n->in]);
			n->seq_src = sd_malloc(per * sizeof *n->seq_src);
			transpose_map(n, per, n->seq_src);
		}
		if (n->seq == SEQ_LAYERNORM) {
			size_t r = (size_t)m->max_batch * n->seq_rows;
			n->seq_mean = sd_malloc(r * sizeof(float));
			n->seq_rstd = sd_malloc(r * sizeof(float));
		}
	}
}

double sd_seq_xent(const float *logits, float *dlogits, const int32_t *y, size_t rows, int V,
                   float scale)
{
	double total = 0;
	for (size_t r = 0; r < rows; r++) {
		const float *x = logits + r * V;
		float mx = x[0];
		for (int j = 1; j < V; j++)
			mx = x[j] > mx ? x[j] : mx;
		double s = 0;
		for (int j = 0; j < V; j++)
			s += exp((double)x[j] - mx);
		double lse = log(s) + mx;
		total += lse - x[y[r]];
		if (dlogits) {
			float *d = dlogits + r * V;
			for (int j = 0; j < V; j++)
				d[j] = (float)(exp((double)x[j] - lse) * scale);
			d[y[r]] -= scale;
		}
	}
	return total;
}

static void layernorm_forward(const struct node *n, float *y, const float *x, const float *g,
                              const float *b, size_t rows)
{
	const int C = n->seq_n;
	for (size_t r = 0; r < rows; r++) {
		const float *xr = x + r * C;
		float *yr = y + r * C;
		double s = 0, v = 0;
		for (int j = 0; j < C; j++)
			s += xr[j];
		const double mean = s / C;
		for (int j = 0; j < C; j++)
			v += (xr[j] - mean) * (xr[j] - mean);
		const float rstd = (float)(1.0 / sqrt(v / C + n->seq_eps));
		const float mf = (float)mean;
		n->seq_mean[r] = mf;
		n->seq_rstd[r] = rstd;
		for (int j = 0; j < C; j++) {
			float h = (xr[j] - mf) * rstd;
			yr[j] = h * (g ? g[j] : 1.0f) + (b ? b[j] : 0.0f);
		}
	}
}

static void layernorm_backward(const struct node *n, float *dx, float *dg, float *db,
                               const float *dy, const float *x, const float *g, size_t rows)
{
	const int C = n->seq_n;
	for (size_t r = 0; r < rows; r++) {
		const float *xr = x + r * C, *dyr = dy + r * C;
		const float mf = n->seq_mean[r], rstd = n->seq_rstd[r];
		double s1 = 0, s2 = 0;
		for (int j = 0; j < C; j++) {
			float h = (xr[j] - mf) * rstd;
			float dh = dyr[j] * (g ? g[j] : 1.0f);
			if (dg)
				dg[j] += dyr[j] * h;
			if (db)
				db[j] += dyr[j];
			s1 += dh;
			s2 += (double)dh * h;
		}
		if (!dx)
			continue;
		const float m1 = (float)(s1 / C), m2 = (float)(s2 / C);
		float *dxr = dx + r * C;
		for (int j = 0; j < C; j++) {
			float h = (xr[j] - mf) * rstd;
			dxr[j] = rstd * (dyr[j] * (g ? g[j] : 1.0f) - m1 - h * m2);
		}
	}
}

static void softmax_forward(float *y, const float *x, size_t rows, int C)
{
	for (size_t r = 0; r < rows; r++) {
		const float *xr = x + r * C;
		float *yr = y + r * C;
		float mx = xr[0];
		for (int j = 1; j < C; j++)
			mx = xr[j] > mx ? xr[j] : mx;
		double s = 0;
		for (int j = 0; j < C; j++) {
			yr[j] = expf(xr[j] - mx);
			s += yr[j];
		}
		const float inv = (float)(1.0 / s);
		for (int j = 0; j < C; j++)
			yr[j] *= inv;
	}
}

static void softmax_backward(float *dx, const float *dy, const float *y, size_t rows, int C)
{
	for (size_t r = 0; r < rows; r++) {
		const float *yr = y + r * C, *dyr = dy + r * C;
		double s = 0;
		for (int j = 0; j < C; j++)
			s += (double)dyr[j] * yr[j];
		const float sf = (float)s;
		for (int j = 0; j < C; j++)
			dx[r * C + j] = yr[j] * (dyr[j] - sf);
	}
}

/* Per-sample offset in the input of each output element of a transpose. */
static void transpose_map(const struct node *n, size_t per, uint32_t *src)
{
	const int r = n->seq_rank;
	size_t ist[SD_ACT_MAX_RANK], od[SD_ACT_MAX_RANK], idx[SD_ACT_MAX_RANK] = { 0 };
	size_t s = 1;
	for (int k = r - 1; k >= 0; k--) {
		ist[k] = s;
		s *= (size_t)n->seq_dims[k];
	}
	for (int k = 0; k < r; k++)
		od[k] = (size_t)n->seq_dims[n->seq_perm[k]];
	for (size_t o = 0; o < per; o++) {
		size_t off = 0;
		for (int k = 0; k < r; k++)
			off += idx[k] * ist[n->seq_perm[k]];
		src[o] = (uint32_t)off;
		for (int k = r - 1; k >= 0; k--) {
			if (++idx[k] < od[k])
				break;
			idx[k] = 0;
		}
	}
}

static const float *bias_k(const struct sd_model *m, const struct node *n)
{
	return n->w_off == SD_NO_TENSOR ? n->bin_k : m->params + n->w_off;
}

void sd_seq_forward(struct sd_model *m, int i, int nb, int train)
{
	(void)train;
	struct node *n = &m->nodes[i];
	struct act *in = &m->acts[n->in], *out = &m->acts[n->out];
	const float *p = m->params;
	const size_t rows = (size_t)nb * n->seq_rows;
	switch (n->seq) {
	case SEQ_EMBED: {
		const int T = n->seq_rows, C = n->seq_n;
		const float *W = p + n->w_off;
		for (int b = 0; b < nb; b++)
			for (int t = 0; t < T; t++) {
				int id = n->seq_idx ? n->seq_idx[t] : (int)in->val[(size_t)b * T + t];
				memcpy(out->val + ((size_t)b * T + t) * C, W + (size_t)id * C,
				       (size_t)C * sizeof(float));
			}
		break;
	}
	case SEQ_LINEAR:
		sd_linear_forward(out->val, in->val, p + n->w_off,
		                  n->b_off == SD_NO_TENSOR ? NULL : p + n->b_off, (int)rows, n->seq_k,
		                  n->seq_n);
		break;
	case SEQ_BMM: {
		const int M = n->seq_m, K = n->seq_k, N = n->seq_n;
		const float *B = m->acts[n->in2].val;
		for (size_t g = 0; g < (size_t)nb * n->seq_g; g++)
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f,
			            in->val + g * M * K, K, B + g * K * N, N, 0.0f, out->val + g * M * N, N);
		break;
	}
	case SEQ_LAYERNORM:
		layernorm_forward(n, out->val, in->val, n->w_off == SD_NO_TENSOR ? NULL : p + n->w_off,
		                  n->b_off == SD_NO_TENSOR ? NULL : p + n->b_off, rows);
		break;
	case SEQ_SOFTMAX:
		softmax_forward(out->val, in->val, rows, n->seq_n);
		break;
	case SEQ_MASKFILL: {
		const size_t per = act_floats(in);
		for (int b = 0; b < nb; b++) {
			const float *x = in->val + (size_t)b * per;
			float *y = out->val + (size_t)b * per;
			for (size_t k = 0; k < per; k++)
				y[k] = n->seq_mask[k] ? n->seq_fill : x[k];
		}
		break;
	}
	case SEQ_TRANSPOSE: {
		const size_t per = act_floats(in);
		const uint32_t *src = n->seq_src;
		for (int b = 0; b < nb; b++) {
			const float *x = in->val + (size_t)b * per;
			float *y = out->val + (size_t)b * per;
			for (size_t o = 0; o < per; o++)
				y[o] = x[src[o]];
		}
		break;
	}
	case SEQ_SLICE:
		for (size_t r = 0; r < rows; r++)
			memcpy(out->val + r * n->seq_n, in->val + r * n->seq_k + n->seq_off,
			       (size_t)n->seq_n * sizeof(float));
		break;
	case SEQ_ERF: {
		const size_t cnt = act_floats(in) * nb;
		for (size_t k = 0; k < cnt; k++)
			out->val[k] = erff(in->val[k]);
		break;
	}
	case SEQ_BIAS:
		sd_binary_const_forward(out->val, in->val, bias_k(m, n), n->bin_kc, (int)rows, n->seq_n,
		                        1, n->binop, n->bin_k_first);
		break;
	}
}

void sd_seq_backward(struct sd_model *m, int i, int nb, int need_dx)
{
	struct node *n = &m->nodes[i];
	struct act *in = &m->acts[n->in], *out = &m->acts[n->out];
	const float *p = m->params;
	float *g = m->grads;
	const size_t rows = (size_t)nb * n->seq_rows, cnt = act_floats(in) * nb;
	const float *dy = out->grad;
	float *dx = need_dx ? sd_graph_grad_target(m, in) : NULL;
	switch (n->seq) {
	case SEQ_EMBED: {
		/* Scatter-add into the table's rows: a tied table also gets the
		 * output projection's gradient (added, never overwritten). */
		const int T = n->seq_rows, C = n->seq_n;
		float *dW = g + n->w_off;
		for (int b = 0; b < nb; b++)
			for (int t = 0; t < T; t++) {
				int id = n->seq_idx ? n->seq_idx[t] : (int)in->val[(size_t)b * T + t];
				const float *d = dy + ((size_t)b * T + t) * C;
				float *w = dW + (size_t)id * C;
				for (int c = 0; c < C; c++)
					w[c] += d[c];
			}
		return;   /* ids have no gradient */
	}
	case SEQ_LINEAR:
		sd_linear_backward(dx, g + n->w_off, n->b_off == SD_NO_TENSOR ? NULL : g + n->b_off, dy,
		                   in->val, p + n->w_off, (int)rows, n->seq_k, n->seq_n);
		break;
	case SEQ_BMM: {
		const int M = n->seq_m, K = n->seq_k, N = n->seq_n;
		struct act *b2 = &m->acts[n->in2];
		const size_t G = (size_t)nb * n->seq_g;
		if (dx) {
			for (size_t q = 0; q < G; q++)
				cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, K, N, 1.0f,
				            dy + q * M * N, N, b2->val + q * K * N, N, 0.0f, dx + q * M * K, K);
			sd_graph_grad_commit(m, in, cnt);
			dx = NULL;
		}
		float *db = sd_graph_grad_target(m, b2);
		for (size_t q = 0; q < G; q++)
			cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, K, N, M, 1.0f,
			            in->val + q * M * K, K, dy + q * M * N, N, 0.0f, db + q * K * N, N);
		sd_graph_grad_commit(m, b2, act_floats(b2) * nb);
		return;
	}
	case SEQ_LAYERNORM:
		layernorm_backward(n, dx, n->w_off == SD_NO_TENSOR ? NULL : g + n->w_off,
		                   n->b_off == SD_NO_TENSOR ? NULL : g + n->b_off, dy, in->val,
		                   n->w_off == SD_NO_TENSOR ? NULL : p + n->w_off, rows);
		break;
	case SEQ_SOFTMAX:
		if (dx)
			softmax_backward(dx, dy, out->val, rows, n->seq_n);
		break;
	case SEQ_MASKFILL:
		if (dx) {
			const size_t per = act_floats(in);
			for (int b = 0; b < nb; b++)
				for (size_t k = 0; k < per; k++)
					dx[(size_t)b * per + k] = n->seq_mask[k] ? 0.0f : dy[(size_t)b * per + k];
		}
		break;
	case SEQ_TRANSPOSE:
		if (dx) {
			const size_t per = act_floats(in);
			const uint32_t *src = n->seq_src;
			for (int b = 0; b < nb; b++)
				for (size_t o = 0; o < per; o++)
					dx[(size_t)b * per + src[o]] = dy[(size_t)b * per + o];
		}
		break;
	case SEQ_SLICE:
		if (dx) {
			memset(dx, 0, cnt * sizeof(float));
			for (size_t r = 0; r < rows; r++)
				memcpy(dx + r * n->seq_k + n->seq_off, dy + r * n->seq_n,
				       (size_t)n->seq_n * sizeof(float));
		}
		break;
	case SEQ_ERF:
		if (dx) {
			const float c = 1.1283791670955126f;   /* 2 / sqrt(pi) */
			for (size_t k = 0; k < cnt; k++)
				dx[k] = dy[k] * c * expf(-in->val[k] * in->val[k]);
		}
		break;
	case SEQ_BIAS:
		sd_binary_const_backward(dx, n->w_off == SD_NO_TENSOR ? NULL : g + n->w_off, dy, in->val,
		                         bias_k(m, n), n->bin_kc, (int)rows, n->seq_n, 1, n->binop,
		                         n->bin_k_first);
		break;
	}
	if (dx)
		sd_graph_grad_commit(m, in, cnt);
}
