/* src/worker/standalone.c - see standalone.h. */
#include "config.h"

#include "src/worker/standalone.h"

#include <cJSON.h>
#include <math.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "engine/engine.h"

static double now_seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void emit(cJSON *obj)
{
	char *s = cJSON_PrintUnformatted(obj);
	if (!s)
		sd_oom();
	puts(s);
	fflush(stdout);
	free(s);
	cJSON_Delete(obj);
}

/* A failure: one line on stderr; returns the exit status 1. */
static int die(const char *msg)
{
	fprintf(stderr, "spotdeck-worker: %s\n", msg);
	return 1;
}

/* Prints the CUDA devices the driver shows (engine/backend.h), for
 * providers that offer one server per GPU. */
int sd_worker_list_devices(void)
{
	struct sd_backend_device dev[64];
	char *why = NULL;
	int n = sd_backend_list_devices(dev, 64, &why);
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "type", "devices");
	cJSON_AddNumberToObject(ev, "count", n > 0 ? n : 0);
	cJSON *arr = cJSON_AddArrayToObject(ev, "devices");
	for (int i = 0; i < n && i < 64; i++) {
		cJSON *d = cJSON_CreateObject();
		cJSON_AddNumberToObject(d, "index", dev[i].index);
		cJSON_AddStringToObject(d, "name", dev[i].name);
		cJSON_AddItemToArray(arr, d);
	}
	if (why)
		cJSON_AddStringToObject(ev, "reason", why);
	emit(ev);
	free(why);
	return 0;
}

static int save_checkpoint(const struct sd_standalone_opts *o, struct sd_trainer *t, char **why)
{
	char path[SD_PATH_MAX + 64], latest[SD_PATH_MAX + 64];
	snprintf(path, sizeof path, "%s/ckpt-%ld.sdckpt", o->checkpoint_dir, t->step);
	snprintf(latest, sizeof latest, "%s/latest.sdckpt", o->checkpoint_dir);
	if (sd_trainer_save(t, path, why) < 0)
		return -1;
	/* latest.sdckpt is a second atomic copy, so --resume DIR never sees a
	 * half-written file even if this process dies here. */
	if (sd_trainer_save(t, latest, why) < 0)
		return -1;
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "type", "checkpoint");
	cJSON_AddStringToObject(ev, "path", path);
	cJSON_AddNumberToObject(ev, "step", (double)t->step);
	emit(ev);
	return 0;
}

/* Figures of a standalone run: the whole run's, and the current epoch's
 * since its last line. */
struct run_totals {
	double t0;               /* when training started (now_seconds) */
	double compute_s;        /* time spent in sd_trainer_step */
	long total_images;
	double epoch_t0;
	long epoch_images;
	double epoch_loss;       /* sum of the epoch's step losses */
	long epoch_steps;
	/* The last evaluation: at step eval_step (-1: none yet), its figures.
	 * The done line reuses them when no step came after it, so a run
	 * that ends on an epoch's last step or at --max-steps evaluates once. */
	long eval_step;
	double eval_loss, eval_acc;
	int evaluations;         /* evaluations done, for the done line */
};

/* The first line: where this process computes and why. */
static void emit_backend(const struct sd_trainer *t)
{
	cJSON *be = cJSON_CreateObject();
	cJSON_AddStringToObject(be, "type", "backend");
	cJSON_AddStringToObject(be, "backend", t->backend.name);
	cJSON_AddStringToObject(be, "device", t->backend.device.name);
	cJSON_AddStringToObject(be, "reason", t->backend.reason);
	cJSON_AddStringToObject(be, "precision", sd_conv2d_precision_name(t->precision));
	cJSON_AddStringToObject(be, "precision_reason", t->precision_reason);
	emit(be);
}

/* Loads --resume (a checkpoint file, or a directory's latest.sdckpt) and
 * makes --checkpoint-dir.  Returns 0, or the exit status after printing
 * why not. */
