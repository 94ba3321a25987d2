/* src/provider/ssh/transport.c - the ssh transport (transport.h): workers
 * on other hosts started, signalled, probed and cleaned up over OpenSSH.
 *
 * The worker's launch: a local ssh(1) runs a short sh script on the host,
 * which reads the run's token from stdin (never from a command line),
 * starts spotdeck-worker in its own session (setsid: a hangup of the ssh
 * session does not reach it), records its pid and waits for it, so the
 * local ssh process lives as long as the worker and exits with its status
 * (after a failure, with the last lines of the worker's log on the host on
 * its stderr: the run's own log has them).  Unless spotdeck was given
 * --advertise (the workers then dial it themselves), that same ssh carries
 * the worker's controller link: a remote forward (-R) from a Unix socket
 * on the host, /tmp/spotdeck-TAG-SERVER-N.sock (bound by sshd as the login
 * user, mode 0600 by sshd's default StreamLocalBindMask; TAG is 64 random
 * bits, so nobody can take the name first), to the controller's listening
 * address on this machine; the worker is told --connect unix:PATH.  The
 * forward lives in the host's shared control connection, so a dead
 * connection is a dead link (the worker's socket reads EOF, the
 * controller's connection from ssh closes) and the existing liveness rules
 * follow; nothing on the host needs a route to the controller, and the
 * link is encrypted by ssh.  Signals go by that pid over ssh.
 *
 * When a worker's session ends with ssh's own status 255 (connection lost
 * or refused) while the worker trains, the fleet keeps the server (its
 * worker runs on in its own session, followed by its controller
 * connection) and the host is probed: if it answers, nothing changes; if
 * not, the server fails (or its user judges it, hooks.unreachable).  A
 * worker that was not training is given back, and the probe also stops
 * what its session left.  A host the probe cannot reach is journaled as
 * unreachable and cooled down, doubling on each further failure up to
 * 16 min, reset by a probe that reaches the host; a host wanted back
 * (hooks.back) is probed again when its cool-down ends. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "src/base/errors.h"
#include "src/provider/provider.h"
#include "src/provider/ssh/transport.h"

#define COOLDOWN_FIRST_S 30.0   /* the default of the setting cooldown_s */
#define SSH_MAX_ARGS 40

struct ssh_server {
	char id[16];
	int host;                      /* index in hosts */
	int live;                      /* acquired and not yet released */
	struct ssh_server *next;
};

struct ssh_host_state {
	double cool_until;             /* fleet clock; refused before it */
	double backoff_s;              /* the next cool-down (0: none yet) */
	int used;                      /* a control connection may exist */
	int wanted;                    /* servers it lost, to acquire again once it answers */
	int probing;                   /* a comeback probe is on its way */
	double down_since;             /* fleet clock of its first unanswered probe */
	int gone;                      /* a VM that is no more: never contacted */
	sd_ssh_ready_cb ready_cb;      /* a wait for sshd (sd_ssh_wait_ready) */
	void *ready_arg;
	double ready_until, ready_next;
};

/* PROBE_LOST: a session ended and its server is given back (the probe
 * stops what it left); PROBE_ALIVE: a session ended while its worker
 * trains on (the server stays while the host answers); PROBE_COMEBACK: a
 * host that lost servers, after its cool-down. */
enum { PROBE_LOST = 1, PROBE_COMEBACK = 2, PROBE_ALIVE = 3, PROBE_READY = 4 };

/* A background ssh (a signal, a probe, a step of the close); freed once it
 * exited and its handles closed. */
struct ssh_job {
	uv_process_t proc;
	struct sd_ssh_transport *p;
	int host;
	int probe;                     /* PROBE_LOST, PROBE_COMEBACK, PROBE_ALIVE or 0 */
	char server[16];               /* PROBE_ALIVE: whose session ended */
	uv_pipe_t err;                 /* probe: ssh's stderr, for the journal */
	int err_open, exited;
	int closing;                   /* handles still closing after a failed start */
	int64_t status;
	int sig;
	char said[512];                /* what it wrote there (the start of it) */
	size_t nsaid;
	char buf[256];
	struct ssh_job *next;
};

struct sd_ssh_transport {
	uv_loop_t *loop;
	struct sd_fleet *fleet;
	struct {
		struct sd_ssh_host *v;     /* copies (sd_ssh_host_add), their strings owned */
		int n;
	} hosts;
	struct ssh_host_state *hs;     /* one per host */
	char ssh_program[256];
	char host_key_checking[16];
	char known_hosts[4096];
	int connect_timeout;
	double cooldown_s;             /* the first cool-down */
	uv_timer_t tick;               /* each second: hosts whose cool-down ended */
	char control_dir[64];          /* "" until made */
	char tag[17];                  /* this run's remote file names */
	int direct;                    /* workers dial the controller themselves */
	char forward_to[320];          /* -R's target: the controller, "HOST:PORT" or "[V6]:PORT" */
	unsigned launches;             /* numbers each launch's forwarded socket */
	struct ssh_server *servers;
	struct ssh_job *jobs;
	int closing;                   /* the close's step (CLOSE_*); CLOSE_NONE while open */
	uv_timer_t grace;              /* a close step's limit: its ssh still running are killed */
	sd_ssh_closed_cb closed;       /* sd_ssh_transport_close's done, and its argument */
	void *closed_arg;
	char label[16];                /* its user: "ssh", or the cloud provider's name */
	struct sd_ssh_hooks hooks;
};

