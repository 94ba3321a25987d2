/* src/worker/worker-agent.c - spotdeck-worker agent mode.
 *
 * One blocking control connection to the controller carries the job, the
 * generations, the rendezvous store for the collectives and the metrics.
 * Gradients never pass through it: they go worker-to-worker through the
 * collectives layer (engine/comm.h).
 *
 * Agreement on step boundaries: every step all-reduces a small metrics
 * vector along with the gradients, in the same collective (gen_allreduce).
 * Its last element counts workers that want the group to change after this
 * step (a new generation was announced, a notice arrived, the operator
 * paused).  Because every rank sees the same sum after the same step, all
 * ranks leave the generation at the same boundary, and nobody is left
 * waiting in a collective that will never complete.
 *
 * Liveness: a thread of its own sends a heartbeat every heartbeat_ms (from
 * the welcome), whatever the training thread is doing, so the controller
 * can tell a busy worker from a silent one (a stopped process, a frozen
 * host, a dead link) and drop the silent one; see "Liveness" in
 * controller.h.  A worker the controller dropped connects again once it can
 * and joins as a new member (the state comes to it by broadcast).
 */
#include "config.h"

#include "src/worker/worker-agent.h"
#include "src/worker/notice-watch.h"

#include <cJSON.h>
#include <errno.h>
#include <sys/un.h>
#include <math.h>
#include <netdb.h>
#include <omp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "engine/comm.h"
#include "engine/engine.h"
#include "engine/grad-sync.h"
#include "src/proto/job.h"
#include "src/proto/protocol.h"

void openblas_set_num_threads(int num_threads);

/* Control-plane messages larger than the controller's limit never go to the
 * worker except checkpoint chunks, which are cut to fit. */
#define CKPT_CHUNK_BYTES (256u * 1024u)

static volatile sig_atomic_t got_sigterm;

static void on_sigterm(int sig)
{
	(void)sig;
	got_sigterm = 1;
}

struct queued {
	enum sd_msg_type type;
	cJSON *msg;
};

struct ctl {
	int fd;
	/* Held while a whole line goes out on fd, which the training thread
	 * and the heartbeat thread share; also guards fd's replacement. */
	pthread_mutex_t send_lock;
	struct sd_line_reader rd;
	struct queued *q;
	int nq, capq;
	long long next_kv_id;
	int eof;             /* the controller closed the connection */
	int broken;          /* a send failed: the connection is gone */
	long gen;            /* the generation being joined or trained, -1 none */
	const char *host, *port;   /* port NULL: host is a Unix socket's path */
	char shown[300];     /* the controller's address for messages */
};

/* The heartbeat thread (see the top of the file). */
struct heartbeat {
	struct ctl *ctl;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;   /* CLOCK_MONOTONIC */
	int interval_ms;     /* guarded by mu */
	int stop;            /* guarded by mu */
	int started;
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void ctl_init(struct ctl *c, const char *host, const char *port)
{
	memset(c, 0, sizeof *c);
	c->fd = -1;
	c->gen = -1;
	c->host = host;
	c->port = port;
	if (port)
		snprintf(c->shown, sizeof c->shown, "%s:%s", host, port);
	else
		snprintf(c->shown, sizeof c->shown, "unix:%s", host);
	pthread_mutex_init(&c->send_lock, NULL);
	sd_line_reader_init(&c->rd, SD_PROTO_LINE_MAX);
}

/* Drops what was queued or half-read from the connection before. */
static void ctl_forget(struct ctl *c)
{
	for (int i = 0; i < c->nq; i++)
		cJSON_Delete(c->q[i].msg);
	c->nq = 0;
	sd_line_reader_free(&c->rd);
	sd_line_reader_init(&c->rd, SD_PROTO_LINE_MAX);
}

/* Connects to the controller, replacing (and closing) any earlier
 * connection; what it queued is dropped. */
static int ctl_connect(struct ctl *c, char **why)
{
	int fd = -1, err = 0;
	if (!c->port) {
		/* A Unix socket: the end of the ssh provider's remote forward on
		 * this host (sshd listens on it and carries each connection back
		 * over the provider's ssh connection to the controller). */
		struct sockaddr_un sun;
		memset(&sun, 0, sizeof sun);
		sun.sun_family = AF_UNIX;
		if (strlen(c->host) >= sizeof sun.sun_path)
			return sd_why(why, "controller %s: the path is longer than a Unix socket's %zu bytes", c->shown,
			              sizeof sun.sun_path - 1);
		memcpy(sun.sun_path, c->host, strlen(c->host) + 1);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return sd_why(why, "controller %s: socket: %s", c->shown, strerror(errno));
		if (connect(fd, (struct sockaddr *)&sun, sizeof sun) < 0) {
			err = errno;
			close(fd);
			return sd_why(why, "controller %s: cannot connect: %s%s", c->shown, strerror(err),
			              err == ENOENT || err == ECONNREFUSED
			              ? " (the ssh connection that forwards it to the controller is gone)" : "");
		}
	} else {
		struct addrinfo hints, *res, *ai;
		memset(&hints, 0, sizeof hints);
		hints.ai_family = AF_UNSPEC;
		hints.ai_socktype = SOCK_STREAM;
		int rc = getaddrinfo(c->host, c->port, &hints, &res);
		if (rc)
			return sd_why(why, "controller %s: %s", c->shown, gai_strerror(rc));
		for (ai = res; ai; ai = ai->ai_next) {
			int s = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
			if (s < 0)
				continue;
			if (connect(s, ai->ai_addr, ai->ai_addrlen) == 0) {
				fd = s;
				break;
			}
			err = errno;
			close(s);
		}
		freeaddrinfo(res);
		if (fd < 0)
			return sd_why(why, "controller %s: cannot connect: %s", c->shown, strerror(err));
	}
	pthread_mutex_lock(&c->send_lock);
	if (c->fd >= 0)
		close(c->fd);
	c->fd = fd;
	c->eof = c->broken = 0;
	pthread_mutex_unlock(&c->send_lock);
	ctl_forget(c);
	return 0;
}

static void ctl_close(struct ctl *c)
{
	ctl_forget(c);
	free(c->q);
	sd_line_reader_free(&c->rd);
	if (c->fd >= 0)
		close(c->fd);
	pthread_mutex_destroy(&c->send_lock);
}

/* Whether the connection to the controller is gone (closed or broken). */
static int ctl_lost(const struct ctl *c)
{
	/* broken may be set by the heartbeat thread (under send_lock). */
	return c->eof || __atomic_load_n(&c->broken, __ATOMIC_RELAXED);
}

/* Sends msg (consumed) as one line, never interleaved with another
 * thread's.  Returns 0 or -1 when the controller is gone. */
static int ctl_send(struct ctl *c, cJSON *msg)
{
	size_t len;
	char *line = sd_msg_encode(msg, &len);
	cJSON_Delete(msg);
	size_t off = 0;
	int rc = 0;
	pthread_mutex_lock(&c->send_lock);
	while (off < len) {
		ssize_t n = c->fd >= 0 ? send(c->fd, line + off, len - off, MSG_NOSIGNAL) : -1;
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			__atomic_store_n(&c->broken, 1, __ATOMIC_RELAXED);
			rc = -1;
			break;
		}
		off += (size_t)n;
	}
	pthread_mutex_unlock(&c->send_lock);
	free(line);
	return rc;
}

