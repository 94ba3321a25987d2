/* src/provider/cloud-vm.c - what the cloud providers share (cloud-vm.h). */
#include "config.h"
#include "src/provider/cloud-vm.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#include "src/base/errors.h"
#include "src/base/json.h"
#include "src/proto/job.h"
#include "src/provider/provider.h"
#include "src/provider/http/secret-file.h"

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
			      integer ? "a whole number" : "a number", lo, hi, sd_json_describe(v, SD_JSON_AS_TEXT, shown, sizeof shown));
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

int sd_setting_check_known(const cJSON *s, const char *const *keys, const char *provider, const char *file,
			   char **why)
{
	for (const cJSON *i = s ? s->child : NULL; i; i = i->next) {
		int known = 0;
		for (int k = 0; keys[k]; k++)
			known |= !strcmp(i->string, keys[k]);
		if (!known)
			return sd_why(why, "%s: provider.%s: unknown key for the %s provider (spotdeck-job(5), "
				      "PROVIDER %s)", file, i->string, provider, provider);
	}
	return 0;
}

int sd_cloud_check_vm_settings(const cJSON *s, const char *file, char **why)
{
	const cJSON *u = cJSON_GetObjectItemCaseSensitive(s, "ssh_user");
	if (u && cJSON_IsString(u)) {
		for (const char *c = u->valuestring; *c; c++)
			if (!(islower((unsigned char)*c) || isdigit((unsigned char)*c) || *c == '_' || *c == '-') ||
			    c - u->valuestring >= 32 || u->valuestring[0] == '-')
				return sd_why(why, "%s: provider.ssh_user: \"%.40s\" is not a user name (a-z, 0-9, _, -; "
					      "at most 32)", file, u->valuestring);
	}
	if (sd_setting_check_num(s, "ssh_port", 1, 65535, 1, file, why) < 0 ||
	    sd_setting_check_num(s, "connect_timeout", 1, 300, 1, file, why) < 0 ||
	    sd_setting_check_num(s, "poll_s", 0.2, 300, 0, file, why) < 0 ||
	    sd_setting_check_num(s, "boot_timeout_s", 1, 3600, 0, file, why) < 0 ||
	    sd_setting_check_num(s, "block_s", 1, 86400, 0, file, why) < 0 ||
	    sd_setting_check_num(s, "preempt_wait_s", 0, 3600, 0, file, why) < 0 ||
	    sd_setting_check_num(s, "usd_per_hour", 0.001, 10000, 0, file, why) < 0)
		return -1;
	const cJSON *o = cJSON_GetObjectItemCaseSensitive(s, "orphans");
	if (o && (!cJSON_IsString(o) || sd_orphans_parse(o->valuestring) < 0))
		return sd_why(why, "%s: provider.orphans: expected \"delete\", \"keep\", \"adopt\" or \"ask\"", file);
	const cJSON *h = cJSON_GetObjectItemCaseSensitive(s, "host_key_checking");
	if (h && cJSON_IsString(h) && strcmp(h->valuestring, "yes") && strcmp(h->valuestring, "accept-new") &&
	    strcmp(h->valuestring, "no"))
		return sd_why(why, "%s: provider.host_key_checking: expected yes, accept-new or no", file);
	return 0;
}

void sd_cloud_report(struct sd_fleet *fleet, const char *server, const char *zone, enum sd_provider_event_kind kind,
		     const char *code, const char *message, const char *address)
{
	struct sd_provider_event ev = {
		.kind = kind,
		.server = server,
		.time = sd_fleet_now(fleet),
		.address = kind == SD_PROVIDER_RUNNING ? address : NULL,
		.code = code,
		.message = message,
		.zone = zone,
	};
	sd_fleet_report(fleet, &ev);
}

void sd_cloud_journal_error(struct sd_fleet *fleet, const char *provider, const char *reason, const char *error)
{
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "provider", provider);
	cJSON_AddStringToObject(ev, "reason", reason);
	if (error)
		cJSON_AddStringToObject(ev, "error", error);
	sd_fleet_journal(fleet, SD_EV_ERROR, ev);
}

