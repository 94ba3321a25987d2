/* src/controller/generation.c - generations: the batch split by measured
 * speed, forming a generation, its timeout and the liveness checks that drop
 * a silent worker, step reports and their metrics. */
#include "config.h"

#include "src/controller/internal.h"

/* Splits the global batch across members in proportion to measured speed
 * (largest remainder; everyone gets at least one sample when possible). */
static void split_batch(struct sd_controller *c, struct conn **m, int n)
{
	int B = c->job.train.global_batch;
	/* A worker not measured yet counts as the mean of the measured ones (all
	 * equal when nobody is measured), so a newcomer gets a fair share. */
	double measured = 0;
	int nmeasured = 0;
	for (int i = 0; i < n; i++)
		if (m[i]->ips > 0) {
			measured += m[i]->ips;
			nmeasured++;
		}
	double mean = nmeasured ? measured / nmeasured : 1;
	for (int i = 0; i < n; i++)
		if (!(m[i]->ips > 0))
			m[i]->ips_assumed = mean;
	double total = 0;
	for (int i = 0; i < n; i++)
		total += m[i]->ips > 0 ? m[i]->ips : m[i]->ips_assumed;
	int given = 0;
	double *rem = sd_calloc((size_t)n, sizeof(double));
	for (int i = 0; i < n; i++) {
		double share = (m[i]->ips > 0 ? m[i]->ips : m[i]->ips_assumed) / total * B;
		m[i]->count = (int)floor(share);
		if (m[i]->count < 1 && B >= n)
			m[i]->count = 1;
		rem[i] = share - floor(share);
		given += m[i]->count;
	}
	while (given < B) {
		int best = 0;
		for (int i = 1; i < n; i++)
			if (rem[i] > rem[best])
				best = i;
		m[best]->count++;
		rem[best] = -1;
		given++;
	}
	while (given > B) {
		int big = 0;
		for (int i = 1; i < n; i++)
			if (m[i]->count > m[big]->count)
				big = i;
		m[big]->count--;
		given--;
	}
	free(rem);
	int off = 0;
	for (int i = 0; i < n; i++) {
		m[i]->offset = off;
		off += m[i]->count;
	}
}

/* The timeout of a generation of these n members, in ms: see "Liveness" in
 * controller.h.  Call after split_batch (it uses the members' counts). */
static int generation_timeout_ms(const struct sd_controller *c, struct conn **m, int n)
{
	double floor_ms = c->job.comm_timeout_s * 1000, measured = 0, comm = -1;
	int nmeasured = 0;
	for (int i = 0; i < n; i++)
		if (m[i]->ips > 0) {
			measured += m[i]->ips;
			nmeasured++;
		}
	double slowest = 0;
	for (int i = 0; i < n && nmeasured; i++) {
		double ips = m[i]->ips > 0 ? m[i]->ips : measured / nmeasured;
		slowest = fmax(slowest, m[i]->count * 1000.0 / ips);
		if (m[i]->comm_ms > 0 && (comm < 0 || m[i]->comm_ms < comm))
			comm = m[i]->comm_ms;
	}
	double predicted = slowest > 0 ? slowest + fmax(comm, 0) : 0;
	double t = fmax(floor_ms, SD_TIMEOUT_STEPS * predicted);
	return t > 86400000 ? 86400000 : (int)ceil(t);
}

/* Whether a failed collective of the current generation is accounted for:
 * every member reported it, left, or was dropped (its connection closed). */
static int failure_settled(const struct sd_controller *c)
{
	if (c->failing_gen != c->generation)
		return 1;
	for (const struct conn *k = c->conns; k; k = k->next)
		if (k->member && !k->closing && !k->leaving && k->failed_gen != c->generation)
			return 0;
	return 1;
}

