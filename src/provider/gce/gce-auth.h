/* src/provider/gce/gce-auth.h - Google Cloud service-account credentials: the
 * key file, the signed JWT that asks for an access token, the form the
 * JWT is posted in and the token endpoint's answer.  No network here: the
 * caller posts the body to key->token_uri and hands the answer back.
 *
 * The flow is OAuth 2.0's JWT bearer grant (RFC 7523, section 2.1) as
 * Google documents it in "Using OAuth 2.0 for Server to Server
 * Applications" (developers.google.com/identity/protocols/oauth2/
 * service-account, "Preparing to make an authorized API call"), summed up
 * in ../shared/reference/cloud-apis.md section 1, "Auth.":
 *
 *   1. the key file a person downloads for a service account (JSON with
 *      type "service_account", private_key_id, private_key: a PEM PKCS#8
 *      RSA key, client_email, token_uri);
 *   2. a JWT (RFC 7519) signed with RS256 (RFC 7518 3.3: RSASSA-PKCS1-v1_5
 *      with SHA-256) over b64url(header) "." b64url(claims), where
 *        header = {"alg":"RS256","typ":"JWT","kid":private_key_id}
 *        claims = {"iss":client_email,"scope":SCOPE,"aud":token_uri,
 *                  "iat":NOW,"exp":NOW+3600}
 *      and b64url is base64 with the URL and file name safe alphabet and
 *      no '=' padding (RFC 4648 section 5; RFC 7515 section 2);
 *   3. POST token_uri, Content-Type application/x-www-form-urlencoded,
 *        grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=JWT
 *   4. the answer {"access_token":..,"expires_in":3599,"token_type":"Bearer"}
 *      (RFC 6749 section 5.1), or on failure {"error":"invalid_grant",
 *      "error_description":".."} (RFC 6749 section 5.2).
 *
 * Times are seconds since the Unix epoch (UTC), as JWT's NumericDate.
 * Errors: every function returns 0, or -1 with a one-line message in the
 * caller's buffer err (errlen bytes, always NUL-terminated when errlen > 0,
 * cut short if it does not fit; err may be NULL when errlen is 0).  No
 * message ever holds the private key or the access token.  Out of memory is
 * an error like any other ("out of memory"); nothing aborts. */
#ifndef SD_PROVIDER_GCE_GCE_AUTH_H
#define SD_PROVIDER_GCE_GCE_AUTH_H

#include <stddef.h>
#include <stdint.h>

/* A key file is about 2.3 KiB (a 2048-bit key); 64 KiB leaves room for any
 * RSA key and refuses a wrong file (a log, a disk image) before parsing. */
#define SD_GCE_KEY_MAX_BYTES (64u << 10)

/* token_uri when the key file has none: Google's OAuth 2.0 token endpoint,
 * the value every key file Google issues today carries. */
#define SD_GCE_TOKEN_URI_DEFAULT "https://oauth2.googleapis.com/token"

/* The scope spotdeck asks for: all of Compute Engine, as SkyPilot and the
 * gcloud defaults do (the service account's IAM roles still limit it). */
#define SD_GCE_SCOPE_CLOUD_PLATFORM "https://www.googleapis.com/auth/cloud-platform"

/* exp - iat of the assertion: one hour, the most Google accepts. */
#define SD_GCE_JWT_LIFETIME 3600

/* The latest `now` taken: 9999-12-31T23:59:59Z.  It keeps the JWT's
 * times plain integers in JSON (never 1e+16) and now + expires_in far from
 * overflow; anything beyond is a broken clock. */
#define SD_GCE_TIME_MAX INT64_C(253402300799)

/* A buffer this large holds any assertion for a key of up to 4096 bits
 * with strings of ordinary length (a 2048-bit key gives about 900 bytes);
 * sd_gce_jwt_assertion says when one does not fit. */
#define SD_GCE_JWT_MAX 8192

/* How long before expiry a token is renewed: 5 minutes, or half the
 * lifetime when that is shorter (a 3599 s token is renewed after 3299 s, a
 * 120 s one after 60 s).  The margin covers clock skew between us and
 * Google and the time one Compute call takes, so that a request never
 * leaves with a token about to lapse (google-auth-library-python's
 * google/auth/_helpers.py REFRESH_THRESHOLD renews 3 m 45 s early; we take
 * a rounder, slightly wider margin). */
#define SD_GCE_TOKEN_REFRESH_MARGIN 300

/* A loaded key file.  Every pointer is owned by the struct and freed by
 * sd_gce_key_free.  The private key is kept only as OpenSSL's parsed key,
 * never as text. */
struct sd_gce_key {
	struct evp_pkey_st *pkey;  /* OpenSSL's EVP_PKEY, an RSA private key */
	char *private_key_id;      /* the JWT header's "kid" */
	char *client_email;        /* the service account: the JWT's "iss" */
	char *token_uri;           /* where to post: the JWT's "aud" (default SD_GCE_TOKEN_URI_DEFAULT) */
};

/* An access token from the token endpoint.  access_token is owned (wiped
 * and freed by sd_gce_token_free). */
struct sd_gce_token {
	char *access_token;  /* goes in "Authorization: Bearer <access_token>" */
	int64_t expires_at;  /* now + expires_in, seconds since the epoch */
	int64_t refresh_at;  /* expires_at - min(SD_GCE_TOKEN_REFRESH_MARGIN, expires_in / 2) */
};

