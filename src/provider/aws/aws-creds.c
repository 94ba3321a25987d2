/* src/provider/aws/aws-creds.c - the AWS credential chain (aws-creds.h). */
#include "config.h"
#include "src/provider/aws/aws-creds.h"
#include "src/provider/http/secret-file.h"

#include <cJSON.h>
#include <ini.h>
#include <openssl/crypto.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* inih as Debian builds it reads lines of at most INI_MAX_LINE - 1 bytes,
 * newline included, and splits a longer one silently into two: such a line
 * is refused before inih sees it. */
#define LINE_MAX_BYTES (INI_MAX_LINE - 2)

static void wipe_free(char *s)
{
	if (s) {
		OPENSSL_cleanse(s, strlen(s));
		free(s);
	}
}

void sd_aws_creds_clear(struct sd_aws_creds *c)
{
	free(c->key_id);
	wipe_free(c->secret);
	wipe_free(c->token);
	memset(c, 0, sizeof *c);
}

/* A key id, secret or token goes into a header and a signature: printable
 * ASCII without spaces. */
static int bad_value(const char *v)
{
	for (const unsigned char *p = (const unsigned char *)v; *p; p++)
		if (*p <= 0x20 || *p >= 0x7f)
			return 1;
	return 0;
}

static int set(struct sd_aws_creds *out, const char *id, const char *secret, const char *token,
	       const char *where, char *err, size_t errlen)
{
	if (bad_value(id) || bad_value(secret) || (token && bad_value(token)))
		return sd_errf(err, errlen, "%s: the key id, secret or token has a space or a character that is not "
			    "printable ASCII", where);
	out->key_id = strdup(id);
	out->secret = strdup(secret);
	out->token = token ? strdup(token) : NULL;
	if (!out->key_id || !out->secret || (token && !out->token)) {
		sd_aws_creds_clear(out);
		return sd_errf(err, errlen, "aws credentials: out of memory");
	}
	snprintf(out->where, sizeof out->where, "%s", where);
	return 0;
}

static const char *env(const char *name)
{
	const char *v = getenv(name);
	return v && *v ? v : NULL;
}

/* One file's wanted section, as inih hands it over. */
struct scan {
	const char *section; /* the section wanted */
	int found;           /* the section was seen */
	char *key_id, *secret, *token;
	char dup[64];        /* a key seen twice in the section */
	int oom;
};

static int on_entry(void *user, const char *section, const char *name, const char *value)
{
	struct scan *s = user;
	if (strcmp(section, s->section) != 0)
		return 1;
	s->found = 1;
	char **slot = !strcasecmp(name, "aws_access_key_id")	 ? &s->key_id
		      : !strcasecmp(name, "aws_secret_access_key") ? &s->secret
		      : !strcasecmp(name, "aws_session_token")	 ? &s->token
							       : NULL;
	if (!slot)
		return 1;
	if (*slot) {
		snprintf(s->dup, sizeof s->dup, "%s", name);
		return 1;
	}
	if (!(*slot = strdup(value)))
		s->oom = 1;
	return 1;
}

static void scan_free(struct scan *s)
{
	free(s->key_id);
	wipe_free(s->secret);
	wipe_free(s->token);
}

/* Reads PATH whole into a NUL-terminated buffer (caller wipes and frees).
 * 0; 1 when there is no such file; -1 with ERR. */
static int read_file(const char *path, char **buf, char *err, size_t errlen)
{
	size_t len;
	int r = sd_secret_file_read(path, SD_AWS_CREDS_FILE_MAX, "holds AWS keys and is", "credentials file", buf,
	                            &len, err, errlen);
	if (r != 0)
		return r;
	if (strlen(*buf) != len) {
		OPENSSL_cleanse(*buf, len);
		free(*buf);
		*buf = NULL;
		return sd_errf(err, errlen, "%s: has a NUL byte, not a text file", path);
	}
	return 0;
}

/* Looks for SECTION in PATH.  0 with OUT filled; 1 when the file or the
 * section is not there or the section has no key (*FOUND says which); -1
 * with ERR. */
