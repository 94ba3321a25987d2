/* src/app/doctor.c - `spotdeck doctor`: can a run start on this cloud?
 * (doctor.h).  The checks run one after another on a libuv loop through
 * the same HTTP client and token code the provider uses, so what doctor
 * proves is what a run will meet. */
#include "config.h"
#include "src/app/doctor.h"
#include "src/app/doctor-internal.h"

#include <cJSON.h>
#include <ctype.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "engine/onnx.h"
#include "engine/train.h"
#include "src/proto/job.h"
#include "src/provider/gce/gce-api.h"
#include "src/provider/gce/gce-client.h"
#include "src/provider/gce/gce-price.h"
#include "src/provider/http/http.h"
#include "src/provider/http/secret-file.h"

/* The default boot image: Google's Deep Learning VM family with CUDA
 * (images.getFromFamily resolves it to today's image). */
#define GCE_DEFAULT_IMAGE "projects/deeplearning-platform-release/global/images/family/common-cu124"
#define MAX_ZONES 32

enum step { ST_PROJECT, ST_ZONE, ST_MACHINE, ST_GPU, ST_REGION, ST_IMAGE, ST_PRICES, ST_END };

struct doctor {
	uv_loop_t loop;
	struct sd_http *http;
	struct sd_gce_client *gce;
	/* settings */
	char *gcloud;             /* provider.gcloud: the program, when credentials is "gcloud" */
	char *project, *credentials, *machine_type, *accelerator, *image, *api_root, *billing_root;
	char *identity;           /* provider.identity: the key pair the VMs get (~ expanded) */
	int count;
	char *zones[MAX_ZONES];
	int nzones;
	char regions[MAX_ZONES][64];
	int nregions;
	/* progress */
	enum step step;
	int i;                    /* the zone or region being checked */
	int zone_ok[MAX_ZONES];   /* 1 while every check of zone i passed */
	int region_ok[MAX_ZONES];
	struct sd_gce_price_sheet sheet; /* the Billing Catalog's Spot rates, per region */
	int vcpus;                /* the machine type's (machineTypes.get), 0: not known */
	double memory_gib;
	char model[32];           /* "T4": the GPU's model in quota names and SKUs */
	int failed, done;
};

void sd_doctor_scrub(char *s)
{
	static const char *const marks[] = {"Bearer ", "assertion=", "access_token", "ya29.", "Signature=",
					    "X-Amz-Security-Token", NULL};
	for (int i = 0; marks[i]; i++) {
		char *p = strcasestr(s, marks[i]);
		if (p)
			snprintf(p, strlen(p) + 1, "%s", strlen(p) >= 13 ? "[cut: secret]" : "");
	}
	s[strcspn(s, "\r\n")] = '\0';
}

void sd_doctor_say(int *failed, const char *level, const char *check, const char *fmt, ...)
{
	va_list ap;
	char line[1024];
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	/* What a server says goes into these lines: never a credential it
	 * echoed, and one line. */
	sd_doctor_scrub(line);
	printf("%-5s %s: %s\n", level, check, line);
	fflush(stdout);
	if (!strcmp(level, "FAIL"))
		*failed = 1;
}

#define say(d, ...) sd_doctor_say(&(d)->failed, __VA_ARGS__)

const struct sd_http_policy sd_doctor_policy = {
	.max_attempts = 3, .timeout_s = 15, .connect_timeout_s = 5,
};

/* The API's own words for a failed answer: error.message of the body,
 * else the transport error or the status. */
static void why(const struct sd_http_response *r, char *out, size_t outlen)
{
	struct sd_gce_error e;
	char err[64];
	if (r->status == 0)
		snprintf(out, outlen, "%s", r->error);
	else if (sd_gce_error_parse(r->body, r->body_len, &e, err, sizeof err) == 0 && e.message[0])
		snprintf(out, outlen, "HTTP %ld: %s", r->status, e.message);
	else if (r->status == 200)
		snprintf(out, outlen, "HTTP 200, but not the JSON resource expected (is api_root Compute Engine?)");
	else
		snprintf(out, outlen, "HTTP %ld", r->status);
}

/* {"quotas":[{"metric","limit","usage"}]}: the first quota whose metric
 * satisfies MATCH, as limit - usage (its metric into METRIC); -1 if none. */