static void *heartbeat_main(void *arg)
{
	struct heartbeat *h = arg;
	pthread_mutex_lock(&h->mu);
	while (!h->stop) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		long long ns = ts.tv_nsec + (long long)h->interval_ms * 1000000;
		ts.tv_sec += (time_t)(ns / 1000000000);
		ts.tv_nsec = (long)(ns % 1000000000);
		while (!h->stop && pthread_cond_timedwait(&h->cv, &h->mu, &ts) != ETIMEDOUT)
			;
		if (h->stop)
			break;
		pthread_mutex_unlock(&h->mu);
		/* A failed send is the training thread's to notice and handle. */
		ctl_send(h->ctl, sd_msg_new(SD_MSG_HEARTBEAT));
		pthread_mutex_lock(&h->mu);
	}
	pthread_mutex_unlock(&h->mu);
	return NULL;
}

/* Starts the heartbeat thread, or changes its interval if it runs.  Signals
 * stay with the training thread (SIGTERM must interrupt its waits). */
static void heartbeat_start(struct heartbeat *h, struct ctl *c, int interval_ms)
{
	if (interval_ms < 10)
		interval_ms = 10;
	if (h->started) {
		pthread_mutex_lock(&h->mu);
		h->interval_ms = interval_ms;
		pthread_mutex_unlock(&h->mu);
		return;
	}
	h->ctl = c;
	h->interval_ms = interval_ms;
	h->stop = 0;
	pthread_mutex_init(&h->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&h->cv, &ca);
	pthread_condattr_destroy(&ca);
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	h->started = pthread_create(&h->thread, NULL, heartbeat_main, h) == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!h->started) {
		pthread_cond_destroy(&h->cv);
		pthread_mutex_destroy(&h->mu);
	}
}

static void heartbeat_stop(struct heartbeat *h)
{
	if (!h->started)
		return;
	pthread_mutex_lock(&h->mu);
	h->stop = 1;
	pthread_cond_signal(&h->cv);
	pthread_mutex_unlock(&h->mu);
	/* A send blocked on a controller that stopped reading would keep the
	 * thread (and the join) waiting: end the connection first. */
	if (h->ctl->fd >= 0)
		shutdown(h->ctl->fd, SHUT_RDWR);
	pthread_join(h->thread, NULL);
	pthread_cond_destroy(&h->cv);
	pthread_mutex_destroy(&h->mu);
	h->started = 0;
}

/* Reads what the controller sent within timeout_ms (0 = only what is already
 * there, <0 = until something arrives) into the queue.  Returns 0, or -1 when
 * the connection ended or the controller broke the protocol. */
