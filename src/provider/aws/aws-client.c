/* src/provider/aws/aws-client.c - signed EC2 Query API calls (aws-client.h). */
#include "config.h"
#include "src/provider/aws/aws-client.h"

#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "src/provider/aws/aws-creds.h"
#include "src/provider/aws/aws-api.h"

/* A call waiting for the instance role's key. */
struct aws_call {
	struct aws_call *next;
	char label[96];
	char target[128];            /* X-Amz-Target of a JSON 1.1 call; "": EC2 Query */
	char *body;
	size_t blen;
	int idempotent;
	sd_http_cb cb;
	void *arg;
};

struct sd_aws_client {
	struct sd_http *http;
	char *region, *endpoint, *host;
	char *q_endpoint, *q_host;   /* Service Quotas */
	struct sd_aws_creds cr;
	char identity[32];
	/* The instance role (no key in the chain): */
	int role;                    /* the key comes from IMDS */
	char imds[256];              /* its endpoint, "http://169.254.169.254" */
	double imds_timeout_s;
	int imds_attempts;
	char chain_err[512];         /* where the chain looked, for the message */
	char role_name[128];
	char imds_token[256];        /* the IMDSv2 session token; wiped */
	long long refresh_at;         /* the role key is asked for again from then */
	int fetching;
	struct aws_call *waiting, **waiting_tail;
	int *alive;                  /* cleared by free for an answer still coming */
};

static int send_signed(struct sd_aws_client *c, const struct aws_call *w, char *err, size_t errlen);

/* An EC2 error answer sent with a 5xx that asking again cannot help: its
 * <Code> says the zone, the region or the account cannot have it now
 * (InsufficientInstanceCapacity comes with a 500).  The caller fails over. */
static int ec2_final_answer(long status, const char *body, size_t body_len)
{
	struct sd_ec2_error e;
	char err[64];
	(void)status;
	if (sd_ec2_error_parse(body, body_len, &e, err, sizeof err) != 1)
		return 0;
	const char *scope = sd_ec2_classify(e.code);
	return !strcmp(scope, "zone") || !strcmp(scope, "region") || !strcmp(scope, "cloud");
}

void sd_aws_client_free(struct sd_aws_client *c)
{
	if (!c)
		return;
	free(c->region);
	free(c->endpoint);
	free(c->host);
	free(c->q_endpoint);
	free(c->q_host);
	sd_aws_creds_clear(&c->cr);
	OPENSSL_cleanse(c->imds_token, sizeof c->imds_token);
	struct aws_call *w = c->waiting;
	c->waiting = NULL;
	while (w) {
		struct aws_call *next = w->next;
		struct sd_http_response r = {.body = "", .error = "cancelled", .cancelled = 1};
		w->cb(w->arg, &r);
		free(w->body);
		free(w);
		w = next;
	}
	if (c->alive) {
		if (c->fetching)
			*c->alive = 0;   /* the answer in flight frees it */
		else
			free(c->alive);
	}
	free(c);
}

/* ---- the instance role's key, from IMDSv2 on the loop ----
 * PUT /latest/api/token (a session token, 6 h), GET
 * /latest/meta-data/iam/security-credentials/ (the role's name), GET
 * .../security-credentials/ROLE (the key, botocore's
 * InstanceMetadataFetcher does the same three).  IMDSv1 (no session
 * token) is not tried. */
enum { IMDS_TOKEN, IMDS_ROLE, IMDS_KEY };

struct imds_req {
	struct sd_aws_client *c;
	int *alive;
	int step;
};

static void set_identity(struct sd_aws_client *c)
{
	size_t kl = strlen(c->cr.key_id);
	snprintf(c->identity, sizeof c->identity, "%.4s...%s", c->cr.key_id, kl > 8 ? c->cr.key_id + kl - 4 : "");
}

