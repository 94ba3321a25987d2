/* tests/provider/http/test-sigv4.c - AWS Signature Version 4 (src/provider/http/sigv4.c).
 *
 * Without arguments: the unit checks.  The expected values come from
 * outside this code: the AWS documentation's example request (cloud-apis.md
 * section 2.1: its canonical-request hash and signature), the SHA-256 of ""
 * and "abc" (FIPS 180-2), three cases of AWS's SigV4 test suite with
 * their published signatures, and encodings worked out by hand from RFC 3986.
 *
 * With --sign: signs the requests described on stdin and prints what it
 * would send, for tests/provider/http/test-sigv4-botocore.sh to compare with botocore.
 * The input is lines "KEY<TAB>VALUE" (VALUE may be empty), one request
 * after another, each ended by a line "sign":
 *   method, host, path, region, service   the request's fields
 *   time                                  seconds since the epoch
 *   akid, secret, token                   the credentials (token optional)
 *   query NAME<TAB>VALUE                  a query pair (repeatable)
 *   header NAME<TAB>VALUE                 an extra header (repeatable)
 *   form NAME<TAB>VALUE                   a body field (repeatable); the body is
 *                                         sd_sigv4_form(SD_SIGV4_AS_GIVEN)
 * For each request it prints
 *   body: BODY
 *   x-amz-date: AMZDATE
 *   payload: HEX
 *   authorization: VALUE
 * or "error: MESSAGE" when sd_sigv4_sign refuses it, then an empty line. */
#include "config.h"
#include "src/provider/http/sigv4.h"
#include "tests/check.h"
#include <stdint.h>

/* The AWS documentation's example: GET https://iam.amazonaws.com/?Action=ListUsers&Version=2010-05-08 */
#define DOC_TIME ((time_t)1440938160) /* 2015-08-30T12:36:00Z */
#define DOC_CANONICAL_HASH "f536975d06c0309214f805bb90ccff089219ecd68b2577efef23edd43b7e1a59"
#define DOC_SIGNATURE "5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7"
#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define ABC_SHA256 "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"

static const struct sd_sigv4_pair doc_query[] = {{"Action", "ListUsers"}, {"Version", "2010-05-08"}};
static const struct sd_sigv4_pair doc_headers[] = {
	{"content-type", "application/x-www-form-urlencoded; charset=utf-8"}};
static const struct sd_sigv4_creds doc_creds = {"AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", NULL};

static struct sd_sigv4_request doc_request(void)
{
	struct sd_sigv4_request r = {
		.method = "GET", .host = "iam.amazonaws.com", .path = "/",
		.query = doc_query, .nquery = 2, .headers = doc_headers, .nheaders = 1,
		.body = NULL, .body_len = 0, .region = "us-east-1", .service = "iam", .when = DOC_TIME,
	};
	return r;
}

static void test_doc_vector(void)
{
	struct sd_sigv4_request r = doc_request();
	struct sd_sigv4_out out;
	char err[128];
	CHECK_INT(sd_sigv4_sign(&r, &doc_creds, &out, err, sizeof err), 0);
	CHECK_STR(err, "");
	CHECK_STR(out.amz_date, "20150830T123600Z");
	CHECK_STR(out.payload_hash, EMPTY_SHA256);
	CHECK_STR(out.canonical_hash, DOC_CANONICAL_HASH);
	CHECK_STR(out.signature, DOC_SIGNATURE);
	CHECK_STR(out.authorization, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, "
	                             "SignedHeaders=content-type;host;x-amz-date, Signature=" DOC_SIGNATURE);

	/* The same request written differently canonicalises to the same bytes:
	 * the query pairs in another order, the header's name in mixed case and
	 * its value with blanks around and a run of them inside. */
	static const struct sd_sigv4_pair q2[] = {{"Version", "2010-05-08"}, {"Action", "ListUsers"}};
	static const struct sd_sigv4_pair h2[] = {
		{"Content-Type", " \tapplication/x-www-form-urlencoded;  \t charset=utf-8  "}};
	r.query = q2;
	r.headers = h2;
	CHECK_INT(sd_sigv4_sign(&r, &doc_creds, &out, err, sizeof err), 0);
	CHECK_STR(out.canonical_hash, DOC_CANONICAL_HASH);
	CHECK_STR(out.signature, DOC_SIGNATURE);

	/* Each input is signed: changing any one changes the signature. */
	struct {
		const char *what;
		struct sd_sigv4_request r;
		struct sd_sigv4_creds c;
	} v[] = {
		{"time", doc_request(), doc_creds}, {"region", doc_request(), doc_creds},
		{"service", doc_request(), doc_creds}, {"secret", doc_request(), doc_creds},
		{"body", doc_request(), doc_creds}, {"token", doc_request(), doc_creds},
		{"path", doc_request(), doc_creds}, {"method", doc_request(), doc_creds},
	};
	v[0].r.when++;
	v[1].r.region = "us-west-2";
	v[2].r.service = "ec2";
	v[3].c.secret_key = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEz";
	v[4].r.body = "x";
	v[4].r.body_len = 1;
	v[5].c.session_token = "token";
	v[6].r.path = "/x";
	v[7].r.method = "POST";
	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
		CHECK_INT(sd_sigv4_sign(&v[i].r, &v[i].c, &out, err, sizeof err), 0);
		CHECK(strcmp(out.signature, DOC_SIGNATURE) != 0, "changing the %s left the signature", v[i].what);
	}
}

