/* tests/ui-fixture.h - a made-up run for the cockpit's tests and bench only
 * (never linked into spotdeck): a struct sd_view with fixed, recognisable
 * values that a timer can move. */
#ifndef SD_TESTS_UI_FIXTURE_H
#define SD_TESTS_UI_FIXTURE_H

#include "ui/view.h"

#define UI_FIXTURE_MAX_SERVERS 256
#define UI_FIXTURE_MAX_OFFERS 16
#define UI_FIXTURE_MAX_REVOCATIONS 64

struct ui_fixture {
	struct sd_view view;
	struct sd_view_offer offers[UI_FIXTURE_MAX_OFFERS];
	struct sd_view_server servers[UI_FIXTURE_MAX_SERVERS];
	struct sd_view_revocation revocations[UI_FIXTURE_MAX_REVOCATIONS];
	int next_id;                /* for "sN" of added servers */
	unsigned tick;
};

/* Fills F: NSERVERS servers (s1.. over the offers; the first four are a
 * training V100, an emulated K80, a P100 under notice and an on-demand
 * V100 booting), the offers sorted by $/M images, three revocations, full
 * histories. */
void ui_fixture_init(struct ui_fixture *f, int nservers);

/* Moves the run DT seconds on: step, elapsed, money, histories; walks
 * starting servers one state on; bumps the version. */
void ui_fixture_tick(struct ui_fixture *f, double dt);

/* Adds a server on offer OFFER_ID in state "requested"; returns its id, or
 * NULL for an unknown offer. */
const char *ui_fixture_add(struct ui_fixture *f, const char *offer_id);

/* Sets server ID's state; returns 0, or -1 when there is no such server. */
int ui_fixture_set_state(struct ui_fixture *f, const char *id, const char *state);

/* Revokes server ID: state, log entry, chart mark, suggestion (the first
 * offer). */
int ui_fixture_revoke(struct ui_fixture *f, const char *id);

#endif