static double quota_left(const cJSON *j, int (*match)(const char *metric, const char *model),
			 const char *model, char *metric, size_t metriclen, double *limit)
{
	const cJSON *q;
	cJSON_ArrayForEach(q, cJSON_GetObjectItemCaseSensitive(j, "quotas")) {
		const char *m = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(q, "metric"));
		const cJSON *l = cJSON_GetObjectItemCaseSensitive(q, "limit");
		const cJSON *u = cJSON_GetObjectItemCaseSensitive(q, "usage");
		if (m && match(m, model) && cJSON_IsNumber(l)) {
			snprintf(metric, metriclen, "%s", m);
			*limit = l->valuedouble;
			return l->valuedouble - (cJSON_IsNumber(u) ? u->valuedouble : 0);
		}
	}
	return -1;
}

static int is_all_regions(const char *metric, const char *model)
{
	(void)model;
	return !strcmp(metric, "GPUS_ALL_REGIONS");
}

/* PREEMPTIBLE_NVIDIA_T4_GPUS, PREEMPTIBLE_NVIDIA_A100_80GB_GPUS, ... */
static int is_spot_gpu(const char *metric, const char *model)
{
	size_t n = strlen(model);
	const char *p = "PREEMPTIBLE_NVIDIA_";
	return !strncmp(metric, p, strlen(p)) && !strncmp(metric + strlen(p), model, n) &&
	       metric[strlen(p) + n] == '_';
}

static void next(struct doctor *d);

static void on_reply(void *arg, const struct sd_http_response *r);

/* The token, then the project's GPUS_ALL_REGIONS quota. */
static int on_project(struct doctor *d, const struct sd_http_response *r, const cJSON *j)
{
	char w[700];
	char metric[96];
	double limit = 0;
	if (r->no_credentials) {
		if (d->credentials && !strcmp(d->credentials, "gcloud"))
			say(d, "FAIL", "credentials", "no token from gcloud: %s", r->error + 7);
		else if (!d->credentials)
			say(d, "FAIL", "credentials", "no key given (provider.credentials or "
			    "$GOOGLE_APPLICATION_CREDENTIALS) and no metadata server (not on a GCE VM?): %s",
			    r->error + 7);
		else
			say(d, "FAIL", "credentials", "no token for %s: %s", sd_gce_client_identity(d->gce),
			    r->error + 7);
		d->step = ST_END;
		return 0;
	}
	say(d, "ok", "credentials", "a token for %s, %.0f s left", sd_gce_client_identity(d->gce),
	    sd_gce_client_token_left(d->gce));
	if (!j) {
		why(r, w, sizeof w);
		say(d, "FAIL", "project", "%s: %s", d->project, w);
		d->step = ST_END;
		return 0;
	}
	double left = quota_left(j, is_all_regions, NULL, metric, sizeof metric, &limit);
	if (left < 0)
		say(d, "warn", "project", "%s: no GPUS_ALL_REGIONS quota listed", d->project);
	else if (left < d->count)
		say(d, "FAIL", "project", "%s: GPUS_ALL_REGIONS has %.0f of %.0f left, a server needs %d "
		    "(ask for more in the console's Quotas page)", d->project, left, limit, d->count);
	else
		say(d, "ok", "project", "%s: GPUS_ALL_REGIONS %.0f of %.0f left", d->project, left, limit);
	d->step = ST_ZONE;
	d->i = 0;
	return 0;
}

/* A zone: UP or not. */
static int on_zone(struct doctor *d, const struct sd_http_response *r, const cJSON *j)
{
	char w[700];
	const char *st = j ? cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "status")) : NULL;
	if (!st) {
		why(r, w, sizeof w);
		say(d, "warn", "zone", "%s: %s", d->zones[d->i], w);
		d->zone_ok[d->i] = 0;
	} else if (strcmp(st, "UP") != 0) {
		say(d, "warn", "zone", "%s is %s", d->zones[d->i], st);
		d->zone_ok[d->i] = 0;
	}
	d->step = ST_MACHINE;
	return 0;
}

/* The zone's machine type: its vCPUs and memory, for the prices. */
static int on_machine(struct doctor *d, const struct sd_http_response *r, const cJSON *j)
{
	char w[700];
	if (!j) {
		why(r, w, sizeof w);
		say(d, "warn", "zone", "%s: machine type %s: %s", d->zones[d->i], d->machine_type, w);
		d->zone_ok[d->i] = 0;
	} else if (!d->vcpus) {
		const cJSON *c = cJSON_GetObjectItemCaseSensitive(j, "guestCpus");
		const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "memoryMb");
		if (cJSON_IsNumber(c) && cJSON_IsNumber(m) && c->valuedouble >= 1 && m->valuedouble > 0) {
			d->vcpus = (int)c->valuedouble;
			d->memory_gib = m->valuedouble / 1024;
		}
	}
	d->step = ST_GPU;
	return 0;
}

