/* src/provider/http/http.c - libcurl multi on the libuv loop, with retries
 * (see http.h for the rules and their sources). */
#include "config.h"
#include "src/provider/http/http.h"

#include <curl/curl.h>
#include <math.h>
#include <openssl/rand.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct sd_http {
	uv_loop_t *loop;
	CURLM *multi;
	uv_timer_t timer;        /* curl's timeout */
	struct sd_http_policy policy;
	sd_http_log_fn log;
	void *log_arg;
	struct sd_http_call *calls; /* not yet ended, a doubly linked list */
	int ncalls;
	int open_handles;        /* uv handles not yet closed (timer, polls, back-off timers) */
	struct sock_ctx *socks;  /* the sockets curl has us watch */
	int closing;
	uint64_t rng;
	void (*done)(void *);
	void *done_arg;
	struct sd_api_op *ops;   /* the cloud operations on this client not yet ended (api-op.h) */
};

struct sd_http_call {
	struct sd_http *h;
	struct sd_http_call *prev, *next;
	CURL *easy;
	struct curl_slist *headers;
	char *label, *method, *url, *url_shown;
	char *body;
	size_t body_len;
	int idempotent;
	int (*retry_answer)(long status, const char *body, size_t body_len);
	int (*final_answer)(long status, const char *body, size_t body_len);
	double timeout_s;
	int max_attempts;
	int attempt;          /* attempts started */
	int in_multi;         /* easy handle added to the multi */
	uv_timer_t backoff;
	uint64_t t0_ns, attempt_t0_ns;
	char *ans;            /* the answer's body */
	size_t ans_len, ans_cap;
	int ans_over;         /* more than SD_HTTP_MAX_BODY came */
	double retry_after_s; /* from the answer's Retry-After, < 0 if none */
	char curl_err[CURL_ERROR_SIZE];
	sd_http_cb cb;
	void *arg;
};

struct sock_ctx {
	uv_poll_t poll;
	struct sd_http *h;
	curl_socket_t fd;
	struct sock_ctx *prev, *next;
};

static void http_maybe_done(struct sd_http *h)
{
	if (h->closing && h->open_handles == 0 && h->ncalls == 0) {
		void (*done)(void *) = h->done;
		void *arg = h->done_arg;
		free(h);
		if (done)
			done(arg);
	}
}

static void handle_closed(uv_handle_t *hd)
{
	struct sd_http *h = hd->data;
	h->open_handles--;
	http_maybe_done(h);
}

static void sock_closed(uv_handle_t *hd)
{
	struct sock_ctx *s = hd->data;
	struct sd_http *h = s->h;
	free(s);
	h->open_handles--;
	http_maybe_done(h);
}

