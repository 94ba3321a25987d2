/* engine/conv-dnnl.c - 2-D convolutions through oneDNN's C API (see
 * conv-dnnl.h).  Built only when configure found oneDNN; conv-dnnl-none.c
 * stands in otherwise.
 *
 * Per shape a "plan" holds three convolution primitives (forward,
 * backward-data, backward-weights), each with the layouts oneDNN chose for
 * it (format "any"), and the reorders between those layouts and our plain
 * NCHW / OIHW buffers.  A tensor whose chosen layout is plain (the
 * 3-channel input of the first ResNet convolution) is used in place.  The
 * blocked copies and oneDNN's scratchpads live in the caller's workspace
 * ("user" scratchpad mode), so a call allocates only a few small handles.
 *
 * Accumulation: oneDNN's backward-weights overwrites its result, our API
 * adds into dw and db.  The weight gradient is reordered to OIHW in the
 * workspace and added by hand (k c r r floats, nothing next to the
 * convolution) once every oneDNN call has succeeded, so a failed call leaves
 * dw and db as they were and the caller can run the im2col path instead.
 */
#include "engine/conv-dnnl.h"
#include "engine/dnnl-call.h"

#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/errors.h"

/* Plans kept.  Beyond this the least recently used one that no call is
 * running is dropped: an elastic worker meets a new batch-slice size at
 * membership changes, and each size is a plan. */
#define SD_DNNL_PLANS_MAX 48

/* Workspace offsets are rounded to 64 bytes (16 floats), the cache line
 * oneDNN's kernels are tuned for; the workspace itself is aligned first. */
#define SD_DNNL_ALIGN 16

/* One tensor argument of a primitive. */
struct sd_dnnl_arg {
	dnnl_memory_desc_t md;      /* layout the primitive wants */
	dnnl_memory_desc_t plain;   /* our layout of the same tensor */
	int is_plain;               /* md equals plain: the caller's buffer is used */
	size_t off;                 /* blocked copy: floats into the aligned workspace */
	dnnl_primitive_t reorder;   /* plain -> md (inputs) or md -> plain (outputs) */
	size_t scratch;             /* floats of the reorder's scratchpad */
};

/* One convolution primitive. */
struct sd_dnnl_pass {
	int jit;                    /* oneDNN runs a JIT kernel for it */
	dnnl_primitive_t prim;      /* NULL unless jit */
	dnnl_memory_desc_t scratch_md;
	size_t scratch_off;
	char impl[40];              /* oneDNN's name of the kernel */
};

/* What a plan is built for. */
struct sd_dnnl_key {
	struct sd_conv2d_shape s;
	int bias;
	int threads;        /* omp_get_max_threads() when built */
	int xblk, yblk;     /* layout of our x and y buffers: 1 NCHW, 8 or 16 nChw8c/16c */
	int native;         /* the kernels work on our layouts (else oneDNN picks, we reorder) */
	int bf16;           /* bf16 x, w, dy into the kernels (SD_CONV_BF16), else float32 */
};

struct sd_dnnl_plan {
	struct sd_dnnl_key key;
	struct sd_conv2d_shape s;   /* key.s */
	int bias;                   /* key.bias */
	/* cache bookkeeping */
	int refs;                   /* calls using it; never freed while > 0 */
	int cached;                 /* in sd_dnnl_plans[] (else freed at last put) */
	unsigned long used;         /* LRU clock of the last use */
	unsigned long serial;       /* unique per plan built (struct sd_conv2d_keep) */
	/* primitives */
	int ok;                     /* forward and backward-weights are usable */
	struct sd_dnnl_pass fwd, bwd_d, bwd_w;
	/* Backward-data writing dx in bf16 NHWC (sd_plan_dx_bf16): the same
	 * weights and dy layouts as bwd_d; jit 0 where oneDNN has none. */
	struct sd_dnnl_pass bwd_d16;
	dnnl_memory_desc_t d_dsrc16;   /* its dx: bf16 NHWC */
	struct sd_dnnl_arg f_src, f_w, f_dst;       /* forward */
	/* The same forward writing y in bf16 NHWC (ybf_md), from the same
	 * converted x and w (sd_plan_fwd_ybf); fwd_ybf.jit 0 when the kernels
	 * offer no such output.  Its scratchpad shares fwd's place. */
	struct sd_dnnl_pass fwd_ybf;
	dnnl_memory_desc_t ybf_md;
	struct sd_dnnl_arg d_dsrc, d_w, d_ddst;     /* backward-data */
	struct sd_dnnl_arg w_src, w_dw, w_ddst;     /* backward-weights */
	int ddst_shared;            /* both backward passes read dy in one layout */
	/* bf16 weight gradient run as a forward convolution of x and dy with
	 * batch and channels swapped (sd_use_wgrad_swap); bwd_w's arguments
	 * still say how x and dy arrive (w_src, w_ddst), ws_x and ws_dy take
	 * them on from there, ws_dw writes the (c, k, r, r) result into OIHW. */
	int wswap;
	struct sd_dnnl_pass bwd_ws;
	struct sd_dnnl_arg ws_x, ws_dy, ws_dw;
	size_t dw_plain_off;        /* weight gradient reordered to OIHW */
	dnnl_memory_desc_t bias_md; /* (k), plain */
	size_t db_off;              /* bias gradient, k floats */
	size_t f_rs_off, b_rs_off;  /* reorder scratchpad of each call */
	size_t fwd_floats, bwd_floats;   /* workspace of each call, alignment included */
};

/* Calls whose plan was usable but which failed all the same (the caller ran
 * im2col instead): a bug or an exhausted resource, never expected. */
static unsigned long sd_dnnl_failed_calls;

static pthread_once_t sd_dnnl_once = PTHREAD_ONCE_INIT;
static dnnl_engine_t sd_dnnl_engine;     /* NULL when oneDNN has no CPU engine */
static pthread_mutex_t sd_dnnl_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sd_dnnl_plan *sd_dnnl_plans[SD_DNNL_PLANS_MAX];
static unsigned long sd_dnnl_clock;
static unsigned long sd_dnnl_serial;
static char sd_dnnl_version_str[32];

static void sd_dnnl_init(void)
{
	const dnnl_version_t *v = dnnl_version();
	snprintf(sd_dnnl_version_str, sizeof sd_dnnl_version_str, "%d.%d.%d", v->major, v->minor,
	         v->patch);
	if (dnnl_engine_create(&sd_dnnl_engine, dnnl_cpu, 0) != dnnl_success)
		sd_dnnl_engine = NULL;
}

const char *sd_conv2d_dnnl_version(void)
{
	pthread_once(&sd_dnnl_once, sd_dnnl_init);
	return sd_dnnl_version_str;
}

static size_t sd_floats_of(const dnnl_memory_desc_t *md)
{
	return (dnnl_memory_desc_get_size(md) + sizeof(float) - 1) / sizeof(float);
}

/* Reserves floats in a workspace being laid out; returns their offset. */
static size_t sd_take(size_t *top, size_t floats)
{
	size_t at = *top;
	*top += (floats + SD_DNNL_ALIGN - 1) / SD_DNNL_ALIGN * SD_DNNL_ALIGN;
	return at;
}

static float *sd_aligned(float *ws)
{
	return (float *)(((uintptr_t)ws + SD_DNNL_ALIGN * sizeof(float) - 1) &
	                 ~(uintptr_t)(SD_DNNL_ALIGN * sizeof(float) - 1));
}

/* Attributes of every primitive here: scratchpad in our workspace. */
static dnnl_primitive_attr_t sd_attr(void)
{
	dnnl_primitive_attr_t attr;
	if (dnnl_primitive_attr_create(&attr) != dnnl_success)
		return NULL;
	if (dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) !=
	    dnnl_success) {
		dnnl_primitive_attr_destroy(attr);
		return NULL;
	}
	return attr;
}

/* 1 when a and b put every element of the same (n, c, h, w) tensor at the
 * same byte: oneDNN's NHWC (what its AMX kernels pick for activations) and
 * our nChw16c or nChw8c when the tensor has exactly one block of channels.
 * dnnl_memory_desc_equal says no there, as the two descriptors differ. */
