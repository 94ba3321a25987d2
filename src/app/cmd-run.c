/* src/app/cmd-run.c - the run itself, `spotdeck [options]` with no
 * subcommand: the controller in a background process with a cockpit
 * attached, in this process (--foreground), or headless (journal on
 * stdout, commands on stdin).  Parses the options, loads the job, makes the
 * run directory (run-setup.h), goes to the background (background.h),
 * runs the controller to its end. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <ftw.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "engine/data.h"
#include "src/base/errors.h"
#include "engine/onnx.h"
#include "engine/train.h"
#include "src/controller/controller.h"
#include "src/proto/job.h"
#include "src/app/attach.h"
#include "src/app/background.h"
#include "src/app/control.h"
#include "src/app/run-options.h"
#include "src/app/run-setup.h"
#include "src/app/subcommand.h"
#include "src/proto/protocol.h"
#include "src/provider/cloud-vm.h"
#include "src/provider/provider.h"
#include "src/market/trace.h"
#include "src/app/view-model.h"
#include "src/app/whatif.h"
#include "ui/cockpit.h"
#include "ui/theme.h"

struct app {
	uv_loop_t *loop;
	struct sd_controller *ctl;
	uv_signal_t sigint, sigterm, sighup;
	uv_pipe_t in_pipe;
	uv_tty_t in_tty;
	uv_stream_t *in;
	struct sd_line_reader in_rd;
	int status;
	int start_failed;        /* the start failed in a run directory it created */
	int done;
	struct sd_view_model *vm;
	struct sd_cockpit *cockpit;
	int user_quit;          /* the operator quit the cockpit: a normal exit */
	int cockpit_used;
	struct sd_control *control;   /* the background run's control socket */
	char ended[160];        /* how the run ended, for attached clients */
	uv_timer_t flush_timer; /* wakes the loop while they read the end */
	int ctl_closing;        /* 1: sd_controller_close called; 2: its provider is done */
};

/* The embedded default the cockpit opens with: cnn on Fashion-MNIST on four
 * transient K80 servers in the four zones the seeds measured (ICAC'19's
 * 4-spot cluster), in the GCE 2019 market with demo knobs: revocations 30x
 * sooner than measured (so one shows within about two minutes: 10-47 % of
 * these K80s went in their first hour), boots 10x faster, notices 5x shorter. */
static void demo_job(struct sd_job *j)
{
	sd_job_defaults(j);
	j->train.global_batch = 256;
	j->train.lr = 0.1f;
	j->train.warmup_steps = 50;
	j->workers = 0;
	j->checkpoint_every = 100;
	j->log_every = 5;
	j->hazard_scale = 30;
	j->boot_scale = 0.1;
	j->notice_scale = 0.2;
	/* Seed 5: with these knobs the market revokes a first K80 after 28 s
	 * and two more within two minutes (tests/app/test-ui-cockpit.sh relies on it). */
	j->market_seed = 5;
	static const char *const cluster[] = { "gce/us-east1-c/k80/spot", "gce/us-central1-c/k80/spot",
	                                       "gce/us-west1-b/k80/spot", "gce/europe-west1-b/k80/spot" };
	j->ncluster = 4;
	for (int i = 0; i < 4; i++)
		snprintf(j->cluster[i], sizeof j->cluster[i], "%s", cluster[i]);
}

static void on_event_cb(const struct sd_event *ev, void *ctx)
{
	struct app *a = ctx;
	if (!a->vm)
		return;
	sd_view_model_on_event(a->vm, ev);
	sd_control_event(a->control, ev->fields);
	if (a->cockpit && ev->type == SD_EV_REVOKED) {
		const cJSON *srv = cJSON_GetObjectItemCaseSensitive(ev->fields, "server");
		sd_cockpit_notify_revocation(a->cockpit, cJSON_IsString(srv) ? srv->valuestring : "");
	}
}

static const struct sd_view *cockpit_view(void *ctx)
{
	struct app *a = ctx;
	return sd_view_model_refresh(a->vm);
}

/* Every line the operator types (the cockpit, an attached client) goes
 * through the controller's one command table, which holds these of the
 * program's own too. */