/* The zone's accelerator type: how many a VM may take; after the last
 * zone, whether any zone can run the job. */
static int on_gpu(struct doctor *d, const struct sd_http_response *r, const cJSON *j)
{
	char w[700];
	const cJSON *mx = j ? cJSON_GetObjectItemCaseSensitive(j, "maximumCardsPerInstance") : NULL;
	if (!j) {
		why(r, w, sizeof w);
		say(d, "warn", "zone", "%s: GPU %s: %s", d->zones[d->i], d->accelerator, w);
		d->zone_ok[d->i] = 0;
	} else if (cJSON_IsNumber(mx) && mx->valuedouble < d->count) {
		say(d, "warn", "zone", "%s: %s takes at most %.0f per VM, %d asked", d->zones[d->i],
		    d->accelerator, mx->valuedouble, d->count);
		d->zone_ok[d->i] = 0;
	}
	if (d->zone_ok[d->i])
		say(d, "ok", "zone", "%s: UP, %s with %d x %s", d->zones[d->i], d->machine_type, d->count,
		    d->accelerator);
	d->i++;
	d->step = d->i < d->nzones ? ST_ZONE : ST_REGION;
	if (d->step == ST_REGION) {
		int any = 0;
		for (int z = 0; z < d->nzones; z++)
			any |= d->zone_ok[z];
		if (!any)
			say(d, "FAIL", "zones", "none of the %d zones can run %s with %s", d->nzones,
			    d->machine_type, d->accelerator);
		d->i = 0;
	}
	return 0;
}

/* A region's Spot GPU quota; after the last region, whether a usable
 * zone's region has quota. */
static int on_region(struct doctor *d, const struct sd_http_response *r, const cJSON *j)
{
	char w[700];
	char metric[96];
	double limit = 0;
	/* A region with no Spot metric listed, or that could not be read,
	 * is not held against the run: only a quota seen short is. */
	d->region_ok[d->i] = 1;
	if (!j) {
		why(r, w, sizeof w);
		say(d, "warn", "region", "%s: %s", d->regions[d->i], w);
	} else {
		double l = quota_left(j, is_spot_gpu, d->model, metric, sizeof metric, &limit);
		if (l < 0) {
			say(d, "warn", "region", "%s: no PREEMPTIBLE_NVIDIA_%s_GPUS quota listed (Spot VMs "
			    "then count against the regular GPU quota)", d->regions[d->i], d->model);
		} else if (l < d->count) {
			say(d, "warn", "region", "%s: %s has %.0f of %.0f left, a server needs %d",
			    d->regions[d->i], metric, l, limit, d->count);
			d->region_ok[d->i] = 0;
		} else {
			say(d, "ok", "region", "%s: %s %.0f of %.0f left", d->regions[d->i], metric, l, limit);
		}
	}
	d->i++;
	d->step = d->i < d->nregions ? ST_REGION : ST_IMAGE;
	if (d->step == ST_IMAGE) {
		int any = 0;
		for (int z = 0; z < d->nzones; z++) {
			char rg[64];
			sd_gce_zone_region(d->zones[z], rg, sizeof rg);
			for (int k = 0; k < d->nregions; k++)
				any |= d->zone_ok[z] && d->region_ok[k] && !strcmp(rg, d->regions[k]);
		}
		if (!any)
			say(d, "FAIL", "regions", "no usable zone's region has Spot GPU quota left for %d x %s "
			    "(ask for more in the console's Quotas page)", d->count, d->accelerator);
	}
	return 0;
}

/* The boot image; then the price sheet for the regions. */
static int on_image(struct doctor *d, const struct sd_http_response *r, const cJSON *j)
{
	char w[700];
	const char *n = j ? cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "name")) : NULL;
	const char *gb = j ? cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "diskSizeGb")) : NULL;
	if (!n) {
		why(r, w, sizeof w);
		say(d, "FAIL", "image", "%s: %s", d->image, w);
	} else {
		say(d, "ok", "image", "%s is %s (%s GB)", d->image, n, gb ? gb : "?");
	}
	d->step = ST_PRICES;
	{
		const char *rs[MAX_ZONES];
		for (int k = 0; k < d->nregions; k++)
			rs[k] = d->regions[k];
		sd_gce_price_init(&d->sheet, d->machine_type, d->accelerator, rs, d->nregions);
	}
	return 0;
}