/* Three cases of AWS's SigV4 test suite (aws-sig-v4-test-suite: host
 * example.amazonaws.com, service "service", the same time and keys as the
 * documentation's example), with the signatures it publishes. */
static void test_aws_suite(void)
{
	static const struct sd_sigv4_pair query[] = {{"Param2", "value2"}, {"Param1", "value1"}};
	static const struct sd_sigv4_pair form_ct[] = {{"Content-Type", "application/x-www-form-urlencoded"}};
	static const struct {
		const char *name, *method;
		const struct sd_sigv4_pair *query;
		size_t nquery;
		const struct sd_sigv4_pair *headers;
		size_t nheaders;
		const char *body, *signed_headers, *signature;
	} v[] = {
		{"get-vanilla", "GET", NULL, 0, NULL, 0, "", "host;x-amz-date",
		 "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"},
		{"get-vanilla-query-order-key-case", "GET", query, 2, NULL, 0, "", "host;x-amz-date",
		 "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"},
		{"post-x-www-form-urlencoded", "POST", NULL, 0, form_ct, 1, "Param1=value1", "content-type;host;x-amz-date",
		 "ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a"},
	};
	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
		struct sd_sigv4_request r = {
			.method = v[i].method, .host = "example.amazonaws.com", .path = "/",
			.query = v[i].query, .nquery = v[i].nquery, .headers = v[i].headers, .nheaders = v[i].nheaders,
			.body = v[i].body, .body_len = strlen(v[i].body), .region = "us-east-1", .service = "service",
			.when = DOC_TIME,
		};
		struct sd_sigv4_out out;
		char err[128], want[512];
		snprintf(want, sizeof want,
		         "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
		         "SignedHeaders=%s, Signature=%s", v[i].signed_headers, v[i].signature);
		CHECK(sd_sigv4_sign(&r, &doc_creds, &out, err, sizeof err) == 0, "%s: %s", v[i].name, err);
		CHECK(strcmp(out.authorization, want) == 0, "%s: got %s", v[i].name, out.authorization);
	}
}

static void test_session_token(void)
{
	struct sd_sigv4_request r = doc_request();
	struct sd_sigv4_creds c = doc_creds;
	struct sd_sigv4_out out;
	char err[128];
	c.session_token = "FQoGZXIvYXdzE//token+with/slashes==";
	CHECK_INT(sd_sigv4_sign(&r, &c, &out, err, sizeof err), 0);
	CHECK(strstr(out.authorization, ", SignedHeaders=content-type;host;x-amz-date;x-amz-security-token, ") != NULL,
	      "got %s", out.authorization);
	/* Extra headers around the signer's, in no order: all signed, sorted
	 * by lower-case name. */
	static const struct sd_sigv4_pair h[] = {{"X-Zeta", "z"}, {"Content-Type", "x"}, {"accept", "*/*"},
	                                         {"X-Amz-Algo", "a"}, {"Hosts", "h"}};
	r.headers = h;
	r.nheaders = 5;
	CHECK_INT(sd_sigv4_sign(&r, &c, &out, err, sizeof err), 0);
	CHECK(strstr(out.authorization,
	             ", SignedHeaders=accept;content-type;host;hosts;x-amz-algo;x-amz-date;x-amz-security-token;x-zeta, ")
	      != NULL, "got %s", out.authorization);
	r = doc_request();
	/* "" is no token, as NULL. */
	c.session_token = "";
	CHECK_INT(sd_sigv4_sign(&r, &c, &out, err, sizeof err), 0);
	CHECK_STR(out.signature, DOC_SIGNATURE);
}

