/* src/market/catalog.c - loading and validating market catalogs (see catalog.h and
 * spotdeck-catalog(5)).
 *
 * The parser walks the cJSON tree with a JSON path kept alongside, so every
 * error can say exactly which field is wrong.  Everything the catalog keeps is
 * copied into one arena, so freeing is one call and error paths leak nothing.
 */
#include "src/market/catalog.h"

#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "src/base/errors.h"
#include "src/base/json.h"
#include "src/market/market-model.h"

/* ---- arena ------------------------------------------------------------ */

struct sd_arena {
	struct sd_arena *next;
	size_t used, size;
	max_align_t data[];
};

static void *arena_alloc(struct sd_arena **head, size_t n)
{
	n = (n + 15) & ~(size_t)15;
	struct sd_arena *a = *head;
	if (!a || a->size - a->used < n) {
		size_t size = n > 65536 ? n : 65536;
		struct sd_arena *b = sd_malloc(sizeof *b + size);
		b->used = 0;
		b->size = size;
		b->next = a;
		*head = a = b;
	}
	void *p = (char *)a->data + a->used;
	a->used += n;
	memset(p, 0, n);
	return p;
}

static char *arena_strdup(struct sd_arena **head, const char *s)
{
	size_t n = strlen(s) + 1;
	char *p = arena_alloc(head, n);
	memcpy(p, s, n);
	return p;
}

static void arena_free(struct sd_arena *a)
{
	while (a) {
		struct sd_arena *next = a->next;
		free(a);
		a = next;
	}
}

/* ---- parse context: file name, JSON path, error ----------------------- */

struct ctx {
	const char *file;
	char **why;
	struct sd_arena *arena;
	char path[512];
	size_t plen;
};

/* Appends ".key" (or "key" at the root) to the path; returns the old length
 * for path_pop. */
static size_t path_key(struct ctx *c, const char *key)
{
	size_t old = c->plen;
	int n = snprintf(c->path + c->plen, sizeof c->path - c->plen, "%s%s", c->plen ? "." : "", key);
	if (n > 0)
		c->plen = strnlen(c->path, sizeof c->path - 1);
	return old;
}

static size_t path_index(struct ctx *c, int i)
{
	size_t old = c->plen;
	int n = snprintf(c->path + c->plen, sizeof c->path - c->plen, "[%d]", i);
	if (n > 0)
		c->plen = strnlen(c->path, sizeof c->path - 1);
	return old;
}

static void path_pop(struct ctx *c, size_t old)
{
	c->plen = old;
	c->path[old] = '\0';
}

/* "FILE: PATH: MESSAGE" (or "FILE: MESSAGE" at the root); returns -1. */
static int fail(struct ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct ctx *c, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (c->plen)
		return sd_why(c->why, "%s: %s: %s", c->file, c->path, msg);
	return sd_why(c->why, "%s: %s", c->file, msg);
}

/* Rejects keys not in `allowed` (NULL-terminated, at most 32) and keys given
 * twice. */
static int check_keys(struct ctx *c, const cJSON *obj, const char *const *allowed, const char *why_unknown)
{
	uint32_t seen = 0;
	for (const cJSON *it = obj->child; it; it = it->next) {
		int k = 0;
		while (allowed[k] && strcmp(allowed[k], it->string ? it->string : ""))
			k++;
		if (!allowed[k]) {
			char buf[128];
			static char empty[1];
			cJSON tmp = { .type = cJSON_String, .valuestring = it->string ? it->string : empty };
			return fail(c, "unknown key %s%s", sd_json_describe(&tmp, SD_JSON_BY_KIND, buf, sizeof buf), why_unknown ? why_unknown : "");
		}
		if (seen & (1u << k))
			return fail(c, "key \"%s\" appears twice", allowed[k]);
		seen |= 1u << k;
	}
	return 0;
}

static const cJSON *get(const cJSON *obj, const char *key)
{
	for (const cJSON *it = obj->child; it; it = it->next)
		if (it->string && !strcmp(it->string, key))
			return it;
	return NULL;
}

/* ---- typed getters: each pushes the key on the path while checking ---- */

static int need_object(struct ctx *c, const cJSON *v)
{
	char buf[80];
	if (!cJSON_IsObject(v))
		return fail(c, "expected an object, got %s", sd_json_describe(v, SD_JSON_BY_KIND, buf, sizeof buf));
	return 0;
}

