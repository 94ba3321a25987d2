/* src/controller/conn.c - worker connections: sending, closing, rejecting,
 * reading lines, and the dispatch of every message a worker sends (hello,
 * ready, joined, step, comm_failed, leaving, checkpoint chunks, logs). */
#include "config.h"

#include "src/controller/internal.h"

#include "src/base/token.h"

struct write_req {
	uv_write_t req;
	char *data;
	size_t stream_bytes;   /* a checkpoint stream's chunk: its size, else 0 */
};

static void on_write(uv_write_t *req, int status)
{
	struct write_req *w = (struct write_req *)req;
	struct conn *k = req->handle->data;
	k->stream_inflight -= w->stream_bytes;
	int more = w->stream_bytes && status == 0 && !k->closing;
	free(w->data);
	free(w);
	if (more && k->model_streaming)
		ctl_model_pump(k);
	if (more && k->streaming)
		ctl_stream_pump(k);
}

/* Queues msg (consumed) on k's socket; returns the bytes queued, 0 if
 * none (k closing, or the write failed). */
static size_t conn_write(struct conn *k, cJSON *msg, int stream)
{
	if (k->closing) {
		cJSON_Delete(msg);
		return 0;
	}
	struct write_req *w = sd_malloc(sizeof *w);
	size_t len;
	w->data = sd_msg_encode(msg, &len);
	w->stream_bytes = stream ? len : 0;
	cJSON_Delete(msg);
	uv_buf_t buf = uv_buf_init(w->data, (unsigned)len);
	if (uv_write(&w->req, (uv_stream_t *)&k->tcp, &buf, 1, on_write) < 0) {
		free(w->data);
		free(w);
		return 0;
	}
	k->stream_inflight += w->stream_bytes;
	return len;
}

void ctl_conn_send(struct conn *k, cJSON *msg)
{
	conn_write(k, msg, 0);
}

size_t ctl_conn_send_chunk(struct conn *k, cJSON *msg)
{
	return conn_write(k, msg, 1);
}

static void on_conn_closed(uv_handle_t *h)
{
	struct conn *k = h->data;
	sd_line_reader_free(&k->rd);
	cJSON_Delete(k->stream_then);
	free(k);
}

/* Starts the recovery clock for a member leaving the group: at its notice
 * (LEAVING) for a graceful leave, at its connection's end otherwise, at the
 * last time it was heard from for an unresponsive one (`at`, mono_s()
 * seconds).  The next completed step reports recovery_s, steps_lost and
 * lost_servers. */
void ctl_record_loss(struct sd_controller *c, struct conn *k, double at)
{
	k->loss_recorded = 1;
	if (c->lost_at <= 0) {
		c->lost_at = at;
		c->lost_step = c->step;
		c->lost_gen = c->generation;
		c->lost_abrupt = 0;
	}
	c->lost_abrupt |= !k->leaving;
	if (c->nlost_servers < 8)
		snprintf(c->lost_servers[c->nlost_servers++], sizeof c->lost_servers[0], "%s", k->server_id);
}

void ctl_conn_close(struct conn *k, const char *why_lost)
{
	struct sd_controller *c = k->c;
	if (k->closing)
		return;
	k->closing = 1;
	/* Unlink from the list and drop its pending store gets. */
	struct conn **pp = &c->conns;
	while (*pp && *pp != k)
		pp = &(*pp)->next;
	if (*pp)
		*pp = k->next;
	struct pending_get **gp = &c->gets;
	while (*gp) {
		if ((*gp)->conn == k) {
			struct pending_get *g = *gp;
			*gp = g->next;
			free(g->key);
			free(g);
		} else {
			gp = &(*gp)->next;
		}
	}
	if (k->authed)
		sd_fleet_worker_event(c->fleet, k->server_id, SD_WORKER_GONE);
	if (k->authed && why_lost) {
		cJSON *ev = cJSON_CreateObject();
		cJSON_AddStringToObject(ev, "server", k->server_id);
		cJSON_AddNumberToObject(ev, "generation", (double)c->generation);
		cJSON_AddNumberToObject(ev, "step", (double)c->step);
		cJSON_AddStringToObject(ev, "reason", why_lost);
		cJSON_AddBoolToObject(ev, "member", k->member);
		ctl_journal(c, k->leaving || c->exiting ? SD_EV_WORKER_LEFT : SD_EV_WORKER_LOST, ev);
		if (k->member && !c->exiting && !k->loss_recorded)
			ctl_record_loss(c, k, ctl_mono_s());
		if (k->member && !c->exiting)
			ctl_schedule_generation(c, k->leaving ? "worker left" : "worker lost");
		/* The checkpoint quit waits for will not come from a lost rank 0. */
		if (c->quitting && k->member && k->rank == 0 && !c->ck_writing)
			ctl_finish(c, 1);
	}
	uv_close((uv_handle_t *)&k->tcp, on_conn_closed);
}

