/* tests/market/test-trace.c - trace parser: a hand-written trace and a journal
 * excerpt give the expected events in time order, and each kind of malformed
 * line is refused with one line naming the file, the line and the field. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/market/trace.h"
#include "tests/check.h"

/* Compares one event with what it should be; `what` is the string field the
 * kind uses. */
static void expect_event(const struct sd_trace *tr, int i, enum sd_trace_kind kind, double t, const char *what,
                         double seconds, double usd, int line)
{
	if (i >= tr->n) {
		CHECK(i < tr->n, "event %d missing (only %d)", i, tr->n);
		return;
	}
	const struct sd_trace_event *e = &tr->events[i];
	const char *s = kind == SD_TRACE_REVOKE ? e->server : kind == SD_TRACE_STOCKOUT ? e->zone
	              : kind == SD_TRACE_PRICE ? e->offer : e->command;
	CHECK(e->kind == kind, "event %d: kind %d, want %d", i, e->kind, kind);
	CHECK(e->t == t, "event %d: t %g, want %g", i, e->t, t);
	CHECK(!strcmp(s, what), "event %d: \"%s\", want \"%s\"", i, s, what);
	CHECK(e->seconds == seconds, "event %d: seconds %g, want %g", i, e->seconds, seconds);
	CHECK(e->usd_per_hour == usd, "event %d: usd_per_hour %g, want %g", i, e->usd_per_hour, usd);
	CHECK(e->line == line, "event %d: line %d, want %d", i, e->line, line);
	/* Fields the kind does not use stay empty. */
	int used = (e->server[0] != 0) + (e->zone[0] != 0) + (e->offer[0] != 0) + (e->command[0] != 0);
	CHECK(used == 1, "event %d: %d string fields set", i, used);
}

static void test_valid(void)
{
	static const char text[] =
		"# a hand-written trace: comments and blank lines are skipped\n"   /* 1 */
		"\n"                                                                /* 2 */
		"{\"t\": 40, \"event\": \"price\", \"offer\": \"gce/us-west1-b/k80/spot\", \"usd_per_hour\": 0.31}\n"
		"{\"t\": 12.5, \"event\": \"revoke\", \"server\": \"s2\"}\r\n"      /* 4, CRLF */
		"   # an indented comment\n"                                        /* 5 */
		"{\"event\": \"stockout\", \"t\": 30, \"zone\": \"us-east1-c\", \"seconds\": 60}\n"
		"{\"t\": 5, \"event\": \"command\", \"command\": \"add gce/us-west1-b/k80/spot\"}\n"
		"\t \r\n"                                                           /* 8 */
		"{\"t\": 12.5, \"event\": \"revoke\", \"server\": \"s3\", \"notice\": 3}\n"
		"{\"t\": 0, \"event\": \"stockout\", \"zone\": \"z\", \"seconds\": 0}\n"
		"{\"t\": 12.5, \"event\": \"command\", \"command\": \"workers 2\"}";  /* 11, no final newline */
	struct sd_trace tr;
	char *why = NULL;
	int rc = sd_trace_parse(&tr, text, sizeof text - 1, "trace.jsonl", &why);
	CHECK(rc == 0, "%s", why ? why : "");
	CHECK(tr.n == 7, "%d events", tr.n);
	CHECK(tr.file && !strcmp(tr.file, "trace.jsonl"), "file %s", tr.file ? tr.file : "(null)");
	expect_event(&tr, 0, SD_TRACE_STOCKOUT, 0, "z", 0, 0, 10);
	expect_event(&tr, 1, SD_TRACE_COMMAND, 5, "add gce/us-west1-b/k80/spot", 0, 0, 7);
	/* Three at 12.5 keep the order of the file. */
	expect_event(&tr, 2, SD_TRACE_REVOKE, 12.5, "s2", -1, 0, 4);
	expect_event(&tr, 3, SD_TRACE_REVOKE, 12.5, "s3", 3, 0, 9);
	expect_event(&tr, 4, SD_TRACE_COMMAND, 12.5, "workers 2", 0, 0, 11);
	expect_event(&tr, 5, SD_TRACE_STOCKOUT, 30, "us-east1-c", 60, 0, 6);
	expect_event(&tr, 6, SD_TRACE_PRICE, 40, "gce/us-west1-b/k80/spot", 0, 0.31, 3);
	sd_trace_free(&tr);
	CHECK(tr.events == NULL && tr.n == 0 && tr.file == NULL, "not emptied");
	sd_trace_free(&tr);
	sd_trace_free(NULL);
	free(why);
}

