/* src/app/attach.h - the clients of a background run's control socket
 * (src/app/control.h): `spotdeck attach` (a cockpit fed from the run's
 * messages, or with --headless the journal as JSON lines and commands from
 * stdin), `spotdeck ls` and `spotdeck kill`. */
#ifndef SD_APP_ATTACH_H
#define SD_APP_ATTACH_H

#include "ui/cockpit.h"

struct sd_attach_opts {
	const char *run_dir;        /* NULL: the newest live run under the current directory */
	int read_only;              /* watch only: commands are refused */
	int headless;               /* journal on stdout, commands from stdin */
	struct sd_cockpit_opts cockpit;   /* log_path NULL: RUN_DIR/spotdeck.log */
	int end_run_without_cockpit;      /* the run was started for this cockpit: if
	                                   * the cockpit cannot open, end the run */
};

/* Attaches and runs until the run ends, the operator detaches (key x,
 * SIGHUP, SIGINT, SIGTERM, or stdin's end with --headless) or the run's
 * process is lost.  A run that has ended shows its final screen
 * (RUN_DIR/view-final.json) read-only.  Returns the exit status: 0 after a
 * detach or a run that ended well (or was quit from here), the run's own
 * status otherwise, 1 when the run's process went away without a word
 * (the message says how to --resume), 2 for a bad run directory. */
int sd_attach_run(const struct sd_attach_opts *o);

/* `spotdeck attach [--read-only] [--headless] [--theme NAME] [--alert HOW] [RUNDIR]`. */
int sd_attach_main(int argc, char **argv);

/* `spotdeck ls [DIR]`: the live runs of this user under DIR (default "."),
 * a line each: directory, job, step/total, world size, $ spent, clients
 * attached, started. */
int sd_ls_main(int argc, char **argv);

/* `spotdeck kill RUNDIR`: ends the run as q + y does (checkpoint, stop the
 * workers, release the servers) and waits for its end. */
int sd_kill_main(int argc, char **argv);

#endif
