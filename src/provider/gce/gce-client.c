/* src/provider/gce/gce-client.c - Compute Engine calls with a fresh OAuth2
 * token (see gce-client.h). */
#include "config.h"
#include "src/provider/gce/gce-client.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>
#include <uv.h>

#include "src/provider/gce/gce-api.h"
#include "src/provider/gce/gce-auth.h"

/* A call: waiting for a token, or sent. */
struct gce_call {
	struct sd_gce_client *c;
	struct gce_call *next;  /* in the waiting queue */
	char *label, *method, *url, *body;
	int idempotent;
	int resent;             /* sent again after a 401 */
	sd_http_cb cb;
	void *arg;
};

struct sd_gce_client {
	struct sd_http *http;
	char *project, *root, *metadata_host;
	char *gcloud;             /* the program, or NULL */
	char gcloud_account[256]; /* as gcloud named it ("" until a token) */
	int have_key;
	struct sd_gce_key key;
	struct sd_gce_token token;
	int fetching;             /* a token request is in flight */
	struct gce_call *waiting, **waiting_tail;
	int *alive;               /* cleared by free, for a token answer that comes after */
};

static char *xstrdup(const char *s)
{
	return s ? strdup(s) : NULL;
}

static void call_free(struct gce_call *g)
{
	free(g->label);
	free(g->method);
	free(g->url);
	free(g->body);
	free(g);
}

static void call_fail(struct gce_call *g, long status, const char *error, int cancelled)
{
	struct sd_http_response r = {.status = status, .body = "", .error = error, .cancelled = cancelled};
	g->cb(g->arg, &r);
	call_free(g);
}

static void fetch_token(struct sd_gce_client *c);

static int token_fresh(const struct sd_gce_client *c)
{
	return c->token.access_token && (int64_t)time(NULL) < c->token.refresh_at;
}

static void on_answer(void *arg, const struct sd_http_response *r);

static void send_now(struct gce_call *g)
{
	struct sd_gce_client *c = g->c;
	char auth[4096 + 32], err[256];
	snprintf(auth, sizeof auth, "Authorization: Bearer %s", c->token.access_token);
	const char *headers[] = {auth, g->body ? "Content-Type: application/json" : NULL, NULL};
	struct sd_http_request rq = {
		.label = g->label, .method = g->method, .url = g->url, .headers = headers,
		.body = g->body, .body_len = g->body ? strlen(g->body) : 0, .idempotent = g->idempotent,
		.retry_answer = sd_gce_retryable_answer,
	};
	struct sd_http_call *hc = sd_http_send(c->http, &rq, on_answer, g, err, sizeof err);
	/* Scrub the token from the stack copy. */
	memset(auth, 0, sizeof auth);
	if (!hc)
		call_fail(g, 0, err, 0);
}

static void on_answer(void *arg, const struct sd_http_response *r)
{
	struct gce_call *g = arg;
	struct sd_gce_client *c = g->c;
	if (r->status == 401 && !g->resent && !r->cancelled) {
		/* The token was refused (revoked, or the clocks disagree): a new
		 * one, and this call once more. */
		g->resent = 1;
		sd_gce_token_free(&c->token);
		g->next = NULL;
		*c->waiting_tail = g;
		c->waiting_tail = &g->next;
		fetch_token(c);
		return;
	}
	g->cb(g->arg, r);
	call_free(g);
}

static void flush_waiting(struct sd_gce_client *c, const char *error)
{
	struct gce_call *g = c->waiting;
	c->waiting = NULL;
	c->waiting_tail = &c->waiting;
	while (g) {
		struct gce_call *next = g->next;
		if (error) {
			struct sd_http_response r = { .body = "", .error = error, .no_credentials = 1 };
			g->cb(g->arg, &r);
			call_free(g);
		} else
			send_now(g);
		g = next;
	}
}

struct token_req {
	struct sd_gce_client *c;
	int *alive;
};