static void form_generation(struct sd_controller *c)
{
	if (c->exiting)
		return;
	/* After a failed collective, a member that has not reported may be the
	 * one that is silent: wait until each is heard from or dropped (the
	 * liveness timer and every report call schedule_generation again). */
	if (!failure_settled(c))
		return;
	struct conn *m[1024];
	int n = 0, holders = 0;
	uint64_t now = uv_now(c->loop);
	for (struct conn *k = c->conns; k; k = k->next) {
		k->member = 0;
		if (!k->authed || !k->ready || k->leaving || k->closing || n >= 1024)
			continue;
		/* Never admit a worker we have not heard from lately: it would
		 * hold the whole group in the rendezvous. */
		if (now - k->heard_ms > (uint64_t)c->timeout_ms / 2) {
			k->unheard = 1;
			continue;
		}
		m[n++] = k;
		holders += k->has_state;
	}
	/* Fewer ready workers than the job's min_workers train nobody: the run
	 * waits for more, as torchrun's rendezvous waits for its MIN nodes. */
	int ready = n;
	if (n < c->job.min_workers)
		n = 0;
	c->generation++;
	ctl_stream_stop_all(c);   /* a stream for an older generation is moot */
	c->world_size = n;
	c->sums_count = 0;
	ctl_kv_prune(c, c->generation - 1);
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddNumberToObject(ev, "generation", (double)c->generation);
	cJSON_AddNumberToObject(ev, "world_size", n);
	cJSON_AddStringToObject(ev, "reason", c->gen_reason);
	cJSON_AddNumberToObject(ev, "step", (double)c->step);
	if (n == 0 || c->paused) {
		char state[96];
		if (c->paused)
			snprintf(state, sizeof state, "paused");
		else if (c->job.min_workers > 1)
			snprintf(state, sizeof state, "waiting for workers (%d ready, min_workers %d)", ready,
			         c->job.min_workers);
		else
			snprintf(state, sizeof state, "waiting for workers");
		cJSON_AddStringToObject(ev, "state", state);
		ctl_journal(c, SD_EV_GENERATION, ev);
		return;
	}
	/* Put state holders first so rank 0 holds the state when any does. */
	for (int i = 0, j = 0; i < n; i++)
		if (m[i]->has_state) {
			struct conn *t = m[j];
			m[j++] = m[i];
			m[i] = t;
		}
	split_batch(c, m, n);
	c->timeout_ms = generation_timeout_ms(c, m, n);
	cJSON_AddNumberToObject(ev, "timeout_ms", c->timeout_ms);
	cJSON *members = cJSON_CreateArray();
	for (int i = 0; i < n; i++) {
		m[i]->member = 1;
		m[i]->rank = i;
		cJSON *e = cJSON_CreateObject();
		cJSON_AddStringToObject(e, "server", m[i]->server_id);
		cJSON_AddNumberToObject(e, "rank", i);
		cJSON_AddNumberToObject(e, "offset", m[i]->offset);
		cJSON_AddNumberToObject(e, "count", m[i]->count);
		cJSON_AddItemToArray(members, e);
	}
	int resume = holders == 0 && c->latest_ckpt[0];
	if (resume)
		cJSON_AddStringToObject(ev, "resume_from", c->latest_ckpt);
	cJSON_AddItemToObject(ev, "members", cJSON_Duplicate(members, 1));
	ctl_journal(c, SD_EV_GENERATION, ev);
	for (int i = 0; i < n; i++) {
		cJSON *g = sd_msg_new(SD_MSG_GENERATION);
		cJSON_AddNumberToObject(g, "generation", (double)c->generation);
		cJSON_AddNumberToObject(g, "rank", i);
		cJSON_AddNumberToObject(g, "world_size", n);
		cJSON_AddNumberToObject(g, "offset", m[i]->offset);
		cJSON_AddNumberToObject(g, "count", m[i]->count);
		cJSON_AddNumberToObject(g, "timeout_ms", c->timeout_ms);
		cJSON_AddItemToObject(g, "members", cJSON_Duplicate(members, 1));
		if (i == 0 && resume) {
			if (ctl_stream_checkpoint(c, m[0], g) == 0)
				continue;
			ctl_journal_kv(c, SD_EV_ERROR, "reason", "cannot read the latest checkpoint", "path",
			               c->latest_ckpt);
		}
		ctl_conn_send(m[i], g);
	}
	cJSON_Delete(members);
	ctl_quit_request_final(c);   /* quit waits for this generation's rank 0 */
}

