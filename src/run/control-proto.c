/* src/run/control-proto.c - the control socket's messages (see
 * control-proto.h): one table of the fields each type must carry, checked
 * before anything reads them. */
#include "config.h"

#include "src/run/control-proto.h"

#include <stdlib.h>
#include <string.h>

#include "src/base/errors.h"
#include "src/base/json.h"

enum field_kind { K_INT, K_NUM, K_STR, K_BOOL, K_OBJ };

struct field {
	const char *name;
	enum field_kind kind;
	int optional;
};

struct msg_spec {
	const char *name;
	enum sd_control_type type;
	int from_server;            /* 1: the server sends it; 0: a client does */
	struct field fields[14];    /* ended by a NULL name */
};

/* Integers are sent as JSON numbers: every one here is >= 0 and at most
 * 2^53 (a double holds those exactly). */
static const struct msg_spec specs[] = {
	{ "hello", SD_CONTROL_HELLO, 1,
	  { { "protocol", K_INT, 0 }, { "pid", K_INT, 0 }, { "run_dir", K_STR, 0 },
	    { "job", K_STR, 0 }, { "started", K_STR, 0 }, { "clients", K_INT, 0 },
	    { "read_only", K_BOOL, 0 }, { "step", K_INT, 0 }, { "total_steps", K_INT, 0 },
	    { "world_size", K_INT, 0 }, { "usd_spent", K_NUM, 0 }, { "ended", K_STR, 0 },
	    { NULL, K_INT, 0 } } },
	{ "snapshot", SD_CONTROL_SNAPSHOT, 1, { { "view", K_OBJ, 0 }, { NULL, K_INT, 0 } } },
	{ "status", SD_CONTROL_STATUS, 1, { { "view", K_OBJ, 0 }, { NULL, K_INT, 0 } } },
	{ "event", SD_CONTROL_EVENT, 1, { { "event", K_OBJ, 0 }, { NULL, K_INT, 0 } } },
	{ "reply", SD_CONTROL_REPLY, 1,
	  { { "id", K_INT, 0 }, { "ok", K_BOOL, 0 }, { "error", K_STR, 1 }, { NULL, K_INT, 0 } } },
	{ "error", SD_CONTROL_ERROR, 1, { { "error", K_STR, 0 }, { NULL, K_INT, 0 } } },
	{ "bye", SD_CONTROL_BYE, 1,
	  { { "status", K_INT, 0 }, { "ended", K_STR, 0 }, { NULL, K_INT, 0 } } },
	{ "hello", SD_CONTROL_HELLO, 0,
	  { { "protocol", K_INT, 0 }, { "want", K_STR, 0 }, { "read_only", K_BOOL, 0 },
	    { NULL, K_INT, 0 } } },
	{ "command", SD_CONTROL_COMMAND, 0,
	  { { "id", K_INT, 0 }, { "line", K_STR, 0 }, { NULL, K_INT, 0 } } },
	{ "detach", SD_CONTROL_DETACH, 0, { { NULL, K_INT, 0 } } },
};

#define NSPECS (sizeof specs / sizeof specs[0])

static const struct msg_spec *find_spec(const char *type, int from_server, int *other_way)
{
	*other_way = 0;
	for (size_t i = 0; i < NSPECS; i++) {
		if (strcmp(specs[i].name, type) != 0)
			continue;
		if (specs[i].from_server == from_server)
			return &specs[i];
		*other_way = 1;
	}
	return NULL;
}