/* ---- running ssh ---- */

/* Single quotes for sh: 'it'\''s'.  Returns a malloc'd string. */
static char *sh_quote(const char *s)
{
	size_t n = 3;
	for (const char *c = s; *c; c++)
		n += *c == '\'' ? 4 : 1;
	char *q = sd_malloc(n), *o = q;
	*o++ = '\'';
	for (const char *c = s; *c; c++) {
		if (*c == '\'') {
			memcpy(o, "'\\''", 4);
			o += 4;
		} else {
			*o++ = *c;
		}
	}
	*o++ = '\'';
	*o = '\0';
	return q;
}

/* A path for the remote shell: quoted, except that a leading "~/" is the
 * remote user's home ("$HOME"/'rest'), as the hosts file promises. */
static char *sh_path(const char *s)
{
	if (strncmp(s, "~/", 2))
		return sh_quote(s);
	char *rest = sh_quote(s + 2);
	size_t n = strlen(rest) + 9;
	char *q = sd_malloc(n);
	snprintf(q, n, "\"$HOME\"/%s", rest);
	free(rest);
	return q;
}

static char *xstrdup(const char *s)
{
	size_t n = strlen(s) + 1;
	char *d = sd_malloc(n);
	memcpy(d, s, n);
	return d;
}

static char *xprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xprintf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	char *s = sd_malloc((size_t)n + 1);
	va_start(ap, fmt);
	vsnprintf(s, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return s;
}

/* argv of `ssh OPTIONS [EXTRA] -- HOST` into a (malloc'd strings; extra:
 * more options, NULL-terminated, or NULL); returns the count. */
static int ssh_argv(struct sd_ssh_transport *p, int hi, char **a, const char *const *extra)
{
	const struct sd_ssh_host *h = &p->hosts.v[hi];
	int n = 0;
	a[n++] = xstrdup(p->ssh_program);
	a[n++] = xstrdup("-o");
	a[n++] = xstrdup("BatchMode=yes");
	a[n++] = xstrdup("-o");
	a[n++] = xprintf("ConnectTimeout=%d", p->connect_timeout);
	a[n++] = xstrdup("-o");
	a[n++] = xstrdup("ServerAliveInterval=5");
	a[n++] = xstrdup("-o");
	a[n++] = xstrdup("ServerAliveCountMax=3");
	a[n++] = xstrdup("-o");
	a[n++] = xprintf("StrictHostKeyChecking=%s", p->host_key_checking);
	if (p->known_hosts[0]) {
		a[n++] = xstrdup("-o");
		a[n++] = xprintf("UserKnownHostsFile=%s", p->known_hosts);
	}
	if (p->control_dir[0]) {
		a[n++] = xstrdup("-o");
		a[n++] = xstrdup("ControlMaster=auto");
		a[n++] = xstrdup("-o");
		a[n++] = xprintf("ControlPath=%s/%%C", p->control_dir);
		a[n++] = xstrdup("-o");
		a[n++] = xstrdup("ControlPersist=60");
	}
	if (h->identity) {
		a[n++] = xstrdup("-i");
		a[n++] = xstrdup(h->identity);
		a[n++] = xstrdup("-o");
		a[n++] = xstrdup("IdentitiesOnly=yes");
	}
	a[n++] = xstrdup("-p");
	a[n++] = xprintf("%d", h->port);
	if (h->user) {
		a[n++] = xstrdup("-l");
		a[n++] = xstrdup(h->user);
	}
	for (int i = 0; extra && extra[i]; i++)
		a[n++] = xstrdup(extra[i]);
	a[n++] = xstrdup("--");
	a[n++] = xstrdup(h->host);
	p->hs[hi].used = 1;
	return n;
}

static struct ssh_server *find_server(const struct sd_ssh_transport *p, const char *id)
{
	for (struct ssh_server *s = p->servers; s; s = s->next)
		if (!strcmp(s->id, id))
			return s;
	return NULL;
}

/* The remote directory of this run's files on a host: the token never
 * lands there (it stays in the worker's environment); the pid and the
 * worker's own log do. */
static char *remote_dir(const struct sd_ssh_transport *p)
{
	return xprintf("\"${TMPDIR:-/tmp}/spotdeck-$(id -u)-%s\"", p->tag);
}

