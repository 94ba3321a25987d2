/* src/main.c - spotdeck: `spotdeck SUBCOMMAND ...` runs the subcommand of
 * that name (src/app/subcommand.h: one src/app/cmd-NAME.c each); any other
 * first argument, or none, is the run's own (src/app/cmd-run.c). */
#include "config.h"

#include "src/app/subcommand.h"

int main(int argc, char **argv)
{
	const struct sd_subcommand *sub = argc > 1 ? sd_subcommand_find(argv[1]) : NULL;
	if (sub)
		return sub->main(argc - 1, argv + 1);
	return sd_cmd_run.main(argc, argv);
}