static void flush_waiting(struct sd_aws_client *c, const char *error)
{
	struct aws_call *w = c->waiting;
	c->waiting = NULL;
	c->waiting_tail = &c->waiting;
	while (w) {
		struct aws_call *next = w->next;
		char err[600];
		if (error || send_signed(c, w, err, sizeof err) < 0) {
			struct sd_http_response r = {.body = "", .error = error ? error : err,
			                             .no_credentials = error != NULL};
			w->cb(w->arg, &r);
		}
		free(w->body);
		free(w);
		w = next;
	}
}

static void imds_send(struct sd_aws_client *c, int step);

static void imds_fail(struct sd_aws_client *c, const char *why)
{
	char msg[1600];
	snprintf(msg, sizeof msg, "credentials: %s; and no instance role: %.900s", c->chain_err, why);
	c->fetching = 0;
	OPENSSL_cleanse(c->imds_token, sizeof c->imds_token);
	flush_waiting(c, msg);
}

static void on_imds(void *arg, const struct sd_http_response *r)
{
	struct imds_req *q = arg;
	struct sd_aws_client *c = q->c;
	int *alive = q->alive, step = q->step;
	free(q);
	if (!*alive) {
		free(alive);
		return;
	}
	char status[300];
	if (r->status == 0)
		snprintf(status, sizeof status, "%.250s", r->error);
	else
		snprintf(status, sizeof status, "HTTP %ld", r->status);
	switch (step) {
	case IMDS_TOKEN:
		if (r->status != 200 || r->body_len == 0 || r->body_len >= sizeof c->imds_token ||
		    strpbrk(r->body, " \r\n")) {
			char m[700];
			snprintf(m, sizeof m, "%s/latest/api/token: %s", c->imds, r->status == 200 ? "not a token" : status);
			imds_fail(c, m);
			return;
		}
		memcpy(c->imds_token, r->body, r->body_len + 1);
		imds_send(c, IMDS_ROLE);
		return;
	case IMDS_ROLE: {
		size_t n = strcspn(r->body, "\r\n");
		if (r->status == 404) {
			imds_fail(c, "the instance has no IAM role (IMDS answers 404 for iam/security-credentials/)");
			return;
		}
		if (r->status != 200 || n == 0 || n >= sizeof c->role_name || strpbrk(r->body, " /?#%")) {
			char m[700];
			snprintf(m, sizeof m, "iam/security-credentials/: %s", r->status == 200 ? "not a role name" : status);
			imds_fail(c, m);
			return;
		}
		memcpy(c->role_name, r->body, n);
		c->role_name[n] = '\0';
		imds_send(c, IMDS_KEY);
		return;
	}
	case IMDS_KEY: {
		if (r->status != 200) {
			char m[700];
			snprintf(m, sizeof m, "iam/security-credentials/%s: %s", c->role_name, status);
			imds_fail(c, m);
			return;
		}
		struct sd_aws_creds cr;
		long long exp;
		char err[400];
		long long now = (long long)time(NULL);
		if (sd_aws_creds_from_imds(r->body, r->body_len, now, c->role_name, &cr, &exp, err, sizeof err) < 0) {
			imds_fail(c, err);
			return;
		}
		sd_aws_creds_clear(&c->cr);
		c->cr = cr;
		/* Renewed 15 minutes before it lapses, as botocore's advisory
		 * refresh does, or half-way when less is left. */
		long long left = exp - now, margin = left / 2 < 900 ? left / 2 : 900;
		c->refresh_at = exp - margin;
		set_identity(c);
		c->fetching = 0;
		OPENSSL_cleanse(c->imds_token, sizeof c->imds_token);
		flush_waiting(c, NULL);
		return;
	}
	}
}