void sd_cloud_set_price(struct sd_cloud_catalog *c, struct sd_fleet *fleet, int i, double usd, cJSON *extra)
{
	c->prices[i] = usd;
	c->offers[i].usd_per_hour = usd;
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "offer", c->offers[i].id);
	cJSON_AddNumberToObject(ev, "usd_per_hour", usd);
	for (cJSON *x = extra ? extra->child : NULL; x; x = x->next)
		cJSON_AddItemToObject(ev, x->string, cJSON_Duplicate(x, 1));
	cJSON_Delete(extra);
	sd_fleet_journal(fleet, SD_EV_PRICE, ev);
}

double sd_cloud_wall_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const char *const orphans_names[] = { "delete", "keep", "adopt", "ask" };

int sd_orphans_parse(const char *s)
{
	for (int i = 0; s && i < 4; i++)
		if (!strcmp(s, orphans_names[i]))
			return i;
	return -1;
}

enum sd_orphans sd_cloud_orphans(const struct sd_provider_env *env, const cJSON *s)
{
	int o = sd_orphans_parse(env->orphans);
	if (o < 0) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, "orphans");
		o = sd_orphans_parse(cJSON_IsString(v) ? v->valuestring : NULL);
	}
	if (o < 0)
		o = env->interactive ? SD_ORPHANS_ASK : SD_ORPHANS_DELETE;
	return (enum sd_orphans)o;
}

int sd_cloud_orphans_hold(struct sd_cloud_orphans *o)
{
	if (o->what != SD_ORPHANS_ADOPT && o->what != SD_ORPHANS_ASK)
		return 0;
	o->asking |= o->what == SD_ORPHANS_ASK;   /* answerable from now on */
	return 1;
}

int sd_cloud_orphans_listed(struct sd_cloud_orphans *o)
{
	o->reconciling = 0;
	return !o->asking;
}

int sd_cloud_orphans_answer(struct sd_cloud_orphans *o, const char *what, const char *vms, char **why)
{
	int a = sd_orphans_parse(what);
	if (a < 0 || a == SD_ORPHANS_ASK)
		return sd_why(why, "\"%s\": expected adopt, delete or keep", what ? what : "");
	if (!o->asking)
		return sd_why(why, "no question is open (the earlier controller's %s are settled)", vms);
	o->asking = 0;
	o->what = (enum sd_orphans)a;
	return !o->reconciling;
}

void sd_cloud_journal_orphan(struct sd_fleet *fleet, const char *provider, const char *instance, const char *zone,
			     const char *status, const char *action, const char *server)
{
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "provider", provider);
	cJSON_AddStringToObject(ev, "instance", instance);
	cJSON_AddStringToObject(ev, "zone", zone);
	cJSON_AddStringToObject(ev, "status", status);
	cJSON_AddStringToObject(ev, "action", action);
	if (server)
		cJSON_AddStringToObject(ev, "server", server);
	sd_fleet_journal(fleet, SD_EV_ORPHAN, ev);
}

void sd_cloud_catalog_build(struct sd_cloud_catalog *c, const struct sd_cloud_offer_spec *spec, char *const *zones,
			    int n)
{
	for (size_t k = 0; k < sizeof c->model - 1 && spec->gpu[k]; k++)
		c->model[k] = (char)tolower((unsigned char)spec->gpu[k]);
	c->offers = sd_calloc((size_t)n, sizeof *c->offers);
	c->ids = sd_calloc((size_t)n, sizeof *c->ids);
	c->prices = sd_calloc((size_t)n, sizeof *c->prices);
	c->cat.zones = sd_calloc((size_t)n, sizeof *c->cat.zones);
	for (int i = 0; i < n; i++) {
		struct sd_offer *o = &c->offers[i];
		size_t len = strlen(spec->provider) + strlen(zones[i]) + strlen(c->model) + 16;
		c->ids[i] = sd_malloc(len);
		snprintf(c->ids[i], len, "%s/%s/%s/spot", spec->provider, zones[i], c->model);
		o->id = c->ids[i];
		o->provider = spec->provider;
		if (spec->region) {
			o->region = spec->region;
		} else {
			if (!c->regions)
				c->regions = sd_calloc((size_t)n, sizeof *c->regions);
			const char *dash = strrchr(zones[i], '-');
			size_t rl = dash ? (size_t)(dash - zones[i]) : strlen(zones[i]);
			c->regions[i] = sd_malloc(rl + 1);
			memcpy(c->regions[i], zones[i], rl);
			c->regions[i][rl] = '\0';
			o->region = c->regions[i];
		}
		o->zone = zones[i];
		o->machine_type = spec->machine_type;
		o->gpu = spec->gpu;
		o->gpu_count = spec->gpu_count;
		o->transient = true;
		o->usd_per_hour = spec->usd_per_hour;
		c->prices[i] = spec->usd_per_hour;
		o->price_source = spec->price_source;
		o->images_per_sec = NAN;
		o->speed_source = "unknown: measured by the run";
		o->capacity = 64;
		o->capacity_source = spec->capacity_source;
		o->notice_seconds = spec->notice_seconds;
		o->notice_source = spec->notice_source;
		o->billing_unit = SD_BILL_PER_SECOND;
		o->billing_minimum_seconds = 60;
		o->billing_source = spec->billing_source;
		o->revocation.model = SD_REVOCATION_NONE;
		o->index = i;
		o->zone_index = i;
		c->cat.zones[i] = o->id;
	}
	c->cat.file = spec->catalog_file;
	c->cat.name = spec->catalog_name;
	c->cat.noffers = n;
	c->cat.offers = c->offers;
	c->cat.nzones = n;
}

