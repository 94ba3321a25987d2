/* engine/cuda/exec.c - runs an engine model graph (engine/model-graph.h) on a
 * CUDA device.  See cuda-internal.h for the files around it.
 *
 * Memory: ONE device buffer each for parameters, gradients, momentum and
 * batch-norm buffers, laid out exactly as the host blocks (the tensor
 * table's offsets), so an upload, a download, an NCCL all-reduce or a
 * broadcast is one call; one value and one gradient buffer per activation,
 * sized for max_batch samples.
 *
 * Data: the training set lives on the device when it fits (a quarter of the
 * free memory), and a step uploads only its sample indices; our gather
 * kernel, the first node of the step's graph, builds the batch.  Otherwise
 * the batch comes from the host.
 *
 * Streams: `stream` (env.stream) runs the step; `copy` uploads the indices
 * or the batch from page-locked host memory and signals `uploaded`, which
 * the step waits for;
 * `done`, recorded after the step's metrics, is what the next upload waits
 * for before it overwrites the input.  The only host synchronisation in a
 * step is the wait for its loss and accuracy (16 bytes).
 *
 * Plans: everything that depends on the batch size (cuDNN descriptors,
 * algorithm choices) lives in a plan per (n, train/eval, gradient scale).
 * A plan's first run is eager (it also proves the chosen algorithms run);
 * the same work is then captured into a CUDA graph and every later run is
 * one cudaGraphLaunch: ResNet-32's step is about 400 kernels, whose launch
 * cost would otherwise dominate at these sizes.  If capture fails the plan
 * stays eager and model_describe says why.  SPOTDECK_CUDA_GRAPHS=0 turns
 * graphs off.
 *
 * Gradients: each parameter tensor belongs to one node and its gradient is
 * written (not added) once per step, so the gradient block needs no zeroing;
 * an activation read by two nodes gets the second gradient added (cuDNN and
 * cuBLAS beta = 1), in the order engine/model.c's backward adds them.
 */
#include "config.h"

#include "engine/cuda/cuda-internal.h"
#include "src/base/errors.h"
#include "engine/model-graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct plan {
	int n;
	int train;
	int gather;               /* the batch comes from the device dataset */
	float scale;
	struct cu_conv *conv;     /* per node, used by OP_CONV nodes */
	struct cu_bn *bn;         /* OP_BN */
	struct cu_pool *pool;     /* OP_MAXPOOL, OP_AVGPOOL */
	cudaGraphExec_t exec;     /* NULL until captured */
	long runs;
	int eager;                /* capture failed: stays eager */
};

struct sd_dev_model {
	const struct sd_model *m;
	int max_batch;
	size_t img;               /* floats per input sample */
	struct cu_env env;
	cudaStream_t copy;
	cudaEvent_t uploaded, done;
	int done_recorded;
	float *blocks[SD_DEV_NBLOCKS];   /* enum sd_dev_block: params, grads, velocity,
	                                  * buffers, AdamW's second moment (allocated at
	                                  * its first use: NULL until then) */
	size_t block_floats[SD_DEV_NBLOCKS];
	double *sumsq;            /* gradient clipping: 1 + per-block partial sums
	                           * (allocated at the first use) */
	float **val, **grad;      /* per activation */
	uint8_t *labels;
	float *data;              /* the training set on the device (or NULL) */
	uint8_t *data_labels;
	int data_n;
	int32_t *idx, *idx_host;  /* a step's sample indices: device, page-locked */
	double *row_loss;
	int *row_correct;
	struct cu_metrics *metrics, *metrics_host;
	float **bn_mean, **bn_invstd;   /* per node, OP_BN only */
	signed char *acc_in, *acc_in2;  /* per node: backward adds into the input's
	                                 * gradient (1), writes it (0), skips it (-1) */
	signed char *acc_in3;           /* a language model's: SEQ_ATTENTION's v */
	/* Language models (m->seq_len > 0): the node constants on the device,
	 * per node (NULL where the node has none); the step's token ids x then
	 * y (2 * max_batch * T int32: device, page-locked); per-position
	 * losses; the column sums' scratch. */
	struct seq_dev *seq;
	int32_t *tok, *tok_host;
	double *tok_loss;
	double *colsum;
	struct plan *plans;
	int nplans, cap_plans;
	int graphs;
	float *host_locked[3];    /* host blocks we page-locked (cudaHostRegister) */
	char note[200];           /* why graphs are off, if they are */
	char describe[512];
};

static size_t act_count(const struct act *a) { return (size_t)a->c * a->h * a->w; }

/* A language-model node's device constants (model-graph.h's fields of the
 * same names): SEQ_EMBED's positions, SEQ_MASKFILL's mask, SEQ_TRANSPOSE's
 * index map, the fixed constant of SEQ_BIAS / OP_BINARY or a layer norm's
 * ones, SEQ_LAYERNORM's saved statistics. */
struct seq_dev {
	int32_t *idx;
	uint8_t *mask;
	uint32_t *src;
	float *k;
	float *mean, *rstd;
};

/* enum sd_binop's values as kernels-seq.cu repeats them. */
_Static_assert(SD_BIN_ADD == 0 && SD_BIN_SUB == 1 && SD_BIN_MUL == 2 && SD_BIN_DIV == 3,
               "kernels-seq.cu repeats enum sd_binop");

/* ---- plans -------------------------------------------------------------- */

static void plan_free(struct sd_dev_model *d, struct plan *p)
{
	const struct sd_model *m = d->m;
	for (int i = 0; i < m->nnodes; i++) {
		if (p->conv)
			cu_conv_fini(&p->conv[i]);
		if (p->bn)
			cu_bn_fini(&p->bn[i]);
		if (p->pool)
			cu_pool_fini(&p->pool[i]);
	}
	free(p->conv);
	free(p->bn);
	free(p->pool);
	if (p->exec)
		cudaGraphExecDestroy(p->exec);
	memset(p, 0, sizeof *p);
}

static int plan_init(struct sd_dev_model *d, struct plan *p, int n, int train, int gather,
                     float scale, char **why)
{
	const struct sd_model *m = d->m;
	memset(p, 0, sizeof *p);
	p->n = n;
	p->train = train;
	p->gather = gather;
	p->scale = scale;
	p->conv = sd_calloc((size_t)m->nnodes, sizeof *p->conv);
	p->bn = sd_calloc((size_t)m->nnodes, sizeof *p->bn);
	p->pool = sd_calloc((size_t)m->nnodes, sizeof *p->pool);
	float *params = d->blocks[SD_DEV_PARAMS], *grads = d->blocks[SD_DEV_GRADS];
	for (int i = 0; i < m->nnodes; i++) {
		const struct node *nd = &m->nodes[i];
		const struct act *in = &m->acts[nd->in];
		int rc = 0;
		switch (nd->op) {
		case OP_CONV: {
			struct sd_conv2d_shape s = nd->conv;
			s.n = n;
			rc = cu_conv_init(&p->conv[i], &d->env, &s, nd->b_off != SD_NO_TENSOR, train,
			                  d->val[nd->in], params + nd->w_off, d->val[nd->out],
			                  d->grad[nd->out], nd->in ? d->grad[nd->in] : NULL,
			                  grads + nd->w_off, why);
			break;
		}
		case OP_BN:
			rc = cu_bn_init(&p->bn[i], n, in->c, in->h * in->w, nd->bn_momentum, nd->bn_eps,
			                why);
			break;
		case OP_MAXPOOL:
		case OP_AVGPOOL:
			rc = cu_pool_init(&p->pool[i], nd->op == OP_MAXPOOL, n, in->c, in->h, in->w, nd->k,
			                  nd->s, why);
			break;
		default:
			break;
		}
		if (rc < 0) {
			if (why && *why) {
				char *inner = *why;
				*why = NULL;
				sd_why(why, "node %s, batch %d: %s", nd->name, n, inner);
				free(inner);
			}
			plan_free(d, p);
			return -1;
		}
	}
	return 0;
}

/* ---- the step ----------------------------------------------------------- */