static int get_object(struct ctx *c, const cJSON *obj, const char *key, bool required, const cJSON **out)
{
	*out = get(obj, key);
	if (!*out) {
		if (required)
			return fail(c, "missing \"%s\"", key);
		return 0;
	}
	size_t old = path_key(c, key);
	if (need_object(c, *out) < 0)
		return -1;
	path_pop(c, old);
	return 0;
}

static int get_array(struct ctx *c, const cJSON *obj, const char *key, bool required,
                     int min, int max, const cJSON **out, int *count)
{
	char buf[80];
	*out = get(obj, key);
	*count = 0;
	if (!*out) {
		if (required)
			return fail(c, "missing \"%s\"", key);
		return 0;
	}
	size_t old = path_key(c, key);
	if (!cJSON_IsArray(*out))
		return fail(c, "expected an array, got %s", sd_json_describe(*out, SD_JSON_BY_KIND, buf, sizeof buf));
	int n = 0;
	for (const cJSON *it = (*out)->child; it; it = it->next)
		if (++n > max)
			break;
	if (n < min || n > max) {
		if (min == max)
			return fail(c, "expected %d entries, got %d", min, n);
		if (n > max)
			return fail(c, "expected at most %d entries, got more", max);
		return fail(c, "expected at least %d %s, got %d", min, min == 1 ? "entry" : "entries", n);
	}
	*count = n;
	path_pop(c, old);
	return 0;
}

/* The five kinds of provenance a number may have (see spotdeck-catalog(5)). */
static bool is_source(const char *s)
{
	static const char *const kinds[] = { "measured:", "quoted:", "documented:", "fitted:", "estimated:", NULL };
	for (int i = 0; kinds[i]; i++)
		if (!strncmp(s, kinds[i], strlen(kinds[i])) && s[strlen(kinds[i])])
			return true;
	return false;
}

enum str_kind { STR_TEXT, STR_NAME, STR_SOURCE };

static int get_string(struct ctx *c, const cJSON *obj, const char *key, bool required,
                      enum str_kind kind, size_t maxlen, const char **out)
{
	char buf[80];
	const cJSON *v = get(obj, key);
	*out = NULL;
	if (!v) {
		if (required)
			return fail(c, "missing \"%s\"", key);
		return 0;
	}
	size_t old = path_key(c, key);
	if (!cJSON_IsString(v) || !v->valuestring)
		return fail(c, "expected a string, got %s", sd_json_describe(v, SD_JSON_BY_KIND, buf, sizeof buf));
	const char *s = v->valuestring;
	size_t n = strlen(s);
	if (n == 0)
		return fail(c, "expected a non-empty string");
	if (n > maxlen)
		return fail(c, "string longer than %zu bytes", maxlen);
	if (kind == STR_NAME) {
		for (size_t i = 0; i < n; i++) {
			unsigned char ch = (unsigned char)s[i];
			if (ch <= ' ' || ch == 0x7f || ch == '"' || ch == '\\')
				return fail(c, "expected a name without spaces, quotes or control characters, got %s",
				            sd_json_describe(v, SD_JSON_BY_KIND, buf, sizeof buf));
		}
	} else {
		for (size_t i = 0; i < n; i++)
			if ((unsigned char)s[i] < 0x20 && s[i] != '\t')
				return fail(c, "control character in string %s", sd_json_describe(v, SD_JSON_BY_KIND, buf, sizeof buf));
	}
	if (kind == STR_SOURCE && !is_source(s))
		return fail(c, "expected a source starting with measured:, quoted:, documented:, fitted: or "
		            "estimated:, got %s", sd_json_describe(v, SD_JSON_BY_KIND, buf, sizeof buf));
	*out = arena_strdup(&c->arena, s);
	path_pop(c, old);
	return 0;
}

enum num_kind {
	NUM_POSITIVE,   /* lo < x <= hi with lo = 0 */
	NUM_RANGE,      /* lo <= x <= hi */
	NUM_NONNEG,     /* 0 <= x <= hi */
	NUM_INT,        /* integer, lo <= x <= hi */
};

/* Checks one number value `v` at the current path. */
static int check_number(struct ctx *c, const cJSON *v, enum num_kind kind, double lo, double hi, double *out)
{
	char buf[80];
	struct sd_json_rule r = { kind == NUM_INT ? SD_JSON_INT : SD_JSON_NUM, SD_JSON_BOUNDED, lo, hi };
	if (kind == NUM_POSITIVE || kind == NUM_NONNEG)
		r.lo = 0;
	if (kind == NUM_POSITIVE)
		r.flags |= SD_JSON_OPEN_LO;
	double x = 0;
	if (sd_json_check(v, &r, &x) == SD_JSON_OK) {
		*out = x;
		return 0;
	}
	const char *got = sd_json_describe(v, SD_JSON_BY_KIND, buf, sizeof buf);
	switch (kind) {
	case NUM_POSITIVE:
		return fail(c, "expected a positive number up to %g, got %s", hi, got);
	case NUM_NONNEG:
		return fail(c, "expected a non-negative number up to %g, got %s", hi, got);
	case NUM_RANGE:
		return fail(c, "expected a number from %g to %g, got %s", lo, hi, got);
	case NUM_INT:
		break;
	}
	return fail(c, "expected an integer from %.0f to %.0f, got %s", lo, hi, got);
}