void sd_cloud_catalog_free(struct sd_cloud_catalog *c)
{
	for (int i = 0; i < c->cat.noffers; i++) {
		if (c->ids)
			free(c->ids[i]);
		if (c->regions)
			free(c->regions[i]);
	}
	free(c->ids);
	free(c->regions);
	if (c->market)
		sd_catalog_free(c->market);
	free(c->offers);
	free(c->prices);
	free(c->cat.zones);
	memset(c, 0, sizeof *c);
}

static void on_limit(uv_timer_t *t)
{
	(void)t;
}

static void on_limit_closed(uv_handle_t *h)
{
	*(int *)h->data = 1;
}

void sd_cloud_run_until(uv_loop_t *loop, const int *pending, double seconds)
{
	uv_timer_t limit;
	int closed = 0;
	uv_timer_init(loop, &limit);
	uv_timer_start(&limit, on_limit, (uint64_t)(seconds * 1000), 0);
	while (*pending > 0 && uv_is_active((uv_handle_t *)&limit) && uv_run(loop, UV_RUN_ONCE))
		;
	/* The timer lives on this stack: closed before it returns (a loop
	 * iteration ends with its close callbacks, and NOWAIT never blocks). */
	limit.data = &closed;
	uv_close((uv_handle_t *)&limit, on_limit_closed);
	while (!closed)
		uv_run(loop, UV_RUN_NOWAIT);
}

int sd_cloud_catalog_model(struct sd_cloud_catalog *c, const char *path, char **why)
{
	char buf[4200];
	const char *base = path ? strrchr(path, '/') : NULL;
	if (!path || !strcmp(base ? base + 1 : path, "gce-2019.json")) {
		/* The default market is the 2019 simulator's: the 2026 one is
		 * calibrated for today's clouds (data/README.md). */
		snprintf(buf, sizeof buf, "%.*smarket-2026.json", path && base ? (int)(base - path + 1) : 0,
			 path ? path : "");
		path = buf;
	}
	if (sd_catalog_load(&c->market, path, why) < 0) {
		c->market = NULL;
		return -1;
	}
	int got = 0;
	for (int i = 0; i < c->cat.noffers; i++) {
		struct sd_offer *o = &c->offers[i];
		const struct sd_offer *best = NULL;
		for (int k = 0; k < c->market->noffers; k++) {
			const struct sd_offer *m = &c->market->offers[k];
			if (!m->transient || m->revocation.model == SD_REVOCATION_NONE || strcmp(m->provider, o->provider) ||
			    strcasecmp(m->gpu, o->gpu))
				continue;
			if (!best || (!strcmp(m->region, o->region) && strcmp(best->region, o->region)))
				best = m;
		}
		if (best) {
			o->revocation = best->revocation;   /* its arrays stay c->market's */
			got++;
		}
	}
	return got;
}

void sd_cloud_catalog_model_journaled(struct sd_cloud_catalog *c, const char *path, struct sd_fleet *fleet,
				      const char *provider)
{
	char *why = NULL;
	if (sd_cloud_catalog_model(c, path, &why) >= 0)
		return;
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "provider", provider);
	cJSON_AddStringToObject(ev, "reason", "no revocation model for the offers: P(revoked) unknown");
	cJSON_AddStringToObject(ev, "error", why ? why : "");
	sd_fleet_journal(fleet, SD_EV_ERROR, ev);
	free(why);
}