/* A page of the Billing Catalog: the next page is asked for while prices
 * are missing, then each region's price. */
static int on_prices(struct doctor *d, const struct sd_http_response *r, const cJSON *j)
{
	char w[700];
	char tok[1024], url[4096], err[256];
	if (!j || sd_gce_price_page(&d->sheet, r->body, r->body_len, tok, sizeof tok, err, sizeof err) < 0) {
		if (j)
			snprintf(w, sizeof w, "%s", err);
		else
			why(r, w, sizeof w);
		say(d, "warn", "prices", "the Billing Catalog: %s", w);
		d->step = ST_END;
		return 0;
	}
	if (!sd_gce_price_complete(&d->sheet, -1) && tok[0] && d->sheet.pages < SD_GCE_PRICE_MAX_PAGES) {
		if (sd_gce_price_page_url(d->billing_root, tok, url, sizeof url) < 0) {
			say(d, "warn", "prices", "the Billing Catalog: a page token too long for a URL");
		} else if (sd_gce_call(d->gce, "gce billing skus", "GET", url, NULL, 1, on_reply, d, err,
				       sizeof err) < 0) {
			say(d, "warn", "prices", "%s", err);
		} else {
			return 1;   /* its reply comes to on_reply again */
		}
		d->step = ST_END;
		return 0;
	}
	const struct sd_gce_price_sheet *sh = &d->sheet;
	for (int k = 0; k < d->nregions; k++) {
		char sum[200];
		double usd = sd_gce_price_vm(sh, k, d->vcpus, d->memory_gib, d->count, sum, sizeof sum);
		if (!isnan(usd)) {
			say(d, "ok", "prices", "%s: $%.4f/h a Spot %s with %d x %s (%s)", d->regions[k], usd,
			    d->machine_type, d->count, d->model, sum);
			continue;
		}
		char miss[160] = "";
		if (sh->core[k].usd < 0)
			snprintf(miss + strlen(miss), sizeof miss - strlen(miss), ", %s core", sh->family);
		if (sh->ram[k].usd < 0)
			snprintf(miss + strlen(miss), sizeof miss - strlen(miss), ", %s RAM", sh->family);
		if (sh->gpu[k].usd < 0)
			snprintf(miss + strlen(miss), sizeof miss - strlen(miss), ", %s GPU", sh->gpu_model);
		if (!miss[0])
			snprintf(miss, sizeof miss, ", the machine type's vCPUs and memory");
		say(d, "warn", "prices", "%s: no Spot price for %s (%d pages, %d SKUs read); a run's servers "
		    "there are not priced unless provider.usd_per_hour quotes one", d->regions[k], miss + 2,
		    sh->pages, sh->skus);
	}
	d->step = ST_END;
	return 0;
}

/* What each step does with its reply (j: the parsed body of a 200, else
 * NULL): 0 when the step is over (next() asks the next one), 1 when it
 * asked for another page itself. */
static int (*const on_step[])(struct doctor *, const struct sd_http_response *, const cJSON *) = {
	[ST_PROJECT] = on_project,
	[ST_ZONE] = on_zone,
	[ST_MACHINE] = on_machine,
	[ST_GPU] = on_gpu,
	[ST_REGION] = on_region,
	[ST_IMAGE] = on_image,
	[ST_PRICES] = on_prices,
};

static void on_reply(void *arg, const struct sd_http_response *r)
{
	struct doctor *d = arg;
	cJSON *j = r->status == 200 ? cJSON_ParseWithLength(r->body, r->body_len) : NULL;
	int pending = d->step < ST_END && on_step[d->step](d, r, j);
	cJSON_Delete(j);
	if (!pending)
		next(d);
}

