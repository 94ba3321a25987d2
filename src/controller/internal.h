/* src/controller/internal.h - what the controller's files share (private;
 * the public interface is controller.h).  Everything in src/controller/
 * runs on the loop thread, except the file work it hands to the thread
 * pool (journal batches, checkpoint writes and pruning, a worker's log).
 * The files, each one job:
 *   rundir.c: the run directory: clocks, atomic files, resume scan (latest
 *     checkpoint, the journal of the run being resumed), the directory's
 *     lock, job, token and journal at create.
 *   journal.c: journal events, shown at once and written in ordered batches
 *     on the thread pool (a failed write said once, the gap marked).
 *   store.c: the rendezvous key-value store the workers' collectives set up
 *     through (Gloo's store).
 *   conn.c: worker connections: sending, closing, rejecting, reading lines,
 *     and the dispatch of every message a worker sends (hello, ready,
 *     joined, step, comm_failed, leaving, checkpoint chunks, logs).
 *   generation.c: generations: the batch split by measured speed, forming a
 *     generation, its timeout and the liveness checks that drop a silent
 *     worker, step reports and their metrics.
 *   checkpoint.c: the checkpoint sink (chunks from rank 0 assembled, written
 *     on the thread pool, verified, pruned) and the paced streams of the
 *     latest checkpoint to a resuming rank 0.
 *   commands.c: the operator's command table (add, drop, swap, checkpoint,
 *     pause, resume, quit, help); pending swaps are the fleet's.
 *   autopilot.c: the live autopilot: the policy's state from the run,
 *     its decisions journaled, its actions announced then run as commands.
 *   controller.c: the controller's life: create, start, the fleet's hooks,
 *     run end, status for the view, close and free.
 */
#ifndef SD_CONTROLLER_INTERNAL_H
#define SD_CONTROLLER_INTERNAL_H

#include "src/controller/controller.h"

#include <cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine/checkpoint.h"
#include "src/base/errors.h"
#include "engine/onnx.h"
#include "engine/train.h"
#include "src/market/autopilot.h"
#include "src/proto/events.h"
#include "src/proto/protocol.h"
#include "src/provider/fleet.h"

/* Joins and losses that happen close together form one generation. */
#define GENERATION_DEBOUNCE_MS 30
/* Speed estimates follow new measurements with this weight. */
#define SPEED_EMA 0.2

struct conn;

struct conn {
	uv_tcp_t tcp;
	struct sd_controller *c;
	struct sd_line_reader rd;
	int authed;
	int closing;
	char server_id[64];
	char peer[64];
	long pid;
	int member;          /* in the current generation */
	int rank, offset, count;
	int has_state;       /* joined a generation: holds the run's state */
	int leaving;
	int loss_recorded;       /* its leave/loss started the recovery clock */
	int ready;           /* has loaded the job; may join generations */
	uint64_t heard_ms;   /* loop time of the last bytes it sent */
	int unheard;         /* left out of a generation for its silence */
	long failed_gen;     /* generation of its last comm_failed, -1 none */
	double ips;          /* measured images/s of its compute (EMA) */
	double ips_assumed;  /* speed assumed before the first measurement */
	double compute_ms, comm_ms;
	int emulated;
	char backend[8];     /* "cpu", "cuda" or "" (worker did not say) */
	char device[64];     /* CUDA device name, "" on the CPU */
	char precision[8];   /* "fp32", "bf16" or "" (worker did not say) */
	char precision_reason[160];
	/* Streaming the latest checkpoint to it (a resuming rank 0, see
	 * generation.c): the next offset to send, and the generation message
	 * that goes after the last chunk. */
	int streaming;
	size_t stream_off;
	cJSON *stream_then;
	int stream_chunks;
	int streamed;               /* it has the whole of ckpt streamed_step: */
	long streamed_step;         /* a later generation need not stream it again */
	size_t stream_inflight;     /* bytes of chunks handed to libuv, not yet written */
	size_t stream_max_queued;   /* the most stream_inflight was */
	/* Sending it the ONNX model's file (it asked with model_get): the next
	 * offset, and the chunks sent.  Paced by stream_inflight as the
	 * checkpoint stream is. */
	int model_streaming;
	size_t model_off;
	int model_chunks;
	size_t model_max_queued;   /* the most stream_inflight was meanwhile */
	struct conn *next;
};

