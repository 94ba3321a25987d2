/* src/provider/gce/gce.c - the gce provider: Spot VMs on Compute Engine, each
 * running one worker that the controller starts and stops over OpenSSH.
 * The life below is cloud-vm.c's, the same for every cloud; this file is
 * Compute Engine's part of it (its struct sd_cloud_ops: instances.insert
 * and .delete, the list by label, the preempted operations, the Billing
 * Catalog's prices, the close's deletes).
 *
 * Offers: one per zone of the job's provider.zones, "gce/ZONE/MODEL/spot"
 * (MODEL from provider.accelerator: nvidia-tesla-t4 -> t4), all of the
 * same machine type and GPU.  Its price is provider.usd_per_hour when the
 * job quotes one, else the Spot price of the VM from the Cloud Billing
 * Catalog (gce-price.h: vCPUs, memory and GPUs, per region; the machine
 * type's vCPUs and memory from machineTypes.get), read at start or taken
 * from the cache when it was read less than provider.price_cache_s ago.  A
 * server acquired before the answer takes the price when it boots; a
 * price the catalog does not give stays unknown (the fleet bills nothing
 * it cannot price).
 *
 * How the worker reaches a VM: the VM's image has spotdeck-worker installed
 * (provider.worker, default "spotdeck-worker" on the remote PATH), and the
 * controller reaches the VM over ssh with the person's own key pair
 * (provider.identity, default ~/.ssh/google_compute_engine, the key
 * `gcloud compute ssh` makes): its public half goes into the instance's
 * ssh-keys metadata for provider.ssh_user, as gcloud does, and the guest
 * environment installs it.  The worker is then started exactly as on the
 * ssh provider's hosts, by the ssh transport (transport.h): the run's
 * token on ssh's stdin, never on a command line or in metadata, so it dies
 * with the ssh session's process and never lands on the VM's disk.  The worker watches the VM's own
 * metadata server for the preemption notice (the job's "notice": "gce").
 *
 * A server's life:
 *   acquire   instances.insert of VM sd-TAG-SERVER in the offer's zone
 *             (gce-vm.c: the requestId kept across retries, the Operation
 *             waited, the instance polled to RUNNING)
 *   PROVISIONED  once GCE calls it RUNNING (it boots);
 *   RUNNING   once its sshd runs `true` for us (the fleet then launches);
 *   STOCKOUT  the insert's Operation failed for capacity
 *             (ZONE_RESOURCE_POOL_EXHAUSTED[_WITH_DETAILS]): the zone is
 *             blocked for provider.block_s and the fleet's suggestion picks
 *             another; FAILED for any other error (a 403 quota blocks the
 *             region or the whole cloud, as sd_gce_classify says);
 *   REVOKED   the backstop list (every provider.poll_s) no longer shows
 *             the VM RUNNING, and its worker had reported the cloud's
 *             notice (sd_fleet_cloud_noticed) or a compute.instances.
 *             preempted operation names it; FAILED (SD_VM_GONE) when neither
 *             has happened provider.preempt_wait_s after the first pass
 *             that found it so (a crash, or someone else's delete): Google
 *             does not say when that operation appears, so it is asked
 *             for again at every pass.  A worker that ended, or a host ssh
 *             cannot reach, without a notice is judged the same way (the
 *             fleet's judge op, the transport's unreachable hook); a VM
 *             the list shows RUNNING then fails the server at once.  The
 *             event names what settled it, and the VM is deleted after;
 *   release   instances.delete (a 404 is success).  The VMs still not
 *             deleted when the run closes are deleted then, on a private
 *             loop, with the same requestIds (nothing is deleted twice).
 * Every HTTP attempt is journaled as a cloud_call event (the URL with any
 * credential redacted; never a header or body). */
#include "config.h"

#include <cJSON.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "src/base/errors.h"
#include "src/proto/job.h"
#include "src/provider/cloud-vm.h"
#include "src/provider/gce/gce-api.h"
#include "src/provider/gce/gce-client.h"
#include "src/provider/gce/gce-price.h"
#include "src/provider/gce/gce-vm.h"
#include "src/provider/http/http.h"
#include "src/provider/provider.h"
#include "src/provider/http/secret-file.h"
#include "src/provider/ssh/transport.h"

#define GCE_DEFAULT_IMAGE "projects/deeplearning-platform-release/global/images/family/common-cu124"
#define CLOSE_DELETE_WAIT_S 60.0
#define CLOSE_REDELETE_S 1.0        /* between the close's deletes of a VM whose insert it cut off */
#define CLOSE_REDELETE_FOR_S 15.0   /* and for how long */
/* How long a VM found stopped or gone, without a notice from its worker,
 * is looked at again (the zone's operations list, every backstop pass) for
 * the compute.instances.preempted operation before it is called a crash
 * (provider.preempt_wait_s).  Google does not document when that
 * operation appears (cloud-apis.md 1.4 only says a preemption leaves one):
 * two minutes is a judgment, several polls at the default poll_s, yet a
 * crashed VM's server is not held much longer than a replacement takes to
 * boot. */
#define PREEMPT_WAIT_S 120.0

struct gce_server {
	struct sd_cloud_vm v;          /* first: what every cloud's VM has (cloud-vm.h) */
	int asking_fate;
	double want_stop_since;        /* > 0: judged without its power-off time (a notice
	                                * settled it before the list or the operation gave
	                                * one): the operation's endTime is asked for since */
	char listed_status[24];        /* its status in the last list, "" when not listed */
	char target[512];              /* the instance's URL */
	double started_at, stopped_at; /* GCE's RUNNING and power-off times (epoch s), 0 unknown */
	const char *stop_source;       /* where stopped_at comes from */
	char delete_rid[37];           /* the requestId of its delete, once sent */
	int insert_cut;                /* at close: its insert had not answered (SD_VM_CREATING) */
	int absent;                    /* at close: the last delete found no such VM */
};

struct gce_provider {
	struct sd_cloud c;             /* first: what every cloud has (cloud-vm.h) */
	struct sd_gce_client *gce;
	/* settings */
	char *project, *credentials, *gcloud, *machine_type, *accelerator, *image, *api_root;
	char *billing_root;            /* NULL: the catalog is not read (see ask_prices) */
	double price_cache_s;
	int accelerator_count, disk_gb;
	double quoted_usd;
	char *ssh_keys;                /* "USER:ssh-ed25519 AAAA... spotdeck" */
	char gpu[16];                  /* "T4" */
	char price_source[160];
	struct sd_gce_price_sheet *sheet; /* while the catalog is read */
	int vcpus;                     /* the machine type's (machineTypes.get) */
	double memory_gib;
};