static int forward(struct sd_dev_model *d, struct plan *p, char **why)
{
	const struct sd_model *m = d->m;
	const struct cu_env *env = &d->env;
	const float *P = d->blocks[SD_DEV_PARAMS];
	float *B = d->blocks[SD_DEV_BUFFERS];
	int n = p->n;
	for (int i = 0; i < m->nnodes; i++) {
		const struct node *nd = &m->nodes[i];
		const struct act *in = &m->acts[nd->in];
		float *x = d->val[nd->in], *y = d->val[nd->out];
		switch (nd->op) {
		case OP_CONV:
			if (cu_conv_forward(env, &p->conv[i], y, x, P + nd->w_off,
			                    nd->b_off == SD_NO_TENSOR ? NULL : P + nd->b_off, why) < 0)
				return -1;
			break;
		case OP_BN:
			if (p->train) {
				if (cu_bn_forward_train(env, &p->bn[i], y, d->bn_mean[i], d->bn_invstd[i],
				                        B + nd->rm_off, B + nd->rv_off, x, P + nd->w_off,
				                        P + nd->b_off, why) < 0)
					return -1;
			} else if (cu_bn_forward_eval(env, &p->bn[i], y, x, P + nd->w_off, P + nd->b_off,
			                              B + nd->rm_off, B + nd->rv_off, why) < 0) {
				return -1;
			}
			break;
		case OP_RELU:
			CU_TRY(cu_relu_forward(env->stream, y, x, act_count(in) * n));
			break;
		case OP_MAXPOOL:
		case OP_AVGPOOL:
			if (cu_pool_forward(env, &p->pool[i], y, x, why) < 0)
				return -1;
			break;
		case OP_LINEAR:
			if (cu_linear_forward(env, y, x, P + nd->w_off, P + nd->b_off, n, nd->fc_in,
			                      nd->fc_out, why) < 0)
				return -1;
			break;
		case OP_ADD: {
			const struct act *b = &m->acts[nd->in2];
			CU_TRY(cu_shortcut_forward(env->stream, y, x, d->val[nd->in2], n, in->c, in->h,
			                           in->w, b->c, nd->s));
			break;
		}
		default:
			/* Refused when the plan was made (plan_accumulation). */
			break;
		}
	}
	return 0;
}

static int backward(struct sd_dev_model *d, struct plan *p, char **why)
{
	const struct sd_model *m = d->m;
	const struct cu_env *env = &d->env;
	const float *P = d->blocks[SD_DEV_PARAMS];
	float *G = d->blocks[SD_DEV_GRADS];
	int n = p->n;
	for (int i = m->nnodes - 1; i >= 0; i--) {
		const struct node *nd = &m->nodes[i];
		const struct act *in = &m->acts[nd->in];
		float *x = d->val[nd->in], *dx = d->grad[nd->in];
		float *y = d->val[nd->out], *dy = d->grad[nd->out];
		int acc = d->acc_in[i] > 0;
		switch (nd->op) {
		case OP_CONV:
			if (cu_conv_backward(env, &p->conv[i], d->acc_in[i] < 0 ? NULL : dx, acc,
			                     G + nd->w_off, nd->b_off == SD_NO_TENSOR ? NULL : G + nd->b_off,
			                     dy, x, P + nd->w_off, why) < 0)
				return -1;
			break;
		case OP_BN:
			if (cu_bn_backward(env, &p->bn[i], dx, acc, G + nd->w_off, G + nd->b_off, dy, x,
			                   d->bn_mean[i], d->bn_invstd[i], P + nd->w_off, why) < 0)
				return -1;
			break;
		case OP_RELU:
			/* In place: in == out, its gradient is complete by now. */
			CU_TRY(cu_relu_backward(env->stream, dx, dx, x, act_count(in) * n));
			break;
		case OP_MAXPOOL:
		case OP_AVGPOOL:
			if (cu_pool_backward(env, &p->pool[i], dx, acc, dy, x, y, why) < 0)
				return -1;
			break;
		case OP_LINEAR:
			if (cu_linear_backward(env, d->acc_in[i] < 0 ? NULL : dx, acc, G + nd->w_off,
			                       G + nd->b_off, dy, x, P + nd->w_off, n, nd->fc_in, nd->fc_out,
			                       why) < 0)
				return -1;
			break;
		case OP_ADD: {
			size_t cnt = act_count(in) * n;
			if (acc)
				CU_TRY(cu_add_into(env->stream, dx, dy, cnt));
			else
				CU_TRY(cudaMemcpyAsync(dx, dy, cnt * sizeof(float), cudaMemcpyDeviceToDevice,
				                       env->stream));
			const struct act *b = &m->acts[nd->in2];
			CU_TRY(cu_shortcut_backward(env->stream, d->grad[nd->in2], dy, n, in->c, in->h,
			                            in->w, b->c, nd->s, d->acc_in2[i] > 0));
			break;
		}
		default:
			/* Refused when the plan was made (plan_accumulation). */
			break;
		}
	}
	return 0;
}

/* ---- language models ---------------------------------------------------- */

/* Row-major C (M, N) = alpha op(A) op(B) + beta C for `batch` matrices at
 * strides sa, sb, sc (floats): op(A) (M, K) is A stored (M, K), or with ta
 * A stored (K, M) transposed; op(B) (K, N) is B stored (K, N), or with tb
 * B stored (N, K) transposed.  cuBLAS is column-major, so this computes
 * C^T = op(B)^T op(A)^T, the stored buffers read as their transposes. */
static int rm_gemm(const struct cu_env *env, int ta, int tb, int M, int N, int K, float alpha,
                   const float *A, long long sa, const float *B, long long sb, float beta,
                   float *C, long long sc, int batch, char **why)
{
	BLAS_TRY(cublasSgemmStridedBatched(env->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
	                                   ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, B,
	                                   tb ? K : N, sb, A, ta ? M : K, sa, &beta, C, N, sc,
	                                   batch));
	return 0;
}

/* A fixed constant of a SEQ_BIAS or OP_BINARY node, or the trained one. */
static const float *seq_k(const struct sd_dev_model *d, const struct node *nd, const float *P)
{
	return nd->w_off == SD_NO_TENSOR ? d->seq[nd - d->m->nodes].k : P + nd->w_off;
}

static int seq_forward(struct sd_dev_model *d, struct plan *p, char **why)
{
	const struct sd_model *m = d->m;
	const struct cu_env *env = &d->env;
	cudaStream_t st = env->stream;
	const float *P = d->blocks[SD_DEV_PARAMS];
	const int nb = p->n;
	for (int i = 0; i < m->nnodes; i++) {
		const struct node *nd = &m->nodes[i];
		const struct act *in = &m->acts[nd->in];
		const struct seq_dev *sq = &d->seq[i];
		float *x = d->val[nd->in], *y = d->val[nd->out];
		const size_t rows = (size_t)nb * nd->seq_rows, cnt = act_count(in) * nb;
		if (nd->op == OP_BINARY) {
			if (nd->in2 >= 0)
				CU_TRY(cu_binary_forward(st, y, x, d->val[nd->in2], cnt, nd->binop));
			else
				CU_TRY(cu_bias_forward(st, y, x, seq_k(d, nd, P), cnt, in->c, 1, nd->binop,
				                       nd->bin_k_first));
			continue;
		}
		if (nd->op == OP_ACT) {   /* tanh only (refused otherwise): the unfused GELU */
			CU_TRY(cu_unary(st, y, 0, x, NULL, cnt, CU_UN_TANH, 0.0f));
			continue;
		}
		if (nd->op == OP_DROPOUT) {   /* p = 0 only (refused otherwise) */
			CU_TRY(cudaMemcpyAsync(y, x, cnt * sizeof(float), cudaMemcpyDeviceToDevice, st));
			continue;
		}
		switch (nd->seq) {
		case SEQ_EMBED:
			CU_TRY(cu_embed_forward(st, y, nd->seq_idx ? NULL : x, sq->idx, P + nd->w_off, rows,
			                        nd->seq_rows, nd->seq_n, nd->seq_k));
			break;
		case SEQ_LINEAR:
			if (rm_gemm(env, 0, 1, (int)rows, nd->seq_n, nd->seq_k, 1.0f, x, 0, P + nd->w_off, 0,
			            0.0f, y, 0, 1, why) < 0)
				return -1;
			if (nd->b_off != SD_NO_TENSOR)
				CU_TRY(cu_bias_rows(st, y, P + nd->b_off, (int)rows, nd->seq_n));
			break;
		case SEQ_BMM: {
			const int M = nd->seq_m, K = nd->seq_k, N = nd->seq_n;
			if (rm_gemm(env, 0, 0, M, N, K, 1.0f, x, (long long)M * K, d->val[nd->in2],
			            (long long)K * N, 0.0f, y, (long long)M * N, nb * nd->seq_g, why) < 0)
				return -1;
			break;
		}
		case SEQ_LAYERNORM:
			CU_TRY(cu_layernorm_forward(st, y, p->train ? sq->mean : NULL, sq->rstd, x,
			                            nd->w_off == SD_NO_TENSOR ? sq->k : P + nd->w_off,
			                            nd->b_off == SD_NO_TENSOR ? NULL : P + nd->b_off, rows,
			                            nd->seq_n, nd->seq_eps));
			break;
		case SEQ_SOFTMAX:
			CU_TRY(cu_softmax_forward(st, y, x, rows, nd->seq_n, 0));
			break;
		case SEQ_MASKFILL:
			CU_TRY(cu_maskfill(st, y, 0, x, sq->mask, act_count(in), cnt, nd->seq_fill, 0));
			break;
		case SEQ_TRANSPOSE:
			CU_TRY(cu_transpose(st, y, 0, x, sq->src, act_count(in), cnt, 0));
			break;
		case SEQ_SLICE:
			CU_TRY(cu_slice(st, y, 0, x, rows, nd->seq_k, nd->seq_n, nd->seq_off, 0));
			break;
		case SEQ_ERF:
			CU_TRY(cu_unary(st, y, 0, x, NULL, cnt, CU_UN_ERF, 0.0f));
			break;
		case SEQ_POW:
			CU_TRY(cu_unary(st, y, 0, x, NULL, cnt, CU_UN_POW, nd->seq_scale));
			break;
		case SEQ_BIAS:
			CU_TRY(cu_bias_forward(st, y, x, seq_k(d, nd, P), cnt, nd->seq_n, nd->bin_kc,
			                       nd->binop, nd->bin_k_first));
			break;
		case SEQ_GELU:
			CU_TRY(cu_unary(st, y, 0, x, NULL, cnt,
			                nd->seq_tanh ? CU_UN_GELU_TANH : CU_UN_GELU_ERF, 0.0f));
			i += nd->seq_span - 1;   /* the chain's other nodes */
			break;
		case SEQ_ATTENTION: {
			/* Unfused on the device: S = scale q k^T into the softmax's
			 * activation (seq_aux[0]), the causal softmax in place, y = P v. */
			const int G = nb * nd->seq_g, T = nd->seq_m, D = nd->seq_k;
			float *pr = d->val[nd->seq_aux[0]];
			const long long td = (long long)T * D, tt = (long long)T * T;
			if (rm_gemm(env, 0, 1, T, T, D, nd->seq_scale, x, td, d->val[nd->in2], td, 0.0f, pr,
			            tt, G, why) < 0)
				return -1;
			CU_TRY(cu_softmax_forward(st, pr, pr, (size_t)G * T, T, 1));
			if (rm_gemm(env, 0, 0, T, D, T, 1.0f, pr, tt, d->val[nd->in3], td, 0.0f, y, td, G,
			            why) < 0)
				return -1;
			i += nd->seq_span - 1;
			break;
		}
		}
	}
	return 0;
}