/* Sends the request of the current step (or ends). */
static void next(struct doctor *d)
{
	char url[1024], path[512], err[256];
	const char *label = "gce";
	url[0] = '\0';
	switch (d->step) {
	case ST_PROJECT:
		snprintf(url, sizeof url, "%s/projects/%s", d->api_root, d->project);
		label = "gce projects.get";
		break;
	case ST_ZONE:
		d->zone_ok[d->i] = 1;
		snprintf(path, sizeof path, "zones/%s", d->zones[d->i]);
		sd_gce_url(d->gce, path, url, sizeof url);
		label = "gce zones.get";
		break;
	case ST_MACHINE:
		snprintf(path, sizeof path, "zones/%s/machineTypes/%s", d->zones[d->i], d->machine_type);
		sd_gce_url(d->gce, path, url, sizeof url);
		label = "gce machineTypes.get";
		break;
	case ST_GPU:
		snprintf(path, sizeof path, "zones/%s/acceleratorTypes/%s", d->zones[d->i], d->accelerator);
		sd_gce_url(d->gce, path, url, sizeof url);
		label = "gce acceleratorTypes.get";
		break;
	case ST_REGION:
		snprintf(path, sizeof path, "regions/%s", d->regions[d->i]);
		sd_gce_url(d->gce, path, url, sizeof url);
		label = "gce regions.get";
		break;
	case ST_IMAGE:
		snprintf(url, sizeof url, "%s/%s", d->api_root, d->image);
		label = "gce images.get";
		break;
	case ST_PRICES:
		sd_gce_price_page_url(d->billing_root, NULL, url, sizeof url);
		label = "gce billing skus";
		break;
	case ST_END:
		d->done = 1;
		return;
	}
	if (sd_gce_call(d->gce, label, "GET", url, NULL, 1, on_reply, d, err, sizeof err) < 0) {
		say(d, "FAIL", "request", "%s", err);
		d->done = 1;
	}
}

/* The settings: the job file's "provider" object. */
static const char *const gce_keys[] = {"name", "project", "zones", "credentials", "machine_type",
				       "accelerator", "accelerator_count", "image", "api_root",
				       "billing_root", "gcloud", "identity",
				       /* the run's own (spotdeck-job(5)), not checked here */
				       "disk_gb", "ssh_user", "worker", "ssh_port", "poll_s", "boot_timeout_s",
				       "block_s", "usd_per_hour", "orphans", "host_key_checking", "known_hosts",
				       "connect_timeout", "ssh", NULL};

char *sd_doctor_opt_str(const cJSON *p, const char *key, const char *dflt, const char *file, int *bad)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(p, key);
	if (!v)
		return dflt ? strdup(dflt) : NULL;
	if (!cJSON_IsString(v) || !v->valuestring[0]) {
		fprintf(stderr, "spotdeck doctor: %s: provider.%s: expected a non-empty string\n", file, key);
		*bad = 1;
		return NULL;
	}
	return strdup(v->valuestring);
}

const cJSON *sd_doctor_job(const char *file, cJSON **json)
{
	FILE *f = fopen(file, "r");
	struct stat st;
	*json = NULL;
	if (!f) {
		fprintf(stderr, "spotdeck doctor: %s: %m\n", file);
		return NULL;
	}
	if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
		fprintf(stderr, "spotdeck doctor: %s: is a directory, not a job file\n", file);
		fclose(f);
		return NULL;
	}
	static char text[1 << 20];
	size_t n = fread(text, 1, sizeof text - 1, f);
	int big = !feof(f);
	fclose(f);
	if (big) {
		fprintf(stderr, "spotdeck doctor: %s: over 1 MiB, not a job file\n", file);
		return NULL;
	}
	text[n] = '\0';
	/* The byte-order mark some editors write is not JSON, but the run
	 * reads such a file: so does the doctor. */
	const char *start = n >= 3 && !memcmp(text, "\xef\xbb\xbf", 3) ? text + 3 : text;
	const char *end = NULL;
	cJSON *j = cJSON_ParseWithOpts(start, &end, 1);
	if (!j) {
		/* The job parser names what is wrong as the run would (a UTF-16
		 * file, the line and column of a JSON mistake): the same line
		 * from both commands. */
		struct sd_job job;
		char *why = NULL;
		if (sd_job_parse(&job, text, n, file, &why) < 0)
			fprintf(stderr, "spotdeck doctor: %s\n", why);
		else
			fprintf(stderr, "spotdeck doctor: %s: not one JSON value (near byte %ld)\n", file,
			        (long)(end ? end - text : 0));
		free(why);
		return NULL;
	}
	*json = j;
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(j, "provider");
	if (!cJSON_IsObject(p)) {
		fprintf(stderr, "spotdeck doctor: %s: no \"provider\" object\n", file);
		return NULL;
	}
	return p;
}

