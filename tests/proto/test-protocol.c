/* tests/proto/test-protocol.c - the control-plane wire protocol (src/proto/protocol.c):
 * the line framer, decoding every message type and every kind of bad line
 * with its message, encode/decode round trips, the hex codec and tokens. */
#include "config.h"

#include "src/proto/protocol.h"
#include "src/base/token.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/check.h"
#include "tests/tmpdir.h"

/* ---- framer ---- */

static void test_framer_basic(void)
{
	struct sd_line_reader r;
	sd_line_reader_init(&r, 64);
	const char *line;
	size_t len;
	char *why = NULL;

	CHECK_INT(sd_line_reader_next(&r, &line, &len, &why), 0);
	sd_line_reader_feed(&r, "one\ntwo\r\nthr", 12);
	CHECK_INT(sd_line_reader_next(&r, &line, &len, &why), 1);
	CHECK_INT(len, 3);
	CHECK(memcmp(line, "one", 3) == 0);
	CHECK_INT(line[len], '\0');
	CHECK_INT(sd_line_reader_next(&r, &line, &len, &why), 1);
	CHECK_INT(len, 3);
	CHECK(memcmp(line, "two", 3) == 0);
	CHECK_INT(sd_line_reader_next(&r, &line, &len, &why), 0);
	sd_line_reader_feed(&r, "ee\n\n", 4);
	CHECK_INT(sd_line_reader_next(&r, &line, &len, &why), 1);
	CHECK_INT(len, 5);
	CHECK(memcmp(line, "three", 5) == 0);
	/* An empty line is a line (the decoder refuses it, not the framer). */
	CHECK_INT(sd_line_reader_next(&r, &line, &len, &why), 1);
	CHECK_INT(len, 0);
	CHECK_INT(sd_line_reader_next(&r, &line, &len, &why), 0);
	/* A lone "\r\n" is an empty line too. */
	sd_line_reader_feed(&r, "\r\n", 2);
	CHECK_INT(sd_line_reader_next(&r, &line, &len, &why), 1);
	CHECK_INT(len, 0);
	CHECK(why == NULL);
	sd_line_reader_free(&r);
}

/* Lines split at every possible place: fed one byte at a time. */
static void test_framer_byte_by_byte(void)
{
	const char *text = "{\"type\":\"stop\",\"reason\":\"a\"}\r\n"
	                   "second line\n"
	                   "\n"
	                   "last\r\n";
	const char *want[] = { "{\"type\":\"stop\",\"reason\":\"a\"}", "second line", "", "last" };
	struct sd_line_reader r;
	sd_line_reader_init(&r, 128);
	int got = 0;
	char *why = NULL;
	for (size_t i = 0; text[i]; i++) {
		sd_line_reader_feed(&r, text + i, 1);
		const char *line;
		size_t len;
		int rc;
		while ((rc = sd_line_reader_next(&r, &line, &len, &why)) == 1) {
			CHECK(got < 4);
			if (got < 4) {
				CHECK_INT(len, strlen(want[got]));
				CHECK(memcmp(line, want[got], len) == 0);
			}
			got++;
		}
		CHECK_INT(rc, 0);
	}
	CHECK_INT(got, 4);
	sd_line_reader_free(&r);
}

/* Many lines in one chunk, with a partial one at the end. */
static void test_framer_many(void)
{
	struct sd_line_reader r;
	sd_line_reader_init(&r, SD_PROTO_LINE_MAX);
	size_t n = 20000;
	char *buf = malloc(n * 8 + 16);
	size_t len = 0;
	for (size_t i = 0; i < n; i++)
		len += (size_t)sprintf(buf + len, "%06zu\n", i);
	memcpy(buf + len, "partial", 7);
	len += 7;
	sd_line_reader_feed(&r, buf, len);
	const char *line;
	size_t ll;
	char *why = NULL;
	size_t count = 0;
	int ok = 1;
	while (sd_line_reader_next(&r, &line, &ll, &why) == 1) {
		char want[16];
		snprintf(want, sizeof want, "%06zu", count);
		if (ll != 6 || memcmp(line, want, 6) != 0)
			ok = 0;
		count++;
	}
	CHECK(ok);
	CHECK_INT(count, n);
	sd_line_reader_feed(&r, "\n", 1);
	CHECK_INT(sd_line_reader_next(&r, &line, &ll, &why), 1);
	CHECK_INT(ll, 7);
	CHECK(memcmp(line, "partial", 7) == 0);
	free(buf);
	sd_line_reader_free(&r);
}

