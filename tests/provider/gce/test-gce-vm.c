/* tests/provider/gce/test-gce-vm.c - a Spot VM's life (src/provider/gce/gce-vm.h) against the
 * fake Compute Engine (tests/fake-cloud/gce.py at argv[1], the key file
 * argv[2]): a VM created to RUNNING with its address and label; a zone's
 * stockout inside the Operation and a 403 quota, each with its failover
 * scope and nothing left behind; an insert whose answer is lost, resent
 * with the same requestId and made once; a run's VMs listed; a preemption
 * told from a crash; deletes, also of what is already gone.
 * Run by tests/provider/gce/test-gce-vm.sh. */
#include "config.h"
#include "src/provider/gce/gce-vm.h"
#include "src/provider/http/http.h"

#include "tests/check.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uv_loop_t *loop;
static struct sd_http *http;
static struct sd_gce_client *gce;
static const char *base;

struct done {
	int n;
	struct sd_gce_vm_result r;
	int count, preempted;
	double ended_at;
	char error[700];
	char names[8][64];
};

static void on_vm(void *arg, const struct sd_gce_vm_result *r)
{
	struct done *d = arg;
	d->r = *r;
	d->n++;
}

static void wait_done(struct done *d)
{
	while (!d->n)
		uv_run(loop, UV_RUN_ONCE);
	CHECK_INT(d->n, 1);
}

struct raw {
	int n;
	long status;
	char *body;
};

static void on_raw(void *arg, const struct sd_http_response *r)
{
	struct raw *w = arg;
	w->n++;
	w->status = r->status;
	w->body = strdup(r->body);
}

/* METHOD BASE/PATH with BODY, no token (the fake's control endpoints):
 * the parsed answer (caller deletes). */
static cJSON *control(const char *method, const char *path, const char *body)
{
	char url[512], err[256];
	struct raw w = {0};
	snprintf(url, sizeof url, "%s%s", base, path);
	struct sd_http_request rq = {.method = method, .url = url, .body = body,
				     .body_len = body ? strlen(body) : 0, .idempotent = 1};
	if (!sd_http_send(http, &rq, on_raw, &w, err, sizeof err)) {
		CHECK(0, "%s", err);
		return NULL;
	}
	while (!w.n)
		uv_run(loop, UV_RUN_ONCE);
	CHECK(w.status == 200, "%s %s: HTTP %ld %s", method, path, w.status, w.body);
	cJSON *j = cJSON_Parse(w.body);
	free(w.body);
	return j;
}

/* Instances named NAME in the fake's state (any status). */
static int fake_has(const char *name)
{
	cJSON *j = control("GET", "/_control/state", NULL), *it;
	int n = 0;
	cJSON_ArrayForEach(it, cJSON_GetObjectItem(j, "instances")) {
		const char *nm = cJSON_GetStringValue(cJSON_GetObjectItem(it, "name"));
		n += nm && !strcmp(nm, name);
	}
	cJSON_Delete(j);
	return n;
}

static struct sd_gce_instance_spec spec(const char *zone, const char *name)
{
	return (struct sd_gce_instance_spec){
		.project = "p1", .zone = zone, .name = name, .machine_type = "n1-standard-8",
		.accelerator = "nvidia-tesla-t4", .accelerator_count = 1,
		.image = "projects/deeplearning-platform-release/global/images/family/common-cu124",
		.disk_gb = 100, .startup_script = "#!/bin/bash\ntrue\n", .run = "r1", .external_ip = 1,
	};
}

static void create(const char *zone, const char *name, struct done *d)
{
	char err[256];
	struct sd_gce_instance_spec s = spec(zone, name);
	memset(d, 0, sizeof *d);
	if (sd_gce_vm_create(gce, &s, 0.1, on_vm, d, err, sizeof err) < 0) {
		CHECK(0, "create %s: %s", name, err);
		return;
	}
	wait_done(d);
}

