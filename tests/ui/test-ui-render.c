/* tests/ui/test-ui-render.c - runs the cockpit on the fixture run
 * (tests/ui-fixture.c) for the tmux-driven tests (tests/ui/test-ui-render.sh):
 * the real sd_cockpit_create() on a real loop and terminal, with a command
 * callback that records every command line in a file and acts it out on
 * the fixture, so that the script can assert what a keypress sent and see
 * the screen follow.  Test-only: spotdeck never links this.
 *
 * usage: test-ui-render [--commands FILE] [--log FILE] [--servers N]
 *                       [--theme NAME] [--theme-dir DIR] [--bell N]
 *                       [--tick MS] [--revoke-after MS] [--crash-after MS]
 *                       [--fail COMMAND] [--pid FILE]
 *        test-ui-render --first-offer     (prints the first offer's id)
 *
 * SIGUSR1 revokes s3 (as --revoke-after does on a timer) and SIGUSR2 crashes
 * (abort(), as --crash-after): a script sends them when the screen is where
 * it wants the event, instead of racing a timer against its own checks.
 *
 * Exits 0 after "quit" or SIGTERM, 1 when the cockpit cannot start (the
 * reason on stderr).  Every command also writes a line to stderr, which the
 * cockpit must send to the log file, never to the screen. */
#include "config.h"

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "tests/ui-fixture.h"
#include "ui/cockpit.h"

struct driver {
	uv_loop_t *loop;
	struct ui_fixture fx;
	struct sd_cockpit *cockpit;
	uv_timer_t tick, revoke, crash;
	uv_signal_t sigterm, sigrevoke, sigcrash;
	const char *commands;
	const char *fail;
	int tick_ms;
	int ncommands;
	int quit;
};

static const struct sd_view *drv_view(void *ctx)
{
	struct driver *d = ctx;
	return &d->fx.view;
}

static void record(struct driver *d, const char *line)
{
	if (!d->commands)
		return;
	FILE *f = fopen(d->commands, "a");
	if (f) {
		fprintf(f, "%s\n", line);
		fclose(f);
	}
}

static void on_closed(uv_handle_t *h)
{
}

static void shutdown_driver(struct driver *d)
{
	if (d->quit)
		return;
	d->quit = 1;
	sd_cockpit_destroy(d->cockpit);
	uv_close((uv_handle_t *)&d->tick, on_closed);
	uv_close((uv_handle_t *)&d->revoke, on_closed);
	uv_close((uv_handle_t *)&d->crash, on_closed);
	uv_close((uv_handle_t *)&d->sigterm, on_closed);
	uv_close((uv_handle_t *)&d->sigrevoke, on_closed);
	uv_close((uv_handle_t *)&d->sigcrash, on_closed);
}

static int drv_command(void *ctx, const char *line, char **why)
{
	struct driver *d = ctx;
	struct sd_view *v = &d->fx.view;
	char a[128], b[128];
	d->ncommands++;
	record(d, line);
	/* Behind curses' back, on purpose: the cockpit must keep it off the screen. */
	fprintf(stderr, "test-ui-render: stray stderr line for '%s'\n", line);
	if (d->fail && strcmp(d->fail, line) == 0) {
		if (asprintf(why, "%s refused by the test driver", line) < 0)
			*why = NULL;
		return -1;
	}
	if (sscanf(line, "add %127s", a) == 1) {
		const char *id = ui_fixture_add(&d->fx, a);
		if (!id) {
			if (asprintf(why, "unknown offer '%s'", a) < 0)
				*why = NULL;
			return -1;
		}
		snprintf(v->message, sizeof v->message, "acquiring %s on %s", id, a);
		v->suggestion[0] = v->suggestion_for[0] = '\0';
	} else if (sscanf(line, "swap %127s %127s", a, b) == 2) {
		const char *id = ui_fixture_add(&d->fx, b);
		if (!id || ui_fixture_set_state(&d->fx, a, "released") != 0) {
			if (asprintf(why, "cannot swap '%s' for '%s'", a, b) < 0)
				*why = NULL;
			return -1;
		}
		snprintf(v->message, sizeof v->message, "swapping %.31s for %.31s (%.63s)", a, id, b);
	} else if (sscanf(line, "drop %127s", a) == 1) {
		if (ui_fixture_set_state(&d->fx, a, "released") != 0) {
			if (asprintf(why, "no server '%s'", a) < 0)
				*why = NULL;
			return -1;
		}
		snprintf(v->message, sizeof v->message, "%s released", a);
	} else if (strcmp(line, "pause") == 0 || strcmp(line, "resume") == 0) {
		v->paused = line[0] == 'p';
		snprintf(v->message, sizeof v->message, "%s", v->paused ? "paused" : "resumed");
	} else if (strcmp(line, "checkpoint") == 0) {
		snprintf(v->message, sizeof v->message, "checkpoint saved at step %ld", v->step);
	} else if (strcmp(line, "quit") == 0) {
		shutdown_driver(d);
		return 0;
	} else {
		if (asprintf(why, "unknown command '%s'", line) < 0)
			*why = NULL;
		return -1;
	}
	v->version++;
	return 0;
}

