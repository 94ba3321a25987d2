/* tests/app/test-view-codec.c - the control socket's view codec
 * (src/app/view-codec.c): a realistic view (tests/ui-fixture.c, ticked until
 * its ring series wrapped, with what-if rows and strings of the longest
 * length each field holds) goes through JSON text into a mirror and comes
 * out equal, field by field; so do change sets after samples, a new
 * server, a dropped one, a revocation and a changed revocation; a snapshot
 * taken after the mark followed by the change set duplicates no sample; a
 * change set for 64 servers is a fraction of the full view; bad views are
 * refused naming the field, and leave the mirror as it was. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/app/view-codec.h"
#include "tests/check.h"
#include "tests/ui-fixture.h"

/* ---- comparing views ------------------------------------------------------- */

/* The series with its samples from index 0 and nothing past them, so that
 * two rings holding the same samples compare equal byte for byte. */
static void series_flat(struct sd_view_series *s)
{
	struct sd_view_series out;
	memset(&out, 0, sizeof out);
	for (int k = 0; k < s->len; k++) {
		int i = (s->head + k) % SD_VIEW_HIST;
		out.t[k] = s->t[i];
		out.v[k] = s->v[i];
	}
	out.len = s->len;
	*s = out;
}

#define ZTAIL(x, f) do { \
	size_t n_ = strnlen((x)->f, sizeof (x)->f); \
	memset((x)->f + n_, 0, sizeof (x)->f - n_); \
} while (0)

static void offer_flat(struct sd_view_offer *o)
{
	ZTAIL(o, id); ZTAIL(o, provider); ZTAIL(o, region); ZTAIL(o, zone); ZTAIL(o, gpu);
}

static void server_flat(struct sd_view_server *s)
{
	ZTAIL(s, id); ZTAIL(s, offer); ZTAIL(s, zone); ZTAIL(s, gpu); ZTAIL(s, state);
	series_flat(&s->ips);
}

static void revocation_flat(struct sd_view_revocation *r)
{
	ZTAIL(r, server); ZTAIL(r, zone); ZTAIL(r, gpu);
}

static void whatif_flat(struct sd_view_whatif *w)
{
	ZTAIL(w, label); ZTAIL(w, summary); ZTAIL(w, commands);
}

/* Compares n elements of size sz after flat() on copies; says which differs. */
static int arrays_equal(const char *what, const void *a, const void *b, int n, size_t sz,
                        void (*flat)(void *))
{
	int ok = 1;
	char *x = malloc(sz), *y = malloc(sz);
	for (int i = 0; i < n; i++) {
		memcpy(x, (const char *)a + (size_t)i * sz, sz);
		memcpy(y, (const char *)b + (size_t)i * sz, sz);
		flat(x);
		flat(y);
		if (memcmp(x, y, sz) != 0) {
			size_t at = 0;
			while (x[at] == y[at])
				at++;
			fprintf(stderr, "  %s[%d] differs at byte %zu (%02x vs %02x)\n", what, i, at, (unsigned char)x[at], (unsigned char)y[at]);
			ok = 0;
		}
	}
	free(x);
	free(y);
	return ok;
}

static void offer_flat_v(void *p) { offer_flat(p); }
static void server_flat_v(void *p) { server_flat(p); }
static void revocation_flat_v(void *p) { revocation_flat(p); }
static void whatif_flat_v(void *p) { whatif_flat(p); }

/* Whether the mirror shows what the source holds: every field but the
 * version (the mirror keeps its own) and the arrays' addresses. */
