/* src/market/trace.c - parsing market trace files (see trace.h and
 * spotdeck-catalog(5), TRACE FILES).
 *
 * Each line is copied into a NUL-terminated buffer and handed to cJSON on
 * its own, so a bad line can be named by number and cannot swallow the next
 * one.  Events go into one growing array that is sorted once at the end.
 */
#include "src/market/trace.h"

#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/errors.h"
#include "src/base/file.h"
#include "src/base/json.h"

struct ctx {
	const char *file;
	int line;
	char **why;
};

/* "FILE:LINE: FIELD: MESSAGE", or "FILE:LINE: MESSAGE" when field is NULL;
 * returns -1. */
static int fail(const struct ctx *c, const char *field, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(const struct ctx *c, const char *field, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (field)
		return sd_why(c->why, "%s:%d: %s: %s", c->file, c->line, field, msg);
	return sd_why(c->why, "%s:%d: %s", c->file, c->line, msg);
}

/* A key as the FIELD of a message: bare when it is a plain identifier,
 * otherwise quoted and escaped like a value. */
static const char *key_name(const char *key, char *buf, size_t n)
{
	size_t len = strlen(key);
	bool plain = len > 0 && len <= 40;
	for (size_t i = 0; plain && i < len; i++) {
		char ch = key[i];
		plain = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
		        ch == '_' || ch == '-' || ch == '.';
	}
	if (plain)
		return key;
	return sd_json_quote(key, buf, n);
}

/* The first member called `key` (case-sensitive), or NULL. */
static const cJSON *member(const cJSON *obj, const char *key)
{
	for (const cJSON *it = obj->child; it; it = it->next)
		if (it->string && !strcmp(it->string, key))
			return it;
	return NULL;
}

/* Reads a finite number >= 0 (> 0 when `positive`) into *out.  A missing
 * optional member leaves *out alone. */
static int get_number(const struct ctx *c, const cJSON *obj, const char *key, bool required, bool positive,
                      double *out)
{
	const char *expect = positive ? "a number > 0" : "a number >= 0";
	const cJSON *v = member(obj, key);
	if (!v) {
		if (required)
			return fail(c, key, "missing (expected %s)", expect);
		return 0;
	}
	const struct sd_json_rule r = { SD_JSON_NUM, SD_JSON_BOUNDED | (positive ? SD_JSON_OPEN_LO : 0), 0,
	                                INFINITY };
	double x = 0;
	if (sd_json_check(v, &r, &x) != SD_JSON_OK) {
		char buf[80];
		return fail(c, key, "expected %s, got %s", expect, sd_json_describe(v, SD_JSON_BY_KIND, buf, sizeof buf));
	}
	*out = x + 0.0;  /* -0 becomes 0 */
	return 0;
}

/* Copies a required string into dst (cap bytes with the NUL).  Identifiers
 * (`ident`) may not contain white space: a simulator matches them against
 * ids that never do.  No string may hold control characters, so that a
 * command cannot smuggle a second line into the controller. */
static int get_string(const struct ctx *c, const cJSON *obj, const char *key, bool ident, char *dst, size_t cap)
{
	const cJSON *v = member(obj, key);
	char buf[80];
	if (!v)
		return fail(c, key, "missing (expected a non-empty string)");
	if (!cJSON_IsString(v) || !v->valuestring || !v->valuestring[0])
		return fail(c, key, "expected a non-empty string, got %s", sd_json_describe(v, SD_JSON_BY_KIND, buf, sizeof buf));
	const char *s = v->valuestring;
	size_t len = strlen(s);
	if (len >= cap)
		return fail(c, key, "%zu bytes long, at most %zu fit: %s", len, cap - 1, sd_json_quote(s, buf, sizeof buf));
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (ch < 0x20 || ch == 0x7f)
			return fail(c, key, "contains a control character: %s", sd_json_quote(s, buf, sizeof buf));
		if (ident && ch == ' ')
			return fail(c, key, "contains a space: %s", sd_json_quote(s, buf, sizeof buf));
	}
	memcpy(dst, s, len + 1);
	return 0;
}

