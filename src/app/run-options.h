/* src/app/run-options.h - the run's command line (`spotdeck [options]`,
 * spotdeck(1) OPTIONS): parsed and checked here, each bad value one line
 * naming the option, before anything is loaded. */
#ifndef SD_APP_RUN_OPTIONS_H
#define SD_APP_RUN_OPTIONS_H

#include <limits.h>

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

/* Fills o from the command line (argv[0] the program).  Returns -1 to go
 * on, or the exit status: 0 after --help or --version (printed), 2 after
 * a one-line error on stderr. */
int sd_run_parse_options(int argc, char **argv, struct options *o);

#endif