static void on_gen_timer(uv_timer_t *t)
{
	form_generation(t->data);
}

void ctl_schedule_generation(struct sd_controller *c, const char *reason)
{
	snprintf(c->gen_reason, sizeof c->gen_reason, "%s", reason);
	if (!uv_is_active((uv_handle_t *)&c->gen_timer))
		uv_timer_start(&c->gen_timer, on_gen_timer, GENERATION_DEBOUNCE_MS, 0);
}

/* Drops a worker we could not hear from (or that never finished a failed
 * collective, stuck_ms > 0: how long the others have waited for its
 * report): journaled as worker_unresponsive, then its connection closes with
 * an error inviting it back (a stopped process that continues, a host that
 * thaws, connects again as a new member). */
static void drop_unresponsive(struct sd_controller *c, struct conn *k, uint64_t stuck_ms,
                              const char *why)
{
	double silent_s = (uv_now(c->loop) - k->heard_ms) / 1000.0;
	double lost_s = stuck_ms ? stuck_ms / 1000.0 : silent_s;
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "server", k->server_id);
	cJSON_AddNumberToObject(ev, "rank", k->member ? k->rank : -1);
	cJSON_AddNumberToObject(ev, "generation", (double)c->generation);
	cJSON_AddNumberToObject(ev, "step", (double)c->step);
	cJSON_AddNumberToObject(ev, "silent_s", floor(silent_s * 1000) / 1000);
	if (stuck_ms)
		cJSON_AddNumberToObject(ev, "stuck_s", floor(stuck_ms) / 1000);
	cJSON_AddNumberToObject(ev, "timeout_ms", c->timeout_ms);
	cJSON_AddBoolToObject(ev, "member", k->member);
	cJSON_AddStringToObject(ev, "reason", why);
	ctl_journal(c, SD_EV_WORKER_UNRESPONSIVE, ev);
	/* Its loss began when it went quiet (or the group failed), not now. */
	if (k->member && !k->loss_recorded)
		ctl_record_loss(c, k, ctl_mono_s() - lost_s);
	char reason[160];
	snprintf(reason, sizeof reason, "unresponsive: %s (for %.1f s, timeout %.1f s)", why, lost_s,
	         c->timeout_ms / 1000.0);
	cJSON *m = sd_msg_new(SD_MSG_ERROR);
	cJSON_AddStringToObject(m, "reason", reason);
	cJSON_AddBoolToObject(m, "rejoin", 1);
	ctl_conn_send(k, m);
	int member = k->member;
	ctl_conn_close(k, reason);
	if (member && !c->exiting)
		ctl_schedule_generation(c, "worker unresponsive");
}

