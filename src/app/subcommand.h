/* src/app/subcommand.h - `spotdeck SUBCOMMAND ...`: one table of entries,
 * after tmux's cmd_entry.  Each subcommand is one file, src/app/cmd-NAME.c,
 * that ends with its `const struct sd_subcommand sd_cmd_NAME`; the table in
 * src/app/subcommands.c names them in the order --help lists them.  Adding
 * a subcommand: that file, one line in the table, its line in spotdeck(1).
 *
 * The run itself (no subcommand: the controller with a cockpit, or
 * headless) is sd_cmd_run (src/app/cmd-run.c), which src/main.c starts
 * when the first argument names no subcommand. */
#ifndef SD_APP_SUBCOMMAND_H
#define SD_APP_SUBCOMMAND_H

#include <stdio.h>

struct sd_subcommand {
	const char *name;        /* the first argument: "plan" */
	const char *synopsis;    /* its line in --help, after "spotdeck " */
	/* Runs it with argv[0] the subcommand's name and the rest its own
	 * arguments; returns the program's exit status (0 done, 1 failed,
	 * 2 a bad command line, as spotdeck(1) says). */
	int (*main)(int argc, char **argv);
};

extern const struct sd_subcommand sd_cmd_run, sd_cmd_attach, sd_cmd_ls, sd_cmd_kill, sd_cmd_plan,
	sd_cmd_doctor, sd_cmd_export;

/* The subcommand named name, or NULL: the arguments are the run's. */
const struct sd_subcommand *sd_subcommand_find(const char *name);

/* Writes one "       spotdeck SYNOPSIS" line per subcommand to f (for
 * the run's --help). */
void sd_subcommand_usage(FILE *f);

/* The subcommand a mistyped word most likely meant ("exprot": "export"):
 * the nearest name by optimal string alignment distance (insertions,
 * deletions, substitutions and swaps of two neighbours, each 1), within 2
 * edits (1 for names of up to 3 letters), or NULL.  Static storage. */
const char *sd_subcommand_near(const char *word);

/* The subcommands' names, comma-separated, in --help's order.  Static
 * storage. */
const char *sd_subcommand_names(void);

#endif