static int cockpit_command(void *ctx, const char *line, char **why)
{
	struct app *a = ctx;
	return sd_controller_command(a->ctl, line, why);
}

static const struct sd_cockpit_ops cockpit_ops = {
	.view = cockpit_view,
	.command = cockpit_command,
};

/* detach (key x): an attached client hangs up itself, with the control
 * socket's detach message; a foreground run lives in this process. */
static int cmd_detach(void *ctx, int argc, char **argv, char **why)
{
	struct app *a = ctx;
	(void)argc;
	(void)argv;
	if (a->control)
		return sd_why(why, "detach: a client leaves with the detach message, not a command");
	return sd_why(why, "nothing to detach from: this run lives in this process (--foreground); q ends it");
}

/* plan (key w): the what-if view plans the rest of the run. */
static int cmd_plan(void *ctx, int argc, char **argv, char **why)
{
	struct app *a = ctx;
	(void)argc;
	(void)argv;
	if (!a->vm)
		return sd_why(why, "plan: the what-if view needs the cockpit (spotdeck plan plans from the shell)");
	return sd_whatif_request(a->loop, a->ctl, a->vm, why);
}

static const struct sd_app_command app_commands[] = {
	{ "plan", "", 0, 0, "plan the rest of the run on other clusters (the what-if view)", cmd_plan },
	{ "detach", "", 0, 0, "leave the run going in the background (an attached cockpit)", cmd_detach },
	{ NULL, NULL, 0, 0, NULL, NULL },
};

static void control_clients_changed(void *ctx, int clients)
{
	struct app *a = ctx;
	sd_view_model_set_clients(a->vm, clients);
}

static void on_closed_walk(uv_handle_t *h, void *arg)
{
	if (!uv_is_closing(h))
		uv_close(h, NULL);
}

static void on_exit_cb(struct sd_controller *c, int status, void *ctx)
{
	struct app *a = ctx;
	if (a->done)
		return;
	a->done = 1;
	a->status = status;
	uv_stop(a->loop);
}

static void on_signal(uv_signal_t *s, int signum)
{
	struct app *a = s->data;
	sd_controller_signal(a->ctl, signum);
}

/* The longest command line stdin takes, newline included: what
 * sd_controller_command reads (it copies a line into 512 bytes).  A longer
 * line is refused whole rather than cut, since a cut line may still parse as
 * a different command. */
#define STDIN_LINE_MAX 512

static void on_in_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	static char mem[4096];
	buf->base = mem;
	buf->len = sizeof mem;
}

static void on_in_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct app *a = s->data;
	if (n < 0) {
		uv_read_stop(s);
		return;
	}
	sd_line_reader_feed(&a->in_rd, buf->base, (size_t)n);
	const char *line;
	size_t len;
	char *why = NULL;
	int got;
	while ((got = sd_line_reader_next(&a->in_rd, &line, &len, &why)) != 0) {
		if (got < 0) {
			/* Refuse the over-long line whole: one error, and everything
			 * up to its newline is dropped, so no part of it - its tail
			 * least of all - runs as a command. */
			fprintf(stderr, "spotdeck: stdin: %s: refused, none of it run\n", why);
			free(why);
			why = NULL;
			sd_line_reader_skip(&a->in_rd);
			continue;
		}
		/* Errors are journaled by the command table itself. */
		sd_controller_command(a->ctl, line, &why);
		free(why);
		why = NULL;
	}
	free(why);
}

/* Commands come from stdin when it is a pipe or a terminal; a file or
 * /dev/null gives none. */
static void open_stdin(struct app *a)
{
	sd_line_reader_init(&a->in_rd, STDIN_LINE_MAX);
	uv_handle_type t = uv_guess_handle(0);
	if (t == UV_NAMED_PIPE && uv_pipe_init(a->loop, &a->in_pipe, 0) == 0) {
		if (uv_pipe_open(&a->in_pipe, 0) == 0)
			a->in = (uv_stream_t *)&a->in_pipe;
		else
			uv_close((uv_handle_t *)&a->in_pipe, NULL);
	} else if (t == UV_TTY && uv_tty_init(a->loop, &a->in_tty, 0, 1) == 0) {
		a->in = (uv_stream_t *)&a->in_tty;
	}
	if (a->in) {
		a->in->data = a;
		uv_read_start(a->in, on_in_alloc, on_in_read);
	}
}