static void test_framer_overflow(void)
{
	const char *line;
	size_t len;
	char *why = NULL;
	struct sd_line_reader r;

	/* max 8 bytes with the newline: 7 content bytes fit, 8 do not. */
	sd_line_reader_init(&r, 8);
	sd_line_reader_feed(&r, "1234567\n", 8);
	CHECK_INT(sd_line_reader_next(&r, &line, &len, &why), 1);
	CHECK_INT(len, 7);
	sd_line_reader_feed(&r, "12345678\n", 9);
	CHECK_INT(sd_line_reader_next(&r, &line, &len, &why), -1);
	CHECK_STR(why, "line longer than 8 bytes");
	free(why);
	why = NULL;
	/* Closed for good: more input changes nothing. */
	sd_line_reader_feed(&r, "ok\n", 3);
	CHECK_INT(sd_line_reader_next(&r, &line, &len, &why), -1);
	free(why);
	why = NULL;
	sd_line_reader_free(&r);

	/* Without a newline: detected as soon as max bytes are pending, before
	 * the line ends, so a peer cannot make us buffer without bound. */
	sd_line_reader_init(&r, 8);
	sd_line_reader_feed(&r, "ok\n1234", 7);
	CHECK_INT(sd_line_reader_next(&r, &line, &len, &why), 1);
	CHECK_INT(len, 2);
	CHECK_INT(sd_line_reader_next(&r, &line, &len, &why), 0);
	sd_line_reader_feed(&r, "5678", 4);
	CHECK_INT(sd_line_reader_next(&r, &line, &len, &why), -1);
	CHECK_STR(why, "line longer than 8 bytes");
	free(why);
	why = NULL;
	sd_line_reader_free(&r);

	/* The real limit, fed in 64 KiB chunks as a socket would. */
	sd_line_reader_init(&r, SD_PROTO_LINE_MAX);
	char *chunk = malloc(65536);
	memset(chunk, 'x', 65536);
	int rc = 0;
	size_t fed = 0;
	while (rc == 0 && fed < 2 * (size_t)SD_PROTO_LINE_MAX) {
		sd_line_reader_feed(&r, chunk, 65536);
		fed += 65536;
		rc = sd_line_reader_next(&r, &line, &len, &why);
	}
	CHECK_INT(rc, -1);
	CHECK_INT(fed, SD_PROTO_LINE_MAX);
	CHECK_STR(why, "line longer than 1048576 bytes");
	free(why);
	free(chunk);
	sd_line_reader_free(&r);
}

/* ---- decoding ---- */

struct valid_case {
	enum sd_msg_type type;
	const char *line;
};

/* The SHA-256 of the 4 bytes de ad be ef. */
#define SHA_A "5f78c33274e43fa9de5659265c1d917e25c03722dcb0b8d27db8d5feaa813953"

static const struct valid_case valid_cases[] = {
	{ SD_MSG_HELLO, "{\"type\":\"hello\",\"version\":4,\"token\":\"0123456789abcdef\","
	                "\"server_id\":\"sim-3\",\"pid\":4242}" },
	{ SD_MSG_WELCOME, "{\"type\":\"welcome\",\"version\":4,\"worker_id\":\"w1\","
	                  "\"job\":{\"epochs\":2},\"model_sha256\":\"" SHA_A "\",\"model_bytes\":4}" },
	{ SD_MSG_KV_SET, "{\"type\":\"kv_set\",\"key\":\"g1/rank0\",\"value\":\"00ff\"}" },
	{ SD_MSG_KV_GET, "{\"type\":\"kv_get\",\"id\":7,\"key\":\"g1/rank0\"}" },
	{ SD_MSG_KV_VALUE, "{\"type\":\"kv_value\",\"id\":7,\"key\":\"g1/rank0\",\"value\":\"\"}" },
	{ SD_MSG_GENERATION, "{\"type\":\"generation\",\"generation\":3,\"rank\":1,"
	                     "\"world_size\":2,\"offset\":32,\"count\":32,"
	                     "\"members\":[\"w1\",\"w2\"]}" },
	{ SD_MSG_JOINED, "{\"type\":\"joined\",\"generation\":3,\"step\":120}" },
	{ SD_MSG_STEP, "{\"type\":\"step\",\"generation\":3,\"step\":121,\"rank\":0,"
	               "\"samples\":32,\"loss_sum\":70.25,\"correct\":20,\"compute_ms\":12.5,"
	               "\"comm_ms\":1.5,\"images_per_sec\":2100.5}" },
	{ SD_MSG_COMM_FAILED, "{\"type\":\"comm_failed\",\"generation\":3,\"step\":121,"
	                      "\"reason\":\"timeout\"}" },
	{ SD_MSG_LEAVING, "{\"type\":\"leaving\",\"reason\":\"notice\",\"step\":122}" },
	{ SD_MSG_CKPT_CHUNK, "{\"type\":\"ckpt_chunk\",\"step\":200,\"offset\":0,\"total\":4,"
	                     "\"data\":\"deadbeef\"}" },
	{ SD_MSG_STOP, "{\"type\":\"stop\",\"reason\":\"operator\"}" },
	{ SD_MSG_ERROR, "{\"type\":\"error\",\"reason\":\"bad token\"}" },
	{ SD_MSG_LOG, "{\"type\":\"log\",\"level\":\"info\",\"message\":\"hi\"}" },
	{ SD_MSG_NOTICE, "{\"type\":\"notice\",\"seconds\":30}" },
	{ SD_MSG_CHECKPOINT, "{\"type\":\"checkpoint\"}" },
	{ SD_MSG_PAUSE, "{\"type\":\"pause\"}" },
	{ SD_MSG_READY, "{\"type\":\"ready\"}" },
	{ SD_MSG_HEARTBEAT, "{\"type\":\"heartbeat\"}" },
	{ SD_MSG_ABORT, "{\"type\":\"abort\",\"generation\":4}" },
	{ SD_MSG_CLOUD_NOTICE, "{\"type\":\"cloud_notice\",\"source\":\"aws\",\"event\":\"instance-action\","
	                       "\"seconds\":118.5,\"deadline\":\"2026-12-02T03:00:00Z\"}" },
	{ SD_MSG_CLOUD_WARNING, "{\"type\":\"cloud_warning\",\"source\":\"aws\",\"event\":\"rebalance\"}" },
	{ SD_MSG_MODEL_GET, "{\"type\":\"model_get\",\"sha256\":\"" SHA_A "\"}" },
	{ SD_MSG_MODEL_CHUNK, "{\"type\":\"model_chunk\",\"sha256\":\"" SHA_A "\",\"offset\":0,"
	                      "\"total\":4,\"data\":\"deadbeef\"}" },
};