static int sd_same_bytes(const dnnl_memory_desc_t *a, const dnnl_memory_desc_t *b)
{
	if (a->ndims != 4 || b->ndims != 4 || a->data_type != b->data_type ||
	    a->format_kind != dnnl_blocked || b->format_kind != dnnl_blocked ||
	    a->offset0 != 0 || b->offset0 != 0)
		return 0;
	for (int i = 0; i < 4; i++)
		if (a->dims[i] != b->dims[i] || a->padded_dims[i] != a->dims[i] ||
		    b->padded_dims[i] != b->dims[i])
			return 0;
	const dnnl_dim_t c = a->dims[1], h = a->dims[2], w = a->dims[3];
	/* The NHWC strides, in elements. */
	const dnnl_dim_t nhwc[4] = { h * w * c, 1, w * c, c };
	const dnnl_memory_desc_t *ab[2] = { a, b };
	for (int k = 0; k < 2; k++) {
		const dnnl_blocking_desc_t *bl = &ab[k]->format_desc.blocking;
		if (bl->inner_nblks == 0) {
			for (int i = 0; i < 4; i++)
				if (bl->strides[i] != nhwc[i])
					return 0;
		} else if (bl->inner_nblks == 1 && bl->inner_idxs[0] == 1 && bl->inner_blks[0] == c) {
			/* nChw{c}c: one channel block, then h, w; the block's own
			 * stride is irrelevant (one block). */
			if (bl->strides[0] != h * w * c || bl->strides[2] != w * c || bl->strides[3] != c)
				return 0;
		} else {
			return 0;
		}
	}
	return 1;
}

/* Takes a's layout from the primitive descriptor and builds its reorder
 * (to_blocked: plain -> md, else md -> plain); a plain argument needs none,
 * nor does one laid out byte for byte as it (sd_same_bytes). */
static int sd_arg_init(struct sd_dnnl_arg *a, const_dnnl_primitive_desc_t pd, dnnl_query_t q,
                       const dnnl_memory_desc_t *plain, int to_blocked)
{
	const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, q, 0);
	if (!md)
		return -1;
	a->md = *md;
	a->plain = *plain;
	a->is_plain = dnnl_memory_desc_equal(&a->md, &a->plain) || sd_same_bytes(&a->md, &a->plain);
	if (a->is_plain)
		return 0;
	dnnl_primitive_attr_t attr = sd_attr();
	if (!attr)
		return -1;
	dnnl_primitive_desc_t rpd;
	dnnl_status_t st = to_blocked
		? dnnl_reorder_primitive_desc_create(&rpd, &a->plain, sd_dnnl_engine, &a->md,
		                                     sd_dnnl_engine, attr)
		: dnnl_reorder_primitive_desc_create(&rpd, &a->md, sd_dnnl_engine, &a->plain,
		                                     sd_dnnl_engine, attr);
	dnnl_primitive_attr_destroy(attr);
	if (st != dnnl_success)
		return -1;
	const dnnl_memory_desc_t *sp = dnnl_primitive_desc_query_md(rpd, dnnl_query_scratchpad_md, 0);
	a->scratch = sp ? sd_floats_of(sp) : 0;
	st = dnnl_primitive_create(&a->reorder, rpd);
	dnnl_primitive_desc_destroy(rpd);
	return st == dnnl_success ? 0 : -1;
}

/* Records a pass's kernel name and, for a JIT kernel, builds it.  oneDNN's
 * "ref:any" (naive loops) and "gemm:jit" (its own im2col + GEMM) kernels are
 * slower than our im2col path and are not used.  A bf16 plan also takes
 * "brgconv" (oneDNN's AMX and AVX512-BF16 block-GEMM convolution kernels,
 * JIT-compiled as well); a float32 plan keeps the kernels it always had. */
static void sd_pass_init(struct sd_dnnl_pass *p, const_dnnl_primitive_desc_t pd, int bf16)
{
	const char *impl = NULL;
	if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success ||
	    !impl)
		impl = "?";
	snprintf(p->impl, sizeof p->impl, "%s", impl);
	const dnnl_memory_desc_t *sp = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
	if (sp)
		p->scratch_md = *sp;
	int jit = !strncmp(impl, "jit", 3) || (bf16 && !strncmp(impl, "brg", 3));
	p->jit = jit && dnnl_primitive_create(&p->prim, pd) == dnnl_success;
}

static void sd_plan_free(struct sd_dnnl_plan *p)
{
	if (!p)
		return;
	dnnl_primitive_t all[] = { p->fwd.prim, p->fwd_ybf.prim, p->bwd_d.prim, p->bwd_w.prim,
		                   p->bwd_d16.prim, p->f_src.reorder, p->f_w.reorder, p->f_dst.reorder,
		                   p->d_dsrc.reorder,
		                   p->d_w.reorder, p->d_ddst.reorder, p->w_src.reorder,
		                   p->w_dw.reorder, p->w_ddst.reorder, p->bwd_ws.prim,
		                   p->ws_x.reorder, p->ws_dy.reorder, p->ws_dw.reorder };
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
		if (all[i])
			dnnl_primitive_destroy(all[i]);
	free(p);
}

static size_t sd_max(size_t a, size_t b)
{
	return a > b ? a : b;
}

/* oneDNN's tag for our activation layout with channel block blk. */
static dnnl_format_tag_t sd_act_tag(int blk)
{
	return blk == 16 ? dnnl_nChw16c : blk == 8 ? dnnl_nChw8c : dnnl_nchw;
}

enum sd_pass_kind { SD_PASS_FWD, SD_PASS_BWD_D, SD_PASS_BWD_W };

/* SPOTDECK_WINOGRAD=0 turns Winograd off (every pass direct); read once. */
static int sd_winograd_allowed(void)
{
	static int allowed = -1;
	if (allowed < 0) {
		const char *v = getenv("SPOTDECK_WINOGRAD");
		allowed = !(v && !strcmp(v, "0"));
	}
	return allowed;
}

/* Whether pass k of plan p asks oneDNN for its Winograd kernels (F(4x4,
 * 3x3), jit_wino_4x3 on AVX-512) instead of the direct ones: float32 only
 * (oneDNN has no bf16 Winograd), 3x3 filters at stride 1, channels in
 * whole 16-lane blocks.  The channel thresholds are measured, not derived:
 * ResNet-32 at batch 128 on 2 threads of a Xeon with AVX-512 (oneDNN
 * 2.6.3, ms per call, direct -> Winograd):
 *   16 channels at 32x32: forward 3.21 -> 4.51, backward-data 2.76 -> 4.78,
 *                         backward-weights 3.25 -> 2.23;
 *   32 channels at 16x16: 2.21 -> 2.01, 2.30 -> 1.81, 2.13 -> 1.51;
 *   64 channels at 8x8:   2.06 -> 1.35, 2.10 -> 1.35, 2.08 -> 1.36.
 * So the weight gradient takes Winograd from 16 channels, the forward and
 * the data gradient from 32 (their input and output transforms outweigh
 * the saved multiplications when the channel products are short).
 * Winograd's results differ from the direct ones by rounding only (its
 * transforms add a few ulp: see tests/engine/test-conv-paths). */
static int sd_use_winograd(const struct sd_dnnl_plan *p, enum sd_pass_kind k)
{
	const struct sd_conv2d_shape *s = &p->s;
	if (!sd_winograd_allowed() || p->key.bf16 || s->r != 3 || s->stride != 1 ||
	    s->c % 16 || s->k % 16)
		return 0;
	int min_c = k == SD_PASS_BWD_W ? 16 : 32;
	return s->c >= min_c && s->k >= min_c;
}

static dnnl_alg_kind_t sd_alg(int winograd)
{
	return winograd ? dnnl_convolution_winograd : dnnl_convolution_direct;
}

/* SPOTDECK_WGRAD_SWAP=0 turns the swapped weight gradient off; read once. */
static int sd_wgrad_swap_allowed(void)
{
	static int allowed = -1;
	if (allowed < 0) {
		const char *v = getenv("SPOTDECK_WGRAD_SWAP");
		allowed = !(v && !strcmp(v, "0"));
	}
	return allowed;
}

