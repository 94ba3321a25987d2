/* src/controller/checkpoint.c - the checkpoint sink: chunks from rank 0
 * assembled, then written, verified and the old ones pruned on the thread
 * pool, so the loop never waits for the disk. */
#include "config.h"

#include "src/controller/internal.h"

#include "src/base/file.h"

/* Keeps the newest keep checkpoint files (ckpt-STEP.sdckpt) of dir.  Runs
 * on a thread-pool thread, after a checkpoint is in place: it touches only
 * the directory, never the controller. */
static void prune_checkpoints(const char *dir, int keep)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	long steps[4096];
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) && n < 4096) {
		long s;
		char tail[16];
		if (sscanf(e->d_name, "ckpt-%ld.sdckp%15s", &s, tail) == 2 && !strcmp(tail, "t"))
			steps[n++] = s;
	}
	closedir(d);
	for (int i = 0; i < n; i++) {
		int newer = 0;
		for (int j = 0; j < n; j++)
			newer += steps[j] > steps[i];
		if (newer >= keep) {
			char p[SD_PATH_MAX + 96];
			snprintf(p, sizeof p, "%s/ckpt-%ld.sdckpt", dir, steps[i]);
			unlink(p);
		}
	}
}

/* A received checkpoint on its way to disk: written, fsynced, read back and
 * verified, renamed into place on a libuv thread-pool thread, so a slow disk
 * never stalls the loop (the cockpit, the protocol, the other workers). */
struct ckpt_write {
	uv_work_t req;
	struct sd_controller *c;
	unsigned char *data;     /* owned; the stream rank 0 sent */
	size_t len;
	long step;
	char reason[32];
	char path[SD_PATH_MAX + 64];
	char dir[SD_PATH_MAX + 32];   /* run_dir/checkpoints, pruned after */
	int keep;                      /* the job's keep_checkpoints */
	int rc;
	char *why;
};

static void ckpt_write_work(uv_work_t *req)
{
	struct ckpt_write *w = req->data;
	/* Verify before publishing: a torn or corrupt stream never becomes latest. */
	char incoming[SD_PATH_MAX + 96];
	snprintf(incoming, sizeof incoming, "%s.incoming", w->path);
	w->rc = sd_write_file_atomic(incoming, w->data, w->len, &w->why);
	struct sd_ckpt ck;
	if (w->rc == 0 && (w->rc = sd_ckpt_read(incoming, &ck, &w->why)) == 0)
		sd_ckpt_free(&ck);
	if (w->rc == 0 && rename(incoming, w->path) < 0)
		w->rc = sd_why(&w->why, "%s: rename: %s", w->path, strerror(errno));
	if (w->rc != 0)
		unlink(incoming);
	else
		prune_checkpoints(w->dir, w->keep);
}

static void ckpt_write_done(uv_work_t *req, int status)
{
	struct ckpt_write *w = req->data;
	struct sd_controller *c = w->c;
	c->ck_writing--;
	if (status == UV_ECANCELED && w->rc == 0)
		w->rc = sd_why(&w->why, "%s: write cancelled at shutdown", w->path);
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddNumberToObject(ev, "step", (double)w->step);
	cJSON_AddStringToObject(ev, "reason", w->reason);
	if (w->rc == 0) {
		/* Writes may finish out of order; latest only moves forward. */
		if (w->step >= c->latest_ckpt_step || !c->latest_ckpt[0]) {
			snprintf(c->latest_ckpt, sizeof c->latest_ckpt, "%s", w->path);
			c->latest_ckpt_step = w->step;
			free(c->latest_data);
			c->latest_data = w->data;
			c->latest_len = w->len;
			w->data = NULL;
			ctl_stream_restart_all(c);   /* streams of the old bytes start over */
		}
		cJSON_AddStringToObject(ev, "path", w->path);
		cJSON_AddNumberToObject(ev, "bytes", (double)w->len);
		ctl_journal(c, SD_EV_CHECKPOINT, ev);
	} else {
		cJSON_AddStringToObject(ev, "error", w->why ? w->why : "?");
		ctl_journal(c, SD_EV_CHECKPOINT_FAILED, ev);
	}
	/* While quitting, only the final checkpoint ends the run: a periodic
	 * one already on its way when quit came is older than the state. */
	int final = c->quitting && !strcmp(w->reason, "final");
	if (w->rc != 0 && final && !c->fatal[0])
		/* Quitting drops the workers: say loudly that their state since
		 * the last good checkpoint is gone, and exit non-zero. */
		snprintf(c->fatal, sizeof c->fatal, "quit: the checkpoint at step %ld could not be written "
		         "(%.400s); training since %.400s is lost", w->step, w->why ? w->why : "?",
		         c->latest_ckpt[0] ? c->latest_ckpt : "the start");
	free(w->why);
	free(w->data);
	free(w);
	if (c->closing)
		return;
	if (final) {
		uv_timer_stop(&c->grace_timer);
		ctl_finish(c, 1);
		return;
	}
	if (!c->quitting)
		ctl_maybe_finish(c);
}

