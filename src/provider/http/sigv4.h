/* src/provider/http/sigv4.h - AWS Signature Version 4: the Authorization header
 * of a request to the EC2 Query API (and any other AWS service that takes
 * SigV4 in a header), with OpenSSL's libcrypto for SHA-256 and HMAC.
 *
 * Source: AWS, "Create a signed AWS API request" (Signature Version 4), as
 * summed up in shared/reference/cloud-apis.md section 2.1, and checked
 * against botocore's SigV4Auth (tests/provider/http/test-sigv4-botocore.sh).  In short:
 *
 *   CanonicalRequest = METHOD \n CanonicalURI \n CanonicalQuery \n
 *                      CanonicalHeaders \n SignedHeaders \n hex(SHA256(body))
 *   StringToSign     = "AWS4-HMAC-SHA256" \n AMZDATE \n
 *                      DATE/REGION/SERVICE/aws4_request \n
 *                      hex(SHA256(CanonicalRequest))
 *   kSigning         = HMAC(HMAC(HMAC(HMAC("AWS4" SECRET, DATE), REGION),
 *                           SERVICE), "aws4_request")
 *   Signature        = hex(HMAC(kSigning, StringToSign))
 *
 * with AMZDATE "YYYYMMDDTHHMMSSZ" and DATE "YYYYMMDD" in UTC, HMAC being
 * HMAC-SHA256 and hex lower case.
 *
 * Encoding (RFC 3986 section 2.3, as AWS wants it): the unreserved bytes
 * A-Z a-z 0-9 - _ . ~ are kept, every other byte (UTF-8 bytes one by one)
 * becomes %XX with upper-case hex; a space is %20, never '+'.
 *
 * The canonical query string is the pairs encoded, sorted by encoded name
 * and then by encoded value (bytewise, so duplicate names keep a stable,
 * value-sorted order), each NAME=VALUE, joined with '&'.  An EC2 POST
 * sends its parameters in the body instead (sd_sigv4_form) and has no
 * query pairs: the canonical query string is then empty.
 *
 * Canonical headers: the caller's extra headers plus host, x-amz-date and,
 * with a session token, x-amz-security-token; names lower-cased, values
 * with leading and trailing blanks (space, tab) dropped and every run of
 * blanks inside turned into one space; sorted by name; each "name:value\n".
 * All of them are signed.
 *
 * The secret key and the derived keys never leave sd_sigv4_sign: the
 * derived keys are wiped with OPENSSL_cleanse before it returns, and
 * nothing here prints anything. */
#ifndef SD_PROVIDER_HTTP_SIGV4_H
#define SD_PROVIDER_HTTP_SIGV4_H

#include <stddef.h>
#include <time.h>

/* Sizes of the fixed fields of struct sd_sigv4_out, NUL included. */
#define SD_SIGV4_AMZDATE_SIZE 17     /* "20150830T123600Z" */
#define SD_SIGV4_HEX_SIZE 65         /* 64 lower-case hex digits of a SHA-256 */
#define SD_SIGV4_AUTH_SIZE 2048      /* the Authorization header's value */

/* At most this many extra headers and query pairs in one request; the
 * limits keep the Authorization header (which lists the signed header
 * names) within SD_SIGV4_AUTH_SIZE and the sorting trivially cheap. */
#define SD_SIGV4_MAX_HEADERS 32
#define SD_SIGV4_MAX_PAIRS 4096

/* A query parameter, form field or header: NUL-terminated strings that
 * the caller owns.  A value may be "" (never NULL). */
struct sd_sigv4_pair {
	const char *name;
	const char *value;
};

/* The credentials: access key id (e.g. "AKIDEXAMPLE"), secret access key,
 * and the session token of temporary credentials (STS, the instance
 * role's from IMDS), or NULL / "" when there is none. */
struct sd_sigv4_creds {
	const char *access_key_id;
	const char *secret_key;
	const char *session_token;
};