static int get_number(struct ctx *c, const cJSON *obj, const char *key, bool required,
                      enum num_kind kind, double lo, double hi, double *out)
{
	const cJSON *v = get(obj, key);
	if (!v) {
		if (required)
			return fail(c, "missing \"%s\"", key);
		return 0;
	}
	size_t old = path_key(c, key);
	if (check_number(c, v, kind, lo, hi, out) < 0)
		return -1;
	path_pop(c, old);
	return 0;
}

static int get_int(struct ctx *c, const cJSON *obj, const char *key, bool required, int lo, int hi, int *out)
{
	double x = *out;
	if (get_number(c, obj, key, required, NUM_INT, lo, hi, &x) < 0)
		return -1;
	*out = (int)x;
	return 0;
}

static int get_bool(struct ctx *c, const cJSON *obj, const char *key, bool required, bool *out)
{
	char buf[80];
	const cJSON *v = get(obj, key);
	if (!v) {
		if (required)
			return fail(c, "missing \"%s\"", key);
		return 0;
	}
	size_t old = path_key(c, key);
	if (!cJSON_IsBool(v))
		return fail(c, "expected true or false, got %s", sd_json_describe(v, SD_JSON_BY_KIND, buf, sizeof buf));
	*out = cJSON_IsTrue(v);
	path_pop(c, old);
	return 0;
}

/* Picks one of `names` (NULL-terminated); stores its index. */
static int get_enum(struct ctx *c, const cJSON *obj, const char *key, bool required,
                    const char *const *names, int *out)
{
	char buf[80], list[160] = "";
	const cJSON *v = get(obj, key);
	if (!v) {
		if (required)
			return fail(c, "missing \"%s\"", key);
		return 0;
	}
	size_t old = path_key(c, key);
	for (int i = 0; names[i]; i++) {
		if (cJSON_IsString(v) && v->valuestring && !strcmp(v->valuestring, names[i])) {
			*out = i;
			path_pop(c, old);
			return 0;
		}
		size_t l = strlen(list);
		snprintf(list + l, sizeof list - l, "%s\"%s\"", i ? (names[i + 1] ? ", " : " or ") : "", names[i]);
	}
	return fail(c, "expected %s, got %s", list, sd_json_describe(v, SD_JSON_BY_KIND, buf, sizeof buf));
}

/* An array of exactly 24 non-negative numbers (clock hours 0-23). */
static int get_hours24(struct ctx *c, const cJSON *obj, const char *key, double out[24], bool *have)
{
	char buf[80];
	const cJSON *arr = get(obj, key);
	*have = false;
	if (!arr)
		return 0;
	size_t old = path_key(c, key);
	if (!cJSON_IsArray(arr))
		return fail(c, "expected an array of 24 numbers (clock hours 0-23), got %s", sd_json_describe(arr, SD_JSON_BY_KIND, buf, sizeof buf));
	int n = cJSON_GetArraySize(arr);
	if (n != 24)
		return fail(c, "expected 24 numbers (clock hours 0-23), got %d", n);
	int i = 0;
	for (const cJSON *it = arr->child; it; it = it->next, i++) {
		size_t o2 = path_index(c, i);
		if (check_number(c, it, NUM_NONNEG, 0, 1e9, &out[i]) < 0)
			return -1;
		path_pop(c, o2);
	}
	path_pop(c, old);
	*have = true;
	return 0;
}

/* ---- sections ---------------------------------------------------------- */

