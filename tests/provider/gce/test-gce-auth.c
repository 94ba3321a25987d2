/* tests/provider/gce/test-gce-auth.c - GCE service-account credentials (gce-auth.h).
 *
 *   test-gce-auth                          the unit checks below (no Python)
 *   test-gce-auth --assert KEY NOW SCOPE   prints the JWT for key file KEY
 *                                          issued at NOW, or the load error
 *                                          on stderr and exits 1 (used by
 *                                          test-gce-auth-pyjwt.sh to check
 *                                          the JWT with PyJWT)
 *
 * Expected values come from outside our code: RFC 4648's base64 vectors,
 * literal JSON and form strings written by hand, and a signature checked
 * with OpenSSL's EVP_DigestVerify against a key generated here. */
#include "config.h"

#include "src/provider/gce/gce-auth.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "tests/check.h"
#include "tests/tmpdir.h"

static char dir[256];

/* ---------------------------------------------------------------- base64url */

static void test_base64url(void)
{
	/* RFC 4648 section 10, with the padding taken off. */
	static const struct { const char *in, *out; } v[] = {
		{"", ""}, {"f", "Zg"}, {"fo", "Zm8"}, {"foo", "Zm9v"}, {"foob", "Zm9vYg"},
		{"fooba", "Zm9vYmE"}, {"foobar", "Zm9vYmFy"},
	};
	char out[64];
	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
		long n = sd_gce_base64url(v[i].in, strlen(v[i].in), out, sizeof out);
		CHECK_INT(n, strlen(v[i].out));
		CHECK_STR(out, v[i].out);
	}
	/* 0xfb 0xff 0xbf is "+/+/" in base64 (6-bit groups 62 63 62 63); the
	 * URL alphabet writes 62 as '-' and 63 as '_'.  0xfb 0xff is "+/8=". */
	static const unsigned char hi[] = {0xfb, 0xff, 0xbf};
	CHECK_INT(sd_gce_base64url(hi, 3, out, sizeof out), 4);
	CHECK_STR(out, "-_-_");
	CHECK_INT(sd_gce_base64url(hi, 2, out, sizeof out), 3);
	CHECK_STR(out, "-_8");
	/* Room for the unpadded text and the NUL is enough: "Zm9vYmE" in 8
	 * bytes, not 7; "Zg" in 3, not 2. */
	CHECK_INT(sd_gce_base64url("fooba", 5, out, 7), -1);
	CHECK_INT(sd_gce_base64url("fooba", 5, out, 8), 7);
	CHECK_STR(out, "Zm9vYmE");
	CHECK_INT(sd_gce_base64url("f", 1, out, 2), -1);
	CHECK_INT(sd_gce_base64url("f", 1, out, 3), 2);
	CHECK_STR(out, "Zg");
	CHECK_INT(sd_gce_base64url("", 0, out, 1), 0);
	CHECK_INT(sd_gce_base64url("", 0, out, 0), -1);
}

/* ---------------------------------------------------------------- form body */

static void test_form_body(void)
{
	char out[256];
	CHECK_INT(sd_gce_token_request_body("aB0.c-d_e", out, sizeof out), 0);
	CHECK_STR(out, "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=aB0.c-d_e");
	/* Bytes outside the unreserved set, which a JWT never has but a
	 * caller's mistake might: each as %XX, upper-case hex. */
	CHECK_INT(sd_gce_token_request_body("a+b/c=d&e f~\xc3\xa9", out, sizeof out), 0);
	CHECK_STR(out, "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer"
	               "&assertion=a%2Bb%2Fc%3Dd%26e%20f~%C3%A9");
	/* 85 bytes: fits in 86, not in 85 (the NUL). */
	const char *want = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=abcdefghij";
	CHECK_INT(strlen(want), 85);
	CHECK_INT(sd_gce_token_request_body("abcdefghij", out, 86), 0);
	CHECK_STR(out, want);
	CHECK_INT(sd_gce_token_request_body("abcdefghij", out, 85), -1);
	CHECK_STR(out, "");
	/* An escape cut in half does not fit either. */
	CHECK_INT(sd_gce_token_request_body("abcdefghi/", out, 86), -1);
}

/* ---------------------------------------------------------------- token answer */

