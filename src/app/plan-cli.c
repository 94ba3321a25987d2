/* src/app/plan-cli.c - `spotdeck plan`: builds the configurations a user asks
 * for (GPUs x sizes x spot/on-demand), simulates each with the planner
 * (src/market/planner.h), and prints a table sorted by cost with the time/cost
 * frontier marked, or JSON. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <cJSON.h>

#include "src/base/errors.h"
#include "engine/model.h"
#include "engine/onnx.h"
#include "engine/tokens.h"
#include "engine/train.h"
#include "src/market/catalog.h"
#include "src/proto/job.h"
#include "src/app/plan-cli.h"
#include "src/market/planner.h"
#include "src/market/autopilot.h"

/* What a language model's plan says of its speeds: the catalog's GPU
 * speeds scaled by FLOPs are not what the trainer gives it today, since
 * engine/train.c keeps a language model on the CPU executor (the CUDA
 * backend has no language-model path). */
#define SD_PLAN_LM_CPU_NOTE \
	"a language model trains on the servers' CPUs for now (no CUDA language-model path " \
	"yet): the speeds, times and costs below are GPU estimates from FLOPs"

#define MAX_ROWS 512
#define MAX_LIST 32

struct row {
	struct sd_plan_config cfg;
	char gpu[24];              /* "K80" or "8xA100" */
	char provider[16];
	int transient;
	int self, twin, base;      /* indexes into the unique simulations */
	struct sd_plan_result res;
};

struct sim_entry {
	char key[2048];
	struct sd_plan_config cfg;
	struct sd_plan_result res;
};

struct plan {
	struct sd_catalog *cat;
	struct sd_plan_scaling scaling;
	bool have_scaling;
	struct sd_plan_job job;
	struct sd_plan_options opt;
	struct row *rows;
	int nrows;
	struct sim_entry *sims;
	int nsims;
	struct sd_autopilot_objective autopilot;  /* --policy autopilot's objective */
	int tokens_per_sample;      /* a language model's block_size: its samples are
	                             * windows of that many tokens; 0 for images */
	/* progress */
	long done_runs, total_runs;
	struct timespec t0, last;
	bool progress_shown, tty;
	int progress_mode;          /* 0 after a second, 1 always, -1 never */
};

/* ---- data files ------------------------------------------------------------ */

int sd_plan_data_path(const char *name, char *out, size_t len)
{
	if (access(name, R_OK) == 0 || strchr(name, '/')) {
		snprintf(out, len, "%s", name);
		return access(name, R_OK) == 0 ? 0 : -1;
	}
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n > 0) {
		self[n] = 0;
		char *slash = strrchr(self, '/');
		if (slash) {
			*slash = 0;
			snprintf(out, len, "%s/data/%s", self, name);
			if (access(out, R_OK) == 0)
				return 0;
		}
	}
	snprintf(out, len, "%s/data/%s", SD_SRCDIR, name);
	if (access(out, R_OK) == 0)
		return 0;
	snprintf(out, len, "%s/%s", SD_DATADIR, name);
	if (access(out, R_OK) == 0)
		return 0;
	snprintf(out, len, "%s", name);
	return -1;
}

/* ---- the job ---------------------------------------------------------------- */

/* Training-set sizes and image shapes of the engine's datasets (the
 * releases' own figures: Fashion-MNIST and MNIST 60,000 28x28 grey images,
 * CIFAR-10 50,000 32x32 colour images); npy's come from its files' headers
 * (and a bad file is said as spotdeck says it), tokens' from train.bin's
 * windows per epoch.  Returns 0, -1 for a
 * dataset of unknown size, -2 with *why for a bad npy dataset. */
static int dataset_shape(const struct sd_train_config *t, long *samples, int *c, int *h, int *w,
                         char **why)
{
	if (!strcmp(t->dataset, "npy")) {
		struct sd_data_options opt;
		memset(&opt, 0, sizeof opt);
		if (sd_layout_parse(t->layout, &opt.layout) < 0)
			opt.layout = SD_LAYOUT_NCHW;
		opt.norm_channels = t->norm_channels;
		memcpy(opt.mean, t->norm_mean, sizeof opt.mean);
		memcpy(opt.std, t->norm_std, sizeof opt.std);
		opt.classes = t->classes;
		struct sd_dataset tr, te;
		if (sd_dataset_load_npy(&tr, &te, t->data_dir, &opt, why) < 0)
			return -2;
		*samples = tr.n, *c = tr.c, *h = tr.h, *w = tr.w;
		sd_dataset_free(&tr);
		sd_dataset_free(&te);
		return 0;
	}
	if (!strcmp(t->dataset, "tokens")) {
		/* A language model's samples are windows of block_size tokens
		 * (engine/tokens.h); its shape is its ONNX file's. */
		char path[SD_PATH_MAX + 16];
		struct sd_tokens tok;
		snprintf(path, sizeof path, "%s/train.bin", t->data_dir);
		if (t->block_size <= 0 || sd_tokens_open(&tok, path, why) < 0)
			return t->block_size <= 0 ? -1 : -2;
		*samples = (long)sd_tokens_epoch_windows(&tok, t->block_size);
		*c = *h = *w = 0;
		sd_tokens_close(&tok);
		return 0;
	}
	if (!strcmp(t->dataset, "fashion-mnist") || !strcmp(t->dataset, "mnist")) {
		*samples = 60000, *c = 1, *h = 28, *w = 28;
	} else if (!strcmp(t->dataset, "cifar10")) {
		*samples = 50000, *c = 3, *h = 32, *w = 32;
	} else if (!strcmp(t->dataset, "synthetic")) {
		*samples = t->synthetic_samples, *c = t->synthetic_c, *h = t->synthetic_h, *w = t->synthetic_w;
	} else {
		return -1;
	}
	return 0;
}

static int model_flops(const char *name, int c, int h, int w, double *flops, char **why)
{
	struct sd_model *m;
	if (sd_onnx_is_path(name)) {
		/* The user's own model: its file gives its FLOPs (its shape is
		 * the file's; spotdeck checks it against the data at start). */
		uint8_t *bytes;
		size_t len;
		if (sd_onnx_read_file(name, &bytes, &len, why) < 0)
			return -1;
		int rc = sd_model_create_onnx(&m, bytes, len, name, 1, why);
		free(bytes);
		if (rc < 0)
			return -1;
	} else if (sd_model_create(&m, name, c, h, w, 10, 1, why) < 0) {
		return -1;
	}
	*flops = sd_model_flops_per_sample(m);
	sd_model_destroy(m);
	return 0;
}