void sd_cloud_journal_left(struct sd_fleet *fleet, const char *provider, const char *tag, cJSON *names,
			   const char *error)
{
	if (cJSON_GetArraySize(names) == 0 && !error) {
		cJSON_Delete(names);
		return;
	}
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "provider", provider);
	cJSON_AddStringToObject(ev, "reason", "VMs of the run may still be running (and billed): spotdeck --resume "
				"RUNDIR deletes them, or the cloud's console (label or tag spotdeck-run)");
	cJSON_AddStringToObject(ev, "run_label", tag);
	cJSON_AddItemToObject(ev, "instances", names);
	if (error)
		cJSON_AddStringToObject(ev, "error", error);
	sd_fleet_journal(fleet, SD_EV_ERROR, ev);
}

/* ---- one VM lifecycle for every cloud ---- */

/* A cloud's create() hands out its state, which begins with a struct
 * sd_cloud, as the opaque struct sd_provider (cloud-vm.h). */
static struct sd_cloud *cloud_of(struct sd_provider *p)
{
	return (struct sd_cloud *)(void *)p;
}

static const struct sd_cloud *const_cloud_of(const struct sd_provider *p)
{
	return (const struct sd_cloud *)(const void *)p;
}

struct sd_cloud_vm *sd_cloud_find(const struct sd_cloud *c, const char *server)
{
	for (struct sd_cloud_vm *v = c->servers; v; v = v->next)
		if (!strcmp(v->id, server))
			return v;
	return NULL;
}

int sd_cloud_zone_index(const struct sd_cloud *c, const char *zone)
{
	for (int i = 0; i < c->nzones; i++)
		if (!strcmp(c->zones[i], zone))
			return i;
	return -1;
}

void sd_cloud_unlink(struct sd_cloud *c, struct sd_cloud_vm *v)
{
	for (struct sd_cloud_vm **q = &c->servers; *q; q = &(*q)->next)
		if (*q == v) {
			*q = v->next;
			free(v);
			return;
		}
}

void sd_cloud_vm_report(struct sd_cloud *c, struct sd_cloud_vm *v, enum sd_provider_event_kind kind,
			const char *code, const char *message)
{
	if (kind == SD_PROVIDER_REVOKED || kind == SD_PROVIDER_FAILED || kind == SD_PROVIDER_STOCKOUT)
		v->reported_end = 1;
	sd_cloud_report(c->fleet, v->id, c->zones[v->zone], kind, code, message, v->name);
}

struct sd_cloud_vm *sd_cloud_vm_new(struct sd_cloud *c, const char *id, int zone)
{
	struct sd_cloud_vm *v = sd_calloc(1, c->ops->vm_size);
	if (id)
		snprintf(v->id, sizeof v->id, "%s", id);
	v->zone = zone;
	v->host = -1;
	v->cloud = c;
	v->next = c->servers;
	c->servers = v;
	return v;
}

void sd_cloud_boot_done(struct sd_cloud *c, struct sd_cloud_vm *v, const char *addr, const char *comm_addr)
{
	v->st = SD_VM_WAIT_SSH;
	sd_cloud_vm_report(c, v, SD_PROVIDER_PROVISIONED, NULL, NULL);
	struct sd_ssh_host h = {
		.name = v->name,
		.host = addr,
		.user = c->ssh_user,
		.port = c->ssh_port,
		.identity = c->identity,
		.worker = c->worker,
		.comm_host = comm_addr,
	};
	v->host = sd_ssh_host_add(c->ssh, &h);
	sd_ssh_attach(c->ssh, v->id, v->host);
	sd_ssh_wait_ready(c->ssh, v->host, c->boot_timeout_s, sd_cloud_on_ssh_ready, v);
}

