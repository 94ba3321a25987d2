/* src/controller/rundir.c - the run directory: clocks, atomic files, resume
 * scan (latest checkpoint, the journal of the run being resumed), the
 * directory's lock, job, token and journal at create.  Journal events and
 * their writing are in journal.c. */
#include "config.h"

#include "src/controller/internal.h"

#include "engine/onnx.h"
#include "src/base/token.h"
#include "src/base/file.h"
#include "src/run/journal-file.h"
#include "src/run/run-lock.h"

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
			c->last_val_loss = sd_msg_num(ev, "val_loss", 0);
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
/* Writes j (freed here) as indented JSON to path, atomically. */
static int write_json_atomic(const char *path, cJSON *j, char **why)
{
	char *text = cJSON_Print(j);
	cJSON_Delete(j);
	if (!text)
		sd_oom();
	int rc = sd_write_file_atomic(path, text, strlen(text), why);
	free(text);
	return rc;
}

/* Where workers connect, kept in RUNDIR/listen.json when --listen or
 * --advertise was given ({"listen_addr": "198.18.0.1", "listen_port": 0,
 * "advertise": "HOST:PORT"}), so a resume given neither listens where the
 * run did (hosts cannot reach the default, loopback).  On such a resume the
 * kept values go to c->kept_*; a bad file is an error naming it. */
static int keep_listen(struct sd_controller *c, const struct sd_controller_opts *opts, char **why)
{
	char path[SD_PATH_MAX + 64];
	snprintf(path, sizeof path, "%s/listen.json", c->run_dir);
	if (opts->listen_addr || opts->advertise) {
		cJSON *j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "listen_addr", opts->listen_addr ? opts->listen_addr : "127.0.0.1");
		cJSON_AddNumberToObject(j, "listen_port", opts->listen_port);
		if (opts->advertise)
			cJSON_AddStringToObject(j, "advertise", opts->advertise);
		return write_json_atomic(path, j, why);
	}
	if (!opts->resume)
		return 0;
	FILE *f = fopen(path, "r");
	if (!f)
		return errno == ENOENT ? 0 : sd_why(why, "%s: %s", path, strerror(errno));
	char text[1024];
	size_t n = fread(text, 1, sizeof text - 1, f);
	fclose(f);
	text[n] = '\0';
	cJSON *j = cJSON_Parse(text);
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, "listen_addr");
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(j, "listen_port");
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "advertise");
	int rc = 0;
	if (!cJSON_IsObject(j))
		rc = sd_why(why, "%s: not a JSON object", path);
	else if (!cJSON_IsString(a) || strlen(a->valuestring) >= sizeof c->kept_listen_addr)
		rc = sd_why(why, "%s: listen_addr: expected a numeric address", path);
	else if (!cJSON_IsNumber(p) || p->valuedouble < 0 || p->valuedouble > 65535 ||
	         p->valuedouble != (int)p->valuedouble)
		rc = sd_why(why, "%s: listen_port: expected a port from 0 to 65535", path);
	else if (v && (!cJSON_IsString(v) || !v->valuestring[0] || strlen(v->valuestring) >= sizeof c->kept_advertise))
		rc = sd_why(why, "%s: advertise: expected HOST:PORT", path);
	if (rc == 0) {
		snprintf(c->kept_listen_addr, sizeof c->kept_listen_addr, "%s", a->valuestring);
		c->kept_listen_port = (int)p->valuedouble;
		snprintf(c->kept_advertise, sizeof c->kept_advertise, "%s", v ? v->valuestring : "");
	}
	cJSON_Delete(j);
	return rc;
}

/* An ONNX job's model file copied to RUNDIR/model.onnx (SD_RUN_MODEL_FILE):
 * at a new run's start, and on a resume of a run that has none yet (one
 * started before copies were kept).  A resume keeps the copy it has: that
 * is the file the run started from, whatever the job's path holds now.
 * A file this machine cannot read is no error here: workers on other hosts
 * may each have it at that path (the README's remote setup), and the run
 * trains without the copy; only `spotdeck export` then needs the file. */
static int keep_model_file(struct sd_controller *c, const struct sd_controller_opts *opts,
                           char **why)
{
	if (!sd_onnx_is_path(c->job.train.model))
		return 0;
	char path[SD_PATH_MAX + 64];
	snprintf(path, sizeof path, "%s/%s", c->run_dir, SD_RUN_MODEL_FILE);
	if (opts->resume && access(path, F_OK) == 0)
		return 0;
	uint8_t *bytes;
	size_t len;
	char *unread = NULL;
	if (sd_onnx_read_file(c->job.train.model, &bytes, &len, &unread) < 0) {
		fprintf(stderr, "spotdeck: warning: no copy of the model in %s (spotdeck export "
		        "will need the file): %s\n", path, unread);
		free(unread);
		return 0;
	}
	int rc = sd_write_file_atomic(path, bytes, len, why);
	free(bytes);
	return rc;
}

int ctl_open_run_dir(struct sd_controller *c, const struct sd_controller_opts *opts, char **why)
{
	char path[SD_PATH_MAX + 64];
	if (mkdir_p(c->run_dir, why) < 0)
		return -1;
	/* One controller per run directory: a second one (a --resume while the
	 * first still runs) would interleave journals and prune the other's
	 * checkpoints.  The lock goes with the process, even on SIGKILL. */
	if (sd_run_lock(c->run_dir, &c->lock_fd, why) < 0)
		return -1;
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
	} else if (write_json_atomic(path, sd_job_to_json(&c->job), why) < 0) {
		return -1;
	}
	if (keep_listen(c, opts, why) < 0)
		return -1;
	if (keep_model_file(c, opts, why) < 0)
		return -1;
	snprintf(path, sizeof path, "%s/token", c->run_dir);
	if (sd_token_create_file(path, &c->token, why) < 0)
		return -1;
	snprintf(c->journal_path, sizeof c->journal_path, "%s/journal.jsonl", c->run_dir);
	int torn = opts->resume && continue_journal(c, c->journal_path);
	if (sd_journal_open(c->journal_path, torn, &c->journal_fd, &c->journal_size, why) < 0)
		return -1;
	return 0;
}
