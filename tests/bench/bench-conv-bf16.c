/* tests/bench/bench-conv-bf16.c - oneDNN bf16 convolutions against oneDNN
 * fp32 at every convolution shape of resnet32 (batch 128): the measurement
 * that decides whether a bf16 precision for the engine's oneDNN path is worth
 * building on this CPU.
 *
 * usage: bench-conv-bf16 [-t threads] [-r repeats] [-n batch] [-o f32|bf16]
 *
 * Both precisions use oneDNN primitives directly, with the layouts oneDNN
 * picks (format "any"), for forward training, backward data (not for the
 * first layer, which has no input gradient) and backward weights.  bf16
 * means bf16 source, weights and output gradient, with the diff weights in
 * f32 (fp32 master weights); the forward output and the input gradient are
 * f32 by default (-o bf16 makes them bf16).
 *
 * A real step keeps its tensors in fp32 (activations in nChw16c as the
 * engine's blocked layouts do, weights and their gradients in oihw) and so
 * pays reorders into each primitive's layout and type and back: every
 * reorder whose descriptor differs from that canonical one is timed, each
 * distinct one once per step (the source shared by forward and backward
 * weights, the output gradient shared by both backward passes, the weights
 * shared by forward and backward data where their layouts agree).  The
 * columns give the primitives alone ("conv") and with those reorders
 * ("step"), medians of `repeats` runs after one warm-up run, in wall
 * milliseconds, and the ratios fp32 / bf16 (above 1: bf16 is faster).  The
 * last rows weight each shape by how often resnet32 has it (1, 10, 1, 9, 1,
 * 9 convolutions; its option-A shortcuts have none), from the medians
 * and from the fastest runs (the figure least disturbed by other processes
 * on a shared machine).
 *
 * A second table times, for the bf16 kernels, the weight gradient two
 * ways, alternated: oneDNN's backward-weights primitive with the reorder
 * of its result to OIHW, and the forward convolution of x^T with dy^T
 * (batch and channels swapped, dy dilated by the stride) that
 * engine/conv-dnnl.c runs in its place for some shapes (sd_use_wgrad_swap),
 * with the transposes of x and dy from the layouts backward-weights reads
 * them in and the write of its (c, k, 3, 3) result to OIHW; medians and
 * fastest runs, and oneDNN's kernel for the swapped forward (its AMX
 * "jit" kernel where it has one, as the engine takes).
 *
 * Also prints the CPU model and its bf16 flags, the ISA oneDNN dispatches
 * to and the implementation names of every primitive (so a reference
 * fallback cannot hide), and the fraction of the machine other processes
 * took during the run.  Pin it with taskset for single-thread figures. */
#include "tests/bench/timing.h"

