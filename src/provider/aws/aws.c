/* src/provider/aws/aws.c - the aws provider: Spot instances on EC2, each
 * running one worker that the controller starts and stops over OpenSSH.
 * The life below is cloud-vm.c's, the same for every cloud; this file is
 * EC2's part of it (its struct sd_cloud_ops: RunInstances, Terminate-
 * Instances, DescribeInstances by tag, Spot prices, the close's sweep).
 *
 * Offers: one per Availability Zone of provider.zones (all of
 * provider.region), "aws/AZ/MODEL/spot" (MODEL from the instance type's
 * GPU: g4dn -> t4), all of the same instance type.  Their prices are the
 * Spot prices DescribeSpotPriceHistory gives at start (Linux/UNIX, the
 * price in effect now, per AZ), or provider.usd_per_hour when the job
 * quotes one; a server acquired before the answer takes the price when it
 * boots (fleet.c).
 *
 * How the worker reaches an instance: the AMI has spotdeck-worker installed
 * (provider.worker, default "spotdeck-worker" on the remote PATH) and
 * cloud-init, as the Deep Learning AMIs and Ubuntu's do; the launch's
 * UserData is a cloud-config whose ssh_authorized_keys holds the public
 * half of provider.identity (default ~/.ssh/id_ed25519), which cloud-init
 * gives the AMI's default user (provider.ssh_user, default "ubuntu").  No
 * EC2 key pair is made, so nothing is left in the account.  The worker is
 * then started as on the ssh provider's hosts, by the ssh transport
 * (transport.h): the run's token on ssh's stdin, never on a command line,
 * in UserData or on the instance's disk.  The worker reads the interruption notice from the instance's
 * IMDSv2 (the job's "notice": "aws").
 *
 * A server's life:
 *   acquire   RunInstances of one Spot instance in the offer's AZ, tagged
 *             spotdeck-run=TAG and Name=sd-TAG-SERVER (aws-vm.c: the
 *             ClientToken kept across retries, DescribeInstances until
 *             running)
 *   PROVISIONED  once EC2 calls it running (it boots);
 *   RUNNING   once its sshd runs `true` for us (the fleet then launches);
 *   STOCKOUT  RunInstances answered a capacity <Code>
 *             (InsufficientInstanceCapacity, ...): the AZ is blocked for
 *             provider.block_s and the fleet's suggestion picks another; a
 *             quota code blocks the region (every offer here), a
 *             credentials code the whole cloud (sd_ec2_classify); FAILED for
 *             any other error;
 *   REVOKED   the backstop (DescribeInstances by tag every provider.poll_s)
 *             shows it shut down with stateReason Server.SpotInstance-
 *             Termination (or -Shutdown), or its worker had reported the
 *             IMDS notice (sd_fleet_cloud_noticed), even when it is no
 *             longer listed; FAILED at once for any other stateReason (a
 *             crash, or someone's terminate), and after provider.
 *             preempt_wait_s of passes for one with no stateReason or no
 *             longer listed and no notice.  A worker that ended, or a host
 *             ssh cannot reach, without a notice is judged the same way.
 *             The event names what settled it; the instance is terminated
 *             after it;
 *   release   TerminateInstances.  What is still not terminated when the
 *             run closes (and any instance of the run's tag that is not)
 *             is terminated then, on a private loop.
 * Money: EC2 bills a Spot Linux instance per second from running to
 * shutting-down with a 60 s minimum; it states no such times in its API
 * (the Cost and Usage Report comes hours later), so the BILLED figure is
 * the time between what this provider saw: the first DescribeInstances
 * that showed it running (polled every provider.boot_poll_s while it
 * boots) and TerminateInstances' answer or the backstop that saw it shut
 * down.  Every HTTP attempt is journaled as a cloud_call event (never a
 * header, body or signature). */
#include "config.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "src/base/errors.h"
#include "src/proto/job.h"
#include "src/provider/aws/aws-client.h"
#include "src/provider/cloud-vm.h"
#include "src/provider/aws/aws-api.h"
#include "src/provider/aws/aws-vm.h"
#include "src/provider/http/http.h"
#include "src/provider/provider.h"
#include "src/provider/http/secret-file.h"
#include "src/provider/ssh/transport.h"

#define CLOSE_TERMINATE_WAIT_S 60.0
#define CLOSE_RELIST_S 1.0        /* between the close's lists while a launch is unseen */
#define CLOSE_RELIST_FOR_S 15.0   /* and for how long */
/* How long an instance found shut down without a stateReason, or no
 * longer listed, and without a notice from its worker, is looked at again
 * (every backstop pass) before it is judged (provider.preempt_wait_s).
 * The EC2 API is eventually consistent (AWS's API reference says so of
 * every Describe call): a stateReason or the instance itself may show up a
 * pass or two late.  Two minutes as for gce.c. */
#define PREEMPT_WAIT_S 120.0

struct aws_server {
	struct sd_cloud_vm v;          /* first: what every cloud's VM has (cloud-vm.h) */
	char iid[32];                  /* the instance id, "" until RunInstances answers */
	double running_at, stopped_at; /* seen running / powered off (epoch s), 0 unknown */
	const char *stop_source;
	int lost_launch;               /* its launch failed after EC2 may have made one (an answer
	                                * lost, retries spent): the backstop looks for it by name */
};

struct aws_provider {
	struct sd_cloud c;             /* first: what every cloud has (cloud-vm.h) */
	struct sd_aws_client *aws;
	/* settings */
	char *region, *endpoint, *profile, *instance_type, *image, *max_price;
	double boot_poll_s, quoted_usd;
	double price_poll_s;           /* DescribeSpotPriceHistory again after this long */
	double prices_asked_at;        /* wall clock of the last ask, 0: never */
	int prices_pending;
	char *user_data;               /* the cloud-config with the ssh key */
	char gpu[16];
	int gpu_count;
	char price_source[160];
};