/* The speed factor: the ratio of training FLOPs per image, as CM-DARE
 * found step time close to proportional to model FLOPs on one GPU type
 * (reference/seeds.md 2.9: R^2 0.92 for the FLOP ratio alone). */
int sd_plan_job_from_train(struct sd_plan_job *pj, const struct sd_train_config *t, long steps, char **why)
{
	long samples;
	int c, h, w;
	int shape_rc = dataset_shape(t, &samples, &c, &h, &w, why);
	if (shape_rc == -2)
		return -1;
	if (shape_rc < 0)
		return sd_why(why, "job: dataset '%s' has no known size", t->dataset);
	if (steps <= 0)
		steps = (long)t->epochs * (samples / t->global_batch);
	if (steps <= 0)
		return sd_why(why, "job: global batch %d is larger than the %ld training samples", t->global_batch, samples);
	double f_job, f_ref;
	if (model_flops(t->model, c, h, w, &f_job, why) < 0 || model_flops("resnet32", 3, 32, 32, &f_ref, why) < 0)
		return -1;
	memset(pj, 0, sizeof *pj);
	/* Scaling: the seeds measured ResNet-15/32 and Shake-Shake; spotdeck's
	 * models use the ResNet-32 series (the catalog's workload). */
	snprintf(pj->model, sizeof pj->model, "resnet32");
	pj->images = (double)steps * t->global_batch;
	pj->speed_factor = f_ref / f_job;
	pj->batch_per_worker = t->global_batch;
	return 0;
}

/* ---- option lists ------------------------------------------------------------ */

static int split_list(const char *arg, char items[][64], int max)
{
	int n = 0;
	const char *p = arg;
	while (*p) {
		while (*p == ' ')   /* "k80, v100" as well as "k80,v100" */
			p++;
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		while (len > 0 && p[len - 1] == ' ')
			len--;
		if (n == max || len == 0 || len >= 64)
			return -1;
		memcpy(items[n], p, len);
		items[n][len] = 0;
		n++;
		if (!e)
			break;
		p = e + 1;
		if (!*p)
			return -1;
	}
	return n;
}

static void catalog_gpus(const struct sd_catalog *cat, char *out, size_t len)
{
	out[0] = 0;
	for (int i = 0; i < cat->noffers; i++) {
		const char *g = cat->offers[i].gpu;
		int seen = 0;
		for (int j = 0; j < i && !seen; j++)
			seen = !strcasecmp(cat->offers[j].gpu, g);
		if (!seen)
			snprintf(out + strlen(out), len - strlen(out), "%s%s", out[0] ? ", " : "", g);
	}
}

/* ---- configurations ------------------------------------------------------------ */

struct cli {
	const char *job_path, *catalog, *scaling;
	char gpus[MAX_LIST][64];
	int ngpus;
	int sizes[MAX_LIST];
	int nsizes;
	char zones[MAX_LIST][64];
	int nzones;
	int spot, on_demand;
	long steps;
	int steps_given;           /* --steps was on the command line */
	long checkpoint_steps;
	enum sd_plan_placement placement;
	enum sd_plan_replace replace;
	enum sd_plan_chief chief;
	enum sd_plan_accounting accounting;
	int parameter_servers;
	double join, recovery, efficiency;
	int json;
	int progress;              /* --progress 1, --quiet -1 */
	const char *autopilot;     /* --autopilot JSON */
	double speed_factor;       /* --speed-factor, 0: the job's FLOP ratio */
};

static bool zone_allowed(const struct cli *c, const struct sd_offer *o)
{
	if (!c->nzones)
		return true;
	for (int i = 0; i < c->nzones; i++)
		if (!strcmp(c->zones[i], o->zone))
			return true;
	return false;
}

struct want_ctx {
	const struct cli *c;
};

static bool want_offer(const struct sd_offer *o, void *ctx)
{
	const struct cli *c = ((const struct want_ctx *)ctx)->c;
	if ((o->transient && !c->spot) || (!o->transient && !c->on_demand) || !zone_allowed(c, o))
		return false;
	if (!c->ngpus)
		return true;
	for (int g = 0; g < c->ngpus; g++)
		if (!strcasecmp(c->gpus[g], o->gpu))
			return true;
	return false;
}

static int build_rows(struct plan *p, const struct cli *c, char **why)
{
	const struct sd_catalog *cat = p->cat;
	char known[512];
	catalog_gpus(cat, known, sizeof known);
	for (int z = 0; z < c->nzones; z++) {
		bool found = false;
		for (int i = 0; i < cat->noffers && !found; i++)
			found = !strcmp(cat->offers[i].zone, c->zones[z]);
		if (!found)
			return sd_why(why, "--zones: no offer in zone '%s' in %s", c->zones[z], cat->file);
	}
	for (int g = 0; g < c->ngpus; g++) {
		bool any = false;
		for (int i = 0; i < cat->noffers && !any; i++)
			any = !strcasecmp(cat->offers[i].gpu, c->gpus[g]);
		if (!any)
			return sd_why(why, "--gpus: no offer of GPU '%s' in %s (it sells %s)", c->gpus[g], cat->file, known);
	}
	struct sd_plan_config base;
	sd_plan_config_init(&base, NULL, 1);
	base.placement = c->placement;
	base.replace = c->replace;
	if (c->replace == SD_PLAN_REPLACE_AUTOPILOT)
		base.autopilot = &p->autopilot;
	base.chief = c->chief;
	base.accounting = c->accounting;
	if (c->parameter_servers > 0) {
		base.parallel = SD_PLAN_PARAMETER_SERVER;
		base.parameter_servers = c->parameter_servers;
	}
	if (c->join >= 0)
		base.join_seconds = c->join;
	if (c->recovery >= 0)
		base.recovery_seconds = c->recovery;
	base.efficiency_measured = c->efficiency;
	if (c->checkpoint_steps > 0)
		base.checkpoint_images = (double)c->checkpoint_steps * p->job.batch_per_worker;
	struct sd_plan_config *cfgs = sd_calloc(MAX_ROWS, sizeof *cfgs);
	struct want_ctx wc = { c };
	int n = sd_plan_configs(cat, &base, c->sizes, c->nsizes, want_offer, &wc, cfgs, MAX_ROWS, why);
	if (n < 0) {
		free(cfgs);
		return sd_why(why, "too many configurations (at most %d): fewer --gpus or --sizes", MAX_ROWS);
	}
	for (int i = 0; i < n; i++) {
		struct row *r = &p->rows[p->nrows++];
		const struct sd_offer *o = cfgs[i].offers[0];
		memset(r, 0, sizeof *r);
		r->cfg = cfgs[i];
		r->transient = o->transient;
		snprintf(r->provider, sizeof r->provider, "%s", o->provider);
		if (o->gpu_count > 1)
			snprintf(r->gpu, sizeof r->gpu, "%dx%s", o->gpu_count, o->gpu);
		else
			snprintf(r->gpu, sizeof r->gpu, "%s", o->gpu);
	}
	free(cfgs);
	if (!p->nrows)
		return sd_why(why, "no offer matches --gpus, --zones and --spot/--on-demand in %s", cat->file);
	return 0;
}