/* xorshift64*: the jitter needs spread, not secrecy. */
static double http_uniform(struct sd_http *h)
{
	h->rng ^= h->rng >> 12;
	h->rng ^= h->rng << 25;
	h->rng ^= h->rng >> 27;
	return (double)((h->rng * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

static double secs_since(uint64_t t0_ns)
{
	return (double)(uv_hrtime() - t0_ns) / 1e9;
}

static void call_free(uv_handle_t *hd)
{
	struct sd_http_call *c = hd->data;
	struct sd_http *h = c->h;
	curl_easy_cleanup(c->easy);
	curl_slist_free_all(c->headers);
	free(c->label);
	free(c->method);
	free(c->url);
	free(c->url_shown);
	free(c->body);
	free(c->ans);
	free(c);
	h->open_handles--;
	http_maybe_done(h);
}

static void call_unlink(struct sd_http_call *c)
{
	struct sd_http *h = c->h;
	if (c->prev)
		c->prev->next = c->next;
	else
		h->calls = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->prev = c->next = NULL;
	h->ncalls--;
}

/* Stops watching S and closes its handle (freed when closed). */
static void sock_drop(struct sd_http *h, struct sock_ctx *s)
{
	uv_poll_stop(&s->poll);
	if (s->prev)
		s->prev->next = s->next;
	else
		h->socks = s->next;
	if (s->next)
		s->next->prev = s->prev;
	uv_close((uv_handle_t *)&s->poll, sock_closed);
}

/* Ends C: out of the multi, callback, then freed once its timer closed. */
static void call_finish(struct sd_http_call *c, long status, const char *error, int cancelled)
{
	struct sd_http *h = c->h;
	if (c->in_multi) {
		curl_multi_remove_handle(h->multi, c->easy);
		c->in_multi = 0;
	}
	uv_timer_stop(&c->backoff);
	call_unlink(c);
	if (!c->ans) {
		c->ans = calloc(1, 1);
		c->ans_len = 0;
	}
	struct sd_http_response r = {
		.status = status,
		.body = c->ans ? c->ans : "",
		.body_len = c->ans ? c->ans_len : 0,
		.error = error,
		.attempts = c->attempt,
		.elapsed_s = secs_since(c->t0_ns),
		.cancelled = cancelled,
	};
	/* C's timer is still open, so H outlives the callback even when the
	 * callback closes it. */
	c->cb(c->arg, &r);
	uv_close((uv_handle_t *)&c->backoff, call_free);
}

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
	struct sd_http_call *c = ud;
	size_t len = size * n;
	if (c->ans_len + len > SD_HTTP_MAX_BODY) {
		c->ans_over = 1;
		return 0; /* curl ends the transfer with CURLE_WRITE_ERROR */
	}
	if (c->ans_len + len + 1 > c->ans_cap) {
		size_t cap = c->ans_cap ? c->ans_cap : 4096;
		while (cap < c->ans_len + len + 1)
			cap *= 2;
		char *a = realloc(c->ans, cap);
		if (!a)
			return 0;
		c->ans = a;
		c->ans_cap = cap;
	}
	memcpy(c->ans + c->ans_len, p, len);
	c->ans_len += len;
	c->ans[c->ans_len] = '\0';
	return len;
}

/* Retry-After: delay-seconds only (the clouds send that form); an
 * HTTP-date is ignored and the back-off applies. */
static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
	struct sd_http_call *c = ud;
	size_t len = size * n;
	static const char name[] = "retry-after:";
	if (len > sizeof name - 1 && strncasecmp(p, name, sizeof name - 1) == 0) {
		char buf[32];
		size_t vl = len - (sizeof name - 1);
		if (vl >= sizeof buf)
			vl = sizeof buf - 1;
		memcpy(buf, p + sizeof name - 1, vl);
		buf[vl] = '\0';
		char *e;
		long v = strtol(buf, &e, 10);
		while (*e == ' ' || *e == '\r' || *e == '\n' || *e == '\t')
			e++;
		if (e != buf && *e == '\0' && v >= 0)
			c->retry_after_s = (double)v;
	}
	return len;
}

static int call_start_attempt(struct sd_http_call *c, char *err, size_t errlen)
{
	struct sd_http *h = c->h;
	CURL *e = c->easy;
	curl_easy_reset(e);
	curl_easy_setopt(e, CURLOPT_URL, c->url);
	curl_easy_setopt(e, CURLOPT_PRIVATE, c);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, c->curl_err);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, c);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, c);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)(c->timeout_s * 1000));
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)(h->policy.connect_timeout_s * 1000));
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, c->headers);
	curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "");
	/* libcurl resends a request by itself, on a fresh connection, when a
	 * reused one dies before any answer (its "connection died, retrying"):
	 * a request that is not idempotent gets a connection of its own, so
	 * that it is never sent twice that way either. */
	if (!c->idempotent)
		curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L);
	if (strcmp(c->method, "GET") == 0) {
		curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
	} else {
		curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, c->method);
		if (c->body || strcmp(c->method, "DELETE") != 0) {
			curl_easy_setopt(e, CURLOPT_POSTFIELDS, c->body ? c->body : "");
			curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)c->body_len);
		}
	}
	c->curl_err[0] = '\0';
	c->ans_len = 0;
	if (c->ans)
		c->ans[0] = '\0';
	c->ans_over = 0;
	c->retry_after_s = -1;
	c->attempt++;
	c->attempt_t0_ns = uv_hrtime();
	CURLMcode mc = curl_multi_add_handle(h->multi, e);
	if (mc != CURLM_OK) {
		snprintf(err, errlen, "http: %s", curl_multi_strerror(mc));
		return -1;
	}
	c->in_multi = 1;
	return 0;
}

