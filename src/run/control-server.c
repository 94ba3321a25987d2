/* src/run/control-server.c - see control-server.h. */
#include "config.h"

#include "src/run/control-server.h"

#include <errno.h>
#include <stdarg.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "src/base/errors.h"
#include "src/run/control-proto.h"
#include "src/base/line-reader.h"

/* One line queued to one or more clients: written by each, freed by the last. */
struct wbuf {
	int refs;
	size_t len;
	char data[];
};

struct wreq {
	uv_write_t req;
	struct wbuf *b;
};

struct client {
	uv_pipe_t pipe;
	struct sd_control_server *s;
	struct client *next;
	struct sd_line_reader rd;
	int hello;                  /* its hello arrived */
	enum sd_control_want want;
	int read_only;
	int live;                   /* gets events (and status, for a cockpit) */
	int gone;                   /* hung up or hanging up: not counted, sent nothing */
	int closing;                /* uv_close called */
	uv_shutdown_t shutdown;
	long uid, pid;              /* the peer, for the log */
};

struct sd_control_server {
	uv_loop_t *loop;
	uv_pipe_t listener;
	uv_timer_t tick;
	struct sd_control_server_opts o;
	char job[128];
	char path[sizeof ((struct sockaddr_un *)0)->sun_path];
	char run_dir[PATH_MAX];
	char started[32];
	struct client *clients;     /* every client until its handle is closed */
	int nclients;               /* attached: live and not gone */
	int pending_handles;        /* listener, tick, clients not closed yet */
	int closed;
	int ended;
	size_t queue_max;           /* SD_CONTROL_QUEUE_MAX, or the environment's */
};

static void maybe_free(struct sd_control_server *s)
{
	if (s->closed && s->pending_handles == 0)
		free(s);
}

static void log_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The control socket's own lines in spotdeck.log (stderr of the run). */
static void log_line(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("spotdeck: control: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static struct wbuf *wbuf_from(const cJSON *obj)
{
	size_t len;
	char *line = sd_control_line(obj, &len);
	if (!line)
		return NULL;
	struct wbuf *b = malloc(sizeof *b + len);
	if (b) {
		b->refs = 1;
		b->len = len;
		memcpy(b->data, line, len);
	}
	free(line);
	return b;
}

static void wbuf_unref(struct wbuf *b)
{
	if (b && --b->refs == 0)
		free(b);
}

static void on_client_closed(uv_handle_t *h)
{
	struct client *cl = h->data;
	struct sd_control_server *s = cl->s;
	for (struct client **p = &s->clients; *p; p = &(*p)->next) {
		if (*p == cl) {
			*p = cl->next;
			break;
		}
	}
	sd_line_reader_free(&cl->rd);
	free(cl);
	s->pending_handles--;
	maybe_free(s);
}

/* cl stops counting as attached. */
static void client_gone(struct client *cl)
{
	if (cl->gone)
		return;
	cl->gone = 1;
	struct sd_control_server *s = cl->s;
	if (!cl->live)
		return;
	s->nclients--;
	if (!s->closed && !s->ended)
		log_line("client pid %ld left; %d attached", cl->pid, s->nclients);
	if (s->o.clients_changed && !s->closed)
		s->o.clients_changed(s->o.ctx, s->nclients);
}

static void client_close(struct client *cl)
{
	client_gone(cl);
	if (cl->closing)
		return;
	cl->closing = 1;
	uv_close((uv_handle_t *)&cl->pipe, on_client_closed);
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
	(void)status;
	client_close(req->data);
}

/* Hangs up once what is queued to cl is written. */
static void client_hang_up(struct client *cl)
{
	if (cl->gone)
		return;
	client_gone(cl);
	uv_read_stop((uv_stream_t *)&cl->pipe);
	cl->shutdown.data = cl;
	if (uv_shutdown(&cl->shutdown, (uv_stream_t *)&cl->pipe, on_shutdown) < 0)
		client_close(cl);
}

static void on_written(uv_write_t *req, int status)
{
	struct wreq *w = (struct wreq *)req;
	wbuf_unref(w->b);
	free(w);
	(void)status;
}

static void send_buf(struct client *cl, struct wbuf *b)
{
	if (cl->gone || !b)
		return;
	uv_stream_t *st = (uv_stream_t *)&cl->pipe;
	if (uv_stream_get_write_queue_size(st) + b->len > cl->s->queue_max) {
		log_line("client pid %ld dropped: it reads too slowly (%zu bytes queued)", cl->pid,
		         uv_stream_get_write_queue_size(st));
		client_close(cl);
		return;
	}
	struct wreq *w = malloc(sizeof *w);
	if (!w)
		return;
	w->b = b;
	b->refs++;
	uv_buf_t ub = uv_buf_init(b->data, (unsigned)b->len);
	if (uv_write(&w->req, st, &ub, 1, on_written) < 0) {
		wbuf_unref(b);
		free(w);
		client_close(cl);
	}
}

static void send_obj(struct client *cl, cJSON *obj)
{
	struct wbuf *b = wbuf_from(obj);
	send_buf(cl, b);
	wbuf_unref(b);
	cJSON_Delete(obj);
}

/* Sends {"type":"error","error":why} and hangs up after it. */
static void client_error(struct client *cl, const char *why)
{
	log_line("client pid %ld: %s; hung up", cl->pid, why);
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "type", "error");
	cJSON_AddStringToObject(o, "error", why);
	send_obj(cl, o);
	client_hang_up(cl);
}

static cJSON *hello_obj(struct sd_control_server *s, int read_only)
{
	struct sd_control_summary sum = { 0 };
	s->o.summary(s->o.ctx, &sum);
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "type", "hello");
	cJSON_AddNumberToObject(o, "protocol", SD_CONTROL_PROTOCOL);
	cJSON_AddNumberToObject(o, "pid", (double)getpid());
	cJSON_AddStringToObject(o, "run_dir", s->run_dir);
	cJSON_AddStringToObject(o, "job", sum.job && sum.job[0] ? sum.job : s->job);
	cJSON_AddStringToObject(o, "started", s->started);
	cJSON_AddNumberToObject(o, "clients", s->nclients);
	cJSON_AddBoolToObject(o, "read_only", read_only);
	cJSON_AddNumberToObject(o, "step", (double)sum.step);
	cJSON_AddNumberToObject(o, "total_steps", (double)sum.total_steps);
	cJSON_AddNumberToObject(o, "world_size", sum.world_size);
	cJSON_AddNumberToObject(o, "usd_spent", sum.usd_spent);
	cJSON_AddStringToObject(o, "ended", "");
	return o;
}