/* Node i backward (a fused group's head for the group). */
/* SEQ_ATTENTION node i's backward on a batch of nb: q = x (its gradient
 * dx, added to when acc), k and v the node's in2 and in3. */
static int attention_backward(struct sd_dev_model *d, int i, int nb, float *dx, int acc,
                              const float *dy, const float *x, char **why)
{
	const struct cu_env *env = &d->env;
	cudaStream_t st = env->stream;
	const struct node *nd = &d->m->nodes[i];
	/* dv = P^T dy, dP = dy v^T (into seq_aux[1]'s buffer), dS = P (dP -
	 * rowsum(P dP)) scale in place, dq = dS k, dk = dS^T q. */
	const int Gb = nb * nd->seq_g, T = nd->seq_m, D = nd->seq_k;
	const float *pr = d->val[nd->seq_aux[0]], *k = d->val[nd->in2], *v = d->val[nd->in3];
	float *ws = d->val[nd->seq_aux[1]];
	const long long td = (long long)T * D, tt = (long long)T * T;
	if (d->acc_in3[i] >= 0 &&
	    rm_gemm(env, 1, 0, T, D, T, 1.0f, pr, tt, dy, td, d->acc_in3[i] > 0 ? 1.0f : 0.0f,
	            d->grad[nd->in3], td, Gb, why) < 0)
		return -1;
	if (rm_gemm(env, 0, 1, T, T, D, 1.0f, dy, td, v, td, 0.0f, ws, tt, Gb, why) < 0)
		return -1;
	CU_TRY(cu_softmax_backward(st, ws, 0, ws, pr, (size_t)Gb * T, T, nd->seq_scale));
	if (dx && rm_gemm(env, 0, 0, T, D, T, 1.0f, ws, tt, k, td, acc ? 1.0f : 0.0f, dx, td, Gb,
	                  why) < 0)
		return -1;
	if (d->acc_in2[i] >= 0 &&
	    rm_gemm(env, 1, 0, T, D, T, 1.0f, ws, tt, x, td, d->acc_in2[i] > 0 ? 1.0f : 0.0f,
	            d->grad[nd->in2], td, Gb, why) < 0)
		return -1;
	return 0;
}

static int seq_backward_node(struct sd_dev_model *d, struct plan *p, int i, char **why)
{
	const struct sd_model *m = d->m;
	const struct cu_env *env = &d->env;
	cudaStream_t st = env->stream;
	const float *P = d->blocks[SD_DEV_PARAMS];
	float *G = d->blocks[SD_DEV_GRADS];
	const int nb = p->n;
	const struct node *nd = &m->nodes[i];
	const struct act *in = &m->acts[nd->in];
	const struct seq_dev *sq = &d->seq[i];
	const float *x = d->val[nd->in], *y = d->val[nd->out], *dy = d->grad[nd->out];
	float *dx = d->acc_in[i] < 0 ? NULL : d->grad[nd->in];
	const int acc = d->acc_in[i] > 0;
	const size_t rows = (size_t)nb * nd->seq_rows, cnt = act_count(in) * nb;
	if (nd->op == OP_BINARY) {
		if (nd->in2 >= 0) {
			const float *b = d->val[nd->in2];
			if (dx)
				CU_TRY(cu_binary_backward(st, dx, acc, dy, x, b, cnt, nd->binop, 0));
			if (d->acc_in2[i] >= 0)
				CU_TRY(cu_binary_backward(st, d->grad[nd->in2], d->acc_in2[i] > 0, dy, x, b, cnt,
				                          nd->binop, 1));
		} else {
			CU_TRY(cu_bias_backward(st, dx, acc, nd->w_off == SD_NO_TENSOR ? NULL : G + nd->w_off,
			                        dy, x, seq_k(d, nd, P), cnt, in->c, 1, nd->binop,
			                        nd->bin_k_first, d->colsum));
		}
		return 0;
	}
	if (nd->op == OP_ACT) {
		if (dx)
			CU_TRY(cu_unary(st, dx, acc, x, dy, cnt, CU_UN_TANH, 0.0f));
		return 0;
	}
	if (nd->op == OP_DROPOUT) {
		if (dx && acc)
			CU_TRY(cu_add_into(st, dx, dy, cnt));
		else if (dx)
			CU_TRY(cudaMemcpyAsync(dx, dy, cnt * sizeof(float), cudaMemcpyDeviceToDevice, st));
		return 0;
	}
	switch (nd->seq) {
	case SEQ_EMBED:
		CU_TRY(cu_embed_backward(st, G + nd->w_off, dy, nd->seq_idx ? NULL : x, sq->idx, rows,
		                         nd->seq_rows, nd->seq_n, nd->seq_k));
		break;
	case SEQ_LINEAR: {
		const int K = nd->seq_k, N = nd->seq_n;
		if (dx && rm_gemm(env, 0, 0, (int)rows, K, N, 1.0f, dy, 0, P + nd->w_off, 0,
		                  acc ? 1.0f : 0.0f, dx, 0, 1, why) < 0)
			return -1;
		if (rm_gemm(env, 1, 0, N, K, (int)rows, 1.0f, dy, 0, x, 0, 1.0f, G + nd->w_off, 0, 1,
		            why) < 0)
			return -1;
		if (nd->b_off != SD_NO_TENSOR)
			CU_TRY(cu_colsum_dy(st, G + nd->b_off, dy, rows, N, d->colsum));
		break;
	}
	case SEQ_BMM: {
		const int M = nd->seq_m, K = nd->seq_k, N = nd->seq_n, Gb = nb * nd->seq_g;
		const float *b = d->val[nd->in2];
		const long long sa = (long long)M * K, sb = (long long)K * N, sy = (long long)M * N;
		if (dx && rm_gemm(env, 0, 1, M, K, N, 1.0f, dy, sy, b, sb, acc ? 1.0f : 0.0f, dx, sa, Gb,
		                  why) < 0)
			return -1;
		if (d->acc_in2[i] >= 0 &&
		    rm_gemm(env, 1, 0, K, N, M, 1.0f, x, sa, dy, sy, d->acc_in2[i] > 0 ? 1.0f : 0.0f,
		            d->grad[nd->in2], sb, Gb, why) < 0)
			return -1;
		break;
	}
	case SEQ_LAYERNORM:
		CU_TRY(cu_layernorm_backward(st, dx, acc, nd->w_off == SD_NO_TENSOR ? NULL : G + nd->w_off,
		                             nd->b_off == SD_NO_TENSOR ? NULL : G + nd->b_off, dy, x,
		                             sq->mean, sq->rstd,
		                             nd->w_off == SD_NO_TENSOR ? sq->k : P + nd->w_off, rows,
		                             nd->seq_n, d->colsum));
		break;
	case SEQ_SOFTMAX:
		if (dx)
			CU_TRY(cu_softmax_backward(st, dx, acc, dy, y, rows, nd->seq_n, 1.0f));
		break;
	case SEQ_MASKFILL:
		if (dx)
			CU_TRY(cu_maskfill(st, dx, acc, dy, sq->mask, act_count(in), cnt, 0.0f, 1));
		break;
	case SEQ_TRANSPOSE:
		if (dx)
			CU_TRY(cu_transpose(st, dx, acc, dy, sq->src, act_count(in), cnt, 1));
		break;
	case SEQ_SLICE:
		if (dx)
			CU_TRY(cu_slice(st, dx, acc, dy, rows, nd->seq_k, nd->seq_n, nd->seq_off, 1));
		break;
	case SEQ_ERF:
		if (dx)
			CU_TRY(cu_unary(st, dx, acc, x, dy, cnt, CU_UN_ERF, 0.0f));
		break;
	case SEQ_POW:
		if (dx)
			CU_TRY(cu_unary(st, dx, acc, x, dy, cnt, CU_UN_POW, nd->seq_scale));
		break;
	case SEQ_BIAS:
		CU_TRY(cu_bias_backward(st, dx, acc, nd->w_off == SD_NO_TENSOR ? NULL : G + nd->w_off, dy,
		                        x, seq_k(d, nd, P), cnt, nd->seq_n, nd->bin_kc, nd->binop,
		                        nd->bin_k_first, d->colsum));
		break;
	case SEQ_GELU:
		if (dx)
			CU_TRY(cu_unary(st, dx, acc, x, dy, cnt,
			                nd->seq_tanh ? CU_UN_GELU_TANH : CU_UN_GELU_ERF, 0.0f));
		break;
	case SEQ_ATTENTION:
		return attention_backward(d, i, nb, dx, acc, dy, x, why);
	}
	return 0;
}

