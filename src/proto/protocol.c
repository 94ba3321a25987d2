/* src/proto/protocol.c - see protocol.h. */
#include "config.h"

#include "src/proto/protocol.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/base/errors.h"
#include "src/base/json.h"
#include "engine/train.h"

/* ---- messages ---- */

enum sd_field_kind { F_INT, F_NUM, F_STR, F_OBJ, F_ARR };

/* F_NONNEG: an int that must not be negative. */
#define F_NONNEG 1u

struct sd_field {
	const char *name;
	enum sd_field_kind kind;
	unsigned flags;
};

#define SD_MSG_FIELDS_MAX 9

struct sd_msg_spec {
	const char *name;
	struct sd_field fields[SD_MSG_FIELDS_MAX + 1];   /* { NULL } terminated */
};

static const struct sd_msg_spec sd_msg_specs[SD_MSG__COUNT] = {
	[SD_MSG_HELLO] = { "hello", {
		{ "version", F_INT, 0 }, { "token", F_STR, 0 }, { "server_id", F_STR, 0 },
		{ "pid", F_INT, 0 }, { NULL, 0, 0 } } },
	[SD_MSG_WELCOME] = { "welcome", {
		{ "version", F_INT, 0 }, { "worker_id", F_STR, 0 }, { "job", F_OBJ, 0 },
		{ NULL, 0, 0 } } },
	[SD_MSG_KV_SET] = { "kv_set", {
		{ "key", F_STR, 0 }, { "value", F_STR, 0 }, { NULL, 0, 0 } } },
	[SD_MSG_KV_GET] = { "kv_get", {
		{ "id", F_INT, 0 }, { "key", F_STR, 0 }, { NULL, 0, 0 } } },
	[SD_MSG_KV_VALUE] = { "kv_value", {
		{ "id", F_INT, 0 }, { "key", F_STR, 0 }, { "value", F_STR, 0 }, { NULL, 0, 0 } } },
	[SD_MSG_GENERATION] = { "generation", {
		{ "generation", F_INT, F_NONNEG }, { "rank", F_INT, F_NONNEG },
		{ "world_size", F_INT, F_NONNEG }, { "offset", F_INT, F_NONNEG },
		{ "count", F_INT, F_NONNEG }, { "members", F_ARR, 0 }, { NULL, 0, 0 } } },
	[SD_MSG_JOINED] = { "joined", {
		{ "generation", F_INT, F_NONNEG }, { "step", F_INT, 0 }, { NULL, 0, 0 } } },
	[SD_MSG_STEP] = { "step", {
		{ "generation", F_INT, F_NONNEG }, { "step", F_INT, 0 }, { "rank", F_INT, F_NONNEG },
		{ "samples", F_INT, 0 }, { "loss_sum", F_NUM, 0 }, { "correct", F_INT, 0 },
		{ "compute_ms", F_NUM, 0 }, { "comm_ms", F_NUM, 0 },
		{ "images_per_sec", F_NUM, 0 }, { NULL, 0, 0 } } },
	[SD_MSG_COMM_FAILED] = { "comm_failed", {
		{ "generation", F_INT, F_NONNEG }, { "step", F_INT, 0 }, { "reason", F_STR, 0 },
		{ NULL, 0, 0 } } },
	[SD_MSG_LEAVING] = { "leaving", {
		{ "reason", F_STR, 0 }, { "step", F_INT, 0 }, { NULL, 0, 0 } } },
	[SD_MSG_CKPT_CHUNK] = { "ckpt_chunk", {
		{ "step", F_INT, 0 }, { "offset", F_INT, F_NONNEG }, { "total", F_INT, F_NONNEG },
		{ "data", F_STR, 0 }, { NULL, 0, 0 } } },
	[SD_MSG_STOP] = { "stop", { { "reason", F_STR, 0 }, { NULL, 0, 0 } } },
	[SD_MSG_ERROR] = { "error", { { "reason", F_STR, 0 }, { NULL, 0, 0 } } },
	[SD_MSG_LOG] = { "log", {
		{ "level", F_STR, 0 }, { "message", F_STR, 0 }, { NULL, 0, 0 } } },
	[SD_MSG_NOTICE] = { "notice", { { "seconds", F_NUM, 0 }, { NULL, 0, 0 } } },
	/* controller -> rank 0: checkpoint after the current step (operator). */
	[SD_MSG_CHECKPOINT] = { "checkpoint", { { NULL, 0, 0 } } },
	/* controller -> workers: leave the generation at the next step boundary
	 * and wait for a new one (operator pause). */
	[SD_MSG_PAUSE] = { "pause", { { NULL, 0, 0 } } },
	/* worker -> controller: job loaded (datasets, model), can join a generation. */
	[SD_MSG_READY] = { "ready", { { NULL, 0, 0 } } },
	/* worker -> controller: still alive (a thread of its own sends it). */
	[SD_MSG_HEARTBEAT] = { "heartbeat", { { NULL, 0, 0 } } },
	/* controller -> members: give up on this generation (it failed). */
	[SD_MSG_ABORT] = { "abort", { { "generation", F_INT, F_NONNEG }, { NULL, 0, 0 } } },
	/* worker -> controller: the cloud's metadata service says this server
	 * goes (src/worker/notice-watch.h); the worker leaves at its next step
	 * boundary. */
	[SD_MSG_CLOUD_NOTICE] = { "cloud_notice", {
		{ "source", F_STR, 0 }, { "event", F_STR, 0 }, { "seconds", F_NUM, 0 }, { NULL, 0, 0 } } },
	/* worker -> controller: an earlier risk hint (AWS rebalance); it stays. */
	[SD_MSG_CLOUD_WARNING] = { "cloud_warning", {
		{ "source", F_STR, 0 }, { "event", F_STR, 0 }, { NULL, 0, 0 } } },
	/* worker -> controller: send me the model file with this SHA-256. */
	[SD_MSG_MODEL_GET] = { "model_get", { { "sha256", F_STR, 0 }, { NULL, 0, 0 } } },
	/* controller -> worker: a piece of the model file. */
	[SD_MSG_MODEL_CHUNK] = { "model_chunk", {
		{ "sha256", F_STR, 0 }, { "offset", F_INT, F_NONNEG }, { "total", F_INT, F_NONNEG },
		{ "data", F_STR, 0 }, { NULL, 0, 0 } } },
};