/* The aws provider's server list holds struct aws_server (vm_size). */
static struct aws_server *aws_vm(struct sd_cloud_vm *v)
{
	return (struct aws_server *)(void *)v;
}

static struct aws_provider *aws_of(struct sd_cloud *c)
{
	return (struct aws_provider *)(void *)c;
}

static struct aws_provider *prov(const struct aws_server *s)
{
	return (struct aws_provider *)(void *)s->v.cloud;
}

/* The GPU of the EC2 accelerated-computing families spotdeck trains on
 * (AWS, "Amazon EC2 instance types: Accelerated computing", GPU and count
 * per size are on that page; here the model only, with the count of the
 * smallest size that has one). */
static const struct {
	const char *family;
	const char *gpu;
} gpu_families[] = {
	{"g4dn", "T4"}, {"g5", "A10G"}, {"g6", "L4"}, {"g6e", "L40S"}, {"gr6", "L4"},
	{"p3", "V100"}, {"p3dn", "V100"}, {"p4d", "A100"}, {"p4de", "A100"}, {"p5", "H100"},
	{"p5e", "H200"}, {"p5en", "H200"},
};

static const char *type_gpu(const char *type)
{
	size_t n = strcspn(type, ".");
	for (size_t i = 0; i < sizeof gpu_families / sizeof gpu_families[0]; i++)
		if (strlen(gpu_families[i].family) == n && !strncmp(type, gpu_families[i].family, n))
			return gpu_families[i].gpu;
	return NULL;
}

/* ---- settings ---- */

static const char *const setting_keys[] = {
	"region", "zones", "instance_type", "image", "endpoint", "profile", "quotas_endpoint", "ssh_user",
	"identity", "worker", "ssh_port", "poll_s", "boot_poll_s", "boot_timeout_s", "block_s", "usd_per_hour",
	"max_price", "gpu_count", "orphans", "price_poll_s", "preempt_wait_s",
	/* the transport's (transport.h) */
	"host_key_checking", "known_hosts", "connect_timeout", "ssh", NULL
};

static const char *const path_settings[] = { "identity", "known_hosts", NULL };

static int name_ok(const char *v, size_t max)
{
	return v[0] && strlen(v) <= max && strspn(v, "abcdefghijklmnopqrstuvwxyz0123456789-") == strlen(v);
}

static int aws_check(const cJSON *s, const char *file, char **why)
{
	if (sd_setting_check_known(s, setting_keys, "aws", file, why) < 0)
		return -1;
	static const char *const strs[] = { "region", "instance_type", "image", "endpoint", "profile",
		                             "quotas_endpoint", "ssh_user", "identity", "worker", "max_price",
		                             "host_key_checking", "known_hosts", "ssh", NULL };
	for (int k = 0; strs[k]; k++)
		if (sd_setting_check_str(s, strs[k], file, why) < 0)
			return -1;
	const cJSON *r = cJSON_GetObjectItemCaseSensitive(s, "region");
	if (!r)
		return sd_why(why, "%s: provider.region: missing (the AWS region to launch in, e.g. us-east-1)", file);
	if (!name_ok(r->valuestring, 31))
		return sd_why(why, "%s: provider.region: \"%.40s\" is not a region name (e.g. us-east-1)", file,
		              r->valuestring);
	const cJSON *img = cJSON_GetObjectItemCaseSensitive(s, "image");
	if (!img)
		return sd_why(why, "%s: provider.image: missing (an AMI id of the region with spotdeck-worker and "
		              "cloud-init, e.g. ami-0123456789abcdef0)", file);
	if (strncmp(img->valuestring, "ami-", 4) != 0 || strlen(img->valuestring) > 63 ||
	    strspn(img->valuestring + 4, "0123456789abcdef") != strlen(img->valuestring) - 4 || !img->valuestring[4])
		return sd_why(why, "%s: provider.image: \"%.64s\" is not an AMI id (ami- and hex digits)", file,
		              img->valuestring);
	const cJSON *zs = cJSON_GetObjectItemCaseSensitive(s, "zones"), *z;
	if (!cJSON_IsArray(zs) || cJSON_GetArraySize(zs) < 1 || cJSON_GetArraySize(zs) > SD_CLOUD_MAX_ZONES)
		return sd_why(why, "%s: provider.zones: expected a list of 1 to %d Availability Zones", file,
		              SD_CLOUD_MAX_ZONES);
	cJSON_ArrayForEach(z, zs) {
		if (!cJSON_IsString(z) || !name_ok(z->valuestring, 31) ||
		    strncmp(z->valuestring, r->valuestring, strlen(r->valuestring)) != 0 ||
		    strlen(z->valuestring) == strlen(r->valuestring))
			return sd_why(why, "%s: provider.zones: \"%.40s\" is not an Availability Zone of %s (e.g. %sa)",
			              file, cJSON_IsString(z) ? z->valuestring : "(not a string)", r->valuestring,
			              r->valuestring);
		for (const cJSON *y = zs->child; y != z; y = y->next)
			if (!strcmp(y->valuestring, z->valuestring))
				return sd_why(why, "%s: provider.zones: %s is listed twice", file, z->valuestring);
	}
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(s, "instance_type");
	if (t && (!strchr(t->valuestring, '.') || strlen(t->valuestring) > 31 ||
	          strspn(t->valuestring, "abcdefghijklmnopqrstuvwxyz0123456789-.") != strlen(t->valuestring)))
		return sd_why(why, "%s: provider.instance_type: \"%.40s\" is not an instance type (e.g. g4dn.xlarge)",
		              file, t->valuestring);
	if (t && !type_gpu(t->valuestring))
		return sd_why(why, "%s: provider.instance_type: %s has no GPU spotdeck knows (g4dn, g5, g6, g6e, "
		              "p3, p4d, p5, ...)", file, t->valuestring);
	const cJSON *mp = cJSON_GetObjectItemCaseSensitive(s, "max_price");
	if (mp && (strspn(mp->valuestring, "0123456789.") != strlen(mp->valuestring) || !(atof(mp->valuestring) > 0)))
		return sd_why(why, "%s: provider.max_price: \"%.20s\" is not a price in USD an hour (e.g. \"0.50\")",
		              file, mp->valuestring);
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(s, "endpoint");
	if (e) {
		const char *v = e->valuestring, *h = strstr(v, "://");
		size_t hl = h ? strcspn(h + 3, "/") : 0;
		if ((strncmp(v, "http://", 7) != 0 && strncmp(v, "https://", 8) != 0) || !hl || h[3] == ':' ||
		    h[3 + hl - 1] == ':' || (h[3 + hl] && strcmp(h + 3 + hl, "/") != 0))
			return sd_why(why, "%s: provider.endpoint: \"%.80s\" is not http(s)://HOST[:PORT] with no path",
			              file, v);
	}
	if (sd_setting_check_num(s, "gpu_count", 1, 16, 1, file, why) < 0 ||
	    sd_setting_check_num(s, "price_poll_s", 1, 86400, 0, file, why) < 0 ||
	    sd_setting_check_num(s, "boot_poll_s", 0.1, 60, 0, file, why) < 0)
		return -1;
	return sd_cloud_check_vm_settings(s, file, why);
}