#define NVALID (sizeof valid_cases / sizeof valid_cases[0])

static void test_type_names(void)
{
	CHECK_INT(NVALID, SD_MSG__COUNT);
	for (int t = 0; t < SD_MSG__COUNT; t++) {
		enum sd_msg_type back;
		CHECK(strcmp(sd_msg_type_name((enum sd_msg_type)t), "?") != 0);
		CHECK_INT(sd_msg_type_parse(sd_msg_type_name((enum sd_msg_type)t), &back), 0);
		CHECK_INT(back, t);
	}
	CHECK_STR(sd_msg_type_name(SD_MSG_KV_SET), "kv_set");
	CHECK_STR(sd_msg_type_name(SD_MSG_COMM_FAILED), "comm_failed");
	CHECK_STR(sd_msg_type_name(SD_MSG__COUNT), "?");
	CHECK(sd_msg_new(SD_MSG__COUNT) == NULL);
}

static void test_decode_valid(void)
{
	for (size_t i = 0; i < NVALID; i++) {
		enum sd_msg_type t = SD_MSG__COUNT;
		cJSON *obj = NULL;
		char *why = NULL;
		const char *line = valid_cases[i].line;
		int rc = sd_msg_decode(line, strlen(line), &t, &obj, &why);
		if (rc != 0)
			fprintf(stderr, "valid case %zu: %s\n", i, why ? why : "?");
		CHECK_INT(rc, 0);
		CHECK_INT(t, valid_cases[i].type);
		CHECK(obj != NULL);
		CHECK(why == NULL);
		cJSON_Delete(obj);
		free(why);
	}

	/* Getters on a decoded step. */
	enum sd_msg_type t;
	cJSON *obj = NULL;
	char *why = NULL;
	const char *line = valid_cases[SD_MSG_STEP].line;
	CHECK_INT(sd_msg_decode(line, strlen(line), &t, &obj, &why), 0);
	CHECK_INT(sd_msg_int(obj, "step", -1), 121);
	CHECK_INT(sd_msg_int(obj, "loss_sum", -1), -1);   /* not integral */
	CHECK_INT(sd_msg_int(obj, "nope", -5), -5);
	CHECK(sd_msg_num(obj, "loss_sum", 0) == 70.25);
	CHECK(sd_msg_num(obj, "step", 0) == 121);
	CHECK(sd_msg_num(obj, "type", -2) == -2);
	CHECK_STR(sd_msg_str(obj, "type", NULL), "step");
	CHECK(sd_msg_str(obj, "step", NULL) == NULL);
	CHECK_STR(sd_msg_str(obj, "nope", "d"), "d");
	cJSON_Delete(obj);

	/* Extra fields are allowed; a trailing newline and CR are tolerated. */
	line = "{\"type\":\"stop\",\"reason\":\"x\",\"extra\":[1,2,{}]}\r\n";
	CHECK_INT(sd_msg_decode(line, strlen(line), &t, &obj, &why), 0);
	CHECK_INT(t, SD_MSG_STOP);
	cJSON_Delete(obj);

	/* Integers at the int64 limits. */
	line = "{\"type\":\"kv_get\",\"id\":-9223372036854775808,\"key\":\"k\"}";
	CHECK_INT(sd_msg_decode(line, strlen(line), &t, &obj, &why), 0);
	CHECK(sd_msg_int(obj, "id", 0) == (-9223372036854775807LL - 1));
	cJSON_Delete(obj);

	/* A key of exactly SD_PROTO_KEY_MAX bytes. */
	char key[SD_PROTO_KEY_MAX + 1];
	memset(key, 'k', SD_PROTO_KEY_MAX);
	key[SD_PROTO_KEY_MAX] = '\0';
	char buf[600];
	snprintf(buf, sizeof buf, "{\"type\":\"kv_get\",\"id\":1,\"key\":\"%s\"}", key);
	CHECK_INT(sd_msg_decode(buf, strlen(buf), &t, &obj, &why), 0);
	cJSON_Delete(obj);
	CHECK(why == NULL);
}

struct invalid_case {
	const char *line;
	const char *why;    /* the exact message */
};

