/* src/controller/controller.c - the controller's life: create, start, the
 * fleet's hooks, run end, status for the view, close and free. */
#include "config.h"

#include "src/controller/internal.h"

#include "engine/checkpoint-data.h"

static void on_grace(uv_timer_t *t)
{
	struct sd_controller *c = t->data;
	sd_fleet_signal_all(c->fleet, SIGKILL);
}

static int servers_running(const struct sd_controller *c)
{
	return sd_fleet_running(c->fleet);
}

void ctl_finish(struct sd_controller *c, int status)
{
	if (c->exiting)
		return;
	c->exiting = 1;
	sd_fleet_release_all(c->fleet);
	for (struct conn *k = c->conns; k; k = k->next) {
		cJSON *m = sd_msg_new(SD_MSG_STOP);
		cJSON_AddStringToObject(m, "reason", status ? "controller quit" : "done");
		ctl_conn_send(k, m);
	}
	uv_timer_start(&c->grace_timer, on_grace, 10000, 0);
	if (!servers_running(c) && c->opts.on_exit)
		c->opts.on_exit(c, status, c->opts.ctx);
	else
		c->exiting = status ? 3 : 2;   /* on_exit when the last server exits */
}

void ctl_maybe_finish(struct sd_controller *c)
{
	if (!c->finishing || c->ck || c->ck_writing || c->latest_ckpt_step < c->total_steps)
		return;
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddNumberToObject(ev, "steps", (double)c->step);
	if (!strcmp(c->job.train.dataset, "tokens")) {
		cJSON_AddNumberToObject(ev, "val_loss", c->final_loss);
		cJSON_AddNumberToObject(ev, "perplexity", exp(c->final_loss));
	} else {
		cJSON_AddNumberToObject(ev, "test_accuracy", c->final_acc);
		cJSON_AddNumberToObject(ev, "test_loss", c->final_loss);
	}
	cJSON_AddNumberToObject(ev, "seconds", ctl_run_time_s(c));
	cJSON_AddStringToObject(ev, "checkpoint", c->latest_ckpt);
	ctl_journal(c, SD_EV_DONE, ev);
	ctl_finish(c, 0);
}

/* Servers besides SERVER still coming up or running, or whose machine the
 * market took (not a broken worker). */
static int others_alive(struct sd_controller *c, const char *server)
{
	struct sd_server_info si[256];
	int n = sd_fleet_list(c->fleet, si, 256), others = 0;
	for (int i = 0; i < n && i < 256; i++) {
		if (strcmp(si[i].id, server) != 0)
			others += !si[i].gone;
		else if (si[i].state == SD_SERVER_NOTICE || si[i].state == SD_SERVER_REVOKED)
			others++;
	}
	return others;
}

/* Every worker exited before connecting: the run ends with the last one's
 * own last words, which its log has, read on the thread pool. */
struct last_words {
	uv_work_t req;
	struct sd_controller *c;
	char server[64];
	double status;
	char log[SD_PATH_MAX + 96];
	char last[256];
	int launch;           /* it never started: LAST is why, no log to read */
};

static void last_words_read(uv_work_t *req)
{
	struct last_words *w = req->data;
	char line[256];
	if (w->launch)
		return;
	FILE *f = fopen(w->log, "r");
	while (f && fgets(line, sizeof line, f)) {
		line[strcspn(line, "\r\n")] = 0;
		if (line[0])
			memcpy(w->last, line, sizeof w->last);
	}
	if (f)
		fclose(f);
}

static void last_words_done(uv_work_t *req, int status)
{
	struct last_words *w = req->data;
	struct sd_controller *c = w->c;
	(void)status;
	c->ending_no_worker = 0;
	c->no_worker = NULL;
	/* Servers the job asks for are requested one after another, and one
	 * whose worker could not start fails at once: look again now that
	 * the loop has gone round. */
	if (!c->exiting && !c->ever_authed && others_alive(c, w->server) == 0) {
		if (!c->fatal[0] && w->launch)
			snprintf(c->fatal, sizeof c->fatal, "no worker could be started; the last, %.32s: %.300s",
			         w->server, w->last);
		else if (!c->fatal[0])
			snprintf(c->fatal, sizeof c->fatal, "every worker exited before connecting; the last, %.32s, "
			         "with status %.0f: %.300s", w->server, w->status,
			         w->last[0] ? w->last : "(its log is empty)");
		ctl_finish(c, 1);
	}
	free(w);
}