static void checkpoint_complete(struct sd_controller *c)
{
	struct ckpt_write *w = sd_calloc(1, sizeof *w);
	w->req.data = w;
	w->c = c;
	w->data = c->ck;
	w->len = c->ck_len;
	w->step = c->ck_step;
	snprintf(w->reason, sizeof w->reason, "%s", c->ck_reason);
	snprintf(w->path, sizeof w->path, "%s/checkpoints/ckpt-%ld.sdckpt", c->run_dir, c->ck_step);
	snprintf(w->dir, sizeof w->dir, "%s/checkpoints", c->run_dir);
	w->keep = c->job.keep_checkpoints;
	c->ck = NULL;
	c->ck_len = c->ck_total = 0;
	c->ck_writing++;
	int rc = uv_queue_work(c->loop, &w->req, ckpt_write_work, ckpt_write_done);
	if (rc < 0) {
		/* Cannot happen with a live loop; write here rather than lose it. */
		ckpt_write_work(&w->req);
		ckpt_write_done(&w->req, 0);
	}
}

void ctl_on_ckpt_chunk(struct sd_controller *c, struct conn *k, const cJSON *m)
{
	long long off = sd_msg_int(m, "offset", -1), total = sd_msg_int(m, "total", -1);
	size_t n;
	unsigned char *bytes = sd_hex_decode(sd_msg_str(m, "data", ""), &n);
	if (!bytes || total <= 0 || total > (1LL << 34) || off < 0 ||
	    (unsigned long long)off + n > (unsigned long long)total) {
		free(bytes);
		ctl_conn_reject(k, SD_EV_PROTOCOL_ERROR, "malformed checkpoint chunk");
		return;
	}
	if (off == 0 && (c->exiting || (c->final_taken && strcmp(sd_msg_str(m, "reason", ""), "final")))) {
		/* The run ends: a checkpoint the worker started after the final
		 * one (a periodic one at the next step, before its STOP came) is
		 * not taken, so the final one stays the last.  (Another final one
		 * is: the first may have died with its rank 0.) */
		free(bytes);
		return;
	}
	if (off == 0) {
		free(c->ck);
		c->ck = sd_malloc((size_t)total);
		c->ck_total = (size_t)total;
		c->ck_len = 0;
		c->ck_step = (long)sd_msg_int(m, "step", 0);
		snprintf(c->ck_reason, sizeof c->ck_reason, "%s", sd_msg_str(m, "reason", "periodic"));
		c->final_taken = c->quitting && !strcmp(c->ck_reason, "final");
	}
	if (c->ck && (size_t)off == c->ck_len && (size_t)total == c->ck_total) {
		memcpy(c->ck + off, bytes, n);
		c->ck_len += n;
		if (c->ck_len == c->ck_total)
			checkpoint_complete(c);
	}
	free(bytes);
}

/* A resuming rank 0 gets the latest checkpoint from memory (the loop
 * never waits on the disk for it) in chunks of SD_STREAM_CHUNK bytes, sent
 * while fewer than SD_STREAM_QUEUED bytes of them wait to be written and
 * continued as their writes complete (libuv calls back on a later loop
 * turn), so neither one callback nor memory takes the whole checkpoint;
 * its generation message goes after the last chunk. */
#define SD_STREAM_CHUNK (256u * 1024u)
#define SD_STREAM_QUEUED (1024u * 1024u)

/* The stream to k is complete: journaled, then its generation message. */
static void stream_done(struct sd_controller *c, struct conn *k)
{
	k->streaming = 0;
	k->streamed = 1;
	k->streamed_step = c->latest_ckpt_step;
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "server", k->server_id);
	cJSON_AddNumberToObject(ev, "step", (double)c->latest_ckpt_step);
	cJSON_AddNumberToObject(ev, "bytes", (double)c->latest_len);
	cJSON_AddNumberToObject(ev, "chunks", k->stream_chunks);
	cJSON_AddNumberToObject(ev, "max_queued_bytes", (double)k->stream_max_queued);
	ctl_journal(c, SD_EV_CHECKPOINT_STREAMED, ev);
	cJSON *g = k->stream_then;
	k->stream_then = NULL;
	if (g)
		ctl_conn_send(k, g);
}