/* Whether plan p computes its bf16 weight gradient as a forward
 * convolution with batch and channels swapped:
 *     dw[k][c][r][s] = sum_{n,i,j} dy[n][k][i][j] x[n][c][i S + r - P][j S + s - P]
 * is the forward convolution of the input x^T (c "images" of n channels,
 * h x w) with the weights dy^T (k filters of n channels, oh x ow, dilated
 * by the stride S), padding P before and whatever makes the output r x r
 * after; its output is dw^T (c, k, r, r).  The reduction over n oh ow is
 * the same; only its order changes (float32 accumulation either way).
 * oneDNN 2.6.3's AMX backward-weights kernel is slow where the images are
 * small and the channels many, where its AMX forward kernel on the swapped
 * problem has 128 input channels (the batch) to reduce over.  Measured
 * here (Xeon with AMX, 2 threads, oneDNN 2.6.3, bf16 x and dy in NHWC, ms
 * per call, fastest of 15 to 41 alternated runs on a loaded machine, the
 * ranges over separate runs; the swapped time includes transposing x and
 * dy and writing dw to OIHW; tests/bench/bench-conv-bf16 repeats it):
 *   batch 128, 64 -> 64 channels at 8x8:         backward-weights 1.09-1.22, swapped 0.70-0.82
 *   batch 128, 32 -> 64 channels, 16x16 stride 2:                  0.69-1.00, swapped 0.50-0.70
 *   batch 128, 16 -> 16 at 32x32: 0.84 against 14 swapped;
 *   32 -> 32 at 16x16: 0.63-0.79 against 2.4;
 *   16 -> 32 at 32x32 stride 2: 0.78 against 2.1 (large images: the swapped kernel is oh x ow);
 *   batch 32, 64 -> 64 at 8x8: 0.28 against 0.21; batch 8: 0.084 against 0.100.
 * Single thread, batch 128: 64 -> 64 at 8x8 1.74 against 1.39; 32 -> 64
 * stride 2, 1.92 against 1.38.  Then on the quiet machine (other processes
 * 1 %, bench-conv-bf16, medians of 11): 64 -> 64 1.29 against 0.82, 32 ->
 * 64 stride 2 1.13 against 0.87, every other resnet32 shape 0.66-0.98
 * against 2.1-5.0.  Its AMX kernel is taken by name
 * ("jit:avx512_core_amx", oneDNN's first pick "brgconv" took 5 ms here);
 * without it the plan keeps its backward-weights pass.  No bias (the
 * swapped forward gives no bias gradient). */
static int sd_use_wgrad_swap(const struct sd_dnnl_plan *p)
{
	const struct sd_conv2d_shape *s = &p->s;
	return sd_wgrad_swap_allowed() && p->key.bf16 && !p->bias && s->r == 3 && s->pad == 1 &&
	       (s->stride == 1 || s->stride == 2) && s->n >= 32 && s->k >= 64 &&
	       s->oh * s->ow <= 64;
}

/* Builds plan p's swapped weight gradient (sd_use_wgrad_swap) from the
 * layouts its backward-weights pass reads x and dy in; w_p: our weights'
 * plain layout.  Sets p->wswap when it can run. */
static void sd_plan_wswap(struct sd_dnnl_plan *p, const dnnl_memory_desc_t *w_p)
{
	const struct sd_conv2d_shape *s = &p->s;
	p->wswap = 0;
	if (!sd_use_wgrad_swap(p))
		return;
	/* x^T, dy^T and dw^T as views of the buffers they are read from or
	 * written to: axes 0 and 1 swapped. */
	const int swap01[4] = { 1, 0, 2, 3 };
	dnnl_memory_desc_t x_t, dy_t, dw_t, src_any, w_any, dst_any;
	if (dnnl_memory_desc_permute_axes(&x_t, &p->w_src.md, swap01) != dnnl_success ||
	    dnnl_memory_desc_permute_axes(&dy_t, &p->w_ddst.md, swap01) != dnnl_success ||
	    dnnl_memory_desc_permute_axes(&dw_t, w_p, swap01) != dnnl_success)
		return;
	dnnl_dims_t src_d = { s->c, s->n, s->h, s->w }, w_d = { s->k, s->n, s->oh, s->ow };
	dnnl_dims_t dst_d = { s->c, s->k, s->r, s->r };
	dnnl_memory_desc_init_by_tag(&src_any, 4, src_d, dnnl_bf16, dnnl_format_tag_any);
	dnnl_memory_desc_init_by_tag(&w_any, 4, w_d, dnnl_bf16, dnnl_format_tag_any);
	dnnl_memory_desc_init_by_tag(&dst_any, 4, dst_d, dnnl_f32, dnnl_format_tag_any);
	/* Output r = h + P + pad_r - ((oh - 1) S + 1) + 1 (oneDNN's dilation
	 * counts the gaps: S - 1). */
	dnnl_dims_t one = { 1, 1 }, dil = { s->stride - 1, s->stride - 1 }, pad_l = { s->pad, s->pad };
	dnnl_dims_t pad_r = { s->r + (s->oh - 1) * s->stride - s->h - s->pad,
		              s->r + (s->ow - 1) * s->stride - s->w - s->pad };
	dnnl_convolution_desc_t d;
	dnnl_primitive_attr_t attr = sd_attr();
	dnnl_primitive_desc_iterator_t it = NULL;
	if (!attr)
		return;
	if (dnnl_dilated_convolution_forward_desc_init(&d, dnnl_forward_inference,
	                                               dnnl_convolution_direct, &src_any, &w_any,
	                                               NULL, &dst_any, one, dil, pad_l,
	                                               pad_r) != dnnl_success ||
	    dnnl_primitive_desc_iterator_create(&it, &d, attr, sd_dnnl_engine, NULL) !=
	            dnnl_success) {
		dnnl_primitive_attr_destroy(attr);
		return;
	}
	dnnl_primitive_attr_destroy(attr);
	do {
		dnnl_primitive_desc_t pd = dnnl_primitive_desc_iterator_fetch(it);
		const char *impl = NULL;
		if (!pd)
			break;
		if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) ==
		            dnnl_success &&
		    impl && !strncmp(impl, "jit:avx512_core_amx", 19)) {
			sd_pass_init(&p->bwd_ws, pd, 1);
			p->wswap = p->bwd_ws.jit &&
			           sd_arg_init(&p->ws_x, pd, dnnl_query_src_md, &x_t, 1) == 0 &&
			           sd_arg_init(&p->ws_dy, pd, dnnl_query_weights_md, &dy_t, 1) == 0 &&
			           sd_arg_init(&p->ws_dw, pd, dnnl_query_dst_md, &dw_t, 0) == 0;
			dnnl_primitive_desc_destroy(pd);
			break;
		}
		dnnl_primitive_desc_destroy(pd);
	} while (dnnl_primitive_desc_iterator_next(it) == dnnl_success);
	dnnl_primitive_desc_iterator_destroy(it);
}

static int sd_is_nhwc(const dnnl_memory_desc_t *md, dnnl_data_type_t t);

/* The bf16 forward of plan p writing y in bf16 NHWC (p->fwd_ybf), where
 * its float32 forward writes NHWC (oneDNN's AMX kernels): the same
 * convolution from the same converted x and w (their descriptors are
 * given, not picked again), only the output rounded to bf16 by the
 * kernel, half the bytes of y to write and for its reader (a batch-norm,
 * sd_batchnorm_act_forward_train_bf16's xbf) to read.  Not built where
 * the float32 output is in a blocked layout (the AVX512-BF16 kernels):
 * their reader takes float32 there. */
static void sd_plan_fwd_ybf(struct sd_dnnl_plan *p, const dnnl_memory_desc_t *bmd,
                            const dnnl_dim_t *strides, const dnnl_dim_t *pad)
{
	p->fwd_ybf.jit = 0;
	if (!p->key.bf16 || !sd_is_nhwc(&p->f_dst.md, dnnl_f32))
		return;
	const struct sd_conv2d_shape *s = &p->s;
	dnnl_dims_t dst_d = { s->n, s->k, s->oh, s->ow };
	dnnl_memory_desc_init_by_tag(&p->ybf_md, 4, dst_d, dnnl_bf16, dnnl_nhwc);
	dnnl_convolution_desc_t fd;
	dnnl_primitive_desc_t fpd = NULL;
	dnnl_primitive_attr_t attr = sd_attr();
	if (attr &&
	    dnnl_convolution_forward_desc_init(&fd, dnnl_forward_training, dnnl_convolution_direct,
	                                       &p->f_src.md, &p->f_w.md, bmd, &p->ybf_md, strides,
	                                       pad, pad) == dnnl_success &&
	    dnnl_primitive_desc_create(&fpd, &fd, attr, sd_dnnl_engine, NULL) == dnnl_success) {
		sd_pass_init(&p->fwd_ybf, fpd, 1);
		const dnnl_memory_desc_t *src = dnnl_primitive_desc_query_md(fpd, dnnl_query_src_md, 0);
		const dnnl_memory_desc_t *w = dnnl_primitive_desc_query_md(fpd, dnnl_query_weights_md, 0);
		const dnnl_memory_desc_t *dst = dnnl_primitive_desc_query_md(fpd, dnnl_query_dst_md, 0);
		if (p->fwd_ybf.jit && !(src && dnnl_memory_desc_equal(src, &p->f_src.md) && w &&
		                        dnnl_memory_desc_equal(w, &p->f_w.md) && dst &&
		                        sd_is_nhwc(dst, dnnl_bf16))) {
			dnnl_primitive_destroy(p->fwd_ybf.prim);
			p->fwd_ybf.prim = NULL;
			p->fwd_ybf.jit = 0;
		}
		dnnl_primitive_desc_destroy(fpd);
	}
	if (attr)
		dnnl_primitive_attr_destroy(attr);
}

/* Lays out the workspace of plan p's forward and backward calls (offsets
 * in floats; w_p: our weights' plain layout) from its passes' arguments. */