/* LAUNCH_ERROR: the worker never started, and why (NULL: it exited). */
static void end_no_worker(struct sd_controller *c, const char *server, double status, const char *launch_error)
{
	if (c->ending_no_worker) {
		/* Pending: a launch failure after it is the last one. */
		struct last_words *p = c->no_worker;
		if (p && p->launch && launch_error) {
			snprintf(p->server, sizeof p->server, "%s", server);
			snprintf(p->last, sizeof p->last, "%s", launch_error);
		}
		return;
	}
	struct last_words *w = sd_calloc(1, sizeof *w);
	w->c = c;
	w->req.data = w;
	snprintf(w->server, sizeof w->server, "%s", server);
	w->status = status;
	if (launch_error) {
		w->launch = 1;
		snprintf(w->last, sizeof w->last, "%s", launch_error);
	}
	snprintf(w->log, sizeof w->log, "%s/logs/%s.log", c->run_dir, server);
	c->ending_no_worker = 1;
	c->no_worker = w;
	if (uv_queue_work(c->loop, &w->req, last_words_read, last_words_done) < 0) {
		last_words_read(&w->req);
		last_words_done(&w->req, 0);
	}
}

static void hook_journal(void *ctx, const struct sd_fleet_event *fe, cJSON *ev)
{
	struct sd_controller *c = ctx;
	enum sd_event_type type = fe->type;
	char server[64] = "";
	double status = type == SD_EV_SERVER_EXIT ? fe->exit_status : -1;   /* -1: none (a launch failure) */
	/* A failure, not a stop we asked for: a non-zero status or a crash
	 * signal (revocations and drops end workers with TERM or KILL).  A
	 * worker that could not be started at all counts as one that exited. */
	int exited = 0;
	if (type == SD_EV_SERVER_EXIT)
		exited = fe->signal ? fe->signal != SIGTERM && fe->signal != SIGKILL : fe->exit_status != 0;
	char launch_error[256] = "";
	if (type == SD_EV_ERROR && fe->launch_error) {
		snprintf(launch_error, sizeof launch_error, "%s", fe->launch_error);
		exited = 1;
	}
	if (exited)
		snprintf(server, sizeof server, "%s", fe->server ? fe->server : "?");
	char failed[64] = "";
	if (type == SD_EV_STATE && fe->state == SD_SERVER_FAILED && fe->server)
		snprintf(failed, sizeof failed, "%s", fe->server);
	/* A failed server's worker may still be connected (a host whose ssh
	 * session was lost and that the provider could not get back into):
	 * it must not train on, unbilled and out of reach of drop. */
	ctl_ap_on_event(c, type, ev);
	ctl_journal(c, type, ev);
	if (failed[0] && sd_fleet_server_failed(c->fleet, failed, 1))
		for (struct conn *k = c->conns, *next; k; k = next) {
			next = k->next;
			if (k->authed && !k->closing && !strcmp(k->server_id, failed)) {
				cJSON *m = sd_msg_new(SD_MSG_STOP);
				cJSON_AddStringToObject(m, "reason", "its server failed");
				ctl_conn_send(k, m);
				ctl_conn_close(k, "its server failed");
			}
		}
	/* A server that went away may have been the last hope of loading a job
	 * that others failed to load. */
	if (type == SD_EV_STATE)
		ctl_end_if_job_unloadable(c);
	/* No worker ever connected and none is left running: nothing will
	 * ever train (a worker program that cannot start, a broken install).
	 * End the run with the reason rather than wait forever. */
	if (exited && !c->ever_authed && !c->exiting && others_alive(c, server) == 0)
		end_no_worker(c, server, status, launch_error[0] ? launch_error : NULL);
}

static void hook_notice(void *ctx, const char *server, double seconds)
{
	struct sd_controller *c = ctx;
	for (struct conn *k = c->conns; k; k = k->next)
		if (k->authed && !strcmp(k->server_id, server)) {
			cJSON *m = sd_msg_new(SD_MSG_NOTICE);
			cJSON_AddNumberToObject(m, "seconds", seconds);
			ctl_conn_send(k, m);
		}
}

