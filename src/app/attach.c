/* src/app/attach.c - see attach.h. */
#include "config.h"

#include "src/app/attach.h"
#include "src/app/run-setup.h"

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "src/base/errors.h"
#include "src/run/control-proto.h"
#include "src/app/view-codec.h"
#include "src/proto/protocol.h"

#define SOCK_NAME "control.sock"
#define FINAL_VIEW "view-final.json"

/* ---- blocking helpers for ls, kill and finding a run ---- */

/* Connects to RUN_DIR/control.sock; returns the socket, or -1 with errno. */
static int connect_run(const char *run_dir)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int n = snprintf(sa.sun_path, sizeof sa.sun_path, "%s/%s", run_dir, SOCK_NAME);
	if (n < 0 || (size_t)n >= sizeof sa.sun_path) {
		errno = ENAMETOOLONG;
		return -1;
	}
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

static int send_all(int fd, const char *p, size_t len)
{
	while (len > 0) {
		ssize_t w = send(fd, p, len, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

static int send_msg(int fd, cJSON *obj)
{
	size_t len;
	char *line = sd_control_line(obj, &len);
	cJSON_Delete(obj);
	int rc = line ? send_all(fd, line, len) : -1;
	free(line);
	return rc;
}

static cJSON *client_hello(const char *want, int read_only)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "type", "hello");
	cJSON_AddNumberToObject(o, "protocol", SD_CONTROL_PROTOCOL);
	cJSON_AddStringToObject(o, "want", want);
	cJSON_AddBoolToObject(o, "read_only", read_only);
	return o;
}

/* Reads the next message within timeout_ms (-1: no limit).  Returns 0, or
 * -1 with *why. */
static int next_msg(int fd, struct sd_line_reader *rd, int timeout_ms, struct sd_control_msg *m,
                    char **why)
{
	for (;;) {
		const char *line;
		size_t len;
		int got = sd_line_reader_next(rd, &line, &len, why);
		if (got < 0)
			return -1;
		if (got > 0)
			return sd_control_decode(line, len, 1, m, why);
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int r = poll(&p, 1, timeout_ms);
		if (r < 0 && errno == EINTR)
			continue;
		if (r == 0)
			return sd_why(why, "no answer within %d ms", timeout_ms);
		char buf[65536];
		ssize_t n = r < 0 ? -1 : recv(fd, buf, sizeof buf, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return sd_why(why, "the run hung up");
		sd_line_reader_feed(rd, buf, (size_t)n);
	}
}

/* The run's hello, or -1 when no live run answers in RUN_DIR. */
static int run_info(const char *run_dir, struct sd_control_msg *hello)
{
	int fd = connect_run(run_dir);
	if (fd < 0)
		return -1;
	struct sd_line_reader rd;
	sd_line_reader_init(&rd, SD_CONTROL_SERVER_LINE_MAX);
	char *why = NULL;
	int rc = next_msg(fd, &rd, 2000, hello, &why);
	if (rc == 0 && hello->type != SD_CONTROL_HELLO) {
		sd_control_msg_free(hello);
		rc = -1;
	}
	if (rc == 0)
		send_msg(fd, client_hello("info", 1));
	free(why);
	sd_line_reader_free(&rd);
	close(fd);
	return rc;
}

/* DIR/NAME into rd ("NAME" alone for "."), and whether it holds a control
 * socket of this user (its stat in *st): 0, or -1. */
static int run_socket(const char *dir, const char *name, char *rd, size_t len, struct stat *st)
{
	if (name[0] == '.')
		return -1;
	int here = !strcmp(dir, ".");
	snprintf(rd, len, "%s%s%s", here ? "" : dir, here ? "" : "/", name);
	char sock[PATH_MAX + 32];
	snprintf(sock, sizeof sock, "%s/%s", rd, SOCK_NAME);
	if (lstat(sock, st) < 0 || !S_ISSOCK(st->st_mode) || st->st_uid != getuid())
		return -1;
	return 0;
}

/* The newest live run under DIR into out (its socket's mtime decides).
 * Returns 0, or -1 when there is none. */
static int newest_run(const char *dir, char *out, size_t len)
{
	DIR *d = opendir(dir);
	if (!d)
		return -1;
	double best = -1;
	struct dirent *e;
	while ((e = readdir(d))) {
		char rd[PATH_MAX];
		struct stat st;
		if (run_socket(dir, e->d_name, rd, sizeof rd, &st) < 0)
			continue;
		double t = (double)st.st_mtim.tv_sec + st.st_mtim.tv_nsec * 1e-9;
		if (t <= best)
			continue;
		int fd = connect_run(rd);
		if (fd < 0)
			continue;
		close(fd);
		best = t;
		snprintf(out, len, "%s", rd);
	}
	closedir(d);
	return best < 0 ? -1 : 0;
}

/* ---- the attached client on a libuv loop ---- */

struct att {
	uv_loop_t *loop;
	const struct sd_attach_opts *o;
	char run_dir[PATH_MAX];
	char log_path[PATH_MAX + 32];
	uv_pipe_t pipe;
	uv_connect_t conn;
	int connected;
	uv_signal_t sighup, sigint, sigterm;
	uv_pipe_t in_pipe;
	uv_tty_t in_tty;
	uv_stream_t *in;
	struct sd_line_reader rd, in_rd;
	struct sd_view_mirror mirror;
	struct sd_cockpit *cockpit;
	int final_screen;           /* the run had ended: view-final.json */
	long pid;                   /* the run's process */
	long next_id;
	int hello, bye, detached, quit_sent, cockpit_failed;
	int stopped;                /* said why it ends: nothing later overrides it */
	int status;
	char said[PATH_MAX + 256];  /* printed once the terminal is back */
};

static void say(struct att *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void say(struct att *a, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(a->said, sizeof a->said, fmt, ap);
	va_end(ap);
}

static void stop(struct att *a)
{
	a->stopped = 1;
	if (a->cockpit) {
		sd_cockpit_destroy(a->cockpit);
		a->cockpit = NULL;
	}
	uv_stop(a->loop);
}

static void write_done(uv_write_t *req, int status)
{
	(void)status;
	free(req->data);
	free(req);
}

static void send_async(struct att *a, cJSON *obj)
{
	size_t len;
	char *line = sd_control_line(obj, &len);
	cJSON_Delete(obj);
	if (!line || !a->connected) {
		free(line);
		return;
	}
	uv_write_t *req = malloc(sizeof *req);
	if (!req) {
		free(line);
		return;
	}
	req->data = line;
	uv_buf_t b = uv_buf_init(line, (unsigned)len);
	if (uv_write(req, (uv_stream_t *)&a->pipe, &b, 1, write_done) < 0)
		write_done(req, 0);
}

static void detach(struct att *a)
{
	if (a->detached)
		return;
	a->detached = 1;
	if (!a->final_screen) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "type", "detach");
		send_async(a, o);
		say(a, "spotdeck: detached from %s; the run goes on (spotdeck attach %s)", a->run_dir,
		    a->run_dir);
	}
	a->status = 0;
	stop(a);
}

static void send_command(struct att *a, const char *line)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "type", "command");
	cJSON_AddNumberToObject(o, "id", (double)++a->next_id);
	cJSON_AddStringToObject(o, "line", line);
	send_async(a, o);
}

