/* src/run/control-proto.h - the messages of a run's control socket
 * (RUNDIR/control.sock; src/app/control.h is the server, src/app/attach.c
 * the client; doc/control-protocol.md the description for people).
 *
 * Newline-delimited JSON, one object per line, each with a string "type".
 *
 * Server to client:
 *   hello    {"type":"hello","protocol":1,"pid":N,"run_dir":S,"job":S,
 *             "started":S (ISO 8601 UTC),"clients":N,"read_only":B,
 *             "step":N,"total_steps":N,"world_size":N,"usd_spent":X,
 *             "ended":S ("" while the run runs)}
 *             first, at once on connect; what `spotdeck ls` reads.
 *   snapshot {"type":"snapshot","view":{full view, src/app/view-codec.h}}
 *   status   {"type":"status","view":{changes since the last status}}
 *   event    {"type":"event","event":{a journal event, spotdeck-journal(5)}}
 *   reply    {"type":"reply","id":N,"ok":B,"error":S (when !ok)}
 *   error    {"type":"error","error":S}   then the server hangs up
 *   bye      {"type":"bye","status":N,"ended":S}   the run ended
 * Client to server:
 *   hello    {"type":"hello","protocol":1,"want":"cockpit"|"journal"|"info",
 *             "read_only":B}
 *             cockpit: snapshot, then status and events; journal: events
 *             only (headless attach); info: nothing more (ls).
 *   command  {"type":"command","id":N,"line":S}  one line of the command
 *             table ("add 1", "quit"); answered by a reply with the same id
 *   detach   {"type":"detach"}   the server hangs up; the run goes on
 *
 * Limits: a client's line is at most SD_CONTROL_CLIENT_LINE_MAX bytes, the
 * server's at most SD_CONTROL_SERVER_LINE_MAX; a longer line, invalid JSON,
 * an unknown type or a message of the wrong direction is an error.  So is
 * a missing or mistyped field of the type (integers are JSON numbers >= 0
 * and at most 2^53; unknown extra fields are ignored), a protocol other
 * than SD_CONTROL_PROTOCOL in a hello, and a NUL (\u0000) in any string,
 * which C would read as the string's end. */
#ifndef SD_RUN_CONTROL_PROTO_H
#define SD_RUN_CONTROL_PROTO_H

#include <stddef.h>

#include <cJSON.h>

#include "src/proto/events.h"

#define SD_CONTROL_PROTOCOL 1
#define SD_CONTROL_CLIENT_LINE_MAX 4096         /* bytes, newline included */
#define SD_CONTROL_SERVER_LINE_MAX (16u << 20)  /* a snapshot of 256 servers fits */
#define SD_CONTROL_COMMAND_MAX 511              /* what the command table copies */

enum sd_control_type {
	SD_CONTROL_HELLO,
	SD_CONTROL_SNAPSHOT,
	SD_CONTROL_STATUS,
	SD_CONTROL_EVENT,
	SD_CONTROL_REPLY,
	SD_CONTROL_ERROR,
	SD_CONTROL_BYE,
	SD_CONTROL_COMMAND,
	SD_CONTROL_DETACH,
};

enum sd_control_want { SD_WANT_COCKPIT, SD_WANT_JOURNAL, SD_WANT_INFO };

/* One decoded message.  Pointers point into root, which the message owns. */
struct sd_control_msg {
	enum sd_control_type type;
	cJSON *root;
	/* hello (both ways) */
	int protocol;
	int read_only;
	enum sd_control_want want;      /* client's hello */
	/* server's hello: the figures `spotdeck ls` prints */
	long pid, clients, step, total_steps, world_size;
	double usd_spent;
	const char *run_dir, *job, *started, *ended;
	/* command, reply */
	long id;
	const char *line;               /* command: at most SD_CONTROL_COMMAND_MAX
	                                 * bytes, no control characters */
	int ok;
	const char *error;              /* reply (!ok), error */
	long status;                    /* bye */
	const cJSON *view;              /* snapshot, status: an object */
	struct sd_event event;          /* event: typed (src/proto/events.h), its
	                                 * fields the journal object; a type this
	                                 * build does not know is SD_EV_COUNT */
};

/* Decodes one line (without its newline; len bytes, need not be
 * NUL-terminated).  from_server: the line came from the server (a client
 * decodes), else from a client (the server decodes); each side accepts only
 * the other's types.  Returns 0 and fills m (free with
 * sd_control_msg_free), or -1 with *why (caller frees) saying what is wrong
 * in one line ("line 5000 bytes long, the limit is 4096", "not JSON",
 * "type 'foo' unknown", "command.line: expected a string of at most 511
 * bytes"); m is then empty. */
int sd_control_decode(const char *line, size_t len, int from_server, struct sd_control_msg *m,
                      char **why);
void sd_control_msg_free(struct sd_control_msg *m);

/* obj printed unformatted with a newline appended, in a new buffer (caller
 * frees); *len its length.  NULL when out of memory. */
char *sd_control_line(const cJSON *obj, size_t *len);

#endif
