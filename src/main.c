/* src/main.c - spotdeck: the controller with the cockpit, or headless
 * (journal on stdout, commands on stdin); `spotdeck plan` goes to plan-cli. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <ftw.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "engine/errors.h"
#include "engine/onnx.h"
#include "engine/train.h"
#include "src/controller/controller.h"
#include "src/proto/job.h"
#include "src/app/plan-cli.h"
#include "src/app/attach.h"
#include "src/app/doctor.h"
#include "src/app/export-cli.h"
#include "src/app/control.h"
#include "src/proto/protocol.h"
#include "src/provider/cloud-vm.h"
#include "src/provider/provider.h"
#include "src/market/trace.h"
#include "src/app/view-model.h"
#include "src/app/whatif.h"
#include "ui/cockpit.h"
#include "ui/theme.h"

struct app {
	uv_loop_t *loop;
	struct sd_controller *ctl;
	uv_signal_t sigint, sigterm, sighup;
	uv_pipe_t in_pipe;
	uv_tty_t in_tty;
	uv_stream_t *in;
	struct sd_line_reader in_rd;
	int status;
	int start_failed;        /* the start failed in a run directory it created */
	int done;
	struct sd_view_model *vm;
	struct sd_cockpit *cockpit;
	int user_quit;          /* the operator quit the cockpit: a normal exit */
	int cockpit_used;
	struct sd_control *control;   /* the background run's control socket */
	char ended[160];        /* how the run ended, for attached clients */
	uv_timer_t flush_timer; /* wakes the loop while they read the end */
};

/* The embedded default the cockpit opens with: cnn on Fashion-MNIST on four
 * transient K80 servers in the four zones the seeds measured (ICAC'19's
 * 4-spot cluster), in the GCE 2019 market with demo knobs: revocations 30x
 * sooner than measured (so one shows within about two minutes: 10-47 % of
 * these K80s went in their first hour), boots 10x faster, notices 5x shorter. */
static void demo_job(struct sd_job *j)
{
	sd_job_defaults(j);
	j->train.global_batch = 256;
	j->train.lr = 0.1f;
	j->train.warmup_steps = 50;
	j->workers = 0;
	j->checkpoint_every = 100;
	j->log_every = 5;
	j->hazard_scale = 30;
	j->boot_scale = 0.1;
	j->notice_scale = 0.2;
	/* Seed 5: with these knobs the market revokes a first K80 after 28 s
	 * and two more within two minutes (tests/test-ui-cockpit.sh relies on it). */
	j->market_seed = 5;
	static const char *const cluster[] = { "gce/us-east1-c/k80/spot", "gce/us-central1-c/k80/spot",
	                                       "gce/us-west1-b/k80/spot", "gce/europe-west1-b/k80/spot" };
	j->ncluster = 4;
	for (int i = 0; i < 4; i++)
		snprintf(j->cluster[i], sizeof j->cluster[i], "%s", cluster[i]);
}

static void on_event_cb(const cJSON *ev, void *ctx)
{
	struct app *a = ctx;
	if (!a->vm)
		return;
	sd_view_model_on_event(a->vm, ev);
	sd_control_event(a->control, ev);
	const cJSON *type = cJSON_GetObjectItemCaseSensitive(ev, "type");
	if (a->cockpit && cJSON_IsString(type) && !strcmp(type->valuestring, "revoked")) {
		const cJSON *srv = cJSON_GetObjectItemCaseSensitive(ev, "server");
		sd_cockpit_notify_revocation(a->cockpit, cJSON_IsString(srv) ? srv->valuestring : "");
	}
}

static const struct sd_view *cockpit_view(void *ctx)
{
	struct app *a = ctx;
	return sd_view_model_refresh(a->vm);
}

static int cockpit_command(void *ctx, const char *line, char **why)
{
	struct app *a = ctx;
	if (!strcmp(line, "detach"))   /* key x; an attached client hangs up itself */
		return sd_why(why, "nothing to detach from: this run lives in this process (--foreground); "
		               "q ends it");
	if (!strncmp(line, "quit", 4))
		a->user_quit = 1;
	if (!strcmp(line, "plan"))   /* the what-if view (key w) */
		return sd_whatif_request(a->loop, a->ctl, a->vm, why);
	return sd_controller_command(a->ctl, line, why);
}

static const struct sd_cockpit_ops cockpit_ops = {
	.view = cockpit_view,
	.command = cockpit_command,
};

/* The background run's commands from attached clients: the cockpit's, but
 * "detach" is the client's own business. */
static int control_command(void *ctx, const char *line, char **why)
{
	if (!strcmp(line, "detach"))
		return sd_why(why, "detach: a client leaves with the detach message, not a command");
	return cockpit_command(ctx, line, why);
}

static void control_clients_changed(void *ctx, int clients)
{
	struct app *a = ctx;
	sd_view_model_set_clients(a->vm, clients);
}