static void hook_idle(void *ctx)
{
	struct sd_controller *c = ctx;
	if (c->exiting >= 2 && c->opts.on_exit)
		c->opts.on_exit(c, c->exiting - 2, c->opts.ctx);
}

static void hook_command(void *ctx, const char *line)
{
	struct sd_controller *c = ctx;
	if (c->quitting || c->exiting)
		return;   /* e.g. the ssh provider acquiring a host again as the run ends */
	char *why = NULL;
	/* Journaled (with its error, if any) by the command table. */
	ctl_command(c, line, 0, &why);
	free(why);
}

static const struct sd_fleet_hooks fleet_hooks = {
	.journal = hook_journal,
	.notice = hook_notice,
	.idle = hook_idle,
	.command = hook_command,
};

/* After a failed create: the last handle's close callback frees the
 * controller, so libuv never touches freed memory. */
static void on_create_failed_closed(uv_handle_t *h)
{
	struct sd_controller *c = h->data;
	if (--c->handles_closing == 0)
		free(c);
}

/* The fleet over the job's provider (none without a catalog: local
 * servers only). */
static int create_fleet(struct sd_controller *c, const struct sd_controller_opts *opts, char **why)
{
	const struct sd_provider_ops *ops = NULL;
	if (opts->catalog_path) {
		ops = sd_provider_find(c->job.provider);
		if (!ops) {
			char names[256];
			return sd_why(why, "job: provider.name: unknown provider '%s' (known: %s)", c->job.provider,
			              sd_provider_names(names, sizeof names));
		}
	}
	cJSON *settings = sd_job_provider_settings(&c->job);
	if (!settings)
		return sd_why(why, "job: provider: its settings are not a JSON object");
	struct sd_fleet_config fc = {
		.provider = ops,
		.env = {
			.catalog_path = opts->catalog_path,
			.hazard_scale = c->job.hazard_scale,
			.boot_scale = c->job.boot_scale,
			.notice_scale = c->job.notice_scale,
			.seed = c->job.market_seed,
			.emulate = opts->emulate,
			.trace = opts->trace,
			.settings = settings,
			.settings_file = opts->job_file ? opts->job_file : "job.json",
			.orphans = opts->orphans,
			.interactive = opts->interactive,
		},
		.worker_path = opts->worker_path,
		.connect = c->connect,
		.advertise = c->advertised ? c->advertise : NULL,
		.run_dir = c->run_dir,
		.last_server = c->resume_last_server,
		.usd_before = c->resume_usd,
	};
	int rc = sd_fleet_create(&c->fleet, c->loop, &fc, &fleet_hooks, c, why);
	cJSON_Delete(settings);
	return rc;
}

/* Binds and listens on opts->listen_addr:listen_port; sets c->port, the
 * address this host's workers dial and the one other hosts' workers dial. */
static int ctl_listen(struct sd_controller *c, const struct sd_controller_opts *given, char **why)
{
	struct sd_controller_opts kept = *given;
	const struct sd_controller_opts *opts = given;
	if (c->kept_listen_addr[0]) {
		/* A resume given neither: where the run listened before. */
		kept.listen_addr = c->kept_listen_addr;
		kept.listen_port = c->kept_listen_port;
		kept.advertise = c->kept_advertise[0] ? c->kept_advertise : NULL;
		opts = &kept;
	}
	const char *host = opts->listen_addr ? opts->listen_addr : "127.0.0.1";
	struct sockaddr_storage addr;
	int v6 = strchr(host, ':') != NULL;
	int rc = v6 ? uv_ip6_addr(host, opts->listen_port, (struct sockaddr_in6 *)&addr)
	            : uv_ip4_addr(host, opts->listen_port, (struct sockaddr_in *)&addr);
	if (rc < 0)
		return sd_why(why, "controller: listen address '%s': not a numeric IPv4 or IPv6 address", host);
	rc = uv_tcp_bind(&c->server, (const struct sockaddr *)&addr, 0);
	if (rc == 0)
		rc = uv_listen((uv_stream_t *)&c->server, 128, ctl_on_connection);
	if (rc < 0)
		return sd_why(why, "controller: cannot listen on %s%s%s:%d: %s", v6 ? "[" : "", host, v6 ? "]" : "",
		              opts->listen_port, uv_strerror(rc));
	struct sockaddr_storage sa;
	int salen = sizeof sa;
	uv_tcp_getsockname(&c->server, (struct sockaddr *)&sa, &salen);
	c->port = ntohs(sa.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&sa)->sin6_port
	                                         : ((struct sockaddr_in *)&sa)->sin_port);
	/* A wildcard accepts on loopback too; the worker splits HOST:PORT at
	 * the last colon, so an IPv6 host needs no brackets. */
	const char *local = !strcmp(host, "0.0.0.0") ? "127.0.0.1" : !strcmp(host, "::") ? "::1" : host;
	snprintf(c->connect, sizeof c->connect, "%s:%d", local, c->port);
	c->advertised = opts->advertise != NULL;
	if (opts->advertise)
		snprintf(c->advertise, sizeof c->advertise, "%s", opts->advertise);
	else
		snprintf(c->advertise, sizeof c->advertise, "%s", c->connect);
	return 0;
}

