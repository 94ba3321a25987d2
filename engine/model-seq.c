/* engine/model-seq.c - the CPU executor's language-model ops (OP_SEQ nodes,
 * enum sd_seq_op in model-graph.h): what engine/onnx.c lowers a GPT's export
 * to, forward and backward.  Activations are (nb, per-sample dims) row-major;
 * "rows" below is every per-sample dimension but the last.
 *
 * The layer norm, softmax, GELU, embedding, batched products, fused
 * attention and cross-entropy are engine/layers-seq.h's kernels (their
 * formulas and sources are there); this file is the graph plumbing around
 * them (which buffers, which gradient target, the fusions) and the few
 * elementwise ops they do not cover: erf (derivative 2/sqrt(pi) exp(-x^2)),
 * powers, the masked fill, transposes, last-axis slices, and arithmetic
 * with a scalar or per-last-axis constant (its gradient summed in
 * double). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/errors.h"
#include "engine/layers-seq.h"
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
			if (n->w_off == SD_NO_TENSOR) {
				n->bin_k = sd_malloc((size_t)n->seq_n * sizeof(float));
				for (int j = 0; j < n->seq_n; j++)
					n->bin_k[j] = 1.0f;
			}
		}
		if (n->seq == SEQ_EMBED && !n->seq_idx)
			n->seq_ids = sd_malloc((size_t)m->max_batch * n->seq_rows * sizeof(int32_t));
	}
}

double sd_seq_xent(const float *logits, float *dlogits, const int32_t *y, size_t rows, int V,
                   float scale)
{
	return sd_cross_entropy_seq_forward_backward(dlogits, logits, y, (int)rows, V, scale);
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

/* A layer norm's gamma: its parameter, or the node's fixed ones. */
static const float *ln_gamma(const struct sd_model *m, const struct node *n)
{
	return n->w_off == SD_NO_TENSOR ? n->bin_k : m->params + n->w_off;
}

static const float *bias_k(const struct sd_model *m, const struct node *n)
{
	return n->w_off == SD_NO_TENSOR ? n->bin_k : m->params + n->w_off;
}

/* SEQ_BIAS over rows of C = seq_n values: a scalar goes through layers.h's
 * sd_binary_const_* with each row a plane (contiguous, vectorised); one
 * value per last-axis entry (the channels innermost, which that function's
 * (n, c, hw) layout does not have) through the loops below. */
static float bin1(enum sd_binop op, float u, float v)
{
	return op == SD_BIN_ADD ? u + v : op == SD_BIN_SUB ? u - v : op == SD_BIN_MUL ? u * v : u / v;
}

static void bias_forward(const struct node *n, float *y, const float *x, const float *k,
                         size_t rows)
{
	const int C = n->seq_n;
	if (n->bin_kc == 1) {
		sd_binary_const_forward(y, x, k, 1, (int)rows, 1, C, n->binop, n->bin_k_first);
		return;
	}
	for (size_t r = 0; r < rows; r++)
		for (int j = 0; j < C; j++) {
			const size_t e = r * C + j;
			y[e] = n->bin_k_first ? bin1(n->binop, k[j], x[e]) : bin1(n->binop, x[e], k[j]);
		}
}

/* dx overwritten (may be NULL), dk += (NULL for a fixed constant). */
static void bias_backward(const struct node *n, float *dx, float *dk, const float *dy,
                          const float *x, const float *k, size_t rows)
{
	const int C = n->seq_n;
	if (n->bin_kc == 1) {
		sd_binary_const_backward(dx, dk, dy, x, k, 1, (int)rows, 1, C, n->binop,
		                         n->bin_k_first);
		return;
	}
	const enum sd_binop op = n->binop;
	const int kf = n->bin_k_first;
	for (int j = 0; j < C; j++) {
		double acc = 0;
		for (size_t r = 0; r < rows; r++) {
			const size_t e = r * C + j;
			const float g = dy[e], u = kf ? k[j] : x[e], v = kf ? x[e] : k[j];
			/* d(u op v)/du and /dv, times g */
			const float du = op == SD_BIN_MUL ? g * v : op == SD_BIN_DIV ? g / v : g;
			const float dv = op == SD_BIN_ADD ? g : op == SD_BIN_SUB ? -g
			                 : op == SD_BIN_MUL ? g * u : -g * u / (v * v);
			if (dx)
				dx[e] = kf ? dv : du;
			acc += kf ? du : dv;
		}
		if (dk)
			dk[j] += (float)acc;
	}
}

