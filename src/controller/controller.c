/* src/controller/controller.c - see controller.h.  Everything here runs on the loop
 * thread; nothing blocks except the small synchronous file writes of the
 * journal and of checkpoints (fsync'd, once per checkpoint). */
#include "config.h"

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
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine/checkpoint.h"
#include "engine/errors.h"
#include "src/proto/protocol.h"
#include "src/provider/provider.h"

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
	struct conn *next;
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
	off_t journal_size;          /* its length after the last whole line */
	long journal_lost;           /* events lost since writes began failing, 0 none */
	int journal_errno;           /* the error that started the failure */
	int port;
	double t0;               /* wall time the run started (a resumed run: its first start) */
	double wall0, mono0;     /* wall and monotonic time this controller started */
	struct conn *conns;
	struct sd_provider *provider;
	/* swaps waiting for the replacement to train: new server -> old one */
	char swap_new[16][16], swap_old[16][16];
	int nswaps;
	struct kv *kv;
	struct pending_get *gets;
	long generation;
	int world_size;
	char gen_reason[64];
	long step;               /* last completed global step */
	long total_steps;        /* from the workers' joined messages */
	double step_ms_ema;
	double last_loss, last_acc;
	int last_epoch;
	double lost_at;          /* mono_s() of the first loss since the last recovery, 0 none */
	long lost_gen;           /* the generation it happened in */
	char lost_servers[8][64];/* the members lost since then (the first 8) */
	int nlost_servers;
	long lost_step;
	int lost_abrupt;         /* killed mid-step (not a leave at a boundary) */
	long recover_start;      /* step the generation after a loss started from */
	int paused;
	int finishing;           /* final step seen, waiting for the final checkpoint */
	int quitting;            /* quit: waiting for the checkpoint */
	int closing;             /* sd_controller_close was called */
	int ck_writing;          /* checkpoints being written on the thread pool */
	char fatal[1024];        /* why the run cannot go on, "" if it can */
	int lock_fd;             /* RUNDIR/lock, flock()ed while this controller runs */
	int handles_open;        /* create: server, gen_timer, grace_timer, live_timer inited so far */
	int handles_closing;     /* a failed create: close callbacks still to come */
	int resume_last_server;  /* resume: the highest sN the journal names */
	double resume_usd;       /* resume: what the journal's servers cost */
	int ever_authed;         /* some worker has connected and authenticated */
	int exiting;
	double final_acc, final_loss;
	/* checkpoint being received */
	unsigned char *ck;
	size_t ck_len, ck_total;
	long ck_step;
	char ck_reason[32];
	char latest_ckpt[SD_PATH_MAX + 400];
	long latest_ckpt_step;
	unsigned char *latest_data;   /* its bytes, kept to stream to a resuming rank 0 */
	size_t latest_len;
	/* checksums of the current step from each rank */
	long sum_step;
	cJSON *sums;
	int sums_count;
};

/* Wall-clock time, Unix seconds: only for the journal's "time" and for
 * the down time of a resumed run, never to measure a duration here. */
static double wall_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Monotonic seconds (any origin), for durations: a clock step (NTP, an
 * operator's date) does not move them. */
static double mono_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Seconds since the run started (the journal's "t"): what went before this
 * controller (a resumed run's earlier time and its down time, from the wall
 * clock once, at the start) plus this controller's time, measured on the
 * monotonic clock. */
static double run_time_s(const struct sd_controller *c)
{
	return (c->wall0 - c->t0) + (mono_s() - c->mono0);
}

/* A journal event: type, time (Unix seconds), t (seconds since the run
 * started), then ev's fields (ev is consumed; NULL: none).  Caller frees. */
static cJSON *event_new(struct sd_controller *c, const char *type, cJSON *ev)
{
	if (!ev)
		ev = cJSON_CreateObject();
	cJSON *out = cJSON_CreateObject();
	cJSON_AddStringToObject(out, "type", type);
	cJSON_AddNumberToObject(out, "time", floor(wall_s() * 1000) / 1000);
	cJSON_AddNumberToObject(out, "t", floor(run_time_s(c) * 1000) / 1000);
	cJSON *item = ev->child;
	while (item) {
		cJSON *next = item->next;
		cJSON_DetachItemViaPointer(ev, item);
		cJSON_AddItemToObject(out, item->string, item);
		item = next;
	}
	cJSON_Delete(ev);
	return out;
}

/* Shows event out (printed as s) on stdout when echoing and to on_event. */
static void event_publish(struct sd_controller *c, const cJSON *out, const char *s)
{
	if (c->opts.echo_journal) {
		puts(s);
		fflush(stdout);
	}
	if (c->opts.on_event)
		c->opts.on_event(out, c->opts.ctx);
}

/* Appends line s and a newline to the journal, whole or not at all: a
 * short write is cut off again, so a failure never leaves a torn line in
 * the middle of the journal.  Returns 0, or -1 with errno set. */
static int journal_append(struct sd_controller *c, const char *s)
{
	size_t len = strlen(s);
	char *line = sd_malloc(len + 1);
	memcpy(line, s, len);
	line[len] = '\n';
	size_t done = 0;
	int err = 0;
	while (done < len + 1) {
		ssize_t n = write(c->journal_fd, line + done, len + 1 - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			err = n < 0 ? errno : EIO;
			break;
		}
		done += (size_t)n;
	}
	free(line);
	if (!err) {
		c->journal_size += (off_t)done;
		return 0;
	}
	if (done > 0 && ftruncate(c->journal_fd, c->journal_size) < 0) {
		/* The torn line stays; a reader skips it as it does a crash's. */
	}
	errno = err;
	return -1;
}

/* A journal write failed with err: said once per failure (stderr, and an
 * "error" event on stdout and in the cockpit, not in the journal), then
 * the run goes on: training is worth more than its record. */
static void journal_failed(struct sd_controller *c, int err)
{
	if (c->journal_lost++ > 0)
		return;
	c->journal_errno = err;
	fprintf(stderr, "spotdeck: %s: cannot write the journal: %s; training goes on, "
	        "its events are lost until writes work again\n", c->journal_path, strerror(err));
	fflush(stderr);
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "reason", "cannot write the journal");
	cJSON_AddStringToObject(ev, "path", c->journal_path);
	cJSON_AddStringToObject(ev, "error", strerror(err));
	cJSON *out = event_new(c, "error", ev);
	char *s = cJSON_PrintUnformatted(out);
	if (!s)
		sd_oom();
	event_publish(c, out, s);
	free(s);
	cJSON_Delete(out);
}

/* After a failure, event line s goes in only with a journal_resumed event
 * before it saying how many events were lost, both in one write: a disk
 * with room for the short line only is still failing.  Returns 0 when
 * the journal writes again. */
static int journal_resume(struct sd_controller *c, const char *s)
{
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "path", c->journal_path);
	cJSON_AddNumberToObject(ev, "lost", (double)c->journal_lost);
	cJSON_AddStringToObject(ev, "error", strerror(c->journal_errno));
	cJSON *out = event_new(c, "journal_resumed", ev);
	char *r = cJSON_PrintUnformatted(out);
	if (!r)
		sd_oom();
	size_t rn = strlen(r), sn = strlen(s);
	char *both = sd_malloc(rn + 1 + sn + 1);
	memcpy(both, r, rn);
	both[rn] = '\n';
	memcpy(both + rn + 1, s, sn + 1);
	int rc = journal_append(c, both);
	if (rc == 0) {
		fprintf(stderr, "spotdeck: %s: the journal writes again (%ld events lost)\n", c->journal_path,
		        c->journal_lost);
		fflush(stderr);
		c->journal_lost = 0;
		event_publish(c, out, r);
	}
	free(both);
	free(r);
	cJSON_Delete(out);
	return rc;
}

/* Appends one event to the journal (and stdout when echoing); consumes ev. */
static void journal(struct sd_controller *c, const char *type, cJSON *ev)
{
	cJSON *out = event_new(c, type, ev);
	char *s = cJSON_PrintUnformatted(out);
	if (!s)
		sd_oom();
	if (c->journal_fd >= 0) {
		if (c->journal_lost > 0) {
			if (journal_resume(c, s) < 0)
				c->journal_lost++;   /* still failing: this one is lost too */
		} else if (journal_append(c, s) < 0) {
			journal_failed(c, errno);
		}
	}
	event_publish(c, out, s);
	free(s);
	cJSON_Delete(out);
}

static void journal_kv(struct sd_controller *c, const char *type, const char *k1, const char *v1,
                       const char *k2, const char *v2)
{
	cJSON *ev = cJSON_CreateObject();
	if (k1)
		cJSON_AddStringToObject(ev, k1, v1);
	if (k2)
		cJSON_AddStringToObject(ev, k2, v2);
	journal(c, type, ev);
}

/* ---- connections ---- */

struct write_req {
	uv_write_t req;
	char *data;
};

static void on_write(uv_write_t *req, int status)
{
	struct write_req *w = (struct write_req *)req;
	free(w->data);
	free(w);
}

static void conn_send(struct conn *k, cJSON *msg)
{
	if (k->closing) {
		cJSON_Delete(msg);
		return;
	}
	struct write_req *w = sd_malloc(sizeof *w);
	size_t len;
	w->data = sd_msg_encode(msg, &len);
	cJSON_Delete(msg);
	uv_buf_t buf = uv_buf_init(w->data, (unsigned)len);
	if (uv_write(&w->req, (uv_stream_t *)&k->tcp, &buf, 1, on_write) < 0) {
		free(w->data);
		free(w);
	}
}

static void on_conn_closed(uv_handle_t *h)
{
	struct conn *k = h->data;
	sd_line_reader_free(&k->rd);
	free(k);
}

static void schedule_generation(struct sd_controller *c, const char *reason);
static void finish(struct sd_controller *c, int status);
static void swap_remove(struct sd_controller *c, int i);

/* Starts the recovery clock for a member leaving the group: at its notice
 * (LEAVING) for a graceful leave, at its connection's end otherwise, at the
 * last time it was heard from for an unresponsive one (`at`, mono_s()
 * seconds).  The next completed step reports recovery_s, steps_lost and
 * lost_servers. */
static void record_loss(struct sd_controller *c, struct conn *k, double at)
{
	k->loss_recorded = 1;
	if (c->lost_at <= 0) {
		c->lost_at = at;
		c->lost_step = c->step;
		c->lost_gen = c->generation;
		c->lost_abrupt = 0;
	}
	c->lost_abrupt |= !k->leaving;
	if (c->nlost_servers < 8)
		snprintf(c->lost_servers[c->nlost_servers++], sizeof c->lost_servers[0], "%s", k->server_id);
}