static void config_key(const struct sd_plan_config *c, char *out, size_t len)
{
	int n = snprintf(out, len, "%d/%d/%d/%d/%d/%d/%d", c->servers, c->placement, c->parallel, c->parameter_servers,
	                 c->replace, c->chief, c->accounting);
	for (int i = 0; i < c->noffers && n > 0 && (size_t)n < len; i++)
		n += snprintf(out + n, len - (size_t)n, "|%d", c->offers[i]->index);
}

static int intern(struct plan *p, const struct sd_plan_config *c)
{
	char key[2048];
	config_key(c, key, sizeof key);
	for (int i = 0; i < p->nsims; i++)
		if (!strcmp(p->sims[i].key, key))
			return i;
	struct sim_entry *e = &p->sims[p->nsims];
	snprintf(e->key, sizeof e->key, "%s", key);
	e->cfg = *c;
	return p->nsims++;
}

/* ---- progress ----------------------------------------------------------------- */

static double since(const struct timespec *a, const struct timespec *b)
{
	return (double)(b->tv_sec - a->tv_sec) + 1e-9 * (double)(b->tv_nsec - a->tv_nsec);
}

static void on_progress(void *ctx, long done, long total)
{
	struct plan *p = ctx;
	(void)total;
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	/* Quiet for the first second (--progress: not); then at most 4 lines
	 * a second on a terminal, one every 2 s into a file. */
	if (p->progress_mode < 0 || (p->progress_mode == 0 && since(&p->t0, &now) < 1) ||
	    (p->progress_shown && since(&p->last, &now) < (p->tty ? 0.25 : 2)))
		return;
	p->last = now;
	long all = p->done_runs + done;
	fprintf(stderr, "spotdeck plan: %ld of %ld simulated runs (%.0f %%)%s", all, p->total_runs,
	        100.0 * (double)all / (double)p->total_runs, p->tty ? "\r" : "\n");
	p->progress_shown = true;
}

/* ---- output -------------------------------------------------------------------- */

static void fmt_dur(double s, char *out, size_t len)
{
	if (!isfinite(s)) {
		snprintf(out, len, "-");
		return;
	}
	long x = lround(s);
	if (x < 60)
		snprintf(out, len, "%lds", x);
	else if (x < 3600)
		snprintf(out, len, "%ldm%02lds", x / 60, x % 60);
	else if (x < 86400)
		snprintf(out, len, "%ldh%02ldm", x / 3600, (x % 3600) / 60);
	else
		snprintf(out, len, "%ldd%02ldh", x / 86400, (x % 86400) / 3600);
}

static void fmt_usd(double v, char *out, size_t len)
{
	if (!isfinite(v))
		snprintf(out, len, "-");
	else if (v < 1)
		snprintf(out, len, "$%.3f", v);
	else if (v < 1000)
		snprintf(out, len, "$%.2f", v);
	else
		snprintf(out, len, "$%.0f", v);
}

static void fmt_pct(double v, char *out, size_t len)
{
	if (!isfinite(v))
		snprintf(out, len, "-");
	else
		snprintf(out, len, "%.0f%%", 100 * v);
}

static int cmp_rows(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	double cx = x->res.cost_p50, cy = y->res.cost_p50;
	bool fx = isfinite(cx), fy = isfinite(cy);
	if (fx != fy)
		return fx ? -1 : 1;
	if (fx && cx != cy)
		return cx < cy ? -1 : 1;
	double tx = x->res.time_p50, ty = y->res.time_p50;
	if (isfinite(tx) && isfinite(ty) && tx != ty)
		return tx < ty ? -1 : 1;
	return strcmp(x->cfg.label, y->cfg.label);
}

static const char *parallel_name(const struct sd_plan_config *c)
{
	return c->parallel == SD_PLAN_PARAMETER_SERVER ? "parameter server" : "all-reduce";
}

