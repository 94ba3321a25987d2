/* src/controller/controller.h - the controller: membership, generations, the
 * rendezvous store, the data split, the checkpoint sink and the journal.
 * It runs on one libuv loop and never blocks it.  No UI code here: the
 * headless main and (later) the cockpit both drive it through the command
 * table (sd_controller_command).
 *
 * Liveness.  A generation trains only as fast as its slowest member, and a
 * member that stops answering (its process stopped, its host frozen, its
 * link dead) would hold the others in a collective for ever; the controller
 * finds it and takes it out:
 *
 *   heartbeat_ms = clamp(floor / 10, 20 ms, 1000 ms)
 *   timeout      = max(floor, SD_TIMEOUT_STEPS x predicted step time)
 *
 * floor is the job's comm_timeout (default 5 s).  The predicted step time of
 * a new generation is the slowest member's share of the global batch over its
 * measured speed (images/s, the EMA of its step reports; a member not
 * measured yet counts at the mean of the others), plus the smallest
 * communication time a member reported; before any measurement the timeout
 * is the floor.  SD_TIMEOUT_STEPS (4) leaves room over the one step a
 * healthy collective may wait (a rank waits for the slowest member's
 * compute) for noise on a loaded machine; an evaluation or a checkpoint
 * between steps must fit in it too.  The timeout goes to the workers in each
 * generation message (it bounds the rendezvous and every collective) and is
 * journaled in the generation event.
 *
 * Every worker sends a heartbeat every heartbeat_ms from a thread of its own.
 * A worker the controller has heard nothing from (not a byte) for longer
 * than the timeout is journaled as worker_unresponsive and dropped: its
 * connection closes with an error that invites it to connect again, so a
 * worker that comes back (SIGCONT, a host that thaws) rejoins as a new
 * member and receives the state by broadcast.  When a collective fails the
 * group re-forms only once every member has reported the failure, left, or
 * been dropped: at the first report the controller tells the members to give
 * up on the generation (abort), so the healthy ones report at once; one
 * silent for half the timeout by then is dropped, and one still alive that
 * reports nothing for a timeout after the first report is dropped as stuck.  A worker silent for more than
 * half the timeout is never admitted to a new generation until it is heard
 * from again.  Nothing here depends on the workers' host (no pids): the
 * same holds across machines. */
#ifndef SD_CONTROLLER_CONTROLLER_H
#define SD_CONTROLLER_CONTROLLER_H

#include <cJSON.h>
#include <uv.h>

#include "src/proto/job.h"
#include "src/proto/events.h"

struct sd_controller;
struct sd_app_command;
struct sd_trace;

/* See "Liveness" above. */
#define SD_TIMEOUT_STEPS 4

/* The run directory's copy of an ONNX job's model file, taken when the run
 * starts (ctl_open_run_dir), so the run's checkpoints can be turned back
 * into the same graph (`spotdeck export`) after the file named by the job
 * is changed or gone.  Checkpoints record the file's SHA-256. */
#define SD_RUN_MODEL_FILE "model.onnx"

struct sd_controller_opts {
	const char *run_dir;       /* created if missing; holds journal, checkpoints, logs */
	const char *worker_path;   /* spotdeck-worker executable for local servers */
	int resume;                /* continue the run found in run_dir */
	int echo_journal;          /* also print every journal line on stdout */
	const char *catalog_path;  /* market catalog; NULL: local servers only (no provider) */
	const char *job_file;      /* the job file's name for errors, or NULL ("job.json") */
	int emulate;               /* pace market servers' workers to their GPU's speed */
	const struct sd_trace *trace;   /* market trace to replay, or NULL */
	/* Where workers connect.  listen_addr: a numeric IPv4 or IPv6 address
	 * to bind (NULL: 127.0.0.1), listen_port: 0 for an ephemeral one.  A
	 * wildcard (0.0.0.0, ::) accepts on every interface; this host's own
	 * workers then dial loopback.  advertise: "HOST:PORT" that workers on
	 * other hosts dial (NULL: the listening address), journaled in
	 * run_start.  Workers prove themselves with the run's token, which
	 * travels unencrypted: listen beyond loopback on trusted networks only
	 * (spotdeck(1), SECURITY).  The run directory keeps them (listen.json)
	 * when given; a resume given neither takes them from there. */
	const char *listen_addr;
	int listen_port;
	const char *advertise;
	/* What a cloud provider does with VMs an earlier controller of the run
	 * left ("delete", "keep", "adopt", "ask"; NULL: the job's
	 * provider.orphans), and whether a cockpit may answer its question
	 * (without one the default is "delete", with one "ask"). */
	const char *orphans;
	int interactive;
	/* The job's ONNX model file, read and checked by the caller before
	 * anything was created (sd_train_check_model), malloc'd: taken by
	 * sd_controller_create (freed with the controller, or by a create that
	 * fails; the caller must not free it), which hashes it and sends it to
	 * every worker that asks (protocol.h, model_get).  Taken, not copied,
	 * so a large model is held once.  NULL with an ONNX job: the
	 * controller reads the job's path itself. */
	unsigned char *model_bytes;
	size_t model_len;
	/* One line about the model the run should carry (the caller's
	 * sd_onnx_eval_export_warning: an eval-mode export), journaled in
	 * run_start as model_warning; NULL or "": none.  Read only by
	 * sd_controller_create. */
	const char *model_warning;
	/* Called once the run is over (done, quit, or fatal); status is the exit
	 * status the program should end with. */
	void (*on_exit)(struct sd_controller *c, int status, void *ctx);
	/* Sees every journal event after it is written (the cockpit's view
	 * model follows the run this way), typed (events.h); ev and its
	 * fields are only borrowed for the call. */
	void (*on_event)(const struct sd_event *ev, void *ctx);
	/* The program's own commands (the cockpit's what-if view, detach),
	 * dispatched, checked, listed by help and journaled by the same table
	 * as the controller's (sd_controller_command); run gets ctx.  An array
	 * ended by an entry whose name is NULL, borrowed for the controller's
	 * life; NULL: none.  A name the controller's table has is never
	 * looked up here. */
	const struct sd_app_command *app_commands;
	void *ctx;
};