static int check_field(const cJSON *root, const char *type, const struct field *f, char **why)
{
	/* Integers are sent as JSON numbers: every one here is >= 0 and at
	 * most 2^53 (a double holds those exactly). */
	static const struct sd_json_rule rules[] = {
		[K_INT] = { SD_JSON_INT, SD_JSON_BOUNDED, 0, SD_JSON_INT_EXACT },
		[K_NUM] = { SD_JSON_NUM, 0, 0, 0 },
		[K_STR] = { SD_JSON_STR, 0, 0, 0 },
		[K_BOOL] = { SD_JSON_BOOL, 0, 0, 0 },
		[K_OBJ] = { SD_JSON_OBJ, 0, 0, 0 },
	};
	static const char *const expected[] = {
		[K_INT] = "an integer >= 0", [K_NUM] = "a finite number", [K_STR] = "a string",
		[K_BOOL] = "true or false", [K_OBJ] = "an object",
	};
	struct sd_json_rule r = rules[f->kind];
	if (f->optional)
		r.flags |= SD_JSON_OPTIONAL;
	enum sd_json_problem p = sd_json_field(root, f->name, &r, NULL, NULL);
	if (p == SD_JSON_OK)
		return 0;
	if (p == SD_JSON_MISSING)
		return sd_why(why, "%s: missing field '%s'", type, f->name);
	return sd_why(why, "%s.%s: expected %s", type, f->name, expected[f->kind]);
}

static long get_long(const cJSON *root, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, name);
	return cJSON_IsNumber(v) ? (long)v->valuedouble : 0;
}

static const char *get_str(const cJSON *root, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, name);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The checks across fields, and m filled from root. */
static int fill(struct sd_control_msg *m, const cJSON *root, const struct msg_spec *spec,
                char **why)
{
	const char *name = spec->name;
	m->type = spec->type;
	switch (spec->type) {
	case SD_CONTROL_HELLO:
		m->protocol = (int)get_long(root, "protocol");
		if (get_long(root, "protocol") != SD_CONTROL_PROTOCOL)
			return sd_why(why, "hello: protocol %ld, this %s speaks %d",
			              get_long(root, "protocol"), spec->from_server ? "client" : "run",
			              SD_CONTROL_PROTOCOL);
		m->read_only = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "read_only"));
		if (spec->from_server) {
			m->pid = get_long(root, "pid");
			m->clients = get_long(root, "clients");
			m->step = get_long(root, "step");
			m->total_steps = get_long(root, "total_steps");
			m->world_size = get_long(root, "world_size");
			m->usd_spent = cJSON_GetObjectItemCaseSensitive(root, "usd_spent")->valuedouble;
			m->run_dir = get_str(root, "run_dir");
			m->job = get_str(root, "job");
			m->started = get_str(root, "started");
			m->ended = get_str(root, "ended");
		} else {
			const char *want = get_str(root, "want");
			if (strcmp(want, "cockpit") == 0)
				m->want = SD_WANT_COCKPIT;
			else if (strcmp(want, "journal") == 0)
				m->want = SD_WANT_JOURNAL;
			else if (strcmp(want, "info") == 0)
				m->want = SD_WANT_INFO;
			else {
				char shown[48];
				sd_text_show(want, shown, sizeof shown);
				return sd_why(why, "hello.want: '%s' is none of cockpit, journal, info",
				              shown);
			}
		}
		return 0;
	case SD_CONTROL_SNAPSHOT:
	case SD_CONTROL_STATUS:
		m->view = cJSON_GetObjectItemCaseSensitive(root, "view");
		return 0;
	case SD_CONTROL_EVENT: {
		const cJSON *ev = cJSON_GetObjectItemCaseSensitive(root, "event");
		char *bad = NULL;
		if (sd_event_from_json(&m->event, ev, &bad) < 0) {
			free(bad);
			return sd_why(why, "event.event.type: expected a string");
		}
		return 0;
	}
	case SD_CONTROL_REPLY:
		m->id = get_long(root, "id");
		m->ok = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "ok"));
		m->error = get_str(root, "error");
		if (!m->ok && !m->error)
			return sd_why(why, "reply: missing field 'error' (ok is false)");
		return 0;
	case SD_CONTROL_ERROR:
		m->error = get_str(root, "error");
		return 0;
	case SD_CONTROL_BYE:
		m->status = get_long(root, "status");
		m->ended = get_str(root, "ended");
		return 0;
	case SD_CONTROL_COMMAND: {
		m->id = get_long(root, "id");
		m->line = get_str(root, "line");
		size_t n = strlen(m->line);
		if (n > SD_CONTROL_COMMAND_MAX)
			return sd_why(why, "command.line: expected a string of at most %d bytes, got %zu",
			              SD_CONTROL_COMMAND_MAX, n);
		for (size_t i = 0; i < n; i++) {
			unsigned char c = (unsigned char)m->line[i];
			if (c < 0x20 || c == 0x7f)
				return sd_why(why, "command.line: control character 0x%02x at byte %zu",
				              c, i + 1);
		}
		return 0;
	}
	case SD_CONTROL_DETACH:
		return 0;
	}
	return sd_why(why, "%s: unknown type", name);
}