/* The remote sh line that sends signal `name` to server's worker by its
 * pid file, if there is one (malloc'd; ends in "; "). */
static char *kill_line(const struct sd_ssh_transport *p, const char *server, const char *name)
{
	char *dir = remote_dir(p), *qid = sh_quote(server);
	char *line = xprintf("f=%s/%s.pid; test -r \"$f\" && kill -%s \"$(cat \"$f\")\" 2>/dev/null; ", dir, qid, name);
	free(dir);
	free(qid);
	return line;
}

static void cool_down(struct sd_ssh_transport *p, int hi, const char *why, const char *said)
{
	struct ssh_host_state *st = &p->hs[hi];
	double now = sd_fleet_now(p->fleet);
	st->backoff_s = st->backoff_s > 0 ? fmin(SD_SSH_COOLDOWN_MAX_S, 2 * st->backoff_s) : p->cooldown_s;
	st->cool_until = now + st->backoff_s;
	if (st->down_since <= 0)
		st->down_since = now;
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "provider", p->label);
	cJSON_AddStringToObject(ev, "host", p->hosts.v[hi].name);
	if (p->hosts.v[hi].offer)
		cJSON_AddStringToObject(ev, "offer", p->hosts.v[hi].offer);
	cJSON_AddStringToObject(ev, "reason", why);
	if (said && said[0])
		cJSON_AddStringToObject(ev, "ssh", said);   /* ssh's own words */
	cJSON_AddNumberToObject(ev, "cooldown_s", st->backoff_s);
	sd_fleet_journal(p->fleet, SD_EV_HOST_UNREACHABLE, ev);
}

/* A host wanted back answers ssh: its user acquires its servers again
 * (hooks.back). */
static void host_back(struct sd_ssh_transport *p, int hi)
{
	struct ssh_host_state *st = &p->hs[hi];
	int n = st->wanted;
	double down_s = st->down_since > 0 ? sd_fleet_now(p->fleet) - st->down_since : 0;
	st->wanted = 0;
	st->backoff_s = 0;
	st->cool_until = 0;
	st->down_since = 0;
	p->hooks.back(p->hooks.ctx, hi, n, down_s);
}

static void close_next(struct sd_ssh_transport *p);

static void on_job_closed(uv_handle_t *h)
{
	free(h->data);
}

static void on_job_half_closed(uv_handle_t *h)
{
	struct ssh_job *j = h->data;
	if (--j->closing == 0)
		free(j);
}

static void on_err_closed(uv_handle_t *h)
{
	struct ssh_job *j = h->data;
	j->err_open = 0;
	if (j->exited)
		uv_close((uv_handle_t *)&j->proc, on_job_closed);
}

/* Both the process and its stderr are done: act on the probe. */
static void job_done(struct ssh_job *j)
{
	struct sd_ssh_transport *p = j->p;
	if (p) {
		for (struct ssh_job **pp = &p->jobs; *pp; pp = &(*pp)->next)
			if (*pp == j) {
				*pp = j->next;
				break;
			}
		if (j->probe && !p->closing) {
			/* ssh's last line, e.g. "root@198.18.0.14: Permission denied
			 * (publickey)." or "... Connection timed out". */
			j->said[j->nsaid] = '\0';
			char *end = j->said + strlen(j->said);
			while (end > j->said && (end[-1] == '\n' || end[-1] == '\r'))
				*--end = '\0';
			char *last = strrchr(j->said, '\n');
			last = last ? last + 1 : j->said;
			for (char *c = last; *c; c++)
				if ((unsigned char)*c < 0x20)
					*c = ' ';
			struct ssh_host_state *st = &p->hs[j->host];
			int answered = j->status != 255 && !j->sig;
			if (j->probe == PROBE_READY) {
				st->probing = 0;
				sd_ssh_ready_cb cb = st->ready_cb;
				double now = sd_fleet_now(p->fleet);
				if (cb && (answered || now >= st->ready_until)) {
					st->ready_cb = NULL;
					cb(st->ready_arg, j->host, answered, answered ? "" : last);
				} else {
					st->ready_next = now + 2.0;
				}
			} else if (j->probe == PROBE_LOST) {
				/* Its server is given back: the host is wanted back,
				 * if its user wants hosts back (a cloud's VM is
				 * replaced instead). */
				if (p->hooks.back && st->wanted < p->hosts.v[j->host].slots)
					st->wanted++;
				if (answered)
					st->backoff_s = 0;
				else
					cool_down(p, j->host, "the worker's ssh session was lost and ssh cannot get "
					          "into the host", last);
			} else if (j->probe == PROBE_ALIVE) {
				struct ssh_server *s = find_server(p, j->server);
				if (answered) {
					st->backoff_s = 0;
				} else if (s && s->live) {
					/* The worker trains on where nothing can reach it
					 * any more: the server fails (the controller stops
					 * the worker through its connection), and the host
					 * is wanted back (a cloud's VM is deleted instead). */
					if (p->hooks.back && st->wanted < p->hosts.v[j->host].slots)
						st->wanted++;
					s->live = 0;
					char msg[700];
					snprintf(msg, sizeof msg, "host %s cannot be reached over ssh: %s", p->hosts.v[j->host].name,
					         last[0] ? last : "no answer");
					struct sd_provider_event ev = {
						.kind = SD_PROVIDER_FAILED,
						.server = s->id,
						.time = sd_fleet_now(p->fleet),
						.code = "HOST_UNREACHABLE",
						.message = msg,
					};
					/* With the unreachable hook the cloud provider says
					 * whether the VM was preempted. */
					if (!p->hooks.unreachable)
						sd_fleet_report(p->fleet, &ev);
					cool_down(p, j->host, "the worker's ssh session was lost and ssh cannot get "
					          "into the host", last);
					if (p->hooks.unreachable)
						p->hooks.unreachable(p->hooks.ctx, s->id, msg);
					else if (p->hooks.failed)
						p->hooks.failed(p->hooks.ctx, s->id);
				}
			} else {
				st->probing = 0;
				if (answered)
					host_back(p, j->host);
				else
					cool_down(p, j->host, "the host still cannot be reached over ssh", last);
			}
		}
	}
	if (j->err_open)
		uv_close((uv_handle_t *)&j->err, on_err_closed);
	else
		uv_close((uv_handle_t *)&j->proc, on_job_closed);
	/* The close's step waited for this one: the next step, if it was the
	 * last. */
	if (p && p->closing && !p->jobs)
		close_next(p);
}