/* One request to sign.  Everything is owned by the caller. */
struct sd_sigv4_request {
	const char *method;     /* "GET", "POST", ... (upper case letters) */
	const char *host;       /* Host header as sent, e.g. "ec2.us-east-1.amazonaws.com"
	                         * (with ":PORT" when the port is not the scheme's) */
	const char *path;       /* absolute path as it is sent (already percent-encoded,
	                         * no query), e.g. "/".  The canonical URI is this path
	                         * percent-encoded once more, '/' kept: AWS encodes path
	                         * segments twice for every service but S3, which this
	                         * module does not sign.  Refused: not starting with
	                         * '/', "." or ".." or empty segments, bytes outside
	                         * printable ASCII, '?' or '#'. */
	const struct sd_sigv4_pair *query; /* query[0..nquery-1], raw (unencoded); may be NULL if nquery is 0 */
	size_t nquery;          /* at most SD_SIGV4_MAX_PAIRS */
	const struct sd_sigv4_pair *headers; /* extra headers to sign, e.g. content-type;
	                         * names are case-insensitive, each at most once; host,
	                         * x-amz-date, x-amz-security-token and authorization are
	                         * refused (this module sets them).  A value may not hold
	                         * CR, LF or other control bytes but tab. */
	size_t nheaders;        /* at most SD_SIGV4_MAX_HEADERS */
	const void *body;       /* body_len bytes; may be NULL if body_len is 0 */
	size_t body_len;
	const char *region;     /* e.g. "us-east-1" */
	const char *service;    /* e.g. "ec2" */
	time_t when;            /* signing time, seconds since the epoch (UTC); AWS
	                         * refuses a request more than 5 minutes off its clock
	                         * (RequestExpired) */
};

/* What the caller puts on the request: the headers
 *   X-Amz-Date: amz_date
 *   Authorization: authorization
 *   X-Amz-Security-Token: the session token (only when there is one)
 * and the extra headers exactly as signed.  payload_hash may also be sent
 * as X-Amz-Content-SHA256 (S3 wants it; EC2 does not).  canonical_hash and
 * signature are there for tests and debugging (the AWS documentation's
 * examples give both); neither reveals a key. */
struct sd_sigv4_out {
	char amz_date[SD_SIGV4_AMZDATE_SIZE];     /* "YYYYMMDDTHHMMSSZ", UTC */
	char payload_hash[SD_SIGV4_HEX_SIZE];     /* hex(SHA256(body)) */
	char canonical_hash[SD_SIGV4_HEX_SIZE];   /* hex(SHA256(CanonicalRequest)) */
	char signature[SD_SIGV4_HEX_SIZE];        /* hex(HMAC(kSigning, StringToSign)) */
	char authorization[SD_SIGV4_AUTH_SIZE];   /* "AWS4-HMAC-SHA256 Credential=AKID/DATE/REGION/
	                                           * SERVICE/aws4_request, SignedHeaders=a;b;c,
	                                           * Signature=HEX" */
};

/* Signs *req with *creds into *out.  Returns 0, or -1 with a one-line
 * message in err (errlen bytes, truncated to fit, always NUL-terminated
 * when errlen > 0; err may be NULL when errlen is 0) that names the
 * field, e.g. "sigv4: region is empty", "sigv4: header 2 (Host) is set
 * by the signer", "sigv4: path \"a\" does not start with '/'".
 * Refused: an empty or missing method, host, path, region, service,
 * access key id or secret key; a region, service or access key id with a
 * '/' or a byte outside printable ASCII; a time gmtime cannot convert or
 * outside the years 1970..9999; too many pairs or headers; a header name
 * that is empty or not an HTTP token, given twice or set by the signer; a
 * header value with control bytes; a region and service together longer
 * than about 130 bytes (the string to sign has a fixed buffer; real ones
 * are under 30); an Authorization header longer than SD_SIGV4_AUTH_SIZE - 1;
 * a libcrypto failure; out of memory (the canonical request is built on
 * the heap).
 * On failure *out is zeroed.  Nothing is printed. */
int sd_sigv4_sign(const struct sd_sigv4_request *req, const struct sd_sigv4_creds *creds,
                  struct sd_sigv4_out *out, char *err, size_t errlen);

/* Percent-encodes the len bytes at s into out (see the top of the file),
 * keeping '/' as well when keep_slash is nonzero (for paths).  out must
 * hold 3 * len + 1 bytes; it is NUL-terminated.  Returns the length
 * written (without the NUL). */
size_t sd_sigv4_encode(const char *s, size_t len, int keep_slash, char *out);

/* How sd_sigv4_form orders the pairs. */
enum sd_sigv4_order {
	SD_SIGV4_AS_GIVEN,  /* in the order of pairs[] (an EC2 POST body: any order
	                     * works, since the body's hash is signed as sent) */
	SD_SIGV4_SORTED     /* sorted by encoded name, then encoded value: the
	                     * canonical query string */
};

/* Encodes pairs[0..n-1] as NAME=VALUE joined with '&' (an
 * application/x-www-form-urlencoded body in AWS's encoding, or a query
 * string), e.g. "Action=RunInstances&Version=2016-11-15".  n = 0 gives "".
 * Returns a NUL-terminated string the caller frees, and its length in
 * *len when len is not NULL; NULL when out of memory or when n is more
 * than SD_SIGV4_MAX_PAIRS. */
char *sd_sigv4_form(const struct sd_sigv4_pair *pairs, size_t n, enum sd_sigv4_order order,
                    size_t *len);

#endif