/* How alike two offer ids are: the parts of PROVIDER/ZONE/GPU/KIND that
 * are equal, and half a part for the same region (the zone but its last
 * part). */
static double offer_likeness(const char *a, const char *b)
{
	char x[160], y[160], *sx = NULL, *sy = NULL;
	snprintf(x, sizeof x, "%s", a);
	snprintf(y, sizeof y, "%s", b);
	double score = 0;
	char *px = strtok_r(x, "/", &sx), *py = strtok_r(y, "/", &sy);
	for (int part = 0; px && py; part++) {
		if (!strcasecmp(px, py)) {
			score += 1;
		} else if (part == 1) {
			char *dx = strrchr(px, '-'), *dy = strrchr(py, '-');
			if (dx && dy && dx - px == dy - py && !strncmp(px, py, (size_t)(dx - px)))
				score += 0.5;
		}
		px = strtok_r(NULL, "/", &sx);
		py = strtok_r(NULL, "/", &sy);
	}
	return score;
}

/* Every offer the cluster names must exist before the run starts, so a
 * typo costs no server, no process and no run_start.  The error names
 * the provider and the offers most like the one asked for. */
static int check_cluster(struct sd_controller *c, char **why)
{
	const struct sd_catalog *cat = sd_fleet_catalog(c->fleet);
	for (int i = 0; i < c->job.ncluster; i++) {
		const char *want = c->job.cluster[i];
		if (!strcmp(want, "local") || (cat && sd_catalog_find(cat, want)))
			continue;
		const char *file = c->opts.job_file ? c->opts.job_file : "job";
		if (!cat)
			return sd_why(why, "%s: cluster[%d]: \"%s\": no market catalog loaded (\"local\" is the only "
			              "entry without one)", file, i, want);
		/* The three most alike, best first (the catalog's order on ties). */
		int best[3] = {-1, -1, -1};
		for (int k = 0; k < cat->noffers; k++) {
			double sk = offer_likeness(want, cat->offers[k].id);
			for (int j = 0; j < 3; j++) {
				if (best[j] < 0 || sk > offer_likeness(want, cat->offers[best[j]].id)) {
					memmove(best + j + 1, best + j, (size_t)(2 - j) * sizeof best[0]);
					best[j] = k;
					break;
				}
			}
		}
		char near[400] = "";
		for (int j = 0; j < 3 && best[j] >= 0; j++) {
			size_t n = strlen(near);
			snprintf(near + n, sizeof near - n, "%s%s", j ? ", " : "", cat->offers[best[j]].id);
		}
		const char *prov = sd_fleet_provider_name(c->fleet);
		return sd_why(why, "%s: cluster[%d]: \"%s\" is not an offer of the %s provider (%s: %d offers; "
		              "the most alike: %s)", file, i, want, prov ? prov : "?", cat->file, cat->noffers, near);
	}
	return 0;
}

/* The job's ONNX model, kept to send to the workers (protocol.h,
 * model_get): the caller's checked bytes (already in c->model_data), else
 * the file read now. */
static int load_model(struct sd_controller *c, char **why)
{
	if (!c->model_data) {
		uint8_t *b;
		if (sd_onnx_read_file(c->job.train.model, &b, &c->model_len, why) < 0)
			return -1;
		c->model_data = b;
	}
	if (sd_sha256_hex(c->model_data, c->model_len, c->model_sha256, why) < 0)
		return -1;
	return 0;
}

