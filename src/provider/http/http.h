/* src/provider/http/http.h - HTTP requests on the controller's libuv loop, for
 * the cloud providers (gce, aws): libcurl's multi interface driven by the
 * loop's own poll and timer handles, so that no request ever blocks the
 * loop (the cockpit keeps drawing and answering keys while hundreds of
 * requests are in flight).
 *
 * The glue follows libcurl's documented "multi_socket" way of embedding
 * (curl_multi_socket_action(3), CURLMOPT_SOCKETFUNCTION(3),
 * CURLMOPT_TIMERFUNCTION(3); libcurl's docs/examples/multi-uv.c is the
 * model): curl says which socket it waits on and how long, the loop tells
 * curl when a socket is ready or the time is up.
 *
 * Retries.  An attempt that fails in a way worth retrying is sent again
 * after a back-off: "full jitter", a uniform random wait in
 * [0, min(cap, base * 2^(attempt-1))] (AWS Architecture Blog, "Exponential
 * Backoff And Jitter", 2015; the AWS and Google client libraries do the
 * same), or the answer's Retry-After seconds when that is longer (RFC 9110
 * 10.2.3).  Worth retrying: HTTP 408, 429, 500, 502, 503, 504, an answer
 * the request's retry_answer says is, and transport errors (refused,
 * reset, timed out).  A request that may already have
 * reached the server is sent again only when it is idempotent
 * (sd_http_request.idempotent: GET, DELETE, a GCE insert carrying a
 * requestId, an EC2 RunInstances carrying a ClientToken); a request that
 * is not is retried only when libcurl sent none of it (connection refused,
 * name not resolved), so nothing is ever sent twice without an
 * idempotency key.
 *
 * Secrets.  Headers and bodies are never logged.  The attempt log
 * (sd_http_log_fn) gets the URL with the values of the query parameters
 * that carry credentials replaced by "REDACTED" (sd_http_redact_url).
 *
 * Threads: one struct sd_http belongs to one loop and is used from that
 * loop's thread only. */
#ifndef SD_PROVIDER_HTTP_HTTP_H
#define SD_PROVIDER_HTTP_HTTP_H

#include <stddef.h>
#include <uv.h>

/* The most bytes of an answer's body kept (the rest fails the request with
 * "answer over 16 MiB"): a page of instances or SKUs is far smaller. */
#define SD_HTTP_MAX_BODY (16u << 20)
/* The most attempts a request makes, whatever the policy says. */
#define SD_HTTP_MAX_ATTEMPTS 20

struct sd_http;
struct sd_http_call;

/* How requests are sent and retried.  A zero field takes the default in
 * brackets. */
struct sd_http_policy {
	int max_attempts;         /* first send + retries, 1..SD_HTTP_MAX_ATTEMPTS [5] */
	double backoff_base_s;    /* the first retry waits up to this [0.5 s] */
	double backoff_cap_s;     /* no wait longer than this, Retry-After aside [30 s] */
	double retry_after_max_s; /* a longer Retry-After ends the retries [120 s] */
	double timeout_s;         /* whole attempt, connect to last byte [60 s] */
	double connect_timeout_s; /* TCP + TLS set-up [10 s] */
	unsigned long seed;       /* jitter's random seed; 0: from the clock */
};

/* What one attempt did, given to the log function after each attempt. */
struct sd_http_attempt {
	const char *label;   /* the request's label (e.g. "gce instances.insert") */
	const char *method;  /* "GET", "POST", ... */
	const char *url;     /* redacted (sd_http_redact_url) */
	int attempt;         /* 1 for the first send */
	long status;         /* HTTP status, 0 when no answer came */
	const char *error;   /* transport error in words, "" when an answer came */
	double elapsed_s;    /* this attempt's time */
	double retry_in_s;   /* the wait before the next attempt; < 0: no retry */
};
typedef void (*sd_http_log_fn)(void *arg, const struct sd_http_attempt *a);

/* A request.  sd_http_send copies every field: nothing here need outlive
 * the call. */
