/* engine/matmul-dnnl.c - bf16 GEMMs of linear layers through oneDNN's matmul
 * primitive (oneDNN 2.x C API: dnnl_matmul_desc_init).  See matmul-dnnl.h. */
#include "engine/matmul-dnnl.h"

#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/conv-dnnl.h"
#include "engine/dnnl-call.h"

/* The rule: bf16 runs through oneDNN where it beat the float32 sgemm per
 * call (forward + backward), measured with tests/bench/bench-linear-bf16 on
 * this project's Xeon with AMX (oneDNN 2.6.3 brg:avx512_core_amx_bf16;
 * medians of 7-9 calls, load 1.0-1.2, other processes 0-2 %).  Microseconds
 * fp32 -> bf16 at (n, in, out):
 *   2 threads: (128, 64, 10) 12.6 -> 32.3; (64, 256, 10) 19.5 -> 41.1;
 *     (64, 128, 32) 21.4 -> 50.0; (64, 256, 64) 44.1 -> 57.4;
 *     (64, 256, 128) 78.7 -> 75.9; (128, 128, 128) 77.1 -> 70.8;
 *     (64, 512, 128) 150.7 -> 123.5; (64, 784, 256) 606 -> 309;
 *     (64, 3136, 128) 1164 -> 661; GPT (4096, 128, 384) 6093 -> 2350,
 *     (4096, 512, 128) 6554 -> 2589; (1024, 1024, 1024) 22438 -> 6745.
 *   1 thread: (128, 64, 10) 11.3 -> 27.9; (64, 128, 32) 18.2 -> 18.3;
 *     (64, 256, 64) 66.4 -> 33.2; (64, 784, 256) 621 -> 335; GPT
 *     (4096, 128, 384) 9312 -> 3364.
 * So oneDNN's fixed costs (stream, memory objects, the reorders into bf16,
 * and at 2 threads its parallel regions) lose below about 2^21
 * multiply-adds per GEMM at 2 threads or more and 2^18 at one; a side
 * under 16 (a 10-class output layer) loses at every size measured. */
#define SD_MATMUL_MIN_MACS_1T (1L << 18)
#define SD_MATMUL_MIN_MACS (1L << 21)
#define SD_MATMUL_MIN_DIM 16

struct sd_mm_key {
	int n, in, out, bias;
	int threads;        /* omp_get_max_threads() when built */
};

struct sd_mm_plan {
	struct sd_mm_key key;
	int usable;                 /* every primitive built with a JIT kernel */
	dnnl_primitive_t fwd, bwd_d, bwd_w;            /* the three matmuls */
	dnnl_primitive_t cvt_x, cvt_w, cvt_dy;         /* float32 -> bf16 reorders */
	dnnl_memory_desc_t x_f, x_h, w_f, w_h, dy_f, dy_h;   /* (rows, cols) ab */
	dnnl_memory_desc_t wt_h;    /* w's bf16 copy seen as w^T (in, out), ba */
	dnnl_memory_desc_t dyt_h;   /* dy's bf16 copy seen as dy^T (out, n), ba */
	dnnl_memory_desc_t b_f;     /* bias (1, out) */
	dnnl_memory_desc_t y_f, dx_f, dw_f;            /* float32 outputs, ab */
	uint16_t *x_buf, *w_buf, *dy_buf;              /* the bf16 copies */
	char impl[3][48];
	unsigned long used;         /* clock of the last call, for eviction */
};

static pthread_once_t sd_mm_once = PTHREAD_ONCE_INIT;
static dnnl_engine_t sd_mm_engine;       /* NULL when oneDNN has no CPU engine */
static pthread_mutex_t sd_mm_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sd_mm_plan *sd_mm_plans[SD_MATMUL_PLANS_MAX];
static unsigned long sd_mm_clock;
static unsigned long sd_mm_failed_calls;

static void sd_mm_init(void)
{
	if (dnnl_engine_create(&sd_mm_engine, dnnl_cpu, 0) != dnnl_success)
		sd_mm_engine = NULL;
}

