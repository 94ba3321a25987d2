/* src/app/plan-cli.h - `spotdeck plan`: the what-if planner on the command line
 * (spotdeck-plan(1)).  src/main.c hands it the arguments after "spotdeck". */
#ifndef SD_APP_PLAN_CLI_H
#define SD_APP_PLAN_CLI_H

#include <stddef.h>

#include "engine/train.h"
#include "src/market/planner.h"

/* Runs `spotdeck plan ARGS...`; argv[0] is "plan".  Prints the table (or
 * JSON with --json) on stdout, progress and errors on stderr.  Returns the
 * process exit status: 0, 1 for bad input (one line on stderr), 2 for a
 * usage error. */
int sd_plan_main(int argc, char **argv);

/* Resolves a data file: NAME as given if readable; a bare NAME also in the
 * program's data/ (build tree), the sources' data/ and the installed data
 * directory.  Writes the path (or NAME) to out; 0 if readable, else -1. */
int sd_plan_data_path(const char *name, char *out, size_t len);

/* The planner's job for training config t: `steps` optimizer steps (<= 0:
 * the config's epochs) of its global batch, in images; the scaling model
 * "resnet32"; the speed against the catalog's workload (ResNet-32 on
 * 3x32x32 images) as the ratio of training FLOPs per image.  Returns 0, or
 * -1 with *why (unknown dataset size, a model the engine cannot build). */
int sd_plan_job_from_train(struct sd_plan_job *pj, const struct sd_train_config *t, long steps, char **why);

#endif