static int ctl_pump(struct ctl *c, int timeout_ms, char **why)
{
	if (c->eof)
		return sd_why(why, "controller closed the connection");
	struct pollfd p = { .fd = c->fd, .events = POLLIN };
	int rc = poll(&p, 1, timeout_ms);
	if (rc < 0 && errno == EINTR)
		return 0;
	if (rc <= 0)
		return 0;
	char buf[65536];
	for (;;) {
		ssize_t n = recv(c->fd, buf, sizeof buf, MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
			break;
		if (n <= 0) {
			c->eof = 1;
			break;
		}
		sd_line_reader_feed(&c->rd, buf, (size_t)n);
	}
	const char *line;
	size_t len;
	int got;
	while ((got = sd_line_reader_next(&c->rd, &line, &len, why)) == 1) {
		enum sd_msg_type type;
		cJSON *msg;
		if (sd_msg_decode(line, len, &type, &msg, why) < 0)
			return -1;
		if (c->nq == c->capq) {
			c->capq = c->capq ? 2 * c->capq : 16;
			c->q = realloc(c->q, (size_t)c->capq * sizeof *c->q);
			if (!c->q)
				sd_oom();
		}
		c->q[c->nq].type = type;
		c->q[c->nq].msg = msg;
		c->nq++;
	}
	if (got < 0)
		return -1;
	if (c->eof && !c->nq)
		return sd_why(why, "controller closed the connection");
	return 0;
}

/* Removes and returns the first queued message of type (NULL if none). */
static cJSON *ctl_take(struct ctl *c, enum sd_msg_type type)
{
	for (int i = 0; i < c->nq; i++) {
		if (c->q[i].type != type)
			continue;
		cJSON *m = c->q[i].msg;
		memmove(&c->q[i], &c->q[i + 1], (size_t)(c->nq - i - 1) * sizeof *c->q);
		c->nq--;
		return m;
	}
	return NULL;
}

static int ctl_has(const struct ctl *c, enum sd_msg_type type)
{
	for (int i = 0; i < c->nq; i++)
		if (c->q[i].type == type)
			return 1;
	return 0;
}

/* Whether the controller told us to give up on generation gen (a collective
 * of it failed on another member).  Drops the aborts of gen and of older
 * generations, which no longer matter. */
static int ctl_aborted(struct ctl *c, long gen)
{
	int hit = 0;
	for (int i = 0; i < c->nq;) {
		long g = (long)sd_msg_int(c->q[i].msg, "generation", -1);
		if (c->q[i].type != SD_MSG_ABORT || g > gen) {
			i++;
			continue;
		}
		hit |= g == gen;
		cJSON_Delete(c->q[i].msg);
		memmove(&c->q[i], &c->q[i + 1], (size_t)(c->nq - i - 1) * sizeof *c->q);
		c->nq--;
	}
	return hit;
}

/* The rendezvous store of the collectives, served by the controller. */
static int store_set(void *ctx, const char *key, const void *value, size_t len, char **why)
{
	struct ctl *c = ctx;
	cJSON *m = sd_msg_new(SD_MSG_KV_SET);
	char *hex = sd_hex_encode(value, len);
	cJSON_AddStringToObject(m, "key", key);
	cJSON_AddStringToObject(m, "value", hex);
	free(hex);
	if (ctl_send(c, m) < 0)
		return sd_why(why, "store set %s: controller connection lost", key), SD_COMM_EFAIL;
	return 0;
}

static int store_get(void *ctx, const char *key, void **value, size_t *len, int timeout_ms,
                     char **why)
{
	struct ctl *c = ctx;
	long long id = ++c->next_kv_id;
	cJSON *m = sd_msg_new(SD_MSG_KV_GET);
	cJSON_AddNumberToObject(m, "id", (double)id);
	cJSON_AddStringToObject(m, "key", key);
	if (ctl_send(c, m) < 0)
		return sd_why(why, "store get %s: controller connection lost", key), SD_COMM_EFAIL;
	double deadline = now_s() + (timeout_ms < 0 ? 1e9 : timeout_ms / 1000.0);
	for (;;) {
		for (int i = 0; i < c->nq; i++) {
			if (c->q[i].type != SD_MSG_KV_VALUE || sd_msg_int(c->q[i].msg, "id", -1) != id)
				continue;
			cJSON *v = c->q[i].msg;
			memmove(&c->q[i], &c->q[i + 1], (size_t)(c->nq - i - 1) * sizeof *c->q);
			c->nq--;
			*value = sd_hex_decode(sd_msg_str(v, "value", ""), len);
			cJSON_Delete(v);
			if (!*value)
				return sd_why(why, "store get %s: controller sent bad hex", key), SD_COMM_EFAIL;
			return 0;
		}
		double left = deadline - now_s();
		if (left <= 0)
			return sd_why(why, "store get %s: no value within %d ms", key, timeout_ms),
			       SD_COMM_ETIMEDOUT;
		/* A newer generation was announced while we wait for this one's
		 * peers: some of them will never come, give up now. */
		if (ctl_has(c, SD_MSG_GENERATION))
			return sd_why(why, "store get %s: superseded by a newer generation", key),
			       SD_COMM_ETIMEDOUT;
		if (ctl_lost(c))
			return sd_why(why, "store get %s: controller connection lost", key),
			       SD_COMM_EFAIL;
		if (ctl_aborted(c, c->gen))
			return sd_why(why, "store get %s: the controller gave up on generation %ld "
			              "(it failed on another member)", key, c->gen), SD_COMM_ETIMEDOUT;
		if (ctl_pump(c, left > 0.05 ? 50 : (int)(left * 1000) + 1, why) < 0)
			return SD_COMM_EFAIL;
	}
}

static const struct sd_store_ops ctl_store_ops = { .set = store_set, .get = store_get };

struct agent {
	struct ctl ctl;
	struct sd_job job;
	struct sd_trainer *t;
	const char *server_id;
	double pace;
	int have_state;       /* parameters are a valid state of the run */
	int leaving;          /* notice or SIGTERM: leave at the next boundary */
	int ckpt_requested;   /* operator asked for a checkpoint (rank 0) */
	char ckpt_reason[16]; /* its reason: "operator" or "final" (quit) */
	long generation;
	struct heartbeat hb;
	const char *token;
	long pid;
	/* A checkpoint the controller streams to us to resume from. */
	unsigned char *resume;
	size_t resume_len, resume_total;
	long resume_step;
	/* The cloud's preemption notice (notice-watch.h): cloud_noticed is set
	 * by the watcher's thread, read by the training thread. */
	struct sd_notice_watch *watch;
	int cloud_noticed;
	long steps_done;      /* t->step as of the last step boundary, for the watcher's thread */
	/* The gradient all-reduce overlapped with backward (engine/grad-sync.h),
	 * made at the first step that can use it. */
	struct sd_grad_sync *sync;
	size_t sync_floats;   /* its bucket size */
	int threads;          /* compute threads (--threads, else the job's) */
	/* Fault injection for tests (SD_TEST_FAIL_RANK0_AT_STEP): as rank 0,
	 * take this step's completed collective for a failed one, once, as
	 * when a peer dies after the others' collective ended but before
	 * ours did. */
	long fail_rank0_at;
	/* For tests (SD_TEST_SAMPLE_LOG=DIR): for each step whose gradients
	 * this worker computed, before the step's last collective, one line
	 * "generation step rank world offset count i0 i1 ..." with the indices
	 * of the training samples it trained, appended to DIR/SERVER.samples,
	 * so a test can check, with the journal's record of which generation
	 * completed each step, that every sample of an epoch is trained exactly
	 * once across re-forms. */
	FILE *sample_log;
};

/* Handles queued messages that may arrive at any time.  Returns 1 if the
 * group should change after this step (new generation, pause, stop). */
static int handle_async(struct agent *a)
{
	cJSON *m;
	if (a->t)
		__atomic_store_n(&a->steps_done, a->t->step, __ATOMIC_RELAXED);
	while ((m = ctl_take(&a->ctl, SD_MSG_NOTICE))) {
		a->leaving = 1;
		cJSON_Delete(m);
	}
	while ((m = ctl_take(&a->ctl, SD_MSG_CHECKPOINT))) {
		/* A checkpoint taken because the run quits is its final one. */
		int final = !strcmp(sd_msg_str(m, "reason", ""), "final");
		if (!a->ckpt_requested || final)
			snprintf(a->ckpt_reason, sizeof a->ckpt_reason, "%s", final ? "final" : "operator");
		a->ckpt_requested = 1;
		cJSON_Delete(m);
	}
	if (got_sigterm || __atomic_load_n(&a->cloud_noticed, __ATOMIC_ACQUIRE))
		a->leaving = 1;
	return a->leaving || ctl_has(&a->ctl, SD_MSG_GENERATION) || ctl_has(&a->ctl, SD_MSG_PAUSE) ||
	       ctl_has(&a->ctl, SD_MSG_STOP);
}

/* Collects checkpoint chunks the controller sends before a generation in
 * which no worker holds the run's state. */
static int take_resume_chunks(struct agent *a, char **why)
{
	cJSON *m;
	while ((m = ctl_take(&a->ctl, SD_MSG_CKPT_CHUNK))) {
		long long off = sd_msg_int(m, "offset", -1), total = sd_msg_int(m, "total", -1);
		size_t n;
		unsigned char *bytes = sd_hex_decode(sd_msg_str(m, "data", ""), &n);
		if (!bytes || off < 0 || total <= 0 || (unsigned long long)off + n > (unsigned long long)total) {
			free(bytes);
			cJSON_Delete(m);
			return sd_why(why, "controller sent a malformed checkpoint chunk");
		}
		if (off == 0) {
			free(a->resume);
			a->resume = sd_malloc((size_t)total);
			a->resume_total = (size_t)total;
			a->resume_len = 0;
			a->resume_step = (long)sd_msg_int(m, "step", 0);
		}
		if (a->resume && (size_t)off == a->resume_len && (size_t)total == a->resume_total) {
			memcpy(a->resume + off, bytes, n);
			a->resume_len += n;
		}
		free(bytes);
		cJSON_Delete(m);
	}
	return 0;
}

/* Loads a completely received resume checkpoint into the trainer. */
static int load_resume(struct agent *a, char **why)
{
	if (!a->resume || a->resume_len != a->resume_total)
		return 0;
	char path[] = "/tmp/spotdeck-resume-XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0)
		return sd_why(why, "resume: cannot create a temporary file: %s", strerror(errno));
	size_t off = 0;
	while (off < a->resume_len) {
		ssize_t n = write(fd, a->resume + off, a->resume_len - off);
		if (n <= 0) {
			close(fd);
			unlink(path);
			return sd_why(why, "resume: writing %s: %s", path, strerror(errno));
		}
		off += (size_t)n;
	}
	close(fd);
	int rc = sd_trainer_load(a->t, path, why);
	unlink(path);
	free(a->resume);
	a->resume = NULL;
	a->resume_len = a->resume_total = 0;
	if (rc == 0)
		a->have_state = 1;
	return rc;
}

/* Rank 0 streams a checkpoint of the current state to the controller. */
static int send_checkpoint(struct agent *a, const char *reason, char **why)
{
	char path[] = "/tmp/spotdeck-ckpt-XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0)
		return sd_why(why, "checkpoint: cannot create a temporary file: %s", strerror(errno));
	close(fd);
	if (sd_trainer_save(a->t, path, why) < 0) {
		unlink(path);
		return -1;
	}
	FILE *f = fopen(path, "rb");
	unlink(path);
	if (!f)
		return sd_why(why, "checkpoint: reopening %s: %s", path, strerror(errno));
	fseek(f, 0, SEEK_END);
	long total = ftell(f);
	fseek(f, 0, SEEK_SET);
	unsigned char *buf = sd_malloc(CKPT_CHUNK_BYTES);
	long off = 0;
	int rc = 0;
	while (off < total) {
		size_t n = fread(buf, 1, CKPT_CHUNK_BYTES, f);
		if (n == 0) {
			rc = sd_why(why, "checkpoint: short read");
			break;
		}
		char *hex = sd_hex_encode(buf, n);
		cJSON *m = sd_msg_new(SD_MSG_CKPT_CHUNK);
		cJSON_AddNumberToObject(m, "step", (double)a->t->step);
		cJSON_AddNumberToObject(m, "offset", (double)off);
		cJSON_AddNumberToObject(m, "total", (double)total);
		cJSON_AddStringToObject(m, "reason", reason);
		cJSON_AddStringToObject(m, "data", hex);
		free(hex);
		if (ctl_send(&a->ctl, m) < 0) {
			rc = sd_why(why, "checkpoint: controller connection lost");
			break;
		}
		off += (long)n;
	}
	free(buf);
	fclose(f);
	return rc;
}

/* Test-set loss and accuracy (a language model: validation loss per token,
 * accuracy -1), each rank evaluating its share and all-reducing. */
static int evaluate(struct agent *a, struct sd_comm *comm, double *loss, double *acc, char **why)
{
	struct sd_trainer *t = a->t;
	int rank = sd_comm_rank(comm), world = sd_comm_world_size(comm);
	long n = sd_trainer_eval_count(t), lo = n * rank / world, hi = n * (rank + 1) / world;
	double sums[2] = { 0, 0 };
	long c = 0;
	if (sd_trainer_eval_range(t, lo, hi, &sums[0], &c, why) < 0)
		return -1;
	sums[1] = (double)c;
	int rc = sd_comm_allreduce_sum_f64(comm, sums, 2, why);
	if (rc < 0)
		return rc;
	*loss = sums[0] / n;
	*acc = t->lm ? -1 : sums[1] / n;
	return 0;
}

static int send_comm_failed(struct agent *a, const char *reason)
{
	cJSON *m = sd_msg_new(SD_MSG_COMM_FAILED);
	cJSON_AddNumberToObject(m, "generation", (double)a->generation);
	cJSON_AddNumberToObject(m, "step", (double)a->t->step);
	cJSON_AddStringToObject(m, "reason", reason ? reason : "unknown");
	return ctl_send(&a->ctl, m);
}

/* How a generation ends for this worker.  GEN_TRAINING only passes between
 * the phases of run_generation (the generation goes on); it never leaves it. */
enum gen_result { GEN_TRAINING, GEN_CHANGE, GEN_DONE, GEN_FAILED, GEN_FATAL };

/* This worker's place in one generation, from the GENERATION message. */
struct gen {
	int rank, world;
	int offset, count;        /* this rank's share of each global batch */
	int timeout_ms;           /* collectives and rendezvous */
	double t_join;            /* when the worker started joining (now_s) */
	struct sd_comm *comm;
	int on_device;            /* the collectives work on the device copy */
	size_t param_count;       /* floats in the model's parameters (and gradients) */
	int first;                /* no step reported yet in this generation */
};

/* Reads the generation's message into g and makes it the current one. */
static void gen_init(struct agent *a, struct gen *g, cJSON *msg)
{
	memset(g, 0, sizeof *g);
	g->rank = (int)sd_msg_int(msg, "rank", 0);
	g->world = (int)sd_msg_int(msg, "world_size", 1);
	g->offset = (int)sd_msg_int(msg, "offset", 0);
	g->count = (int)sd_msg_int(msg, "count", 0);
	/* The controller sizes the timeout to this generation's step time. */
	long long tmo = sd_msg_int(msg, "timeout_ms", (long long)(a->job.comm_timeout_s * 1000));
	g->timeout_ms = tmo < 1 ? 1 : tmo > 86400000 ? 86400000 : (int)tmo;
	g->first = 1;
	a->generation = (long)sd_msg_int(msg, "generation", 0);
	a->ctl.gen = a->generation;
	g->t_join = now_s();
}

/* Rank 0 loads the checkpoint streamed to it, if any; then the group's
 * collectives: NCCL when every rank has a GPU of its own, else Gloo
 * (engine/comm.h). */
static enum gen_result gen_connect(struct agent *a, struct gen *g, char **why)
{
	if (g->rank == 0 && load_resume(a, why) < 0)
		return GEN_FATAL;
	enum sd_comm_backend backend = SD_COMM_GLOO;
	int rc = sd_comm_choose_backend(&backend, g->rank, g->world, a->generation,
	                                sd_trainer_nccl_device(a->t), &ctl_store_ops, &a->ctl,
	                                g->timeout_ms, why);
	g->on_device = backend == SD_COMM_NCCL;
	if (rc == 0)
		rc = sd_comm_create(&g->comm, backend, g->rank, g->world, a->generation, &ctl_store_ops,
		                    &a->ctl, g->timeout_ms, why);
	if (rc < 0) {
		send_comm_failed(a, *why);
		return ctl_lost(&a->ctl) ? GEN_FATAL : GEN_FAILED;
	}
	return GEN_TRAINING;
}

/* The gradient bucket this generation all-reduces while backward runs, in
 * floats; 0: one all-reduce after backward (no overlap).  None on a device
 * (NCCL reduces there) or in a generation of one.
 *
 * Over shared memory a bucket's all-reduce costs little CPU, and a worker
 * with one compute thread has no spare CPU for the communication thread:
 * overlapping then costs more than it saves (ddp-vs-torch, 3 rounds on a
 * loaded machine, batch 256: 3,765 images/s overlapped, 4,174 not; the
 * bench's rounds moved by 10 % there, so a quiet machine's figures are
 * still to confirm it), so such a generation takes one bucket, after
 * backward. */
static size_t bucket_floats(const struct agent *a, const struct gen *g)
{
	if (g->on_device || a->t->dev || g->world < 2)
		return 0;
	if (a->threads <= 1 && !strcmp(sd_comm_backend_name(g->comm), "shm"))
		return 0;
	return (size_t)a->job.bucket_kib * 1024 / sizeof(float);
}

/* The rank holding the newest state broadcasts it to the others; then the
 * worker tells the controller it joined. */
static enum gen_result gen_sync_state(struct agent *a, struct gen *g, char **why)
{
	struct sd_trainer *t = a->t;
	struct sd_comm *comm = g->comm;
	/* Who holds the newest state?  Each rank publishes its step (-1: none). */
	double *steps = sd_calloc((size_t)g->world, sizeof(double));
	steps[g->rank] = a->have_state ? (double)t->step : -1;
	int rc = sd_comm_allreduce_sum_f64(comm, steps, (size_t)g->world, why);
	int source = 0;
	for (int r = 1; rc == 0 && r < g->world; r++)
		if (steps[r] > steps[source])
			source = r;
	long start = rc == 0 && steps[source] > 0 ? (long)steps[source] : 0;
	free(steps);
	struct sd_state_view sv = { 0 };
	if (rc == 0)
		rc = sd_trainer_comm_begin(t, SD_STATE_MODEL, g->on_device, &sv, why);
	size_t np = sv.param_count, nb = sv.buffer_count;
	g->param_count = np;
	if (rc == 0)
		rc = sd_comm_broadcast(comm, sv.params, np * sizeof(float), source, why);
	if (rc == 0)
		rc = sd_comm_broadcast(comm, sv.velocity, np * sizeof(float), source, why);
	/* AdamW's second moment travels like the momentum: every rank holds
	 * the whole optimizer state.  Its step count is the step itself. */
	if (rc == 0 && sv.second)
		rc = sd_comm_broadcast(comm, sv.second, np * sizeof(float), source, why);
	if (rc == 0 && nb)
		rc = sd_comm_broadcast(comm, sv.buffers, nb * sizeof(float), source, why);
	if (rc == 0)
		rc = sd_trainer_comm_end(t, SD_STATE_MODEL, g->on_device, why);
	if (rc < 0) {
		send_comm_failed(a, *why);
		return GEN_FAILED;
	}
	t->step = start;
	t->perm_epoch = -1;
	a->have_state = 1;
	cJSON *j = sd_msg_new(SD_MSG_JOINED);
	cJSON_AddNumberToObject(j, "generation", (double)a->generation);
	cJSON_AddNumberToObject(j, "step", (double)start);
	cJSON_AddNumberToObject(j, "rank", g->rank);
	cJSON_AddNumberToObject(j, "source_rank", source);
	cJSON_AddNumberToObject(j, "join_ms", (now_s() - g->t_join) * 1000);
	cJSON_AddNumberToObject(j, "total_steps", (double)t->total_steps);
	cJSON_AddStringToObject(j, "comm", sd_comm_backend_name(comm));
	cJSON_AddNumberToObject(j, "bucket_kib", (double)(bucket_floats(a, g) * sizeof(float) / 1024));
	if (ctl_send(&a->ctl, j) < 0)
		return GEN_FATAL;
	return GEN_TRAINING;
}

/* Whether this step's gradient all-reduce goes through the bucket planner
 * (gradients in host memory and a group to reduce with).  Makes the
 * planner for this generation's bucket size (-1 with *why if its thread
 * cannot start). */
static int overlapped(struct agent *a, struct gen *g, char **why)
{
	if (g->on_device || a->t->dev || g->world < 2)
		return 0;
	size_t floats = bucket_floats(a, g);
	if (a->sync && a->sync_floats != floats) {
		sd_grad_sync_destroy(a->sync);
		a->sync = NULL;
	}
	if (!a->sync && sd_grad_sync_create(&a->sync, a->t->model, floats, why) < 0)
		return -1;
	a->sync_floats = floats;
	return 1;
}

/* All-reduces the gradients and the metrics vector (see the top of the
 * file) with no extra round trip: the metrics ride as floats after the
 * gradients of the step's last collective.  With overlap (sd_grad_sync)
 * that is the last bucket's, whose gradients are staged with them; without,
 * the one all-reduce's (sd_state_view.grad_tail).  Float sums are exact for
 * integers below 2^24, so `correct`, the sample count and the vote (each at
 * most the global batch or the world size) arrive exact.  The loss sum,
 * non-negative, is rounded to float on each rank and in each addition: its
 * relative error is at most about world * 2^-24 (6e-8 per worker), far
 * below the digits the journal and cockpit show.  The collective gives
 * every rank the same bits (as it does for the gradients), so all ranks see
 * the same vote.  Without room for them (gradients on a device, NCCL) or
 * with a batch too large for exact float counts, the metrics take a second
 * all-reduce in double.  0 or negative with *why. */
static int gen_allreduce(struct agent *a, struct gen *g, int overlap, double metrics[4], char **why)
{
	struct sd_trainer *t = a->t;
	int exact = t->cfg.global_batch < (1 << 24);
	int rc;
	if (overlap) {
		float extra[4];
		for (int i = 0; i < 4; i++)
			extra[i] = (float)metrics[i];
		rc = sd_grad_sync_finish(a->sync, extra, exact ? 4 : 0, why);
		if (rc == 0 && exact)
			for (int i = 0; i < 4; i++)
				metrics[i] = extra[i];
		if (rc == 0 && !exact)
			rc = sd_comm_allreduce_sum_f64(g->comm, metrics, 4, why);
		return rc;
	}
	struct sd_state_view gv;
	rc = sd_trainer_comm_begin(t, SD_STATE_GRADS, g->on_device, &gv, why);
	if (rc < 0)
		return rc;
	size_t np = g->param_count;
	int fused = gv.grad_tail >= 4 && exact;
	if (fused)
		for (int i = 0; i < 4; i++)
			gv.grads[np + i] = (float)metrics[i];
	rc = sd_comm_allreduce_sum(g->comm, gv.grads, fused ? np + 4 : np, why);
	if (rc == 0 && fused)
		for (int i = 0; i < 4; i++)
			metrics[i] = gv.grads[np + i];
	if (rc == 0)
		rc = sd_trainer_comm_end(t, SD_STATE_GRADS, g->on_device, why);
	if (rc == 0 && !fused)
		rc = sd_comm_allreduce_sum_f64(g->comm, metrics, 4, why);
	return rc;
}

/* The STEP message of the step just applied; metrics are the group's sums,
 * compute_s and comm_s this worker's times. */
static cJSON *step_msg(struct agent *a, struct gen *g, const double metrics[4], double compute_s, double comm_s,
                       int epoch_end)
{
	struct sd_trainer *t = a->t;
	cJSON *m = sd_msg_new(SD_MSG_STEP);
	cJSON_AddNumberToObject(m, "generation", (double)a->generation);
	cJSON_AddNumberToObject(m, "step", (double)t->step);
	cJSON_AddNumberToObject(m, "rank", g->rank);
	cJSON_AddNumberToObject(m, "world_size", g->world);
	cJSON_AddNumberToObject(m, "samples", g->count);
	cJSON_AddNumberToObject(m, "loss_sum", metrics[0]);
	cJSON_AddNumberToObject(m, "correct", metrics[1]);
	cJSON_AddNumberToObject(m, "global_samples", metrics[2]);
	cJSON_AddNumberToObject(m, "compute_ms", compute_s * 1000);
	cJSON_AddNumberToObject(m, "comm_ms", comm_s * 1000);
	cJSON_AddNumberToObject(m, "images_per_sec", g->count > 0 ? g->count / compute_s : 0);
	if (a->pace > 0 && a->pace < 1)
		cJSON_AddBoolToObject(m, "emulated", 1);
	cJSON_AddNumberToObject(m, "lr", sd_lr_at(&t->lr, t->step - 1));
	if (t->opt.clip_grad_norm > 0)
		cJSON_AddNumberToObject(m, "grad_norm", t->last_grad_norm);
	if (g->first || (a->job.log_every > 0 && t->step % a->job.log_every == 0) || epoch_end) {
		char sum[16];
		snprintf(sum, sizeof sum, "%08x", sd_trainer_param_checksum(t));
		cJSON_AddStringToObject(m, "checksum", sum);
	}
	g->first = 0;
	return m;
}

/* Rank 0 sends a checkpoint when one is due: periodic, asked for, the
 * last step, or the whole group leaving (changers: how many workers voted
 * to change after this step). */
static int gen_checkpoint(struct agent *a, struct gen *g, double changers, char **why)
{
	struct sd_trainer *t = a->t;
	int periodic = a->job.checkpoint_every > 0 && t->step % a->job.checkpoint_every == 0;
	/* The last worker leaving takes the state with it: save it first. */
	int last_leaving = a->leaving && g->world == (int)changers && g->rank == 0;
	if (g->rank == 0 && (periodic || a->ckpt_requested || last_leaving || t->step == t->total_steps)) {
		const char *reason = last_leaving ? "notice" : a->ckpt_requested ? a->ckpt_reason :
		                     t->step == t->total_steps ? "final" : "periodic";
		a->ckpt_requested = 0;
		if (send_checkpoint(a, reason, why) < 0)
			return -1;
	}
	return 0;
}

/* The SD_TEST_SAMPLE_LOG line of the step being trained (see struct agent). */
static void log_samples(struct agent *a, const struct gen *g)
{
	const struct sd_trainer *t = a->t;
	fprintf(a->sample_log, "%ld %ld %d %d %d %d", a->generation, t->last_step, g->rank, g->world,
	        g->offset, t->last_count);
	/* A language model's samples are windows: their first tokens. */
	for (int i = 0; i < t->last_count; i++)
		if (t->lm)
			fprintf(a->sample_log, " %llu", (unsigned long long)t->last_starts[i]);
		else
			fprintf(a->sample_log, " %d", (int)t->last_samples[i]);
	fputc('\n', a->sample_log);
	fflush(a->sample_log);
}

/* One step in the group: local gradients (stretched to --pace) with their
 * all-reduce overlapping backward where it can, the control messages that
 * came meanwhile, the last collective that carries the vote to change, the
 * update, the STEP message (with the test figures at an epoch's end) and any
 * checkpoint.  GEN_CHANGE when any worker voted to change after this step.
 * compute_ms is the local gradients' time; comm_ms what the step then still
 * waited for the collectives. */
static enum gen_result gen_step(struct agent *a, struct gen *g, char **why)
{
	struct sd_trainer *t = a->t;
	int overlap = overlapped(a, g, why);
	if (overlap < 0)
		return GEN_FATAL;
	double c0 = now_s(), loss_sum = 0;
	int correct = 0;
	if (overlap)
		sd_grad_sync_begin(a->sync, g->comm);
	if (sd_trainer_local_grad(t, t->step, g->offset, g->count, &loss_sum, &correct, why) < 0) {
		if (overlap)
			sd_grad_sync_abandon(a->sync);
		return GEN_FATAL;
	}
	if (a->pace > 0 && a->pace < 1) {
		/* Emulated GPU: stretch the compute to the offer's speed. */
		double extra = (now_s() - c0) * (1 / a->pace - 1);
		struct timespec ts = { (time_t)extra, (long)((extra - (time_t)extra) * 1e9) };
		nanosleep(&ts, NULL);
	}
	double c1 = now_s();
	double metrics[4] = { loss_sum, correct, g->count, 0 };
	/* Buckets may be in flight meanwhile: the control socket is read
	 * while they travel, off the step's critical path. */
	if (ctl_pump(&a->ctl, 0, why) < 0) {
		if (overlap)
			sd_grad_sync_abandon(a->sync);
		return GEN_FATAL;
	}
	if (ctl_aborted(&a->ctl, a->generation)) {
		/* Our peers are failing already: start no more collectives.  One
		 * in flight ends at once when they closed their connections, at
		 * worst within the communicator's timeout. */
		if (overlap)
			sd_grad_sync_abandon(a->sync);
		sd_why(why, "the controller gave up on generation %ld (a collective failed on "
		       "another member)", a->generation);
		send_comm_failed(a, *why);
		return GEN_FAILED;
	}
	metrics[3] = handle_async(a) ? 1 : 0;
	/* Before the last collective: a step the group completes has every
	 * member's line, even that of a member killed right after it. */
	if (a->sample_log)
		log_samples(a, g);
	int rc = gen_allreduce(a, g, overlap, metrics, why);
	if (rc == 0 && g->rank == 0 && a->fail_rank0_at > 0 && t->step + 1 == a->fail_rank0_at) {
		a->fail_rank0_at = 0;
		rc = sd_why(why, "step %ld's collective failed here only (SD_TEST_FAIL_RANK0_AT_STEP)",
		            t->step + 1);
	}
	double c2 = now_s();
	if (rc < 0) {
		send_comm_failed(a, *why);
		return GEN_FAILED;
	}
	sd_trainer_apply(t);
	int epoch_end = t->step % t->steps_per_epoch == 0 || t->step == t->total_steps;
	cJSON *m = step_msg(a, g, metrics, c1 - c0, c2 - c1, epoch_end);
	if (epoch_end) {
		double tl, ta;
		if (evaluate(a, g->comm, &tl, &ta, why) < 0) {
			cJSON_Delete(m);
			send_comm_failed(a, *why);
			return GEN_FAILED;
		}
		cJSON_AddNumberToObject(m, "epoch", sd_trainer_epoch_of(t, t->step - 1));
		if (t->lm) {
			/* A language model's evaluation: nats per token, no accuracy. */
			cJSON_AddNumberToObject(m, "val_loss", tl);
			cJSON_AddNumberToObject(m, "perplexity", exp(tl));
		} else {
			cJSON_AddNumberToObject(m, "test_loss", tl);
			cJSON_AddNumberToObject(m, "test_accuracy", ta);
		}
	}
	__atomic_store_n(&a->steps_done, t->step, __ATOMIC_RELAXED);
	if (ctl_send(&a->ctl, m) < 0 || gen_checkpoint(a, g, metrics[3], why) < 0)
		return GEN_FATAL;
	return metrics[3] > 0 ? GEN_CHANGE : GEN_TRAINING;
}

/* Trains in one generation until the group changes, training ends or a
 * collective fails. */
static enum gen_result run_generation(struct agent *a, cJSON *msg, char **why)
{
	struct gen g;
	gen_init(a, &g, msg);
	enum gen_result r = gen_connect(a, &g, why);
	if (r != GEN_TRAINING)
		return r;
	r = gen_sync_state(a, &g, why);
	while (r == GEN_TRAINING && a->t->step < a->t->total_steps)
		r = gen_step(a, &g, why);
	sd_comm_destroy(g.comm);
	return r == GEN_TRAINING ? GEN_DONE : r;
}

/* Says hello and waits for the welcome.  Returns it (caller frees), or NULL
 * with *why when the controller refused us or went away. */
static cJSON *agent_hello(struct agent *a, int rejoin, char **why)
{
	cJSON *hello = sd_msg_new(SD_MSG_HELLO);
	cJSON_AddNumberToObject(hello, "version", SD_PROTO_VERSION);
	cJSON_AddStringToObject(hello, "token", a->token);
	cJSON_AddStringToObject(hello, "server_id", a->server_id);
	cJSON_AddNumberToObject(hello, "pid", (double)a->pid);
	if (rejoin)
		cJSON_AddBoolToObject(hello, "rejoin", 1);
	if (ctl_send(&a->ctl, hello) < 0) {
		sd_why(why, "controller %s: connection lost during hello", a->ctl.shown);
		return NULL;
	}
	cJSON *welcome = NULL;
	while (!welcome) {
		cJSON *err = ctl_take(&a->ctl, SD_MSG_ERROR);
		if (err) {
			sd_why(why, "controller refused us: %s", sd_msg_str(err, "reason", "?"));
			cJSON_Delete(err);
			return NULL;
		}
		welcome = ctl_take(&a->ctl, SD_MSG_WELCOME);
		if (!welcome && ctl_pump(&a->ctl, 1000, why) < 0)
			return NULL;
	}
	/* Heartbeats go out from now on, while the job loads too. */
	long long hb = sd_msg_int(welcome, "heartbeat_ms", 0);
	if (hb > 0)
		heartbeat_start(&a->hb, &a->ctl, hb > 60000 ? 60000 : (int)hb);
	return welcome;
}

/* The READY message: the job is loaded; where the worker computes goes
 * along (protocol.h), sent again on every rejoin so the journal and the
 * cluster pane keep it. */
static cJSON *ready_msg(struct agent *a)
{
	cJSON *ready = sd_msg_new(SD_MSG_READY);
	cJSON_AddStringToObject(ready, "backend", a->t->backend.name);
	if (a->t->backend.device.name[0])
		cJSON_AddStringToObject(ready, "device", a->t->backend.device.name);
	cJSON_AddStringToObject(ready, "backend_reason", a->t->backend.reason);
	cJSON_AddStringToObject(ready, "precision", sd_conv2d_precision_name(a->t->precision));
	cJSON_AddStringToObject(ready, "precision_reason", a->t->precision_reason);
	return ready;
}

/* The control connection ended without a stop.  If the controller dropped
 * us (an error with rejoin: it could not hear from us for longer than its
 * timeout, because this process was stopped or its host froze) or the
 * connection just ended, connect again and join as a new member: our state
 * may be stale, the next generation broadcasts the group's to us.  Returns
 * 0 when connected again, 1 when the controller ended the run (stop), -1
 * with *why when it refused us or is gone. */
static int agent_rejoin(struct agent *a, char **why)
{
	/* Read what the controller said before it closed. */
	for (int i = 0; i < 100 && !a->ctl.eof; i++)
		if (ctl_pump(&a->ctl, 10, NULL) < 0)
			break;
	cJSON *m = ctl_take(&a->ctl, SD_MSG_STOP);
	if (m) {
		cJSON_Delete(m);
		return 1;
	}
	if (a->leaving)
		return 1;   /* we were leaving anyway */
	m = ctl_take(&a->ctl, SD_MSG_ERROR);
	if (m && !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m, "rejoin"))) {
		sd_why(why, "controller dropped us: %s", sd_msg_str(m, "reason", "?"));
		cJSON_Delete(m);
		return -1;
	}
	fprintf(stderr, "spotdeck-worker: %s: %s; connecting again\n", a->server_id,
	        m ? sd_msg_str(m, "reason", "?") : "controller connection lost");
	cJSON_Delete(m);
	char *err = NULL;
	if (ctl_connect(&a->ctl, &err) < 0) {
		sd_why(why, "%s (connecting again after the control connection ended)", err);
		free(err);
		return -1;
	}
	cJSON *welcome = agent_hello(a, 1, why);
	if (!welcome)
		return -1;
	cJSON_Delete(welcome);   /* same run, same job: the trainer stays */
	a->ckpt_requested = 0;
	a->generation = a->ctl.gen = -1;
	free(a->resume);
	a->resume = NULL;
	a->resume_len = a->resume_total = 0;
	if (ctl_send(&a->ctl, ready_msg(a)) < 0)
		return sd_why(why, "controller connection lost"), -1;
	return 0;
}

