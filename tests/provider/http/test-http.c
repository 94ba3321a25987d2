/* tests/provider/http/test-http.c - the HTTP client on the loop (src/provider/http/http.h)
 * against tests/fake-cloud/faults.py, whose URL is argv[1]: answers,
 * retries (which, how many, how long), no second send of a request that
 * is not idempotent, timeouts, refused connections, cancelling, closing
 * with calls in flight, 200 calls at once without stalling the loop, the
 * body limit, and the redaction of credentials in the attempt log.
 * Run by tests/provider/http/test-http.sh. */
#include "config.h"
#include "src/provider/http/http.h"

#include "tests/check.h"

#include <cjson/cJSON.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static uv_loop_t *loop;
static struct sd_http *http;
static const char *base;

/* The attempt log, as the journal would get it. */
static struct sd_http_attempt attempts[64];
static char attempt_urls[64][512];
static int nattempts;

static void on_log(void *arg, const struct sd_http_attempt *a)
{
	(void)arg;
	if (nattempts < 64) {
		attempts[nattempts] = *a;
		snprintf(attempt_urls[nattempts], sizeof attempt_urls[0], "%s", a->url);
		attempts[nattempts].url = attempt_urls[nattempts];
		attempts[nattempts].error = "";
		attempts[nattempts].label = "";
		attempts[nattempts].method = "";
	}
	nattempts++;
}

struct result {
	int done;
	long status;
	char body[65536];
	size_t body_len;
	char error[512];
	int attempts;
	double elapsed_s;
	int cancelled;
};

static void on_done(void *arg, const struct sd_http_response *r)
{
	struct result *res = arg;
	res->done++;
	res->status = r->status;
	snprintf(res->body, sizeof res->body, "%s", r->body);
	res->body_len = r->body_len;
	snprintf(res->error, sizeof res->error, "%s", r->error);
	res->attempts = r->attempts;
	res->elapsed_s = r->elapsed_s;
	res->cancelled = r->cancelled;
}

/* Sends one request and runs the loop until it ends. */
static void run_one(const char *method, const char *path, int idempotent, double timeout_s,
		    int max_attempts, const char *body, struct result *res)
{
	char url[512], err[256];
	snprintf(url, sizeof url, "%s%s", path[0] == '/' ? base : "", path);
	memset(res, 0, sizeof *res);
	struct sd_http_request rq = {
		.label = "test", .method = method, .url = url, .body = body,
		.body_len = body ? strlen(body) : 0, .idempotent = idempotent,
		.timeout_s = timeout_s, .max_attempts = max_attempts,
	};
	nattempts = 0;
	if (!sd_http_send(http, &rq, on_done, res, err, sizeof err)) {
		CHECK(0, "send %s %s: %s", method, path, err);
		return;
	}
	while (!res->done)
		uv_run(loop, UV_RUN_ONCE);
	CHECK_INT(res->done, 1);
}

static void fault(const char *prefix, int status, int count, int retry_after)
{
	char body[256];
	struct result res;
	if (retry_after >= 0)
		snprintf(body, sizeof body, "{\"prefix\":\"%s\",\"status\":%d,\"count\":%d,\"retry_after\":%d}",
			 prefix, status, count, retry_after);
	else
		snprintf(body, sizeof body, "{\"prefix\":\"%s\",\"status\":%d,\"count\":%d}", prefix, status, count);
	run_one("POST", "/_fault", 0, 0, 1, body, &res);
	CHECK_INT(res.status, 200);
}

/* How many requests for PATH the fake received (its own log). */
static int server_saw(const char *path)
{
	struct result res;
	run_one("GET", "/_log", 1, 0, 0, NULL, &res);
	CHECK_INT(res.status, 200);
	if (res.body_len >= sizeof res.body - 1) {
		CHECK(0, "the fake's log is longer than the test's buffer");
		return -1;
	}
	cJSON *j = cJSON_Parse(res.body);
	cJSON *reqs = cJSON_GetObjectItem(j, "requests");
	int n = 0;
	cJSON *it;
	cJSON_ArrayForEach(it, reqs) {
		const char *p = cJSON_GetStringValue(cJSON_GetObjectItem(it, "path"));
		if (p && strcmp(p, path) == 0)
			n++;
	}
	cJSON_Delete(j);
	return n;
}