/* The head of the fused OP_SEQ group whose tail is node i, or i. */
static int seq_head(const struct sd_model *m, int i)
{
	const struct node *nd = &m->nodes[i];
	if (nd->fused_from && m->nodes[nd->fused_from - 1].op == OP_SEQ)
		return nd->fused_from - 1;
	return i;
}

static int seq_backward(struct sd_dev_model *d, struct plan *p, char **why)
{
	for (int i = d->m->nnodes - 1; i >= 0; i--) {
		i = seq_head(d->m, i);
		if (seq_backward_node(d, p, i, why) < 0)
			return -1;
	}
	return 0;
}

/* A language model's step: ids to float, forward, the cross-entropy at
 * every position (its gradient into the logits'), the gradient block
 * zeroed (the tied table's two contributions add), backward. */
static int seq_enqueue(struct sd_dev_model *d, struct plan *p, char **why)
{
	const struct sd_model *m = d->m;
	cudaStream_t st = d->env.stream;
	const size_t pos = (size_t)p->n * m->seq_len;
	const int last = m->nacts - 1;
	CU_TRY(cu_ids_to_float(st, d->val[0], d->tok, pos));
	if (seq_forward(d, p, why) < 0)
		return -1;
	CU_TRY(cu_seq_xent(st, p->train ? d->grad[last] : NULL, d->tok_loss, d->metrics,
	                   d->val[last], d->tok + (size_t)d->max_batch * m->seq_len, pos, m->classes,
	                   p->scale));
	if (!p->train)
		return 0;
	CU_TRY(cudaMemsetAsync(d->blocks[SD_DEV_GRADS], 0,
	                       d->block_floats[SD_DEV_GRADS] * sizeof(float), st));
	return seq_backward(d, p, why);
}

/* Checks a token batch (as engine/model.c's tokens_in) and queues its
 * upload (x then y) on the copy stream; the step waits for it. */
static int upload_tokens(struct sd_dev_model *d, const int32_t *x, const int32_t *y, int n,
                         char **why)
{
	const struct sd_model *m = d->m;
	if (!m->seq_len)
		return sd_why(why, "CUDA model %s: not a language model (its input is not token ids)",
		              m->name);
	if (n < 0 || n > d->max_batch)
		return sd_why(why, "CUDA model %s: batch of %d samples, built for at most %d", m->name,
		              n, d->max_batch);
	const size_t cnt = (size_t)n * m->seq_len, half = (size_t)d->max_batch * m->seq_len;
	for (size_t k = 0; k < cnt; k++) {
		if (x[k] < 0 || x[k] >= m->classes)
			return sd_why(why, "CUDA model %s: input token id %d at position %zu is not below "
			              "its vocabulary of %d", m->name, x[k], k, m->classes);
		if (y[k] < 0 || y[k] >= m->classes)
			return sd_why(why, "CUDA model %s: target token id %d at position %zu is not below "
			              "its vocabulary of %d", m->name, y[k], k, m->classes);
	}
	/* The page-locked staging area is reused: wait for the last upload. */
	if (d->done_recorded)
		CU_TRY(cudaEventSynchronize(d->uploaded));
	memcpy(d->tok_host, x, cnt * sizeof *x);
	memcpy(d->tok_host + half, y, cnt * sizeof *y);
	if (d->done_recorded)
		CU_TRY(cudaStreamWaitEvent(d->copy, d->done, 0));
	CU_TRY(cudaMemcpyAsync(d->tok, d->tok_host, cnt * sizeof *x, cudaMemcpyHostToDevice,
	                       d->copy));
	CU_TRY(cudaMemcpyAsync(d->tok + half, d->tok_host + half, cnt * sizeof *y,
	                       cudaMemcpyHostToDevice, d->copy));
	CU_TRY(cudaEventRecord(d->uploaded, d->copy));
	CU_TRY(cudaStreamWaitEvent(d->env.stream, d->uploaded, 0));
	return 0;
}

/* The whole step (or evaluation) of plan p, enqueued on the stream. */
static int enqueue(struct sd_dev_model *d, struct plan *p, char **why)
{
	const struct sd_model *m = d->m;
	cudaStream_t st = d->env.stream;
	if (m->seq_len)
		return seq_enqueue(d, p, why);
	if (p->gather)
		CU_TRY(cu_gather(st, d->val[0], d->labels, d->data, d->data_labels, d->idx, p->n,
		                 d->img));
	if (forward(d, p, why) < 0)
		return -1;
	int last = m->nacts - 1;
	CU_TRY(cu_softmax_xent(st, p->train ? d->grad[last] : NULL, d->row_loss, d->row_correct,
	                       d->val[last], d->labels, p->n, m->classes, p->scale));
	CU_TRY(cu_metrics_reduce(st, d->metrics, d->row_loss, d->row_correct, p->n));
	if (p->train && backward(d, p, why) < 0)
		return -1;
	return 0;
}

/* Records plan p's work into a CUDA graph (nothing runs). */
static void capture(struct sd_dev_model *d, struct plan *p)
{
	cudaStream_t st = d->env.stream;
	cudaGraph_t g = NULL;
	char *err = NULL;
	cudaError_t e = cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal);
	int rc = 0;
	if (e == cudaSuccess) {
		rc = enqueue(d, p, &err);
		cudaError_t e2 = cudaStreamEndCapture(st, &g);
		if (e2 != cudaSuccess)
			e = e2;
	}
	if (rc == 0 && e == cudaSuccess && g)
		e = cudaGraphInstantiate(&p->exec, g, 0);
	if (g)
		cudaGraphDestroy(g);
	if (rc < 0 || e != cudaSuccess || !p->exec) {
		snprintf(d->note, sizeof d->note, "CUDA graph capture failed at batch %d (%s), "
		         "running eagerly", p->n, err ? err : cudaGetErrorString(e));
		(void)cudaGetLastError();
		p->exec = NULL;
		p->eager = 1;
	}
	free(err);
}