const char *sd_msg_type_name(enum sd_msg_type t)
{
	if ((unsigned)t >= SD_MSG__COUNT)
		return "?";
	return sd_msg_specs[t].name;
}

int sd_msg_type_parse(const char *name, enum sd_msg_type *t)
{
	for (int i = 0; i < SD_MSG__COUNT; i++) {
		if (strcmp(name, sd_msg_specs[i].name) == 0) {
			*t = (enum sd_msg_type)i;
			return 0;
		}
	}
	return -1;
}

/* Integers of the protocol fit int64_t: -2^63 is exact as a double, 2^63
 * is the first value out of range. */
static const struct sd_json_rule sd_int64_rule = {
	SD_JSON_INT, SD_JSON_BOUNDED | SD_JSON_OPEN_HI, -9223372036854775808.0, 9223372036854775808.0
};

/* Checks one field of a message of type name; 0 or -1 with *why. */
static int sd_msg_check_field(const cJSON *obj, const char *type, const struct sd_field *f,
                              char **why)
{
	static const enum sd_json_kind kinds[] = {
		[F_INT] = SD_JSON_INT, [F_NUM] = SD_JSON_NUM, [F_STR] = SD_JSON_STR,
		[F_OBJ] = SD_JSON_OBJ, [F_ARR] = SD_JSON_ARR,
	};
	static const char *const expected[] = {
		[F_INT] = "an integer", [F_NUM] = "a number", [F_STR] = "a string",
		[F_OBJ] = "an object", [F_ARR] = "an array",
	};
	struct sd_json_rule r = sd_int64_rule;
	r.kind = kinds[f->kind];
	if (r.kind != SD_JSON_INT)
		r.flags = 0;
	else if (f->flags & F_NONNEG)
		r.lo = 0;
	double d = 0;
	switch (sd_json_field(obj, f->name, &r, NULL, &d)) {
	case SD_JSON_OK:
		return 0;
	case SD_JSON_MISSING:
		return sd_why(why, "%s: missing field '%s'", type, f->name);
	case SD_JSON_WRONG_TYPE:
		return sd_why(why, "%s: field '%s' must be %s", type, f->name, expected[f->kind]);
	case SD_JSON_NOT_FINITE:
		return sd_why(why, "%s: field '%s' must be a finite number", type, f->name);
	case SD_JSON_OUT_OF_RANGE:
		/* Only a negative value inside int64_t is "negative"; anything
		 * beyond int64_t is no integer of ours at all. */
		if (d < 0 && d >= sd_int64_rule.lo)
			return sd_why(why, "%s: field '%s' must not be negative, got %lld",
			              type, f->name, (long long)d);
		break;
	case SD_JSON_NOT_INTEGRAL:
		break;
	}
	return sd_why(why, "%s: field '%s' must be an integer, got %.17g", type, f->name, d);
}