static void on_token(void *arg, const struct sd_http_response *r)
{
	struct token_req *t = arg;
	int *alive = t->alive;
	struct sd_gce_client *c = t->c;
	free(t);
	if (!*alive) {
		free(alive);
		return;
	}
	c->fetching = 0;
	char err[512], msg[600];
	if (r->status == 0) {
		snprintf(msg, sizeof msg, "token: %s", r->error);
		flush_waiting(c, msg);
		return;
	}
	sd_gce_token_free(&c->token);
	if (sd_gce_token_parse(r->body, r->body_len, (int64_t)time(NULL), &c->token, err, sizeof err) < 0) {
		snprintf(msg, sizeof msg, "token: HTTP %ld: %s", r->status, err);
		flush_waiting(c, msg);
		return;
	}
	flush_waiting(c, NULL);
}

/* ---- the token from gcloud ----
 * One child at a time: gcloud config config-helper --format=json, stdout
 * (at most GCLOUD_OUT_MAX bytes: the answer is about 1 KiB) and stderr (its
 * last line says what went wrong) read through pipes on the loop; the
 * answer is taken once the child has exited and both pipes are closed. */
#define GCLOUD_OUT_MAX (64u << 10)
#define GCLOUD_ERR_MAX 2048
/* A gcloud that has not answered in this long (waiting on a prompt it
 * cannot show, a network that does not answer) gets SIGTERM. */
#define GCLOUD_TIMEOUT_MS 60000

struct gcloud_run {
	struct sd_gce_client *c;
	int *alive;
	uv_process_t proc;
	uv_pipe_t out, err;
	uv_timer_t timer;          /* GCLOUD_TIMEOUT_MS */
	int timed_out;
	char *obuf;                /* GCLOUD_OUT_MAX + 1; wiped */
	size_t olen;
	char ebuf[GCLOUD_ERR_MAX + 1];
	size_t elen;
	int too_long;
	int64_t status;
	int term_signal, open_handles;
	int spawn_failed;          /* nothing to tell the client: finish only frees */
};

static void gcloud_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	(void)suggested;
	struct gcloud_run *g = h->data;
	if ((uv_pipe_t *)h == &g->out) {
		size_t room = GCLOUD_OUT_MAX - g->olen;
		*buf = uv_buf_init(g->obuf + g->olen, (unsigned)room);
	} else {
		size_t room = GCLOUD_ERR_MAX - g->elen;
		*buf = uv_buf_init(g->ebuf + g->elen, (unsigned)room);
	}
	if (!buf->len) {
		/* Full: read into a scratch byte and drop it. */
		static char scratch[256];
		*buf = uv_buf_init(scratch, sizeof scratch);
		if ((uv_pipe_t *)h == &g->out)
			g->too_long = 1;
	}
}

static void gcloud_finish(struct gcloud_run *g);

static void gcloud_closed(uv_handle_t *h)
{
	struct gcloud_run *g = h->data;
	if (--g->open_handles == 0)
		gcloud_finish(g);
}

static void gcloud_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct gcloud_run *g = s->data;
	if (n > 0) {
		if ((uv_pipe_t *)s == &g->out && buf->base == g->obuf + g->olen)
			g->olen += (size_t)n;
		else if ((uv_pipe_t *)s == &g->err && buf->base == g->ebuf + g->elen)
			g->elen += (size_t)n;
	} else if (n < 0) {
		uv_close((uv_handle_t *)s, gcloud_closed);
	}
}

static void gcloud_exit(uv_process_t *p, int64_t status, int term_signal)
{
	struct gcloud_run *g = p->data;
	g->status = status;
	g->term_signal = term_signal;
	uv_close((uv_handle_t *)p, gcloud_closed);
	uv_close((uv_handle_t *)&g->timer, gcloud_closed);
}

static void gcloud_timeout(uv_timer_t *t)
{
	struct gcloud_run *g = t->data;
	g->timed_out = 1;
	uv_process_kill(&g->proc, SIGTERM);
}