static void test_token_parse(void)
{
	struct sd_gce_token t;
	char err[512];
	const char *ok = "{\"access_token\":\"ya29.c.b0AXv0zTP\",\"expires_in\":3599,\"token_type\":\"Bearer\"}";
	CHECK_INT(sd_gce_token_parse(ok, strlen(ok), 1700000000, &t, err, sizeof err), 0);
	CHECK_STR(t.access_token, "ya29.c.b0AXv0zTP");
	CHECK_INT(t.expires_at, 1700003599);
	CHECK_INT(t.refresh_at, 1700003599 - 300);
	sd_gce_token_free(&t);
	CHECK(t.access_token == NULL);
	CHECK_INT(sd_gce_token_parse(ok, strlen(ok), SD_GCE_TIME_MAX + 1, &t, err, sizeof err), -1);
	CHECK_STR(err, "time 253402300800 out of range");
	CHECK(t.access_token == NULL);
	sd_gce_token_free(&t);  /* twice is harmless */

	/* Not NUL-terminated: len is what counts. */
	char buf[128];
	const char *b = "{\"access_token\":\"x\",\"expires_in\":600,\"token_type\":\"bearer\"}GARBAGE";
	memcpy(buf, b, strlen(b));
	CHECK(sd_gce_token_parse(buf, strlen(b) - 7, 0, &t, err, sizeof err) == 0, "%s", err);
	CHECK_STR(t.access_token, "x");
	CHECK_INT(t.expires_at, 600);
	CHECK_INT(t.refresh_at, 300);
	sd_gce_token_free(&t);

	/* A short lifetime: renewed half-way, not 5 minutes early (which
	 * would be before it was issued). */
	const char *s = "{\"access_token\":\"tok\",\"expires_in\":120,\"token_type\":\"Bearer\"}";
	CHECK_INT(sd_gce_token_parse(s, strlen(s), 1000, &t, err, sizeof err), 0);
	CHECK_INT(t.expires_at, 1120);
	CHECK_INT(t.refresh_at, 1060);
	sd_gce_token_free(&t);
	/* 400 s: half of it (200 s) is shorter than the 5 minutes. */
	s = "{\"access_token\":\"tok\",\"expires_in\":400,\"token_type\":\"Bearer\"}";
	CHECK(sd_gce_token_parse(s, strlen(s), 0, &t, err, sizeof err) == 0, "%s", err);
	CHECK_INT(t.refresh_at, 200);
	sd_gce_token_free(&t);
	/* 601 s: half of it is just over the 5 minutes, which win. */
	s = "{\"access_token\":\"tok\",\"expires_in\":601,\"token_type\":\"Bearer\"}";
	CHECK_INT(sd_gce_token_parse(s, strlen(s), 0, &t, err, sizeof err), 0);
	CHECK_INT(t.refresh_at, 301);
	sd_gce_token_free(&t);

	static const struct { const char *json, *err; } bad[] = {
		{"{\"expires_in\":3599,\"token_type\":\"Bearer\"}",
		 "token endpoint answer has no \"access_token\""},
		{"{\"access_token\":\"\",\"expires_in\":3599,\"token_type\":\"Bearer\"}",
		 "token endpoint answer: \"access_token\" is not a non-empty string"},
		{"{\"access_token\":7,\"expires_in\":3599,\"token_type\":\"Bearer\"}",
		 "token endpoint answer: \"access_token\" is not a non-empty string"},
		{"{\"access_token\":\"t\",\"token_type\":\"Bearer\"}",
		 "token endpoint answer has no \"expires_in\""},
		{"{\"access_token\":\"t\",\"expires_in\":\"3599\",\"token_type\":\"Bearer\"}",
		 "token endpoint answer: \"expires_in\" is not a whole number of seconds in 1..31536000"},
		{"{\"access_token\":\"t\",\"expires_in\":0,\"token_type\":\"Bearer\"}",
		 "token endpoint answer: \"expires_in\" is not a whole number of seconds in 1..31536000"},
		{"{\"access_token\":\"t\",\"expires_in\":-5,\"token_type\":\"Bearer\"}",
		 "token endpoint answer: \"expires_in\" is not a whole number of seconds in 1..31536000"},
		{"{\"access_token\":\"t\",\"expires_in\":1.5,\"token_type\":\"Bearer\"}",
		 "token endpoint answer: \"expires_in\" is not a whole number of seconds in 1..31536000"},
		{"{\"access_token\":\"t\",\"expires_in\":1e300,\"token_type\":\"Bearer\"}",
		 "token endpoint answer: \"expires_in\" is not a whole number of seconds in 1..31536000"},
		{"{\"access_token\":\"t\",\"expires_in\":3599}",
		 "token endpoint answer has no \"token_type\""},
		{"{\"access_token\":\"t\",\"expires_in\":3599,\"token_type\":\"mac\"}",
		 "token endpoint answer: \"token_type\" is \"mac\", not \"Bearer\""},
		{"{\"error\":\"invalid_grant\",\"error_description\":\"Invalid JWT Signature.\"}",
		 "token endpoint refused: invalid_grant: Invalid JWT Signature."},
		{"{\"error\":\"invalid_grant\",\"error_description\":\"Invalid JWT: Token must be a short-lived "
		 "token (60 minutes) and in a reasonable timeframe.\\nCheck your iat and exp values\"}",
		 "token endpoint refused: invalid_grant: Invalid JWT: Token must be a short-lived token (60 "
		 "minutes) and in a reasonable timeframe. Check your iat and exp values"},
		{"{\"error\":\"unauthorized_client\"}", "token endpoint refused: unauthorized_client"},
		{"{\"error\":{\"code\":400,\"message\":\"Invalid grant.\",\"status\":\"INVALID_ARGUMENT\"}}",
		 "token endpoint refused: 400 INVALID_ARGUMENT: Invalid grant."},
		{"[1,2]", "token endpoint answer is not a JSON object"},
		{"<html>502</html>", "token endpoint answer is not a JSON object"},
		{"", "token endpoint answer is not a JSON object"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		err[0] = '\0';
		int r = sd_gce_token_parse(bad[i].json, strlen(bad[i].json), 1000, &t, err, sizeof err);
		CHECK_INT(r, -1);
		CHECK_STR(err, bad[i].err);
		CHECK(t.access_token == NULL, "case %zu", i);
	}
	/* A short err buffer is cut and still terminated. */
	char small[10];
	CHECK_INT(sd_gce_token_parse("{}", 2, 0, &t, small, sizeof small), -1);
	CHECK_STR(small, "token end");
	CHECK_INT(sd_gce_token_parse("{}", 2, 0, &t, NULL, 0), -1);
}

/* ---------------------------------------------------------------- key files */

/* PEM PKCS#8 text of pkey (caller frees). */
static char *pem_of(EVP_PKEY *pkey)
{
	BIO *bio = BIO_new(BIO_s_mem());
	char *data, *s;
	CHECK(PEM_write_bio_PrivateKey(bio, pkey, NULL, NULL, 0, NULL, NULL) == 1);
	long n = BIO_get_mem_data(bio, &data);
	s = malloc((size_t)n + 1);
	memcpy(s, data, (size_t)n);
	s[n] = '\0';
	BIO_free(bio);
	return s;
}

/* A key file in dir: the five fields, less the one named `drop`, with
 * `field` set to `value` (a string; NULL: the number 5), at `mode`. */
static char *write_key_file(const char *name, const char *pem, const char *drop, const char *field,
                            const char *value, mode_t mode)
{
	static const char *const names[] = {"type", "project_id", "private_key_id", "private_key",
	                                    "client_email", "client_id", "token_uri"};
	const char *values[] = {"service_account", "spotdeck-test", "0123456789abcdef0123456789abcdef01234567",
	                        pem, "trainer@spotdeck-test.iam.gserviceaccount.com", "1234567890",
	                        "https://oauth2.googleapis.com/token"};
	cJSON *o = cJSON_CreateObject();
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		if (drop && strcmp(drop, names[i]) == 0)
			continue;
		if (field && strcmp(field, names[i]) == 0) {
			if (value)
				cJSON_AddStringToObject(o, names[i], value);
			else
				cJSON_AddNumberToObject(o, names[i], 5);
		} else {
			cJSON_AddStringToObject(o, names[i], values[i]);
		}
	}
	char *text = cJSON_Print(o);
	cJSON_Delete(o);
	char *path = path_join(dir, name);
	write_raw(path, text, strlen(text));
	free(text);
	chmod(path, mode);
	return path;
}

