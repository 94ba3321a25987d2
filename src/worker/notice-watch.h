/* src/worker/notice-watch.h - the worker's watcher of the cloud's own
 * preemption notice (spotdeck-worker --notice, the job's "notice").
 *
 * A transient server hears that it is about to be taken from the metadata
 * service inside the VM, before the provider's API shows anything outside
 * (../shared/reference/cloud-apis.md, sections 1.4, 2.4 and 3):
 *   gce    GET http://$GCE_METADATA_HOST/computeMetadata/v1/instance/preempted
 *          with "Metadata-Flavor: Google": FALSE, then TRUE ~30 s before the
 *          Spot VM is powered off.  Watched by long-poll (wait_for_change=true,
 *          last_etag=<the ETag of the last answer>, timeout_sec), as Google's
 *          Go client (metadata.Subscribe) does; instance/maintenance-event
 *          TERMINATE_ON_HOST_MAINTENANCE (~60 s ahead, GPU VMs) counts too.
 *          Default host 169.254.169.254 (metadata.google.internal's address).
 *   aws    IMDSv2: PUT $AWS_EC2_METADATA_SERVICE_ENDPOINT/latest/api/token with
 *          "X-aws-ec2-metadata-token-ttl-seconds", then GETs with
 *          "X-aws-ec2-metadata-token": latest/meta-data/spot/instance-action
 *          is 404 until {"action":"terminate|stop|hibernate","time":ISO} ~2 min
 *          ahead; events/recommendations/rebalance ({"noticeTime":ISO}) is an
 *          earlier risk hint: a warning, not a notice.  Polled every 0.5 s
 *          (AWS suggests 5 s; spotdeck wants a notice in its journal within
 *          1 s, which a 1 s period meets only on average).  Default
 *          endpoint http://169.254.169.254 (the variable AWS's SDKs read).
 *   azure  Scheduled Events: GET $SPOTDECK_AZURE_METADATA_ENDPOINT/metadata/
 *          scheduledevents?api-version=2020-07-01 with "Metadata: true",
 *          polled every 0.5 s; an event with EventType "Preempt" whose
 *          Resources name this VM (instance/compute/name) is the notice,
 *          NotBefore its deadline (RFC 1123; ISO 8601 read too).  After the
 *          worker left, sd_notice_watch_ack POSTs {"StartRequests":
 *          [{"EventId":...}]} so that Azure may go ahead at once.  Azure's
 *          own libraries read no variable for this endpoint, so the name is
 *          spotdeck's.  Default http://169.254.169.254.
 *   auto   probes the three once (1 s each, each with its required header)
 *          and keeps the first that answers.
 * Requests never go through a proxy (the metadata service is link-local).
 *
 * Threads: the watcher runs its own threads with their own libcurl easy
 * handles; the callback runs on one of them, never on the training thread,
 * and must only hand the notice over (the agent sends it on the controller
 * connection, whose sends are locked, and sets a flag).  A notice is
 * reported once per watch; warnings once per kind.
 */
#ifndef SD_WORKER_NOTICE_WATCH_H
#define SD_WORKER_NOTICE_WATCH_H

#include <stddef.h>

enum sd_notice_cloud { SD_NOTICE_NONE, SD_NOTICE_AUTO, SD_NOTICE_GCE, SD_NOTICE_AWS, SD_NOTICE_AZURE };

/* "none", "auto", "gce", "aws", "azure"; "?" out of range. */
const char *sd_notice_cloud_name(enum sd_notice_cloud c);
/* Parses one of those names; 0 and *c, or -1. */
int sd_notice_cloud_parse(const char *name, enum sd_notice_cloud *c);

/* What the metadata service said. */
struct sd_notice {
	int warning;          /* 1: a warning only (AWS rebalance); 0: a notice */
	const char *source;   /* "gce", "aws" or "azure" */
	const char *event;    /* what said it: "preempted", "maintenance-event",
	                       * "instance-action", "rebalance", "Preempt" */
	double seconds;       /* until the server goes (from the cloud's time, or
	                       * GCE's documented 30 s / 60 s); -1 unknown */
	char deadline[64];    /* the cloud's own time string ("" when it gives
	                       * none: GCE) */
	char detail[64];      /* AWS action, Azure EventId, GCE value */
};
/* Called on a watcher thread (see the top). */
typedef void (*sd_notice_cb)(const struct sd_notice *n, void *ctx);

struct sd_notice_watch;

/* Starts watching cloud c (SD_NOTICE_NONE: *out = NULL, 0).  For auto,
 * probes first; when no endpoint answers, returns 0 with *out NULL and
 * *why saying so (the caller logs it: a worker on a machine without
 * metadata service trains on).  -1 with *why: libcurl or threads failed. */
int sd_notice_watch_start(struct sd_notice_watch **out, enum sd_notice_cloud c, sd_notice_cb cb, void *ctx,
                          char **why);
/* The cloud actually watched (after auto's probe). */
enum sd_notice_cloud sd_notice_watch_cloud(const struct sd_notice_watch *w);
/* Azure: acknowledges the noticed event (POST StartRequests), blocking for
 * at most ~2 s; 0, or -1 with *why.  Elsewhere (or without a notice) a no-op
 * returning 0. */
int sd_notice_watch_ack(struct sd_notice_watch *w, char **why);
/* Stops the threads (an in-flight long-poll is aborted) and frees w; NULL ok. */
void sd_notice_watch_stop(struct sd_notice_watch *w);

/* Parsers, split out for tests/worker/test-notice-watch.c.  Each returns 1 when the
 * document says "notice", 0 when it does not, -1 with *why when it is not
 * what the cloud documents. */
/* AWS spot/instance-action body: {"action": str, "time": str}; fills
 * action and time (NUL-terminated, truncated to their sizes). */
int sd_notice_parse_aws_action(const char *body, char *action, size_t action_len, char *time, size_t time_len,
                               char **why);
/* Azure scheduled events document: the first event with EventType
 * "Preempt" whose Resources hold vm_name (NULL or "": any VM); fills its
 * EventId and NotBefore.  *incarnation gets DocumentIncarnation. */
int sd_notice_parse_azure_events(const char *body, const char *vm_name, char *event_id, size_t id_len,
                                 char *not_before, size_t nb_len, long *incarnation, char **why);
/* ETag value of one HTTP header line ("ETag: abc\r\n", any case, quotes
 * kept as sent); 1 and etag, or 0 for another header. */
int sd_notice_parse_etag(const char *line, size_t len, char *etag, size_t etag_len);
/* Seconds since the epoch of an ISO 8601 UTC time ("2026-01-02T03:04:05Z",
 * fractional seconds allowed) or an RFC 1123 one ("Tue, 09 Aug 2022
 * 17:07:32 GMT"); -1 when it is neither. */
double sd_notice_parse_time(const char *s);

#endif
