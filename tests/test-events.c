/* tests/test-events.c - the journal's event types (src/proto/events.h):
 * every type has a name, the names are distinct and map back to their type,
 * an unknown name maps to -1, and spotdeck(1)'s JOURNAL section documents
 * every type (a line ".B name", or name as a word of a ".BR" line), so an
 * event added to the enum without its fields in the manual fails here. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "src/proto/events.h"
#include "tests/check.h"

/* Whether the JOURNAL section of the man page at path documents name. */
static int documented(const char *path, const char *name)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	char line[1024];
	int in = 0, found = 0;
	size_t n = strlen(name);
	while (!found && fgets(line, sizeof line, f)) {
		if (!strncmp(line, ".SH ", 4))
			in = !strncmp(line + 4, "JOURNAL", 7);
		if (!in || (strncmp(line, ".B ", 3) && strncmp(line, ".BR ", 4)))
			continue;
		/* name as a whole word: not a prefix of checkpoint_failed, say */
		for (const char *p = strstr(line, name); p && !found; p = strstr(p + 1, name)) {
			char before = p == line ? ' ' : p[-1], after = p[n];
			found = !(before == '_' || (before >= 'a' && before <= 'z')) &&
			        !(after == '_' || (after >= 'a' && after <= 'z'));
		}
	}
	fclose(f);
	return found;
}

int main(void)
{
	const char *man = SD_SRCDIR "/man/spotdeck.1";
	int undocumented = 0;
	for (int t = 0; t < SD_EV_COUNT; t++) {
		const char *name = sd_event_name((enum sd_event_type)t);
		CHECK(strcmp(name, "?") != 0, "event %d has no name", t);
		CHECK_INT(sd_event_lookup(name), t);
		for (int u = 0; u < t; u++)
			CHECK(strcmp(name, sd_event_name((enum sd_event_type)u)) != 0, "'%s' names two events", name);
		int d = documented(man, name);
		CHECK(d >= 0, "%s: cannot read", man);
		if (d == 0) {
			CHECK(d == 1, "%s: JOURNAL does not document the '%s' event", man, name);
			undocumented++;
		}
	}
	CHECK_INT(sd_event_lookup("no_such_event"), -1);
	CHECK_INT(sd_event_lookup(""), -1);
	CHECK_STR(sd_event_name(SD_EV_COUNT), "?");
	/* The check itself: a prefix of a documented name is not documented. */
	CHECK_INT(documented(man, "checkpoint_fail"), 0);
	printf("%d event types, %d undocumented\n", SD_EV_COUNT, undocumented);
	return check_exit("test-events");
}
