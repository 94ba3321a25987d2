/* src/market/trace.h - market trace files: the scripted events that drive a
 * deterministic simulated-market run (format in spotdeck-catalog(5),
 * section TRACE FILES).
 *
 * A trace is JSON lines: one object per line; blank lines and lines whose
 * first non-blank character is '#' are skipped, a trailing CR is ignored and
 * a UTF-8 byte-order mark at the start of the file is skipped.  A line is
 * either
 *   - a trace event, with the key "event":
 *       {"t": 12.5, "event": "revoke", "server": "s2", "notice": 3}
 *       {"t": 30, "event": "stockout", "zone": "us-east1-c", "seconds": 60}
 *       {"t": 40, "event": "price", "offer": "gce/us-west1-b/k80/spot", "usd_per_hour": 0.31}
 *       {"t": 5, "event": "command", "command": "add gce/us-west1-b/k80/spot"}
 *     whose keys are checked strictly (an unknown key is an error), or
 *   - a line of a spotdeck journal (the key "type"; what `spotdeck
 *     --headless` prints), so a simulated run's journal replays as a trace:
 *       "command" (ok or not)       -> SD_TRACE_COMMAND at its "t" (a
 *                                      refused add still took a server id)
 *       "zone_exhausted"            -> SD_TRACE_STOCKOUT at "market_time"
 *       "revoked"                   -> SD_TRACE_REVOKE at "market_time",
 *                                      notice "notice_s" (optional)
 *       "price"                     -> SD_TRACE_PRICE at "market_time"
 *       anything else (including "stockout", a consequence of the market
 *       rather than a cause)        -> skipped
 *     Journal lines may carry any other keys; only those read are checked.
 *
 * Units: times in seconds of market time since the start of the run (for
 * journal "command" lines, the journal's "t"); prices in USD per hour per
 * server.
 *
 * Meaning of each kind (what a simulator replaying the trace must do):
 *   SD_TRACE_REVOKE    server `server` is taken by the provider at t, after a
 *                      notice of `seconds` (< 0: the offer's notice_seconds)
 *                      that therefore begins at t - seconds; this is what a
 *                      journal "revoked" line records (market_time is when
 *                      the server went, notice_s how long its notice was).
 *   SD_TRACE_STOCKOUT  no launch in zone `zone` succeeds in [t, t + seconds).
 *   SD_TRACE_PRICE     offer `offer` costs `usd_per_hour` from t on.
 *   SD_TRACE_COMMAND   the operator command `command` is run at t.
 * Fields a kind does not use are "" or 0.
 */
#ifndef SD_MARKET_TRACE_H
#define SD_MARKET_TRACE_H

#include <stddef.h>

/* Trace files larger than this are refused by sd_trace_load and
 * sd_trace_parse. */
#define SD_TRACE_MAX_BYTES (64u << 20)
/* At most this many events (about 120 MiB of struct sd_trace_event), so that
 * a hostile file cannot make the parser allocate without bound. */
#define SD_TRACE_MAX_EVENTS 262144

enum sd_trace_kind { SD_TRACE_REVOKE, SD_TRACE_STOCKOUT, SD_TRACE_PRICE, SD_TRACE_COMMAND };

struct sd_trace_event {
	double t;                 /* market seconds since the run start, finite, >= 0 */
	enum sd_trace_kind kind;
	char server[32];          /* REVOKE: the server id, e.g. "s2" */
	char zone[64];            /* STOCKOUT: the provider zone, e.g. "us-east1-c" */
	char offer[96];           /* PRICE: the offer id, e.g. "gce/us-west1-b/k80/spot" */
	char command[256];        /* COMMAND: one operator command line */
	double seconds;           /* STOCKOUT: its length (>= 0); REVOKE: the notice
	                           * (>= 0, or < 0 = the offer's notice_seconds) */
	double usd_per_hour;      /* PRICE: the new price, finite, > 0 */
	int line;                 /* 1-based line in the file it came from */
};

/* Strings are NUL-terminated, non-empty and free of control characters;
 * server, zone and offer also contain no white space. */
struct sd_trace {
	struct sd_trace_event *events;  /* n events sorted by t; equal t keep file order */
	int n;
	char *file;                     /* the name used in messages */
};

/* Parses `len` bytes of `text` (need not be NUL-terminated; a NUL byte is an
 * error) into *out, naming the input `file` in messages (NULL: "trace").
 * *out owns everything it points to; release it with sd_trace_free().
 * Returns 0, or -1 with *why set to one malloc'd line (caller frees) of the
 * form "FILE:LINE: FIELD: problem" (FIELD is left out where the whole line
 * is wrong), e.g.
 *   trace.jsonl:3: t: expected a number >= 0, got "x"
 *   trace.jsonl:7: event: unknown event 'explode' (known: revoke, stockout, price, command)
 *   trace.jsonl:2: invalid JSON
 * Refused: invalid JSON, a line that is not an object, a line with neither
 * "event" nor "type", missing fields, values of the wrong type, t or seconds
 * < 0 or not finite, prices <= 0, strings empty, too long for their field or
 * with control characters, unknown or repeated keys in trace events, more
 * than SD_TRACE_MAX_EVENTS events, more than SD_TRACE_MAX_BYTES bytes.
 * On failure *out is left empty (sd_trace_free on it is harmless). */
int sd_trace_parse(struct sd_trace *out, const char *text, size_t len, const char *file, char **why);

/* Reads the file at `path` (at most SD_TRACE_MAX_BYTES) and parses it as
 * above, with `path` as the file name in messages.  Errors as above, plus
 * "PATH: cannot read: REASON" and "PATH: larger than 64 MiB". */
int sd_trace_load(struct sd_trace *out, const char *path, char **why);

/* Frees what *t owns and empties it; t may be NULL. */
void sd_trace_free(struct sd_trace *t);

#endif