/* The launch's UserData: a cloud-config giving the AMI's default user the
 * identity's public half (cloud-init's ssh_authorized_keys; its
 * documentation, "Module reference: SSH").  The private half must be
 * readable by its owner alone (as ssh itself demands). */
static int load_user_data(struct aws_provider *p, const char *file, char **why)
{
	char *key = NULL, err[600];
	if (sd_ssh_public_key(p->c.identity, &key, err, sizeof err) < 0)
		return sd_why(why, "%s: provider.identity: %s (ssh-keygen -t ed25519 -f FILE makes a key pair)", file, err);
	size_t n = strlen(key) + 64;
	p->user_data = sd_malloc(n);
	/* The key is quoted: YAML would take a comment after '#' otherwise. */
	snprintf(p->user_data, n, "#cloud-config\nssh_authorized_keys:\n  - \"%s\"\n", key);
	free(key);
	return 0;
}

/* ---- journal ---- */

static void on_http_attempt(void *arg, const struct sd_http_attempt *a)
{
	struct aws_provider *p = arg;
	if (!p->c.closing)
		sd_cloud_journal_attempt(p->c.fleet, "aws", a);
}

/* ---- servers ---- */

static void on_terminated(void *arg, const struct sd_ec2_vm_result *r)
{
	struct aws_server *s = arg;
	struct aws_provider *p = prov(s);
	if (r->ok)
		sd_cloud_deleted(&p->c, &s->v, r->ended_at, "TerminateInstances' answer");
	else if (!p->c.closing)
		sd_cloud_delete_failed(&p->c, &s->v, r->message);
	else
		s->v.st = SD_VM_RUNNING;   /* cut short by close: sent again there */
}

/* The TerminateInstances of S's instance (sd_cloud_delete's). */
static int aws_remove(struct sd_cloud *c, struct sd_cloud_vm *v, char *err, size_t errlen)
{
	struct aws_provider *p = aws_of(c);
	struct aws_server *s = aws_vm(v);
	if (!s->iid[0])
		return 1;   /* a launch in flight terminates when it ends */
	return sd_ec2_vm_terminate(p->aws, s->iid, on_terminated, s, err, errlen) < 0 ? -1 : 0;
}

/* An error's scope (sd_ec2_classify) blocks a zone, every zone (the
 * region: all offers are in one), or the cloud, for provider.block_s. */
static void block(struct aws_provider *p, int zone, const char *scope)
{
	double until = sd_fleet_now(p->c.fleet) + p->c.block_s;
	if (!strcmp(scope, "zone"))
		p->c.zone_blocked_until[zone] = until;
	else if (!strcmp(scope, "region"))
		for (int i = 0; i < p->c.nzones; i++)
			p->c.zone_blocked_until[i] = until;
	else if (!strcmp(scope, "cloud"))
		p->c.cloud_blocked_until = until;
}

static int capacity_code(const char *code)
{
	return !strcmp(code, "InsufficientInstanceCapacity") || !strcmp(code, "InsufficientHostCapacity") ||
	       !strcmp(code, "UnfulfillableCapacity") || !strcmp(code, "Server.InsufficientInstanceCapacity");
}

static void on_launched(void *arg, const struct sd_ec2_vm_result *r)
{
	struct aws_server *s = arg;
	struct aws_provider *p = prov(s);
	if (r->vm.id[0])
		snprintf(s->iid, sizeof s->iid, "%s", r->vm.id);
	if (p->c.closing) {
		if (r->ok)
			s->v.st = SD_VM_RUNNING;   /* close terminates it */
		return;
	}
	if (!r->ok) {
		s->v.st = SD_VM_GONE;
		block(p, s->v.zone, r->block);
		if (!s->v.released) {
			char msg[700];
			int scoped = strcmp(r->block, "none") && strcmp(r->block, "retry");
			snprintf(msg, sizeof msg, "%s%s%s", r->message, scoped ? "; blocked: " : "", scoped ? r->block : "");
			sd_cloud_vm_report(&p->c, &s->v, capacity_code(r->code) ? SD_PROVIDER_STOCKOUT : SD_PROVIDER_FAILED, r->code, msg);
		}
		/* EC2's own refusal (an error answer to RunInstances) made nothing.
		 * After anything else (an instance that stopped while booting, a
		 * lost answer) one may exist: terminated by id now, or by the
		 * run's tag at close. */
		if (s->iid[0]) {
			s->v.st = SD_VM_RUNNING;
			sd_cloud_delete(&p->c, &s->v);
		} else {
			s->lost_launch = !strcmp(r->block, "retry") || !strcmp(r->block, "none");
		}
		return;
	}
	s->v.st = SD_VM_WAIT_SSH;
	s->v.started_at = r->running_at;
	if (s->v.released) {
		sd_cloud_delete(&p->c, &s->v);
		return;
	}
	const char *addr = r->vm.public_ip[0] ? r->vm.public_ip : r->vm.private_ip;
	sd_cloud_boot_done(&p->c, &s->v, addr, r->vm.private_ip[0] ? r->vm.private_ip : addr);
}

