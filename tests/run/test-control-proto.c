/* tests/run/test-control-proto.c - the control socket's messages
 * (src/run/control-proto.c): every type goes through sd_control_line and
 * back with its fields; each side refuses the other side's types; the line
 * limits hold to the byte; command lines are bounded and printable; ids are
 * integers >= 0; unknown types, bad JSON and missing or mistyped fields get
 * a one-line why. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/run/control-proto.h"
#include "tests/check.h"

/* obj as a line, decoded as coming from the server (from_server) or a
 * client; 0 or -1 with *why. */
static int round_trip(cJSON *obj, int from_server, struct sd_control_msg *m, char **why)
{
	size_t len = 0;
	char *line = sd_control_line(obj, &len);
	CHECK(line != NULL);
	CHECK(len > 0 && line[len - 1] == '\n' && strlen(line) == len);
	CHECK(memchr(line, '\n', len - 1) == NULL, "one line: %s", line);
	int rc = sd_control_decode(line, len - 1, from_server, m, why);
	free(line);
	cJSON_Delete(obj);
	return rc;
}

static cJSON *parse(const char *text)
{
	cJSON *o = cJSON_Parse(text);
	CHECK(o != NULL, "%s", text);
	return o;
}

/* Decodes text (no newline) and expects a refusal whose why holds want. */
static void refused(const char *text, size_t len, int from_server, const char *want)
{
	struct sd_control_msg m;
	char *why = NULL;
	int rc = sd_control_decode(text, len, from_server, &m, &why);
	check_report(rc == -1 && why && strstr(why, want) && !strchr(why, '\n') && !m.root,
	             "%s refused: %s", from_server ? "client" : "server", why ? why : "(accepted)");
	if (rc == 0)
		sd_control_msg_free(&m);
	free(why);
}

#define REFUSED(text, from_server, want) refused((text), strlen(text), (from_server), (want))