static void on_err_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
	struct ssh_job *j = h->data;
	(void)suggested;
	*b = uv_buf_init(j->buf, sizeof j->buf);
}

static void on_err_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b)
{
	struct ssh_job *j = st->data;
	if (n > 0) {
		size_t k = fmin((double)n, (double)(sizeof j->said - 1 - j->nsaid));
		memcpy(j->said + j->nsaid, b->base, k);
		j->nsaid += k;
		return;
	}
	if (n < 0) {
		uv_read_stop(st);
		j->err_open = 2;   /* read to the end */
		if (j->exited)
			job_done(j);
	}
}

static void on_job_exit(uv_process_t *proc, int64_t status, int sig)
{
	struct ssh_job *j = proc->data;
	j->exited = 1;
	j->status = status;
	j->sig = sig;
	if (j->closing)
		return;   /* its handles are closing already (a failed start) */
	/* No stderr pipe, or it ended already; while the transport closes,
	 * nobody reads what ssh said, and a process ssh left behind (a
	 * master going to the background) may hold the pipe open. */
	if (j->err_open != 1 || (j->p && j->p->closing))
		job_done(j);
}

/* Runs `ssh [EXTRA] HOST [REMOTE]` in the background (extra: options,
 * NULL-terminated, or NULL; remote: the remote command line, or NULL for
 * none, as with -O exit); its exit is only looked at for probes and by the
 * close's steps.  Returns its job (owned by p), or NULL if ssh could not
 * be started (nothing follows). */
static struct ssh_job *run_ssh(struct sd_ssh_transport *p, int hi, const char *const *extra, const char *remote,
                              int probe)
{
	char *a[SSH_MAX_ARGS + 2];
	int n = ssh_argv(p, hi, a, extra);
	if (remote)
		a[n++] = xstrdup(remote);
	a[n] = NULL;
	struct ssh_job *j = sd_calloc(1, sizeof *j);
	j->p = p;
	j->host = hi;
	j->probe = probe;
	j->proc.data = j;
	uv_stdio_container_t stdio[3] = { { .flags = UV_IGNORE }, { .flags = UV_IGNORE },
	                                  { .flags = UV_IGNORE } };
	uv_pipe_init(p->loop, &j->err, 0);
	j->err.data = j;
	stdio[2].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
	stdio[2].data.stream = (uv_stream_t *)&j->err;
	uv_process_options_t po;
	memset(&po, 0, sizeof po);
	po.file = a[0];
	po.args = a;
	po.exit_cb = on_job_exit;
	po.stdio = stdio;
	po.stdio_count = 3;
	int rc = uv_spawn(p->loop, &j->proc, &po);
	for (int i = 0; i < n; i++)
		free(a[i]);
	if (rc < 0) {
		/* The pipe was opened, and a failed uv_spawn leaves the process
		 * handle in the loop's list: close both, free j after both. */
		j->proc.data = j;
		j->closing = 2;
		uv_close((uv_handle_t *)&j->err, on_job_half_closed);
		uv_close((uv_handle_t *)&j->proc, on_job_half_closed);
		return NULL;
	}
	j->err_open = 1;
	uv_read_start((uv_stream_t *)&j->err, on_err_alloc, on_err_read);
	j->next = p->jobs;
	p->jobs = j;
	return j;
}