void sd_cloud_on_ssh_ready(void *arg, int host, int ok, const char *said)
{
	struct sd_cloud_vm *v = arg;
	struct sd_cloud *c = v->cloud;
	(void)host;
	if (v->released || v->reported_end || v->st != SD_VM_WAIT_SSH)
		return;
	if (ok) {
		v->st = SD_VM_RUNNING;
		sd_cloud_vm_report(c, v, SD_PROVIDER_RUNNING, NULL, NULL);
		return;
	}
	char msg[700];
	snprintf(msg, sizeof msg, "%s %s runs but its sshd did not let us in within %.0f s: %s", c->ops->vm_word,
	         c->ops->ref(v), c->boot_timeout_s, said && said[0] ? said : "no answer");
	v->st = SD_VM_RUNNING;
	sd_cloud_vm_report(c, v, SD_PROVIDER_FAILED, "SSH_UNREACHABLE", msg);
	sd_cloud_delete(c, v);
}

/* V's worker ended, or its host stopped answering ssh, while it trained
 * without a notice: a crash, or an interruption its worker never heard
 * of.  The list, asked now, says which. */
static void suspect(struct sd_cloud *c, struct sd_cloud_vm *v, const char *code, const char *message)
{
	if (v->suspect)
		return;
	v->suspect = 1;
	snprintf(v->suspect_code, sizeof v->suspect_code, "%s", code);
	snprintf(v->suspect_msg, sizeof v->suspect_msg, "%s", message);
	c->ops->list(c);
}

void sd_cloud_on_unreachable(void *ctx, const char *server, const char *message)
{
	struct sd_cloud *c = ctx;
	struct sd_cloud_vm *v = sd_cloud_find(c, server);
	if (v && !v->released && !v->reported_end)
		suspect(c, v, "HOST_UNREACHABLE", message);
}

int sd_cloud_judge(struct sd_provider *p, const char *server)
{
	struct sd_cloud *c = cloud_of(p);
	struct sd_cloud_vm *v = sd_cloud_find(c, server);
	if (!v || v->released || v->reported_end || c->closing || (v->st != SD_VM_RUNNING && v->st != SD_VM_WAIT_SSH) ||
	    !c->ops->known(v))
		return 0;
	char msg[200];
	snprintf(msg, sizeof msg, "the worker on %s %s ended", c->ops->vm_word, c->ops->ref(v));
	suspect(c, v, "WORKER_ENDED", msg);
	return 1;
}

/* V (acquired while the list or the question was open) takes over held VM
 * H of its zone: no insert; it is billed from now (before, the earlier
 * controller's journal counted it), and trains once its sshd answers. */
static void adopt(struct sd_cloud *c, struct sd_cloud_vm *v, struct sd_cloud_vm *h)
{
	c->ops->adopt(v, h);
	snprintf(v->name, sizeof v->name, "%s", h->name);
	char addr[48], comm[48];
	snprintf(addr, sizeof addr, "%s", h->addr);
	snprintf(comm, sizeof comm, "%s", h->comm_addr);
	sd_cloud_journal_orphan(c->fleet, c->ops->name, c->ops->ref(h), c->zones[h->zone], h->status, "adopt", v->id);
	sd_cloud_unlink(c, h);
	v->adopted = 1;
	sd_cloud_boot_done(c, v, addr, comm);
}

void sd_cloud_settle(struct sd_cloud *c)
{
	int again = 1;
	while (again) {   /* the list changes under adopt: walk it again */
		again = 0;
		for (struct sd_cloud_vm *v = c->servers; v; v = v->next) {
			if (v->st != SD_VM_WAITING)
				continue;
			struct sd_cloud_vm *h = NULL;
			for (struct sd_cloud_vm *t = c->servers; c->orph.what == SD_ORPHANS_ADOPT && t; t = t->next)
				if (t->st == SD_VM_HELD && t->zone == v->zone)
					h = t;
			if (h) {
				adopt(c, v, h);
				again = 1;
				break;
			}
			char err[512];
			if (c->ops->insert(c, v, err, sizeof err) < 0) {
				v->st = SD_VM_GONE;
				sd_cloud_vm_report(c, v, SD_PROVIDER_FAILED, c->ops->insert_call, err);
			}
		}
	}
	for (struct sd_cloud_vm *v = c->servers, *n; v; v = n) {
		n = v->next;
		if (v->st != SD_VM_HELD)
			continue;
		int keep = c->orph.what == SD_ORPHANS_KEEP;
		sd_cloud_journal_orphan(c->fleet, c->ops->name, c->ops->ref(v), c->zones[v->zone], v->status,
		                        keep ? "keep" : "delete", NULL);
		if (keep && c->ops->keep_forgets) {
			sd_cloud_unlink(c, v);
			continue;
		}
		v->released = 1;
		v->st = SD_VM_RUNNING;
		if (keep)
			v->st = SD_VM_GONE;   /* left alone, by the sweep at close too */
		else
			sd_cloud_delete(c, v);
	}
}