static cJSON *view_msg(const char *type, cJSON *view)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "type", type);
	cJSON_AddItemToObject(o, "view", view);
	return o;
}

static void on_command(struct client *cl, const struct sd_control_msg *m)
{
	struct sd_control_server *s = cl->s;
	cJSON *r = cJSON_CreateObject();
	cJSON_AddStringToObject(r, "type", "reply");
	cJSON_AddNumberToObject(r, "id", (double)m->id);
	char *why = NULL;
	int rc = -1;
	if (cl->read_only)
		sd_why(&why, "this client attached read-only: commands are refused");
	else if (s->ended)
		sd_why(&why, "the run has ended");
	else
		rc = s->o.command(s->o.ctx, m->line, &why);
	cJSON_AddBoolToObject(r, "ok", rc == 0);
	if (rc != 0)
		cJSON_AddStringToObject(r, "error", why ? why : "refused");
	free(why);
	send_obj(cl, r);
}

static void on_client_hello(struct client *cl, const struct sd_control_msg *m)
{
	struct sd_control_server *s = cl->s;
	if (m->protocol != SD_CONTROL_PROTOCOL) {
		char why[96];
		snprintf(why, sizeof why, "protocol %d unsupported: this run speaks %d", m->protocol,
		         SD_CONTROL_PROTOCOL);
		client_error(cl, why);
		return;
	}
	cl->hello = 1;
	cl->want = m->want;
	cl->read_only = m->read_only;
	if (m->want == SD_WANT_INFO) {
		client_hang_up(cl);   /* the hello was all it wanted */
		return;
	}
	cl->live = 1;
	s->nclients++;
	log_line("client pid %ld attached (%s%s); %d attached", cl->pid,
	         m->want == SD_WANT_COCKPIT ? "cockpit" : "journal", m->read_only ? ", read-only" : "",
	         s->nclients);
	if (s->o.clients_changed)
		s->o.clients_changed(s->o.ctx, s->nclients);
	if (m->want == SD_WANT_COCKPIT) {
		cJSON *view = s->o.view(s->o.ctx, 0);
		if (view)
			send_obj(cl, view_msg("snapshot", view));
	}
}

