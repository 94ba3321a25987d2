/* src/controller/journal.c - the run's journal: events (type, time, t and
 * their fields), shown at once on stdout and to the cockpit, written in
 * ordered batches on the thread pool (a failed write said once, the gap
 * marked by journal_resumed). */
#include "config.h"

#include "src/controller/internal.h"

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

/* Shows event out (printed as s) on stdout when echoing and to on_event. */
static void event_publish(struct sd_controller *c, const cJSON *out, const char *s)
{
	if (c->opts.echo_journal) {
		puts(s);
		fflush(stdout);
	}
	if (c->opts.on_event)
		c->opts.on_event(out, c->opts.ctx);
}

/* ---- the journal writer ----
 * Events go to the journal from the thread pool, never from the loop (a
 * slow or full disk must not stall the collectives' controller).  Lines
 * gather in c->jw_pend while one batch is written; when it is done the
 * next batch (everything gathered meanwhile) starts, so the order is the
 * events' order.  A batch goes in whole or not at all: a short write is cut
 * back, so a failure never leaves a torn line.  After a failure every event
 * of a failed batch counts as lost, and the next batch that goes in starts
 * with a journal_resumed event saying how many (a disk with room for that
 * line only is still failing).  Events are shown (stdout when echoing, the
 * cockpit) at once, before they are written. */

struct jw_batch {
	uv_work_t req;
	struct sd_controller *c;
	char *buf;                   /* lines, each ending in '\n' */
	size_t len;
	long nevents;                /* events in buf, journal_resumed not counted */
	cJSON *resumed;              /* the journal_resumed event heading buf, or NULL */
	int err;                     /* errno of a failed write, 0 written */
};

/* Writes len bytes of buf at the journal's end, whole or not at all.
 * Runs on the thread pool; c->journal_size belongs to the batch in flight. */
static int journal_append(struct sd_controller *c, const char *buf, size_t len)
{
	size_t done = 0;
	while (done < len) {
		ssize_t n = write(c->journal_fd, buf + done, len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int err = n < 0 ? errno : EIO;
			if (done > 0 && ftruncate(c->journal_fd, c->journal_size) < 0) {
				/* The torn line stays; a reader skips it as it does a crash's. */
			}
			return err;
		}
		done += (size_t)n;
	}
	c->journal_size += (off_t)done;
	return 0;
}

static void jw_work(uv_work_t *req)
{
	struct jw_batch *b = req->data;
	b->err = journal_append(b->c, b->buf, b->len);
}

/* The first failed batch is said once (stderr, and an "error" event on
 * stdout and in the cockpit, not in the journal); the run goes on:
 * training is worth more than its record. */
static void journal_failed(struct sd_controller *c, int err)
{
	c->journal_errno = err;
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
	event_publish(c, out, s);
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
	if (b->err) {
		if (c->journal_lost == 0)
			journal_failed(c, b->err);
		c->journal_lost += b->nevents;
	} else if (b->resumed) {
		fprintf(stderr, "spotdeck: %s: the journal writes again (%ld events lost)\n", c->journal_path,
		        c->journal_lost);
		fflush(stderr);
		c->journal_lost = 0;
		char *r = cJSON_PrintUnformatted(b->resumed);
		if (!r)
			sd_oom();
		event_publish(c, b->resumed, r);
		free(r);
	}
	cJSON_Delete(b->resumed);
	free(b->buf);
	free(b);
	jw_start(c);
}

/* After a failure: the journal_resumed event that heads the next batch,
 * dated as its first event, so that it sits where the gap is. */
static cJSON *resumed_event(struct sd_controller *c)
{
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "path", c->journal_path);
	cJSON_AddNumberToObject(ev, "lost", (double)c->journal_lost);
	cJSON_AddStringToObject(ev, "error", strerror(c->journal_errno));
	cJSON *out = event_new(c, SD_EV_JOURNAL_RESUMED, ev);
	cJSON_ReplaceItemInObject(out, "time", cJSON_CreateNumber(c->jw_first_time));
	cJSON_ReplaceItemInObject(out, "t", cJSON_CreateNumber(c->jw_first_t));
	return out;
}

/* Starts writing what gathered, unless a batch is in flight. */
static void jw_start(struct sd_controller *c)
{
	if (c->jw_busy || c->jw_len == 0)
		return;
	struct jw_batch *b = sd_calloc(1, sizeof *b);
	b->c = c;
	b->nevents = c->jw_events;
	if (c->journal_lost > 0) {
		b->resumed = resumed_event(c);
		char *r = cJSON_PrintUnformatted(b->resumed);
		if (!r)
			sd_oom();
		size_t rn = strlen(r);
		b->buf = sd_malloc(rn + 1 + c->jw_len);
		memcpy(b->buf, r, rn);
		b->buf[rn] = '\n';
		memcpy(b->buf + rn + 1, c->jw_pend, c->jw_len);
		b->len = rn + 1 + c->jw_len;
		free(r);
		free(c->jw_pend);
	} else {
		b->buf = c->jw_pend;
		b->len = c->jw_len;
	}
	c->jw_pend = NULL;
	c->jw_len = c->jw_cap = 0;
	c->jw_events = 0;
	b->req.data = b;
	c->jw_busy = 1;
	if (uv_queue_work(c->loop, &b->req, jw_work, jw_done) < 0) {
		jw_work(&b->req);   /* no thread pool: write it here */
		jw_done(&b->req, 0);
	}
}

void ctl_journal_drain(struct sd_controller *c)
{
	if (c->journal_fd >= 0 && c->jw_len > 0 && !c->jw_busy && c->journal_lost == 0)
		journal_append(c, c->jw_pend, c->jw_len);
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
		if (c->jw_events == 0) {
			c->jw_first_time = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(out, "time"));
			c->jw_first_t = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(out, "t"));
		}
		memcpy(c->jw_pend + c->jw_len, s, n);
		c->jw_pend[c->jw_len + n] = '\n';
		c->jw_len += n + 1;
		c->jw_events++;
		jw_start(c);
	}
	event_publish(c, out, s);
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