static const struct sd_view *cockpit_view(void *ctx)
{
	struct att *a = ctx;
	return &a->mirror.v;
}

/* Whether the run may get LINE from here: not after it ended, nor from a
 * read-only client.  0, or -1 with *why. */
static int may_command(const struct att *a, char **why)
{
	if (a->final_screen)
		return sd_why(why, "the run has ended: this is its final screen (q leaves)");
	if (a->o->read_only)
		return sd_why(why, "attached read-only: commands are refused (x or q leaves)");
	return 0;
}

/* detach (key x): the client's own; the run goes on. */
static int client_detach(struct att *a, const char *line, char **why)
{
	(void)line;
	(void)why;
	detach(a);
	return 0;
}

/* quit (key q): the run's, except where this client cannot send it (read
 * only, or the run already over): then q only leaves. */
static int client_quit(struct att *a, const char *line, char **why)
{
	if (a->o->read_only || a->final_screen)
		return client_detach(a, line, why);
	a->quit_sent = 1;
	send_command(a, line);
	return 0;
}

/* The commands the client acts on itself, by their first word; every
 * other line goes to the run's command table. */
static const struct {
	const char *name;
	int (*run)(struct att *a, const char *line, char **why);
} client_commands[] = {
	{ "detach", client_detach },
	{ "quit", client_quit },
};