static struct ssh_job *run_remote(struct sd_ssh_transport *p, int hi, const char *remote, int probe)
{
	return run_ssh(p, hi, NULL, remote, probe);
}

/* Each second: a host that lost servers and whose cool-down ended is
 * probed again (the probe's end acts: host_back or a longer cool-down). */
static void on_tick(uv_timer_t *t)
{
	struct sd_ssh_transport *p = t->data;
	if (p->closing)
		return;
	double now = sd_fleet_now(p->fleet);
	for (int i = 0; i < p->hosts.n; i++) {
		struct ssh_host_state *st = &p->hs[i];
		if (st->ready_cb && !st->probing && !st->gone && now >= st->ready_next) {
			st->probing = 1;
			if (!run_remote(p, i, "true", PROBE_READY)) {
				st->probing = 0;
				sd_ssh_ready_cb cb = st->ready_cb;
				st->ready_cb = NULL;
				cb(st->ready_arg, i, 0, "ssh could not be started");
			}
			continue;
		}
		if (st->wanted > 0 && !st->probing && now >= st->cool_until) {
			st->probing = 1;
			/* The probe also stops what the lost sessions left running
			 * (their workers are in sessions of their own): the servers
			 * given back have pid files there only if so. */
			char *cmd = xstrdup("");
			for (const struct ssh_server *v = p->servers; v; v = v->next)
				if (v->host == i && !v->live) {
					char *line = kill_line(p, v->id, "TERM"), *more = xprintf("%s%s", cmd, line);
					free(line);
					free(cmd);
					cmd = more;
				}
			char *all = xprintf("%sexit 0", cmd);
			free(cmd);
			cmd = all;
			struct ssh_job *j = run_remote(p, i, cmd, PROBE_COMEBACK);
			free(cmd);
			if (!j) {
				st->probing = 0;
				cool_down(p, i, "ssh could not be started", p->ssh_program);
			}
		}
	}
}

/* ---- the transport ---- */

/* The settings ssh itself reads, the run's tag, the control directory, the
 * forward's target, the tick and the close's grace timer. */
static void ssh_open(struct sd_ssh_transport *p, const struct sd_provider_env *env)
{
	const cJSON *s = env->settings;
	p->direct = env->direct || !env->connect || !env->connect[0];
	if (!p->direct) {
		/* ssh's -R takes an IPv6 host in brackets; the controller's
		 * connect address has none (the worker splits at the last ':'). */
		const char *c = env->connect, *colon = strrchr(c, ':');
		if (memchr(c, ':', (size_t)(colon - c)))
			snprintf(p->forward_to, sizeof p->forward_to, "[%.*s]%s", (int)(colon - c), c, colon);
		else
			snprintf(p->forward_to, sizeof p->forward_to, "%s", c);
	}
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, "host_key_checking");
	snprintf(p->host_key_checking, sizeof p->host_key_checking, "%s",
	         cJSON_IsString(v) ? v->valuestring : "accept-new");
	v = cJSON_GetObjectItemCaseSensitive(s, "known_hosts");
	if (cJSON_IsString(v))
		snprintf(p->known_hosts, sizeof p->known_hosts, "%s", v->valuestring);
	v = cJSON_GetObjectItemCaseSensitive(s, "connect_timeout");
	p->connect_timeout = cJSON_IsNumber(v) ? (int)v->valuedouble : 10;
	v = cJSON_GetObjectItemCaseSensitive(s, "cooldown_s");
	p->cooldown_s = cJSON_IsNumber(v) ? v->valuedouble : COOLDOWN_FIRST_S;
	v = cJSON_GetObjectItemCaseSensitive(s, "ssh");
	snprintf(p->ssh_program, sizeof p->ssh_program, "%s", cJSON_IsString(v) ? v->valuestring : "ssh");
	p->hs = sd_calloc((size_t)p->hosts.n, sizeof *p->hs);
	unsigned char r[8];
	if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
		memset(r, 0, sizeof r);
	for (int i = 0; i < 8; i++)
		snprintf(p->tag + 2 * i, 3, "%02x", r[i]);
	/* ControlPath must fit a Unix socket path (108 bytes): a short private
	 * directory of its own rather than one under the run directory. */
	snprintf(p->control_dir, sizeof p->control_dir, "/tmp/spotdeck-ssh.XXXXXX");
	if (!mkdtemp(p->control_dir))
		p->control_dir[0] = '\0';   /* no shared connection: each ssh its own */
	uv_timer_init(p->loop, &p->tick);
	p->tick.data = p;
	uv_timer_start(&p->tick, on_tick, 1000, 1000);
	uv_unref((uv_handle_t *)&p->tick);   /* it never keeps the loop alive */
	uv_timer_init(p->loop, &p->grace);
	p->grace.data = p;
}