void ctl_on_live_timer(uv_timer_t *t)
{
	struct sd_controller *c = t->data;
	uint64_t now = uv_now(c->loop);
	uint64_t since = now - c->live_tick_ms;
	c->live_tick_ms = now;
	if (c->exiting)
		return;
	/* The loop itself was held up (a slow disk, the controller stopped):
	 * nobody's bytes were read meanwhile, so silence proves nothing yet.
	 * The next tick comes after the sockets were read. */
	uint64_t stall = (uint64_t)c->timeout_ms / 4 < 1000 ? (uint64_t)c->timeout_ms / 4 : 1000;
	if (since > (uint64_t)c->live_interval_ms + stall)
		return;
	int failing = c->failing_gen == c->generation;
	uint64_t failing_for = failing ? now - c->failing_since_ms : 0;
	struct conn *next;
	for (struct conn *k = c->conns; k && !c->exiting; k = next) {
		next = k->next;
		if (!k->authed || k->closing)
			continue;
		uint64_t silent = now - k->heard_ms;
		/* A member the failed collective waits for is suspect sooner:
		 * silent for half the timeout, it would not be admitted to the
		 * next generation anyway. */
		int owes = failing && k->member && !k->leaving && k->failed_gen != c->generation;
		if (silent > (uint64_t)c->timeout_ms || (owes && silent > (uint64_t)c->timeout_ms / 2))
			drop_unresponsive(c, k, 0, "no heartbeat");
		else if (owes && failing_for > (uint64_t)c->timeout_ms)
			/* Alive, but it never finished the collective the others
			 * gave up on: stuck outside it. */
			drop_unresponsive(c, k, failing_for, "did not finish the collective that failed");
	}
}

static int job_failed_on(const struct sd_controller *c, const char *server)
{
	for (int i = 0; i < c->njob_failed; i++)
		if (!strcmp(c->job_failed[i], server))
			return 1;
	return 0;
}

/* Ends the run when a worker failed to load the job and no worker can: none
 * ever loaded it, and no server or connected worker is left that has not
 * failed to (today's fail-fast for a bad job, kept for when it is the job's
 * fault and not one server's). */
void ctl_end_if_job_unloadable(struct sd_controller *c)
{
	if (!c->njob_failed || c->ever_ready || c->exiting)
		return;
	for (const struct conn *k = c->conns; k; k = k->next)
		if (k->authed && !k->closing && !job_failed_on(c, k->server_id))
			return;   /* still loading it */
	/* Every server, however many bad joiners came and went. */
	int max = 256, n;
	struct sd_server_info *si = NULL;
	for (;;) {
		si = realloc(si, (size_t)max * sizeof *si);
		if (!si)
			sd_oom();
		n = sd_fleet_list(c->fleet, si, max);
		if (n < max)
			break;
		max *= 2;
	}
	int hope = 0;
	for (int i = 0; i < n && !hope; i++)
		hope = !si[i].gone && !job_failed_on(c, si[i].id);
	free(si);
	if (hope)
		return;   /* its worker may still load it */
	if (!c->fatal[0])
		snprintf(c->fatal, sizeof c->fatal, "%s", c->job_error);
	ctl_finish(c, 1);
}

static void journal_step(struct sd_controller *c, const cJSON *m, int current);

void ctl_on_step(struct sd_controller *c, struct conn *k, const cJSON *m)
{
	long gen = (long)sd_msg_int(m, "generation", -1);
	long step = (long)sd_msg_int(m, "step", 0);
	double ips = sd_msg_num(m, "images_per_sec", 0);
	if (ips > 0)
		k->ips = k->ips > 0 ? (1 - SPEED_EMA) * k->ips + SPEED_EMA * ips : ips;
	k->compute_ms = sd_msg_num(m, "compute_ms", 0);
	k->comm_ms = sd_msg_num(m, "comm_ms", 0);
	k->emulated = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m, "emulated"));
	/* The last steps of a generation may reach us after the next one was
	 * formed (a join, loss or leave is handled while they complete): they
	 * are completed steps all the same, journaled with their generation.
	 * Checksums are compared within the current generation only. */
	int current = gen == c->generation;
	const char *sum = current ? sd_msg_str(m, "checksum", NULL) : NULL;
	if (sum) {
		if (step != c->sum_step || !c->sums) {
			cJSON_Delete(c->sums);
			c->sums = cJSON_CreateObject();
			c->sum_step = step;
			c->sums_count = 0;
		}
		cJSON_AddStringToObject(c->sums, k->server_id, sum);
		if (++c->sums_count == c->world_size) {
			cJSON *ev = cJSON_CreateObject();
			cJSON_AddNumberToObject(ev, "step", (double)step);
			cJSON_AddNumberToObject(ev, "generation", (double)gen);
			cJSON_AddItemToObject(ev, "checksums", c->sums);
			c->sums = NULL;
			c->sums_count = 0;
			ctl_journal(c, SD_EV_CHECKSUM, ev);
		}
	}
	/* Rank 0 speaks for its generation (the rank in the message: ours may
	 * have changed with a newer generation).  Another member's report of
	 * a step rank 0 has not reported is kept: if rank 0's collective
	 * failed where this member's completed, a later generation may start
	 * from this member's state (ctl_step_adopted). */
	if (sd_msg_int(m, "rank", -1) != 0 || gen > c->generation) {
		if (sd_msg_int(m, "rank", -1) > 0 && gen <= c->generation && step > c->rank0_step &&
		    (!c->orphan_step || step > (long)sd_msg_int(c->orphan_step, "step", 0))) {
			cJSON_Delete(c->orphan_step);
			c->orphan_step = cJSON_Duplicate(m, 1);
		}
		return;
	}
	double step_ms = sd_msg_num(m, "compute_ms", 0) + sd_msg_num(m, "comm_ms", 0);
	c->step_ms_ema = c->step_ms_ema > 0 ? 0.9 * c->step_ms_ema + 0.1 * step_ms : step_ms;
	if (current || step > c->step)
		c->step = step;
	journal_step(c, m, current);
}