/* Ends a connection that broke the protocol: say why, journal it, close. */
void ctl_conn_reject(struct conn *k, enum sd_event_type event, const char *reason)
{
	struct sd_controller *c = k->c;
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "peer", k->peer);
	if (k->server_id[0])
		cJSON_AddStringToObject(ev, "server", k->server_id);
	cJSON_AddStringToObject(ev, "reason", reason);
	ctl_journal(c, event, ev);
	cJSON *m = sd_msg_new(SD_MSG_ERROR);
	cJSON_AddStringToObject(m, "reason", reason);
	ctl_conn_send(k, m);
	ctl_conn_close(k, reason);
}

static void on_hello(struct sd_controller *c, struct conn *k, const cJSON *m)
{
	if (!sd_token_equal(c->token, sd_msg_str(m, "token", ""))) {
		ctl_conn_reject(k, SD_EV_AUTH_FAILED, "wrong token");
		return;
	}
	const char *id = sd_msg_str(m, "server_id", "");
	if (!id[0] || strlen(id) >= sizeof k->server_id) {
		ctl_conn_reject(k, SD_EV_PROTOCOL_ERROR, "hello: bad server_id");
		return;
	}
	for (struct conn *o = c->conns; o; o = o->next)
		if (o != k && o->authed && !strcmp(o->server_id, id)) {
			ctl_conn_reject(k, SD_EV_PROTOCOL_ERROR, "hello: server_id already connected");
			return;
		}
	if (sd_fleet_server_failed(c->fleet, id, 0)) {
		/* Not a broken protocol: the worker outlived its server (a
		 * host's worker that the run already gave up). */
		snprintf(k->server_id, sizeof k->server_id, "%s", id);
		ctl_conn_reject(k, SD_EV_WORKER_REFUSED, "hello: its server failed; a new one must be added");
		return;
	}
	k->authed = 1;
	c->ever_authed = 1;
	snprintf(k->server_id, sizeof k->server_id, "%s", id);
	k->pid = (long)sd_msg_int(m, "pid", 0);
	sd_fleet_worker_event(c->fleet, id, SD_WORKER_CONNECTED);
	cJSON *w = sd_msg_new(SD_MSG_WELCOME);
	cJSON_AddNumberToObject(w, "version", SD_PROTO_VERSION);
	cJSON_AddStringToObject(w, "worker_id", id);
	cJSON_AddNumberToObject(w, "heartbeat_ms", c->heartbeat_ms);
	cJSON_AddItemToObject(w, "job", sd_job_to_json(&c->job));
	if (c->model_data) {
		cJSON_AddStringToObject(w, "model_sha256", c->model_sha256);
		cJSON_AddNumberToObject(w, "model_bytes", (double)c->model_len);
	}
	ctl_conn_send(k, w);
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "server", id);
	cJSON_AddNumberToObject(ev, "pid", (double)k->pid);
	cJSON_AddStringToObject(ev, "peer", k->peer);
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m, "rejoin")))
		cJSON_AddBoolToObject(ev, "rejoin", 1);
	ctl_journal(c, SD_EV_WORKER_CONNECTED, ev);
	if (c->exiting) {
		/* Back too late (a dropped worker that rejoins as the run ends). */
		cJSON *stop = sd_msg_new(SD_MSG_STOP);
		cJSON_AddStringToObject(stop, "reason", "run over");
		ctl_conn_send(k, stop);
	}
}

/* READY: the worker has loaded the job; it says where it computes.  A new
 * generation takes it in. */