static void conn_close(struct conn *k, const char *why_lost)
{
	struct sd_controller *c = k->c;
	if (k->closing)
		return;
	k->closing = 1;
	/* Unlink from the list and drop its pending store gets. */
	struct conn **pp = &c->conns;
	while (*pp && *pp != k)
		pp = &(*pp)->next;
	if (*pp)
		*pp = k->next;
	struct pending_get **gp = &c->gets;
	while (*gp) {
		if ((*gp)->conn == k) {
			struct pending_get *g = *gp;
			*gp = g->next;
			free(g->key);
			free(g);
		} else {
			gp = &(*gp)->next;
		}
	}
	if (k->authed)
		sd_provider_worker_event(c->provider, k->server_id, SD_WORKER_GONE);
	if (k->authed && why_lost) {
		cJSON *ev = cJSON_CreateObject();
		cJSON_AddStringToObject(ev, "server", k->server_id);
		cJSON_AddNumberToObject(ev, "generation", (double)c->generation);
		cJSON_AddNumberToObject(ev, "step", (double)c->step);
		cJSON_AddStringToObject(ev, "reason", why_lost);
		cJSON_AddBoolToObject(ev, "member", k->member);
		journal(c, k->leaving || c->exiting ? "worker_left" : "worker_lost", ev);
		if (k->member && !c->exiting && !k->loss_recorded)
			record_loss(c, k, mono_s());
		if (k->member && !c->exiting)
			schedule_generation(c, k->leaving ? "worker left" : "worker lost");
		/* The checkpoint quit waits for will not come from a lost rank 0. */
		if (c->quitting && k->member && k->rank == 0 && !c->ck_writing)
			finish(c, 1);
	}
	uv_close((uv_handle_t *)&k->tcp, on_conn_closed);
}

/* Ends a connection that broke the protocol: say why, journal it, close. */
static void conn_reject(struct conn *k, const char *event, const char *reason)
{
	struct sd_controller *c = k->c;
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "peer", k->peer);
	if (k->server_id[0])
		cJSON_AddStringToObject(ev, "server", k->server_id);
	cJSON_AddStringToObject(ev, "reason", reason);
	journal(c, event, ev);
	cJSON *m = sd_msg_new(SD_MSG_ERROR);
	cJSON_AddStringToObject(m, "reason", reason);
	conn_send(k, m);
	conn_close(k, reason);
}

/* ---- rendezvous store ---- */

static struct kv *kv_find(struct sd_controller *c, const char *key)
{
	for (struct kv *e = c->kv; e; e = e->next)
		if (!strcmp(e->key, key))
			return e;
	return NULL;
}

static void kv_reply(struct conn *k, long long id, const char *key, const char *value)
{
	cJSON *m = sd_msg_new(SD_MSG_KV_VALUE);
	cJSON_AddNumberToObject(m, "id", (double)id);
	cJSON_AddStringToObject(m, "key", key);
	cJSON_AddStringToObject(m, "value", value);
	conn_send(k, m);
}

static void kv_set(struct sd_controller *c, const char *key, const char *value)
{
	struct kv *e = kv_find(c, key);
	if (!e) {
		e = sd_calloc(1, sizeof *e);
		e->key = strdup(key);
		e->next = c->kv;
		c->kv = e;
	}
	free(e->value);
	e->value = strdup(value);
	if (!e->key || !e->value)
		sd_oom();
	struct pending_get **gp = &c->gets;
	while (*gp) {
		struct pending_get *g = *gp;
		if (!strcmp(g->key, key)) {
			kv_reply(g->conn, g->id, key, value);
			*gp = g->next;
			free(g->key);
			free(g);
		} else {
			gp = &g->next;
		}
	}
}

/* Drops the keys of generations older than keep, which nobody reads again. */
static void kv_prune(struct sd_controller *c, long keep)
{
	struct kv **pp = &c->kv;
	while (*pp) {
		long g = -1;
		if (sscanf((*pp)->key, "gen/%ld/", &g) == 1 && g < keep) {
			struct kv *e = *pp;
			*pp = e->next;
			free(e->key);
			free(e->value);
			free(e);
		} else {
			pp = &(*pp)->next;
		}
	}
}

/* ---- generations ---- */

/* Splits the global batch across members in proportion to measured speed
 * (largest remainder; everyone gets at least one sample when possible). */
static void split_batch(struct sd_controller *c, struct conn **m, int n)
{
	int B = c->job.train.global_batch;
	/* A worker not measured yet counts as the mean of the measured ones (all
	 * equal when nobody is measured), so a newcomer gets a fair share. */
	double measured = 0;
	int nmeasured = 0;
	for (int i = 0; i < n; i++)
		if (m[i]->ips > 0) {
			measured += m[i]->ips;
			nmeasured++;
		}
	double mean = nmeasured ? measured / nmeasured : 1;
	for (int i = 0; i < n; i++)
		if (!(m[i]->ips > 0))
			m[i]->ips_assumed = mean;
	double total = 0;
	for (int i = 0; i < n; i++)
		total += m[i]->ips > 0 ? m[i]->ips : m[i]->ips_assumed;
	int given = 0;
	double *rem = sd_calloc((size_t)n, sizeof(double));
	for (int i = 0; i < n; i++) {
		double share = (m[i]->ips > 0 ? m[i]->ips : m[i]->ips_assumed) / total * B;
		m[i]->count = (int)floor(share);
		if (m[i]->count < 1 && B >= n)
			m[i]->count = 1;
		rem[i] = share - floor(share);
		given += m[i]->count;
	}
	while (given < B) {
		int best = 0;
		for (int i = 1; i < n; i++)
			if (rem[i] > rem[best])
				best = i;
		m[best]->count++;
		rem[best] = -1;
		given++;
	}
	while (given > B) {
		int big = 0;
		for (int i = 1; i < n; i++)
			if (m[i]->count > m[big]->count)
				big = i;
		m[big]->count--;
		given--;
	}
	free(rem);
	int off = 0;
	for (int i = 0; i < n; i++) {
		m[i]->offset = off;
		off += m[i]->count;
	}
}

/* Streams the latest checkpoint to k (rank 0 of a generation with no state),
 * from memory: the loop never waits on the disk for it. */
static int send_resume_checkpoint(struct sd_controller *c, struct conn *k)
{
	if (!c->latest_ckpt[0])
		return 0;
	if (!c->latest_data)
		return -1;
	const size_t chunk = 256 * 1024;
	for (size_t off = 0; off < c->latest_len; off += chunk) {
		size_t n = c->latest_len - off < chunk ? c->latest_len - off : chunk;
		char *hex = sd_hex_encode(c->latest_data + off, n);
		cJSON *m = sd_msg_new(SD_MSG_CKPT_CHUNK);
		cJSON_AddNumberToObject(m, "step", (double)c->latest_ckpt_step);
		cJSON_AddNumberToObject(m, "offset", (double)off);
		cJSON_AddNumberToObject(m, "total", (double)c->latest_len);
		cJSON_AddStringToObject(m, "data", hex);
		free(hex);
		conn_send(k, m);
	}
	return 0;
}

/* The timeout of a generation of these n members, in ms: see "Liveness" in
 * controller.h.  Call after split_batch (it uses the members' counts). */
static int generation_timeout_ms(const struct sd_controller *c, struct conn **m, int n)
{
	double floor_ms = c->job.comm_timeout_s * 1000, measured = 0, comm = -1;
	int nmeasured = 0;
	for (int i = 0; i < n; i++)
		if (m[i]->ips > 0) {
			measured += m[i]->ips;
			nmeasured++;
		}
	double slowest = 0;
	for (int i = 0; i < n && nmeasured; i++) {
		double ips = m[i]->ips > 0 ? m[i]->ips : measured / nmeasured;
		slowest = fmax(slowest, m[i]->count * 1000.0 / ips);
		if (m[i]->comm_ms > 0 && (comm < 0 || m[i]->comm_ms < comm))
			comm = m[i]->comm_ms;
	}
	double predicted = slowest > 0 ? slowest + fmax(comm, 0) : 0;
	double t = fmax(floor_ms, SD_TIMEOUT_STEPS * predicted);
	return t > 86400000 ? 86400000 : (int)ceil(t);
}

/* Whether a failed collective of the current generation is accounted for:
 * every member reported it, left, or was dropped (its connection closed). */
static int failure_settled(const struct sd_controller *c)
{
	if (c->failing_gen != c->generation)
		return 1;
	for (const struct conn *k = c->conns; k; k = k->next)
		if (k->member && !k->closing && !k->leaving && k->failed_gen != c->generation)
			return 0;
	return 1;
}

static void form_generation(struct sd_controller *c)
{
	if (c->exiting)
		return;
	/* After a failed collective, a member that has not reported may be the
	 * one that is silent: wait until each is heard from or dropped (the
	 * liveness timer and every report call schedule_generation again). */
	if (!failure_settled(c))
		return;
	struct conn *m[1024];
	int n = 0, holders = 0;
	uint64_t now = uv_now(c->loop);
	for (struct conn *k = c->conns; k; k = k->next) {
		k->member = 0;
		if (!k->authed || !k->ready || k->leaving || k->closing || n >= 1024)
			continue;
		/* Never admit a worker we have not heard from lately: it would
		 * hold the whole group in the rendezvous. */
		if (now - k->heard_ms > (uint64_t)c->timeout_ms / 2) {
			k->unheard = 1;
			continue;
		}
		m[n++] = k;
		holders += k->has_state;
	}
	c->generation++;
	c->world_size = n;
	c->sums_count = 0;
	kv_prune(c, c->generation - 1);
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddNumberToObject(ev, "generation", (double)c->generation);
	cJSON_AddNumberToObject(ev, "world_size", n);
	cJSON_AddStringToObject(ev, "reason", c->gen_reason);
	cJSON_AddNumberToObject(ev, "step", (double)c->step);
	if (n == 0 || c->paused) {
		cJSON_AddStringToObject(ev, "state", c->paused ? "paused" : "waiting for workers");
		journal(c, "generation", ev);
		return;
	}
	/* Put state holders first so rank 0 holds the state when any does. */
	for (int i = 0, j = 0; i < n; i++)
		if (m[i]->has_state) {
			struct conn *t = m[j];
			m[j++] = m[i];
			m[i] = t;
		}
	split_batch(c, m, n);
	c->timeout_ms = generation_timeout_ms(c, m, n);
	cJSON_AddNumberToObject(ev, "timeout_ms", c->timeout_ms);
	cJSON *members = cJSON_CreateArray();
	for (int i = 0; i < n; i++) {
		m[i]->member = 1;
		m[i]->rank = i;
		cJSON *e = cJSON_CreateObject();
		cJSON_AddStringToObject(e, "server", m[i]->server_id);
		cJSON_AddNumberToObject(e, "rank", i);
		cJSON_AddNumberToObject(e, "offset", m[i]->offset);
		cJSON_AddNumberToObject(e, "count", m[i]->count);
		cJSON_AddItemToArray(members, e);
	}
	int resume = holders == 0 && c->latest_ckpt[0];
	if (resume)
		cJSON_AddStringToObject(ev, "resume_from", c->latest_ckpt);
	cJSON_AddItemToObject(ev, "members", cJSON_Duplicate(members, 1));
	journal(c, "generation", ev);
	if (resume && send_resume_checkpoint(c, m[0]) < 0)
		journal_kv(c, "error", "reason", "cannot read the latest checkpoint", "path", c->latest_ckpt);
	for (int i = 0; i < n; i++) {
		cJSON *g = sd_msg_new(SD_MSG_GENERATION);
		cJSON_AddNumberToObject(g, "generation", (double)c->generation);
		cJSON_AddNumberToObject(g, "rank", i);
		cJSON_AddNumberToObject(g, "world_size", n);
		cJSON_AddNumberToObject(g, "offset", m[i]->offset);
		cJSON_AddNumberToObject(g, "count", m[i]->count);
		cJSON_AddNumberToObject(g, "timeout_ms", c->timeout_ms);
		cJSON_AddItemToObject(g, "members", cJSON_Duplicate(members, 1));
		conn_send(m[i], g);
	}
	cJSON_Delete(members);
}