static void sd_plan_layout(struct sd_dnnl_plan *p, const dnnl_memory_desc_t *w_p)
{
	const struct sd_conv2d_shape *s = &p->s;
	/* Forward call: blocked x, w, y; the convolution's scratchpad; the
	 * largest reorder scratchpad.  The leading SD_DNNL_ALIGN floats let
	 * the caller's workspace be aligned. */
	size_t top = 0, rs;
	p->f_src.off = p->f_src.is_plain ? 0 : sd_take(&top, sd_floats_of(&p->f_src.md));
	p->f_w.off = p->f_w.is_plain ? 0 : sd_take(&top, sd_floats_of(&p->f_w.md));
	p->f_dst.off = p->f_dst.is_plain ? 0 : sd_take(&top, sd_floats_of(&p->f_dst.md));
	p->fwd.scratch_off = sd_take(&top, sd_max(sd_floats_of(&p->fwd.scratch_md),
	                                          sd_floats_of(&p->fwd_ybf.scratch_md)));
	p->fwd_ybf.scratch_off = p->fwd.scratch_off;
	rs = sd_max(sd_max(p->f_src.scratch, p->f_w.scratch), p->f_dst.scratch);
	p->f_rs_off = sd_take(&top, rs);
	p->fwd_floats = top + SD_DNNL_ALIGN;

	/* Backward call: blocked dy (one copy when both passes share its
	 * layout), x, dw, db; then, when dx is asked for, blocked w and dx. */
	top = 0;
	p->w_ddst.off = p->w_ddst.is_plain ? 0 : sd_take(&top, sd_floats_of(&p->w_ddst.md));
	p->w_src.off = p->w_src.is_plain ? 0 : sd_take(&top, sd_floats_of(&p->w_src.md));
	p->w_dw.off = sd_take(&top, sd_floats_of(&p->w_dw.md));
	p->dw_plain_off = p->w_dw.is_plain ? p->w_dw.off : sd_take(&top, sd_floats_of(w_p));
	p->db_off = sd_take(&top, (size_t)s->k);
	p->bwd_w.scratch_off = sd_take(&top, sd_floats_of(&p->bwd_w.scratch_md));
	rs = sd_max(sd_max(p->w_src.scratch, p->w_dw.scratch), p->w_ddst.scratch);
	if (p->bwd_d.jit) {
		p->d_ddst.off = p->ddst_shared ? p->w_ddst.off
		                : p->d_ddst.is_plain ? 0 : sd_take(&top, sd_floats_of(&p->d_ddst.md));
		p->d_w.off = p->d_w.is_plain ? 0 : sd_take(&top, sd_floats_of(&p->d_w.md));
		p->d_dsrc.off = p->d_dsrc.is_plain ? 0 : sd_take(&top, sd_floats_of(&p->d_dsrc.md));
		p->bwd_d.scratch_off = sd_take(&top, sd_floats_of(&p->bwd_d.scratch_md));
		rs = sd_max(rs, sd_max(sd_max(p->d_dsrc.scratch, p->d_w.scratch), p->d_ddst.scratch));
		if (p->bwd_d16.jit)
			p->bwd_d16.scratch_off = sd_take(&top, sd_floats_of(&p->bwd_d16.scratch_md));
	}
	if (p->wswap) {
		p->ws_x.off = p->ws_x.is_plain ? 0 : sd_take(&top, sd_floats_of(&p->ws_x.md));
		p->ws_dy.off = p->ws_dy.is_plain ? 0 : sd_take(&top, sd_floats_of(&p->ws_dy.md));
		p->ws_dw.off = p->ws_dw.is_plain ? 0 : sd_take(&top, sd_floats_of(&p->ws_dw.md));
		p->bwd_ws.scratch_off = sd_take(&top, sd_floats_of(&p->bwd_ws.scratch_md));
		rs = sd_max(rs, sd_max(sd_max(p->ws_x.scratch, p->ws_dy.scratch), p->ws_dw.scratch));
	}
	p->b_rs_off = sd_take(&top, rs);
	p->bwd_floats = top + SD_DNNL_ALIGN;
}

/* A bf16 plan whose backward-data kernels write dx float32 NHWC (or, with
 * 16 channels, nChw16c: the same bytes) also gets
 * the same pass writing dx bf16 NHWC (bd's algorithm, bwd_d's weights and
 * dy layouts), for a caller whose only reader of dx reads bf16 (struct
 * sd_conv2d_keep's dx_bf16_ok), as PyTorch's autocast keeps that gradient
 * in bf16.  oneDNN's kernels accumulate in float32 and round once, so dx
 * is the float32 pass's dx rounded to bf16 (round to nearest even).  Left
 * unset (bwd_d16.jit 0) where oneDNN offers no JIT kernel for it. */
static void sd_plan_dx_bf16(struct sd_dnnl_plan *p, const dnnl_convolution_desc_t *bd,
                            const_dnnl_primitive_desc_t fpd, const_dnnl_primitive_attr_t attr)
{
	snprintf(p->bwd_d16.impl, sizeof p->bwd_d16.impl, "none");
	dnnl_memory_desc_t dsrc16, dsrc32;
	if (!p->key.bf16 || !p->bwd_d.jit ||
	    dnnl_memory_desc_init_by_tag(&dsrc16, 4, p->d_dsrc.md.dims, dnnl_bf16, dnnl_nhwc) !=
	            dnnl_success ||
	    dnnl_memory_desc_init_by_tag(&dsrc32, 4, p->d_dsrc.md.dims, dnnl_f32, dnnl_nhwc) !=
	            dnnl_success ||
	    !(sd_is_nhwc(&p->d_dsrc.md, dnnl_f32) || sd_same_bytes(&p->d_dsrc.md, &dsrc32)))
		return;
	dnnl_convolution_desc_t d16;
	dnnl_primitive_desc_t pd = NULL;
	if (dnnl_convolution_backward_data_desc_init(&d16, bd->alg_kind, &dsrc16, &p->d_w.md,
	                                             &p->d_ddst.md, bd->strides, bd->padding[0],
	                                             bd->padding[1]) != dnnl_success ||
	    dnnl_primitive_desc_create(&pd, &d16, attr, sd_dnnl_engine, fpd) != dnnl_success)
		return;
	const dnnl_memory_desc_t *got = dnnl_primitive_desc_query_md(pd, dnnl_query_diff_src_md, 0);
	if (got && sd_is_nhwc(got, dnnl_bf16)) {
		p->d_dsrc16 = *got;
		sd_pass_init(&p->bwd_d16, pd, 1);
	}
	dnnl_primitive_desc_destroy(pd);
}

/* Builds the primitives of p->s and lays out the workspace of each call;
 * p->ok says whether the forward and weight-gradient passes can run. */
