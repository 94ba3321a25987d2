/* src/app/run-options.c - see run-options.h. */
#include "config.h"

#include "src/app/run-options.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "src/app/subcommand.h"
#include "src/provider/cloud-vm.h"

static void usage(FILE *f)
{
	fprintf(f,
"usage: spotdeck [--job FILE] [--theme NAME] [options]   (a background run + its cockpit)\n"
"       spotdeck --foreground [--job FILE] [options]   (the run inside the cockpit's process)\n"
"       spotdeck --headless [--job FILE] [--workers N] [--run-dir DIR]\n"
"       spotdeck [--headless] --resume RUNDIR\n");
	sd_subcommand_usage(f);
	fprintf(f,
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

/* Says what a word that is no option is likely to be: a job file named
 * without --job, a run directory without --resume or attach, or a
 * mistyped subcommand when it came first.  Returns 2, the exit status. */
static int stray_word(const char *a, const char *first)
{
	size_t n = strlen(a);
	char jl[PATH_MAX];
	snprintf(jl, sizeof jl, "%s/journal.jsonl", a);
	if (n > 5 && !strcmp(a + n - 5, ".json"))
		fprintf(stderr, "spotdeck: unexpected argument '%s': a job file comes after --job "
		        "(spotdeck --job %s)\n", a, a);
	else if (access(jl, F_OK) == 0)
		fprintf(stderr, "spotdeck: unexpected argument '%s': a run directory comes after "
		        "--resume or attach (spotdeck attach %s)\n", a, a);
	else if (a == first && sd_subcommand_near(a))
		fprintf(stderr, "spotdeck: '%s' is not a subcommand; did you mean 'spotdeck %s'? (subcommands: "
		        "%s)\n", a, sd_subcommand_near(a), sd_subcommand_names());
	else
		fprintf(stderr, "spotdeck: unexpected argument '%s' (see --help)\n", a);
	return 2;
}

/* Fills o from the command line.  Returns -1 to go on, or the exit status
 * (0 after --help/--version, 2 after a one-line error). */
int sd_run_parse_options(int argc, char **argv, struct options *o)
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
	/* A mistyped subcommand followed by its options ("spotdeck expot r1
	 * --onnx x.onnx") would otherwise be reported as an unknown option of
	 * the run, which hides the real mistake: look at the first word first. */
	if (first && first[0] != '-' && sd_subcommand_near(first))
		return stray_word(first, first);
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
	if (optind < argc)
		return stray_word(argv[optind], first);
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