void sd_cloud_on_reconciled(void *arg, int n, const char *error)
{
	struct sd_cloud *c = arg;
	(void)n;
	int now = sd_cloud_orphans_listed(&c->orph);
	if (c->closing)
		return;
	if (error) {
		char reason[200];
		snprintf(reason, sizeof reason,
		         "the run's %s could not be listed at start: orphans of an earlier controller, if any, are left",
		         c->ops->vms_word);
		sd_cloud_journal_error(c->fleet, c->ops->name, reason, error);
	}
	if (now)   /* else by the answer (sd_cloud_answer_orphans) */
		sd_cloud_settle(c);
}

int sd_cloud_answer_orphans(struct sd_provider *p, const char *what, char **why)
{
	struct sd_cloud *c = cloud_of(p);
	int now = sd_cloud_orphans_answer(&c->orph, what, c->ops->vms_word, why);
	if (now > 0)
		sd_cloud_settle(c);
	return now < 0 ? -1 : 0;
}

int sd_cloud_acquire(struct sd_provider *p, const char *server, const struct sd_offer *offer, char **why)
{
	struct sd_cloud *c = cloud_of(p);
	int zi = offer->index;
	if (zi < 0 || zi >= c->nzones || offer != &c->cc.offers[zi])
		return sd_why(why, "%s: not an offer of the %s provider", offer->id, c->ops->name);
	double now = sd_fleet_now(c->fleet);
	if (now < c->cloud_blocked_until)
		return sd_why(why, "%s: %s is blocked for %.0f s more after %s", offer->id, c->ops->name,
		              c->cloud_blocked_until - now, c->ops->whole_scope);
	if (now < c->zone_blocked_until[zi])
		return sd_why(why, "%s: %s%s is blocked for %.0f s more (it ran out, or %s quota did)", offer->id,
		              c->ops->zone_word, c->zones[zi], c->zone_blocked_until[zi] - now, c->ops->quota_owner);
	struct sd_cloud_vm *v = sd_cloud_vm_new(c, server, zi);
	if (c->ops->acquired)
		c->ops->acquired(c, v);
	if (c->orph.reconciling || c->orph.asking) {
		v->st = SD_VM_WAITING;   /* sd_cloud_settle adopts a held VM for it or makes one */
		return 0;
	}
	char err[512];
	if (c->ops->insert(c, v, err, sizeof err) < 0) {
		c->servers = v->next;
		free(v);
		return sd_why(why, "%s: %s", offer->id, err);
	}
	return 0;
}

void sd_cloud_release(struct sd_provider *p, const char *server)
{
	struct sd_cloud *c = cloud_of(p);
	struct sd_cloud_vm *v = sd_cloud_find(c, server);
	if (!v || v->released)
		return;
	v->released = 1;
	sd_ssh_release(c->ssh, server);
	sd_cloud_delete(c, v);
}

const struct sd_catalog *sd_cloud_catalog(const struct sd_provider *p)
{
	return &const_cloud_of(p)->cc.cat;
}

const double *sd_cloud_prices(const struct sd_provider *p)
{
	return const_cloud_of(p)->cc.prices;
}

double sd_cloud_price_age(const struct sd_provider *p)
{
	double at = const_cloud_of(p)->cc.priced_at;
	return at > 0 ? fmax(0, sd_cloud_wall_now() - at) : 0;
}

int sd_cloud_live(const struct sd_provider *p, const struct sd_offer *o)
{
	int n = 0;
	for (const struct sd_cloud_vm *v = const_cloud_of(p)->servers; v; v = v->next)
		n += v->zone == o->index && !v->released && !v->reported_end && v->st != SD_VM_GONE && v->st != SD_VM_HELD;
	return n;
}

int sd_cloud_launch(struct sd_provider *p, const char *server, char *const *worker_argv, char ***argv, char **why)
{
	return sd_ssh_launch(cloud_of(p)->ssh, server, worker_argv, argv, why);
}

void sd_cloud_signal(struct sd_provider *p, const char *server, int sig)
{
	sd_ssh_signal(cloud_of(p)->ssh, server, sig);
}