/* A TCP port on 127.0.0.1 with nothing listening (bound, then closed). */
static int closed_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof a;
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &al) < 0) {
		perror("closed_port");
		exit(1);
	}
	close(fd);
	return ntohs(a.sin_port);
}

static void test_answer(void)
{
	struct result res;
	run_one("GET", "/hello", 1, 0, 0, NULL, &res);
	CHECK_INT(res.status, 200);
	CHECK_INT(res.attempts, 1);
	CHECK_STR(res.error, "");
	CHECK(strstr(res.body, "\"path\": \"/hello\"") != NULL, "body %s", res.body);
	run_one("POST", "/echo", 0, 0, 0, "Action=DescribeInstances&Version=2016-11-15", &res);
	CHECK_INT(res.status, 200);
	CHECK(strstr(res.body, "\"body_len\": 43") != NULL, "body %s", res.body);
	CHECK(strstr(res.body, "\"method\": \"POST\"") != NULL, "body %s", res.body);
	run_one("DELETE", "/instances/a", 1, 0, 0, NULL, &res);
	CHECK(strstr(res.body, "\"method\": \"DELETE\"") != NULL, "body %s", res.body);
	/* An error status that is not retried comes back as it is. */
	fault("/missing", 404, 1, -1);
	run_one("GET", "/missing", 1, 0, 0, NULL, &res);
	CHECK_INT(res.status, 404);
	CHECK_INT(res.attempts, 1);
	CHECK(strstr(res.body, "injected") != NULL, "body %s", res.body);
	check_report(1, "answers: GET, POST with a body, DELETE, a 404 kept as it is");
}