static int prepare_state(const struct sd_standalone_opts *o, struct sd_trainer *t)
{
	char *why = NULL;
	if (o->resume[0]) {
		char path[SD_PATH_MAX + 32];
		struct stat st;
		if (stat(o->resume, &st) == 0 && S_ISDIR(st.st_mode))
			snprintf(path, sizeof path, "%s/latest.sdckpt", o->resume);
		else
			snprintf(path, sizeof path, "%s", o->resume);
		if (sd_trainer_load(t, path, &why) < 0) {
			int rc = die(why);
			free(why);
			return rc;
		}
	}
	if (o->checkpoint_dir[0] && mkdir(o->checkpoint_dir, 0777) < 0 && errno != EEXIST) {
		fprintf(stderr, "spotdeck-worker: %s: cannot create checkpoint directory: %s\n",
		        o->checkpoint_dir, strerror(errno));
		return 1;
	}
	return 0;
}

/* The step line of the step just taken (--log-every). */
static void emit_step(const struct sd_trainer *t, double loss, double acc)
{
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "type", "step");
	cJSON_AddNumberToObject(ev, "step", (double)t->step);
	cJSON_AddNumberToObject(ev, "epoch", sd_trainer_epoch_of(t, t->step - 1));
	cJSON_AddNumberToObject(ev, "loss", loss);
	if (!t->lm)   /* a language model predicts tokens: no accuracy */
		cJSON_AddNumberToObject(ev, "train_accuracy", acc);
	cJSON_AddNumberToObject(ev, "lr", sd_lr_at(&t->lr, t->step - 1));
	/* With clipping on: the gradients' norm before it, to choose the clip by. */
	if (t->opt.clip_grad_norm > 0)
		cJSON_AddNumberToObject(ev, "grad_norm", t->last_grad_norm);
	emit(ev);
}

/* An evaluation's figures into ev: test_loss and test_accuracy, or a
 * language model's val_loss (nats per token) and perplexity = exp(val_loss). */
static void add_eval(cJSON *ev, const struct sd_trainer *t, double loss, double acc)
{
	if (t->lm) {
		cJSON_AddNumberToObject(ev, "val_loss", loss);
		cJSON_AddNumberToObject(ev, "perplexity", exp(loss));
		return;
	}
	cJSON_AddNumberToObject(ev, "test_loss", loss);
	cJSON_AddNumberToObject(ev, "test_accuracy", acc);
}

/* Samples per second in the model's unit: images, or a language model's
 * tokens (block_size per window). */
static void add_rate(cJSON *ev, const struct sd_trainer *t, double samples_per_sec)
{
	if (t->lm)
		cJSON_AddNumberToObject(ev, "tokens_per_sec", samples_per_sec * t->cfg.block_size);
	else
		cJSON_AddNumberToObject(ev, "images_per_sec", samples_per_sec);
}

/* At an epoch's end (or the run's): evaluates on the test set, prints the
 * epoch line and starts the next epoch's figures. */
static int end_epoch(struct sd_trainer *t, struct run_totals *rt, char **why)
{
	double now = now_seconds(), test_loss, test_acc;
	double train_s = now - rt->epoch_t0;
	if (sd_trainer_evaluate(t, &test_loss, &test_acc, why) < 0)
		return -1;
	rt->evaluations++;
	rt->eval_step = t->step;
	rt->eval_loss = test_loss;
	rt->eval_acc = test_acc;
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "type", "epoch");
	cJSON_AddNumberToObject(ev, "epoch", sd_trainer_epoch_of(t, t->step - 1));
	cJSON_AddNumberToObject(ev, "step", (double)t->step);
	cJSON_AddNumberToObject(ev, "train_loss", rt->epoch_loss / rt->epoch_steps);
	add_eval(ev, t, test_loss, test_acc);
	add_rate(ev, t, rt->epoch_images / train_s);
	cJSON_AddNumberToObject(ev, "seconds", train_s);
	emit(ev);
	rt->epoch_t0 = now_seconds();
	rt->epoch_images = 0;
	rt->epoch_loss = 0;
	rt->epoch_steps = 0;
	return 0;
}