static void on_backoff(uv_timer_t *t)
{
	struct sd_http_call *c = t->data;
	char err[256];
	if (call_start_attempt(c, err, sizeof err) < 0)
		call_finish(c, 0, err, 0);
}

static int status_retryable(long s)
{
	return s == 408 || s == 429 || s == 500 || s == 502 || s == 503 || s == 504;
}

/* CURLE codes meaning that no byte of the request left this host. */
static int never_sent(CURLcode rc)
{
	return rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST ||
	       rc == CURLE_COULDNT_RESOLVE_PROXY;
}

static void call_attempt_done(struct sd_http_call *c, CURLcode rc)
{
	struct sd_http *h = c->h;
	long status = 0;
	curl_off_t sent = 0;
	curl_multi_remove_handle(h->multi, c->easy);
	c->in_multi = 0;
	if (rc == CURLE_OK)
		curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_getinfo(c->easy, CURLINFO_REQUEST_SIZE, &sent);

	char error[CURL_ERROR_SIZE + 64];
	error[0] = '\0';
	int retry = 0;
	if (rc != CURLE_OK) {
		if (c->ans_over)
			snprintf(error, sizeof error, "answer over %u MiB", SD_HTTP_MAX_BODY >> 20);
		else
			snprintf(error, sizeof error, "%s", c->curl_err[0] ? c->curl_err : curl_easy_strerror(rc));
		retry = !c->ans_over && (c->idempotent || (never_sent(rc) && sent == 0));
	} else {
		const char *body = c->ans ? c->ans : "";
		size_t body_len = c->ans ? c->ans_len : 0;
		if (status_retryable(status))
			retry = c->idempotent && !(c->final_answer && c->final_answer(status, body, body_len));
		else
			retry = c->idempotent && status >= 400 && c->retry_answer &&
				c->retry_answer(status, body, body_len);
	}
	double wait = -1;
	if (retry && c->attempt < c->max_attempts && !h->closing) {
		double ceil_s = h->policy.backoff_base_s * ldexp(1.0, c->attempt - 1);
		if (ceil_s > h->policy.backoff_cap_s)
			ceil_s = h->policy.backoff_cap_s;
		wait = http_uniform(h) * ceil_s;
		if (c->retry_after_s > h->policy.retry_after_max_s)
			wait = -1; /* the server asks for more patience than we have */
		else if (c->retry_after_s > wait)
			wait = c->retry_after_s;
	}
	if (h->log) {
		struct sd_http_attempt a = {
			.label = c->label, .method = c->method, .url = c->url_shown,
			.attempt = c->attempt, .status = status, .error = error,
			.elapsed_s = secs_since(c->attempt_t0_ns), .retry_in_s = wait,
		};
		h->log(h->log_arg, &a);
	}
	if (wait >= 0) {
		uv_timer_start(&c->backoff, on_backoff, (uint64_t)(wait * 1000.0 + 0.5), 0);
		return;
	}
	if (rc != CURLE_OK && c->attempt > 1) {
		size_t l = strlen(error);
		snprintf(error + l, sizeof error - l, " (after %d attempts)", c->attempt);
	}
	call_finish(c, status, error, 0);
}

static void check_multi_info(struct sd_http *h)
{
	CURLMsg *m;
	int left;
	while ((m = curl_multi_info_read(h->multi, &left))) {
		if (m->msg != CURLMSG_DONE)
			continue;
		char *priv = NULL;
		CURLcode rc = m->data.result;
		curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &priv);
		if (priv)
			call_attempt_done((struct sd_http_call *)(void *)priv, rc);
	}
}