static void usage(FILE *f)
{
	fprintf(f,
"usage: spotdeck [--job FILE] [--theme NAME] [options]   (a background run + its cockpit)\n"
"       spotdeck --foreground [--job FILE] [options]   (the run inside the cockpit's process)\n"
"       spotdeck --headless [--job FILE] [--workers N] [--run-dir DIR]\n"
"       spotdeck [--headless] --resume RUNDIR\n"
"       spotdeck attach [--read-only] [--headless] [RUNDIR]   (x detaches)\n"
"       spotdeck ls [DIR]          live runs;   spotdeck kill RUNDIR   end one\n"
"       spotdeck plan [--gpus ...] [--sizes ...] [--deadline 2h] ...   (what-if planner)\n"
"       spotdeck doctor [--provider gce|aws] JOB   (could JOB's cloud start a run?)\n"
"       spotdeck export RUNDIR [--step N] [--onnx OUT] [--safetensors OUT]   (the model out)\n"
"Trains a model with elastic data-parallel SGD on transient servers of the\n"
"simulated spot market (or local workers).  The run goes to the background\n"
"(RUNDIR/control.sock; it outlives the terminal) with a full-screen cockpit\n"
"attached: x detaches, spotdeck attach comes back, q ends the run.  Or with\n"
"--headless printing every journal event as a JSON line on stdout and reading\n"
"commands on stdin (add [N|OFFER], swap SERVER OFFER, drop SERVER, checkpoint,\n"
"pause, resume, orphans adopt|delete|keep, quit, help).  Without --job the\n"
"cockpit opens the embedded demo: cnn on Fashion-MNIST on 4 transient K80s\n"
"of the GCE 2019 market.\n"
"See spotdeck(1) and spotdeck-job(5).\n"
"  --headless       no cockpit: journal on stdout, commands on stdin\n"
"  --foreground     keep the run in this process: it ends with the terminal\n"
"  --detach         start the run in the background and attach nothing\n"
"  --attach RUNDIR  with --headless: a background run's journal on stdout,\n"
"                   commands from stdin (spotdeck attach --headless RUNDIR)\n"
"  --theme NAME     cockpit colour theme (default, high-contrast, light, mono)\n"
"  --alert HOW      on a revocation: bell (default), flash or none\n"
"  --job FILE       job file (JSON, spotdeck-job(5)); default: the embedded job\n"
"  --workers N      initial local workers (overrides the job file)\n"
"  --run-dir DIR    where the journal, checkpoints and logs go (default: run-TIME)\n"
"  --resume RUNDIR  continue the run in RUNDIR from its latest checkpoint\n"
"  --worker PATH    spotdeck-worker to start (default: next to this program)\n"
"  --provider NAME  server provider (the job's provider.name): sim, the simulated\n"
"                   market (default); ssh, your hosts; gce, Spot VMs on Compute\n"
"                   Engine; aws, Spot instances on EC2 (spotdeck-job(5))\n"
"  --catalog FILE   market catalog (default: gce-2019.json from the data dir)\n"
"  --hazard-scale X revocations X times sooner than measured\n"
"  --boot-scale X   boot times X times the measured ones\n"
"  --notice-scale X notice periods X times the catalog's\n"
"  --seed N         market seed (same seed + commands = same market)\n"
"  --no-emulate     run market servers' workers at full speed (real GPUs)\n"
"  --trace FILE     replay a market trace or a journal (spotdeck-catalog(5));\n"
"                   the market's own revocations are then off\n"
"  --demo           with --headless: the cockpit's embedded demo job\n"
"  --listen ADDR:PORT  where workers connect (default 127.0.0.1, any port);\n"
"                   ssh/gce/aws workers come through the provider's ssh\n"
"  --advertise HOST:PORT  workers on other hosts dial this themselves, in the\n"
"                   clear (large fleets; default: through ssh)\n"
"  --orphans WHAT   gce/aws: the VMs an earlier controller of the run left:\n"
"                   adopt, delete, keep, or ask in the cockpit (the default\n"
"                   with a cockpit; delete without one)\n"
"  --help, --version\n");
}

static void on_closed_walk(uv_handle_t *h, void *arg)
{
	if (!uv_is_closing(h))
		uv_close(h, NULL);
}

static void on_exit_cb(struct sd_controller *c, int status, void *ctx)
{
	struct app *a = ctx;
	if (a->done)
		return;
	a->done = 1;
	a->status = status;
	uv_stop(a->loop);
}

static void on_signal(uv_signal_t *s, int signum)
{
	struct app *a = s->data;
	sd_controller_signal(a->ctl, signum);
}

/* The longest command line stdin takes, newline included: what
 * sd_controller_command reads (it copies a line into 512 bytes).  A longer
 * line is refused whole rather than cut, since a cut line may still parse as
 * a different command. */
#define STDIN_LINE_MAX 512

static void on_in_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	static char mem[4096];
	buf->base = mem;
	buf->len = sizeof mem;
}

static void on_in_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct app *a = s->data;
	if (n < 0) {
		uv_read_stop(s);
		return;
	}
	sd_line_reader_feed(&a->in_rd, buf->base, (size_t)n);
	const char *line;
	size_t len;
	char *why = NULL;
	int got;
	while ((got = sd_line_reader_next(&a->in_rd, &line, &len, &why)) != 0) {
		if (got < 0) {
			/* Refuse the over-long line whole: one error, and everything
			 * up to its newline is dropped, so no part of it - its tail
			 * least of all - runs as a command. */
			fprintf(stderr, "spotdeck: stdin: %s: refused, none of it run\n", why);
			free(why);
			why = NULL;
			sd_line_reader_skip(&a->in_rd);
			continue;
		}
		/* Errors are journaled by the command table itself. */
		sd_controller_command(a->ctl, line, &why);
		free(why);
		why = NULL;
	}
	free(why);
}

/* Commands come from stdin when it is a pipe or a terminal; a file or
 * /dev/null gives none. */
static void open_stdin(struct app *a)
{
	sd_line_reader_init(&a->in_rd, STDIN_LINE_MAX);
	uv_handle_type t = uv_guess_handle(0);
	if (t == UV_NAMED_PIPE && uv_pipe_init(a->loop, &a->in_pipe, 0) == 0) {
		if (uv_pipe_open(&a->in_pipe, 0) == 0)
			a->in = (uv_stream_t *)&a->in_pipe;
		else
			uv_close((uv_handle_t *)&a->in_pipe, NULL);
	} else if (t == UV_TTY && uv_tty_init(a->loop, &a->in_tty, 0, 1) == 0) {
		a->in = (uv_stream_t *)&a->in_tty;
	}
	if (a->in) {
		a->in->data = a;
		uv_read_start(a->in, on_in_alloc, on_in_read);
	}
}

/* spotdeck-worker lives next to spotdeck (build tree and install). */
static void default_worker_path(char *out, size_t len)
{
	char self[PATH_MAX];
	size_t n = sizeof self;
	if (uv_exepath(self, &n) == 0) {
		char *slash = strrchr(self, '/');
		if (slash) {
			*slash = 0;
			snprintf(out, len, "%s/spotdeck-worker", self);
			if (access(out, X_OK) == 0)
				return;
		}
	}
	snprintf(out, len, "spotdeck-worker");
}