/* Whether s is a SHA-256 in hex: 64 hex digits. */
static int is_sha256(const char *s)
{
	size_t n = strlen(s);
	return n == 64 && strspn(s, "0123456789abcdefABCDEF") == 64;
}

/* The checks across fields, made once every field has the right type. */
static int sd_msg_check_semantics(const cJSON *obj, enum sd_msg_type t, char **why)
{
	const char *name = sd_msg_specs[t].name;
	switch (t) {
	case SD_MSG_HELLO:
	case SD_MSG_WELCOME: {
		long long v = sd_msg_int(obj, "version", -1);
		if (v != SD_PROTO_VERSION)
			return sd_why(why, "%s: protocol version %lld, this %s speaks %d", name, v,
			              t == SD_MSG_HELLO ? "controller" : "worker", SD_PROTO_VERSION);
		return 0;
	}
	case SD_MSG_KV_SET:
	case SD_MSG_KV_GET:
	case SD_MSG_KV_VALUE: {
		size_t n = strlen(sd_msg_str(obj, "key", ""));
		if (n > SD_PROTO_KEY_MAX)
			return sd_why(why, "%s: key longer than %d bytes (%zu)", name,
			              SD_PROTO_KEY_MAX, n);
		return 0;
	}
	case SD_MSG_GENERATION: {
		long long rank = sd_msg_int(obj, "rank", 0);
		long long world = sd_msg_int(obj, "world_size", 0);
		if (rank >= world)
			return sd_why(why, "generation: rank %lld is not below world_size %lld",
			              rank, world);
		return 0;
	}
	case SD_MSG_CKPT_CHUNK:
	case SD_MSG_MODEL_CHUNK: {
		long long off = sd_msg_int(obj, "offset", 0);
		long long total = sd_msg_int(obj, "total", 0);
		if (off > total)
			return sd_why(why, "%s: offset %lld is beyond total %lld", name, off, total);
		if (t == SD_MSG_MODEL_CHUNK && !is_sha256(sd_msg_str(obj, "sha256", "")))
			return sd_why(why, "%s: sha256 must be 64 hex digits", name);
		return 0;
	}
	case SD_MSG_MODEL_GET:
		if (!is_sha256(sd_msg_str(obj, "sha256", "")))
			return sd_why(why, "%s: sha256 must be 64 hex digits", name);
		return 0;
	default:
		return 0;
	}
}

int sd_msg_decode(const char *line, size_t len, enum sd_msg_type *type, cJSON **obj, char **why)
{
	*obj = NULL;
	if (len > SD_PROTO_LINE_MAX)
		return sd_why(why, "line longer than %u bytes", SD_PROTO_LINE_MAX);
	/* JSON has no place for a NUL byte, and cJSON would stop at one. */
	const char *nul = memchr(line, '\0', len);
	if (nul)
		return sd_why(why, "invalid JSON at byte %zu", (size_t)(nul - line) + 1);
	size_t at;
	cJSON *root = sd_json_parse_whole(line, len, &at);
	if (!root) {
		if (at == SD_JSON_PARSE_OOM)
			sd_oom();
		if (at >= len)
			return sd_why(why, "invalid JSON at byte %zu (line ends early)", at + 1);
		return sd_why(why, "invalid JSON at byte %zu", at + 1);
	}
	if (!cJSON_IsObject(root)) {
		cJSON_Delete(root);
		return sd_why(why, "message is not a JSON object");
	}
	const cJSON *ty = cJSON_GetObjectItemCaseSensitive(root, "type");
	if (!ty) {
		cJSON_Delete(root);
		return sd_why(why, "message has no field 'type'");
	}
	if (!cJSON_IsString(ty) || !ty->valuestring) {
		cJSON_Delete(root);
		return sd_why(why, "message field 'type' must be a string");
	}
	enum sd_msg_type t;
	if (sd_msg_type_parse(ty->valuestring, &t) < 0) {
		char shown[48];
		sd_text_show(ty->valuestring, shown, sizeof shown);
		cJSON_Delete(root);
		return sd_why(why, "unknown message type '%s'", shown);
	}
	const struct sd_msg_spec *spec = &sd_msg_specs[t];
	for (const struct sd_field *f = spec->fields; f->name; f++) {
		if (sd_msg_check_field(root, spec->name, f, why) < 0) {
			cJSON_Delete(root);
			return -1;
		}
	}
	if (sd_msg_check_semantics(root, t, why) < 0) {
		cJSON_Delete(root);
		return -1;
	}
	*type = t;
	*obj = root;
	return 0;
}