/* A connected worker, for the cockpit. */
struct sd_worker_info {
	char server[64];
	int member;               /* in the current generation */
	int rank;
	double images_per_sec;    /* measured compute speed (EMA); 0 while paused */
	double compute_ms, comm_ms;   /* last step */
	int emulated;
	char device[64];          /* the CUDA device it trains on ("NVIDIA H200"),
	                           * "" when it trains on the CPU */
	char precision[8];        /* "fp32" or "bf16" as the worker resolved the
	                           * job's precision; "" until it says */
};

/* The run at a glance. */
struct sd_run_status {
	long step, total_steps;
	int epoch, epochs;
	double loss;              /* last journaled step's mean loss, < 0 none */
	double test_accuracy;     /* last evaluation, < 0 none (a language model) */
	double val_loss;          /* a language model's last evaluation, nats per
	                           * token; < 0 none (an image model) */
	double images_per_sec;    /* global batch / step time (EMA); 0 while paused */
	double elapsed_s;
	double eta_s;             /* < 0 unknown */
	long generation;
	int world_size;
	int paused;
	int done;
};

/* Creates the controller on loop: writes run_dir/job.json and the token
 * (run_dir/token, mode 0600), opens the journal, listens on opts->listen_addr
 * (127.0.0.1 by default) on opts->listen_port (0: an ephemeral port).  With opts->resume the job comes from run_dir/job.json and
 * the latest valid checkpoint there is used when workers arrive.  Every
 * offer of job->cluster must be in the provider's catalog: one that is not
 * fails the create before run_start, with "JOBFILE: cluster[I]: \"OFFER\"
 * is not an offer of the P provider (CATALOG: N offers; the most alike:
 * ...)".  Returns 0 or
 * -1 with *why (names the file or the failing call).  After a failure, the
 * handles it opened on loop are closing: run the loop until it is empty
 * before closing it (their last close callback frees the memory). */
int sd_controller_create(struct sd_controller **out, uv_loop_t *loop, const struct sd_job *job,
                         const struct sd_controller_opts *opts, char **why);

/* Starts the job's initial local workers (job->workers) and its cluster
 * (job->cluster; a stockout is journaled and skipped).  Returns 0, or -1
 * with *why when local workers cannot run here or one cannot be started. */
int sd_controller_start(struct sd_controller *c, char **why);

/* Runs one command line the operator typed ("add", "drop s3", "checkpoint",
 * "pause", "resume", "quit", "help", or one of opts.app_commands): its
 * first word names the command exactly ("quitx" is no "quit").  Returns 0,
 * or -1 with *why for an unknown command or bad arguments.  Every command
 * is journaled. */
int sd_controller_command(struct sd_controller *c, const char *line, char **why);

/* Whether the operator's quit command ran (not a signal's quit, nor a
 * trace's): the cockpit then ends with status 0. */
int sd_controller_operator_quit(const struct sd_controller *c);

/* SIGTERM, SIGINT or SIGHUP reached the program: journals {"type":"signal",
 * "signal":NAME} and quits as the quit command does (checkpoint, stop the
 * workers, release the servers). */
void sd_controller_signal(struct sd_controller *c, int signum);

/* Fills out[0..max) with the connected workers; returns how many. */
int sd_controller_workers(const struct sd_controller *c, struct sd_worker_info *out, int max);
void sd_controller_status(const struct sd_controller *c, struct sd_run_status *st);
const struct sd_job *sd_controller_job(const struct sd_controller *c);
/* Why the run had to stop (a worker could not load the job), or NULL. */
const char *sd_controller_fatal(const struct sd_controller *c);
struct sd_fleet *sd_controller_fleet(struct sd_controller *c);

/* Closes every handle and starts the fleet's close (fleet.h), which may
 * take seconds while the provider cleans its hosts; call after on_exit.
 * DONE(ARG) (NULL: none) is called once the provider is done, perhaps
 * before this returns: keep the loop running until then (commands are
 * refused meanwhile), then run it until it is empty and free with
 * sd_controller_free. */
void sd_controller_close(struct sd_controller *c, void (*done)(void *arg), void *arg);
void sd_controller_free(struct sd_controller *c);

/* One entry of the command table shared by the headless input and the UI
 * (after tmux's cmd_entry): the dispatcher, sd_controller_command, refuses
 * a line whose argument count is outside [min_args, max_args] with the
 * usage "NAME ARGS", so run() is called only with min_args + 1 <= argc <=
 * max_args + 1 (argv[0] is the name).  run returns 0, or -1 with *why set
 * (caller frees). */
struct sd_command {
	const char *name;
	const char *args;    /* usage of the arguments, e.g. "SERVER OFFER" */
	int min_args, max_args;
	const char *help;
	int (*run)(struct sd_controller *c, int argc, char **argv, char **why);
};
extern const struct sd_command sd_commands[];

/* An entry of sd_controller_opts.app_commands: as struct sd_command, but
 * run gets the program's context (opts.ctx) rather than the controller. */
struct sd_app_command {
	const char *name;
	const char *args;
	int min_args, max_args;
	const char *help;
	int (*run)(void *ctx, int argc, char **argv, char **why);
};

#endif