static void test_payload_hash(void)
{
	struct sd_sigv4_request r = doc_request();
	struct sd_sigv4_out out;
	char err[128];
	r.body = "";
	r.body_len = 0;
	CHECK_INT(sd_sigv4_sign(&r, &doc_creds, &out, err, sizeof err), 0);
	CHECK_STR(out.payload_hash, EMPTY_SHA256);
	r.body = "abc";
	r.body_len = 3;
	CHECK_INT(sd_sigv4_sign(&r, &doc_creds, &out, err, sizeof err), 0);
	CHECK_STR(out.payload_hash, ABC_SHA256);
	/* body_len, not a NUL, ends the body. */
	r.body = "abcdef";
	CHECK_INT(sd_sigv4_sign(&r, &doc_creds, &out, err, sizeof err), 0);
	CHECK_STR(out.payload_hash, ABC_SHA256);
}

static void check_encode(const char *s, size_t len, int keep_slash, const char *want)
{
	char out[256];
	size_t n = sd_sigv4_encode(s, len, keep_slash, out);
	CHECK_STR(out, want);
	CHECK_INT(n, strlen(want));
}

static void test_encode(void)
{
	check_encode("", 0, 0, "");
	check_encode("AZaz09-_.~", 10, 0, "AZaz09-_.~");
	check_encode("a b", 3, 0, "a%20b");
	check_encode("a/b=c+d&e", 9, 0, "a%2Fb%3Dc%2Bd%26e");
	check_encode("a/b=c", 5, 1, "a/b%3Dc");
	check_encode("!*'()%", 6, 0, "%21%2A%27%28%29%25");
	check_encode("\xc3\xa9\xe2\x82\xac", 5, 0, "%C3%A9%E2%82%AC"); /* é € */
	check_encode("a\0b", 3, 0, "a%00b");
	check_encode("\x7f\xff", 2, 0, "%7F%FF");
}

static void check_form(const struct sd_sigv4_pair *p, size_t n, enum sd_sigv4_order order, const char *want)
{
	size_t len = 12345;
	char *s = sd_sigv4_form(p, n, order, &len);
	CHECK_STR(s, want);
	CHECK_INT(len, strlen(want));
	free(s);
}

static void test_form(void)
{
	check_form(NULL, 0, SD_SIGV4_SORTED, "");
	static const struct sd_sigv4_pair body[] = {
		{"Action", "RunInstances"}, {"Version", "2016-11-15"},
		{"TagSpecification.1.Tag.1.Value", "run 1/é"}, {"UserData", "IyEvYmluL3No+/=="},
	};
	check_form(body, 4, SD_SIGV4_AS_GIVEN,
	           "Action=RunInstances&Version=2016-11-15&TagSpecification.1.Tag.1.Value=run%201%2F%C3%A9"
	           "&UserData=IyEvYmluL3No%2B%2F%3D%3D");
	check_form(body, 4, SD_SIGV4_SORTED,
	           "Action=RunInstances&TagSpecification.1.Tag.1.Value=run%201%2F%C3%A9"
	           "&UserData=IyEvYmluL3No%2B%2F%3D%3D&Version=2016-11-15");
	/* Sorted by the encoded bytes: upper case before lower, a name before
	 * its extensions, "%" (0x25) before letters, so "aé" (a%C3%A9) comes
	 * before "aZ" although raw é (0xC3) sorts after Z; duplicate names by
	 * encoded value ("a%20b" before "b"). */
	static const struct sd_sigv4_pair dup[] = {
		{"k", "b"}, {"aZ", "1"}, {"k", "a b"}, {"a\xc3\xa9", "2"}, {"K", "x"}, {"k", ""},
	};
	check_form(dup, 6, SD_SIGV4_SORTED, "K=x&a%C3%A9=2&aZ=1&k=&k=a%20b&k=b");
	check_form(dup, 6, SD_SIGV4_AS_GIVEN, "k=b&aZ=1&k=a%20b&a%C3%A9=2&K=x&k=");
}

/* Signs r with c, expects -1 and the message want, and the output zeroed. */
static void check_refused(const char *line, const struct sd_sigv4_request *r, const struct sd_sigv4_creds *c,
                          const char *want)
{
	struct sd_sigv4_out out, zero;
	char err[256];
	memset(&zero, 0, sizeof zero);
	memset(&out, 'x', sizeof out);
	int rc = sd_sigv4_sign(r, c, &out, err, sizeof err);
	CHECK(rc == -1, "%s: returned %d", line, rc);
	CHECK(strcmp(err, want) == 0, "%s: error \"%s\", expected \"%s\"", line, err, want);
	CHECK(memcmp(&out, &zero, sizeof out) == 0, "%s: output not zeroed", line);
}