/* ---- trace events ----------------------------------------------------- */

/* What each kind of event is called and reads, in a trace and in a
 * journal: a kind is looked up once by its name (the trace's "event" or the
 * journal's "type"), and its fields come from this table, not from a chain
 * of string compares.  Every kind reads one string (an identifier, except
 * an operator command, which has spaces) and at most one number; the
 * journal names its time and some numbers differently. */
struct kind_spec {
	const char *event;             /* the trace's "event" */
	const char *type;              /* the journal's "type" that replays as it */
	const char *journal_t;         /* the journal's key for its time */
	const char *str;               /* its string key (the same in both) */
	bool ident;                    /* the string is an identifier (no spaces) */
	size_t str_at, str_cap;        /* where it goes in sd_trace_event */
	const char *num, *journal_num; /* its number's key in each; NULL: none */
	bool num_required, num_positive;
	size_t num_at;
	double num_absent;             /* the number when an optional one is absent */
	bool journal_ok;               /* a journal line must carry "ok" (true or false) */
};

#define STR_FIELD(f) offsetof(struct sd_trace_event, f), sizeof(((struct sd_trace_event *)0)->f)
#define NUM_FIELD(f) offsetof(struct sd_trace_event, f)

static const struct kind_spec kinds[] = {
	[SD_TRACE_REVOKE] = { "revoke", "revoked", "market_time", "server", true, STR_FIELD(server), "notice",
	                      "notice_s", false, false, NUM_FIELD(seconds), -1, false },
	[SD_TRACE_STOCKOUT] = { "stockout", "zone_exhausted", "market_time", "zone", true, STR_FIELD(zone),
	                        "seconds", "seconds", true, false, NUM_FIELD(seconds), 0, false },
	[SD_TRACE_PRICE] = { "price", "price", "market_time", "offer", true, STR_FIELD(offer), "usd_per_hour",
	                     "usd_per_hour", true, true, NUM_FIELD(usd_per_hour), 0, false },
	/* Failed commands are replayed too: a refused add still took a server
	 * id and journaled a stockout, and must do so again. */
	[SD_TRACE_COMMAND] = { "command", "command", "t", "command", false, STR_FIELD(command), NULL, NULL,
	                       false, false, 0, 0, true },
};
#define NKINDS ((int)(sizeof kinds / sizeof kinds[0]))

/* The kind whose trace name (journal 0) or journal type (journal 1) is
 * NAME, or -1. */
static int kind_lookup(const char *name, bool journal)
{
	for (int k = 0; k < NKINDS; k++)
		if (!strcmp(name, journal ? kinds[k].type : kinds[k].event))
			return k;
	return -1;
}

/* Rejects keys the kind does not know and keys given twice (cJSON keeps
 * both, and silently using one of them would hide a mistake). */
static int check_keys(const struct ctx *c, const cJSON *obj, enum sd_trace_kind kind)
{
	const char *allowed[5] = { "t", "event", kinds[kind].str, kinds[kind].num, NULL };
	unsigned seen = 0;
	for (const cJSON *it = obj->child; it; it = it->next) {
		const char *key = it->string ? it->string : "";
		char buf[80];
		int i;
		for (i = 0; i < 5 && allowed[i]; i++)
			if (!strcmp(key, allowed[i]))
				break;
		if (i == 5 || !allowed[i]) {
			char known[96];
			size_t o = 0;
			for (int k = 0; k < 5 && allowed[k]; k++)
				o += (size_t)snprintf(known + o, sizeof known - o, "%s%s", k ? ", " : "", allowed[k]);
			return fail(c, key_name(key, buf, sizeof buf), "unknown key in a %s event (known: %s)",
			            kinds[kind].event, known);
		}
		if (seen & (1u << i))
			return fail(c, key, "given twice");
		seen |= 1u << i;
	}
	return 0;
}

/* Reads kind's time, string and number into *ev, under the trace's names
 * or (journal) the journal's. */