static int views_equal(const struct sd_view *src, const struct sd_view *mir, const char *when)
{
	int ok = 1;
	struct sd_view a = *src, b = *mir;
	if (a.noffers != b.noffers || a.nservers != b.nservers ||
	    a.nrevocations != b.nrevocations || a.nwhatif != b.nwhatif) {
		fprintf(stderr, "  %s: counts differ: offers %d/%d servers %d/%d revocations %d/%d "
		        "whatif %d/%d\n", when, a.noffers, b.noffers, a.nservers, b.nservers,
		        a.nrevocations, b.nrevocations, a.nwhatif, b.nwhatif);
		return 0;
	}
	ok &= arrays_equal("offers", a.offers, b.offers, a.noffers, sizeof *a.offers, offer_flat_v);
	ok &= arrays_equal("servers", a.servers, b.servers, a.nservers, sizeof *a.servers,
	                   server_flat_v);
	ok &= arrays_equal("revocations", a.revocations, b.revocations, a.nrevocations,
	                   sizeof *a.revocations, revocation_flat_v);
	ok &= arrays_equal("whatif", a.whatif, b.whatif, a.nwhatif, sizeof *a.whatif,
	                   whatif_flat_v);
	struct sd_view *vs[2] = { &a, &b };
	for (int k = 0; k < 2; k++) {
		struct sd_view *v = vs[k];
		v->version = 0;
		v->offers = NULL;
		v->servers = NULL;
		v->revocations = NULL;
		v->whatif = NULL;
		series_flat(&v->throughput);
		series_flat(&v->loss_hist);
		series_flat(&v->acc_hist);
		for (int i = v->nmarks; i < 64; i++)
			v->revocation_marks[i] = 0;
		ZTAIL(v, job); ZTAIL(v, provider); ZTAIL(v, catalog); ZTAIL(v, message);
		ZTAIL(v, suggestion); ZTAIL(v, suggestion_for); ZTAIL(v, suggestion_why);
		ZTAIL(v, whatif_note); ZTAIL(v, ended); ZTAIL(v, orphans_question);
	}
	if (memcmp(&a, &b, sizeof a) != 0) {
		size_t at = 0;
		while (((char *)&a)[at] == ((char *)&b)[at])
			at++;
		fprintf(stderr, "  %s: struct sd_view differs at byte %zu\n", when, at);
		ok = 0;
	}
	if (!ok)
		fprintf(stderr, "  (%s)\n", when);
	return ok;
}

/* ---- the source view ------------------------------------------------------- */

static struct sd_view_whatif rows[3];

static void fill_max(char *s, size_t cap, char c)
{
	memset(s, c, cap - 1);
	s[cap - 1] = '\0';
}

/* The fixture with every field set to something recognisable: strings at
 * their longest, a seed above 2^53, what-if rows. */
static void make_view(struct ui_fixture *f, int nservers)
{
	ui_fixture_init(f, nservers);
	struct sd_view *v = &f->view;
	for (int i = 0; i < 37; i++)        /* past SD_VIEW_HIST / 4 ticks: rings wrapped */
		ui_fixture_tick(f, 1.5);
	fill_max(v->job, sizeof v->job, 'j');
	fill_max(v->suggestion_why, sizeof v->suggestion_why, 'w');
	fill_max(v->whatif_note, sizeof v->whatif_note, 'n');
	fill_max(v->ended, sizeof v->ended, 'e');
	fill_max(v->orphans_question, sizeof v->orphans_question, 'q');
	v->orphans_asked = 2;
	fill_max(v->catalog, sizeof v->catalog, 'c');
	fill_max(f->servers[1].id, sizeof f->servers[1].id, 'i');
	fill_max(f->servers[1].offer, sizeof f->servers[1].offer, 'o');
	fill_max(f->offers[0].region, sizeof f->offers[0].region, 'r');
	fill_max(f->revocations[0].server, sizeof f->revocations[0].server, 's');
	snprintf(v->suggestion, sizeof v->suggestion, "gce/us-west1-b/v100x1/spot");
	snprintf(v->suggestion_for, sizeof v->suggestion_for, "s3");
	v->seed = UINT64_MAX - 12345;
	v->step = 1L << 50;
	v->usd_saved = 0.1 + 0.2;           /* not short in decimal: needs %1.17g */
	v->usd_saved_estimated = 1;
	v->spent_unpriced = 2;
	/* A host without a price (the ssh provider): unknown stays unknown,
	 * never $0, in the attached cockpit too. */
	f->offers[2].usd_per_hour = NAN;
	f->offers[2].usd_per_mimage = NAN;
	f->offers[2].images_per_sec = NAN;
	f->offers[2].p_revoked_1h = NAN;
	f->servers[0].usd_per_hour = NAN;
	f->servers[0].usd_so_far = NAN;
	v->rate_estimated = 1;
	v->paused = 1;
	v->clients = 3;
	v->read_only = 1;
	v->whatif_busy = 1;
	v->whatif_version = 7;
	memset(rows, 0, sizeof rows);
	for (int i = 0; i < 3; i++) {
		snprintf(rows[i].label, sizeof rows[i].label, "%dx V100 spot", 2 << i);
		rows[i].current = i == 0;
		rows[i].servers = 2 << i;
		rows[i].transient = 1;
		rows[i].time_p50_s = 3600.0 / (i + 1);
		rows[i].time_p90_s = 4000.0 / (i + 1) + 1e-9;
		rows[i].cost_p50_usd = 1.25 * (i + 1);
		rows[i].cost_p90_usd = 1.5 * (i + 1);
		rows[i].revocations = 0.3 * i;
		rows[i].failed = 0.01 * i;
		rows[i].pareto = i != 1;
		snprintf(rows[i].summary, sizeof rows[i].summary, "add %d x gce/us-west1-b/v100/spot",
		         2 << i);
	}
	fill_max(rows[2].summary, sizeof rows[2].summary, 'm');
	/* Command lines, one per line, at the field's length. */
	for (size_t k = 0; k + 1 < sizeof rows[1].commands; k++)
		rows[1].commands[k] = k % 10 == 9 ? '\n' : "add 1 x"[k % 7];
	v->whatif = rows;
	v->nwhatif = 3;
}

