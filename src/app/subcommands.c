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

/* The optimal string alignment distance between a and b, up to 16 bytes
 * each; longer words are far from every subcommand name. */
static int edit_distance(const char *a, const char *b)
{
	size_t n = strlen(a), m = strlen(b);
	if (n > 16 || m > 16)
		return 99;
	int d[17][17];
	for (size_t i = 0; i <= n; i++)
		d[i][0] = (int)i;
	for (size_t j = 0; j <= m; j++)
		d[0][j] = (int)j;
	for (size_t i = 1; i <= n; i++)
		for (size_t j = 1; j <= m; j++) {
			int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
			if (d[i - 1][j] + 1 < best)
				best = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < best)
				best = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
				best = d[i - 2][j - 2] + 1;
			d[i][j] = best;
		}
	return d[n][m];
}

const char *sd_subcommand_near(const char *word)
{
	const char *best = NULL;
	int bestd = 3;
	for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++) {
		int dist = edit_distance(word, subcommands[i]->name);
		int limit = strlen(subcommands[i]->name) <= 3 ? 1 : 2;
		if (dist <= limit && dist < bestd) {
			best = subcommands[i]->name;
			bestd = dist;
		}
	}
	return best;
}

const char *sd_subcommand_names(void)
{
	static char names[128];
	if (!names[0])
		for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
			snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "",
			         subcommands[i]->name);
	return names;
}