/* The gce provider's server list holds struct gce_server (vm_size). */
static struct gce_server *gce_vm(struct sd_cloud_vm *v)
{
	return (struct gce_server *)(void *)v;
}

static struct gce_provider *gce_of(struct sd_cloud *c)
{
	return (struct gce_provider *)(void *)c;
}

static struct gce_provider *prov(const struct gce_server *s)
{
	return (struct gce_provider *)(void *)s->v.cloud;
}

/* ---- settings ---- */

static const char *const setting_keys[] = {
	"project", "zones", "credentials", "gcloud", "machine_type", "accelerator", "accelerator_count", "image",
	"api_root", "billing_root", "disk_gb", "ssh_user", "identity", "worker", "ssh_port", "poll_s",
	"boot_timeout_s", "block_s", "usd_per_hour", "orphans", "price_cache_s", "preempt_wait_s",
	/* the transport's (transport.h) */
	"host_key_checking", "known_hosts", "connect_timeout", "ssh", NULL
};

static const char *const path_settings[] = { "credentials", "identity", "known_hosts", NULL };

static int gce_check(const cJSON *s, const char *file, char **why)
{
	if (sd_setting_check_known(s, setting_keys, "gce", file, why) < 0)
		return -1;
	static const char *const strs[] = { "project", "credentials", "gcloud", "machine_type", "accelerator",
		                             "image", "api_root", "billing_root", "ssh_user", "identity", "worker",
		                             "host_key_checking", "known_hosts", "ssh", NULL };
	for (int k = 0; strs[k]; k++)
		if (sd_setting_check_str(s, strs[k], file, why) < 0)
			return -1;
	if (!cJSON_GetObjectItemCaseSensitive(s, "project"))
		return sd_why(why, "%s: provider.project: missing (the Google Cloud project to create VMs in)", file);
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(s, "project");
	if (!sd_gce_name_ok(p->valuestring))
		return sd_why(why, "%s: provider.project: \"%.64s\" is not a project id (a-z, 0-9, -)", file,
		              p->valuestring);
	const cJSON *zs = cJSON_GetObjectItemCaseSensitive(s, "zones"), *z;
	if (!cJSON_IsArray(zs) || cJSON_GetArraySize(zs) < 1 || cJSON_GetArraySize(zs) > SD_CLOUD_MAX_ZONES)
		return sd_why(why, "%s: provider.zones: expected a list of 1 to %d zones", file, SD_CLOUD_MAX_ZONES);
	cJSON_ArrayForEach(z, zs) {
		if (!cJSON_IsString(z) || !sd_gce_zone_name_ok(z->valuestring))
			return sd_why(why, "%s: provider.zones: \"%.64s\" is not a zone name (REGION-ZONE, e.g. "
			              "us-central1-a)", file, cJSON_IsString(z) ? z->valuestring : "(not a string)");
		for (const cJSON *y = zs->child; y != z; y = y->next)
			if (!strcmp(y->valuestring, z->valuestring))
				return sd_why(why, "%s: provider.zones: %s is listed twice", file, z->valuestring);
	}
	static const char *const names[] = { "machine_type", "accelerator", NULL };
	for (int k = 0; names[k]; k++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, names[k]);
		if (v && !sd_gce_name_ok(v->valuestring))
			return sd_why(why, "%s: provider.%s: \"%.64s\" is not a resource name (a-z, 0-9, -)", file,
			              names[k], v->valuestring);
	}
	if (sd_setting_check_num(s, "accelerator_count", 1, 16, 1, file, why) < 0 ||
	    sd_setting_check_num(s, "disk_gb", 10, 65536, 1, file, why) < 0 ||
	    sd_setting_check_num(s, "price_cache_s", 0, 30 * 86400, 0, file, why) < 0)
		return -1;
	return sd_cloud_check_vm_settings(s, file, why);
}

/* The ssh-keys metadata line: the identity's public half (IDENTITY.pub),
 * one line "TYPE BASE64 [COMMENT]", for ssh_user.  The private half must
 * be readable by its owner alone (as ssh itself demands). */
static int load_ssh_key(struct gce_provider *p, const char *file, char **why)
{
	char *text = NULL, err[600];
	if (sd_ssh_public_key(p->c.identity, &text, err, sizeof err) < 0)
		return sd_why(why, "%s: provider.identity: %s (ssh-keygen -t ed25519 -f FILE makes a key pair; "
		              "gcloud compute ssh makes %s)", file, err, "~/.ssh/google_compute_engine");
	size_t n = strlen(p->c.ssh_user) + strlen(text) + 2;
	p->ssh_keys = sd_malloc(n);
	snprintf(p->ssh_keys, n, "%s:%s", p->c.ssh_user, text);
	free(text);
	return 0;
}

/* ---- journal ---- */

static void on_http_attempt(void *arg, const struct sd_http_attempt *a)
{
	struct gce_provider *p = arg;
	if (!p->c.closing)
		sd_cloud_journal_attempt(p->c.fleet, "gce", a);
}

/* ---- servers ---- */

/* s's delete succeeded: its power-off time, if the list did not give it,
 * is the delete's endTime, and it is billed. */
static void deleted(struct gce_server *s, const struct sd_gce_vm_result *r)
{
	sd_cloud_deleted(&prov(s)->c, &s->v, r->ended_at, "the delete operation's endTime");
}

static void on_deleted(void *arg, const struct sd_gce_vm_result *r)
{
	struct gce_server *s = arg;
	struct gce_provider *p = prov(s);
	if (r->ok) {
		deleted(s, r);
	} else if (p->c.closing) {
		/* Cut short by close: sent again there with this requestId. */
		memcpy(s->delete_rid, r->request_id, sizeof s->delete_rid);
	} else {
		/* Left for the end of the run: close() deletes what is not gone. */
		sd_cloud_delete_failed(&p->c, &s->v, r->message);
	}
}