static void sd_plan_build(struct sd_dnnl_plan *p)
{
	const struct sd_conv2d_shape *s = &p->s;
	dnnl_dims_t src_d = { s->n, s->c, s->h, s->w }, w_d = { s->k, s->c, s->r, s->r };
	dnnl_dims_t dst_d = { s->n, s->k, s->oh, s->ow }, b_d = { s->k };
	/* oneDNN checks oh = (h + pad_l + pad_r - r) / stride + 1 with the same
	 * integer division as sd_conv2d_shape_init, so symmetric padding
	 * always agrees with our output size. */
	dnnl_dims_t strides = { s->stride, s->stride }, pad = { s->pad, s->pad };
	/* src_p, w_p, dst_p: our buffers' layouts; *_any: what the kernels are
	 * asked to take (their pick, or ours when the plan is native).  A bf16
	 * plan asks for bf16 inputs (x, w, dy) and float32 outputs (y, dx, dw)
	 * in layouts of oneDNN's choosing: our float32 buffers are converted
	 * anyway, and its bf16 kernels want their own layouts (native or not;
	 * the outputs are reordered where their pick is not ours).  In float32
	 * the input and output descriptors are the same ones. */
	const int bf16 = p->key.bf16, native = p->key.native && !bf16;
	const dnnl_data_type_t in_t = bf16 ? dnnl_bf16 : dnnl_f32;
	dnnl_memory_desc_t src_any, w_any, dst_any, src_p, w_p, dst_p, dsrc_any, dw_any, ddst_any;
	dnnl_memory_desc_init_by_tag(&src_p, 4, src_d, dnnl_f32, sd_act_tag(p->key.xblk));
	dnnl_memory_desc_init_by_tag(&w_p, 4, w_d, dnnl_f32, dnnl_oihw);
	dnnl_memory_desc_init_by_tag(&dst_p, 4, dst_d, dnnl_f32, sd_act_tag(p->key.yblk));
	dnnl_memory_desc_init_by_tag(&src_any, 4, src_d, in_t,
	                             native ? sd_act_tag(p->key.xblk) : dnnl_format_tag_any);
	dnnl_memory_desc_init_by_tag(&w_any, 4, w_d, in_t, dnnl_format_tag_any);
	dnnl_memory_desc_init_by_tag(&dst_any, 4, dst_d, dnnl_f32,
	                             native ? sd_act_tag(p->key.yblk) : dnnl_format_tag_any);
	dnnl_memory_desc_init_by_tag(&dsrc_any, 4, src_d, dnnl_f32,
	                             native ? sd_act_tag(p->key.xblk) : dnnl_format_tag_any);
	dnnl_memory_desc_init_by_tag(&dw_any, 4, w_d, dnnl_f32, dnnl_format_tag_any);
	dnnl_memory_desc_init_by_tag(&ddst_any, 4, dst_d, in_t,
	                             native ? sd_act_tag(p->key.yblk) : dnnl_format_tag_any);
	dnnl_memory_desc_init_by_tag(&p->bias_md, 1, b_d, dnnl_f32, dnnl_a);
	const dnnl_memory_desc_t *bmd = p->bias ? &p->bias_md : NULL;

	dnnl_convolution_desc_t fd, bd, wd;
	dnnl_primitive_desc_t fpd = NULL, bpd = NULL, wpd = NULL;
	dnnl_primitive_attr_t attr = sd_attr();
	p->ok = 0;
	snprintf(p->fwd.impl, sizeof p->fwd.impl, "none");
	snprintf(p->bwd_d.impl, sizeof p->bwd_d.impl, "none");
	snprintf(p->bwd_w.impl, sizeof p->bwd_w.impl, "none");
	if (!attr)
		return;
	/* Each pass tries Winograd where sd_use_winograd says so and falls back
	 * to the direct kernels when oneDNN has no Winograd kernel for it. */
	for (int wino = sd_use_winograd(p, SD_PASS_FWD); !fpd && wino >= 0; wino--)
		if (dnnl_convolution_forward_desc_init(&fd, dnnl_forward_training, sd_alg(wino),
		                                       &src_any, &w_any, bmd, &dst_any, strides,
		                                       pad, pad) != dnnl_success ||
		    dnnl_primitive_desc_create(&fpd, &fd, attr, sd_dnnl_engine, NULL) != dnnl_success)
			fpd = NULL;
	if (!fpd)
		goto out;
	sd_pass_init(&p->fwd, fpd, bf16);
	for (int wino = sd_use_winograd(p, SD_PASS_BWD_W); !wpd && wino >= 0; wino--)
		if (dnnl_convolution_backward_weights_desc_init(&wd, sd_alg(wino), &src_any, &dw_any,
		                                                bmd, &ddst_any, strides, pad,
		                                                pad) != dnnl_success ||
		    dnnl_primitive_desc_create(&wpd, &wd, attr, sd_dnnl_engine, fpd) != dnnl_success)
			wpd = NULL;
	if (!wpd)
		goto out;
	sd_pass_init(&p->bwd_w, wpd, bf16);
	for (int wino = sd_use_winograd(p, SD_PASS_BWD_D); !bpd && wino >= 0; wino--)
		if (dnnl_convolution_backward_data_desc_init(&bd, sd_alg(wino), &dsrc_any, &w_any,
		                                             &ddst_any, strides, pad,
		                                             pad) != dnnl_success ||
		    dnnl_primitive_desc_create(&bpd, &bd, attr, sd_dnnl_engine, fpd) != dnnl_success)
			bpd = NULL;
	if (bpd)
		sd_pass_init(&p->bwd_d, bpd, bf16);
	if (!p->fwd.jit || !p->bwd_w.jit)
		goto out;

	if (sd_arg_init(&p->f_src, fpd, dnnl_query_src_md, &src_p, 1) < 0 ||
	    sd_arg_init(&p->f_w, fpd, dnnl_query_weights_md, &w_p, 1) < 0 ||
	    sd_arg_init(&p->f_dst, fpd, dnnl_query_dst_md, &dst_p, 0) < 0 ||
	    sd_arg_init(&p->w_src, wpd, dnnl_query_src_md, &src_p, 1) < 0 ||
	    sd_arg_init(&p->w_dw, wpd, dnnl_query_diff_weights_md, &w_p, 0) < 0 ||
	    sd_arg_init(&p->w_ddst, wpd, dnnl_query_diff_dst_md, &dst_p, 1) < 0)
		goto out;
	if (p->bwd_d.jit &&
	    (sd_arg_init(&p->d_dsrc, bpd, dnnl_query_diff_src_md, &src_p, 0) < 0 ||
	     sd_arg_init(&p->d_w, bpd, dnnl_query_weights_md, &w_p, 1) < 0 ||
	     sd_arg_init(&p->d_ddst, bpd, dnnl_query_diff_dst_md, &dst_p, 1) < 0))
		p->bwd_d.jit = 0;
	p->ddst_shared = p->bwd_d.jit && dnnl_memory_desc_equal(&p->d_ddst.md, &p->w_ddst.md);
	sd_plan_dx_bf16(p, &bd, fpd, attr);
	sd_plan_wswap(p, &w_p);
	sd_plan_fwd_ybf(p, bmd, strides, pad);

	sd_plan_layout(p, &w_p);
	p->ok = 1;
out:
	dnnl_primitive_attr_destroy(attr);
	if (fpd)
		dnnl_primitive_desc_destroy(fpd);
	if (bpd)
		dnnl_primitive_desc_destroy(bpd);
	if (wpd)
		dnnl_primitive_desc_destroy(wpd);
}

static int sd_plan_matches(const struct sd_dnnl_plan *p, const struct sd_dnnl_key *k)
{
	const struct sd_conv2d_shape *q = &p->key.s, *s = &k->s;
	return q->n == s->n && q->c == s->c && q->h == s->h && q->w == s->w && q->k == s->k &&
	       q->r == s->r && q->stride == s->stride && q->pad == s->pad &&
	       p->key.bias == k->bias && p->key.threads == k->threads && p->key.xblk == k->xblk &&
	       p->key.yblk == k->yblk && p->key.native == k->native && p->key.bf16 == k->bf16;
}

/* The plan for shape s, the layouts (xblk, yblk, native) and the precision
 * (bf16; see struct sd_dnnl_key) at the current OpenMP thread count, built
 * on first use; NULL without a CPU engine.  Release it with sd_plan_put. */
static struct sd_dnnl_plan *sd_plan_get_key(const struct sd_conv2d_shape *s, int bias, int xblk,
                                            int yblk, int native, int bf16)
{
	pthread_once(&sd_dnnl_once, sd_dnnl_init);
	if (!sd_dnnl_engine)
		return NULL;
	struct sd_dnnl_key key = { .s = *s, .bias = bias, .threads = omp_get_max_threads(),
		                   .xblk = xblk, .yblk = yblk, .native = native, .bf16 = bf16 };
	pthread_mutex_lock(&sd_dnnl_lock);
	for (int i = 0; i < SD_DNNL_PLANS_MAX; i++) {
		struct sd_dnnl_plan *p = sd_dnnl_plans[i];
		if (p && sd_plan_matches(p, &key)) {
			p->refs++;
			p->used = ++sd_dnnl_clock;
			pthread_mutex_unlock(&sd_dnnl_lock);
			return p;
		}
	}
	pthread_mutex_unlock(&sd_dnnl_lock);

	/* Built outside the lock: JIT compilation takes milliseconds. */
	struct sd_dnnl_plan *p = sd_calloc(1, sizeof *p);
	p->key = key;
	p->s = *s;
	p->bias = bias;
	p->serial = __atomic_add_fetch(&sd_dnnl_serial, 1, __ATOMIC_RELAXED);
	sd_plan_build(p);

	pthread_mutex_lock(&sd_dnnl_lock);
	int slot = -1;
	for (int i = 0; i < SD_DNNL_PLANS_MAX; i++) {
		struct sd_dnnl_plan *q = sd_dnnl_plans[i];
		if (q && sd_plan_matches(q, &key)) {
			/* Another thread built the same plan meanwhile. */
			q->refs++;
			q->used = ++sd_dnnl_clock;
			pthread_mutex_unlock(&sd_dnnl_lock);
			sd_plan_free(p);
			return q;
		}
	}
	/* An empty slot, else the least recently used plan not in use. */
	for (int i = 0; i < SD_DNNL_PLANS_MAX && slot < 0; i++)
		if (!sd_dnnl_plans[i])
			slot = i;
	for (int i = 0; i < SD_DNNL_PLANS_MAX && !(slot >= 0 && !sd_dnnl_plans[slot]); i++) {
		struct sd_dnnl_plan *q = sd_dnnl_plans[i];
		if (q->refs == 0 && (slot < 0 || q->used < sd_dnnl_plans[slot]->used))
			slot = i;
	}
	if (slot >= 0) {
		struct sd_dnnl_plan *old = sd_dnnl_plans[slot];
		sd_dnnl_plans[slot] = p;
		p->cached = 1;
		if (old)
			sd_plan_free(old);
	}
	p->refs = 1;
	p->used = ++sd_dnnl_clock;
	pthread_mutex_unlock(&sd_dnnl_lock);
	return p;
}

