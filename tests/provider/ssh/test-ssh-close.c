/* tests/provider/ssh/test-ssh-close.c - the ssh provider's close runs on the loop
 * (src/provider/ssh/transport.c): a fleet over the ssh provider whose ssh
 * program is a stand-in script (provider.ssh) that logs every call and
 * acts like a slow host: the signal that stops a worker takes 0.6 s, the
 * removal of the run's files hangs (it is killed after the grace period,
 * SPOTDECK_SSH_CLOSE_WAIT_S=1), the end of the shared connection returns
 * at once.
 *
 * What must hold: sd_fleet_close returns at once without its done
 * callback; a 50 ms timer keeps firing while the close takes over a second
 * (no gap of 800 ms or more, where a blocking close would stall the loop
 * for its 1 s grace period at least); the steps run in order, each after the one
 * before has ended (the signal delivered, then the files, then the
 * connection); done is called once, when every ssh the provider started
 * has exited (none of their pids is alive in the callback), after the
 * grace period and well before the hanging ssh would have ended by itself.
 * A transport that never ran ssh calls done from inside its close. */
#include "config.h"

#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "src/provider/fleet.h"
#include "src/provider/provider.h"
#include "src/provider/ssh/transport.h"
#include "tests/check.h"
#include "tests/tmpdir.h"

static char dir[4096];

static void write_str(const char *path, const char *text)
{
	write_raw(path, text, strlen(text));
}

/* The stand-in for ssh(1).  The worker's launch is a long sleep (the
 * fleet kills it when it closes); the close's removal of the run's
 * directory is an exec'd sleep, so that its SIGKILL leaves nothing. */
static const char fake_ssh[] =
	"#!/bin/sh\n"
	"log=\"$(dirname \"$0\")/ssh.log\"\n"
	"case \"$*\" in\n"
	"*'-O exit'*) kind=exit ;;\n"
	"*'rm -rf'*) kind=clean ;;\n"
	"*setsid*) kind=launch ;;\n"
	"*kill*) kind=signal ;;\n"
	"*) kind=other ;;\n"
	"esac\n"
	"echo \"start $kind $$ $(date +%s.%N)\" >>\"$log\"\n"
	"case $kind in\n"
	"launch) exec sleep 60 ;;\n"
	"clean) exec sleep 30 ;;\n"
	"signal) sleep 0.6 ;;\n"
	"esac\n"
	"echo \"end $kind $$\" >>\"$log\"\n";

struct state {
	uv_loop_t *loop;
	uv_timer_t tick;
	int ticks;
	uint64_t last_tick_ms, max_gap_ms;
	int done_calls;
	uint64_t done_ms;
	int alive_at_done;             /* pids of the log still alive in the callback */
	int logged_at_done;
	char log[8192];                /* the ssh log as the callback saw it */
};

static void on_tick(uv_timer_t *t)
{
	struct state *st = t->data;
	uint64_t now = uv_now(st->loop);
	if (st->ticks && now - st->last_tick_ms > st->max_gap_ms)
		st->max_gap_ms = now - st->last_tick_ms;
	st->last_tick_ms = now;
	st->ticks++;
}

static void read_log(char *buf, size_t cap)
{
	char *path = path_join(dir, "ssh.log");
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
	buf[n] = '\0';
	if (f)
		fclose(f);
	free(path);
}

static void on_closed(void *arg)
{
	struct state *st = arg;
	st->done_calls++;
	uv_update_time(st->loop);
	st->done_ms = uv_now(st->loop);
	read_log(st->log, sizeof st->log);
	/* Every ssh started so far has exited and been reaped: no pid of the
	 * log may still name a process. */
	char copy[sizeof st->log];
	snprintf(copy, sizeof copy, "%s", st->log);
	for (char *save = NULL, *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char what[16], kind[16];
		int pid;
		if (sscanf(line, "%15s %15s %d", what, kind, &pid) != 3 || strcmp(what, "start"))
			continue;
		st->logged_at_done++;
		if (kill(pid, 0) == 0 || errno != ESRCH) {
			fprintf(stderr, "alive at done: %s\n", line);
			st->alive_at_done++;
		}
	}
}

static int started_pid;             /* the last worker process the fleet started */

static void on_journal(void *ctx, const struct sd_fleet_event *ev, cJSON *fields)
{
	(void)ctx;
	const cJSON *pid = cJSON_GetObjectItemCaseSensitive(fields, "pid");
	if (ev->type == SD_EV_STARTED && cJSON_IsNumber(pid))
		started_pid = pid->valueint;
	cJSON_Delete(fields);
}

/* A local fleet's close: done once the worker it killed has exited. */
static void on_local_closed(void *arg)
{
	int *alive = arg;
	*alive = kill(started_pid, 0) == 0 || errno != ESRCH;
}

static void on_notice(void *ctx, const char *server, double seconds) { (void)ctx, (void)server, (void)seconds; }
static void on_idle(void *ctx) { (void)ctx; }
static void on_command(void *ctx, const char *line) { (void)ctx, (void)line; }