/* The delete of S's VM (sd_cloud_delete's). */
static int gce_remove(struct sd_cloud *c, struct sd_cloud_vm *v, char *err, size_t errlen)
{
	struct gce_provider *p = gce_of(c);
	struct gce_server *s = gce_vm(v);
	return sd_gce_vm_delete(p->gce, p->c.zones[s->v.zone], s->v.name, on_deleted, s, err, errlen) < 0 ? -1 : 0;
}

static void block(struct gce_provider *p, int zone, enum sd_gce_block b)
{
	double until = sd_fleet_now(p->c.fleet) + p->c.block_s;
	char region[64], r2[64];
	sd_gce_zone_region(p->c.zones[zone], region, sizeof region);
	switch (b) {
	case SD_GCE_BLOCK_ZONE:
		p->c.zone_blocked_until[zone] = until;
		break;
	case SD_GCE_BLOCK_REGION:
		for (int i = 0; i < p->c.nzones; i++) {
			sd_gce_zone_region(p->c.zones[i], r2, sizeof r2);
			if (!strcmp(r2, region))
				p->c.zone_blocked_until[i] = until;
		}
		break;
	case SD_GCE_BLOCK_CLOUD:
		p->c.cloud_blocked_until = until;
		break;
	default:
		break;
	}
}

static void on_created(void *arg, const struct sd_gce_vm_result *r)
{
	struct gce_server *s = arg;
	struct gce_provider *p = prov(s);
	if (p->c.closing) {
		/* Cancelled by close, or done just then: the VM may exist, and
		 * close deletes whatever is not known gone (a 404 is fine). */
		if (r->ok)
			s->v.st = SD_VM_RUNNING;
		return;
	}
	if (r->target[0])
		snprintf(s->target, sizeof s->target, "%s", r->target);
	if (!r->ok) {
		s->v.st = SD_VM_GONE;
		block(p, s->v.zone, r->block);
		int capacity = r->block == SD_GCE_BLOCK_ZONE && strncmp(r->code, "ZONE_RESOURCE_POOL_EXHAUSTED", 28) == 0;
		if (!s->v.released) {
			char msg[700];
			snprintf(msg, sizeof msg, "%s%s%s", r->message, r->block != SD_GCE_BLOCK_NONE ? "; blocked: " : "",
			         r->block != SD_GCE_BLOCK_NONE ? sd_gce_block_name(r->block) : "");
			sd_cloud_vm_report(&p->c, &s->v, capacity ? SD_PROVIDER_STOCKOUT : SD_PROVIDER_FAILED, r->code, msg);
		}
		/* Only GCE's own refusal (a stockout or quota inside the insert's
		 * Operation or its answer) says no VM was made.  After anything
		 * else (an answer lost, retries spent, a VM that stopped while it
		 * booted) one may exist, billed: it is deleted (a 404 is fine). */
		int refused = r->block == SD_GCE_BLOCK_ZONE || r->block == SD_GCE_BLOCK_REGION ||
		              r->block == SD_GCE_BLOCK_CLOUD;
		if (!refused || !strcmp(r->code, "TERMINATED") || !strcmp(r->code, "NOT_FOUND")) {
			s->v.st = SD_VM_RUNNING;
			sd_cloud_delete(&p->c, &s->v);
		}
		return;
	}
	s->v.st = SD_VM_WAIT_SSH;
	s->v.started_at = r->vm.started_at;
	if (s->v.released) {
		sd_cloud_delete(&p->c, &s->v);
		return;
	}
	const char *addr = r->vm.nat_ip[0] ? r->vm.nat_ip : r->vm.network_ip;
	if (!addr[0]) {
		s->v.st = SD_VM_RUNNING;
		sd_cloud_vm_report(&p->c, &s->v, SD_PROVIDER_FAILED, "NO_ADDRESS", "the VM runs but has no IP address");
		sd_cloud_delete(&p->c, &s->v);
		return;
	}
	sd_cloud_boot_done(&p->c, &s->v, addr, r->vm.network_ip[0] ? r->vm.network_ip : addr);
}

/* S's VM runs at ADDR (COMM_ADDR: where other workers reach it): it is
 * PROVISIONED, and RUNNING once its sshd lets us in. */
/* ---- the backstop: the run's VMs listed every poll_s ---- */

/* The verdict on S, whose VM stopped or went: journaled first (REVOKED or
 * FAILED, with what settled it), and only then is the VM deleted, so that
 * nothing about it is lost if the controller dies in between.  A
 * preempted Spot VM with action DELETE goes by itself; one that stopped
 * (or crashed) is deleted so that it bills no disk (a 404 is success). */
static void verdict(struct gce_provider *p, struct gce_server *s, enum sd_provider_event_kind kind,
                    const char *settled_by, const char *code, const char *message)
{
	if (!(s->v.stopped_at > 0) && kind == SD_PROVIDER_REVOKED)
		s->want_stop_since = sd_fleet_now(p->c.fleet);
	sd_cloud_verdict(&p->c, &s->v, kind, settled_by, code, message);
}

/* What the run knows of S's VM, which the list shows stopped (STATUS) or
 * not at all: a notice its worker reported settles it as a preemption. */
static int judged_by_notice(struct gce_provider *p, struct gce_server *s)
{
	const char *source;
	if (!sd_fleet_cloud_noticed(p->c.fleet, s->v.id, &source))
		return 0;
	char msg[300];
	snprintf(msg, sizeof msg, "VM %s is %s; its worker had reported the cloud's preemption notice%s%s", s->v.name,
	         s->listed_status[0] ? s->listed_status : "gone", source[0] ? " from " : "", source);
	verdict(p, s, SD_PROVIDER_REVOKED, "notice", NULL, msg);
	return 1;
}

