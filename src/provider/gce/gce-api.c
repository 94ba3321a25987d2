/* src/provider/gce/gce-api.c - Compute Engine v1 bodies built and read (see
 * gce-api.h for the sources). */
#include "config.h"
#include "src/provider/gce/gce-api.h"
#include "src/provider/http/secret-file.h"

#include <cJSON.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void copy(char *dst, size_t n, const char *src)
{
	snprintf(dst, n, "%s", src ? src : "");
}

int sd_gce_zone_name_ok(const char *z)
{
	const char *dash = z ? strrchr(z, '-') : NULL;
	return sd_gce_name_ok(z) && dash && dash != z && strchr(z, '-') != dash && dash[1] && !dash[2];
}

void sd_gce_accelerator_model(const char *accelerator, char *out, size_t outlen)
{
	const char *m = accelerator;
	if (!strncmp(m, "nvidia-", 7))
		m += 7;
	if (!strncmp(m, "tesla-", 6))
		m += 6;
	size_t k = 0;
	for (; m[k] && m[k] != '-' && k + 1 < outlen; k++)
		out[k] = (char)toupper((unsigned char)m[k]);
	if (outlen)
		out[k] = '\0';
}

double sd_gce_time_parse(const char *s)
{
	/* The date and time in UTC's form, then the offset applied. */
	char utc[40];
	if (!s || strlen(s) < 20 || strlen(s) >= sizeof utc - 8)
		return -1;
	const char *p = s + 19;
	double frac = 0, scale = 0.1;
	if (*p == '.') {
		p++;
		if (!isdigit((unsigned char)*p))
			return -1;
		for (; isdigit((unsigned char)*p); p++, scale /= 10)
			frac += (*p - '0') * scale;
	}
	int off = 0;
	if (*p == '+' || *p == '-') {
		if (!isdigit((unsigned char)p[1]) || !isdigit((unsigned char)p[2]) || p[3] != ':' ||
		    !isdigit((unsigned char)p[4]) || !isdigit((unsigned char)p[5]) || p[6])
			return -1;
		off = ((p[1] - '0') * 10 + (p[2] - '0')) * 3600 + ((p[4] - '0') * 10 + (p[5] - '0')) * 60;
		if (*p == '-')
			off = -off;
	} else if (strcmp(p, "Z") != 0) {
		return -1;
	}
	memcpy(utc, s, 19);
	memcpy(utc + 19, "Z", 2);
	long long t = sd_utc_time_parse(utc);
	return t < 0 ? -1 : (double)t - off + frac;
}

int sd_gce_name_ok(const char *name)
{
	size_t n = name ? strlen(name) : 0;
	if (n < 1 || n > 63 || !(name[0] >= 'a' && name[0] <= 'z'))
		return 0;
	for (size_t i = 1; i < n; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
			return 0;
	}
	return name[n - 1] != '-';
}

void sd_gce_zone_region(const char *zone, char *out, size_t outlen)
{
	const char *dash = strrchr(zone, '-');
	size_t n = dash ? (size_t)(dash - zone) : strlen(zone);
	snprintf(out, outlen, "%.*s", (int)n, zone);
}

void sd_gce_basename(const char *url, char *out, size_t outlen)
{
	const char *s = url ? strrchr(url, '/') : NULL;
	copy(out, outlen, s ? s + 1 : url);
}

/* A label value: [a-z0-9_-], at most 63 (GCE's label rules). */
static int label_value_ok(const char *v)
{
	size_t n = strlen(v);
	if (n < 1 || n > 63)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((v[i] >= 'a' && v[i] <= 'z') || (v[i] >= '0' && v[i] <= '9') || v[i] == '_' || v[i] == '-'))
			return 0;
	return 1;
}

static int add_str(cJSON *o, const char *k, const char *v)
{
	return cJSON_AddStringToObject(o, k, v) != NULL;
}

