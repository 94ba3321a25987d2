/* src/app/cmd-ls.c - `spotdeck ls`: the live runs under a directory, read
 * from their control sockets' hello (attach.c). */
#include "config.h"

#include "src/app/attach.h"
#include "src/app/subcommand.h"

const struct sd_subcommand sd_cmd_ls = {
	.name = "ls",
	.synopsis = "ls [DIR]          live runs",
	.main = sd_ls_main,
};