#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                                    \
	do {                                                                           \
		dnnl_status_t st_ = (call);                                            \
		if (st_ != dnnl_success) {                                             \
			fprintf(stderr, "bench-conv-bf16: %s failed (status %d) at line %d\n", \
			        #call, (int)st_, __LINE__);                            \
			exit(1);                                                       \
		}                                                                      \
	} while (0)

static dnnl_engine_t eng;
static dnnl_stream_t strm;

struct shape {
	int n, c, hw, k, stride, first, count;
};

/* One tensor argument of a primitive: its canonical fp32 memory and, where
 * the primitive wants another type or layout, its own memory and the
 * reorder between them (into the primitive for inputs, out of it for
 * outputs).  `shared` points at an earlier argument holding the same
 * descriptor, whose reorder this one reuses (not timed twice). */
struct arg {
	dnnl_memory_t canon, prim;
	dnnl_primitive_t reorder;
	const struct arg *shared;
};

/* The three primitives of one shape in one precision and their arguments. */
struct conv {
	dnnl_primitive_t fwd, bwd_d, bwd_w;
	struct arg f_src, f_wei, f_dst, d_ddst, d_wei, d_dsrc, w_src, w_ddst, w_dwei;
	char impl[3][48];
};

static dnnl_memory_t mem(const dnnl_memory_desc_t *md)
{
	dnnl_memory_t m;
	CHECK(dnnl_memory_create(&m, md, eng, DNNL_MEMORY_ALLOCATE));
	return m;
}

static void run_reorder(dnnl_primitive_t r, dnnl_memory_t from, dnnl_memory_t to)
{
	dnnl_exec_arg_t a[2] = { { DNNL_ARG_FROM, from }, { DNNL_ARG_TO, to } };
	CHECK(dnnl_primitive_execute(r, strm, 2, a));
}

static dnnl_primitive_t make_reorder(const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to)
{
	dnnl_primitive_desc_t pd;
	dnnl_primitive_t r;
	CHECK(dnnl_reorder_primitive_desc_create(&pd, from, eng, to, eng, NULL));
	CHECK(dnnl_primitive_create(&r, pd));
	dnnl_primitive_desc_destroy(pd);
	return r;
}

/* Sets up argument a for the primitive descriptor pd's query q against the
 * canonical descriptor canon (shared canonical memory canon_mem), reusing
 * `prev` when it has the same primitive-side descriptor. */
static void arg_init(struct arg *a, const_dnnl_primitive_desc_t pd, dnnl_query_t q,
                     const dnnl_memory_desc_t *canon, dnnl_memory_t canon_mem, int is_input,
                     const struct arg *prev)
{
	const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, q, 0);
	memset(a, 0, sizeof *a);
	a->canon = canon_mem;
	if (prev && prev->prim) {
		const dnnl_memory_desc_t *pmd;
		CHECK(dnnl_memory_get_memory_desc(prev->prim, &pmd));
		if (dnnl_memory_desc_equal(pmd, md)) {
			a->prim = prev->prim;
			a->shared = prev;
			return;
		}
	}
	if (dnnl_memory_desc_equal(md, canon)) {
		a->prim = canon_mem;
		return;
	}
	a->prim = mem(md);
	a->reorder = is_input ? make_reorder(canon, md) : make_reorder(md, canon);
	/* Inputs start as the canonical data converted; outputs need nothing. */
	if (is_input) {
		run_reorder(a->reorder, canon_mem, a->prim);
		CHECK(dnnl_stream_wait(strm));
	}
}

/* Runs a's reorder when it has its own (not shared) one. */
static void arg_reorder(const struct arg *a, int is_input)
{
	if (!a->reorder || a->shared)
		return;
	if (is_input)
		run_reorder(a->reorder, a->canon, a->prim);
	else
		run_reorder(a->reorder, a->prim, a->canon);
}

static void impl_name(const_dnnl_primitive_desc_t pd, char *buf, size_t len)
{
	const char *s = "?";
	dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &s);
	snprintf(buf, len, "%s", s);
}

static void fill(dnnl_memory_t m, size_t count, unsigned seed, float scale)
{
	float *p;
	CHECK(dnnl_memory_get_data_handle(m, (void **)&p));
	for (size_t i = 0; i < count; i++) {
		seed = seed * 1664525u + 1013904223u;
		p[i] = scale * ((float)(seed >> 8) / 16777216.0f - 0.5f);
	}
}

/* The canonical fp32 tensors of one shape, shared by both precisions. */
struct canon {
	dnnl_memory_desc_t src, wei, dst;
	dnnl_memory_t x, w, y, dy, dx, dw;
};

static void canon_init(struct canon *t, const struct shape *s)
{
	int oh = (s->hw + 2 - 3) / s->stride + 1;
	dnnl_dims_t sd = { s->n, s->c, s->hw, s->hw }, wd = { s->k, s->c, 3, 3 },
	            dd = { s->n, s->k, oh, oh };
	/* The engine keeps 16-channel blocks where the channels divide. */
	CHECK(dnnl_memory_desc_init_by_tag(&t->src, 4, sd, dnnl_f32,
	                                   s->c % 16 ? dnnl_nchw : dnnl_nChw16c));
	CHECK(dnnl_memory_desc_init_by_tag(&t->wei, 4, wd, dnnl_f32, dnnl_oihw));
	CHECK(dnnl_memory_desc_init_by_tag(&t->dst, 4, dd, dnnl_f32,
	                                   s->k % 16 ? dnnl_nchw : dnnl_nChw16c));
	t->x = mem(&t->src), t->dx = mem(&t->src);
	t->w = mem(&t->wei), t->dw = mem(&t->wei);
	t->y = mem(&t->dst), t->dy = mem(&t->dst);
	fill(t->x, (size_t)s->n * s->c * s->hw * s->hw, 1, 2.0f);
	fill(t->w, (size_t)s->k * s->c * 9, 2, 0.2f);
	fill(t->dy, (size_t)s->n * s->k * oh * oh, 3, 2.0f);
}