void sd_cloud_lost(struct sd_provider *p, const char *server, int worker_alive)
{
	sd_ssh_lost(cloud_of(p)->ssh, server, worker_alive);
}

int sd_cloud_link_in_session(const struct sd_provider *p)
{
	return sd_ssh_link_in_session(const_cloud_of(p)->ssh);
}

void sd_cloud_delete(struct sd_cloud *c, struct sd_cloud_vm *v)
{
	if (v->host >= 0)
		sd_ssh_host_gone(c->ssh, v->host);
	if (v->st == SD_VM_WAITING) {
		v->st = SD_VM_GONE;   /* never made */
		return;
	}
	if (v->st == SD_VM_HELD)
		v->st = SD_VM_RUNNING;
	if (v->st == SD_VM_CREATING || v->st == SD_VM_DELETING || v->st == SD_VM_GONE)
		return;   /* an insert in flight deletes when it ends */
	enum sd_cloud_vm_state was = v->st;
	v->st = SD_VM_DELETING;
	char err[256];
	int r = c->ops->remove(c, v, err, sizeof err);
	if (r < 0)
		v->st = SD_VM_RUNNING;
	else if (r > 0)
		v->st = was;
}

void sd_cloud_stopped(struct sd_cloud_vm *v, double at, const char *source)
{
	if (v->stopped_at > 0 || !(at > 0))
		return;
	v->stopped_at = at;
	v->stop_source = source;
}

void sd_cloud_bill(struct sd_cloud *c, struct sd_cloud_vm *v)
{
	if (v->billed || !v->id[0] || !(v->started_at > 0) || !(v->stopped_at >= v->started_at))
		return;
	v->billed = 1;
	char source[200];
	snprintf(source, sizeof source, "%s: instance %s, %s to %s", c->ops->name, c->ops->ref(v),
	         v->adopted ? "its adoption" : c->ops->billed_from, v->stop_source);
	struct sd_provider_event ev = {
		.kind = SD_PROVIDER_BILLED,
		.server = v->id,
		.time = sd_fleet_now(c->fleet),
		.run_seconds = v->stopped_at - v->started_at,
		.billing_source = source,
	};
	sd_fleet_report(c->fleet, &ev);
}

void sd_cloud_deleted(struct sd_cloud *c, struct sd_cloud_vm *v, double ended_at, const char *source)
{
	v->st = SD_VM_GONE;
	sd_cloud_stopped(v, ended_at, source);
	sd_cloud_bill(c, v);
}

void sd_cloud_delete_failed(struct sd_cloud *c, struct sd_cloud_vm *v, const char *message)
{
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "provider", c->ops->name);
	if (v->id[0])
		cJSON_AddStringToObject(ev, "server", v->id);
	cJSON_AddStringToObject(ev, "instance", c->ops->ref(v));
	char reason[160];
	snprintf(reason, sizeof reason, "the %s could not be %s; spotdeck tries again at the end", c->ops->vm_word,
	         c->ops->delete_verb);
	cJSON_AddStringToObject(ev, "reason", reason);
	cJSON_AddStringToObject(ev, "error", message);
	sd_fleet_journal(c->fleet, SD_EV_ERROR, ev);
	v->st = SD_VM_RUNNING;
}

void sd_cloud_verdict(struct sd_cloud *c, struct sd_cloud_vm *v, enum sd_provider_event_kind kind,
		      const char *settled_by, const char *code, const char *message)
{
	v->reported_end = 1;
	v->reviewing = 0;
	struct sd_provider_event ev = {
		.kind = kind,
		.server = v->id,
		.time = sd_fleet_now(c->fleet),
		.code = code,
		.message = message,
		.zone = c->zones[v->zone],
		.settled_by = settled_by,
	};
	sd_fleet_report(c->fleet, &ev);
	sd_cloud_delete(c, v);
}

int sd_cloud_review_due(struct sd_cloud *c, struct sd_cloud_vm *v, double *since)
{
	double now = sd_fleet_now(c->fleet);
	if (!v->reviewing) {
		v->reviewing = 1;
		v->review_since = now;
	}
	*since = now - v->review_since;
	return *since >= c->preempt_wait_s;
}

