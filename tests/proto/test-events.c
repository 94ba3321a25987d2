/* tests/proto/test-events.c - the journal's event types (src/proto/events.h):
 * every type has a name, the names are distinct and map back to their type,
 * an unknown name maps to -1, and spotdeck(1)'s JOURNAL section documents
 * every type (a line ".B name", or name as a word of a ".BR" line), so an
 * event added to the enum without its fields in the manual fails here.
 * sd_event_from_json reads a journal line back to its type and time, an
 * unknown type as SD_EV_COUNT, and refuses a line without a string type. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
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
	/* Every type read back from a journal line as the journal writes it. */
	for (int t = 0; t < SD_EV_COUNT; t++) {
		char line[160];
		snprintf(line, sizeof line, "{\"type\":\"%s\",\"time\":1767000000,\"t\":%d.5}",
		         sd_event_name((enum sd_event_type)t), t);
		cJSON *obj = cJSON_Parse(line);
		struct sd_event ev;
		char *why = NULL;
		CHECK_INT(sd_event_from_json(&ev, obj, &why), 0);
		CHECK_INT(ev.type, t);
		CHECK(ev.t == t + 0.5, "%s: t %g, expected %d.5", line, ev.t, t);
		CHECK(ev.fields == obj, "%s: fields not borrowed", line);
		free(why);
		cJSON_Delete(obj);
	}
	const char *odd[] = { "{\"type\":\"from_a_newer_build\"}", "{\"type\":7,\"t\":1}", "{\"t\":1}", "[1]" };
	int rc[] = { 0, -1, -1, -1 };
	const char *err[] = { NULL, "event.type: expected a string", "event.type: expected a string",
	                      "event: expected a JSON object" };
	for (int i = 0; i < 4; i++) {
		cJSON *obj = cJSON_Parse(odd[i]);
		struct sd_event ev = { .type = SD_EV_STEP };
		char *why = NULL;
		CHECK_INT(sd_event_from_json(&ev, obj, &why), rc[i]);
		if (err[i])
			CHECK_STR(why ? why : "(none)", err[i]);
		else
			CHECK_INT(ev.type, SD_EV_COUNT);
		free(why);
		cJSON_Delete(obj);
	}
	printf("%d event types, %d undocumented\n", SD_EV_COUNT, undocumented);
	return check_exit("test-events");
}
