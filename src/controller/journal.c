/* src/controller/journal.c - the run's journal: events (type, time, t and
 * their fields), shown at once on stdout and to the cockpit, written in
 * ordered batches on the thread pool (each line whole or not at all, a
 * failure said once, the gap marked by journal_resumed). */
#include "config.h"

#include "src/controller/internal.h"

#include "src/run/journal-file.h"

/* A journal event: type, time (Unix seconds), t (seconds since the run
 * started), then ev's fields (ev is consumed; NULL: none).  Caller frees. */
static cJSON *event_new(struct sd_controller *c, enum sd_event_type type, cJSON *ev)
{
	if (!ev)
		ev = cJSON_CreateObject();
	cJSON *out = cJSON_CreateObject();
	cJSON_AddStringToObject(out, "type", sd_event_name(type));
	cJSON_AddNumberToObject(out, "time", floor(ctl_wall_s() * 1000) / 1000);
	cJSON_AddNumberToObject(out, "t", floor(ctl_run_time_s(c) * 1000) / 1000);
	cJSON *item = ev->child;
	while (item) {
		cJSON *next = item->next;
		cJSON_DetachItemViaPointer(ev, item);
		cJSON_AddItemToObject(out, item->string, item);
		item = next;
	}
	cJSON_Delete(ev);
	return out;
}

/* Shows event out of type (printed as s) on stdout when echoing and to
 * on_event, typed: the follower picks its handler by the enum. */
static void event_publish(struct sd_controller *c, enum sd_event_type type, const cJSON *out, const char *s)
{
	if (c->opts.echo_journal) {
		puts(s);
		fflush(stdout);
	}
	if (c->opts.on_event) {
		const cJSON *t = cJSON_GetObjectItemCaseSensitive(out, "t");
		struct sd_event ev = { .type = type, .t = cJSON_GetNumberValue(t), .fields = out };
		c->opts.on_event(&ev, c->opts.ctx);
	}
}

/* ---- the journal writer ----
 * Events go to the journal from the thread pool, never from the loop (a
 * slow or full disk must not stall the collectives' controller).  Lines
 * gather in c->jw_pend while one batch is written; when it is done the
 * next batch (everything gathered meanwhile) starts, so the order is the
 * events' order.  Each line goes in whole or not at all: a short write is
 * cut back, so a failure never leaves a torn line.  The first line that
 * fails is said once, and it and every line after it count as lost until
 * one goes in with a journal_resumed event before it, saying how many,
 * in the same write (a disk with room for the short line only is still
 * failing).  While a batch is in flight, c->journal_size, journal_lost
 * and journal_errno are the batch's; the loop reads them only between
 * batches.  Events are shown (stdout when echoing, the cockpit) at once,
 * before they are written. */

struct jw_batch {
	uv_work_t req;
	struct sd_controller *c;
	char *buf;                   /* lines, each ending in '\n' */
	size_t len;
	cJSON *resumed;              /* journal_resumed that went in (published after), or NULL */
	int fail_before;             /* writes began failing before any resume in it */
	int fail_after;              /* ... after its last resume */
};

/* Writes len bytes of buf at the journal's end, whole or not at all;
 * 0 or an errno.  Runs on the thread pool. */
static int journal_append(struct sd_controller *c, const char *buf, size_t len)
{
	return sd_journal_append(c->journal_fd, &c->journal_size, buf, len);
}

/* journal_resumed for the line (len bytes, its newline included) it
 * precedes: the events lost so far, dated as that line's event, so that it
 * sits where the gap is.  Runs on the thread pool (cJSON only). */
static cJSON *resumed_event(struct sd_controller *c, const char *line, size_t len)
{
	cJSON *next = cJSON_ParseWithLength(line, len);
	cJSON *out = cJSON_CreateObject();
	cJSON_AddStringToObject(out, "type", sd_event_name(SD_EV_JOURNAL_RESUMED));
	cJSON_AddNumberToObject(out, "time", cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(next, "time")));
	cJSON_AddNumberToObject(out, "t", cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(next, "t")));
	cJSON_AddStringToObject(out, "path", c->journal_path);
	cJSON_AddNumberToObject(out, "lost", (double)c->journal_lost);
	cJSON_AddStringToObject(out, "error", strerror(c->journal_errno));
	cJSON_Delete(next);
	return out;
}

/* After a failure: line goes in only behind journal_resumed, in one write. */
static int append_resumed(struct sd_controller *c, struct jw_batch *b, const char *line, size_t len)
{
	cJSON *r = resumed_event(c, line, len);
	char *rs = cJSON_PrintUnformatted(r);
	if (!rs)
		sd_oom();
	size_t rn = strlen(rs);
	char *both = sd_malloc(rn + 1 + len);
	memcpy(both, rs, rn);
	both[rn] = '\n';
	memcpy(both + rn + 1, line, len);
	int err = journal_append(c, both, rn + 1 + len);
	free(both);
	free(rs);
	if (err) {
		cJSON_Delete(r);
		return err;
	}
	cJSON_Delete(b->resumed);   /* a second gap in one batch: the last is shown */
	b->resumed = r;
	b->fail_after = 0;          /* ... and a gap that opened since is closed */
	return 0;
}

