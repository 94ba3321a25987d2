/* src/app/cmd-attach.c - `spotdeck attach`: a cockpit (or, with
 * --headless, the journal) of a background run; the client is attach.c. */
#include "config.h"

#include "src/app/attach.h"
#include "src/app/subcommand.h"

const struct sd_subcommand sd_cmd_attach = {
	.name = "attach",
	.synopsis = "attach [--read-only] [--headless] [RUNDIR]   (x detaches)",
	.main = sd_attach_main,
};