static int cockpit_command(void *ctx, const char *line, char **why)
{
	struct att *a = ctx;
	size_t n = strcspn(line, " \t");
	for (size_t i = 0; i < sizeof client_commands / sizeof client_commands[0]; i++)
		if (strlen(client_commands[i].name) == n && !strncmp(line, client_commands[i].name, n))
			return client_commands[i].run(a, line, why);
	if (may_command(a, why) < 0)
		return -1;
	send_command(a, line);
	return 0;
}

static const struct sd_cockpit_ops cockpit_ops = {
	.view = cockpit_view,
	.command = cockpit_command,
};

static int open_cockpit(struct att *a)
{
	struct sd_cockpit_opts co = a->o->cockpit;
	if (!co.log_path)
		co.log_path = a->log_path;
	char *why = NULL;
	if (sd_cockpit_create(&a->cockpit, a->loop, &cockpit_ops, a, &co, &why) < 0) {
		a->cockpit = NULL;
		if (a->o->end_run_without_cockpit && !a->final_screen) {
			/* Started for this cockpit: nobody would watch it. */
			say(a, "spotdeck: %s; the run it started was quit", why ? why : "cannot open the cockpit");
			free(why);
			a->quit_sent = 1;
			a->cockpit_failed = 1;
			send_command(a, "quit");
			return -1;
		}
		say(a, "spotdeck: %s", why ? why : "cannot open the cockpit");
		free(why);
		a->status = 1;
		stop(a);
		return -1;
	}
	return 0;
}

static void mirror_fixed(struct att *a)
{
	a->mirror.v.read_only = a->o->read_only || a->final_screen;
}

static void open_stdin(struct att *a);

