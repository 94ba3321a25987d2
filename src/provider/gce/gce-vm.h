/* src/provider/gce/gce-vm.h - the life of a Spot VM on Compute Engine, as the
 * gce provider drives it, on the loop: create (insert, the Operation's
 * outcome, boot to RUNNING), delete, list a run's VMs, and tell a VM that
 * went away by preemption from one that crashed or was deleted by someone.
 *
 * How (cloud-apis.md sections 1.1-1.4):
 *   create  POST zones/Z/instances?requestId=UUID (the same UUID on every
 *           retry, so GCE makes it once), then POST operations/NAME/wait
 *           until DONE (it returns at DONE or near 2 minutes), then GET the
 *           instance every poll_s until RUNNING.  A synchronous error (403
 *           quota) and an error inside the Operation (the zone's stockout)
 *           both end it, with the scope sd_gce_classify gives.
 *   delete  DELETE zones/Z/instances/N?requestId=UUID, then the Operation
 *           until DONE; a 404 means it is already gone (success).
 *   list    GET zones/Z/instances?filter=(labels.spotdeck-run = RUN) for
 *           every zone, every page.
 *   fate    GET zones/Z/operations?filter=operationType=
 *           "compute.instances.preempted" AND targetLink="..." : one found
 *           means preempted; none, not yet (Google does not say when it
 *           appears: the provider asks again for a while) or a crash or
 *           someone else's delete.
 *
 * Every call ends with its callback exactly once, on the loop. */
#ifndef SD_PROVIDER_GCE_GCE_VM_H
#define SD_PROVIDER_GCE_GCE_VM_H

#include "src/provider/gce/gce-api.h"
#include "src/provider/gce/gce-client.h"

/* The outcome of a create or delete. */
struct sd_gce_vm_result {
	int ok;                       /* 1: RUNNING (create) / gone (delete) */
	struct sd_gce_instance vm;    /* create, ok: the instance as last read */
	char target[512];             /* the instance's URL (targetLink), "" if never known */
	enum sd_gce_block block;      /* !ok: what the error blocks */
	char code[96];                /* !ok: the error's code or reason ("ZONE_RESOURCE_POOL_EXHAUSTED",
	                               * "quotaExceeded", "http" for a transport error, "TERMINATED"
	                               * when it stopped while booting) */
	char message[512];            /* !ok: one line, the API's words */
	double seconds;               /* from the call to the end */
	char request_id[37];          /* the requestId it sent ("" if it never started) */
	double ended_at;              /* delete, ok: its Operation's endTime (the VM's power-off,
	                               * seconds since the epoch); 0 when not known (it was gone) */
	int absent;                   /* delete, ok: the API had no such instance (404 to the
	                               * delete itself); an insert still in flight may make it later */
};
typedef void (*sd_gce_vm_cb)(void *arg, const struct sd_gce_vm_result *r);

/* Creates SPEC's VM (SPEC is copied).  POLL_S: seconds between instance
 * GETs while it boots (0: 2 s).  0, or -1 with ERR (nothing started). */
int sd_gce_vm_create(struct sd_gce_client *c, const struct sd_gce_instance_spec *spec, double poll_s,
		     sd_gce_vm_cb cb, void *arg, char *err, size_t errlen);

/* Deletes instance NAME in ZONE. */
int sd_gce_vm_delete(struct sd_gce_client *c, const char *zone, const char *name, sd_gce_vm_cb cb,
		     void *arg, char *err, size_t errlen);

/* The same with REQUEST_ID (a UUID; NULL or "": a new one): a delete sent
 * again with the first one's requestId is answered with that first
 * Operation (nothing is deleted twice, and its endTime is learnt). */
int sd_gce_vm_delete_id(struct sd_gce_client *c, const char *zone, const char *name, const char *request_id,
			sd_gce_vm_cb cb, void *arg, char *err, size_t errlen);

/* A run's VMs in ZONES (NZONES): EACH per instance, then DONE once with
 * the count, or -1 and ERROR (a zone or page that failed: the list is then
 * incomplete and must not be taken for the truth). */
typedef void (*sd_gce_vm_list_done)(void *arg, int n, const char *error);
int sd_gce_vm_list(struct sd_gce_client *c, const char *const *zones, int nzones, const char *run,
		   void (*each)(void *arg, const struct sd_gce_instance *in), sd_gce_vm_list_done done,
		   void *arg, char *err, size_t errlen);

/* Why the instance at TARGET (its URL) in ZONE went away: DONE gets 1
 * (a compute.instances.preempted operation names it), 0 (none yet: a crash,
 * someone's delete, or a preemption GCE has not published yet), or -1 with ERROR (the question could not be asked);
 * with 1, ENDED_AT is that operation's endTime (the power-off, seconds
 * since the epoch; 0 when it has none). */
typedef void (*sd_gce_vm_fate_done)(void *arg, int preempted, double ended_at, const char *error);
int sd_gce_vm_fate(struct sd_gce_client *c, const char *zone, const char *target, sd_gce_vm_fate_done done,
		   void *arg, char *err, size_t errlen);

/* Ends, with ok 0 and code "cancelled", every create of C that waits
 * between two instance GETs (its callback runs now).  The others are in an
 * HTTP call, which sd_http_close ends.  Before closing the client's HTTP. */
void sd_gce_vm_cancel_waiting(struct sd_gce_client *c);

#endif