/* The last non-empty line of gcloud's stderr, for the message. */
static const char *gcloud_last_line(struct gcloud_run *g)
{
	g->ebuf[g->elen] = '\0';
	char *e = g->ebuf + g->elen;
	while (e > g->ebuf && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' '))
		*--e = '\0';
	char *nl = strrchr(g->ebuf, '\n');
	char *line = nl ? nl + 1 : g->ebuf;
	for (char *q = line; *q; q++)
		if ((unsigned char)*q < 0x20)
			*q = ' ';
	return line;
}

static void gcloud_finish(struct gcloud_run *g)
{
	int *alive = g->alive;
	struct sd_gce_client *c = g->c;
	char err[512], msg[800];
	const char *fail = NULL;
	if (g->spawn_failed) {
		/* fetch_token has already told the waiting calls. */
	} else if (*alive) {
		c->fetching = 0;
		const char *last = gcloud_last_line(g);
		if (g->timed_out) {
			snprintf(msg, sizeof msg, "token: %s config config-helper: no answer in %d s", c->gcloud,
			         GCLOUD_TIMEOUT_MS / 1000);
			fail = msg;
		} else if (g->term_signal) {
			snprintf(msg, sizeof msg, "token: %s config config-helper: killed by signal %d", c->gcloud,
			         g->term_signal);
			fail = msg;
		} else if (g->status != 0) {
			snprintf(msg, sizeof msg, "token: %s config config-helper: exit status %lld%s%.300s", c->gcloud,
			         (long long)g->status, last[0] ? ": " : "", last);
			fail = msg;
		} else if (g->too_long) {
			snprintf(msg, sizeof msg, "token: %s config config-helper: more than %u KiB on stdout",
			         c->gcloud, GCLOUD_OUT_MAX >> 10);
			fail = msg;
		} else {
			sd_gce_token_free(&c->token);
			if (sd_gce_token_from_gcloud(g->obuf, g->olen, (int64_t)time(NULL), &c->token, c->gcloud_account,
			                             sizeof c->gcloud_account, err, sizeof err) < 0) {
				snprintf(msg, sizeof msg, "token: %s", err);
				fail = msg;
			}
		}
		flush_waiting(c, fail);
	} else {
		free(alive);
	}
	OPENSSL_cleanse(g->obuf, GCLOUD_OUT_MAX + 1);
	free(g->obuf);
	free(g);
}