static void test_errors(void)
{
	struct sd_sigv4_request r;
	struct sd_sigv4_creds c;
#define REFUSED(setup, want) do { \
	r = doc_request(); \
	c = doc_creds; \
	setup; \
	check_refused(#setup, &r, &c, want); \
} while (0)
	REFUSED(r.region = "", "sigv4: region is empty");
	REFUSED(r.region = NULL, "sigv4: region is empty");
	REFUSED(r.service = "", "sigv4: service is empty");
	REFUSED(r.service = "ec2/x", "sigv4: service has a byte 0x2f that cannot be in a credential scope");
	REFUSED(r.method = "", "sigv4: method is empty");
	REFUSED(r.method = "get", "sigv4: method \"get\" is not upper-case letters");
	REFUSED(r.host = "", "sigv4: host is empty");
	REFUSED(r.path = "", "sigv4: path is empty");
	REFUSED(r.path = "x", "sigv4: path \"x\" does not start with '/'");
	REFUSED(r.path = "/a/../b", "sigv4: path \"/a/../b\" has an empty, \".\" or \"..\" segment");
	REFUSED(r.path = "//", "sigv4: path \"//\" has an empty, \".\" or \"..\" segment");
	REFUSED(r.path = "/?a=b", "sigv4: path has a byte 0x3f (it must be percent-encoded, no query)");
	REFUSED(r.path = "/a b", "sigv4: path has a byte 0x20 (it must be percent-encoded, no query)");
	REFUSED(c.access_key_id = "", "sigv4: access key id is empty");
	REFUSED(c.secret_key = "", "sigv4: secret key is empty");
	REFUSED(c.secret_key = NULL, "sigv4: secret key is empty");
	REFUSED(c.session_token = "a\nb", "sigv4: session token has a control byte 0x0a");
	REFUSED(r.query = NULL, "sigv4: 2 query pairs but no array");
	REFUSED(r.body_len = 1, "sigv4: body_len is 1 but body is NULL");
	REFUSED(r.when = (time_t)-1, "sigv4: time -1 is not between 1970 and 9999");
	static const struct sd_sigv4_pair host[] = {{"Content-Type", "x"}, {"Host", "evil.example"}};
	REFUSED((r.headers = host, r.nheaders = 2), "sigv4: header 1 (Host) is set by the signer");
	static const struct sd_sigv4_pair date[] = {{"X-Amz-Date", "20150830T123600Z"}};
	REFUSED((r.headers = date, r.nheaders = 1), "sigv4: header 0 (X-Amz-Date) is set by the signer");
	static const struct sd_sigv4_pair twice[] = {{"content-type", "a"}, {"Content-Type", "b"}};
	REFUSED((r.headers = twice, r.nheaders = 2), "sigv4: header 1 (Content-Type) is given twice (also header 0)");
	static const struct sd_sigv4_pair crlf[] = {{"x-a", "a\r\nx-b: b"}};
	REFUSED((r.headers = crlf, r.nheaders = 1), "sigv4: header 0 (x-a) value has a control byte 0x0d");
	static const struct sd_sigv4_pair colon[] = {{"x-a:", "a"}};
	REFUSED((r.headers = colon, r.nheaders = 1),
	        "sigv4: header 0 name \"x-a:\" has a byte 0x3a that is not allowed in a header name");
	static const struct sd_sigv4_pair noname[] = {{"", "a"}};
	REFUSED((r.headers = noname, r.nheaders = 1), "sigv4: header 0 has an empty name");
	REFUSED(r.nheaders = SD_SIGV4_MAX_HEADERS + 1, "sigv4: 33 headers (at most 32)");
	static char long_region[201];
	memset(long_region, 'a', 200);
	REFUSED(r.region = long_region, "sigv4: region and service are too long (200 + 3 bytes)");
#undef REFUSED

	/* A short buffer gets the start of the message; none at all is fine. */
	struct sd_sigv4_out out;
	char small[8];
	r = doc_request();
	r.region = "";
	CHECK_INT(sd_sigv4_sign(&r, &doc_creds, &out, small, sizeof small), -1);
	CHECK_STR(small, "sigv4: ");
	CHECK_INT(sd_sigv4_sign(&r, &doc_creds, &out, NULL, 0), -1);
	CHECK_INT(sd_sigv4_sign(NULL, &doc_creds, &out, NULL, 0), -1);
	CHECK_INT(sd_sigv4_sign(&r, NULL, &out, NULL, 0), -1);
	CHECK_INT(sd_sigv4_sign(&r, &doc_creds, NULL, NULL, 0), -1);
}

