/* src/app/view-codec.c - struct sd_view as JSON and back (see view-codec.h).
 *
 * The encoder writes cJSON objects; every field is named as its C member.
 * The decoder (sd_view_mirror_apply) builds the new state on the side and
 * swaps it in only when the whole object was good, so a bad message leaves
 * the mirror exactly as it was (stronger than the header promises). */
#include "config.h"

#include "src/app/view-codec.h"

#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "src/base/errors.h"

/* ---- encoding -------------------------------------------------------------- */

/* The encoder's state: ok drops to 0 when cJSON runs out of memory. */
struct enc {
	int ok;
};

static void put(struct enc *e, cJSON *o, const char *name, cJSON *item)
{
	if (!item) {
		e->ok = 0;
		return;
	}
	if (!cJSON_AddItemToObject(o, name, item)) {
		cJSON_Delete(item);
		e->ok = 0;
	}
}

/* The longest number text below: "-1.2345678901234567e-308". */
#define NUM_TEXT 32

/* buf as JSON wants it: '.' for the decimal point whatever LC_NUMERIC says
 * (the caller's strtod read the locale's own point, as snprintf wrote it). */
static void json_point(char *buf)
{
	const char *dp = localeconv()->decimal_point;
	if (dp && dp[0] && dp[0] != '.' && !dp[1]) {
		char *at = strchr(buf, dp[0]);
		if (at)
			*at = '.';
	}
}

/* d as JSON text into out (NUM_TEXT bytes); returns its length.  An integer
 * as one; else %.15g when that reads back to the same double, else %.17g
 * (which always does: IEEE 754-2008 5.12.2).  cJSON's own printer keeps
 * the 15 digits whenever they are within DBL_EPSILON relative, which loses
 * the last bits of sums like 0.1 + 0.2; a field must round-trip.  A
 * non-finite number is null: the header's "unknown". */
static int format_double(char *out, double d)
{
	if (!isfinite(d))
		return (int)(memcpy(out, "null", 5), 4);
	if (d == floor(d) && fabs(d) < 1e15)
		return snprintf(out, NUM_TEXT, "%lld", (long long)d);
	snprintf(out, NUM_TEXT, "%.15g", d);
	if (strtod(out, NULL) != d)
		snprintf(out, NUM_TEXT, "%.17g", d);
	json_point(out);
	return (int)strlen(out);
}

/* f as JSON text: %.9g, which always reads back to the same float
 * (IEEE 754-2008 5.12.2: 9 significant digits for binary32); one call, no
 * search for a shorter form, since the samples are most of a full view. */
static int format_float(char *out, float f)
{
	if (!isfinite(f))
		return (int)(memcpy(out, "null", 5), 4);
	if (f == floorf(f) && fabsf(f) < 1e7f)
		return snprintf(out, NUM_TEXT, "%lld", (long long)f);
	snprintf(out, NUM_TEXT, "%.9g", (double)f);
	json_point(out);
	return (int)strlen(out);
}

static cJSON *double_item(double d)
{
	char buf[NUM_TEXT];
	format_double(buf, d);
	return cJSON_CreateRaw(buf);
}

static void put_num(struct enc *e, cJSON *o, const char *name, double d)
{
	/* A non-finite number goes as null: the header's "unknown". */
	put(e, o, name, double_item(d));
}

/* A char array field: at most cap bytes, whether or not a NUL ends them, so
 * a view with an unterminated string is sent as it is (and refused by the
 * decoder as too long) rather than read past its end. */
static void put_str(struct enc *e, cJSON *o, const char *name, const char *s, size_t cap)
{
	char buf[1025];
	size_t n = strnlen(s, cap);
	if (n >= sizeof buf)
		n = sizeof buf - 1;
	memcpy(buf, s, n);
	buf[n] = '\0';
	put(e, o, name, cJSON_CreateString(buf));
}

#define PUT_STR(e, o, st, field) put_str((e), (o), #field, (st)->field, sizeof (st)->field)
#define PUT_NUM(e, o, st, field) put_num((e), (o), #field, (double)(st)->field)

/* The series' valid range, clamped so that a damaged one is never read out
 * of bounds. */
static void series_range(const struct sd_view_series *s, int *head, int *len)
{
	*len = s->len < 0 ? 0 : s->len > SD_VIEW_HIST ? SD_VIEW_HIST : s->len;
	*head = s->head < 0 || s->head >= SD_VIEW_HIST ? 0 : s->head;
}

/* The newest sample's t, or -1 (the mark's "none") for an empty series. */
static double series_newest(const struct sd_view_series *s)
{
	int head, len;
	series_range(s, &head, &len);
	return len ? s->t[(head + len - 1) % SD_VIEW_HIST] : -1;
}

/* {"t":[...],"v":[...]} with the samples newer than after, oldest first;
 * after < -1 (or a series that went back in time since the mark: the run
 * restarted its clock) sends all of them, the latter with "replace":true
 * so that the mirror drops what it had. */