/* On a watcher thread: the cloud said this server goes (or warned).  The
 * controller hears it at once, whatever the training thread is doing (its
 * sends are locked); the training thread sees cloud_noticed at its next
 * step boundary and leaves. */
static void on_cloud_notice(const struct sd_notice *n, void *ctx)
{
	struct agent *a = ctx;
	cJSON *m = sd_msg_new(n->warning ? SD_MSG_CLOUD_WARNING : SD_MSG_CLOUD_NOTICE);
	cJSON_AddStringToObject(m, "source", n->source);
	cJSON_AddStringToObject(m, "event", n->event);
	if (!n->warning || n->seconds >= 0)
		cJSON_AddNumberToObject(m, "seconds", n->seconds);
	if (n->deadline[0])
		cJSON_AddStringToObject(m, "deadline", n->deadline);
	if (n->detail[0])
		cJSON_AddStringToObject(m, "detail", n->detail);
	/* Steps this worker had completed (as of its last step boundary) when
	 * the cloud spoke: the journal can show what the notice cost. */
	cJSON_AddNumberToObject(m, "step", (double)__atomic_load_n(&a->steps_done, __ATOMIC_RELAXED));
	/* The flag first: the training thread must not wait for our send. */
	if (!n->warning)
		__atomic_store_n(&a->cloud_noticed, 1, __ATOMIC_RELEASE);
	ctl_send(&a->ctl, m);
}

