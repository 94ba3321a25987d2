/* tests/provider/gce/test-gce-api.c - Compute Engine v1 bodies (src/provider/gce/gce-api.h):
 * the insert body has the Spot block the reference gives, and the bodies
 * Google documents (an Operation that ran out of zone resources, the 403
 * quota error, instances and lists) read back as the provider needs them,
 * and each error lands in the failover scope SkyPilot gives it. */
#include "config.h"
#include "src/provider/gce/gce-api.h"

#include "tests/check.h"

#include <cJSON.h>
#include <stdio.h>
#include <string.h>

static const char *path_str(const cJSON *j, const char *path)
{
	char buf[256];
	snprintf(buf, sizeof buf, "%s", path);
	const cJSON *cur = j;
	for (char *tok = strtok(buf, "."); tok && cur; tok = strtok(NULL, ".")) {
		if (tok[0] >= '0' && tok[0] <= '9')
			cur = cJSON_GetArrayItem(cur, tok[0] - '0');
		else
			cur = cJSON_GetObjectItemCaseSensitive(cur, tok);
	}
	if (cJSON_IsString(cur))
		return cur->valuestring;
	if (cJSON_IsBool(cur))
		return cJSON_IsTrue(cur) ? "true" : "false";
	if (cJSON_IsNumber(cur)) {
		static char num[32];
		snprintf(num, sizeof num, "%g", cur->valuedouble);
		return num;
	}
	return NULL;
}

static void test_insert_body(void)
{
	char err[256];
	struct sd_gce_instance_spec s = {
		.project = "proj-1", .zone = "us-central1-a", .name = "sd-run1-s3",
		.machine_type = "n1-standard-8", .accelerator = "nvidia-tesla-t4", .accelerator_count = 1,
		.image = "projects/deeplearning-platform-release/global/images/family/common-cu124",
		.disk_gb = 100, .startup_script = "#!/bin/bash\necho \"hi\"\n",
		.ssh_keys = "spotdeck:ssh-ed25519 AAAAC3Nz spotdeck-run1", .run = "run1", .external_ip = 1,
	};
	char *t = sd_gce_instance_json(&s, err, sizeof err);
	CHECK(t != NULL, "%s", err);
	cJSON *j = cJSON_Parse(t);
	CHECK(j != NULL, "not JSON: %s", t);
	static const struct {
		const char *path, *want;
	} want[] = {
		{"name", "sd-run1-s3"},
		{"machineType", "zones/us-central1-a/machineTypes/n1-standard-8"},
		{"guestAccelerators.0.acceleratorType",
		 "projects/proj-1/zones/us-central1-a/acceleratorTypes/nvidia-tesla-t4"},
		{"guestAccelerators.0.acceleratorCount", "1"},
		{"scheduling.provisioningModel", "SPOT"},
		{"scheduling.instanceTerminationAction", "DELETE"},
		{"scheduling.onHostMaintenance", "TERMINATE"},
		{"scheduling.automaticRestart", "false"},
		{"scheduling.preemptible", "true"},
		{"disks.0.boot", "true"},
		{"disks.0.autoDelete", "true"},
		{"disks.0.initializeParams.sourceImage",
		 "projects/deeplearning-platform-release/global/images/family/common-cu124"},
		{"disks.0.initializeParams.diskSizeGb", "100"},
		{"disks.0.initializeParams.diskType", "zones/us-central1-a/diskTypes/pd-balanced"},
		{"networkInterfaces.0.network", "global/networks/default"},
		{"networkInterfaces.0.accessConfigs.0.type", "ONE_TO_ONE_NAT"},
		{"metadata.items.0.key", "startup-script"},
		{"metadata.items.0.value", "#!/bin/bash\necho \"hi\"\n"},
		{"metadata.items.1.key", "ssh-keys"},
		{"metadata.items.1.value", "spotdeck:ssh-ed25519 AAAAC3Nz spotdeck-run1"},
		{"labels.spotdeck-run", "run1"},
	};
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		const char *got = path_str(j, want[i].path);
		CHECK(got && strcmp(got, want[i].want) == 0, "%s: got '%s', want '%s'", want[i].path,
		      got ? got : "(none)", want[i].want);
	}
	cJSON_Delete(j);
	cJSON_free(t);

	/* A bundled-GPU type, STOP on preemption, no external IP. */
	s.accelerator = NULL;
	s.machine_type = "g2-standard-8";
	s.stop_on_preemption = 1;
	s.external_ip = 0;
	s.ssh_keys = NULL;
	t = sd_gce_instance_json(&s, err, sizeof err);
	j = cJSON_Parse(t);
	CHECK(path_str(j, "guestAccelerators.0.acceleratorType") == NULL);
	CHECK(path_str(j, "networkInterfaces.0.accessConfigs.0.type") == NULL);
	CHECK_STR(path_str(j, "scheduling.instanceTerminationAction"), "STOP");
	CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "metadata"), "items")) == 1);
	cJSON_Delete(j);
	cJSON_free(t);

	/* Refusals name the field. */
	static const struct {
		const char *name, *run;
		int disk;
		const char *want;
	} bad[] = {
		{"Sd-run1", "run1", 100, "instance name 'Sd-run1'"},
		{"sd-run1-", "run1", 100, "instance name 'sd-run1-'"},
		{"sd-run1", "Run.1", 100, "run id 'Run.1'"},
		{"sd-run1", "run1", 5, "boot disk of 5 GB"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct sd_gce_instance_spec b = s;
		b.name = bad[i].name;
		b.run = bad[i].run;
		b.disk_gb = bad[i].disk;
		err[0] = '\0';
		CHECK(sd_gce_instance_json(&b, err, sizeof err) == NULL, "case %zu accepted", i);
		CHECK(strstr(err, bad[i].want) != NULL, "case %zu: '%s' lacks '%s'", i, err, bad[i].want);
	}
	char n64[65];
	memset(n64, 'a', 64);
	n64[64] = '\0';
	CHECK_INT(sd_gce_name_ok(n64), 0);
	n64[63] = '\0';
	CHECK_INT(sd_gce_name_ok(n64), 1);
	CHECK_INT(sd_gce_name_ok("a"), 1);
	CHECK_INT(sd_gce_name_ok("1a"), 0);
	CHECK_INT(sd_gce_name_ok(""), 0);
	check_report(1, "instances.insert body: the Spot block, GPU, disk, NAT, metadata and label; bad names refused");
}