void ctl_stream_pump(struct conn *k)
{
	struct sd_controller *c = k->c;
	while (k->streaming && !k->closing && k->stream_inflight < SD_STREAM_QUEUED) {
		if (k->stream_off >= c->latest_len) {
			stream_done(c, k);
			return;
		}
		size_t off = k->stream_off, left = c->latest_len - off;
		size_t n = left < SD_STREAM_CHUNK ? left : SD_STREAM_CHUNK;
		char *hex = sd_hex_encode(c->latest_data + off, n);
		cJSON *m = sd_msg_new(SD_MSG_CKPT_CHUNK);
		cJSON_AddNumberToObject(m, "step", (double)c->latest_ckpt_step);
		cJSON_AddNumberToObject(m, "offset", (double)off);
		cJSON_AddNumberToObject(m, "total", (double)c->latest_len);
		cJSON_AddStringToObject(m, "data", hex);
		free(hex);
		k->stream_off = off + n;
		k->stream_chunks++;
		if (!ctl_conn_send_chunk(k, m)) {
			k->streaming = 0;   /* the connection is going: so is the stream */
			return;
		}
		if (k->stream_inflight > k->stream_max_queued)
			k->stream_max_queued = k->stream_inflight;
	}
}

void ctl_stream_stop_all(struct sd_controller *c)
{
	for (struct conn *k = c->conns; k; k = k->next) {
		k->streaming = 0;
		cJSON_Delete(k->stream_then);
		k->stream_then = NULL;
	}
}

void ctl_stream_restart_all(struct sd_controller *c)
{
	for (struct conn *k = c->conns; k; k = k->next)
		if (k->streaming) {
			k->streamed = 0;
			k->stream_off = 0;   /* the worker starts over at offset 0 */
			ctl_stream_pump(k);
		}
}

int ctl_stream_checkpoint(struct sd_controller *c, struct conn *k, cJSON *then)
{
	if (!c->latest_data)
		return -1;
	if (k->streamed && k->streamed_step == c->latest_ckpt_step) {
		/* It has these bytes already (a generation re-formed before it
		 * joined): streaming them again would restart the copy it is
		 * about to load. */
		ctl_conn_send(k, then);
		return 0;
	}
	k->streaming = 1;
	k->stream_off = 0;
	k->stream_chunks = 0;
	k->stream_max_queued = k->stream_inflight;
	k->stream_then = then;
	ctl_stream_pump(k);
	return 0;
}

/* The model file to a worker, in chunks of SD_MODEL_CHUNK bytes while fewer
 * than SD_STREAM_QUEUED bytes of chunks wait to be written: a model of
 * hundreds of MiB neither blocks the loop nor doubles in memory. */
void ctl_model_pump(struct conn *k)
{
	struct sd_controller *c = k->c;
	while (k->model_streaming && !k->closing && k->stream_inflight < SD_STREAM_QUEUED) {
		if (k->model_off >= c->model_len) {
			k->model_streaming = 0;
			cJSON *ev = cJSON_CreateObject();
			cJSON_AddStringToObject(ev, "server", k->server_id);
			cJSON_AddStringToObject(ev, "sha256", c->model_sha256);
			cJSON_AddNumberToObject(ev, "bytes", (double)c->model_len);
			cJSON_AddNumberToObject(ev, "chunks", k->model_chunks);
			cJSON_AddNumberToObject(ev, "max_queued_bytes", (double)k->model_max_queued);
			ctl_journal(c, SD_EV_MODEL_SENT, ev);
			return;
		}
		size_t off = k->model_off, left = c->model_len - off;
		size_t n = left < SD_MODEL_CHUNK ? left : SD_MODEL_CHUNK;
		char *hex = sd_hex_encode(c->model_data + off, n);
		cJSON *m = sd_msg_new(SD_MSG_MODEL_CHUNK);
		cJSON_AddStringToObject(m, "sha256", c->model_sha256);
		cJSON_AddNumberToObject(m, "offset", (double)off);
		cJSON_AddNumberToObject(m, "total", (double)c->model_len);
		cJSON_AddStringToObject(m, "data", hex);
		free(hex);
		k->model_off = off + n;
		k->model_chunks++;
		if (!ctl_conn_send_chunk(k, m)) {
			k->model_streaming = 0;
			return;
		}
		if (k->stream_inflight > k->model_max_queued)
			k->model_max_queued = k->stream_inflight;
	}
}

void ctl_on_model_get(struct sd_controller *c, struct conn *k, const cJSON *m)
{
	const char *sha = sd_msg_str(m, "sha256", "");
	if (!c->model_data || strcasecmp(sha, c->model_sha256)) {
		char reason[256];
		snprintf(reason, sizeof reason, "model_get: %.64s is not this run's model (%s)", sha,
		         c->model_data ? c->model_sha256 : "a built-in one");
		ctl_conn_reject(k, SD_EV_PROTOCOL_ERROR, reason);
		return;
	}
	if (k->model_streaming)
		return;   /* already on its way */
	k->model_streaming = 1;
	k->model_off = 0;
	k->model_chunks = 0;
	k->model_max_queued = k->stream_inflight;
	ctl_model_pump(k);
}