static void test_retries(void)
{
	struct result res;
	/* An idempotent GET rides out two 503s. */
	fault("/retry", 503, 2, -1);
	run_one("GET", "/retry", 1, 0, 0, NULL, &res);
	CHECK_INT(res.status, 200);
	CHECK_INT(res.attempts, 3);
	CHECK_INT(nattempts, 3);
	CHECK(attempts[0].status == 503 && attempts[0].retry_in_s >= 0 && attempts[0].retry_in_s <= 0.05 + 1e-9,
	      "attempt 1: status %ld, retry in %.3f s (jitter ceiling 0.05 s)", attempts[0].status,
	      attempts[0].retry_in_s);
	CHECK(attempts[1].retry_in_s >= 0 && attempts[1].retry_in_s <= 0.1 + 1e-9,
	      "attempt 2 retry in %.3f s (ceiling 0.1 s)", attempts[1].retry_in_s);
	CHECK(attempts[2].status == 200 && attempts[2].retry_in_s < 0, "attempt 3: %ld, %.3f",
	      attempts[2].status, attempts[2].retry_in_s);
	CHECK_INT(attempts[2].attempt, 3);
	CHECK_INT(server_saw("/retry"), 3);

	/* Which failures are sent again, and how often: a POST that is not
	 * idempotent never twice (the 503 is the answer); with an idempotency
	 * key (idempotent = 1) it is resent; out of attempts, the last answer
	 * is the result. */
	static const struct {
		const char *method, *path;
		int idempotent, max_attempts, fault_status, fault_count;
		long want_status;
		int want_attempts, want_saw;
	} cases[] = {
		{"POST", "/post", 0, 0, 503, 1, 503, 1, 1},
		{"POST", "/keyed?requestId=4f1c", 1, 0, 500, 1, 200, 2, 2},
		{"GET", "/down", 1, 3, 502, 10, 502, 3, 3},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char prefix[64];
		snprintf(prefix, sizeof prefix, "%.*s", (int)strcspn(cases[i].path, "?"), cases[i].path);
		fault(prefix, cases[i].fault_status, cases[i].fault_count, -1);
		run_one(cases[i].method, cases[i].path, cases[i].idempotent, 0, cases[i].max_attempts,
			strcmp(cases[i].method, "POST") ? NULL : "x=1", &res);
		CHECK(res.status == cases[i].want_status && res.attempts == cases[i].want_attempts,
		      "%s %s: status %ld after %d attempts, want %ld after %d", cases[i].method, cases[i].path,
		      res.status, res.attempts, cases[i].want_status, cases[i].want_attempts);
		CHECK_INT(server_saw(prefix), cases[i].want_saw);
	}

	/* Retry-After beats the back-off: 429 with "Retry-After: 1". */
	fault("/busy", 429, 1, 1);
	run_one("GET", "/busy", 1, 0, 0, NULL, &res);
	CHECK_INT(res.status, 200);
	CHECK_INT(res.attempts, 2);
	CHECK(res.elapsed_s >= 1.0, "Retry-After 1 s, but done after %.3f s", res.elapsed_s);
	CHECK(attempts[0].retry_in_s == 1.0, "retry in %.3f s", attempts[0].retry_in_s);
	/* A Retry-After beyond retry_after_max_s (5 s here) ends the retries. */
	fault("/later", 503, 1, 3600);
	run_one("GET", "/later", 1, 0, 0, NULL, &res);
	CHECK_INT(res.status, 503);
	CHECK_INT(res.attempts, 1);

	/* A connection closed without an answer: resent when idempotent
	 * (libcurl itself resends on a fresh connection when a reused one
	 * dies before answering, so the attempts seen here may be 1). */
	fault("/drop", 0, 1, -1);
	run_one("GET", "/drop", 1, 0, 0, NULL, &res);
	CHECK_INT(res.status, 200);
	CHECK_INT(server_saw("/drop"), 2);
	/* Not idempotent: sent once, on a connection of its own, so that
	 * libcurl's own resend cannot happen either. */
	fault("/dropost", 0, 1, -1);
	run_one("POST", "/dropost", 0, 0, 0, "x=1", &res);
	CHECK_INT(res.status, 0);
	CHECK_INT(res.attempts, 1);
	CHECK(res.error[0] != '\0', "no error for a dropped connection");
	CHECK_INT(server_saw("/dropost"), 1);
	check_report(1, "retries: 5xx and 429 (Retry-After) for idempotent calls only, back-off within its ceiling");
}

static void test_timeouts(void)
{
	struct result res;
	run_one("GET", "/slow?delay=3", 1, 0.4, 2, NULL, &res);
	CHECK_INT(res.status, 0);
	CHECK_INT(res.attempts, 2);
	CHECK(strstr(res.error, "imed out") != NULL && strstr(res.error, "after 2 attempts") != NULL,
	      "error '%s'", res.error);
	CHECK(res.elapsed_s >= 0.8 && res.elapsed_s < 2.5, "2 attempts of 0.4 s took %.3f s", res.elapsed_s);
	/* Not idempotent: the request may have arrived, so no second send. */
	run_one("POST", "/slowpost?delay=3", 0, 0.4, 3, "x=1", &res);
	CHECK_INT(res.status, 0);
	CHECK_INT(res.attempts, 1);

	/* Refused: nothing left this host, so even a POST is retried. */
	char url[64];
	snprintf(url, sizeof url, "http://127.0.0.1:%d/x", closed_port());
	run_one("POST", url, 0, 0, 3, "x=1", &res);
	CHECK_INT(res.status, 0);
	CHECK_INT(res.attempts, 3);
	CHECK(strstr(res.error, "after 3 attempts") != NULL, "error '%s'", res.error);
	check_report(1, "timeouts end an attempt (resent only when idempotent); a refused connection is retried");
}

static int tick_count;
static uint64_t tick_last_ns, tick_worst_ns;

static void on_tick(uv_timer_t *t)
{
	(void)t;
	uint64_t now = uv_hrtime();
	if (tick_last_ns && now - tick_last_ns > tick_worst_ns)
		tick_worst_ns = now - tick_last_ns;
	tick_last_ns = now;
	tick_count++;
}

