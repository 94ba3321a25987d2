/* src/provider/gce-client.c - Compute Engine calls with a fresh OAuth2
 * token (see gce-client.h). */
#include "config.h"
#include "src/provider/gce-client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "src/provider/gce-api.h"
#include "src/provider/gce-auth.h"

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
		if (error)
			call_fail(g, 0, error, 0);
		else
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

static void fetch_token(struct sd_gce_client *c)
{
	if (c->fetching)
		return;
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
	c->alive = malloc(sizeof *c->alive);
	if (!c->project || !c->root || !c->metadata_host || !c->alive) {
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
	return c->have_key ? c->key.client_email : "the metadata server's default service account";
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