int sd_doctor_known_keys(const cJSON *p, const char *const *keys, const char *provider, const char *file)
{
	const cJSON *it;
	int bad = 0;
	cJSON_ArrayForEach(it, p) {
		int known = 0;
		for (int k = 0; keys[k]; k++)
			known |= !strcmp(it->string, keys[k]);
		if (!known) {
			fprintf(stderr, "spotdeck doctor: %s: provider.%s: not a setting of provider %s\n", file,
				it->string, provider);
			bad = 1;
		}
	}
	return bad ? -1 : 0;
}

/* REGION-ZONE, as GCE names them: us-central1-a, europe-west4-b. */
/* A project id: [a-z0-9-], starting with a letter (Google's are 6 to 30
 * long; only what a URL path needs is checked). */
static int project_ok(const char *p)
{
	return sd_gce_name_ok(p);
}

/* projects/P/global/images/NAME or projects/P/global/images/family/F. */
static int image_ok(const char *im)
{
	if (strncmp(im, "projects/", 9) != 0 || !strstr(im, "/global/images/") || strstr(im, ".."))
		return 0;
	for (const char *c = im; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-' || *c == '/' || *c == '.' ||
		      *c == '_'))
			return 0;
	return 1;
}

static int load_settings(struct doctor *d, const cJSON *p, const char *file)
{
	int bad = sd_doctor_known_keys(p, gce_keys, "gce", file) < 0;
	if (!bad) {
		d->project = sd_doctor_opt_str(p, "project", NULL, file, &bad);
		if (!d->project && !bad) {
			fprintf(stderr, "spotdeck doctor: %s: provider.project: missing\n", file);
			bad = 1;
		}
		const char *env = getenv("GOOGLE_APPLICATION_CREDENTIALS");
		d->credentials = sd_doctor_opt_str(p, "credentials", env && *env ? env : NULL, file, &bad);
		d->gcloud = sd_doctor_opt_str(p, "gcloud", "gcloud", file, &bad);
		d->identity = sd_doctor_opt_str(p, "identity", "~/.ssh/google_compute_engine", file, &bad);
		d->identity = sd_expand_home(d->identity);
		d->machine_type = sd_doctor_opt_str(p, "machine_type", "n1-standard-8", file, &bad);
		d->accelerator = sd_doctor_opt_str(p, "accelerator", "nvidia-tesla-t4", file, &bad);
		d->image = sd_doctor_opt_str(p, "image", GCE_DEFAULT_IMAGE, file, &bad);
		d->api_root = sd_doctor_opt_str(p, "api_root", SD_GCE_COMPUTE_ROOT, file, &bad);
		d->billing_root = sd_doctor_opt_str(p, "billing_root", SD_GCE_BILLING_ROOT, file, &bad);
		const cJSON *c = cJSON_GetObjectItemCaseSensitive(p, "accelerator_count");
		d->count = 1;
		if (c && (!cJSON_IsNumber(c) || c->valuedouble < 1 || c->valuedouble > 16 ||
			  c->valuedouble != (int)c->valuedouble)) {
			fprintf(stderr, "spotdeck doctor: %s: provider.accelerator_count: expected 1 to 16\n", file);
			bad = 1;
		} else if (c) {
			d->count = (int)c->valuedouble;
		}
		const cJSON *zs = cJSON_GetObjectItemCaseSensitive(p, "zones"), *z;
		if (!cJSON_IsArray(zs) || cJSON_GetArraySize(zs) < 1 || cJSON_GetArraySize(zs) > MAX_ZONES) {
			fprintf(stderr, "spotdeck doctor: %s: provider.zones: expected a list of 1 to %d zones\n", file,
				MAX_ZONES);
			bad = 1;
		} else {
			cJSON_ArrayForEach(z, zs) {
				if (!cJSON_IsString(z) || !sd_gce_zone_name_ok(z->valuestring)) {
					fprintf(stderr, "spotdeck doctor: %s: provider.zones: \"%.64s\" is not a zone name "
						"(REGION-ZONE, e.g. us-central1-a)\n", file,
						cJSON_IsString(z) ? z->valuestring : "(not a string)");
					bad = 1;
					break;
				}
				for (int k = 0; k < d->nzones; k++)
					if (!strcmp(d->zones[k], z->valuestring)) {
						fprintf(stderr, "spotdeck doctor: %s: provider.zones: %s is listed twice\n",
							file, z->valuestring);
						bad = 1;
					}
				if (bad)
					break;
				d->zones[d->nzones++] = strdup(z->valuestring);
			}
		}
	}
	/* Values that go into URLs: names as GCE writes them, nothing more. */
	if (!bad && !project_ok(d->project)) {
		fprintf(stderr, "spotdeck doctor: %s: provider.project: \"%.64s\" is not a project id "
			"(a-z, 0-9, -)\n", file, d->project);
		bad = 1;
	}
	if (!bad && (!sd_gce_name_ok(d->machine_type) || !sd_gce_name_ok(d->accelerator))) {
		fprintf(stderr, "spotdeck doctor: %s: provider.machine_type or accelerator: not a resource name "
			"(a-z, 0-9, -)\n", file);
		bad = 1;
	}
	if (!bad && !image_ok(d->image)) {
		fprintf(stderr, "spotdeck doctor: %s: provider.image: \"%.80s\" is not projects/PROJECT/global/"
			"images/NAME or .../images/family/FAMILY\n", file, d->image);
		bad = 1;
	}
	if (bad)
		return -1;
	for (int z = 0; z < d->nzones; z++) {
		char r[64];
		sd_gce_zone_region(d->zones[z], r, sizeof r);
		int seen = 0;
		for (int k = 0; k < d->nregions; k++)
			seen |= !strcmp(d->regions[k], r);
		if (!seen)
			snprintf(d->regions[d->nregions++], sizeof d->regions[0], "%s", r);
	}
	sd_gce_accelerator_model(d->accelerator, d->model, sizeof d->model);
	return 0;
}