int sd_ssh_launch(struct sd_ssh_transport *p, const char *server, char *const *worker_argv, char ***argv,
                      char **why)
{
	*argv = NULL;
	if (p->closing)
		return sd_why(why, "%s: the ssh transport is closing", server);
	struct ssh_server *s = find_server(p, server);
	if (!s || !s->live)
		return sd_why(why, "%s: not a server of the ssh provider", server);
	const struct sd_ssh_host *h = &p->hosts.v[s->host];
	/* The controller link through this ssh: a socket of this launch's own
	 * (a forward lives as long as the host's control connection, and sshd
	 * does not remove its socket file, so a name is never used twice). */
	char sock[108] = "", fwd[sizeof sock + sizeof p->forward_to + 2] = "", conn[sizeof sock + 8] = "";
	if (!p->direct) {
		snprintf(sock, sizeof sock, "/tmp/spotdeck-%s-%s-%u.sock", p->tag, server, ++p->launches);
		snprintf(fwd, sizeof fwd, "%s:%s", sock, p->forward_to);
		snprintf(conn, sizeof conn, "unix:%s", sock);
	}
	/* The worker's command line, its program replaced by the host's (and
	 * its controller by the forward's socket). */
	char *qw = sh_path(h->worker), *qname = sh_quote(h->name), *qcomm = sh_quote(h->comm_host);
	char *qsock = sh_quote(sock);
	size_t cap = 256 + strlen(conn) * 4;
	for (int i = 1; worker_argv[i]; i++)
		cap += strlen(worker_argv[i]) * 4 + 3;
	char *args = sd_malloc(cap);
	args[0] = '\0';
	for (int i = 1; worker_argv[i]; i++) {
		int forwarded = conn[0] && i > 1 && !strcmp(worker_argv[i - 1], "--connect");
		char *q = sh_quote(forwarded ? conn : worker_argv[i]);
		strcat(args, " ");
		strcat(args, q);
		free(q);
	}
	char *dir = remote_dir(p);
	char *qid = sh_quote(server);
	/* The token arrives on stdin, goes into the worker's environment (its
	 * /proc/PID/environ is its owner's alone), never on a command line. */
	char *script = xprintf(
		"umask 077; d=%s; mkdir -p \"$d\" || exit 1; "
		"if ! command -v %s >/dev/null 2>&1; then "
		"printf 'spotdeck: host %%s: %%s: no such program (%s)\\n' %s %s >&2; exit 127; fi; "
		"IFS= read -r SPOTDECK_TOKEN || { echo 'spotdeck: no token on stdin' >&2; exit 1; }; "
		"export SPOTDECK_TOKEN; SPOTDECK_COMM_HOST=%s; export SPOTDECK_COMM_HOST; "
		"setsid %s%s </dev/null >>\"$d/\"%s.log 2>&1 & "
		"pid=$!; echo $pid >\"$d/\"%s.pid; unset SPOTDECK_TOKEN; wait $pid; st=$?; "
		"rm -f \"$d/\"%s.pid %s; [ $st -eq 0 ] || tail -n 5 \"$d/\"%s.log >&2; exit $st",
		dir, qw, p->hooks.worker_setting ? p->hooks.worker_setting : "provider.worker in the job file", qname, qw,
		qcomm, qw, args, qid, qid, qid, sock[0] ? qsock : "", qid);
	free(qsock);
	free(qw);
	free(qname);
	free(qcomm);
	free(args);
	free(dir);
	free(qid);
	/* A forward that cannot be made ends the launch (ssh exits 255 with
	 * its reason): a worker without it could reach nothing. */
	const char *const forward[] = { "-o", "ExitOnForwardFailure=yes", "-R", fwd, NULL };
	char **a = sd_calloc(SSH_MAX_ARGS + 2, sizeof *a);
	int n = ssh_argv(p, s->host, a, fwd[0] ? forward : NULL);
	a[n++] = script;
	a[n] = NULL;
	*argv = a;
	return 0;
}

/* Sends signal `name` to the worker of server on its host, by its pid file;
 * probe: journal the host if ssh cannot get in. */
static void kill_remote(struct sd_ssh_transport *p, const char *server, const char *name, int probe)
{
	struct ssh_server *s = find_server(p, server);
	if (!s || p->hs[s->host].gone || p->closing)
		return;
	char *line = kill_line(p, server, name), *cmd = xprintf("%sexit 0", line);
	run_remote(p, s->host, cmd, probe);
	free(cmd);
	free(line);
}

void sd_ssh_signal(struct sd_ssh_transport *p, const char *server, int sig)
{
	kill_remote(p, server, sig == SIGKILL ? "KILL" : sig == SIGINT ? "INT" : "TERM", 0);
}