static void print_table(const struct plan *p, const struct cli *c, const char *catalog_name)
{
	const struct sd_plan_job *j = &p->job;
	const struct sd_plan_config *c0 = &p->rows[0].cfg;
	/* What is planned: the job file, or the seeds' workload (--steps
	 * changes its length, and then it is no longer the seeds' job). */
	char what[600];
	if (c->job_path && c->steps_given)
		snprintf(what, sizeof what, "%s, %ld steps", c->job_path, c->steps);
	else if (c->job_path)
		snprintf(what, sizeof what, "%s", c->job_path);
	else if (c->steps_given)
		snprintf(what, sizeof what, "ResNet-32 on CIFAR-10, %ld steps of %d", c->steps,
		         j->batch_per_worker);
	else
		snprintf(what, sizeof what, "ResNet-32 on CIFAR-10, 64,000 steps of 128: the seeds' job");
	if (p->tokens_per_sample > 0) {   /* a language model's samples are windows of tokens */
		printf("spotdeck plan: %.4g M tokens in windows of %d (%s), %d runs per row, seed %llu\n",
		       j->images * p->tokens_per_sample / 1e6, p->tokens_per_sample, what, p->opt.runs,
		       (unsigned long long)p->opt.seed);
		/* The speeds are the catalog's GPU ones scaled by FLOPs, but the
		 * trainer keeps a language model on the CPU executor
		 * (engine/train.c choose_backend): say what the figures are. */
		printf("note: %s\n", SD_PLAN_LM_CPU_NOTE);
	} else
		printf("spotdeck plan: %.4g M images (%s), %d runs per row, seed %llu\n", j->images / 1e6,
		       what, p->opt.runs, (unsigned long long)p->opt.seed);
	char ps[32] = "";
	if (c0->parallel == SD_PLAN_PARAMETER_SERVER)
		snprintf(ps, sizeof ps, " with %d PS", c0->parameter_servers);
	printf("market %s (simulated); %s%s; %s %s; checkpoint every %.0f steps; %s\n\n", catalog_name,
	       parallel_name(c0), ps, c0->replace == SD_PLAN_REPLACE_AUTOPILOT ? "policy" : "replace",
	       sd_plan_replace_name(c0->replace),
	       c0->checkpoint_images / j->batch_per_worker,
	       c0->placement == SD_PLAN_PLACE_ONE_ZONE ? "each run in one of the row's zones" : "servers spread over the zones");
	char dl[48] = "", bd[48] = "";
	bool has_dl = p->opt.deadline_seconds > 0, has_bd = p->opt.budget_usd > 0;
	if (has_dl) {
		char d[32];
		fmt_dur(p->opt.deadline_seconds, d, sizeof d);
		snprintf(dl, sizeof dl, "P(<%s)", d);
	}
	if (has_bd) {
		char u[32];
		fmt_usd(p->opt.budget_usd, u, sizeof u);
		snprintf(bd, sizeof bd, "P(<%s)", u);
	}
	printf("  %-26s %5s  %8s %8s %8s  %8s %8s %8s", "configuration", "zones", "time p10", "median", "p90",
	       "cost p10", "median", "p90");
	if (has_dl)
		printf(" %9s", dl);
	if (has_bd)
		printf(" %9s", bd);
	printf(" %6s %6s %8s %7s\n", "revoc.", "failed", "speed-up", "saving");
	bool any_refused = false;
	for (int i = 0; i < p->nrows; i++) {
		const struct row *r = &p->rows[i];
		const struct sd_plan_result *s = &r->res;
		char t[3][32], u[3][32], pd[32], pb[32], fail[32], sp[32], sv[32];
		fmt_dur(s->time_p10, t[0], 32);
		fmt_dur(s->time_p50, t[1], 32);
		fmt_dur(s->time_p90, t[2], 32);
		fmt_usd(s->cost_p10, u[0], 32);
		fmt_usd(s->cost_p50, u[1], 32);
		fmt_usd(s->cost_p90, u[2], 32);
		fmt_pct(s->p_deadline, pd, sizeof pd);
		fmt_pct(s->p_budget, pb, sizeof pb);
		snprintf(fail, sizeof fail, "%.1f%%", 100.0 * s->failed / s->runs);
		if (isfinite(s->speedup))
			snprintf(sp, sizeof sp, "%.2fx", s->speedup);
		else
			snprintf(sp, sizeof sp, "-");
		fmt_pct(s->saving, sv, sizeof sv);
		char label[80];
		snprintf(label, sizeof label, "%s%s", r->cfg.label, s->p_refused > 0 ? " !" : "");
		any_refused |= s->p_refused > 0;
		printf("%c %-26s %5d  %8s %8s %8s  %8s %8s %8s", s->pareto ? '*' : ' ', label, r->cfg.noffers, t[0],
		       t[1], t[2], u[0], u[1], u[2]);
		if (has_dl)
			printf(" %9s", pd);
		if (has_bd)
			printf(" %9s", pb);
		printf(" %6.2f %6s %8s %7s\n", s->revocations_mean, fail, sp, sv);
	}
	printf("\n* on the time/cost frontier: no other row is both faster and cheaper (medians).\n");
	if (any_refused)
		printf("! the market refused some requests (capacity, or a storm): those runs waited or trained with\n"
		       "  fewer servers; see p_refused in --json.\n");
	printf("Times from the request to the last step; costs by the provider's billing; medians and 10th/90th\n"
	       "percentiles over the runs that finished.  revoc.: revocations per run; speed-up: against one\n"
	       "on-demand server of the row's GPU (median times); saving: mean cost against the same servers\n"
	       "on-demand.  All figures are simulated on the market model, not measured.\n");
}

static cJSON *num(double v)
{
	return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull();
}

static cJSON *triple(double p10, double p50, double p90, double mean)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddItemToObject(o, "p10", num(p10));
	cJSON_AddItemToObject(o, "median", num(p50));
	cJSON_AddItemToObject(o, "p90", num(p90));
	cJSON_AddItemToObject(o, "mean", num(mean));
	return o;
}

static void print_json(const struct plan *p, const struct cli *c, const char *catalog_path)
{
	cJSON *root = cJSON_CreateObject();
	cJSON_AddStringToObject(root, "type", "plan");
	cJSON_AddStringToObject(root, "catalog", catalog_path);
	cJSON_AddStringToObject(root, "job", c->job_path ? c->job_path : "");
	cJSON_AddItemToObject(root, "images", num(p->job.images));
	cJSON_AddItemToObject(root, "speed_factor", num(p->job.speed_factor));
	if (p->tokens_per_sample > 0) {
		cJSON_AddNumberToObject(root, "tokens_per_sample", p->tokens_per_sample);
		cJSON_AddStringToObject(root, "note", SD_PLAN_LM_CPU_NOTE);
	}
	cJSON_AddNumberToObject(root, "runs", p->opt.runs);
	cJSON_AddNumberToObject(root, "seed", (double)p->opt.seed);
	cJSON_AddItemToObject(root, "deadline_s", p->opt.deadline_seconds > 0 ? num(p->opt.deadline_seconds)
	                                                                         : cJSON_CreateNull());
	cJSON_AddItemToObject(root, "budget_usd", p->opt.budget_usd > 0 ? num(p->opt.budget_usd) : cJSON_CreateNull());
	cJSON_AddBoolToObject(root, "simulated", 1);
	cJSON *arr = cJSON_AddArrayToObject(root, "configurations");
	for (int i = 0; i < p->nrows; i++) {
		const struct row *r = &p->rows[i];
		const struct sd_plan_result *s = &r->res;
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "label", r->cfg.label);
		cJSON_AddStringToObject(o, "gpu", r->gpu);
		cJSON_AddNumberToObject(o, "servers", r->cfg.servers);
		cJSON_AddBoolToObject(o, "transient", r->transient);
		cJSON_AddStringToObject(o, "provider", r->provider);
		cJSON *offers = cJSON_AddArrayToObject(o, "offers");
		for (int k = 0; k < r->cfg.noffers; k++)
			cJSON_AddItemToArray(offers, cJSON_CreateString(r->cfg.offers[k]->id));
		cJSON_AddStringToObject(o, "placement", r->cfg.placement == SD_PLAN_PLACE_ONE_ZONE ? "one-zone" : "spread");
		cJSON_AddStringToObject(o, "parallel", parallel_name(&r->cfg));
		cJSON_AddStringToObject(o, "replace", sd_plan_replace_name(r->cfg.replace));
		cJSON_AddStringToObject(o, "policy", sd_plan_replace_name(r->cfg.replace));
		cJSON_AddNumberToObject(o, "runs", s->runs);
		cJSON_AddNumberToObject(o, "completed", s->completed);
		cJSON_AddNumberToObject(o, "failed", s->failed);
		cJSON_AddItemToObject(o, "time_s", triple(s->time_p10, s->time_p50, s->time_p90, s->time_mean));
		cJSON_AddItemToObject(o, "training_s", triple(NAN, s->train_p50, NAN, s->train_mean));
		cJSON_AddItemToObject(o, "cost_usd", triple(s->cost_p10, s->cost_p50, s->cost_p90, s->cost_mean));
		cJSON_AddItemToObject(o, "p_deadline", num(s->p_deadline));
		cJSON_AddItemToObject(o, "p_budget", num(s->p_budget));
		cJSON_AddItemToObject(o, "revocations_mean", num(s->revocations_mean));
		cJSON_AddItemToObject(o, "p_revoked", num(s->p_revoked));
		cJSON_AddItemToObject(o, "p_refused", num(s->p_refused));
		cJSON_AddItemToObject(o, "speedup", num(s->speedup));
		cJSON_AddItemToObject(o, "saving", num(s->saving));
		cJSON_AddBoolToObject(o, "pareto", s->pareto);
		cJSON_AddItemToArray(arr, o);
	}
	char *text = cJSON_PrintUnformatted(root);
	if (!text)
		sd_oom();
	printf("%s\n", text);
	free(text);
	cJSON_Delete(root);
}