static int read_fields(const struct ctx *c, const cJSON *obj, enum sd_trace_kind kind, bool journal,
                       struct sd_trace_event *ev)
{
	const struct kind_spec *k = &kinds[kind];
	ev->kind = kind;
	const char *num = journal ? k->journal_num : k->num;
	double *dst = (double *)(void *)((char *)ev + k->num_at);
	if (num)
		*dst = k->num_absent;
	if (get_number(c, obj, journal ? k->journal_t : "t", true, false, &ev->t) < 0 ||
	    get_string(c, obj, k->str, k->ident, (char *)ev + k->str_at, k->str_cap) < 0)
		return -1;
	if (num && get_number(c, obj, num, k->num_required, k->num_positive, dst) < 0)
		return -1;
	return 0;
}

static int parse_event(const struct ctx *c, const cJSON *obj, const cJSON *evv, struct sd_trace_event *ev)
{
	char buf[80];
	if (!cJSON_IsString(evv) || !evv->valuestring)
		return fail(c, "event", "expected a string, got %s", sd_json_describe(evv, SD_JSON_BY_KIND, buf, sizeof buf));
	int kind = kind_lookup(evv->valuestring, false);
	if (kind < 0) {
		/* The name goes in single quotes; sd_json_quote() escapes anything odd. */
		sd_json_quote(evv->valuestring, buf, sizeof buf);
		buf[strlen(buf) - 1] = '\0';
		char known[96];
		size_t o = 0;
		for (int k = 0; k < NKINDS; k++)
			o += (size_t)snprintf(known + o, sizeof known - o, "%s%s", k ? ", " : "", kinds[k].event);
		return fail(c, "event", "unknown event '%s' (known: %s)", buf + 1, known);
	}
	if (check_keys(c, obj, (enum sd_trace_kind)kind) < 0)
		return -1;
	return read_fields(c, obj, (enum sd_trace_kind)kind, false, ev);
}

/* ---- journal lines ---------------------------------------------------- */

/* Turns a journal line into an event (1) or skips it (0): every type the
 * table does not name (including "stockout", a consequence of the market
 * rather than a cause). */
static int parse_journal(const struct ctx *c, const cJSON *obj, const cJSON *type, struct sd_trace_event *ev)
{
	char buf[80];
	if (!cJSON_IsString(type) || !type->valuestring)
		return fail(c, "type", "expected a string, got %s", sd_json_describe(type, SD_JSON_BY_KIND, buf, sizeof buf));
	int kind = kind_lookup(type->valuestring, true);
	if (kind < 0)
		return 0;
	if (kinds[kind].journal_ok) {
		const cJSON *ok = member(obj, "ok");
		if (!ok)
			return fail(c, "ok", "missing (expected true or false)");
		if (!cJSON_IsBool(ok))
			return fail(c, "ok", "expected true or false, got %s", sd_json_describe(ok, SD_JSON_BY_KIND, buf, sizeof buf));
	}
	return read_fields(c, obj, (enum sd_trace_kind)kind, true, ev) < 0 ? -1 : 1;
}

/* ---- lines and the file ----------------------------------------------- */

/* Parses one line (NUL-terminated, no newline) into *ev; returns 1 for an
 * event, 0 for a line without one, -1 on error. */
static int parse_line(const struct ctx *c, const char *line, struct sd_trace_event *ev)
{
	const char *p = line;
	while (*p == ' ' || *p == '\t')
		p++;
	if (!*p || *p == '#')
		return 0;
	const char *end = NULL;
	cJSON *obj = cJSON_ParseWithOpts(p, &end, 1);
	if (!obj)
		return fail(c, NULL, "invalid JSON");
	int rc;
	char buf[80];
	if (!cJSON_IsObject(obj)) {
		rc = fail(c, NULL, "expected a JSON object, got %s", sd_json_describe(obj, SD_JSON_BY_KIND, buf, sizeof buf));
	} else {
		memset(ev, 0, sizeof *ev);
		ev->line = c->line;
		const cJSON *evv = member(obj, "event");
		const cJSON *type = member(obj, "type");
		if (evv)
			rc = parse_event(c, obj, evv, ev) < 0 ? -1 : 1;
		else if (type)
			rc = parse_journal(c, obj, type, ev);
		else
			rc = fail(c, "event", "missing (a trace event needs \"event\", a journal line \"type\")");
	}
	cJSON_Delete(obj);
	return rc;
}