static void on_message(struct att *a, struct sd_control_msg *m)
{
	char *why = NULL;
	switch (m->type) {
	case SD_CONTROL_HELLO:
		if (m->protocol != SD_CONTROL_PROTOCOL) {
			say(a, "spotdeck: %s speaks control protocol %d, this spotdeck %d", a->run_dir,
			    m->protocol, SD_CONTROL_PROTOCOL);
			a->status = 1;
			stop(a);
			return;
		}
		a->hello = 1;
		a->pid = m->pid;
		send_async(a, client_hello(a->o->headless ? "journal" : "cockpit", a->o->read_only));
		if (a->o->headless)
			open_stdin(a);   /* commands only after our hello */
		return;
	case SD_CONTROL_SNAPSHOT:
	case SD_CONTROL_STATUS:
		if (a->o->headless)
			return;
		if (sd_view_mirror_apply(&a->mirror, m->view, m->type == SD_CONTROL_SNAPSHOT, &why) < 0) {
			say(a, "spotdeck: %s: a bad view from the run: %s", a->run_dir, why ? why : "?");
			free(why);
			a->status = 1;
			stop(a);
			return;
		}
		mirror_fixed(a);
		if (!a->cockpit && m->type == SD_CONTROL_SNAPSHOT)
			open_cockpit(a);
		return;
	case SD_CONTROL_EVENT:
		if (a->o->headless) {
			char *s = cJSON_PrintUnformatted(m->event.fields);
			if (s) {
				fputs(s, stdout);
				fputc('\n', stdout);
				if (fflush(stdout) != 0) {   /* nobody reads us any more */
					free(s);
					detach(a);
					return;
				}
			}
			free(s);
		} else if (a->cockpit) {
			const cJSON *srv = cJSON_GetObjectItemCaseSensitive(m->event.fields, "server");
			if (m->event.type == SD_EV_REVOKED)
				sd_cockpit_notify_revocation(a->cockpit, cJSON_IsString(srv) ? srv->valuestring : "");
		}
		return;
	case SD_CONTROL_REPLY:
		if (m->ok)
			return;
		if (a->o->headless) {
			fprintf(stderr, "spotdeck: %s\n", m->error ? m->error : "refused");
		} else if (a->cockpit) {
			/* A note of the cockpit's own: the run's next message
			 * (a checkpoint's, within seconds) would replace it. */
			sd_cockpit_notify_refused(a->cockpit, m->error ? m->error : "refused");
		} else {
			snprintf(a->mirror.v.message, sizeof a->mirror.v.message, "%s", m->error ? m->error : "refused");
			a->mirror.v.version++;
		}
		return;
	case SD_CONTROL_ERROR:
		say(a, "spotdeck: %s: the run refused this client: %s", a->run_dir, m->error ? m->error : "?");
		a->status = 1;
		stop(a);
		return;
	case SD_CONTROL_BYE:
		a->bye = 1;
		if (a->cockpit_failed) {
			a->status = 1;
			stop(a);
			return;
		}
		say(a, "spotdeck: %s: the run ended: %s", a->run_dir, m->ended && m->ended[0] ? m->ended : "?");
		a->status = a->quit_sent ? 0 : (int)m->status;
		stop(a);
		return;
	default:
		return;
	}
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	(void)h;
	(void)suggested;
	static char mem[1 << 16];
	buf->base = mem;
	buf->len = sizeof mem;
}

static void lost(struct att *a)
{
	if (a->bye || a->detached || a->stopped)
		return;
	say(a, "spotdeck: %s: lost the run (pid %ld) without a word from it: it was killed or crashed; "
	    "continue it with: spotdeck --resume %s", a->run_dir, a->pid, a->run_dir);
	a->status = 1;
	stop(a);
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
	struct att *a = st->data;
	if (n < 0) {
		uv_read_stop(st);
		lost(a);
		return;
	}
	sd_line_reader_feed(&a->rd, buf->base, (size_t)n);
	const char *line;
	size_t len;
	char *why = NULL;
	int got;
	while (!a->bye && !a->detached && (got = sd_line_reader_next(&a->rd, &line, &len, &why)) != 0) {
		struct sd_control_msg m;
		if (got < 0 || sd_control_decode(line, len, 1, &m, &why) < 0) {
			say(a, "spotdeck: %s: a bad message from the run: %s", a->run_dir, why ? why : "?");
			free(why);
			a->status = 1;
			stop(a);
			return;
		}
		if (!a->hello && m.type != SD_CONTROL_HELLO && m.type != SD_CONTROL_ERROR) {
			sd_control_msg_free(&m);
			say(a, "spotdeck: %s: the run did not say hello first", a->run_dir);
			a->status = 1;
			stop(a);
			return;
		}
		on_message(a, &m);
		sd_control_msg_free(&m);
	}
}

/* Whether line is the quit command alone (between blanks). */
static int is_quit(const char *line)
{
	line += strspn(line, " ");
	if (strncmp(line, "quit", 4) != 0)
		return 0;
	line += 4;
	return line[strspn(line, " ")] == 0;
}

/* One line of stdin: sent as a command, or refused here with a line on
 * stderr (read-only, control characters) so the run never sees it. */
