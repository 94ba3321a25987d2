/* tests/fuzz/fuzz-protocol.c - fuzzes the line framer and the message decoder
 * (src/proto/protocol.c), and checks what they accept: an accepted line re-encodes
 * to one line that decodes to the same message, a refused one gets a one-line
 * message, a welcome's job either parses and round-trips or is refused.
 *
 * Built with -DSD_LIBFUZZER -fsanitize=fuzzer this is a libFuzzer target
 * (see src/proto/local.mk).  Otherwise main() runs a built-in corpus of valid
 * messages, each with 5,000 deterministic random mutations (bit flips, byte
 * replacements, truncations, insertions, duplicated and deleted chunks), so
 * `make check`, and CI's ASan+UBSan build of it, fuzzes on every run. */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/proto/job.h"
#include "src/proto/protocol.h"
#include "src/base/token.h"
#include "tests/check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_why(const char *why)
{
	FUZZ_ASSERT(why != NULL);
	FUZZ_ASSERT(why[0] != '\0');
	FUZZ_ASSERT(strchr(why, '\n') == NULL);
}

/* Everything a consumer does with a decoded message. */
static void use_message(enum sd_msg_type type, cJSON *obj)
{
	FUZZ_ASSERT((unsigned)type < SD_MSG__COUNT);
	FUZZ_ASSERT(strcmp(sd_msg_str(obj, "type", ""), sd_msg_type_name(type)) == 0);

	/* Re-encoding gives exactly one line that decodes to the same message. */
	size_t len = 0;
	char *line = sd_msg_encode(obj, &len);
	FUZZ_ASSERT(len > 0 && line[len - 1] == '\n' && strlen(line) == len);
	FUZZ_ASSERT(memchr(line, '\n', len - 1) == NULL);
	enum sd_msg_type t2;
	cJSON *obj2 = NULL;
	char *why = NULL;
	int rc = sd_msg_decode(line, len - 1, &t2, &obj2, &why);
	if (rc != 0)
		fprintf(stderr, "re-encoded line refused: %s\n%s", why ? why : "?", line);
	FUZZ_ASSERT(rc == 0);
	FUZZ_ASSERT(t2 == type);
	cJSON_Delete(obj2);
	free(line);

	/* The getters on whatever fields there are. */
	const cJSON *f;
	cJSON_ArrayForEach(f, obj) {
		if (!f->string)
			continue;
		(void)sd_msg_int(obj, f->string, 0);
		(void)sd_msg_num(obj, f->string, 0);
		(void)sd_msg_str(obj, f->string, NULL);
	}

	/* Payloads the receiver decodes from hex. */
	const char *hex = sd_msg_str(obj, type == SD_MSG_CKPT_CHUNK ? "data" : "value", NULL);
	if (hex) {
		size_t n = 0;
		unsigned char *bytes = sd_hex_decode(hex, &n);
		if (bytes) {
			FUZZ_ASSERT(n * 2 == strlen(hex));
			char *again = sd_hex_encode(bytes, n);
			FUZZ_ASSERT(strlen(again) == strlen(hex));
			free(again);
			free(bytes);
		}
	}

	if (type == SD_MSG_HELLO) {
		const char *token = sd_msg_str(obj, "token", "");
		FUZZ_ASSERT(sd_token_equal(token, token));
		FUZZ_ASSERT(sd_token_equal("0123456789abcdef", token) ==
		            (strcmp(token, "0123456789abcdef") == 0));
	}

	/* A worker configures itself from welcome.job. */
	if (type == SD_MSG_WELCOME) {
		struct sd_job *j = malloc(2 * sizeof *j);
		FUZZ_ASSERT(j != NULL);
		const cJSON *job = cJSON_GetObjectItemCaseSensitive(obj, "job");
		if (sd_job_from_json(&j[0], job, "welcome.job", &why) == 0) {
			cJSON *back = sd_job_to_json(&j[0]);
			FUZZ_ASSERT(sd_job_from_json(&j[1], back, "welcome.job", &why) == 0);
			FUZZ_ASSERT(sd_job_equal(&j[0], &j[1]));
			cJSON_Delete(back);
		} else {
			check_why(why);
		}
		free(j);
	}
	free(why);
}