static struct plan *get_plan(struct sd_dev_model *d, int n, int train, int gather, float scale,
                             char **why)
{
	for (int i = 0; i < d->nplans; i++) {
		struct plan *p = &d->plans[i];
		if (p->n == n && p->train == train && p->gather == gather && p->scale == scale)
			return p;
	}
	if (d->nplans == d->cap_plans) {
		d->cap_plans = d->cap_plans ? 2 * d->cap_plans : 4;
		d->plans = realloc(d->plans, (size_t)d->cap_plans * sizeof *d->plans);
		if (!d->plans)
			sd_oom();
	}
	if (plan_init(d, &d->plans[d->nplans], n, train, gather, scale, why) < 0)
		return NULL;
	return &d->plans[d->nplans++];
}

static int run_plan(struct sd_dev_model *d, struct plan *p, char **why)
{
	if (p->exec) {
		CU_TRY(cudaGraphLaunch(p->exec, d->env.stream));
		p->runs++;
		return 0;
	}
	if (enqueue(d, p, why) < 0)
		return -1;
	p->runs++;
	/* The algorithms ran: no more fall-backs (a graph cannot take them). */
	for (int i = 0; i < d->m->nnodes; i++)
		p->conv[i].checked = 1;
	if (d->graphs && !p->eager)
		capture(d, p);
	return 0;
}

/* Queues the batch's upload on the copy stream; the step waits for it. */
static int upload(struct sd_dev_model *d, const float *x, const uint8_t *labels, int n, char **why)
{
	if (d->done_recorded)
		CU_TRY(cudaStreamWaitEvent(d->copy, d->done, 0));
	CU_TRY(cudaMemcpyAsync(d->val[0], x, (size_t)n * d->img * sizeof(float),
	                       cudaMemcpyHostToDevice, d->copy));
	CU_TRY(cudaMemcpyAsync(d->labels, labels, (size_t)n, cudaMemcpyHostToDevice, d->copy));
	CU_TRY(cudaEventRecord(d->uploaded, d->copy));
	CU_TRY(cudaStreamWaitEvent(d->env.stream, d->uploaded, 0));
	return 0;
}

/* The step's one host synchronisation: its metrics. */
static int finish(struct sd_dev_model *d, double *loss_sum, int *correct, char **why)
{
	CU_TRY(cudaMemcpyAsync(d->metrics_host, d->metrics, sizeof *d->metrics,
	                       cudaMemcpyDeviceToHost, d->env.stream));
	CU_TRY(cudaEventRecord(d->done, d->env.stream));
	d->done_recorded = 1;
	CU_TRY(cudaEventSynchronize(d->done));
	*loss_sum = d->metrics_host->loss_sum;
	*correct = d->metrics_host->correct;
	return 0;
}

/* The image entry points refuse a language model (its logits are per
 * position), as engine/model.c's image passes do. */
static int refuse_lm(const struct sd_dev_model *d, char **why)
{
	return sd_why(why, "CUDA model %s is a language model: it trains on token windows "
	              "(train_tokens), not on images", d->m->name);
}

int cu_train_batch(struct sd_dev_model *d, const float *x, const uint8_t *labels, int n,
                   float grad_scale, double *loss_sum, int *correct, char **why)
{
	*loss_sum = 0;
	*correct = 0;
	if (d->m->seq_len)
		return refuse_lm(d, why);
	if (n < 0 || n > d->max_batch)
		return sd_why(why, "CUDA model %s: batch of %d samples, built for at most %d",
		              d->m->name, n, d->max_batch);
	if (n == 0) {
		CU_TRY(cudaMemsetAsync(d->blocks[SD_DEV_GRADS], 0,
		                       d->block_floats[SD_DEV_GRADS] * sizeof(float), d->env.stream));
		return 0;
	}
	struct plan *p = get_plan(d, n, 1, 0, grad_scale, why);
	if (!p || upload(d, x, labels, n, why) < 0 || run_plan(d, p, why) < 0)
		return -1;
	return finish(d, loss_sum, correct, why);
}

int cu_dataset_upload(struct sd_dev_model *d, const float *images, const uint8_t *labels, int n,
                      char **why)
{
	if (d->m->seq_len)
		return refuse_lm(d, why);
	size_t bytes = (size_t)n * d->img * sizeof(float) + (size_t)n;
	size_t free_b = 0, total_b = 0;
	CU_TRY(cudaMemGetInfo(&free_b, &total_b));
	if (n <= 0 || bytes > free_b / 4)
		return sd_why(why, "training set of %.0f MiB, a quarter of the free device memory is "
		              "%.0f MiB", bytes / 1048576.0, free_b / 4 / 1048576.0);
	cudaFree(d->data);
	cudaFree(d->data_labels);
	d->data = NULL;
	d->data_labels = NULL;
	d->data_n = 0;
	CU_TRY(cudaMalloc((void **)&d->data, (size_t)n * d->img * sizeof(float)));
	CU_TRY(cudaMalloc((void **)&d->data_labels, (size_t)n));
	CU_TRY(cudaMemcpyAsync(d->data, images, (size_t)n * d->img * sizeof(float),
	                       cudaMemcpyHostToDevice, d->env.stream));
	CU_TRY(cudaMemcpyAsync(d->data_labels, labels, (size_t)n, cudaMemcpyHostToDevice,
	                       d->env.stream));
	CU_TRY(cudaStreamSynchronize(d->env.stream));
	d->data_n = n;
	return 0;
}

int cu_train_indexed(struct sd_dev_model *d, const int32_t *idx, int n, float grad_scale,
                     double *loss_sum, int *correct, char **why)
{
	*loss_sum = 0;
	*correct = 0;
	if (!d->data)
		return sd_why(why, "CUDA model %s: no training set on the device", d->m->name);
	if (n < 0 || n > d->max_batch)
		return sd_why(why, "CUDA model %s: batch of %d samples, built for at most %d",
		              d->m->name, n, d->max_batch);
	for (int i = 0; i < n; i++)
		if (idx[i] < 0 || idx[i] >= d->data_n)
			return sd_why(why, "CUDA model %s: sample %d outside the training set of %d",
			              d->m->name, idx[i], d->data_n);
	if (n == 0)
		return cu_train_batch(d, NULL, NULL, 0, grad_scale, loss_sum, correct, why);
	struct plan *p = get_plan(d, n, 1, 1, grad_scale, why);
	if (!p)
		return -1;
	/* The indices through page-locked memory on the copy stream, after the
	 * previous step has read the last ones. */
	memcpy(d->idx_host, idx, (size_t)n * sizeof *idx);
	if (d->done_recorded)
		CU_TRY(cudaStreamWaitEvent(d->copy, d->done, 0));
	CU_TRY(cudaMemcpyAsync(d->idx, d->idx_host, (size_t)n * sizeof *idx, cudaMemcpyHostToDevice,
	                       d->copy));
	CU_TRY(cudaEventRecord(d->uploaded, d->copy));
	CU_TRY(cudaStreamWaitEvent(d->env.stream, d->uploaded, 0));
	if (run_plan(d, p, why) < 0)
		return -1;
	return finish(d, loss_sum, correct, why);
}

int cu_eval_batch(struct sd_dev_model *d, const float *x, const uint8_t *labels, int n,
                  double *loss_sum, int *correct, char **why)
{
	double total = 0;
	int right = 0;
	if (d->m->seq_len)
		return refuse_lm(d, why);
	for (int off = 0; off < n; off += d->max_batch) {
		int nb = n - off < d->max_batch ? n - off : d->max_batch;
		struct plan *p = get_plan(d, nb, 0, 0, 0.0f, why);
		double l;
		int c;
		if (!p || upload(d, x + (size_t)off * d->img, labels + off, nb, why) < 0 ||
		    run_plan(d, p, why) < 0 || finish(d, &l, &c, why) < 0)
			return -1;
		total += l;
		right += c;
	}
	*loss_sum = total;
	*correct = right;
	return 0;
}

int cu_train_tokens(struct sd_dev_model *d, const int32_t *x, const int32_t *y, int n,
                    float grad_scale, double *loss_sum, char **why)
{
	*loss_sum = 0;
	if (upload_tokens(d, x, y, n, why) < 0)
		return -1;
	if (n == 0) {
		CU_TRY(cudaMemsetAsync(d->blocks[SD_DEV_GRADS], 0,
		                       d->block_floats[SD_DEV_GRADS] * sizeof(float), d->env.stream));
		return 0;
	}
	struct plan *p = get_plan(d, n, 1, 0, grad_scale, why);
	int correct;
	if (!p || run_plan(d, p, why) < 0)
		return -1;
	return finish(d, loss_sum, &correct, why);
}