static void test_create(void)
{
	struct done d;
	cJSON_Delete(control("POST", "/_control/addresses", "{\"ips\": [\"127.0.0.2\"]}"));
	create("us-central1-a", "sd-r1-s1", &d);
	CHECK(d.r.ok, "create: %s %s", d.r.code, d.r.message);
	CHECK_STR(d.r.vm.status, "RUNNING");
	CHECK_STR(d.r.vm.nat_ip, "127.0.0.2");
	CHECK_STR(d.r.vm.run, "r1");
	CHECK_STR(d.r.vm.zone, "us-central1-a");
	CHECK_STR(d.r.target, "https://www.googleapis.com/compute/v1/projects/p1/zones/us-central1-a/instances/sd-r1-s1");
	check_report(1, "create: insert, Operation DONE, RUNNING at 127.0.0.2 with the run's label in %.2f s",
		     d.r.seconds);

	/* A stockout is inside the Operation: the zone is blocked, nothing is left. */
	cJSON_Delete(control("POST", "/_control/stockout", "{\"zone\": \"us-central1-b\", \"count\": 1}"));
	create("us-central1-b", "sd-r1-s2", &d);
	CHECK_INT(d.r.ok, 0);
	CHECK_STR(d.r.code, "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS");
	CHECK_STR(sd_gce_block_name(d.r.block), "zone");
	CHECK(strstr(d.r.message, "us-central1-b") != NULL, "%s", d.r.message);
	CHECK_INT(fake_has("sd-r1-s2"), 0);
	/* The quota is checked at once: 403, the whole cloud is out. */
	cJSON_Delete(control("POST", "/_control/quota", "{\"gpus\": 1}"));
	create("europe-west4-a", "sd-r1-s3", &d);
	CHECK_INT(d.r.ok, 0);
	CHECK_STR(d.r.code, "quotaExceeded");
	CHECK_STR(sd_gce_block_name(d.r.block), "cloud");
	CHECK(strstr(d.r.message, "GPUS_ALL_REGIONS") != NULL, "%s", d.r.message);
	CHECK_INT(fake_has("sd-r1-s3"), 0);
	cJSON_Delete(control("POST", "/_control/quota", "{\"gpus\": 8}"));
	check_report(1, "a stockout blocks the zone, the global GPU quota the cloud; no VM is left behind");

	/* The insert is made, its answer lost (503): resent with the same
	 * requestId, and GCE makes it once. */
	cJSON_Delete(control("POST", "/_control/fail",
			     "{\"prefix\": \"/compute/v1/projects/p1/zones/us-central1-a/instances\", "
			     "\"status\": 503, \"count\": 1, \"after\": true}"));
	create("us-central1-a", "sd-r1-s4", &d);
	CHECK(d.r.ok, "create after a lost answer: %s %s", d.r.code, d.r.message);
	CHECK_INT(fake_has("sd-r1-s4"), 1);
	cJSON *log = control("GET", "/_control/log", NULL), *it;
	char ids[4][64];
	int posts = 0;
	cJSON_ArrayForEach(it, cJSON_GetObjectItem(log, "requests")) {
		const char *m = cJSON_GetStringValue(cJSON_GetObjectItem(it, "method"));
		const char *p = cJSON_GetStringValue(cJSON_GetObjectItem(it, "path"));
		const char *rid = cJSON_GetStringValue(cJSON_GetObjectItem(it, "request_id"));
		if (m && p && !strcmp(m, "POST") && !strcmp(p, "/compute/v1/projects/p1/zones/us-central1-a/instances")) {
			if (posts < 4)
				snprintf(ids[posts], sizeof ids[0], "%s", rid ? rid : "");
			posts++;
		}
	}
	cJSON_Delete(log);
	/* s1's insert, then s4's twice with one requestId. */
	CHECK_INT(posts, 3);
	if (posts == 3) {
		CHECK(strlen(ids[1]) == 36 && !strcmp(ids[1], ids[2]), "the resent insert's requestId: %s then %s",
		      ids[1], ids[2]);
		CHECK(strcmp(ids[0], ids[1]) != 0, "two VMs' inserts share requestId %s", ids[0]);
	}
	check_report(1, "an insert whose answer was lost is resent with its requestId: one VM");
}

static void on_each(void *arg, const struct sd_gce_instance *in);
static void on_list_done(void *arg, int n, const char *error);

/* On a GCE VM the controller takes its token from the metadata server: the
 * fake's VM sd-r1-s1 has one (fakeMetadataHost), whose tokens the API takes. */