int sd_linear_dnnl_bf16_wins(int n, int in, int out)
{
	/* The measurements behind it are above SD_MATMUL_MIN_MACS. */
	if (n < SD_MATMUL_MIN_DIM || in < SD_MATMUL_MIN_DIM || out < SD_MATMUL_MIN_DIM)
		return 0;
	if ((long)n * in * out < (omp_get_max_threads() > 1 ? SD_MATMUL_MIN_MACS
	                                                     : SD_MATMUL_MIN_MACS_1T))
		return 0;
	return sd_conv2d_dnnl_bf16_available();
}

static void sd_md2(dnnl_memory_desc_t *md, int rows, int cols, dnnl_data_type_t t,
                   dnnl_format_tag_t tag)
{
	dnnl_dims_t d = { rows, cols };
	dnnl_memory_desc_init_by_tag(md, 2, d, t, tag);
}

static dnnl_primitive_t sd_reorder_make(const dnnl_memory_desc_t *from,
                                        const dnnl_memory_desc_t *to)
{
	dnnl_primitive_desc_t pd;
	dnnl_primitive_t p = NULL;
	if (dnnl_reorder_primitive_desc_create(&pd, from, sd_mm_engine, to, sd_mm_engine, NULL) !=
	    dnnl_success)
		return NULL;
	if (dnnl_primitive_create(&p, pd) != dnnl_success)
		p = NULL;
	dnnl_primitive_desc_destroy(pd);
	return p;
}

/* A matmul src (m, k) . wei (k, n') -> dst, with a sum post-op when
 * accumulate (dst += instead of =); its kernel's name into impl.  NULL when
 * oneDNN has only its reference loops for it ("ref:any", slower than the
 * sgemm) or fails. */
static dnnl_primitive_t sd_matmul_make(const dnnl_memory_desc_t *src,
                                       const dnnl_memory_desc_t *wei,
                                       const dnnl_memory_desc_t *bias,
                                       const dnnl_memory_desc_t *dst, int accumulate,
                                       char *impl, size_t impl_len)
{
	dnnl_matmul_desc_t d;
	dnnl_primitive_attr_t attr = NULL;
	dnnl_post_ops_t po = NULL;
	dnnl_primitive_desc_t pd = NULL;
	dnnl_primitive_t p = NULL;
	snprintf(impl, impl_len, "unsupported");
	if (dnnl_matmul_desc_init(&d, src, wei, bias, dst) != dnnl_success ||
	    dnnl_primitive_attr_create(&attr) != dnnl_success)
		return NULL;
	if (accumulate && (dnnl_post_ops_create(&po) != dnnl_success ||
	                   dnnl_post_ops_append_sum(po, 1.0f) != dnnl_success ||
	                   dnnl_primitive_attr_set_post_ops(attr, po) != dnnl_success))
		goto out;
	if (dnnl_primitive_desc_create(&pd, &d, attr, sd_mm_engine, NULL) != dnnl_success)
		goto out;
	const char *name = NULL;
	if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name) != dnnl_success ||
	    !name)
		name = "?";
	snprintf(impl, impl_len, "%s", name);
	if (!strncmp(name, "ref", 3) || dnnl_primitive_create(&p, pd) != dnnl_success)
		p = NULL;
out:
	if (pd)
		dnnl_primitive_desc_destroy(pd);
	if (po)
		dnnl_post_ops_destroy(po);
	dnnl_primitive_attr_destroy(attr);
	return p;
}

static void sd_plan_free(struct sd_mm_plan *p)
{
	if (!p)
		return;
	dnnl_primitive_t prims[6] = { p->fwd, p->bwd_d, p->bwd_w, p->cvt_x, p->cvt_w, p->cvt_dy };
	for (int i = 0; i < 6; i++)
		if (prims[i])
			dnnl_primitive_destroy(prims[i]);
	free(p->x_buf), free(p->w_buf), free(p->dy_buf);
	free(p);
}

static uint16_t *sd_bf16_alloc(size_t elems)
{
	/* 64-byte aligned (a cache line, what oneDNN's kernels like). */
	size_t bytes = (elems * sizeof(uint16_t) + 63) / 64 * 64;
	return aligned_alloc(64, bytes ? bytes : 64);
}

