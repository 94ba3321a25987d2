/* tests/app/test-view-model.c - the cockpit's view model (src/app/view-model.c)
 * fed by a real controller, fleet and sim provider, not the render tests'
 * fixture: a run whose job acquires a transient K80 and an on-demand P100
 * from the GCE 2019 catalog (data/gce-2019.json), whose boot is stretched
 * so that no worker process starts.  Every figure the view shows is checked
 * against the catalog file, read separately:
 *   - one offer row per catalog offer, with its price, speed (x GPUs, and
 *     scaled from the catalog's ResNet-32 to the job's mlp by their training
 *     FLOPs per image, marked estimated), $/Mimg
 *     (usd_per_hour / (img/s x 3600) x 1e6), transient flag, P(revoked) 0 for
 *     on-demand, and the '*' mark (price_estimated) set exactly where the
 *     catalog's price_source says "estimated";
 *   - the rows sorted by $/Mimg;
 *   - one server row per acquired server: its offer, zone, GPU, type, the
 *     rate it is billed at and its estimated mark, no rank (not training);
 *   - the header's "now" rate estimated because the P100's price is. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "src/app/view-model.h"
#include "src/controller/controller.h"
#include "src/market/catalog.h"
#include "src/market/market-model.h"
#include "src/proto/job.h"
#include "engine/model.h"
#include "tests/check.h"
#include "tests/tmpdir.h"

#define K80 "gce/us-west1-b/k80/spot"
#define P100 "gce/us-west1-b/p100/on-demand"

static int exited = -1;

static void on_exit_cb(struct sd_controller *c, int status, void *ctx)
{
	(void)c;
	(void)ctx;
	exited = status;
}

static void on_event_cb(const struct sd_event *ev, void *ctx)
{
	struct sd_view_model **vm = ctx;
	if (*vm)
		sd_view_model_on_event(*vm, ev);
}

/* A command of the program's own, through the controller's table: it
 * counts its runs and the context it was given. */
static int probe_runs;
static void *probe_ctx;

static int cmd_probe(void *ctx, int argc, char **argv, char **why)
{
	(void)argc;
	(void)argv;
	(void)why;
	probe_runs++;
	probe_ctx = ctx;
	return 0;
}

static const struct sd_app_command app_commands[] = {
	{ "probe", "", 0, 0, "count a run", cmd_probe },
	{ NULL, NULL, 0, 0, NULL, NULL },
};

/* Runs line through the command table; returns its *why ("" for none),
 * in buf. */
static int command(struct sd_controller *c, const char *line, char *buf, size_t len)
{
	char *why = NULL;
	int rc = sd_controller_command(c, line, &why);
	snprintf(buf, len, "%s", why ? why : "");
	free(why);
	return rc;
}

static void on_timer(uv_timer_t *t)
{
	uv_stop(t->loop);
}

/* Runs loop for ms milliseconds. */
static void run_for(uv_loop_t *loop, int ms)
{
	uv_timer_t t;
	uv_timer_init(loop, &t);
	uv_timer_start(&t, on_timer, (uint64_t)ms, 0);
	uv_run(loop, UV_RUN_DEFAULT);
	uv_close((uv_handle_t *)&t, NULL);
	uv_run(loop, UV_RUN_NOWAIT);
}

static void on_closed(void *arg)
{
	++*(int *)arg;
}

static void close_walk(uv_handle_t *h, void *arg)
{
	(void)arg;
	if (!uv_is_closing(h))
		uv_close(h, NULL);
}

static int estimated(const struct sd_offer *o)
{
	return o->price_source && !strncmp(o->price_source, "estimated", 9);
}

static double speed_factor;

/* Training FLOPs per image of a built-in model on images of (c, h, w). */
static double flops(const char *name, int c, int h, int w)
{
	struct sd_model *m;
	char *why = NULL;
	if (sd_model_create(&m, name, c, h, w, 10, 1, &why) < 0) {
		fprintf(stderr, "%s\n", why);
		exit(1);
	}
	double f = sd_model_flops_per_sample(m);
	sd_model_destroy(m);
	return f;
}