static void on_client_line(struct client *cl, const char *line, size_t len)
{
	struct sd_control_msg m;
	char *why = NULL;
	if (sd_control_decode(line, len, 0, &m, &why) < 0) {
		client_error(cl, why ? why : "bad message");
		free(why);
		return;
	}
	if (m.type != SD_CONTROL_HELLO && !cl->hello) {
		client_error(cl, "expected a hello first");
	} else if (m.type == SD_CONTROL_HELLO) {
		if (cl->hello)
			client_error(cl, "a second hello");
		else
			on_client_hello(cl, &m);
	} else if (m.type == SD_CONTROL_COMMAND) {
		on_command(cl, &m);
	} else if (m.type == SD_CONTROL_DETACH) {
		client_hang_up(cl);
	}
	sd_control_msg_free(&m);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	(void)h;
	(void)suggested;
	static char mem[65536];
	buf->base = mem;
	buf->len = sizeof mem;
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
	struct client *cl = st->data;
	if (n < 0) {
		client_close(cl);
		return;
	}
	sd_line_reader_feed(&cl->rd, buf->base, (size_t)n);
	const char *line;
	size_t len;
	char *why = NULL;
	int got;
	while (!cl->gone && (got = sd_line_reader_next(&cl->rd, &line, &len, &why)) != 0) {
		if (got < 0) {
			client_error(cl, why ? why : "line too long");
			free(why);
			return;
		}
		on_client_line(cl, line, len);
	}
}

static void on_connection(uv_stream_t *server, int status)
{
	struct sd_control_server *s = server->data;
	if (status < 0 || s->closed)
		return;
	struct client *cl = calloc(1, sizeof *cl);
	if (!cl)
		return;
	cl->s = s;
	uv_pipe_init(s->loop, &cl->pipe, 0);
	cl->pipe.data = cl;
	s->pending_handles++;
	if (uv_accept(server, (uv_stream_t *)&cl->pipe) < 0) {
		uv_close((uv_handle_t *)&cl->pipe, on_client_closed);
		return;
	}
	sd_line_reader_init(&cl->rd, SD_CONTROL_CLIENT_LINE_MAX);
	cl->next = s->clients;
	s->clients = cl;
	/* Only the run's own user: the 0600 socket in a 0700 directory keeps
	 * others out, and root (who passes both) is asked too. */
	uv_os_fd_t fd;
	struct ucred cr;
	socklen_t crlen = sizeof cr;
	if (uv_fileno((uv_handle_t *)&cl->pipe, &fd) < 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) < 0) {
		client_error(cl, "cannot read the peer's credentials (SO_PEERCRED)");
		return;
	}
	cl->uid = (long)cr.uid;
	cl->pid = (long)cr.pid;
	if (cr.uid != getuid()) {
		char why[128];
		snprintf(why, sizeof why, "refused: uid %ld is not the run's owner (uid %ld)", (long)cr.uid,
		         (long)getuid());
		client_error(cl, why);
		return;
	}
	send_obj(cl, hello_obj(s, 0));
	uv_read_start((uv_stream_t *)&cl->pipe, on_alloc, on_read);
}

/* One status line for every live cockpit, when the view moved. */
static void broadcast_status(struct sd_control_server *s)
{
	int cockpits = 0;
	for (struct client *cl = s->clients; cl; cl = cl->next)
		cockpits += !cl->gone && cl->live && cl->want == SD_WANT_COCKPIT;
	if (!cockpits)
		return;
	cJSON *view = s->o.view(s->o.ctx, 1);
	if (!view)
		return;
	cJSON *msg = view_msg("status", view);
	struct wbuf *b = wbuf_from(msg);
	cJSON_Delete(msg);
	for (struct client *cl = s->clients, *next; cl; cl = next) {
		next = cl->next;
		if (!cl->gone && cl->live && cl->want == SD_WANT_COCKPIT)
			send_buf(cl, b);
	}
	wbuf_unref(b);
}