/* Starts the notice watcher: --notice, else the job's "notice". */
static int agent_watch(struct agent *a, const struct sd_agent_opts *o, char **why)
{
	const char *mode = o->notice && o->notice[0] ? o->notice : a->job.notice;
	enum sd_notice_cloud cloud;
	if (sd_notice_cloud_parse(mode, &cloud) < 0)
		return sd_why(why, "notice: expected auto, gce, aws, azure or none, got '%s'", mode);
	char *msg = NULL;
	if (sd_notice_watch_start(&a->watch, cloud, on_cloud_notice, a, &msg) < 0) {
		free(*why);
		*why = msg;
		return -1;
	}
	if (msg)   /* auto found no metadata service: train on, and say so */
		fprintf(stderr, "spotdeck-worker: %s\n", msg);
	else if (a->watch)
		fprintf(stderr, "spotdeck-worker: watching %s's metadata service for a preemption notice\n",
		        sd_notice_cloud_name(sd_notice_watch_cloud(a->watch)));
	free(msg);
	return 0;
}

/* Keeps this thread, and the threads it starts from now on (OpenMP's pool,
 * the gradient all-reduce's, Gloo's), to the CPUs of slot `slot`: the
 * slot-th run of `threads` CPUs among those the process may use.  Two
 * one-thread workers sharing two cores trained cnn at batch 64 about 10 %
 * faster each on a core of its own (3,883 -> 4,274 images/s, medians of
 * 3): the synchronous step waits for the slower rank, and migrations
 * and the other worker's helper threads make the slower one slower.  The
 * controller gives its local workers distinct slots (launcher.c).  Says on
 * stderr (the worker's log) what it did. */