static struct sd_mm_plan *sd_plan_build(const struct sd_mm_key *k)
{
	struct sd_mm_plan *p = calloc(1, sizeof *p);
	if (!p)
		return NULL;
	p->key = *k;
	const int n = k->n, in = k->in, out = k->out;
	sd_md2(&p->x_f, n, in, dnnl_f32, dnnl_ab);
	sd_md2(&p->x_h, n, in, dnnl_bf16, dnnl_ab);
	sd_md2(&p->w_f, out, in, dnnl_f32, dnnl_ab);
	sd_md2(&p->w_h, out, in, dnnl_bf16, dnnl_ab);
	sd_md2(&p->dy_f, n, out, dnnl_f32, dnnl_ab);
	sd_md2(&p->dy_h, n, out, dnnl_bf16, dnnl_ab);
	sd_md2(&p->wt_h, in, out, dnnl_bf16, dnnl_ba);
	sd_md2(&p->dyt_h, out, n, dnnl_bf16, dnnl_ba);
	sd_md2(&p->b_f, 1, out, dnnl_f32, dnnl_ab);
	sd_md2(&p->y_f, n, out, dnnl_f32, dnnl_ab);
	sd_md2(&p->dx_f, n, in, dnnl_f32, dnnl_ab);
	sd_md2(&p->dw_f, out, in, dnnl_f32, dnnl_ab);
	p->x_buf = sd_bf16_alloc((size_t)n * in);
	p->w_buf = sd_bf16_alloc((size_t)out * in);
	p->dy_buf = sd_bf16_alloc((size_t)n * out);
	if (!p->x_buf || !p->w_buf || !p->dy_buf)
		return p;
	p->fwd = sd_matmul_make(&p->x_h, &p->wt_h, k->bias ? &p->b_f : NULL, &p->y_f, 0,
	                        p->impl[0], sizeof p->impl[0]);
	p->bwd_d = sd_matmul_make(&p->dy_h, &p->w_h, NULL, &p->dx_f, 0, p->impl[1],
	                          sizeof p->impl[1]);
	p->bwd_w = sd_matmul_make(&p->dyt_h, &p->x_h, NULL, &p->dw_f, 1, p->impl[2],
	                          sizeof p->impl[2]);
	p->cvt_x = sd_reorder_make(&p->x_f, &p->x_h);
	p->cvt_w = sd_reorder_make(&p->w_f, &p->w_h);
	p->cvt_dy = sd_reorder_make(&p->dy_f, &p->dy_h);
	p->usable = p->fwd && p->bwd_d && p->bwd_w && p->cvt_x && p->cvt_w && p->cvt_dy;
	return p;
}

/* The plan of shape k, built and cached on first use.  Call with sd_mm_lock
 * held; NULL without oneDNN or memory. */
static struct sd_mm_plan *sd_plan_get(int n, int in, int out, int bias)
{
	pthread_once(&sd_mm_once, sd_mm_init);
	if (!sd_mm_engine || n <= 0 || in <= 0 || out <= 0)
		return NULL;
	struct sd_mm_key k = { .n = n, .in = in, .out = out, .bias = bias,
		               .threads = omp_get_max_threads() };
	int slot = 0;
	for (int i = 0; i < SD_MATMUL_PLANS_MAX; i++) {
		struct sd_mm_plan *p = sd_mm_plans[i];
		if (p && !memcmp(&p->key, &k, sizeof k)) {
			p->used = ++sd_mm_clock;
			return p;
		}
		/* An empty slot, else the least recently used one. */
		if (!p || (sd_mm_plans[slot] && p->used < sd_mm_plans[slot]->used))
			slot = i;
	}
	struct sd_mm_plan *p = sd_plan_build(&k);
	if (!p)
		return NULL;
	sd_plan_free(sd_mm_plans[slot]);
	sd_mm_plans[slot] = p;
	p->used = ++sd_mm_clock;
	return p;
}

static void sd_convert(struct sd_dnnl_call *c, dnnl_primitive_t cvt, const dnnl_memory_desc_t *from_md,
                       const float *from, const dnnl_memory_desc_t *to_md, uint16_t *to)
{
	dnnl_exec_arg_t args[2] = {
		{ DNNL_ARG_FROM, sd_dnnl_mem(c, from_md, from) },
		{ DNNL_ARG_TO, sd_dnnl_mem(c, to_md, to) },
	};
	sd_dnnl_exec(c, cvt, 2, args);
}