static void put_series(struct enc *e, cJSON *o, const char *name, const struct sd_view_series *s,
                       double after, int full)
{
	int head, len;
	series_range(s, &head, &len);
	/* Each array as one raw text: a snapshot holds thousands of samples,
	 * and an item per sample would cost two allocations each. */
	char ts[SD_VIEW_HIST * (NUM_TEXT + 1) + 3], vs[SD_VIEW_HIST * (NUM_TEXT + 1) + 3];
	size_t nt = 0, nv = 0;
	ts[nt++] = '[';
	vs[nv++] = '[';
	int replace = !full && len && series_newest(s) < after;
	for (int k = 0; k < len; k++) {
		int i = (head + k) % SD_VIEW_HIST;
		if (!full && !replace && !(s->t[i] > after))
			continue;
		if (nt > 1) {
			ts[nt++] = ',';
			vs[nv++] = ',';
		}
		nt += (size_t)format_double(ts + nt, s->t[i]);
		nv += (size_t)format_float(vs + nv, s->v[i]);
	}
	memcpy(ts + nt, "]", 2);
	memcpy(vs + nv, "]", 2);
	cJSON *obj = cJSON_CreateObject();
	if (!obj) {
		e->ok = 0;
		return;
	}
	put(e, obj, "t", cJSON_CreateRaw(ts));
	put(e, obj, "v", cJSON_CreateRaw(vs));
	if (replace)
		put(e, obj, "replace", cJSON_CreateTrue());
	put(e, o, name, obj);
}

static cJSON *offer_json(struct enc *e, const struct sd_view_offer *f)
{
	cJSON *o = cJSON_CreateObject();
	if (!o) {
		e->ok = 0;
		return NULL;
	}
	PUT_STR(e, o, f, id);
	PUT_STR(e, o, f, provider);
	PUT_STR(e, o, f, region);
	PUT_STR(e, o, f, zone);
	PUT_STR(e, o, f, gpu);
	PUT_NUM(e, o, f, gpus);
	PUT_NUM(e, o, f, transient);
	PUT_NUM(e, o, f, usd_per_hour);
	PUT_NUM(e, o, f, images_per_sec);
	PUT_NUM(e, o, f, usd_per_mimage);
	PUT_NUM(e, o, f, p_revoked_1h);
	PUT_NUM(e, o, f, p_revoked_modelled);
	PUT_NUM(e, o, f, available);
	PUT_NUM(e, o, f, price_estimated);
	PUT_NUM(e, o, f, speed_estimated);
	return o;
}

static cJSON *server_json(struct enc *e, const struct sd_view_server *s, double ips_after, int full)
{
	cJSON *o = cJSON_CreateObject();
	if (!o) {
		e->ok = 0;
		return NULL;
	}
	PUT_STR(e, o, s, id);
	PUT_STR(e, o, s, offer);
	PUT_STR(e, o, s, zone);
	PUT_STR(e, o, s, gpu);
	PUT_STR(e, o, s, precision);
	PUT_NUM(e, o, s, transient);
	PUT_NUM(e, o, s, local);
	PUT_STR(e, o, s, state);
	PUT_NUM(e, o, s, rank);
	PUT_NUM(e, o, s, images_per_sec);
	put_series(e, o, "ips", &s->ips, ips_after, full);
	PUT_NUM(e, o, s, compute_ms);
	PUT_NUM(e, o, s, comm_ms);
	PUT_NUM(e, o, s, uptime_s);
	PUT_NUM(e, o, s, usd_per_hour);
	PUT_NUM(e, o, s, price_estimated);
	PUT_NUM(e, o, s, usd_so_far);
	PUT_NUM(e, o, s, emulated);
	PUT_NUM(e, o, s, notice_left_s);
	return o;
}

static cJSON *revocation_json(struct enc *e, const struct sd_view_revocation *r)
{
	cJSON *o = cJSON_CreateObject();
	if (!o) {
		e->ok = 0;
		return NULL;
	}
	PUT_NUM(e, o, r, t);
	PUT_STR(e, o, r, server);
	PUT_STR(e, o, r, zone);
	PUT_STR(e, o, r, gpu);
	PUT_NUM(e, o, r, lifetime_s);
	PUT_NUM(e, o, r, notice_s);
	PUT_NUM(e, o, r, steps_lost);
	PUT_NUM(e, o, r, recovery_s);
	PUT_STR(e, o, r, replaced_by);
	return o;
}

static cJSON *whatif_json(struct enc *e, const struct sd_view_whatif *w)
{
	cJSON *o = cJSON_CreateObject();
	if (!o) {
		e->ok = 0;
		return NULL;
	}
	PUT_STR(e, o, w, label);
	PUT_NUM(e, o, w, current);
	PUT_NUM(e, o, w, servers);
	PUT_NUM(e, o, w, transient);
	PUT_NUM(e, o, w, time_p50_s);
	PUT_NUM(e, o, w, time_p90_s);
	PUT_NUM(e, o, w, cost_p50_usd);
	PUT_NUM(e, o, w, cost_p90_usd);
	PUT_NUM(e, o, w, revocations);
	PUT_NUM(e, o, w, failed);
	PUT_NUM(e, o, w, pareto);
	PUT_STR(e, o, w, summary);
	PUT_STR(e, o, w, commands);
	return o;
}