/* The live autopilot (autopilot.c): its objective, the action it announced,
 * and what it must respect (the operator's servers, the operator's last
 * drop) or remember (recent revocations and refusals per offer). */
#define CTL_AP_MANUAL_MAX 64
#define CTL_AP_REVS_MAX 64
/* Seconds between an action's announcement and its execution: time for
 * the operator to read the status line and hold it (A). */
#define CTL_AP_ANNOUNCE_S 5.0
struct ctl_autopilot {
	int on;
	int have_obj;                 /* obj holds a goal (the job's or a command's) */
	struct sd_autopilot_objective obj;
	uv_timer_t timer;             /* the tick that decides and carries out */
	int replan;                   /* the picture changed: decide at the next tick */
	int deciding;                 /* a decision is on the thread pool */
	long epoch;                   /* bumped by the operator's moves and on/off: a
	                               * decision asked before is dropped */
	double last_decide;           /* run time of the last decision, -1 none */
	double p_on_time;             /* P(done by the deadline) of the last decision, -1 none */
	int pending;                  /* an action is announced */
	char pending_line[160];       /* its command ("swap s3 OFFER") */
	char pending_reason[256];
	double pending_at;            /* run time it runs at */
	char held_line[160];          /* the operator held it: not announced again */
	double held_until;            /* before this run time */
	char manual[CTL_AP_MANUAL_MAX][16];  /* servers the operator added or swapped in */
	int nmanual;
	int manual_cap;               /* -1, or no adds above this many servers (the operator's drop) */
	struct { const struct sd_offer *o; double t; int refused; } revs[CTL_AP_REVS_MAX];
	int nrevs, revs_head;         /* a ring of the latest */
	char last_nothing[192];       /* the last "nothing" reason journaled, not repeated */
};

struct kv {
	char *key;
	char *value;         /* hex, as received */
	struct kv *next;
};

struct pending_get {
	struct conn *conn;
	long long id;
	char *key;
	struct pending_get *next;
};

