/* src/proto/events.c - see events.h. */
#include "config.h"

#include "src/proto/events.h"

#include "src/base/errors.h"

#include <string.h>

static const char *const names[SD_EV_COUNT] = {
	[SD_EV_RUN_START] = "run_start",
	[SD_EV_DONE] = "done",
	[SD_EV_SIGNAL] = "signal",
	[SD_EV_ERROR] = "error",
	[SD_EV_JOURNAL_RESUMED] = "journal_resumed",
	[SD_EV_COMMAND] = "command",
	[SD_EV_HELP] = "help",
	[SD_EV_ACQUIRED] = "acquired",
	[SD_EV_STATE] = "state",
	[SD_EV_STARTED] = "started",
	[SD_EV_NOTICE] = "notice",
	[SD_EV_REVOKED] = "revoked",
	[SD_EV_RELEASED] = "released",
	[SD_EV_SERVER_EXIT] = "server_exit",
	[SD_EV_STOCKOUT] = "stockout",
	[SD_EV_ZONE_EXHAUSTED] = "zone_exhausted",
	[SD_EV_PRICE] = "price",
	[SD_EV_STORM_BEGIN] = "storm_begin",
	[SD_EV_STORM_END] = "storm_end",
	[SD_EV_TRACE_SKIPPED] = "trace_skipped",
	[SD_EV_SWAP] = "swap",
	[SD_EV_SWAP_FAILED] = "swap_failed",
	[SD_EV_CLOUD_WARNING] = "cloud_warning",
	[SD_EV_CLOUD_CALL] = "cloud_call",
	[SD_EV_ORPHAN] = "orphan",
	[SD_EV_BILLED] = "billed",
	[SD_EV_HOST_UNREACHABLE] = "host_unreachable",
	[SD_EV_HOST_BACK] = "host_back",
	[SD_EV_WORKER_CONNECTED] = "worker_connected",
	[SD_EV_WORKER_READY] = "worker_ready",
	[SD_EV_WORKER_JOINED] = "worker_joined",
	[SD_EV_WORKER_LEAVING] = "worker_leaving",
	[SD_EV_WORKER_LEFT] = "worker_left",
	[SD_EV_WORKER_LOST] = "worker_lost",
	[SD_EV_WORKER_UNRESPONSIVE] = "worker_unresponsive",
	[SD_EV_WORKER_LOG] = "worker_log",
	[SD_EV_JOB_ERROR] = "job_error",
	[SD_EV_AUTH_FAILED] = "auth_failed",
	[SD_EV_PROTOCOL_ERROR] = "protocol_error",
	[SD_EV_WORKER_REFUSED] = "worker_refused",
	[SD_EV_GENERATION] = "generation",
	[SD_EV_STEP] = "step",
	[SD_EV_EPOCH] = "epoch",
	[SD_EV_CHECKSUM] = "checksum",
	[SD_EV_COMM_FAILED] = "comm_failed",
	[SD_EV_CHECKPOINT] = "checkpoint",
	[SD_EV_CHECKPOINT_FAILED] = "checkpoint_failed",
	[SD_EV_CHECKPOINT_INVALID] = "checkpoint_invalid",
	[SD_EV_CHECKPOINT_STREAMED] = "checkpoint_streamed",
	[SD_EV_MODEL_SENT] = "model_sent",
	[SD_EV_AUTOPILOT] = "autopilot",
};

const char *sd_event_name(enum sd_event_type t)
{
	return (unsigned)t < SD_EV_COUNT && names[t] ? names[t] : "?";
}

int sd_event_lookup(const char *name)
{
	for (int i = 0; i < SD_EV_COUNT; i++)
		if (names[i] && !strcmp(names[i], name))
			return i;
	return -1;
}

int sd_event_from_json(struct sd_event *ev, const cJSON *obj, char **why)
{
	if (!cJSON_IsObject(obj))
		return sd_why(why, "event: expected a JSON object");
	const cJSON *type = cJSON_GetObjectItemCaseSensitive(obj, "type");
	if (!cJSON_IsString(type) || !type->valuestring)
		return sd_why(why, "event.type: expected a string");
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(obj, "t");
	int k = sd_event_lookup(type->valuestring);
	ev->type = k < 0 ? SD_EV_COUNT : (enum sd_event_type)k;
	ev->t = cJSON_IsNumber(t) ? t->valuedouble : 0;
	ev->fields = obj;
	return 0;
}