static void close_walk(uv_handle_t *h, void *arg)
{
	(void)arg;
	if (!uv_is_closing(h))
		uv_close(h, NULL);
}

/* Runs the loop until the log holds NEEDLE (10 s at most). */
static int run_until_logged(uv_loop_t *loop, const char *needle)
{
	char buf[8192];
	for (int i = 0; i < 200; i++) {
		read_log(buf, sizeof buf);
		if (strstr(buf, needle))
			return 1;
		uv_run(loop, UV_RUN_NOWAIT);
		usleep(50 * 1000);
	}
	return 0;
}

/* The time (date +%s.%N) on the log line that starts with LINE_START, or
 * NAN. */
static double time_of(const char *log, const char *line_start)
{
	const char *l = strstr(log, line_start);
	char kind[16];
	int pid;
	double t;
	if (!l || sscanf(l + strlen("start "), "%15s %d %lf", kind, &pid, &t) != 3)
		return NAN;
	return t;
}

/* The index of the log line that starts with LINE_START, or -1. */
static int line_of(const char *log, const char *line_start)
{
	int i = 0;
	for (const char *l = log; *l; i++) {
		if (!strncmp(l, line_start, strlen(line_start)))
			return i;
		const char *nl = strchr(l, '\n');
		if (!nl)
			break;
		l = nl + 1;
	}
	return -1;
}

/* A transport that never ran ssh has nothing to wait for. */
static void close_unused(uv_loop_t *loop, struct sd_fleet *fleet, const cJSON *settings)
{
	struct sd_provider_env env = { .loop = loop, .fleet = fleet, .settings = settings, .settings_file = "job" };
	struct sd_ssh_transport *t;
	char *why = NULL;
	CHECK(sd_ssh_transport_create(&t, &env, "test", NULL, &why) == 0, "transport: %s", why ? why : "");
	struct state st = { .loop = loop };
	sd_ssh_transport_close(t, on_closed, &st);
	CHECK(st.done_calls == 1, "a transport that ran no ssh called done %d times inside close (want 1)",
	      st.done_calls);
	uv_run(loop, UV_RUN_NOWAIT);
	sd_ssh_transport_free(t);
}

/* A fleet of a local worker (a sleep) and no provider: the close kills
 * the worker and is done only once it has exited, never from inside
 * sd_fleet_close with the killed process not yet reaped. */