int sd_seq_forward(struct sd_model *m, int i, int nb, int train)
{
	(void)train;
	struct node *n = &m->nodes[i];
	struct act *in = &m->acts[n->in], *out = &m->acts[n->out];
	const float *p = m->params;
	const size_t rows = (size_t)nb * n->seq_rows;
	switch (n->seq) {
	case SEQ_EMBED: {
		const int T = n->seq_rows, C = n->seq_n, V = n->seq_k;
		const float *W = p + n->w_off;
		if (n->seq_idx) {
			/* Positions: the same rows for every sample. */
			for (int b = 0; b < nb; b++)
				sd_embedding_forward(out->val + (size_t)b * T * C, n->seq_idx, W, T, C, V);
		} else {
			/* Token ids, float in the input activation (exact). */
			for (size_t k = 0; k < rows; k++)
				n->seq_ids[k] = (int32_t)in->val[k];
			sd_embedding_forward(out->val, n->seq_ids, W, (int)rows, C, V);
		}
		break;
	}
	case SEQ_LINEAR:
		sd_linear_forward(out->val, in->val, p + n->w_off,
		                  n->b_off == SD_NO_TENSOR ? NULL : p + n->b_off, (int)rows, n->seq_k,
		                  n->seq_n);
		break;
	case SEQ_BMM:
		sd_matmul_batched_forward(out->val, in->val, m->acts[n->in2].val, nb * n->seq_g,
		                          n->seq_m, n->seq_k, n->seq_n, 0, 0);
		break;
	case SEQ_LAYERNORM:
		sd_layernorm_forward(out->val, n->seq_mean, n->seq_rstd, in->val, ln_gamma(m, n),
		                     n->b_off == SD_NO_TENSOR ? NULL : p + n->b_off, (int)rows, n->seq_n,
		                     n->seq_eps);
		break;
	case SEQ_SOFTMAX:
		sd_softmax_lastdim_forward(out->val, in->val, (int)rows, n->seq_n);
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
		bias_forward(n, out->val, in->val, bias_k(m, n), rows);
		break;
	case SEQ_POW: {
		const size_t cnt = act_floats(in) * nb;
		const float e = n->seq_scale;
		for (size_t k = 0; k < cnt; k++) {
			const float v = in->val[k];
			out->val[k] = e == 0.5f ? sqrtf(v) : e == 2.0f ? v * v : e == 3.0f ? v * v * v
			              : powf(v, e);
		}
		break;
	}
	case SEQ_GELU:
		sd_gelu_forward(out->val, in->val, act_floats(in) * nb,
		                n->seq_tanh ? SD_GELU_TANH : SD_GELU_ERF);
		return n->seq_span;
	case SEQ_ATTENTION:
		sd_attention_causal_forward(out->val, m->acts[n->seq_aux[0]].val, in->val,
		                            m->acts[n->in2].val, m->acts[n->in3].val, nb, n->seq_g,
		                            n->seq_m, n->seq_k, n->seq_scale);
		return n->seq_span;
	}
	return 1;
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
		 * output projection's gradient (added, never overwritten).  The
		 * token ids are forward's (seq_ids). */
		const int T = n->seq_rows, C = n->seq_n, V = n->seq_k;
		float *dW = g + n->w_off;
		if (n->seq_idx)
			for (int b = 0; b < nb; b++)
				sd_embedding_backward(dW, dy + (size_t)b * T * C, n->seq_idx, T, C, V);
		else
			sd_embedding_backward(dW, dy, n->seq_ids, (int)rows, C, V);
		return;   /* ids have no gradient */
	}
	case SEQ_LINEAR:
		sd_linear_backward(dx, g + n->w_off, n->b_off == SD_NO_TENSOR ? NULL : g + n->b_off, dy,
		                   in->val, p + n->w_off, (int)rows, n->seq_k, n->seq_n);
		break;
	case SEQ_BMM: {
		/* Each operand's gradient committed before the other's is
		 * written (both may go to the scratch buffer). */
		const int G = nb * n->seq_g, M = n->seq_m, K = n->seq_k, N = n->seq_n;
		struct act *b2 = &m->acts[n->in2];
		if (dx) {
			sd_matmul_batched_backward(dx, NULL, dy, in->val, b2->val, G, M, K, N, 0, 0, 0);
			sd_graph_grad_commit(m, in, cnt);
			dx = NULL;
		}
		sd_matmul_batched_backward(NULL, sd_graph_grad_target(m, b2), dy, in->val, b2->val, G, M,
		                           K, N, 0, 0, 0);
		sd_graph_grad_commit(m, b2, act_floats(b2) * nb);
		return;
	}
	case SEQ_LAYERNORM:
		sd_layernorm_backward(dx, n->w_off == SD_NO_TENSOR ? NULL : g + n->w_off,
		                      n->b_off == SD_NO_TENSOR ? NULL : g + n->b_off, dy, in->val,
		                      n->seq_mean, n->seq_rstd, ln_gamma(m, n), (int)rows, n->seq_n);
		break;
	case SEQ_SOFTMAX:
		if (dx)
			sd_softmax_lastdim_backward(dx, dy, out->val, (int)rows, n->seq_n);
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
		bias_backward(n, dx, n->w_off == SD_NO_TENSOR ? NULL : g + n->w_off, dy, in->val,
		              bias_k(m, n), rows);
		break;
	case SEQ_POW:
		if (dx) {
			const float e = n->seq_scale;
			for (size_t k = 0; k < cnt; k++) {
				const float v = in->val[k];
				dx[k] = dy[k] * (e == 0.5f ? 0.5f / out->val[k] : e == 2.0f ? 2.0f * v
				                 : e == 3.0f ? 3.0f * v * v : e * powf(v, e - 1.0f));
			}
		}
		break;
	case SEQ_GELU:
		if (dx)
			sd_gelu_backward(dx, dy, in->val, cnt, n->seq_tanh ? SD_GELU_TANH : SD_GELU_ERF);
		break;
	case SEQ_ATTENTION: {
		/* q, k and v are read by this node alone (sd_seq_fuse_attention
		 * checks), so each target is its own gradient buffer. */
		struct act *k = &m->acts[n->in2], *v = &m->acts[n->in3];
		const size_t each = act_floats(in) * nb;
		float *dk = sd_graph_grad_target(m, k), *dv = sd_graph_grad_target(m, v);
		sd_attention_causal_backward(dx, dk, dv, dy, in->val, k->val, v->val,
		                             m->acts[n->seq_aux[0]].val, m->acts[n->seq_aux[1]].val, nb,
		                             n->seq_g, n->seq_m, n->seq_k, n->seq_scale);
		sd_graph_grad_commit(m, k, each);
		sd_graph_grad_commit(m, v, each);
		break;
	}
	}
	if (dx)
		sd_graph_grad_commit(m, in, cnt);
}