static void conv_init(struct conv *cv, const struct shape *s, const struct canon *t,
                      dnnl_data_type_t in, dnnl_data_type_t out)
{
	int oh = (s->hw + 2 - 3) / s->stride + 1;
	dnnl_dims_t sd = { s->n, s->c, s->hw, s->hw }, wd = { s->k, s->c, 3, 3 },
	            dd = { s->n, s->k, oh, oh }, st = { s->stride, s->stride }, pad = { 1, 1 };
	dnnl_memory_desc_t src, wei, dst, dsrc, dwei, ddst;
	CHECK(dnnl_memory_desc_init_by_tag(&src, 4, sd, in, dnnl_format_tag_any));
	CHECK(dnnl_memory_desc_init_by_tag(&wei, 4, wd, in, dnnl_format_tag_any));
	CHECK(dnnl_memory_desc_init_by_tag(&dst, 4, dd, out, dnnl_format_tag_any));
	CHECK(dnnl_memory_desc_init_by_tag(&dsrc, 4, sd, out, dnnl_format_tag_any));
	CHECK(dnnl_memory_desc_init_by_tag(&dwei, 4, wd, dnnl_f32, dnnl_format_tag_any));
	CHECK(dnnl_memory_desc_init_by_tag(&ddst, 4, dd, in, dnnl_format_tag_any));
	dnnl_convolution_desc_t fd, bd, wdsc;
	dnnl_primitive_desc_t fpd, bpd = NULL, wpd;
	CHECK(dnnl_convolution_forward_desc_init(&fd, dnnl_forward_training, dnnl_convolution_direct,
	                                         &src, &wei, NULL, &dst, st, pad, pad));
	CHECK(dnnl_primitive_desc_create(&fpd, &fd, NULL, eng, NULL));
	CHECK(dnnl_convolution_backward_weights_desc_init(&wdsc, dnnl_convolution_direct, &src,
	                                                  &dwei, NULL, &ddst, st, pad, pad));
	CHECK(dnnl_primitive_desc_create(&wpd, &wdsc, NULL, eng, fpd));
	memset(cv, 0, sizeof *cv);
	arg_init(&cv->f_src, fpd, dnnl_query_src_md, &t->src, t->x, 1, NULL);
	arg_init(&cv->f_wei, fpd, dnnl_query_weights_md, &t->wei, t->w, 1, NULL);
	arg_init(&cv->f_dst, fpd, dnnl_query_dst_md, &t->dst, t->y, 0, NULL);
	arg_init(&cv->w_src, wpd, dnnl_query_src_md, &t->src, t->x, 1, &cv->f_src);
	arg_init(&cv->w_ddst, wpd, dnnl_query_diff_dst_md, &t->dst, t->dy, 1, NULL);
	arg_init(&cv->w_dwei, wpd, dnnl_query_diff_weights_md, &t->wei, t->dw, 0, NULL);
	impl_name(fpd, cv->impl[0], sizeof cv->impl[0]);
	impl_name(wpd, cv->impl[2], sizeof cv->impl[2]);
	CHECK(dnnl_primitive_create(&cv->fwd, fpd));
	CHECK(dnnl_primitive_create(&cv->bwd_w, wpd));
	snprintf(cv->impl[1], sizeof cv->impl[1], "-");
	if (!s->first) {
		CHECK(dnnl_convolution_backward_data_desc_init(&bd, dnnl_convolution_direct, &dsrc,
		                                               &wei, &ddst, st, pad, pad));
		CHECK(dnnl_primitive_desc_create(&bpd, &bd, NULL, eng, fpd));
		arg_init(&cv->d_ddst, bpd, dnnl_query_diff_dst_md, &t->dst, t->dy, 1, &cv->w_ddst);
		arg_init(&cv->d_wei, bpd, dnnl_query_weights_md, &t->wei, t->w, 1, &cv->f_wei);
		arg_init(&cv->d_dsrc, bpd, dnnl_query_diff_src_md, &t->src, t->dx, 0, NULL);
		impl_name(bpd, cv->impl[1], sizeof cv->impl[1]);
		CHECK(dnnl_primitive_create(&cv->bwd_d, bpd));
		dnnl_primitive_desc_destroy(bpd);
	}
	dnnl_primitive_desc_destroy(fpd);
	dnnl_primitive_desc_destroy(wpd);
}