static void test_many(void)
{
	enum { N = 200 };
	static struct result res[N];
	char url[256], err[256];
	snprintf(url, sizeof url, "%s/many?delay=1", base);
	uv_timer_t tick;
	uv_timer_init(loop, &tick);
	tick_last_ns = tick_worst_ns = 0;
	tick_count = 0;
	uint64_t t0 = uv_hrtime();
	uv_timer_start(&tick, on_tick, 10, 10);
	for (int i = 0; i < N; i++) {
		memset(&res[i], 0, sizeof res[i]);
		struct sd_http_request rq = {.method = "GET", .url = url, .idempotent = 1};
		if (!sd_http_send(http, &rq, on_done, &res[i], err, sizeof err))
			CHECK(0, "send %d: %s", i, err);
	}
	int peak = sd_http_pending(http);
	while (sd_http_pending(http) > 0)
		uv_run(loop, UV_RUN_ONCE);
	double total = (double)(uv_hrtime() - t0) / 1e9;
	uv_timer_stop(&tick);
	uv_close((uv_handle_t *)&tick, NULL);
	uv_run(loop, UV_RUN_NOWAIT);
	int ok = 0;
	for (int i = 0; i < N; i++)
		ok += res[i].done == 1 && res[i].status == 200;
	CHECK_INT(peak, N);
	CHECK_INT(ok, N);
	/* One by one they would take 200 s: together about 1 s. */
	CHECK(total < 10, "%d calls of 1 s each took %.2f s together", N, total);
	double worst_ms = (double)tick_worst_ns / 1e6;
	/* Not a speed target (a loaded machine delays any timer; it read 2-23
	 * ms here on a quiet machine, 65 ms beside a make check -j2): the
	 * check is that no call ever held the loop.  A call that blocked would
	 * hold it for its whole answer, 1 s; 500 ms cannot be reached by
	 * scheduling delays alone, and cannot hide a blocking call. */
	CHECK(worst_ms < 500, "a 10 ms timer waited %.1f ms with %d calls in flight: a call blocked the loop",
	      worst_ms, N);
	check_report(1, "%d calls at once: all 200 OK in %.2f s; the loop's 10 ms timer late by at most %.1f ms",
		     N, total, worst_ms > 10 ? worst_ms - 10 : 0.0);
}

static void on_cancel_timer(uv_timer_t *t)
{
	sd_http_cancel(t->data);
	uv_close((uv_handle_t *)t, NULL);
}

static int closed_done;
static void on_closed(void *arg)
{
	(void)arg;
	closed_done++;
}

static void test_cancel_close(void)
{
	struct result res;
	char url[256], err[256];
	memset(&res, 0, sizeof res);
	snprintf(url, sizeof url, "%s/slowc?delay=5", base);
	struct sd_http_request rq = {.method = "GET", .url = url, .idempotent = 1};
	struct sd_http_call *c = sd_http_send(http, &rq, on_done, &res, err, sizeof err);
	CHECK(c != NULL, "%s", err);
	uv_timer_t t;
	uv_timer_init(loop, &t);
	t.data = c;
	uv_timer_start(&t, on_cancel_timer, 100, 0);
	while (!res.done)
		uv_run(loop, UV_RUN_ONCE);
	CHECK_INT(res.cancelled, 1);
	CHECK_STR(res.error, "cancelled");
	CHECK(res.elapsed_s < 1, "cancel took %.3f s", res.elapsed_s);
	uv_run(loop, UV_RUN_NOWAIT);

	/* Closing with three calls in flight: each hears "cancelled", then
	 * the client is gone and the loop has nothing left of it. */
	static struct result r3[3];
	for (int i = 0; i < 3; i++) {
		memset(&r3[i], 0, sizeof r3[i]);
		CHECK(sd_http_send(http, &rq, on_done, &r3[i], err, sizeof err) != NULL, "%s", err);
	}
	for (int i = 0; i < 5; i++)
		uv_run(loop, UV_RUN_NOWAIT);
	closed_done = 0;
	sd_http_close(http, on_closed, NULL);
	http = NULL;
	for (int i = 0; i < 3; i++)
		CHECK(r3[i].done == 1 && r3[i].cancelled == 1, "call %d: done %d cancelled %d", i, r3[i].done,
		      r3[i].cancelled);
	uv_run(loop, UV_RUN_DEFAULT); /* returns only when no handle is left */
	CHECK_INT(closed_done, 1);
	check_report(1, "cancel ends a call at once; close cancels the calls in flight and frees every handle");
}