/* A new run's provider settings that name files, made absolute (provider.h,
 * path_settings) and written back into job.  0, or -1 with *why. */
/* Whether the run whose journal is at path finished: a "done" event in it.
 * Fills what with "step N, test accuracy A" for the message.  A resumed
 * finished run would only start workers that have no step left to take
 * and wait for ever, so --resume refuses one. */
static int run_finished(const char *path, char *what, size_t len)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	char *line = NULL;
	size_t cap = 0;
	int done = 0;
	while (!done && getline(&line, &cap, f) > 0) {
		/* The journal's writer puts the type first: only those lines are
		 * parsed, not every step of a long run. */
		static const char prefix[] = "{\"type\":\"done\"";
		if (strncmp(line, prefix, sizeof prefix - 1) != 0)
			continue;
		cJSON *ev = cJSON_Parse(line);
		const cJSON *steps = cJSON_GetObjectItemCaseSensitive(ev, "steps");
		const cJSON *acc = cJSON_GetObjectItemCaseSensitive(ev, "test_accuracy");
		const cJSON *vl = cJSON_GetObjectItemCaseSensitive(ev, "val_loss");
		if (cJSON_IsNumber(steps)) {
			done = 1;
			if (cJSON_IsNumber(vl))   /* a language model */
				snprintf(what, len, "step %.0f, val loss %.4f", steps->valuedouble,
				         vl->valuedouble);
			else if (cJSON_IsNumber(acc))
				snprintf(what, len, "step %.0f, test accuracy %.4f", steps->valuedouble, acc->valuedouble);
			else
				snprintf(what, len, "step %.0f", steps->valuedouble);
		}
		cJSON_Delete(ev);
	}
	free(line);
	fclose(f);
	return done;
}

static int absolute_path_settings(const struct sd_provider_ops *ops, cJSON *settings, struct sd_job *job,
                                  const char *jp, char **why)
{
	int changed = 0;
	for (int i = 0; ops->path_settings && ops->path_settings[i]; i++) {
		const char *key = ops->path_settings[i];
		cJSON *v = cJSON_GetObjectItemCaseSensitive(settings, key);
		if (!cJSON_IsString(v) || v->valuestring[0] == '/')
			continue;
		char cwd[PATH_MAX], abs[PATH_MAX * 2 + 2];
		if (!getcwd(cwd, sizeof cwd))
			return sd_why(why, "%s: provider.%s: cannot make '%s' absolute: %s", jp, key, v->valuestring,
			              strerror(errno));
		snprintf(abs, sizeof abs, "%s/%s", cwd, v->valuestring);
		cJSON_SetValuestring(v, abs);
		changed = 1;
	}
	if (!changed)
		return 0;
	char *text = cJSON_PrintUnformatted(settings);
	if (!text)
		sd_oom();
	size_t n = strlen(text);
	if (n >= sizeof job->provider_settings) {
		free(text);
		return sd_why(why, "%s: provider: its settings are over %zu bytes once their paths are absolute", jp,
		              sizeof job->provider_settings - 1);
	}
	memcpy(job->provider_settings, text, n + 1);
	free(text);
	return 0;
}

/* The job to run: the embedded demo, the defaults, the --job file or the
 * resumed run's own job.json, then the command line's overrides.  jp gets
 * the job's name for messages.  Returns 0, or 1 after a one-line error. */