/* The GCE 2019 catalog: from the build tree when run from it, else installed. */
static void default_catalog(char *out, size_t len)
{
	char self[PATH_MAX];
	size_t n = sizeof self;
	if (uv_exepath(self, &n) == 0) {
		char *slash = strrchr(self, '/');
		if (slash) {
			*slash = 0;
			snprintf(out, len, "%s/data/gce-2019.json", self);
			if (access(out, R_OK) == 0)
				return;
		}
	}
	/* A build tree outside the source tree (VPATH): the sources' data. */
	snprintf(out, len, "%s/data/gce-2019.json", SD_SRCDIR);
	if (access(out, R_OK) == 0)
		return;
	snprintf(out, len, "%s/gce-2019.json", SD_DATADIR);
	if (access(out, R_OK) != 0)
		out[0] = 0;
}

static int discard_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st; (void)flag; (void)ftw;
	remove(path);
	return 0;
}

/* Removes a run directory this process created moments ago (job.json, token,
 * journal, empty checkpoints/ and logs/, worker logs of a failed start). */
static void discard_run_dir(const char *dir)
{
	/* Never under a run that another spotdeck started there meanwhile
	 * (this start made the directory but lost the race for its lock). */
	char lock[PATH_MAX + 16];
	snprintf(lock, sizeof lock, "%s/lock", dir);
	int fd = open(lock, O_RDWR | O_CLOEXEC);
	if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) < 0) {
		close(fd);
		return;
	}
	nftw(dir, discard_entry, 8, FTW_DEPTH | FTW_PHYS);
	if (fd >= 0)
		close(fd);
}

/* Makes the run directory *dir (its parents as needed, itself 0700 and
 * exclusively).  When it exists already: a default name (is_default, in
 * buf) takes a suffix -2 ... -99 until one is new; a name given is used as
 * it is (the controller refuses one that holds a run).  Returns 1 when this
 * call made the directory, else 0 (the controller reports other failures
 * by name). */
static int make_run_dir(const char **dir, char *buf, size_t len, int is_default)
{
	char parent[PATH_MAX];
	snprintf(parent, sizeof parent, "%s", *dir);
	for (char *p = parent + 1; (p = strchr(p, '/')); p++) {
		*p = 0;
		mkdir(parent, 0755);
		*p = '/';
	}
	if (mkdir(*dir, 0700) == 0)
		return 1;
	if (errno != EEXIST || !is_default)
		return 0;
	char base[64];
	snprintf(base, sizeof base, "%s", *dir);
	for (int i = 2; i < 100; i++) {
		snprintf(buf, len, "%.48s-%d", base, i);
		if (mkdir(buf, 0700) == 0) {
			*dir = buf;
			return 1;
		}
		if (errno != EEXIST)
			return 0;
	}
	return 0;
}

/* The command line, as parsed; NULL and -1 mean "not given". */
struct options {
	const char *job_path, *run_dir, *resume, *provider, *catalog, *theme, *trace_path;
	char worker[PATH_MAX + 32];
	long workers;
	int alert;           /* 0 none, 1 bell, 2 flash */
	int headless, emulate, demo, foreground, detach;
	const char *attach;
	const char *orphans;     /* --orphans, NULL none */
	double hazard, boot, notice;
	long long seed;
	char listen_addr[64];    /* --listen's address, "" none */
	int listen_port;
	char advertise[300];     /* --advertise as workers take it (no brackets), "" none */
};

static const struct option longopts[] = {
	{ "headless", no_argument, 0, 'H' },
	{ "job", required_argument, 0, 'j' },
	{ "workers", required_argument, 0, 'w' },
	{ "run-dir", required_argument, 0, 'r' },
	{ "resume", required_argument, 0, 'R' },
	{ "worker", required_argument, 0, 'W' },
	{ "provider", required_argument, 0, 'P' },
	{ "catalog", required_argument, 0, 'C' },
	{ "hazard-scale", required_argument, 0, 'Z' },
	{ "boot-scale", required_argument, 0, 'B' },
	{ "notice-scale", required_argument, 0, 'N' },
	{ "seed", required_argument, 0, 'S' },
	{ "no-emulate", no_argument, 0, 'E' },
	{ "theme", required_argument, 0, 'T' },
	{ "alert", required_argument, 0, 'A' },
	{ "trace", required_argument, 0, 'X' },
	{ "demo", no_argument, 0, 'D' },
	{ "foreground", no_argument, 0, 'F' },
	{ "detach", no_argument, 0, 'd' },
	{ "attach", required_argument, 0, 'a' },
	{ "listen", required_argument, 0, 'L' },
	{ "advertise", required_argument, 0, 'v' },
	{ "orphans", required_argument, 0, 'O' },
	{ "help", no_argument, 0, 'h' },
	{ "version", no_argument, 0, 'V' },
	{ 0, 0, 0, 0 },
};

/* "HOST:PORT" or "[V6]:PORT" into host (brackets dropped) and port; port
 * from min_port to 65535.  0, or -1 if it is not of that shape. */
static int split_host_port(const char *arg, char *host, size_t hlen, int *port, int min_port)
{
	const char *colon = strrchr(arg, ':');
	if (!colon || colon == arg)
		return -1;
	const char *h = arg;
	size_t n = (size_t)(colon - arg);
	if (h[0] == '[') {
		if (n < 3 || h[n - 1] != ']')
			return -1;
		h++;
		n -= 2;
	} else if (memchr(h, ':', n)) {
		return -1;   /* an IPv6 address needs brackets before :PORT */
	}
	char *end;
	errno = 0;
	long p = strtol(colon + 1, &end, 10);
	if (errno || *end || end == colon + 1 || p < min_port || p > 65535 || n >= hlen)
		return -1;
	memcpy(host, h, n);
	host[n] = '\0';
	*port = (int)p;
	return 0;
}

/* A host workers can dial: a DNS name or IPv4 address (letters, digits,
 * '-' and '.', not starting with '-' or '.'), or an IPv6 address (hex
 * digits, ':' and '.'), as written between the brackets. */
static int dialable_host(const char *h, int bracketed)
{
	const char *ok = bracketed ? "0123456789abcdefABCDEF:." :
	                             "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-.";
	return h[0] && h[0] != '-' && h[0] != '.' && strspn(h, ok) == strlen(h);
}