static void on_gen_timer(uv_timer_t *t)
{
	form_generation(t->data);
}

static void schedule_generation(struct sd_controller *c, const char *reason)
{
	snprintf(c->gen_reason, sizeof c->gen_reason, "%s", reason);
	if (!uv_is_active((uv_handle_t *)&c->gen_timer))
		uv_timer_start(&c->gen_timer, on_gen_timer, GENERATION_DEBOUNCE_MS, 0);
}

/* ---- liveness (see controller.h) ---- */

/* Drops a worker we could not hear from (or that never finished a failed
 * collective, stuck_ms > 0: how long the others have waited for its
 * report): journaled as worker_unresponsive, then its connection closes with
 * an error inviting it back (a stopped process that continues, a host that
 * thaws, connects again as a new member). */
static void drop_unresponsive(struct sd_controller *c, struct conn *k, uint64_t stuck_ms,
                              const char *why)
{
	double silent_s = (uv_now(c->loop) - k->heard_ms) / 1000.0;
	double lost_s = stuck_ms ? stuck_ms / 1000.0 : silent_s;
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "server", k->server_id);
	cJSON_AddNumberToObject(ev, "rank", k->member ? k->rank : -1);
	cJSON_AddNumberToObject(ev, "generation", (double)c->generation);
	cJSON_AddNumberToObject(ev, "step", (double)c->step);
	cJSON_AddNumberToObject(ev, "silent_s", floor(silent_s * 1000) / 1000);
	if (stuck_ms)
		cJSON_AddNumberToObject(ev, "stuck_s", floor(stuck_ms) / 1000);
	cJSON_AddNumberToObject(ev, "timeout_ms", c->timeout_ms);
	cJSON_AddBoolToObject(ev, "member", k->member);
	cJSON_AddStringToObject(ev, "reason", why);
	journal(c, "worker_unresponsive", ev);
	/* Its loss began when it went quiet (or the group failed), not now. */
	if (k->member && !k->loss_recorded)
		record_loss(c, k, mono_s() - lost_s);
	char reason[160];
	snprintf(reason, sizeof reason, "unresponsive: %s (for %.1f s, timeout %.1f s)", why, lost_s,
	         c->timeout_ms / 1000.0);
	cJSON *m = sd_msg_new(SD_MSG_ERROR);
	cJSON_AddStringToObject(m, "reason", reason);
	cJSON_AddBoolToObject(m, "rejoin", 1);
	conn_send(k, m);
	int member = k->member;
	conn_close(k, reason);
	if (member && !c->exiting)
		schedule_generation(c, "worker unresponsive");
}

static void on_live_timer(uv_timer_t *t)
{
	struct sd_controller *c = t->data;
	uint64_t now = uv_now(c->loop);
	uint64_t since = now - c->live_tick_ms;
	c->live_tick_ms = now;
	if (c->exiting)
		return;
	/* The loop itself was held up (a slow disk, the controller stopped):
	 * nobody's bytes were read meanwhile, so silence proves nothing yet.
	 * The next tick comes after the sockets were read. */
	uint64_t stall = (uint64_t)c->timeout_ms / 4 < 1000 ? (uint64_t)c->timeout_ms / 4 : 1000;
	if (since > (uint64_t)c->live_interval_ms + stall)
		return;
	int failing = c->failing_gen == c->generation;
	uint64_t failing_for = failing ? now - c->failing_since_ms : 0;
	struct conn *next;
	for (struct conn *k = c->conns; k && !c->exiting; k = next) {
		next = k->next;
		if (!k->authed || k->closing)
			continue;
		uint64_t silent = now - k->heard_ms;
		/* A member the failed collective waits for is suspect sooner:
		 * silent for half the timeout, it would not be admitted to the
		 * next generation anyway. */
		int owes = failing && k->member && !k->leaving && k->failed_gen != c->generation;
		if (silent > (uint64_t)c->timeout_ms || (owes && silent > (uint64_t)c->timeout_ms / 2))
			drop_unresponsive(c, k, 0, "no heartbeat");
		else if (owes && failing_for > (uint64_t)c->timeout_ms)
			/* Alive, but it never finished the collective the others
			 * gave up on: stuck outside it. */
			drop_unresponsive(c, k, failing_for, "did not finish the collective that failed");
	}
}

/* ---- checkpoints ---- */

static int write_file_atomic(const char *path, const void *data, size_t len, char **why)
{
	char tmp[SD_PATH_MAX + 96];
	snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return sd_why(why, "%s: %s", tmp, strerror(errno));
	size_t off = 0;
	while (off < len) {
		ssize_t n = write(fd, (const char *)data + off, len - off);
		if (n <= 0) {
			close(fd);
			unlink(tmp);
			return sd_why(why, "%s: write: %s", tmp, strerror(errno));
		}
		off += (size_t)n;
	}
	if (fsync(fd) < 0 || close(fd) < 0) {
		unlink(tmp);
		return sd_why(why, "%s: fsync: %s", tmp, strerror(errno));
	}
	if (rename(tmp, path) < 0) {
		unlink(tmp);
		return sd_why(why, "%s: rename: %s", path, strerror(errno));
	}
	return 0;
}

/* Keeps the newest keep_checkpoints files of run_dir/checkpoints. */
static void prune_checkpoints(struct sd_controller *c)
{
	char dir[SD_PATH_MAX + 32];
	snprintf(dir, sizeof dir, "%s/checkpoints", c->run_dir);
	DIR *d = opendir(dir);
	if (!d)
		return;
	long steps[4096];
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) && n < 4096) {
		long s;
		char tail[16];
		if (sscanf(e->d_name, "ckpt-%ld.sdckp%15s", &s, tail) == 2 && !strcmp(tail, "t"))
			steps[n++] = s;
	}
	closedir(d);
	for (int i = 0; i < n; i++) {
		int newer = 0;
		for (int j = 0; j < n; j++)
			newer += steps[j] > steps[i];
		if (newer >= c->job.keep_checkpoints) {
			char p[SD_PATH_MAX + 96];
			snprintf(p, sizeof p, "%s/ckpt-%ld.sdckpt", dir, steps[i]);
			unlink(p);
		}
	}
}

static void maybe_finish(struct sd_controller *c);
static void finish(struct sd_controller *c, int status);

/* A received checkpoint on its way to disk: written, fsynced, read back and
 * verified, renamed into place on a libuv thread-pool thread, so a slow disk
 * never stalls the loop (the cockpit, the protocol, the other workers). */
struct ckpt_write {
	uv_work_t req;
	struct sd_controller *c;
	unsigned char *data;     /* owned; the stream rank 0 sent */
	size_t len;
	long step;
	char reason[32];
	char path[SD_PATH_MAX + 64];
	int rc;
	char *why;
};

static void ckpt_write_work(uv_work_t *req)
{
	struct ckpt_write *w = req->data;
	/* Verify before publishing: a torn or corrupt stream never becomes latest. */
	char incoming[SD_PATH_MAX + 96];
	snprintf(incoming, sizeof incoming, "%s.incoming", w->path);
	w->rc = write_file_atomic(incoming, w->data, w->len, &w->why);
	struct sd_ckpt ck;
	if (w->rc == 0 && (w->rc = sd_ckpt_read(incoming, &ck, &w->why)) == 0)
		sd_ckpt_free(&ck);
	if (w->rc == 0 && rename(incoming, w->path) < 0)
		w->rc = sd_why(&w->why, "%s: rename: %s", w->path, strerror(errno));
	if (w->rc != 0)
		unlink(incoming);
}

static void ckpt_write_done(uv_work_t *req, int status)
{
	struct ckpt_write *w = req->data;
	struct sd_controller *c = w->c;
	c->ck_writing--;
	if (status == UV_ECANCELED && w->rc == 0)
		w->rc = sd_why(&w->why, "%s: write cancelled at shutdown", w->path);
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddNumberToObject(ev, "step", (double)w->step);
	cJSON_AddStringToObject(ev, "reason", w->reason);
	if (w->rc == 0) {
		/* Writes may finish out of order; latest only moves forward. */
		if (w->step >= c->latest_ckpt_step || !c->latest_ckpt[0]) {
			snprintf(c->latest_ckpt, sizeof c->latest_ckpt, "%s", w->path);
			c->latest_ckpt_step = w->step;
			free(c->latest_data);
			c->latest_data = w->data;
			c->latest_len = w->len;
			w->data = NULL;
		}
		cJSON_AddStringToObject(ev, "path", w->path);
		cJSON_AddNumberToObject(ev, "bytes", (double)w->len);
		journal(c, "checkpoint", ev);
		prune_checkpoints(c);
	} else {
		cJSON_AddStringToObject(ev, "error", w->why ? w->why : "?");
		journal(c, "checkpoint_failed", ev);
	}
	if (w->rc != 0 && c->quitting && !c->fatal[0])
		/* Quitting drops the workers: say loudly that their state since
		 * the last good checkpoint is gone, and exit non-zero. */
		snprintf(c->fatal, sizeof c->fatal, "quit: the checkpoint at step %ld could not be written "
		         "(%.400s); training since %.400s is lost", w->step, w->why ? w->why : "?",
		         c->latest_ckpt[0] ? c->latest_ckpt : "the start");
	free(w->why);
	free(w->data);
	free(w);
	if (c->closing)
		return;
	if (c->quitting) {
		uv_timer_stop(&c->grace_timer);
		finish(c, 1);
		return;
	}
	maybe_finish(c);
}