/* Loads path, expecting failure with the message "PATH: " + want. */
static void expect_load_error(const char *path, const char *want, int line)
{
	struct sd_gce_key k;
	char err[1024], full[1024];
	snprintf(full, sizeof full, "%s: %s", path, want);
	int r = sd_gce_key_load(path, &k, err, sizeof err);
	if (r != -1 || strcmp(err, full) != 0) {
		fflush(stdout);
		fprintf(stderr, "%s:%d: FAIL: load %s: got %d \"%s\", expected -1 \"%s\"\n", __FILE__, line, path,
		        r, r ? err : "", full);
		check_failures++;
	}
	if (k.pkey || k.private_key_id || k.client_email || k.token_uri) {
		fprintf(stderr, "%s:%d: FAIL: key not left empty after a failed load\n", __FILE__, line);
		check_failures++;
	}
	sd_gce_key_free(&k);
}
#define EXPECT_LOAD_ERROR(path, want) expect_load_error(path, want, __LINE__)

/* base64url text of n chars back to bytes (OpenSSL's decoder, after the
 * alphabet and padding are put back); returns the byte count or -1. */
static long b64url_decode(const char *s, size_t n, unsigned char *out, size_t cap)
{
	size_t padded = (n + 3) / 4 * 4;
	char *t = malloc(padded + 1);
	for (size_t i = 0; i < padded; i++)
		t[i] = i < n ? (s[i] == '-' ? '+' : s[i] == '_' ? '/' : s[i]) : '=';
	t[padded] = '\0';
	long r = -1;
	if (padded / 4 * 3 <= cap) {
		int w = EVP_DecodeBlock(out, (unsigned char *)t, (int)padded);
		if (w >= 0)
			r = w - (long)(padded - n);  /* EVP_DecodeBlock counts the padding as bytes */
	}
	free(t);
	return r;
}

