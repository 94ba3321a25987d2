/* src/app/view-codec.h - the cockpit's view (ui/view.h) as JSON, for the
 * control socket (src/app/control.h): the background run encodes it, an
 * attached cockpit decodes it into a mirror it renders.
 *
 * Two forms, one object ("view" in the snapshot and status messages of
 * doc/control-protocol.md):
 * - full: every field of struct sd_view, every array whole, every series
 *   with all its samples (oldest first): what a client gets on attach;
 * - changes since a mark (what the last broadcast carried): every scalar
 *   field (they are small and change every tick), the servers array whole but
 *   each server's "ips" series only with the samples newer than the mark,
 *   the global series likewise, and "offers", "revocations", "whatif" only
 *   when they changed since the mark (absent: unchanged).
 * A series is {"t":[seconds...],"v":[values...]}, oldest first; applying one
 * appends the samples whose t is newer than the mirror's newest in that
 * series (a snapshot sent between two broadcasts may overlap the next
 * change set: the overlap is skipped), and a full form replaces it.  A
 * series whose newest t went back below the mark (the run's clock started
 * again) is sent whole with "replace":true, which replaces it too.  A
 * server of the change set that the mark does not know is sent with its
 * whole series.  Series values are floats, printed with 9 significant
 * digits (what reads back to the same float); doubles with 15, or 17 when
 * 15 do not read back exactly: every number round-trips bit for bit.
 *
 * Field names are struct sd_view's and struct sd_view_server's etc. member
 * names.  Numbers are JSON numbers, except "seed", a decimal string (a
 * double cannot hold every uint64_t); a non-finite double is sent as null and
 * read back as the field's "unknown" (-1 for eta_s, test_accuracy,
 * val_loss and recovery_s, else 0; 0 for a series sample).  Integers (long fields too)
 * round-trip up to 2^53. */
#ifndef SD_APP_VIEW_CODEC_H
#define SD_APP_VIEW_CODEC_H

#include <stdint.h>

#include <cJSON.h>

#include "ui/view.h"

#define SD_VIEW_CODEC_MAX_SERVERS 256     /* the view model's own bound */
#define SD_VIEW_CODEC_MAX_OFFERS 4096
#define SD_VIEW_CODEC_MAX_REVOCATIONS 256
#define SD_VIEW_CODEC_MAX_WHATIF 64

/* What the last broadcast carried (server side); zero it for "nothing yet". */
struct sd_view_mark {
	int valid;
	uint64_t offers_hash, revocations_hash;  /* of the arrays' bytes */
	unsigned long whatif_version;
	double throughput_t, loss_t, acc_t;       /* newest sample's t sent; -1 none */
	int nservers;
	struct { char id[32]; double ips_t; } servers[SD_VIEW_CODEC_MAX_SERVERS];
};

/* The view as a new JSON object (caller deletes): the full form when
 * since is NULL or not valid, else the changes since it.  NULL only when
 * out of memory.  Its numbers, and each series' "t" and "v" arrays, are
 * cJSON_Raw items holding JSON text (exact doubles, one item per array):
 * print the object (sd_control_line), do not read them back from it. */
cJSON *sd_view_encode(const struct sd_view *v, const struct sd_view_mark *since);

/* Records in m what v holds now (after a broadcast of its changes). */
void sd_view_mark_set(struct sd_view_mark *m, const struct sd_view *v);

/* The client's copy of the view, built from the messages; it owns its
 * arrays.  m->v is what the cockpit renders. */
struct sd_view_mirror {
	struct sd_view v;
	int cap_offers, cap_servers, cap_revocations, cap_whatif;
};

void sd_view_mirror_init(struct sd_view_mirror *m);
void sd_view_mirror_free(struct sd_view_mirror *m);

/* Applies a view object: full = 1 for a snapshot (everything replaced),
 * 0 for a change set.  Bumps m->v.version.  Returns 0, or -1 with *why
 * (caller frees) naming the field and what is wrong ("view.servers[3].rank:
 * expected an integer"): wrong types, strings too long for their field,
 * arrays over the bounds above, series of unequal lengths.  On error m is
 * left as it was (the new state is built aside and swapped in whole), valid
 * to render and to free. */
int sd_view_mirror_apply(struct sd_view_mirror *m, const cJSON *view, int full, char **why);

#endif