static void stdin_line(struct att *a, const char *line, size_t len)
{
	if (len == 0)
		return;
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)line[i];
		if (ch < 0x20 || ch == 0x7f) {
			fprintf(stderr, "spotdeck: stdin: control character 0x%02x at byte %zu: refused, none of it run\n",
			        ch, i + 1);
			return;
		}
	}
	if (!strcmp(line, "detach")) {   /* as the cockpit's x */
		detach(a);
		return;
	}
	if (a->o->read_only) {
		fprintf(stderr, "spotdeck: attached read-only: '%s' refused\n", line);
		return;
	}
	/* The quit command takes no arguments: "quit" (blanks around it
	 * allowed, as the command table splits words) quits; "quitx" and
	 * "quit now" are refused by the run and quit nothing. */
	if (is_quit(line))
		a->quit_sent = 1;
	send_command(a, line);
}

/* Every whole line stdin gave so far; an over-long one is refused whole. */
static void stdin_lines(struct att *a)
{
	const char *line;
	size_t len;
	char *why = NULL;
	int got;
	while ((got = sd_line_reader_next(&a->in_rd, &line, &len, &why)) != 0) {
		if (got < 0) {
			fprintf(stderr, "spotdeck: stdin: %s: refused, none of it run\n", why);
			free(why);
			why = NULL;
			sd_line_reader_skip(&a->in_rd);
			continue;
		}
		stdin_line(a, line, len);
	}
}

static void on_in_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
	struct att *a = st->data;
	if (n < 0) {            /* stdin's end: a script that is done detaches */
		uv_read_stop(st);
		/* A last line without its newline counts, as from a file. */
		sd_line_reader_feed(&a->in_rd, "\n", 1);
		stdin_lines(a);
		if (!a->quit_sent)
			detach(a);
		return;
	}
	sd_line_reader_feed(&a->in_rd, buf->base, (size_t)n);
	stdin_lines(a);
}

/* Commands from stdin (headless): a pipe or a terminal is read as lines come,
 * and its end detaches; a file's lines are all sent at once and the journal
 * streams on (as `spotdeck --headless < FILE`); /dev/null gives none. */
static void open_stdin(struct att *a)
{
	uv_handle_type t = uv_guess_handle(0);
	if (t == UV_NAMED_PIPE && uv_pipe_init(a->loop, &a->in_pipe, 0) == 0) {
		if (uv_pipe_open(&a->in_pipe, 0) == 0)
			a->in = (uv_stream_t *)&a->in_pipe;
		else
			uv_close((uv_handle_t *)&a->in_pipe, NULL);
	} else if (t == UV_TTY && uv_tty_init(a->loop, &a->in_tty, 0, 1) == 0) {
		a->in = (uv_stream_t *)&a->in_tty;
	} else if (t == UV_FILE) {
		char buf[65536];
		ssize_t n;
		while ((n = read(0, buf, sizeof buf)) > 0)
			sd_line_reader_feed(&a->in_rd, buf, (size_t)n);
		sd_line_reader_feed(&a->in_rd, "\n", 1);   /* a last line without its newline */
		stdin_lines(a);
	}
	if (a->in) {
		a->in->data = a;
		uv_read_start(a->in, on_alloc, on_in_read);
	}
}

static void on_connect(uv_connect_t *req, int status)
{
	struct att *a = req->data;
	if (status < 0) {
		say(a, "spotdeck: %s/%s: %s", a->run_dir, SOCK_NAME, uv_strerror(status));
		a->status = 1;
		stop(a);
		return;
	}
	a->connected = 1;
	a->pipe.data = a;
	uv_read_start((uv_stream_t *)&a->pipe, on_alloc, on_read);
}

static void on_signal(uv_signal_t *s, int signum)
{
	(void)signum;
	detach(s->data);   /* the terminal went or the operator left: the run goes on */
}

static void close_walk(uv_handle_t *h, void *arg)
{
	(void)arg;
	if (!uv_is_closing(h))
		uv_close(h, NULL);
}

/* RUN_DIR/view-final.json, the final screen a run left, parsed (caller
 * deletes); NULL with *why when missing or not a JSON object. */