static int load_job(const struct options *o, struct sd_job *job, char *jp, size_t jplen,
                    uint8_t **model, size_t *model_len, char *warning, size_t wlen)
{
	*model = NULL;
	*model_len = 0;
	warning[0] = 0;
	char *why = NULL;
	if (o->headless && !o->demo)
		sd_job_defaults(job);
	else
		demo_job(job);
	if (o->job_path && sd_job_load(job, o->job_path, &why) < 0) {
		fprintf(stderr, "spotdeck: %s\n", why);
		free(why);
		return 1;
	}
	snprintf(jp, jplen, "%s", o->job_path ? o->job_path : "the built-in job");
	if (o->resume) {
		/* A run directory has its journal from the run's first moment (a
		 * start that fails removes the directory): without one this is
		 * not a run to continue. */
		char jn[PATH_MAX + 32];
		snprintf(jn, sizeof jn, "%s/journal.jsonl", o->resume);
		if (access(jn, F_OK) != 0) {
			fprintf(stderr, "spotdeck: --resume %s: not a spotdeck run directory (no journal.jsonl: %s)\n",
			        o->resume, strerror(errno));
			return 1;
		}
		char what[96];
		if (run_finished(jn, what, sizeof what)) {
			fprintf(stderr, "spotdeck: --resume %s: the run finished (done at %s): nothing is left to train; "
			        "spotdeck export %s --onnx OUT.onnx gets the model out\n", o->resume, what, o->resume);
			return 1;
		}
		/* The run's own job decides its catalog and knobs. */
		snprintf(jp, jplen, "%s/job.json", o->resume);
		if (sd_job_load(job, jp, &why) < 0) {
			fprintf(stderr, "spotdeck: --resume %s: %s\n", o->resume, why);
			free(why);
			return 1;
		}
	}
	if (o->workers >= 0)
		job->workers = (int)o->workers;
	if (o->provider)
		snprintf(job->provider, sizeof job->provider, "%s", o->provider);
	const struct sd_provider_ops *ops = sd_provider_find(job->provider);
	if (!ops) {
		char names[256];
		sd_provider_names(names, sizeof names);
		if (o->provider)
			fprintf(stderr, "spotdeck: --provider: '%s' is not available in this build (known: %s)\n",
			        o->provider, names);
		else
			fprintf(stderr, "spotdeck: %s: provider.name: '%s' is not available in this build (known: %s)\n",
			        jp, job->provider, names);
		return 1;
	}
	/* The provider's own settings, before anything is created. */
	cJSON *settings = sd_job_provider_settings(job);
	int bad = !settings || sd_provider_check_settings(ops, settings, jp, &why) < 0;
	if (!bad && !o->resume && absolute_path_settings(ops, settings, job, jp, &why) < 0)
		bad = 1;
	cJSON_Delete(settings);
	if (bad) {
		fprintf(stderr, "spotdeck: %s\n", why ? why : "provider: its settings are not a JSON object");
		free(why);
		return 1;
	}
	if (o->catalog)
		snprintf(job->catalog, sizeof job->catalog, "%s", o->catalog);
	if (o->hazard > 0)
		job->hazard_scale = o->hazard;
	if (o->boot > 0)
		job->boot_scale = o->boot;
	if (o->notice > 0)
		job->notice_scale = o->notice;
	if (o->seed >= 0)
		job->market_seed = (unsigned long long)o->seed;
	/* The training data, before any run directory, worker or server: a
	 * bad .npy file is one line here, not a worker failing on every server
	 * it is started on. */
	if (sd_train_check_data(&job->train, &why) < 0) {
		fprintf(stderr, "spotdeck: %s: %s\n", jp, why);
		free(why);
		return 1;
	}
	/* A built-in dataset's files, when the workers run on this host (a
	 * provider without launch): a missing directory is this line, not a
	 * run that fails on every worker after the start, which under
	 * --detach nobody would see.  Hosts' and VMs' files are their own. */
	if (!ops->launch && sd_dataset_check(job->train.dataset, job->train.data_dir, &why) < 0) {
		fprintf(stderr, "spotdeck: %s: data_dir: %s\n", jp, why);
		free(why);
		return 1;
	}
	/* An ONNX model likewise: read once, its whole graph checked and its
	 * input and classes matched to the data, before anything is rented;
	 * the controller keeps these bytes and sends them to every worker
	 * (the path is this host's). */
	if (sd_onnx_is_path(job->train.model)) {
		struct sd_onnx_info info;
		if (sd_onnx_read_file(job->train.model, model, model_len, &why) < 0 ||
		    sd_train_check_model(&job->train, *model, *model_len, &info, &why) < 0) {
			fprintf(stderr, "spotdeck: %s: %s\n", jp, why);
			free(why);
			free(*model);
			*model = NULL;
			return 1;
		}
		/* An eval-mode export trains, but not as its author meant: said
		 * here and in the journal's run_start (model_warning). */
		if (sd_onnx_eval_export_warning(&info, job->train.model, warning, wlen))
			fprintf(stderr, "spotdeck: warning: %s\n", warning);
	}
	return 0;
}