/* An array of n elements made by fn (a NULL element array with n > 0 is
 * sent empty). */
#define PUT_ARRAY(e, o, name, arr, n, fn) do { \
	cJSON *a_ = cJSON_CreateArray(); \
	if (!a_) { (e)->ok = 0; break; } \
	for (int i_ = 0; (arr) && i_ < (n) && (e)->ok; i_++) { \
		cJSON *x_ = fn((e), &(arr)[i_]); \
		if (x_ && !cJSON_AddItemToArray(a_, x_)) { cJSON_Delete(x_); (e)->ok = 0; } \
	} \
	put((e), (o), (name), a_); \
} while (0)

/* A change detector over an array's bytes: zlib's CRC-32 in the low half
 * and Adler-32 in the high half.  Not a security hash; a collision (about
 * one chance in 2^64 per change) would only hold that array back until its
 * next change. */
static uint64_t bytes_hash(const void *p, size_t n)
{
	if (!p)
		n = 0;
	uLong c = crc32_z(crc32(0L, Z_NULL, 0), p, n);
	uLong a = adler32_z(adler32(0L, Z_NULL, 0), p, n);
	return (uint64_t)(a & 0xffffffffu) << 32 | (uint64_t)(c & 0xffffffffu);
}

static int count(int n, int max)
{
	return n < 0 ? 0 : n > max ? max : n;
}

/* Where server id's samples stopped at the mark: its ips_t, or -2 (send
 * them all) when the mark has no such server.  hint: the index to try
 * first (servers rarely move). */
static double mark_ips_t(const struct sd_view_mark *m, const char *id, int hint)
{
	int n = count(m->nservers, SD_VIEW_CODEC_MAX_SERVERS);
	if (hint < n && strncmp(m->servers[hint].id, id, sizeof m->servers[hint].id) == 0)
		return m->servers[hint].ips_t;
	for (int j = 0; j < n; j++)
		if (strncmp(m->servers[j].id, id, sizeof m->servers[j].id) == 0)
			return m->servers[j].ips_t;
	return -2;
}