/* obj as text and back, as the socket carries it. */
static cJSON *through_text(const cJSON *obj, size_t *len)
{
	char *s = cJSON_PrintUnformatted(obj);
	if (len)
		*len = strlen(s);
	cJSON *back = cJSON_Parse(s);
	free(s);
	return back;
}

/* The encoded view as the receiver parses it (the encoder writes the
 * series' arrays as raw text, so look at them only after a round). */
static cJSON *encode_parsed(const struct sd_view *v, const struct sd_view_mark *mark)
{
	cJSON *obj = sd_view_encode(v, mark);
	CHECK(obj != NULL);
	cJSON *back = through_text(obj, NULL);
	cJSON_Delete(obj);
	return back;
}

/* Encodes v (full when mark is NULL), applies it to m; returns the text's length. */
static size_t send_view(const struct sd_view *v, const struct sd_view_mark *mark,
                        struct sd_view_mirror *m, const char *when)
{
	cJSON *obj = sd_view_encode(v, mark);
	CHECK(obj != NULL, "%s", when);
	size_t len = 0;
	cJSON *back = through_text(obj, &len);
	char *why = NULL;
	int rc = sd_view_mirror_apply(m, back, mark == NULL, &why);
	CHECK(rc == 0, "%s: %s", when, why ? why : "");
	free(why);
	cJSON_Delete(back);
	cJSON_Delete(obj);
	return len;
}

static const cJSON *item(const cJSON *o, const char *name)
{
	return cJSON_GetObjectItemCaseSensitive(o, name);
}

static cJSON *mitem(cJSON *o, const char *name)
{
	return cJSON_GetObjectItemCaseSensitive(o, name);
}

static int series_samples(const cJSON *series)
{
	return cJSON_GetArraySize(item(series, "t"));
}

/* ---- the tests ------------------------------------------------------------- */