static const struct invalid_case invalid_cases[] = {
	{ "", "invalid JSON at byte 1 (line ends early)" },
	{ "{\"type\":\"stop\",", "invalid JSON at byte 16 (line ends early)" },
	{ "{\"type\" \"stop\"}", "invalid JSON at byte 9" },
	{ "{\"type\":\"stop\",\"reason\":\"x\"} {}", "invalid JSON at byte 30" },
	{ "[1,2]", "message is not a JSON object" },
	{ "\"hello\"", "message is not a JSON object" },
	{ "{}", "message has no field 'type'" },
	{ "{\"reason\":\"x\"}", "message has no field 'type'" },
	{ "{\"type\":3}", "message field 'type' must be a string" },
	{ "{\"type\":\"foo\"}", "unknown message type 'foo'" },
	{ "{\"type\":\"Stop\",\"reason\":\"x\"}", "unknown message type 'Stop'" },
	{ "{\"type\":\"x\\ny\"}", "unknown message type 'x?y'" },
	{ "{\"type\":\"stop\"}", "stop: missing field 'reason'" },
	{ "{\"type\":\"stop\",\"reason\":null}", "stop: field 'reason' must be a string" },
	{ "{\"type\":\"step\",\"generation\":3,\"step\":121,\"rank\":0,\"samples\":32,"
	  "\"loss_sum\":\"70\",\"correct\":20,\"compute_ms\":12.5,\"comm_ms\":1.5,"
	  "\"images_per_sec\":2100.5}", "step: field 'loss_sum' must be a number" },
	{ "{\"type\":\"step\",\"generation\":3,\"step\":121,\"rank\":0,\"samples\":32,"
	  "\"loss_sum\":70,\"correct\":20,\"compute_ms\":12.5,\"comm_ms\":1.5}",
	  "step: missing field 'images_per_sec'" },
	{ "{\"type\":\"step\",\"generation\":3,\"step\":121,\"rank\":0,\"samples\":32,"
	  "\"loss_sum\":1e999,\"correct\":20,\"compute_ms\":12.5,\"comm_ms\":1.5,"
	  "\"images_per_sec\":1}", "step: field 'loss_sum' must be a finite number" },
	{ "{\"type\":\"joined\",\"generation\":3,\"step\":1.5}",
	  "joined: field 'step' must be an integer, got 1.5" },
	{ "{\"type\":\"joined\",\"generation\":3,\"step\":\"1\"}",
	  "joined: field 'step' must be an integer" },
	{ "{\"type\":\"joined\",\"generation\":3,\"step\":9223372036854775808}",
	  "joined: field 'step' must be an integer, got 9.2233720368547758e+18" },
	{ "{\"type\":\"joined\",\"generation\":-1,\"step\":0}",
	  "joined: field 'generation' must not be negative, got -1" },
	{ "{\"type\":\"hello\",\"version\":5,\"token\":\"t\",\"server_id\":\"s\",\"pid\":1}",
	  "hello: protocol version 5, this controller speaks 4" },
	{ "{\"type\":\"hello\",\"version\":3,\"token\":\"t\",\"server_id\":\"s\",\"pid\":1}",
	  "hello: protocol version 3, this controller speaks 4" },
	{ "{\"type\":\"hello\",\"version\":\"1\",\"token\":\"t\",\"server_id\":\"s\",\"pid\":1}",
	  "hello: field 'version' must be an integer" },
	{ "{\"type\":\"hello\",\"version\":4,\"token\":\"t\",\"server_id\":\"s\"}",
	  "hello: missing field 'pid'" },
	{ "{\"type\":\"welcome\",\"version\":0,\"worker_id\":\"w\",\"job\":{}}",
	  "welcome: protocol version 0, this worker speaks 4" },
	{ "{\"type\":\"welcome\",\"version\":4,\"worker_id\":\"w\",\"job\":[]}",
	  "welcome: field 'job' must be an object" },
	{ "{\"type\":\"generation\",\"generation\":3,\"rank\":-1,\"world_size\":2,"
	  "\"offset\":0,\"count\":32,\"members\":[]}",
	  "generation: field 'rank' must not be negative, got -1" },
	{ "{\"type\":\"generation\",\"generation\":3,\"rank\":2,\"world_size\":2,"
	  "\"offset\":0,\"count\":32,\"members\":[]}",
	  "generation: rank 2 is not below world_size 2" },
	{ "{\"type\":\"generation\",\"generation\":3,\"rank\":0,\"world_size\":0,"
	  "\"offset\":0,\"count\":32,\"members\":[]}",
	  "generation: rank 0 is not below world_size 0" },
	{ "{\"type\":\"generation\",\"generation\":3,\"rank\":0,\"world_size\":1,"
	  "\"offset\":-4,\"count\":32,\"members\":[]}",
	  "generation: field 'offset' must not be negative, got -4" },
	{ "{\"type\":\"generation\",\"generation\":3,\"rank\":0,\"world_size\":1,"
	  "\"offset\":0,\"count\":-1,\"members\":[]}",
	  "generation: field 'count' must not be negative, got -1" },
	{ "{\"type\":\"generation\",\"generation\":3,\"rank\":0,\"world_size\":-1,"
	  "\"offset\":0,\"count\":1,\"members\":[]}",
	  "generation: field 'world_size' must not be negative, got -1" },
	{ "{\"type\":\"generation\",\"generation\":3,\"rank\":0,\"world_size\":1,"
	  "\"offset\":0,\"count\":1,\"members\":{}}",
	  "generation: field 'members' must be an array" },
	{ "{\"type\":\"ckpt_chunk\",\"step\":1,\"offset\":9,\"total\":8,\"data\":\"\"}",
	  "ckpt_chunk: offset 9 is beyond total 8" },
	{ "{\"type\":\"notice\",\"seconds\":true}", "notice: field 'seconds' must be a number" },
	{ "{\"type\":\"model_get\",\"sha256\":\"abc\"}", "model_get: sha256 must be 64 hex digits" },
	{ "{\"type\":\"model_get\"}", "model_get: missing field 'sha256'" },
	{ "{\"type\":\"model_chunk\",\"sha256\":\"" SHA_A "\",\"offset\":5,\"total\":4,"
	  "\"data\":\"\"}", "model_chunk: offset 5 is beyond total 4" },
	{ "{\"type\":\"model_chunk\",\"sha256\":\"" SHA_A "x\",\"offset\":0,\"total\":4,"
	  "\"data\":\"\"}", "model_chunk: sha256 must be 64 hex digits" },
};