int sd_seq_backward_group(struct sd_model *m, int i, int nb)
{
	const int head = m->nodes[i].fused_from - 1;
	struct node *h = &m->nodes[head];
	sd_seq_backward(m, head, nb, h->in != 0);
	return head;
}

/* The node making activation a, or -1. */
static int producer(const struct sd_model *m, int a)
{
	for (int i = 0; i < m->nnodes; i++)
		if (m->nodes[i].out == a)
			return i;
	return -1;
}

int sd_seq_fuse_attention(struct sd_model *m)
{
	int fused = 0;
	for (int i = 0; i + 4 < m->nnodes; i++) {
		struct node *mm = &m->nodes[i], *sc = mm + 1, *mk = mm + 2, *sm = mm + 3, *av = mm + 4;
		if (mm->op != OP_SEQ || mm->seq != SEQ_BMM || sc->op != OP_SEQ || sc->seq != SEQ_BIAS ||
		    mk->op != OP_SEQ || mk->seq != SEQ_MASKFILL || sm->op != OP_SEQ ||
		    sm->seq != SEQ_SOFTMAX || av->op != OP_SEQ || av->seq != SEQ_BMM)
			continue;
		/* A chain, each link read by the next alone. */
		if (sc->in != mm->out || mk->in != sc->out || sm->in != mk->out || av->in != sm->out ||
		    m->acts[mm->in].consumers != 1 || m->acts[av->in2].consumers != 1 ||
		    mm->in == 0 || mm->in == mm->in2 || mm->in == av->in2 || mm->in2 == av->in2 ||
		    m->acts[mm->out].consumers != 1 || m->acts[sc->out].consumers != 1 ||
		    m->acts[mk->out].consumers != 1 || m->acts[sm->out].consumers != 1)
			continue;
		/* Shapes: (G, T, D) (G, D, T) -> (G, T, T); (G, T, T) (G, T, D). */
		const int G = mm->seq_g, T = mm->seq_m, D = mm->seq_k;
		if (mm->seq_n != T || av->seq_g != G || av->seq_m != T || av->seq_k != T ||
		    av->seq_n != D)
			continue;
		/* The scale: a fixed scalar multiplying or dividing. */
		if (sc->w_off != SD_NO_TENSOR || sc->bin_kc != 1 ||
		    !(sc->binop == SD_BIN_MUL || (sc->binop == SD_BIN_DIV && !sc->bin_k_first)))
			continue;
		const float scale = sc->binop == SD_BIN_MUL ? sc->bin_k[0] : 1.0f / sc->bin_k[0];
		/* The mask: -inf exactly above the diagonal of every (T, T). */
		int causal = isinf(mk->seq_fill) && mk->seq_fill < 0;
		for (size_t e = 0; causal && e < (size_t)G * T * T; e++) {
			size_t r = (e / T) % T, c = e % T;
			causal = mk->seq_mask[e] == (c > r);
		}
		if (!causal)
			continue;
		/* k^T from a transpose read by this product alone: make it give k. */
		int kt = producer(m, mm->in2);
		struct node *tr = kt >= 0 ? &m->nodes[kt] : NULL;
		struct act *ka = &m->acts[mm->in2];
		if (!tr || tr->op != OP_SEQ || tr->seq != SEQ_TRANSPOSE || ka->consumers != 1 ||
		    tr->seq_rank < 2)
			continue;
		const int r = tr->seq_rank;
		int p = tr->seq_perm[r - 1];
		tr->seq_perm[r - 1] = tr->seq_perm[r - 2];
		tr->seq_perm[r - 2] = p;
		int dd = ka->dims[ka->rank - 1];
		ka->dims[ka->rank - 1] = ka->dims[ka->rank - 2];
		ka->dims[ka->rank - 2] = dd;
		/* The head becomes the fused node; the tail closes the group. */
		const int v = av->in2, y = av->out;
		mm->seq = SEQ_ATTENTION;
		mm->in3 = v;
		mm->out = y;
		mm->seq_scale = scale;
		mm->seq_aux[0] = sm->out;
		mm->seq_aux[1] = mk->out;
		mm->seq_span = 5;
		av->fused_from = i + 1;
		fused++;
		i += 4;
	}
	return fused;
}