static void test_full_round_trip(void)
{
	static struct ui_fixture f;
	make_view(&f, 6);
	CHECK(f.view.throughput.head != 0 && f.servers[0].ips.head != 0, "the rings wrapped");
	struct sd_view_mirror m;
	sd_view_mirror_init(&m);
	send_view(&f.view, NULL, &m, "full");
	check_report(views_equal(&f.view, &m.v, "full"), "full form: every field round-trips");
	CHECK_INT(m.v.version, 1);
	CHECK_INT(m.v.seed, UINT64_MAX - 12345);
	CHECK_INT(m.v.throughput.len, SD_VIEW_HIST);
	CHECK_STR(m.v.whatif[1].commands, rows[1].commands);

	/* Non-finite figures arrive as the field's "unknown". */
	f.view.eta_s = NAN;
	f.view.test_accuracy = INFINITY;
	f.view.loss = NAN;
	f.servers[0].compute_ms = NAN;
	f.revocations[1].recovery_s = NAN;
	f.revocations[2].lifetime_s = -INFINITY;
	send_view(&f.view, NULL, &m, "non-finite");
	CHECK(m.v.eta_s == -1 && m.v.test_accuracy == -1 && m.v.loss == 0,
	      "eta %g acc %g loss %g", m.v.eta_s, m.v.test_accuracy, m.v.loss);
	CHECK(m.v.servers[0].compute_ms == 0);
	CHECK(m.v.revocations[1].recovery_s == -1 && m.v.revocations[2].lifetime_s == 0);
	CHECK_INT(m.v.version, 2);

	/* A number too big for a double reads as inf: unknown too. */
	cJSON *obj = encode_parsed(&f.view, NULL);
	cJSON_ReplaceItemInObject(obj, "usd_spent", cJSON_CreateRaw("1e999"));
	cJSON_ReplaceItemInObject(obj, "eta_s", cJSON_CreateRaw("-1e999"));
	cJSON *back = through_text(obj, NULL);
	char *why = NULL;
	CHECK(sd_view_mirror_apply(&m, back, 1, &why) == 0, "%s", why ? why : "");
	CHECK(m.v.usd_spent == 0 && m.v.eta_s == -1, "usd_spent %g eta %g", m.v.usd_spent,
	      m.v.eta_s);
	free(why);
	cJSON_Delete(back);
	cJSON_Delete(obj);
	sd_view_mirror_free(&m);
}

static void test_change_sets(void)
{
	static struct ui_fixture f;
	make_view(&f, 6);
	struct sd_view *v = &f.view;
	struct sd_view_mirror m;
	sd_view_mirror_init(&m);
	struct sd_view_mark mark;
	memset(&mark, 0, sizeof mark);

	/* The server's order: a snapshot on attach, then per tick the changes
	 * since the mark and the mark moved. */
	send_view(v, NULL, &m, "attach");
	sd_view_mark_set(&mark, v);

	ui_fixture_tick(&f, 1.5);
	cJSON *obj = encode_parsed(v, &mark);
	CHECK(item(obj, "offers") == NULL, "unchanged offers are not sent");
	CHECK(item(obj, "revocations") == NULL, "unchanged revocations are not sent");
	CHECK(item(obj, "whatif") == NULL, "unchanged what-if rows are not sent");
	CHECK_INT(series_samples(item(obj, "throughput")), 1);
	CHECK_INT(series_samples(item(item(obj, "servers")->child, "ips")), 1);
	cJSON_Delete(obj);
	send_view(v, &mark, &m, "tick");
	sd_view_mark_set(&mark, v);
	check_report(views_equal(v, &m.v, "tick"), "change set after a tick: mirror equal");

	/* A new server, a revocation, a dropped server, a changed revocation,
	 * new what-if rows, a price move. */
	const char *added = ui_fixture_add(&f, "gce/us-west1-b/k80x1/spot");
	CHECK(added != NULL);
	for (int i = 0; i < 6; i++)
		ui_fixture_tick(&f, 1.5);
	CHECK(ui_fixture_revoke(&f, "s3") == 0);
	f.revocations[2].recovery_s = 4.25;
	memmove(&f.servers[4], &f.servers[5], sizeof f.servers[0] * (size_t)(v->nservers - 5));
	v->nservers--;
	rows[0].cost_p50_usd = 9.5;
	v->whatif_version++;
	f.offers[1].usd_per_hour *= 1.1;
	obj = encode_parsed(v, &mark);
	CHECK(item(obj, "offers") != NULL && item(obj, "revocations") != NULL &&
	      item(obj, "whatif") != NULL, "changed arrays are sent");
	/* The new server came with its whole history, the others with 6 ticks'. */
	const cJSON *s;
	int seen_new = 0;
	cJSON_ArrayForEach(s, item(obj, "servers")) {
		const char *id = item(s, "id")->valuestring;
		int n = series_samples(item(s, "ips"));
		if (strcmp(id, added) == 0) {
			seen_new = 1;
			CHECK(n > 0 && n < 6, "the new server trained for a few ticks: %d samples", n);
		} else if (strcmp(item(s, "state")->valuestring, "training") == 0) {
			CHECK_INT(n, 6);
		}
	}
	CHECK(seen_new);
	cJSON_Delete(obj);
	send_view(v, &mark, &m, "add/revoke/drop");
	sd_view_mark_set(&mark, v);
	check_report(views_equal(v, &m.v, "add/revoke/drop"),
	             "change set with a new server, a revocation, a dropped server: mirror equal");
	CHECK_INT(m.v.version, 3);

	/* The run's clock started again (a resume): the series are replaced. */
	memset(&v->throughput, 0, sizeof v->throughput);
	for (int i = 0; i < 5; i++)
		sd_view_series_push(&v->throughput, 1.0 + i, 100.0f * (float)i);
	obj = encode_parsed(v, &mark);
	CHECK(cJSON_IsTrue(item(item(obj, "throughput"), "replace")));
	cJSON_Delete(obj);
	send_view(v, &mark, &m, "clock restarted");
	sd_view_mark_set(&mark, v);
	check_report(views_equal(v, &m.v, "clock restarted"), "a series that went back is replaced");
	sd_view_mirror_free(&m);
}