static void test_decode_invalid(void)
{
	for (size_t i = 0; i < sizeof invalid_cases / sizeof invalid_cases[0]; i++) {
		enum sd_msg_type t;
		cJSON *obj = (cJSON *)1;
		char *why = NULL;
		const char *line = invalid_cases[i].line;
		int rc = sd_msg_decode(line, strlen(line), &t, &obj, &why);
		CHECK_INT(rc, -1);
		CHECK(obj == NULL);
		if (!why || strcmp(why, invalid_cases[i].why) != 0) {
			fprintf(stderr, "invalid case %zu: %s\n  want: %s\n  got:  %s\n", i, line,
			        invalid_cases[i].why, why ? why : "(null)");
			check_failures++;
		}
		free(why);
	}

	enum sd_msg_type t;
	cJSON *obj;
	char *why = NULL;

	/* A NUL byte inside the line. */
	const char nul_line[] = "{\"type\":\"st\0op\",\"reason\":\"x\"}";
	CHECK_INT(sd_msg_decode(nul_line, sizeof nul_line - 1, &t, &obj, &why), -1);
	CHECK_STR(why, "invalid JSON at byte 12");

	/* The decoder uses len, not the NUL: a prefix of a valid line fails. */
	const char *stop = "{\"type\":\"stop\",\"reason\":\"x\"}";
	CHECK_INT(sd_msg_decode(stop, strlen(stop) - 1, &t, &obj, &why), -1);

	/* kv keys over 256 bytes. */
	char buf[700];
	char key[SD_PROTO_KEY_MAX + 2];
	memset(key, 'k', SD_PROTO_KEY_MAX + 1);
	key[SD_PROTO_KEY_MAX + 1] = '\0';
	snprintf(buf, sizeof buf, "{\"type\":\"kv_set\",\"key\":\"%s\",\"value\":\"\"}", key);
	CHECK_INT(sd_msg_decode(buf, strlen(buf), &t, &obj, &why), -1);
	CHECK_STR(why, "kv_set: key longer than 256 bytes (257)");
	snprintf(buf, sizeof buf, "{\"type\":\"kv_value\",\"id\":1,\"key\":\"%s\",\"value\":\"\"}",
	         key);
	CHECK_INT(sd_msg_decode(buf, strlen(buf), &t, &obj, &why), -1);
	CHECK_STR(why, "kv_value: key longer than 256 bytes (257)");

	/* An unknown type name is cut short in the message. */
	snprintf(buf, sizeof buf, "{\"type\":\"%s\"}", key);
	CHECK_INT(sd_msg_decode(buf, strlen(buf), &t, &obj, &why), -1);
	CHECK(why && strlen(why) < 100);
	CHECK(why && strstr(why, "...'") != NULL);

	/* Over the size limit. */
	size_t big = (size_t)SD_PROTO_LINE_MAX + 1;
	char *huge = malloc(big);
	memset(huge, ' ', big);
	CHECK_INT(sd_msg_decode(huge, big, &t, &obj, &why), -1);
	CHECK_STR(why, "line longer than 1048576 bytes");
	free(huge);

	/* Deep nesting is refused by cJSON's nesting limit, not the stack. */
	size_t depth = 100000;
	char *deep = malloc(depth * 2 + 32);
	size_t n = (size_t)sprintf(deep, "{\"type\":\"stop\",\"reason\":\"x\",\"a\":");
	for (size_t i = 0; i < depth; i++)
		deep[n++] = '[';
	CHECK_INT(sd_msg_decode(deep, n, &t, &obj, &why), -1);
	CHECK(why && strncmp(why, "invalid JSON at byte", 20) == 0);
	free(deep);
	free(why);
}

/* A model_chunk message for the receiver. */
static cJSON *chunk(const char *sha, long long off, long long total, const char *hex)
{
	cJSON *m = sd_msg_new(SD_MSG_MODEL_CHUNK);
	cJSON_AddStringToObject(m, "sha256", sha);
	cJSON_AddNumberToObject(m, "offset", (double)off);
	cJSON_AddNumberToObject(m, "total", (double)total);
	cJSON_AddStringToObject(m, "data", hex);
	return m;
}