/* A JWT part decoded and parsed (caller deletes). */
static cJSON *jwt_json(const char *s, size_t n)
{
	unsigned char buf[2048];
	long w = b64url_decode(s, n, buf, sizeof buf - 1);
	if (w < 0)
		return NULL;
	buf[w] = '\0';
	return cJSON_Parse((char *)buf);
}

static int verify_sig(EVP_PKEY *pub, const char *jwt)
{
	const char *dot2 = strrchr(jwt, '.');
	unsigned char sig[1024];
	long n = b64url_decode(dot2 + 1, strlen(dot2 + 1), sig, sizeof sig);
	if (n < 0)
		return 0;
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	int ok = EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, pub) == 1 &&
	         EVP_DigestVerify(md, sig, (size_t)n, (const unsigned char *)jwt, (size_t)(dot2 - jwt)) == 1;
	EVP_MD_CTX_free(md);
	return ok;
}

/* The public half only, so the check cannot lean on the private key. */
static EVP_PKEY *public_of(EVP_PKEY *priv)
{
	BIO *bio = BIO_new(BIO_s_mem());
	PEM_write_bio_PUBKEY(bio, priv);
	EVP_PKEY *pub = PEM_read_bio_PUBKEY(bio, NULL, NULL, NULL);
	BIO_free(bio);
	return pub;
}