static void test_limits_and_redaction(void)
{
	struct result res;
	char url[256], err[256];
	/* Bad requests are refused before anything is sent. */
	struct sd_http_request bad[] = {
		{.method = "TRACE", .url = base},
		{.method = "GET", .url = "ftp://example.invalid/"},
		{.method = "GET", .url = "http://127.0.0.1/a b"},
		{.method = "GET", .url = base, .headers = (const char *const[]){"X-A: 1\r\nX-B: 2", NULL}},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		err[0] = '\0';
		CHECK(sd_http_send(http, &bad[i], on_done, &res, err, sizeof err) == NULL, "bad request %zu sent", i);
		CHECK(strncmp(err, "http: ", 6) == 0, "bad request %zu: error '%s'", i, err);
	}
	/* An answer over the limit fails the call instead of eating memory. */
	snprintf(url, sizeof url, "/big?size=%u", SD_HTTP_MAX_BODY + 1);
	run_one("GET", url, 1, 0, 0, NULL, &res);
	CHECK_INT(res.status, 0);
	CHECK(strstr(res.error, "answer over 16 MiB") != NULL, "error '%s'", res.error);
	CHECK_INT(res.attempts, 1);
	snprintf(url, sizeof url, "/big?size=%u", 100000);
	run_one("GET", url, 1, 0, 0, NULL, &res);
	CHECK_INT(res.status, 200);
	CHECK_INT(res.body_len, 100000);

	/* The log never shows a credential in a URL. */
	run_one("GET", "/t?access_token=ya29.SECRET&zone=us-central1-a&key=AIzaSECRET", 1, 0, 0, NULL, &res);
	CHECK_INT(nattempts, 1);
	char want[256];
	snprintf(want, sizeof want, "%s/t?access_token=REDACTED&zone=us-central1-a&key=REDACTED", base);
	CHECK_STR(attempt_urls[0], want);
	static const struct {
		const char *in, *out;
	} red[] = {
		{"https://h/p", "https://h/p"},
		{"https://h/p?", "https://h/p?"},
		{"https://h/p?X-Amz-Signature=abc&X-Amz-Date=1", "https://h/p?X-Amz-Signature=REDACTED&X-Amz-Date=1"},
		{"https://h/p?TOKEN=abc#frag", "https://h/p?TOKEN=REDACTED#frag"},
		{"https://h/p?tokens=abc&token", "https://h/p?tokens=abc&token"},
		{"https://h/p?a=1&x-amz-security-token=s&b=2", "https://h/p?a=1&x-amz-security-token=REDACTED&b=2"},
	};
	for (size_t i = 0; i < sizeof red / sizeof red[0]; i++) {
		char out[256];
		sd_http_redact_url(red[i].in, out, sizeof out);
		CHECK_STR(out, red[i].out);
	}
	char small[8];
	sd_http_redact_url("https://h/p?key=secret", small, sizeof small);
	CHECK_STR(small, "https:/");
	check_report(1, "bad requests refused; answers over 16 MiB fail; credentials in URLs redacted in the log");
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: test-http http://127.0.0.1:PORT (tests/fake-cloud/faults.py)\n");
		return 2;
	}
	base = argv[1];
	loop = uv_default_loop();
	char err[256];
	struct sd_http_policy pol = {.backoff_base_s = 0.05, .backoff_cap_s = 0.4, .retry_after_max_s = 5,
				     .seed = 42};
	http = sd_http_new(loop, &pol, on_log, NULL, err, sizeof err);
	if (!http) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	test_answer();
	test_retries();
	test_timeouts();
	test_limits_and_redaction();
	test_many();
	test_cancel_close();
	CHECK_INT(uv_loop_alive(loop), 0);
	return check_exit("test-http");
}