static void pin_to_slot(const char *server_id, int slot, int threads)
{
	cpu_set_t allowed, mine;
	if (sched_getaffinity(0, sizeof allowed, &allowed) < 0)
		return;
	int n = CPU_COUNT(&allowed), groups = n / threads, k = 0;
	if (groups < 1) {
		fprintf(stderr, "spotdeck-worker: %s: CPUs not pinned: %d threads, %d CPUs allowed\n", server_id,
		        threads, n);
		return;
	}
	/* More local workers than groups of CPUs: slot k shares group k mod
	 * groups, so every CPU serves as many workers (pinning some and
	 * leaving the rest free would let the free ones crowd the pinned). */
	int group = slot % groups, first = group * threads;
	CPU_ZERO(&mine);
	char list[256] = "";
	size_t len = 0;
	for (int c = 0; c < CPU_SETSIZE && k < first + threads; c++) {
		if (!CPU_ISSET(c, &allowed))
			continue;
		if (k++ < first)
			continue;
		CPU_SET(c, &mine);
		if (len < sizeof list - 16)
			len += (size_t)snprintf(list + len, sizeof list - len, "%s%d", len ? "," : "", c);
	}
	if (sched_setaffinity(0, sizeof mine, &mine) < 0)
		fprintf(stderr, "spotdeck-worker: %s: CPUs not pinned: %s\n", server_id, strerror(errno));
	else
		fprintf(stderr, "spotdeck-worker: %s: on CPU(s) %s (slot %d%s)\n", server_id, list, slot,
		        group != slot ? ", shared: more local workers than CPUs" : "");
}