static void on_fate(void *arg, int preempted, double ended_at, const char *error)
{
	struct gce_server *s = arg;
	struct gce_provider *p = prov(s);
	s->asking_fate = 0;
	if (p->c.closing || s->v.released || s->v.reported_end)
		return;
	if (preempted < 0) {
		(void)error;   /* asked again on the next pass (the bound still runs) */
		return;
	}
	if (preempted && ended_at > 0 && !(s->v.stopped_at > 0)) {
		s->v.stopped_at = ended_at;
		s->v.stop_source = "the compute.instances.preempted operation's endTime";
	}
	if (preempted) {
		char msg[300];
		snprintf(msg, sizeof msg, "a compute.instances.preempted operation names VM %s", s->v.name);
		verdict(p, s, SD_PROVIDER_REVOKED, "operation", NULL, msg);
		return;
	}
	if (judged_by_notice(p, s))
		return;   /* the notice arrived while the operations were asked */
	/* No operation names it yet: Google does not say how soon one
	 * appears, so the zone's operations are asked again on every pass
	 * until preempt_wait_s has passed since the VM was first seen so. */
	double since;
	if (!sd_cloud_review_due(&p->c, &s->v, &since))
		return;
	char msg[700];
	snprintf(msg, sizeof msg, "VM %s is %s, and for %.0f s neither a compute.instances.preempted operation nor a "
	         "notice from its worker said it was preempted: it crashed or someone deleted it%s%s", s->v.name,
	         s->listed_status[0] ? s->listed_status : "gone", since,
	         s->v.suspect_msg[0] ? "; " : "", s->v.suspect_msg);
	verdict(p, s, SD_PROVIDER_FAILED, "timeout", "VM_GONE", msg);
}

static void on_listed_vm(void *arg, const struct sd_gce_instance *in)
{
	struct gce_provider *p = arg;
	for (struct gce_server *s = gce_vm(p->c.servers); s; s = gce_vm(s->v.next)) {
		if (strcmp(s->v.name, in->name))
			continue;
		snprintf(s->listed_status, sizeof s->listed_status, "%s", in->status);
		if (!strcmp(in->status, "RUNNING")) {
			s->v.missing = 0;
			s->v.reviewing = 0;   /* running again: whatever stopped it is over */
		} else if (in->stopped_at > 0 && !(s->v.stopped_at > 0)) {
			s->v.stopped_at = in->stopped_at;   /* powered off: preempted, crashed, stopped */
			s->v.stop_source = "lastStopTimestamp";
		}
	}
}

static void on_listed(void *arg, int n, const char *error)
{
	struct gce_provider *p = arg;
	(void)n;
	p->c.listing = 0;
	if (p->c.closing || error)
		return;   /* an incomplete list is never taken for the truth */
	for (struct gce_server *s = gce_vm(p->c.servers); s; s = gce_vm(s->v.next)) {
		if (s->v.st != SD_VM_RUNNING && s->v.st != SD_VM_WAIT_SSH)
			continue;
		if (s->v.released || s->v.reported_end || s->asking_fate || !s->target[0])
			continue;
		if (!s->v.missing) {
			/* The VM runs: a worker that ended there, or a host that
			 * stopped answering ssh, is the server's failure. */
			if (s->v.suspect && s->v.suspect_listing)
				verdict(p, s, SD_PROVIDER_FAILED, NULL, s->v.suspect_code, s->v.suspect_msg);
			continue;
		}
		if (judged_by_notice(p, s))
			continue;
		char err[256];
		s->asking_fate = 1;
		if (sd_gce_vm_fate(p->gce, p->c.zones[s->v.zone], s->target, on_fate, s, err, sizeof err) < 0)
			s->asking_fate = 0;
	}
}

static void gce_list(struct sd_cloud *c)
{
	struct gce_provider *p = gce_of(c);
	if (p->c.closing || p->c.listing)
		return;
	int any = 0;
	for (struct gce_server *s = gce_vm(p->c.servers); s; s = gce_vm(s->v.next))
		if ((s->v.st == SD_VM_RUNNING || s->v.st == SD_VM_WAIT_SSH) && !s->v.released && !s->v.reported_end) {
			s->v.missing = 1;   /* until the list shows it RUNNING */
			s->listed_status[0] = '\0';
			s->v.suspect_listing = s->v.suspect;
			any = 1;
		}
	if (!any)
		return;
	char err[256];
	p->c.listing = 1;
	if (sd_gce_vm_list(p->gce, (const char *const *)p->c.zones, p->c.nzones, p->c.tag, on_listed_vm, on_listed, p, err,
	                   sizeof err) < 0)
		p->c.listing = 0;
}

/* The power-off time of S, revoked on its worker's notice before anything
 * gave one, from the compute.instances.preempted operation's endTime once
 * it is published: what GCE bills ends there. */
static void on_stop_time(void *arg, int preempted, double ended_at, const char *error)
{
	struct gce_server *s = arg;
	(void)error;
	s->asking_fate = 0;
	if (prov(s)->c.closing || !(s->want_stop_since > 0))
		return;
	if (s->v.stopped_at > 0 || (preempted > 0 && ended_at > 0)) {
		if (!(s->v.stopped_at > 0)) {
			s->v.stopped_at = ended_at;
			s->v.stop_source = "the compute.instances.preempted operation's endTime";
		}
		s->want_stop_since = 0;
		if (s->v.st == SD_VM_GONE)
			sd_cloud_bill(&prov(s)->c, &s->v);   /* else when its delete ends */
	}
}

static void on_backstop(uv_timer_t *t)
{
	struct gce_provider *p = t->data;
	gce_list(&p->c);
	/* Asked at every pass for preempt_wait_s; after that the fleet's
	 * estimate of its cost stands. */
	double now = sd_fleet_now(p->c.fleet);
	for (struct gce_server *s = gce_vm(p->c.servers); s && !p->c.closing; s = gce_vm(s->v.next)) {
		if (!(s->want_stop_since > 0) || s->asking_fate || s->v.billed || !s->target[0])
			continue;
		if (now - s->want_stop_since > p->c.preempt_wait_s) {
			s->want_stop_since = 0;
			continue;
		}
		char err[256];
		s->asking_fate = 1;
		if (sd_gce_vm_fate(p->gce, p->c.zones[s->v.zone], s->target, on_stop_time, s, err, sizeof err) < 0)
			s->asking_fate = 0;
	}
}

/* ---- start-up reconciliation: the run's VMs a previous controller left ---- */

/* A VM carrying this run's label that no server of this controller owns:
 * a previous controller of the run (killed, or its machine lost) left it.
 * With orphans "adopt" or "ask" a RUNNING one with an address is held for
 * a server of this run (sd_cloud_settle); any other is deleted, or with
 * "keep" only journaled. */