/* A new object appended to ARRAY (NULL: none, or out of memory). */
static cJSON *new_in(cJSON *array)
{
	cJSON *it = array ? cJSON_CreateObject() : NULL;
	if (it && !cJSON_AddItemToArray(array, it)) {
		cJSON_Delete(it);
		it = NULL;
	}
	return it;
}

static int add_item(cJSON *items, const char *key, const char *value)
{
	cJSON *it = new_in(items);
	return it && add_str(it, "key", key) && add_str(it, "value", value);
}

char *sd_gce_instance_json(const struct sd_gce_instance_spec *s, char *err, size_t errlen)
{
	char buf[512];
	if (!s->project || !*s->project)
		return sd_errf(err, errlen, "gce: project is empty"), NULL;
	if (!s->zone || !*s->zone)
		return sd_errf(err, errlen, "gce: zone is empty"), NULL;
	if (!sd_gce_name_ok(s->name))
		return sd_errf(err, errlen, "gce: instance name '%s' is not [a-z]([-a-z0-9]{0,61}[a-z0-9])?",
			    s->name ? s->name : ""), NULL;
	if (!s->machine_type || !*s->machine_type)
		return sd_errf(err, errlen, "gce: machine type is empty"), NULL;
	if (s->accelerator && s->accelerator_count < 1)
		return sd_errf(err, errlen, "gce: accelerator %s with count %d", s->accelerator,
			    s->accelerator_count), NULL;
	if (!s->image || !*s->image)
		return sd_errf(err, errlen, "gce: image is empty"), NULL;
	if (s->disk_gb < 10)
		return sd_errf(err, errlen, "gce: boot disk of %d GB (at least 10)", s->disk_gb), NULL;
	if (!s->run || !label_value_ok(s->run))
		return sd_errf(err, errlen, "gce: run id '%s' is not a label value ([a-z0-9_-], 1..63)",
			    s->run ? s->run : ""), NULL;

	cJSON *o = cJSON_CreateObject();
	int ok = o != NULL;
	ok = ok && add_str(o, "name", s->name);
	snprintf(buf, sizeof buf, "zones/%s/machineTypes/%s", s->zone, s->machine_type);
	ok = ok && add_str(o, "machineType", buf);
	if (ok && s->accelerator) {
		cJSON *a = new_in(cJSON_AddArrayToObject(o, "guestAccelerators"));
		ok = a != NULL;
		snprintf(buf, sizeof buf, "projects/%s/zones/%s/acceleratorTypes/%s", s->project, s->zone,
			 s->accelerator);
		ok = ok && add_str(a, "acceleratorType", buf) &&
		     cJSON_AddNumberToObject(a, "acceleratorCount", s->accelerator_count);
	}
	cJSON *sch = ok ? cJSON_AddObjectToObject(o, "scheduling") : NULL;
	ok = sch && add_str(sch, "provisioningModel", "SPOT") &&
	     add_str(sch, "instanceTerminationAction", s->stop_on_preemption ? "STOP" : "DELETE") &&
	     add_str(sch, "onHostMaintenance", "TERMINATE") &&
	     cJSON_AddFalseToObject(sch, "automaticRestart") && cJSON_AddTrueToObject(sch, "preemptible");
	cJSON *disk = ok ? new_in(cJSON_AddArrayToObject(o, "disks")) : NULL;
	ok = disk && cJSON_AddTrueToObject(disk, "boot") &&
	     cJSON_AddTrueToObject(disk, "autoDelete") && add_str(disk, "type", "PERSISTENT");
	cJSON *ip = ok ? cJSON_AddObjectToObject(disk, "initializeParams") : NULL;
	snprintf(buf, sizeof buf, "%d", s->disk_gb);
	ok = ip && add_str(ip, "sourceImage", s->image) && add_str(ip, "diskSizeGb", buf);
	snprintf(buf, sizeof buf, "zones/%s/diskTypes/pd-balanced", s->zone);
	ok = ok && add_str(ip, "diskType", buf);
	cJSON *nic = ok ? new_in(cJSON_AddArrayToObject(o, "networkInterfaces")) : NULL;
	ok = nic && add_str(nic, "network", "global/networks/default");
	if (ok && s->external_ip) {
		cJSON *ac = new_in(cJSON_AddArrayToObject(nic, "accessConfigs"));
		ok = ac && add_str(ac, "type", "ONE_TO_ONE_NAT") && add_str(ac, "name", "External NAT");
	}
	cJSON *md = ok ? cJSON_AddObjectToObject(o, "metadata") : NULL;
	cJSON *items = md ? cJSON_AddArrayToObject(md, "items") : NULL;
	ok = ok && items;
	if (ok && s->startup_script)
		ok = add_item(items, "startup-script", s->startup_script);
	if (ok && s->ssh_keys)
		ok = add_item(items, "ssh-keys", s->ssh_keys);
	cJSON *labels = ok ? cJSON_AddObjectToObject(o, "labels") : NULL;
	ok = ok && labels && add_str(labels, SD_GCE_RUN_LABEL, s->run);
	char *text = ok ? cJSON_PrintUnformatted(o) : NULL;
	cJSON_Delete(o);
	if (!text)
		sd_errf(err, errlen, "gce: out of memory");
	return text;
}