static void checkpoint_complete(struct sd_controller *c)
{
	struct ckpt_write *w = sd_calloc(1, sizeof *w);
	w->req.data = w;
	w->c = c;
	w->data = c->ck;
	w->len = c->ck_len;
	w->step = c->ck_step;
	snprintf(w->reason, sizeof w->reason, "%s", c->ck_reason);
	snprintf(w->path, sizeof w->path, "%s/checkpoints/ckpt-%ld.sdckpt", c->run_dir, c->ck_step);
	c->ck = NULL;
	c->ck_len = c->ck_total = 0;
	c->ck_writing++;
	int rc = uv_queue_work(c->loop, &w->req, ckpt_write_work, ckpt_write_done);
	if (rc < 0) {
		/* Cannot happen with a live loop; write here rather than lose it. */
		ckpt_write_work(&w->req);
		ckpt_write_done(&w->req, 0);
	}
}

static void on_ckpt_chunk(struct sd_controller *c, struct conn *k, const cJSON *m)
{
	long long off = sd_msg_int(m, "offset", -1), total = sd_msg_int(m, "total", -1);
	size_t n;
	unsigned char *bytes = sd_hex_decode(sd_msg_str(m, "data", ""), &n);
	if (!bytes || total <= 0 || total > (1LL << 34) || off < 0 ||
	    (unsigned long long)off + n > (unsigned long long)total) {
		free(bytes);
		conn_reject(k, "protocol_error", "malformed checkpoint chunk");
		return;
	}
	if (off == 0) {
		free(c->ck);
		c->ck = sd_malloc((size_t)total);
		c->ck_total = (size_t)total;
		c->ck_len = 0;
		c->ck_step = (long)sd_msg_int(m, "step", 0);
		snprintf(c->ck_reason, sizeof c->ck_reason, "%s", sd_msg_str(m, "reason", "periodic"));
	}
	if (c->ck && (size_t)off == c->ck_len && (size_t)total == c->ck_total) {
		memcpy(c->ck + off, bytes, n);
		c->ck_len += n;
		if (c->ck_len == c->ck_total)
			checkpoint_complete(c);
	}
	free(bytes);
}

/* ---- run end ---- */

static void on_grace(uv_timer_t *t)
{
	struct sd_controller *c = t->data;
	sd_provider_signal_all(c->provider, SIGKILL);
}

static int servers_running(const struct sd_controller *c)
{
	return sd_provider_running(c->provider);
}

static void finish(struct sd_controller *c, int status)
{
	if (c->exiting)
		return;
	c->exiting = 1;
	sd_provider_release_all(c->provider);
	for (struct conn *k = c->conns; k; k = k->next) {
		cJSON *m = sd_msg_new(SD_MSG_STOP);
		cJSON_AddStringToObject(m, "reason", status ? "controller quit" : "done");
		conn_send(k, m);
	}
	uv_timer_start(&c->grace_timer, on_grace, 10000, 0);
	if (!servers_running(c) && c->opts.on_exit)
		c->opts.on_exit(c, status, c->opts.ctx);
	else
		c->exiting = status ? 3 : 2;   /* on_exit when the last server exits */
}

static void maybe_finish(struct sd_controller *c)
{
	if (!c->finishing || c->ck || c->ck_writing || c->latest_ckpt_step < c->total_steps)
		return;
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddNumberToObject(ev, "steps", (double)c->step);
	cJSON_AddNumberToObject(ev, "test_accuracy", c->final_acc);
	cJSON_AddNumberToObject(ev, "test_loss", c->final_loss);
	cJSON_AddNumberToObject(ev, "seconds", run_time_s(c));
	cJSON_AddStringToObject(ev, "checkpoint", c->latest_ckpt);
	journal(c, "done", ev);
	finish(c, 0);
}

/* ---- worker messages ---- */

static int job_failed_on(const struct sd_controller *c, const char *server)
{
	for (int i = 0; i < c->njob_failed; i++)
		if (!strcmp(c->job_failed[i], server))
			return 1;
	return 0;
}

/* Ends the run when a worker failed to load the job and no worker can: none
 * ever loaded it, and no server or connected worker is left that has not
 * failed to (today's fail-fast for a bad job, kept for when it is the job's
 * fault and not one server's). */
static void end_if_job_unloadable(struct sd_controller *c)
{
	if (!c->njob_failed || c->ever_ready || c->exiting)
		return;
	for (const struct conn *k = c->conns; k; k = k->next)
		if (k->authed && !k->closing && !job_failed_on(c, k->server_id))
			return;   /* still loading it */
	/* Every server, however many bad joiners came and went. */
	int max = 256, n;
	struct sd_server_info *si = NULL;
	for (;;) {
		si = realloc(si, (size_t)max * sizeof *si);
		if (!si)
			sd_oom();
		n = sd_provider_list(c->provider, si, max);
		if (n < max)
			break;
		max *= 2;
	}
	int hope = 0;
	for (int i = 0; i < n && !hope; i++)
		hope = !si[i].gone && !job_failed_on(c, si[i].id);
	free(si);
	if (hope)
		return;   /* its worker may still load it */
	if (!c->fatal[0])
		snprintf(c->fatal, sizeof c->fatal, "%s", c->job_error);
	finish(c, 1);
}

static void on_step(struct sd_controller *c, struct conn *k, const cJSON *m)
{
	long gen = (long)sd_msg_int(m, "generation", -1);
	long step = (long)sd_msg_int(m, "step", 0);
	double ips = sd_msg_num(m, "images_per_sec", 0);
	if (ips > 0)
		k->ips = k->ips > 0 ? (1 - SPEED_EMA) * k->ips + SPEED_EMA * ips : ips;
	k->compute_ms = sd_msg_num(m, "compute_ms", 0);
	k->comm_ms = sd_msg_num(m, "comm_ms", 0);
	k->emulated = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m, "emulated"));
	/* The last steps of a generation may reach us after the next one was
	 * formed (a join, loss or leave is handled while they complete): they
	 * are completed steps all the same, journaled with their generation.
	 * Checksums are compared within the current generation only. */
	int current = gen == c->generation;
	const char *sum = current ? sd_msg_str(m, "checksum", NULL) : NULL;
	if (sum) {
		if (step != c->sum_step || !c->sums) {
			cJSON_Delete(c->sums);
			c->sums = cJSON_CreateObject();
			c->sum_step = step;
			c->sums_count = 0;
		}
		cJSON_AddStringToObject(c->sums, k->server_id, sum);
		if (++c->sums_count == c->world_size) {
			cJSON *ev = cJSON_CreateObject();
			cJSON_AddNumberToObject(ev, "step", (double)step);
			cJSON_AddNumberToObject(ev, "generation", (double)gen);
			cJSON_AddItemToObject(ev, "checksums", c->sums);
			c->sums = NULL;
			c->sums_count = 0;
			journal(c, "checksum", ev);
		}
	}
	/* Rank 0 speaks for its generation (the rank in the message: ours may
	 * have changed with a newer generation). */
	if (sd_msg_int(m, "rank", -1) != 0 || gen > c->generation)
		return;
	double step_ms = sd_msg_num(m, "compute_ms", 0) + sd_msg_num(m, "comm_ms", 0);
	c->step_ms_ema = c->step_ms_ema > 0 ? 0.9 * c->step_ms_ema + 0.1 * step_ms : step_ms;
	if (current || step > c->step)
		c->step = step;
	int world = (int)sd_msg_int(m, "world_size", current ? c->world_size : 0);
	int B = c->job.train.global_batch;
	double loss = sd_msg_num(m, "loss_sum", 0) / B;
	c->last_loss = loss;
	int log = c->job.log_every > 0 && step % c->job.log_every == 0;
	/* Steps the old group still completes after a notice do not count:
	 * recovery is the first step of a group formed after the loss. */
	int recovered = c->lost_at > 0 && gen > c->lost_gen;
	if (log || recovered || step == c->total_steps) {
		cJSON *ev = cJSON_CreateObject();
		cJSON_AddNumberToObject(ev, "step", (double)step);
		cJSON_AddNumberToObject(ev, "generation", (double)gen);
		cJSON_AddNumberToObject(ev, "world_size", world);
		cJSON_AddNumberToObject(ev, "loss", loss);
		cJSON_AddNumberToObject(ev, "train_accuracy", sd_msg_num(m, "correct", 0) / B);
		cJSON_AddNumberToObject(ev, "images_per_sec", c->step_ms_ema > 0 ? B / (c->step_ms_ema / 1000) : 0);
		cJSON_AddNumberToObject(ev, "compute_ms", sd_msg_num(m, "compute_ms", 0));
		cJSON_AddNumberToObject(ev, "comm_ms", sd_msg_num(m, "comm_ms", 0));
		cJSON_AddNumberToObject(ev, "lr", sd_msg_num(m, "lr", 0));
		if (recovered) {
			cJSON_AddNumberToObject(ev, "recovery_s", mono_s() - c->lost_at);
			/* The step in flight when a worker died, plus any completed
			 * step the survivors did not all have. */
			long behind = c->lost_step - c->recover_start;
			cJSON_AddNumberToObject(ev, "steps_lost", (double)(c->lost_abrupt + (behind > 0 ? behind : 0)));
			/* Whose loss this recovers from: a revocation with notice is
			 * journaled (at the kill) after the recovery (at the leave). */
			cJSON *who = cJSON_AddArrayToObject(ev, "lost_servers");
			for (int i = 0; i < c->nlost_servers; i++)
				cJSON_AddItemToArray(who, cJSON_CreateString(c->lost_servers[i]));
			c->nlost_servers = 0;
			c->lost_at = 0;
		}
		journal(c, "step", ev);
	}
	if (cJSON_GetObjectItemCaseSensitive(m, "test_accuracy")) {
		cJSON *ev = cJSON_CreateObject();
		cJSON_AddNumberToObject(ev, "epoch", sd_msg_num(m, "epoch", 0));
		cJSON_AddNumberToObject(ev, "step", (double)step);
		cJSON_AddNumberToObject(ev, "test_loss", sd_msg_num(m, "test_loss", 0));
		cJSON_AddNumberToObject(ev, "test_accuracy", sd_msg_num(m, "test_accuracy", 0));
		c->last_acc = sd_msg_num(m, "test_accuracy", 0);
		c->last_epoch = (int)sd_msg_num(m, "epoch", 0) + 1;
		journal(c, "epoch", ev);
		if (c->total_steps > 0 && step >= c->total_steps) {
			c->final_acc = sd_msg_num(m, "test_accuracy", 0);
			c->final_loss = sd_msg_num(m, "test_loss", 0);
			c->finishing = 1;
			maybe_finish(c);
		}
	}
}

