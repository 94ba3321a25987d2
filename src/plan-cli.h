/* src/plan-cli.h - `spotdeck plan`: the what-if planner on the command line
 * (spotdeck-plan(1)).  src/main.c hands it the arguments after "spotdeck". */
#ifndef SD_SRC_PLAN_CLI_H
#define SD_SRC_PLAN_CLI_H

/* Runs `spotdeck plan ARGS...`; argv[0] is "plan".  Prints the table (or
 * JSON with --json) on stdout, progress and errors on stderr.  Returns the
 * process exit status: 0, 1 for bad input (one line on stderr), 2 for a
 * usage error. */
int sd_plan_main(int argc, char **argv);

#endif
