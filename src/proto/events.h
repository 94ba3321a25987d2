/* src/proto/events.h - the types of the run's journal events
 * (RUNDIR/journal.jsonl, one JSON object per line, and --headless's
 * stdout; spotdeck(1), JOURNAL, says each one's fields).  The controller
 * and the providers name an event by this enum, so a misspelt type does not
 * compile, and sd_event_name gives the "type" string scripts see.
 *
 * Between modules an event travels as a struct sd_event: its type is the
 * enum, and whoever follows the run (the cockpit's view model, an attached
 * cockpit) picks a handler by that enum, never by comparing the "type"
 * string.  The JSON text is made in two places only: the journal writer
 * (src/controller/journal.c) and the control socket (src/run/control-server.c).
 * A reader of that text (the control socket's client, tests) gets the enum
 * back with sd_event_from_json, which uses sd_event_lookup.
 * tests/proto/test-events checks that the names are distinct, that spotdeck(1)
 * documents every one, and that sd_event_from_json reads them back. */
#ifndef SD_PROTO_EVENTS_H
#define SD_PROTO_EVENTS_H

#include <cJSON.h>

enum sd_event_type {
	/* the run */
	SD_EV_RUN_START, SD_EV_DONE, SD_EV_SIGNAL, SD_EV_ERROR, SD_EV_JOURNAL_RESUMED,
	SD_EV_COMMAND, SD_EV_HELP, SD_EV_AUTOPILOT,
	/* servers (the provider) */
	SD_EV_ACQUIRED, SD_EV_STATE, SD_EV_STARTED, SD_EV_NOTICE, SD_EV_REVOKED, SD_EV_RELEASED,
	SD_EV_SERVER_EXIT, SD_EV_STOCKOUT, SD_EV_ZONE_EXHAUSTED, SD_EV_PRICE, SD_EV_STORM_BEGIN,
	SD_EV_STORM_END, SD_EV_TRACE_SKIPPED, SD_EV_SWAP, SD_EV_SWAP_FAILED, SD_EV_CLOUD_WARNING,
	SD_EV_HOST_UNREACHABLE, SD_EV_HOST_BACK, SD_EV_CLOUD_CALL, SD_EV_ORPHAN, SD_EV_BILLED,
	/* workers */
	SD_EV_WORKER_CONNECTED, SD_EV_WORKER_READY, SD_EV_WORKER_JOINED, SD_EV_WORKER_LEAVING,
	SD_EV_WORKER_LEFT, SD_EV_WORKER_LOST, SD_EV_WORKER_UNRESPONSIVE, SD_EV_WORKER_LOG,
	SD_EV_JOB_ERROR, SD_EV_AUTH_FAILED, SD_EV_PROTOCOL_ERROR, SD_EV_WORKER_REFUSED,
	/* training */
	SD_EV_GENERATION, SD_EV_STEP, SD_EV_EPOCH, SD_EV_CHECKSUM, SD_EV_COMM_FAILED,
	SD_EV_CHECKPOINT, SD_EV_CHECKPOINT_FAILED, SD_EV_CHECKPOINT_INVALID, SD_EV_CHECKPOINT_STREAMED,
	SD_EV_MODEL_SENT,
	SD_EV_COUNT
};

/* The "type" string of event t ("run_start", ...); "?" outside the enum. */
const char *sd_event_name(enum sd_event_type t);

/* The event whose "type" is name, or -1 for a type this build does not
 * know (a newer journal's, say: readers skip it). */
int sd_event_lookup(const char *name);

/* One journal event as it is handed on after it was journaled.  type is
 * SD_EV_COUNT for a type this build does not know (a newer controller's,
 * seen through the control socket): handlers skip it. */
struct sd_event {
	enum sd_event_type type;
	double t;                  /* seconds since the run started ("t"); 0 when absent */
	const cJSON *fields;       /* the whole journal object, "type" and "t" included;
	                            * borrowed for the call, never NULL */
};

/* Reads obj (a journal line's object) into *ev, borrowing obj.  0, or -1
 * with *why (caller frees) when obj is not an object or has no string
 * "type".  An unknown type is not an error: ev->type is SD_EV_COUNT. */
int sd_event_from_json(struct sd_event *ev, const cJSON *obj, char **why);

#endif
