/* src/provider/gce/gce-auth.c - see gce-auth.h.  JSON goes through cJSON both
 * ways, so no string is ever spliced into JSON by hand; base64, SHA-256 and
 * RSA are OpenSSL's.  The key text only ever lives in the file buffer and
 * in cJSON's copy, and both are wiped before they are freed. */
#include "config.h"

#include "src/provider/gce/gce-auth.h"
#include "src/provider/http/secret-file.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

/* expires_in above a year is no answer of Google's (it gives 3599). */
#define SD_GCE_EXPIRES_IN_MAX 31536000

/* The reason of OpenSSL's latest error (a static string, never key
 * material), and its error queue emptied so that a later failure does not
 * show a stale reason. */
static const char *sd_gce_ssl_reason(void)
{
	unsigned long e = ERR_peek_last_error();
	const char *r = e ? ERR_reason_error_string(e) : NULL;
	ERR_clear_error();
	return r ? r : "unknown OpenSSL error";
}

static char *sd_gce_strdup(const char *s)
{
	size_t n = strlen(s) + 1;
	char *p = malloc(n);
	if (p)
		memcpy(p, s, n);
	return p;
}

/* A string field of a key file: 0 with *out pointing into the tree, or -1
 * with "PATH: FIELD ..." in err.  absent_ok: 1 when a missing field is
 * not an error (then *out is NULL). */
static int sd_gce_key_field(const cJSON *root, const char *path, const char *field, int absent_ok,
                            const char **out, char *err, size_t errlen)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, field);
	*out = NULL;
	if (!v) {
		if (absent_ok)
			return 0;
		return sd_errf(err, errlen, "%s: no \"%s\" field in the key file", path, field);
	}
	if (!cJSON_IsString(v) || !v->valuestring)
		return sd_errf(err, errlen, "%s: \"%s\" is not a string", path, field);
	if (!*v->valuestring)
		return sd_errf(err, errlen, "%s: \"%s\" is empty", path, field);
	*out = v->valuestring;
	return 0;
}

/* PEM_read_bio_PrivateKey's password callback: an encrypted key is
 * refused instead of OpenSSL prompting on the terminal (which the cockpit
 * owns). */
static int sd_gce_no_password(char *buf, int size, int rwflag, void *u)
{
	(void)buf;
	(void)size;
	(void)rwflag;
	(void)u;
	return -1;
}

/* Checks the fields of a parsed key file and fills *key. */
static int sd_gce_key_from_json(const cJSON *root, const char *path, struct sd_gce_key *key, char *err,
                                size_t errlen)
{
	const char *type, *kid, *pem, *email, *uri;
	if (!cJSON_IsObject(root))
		return sd_errf(err, errlen, "%s: not a JSON object", path);
	if (sd_gce_key_field(root, path, "type", 0, &type, err, errlen) < 0)
		return -1;
	if (strcmp(type, "service_account") != 0)
		return sd_errf(err, errlen, "%s: \"type\" is \"%.40s\", not \"service_account\"", path, type);
	if (sd_gce_key_field(root, path, "private_key_id", 0, &kid, err, errlen) < 0 ||
	    sd_gce_key_field(root, path, "private_key", 0, &pem, err, errlen) < 0 ||
	    sd_gce_key_field(root, path, "client_email", 0, &email, err, errlen) < 0 ||
	    sd_gce_key_field(root, path, "token_uri", 1, &uri, err, errlen) < 0)
		return -1;
	if (!uri)
		uri = SD_GCE_TOKEN_URI_DEFAULT;

	size_t pemlen = strlen(pem);
	if (pemlen > INT_MAX)
		return sd_errf(err, errlen, "%s: \"private_key\" is too long", path);
	BIO *bio = BIO_new_mem_buf(pem, (int)pemlen);
	if (!bio)
		return sd_errf(err, errlen, "out of memory");
	EVP_PKEY *pkey = PEM_read_bio_PrivateKey(bio, NULL, sd_gce_no_password, NULL);
	BIO_free(bio);
	if (!pkey) {
		/* OpenSSL 3's decoders say only "unsupported" for text with no PEM
		 * block in it (a key cut short, a path pasted instead of a key). */
		const char *why = sd_gce_ssl_reason();
		if (!strstr(pem, "-----BEGIN "))
			why = "no -----BEGIN line";
		else if (!strstr(pem, "-----END "))
			why = "no -----END line: cut short?";
		return sd_errf(err, errlen, "%s: \"private_key\" is not a PEM private key (%s)", path, why);
	}
	if (!EVP_PKEY_is_a(pkey, "RSA")) {
		const char *t = EVP_PKEY_get0_type_name(pkey);
		EVP_PKEY_free(pkey);
		return sd_errf(err, errlen, "%s: \"private_key\" holds a key of type %s, not RSA (RS256 needs RSA)",
		                  path, t ? t : "unknown");
	}
	key->pkey = pkey;
	key->private_key_id = sd_gce_strdup(kid);
	key->client_email = sd_gce_strdup(email);
	key->token_uri = sd_gce_strdup(uri);
	if (!key->private_key_id || !key->client_email || !key->token_uri) {
		sd_gce_key_free(key);
		return sd_errf(err, errlen, "out of memory");
	}
	return 0;
}

