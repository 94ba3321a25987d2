/* src/app/view-model.h - fills the cockpit's struct sd_view (ui/view.h) from the
 * controller, the provider and the journal events. */
#ifndef SD_APP_VIEW_MODEL_H
#define SD_APP_VIEW_MODEL_H

#include <cJSON.h>

#include "src/controller/controller.h"
#include "src/proto/events.h"
#include "ui/view.h"

struct sd_view_model;

/* The model for controller c (which must outlive it). */
struct sd_view_model *sd_view_model_new(struct sd_controller *c);
void sd_view_model_free(struct sd_view_model *vm);

/* Feeds one journal event (revocations, messages, time series); ev is
 * borrowed for the call.  A type the view does not follow only marks the
 * view changed. */
void sd_view_model_on_event(struct sd_view_model *vm, const struct sd_event *ev);

/* The what-if view's rows (src/app/whatif.c): n rows copied (rows NULL: the
 * old ones stay), the note, and whether a plan is running. */
void sd_view_model_set_whatif(struct sd_view_model *vm, const struct sd_view_whatif *rows, int n,
                              const char *note, int busy);

/* The cockpits attached to the background run (src/app/control.h); the
 * header shows it. */
void sd_view_model_set_clients(struct sd_view_model *vm, int clients);

/* Refreshes live figures and returns the view (owned by vm, valid until
 * the next call). */
const struct sd_view *sd_view_model_refresh(struct sd_view_model *vm);

#endif