/* S's instance runs at ADDR (COMM_ADDR: where other workers reach it): it
 * is PROVISIONED, and RUNNING once its sshd lets us in. */
/* ---- the backstop: the run's instances listed every poll_s ---- */

/* IN carries the Name of server S whose launch failed with no instance id:
 * EC2 made it after all (the answer was lost).  It bills, so it goes now,
 * not at the end of the run. */
static void end_lost_launch(struct aws_provider *p, struct aws_server *s, const struct sd_ec2_instance *in)
{
	s->lost_launch = 0;
	snprintf(s->iid, sizeof s->iid, "%s", in->id);
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "provider", "aws");
	cJSON_AddStringToObject(ev, "server", s->v.id);
	cJSON_AddStringToObject(ev, "instance", in->id);
	cJSON_AddStringToObject(ev, "reason", "the launch's answers were lost but EC2 made the instance: terminated");
	sd_fleet_journal(p->c.fleet, SD_EV_ERROR, ev);
	s->v.st = SD_VM_RUNNING;
	sd_cloud_delete(&p->c, &s->v);
}

/* A Spot interruption in EC2's own words: the instance was terminated,
 * or (with interruption behaviour stop) stopped, for Spot. */
static int spot_reason(const char *code)
{
	return !strcmp(code, "Server.SpotInstanceTermination") || !strcmp(code, "Server.SpotInstanceShutdown");
}

/* S's instance is shut down with no stateReason yet, or not listed
 * (STATE NULL): the worker's notice settles it; else it is looked at again
 * until preempt_wait_s has passed since it was first seen so. */
static void review(struct aws_provider *p, struct aws_server *s, const char *state)
{
	const char *source;
	char msg[700];
	if (sd_fleet_cloud_noticed(p->c.fleet, s->v.id, &source)) {
		snprintf(msg, sizeof msg, "instance %s is %s; its worker had reported the cloud's interruption notice%s%s",
		         s->iid, state ? state : "no longer listed", source[0] ? " from " : "", source);
		sd_cloud_verdict(&p->c, &s->v, SD_PROVIDER_REVOKED, "notice", NULL, msg);
		return;
	}
	double since;
	if (!sd_cloud_review_due(&p->c, &s->v, &since))
		return;
	snprintf(msg, sizeof msg, "instance %s is %s, and for %.0f s neither a stateReason nor a notice from its worker "
	         "said it was a Spot interruption%s%s", s->iid, state ? state : "no longer listed",
	         since, s->v.suspect_msg[0] ? "; " : "", s->v.suspect_msg);
	if (!state)
		s->v.st = SD_VM_GONE;   /* nothing left to terminate */
	sd_cloud_verdict(&p->c, &s->v, SD_PROVIDER_FAILED, "timeout", "VM_GONE", msg);
}

static void on_listed_vm(void *arg, const struct sd_ec2_instance *in)
{
	struct aws_provider *p = arg;
	if (in->state_code == SD_EC2_PENDING || in->state_code == SD_EC2_RUNNING)
		for (struct aws_server *s = aws_vm(p->c.servers); s; s = aws_vm(s->v.next))
			if (s->lost_launch && !s->iid[0] && s->v.id[0] && !strcmp(s->v.name, in->name)) {
				end_lost_launch(p, s, in);
				return;
			}
	for (struct aws_server *s = aws_vm(p->c.servers); s; s = aws_vm(s->v.next)) {
		if (strcmp(s->iid, in->id))
			continue;
		s->v.missing = 0;
		if (in->state_code == SD_EC2_PENDING || in->state_code == SD_EC2_RUNNING) {
			s->v.reviewing = 0;
			if (s->v.suspect && s->v.suspect_listing && (s->v.st == SD_VM_RUNNING || s->v.st == SD_VM_WAIT_SSH) &&
			    !s->v.released && !s->v.reported_end)
				/* It runs: a worker that ended there, or a host that
				 * stopped answering ssh, is the server's failure. */
				sd_cloud_verdict(&p->c, &s->v, SD_PROVIDER_FAILED, NULL, s->v.suspect_code, s->v.suspect_msg);
			continue;
		}
		sd_cloud_stopped(&s->v, sd_cloud_wall_now(), "the backstop's DescribeInstances");
		if (s->v.released || s->v.reported_end || (s->v.st != SD_VM_RUNNING && s->v.st != SD_VM_WAIT_SSH))
			continue;
		char msg[700];
		if (spot_reason(in->reason_code)) {
			snprintf(msg, sizeof msg, "instance %s is %s: %s", s->iid, in->state,
			         in->reason[0] ? in->reason : in->reason_code);
			sd_cloud_verdict(&p->c, &s->v, SD_PROVIDER_REVOKED, "state_reason", NULL, msg);
		} else if (!in->reason_code[0]) {
			review(p, s, in->state);
		} else if (sd_fleet_cloud_noticed(p->c.fleet, s->v.id, NULL)) {
			/* Another reason, but the run had the notice: EC2 took it
			 * (the worker's IMDS said so first). */
			review(p, s, in->state);
		} else {
			snprintf(msg, sizeof msg, "instance %s is %s without a Spot interruption: %s", s->iid, in->state,
			         in->reason[0] ? in->reason : in->reason_code);
			sd_cloud_verdict(&p->c, &s->v, SD_PROVIDER_FAILED, "state_reason", in->reason_code, msg);
		}
	}
}