static cJSON *final_view(const char *run_dir, char **why)
{
	char path[PATH_MAX + 32];
	snprintf(path, sizeof path, "%s/%s", run_dir, FINAL_VIEW);
	FILE *f = fopen(path, "r");
	if (!f) {
		sd_why(why, "%s: %s", path, strerror(errno));
		return NULL;
	}
	char *text = NULL;
	size_t cap = 0, n = 0, got;
	char chunk[65536];
	while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) {
		if (n + got + 1 > cap) {
			size_t nc = (n + got + 1) * 2;
			char *t = realloc(text, nc);
			if (!t)
				break;
			text = t;
			cap = nc;
		}
		memcpy(text + n, chunk, got);
		n += got;
	}
	fclose(f);
	if (!text) {
		sd_why(why, "%s: empty", path);
		return NULL;
	}
	text[n] = 0;
	cJSON *view = cJSON_Parse(text);
	free(text);
	if (!cJSON_IsObject(view)) {
		cJSON_Delete(view);
		sd_why(why, "%s: not a JSON object", path);
		return NULL;
	}
	return view;
}

/* The final screen into the mirror. */
static int load_final(struct att *a, char **why)
{
	cJSON *view = final_view(a->run_dir, why);
	if (!view)
		return -1;
	char *w = NULL;
	int rc = sd_view_mirror_apply(&a->mirror, view, 1, &w);
	cJSON_Delete(view);
	if (rc < 0) {
		sd_why(why, "%s/%s: %s", a->run_dir, FINAL_VIEW, w ? w : "bad view");
		free(w);
		return -1;
	}
	return 0;
}