/* ---- main ------------------------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
"usage: spotdeck plan [--job FILE] [--catalog FILE] [--gpus k80,p100,...] [--sizes 1,2,4,8]\n"
"                     [--spot|--on-demand|--both] [--deadline 2h] [--budget USD] [--runs N]\n"
"                     [--seed N] [--json] [options]\n"
"Simulates many runs of each configuration (GPU x cluster size x spot/on-demand) on the\n"
"market model and prints their time, cost and risk, sorted by cost, with the time/cost\n"
"frontier marked.  See spotdeck-plan(1).\n"
"  --job FILE           job file (spotdeck-job(5)); default: ResNet-32 on CIFAR-10, 64,000\n"
"                       steps of 128 images (the seeds' workload)\n"
"  --steps N            optimizer steps instead of the job's epochs\n"
"  --catalog FILE       market catalog (default gce-2019.json; gce-2019-02.json is Feb 2019)\n"
"  --scaling FILE       cluster scaling data (default scaling-2019.json)\n"
"  --gpus LIST          GPU types (default: every one the catalog sells)\n"
"  --sizes LIST         servers per cluster, 1 to 256 (default 1,2,4,8)\n"
"  --zones LIST         only offers in these zones\n"
"  --spot, --on-demand, --both   which offers (default both)\n"
"  --placement HOW      one-zone (default: each run in one of the zones) or spread\n"
"  --policy HOW         after a revocation: none, same (default), cheapest, other-zone, or\n"
"                       autopilot (adds, swaps and drops servers for --deadline or --budget)\n"
"  --replace HOW        the same for the first four (an older name)\n"
"  --autopilot JSON     the autopilot's objective, as the job file's \"autopilot\" field\n"
"  --parameter-servers N  asynchronous PS training with N on-demand PS (default 0: all-reduce)\n"
"  --chief HOW          none (default), fails (losing the first worker fails the run) or restarts\n"
"  --accounting HOW     provider (default) or training (the seeds': training window only)\n"
"  --checkpoint-every N steps between checkpoints (default: the job's, or 4000)\n"
"  --join SECONDS       a booted server's worker joining (default 78.74, TF cold start)\n"
"  --recovery SECONDS   re-forming training after a change (default 19.04, TF warm start)\n"
"  --efficiency E       measured all-reduce scaling efficiency, 0 < E <= 1\n"
"  --speed-factor F     the job's speed over the catalog's ResNet-32 (default: their FLOP ratio)\n"
"  --hazard-scale X, --boot-scale X, --notice-scale X\n"
"                       the sim market's knobs, as a job's provider gives them (default 1)\n"
"  --deadline DURATION  show P(done within it), e.g. 45m, 2h, 1h30m\n"
"  --budget USD         show P(cost within it)\n"
"  --runs N             simulated runs per configuration (default 2000)\n"
"  --seed N             random seed (default 1); the same seed gives the same table\n"
"  --start-hour H       start every run at this hour of the market's day (default: any)\n"
"  --json               one JSON object on stdout instead of the table\n"
"  --progress, --quiet  progress on stderr from the start, or never (default: after 1 s)\n");
}

static int parse_long(const char *s, long lo, long hi, long *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

static int parse_double(const char *s, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v))
		return -1;
	*out = v;
	return 0;
}

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("spotdeck plan: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	return 1;
}

enum { O_JOB = 256, O_CATALOG, O_SCALING, O_GPUS, O_SIZES, O_ZONES, O_SPOT, O_OD, O_BOTH, O_PLACE, O_REPLACE,
       O_PS, O_CHIEF, O_ACCT, O_CKPT, O_JOIN, O_RECOVERY, O_EFF, O_DEADLINE, O_BUDGET, O_RUNS, O_SEED,
       O_HOUR, O_JSON, O_STEPS, O_PROGRESS, O_QUIET, O_HELP, O_POLICY, O_AUTOPILOT, O_HAZARD, O_BOOT,
       O_NOTICE, O_SPEED };

static const struct option longopts[] = {
	{ "job", required_argument, 0, O_JOB }, { "catalog", required_argument, 0, O_CATALOG },
	{ "scaling", required_argument, 0, O_SCALING }, { "gpus", required_argument, 0, O_GPUS },
	{ "sizes", required_argument, 0, O_SIZES }, { "zones", required_argument, 0, O_ZONES },
	{ "spot", no_argument, 0, O_SPOT }, { "on-demand", no_argument, 0, O_OD },
	{ "both", no_argument, 0, O_BOTH }, { "placement", required_argument, 0, O_PLACE },
	{ "replace", required_argument, 0, O_REPLACE }, { "parameter-servers", required_argument, 0, O_PS },
	{ "chief", required_argument, 0, O_CHIEF }, { "accounting", required_argument, 0, O_ACCT },
	{ "checkpoint-every", required_argument, 0, O_CKPT }, { "join", required_argument, 0, O_JOIN },
	{ "recovery", required_argument, 0, O_RECOVERY }, { "efficiency", required_argument, 0, O_EFF },
	{ "deadline", required_argument, 0, O_DEADLINE }, { "budget", required_argument, 0, O_BUDGET },
	{ "runs", required_argument, 0, O_RUNS }, { "seed", required_argument, 0, O_SEED },
	{ "start-hour", required_argument, 0, O_HOUR }, { "json", no_argument, 0, O_JSON },
	{ "steps", required_argument, 0, O_STEPS }, { "progress", no_argument, 0, O_PROGRESS },
	{ "quiet", no_argument, 0, O_QUIET }, { "help", no_argument, 0, O_HELP },
	{ "policy", required_argument, 0, O_POLICY }, { "autopilot", required_argument, 0, O_AUTOPILOT },
	{ "hazard-scale", required_argument, 0, O_HAZARD }, { "boot-scale", required_argument, 0, O_BOOT },
	{ "notice-scale", required_argument, 0, O_NOTICE }, { "speed-factor", required_argument, 0, O_SPEED },
	{ 0, 0, 0, 0 },
};

/* --sizes: servers per cluster, each from 1 to SD_PLAN_MAX_SERVERS.
 * Returns 0, or fail()'s exit status. */