static void check_offers(const struct sd_view *v, const struct sd_catalog *cat)
{
	CHECK_INT(v->noffers, cat->noffers);
	int nest = 0, nmeas = 0, nrisky = 0;
	for (int i = 0; i < v->noffers; i++) {
		const struct sd_view_offer *vo = &v->offers[i];
		const struct sd_offer *o = sd_catalog_find(cat, vo->id);
		CHECK(o != NULL, "view offer %s is not in the catalog", vo->id);
		if (!o)
			continue;
		CHECK_INT(vo->price_estimated, estimated(o));
		if (vo->price_estimated != estimated(o))
			fprintf(stderr, "  offer %s: price_source \"%s\"\n", vo->id, o->price_source ? o->price_source : "");
		nest += estimated(o);
		nmeas += !estimated(o);
		CHECK_INT(vo->transient, o->transient);
		CHECK_INT(vo->gpus, o->gpu_count);
		CHECK_STR(vo->gpu, o->gpu);
		CHECK_STR(vo->zone, o->zone);
		/* No trace and no price changes: the market's price is the catalog's. */
		CHECK(fabs(vo->usd_per_hour - o->usd_per_hour) < 1e-9, "%s: $/h %g, catalog %g", vo->id,
		      vo->usd_per_hour, o->usd_per_hour);
		/* The catalog's speeds are ResNet-32's on 3x32x32; this job's mlp
		 * on synthetic 3x32x32 images gets them scaled by the ratio of
		 * training FLOPs. */
		double ips = o->images_per_sec * o->gpu_count * speed_factor;
		CHECK_INT(vo->speed_estimated, 1);
		CHECK(fabs(vo->images_per_sec - ips) < 1e-9, "%s: img/s %g, catalog %g", vo->id, vo->images_per_sec, ips);
		double mimg = o->usd_per_hour / (ips * 3600) * 1e6;
		CHECK(fabs(vo->usd_per_mimage - mimg) < 1e-9 * mimg, "%s: $/Mimg %g, expected %g", vo->id,
		      vo->usd_per_mimage, mimg);
		if (!o->transient)
			CHECK(vo->p_revoked_1h == 0, "%s (on-demand): P(revoked) %g", vo->id, vo->p_revoked_1h);
		else
			CHECK(fabs(vo->p_revoked_1h - sd_market_p_revoked_within(o, 3600, 1)) < 1e-12,
			      "%s (spot): P(revoked) %g, the market model's %g", vo->id, vo->p_revoked_1h,
			      sd_market_p_revoked_within(o, 3600, 1));
		nrisky += o->transient && vo->p_revoked_1h > 0;
		/* A simulated market's P(revoked) is the market it runs on. */
		CHECK_INT(vo->p_revoked_modelled, 0);
		if (i > 0)
			CHECK(vo->usd_per_mimage >= v->offers[i - 1].usd_per_mimage, "offers not sorted by $/Mimg at %d", i);
	}
	/* The catalog must hold both kinds, or the check above proves nothing. */
	CHECK(nest >= 4 && nmeas >= 4, "catalog: %d estimated and %d measured prices", nest, nmeas);
	CHECK(nrisky >= 4, "only %d spot offers with a P(revoked) above 0", nrisky);
	printf("offers: %d rows, '*' on the %d estimated prices only, speeds x%.2f (~, mlp's FLOPs against "
	       "ResNet-32's), $/Mimg and sort order checked\n", v->noffers, nest, speed_factor);
}

static void check_servers(const struct sd_view *v, const struct sd_catalog *cat)
{
	CHECK_INT(v->nservers, 2);
	int seen_k80 = 0, seen_p100 = 0;
	for (int i = 0; i < v->nservers; i++) {
		const struct sd_view_server *s = &v->servers[i];
		const struct sd_offer *o = sd_catalog_find(cat, s->offer);
		CHECK(o != NULL, "server %s: offer %s not in the catalog", s->id, s->offer);
		if (!o)
			continue;
		seen_k80 += !strcmp(s->offer, K80);
		seen_p100 += !strcmp(s->offer, P100);
		CHECK_STR(s->zone, o->zone);
		CHECK_STR(s->gpu, o->gpu);
		CHECK_INT(s->transient, o->transient);
		CHECK_INT(s->local, 0);
		CHECK_INT(s->price_estimated, estimated(o));
		CHECK(fabs(s->usd_per_hour - o->usd_per_hour) < 1e-9, "%s: billed at %g, offer price %g", s->id,
		      s->usd_per_hour, o->usd_per_hour);
		CHECK_INT(s->rank, -1);
		CHECK(strcmp(s->state, "training") != 0, "%s: state %s before any worker started", s->id, s->state);
		printf("server %s: %s, %s, %s %.2f%s/h, state %s\n", s->id, s->offer, s->gpu,
		       s->transient ? "spot" : "od", s->usd_per_hour, s->price_estimated ? "*" : "", s->state);
	}
	CHECK_INT(seen_k80, 1);
	CHECK_INT(seen_p100, 1);
	CHECK_INT(v->rate_estimated, 1);
}

/* The last sample of a series. */
static float series_last(const struct sd_view_series *s)
{
	return s->len ? s->v[(s->head + s->len - 1) % SD_VIEW_HIST] : NAN;
}

/* Feeds the journal line text to the view model. */
static void feed(struct sd_view_model *vm, const char *text)
{
	cJSON *o = cJSON_Parse(text);
	struct sd_event ev;
	char *why = NULL;
	CHECK(o && sd_event_from_json(&ev, o, &why) == 0, "event %s: %s", text, why ? why : "?");
	if (o && !why)
		sd_view_model_on_event(vm, &ev);
	free(why);
	cJSON_Delete(o);
}