static void on_listed(void *arg, int n, const char *error)
{
	struct aws_provider *p = arg;
	(void)n;
	p->c.listing = 0;
	if (p->c.closing || error)
		return;   /* an incomplete list is never taken for the truth */
	for (struct aws_server *s = aws_vm(p->c.servers); s; s = aws_vm(s->v.next)) {
		/* Terminated instances stay listed for about an hour: one not
		 * listed twice in a row is gone (the first may be eventual
		 * consistency), and judged as one with no stateReason. */
		if ((s->v.st == SD_VM_RUNNING || s->v.st == SD_VM_WAIT_SSH) && !s->v.released && !s->v.reported_end &&
		    s->v.missing >= 2) {
			sd_cloud_stopped(&s->v, sd_cloud_wall_now(), "the backstop's DescribeInstances");
			review(p, s, NULL);
		}
	}
}

static void ask_prices(struct aws_provider *p);

static void aws_list(struct sd_cloud *c)
{
	struct aws_provider *p = aws_of(c);
	if (p->c.closing || p->c.listing)
		return;
	int any = 0;
	for (struct aws_server *s = aws_vm(p->c.servers); s; s = aws_vm(s->v.next)) {
		if ((s->v.st == SD_VM_RUNNING || s->v.st == SD_VM_WAIT_SSH) && !s->v.released && !s->v.reported_end) {
			s->v.missing++;   /* until the list shows it */
			s->v.suspect_listing = s->v.suspect;
			any = 1;
		}
		any |= s->lost_launch;
	}
	if (!any)
		return;
	char err[256];
	p->c.listing = 1;
	if (sd_ec2_vm_list(p->aws, p->c.tag, on_listed_vm, on_listed, p, err, sizeof err) < 0)
		p->c.listing = 0;
}

static void on_backstop(uv_timer_t *t)
{
	struct aws_provider *p = t->data;
	if (p->c.closing)
		return;
	/* Spot prices move: asked again every price_poll_s. */
	if (isnan(p->quoted_usd) && !p->prices_pending && sd_cloud_wall_now() - p->prices_asked_at >= p->price_poll_s)
		ask_prices(p);
	aws_list(&p->c);
}

/* ---- start-up reconciliation ---- */

/* An instance of this run's tag that no server of this controller owns
 * and that is not terminated: a previous controller of the run left it.
 * With orphans "adopt" or "ask" a running one with an address in one of
 * the offers' zones is held for a server of this run (sd_cloud_settle);
 * any other is terminated, or with "keep" only journaled. */
static void on_reconcile_vm(void *arg, const struct sd_ec2_instance *in)
{
	struct aws_provider *p = arg;
	if (p->c.closing || p->c.no_run_dir || in->state_code == SD_EC2_TERMINATED ||
	    in->state_code == SD_EC2_SHUTTING_DOWN)
		return;
	/* One of ours whose RunInstances answer has not come yet is known by
	 * its Name tag. */
	for (const struct aws_server *s = aws_vm(p->c.servers); s; s = aws_vm(s->v.next))
		if (!strcmp(s->iid, in->id) || (s->v.id[0] && !strcmp(s->v.name, in->name)))
			return;
	int zi = sd_cloud_zone_index(&p->c, in->az);
	int hold = zi >= 0 && in->state_code == SD_EC2_RUNNING && (in->public_ip[0] || in->private_ip[0]) &&
	           sd_cloud_orphans_hold(&p->c.orph);
	int del = !hold && p->c.orph.what != SD_ORPHANS_KEEP;
	if (!hold || p->c.orph.what == SD_ORPHANS_ASK)
		sd_cloud_journal_orphan(p->c.fleet, "aws", in->id, in->az, in->state,
		                        hold ? "ask" : del ? "delete" : "keep", NULL);
	/* Kept ones are remembered as gone, so that the sweep at close leaves
	 * them too. */
	struct aws_server *s = aws_vm(sd_cloud_vm_new(&p->c, NULL, 0));
	snprintf(s->iid, sizeof s->iid, "%s", in->id);
	snprintf(s->v.name, sizeof s->v.name, "%s", in->name);
	s->v.zone = zi >= 0 ? zi : 0;
	if (hold) {
		s->v.st = SD_VM_HELD;
		snprintf(s->v.addr, sizeof s->v.addr, "%s", in->public_ip[0] ? in->public_ip : in->private_ip);
		snprintf(s->v.comm_addr, sizeof s->v.comm_addr, "%s", in->private_ip[0] ? in->private_ip : s->v.addr);
		snprintf(s->v.status, sizeof s->v.status, "%s", in->state);
		return;
	}
	s->v.released = 1;
	s->v.st = del ? SD_VM_RUNNING : SD_VM_GONE;
	if (del)
		sd_cloud_delete(&p->c, &s->v);
}

static int aws_insert(struct sd_cloud *c, struct sd_cloud_vm *v, char *err, size_t errlen);

/* ---- prices ---- */

