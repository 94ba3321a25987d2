/* src/provider/aws-client.c - signed EC2 Query API calls (aws-client.h). */
#include "config.h"
#include "src/provider/aws-client.h"

#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "src/provider/aws-creds.h"
#include "src/provider/ec2-api.h"

struct sd_aws_client {
	struct sd_http *http;
	char *region, *endpoint, *host;
	struct sd_aws_creds cr;
	char identity[32];
};

void sd_aws_client_free(struct sd_aws_client *c)
{
	if (!c)
		return;
	free(c->region);
	free(c->endpoint);
	free(c->host);
	sd_aws_creds_clear(&c->cr);
	free(c);
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
	if (cfg->endpoint) {
		c->endpoint = strdup(cfg->endpoint);
	} else {
		char ep[256];
		snprintf(ep, sizeof ep, "https://ec2.%s.amazonaws.com", cfg->region);
		c->endpoint = strdup(ep);
	}
	if (!c->region || !c->endpoint) {
		snprintf(err, errlen, "aws: out of memory");
		goto fail;
	}
	const char *h = strstr(c->endpoint, "://");
	if (!h || (strncmp(c->endpoint, "http://", 7) != 0 && strncmp(c->endpoint, "https://", 8) != 0)) {
		snprintf(err, errlen, "aws: endpoint '%s' is not http(s)://HOST", c->endpoint);
		goto fail;
	}
	h += 3;
	c->host = strndup(h, strcspn(h, "/"));
	if (!c->host || !*c->host) {
		snprintf(err, errlen, "aws: endpoint '%s' has no host", c->endpoint);
		goto fail;
	}
	struct sd_aws_creds_source src = {
		.access_key_id = cfg->access_key_id, .secret_key = cfg->secret_key,
		.session_token = cfg->session_token, .profile = cfg->profile,
		.credentials_file = cfg->credentials_file, .config_file = cfg->config_file,
	};
	if (sd_aws_creds_resolve(&src, &c->cr, err, errlen) != 0)
		goto fail;
	size_t kl = strlen(c->cr.key_id);
	snprintf(c->identity, sizeof c->identity, "%.4s...%s", c->cr.key_id, kl > 8 ? c->cr.key_id + kl - 4 : "");
	return c;
fail:
	sd_aws_client_free(c);
	return NULL;
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
	static const char ctype[] = "application/x-www-form-urlencoded; charset=utf-8";
	struct sd_sigv4_pair hdr = {"Content-Type", ctype};
	struct sd_sigv4_request rq = {
		.method = "POST", .host = c->host, .path = "/", .headers = &hdr, .nheaders = 1,
		.body = body, .body_len = blen, .region = c->region, .service = "ec2", .when = time(NULL),
	};
	struct sd_sigv4_creds cr = {c->cr.key_id, c->cr.secret, c->cr.token};
	struct sd_sigv4_out out;
	if (sd_sigv4_sign(&rq, &cr, &out, err, errlen) < 0) {
		free(body);
		return -1;
	}
	char h_date[64], h_auth[SD_SIGV4_AUTH_SIZE + 32], h_type[96], h_token[4096 + 32], label[96];
	snprintf(h_date, sizeof h_date, "X-Amz-Date: %s", out.amz_date);
	snprintf(h_auth, sizeof h_auth, "Authorization: %s", out.authorization);
	snprintf(h_type, sizeof h_type, "Content-Type: %s", ctype);
	snprintf(h_token, sizeof h_token, "X-Amz-Security-Token: %s", c->cr.token ? c->cr.token : "");
	snprintf(label, sizeof label, "aws %s", action);
	const char *headers[] = {h_date, h_auth, h_type, c->cr.token ? h_token : NULL, NULL};
	char url[512];
	snprintf(url, sizeof url, "%s/", c->endpoint);
	struct sd_http_request hr = {.label = label, .method = "POST", .url = url, .headers = headers,
				     .body = body, .body_len = blen, .idempotent = idempotent};
	struct sd_http_call *call = sd_http_send(c->http, &hr, cb, arg, err, errlen);
	OPENSSL_cleanse(h_token, sizeof h_token);
	OPENSSL_cleanse(h_auth, sizeof h_auth);
	free(body);
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

const char *sd_aws_client_region(const struct sd_aws_client *c)
{
	return c->region;
}