static void on_ready(struct sd_controller *c, struct conn *k, const cJSON *m)
{
	k->ready = 1;
	c->ever_ready = 1;
	/* Where the worker computes (optional fields, engine/backend.h). */
	snprintf(k->backend, sizeof k->backend, "%s", sd_msg_str(m, "backend", ""));
	snprintf(k->device, sizeof k->device, "%s", sd_msg_str(m, "device", ""));
	snprintf(k->precision, sizeof k->precision, "%s", sd_msg_str(m, "precision", ""));
	snprintf(k->precision_reason, sizeof k->precision_reason, "%s",
	         sd_msg_str(m, "precision_reason", ""));
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "server", k->server_id);
	if (k->backend[0]) {
		cJSON_AddStringToObject(ev, "backend", k->backend);
		if (k->device[0])
			cJSON_AddStringToObject(ev, "device", k->device);
		cJSON_AddStringToObject(ev, "backend_reason", sd_msg_str(m, "backend_reason", ""));
	}
	if (k->precision[0]) {
		cJSON_AddStringToObject(ev, "precision", k->precision);
		cJSON_AddStringToObject(ev, "precision_reason", k->precision_reason);
	}
	ctl_journal(c, SD_EV_WORKER_READY, ev);
	ctl_schedule_generation(c, "worker ready");
}

/* KV_GET: the rendezvous store answers now, or when the key is set. */
static void on_kv_get(struct sd_controller *c, struct conn *k, const cJSON *m)
{
	const char *key = sd_msg_str(m, "key", "");
	long long id = sd_msg_int(m, "id", 0);
	struct kv *e = ctl_kv_find(c, key);
	if (e) {
		ctl_kv_reply(k, id, key, e->value);
	} else {
		struct pending_get *g = sd_calloc(1, sizeof *g);
		g->conn = k;
		g->id = id;
		g->key = strdup(key);
		if (!g->key)
			sd_oom();
		g->next = c->gets;
		c->gets = g;
	}
}

/* JOINED: the worker holds the generation's state; its server trains (a
 * swap waiting for it releases the old server now: the fleet's). */
static void on_joined(struct sd_controller *c, struct conn *k, const cJSON *m)
{
	k->has_state = 1;
	long total = (long)sd_msg_int(m, "total_steps", 0);
	if (total > 0)
		c->total_steps = total;
	ctl_step_adopted(c, (long)sd_msg_int(m, "step", 0));
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "server", k->server_id);
	cJSON_AddNumberToObject(ev, "generation", (double)sd_msg_int(m, "generation", 0));
	cJSON_AddNumberToObject(ev, "rank", (double)sd_msg_int(m, "rank", 0));
	cJSON_AddNumberToObject(ev, "step", (double)sd_msg_int(m, "step", 0));
	cJSON_AddNumberToObject(ev, "source_rank", (double)sd_msg_int(m, "source_rank", 0));
	cJSON_AddNumberToObject(ev, "join_ms", sd_msg_num(m, "join_ms", 0));
	cJSON_AddStringToObject(ev, "comm", sd_msg_str(m, "comm", ""));
	if (cJSON_GetObjectItemCaseSensitive(m, "bucket_kib"))
		cJSON_AddNumberToObject(ev, "bucket_kib", sd_msg_num(m, "bucket_kib", 0));
	/* The precision the worker resolved the job's to (its READY). */
	if (k->precision[0]) {
		cJSON_AddStringToObject(ev, "precision", k->precision);
		cJSON_AddStringToObject(ev, "precision_reason", k->precision_reason);
	}
	ctl_journal(c, SD_EV_WORKER_JOINED, ev);
	sd_fleet_worker_event(c->fleet, k->server_id, SD_WORKER_TRAINING);
	if (k->rank == 0) {
		c->step = (long)sd_msg_int(m, "step", 0);
		c->recover_start = c->step;
	}
}

/* COMM_FAILED: a collective of the current generation failed; the other
 * members are told to give up at once, and a new generation forms. */
/* worker_leaving: who, why, its last step and (newer workers) its own
 * clock when it left, which the tests order its later actions against. */
static void journal_leaving(struct sd_controller *c, const struct conn *k, const cJSON *m)
{
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "server", k->server_id);
	cJSON_AddStringToObject(ev, "reason", sd_msg_str(m, "reason", ""));
	cJSON_AddNumberToObject(ev, "step", (double)sd_msg_int(m, "step", 0));
	if (sd_msg_num(m, "left_at", 0) > 0)
		cJSON_AddNumberToObject(ev, "left_at", sd_msg_num(m, "left_at", 0));
	ctl_journal(c, SD_EV_WORKER_LEAVING, ev);
}