static void on_prices(void *arg, const struct sd_http_response *r)
{
	struct aws_provider *p = arg;
	char err[256];
	if (r->cancelled || p->c.closing)
		return;
	p->prices_pending = 0;
	struct sd_ec2_spot_price sp[SD_CLOUD_MAX_ZONES * 8];
	int n = r->status == 200 ? sd_ec2_spot_prices_parse(r->body, r->body_len, sp, (int)(sizeof sp / sizeof sp[0]),
	                                                     NULL, 0, err, sizeof err)
	                         : -1;
	if (n < 0) {
		int any = 0;
		for (int zi = 0; zi < p->c.nzones; zi++)
			any |= !isnan(p->c.cc.prices[zi]);
		sd_cloud_journal_error(p->c.fleet, "aws", any ? "the Spot prices were not refreshed: the last ones stay"
		                                            : "no Spot prices: servers are not priced",
		                       r->status == 200 ? err : r->status ? "HTTP error" : r->error);
		return;
	}
	/* The prices are the market's as of now, changed or not. */
	p->c.cc.priced_at = sd_cloud_wall_now();
	/* Each AZ's price now: its newest item (EC2 lists the price in effect
	 * at StartTime and every change since; ISO 8601 stamps in one form
	 * order as text). */
	int newest[SD_CLOUD_MAX_ZONES];
	for (int zi = 0; zi < SD_CLOUD_MAX_ZONES; zi++)
		newest[zi] = -1;
	for (int k = 0; k < n; k++) {
		int zi = sd_cloud_zone_index(&p->c, sp[k].az);
		if (zi >= 0 && !strcmp(sp[k].type, p->instance_type) && sp[k].usd_per_hour > 0 &&
		    (newest[zi] < 0 || strcmp(sp[k].timestamp, sp[newest[zi]].timestamp) > 0))
			newest[zi] = k;
	}
	for (int zi = 0; zi < p->c.nzones; zi++) {
		if (newest[zi] < 0)
			continue;
		double was = p->c.cc.prices[zi], now = sp[newest[zi]].usd_per_hour;
		if (was == now)
			continue;
		cJSON *ev = cJSON_CreateObject();
		if (!isnan(was))
			cJSON_AddNumberToObject(ev, "was", was);
		cJSON_AddStringToObject(ev, "since", sp[newest[zi]].timestamp);
		cJSON_AddStringToObject(ev, "source", "DescribeSpotPriceHistory, Linux/UNIX");
		sd_cloud_set_price(&p->c.cc, p->c.fleet, zi, now, ev);
	}
}