struct sd_http_request {
	const char *label;          /* for the log; NULL: the method */
	const char *method;         /* "GET", "POST", "PUT", "DELETE", "PATCH" */
	const char *url;            /* http:// or https:// only */
	const char *const *headers; /* NULL-terminated "Name: value" lines, or NULL */
	const void *body;           /* sent as is; NULL with body_len 0: none */
	size_t body_len;
	int idempotent;             /* 1: may be sent again after it may have arrived */
	double timeout_s;           /* 0: the policy's */
	int max_attempts;           /* 0: the policy's */
	/* An answer whose status alone is not worth retrying but whose body
	 * says it is (GCE's 403 rateLimitExceeded, sd_gce_retryable_answer):
	 * called with each answer of status >= 400 not already retried, and
	 * its body (BODY_LEN bytes, NUL-terminated); 1 retries it as a 429
	 * would be (idempotent requests only).  NULL: the status decides. */
	int (*retry_answer)(long status, const char *body, size_t body_len);
	/* The reverse: called with each answer whose status would be retried
	 * (500, 503, ...) and its body; 1 makes it final (EC2's
	 * InsufficientInstanceCapacity comes with a 500, and the same zone
	 * asked again only wastes the time a failover needs).  NULL: none. */
	int (*final_answer)(long status, const char *body, size_t body_len);
};

/* The outcome, given to the callback once.  The pointers live until the
 * callback returns. */
struct sd_http_response {
	long status;       /* final HTTP status; 0: no answer (error says why) */
	const char *body;  /* the answer's body, NUL-terminated; "" when none */
	size_t body_len;
	const char *error; /* "" when an answer came; else e.g. "Connection refused
	                    * (after 5 attempts)" or "cancelled" */
	int attempts;      /* attempts made, >= 1 (0 when cancelled before any) */
	double elapsed_s;  /* from sd_http_send to now, back-offs included */
	int cancelled;     /* 1: ended by sd_http_cancel or sd_http_close */
	int no_credentials;   /* 1: never sent, as a cloud client (gce-client.h,
	                       * aws-client.h) could get no credentials: no token,
	                       * no key, no instance role; error says why, after
	                       * "token: " or "credentials: " */
};
typedef void (*sd_http_cb)(void *arg, const struct sd_http_response *r);

/* A client on LOOP.  POLICY may be NULL (all defaults).  LOG, if not
 * NULL, hears every attempt.  Returns NULL with ERR filled when libcurl
 * cannot be set up. */
struct sd_http *sd_http_new(uv_loop_t *loop, const struct sd_http_policy *policy,
			    sd_http_log_fn log, void *log_arg, char *err, size_t errlen);

/* Starts REQ; CB runs on the loop when it ends (never from inside this
 * call).  Returns the call, valid until CB starts (for sd_http_cancel), or
 * NULL with ERR filled when the request is malformed (bad method or URL
 * scheme, a header with a line break) or the client is closing. */
struct sd_http_call *sd_http_send(struct sd_http *h, const struct sd_http_request *req,
				  sd_http_cb cb, void *arg, char *err, size_t errlen);

/* Ends CALL now: its callback runs at once with cancelled = 1. */
void sd_http_cancel(struct sd_http_call *call);

struct sd_api_op;
/* The head of H's list of cloud operations not yet ended (api-op.h). */
struct sd_api_op **sd_http_ops(struct sd_http *h);

/* The loop H runs on. */
uv_loop_t *sd_http_loop(const struct sd_http *h);

/* The number of calls not yet ended (in flight or waiting to retry). */
int sd_http_pending(const struct sd_http *h);

/* Cancels every call (their callbacks run, cancelled = 1), then frees the
 * client once its loop handles have closed and calls DONE(DONE_ARG) (if
 * not NULL).  H must not be used after this call. */
void sd_http_close(struct sd_http *h, void (*done)(void *), void *done_arg);

/* Copies URL into OUT (OUTLEN bytes, truncated, always NUL-terminated)
 * with the value of every query parameter whose name is one that carries
 * a credential (access_token, key, token, X-Amz-Signature,
 * X-Amz-Credential, X-Amz-Security-Token, Signature; names compared
 * without case) replaced by REDACTED. */
void sd_http_redact_url(const char *url, char *out, size_t outlen);

/* A random (version 4) UUID, 36 characters and a NUL, from OpenSSL's
 * RAND_bytes: the token that makes a cloud request idempotent (GCE's
 * requestId, EC2's ClientToken).  -1 when the generator fails. */
int sd_http_request_id(char out[37]);

#endif