static void on_comm_failed(struct sd_controller *c, struct conn *k, const cJSON *m)
{
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "server", k->server_id);
	cJSON_AddNumberToObject(ev, "generation", (double)sd_msg_int(m, "generation", 0));
	cJSON_AddNumberToObject(ev, "step", (double)sd_msg_int(m, "step", 0));
	cJSON_AddStringToObject(ev, "reason", sd_msg_str(m, "reason", ""));
	ctl_journal(c, SD_EV_COMM_FAILED, ev);
	long gen = (long)sd_msg_int(m, "generation", -1);
	if (gen == c->generation) {
		k->failed_gen = gen;
		if (c->failing_gen != gen) {
			c->failing_gen = gen;
			c->failing_since_ms = uv_now(c->loop);
			/* Members waiting in its rendezvous, or computing, give
			 * up now rather than at their timeout. */
			for (struct conn *o = c->conns; o; o = o->next)
				if (o->member && o != k) {
					cJSON *ab = sd_msg_new(SD_MSG_ABORT);
					cJSON_AddNumberToObject(ab, "generation", (double)gen);
					ctl_conn_send(o, ab);
				}
		}
		ctl_schedule_generation(c, "collective failed");
	}
}

/* The worker's watcher heard the cloud (protocol.h cloud_notice and
 * cloud_warning): journaled with its source and deadline.  After a notice
 * the worker leaves at its next step boundary by itself (its leaving
 * message follows), and rank 0 checkpoints first when the whole group is
 * leaving, as for a simulated notice. */
static void on_cloud_message(struct sd_controller *c, struct conn *k, enum sd_msg_type type, const cJSON *m)
{
	cJSON *f = cJSON_CreateObject();
	if (!f)
		sd_oom();
	static const char *const strs[] = { "source", "event", "deadline", "detail" };
	for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, strs[i]);
		if (cJSON_IsString(v))
			cJSON_AddStringToObject(f, strs[i], v->valuestring);
	}
	long long step = sd_msg_int(m, "step", -1);
	if (step >= 0)
		cJSON_AddNumberToObject(f, "step", (double)step);
	double seconds = sd_msg_num(m, "seconds", -1);
	if (type == SD_MSG_CLOUD_NOTICE) {
		if (c->fleet && sd_fleet_cloud_notice(c->fleet, k->server_id, seconds, f)) {
			cJSON_Delete(f);
			return;
		}
	}
	cJSON *ev = cJSON_CreateObject();
	if (!ev)
		sd_oom();
	cJSON_AddStringToObject(ev, "server", k->server_id);
	if (type == SD_MSG_CLOUD_NOTICE || seconds >= 0)
		cJSON_AddNumberToObject(ev, "seconds", seconds);
	const cJSON *it;
	cJSON_ArrayForEach(it, f)
		cJSON_AddItemToObject(ev, it->string, cJSON_Duplicate(it, 1));
	cJSON_Delete(f);
	ctl_journal(c, type == SD_MSG_CLOUD_NOTICE ? SD_EV_NOTICE : SD_EV_CLOUD_WARNING, ev);
}