static int parse_batch(struct ctx *c, const cJSON *obj, struct sd_batch *b)
{
	static const char *const keys[] = { "probability", "sizes", "window_hours", "spread_seconds",
	                                    "scope", "source", NULL };
	static const char *const scopes[] = { "zone", "offer", NULL };
	if (check_keys(c, obj, keys, NULL) < 0)
		return -1;
	double window = 0;
	int scope = 0;
	const cJSON *arr;
	if (get_number(c, obj, "probability", true, NUM_RANGE, 0, 1, &b->probability) < 0 ||
	    get_array(c, obj, "sizes", true, 1, 64, &arr, &b->nsizes) < 0 ||
	    get_number(c, obj, "window_hours", true, NUM_RANGE, 0, SD_CATALOG_MAX_LIFETIME_HOURS, &window) < 0 ||
	    get_number(c, obj, "spread_seconds", true, NUM_RANGE, 0, 3600, &b->spread_seconds) < 0 ||
	    get_enum(c, obj, "scope", true, scopes, &scope) < 0 ||
	    get_string(c, obj, "source", true, STR_SOURCE, 4096, &b->source) < 0)
		return -1;
	b->window_seconds = window * 3600;
	b->scope = scope == 0 ? SD_BATCH_ZONE : SD_BATCH_OFFER;
	b->sizes = arena_alloc(&c->arena, sizeof *b->sizes * (size_t)b->nsizes);
	b->size_weights = arena_alloc(&c->arena, sizeof *b->size_weights * (size_t)b->nsizes);
	size_t old = path_key(c, "sizes");
	int i = 0;
	char buf[80];
	for (const cJSON *it = arr->child; it; it = it->next, i++) {
		size_t o2 = path_index(c, i);
		if (!cJSON_IsArray(it) || cJSON_GetArraySize(it) != 2)
			return fail(c, "expected [size, weight], got %s", sd_json_describe(it, SD_JSON_BY_KIND, buf, sizeof buf));
		double size = 0, w = 0;
		size_t o3 = path_index(c, 0);
		if (check_number(c, it->child, NUM_INT, 2, 1024, &size) < 0)
			return -1;
		path_pop(c, o3);
		o3 = path_index(c, 1);
		if (check_number(c, it->child->next, NUM_POSITIVE, 0, 1e9, &w) < 0)
			return -1;
		path_pop(c, o3);
		b->sizes[i] = (int)size;
		b->size_weights[i] = w;
		path_pop(c, o2);
	}
	path_pop(c, old);
	return 0;
}

static int parse_markov_state(struct ctx *c, const cJSON *parent, const char *key, struct sd_markov_state *s)
{
	static const char *const keys[] = { "per_hour", "mean_hours", "source", NULL };
	const cJSON *obj;
	if (get_object(c, parent, key, true, &obj) < 0)
		return -1;
	size_t old = path_key(c, key);
	if (check_keys(c, obj, keys, NULL) < 0 ||
	    get_number(c, obj, "per_hour", true, NUM_RANGE, 0, 1e4, &s->per_hour) < 0 ||
	    get_number(c, obj, "mean_hours", true, NUM_POSITIVE, 0, 1e6, &s->mean_hours) < 0 ||
	    get_string(c, obj, "source", true, STR_SOURCE, 4096, &s->source) < 0)
		return -1;
	path_pop(c, old);
	return 0;
}

static int parse_cdf(struct ctx *c, const cJSON *obj, struct sd_revocation *r)
{
	const cJSON *arr;
	char buf[80];
	if (get_array(c, obj, "lifetime_cdf", true, 1, 10000, &arr, &r->ncdf) < 0)
		return -1;
	r->cdf_hours = arena_alloc(&c->arena, sizeof(double) * (size_t)r->ncdf);
	r->cdf_fraction = arena_alloc(&c->arena, sizeof(double) * (size_t)r->ncdf);
	size_t old = path_key(c, "lifetime_cdf");
	int i = 0;
	for (const cJSON *it = arr->child; it; it = it->next, i++) {
		size_t o2 = path_index(c, i);
		if (!cJSON_IsArray(it) || cJSON_GetArraySize(it) != 2)
			return fail(c, "expected [hours, fraction revoked], got %s", sd_json_describe(it, SD_JSON_BY_KIND, buf, sizeof buf));
		double h = 0, f = 0;
		size_t o3 = path_index(c, 0);
		if (check_number(c, it->child, NUM_POSITIVE, 0, r->max_lifetime_hours, &h) < 0)
			return -1;
		if (i > 0 && h <= r->cdf_hours[i - 1])
			return fail(c, "hours must increase: %g follows %g", h, r->cdf_hours[i - 1]);
		path_pop(c, o3);
		o3 = path_index(c, 1);
		if (check_number(c, it->child->next, NUM_RANGE, 0, 1, &f) < 0)
			return -1;
		if (i > 0 && f < r->cdf_fraction[i - 1])
			return fail(c, "the CDF decreases: %g after %g (a fraction revoked cannot shrink)",
			            f, r->cdf_fraction[i - 1]);
		path_pop(c, o3);
		r->cdf_hours[i] = h;
		r->cdf_fraction[i] = f;
		path_pop(c, o2);
	}
	if (r->cdf_hours[r->ncdf - 1] != r->max_lifetime_hours)
		return fail(c, "the last point is at %g h; it must be at max_lifetime_hours (%d), where survivors are capped",
		            r->cdf_hours[r->ncdf - 1], r->max_lifetime_hours);
	path_pop(c, old);
	return 0;
}