/* Node i is a SEQ_BIAS by the fixed scalar k (op, constant second). */
static int scalar_op(const struct node *n, enum sd_binop op, float k)
{
	return n->op == OP_SEQ && n->seq == SEQ_BIAS && n->w_off == SD_NO_TENSOR &&
	       n->bin_kc == 1 && n->binop == op && !n->bin_k_first && n->bin_k[0] == k;
}

/* A SEQ_BIAS by the fixed scalar k on either side (op commutes). */
static int scalar_either(const struct node *n, enum sd_binop op, float k)
{
	return n->op == OP_SEQ && n->seq == SEQ_BIAS && n->w_off == SD_NO_TENSOR &&
	       n->bin_kc == 1 && n->binop == op && fabsf(n->bin_k[0] - k) <= 1e-6f * fabsf(k);
}

/* An OP_BINARY op of x and v in either order. */
static int binary_of(const struct node *n, enum sd_binop op, int x, int v)
{
	return n->op == OP_BINARY && n->binop == op && n->in2 >= 0 &&
	       ((n->in == x && n->in2 == v) || (n->in == v && n->in2 == x));
}

/* The tanh GELU's chain (see model-graph.h), nine nodes, into one. */
static int fuse_gelu_tanh(struct sd_model *m)
{
	int fused = 0;
	for (int i = 0; i + 8 < m->nnodes; i++) {
		struct node *c = &m->nodes[i];
		const int x = c[0].in;
		if (!binary_of(&c[0], SD_BIN_MUL, x, x) || x == 0 ||
		    !binary_of(&c[1], SD_BIN_MUL, x, c[0].out) ||
		    !scalar_either(&c[2], SD_BIN_MUL, 0.044715f) || c[2].in != c[1].out ||
		    !binary_of(&c[3], SD_BIN_ADD, x, c[2].out) ||
		    !scalar_either(&c[4], SD_BIN_MUL, 0.7978845608f) || c[4].in != c[3].out ||
		    c[5].op != OP_ACT || c[5].act != SD_ACT_TANH || c[5].in != c[4].out ||
		    !scalar_either(&c[6], SD_BIN_ADD, 1.0f) || c[6].in != c[5].out ||
		    !binary_of(&c[7], SD_BIN_MUL, x, c[6].out) ||
		    !scalar_either(&c[8], SD_BIN_MUL, 0.5f) || c[8].in != c[7].out ||
		    m->acts[x].consumers != 5)
			continue;
		int single = 1;
		for (int k = 0; k < 8; k++)
			single &= m->acts[c[k].out].consumers == 1;
		if (!single)
			continue;
		c[0].op = OP_SEQ;
		c[0].seq = SEQ_GELU;
		c[0].seq_tanh = 1;
		c[0].in2 = -1;
		c[0].out = c[8].out;
		c[0].seq_span = 9;
		c[8].fused_from = i + 1;
		m->acts[x].consumers -= 4;   /* read twice by x * x, and by three more */
		fused++;
		i += 8;
	}
	return fused;
}