/* A generation's member joined at `step` (its state's): a step that no
 * rank 0 reported, because the old generation's rank 0 failed it, is part
 * of the run now; its event comes from the member that completed it. */
void ctl_step_adopted(struct sd_controller *c, long step)
{
	cJSON *o = c->orphan_step;
	if (!o || (long)sd_msg_int(o, "step", 0) > step)
		return;
	c->orphan_step = NULL;
	if ((long)sd_msg_int(o, "step", 0) == step && step > c->rank0_step)
		journal_step(c, o, 0);
	cJSON_Delete(o);
}

/* The step event of a rank 0's STEP message m (or an adopted member's),
 * when log_every, a recovery or the last step asks for one; m's test
 * figures as an epoch event. */
static void journal_step(struct sd_controller *c, const cJSON *m, int current)
{
	long gen = (long)sd_msg_int(m, "generation", -1);
	long step = (long)sd_msg_int(m, "step", 0);
	if (step > c->rank0_step)
		c->rank0_step = step;
	if (c->orphan_step && (long)sd_msg_int(c->orphan_step, "step", 0) <= c->rank0_step) {
		cJSON_Delete(c->orphan_step);
		c->orphan_step = NULL;
	}
	int world = (int)sd_msg_int(m, "world_size", current ? c->world_size : 0);
	int B = c->job.train.global_batch;
	double loss = sd_msg_num(m, "loss_sum", 0) / B;
	c->last_loss = loss;
	int log = c->job.log_every > 0 && step % c->job.log_every == 0;
	/* Steps the old group still completes after a notice do not count:
	 * recovery is the first step of a group formed after the loss. */
	int recovered = c->lost_at > 0 && gen > c->lost_gen;
	if (log || recovered || step == c->total_steps) {
		cJSON *ev = cJSON_CreateObject();
		cJSON_AddNumberToObject(ev, "step", (double)step);
		cJSON_AddNumberToObject(ev, "generation", (double)gen);
		cJSON_AddNumberToObject(ev, "world_size", world);
		cJSON_AddNumberToObject(ev, "loss", loss);
		/* A language model's samples are windows of block_size tokens
		 * and it predicts tokens, not classes: its speed is in tokens
		 * and it has no accuracy (images_per_sec and train_accuracy
		 * would be windows per second and a constant 0). */
		if (!strcmp(c->job.train.dataset, "tokens")) {
			cJSON_AddNumberToObject(ev, "tokens_per_sec", c->step_ms_ema > 0
			                        ? B * c->job.train.block_size / (c->step_ms_ema / 1000) : 0);
		} else {
			cJSON_AddNumberToObject(ev, "train_accuracy", sd_msg_num(m, "correct", 0) / B);
			cJSON_AddNumberToObject(ev, "images_per_sec",
			                        c->step_ms_ema > 0 ? B / (c->step_ms_ema / 1000) : 0);
		}
		cJSON_AddNumberToObject(ev, "compute_ms", sd_msg_num(m, "compute_ms", 0));
		cJSON_AddNumberToObject(ev, "comm_ms", sd_msg_num(m, "comm_ms", 0));
		cJSON_AddNumberToObject(ev, "lr", sd_msg_num(m, "lr", 0));
		/* Only with clip_grad_norm set: the summed gradients' norm. */
		const cJSON *gn = cJSON_GetObjectItemCaseSensitive(m, "grad_norm");
		if (cJSON_IsNumber(gn))
			cJSON_AddNumberToObject(ev, "grad_norm", gn->valuedouble);
		if (recovered) {
			cJSON_AddNumberToObject(ev, "recovery_s", ctl_mono_s() - c->lost_at);
			/* The step in flight when a worker died, plus any completed
			 * step the survivors did not all have. */
			long behind = c->lost_step - c->recover_start;
			cJSON_AddNumberToObject(ev, "steps_lost", (double)(c->lost_abrupt + (behind > 0 ? behind : 0)));
			/* Whose loss this recovers from: a revocation with notice is
			 * journaled (at the kill) after the recovery (at the leave). */
			cJSON *who = cJSON_AddArrayToObject(ev, "lost_servers");
			for (int i = 0; i < c->nlost_servers; i++)
				cJSON_AddItemToArray(who, cJSON_CreateString(c->lost_servers[i]));
			c->nlost_servers = 0;
			c->lost_at = 0;
		}
		ctl_journal(c, SD_EV_STEP, ev);
	}
	if (cJSON_GetObjectItemCaseSensitive(m, "val_loss")) {
		/* A language model's evaluation: validation loss per token and
		 * its perplexity, no accuracy. */
		double vl = sd_msg_num(m, "val_loss", 0);
		cJSON *ev = cJSON_CreateObject();
		cJSON_AddNumberToObject(ev, "epoch", sd_msg_num(m, "epoch", 0));
		cJSON_AddNumberToObject(ev, "step", (double)step);
		cJSON_AddNumberToObject(ev, "val_loss", vl);
		cJSON_AddNumberToObject(ev, "perplexity", exp(vl));
		c->last_val_loss = vl;
		c->last_epoch = (int)sd_msg_num(m, "epoch", 0) + 1;
		ctl_journal(c, SD_EV_EPOCH, ev);
		if (c->total_steps > 0 && step >= c->total_steps) {
			c->final_loss = vl;
			c->finishing = 1;
			ctl_maybe_finish(c);
		}
	}
	if (cJSON_GetObjectItemCaseSensitive(m, "test_accuracy")) {
		cJSON *ev = cJSON_CreateObject();
		cJSON_AddNumberToObject(ev, "epoch", sd_msg_num(m, "epoch", 0));
		cJSON_AddNumberToObject(ev, "step", (double)step);
		cJSON_AddNumberToObject(ev, "test_loss", sd_msg_num(m, "test_loss", 0));
		cJSON_AddNumberToObject(ev, "test_accuracy", sd_msg_num(m, "test_accuracy", 0));
		c->last_acc = sd_msg_num(m, "test_accuracy", 0);
		c->last_epoch = (int)sd_msg_num(m, "epoch", 0) + 1;
		ctl_journal(c, SD_EV_EPOCH, ev);
		if (c->total_steps > 0 && step >= c->total_steps) {
			c->final_acc = sd_msg_num(m, "test_accuracy", 0);
			c->final_loss = sd_msg_num(m, "test_loss", 0);
			c->finishing = 1;
			ctl_maybe_finish(c);
		}
	}
}
