/* src/provider/gce.c - the gce provider: Spot VMs on Compute Engine, each
 * running one worker that the controller starts and stops over OpenSSH.
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
 * How the worker reaches a VM (issue 13 asked for the choice to be made
 * and documented): the VM's image has spotdeck-worker installed
 * (provider.worker, default "spotdeck-worker" on the remote PATH), and the
 * controller reaches the VM over ssh with the person's own key pair
 * (provider.identity, default ~/.ssh/google_compute_engine, the key
 * `gcloud compute ssh` makes): its public half goes into the instance's
 * ssh-keys metadata for provider.ssh_user, as gcloud does, and the guest
 * environment installs it.  The worker is then started exactly as on the
 * ssh provider's hosts (ssh.h): the run's token on ssh's stdin, never on a
 * command line or in metadata, so it dies with the ssh session's process
 * and never lands on the VM's disk.  The worker watches the VM's own
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
 *             preempted operation names it; FAILED (VM_GONE) when neither
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

#include "engine/errors.h"
#include "src/proto/job.h"
#include "src/provider/cloud-vm.h"
#include "src/provider/gce-api.h"
#include "src/provider/gce-client.h"
#include "src/provider/gce-price.h"
#include "src/provider/gce-vm.h"
#include "src/provider/http.h"
#include "src/provider/provider.h"
#include "src/provider/secret-file.h"
#include "src/provider/ssh.h"

#define GCE_DEFAULT_IMAGE "projects/deeplearning-platform-release/global/images/family/common-cu124"
#define GCE_MAX_ZONES 32
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

enum vm_state {
	VM_CREATING, VM_WAIT_SSH, VM_RUNNING, VM_DELETING, VM_GONE,
	VM_WAITING,   /* acquired while the start-up list or the orphans question is open */
	VM_HELD,      /* an earlier controller's RUNNING VM, kept for a server to adopt */
};

struct gce_server {
	char id[16];
	char name[64];                 /* the VM's name */
	int zone;                      /* index in p->zones */
	int host;                      /* the transport's host, -1 before RUNNING */
	enum vm_state st;
	int released;                  /* the fleet gave it back (or the provider ended it) */
	int reported_end;              /* REVOKED, FAILED or STOCKOUT reported */
	int asking_fate;
	int missing;                   /* backstop passes that did not show it RUNNING */
	int reviewing;                 /* seen stopped or gone with nothing yet saying why */
	double want_stop_since;        /* > 0: judged without its power-off time (a notice
	                                * settled it before the list or the operation gave
	                                * one): the operation's endTime is asked for since */
	double review_since;           /* ... since then (fleet seconds) */
	char listed_status[24];        /* its status in the last list, "" when not listed */
	int suspect;                   /* its worker ended or its host stopped answering:
	                                * the next list started after it says why */
	int suspect_listing;           /* the list in flight was started after that */
	char suspect_code[24], suspect_msg[300];
	char target[512];              /* the instance's URL */
	double started_at, stopped_at; /* GCE's RUNNING and power-off times (epoch s), 0 unknown */
	const char *stop_source;       /* where stopped_at comes from */
	int adopted;                   /* taken over from an earlier controller: billed from then */
	int billed;                    /* BILLED reported */
	char delete_rid[37];           /* the requestId of its delete, once sent */
	int insert_cut;                /* at close: its insert had not answered (VM_CREATING) */
	int absent;                    /* at close: the last delete found no such VM */
	char addr[48], comm_addr[48];  /* VM_HELD: its natIP (or networkIP) and networkIP */
	char status[24];               /* VM_HELD: its status when listed */
	struct sd_provider *p;
	struct gce_server *next;
};

struct sd_provider {
	uv_loop_t *loop;
	struct sd_fleet *fleet;
	struct sd_http *http;
	struct sd_gce_client *gce;
	struct sd_provider *ssh;       /* the transport (ssh.h) */
	/* settings */
	char *project, *credentials, *gcloud, *machine_type, *accelerator, *image, *api_root;
	char *billing_root;            /* NULL: the catalog is not read (see ask_prices) */
	double price_cache_s;
	char *ssh_user, *identity, *worker;
	int accelerator_count, disk_gb, ssh_port;
	double poll_s, boot_timeout_s, block_s, quoted_usd;
	double preempt_wait_s;         /* how long a stopped VM is looked at again (PREEMPT_WAIT_S) */
	char *zones[GCE_MAX_ZONES];
	int nzones;
	double zone_blocked_until[GCE_MAX_ZONES];
	double cloud_blocked_until;
	char *ssh_keys;                /* "USER:ssh-ed25519 AAAA... spotdeck" */
	char tag[17];                  /* the run's label value and VM name part */
	int no_run_dir;                /* the label is not kept: nothing is an orphan */
	struct sd_cloud_orphans orph;  /* the start-up list's orphans (cloud-vm.h) */
	char gpu[16];                  /* "T4" */
	struct sd_cloud_catalog cc;    /* the offers */
	char price_source[160];
	struct sd_gce_price_sheet *sheet; /* while the catalog is read */
	int vcpus;                     /* the machine type's (machineTypes.get) */
	double memory_gib;
	/* servers */
	struct gce_server *servers;
	int final_pending;             /* close: deletes not yet answered */
	uv_timer_t backstop;
	int listing;
	int closing;
};

/* ---- settings ---- */