char *sd_msg_encode(const cJSON *obj, size_t *len)
{
	char *s = cJSON_PrintUnformatted(obj);
	if (!s)
		sd_oom();
	size_t n = strlen(s);
	char *line = realloc(s, n + 2);
	if (!line) {
		free(s);
		sd_oom();
	}
	line[n] = '\n';
	line[n + 1] = '\0';
	*len = n + 1;
	return line;
}

cJSON *sd_msg_new(enum sd_msg_type t)
{
	if ((unsigned)t >= SD_MSG__COUNT)
		return NULL;
	cJSON *obj = cJSON_CreateObject();
	if (!obj || !cJSON_AddStringToObject(obj, "type", sd_msg_specs[t].name))
		sd_oom();
	return obj;
}

long long sd_msg_int(const cJSON *obj, const char *field, long long dflt)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, field);
	if (sd_json_check(v, &sd_int64_rule, NULL) != SD_JSON_OK)
		return dflt;
	return (long long)v->valuedouble;
}

double sd_msg_num(const cJSON *obj, const char *field, double dflt)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, field);
	if (!cJSON_IsNumber(v))
		return dflt;
	return v->valuedouble;
}

const char *sd_msg_str(const cJSON *obj, const char *field, const char *dflt)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, field);
	if (!cJSON_IsString(v) || !v->valuestring)
		return dflt;
	return v->valuestring;
}


int sd_model_rx_begin(struct sd_model_rx *rx, const char *sha256, long long total, char **why)
{
	memset(rx, 0, sizeof *rx);
	if (!is_sha256(sha256))
		return sd_why(why, "welcome: model_sha256 must be 64 hex digits, got '%.80s'", sha256);
	if (total < 1 || total > SD_MODEL_WIRE_MAX)
		return sd_why(why, "welcome: model_bytes %lld is not 1 to %lld", total, SD_MODEL_WIRE_MAX);
	for (int i = 0; i < 64; i++)
		rx->sha256[i] = (char)tolower((unsigned char)sha256[i]);
	rx->total = (size_t)total;
	rx->buf = malloc(rx->total);
	if (!rx->buf)
		sd_oom();
	return 0;
}

int sd_model_rx_chunk(struct sd_model_rx *rx, const cJSON *chunk, char **why)
{
	const char *sha = sd_msg_str(chunk, "sha256", "");
	long long off = sd_msg_int(chunk, "offset", -1), total = sd_msg_int(chunk, "total", -1);
	if (!rx->buf)
		return sd_why(why, "model_chunk: none was asked for");
	if (strcasecmp(sha, rx->sha256))
		return sd_why(why, "model_chunk: for model %.16s..., the welcome named %.16s...", sha,
		              rx->sha256);
	if (total != (long long)rx->total)
		return sd_why(why, "model_chunk: total %lld bytes, the welcome said %zu", total, rx->total);
	if (off != (long long)rx->len)
		return sd_why(why, "model_chunk: offset %lld, expected %zu (a chunk lost or out of order)",
		              off, rx->len);
	size_t n;
	unsigned char *bytes = sd_hex_decode(sd_msg_str(chunk, "data", ""), &n);
	if (!bytes)
		return sd_why(why, "model_chunk at offset %lld: data is not hex", off);
	if (n > rx->total - rx->len) {
		free(bytes);
		return sd_why(why, "model_chunk at offset %lld: %zu bytes run past the total %zu", off, n,
		              rx->total);
	}
	memcpy(rx->buf + rx->len, bytes, n);
	rx->len += n;
	free(bytes);
	if (rx->len < rx->total)
		return 0;
	char got[65];
	if (sd_sha256_hex(rx->buf, rx->len, got, why) < 0)
		return -1;
	if (strcmp(got, rx->sha256))
		return sd_why(why, "model: the %zu bytes received have SHA-256 %s, the welcome named %s "
		              "(corrupted in transit)", rx->len, got, rx->sha256);
	return 1;
}

void sd_model_rx_free(struct sd_model_rx *rx)
{
	free(rx->buf);
	memset(rx, 0, sizeof *rx);
}