/* Google's documented stockout, inside a DONE insert Operation. */
static const char op_stockout[] =
	"{\"kind\":\"compute#operation\",\"id\":\"812\",\"name\":\"operation-1733130000000-abc\","
	"\"zone\":\"https://www.googleapis.com/compute/v1/projects/proj-1/zones/us-central1-a\","
	"\"operationType\":\"insert\",\"targetLink\":\"https://www.googleapis.com/compute/v1/projects/"
	"proj-1/zones/us-central1-a/instances/sd-run1-s3\",\"status\":\"DONE\",\"progress\":100,"
	"\"error\":{\"errors\":[{\"code\":\"ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS\",\"message\":"
	"\"The zone 'projects/proj-1/zones/us-central1-a' does not have enough resources available to "
	"fulfill the request. '(resource type:compute)'.\"}]},\"httpErrorStatusCode\":503,"
	"\"httpErrorMessage\":\"SERVICE UNAVAILABLE\"}";

static const char quota_403[] =
	"{\"error\":{\"code\":403,\"message\":\"Quota 'GPUS_ALL_REGIONS' exceeded. Limit: 1.0 globally.\","
	"\"errors\":[{\"message\":\"Quota 'GPUS_ALL_REGIONS' exceeded. Limit: 1.0 globally.\","
	"\"domain\":\"usageLimits\",\"reason\":\"quotaExceeded\"}]}}";