static void on_hello(struct sd_controller *c, struct conn *k, const cJSON *m)
{
	if (!sd_token_equal(c->token, sd_msg_str(m, "token", ""))) {
		conn_reject(k, "auth_failed", "wrong token");
		return;
	}
	const char *id = sd_msg_str(m, "server_id", "");
	if (!id[0] || strlen(id) >= sizeof k->server_id) {
		conn_reject(k, "protocol_error", "hello: bad server_id");
		return;
	}
	for (struct conn *o = c->conns; o; o = o->next)
		if (o != k && o->authed && !strcmp(o->server_id, id)) {
			conn_reject(k, "protocol_error", "hello: server_id already connected");
			return;
		}
	k->authed = 1;
	c->ever_authed = 1;
	snprintf(k->server_id, sizeof k->server_id, "%s", id);
	k->pid = (long)sd_msg_int(m, "pid", 0);
	sd_provider_worker_event(c->provider, id, SD_WORKER_CONNECTED);
	cJSON *w = sd_msg_new(SD_MSG_WELCOME);
	cJSON_AddNumberToObject(w, "version", SD_PROTO_VERSION);
	cJSON_AddStringToObject(w, "worker_id", id);
	cJSON_AddNumberToObject(w, "heartbeat_ms", c->heartbeat_ms);
	cJSON_AddItemToObject(w, "job", sd_job_to_json(&c->job));
	conn_send(k, w);
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "server", id);
	cJSON_AddNumberToObject(ev, "pid", (double)k->pid);
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m, "rejoin")))
		cJSON_AddBoolToObject(ev, "rejoin", 1);
	journal(c, "worker_connected", ev);
	if (c->exiting) {
		/* Back too late (a dropped worker that rejoins as the run ends). */
		cJSON *stop = sd_msg_new(SD_MSG_STOP);
		cJSON_AddStringToObject(stop, "reason", "run over");
		conn_send(k, stop);
	}
}

/* READY: the worker has loaded the job; it says where it computes.  A new
 * generation takes it in. */
static void on_ready(struct sd_controller *c, struct conn *k, const cJSON *m)
{
	k->ready = 1;
	c->ever_ready = 1;
	/* Where the worker computes (optional fields, engine/backend.h). */
	snprintf(k->backend, sizeof k->backend, "%s", sd_msg_str(m, "backend", ""));
	snprintf(k->device, sizeof k->device, "%s", sd_msg_str(m, "device", ""));
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "server", k->server_id);
	if (k->backend[0]) {
		cJSON_AddStringToObject(ev, "backend", k->backend);
		if (k->device[0])
			cJSON_AddStringToObject(ev, "device", k->device);
		cJSON_AddStringToObject(ev, "backend_reason", sd_msg_str(m, "backend_reason", ""));
	}
	journal(c, "worker_ready", ev);
	schedule_generation(c, "worker ready");
}

/* KV_GET: the rendezvous store answers now, or when the key is set. */
static void on_kv_get(struct sd_controller *c, struct conn *k, const cJSON *m)
{
	const char *key = sd_msg_str(m, "key", "");
	long long id = sd_msg_int(m, "id", 0);
	struct kv *e = kv_find(c, key);
	if (e) {
		kv_reply(k, id, key, e->value);
	} else {
		struct pending_get *g = sd_calloc(1, sizeof *g);
		g->conn = k;
		g->id = id;
		g->key = strdup(key);
		if (!g->key)
			sd_oom();
		g->next = c->gets;
		c->gets = g;
	}
}

/* JOINED: the worker holds the generation's state; a swap waiting for it
 * as the replacement releases the old server now. */
static void on_joined(struct sd_controller *c, struct conn *k, const cJSON *m)
{
	k->has_state = 1;
	long total = (long)sd_msg_int(m, "total_steps", 0);
	if (total > 0)
		c->total_steps = total;
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "server", k->server_id);
	cJSON_AddNumberToObject(ev, "generation", (double)sd_msg_int(m, "generation", 0));
	cJSON_AddNumberToObject(ev, "rank", (double)sd_msg_int(m, "rank", 0));
	cJSON_AddNumberToObject(ev, "step", (double)sd_msg_int(m, "step", 0));
	cJSON_AddNumberToObject(ev, "source_rank", (double)sd_msg_int(m, "source_rank", 0));
	cJSON_AddNumberToObject(ev, "join_ms", sd_msg_num(m, "join_ms", 0));
	journal(c, "worker_joined", ev);
	sd_provider_worker_event(c->provider, k->server_id, SD_WORKER_TRAINING);
	for (int i = 0; i < c->nswaps; i++) {
		if (strcmp(c->swap_new[i], k->server_id))
			continue;
		/* The swap is done: off the list before the release (whose
		 * state event would otherwise find it there). */
		char old_id[16];
		snprintf(old_id, sizeof old_id, "%s", c->swap_old[i]);
		swap_remove(c, i);
		char *err = NULL;
		if (sd_provider_release(c->provider, old_id, "swapped", &err) < 0) {
			journal_kv(c, "error", "reason", err ? err : "?", "server", old_id);
			free(err);
		}
		break;
	}
	if (k->rank == 0) {
		c->step = (long)sd_msg_int(m, "step", 0);
		c->recover_start = c->step;
	}
}

/* COMM_FAILED: a collective of the current generation failed; the other
 * members are told to give up at once, and a new generation forms. */
static void on_comm_failed(struct sd_controller *c, struct conn *k, const cJSON *m)
{
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "server", k->server_id);
	cJSON_AddNumberToObject(ev, "generation", (double)sd_msg_int(m, "generation", 0));
	cJSON_AddNumberToObject(ev, "step", (double)sd_msg_int(m, "step", 0));
	cJSON_AddStringToObject(ev, "reason", sd_msg_str(m, "reason", ""));
	journal(c, "comm_failed", ev);
	long gen = (long)sd_msg_int(m, "generation", -1);
	if (gen == c->generation) {
		k->failed_gen = gen;
		if (c->failing_gen != gen) {
			c->failing_gen = gen;
			c->failing_since_ms = uv_now(c->loop);
			/* Members waiting in its rendezvous, or computing, give
			 * up now rather than at their timeout. */
			for (struct conn *o = c->conns; o; o = o->next)
				if (o->member && o != k) {
					cJSON *ab = sd_msg_new(SD_MSG_ABORT);
					cJSON_AddNumberToObject(ab, "generation", (double)gen);
					conn_send(o, ab);
				}
		}
		schedule_generation(c, "collective failed");
	}
}

static void on_message(struct conn *k, enum sd_msg_type type, cJSON *m)
{
	struct sd_controller *c = k->c;
	if (!k->authed && type != SD_MSG_HELLO) {
		conn_reject(k, "protocol_error", "first message must be hello");
		return;
	}
	switch (type) {
	case SD_MSG_HELLO:
		if (k->authed)
			conn_reject(k, "protocol_error", "second hello");
		else
			on_hello(c, k, m);
		break;
	case SD_MSG_READY:
		on_ready(c, k, m);
		break;
	case SD_MSG_KV_SET:
		kv_set(c, sd_msg_str(m, "key", ""), sd_msg_str(m, "value", ""));
		break;
	case SD_MSG_KV_GET:
		on_kv_get(c, k, m);
		break;
	case SD_MSG_JOINED:
		on_joined(c, k, m);
		break;
	case SD_MSG_STEP:
		on_step(c, k, m);
		break;
	case SD_MSG_HEARTBEAT:
		break;   /* its bytes were the point (heard_ms) */
	case SD_MSG_COMM_FAILED:
		on_comm_failed(c, k, m);
		break;
	case SD_MSG_LEAVING:
		k->leaving = 1;
		journal_kv(c, "worker_leaving", "server", k->server_id, "reason", sd_msg_str(m, "reason", ""));
		if (k->member && !c->exiting && !k->loss_recorded)
			record_loss(c, k, mono_s());
		if (k->member)
			schedule_generation(c, "worker left");
		break;
	case SD_MSG_CKPT_CHUNK:
		on_ckpt_chunk(c, k, m);
		break;
	case SD_MSG_LOG:
		if (!strcmp(sd_msg_str(m, "level", ""), "fatal")) {
			/* This worker cannot load the job (its server lacks the
			 * data, say): it fails alone and its server is marked
			 * failed as its worker exits.  The run ends only when no
			 * worker can load the job at all. */
			const char *msg = sd_msg_str(m, "message", "");
			journal_kv(c, "job_error", "server", k->server_id, "error", msg);
			if (!c->job_error[0])
				snprintf(c->job_error, sizeof c->job_error, "%s", msg);
			c->job_failed = realloc(c->job_failed, (size_t)(c->njob_failed + 1) * sizeof *c->job_failed);
			if (!c->job_failed)
				sd_oom();
			snprintf(c->job_failed[c->njob_failed++], sizeof c->job_failed[0], "%s", k->server_id);
			conn_close(k, NULL);   /* job_error says it all */
			end_if_job_unloadable(c);
		} else {
			journal_kv(c, "worker_log", "server", k->server_id, "message", sd_msg_str(m, "message", ""));
		}
		break;
	default: {
		char reason[96];
		snprintf(reason, sizeof reason, "unexpected message type '%s' from a worker",
		         sd_msg_type_name(type));
		conn_reject(k, "protocol_error", reason);
		break;
	}
	}
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	buf->base = sd_malloc(65536);
	buf->len = 65536;
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
	struct conn *k = s->data;
	if (nread < 0) {
		free(buf->base);
		conn_close(k, nread == UV_EOF ? "connection closed" : uv_strerror((int)nread));
		return;
	}
	if (nread > 0) {
		k->heard_ms = uv_now(k->c->loop);
		if (k->unheard && k->authed) {
			/* Left out of a generation for its silence, heard again. */
			k->unheard = 0;
			if (k->ready && !k->member)
				schedule_generation(k->c, "worker heard again");
		}
	}
	sd_line_reader_feed(&k->rd, buf->base, (size_t)nread);
	free(buf->base);
	const char *line;
	size_t len;
	char *why = NULL;
	int got;
	while (!k->closing && (got = sd_line_reader_next(&k->rd, &line, &len, &why)) != 0) {
		if (got < 0) {
			conn_reject(k, "protocol_error", why ? why : "line too long");
			break;
		}
		enum sd_msg_type type;
		cJSON *m;
		if (sd_msg_decode(line, len, &type, &m, &why) < 0) {
			conn_reject(k, "protocol_error", why ? why : "bad message");
			break;
		}
		on_message(k, type, m);
		cJSON_Delete(m);
	}
	free(why);
}

