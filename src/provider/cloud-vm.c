/* src/provider/cloud-vm.c - what the cloud providers share (cloud-vm.h). */
#include "config.h"
#include "src/provider/cloud-vm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "engine/errors.h"
#include "src/proto/job.h"
#include "src/provider/provider.h"

int sd_setting_check_str(const cJSON *s, const char *key, const char *file, char **why)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, key);
	if (v && (!cJSON_IsString(v) || !v->valuestring[0] || strlen(v->valuestring) > 1000))
		return sd_why(why, "%s: provider.%s: expected a non-empty string", file, key);
	return 0;
}

int sd_setting_check_num(const cJSON *s, const char *key, double lo, double hi, int integer, const char *file,
			 char **why)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, key);
	char shown[48];
	if (v && (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi) ||
		  (integer && v->valuedouble != floor(v->valuedouble))))
		return sd_why(why, "%s: provider.%s: expected %s from %g to %g, got %s", file, key,
			      integer ? "a whole number" : "a number", lo, hi, sd_json_show(v, shown, sizeof shown));
	return 0;
}

char *sd_strdup0(const char *val)
{
	if (!val)
		return NULL;
	size_t n = strlen(val) + 1;
	char *d = sd_malloc(n);
	memcpy(d, val, n);
	return d;
}

char *sd_setting_str(const cJSON *s, const char *key, const char *dflt)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, key);
	return sd_strdup0(cJSON_IsString(v) ? v->valuestring : dflt);
}

double sd_setting_num(const cJSON *s, const char *key, double dflt)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, key);
	return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

void sd_cloud_journal_attempt(struct sd_fleet *fleet, const char *provider, const struct sd_http_attempt *a)
{
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "provider", provider);
	cJSON_AddStringToObject(ev, "call", a->label ? a->label : a->method);
	cJSON_AddStringToObject(ev, "method", a->method);
	cJSON_AddStringToObject(ev, "url", a->url);
	cJSON_AddNumberToObject(ev, "attempt", a->attempt);
	cJSON_AddNumberToObject(ev, "status", (double)a->status);
	if (a->error && a->error[0])
		cJSON_AddStringToObject(ev, "error", a->error);
	cJSON_AddNumberToObject(ev, "elapsed_s", round(a->elapsed_s * 1000) / 1000);
	if (a->retry_in_s >= 0)
		cJSON_AddNumberToObject(ev, "retry_in_s", round(a->retry_in_s * 1000) / 1000);
	sd_fleet_journal(fleet, SD_EV_CLOUD_CALL, ev);
}

int sd_cloud_run_label(const char *run_dir, const char *file_name, char tag[17], int *no_dir, char **why)
{
	unsigned char r[8];
	char path[4200];
	snprintf(path, sizeof path, "%s/%s", run_dir ? run_dir : "", file_name);
	FILE *f = run_dir ? fopen(path, "r") : NULL;
	if (f) {
		char line[64] = "";
		int ok = fgets(line, sizeof line, f) != NULL;
		fclose(f);
		line[strcspn(line, "\r\n")] = '\0';
		ok = ok && strlen(line) == 16 && strspn(line, "0123456789abcdef") == 16;
		if (!ok)
			return sd_why(why, "%s: not a run label (16 hex digits); remove it only if no VM of the run is left",
				      path);
		memcpy(tag, line, 17);
		return 0;
	}
	if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
		return sd_why(why, "%s: no random bytes for the run's label", file_name);
	for (int i = 0; i < 8; i++)
		snprintf(tag + 2 * i, 3, "%02x", r[i]);
	if (!run_dir) {
		*no_dir = 1;
		return 0;
	}
	f = fopen(path, "wx");
	if (!f)
		return sd_why(why, "%s: cannot write the run's label: %m", path);
	int bad = fprintf(f, "%s\n", tag) < 0;
	if (fclose(f) != 0 || bad)
		return sd_why(why, "%s: cannot write the run's label", path);
	return 0;
}

int sd_url_is_loopback(const char *url)
{
	const char *h = strstr(url, "://");
	if (!h)
		return 0;
	h += 3;
	char host[256];
	size_t n = strcspn(h, "/");
	if (n >= sizeof host)
		return 0;
	memcpy(host, h, n);
	host[n] = '\0';
	return sd_host_is_loopback(host, strchr(host, ':') != NULL);
}