static void test_operations_and_errors(void)
{
	char err[256];
	struct sd_gce_op op;
	CHECK_INT(sd_gce_op_parse(op_stockout, strlen(op_stockout), &op, err, sizeof err), 0);
	CHECK_STR(op.name, "operation-1733130000000-abc");
	CHECK_STR(op.zone, "us-central1-a");
	CHECK_STR(op.type, "insert");
	CHECK_INT(op.status, SD_GCE_OP_DONE);
	CHECK_STR(op.error_code, "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS");
	CHECK(strncmp(op.error_message, "The zone 'projects/proj-1/zones/us-central1-a'", 45) == 0, "%s",
	      op.error_message);
	CHECK_INT(op.http_error, 503);
	CHECK_INT(sd_gce_classify(0, op.error_code, op.error_message), SD_GCE_BLOCK_ZONE);

	static const char pending[] = "{\"name\":\"operation-2\",\"status\":\"PENDING\",\"operationType\":\"delete\"}";
	CHECK_INT(sd_gce_op_parse(pending, strlen(pending), &op, err, sizeof err), 0);
	CHECK_INT(op.status, SD_GCE_OP_PENDING);
	CHECK_STR(op.error_code, "");
	static const char weird[] = "{\"name\":\"operation-3\",\"status\":\"FINISHED\"}";
	CHECK_INT(sd_gce_op_parse(weird, strlen(weird), &op, err, sizeof err), -1);
	CHECK(strstr(err, "status 'FINISHED'") != NULL, "%s", err);
	CHECK_INT(sd_gce_op_parse("[1]", 3, &op, err, sizeof err), -1);

	struct sd_gce_error e;
	CHECK_INT(sd_gce_error_parse(quota_403, strlen(quota_403), &e, err, sizeof err), 0);
	CHECK_INT(e.code, 403);
	CHECK_STR(e.reason, "quotaExceeded");
	CHECK_STR(e.message, "Quota 'GPUS_ALL_REGIONS' exceeded. Limit: 1.0 globally.");
	CHECK_INT(sd_gce_classify(403, e.reason, e.message), SD_GCE_BLOCK_CLOUD);
	CHECK_INT(sd_gce_error_parse("{\"kind\":1}", 10, &e, err, sizeof err), -1);

	/* Which answers the HTTP layer sends again: a 403 over the API's rate
	 * is, a 403 over a quota or permission is not. */
	static const char rate_403[] = "{\"error\":{\"code\":403,\"message\":\"Rate Limit Exceeded\","
				       "\"errors\":[{\"message\":\"Rate Limit Exceeded\",\"domain\":\"usageLimits\","
				       "\"reason\":\"rateLimitExceeded\"}]}}";
	static const char user_403[] = "{\"error\":{\"code\":403,\"message\":\"x\",\"errors\":[{\"message\":"
				       "\"x\",\"domain\":\"usageLimits\",\"reason\":\"userRateLimitExceeded\"}]}}";
	static const char denied_403[] = "{\"error\":{\"code\":403,\"message\":\"Required 'compute.instances.create'"
					 " permission\",\"errors\":[{\"message\":\"x\",\"domain\":\"global\","
					 "\"reason\":\"forbidden\"}]}}";
	CHECK_INT(sd_gce_retryable_answer(403, rate_403, strlen(rate_403)), 1);
	CHECK_INT(sd_gce_retryable_answer(403, user_403, strlen(user_403)), 1);
	CHECK_INT(sd_gce_retryable_answer(403, quota_403, strlen(quota_403)), 0);
	CHECK_INT(sd_gce_retryable_answer(403, denied_403, strlen(denied_403)), 0);
	CHECK_INT(sd_gce_retryable_answer(400, rate_403, strlen(rate_403)), 0);
	CHECK_INT(sd_gce_retryable_answer(403, "<html>Forbidden</html>", 22), 0);
	CHECK_INT(sd_gce_retryable_answer(403, "", 0), 0);

	static const struct {
		long status;
		const char *code, *message;
		enum sd_gce_block want;
	} cls[] = {
		{0, "ZONE_RESOURCE_POOL_EXHAUSTED", "", SD_GCE_BLOCK_ZONE},
		{0, "UNSUPPORTED_OPERATION", "", SD_GCE_BLOCK_ZONE},
		{0, "RESOURCE_NOT_READY", "", SD_GCE_BLOCK_ZONE},
		{403, "quotaExceeded", "Quota 'PREEMPTIBLE_NVIDIA_T4_GPUS' exceeded. Limit: 0.0 in region us-central1.",
		 SD_GCE_BLOCK_REGION},
		{0, "QUOTA_EXCEEDED", "Quota 'CPUS' exceeded. Limit: 24.0 in region europe-west4.", SD_GCE_BLOCK_REGION},
		{400, "invalid", "The resource 'projects/p/zones/z/acceleratorTypes/nvidia-l4' is not found or access is unauthorized.",
		 SD_GCE_BLOCK_ZONE},
		{0, "VPC_NOT_FOUND", "", SD_GCE_BLOCK_CLOUD},
		{403, "forbidden", "Required 'compute.instances.create' permission", SD_GCE_BLOCK_CLOUD},
		{400, "invalid", "Requested disk size cannot be smaller than the image size (200 GB)", SD_GCE_BLOCK_CLOUD},
		{403, "rateLimitExceeded", "Rate Limit Exceeded", SD_GCE_BLOCK_RETRY},
		{503, "backendError", "", SD_GCE_BLOCK_RETRY},
		{429, "", "", SD_GCE_BLOCK_RETRY},
		{404, "notFound", "The resource 'projects/p/zones/z/instances/n' was not found", SD_GCE_BLOCK_NONE},
		{409, "alreadyExists", "", SD_GCE_BLOCK_NONE},
	};
	for (size_t i = 0; i < sizeof cls / sizeof cls[0]; i++) {
		enum sd_gce_block b = sd_gce_classify(cls[i].status, cls[i].code, cls[i].message);
		CHECK(b == cls[i].want, "%ld %s: %s, want %s", cls[i].status, cls[i].code, sd_gce_block_name(b),
		      sd_gce_block_name(cls[i].want));
	}
	check_report(1, "operations and error bodies read; stockouts block the zone, quotas the region or cloud");
}