cJSON *sd_view_encode(const struct sd_view *v, const struct sd_view_mark *since)
{
	int full = !since || !since->valid;
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return NULL;
	struct enc e = { 1 };
	struct enc *ep = &e;

	PUT_STR(ep, o, v, job);
	PUT_NUM(ep, o, v, step);
	PUT_NUM(ep, o, v, total_steps);
	PUT_NUM(ep, o, v, epoch);
	PUT_NUM(ep, o, v, epochs);
	PUT_NUM(ep, o, v, loss);
	PUT_NUM(ep, o, v, test_accuracy);
	PUT_NUM(ep, o, v, unit_tokens);
	PUT_NUM(ep, o, v, val_loss);
	PUT_NUM(ep, o, v, images_per_sec);
	PUT_NUM(ep, o, v, elapsed_s);
	PUT_NUM(ep, o, v, eta_s);
	PUT_NUM(ep, o, v, usd_spent);
	PUT_NUM(ep, o, v, usd_per_hour);
	PUT_NUM(ep, o, v, spent_unpriced);
	PUT_NUM(ep, o, v, rate_unpriced);
	PUT_NUM(ep, o, v, spent_estimated);
	PUT_NUM(ep, o, v, rate_estimated);
	PUT_NUM(ep, o, v, usd_saved);
	PUT_NUM(ep, o, v, usd_saved_estimated);
	PUT_NUM(ep, o, v, paused);
	PUT_NUM(ep, o, v, generation);
	PUT_NUM(ep, o, v, world_size);
	PUT_NUM(ep, o, v, simulated);
	PUT_STR(ep, o, v, provider);
	PUT_STR(ep, o, v, catalog);
	PUT_NUM(ep, o, v, hazard_scale);
	PUT_NUM(ep, o, v, boot_scale);
	/* A JSON number is a double: a 64-bit seed goes as a decimal string. */
	char seed[24];
	snprintf(seed, sizeof seed, "%" PRIu64, v->seed);
	put(ep, o, "seed", cJSON_CreateString(seed));
	cJSON *marks = cJSON_CreateArray();
	for (int i = 0; marks && i < count(v->nmarks, 64); i++) {
		cJSON *x = double_item(v->revocation_marks[i]);
		if (!x || !cJSON_AddItemToArray(marks, x)) {
			cJSON_Delete(x);
			e.ok = 0;
		}
	}
	put(ep, o, "revocation_marks", marks);
	PUT_STR(ep, o, v, message);
	PUT_STR(ep, o, v, suggestion);
	PUT_STR(ep, o, v, suggestion_for);
	PUT_STR(ep, o, v, suggestion_why);
	PUT_NUM(ep, o, v, whatif_busy);
	PUT_NUM(ep, o, v, whatif_version);
	PUT_STR(ep, o, v, whatif_note);
	PUT_NUM(ep, o, v, clients);
	PUT_NUM(ep, o, v, read_only);
	PUT_STR(ep, o, v, ended);
	PUT_STR(ep, o, v, orphans_question);
	PUT_NUM(ep, o, v, orphans_asked);
	PUT_NUM(ep, o, v, autopilot_on);
	PUT_STR(ep, o, v, autopilot_goal);
	PUT_NUM(ep, o, v, autopilot_p);
	PUT_STR(ep, o, v, autopilot_pending);
	PUT_NUM(ep, o, v, autopilot_pending_at);

	int noffers = v->offers ? count(v->noffers, INT_MAX) : 0;
	int nrev = v->revocations ? count(v->nrevocations, INT_MAX) : 0;
	if (full || bytes_hash(v->offers, (size_t)noffers * sizeof *v->offers) != since->offers_hash)
		PUT_ARRAY(ep, o, "offers", v->offers, noffers, offer_json);
	if (full || bytes_hash(v->revocations, (size_t)nrev * sizeof *v->revocations) !=
	            since->revocations_hash)
		PUT_ARRAY(ep, o, "revocations", v->revocations, nrev, revocation_json);
	if (full || v->whatif_version != since->whatif_version)
		PUT_ARRAY(ep, o, "whatif", v->whatif, v->whatif ? count(v->nwhatif, INT_MAX) : 0,
		          whatif_json);

	cJSON *servers = cJSON_CreateArray();
	for (int i = 0; servers && v->servers && i < count(v->nservers, INT_MAX) && e.ok; i++) {
		const struct sd_view_server *s = &v->servers[i];
		double after = full ? -2 : mark_ips_t(since, s->id, i);
		cJSON *x = server_json(ep, s, after, full || after < -1);
		if (x && !cJSON_AddItemToArray(servers, x)) {
			cJSON_Delete(x);
			e.ok = 0;
		}
	}
	put(ep, o, "servers", servers);
	put_series(ep, o, "throughput", &v->throughput, full ? -2 : since->throughput_t, full);
	put_series(ep, o, "loss_hist", &v->loss_hist, full ? -2 : since->loss_t, full);
	put_series(ep, o, "acc_hist", &v->acc_hist, full ? -2 : since->acc_t, full);

	if (!e.ok) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

void sd_view_mark_set(struct sd_view_mark *m, const struct sd_view *v)
{
	int noffers = v->offers ? count(v->noffers, INT_MAX) : 0;
	int nrev = v->revocations ? count(v->nrevocations, INT_MAX) : 0;
	m->valid = 1;
	m->offers_hash = bytes_hash(v->offers, (size_t)noffers * sizeof *v->offers);
	m->revocations_hash = bytes_hash(v->revocations, (size_t)nrev * sizeof *v->revocations);
	m->whatif_version = v->whatif_version;
	m->throughput_t = series_newest(&v->throughput);
	m->loss_t = series_newest(&v->loss_hist);
	m->acc_t = series_newest(&v->acc_hist);
	/* Servers past the bound are not marked: a change set sends their
	 * series whole (and a mirror refuses that many anyway). */
	m->nservers = v->servers ? count(v->nservers, SD_VIEW_CODEC_MAX_SERVERS) : 0;
	for (int i = 0; i < m->nservers; i++) {
		size_t n = strnlen(v->servers[i].id, sizeof m->servers[i].id - 1);
		memcpy(m->servers[i].id, v->servers[i].id, n);
		memset(m->servers[i].id + n, 0, sizeof m->servers[i].id - n);
		m->servers[i].ips_t = series_newest(&v->servers[i].ips);
	}
}

/* ---- the mirror ------------------------------------------------------------ */

void sd_view_mirror_init(struct sd_view_mirror *m)
{
	memset(m, 0, sizeof *m);
	m->v.eta_s = -1;
	m->v.test_accuracy = -1;
	m->v.val_loss = -1;
}

void sd_view_mirror_free(struct sd_view_mirror *m)
{
	free(m->v.offers);
	free(m->v.servers);
	free(m->v.revocations);
	free(m->v.whatif);
	memset(m, 0, sizeof *m);
}

/* Where a field sits, for the error: "view.servers[3]" and "rank". */
#define PATH_MAX_LEN 64

static const cJSON *need(const cJSON *o, const char *path, const char *name, char **why)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, name);
	if (!x)
		sd_why(why, "%s.%s: missing", path, name);
	return x;
}

static int get_str(const cJSON *o, const char *path, const char *name, char *dst, size_t cap,
                   char **why)
{
	const cJSON *x = need(o, path, name, why);
	if (!x)
		return -1;
	if (!cJSON_IsString(x) || !x->valuestring)
		return sd_why(why, "%s.%s: expected a string", path, name);
	size_t n = strlen(x->valuestring);
	if (n >= cap)
		return sd_why(why, "%s.%s: a string of %zu bytes, the limit is %zu", path, name, n,
		              cap - 1);
	memcpy(dst, x->valuestring, n);
	memset(dst + n, 0, cap - n);
	return 0;
}

/* An integral JSON number in [lo, hi]. */
static int get_integer(const cJSON *o, const char *path, const char *name, double lo, double hi,
                       double *out, char **why)
{
	const cJSON *x = need(o, path, name, why);
	if (!x)
		return -1;
	if (!cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble))
		return sd_why(why, "%s.%s: expected an integer", path, name);
	if (x->valuedouble < lo || x->valuedouble > hi)
		return sd_why(why, "%s.%s: %.17g is out of range", path, name, x->valuedouble);
	*out = x->valuedouble;
	return 0;
}