static void on_connection(uv_stream_t *server, int status)
{
	struct sd_controller *c = server->data;
	if (status < 0)
		return;
	struct conn *k = sd_calloc(1, sizeof *k);
	k->c = c;
	k->heard_ms = uv_now(c->loop);
	k->failed_gen = -1;
	sd_line_reader_init(&k->rd, SD_PROTO_LINE_MAX);
	uv_tcp_init(c->loop, &k->tcp);
	k->tcp.data = k;
	if (uv_accept(server, (uv_stream_t *)&k->tcp) < 0) {
		k->closing = 1;
		uv_close((uv_handle_t *)&k->tcp, on_conn_closed);
		return;
	}
	uv_tcp_nodelay(&k->tcp, 1);
	struct sockaddr_storage sa;
	int salen = sizeof sa;
	snprintf(k->peer, sizeof k->peer, "?");
	if (uv_tcp_getpeername(&k->tcp, (struct sockaddr *)&sa, &salen) == 0) {
		char ip[48] = "";
		int port = 0;
		if (sa.ss_family == AF_INET) {
			uv_ip4_name((struct sockaddr_in *)&sa, ip, sizeof ip);
			port = ntohs(((struct sockaddr_in *)&sa)->sin_port);
		}
		snprintf(k->peer, sizeof k->peer, "%s:%d", ip, port);
	}
	k->next = c->conns;
	c->conns = k;
	uv_read_start((uv_stream_t *)&k->tcp, on_alloc, on_read);
}

/* ---- commands ---- */

/* add [N | OFFER]: N local workers, or one server of a market offer. */
static int cmd_add(struct sd_controller *c, int argc, char **argv, char **why)
{
	long n = 1;
	const char *offer = "local";
	if (argc == 2) {
		char *end;
		n = strtol(argv[1], &end, 10);
		if (*end || end == argv[1]) {
			n = 1;
			offer = argv[1];
		} else if (n < 1 || n > 64) {
			return sd_why(why, "add: expected a count from 1 to 64, got '%s'", argv[1]);
		}
	}
	char id[16];
	for (long i = 0; i < n; i++)
		if (sd_provider_acquire(c->provider, offer, id, sizeof id, why) < 0)
			return sd_why(why, "add %s", why && *why ? *why : "?");
	return 0;
}

static int cmd_drop(struct sd_controller *c, int argc, char **argv, char **why)
{
	return sd_provider_release(c->provider, argv[1], "operator", why);
}

/* Takes pending swap i off the list. */
static void swap_remove(struct sd_controller *c, int i)
{
	c->nswaps--;
	memmove(c->swap_new[i], c->swap_new[i + 1], (size_t)(c->nswaps - i) * sizeof c->swap_new[0]);
	memmove(c->swap_old[i], c->swap_old[i + 1], (size_t)(c->nswaps - i) * sizeof c->swap_old[0]);
}

/* Server `id` is gone (its state: revoked, released or failed): a swap
 * waiting for it as the replacement failed (journaled as swap_failed; the
 * old server stays), and one waiting to drop it as the old server has
 * nothing left to drop.  Either way its slot is free again. */
static void swaps_server_gone(struct sd_controller *c, const char *id, const char *state)
{
	for (int i = c->nswaps - 1; i >= 0; i--) {
		if (!strcmp(c->swap_new[i], id)) {
			cJSON *ev = cJSON_CreateObject();
			cJSON_AddStringToObject(ev, "server", c->swap_old[i]);
			cJSON_AddStringToObject(ev, "replacement", id);
			char reason[64];
			snprintf(reason, sizeof reason, "the replacement was %s before it trained", state);
			cJSON_AddStringToObject(ev, "reason", reason);
			journal(c, "swap_failed", ev);
			swap_remove(c, i);
		} else if (!strcmp(c->swap_old[i], id)) {
			swap_remove(c, i);
		}
	}
}

/* swap SERVER OFFER: acquire the replacement now, drop SERVER once the
 * replacement trains, so the cluster never shrinks in between. */
static int cmd_swap(struct sd_controller *c, int argc, char **argv, char **why)
{
	if (!sd_provider_has_server(c->provider, argv[1]))
		return sd_why(why, "swap: no server '%s'", argv[1]);
	if (c->nswaps == 16)
		return sd_why(why, "swap: 16 swaps already pending");
	char id[16];
	if (sd_provider_acquire(c->provider, argv[2], id, sizeof id, why) < 0)
		return sd_why(why, "swap %s for %s", argv[1], why && *why ? *why : "?");
	snprintf(c->swap_new[c->nswaps], sizeof c->swap_new[0], "%s", id);
	snprintf(c->swap_old[c->nswaps], sizeof c->swap_old[0], "%s", argv[1]);
	c->nswaps++;
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "server", argv[1]);
	cJSON_AddStringToObject(ev, "replacement", id);
	cJSON_AddStringToObject(ev, "offer", argv[2]);
	journal(c, "swap", ev);
	return 0;
}

static int cmd_checkpoint(struct sd_controller *c, int argc, char **argv, char **why)
{
	for (struct conn *k = c->conns; k; k = k->next)
		if (k->member && k->rank == 0) {
			conn_send(k, sd_msg_new(SD_MSG_CHECKPOINT));
			return 0;
		}
	return sd_why(why, "checkpoint: no worker is training");
}

static int cmd_pause(struct sd_controller *c, int argc, char **argv, char **why)
{
	if (c->paused)
		return sd_why(why, "pause: already paused");
	c->paused = 1;
	for (struct conn *k = c->conns; k; k = k->next)
		if (k->member)
			conn_send(k, sd_msg_new(SD_MSG_PAUSE));
	/* An empty generation records the pause; nobody is sent one. */
	schedule_generation(c, "paused");
	return 0;
}

static int cmd_resume(struct sd_controller *c, int argc, char **argv, char **why)
{
	if (!c->paused)
		return sd_why(why, "resume: not paused");
	c->paused = 0;
	schedule_generation(c, "resumed");
	return 0;
}

static void on_quit_timeout(uv_timer_t *t)
{
	finish(t->data, 1);
}

/* quit: checkpoint first when training (rank 0 streams it), then stop the
 * workers and release the servers; gives up waiting after 15 s. */
static int cmd_quit(struct sd_controller *c, int argc, char **argv, char **why)
{
	if (c->quitting || c->exiting)
		return 0;
	for (struct conn *k = c->conns; k; k = k->next)
		if (k->member && k->rank == 0 && !c->paused) {
			c->quitting = 1;
			/* The run's last checkpoint: what --resume continues from. */
			cJSON *ck = sd_msg_new(SD_MSG_CHECKPOINT);
			cJSON_AddStringToObject(ck, "reason", "final");
			conn_send(k, ck);
			uv_timer_start(&c->grace_timer, on_quit_timeout, 15000, 0);
			return 0;
		}
	finish(c, 1);
	return 0;
}

static int cmd_help(struct sd_controller *c, int argc, char **argv, char **why);

const struct sd_command sd_commands[] = {
	{ "add", "[N|OFFER]", 0, 1, "start N local workers (default 1) or acquire a server of OFFER", cmd_add },
	{ "drop", "SERVER", 1, 1, "release SERVER: its worker leaves at the next step boundary", cmd_drop },
	{ "swap", "SERVER OFFER", 2, 2, "acquire OFFER, then drop SERVER once the new one trains", cmd_swap },
	{ "checkpoint", "", 0, 0, "checkpoint now (rank 0 streams it to the run directory)", cmd_checkpoint },
	{ "pause", "", 0, 0, "stop training at the next step boundary", cmd_pause },
	{ "resume", "", 0, 0, "continue after pause", cmd_resume },
	{ "quit", "", 0, 0, "stop the workers and exit", cmd_quit },
	{ "help", "", 0, 0, "list the commands", cmd_help },
	{ NULL, NULL, 0, 0, NULL, NULL },
};

static int cmd_help(struct sd_controller *c, int argc, char **argv, char **why)
{
	cJSON *ev = cJSON_CreateObject();
	cJSON *list = cJSON_AddArrayToObject(ev, "commands");
	for (const struct sd_command *k = sd_commands; k->name; k++) {
		char line[160];
		snprintf(line, sizeof line, "%s %s - %s", k->name, k->args, k->help);
		cJSON_AddItemToArray(list, cJSON_CreateString(line));
	}
	journal(c, "help", ev);
	return 0;
}

int sd_controller_command(struct sd_controller *c, const char *line, char **why)
{
	char buf[512];
	snprintf(buf, sizeof buf, "%s", line);
	char *argv[8];
	int argc = 0;
	for (char *tok = strtok(buf, " \t\r\n"); tok && argc < 8; tok = strtok(NULL, " \t\r\n"))
		argv[argc++] = tok;
	if (!argc)
		return 0;
	const struct sd_command *k;
	for (k = sd_commands; k->name; k++)
		if (!strcmp(k->name, argv[0]))
			break;
	int rc;
	if (!k->name) {
		rc = sd_why(why, "unknown command '%s' (try help)", argv[0]);
	} else if (argc - 1 > k->max_args) {
		rc = k->max_args ? sd_why(why, "%s: too many arguments (usage: %s %s)", k->name, k->name, k->args)
		                 : sd_why(why, "%s: takes no arguments", k->name);
	} else if (argc - 1 < k->min_args) {
		rc = sd_why(why, "%s: too few arguments (usage: %s %s)", k->name, k->name, k->args);
	} else {
		rc = k->run(c, argc, argv, why);
	}
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "command", line);
	cJSON_AddBoolToObject(ev, "ok", rc == 0);
	if (rc < 0 && why && *why)
		cJSON_AddStringToObject(ev, "error", *why);
	journal(c, "command", ev);
	return rc;
}

/* ---- lifecycle ---- */