/* Feeds one chunk; returns sd_model_rx_chunk's result, *why its message. */
static int feed(struct sd_model_rx *rx, const char *sha, long long off, long long total,
                const char *hex, char **why)
{
	cJSON *m = chunk(sha, off, total, hex);
	int r = sd_model_rx_chunk(rx, m, why);
	cJSON_Delete(m);
	return r;
}

/* The model file's receiver: a whole file in order is taken once its
 * SHA-256 is the welcome's; a corrupted byte, a lost, repeated or extra
 * chunk, another model's chunk or bad hex is refused with one line. */
static void test_model_rx(void)
{
	struct sd_model_rx rx;
	char *why = NULL;
	CHECK_INT(sd_model_rx_begin(&rx, SHA_A, 4, &why), 0);
	CHECK_INT(feed(&rx, SHA_A, 0, 4, "dead", &why), 0);
	CHECK_INT(feed(&rx, SHA_A, 2, 4, "beef", &why), 1);
	CHECK_INT(rx.len, 4);
	CHECK(memcmp(rx.buf, "\xde\xad\xbe\xef", 4) == 0);
	sd_model_rx_free(&rx);
	CHECK(rx.buf == NULL);

	/* One bit flipped in transit: the hash says so. */
	CHECK_INT(sd_model_rx_begin(&rx, SHA_A, 4, &why), 0);
	CHECK_INT(feed(&rx, SHA_A, 0, 4, "deadbeee", &why), -1);
	CHECK_STR(why, "model: the 4 bytes received have SHA-256 "
	          "a44999705f8ff5c1c57e4ac4ebe177f8f196705ff93d82ae44d1068e469d18e6, the welcome "
	          "named " SHA_A " (corrupted in transit)");
	sd_model_rx_free(&rx);

	/* The right bytes, but the welcome named another hash. */
	const char *sha_b = "00000000000000000000000000000000000000000000000000000000000000ff";
	CHECK_INT(sd_model_rx_begin(&rx, sha_b, 4, &why), 0);
	CHECK_INT(feed(&rx, sha_b, 0, 4, "deadbeef", &why), -1);
	CHECK(why && strstr(why, "SHA-256 " SHA_A ", the welcome named 0000") != NULL);
	/* Another model's chunk. */
	sd_model_rx_free(&rx);
	CHECK_INT(sd_model_rx_begin(&rx, sha_b, 4, &why), 0);
	CHECK_INT(feed(&rx, SHA_A, 0, 4, "dead", &why), -1);
	CHECK_STR(why, "model_chunk: for model 5f78c33274e43fa9..., the welcome named 0000000000000000...");
	sd_model_rx_free(&rx);

	/* A chunk lost (offset 2 first), repeated, past the end, of another
	 * total, not hex. */
	CHECK_INT(sd_model_rx_begin(&rx, SHA_A, 4, &why), 0);
	CHECK_INT(feed(&rx, SHA_A, 2, 4, "beef", &why), -1);
	CHECK_STR(why, "model_chunk: offset 2, expected 0 (a chunk lost or out of order)");
	CHECK_INT(feed(&rx, SHA_A, 0, 4, "dead", &why), 0);
	CHECK_INT(feed(&rx, SHA_A, 0, 4, "dead", &why), -1);
	CHECK_STR(why, "model_chunk: offset 0, expected 2 (a chunk lost or out of order)");
	CHECK_INT(feed(&rx, SHA_A, 2, 4, "beefbeef", &why), -1);
	CHECK_STR(why, "model_chunk at offset 2: 4 bytes run past the total 4");
	CHECK_INT(feed(&rx, SHA_A, 2, 6, "beef", &why), -1);
	CHECK_STR(why, "model_chunk: total 6 bytes, the welcome said 4");
	CHECK_INT(feed(&rx, SHA_A, 2, 4, "bexf", &why), -1);
	CHECK_STR(why, "model_chunk at offset 2: data is not hex");
	CHECK_INT(rx.len, 2);
	sd_model_rx_free(&rx);

	/* What the welcome says is checked too. */
	CHECK_INT(sd_model_rx_begin(&rx, "abc", 4, &why), -1);
	CHECK_STR(why, "welcome: model_sha256 must be 64 hex digits, got 'abc'");
	CHECK_INT(sd_model_rx_begin(&rx, SHA_A, 0, &why), -1);
	CHECK_STR(why, "welcome: model_bytes 0 is not 1 to 1073741824");
	CHECK_INT(sd_model_rx_begin(&rx, SHA_A, -1, &why), -1);
	/* Upper-case hex in the welcome is the same hash. */
	char upper[65];
	for (int i = 0; i < 65; i++)
		upper[i] = (char)(SHA_A[i] >= 'a' && SHA_A[i] <= 'f' ? SHA_A[i] - 32 : SHA_A[i]);
	CHECK_INT(sd_model_rx_begin(&rx, upper, 4, &why), 0);
	CHECK_INT(feed(&rx, SHA_A, 0, 4, "DEADBEEF", &why), 1);
	sd_model_rx_free(&rx);
	free(why);
}