static void on_ctl_closed(void *arg)
{
	struct app *a = arg;
	a->ctl_closing = 2;
}

/* Closes the controller and waits for its provider to be done, which can
 * take seconds (the ssh provider ends the workers left on its hosts and
 * removes the run's files there, each ssh under a grace period).  The
 * loop runs on meanwhile: the cockpit draws, the control socket answers
 * (commands are refused), a signal is heard.  Once only. */
static void close_controller(struct app *a)
{
	if (a->ctl_closing)
		return;
	a->ctl_closing = 1;
	sd_controller_close(a->ctl, on_ctl_closed, a);
	/* uv_run returns 0 once nothing is left to wait for: a provider that
	 * never calls back cannot hang the exit. */
	while (a->ctl_closing != 2 && uv_run(a->loop, UV_RUN_ONCE))
		;
}

/* Closes the controller's and our handles, runs the loop until they are
 * closed, and frees the controller and the view model. */
static void close_all(struct app *a)
{
	close_controller(a);
	sd_control_close(a->control);
	uv_walk(a->loop, on_closed_walk, NULL);
	uv_run(a->loop, UV_RUN_DEFAULT);
	sd_controller_free(a->ctl);
	sd_view_model_free(a->vm);
}

/* Opens the cockpit over the controller (the view model, the theme dirs,
 * stderr to RUN_DIR/spotdeck.log).  Returns 0, or -1 with *why set. */
static int open_cockpit(struct app *a, const struct options *o, const char *run_dir, char **why)
{
	/* Nothing may write to the terminal behind curses: our own and the
	 * libraries' diagnostics go to the run directory. */
	char logpath[PATH_MAX + 32];
	snprintf(logpath, sizeof logpath, "%s/spotdeck.log", run_dir);
	int fd = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	a->vm = sd_view_model_new(a->ctl);
	struct sd_theme_dirs td;
	sd_theme_dirs_init(&td);
	struct sd_cockpit_opts co = {
		.theme = o->theme,
		.theme_dirs = { td.dir[0], td.dir[1], td.dir[2], NULL },
		.bell = o->alert,
		.log_path = logpath,
	};
	int rc = sd_cockpit_create(&a->cockpit, a->loop, &cockpit_ops, a, &co, why);
	if (rc == 0)
		a->cockpit_used = 1;
	if (fd >= 0)
		close(fd);   /* the cockpit sends stderr to the log itself */
	return rc;
}

/* How the run ended, in a few words (attached clients, view-final.json). */
static void ended_text(struct app *a, const char *start_why, char *out, size_t len)
{
	struct sd_run_status rs;
	sd_controller_status(a->ctl, &rs);
	const char *fatal = sd_controller_fatal(a->ctl);
	if (start_why)
		snprintf(out, len, "failed to start: %s", start_why);
	else if (fatal)
		snprintf(out, len, "failed: %s", fatal);
	else if (a->user_quit)
		snprintf(out, len, "quit at step %ld of %ld", rs.step, rs.total_steps);
	else if (rs.done && rs.step >= rs.total_steps && rs.test_accuracy >= 0)
		snprintf(out, len, "finished at step %ld, test accuracy %.2f %%", rs.step, 100 * rs.test_accuracy);
	else if (rs.done && rs.step >= rs.total_steps && rs.val_loss >= 0)
		snprintf(out, len, "finished at step %ld, val loss %.4f", rs.step, rs.val_loss);
	else
		snprintf(out, len, "stopped at step %ld of %ld (exit status %d)", rs.step, rs.total_steps,
		         a->status);
}

static void on_flush_timer(uv_timer_t *t)
{
	(void)t;   /* only wakes the loop up */
}

/* The background run ended: tells the attached clients and waits up to 2 s
 * for them to have read it. */