int cu_eval_tokens(struct sd_dev_model *d, const int32_t *x, const int32_t *y, int n,
                   double *loss_sum, char **why)
{
	const size_t T = (size_t)d->m->seq_len;
	double total = 0;
	*loss_sum = 0;
	if (!T)
		return upload_tokens(d, x, y, 0, why);
	for (int off = 0; off < n; off += d->max_batch) {
		int nb = n - off < d->max_batch ? n - off : d->max_batch;
		struct plan *p = get_plan(d, nb, 0, 0, 0.0f, why);
		double l;
		int c;
		if (!p || upload_tokens(d, x + off * T, y + off * T, nb, why) < 0 ||
		    run_plan(d, p, why) < 0 || finish(d, &l, &c, why) < 0)
			return -1;
		total += l;
	}
	*loss_sum = total;
	return 0;
}

int cu_sgd_step(struct sd_dev_model *d, float lr, float momentum, float weight_decay, char **why)
{
	CU_TRY(cu_sgd(d->env.stream, d->blocks[SD_DEV_PARAMS], d->blocks[SD_DEV_VELOCITY],
	              d->blocks[SD_DEV_GRADS], d->block_floats[SD_DEV_PARAMS], lr, momentum,
	              weight_decay));
	return 0;
}

/* AdamW's second moment, allocated and zeroed at its first use (an SGD
 * model never has one). */
static int second_block(struct sd_dev_model *d, char **why)
{
	if (d->blocks[SD_DEV_SECOND])
		return 0;
	size_t n = d->block_floats[SD_DEV_PARAMS];
	size_t bytes = (n ? n : 1) * sizeof(float);
	float *p = NULL;
	if (cudaMalloc((void **)&p, bytes) != cudaSuccess) {
		cudaGetLastError();
		return sd_why(why, "CUDA model %s: cannot allocate %.0f MiB for AdamW's second moment",
		              d->m->name, bytes / 1048576.0);
	}
	cudaError_t e = cudaMemsetAsync(p, 0, bytes, d->env.stream);
	if (e != cudaSuccess) {
		cudaFree(p);
		return cu_fail_cuda(why, "cudaMemsetAsync (AdamW state)", e);
	}
	d->blocks[SD_DEV_SECOND] = p;
	d->block_floats[SD_DEV_SECOND] = n;
	return 0;
}

int cu_adamw_step(struct sd_dev_model *d, const struct sd_adamw_scalars *s, char **why)
{
	if (second_block(d, why) < 0)
		return -1;
	CU_TRY(cu_adamw(d->env.stream, d->blocks[SD_DEV_PARAMS], d->blocks[SD_DEV_VELOCITY],
	                d->blocks[SD_DEV_SECOND], d->blocks[SD_DEV_GRADS],
	                d->block_floats[SD_DEV_PARAMS], *s));
	return 0;
}

int cu_grad_sumsq(struct sd_dev_model *d, double *sumsq, char **why)
{
	size_t n = d->block_floats[SD_DEV_GRADS];
	size_t nb = (n + SD_SUMSQ_BLOCK - 1) / SD_SUMSQ_BLOCK;
	if (!d->sumsq && cudaMalloc((void **)&d->sumsq, (1 + nb) * sizeof(double)) != cudaSuccess) {
		d->sumsq = NULL;
		return cu_fail_cuda(why, "cudaMalloc (gradient norm)", cudaGetLastError());
	}
	CU_TRY(cu_sumsq(d->env.stream, d->sumsq, d->sumsq + 1, d->blocks[SD_DEV_GRADS], n));
	CU_TRY(cudaMemcpyAsync(sumsq, d->sumsq, sizeof(double), cudaMemcpyDeviceToHost,
	                       d->env.stream));
	CU_TRY(cudaStreamSynchronize(d->env.stream));
	return 0;
}

int cu_grad_scale(struct sd_dev_model *d, float coef, char **why)
{
	CU_TRY(cu_scale(d->env.stream, d->blocks[SD_DEV_GRADS], d->block_floats[SD_DEV_GRADS], coef));
	return 0;
}

/* ---- blocks ------------------------------------------------------------- */

static int check_block(struct sd_dev_model *d, enum sd_dev_block b, char **why)
{
	if ((int)b < 0 || (int)b >= SD_DEV_NBLOCKS)
		return sd_why(why, "CUDA model: no block %d", (int)b);
	if (b == SD_DEV_SECOND)
		return second_block(d, why);
	return 0;
}

int cu_model_upload(struct sd_dev_model *d, enum sd_dev_block b, const float *host, char **why)
{
	if (check_block(d, b, why) < 0)
		return -1;
	if (!d->block_floats[b])
		return 0;
	CU_TRY(cudaMemcpyAsync(d->blocks[b], host, d->block_floats[b] * sizeof(float),
	                       cudaMemcpyHostToDevice, d->env.stream));
	CU_TRY(cudaStreamSynchronize(d->env.stream));
	return 0;
}

int cu_model_download(struct sd_dev_model *d, enum sd_dev_block b, float *host, char **why)
{
	if (check_block(d, b, why) < 0)
		return -1;
	if (!d->block_floats[b])
		return 0;
	CU_TRY(cudaMemcpyAsync(host, d->blocks[b], d->block_floats[b] * sizeof(float),
	                       cudaMemcpyDeviceToHost, d->env.stream));
	CU_TRY(cudaStreamSynchronize(d->env.stream));
	return 0;
}

float *cu_model_block(struct sd_dev_model *d, enum sd_dev_block b)
{
	if ((int)b < 0 || (int)b >= SD_DEV_NBLOCKS)
		return NULL;
	char *err = NULL;
	if (b == SD_DEV_SECOND && second_block(d, &err) < 0) {
		free(err);
		return NULL;
	}
	/* Callers (NCCL) use it from other streams: finish ours first. */
	cudaStreamSynchronize(d->env.stream);
	return d->blocks[b];
}

const char *cu_model_describe(struct sd_dev_model *d)
{
	if (d->m->seq_len) {
		snprintf(d->describe, sizeof d->describe,
		         "language model: cuBLAS strided-batched products, attention unfused (q k^T, "
		         "causal softmax kernel, P v), deterministic reductions, %s math, CUDA graphs "
		         "%s%s%s", d->env.tf32 ? "TF32 tensor-core" : "strict fp32",
		         d->graphs ? "on" : "off (SPOTDECK_CUDA_GRAPHS=0)", d->note[0] ? "; " : "",
		         d->note);
		return d->describe;
	}
	snprintf(d->describe, sizeof d->describe,
	         "cuDNN convolution algorithms by %s (deterministic only), %s math, CUDA graphs %s%s%s",
	         d->env.find ? "measurement" : "heuristics",
	         d->env.tf32 ? "TF32 tensor-core" : "strict fp32",
	         d->graphs ? "on" : "off (SPOTDECK_CUDA_GRAPHS=0)", d->note[0] ? "; " : "", d->note);
	return d->describe;
}

/* ---- create / destroy --------------------------------------------------- */

void cu_model_destroy(struct sd_dev_model *d)
{
	if (!d)
		return;
	if (d->env.stream)
		cudaStreamSynchronize(d->env.stream);
	if (d->copy)
		cudaStreamSynchronize(d->copy);
	for (int i = 0; i < d->nplans; i++)
		plan_free(d, &d->plans[i]);
	free(d->plans);
	const struct sd_model *m = d->m;
	for (int i = 0; d->val && i < m->nacts; i++) {
		cudaFree(d->val[i]);
		cudaFree(d->grad[i]);
	}
	free(d->val);
	free(d->grad);
	for (int i = 0; d->bn_mean && i < m->nnodes; i++) {
		cudaFree(d->bn_mean[i]);
		cudaFree(d->bn_invstd[i]);
	}
	free(d->bn_mean);
	free(d->bn_invstd);
	free(d->acc_in);
	free(d->acc_in2);
	free(d->acc_in3);
	for (int i = 0; d->seq && i < m->nnodes; i++) {
		cudaFree(d->seq[i].idx);
		cudaFree(d->seq[i].mask);
		cudaFree(d->seq[i].src);
		cudaFree(d->seq[i].k);
		cudaFree(d->seq[i].mean);
		cudaFree(d->seq[i].rstd);
	}
	free(d->seq);
	cudaFree(d->tok);
	if (d->tok_host)
		cudaFreeHost(d->tok_host);
	cudaFree(d->tok_loss);
	cudaFree(d->colsum);
	for (int b = 0; b < SD_DEV_NBLOCKS; b++)
		cudaFree(d->blocks[b]);
	cudaFree(d->sumsq);
	cudaFree(d->labels);
	cudaFree(d->data);
	cudaFree(d->data_labels);
	cudaFree(d->idx);
	if (d->idx_host)
		cudaFreeHost(d->idx_host);
	cudaFree(d->row_loss);
	cudaFree(d->row_correct);
	cudaFree(d->metrics);
	if (d->metrics_host)
		cudaFreeHost(d->metrics_host);
	for (int i = 0; i < 3; i++)
		if (d->host_locked[i])
			cudaHostUnregister(d->host_locked[i]);
	if (d->uploaded)
		cudaEventDestroy(d->uploaded);
	if (d->done)
		cudaEventDestroy(d->done);
	if (d->copy)
		cudaStreamDestroy(d->copy);
	cudaStream_t st = d->env.stream;
	cu_env_fini(&d->env);
	if (st)
		cudaStreamDestroy(st);
	(void)cudaGetLastError();
	free(d);
}