/* Many equal times: the sort must stay stable however qsort splits them. */
static void test_stable(void)
{
	char text[64 * 80];
	size_t o = 0;
	for (int i = 0; i < 64; i++)
		o += (size_t)snprintf(text + o, sizeof text - o,
		                      "{\"t\": %d, \"event\": \"revoke\", \"server\": \"s%d\"}\n", (i * 7) % 3, i);
	struct sd_trace tr;
	char *why = NULL;
	CHECK(sd_trace_parse(&tr, text, o, "many", &why) == 0, "%s", why ? why : "");
	for (int i = 1; i < tr.n; i++)
		CHECK(tr.events[i - 1].t < tr.events[i].t ||
		      (tr.events[i - 1].t == tr.events[i].t && tr.events[i - 1].line < tr.events[i].line),
		      "events %d and %d out of order", i - 1, i);
	sd_trace_free(&tr);
	free(why);
}

static void test_journal(void)
{
	/* As `spotdeck --headless` journals a sim run (shortened), with one
	 * hand-written trace event mixed in. */
	static const char text[] =
		"{\"type\":\"run_start\",\"time\":1767000000.1,\"t\":0,\"job\":\"j\"}\n"
		"{\"type\":\"acquired\",\"time\":1767000000.2,\"t\":0.1,\"server\":\"s1\",\"offer\":\"gce/us-east1-c/k80/spot\","
		"\"state\":\"requested\",\"market_time\":0.1,\"zone\":\"us-east1-c\",\"usd_per_hour\":0.135}\n"
		"{\"type\":\"step\",\"time\":1767000003.5,\"t\":3.4,\"step\":50,\"loss\":2.1}\n"
		"{\"type\":\"command\",\"time\":1767000004,\"t\":4.25,\"command\":\"add gce/us-west1-b/k80/spot\",\"ok\":true}\n"
		"{\"type\":\"command\",\"time\":1767000004.5,\"t\":4.5,\"command\":\"add nowhere\",\"ok\":false,"
		"\"error\":\"unknown offer 'nowhere'\"}\n"
		"{\"type\":\"generation\",\"time\":1767000005,\"t\":5,\"generation\":2,\"workers\":[\"s1\",\"s2\"]}\n"
		"{\"type\":\"notice\",\"time\":1767000006,\"t\":6,\"server\":\"s2\",\"market_time\":17,\"seconds\":3}\n"
		"{\"type\":\"revoked\",\"time\":1767000009,\"t\":9,\"server\":\"s2\",\"offer\":\"gce/us-west1-b/k80/spot\","
		"\"state\":\"revoked\",\"market_time\":20,\"lifetime_s\":15.5,\"notice_s\":3,\"capped\":false,\"billed_s\":16}\n"
		"{\"type\":\"stockout\",\"time\":1767000010,\"t\":10,\"offer\":\"gce/us-east1-c/k80/spot\",\"zone\":\"us-east1-c\","
		"\"reason\":\"ZONE_RESOURCE_POOL_EXHAUSTED\",\"detail\":\"\"}\n"
		"{\"type\":\"price\",\"time\":1767000011,\"t\":11,\"market_time\":19.5,\"offer\":\"gce/us-east1-c/k80/spot\","
		"\"usd_per_hour\":0.2}\n"
		"{\"t\": 19.5, \"event\": \"stockout\", \"zone\": \"us-east1-c\", \"seconds\": 60}\n"
		"{\"type\":\"revoked\",\"time\":1767000012,\"t\":12,\"server\":\"s1\",\"market_time\":21}\n"
		"{\"type\":\"done\",\"time\":1767000020,\"t\":20,\"test_accuracy\":0.5}\n";
	struct sd_trace tr;
	char *why = NULL;
	int rc = sd_trace_parse(&tr, text, sizeof text - 1, "journal.jsonl", &why);
	CHECK(rc == 0, "%s", why ? why : "");
	CHECK(tr.n == 6, "%d events", tr.n);
	expect_event(&tr, 0, SD_TRACE_COMMAND, 4.25, "add gce/us-west1-b/k80/spot", 0, 0, 4);
	/* A refused command is replayed too: it took a server id before. */
	expect_event(&tr, 1, SD_TRACE_COMMAND, 4.5, "add nowhere", 0, 0, 5);
	expect_event(&tr, 2, SD_TRACE_PRICE, 19.5, "gce/us-east1-c/k80/spot", 0, 0.2, 10);
	expect_event(&tr, 3, SD_TRACE_STOCKOUT, 19.5, "us-east1-c", 60, 0, 11);
	expect_event(&tr, 4, SD_TRACE_REVOKE, 20, "s2", 3, 0, 8);
	expect_event(&tr, 5, SD_TRACE_REVOKE, 21, "s1", -1, 0, 12);
	sd_trace_free(&tr);
	free(why);
}