static void on_tick(uv_timer_t *t)
{
	struct driver *d = t->data;
	ui_fixture_tick(&d->fx, d->tick_ms / 1000.0);
}

static void on_revoke(uv_timer_t *t)
{
	struct driver *d = t->data;
	if (ui_fixture_revoke(&d->fx, "s3") == 0)
		sd_cockpit_notify_revocation(d->cockpit, "s3");
}

static void on_crash(uv_timer_t *t)
{
	abort();
}

static void on_sigrevoke(uv_signal_t *s, int signum)
{
	on_revoke(&((struct driver *)s->data)->revoke);
}

static void on_sigcrash(uv_signal_t *s, int signum)
{
	abort();
}

static void on_sigterm(uv_signal_t *s, int signum)
{
	shutdown_driver(s->data);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "commands", required_argument, NULL, 'C' },
		{ "log", required_argument, NULL, 'L' },
		{ "servers", required_argument, NULL, 'n' },
		{ "theme", required_argument, NULL, 't' },
		{ "theme-dir", required_argument, NULL, 'T' },
		{ "bell", required_argument, NULL, 'b' },
		{ "tick", required_argument, NULL, 'k' },
		{ "revoke-after", required_argument, NULL, 'r' },
		{ "crash-after", required_argument, NULL, 'x' },
		{ "fail", required_argument, NULL, 'f' },
		{ "first-offer", no_argument, NULL, 'F' },
		{ "pid", required_argument, NULL, 'P' },
		{ NULL, 0, NULL, 0 },
	};
	static struct driver d;
	struct sd_cockpit_opts o = { 0 };
	int nservers = 4, revoke_ms = 0, crash_ms = 0, ndirs = 0, ch;
	d.tick_ms = 500;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 'C': d.commands = optarg; break;
		case 'L': o.log_path = optarg; break;
		case 'n': nservers = atoi(optarg); break;
		case 't': o.theme = optarg; break;
		case 'T': if (ndirs < 4) o.theme_dirs[ndirs++] = optarg; break;
		case 'b': o.bell = atoi(optarg); break;
		case 'k': d.tick_ms = atoi(optarg); break;
		case 'r': revoke_ms = atoi(optarg); break;
		case 'x': crash_ms = atoi(optarg); break;
		case 'f': d.fail = optarg; break;
		case 'P': {
			FILE *pf = fopen(optarg, "w");
			if (pf) {
				fprintf(pf, "%ld\n", (long)getpid());
				fclose(pf);
			}
			break;
		}
		case 'F':
			ui_fixture_init(&d.fx, nservers);
			printf("%s\n", d.fx.view.offers[0].id);
			return 0;
		default:
			fprintf(stderr, "usage: see tests/ui/test-ui-render.c\n");
			return 2;
		}
	}
	ui_fixture_init(&d.fx, nservers);
	d.loop = uv_default_loop();

	/* A crash (abort(): --crash-after, SIGUSR2) leaves a usable terminal
	 * through the cockpit's own fatal-signal handler. */
	static const struct sd_cockpit_ops ops = { drv_view, drv_command };
	char *why = NULL;
	if (sd_cockpit_create(&d.cockpit, d.loop, &ops, &d, &o, &why) != 0) {
		fprintf(stderr, "test-ui-render: %s\n", why ? why : "cannot start the cockpit");
		free(why);
		uv_loop_close(d.loop);
		return 1;
	}
	uv_timer_init(d.loop, &d.tick);
	uv_timer_init(d.loop, &d.revoke);
	uv_timer_init(d.loop, &d.crash);
	uv_signal_init(d.loop, &d.sigterm);
	uv_signal_init(d.loop, &d.sigrevoke);
	uv_signal_init(d.loop, &d.sigcrash);
	d.tick.data = d.revoke.data = d.crash.data = d.sigterm.data = &d;
	d.sigrevoke.data = d.sigcrash.data = &d;
	if (d.tick_ms > 0)
		uv_timer_start(&d.tick, on_tick, (uint64_t)d.tick_ms, (uint64_t)d.tick_ms);
	if (revoke_ms > 0)
		uv_timer_start(&d.revoke, on_revoke, (uint64_t)revoke_ms, 0);
	if (crash_ms > 0)
		uv_timer_start(&d.crash, on_crash, (uint64_t)crash_ms, 0);
	uv_signal_start(&d.sigterm, on_sigterm, SIGTERM);
	uv_signal_start(&d.sigrevoke, on_sigrevoke, SIGUSR1);
	uv_signal_start(&d.sigcrash, on_sigcrash, SIGUSR2);

	uv_run(d.loop, UV_RUN_DEFAULT);
	int rc = uv_loop_close(d.loop);
	/* On the restored screen, for the script to find. */
	printf("test-ui-render: done, %d commands, loop closed %s\n", d.ncommands, rc == 0 ? "clean" : "BUSY");
	return rc == 0 ? 0 : 1;
}