static int parse_revocation(struct ctx *c, const cJSON *obj, struct sd_offer *o)
{
	static const char *const models[] = { "empirical", "markov", NULL };
	static const char *const emp_keys[] = { "model", "max_lifetime_hours", "lifetime_cdf", "cdf_servers",
	                                        "cdf_source", "hour_of_day_weights", "hour_of_day_revocations",
	                                        "hour_of_day_source", "batch", NULL };
	static const char *const mk_keys[] = { "model", "calm", "storm", "batch", NULL };
	struct sd_revocation *r = &o->revocation;
	int model = 0;
	if (get_enum(c, obj, "model", true, models, &model) < 0)
		return -1;
	if (model == 0) {
		r->model = SD_REVOCATION_EMPIRICAL;
		if (check_keys(c, obj, emp_keys, " (not used by the empirical model)") < 0 ||
		    get_int(c, obj, "max_lifetime_hours", true, 1, SD_CATALOG_MAX_LIFETIME_HOURS,
		            &r->max_lifetime_hours) < 0 ||
		    parse_cdf(c, obj, r) < 0 ||
		    get_int(c, obj, "cdf_servers", false, 1, 100000000, &r->cdf_servers) < 0 ||
		    get_string(c, obj, "cdf_source", true, STR_SOURCE, 4096, &r->cdf_source) < 0 ||
		    get_hours24(c, obj, "hour_of_day_weights", r->hour_weights, &r->has_hour_weights) < 0 ||
		    get_hours24(c, obj, "hour_of_day_revocations", r->hour_counts, &r->has_hour_counts) < 0)
			return -1;
		bool need_src = r->has_hour_weights || r->has_hour_counts;
		if (get_string(c, obj, "hour_of_day_source", need_src, STR_SOURCE, 4096, &r->hour_source) < 0)
			return -1;
		if (r->hour_source && !need_src) {
			path_key(c, "hour_of_day_source");
			return fail(c, "given without hour_of_day_weights or hour_of_day_revocations");
		}
		if (r->has_hour_weights) {
			double sum = 0;
			for (int h = 0; h < 24; h++)
				sum += r->hour_weights[h];
			if (!(sum > 0)) {
				path_key(c, "hour_of_day_weights");
				return fail(c, "all 24 weights are zero");
			}
			for (int h = 0; h < 24; h++)
				r->hour_weights[h] *= 24 / sum;
		} else {
			for (int h = 0; h < 24; h++)
				r->hour_weights[h] = 1;
		}
	} else {
		r->model = SD_REVOCATION_MARKOV;
		if (check_keys(c, obj, mk_keys, " (not used by the markov model)") < 0 ||
		    parse_markov_state(c, obj, "calm", &r->calm) < 0 ||
		    parse_markov_state(c, obj, "storm", &r->storm) < 0)
			return -1;
		for (int h = 0; h < 24; h++)
			r->hour_weights[h] = 1;
	}
	const cJSON *b;
	if (get_object(c, obj, "batch", false, &b) < 0)
		return -1;
	if (b) {
		size_t old = path_key(c, "batch");
		if (parse_batch(c, b, &r->batch) < 0)
			return -1;
		path_pop(c, old);
		r->has_batch = true;
	}
	if (r->model == SD_REVOCATION_EMPIRICAL) {
		char *detail = NULL;
		if (sd_market_prepare_offer(o, &detail) < 0) {
			path_key(c, "hour_of_day_weights");
			int rc = fail(c, "%s", detail ? detail : "cannot prepare the lifetime model");
			free(detail);
			return rc;
		}
	}
	return 0;
}