static void hook_journal(void *ctx, const char *type, cJSON *ev)
{
	struct sd_controller *c = ctx;
	char server[64] = "";
	double status = -1;
	int exited = !strcmp(type, "server_exit");
	if (exited) {
		const cJSON *sv = cJSON_GetObjectItemCaseSensitive(ev, "server");
		const cJSON *st = cJSON_GetObjectItemCaseSensitive(ev, "exit_status");
		const cJSON *sg = cJSON_GetObjectItemCaseSensitive(ev, "signal");
		snprintf(server, sizeof server, "%s", cJSON_IsString(sv) ? sv->valuestring : "?");
		status = cJSON_IsNumber(st) ? st->valuedouble : -1;
		int sig = cJSON_IsNumber(sg) ? (int)sg->valuedouble : 0;
		/* A failure, not a stop we asked for: a non-zero status or a crash
		 * signal (revocations and drops end workers with TERM or KILL). */
		exited = sig ? sig != SIGTERM && sig != SIGKILL : status != 0;
	}
	/* A server that ended frees the swaps that wait for it. */
	char gone_id[16] = "", gone_state[16] = "";
	if (!strcmp(type, "state")) {
		const char *st = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(ev, "state"));
		const char *sv = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(ev, "server"));
		if (st && sv && (!strcmp(st, "revoked") || !strcmp(st, "released") || !strcmp(st, "failed"))) {
			snprintf(gone_id, sizeof gone_id, "%s", sv);
			snprintf(gone_state, sizeof gone_state, "%s", st);
		}
	}
	journal(c, type, ev);
	if (gone_id[0])
		swaps_server_gone(c, gone_id, gone_state);
	/* A server that went away may have been the last hope of loading a job
	 * that others failed to load. */
	if (!strcmp(type, "state"))
		end_if_job_unloadable(c);
	/* No worker ever connected and none is left running: nothing will
	 * ever train (a worker program that cannot start, a broken install).
	 * End the run with the reason rather than wait forever. */
	int others = 0;   /* servers still coming up or running besides this one */
	if (exited && !c->ever_authed && !c->exiting) {
		struct sd_server_info si[256];
		int n = sd_provider_list(c->provider, si, 256);
		for (int i = 0; i < n && i < 256; i++) {
			if (strcmp(si[i].id, server) != 0)
				others += !si[i].gone;
			else if (!strcmp(si[i].state, "notice") || !strcmp(si[i].state, "revoked"))
				others++;   /* the market took it: not a broken worker */
		}
	}
	if (exited && !c->ever_authed && !c->exiting && others == 0) {
		/* The worker's own last words, as its log has them. */
		char log[SD_PATH_MAX + 96], last[256] = "", line[256];
		snprintf(log, sizeof log, "%s/logs/%s.log", c->run_dir, server);
		FILE *f = fopen(log, "r");
		while (f && fgets(line, sizeof line, f)) {
			line[strcspn(line, "\r\n")] = 0;
			if (line[0])
				memcpy(last, line, sizeof last);
		}
		if (f)
			fclose(f);
		if (!c->fatal[0])
			snprintf(c->fatal, sizeof c->fatal, "every worker exited before connecting; the last, %.32s, "
			         "with status %.0f: %.300s", server, status, last[0] ? last : "(its log is empty)");
		finish(c, 1);
	}
}

static void hook_notice(void *ctx, const char *server, double seconds)
{
	struct sd_controller *c = ctx;
	for (struct conn *k = c->conns; k; k = k->next)
		if (k->authed && !strcmp(k->server_id, server)) {
			cJSON *m = sd_msg_new(SD_MSG_NOTICE);
			cJSON_AddNumberToObject(m, "seconds", seconds);
			conn_send(k, m);
		}
}

static void hook_idle(void *ctx)
{
	struct sd_controller *c = ctx;
	if (c->exiting >= 2 && c->opts.on_exit)
		c->opts.on_exit(c, c->exiting - 2, c->opts.ctx);
}

static void hook_command(void *ctx, const char *line)
{
	char *why = NULL;
	/* Journaled (with its error, if any) by the command table. */
	sd_controller_command(ctx, line, &why);
	free(why);
}

static const struct sd_provider_hooks provider_hooks = {
	.journal = hook_journal,
	.notice = hook_notice,
	.idle = hook_idle,
	.command = hook_command,
};

static int mkdir_p(const char *path, char **why)
{
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return sd_why(why, "%s: cannot create directory: %s", path, strerror(errno));
	struct stat st;
	if (stat(path, &st) < 0 || !S_ISDIR(st.st_mode))
		return sd_why(why, "%s: not a directory (a run directory is one)", path);
	return 0;
}

/* The newest checkpoint in run_dir/checkpoints that reads back intact. */
static void find_latest_checkpoint(struct sd_controller *c)
{
	char dir[SD_PATH_MAX + 32];
	snprintf(dir, sizeof dir, "%s/checkpoints", c->run_dir);
	DIR *d = opendir(dir);
	if (!d)
		return;
	long best = -1;
	struct dirent *e;
	while ((e = readdir(d))) {
		long s;
		char tail[16];
		if (sscanf(e->d_name, "ckpt-%ld.sdckp%15s", &s, tail) != 2 || strcmp(tail, "t") || s <= best)
			continue;
		char p[SD_PATH_MAX + 300];
		snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
		struct sd_ckpt ck;
		char *why = NULL;
		if (sd_ckpt_read(p, &ck, &why) == 0) {
			sd_ckpt_free(&ck);
			best = s;
			snprintf(c->latest_ckpt, sizeof c->latest_ckpt, "%s", p);
			c->latest_ckpt_step = s;
		} else {
			journal_kv(c, "checkpoint_invalid", "path", p, "error", why ? why : "?");
		}
		free(why);
	}
	closedir(d);
	/* Held in memory from here on (startup, before the loop runs). */
	FILE *f = best >= 0 ? fopen(c->latest_ckpt, "rb") : NULL;
	if (f) {
		if (fseek(f, 0, SEEK_END) == 0) {
			long n = ftell(f);
			if (n > 0 && fseek(f, 0, SEEK_SET) == 0) {
				c->latest_data = sd_malloc((size_t)n);
				c->latest_len = fread(c->latest_data, 1, (size_t)n, f);
				if (c->latest_len != (size_t)n) {
					free(c->latest_data);
					c->latest_data = NULL;
					c->latest_len = 0;
				}
			}
		}
		fclose(f);
	}
}

/* A resumed run continues its journal: t counts from the first run_start
 * (down time included), generations go on from the highest journaled, server
 * ids after the highest sN, and the money spent from what its servers cost
 * (each server's last journaled "usd").
 * Returns 1 when the journal ends in a torn line (no newline). */
static int continue_journal(struct sd_controller *c, const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	char *line = NULL;
	size_t cap = 0;
	int first = 1, torn = 0;
	ssize_t n;
	char *last_step = NULL;
	double *usd = NULL;      /* by server number: the last cost journaled */
	int nusd = 0;
	while ((n = getline(&line, &cap, f)) > 0) {
		torn = line[n - 1] != '\n';
		const char *sv = strstr(line, "\"server\":\"s");
		int num = sv ? atoi(sv + 11) : 0;
		if (num > 0 && num < 1000000) {
			if (num > c->resume_last_server)
				c->resume_last_server = num;
			const char *u = strstr(line, "\"usd\":");
			if (u) {
				if (num >= nusd) {
					int nn = num + 64;
					double *g = realloc(usd, (size_t)nn * sizeof *usd);
					if (!g)
						sd_oom();
					memset(g + nusd, 0, (size_t)(nn - nusd) * sizeof *g);
					usd = g;
					nusd = nn;
				}
				usd[num] = strtod(u + 6, NULL);
			}
		}
		if (strstr(line, "\"type\":\"step\"")) {
			/* Only the last one matters: keep it, parse it once at the end. */
			free(last_step);
			last_step = strdup(line);
			continue;
		}
		int epoch = strstr(line, "\"type\":\"epoch\"") != NULL;
		if (!first && !epoch && !strstr(line, "\"type\":\"generation\""))
			continue;
		cJSON *ev = cJSON_Parse(line);
		if (!ev)
			continue;   /* a line torn by a crash */
		if (epoch) {
			/* The header shows the last accuracy measured, as before the stop. */
			c->last_acc = sd_msg_num(ev, "test_accuracy", 0);
			c->last_epoch = (int)sd_msg_num(ev, "epoch", 0) + 1;
		}
		const cJSON *time = cJSON_GetObjectItemCaseSensitive(ev, "time");
		const cJSON *gen = cJSON_GetObjectItemCaseSensitive(ev, "generation");
		if (first && cJSON_IsNumber(time) && time->valuedouble > 0 && time->valuedouble <= c->t0)
			c->t0 = time->valuedouble;
		if (cJSON_IsNumber(gen) && gen->valuedouble > c->generation && gen->valuedouble < 1e15)
			c->generation = (long)gen->valuedouble;
		first = 0;
		cJSON_Delete(ev);
	}
	for (int i = 0; i < nusd; i++)
		if (isfinite(usd[i]) && usd[i] > 0)
			c->resume_usd += usd[i];
	free(usd);
	cJSON *st = last_step ? cJSON_Parse(last_step) : NULL;
	if (st)
		c->last_loss = sd_msg_num(st, "loss", -1);
	cJSON_Delete(st);
	free(last_step);
	free(line);
	fclose(f);
	return torn;
}

/* After a failed create: the last handle's close callback frees the
 * controller, so libuv never touches freed memory. */
static void on_create_failed_closed(uv_handle_t *h)
{
	struct sd_controller *c = h->data;
	if (--c->handles_closing == 0)
		free(c);
}

/* The run directory: created (with checkpoints/ and logs/), locked against
 * a second controller, the job written (or, on resume, read back), a fresh
 * token, and the journal opened for appending (a resumed run's torn last
 * line ended first).  Returns 0, or -1 with *why naming the path. */
