/* src/provider/launcher.c - the spotdeck-worker process on each running
 * server: started with the controller's address and token file, its output
 * in run_dir/logs/SERVER.log, stopped with SIGTERM and then SIGKILL after
 * the grace period.  Part of the fleet (fleet-internal.h). */
#include "config.h"

#include "src/provider/fleet-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/base/errors.h"
#include "src/proto/protocol.h"
#include "src/base/token.h"

int sd_fleet_running(const struct sd_fleet *f)
{
	int n = 0;
	for (const struct server *s = f->servers; s; s = s->next)
		n += fl_worker_live(s);
	return n;
}

/* A worker on another host is signalled there (provider.h, signal); the
 * local launch command ends with it. */
static void signal_worker(struct sd_fleet *f, struct server *s, int sig)
{
	if (s->remote && f->ops && f->ops->signal && f->p)
		f->ops->signal(f->p, s->id, sig);
	else
		uv_process_kill(&s->proc, sig);
}

void sd_fleet_signal_all(struct sd_fleet *f, int sig)
{
	for (struct server *s = f->servers; s; s = s->next)
		if (fl_worker_live(s))
			signal_worker(f, s, sig);
}

/* Servers stay in the list after their handles close (no close callback),
 * so the cockpit can show revoked and released ones for a while;
 * sd_fleet_free frees them once the loop has run the closes. */

void fl_launcher_server_init(struct sd_fleet *f, struct server *s)
{
	uv_timer_init(f->loop, &s->timer);
	s->timer.data = s;
	s->timer_open = 1;
}

void fl_launcher_server_done(struct server *s)
{
	if (!fl_worker_live(s) && s->timer_open) {
		s->timer_open = 0;
		uv_close((uv_handle_t *)&s->timer, NULL);
	}
}

static void worker_ended(struct sd_fleet *f, struct server *s);

static void on_escalate(uv_timer_t *t)
{
	struct server *s = t->data;
	if (!fl_worker_live(s))
		return;
	if (!s->term_sent) {
		s->term_sent = 1;
		signal_worker(s->f, s, SIGTERM);
		uv_timer_start(&s->timer, on_escalate, (uint64_t)(s->f->grace_seconds * 1000), 0);
	} else if (s->remote && s->term_sent == 1) {
		/* The host may be gone with its worker: SIGKILL there, then give
		 * up on the local ssh after another grace period. */
		s->term_sent = 2;
		signal_worker(s->f, s, SIGKILL);
		uv_timer_start(&s->timer, on_escalate, (uint64_t)(s->f->grace_seconds * 1000), 0);
	} else if (s->proc_live) {
		uv_process_kill(&s->proc, SIGKILL);
	} else {
		/* Detached, and no word from its host: given up on. */
		s->detached = 0;
		worker_ended(s->f, s);
	}
}

int fl_launcher_shutdown(struct sd_fleet *f, struct server *s)
{
	(void)f;
	if (!fl_worker_live(s))
		return 0;
	s->term_sent = 0;
	on_escalate(&s->timer);
	return 1;
}

void fl_launcher_terminate_later(struct sd_fleet *f, struct server *s)
{
	s->term_sent = 0;
	uv_timer_start(&s->timer, on_escalate, (uint64_t)(f->grace_seconds * 1000), 0);
}

static void on_proc_exit(uv_process_t *proc, int64_t status, int sig)
{
	struct server *s = proc->data;
	struct sd_fleet *f = s->f;
	s->proc_live = 0;
	if (f->closing) {
		/* Killed by fl_launcher_close: the run is over, nothing to tell. */
		uv_close((uv_handle_t *)proc, NULL);
		fl_close_proc_exited(f);
		return;
	}
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "server", s->id);
	/* A process ended by a signal has no exit status (null), not 0. */
	if (sig) {
		cJSON_AddNullToObject(ev, "exit_status");
		cJSON_AddNumberToObject(ev, "signal", sig);
	} else {
		cJSON_AddNumberToObject(ev, "exit_status", (double)status);
	}
	/* ssh's own 255: the session to the host was lost, not the worker's
	 * status.  A worker that trains runs on (in a session of its own):
	 * the server stays, and the provider probes the host; otherwise the
	 * provider probes it and stops what the session left (before the
	 * fleet gives the server back below). */
	int session_lost = s->remote && !sig && status == 255 && !s->releasing && !fl_gone(s) && f->ops->lost;
	/* Unless the session carried the worker's controller link (ssh's
	 * forward): then the worker lost its link with it and cannot train on. */
	int link_lost = session_lost && f->ops->link_in_session && f->ops->link_in_session(f->p);
	int keep = session_lost && s->st == SD_SERVER_TRAINING && !link_lost;
	/* The note says what the controller knows of the worker: one it has
	 * already dropped (a link cut silences the worker well before ssh's
	 * keep-alives end the session) is not training, though it may still
	 * run on the host and connect again. */
	if (keep)
		cJSON_AddStringToObject(ev, "note", s->worker_out ?
		                        "the ssh session ended; its worker had already left the group "
		                        "and may connect again" :
		                        "the ssh session ended; the worker trains on");
	if (link_lost && s->st == SD_SERVER_TRAINING)
		cJSON_AddStringToObject(ev, "note", "the ssh session ended, and with it the worker's controller link "
		                        "it carried: the worker is stopped");
	if (session_lost && s->st == SD_SERVER_BOOTING) {
		/* Its worker never connected: the host was not reached (a key
		 * refused, no route), and what was never used is not billed. */
		s->never_held = 1;
		cJSON_AddStringToObject(ev, "note", "the host was not reached; not billed");
	}
	struct sd_fleet_event fe = {
		.type = SD_EV_SERVER_EXIT, .server = s->id, .exit_status = sig ? -1 : (int)status, .signal = sig,
	};
	fl_emit(f, &fe, ev);
	if (session_lost)
		f->ops->lost(f->p, s->id, keep);
	uv_timer_stop(&s->timer);
	s->proc_open = 0;
	uv_close((uv_handle_t *)proc, NULL);
	if (keep && !fl_gone(s)) {
		s->detached = 1;
		return;
	}
	worker_ended(f, s);
}

