/* engine/matmul-dnnl-none.c - the oneDNN matmul path of a build without
 * oneDNN (configure did not find it): no shape takes it, so every linear
 * layer runs OpenBLAS's float32 sgemm.  See matmul-dnnl.h. */
#include "engine/matmul-dnnl.h"

#include <stdio.h>

int sd_linear_dnnl_bf16_wins(int n, int in, int out)
{
	(void)n, (void)in, (void)out;
	return 0;
}

int sd_linear_dnnl_forward_bf16(float *y, const float *x, const float *w, const float *b,
                                int n, int in, int out)
{
	(void)y, (void)x, (void)w, (void)b, (void)n, (void)in, (void)out;
	return -1;
}

int sd_linear_dnnl_backward_bf16(float *dx, float *dw, const float *dy, const float *x,
                                 const float *w, int n, int in, int out, int bias)
{
	(void)dx, (void)dw, (void)dy, (void)x, (void)w, (void)n, (void)in, (void)out, (void)bias;
	return -1;
}

void sd_linear_dnnl_describe(int n, int in, int out, int bias, char *buf, size_t len)
{
	(void)n, (void)in, (void)out, (void)bias;
	snprintf(buf, len, "not built (configure found no oneDNN)");
}

unsigned long sd_linear_dnnl_failures(void)
{
	return 0;
}