static int parse_offer(struct ctx *c, const cJSON *obj, struct sd_offer *o)
{
	static const char *const keys[] = {
		"id", "provider", "region", "zone", "machine_type", "gpu", "gpu_count", "transient",
		"usd_per_hour", "price_source", "images_per_sec", "speed_source", "capacity",
		"notice_seconds", "notice_source", "billing", "boot", "revocation", "notes", NULL
	};
	static const char *const cap_keys[] = { "servers", "source", NULL };
	static const char *const bill_keys[] = { "unit", "minimum_seconds", "source", NULL };
	static const char *const bill_units[] = { "per_second", "per_minute", "per_hour", NULL };
	static const char *const boot_keys[] = { "quantiles_seconds", "source", NULL };

	if (need_object(c, obj) < 0 || check_keys(c, obj, keys, NULL) < 0)
		return -1;
	if (get_string(c, obj, "id", true, STR_NAME, 128, &o->id) < 0 ||
	    get_string(c, obj, "provider", true, STR_NAME, 32, &o->provider) < 0 ||
	    get_string(c, obj, "region", true, STR_NAME, 64, &o->region) < 0 ||
	    get_string(c, obj, "zone", true, STR_NAME, 64, &o->zone) < 0 ||
	    get_string(c, obj, "machine_type", false, STR_NAME, 64, &o->machine_type) < 0 ||
	    get_string(c, obj, "gpu", true, STR_NAME, 32, &o->gpu) < 0 ||
	    get_int(c, obj, "gpu_count", true, 1, 64, &o->gpu_count) < 0 ||
	    get_bool(c, obj, "transient", true, &o->transient) < 0 ||
	    get_number(c, obj, "usd_per_hour", true, NUM_POSITIVE, 0, 1e5, &o->usd_per_hour) < 0 ||
	    get_string(c, obj, "price_source", true, STR_SOURCE, 4096, &o->price_source) < 0 ||
	    get_number(c, obj, "images_per_sec", true, NUM_POSITIVE, 0, 1e9, &o->images_per_sec) < 0 ||
	    get_string(c, obj, "speed_source", true, STR_SOURCE, 4096, &o->speed_source) < 0 ||
	    get_number(c, obj, "notice_seconds", true, NUM_RANGE, 0, 3600, &o->notice_seconds) < 0 ||
	    get_string(c, obj, "notice_source", false, STR_SOURCE, 4096, &o->notice_source) < 0 ||
	    get_string(c, obj, "notes", false, STR_TEXT, 4096, &o->notes) < 0)
		return -1;

	const cJSON *sub;
	size_t old;
	if (get_object(c, obj, "capacity", true, &sub) < 0)
		return -1;
	old = path_key(c, "capacity");
	if (check_keys(c, sub, cap_keys, NULL) < 0 ||
	    get_int(c, sub, "servers", true, 1, 1000000, &o->capacity) < 0 ||
	    get_string(c, sub, "source", true, STR_SOURCE, 4096, &o->capacity_source) < 0)
		return -1;
	path_pop(c, old);

	if (get_object(c, obj, "billing", true, &sub) < 0)
		return -1;
	old = path_key(c, "billing");
	int unit = 0;
	if (check_keys(c, sub, bill_keys, NULL) < 0 ||
	    get_enum(c, sub, "unit", true, bill_units, &unit) < 0 ||
	    get_number(c, sub, "minimum_seconds", true, NUM_RANGE, 0, 86400, &o->billing_minimum_seconds) < 0 ||
	    get_string(c, sub, "source", false, STR_SOURCE, 4096, &o->billing_source) < 0)
		return -1;
	o->billing_unit = unit == 0 ? SD_BILL_PER_SECOND : unit == 1 ? SD_BILL_PER_MINUTE : SD_BILL_PER_HOUR;
	path_pop(c, old);

	if (get_object(c, obj, "boot", true, &sub) < 0)
		return -1;
	old = path_key(c, "boot");
	const cJSON *arr;
	if (check_keys(c, sub, boot_keys, NULL) < 0 ||
	    get_array(c, sub, "quantiles_seconds", true, 2, 101, &arr, &o->nboot) < 0 ||
	    get_string(c, sub, "source", true, STR_SOURCE, 4096, &o->boot_source) < 0)
		return -1;
	o->boot_quantiles = arena_alloc(&c->arena, sizeof(double) * (size_t)o->nboot);
	size_t o2 = path_key(c, "quantiles_seconds");
	int i = 0;
	for (const cJSON *it = arr->child; it; it = it->next, i++) {
		size_t o3 = path_index(c, i);
		if (check_number(c, it, NUM_RANGE, 0, 86400, &o->boot_quantiles[i]) < 0)
			return -1;
		if (i > 0 && o->boot_quantiles[i] < o->boot_quantiles[i - 1])
			return fail(c, "quantiles must not decrease: %g after %g",
			            o->boot_quantiles[i], o->boot_quantiles[i - 1]);
		path_pop(c, o3);
	}
	path_pop(c, o2);
	path_pop(c, old);

	const cJSON *rev = get(obj, "revocation");
	if (o->transient && !rev)
		return fail(c, "a transient offer needs \"revocation\"");
	if (!o->transient && rev) {
		path_key(c, "revocation");
		return fail(c, "on-demand offers (transient: false) are never revoked; remove this");
	}
	if (rev) {
		old = path_key(c, "revocation");
		if (need_object(c, rev) < 0 || parse_revocation(c, rev, o) < 0)
			return -1;
		path_pop(c, old);
	}
	return 0;
}