static int seen;
static char seen_names[8][256];
static void on_instance(void *arg, const struct sd_gce_instance *in)
{
	(void)arg;
	if (seen < 8)
		snprintf(seen_names[seen], sizeof seen_names[0], "%s/%s/%s/%s", in->name, in->status, in->nat_ip,
			 in->run);
	seen++;
}

static void test_instances(void)
{
	char err[256], next[64];
	static const char inst[] =
		"{\"kind\":\"compute#instance\",\"id\":\"77\",\"name\":\"sd-run1-s3\",\"status\":\"RUNNING\","
		"\"zone\":\"https://www.googleapis.com/compute/v1/projects/proj-1/zones/us-central1-b\","
		"\"machineType\":\"https://www.googleapis.com/compute/v1/projects/proj-1/zones/us-central1-b/"
		"machineTypes/n1-standard-8\",\"networkInterfaces\":[{\"networkIP\":\"10.128.0.7\","
		"\"accessConfigs\":[{\"type\":\"ONE_TO_ONE_NAT\",\"natIP\":\"34.1.2.3\"}]}],"
		"\"labels\":{\"spotdeck-run\":\"run1\"},\"selfLink\":\"https://www.googleapis.com/compute/v1/projects/"
		"proj-1/zones/us-central1-b/instances/sd-run1-s3\"}";
	struct sd_gce_instance in;
	CHECK_INT(sd_gce_instance_parse(inst, strlen(inst), &in, err, sizeof err), 0);
	CHECK_STR(in.name, "sd-run1-s3");
	CHECK_STR(in.status, "RUNNING");
	CHECK_STR(in.zone, "us-central1-b");
	CHECK_STR(in.machine_type, "n1-standard-8");
	CHECK_STR(in.network_ip, "10.128.0.7");
	CHECK_STR(in.nat_ip, "34.1.2.3");
	CHECK_STR(in.run, "run1");
	CHECK_STR(in.self_link, "https://www.googleapis.com/compute/v1/projects/proj-1/zones/us-central1-b/instances/"
		  "sd-run1-s3");
	static const char booting[] = "{\"name\":\"sd-run1-s4\",\"status\":\"PROVISIONING\"}";
	CHECK_INT(sd_gce_instance_parse(booting, strlen(booting), &in, err, sizeof err), 0);
	CHECK_STR(in.nat_ip, "");
	CHECK_STR(in.run, "");
	CHECK_STR(in.self_link, "");

	static const char page[] =
		"{\"kind\":\"compute#instanceList\",\"items\":[{\"name\":\"a\",\"status\":\"RUNNING\","
		"\"networkInterfaces\":[{\"accessConfigs\":[{\"natIP\":\"1.1.1.1\"}]}],\"labels\":{\"spotdeck-run\":\"r\"}},"
		"{\"name\":\"b\",\"status\":\"STAGING\"}],\"nextPageToken\":\"tok2\"}";
	seen = 0;
	CHECK_INT(sd_gce_list_parse(page, strlen(page), on_instance, NULL, next, sizeof next, err, sizeof err), 2);
	CHECK_INT(seen, 2);
	CHECK_STR(seen_names[0], "a/RUNNING/1.1.1.1/r");
	CHECK_STR(seen_names[1], "b/STAGING//");
	CHECK_STR(next, "tok2");
	static const char empty[] = "{\"kind\":\"compute#instanceList\",\"id\":\"x\"}";
	seen = 0;
	CHECK_INT(sd_gce_list_parse(empty, strlen(empty), on_instance, NULL, next, sizeof next, err, sizeof err), 0);
	CHECK_INT(seen, 0);
	CHECK_STR(next, "");
	/* One bad item fails the page, and none of it is reported. */
	static const char half[] = "{\"items\":[{\"name\":\"a\",\"status\":\"RUNNING\"},{\"name\":\"b\"}]}";
	seen = 0;
	CHECK_INT(sd_gce_list_parse(half, strlen(half), on_instance, NULL, next, sizeof next, err, sizeof err), -1);
	CHECK_INT(seen, 0);
	CHECK(strstr(err, "instance b: no \"status\"") != NULL, "%s", err);

	char f[512];
	CHECK_INT(sd_gce_run_filter("run1", 0, f, sizeof f), 0);
	CHECK_STR(f, "(labels.spotdeck-run = run1) AND ((status = RUNNING) OR (status = PROVISIONING) OR "
		     "(status = STAGING))");
	CHECK_INT(sd_gce_run_filter("run1", 1, f, sizeof f), 0);
	CHECK_STR(f, "labels.spotdeck-run = run1");
	CHECK_INT(sd_gce_run_filter("run 1) OR (status = RUNNING", 0, f, sizeof f), -1);
	CHECK_INT(sd_gce_preempted_filter("https://www.googleapis.com/compute/v1/projects/p/zones/z/instances/n",
					  f, sizeof f), 0);
	CHECK_STR(f, "operationType=\"compute.instances.preempted\" AND targetLink=\"https://www.googleapis.com/"
		     "compute/v1/projects/p/zones/z/instances/n\"");
	CHECK_INT(sd_gce_preempted_filter("x\" OR \"1", f, sizeof f), -1);
	char region[32];
	sd_gce_zone_region("us-central1-a", region, sizeof region);
	CHECK_STR(region, "us-central1");
	sd_gce_zone_region("europe-west4-b", region, sizeof region);
	CHECK_STR(region, "europe-west4");
	check_report(1, "instances and list pages read (a bad item fails the page); filters refuse injection");
}