static void exec3(dnnl_primitive_t p, int a0, const struct arg *x0, int a1, const struct arg *x1,
                  int a2, const struct arg *x2)
{
	dnnl_exec_arg_t a[3] = { { a0, x0->prim }, { a1, x1->prim }, { a2, x2->prim } };
	CHECK(dnnl_primitive_execute(p, strm, 3, a));
}

/* One training step's convolution work for shape s: milliseconds spent in
 * the primitives (*conv) and in the reorders around them (*reorder). */
static void step(const struct conv *cv, double *conv, double *reorder)
{
	double t0 = now_s();
	arg_reorder(&cv->f_src, 1);
	arg_reorder(&cv->f_wei, 1);
	CHECK(dnnl_stream_wait(strm));
	double t1 = now_s();
	exec3(cv->fwd, DNNL_ARG_SRC, &cv->f_src, DNNL_ARG_WEIGHTS, &cv->f_wei, DNNL_ARG_DST, &cv->f_dst);
	CHECK(dnnl_stream_wait(strm));
	double t2 = now_s();
	arg_reorder(&cv->f_dst, 0);
	arg_reorder(&cv->w_src, 1);
	arg_reorder(&cv->w_ddst, 1);
	if (cv->bwd_d) {
		arg_reorder(&cv->d_ddst, 1);
		arg_reorder(&cv->d_wei, 1);
	}
	CHECK(dnnl_stream_wait(strm));
	double t3 = now_s();
	if (cv->bwd_d)
		exec3(cv->bwd_d, DNNL_ARG_DIFF_DST, &cv->d_ddst, DNNL_ARG_WEIGHTS, &cv->d_wei,
		      DNNL_ARG_DIFF_SRC, &cv->d_dsrc);
	exec3(cv->bwd_w, DNNL_ARG_SRC, &cv->w_src, DNNL_ARG_DIFF_DST, &cv->w_ddst,
	      DNNL_ARG_DIFF_WEIGHTS, &cv->w_dwei);
	CHECK(dnnl_stream_wait(strm));
	double t4 = now_s();
	if (cv->bwd_d)
		arg_reorder(&cv->d_dsrc, 0);
	arg_reorder(&cv->w_dwei, 0);
	CHECK(dnnl_stream_wait(strm));
	double t5 = now_s();
	*conv = ((t2 - t1) + (t4 - t3)) * 1e3;
	*reorder = ((t1 - t0) + (t3 - t2) + (t5 - t4)) * 1e3;
}

/* The weight gradient of one shape as the forward convolution of x^T and
 * dy^T (see the header): its primitive and the reorders around it. */
struct swapped {
	dnnl_primitive_t fwd, r_x, r_dy, r_dw;
	dnnl_memory_t x_from, x_to, dy_from, dy_to, dw_from, dw_to;
	char impl[48];
};

static const dnnl_memory_desc_t *md_of(dnnl_memory_t m)
{
	const dnnl_memory_desc_t *md;
	CHECK(dnnl_memory_get_memory_desc(m, &md));
	return md;
}

/* A memory on the buffer of m, described by md (a view of the same data). */
static dnnl_memory_t view(dnnl_memory_t m, const dnnl_memory_desc_t *md)
{
	void *h;
	dnnl_memory_t v;
	CHECK(dnnl_memory_get_data_handle(m, &h));
	CHECK(dnnl_memory_create(&v, md, eng, h));
	return v;
}

