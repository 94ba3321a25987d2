/* src/provider/http/sigv4.c - AWS Signature Version 4 (see sigv4.h for the
 * algorithm and its sources).  SHA-256 and HMAC-SHA256 come from OpenSSL's
 * libcrypto (EVP_Digest, HMAC); nothing cryptographic is written here. */
#include "config.h"
#include "src/provider/http/sigv4.h"
#include "src/provider/http/secret-file.h"
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char sigv4_hexdigits_upper[] = "0123456789ABCDEF";
static const char sigv4_hexdigits_lower[] = "0123456789abcdef";

static int sigv4_unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '_' || c == '.' || c == '~';
}

size_t sd_sigv4_encode(const char *s, size_t len, int keep_slash, char *out)
{
	size_t o = 0;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		if (sigv4_unreserved(c) || (keep_slash && c == '/')) {
			out[o++] = (char)c;
		} else {
			out[o++] = '%';
			out[o++] = sigv4_hexdigits_upper[c >> 4];
			out[o++] = sigv4_hexdigits_upper[c & 15];
		}
	}
	out[o] = '\0';
	return o;
}

/* A growing string; a failed allocation sets oom and makes later appends
 * do nothing, so that the builder checks once at the end. */
struct sigv4_buf {
	char *p;
	size_t len, cap;
	int oom;
};

static void sigv4_buf_reserve(struct sigv4_buf *b, size_t more)
{
	if (b->oom)
		return;
	if (more > SIZE_MAX / 2 - b->len - 1) {
		b->oom = 1;
		return;
	}
	if (b->len + more + 1 <= b->cap)
		return;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < b->len + more + 1)
		cap *= 2;
	char *p = realloc(b->p, cap);
	if (!p) {
		b->oom = 1;
		return;
	}
	b->p = p;
	b->cap = cap;
}

static void sigv4_buf_add(struct sigv4_buf *b, const char *s, size_t n)
{
	sigv4_buf_reserve(b, n);
	if (b->oom)
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void sigv4_buf_str(struct sigv4_buf *b, const char *s)
{
	sigv4_buf_add(b, s, strlen(s));
}

static void sigv4_buf_encoded(struct sigv4_buf *b, const char *s, size_t n, int keep_slash)
{
	if (n > SIZE_MAX / 3 - 1) {
		b->oom = 1;
		return;
	}
	sigv4_buf_reserve(b, 3 * n);
	if (b->oom)
		return;
	b->len += sd_sigv4_encode(s, n, keep_slash, b->p + b->len);
}

/* One pair, both halves encoded (form and query) or a header's lower-case
 * name and canonical value. */
struct sigv4_kv {
	char *name;
	char *value;
};

static int sigv4_kv_cmp(const void *a, const void *b)
{
	const struct sigv4_kv *x = a, *y = b;
	int c = strcmp(x->name, y->name);
	return c ? c : strcmp(x->value, y->value);
}

static void sigv4_kv_free(struct sigv4_kv *kv, size_t n)
{
	if (!kv)
		return;
	for (size_t i = 0; i < n; i++) {
		free(kv[i].name);
		free(kv[i].value);
	}
	free(kv);
}

static char *sigv4_encode_dup(const char *s)
{
	size_t n = strlen(s);
	if (n > SIZE_MAX / 3 - 1)
		return NULL;
	char *out = malloc(3 * n + 1);
	if (out)
		sd_sigv4_encode(s, n, 0, out);
	return out;
}

char *sd_sigv4_form(const struct sd_sigv4_pair *pairs, size_t n, enum sd_sigv4_order order,
                    size_t *len)
{
	if (n > SD_SIGV4_MAX_PAIRS)
		return NULL;
	struct sigv4_kv *kv = calloc(n ? n : 1, sizeof *kv);
	if (!kv)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		kv[i].name = sigv4_encode_dup(pairs[i].name);
		kv[i].value = sigv4_encode_dup(pairs[i].value);
		if (!kv[i].name || !kv[i].value) {
			sigv4_kv_free(kv, i + 1);
			return NULL;
		}
	}
	if (order == SD_SIGV4_SORTED && n > 1)
		qsort(kv, n, sizeof *kv, sigv4_kv_cmp);
	struct sigv4_buf b = {0};
	sigv4_buf_reserve(&b, 0);
	if (!b.oom)
		b.p[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		if (i > 0)
			sigv4_buf_add(&b, "&", 1);
		sigv4_buf_str(&b, kv[i].name);
		sigv4_buf_add(&b, "=", 1);
		sigv4_buf_str(&b, kv[i].value);
	}
	sigv4_kv_free(kv, n);
	if (b.oom) {
		free(b.p);
		return NULL;
	}
	if (len)
		*len = b.len;
	return b.p;
}