static void jw_work(uv_work_t *req)
{
	struct jw_batch *b = req->data;
	struct sd_controller *c = b->c;
	for (size_t off = 0; off < b->len;) {
		const char *line = b->buf + off;
		const char *nl = memchr(line, '\n', b->len - off);
		size_t len = nl ? (size_t)(nl - line) + 1 : b->len - off;
		off += len;
		int err = c->journal_lost > 0 ? append_resumed(c, b, line, len) : journal_append(c, line, len);
		if (!err) {
			c->journal_lost = 0;
			continue;
		}
		if (c->journal_lost++ == 0) {
			c->journal_errno = err;
			if (b->resumed)
				b->fail_after = 1;
			else
				b->fail_before = 1;
		}
	}
}

/* Writes began failing: said once (stderr, and an "error" event on stdout
 * and in the cockpit, not in the journal); the run goes on: training is
 * worth more than its record. */
static void journal_failed(struct sd_controller *c, int err)
{
	fprintf(stderr, "spotdeck: %s: cannot write the journal: %s; training goes on, "
	        "its events are lost until writes work again\n", c->journal_path, strerror(err));
	fflush(stderr);
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "reason", "cannot write the journal");
	cJSON_AddStringToObject(ev, "path", c->journal_path);
	cJSON_AddStringToObject(ev, "error", strerror(err));
	cJSON *out = event_new(c, SD_EV_ERROR, ev);
	char *s = cJSON_PrintUnformatted(out);
	if (!s)
		sd_oom();
	event_publish(c, SD_EV_ERROR, out, s);
	free(s);
	cJSON_Delete(out);
}

static void jw_start(struct sd_controller *c);

static void jw_done(uv_work_t *req, int status)
{
	struct jw_batch *b = req->data;
	struct sd_controller *c = b->c;
	(void)status;
	c->jw_busy = 0;
	/* In the order they happened: writes began failing, a gap closed,
	 * writes began failing again. */
	if (b->fail_before)
		journal_failed(c, c->journal_errno);
	if (b->resumed) {
		const cJSON *lost = cJSON_GetObjectItemCaseSensitive(b->resumed, "lost");
		fprintf(stderr, "spotdeck: %s: the journal writes again (%.0f events lost)\n", c->journal_path,
		        cJSON_GetNumberValue(lost));
		fflush(stderr);
		char *r = cJSON_PrintUnformatted(b->resumed);
		if (!r)
			sd_oom();
		event_publish(c, SD_EV_JOURNAL_RESUMED, b->resumed, r);
		free(r);
	}
	if (b->fail_after)
		journal_failed(c, c->journal_errno);
	cJSON_Delete(b->resumed);
	free(b->buf);
	free(b);
	jw_start(c);
}

/* Starts writing what gathered, unless a batch is in flight. */
static void jw_start(struct sd_controller *c)
{
	if (c->jw_busy || c->jw_len == 0)
		return;
	struct jw_batch *b = sd_calloc(1, sizeof *b);
	b->c = c;
	b->buf = c->jw_pend;
	b->len = c->jw_len;
	c->jw_pend = NULL;
	c->jw_len = c->jw_cap = 0;
	b->req.data = b;
	c->jw_busy = 1;
	if (uv_queue_work(c->loop, &b->req, jw_work, jw_done) < 0) {
		jw_work(&b->req);   /* no thread pool: write it here */
		jw_done(&b->req, 0);
	}
}

void ctl_journal_drain(struct sd_controller *c)
{
	if (c->journal_fd >= 0 && c->jw_len > 0 && !c->jw_busy) {
		/* The same rules as a batch (a gap still open is closed by a
		 * journal_resumed line); nothing is shown any more. */
		struct jw_batch b = { .c = c, .buf = c->jw_pend, .len = c->jw_len };
		b.req.data = &b;
		jw_work(&b.req);
		cJSON_Delete(b.resumed);
	}
	free(c->jw_pend);
	c->jw_pend = NULL;
	c->jw_len = c->jw_cap = 0;
}

/* Appends one event to the journal (and stdout when echoing); consumes ev. */
void ctl_journal(struct sd_controller *c, enum sd_event_type type, cJSON *ev)
{
	cJSON *out = event_new(c, type, ev);
	char *s = cJSON_PrintUnformatted(out);
	if (!s)
		sd_oom();
	if (c->journal_fd >= 0) {
		size_t n = strlen(s);
		if (c->jw_len + n + 1 > c->jw_cap) {
			c->jw_cap = (c->jw_len + n + 1) * 2;
			char *p = realloc(c->jw_pend, c->jw_cap);
			if (!p)
				sd_oom();
			c->jw_pend = p;
		}
		memcpy(c->jw_pend + c->jw_len, s, n);
		c->jw_pend[c->jw_len + n] = '\n';
		c->jw_len += n + 1;
		jw_start(c);
	}
	event_publish(c, type, out, s);
	free(s);
	cJSON_Delete(out);
}

void ctl_journal_kv(struct sd_controller *c, enum sd_event_type type, const char *k1, const char *v1,
                    const char *k2, const char *v2)
{
	cJSON *ev = cJSON_CreateObject();
	if (k1)
		cJSON_AddStringToObject(ev, k1, v1);
	if (k2)
		cJSON_AddStringToObject(ev, k2, v2);
	ctl_journal(c, type, ev);
}

