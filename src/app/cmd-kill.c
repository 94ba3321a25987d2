/* src/app/cmd-kill.c - `spotdeck kill`: ends a background run as q + y
 * does, through its control socket (attach.c). */
#include "config.h"

#include "src/app/attach.h"
#include "src/app/subcommand.h"

const struct sd_subcommand sd_cmd_kill = {
	.name = "kill",
	.synopsis = "kill RUNDIR       end a live run (checkpoint first)",
	.main = sd_kill_main,
};