static void doctor_free(struct doctor *d)
{
	free(d->project);
	free(d->credentials);
	free(d->gcloud);
	free(d->identity);
	free(d->machine_type);
	free(d->accelerator);
	free(d->image);
	free(d->api_root);
	free(d->billing_root);
	for (int z = 0; z < d->nzones; z++)
		free(d->zones[z]);
}

static int doctor_gce(const cJSON *p, const char *file);

/* The job's own training data, for datasets npy and tokens: the files every
 * worker will map, checked as spotdeck checks them before it starts a run
 * (headers, sizes, shapes, labels; token files' framing, block_size and a
 * built-in image model refused; sd_train_check_data).  A job file that does not
 * load as a whole is left to the provider checks, which say what is wrong
 * with its provider object.  Returns 1 when the data is bad. */
static int doctor_data(const char *file)
{
	struct sd_job *job = malloc(sizeof *job);
	char *why = NULL;
	int failed = 0;
	if (job && sd_job_load(job, file, &why) == 0 && (!strcmp(job->train.dataset, "npy") ||
	                                                 !strcmp(job->train.dataset, "tokens"))) {
		int npy = !strcmp(job->train.dataset, "npy");
		if (sd_train_check_data(&job->train, &why) < 0)
			sd_doctor_say(&failed, "FAIL", "data", "%s", why);
		else if (npy)
			sd_doctor_say(&failed, "ok", "data", "npy arrays in %s: headers, sizes, shapes "
			              "and labels", job->train.data_dir);
		else
			sd_doctor_say(&failed, "ok", "data", "train.bin and val.bin in %s: formats and "
			              "windows of block_size %d", job->train.data_dir,
			              job->train.block_size);
	}
	free(why);
	free(job);
	return failed;
}

/* The job's ONNX model (a "model" ending in .onnx): read, its whole graph
 * checked and its input and classes matched to the data, as spotdeck
 * checks it before it starts a run (sd_train_check_model).  Like the data
 * line, said only for a job file that loads.  Returns 1 when it is bad. */
static int doctor_model(const char *file)
{
	struct sd_job *job = malloc(sizeof *job);
	char *why = NULL;
	int failed = 0;
	if (job && sd_job_load(job, file, &why) == 0 && sd_onnx_is_path(job->train.model)) {
		struct sd_onnx_info info;
		uint8_t *bytes = NULL;
		size_t len = 0;
		if (sd_onnx_read_file(job->train.model, &bytes, &len, &why) < 0 ||
		    sd_train_check_model(&job->train, bytes, len, &info, &why) < 0)
			sd_doctor_say(&failed, "FAIL", "model", "%s", why);
		else if (!strcmp(job->train.dataset, "tokens"))
			sd_doctor_say(&failed, "ok", "model", "%s: %d ONNX nodes, a language model of "
			              "block_size %d, vocabulary %d, %zu parameters; sent to each worker "
			              "(%zu bytes)", job->train.model, info.nodes, job->train.block_size,
			              info.classes, info.params, len);
		else
			sd_doctor_say(&failed, "ok", "model", "%s: %d ONNX nodes, %dx%dx%d inputs, %d classes, "
			              "%zu parameters; sent to each worker (%zu bytes)", job->train.model,
			              info.nodes, info.c, info.h, info.w, info.classes, info.params, len);
		free(bytes);
	}
	free(why);
	free(job);
	return failed;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: spotdeck doctor [--provider gce|aws] JOB.json\n"
		   "Checks, without creating anything, that a run of JOB.json could start on the cloud\n"
		   "its provider object names: credentials, quotas, zones, machine and GPU types, the\n"
		   "image, the Spot price.  One line per check; exit 0 when a run could start, 1 when not.\n");
}

