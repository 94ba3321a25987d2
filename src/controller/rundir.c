/* src/controller/rundir.c - the run directory and its journal: clocks,
 * journal events and their writing (a failed write said once, resumed),
 * atomic files, resume scan (latest checkpoint, the journal of the run being
 * resumed), the directory's lock, job, token and journal at create. */
#include "config.h"

#include "src/controller/internal.h"

/* Wall-clock time, Unix seconds: only for the journal's "time" and for
 * the down time of a resumed run, never to measure a duration here. */
double ctl_wall_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Monotonic seconds (any origin), for durations: a clock step (NTP, an
 * operator's date) does not move them. */
double ctl_mono_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Seconds since the run started (the journal's "t"): what went before this
 * controller (a resumed run's earlier time and its down time, from the wall
 * clock once, at the start) plus this controller's time, measured on the
 * monotonic clock. */
double ctl_run_time_s(const struct sd_controller *c)
{
	return (c->wall0 - c->t0) + (ctl_mono_s() - c->mono0);
}

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

int ctl_write_file_atomic(const char *path, const void *data, size_t len, char **why)
{
	char tmp[SD_PATH_MAX + 96];
	snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return sd_why(why, "%s: %s", tmp, strerror(errno));
	size_t off = 0;
	while (off < len) {
		ssize_t n = write(fd, (const char *)data + off, len - off);
		if (n <= 0) {
			close(fd);
			unlink(tmp);
			return sd_why(why, "%s: write: %s", tmp, strerror(errno));
		}
		off += (size_t)n;
	}
	if (fsync(fd) < 0 || close(fd) < 0) {
		unlink(tmp);
		return sd_why(why, "%s: fsync: %s", tmp, strerror(errno));
	}
	if (rename(tmp, path) < 0) {
		unlink(tmp);
		return sd_why(why, "%s: rename: %s", path, strerror(errno));
	}
	return 0;
}

static int mkdir_p(const char *path, char **why)
{
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return sd_why(why, "%s: cannot create directory: %s", path, strerror(errno));
	struct stat st;
	if (stat(path, &st) < 0 || !S_ISDIR(st.st_mode))
		return sd_why(why, "%s: not a directory (a run directory is one)", path);
	return 0;
}

/* The newest checkpoint in run_dir/checkpoints that reads back intact. */
void ctl_find_latest_checkpoint(struct sd_controller *c)
{
	char dir[SD_PATH_MAX + 32];
	snprintf(dir, sizeof dir, "%s/checkpoints", c->run_dir);
	DIR *d = opendir(dir);
	if (!d)
		return;
	long best = -1;
	struct dirent *e;
	while ((e = readdir(d))) {
		long s;
		char tail[16];
		if (sscanf(e->d_name, "ckpt-%ld.sdckp%15s", &s, tail) != 2 || strcmp(tail, "t") || s <= best)
			continue;
		char p[SD_PATH_MAX + 300];
		snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
		struct sd_ckpt ck;
		char *why = NULL;
		if (sd_ckpt_read(p, &ck, &why) == 0) {
			sd_ckpt_free(&ck);
			best = s;
			snprintf(c->latest_ckpt, sizeof c->latest_ckpt, "%s", p);
			c->latest_ckpt_step = s;
		} else {
			ctl_journal_kv(c, SD_EV_CHECKPOINT_INVALID, "path", p, "error", why ? why : "?");
		}
		free(why);
	}
	closedir(d);
	/* Held in memory from here on (startup, before the loop runs). */
	FILE *f = best >= 0 ? fopen(c->latest_ckpt, "rb") : NULL;
	if (f) {
		if (fseek(f, 0, SEEK_END) == 0) {
			long n = ftell(f);
			if (n > 0 && fseek(f, 0, SEEK_SET) == 0) {
				c->latest_data = sd_malloc((size_t)n);
				c->latest_len = fread(c->latest_data, 1, (size_t)n, f);
				if (c->latest_len != (size_t)n) {
					free(c->latest_data);
					c->latest_data = NULL;
					c->latest_len = 0;
				}
			}
		}
		fclose(f);
	}
}

/* A resumed run continues its journal: t counts from the first run_start
 * (down time included), generations go on from the highest journaled, server
 * ids after the highest sN, and the money spent from what its servers cost
 * (each server's last journaled "usd").
 * Returns 1 when the journal ends in a torn line (no newline). */
static int continue_journal(struct sd_controller *c, const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	char *line = NULL;
	size_t cap = 0;
	int first = 1, torn = 0;
	ssize_t n;
	char *last_step = NULL;
	double *usd = NULL;      /* by server number: the last cost journaled */
	int nusd = 0;
	while ((n = getline(&line, &cap, f)) > 0) {
		torn = line[n - 1] != '\n';
		const char *sv = strstr(line, "\"server\":\"s");
		int num = sv ? atoi(sv + 11) : 0;
		if (num > 0 && num < 1000000) {
			if (num > c->resume_last_server)
				c->resume_last_server = num;
			const char *u = strstr(line, "\"usd\":");
			if (u) {
				if (num >= nusd) {
					int nn = num + 64;
					double *g = realloc(usd, (size_t)nn * sizeof *usd);
					if (!g)
						sd_oom();
					memset(g + nusd, 0, (size_t)(nn - nusd) * sizeof *g);
					usd = g;
					nusd = nn;
				}
				usd[num] = strtod(u + 6, NULL);
			}
		}
		if (strstr(line, "\"type\":\"step\"")) {
			/* Only the last one matters: keep it, parse it once at the end. */
			free(last_step);
			last_step = strdup(line);
			continue;
		}
		int epoch = strstr(line, "\"type\":\"epoch\"") != NULL;
		if (!first && !epoch && !strstr(line, "\"type\":\"generation\""))
			continue;
		cJSON *ev = cJSON_Parse(line);
		if (!ev)
			continue;   /* a line torn by a crash */
		if (epoch) {
			/* The header shows the last accuracy measured, as before the stop. */
			c->last_acc = sd_msg_num(ev, "test_accuracy", 0);
			c->last_epoch = (int)sd_msg_num(ev, "epoch", 0) + 1;
		}
		const cJSON *time = cJSON_GetObjectItemCaseSensitive(ev, "time");
		const cJSON *gen = cJSON_GetObjectItemCaseSensitive(ev, "generation");
		if (first && cJSON_IsNumber(time) && time->valuedouble > 0 && time->valuedouble <= c->t0)
			c->t0 = time->valuedouble;
		if (cJSON_IsNumber(gen) && gen->valuedouble > c->generation && gen->valuedouble < 1e15)
			c->generation = (long)gen->valuedouble;
		first = 0;
		cJSON_Delete(ev);
	}
	for (int i = 0; i < nusd; i++)
		if (isfinite(usd[i]) && usd[i] > 0)
			c->resume_usd += usd[i];
	free(usd);
	cJSON *st = last_step ? cJSON_Parse(last_step) : NULL;
	if (st)
		c->last_loss = sd_msg_num(st, "loss", -1);
	cJSON_Delete(st);
	free(last_step);
	free(line);
	fclose(f);
	return torn;
}

/* The run directory: created (with checkpoints/ and logs/), locked against
 * a second controller, the job written (or, on resume, read back), a fresh
 * token, and the journal opened for appending (a resumed run's torn last
 * line ended first).  Returns 0, or -1 with *why naming the path. */
int ctl_open_run_dir(struct sd_controller *c, const struct sd_controller_opts *opts, char **why)
{
	char path[SD_PATH_MAX + 64];
	if (mkdir_p(c->run_dir, why) < 0)
		return -1;
	/* One controller per run directory: a second one (a --resume while the
	 * first still runs) would interleave journals and prune the other's
	 * checkpoints.  The lock goes with the process, even on SIGKILL. */
	snprintf(path, sizeof path, "%s/lock", c->run_dir);
	c->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (c->lock_fd < 0) {
		sd_why(why, "%s: %s", path, strerror(errno));
		return -1;
	}
	if (flock(c->lock_fd, LOCK_EX | LOCK_NB) < 0) {
		char pid[32] = "";
		ssize_t n = pread(c->lock_fd, pid, sizeof pid - 1, 0);
		pid[n > 0 ? n : 0] = 0;
		pid[strcspn(pid, "\n")] = 0;
		sd_why(why, "%s: in use by another spotdeck (pid %s); stop it first", c->run_dir,
		       pid[0] ? pid : "?");
		return -1;
	}
	char pidline[32];
	int pl = snprintf(pidline, sizeof pidline, "%ld\n", (long)getpid());
	if (ftruncate(c->lock_fd, 0) < 0 || pwrite(c->lock_fd, pidline, (size_t)pl, 0) != pl) {
		/* The pid is only a courtesy for the message above. */
	}
	snprintf(path, sizeof path, "%s/checkpoints", c->run_dir);
	if (mkdir_p(path, why) < 0)
		return -1;
	snprintf(path, sizeof path, "%s/logs", c->run_dir);
	if (mkdir_p(path, why) < 0)
		return -1;
	snprintf(path, sizeof path, "%s/job.json", c->run_dir);
	if (opts->resume) {
		if (sd_job_load(&c->job, path, why) < 0)
			return -1;
	} else {
		cJSON *j = sd_job_to_json(&c->job);
		char *text = cJSON_Print(j);
		cJSON_Delete(j);
		if (!text)
			sd_oom();
		int rc = ctl_write_file_atomic(path, text, strlen(text), why);
		free(text);
		if (rc < 0)
			return -1;
	}
	snprintf(path, sizeof path, "%s/token", c->run_dir);
	if (sd_token_create_file(path, &c->token, why) < 0)
		return -1;
	snprintf(c->journal_path, sizeof c->journal_path, "%s/journal.jsonl", c->run_dir);
	int torn = opts->resume && continue_journal(c, c->journal_path);
	c->journal_fd = open(c->journal_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	struct stat jst;
	if (c->journal_fd < 0 || fstat(c->journal_fd, &jst) < 0) {
		sd_why(why, "%s: %s", c->journal_path, strerror(errno));
		return -1;
	}
	c->journal_size = jst.st_size;
	if (torn && write(c->journal_fd, "\n", 1) == 1)
		c->journal_size++;   /* the killed run's last line stays on its own */
	return 0;
}