static int parse_root(struct ctx *c, const cJSON *root, struct sd_catalog *cat)
{
	static const char *const keys[] = { "format", "version", "name", "description", "time_base",
	                                    "sources", "offers", NULL };
	static const char *const tb_keys[] = { "period", "hour_of_day_clock", "lifetime_origin", NULL };
	static const char *const src_keys[] = { "name", "licence", NULL };
	static const char *const formats[] = { "spotdeck-catalog", NULL };
	int fmt = 0, version = 0;
	if (need_object(c, root) < 0 || check_keys(c, root, keys, NULL) < 0 ||
	    get_enum(c, root, "format", true, formats, &fmt) < 0 ||
	    get_int(c, root, "version", true, 1, 1000000, &version) < 0 ||
	    get_string(c, root, "name", true, STR_NAME, 64, &cat->name) < 0 ||
	    get_string(c, root, "description", false, STR_TEXT, 4096, &cat->description) < 0)
		return -1;

	if (version != 1) {
		path_key(c, "version");
		return fail(c, "version %d is not supported (this spotdeck reads version 1)", version);
	}

	const cJSON *tb;
	if (get_object(c, root, "time_base", false, &tb) < 0)
		return -1;
	if (tb) {
		size_t old = path_key(c, "time_base");
		if (check_keys(c, tb, tb_keys, NULL) < 0 ||
		    get_string(c, tb, "period", false, STR_TEXT, 256, &cat->period) < 0 ||
		    get_string(c, tb, "hour_of_day_clock", false, STR_TEXT, 1024, &cat->hour_of_day_clock) < 0 ||
		    get_string(c, tb, "lifetime_origin", false, STR_TEXT, 1024, &cat->lifetime_origin) < 0)
			return -1;
		path_pop(c, old);
	}

	const cJSON *arr;
	if (get_array(c, root, "sources", false, 0, 1000, &arr, &cat->nsources) < 0)
		return -1;
	if (arr) {
		cat->sources = arena_alloc(&c->arena, sizeof *cat->sources * (size_t)(cat->nsources + 1));
		size_t old = path_key(c, "sources");
		int i = 0;
		for (const cJSON *it = arr->child; it; it = it->next, i++) {
			size_t o2 = path_index(c, i);
			if (need_object(c, it) < 0 || check_keys(c, it, src_keys, NULL) < 0 ||
			    get_string(c, it, "name", true, STR_TEXT, 1024, &cat->sources[i].name) < 0 ||
			    get_string(c, it, "licence", true, STR_TEXT, 1024, &cat->sources[i].licence) < 0)
				return -1;
			path_pop(c, o2);
		}
		path_pop(c, old);
	}

	if (get_array(c, root, "offers", true, 1, SD_CATALOG_MAX_OFFERS, &arr, &cat->noffers) < 0)
		return -1;
	cat->offers = arena_alloc(&c->arena, sizeof *cat->offers * (size_t)cat->noffers);
	cat->zones = arena_alloc(&c->arena, sizeof *cat->zones * (size_t)cat->noffers);
	size_t old = path_key(c, "offers");
	int i = 0;
	for (const cJSON *it = arr->child; it; it = it->next, i++) {
		struct sd_offer *o = &cat->offers[i];
		size_t o2 = path_index(c, i);
		o->index = i;
		if (parse_offer(c, it, o) < 0)
			return -1;
		for (int j = 0; j < i; j++) {
			if (!strcmp(cat->offers[j].id, o->id)) {
				path_key(c, "id");
				return fail(c, "\"%s\" is already the id of offers[%d]", o->id, j);
			}
		}
		char key[160];
		snprintf(key, sizeof key, "%s/%s", o->provider, o->zone);
		int z = 0;
		while (z < cat->nzones && strcmp(cat->zones[z], key))
			z++;
		if (z == cat->nzones)
			cat->zones[cat->nzones++] = arena_strdup(&c->arena, key);
		o->zone_index = z;
		path_pop(c, o2);
	}
	path_pop(c, old);
	return 0;
}