struct sd_controller {
	uv_loop_t *loop;
	uv_tcp_t server;
	uv_timer_t gen_timer;
	uv_timer_t grace_timer;
	uv_timer_t live_timer;       /* liveness checks, see controller.h */
	uint64_t live_tick_ms;       /* when it last ran */
	int live_interval_ms;
	int heartbeat_ms;            /* the workers' heartbeat interval */
	int timeout_ms;              /* the current generation's timeout */
	long failing_gen;            /* generation a collective failed in, -1 none */
	uint64_t failing_since_ms;   /* its first comm_failed */
	int ever_ready;              /* some worker loaded the job */
	char (*job_failed)[64];      /* servers whose worker could not load the job */
	int njob_failed;
	char job_error[1024];        /* the first such error */
	struct sd_job job;
	struct sd_controller_opts opts;
	char run_dir[SD_PATH_MAX];
	char *token;
	int journal_fd;              /* RUNDIR/journal.jsonl, O_APPEND; -1 none */
	char journal_path[SD_PATH_MAX + 64];
	off_t journal_size;          /* its length after the last whole line (the
	                              * batch in flight's, see rundir.c) */
	long journal_lost;           /* events lost since writes began failing, 0 none */
	int journal_errno;           /* the error that started the failure */
	char *jw_pend;               /* lines waiting for the batch in flight */
	size_t jw_len, jw_cap;
	int jw_busy;                 /* a batch is being written */
	int ending_no_worker;        /* reading the last worker's log to end the run */
	struct last_words *no_worker; /* that reading, while it is pending */
	int port;
	char connect[300];           /* HOST:PORT this host's workers dial */
	char advertise[300];         /* HOST:PORT other hosts' workers dial */
	int advertised;              /* --advertise was given (or kept): they dial it
	                              * themselves, not through their provider's ssh */
	char kept_listen_addr[64];   /* a resume's listen.json (ctl_open_run_dir) */
	int kept_listen_port;
	char kept_advertise[300];
	double t0;               /* wall time the run started (a resumed run: its first start) */
	double wall0, mono0;     /* wall and monotonic time this controller started */
	struct conn *conns;
	struct sd_fleet *fleet;
	struct kv *kv;
	struct pending_get *gets;
	long generation;
	int world_size;
	char gen_reason[64];
	long step;               /* last completed global step */
	long total_steps;        /* from the workers' joined messages */
	double step_ms_ema;
	double last_loss, last_acc;
	double last_val_loss;    /* a language model's last evaluation, nats per token */
	int last_epoch;
	double lost_at;          /* mono_s() of the first loss since the last recovery, 0 none */
	long lost_gen;           /* the generation it happened in */
	char lost_servers[8][64];/* the members lost since then (the first 8) */
	int nlost_servers;
	long lost_step;
	int lost_abrupt;         /* killed mid-step (not a leave at a boundary) */
	long recover_start;      /* step the generation after a loss started from */
	long rank0_step;         /* the highest step a rank 0 reported, any generation */
	/* A member's STEP beyond rank0_step: its generation's rank 0 failed
	 * that step's collective after the member's had completed.  Journaled
	 * when a later generation starts from that step (it is then part of
	 * the run), dropped once a rank 0 reports the step itself. */
	cJSON *orphan_step;
	int paused;
	int finishing;           /* final step seen, waiting for the final checkpoint */
	int quitting;            /* quit: waiting for the checkpoint */
	int operator_quit;       /* the operator's quit command ran */
	int final_taken;         /* quitting: the final checkpoint's first chunk came */
	int closing;             /* sd_controller_close was called */
	int ck_writing;          /* checkpoints being written on the thread pool */
	char fatal[1024];        /* why the run cannot go on, "" if it can */
	int lock_fd;             /* RUNDIR/lock, flock()ed while this controller runs */
	int handles_open;        /* create: server, gen_timer, grace_timer, live_timer, ap.timer inited so far */
	int handles_closing;     /* a failed create: close callbacks still to come */
	int resume_last_server;  /* resume: the highest sN the journal names */
	double resume_usd;       /* resume: what the journal's servers cost */
	int ever_authed;         /* some worker has connected and authenticated */
	int exiting;
	double final_acc, final_loss;   /* a language model: final_loss is val_loss */
	/* checkpoint being received */
	unsigned char *ck;
	size_t ck_len, ck_total;
	long ck_step;
	char ck_reason[32];
	char latest_ckpt[SD_PATH_MAX + 400];
	long latest_ckpt_step;
	unsigned char *latest_data;   /* its bytes, kept to stream to a resuming rank 0 */
	/* The job's ONNX model file (opts.model_bytes copied; NULL for a
	 * built-in model) and its SHA-256 in hex: the welcome names them and
	 * model_get fetches them, since workers on other hosts cannot read the
	 * controller's path. */
	unsigned char *model_data;
	size_t model_len;
	char model_sha256[65];
	size_t latest_len;
	struct ctl_autopilot ap;
	const char *cmd_by;      /* who runs the command being dispatched: "operator", "trace", "autopilot" */
	/* checksums of the current step from each rank */
	long sum_step;
	cJSON *sums;
	int sums_count;
};

/* rundir.c */
double ctl_wall_s(void);
double ctl_mono_s(void);
double ctl_run_time_s(const struct sd_controller *c);
void ctl_find_latest_checkpoint(struct sd_controller *c);
int ctl_open_run_dir(struct sd_controller *c, const struct sd_controller_opts *opts, char **why);

/* journal.c: appends an event (consumed); one of up to two string fields;
 * at free, with the loop stopped, writes the lines no batch took. */
void ctl_journal(struct sd_controller *c, enum sd_event_type type, cJSON *ev);
/* sd_controller_command, with operator 0 for a line that no operator
 * typed (a trace's command): it never counts as the operator's quit. */