/* Reads the service-account key file at `path` into *key.
 * Refused, each with "PATH: problem":
 *   - a file this process cannot open or read (strerror), one that is not a
 *     regular file, one larger than SD_GCE_KEY_MAX_BYTES;
 *   - a file that group or others may read or write, since it holds a
 *     private key: "PATH: key file is readable by others (mode 0644);
 *     chmod 600 PATH" ("writable" when only write bits are set);
 *   - an empty file, text that is not one JSON object (with the byte
 *     offset where parsing stopped, never the text);
 *   - a missing, non-string or empty field among type, private_key_id,
 *     private_key, client_email (the message names the field);
 *     token_uri may be absent (then SD_GCE_TOKEN_URI_DEFAULT) but when
 *     present must be a non-empty string;
 *   - type other than "service_account" (e.g. "authorized_user", a
 *     person's gcloud credentials, which hold no private key);
 *   - private_key that OpenSSL's PEM_read_bio_PrivateKey cannot read (an
 *     encrypted key is refused, never prompted for), or a key that is not
 *     RSA (RS256 needs RSA).
 * The file's bytes, and the cJSON copy of the key text, are wiped with
 * OPENSSL_cleanse before they are freed.  On failure *key is left empty
 * (all NULL), and sd_gce_key_free on it is harmless. */
int sd_gce_key_load(const char *path, struct sd_gce_key *key, char *err, size_t errlen);

/* Frees what *key owns and empties it; key may be NULL. */
void sd_gce_key_free(struct sd_gce_key *key);

/* Writes the signed JWT for `key`, issued at `now` for `scope` (one scope,
 * or several separated by spaces, as Google takes them), into out (outlen
 * bytes, NUL-terminated; SD_GCE_JWT_MAX is enough).  The claims are iss =
 * client_email, scope, aud = token_uri, iat = now, exp = now +
 * SD_GCE_JWT_LIFETIME, in that order; the header alg, typ, kid.  Both are
 * compact JSON written by cJSON (so any string is escaped), base64url
 * encoded without padding, and signed with EVP_DigestSign (RSA PKCS#1 v1.5,
 * SHA-256).  Returns -1 (out left "") when it does not fit ("JWT does not
 * fit in M bytes"), when scope is empty, now is outside 0..SD_GCE_TIME_MAX,
 * or OpenSSL fails (its reason). */
int sd_gce_jwt_assertion(const struct sd_gce_key *key, int64_t now, const char *scope, char *out,
                         size_t outlen, char *err, size_t errlen);

/* Base64url of in[0..n-1] (RFC 4648 section 5: '-' and '_' for '+' and '/',
 * no '=' padding) into out, NUL-terminated.  Returns the length written
 * (without the NUL: ceil(4n/3)), or -1 when out (outlen bytes) has no
 * room for that and the NUL, or n is too large for OpenSSL's
 * EVP_EncodeBlock (above about 1.5 GiB). */
long sd_gce_base64url(const void *in, size_t n, char *out, size_t outlen);

/* Writes the token request's form body for `assertion` into out (outlen
 * bytes, NUL-terminated):
 *   grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=JWT
 * with every byte of either value outside RFC 3986's unreserved set
 * (ALPHA DIGIT - . _ ~) written as %XX (upper-case hex), which
 * application/x-www-form-urlencoded decodes back to the same bytes (a JWT
 * is base64url and dots, all unreserved, so it goes unchanged).  Returns
 * 0, or -1 (out left "") when out is too small. */
int sd_gce_token_request_body(const char *assertion, char *out, size_t outlen);

/* Parses the token endpoint's answer (len bytes of json_text, need not be
 * NUL-terminated), received at `now`, into *token.
 * Accepted: an object with access_token (a non-empty string), expires_in
 * (a whole number of seconds, 1..31536000) and token_type "Bearer"
 * (compared without case, RFC 6749 section 5.1).
 * Refused, with a message naming what is wrong: text that is not a JSON
 * object; an error answer, written as
 *   "token endpoint refused: invalid_grant: Invalid JWT Signature."
 * (RFC 6749's {"error","error_description"}; the description left out
 * when absent) or, for Google's API error form {"error":{"code":400,
 * "message":"..","status":".."}}, "token endpoint refused: 400 STATUS: ..";
 * a missing or wrong access_token, expires_in or token_type; now outside
 * 0..SD_GCE_TIME_MAX.
 * On failure *token is left empty, and sd_gce_token_free on it is harmless. */
int sd_gce_token_parse(const char *json_text, size_t len, int64_t now, struct sd_gce_token *token,
                       char *err, size_t errlen);

/* Parses what `gcloud config config-helper --format=json` prints (len
 * bytes of json_text), read at `now`, into *token, and the account it is
 * for into account (accountlen bytes; "" when gcloud names none).  This is
 * how google-auth-library-python reads a gcloud login
 * (google/auth/_cloud_sdk.py; the shape is in its tests' data
 * cloud_sdk_config.json and kubectl's gcp auth provider):
 *   {"configuration": {"properties": {"core": {"account": "me@example.com",
 *    ...}}}, "credential": {"access_token": "ya29...",
 *    "token_expiry": "2026-12-03T06:00:00Z"}, ...}
 * token_expiry is UTC, RFC 3339 with "Z", fractional seconds allowed.
 * Refused, with a message naming what is wrong: text that is not a JSON
 * object; no "credential" object; an access_token that is missing, empty
 * or not a string; a token_expiry missing or not of that form; a token
 * already expired at `now` ("gcloud's token for ACCOUNT expired at
 * EXPIRY: run gcloud auth login").  expires_at is token_expiry; refresh_at
 * as for sd_gce_token_parse (SD_GCE_TOKEN_REFRESH_MARGIN, or half what is
 * left).  On failure *token is left empty. */
int sd_gce_token_from_gcloud(const char *json_text, size_t len, int64_t now, struct sd_gce_token *token,
                             char *account, size_t accountlen, char *err, size_t errlen);

/* Wipes and frees what *token owns and empties it; token may be NULL. */
void sd_gce_token_free(struct sd_gce_token *token);

#endif