static int parse_sizes(const char *arg, struct cli *c)
{
	char items[MAX_LIST][64];
	long v;
	int n = split_list(arg, items, MAX_LIST);
	if (n < 1)
		return fail("--sizes: '%s': expected cluster sizes separated by commas, e.g. 1,2,4,8", arg);
	for (int i = 0; i < n; i++) {
		if (parse_long(items[i], 1, SD_PLAN_MAX_SERVERS, &v) < 0)
			return fail("--sizes: '%s': a cluster size is a whole number of servers from 1 to %d",
			            items[i], SD_PLAN_MAX_SERVERS);
		c->sizes[i] = (int)v;
	}
	c->nsizes = n;
	return 0;
}

/* The options that shape the configurations: which offers, and how a
 * cluster of them trains and recovers.  Returns 0, fail()'s exit status
 * for a bad value, or -1 when o is none of them. */
static int parse_config_option(int o, const char *arg, struct cli *c)
{
	long v;
	switch (o) {
	case O_JOB: c->job_path = arg; break;
	case O_CATALOG: c->catalog = arg; break;
	case O_SCALING: c->scaling = arg; break;
	case O_GPUS:
		if ((c->ngpus = split_list(arg, c->gpus, MAX_LIST)) < 1)
			return fail("--gpus: '%s': expected GPU types separated by commas, e.g. k80,v100", arg);
		break;
	case O_ZONES:
		if ((c->nzones = split_list(arg, c->zones, MAX_LIST)) < 1)
			return fail("--zones: '%s': expected zones separated by commas", arg);
		break;
	case O_SIZES: return parse_sizes(arg, c);
	case O_SPOT: c->spot = 1; break;
	case O_OD: c->on_demand = 1; break;
	case O_BOTH: c->spot = c->on_demand = 1; break;
	case O_PLACE:
		if (!strcmp(arg, "one-zone"))
			c->placement = SD_PLAN_PLACE_ONE_ZONE;
		else if (!strcmp(arg, "spread"))
			c->placement = SD_PLAN_PLACE_SPREAD;
		else
			return fail("--placement: '%s': expected one-zone or spread", arg);
		break;
	case O_REPLACE:
		if (sd_plan_replace_parse(arg, &c->replace) < 0 || c->replace == SD_PLAN_REPLACE_AUTOPILOT)
			return fail("--replace: '%s': expected none, same, cheapest or other-zone (the autopilot is "
			            "--policy autopilot)", arg);
		break;
	case O_POLICY:
		if (sd_plan_replace_parse(arg, &c->replace) < 0)
			return fail("--policy: '%s': expected none, same, cheapest, other-zone or autopilot", arg);
		break;
	case O_AUTOPILOT: c->autopilot = arg; break;
	case O_PS:
		if (parse_long(arg, 0, 64, &v) < 0)
			return fail("--parameter-servers: '%s': expected 0 (all-reduce) to 64", arg);
		c->parameter_servers = (int)v;
		break;
	case O_CHIEF:
		if (!strcmp(arg, "none"))
			c->chief = SD_PLAN_CHIEF_NONE;
		else if (!strcmp(arg, "fails"))
			c->chief = SD_PLAN_CHIEF_FAILS_RUN;
		else if (!strcmp(arg, "restarts"))
			c->chief = SD_PLAN_CHIEF_RESTARTS;
		else
			return fail("--chief: '%s': expected none, fails or restarts", arg);
		break;
	case O_ACCT:
		if (!strcmp(arg, "provider"))
			c->accounting = SD_PLAN_ACCOUNT_PROVIDER;
		else if (!strcmp(arg, "training"))
			c->accounting = SD_PLAN_ACCOUNT_TRAINING;
		else
			return fail("--accounting: '%s': expected provider or training", arg);
		break;
	case O_CKPT:
		if (parse_long(arg, 1, 1000000000L, &c->checkpoint_steps) < 0)
			return fail("--checkpoint-every: '%s': expected a positive number of steps", arg);
		break;
	case O_JOIN:
	case O_RECOVERY: {
		double d;
		if (parse_double(arg, &d) < 0 || d < 0 || d > 86400)
			return fail("--%s: '%s': expected seconds from 0 to 86400", o == O_JOIN ? "join" : "recovery",
			            arg);
		*(o == O_JOIN ? &c->join : &c->recovery) = d;
		break;
	}
	case O_EFF:
		if (parse_double(arg, &c->efficiency) < 0 || !(c->efficiency > 0) || c->efficiency > 1)
			return fail("--efficiency: '%s': expected a number in (0, 1]", arg);
		break;
	default:
		return -1;
	}
	return 0;
}

/* The options of the simulated runs (how many, how long, what to score)
 * and of the output.  Returns 0, fail()'s exit status for a bad value, or
 * -1 when o is none of them. */