void fl_launcher_worker_gone(struct sd_fleet *f, struct server *s)
{
	if (!s->detached)
		return;
	s->detached = 0;
	uv_timer_stop(&s->timer);
	/* Its host may still run it (a connection dropped, not a worker
	 * ended): the provider probes and stops it. */
	if (!s->releasing && !fl_gone(s) && f->ops && f->ops->lost && f->p)
		f->ops->lost(f->p, s->id, 0);
	worker_ended(f, s);
}

/* The worker is over: the server ends unless it was already gone. */
static void worker_ended(struct sd_fleet *f, struct server *s)
{
	if (!fl_gone(s)) {
		if (s->releasing)
			fl_released(f, s);
		else if (s->st != SD_SERVER_NOTICE && !(s->offer && f->ops && f->ops->judge && f->ops->judge(f->p, s->id)))
			fl_finish_server(f, s, SD_SERVER_FAILED);
		else if (s->st == SD_SERVER_NOTICE && !s->offer)
			fl_released(f, s);   /* a local server's cloud notice: nothing else will end it */
		/* Under notice the worker left; the machine (and its bill) lasts
		 * until the provider takes it.  So does a server its provider
		 * judges (ops->judge). */
	} else {
		fl_launcher_server_done(s);
	}
	if (!sd_fleet_running(f) && f->hooks.idle)
		f->hooks.idle(f->ctx);
}

static void on_token_written(uv_write_t *w, int status)
{
	(void)status;   /* a launch that died at once says so by its exit */
	struct server *s = w->data;
	free(s->token_line);
	s->token_line = NULL;
	if (s->pipe_open) {
		s->pipe_open = 0;
		uv_close((uv_handle_t *)&s->token_pipe, NULL);
	}
}

/* Starts the worker of s on its host through the provider's launch
 * command, the token on its stdin. */
static int spawn_remote(struct sd_fleet *f, struct server *s, char **args, int logfd, char **why)
{
	char **argv = NULL;
	if (f->ops->launch(f->p, s->id, args, &argv, why) < 0)
		return -1;
	char *token = NULL;
	char tokfile[4200];
	snprintf(tokfile, sizeof tokfile, "%s/token", f->run_dir);
	if (sd_token_read_file(tokfile, &token, why) < 0) {
		sd_argv_free(argv);
		return -1;
	}
	uv_pipe_init(f->loop, &s->token_pipe, 0);
	s->pipe_open = 1;
	uv_stdio_container_t stdio[3];
	stdio[0].flags = UV_CREATE_PIPE | UV_READABLE_PIPE;
	stdio[0].data.stream = (uv_stream_t *)&s->token_pipe;
	stdio[1].flags = UV_INHERIT_FD;
	stdio[1].data.fd = logfd;
	stdio[2].flags = UV_INHERIT_FD;
	stdio[2].data.fd = logfd;
	uv_process_options_t po;
	memset(&po, 0, sizeof po);
	po.file = argv[0];
	po.args = argv;
	po.exit_cb = on_proc_exit;
	po.stdio = stdio;
	po.stdio_count = 3;
	po.flags = UV_PROCESS_DETACHED;
	s->proc.data = s;
	int rc = uv_spawn(f->loop, &s->proc, &po);
	if (rc < 0) {
		sd_why(why, "%s: cannot start: %s", argv[0], uv_strerror(rc));
		sd_argv_free(argv);
		free(token);
		s->pipe_open = 0;
		uv_close((uv_handle_t *)&s->token_pipe, NULL);
		/* A failed uv_spawn leaves the handle in the loop's list: it is
		 * closed like any other before s can be freed. */
		uv_close((uv_handle_t *)&s->proc, NULL);
		return -1;
	}
	sd_argv_free(argv);
	size_t n = strlen(token);
	s->token_line = sd_malloc(n + 2);
	memcpy(s->token_line, token, n);
	s->token_line[n] = '\n';
	s->token_line[n + 1] = '\0';
	free(token);
	uv_buf_t b = uv_buf_init(s->token_line, (unsigned)n + 1);
	s->token_write.data = s;
	if (uv_write(&s->token_write, (uv_stream_t *)&s->token_pipe, &b, 1, on_token_written) < 0)
		on_token_written(&s->token_write, -1);
	s->remote = 1;
	return 0;
}