static void tell_clients(struct app *a, const char *start_why)
{
	if (!a->control)
		return;
	ended_text(a, start_why, a->ended, sizeof a->ended);
	sd_control_end(a->control, a->status, a->ended);
	uv_timer_init(a->loop, &a->flush_timer);
	uv_timer_start(&a->flush_timer, on_flush_timer, 50, 50);
	uint64_t deadline = uv_now(a->loop) + 2000;
	while (!sd_control_flushed(a->control) && uv_now(a->loop) < deadline)
		uv_run(a->loop, UV_RUN_ONCE);
	uv_close((uv_handle_t *)&a->flush_timer, NULL);
}

/* Runs the started controller to its end and says why it ended, once the
 * terminal is back (the cockpit logs stderr).  fresh_dir: the run
 * directory is this start's own, to be removed if the run never began.
 * ready_fd >= 0 (a background run): once started, the run's output goes to
 * RUN_DIR/spotdeck.log and "ready" is written to ready_fd, which the
 * starting process waits for (what came before, errors, it shows). */
static void run_to_end(struct app *a, const char *jp, int fresh_dir, int ready_fd, const char *run_dir)
{
	char *start_why = NULL;
	if (sd_controller_start(a->ctl, &start_why) < 0) {
		a->status = 1;
		a->start_failed = fresh_dir;
	} else {
		if (ready_fd >= 0)
			sd_background_ready(ready_fd, run_dir);
		uv_run(a->loop, UV_RUN_DEFAULT);
	}
	a->user_quit = sd_controller_operator_quit(a->ctl);
	close_controller(a);
	if (a->cockpit)
		sd_cockpit_destroy(a->cockpit);
	if (start_why)   /* it names the job file or the worker program */
		fprintf(stderr, "spotdeck: %s\n", start_why);
	if (sd_controller_fatal(a->ctl)) {
		fprintf(stderr, "spotdeck: %s\n", sd_controller_fatal(a->ctl));
		a->status = 1;
		a->user_quit = 0;
		/* A run that failed before its first step (a job the workers cannot
		 * load, a worker that cannot start) has nothing to resume: its
		 * directory goes, so the corrected command can run in it again. */
		struct sd_run_status rs;
		sd_controller_status(a->ctl, &rs);
		if (rs.step == 0)
			a->start_failed = fresh_dir;
	}
	tell_clients(a, start_why);
	free(start_why);
}

/* What a run starts with, gathered before anything is created. */
struct start {
	struct options *o;
	int background;          /* the run goes to a process of its own */
	struct sd_trace trace;
	struct sd_job job;
	char jp[PATH_MAX + 16];  /* the job's name for messages */
	uint8_t *model;          /* an ONNX job's model bytes (the controller takes them) */
	size_t model_len;
	char model_warning[512]; /* sd_onnx_eval_export_warning's line, or "" */
	char catalog_path[PATH_MAX + 64];
	char rd[64];             /* a default run directory's name */
	const char *run_dir;
	int fresh_dir;           /* this start made run_dir: removed if it fails */
	int ready_fd;            /* the run's process: tell the starting one (background.h) */
};

/* Loads the trace and the job, and names the catalog, the run directory
 * and the worker; refuses a directory that holds a run and a bad theme
 * before anything starts.  0, or the exit status after a one-line error. */