static void test_round_trip(void)
{
	for (int ty = 0; ty < SD_MSG__COUNT; ty++) {
		/* Decode the sample, re-encode it, decode again: same text. */
		enum sd_msg_type t, t2;
		cJSON *obj = NULL, *obj2 = NULL;
		char *why = NULL;
		const char *line = valid_cases[ty].line;
		CHECK_INT(sd_msg_decode(line, strlen(line), &t, &obj, &why), 0);
		size_t len = 0;
		char *enc = sd_msg_encode(obj, &len);
		CHECK_INT(len, strlen(enc));
		CHECK(len > 0 && enc[len - 1] == '\n');
		CHECK(memchr(enc, '\n', len - 1) == NULL);
		CHECK_INT(len - 1, strlen(line));
		CHECK(memcmp(enc, line, len - 1) == 0);
		CHECK_INT(sd_msg_decode(enc, len, &t2, &obj2, &why), 0);
		CHECK_INT(t2, t);
		CHECK(cJSON_Compare(obj, obj2, 1));
		free(enc);
		cJSON_Delete(obj);
		cJSON_Delete(obj2);
		free(why);
	}

	/* Built with sd_msg_new, with strings that need escaping. */
	cJSON *m = sd_msg_new(SD_MSG_LOG);
	cJSON_AddStringToObject(m, "level", "warn");
	cJSON_AddStringToObject(m, "message", "a\nb\r\"c\"\\\t\x01 é");
	size_t len;
	char *enc = sd_msg_encode(m, &len);
	CHECK(memchr(enc, '\n', len - 1) == NULL);
	enum sd_msg_type t;
	cJSON *back = NULL;
	char *why = NULL;
	CHECK_INT(sd_msg_decode(enc, len - 1, &t, &back, &why), 0);
	CHECK_INT(t, SD_MSG_LOG);
	CHECK_STR(sd_msg_str(back, "message", NULL), "a\nb\r\"c\"\\\t\x01 é");
	cJSON_Delete(back);
	free(enc);
	cJSON_Delete(m);

	/* Numbers keep their value through the wire. */
	m = sd_msg_new(SD_MSG_STEP);
	cJSON_AddNumberToObject(m, "generation", 12);
	cJSON_AddNumberToObject(m, "step", 1LL << 40);
	cJSON_AddNumberToObject(m, "rank", 0);
	cJSON_AddNumberToObject(m, "samples", 64);
	cJSON_AddNumberToObject(m, "loss_sum", 147.375);
	cJSON_AddNumberToObject(m, "correct", 50);
	cJSON_AddNumberToObject(m, "compute_ms", 0.125);
	cJSON_AddNumberToObject(m, "comm_ms", 3);
	cJSON_AddNumberToObject(m, "images_per_sec", 1234.5);
	enc = sd_msg_encode(m, &len);
	CHECK_INT(sd_msg_decode(enc, len, &t, &back, &why), 0);
	CHECK_INT(sd_msg_int(back, "step", 0), 1LL << 40);
	CHECK(sd_msg_num(back, "loss_sum", 0) == 147.375);
	CHECK(sd_msg_num(back, "compute_ms", 0) == 0.125);
	cJSON_Delete(back);
	free(enc);
	cJSON_Delete(m);
	free(why);
}

/* ---- hex ---- */

static void test_hex(void)
{
	unsigned char bytes[256];
	for (int i = 0; i < 256; i++)
		bytes[i] = (unsigned char)i;
	char *hex = sd_hex_encode(bytes, sizeof bytes);
	CHECK_INT(strlen(hex), 512);
	CHECK(strncmp(hex, "000102", 6) == 0);
	CHECK(strcmp(hex + 506, "fdfeff") == 0);
	size_t len = 0;
	unsigned char *back = sd_hex_decode(hex, &len);
	CHECK(back != NULL);
	CHECK_INT(len, 256);
	CHECK(back && memcmp(back, bytes, 256) == 0);
	free(back);
	free(hex);

	hex = sd_hex_encode("", 0);
	CHECK_STR(hex, "");
	back = sd_hex_decode(hex, &len);
	CHECK(back != NULL);
	CHECK_INT(len, 0);
	free(back);
	free(hex);

	back = sd_hex_decode("DEADbeef", &len);
	CHECK(back && len == 4 && back[0] == 0xde && back[3] == 0xef);
	free(back);

	len = 99;
	CHECK(sd_hex_decode("abc", &len) == NULL);
	CHECK(sd_hex_decode("0g", &len) == NULL);
	CHECK(sd_hex_decode("g0", &len) == NULL);
	CHECK(sd_hex_decode("00 1", &len) == NULL);
	CHECK(sd_hex_decode("0x12", &len) == NULL);
	CHECK(sd_hex_decode("12\n", &len) == NULL);
	CHECK_INT(len, 99);
}

/* ---- tokens ---- */

static void test_token_equal(void)
{
	CHECK(sd_token_equal("0123456789abcdef", "0123456789abcdef"));
	CHECK(!sd_token_equal("0123456789abcdef", "0123456789abcdeF"));
	CHECK(!sd_token_equal("0123456789abcdef", "1123456789abcdef"));
	CHECK(!sd_token_equal("0123456789abcdef", "0123456789abcde"));
	CHECK(!sd_token_equal("0123456789abcdef", "0123456789abcdef0"));
	CHECK(!sd_token_equal("0123456789abcdef", ""));
	CHECK(!sd_token_equal("", "x"));
	CHECK(sd_token_equal("", ""));
	CHECK(!sd_token_equal("abc", "ab"));
	CHECK(!sd_token_equal("ab", "abc"));
}