static void sd_plan_put(struct sd_dnnl_plan *p);

/* 1 when calls now run bf16 plans: asked for, and oneDNN has bf16 kernels
 * here (elsewhere they would be its reference loops, and the call runs as
 * in float32 instead). */
static int sd_bf16_now(void)
{
	return sd_conv2d_get_precision() == SD_CONV_BF16 && sd_conv2d_dnnl_bf16_available();
}

/* The plan of the NCHW API in the current precision: oneDNN picks the
 * layouts, we reorder. */
static struct sd_dnnl_plan *sd_plan_get(const struct sd_conv2d_shape *s, int bias)
{
	return sd_plan_get_key(s, bias, 1, 1, 0, sd_bf16_now());
}

int sd_conv2d_dnnl_bf16_available(void)
{
	pthread_once(&sd_dnnl_once, sd_dnnl_init);
	if (!sd_dnnl_engine)
		return 0;
	/* ISA values are bit sets, each including the ones below it; amx
	 * includes avx512_core_bf16. */
	unsigned isa = (unsigned)dnnl_get_effective_cpu_isa();
	return (isa & (unsigned)dnnl_cpu_isa_avx512_core_bf16) ==
	       (unsigned)dnnl_cpu_isa_avx512_core_bf16;
}

const char *sd_conv2d_dnnl_bf16_isa(void)
{
	if (!sd_conv2d_dnnl_bf16_available())
		return NULL;
	unsigned isa = (unsigned)dnnl_get_effective_cpu_isa();
	return (isa & (unsigned)dnnl_cpu_isa_avx512_core_amx) ==
	       (unsigned)dnnl_cpu_isa_avx512_core_amx ? "AMX" : "AVX512-BF16";
}

/* Workspace floats of the usable plans of (s, bias, layouts) in both
 * precisions: a model sizes its workspace once, and its precision may be
 * set after that. */
static size_t sd_plans_floats(const struct sd_conv2d_shape *s, int bias, int xblk, int yblk,
                              int native)
{
	size_t f = 0;
	for (int bf16 = 0; bf16 <= sd_conv2d_dnnl_bf16_available(); bf16++) {
		struct sd_dnnl_plan *p = sd_plan_get_key(s, bias, xblk, yblk, native, bf16);
		if (!p)
			continue;
		if (p->ok)
			f = sd_max(f, sd_max(p->fwd_floats, p->bwd_floats));
		sd_plan_put(p);
	}
	return f;
}

static void sd_plan_put(struct sd_dnnl_plan *p)
{
	pthread_mutex_lock(&sd_dnnl_lock);
	int drop = --p->refs == 0 && !p->cached;
	pthread_mutex_unlock(&sd_dnnl_lock);
	if (drop)
		sd_plan_free(p);
}

static struct sd_dnnl_plan *sd_plan_usable(struct sd_dnnl_plan *p, int need_dx);

int sd_conv2d_dnnl_supported(const struct sd_conv2d_shape *s, int bias)
{
	struct sd_dnnl_plan *p = sd_plan_usable(sd_plan_get(s, bias), 0);
	if (!p)
		return 0;
	sd_plan_put(p);
	return 1;
}

size_t sd_conv2d_dnnl_workspace_floats(const struct sd_conv2d_shape *s, int bias)
{
	return sd_plans_floats(s, bias, 1, 1, 0);
}

void sd_conv2d_dnnl_describe(const struct sd_conv2d_shape *s, int bias, char *buf, size_t len)
{
	struct sd_dnnl_plan *p = sd_plan_usable(sd_plan_get(s, bias), 0);
	if (!p)
		p = sd_plan_get(s, bias);   /* unusable: its kernel names say why */
	if (!p) {
		snprintf(buf, len, "no oneDNN CPU engine");
		return;
	}
	snprintf(buf, len, "%s / %s / %s%s", p->fwd.impl, p->bwd_d.impl,
	         p->wswap ? "forward x^T * dy^T " : "", p->wswap ? p->bwd_ws.impl : p->bwd_w.impl);
	sd_plan_put(p);
}

/* ---------------------------------------------------------------- calls */

/* Copies between a plain buffer and its blocked copy with a's reorder. */
static void sd_reorder(struct sd_dnnl_call *c, const struct sd_dnnl_arg *a, const void *from,
                       const dnnl_memory_desc_t *from_md, void *to,
                       const dnnl_memory_desc_t *to_md, float *scratch)
{
	dnnl_exec_arg_t args[3] = {
		{ DNNL_ARG_FROM, sd_dnnl_mem(c, from_md, from) },
		{ DNNL_ARG_TO, sd_dnnl_mem(c, to_md, to) },
	};
	int n = 2;
	if (a->scratch) {
		dnnl_memory_desc_t md;
		dnnl_dims_t d = { (dnnl_dim_t)(a->scratch * sizeof(float)) };
		dnnl_memory_desc_init_by_tag(&md, 1, d, dnnl_u8, dnnl_a);
		args[n++] = (dnnl_exec_arg_t){ DNNL_ARG_SCRATCHPAD, sd_dnnl_mem(c, &md, scratch) };
	}
	sd_dnnl_exec(c, a->reorder, n, args);
}

/* The blocked copy of input argument a (reordered from the plain buffer),
 * or the plain buffer itself when a is plain. */
static void *sd_in(struct sd_dnnl_call *c, const struct sd_dnnl_arg *a, const void *plain,
                   float *base, float *scratch)
{
	if (a->is_plain)
		return (void *)(uintptr_t)plain;
	float *blk = base + a->off;
	sd_reorder(c, a, plain, &a->plain, blk, &a->md, scratch);
	return blk;
}

/* sd_dnnl_call_begin and _end on this file's engine, counting failures
 * for sd_conv2d_dnnl_failures. */
static int sd_call_begin(struct sd_dnnl_call *c)
{
	if (sd_dnnl_call_begin(c, sd_dnnl_engine) == 0)
		return 0;
	__atomic_add_fetch(&sd_dnnl_failed_calls, 1, __ATOMIC_RELAXED);
	return -1;
}

static int sd_call_end(struct sd_dnnl_call *c)
{
	if (sd_dnnl_call_end(c) == 0)
		return 0;
	__atomic_add_fetch(&sd_dnnl_failed_calls, 1, __ATOMIC_RELAXED);
	return -1;
}

unsigned long sd_conv2d_dnnl_failures(void)
{
	return __atomic_load_n(&sd_dnnl_failed_calls, __ATOMIC_RELAXED);
}

/* 1 when md is a bf16 (n, c, h, w) tensor laid out NHWC. */
static int sd_is_nhwc_bf16(const dnnl_memory_desc_t *md)
{
	return sd_is_nhwc(md, dnnl_bf16);
}

/* 1 when md is a (n, c, h, w) tensor of type t laid out NHWC. */
static int sd_is_nhwc(const dnnl_memory_desc_t *md, dnnl_data_type_t t)
{
	if (md->ndims != 4 || md->data_type != t || md->format_kind != dnnl_blocked ||
	    md->offset0 != 0 || md->format_desc.blocking.inner_nblks != 0)
		return 0;
	const dnnl_dim_t c = md->dims[1], h = md->dims[2], w = md->dims[3];
	const dnnl_dim_t nhwc[4] = { h * w * c, 1, w * c, c };
	for (int i = 0; i < 4; i++)
		if (md->padded_dims[i] != md->dims[i] || md->format_desc.blocking.strides[i] != nhwc[i])
			return 0;
	return 1;
}

/* keep's buffer, grown to at least `bytes` (its contents are then lost),
 * 64-byte aligned as the workspace's copies are (SD_DNNL_ALIGN). */
static void *sd_keep_grow(struct sd_conv2d_keep *keep, size_t bytes)
{
	if (keep->bytes < bytes) {
		free(keep->buf);
		keep->buf = sd_malloc_big(bytes, SD_DNNL_ALIGN * sizeof(float));
		keep->bytes = bytes;
	}
	return keep->buf;
}

/* The buffer of keep that the forward of plan p converts x into (grown to
 * fit), or NULL to convert into the workspace: only a bf16 plan whose
 * weight-gradient pass reads x converted to the same layout keeps it. */