void sd_ssh_lost(struct sd_ssh_transport *p, const char *server, int worker_alive)
{
	if (!worker_alive) {
		/* The session is gone: is the host?  A probe that also stops a
		 * worker the lost session may have left behind. */
		kill_remote(p, server, "TERM", PROBE_LOST);
		return;
	}
	/* Its worker trains on: only ask whether the host still answers. */
	struct ssh_server *s = find_server(p, server);
	struct ssh_job *j = s && !p->hs[s->host].gone && !p->closing ? run_remote(p, s->host, "true", PROBE_ALIVE) : NULL;
	if (j)
		snprintf(j->server, sizeof j->server, "%s", server);
}

int sd_ssh_link_in_session(const struct sd_ssh_transport *p)
{
	return !p->direct;
}

void sd_ssh_release(struct sd_ssh_transport *p, const char *server)
{
	struct ssh_server *s = find_server(p, server);
	if (s)
		s->live = 0;
}

/* The most each step of the close waits for its ssh before killing them.
 * Over live shared connections each takes milliseconds; 3 s was too short
 * once on a 2-core machine at load 7 (a host's directory stayed).  The
 * environment's SPOTDECK_SSH_CLOSE_WAIT_S (seconds, 0.1 to 60) replaces
 * it, for tests. */
#define CLOSE_WAIT_S 10.0

/* The close's steps, in order: signals still on their way are delivered
 * (and probes nobody will read are ended); the run's directory on each
 * host goes; the shared connections end; done. */
enum { CLOSE_NONE, CLOSE_SIGNALS, CLOSE_CLEAN, CLOSE_MASTERS, CLOSE_DONE };

static double close_wait_s(void)
{
	const char *e = getenv("SPOTDECK_SSH_CLOSE_WAIT_S");
	char *end;
	double v = e && e[0] ? strtod(e, &end) : NAN;
	return e && e[0] && !*end && v >= 0.1 && v <= 60 ? v : CLOSE_WAIT_S;
}

/* A step's grace period is over: its ssh still running are killed, and
 * their exits (which follow at once) end the step. */
static void on_grace(uv_timer_t *t)
{
	struct sd_ssh_transport *p = t->data;
	for (struct ssh_job *j = p->jobs; j; j = j->next)
		if (!j->exited)
			uv_process_kill(&j->proc, SIGKILL);
}

/* Starts ssh on every host used (extra: options, before the host; command:
 * the remote command line or NULL; a host cooling down is skipped when a
 * command is given, a host that is gone always). */
static void on_used_hosts(struct sd_ssh_transport *p, const char *const *extra, const char *command)
{
	double now = sd_fleet_now(p->fleet);
	for (int i = 0; i < p->hosts.n; i++)
		if (p->hs[i].used && !p->hs[i].gone && !(command && p->hs[i].cool_until > now))
			run_ssh(p, i, extra, command, 0);
}

/* The run is over: its directory on each host goes (the workers' logs; a
 * failed worker's last lines are in the run's own log already).  A host
 * whose signal was still on its way when the grace period ended (a loaded
 * host, slow logins) is not skipped: the same line first sends SIGTERM to
 * every worker whose pid file is left, so none outlives the run, and then
 * the directory goes. */
static void clean_hosts(struct sd_ssh_transport *p)
{
	char *dir = remote_dir(p);
	char *rm = xprintf("d=%s; for f in \"$d\"/*.pid; do test -r \"$f\" && kill -TERM \"$(cat \"$f\")\" "
	                   "2>/dev/null; done; rm -rf \"$d\" /tmp/spotdeck-%s-*.sock", dir, p->tag);
	on_used_hosts(p, NULL, rm);
	free(rm);
	free(dir);
}

/* Goes on to the close's next step once the ssh of this one have all
 * exited (p->jobs is empty): starts its ssh under the grace period, or
 * moves on again when it has none; after the last, the done callback.
 * The shared connections end (`ssh -O exit`) before done, so that
 * transport_free removes no socket of a live master: a master whose
 * socket went first would linger for ControlPersist (60 s). */
static void close_next(struct sd_ssh_transport *p)
{
	static const char *const exit_master[] = { "-O", "exit", NULL };
	while (!p->jobs && p->closing < CLOSE_DONE) {
		uv_timer_stop(&p->grace);
		p->closing++;
		if (p->closing == CLOSE_CLEAN)
			clean_hosts(p);
		else if (p->closing == CLOSE_MASTERS && p->control_dir[0])
			on_used_hosts(p, exit_master, NULL);
		if (p->jobs)
			uv_timer_start(&p->grace, on_grace, (uint64_t)(close_wait_s() * 1000), 0);
	}
	if (p->closing == CLOSE_DONE && !p->jobs && p->closed) {
		sd_ssh_closed_cb cb = p->closed;
		p->closed = NULL;
		uv_close((uv_handle_t *)&p->grace, NULL);
		cb(p->closed_arg);
	}
}

