/* src/base/json.h - JSON values (cJSON, Debian libcjson-dev) checked against
 * a small rule, and shown in one-line error messages.
 *
 * The readers of JSON input (the worker protocol, the control socket's
 * messages, the job file, market catalogs and traces) check values with
 * sd_json_check and word the problem it returns in their own messages, so
 * the rule "what is an integer, in which bounds" is written once while
 * each file keeps the one-line errors its users and tests know.
 *
 * Numbers: cJSON holds every JSON number as a double, so an "integer" is a
 * number with no fraction; 1e999 parses as inf.  Integers that must be
 * exact keep within +-2^53 (SD_JSON_INT_EXACT), the doubles that hold every
 * integer (IEEE 754-2008, 3.6: 53-bit significand). */
#ifndef SD_BASE_JSON_H
#define SD_BASE_JSON_H

#include <stddef.h>

#include <cJSON.h>

#define SD_JSON_INT_EXACT 9007199254740992.0   /* 2^53 */

enum sd_json_kind {
	SD_JSON_INT,    /* a number with an integral value (inf counts as one out of any range) */
	SD_JSON_NUM,    /* a finite number */
	SD_JSON_STR,    /* a string */
	SD_JSON_BOOL,   /* true or false */
	SD_JSON_OBJ,    /* an object */
	SD_JSON_ARR,    /* an array */
};

/* sd_json_rule.flags */
#define SD_JSON_BOUNDED  1u   /* INT, NUM: the value must lie in lo..hi */
#define SD_JSON_OPEN_LO  2u   /* with BOUNDED: lo itself is out */
#define SD_JSON_OPEN_HI  4u   /* with BOUNDED: hi itself is out */
#define SD_JSON_OPTIONAL 8u   /* sd_json_field: a missing member is fine */

struct sd_json_rule {
	enum sd_json_kind kind;
	unsigned flags;
	double lo, hi;          /* with SD_JSON_BOUNDED */
};

/* What is wrong with a value, most basic first: a caller words each in its
 * own message. */
enum sd_json_problem {
	SD_JSON_OK = 0,
	SD_JSON_MISSING,        /* sd_json_field: no such member (and not optional) */
	SD_JSON_WRONG_TYPE,     /* not the kind of value the rule wants */
	SD_JSON_NOT_INTEGRAL,   /* INT: a number with a fraction, or NaN */
	SD_JSON_NOT_FINITE,     /* NUM: inf or -inf, or NaN */
	SD_JSON_OUT_OF_RANGE,   /* INT, NUM with SD_JSON_BOUNDED: outside lo..hi */
};

/* Checks v (NULL: SD_JSON_WRONG_TYPE) against r.  For INT and NUM, *num
 * (if num is not NULL) gets the value whenever v is a number, so a message
 * can show it. */
enum sd_json_problem sd_json_check(const cJSON *v, const struct sd_json_rule *r, double *num);

/* The number rules of r (INT, NUM) applied to d, a number read already
 * (from a raw item, or rounded to float first). */
enum sd_json_problem sd_json_check_number(double d, const struct sd_json_rule *r);

/* The member name of obj checked with sd_json_check; *item (if not NULL)
 * gets the member or NULL.  SD_JSON_MISSING when there is none, unless r
 * has SD_JSON_OPTIONAL (then SD_JSON_OK). */
enum sd_json_problem sd_json_field(const cJSON *obj, const char *name, const struct sd_json_rule *r,
                                   const cJSON **item, double *num);

/* Parses text (len bytes; a NUL byte inside is the caller's to refuse
 * first, with its own message) as one JSON value followed by nothing but
 * whitespace.  Returns the value (caller frees with cJSON_Delete), or NULL
 * with *at the 0-based offset of the byte where the text stops being JSON
 * (len when it ends early), or SD_JSON_PARSE_OOM when no copy of the text
 * could be allocated (cJSON checks what follows the value only in a
 * NUL-terminated copy). */
#define SD_JSON_PARSE_OOM ((size_t)-1)
cJSON *sd_json_parse_whole(const char *text, size_t len, size_t *at);

/* How sd_json_describe shows a value. */
enum sd_json_show {
	/* The JSON text as cJSON prints it: a job file's settings are short,
	 * and "got [\"sim\"]" tells the user what they typed. */
	SD_JSON_AS_TEXT,
	/* Arrays and objects by kind ("an array"), strings quoted with odd
	 * bytes as \xNN, numbers with 10 digits: catalogs and traces, whose
	 * values can be large. */
	SD_JSON_BY_KIND,
};

/* A one-line, printable description of v for "got ..." in an error
 * message, at most about 40 bytes of the value plus "..." when cut, in buf
 * (size n >= 48); returns buf or a constant string.  NULL is "nothing"; a
 * number beyond a double's range is "inf (beyond a double's range)"
 * (cJSON would print it as null, which the user did not type). */
const char *sd_json_describe(const cJSON *v, enum sd_json_show how, char *buf, size_t n);

/* s with quotes, at most 40 of its bytes, bytes that could break a
 * one-line message (controls, DEL, '"', '\\') as \xNN, "..." when cut; in
 * buf (size n >= 16).  Returns buf. */
const char *sd_json_quote(const char *s, char *buf, size_t n);

/* s for a message without quotes: at most 40 bytes, anything but
 * printable ASCII as '?', "..." when cut; in buf (size n >= 8).  Returns
 * buf. */
const char *sd_text_show(const char *s, char *buf, size_t n);

#endif