static void imds_send(struct sd_aws_client *c, int step)
{
	char url[512], hdr[sizeof c->imds_token + 40], err[300];
	const char *headers[2] = {hdr, NULL};
	struct sd_http_request rq = {.idempotent = 1, .timeout_s = c->imds_timeout_s,
				     .max_attempts = c->imds_attempts, .headers = headers};
	if (step == IMDS_TOKEN) {
		rq.label = "aws imds token";
		rq.method = "PUT";
		snprintf(url, sizeof url, "%s/latest/api/token", c->imds);
		snprintf(hdr, sizeof hdr, "X-aws-ec2-metadata-token-ttl-seconds: 21600");
	} else {
		rq.label = step == IMDS_ROLE ? "aws imds role" : "aws imds key";
		rq.method = "GET";
		snprintf(url, sizeof url, "%s/latest/meta-data/iam/security-credentials/%s", c->imds,
			 step == IMDS_KEY ? c->role_name : "");
		snprintf(hdr, sizeof hdr, "X-aws-ec2-metadata-token: %s", c->imds_token);
	}
	rq.url = url;
	struct imds_req *q = malloc(sizeof *q);
	struct sd_http_call *hc = NULL;
	if (q) {
		*q = (struct imds_req){c, c->alive, step};
		hc = sd_http_send(c->http, &rq, on_imds, q, err, sizeof err);
	} else {
		snprintf(err, sizeof err, "out of memory");
	}
	OPENSSL_cleanse(hdr, sizeof hdr);
	if (!hc) {
		free(q);
		imds_fail(c, err);
	}
}

static int creds_fresh(const struct sd_aws_client *c)
{
	return !c->role || (c->cr.key_id && (long long)time(NULL) < c->refresh_at);
}

/* GIVEN, or AWS's https://SERVICE.REGION.amazonaws.com; malloc'd (NULL:
 * out of memory). */
static char *endpoint_or_default(const char *given, const char *service, const char *region)
{
	if (given)
		return strdup(given);
	char ep[256];
	snprintf(ep, sizeof ep, "https://%s.%s.amazonaws.com", service, region);
	return strdup(ep);
}

/* The host (with its port) of ENDPOINT, "http(s)://HOST[:PORT][/...]",
 * malloc'd; NULL with ERR naming WHAT when it is not of that form. */
static char *endpoint_host(const char *endpoint, const char *what, char *err, size_t errlen)
{
	const char *h = strstr(endpoint, "://");
	if (!h || (strncmp(endpoint, "http://", 7) != 0 && strncmp(endpoint, "https://", 8) != 0)) {
		snprintf(err, errlen, "aws: %s '%s' is not http(s)://HOST", what, endpoint);
		return NULL;
	}
	h += 3;
	char *host = strndup(h, strcspn(h, "/"));
	if (!host || !*host) {
		snprintf(err, errlen, "aws: %s '%s' has no host", what, endpoint);
		free(host);
		return NULL;
	}
	return host;
}