struct bad {
	const char *text;
	const char *want;    /* must appear in the message */
	const char *exact;   /* if not NULL, the whole message */
};

static const char ok_line[] = "{\"t\": 1, \"event\": \"revoke\", \"server\": \"s1\"}";

static void test_malformed(void)
{
	static const struct bad cases[] = {
		{ "{\"t\":1,\"event\":\"revoke\",\"server\":\"s1\"}\n\n{\"t\": \"x\", \"event\": \"revoke\", \"server\": \"s2\"}\n",
		  NULL, "trace.jsonl:3: t: expected a number >= 0, got \"x\"" },
		{ "#1\n#2\n#3\n#4\n#5\n#6\n{\"t\": 1, \"event\": \"explode\"}\n",
		  NULL, "trace.jsonl:7: event: unknown event 'explode' (known: revoke, stockout, price, command)" },
		{ "# x\n{\"t\": 1, \"event\": \"revoke\", \"server\": \"s1\"\n", NULL, "trace.jsonl:2: invalid JSON" },
		{ "{\"t\": 1, \"event\": \"revoke\"}\n", "trace.jsonl:1: server: missing", NULL },
		{ "{\"event\": \"revoke\", \"server\": \"s1\"}\n", "trace.jsonl:1: t: missing", NULL },
		{ "{\"t\": -0.5, \"event\": \"revoke\", \"server\": \"s1\"}\n", NULL,
		  "trace.jsonl:1: t: expected a number >= 0, got -0.5" },
		{ "{\"t\": 1e999, \"event\": \"revoke\", \"server\": \"s1\"}\n", "trace.jsonl:1: t: expected a number >= 0, got inf (beyond a double", NULL },
		{ "{\"t\": 1, \"event\": \"stockout\", \"zone\": \"z\", \"seconds\": -60}\n", NULL,
		  "trace.jsonl:1: seconds: expected a number >= 0, got -60" },
		{ "{\"t\": 1, \"event\": \"stockout\", \"zone\": \"z\"}\n", "trace.jsonl:1: seconds: missing", NULL },
		{ "{\"t\": 1, \"event\": \"revoke\", \"server\": \"s1\", \"notice\": -3}\n",
		  "trace.jsonl:1: notice: expected a number >= 0, got -3", NULL },
		{ "{\"t\": 1, \"event\": \"price\", \"offer\": \"o\", \"usd_per_hour\": 0}\n", NULL,
		  "trace.jsonl:1: usd_per_hour: expected a number > 0, got 0" },
		{ "{\"t\": 1, \"event\": \"price\", \"offer\": \"o\", \"usd_per_hour\": -0.3}\n",
		  "trace.jsonl:1: usd_per_hour: expected a number > 0", NULL },
		{ "{\"t\": 1, \"event\": \"price\", \"offer\": \"o\", \"usd_per_hour\": \"0.3\"}\n",
		  "trace.jsonl:1: usd_per_hour: expected a number > 0, got \"0.3\"", NULL },
		{ "{\"t\": 1, \"event\": \"revoke\", \"server\": \"0123456789012345678901234567890123456789\"}\n",
		  "trace.jsonl:1: server: 40 bytes long, at most 31 fit", NULL },
		{ "{\"t\": 1, \"event\": \"stockout\", \"zone\": \"0123456789012345678901234567890123456789"
		  "0123456789012345678901234567890123456789\", \"seconds\": 1}\n",
		  "trace.jsonl:1: zone: 80 bytes long, at most 63 fit", NULL },
		{ "{\"t\": 1, \"event\": \"revoke\", \"server\": \"s1\", \"bogus\": 1}\n", NULL,
		  "trace.jsonl:1: bogus: unknown key in a revoke event (known: t, event, server, notice)" },
		{ "{\"t\": 1, \"event\": \"command\", \"command\": \"quit\", \"type\": \"command\"}\n",
		  "trace.jsonl:1: type: unknown key in a command event", NULL },
		{ "{\"t\": 1, \"event\": \"revoke\", \"server\": \"s1\", \"a\\nb\": 1}\n",
		  "trace.jsonl:1: \"a\\x0ab\": unknown key", NULL },
		{ "{\"t\": 1, \"event\": \"revoke\", \"server\": \"s1\", \"server\": \"s2\"}\n",
		  "trace.jsonl:1: server: given twice", NULL },
		{ "[1, 2]\n", "trace.jsonl:1: expected a JSON object, got an array", NULL },
		{ "{\"t\": 1}\n", "trace.jsonl:1: event: missing", NULL },
		{ "{\"t\": 1, \"event\": 3}\n", "trace.jsonl:1: event: expected a string, got 3", NULL },
		{ "{\"t\": 1, \"event\": \"revoke\", \"server\": \"\"}\n",
		  "trace.jsonl:1: server: expected a non-empty string, got \"\"", NULL },
		{ "{\"t\": 1, \"event\": \"price\", \"offer\": \"gce/a b\", \"usd_per_hour\": 1}\n",
		  "trace.jsonl:1: offer: contains a space", NULL },
		{ "{\"t\": 1, \"event\": \"command\", \"command\": \"add x\\nquit\"}\n",
		  "trace.jsonl:1: command: contains a control character", NULL },
		{ "{\"t\": 1, \"event\": \"revoke\", \"server\": \"s1\"} x\n", "trace.jsonl:1: invalid JSON", NULL },
		{ "{\"t\": 1, \"event\": \"revoke\", \"server\": \"s1\"} # no comments after JSON\n",
		  "trace.jsonl:1: invalid JSON", NULL },
		{ "{\"type\": \"revoked\", \"server\": \"s1\", \"notice_s\": 3}\n", "trace.jsonl:1: market_time: missing", NULL },
		{ "{\"type\": \"revoked\", \"server\": \"s1\", \"market_time\": 2, \"notice_s\": -1}\n",
		  "trace.jsonl:1: notice_s: expected a number >= 0, got -1", NULL },
		{ "{\"type\": \"command\", \"t\": 1, \"command\": \"quit\", \"ok\": 1}\n",
		  "trace.jsonl:1: ok: expected true or false, got 1", NULL },
		{ "{\"type\": \"command\", \"t\": 1, \"ok\": true}\n", "trace.jsonl:1: command: missing", NULL },
		{ "{\"type\": \"price\", \"market_time\": 3, \"offer\": \"o\", \"usd_per_hour\": -1}\n",
		  "trace.jsonl:1: usd_per_hour: expected a number > 0, got -1", NULL },
		{ "{\"type\": 7}\n", "trace.jsonl:1: type: expected a string, got 7", NULL },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const struct bad *b = &cases[i];
		struct sd_trace tr;
		char *why = NULL;
		int rc = sd_trace_parse(&tr, b->text, strlen(b->text), "trace.jsonl", &why);
		CHECK(rc == -1, "case %zu: rc %d for %s", i, rc, b->text);
		CHECK(tr.events == NULL && tr.n == 0 && tr.file == NULL, "case %zu: output not empty", i);
		if (rc == -1) {
			CHECK(why != NULL, "case %zu: no message", i);
			if (why) {
				CHECK(!strchr(why, '\n'), "case %zu: message has a newline: %s", i, why);
				if (b->exact)
					CHECK(!strcmp(why, b->exact), "case %zu:\n  got  %s\n  want %s", i, why, b->exact);
				else
					CHECK(strstr(why, b->want) != NULL, "case %zu:\n  got  %s\n  want ...%s...", i, why, b->want);
			}
		}
		sd_trace_free(&tr);
		free(why);
	}

	/* A NUL byte in a line, and a line named by the default file name. */
	static const char nul[] = "{\"t\": 1, \"event\": \"revoke\", \"server\": \"s1\"}\n{\"t\": 1,\0 }\n";
	struct sd_trace tr;
	char *why = NULL;
	CHECK(sd_trace_parse(&tr, nul, sizeof nul - 1, NULL, &why) == -1, "NUL accepted");
	CHECK(why && strstr(why, "trace:2: invalid JSON"), "%s", why ? why : "(none)");
	free(why);
	why = NULL;

	/* Errors are still returned without a place for the message. */
	CHECK(sd_trace_parse(&tr, "{", 1, "x", NULL) == -1, "no why");

	/* Journal lines of any other type are skipped without looking at
	 * their other keys. */
	static const char skipped[] =
		"{\"type\": \"stockout\", \"market_time\": -1}\n"
		"{\"type\": \"whatever\", \"t\": \"x\"}\n";
	CHECK(sd_trace_parse(&tr, skipped, sizeof skipped - 1, "j", &why) == 0 && tr.n == 0, "%s",
	      why ? why : "events");
	sd_trace_free(&tr);
	free(why);
	why = NULL;

	/* An empty file is an empty trace; a BOM is skipped. */
	CHECK(sd_trace_parse(&tr, NULL, 0, "empty", &why) == 0 && tr.n == 0, "%s", why ? why : "events");
	sd_trace_free(&tr);
	static const char bom[] = "\xef\xbb\xbf{\"t\": 1, \"event\": \"revoke\", \"server\": \"s1\"}\n";
	CHECK(sd_trace_parse(&tr, bom, sizeof bom - 1, "bom", &why) == 0 && tr.n == 1, "%s", why ? why : "count");
	sd_trace_free(&tr);
	free(why);
}