static int get_int(const cJSON *o, const char *path, const char *name, int *dst, char **why)
{
	double d;
	if (get_integer(o, path, name, INT_MIN, INT_MAX, &d, why) < 0)
		return -1;
	*dst = (int)d;
	return 0;
}

static int get_long(const cJSON *o, const char *path, const char *name, long *dst, char **why)
{
	double d;
	/* Doubles hold every integer up to 2^53 exactly; the encoder sent a long. */
	if (get_integer(o, path, name, -9007199254740992.0, 9007199254740992.0, &d, why) < 0)
		return -1;
	*dst = (long)d;
	return 0;
}

static int get_ulong(const cJSON *o, const char *path, const char *name, unsigned long *dst,
                     char **why)
{
	double d;
	if (get_integer(o, path, name, 0, 9007199254740992.0, &d, why) < 0)
		return -1;
	*dst = (unsigned long)d;
	return 0;
}

/* A number, or null (or a number too big for a double) for unknown. */
static int get_num(const cJSON *o, const char *path, const char *name, double unknown,
                   double *dst, char **why)
{
	const cJSON *x = need(o, path, name, why);
	if (!x)
		return -1;
	if (cJSON_IsNull(x)) {
		*dst = unknown;
		return 0;
	}
	if (!cJSON_IsNumber(x))
		return sd_why(why, "%s.%s: expected a number or null", path, name);
	*dst = isfinite(x->valuedouble) ? x->valuedouble : unknown;
	return 0;
}