static const char *const setting_keys[] = {
	"project", "zones", "credentials", "gcloud", "machine_type", "accelerator", "accelerator_count", "image",
	"api_root", "billing_root", "disk_gb", "ssh_user", "identity", "worker", "ssh_port", "poll_s",
	"boot_timeout_s", "block_s", "usd_per_hour", "orphans", "price_cache_s", "preempt_wait_s",
	/* the transport's (ssh.h) */
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
	if (!cJSON_IsArray(zs) || cJSON_GetArraySize(zs) < 1 || cJSON_GetArraySize(zs) > GCE_MAX_ZONES)
		return sd_why(why, "%s: provider.zones: expected a list of 1 to %d zones", file, GCE_MAX_ZONES);
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
static int load_ssh_key(struct sd_provider *p, const char *file, char **why)
{
	char *text = NULL, err[600];
	if (sd_ssh_public_key(p->identity, &text, err, sizeof err) < 0)
		return sd_why(why, "%s: provider.identity: %s (ssh-keygen -t ed25519 -f FILE makes a key pair; "
		              "gcloud compute ssh makes %s)", file, err, "~/.ssh/google_compute_engine");
	size_t n = strlen(p->ssh_user) + strlen(text) + 2;
	p->ssh_keys = sd_malloc(n);
	snprintf(p->ssh_keys, n, "%s:%s", p->ssh_user, text);
	free(text);
	return 0;
}

/* ---- journal ---- */

static void on_http_attempt(void *arg, const struct sd_http_attempt *a)
{
	struct sd_provider *p = arg;
	if (!p->closing)
		sd_cloud_journal_attempt(p->fleet, "gce", a);
}

/* ---- servers ---- */

static struct gce_server *find_server(const struct sd_provider *p, const char *id)
{
	for (struct gce_server *s = p->servers; s; s = s->next)
		if (!strcmp(s->id, id))
			return s;
	return NULL;
}

static void report(struct sd_provider *p, struct gce_server *s, enum sd_provider_event_kind kind, const char *code,
                   const char *message)
{
	if (kind == SD_PROVIDER_REVOKED || kind == SD_PROVIDER_FAILED || kind == SD_PROVIDER_STOCKOUT)
		s->reported_end = 1;
	sd_cloud_report(p->fleet, s->id, p->zones[s->zone], kind, code, message, s->name);
}

/* Once GCE's own RUNNING and power-off times of s's VM are both known:
 * the fleet's estimate of its cost is replaced by what GCE bills (per
 * second, with the minimum). */
static void bill(struct sd_provider *p, struct gce_server *s)
{
	if (s->billed || !s->id[0] || !(s->started_at > 0) || !(s->stopped_at >= s->started_at))
		return;
	s->billed = 1;
	char source[160];
	snprintf(source, sizeof source, "gce: instance %s, %s to %s", s->name,
	         s->adopted ? "its adoption" : "lastStartTimestamp", s->stop_source);
	struct sd_provider_event ev = {
		.kind = SD_PROVIDER_BILLED,
		.server = s->id,
		.time = sd_fleet_now(p->fleet),
		.run_seconds = s->stopped_at - s->started_at,
		.billing_source = source,
	};
	sd_fleet_report(p->fleet, &ev);
}

/* s's delete succeeded: its power-off time, if the list did not give it,
 * is the delete's endTime, and it is billed. */
static void deleted(struct gce_server *s, const struct sd_gce_vm_result *r)
{
	s->st = VM_GONE;
	if (!(s->stopped_at > 0) && r->ended_at > 0) {
		s->stopped_at = r->ended_at;
		s->stop_source = "the delete operation's endTime";
	}
	bill(s->p, s);
}

static void on_deleted(void *arg, const struct sd_gce_vm_result *r)
{
	struct gce_server *s = arg;
	struct sd_provider *p = s->p;
	if (r->ok) {
		deleted(s, r);
	} else if (p->closing) {
		/* Cut short by close: sent again there with this requestId. */
		memcpy(s->delete_rid, r->request_id, sizeof s->delete_rid);
	} else {
		/* Left for the end of the run: close() deletes what is not gone. */
		cJSON *ev = cJSON_CreateObject();
		cJSON_AddStringToObject(ev, "provider", "gce");
		if (s->id[0])
			cJSON_AddStringToObject(ev, "server", s->id);
		cJSON_AddStringToObject(ev, "instance", s->name);
		cJSON_AddStringToObject(ev, "reason", "the VM could not be deleted; spotdeck tries again at the end");
		cJSON_AddStringToObject(ev, "error", r->message);
		sd_fleet_journal(p->fleet, SD_EV_ERROR, ev);
		s->st = VM_RUNNING;
	}
}

/* Deletes s's VM (once). */
static void delete_vm(struct sd_provider *p, struct gce_server *s)
{
	if (s->host >= 0)
		sd_ssh_host_gone(p->ssh, s->host);
	if (s->st == VM_WAITING) {
		s->st = VM_GONE;   /* never made */
		return;
	}
	if (s->st == VM_HELD)
		s->st = VM_RUNNING;
	if (s->st == VM_CREATING || s->st == VM_DELETING || s->st == VM_GONE)
		return;   /* a create in flight deletes when it ends */
	s->st = VM_DELETING;
	char err[256];
	if (sd_gce_vm_delete(p->gce, p->zones[s->zone], s->name, on_deleted, s, err, sizeof err) < 0)
		s->st = VM_RUNNING;
}

static void on_ssh_ready(void *arg, int host, int ok, const char *said)
{
	struct gce_server *s = arg;
	struct sd_provider *p = s->p;
	(void)host;
	if (s->released || s->reported_end || s->st != VM_WAIT_SSH)
		return;
	if (ok) {
		s->st = VM_RUNNING;
		report(p, s, SD_PROVIDER_RUNNING, NULL, NULL);
		return;
	}
	char msg[700];
	snprintf(msg, sizeof msg, "VM %s runs but its sshd did not let us in within %.0f s: %s", s->name,
	         p->boot_timeout_s, said && said[0] ? said : "no answer");
	s->st = VM_RUNNING;
	report(p, s, SD_PROVIDER_FAILED, "SSH_UNREACHABLE", msg);
	delete_vm(p, s);
}

static void block(struct sd_provider *p, int zone, enum sd_gce_block b)
{
	double until = sd_fleet_now(p->fleet) + p->block_s;
	char region[64], r2[64];
	sd_gce_zone_region(p->zones[zone], region, sizeof region);
	switch (b) {
	case SD_GCE_BLOCK_ZONE:
		p->zone_blocked_until[zone] = until;
		break;
	case SD_GCE_BLOCK_REGION:
		for (int i = 0; i < p->nzones; i++) {
			sd_gce_zone_region(p->zones[i], r2, sizeof r2);
			if (!strcmp(r2, region))
				p->zone_blocked_until[i] = until;
		}
		break;
	case SD_GCE_BLOCK_CLOUD:
		p->cloud_blocked_until = until;
		break;
	default:
		break;
	}
}

static void boot_done(struct sd_provider *p, struct gce_server *s, const char *addr, const char *comm_addr);

static void on_created(void *arg, const struct sd_gce_vm_result *r)
{
	struct gce_server *s = arg;
	struct sd_provider *p = s->p;
	if (p->closing) {
		/* Cancelled by close, or done just then: the VM may exist, and
		 * close deletes whatever is not known gone (a 404 is fine). */
		if (r->ok)
			s->st = VM_RUNNING;
		return;
	}
	if (r->target[0])
		snprintf(s->target, sizeof s->target, "%s", r->target);
	if (!r->ok) {
		s->st = VM_GONE;
		block(p, s->zone, r->block);
		int capacity = r->block == SD_GCE_BLOCK_ZONE && strncmp(r->code, "ZONE_RESOURCE_POOL_EXHAUSTED", 28) == 0;
		if (!s->released) {
			char msg[700];
			snprintf(msg, sizeof msg, "%s%s%s", r->message, r->block != SD_GCE_BLOCK_NONE ? "; blocked: " : "",
			         r->block != SD_GCE_BLOCK_NONE ? sd_gce_block_name(r->block) : "");
			report(p, s, capacity ? SD_PROVIDER_STOCKOUT : SD_PROVIDER_FAILED, r->code, msg);
		}
		/* Only GCE's own refusal (a stockout or quota inside the insert's
		 * Operation or its answer) says no VM was made.  After anything
		 * else (an answer lost, retries spent, a VM that stopped while it
		 * booted) one may exist, billed: it is deleted (a 404 is fine). */
		int refused = r->block == SD_GCE_BLOCK_ZONE || r->block == SD_GCE_BLOCK_REGION ||
		              r->block == SD_GCE_BLOCK_CLOUD;
		if (!refused || !strcmp(r->code, "TERMINATED") || !strcmp(r->code, "NOT_FOUND")) {
			s->st = VM_RUNNING;
			delete_vm(p, s);
		}
		return;
	}
	s->st = VM_WAIT_SSH;
	s->started_at = r->vm.started_at;
	if (s->released) {
		delete_vm(p, s);
		return;
	}
	const char *addr = r->vm.nat_ip[0] ? r->vm.nat_ip : r->vm.network_ip;
	if (!addr[0]) {
		s->st = VM_RUNNING;
		report(p, s, SD_PROVIDER_FAILED, "NO_ADDRESS", "the VM runs but has no IP address");
		delete_vm(p, s);
		return;
	}
	boot_done(p, s, addr, r->vm.network_ip[0] ? r->vm.network_ip : addr);
}

/* S's VM runs at ADDR (COMM_ADDR: where other workers reach it): it is
 * PROVISIONED, and RUNNING once its sshd lets us in. */
static void boot_done(struct sd_provider *p, struct gce_server *s, const char *addr, const char *comm_addr)
{
	s->st = VM_WAIT_SSH;
	report(p, s, SD_PROVIDER_PROVISIONED, NULL, NULL);
	struct sd_host h = {
		.name = s->name,
		.host = (char *)addr,
		.user = p->ssh_user,
		.port = p->ssh_port,
		.identity = p->identity,
		.gpu = (char *)p->cc.offers[s->zone].gpu,
		.gpu_count = p->accelerator_count,
		.transient = 1,
		.usd_per_hour = p->quoted_usd,
		.slots = 1,
		.worker = p->worker,
		.comm_host = (char *)comm_addr,
	};
	s->host = sd_ssh_host_add(p->ssh, &h);
	sd_ssh_attach(p->ssh, s->id, s->host);
	sd_ssh_wait_ready(p->ssh, s->host, p->boot_timeout_s, on_ssh_ready, s);
}

/* ---- the backstop: the run's VMs listed every poll_s ---- */

/* The verdict on S, whose VM stopped or went: journaled first (REVOKED or
 * FAILED, with what settled it), and only then is the VM deleted, so that
 * nothing about it is lost if the controller dies in between.  A
 * preempted Spot VM with action DELETE goes by itself; one that stopped
 * (or crashed) is deleted so that it bills no disk (a 404 is success). */
static void verdict(struct sd_provider *p, struct gce_server *s, enum sd_provider_event_kind kind,
                    const char *settled_by, const char *code, const char *message)
{
	s->reported_end = 1;
	s->reviewing = 0;
	if (!(s->stopped_at > 0) && kind == SD_PROVIDER_REVOKED)
		s->want_stop_since = sd_fleet_now(p->fleet);
	struct sd_provider_event ev = {
		.kind = kind,
		.server = s->id,
		.time = sd_fleet_now(p->fleet),
		.code = code,
		.message = message,
		.zone = p->zones[s->zone],
		.settled_by = settled_by,
	};
	sd_fleet_report(p->fleet, &ev);
	delete_vm(p, s);
}

/* What the run knows of S's VM, which the list shows stopped (STATUS) or
 * not at all: a notice its worker reported settles it as a preemption. */
static int judged_by_notice(struct sd_provider *p, struct gce_server *s)
{
	const char *source;
	if (!sd_fleet_cloud_noticed(p->fleet, s->id, &source))
		return 0;
	char msg[300];
	snprintf(msg, sizeof msg, "VM %s is %s; its worker had reported the cloud's preemption notice%s%s", s->name,
	         s->listed_status[0] ? s->listed_status : "gone", source[0] ? " from " : "", source);
	verdict(p, s, SD_PROVIDER_REVOKED, "notice", NULL, msg);
	return 1;
}

static void on_fate(void *arg, int preempted, double ended_at, const char *error)
{
	struct gce_server *s = arg;
	struct sd_provider *p = s->p;
	s->asking_fate = 0;
	if (p->closing || s->released || s->reported_end)
		return;
	if (preempted < 0) {
		(void)error;   /* asked again on the next pass (the bound still runs) */
		return;
	}
	if (preempted && ended_at > 0 && !(s->stopped_at > 0)) {
		s->stopped_at = ended_at;
		s->stop_source = "the compute.instances.preempted operation's endTime";
	}
	if (preempted) {
		char msg[300];
		snprintf(msg, sizeof msg, "a compute.instances.preempted operation names VM %s", s->name);
		verdict(p, s, SD_PROVIDER_REVOKED, "operation", NULL, msg);
		return;
	}
	if (judged_by_notice(p, s))
		return;   /* the notice arrived while the operations were asked */
	/* No operation names it yet: Google does not say how soon one
	 * appears, so the zone's operations are asked again on every pass
	 * until preempt_wait_s has passed since the VM was first seen so. */
	double now = sd_fleet_now(p->fleet);
	if (!s->reviewing) {
		s->reviewing = 1;
		s->review_since = now;
	}
	if (now - s->review_since < p->preempt_wait_s)
		return;
	char msg[700];
	snprintf(msg, sizeof msg, "VM %s is %s, and for %.0f s neither a compute.instances.preempted operation nor a "
	         "notice from its worker said it was preempted: it crashed or someone deleted it%s%s", s->name,
	         s->listed_status[0] ? s->listed_status : "gone", now - s->review_since,
	         s->suspect_msg[0] ? "; " : "", s->suspect_msg);
	verdict(p, s, SD_PROVIDER_FAILED, "timeout", "VM_GONE", msg);
}

static void on_listed_vm(void *arg, const struct sd_gce_instance *in)
{
	struct sd_provider *p = arg;
	for (struct gce_server *s = p->servers; s; s = s->next) {
		if (strcmp(s->name, in->name))
			continue;
		snprintf(s->listed_status, sizeof s->listed_status, "%s", in->status);
		if (!strcmp(in->status, "RUNNING")) {
			s->missing = 0;
			s->reviewing = 0;   /* running again: whatever stopped it is over */
		} else if (in->stopped_at > 0 && !(s->stopped_at > 0)) {
			s->stopped_at = in->stopped_at;   /* powered off: preempted, crashed, stopped */
			s->stop_source = "lastStopTimestamp";
		}
	}
}

static void on_listed(void *arg, int n, const char *error)
{
	struct sd_provider *p = arg;
	(void)n;
	p->listing = 0;
	if (p->closing || error)
		return;   /* an incomplete list is never taken for the truth */
	for (struct gce_server *s = p->servers; s; s = s->next) {
		if (s->st != VM_RUNNING && s->st != VM_WAIT_SSH)
			continue;
		if (s->released || s->reported_end || s->asking_fate || !s->target[0])
			continue;
		if (!s->missing) {
			/* The VM runs: a worker that ended there, or a host that
			 * stopped answering ssh, is the server's failure. */
			if (s->suspect && s->suspect_listing)
				verdict(p, s, SD_PROVIDER_FAILED, NULL, s->suspect_code, s->suspect_msg);
			continue;
		}
		if (judged_by_notice(p, s))
			continue;
		char err[256];
		s->asking_fate = 1;
		if (sd_gce_vm_fate(p->gce, p->zones[s->zone], s->target, on_fate, s, err, sizeof err) < 0)
			s->asking_fate = 0;
	}
}

static void start_list(struct sd_provider *p)
{
	if (p->closing || p->listing)
		return;
	int any = 0;
	for (struct gce_server *s = p->servers; s; s = s->next)
		if ((s->st == VM_RUNNING || s->st == VM_WAIT_SSH) && !s->released && !s->reported_end) {
			s->missing = 1;   /* until the list shows it RUNNING */
			s->listed_status[0] = '\0';
			s->suspect_listing = s->suspect;
			any = 1;
		}
	if (!any)
		return;
	char err[256];
	p->listing = 1;
	if (sd_gce_vm_list(p->gce, (const char *const *)p->zones, p->nzones, p->tag, on_listed_vm, on_listed, p, err,
	                   sizeof err) < 0)
		p->listing = 0;
}

/* The power-off time of S, revoked on its worker's notice before anything
 * gave one, from the compute.instances.preempted operation's endTime once
 * it is published: what GCE bills ends there. */
static void on_stop_time(void *arg, int preempted, double ended_at, const char *error)
{
	struct gce_server *s = arg;
	(void)error;
	s->asking_fate = 0;
	if (s->p->closing || !(s->want_stop_since > 0))
		return;
	if (s->stopped_at > 0 || (preempted > 0 && ended_at > 0)) {
		if (!(s->stopped_at > 0)) {
			s->stopped_at = ended_at;
			s->stop_source = "the compute.instances.preempted operation's endTime";
		}
		s->want_stop_since = 0;
		if (s->st == VM_GONE)
			bill(s->p, s);   /* else when its delete ends */
	}
}

static void on_backstop(uv_timer_t *t)
{
	struct sd_provider *p = t->data;
	start_list(p);
	/* Asked at every pass for preempt_wait_s; after that the fleet's
	 * estimate of its cost stands. */
	double now = sd_fleet_now(p->fleet);
	for (struct gce_server *s = p->servers; s && !p->closing; s = s->next) {
		if (!(s->want_stop_since > 0) || s->asking_fate || s->billed || !s->target[0])
			continue;
		if (now - s->want_stop_since > p->preempt_wait_s) {
			s->want_stop_since = 0;
			continue;
		}
		char err[256];
		s->asking_fate = 1;
		if (sd_gce_vm_fate(p->gce, p->zones[s->zone], s->target, on_stop_time, s, err, sizeof err) < 0)
			s->asking_fate = 0;
	}
}

/* SERVER's worker ended, or its host stopped answering ssh, while it
 * trained without a notice: a crash, or a preemption its worker never
 * heard of.  The list, asked now, says which (on_listed). */
static void suspect(struct sd_provider *p, struct gce_server *s, const char *code, const char *message)
{
	if (s->suspect)
		return;
	s->suspect = 1;
	snprintf(s->suspect_code, sizeof s->suspect_code, "%s", code);
	snprintf(s->suspect_msg, sizeof s->suspect_msg, "%s", message);
	start_list(p);
}

static void on_transport_unreachable(void *ctx, const char *server, const char *message)
{
	struct sd_provider *p = ctx;
	struct gce_server *s = find_server(p, server);
	if (s && !s->released && !s->reported_end)
		suspect(p, s, "HOST_UNREACHABLE", message);
}

static int gce_judge(struct sd_provider *p, const char *server)
{
	struct gce_server *s = find_server(p, server);
	if (!s || s->released || s->reported_end || p->closing || (s->st != VM_RUNNING && s->st != VM_WAIT_SSH) ||
	    !s->target[0])
		return 0;
	char msg[200];
	snprintf(msg, sizeof msg, "the worker on VM %s ended", s->name);
	suspect(p, s, "WORKER_ENDED", msg);
	return 1;
}

/* ---- start-up reconciliation: the run's VMs a previous controller left ---- */

static int zone_index(const struct sd_provider *p, const char *zone)
{
	for (int i = 0; i < p->nzones; i++)
		if (!strcmp(p->zones[i], zone))
			return i;
	return -1;
}

static void unlink_server(struct sd_provider *p, struct gce_server *s)
{
	for (struct gce_server **q = &p->servers; *q; q = &(*q)->next)
		if (*q == s) {
			*q = s->next;
			free(s);
			return;
		}
}

/* A VM carrying this run's label that no server of this controller owns:
 * a previous controller of the run (killed, or its machine lost) left it.
 * With orphans "adopt" or "ask" a RUNNING one with an address is held for
 * a server of this run (settle); any other is deleted, or with "keep" only
 * journaled. */
static void on_reconcile_vm(void *arg, const struct sd_gce_instance *in)
{
	struct sd_provider *p = arg;
	if (p->closing || p->no_run_dir)
		return;
	for (const struct gce_server *s = p->servers; s; s = s->next)
		if (!strcmp(s->name, in->name))
			return;
	int zi = zone_index(p, in->zone);
	int hold = zi >= 0 && !strcmp(in->status, "RUNNING") && (in->nat_ip[0] || in->network_ip[0]) &&
	           sd_cloud_orphans_hold(&p->orph);
	int del = !hold && p->orph.what != SD_ORPHANS_KEEP && zi >= 0;
	if (!hold)
		sd_cloud_journal_orphan(p->fleet, "gce", in->name, in->zone, in->status, del ? "delete" : "keep", NULL);
	if (!hold && !del)
		return;
	struct gce_server *s = sd_calloc(1, sizeof *s);
	snprintf(s->name, sizeof s->name, "%s", in->name);
	s->zone = zi;
	s->host = -1;
	s->p = p;
	s->next = p->servers;
	p->servers = s;
	if (hold) {
		s->st = VM_HELD;
		snprintf(s->target, sizeof s->target, "%s", in->self_link);
		snprintf(s->addr, sizeof s->addr, "%s", in->nat_ip[0] ? in->nat_ip : in->network_ip);
		snprintf(s->comm_addr, sizeof s->comm_addr, "%s", in->network_ip[0] ? in->network_ip : s->addr);
		snprintf(s->status, sizeof s->status, "%s", in->status);
		if (p->orph.what == SD_ORPHANS_ASK)
			sd_cloud_journal_orphan(p->fleet, "gce", in->name, in->zone, in->status, "ask", NULL);
		return;
	}
	s->released = 1;
	s->st = VM_RUNNING;
	delete_vm(p, s);
}

static int start_create(struct sd_provider *p, struct gce_server *s, char *err, size_t errlen);

/* S (acquired while the list or the question was open) takes over held
 * VM H of its zone: no insert; it is billed from now (before, the earlier
 * controller's journal counted it), and trains once its sshd answers. */
static void adopt(struct sd_provider *p, struct gce_server *s, struct gce_server *h)
{
	snprintf(s->name, sizeof s->name, "%s", h->name);
	snprintf(s->target, sizeof s->target, "%s", h->target);
	char addr[48], comm[48];
	snprintf(addr, sizeof addr, "%s", h->addr);
	snprintf(comm, sizeof comm, "%s", h->comm_addr);
	sd_cloud_journal_orphan(p->fleet, "gce", h->name, p->zones[h->zone], h->status, "adopt", s->id);
	unlink_server(p, h);
	s->adopted = 1;
	s->started_at = sd_cloud_wall_now();
	boot_done(p, s, addr, comm);
}

/* The start-up list has answered and no question is open: every waiting
 * acquisition adopts a held VM of its zone (orphans "adopt") or makes its
 * own; the held VMs no server took are deleted (or kept, or, when the
 * answer was "delete", all of them go). */
static void settle(struct sd_provider *p)
{
	int again = 1;
	while (again) {   /* the list changes under adopt: walk it again */
		again = 0;
		for (struct gce_server *s = p->servers; s; s = s->next) {
			if (s->st != VM_WAITING)
				continue;
			struct gce_server *h = NULL;
			for (struct gce_server *t = p->servers; p->orph.what == SD_ORPHANS_ADOPT && t; t = t->next)
				if (t->st == VM_HELD && t->zone == s->zone)
					h = t;
			if (h) {
				adopt(p, s, h);
				again = 1;
				break;
			}
			char err[512];
			if (start_create(p, s, err, sizeof err) < 0) {
				s->st = VM_GONE;
				report(p, s, SD_PROVIDER_FAILED, "INSERT", err);
			}
		}
	}
	for (struct gce_server *s = p->servers, *n; s; s = n) {
		n = s->next;
		if (s->st != VM_HELD)
			continue;
		int keep = p->orph.what == SD_ORPHANS_KEEP;
		sd_cloud_journal_orphan(p->fleet, "gce", s->name, p->zones[s->zone], s->status, keep ? "keep" : "delete",
		                        NULL);
		if (keep) {
			unlink_server(p, s);
		} else {
			s->released = 1;
			delete_vm(p, s);
		}
	}
}

static void on_reconciled(void *arg, int n, const char *error)
{
	struct sd_provider *p = arg;
	(void)n;
	int now = sd_cloud_orphans_listed(&p->orph);
	if (p->closing)
		return;
	if (error)
		sd_cloud_journal_error(p->fleet, "gce", "the run's VMs could not be listed at start: orphans of an "
		                       "earlier controller, if any, are left", error);
	if (now)   /* else by the answer (gce_answer_orphans) */
		settle(p);
}

static int gce_answer_orphans(struct sd_provider *p, const char *what, char **why)
{
	int now = sd_cloud_orphans_answer(&p->orph, what, "VMs", why);
	if (now > 0)
		settle(p);
	return now < 0 ? -1 : 0;
}

/* ---- prices: the Cloud Billing Catalog (gce-price.h) ---- */

static void prices_failed(struct sd_provider *p, const char *error)
{
	free(p->sheet);
	p->sheet = NULL;
	snprintf(p->price_source, sizeof p->price_source, "unknown: the Billing Catalog: %.120s", error);
	sd_cloud_journal_error(p->fleet, "gce", "no Spot prices from the Cloud Billing Catalog: servers are not "
	                       "priced (provider.usd_per_hour quotes one)", error);
}

/* Every zone of REGION costs USD an hour, SUM in words; a price event
 * per offer says so. */
static void set_region_price(struct sd_provider *p, const char *region, double usd, const char *sum,
                             const char *source)
{
	for (int zi = 0; zi < p->nzones; zi++) {
		char rg[64];
		sd_gce_zone_region(p->zones[zi], rg, sizeof rg);
		if (strcmp(rg, region) != 0)
			continue;
		cJSON *ev = cJSON_CreateObject();
		cJSON_AddStringToObject(ev, "sum", sum);
		cJSON_AddStringToObject(ev, "source", source);
		sd_cloud_set_price(&p->cc, p->fleet, zi, usd, ev);
	}
}

static void price_key(const struct sd_provider *p, const char *region, struct sd_gce_price_key *k)
{
	*k = (struct sd_gce_price_key){ .billing_root = p->billing_root, .machine_type = p->machine_type,
		                        .accelerator = p->accelerator, .gpus = p->accelerator_count,
		                        .region = region };
}

static void ask_sku_page(struct sd_provider *p, const char *token);

static void on_sku_page(void *arg, const struct sd_http_response *r)
{
	struct sd_provider *p = arg;
	char err[256], next[1024];
	if (r->cancelled || p->closing || !p->sheet)
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
			sd_cloud_journal_error(p->fleet, "gce", "the prices cache was not written (the next run "
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
		sd_cloud_journal_error(p->fleet, "gce", "servers in these regions are not priced", err);
	}
}

static void ask_sku_page(struct sd_provider *p, const char *token)
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
	struct sd_provider *p = arg;
	char err[256];
	if (r->cancelled || p->closing)
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

static void ask_prices(struct sd_provider *p)
{
	if (!p->billing_root)
		return;
	const char *regions[GCE_MAX_ZONES];
	char rg[GCE_MAX_ZONES][64];
	int n = 0, cached = 0;
	for (int zi = 0; zi < p->nzones; zi++) {
		sd_gce_zone_region(p->zones[zi], rg[n], sizeof rg[n]);
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
	const char *left[GCE_MAX_ZONES];
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
	snprintf(sub, sizeof sub, "zones/%s/machineTypes/%s", p->zones[0], p->machine_type);
	if (sd_gce_url(p->gce, sub, url, sizeof url) < 0)
		prices_failed(p, "machineTypes.get: the URL does not fit");
	else if (sd_gce_call(p->gce, "gce machineTypes.get", "GET", url, NULL, 1, on_machine_type, p, err,
	                     sizeof err) < 0)
		prices_failed(p, err);
}

/* ---- catalog ---- */

static void build_catalog(struct sd_provider *p)
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
	sd_cloud_catalog_build(&p->cc, &spec, p->zones, p->nzones);
}

/* ---- the operations ---- */

/* operations.wait answers at DONE or after about 2 minutes: an attempt
 * may take that long. */
static const struct sd_http_policy http_policy = { .timeout_s = 150 };

static void gce_free(struct sd_provider *p);

static int gce_create(struct sd_provider **out, const struct sd_provider_env *env, char **why)
{
	*out = NULL;
	const cJSON *s = env->settings;
	const char *file = env->settings_file ? env->settings_file : "job";
	struct sd_provider *p = sd_calloc(1, sizeof *p);
	p->loop = env->loop;
	p->fleet = env->fleet;
	p->project = sd_setting_str(s, "project", NULL);
	const char *envcred = getenv("GOOGLE_APPLICATION_CREDENTIALS");
	p->credentials = sd_expand_home(sd_setting_str(s, "credentials", envcred && *envcred ? envcred : NULL));
	p->gcloud = sd_setting_str(s, "gcloud", "gcloud");
	p->machine_type = sd_setting_str(s, "machine_type", "n1-standard-8");
	p->accelerator = sd_setting_str(s, "accelerator", "nvidia-tesla-t4");
	p->image = sd_setting_str(s, "image", GCE_DEFAULT_IMAGE);
	p->api_root = sd_setting_str(s, "api_root", SD_GCE_COMPUTE_ROOT);
	p->ssh_user = sd_setting_str(s, "ssh_user", "spotdeck");
	p->identity = sd_expand_home(sd_setting_str(s, "identity", "~/.ssh/google_compute_engine"));
	p->worker = sd_setting_str(s, "worker", "spotdeck-worker");
	p->accelerator_count = (int)sd_setting_num(s, "accelerator_count", 1);
	p->disk_gb = (int)sd_setting_num(s, "disk_gb", 50);
	p->ssh_port = (int)sd_setting_num(s, "ssh_port", 22);
	p->poll_s = sd_setting_num(s, "poll_s", 20);
	p->boot_timeout_s = sd_setting_num(s, "boot_timeout_s", 300);
	p->block_s = sd_setting_num(s, "block_s", 600);
	p->preempt_wait_s = sd_setting_num(s, "preempt_wait_s", PREEMPT_WAIT_S);
	p->quoted_usd = sd_setting_num(s, "usd_per_hour", NAN);
	p->price_cache_s = sd_setting_num(s, "price_cache_s", 86400);
	/* The real catalog goes with the real Compute Engine only: a fake's
	 * api_root (a test) names its own catalog, or none is read. */
	p->billing_root = sd_setting_str(s, "billing_root", strcmp(p->api_root, SD_GCE_COMPUTE_ROOT) ? NULL
	                                                     : SD_GCE_BILLING_ROOT);
	const cJSON *z;
	cJSON_ArrayForEach(z, cJSON_GetObjectItemCaseSensitive(s, "zones"))
		if (p->nzones < GCE_MAX_ZONES)
			p->zones[p->nzones++] = sd_strdup0(z->valuestring);
	if (!p->project || p->nzones == 0) {
		gce_free(p);
		return sd_why(why, "%s: provider.project and provider.zones are required", file);
	}
	if (load_ssh_key(p, file, why) < 0) {
		gce_free(p);
		return -1;
	}
	if (sd_cloud_run_label(env->run_dir, "gce-label", p->tag, &p->no_run_dir, why) < 0) {
		gce_free(p);
		return -1;
	}
	p->orph.what = sd_cloud_orphans(env, s);
	/* Workers on VMs that dial the controller themselves (--advertise)
	 * must reach it: loopback only serves a fake cloud on this machine
	 * (tests/fake-cloud/gce.py --vm-sshd).  Without --advertise their
	 * links come through the transport's ssh connections. */
	if (env->direct && sd_host_is_loopback(env->advertise, 1) && !sd_url_is_loopback(p->api_root)) {
		sd_why(why, "%s: workers on GCE VMs cannot reach the controller at --advertise %s (loopback): give "
		       "an address the VMs reach, or leave --advertise out to carry their links over ssh", file,
		       env->advertise);
		gce_free(p);
		return -1;
	}
	char err[512];
	p->http = sd_http_new(p->loop, &http_policy, on_http_attempt, p, err, sizeof err);
	if (!p->http) {
		gce_free(p);
		return sd_why(why, "gce: %s", err);
	}
	struct sd_gce_client_config cfg = { .project = p->project, .compute_root = p->api_root,
		                            .key_file = p->credentials };
	if (p->credentials && !strcmp(p->credentials, "gcloud")) {
		cfg.key_file = NULL;
		cfg.gcloud = p->gcloud;
	}
	p->gce = sd_gce_client_new(p->http, &cfg, err, sizeof err);
	if (!p->gce) {
		gce_free(p);
		return sd_why(why, "%s: provider.credentials: %s", file, err);
	}
	struct sd_ssh_hooks hooks = { .ctx = p, .unreachable = on_transport_unreachable };
	if (sd_ssh_transport_create(&p->ssh, env, "gce", &hooks, why) < 0) {
		gce_free(p);
		return -1;
	}
	build_catalog(p);
	sd_cloud_catalog_model_journaled(&p->cc, env->catalog_path, p->fleet, "gce");
	if (isnan(p->quoted_usd))
		ask_prices(p);
	uv_timer_init(p->loop, &p->backstop);
	p->backstop.data = p;
	uv_timer_start(&p->backstop, on_backstop, (uint64_t)(p->poll_s * 1000), (uint64_t)(p->poll_s * 1000));
	uv_unref((uv_handle_t *)&p->backstop);
	char lerr[256];
	p->orph.reconciling = 1;
	if (sd_gce_vm_list(p->gce, (const char *const *)p->zones, p->nzones, p->tag, on_reconcile_vm, on_reconciled, p,
	                   lerr, sizeof lerr) < 0)
		on_reconciled(p, -1, lerr);
	*out = p;
	return 0;
}

static int gce_acquire(struct sd_provider *p, const char *server, const struct sd_offer *offer, char **why)
{
	int zi = offer->index;
	if (zi < 0 || zi >= p->nzones || offer != &p->cc.offers[zi])
		return sd_why(why, "%s: not an offer of the gce provider", offer->id);
	double now = sd_fleet_now(p->fleet);
	if (now < p->cloud_blocked_until)
		return sd_why(why, "%s: gce is blocked for %.0f s more after a project-wide error", offer->id,
		              p->cloud_blocked_until - now);
	if (now < p->zone_blocked_until[zi])
		return sd_why(why, "%s: zone %s is blocked for %.0f s more (it ran out, or its region's quota did)",
		              offer->id, p->zones[zi], p->zone_blocked_until[zi] - now);
	struct gce_server *s = sd_calloc(1, sizeof *s);
	snprintf(s->id, sizeof s->id, "%s", server);
	s->zone = zi;
	s->host = -1;
	s->p = p;
	s->next = p->servers;
	p->servers = s;
	if (p->orph.reconciling || p->orph.asking) {
		s->st = VM_WAITING;   /* settle() adopts a held VM for it or makes one */
		return 0;
	}
	char err[512];
	if (start_create(p, s, err, sizeof err) < 0) {
		p->servers = s->next;
		free(s);
		return sd_why(why, "%s: %s", offer->id, err);
	}
	return 0;
}

/* Inserts S's VM, sd-TAG-SERVER in its zone. */
static int start_create(struct sd_provider *p, struct gce_server *s, char *err, size_t errlen)
{
	int zi = s->zone;
	/* sd-TAG-SERVER: lower case, digits and '-' (server ids are s1, s2, ...). */
	snprintf(s->name, sizeof s->name, "sd-%s-%s", p->tag, s->id);
	for (char *c = s->name; *c; c++)
		*c = (char)tolower((unsigned char)*c);
	s->st = VM_CREATING;
	struct sd_gce_instance_spec spec = {
		.project = p->project,
		.zone = p->zones[zi],
		.name = s->name,
		.machine_type = p->machine_type,
		.accelerator = p->accelerator,
		.accelerator_count = p->accelerator_count,
		.image = p->image,
		.disk_gb = p->disk_gb,
		.ssh_keys = p->ssh_keys,
		.run = p->tag,
		.external_ip = 1,
		.stop_on_preemption = 0,
	};
	return sd_gce_vm_create(p->gce, &spec, fmin(2.0, p->poll_s), on_created, s, err, errlen);
}

static void gce_release(struct sd_provider *p, const char *server)
{
	struct gce_server *s = find_server(p, server);
	if (!s || s->released)
		return;
	s->released = 1;
	sd_provider_ssh.release(p->ssh, server);
	delete_vm(p, s);
}

static int gce_launch(struct sd_provider *p, const char *server, char *const *worker_argv, char ***argv, char **why)
{
	return sd_provider_ssh.launch(p->ssh, server, worker_argv, argv, why);
}

static void gce_signal(struct sd_provider *p, const char *server, int sig)
{
	sd_provider_ssh.signal(p->ssh, server, sig);
}

static void gce_lost(struct sd_provider *p, const char *server, int worker_alive)
{
	sd_provider_ssh.lost(p->ssh, server, worker_alive);
}

static int gce_link_in_session(const struct sd_provider *p)
{
	return sd_provider_ssh.link_in_session(p->ssh);
}

static const struct sd_catalog *gce_catalog(const struct sd_provider *p)
{
	return &p->cc.cat;
}

static const double *gce_prices(const struct sd_provider *p)
{
	return p->cc.prices;
}

static int gce_live(const struct sd_provider *p, const struct sd_offer *o)
{
	int n = 0;
	for (const struct gce_server *s = p->servers; s; s = s->next)
		n += s->zone == o->index && !s->released && !s->reported_end && s->st != VM_GONE && s->st != VM_HELD;
	return n;
}

/* ---- the end: every VM not known gone is deleted on a private loop ---- */

static void on_final_deleted(void *arg, const struct sd_gce_vm_result *r)
{
	struct gce_server *s = arg;
	s->p->final_pending--;
	/* No such VM, but its insert was cut off by the close: GCE takes an
	 * insert it has received to the end, so the VM may appear yet. */
	if (r->ok && r->absent && s->insert_cut) {
		s->absent = 1;
		return;
	}
	if (r->ok)
		deleted(s, r);
}

static void delete_left(struct sd_provider *p)
{
	int left = 0;
	for (struct gce_server *s = p->servers; s; s = s->next) {
		if (s->st == VM_WAITING)
			s->st = VM_GONE;   /* never made */
		left += s->st != VM_GONE;
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
	p->final_pending = 0;
	for (struct gce_server *s = p->servers; s; s = s->next)
		s->insert_cut = s->st == VM_CREATING;
	/* A VM whose insert the close cut off is deleted again, every
	 * CLOSE_REDELETE_S for CLOSE_REDELETE_FOR_S, while GCE says there is
	 * no such VM (each delete keeps its own requestId). */
	uint64_t t0 = uv_now(&loop);
	for (int round = 0; gce; round++) {
		int cut = 0;
		for (struct gce_server *s = p->servers; s; s = s->next)
			cut += s->insert_cut && s->st != VM_GONE;
		if (round) {
			if (!cut || uv_now(&loop) - t0 > (uint64_t)(CLOSE_REDELETE_FOR_S * 1000))
				break;
			int never = 1;   /* a pause on this loop: nothing counts it done */
			sd_cloud_run_until(&loop, &never, CLOSE_REDELETE_S);
		}
		for (struct gce_server *s = p->servers; s; s = s->next) {
			if (s->st == VM_GONE || (round && !s->insert_cut))
				continue;
			if (round)
				memset(s->delete_rid, 0, sizeof s->delete_rid);
			s->absent = 0;
			if (sd_gce_vm_delete_id(gce, p->zones[s->zone], s->name, s->delete_rid, on_final_deleted, s,
			                        err, sizeof err) == 0)
				p->final_pending++;
		}
		sd_cloud_run_until(&loop, &p->final_pending, CLOSE_DELETE_WAIT_S);
	}
	/* Still no such VM after that: its insert never reached GCE. */
	for (struct gce_server *s = p->servers; s; s = s->next)
		if (s->insert_cut && s->absent && s->st != VM_GONE)
			s->st = VM_GONE;
	cJSON *names = cJSON_CreateArray();
	for (struct gce_server *s = p->servers; s; s = s->next)
		if (s->st != VM_GONE)
			cJSON_AddItemToArray(names, cJSON_CreateString(s->name));
	sd_cloud_journal_left(p->fleet, "gce", p->tag, names, gce ? NULL : err);
	if (gce)
		sd_gce_vm_cancel_waiting(gce);
	if (http)
		sd_http_close(http, NULL, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	if (gce)
		sd_gce_client_free(gce);
	uv_loop_close(&loop);
}

static void gce_close(struct sd_provider *p)
{
	sd_provider_ssh.close(p->ssh);
	p->closing = 1;
	uv_timer_stop(&p->backstop);
	uv_close((uv_handle_t *)&p->backstop, NULL);
	/* The loop may not run again: what is in flight here ends now, and
	 * every VM not known gone is deleted on a loop of our own. */
	sd_gce_vm_cancel_waiting(p->gce);
	sd_http_close(p->http, NULL, NULL);
	p->http = NULL;
	delete_left(p);
}

static void gce_free(struct sd_provider *p)
{
	if (!p)
		return;
	if (p->ssh)
		sd_provider_ssh.free(p->ssh);
	if (p->gce)
		sd_gce_client_free(p->gce);
	if (p->http)
		sd_http_close(p->http, NULL, NULL);
	while (p->servers) {
		struct gce_server *n = p->servers->next;
		free(p->servers);
		p->servers = n;
	}
	for (int i = 0; i < p->nzones; i++)
		free(p->zones[i]);
	sd_cloud_catalog_free(&p->cc);
	free(p->project);
	free(p->credentials);
	free(p->gcloud);
	free(p->machine_type);
	free(p->accelerator);
	free(p->image);
	free(p->api_root);
	free(p->billing_root);
	free(p->sheet);
	free(p->ssh_user);
	free(p->identity);
	free(p->worker);
	free(p->ssh_keys);
	free(p);
}

const struct sd_provider_ops sd_provider_gce = {
	.name = "gce",
	.description = "Spot VMs on Google Compute Engine, the worker started over OpenSSH",
	.emulated = 0,
	.check = gce_check,
	.path_settings = path_settings,
	.create = gce_create,
	.acquire = gce_acquire,
	.release = gce_release,
	.catalog = gce_catalog,
	.prices = gce_prices,
	.live = gce_live,
	.launch = gce_launch,
	.signal = gce_signal,
	.lost = gce_lost,
	.link_in_session = gce_link_in_session,
	.judge = gce_judge,
	.answer_orphans = gce_answer_orphans,
	.close = gce_close,
	.free = gce_free,
};