static void close_local(void)
{
	char *worker = path_join(dir, "worker");
	write_str(worker, "#!/bin/sh\nexec sleep 60\n");
	chmod(worker, 0755);
	uv_loop_t loop;
	uv_loop_init(&loop);
	struct sd_fleet_config cfg = { .worker_path = worker, .connect = "127.0.0.1:1", .run_dir = dir };
	struct sd_fleet_hooks hooks = { .journal = on_journal, .notice = on_notice, .idle = on_idle,
	                                .command = on_command };
	struct sd_fleet *f;
	char *why = NULL, id[16];
	if (sd_fleet_create(&f, &loop, &cfg, &hooks, NULL, &why) < 0) {
		CHECK(0, "local fleet: %s", why);
		return;
	}
	started_pid = 0;
	CHECK(sd_fleet_acquire(f, "local", id, sizeof id, &why) == 0, "acquire local: %s", why ? why : "");
	for (int i = 0; i < 100 && !started_pid; i++)
		uv_run(&loop, UV_RUN_NOWAIT);
	CHECK(started_pid > 0, "the local worker did not start");
	int alive = -1;
	sd_fleet_close(f, on_local_closed, &alive);
	CHECK(alive == -1, "a local fleet's close was done inside sd_fleet_close, its killed worker not yet reaped");
	for (int i = 0; i < 100 && alive == -1; i++)
		uv_run(&loop, UV_RUN_ONCE);
	CHECK(alive == 0, "a local fleet's close was done with its worker (pid %d) %s", started_pid,
	      alive < 0 ? "never reported" : "still there");
	uv_walk(&loop, close_walk, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	sd_fleet_free(f);
	CHECK_INT(uv_loop_close(&loop), 0);
	free(worker);
}

int main(void)
{
	make_tmpdir(dir, sizeof dir, "sd-ssh-close-XXXXXX");
	setenv("SPOTDECK_SSH_CLOSE_WAIT_S", "1", 1);
	char *ssh = path_join(dir, "ssh"), *hosts = path_join(dir, "hosts"), *token = path_join(dir, "token");
	char *logs = path_join(dir, "logs");
	write_raw(ssh, fake_ssh, strlen(fake_ssh));
	chmod(ssh, 0755);
	/* 192.0.2.1 (TEST-NET-1) is never dialled: the stand-in answers. */
	write_str(hosts, "root@192.0.2.1 name=h1 gpu=cpu market=spot\n");
	write_str(token, "0123456789abcdef0123456789abcdef\n");
	chmod(token, 0600);
	mkdir(logs, 0755);

	cJSON *settings = cJSON_CreateObject();
	cJSON_AddStringToObject(settings, "hosts", hosts);
	cJSON_AddStringToObject(settings, "ssh", ssh);
	uv_loop_t loop;
	uv_loop_init(&loop);
	struct sd_fleet_config cfg = {
		.provider = &sd_provider_ssh,
		.env = { .settings = settings, .settings_file = "job", .hazard_scale = 1, .boot_scale = 1,
		         .notice_scale = 1 },
		.worker_path = "/bin/false", .connect = "127.0.0.1:1", .run_dir = dir,
		.grace_seconds = 0.1,
	};
	struct sd_fleet_hooks hooks = { .journal = on_journal, .notice = on_notice, .idle = on_idle,
	                                .command = on_command };
	struct sd_fleet *f;
	char *why = NULL;
	if (sd_fleet_create(&f, &loop, &cfg, &hooks, NULL, &why) < 0) {
		fprintf(stderr, "FAIL: fleet: %s\n", why);
		return 1;
	}
	close_unused(&loop, f, settings);

	/* A worker on h1 (the stand-in sleeps as it), then its release: after
	 * the fleet's grace period the provider signals it over ssh, and the
	 * fleet closes while that signal is on its way. */
	char id[16];
	CHECK(sd_fleet_acquire(f, "ssh/h1", id, sizeof id, &why) == 0, "acquire ssh/h1: %s", why ? why : "");
	CHECK(run_until_logged(&loop, "start launch"), "the worker's launch never ran the ssh stand-in");
	CHECK(sd_fleet_release(f, id, "test", &why) == 0, "release %s: %s", id, why ? why : "");
	CHECK(run_until_logged(&loop, "start signal"), "the release never signalled the worker over ssh");

	struct state st = { .loop = &loop };
	uv_timer_init(&loop, &st.tick);
	st.tick.data = &st;
	uv_timer_start(&st.tick, on_tick, 50, 50);
	uv_update_time(&loop);
	uint64_t t0 = uv_now(&loop);
	st.last_tick_ms = t0;
	sd_fleet_close(f, on_closed, &st);
	CHECK(st.done_calls == 0, "done was called inside the close, with a signal's ssh still on its way");
	uv_update_time(&loop);
	CHECK(uv_now(&loop) - t0 < 800, "sd_fleet_close blocked the loop for %llu ms",
	      (unsigned long long)(uv_now(&loop) - t0));
	while (st.done_calls == 0 && uv_now(&loop) - t0 < 20000)
		uv_run(&loop, UV_RUN_ONCE);
	double took = (double)(st.done_ms - t0) / 1000;
	CHECK(st.done_calls == 1, "done called %d times in 20 s (want 1)", st.done_calls);
	/* The signal (0.6 s) and the grace period of the hanging removal (1 s)
	 * at least; the removal alone would hang for 30 s. */
	CHECK(took >= 1.5 && took < 8, "the close took %.2f s (want 1.5 to 8: the signal, then 1 s of grace)", took);
	/* A blocking close would stall the loop for the whole grace period
	 * (1 s) at least; the margins are for a loaded machine. */
	CHECK(st.max_gap_ms < 800 && st.ticks >= (int)(took * 1000 / 50 / 4),
	      "the loop stalled during the close: %d ticks of 50 ms in %.2f s, the longest gap %llu ms", st.ticks, took,
	      (unsigned long long)st.max_gap_ms);
	CHECK(st.alive_at_done == 0 && st.logged_at_done >= 4, "%d of the %d ssh started were alive at done",
	      st.alive_at_done, st.logged_at_done);
	/* The steps in order, each after the one before ended. */
	int sig_end = line_of(st.log, "end signal"), clean = line_of(st.log, "start clean");
	int ex = line_of(st.log, "start exit"), ex_end = line_of(st.log, "end exit");
	CHECK(sig_end >= 0 && clean > sig_end && ex > clean && ex_end > ex && line_of(st.log, "end clean") < 0,
	      "the close's ssh ran out of order (signal ended at line %d, clean started %d, exit %d..%d):\n%s", sig_end,
	      clean, ex, ex_end, st.log);
	/* The connection ends only once the hanging removal was killed, after
	 * the grace period of 1 s. */
	double hung = time_of(st.log, "start exit") - time_of(st.log, "start clean");
	CHECK(hung >= 0.9, "ssh -O exit started %.2f s after the removal of the run's files (want the 1 s grace "
	      "period or more):\n%s", hung, st.log);
	fprintf(stderr, "ok: close took %.2f s, %d timer ticks (longest gap %llu ms), %d ssh all gone at done\n", took,
	        st.ticks, (unsigned long long)st.max_gap_ms, st.logged_at_done);

	uv_close((uv_handle_t *)&st.tick, NULL);
	uv_walk(&loop, close_walk, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	CHECK(st.done_calls == 1, "done called %d times in all (want 1)", st.done_calls);
	sd_fleet_free(f);
	CHECK_INT(uv_loop_close(&loop), 0);
	cJSON_Delete(settings);
	free(ssh);
	free(hosts);
	free(token);
	free(logs);
	close_local();
	rm_tree(dir);
	return check_exit("test-ssh-close");
}