/* A resume trains on from the latest checkpoint, which records its ONNX
 * model file's SHA-256 and its data files' sizes and SHA-256s
 * (engine/checkpoint-data.h): a file exported again under the same path is
 * another model, token or .npy files written again are other data; both
 * are refused here, before any server is rented (every worker would refuse
 * the checkpoint anyway, one by one). */
static int check_resume_inputs(struct sd_controller *c, char **why)
{
	if (!c->latest_ckpt[0])
		return 0;
	struct sd_ckpt ck;
	char *err = NULL;
	if (sd_ckpt_read(c->latest_ckpt, &ck, &err) < 0) {
		free(err);   /* a worker loading it says what is wrong with it */
		return 0;
	}
	const struct sd_ckpt_section *sm = sd_ckpt_find(&ck, "meta");
	cJSON *meta = sm ? cJSON_ParseWithLength(sm->data, (size_t)sm->bytes) : NULL;
	const cJSON *sha = cJSON_GetObjectItemCaseSensitive(meta, "model_sha256");
	const cJSON *model = cJSON_GetObjectItemCaseSensitive(meta, "model");
	const cJSON *dataset = cJSON_GetObjectItemCaseSensitive(meta, "dataset");
	const cJSON *data = cJSON_GetObjectItemCaseSensitive(meta, "data");
	const char *was = cJSON_IsString(sha) ? sha->valuestring : "";
	int rc = 0;
	if (c->model_data && strcmp(was, c->model_sha256))
		rc = sd_why(why, "%s: checkpoint is of model file %s (SHA-256 %.12s), this run's %s has "
		            "SHA-256 %.12s", c->latest_ckpt,
		            cJSON_IsString(model) ? model->valuestring : "(unknown)", *was ? was : "(none)",
		            c->job.train.model, c->model_sha256);
	/* Another dataset altogether is the workers' to refuse (the trainer
	 * names both); the same one is checked file by file. */
	if (rc == 0 && cJSON_IsArray(data) && cJSON_IsString(dataset) &&
	    !strcmp(dataset->valuestring, c->job.train.dataset)) {
		struct sd_ckpt_data_id now;
		rc = sd_ckpt_data_id(c->job.train.dataset, c->job.train.data_dir, &now, why);
		if (rc == 0)
			rc = sd_ckpt_data_id_check(data, &now, c->latest_ckpt, why);
	}
	cJSON_Delete(meta);
	sd_ckpt_free(&ck);
	return rc;
}