static int from_file(const char *path, const char *section, int *found, struct sd_aws_creds *out, char *err,
		     size_t errlen)
{
	char *buf;
	*found = 0;
	int r = read_file(path, &buf, err, errlen);
	if (r != 0)
		return r;
	/* A line inih would split: refused with its number. */
	size_t line = 1, col = 0;
	for (const char *p = buf; *p; p++) {
		if (*p == '\n') {
			line++;
			col = 0;
		} else if (++col > LINE_MAX_BYTES) {
			size_t l = strlen(buf);
			OPENSSL_cleanse(buf, l);
			free(buf);
			return sd_errf(err, errlen, "%s:%zu: line longer than %d bytes, more than the INI reader "
				    "(inih) takes; give a long session token in AWS_SESSION_TOKEN instead",
				    path, line, LINE_MAX_BYTES);
		}
	}
	struct scan s = {.section = section};
	r = ini_parse_string(buf, on_entry, &s);
	OPENSSL_cleanse(buf, strlen(buf));
	free(buf);
	*found = s.found;
	if (s.oom)
		r = sd_errf(err, errlen, "%s: out of memory", path);
	else if (r > 0)
		r = sd_errf(err, errlen, "%s:%d: not an INI line (want [section], key = value or a # comment)", path, r);
	else if (r < 0)
		r = sd_errf(err, errlen, "%s: cannot parse: out of memory", path);
	else if (s.dup[0])
		r = sd_errf(err, errlen, "%s: [%s] has %s twice", path, section, s.dup);
	else if (s.key_id && *s.key_id && !(s.secret && *s.secret))
		r = sd_errf(err, errlen, "%s: [%s] has aws_access_key_id but no aws_secret_access_key", path, section);
	else if (s.secret && *s.secret && !(s.key_id && *s.key_id))
		r = sd_errf(err, errlen, "%s: [%s] has aws_secret_access_key but no aws_access_key_id", path, section);
	else if (!s.key_id || !*s.key_id)
		r = 1;
	else {
		char where[320];
		snprintf(where, sizeof where, "%s [%s]", path, section);
		r = set(out, s.key_id, s.secret, s.token && *s.token ? s.token : NULL, where, err, errlen);
	}
	scan_free(&s);
	return r;
}

static const char *home_dir(void)
{
	const char *h = env("HOME");
	if (h)
		return h;
	struct passwd *pw = getpwuid(getuid());
	return pw && pw->pw_dir && *pw->pw_dir ? pw->pw_dir : NULL;
}

/* The file's path: GIVEN, else $VAR, else HOME/.aws/NAME.  "" when none. */
static void file_path(const char *given, const char *var, const char *name, char *out, size_t outlen)
{
	const char *h;
	if (given)
		snprintf(out, outlen, "%s", given);
	else if (env(var))
		snprintf(out, outlen, "%s", env(var));
	else if ((h = home_dir()))
		snprintf(out, outlen, "%s/.aws/%s", h, name);
	else
		out[0] = '\0';
}