static void on_poll(uv_poll_t *p, int status, int events)
{
	struct sock_ctx *s = p->data;
	struct sd_http *h = s->h;
	int flags = 0, running;
	if (status < 0)
		flags = CURL_CSELECT_ERR;
	if (events & UV_READABLE)
		flags |= CURL_CSELECT_IN;
	if (events & UV_WRITABLE)
		flags |= CURL_CSELECT_OUT;
	curl_multi_socket_action(h->multi, s->fd, flags, &running);
	check_multi_info(h);
}

static void on_timer(uv_timer_t *t)
{
	struct sd_http *h = t->data;
	int running;
	curl_multi_socket_action(h->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	check_multi_info(h);
}

/* CURLMOPT_SOCKETFUNCTION: watch FD as curl asks (or stop). */
static int on_socket(CURL *e, curl_socket_t fd, int what, void *ud, void *sockp)
{
	struct sd_http *h = ud;
	struct sock_ctx *s = sockp;
	(void)e;
	if (what == CURL_POLL_REMOVE) {
		if (s) {
			curl_multi_assign(h->multi, fd, NULL);
			sock_drop(h, s);
		}
		return 0;
	}
	if (!s) {
		s = calloc(1, sizeof *s);
		if (!s)
			return -1;
		s->h = h;
		s->fd = fd;
		if (uv_poll_init_socket(h->loop, &s->poll, fd) != 0) {
			free(s);
			return -1;
		}
		s->poll.data = s;
		s->next = h->socks;
		if (h->socks)
			h->socks->prev = s;
		h->socks = s;
		h->open_handles++;
		curl_multi_assign(h->multi, fd, s);
	}
	int ev = 0;
	if (what == CURL_POLL_IN || what == CURL_POLL_INOUT)
		ev |= UV_READABLE;
	if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT)
		ev |= UV_WRITABLE;
	uv_poll_start(&s->poll, ev, on_poll);
	return 0;
}

/* CURLMOPT_TIMERFUNCTION: curl wants to be called in TIMEOUT_MS (-1: never).
 * A 0 goes through the loop too: curl forbids calling back into it here. */
static int on_curl_timer(CURLM *m, long timeout_ms, void *ud)
{
	struct sd_http *h = ud;
	(void)m;
	if (timeout_ms < 0)
		uv_timer_stop(&h->timer);
	else
		uv_timer_start(&h->timer, on_timer, (uint64_t)timeout_ms, 0);
	return 0;
}

