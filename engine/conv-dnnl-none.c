/* engine/conv-dnnl-none.c - the oneDNN convolution path of a build without
 * oneDNN (configure did not find it): nothing is supported, so every
 * convolution runs im2col + OpenBLAS.  See conv-dnnl.h. */
#include "engine/conv-dnnl.h"

#include <stdio.h>

int sd_conv2d_dnnl_supported(const struct sd_conv2d_shape *s, int bias)
{
	(void)s, (void)bias;
	return 0;
}

size_t sd_conv2d_dnnl_workspace_floats(const struct sd_conv2d_shape *s, int bias)
{
	(void)s, (void)bias;
	return 0;
}

int sd_conv2d_dnnl_forward(float *y, const float *x, const float *w, const float *b,
                           const struct sd_conv2d_shape *s, float *ws)
{
	(void)y, (void)x, (void)w, (void)b, (void)s, (void)ws;
	return -1;
}

int sd_conv2d_dnnl_backward(float *dx, float *dw, float *db, const float *dy,
                            const float *x, const float *w,
                            const struct sd_conv2d_shape *s, float *ws)
{
	(void)dx, (void)dw, (void)db, (void)dy, (void)x, (void)w, (void)s, (void)ws;
	return -1;
}

void sd_conv2d_dnnl_describe(const struct sd_conv2d_shape *s, int bias, char *buf, size_t len)
{
	(void)s, (void)bias;
	snprintf(buf, len, "not built (configure found no oneDNN)");
}

const char *sd_conv2d_dnnl_version(void)
{
	return NULL;
}

int sd_conv2d_dnnl_block(const struct sd_conv2d_shape *s)
{
	(void)s;
	return 0;
}

int sd_conv2d_dnnl_blocked_supported(const struct sd_conv2d_shape *s, int bias, int xblk,
                                     int yblk, int need_dx)
{
	(void)s, (void)bias, (void)xblk, (void)yblk, (void)need_dx;
	return 0;
}

size_t sd_conv2d_dnnl_workspace_floats_blocked(const struct sd_conv2d_shape *s, int bias,
                                               int xblk, int yblk)
{
	(void)s, (void)bias, (void)xblk, (void)yblk;
	return 0;
}

int sd_conv2d_dnnl_forward_blocked(float *y, const float *x, const float *w, const float *b,
                                   const struct sd_conv2d_shape *s, int xblk, int yblk,
                                   float *ws, struct sd_conv2d_keep *keep)
{
	(void)y, (void)x, (void)w, (void)b, (void)s, (void)xblk, (void)yblk, (void)ws, (void)keep;
	return -1;
}

int sd_conv2d_dnnl_backward_blocked(float *dx, float *dw, float *db, const float *dy,
                                    const float *x, const float *w,
                                    const struct sd_conv2d_shape *s, int xblk, int yblk,
                                    float *ws, struct sd_conv2d_keep *keep,
                                    struct sd_conv2d_keep *keep_dy)
{
	(void)dx, (void)dw, (void)db, (void)dy, (void)x, (void)w, (void)s, (void)xblk;
	(void)yblk, (void)ws, (void)keep, (void)keep_dy;
	return -1;
}

uint16_t *sd_conv2d_dnnl_keep_prepare(struct sd_conv2d_keep *keep,
                                      const struct sd_conv2d_shape *s, int bias, int xblk,
                                      int yblk, const float *x)
{
	(void)keep, (void)s, (void)bias, (void)xblk, (void)yblk, (void)x;
	return NULL;
}

uint16_t *sd_conv2d_dnnl_keep_prepare_dy(struct sd_conv2d_keep *keep,
                                         const struct sd_conv2d_shape *s, int bias, int xblk,
                                         int yblk, const float *dy, int need_dx)
{
	(void)keep, (void)s, (void)bias, (void)xblk, (void)yblk, (void)dy, (void)need_dx;
	return NULL;
}

unsigned long sd_conv2d_dnnl_failures(void)
{
	return 0;
}

int sd_conv2d_dnnl_bf16_available(void)
{
	return 0;
}

const char *sd_conv2d_dnnl_bf16_isa(void)
{
	return NULL;
}