static void on_reconcile_vm(void *arg, const struct sd_gce_instance *in)
{
	struct gce_provider *p = arg;
	if (p->c.closing || p->c.no_run_dir)
		return;
	for (const struct gce_server *s = gce_vm(p->c.servers); s; s = gce_vm(s->v.next))
		if (!strcmp(s->v.name, in->name))
			return;
	int zi = sd_cloud_zone_index(&p->c, in->zone);
	int hold = zi >= 0 && !strcmp(in->status, "RUNNING") && (in->nat_ip[0] || in->network_ip[0]) &&
	           sd_cloud_orphans_hold(&p->c.orph);
	int del = !hold && p->c.orph.what != SD_ORPHANS_KEEP && zi >= 0;
	if (!hold)
		sd_cloud_journal_orphan(p->c.fleet, "gce", in->name, in->zone, in->status, del ? "delete" : "keep", NULL);
	if (!hold && !del)
		return;
	struct gce_server *s = gce_vm(sd_cloud_vm_new(&p->c, NULL, 0));
	snprintf(s->v.name, sizeof s->v.name, "%s", in->name);
	s->v.zone = zi;
	if (hold) {
		s->v.st = SD_VM_HELD;
		snprintf(s->target, sizeof s->target, "%s", in->self_link);
		snprintf(s->v.addr, sizeof s->v.addr, "%s", in->nat_ip[0] ? in->nat_ip : in->network_ip);
		snprintf(s->v.comm_addr, sizeof s->v.comm_addr, "%s", in->network_ip[0] ? in->network_ip : s->v.addr);
		snprintf(s->v.status, sizeof s->v.status, "%s", in->status);
		if (p->c.orph.what == SD_ORPHANS_ASK)
			sd_cloud_journal_orphan(p->c.fleet, "gce", in->name, in->zone, in->status, "ask", NULL);
		return;
	}
	s->v.released = 1;
	s->v.st = SD_VM_RUNNING;
	sd_cloud_delete(&p->c, &s->v);
}

static int gce_insert(struct sd_cloud *c, struct sd_cloud_vm *v, char *err, size_t errlen);

/* ---- prices: the Cloud Billing Catalog (gce-price.h) ---- */

static void prices_failed(struct gce_provider *p, const char *error)
{
	free(p->sheet);
	p->sheet = NULL;
	snprintf(p->price_source, sizeof p->price_source, "unknown: the Billing Catalog: %.120s", error);
	sd_cloud_journal_error(p->c.fleet, "gce", "no Spot prices from the Cloud Billing Catalog: servers are not "
	                       "priced (provider.usd_per_hour quotes one)", error);
}

/* Every zone of REGION costs USD an hour, SUM in words; a price event
 * per offer says so. */
static void set_region_price(struct gce_provider *p, const char *region, double usd, const char *sum,
                             const char *source)
{
	for (int zi = 0; zi < p->c.nzones; zi++) {
		char rg[64];
		sd_gce_zone_region(p->c.zones[zi], rg, sizeof rg);
		if (strcmp(rg, region) != 0)
			continue;
		cJSON *ev = cJSON_CreateObject();
		cJSON_AddStringToObject(ev, "sum", sum);
		cJSON_AddStringToObject(ev, "source", source);
		sd_cloud_set_price(&p->c.cc, p->c.fleet, zi, usd, ev);
	}
}

static void price_key(const struct gce_provider *p, const char *region, struct sd_gce_price_key *k)
{
	*k = (struct sd_gce_price_key){ .billing_root = p->billing_root, .machine_type = p->machine_type,
		                        .accelerator = p->accelerator, .gpus = p->accelerator_count,
		                        .region = region };
}

static void ask_sku_page(struct gce_provider *p, const char *token);

static void on_sku_page(void *arg, const struct sd_http_response *r)
{
	struct gce_provider *p = arg;
	char err[256], next[1024];
	if (r->cancelled || p->c.closing || !p->sheet)
		return;
	if (r->status != 200) {
		if (r->status)
			snprintf(err, sizeof err, "services.skus: HTTP %ld", r->status);
		else
			snprintf(err, sizeof err, "services.skus: %.200s", r->error);
		prices_failed(p, err);
		return;
	}
	struct sd_gce_price_sheet *sh = p->sheet;
	if (sd_gce_price_page(sh, r->body, r->body_len, next, sizeof next, err, sizeof err) < 0) {
		prices_failed(p, err);
		return;
	}
	if (!sd_gce_price_complete(sh, -1) && next[0] && sh->pages < SD_GCE_PRICE_MAX_PAGES) {
		ask_sku_page(p, next);
		return;
	}
	/* The catalog is read: price each region it had every rate for. */
	int pages = sh->pages, skus = sh->skus;
	char family[16];
	snprintf(family, sizeof family, "%s", sh->family);
	char path[4200], cerr[300], missing[400] = "";
	int have_path = sd_gce_price_cache_path(path, sizeof path) == 0;
	double now = (double)time(NULL);
	for (int k = 0; k < sh->nregions; k++) {
		char sum[200];
		double usd = sd_gce_price_vm(sh, k, p->vcpus, p->memory_gib, p->accelerator_count, sum, sizeof sum);
		if (isnan(usd)) {
			size_t n = strlen(missing);
			snprintf(missing + n, sizeof missing - n, "%s%s", n ? ", " : "", sh->regions[k]);
			continue;
		}
		set_region_price(p, sh->regions[k], usd, sum, "the Cloud Billing Catalog, read at start");
		struct sd_gce_price_key key;
		price_key(p, sh->regions[k], &key);
		if (have_path && p->price_cache_s > 0 &&
		    sd_gce_price_cache_put(path, &key, usd, sum, now, cerr, sizeof cerr) < 0) {
			sd_cloud_journal_error(p->c.fleet, "gce", "the prices cache was not written (the next run "
			                       "reads the catalog again)", cerr);
			have_path = 0;
		}
	}
	free(p->sheet);
	p->sheet = NULL;
	if (missing[0]) {
		/* The regions priced keep their prices; these stay unknown. */
		snprintf(err, sizeof err, "no Spot %s core, RAM%s%s SKU for %s in %d pages (%d SKUs)", family,
		         p->accelerator ? " or " : "", p->accelerator ? p->accelerator : "", missing, pages, skus);
		snprintf(p->price_source, sizeof p->price_source, "gce: the Cloud Billing Catalog's Spot SKUs; none "
		         "for %.80s", missing);
		sd_cloud_journal_error(p->c.fleet, "gce", "servers in these regions are not priced", err);
	}
}

