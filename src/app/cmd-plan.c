/* src/app/cmd-plan.c - `spotdeck plan`: the what-if planner from the shell
 * (plan-cli.c). */
#include "config.h"

#include "src/app/plan-cli.h"
#include "src/app/subcommand.h"

const struct sd_subcommand sd_cmd_plan = {
	.name = "plan",
	.synopsis = "plan [--gpus ...] [--sizes ...] [--deadline 2h] ...   (what-if planner)",
	.main = sd_plan_main,
};