static const char *jstr(const cJSON *o, const char *k)
{
	return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, k));
}

static cJSON *parse_object(const char *json, size_t len, const char *what, char *err, size_t errlen)
{
	cJSON *j = cJSON_ParseWithLength(json, len);
	if (!j || !cJSON_IsObject(j)) {
		cJSON_Delete(j);
		sd_errf(err, errlen, "gce: %s: not a JSON object", what);
		return NULL;
	}
	return j;
}

int sd_gce_op_parse(const char *json, size_t len, struct sd_gce_op *op, char *err, size_t errlen)
{
	memset(op, 0, sizeof *op);
	cJSON *j = parse_object(json, len, "operation", err, errlen);
	if (!j)
		return -1;
	const char *name = jstr(j, "name"), *status = jstr(j, "status");
	int rc = 0;
	if (!name || !*name)
		rc = sd_errf(err, errlen, "gce: operation: no \"name\"");
	else if (!status)
		rc = sd_errf(err, errlen, "gce: operation %s: no \"status\"", name);
	else if (strcmp(status, "PENDING") == 0)
		op->status = SD_GCE_OP_PENDING;
	else if (strcmp(status, "RUNNING") == 0)
		op->status = SD_GCE_OP_RUNNING;
	else if (strcmp(status, "DONE") == 0)
		op->status = SD_GCE_OP_DONE;
	else
		rc = sd_errf(err, errlen, "gce: operation %s: status '%s' is not PENDING, RUNNING or DONE", name,
			  status);
	if (rc == 0) {
		copy(op->name, sizeof op->name, name);
		sd_gce_basename(jstr(j, "zone"), op->zone, sizeof op->zone);
		copy(op->type, sizeof op->type, jstr(j, "operationType"));
		copy(op->target, sizeof op->target, jstr(j, "targetLink"));
		double t = sd_gce_time_parse(jstr(j, "endTime"));
		op->end_time = t > 0 ? t : 0;
		const cJSON *errs = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "error"),
								     "errors");
		const cJSON *e0 = cJSON_GetArrayItem(errs, 0);
		if (e0) {
			copy(op->error_code, sizeof op->error_code, jstr(e0, "code"));
			copy(op->error_message, sizeof op->error_message, jstr(e0, "message"));
			if (!op->error_code[0])
				copy(op->error_code, sizeof op->error_code, "UNKNOWN");
		}
		const cJSON *he = cJSON_GetObjectItemCaseSensitive(j, "httpErrorStatusCode");
		if (cJSON_IsNumber(he))
			op->http_error = (long)he->valuedouble;
	}
	cJSON_Delete(j);
	return rc;
}

