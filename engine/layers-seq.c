/* engine/layers-seq.c - CPU kernels of decoder-only transformers (see
 * layers-seq.h).  Kernels not written yet abort with a message naming
 * themselves, so that nothing computes a wrong value silently. */
#include "engine/layers-seq.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* A kernel that is declared but not implemented yet: says which and aborts. */
static void sd_seq_unimplemented(const char *name) __attribute__((noreturn));
static void sd_seq_unimplemented(const char *name)
{
	fprintf(stderr, "spotdeck: %s is not implemented yet (engine/layers-seq.c)\n", name);
	abort();
}

void sd_layernorm_forward(float *y, float *mean, float *rstd, const float *x,
                          const float *gamma, const float *beta, int n, int c, float eps)
{
	(void)y; (void)mean; (void)rstd; (void)x; (void)gamma; (void)beta; (void)n; (void)c;
	(void)eps;
	sd_seq_unimplemented(__func__);
}

void sd_layernorm_backward(float *dx, float *dgamma, float *dbeta, const float *dy,
                           const float *x, const float *mean, const float *rstd,
                           const float *gamma, int n, int c)
{
	(void)dx; (void)dgamma; (void)dbeta; (void)dy; (void)x; (void)mean; (void)rstd;
	(void)gamma; (void)n; (void)c;
	sd_seq_unimplemented(__func__);
}

void sd_softmax_lastdim_forward(float *y, const float *x, int rows, int len)
{
	(void)y; (void)x; (void)rows; (void)len;
	sd_seq_unimplemented(__func__);
}

void sd_softmax_lastdim_backward(float *dx, const float *dy, const float *y, int rows, int len)
{
	(void)dx; (void)dy; (void)y; (void)rows; (void)len;
	sd_seq_unimplemented(__func__);
}

void sd_gelu_forward(float *y, const float *x, size_t count, enum sd_gelu_kind kind)
{
	(void)y; (void)x; (void)count; (void)kind;
	sd_seq_unimplemented(__func__);
}

void sd_gelu_backward(float *dx, const float *dy, const float *x, size_t count,
                      enum sd_gelu_kind kind)
{
	(void)dx; (void)dy; (void)x; (void)count; (void)kind;
	sd_seq_unimplemented(__func__);
}

int sd_embedding_forward(float *out, const int32_t *ids, const float *table, int n, int c,
                         int vocab)
{
	(void)out; (void)ids; (void)table; (void)n; (void)c; (void)vocab;
	sd_seq_unimplemented(__func__);
}

void sd_embedding_backward(float *dtable, const float *dout, const int32_t *ids, int n, int c,
                           int vocab)
{
	(void)dtable; (void)dout; (void)ids; (void)n; (void)c; (void)vocab;
	sd_seq_unimplemented(__func__);
}

void sd_matmul_batched_forward(float *y, const float *a, const float *b, int batch, int m,
                               int k, int n, int trans_a, int trans_b)
{
	(void)y; (void)a; (void)b; (void)batch; (void)m; (void)k; (void)n; (void)trans_a;
	(void)trans_b;
	sd_seq_unimplemented(__func__);
}

void sd_matmul_batched_backward(float *da, float *db, const float *dy, const float *a,
                                const float *b, int batch, int m, int k, int n, int trans_a,
                                int trans_b, int accumulate)
{
	(void)da; (void)db; (void)dy; (void)a; (void)b; (void)batch; (void)m; (void)k; (void)n;
	(void)trans_a; (void)trans_b; (void)accumulate;
	sd_seq_unimplemented(__func__);
}

void sd_attention_causal_forward(float *y, float *probs, const float *q, const float *k,
                                 const float *v, int b, int h, int t, int d, float scale)
{
	(void)y; (void)probs; (void)q; (void)k; (void)v; (void)b; (void)h; (void)t; (void)d;
	(void)scale;
	sd_seq_unimplemented(__func__);
}

void sd_attention_causal_backward(float *dq, float *dk, float *dv, const float *dy,
                                  const float *q, const float *k, const float *v,
                                  const float *probs, float *ws, int b, int h, int t, int d,
                                  float scale)
{
	(void)dq; (void)dk; (void)dv; (void)dy; (void)q; (void)k; (void)v; (void)probs; (void)ws;
	(void)b; (void)h; (void)t; (void)d; (void)scale;
	sd_seq_unimplemented(__func__);
}

double sd_cross_entropy_seq_forward_backward(float *dlogits, const float *logits,
                                             const int32_t *targets, int n, int v, float scale)
{
	(void)dlogits; (void)logits; (void)targets; (void)n; (void)v; (void)scale;
	sd_seq_unimplemented(__func__);
}