static void sigv4_hex(const unsigned char *md, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = sigv4_hexdigits_lower[md[i] >> 4];
		out[2 * i + 1] = sigv4_hexdigits_lower[md[i] & 15];
	}
	out[2 * n] = '\0';
}

/* hex(SHA256(data)) into out (SD_SIGV4_HEX_SIZE bytes); 0 or -1. */
static int sigv4_sha256_hex(const void *data, size_t len, char *out)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	if (EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen != 32)
		return -1;
	sigv4_hex(md, mdlen, out);
	return 0;
}

/* out = HMAC-SHA256(key, msg), 32 bytes; 0 or -1. */
static int sigv4_hmac(const unsigned char *key, size_t keylen, const char *msg, size_t msglen,
                      unsigned char out[32])
{
	unsigned int outlen = 0;
	if (keylen > INT32_MAX)
		return -1;
	if (!HMAC(EVP_sha256(), key, (int)keylen, (const unsigned char *)msg, msglen, out, &outlen) ||
	    outlen != 32)
		return -1;
	return 0;
}

/* A non-empty string of printable ASCII without '/' (a scope element). */
static const char *sigv4_check_scope(const char *what, const char *s, char *err, size_t errlen)
{
	if (!s || !*s) {
		sd_errf(err, errlen, "sigv4: %s is empty", what);
		return NULL;
	}
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (*p <= ' ' || *p >= 127 || *p == '/') {
			sd_errf(err, errlen, "sigv4: %s has a byte 0x%02x that cannot be in a credential scope",
			           what, *p);
			return NULL;
		}
	return s;
}

static int sigv4_tchar(unsigned char c)
{
	return sigv4_unreserved(c) || (c && strchr("!#$%&'*+^`|", c));
}