/* The lowest CPU slot no live local worker holds: local workers keep to
 * CPUs of their own (the worker's --cpu-slot; it checks the job's
 * pin_workers and that the slot's CPUs exist). */
static int free_cpu_slot(const struct sd_fleet *f, const struct server *self)
{
	for (int k = 0;; k++) {
		int taken = 0;
		for (const struct server *o = f->servers; o && !taken; o = o->next)
			taken = o != self && fl_worker_live(o) && !o->remote && o->cpu_slot == k;
		if (!taken)
			return k;
	}
}

int fl_launcher_spawn(struct sd_fleet *f, struct server *s, double pace, char **why)
{
	char tokfile[4200], logpath[4200], pacestr[32] = "", slotstr[16];
	snprintf(tokfile, sizeof tokfile, "%s/token", f->run_dir);
	snprintf(logpath, sizeof logpath, "%s/logs/%s.log", f->run_dir, s->id);
	int logfd = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (logfd < 0)
		return sd_why(why, "%s: %s", logpath, strerror(errno));
	char *args[14];
	int n = 0;
	args[n++] = f->worker_path;
	int remote = s->offer && f->ops && f->ops->launch && f->p;
	args[n++] = (char *)"--connect";
	args[n++] = remote ? f->advertise : f->connect;
	if (!remote) {
		args[n++] = (char *)"--token-file";
		args[n++] = tokfile;
	}
	args[n++] = (char *)"--server-id";
	args[n++] = s->id;
	if (pace > 0) {
		/* Emulated GPU: the worker runs at this fraction of its own speed. */
		snprintf(pacestr, sizeof pacestr, "%.6f", pace);
		args[n++] = (char *)"--pace";
		args[n++] = pacestr;
	}
	s->cpu_slot = -1;
	if (!remote) {
		s->cpu_slot = free_cpu_slot(f, s);
		snprintf(slotstr, sizeof slotstr, "%d", s->cpu_slot);
		args[n++] = (char *)"--cpu-slot";
		args[n++] = slotstr;
	}
	args[n] = NULL;
	if (remote) {
		/* The token travels on the launch command's stdin (spawn_remote),
		 * never on a command line. */
		int rc = spawn_remote(f, s, args, logfd, why);
		close(logfd);
		if (rc < 0)
			return -1;
		goto started;
	}
	uv_stdio_container_t stdio[3];
	stdio[0].flags = UV_IGNORE;
	stdio[1].flags = UV_INHERIT_FD;
	stdio[1].data.fd = logfd;
	stdio[2].flags = UV_INHERIT_FD;
	stdio[2].data.fd = logfd;
	uv_process_options_t po;
	memset(&po, 0, sizeof po);
	po.file = f->worker_path;
	po.args = args;
	po.exit_cb = on_proc_exit;
	po.stdio = stdio;
	po.stdio_count = 3;
	/* Its own session: a hangup of the operator's terminal must not kill
	 * the servers (the controller stops them itself, with a checkpoint). */
	po.flags = UV_PROCESS_DETACHED;
	s->proc.data = s;
	int rc = uv_spawn(f->loop, &s->proc, &po);
	close(logfd);
	if (rc < 0) {
		uv_close((uv_handle_t *)&s->proc, NULL);   /* still in the loop's list (see above) */
		return sd_why(why, "%s: cannot start: %s", f->worker_path, uv_strerror(rc));
	}
started:
	s->proc_live = 1;
	s->proc_open = 1;
	cJSON *ev = fl_server_event(f, s);
	cJSON_AddNumberToObject(ev, "pid", s->proc.pid);
	if (pacestr[0])
		cJSON_AddStringToObject(ev, "pace", pacestr);
	fl_journal(f, SD_EV_STARTED, ev);
	return 0;
}

void fl_launcher_close(struct server *s)
{
	/* A process still running is killed and waited for: its exit
	 * (on_proc_exit, which sees the fleet closing) closes its handle and
	 * may end the close, so that no child of ours outlives it (a handle
	 * closed first leaves a zombie nobody reaps). */
	if (s->proc_live && uv_process_kill(&s->proc, SIGKILL) == 0) {
		s->f->closing_procs++;
		s->proc_open = 0;
	}
	if (s->proc_open) {
		s->proc_open = 0;
		uv_close((uv_handle_t *)&s->proc, NULL);
	}
	if (s->pipe_open) {
		s->pipe_open = 0;
		uv_close((uv_handle_t *)&s->token_pipe, NULL);
	}
	if (s->timer_open) {
		s->timer_open = 0;
		uv_close((uv_handle_t *)&s->timer, NULL);
	}
}