/* Which gradients a node adds rather than writes: engine/model.c's backward
 * bookkeeping (grad_set), done once here since it does not depend on n. */
static int plan_accumulation(struct sd_dev_model *d, char **why)
{
	const struct sd_model *m = d->m;
	char *set = sd_calloc((size_t)m->nacts, 1);
	d->acc_in = sd_calloc((size_t)m->nnodes, 1);
	d->acc_in2 = sd_calloc((size_t)m->nnodes, 1);
	set[m->nacts - 1] = 1;   /* the logits' gradient comes from the loss */
	for (int i = m->nnodes - 1; i >= 0; i--) {
		const struct node *nd = &m->nodes[i];
		/* What the ONNX loader can build and the device code cannot run
		 * yet: a linear without bias, a padded max-pool, a batch-norm
		 * a padded average-pool, and the ops of the default case below.
		 * (Batch-norm runs with each node's own momentum and epsilon.)  The
		 * trainer then stays on the CPU and says why. */
		if (nd->op == OP_LINEAR && nd->b_off == SD_NO_TENSOR) {
			free(set);
			return sd_why(why, "CUDA backend: model %s: linear node %s has no bias, "
			              "which the device code does not implement", m->name, nd->name);
		}
		if (nd->op == OP_MAXPOOL && nd->pad) {
			free(set);
			return sd_why(why, "CUDA backend: model %s: max-pool node %s is padded, which "
			              "the device code does not implement", m->name, nd->name);
		}
		if (nd->op == OP_AVGPOOL && nd->pad) {
			free(set);
			return sd_why(why, "CUDA backend: model %s: average-pool node %s is padded, "
			              "which the device code does not implement", m->name, nd->name);
		}
		switch (nd->op) {
		case OP_CONV:
		case OP_LINEAR:
			/* The input image needs no gradient. */
			if (nd->in == 0) {
				d->acc_in[i] = -1;
				break;
			}
			/* fall through */
		case OP_BN:
		case OP_MAXPOOL:
		case OP_AVGPOOL:
			d->acc_in[i] = set[nd->in];
			set[nd->in] = 1;
			break;
		case OP_RELU:
			d->acc_in[i] = -1;
			break;
		case OP_ADD:
			d->acc_in[i] = set[nd->in];
			set[nd->in] = 1;
			d->acc_in2[i] = set[nd->in2];
			set[nd->in2] = 1;
			break;
		default:
			free(set);
			return sd_why(why, "CUDA backend: model %s has node %s of a kind (%s) it does "
			              "not implement", m->name, nd->name,
			              nd->op == OP_ACT ? "activation" : nd->op == OP_CONCAT ? "concat"
			              : nd->op == OP_GCONV ? "grouped, dilated or rectangular conv"
			              : nd->op == OP_BINARY ? "elementwise arithmetic"
			              : nd->op == OP_DROPOUT ? "dropout" : "unknown");
		}
	}
	free(set);
	return 0;
}

/* plan_accumulation for a language model: which inputs of each node get
 * a gradient and whether it is added or written, walking backward as
 * seq_backward does (a fused group by its head).  The token ids
 * (activation 0) get none.  Refuses, with the reason, what the device
 * code does not implement. */
static int plan_seq_accumulation(struct sd_dev_model *d, char **why)
{
	const struct sd_model *m = d->m;
	char *set = sd_calloc((size_t)m->nacts, 1);
	d->acc_in = sd_calloc((size_t)m->nnodes, 1);
	d->acc_in2 = sd_calloc((size_t)m->nnodes, 1);
	d->acc_in3 = sd_calloc((size_t)m->nnodes, 1);
	set[m->nacts - 1] = 1;
	for (int i = m->nnodes - 1; i >= 0; i--) {
		i = seq_head(m, i);
		const struct node *nd = &m->nodes[i];
		const char *no = NULL;
		if (nd->op == OP_BINARY && nd->in2 < 0 && nd->bin_kc != 1)
			no = "arithmetic with a per-channel constant on a sequence";
		else if (nd->op == OP_DROPOUT && nd->drop_p > 0)
			no = "dropout with p > 0 (export with dropout 0, or train on the CPU)";
		else if (nd->op == OP_ACT && nd->act != SD_ACT_TANH)
			no = "an activation other than tanh";
		else if (nd->op != OP_SEQ && nd->op != OP_BINARY && nd->op != OP_DROPOUT &&
		         nd->op != OP_ACT)
			no = "an image layer";
		if (no) {
			free(set);
			return sd_why(why, "CUDA backend: language model %s: node %s is %s, which the "
			              "device code does not implement", m->name, nd->name, no);
		}
		int ins[3] = { nd->in, -1, -1 };
		signed char *acc[3] = { &d->acc_in[i], &d->acc_in2[i], &d->acc_in3[i] };
		if (nd->op == OP_SEQ && nd->seq == SEQ_EMBED)
			ins[0] = -1;
		if ((nd->op == OP_SEQ && (nd->seq == SEQ_BMM || nd->seq == SEQ_ATTENTION)) ||
		    (nd->op == OP_BINARY && nd->in2 >= 0))
			ins[1] = nd->in2;
		if (nd->op == OP_SEQ && nd->seq == SEQ_ATTENTION)
			ins[2] = nd->in3;
		for (int k = 0; k < 3; k++) {
			if (ins[k] <= 0) {   /* none, or the token ids */
				*acc[k] = -1;
				continue;
			}
			*acc[k] = set[ins[k]];
			set[ins[k]] = 1;
		}
	}
	free(set);
	return 0;
}

/* Which activation buffers a language model's executed nodes use: bit 0
 * the values, bit 1 the gradient (malloc'd, nacts entries; after
 * plan_seq_accumulation). */
static char *seq_buffers(const struct sd_dev_model *d)
{
	const struct sd_model *m = d->m;
	char *need = sd_calloc((size_t)m->nacts, 1);
	need[0] = 1;
	need[m->nacts - 1] = 3;
	for (int i = m->nnodes - 1; i >= 0; i--) {
		i = seq_head(m, i);
		const struct node *nd = &m->nodes[i];
		const int ins[3] = { nd->in, nd->in2, nd->op == OP_SEQ && nd->seq == SEQ_ATTENTION
		                                      ? nd->in3 : -1 };
		const signed char acc[3] = { d->acc_in[i], d->acc_in2[i], d->acc_in3[i] };
		need[nd->out] |= 3;
		for (int k = 0; k < 3; k++)
			if (ins[k] >= 0)
				need[ins[k]] |= acc[k] >= 0 ? 3 : 1;
		if (nd->op == OP_SEQ && nd->seq == SEQ_ATTENTION) {
			need[nd->seq_aux[0]] |= 1;
			need[nd->seq_aux[1]] |= 1;
		}
	}
	return need;
}

static int seq_copy(void **dst, const void *src, size_t bytes, char **why)
{
	CU_TRY(cudaMalloc(dst, bytes ? bytes : 1));
	CU_TRY(cudaMemcpy(*dst, src, bytes, cudaMemcpyHostToDevice));
	return 0;
}

