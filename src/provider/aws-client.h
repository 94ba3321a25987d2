/* src/provider/aws-client.h - signed EC2 Query API calls on the loop: each
 * action POSTed as an application/x-www-form-urlencoded body
 * ("Action=...&Version=2016-11-15&..."), signed with SigV4 (sigv4.h) at
 * the moment it is sent, through the HTTP client (http.h) with its
 * retries.  cloud-apis.md section 2.
 *
 * Credentials: the config's, else the environment's, else the shared
 * credentials and config files' (aws-creds.h has the chain and its
 * errors); the instance role (IMDS) is not read yet.  The secret never
 * leaves this module but as a signature;
 * the journal and errors show the key id's last 4 characters only
 * (sd_aws_client_identity).
 *
 * Threads: the loop's thread only. */
#ifndef SD_PROVIDER_AWS_CLIENT_H
#define SD_PROVIDER_AWS_CLIENT_H

#include <stddef.h>

#include "src/provider/http.h"
#include "src/provider/sigv4.h"

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
};

/* NULL with ERR when the region is missing, no credentials are found
 * ("no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY,
 * or write them in ~/.aws/credentials") or a source is bad (aws-creds.h). */
struct sd_aws_client *sd_aws_client_new(struct sd_http *http, const struct sd_aws_client_config *cfg,
					char *err, size_t errlen);
/* Wipes the secret and frees the client (calls in flight end in http.h). */
void sd_aws_client_free(struct sd_aws_client *c);

/* Sends ACTION with PARAMS (N pairs, raw values; Action and Version are
 * added first).  IDEMPOTENT: describes and terminates are; a RunInstances
 * only with a ClientToken.  CB as in http.h; the answer is the XML
 * (ec2-api.h).  0, or -1 with ERR (nothing sent). */
int sd_aws_call(struct sd_aws_client *c, const char *action, const struct sd_sigv4_pair *params, size_t n,
		int idempotent, sd_http_cb cb, void *arg, char *err, size_t errlen);

/* "AKIA...WXYZ": the key id shortened to its last 4 characters, for
 * messages. */
const char *sd_aws_client_identity(const struct sd_aws_client *c);
/* Where the key came from: "the environment", "/home/u/.aws/credentials
 * [default]", "the job". */
const char *sd_aws_client_where(const struct sd_aws_client *c);
const char *sd_aws_client_region(const struct sd_aws_client *c);

#endif
