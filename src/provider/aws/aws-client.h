/* src/provider/aws/aws-client.h - signed EC2 Query API calls on the loop: each
 * action POSTed as an application/x-www-form-urlencoded body
 * ("Action=...&Version=2016-11-15&..."), signed with SigV4 (sigv4.h) at
 * the moment it is sent, through the HTTP client (http.h) with its
 * retries.  cloud-apis.md section 2.
 *
 * Credentials: the config's, else the environment's, else the shared
 * credentials and config files' (aws-creds.h has the chain and its
 * errors), else the instance role's temporary key from IMDSv2 at
 * $AWS_EC2_METADATA_SERVICE_ENDPOINT (default http://169.254.169.254;
 * none when $AWS_EC2_METADATA_DISABLED is "true"), each attempt given
 * $AWS_METADATA_SERVICE_TIMEOUT seconds (1) and
 * $AWS_METADATA_SERVICE_NUM_ATTEMPTS attempts (1), as botocore reads
 * them.  That key is fetched when the first call needs it and again 15
 * minutes before it expires (botocore's advisory refresh; half-way when
 * less is left); calls made meanwhile wait for it.  When it cannot be had
 * they end with status 0 and the error "credentials: <where the chain
 * looked>; and no instance role: <why>".  The secret never
 * leaves this module but as a signature;
 * the journal and errors show the key id's last 4 characters only
 * (sd_aws_client_identity).
 *
 * Threads: the loop's thread only. */
#ifndef SD_PROVIDER_AWS_AWS_CLIENT_H
#define SD_PROVIDER_AWS_AWS_CLIENT_H

#include <stddef.h>

#include "src/provider/http/http.h"
#include "src/provider/http/sigv4.h"

struct sd_aws_client;

struct sd_aws_client_config {
	const char *region;          /* required: "us-east-1" */
	const char *endpoint;        /* NULL: https://ec2.REGION.amazonaws.com; a fake's
	                              * "http://127.0.0.1:PORT" in the tests */
	const char *access_key_id;   /* NULL: the chain in aws-creds.h */
	const char *secret_key;      /* NULL: the chain in aws-creds.h */
	const char *session_token;   /* with the two above only (may be NULL) */
	const char *profile;         /* NULL: $AWS_PROFILE, else "default" */
	const char *credentials_file; /* NULL: aws-creds.h's default */
	const char *config_file;     /* NULL: aws-creds.h's default */
	const char *quotas_endpoint; /* NULL: https://servicequotas.REGION.amazonaws.com */
};

/* NULL with ERR when the region is missing, a source of the chain is bad
 * (aws-creds.h), or the chain has no key and IMDS is disabled ("no AWS
 * credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or write
 * them in ~/.aws/credentials") or its endpoint is not http(s)://. */
struct sd_aws_client *sd_aws_client_new(struct sd_http *http, const struct sd_aws_client_config *cfg,
					char *err, size_t errlen);
/* Wipes the secret and frees the client (calls in flight end in http.h). */
void sd_aws_client_free(struct sd_aws_client *c);

/* Sends ACTION with PARAMS (N pairs, raw values; Action and Version are
 * added first).  IDEMPOTENT: describes and terminates are; a RunInstances
 * only with a ClientToken.  CB as in http.h; the answer is the XML
 * (aws-api.h).  0, or -1 with ERR (nothing sent). */
int sd_aws_call(struct sd_aws_client *c, const char *action, const struct sd_sigv4_pair *params, size_t n,
		int idempotent, sd_http_cb cb, void *arg, char *err, size_t errlen);

/* Sends a Service Quotas call (JSON 1.1 protocol, cloud-apis.md has none;
 * AWS's Service Quotas API Reference): POST / to the Service Quotas
 * endpoint with "X-Amz-Target: TARGET" (e.g.
 * "ServiceQuotasV20190624.GetServiceQuota"), "Content-Type:
 * application/x-amz-json-1.1" and JSON (NULL: "{}"), SigV4-signed for the
 * service "servicequotas".  Only ServiceQuotasV20190624.* targets (all
 * reads here: retried as idempotent).  CB gets the JSON answer; an error
 * is {"__type": "...#NoSuchResourceException", "message": "..."}. */
int sd_aws_json_call(struct sd_aws_client *c, const char *target, const char *json, sd_http_cb cb, void *arg,
		     char *err, size_t errlen);

/* "AKIA...WXYZ": the key id shortened to its last 4 characters, for
 * messages ("(instance role)" until the role's key is had). */
const char *sd_aws_client_identity(const struct sd_aws_client *c);
/* Where the key came from: "the environment", "/home/u/.aws/credentials
 * [default]", "the job". */
const char *sd_aws_client_where(const struct sd_aws_client *c);
/* The HTTP client C sends with (for its loop). */
struct sd_http *sd_aws_client_http(const struct sd_aws_client *c);

#endif