int sd_doctor_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"provider", required_argument, 0, 'p'},
		{"help", no_argument, 0, 'h'},
		{0, 0, 0, 0},
	};
	const char *provider = NULL;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (c == 'p') {
			provider = optarg;
		} else if (c == 'h') {
			usage(stdout);
			return 0;
		} else {
			usage(stderr);
			return 2;
		}
	}
	if (provider && strcmp(provider, "gce") != 0 && strcmp(provider, "aws") != 0) {
		fprintf(stderr, "spotdeck doctor: --provider %s: doctor checks gce or aws\n", provider);
		return 2;
	}
	if (optind != argc - 1) {
		usage(stderr);
		return 2;
	}
	const char *file = argv[optind];
	cJSON *json;
	const cJSON *p = sd_doctor_job(file, &json);
	const char *name = p ? cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(p, "name")) : NULL;
	int rc = 2;
	if (!p) {
		rc = 2;
	} else if (!name) {
		fprintf(stderr, "spotdeck doctor: %s: provider.name: expected \"gce\" or \"aws\"\n", file);
	} else if (strcmp(name, "gce") != 0 && strcmp(name, "aws") != 0) {
		fprintf(stderr, "spotdeck doctor: %s: provider.name is \"%s\"; doctor checks gce or aws\n", file,
			name ? name : "");
	} else if (provider && strcmp(provider, name) != 0) {
		fprintf(stderr, "spotdeck doctor: --provider %s, but %s's provider.name is \"%s\"\n", provider, file,
			name);
	} else {
		int data_failed = doctor_data(file);
		data_failed |= doctor_model(file);
		rc = !strcmp(name, "aws") ? sd_doctor_aws(p, file) : doctor_gce(p, file);
		if (rc == 0 && data_failed)
			rc = 1;
	}
	cJSON_Delete(json);
	return rc;
}

/* The gce checks of P (the job file FILE's provider object): doctor.h's
 * exit status. */
static int doctor_gce(const cJSON *p, const char *file)
{
	struct doctor *d = calloc(1, sizeof *d);
	if (!d || load_settings(d, p, file) < 0) {
		if (d)
			doctor_free(d);
		free(d);
		return 2;
	}
	char err[512], *pub = NULL;
	/* The key pair a run puts in its VMs' metadata and logs in with. */
	if (sd_ssh_public_key(d->identity, &pub, err, sizeof err) < 0)
		say(d, "FAIL", "ssh key", "provider.identity: %s", err);
	else
		say(d, "ok", "ssh key", "%s (%.*s...)", d->identity, 24, pub);
	free(pub);
	uv_loop_init(&d->loop);
	d->http = sd_http_new(&d->loop, &sd_doctor_policy, NULL, NULL, err, sizeof err);
	struct sd_gce_client_config cfg = {.project = d->project, .compute_root = d->api_root,
					   .key_file = d->credentials};
	/* "credentials": "gcloud" is the login of whoever runs spotdeck. */
	if (d->credentials && !strcmp(d->credentials, "gcloud")) {
		cfg.key_file = NULL;
		cfg.gcloud = d->gcloud;
	}
	if (d->http)
		d->gce = sd_gce_client_new(d->http, &cfg, err, sizeof err);
	if (!d->gce) {
		say(d, "FAIL", "credentials", "%s", err);
	} else {
		next(d);
		while (!d->done && uv_run(&d->loop, UV_RUN_ONCE))
			;
	}
	if (d->gce)
		sd_gce_client_free(d->gce);
	if (d->http)
		sd_http_close(d->http, NULL, NULL);
	uv_run(&d->loop, UV_RUN_DEFAULT);
	uv_loop_close(&d->loop);
	int rc = d->failed ? 1 : 0;
	doctor_free(d);
	free(d);
	return rc;
}