static void *sd_keep_buffer(const struct sd_dnnl_plan *p, struct sd_conv2d_keep *keep)
{
	if (!keep || !p->key.bf16 || p->f_src.is_plain || p->w_src.is_plain ||
	    !dnnl_memory_desc_equal(&p->f_src.md, &p->w_src.md))
		return NULL;
	return sd_keep_grow(keep, dnnl_memory_desc_get_size(&p->f_src.md));
}

/* Runs the forward pass of plan p (usable) and releases it; x converted into
 * keep when it can be (sd_keep_buffer). */
static int sd_run_forward(struct sd_dnnl_plan *p, float *y, const float *x, const float *w,
                          const float *b, float *ws, struct sd_conv2d_keep *keep)
{
	/* x written only in bf16 by its producer: read as it is, else refused
	 * before anything grows keep's buffer (the caller widens it back to
	 * float32 and runs im2col). */
	const int x_filled = keep && keep->filled && keep->x == x && keep->plan == p->serial &&
	                     sd_keep_buffer(p, keep);
	struct sd_dnnl_call c;
	if ((keep && keep->x_bf16_only && !x_filled) || sd_call_begin(&c) < 0) {
		sd_plan_put(p);
		return -1;
	}
	void *kept = sd_keep_buffer(p, keep), *xs;
	float *base = sd_aligned(ws), *rs = base + p->f_rs_off;
	if (x_filled) {
		xs = kept;   /* x's producer wrote it (sd_conv2d_keep_prepare) */
	} else if (kept) {
		xs = kept;
		sd_reorder(&c, &p->f_src, x, &p->f_src.plain, kept, &p->f_src.md, rs);
	} else {
		xs = sd_in(&c, &p->f_src, x, base, rs);
	}
	void *wb = sd_in(&c, &p->f_w, w, base, rs);
	/* y left in the kernels' float32 NHWC where the caller reads that
	 * (keep->y_nhwc_ok: a batch-norm taking x in NHWC), not reordered;
	 * written in bf16 NHWC instead where the caller reads that too
	 * (keep->y_bf16_ok) and the kernels offer it (fwd_ybf). */
	const int y_bf16 = keep && keep->y_nhwc_ok && keep->y_bf16_ok && p->fwd_ybf.jit;
	const int y_nhwc = y_bf16 || (keep && keep->y_nhwc_ok && p->key.bf16 &&
	                              !p->f_dst.is_plain && sd_is_nhwc(&p->f_dst.md, dnnl_f32));
	const struct sd_dnnl_pass *fp = y_bf16 ? &p->fwd_ybf : &p->fwd;
	void *yd = p->f_dst.is_plain || y_nhwc ? (void *)y : base + p->f_dst.off;
	dnnl_exec_arg_t args[5] = {
		{ DNNL_ARG_SRC, sd_dnnl_mem(&c, &p->f_src.md, xs) },
		{ DNNL_ARG_WEIGHTS, sd_dnnl_mem(&c, &p->f_w.md, wb) },
		{ DNNL_ARG_DST, sd_dnnl_mem(&c, y_bf16 ? &p->ybf_md : &p->f_dst.md, yd) },
		{ DNNL_ARG_SCRATCHPAD, sd_dnnl_mem(&c, &fp->scratch_md, base + fp->scratch_off) },
	};
	int n = 4;
	if (b)
		args[n++] = (dnnl_exec_arg_t){ DNNL_ARG_BIAS, sd_dnnl_mem(&c, &p->bias_md, b) };
	sd_dnnl_exec(&c, fp->prim, n, args);
	if (!p->f_dst.is_plain && !y_nhwc)
		sd_reorder(&c, &p->f_dst, yd, &p->f_dst.md, y, &p->f_dst.plain, rs);
	int rc = sd_call_end(&c);
	if (keep) {
		keep->y_nhwc = y_nhwc;
		keep->y_bf16 = y_bf16;
		keep->x = x;
		keep->plan = p->serial;
		keep->valid = kept && rc == 0;
		keep->filled = 0;
	}
	sd_plan_put(p);
	return rc;
}

/* Runs the backward passes of plan p (usable, with a JIT backward-data
 * kernel when dx is asked for) and releases it; x read from keep when the
 * forward just before filled it with this plan from the same x. */
static int sd_run_backward(struct sd_dnnl_plan *p, float *dx, float *dw, float *db,
                           const float *dy, const float *x, const float *w, float *ws,
                           struct sd_conv2d_keep *keep, const struct sd_conv2d_keep *keep_dy)
{
	const struct sd_conv2d_shape *s = &p->s;
	/* dy written only in bf16 by its producer (sd_conv2d_keep_prepare_dy):
	 * read as it is where both passes take that layout, else refused (the
	 * caller converts it back to float32 and runs im2col). */
	const int dy_only_bf16 = keep_dy && keep_dy->filled && keep_dy->x == dy;
	const int dy_kept = dy_only_bf16 && p->key.bf16 && sd_is_nhwc_bf16(&p->w_ddst.md) &&
	                    (!dx || p->ddst_shared);
	const int x_kept = keep && keep->valid && keep->x == x && keep->plan == p->serial;
	if ((dy_only_bf16 && !dy_kept) || (keep && keep->x_bf16_only && !x_kept)) {
		sd_plan_put(p);
		return -1;
	}
	struct sd_dnnl_call c;
	if (sd_call_begin(&c) < 0) {
		sd_plan_put(p);
		return -1;
	}
	float *base = sd_aligned(ws), *rs = base + p->b_rs_off;
	int dx_nhwc = 0;
	/* Weight (and bias) gradient into the workspace; added onto dw and db
	 * at the end, once every call has succeeded. */
	void *dyw = dy_kept ? keep_dy->buf : sd_in(&c, &p->w_ddst, dy, base, rs);
	void *xs = x_kept ? keep->buf : sd_in(&c, &p->w_src, x, base, rs);
	float *dwb = base + p->w_dw.off, *dwp = base + p->dw_plain_off, *dbb = base + p->db_off;
	if (p->wswap) {
		/* dw^T = x^T (*) dy^T, written to OIHW (sd_use_wgrad_swap). */
		void *xt = sd_in(&c, &p->ws_x, xs, base, rs), *dyt = sd_in(&c, &p->ws_dy, dyw, base, rs);
		void *dwt = p->ws_dw.is_plain ? (void *)dwp : base + p->ws_dw.off;
		dnnl_exec_arg_t sargs[4] = {
			{ DNNL_ARG_SRC, sd_dnnl_mem(&c, &p->ws_x.md, xt) },
			{ DNNL_ARG_WEIGHTS, sd_dnnl_mem(&c, &p->ws_dy.md, dyt) },
			{ DNNL_ARG_DST, sd_dnnl_mem(&c, &p->ws_dw.md, dwt) },
			{ DNNL_ARG_SCRATCHPAD,
			  sd_dnnl_mem(&c, &p->bwd_ws.scratch_md, base + p->bwd_ws.scratch_off) },
		};
		sd_dnnl_exec(&c, p->bwd_ws.prim, 4, sargs);
		if (!p->ws_dw.is_plain)
			sd_reorder(&c, &p->ws_dw, dwt, &p->ws_dw.md, dwp, &p->ws_dw.plain, rs);
	} else {
		dnnl_exec_arg_t args[5] = {
			{ DNNL_ARG_SRC, sd_dnnl_mem(&c, &p->w_src.md, xs) },
			{ DNNL_ARG_DIFF_DST, sd_dnnl_mem(&c, &p->w_ddst.md, dyw) },
			{ DNNL_ARG_DIFF_WEIGHTS, sd_dnnl_mem(&c, &p->w_dw.md, dwb) },
			{ DNNL_ARG_SCRATCHPAD, sd_dnnl_mem(&c, &p->bwd_w.scratch_md, base + p->bwd_w.scratch_off) },
		};
		int n = 4;
		if (db)
			args[n++] = (dnnl_exec_arg_t){ DNNL_ARG_DIFF_BIAS, sd_dnnl_mem(&c, &p->bias_md, dbb) };
		sd_dnnl_exec(&c, p->bwd_w.prim, n, args);
		if (!p->w_dw.is_plain)
			sd_reorder(&c, &p->w_dw, dwb, &p->w_dw.md, dwp, &p->w_dw.plain, rs);
	}