/* A language model's run (dataset tokens, block_size 16): the journal's
 * run_start says unit tokens; the view counts tokens, 16 per sample the
 * controller counts, in the throughput series; evaluations fill acc_hist
 * with the validation loss and the done message names it; and the offers
 * have no speed at all while the model's FLOPs per window are unknown
 * (here: a model file the engine cannot read), rather than ResNet-32's
 * images passed off as tokens. */
static void test_language_model(const char *catalog_path, const char *dir)
{
	char *run_dir = path_join(dir, "lm-run");
	struct sd_job job;
	sd_job_defaults(&job);
	snprintf(job.train.model, sizeof job.train.model, "%.200s/gpt.onnx", dir);
	char *model = path_join(dir, "gpt.onnx");
	write_raw(model, "not an ONNX file", 16);   /* sent to workers, never loaded here */
	free(model);
	snprintf(job.train.dataset, sizeof job.train.dataset, "tokens");
	snprintf(job.train.data_dir, sizeof job.train.data_dir, "%.200s/none", dir);
	job.train.block_size = 16;
	job.workers = 0;
	job.boot_scale = 1000;
	job.ncluster = 1;
	snprintf(job.cluster[0], sizeof job.cluster[0], K80);
	uv_loop_t loop;
	uv_loop_init(&loop);
	struct sd_view_model *vm = NULL;
	struct sd_controller *c = NULL;
	char *why = NULL;
	struct sd_controller_opts co = {
		.run_dir = run_dir, .worker_path = "/nonexistent/spotdeck-worker",
		.catalog_path = catalog_path, .emulate = 1, .on_exit = on_exit_cb,
		.on_event = on_event_cb, .ctx = &vm,
	};
	exited = -1;
	if (sd_controller_create(&c, &loop, &job, &co, &why) < 0) {
		CHECK(0, "language model's controller: %s", why);
		free(why);
		free(run_dir);
		return;
	}
	vm = sd_view_model_new(c);
	CHECK(sd_controller_start(c, &why) == 0, "start: %s", why);
	run_for(&loop, 200);
	const struct sd_view *v = sd_view_model_refresh(vm);
	CHECK_INT(v->unit_tokens, 1);
	CHECK(v->val_loss == -1 && v->test_accuracy == -1, "val_loss %g, test_accuracy %g before "
	      "any evaluation", v->val_loss, v->test_accuracy);
	CHECK(v->noffers > 0, "no offers");
	for (int i = 0; i < v->noffers; i++)
		CHECK(isnan(v->offers[i].images_per_sec) && isnan(v->offers[i].usd_per_mimage),
		      "offer %s: %g tokens/s, $%g/M tokens without the model's FLOPs",
		      v->offers[i].id, v->offers[i].images_per_sec, v->offers[i].usd_per_mimage);
	feed(vm, "{\"type\":\"step\",\"t\":1,\"step\":1,\"loss\":3.5,\"images_per_sec\":10}");
	CHECK(series_last(&v->throughput) == 160, "throughput %g tokens/s for 10 windows/s of 16",
	      series_last(&v->throughput));
	/* Today's language-model step: tokens_per_sec alone, taken as is. */
	feed(vm, "{\"type\":\"step\",\"t\":1.5,\"step\":2,\"loss\":3.4,\"tokens_per_sec\":200}");
	CHECK(series_last(&v->throughput) == 200, "throughput %g tokens/s for a step of 200 tokens/s",
	      series_last(&v->throughput));
	feed(vm, "{\"type\":\"epoch\",\"t\":2,\"epoch\":0,\"step\":31,\"val_loss\":2.5,"
	     "\"perplexity\":12.182493960703473}");
	CHECK(series_last(&v->acc_hist) == 2.5f, "acc_hist holds %g, not the val_loss 2.5",
	      series_last(&v->acc_hist));
	feed(vm, "{\"type\":\"done\",\"t\":3,\"steps\":62,\"val_loss\":2.25,"
	     "\"perplexity\":9.487735836358526}");
	CHECK_STR(v->message, "done: val loss 2.2500, perplexity 9.488");
	/* The journal's run_start: the unit and the tokens per sample. */
	char *jpath = path_join(run_dir, "journal.jsonl");
	size_t len = 0;
	unsigned char *text = read_raw(jpath, &len);
	char *nul = text ? realloc(text, len + 1) : NULL;
	if (nul)
		nul[len] = 0;
	CHECK(nul && strstr(nul, "\"type\":\"run_start\"") &&
	      strstr(nul, "\"unit\":\"tokens\",\"tokens_per_sample\":16"),
	      "run_start without unit tokens and 16 tokens per sample");
	free(nul);
	free(jpath);
	char err[256];
	CHECK_INT(command(c, "quit", err, sizeof err), 0);
	for (int i = 0; i < 100 && exited < 0; i++)
		run_for(&loop, 100);
	int closed = 0;
	sd_controller_close(c, on_closed, &closed);
	uv_walk(&loop, close_walk, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	sd_controller_free(c);
	sd_view_model_free(vm);
	CHECK_INT(uv_loop_close(&loop), 0);
	free(why);
	free(run_dir);
	printf("language model: unit tokens in run_start, 16 tokens per window in the throughput, "
	       "val_loss in the history and the done message, no offer speeds\n");
}

int main(void)
{
	speed_factor = flops("resnet32", 3, 32, 32) / flops("mlp", 3, 32, 32);   /* synthetic: 3x32x32 */
	CHECK(speed_factor > 10, "resnet32/mlp FLOPs %g", speed_factor);
	const char *top = getenv("top_srcdir");
	char *catalog_path = path_join(top ? top : SD_SRCDIR, "data/gce-2019.json");
	struct sd_catalog *cat = NULL;
	char *why = NULL;
	if (sd_catalog_load(&cat, catalog_path, &why) < 0) {
		fprintf(stderr, "%s\n", why);
		return 1;
	}
	char dir[4096];
	make_tmpdir(dir, sizeof dir, "test-view-model.XXXXXX");
	char *run_dir = path_join(dir, "run");

	struct sd_job job;
	sd_job_defaults(&job);
	snprintf(job.train.model, sizeof job.train.model, "mlp");
	snprintf(job.train.dataset, sizeof job.train.dataset, "synthetic");
	job.workers = 0;
	job.boot_scale = 1000;      /* servers stay booting: no worker starts */
	job.ncluster = 2;
	snprintf(job.cluster[0], sizeof job.cluster[0], K80);
	snprintf(job.cluster[1], sizeof job.cluster[1], P100);

	uv_loop_t loop;
	uv_loop_init(&loop);
	struct sd_view_model *vm = NULL;
	struct sd_controller *c = NULL;
	struct sd_controller_opts co = {
		.run_dir = run_dir,
		.worker_path = "/nonexistent/spotdeck-worker",
		.catalog_path = catalog_path,
		.emulate = 1,
		.on_exit = on_exit_cb,
		.on_event = on_event_cb,
		.app_commands = app_commands,
		.ctx = &vm,
	};
	if (sd_controller_create(&c, &loop, &job, &co, &why) < 0) {
		fprintf(stderr, "controller: %s\n", why);
		return 1;
	}
	vm = sd_view_model_new(c);
	if (sd_controller_start(c, &why) < 0) {
		fprintf(stderr, "start: %s\n", why);
		return 1;
	}
	run_for(&loop, 300);
	const struct sd_view *v = sd_view_model_refresh(vm);
	check_offers(v, cat);
	check_servers(v, cat);

	/* One command table: a word is a command only whole ("quitx" does not
	 * quit), and the program's own commands get the same usage checks. */
	char err[256];
	CHECK_INT(command(c, "quitx", err, sizeof err), -1);
	CHECK_STR(err, "unknown command 'quitx' (try help)");
	CHECK_INT(command(c, "probe", err, sizeof err), 0);
	CHECK_INT(command(c, "probe now", err, sizeof err), -1);
	CHECK_STR(err, "probe: takes no arguments");
	CHECK_INT(command(c, "probex", err, sizeof err), -1);
	CHECK(probe_runs == 1 && probe_ctx == &vm, "probe ran %d times, ctx %p (want 1, %p)", probe_runs,
	      probe_ctx, (void *)&vm);
	run_for(&loop, 100);
	CHECK(exited < 0 && !sd_controller_operator_quit(c), "quitx ended the run (status %d)", exited);
	CHECK_INT(command(c, "quit", err, sizeof err), 0);
	CHECK_INT(sd_controller_operator_quit(c), 1);
	for (int i = 0; i < 100 && exited < 0; i++)
		run_for(&loop, 100);
	/* The controller reports a quit before the job's end as status 1 (the
	 * program decides what its own exit status is). */
	CHECK(exited == 1, "controller status %d after quit (%s)", exited,
	      sd_controller_fatal(c) ? sd_controller_fatal(c) : "no fatal error");
	int closed = 0;
	sd_controller_close(c, on_closed, &closed);
	CHECK(closed == 1, "the controller's close said it was done %d times (want 1)", closed);
	uv_walk(&loop, close_walk, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	sd_controller_free(c);
	sd_view_model_free(vm);
	CHECK_INT(uv_loop_close(&loop), 0);
	test_language_model(catalog_path, dir);
	sd_catalog_free(cat);
	rm_tree(dir);
	free(run_dir);
	free(catalog_path);
	return check_exit("test-view-model");
}
