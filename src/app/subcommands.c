/* src/app/subcommands.c - the table of `spotdeck SUBCOMMAND`s (see
 * subcommand.h). */
#include "config.h"

#include "src/app/subcommand.h"

#include <string.h>

/* In --help's order. */
static const struct sd_subcommand *const subcommands[] = {
	&sd_cmd_attach, &sd_cmd_ls, &sd_cmd_kill, &sd_cmd_plan, &sd_cmd_doctor, &sd_cmd_export,
};

const struct sd_subcommand *sd_subcommand_find(const char *name)
{
	for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
		if (!strcmp(subcommands[i]->name, name))
			return subcommands[i];
	return NULL;
}

void sd_subcommand_usage(FILE *f)
{
	for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
		fprintf(f, "       spotdeck %s\n", subcommands[i]->synopsis);
}
