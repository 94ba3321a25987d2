/* src/provider/gce/gce-api.h - the Compute Engine v1 resources the gce
 * provider uses, built and read: an instance insert body for one Spot GPU
 * VM, Operations, instances, instance lists, error bodies, and what an
 * error means for failover.  No I/O here: the provider sends the requests
 * with src/provider/http/http.h.
 *
 * Shapes follow Google's Compute Engine v1 reference as summarised in
 * ../shared/reference/cloud-apis.md section 1 (instances.insert,
 * zoneOperations, instances.get/list/delete, the error bodies).  The
 * failover table (sd_gce_classify) is SkyPilot's
 * (sky/backends/cloud_vm_ray_backend.py, FailoverCloudErrorHandlerV2.
 * _gcp_handler), as the reference quotes it.
 *
 * Every function returns 0 / a pointer, or -1 / NULL with a one-line
 * error in the caller's ERR buffer (ERRLEN bytes) that names the field. */
#ifndef SD_PROVIDER_GCE_GCE_API_H
#define SD_PROVIDER_GCE_GCE_API_H

#include <stddef.h>

/* The API root; a test points the provider at a fake's
 * "http://127.0.0.1:PORT/compute/v1". */
#define SD_GCE_COMPUTE_ROOT "https://compute.googleapis.com/compute/v1"
/* The label every resource of a run carries: spotdeck-run=<run id>. */
#define SD_GCE_RUN_LABEL "spotdeck-run"

/* One Spot VM.  Strings are borrowed; NULL where optional. */
struct sd_gce_instance_spec {
	const char *project;          /* "my-project" */
	const char *zone;             /* "us-central1-a" */
	const char *name;             /* [a-z]([-a-z0-9]{0,61}[a-z0-9])? */
	const char *machine_type;     /* "n1-standard-8", "g2-standard-8" */
	const char *accelerator;      /* "nvidia-tesla-t4"; NULL: the machine type bundles its
	                               * GPUs (A2, A3, G2) */
	int accelerator_count;        /* >= 1 with an accelerator */
	const char *image;            /* source image URL, e.g.
	                               * "projects/deeplearning-platform-release/global/images/family/..." */
	int disk_gb;                  /* boot disk, >= 10 */
	const char *startup_script;   /* metadata startup-script, or NULL */
	const char *ssh_keys;         /* metadata ssh-keys ("USER:ssh-ed25519 AAAA... COMMENT"), or NULL */
	const char *run;              /* the run id, the value of the spotdeck-run label */
	int external_ip;              /* 1: a ONE_TO_ONE_NAT access config (the VM needs egress) */
	int stop_on_preemption;       /* 1: instanceTerminationAction STOP (disk kept, billed);
	                               * 0: DELETE, spotdeck's choice */
};

/* A timestamp as GCE writes them, RFC 3339 with a fraction and an offset
 * ("2026-12-03T01:02:03.456-07:00", or "Z"), as seconds since the epoch;
 * -1 for anything else. */
double sd_gce_time_parse(const char *s);

/* The GPU model of an accelerator type as quota metrics and SKU
 * descriptions write it: nvidia-tesla-t4 -> T4, nvidia-a100-80gb -> A100,
 * into OUT (OUTLEN bytes). */
void sd_gce_accelerator_model(const char *accelerator, char *out, size_t outlen);

/* 1 when NAME is a valid GCE resource name (RFC 1035 label, 1..63). */
int sd_gce_name_ok(const char *name);

/* 1 when ZONE is a zone name as GCE writes them, REGION-Z: a resource
 * name with at least two dashes and one letter after the last
 * (us-central1-a, europe-west4-b). */
int sd_gce_zone_name_ok(const char *zone);

/* The region of a zone ("us-central1-a" -> "us-central1") into OUT. */
void sd_gce_zone_region(const char *zone, char *out, size_t outlen);

/* The instances.insert body: the Spot scheduling block (provisioningModel
 * SPOT, onHostMaintenance TERMINATE since GPUs cannot live-migrate,
 * automaticRestart false), a GPU, an autoDelete boot disk, the default
 * network, the metadata items and the run label.  Returns a malloc'd
 * NUL-terminated JSON text, or NULL with ERR. */
char *sd_gce_instance_json(const struct sd_gce_instance_spec *s, char *err, size_t errlen);

/* The last path segment of a resource URL ("https://.../zones/us-central1-a"
 * -> "us-central1-a") into OUT; the whole string when it has no '/'. */
void sd_gce_basename(const char *url, char *out, size_t outlen);

enum sd_gce_op_status { SD_GCE_OP_PENDING, SD_GCE_OP_RUNNING, SD_GCE_OP_DONE };