struct sd_aws_client *sd_aws_client_new(struct sd_http *http, const struct sd_aws_client_config *cfg,
					char *err, size_t errlen)
{
	if (!cfg->region || !*cfg->region) {
		snprintf(err, errlen, "aws: no region");
		return NULL;
	}
	struct sd_aws_client *c = calloc(1, sizeof *c);
	if (!c) {
		snprintf(err, errlen, "aws: out of memory");
		return NULL;
	}
	c->http = http;
	c->region = strdup(cfg->region);
	c->endpoint = endpoint_or_default(cfg->endpoint, "ec2", cfg->region);
	c->q_endpoint = endpoint_or_default(cfg->quotas_endpoint, "servicequotas", cfg->region);
	if (!c->region || !c->endpoint || !c->q_endpoint) {
		snprintf(err, errlen, "aws: out of memory");
		goto fail;
	}
	if (!(c->host = endpoint_host(c->endpoint, "endpoint", err, errlen)) ||
	    !(c->q_host = endpoint_host(c->q_endpoint, "Service Quotas endpoint", err, errlen)))
		goto fail;
	struct sd_aws_creds_source src = {
		.access_key_id = cfg->access_key_id, .secret_key = cfg->secret_key,
		.session_token = cfg->session_token, .profile = cfg->profile,
		.credentials_file = cfg->credentials_file, .config_file = cfg->config_file,
	};
	c->waiting_tail = &c->waiting;
	int r = sd_aws_creds_resolve(&src, &c->cr, err, errlen);
	const char *off = getenv("AWS_EC2_METADATA_DISABLED");
	if (r == 1 && !(off && !strcasecmp(off, "true"))) {
		/* No key anywhere else: the instance role's, asked for when the
		 * first call needs it.  Endpoint, timeout and attempts from the
		 * variables botocore reads (1 s and 1 attempt by default). */
		const char *ep = getenv("AWS_EC2_METADATA_SERVICE_ENDPOINT");
		const char *to = getenv("AWS_METADATA_SERVICE_TIMEOUT");
		const char *na = getenv("AWS_METADATA_SERVICE_NUM_ATTEMPTS");
		snprintf(c->imds, sizeof c->imds, "%s", ep && *ep ? ep : "http://169.254.169.254");
		if ((strncmp(c->imds, "http://", 7) && strncmp(c->imds, "https://", 8)) || strpbrk(c->imds, " \t\r\n")) {
			snprintf(err, errlen, "AWS_EC2_METADATA_SERVICE_ENDPOINT '%.200s' is not http(s)://HOST[:PORT]",
				 c->imds);
			goto fail;
		}
		size_t l = strlen(c->imds);
		while (l > 0 && c->imds[l - 1] == '/')
			c->imds[--l] = '\0';
		c->imds_timeout_s = to && atof(to) > 0 ? atof(to) : 1.0;
		c->imds_attempts = na && atoi(na) > 0 ? atoi(na) : 1;
		snprintf(c->chain_err, sizeof c->chain_err, "%s", err);
		c->role = 1;
		c->alive = malloc(sizeof *c->alive);
		if (!c->alive) {
			snprintf(err, errlen, "aws: out of memory");
			goto fail;
		}
		*c->alive = 1;
		snprintf(c->identity, sizeof c->identity, "(instance role)");
		return c;
	}
	if (r != 0)
		goto fail;
	set_identity(c);
	return c;
fail:
	sd_aws_client_free(c);
	return NULL;
}

/* Sends BODY (ours now) at once when the key is fresh, else once the
 * instance role's key comes. */
static int start_call(struct sd_aws_client *c, const char *label, const char *target, char *body, size_t blen,
		      int idempotent, sd_http_cb cb, void *arg, char *err, size_t errlen)
{
	struct aws_call *w = calloc(1, sizeof *w);
	if (!w) {
		free(body);
		snprintf(err, errlen, "aws: out of memory");
		return -1;
	}
	snprintf(w->label, sizeof w->label, "%s", label);
	snprintf(w->target, sizeof w->target, "%s", target);
	w->body = body;
	w->blen = blen;
	w->idempotent = idempotent;
	w->cb = cb;
	w->arg = arg;
	if (creds_fresh(c)) {
		int r = send_signed(c, w, err, errlen);
		free(w->body);
		free(w);
		return r;
	}
	*c->waiting_tail = w;
	c->waiting_tail = &w->next;
	if (!c->fetching) {
		c->fetching = 1;
		imds_send(c, IMDS_TOKEN);
	}
	return 0;
}

int sd_aws_json_call(struct sd_aws_client *c, const char *target, const char *json, sd_http_cb cb, void *arg,
		     char *err, size_t errlen)
{
	if (!target || strncmp(target, "ServiceQuotasV20190624.", 23) != 0 || strpbrk(target, " \r\n")) {
		snprintf(err, errlen, "aws: '%s' is not a Service Quotas operation", target ? target : "(null)");
		return -1;
	}
	char *body = strdup(json ? json : "{}");
	if (!body) {
		snprintf(err, errlen, "aws: out of memory");
		return -1;
	}
	char label[160];
	snprintf(label, sizeof label, "aws %s", target);
	/* Every Service Quotas Get and List is a read: safe to send again. */
	return start_call(c, label, target, body, strlen(body), 1, cb, arg, err, errlen);
}