/* The job's ONNX model, when the welcome names one (model_sha256,
 * model_bytes): fetched from the controller with model_get, whose chunks
 * (model_chunk) are assembled and the whole checked against the SHA-256
 * (sd_model_rx), since the job's path is the controller's and this host
 * may have no such file.  Kept in memory for the trainer only: a worker
 * that rejoins keeps its trainer and needs no second copy.  Returns 0
 * (rx empty when the job's model is a built-in one), or -1 with *why. */
static int fetch_model(struct agent *a, const cJSON *welcome, struct sd_model_rx *rx, char **why)
{
	memset(rx, 0, sizeof *rx);
	const char *sha = sd_msg_str(welcome, "model_sha256", NULL);
	if (!sha)
		return 0;
	if (sd_model_rx_begin(rx, sha, sd_msg_int(welcome, "model_bytes", -1), why) < 0)
		return -1;
	cJSON *get = sd_msg_new(SD_MSG_MODEL_GET);
	cJSON_AddStringToObject(get, "sha256", rx->sha256);
	if (ctl_send(&a->ctl, get) < 0)
		return sd_why(why, "model_get: controller connection lost");
	for (;;) {
		cJSON *m = ctl_take(&a->ctl, SD_MSG_MODEL_CHUNK);
		if (m) {
			int r = sd_model_rx_chunk(rx, m, why);
			cJSON_Delete(m);
			if (r != 0)
				return r < 0 ? -1 : 0;
			continue;
		}
		cJSON *err = ctl_take(&a->ctl, SD_MSG_ERROR);
		if (err) {
			sd_why(why, "controller refused to send the model: %s", sd_msg_str(err, "reason", "?"));
			cJSON_Delete(err);
			return -1;
		}
		if (got_sigterm)
			return sd_why(why, "SIGTERM while the model was on its way");
		if (ctl_pump(&a->ctl, 1000, why) < 0)
			return -1;
	}
}