/* GCE's timestamps: RFC 3339 with a fraction and an offset (the billing
 * times lastStartTimestamp, lastStopTimestamp, an Operation's endTime). */
static void test_times(void)
{
	/* 2026-12-03T08:02:03Z is 1796284923 (date -d ... +%s). */
	CHECK(sd_gce_time_parse("2026-12-03T08:02:03Z") == 1796284923.0, "%.3f",
	      sd_gce_time_parse("2026-12-03T08:02:03Z"));
	double t = sd_gce_time_parse("2026-12-03T01:02:03.456-07:00");
	CHECK(t > 1796284923.455 && t < 1796284923.457, "-07:00 with millis: %.4f", t);
	t = sd_gce_time_parse("2026-12-03T09:32:03.5+01:30");
	CHECK(t > 1796284923.499 && t < 1796284923.501, "+01:30: %.4f", t);
	const char *bad[] = { "2026-12-03 08:02:03Z", "2026-12-03T08:02:03", "2026-12-03T08:02:03.Z",
			      "2026-12-03T08:02:03+0700", "2026-12-03T08:02:03-07:00x", "", NULL };
	for (int i = 0; bad[i]; i++)
		CHECK(sd_gce_time_parse(bad[i]) == -1, "'%s' read as %.3f", bad[i], sd_gce_time_parse(bad[i]));
	CHECK(sd_gce_time_parse(NULL) == -1, "NULL");
	struct sd_gce_instance in;
	char err[256];
	const char *vm = "{\"name\":\"a\",\"status\":\"TERMINATED\",\"lastStartTimestamp\":"
			 "\"2026-12-03T01:02:03.000-07:00\",\"lastStopTimestamp\":\"2026-12-03T01:03:33.250-07:00\"}";
	CHECK_INT(sd_gce_instance_parse(vm, strlen(vm), &in, err, sizeof err), 0);
	CHECK(in.stopped_at - in.started_at > 90.249 && in.stopped_at - in.started_at < 90.251, "ran %.3f s",
	      in.stopped_at - in.started_at);
	check_report(1, "timestamps with offsets and fractions; an instance's start and stop times read");
}

int main(void)
{
	test_times();
	test_insert_body();
	test_operations_and_errors();
	test_instances();
	return check_exit("test-gce-api");
}