static void on_tick(uv_timer_t *t)
{
	broadcast_status(t->data);
}

void sd_control_server_event(struct sd_control_server *s, const cJSON *ev)
{
	if (!s || s->closed)
		return;
	int any = 0;
	for (struct client *cl = s->clients; cl; cl = cl->next)
		any |= !cl->gone && cl->live;
	if (!any)
		return;
	cJSON *msg = cJSON_CreateObject();
	cJSON_AddStringToObject(msg, "type", "event");
	cJSON_AddItemReferenceToObject(msg, "event", (cJSON *)ev);
	struct wbuf *b = wbuf_from(msg);
	cJSON_Delete(msg);
	for (struct client *cl = s->clients, *next; cl; cl = next) {
		next = cl->next;
		if (!cl->gone && cl->live)
			send_buf(cl, b);
	}
	wbuf_unref(b);
}

/* A socket file that answers is a live run's: never take it over. */
static int socket_live(const char *path)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
	int live = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
	close(fd);
	return live;
}

static void on_handle_closed(uv_handle_t *h)
{
	struct sd_control_server *s = h->data;
	s->pending_handles--;
	maybe_free(s);
}

int sd_control_server_listen(struct sd_control_server **out, uv_loop_t *loop, const struct sd_control_server_opts *o,
                      char **why)
{
	*out = NULL;
	struct sd_control_server *s = calloc(1, sizeof *s);
	if (!s)
		return sd_why(why, "control socket: out of memory");
	s->loop = loop;
	s->o = *o;
	s->queue_max = SD_CONTROL_QUEUE_MAX;
	const char *qm = getenv("SPOTDECK_CONTROL_QUEUE_MAX");
	if (qm && atol(qm) >= 4096)
		s->queue_max = (size_t)atol(qm);
	snprintf(s->job, sizeof s->job, "%s", o->job ? o->job : "");
	snprintf(s->run_dir, sizeof s->run_dir, "%s", o->run_dir);
	time_t now = time(NULL);
	struct tm tm;
	gmtime_r(&now, &tm);
	strftime(s->started, sizeof s->started, "%Y-%m-%dT%H:%M:%SZ", &tm);
	int n = snprintf(s->path, sizeof s->path, "%s/control.sock", o->run_dir);
	if (n < 0 || (size_t)n >= sizeof s->path) {
		free(s);
		return sd_why(why, "%s/control.sock: longer than %zu bytes, the limit of a Unix socket's "
		               "path; choose a shorter --run-dir", o->run_dir, sizeof s->path - 1);
	}
	if (chmod(o->run_dir, 0700) < 0) {
		int e = errno;
		free(s);
		return sd_why(why, "%s: chmod 0700: %s", o->run_dir, strerror(e));
	}
	struct stat st;
	if (lstat(s->path, &st) == 0) {
		if (socket_live(s->path)) {
			char msg[PATH_MAX + 96];
			snprintf(msg, sizeof msg, "%s: a live run answers there already", s->path);
			free(s);
			return sd_why(why, "%s", msg);
		}
		unlink(s->path);   /* a dead run's */
	}
	uv_pipe_init(loop, &s->listener, 0);
	uv_timer_init(loop, &s->tick);
	s->listener.data = s->tick.data = s;
	s->pending_handles = 2;
	mode_t old = umask(0177);
	int rc = uv_pipe_bind(&s->listener, s->path);
	umask(old);
	if (rc == 0 && chmod(s->path, 0600) < 0)
		rc = uv_translate_sys_error(errno);
	if (rc == 0)
		rc = uv_listen((uv_stream_t *)&s->listener, 16, on_connection);
	if (rc < 0) {
		sd_why(why, "%s: %s", s->path, uv_strerror(rc));
		s->closed = 1;
		uv_close((uv_handle_t *)&s->listener, on_handle_closed);
		uv_close((uv_handle_t *)&s->tick, on_handle_closed);
		return -1;
	}
	uv_timer_start(&s->tick, on_tick, SD_CONTROL_STATUS_MS, SD_CONTROL_STATUS_MS);
	/* The run's process, for people and scripts (kill -TERM ends it as q y). */
	char pidpath[PATH_MAX + 32];
	snprintf(pidpath, sizeof pidpath, "%s/spotdeck.pid", s->run_dir);
	FILE *pf = fopen(pidpath, "w");
	if (pf) {
		fprintf(pf, "%ld\n", (long)getpid());
		fclose(pf);
	}
	*out = s;
	return 0;
}