/* Line and column (1-based) of byte `pos` in text. */
static void line_col(const char *text, size_t len, size_t pos, int *line, int *col)
{
	*line = 1;
	*col = 1;
	for (size_t i = 0; i < pos && i < len; i++) {
		if (text[i] == '\n') {
			++*line;
			*col = 1;
		} else {
			++*col;
		}
	}
}

int sd_catalog_parse(struct sd_catalog **out, const char *text, size_t len,
                     const char *name_for_errors, char **why)
{
	struct ctx c = { .file = name_for_errors ? name_for_errors : "catalog", .why = why };
	*out = NULL;
	if (len > SD_CATALOG_MAX_BYTES)
		return sd_why(why, "%s: larger than %u bytes; not a catalog", c.file, SD_CATALOG_MAX_BYTES);
	const char *nul = memchr(text, '\0', len);
	if (nul)
		return sd_why(why, "%s: contains a NUL byte at offset %zu; not a JSON text file", c.file,
		              (size_t)(nul - text));

	/* A UTF-8 byte-order mark is allowed and skipped, as editors add one. */
	if (len >= 3 && !memcmp(text, "\xef\xbb\xbf", 3)) {
		text += 3;
		len -= 3;
	}
	const char *end = NULL;
	cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
	int line, col;
	if (!root) {
		size_t pos = end && end >= text && end <= text + len ? (size_t)(end - text) : len;
		line_col(text, len, pos, &line, &col);
		if (pos >= len)
			return sd_why(why, "%s:%d:%d: not valid JSON: unexpected end of file", c.file, line, col);
		/* Show a few bytes of the spot, printable ones only. */
		char near[16];
		size_t k = 0;
		for (size_t i = pos; i < len && k < 12; i++) {
			unsigned char ch = (unsigned char)text[i];
			if (ch == '\n' || ch == '\r')
				break;
			near[k++] = ch >= 0x20 && ch < 0x7f && ch != '\'' ? (char)ch : '?';
		}
		near[k] = '\0';
		return sd_why(why, "%s:%d:%d: not valid JSON near '%s'", c.file, line, col, near);
	}
	size_t pos = (size_t)(end - text);
	while (pos < len && (text[pos] == ' ' || text[pos] == '\t' || text[pos] == '\n' || text[pos] == '\r'))
		pos++;
	if (pos < len) {
		cJSON_Delete(root);
		line_col(text, len, pos, &line, &col);
		return sd_why(why, "%s:%d:%d: unexpected text after the JSON value", c.file, line, col);
	}

	struct sd_catalog *cat = arena_alloc(&c.arena, sizeof *cat);
	cat->file = arena_strdup(&c.arena, c.file);
	int rc = parse_root(&c, root, cat);
	cJSON_Delete(root);
	cat->arena = c.arena;
	if (rc < 0) {
		sd_catalog_free(cat);
		return -1;
	}
	*out = cat;
	return 0;
}

int sd_catalog_load(struct sd_catalog **out, const char *path, char **why)
{
	*out = NULL;
	FILE *f = fopen(path, "rb");
	if (!f)
		return sd_why(why, "%s: cannot open: %s", path, strerror(errno));
	struct stat st;
	if (fstat(fileno(f), &st) < 0 || !S_ISREG(st.st_mode)) {
		fclose(f);
		return sd_why(why, "%s: not a regular file", path);
	}
	if ((uint64_t)st.st_size > SD_CATALOG_MAX_BYTES) {
		fclose(f);
		return sd_why(why, "%s: larger than %u bytes; not a catalog", path, SD_CATALOG_MAX_BYTES);
	}
	size_t n = (size_t)st.st_size;
	char *buf = sd_malloc(n + 1);
	size_t got = fread(buf, 1, n, f);
	int err = ferror(f);
	fclose(f);
	if (err || got != n) {
		free(buf);
		return sd_why(why, "%s: read error", path);
	}
	int rc = sd_catalog_parse(out, buf, n, path, why);
	free(buf);
	return rc;
}

void sd_catalog_free(struct sd_catalog *c)
{
	if (!c)
		return;
	for (int i = 0; i < c->noffers; i++)
		sd_market_release_offer(&c->offers[i]);
	arena_free(c->arena);  /* c itself lives in the arena */
}

const struct sd_offer *sd_catalog_find(const struct sd_catalog *c, const char *id)
{
	for (int i = 0; i < c->noffers; i++)
		if (!strcmp(c->offers[i].id, id))
			return &c->offers[i];
	return NULL;
}