/* Wipes the text of every string in the tree (the key, and whatever else a
 * key file holds) before cJSON frees it. */
static void sd_gce_json_wipe(cJSON *item)
{
	for (; item; item = item->next) {
		if (item->valuestring)
			OPENSSL_cleanse(item->valuestring, strlen(item->valuestring));
		sd_gce_json_wipe(item->child);
	}
}

int sd_gce_key_load(const char *path, struct sd_gce_key *key, char *err, size_t errlen)
{
	char *buf = NULL;
	size_t len = 0;
	memset(key, 0, sizeof *key);

	if (sd_secret_file_read(path, SD_GCE_KEY_MAX_BYTES, "key file is", "key file", &buf, &len, err, errlen))
		return -1;
	if (len == 0) {
		free(buf);
		return sd_errf(err, errlen, "%s: empty file", path);
	}

	const char *end = NULL;
	/* len + 1 takes in our NUL, so that require_null_terminated refuses
	 * anything after the object. */
	cJSON *root = cJSON_ParseWithLengthOpts(buf, len + 1, &end, 1);
	if (!root) {
		size_t at = end && end >= buf && end <= buf + len ? (size_t)(end - buf) : 0;
		OPENSSL_cleanse(buf, len);
		free(buf);
		/* The offset only: the text around it may be the private key. */
		return sd_errf(err, errlen, "%s: not valid JSON (parse stopped at byte %zu)", path, at);
	}
	OPENSSL_cleanse(buf, len);
	free(buf);
	int r = sd_gce_key_from_json(root, path, key, err, errlen);
	sd_gce_json_wipe(root);
	cJSON_Delete(root);
	return r;
}

void sd_gce_key_free(struct sd_gce_key *key)
{
	if (!key)
		return;
	EVP_PKEY_free(key->pkey);
	free(key->private_key_id);
	free(key->client_email);
	free(key->token_uri);
	memset(key, 0, sizeof *key);
}

long sd_gce_base64url(const void *in, size_t n, char *out, size_t outlen)
{
	/* EVP_EncodeBlock takes an int count and writes 4 * ceil(n / 3) bytes
	 * and a NUL.  The whole 3-byte groups go straight into out, the last 1
	 * or 2 bytes through a small buffer, so that out needs room for the
	 * unpadded text only. */
	const unsigned char *p = in;
	if (n > (size_t)INT_MAX / 4 * 3 - 3)
		return -1;
	size_t whole = n / 3 * 3, tail = n - whole;
	size_t len = whole / 3 * 4 + (tail ? tail + 1 : 0);
	if (!out || outlen < len + 1)
		return -1;
	if (whole && EVP_EncodeBlock((unsigned char *)out, p, (int)whole) != (int)(whole / 3 * 4))
		return -1;
	if (tail) {
		unsigned char last[5];
		if (EVP_EncodeBlock(last, p + whole, (int)tail) != 4)
			return -1;
		memcpy(out + whole / 3 * 4, last, tail + 1);
	}
	out[len] = '\0';
	for (size_t i = 0; i < len; i++) {
		if (out[i] == '+')
			out[i] = '-';
		else if (out[i] == '/')
			out[i] = '_';
	}
	return (long)len;
}

/* Appends b64url(json of item) and, if dot, a '.' at out + *at.  Frees item. */
static int sd_gce_jwt_part(cJSON *item, char *out, size_t outlen, size_t *at, int dot, char *err,
                           size_t errlen)
{
	char *json = item ? cJSON_PrintUnformatted(item) : NULL;
	cJSON_Delete(item);
	if (!json)
		return sd_errf(err, errlen, "out of memory");
	long w = sd_gce_base64url(json, strlen(json), out + *at, outlen - *at);
	size_t jlen = strlen(json);
	free(json);
	if (w < 0 || (dot && *at + (size_t)w + 2 > outlen))
		return sd_errf(err, errlen, "JWT does not fit in %zu bytes (a %zu-byte part)", outlen, jlen);
	*at += (size_t)w;
	if (dot) {
		out[(*at)++] = '.';
		out[*at] = '\0';
	}
	return 0;
}