/* Orders by t, then by line, which makes qsort stable: every event comes
 * from its own line. */
static int cmp_event(const void *a, const void *b)
{
	const struct sd_trace_event *x = a, *y = b;
	if (x->t != y->t)
		return x->t < y->t ? -1 : 1;
	return (x->line > y->line) - (x->line < y->line);
}

int sd_trace_parse(struct sd_trace *out, const char *text, size_t len, const char *file, char **why)
{
	memset(out, 0, sizeof *out);
	struct ctx c = { .file = file ? file : "trace", .line = 0, .why = why };
	if (len > SD_TRACE_MAX_BYTES)
		return sd_why(why, "%s: larger than %u MiB", c.file, SD_TRACE_MAX_BYTES >> 20);
	if (!text && len)
		return sd_why(why, "%s: no text", c.file);
	/* A UTF-8 byte-order mark is what some editors put first; skip it. */
	size_t pos = 0;
	if (len >= 3 && !memcmp(text, "\xef\xbb\xbf", 3))
		pos = 3;

	struct sd_trace_event *events = NULL;
	int n = 0, cap = 0;
	char *line = NULL;
	size_t line_cap = 0;
	int rc = 0;
	while (pos < len) {
		c.line++;
		const char *s = text + pos;
		const char *nl = memchr(s, '\n', len - pos);
		size_t ll = nl ? (size_t)(nl - s) : len - pos;
		pos += ll + (nl ? 1 : 0);
		if (ll && s[ll - 1] == '\r')
			ll--;
		if (memchr(s, '\0', ll)) {
			rc = fail(&c, NULL, "invalid JSON (a NUL byte)");
			break;
		}
		if (ll + 1 > line_cap) {
			free(line);
			line_cap = ll + 1 > 4096 ? ll + 1 : 4096;
			line = sd_malloc(line_cap);
		}
		memcpy(line, s, ll);
		line[ll] = '\0';
		if (n == cap) {
			if (cap == SD_TRACE_MAX_EVENTS) {
				/* Only an error if this line really is one more event. */
				struct sd_trace_event probe;
				rc = parse_line(&c, line, &probe);
				if (rc > 0)
					rc = fail(&c, NULL, "more than %d events", SD_TRACE_MAX_EVENTS);
				if (rc < 0)
					break;
				continue;
			}
			cap = cap ? (cap > SD_TRACE_MAX_EVENTS / 2 ? SD_TRACE_MAX_EVENTS : cap * 2) : 64;
			struct sd_trace_event *grown = realloc(events, (size_t)cap * sizeof *events);
			if (!grown)
				sd_oom();
			events = grown;
		}
		rc = parse_line(&c, line, &events[n]);
		if (rc < 0)
			break;
		n += rc;
		rc = 0;
	}
	free(line);
	if (rc < 0) {
		free(events);
		return -1;
	}
	if (n > 1)
		qsort(events, (size_t)n, sizeof *events, cmp_event);
	out->events = events;
	out->n = n;
	out->file = strdup(c.file);
	if (!out->file)
		sd_oom();
	return 0;
}

int sd_trace_load(struct sd_trace *out, const char *path, char **why)
{
	memset(out, 0, sizeof *out);
	char *buf;
	size_t n;
	if (sd_read_file(path, SD_TRACE_MAX_BYTES, &buf, &n, why) < 0)
		return -1;
	int rc = sd_trace_parse(out, buf, n, path, why);
	free(buf);
	return rc;
}

void sd_trace_free(struct sd_trace *t)
{
	if (!t)
		return;
	free(t->events);
	free(t->file);
	t->events = NULL;
	t->file = NULL;
	t->n = 0;
}