static void ask_prices(struct aws_provider *p)
{
	char now[32], err[256];
	time_t t = time(NULL);
	strftime(now, sizeof now, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
	struct sd_sigv4_pair prm[] = {
		{"InstanceType.1", p->instance_type}, {"ProductDescription.1", "Linux/UNIX"}, {"StartTime", now},
	};
	p->prices_asked_at = sd_cloud_wall_now();
	if (sd_aws_call(p->aws, "DescribeSpotPriceHistory", prm, 3, 1, on_prices, p, err, sizeof err) < 0)
		snprintf(p->price_source, sizeof p->price_source, "unknown: %.140s", err);
	else
		p->prices_pending = 1;
}

/* The instance type's GPUs as EC2 states them (DescribeInstanceTypes:
 * gpuInfo), unless the job gives provider.gpu_count: a p5.48xlarge has 8. */
static void on_type(void *arg, const struct sd_http_response *r)
{
	struct aws_provider *p = arg;
	char err[256];
	struct sd_ec2_instance_type t;
	if (r->cancelled || p->c.closing || r->status != 200 ||
	    sd_ec2_instance_types_parse(r->body, r->body_len, &t, 1, err, sizeof err) != 1 || t.gpus < 1)
		return;   /* the default (1) stays; a run does not stop for it */
	p->gpu_count = t.gpus;
	for (int i = 0; i < p->c.cc.cat.noffers; i++)
		p->c.cc.offers[i].gpu_count = t.gpus;
}

static void ask_type(struct aws_provider *p)
{
	char err[256];
	struct sd_sigv4_pair prm[] = { {"InstanceType.1", p->instance_type} };
	sd_aws_call(p->aws, "DescribeInstanceTypes", prm, 1, 1, on_type, p, err, sizeof err);
}

/* ---- catalog ---- */

static void build_catalog(struct aws_provider *p)
{
	snprintf(p->gpu, sizeof p->gpu, "%s", type_gpu(p->instance_type));
	if (isnan(p->quoted_usd))
		snprintf(p->price_source, sizeof p->price_source, "aws: DescribeSpotPriceHistory, Linux/UNIX, at start "
		         "and every provider.price_poll_s");
	else
		snprintf(p->price_source, sizeof p->price_source, "quoted: the job's provider.usd_per_hour");
	struct sd_cloud_offer_spec spec = {
		.provider = "aws",
		.region = p->region,
		.machine_type = p->instance_type,
		.gpu = p->gpu,
		.gpu_count = p->gpu_count,
		.usd_per_hour = p->quoted_usd,
		.price_source = p->price_source,
		.notice_seconds = 120,
		.notice_source = "documented: a Spot Instance interruption notice comes 2 minutes before",
		.capacity_source = "unknown: EC2 says when an AZ runs out",
		.billing_source = "documented: Linux Spot per second, 1-minute minimum",
		.catalog_file = p->region,   /* the cockpit: "real market: aws REGION" */
		.catalog_name = "aws spot instances",
	};
	sd_cloud_catalog_build(&p->c.cc, &spec, p->c.zones, p->c.nzones);
}

/* ---- the operations ---- */

static struct sd_aws_client *new_client(struct aws_provider *p, struct sd_http *http, char *err, size_t errlen)
{
	struct sd_aws_client_config cfg = { .region = p->region, .endpoint = p->endpoint, .profile = p->profile };
	return sd_aws_client_new(http, &cfg, err, errlen);
}

static const struct sd_cloud_ops aws_cloud;

static int aws_create(struct sd_provider **out, const struct sd_provider_env *env, char **why)
{
	*out = NULL;
	const cJSON *s = env->settings;
	const char *file = env->settings_file ? env->settings_file : "job";
	struct aws_provider *p = sd_calloc(1, sizeof *p);
	sd_cloud_init(&p->c, &aws_cloud, env, PREEMPT_WAIT_S);
	p->region = sd_setting_str(s, "region", NULL);
	p->endpoint = sd_setting_str(s, "endpoint", NULL);
	p->profile = sd_setting_str(s, "profile", NULL);
	p->instance_type = sd_setting_str(s, "instance_type", "g4dn.xlarge");
	p->image = sd_setting_str(s, "image", NULL);
	p->max_price = sd_setting_str(s, "max_price", NULL);
	p->gpu_count = (int)sd_setting_num(s, "gpu_count", 1);
	p->boot_poll_s = sd_setting_num(s, "boot_poll_s", 2);
	p->price_poll_s = sd_setting_num(s, "price_poll_s", 300);
	p->quoted_usd = sd_setting_num(s, "usd_per_hour", NAN);
	if (!p->region || !p->image || p->c.nzones == 0 || !type_gpu(p->instance_type)) {
		sd_cloud_free((struct sd_provider *)(void *)p);
		return sd_why(why, "%s: provider.region, provider.image and provider.zones are required", file);
	}
	if (load_user_data(p, file, why) < 0 ||
	    sd_cloud_run_label(env->run_dir, "aws-label", p->c.tag, &p->c.no_run_dir, why) < 0) {
		sd_cloud_free((struct sd_provider *)(void *)p);
		return -1;
	}
	p->c.orph.what = sd_cloud_orphans(env, s);
	/* As gce.c: only workers that dial the controller themselves
	 * (--advertise) need a route to it. */
	if (sd_cloud_check_advertise(&p->c, env, p->endpoint && sd_url_is_loopback(p->endpoint), file, why) < 0) {
		sd_cloud_free((struct sd_provider *)(void *)p);
		return -1;
	}
	char err[512];
	p->c.http = sd_http_new(p->c.loop, NULL, on_http_attempt, p, err, sizeof err);
	if (!p->c.http) {
		sd_cloud_free((struct sd_provider *)(void *)p);
		return sd_why(why, "aws: %s", err);
	}
	p->aws = new_client(p, p->c.http, err, sizeof err);
	if (!p->aws) {
		sd_cloud_free((struct sd_provider *)(void *)p);
		return sd_why(why, "%s: provider: %s", file, err);
	}
	if (sd_cloud_open_transport(&p->c, env, why) < 0) {
		sd_cloud_free((struct sd_provider *)(void *)p);
		return -1;
	}
	build_catalog(p);
	sd_cloud_catalog_model_journaled(&p->c.cc, env->catalog_path, p->c.fleet, "aws");
	if (isnan(p->quoted_usd))
		ask_prices(p);
	if (!cJSON_GetObjectItemCaseSensitive(s, "gpu_count"))
		ask_type(p);
	sd_cloud_start(&p->c, on_backstop);
	*out = (struct sd_provider *)(void *)p;
	return 0;
}

/* Launches S's instance (Name sd-TAG-SERVER) in its zone. */
static int aws_insert(struct sd_cloud *c, struct sd_cloud_vm *v, char *err, size_t errlen)
{
	struct aws_provider *p = aws_of(c);
	struct aws_server *s = aws_vm(v);
	int zi = s->v.zone;
	s->v.st = SD_VM_CREATING;
	struct sd_ec2_instance_spec spec = {
		.az = p->c.zones[zi],
		.name = s->v.name,
		.type = p->instance_type,
		.image = p->image,
		.user_data = p->user_data,
		.run = p->c.tag,
		.max_price = p->max_price,
	};
	return sd_ec2_vm_launch(p->aws, &spec, p->boot_poll_s, on_launched, s, err, errlen);
}

/* ---- the end: every instance of the run not known gone is terminated on
 * a private loop: those this controller knows, then any other the run's
 * tag lists (a launch whose answer never came) ---- */

struct final {
	struct aws_provider *p;
	struct sd_aws_client *aws;
	int unseen;   /* launches in flight at close whose instance no list showed yet */
};

/* S's launch was in flight when the run closed (its answer cut off), or its
 * answers were lost: EC2 may have made an instance we have no id for. */
static int launch_unknown(const struct aws_server *s)
{
	return !s->iid[0] && s->v.name[0] && (s->v.st == SD_VM_CREATING || s->lost_launch);
}

static void on_final_terminated(void *arg, const struct sd_ec2_vm_result *r)
{
	struct aws_server *s = arg;
	prov(s)->c.final_pending--;
	if (r->ok)
		sd_cloud_deleted(&prov(s)->c, &s->v, r->ended_at, "TerminateInstances' answer");
}

static void on_final_listed_vm(void *arg, const struct sd_ec2_instance *in)
{
	struct final *fin = arg;
	struct aws_provider *p = fin->p;
	if (in->state_code == SD_EC2_TERMINATED || in->state_code == SD_EC2_SHUTTING_DOWN)
		return;
	struct aws_server *s;
	for (s = aws_vm(p->c.servers); s; s = aws_vm(s->v.next))
		if (!strcmp(s->iid, in->id))
			break;
	if (!s)   /* the instance of a launch whose answer the close cut off */
		for (s = aws_vm(p->c.servers); s; s = aws_vm(s->v.next))
			if (launch_unknown(s) && !strcmp(s->v.name, in->name)) {
				snprintf(s->iid, sizeof s->iid, "%s", in->id);
				s->lost_launch = 0;
				fin->unseen--;
				break;
			}
	if (s && (s->v.st == SD_VM_GONE || s->v.st == SD_VM_DELETING))
		return;   /* gone, or its terminate is on its way */
	if (!s) {
		s = aws_vm(sd_cloud_vm_new(&p->c, NULL, 0));
		snprintf(s->iid, sizeof s->iid, "%s", in->id);
		s->v.released = 1;
	}
	char err[256];
	s->v.st = SD_VM_DELETING;
	if (sd_ec2_vm_terminate(fin->aws, s->iid, on_final_terminated, s, err, sizeof err) == 0)
		p->c.final_pending++;
}

static void on_final_listed(void *arg, int n, const char *error)
{
	struct final *fin = arg;
	(void)n;
	(void)error;
	fin->p->c.final_pending--;
}

static void aws_sweep(struct sd_cloud *c)
{
	struct aws_provider *p = aws_of(c);
	uv_loop_t loop;
	if (uv_loop_init(&loop) < 0)
		return;
	char err[512];
	/* Attempts of 20 s: three fit in the minute close waits. */
	static const struct sd_http_policy close_policy = { .timeout_s = 20 };
	struct sd_http *http = sd_http_new(&loop, &close_policy, NULL, NULL, err, sizeof err);
	struct final fin = { .p = p, .aws = http ? new_client(p, http, err, sizeof err) : NULL };
	p->c.final_pending = 0;
	for (struct aws_server *s = aws_vm(p->c.servers); fin.aws && s; s = aws_vm(s->v.next))
		if (s->v.st != SD_VM_GONE && s->iid[0] &&
		    sd_ec2_vm_terminate(fin.aws, s->iid, on_final_terminated, s, err, sizeof err) == 0) {
			s->v.st = SD_VM_DELETING;
			p->c.final_pending++;
		}
	for (struct aws_server *s = aws_vm(p->c.servers); s; s = aws_vm(s->v.next))
		fin.unseen += launch_unknown(s);
	/* The list counts as one call pending until it has answered.  A launch
	 * cut off by the close may still make its instance after a list (EC2
	 * takes a RunInstances it has received to the end, and DescribeInstances
	 * is eventually consistent): while one is unseen the list is asked
	 * again, every CLOSE_RELIST_S for CLOSE_RELIST_FOR_S. */
	uint64_t t0 = uv_now(&loop);
	for (int round = 0; fin.aws; round++) {
		if (round) {
			if (!fin.unseen || uv_now(&loop) - t0 > (uint64_t)(CLOSE_RELIST_FOR_S * 1000))
				break;
			int never = 1;   /* a pause on this loop: nothing counts it done */
			sd_cloud_run_until(&loop, &never, CLOSE_RELIST_S);
		}
		if (sd_ec2_vm_list(fin.aws, p->c.tag, on_final_listed_vm, on_final_listed, &fin, err, sizeof err) < 0)
			break;
		p->c.final_pending++;
		sd_cloud_run_until(&loop, &p->c.final_pending, CLOSE_TERMINATE_WAIT_S);
	}
	/* What could not be terminated may still run, and bill: said. */
	cJSON *left = cJSON_CreateArray();
	for (struct aws_server *s = aws_vm(p->c.servers); s; s = aws_vm(s->v.next))
		if (s->v.st != SD_VM_GONE && s->iid[0])
			cJSON_AddItemToArray(left, cJSON_CreateString(s->iid));
	sd_cloud_journal_left(p->c.fleet, "aws", p->c.tag, left, fin.aws ? NULL : err);
	if (fin.aws)
		sd_ec2_vm_cancel_waiting(fin.aws);
	if (http)
		sd_http_close(http, NULL, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	if (fin.aws)
		sd_aws_client_free(fin.aws);
	uv_loop_close(&loop);
}

/* ---- the lifecycle's calls into EC2 (cloud-vm.h) ---- */

static const char *aws_ref(const struct sd_cloud_vm *v)
{
	return ((const struct aws_server *)(const void *)v)->iid;
}

static int aws_known(const struct sd_cloud_vm *v)
{
	return aws_ref(v)[0] != 0;
}

/* The Name tag is set at once: the start-up list knows a waiting server's
 * instance by it. */
static void aws_acquired(struct sd_cloud *c, struct sd_cloud_vm *v)
{
	snprintf(v->name, sizeof v->name, "sd-%s-%s", c->tag, v->id);
}

static int aws_reconcile(struct sd_cloud *c, char *err, size_t errlen)
{
	return sd_ec2_vm_list(aws_of(c)->aws, c->tag, on_reconcile_vm, sd_cloud_on_reconciled, c, err, errlen);
}

static void aws_cancel(struct sd_cloud *c)
{
	sd_ec2_vm_cancel_waiting(aws_of(c)->aws);
}

static void aws_free_api(struct sd_cloud *c)
{
	struct aws_provider *p = aws_of(c);
	if (p->aws)
		sd_aws_client_free(p->aws);
	free(p->region);
	free(p->endpoint);
	free(p->profile);
	free(p->instance_type);
	free(p->image);
	free(p->max_price);
	free(p->user_data);
}

static void aws_adopt(struct sd_cloud_vm *v, const struct sd_cloud_vm *h)
{
	struct aws_server *s = aws_vm(v);
	snprintf(s->iid, sizeof s->iid, "%s", aws_ref(h));
	s->v.started_at = sd_cloud_wall_now();
}

static const struct sd_cloud_ops aws_cloud = {
	.name = "aws",
	.vm_word = "instance",
	.vms_word = "instances",
	.insert_call = "RunInstances",
	.whole_scope = "an account-wide error",
	.zone_word = "",
	.quota_owner = "the region's",
	.delete_verb = "terminated",
	.billed_from = "seen running",
	.place = "EC2 instances",
	.default_ssh_user = "ubuntu",
	.default_identity = "~/.ssh/id_ed25519",
	.vm_size = sizeof(struct aws_server),
	.keep_forgets = 0,   /* the close's sweep by tag must leave kept instances alone */
	.ref = aws_ref,
	.known = aws_known,
	.acquired = aws_acquired,
	.insert = aws_insert,
	.remove = aws_remove,
	.list = aws_list,
	.adopt = aws_adopt,
	.reconcile = aws_reconcile,
	.cancel = aws_cancel,
	.sweep = aws_sweep,
	.free_api = aws_free_api,
};

const struct sd_provider_ops sd_provider_aws = {
	.name = "aws",
	.description = "Spot instances on Amazon EC2, the worker started over OpenSSH",
	.emulated = 0,
	.check = aws_check,
	.path_settings = path_settings,
	.create = aws_create,
	SD_CLOUD_PROVIDER_OPS,
};