	if (dx) {
		void *dyd = p->ddst_shared || dy_kept ? dyw : sd_in(&c, &p->d_ddst, dy, base, rs);
		void *wb = sd_in(&c, &p->d_w, w, base, rs);
		/* dx left in the kernels' float32 NHWC where the caller reads
		 * that (keep->dx_nhwc_ok: a batch-norm taking dy in NHWC). */
		dx_nhwc = keep && keep->dx_nhwc_ok && p->key.bf16 && !p->d_dsrc.is_plain &&
		          sd_is_nhwc(&p->d_dsrc.md, dnnl_f32);
		/* ... or in bf16 NHWC, in dx's first bytes, where its only
		 * reader reads that (keep->dx_bf16_ok, sd_plan_dx_bf16). */
		if (keep && keep->dx_nhwc_ok && keep->dx_bf16_ok && p->bwd_d16.jit)
			dx_nhwc = SD_DX_NHWC_BF16;
		const struct sd_dnnl_pass *bp = dx_nhwc == SD_DX_NHWC_BF16 ? &p->bwd_d16 : &p->bwd_d;
		const dnnl_memory_desc_t *dmd = dx_nhwc == SD_DX_NHWC_BF16 ? &p->d_dsrc16
		                                                            : &p->d_dsrc.md;
		void *dxd = p->d_dsrc.is_plain || dx_nhwc ? (void *)dx : base + p->d_dsrc.off;
		dnnl_exec_arg_t dargs[4] = {
			{ DNNL_ARG_DIFF_DST, sd_dnnl_mem(&c, &p->d_ddst.md, dyd) },
			{ DNNL_ARG_WEIGHTS, sd_dnnl_mem(&c, &p->d_w.md, wb) },
			{ DNNL_ARG_DIFF_SRC, sd_dnnl_mem(&c, dmd, dxd) },
			{ DNNL_ARG_SCRATCHPAD,
			  sd_dnnl_mem(&c, &bp->scratch_md, base + bp->scratch_off) },
		};
		sd_dnnl_exec(&c, bp->prim, 4, dargs);
		if (!p->d_dsrc.is_plain && !dx_nhwc)
			sd_reorder(&c, &p->d_dsrc, dxd, &p->d_dsrc.md, dx, &p->d_dsrc.plain, rs);
	}
	int rc = sd_call_end(&c);
	if (keep)
		keep->dx_nhwc = dx_nhwc;
	if (rc == 0) {
		const size_t nw = (size_t)s->k * s->c * s->r * s->r;
		for (size_t i = 0; i < nw; i++)
			dw[i] += dwp[i];
		if (db)
			for (int k = 0; k < s->k; k++)
				db[k] += dbb[k];
	}
	sd_plan_put(p);
	return rc;
}

/* A usable plan for the call, or NULL (released) when there is none.  A
 * bf16 plan without the kernels the call needs gives way to the float32
 * plan of the same key, so bf16 never sends a call to im2col that float32
 * would run on oneDNN. */
static struct sd_dnnl_plan *sd_plan_usable(struct sd_dnnl_plan *p, int need_dx)
{
	if (p && (!p->ok || (need_dx && !p->bwd_d.jit))) {
		struct sd_dnnl_key k = p->key;
		sd_plan_put(p);
		if (!k.bf16)
			return NULL;
		return sd_plan_usable(sd_plan_get_key(&k.s, k.bias, k.xblk, k.yblk, k.native, 0),
		                      need_dx);
	}
	return p;
}

int sd_conv2d_dnnl_forward(float *y, const float *x, const float *w, const float *b,
                           const struct sd_conv2d_shape *s, float *ws)
{
	struct sd_dnnl_plan *p = sd_plan_usable(sd_plan_get(s, b != NULL), 0);
	return p ? sd_run_forward(p, y, x, w, b, ws, NULL) : -1;
}

int sd_conv2d_dnnl_backward(float *dx, float *dw, float *db, const float *dy,
                            const float *x, const float *w,
                            const struct sd_conv2d_shape *s, float *ws)
{
	struct sd_dnnl_plan *p = sd_plan_usable(sd_plan_get(s, db != NULL), dx != NULL);
	return p ? sd_run_backward(p, dx, dw, db, dy, x, w, ws, NULL, NULL) : -1;
}

/* ------------------------------------------------------ blocked layouts */

int sd_conv2d_dnnl_block(const struct sd_conv2d_shape *s)
{
	/* The float32 plan's pick in either precision, so that a model's
	 * layouts do not depend on its precision. */
	struct sd_dnnl_plan *p = sd_plan_get_key(s, 0, 1, 1, 0, 0);
	if (!p)
		return 0;
	int blk = 0;
	if (p->ok) {
		/* The layout oneDNN picked for the output, when left free. */
		for (int b = 8; b <= 16 && !blk; b += 8) {
			dnnl_memory_desc_t md;
			dnnl_dims_t d = { s->n, s->k, s->oh, s->ow };
			dnnl_memory_desc_init_by_tag(&md, 4, d, dnnl_f32, sd_act_tag(b));
			if (dnnl_memory_desc_equal(&md, &p->f_dst.md))
				blk = b;
		}
	}
	sd_plan_put(p);
	return blk;
}

/* The native plan of (s, bias, xblk, yblk), or NULL when oneDNN cannot run
 * it on those layouts with JIT kernels. */
static struct sd_dnnl_plan *sd_plan_blocked(const struct sd_conv2d_shape *s, int bias, int xblk,
                                            int yblk, int need_dx)
{
	if ((xblk != 1 && xblk != 8 && xblk != 16) || (yblk != 8 && yblk != 16) ||
	    (xblk > 1 && s->c % xblk) || s->k % yblk)
		return NULL;
	return sd_plan_usable(sd_plan_get_key(s, bias, xblk, yblk, 1, sd_bf16_now()), need_dx);
}

uint16_t *sd_conv2d_dnnl_keep_prepare(struct sd_conv2d_keep *keep,
                                      const struct sd_conv2d_shape *s, int bias, int xblk,
                                      int yblk, const float *x)
{
	struct sd_dnnl_plan *p = sd_plan_blocked(s, bias, xblk, yblk, 0);
	if (!p)
		return NULL;
	uint16_t *buf = sd_is_nhwc_bf16(&p->f_src.md) ? sd_keep_buffer(p, keep) : NULL;
	if (buf) {
		keep->x = x;
		keep->plan = p->serial;
	}
	sd_plan_put(p);
	return buf;
}

uint16_t *sd_conv2d_dnnl_keep_prepare_dy(struct sd_conv2d_keep *keep,
                                         const struct sd_conv2d_shape *s, int bias, int xblk,
                                         int yblk, const float *dy, int need_dx)
{
	struct sd_dnnl_plan *p = sd_plan_blocked(s, bias, xblk, yblk, need_dx);
	if (!p)
		return NULL;
	uint16_t *buf = NULL;
	/* Both passes must read dy in that one layout (a backward-data pass
	 * wanting another would have only the float32 dy, never written). */
	if (p->key.bf16 && !p->w_ddst.is_plain && sd_is_nhwc_bf16(&p->w_ddst.md) &&
	    (!need_dx || (p->bwd_d.jit && dnnl_memory_desc_equal(&p->d_ddst.md, &p->w_ddst.md)))) {
		buf = sd_keep_grow(keep, dnnl_memory_desc_get_size(&p->w_ddst.md));
		keep->x = dy;
		keep->plan = p->serial;
	}
	sd_plan_put(p);
	return buf;
}

int sd_conv2d_dnnl_blocked_supported(const struct sd_conv2d_shape *s, int bias, int xblk,
                                     int yblk, int need_dx)
{
	struct sd_dnnl_plan *p = sd_plan_blocked(s, bias, xblk, yblk, need_dx);
	if (p)
		sd_plan_put(p);
	return p != NULL;
}

size_t sd_conv2d_dnnl_workspace_floats_blocked(const struct sd_conv2d_shape *s, int bias,
                                               int xblk, int yblk)
{
	if ((xblk != 1 && xblk != 8 && xblk != 16) || (yblk != 8 && yblk != 16) ||
	    (xblk > 1 && s->c % xblk) || s->k % yblk)
		return 0;
	return sd_plans_floats(s, bias, xblk, yblk, 1);
}

int sd_conv2d_dnnl_forward_blocked(float *y, const float *x, const float *w, const float *b,
                                   const struct sd_conv2d_shape *s, int xblk, int yblk,
                                   float *ws, struct sd_conv2d_keep *keep)
{
	struct sd_dnnl_plan *p = sd_plan_blocked(s, b != NULL, xblk, yblk, 0);
	return p ? sd_run_forward(p, y, x, w, b, ws, keep) : -1;
}

int sd_conv2d_dnnl_backward_blocked(float *dx, float *dw, float *db, const float *dy,
                                    const float *x, const float *w,
                                    const struct sd_conv2d_shape *s, int xblk, int yblk,
                                    float *ws, struct sd_conv2d_keep *keep,
                                    struct sd_conv2d_keep *keep_dy)
{
	struct sd_dnnl_plan *p = sd_plan_blocked(s, db != NULL, xblk, yblk, dx != NULL);
	return p ? sd_run_backward(p, dx, dw, db, dy, x, w, ws, keep, keep_dy) : -1;
}