int sd_aws_call(struct sd_aws_client *c, const char *action, const struct sd_sigv4_pair *params, size_t n,
		int idempotent, sd_http_cb cb, void *arg, char *err, size_t errlen)
{
	struct sd_sigv4_pair *all = calloc(n + 2, sizeof *all);
	if (!all) {
		snprintf(err, errlen, "aws: out of memory");
		return -1;
	}
	all[0] = (struct sd_sigv4_pair){"Action", action};
	all[1] = (struct sd_sigv4_pair){"Version", SD_EC2_API_VERSION};
	for (size_t i = 0; i < n; i++)
		all[i + 2] = params[i];
	size_t blen = 0;
	char *body = sd_sigv4_form(all, n + 2, SD_SIGV4_AS_GIVEN, &blen);
	free(all);
	if (!body) {
		snprintf(err, errlen, "aws: %s: too many parameters or out of memory", action);
		return -1;
	}
	char label[96];
	snprintf(label, sizeof label, "aws %s", action);
	return start_call(c, label, "", body, blen, idempotent, cb, arg, err, errlen);
}

/* Signs W's body with the key now and sends it: an EC2 Query call, or
 * (W->target set) a Service Quotas JSON 1.1 call. */
static int send_signed(struct sd_aws_client *c, const struct aws_call *w, char *err, size_t errlen)
{
	int json = w->target[0] != '\0';
	const char *ctype = json ? "application/x-amz-json-1.1" : "application/x-www-form-urlencoded; charset=utf-8";
	struct sd_sigv4_pair hdr[2] = {{"Content-Type", ctype}, {"X-Amz-Target", w->target}};
	struct sd_sigv4_request rq = {
		.method = "POST", .host = json ? c->q_host : c->host, .path = "/", .headers = hdr,
		.nheaders = json ? 2 : 1, .body = w->body, .body_len = w->blen, .region = c->region,
		.service = json ? "servicequotas" : "ec2", .when = time(NULL),
	};
	struct sd_sigv4_creds cr = {c->cr.key_id, c->cr.secret, c->cr.token};
	struct sd_sigv4_out out;
	if (sd_sigv4_sign(&rq, &cr, &out, err, errlen) < 0)
		return -1;
	char h_date[64], h_auth[SD_SIGV4_AUTH_SIZE + 32], h_type[96], h_target[160], h_token[4096 + 32];
	snprintf(h_date, sizeof h_date, "X-Amz-Date: %s", out.amz_date);
	snprintf(h_auth, sizeof h_auth, "Authorization: %s", out.authorization);
	snprintf(h_type, sizeof h_type, "Content-Type: %s", ctype);
	snprintf(h_target, sizeof h_target, "X-Amz-Target: %s", w->target);
	snprintf(h_token, sizeof h_token, "X-Amz-Security-Token: %s", c->cr.token ? c->cr.token : "");
	const char *headers[6];
	int n = 0;
	headers[n++] = h_date;
	headers[n++] = h_auth;
	headers[n++] = h_type;
	if (json)
		headers[n++] = h_target;
	if (c->cr.token)
		headers[n++] = h_token;
	headers[n] = NULL;
	char url[512];
	snprintf(url, sizeof url, "%s/", json ? c->q_endpoint : c->endpoint);
	struct sd_http_request hr = {.label = w->label, .method = "POST", .url = url, .headers = headers,
				     .body = w->body, .body_len = w->blen, .idempotent = w->idempotent,
				     .final_answer = json ? NULL : ec2_final_answer};
	struct sd_http_call *call = sd_http_send(c->http, &hr, w->cb, w->arg, err, errlen);
	OPENSSL_cleanse(h_token, sizeof h_token);
	OPENSSL_cleanse(h_auth, sizeof h_auth);
	return call ? 0 : -1;
}

const char *sd_aws_client_identity(const struct sd_aws_client *c)
{
	return c->identity;
}

const char *sd_aws_client_where(const struct sd_aws_client *c)
{
	return c->cr.where;
}

struct sd_http *sd_aws_client_http(const struct sd_aws_client *c)
{
	return c->http;
}