static int prepare(struct start *st)
{
	struct options *o = st->o;
	char *why = NULL;
	if (o->trace_path && sd_trace_load(&st->trace, o->trace_path, &why) < 0) {
		fprintf(stderr, "spotdeck: %s\n", why);
		free(why);
		return 1;
	}
	if (load_job(o, &st->job, st->jp, sizeof st->jp, &st->model, &st->model_len, st->model_warning,
	             sizeof st->model_warning))
		return 1;
	if (st->job.catalog[0])
		snprintf(st->catalog_path, sizeof st->catalog_path, "%s", st->job.catalog);
	else
		sd_default_catalog(st->catalog_path, sizeof st->catalog_path);
	st->run_dir = o->resume ? o->resume : o->run_dir;
	if (!st->run_dir) {
		sd_run_dir_default_name(st->rd, sizeof st->rd);
		st->run_dir = st->rd;
	}
	if (!o->worker[0])
		sd_default_worker_path(o->worker, sizeof o->worker);
	if (!o->resume) {
		/* Never start a second run over a first one's job, checkpoints and journal. */
		char jpath[PATH_MAX + 32];
		snprintf(jpath, sizeof jpath, "%s/journal.jsonl", st->run_dir);
		if (access(jpath, F_OK) == 0) {
			fprintf(stderr, "spotdeck: --run-dir %s: holds a run already (journal.jsonl); "
			        "continue it with --resume %s or choose another directory\n", st->run_dir, st->run_dir);
			return 1;
		}
	}
	if (st->background && o->theme) {
		/* A bad theme is said before anything starts. */
		struct sd_theme_dirs td;
		sd_theme_dirs_init(&td);
		struct sd_theme th;
		if (sd_theme_load(&th, o->theme, td.dir, SD_THEME_DIRS_N, &why) < 0) {
			fprintf(stderr, "spotdeck: %s\n", why);
			free(why);
			return 1;
		}
	}
	return 0;
}

/* Sends the run to a process of its own.  Returns -1 in that process (it
 * goes on to run the controller), else this process's exit status: after
 * --detach, after the cockpit attached here ends, or a failed start. */
static int to_background(struct start *st)
{
	int status = 1;
	int where = sd_background_fork(&st->ready_fd, &status);
	if (where > 0)
		return -1;
	sd_trace_free(&st->trace);   /* the run's process has its own copy */
	free(st->model);             /* and of the model's bytes */
	st->model = NULL;
	if (where < 0) {
		if (st->fresh_dir)   /* the run's process removed it, or never ran */
			sd_run_dir_discard(st->run_dir);
		return status;
	}
	if (st->o->detach) {
		printf("%s\n", st->run_dir);
		fprintf(stderr, "spotdeck: the run in %s goes on in the background: spotdeck attach %s "
		        "watches it, spotdeck kill %s ends it\n", st->run_dir, st->run_dir, st->run_dir);
		return 0;
	}
	struct sd_attach_opts ao;
	memset(&ao, 0, sizeof ao);
	ao.run_dir = st->run_dir;
	struct sd_theme_dirs td;
	sd_theme_dirs_init(&td);
	ao.cockpit.theme = st->o->theme;
	for (int i = 0; i < SD_THEME_DIRS_N; i++)
		ao.cockpit.theme_dirs[i] = td.dir[i];
	ao.cockpit.bell = st->o->alert;
	ao.end_run_without_cockpit = 1;
	return sd_attach_run(&ao);
}

/* What the run is driven from: the control socket (a background run), stdin
 * (--headless) or the cockpit; and the signals that quit it.  0, or -1 with
 * *why. */
static int open_inputs(struct app *a, struct start *st, char **why)
{
	uv_signal_init(a->loop, &a->sigint);
	uv_signal_init(a->loop, &a->sigterm);
	uv_signal_init(a->loop, &a->sighup);
	a->sigint.data = a->sigterm.data = a->sighup.data = a;
	uv_signal_start(&a->sigint, on_signal, SIGINT);
	uv_signal_start(&a->sigterm, on_signal, SIGTERM);
	if (!st->background)
		uv_signal_start(&a->sighup, on_signal, SIGHUP);
	if (st->background) {
		a->vm = sd_view_model_new(a->ctl);
		struct sd_control_opts cto = {
			.run_dir = st->run_dir,
			.job = st->jp,
			.view = cockpit_view,
			.command = cockpit_command,
			.clients_changed = control_clients_changed,
			.ctx = a,
		};
		return sd_control_listen(&a->control, a->loop, &cto, why);
	}
	if (st->o->headless) {
		open_stdin(a);
		return 0;
	}
	return open_cockpit(a, st->o, st->run_dir, why);
}

/* Creates the controller over the prepared start, runs it to its end and
 * cleans up.  Returns the exit status. */