/* 1 for 0.0.0.0 or :: (however written): one listens on it, nobody dials it. */
static int unspecified_addr(const char *h)
{
	struct in_addr a4;
	struct in6_addr a6;
	if (inet_pton(AF_INET, h, &a4) == 1)
		return a4.s_addr == 0;
	return inet_pton(AF_INET6, h, &a6) == 1 && IN6_IS_ADDR_UNSPECIFIED(&a6);
}

/* One option with a value that needs checking (c is its getopt code):
 * returns 0, or 2 (the exit status) after a one-line error. */
static int parse_value(struct options *o, int c, const char *arg)
{
	char *end;
	errno = 0;
	switch (c) {
	case 'w':
		o->workers = strtol(arg, &end, 10);
		if (errno || *end || end == arg || o->workers < 0 || o->workers > 256) {
			fprintf(stderr, "spotdeck: --workers: expected an integer from 0 to 256, got '%s'\n", arg);
			return 2;
		}
		return 0;
	case 'A':
		if (!strcmp(arg, "none") || !strcmp(arg, "bell") || !strcmp(arg, "flash")) {
			o->alert = arg[0] == 'n' ? 0 : arg[0] == 'b' ? 1 : 2;
			return 0;
		}
		fprintf(stderr, "spotdeck: --alert: expected bell, flash or none, got '%s'\n", arg);
		return 2;
	case 'Z':
	case 'B':
	case 'N': {
		double v = strtod(arg, &end);
		const char *name = c == 'Z' ? "hazard-scale" : c == 'B' ? "boot-scale" : "notice-scale";
		if (errno || *end || end == arg || !(v > 0) || v > 1e6) {
			fprintf(stderr, "spotdeck: --%s: expected a positive number, got '%s'\n", name, arg);
			return 2;
		}
		*(c == 'Z' ? &o->hazard : c == 'B' ? &o->boot : &o->notice) = v;
		return 0;
	}
	case 'L': {
		struct sockaddr_in6 a6;
		struct sockaddr_in a4;
		if (split_host_port(arg, o->listen_addr, sizeof o->listen_addr, &o->listen_port, 0) < 0 ||
		    (uv_ip4_addr(o->listen_addr, 0, &a4) < 0 && uv_ip6_addr(o->listen_addr, 0, &a6) < 0)) {
			fprintf(stderr, "spotdeck: --listen: expected ADDRESS:PORT with a numeric IPv4 or "
			        "[IPv6] address and a port from 0 to 65535, got '%s'\n", arg);
			return 2;
		}
		return 0;
	}
	case 'v': {
		char host[256];
		int port;
		if (split_host_port(arg, host, sizeof host, &port, 1) < 0 || !dialable_host(host, arg[0] == '[')) {
			fprintf(stderr, "spotdeck: --advertise: expected HOST:PORT (a name, an IPv4 address or "
			        "[IPv6]) and a port from 1 to 65535, got '%s'\n", arg);
			return 2;
		}
		if (unspecified_addr(host)) {
			fprintf(stderr, "spotdeck: --advertise: %s is the wildcard address, which no worker can dial: give "
			        "the address the hosts reach this machine at, got '%s'\n", host, arg);
			return 2;
		}
		snprintf(o->advertise, sizeof o->advertise, "%s:%d", host, port);
		return 0;
	}
	case 'O':
		if (sd_orphans_parse(arg) < 0) {
			fprintf(stderr, "spotdeck: --orphans: expected adopt, delete, keep or ask, got '%s'\n", arg);
			return 2;
		}
		o->orphans = arg;
		return 0;
	case 'S':
		o->seed = strtoll(arg, &end, 10);
		if (errno || *end || end == arg || o->seed < 0) {
			fprintf(stderr, "spotdeck: --seed: expected a non-negative integer, got '%s'\n", arg);
			return 2;
		}
		return 0;
	}
	return 0;
}

/* Fills o from the command line.  Returns -1 to go on, or the exit status
 * (0 after --help/--version, 2 after a one-line error). */
/* Subcommands: each gets the arguments from its name on. */
static const struct {
	const char *name;
	int (*main)(int argc, char **argv);
} subcommands[] = {
	{ "plan", sd_plan_main },     { "attach", sd_attach_main },
	{ "ls", sd_ls_main },         { "kill", sd_kill_main },
	{ "doctor", sd_doctor_main }, { "export", sd_export_main },
};

/* The optimal string alignment distance between a and b (insertions,
 * deletions, substitutions and swaps of two neighbours, each 1), up to 16
 * bytes each; longer words are far from every subcommand name. */
static int edit_distance(const char *a, const char *b)
{
	size_t n = strlen(a), m = strlen(b);
	if (n > 16 || m > 16)
		return 99;
	int d[17][17];
	for (size_t i = 0; i <= n; i++)
		d[i][0] = (int)i;
	for (size_t j = 0; j <= m; j++)
		d[0][j] = (int)j;
	for (size_t i = 1; i <= n; i++)
		for (size_t j = 1; j <= m; j++) {
			int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
			if (d[i - 1][j] + 1 < best)
				best = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < best)
				best = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
				best = d[i - 2][j - 2] + 1;
			d[i][j] = best;
		}
	return d[n][m];
}

/* The subcommand a mistyped word most likely meant ("exprot": export), or
 * NULL when none is within 2 edits (1 for names of up to 3 letters). */
static const char *near_subcommand(const char *word)
{
	const char *best = NULL;
	int bestd = 3;
	for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++) {
		int dist = edit_distance(word, subcommands[i].name);
		int limit = strlen(subcommands[i].name) <= 3 ? 1 : 2;
		if (dist <= limit && dist < bestd) {
			best = subcommands[i].name;
			bestd = dist;
		}
	}
	return best;
}