static void test_server_messages(void)
{
	struct sd_control_msg m;
	char *why = NULL;

	const char *hello = "{\"type\":\"hello\",\"protocol\":1,\"pid\":4242,\"run_dir\":\"/r/run-1\","
	                    "\"job\":\"cnn\",\"started\":\"2026-12-02T01:54:07Z\",\"clients\":2,"
	                    "\"read_only\":true,\"step\":120,\"total_steps\":2340,\"world_size\":3,"
	                    "\"usd_spent\":1.25,\"ended\":\"\"}";
	CHECK(round_trip(parse(hello), 1, &m, &why) == 0, "%s", why);
	CHECK_INT(m.type, SD_CONTROL_HELLO);
	CHECK_INT(m.protocol, 1);
	CHECK_INT(m.pid, 4242);
	CHECK_INT(m.clients, 2);
	CHECK_INT(m.read_only, 1);
	CHECK_INT(m.step, 120);
	CHECK_INT(m.total_steps, 2340);
	CHECK_INT(m.world_size, 3);
	CHECK(m.usd_spent == 1.25);
	CHECK_STR(m.run_dir, "/r/run-1");
	CHECK_STR(m.job, "cnn");
	CHECK_STR(m.started, "2026-12-02T01:54:07Z");
	CHECK_STR(m.ended, "");
	sd_control_msg_free(&m);
	CHECK(m.root == NULL);
	/* A client does not take the server's hello for its own. */
	REFUSED(hello, 0, "hello: missing field 'want'");

	CHECK(round_trip(parse("{\"type\":\"snapshot\",\"view\":{\"step\":1}}"), 1, &m, &why) == 0);
	CHECK_INT(m.type, SD_CONTROL_SNAPSHOT);
	CHECK(cJSON_IsObject(m.view) && cJSON_GetObjectItem(m.view, "step")->valuedouble == 1);
	sd_control_msg_free(&m);
	CHECK(round_trip(parse("{\"type\":\"status\",\"view\":{}}"), 1, &m, &why) == 0);
	CHECK_INT(m.type, SD_CONTROL_STATUS);
	CHECK(cJSON_IsObject(m.view));
	sd_control_msg_free(&m);
	CHECK(round_trip(parse("{\"type\":\"event\",\"event\":{\"type\":\"step\",\"step\":3}}"), 1,
	                 &m, &why) == 0);
	CHECK_INT(m.type, SD_CONTROL_EVENT);
	CHECK_STR(cJSON_GetObjectItem(m.event.fields, "type")->valuestring, "step");
	CHECK_INT(m.event.type, SD_EV_STEP);
	sd_control_msg_free(&m);
	/* A newer controller's event type is passed on, typed as unknown. */
	CHECK(round_trip(parse("{\"type\":\"event\",\"event\":{\"type\":\"newer\",\"t\":2.5}}"), 1,
	                 &m, &why) == 0);
	CHECK_INT(m.event.type, SD_EV_COUNT);
	CHECK(m.event.t == 2.5, "event.t %g, expected 2.5", m.event.t);
	sd_control_msg_free(&m);
	CHECK(round_trip(parse("{\"type\":\"reply\",\"id\":7,\"ok\":true}"), 1, &m, &why) == 0);
	CHECK_INT(m.type, SD_CONTROL_REPLY);
	CHECK_INT(m.id, 7);
	CHECK_INT(m.ok, 1);
	CHECK(m.error == NULL);
	sd_control_msg_free(&m);
	CHECK(round_trip(parse("{\"type\":\"reply\",\"id\":0,\"ok\":false,\"error\":\"no offer 9\"}"),
	                 1, &m, &why) == 0);
	CHECK_INT(m.ok, 0);
	CHECK_STR(m.error, "no offer 9");
	sd_control_msg_free(&m);
	CHECK(round_trip(parse("{\"type\":\"error\",\"error\":\"line too long\"}"), 1, &m, &why) == 0);
	CHECK_INT(m.type, SD_CONTROL_ERROR);
	CHECK_STR(m.error, "line too long");
	sd_control_msg_free(&m);
	CHECK(round_trip(parse("{\"type\":\"bye\",\"status\":0,\"ended\":\"finished\"}"), 1, &m,
	                 &why) == 0);
	CHECK_INT(m.type, SD_CONTROL_BYE);
	CHECK_INT(m.status, 0);
	CHECK_STR(m.ended, "finished");
	sd_control_msg_free(&m);

	/* Each needs its fields, typed. */
	REFUSED("{\"type\":\"snapshot\",\"view\":[]}", 1, "snapshot.view: expected an object");
	REFUSED("{\"type\":\"status\"}", 1, "status: missing field 'view'");
	REFUSED("{\"type\":\"event\",\"event\":{\"step\":3}}", 1, "event.event.type");
	REFUSED("{\"type\":\"reply\",\"id\":7,\"ok\":false}", 1, "reply: missing field 'error'");
	REFUSED("{\"type\":\"reply\",\"id\":7,\"ok\":1}", 1, "reply.ok: expected true or false");
	REFUSED("{\"type\":\"reply\",\"id\":-1,\"ok\":true}", 1, "reply.id: expected an integer >= 0");
	REFUSED("{\"type\":\"bye\",\"status\":\"0\",\"ended\":\"\"}", 1, "bye.status");
	REFUSED("{\"type\":\"error\"}", 1, "error: missing field 'error'");
	REFUSED("{\"type\":\"hello\",\"protocol\":1,\"pid\":1,\"run_dir\":\"r\",\"job\":\"j\","
	        "\"started\":\"s\",\"clients\":0,\"read_only\":false,\"step\":0,\"total_steps\":0,"
	        "\"world_size\":0,\"usd_spent\":\"free\",\"ended\":\"\"}", 1,
	        "hello.usd_spent: expected a finite number");
	REFUSED("{\"type\":\"hello\",\"protocol\":2,\"pid\":1,\"run_dir\":\"r\",\"job\":\"j\","
	        "\"started\":\"s\",\"clients\":0,\"read_only\":false,\"step\":0,\"total_steps\":0,"
	        "\"world_size\":0,\"usd_spent\":0,\"ended\":\"\"}", 1,
	        "hello: protocol 2, this client speaks 1");

	/* A client's types from the server. */
	REFUSED("{\"type\":\"command\",\"id\":1,\"line\":\"quit\"}", 1,
	        "type 'command' is sent by the client, not the run");
	REFUSED("{\"type\":\"detach\"}", 1, "type 'detach' is sent by the client");
}