/* --sign: see the top of the file. */
#define SIGN_MAX_PAIRS 512
struct sign_req {
	char *field[9]; /* method host path region service time akid secret token */
	struct sd_sigv4_pair pair[3][SIGN_MAX_PAIRS]; /* query, header, form */
	size_t npair[3];
};

static const char *const sign_fields[9] = {"method", "host", "path", "region", "service", "time", "akid", "secret",
                                           "token"};
static const char *const sign_lists[3] = {"query", "header", "form"};

static void sign_req_free(struct sign_req *q)
{
	for (int i = 0; i < 9; i++)
		free(q->field[i]);
	for (int k = 0; k < 3; k++)
		for (size_t i = 0; i < q->npair[k]; i++)
			free((char *)q->pair[k][i].name); /* the value lives in the same block */
	memset(q, 0, sizeof *q);
}

static int sign_one(struct sign_req *q)
{
	size_t body_len = 0;
	char *body = sd_sigv4_form(q->pair[2], q->npair[2], SD_SIGV4_AS_GIVEN, &body_len);
	if (!body) {
		fprintf(stderr, "test-sigv4 --sign: out of memory\n");
		return -1;
	}
	struct sd_sigv4_request r = {
		.method = q->field[0], .host = q->field[1], .path = q->field[2], .region = q->field[3],
		.service = q->field[4], .when = q->field[5] ? (time_t)strtoll(q->field[5], NULL, 10) : 0,
		.query = q->pair[0], .nquery = q->npair[0], .headers = q->pair[1], .nheaders = q->npair[1],
		.body = body, .body_len = body_len,
	};
	struct sd_sigv4_creds c = {q->field[6], q->field[7], q->field[8]};
	struct sd_sigv4_out out;
	char err[256];
	printf("body: %s\n", body);
	if (sd_sigv4_sign(&r, &c, &out, err, sizeof err) == 0)
		printf("x-amz-date: %s\npayload: %s\nauthorization: %s\n\n", out.amz_date, out.payload_hash,
		       out.authorization);
	else
		printf("error: %s\n\n", err);
	free(body);
	return 0;
}

static int sign_main(void)
{
	struct sign_req q;
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int rc = 0, lineno = 0;
	memset(&q, 0, sizeof q);
	while (rc == 0 && (n = getline(&line, &cap, stdin)) >= 0) {
		lineno++;
		if (n > 0 && line[n - 1] == '\n')
			line[--n] = '\0';
		if (strcmp(line, "sign") == 0) {
			rc = sign_one(&q);
			sign_req_free(&q);
			continue;
		}
		char *tab = strchr(line, '\t');
		if (!tab) {
			fprintf(stderr, "test-sigv4 --sign: line %d: no tab\n", lineno);
			rc = -1;
			break;
		}
		*tab = '\0';
		char *val = tab + 1;
		int done = 0;
		for (int i = 0; i < 9 && !done; i++)
			if (strcmp(line, sign_fields[i]) == 0) {
				free(q.field[i]);
				q.field[i] = strdup(val);
				done = 1;
			}
		for (int k = 0; k < 3 && !done; k++)
			if (strcmp(line, sign_lists[k]) == 0) {
				char *name = strdup(val);
				char *t = name ? strchr(name, '\t') : NULL;
				if (!t || q.npair[k] == SIGN_MAX_PAIRS) {
					fprintf(stderr, "test-sigv4 --sign: line %d: %s needs NAME<TAB>VALUE (at most %d)\n",
					        lineno, line, SIGN_MAX_PAIRS);
					free(name);
					rc = -1;
				} else {
					*t = '\0';
					q.pair[k][q.npair[k]++] = (struct sd_sigv4_pair){name, t + 1};
				}
				done = 1;
			}
		if (!done) {
			fprintf(stderr, "test-sigv4 --sign: line %d: unknown key \"%s\"\n", lineno, line);
			rc = -1;
		}
	}
	sign_req_free(&q);
	free(line);
	return rc == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "--sign") == 0)
		return sign_main();
	if (argc != 1) {
		fprintf(stderr, "usage: test-sigv4 [--sign]\n");
		return 2;
	}
	test_doc_vector();
	test_aws_suite();
	test_session_token();
	test_payload_hash();
	test_encode();
	test_form();
	test_errors();
	return check_exit("test-sigv4");
}