static int parse_options(int argc, char **argv, struct options *o)
{
	/* getopt moves the words that are no options to the end. */
	const char *first = argc > 1 ? argv[1] : NULL;
	memset(o, 0, sizeof *o);
	o->workers = -1;
	o->alert = 1;
	o->emulate = 1;
	o->hazard = o->boot = o->notice = -1;
	o->seed = -1;
	opterr = 0;
	int c;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'H': o->headless = 1; break;
		case 'j': o->job_path = optarg; break;
		case 'r': o->run_dir = optarg; break;
		case 'R': o->resume = optarg; break;
		case 'W': snprintf(o->worker, sizeof o->worker, "%s", optarg); break;
		case 'P': o->provider = optarg; break;
		case 'C': o->catalog = optarg; break;
		case 'E': o->emulate = 0; break;
		case 'T': o->theme = optarg; break;
		case 'X': o->trace_path = optarg; break;
		case 'D': o->demo = 1; break;
		case 'F': o->foreground = 1; break;
		case 'd': o->detach = 1; break;
		case 'a': o->attach = optarg; break;
		case 'w': case 'A': case 'Z': case 'B': case 'N': case 'S': case 'L': case 'v': case 'O':
			if (parse_value(o, c, optarg))
				return 2;
			break;
		case 'h': usage(stdout); return 0;
		case 'V': printf("spotdeck %s\n", PACKAGE_VERSION); return 0;
		default:
			fprintf(stderr, "spotdeck: unknown option or missing value: '%s' (see --help)\n", argv[optind - 1]);
			return 2;
		}
	}
	if (optind < argc) {
		/* The likeliest stray word: a job file named without --job, or a
		 * run directory without --resume or attach. */
		const char *a = argv[optind];
		size_t n = strlen(a);
		char jl[PATH_MAX];
		snprintf(jl, sizeof jl, "%s/journal.jsonl", a);
		if (n > 5 && !strcmp(a + n - 5, ".json"))
			fprintf(stderr, "spotdeck: unexpected argument '%s': a job file comes after --job "
			        "(spotdeck --job %s)\n", a, a);
		else if (access(jl, F_OK) == 0)
			fprintf(stderr, "spotdeck: unexpected argument '%s': a run directory comes after "
			        "--resume or attach (spotdeck attach %s)\n", a, a);
		else if (a == first && near_subcommand(a))
			fprintf(stderr, "spotdeck: '%s' is not a subcommand; did you mean 'spotdeck %s'? (subcommands: "
			        "plan, attach, ls, kill, doctor, export)\n", a, near_subcommand(a));
		else
			fprintf(stderr, "spotdeck: unexpected argument '%s' (see --help)\n", a);
		return 2;
	}
	if (o->detach + o->foreground + o->headless > 1) {
		fprintf(stderr, "spotdeck: choose one of --detach, --foreground and --headless\n");
		return 2;
	}
	if (o->attach && !o->headless) {
		fprintf(stderr, "spotdeck: --attach goes with --headless (a cockpit: spotdeck attach %s)\n", o->attach);
		return 2;
	}
	if (o->resume && (o->job_path || o->run_dir)) {
		fprintf(stderr, "spotdeck: --resume takes the job and run directory from RUNDIR; drop --job/--run-dir\n");
		return 2;
	}
	return -1;
}

/* A new run's provider settings that name files, made absolute (provider.h,
 * path_settings) and written back into job.  0, or -1 with *why. */
static int absolute_path_settings(const struct sd_provider_ops *ops, cJSON *settings, struct sd_job *job,
                                  const char *jp, char **why)
{
	int changed = 0;
	for (int i = 0; ops->path_settings && ops->path_settings[i]; i++) {
		const char *key = ops->path_settings[i];
		cJSON *v = cJSON_GetObjectItemCaseSensitive(settings, key);
		if (!cJSON_IsString(v) || v->valuestring[0] == '/')
			continue;
		char cwd[PATH_MAX], abs[PATH_MAX * 2 + 2];
		if (!getcwd(cwd, sizeof cwd))
			return sd_why(why, "%s: provider.%s: cannot make '%s' absolute: %s", jp, key, v->valuestring,
			              strerror(errno));
		snprintf(abs, sizeof abs, "%s/%s", cwd, v->valuestring);
		cJSON_SetValuestring(v, abs);
		changed = 1;
	}
	if (!changed)
		return 0;
	char *text = cJSON_PrintUnformatted(settings);
	if (!text)
		sd_oom();
	size_t n = strlen(text);
	if (n >= sizeof job->provider_settings) {
		free(text);
		return sd_why(why, "%s: provider: its settings are over %zu bytes once their paths are absolute", jp,
		              sizeof job->provider_settings - 1);
	}
	memcpy(job->provider_settings, text, n + 1);
	free(text);
	return 0;
}

/* The job to run: the embedded demo, the defaults, the --job file or the
 * resumed run's own job.json, then the command line's overrides.  jp gets
 * the job's name for messages.  Returns 0, or 1 after a one-line error. */