/* Trains up to step end (--max-steps or the job's last), with the step,
 * checkpoint and epoch lines on the way. */
static int train_to(const struct sd_standalone_opts *o, struct sd_trainer *t, long end, struct run_totals *rt, char **why)
{
	while (t->step < end) {
		double loss, acc, s0 = now_seconds();
		if (sd_trainer_step(t, &loss, &acc, why) < 0)
			return -1;
		rt->compute_s += now_seconds() - s0;
		rt->epoch_images += o->cfg->global_batch;
		rt->total_images += o->cfg->global_batch;
		rt->epoch_loss += loss;
		rt->epoch_steps++;
		if (o->log_every && t->step % o->log_every == 0)
			emit_step(t, loss, acc);
		if (o->checkpoint_every && t->step % o->checkpoint_every == 0 && save_checkpoint(o, t, why) < 0)
			return -1;
		if ((t->step % t->steps_per_epoch == 0 || t->step == end) && end_epoch(t, rt, why) < 0)
			return -1;
	}
	return 0;
}

/* The last line: the final test figures and what the run was. */
static int emit_done(const struct sd_standalone_opts *o, struct sd_trainer *t, struct run_totals *rt, char **why)
{
	double test_loss = rt->eval_loss, test_acc = rt->eval_acc;
	if (rt->eval_step != t->step) {
		if (sd_trainer_evaluate(t, &test_loss, &test_acc, why) < 0)
			return -1;
		rt->evaluations++;
	}
	char sum[16];
	snprintf(sum, sizeof sum, "%08x", sd_trainer_param_checksum(t));
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "type", "done");
	cJSON_AddStringToObject(ev, "model", o->cfg->model);
	cJSON_AddStringToObject(ev, "dataset", o->cfg->dataset);
	cJSON_AddNumberToObject(ev, "steps", (double)t->step);
	add_eval(ev, t, test_loss, test_acc);
	add_rate(ev, t, rt->compute_s > 0 ? rt->total_images / rt->compute_s : 0);
	cJSON_AddNumberToObject(ev, "seconds", now_seconds() - rt->t0);
	cJSON_AddNumberToObject(ev, "evaluations", rt->evaluations);
	cJSON_AddNumberToObject(ev, "flops_per_image", sd_model_flops_per_sample(t->model));
	cJSON_AddNumberToObject(ev, "threads", o->threads);
	cJSON_AddStringToObject(ev, "blas_kernel", sd_blas_kernel());
	cJSON_AddStringToObject(ev, "param_checksum", sum);
	cJSON_AddStringToObject(ev, "backend", t->backend.name);
	cJSON_AddStringToObject(ev, "device", t->backend.device.name);
	cJSON_AddStringToObject(ev, "precision", sd_conv2d_precision_name(t->precision));
	emit(ev);
	return 0;
}

int sd_standalone_run(const struct sd_standalone_opts *o)
{
	char *why = NULL;
	struct sd_trainer *t;
	if (sd_trainer_create(&t, o->cfg, &why) < 0) {
		int rc = die(why);
		free(why);
		return rc;
	}
	emit_backend(t);
	/* An eval-mode export trains, but not as its author meant: one line,
	 * on stderr with the errors, before the first step. */
	if (t->model_warning[0])
		fprintf(stderr, "spotdeck-worker: warning: %s\n", t->model_warning);
	int rc = prepare_state(o, t);
	if (rc) {
		sd_trainer_destroy(t);
		return rc;
	}
	long end = t->total_steps;
	if (o->max_steps && o->max_steps < end)
		end = o->max_steps;
	struct run_totals rt = { .t0 = now_seconds(), .eval_step = -1 };
	rt.epoch_t0 = rt.t0;
	if (train_to(o, t, end, &rt, &why) < 0 ||
	    (o->checkpoint_dir[0] && (!o->checkpoint_every || t->step % o->checkpoint_every) &&
	     save_checkpoint(o, t, &why) < 0) ||
	    emit_done(o, t, &rt, &why) < 0)
		rc = die(why);
	free(why);
	sd_trainer_destroy(t);
	return rc;
}