void sd_cloud_init(struct sd_cloud *c, const struct sd_cloud_ops *ops, const struct sd_provider_env *env,
		   double preempt_wait_s)
{
	const cJSON *s = env->settings;
	c->ops = ops;
	c->loop = env->loop;
	c->fleet = env->fleet;
	c->ssh_user = sd_setting_str(s, "ssh_user", ops->default_ssh_user);
	c->identity = sd_expand_home(sd_setting_str(s, "identity", ops->default_identity));
	c->worker = sd_setting_str(s, "worker", "spotdeck-worker");
	c->ssh_port = (int)sd_setting_num(s, "ssh_port", 22);
	c->poll_s = sd_setting_num(s, "poll_s", 20);
	c->boot_timeout_s = sd_setting_num(s, "boot_timeout_s", 300);
	c->block_s = sd_setting_num(s, "block_s", 600);
	c->preempt_wait_s = sd_setting_num(s, "preempt_wait_s", preempt_wait_s);
	const cJSON *z;
	cJSON_ArrayForEach(z, cJSON_GetObjectItemCaseSensitive(s, "zones"))
		if (c->nzones < SD_CLOUD_MAX_ZONES)
			c->zones[c->nzones++] = sd_strdup0(z->valuestring);
}

int sd_cloud_check_advertise(const struct sd_cloud *c, const struct sd_provider_env *env, int api_loopback,
			     const char *file, char **why)
{
	if (env->direct && sd_host_is_loopback(env->advertise, 1) && !api_loopback)
		return sd_why(why, "%s: workers on %s cannot reach the controller at --advertise %s (loopback): give "
		              "an address the %s reach, or leave --advertise out to carry their links over ssh", file,
		              c->ops->place, env->advertise, c->ops->vms_word);
	return 0;
}

int sd_cloud_open_transport(struct sd_cloud *c, const struct sd_provider_env *env, char **why)
{
	struct sd_ssh_hooks hooks = { .ctx = c, .unreachable = sd_cloud_on_unreachable };
	return sd_ssh_transport_create(&c->ssh, env, c->ops->name, &hooks, why);
}

void sd_cloud_start(struct sd_cloud *c, uv_timer_cb backstop)
{
	uv_timer_init(c->loop, &c->backstop);
	c->backstop.data = c;
	uv_timer_start(&c->backstop, backstop, (uint64_t)(c->poll_s * 1000), (uint64_t)(c->poll_s * 1000));
	uv_unref((uv_handle_t *)&c->backstop);
	char err[256];
	c->orph.reconciling = 1;
	if (c->ops->reconcile(c, err, sizeof err) < 0)
		sd_cloud_on_reconciled(c, -1, err);
}

/* The transport has left the VMs (the run's files gone, its connections
 * ended): every VM not known gone is deleted, on a loop of the cloud's
 * own, and the fleet hears that the close is done. */
static void on_transport_closed(void *arg)
{
	struct sd_cloud *c = arg;
	c->ops->sweep(c);
	c->closed(c->closed_arg);
}

void sd_cloud_close(struct sd_provider *p, sd_provider_closed_cb done, void *arg)
{
	struct sd_cloud *c = cloud_of(p);
	c->closing = 1;
	c->closed = done;
	c->closed_arg = arg;
	uv_timer_stop(&c->backstop);
	uv_close((uv_handle_t *)&c->backstop, NULL);
	/* What is in flight here ends now (nothing the API answers later is
	 * acted on), then the transport's close runs on the loop, and the
	 * VMs are deleted only after it: ssh to a deleted VM would wait out
	 * its whole grace period. */
	c->ops->cancel(c);
	sd_http_close(c->http, NULL, NULL);
	c->http = NULL;
	sd_ssh_transport_close(c->ssh, on_transport_closed, c);
}

void sd_cloud_free(struct sd_provider *p)
{
	struct sd_cloud *c = cloud_of(p);
	if (!c)
		return;
	if (c->ssh)
		sd_ssh_transport_free(c->ssh);
	c->ops->free_api(c);
	if (c->http)
		sd_http_close(c->http, NULL, NULL);
	while (c->servers) {
		struct sd_cloud_vm *n = c->servers->next;
		free(c->servers);
		c->servers = n;
	}
	for (int i = 0; i < c->nzones; i++)
		free(c->zones[i]);
	sd_cloud_catalog_free(&c->cc);
	free(c->ssh_user);
	free(c->identity);
	free(c->worker);
	free(c);
}