static void remove_pidfile(const struct sd_control_server *s)
{
	char pidpath[PATH_MAX + 32];
	snprintf(pidpath, sizeof pidpath, "%s/spotdeck.pid", s->run_dir);
	unlink(pidpath);
}

void sd_control_server_end(struct sd_control_server *s, int status, const char *ended)
{
	if (!s || s->ended)
		return;
	broadcast_status(s);
	s->ended = 1;
	uv_timer_stop(&s->tick);
	/* The final screen, for a cockpit that attaches after the end. */
	cJSON *view = s->o.view(s->o.ctx, 0);
	if (view) {
		cJSON_ReplaceItemInObject(view, "ended", cJSON_CreateString(ended));
		cJSON_ReplaceItemInObject(view, "clients", cJSON_CreateNumber(0));
		/* Nothing runs any more: no speed, no ETA, no workers, no suggestion. */
		cJSON_ReplaceItemInObject(view, "images_per_sec", cJSON_CreateNumber(0));
		cJSON_ReplaceItemInObject(view, "eta_s", cJSON_CreateNull());
		cJSON_ReplaceItemInObject(view, "world_size", cJSON_CreateNumber(0));
		cJSON_ReplaceItemInObject(view, "usd_per_hour", cJSON_CreateNumber(0));
		cJSON_ReplaceItemInObject(view, "suggestion", cJSON_CreateString(""));
		cJSON_ReplaceItemInObject(view, "suggestion_for", cJSON_CreateString(""));
		cJSON_ReplaceItemInObject(view, "suggestion_why", cJSON_CreateString(""));
		char *text = cJSON_PrintUnformatted(view);
		char path[PATH_MAX + 32], tmp[PATH_MAX + 40];
		snprintf(path, sizeof path, "%s/view-final.json", s->run_dir);
		snprintf(tmp, sizeof tmp, "%s.tmp", path);
		FILE *f = text ? fopen(tmp, "w") : NULL;
		if (f) {
			int bad = fputs(text, f) < 0 || fputc('\n', f) < 0;
			bad |= fclose(f) != 0;
			if (bad || rename(tmp, path) < 0) {
				log_line("%s: %s", path, strerror(errno));
				unlink(tmp);
			}
		}
		free(text);
		cJSON_Delete(view);
	}
	cJSON *bye = cJSON_CreateObject();
	cJSON_AddStringToObject(bye, "type", "bye");
	cJSON_AddNumberToObject(bye, "status", status);
	cJSON_AddStringToObject(bye, "ended", ended);
	struct wbuf *b = wbuf_from(bye);
	cJSON_Delete(bye);
	for (struct client *cl = s->clients, *next; cl; cl = next) {
		next = cl->next;
		if (cl->hello)
			send_buf(cl, b);
		client_hang_up(cl);   /* once the bye is written */
	}
	wbuf_unref(b);
	/* No new clients: the socket goes (attach then reads view-final.json). */
	uv_close((uv_handle_t *)&s->listener, on_handle_closed);
	unlink(s->path);
	remove_pidfile(s);
}

int sd_control_server_flushed(const struct sd_control_server *s)
{
	return !s || !s->clients;
}

void sd_control_server_close(struct sd_control_server *s)
{
	if (!s || s->closed)
		return;
	s->closed = 1;
	for (struct client *cl = s->clients; cl; cl = cl->next) {
		cl->gone = 1;
		if (!cl->closing) {
			cl->closing = 1;
			uv_close((uv_handle_t *)&cl->pipe, on_client_closed);
		}
	}
	s->nclients = 0;
	if (!s->ended) {
		uv_close((uv_handle_t *)&s->listener, on_handle_closed);
		unlink(s->path);
		remove_pidfile(s);
	}
	uv_close((uv_handle_t *)&s->tick, on_handle_closed);
	maybe_free(s);
}