int ctl_command(struct sd_controller *c, const char *line, int operator, char **why);
void ctl_journal_kv(struct sd_controller *c, enum sd_event_type type, const char *k1, const char *v1,
                    const char *k2, const char *v2);
void ctl_journal_drain(struct sd_controller *c);

/* store.c */
struct kv *ctl_kv_find(struct sd_controller *c, const char *key);
void ctl_kv_reply(struct conn *k, long long id, const char *key, const char *value);
void ctl_kv_set(struct sd_controller *c, const char *key, const char *value);
void ctl_kv_prune(struct sd_controller *c, long keep);

/* conn.c */
/* Queues msg (consumed) on k's socket. */
void ctl_conn_send(struct conn *k, cJSON *msg);
/* The same for a checkpoint stream's chunk: counted in k->stream_inflight
 * until written, and its completion sends more (ctl_stream_pump).
 * Returns the bytes queued (0: none). */
size_t ctl_conn_send_chunk(struct conn *k, cJSON *msg);
void ctl_record_loss(struct sd_controller *c, struct conn *k, double at);
void ctl_conn_close(struct conn *k, const char *why_lost);
void ctl_conn_reject(struct conn *k, enum sd_event_type event, const char *reason);
void ctl_on_connection(uv_stream_t *server, int status);

/* generation.c */
void ctl_schedule_generation(struct sd_controller *c, const char *reason);
void ctl_on_live_timer(uv_timer_t *t);
void ctl_end_if_job_unloadable(struct sd_controller *c);
void ctl_on_step(struct sd_controller *c, struct conn *k, const cJSON *m);
void ctl_step_adopted(struct sd_controller *c, long step);

/* checkpoint.c, streams of the latest checkpoint to a resuming rank 0:
 * starts one to k, `then` (its generation message) sent after the last
 * chunk (-1, then not taken: the checkpoint's bytes are missing); sends
 * more while k's socket has room (called as its writes complete); stops
 * every stream (a new generation forms); starts every stream over (the
 * latest checkpoint's bytes were replaced). */
int ctl_stream_checkpoint(struct sd_controller *c, struct conn *k, cJSON *then);
void ctl_stream_pump(struct conn *k);
/* checkpoint.c, the model file to a worker that asked (model_get): starts
 * the stream, and sends more as the chunks already queued are written. */
void ctl_on_model_get(struct sd_controller *c, struct conn *k, const cJSON *m);
void ctl_model_pump(struct conn *k);
void ctl_stream_stop_all(struct sd_controller *c);
void ctl_stream_restart_all(struct sd_controller *c);

/* checkpoint.c */
void ctl_on_ckpt_chunk(struct sd_controller *c, struct conn *k, const cJSON *m);

/* commands.c */
int ctl_cmd_quit(struct sd_controller *c, int argc, char **argv, char **why);
void ctl_quit_request_final(struct sd_controller *c);

/* commands.c: the same with who runs it ("operator", "trace",
 * "autopilot"), journaled as the command event's "by". */
int ctl_command_by(struct sd_controller *c, const char *line, const char *by, char **why);

/* autopilot.c: setup from the job (0, or -1 with *why naming the job
 * file's field), its timer started and closed with the controller's, the
 * fleet events that change its picture (fields borrowed), the operator's
 * add, swap and drop it must respect, and its command. */
int ctl_ap_init(struct sd_controller *c, char **why);
void ctl_ap_start(struct sd_controller *c);
void ctl_ap_close(struct sd_controller *c);
void ctl_ap_on_event(struct sd_controller *c, enum sd_event_type type, const cJSON *fields);
void ctl_ap_operator_added(struct sd_controller *c, const char *server);
void ctl_ap_operator_dropped(struct sd_controller *c, const char *server);
int ctl_cmd_autopilot(struct sd_controller *c, int argc, char **argv, char **why);

/* controller.c */
void ctl_finish(struct sd_controller *c, int status);
void ctl_maybe_finish(struct sd_controller *c);

#endif