void sd_ssh_transport_close(struct sd_ssh_transport *p, sd_ssh_closed_cb done, void *arg)
{
	p->closing = CLOSE_SIGNALS;
	p->closed = done;
	p->closed_arg = arg;
	uv_timer_stop(&p->tick);
	uv_close((uv_handle_t *)&p->tick, NULL);
	/* A probe's answer is read by nobody now: it ends.  A signal's ssh
	 * runs on to deliver it (it reads the pid files the run's directory
	 * holds), under the grace period. */
	for (struct ssh_job *j = p->jobs; j; j = j->next)
		if (j->probe && !j->exited)
			uv_process_kill(&j->proc, SIGTERM);
	if (p->jobs)
		uv_timer_start(&p->grace, on_grace, (uint64_t)(close_wait_s() * 1000), 0);
	else
		close_next(p);
}

void sd_ssh_transport_free(struct sd_ssh_transport *p)
{
	if (!p)
		return;
	if (p->control_dir[0]) {
		/* Sockets of masters that are still going away are unlinked (a
		 * master that outlives them exits by ControlPersist): the
		 * directory is ours alone. */
		DIR *d = opendir(p->control_dir);
		for (struct dirent *e; d && (e = readdir(d));)
			if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
				unlinkat(dirfd(d), e->d_name, 0);
		if (d)
			closedir(d);
		rmdir(p->control_dir);
	}
	while (p->servers) {
		struct ssh_server *n = p->servers->next;
		free(p->servers);
		p->servers = n;
	}
	for (int i = 0; i < p->hosts.n; i++) {
		struct sd_ssh_host *h = &p->hosts.v[i];
		free((char *)h->name);
		free((char *)h->host);
		free((char *)h->user);
		free((char *)h->identity);
		free((char *)h->worker);
		free((char *)h->comm_host);
		free((char *)h->offer);
	}
	free(p->hosts.v);
	free(p->hs);
	free(p);
}

int sd_ssh_transport_create(struct sd_ssh_transport **out, const struct sd_provider_env *env, const char *label,
                            const struct sd_ssh_hooks *hooks, char **why)
{
	(void)why;
	struct sd_ssh_transport *p = sd_calloc(1, sizeof *p);
	p->loop = env->loop;
	p->fleet = env->fleet;
	snprintf(p->label, sizeof p->label, "%s", label);
	if (hooks)
		p->hooks = *hooks;
	ssh_open(p, env);
	*out = p;
	return 0;
}

static void *grow(void *v, size_t bytes)
{
	void *n = realloc(v, bytes);
	if (!n)
		sd_oom();
	return n;
}

static char *dup_or_null(const char *s)
{
	return s ? xstrdup(s) : NULL;
}

int sd_ssh_host_add(struct sd_ssh_transport *p, const struct sd_ssh_host *h)
{
	int i = p->hosts.n;
	p->hosts.v = grow(p->hosts.v, (size_t)(i + 1) * sizeof *p->hosts.v);
	p->hs = grow(p->hs, (size_t)(i + 1) * sizeof *p->hs);
	memset(&p->hs[i], 0, sizeof p->hs[i]);
	struct sd_ssh_host *d = &p->hosts.v[i];
	d->name = xstrdup(h->name);
	d->host = xstrdup(h->host);
	d->user = dup_or_null(h->user);
	d->identity = dup_or_null(h->identity);
	d->worker = xstrdup(h->worker ? h->worker : "spotdeck-worker");
	d->comm_host = xstrdup(h->comm_host ? h->comm_host : h->host);
	d->offer = dup_or_null(h->offer);
	d->port = h->port > 0 ? h->port : 22;
	d->slots = h->slots > 0 ? h->slots : 1;
	p->hosts.n = i + 1;
	return i;
}

void sd_ssh_attach(struct sd_ssh_transport *p, const char *server, int host)
{
	struct ssh_server *s = find_server(p, server);
	if (!s) {
		s = sd_calloc(1, sizeof *s);
		snprintf(s->id, sizeof s->id, "%s", server);
		s->next = p->servers;
		p->servers = s;
	}
	s->host = host;
	s->live = 1;
}

void sd_ssh_host_gone(struct sd_ssh_transport *p, int host)
{
	if (host >= 0 && host < p->hosts.n) {
		p->hs[host].gone = 1;
		p->hs[host].ready_cb = NULL;
	}
}

int sd_ssh_host_live(const struct sd_ssh_transport *p, int host)
{
	int n = 0;
	for (const struct ssh_server *s = p->servers; s; s = s->next)
		n += s->live && s->host == host;
	return n;
}

double sd_ssh_host_cool_until(const struct sd_ssh_transport *p, int host)
{
	return p->hs[host].cool_until;
}

void sd_ssh_wait_ready(struct sd_ssh_transport *p, int host, double timeout_s, sd_ssh_ready_cb done, void *arg)
{
	struct ssh_host_state *st = &p->hs[host];
	double now = sd_fleet_now(p->fleet);
	st->ready_cb = done;
	st->ready_arg = arg;
	st->ready_until = now + timeout_s;
	st->ready_next = now;
}