/* A language model's device constants, token buffers and scratch. */
static int seq_create(struct sd_dev_model *d, char **why)
{
	const struct sd_model *m = d->m;
	const size_t T = (size_t)m->seq_len, nb = (size_t)d->max_batch;
	size_t scratch = 8;
	d->seq = sd_calloc((size_t)m->nnodes, sizeof *d->seq);
	for (int i = 0; i < m->nnodes; i++) {
		const struct node *nd = &m->nodes[i];
		struct seq_dev *sq = &d->seq[i];
		const size_t per = act_count(&m->acts[nd->in]), rows = nb * nd->seq_rows;
		size_t need = 0;
		if (nd->op == OP_BINARY && nd->in2 < 0) {
			if (nd->w_off == SD_NO_TENSOR &&
			    seq_copy((void **)&sq->k, nd->bin_k, sizeof(float), why) < 0)
				return -1;
			need = cu_colsum_scratch_bytes(nb, (int)per);
		}
		if (nd->op != OP_SEQ)
			goto next;
		switch (nd->seq) {
		case SEQ_EMBED:
			if (nd->seq_idx && seq_copy((void **)&sq->idx, nd->seq_idx,
			                            (size_t)nd->seq_rows * sizeof(int32_t), why) < 0)
				return -1;
			break;
		case SEQ_MASKFILL:
			if (seq_copy((void **)&sq->mask, nd->seq_mask, per, why) < 0)
				return -1;
			break;
		case SEQ_TRANSPOSE:
			if (seq_copy((void **)&sq->src, nd->seq_src, per * sizeof(uint32_t), why) < 0)
				return -1;
			break;
		case SEQ_BIAS:
			if (nd->w_off == SD_NO_TENSOR &&
			    seq_copy((void **)&sq->k, nd->bin_k, (size_t)nd->bin_kc * sizeof(float), why) < 0)
				return -1;
			need = cu_colsum_scratch_bytes(rows, nd->seq_n);
			break;
		case SEQ_LAYERNORM:
			if (nd->w_off == SD_NO_TENSOR &&
			    seq_copy((void **)&sq->k, nd->bin_k, (size_t)nd->seq_n * sizeof(float), why) < 0)
				return -1;
			CU_TRY(cudaMalloc((void **)&sq->mean, rows * sizeof(float)));
			CU_TRY(cudaMalloc((void **)&sq->rstd, rows * sizeof(float)));
			need = cu_colsum_scratch_bytes(rows, nd->seq_n);
			break;
		case SEQ_LINEAR:
			need = cu_colsum_scratch_bytes(rows, nd->seq_n);
			break;
		default:
			break;
		}
	next:
		if (need > scratch)
			scratch = need;
	}
	CU_TRY(cudaMalloc((void **)&d->colsum, scratch));
	CU_TRY(cudaMalloc((void **)&d->tok, 2 * nb * T * sizeof(int32_t)));
	CU_TRY(cudaMallocHost((void **)&d->tok_host, 2 * nb * T * sizeof(int32_t)));
	CU_TRY(cudaMalloc((void **)&d->tok_loss, nb * T * sizeof(double)));
	return 0;
}

/* Page-locks a host block so copies of it are direct DMA; optional. */
static void lock_host(struct sd_dev_model *d, int slot, float *p, size_t floats)
{
	if (!p || !floats)
		return;
	if (cudaHostRegister(p, floats * sizeof(float), cudaHostRegisterDefault) == cudaSuccess)
		d->host_locked[slot] = p;
	else
		(void)cudaGetLastError();
}

int cu_model_create(struct sd_dev_model **out, const struct sd_model *m, int max_batch,
                    char **why)
{
	*out = NULL;
	if (max_batch <= 0)
		return sd_why(why, "CUDA model %s: max batch %d", m->name, max_batch);
	struct sd_dev_model *d = sd_calloc(1, sizeof *d);
	d->m = m;
	d->max_batch = max_batch;
	d->img = act_count(&m->acts[0]);
	d->graphs = cu_env_flag("SPOTDECK_CUDA_GRAPHS", 1);
	if ((m->seq_len ? plan_seq_accumulation(d, why) : plan_accumulation(d, why)) < 0)
		goto fail;

	cudaStream_t st = NULL;
	/* Non-blocking: never serialised with the legacy default stream. */
	if (cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) != cudaSuccess ||
	    cudaStreamCreateWithFlags(&d->copy, cudaStreamNonBlocking) != cudaSuccess ||
	    cudaEventCreateWithFlags(&d->uploaded, cudaEventDisableTiming) != cudaSuccess ||
	    cudaEventCreateWithFlags(&d->done, cudaEventDisableTiming) != cudaSuccess) {
		cu_fail_cuda(why, "cudaStreamCreate/cudaEventCreate", cudaGetLastError());
		if (st)
			cudaStreamDestroy(st);
		goto fail;
	}
	/* cuDNN workspace: 256 MiB, or an eighth of the free memory if less. */
	size_t free_b = 0, total_b = 0;
	size_t ws = 256u << 20;
	if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess && free_b / 8 < ws)
		ws = free_b / 8;
	if (cu_env_init(&d->env, st, ws, max_batch, why) < 0) {
		if (!d->env.stream)
			cudaStreamDestroy(st);
		goto fail;
	}

	d->block_floats[SD_DEV_PARAMS] = m->nparams;
	d->block_floats[SD_DEV_GRADS] = m->nparams;
	d->block_floats[SD_DEV_VELOCITY] = m->nparams;
	d->block_floats[SD_DEV_BUFFERS] = m->nbuffers;
	for (int b = 0; b < 4; b++) {
		size_t bytes = (d->block_floats[b] ? d->block_floats[b] : 1) * sizeof(float);
		if (cudaMalloc((void **)&d->blocks[b], bytes) != cudaSuccess ||
		    cudaMemsetAsync(d->blocks[b], 0, bytes, st) != cudaSuccess) {
			cu_fail_cuda(why, "cudaMalloc (state blocks)", cudaGetLastError());
			goto fail;
		}
	}
	d->val = sd_calloc((size_t)m->nacts, sizeof *d->val);
	d->grad = sd_calloc((size_t)m->nacts, sizeof *d->grad);
	size_t act_bytes = 0;
	/* A language model allocates only the buffers its executed nodes
	 * touch (a fused group's inner activations have none): GPT-2 small's
	 * attention scores alone would otherwise take 4 (H, T, T) buffers and
	 * their gradients per layer. */
	char *need = m->seq_len ? seq_buffers(d) : NULL;
	for (int i = 0; i < m->nacts; i++) {
		size_t bytes = act_count(&m->acts[i]) * (size_t)max_batch * sizeof(float);
		int v = !need || (need[i] & 1), g = !need || (need[i] & 2);
		act_bytes += (size_t)(v + g) * bytes;
		if ((v && cudaMalloc((void **)&d->val[i], bytes) != cudaSuccess) ||
		    (g && cudaMalloc((void **)&d->grad[i], bytes) != cudaSuccess)) {
			free(need);
			cudaGetLastError();
			sd_why(why, "CUDA model %s: cannot allocate %.0f MiB of activations for batch %d",
			       m->name, act_bytes / 1048576.0, max_batch);
			goto fail;
		}
	}
	free(need);
	d->bn_mean = sd_calloc((size_t)m->nnodes, sizeof *d->bn_mean);
	d->bn_invstd = sd_calloc((size_t)m->nnodes, sizeof *d->bn_invstd);
	for (int i = 0; i < m->nnodes; i++) {
		if (m->nodes[i].op != OP_BN)
			continue;
		size_t bytes = (size_t)m->acts[m->nodes[i].in].c * sizeof(float);
		if (cudaMalloc((void **)&d->bn_mean[i], bytes) != cudaSuccess ||
		    cudaMalloc((void **)&d->bn_invstd[i], bytes) != cudaSuccess) {
			cu_fail_cuda(why, "cudaMalloc (batch-norm statistics)", cudaGetLastError());
			goto fail;
		}
	}
	if (cudaMalloc((void **)&d->labels, (size_t)max_batch) != cudaSuccess ||
	    cudaMalloc((void **)&d->row_loss, (size_t)max_batch * sizeof(double)) != cudaSuccess ||
	    cudaMalloc((void **)&d->row_correct, (size_t)max_batch * sizeof(int)) != cudaSuccess ||
	    cudaMalloc((void **)&d->metrics, sizeof *d->metrics) != cudaSuccess ||
	    cudaMallocHost((void **)&d->metrics_host, sizeof *d->metrics_host) != cudaSuccess ||
	    cudaMalloc((void **)&d->idx, (size_t)max_batch * sizeof *d->idx) != cudaSuccess ||
	    cudaMallocHost((void **)&d->idx_host, (size_t)max_batch * sizeof *d->idx_host) != cudaSuccess) {
		cu_fail_cuda(why, "cudaMalloc (labels, metrics)", cudaGetLastError());
		goto fail;
	}
	if (m->seq_len && seq_create(d, why) < 0)
		goto fail;
	/* The host blocks the trainer copies every step on the Gloo path. */
	lock_host(d, 0, m->params, m->nparams);
	lock_host(d, 1, m->grads, m->nparams);
	lock_host(d, 2, m->buffers, m->nbuffers);
	if (cudaStreamSynchronize(st) != cudaSuccess) {
		cu_fail_cuda(why, "cudaStreamSynchronize", cudaGetLastError());
		goto fail;
	}
	*out = d;
	return 0;
fail:
	cu_model_destroy(d);
	return -1;
}