static void test_jwt(const char *keyfile, EVP_PKEY *rsa)
{
	struct sd_gce_key k;
	char err[512], jwt[SD_GCE_JWT_MAX];
	if (sd_gce_key_load(keyfile, &k, err, sizeof err) != 0) {
		CHECK(0, "load %s: %s", keyfile, err);
		return;
	}
	CHECK_STR(k.private_key_id, "0123456789abcdef0123456789abcdef01234567");
	CHECK_STR(k.client_email, "trainer@spotdeck-test.iam.gserviceaccount.com");
	CHECK_STR(k.token_uri, "https://oauth2.googleapis.com/token");
	CHECK(EVP_PKEY_eq(k.pkey, rsa) == 1, "the loaded key is not the key written");

	const int64_t now = 1700000000;
	CHECK_INT(sd_gce_jwt_assertion(&k, now, SD_GCE_SCOPE_CLOUD_PLATFORM, jwt, sizeof jwt, err, sizeof err), 0);
	const char *d1 = strchr(jwt, '.'), *d2 = d1 ? strchr(d1 + 1, '.') : NULL;
	CHECK(d1 && d2 && !strchr(d2 + 1, '.'), "not three parts: %s", jwt);
	CHECK(strspn(jwt, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.") == strlen(jwt),
	      "a character outside base64url: %s", jwt);
	if (!d1 || !d2) {
		sd_gce_key_free(&k);
		return;
	}
	/* The header, byte for byte as RFC 7515 shows one (compact JSON). */
	cJSON *h = jwt_json(jwt, (size_t)(d1 - jwt));
	char *hs = h ? cJSON_PrintUnformatted(h) : NULL;
	CHECK_STR(hs, "{\"alg\":\"RS256\",\"typ\":\"JWT\",\"kid\":\"0123456789abcdef0123456789abcdef01234567\"}");
	free(hs);
	cJSON_Delete(h);
	cJSON *c = jwt_json(d1 + 1, (size_t)(d2 - d1 - 1));
	CHECK(c != NULL, "claims do not decode");
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(c, "iss")), "trainer@spotdeck-test.iam.gserviceaccount.com");
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(c, "scope")),
	          "https://www.googleapis.com/auth/cloud-platform");
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(c, "aud")), "https://oauth2.googleapis.com/token");
	CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(c, "iat")) == 1700000000.0);
	CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(c, "exp")) == 1700003600.0);
	CHECK_INT(cJSON_GetArraySize(c), 5);
	cJSON_Delete(c);

	/* The signature, checked with the public key alone; one changed
	 * character in the signed part (or in the signature) breaks it. */
	EVP_PKEY *pub = public_of(rsa);
	CHECK(verify_sig(pub, jwt), "RS256 signature does not verify");
	char bad[SD_GCE_JWT_MAX];
	strcpy(bad, jwt);
	bad[(d1 - jwt) + 5] ^= 1;
	CHECK(!verify_sig(pub, bad), "a changed claim still verifies");
	strcpy(bad, jwt);
	bad[(d2 - jwt) + 10] = bad[(d2 - jwt) + 10] == 'A' ? 'B' : 'A';
	CHECK(!verify_sig(pub, bad), "a changed signature still verifies");
	/* PKCS#1 v1.5 is deterministic: the same input signs the same. */
	char again[SD_GCE_JWT_MAX];
	CHECK_INT(sd_gce_jwt_assertion(&k, now, SD_GCE_SCOPE_CLOUD_PLATFORM, again, sizeof again, err, sizeof err), 0);
	CHECK_STR(again, jwt);
	EVP_PKEY_free(pub);

	/* Too small a buffer: refused, never cut. */
	size_t len = strlen(jwt);
	CHECK_INT(sd_gce_jwt_assertion(&k, now, SD_GCE_SCOPE_CLOUD_PLATFORM, again, len, err, sizeof err), -1);
	CHECK_STR(again, "");
	CHECK(strstr(err, "does not fit") != NULL, "%s", err);
	CHECK_INT(sd_gce_jwt_assertion(&k, now, SD_GCE_SCOPE_CLOUD_PLATFORM, again, len + 1, err, sizeof err), 0);
	CHECK_STR(again, jwt);
	CHECK_INT(sd_gce_jwt_assertion(&k, now, SD_GCE_SCOPE_CLOUD_PLATFORM, again, 20, err, sizeof err), -1);
	/* The last second taken, and the one after it. */
	CHECK_INT(sd_gce_jwt_assertion(&k, 253402300799, SD_GCE_SCOPE_CLOUD_PLATFORM, again, sizeof again, err,
	                               sizeof err), 0);
	d1 = strchr(again, '.');
	d2 = strchr(d1 + 1, '.');
	c = jwt_json(d1 + 1, (size_t)(d2 - d1 - 1));
	char *cs = c ? cJSON_PrintUnformatted(c) : NULL;
	CHECK(cs && strstr(cs, "\"iat\":253402300799,\"exp\":253402304399}"), "%s", cs ? cs : "(null)");
	free(cs);
	cJSON_Delete(c);
	CHECK_INT(sd_gce_jwt_assertion(&k, 253402300800, SD_GCE_SCOPE_CLOUD_PLATFORM, again, sizeof again, err,
	                               sizeof err), -1);
	CHECK_STR(err, "time 253402300800 out of range");
	CHECK_STR(again, "");
	CHECK_INT(sd_gce_jwt_assertion(&k, -1, SD_GCE_SCOPE_CLOUD_PLATFORM, again, sizeof again, err, sizeof err),
	          -1);
	CHECK_INT(sd_gce_jwt_assertion(&k, now, "", again, sizeof again, err, sizeof err), -1);
	CHECK_STR(err, "no scope given");

	/* A scope with characters JSON must escape still makes valid claims. */
	CHECK_INT(sd_gce_jwt_assertion(&k, now, "a \"b\"\\c", jwt, sizeof jwt, err, sizeof err), 0);
	d1 = strchr(jwt, '.');
	d2 = strchr(d1 + 1, '.');
	c = jwt_json(d1 + 1, (size_t)(d2 - d1 - 1));
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(c, "scope")), "a \"b\"\\c");
	cJSON_Delete(c);
	sd_gce_key_free(&k);
	sd_gce_key_free(&k);  /* twice is harmless */
}