/* The event limit: exactly SD_TRACE_MAX_EVENTS are fine (and comment lines
 * after them too), one more is refused at its line. */
static void test_limit(void)
{
	size_t ll = strlen(ok_line) + 1;
	size_t len = ll * (SD_TRACE_MAX_EVENTS + 1) + 16;
	char *text = malloc(len);
	size_t o = 0;
	for (int i = 0; i < SD_TRACE_MAX_EVENTS; i++) {
		memcpy(text + o, ok_line, ll - 1);
		text[o + ll - 1] = '\n';
		o += ll;
	}
	memcpy(text + o, "# the end\n", 10);
	struct sd_trace tr;
	char *why = NULL;
	CHECK(sd_trace_parse(&tr, text, o + 10, "big", &why) == 0 && tr.n == SD_TRACE_MAX_EVENTS, "%s",
	      why ? why : "count");
	sd_trace_free(&tr);
	memcpy(text + o, ok_line, ll - 1);
	text[o + ll - 1] = '\n';
	CHECK(sd_trace_parse(&tr, text, o + ll, "big", &why) == -1, "one event too many accepted");
	char want[64];
	snprintf(want, sizeof want, "big:%d: more than %d events", SD_TRACE_MAX_EVENTS + 1, SD_TRACE_MAX_EVENTS);
	CHECK(why && !strcmp(why, want), "got %s, want %s", why ? why : "(none)", want);
	free(why);
	free(text);
}