/* An Operation (zoneOperations resource). */
struct sd_gce_op {
	char name[128];
	char zone[64];                /* basename of "zone" */
	char type[64];                /* operationType: "insert", "delete",
	                               * "compute.instances.preempted", ... */
	char target[512];             /* targetLink */
	enum sd_gce_op_status status;
	/* DONE with an error: the first of error.errors[] */
	char error_code[96];          /* "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", "" when none */
	char error_message[512];
	long http_error;              /* httpErrorStatusCode, 0 when absent */
	double end_time;              /* endTime (seconds since the epoch), 0 when absent */
};
int sd_gce_op_parse(const char *json, size_t len, struct sd_gce_op *op, char *err, size_t errlen);

/* The synchronous error body {"error":{"code","message","errors":[{"reason",
 * "domain","message"}],"status"}}. */
struct sd_gce_error {
	long code;                    /* HTTP status in the body */
	char reason[64];              /* errors[0].reason: "quotaExceeded", "notFound", ... */
	char message[512];            /* error.message */
};
/* Returns 0 when JSON is such a body, -1 (ERR says why) otherwise. */
int sd_gce_error_parse(const char *json, size_t len, struct sd_gce_error *e, char *err, size_t errlen);

/* 1 when an answer of STATUS with BODY (LEN bytes) asks to be sent again
 * later although its status is not one that says so: 403 with the reason
 * rateLimitExceeded or userRateLimitExceeded, which Compute Engine answers
 * when the project's API rate is exceeded ("Use exponential backoff";
 * cloud.google.com/compute/docs/api-rate-limits).  0 otherwise.  The HTTP
 * layer's retry_answer (http.h). */
int sd_gce_retryable_answer(long status, const char *body, size_t len);

/* An instance, as much of it as the provider reads. */
struct sd_gce_instance {
	char name[64];
	char zone[64];
	char status[24];              /* PROVISIONING, STAGING, RUNNING, STOPPING, TERMINATED, ... */
	char network_ip[48];          /* networkInterfaces[0].networkIP, "" when none yet */
	char nat_ip[48];              /* networkInterfaces[0].accessConfigs[0].natIP, "" when none */
	char run[64];                 /* labels.spotdeck-run, "" when not ours */
	double started_at;            /* lastStartTimestamp (seconds since the epoch: when it
	                               * last became RUNNING, billing's start), 0 when absent */
	double stopped_at;            /* lastStopTimestamp (power-off, billing's end), 0 when absent */
	char machine_type[64];        /* basename of machineType */
	char self_link[512];          /* selfLink: the instance's URL, what an Operation's
	                               * targetLink names ("" when absent) */
};
int sd_gce_instance_parse(const char *json, size_t len, struct sd_gce_instance *in, char *err,
			  size_t errlen);

/* An instances.list answer: calls EACH for every item (in order), then
 * copies nextPageToken into NEXT (NEXTLEN bytes; "" on the last page).
 * An answer with no "items" is an empty page, as GCE sends one.  Returns
 * the number of items, or -1 with ERR (an item that does not parse fails
 * the page: the provider must not take a half-read list for the truth). */
int sd_gce_list_parse(const char *json, size_t len,
		      void (*each)(void *arg, const struct sd_gce_instance *in), void *arg,
		      char *next, size_t nextlen, char *err, size_t errlen);

/* What an error means for the next attempt (SkyPilot's map). */
enum sd_gce_block {
	SD_GCE_BLOCK_NONE,    /* not a capacity/quota error: report it as it is */
	SD_GCE_BLOCK_RETRY,   /* transient (rate limit, backend error): same place, later */
	SD_GCE_BLOCK_ZONE,    /* no capacity here: try another zone */
	SD_GCE_BLOCK_REGION,  /* a regional quota: try another region */
	SD_GCE_BLOCK_CLOUD,   /* global quota, permissions, network: this cloud is out */
};
/* HTTP_STATUS: the answer's status (0 for an error inside an Operation);
 * CODE: the Operation error's code or the error body's reason; MESSAGE:
 * its message (quota names and "not found or access is unauthorized" are
 * only in the text). */
enum sd_gce_block sd_gce_classify(long http_status, const char *code, const char *message);
/* "zone", "region", "cloud", "retry", "none" */
const char *sd_gce_block_name(enum sd_gce_block b);

/* The instances.list filter for a run's live machines, as SkyPilot writes
 * it: (labels.spotdeck-run = RUN) AND ((status = RUNNING) OR (status =
 * PROVISIONING) OR (status = STAGING)); ALL != 0 drops the status part.
 * Not URL-encoded.  -1 when it does not fit or RUN holds a character a
 * label value cannot ([a-z0-9_-] only). */
int sd_gce_run_filter(const char *run, int all, char *out, size_t outlen);

/* The zoneOperations.list filter that finds a preemption of the instance
 * at TARGET_LINK: operationType="compute.instances.preempted" AND
 * targetLink="...".  Not URL-encoded. */
int sd_gce_preempted_filter(const char *target_link, char *out, size_t outlen);

#endif