static void on_message(struct conn *k, enum sd_msg_type type, cJSON *m)
{
	struct sd_controller *c = k->c;
	if (!k->authed && type != SD_MSG_HELLO) {
		ctl_conn_reject(k, SD_EV_PROTOCOL_ERROR, "first message must be hello");
		return;
	}
	switch (type) {
	case SD_MSG_HELLO:
		if (k->authed)
			ctl_conn_reject(k, SD_EV_PROTOCOL_ERROR, "second hello");
		else
			on_hello(c, k, m);
		break;
	case SD_MSG_READY:
		on_ready(c, k, m);
		break;
	case SD_MSG_KV_SET:
		ctl_kv_set(c, sd_msg_str(m, "key", ""), sd_msg_str(m, "value", ""));
		break;
	case SD_MSG_KV_GET:
		on_kv_get(c, k, m);
		break;
	case SD_MSG_JOINED:
		on_joined(c, k, m);
		break;
	case SD_MSG_STEP:
		ctl_on_step(c, k, m);
		break;
	case SD_MSG_HEARTBEAT:
		break;   /* its bytes were the point (heard_ms) */
	case SD_MSG_COMM_FAILED:
		on_comm_failed(c, k, m);
		break;
	case SD_MSG_LEAVING:
		k->leaving = 1;
		journal_leaving(c, k, m);
		if (k->member && !c->exiting && !k->loss_recorded)
			ctl_record_loss(c, k, ctl_mono_s());
		if (k->member)
			ctl_schedule_generation(c, "worker left");
		break;
	case SD_MSG_CLOUD_NOTICE:
	case SD_MSG_CLOUD_WARNING:
		on_cloud_message(c, k, type, m);
		break;
	case SD_MSG_CKPT_CHUNK:
		ctl_on_ckpt_chunk(c, k, m);
		break;
	case SD_MSG_MODEL_GET:
		ctl_on_model_get(c, k, m);
		break;
	case SD_MSG_LOG:
		if (!strcmp(sd_msg_str(m, "level", ""), "fatal")) {
			/* This worker cannot load the job (its server lacks the
			 * data, say): it fails alone and its server is marked
			 * failed as its worker exits.  The run ends only when no
			 * worker can load the job at all. */
			const char *msg = sd_msg_str(m, "message", "");
			ctl_journal_kv(c, SD_EV_JOB_ERROR, "server", k->server_id, "error", msg);
			if (!c->job_error[0])
				snprintf(c->job_error, sizeof c->job_error, "%s", msg);
			c->job_failed = realloc(c->job_failed, (size_t)(c->njob_failed + 1) * sizeof *c->job_failed);
			if (!c->job_failed)
				sd_oom();
			snprintf(c->job_failed[c->njob_failed++], sizeof c->job_failed[0], "%s", k->server_id);
			ctl_conn_close(k, NULL);   /* job_error says it all */
			ctl_end_if_job_unloadable(c);
		} else {
			ctl_journal_kv(c, SD_EV_WORKER_LOG, "server", k->server_id, "message", sd_msg_str(m, "message", ""));
		}
		break;
	default: {
		char reason[96];
		snprintf(reason, sizeof reason, "unexpected message type '%s' from a worker",
		         sd_msg_type_name(type));
		ctl_conn_reject(k, SD_EV_PROTOCOL_ERROR, reason);
		break;
	}
	}
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	buf->base = sd_malloc(65536);
	buf->len = 65536;
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
	struct conn *k = s->data;
	if (nread < 0) {
		free(buf->base);
		ctl_conn_close(k, nread == UV_EOF ? "connection closed" : uv_strerror((int)nread));
		return;
	}
	if (nread > 0) {
		k->heard_ms = uv_now(k->c->loop);
		if (k->unheard && k->authed) {
			/* Left out of a generation for its silence, heard again. */
			k->unheard = 0;
			if (k->ready && !k->member)
				ctl_schedule_generation(k->c, "worker heard again");
		}
	}
	sd_line_reader_feed(&k->rd, buf->base, (size_t)nread);
	free(buf->base);
	const char *line;
	size_t len;
	char *why = NULL;
	int got;
	while (!k->closing && (got = sd_line_reader_next(&k->rd, &line, &len, &why)) != 0) {
		if (got < 0) {
			ctl_conn_reject(k, SD_EV_PROTOCOL_ERROR, why ? why : "line too long");
			break;
		}
		enum sd_msg_type type;
		cJSON *m;
		if (sd_msg_decode(line, len, &type, &m, &why) < 0) {
			ctl_conn_reject(k, SD_EV_PROTOCOL_ERROR, why ? why : "bad message");
			break;
		}
		on_message(k, type, m);
		cJSON_Delete(m);
	}
	free(why);
}

void ctl_on_connection(uv_stream_t *server, int status)
{
	struct sd_controller *c = server->data;
	if (status < 0)
		return;
	struct conn *k = sd_calloc(1, sizeof *k);
	k->c = c;
	k->heard_ms = uv_now(c->loop);
	k->failed_gen = -1;
	sd_line_reader_init(&k->rd, SD_PROTO_LINE_MAX);
	uv_tcp_init(c->loop, &k->tcp);
	k->tcp.data = k;
	if (uv_accept(server, (uv_stream_t *)&k->tcp) < 0) {
		k->closing = 1;
		uv_close((uv_handle_t *)&k->tcp, on_conn_closed);
		return;
	}
	uv_tcp_nodelay(&k->tcp, 1);
	struct sockaddr_storage sa;
	int salen = sizeof sa;
	snprintf(k->peer, sizeof k->peer, "?");
	if (uv_tcp_getpeername(&k->tcp, (struct sockaddr *)&sa, &salen) == 0) {
		char ip[48] = "";
		int port = 0;
		if (sa.ss_family == AF_INET) {
			uv_ip4_name((struct sockaddr_in *)&sa, ip, sizeof ip);
			port = ntohs(((struct sockaddr_in *)&sa)->sin_port);
		}
		snprintf(k->peer, sizeof k->peer, "%s:%d", ip, port);
	}
	k->next = c->conns;
	c->conns = k;
	uv_read_start((uv_stream_t *)&k->tcp, on_alloc, on_read);
}