#define GET_STR(o, path, st, field) \
	get_str((o), (path), #field, (st)->field, sizeof (st)->field, why)
#define GET_INT(o, path, st, field) get_int((o), (path), #field, &(st)->field, why)
#define GET_LONG(o, path, st, field) get_long((o), (path), #field, &(st)->field, why)
#define GET_NUM(o, path, st, field) get_num((o), (path), #field, 0, &(st)->field, why)
#define GET_NUM_U(o, path, st, field, u) get_num((o), (path), #field, (u), &(st)->field, why)

/* Reads a series object into s: replaces it when replace (or the object
 * says "replace":true), else appends the samples newer than its newest. */
static int get_series(const cJSON *o, const char *path, const char *name,
                      struct sd_view_series *s, int replace, char **why)
{
	const cJSON *x = need(o, path, name, why);
	if (!x)
		return -1;
	if (!cJSON_IsObject(x))
		return sd_why(why, "%s.%s: expected an object {\"t\":[...],\"v\":[...]}", path, name);
	const cJSON *ts = cJSON_GetObjectItemCaseSensitive(x, "t");
	const cJSON *vs = cJSON_GetObjectItemCaseSensitive(x, "v");
	if (!cJSON_IsArray(ts) || !cJSON_IsArray(vs))
		return sd_why(why, "%s.%s: expected arrays t and v", path, name);
	const cJSON *rep = cJSON_GetObjectItemCaseSensitive(x, "replace");
	if (rep && !cJSON_IsBool(rep))
		return sd_why(why, "%s.%s.replace: expected true or false", path, name);
	int nt = cJSON_GetArraySize(ts), nv = cJSON_GetArraySize(vs);
	if (nt != nv)
		return sd_why(why, "%s.%s: t has %d samples, v has %d", path, name, nt, nv);
	if (nt > SD_VIEW_HIST)
		return sd_why(why, "%s.%s: %d samples, the limit is %d", path, name, nt, SD_VIEW_HIST);
	double t[SD_VIEW_HIST];
	float v[SD_VIEW_HIST];
	const cJSON *a = ts->child, *b = vs->child;
	for (int k = 0; k < nt; k++, a = a->next, b = b->next) {
		if (!cJSON_IsNumber(a) || !isfinite(a->valuedouble))
			return sd_why(why, "%s.%s.t[%d]: expected a number", path, name, k);
		if (cJSON_IsNull(b))
			v[k] = 0;
		else if (cJSON_IsNumber(b))
			/* Out of a float's range is as unknown as non-finite (and
			 * converting it would be undefined behaviour). */
			v[k] = fabs(b->valuedouble) <= FLT_MAX ? (float)b->valuedouble : 0;
		else
			return sd_why(why, "%s.%s.v[%d]: expected a number or null", path, name, k);
		t[k] = a->valuedouble;
	}
	if (replace || cJSON_IsTrue(rep)) {
		memset(s, 0, sizeof *s);
		for (int k = 0; k < nt; k++)
			sd_view_series_push(s, t[k], v[k]);
		return 0;
	}
	/* A snapshot taken between two broadcasts already holds the start of
	 * the next change set: skip what is not newer than what we have. */
	int head, len;
	series_range(s, &head, &len);
	s->head = head;
	s->len = len;
	for (int k = 0; k < nt; k++) {
		if (s->len && !(t[k] > s->t[(s->head + s->len - 1) % SD_VIEW_HIST]))
			continue;
		sd_view_series_push(s, t[k], v[k]);
	}
	return 0;
}

static int get_offer(const cJSON *o, const char *p, struct sd_view_offer *f, char **why)
{
	if (GET_STR(o, p, f, id) < 0 || GET_STR(o, p, f, provider) < 0 ||
	    GET_STR(o, p, f, region) < 0 || GET_STR(o, p, f, zone) < 0 ||
	    GET_STR(o, p, f, gpu) < 0 || GET_INT(o, p, f, gpus) < 0 ||
	    GET_INT(o, p, f, transient) < 0 || GET_NUM_U(o, p, f, usd_per_hour, NAN) < 0 ||
	    GET_NUM_U(o, p, f, images_per_sec, NAN) < 0 || GET_NUM_U(o, p, f, usd_per_mimage, NAN) < 0 ||
	    GET_NUM_U(o, p, f, p_revoked_1h, NAN) < 0 || GET_INT(o, p, f, p_revoked_modelled) < 0 ||
	    GET_INT(o, p, f, available) < 0 ||
	    GET_INT(o, p, f, price_estimated) < 0 || GET_INT(o, p, f, speed_estimated) < 0)
		return -1;
	return 0;
}

static int get_revocation(const cJSON *o, const char *p, struct sd_view_revocation *r, char **why)
{
	if (GET_NUM(o, p, r, t) < 0 || GET_STR(o, p, r, server) < 0 ||
	    GET_STR(o, p, r, zone) < 0 || GET_STR(o, p, r, gpu) < 0 ||
	    GET_NUM(o, p, r, lifetime_s) < 0 || GET_NUM(o, p, r, notice_s) < 0 ||
	    GET_LONG(o, p, r, steps_lost) < 0 || GET_NUM_U(o, p, r, recovery_s, -1) < 0 ||
	    GET_STR(o, p, r, replaced_by) < 0)
		return -1;
	return 0;
}

static int get_whatif(const cJSON *o, const char *p, struct sd_view_whatif *w, char **why)
{
	if (GET_STR(o, p, w, label) < 0 || GET_INT(o, p, w, current) < 0 ||
	    GET_INT(o, p, w, servers) < 0 || GET_INT(o, p, w, transient) < 0 ||
	    GET_NUM(o, p, w, time_p50_s) < 0 || GET_NUM(o, p, w, time_p90_s) < 0 ||
	    GET_NUM(o, p, w, cost_p50_usd) < 0 || GET_NUM(o, p, w, cost_p90_usd) < 0 ||
	    GET_NUM(o, p, w, revocations) < 0 || GET_NUM(o, p, w, failed) < 0 ||
	    GET_INT(o, p, w, pareto) < 0 || GET_STR(o, p, w, summary) < 0 ||
	    GET_STR(o, p, w, commands) < 0)
		return -1;
	return 0;
}

/* The server fields; the ips series is the caller's (it needs the id). */
static int get_server(const cJSON *o, const char *p, struct sd_view_server *s, char **why)
{
	if (GET_STR(o, p, s, id) < 0 || GET_STR(o, p, s, offer) < 0 ||
	    GET_STR(o, p, s, zone) < 0 || GET_STR(o, p, s, gpu) < 0 ||
	    GET_STR(o, p, s, precision) < 0 ||
	    GET_INT(o, p, s, transient) < 0 || GET_INT(o, p, s, local) < 0 ||
	    GET_STR(o, p, s, state) < 0 || GET_INT(o, p, s, rank) < 0 ||
	    GET_NUM(o, p, s, images_per_sec) < 0 || GET_NUM(o, p, s, compute_ms) < 0 ||
	    GET_NUM(o, p, s, comm_ms) < 0 || GET_NUM(o, p, s, uptime_s) < 0 ||
	    GET_NUM_U(o, p, s, usd_per_hour, NAN) < 0 || GET_INT(o, p, s, price_estimated) < 0 ||
	    GET_NUM_U(o, p, s, usd_so_far, NAN) < 0 || GET_INT(o, p, s, emulated) < 0 ||
	    GET_NUM(o, p, s, notice_left_s) < 0)
		return -1;
	return 0;
}

/* The array field name of o (required when required, else may be absent:
 * *arr stays NULL and *present 0), each element an object read by fn into a
 * new array of elem bytes each (caller frees). */
static int get_array(const cJSON *o, const char *name, int required, int max, size_t elem,
                     int (*fn)(const cJSON *, const char *, void *, char **), void **arr, int *n,
                     int *present, char **why)
{
	*arr = NULL;
	*n = 0;
	*present = 0;
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, name);
	if (!a)
		return required ? sd_why(why, "view.%s: missing", name) : 0;
	if (!cJSON_IsArray(a))
		return sd_why(why, "view.%s: expected an array", name);
	int count_ = cJSON_GetArraySize(a);
	if (count_ > max)
		return sd_why(why, "view.%s: %d entries, the limit is %d", name, count_, max);
	char *out = count_ ? sd_calloc((size_t)count_, elem) : NULL;
	int i = 0;
	for (const cJSON *x = a->child; x; x = x->next, i++) {
		char path[PATH_MAX_LEN];
		snprintf(path, sizeof path, "view.%s[%d]", name, i);
		if (!cJSON_IsObject(x)) {
			free(out);
			return sd_why(why, "%s: expected an object", path);
		}
		if (fn(x, path, out + (size_t)i * elem, why) < 0) {
			free(out);
			return -1;
		}
	}
	*arr = out;
	*n = count_;
	*present = 1;
	return 0;
}