static void test_client_messages(void)
{
	struct sd_control_msg m;
	char *why = NULL;
	static const struct { const char *want; enum sd_control_want w; } wants[] = {
		{ "cockpit", SD_WANT_COCKPIT }, { "journal", SD_WANT_JOURNAL }, { "info", SD_WANT_INFO },
	};
	for (size_t i = 0; i < sizeof wants / sizeof wants[0]; i++) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "type", "hello");
		cJSON_AddNumberToObject(o, "protocol", SD_CONTROL_PROTOCOL);
		cJSON_AddStringToObject(o, "want", wants[i].want);
		cJSON_AddBoolToObject(o, "read_only", i == 1);
		CHECK(round_trip(o, 0, &m, &why) == 0, "%s", why);
		CHECK_INT(m.type, SD_CONTROL_HELLO);
		CHECK_INT(m.want, wants[i].w);
		CHECK_INT(m.read_only, i == 1);
		CHECK_INT(m.protocol, 1);
		sd_control_msg_free(&m);
	}
	REFUSED("{\"type\":\"hello\",\"protocol\":1,\"want\":\"shell\",\"read_only\":false}", 0,
	        "hello.want: 'shell' is none of cockpit, journal, info");
	REFUSED("{\"type\":\"hello\",\"protocol\":3,\"want\":\"info\",\"read_only\":false}", 0,
	        "hello: protocol 3, this run speaks 1");
	REFUSED("{\"type\":\"hello\",\"protocol\":1,\"want\":\"info\"}", 0,
	        "hello: missing field 'read_only'");

	CHECK(round_trip(parse("{\"type\":\"command\",\"id\":12,\"line\":\"add 1\"}"), 0, &m,
	                 &why) == 0);
	CHECK_INT(m.type, SD_CONTROL_COMMAND);
	CHECK_INT(m.id, 12);
	CHECK_STR(m.line, "add 1");
	sd_control_msg_free(&m);
	CHECK(round_trip(parse("{\"type\":\"detach\"}"), 0, &m, &why) == 0);
	CHECK_INT(m.type, SD_CONTROL_DETACH);
	sd_control_msg_free(&m);

	/* The command line: at most 511 bytes, printable, an id >= 0. */
	char line[SD_CONTROL_COMMAND_MAX + 2];
	memset(line, 'a', sizeof line);
	line[SD_CONTROL_COMMAND_MAX] = '\0';
	cJSON *o = parse("{\"type\":\"command\",\"id\":1}");
	cJSON_AddStringToObject(o, "line", line);
	CHECK(round_trip(o, 0, &m, &why) == 0, "511 bytes: %s", why);
	CHECK_INT(strlen(m.line), SD_CONTROL_COMMAND_MAX);
	sd_control_msg_free(&m);
	line[SD_CONTROL_COMMAND_MAX] = 'a';
	line[SD_CONTROL_COMMAND_MAX + 1] = '\0';
	char text[1024];
	snprintf(text, sizeof text, "{\"type\":\"command\",\"id\":1,\"line\":\"%s\"}", line);
	REFUSED(text, 0, "command.line: expected a string of at most 511 bytes, got 512");
	REFUSED("{\"type\":\"command\",\"id\":1,\"line\":\"add 1\\nquit\"}", 0,
	        "command.line: control character 0x0a at byte 6");
	REFUSED("{\"type\":\"command\",\"id\":1,\"line\":\"add\\u007f\"}", 0, "control character 0x7f");
	REFUSED("{\"type\":\"command\",\"id\":1,\"line\":\"quit\\u0000add 8\"}", 0,
	        "a NUL character (\\u0000) in a string");
	/* ...but an escaped backslash before "u0000" is just text. */
	CHECK(round_trip(parse("{\"type\":\"command\",\"id\":1,\"line\":\"a\\\\u0000\"}"), 0, &m,
	                 &why) == 0, "%s", why);
	CHECK_STR(m.line, "a\\u0000");
	sd_control_msg_free(&m);
	REFUSED("{\"type\":\"command\",\"id\":-1,\"line\":\"quit\"}", 0,
	        "command.id: expected an integer >= 0");
	REFUSED("{\"type\":\"command\",\"id\":1.5,\"line\":\"quit\"}", 0, "command.id");
	REFUSED("{\"type\":\"command\",\"id\":\"1\",\"line\":\"quit\"}", 0, "command.id");
	REFUSED("{\"type\":\"command\",\"id\":1e300,\"line\":\"quit\"}", 0, "command.id");
	REFUSED("{\"type\":\"command\",\"id\":1,\"line\":5}", 0, "command.line: expected a string");

	/* The server's types from a client. */
	REFUSED("{\"type\":\"snapshot\",\"view\":{}}", 0, "type 'snapshot' is sent by the run, not the client");
	REFUSED("{\"type\":\"reply\",\"id\":1,\"ok\":true}", 0, "type 'reply' is sent by the run");
	REFUSED("{\"type\":\"bye\",\"status\":0,\"ended\":\"\"}", 0, "type 'bye' is sent by the run");
}