struct sd_http *sd_http_new(uv_loop_t *loop, const struct sd_http_policy *policy,
			    sd_http_log_fn log, void *log_arg, char *err, size_t errlen)
{
	static int curl_ready;
	if (!curl_ready) {
		CURLcode rc = curl_global_init(CURL_GLOBAL_DEFAULT);
		if (rc != CURLE_OK) {
			snprintf(err, errlen, "http: libcurl: %s", curl_easy_strerror(rc));
			return NULL;
		}
		curl_ready = 1;
	}
	struct sd_http *h = calloc(1, sizeof *h);
	if (!h) {
		snprintf(err, errlen, "http: out of memory");
		return NULL;
	}
	struct sd_http_policy p = policy ? *policy : (struct sd_http_policy){0};
	if (p.max_attempts <= 0)
		p.max_attempts = 5;
	if (p.max_attempts > SD_HTTP_MAX_ATTEMPTS)
		p.max_attempts = SD_HTTP_MAX_ATTEMPTS;
	if (!(p.backoff_base_s > 0))
		p.backoff_base_s = 0.5;
	if (!(p.backoff_cap_s > 0))
		p.backoff_cap_s = 30;
	if (!(p.retry_after_max_s > 0))
		p.retry_after_max_s = 120;
	if (!(p.timeout_s > 0))
		p.timeout_s = 60;
	if (!(p.connect_timeout_s > 0))
		p.connect_timeout_s = 10;
	h->policy = p;
	h->rng = p.seed ? p.seed : uv_hrtime();
	h->rng |= 1;
	h->loop = loop;
	h->log = log;
	h->log_arg = log_arg;
	h->multi = curl_multi_init();
	if (!h->multi) {
		free(h);
		snprintf(err, errlen, "http: curl_multi_init failed");
		return NULL;
	}
	curl_multi_setopt(h->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
	curl_multi_setopt(h->multi, CURLMOPT_SOCKETDATA, h);
	curl_multi_setopt(h->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer);
	curl_multi_setopt(h->multi, CURLMOPT_TIMERDATA, h);
	uv_timer_init(loop, &h->timer);
	h->timer.data = h;
	h->open_handles = 1;
	return h;
}

static int method_ok(const char *m)
{
	static const char *const ok[] = {"GET", "POST", "PUT", "DELETE", "PATCH"};
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
		if (strcmp(m, ok[i]) == 0)
			return 1;
	return 0;
}

struct sd_http_call *sd_http_send(struct sd_http *h, const struct sd_http_request *req,
				  sd_http_cb cb, void *arg, char *err, size_t errlen)
{
	if (h->closing) {
		snprintf(err, errlen, "http: the client is closing");
		return NULL;
	}
	if (!req->method || !method_ok(req->method)) {
		snprintf(err, errlen, "http: method '%s' not one of GET, POST, PUT, DELETE, PATCH",
			 req->method ? req->method : "(null)");
		return NULL;
	}
	if (!req->url || (strncmp(req->url, "http://", 7) != 0 && strncmp(req->url, "https://", 8) != 0)) {
		snprintf(err, errlen, "http: URL '%.80s' is not http:// or https://", req->url ? req->url : "(null)");
		return NULL;
	}
	if (strpbrk(req->url, " \r\n")) {
		snprintf(err, errlen, "http: URL holds a blank or a line break");
		return NULL;
	}
	if (req->body_len && !req->body) {
		snprintf(err, errlen, "http: body_len %zu with no body", req->body_len);
		return NULL;
	}
	struct sd_http_call *c = calloc(1, sizeof *c);
	if (!c)
		goto oom;
	c->h = h;
	c->cb = cb;
	c->arg = arg;
	c->easy = curl_easy_init();
	c->method = strdup(req->method);
	c->label = strdup(req->label ? req->label : req->method);
	c->url = strdup(req->url);
	size_t ul = strlen(req->url) + 1;
	c->url_shown = malloc(ul + 16 * 8); /* room for a few "REDACTED"s */
	if (!c->easy || !c->method || !c->label || !c->url || !c->url_shown)
		goto oom_call;
	sd_http_redact_url(req->url, c->url_shown, ul + 16 * 8);
	if (req->body_len) {
		c->body = malloc(req->body_len);
		if (!c->body)
			goto oom_call;
		memcpy(c->body, req->body, req->body_len);
		c->body_len = req->body_len;
	}
	/* curl would otherwise add "Expect: 100-continue" to big bodies and
	 * wait a second for an answer the fakes and some proxies never send. */
	struct curl_slist *hl = curl_slist_append(NULL, "Expect:");
	if (!hl)
		goto oom_call;
	c->headers = hl;
	for (const char *const *p = req->headers; p && *p; p++) {
		if (strpbrk(*p, "\r\n") || !strchr(*p, ':')) {
			snprintf(err, errlen, "http: header %zu is not one \"Name: value\" line",
				 (size_t)(p - req->headers) + 1);
			goto fail_call;
		}
		hl = curl_slist_append(c->headers, *p);
		if (!hl)
			goto oom_call;
		c->headers = hl;
	}
	c->idempotent = req->idempotent;
	c->retry_answer = req->retry_answer;
	c->final_answer = req->final_answer;
	c->timeout_s = req->timeout_s > 0 ? req->timeout_s : h->policy.timeout_s;
	c->max_attempts = req->max_attempts > 0 ? req->max_attempts : h->policy.max_attempts;
	if (c->max_attempts > SD_HTTP_MAX_ATTEMPTS)
		c->max_attempts = SD_HTTP_MAX_ATTEMPTS;
	c->t0_ns = uv_hrtime();
	uv_timer_init(h->loop, &c->backoff);
	c->backoff.data = c;
	h->open_handles++;
	c->next = h->calls;
	if (h->calls)
		h->calls->prev = c;
	h->calls = c;
	h->ncalls++;
	if (call_start_attempt(c, err, errlen) < 0) {
		call_unlink(c);
		uv_close((uv_handle_t *)&c->backoff, call_free);
		return NULL;
	}
	return c;
oom_call:
	snprintf(err, errlen, "http: out of memory");
fail_call:
	if (c->easy)
		curl_easy_cleanup(c->easy);
	curl_slist_free_all(c->headers);
	free(c->method);
	free(c->label);
	free(c->url);
	free(c->url_shown);
	free(c->body);
	free(c);
	return NULL;
oom:
	snprintf(err, errlen, "http: out of memory");
	return NULL;
}

void sd_http_cancel(struct sd_http_call *c)
{
	call_finish(c, 0, "cancelled", 1);
}

struct sd_api_op **sd_http_ops(struct sd_http *h)
{
	return &h->ops;
}

uv_loop_t *sd_http_loop(const struct sd_http *h)
{
	return h->loop;
}

int sd_http_pending(const struct sd_http *h)
{
	return h->ncalls;
}

void sd_http_close(struct sd_http *h, void (*done)(void *), void *done_arg)
{
	if (h->closing)
		return;
	h->closing = 1;
	h->done = done;
	h->done_arg = done_arg;
	while (h->calls)
		call_finish(h->calls, 0, "cancelled", 1);
	/* Idle connections in curl's cache keep their sockets: stop watching
	 * them before curl closes them (a poll must stop before its fd
	 * closes), and hear no more of curl's socket changes. */
	while (h->socks)
		sock_drop(h, h->socks);
	curl_multi_setopt(h->multi, CURLMOPT_SOCKETFUNCTION, NULL);
	curl_multi_setopt(h->multi, CURLMOPT_TIMERFUNCTION, NULL);
	curl_multi_cleanup(h->multi);
	h->multi = NULL;
	uv_timer_stop(&h->timer);
	uv_close((uv_handle_t *)&h->timer, handle_closed);
}

static int secret_param(const char *name, size_t len)
{
	static const char *const names[] = {"access_token", "key", "token", "X-Amz-Signature",
					    "X-Amz-Credential", "X-Amz-Security-Token", "Signature"};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (strlen(names[i]) == len && strncasecmp(name, names[i], len) == 0)
			return 1;
	return 0;
}

void sd_http_redact_url(const char *url, char *out, size_t outlen)
{
	size_t o = 0;
	if (outlen == 0)
		return;
#define PUT(ch) do { if (o + 1 < outlen) out[o++] = (ch); } while (0)
	const char *q = strchr(url, '?');
	const char *p = url;
	for (; *p && (!q || p <= q); p++)
		PUT(*p);
	while (q && *p) {
		const char *end = p + strcspn(p, "&#");
		const char *eq = memchr(p, '=', (size_t)(end - p));
		if (eq && secret_param(p, (size_t)(eq - p))) {
			for (const char *s = p; s <= eq; s++)
				PUT(*s);
			for (const char *s = "REDACTED"; *s; s++)
				PUT(*s);
		} else {
			for (const char *s = p; s < end; s++)
				PUT(*s);
		}
		p = end;
		if (*p == '&') {
			PUT('&');
			p++;
		} else if (*p == '#') {
			for (; *p; p++)
				PUT(*p);
		}
	}
#undef PUT
	out[o] = '\0';
}

int sd_http_request_id(char out[37])
{
	unsigned char b[16];
	if (RAND_bytes(b, sizeof b) != 1)
		return -1;
	b[6] = (unsigned char)((b[6] & 0x0f) | 0x40); /* version 4 (RFC 9562 5.4) */
	b[8] = (unsigned char)((b[8] & 0x3f) | 0x80); /* variant 10 */
	snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
		 b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
	return 0;
}