int sd_gce_jwt_assertion(const struct sd_gce_key *key, int64_t now, const char *scope, char *out,
                         size_t outlen, char *err, size_t errlen)
{
	if (out && outlen)
		out[0] = '\0';
	if (!key || !key->pkey || !key->private_key_id || !key->client_email || !key->token_uri)
		return sd_errf(err, errlen, "no key loaded");
	if (!scope || !*scope)
		return sd_errf(err, errlen, "no scope given");
	if (now < 0 || now > SD_GCE_TIME_MAX)
		return sd_errf(err, errlen, "time %" PRId64 " out of range", now);
	if (!out || outlen == 0)
		return sd_errf(err, errlen, "JWT does not fit in 0 bytes");

	/* Whole seconds as JSON numbers: cJSON prints an integral double with
	 * at most 15 digits without a fraction or an exponent, and
	 * SD_GCE_TIME_MAX + SD_GCE_JWT_LIFETIME has 12. */
	cJSON *h = cJSON_CreateObject(), *c = cJSON_CreateObject();
	if (!h || !c || !cJSON_AddStringToObject(h, "alg", "RS256") || !cJSON_AddStringToObject(h, "typ", "JWT") ||
	    !cJSON_AddStringToObject(h, "kid", key->private_key_id) ||
	    !cJSON_AddStringToObject(c, "iss", key->client_email) || !cJSON_AddStringToObject(c, "scope", scope) ||
	    !cJSON_AddStringToObject(c, "aud", key->token_uri) ||
	    !cJSON_AddNumberToObject(c, "iat", (double)now) ||
	    !cJSON_AddNumberToObject(c, "exp", (double)(now + SD_GCE_JWT_LIFETIME))) {
		cJSON_Delete(h);
		cJSON_Delete(c);
		return sd_errf(err, errlen, "out of memory");
	}
	size_t at = 0;
	if (sd_gce_jwt_part(h, out, outlen, &at, 1, err, errlen) < 0) {
		cJSON_Delete(c);
		out[0] = '\0';
		return -1;
	}
	if (sd_gce_jwt_part(c, out, outlen, &at, 0, err, errlen) < 0) {
		out[0] = '\0';
		return -1;
	}
	size_t signed_len = at;

	EVP_MD_CTX *md = EVP_MD_CTX_new();
	unsigned char *sig = NULL;
	size_t siglen = 0;
	int ok = md && EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, key->pkey) == 1 &&
	         EVP_DigestSign(md, NULL, &siglen, (const unsigned char *)out, signed_len) == 1 &&
	         (sig = malloc(siglen)) != NULL &&
	         EVP_DigestSign(md, sig, &siglen, (const unsigned char *)out, signed_len) == 1;
	EVP_MD_CTX_free(md);
	if (!ok) {
		free(sig);
		out[0] = '\0';
		return sd_errf(err, errlen, "cannot sign the JWT: %s", sd_gce_ssl_reason());
	}
	if (at + 2 > outlen) {
		free(sig);
		out[0] = '\0';
		return sd_errf(err, errlen, "JWT does not fit in %zu bytes", outlen);
	}
	out[at++] = '.';
	long w = sd_gce_base64url(sig, siglen, out + at, outlen - at);
	free(sig);
	if (w < 0) {
		out[0] = '\0';
		return sd_errf(err, errlen, "JWT does not fit in %zu bytes (signature of %zu bytes)", outlen,
		                  siglen);
	}
	return 0;
}

/* Appends s percent-encoded (all but RFC 3986 unreserved) at out + *at. */
static int sd_gce_form_append(const char *s, int encode, char *out, size_t outlen, size_t *at)
{
	static const char hex[] = "0123456789ABCDEF";
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		int plain = !encode || (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
		            (ch >= '0' && ch <= '9') || ch == '-' || ch == '.' || ch == '_' || ch == '~';
		size_t need = plain ? 1 : 3;
		if (*at + need + 1 > outlen)
			return -1;
		if (plain) {
			out[(*at)++] = (char)ch;
		} else {
			out[(*at)++] = '%';
			out[(*at)++] = hex[ch >> 4];
			out[(*at)++] = hex[ch & 15];
		}
	}
	out[*at] = '\0';
	return 0;
}