int sd_seq_fuse_gelu(struct sd_model *m)
{
	int fused = 0;
	for (int i = 0; i + 4 < m->nnodes; i++) {
		struct node *dv = &m->nodes[i], *ef = dv + 1, *ad = dv + 2, *mu = dv + 3, *hf = dv + 4;
		/* x / sqrt 2 as the export writes it: Div by 1.4142135 (float). */
		if (!(dv->op == OP_SEQ && dv->seq == SEQ_BIAS && dv->w_off == SD_NO_TENSOR &&
		      dv->bin_kc == 1 && dv->binop == SD_BIN_DIV && !dv->bin_k_first &&
		      fabsf(dv->bin_k[0] - 1.41421356f) < 1e-6f))
			continue;
		const int x = dv->in;
		if (ef->op != OP_SEQ || ef->seq != SEQ_ERF || ef->in != dv->out ||
		    !scalar_op(ad, SD_BIN_ADD, 1.0f) || ad->in != ef->out ||
		    mu->op != OP_BINARY || mu->binop != SD_BIN_MUL ||
		    !((mu->in == x && mu->in2 == ad->out) || (mu->in2 == x && mu->in == ad->out)) ||
		    !scalar_op(hf, SD_BIN_MUL, 0.5f) || hf->in != mu->out || x == 0 ||
		    m->acts[dv->out].consumers != 1 || m->acts[ef->out].consumers != 1 ||
		    m->acts[ad->out].consumers != 1 || m->acts[mu->out].consumers != 1 ||
		    m->acts[x].consumers != 2)
			continue;
		dv->seq = SEQ_GELU;
		dv->out = hf->out;
		dv->seq_span = 5;
		hf->fused_from = i + 1;
		m->acts[x].consumers--;   /* the fused node reads it once */
		fused++;
		i += 4;
	}
	return fused + fuse_gelu_tanh(m);
}