static void test_load(void)
{
	char path[] = "/tmp/test-trace-XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0, "mkstemp");
	if (fd < 0)
		return;
	static const char text[] = "{\"t\": 2, \"event\": \"command\", \"command\": \"quit\"}\n"
	                           "{\"t\": 1, \"event\": \"stockout\", \"zone\": \"z\", \"seconds\": 9, \"x\": 1}\n";
	/* First only the good line. */
	ssize_t first = strchr(text, '\n') - text + 1;
	CHECK(write(fd, text, (size_t)first) == first, "write");
	close(fd);
	struct sd_trace tr;
	char *why = NULL;
	CHECK(sd_trace_load(&tr, path, &why) == 0 && tr.n == 1, "%s", why ? why : "count");
	CHECK(tr.file && !strcmp(tr.file, path), "file %s", tr.file ? tr.file : "(null)");
	sd_trace_free(&tr);

	fd = open(path, O_WRONLY | O_TRUNC);
	CHECK(fd >= 0 && write(fd, text, sizeof text - 1) == (ssize_t)(sizeof text - 1), "rewrite");
	if (fd >= 0)
		close(fd);
	CHECK(sd_trace_load(&tr, path, &why) == -1, "bad file accepted");
	char want[128];
	snprintf(want, sizeof want, "%s:2: x: unknown key in a stockout event", path);
	CHECK(why && strstr(why, want) == why, "got %s, want %s...", why ? why : "(none)", want);
	unlink(path);

	CHECK(sd_trace_load(&tr, path, &why) == -1, "missing file accepted");
	snprintf(want, sizeof want, "%s: cannot read: ", path);
	CHECK(why && strstr(why, want) == why, "got %s", why ? why : "(none)");
	CHECK(sd_trace_load(&tr, "/", &why) == -1, "a directory accepted");
	CHECK(why && !strncmp(why, "/: cannot read: ", 16), "got %s", why ? why : "(none)");
	free(why);
}

int main(void)
{
	test_valid();
	test_stable();
	test_journal();
	test_malformed();
	test_limit();
	test_load();
	return check_exit("test-trace");
}