static int load_job(const struct options *o, struct sd_job *job, char *jp, size_t jplen,
                    uint8_t **model, size_t *model_len)
{
	*model = NULL;
	*model_len = 0;
	char *why = NULL;
	if (o->headless && !o->demo)
		sd_job_defaults(job);
	else
		demo_job(job);
	if (o->job_path && sd_job_load(job, o->job_path, &why) < 0) {
		fprintf(stderr, "spotdeck: %s\n", why);
		free(why);
		return 1;
	}
	snprintf(jp, jplen, "%s", o->job_path ? o->job_path : "the built-in job");
	if (o->resume) {
		/* A run directory has its journal from the run's first moment (a
		 * start that fails removes the directory): without one this is
		 * not a run to continue. */
		char jn[PATH_MAX + 32];
		snprintf(jn, sizeof jn, "%s/journal.jsonl", o->resume);
		if (access(jn, F_OK) != 0) {
			fprintf(stderr, "spotdeck: --resume %s: not a spotdeck run directory (no journal.jsonl: %s)\n",
			        o->resume, strerror(errno));
			return 1;
		}
		/* The run's own job decides its catalog and knobs. */
		snprintf(jp, jplen, "%s/job.json", o->resume);
		if (sd_job_load(job, jp, &why) < 0) {
			fprintf(stderr, "spotdeck: --resume %s: %s\n", o->resume, why);
			free(why);
			return 1;
		}
	}
	if (o->workers >= 0)
		job->workers = (int)o->workers;
	if (o->provider)
		snprintf(job->provider, sizeof job->provider, "%s", o->provider);
	const struct sd_provider_ops *ops = sd_provider_find(job->provider);
	if (!ops) {
		char names[256];
		sd_provider_names(names, sizeof names);
		if (o->provider)
			fprintf(stderr, "spotdeck: --provider: '%s' is not available in this build (known: %s)\n",
			        o->provider, names);
		else
			fprintf(stderr, "spotdeck: %s: provider.name: '%s' is not available in this build (known: %s)\n",
			        jp, job->provider, names);
		return 1;
	}
	/* The provider's own settings, before anything is created. */
	cJSON *settings = sd_job_provider_settings(job);
	int bad = !settings || sd_provider_check_settings(ops, settings, jp, &why) < 0;
	if (!bad && !o->resume && absolute_path_settings(ops, settings, job, jp, &why) < 0)
		bad = 1;
	cJSON_Delete(settings);
	if (bad) {
		fprintf(stderr, "spotdeck: %s\n", why ? why : "provider: its settings are not a JSON object");
		free(why);
		return 1;
	}
	if (o->catalog)
		snprintf(job->catalog, sizeof job->catalog, "%s", o->catalog);
	if (o->hazard > 0)
		job->hazard_scale = o->hazard;
	if (o->boot > 0)
		job->boot_scale = o->boot;
	if (o->notice > 0)
		job->notice_scale = o->notice;
	if (o->seed >= 0)
		job->market_seed = (unsigned long long)o->seed;
	/* The training data, before any run directory, worker or server: a
	 * bad .npy file is one line here, not a worker failing on every server
	 * it is started on. */
	if (sd_train_check_data(&job->train, &why) < 0) {
		fprintf(stderr, "spotdeck: %s: %s\n", jp, why);
		free(why);
		return 1;
	}
	/* An ONNX model likewise: read once, its whole graph checked and its
	 * input and classes matched to the data, before anything is rented;
	 * the controller keeps these bytes and sends them to every worker
	 * (the path is this host's). */
	if (sd_onnx_is_path(job->train.model)) {
		if (sd_onnx_read_file(job->train.model, model, model_len, &why) < 0 ||
		    sd_train_check_model(&job->train, *model, *model_len, NULL, &why) < 0) {
			fprintf(stderr, "spotdeck: %s: %s\n", jp, why);
			free(why);
			free(*model);
			*model = NULL;
			return 1;
		}
	}
	return 0;
}

/* Closes the controller's and our handles, runs the loop until they are
 * closed, and frees the controller and the view model. */
static void close_all(struct app *a)
{
	sd_controller_close(a->ctl);
	sd_control_close(a->control);
	uv_walk(a->loop, on_closed_walk, NULL);
	uv_run(a->loop, UV_RUN_DEFAULT);
	sd_controller_free(a->ctl);
	sd_view_model_free(a->vm);
}

/* Opens the cockpit over the controller (the view model, the theme dirs,
 * stderr to RUN_DIR/spotdeck.log).  Returns 0, or -1 with *why set. */
static int open_cockpit(struct app *a, const struct options *o, const char *run_dir, char **why)
{
	/* Nothing may write to the terminal behind curses: our own and the
	 * libraries' diagnostics go to the run directory. */
	char logpath[PATH_MAX + 32];
	snprintf(logpath, sizeof logpath, "%s/spotdeck.log", run_dir);
	int fd = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	a->vm = sd_view_model_new(a->ctl);
	char themes_home[PATH_MAX] = "";
	const char *home = getenv("HOME");
	if (home)
		snprintf(themes_home, sizeof themes_home, "%s/.config/spotdeck/themes", home);
	struct sd_cockpit_opts co = {
		.theme = o->theme,
		.theme_dirs = { themes_home, SD_DATADIR "/themes", SD_SRCDIR "/themes", NULL },
		.bell = o->alert,
		.log_path = logpath,
	};
	int rc = sd_cockpit_create(&a->cockpit, a->loop, &cockpit_ops, a, &co, why);
	if (rc == 0)
		a->cockpit_used = 1;
	if (fd >= 0)
		close(fd);   /* the cockpit sends stderr to the log itself */
	return rc;
}

/* How the run ended, in a few words (attached clients, view-final.json). */
static void ended_text(struct app *a, const char *start_why, char *out, size_t len)
{
	struct sd_run_status rs;
	sd_controller_status(a->ctl, &rs);
	const char *fatal = sd_controller_fatal(a->ctl);
	if (start_why)
		snprintf(out, len, "failed to start: %s", start_why);
	else if (fatal)
		snprintf(out, len, "failed: %s", fatal);
	else if (a->user_quit)
		snprintf(out, len, "quit at step %ld of %ld", rs.step, rs.total_steps);
	else if (rs.done && rs.step >= rs.total_steps && rs.test_accuracy >= 0)
		snprintf(out, len, "finished at step %ld, test accuracy %.2f %%", rs.step, 100 * rs.test_accuracy);
	else
		snprintf(out, len, "stopped at step %ld of %ld (exit status %d)", rs.step, rs.total_steps,
		         a->status);
}

static void on_flush_timer(uv_timer_t *t)
{
	(void)t;   /* only wakes the loop up */
}

/* The background run ended: tells the attached clients and waits up to 2 s
 * for them to have read it. */
static void tell_clients(struct app *a, const char *start_why)
{
	if (!a->control)
		return;
	ended_text(a, start_why, a->ended, sizeof a->ended);
	sd_control_end(a->control, a->status, a->ended);
	uv_timer_init(a->loop, &a->flush_timer);
	uv_timer_start(&a->flush_timer, on_flush_timer, 50, 50);
	uint64_t deadline = uv_now(a->loop) + 2000;
	while (!sd_control_flushed(a->control) && uv_now(a->loop) < deadline)
		uv_run(a->loop, UV_RUN_ONCE);
	uv_close((uv_handle_t *)&a->flush_timer, NULL);
}

/* Runs the started controller to its end and says why it ended, once the
 * terminal is back (the cockpit logs stderr).  fresh_dir: the run
 * directory is this start's own, to be removed if the run never began.
 * ready_fd >= 0 (a background run): once started, the run's output goes to
 * RUN_DIR/spotdeck.log and "ready" is written to ready_fd, which the
 * starting process waits for (what came before, errors, it shows). */