int sd_attach_run(const struct sd_attach_opts *o)
{
	struct att *a = calloc(1, sizeof *a);
	if (!a)
		return 1;
	a->o = o;
	if (o->run_dir) {
		snprintf(a->run_dir, sizeof a->run_dir, "%s", o->run_dir);
	} else if (newest_run(".", a->run_dir, sizeof a->run_dir) < 0) {
		fprintf(stderr, "spotdeck: attach: no live run of yours under the current directory "
		        "(spotdeck ls lists them; name one: spotdeck attach RUNDIR)\n");
		free(a);
		return 2;
	}
	snprintf(a->log_path, sizeof a->log_path, "%s/spotdeck.log", a->run_dir);
	signal(SIGPIPE, SIG_IGN);
	uv_loop_t loop;
	uv_loop_init(&loop);
	a->loop = &loop;
	sd_view_mirror_init(&a->mirror);
	sd_line_reader_init(&a->rd, SD_CONTROL_SERVER_LINE_MAX);
	sd_line_reader_init(&a->in_rd, SD_CONTROL_COMMAND_MAX + 1);
	uv_signal_init(&loop, &a->sighup);
	uv_signal_init(&loop, &a->sigint);
	uv_signal_init(&loop, &a->sigterm);
	a->sighup.data = a->sigint.data = a->sigterm.data = a;
	uv_signal_start(&a->sighup, on_signal, SIGHUP);
	uv_signal_start(&a->sigint, on_signal, SIGINT);
	uv_signal_start(&a->sigterm, on_signal, SIGTERM);

	char sock[PATH_MAX + 32];
	snprintf(sock, sizeof sock, "%s/%s", a->run_dir, SOCK_NAME);
	int fd = connect_run(a->run_dir);
	int e = errno;
	if (fd >= 0) {
		close(fd);
		uv_pipe_init(&loop, &a->pipe, 0);
		a->conn.data = a;
		uv_pipe_connect(&a->conn, &a->pipe, sock, on_connect);
		uv_run(&loop, UV_RUN_DEFAULT);
	} else {
		char jn[PATH_MAX + 32];
		snprintf(jn, sizeof jn, "%s/journal.jsonl", a->run_dir);
		char *why = NULL;
		if (access(jn, F_OK) != 0) {
			if (errno == ENOENT)
				say(a, "spotdeck: attach %s: not a spotdeck run directory (no journal.jsonl)", a->run_dir);
			else
				say(a, "spotdeck: attach %s: %s", jn, strerror(errno));
			a->status = 2;
		} else if (o->headless) {
			say(a, "spotdeck: attach %s: the run is not running (%s); its journal is %s", a->run_dir,
			    strerror(e), jn);
			a->status = 1;
		} else if (load_final(a, &why) < 0) {
			say(a, "spotdeck: attach %s: the run is not running and left no final screen (%s); "
			    "continue it with: spotdeck --resume %s", a->run_dir, why ? why : "?", a->run_dir);
			a->status = 1;
		} else {
			a->final_screen = 1;
			mirror_fixed(a);
			if (open_cockpit(a) == 0)
				uv_run(&loop, UV_RUN_DEFAULT);
		}
		free(why);
	}
	if (a->cockpit)
		sd_cockpit_destroy(a->cockpit);
	uv_walk(&loop, close_walk, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	uv_loop_close(&loop);
	if (a->said[0])
		fprintf(stderr, "%s\n", a->said);
	int status = a->status;
	sd_line_reader_free(&a->rd);
	sd_line_reader_free(&a->in_rd);
	sd_view_mirror_free(&a->mirror);
	free(a);
	return status;
}

static const struct option attach_longopts[] = {
	{ "read-only", no_argument, 0, 'r' },
	{ "headless", no_argument, 0, 'H' },
	{ "theme", required_argument, 0, 'T' },
	{ "alert", required_argument, 0, 'A' },
	{ "help", no_argument, 0, 'h' },
	{ 0, 0, 0, 0 },
};

int sd_attach_main(int argc, char **argv)
{
	struct sd_attach_opts o;
	memset(&o, 0, sizeof o);
	o.cockpit.bell = 1;
	struct sd_theme_dirs td;
	sd_theme_dirs_init(&td);
	for (int i = 0; i < SD_THEME_DIRS_N; i++)
		o.cockpit.theme_dirs[i] = td.dir[i];
	opterr = 0;
	optind = 1;
	int c;
	while ((c = getopt_long(argc, argv, "", attach_longopts, NULL)) != -1) {
		switch (c) {
		case 'r': o.read_only = 1; break;
		case 'H': o.headless = 1; break;
		case 'T': o.cockpit.theme = optarg; break;
		case 'A':
			if (!strcmp(optarg, "none") || !strcmp(optarg, "bell") || !strcmp(optarg, "flash")) {
				o.cockpit.bell = optarg[0] == 'n' ? 0 : optarg[0] == 'b' ? 1 : 2;
				break;
			}
			fprintf(stderr, "spotdeck attach: --alert: expected bell, flash or none, got '%s'\n", optarg);
			return 2;
		case 'h':
			printf("usage: spotdeck attach [--read-only] [--headless] [--theme NAME] [--alert HOW] [RUNDIR]\n"
			       "Attaches a cockpit (or, with --headless, the journal as JSON lines and\n"
			       "commands on stdin) to a background run; RUNDIR defaults to the newest\n"
			       "live run under the current directory.  x detaches.  See spotdeck(1).\n");
			return 0;
		default:
			fprintf(stderr, "spotdeck attach: unknown option or missing value: '%s' (see --help)\n",
			        argv[optind - 1]);
			return 2;
		}
	}
	if (argc - optind > 1) {
		fprintf(stderr, "spotdeck attach: one run directory at most, got '%s' too\n", argv[optind + 1]);
		return 2;
	}
	o.run_dir = optind < argc ? argv[optind] : NULL;
	return sd_attach_run(&o);
}

int sd_ls_main(int argc, char **argv)
{
	if (argc > 2 || (argc == 2 && argv[1][0] == '-')) {
		fprintf(stderr, "usage: spotdeck ls [DIR]\n");
		return argc == 2 && !strcmp(argv[1], "--help") ? 0 : 2;
	}
	const char *dir = argc == 2 ? argv[1] : ".";
	DIR *d = opendir(dir);
	if (!d) {
		fprintf(stderr, "spotdeck ls: %s: %s\n", dir, strerror(errno));
		return 1;
	}
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		char rd[PATH_MAX];
		struct stat st;
		if (run_socket(dir, e->d_name, rd, sizeof rd, &st) < 0)
			continue;
		struct sd_control_msg h;
		if (run_info(rd, &h) < 0)
			continue;   /* a dead run's socket */
		if (n++ == 0)
			printf("%-24s %-40s %13s %5s %9s %7s %s\n", "RUNDIR", "JOB", "STEP", "WORLD", "SPENT",
			       "CLIENTS", "STARTED");
		char step[32];
		snprintf(step, sizeof step, "%ld/%ld", h.step, h.total_steps);
		printf("%-24s %-40.40s %13s %5ld %9.2f %7ld %s\n", rd, h.job ? h.job : "", step, h.world_size,
		       h.usd_spent, h.clients, h.started ? h.started : "");
		sd_control_msg_free(&h);
	}
	closedir(d);
	if (n == 0)
		fprintf(stderr, "spotdeck ls: no live run of yours under %s\n", dir);
	return 0;
}