/* A client that attaches between two broadcasts gets a snapshot holding
 * samples the next change set carries again. */
static void test_overlap(void)
{
	static struct ui_fixture f;
	make_view(&f, 5);
	struct sd_view *v = &f.view;
	struct sd_view_mark mark;
	memset(&mark, 0, sizeof mark);
	sd_view_mark_set(&mark, v);         /* the last broadcast */

	ui_fixture_tick(&f, 1.5);
	ui_fixture_tick(&f, 1.5);
	struct sd_view_mirror late;
	sd_view_mirror_init(&late);
	send_view(v, NULL, &late, "late snapshot");   /* attaches now */
	ui_fixture_tick(&f, 1.5);

	cJSON *obj = encode_parsed(v, &mark);
	/* 3 ticks since the mark, of which the snapshot has 2. */
	CHECK_INT(series_samples(item(obj, "throughput")), 3);
	cJSON_Delete(obj);
	send_view(v, &mark, &late, "change set after the snapshot");
	check_report(views_equal(v, &late.v, "overlap"),
	             "snapshot after the mark, then the change set: no duplicated sample");
	CHECK_INT(late.v.throughput.len, SD_VIEW_HIST);
	int dup = 0;
	for (int k = 1; k < late.v.throughput.len; k++) {
		int i = (late.v.throughput.head + k) % SD_VIEW_HIST;
		int j = (late.v.throughput.head + k - 1) % SD_VIEW_HIST;
		dup += !(late.v.throughput.t[i] > late.v.throughput.t[j]);
	}
	CHECK_INT(dup, 0);
	sd_view_mirror_free(&late);
}

static void test_sizes(void)
{
	static struct ui_fixture f;
	make_view(&f, 64);
	struct sd_view *v = &f.view;
	struct sd_view_mark mark;
	memset(&mark, 0, sizeof mark);
	struct sd_view_mirror m;
	sd_view_mirror_init(&m);
	size_t full = send_view(v, NULL, &m, "64 servers full");
	sd_view_mark_set(&mark, v);
	ui_fixture_tick(&f, 0.2);
	size_t change = send_view(v, &mark, &m, "64 servers change");
	sd_view_mark_set(&mark, v);
	printf("64 servers: full view %zu bytes, change set after a tick %zu bytes (%.1f%%)\n", full,
	       change, 100.0 * (double)change / (double)full);
	/* Every server's fields go each tick (the header's design: about 360
	 * bytes each, half of them names), its samples only once: 120 per
	 * series, 67 series, in the full view; one each here. */
	CHECK(change * 4 < full, "change %zu, full %zu", change, full);
	CHECK(change < 64 * 400 + 2000, "change %zu bytes", change);
	check_report(views_equal(v, &m.v, "64 servers"), "64 servers: mirror equal after a change set");
	sd_view_mirror_free(&m);
}