static int parse_run_option(int o, const char *arg, struct cli *c, struct sd_plan_options *opt)
{
	long v;
	switch (o) {
	case O_STEPS:
		if (parse_long(arg, 1, 1000000000000L, &c->steps) < 0)
			return fail("--steps: '%s': expected a positive number of steps", arg);
		c->steps_given = 1;
		break;
	case O_DEADLINE: {
		char *why = NULL;
		if (sd_plan_parse_duration(arg, "--deadline", &opt->deadline_seconds, &why) < 0) {
			fail("%s", why);
			free(why);
			return 1;
		}
		break;
	}
	case O_BUDGET:
		if (parse_double(arg, &opt->budget_usd) < 0 || !(opt->budget_usd > 0))
			return fail("--budget: '%s': expected a positive amount of USD", arg);
		break;
	case O_RUNS:
		if (parse_long(arg, 1, 10000000, &v) < 0)
			return fail("--runs: '%s': expected 1 to 10000000 runs", arg);
		opt->runs = (int)v;
		break;
	case O_HAZARD:
	case O_BOOT:
	case O_NOTICE:
	case O_SPEED: {
		/* The sim market's knobs (spotdeck-job(5)), so that a live sim
		 * run can be planned as it runs; the speed factor, so that its
		 * measured speed can. */
		static const char *const names[] = { "hazard-scale", "boot-scale", "notice-scale", "speed-factor" };
		double d;
		if (parse_double(arg, &d) < 0 || !(d > 0) || d > 1e6)
			return fail("--%s: '%s': expected a positive number", names[o - O_HAZARD], arg);
		if (o == O_HAZARD)
			opt->hazard_scale = d;
		else if (o == O_BOOT)
			opt->boot_scale = d;
		else if (o == O_NOTICE)
			opt->notice_scale = d;
		else
			c->speed_factor = d;
		break;
	}
	case O_SEED:
		if (parse_long(arg, 0, LONG_MAX, &v) < 0)
			return fail("--seed: '%s': expected a whole number >= 0", arg);
		opt->seed = (uint64_t)v;
		break;
	case O_HOUR:
		if (parse_double(arg, &opt->start_hour) < 0 || opt->start_hour < 0 || opt->start_hour >= 24)
			return fail("--start-hour: '%s': expected an hour in [0, 24)", arg);
		break;
	case O_JSON: c->json = 1; break;
	case O_PROGRESS: c->progress = 1; break;
	case O_QUIET: c->progress = -1; break;
	default:
		return -1;
	}
	return 0;
}

/* Reads the command line into c and opt and fills in the defaults of what
 * it left out.  Returns -1 to go on planning, or the exit status to stop
 * with: 0 after --help, 1 for a bad value, 2 for a usage error. */