static void ask_sku_page(struct gce_provider *p, const char *token)
{
	char url[4096], err[256];
	if (sd_gce_price_page_url(p->billing_root, token, url, sizeof url) < 0) {
		prices_failed(p, "services.skus: the page token does not fit in a URL");
		return;
	}
	if (sd_gce_call(p->gce, "gce billing skus", "GET", url, NULL, 1, on_sku_page, p, err, sizeof err) < 0)
		prices_failed(p, err);
}

/* The machine type's vCPUs and memory, then the regions the cache does
 * not price, from the catalog. */
static void on_machine_type(void *arg, const struct sd_http_response *r)
{
	struct gce_provider *p = arg;
	char err[256];
	if (r->cancelled || p->c.closing)
		return;
	cJSON *j = r->status == 200 ? cJSON_ParseWithLength(r->body, r->body_len) : NULL;
	const cJSON *cpus = cJSON_GetObjectItemCaseSensitive(j, "guestCpus");
	const cJSON *mb = cJSON_GetObjectItemCaseSensitive(j, "memoryMb");
	if (!cJSON_IsNumber(cpus) || !cJSON_IsNumber(mb) || cpus->valuedouble < 1 || mb->valuedouble <= 0) {
		if (r->status == 200)
			snprintf(err, sizeof err, "machineTypes.get %s: no guestCpus or memoryMb", p->machine_type);
		else if (r->status)
			snprintf(err, sizeof err, "machineTypes.get %s: HTTP %ld", p->machine_type, r->status);
		else
			snprintf(err, sizeof err, "machineTypes.get %s: %.160s", p->machine_type, r->error);
		cJSON_Delete(j);
		prices_failed(p, err);
		return;
	}
	p->vcpus = (int)cpus->valuedouble;
	p->memory_gib = mb->valuedouble / 1024;   /* GCE's memoryMb is MiB; the RAM SKU's unit GiB */
	cJSON_Delete(j);
	ask_sku_page(p, NULL);
}

static void ask_prices(struct gce_provider *p)
{
	if (!p->billing_root)
		return;
	const char *regions[SD_CLOUD_MAX_ZONES];
	char rg[SD_CLOUD_MAX_ZONES][64];
	int n = 0, cached = 0;
	for (int zi = 0; zi < p->c.nzones; zi++) {
		sd_gce_zone_region(p->c.zones[zi], rg[n], sizeof rg[n]);
		int dup = 0;
		for (int k = 0; k < n; k++)
			dup |= !strcmp(rg[k], rg[n]);
		if (!dup) {
			regions[n] = rg[n];
			n++;
		}
	}
	/* What the cache holds, fresh, is taken; the rest is read. */
	char path[4200];
	const char *left[SD_CLOUD_MAX_ZONES];
	int nleft = 0;
	double now = (double)time(NULL), oldest = now;
	for (int k = 0; k < n; k++) {
		struct sd_gce_price_key key;
		price_key(p, regions[k], &key);
		double usd, at;
		char sum[200];
		if (p->price_cache_s > 0 && sd_gce_price_cache_path(path, sizeof path) == 0 &&
		    sd_gce_price_cache_get(path, &key, now, p->price_cache_s, &usd, sum, sizeof sum, &at) == 0) {
			char src[4400];
			snprintf(src, sizeof src, "the Cloud Billing Catalog, cached %.0f s ago (%s)", now - at, path);
			set_region_price(p, regions[k], usd, sum, src);
			oldest = fmin(oldest, at);
			cached++;
		} else {
			left[nleft++] = regions[k];
		}
	}
	if (cached)
		snprintf(p->price_source, sizeof p->price_source, "gce: the Cloud Billing Catalog's Spot SKUs (vCPUs, "
		         "memory, GPUs)%s, cached up to %.0f min ago", nleft ? " read at start or" : "",
		         (now - oldest) / 60);
	if (!nleft)
		return;
	p->sheet = sd_calloc(1, sizeof *p->sheet);
	sd_gce_price_init(p->sheet, p->machine_type, p->accelerator, left, nleft);
	char sub[200], url[1200], err[256];
	snprintf(sub, sizeof sub, "zones/%s/machineTypes/%s", p->c.zones[0], p->machine_type);
	if (sd_gce_url(p->gce, sub, url, sizeof url) < 0)
		prices_failed(p, "machineTypes.get: the URL does not fit");
	else if (sd_gce_call(p->gce, "gce machineTypes.get", "GET", url, NULL, 1, on_machine_type, p, err,
	                     sizeof err) < 0)
		prices_failed(p, err);
}

/* ---- catalog ---- */

static void build_catalog(struct gce_provider *p)
{
	sd_gce_accelerator_model(p->accelerator, p->gpu, sizeof p->gpu);
	if (isnan(p->quoted_usd) && !p->billing_root)
		snprintf(p->price_source, sizeof p->price_source, "unknown: no provider.usd_per_hour, and "
		         "provider.api_root is not Google's, so no Billing Catalog (provider.billing_root)");
	else if (isnan(p->quoted_usd))
		snprintf(p->price_source, sizeof p->price_source, "gce: the Cloud Billing Catalog's Spot SKUs "
		         "(vCPUs, memory, GPUs), read at start");
	else
		snprintf(p->price_source, sizeof p->price_source, "quoted: the job's provider.usd_per_hour");
	struct sd_cloud_offer_spec spec = {
		.provider = "gce",
		.region = NULL,   /* each zone's own */
		.machine_type = p->machine_type,
		.gpu = p->gpu,
		.gpu_count = p->accelerator_count,
		.usd_per_hour = p->quoted_usd,
		.price_source = p->price_source,
		.notice_seconds = 30,
		.notice_source = "documented: Spot VMs get 30 s (ACPI G2 soft off)",
		.capacity_source = "unknown: GCE says when a zone runs out",
		.billing_source = "documented: per second, 1-minute minimum",
		.catalog_file = p->project,   /* the cockpit: "real market: gce PROJECT" */
		.catalog_name = "gce spot VMs",
	};
	sd_cloud_catalog_build(&p->c.cc, &spec, p->c.zones, p->c.nzones);
}

/* ---- the operations ---- */

/* operations.wait answers at DONE or after about 2 minutes: an attempt
 * may take that long. */