static void run_to_end(struct app *a, const char *jp, int fresh_dir, int ready_fd, const char *run_dir)
{
	char *start_why = NULL;
	if (sd_controller_start(a->ctl, &start_why) < 0) {
		a->status = 1;
		a->start_failed = fresh_dir;
	} else {
		if (ready_fd >= 0) {
			char logpath[PATH_MAX + 32];
			snprintf(logpath, sizeof logpath, "%s/spotdeck.log", run_dir);
			int fd = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
			if (fd >= 0) {
				fflush(stdout);
				fflush(stderr);
				dup2(fd, 1);
				dup2(fd, 2);
				close(fd);
			}
			static const char ready[] = "\nspotdeck-ready\n";
			if (write(ready_fd, ready, sizeof ready - 1) < 0)
				perror("spotdeck: ready pipe");
			close(ready_fd);
		}
		uv_run(a->loop, UV_RUN_DEFAULT);
	}
	if (a->cockpit)
		sd_cockpit_destroy(a->cockpit);
	if (start_why)   /* it names the job file or the worker program */
		fprintf(stderr, "spotdeck: %s\n", start_why);
	if (sd_controller_fatal(a->ctl)) {
		fprintf(stderr, "spotdeck: %s\n", sd_controller_fatal(a->ctl));
		a->status = 1;
		a->user_quit = 0;
		/* A run that failed before its first step (a job the workers cannot
		 * load, a worker that cannot start) has nothing to resume: its
		 * directory goes, so the corrected command can run in it again. */
		struct sd_run_status rs;
		sd_controller_status(a->ctl, &rs);
		if (rs.step == 0)
			a->start_failed = fresh_dir;
	}
	tell_clients(a, start_why);
	free(start_why);
}

/* A background run: the process that was started forks one that leaves the
 * terminal's session (setsid, then a second fork so that it can never get
 * a controlling terminal again), stdin /dev/null, and runs the controller;
 * its stdout and stderr go through a pipe to this process until the run
 * started (so a bad job or catalog is said here, and nothing is left
 * running), then to RUN_DIR/spotdeck.log.  This process then attaches a
 * cockpit to the run as any `spotdeck attach` does.  Returns 1 in the
 * child (the caller runs the controller with *ready_fd set), 0 in the
 * starting process after the run is ready (the caller attaches), -1 with
 * the run's exit status in *status when it did not start. */
static int go_background(int *ready_fd, int *status)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0) {
		fprintf(stderr, "spotdeck: pipe: %s\n", strerror(errno));
		*status = 1;
		return -1;
	}
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "spotdeck: fork: %s\n", strerror(errno));
		*status = 1;
		return -1;
	}
	if (pid == 0) {
		close(p[0]);
		if (setsid() < 0)
			_exit(1);
		pid_t again = fork();
		if (again != 0)
			_exit(again < 0);
		int dn = open("/dev/null", O_RDWR);
		if (dn >= 0) {
			dup2(dn, 0);
			close(dn);
		}
		dup2(p[1], 1);
		dup2(p[1], 2);
		*ready_fd = p[1];
		signal(SIGHUP, SIG_IGN);   /* no terminal to lose; SIGTERM still ends it */
		return 1;
	}
	close(p[1]);
	int ws;
	while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
		;
	/* Everything the run said before it was ready, then its word. */
	char buf[4096];
	size_t n = 0;
	char *all = NULL;
	ssize_t got;
	while ((got = read(p[0], buf, sizeof buf)) != 0) {
		if (got < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		char *na = realloc(all, n + (size_t)got + 1);
		if (!na)
			break;
		all = na;
		memcpy(all + n, buf, (size_t)got);
		n += (size_t)got;
		all[n] = 0;
	}
	close(p[0]);
	static const char ready[] = "\nspotdeck-ready\n";
	char *mark = all ? strstr(all, ready) : NULL;
	if (mark)
		*mark = 0;
	if (all && all[0])
		fputs(all, stderr);
	free(all);
	if (!mark) {
		*status = 1;
		return -1;
	}
	return 0;
}

/* The run: parse, load the job and trace, create the controller in its run
 * directory, open the cockpit or the headless stdin, run, clean up.  The
 * exit status: 0 after a finished run or a quit from the cockpit, 1 after
 * a failure, 2 after a bad command line.  Without --headless and
 * --foreground, the run goes to the background and this process attaches
 * to it (src/app/attach.h). */