int sd_gce_error_parse(const char *json, size_t len, struct sd_gce_error *e, char *err, size_t errlen)
{
	memset(e, 0, sizeof *e);
	cJSON *j = parse_object(json, len, "error body", err, errlen);
	if (!j)
		return -1;
	const cJSON *eo = cJSON_GetObjectItemCaseSensitive(j, "error");
	int rc = 0;
	if (!cJSON_IsObject(eo)) {
		rc = sd_errf(err, errlen, "gce: error body: no \"error\" object");
	} else {
		const cJSON *code = cJSON_GetObjectItemCaseSensitive(eo, "code");
		e->code = cJSON_IsNumber(code) ? (long)code->valuedouble : 0;
		copy(e->message, sizeof e->message, jstr(eo, "message"));
		const cJSON *e0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(eo, "errors"), 0);
		copy(e->reason, sizeof e->reason, e0 ? jstr(e0, "reason") : NULL);
		if (!e->message[0] && e0)
			copy(e->message, sizeof e->message, jstr(e0, "message"));
	}
	cJSON_Delete(j);
	return rc;
}

int sd_gce_retryable_answer(long status, const char *body, size_t len)
{
	struct sd_gce_error e;
	char err[64];
	if (status != 403 || sd_gce_error_parse(body, len, &e, err, sizeof err) < 0)
		return 0;
	return !strcmp(e.reason, "rateLimitExceeded") || !strcmp(e.reason, "userRateLimitExceeded");
}

static int instance_from(const cJSON *j, struct sd_gce_instance *in, char *err, size_t errlen)
{
	memset(in, 0, sizeof *in);
	const char *name = jstr(j, "name"), *status = jstr(j, "status");
	if (!name || !*name)
		return sd_errf(err, errlen, "gce: instance: no \"name\"");
	if (!status || !*status)
		return sd_errf(err, errlen, "gce: instance %s: no \"status\"", name);
	copy(in->name, sizeof in->name, name);
	copy(in->status, sizeof in->status, status);
	sd_gce_basename(jstr(j, "zone"), in->zone, sizeof in->zone);
	sd_gce_basename(jstr(j, "machineType"), in->machine_type, sizeof in->machine_type);
	const cJSON *nic = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "networkInterfaces"), 0);
	copy(in->network_ip, sizeof in->network_ip, nic ? jstr(nic, "networkIP") : NULL);
	const cJSON *ac = nic ? cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(nic, "accessConfigs"), 0) : NULL;
	copy(in->nat_ip, sizeof in->nat_ip, ac ? jstr(ac, "natIP") : NULL);
	copy(in->run, sizeof in->run, jstr(cJSON_GetObjectItemCaseSensitive(j, "labels"), SD_GCE_RUN_LABEL));
	copy(in->self_link, sizeof in->self_link, jstr(j, "selfLink"));
	double t = sd_gce_time_parse(jstr(j, "lastStartTimestamp"));
	in->started_at = t > 0 ? t : 0;
	t = sd_gce_time_parse(jstr(j, "lastStopTimestamp"));
	in->stopped_at = t > 0 ? t : 0;
	return 0;
}

int sd_gce_instance_parse(const char *json, size_t len, struct sd_gce_instance *in, char *err,
			  size_t errlen)
{
	cJSON *j = parse_object(json, len, "instance", err, errlen);
	if (!j)
		return -1;
	int rc = instance_from(j, in, err, errlen);
	cJSON_Delete(j);
	return rc;
}

int sd_gce_list_parse(const char *json, size_t len,
		      void (*each)(void *arg, const struct sd_gce_instance *in), void *arg,
		      char *next, size_t nextlen, char *err, size_t errlen)
{
	cJSON *j = parse_object(json, len, "instance list", err, errlen);
	if (!j)
		return -1;
	const cJSON *items = cJSON_GetObjectItemCaseSensitive(j, "items");
	int n = 0, rc = 0;
	if (items && !cJSON_IsArray(items)) {
		rc = sd_errf(err, errlen, "gce: instance list: \"items\" is not an array");
	} else {
		struct sd_gce_instance *all = calloc((size_t)cJSON_GetArraySize(items) + 1, sizeof *all);
		const cJSON *it;
		if (!all)
			rc = sd_errf(err, errlen, "gce: out of memory");
		cJSON_ArrayForEach(it, items) {
			if (rc < 0)
				break;
			if (instance_from(it, &all[n], err, errlen) < 0)
				rc = -1;
			else
				n++;
		}
		/* Items reach EACH only when the whole page read. */
		for (int i = 0; rc == 0 && i < n; i++)
			each(arg, &all[i]);
		free(all);
		copy(next, nextlen, jstr(j, "nextPageToken"));
	}
	cJSON_Delete(j);
	return rc < 0 ? -1 : n;
}