int sd_controller_create(struct sd_controller **out, uv_loop_t *loop, const struct sd_job *job,
                         const struct sd_controller_opts *opts, char **why)
{
	*out = NULL;
	struct sd_controller *c = sd_calloc(1, sizeof *c);
	c->loop = loop;
	c->lock_fd = -1;
	c->journal_fd = -1;
	c->last_loss = -1;   /* none yet: the header shows "-" */
	c->opts = *opts;
	c->t0 = c->wall0 = ctl_wall_s();
	c->mono0 = ctl_mono_s();
	c->job = *job;
	c->model_data = opts->model_bytes;   /* ours now, whatever happens */
	c->model_len = opts->model_len;
	c->opts.model_bytes = NULL;
	snprintf(c->run_dir, sizeof c->run_dir, "%s", opts->run_dir);
	if (sd_onnx_is_path(job->train.model) && load_model(c, why) < 0)
		goto fail;
	if (ctl_open_run_dir(c, opts, why) < 0)
		goto fail;
	uv_tcp_init(loop, &c->server);
	c->server.data = c;
	c->handles_open = 1;
	if (ctl_listen(c, opts, why) < 0)
		goto fail;
	uv_timer_init(loop, &c->gen_timer);
	c->gen_timer.data = c;
	uv_timer_init(loop, &c->grace_timer);
	c->grace_timer.data = c;
	c->handles_open = 3;
	/* Liveness (controller.h): until a step is measured, the floor. */
	double floor_ms = c->job.comm_timeout_s * 1000;
	c->timeout_ms = (int)ceil(floor_ms);
	c->heartbeat_ms = (int)fmin(1000, fmax(20, floor_ms / 10));
	c->live_interval_ms = (int)fmin(250, fmax(20, floor_ms / 20));
	c->failing_gen = -1;
	uv_timer_init(loop, &c->live_timer);
	c->live_timer.data = c;
	c->handles_open = 4;
	uv_timer_init(loop, &c->ap.timer);
	c->ap.timer.data = c;
	c->handles_open = 5;
	c->cmd_by = "operator";
	if (create_fleet(c, opts, why) < 0 || check_cluster(c, why) < 0 || ctl_ap_init(c, why) < 0)
		goto fail;
	if (opts->resume)
		ctl_find_latest_checkpoint(c);
	if (opts->resume && check_resume_inputs(c, why) < 0)
		goto fail;
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "run_dir", c->run_dir);
	cJSON_AddNumberToObject(ev, "port", c->port);
	cJSON_AddStringToObject(ev, "connect", c->connect);
	cJSON_AddStringToObject(ev, "advertise", c->advertise);
	cJSON_AddStringToObject(ev, "controller_link", c->advertised ? "direct" : "ssh");
	cJSON_AddBoolToObject(ev, "resume", opts->resume);
	if (opts->model_warning && *opts->model_warning)
		cJSON_AddStringToObject(ev, "model_warning", opts->model_warning);
	/* What a sample is, for the cockpits' units: a language model's
	 * windows of block_size tokens (tokens/s, val loss), else images. */
	if (!strcmp(c->job.train.dataset, "tokens")) {
		cJSON_AddStringToObject(ev, "unit", "tokens");
		cJSON_AddNumberToObject(ev, "tokens_per_sample", c->job.train.block_size);
	} else {
		cJSON_AddStringToObject(ev, "unit", "images");
	}
	if (c->latest_ckpt[0]) {
		cJSON_AddStringToObject(ev, "checkpoint", c->latest_ckpt);
		c->step = c->latest_ckpt_step;
	}
	cJSON_AddItemToObject(ev, "job", sd_job_to_json(&c->job));
	ctl_journal(c, SD_EV_RUN_START, ev);
	c->live_tick_ms = uv_now(loop);
	uv_timer_start(&c->live_timer, ctl_on_live_timer, (uint64_t)c->live_interval_ms,
	               (uint64_t)c->live_interval_ms);
	*out = c;
	return 0;
fail:
	if (c->journal_fd >= 0)
		close(c->journal_fd);
	if (c->lock_fd >= 0)
		close(c->lock_fd);
	free(c->token);
	free(c->model_data);
	c->model_data = NULL;
	free(c->latest_data);   /* a resume refused after its checkpoint was read */
	c->latest_data = NULL;
	if (c->handles_open) {
		/* Handles in c are closing: the last callback frees c. */
		uv_handle_t *h[] = { (uv_handle_t *)&c->server, (uv_handle_t *)&c->gen_timer,
		                     (uv_handle_t *)&c->grace_timer, (uv_handle_t *)&c->live_timer,
		                     (uv_handle_t *)&c->ap.timer };
		c->handles_closing = c->handles_open;
		for (int i = 0; i < c->handles_open; i++)
			uv_close(h[i], on_create_failed_closed);
		return -1;
	}
	free(c);
	return -1;
}

int sd_controller_start(struct sd_controller *c, char **why)
{
	char id[16];
	char *e = NULL;
	if (c->job.workers > 0 && sd_fleet_local_possible(c->fleet, &e) < 0) {
		sd_why(why, "job: workers: %d: %s: set \"workers\": 0 (the cluster's hosts train)", c->job.workers, e);
		free(e);
		return -1;
	}
	for (int i = 0; i < c->job.workers; i++)
		if (sd_fleet_acquire(c->fleet, "local", id, sizeof id, why) < 0)
			return -1;
	/* The job's initial cluster; a stockout is journaled and skipped. */
	for (int i = 0; i < c->job.ncluster; i++) {
		char *err = NULL;
		sd_fleet_acquire(c->fleet, c->job.cluster[i], id, sizeof id, &err);
		free(err);
	}
	ctl_ap_start(c);
	return 0;
}