int main(int argc, char **argv)
{
	for (size_t i = 0; argc > 1 && i < sizeof subcommands / sizeof subcommands[0]; i++)
		if (!strcmp(argv[1], subcommands[i].name))
			return subcommands[i].main(argc - 1, argv + 1);
	struct options o;
	int rc = parse_options(argc, argv, &o);
	if (rc >= 0)
		return rc;
	if (o.attach) {
		struct sd_attach_opts ao;
		memset(&ao, 0, sizeof ao);
		ao.run_dir = o.attach;
		ao.headless = 1;
		return sd_attach_run(&ao);
	}
	int background = !o.headless && !o.foreground;
	if (background && !o.detach && !(isatty(0) && isatty(1))) {
		fprintf(stderr, "spotdeck: the cockpit needs a terminal (stdin and stdout): run with --headless "
		        "for scripts\n");
		return 1;
	}
	char *why = NULL;
	struct sd_trace trace;
	memset(&trace, 0, sizeof trace);
	if (o.trace_path && sd_trace_load(&trace, o.trace_path, &why) < 0) {
		fprintf(stderr, "spotdeck: %s\n", why);
		free(why);
		return 1;
	}
	struct sd_job job;
	char jp[PATH_MAX + 16];
	uint8_t *model = NULL;
	size_t model_len = 0;
	if (load_job(&o, &job, jp, sizeof jp, &model, &model_len))
		return 1;
	char catalog_path[PATH_MAX + 64] = "";
	if (job.catalog[0])
		snprintf(catalog_path, sizeof catalog_path, "%s", job.catalog);
	else
		default_catalog(catalog_path, sizeof catalog_path);
	char rd[64];
	const char *run_dir = o.resume ? o.resume : o.run_dir;
	if (!run_dir) {
		time_t now = time(NULL);
		struct tm tm;
		localtime_r(&now, &tm);
		strftime(rd, sizeof rd, "run-%Y%m%d-%H%M%S", &tm);
		run_dir = rd;
	}
	if (!o.worker[0])
		default_worker_path(o.worker, sizeof o.worker);
	signal(SIGPIPE, SIG_IGN);

	int fresh_dir = 0;
	if (!o.resume) {
		/* Never start a second run over a first one's job, checkpoints and journal. */
		char jpath[PATH_MAX + 32];
		snprintf(jpath, sizeof jpath, "%s/journal.jsonl", run_dir);
		if (access(jpath, F_OK) == 0) {
			fprintf(stderr, "spotdeck: --run-dir %s: holds a run already (journal.jsonl); "
			        "continue it with --resume %s or choose another directory\n", run_dir, run_dir);
			free(model);
			return 1;
		}
	}
	int ready_fd = -1;
	if (background && o.theme) {
		/* A bad theme is said before anything starts. */
		char themes_home[PATH_MAX] = "";
		const char *home = getenv("HOME");
		if (home)
			snprintf(themes_home, sizeof themes_home, "%s/.config/spotdeck/themes", home);
		const char *dirs[] = { themes_home, SD_DATADIR "/themes", SD_SRCDIR "/themes" };
		struct sd_theme th;
		if (sd_theme_load(&th, o.theme, dirs, 3, &why) < 0) {
			fprintf(stderr, "spotdeck: %s\n", why);
			free(why);
			free(model);
			return 1;
		}
	}
	/* A run directory this start creates is removed again if the start
	 * fails (bad catalog or cluster): a failed start leaves nothing.  It is
	 * made here with an exclusive mkdir, so that only the start that made it
	 * may remove it, and two starts in the same second get two default
	 * directories. */
	if (!o.resume)
		fresh_dir = make_run_dir(&run_dir, rd, sizeof rd, !o.run_dir);
	if (background) {
		int status = 1;
		int where = go_background(&ready_fd, &status);
		if (where <= 0) {
			sd_trace_free(&trace);   /* the run's process has its own copy */
			free(model);             /* and of the model's bytes */
			model = NULL;
		}
		if (where < 0) {
			if (fresh_dir)   /* the run's process removed it, or never ran */
				discard_run_dir(run_dir);
			return status;
		}
		if (where == 0 && o.detach) {
			printf("%s\n", run_dir);
			fprintf(stderr, "spotdeck: the run in %s goes on in the background: spotdeck attach %s "
			        "watches it, spotdeck kill %s ends it\n", run_dir, run_dir, run_dir);
			return 0;
		}
		if (where == 0) {
			struct sd_attach_opts ao;
			memset(&ao, 0, sizeof ao);
			ao.run_dir = run_dir;
			char themes_home[PATH_MAX] = "";
			const char *home = getenv("HOME");
			if (home)
				snprintf(themes_home, sizeof themes_home, "%s/.config/spotdeck/themes", home);
			ao.cockpit.theme = o.theme;
			ao.cockpit.theme_dirs[0] = themes_home;
			ao.cockpit.theme_dirs[1] = SD_DATADIR "/themes";
			ao.cockpit.theme_dirs[2] = SD_SRCDIR "/themes";
			ao.cockpit.bell = o.alert;
			ao.end_run_without_cockpit = 1;
			return sd_attach_run(&ao);
		}
	}

	struct app a;
	memset(&a, 0, sizeof a);
	a.loop = uv_default_loop();
	struct sd_controller_opts co = {
		.run_dir = run_dir,
		.worker_path = o.worker,
		.resume = o.resume != NULL,
		.echo_journal = o.headless,
		.on_event = on_event_cb,
		.catalog_path = catalog_path[0] ? catalog_path : NULL,
		.job_file = jp,
		.emulate = o.emulate,
		.trace = o.trace_path ? &trace : NULL,
		.listen_addr = o.listen_addr[0] ? o.listen_addr : NULL,
		.listen_port = o.listen_port,
		.advertise = o.advertise[0] ? o.advertise : NULL,
		.orphans = o.orphans,
		.interactive = !o.headless && !o.detach,
		.model_bytes = model,
		.model_len = model_len,
		.on_exit = on_exit_cb,
		.ctx = &a,
	};
	/* The controller takes the model's bytes (freed with it). */
	if (sd_controller_create(&a.ctl, a.loop, &job, &co, &why) < 0) {
		fprintf(stderr, "spotdeck: %s\n", why);
		free(why);
		uv_run(a.loop, UV_RUN_DEFAULT);   /* the failed create's handles close */
		uv_loop_close(a.loop);
		if (fresh_dir)
			discard_run_dir(run_dir);
		return 1;
	}
	uv_signal_init(a.loop, &a.sigint);
	uv_signal_init(a.loop, &a.sigterm);
	uv_signal_init(a.loop, &a.sighup);
	a.sigint.data = a.sigterm.data = a.sighup.data = &a;
	uv_signal_start(&a.sigint, on_signal, SIGINT);
	uv_signal_start(&a.sigterm, on_signal, SIGTERM);
	if (!background)
		uv_signal_start(&a.sighup, on_signal, SIGHUP);
	if (background) {
		a.vm = sd_view_model_new(a.ctl);
		struct sd_control_opts cto = {
			.run_dir = run_dir,
			.job = jp,
			.view = cockpit_view,
			.command = control_command,
			.clients_changed = control_clients_changed,
			.ctx = &a,
		};
		if (sd_control_listen(&a.control, a.loop, &cto, &why) < 0) {
			fprintf(stderr, "spotdeck: %s\n", why);
			free(why);
			close_all(&a);
			uv_loop_close(a.loop);
			if (fresh_dir)
				discard_run_dir(run_dir);
			return 1;
		}
	} else if (o.headless) {
		open_stdin(&a);
	} else if (open_cockpit(&a, &o, run_dir, &why) < 0) {
		fprintf(stderr, "spotdeck: %s\n", why);
		free(why);
		close_all(&a);
		if (fresh_dir)
			discard_run_dir(run_dir);
		return 1;
	}
	run_to_end(&a, jp, fresh_dir, ready_fd, run_dir);
	close_all(&a);
	sd_line_reader_free(&a.in_rd);
	sd_trace_free(&trace);
	uv_loop_close(a.loop);
	if (a.start_failed)
		discard_run_dir(run_dir);
	if (background)
		return a.user_quit ? 0 : a.status;
	return a.cockpit_used && a.user_quit ? 0 : a.status;
}
