/* src/provider/aws/aws-creds.h - where an AWS access key comes from, in the
 * order the AWS CLI and SDKs look (AWS SDKs and Tools Reference Guide,
 * "Standardized credential providers"; botocore's credential chain):
 *
 *   1. the values given in the config (sd_aws_creds_source.access_key_id...);
 *   2. the environment: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
 *      AWS_SESSION_TOKEN;
 *   3. the shared credentials file, $AWS_SHARED_CREDENTIALS_FILE or
 *      ~/.aws/credentials, section [PROFILE];
 *   4. the shared config file, $AWS_CONFIG_FILE or ~/.aws/config, section
 *      [default] or [profile PROFILE];
 * where PROFILE is the config's, else $AWS_PROFILE, else "default".  The
 * keys read are aws_access_key_id, aws_secret_access_key and
 * aws_session_token, their names compared without case and section names
 * with case, as botocore (Python's configparser) does.  Unlike botocore,
 * " ; text" after a value is a comment (inih's inline comments); no valid
 * key, secret or token has a space in it.  Both files are INI files, read with inih (Debian:
 * libinih-dev), not a parser of ours.
 *
 *   5. the instance role, when none of the above has a key: the temporary
 *      key EC2's instance metadata service (IMDSv2) hands the instance's
 *      role.  That needs HTTP, so aws-client.h asks for it on the loop;
 *      sd_aws_creds_from_imds reads its answer.
 *
 * A file that group or others may read or write is refused, as the AWS CLI
 * writes it (mode 0600) and as the gce key file is (gce-auth.h).  A file
 * that does not exist is skipped; any other problem with it (a line that
 * is not INI, a key id without a secret, no such profile when a profile
 * was asked for) is an error naming the file and what is wrong, never a
 * silent fall-through to the next source.
 *
 * Threads: any; reads files and the environment only. */
#ifndef SD_PROVIDER_AWS_AWS_CREDS_H
#define SD_PROVIDER_AWS_AWS_CREDS_H

#include <stddef.h>

/* Where to look.  Every field may be NULL (the default in the comment). */
struct sd_aws_creds_source {
	const char *access_key_id;    /* 1: given outright; needs secret_key */
	const char *secret_key;
	const char *session_token;    /* with 1 only; may be NULL */
	const char *profile;          /* NULL: $AWS_PROFILE, else "default" */
	const char *credentials_file; /* NULL: $AWS_SHARED_CREDENTIALS_FILE, else $HOME/.aws/credentials */
	const char *config_file;      /* NULL: $AWS_CONFIG_FILE, else $HOME/.aws/config */
};

/* A key.  Owns its strings (sd_aws_creds_clear wipes and frees them). */
struct sd_aws_creds {
	char *key_id;
	char *secret;
	char *token;       /* NULL when there is none */
	char where[320];   /* "the environment", "/root/.aws/credentials [prod]", ... */
};

/* The size a credentials or config file may have (64 KiB): anything larger
 * is not one. */
#define SD_AWS_CREDS_FILE_MAX (64u << 10)

/* Fills OUT from the first source that has a key.  0; 1 when no source
 * has one (ERR says where it looked); -1 with ERR on a bad source (ERR
 * names the file, line or variable and what is wrong).  OUT is zeroed
 * first and holds nothing unless 0 is returned. */
int sd_aws_creds_resolve(const struct sd_aws_creds_source *src, struct sd_aws_creds *out, char *err,
			 size_t errlen);

/* The instance role's key: what IMDS answers to
 *   GET /latest/meta-data/iam/security-credentials/ROLE
 * (EC2 User Guide, "Retrieve security credentials from instance
 * metadata"): {"Code": "Success", "LastUpdated": "...", "Type": "AWS-HMAC",
 * "AccessKeyId": "ASIA...", "SecretAccessKey": "...", "Token": "...",
 * "Expiration": "2026-12-03T12:00:00Z"}, LEN bytes of JSON (need not be
 * NUL-terminated), read at NOW (seconds since the epoch).  OUT gets the key,
 * the token and where "the instance role ROLE (IMDS)"; *EXPIRES the
 * Expiration.  -1 with ERR naming what is wrong: not a JSON object, a Code
 * other than "Success" (with it), a key id, secret or token missing, an
 * Expiration not of that UTC form, or one already past.  OUT is zeroed
 * first and holds nothing unless 0 is returned. */
int sd_aws_creds_from_imds(const char *json, size_t len, long long now, const char *role,
			   struct sd_aws_creds *out, long long *expires, char *err, size_t errlen);

/* Wipes the secret and token (OPENSSL_cleanse) and frees the strings. */
void sd_aws_creds_clear(struct sd_aws_creds *c);

#endif