int sd_gce_token_request_body(const char *assertion, char *out, size_t outlen)
{
	size_t at = 0;
	if (!out || outlen == 0 || !assertion)
		return -1;
	out[0] = '\0';
	if (sd_gce_form_append("grant_type", 0, out, outlen, &at) < 0 ||
	    sd_gce_form_append("=", 0, out, outlen, &at) < 0 ||
	    sd_gce_form_append("urn:ietf:params:oauth:grant-type:jwt-bearer", 1, out, outlen, &at) < 0 ||
	    sd_gce_form_append("&assertion=", 0, out, outlen, &at) < 0 ||
	    sd_gce_form_append(assertion, 1, out, outlen, &at) < 0) {
		out[0] = '\0';
		return -1;
	}
	return 0;
}

/* A string of an error answer, cut for a one-line message: control
 * characters become spaces. */
static void sd_gce_one_line(const char *s, char *buf, size_t cap)
{
	size_t i = 0;
	for (; s && *s && i + 1 < cap; s++)
		buf[i++] = ((unsigned char)*s < 0x20 || *s == 0x7f) ? ' ' : *s;
	buf[i] = '\0';
}

/* The error answers: RFC 6749's {"error":"code","error_description":".."}
 * and Google's API form {"error":{"code":N,"message":"..","status":".."}}. */
static int sd_gce_token_error(const cJSON *root, char *err, size_t errlen)
{
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(root, "error");
	char a[128], b[512];
	if (cJSON_IsString(e) && e->valuestring) {
		const cJSON *d = cJSON_GetObjectItemCaseSensitive(root, "error_description");
		sd_gce_one_line(e->valuestring, a, sizeof a);
		if (cJSON_IsString(d) && d->valuestring && *d->valuestring) {
			sd_gce_one_line(d->valuestring, b, sizeof b);
			return sd_errf(err, errlen, "token endpoint refused: %s: %s", a, b);
		}
		return sd_errf(err, errlen, "token endpoint refused: %s", a);
	}
	const cJSON *code = cJSON_GetObjectItemCaseSensitive(e, "code");
	const cJSON *status = cJSON_GetObjectItemCaseSensitive(e, "status");
	const cJSON *msg = cJSON_GetObjectItemCaseSensitive(e, "message");
	sd_gce_one_line(cJSON_IsString(status) ? status->valuestring : "error", a, sizeof a);
	sd_gce_one_line(cJSON_IsString(msg) ? msg->valuestring : "(no message)", b, sizeof b);
	if (cJSON_IsNumber(code))
		return sd_errf(err, errlen, "token endpoint refused: %d %s: %s", code->valueint, a, b);
	return sd_errf(err, errlen, "token endpoint refused: %s: %s", a, b);
}

int sd_gce_token_parse(const char *json_text, size_t len, int64_t now, struct sd_gce_token *token,
                       char *err, size_t errlen)
{
	memset(token, 0, sizeof *token);
	cJSON *root = json_text ? cJSON_ParseWithLength(json_text, len) : NULL;
	if (!cJSON_IsObject(root)) {
		cJSON_Delete(root);
		return sd_errf(err, errlen, "token endpoint answer is not a JSON object");
	}
	int r = -1;
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(root, "error");
	const cJSON *at = cJSON_GetObjectItemCaseSensitive(root, "access_token");
	const cJSON *ei = cJSON_GetObjectItemCaseSensitive(root, "expires_in");
	const cJSON *tt = cJSON_GetObjectItemCaseSensitive(root, "token_type");
	if (e && (cJSON_IsString(e) || cJSON_IsObject(e))) {
		sd_gce_token_error(root, err, errlen);
	} else if (!at) {
		sd_errf(err, errlen, "token endpoint answer has no \"access_token\"");
	} else if (!cJSON_IsString(at) || !at->valuestring || !*at->valuestring) {
		sd_errf(err, errlen, "token endpoint answer: \"access_token\" is not a non-empty string");
	} else if (!ei) {
		sd_errf(err, errlen, "token endpoint answer has no \"expires_in\"");
	} else if (!cJSON_IsNumber(ei) || !(ei->valuedouble >= 1 && ei->valuedouble <= SD_GCE_EXPIRES_IN_MAX) ||
	           ei->valuedouble != (double)(int64_t)ei->valuedouble) {
		/* The range first: converting an out-of-range double is undefined. */
		sd_errf(err, errlen, "token endpoint answer: \"expires_in\" is not a whole number of "
		           "seconds in 1..%d", SD_GCE_EXPIRES_IN_MAX);
	} else if (!tt) {
		sd_errf(err, errlen, "token endpoint answer has no \"token_type\"");
	} else if (!cJSON_IsString(tt) || !tt->valuestring || strcasecmp(tt->valuestring, "Bearer") != 0) {
		char t[64];
		sd_gce_one_line(cJSON_IsString(tt) ? tt->valuestring : "(not a string)", t, sizeof t);
		sd_errf(err, errlen, "token endpoint answer: \"token_type\" is \"%s\", not \"Bearer\"", t);
	} else if (now < 0 || now > SD_GCE_TIME_MAX) {
		sd_errf(err, errlen, "time %" PRId64 " out of range", now);
	} else {
		int64_t lifetime = (int64_t)ei->valuedouble;
		int64_t margin = lifetime / 2 < SD_GCE_TOKEN_REFRESH_MARGIN ? lifetime / 2
		                                                            : SD_GCE_TOKEN_REFRESH_MARGIN;
		token->access_token = sd_gce_strdup(at->valuestring);
		if (!token->access_token) {
			sd_errf(err, errlen, "out of memory");
		} else {
			token->expires_at = now + lifetime;
			token->refresh_at = token->expires_at - margin;
			r = 0;
		}
	}
	/* cJSON's copy of the token is wiped like ours. */
	sd_gce_json_wipe(root);
	cJSON_Delete(root);
	return r;
}