static int offer_fn(const cJSON *o, const char *p, void *dst, char **why)
{
	return get_offer(o, p, dst, why);
}

static int revocation_fn(const cJSON *o, const char *p, void *dst, char **why)
{
	return get_revocation(o, p, dst, why);
}

static int whatif_fn(const cJSON *o, const char *p, void *dst, char **why)
{
	return get_whatif(o, p, dst, why);
}

/* The scalar fields into nv. */
static int get_scalars(const cJSON *o, struct sd_view *nv, char **why)
{
	const char *p = "view";
	struct sd_view *v = nv;
	if (GET_STR(o, p, v, job) < 0 || GET_LONG(o, p, v, step) < 0 ||
	    GET_LONG(o, p, v, total_steps) < 0 || GET_INT(o, p, v, epoch) < 0 ||
	    GET_INT(o, p, v, epochs) < 0 || GET_NUM(o, p, v, loss) < 0 ||
	    GET_NUM_U(o, p, v, test_accuracy, -1) < 0 || GET_INT(o, p, v, unit_tokens) < 0 ||
	    GET_NUM_U(o, p, v, val_loss, -1) < 0 || GET_NUM(o, p, v, images_per_sec) < 0 ||
	    GET_NUM(o, p, v, elapsed_s) < 0 || GET_NUM_U(o, p, v, eta_s, -1) < 0 ||
	    GET_NUM(o, p, v, usd_spent) < 0 || GET_NUM(o, p, v, usd_per_hour) < 0 ||
	    GET_INT(o, p, v, spent_unpriced) < 0 || GET_INT(o, p, v, rate_unpriced) < 0 ||
	    GET_INT(o, p, v, spent_estimated) < 0 || GET_INT(o, p, v, rate_estimated) < 0 ||
	    GET_NUM(o, p, v, usd_saved) < 0 || GET_INT(o, p, v, usd_saved_estimated) < 0 ||
	    GET_INT(o, p, v, paused) < 0 || GET_LONG(o, p, v, generation) < 0 ||
	    GET_INT(o, p, v, world_size) < 0 || GET_INT(o, p, v, simulated) < 0 ||
	    GET_STR(o, p, v, provider) < 0 || GET_STR(o, p, v, catalog) < 0 ||
	    GET_NUM(o, p, v, hazard_scale) < 0 || GET_NUM(o, p, v, boot_scale) < 0 ||
	    GET_STR(o, p, v, message) < 0 || GET_STR(o, p, v, suggestion) < 0 ||
	    GET_STR(o, p, v, suggestion_for) < 0 || GET_STR(o, p, v, suggestion_why) < 0 ||
	    GET_INT(o, p, v, whatif_busy) < 0 ||
	    get_ulong(o, p, "whatif_version", &v->whatif_version, why) < 0 ||
	    GET_STR(o, p, v, whatif_note) < 0 || GET_INT(o, p, v, clients) < 0 ||
	    GET_INT(o, p, v, read_only) < 0 || GET_STR(o, p, v, ended) < 0 ||
	    GET_STR(o, p, v, orphans_question) < 0 || GET_INT(o, p, v, orphans_asked) < 0 ||
	    GET_INT(o, p, v, autopilot_on) < 0 || GET_STR(o, p, v, autopilot_goal) < 0 ||
	    GET_NUM(o, p, v, autopilot_p) < 0 || GET_STR(o, p, v, autopilot_pending) < 0 ||
	    GET_NUM(o, p, v, autopilot_pending_at) < 0)
		return -1;

	const cJSON *seed = need(o, p, "seed", why);
	if (!seed)
		return -1;
	char *end = NULL;
	if (!cJSON_IsString(seed) || !seed->valuestring || !seed->valuestring[0] ||
	    seed->valuestring[0] < '0' || seed->valuestring[0] > '9' || strlen(seed->valuestring) > 20)
		return sd_why(why, "view.seed: expected a decimal string");
	unsigned long long s = strtoull(seed->valuestring, &end, 10);
	if (*end || (s == ULLONG_MAX && strcmp(seed->valuestring, "18446744073709551615") != 0))
		return sd_why(why, "view.seed: expected a decimal string of at most 2^64-1");
	v->seed = (uint64_t)s;

	const cJSON *marks = need(o, p, "revocation_marks", why);
	if (!marks)
		return -1;
	if (!cJSON_IsArray(marks))
		return sd_why(why, "view.revocation_marks: expected an array");
	int n = cJSON_GetArraySize(marks);
	int cap = (int)(sizeof v->revocation_marks / sizeof v->revocation_marks[0]);
	if (n > cap)
		return sd_why(why, "view.revocation_marks: %d entries, the limit is %d", n, cap);
	memset(v->revocation_marks, 0, sizeof v->revocation_marks);
	int i = 0;
	for (const cJSON *x = marks->child; x; x = x->next, i++) {
		if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble))
			return sd_why(why, "view.revocation_marks[%d]: expected a number", i);
		v->revocation_marks[i] = x->valuedouble;
	}
	v->nmarks = n;
	return 0;
}