static const struct sd_http_policy http_policy = { .timeout_s = 150 };

static const struct sd_cloud_ops gce_cloud;

static int gce_create(struct sd_provider **out, const struct sd_provider_env *env, char **why)
{
	*out = NULL;
	const cJSON *s = env->settings;
	const char *file = env->settings_file ? env->settings_file : "job";
	struct gce_provider *p = sd_calloc(1, sizeof *p);
	sd_cloud_init(&p->c, &gce_cloud, env, PREEMPT_WAIT_S);
	p->project = sd_setting_str(s, "project", NULL);
	const char *envcred = getenv("GOOGLE_APPLICATION_CREDENTIALS");
	p->credentials = sd_expand_home(sd_setting_str(s, "credentials", envcred && *envcred ? envcred : NULL));
	p->gcloud = sd_setting_str(s, "gcloud", "gcloud");
	p->machine_type = sd_setting_str(s, "machine_type", "n1-standard-8");
	p->accelerator = sd_setting_str(s, "accelerator", "nvidia-tesla-t4");
	p->image = sd_setting_str(s, "image", GCE_DEFAULT_IMAGE);
	p->api_root = sd_setting_str(s, "api_root", SD_GCE_COMPUTE_ROOT);
	p->accelerator_count = (int)sd_setting_num(s, "accelerator_count", 1);
	p->disk_gb = (int)sd_setting_num(s, "disk_gb", 50);
	p->quoted_usd = sd_setting_num(s, "usd_per_hour", NAN);
	p->price_cache_s = sd_setting_num(s, "price_cache_s", 86400);
	/* The real catalog goes with the real Compute Engine only: a fake's
	 * api_root (a test) names its own catalog, or none is read. */
	p->billing_root = sd_setting_str(s, "billing_root", strcmp(p->api_root, SD_GCE_COMPUTE_ROOT) ? NULL
	                                                     : SD_GCE_BILLING_ROOT);
	if (!p->project || p->c.nzones == 0) {
		sd_cloud_free((struct sd_provider *)(void *)p);
		return sd_why(why, "%s: provider.project and provider.zones are required", file);
	}
	if (load_ssh_key(p, file, why) < 0) {
		sd_cloud_free((struct sd_provider *)(void *)p);
		return -1;
	}
	if (sd_cloud_run_label(env->run_dir, "gce-label", p->c.tag, &p->c.no_run_dir, why) < 0) {
		sd_cloud_free((struct sd_provider *)(void *)p);
		return -1;
	}
	p->c.orph.what = sd_cloud_orphans(env, s);
	/* Workers on VMs that dial the controller themselves (--advertise)
	 * must reach it: loopback only serves a fake cloud on this machine
	 * (tests/fake-cloud/gce.py --vm-sshd).  Without --advertise their
	 * links come through the transport's ssh connections. */
	if (sd_cloud_check_advertise(&p->c, env, sd_url_is_loopback(p->api_root), file, why) < 0) {
		sd_cloud_free((struct sd_provider *)(void *)p);
		return -1;
	}
	char err[512];
	p->c.http = sd_http_new(p->c.loop, &http_policy, on_http_attempt, p, err, sizeof err);
	if (!p->c.http) {
		sd_cloud_free((struct sd_provider *)(void *)p);
		return sd_why(why, "gce: %s", err);
	}
	struct sd_gce_client_config cfg = { .project = p->project, .compute_root = p->api_root,
		                            .key_file = p->credentials };
	if (p->credentials && !strcmp(p->credentials, "gcloud")) {
		cfg.key_file = NULL;
		cfg.gcloud = p->gcloud;
	}
	p->gce = sd_gce_client_new(p->c.http, &cfg, err, sizeof err);
	if (!p->gce) {
		sd_cloud_free((struct sd_provider *)(void *)p);
		return sd_why(why, "%s: provider.credentials: %s", file, err);
	}
	if (sd_cloud_open_transport(&p->c, env, why) < 0) {
		sd_cloud_free((struct sd_provider *)(void *)p);
		return -1;
	}
	build_catalog(p);
	sd_cloud_catalog_model_journaled(&p->c.cc, env->catalog_path, p->c.fleet, "gce");
	if (isnan(p->quoted_usd))
		ask_prices(p);
	sd_cloud_start(&p->c, on_backstop);
	*out = (struct sd_provider *)(void *)p;
	return 0;
}

/* Inserts S's VM, sd-TAG-SERVER in its zone. */
static int gce_insert(struct sd_cloud *c, struct sd_cloud_vm *v, char *err, size_t errlen)
{
	struct gce_provider *p = gce_of(c);
	struct gce_server *s = gce_vm(v);
	int zi = s->v.zone;
	/* sd-TAG-SERVER: lower case, digits and '-' (server ids are s1, s2, ...). */
	snprintf(s->v.name, sizeof s->v.name, "sd-%s-%s", p->c.tag, s->v.id);
	for (char *ch = s->v.name; *ch; ch++)
		*ch = (char)tolower((unsigned char)*ch);
	s->v.st = SD_VM_CREATING;
	struct sd_gce_instance_spec spec = {
		.project = p->project,
		.zone = p->c.zones[zi],
		.name = s->v.name,
		.machine_type = p->machine_type,
		.accelerator = p->accelerator,
		.accelerator_count = p->accelerator_count,
		.image = p->image,
		.disk_gb = p->disk_gb,
		.ssh_keys = p->ssh_keys,
		.run = p->c.tag,
		.external_ip = 1,
		.stop_on_preemption = 0,
	};
	return sd_gce_vm_create(p->gce, &spec, fmin(2.0, p->c.poll_s), on_created, s, err, errlen);
}

/* ---- the end: every VM not known gone is deleted on a private loop ---- */

static void on_final_deleted(void *arg, const struct sd_gce_vm_result *r)
{
	struct gce_server *s = arg;
	prov(s)->c.final_pending--;
	/* No such VM, but its insert was cut off by the close: GCE takes an
	 * insert it has received to the end, so the VM may appear yet. */
	if (r->ok && r->absent && s->insert_cut) {
		s->absent = 1;
		return;
	}
	if (r->ok)
		deleted(s, r);
}