int sd_controller_workers(const struct sd_controller *c, struct sd_worker_info *out, int max)
{
	int n = 0;
	for (const struct conn *k = c->conns; k && n < max; k = k->next) {
		if (!k->authed)
			continue;
		struct sd_worker_info *w = &out[n++];
		snprintf(w->server, sizeof w->server, "%s", k->server_id);
		w->member = k->member;
		w->rank = k->member ? k->rank : -1;
		w->images_per_sec = c->paused ? 0 : k->ips;   /* paused: nothing trains */
		w->compute_ms = k->compute_ms;
		w->comm_ms = k->comm_ms;
		w->emulated = k->emulated;
		snprintf(w->device, sizeof w->device, "%s", k->device);
		snprintf(w->precision, sizeof w->precision, "%s", k->precision);
	}
	return n;
}

void sd_controller_signal(struct sd_controller *c, int signum)
{
	const char *name = signum == SIGTERM ? "SIGTERM" : signum == SIGINT ? "SIGINT"
	                   : signum == SIGHUP ? "SIGHUP" : "signal";
	ctl_journal_kv(c, SD_EV_SIGNAL, "signal", name, "action", "quit");
	char *why = NULL;
	ctl_cmd_quit(c, 0, NULL, &why);
	free(why);
}

void sd_controller_status(const struct sd_controller *c, struct sd_run_status *st)
{
	memset(st, 0, sizeof *st);
	st->step = c->step;
	st->total_steps = c->total_steps;
	st->epochs = c->job.train.epochs;
	st->epoch = c->last_epoch;
	st->loss = c->step > 0 ? c->last_loss : -1;
	int lm = !strcmp(c->job.train.dataset, "tokens");
	st->test_accuracy = c->last_epoch > 0 && !lm ? c->last_acc : -1;
	st->val_loss = c->last_epoch > 0 && lm ? c->last_val_loss : -1;
	/* Paused, nothing trains: no speed, no ETA (rather than the last ones). */
	st->images_per_sec = c->step_ms_ema > 0 && c->world_size > 0 && !c->paused
		? c->job.train.global_batch / (c->step_ms_ema / 1000) : 0;
	st->elapsed_s = ctl_run_time_s(c);
	st->eta_s = c->step_ms_ema > 0 && c->total_steps > 0 && c->world_size > 0 && !c->paused
		? (c->total_steps - c->step) * c->step_ms_ema / 1000 : -1;
	st->generation = c->generation;
	st->world_size = c->world_size;
	st->paused = c->paused;
	st->done = c->exiting != 0;
}

const char *sd_controller_fatal(const struct sd_controller *c)
{
	return c->fatal[0] ? c->fatal : NULL;
}

const struct sd_job *sd_controller_job(const struct sd_controller *c)
{
	return &c->job;
}

struct sd_fleet *sd_controller_fleet(struct sd_controller *c)
{
	return c->fleet;
}

void sd_controller_close(struct sd_controller *c, void (*done)(void *arg), void *arg)
{
	c->closing = 1;   /* checkpoint writes in flight finish and are journaled */
	while (c->conns)
		ctl_conn_close(c->conns, NULL);
	sd_fleet_close(c->fleet, done, arg);
	uv_close((uv_handle_t *)&c->server, NULL);
	uv_close((uv_handle_t *)&c->gen_timer, NULL);
	uv_close((uv_handle_t *)&c->grace_timer, NULL);
	uv_close((uv_handle_t *)&c->live_timer, NULL);
	ctl_ap_close(c);
}

void sd_controller_free(struct sd_controller *c)
{
	if (!c)
		return;
	while (c->kv) {
		struct kv *e = c->kv;
		c->kv = e->next;
		free(e->key);
		free(e->value);
		free(e);
	}
	while (c->gets) {
		struct pending_get *g = c->gets;
		c->gets = g->next;
		free(g->key);
		free(g);
	}
	cJSON_Delete(c->sums);
	cJSON_Delete(c->orphan_step);
	free(c->job_failed);
	sd_fleet_free(c->fleet);
	free(c->ck);
	free(c->latest_data);
	free(c->model_data);
	free(c->token);
	ctl_journal_drain(c);
	if (c->journal_fd >= 0)
		close(c->journal_fd);
	if (c->lock_fd >= 0)
		close(c->lock_fd);   /* releases the run directory */
	free(c);
}