/* Connects, says hello, loads the welcome's job into a trainer and tells
 * the controller the worker is ready.  A job that cannot run here is
 * reported to the controller as a fatal log line. */
static int agent_start(struct agent *a, const struct sd_agent_opts *o, char **why)
{
	if (ctl_connect(&a->ctl, why) < 0)
		return -1;
	cJSON *welcome = agent_hello(a, 0, why);
	if (!welcome)
		return -1;
	int rc = sd_job_from_json(&a->job, cJSON_GetObjectItemCaseSensitive(welcome, "job"),
	                          "welcome.job", why);
	struct sd_model_rx model;
	memset(&model, 0, sizeof model);
	if (rc == 0 && fetch_model(a, welcome, &model, why) < 0) {
		rc = -1;
		/* Said to the controller too: its journal names the failure
		 * (job_error), not only this worker's log. */
		cJSON *l = sd_msg_new(SD_MSG_LOG);
		cJSON_AddStringToObject(l, "level", "fatal");
		cJSON_AddStringToObject(l, "message", *why);
		ctl_send(&a->ctl, l);
	}
	cJSON_Delete(welcome);
	if (rc < 0 || agent_watch(a, o, why) < 0) {
		sd_model_rx_free(&model);
		return -1;
	}
	int threads = a->threads = o->threads ? o->threads : a->job.threads_per_worker;
	if (o->cpu_slot >= 0 && a->job.pin_workers)
		pin_to_slot(a->server_id, o->cpu_slot, threads);
	openblas_set_num_threads(threads);
	omp_set_num_threads(threads);
	if (o->backend && o->backend[0])
		snprintf(a->job.train.backend, sizeof a->job.train.backend, "%s", o->backend);
	a->job.train.device = o->device;
	a->job.train.model_bytes = model.buf;
	a->job.train.model_len = model.len;
	rc = sd_trainer_create(&a->t, &a->job.train, why);
	a->job.train.model_bytes = NULL;
	a->job.train.model_len = 0;
	sd_model_rx_free(&model);
	if (rc < 0) {
		/* The job cannot run here (missing data, bad model): say so to the
		 * controller, which journals it and marks this server failed (the
		 * run ends only if no worker can load the job). */
		cJSON *l = sd_msg_new(SD_MSG_LOG);
		cJSON_AddStringToObject(l, "level", "fatal");
		cJSON_AddStringToObject(l, "message", *why);
		ctl_send(&a->ctl, l);
		return -1;
	}
	/* Only now can we take part in a rendezvous without holding others up.
	 * Where we compute goes along, for the journal and the cluster pane.  If
	 * the controller dropped us meanwhile (stopped while loading), the loop
	 * of agent_serve connects again. */
	ctl_send(&a->ctl, ready_msg(a));
	return 0;
}

/* Tells the controller this worker leaves (a notice or SIGTERM). */
static void agent_leave(struct agent *a)
{
	cJSON *l = sd_msg_new(SD_MSG_LEAVING);
	cJSON_AddStringToObject(l, "reason", got_sigterm ? "sigterm" : "notice");
	cJSON_AddNumberToObject(l, "step", (double)(a->t ? a->t->step : 0));
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	cJSON_AddNumberToObject(l, "left_at", (double)ts.tv_sec + ts.tv_nsec / 1e9);
	ctl_send(&a->ctl, l);
}

/* Takes the generations queued; only the newest announced one matters
 * (caller frees; NULL when none). */
static cJSON *newest_generation(struct agent *a)
{
	cJSON *m, *gen = NULL;
	while ((m = ctl_take(&a->ctl, SD_MSG_GENERATION))) {
		cJSON_Delete(gen);
		gen = m;
	}
	return gen;
}

/* Serves the controller: joins and trains each generation it announces,
 * rejoins after a lost connection, until the controller stops the run or
 * this worker leaves (0), or an error (-1 with *why). */
static int agent_serve(struct agent *a, char **why)
{
	for (;;) {
		if (ctl_lost(&a->ctl)) {
			free(*why);
			*why = NULL;
			int r = agent_rejoin(a, why);
			if (r != 0)
				return r < 0 ? -1 : 0;
			continue;
		}
		if (take_resume_chunks(a, why) < 0)
			return -1;
		cJSON *m;
		if ((m = ctl_take(&a->ctl, SD_MSG_STOP))) {
			cJSON_Delete(m);
			return 0;
		}
		handle_async(a);
		if (a->leaving) {
			agent_leave(a);
			/* Azure may take the machine at once now that we are gone. */
			char *ack = NULL;
			if (sd_notice_watch_ack(a->watch, &ack) < 0)
				fprintf(stderr, "spotdeck-worker: acknowledging the scheduled event: %s\n", ack);
			free(ack);
			return 0;
		}
		while ((m = ctl_take(&a->ctl, SD_MSG_PAUSE)))
			cJSON_Delete(m);
		ctl_aborted(&a->ctl, a->generation);   /* about generations we left */
		cJSON *gen = newest_generation(a);
		if (!gen) {
			if (ctl_pump(&a->ctl, 200, why) < 0 && !ctl_lost(&a->ctl))
				return -1;
			continue;
		}
		/* Chunks sent just before the generation may still be in flight. */
		if ((ctl_pump(&a->ctl, 0, why) < 0 && !ctl_lost(&a->ctl)) ||
		    take_resume_chunks(a, why) < 0) {
			cJSON_Delete(gen);
			return -1;
		}
		enum gen_result r = run_generation(a, gen, why);
		cJSON_Delete(gen);
		if (r == GEN_FATAL && !ctl_lost(&a->ctl))
			return -1;
		if (r == GEN_DONE) {
			/* Training finished: wait for the controller's stop. */
			while (!ctl_has(&a->ctl, SD_MSG_STOP) && !got_sigterm && !ctl_lost(&a->ctl))
				if (ctl_pump(&a->ctl, 500, why) < 0 && !ctl_lost(&a->ctl))
					return -1;
		}
		free(*why);
		*why = NULL;
	}
}

int sd_worker_agent_run(const struct sd_agent_opts *o)
{
	char *why = NULL;
	struct agent a;
	memset(&a, 0, sizeof a);
	a.server_id = o->server_id;
	a.pace = o->pace;
	a.token = o->token;
	a.pid = (long)getpid();
	const char *fail_at = getenv("SD_TEST_FAIL_RANK0_AT_STEP");
	a.fail_rank0_at = fail_at ? atol(fail_at) : 0;
	const char *sample_dir = getenv("SD_TEST_SAMPLE_LOG");
	if (sample_dir && *sample_dir) {
		char path[SD_PATH_MAX];
		snprintf(path, sizeof path, "%s/%s.samples", sample_dir, o->server_id);
		a.sample_log = fopen(path, "a");
		if (!a.sample_log)
			fprintf(stderr, "spotdeck-worker: %s: SD_TEST_SAMPLE_LOG: cannot open %s: %s\n",
			        o->server_id, path, strerror(errno));
	}
	ctl_init(&a.ctl, o->host, o->port);
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_sigterm;
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	int status = agent_start(&a, o, &why) == 0 && agent_serve(&a, &why) == 0 ? 0 : 1;
	if (status && why)
		fprintf(stderr, "spotdeck-worker: %s: %s\n", o->server_id, why);
	free(why);
	heartbeat_stop(&a.hb);
	sd_notice_watch_stop(a.watch);
	free(a.resume);
	sd_grad_sync_destroy(a.sync);
	sd_trainer_destroy(a.t);
	ctl_close(&a.ctl);
	if (a.sample_log)
		fclose(a.sample_log);
	return status;
}