static int run_controller(struct start *st)
{
	struct options *o = st->o;
	char *why = NULL;
	struct app a;
	memset(&a, 0, sizeof a);
	a.loop = uv_default_loop();
	struct sd_controller_opts co = {
		.run_dir = st->run_dir,
		.worker_path = o->worker,
		.resume = o->resume != NULL,
		.echo_journal = o->headless,
		.on_event = on_event_cb,
		.catalog_path = st->catalog_path[0] ? st->catalog_path : NULL,
		.job_file = st->jp,
		.emulate = o->emulate,
		.trace = o->trace_path ? &st->trace : NULL,
		.listen_addr = o->listen_addr[0] ? o->listen_addr : NULL,
		.listen_port = o->listen_port,
		.advertise = o->advertise[0] ? o->advertise : NULL,
		.orphans = o->orphans,
		.interactive = !o->headless && !o->detach,
		.model_bytes = st->model,
		.model_len = st->model_len,
		.model_warning = st->model_warning,
		.on_exit = on_exit_cb,
		.app_commands = app_commands,
		.ctx = &a,
	};
	/* The controller takes the model's bytes (freed with it). */
	st->model = NULL;
	if (sd_controller_create(&a.ctl, a.loop, &st->job, &co, &why) < 0) {
		fprintf(stderr, "spotdeck: %s\n", why);
		free(why);
		uv_run(a.loop, UV_RUN_DEFAULT);   /* the failed create's handles close */
		uv_loop_close(a.loop);
		if (st->fresh_dir)
			sd_run_dir_discard(st->run_dir);
		return 1;
	}
	if (open_inputs(&a, st, &why) < 0) {
		fprintf(stderr, "spotdeck: %s\n", why);
		free(why);
		close_all(&a);
		if (st->background)
			uv_loop_close(a.loop);
		if (st->fresh_dir)
			sd_run_dir_discard(st->run_dir);
		return 1;
	}
	run_to_end(&a, st->jp, st->fresh_dir, st->ready_fd, st->run_dir);
	close_all(&a);
	sd_line_reader_free(&a.in_rd);
	sd_trace_free(&st->trace);
	uv_loop_close(a.loop);
	if (a.start_failed)
		sd_run_dir_discard(st->run_dir);
	if (st->background)
		return a.user_quit ? 0 : a.status;
	return a.cockpit_used && a.user_quit ? 0 : a.status;
}

/* The run: parse, load the job and trace, create the controller in its run
 * directory, open the cockpit or the headless stdin, run, clean up.  The
 * exit status: 0 after a finished run or a quit from the cockpit, 1 after
 * a failure, 2 after a bad command line.  Without --headless and
 * --foreground, the run goes to the background and this process attaches
 * to it (src/app/attach.h). */
static int run_main(int argc, char **argv)
{
	struct options o;
	int rc = sd_run_parse_options(argc, argv, &o);
	if (rc >= 0)
		return rc;
	if (o.attach) {
		struct sd_attach_opts ao;
		memset(&ao, 0, sizeof ao);
		ao.run_dir = o.attach;
		ao.headless = 1;
		return sd_attach_run(&ao);
	}
	struct start *st = sd_calloc(1, sizeof *st);
	st->o = &o;
	st->ready_fd = -1;
	st->background = !o.headless && !o.foreground;
	if (st->background && !o.detach && !(isatty(0) && isatty(1))) {
		fprintf(stderr, "spotdeck: the cockpit needs a terminal (stdin and stdout): run with --headless "
		        "for scripts\n");
		rc = 1;
	} else {
		rc = prepare(st);
	}
	signal(SIGPIPE, SIG_IGN);
	/* A run directory this start creates is removed again if the start
	 * fails (bad catalog or cluster): a failed start leaves nothing.  It is
	 * made here with an exclusive mkdir, so that only the start that made it
	 * may remove it, and two starts in the same second get two default
	 * directories. */
	if (!rc && !o.resume)
		st->fresh_dir = sd_run_dir_make(&st->run_dir, st->rd, sizeof st->rd, !o.run_dir);
	if (!rc && st->background)
		rc = to_background(st);
	if (rc < 0 || (!rc && !st->background))
		rc = run_controller(st);
	free(st->model);
	free(st);
	return rc;
}

const struct sd_subcommand sd_cmd_run = {
	.name = "",
	.synopsis = "[--job FILE] [--theme NAME] [options]",
	.main = run_main,
};