static void test_keys(void)
{
	EVP_PKEY *rsa = EVP_RSA_gen(2048);
	EVP_PKEY *ec = EVP_EC_gen("P-256");
	CHECK(rsa && ec, "cannot generate test keys");
	if (!rsa || !ec)
		return;
	char *pem = pem_of(rsa), *ecpem = pem_of(ec);
	CHECK(strncmp(pem, "-----BEGIN PRIVATE KEY-----\n", 28) == 0, "not PKCS#8: %.40s", pem);
	char *p;

	p = write_key_file("good.json", pem, NULL, NULL, NULL, 0600);
	test_jwt(p, rsa);
	/* The same file opened to the group: refused, with the mode and fix. */
	chmod(p, 0644);
	char want[1024];
	snprintf(want, sizeof want, "key file is readable by others (mode 0644); chmod 600 %s", p);
	EXPECT_LOAD_ERROR(p, want);
	chmod(p, 0640);
	snprintf(want, sizeof want, "key file is readable by others (mode 0640); chmod 600 %s", p);
	EXPECT_LOAD_ERROR(p, want);
	chmod(p, 0602);
	snprintf(want, sizeof want, "key file is writable by others (mode 0602); chmod 600 %s", p);
	EXPECT_LOAD_ERROR(p, want);
	chmod(p, 0400);
	struct sd_gce_key k;
	char err[512];
	CHECK(sd_gce_key_load(p, &k, err, sizeof err) == 0, "%s", err);
	sd_gce_key_free(&k);
	free(p);

	/* token_uri absent: Google's endpoint. */
	p = write_key_file("no-uri.json", pem, "token_uri", NULL, NULL, 0600);
	CHECK(sd_gce_key_load(p, &k, err, sizeof err) == 0, "%s", err);
	CHECK_STR(k.token_uri, "https://oauth2.googleapis.com/token");
	sd_gce_key_free(&k);
	free(p);
	/* A token_uri of its own is kept (it is the JWT's audience). */
	p = write_key_file("own-uri.json", pem, NULL, "token_uri", "https://example.test/token", 0600);
	CHECK(sd_gce_key_load(p, &k, err, sizeof err) == 0, "%s", err);
	CHECK_STR(k.token_uri, "https://example.test/token");
	sd_gce_key_free(&k);
	free(p);

	static const char *const required[] = {"type", "private_key_id", "private_key", "client_email"};
	for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
		p = write_key_file("missing.json", pem, required[i], NULL, NULL, 0600);
		snprintf(want, sizeof want, "no \"%s\" field in the key file", required[i]);
		EXPECT_LOAD_ERROR(p, want);
		free(p);
		p = write_key_file("empty.json", pem, NULL, required[i], "", 0600);
		snprintf(want, sizeof want, "\"%s\" is empty", required[i]);
		EXPECT_LOAD_ERROR(p, want);
		free(p);
		p = write_key_file("number.json", pem, NULL, required[i], NULL, 0600);
		snprintf(want, sizeof want, "\"%s\" is not a string", required[i]);
		EXPECT_LOAD_ERROR(p, want);
		free(p);
	}
	p = write_key_file("uri.json", pem, NULL, "token_uri", "", 0600);
	EXPECT_LOAD_ERROR(p, "\"token_uri\" is empty");
	free(p);
	p = write_key_file("user.json", pem, NULL, "type", "authorized_user", 0600);
	EXPECT_LOAD_ERROR(p, "\"type\" is \"authorized_user\", not \"service_account\"");
	free(p);
	p = write_key_file("ec.json", ecpem, NULL, NULL, NULL, 0600);
	EXPECT_LOAD_ERROR(p, "\"private_key\" holds a key of type EC, not RSA (RS256 needs RSA)");
	free(p);
	/* PEM cut off half-way: OpenSSL's reason, not the key text. */
	char *cut = strdup(pem);
	cut[strlen(cut) / 2] = '\0';
	p = write_key_file("cut.json", cut, NULL, "private_key", cut, 0600);
	struct sd_gce_key k2;
	CHECK_INT(sd_gce_key_load(p, &k2, err, sizeof err), -1);
	snprintf(want, sizeof want, "%s: \"private_key\" is not a PEM private key (no -----END line: cut short?)",
	         p);
	CHECK_STR(err, want);
	free(p);
	p = write_key_file("path.json", pem, NULL, "private_key", "/home/me/key.pem", 0600);
	EXPECT_LOAD_ERROR(p, "\"private_key\" is not a PEM private key (no -----BEGIN line)");
	free(p);
	free(cut);
	/* An encrypted key is refused, not prompted for. */
	BIO *bio = BIO_new(BIO_s_mem());
	char *data;
	PEM_write_bio_PKCS8PrivateKey(bio, rsa, EVP_aes_256_cbc(), "pw", 2, NULL, NULL);
	long n = BIO_get_mem_data(bio, &data);
	char *enc = strndup(data, (size_t)n);
	BIO_free(bio);
	p = write_key_file("enc.json", enc, NULL, NULL, NULL, 0600);
	CHECK_INT(sd_gce_key_load(p, &k2, err, sizeof err), -1);
	CHECK(strstr(err, "\"private_key\" is not a PEM private key (") != NULL, "%s", err);
	free(p);
	free(enc);

	/* Files that are not key files at all. */
	p = path_join(dir, "bad.json");
	write_raw(p, "{\"type\": \"service_account\",\n  oops}", 35);
	chmod(p, 0600);
	EXPECT_LOAD_ERROR(p, "not valid JSON (parse stopped at byte 31)");
	write_raw(p, "{} {}", 5);
	EXPECT_LOAD_ERROR(p, "not valid JSON (parse stopped at byte 3)");
	write_raw(p, "[]", 2);
	EXPECT_LOAD_ERROR(p, "not a JSON object");
	write_raw(p, "", 0);
	EXPECT_LOAD_ERROR(p, "empty file");
	size_t big = SD_GCE_KEY_MAX_BYTES + 1;
	char *blob = malloc(big);
	memset(blob, ' ', big);
	write_raw(p, blob, big);
	EXPECT_LOAD_ERROR(p, "larger than 64 KiB, not a key file");
	/* Exactly at the limit is read (and then found to be no JSON). */
	write_raw(p, blob, big - 1);
	EXPECT_LOAD_ERROR(p, "not valid JSON (parse stopped at byte 65536)");
	free(blob);
	free(p);
	p = path_join(dir, "absent.json");
	snprintf(want, sizeof want, "cannot open: %s", strerror(ENOENT));
	EXPECT_LOAD_ERROR(p, want);
	free(p);
	EXPECT_LOAD_ERROR(dir, "not a regular file");

	free(pem);
	free(ecpem);
	EVP_PKEY_free(rsa);
	EVP_PKEY_free(ec);
}