int sd_kill_main(int argc, char **argv)
{
	if (argc != 2 || argv[1][0] == '-') {
		fprintf(stderr, "usage: spotdeck kill RUNDIR   (ends the run: checkpoint, stop workers, release servers)\n");
		return argc == 2 && !strcmp(argv[1], "--help") ? 0 : 2;
	}
	const char *rd = argv[1];
	int fd = connect_run(rd);
	if (fd < 0) {
		int e = errno;
		char *why = NULL;
		cJSON *view = final_view(rd, &why);
		free(why);
		const cJSON *ended = cJSON_GetObjectItemCaseSensitive(view, "ended");
		if (cJSON_IsString(ended) && ended->valuestring[0]) {
			/* It ended before: say how; nothing is left to end. */
			printf("%s: ended already: %s\n", rd, ended->valuestring);
			cJSON_Delete(view);
			return 0;
		}
		cJSON_Delete(view);
		fprintf(stderr, "spotdeck kill: %s: no live run answers there (%s)\n", rd, strerror(e));
		return 1;
	}
	struct sd_line_reader r;
	sd_line_reader_init(&r, SD_CONTROL_SERVER_LINE_MAX);
	struct sd_control_msg m;
	char *why = NULL;
	int status = 1;
	if (next_msg(fd, &r, 5000, &m, &why) < 0) {
		fprintf(stderr, "spotdeck kill: %s: %s\n", rd, why);
		goto out;
	}
	sd_control_msg_free(&m);
	cJSON *cmd = cJSON_CreateObject();
	cJSON_AddStringToObject(cmd, "type", "command");
	cJSON_AddNumberToObject(cmd, "id", 1);
	cJSON_AddStringToObject(cmd, "line", "quit");
	if (send_msg(fd, client_hello("journal", 0)) < 0 || send_msg(fd, cmd) < 0) {
		fprintf(stderr, "spotdeck kill: %s: the run hung up\n", rd);
		goto out;
	}
	/* Until the run says it ended: its checkpoint and releases take time. */
	for (;;) {
		if (next_msg(fd, &r, -1, &m, &why) < 0) {
			fprintf(stderr, "spotdeck kill: %s: %s before it said it ended\n", rd, why);
			break;
		}
		int t = m.type;
		if (t == SD_CONTROL_REPLY && !m.ok)
			fprintf(stderr, "spotdeck kill: %s: %s\n", rd, m.error ? m.error : "refused");
		if (t == SD_CONTROL_ERROR)
			fprintf(stderr, "spotdeck kill: %s: refused: %s\n", rd, m.error ? m.error : "?");
		if (t == SD_CONTROL_BYE) {
			printf("%s: ended: %s\n", rd, m.ended ? m.ended : "");
			status = 0;
		}
		sd_control_msg_free(&m);
		if (t == SD_CONTROL_BYE || t == SD_CONTROL_ERROR)
			break;
	}
out:
	free(why);
	sd_line_reader_free(&r);
	close(fd);
	return status;
}