static int open_run_dir(struct sd_controller *c, const struct sd_controller_opts *opts, char **why)
{
	char path[SD_PATH_MAX + 64];
	if (mkdir_p(c->run_dir, why) < 0)
		return -1;
	/* One controller per run directory: a second one (a --resume while the
	 * first still runs) would interleave journals and prune the other's
	 * checkpoints.  The lock goes with the process, even on SIGKILL. */
	snprintf(path, sizeof path, "%s/lock", c->run_dir);
	c->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (c->lock_fd < 0) {
		sd_why(why, "%s: %s", path, strerror(errno));
		return -1;
	}
	if (flock(c->lock_fd, LOCK_EX | LOCK_NB) < 0) {
		char pid[32] = "";
		ssize_t n = pread(c->lock_fd, pid, sizeof pid - 1, 0);
		pid[n > 0 ? n : 0] = 0;
		pid[strcspn(pid, "\n")] = 0;
		sd_why(why, "%s: in use by another spotdeck (pid %s); stop it first", c->run_dir,
		       pid[0] ? pid : "?");
		return -1;
	}
	char pidline[32];
	int pl = snprintf(pidline, sizeof pidline, "%ld\n", (long)getpid());
	if (ftruncate(c->lock_fd, 0) < 0 || pwrite(c->lock_fd, pidline, (size_t)pl, 0) != pl) {
		/* The pid is only a courtesy for the message above. */
	}
	snprintf(path, sizeof path, "%s/checkpoints", c->run_dir);
	if (mkdir_p(path, why) < 0)
		return -1;
	snprintf(path, sizeof path, "%s/logs", c->run_dir);
	if (mkdir_p(path, why) < 0)
		return -1;
	snprintf(path, sizeof path, "%s/job.json", c->run_dir);
	if (opts->resume) {
		if (sd_job_load(&c->job, path, why) < 0)
			return -1;
	} else {
		cJSON *j = sd_job_to_json(&c->job);
		char *text = cJSON_Print(j);
		cJSON_Delete(j);
		if (!text)
			sd_oom();
		int rc = write_file_atomic(path, text, strlen(text), why);
		free(text);
		if (rc < 0)
			return -1;
	}
	snprintf(path, sizeof path, "%s/token", c->run_dir);
	if (sd_token_create_file(path, &c->token, why) < 0)
		return -1;
	snprintf(c->journal_path, sizeof c->journal_path, "%s/journal.jsonl", c->run_dir);
	int torn = opts->resume && continue_journal(c, c->journal_path);
	c->journal_fd = open(c->journal_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	struct stat jst;
	if (c->journal_fd < 0 || fstat(c->journal_fd, &jst) < 0) {
		sd_why(why, "%s: %s", c->journal_path, strerror(errno));
		return -1;
	}
	c->journal_size = jst.st_size;
	if (torn && write(c->journal_fd, "\n", 1) == 1)
		c->journal_size++;   /* the killed run's last line stays on its own */
	return 0;
}

int sd_controller_create(struct sd_controller **out, uv_loop_t *loop, const struct sd_job *job,
                         const struct sd_controller_opts *opts, char **why)
{
	*out = NULL;
	struct sd_controller *c = sd_calloc(1, sizeof *c);
	c->loop = loop;
	c->lock_fd = -1;
	c->journal_fd = -1;
	c->last_loss = -1;   /* none yet: the header shows "-" */
	c->opts = *opts;
	c->t0 = c->wall0 = wall_s();
	c->mono0 = mono_s();
	c->job = *job;
	snprintf(c->run_dir, sizeof c->run_dir, "%s", opts->run_dir);
	if (open_run_dir(c, opts, why) < 0)
		goto fail;
	uv_tcp_init(loop, &c->server);
	c->server.data = c;
	c->handles_open = 1;
	struct sockaddr_in addr;
	uv_ip4_addr("127.0.0.1", 0, &addr);
	int rc = uv_tcp_bind(&c->server, (const struct sockaddr *)&addr, 0);
	if (rc == 0)
		rc = uv_listen((uv_stream_t *)&c->server, 128, on_connection);
	if (rc < 0) {
		sd_why(why, "controller: cannot listen on 127.0.0.1: %s", uv_strerror(rc));
		goto fail;
	}
	struct sockaddr_storage sa;
	int salen = sizeof sa;
	uv_tcp_getsockname(&c->server, (struct sockaddr *)&sa, &salen);
	c->port = ntohs(((struct sockaddr_in *)&sa)->sin_port);
	uv_timer_init(loop, &c->gen_timer);
	c->gen_timer.data = c;
	uv_timer_init(loop, &c->grace_timer);
	c->grace_timer.data = c;
	c->handles_open = 3;
	/* Liveness (controller.h): until a step is measured, the floor. */
	double floor_ms = c->job.comm_timeout_s * 1000;
	c->timeout_ms = (int)ceil(floor_ms);
	c->heartbeat_ms = (int)fmin(1000, fmax(20, floor_ms / 10));
	c->live_interval_ms = (int)fmin(250, fmax(20, floor_ms / 20));
	c->failing_gen = -1;
	uv_timer_init(loop, &c->live_timer);
	c->live_timer.data = c;
	c->handles_open = 4;
	struct sd_provider_config pc = {
		.catalog_path = opts->catalog_path,
		.hazard_scale = c->job.hazard_scale,
		.boot_scale = c->job.boot_scale,
		.notice_scale = c->job.notice_scale,
		.seed = c->job.market_seed,
		.emulate = opts->emulate,
		.worker_path = opts->worker_path,
		.port = c->port,
		.run_dir = c->run_dir,
		.trace = opts->trace,
		.last_server = c->resume_last_server,
		.usd_before = c->resume_usd,
	};
	if (sd_provider_create(&c->provider, loop, &pc, &provider_hooks, c, why) < 0)
		goto fail;
	if (opts->resume)
		find_latest_checkpoint(c);
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "run_dir", c->run_dir);
	cJSON_AddNumberToObject(ev, "port", c->port);
	cJSON_AddBoolToObject(ev, "resume", opts->resume);
	if (c->latest_ckpt[0]) {
		cJSON_AddStringToObject(ev, "checkpoint", c->latest_ckpt);
		c->step = c->latest_ckpt_step;
	}
	cJSON_AddItemToObject(ev, "job", sd_job_to_json(&c->job));
	journal(c, "run_start", ev);
	c->live_tick_ms = uv_now(loop);
	uv_timer_start(&c->live_timer, on_live_timer, (uint64_t)c->live_interval_ms,
	               (uint64_t)c->live_interval_ms);
	*out = c;
	return 0;
fail:
	if (c->journal_fd >= 0)
		close(c->journal_fd);
	if (c->lock_fd >= 0)
		close(c->lock_fd);
	free(c->token);
	if (c->handles_open) {
		/* Handles in c are closing: the last callback frees c. */
		uv_handle_t *h[] = { (uv_handle_t *)&c->server, (uv_handle_t *)&c->gen_timer,
		                     (uv_handle_t *)&c->grace_timer, (uv_handle_t *)&c->live_timer };
		c->handles_closing = c->handles_open;
		for (int i = 0; i < c->handles_open; i++)
			uv_close(h[i], on_create_failed_closed);
		return -1;
	}
	free(c);
	return -1;
}

int sd_controller_start(struct sd_controller *c, char **why)
{
	char id[16];
	/* Every offer the cluster names must exist before anything starts, so a
	 * typo costs no server and no process. */
	const struct sd_catalog *cat = sd_provider_catalog(c->provider);
	for (int i = 0; i < c->job.ncluster; i++)
		if (strcmp(c->job.cluster[i], "local") && (!cat || !sd_catalog_find(cat, c->job.cluster[i])))
			return sd_why(why, cat ? "cluster[%d]: %s: no such offer in %s"
			                       : "cluster[%d]: %s: no market catalog loaded%s",
			              i, c->job.cluster[i], cat ? cat->file : "");
	for (int i = 0; i < c->job.workers; i++)
		if (sd_provider_acquire(c->provider, "local", id, sizeof id, why) < 0)
			return -1;
	/* The job's initial cluster; a stockout is journaled and skipped. */
	for (int i = 0; i < c->job.ncluster; i++) {
		char *err = NULL;
		sd_provider_acquire(c->provider, c->job.cluster[i], id, sizeof id, &err);
		free(err);
	}
	return 0;
}

int sd_controller_workers(const struct sd_controller *c, struct sd_worker_info *out, int max)
{
	int n = 0;
	for (const struct conn *k = c->conns; k && n < max; k = k->next) {
		if (!k->authed)
			continue;
		struct sd_worker_info *w = &out[n++];
		snprintf(w->server, sizeof w->server, "%s", k->server_id);
		w->member = k->member;
		w->rank = k->member ? k->rank : -1;
		w->images_per_sec = c->paused ? 0 : k->ips;   /* paused: nothing trains */
		w->compute_ms = k->compute_ms;
		w->comm_ms = k->comm_ms;
		w->emulated = k->emulated;
		snprintf(w->device, sizeof w->device, "%s", k->device);
	}
	return n;
}

void sd_controller_signal(struct sd_controller *c, int signum)
{
	const char *name = signum == SIGTERM ? "SIGTERM" : signum == SIGINT ? "SIGINT"
	                   : signum == SIGHUP ? "SIGHUP" : "signal";
	journal_kv(c, "signal", "signal", name, "action", "quit");
	char *why = NULL;
	cmd_quit(c, 0, NULL, &why);
	free(why);
}

void sd_controller_status(const struct sd_controller *c, struct sd_run_status *st)
{
	memset(st, 0, sizeof *st);
	st->step = c->step;
	st->total_steps = c->total_steps;
	st->epochs = c->job.train.epochs;
	st->epoch = c->last_epoch;
	st->loss = c->step > 0 ? c->last_loss : -1;
	st->test_accuracy = c->last_epoch > 0 ? c->last_acc : -1;
	/* Paused, nothing trains: no speed, no ETA (rather than the last ones). */
	st->images_per_sec = c->step_ms_ema > 0 && c->world_size > 0 && !c->paused
		? c->job.train.global_batch / (c->step_ms_ema / 1000) : 0;
	st->elapsed_s = run_time_s(c);
	st->eta_s = c->step_ms_ema > 0 && c->total_steps > 0 && c->world_size > 0 && !c->paused
		? (c->total_steps - c->step) * c->step_ms_ema / 1000 : -1;
	st->generation = c->generation;
	st->world_size = c->world_size;
	st->paused = c->paused;
	st->done = c->exiting != 0;
}

const char *sd_controller_fatal(const struct sd_controller *c)
{
	return c->fatal[0] ? c->fatal : NULL;
}

const struct sd_job *sd_controller_job(const struct sd_controller *c)
{
	return &c->job;
}

struct sd_provider *sd_controller_provider(struct sd_controller *c)
{
	return c->provider;
}

int sd_controller_port(const struct sd_controller *c)
{
	return c->port;
}

void sd_controller_close(struct sd_controller *c)
{
	c->closing = 1;   /* checkpoint writes in flight finish and are journaled */
	while (c->conns)
		conn_close(c->conns, NULL);
	sd_provider_close(c->provider);
	uv_close((uv_handle_t *)&c->server, NULL);
	uv_close((uv_handle_t *)&c->gen_timer, NULL);
	uv_close((uv_handle_t *)&c->grace_timer, NULL);
	uv_close((uv_handle_t *)&c->live_timer, NULL);
}

void sd_controller_free(struct sd_controller *c)
{
	if (!c)
		return;
	while (c->kv) {
		struct kv *e = c->kv;
		c->kv = e->next;
		free(e->key);
		free(e->value);
		free(e);
	}
	while (c->gets) {
		struct pending_get *g = c->gets;
		c->gets = g->next;
		free(g->key);
		free(g);
	}
	cJSON_Delete(c->sums);
	free(c->job_failed);
	sd_provider_free(c->provider);
	free(c->ck);
	free(c->latest_data);
	free(c->token);
	if (c->journal_fd >= 0)
		close(c->journal_fd);
	if (c->lock_fd >= 0)
		close(c->lock_fd);   /* releases the run directory */
	free(c);
}