int sd_aws_creds_resolve(const struct sd_aws_creds_source *src, struct sd_aws_creds *out, char *err,
			 size_t errlen)
{
	memset(out, 0, sizeof *out);
	if (src->access_key_id || src->secret_key) {
		if (!src->access_key_id || !*src->access_key_id || !src->secret_key || !*src->secret_key)
			return sd_errf(err, errlen, "aws credentials: a key id needs its secret, and a secret its key id");
		return set(out, src->access_key_id, src->secret_key, src->session_token, "the job", err, errlen);
	}
	const char *id = env("AWS_ACCESS_KEY_ID"), *secret = env("AWS_SECRET_ACCESS_KEY");
	if (id && secret)
		return set(out, id, secret, env("AWS_SESSION_TOKEN"), "the environment", err, errlen);
	if (id || secret)
		return sd_errf(err, errlen, "%s is set but %s is not", id ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY",
			    id ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID");

	int asked = src->profile || env("AWS_PROFILE");
	const char *profile = src->profile ? src->profile : asked ? env("AWS_PROFILE") : "default";
	if (!*profile || strpbrk(profile, "[]\n\r"))
		return sd_errf(err, errlen, "aws profile '%s': not a profile name", profile);

	char cred_path[1024], conf_path[1024], conf_section[256];
	file_path(src->credentials_file, "AWS_SHARED_CREDENTIALS_FILE", "credentials", cred_path, sizeof cred_path);
	file_path(src->config_file, "AWS_CONFIG_FILE", "config", conf_path, sizeof conf_path);
	int found_cred = 0, found_conf = 0, r = 1;
	if (cred_path[0]) {
		r = from_file(cred_path, profile, &found_cred, out, err, errlen);
		if (r <= 0)
			return r;
	}
	/* The config file names a profile "profile NAME", except the default
	 * one (botocore takes [profile default] too, [default] first). */
	if (conf_path[0]) {
		snprintf(conf_section, sizeof conf_section, "profile %s", profile);
		if (!strcmp(profile, "default")) {
			r = from_file(conf_path, "default", &found_conf, out, err, errlen);
			if (r <= 0)
				return r;
		}
		if (!found_conf) {
			r = from_file(conf_path, conf_section, &found_conf, out, err, errlen);
			if (r <= 0)
				return r;
		}
	}
	if (found_cred || found_conf)
		return sd_errf(err, errlen, "aws profile '%s' in %s has no aws_access_key_id (role_arn, sso_* and "
			    "credential_process are not supported; give a key, or the AWS_* variables)", profile,
			    found_cred ? cred_path : conf_path);
	if (asked)
		return sd_errf(err, errlen, "aws profile '%s' is in neither %s nor %s", profile,
			    cred_path[0] ? cred_path : "(no credentials file)", conf_path[0] ? conf_path : "(no config file)");
	snprintf(err, errlen, "no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or write them "
		 "in %s", cred_path[0] ? cred_path : "~/.aws/credentials");
	return 1;
}

static void json_wipe(cJSON *item)
{
	for (; item; item = item->next) {
		if (cJSON_IsString(item) && item->valuestring)
			OPENSSL_cleanse(item->valuestring, strlen(item->valuestring));
		json_wipe(item->child);
	}
}

int sd_aws_creds_from_imds(const char *json, size_t len, long long now, const char *role,
			   struct sd_aws_creds *out, long long *expires, char *err, size_t errlen)
{
	memset(out, 0, sizeof *out);
	*expires = 0;
	cJSON *root = json ? cJSON_ParseWithLength(json, len) : NULL;
	if (!cJSON_IsObject(root)) {
		cJSON_Delete(root);
		return sd_errf(err, errlen, "instance role %s: the metadata service's answer is not a JSON object",
			       role);
	}
	const cJSON *code = cJSON_GetObjectItemCaseSensitive(root, "Code");
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(root, "AccessKeyId");
	const cJSON *sec = cJSON_GetObjectItemCaseSensitive(root, "SecretAccessKey");
	const cJSON *tok = cJSON_GetObjectItemCaseSensitive(root, "Token");
	const cJSON *exp = cJSON_GetObjectItemCaseSensitive(root, "Expiration");
	long long when = cJSON_IsString(exp) ? sd_utc_time_parse(exp->valuestring) : -1;
	char where[200];
	snprintf(where, sizeof where, "the instance role %s (IMDS)", role);
	int r = -1;
	if (!cJSON_IsString(code) || strcmp(code->valuestring, "Success") != 0) {
		char c[96];
		snprintf(c, sizeof c, "%s", cJSON_IsString(code) ? code->valuestring : "(none)");
		c[strcspn(c, "\r\n")] = '\0';
		sd_errf(err, errlen, "instance role %s: the metadata service's Code is %s, not Success", role, c);
	} else if (!cJSON_IsString(id) || !*id->valuestring || !cJSON_IsString(sec) || !*sec->valuestring ||
		   !cJSON_IsString(tok) || !*tok->valuestring) {
		sd_errf(err, errlen, "instance role %s: AccessKeyId, SecretAccessKey or Token missing in the "
			"metadata service's answer", role);
	} else if (when < 0) {
		sd_errf(err, errlen, "instance role %s: Expiration is not a UTC time like 2026-12-03T12:00:00Z", role);
	} else if (when <= now) {
		sd_errf(err, errlen, "instance role %s: the key expired at %s", role, exp->valuestring);
	} else if (set(out, id->valuestring, sec->valuestring, tok->valuestring, where, err, errlen) == 0) {
		*expires = when;
		r = 0;
	}
	json_wipe(root);
	cJSON_Delete(root);
	return r;
}