static void gce_sweep(struct sd_cloud *c)
{
	struct gce_provider *p = gce_of(c);
	int left = 0;
	for (struct gce_server *s = gce_vm(p->c.servers); s; s = gce_vm(s->v.next)) {
		if (s->v.st == SD_VM_WAITING)
			s->v.st = SD_VM_GONE;   /* never made */
		left += s->v.st != SD_VM_GONE;
	}
	if (!left)
		return;
	uv_loop_t loop;
	if (uv_loop_init(&loop) < 0)
		return;
	char err[512];
	struct sd_http *http = sd_http_new(&loop, &http_policy, NULL, NULL, err, sizeof err);
	struct sd_gce_client_config cfg = { .project = p->project, .compute_root = p->api_root,
		                            .key_file = p->credentials };
	if (p->credentials && !strcmp(p->credentials, "gcloud")) {
		cfg.key_file = NULL;
		cfg.gcloud = p->gcloud;
	}
	struct sd_gce_client *gce = http ? sd_gce_client_new(http, &cfg, err, sizeof err) : NULL;
	p->c.final_pending = 0;
	for (struct gce_server *s = gce_vm(p->c.servers); s; s = gce_vm(s->v.next))
		s->insert_cut = s->v.st == SD_VM_CREATING;
	/* A VM whose insert the close cut off is deleted again, every
	 * CLOSE_REDELETE_S for CLOSE_REDELETE_FOR_S, while GCE says there is
	 * no such VM (each delete keeps its own requestId). */
	uint64_t t0 = uv_now(&loop);
	for (int round = 0; gce; round++) {
		int cut = 0;
		for (struct gce_server *s = gce_vm(p->c.servers); s; s = gce_vm(s->v.next))
			cut += s->insert_cut && s->v.st != SD_VM_GONE;
		if (round) {
			if (!cut || uv_now(&loop) - t0 > (uint64_t)(CLOSE_REDELETE_FOR_S * 1000))
				break;
			int never = 1;   /* a pause on this loop: nothing counts it done */
			sd_cloud_run_until(&loop, &never, CLOSE_REDELETE_S);
		}
		for (struct gce_server *s = gce_vm(p->c.servers); s; s = gce_vm(s->v.next)) {
			if (s->v.st == SD_VM_GONE || (round && !s->insert_cut))
				continue;
			if (round)
				memset(s->delete_rid, 0, sizeof s->delete_rid);
			s->absent = 0;
			if (sd_gce_vm_delete_id(gce, p->c.zones[s->v.zone], s->v.name, s->delete_rid, on_final_deleted, s,
			                        err, sizeof err) == 0)
				p->c.final_pending++;
		}
		sd_cloud_run_until(&loop, &p->c.final_pending, CLOSE_DELETE_WAIT_S);
	}
	/* Still no such VM after that: its insert never reached GCE. */
	for (struct gce_server *s = gce_vm(p->c.servers); s; s = gce_vm(s->v.next))
		if (s->insert_cut && s->absent && s->v.st != SD_VM_GONE)
			s->v.st = SD_VM_GONE;
	cJSON *names = cJSON_CreateArray();
	for (struct gce_server *s = gce_vm(p->c.servers); s; s = gce_vm(s->v.next))
		if (s->v.st != SD_VM_GONE)
			cJSON_AddItemToArray(names, cJSON_CreateString(s->v.name));
	sd_cloud_journal_left(p->c.fleet, "gce", p->c.tag, names, gce ? NULL : err);
	if (gce)
		sd_gce_vm_cancel_waiting(gce);
	if (http)
		sd_http_close(http, NULL, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	if (gce)
		sd_gce_client_free(gce);
	uv_loop_close(&loop);
}

/* ---- the lifecycle's calls into Compute Engine (cloud-vm.h) ---- */

static const char *gce_ref(const struct sd_cloud_vm *v)
{
	return v->name;
}

static int gce_known(const struct sd_cloud_vm *v)
{
	return ((const struct gce_server *)(const void *)v)->target[0] != 0;
}

static int gce_reconcile(struct sd_cloud *c, char *err, size_t errlen)
{
	return sd_gce_vm_list(gce_of(c)->gce, (const char *const *)c->zones, c->nzones, c->tag, on_reconcile_vm,
	                      sd_cloud_on_reconciled, c, err, errlen);
}

static void gce_cancel(struct sd_cloud *c)
{
	sd_gce_vm_cancel_waiting(gce_of(c)->gce);
}

static void gce_free_api(struct sd_cloud *c)
{
	struct gce_provider *p = gce_of(c);
	if (p->gce)
		sd_gce_client_free(p->gce);
	free(p->project);
	free(p->credentials);
	free(p->gcloud);
	free(p->machine_type);
	free(p->accelerator);
	free(p->image);
	free(p->api_root);
	free(p->billing_root);
	free(p->sheet);
	free(p->ssh_keys);
}

static void gce_adopt(struct sd_cloud_vm *v, const struct sd_cloud_vm *h)
{
	struct gce_server *s = gce_vm(v);
	snprintf(s->target, sizeof s->target, "%s", ((const struct gce_server *)(const void *)h)->target);
	s->v.started_at = sd_cloud_wall_now();
}

static const struct sd_cloud_ops gce_cloud = {
	.name = "gce",
	.vm_word = "VM",
	.vms_word = "VMs",
	.insert_call = "INSERT",
	.whole_scope = "a project-wide error",
	.zone_word = "zone ",
	.quota_owner = "its region's",
	.delete_verb = "deleted",
	.billed_from = "lastStartTimestamp",
	.place = "GCE VMs",
	.default_ssh_user = "spotdeck",
	.default_identity = "~/.ssh/google_compute_engine",
	.vm_size = sizeof(struct gce_server),
	.keep_forgets = 1,   /* the close deletes the VMs it knows by name: none is listed then */
	.ref = gce_ref,
	.known = gce_known,
	.insert = gce_insert,
	.remove = gce_remove,
	.list = gce_list,
	.adopt = gce_adopt,
	.reconcile = gce_reconcile,
	.cancel = gce_cancel,
	.sweep = gce_sweep,
	.free_api = gce_free_api,
};

const struct sd_provider_ops sd_provider_gce = {
	.name = "gce",
	.description = "Spot VMs on Google Compute Engine, the worker started over OpenSSH",
	.emulated = 0,
	.check = gce_check,
	.path_settings = path_settings,
	.create = gce_create,
	SD_CLOUD_PROVIDER_OPS,
};