static void test_metadata_token(void)
{
	char host[64] = "", root[256], err[256];
	cJSON *j = control("GET", "/_control/state", NULL), *it;
	cJSON_ArrayForEach(it, cJSON_GetObjectItem(j, "instances")) {
		const char *nm = cJSON_GetStringValue(cJSON_GetObjectItem(it, "name"));
		const char *mh = cJSON_GetStringValue(cJSON_GetObjectItem(it, "fakeMetadataHost"));
		if (nm && mh && !strcmp(nm, "sd-r1-s1"))
			snprintf(host, sizeof host, "%s", mh);
	}
	cJSON_Delete(j);
	CHECK(host[0], "sd-r1-s1 has no fakeMetadataHost");
	snprintf(root, sizeof root, "%s/compute/v1", base);
	struct sd_gce_client_config cfg = {.project = "p1", .compute_root = root, .metadata_host = host};
	struct sd_gce_client *vm = sd_gce_client_new(http, &cfg, err, sizeof err);
	CHECK(vm != NULL, "%s", err);
	if (!vm)
		return;
	CHECK_STR(sd_gce_client_identity(vm), "the metadata server's default service account");
	CHECK(sd_gce_client_token_left(vm) < 0, "a token before any call");
	struct done d;
	memset(&d, 0, sizeof d);
	const char *zones[] = {"us-central1-a"};
	CHECK_INT(sd_gce_vm_list(vm, zones, 1, "r1", on_each, on_list_done, &d, err, sizeof err), 0);
	wait_done(&d);
	CHECK(d.preempted == 2 && !d.error[0], "list with the metadata server's token: %d (%s)", d.preempted,
	      d.error);
	CHECK(sd_gce_client_token_left(vm) > 60, "token left %.0f s", sd_gce_client_token_left(vm));
	sd_gce_client_free(vm);
	/* A metadata server that is not there: the call fails with "token: ...". */
	cfg.metadata_host = "127.0.0.1:9";
	vm = sd_gce_client_new(http, &cfg, err, sizeof err);
	memset(&d, 0, sizeof d);
	CHECK_INT(sd_gce_vm_list(vm, zones, 1, "r1", on_each, on_list_done, &d, err, sizeof err), 0);
	wait_done(&d);
	CHECK(d.preempted == -1 && strstr(d.error, "token: ") != NULL, "no metadata server: %d (%s)", d.preempted,
	      d.error);
	sd_gce_client_free(vm);
	check_report(1, "the metadata server's token (a controller on a GCE VM); none there fails the call");
}

static void on_each(void *arg, const struct sd_gce_instance *in)
{
	struct done *d = arg;
	if (d->count < 8)
		snprintf(d->names[d->count], sizeof d->names[0], "%s", in->name);
	d->count++;
}

static void on_list_done(void *arg, int n, const char *error)
{
	struct done *d = arg;
	d->n++;
	d->preempted = n;
	snprintf(d->error, sizeof d->error, "%s", error ? error : "");
}

static void on_fate(void *arg, int preempted, double ended_at, const char *error)
{
	struct done *d = arg;
	d->n++;
	d->preempted = preempted;
	d->ended_at = ended_at;
	snprintf(d->error, sizeof d->error, "%s", error ? error : "");
}

/* Polls instance NAME until its status is WANT (or it is gone, WANT ""). */
static void await_status(const char *zone, const char *name, const char *want)
{
	for (int i = 0; i < 100; i++) {
		cJSON *j = control("GET", "/_control/state", NULL), *it;
		const char *st = "";
		cJSON_ArrayForEach(it, cJSON_GetObjectItem(j, "instances")) {
			const char *nm = cJSON_GetStringValue(cJSON_GetObjectItem(it, "name"));
			if (nm && !strcmp(nm, name) && strstr(cJSON_GetStringValue(cJSON_GetObjectItem(it, "zone")) ?
							       cJSON_GetStringValue(cJSON_GetObjectItem(it, "zone")) : "", zone))
				st = cJSON_GetStringValue(cJSON_GetObjectItem(it, "status"));
		}
		int hit = st && !strcmp(st, want);
		cJSON_Delete(j);
		if (hit)
			return;
		uv_sleep(100);
	}
	CHECK(0, "%s never became '%s'", name, want);
}