static int contains(const char *s, const char *needle)
{
	return s && strstr(s, needle) != NULL;
}

enum sd_gce_block sd_gce_classify(long http_status, const char *code, const char *message)
{
	static const char *const zone_codes[] = {
		"ZONE_RESOURCE_POOL_EXHAUSTED", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
		"insufficientCapacity", "UNSUPPORTED_OPERATION", "RESOURCE_NOT_READY",
		"RESOURCE_OPERATION_RATE_EXCEEDED",
	};
	static const char *const cloud_codes[] = {"VPC_NOT_FOUND", "IAM_PERMISSION_DENIED", "forbidden"};
	code = code ? code : "";
	for (size_t i = 0; i < sizeof zone_codes / sizeof zone_codes[0]; i++)
		if (strcmp(code, zone_codes[i]) == 0)
			return SD_GCE_BLOCK_ZONE;
	if (contains(message, "is not found or access is unauthorized"))
		return SD_GCE_BLOCK_ZONE;
	if (strcmp(code, "quotaExceeded") == 0 || strcmp(code, "QUOTA_EXCEEDED") == 0)
		return contains(message, "GPUS_ALL_REGIONS") ? SD_GCE_BLOCK_CLOUD : SD_GCE_BLOCK_REGION;
	for (size_t i = 0; i < sizeof cloud_codes / sizeof cloud_codes[0]; i++)
		if (strcmp(code, cloud_codes[i]) == 0)
			return SD_GCE_BLOCK_CLOUD;
	if (contains(message, "cannot be smaller than the image size") ||
	    contains(message, "smaller than the image"))
		return SD_GCE_BLOCK_CLOUD;
	if (strcmp(code, "rateLimitExceeded") == 0 || strcmp(code, "userRateLimitExceeded") == 0 ||
	    strcmp(code, "backendError") == 0 || http_status == 429 || http_status >= 500)
		return SD_GCE_BLOCK_RETRY;
	return SD_GCE_BLOCK_NONE;
}

const char *sd_gce_block_name(enum sd_gce_block b)
{
	switch (b) {
	case SD_GCE_BLOCK_RETRY:
		return "retry";
	case SD_GCE_BLOCK_ZONE:
		return "zone";
	case SD_GCE_BLOCK_REGION:
		return "region";
	case SD_GCE_BLOCK_CLOUD:
		return "cloud";
	case SD_GCE_BLOCK_NONE:
		break;
	}
	return "none";
}

int sd_gce_run_filter(const char *run, int all, char *out, size_t outlen)
{
	if (!run || !label_value_ok(run))
		return -1;
	int n = all ? snprintf(out, outlen, "labels.%s = %s", SD_GCE_RUN_LABEL, run)
		    : snprintf(out, outlen,
			       "(labels.%s = %s) AND ((status = RUNNING) OR (status = PROVISIONING) OR "
			       "(status = STAGING))",
			       SD_GCE_RUN_LABEL, run);
	return n < 0 || (size_t)n >= outlen ? -1 : 0;
}

int sd_gce_preempted_filter(const char *target_link, char *out, size_t outlen)
{
	if (!target_link || strpbrk(target_link, "\"\\\r\n"))
		return -1;
	int n = snprintf(out, outlen, "operationType=\"compute.instances.preempted\" AND targetLink=\"%s\"",
			 target_link);
	return n < 0 || (size_t)n >= outlen ? -1 : 0;
}