int sd_gce_token_from_gcloud(const char *json_text, size_t len, int64_t now, struct sd_gce_token *token,
                             char *account, size_t accountlen, char *err, size_t errlen)
{
	memset(token, 0, sizeof *token);
	if (account && accountlen)
		account[0] = '\0';
	cJSON *root = json_text ? cJSON_ParseWithLength(json_text, len) : NULL;
	if (!cJSON_IsObject(root)) {
		cJSON_Delete(root);
		return sd_errf(err, errlen, "gcloud config config-helper: the answer is not a JSON object");
	}
	int r = -1;
	const cJSON *acct = cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(root, "configuration"), "properties"), "core"), "account");
	char who[256];
	sd_gce_one_line(cJSON_IsString(acct) ? acct->valuestring : "", who, sizeof who);
	if (account && accountlen)
		snprintf(account, accountlen, "%s", who);
	const cJSON *cred = cJSON_GetObjectItemCaseSensitive(root, "credential");
	const cJSON *at = cJSON_GetObjectItemCaseSensitive(cred, "access_token");
	const cJSON *te = cJSON_GetObjectItemCaseSensitive(cred, "token_expiry");
	int64_t expiry = cJSON_IsString(te) ? (int64_t)sd_utc_time_parse(te->valuestring) : -1;
	if (!cJSON_IsObject(cred)) {
		sd_errf(err, errlen, "gcloud config config-helper: no \"credential\" object in the answer");
	} else if (!cJSON_IsString(at) || !at->valuestring || !*at->valuestring) {
		sd_errf(err, errlen, "gcloud config config-helper: credential.access_token is %s",
		        at ? "not a non-empty string" : "missing");
	} else if (expiry < 0) {
		char t[64];
		sd_gce_one_line(cJSON_IsString(te) ? te->valuestring : "(missing)", t, sizeof t);
		sd_errf(err, errlen, "gcloud config config-helper: credential.token_expiry \"%s\" is not a UTC "
		        "time like 2026-12-03T06:00:00Z", t);
	} else if (now < 0 || now > SD_GCE_TIME_MAX) {
		sd_errf(err, errlen, "time %" PRId64 " out of range", now);
	} else if (expiry <= now) {
		sd_errf(err, errlen, "gcloud's token for %s expired at %s: run gcloud auth login",
		        who[0] ? who : "its account", te->valuestring);
	} else {
		int64_t left = expiry - now;
		int64_t margin = left / 2 < SD_GCE_TOKEN_REFRESH_MARGIN ? left / 2 : SD_GCE_TOKEN_REFRESH_MARGIN;
		token->access_token = sd_gce_strdup(at->valuestring);
		if (!token->access_token) {
			sd_errf(err, errlen, "out of memory");
		} else {
			token->expires_at = expiry;
			token->refresh_at = expiry - margin;
			r = 0;
		}
	}
	sd_gce_json_wipe(root);
	cJSON_Delete(root);
	return r;
}

void sd_gce_token_free(struct sd_gce_token *token)
{
	if (!token)
		return;
	if (token->access_token) {
		OPENSSL_cleanse(token->access_token, strlen(token->access_token));
		free(token->access_token);
	}
	memset(token, 0, sizeof *token);
}