/* 0 when oneDNN has a JIT forward kernel for the swapped problem. */
static int swapped_init(struct swapped *sw, const struct shape *s, const struct conv *cv,
                        const struct canon *t)
{
	const int oh = (s->hw + 2 - 3) / s->stride + 1, perm[4] = { 1, 0, 2, 3 };
	dnnl_memory_desc_t x_t, dy_t, dw_t, src, wei, dst;
	CHECK(dnnl_memory_desc_permute_axes(&x_t, md_of(cv->w_src.prim), perm));
	CHECK(dnnl_memory_desc_permute_axes(&dy_t, md_of(cv->w_ddst.prim), perm));
	CHECK(dnnl_memory_desc_permute_axes(&dw_t, &t->wei, perm));
	dnnl_dims_t sd = { s->c, s->n, s->hw, s->hw }, wd = { s->k, s->n, oh, oh },
	            dd = { s->c, s->k, 3, 3 }, one = { 1, 1 }, pad_l = { 1, 1 },
	            dil = { s->stride - 1, s->stride - 1 },
	            pad_r = { 3 + (oh - 1) * s->stride - s->hw - 1, 3 + (oh - 1) * s->stride - s->hw - 1 };
	CHECK(dnnl_memory_desc_init_by_tag(&src, 4, sd, dnnl_bf16, dnnl_format_tag_any));
	CHECK(dnnl_memory_desc_init_by_tag(&wei, 4, wd, dnnl_bf16, dnnl_format_tag_any));
	CHECK(dnnl_memory_desc_init_by_tag(&dst, 4, dd, dnnl_f32, dnnl_format_tag_any));
	dnnl_convolution_desc_t fd;
	dnnl_primitive_desc_iterator_t it;
	CHECK(dnnl_dilated_convolution_forward_desc_init(&fd, dnnl_forward_inference,
	                                                 dnnl_convolution_direct, &src, &wei, NULL,
	                                                 &dst, one, dil, pad_l, pad_r));
	CHECK(dnnl_primitive_desc_iterator_create(&it, &fd, NULL, eng, NULL));
	dnnl_primitive_desc_t pd = NULL, first = NULL;
	do {
		dnnl_primitive_desc_t q = dnnl_primitive_desc_iterator_fetch(it);
		char name[48];
		if (!q)
			break;
		impl_name(q, name, sizeof name);
		if (!strncmp(name, "jit:", 4) && !pd) {
			pd = q;
		} else if (!strncmp(name, "jit", 3) || !strncmp(name, "brg", 3)) {
			if (!first)
				first = q;
			else
				dnnl_primitive_desc_destroy(q);
		} else {
			dnnl_primitive_desc_destroy(q);
		}
	} while (!pd && dnnl_primitive_desc_iterator_next(it) == dnnl_success);
	dnnl_primitive_desc_iterator_destroy(it);
	if (!pd)
		pd = first;
	else if (first)
		dnnl_primitive_desc_destroy(first);
	if (!pd)
		return -1;
	impl_name(pd, sw->impl, sizeof sw->impl);
	CHECK(dnnl_primitive_create(&sw->fwd, pd));
	const dnnl_memory_desc_t *ps = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0),
	                         *pw = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0),
	                         *pdst = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
	sw->x_from = view(cv->w_src.prim, &x_t), sw->x_to = mem(ps);
	sw->dy_from = view(cv->w_ddst.prim, &dy_t), sw->dy_to = mem(pw);
	sw->dw_from = mem(pdst), sw->dw_to = view(t->dw, &dw_t);
	sw->r_x = make_reorder(&x_t, ps);
	sw->r_dy = make_reorder(&dy_t, pw);
	sw->r_dw = make_reorder(pdst, &dw_t);
	dnnl_primitive_desc_destroy(pd);
	return 0;
}

/* Milliseconds of backward-weights with its result to OIHW (swap 0), or of
 * the swapped forward with its transposes (swap 1); x and dy already in
 * backward-weights' layouts. */