/* The old server with id (NULL if none); hint: the index to try first. */
static const struct sd_view_server *old_server(const struct sd_view *v, const char *id, int hint)
{
	if (!v->servers)
		return NULL;
	if (hint < v->nservers && strcmp(v->servers[hint].id, id) == 0)
		return &v->servers[hint];
	for (int j = 0; j < v->nservers; j++)
		if (strcmp(v->servers[j].id, id) == 0)
			return &v->servers[j];
	return NULL;
}

static int get_servers(const cJSON *o, const struct sd_view *old, int full,
                       struct sd_view_server **arr, int *n, char **why)
{
	*arr = NULL;
	*n = 0;
	const cJSON *a = need(o, "view", "servers", why);
	if (!a)
		return -1;
	if (!cJSON_IsArray(a))
		return sd_why(why, "view.servers: expected an array");
	int count_ = cJSON_GetArraySize(a);
	if (count_ > SD_VIEW_CODEC_MAX_SERVERS)
		return sd_why(why, "view.servers: %d entries, the limit is %d", count_,
		              SD_VIEW_CODEC_MAX_SERVERS);
	struct sd_view_server *out = count_ ? sd_calloc((size_t)count_, sizeof *out) : NULL;
	int i = 0;
	for (const cJSON *x = a->child; x; x = x->next, i++) {
		char path[PATH_MAX_LEN];
		snprintf(path, sizeof path, "view.servers[%d]", i);
		if (!cJSON_IsObject(x)) {
			free(out);
			return sd_why(why, "%s: expected an object", path);
		}
		if (get_server(x, path, &out[i], why) < 0) {
			free(out);
			return -1;
		}
		/* Its history so far, then what this object adds to it. */
		const struct sd_view_server *was = full ? NULL : old_server(old, out[i].id, i);
		if (was)
			out[i].ips = was->ips;
		if (get_series(x, path, "ips", &out[i].ips, full, why) < 0) {
			free(out);
			return -1;
		}
	}
	*arr = out;
	*n = count_;
	return 0;
}

int sd_view_mirror_apply(struct sd_view_mirror *m, const cJSON *view, int full, char **why)
{
	if (!cJSON_IsObject(view))
		return sd_why(why, "view: expected an object");
	/* Build the new state beside the old one; swap only when all is read. */
	struct sd_view nv = m->v;
	struct sd_view_offer *offers = NULL;
	struct sd_view_revocation *revs = NULL;
	struct sd_view_whatif *whatif = NULL;
	struct sd_view_server *servers = NULL;
	int noffers = 0, nrevs = 0, nwhatif = 0, nservers = 0;
	int has_offers = 0, has_revs = 0, has_whatif = 0;
	void *arr;

	if (get_scalars(view, &nv, why) < 0)
		goto fail;
	if (get_array(view, "offers", full, SD_VIEW_CODEC_MAX_OFFERS, sizeof *offers, offer_fn, &arr,
	              &noffers, &has_offers, why) < 0)
		goto fail;
	offers = arr;
	if (get_array(view, "revocations", full, SD_VIEW_CODEC_MAX_REVOCATIONS, sizeof *revs,
	              revocation_fn, &arr, &nrevs, &has_revs, why) < 0)
		goto fail;
	revs = arr;
	if (get_array(view, "whatif", full, SD_VIEW_CODEC_MAX_WHATIF, sizeof *whatif, whatif_fn,
	              &arr, &nwhatif, &has_whatif, why) < 0)
		goto fail;
	whatif = arr;
	if (get_servers(view, &m->v, full, &servers, &nservers, why) < 0)
		goto fail;
	if (get_series(view, "view", "throughput", &nv.throughput, full, why) < 0 ||
	    get_series(view, "view", "loss_hist", &nv.loss_hist, full, why) < 0 ||
	    get_series(view, "view", "acc_hist", &nv.acc_hist, full, why) < 0)
		goto fail;

	if (has_offers) {
		free(m->v.offers);
		nv.offers = offers;
		nv.noffers = noffers;
		m->cap_offers = noffers;
	}
	if (has_revs) {
		free(m->v.revocations);
		nv.revocations = revs;
		nv.nrevocations = nrevs;
		m->cap_revocations = nrevs;
	}
	if (has_whatif) {
		free(m->v.whatif);
		nv.whatif = whatif;
		nv.nwhatif = nwhatif;
		m->cap_whatif = nwhatif;
	}
	free(m->v.servers);
	nv.servers = servers;
	nv.nservers = nservers;
	m->cap_servers = nservers;
	nv.version = m->v.version + 1;
	m->v = nv;
	return 0;

fail:
	free(offers);
	free(revs);
	free(whatif);
	free(servers);
	return -1;
}