static char tmpdir[4096];

/* Expects sd_token_read_file to fail on text with a message containing the
 * file name and want. */
static void expect_token_error(const char *text, size_t len, const char *want, int line)
{
	char *path = path_join(tmpdir, "bad.token");
	write_raw(path, text, len);
	char *token = (char *)1, *why = NULL;
	int rc = sd_token_read_file(path, &token, &why);
	if (rc != -1 || token != NULL || !why || !strstr(why, path) || !strstr(why, want)) {
		fprintf(stderr, "%s:%d: FAIL: token file error: want '%s', got rc %d '%s'\n",
		        __FILE__, line, want, rc, why ? why : "(null)");
		check_failures++;
	}
	free(why);
	free(path);
}

static void test_token_files(void)
{
	make_tmpdir(tmpdir, sizeof tmpdir, "sd-test-protocol.XXXXXX");

	/* Create, check the mode, read back. */
	char *path = path_join(tmpdir, "token");
	char *token = NULL, *why = NULL;
	CHECK_INT(sd_token_create_file(path, &token, &why), 0);
	CHECK(token && strlen(token) == 32);
	CHECK(token && strspn(token, "0123456789abcdef") == 32);
	struct stat st;
	CHECK_INT(stat(path, &st), 0);
	CHECK_INT(st.st_mode & 0777, 0600);
	char *read_back = NULL;
	CHECK_INT(sd_token_read_file(path, &read_back, &why), 0);
	CHECK(token && read_back && strcmp(token, read_back) == 0);
	free(read_back);
	/* A second one replaces the first, and differs from it. */
	char *token2 = NULL;
	CHECK_INT(sd_token_create_file(path, &token2, &why), 0);
	CHECK(token && token2 && strcmp(token, token2) != 0);
	CHECK_INT(sd_token_read_file(path, &read_back, &why), 0);
	CHECK(token2 && read_back && strcmp(token2, read_back) == 0);
	free(read_back);
	free(token);
	free(token2);
	unlink(path);
	free(path);
	CHECK(why == NULL);

	/* Trailing whitespace and further lines are ignored. */
	path = path_join(tmpdir, "ws.token");
	write_raw(path, "0123456789abcdef!~ \t\r\nsecond line\n", 34);
	CHECK_INT(sd_token_read_file(path, &read_back, &why), 0);
	CHECK_STR(read_back, "0123456789abcdef!~");
	free(read_back);
	/* No newline at all, exactly 256 chars. */
	char longest[SD_TOKEN_MAX + 2];
	memset(longest, 'z', sizeof longest);
	write_raw(path, longest, SD_TOKEN_MAX);
	CHECK_INT(sd_token_read_file(path, &read_back, &why), 0);
	CHECK(read_back && strlen(read_back) == SD_TOKEN_MAX);
	free(read_back);
	unlink(path);
	free(path);

	/* Errors, each naming the file. */
	path = path_join(tmpdir, "missing.token");
	token = (char *)1;
	CHECK_INT(sd_token_read_file(path, &token, &why), -1);
	CHECK(token == NULL);
	CHECK(why && strstr(why, path) && strstr(why, "No such file"));
	free(why);
	why = NULL;
	/* Creating in a directory that does not exist. */
	char *nodir = path_join(tmpdir, "no/such/dir/token");
	CHECK_INT(sd_token_create_file(nodir, &token, &why), -1);
	CHECK(why && strstr(why, nodir));
	free(why);
	why = NULL;
	free(nodir);
	free(path);

	expect_token_error("", 0, "must be 16 to 256 characters, got 0", __LINE__);
	expect_token_error("\n", 1, "got 0", __LINE__);
	expect_token_error("short\n", 6, "must be 16 to 256 characters, got 5", __LINE__);
	expect_token_error("0123456789abcde\n", 16, "got 15", __LINE__);
	expect_token_error("0123456789 abcdef\n", 18, "has a space", __LINE__);
	expect_token_error(" 0123456789abcdef\n", 18, "at position 1", __LINE__);
	expect_token_error("0123456789abcdef\x7f\n", 18, "non-printable", __LINE__);
	expect_token_error("0123456789abcdef\xc3\xa9\n", 19, "non-printable", __LINE__);
	expect_token_error("01234567\0009abcdef\n", 18, "NUL", __LINE__);
	expect_token_error(longest, SD_TOKEN_MAX + 1, "got 257", __LINE__);

	rm_tree(tmpdir);   /* token files and bad.token */
}

int main(void)
{
	test_framer_basic();
	test_framer_byte_by_byte();
	test_framer_many();
	test_framer_overflow();
	test_type_names();
	test_decode_valid();
	test_decode_invalid();
	test_round_trip();
	test_model_rx();
	test_hex();
	test_token_equal();
	test_token_files();
	return check_exit("test-protocol");
}