static double wgrad_ms(const struct conv *cv, const struct swapped *sw, int swap)
{
	double t0 = now_s();
	if (swap) {
		run_reorder(sw->r_x, sw->x_from, sw->x_to);
		run_reorder(sw->r_dy, sw->dy_from, sw->dy_to);
		dnnl_exec_arg_t a[3] = { { DNNL_ARG_SRC, sw->x_to }, { DNNL_ARG_WEIGHTS, sw->dy_to },
			                 { DNNL_ARG_DST, sw->dw_from } };
		CHECK(dnnl_primitive_execute(sw->fwd, strm, 3, a));
		run_reorder(sw->r_dw, sw->dw_from, sw->dw_to);
	} else {
		exec3(cv->bwd_w, DNNL_ARG_SRC, &cv->w_src, DNNL_ARG_DIFF_DST, &cv->w_ddst,
		      DNNL_ARG_DIFF_WEIGHTS, &cv->w_dwei);
		arg_reorder(&cv->w_dwei, 0);
	}
	CHECK(dnnl_stream_wait(strm));
	return (now_s() - t0) * 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static const char *isa_name(dnnl_cpu_isa_t isa)
{
	switch ((int)isa) {
	case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
	case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
	case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
	case dnnl_cpu_isa_avx512_core: return "avx512_core";
	case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
	case dnnl_cpu_isa_avx2: return "avx2";
	default: return "older than avx2";
	}
}

/* The CPU's model name and which of its bf16-related flags it has. */
static void print_cpu(void)
{
	char line[8192], model[256] = "unknown";
	const char *want[] = { "avx512f", "avx512_bf16", "amx_tile", "amx_bf16" };
	int have[4] = { 0 }, got_flags = 0;
	FILE *f = fopen("/proc/cpuinfo", "r");
	while (f && fgets(line, sizeof line, f)) {
		if (!strncmp(line, "model name", 10) && strchr(line, ':'))
			snprintf(model, sizeof model, "%s", strchr(line, ':') + 2);
		if (!got_flags && !strncmp(line, "flags", 5)) {
			got_flags = 1;
			for (int i = 0; i < 4; i++) {
				char pat[32];
				snprintf(pat, sizeof pat, " %s ", want[i]);
				have[i] = strstr(line, pat) != NULL;
			}
		}
	}
	if (f)
		fclose(f);
	model[strcspn(model, "\n")] = 0;
	printf("CPU: %s; flags:", model);
	for (int i = 0; i < 4; i++)
		printf(" %s=%s", want[i], have[i] ? "yes" : "no");
	printf("\n");
}

int main(int argc, char **argv)
{
	int threads = 2, repeats = 11, n = 128;
	dnnl_data_type_t out = dnnl_f32;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "-t"))
			threads = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-r"))
			repeats = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-n"))
			n = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-o") && !strcmp(argv[i + 1], "bf16"))
			out = dnnl_bf16;
		else if (strcmp(argv[i], "-o") || strcmp(argv[i + 1], "f32"))
			threads = 0;
	}
	if (threads < 1 || repeats < 1 || repeats > 1000 || n < 1 || argc % 2 == 0) {
		fprintf(stderr, "usage: bench-conv-bf16 [-t threads] [-r repeats] [-n batch] [-o f32|bf16]\n");
		return 2;
	}
	omp_set_num_threads(threads);
	CHECK(dnnl_engine_create(&eng, dnnl_cpu, 0));
	CHECK(dnnl_stream_create(&strm, eng, dnnl_stream_default_flags));
	const dnnl_version_t *v = dnnl_version();
	print_cpu();
	printf("oneDNN %d.%d.%d, ISA %s; %d threads; batch %d; bf16 outputs (dst, diff_src) %s; "
	       "median of %d, wall ms\n",
	       v->major, v->minor, v->patch, isa_name(dnnl_get_effective_cpu_isa()), threads, n,
	       out == dnnl_bf16 ? "bf16" : "f32", repeats);
	const struct shape shapes[] = {
		{ n, 3, 32, 16, 1, 1, 1 },  { n, 16, 32, 16, 1, 0, 10 }, { n, 16, 32, 32, 2, 0, 1 },
		{ n, 32, 16, 32, 1, 0, 9 }, { n, 32, 16, 64, 2, 0, 1 },  { n, 64, 8, 64, 1, 0, 9 },
	};
	printf("%-24s %3s %8s %8s %8s %8s %6s %6s  %s\n", "shape", "x", "f32 conv", "f32 step",
	       "bf conv", "bf step", "r conv", "r step", "bf16 kernels (fwd / bwd-data / bwd-weights)");
	double sum[4] = { 0 }, best[4] = { 0 };
	char swap_lines[6][200];
	double busy0 = machine_busy_s(), own0 = process_cpu_s(), wall0 = now_s();
	for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
		const struct shape *s = &shapes[i];
		struct canon t;
		struct conv cv[2];
		canon_init(&t, s);
		conv_init(&cv[0], s, &t, dnnl_f32, dnnl_f32);
		conv_init(&cv[1], s, &t, dnnl_bf16, out);
		double *c[2], *r[2];
		for (int p = 0; p < 2; p++) {
			c[p] = calloc((size_t)repeats, sizeof(double));
			r[p] = calloc((size_t)repeats, sizeof(double));
			if (!c[p] || !r[p]) {
				fprintf(stderr, "bench-conv-bf16: out of memory\n");
				return 1;
			}
		}
		/* Alternate the precisions so a burst of load from other
		 * processes falls on both alike. */
		for (int rep = -1; rep < repeats; rep++)
			for (int p = 0; p < 2; p++) {
				double cm, rm;
				step(&cv[p], &cm, &rm);
				if (rep >= 0)
					c[p][rep] = cm, r[p][rep] = cm + rm;
			}
		/* median() sorts, so the fastest run is then first. */
		double m[4] = { median(c[0], repeats), median(r[0], repeats), median(c[1], repeats),
		                median(r[1], repeats) };
		char label[64];
		snprintf(label, sizeof label, "c%d %dx%d k%d s%d%s", s->c, s->hw, s->hw, s->k, s->stride,
		         s->first ? " (no dx)" : "");
		printf("%-24s %3d %8.2f %8.2f %8.2f %8.2f %6.2f %6.2f  %s / %s / %s\n", label, s->count,
		       m[0], m[1], m[2], m[3], m[0] / m[2], m[1] / m[3], cv[1].impl[0], cv[1].impl[1],
		       cv[1].impl[2]);
		if (i == 0 || strcmp(cv[0].impl[0], cv[1].impl[0]))
			printf("%-24s %3s %s / %s / %s (fp32 kernels)\n", "", "", cv[0].impl[0],
			       cv[0].impl[1], cv[0].impl[2]);
		fflush(stdout);
		double *sorted[4] = { c[0], r[0], c[1], r[1] };
		for (int k = 0; k < 4; k++) {
			sum[k] += s->count * m[k];
			best[k] += s->count * sorted[k][0];
		}
		/* The weight gradient, direct or swapped, alternated. */
		struct swapped sw;
		if (swapped_init(&sw, s, &cv[1], &t) == 0) {
			for (int rep = -1; rep < repeats; rep++)
				for (int p = 0; p < 2; p++) {
					double ms = wgrad_ms(&cv[1], &sw, p);
					if (rep >= 0)
						c[p][rep] = ms;
				}
			const double md = median(c[0], repeats), ms = median(c[1], repeats);
			snprintf(swap_lines[i], sizeof swap_lines[i],
			         "%-24s %3d %8.3f %8.3f %8.3f %8.3f %6.2f  %s", label, s->count, md, c[0][0],
			         ms, c[1][0], md / ms, sw.impl);
		} else {
			snprintf(swap_lines[i], sizeof swap_lines[i], "%-24s %3d  no JIT kernel swapped",
			         label, s->count);
		}
		for (int p = 0; p < 2; p++)
			free(c[p]), free(r[p]);
		/* The primitives and memories are left to process exit: a
		 * benchmark of six shapes. */
	}
	printf("%-24s %3d %8.1f %8.1f %8.1f %8.1f %6.2f %6.2f\n", "resnet32 step (weighted)", 31,
	       sum[0], sum[1], sum[2], sum[3], sum[0] / sum[2], sum[1] / sum[3]);
	printf("%-24s %3d %8.1f %8.1f %8.1f %8.1f %6.2f %6.2f\n", "same, fastest runs", 31,
	       best[0], best[1], best[2], best[3], best[0] / best[2], best[1] / best[3]);
	printf("\nbf16 weight gradient: backward-weights against the forward of x^T and dy^T "
	       "(ms per call, median and fastest; ratio of medians)\n");
	printf("%-24s %3s %8s %8s %8s %8s %6s  %s\n", "shape", "x", "bwd-w", "fastest", "swapped",
	       "fastest", "ratio", "swapped forward kernel");
	for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
		printf("%s\n", swap_lines[i]);
	double wall = now_s() - wall0, busy = machine_busy_s() - busy0, own = process_cpu_s() - own0;
	long procs = sysconf(_SC_NPROCESSORS_ONLN);
	if (busy0 >= 0 && procs > 0)
		printf("other processes used %.0f%% of the %ld CPUs during the run\n",
		       100.0 * (busy - own > 0 ? busy - own : 0) / (wall * (double)procs), procs);
	return 0;
}