/* Starts gcloud; -1 with ERR when it cannot be started. */
static int gcloud_start(struct sd_gce_client *c, char *err, size_t errlen)
{
	uv_loop_t *loop = sd_http_loop(c->http);
	struct gcloud_run *g = calloc(1, sizeof *g);
	if (g)
		g->obuf = malloc(GCLOUD_OUT_MAX + 1);
	if (!g || !g->obuf) {
		if (g)
			free(g);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	g->c = c;
	g->alive = c->alive;
	uv_pipe_init(loop, &g->out, 0);
	uv_pipe_init(loop, &g->err, 0);
	g->out.data = g->err.data = g->proc.data = g;
	char a1[] = "config", a2[] = "config-helper", a3[] = "--format=json";
	char *args[] = {c->gcloud, a1, a2, a3, NULL};
	uv_stdio_container_t stdio[3] = {
		{.flags = UV_IGNORE},
		{.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&g->out},
		{.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&g->err},
	};
	uv_process_options_t o = {
		.exit_cb = gcloud_exit, .file = c->gcloud, .args = args, .stdio = stdio, .stdio_count = 3,
	};
	int rc = uv_spawn(loop, &g->proc, &o);
	if (rc < 0) {
		if (rc == UV_ENOENT)
			snprintf(err, errlen, "%s: not found (install the Google Cloud CLI and run gcloud auth login, "
			         "or give provider.credentials a service-account key file)", c->gcloud);
		else
			snprintf(err, errlen, "%s: cannot run: %s", c->gcloud, uv_strerror(rc));
		/* uv_spawn failed: the process handle still needs closing. */
		g->open_handles = 3;
		g->spawn_failed = 1;
		uv_close((uv_handle_t *)&g->proc, gcloud_closed);   /* still on the loop's list */
		uv_close((uv_handle_t *)&g->out, gcloud_closed);
		uv_close((uv_handle_t *)&g->err, gcloud_closed);
		return -1;
	}
	g->open_handles = 4;
	uv_timer_init(loop, &g->timer);
	g->timer.data = g;
	uv_timer_start(&g->timer, gcloud_timeout, GCLOUD_TIMEOUT_MS, 0);
	uv_read_start((uv_stream_t *)&g->out, gcloud_alloc, gcloud_read);
	uv_read_start((uv_stream_t *)&g->err, gcloud_alloc, gcloud_read);
	return 0;
}

static void fetch_token(struct sd_gce_client *c)
{
	if (c->fetching)
		return;
	if (c->gcloud && !c->have_key) {
		char err[400], msg[450];
		c->fetching = 1;
		if (gcloud_start(c, err, sizeof err) < 0) {
			c->fetching = 0;
			snprintf(msg, sizeof msg, "token: %s", err);
			flush_waiting(c, msg);
		}
		return;
	}
	char err[256], url[512], msg[300];
	struct token_req *t = malloc(sizeof *t);
	if (!t) {
		flush_waiting(c, "token: out of memory");
		return;
	}
	t->c = c;
	t->alive = c->alive;
	struct sd_http_request rq = {.label = "gce token", .idempotent = 1};
	char *body = NULL;
	if (c->have_key) {
		char jwt[SD_GCE_JWT_MAX];
		if (sd_gce_jwt_assertion(&c->key, (int64_t)time(NULL), SD_GCE_SCOPE_CLOUD_PLATFORM, jwt, sizeof jwt,
					 err, sizeof err) < 0) {
			free(t);
			snprintf(msg, sizeof msg, "token: %s", err);
			flush_waiting(c, msg);
			return;
		}
		size_t cap = strlen(jwt) * 3 + 128;
		body = malloc(cap);
		if (!body || sd_gce_token_request_body(jwt, body, cap) < 0) {
			free(body);
			free(t);
			flush_waiting(c, "token: the request body does not fit");
			return;
		}
		static const char *const form[] = {"Content-Type: application/x-www-form-urlencoded", NULL};
		rq.method = "POST";
		rq.url = c->key.token_uri;
		rq.headers = form;
		rq.body = body;
		rq.body_len = strlen(body);
	} else {
		static const char *const flavor[] = {"Metadata-Flavor: Google", NULL};
		snprintf(url, sizeof url, "http://%s/computeMetadata/v1/instance/service-accounts/default/token",
			 c->metadata_host);
		rq.method = "GET";
		rq.url = url;
		rq.headers = flavor;
	}
	c->fetching = 1;
	struct sd_http_call *hc = sd_http_send(c->http, &rq, on_token, t, err, sizeof err);
	if (body) {
		memset(body, 0, strlen(body));
		free(body);
	}
	if (!hc) {
		c->fetching = 0;
		free(t);
		snprintf(msg, sizeof msg, "token: %s", err);
		flush_waiting(c, msg);
	}
}

struct sd_gce_client *sd_gce_client_new(struct sd_http *http, const struct sd_gce_client_config *cfg,
					char *err, size_t errlen)
{
	if (!cfg->project || !*cfg->project) {
		snprintf(err, errlen, "gce: no project");
		return NULL;
	}
	struct sd_gce_client *c = calloc(1, sizeof *c);
	if (!c) {
		snprintf(err, errlen, "gce: out of memory");
		return NULL;
	}
	c->http = http;
	c->waiting_tail = &c->waiting;
	const char *mh = cfg->metadata_host ? cfg->metadata_host : getenv("GCE_METADATA_HOST");
	c->project = xstrdup(cfg->project);
	c->root = xstrdup(cfg->compute_root ? cfg->compute_root : SD_GCE_COMPUTE_ROOT);
	c->metadata_host = xstrdup(mh && *mh ? mh : "metadata.google.internal");
	c->gcloud = cfg->gcloud && !cfg->key_file ? xstrdup(cfg->gcloud) : NULL;
	c->alive = malloc(sizeof *c->alive);
	if (!c->project || !c->root || !c->metadata_host || !c->alive || (cfg->gcloud && !cfg->key_file && !c->gcloud)) {
		snprintf(err, errlen, "gce: out of memory");
		goto fail;
	}
	*c->alive = 1;
	if (cfg->key_file) {
		if (sd_gce_key_load(cfg->key_file, &c->key, err, errlen) < 0)
			goto fail;
		c->have_key = 1;
	}
	return c;
fail:
	free(c->alive);
	free(c->gcloud);
	free(c->project);
	free(c->root);
	free(c->metadata_host);
	free(c);
	return NULL;
}

void sd_gce_client_free(struct sd_gce_client *c)
{
	if (!c)
		return;
	struct gce_call *g = c->waiting;
	c->waiting = NULL;
	while (g) {
		struct gce_call *next = g->next;
		call_fail(g, 0, "cancelled", 1);
		g = next;
	}
	/* A token answer still in flight finds the flag cleared and frees it. */
	if (c->fetching)
		*c->alive = 0;
	else
		free(c->alive);
	sd_gce_token_free(&c->token);
	if (c->have_key)
		sd_gce_key_free(&c->key);
	free(c->gcloud);
	free(c->project);
	free(c->root);
	free(c->metadata_host);
	free(c);
}

int sd_gce_url(const struct sd_gce_client *c, const char *path, char *out, size_t outlen)
{
	int n = snprintf(out, outlen, "%s/projects/%s/%s", c->root, c->project, path);
	return n < 0 || (size_t)n >= outlen ? -1 : 0;
}

int sd_gce_call(struct sd_gce_client *c, const char *label, const char *method, const char *url,
		const char *body, int idempotent, sd_http_cb cb, void *arg, char *err, size_t errlen)
{
	if (!url || (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0) || strpbrk(url, " \r\n")) {
		snprintf(err, errlen, "gce: URL '%.80s' is not http(s):// without blanks", url ? url : "(null)");
		return -1;
	}
	struct gce_call *g = calloc(1, sizeof *g);
	if (!g) {
		snprintf(err, errlen, "gce: out of memory");
		return -1;
	}
	g->c = c;
	g->label = xstrdup(label ? label : method);
	g->method = xstrdup(method);
	g->url = xstrdup(url);
	g->body = xstrdup(body);
	g->idempotent = idempotent;
	g->cb = cb;
	g->arg = arg;
	if (!g->label || !g->method || !g->url || (body && !g->body)) {
		call_free(g);
		snprintf(err, errlen, "gce: out of memory");
		return -1;
	}
	if (token_fresh(c)) {
		send_now(g);
		return 0;
	}
	*c->waiting_tail = g;
	c->waiting_tail = &g->next;
	fetch_token(c);
	return 0;
}

const char *sd_gce_client_identity(const struct sd_gce_client *c)
{
	if (c->have_key)
		return c->key.client_email;
	if (c->gcloud)
		return c->gcloud_account[0] ? c->gcloud_account : "gcloud's active account";
	return "the metadata server's default service account";
}

double sd_gce_client_token_left(const struct sd_gce_client *c)
{
	if (!c->token.access_token)
		return -1;
	return (double)(c->token.expires_at - (int64_t)time(NULL));
}

struct sd_http *sd_gce_client_http(const struct sd_gce_client *c)
{
	return c->http;
}