static int sigv4_check_path(const char *path, char *err, size_t errlen)
{
	if (!path || !*path)
		return sd_errf(err, errlen, "sigv4: path is empty");
	if (path[0] != '/')
		return sd_errf(err, errlen, "sigv4: path \"%.64s\" does not start with '/'", path);
	for (const unsigned char *p = (const unsigned char *)path; *p; p++)
		if (*p <= ' ' || *p >= 127 || *p == '?' || *p == '#')
			return sd_errf(err, errlen,
			                  "sigv4: path has a byte 0x%02x (it must be percent-encoded, no query)", *p);
	/* Segments between slashes; the last may be empty ("/" or "/a/"). */
	for (const char *seg = path + 1;;) {
		const char *end = strchr(seg, '/');
		size_t n = end ? (size_t)(end - seg) : strlen(seg);
		if ((n == 0 && end) || (n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.'))
			return sd_errf(err, errlen,
			                  "sigv4: path \"%.64s\" has an empty, \".\" or \"..\" segment", path);
		if (!end)
			break;
		seg = end + 1;
	}
	return 0;
}

/* The canonical value of a header: blanks trimmed at both ends, runs of
 * blanks inside made one space.  NULL when out of memory. */
static char *sigv4_header_value(const char *v)
{
	char *out = malloc(strlen(v) + 1);
	if (!out)
		return NULL;
	size_t o = 0;
	int blank = 0;
	for (; *v; v++) {
		if (*v == ' ' || *v == '\t') {
			blank = 1;
			continue;
		}
		if (blank && o > 0)
			out[o++] = ' ';
		blank = 0;
		out[o++] = *v;
	}
	out[o] = '\0';
	return out;
}

static char *sigv4_lower_dup(const char *s)
{
	size_t n = strlen(s);
	char *out = malloc(n + 1);
	if (!out)
		return NULL;
	for (size_t i = 0; i <= n; i++)
		out[i] = (s[i] >= 'A' && s[i] <= 'Z') ? (char)(s[i] - 'A' + 'a') : s[i];
	return out;
}

static int sigv4_check_header(const struct sd_sigv4_pair *h, size_t i, char *err, size_t errlen)
{
	static const char *const reserved[] = {"host", "x-amz-date", "x-amz-security-token", "authorization"};
	if (!h->name || !*h->name)
		return sd_errf(err, errlen, "sigv4: header %zu has an empty name", i);
	for (const unsigned char *p = (const unsigned char *)h->name; *p; p++)
		if (!sigv4_tchar(*p))
			return sd_errf(err, errlen, "sigv4: header %zu name \"%.64s\" has a byte 0x%02x that is not "
			                  "allowed in a header name", i, h->name, *p);
	for (size_t r = 0; r < sizeof reserved / sizeof reserved[0]; r++) {
		size_t n = strlen(reserved[r]);
		if (strlen(h->name) != n)
			continue;
		size_t k = 0;
		while (k < n && (h->name[k] | 0x20) == reserved[r][k])
			k++;
		if (k == n)
			return sd_errf(err, errlen, "sigv4: header %zu (%s) is set by the signer", i, h->name);
	}
	if (!h->value)
		return sd_errf(err, errlen, "sigv4: header %zu (%.64s) has no value", i, h->name);
	for (const unsigned char *p = (const unsigned char *)h->value; *p; p++)
		if ((*p < ' ' && *p != '\t') || *p == 127)
			return sd_errf(err, errlen, "sigv4: header %zu (%.64s) value has a control byte 0x%02x", i,
			                  h->name, *p);
	return 0;
}

/* Checks everything sd_sigv4_sign is given; 0 or -1 with the message. */
static int sigv4_check(const struct sd_sigv4_request *req, const struct sd_sigv4_creds *creds, char *err,
                       size_t errlen)
{
	if (!req)
		return sd_errf(err, errlen, "sigv4: no request");
	if (!creds)
		return sd_errf(err, errlen, "sigv4: no credentials");
	if (!req->method || !*req->method)
		return sd_errf(err, errlen, "sigv4: method is empty");
	for (const char *p = req->method; *p; p++)
		if (*p < 'A' || *p > 'Z')
			return sd_errf(err, errlen, "sigv4: method \"%.16s\" is not upper-case letters", req->method);
	if (!req->host || !*req->host)
		return sd_errf(err, errlen, "sigv4: host is empty");
	for (const unsigned char *p = (const unsigned char *)req->host; *p; p++)
		if (*p <= ' ' || *p >= 127 || *p == '/')
			return sd_errf(err, errlen, "sigv4: host has a byte 0x%02x", *p);
	if (sigv4_check_path(req->path, err, errlen) < 0)
		return -1;
	if (!sigv4_check_scope("region", req->region, err, errlen) ||
	    !sigv4_check_scope("service", req->service, err, errlen) ||
	    !sigv4_check_scope("access key id", creds->access_key_id, err, errlen))
		return -1;
	if (!creds->secret_key || !*creds->secret_key)
		return sd_errf(err, errlen, "sigv4: secret key is empty");
	if (creds->session_token)
		for (const unsigned char *p = (const unsigned char *)creds->session_token; *p; p++)
			if (*p < ' ' || *p == 127)
				return sd_errf(err, errlen, "sigv4: session token has a control byte 0x%02x", *p);
	if (req->nquery > SD_SIGV4_MAX_PAIRS)
		return sd_errf(err, errlen, "sigv4: %zu query pairs (at most %d)", req->nquery, SD_SIGV4_MAX_PAIRS);
	if (req->nquery && !req->query)
		return sd_errf(err, errlen, "sigv4: %zu query pairs but no array", req->nquery);
	for (size_t i = 0; i < req->nquery; i++)
		if (!req->query[i].name || !req->query[i].value)
			return sd_errf(err, errlen, "sigv4: query pair %zu has a NULL name or value", i);
	if (req->nheaders > SD_SIGV4_MAX_HEADERS)
		return sd_errf(err, errlen, "sigv4: %zu headers (at most %d)", req->nheaders, SD_SIGV4_MAX_HEADERS);
	if (req->nheaders && !req->headers)
		return sd_errf(err, errlen, "sigv4: %zu headers but no array", req->nheaders);
	for (size_t i = 0; i < req->nheaders; i++) {
		if (sigv4_check_header(&req->headers[i], i, err, errlen) < 0)
			return -1;
		for (size_t j = 0; j < i; j++)
			if (strcasecmp(req->headers[i].name, req->headers[j].name) == 0)
				return sd_errf(err, errlen, "sigv4: header %zu (%.64s) is given twice (also header %zu)",
				                  i, req->headers[i].name, j);
	}
	if (req->body_len && !req->body)
		return sd_errf(err, errlen, "sigv4: body_len is %zu but body is NULL", req->body_len);
	return 0;
}

/* The canonical request into *cr: 0, or -1 when out of memory. */
static int sigv4_canonical_request(const struct sd_sigv4_request *req, const struct sd_sigv4_creds *creds,
                                   const struct sd_sigv4_out *out, struct sigv4_buf *cr)
{
	size_t nh = 0;
	struct sigv4_kv *h = calloc(req->nheaders + 3, sizeof *h);
	if (!h)
		return -1;
	int rc = -1;
	for (size_t i = 0; i < req->nheaders; i++, nh++) {
		h[nh].name = sigv4_lower_dup(req->headers[i].name);
		h[nh].value = sigv4_header_value(req->headers[i].value);
		if (!h[nh].name || !h[nh].value) {
			nh++;
			goto done;
		}
	}
	const char *signer[3][2] = {{"host", req->host}, {"x-amz-date", out->amz_date},
	                            {"x-amz-security-token", creds->session_token}};
	for (size_t i = 0; i < 3; i++) {
		if (!signer[i][1] || !*signer[i][1])
			continue;
		h[nh].name = strdup(signer[i][0]);
		h[nh].value = sigv4_header_value(signer[i][1]);
		nh++;
		if (!h[nh - 1].name || !h[nh - 1].value)
			goto done;
	}
	qsort(h, nh, sizeof *h, sigv4_kv_cmp);

	sigv4_buf_str(cr, req->method);
	sigv4_buf_add(cr, "\n", 1);
	sigv4_buf_encoded(cr, req->path, strlen(req->path), 1);
	sigv4_buf_add(cr, "\n", 1);
	char *query = sd_sigv4_form(req->query, req->nquery, SD_SIGV4_SORTED, NULL);
	if (!query)
		goto done;
	sigv4_buf_str(cr, query);
	free(query);
	sigv4_buf_add(cr, "\n", 1);
	for (size_t i = 0; i < nh; i++) {
		sigv4_buf_str(cr, h[i].name);
		sigv4_buf_add(cr, ":", 1);
		sigv4_buf_str(cr, h[i].value);
		sigv4_buf_add(cr, "\n", 1);
	}
	sigv4_buf_add(cr, "\n", 1);
	for (size_t i = 0; i < nh; i++) {
		if (i > 0)
			sigv4_buf_add(cr, ";", 1);
		sigv4_buf_str(cr, h[i].name);
	}
	sigv4_buf_add(cr, "\n", 1);
	sigv4_buf_str(cr, out->payload_hash);
	rc = cr->oom ? -1 : 0;
done:
	sigv4_kv_free(h, nh);
	return rc;
}

/* The signed header names "a;b;c": the last line but one of the canonical
 * request. */
static void sigv4_signed_headers(const struct sigv4_buf *cr, const char **start, size_t *len)
{
	const char *end = strrchr(cr->p, '\n');
	const char *s = end;
	while (s > cr->p && s[-1] != '\n')
		s--;
	*start = s;
	*len = (size_t)(end - s);
}

/* kSigning from the secret, date, region and service, then the signature
 * of sts into out->signature.  Every key is wiped before returning. */
static int sigv4_signature(const struct sd_sigv4_request *req, const struct sd_sigv4_creds *creds,
                           const char *date, const char *sts, struct sd_sigv4_out *out)
{
	unsigned char k1[32], k2[32], sig[32];
	size_t slen = strlen(creds->secret_key);
	unsigned char *secret = malloc(slen + 4);
	int rc = -1;
	if (!secret)
		return -1;
	memcpy(secret, "AWS4", 4);
	memcpy(secret + 4, creds->secret_key, slen);
	/* kDate, kRegion, kService, kSigning, alternating between k1 and k2. */
	if (sigv4_hmac(secret, slen + 4, date, strlen(date), k1) == 0 &&
	    sigv4_hmac(k1, 32, req->region, strlen(req->region), k2) == 0 &&
	    sigv4_hmac(k2, 32, req->service, strlen(req->service), k1) == 0 &&
	    sigv4_hmac(k1, 32, "aws4_request", 12, k2) == 0 &&
	    sigv4_hmac(k2, 32, sts, strlen(sts), sig) == 0) {
		sigv4_hex(sig, 32, out->signature);
		rc = 0;
	}
	OPENSSL_cleanse(secret, slen + 4);
	OPENSSL_cleanse(k1, sizeof k1);
	OPENSSL_cleanse(k2, sizeof k2);
	free(secret);
	return rc;
}

int sd_sigv4_sign(const struct sd_sigv4_request *req, const struct sd_sigv4_creds *creds,
                  struct sd_sigv4_out *out, char *err, size_t errlen)
{
	if (err && errlen > 0)
		err[0] = '\0';
	if (!out)
		return sd_errf(err, errlen, "sigv4: no output");
	memset(out, 0, sizeof *out);
	if (sigv4_check(req, creds, err, errlen) < 0)
		return -1;

	struct tm tm;
	if (!gmtime_r(&req->when, &tm) || tm.tm_year < 70 || tm.tm_year > 9999 - 1900)
		return sd_errf(err, errlen, "sigv4: time %lld is not between 1970 and 9999",
		                  (long long)req->when);
	if (strftime(out->amz_date, sizeof out->amz_date, "%Y%m%dT%H%M%SZ", &tm) != 16)
		return sd_errf(err, errlen, "sigv4: cannot format time %lld", (long long)req->when);
	char date[9];
	memcpy(date, out->amz_date, 8);
	date[8] = '\0';

	if (sigv4_sha256_hex(req->body_len ? req->body : "", req->body_len, out->payload_hash) < 0) {
		memset(out, 0, sizeof *out);
		return sd_errf(err, errlen, "sigv4: SHA-256 of the body failed (libcrypto)");
	}

	struct sigv4_buf cr = {0};
	if (sigv4_canonical_request(req, creds, out, &cr) < 0) {
		free(cr.p);
		memset(out, 0, sizeof *out);
		return sd_errf(err, errlen, "sigv4: out of memory");
	}
	const char *signed_headers;
	size_t signed_len;
	sigv4_signed_headers(&cr, &signed_headers, &signed_len);
	int rc = -1;
	if (sigv4_sha256_hex(cr.p, cr.len, out->canonical_hash) < 0) {
		sd_errf(err, errlen, "sigv4: SHA-256 of the canonical request failed (libcrypto)");
		goto done;
	}
	char sts[256];
	int n = snprintf(sts, sizeof sts, "AWS4-HMAC-SHA256\n%s\n%s/%s/%s/aws4_request\n%s", out->amz_date, date,
	                 req->region, req->service, out->canonical_hash);
	if (n < 0 || (size_t)n >= sizeof sts) {
		sd_errf(err, errlen, "sigv4: region and service are too long (%zu + %zu bytes)",
		           strlen(req->region), strlen(req->service));
		goto done;
	}
	if (sigv4_signature(req, creds, date, sts, out) < 0) {
		sd_errf(err, errlen, "sigv4: HMAC-SHA256 failed (libcrypto or out of memory)");
		goto done;
	}
	n = snprintf(out->authorization, sizeof out->authorization,
	             "AWS4-HMAC-SHA256 Credential=%s/%s/%s/%s/aws4_request, SignedHeaders=%.*s, Signature=%s",
	             creds->access_key_id, date, req->region, req->service, (int)signed_len, signed_headers,
	             out->signature);
	if (n < 0 || (size_t)n >= sizeof out->authorization) {
		sd_errf(err, errlen, "sigv4: the Authorization header would be %d bytes (at most %d)", n,
		           SD_SIGV4_AUTH_SIZE - 1);
		goto done;
	}
	rc = 0;
done:
	free(cr.p);
	if (rc < 0)
		memset(out, 0, sizeof *out);
	return rc;
}