/* --assert KEY NOW SCOPE */
static int cmd_assert(const char *path, const char *now_s, const char *scope)
{
	struct sd_gce_key k;
	char err[1024], jwt[SD_GCE_JWT_MAX], *end;
	errno = 0;
	long long now = strtoll(now_s, &end, 10);
	if (errno || end == now_s || *end) {
		fprintf(stderr, "test-gce-auth: NOW must be whole seconds since the epoch: %s\n", now_s);
		return 2;
	}
	if (sd_gce_key_load(path, &k, err, sizeof err) != 0 ||
	    sd_gce_jwt_assertion(&k, now, scope, jwt, sizeof jwt, err, sizeof err) != 0) {
		fprintf(stderr, "%s\n", err);
		sd_gce_key_free(&k);
		return 1;
	}
	sd_gce_key_free(&k);
	printf("%s\n", jwt);
	return 0;
}

/* ------------------------------------------------------------ gcloud's answer */

/* 2026-12-03T06:00:00Z is 1796364000 s after the epoch (date -u -d). */
#define GCLOUD_EXPIRY 1796277600

static void test_token_from_gcloud(void)
{
	struct sd_gce_token t;
	char err[512], who[64];
	/* The shape google-auth-library-python's tests read
	 * (tests/data/cloud_sdk_config.json), with today's date. */
	const char *ok = "{\"configuration\": {\"active_configuration\": \"default\", \"properties\": "
	                 "{\"core\": {\"account\": \"me@example.com\", \"project\": \"p1\"}}}, "
	                 "\"credential\": {\"access_token\": \"ya29.a0gcloud\", "
	                 "\"token_expiry\": \"2026-12-03T06:00:00Z\"}, \"sentinels\": {}}";
	CHECK(sd_gce_token_from_gcloud(ok, strlen(ok), GCLOUD_EXPIRY - 3000, &t, who, sizeof who, err,
	                               sizeof err) == 0, "%s", err);
	CHECK_STR(t.access_token, "ya29.a0gcloud");
	CHECK_STR(who, "me@example.com");
	CHECK_INT(t.expires_at, GCLOUD_EXPIRY);
	CHECK_INT(t.refresh_at, GCLOUD_EXPIRY - 300);
	sd_gce_token_free(&t);
	/* 200 s left: asked again half-way, after 100 s. */
	CHECK_INT(sd_gce_token_from_gcloud(ok, strlen(ok), GCLOUD_EXPIRY - 200, &t, who, sizeof who, err,
	                                   sizeof err), 0);
	CHECK_INT(t.refresh_at, GCLOUD_EXPIRY - 100);
	sd_gce_token_free(&t);
	/* Expired: said so, with the account and what to do. */
	CHECK_INT(sd_gce_token_from_gcloud(ok, strlen(ok), GCLOUD_EXPIRY, &t, who, sizeof who, err,
	                                   sizeof err), -1);
	CHECK_STR(err, "gcloud's token for me@example.com expired at 2026-12-03T06:00:00Z: run gcloud auth login");
	CHECK(t.access_token == NULL);

	/* Fractional seconds; no account named. */
	const char *frac = "{\"credential\": {\"access_token\": \"tok\", "
	                   "\"token_expiry\": \"2026-12-03T06:00:00.250000Z\"}}";
	CHECK(sd_gce_token_from_gcloud(frac, strlen(frac), GCLOUD_EXPIRY - 1000, &t, who, sizeof who, err,
	                               sizeof err) == 0, "%s", err);
	CHECK_INT(t.expires_at, GCLOUD_EXPIRY);
	CHECK_STR(who, "");
	sd_gce_token_free(&t);

	static const struct {
		const char *json, *want;
	} bad[] = {
		{"ERROR: (gcloud.config.config-helper) You do not currently have an active account selected.",
		 "gcloud config config-helper: the answer is not a JSON object"},
		{"{\"configuration\": {}}", "gcloud config config-helper: no \"credential\" object in the answer"},
		{"{\"credential\": {\"token_expiry\": \"2026-12-03T06:00:00Z\"}}",
		 "gcloud config config-helper: credential.access_token is missing"},
		{"{\"credential\": {\"access_token\": \"\", \"token_expiry\": \"2026-12-03T06:00:00Z\"}}",
		 "gcloud config config-helper: credential.access_token is not a non-empty string"},
		{"{\"credential\": {\"access_token\": \"t\"}}",
		 "gcloud config config-helper: credential.token_expiry \"(missing)\" is not a UTC time like "
		 "2026-12-03T06:00:00Z"},
		/* A local time with an offset is not what gcloud writes. */
		{"{\"credential\": {\"access_token\": \"t\", \"token_expiry\": \"2026-12-03T06:00:00+01:00\"}}",
		 "gcloud config config-helper: credential.token_expiry \"2026-12-03T06:00:00+01:00\" is not a UTC "
		 "time like 2026-12-03T06:00:00Z"},
		{"{\"credential\": {\"access_token\": \"t\", \"token_expiry\": \"2026-12-03 06:00:00Z\"}}",
		 "gcloud config config-helper: credential.token_expiry \"2026-12-03 06:00:00Z\" is not a UTC "
		 "time like 2026-12-03T06:00:00Z"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		err[0] = '\0';
		CHECK_INT(sd_gce_token_from_gcloud(bad[i].json, strlen(bad[i].json), GCLOUD_EXPIRY - 3000, &t, who,
		                                   sizeof who, err, sizeof err), -1);
		CHECK_STR(err, bad[i].want);
		CHECK(t.access_token == NULL);
	}
}

int main(int argc, char **argv)
{
	if (argc == 5 && strcmp(argv[1], "--assert") == 0)
		return cmd_assert(argv[2], argv[3], argv[4]);
	if (argc != 1) {
		fprintf(stderr, "usage: test-gce-auth [--assert KEYFILE NOW SCOPE]\n");
		return 2;
	}
	umask(077);
	make_tmpdir(dir, sizeof dir, "test-gce-auth.XXXXXX");
	test_base64url();
	test_form_body();
	test_token_parse();
	test_token_from_gcloud();
	test_keys();
	rm_tree(dir);
	return check_exit("test-gce-auth");
}