/* Applies text to m and expects a refusal whose why names field. */
static void expect_refused(struct sd_view_mirror *m, const char *text, int full, const char *field)
{
	cJSON *obj = cJSON_Parse(text);
	CHECK(obj != NULL);
	char *why = NULL;
	unsigned long version = m->v.version;
	int rc = sd_view_mirror_apply(m, obj, full, &why);
	check_report(rc == -1 && why && strstr(why, field) && !strchr(why, '\n'),
	             "refused, naming %s: %s", field, why ? why : "(accepted)");
	CHECK_INT(m->v.version, version);
	free(why);
	cJSON_Delete(obj);
}

/* The full view's text with the first "old" replaced by "new". */
static char *edit(const char *text, const char *old, const char *new)
{
	const char *at = strstr(text, old);
	CHECK(at != NULL, "%s in the view", old);
	if (!at)
		return strdup(text);
	size_t n = strlen(text), lo = strlen(old), ln = strlen(new);
	char *out = malloc(n - lo + ln + 1);
	memcpy(out, text, (size_t)(at - text));
	memcpy(out + (at - text), new, ln);
	memcpy(out + (at - text) + ln, at + lo, n - (size_t)(at - text) - lo + 1);
	return out;
}

static void test_bad_input(void)
{
	static struct ui_fixture f;
	make_view(&f, 4);
	struct sd_view_mirror m;
	sd_view_mirror_init(&m);
	send_view(&f.view, NULL, &m, "before the bad ones");
	struct sd_view before = m.v;
	cJSON *obj = encode_parsed(&f.view, NULL);

	/* Wrong types, one per kind of field. */
	cJSON *s1 = cJSON_GetArrayItem(mitem(obj, "servers"), 1);
	cJSON_ReplaceItemInObject(s1, "rank", cJSON_CreateString("x"));
	char *text = cJSON_PrintUnformatted(obj);
	expect_refused(&m, text, 1, "view.servers[1].rank");
	free(text);
	cJSON_ReplaceItemInObject(s1, "rank", cJSON_CreateNumber(1.5));
	text = cJSON_PrintUnformatted(obj);
	expect_refused(&m, text, 1, "view.servers[1].rank");
	free(text);
	cJSON_ReplaceItemInObject(s1, "rank", cJSON_CreateNumber(1));

	cJSON *o2 = cJSON_GetArrayItem(mitem(obj, "offers"), 2);
	cJSON_ReplaceItemInObject(o2, "usd_per_hour", cJSON_CreateString("cheap"));
	text = cJSON_PrintUnformatted(obj);
	expect_refused(&m, text, 1, "view.offers[2].usd_per_hour");
	free(text);
	cJSON_ReplaceItemInObject(o2, "usd_per_hour", cJSON_CreateNumber(1));

	/* Strings one byte over their field. */
	char longer[1100];
	memset(longer, 'x', sizeof longer);
	longer[sizeof f.view.job] = '\0';
	cJSON_ReplaceItemInObject(obj, "job", cJSON_CreateString(longer));
	text = cJSON_PrintUnformatted(obj);
	expect_refused(&m, text, 1, "view.job: a string of 96 bytes, the limit is 95");
	free(text);
	longer[sizeof f.view.job] = 'x';
	cJSON_ReplaceItemInObject(obj, "job", cJSON_CreateString("j"));
	longer[sizeof rows[0].commands] = '\0';
	cJSON *w0 = cJSON_GetArrayItem(mitem(obj, "whatif"), 0);
	cJSON_ReplaceItemInObject(w0, "commands", cJSON_CreateString(longer));
	text = cJSON_PrintUnformatted(obj);
	expect_refused(&m, text, 1, "view.whatif[0].commands");
	free(text);
	cJSON_ReplaceItemInObject(w0, "commands", cJSON_CreateString(""));
	longer[sizeof f.servers[0].id] = '\0';
	cJSON_ReplaceItemInObject(cJSON_GetArrayItem(mitem(obj, "servers"), 0), "id",
	                          cJSON_CreateString(longer));
	text = cJSON_PrintUnformatted(obj);
	expect_refused(&m, text, 1, "view.servers[0].id");
	free(text);
	cJSON_ReplaceItemInObject(cJSON_GetArrayItem(mitem(obj, "servers"), 0), "id",
	                          cJSON_CreateString("s1"));

	/* The seed as a number (it would lose bits above 2^53). */
	cJSON_ReplaceItemInObject(obj, "seed", cJSON_CreateNumber(42));
	text = cJSON_PrintUnformatted(obj);
	expect_refused(&m, text, 1, "view.seed");
	free(text);
	cJSON_ReplaceItemInObject(obj, "seed", cJSON_CreateString("18446744073709551616"));
	text = cJSON_PrintUnformatted(obj);
	expect_refused(&m, text, 1, "view.seed");
	free(text);
	cJSON_ReplaceItemInObject(obj, "seed", cJSON_CreateString("42"));

	/* Unequal series, a series longer than the ring. */
	char *good = cJSON_PrintUnformatted(obj);
	text = edit(good, "\"ips\":{\"t\":[", "\"ips\":{\"t\":[1,");
	expect_refused(&m, text, 1, "view.servers[0].ips: t has 121 samples, v has 120");
	free(text);
	cJSON *acc = cJSON_Parse("{\"t\":[1,2],\"v\":[3]}");
	cJSON *was = cJSON_DetachItemFromObject(obj, "acc_hist");
	cJSON_AddItemToObject(obj, "acc_hist", acc);
	text = cJSON_PrintUnformatted(obj);
	expect_refused(&m, text, 0, "view.acc_hist: t has 2 samples, v has 1");
	free(text);
	cJSON_DeleteItemFromObject(obj, "acc_hist");
	cJSON_AddItemToObject(obj, "acc_hist", was);
	cJSON *tp = mitem(obj, "throughput");
	cJSON_AddItemToArray(mitem(tp, "t"), cJSON_CreateNumber(1e9));
	cJSON_AddItemToArray(mitem(tp, "v"), cJSON_CreateNumber(1));
	text = cJSON_PrintUnformatted(obj);
	expect_refused(&m, text, 1, "view.throughput: 121 samples, the limit is 120");
	free(text);
	cJSON_DeleteItemFromArray(mitem(tp, "t"), SD_VIEW_HIST);
	cJSON_DeleteItemFromArray(mitem(tp, "v"), SD_VIEW_HIST);

	/* A missing field; a change set with an array that is not one. */
	text = edit(good, "\"step\":", "\"stop\":");
	expect_refused(&m, text, 1, "view.step: missing");
	free(text);
	text = edit(good, "\"offers\":[", "\"offers\":{},\"x\":[");
	expect_refused(&m, text, 0, "view.offers: expected an array");
	free(text);
	free(good);

	/* Too many servers. */
	cJSON *servers = mitem(obj, "servers");
	while (cJSON_GetArraySize(servers) <= SD_VIEW_CODEC_MAX_SERVERS)
		cJSON_AddItemToArray(servers, cJSON_Duplicate(servers->child, 1));
	text = cJSON_PrintUnformatted(obj);
	expect_refused(&m, text, 1, "view.servers: 257 entries, the limit is 256");
	free(text);

	/* Not an object at all. */
	char *why = NULL;
	cJSON *arr = cJSON_CreateArray();
	CHECK(sd_view_mirror_apply(&m, arr, 0, &why) == -1 && why && strstr(why, "view"));
	free(why);
	cJSON_Delete(arr);
	cJSON_Delete(obj);

	/* Nothing of the refused views reached the mirror. */
	check_report(views_equal(&before, &m.v, "after refusals") &&
	             m.v.servers == before.servers,
	             "the refused views left the mirror as it was");
	check_report(views_equal(&f.view, &m.v, "after refusals, against the source"),
	             "and it still equals the source");
	sd_view_mirror_free(&m);
}

int main(void)
{
	test_full_round_trip();
	test_change_sets();
	test_overlap();
	test_sizes();
	test_bad_input();
	return check_exit("test-view-codec");
}