int sd_linear_dnnl_forward_bf16(float *y, const float *x, const float *w, const float *b,
                                int n, int in, int out)
{
	if (!sd_conv2d_dnnl_bf16_available())
		return -1;
	pthread_mutex_lock(&sd_mm_lock);
	struct sd_mm_plan *p = sd_plan_get(n, in, out, b != NULL);
	int rc = -1;
	struct sd_dnnl_call c;
	if (p && p->usable) {
		if (sd_dnnl_call_begin(&c, sd_mm_engine) == 0) {
			sd_convert(&c, p->cvt_x, &p->x_f, x, &p->x_h, p->x_buf);
			sd_convert(&c, p->cvt_w, &p->w_f, w, &p->w_h, p->w_buf);
			dnnl_exec_arg_t args[4] = {
				{ DNNL_ARG_SRC, sd_dnnl_mem(&c, &p->x_h, p->x_buf) },
				{ DNNL_ARG_WEIGHTS, sd_dnnl_mem(&c, &p->wt_h, p->w_buf) },
				{ DNNL_ARG_DST, sd_dnnl_mem(&c, &p->y_f, y) },
				{ DNNL_ARG_BIAS, b ? sd_dnnl_mem(&c, &p->b_f, b) : NULL },
			};
			sd_dnnl_exec(&c, p->fwd, b ? 4 : 3, args);
			rc = sd_dnnl_call_end(&c);
		}
		if (rc < 0)
			sd_mm_failed_calls++;
	}
	pthread_mutex_unlock(&sd_mm_lock);
	return rc;
}

int sd_linear_dnnl_backward_bf16(float *dx, float *dw, const float *dy, const float *x,
                                 const float *w, int n, int in, int out, int bias)
{
	if (!sd_conv2d_dnnl_bf16_available())
		return -1;
	pthread_mutex_lock(&sd_mm_lock);
	/* The forward's plan: the backward primitives do not depend on the
	 * bias, but asking for the same key builds no second plan. */
	struct sd_mm_plan *p = sd_plan_get(n, in, out, bias);
	int rc = -1;
	struct sd_dnnl_call c;
	if (p && p->usable) {
		if (sd_dnnl_call_begin(&c, sd_mm_engine) == 0) {
			sd_convert(&c, p->cvt_dy, &p->dy_f, dy, &p->dy_h, p->dy_buf);
			sd_convert(&c, p->cvt_x, &p->x_f, x, &p->x_h, p->x_buf);
			dnnl_exec_arg_t wargs[3] = {
				{ DNNL_ARG_SRC, sd_dnnl_mem(&c, &p->dyt_h, p->dy_buf) },
				{ DNNL_ARG_WEIGHTS, sd_dnnl_mem(&c, &p->x_h, p->x_buf) },
				{ DNNL_ARG_DST, sd_dnnl_mem(&c, &p->dw_f, dw) },
			};
			sd_dnnl_exec(&c, p->bwd_w, 3, wargs);
			if (dx) {
				sd_convert(&c, p->cvt_w, &p->w_f, w, &p->w_h, p->w_buf);
				dnnl_exec_arg_t dargs[3] = {
					{ DNNL_ARG_SRC, sd_dnnl_mem(&c, &p->dy_h, p->dy_buf) },
					{ DNNL_ARG_WEIGHTS, sd_dnnl_mem(&c, &p->w_h, p->w_buf) },
					{ DNNL_ARG_DST, sd_dnnl_mem(&c, &p->dx_f, dx) },
				};
				sd_dnnl_exec(&c, p->bwd_d, 3, dargs);
			}
			rc = sd_dnnl_call_end(&c);
		}
		if (rc < 0)
			sd_mm_failed_calls++;
	}
	pthread_mutex_unlock(&sd_mm_lock);
	return rc;
}

void sd_linear_dnnl_describe(int n, int in, int out, int bias, char *buf, size_t len)
{
	pthread_mutex_lock(&sd_mm_lock);
	struct sd_mm_plan *p = sd_plan_get(n, in, out, bias);
	if (p)
		snprintf(buf, len, "%s / %s / %s", p->impl[0], p->impl[1], p->impl[2]);
	else
		snprintf(buf, len, "unsupported");
	pthread_mutex_unlock(&sd_mm_lock);
}

unsigned long sd_linear_dnnl_failures(void)
{
	pthread_mutex_lock(&sd_mm_lock);
	unsigned long f = sd_mm_failed_calls;
	pthread_mutex_unlock(&sd_mm_lock);
	return f;
}