int sd_control_decode(const char *line, size_t len, int from_server, struct sd_control_msg *m,
                      char **why)
{
	memset(m, 0, sizeof *m);
	size_t max = from_server ? SD_CONTROL_SERVER_LINE_MAX : SD_CONTROL_CLIENT_LINE_MAX;
	/* The limits count the newline, which the caller has cut. */
	if (len + 1 > max)
		return sd_why(why, "line %zu bytes long, the limit is %zu", len + 1, max);
	/* JSON has no place for a NUL byte, and cJSON would stop at one... */
	const char *nul = memchr(line, '\0', len);
	if (nul)
		return sd_why(why, "not JSON: a NUL byte at byte %zu", (size_t)(nul - line) + 1);
	/* ...nor should a string hold one (cJSON turns \u0000 into a NUL that
	 * would cut the string short, so a field could say one thing to this
	 * check and another to the reader).  Any backslash in valid JSON opens
	 * an escape inside a string, so pairing them left to right finds every
	 * escape without following the strings themselves. */
	for (size_t i = 0; i + 1 < len; i++) {
		if (line[i] != '\\')
			continue;
		if (line[i + 1] == 'u' && i + 5 < len && memcmp(line + i + 2, "0000", 4) == 0)
			return sd_why(why, "a NUL character (\\u0000) in a string at byte %zu", i + 1);
		i++;
	}
	size_t at;
	cJSON *root = sd_json_parse_whole(line, len, &at);
	if (!root) {
		if (at == SD_JSON_PARSE_OOM)
			return sd_why(why, "out of memory for a line of %zu bytes", len);
		return sd_why(why, "not JSON (at byte %zu)", at + 1);
	}
	if (!cJSON_IsObject(root)) {
		cJSON_Delete(root);
		return sd_why(why, "not a JSON object");
	}
	const cJSON *ty = cJSON_GetObjectItemCaseSensitive(root, "type");
	if (!cJSON_IsString(ty) || !ty->valuestring) {
		cJSON_Delete(root);
		return sd_why(why, ty ? "field 'type' is not a string" : "no field 'type'");
	}
	int other_way;
	const struct msg_spec *spec = find_spec(ty->valuestring, from_server, &other_way);
	if (!spec) {
		char shown[48];
		sd_text_show(ty->valuestring, shown, sizeof shown);
		cJSON_Delete(root);
		if (other_way)
			return sd_why(why, "type '%s' is sent by the %s, not the %s", shown,
			              from_server ? "client" : "run", from_server ? "run" : "client");
		return sd_why(why, "type '%s' unknown", shown);
	}
	for (const struct field *f = spec->fields; f->name; f++) {
		if (check_field(root, spec->name, f, why) < 0) {
			cJSON_Delete(root);
			return -1;
		}
	}
	m->root = root;
	if (fill(m, root, spec, why) < 0) {
		cJSON_Delete(root);
		memset(m, 0, sizeof *m);
		return -1;
	}
	return 0;
}

void sd_control_msg_free(struct sd_control_msg *m)
{
	cJSON_Delete(m->root);
	memset(m, 0, sizeof *m);
}

char *sd_control_line(const cJSON *obj, size_t *len)
{
	char *s = cJSON_PrintUnformatted(obj);
	if (!s)
		return NULL;
	size_t n = strlen(s);
	char *out = realloc(s, n + 2);
	if (!out) {
		free(s);
		return NULL;
	}
	out[n] = '\n';
	out[n + 1] = '\0';
	*len = n + 1;
	return out;
}