static int parse_command_line(int argc, char **argv, struct cli *c, struct sd_plan_options *opt)
{
	int o;
	optind = 1;
	opterr = 0;
	while ((o = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (o == O_HELP) {
			usage(stdout);
			return 0;
		}
		int rc = parse_config_option(o, optarg, c);
		if (rc < 0)
			rc = parse_run_option(o, optarg, c, opt);
		if (rc < 0) {
			fprintf(stderr, "spotdeck plan: unknown option or missing value: '%s' (see --help)\n", argv[optind - 1]);
			return 2;
		}
		if (rc > 0)
			return rc;
	}
	if (optind < argc) {
		fprintf(stderr, "spotdeck plan: unexpected argument '%s' (see --help)\n", argv[optind]);
		return 2;
	}
	if (!c->spot && !c->on_demand)
		c->spot = c->on_demand = 1;
	if (!c->nsizes) {
		static const int def[] = { 1, 2, 4, 8 };
		memcpy(c->sizes, def, sizeof def);
		c->nsizes = 4;
	}
	return -1;
}

/* The job to plan: the --job file, or the seeds' workload (ResNet-32 on
 * CIFAR-10, 64,000 steps of 128, a checkpoint every 4,000 steps).  Fills
 * job and p->job; the --steps and --checkpoint-every left out take the
 * job's values. */
static int load_job(struct plan *p, struct cli *c, struct sd_job *job, char **why)
{
	sd_job_defaults(job);
	if (c->job_path) {
		if (sd_job_load(job, c->job_path, why) < 0)
			return -1;
		/* What spotdeck itself checks before it starts a run (its data,
		 * an ONNX model against the data): a job it would refuse is not
		 * planned either. */
		char *e = NULL;
		if (sd_train_check_data(&job->train, &e) < 0 ||
		    sd_train_check_model(&job->train, NULL, 0, NULL, &e) < 0) {
			sd_why(why, "%s: %s", c->job_path, e);
			free(e);
			return -1;
		}
	} else {
		snprintf(job->train.model, sizeof job->train.model, "resnet32");
		snprintf(job->train.dataset, sizeof job->train.dataset, "cifar10");
		job->train.global_batch = 128;
		if (!c->steps)
			c->steps = 64000;
		if (!c->checkpoint_steps)
			c->checkpoint_steps = 4000;
	}
	if (!c->checkpoint_steps && job->checkpoint_every > 0)
		c->checkpoint_steps = job->checkpoint_every;
	if (sd_plan_job_from_train(&p->job, &job->train, c->steps, why) < 0)
		return -1;
	if (!strcmp(job->train.dataset, "tokens"))
		p->tokens_per_sample = job->train.block_size;
	if (c->speed_factor > 0)
		p->job.speed_factor = c->speed_factor;
	return 0;
}

/* The market catalog (--catalog, the job's, or gce-2019.json) and the
 * cluster scaling data, looked up by sd_plan_data_path; the catalog's path
 * goes into catalog_path (len bytes) for the output. */
static int load_market(struct plan *p, const struct cli *c, const struct sd_job *job, char *catalog_path,
                       size_t len, char **why)
{
	char scaling_path[PATH_MAX + 64];
	const char *cname = c->catalog ? c->catalog : job->catalog[0] && c->job_path ? job->catalog : "gce-2019.json";
	if (sd_plan_data_path(cname, catalog_path, len) < 0)
		return sd_why(why, "--catalog: %s: no such file (nor in the data directory)", cname);
	if (sd_catalog_load(&p->cat, catalog_path, why) < 0)
		return -1;
	const char *sname = c->scaling ? c->scaling : "scaling-2019.json";
	if (sd_plan_data_path(sname, scaling_path, sizeof scaling_path) < 0)
		return sd_why(why, "--scaling: %s: no such file (nor in the data directory)", sname);
	if (sd_plan_scaling_load(&p->scaling, scaling_path, why) < 0)
		return -1;
	p->have_scaling = true;
	return 0;
}

/* Each row needs three simulations: its own, its on-demand twin (for the
 * saving) and its baseline (for the speed-up); rows share equal ones. */
static void intern_simulations(struct plan *p)
{
	for (int i = 0; i < p->nrows; i++) {
		struct row *r = &p->rows[i];
		struct sd_plan_config twin, base;
		r->self = intern(p, &r->cfg);
		r->twin = r->base = -1;
		/* The yardsticks are plain clusters: on-demand servers need no
		 * autopilot, and a saving against one that moves would say little. */
		if (sd_plan_config_on_demand(p->cat, &r->cfg, &twin, NULL) == 0) {
			if (twin.replace == SD_PLAN_REPLACE_AUTOPILOT)
				twin.replace = SD_PLAN_REPLACE_SAME;
			r->twin = intern(p, &twin);
		}
		if (sd_plan_config_baseline(p->cat, &r->cfg, &base, NULL) == 0) {
			if (base.replace == SD_PLAN_REPLACE_AUTOPILOT)
				base.replace = SD_PLAN_REPLACE_SAME;
			r->base = intern(p, &base);
		}
	}
}

/* Runs every interned simulation, with progress on stderr as
 * progress_mode says (see struct plan). */
static int simulate_all(struct plan *p, int progress_mode, char **why)
{
	p->total_runs = (long)p->nsims * p->opt.runs;
	p->tty = isatty(2);
	p->progress_mode = progress_mode;
	clock_gettime(CLOCK_MONOTONIC, &p->t0);
	p->last = p->t0;
	p->opt.progress = on_progress;
	p->opt.progress_ctx = p;
	for (int i = 0; i < p->nsims; i++) {
		if (sd_plan_simulate(p->cat, &p->scaling, &p->job, &p->sims[i].cfg, &p->opt, &p->sims[i].res, why) < 0)
			return -1;
		p->done_runs += p->opt.runs;
	}
	if (p->progress_shown && p->tty)
		fprintf(stderr, "%*s\r", 60, "");
	else if (p->progress_shown)
		fprintf(stderr, "spotdeck plan: %ld of %ld simulated runs (100 %%)\n", p->total_runs, p->total_runs);
	return 0;
}

/* Gives each row its results, its speed-up and saving against its
 * baseline and twin, and its place on the time/cost frontier; then sorts
 * the rows by cost. */
static void rank_rows(struct plan *p)
{
	for (int i = 0; i < p->nrows; i++) {
		struct row *r = &p->rows[i];
		r->res = p->sims[r->self].res;
		sd_plan_compare(&r->res, r->base >= 0 ? &p->sims[r->base].res : NULL,
		                r->twin >= 0 ? &p->sims[r->twin].res : NULL);
	}
	struct sd_plan_result *res = sd_calloc((size_t)p->nrows, sizeof *res);
	for (int i = 0; i < p->nrows; i++)
		res[i] = p->rows[i].res;
	sd_plan_pareto(res, p->nrows);
	for (int i = 0; i < p->nrows; i++)
		p->rows[i].res.pareto = res[i].pareto;
	free(res);
	qsort(p->rows, (size_t)p->nrows, sizeof *p->rows, cmp_rows);
}

/* The autopilot's objective: --autopilot's JSON, else the --deadline or
 * --budget to meet with its default limits. */
static int load_objective(struct plan *p, const struct cli *c, char **why)
{
	if (c->autopilot) {
		if (sd_autopilot_objective_parse_text(&p->autopilot, c->autopilot, p->cat, "--autopilot", why) < 0)
			return -1;
		/* The table's P(on time) is the objective's deadline: one given
		 * twice, differently, would leave the reader guessing which the
		 * autopilot aimed at. */
		if (p->autopilot.goal == SD_AUTOPILOT_DEADLINE && p->opt.deadline_seconds > 0 &&
		    p->opt.deadline_seconds != p->autopilot.deadline_seconds)
			return sd_why(why, "--deadline (%.0f s) and --autopilot's deadline (%.0f s) differ: give it once",
			              p->opt.deadline_seconds, p->autopilot.deadline_seconds);
		if (p->autopilot.goal == SD_AUTOPILOT_BUDGET && p->opt.budget_usd > 0 &&
		    p->opt.budget_usd != p->autopilot.budget_usd)
			return sd_why(why, "--budget ($%.2f) and --autopilot's budget ($%.2f) differ: give it once",
			              p->opt.budget_usd, p->autopilot.budget_usd);
		if (p->autopilot.goal == SD_AUTOPILOT_DEADLINE && !(p->opt.deadline_seconds > 0))
			p->opt.deadline_seconds = p->autopilot.deadline_seconds;
		if (p->autopilot.goal == SD_AUTOPILOT_BUDGET && !(p->opt.budget_usd > 0))
			p->opt.budget_usd = p->autopilot.budget_usd;
		return 0;
	}
	sd_autopilot_objective_init(&p->autopilot);
	if (p->opt.deadline_seconds > 0) {
		p->autopilot.deadline_seconds = p->opt.deadline_seconds;
	} else if (p->opt.budget_usd > 0) {
		p->autopilot.goal = SD_AUTOPILOT_BUDGET;
		p->autopilot.budget_usd = p->opt.budget_usd;
	} else {
		return sd_why(why, "--policy autopilot: needs --deadline, --budget or --autopilot");
	}
	return 0;
}

/* Frees what p holds (p itself is the caller's). */
static void plan_free(struct plan *p)
{
	free(p->rows);
	free(p->sims);
	if (p->have_scaling)
		sd_plan_scaling_free(&p->scaling);
	sd_catalog_free(p->cat);
}

int sd_plan_main(int argc, char **argv)
{
	struct cli c = { .join = -1, .recovery = -1, .placement = SD_PLAN_PLACE_ONE_ZONE,
	                 .replace = SD_PLAN_REPLACE_SAME };
	struct plan p;
	memset(&p, 0, sizeof p);
	sd_plan_options_init(&p.opt);
	int rc = parse_command_line(argc, argv, &c, &p.opt);
	if (rc >= 0)
		return rc;
	char *why = NULL;
	struct sd_job job;
	char catalog_path[PATH_MAX + 64];
	if (load_job(&p, &c, &job, &why) < 0 || load_market(&p, &c, &job, catalog_path, sizeof catalog_path, &why) < 0)
		goto bad;
	if (c.autopilot && c.replace != SD_PLAN_REPLACE_AUTOPILOT) {
		sd_why(&why, "--autopilot: only with --policy autopilot");
		goto bad;
	}
	if (c.replace == SD_PLAN_REPLACE_AUTOPILOT && load_objective(&p, &c, &why) < 0)
		goto bad;
	p.rows = sd_calloc(MAX_ROWS, sizeof *p.rows);
	p.sims = sd_calloc(3 * MAX_ROWS, sizeof *p.sims);
	if (build_rows(&p, &c, &why) < 0)
		goto bad;
	intern_simulations(&p);
	if (simulate_all(&p, c.progress, &why) < 0)
		goto bad;
	rank_rows(&p);
	const char *base_name = strrchr(catalog_path, '/');
	if (c.json)
		print_json(&p, &c, catalog_path);
	else
		print_table(&p, &c, base_name ? base_name + 1 : catalog_path);
	plan_free(&p);
	return 0;
bad:
	fprintf(stderr, "spotdeck plan: %s\n", why ? why : "failed");
	free(why);
	plan_free(&p);
	return 1;
}