static void test_framing(void)
{
	/* Not JSON, not an object, no type, unknown type. */
	REFUSED("{\"type\":\"detach\"", 0, "not JSON");
	REFUSED("{\"type\":\"detach\"} {}", 0, "not JSON");
	REFUSED("", 0, "not JSON");
	REFUSED("[1,2]", 0, "not a JSON object");
	REFUSED("{\"id\":1}", 0, "no field 'type'");
	REFUSED("{\"type\":3}", 1, "field 'type' is not a string");
	REFUSED("{\"type\":\"foo\"}", 0, "type 'foo' unknown");
	REFUSED("{\"type\":\"\\u001b[2Jfoo\"}", 1, "type '?[2Jfoo' unknown");
	refused("{\"type\":\"detach\"}\0", 18, 0, "a NUL byte at byte 18");

	/* A client's line: 4096 bytes with its newline is the most. */
	struct sd_control_msg m;
	char *why = NULL;
	char *big = malloc(SD_CONTROL_CLIENT_LINE_MAX + 1);
	const char *head = "{\"type\":\"detach\",\"pad\":\"";
	size_t n = SD_CONTROL_CLIENT_LINE_MAX - 1;    /* the newline makes 4096 */
	memset(big, 'p', n);
	memcpy(big, head, strlen(head));
	memcpy(big + n - 2, "\"}", 2);
	CHECK(sd_control_decode(big, n, 0, &m, &why) == 0, "4095 + newline: %s", why);
	sd_control_msg_free(&m);
	memmove(big + 1, big, n);
	big[0] = ' ';
	refused(big, n + 1, 0, "line 4097 bytes long, the limit is 4096");
	/* The same line is fine from the server, whose limit is 16 MiB. */
	CHECK(sd_control_decode(big, n + 1, 1, &m, &why) == -1 && strstr(why, "sent by the client"),
	      "%s", why);
	free(why);
	why = NULL;
	free(big);
	big = malloc(SD_CONTROL_SERVER_LINE_MAX);
	memset(big, ' ', SD_CONTROL_SERVER_LINE_MAX);
	refused(big, SD_CONTROL_SERVER_LINE_MAX, 1, "line 16777217 bytes long, the limit is 16777216");
	free(big);

	/* sd_control_line: one line, whatever the strings hold. */
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "type", "error");
	cJSON_AddStringToObject(o, "error", "two\nlines\r\n and a \"quote\"");
	size_t len;
	char *line = sd_control_line(o, &len);
	CHECK(line && len == strlen(line) && line[len - 1] == '\n' && !memchr(line, '\n', len - 1));
	CHECK(sd_control_decode(line, len - 1, 1, &m, &why) == 0);
	CHECK_STR(m.error, "two\nlines\r\n and a \"quote\"");
	sd_control_msg_free(&m);
	free(line);
	cJSON_Delete(o);
}

int main(void)
{
	test_server_messages();
	test_client_messages();
	test_framing();
	return check_exit("test-control-proto");
}