static void test_list_fate_delete(void)
{
	char err[256];
	struct done d;
	const char *zones[] = {"us-central1-a", "us-central1-b", "europe-west4-a"};
	memset(&d, 0, sizeof d);
	CHECK_INT(sd_gce_vm_list(gce, zones, 3, "r1", on_each, on_list_done, &d, err, sizeof err), 0);
	wait_done(&d);
	CHECK_STR(d.error, "");
	CHECK_INT(d.preempted, 2);
	CHECK_INT(d.count, 2);
	CHECK((!strcmp(d.names[0], "sd-r1-s1") && !strcmp(d.names[1], "sd-r1-s4")) ||
	      (!strcmp(d.names[0], "sd-r1-s4") && !strcmp(d.names[1], "sd-r1-s1")),
	      "listed %s, %s", d.names[0], d.names[1]);
	memset(&d, 0, sizeof d);
	CHECK_INT(sd_gce_vm_list(gce, zones, 3, "r2", on_each, on_list_done, &d, err, sizeof err), 0);
	wait_done(&d);
	CHECK_INT(d.count, 0);
	CHECK_INT(sd_gce_vm_list(gce, zones, 3, "R2 OR 1", on_each, on_list_done, &d, err, sizeof err), -1);
	check_report(1, "a run's VMs listed across zones by label (another run's: none)");

	/* Preempted (action DELETE, spotdeck's: the instance is gone) and
	 * crashed (TERMINATED) differ only by the compute.instances.preempted
	 * operation, which only the preemption leaves. */
	cJSON_Delete(control("POST", "/_control/preempt", "{\"name\": \"sd-r1-s1\", \"notice_s\": 0.3}"));
	cJSON_Delete(control("POST", "/_control/crash", "{\"name\": \"sd-r1-s4\"}"));
	await_status("us-central1-a", "sd-r1-s1", "");
	await_status("us-central1-a", "sd-r1-s4", "TERMINATED");
	const char *link = "https://www.googleapis.com/compute/v1/projects/p1/zones/us-central1-a/instances/";
	char target[256];
	snprintf(target, sizeof target, "%ssd-r1-s1", link);
	memset(&d, 0, sizeof d);
	CHECK_INT(sd_gce_vm_fate(gce, "us-central1-a", target, on_fate, &d, err, sizeof err), 0);
	wait_done(&d);
	CHECK(d.preempted == 1, "s1: preempted %d (%s)", d.preempted, d.error);
	/* The power-off time, from the operation's endTime: in the last
	 * minute of this machine's clock (the fake runs here). */
	CHECK(d.ended_at > (double)time(NULL) - 60 && d.ended_at <= (double)time(NULL) + 1,
	      "s1: the preempted operation's endTime %.3f, now %lld", d.ended_at, (long long)time(NULL));
	snprintf(target, sizeof target, "%ssd-r1-s4", link);
	memset(&d, 0, sizeof d);
	CHECK_INT(sd_gce_vm_fate(gce, "us-central1-a", target, on_fate, &d, err, sizeof err), 0);
	wait_done(&d);
	CHECK(d.preempted == 0, "s4: preempted %d (%s)", d.preempted, d.error);
	check_report(1, "a preemption is told from a crash by the compute.instances.preempted operation");

	/* Deletes: a TERMINATED VM, then the same again (404: done already). */
	for (int i = 0; i < 2; i++) {
		memset(&d, 0, sizeof d);
		CHECK_INT(sd_gce_vm_delete(gce, "us-central1-a", "sd-r1-s4", on_vm, &d, err, sizeof err), 0);
		wait_done(&d);
		CHECK(d.r.ok, "delete %d: %s %s", i, d.r.code, d.r.message);
	}
	CHECK_INT(fake_has("sd-r1-s4"), 0);
	CHECK_INT(sd_gce_vm_delete(gce, "us-central1-a", "Bad_Name", on_vm, &d, err, sizeof err), -1);
	check_report(1, "delete waits for its Operation; deleting what is gone succeeds");

	char a[37], b[37];
	CHECK_INT(sd_http_request_id(a), 0);
	CHECK_INT(sd_http_request_id(b), 0);
	CHECK(strlen(a) == 36 && a[14] == '4' && strchr("89ab", a[19]) && strcmp(a, b) != 0, "uuids %s %s", a, b);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: test-gce-vm http://127.0.0.1:PORT KEYFILE (tests/fake-cloud/gce.py)\n");
		return 2;
	}
	base = argv[1];
	loop = uv_default_loop();
	char err[512], root[256];
	struct sd_http_policy pol = {.backoff_base_s = 0.05, .backoff_cap_s = 0.2};
	http = sd_http_new(loop, &pol, NULL, NULL, err, sizeof err);
	snprintf(root, sizeof root, "%s/compute/v1", base);
	struct sd_gce_client_config cfg = {.project = "p1", .compute_root = root, .key_file = argv[2]};
	gce = http ? sd_gce_client_new(http, &cfg, err, sizeof err) : NULL;
	if (!gce) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	test_create();
	test_metadata_token();
	test_list_fate_delete();
	sd_gce_client_free(gce);
	sd_http_close(http, NULL, NULL);
	uv_run(loop, UV_RUN_DEFAULT);
	return check_exit("test-gce-vm");
}