static void decode_one(const char *line, size_t len)
{
	enum sd_msg_type type;
	cJSON *obj = NULL;
	char *why = NULL;
	if (sd_msg_decode(line, len, &type, &obj, &why) == 0) {
		FUZZ_ASSERT(obj != NULL && why == NULL);
		use_message(type, obj);
		cJSON_Delete(obj);
	} else {
		FUZZ_ASSERT(obj == NULL);
		check_why(why);
		free(why);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;

	/* The whole input as one line. */
	decode_one(text, size);

	/* Through the framer, in chunks whose size the first byte picks, with a
	 * small line limit so overflows happen too. */
	size_t chunk = size ? (size_t)data[0] % 17 + 1 : 1;
	struct sd_line_reader r;
	sd_line_reader_init(&r, 600);
	int closed = 0;
	for (size_t off = 0; off < size && !closed; off += chunk) {
		size_t n = size - off < chunk ? size - off : chunk;
		sd_line_reader_feed(&r, text + off, n);
		const char *line;
		size_t len;
		char *why = NULL;
		int rc;
		while ((rc = sd_line_reader_next(&r, &line, &len, &why)) == 1) {
			FUZZ_ASSERT(len < 600);
			FUZZ_ASSERT(line[len] == '\0');
			FUZZ_ASSERT(memchr(line, '\n', len) == NULL);
			decode_one(line, len);
		}
		if (rc < 0) {
			check_why(why);
			free(why);
			closed = 1;
		}
	}
	sd_line_reader_free(&r);

	/* The hex decoder and token comparison on the raw bytes. */
	char *s = malloc(size + 1);
	FUZZ_ASSERT(s != NULL);
	memcpy(s, data, size);
	s[size] = '\0';
	size_t n = 0;
	unsigned char *bytes = sd_hex_decode(s, &n);
	if (bytes) {
		char *hex = sd_hex_encode(bytes, n);
		FUZZ_ASSERT(strlen(hex) == strlen(s));
		for (size_t i = 0; hex[i]; i++)
			FUZZ_ASSERT(hex[i] == s[i] || hex[i] == (s[i] | 0x20));
		free(hex);
		free(bytes);
	}
	FUZZ_ASSERT(sd_token_equal(s, s));
	FUZZ_ASSERT(sd_token_equal(s, "0123456789abcdef") == (strcmp(s, "0123456789abcdef") == 0));
	FUZZ_ASSERT(sd_token_equal("0123456789abcdef", s) == (strcmp(s, "0123456789abcdef") == 0));
	free(s);
	return 0;
}

#ifndef SD_LIBFUZZER

/* ---- the built-in driver ---- */

/* The corpus speaks this build's protocol version (a literal went stale
 * when version 2 came). */
#define STR2(x) #x
#define STR(x) STR2(x)
#define PROTO_V STR(SD_PROTO_VERSION)

static const char *const corpus[] = {
	"{\"type\":\"hello\",\"version\":" PROTO_V ",\"token\":\"0123456789abcdef\",\"server_id\":\"sim-3\",\"pid\":4242}\n",
	"{\"type\":\"welcome\",\"version\":" PROTO_V ",\"worker_id\":\"w1\",\"job\":{\"model\":\"mlp\",\"epochs\":2,"
	"\"lr\":0.1,\"comm_timeout\":2.5,\"cluster\":[\"a\",\"b\"],\"seed\":7}}\n",
	"{\"type\":\"kv_set\",\"key\":\"g1/rank0\",\"value\":\"00ff10\"}\n",
	"{\"type\":\"kv_get\",\"id\":7,\"key\":\"g1/rank0\"}\n",
	"{\"type\":\"kv_value\",\"id\":7,\"key\":\"g1/rank0\",\"value\":\"abcdef\"}\n",
	"{\"type\":\"generation\",\"generation\":3,\"rank\":1,\"world_size\":2,\"offset\":32,\"count\":32,"
	"\"members\":[\"w1\",\"w2\"]}\n",
	"{\"type\":\"joined\",\"generation\":3,\"step\":120}\n",
	"{\"type\":\"step\",\"generation\":3,\"step\":121,\"rank\":0,\"samples\":32,\"loss_sum\":70.25,"
	"\"correct\":20,\"compute_ms\":12.5,\"comm_ms\":1.5,\"images_per_sec\":2100.5}\n",
	"{\"type\":\"comm_failed\",\"generation\":3,\"step\":121,\"reason\":\"timeout\"}\n",
	"{\"type\":\"leaving\",\"reason\":\"notice\",\"step\":122}\n",
	"{\"type\":\"ckpt_chunk\",\"step\":200,\"offset\":0,\"total\":4,\"data\":\"deadbeef\"}\n",
	"{\"type\":\"model_get\",\"sha256\":\"5f78c33274e43fa9de5659265c1d917e25c03722dcb0b8d27db8d5feaa813953\"}\n",
	"{\"type\":\"model_chunk\",\"sha256\":\"5f78c33274e43fa9de5659265c1d917e25c03722dcb0b8d27db8d5feaa813953\","
	"\"offset\":0,\"total\":4,\"data\":\"deadbeef\"}\n",
	"{\"type\":\"stop\",\"reason\":\"operator\"}\n",
	"{\"type\":\"error\",\"reason\":\"bad token\"}\n",
	"{\"type\":\"log\",\"level\":\"info\",\"message\":\"caf\\u00e9 \\\"q\\\" \\n\"}\n",
	"{\"type\":\"notice\",\"seconds\":30}\n",
	"{\"type\":\"checkpoint\"}\n",
	"{\"type\":\"pause\",\"x\":[]}\n",
	/* Several lines, CRLF, an empty line: the framer's cases. */
	"{\"type\":\"stop\",\"reason\":\"a\"}\r\n\n{\"type\":\"notice\",\"seconds\":1.5e1}\r\n"
	"{\"type\":\"joined\",\"generation\":0,\"step\":-1}",
};

#define NCORPUS (sizeof corpus / sizeof corpus[0])
#define MUTATIONS 5000
#define MAX_INPUT 4096

#define FUZZ_SEED 0x5d0f1e2a3b4c5d6eull

static const char *const tokens[] = {
	"1e999", "-1e999", "-1", "0", "1", "2", "-0", "1.5", "9223372036854775807",
	"9223372036854775808", "-9223372036854775809", "1e18", "null", "true", "false",
	"\"\"", "[]", "{}", "[[[[", "]]", "\\u0000", "\\ud800", "\\udfff\\ud800",
	"\\u00e9", "\n", "\r\n", "\r", "\"type\":", "\"hello\"", "\"welcome\"",
	"\"kv_set\"", "\"kv_get\"", "\"kv_value\"", "\"generation\"", "\"joined\"",
	"\"step\"", "\"comm_failed\"", "\"leaving\"", "\"ckpt_chunk\"", "\"stop\"",
	"\"error\"", "\"notice\"", "\"log\"", "\"checkpoint\"", "\"pause\"", "\"rank\":",
	"\"world_size\":", "\"version\":",
	"\"job\":", "\"key\":", "\"value\":", "\"epochs\":", "\"lr\":", "\"cluster\":",
	",\"x\":1", "\xc3\xa9", "\xed\xa0\x80",
};

#define NTOKENS (sizeof tokens / sizeof tokens[0])

#include "tests/fuzz/mutate.h"

int main(void)
{
	char *buf = malloc(MAX_INPUT);
	if (!buf)
		return 99;
	long runs = 0;
	for (size_t c = 0; c < NCORPUS; c++) {
		size_t base = strlen(corpus[c]);
		/* Unmutated, every message of the corpus is valid. */
		const char *nl = memchr(corpus[c], '\n', base);
		enum sd_msg_type type;
		cJSON *obj = NULL;
		char *why = NULL;
		if (sd_msg_decode(corpus[c], nl ? (size_t)(nl - corpus[c]) : base, &type, &obj,
		                  &why) != 0) {
			fprintf(stderr, "fuzz-protocol: corpus entry %zu refused: %s\n", c, why);
			return 1;
		}
		cJSON_Delete(obj);
		LLVMFuzzerTestOneInput((const uint8_t *)corpus[c], base);
		for (int m = 0; m < MUTATIONS; m++) {
			size_t len = mutate_copy(buf, corpus[c], base);
			LLVMFuzzerTestOneInput((const uint8_t *)buf, len);
			runs++;
		}
	}
	free(buf);
	printf("fuzz-protocol: %ld mutated inputs, no crash, invariants held\n", runs);
	return 0;
}

#endif
