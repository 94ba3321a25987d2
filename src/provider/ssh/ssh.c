/* src/provider/ssh/ssh.c - the ssh provider: servers a person already has (spot
 * VMs launched by hand, a lab's GPU boxes), listed in a hosts file
 * (hosts.h, spotdeck-hosts(5)), reached over OpenSSH through the ssh
 * transport (transport.h), which starts, signals, probes and cleans up
 * their workers.
 *
 * Each host is an offer ("ssh/NAME") with `slots` machines.  Acquiring one
 * reports it RUNNING at once (the host is up, or the launch says it is
 * not), and the fleet starts its worker through launch(), the transport's.
 * A host the transport finds unreachable is refused while it cools down
 * (30 s, the setting cooldown_s, doubling on each further failure up to
 * 16 min).  The run wants the host back: when the cool-down ends it is
 * probed again (`ssh HOST true`); once it answers it is journaled as
 * host_back and the servers it lost are acquired again (an `add ssh/NAME`
 * command each, in the journal as the operator's would be); while it does
 * not, it cools down again for twice as long. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/errors.h"
#include "src/base/json.h"
#include "src/proto/job.h"
#include "src/provider/provider.h"
#include "src/provider/ssh/hosts.h"
#include "src/provider/ssh/transport.h"

/* The ssh provider's own state: the hosts file, its offers, and the
 * transport that reaches the hosts (host i of the file is the
 * transport's host i and the catalog's offer i). */
struct ssh_provider {
	struct sd_fleet *fleet;
	struct sd_ssh_transport *t;
	struct sd_hosts hosts;
	struct sd_catalog cat;
	struct sd_offer *offers;
	char **offer_ids, **price_sources;
};

/* ---- settings ---- */

static const char *const setting_keys[] = { "hosts", "host_key_checking", "known_hosts",
	                                        "connect_timeout", "cooldown_s", "ssh", NULL };

static const char *const path_settings[] = { "hosts", "known_hosts", NULL };

static int ssh_check(const cJSON *s, const char *file, char **why)
{
	char shown[48];
	for (const cJSON *i = s ? s->child : NULL; i; i = i->next) {
		int known = 0;
		for (int k = 0; setting_keys[k]; k++)
			known |= !strcmp(i->string, setting_keys[k]);
		if (!known)
			return sd_why(why, "%s: provider.%s: unknown key for the ssh provider (known: hosts, "
			              "host_key_checking, known_hosts, connect_timeout, cooldown_s, ssh)", file, i->string);
	}
	const cJSON *h = cJSON_GetObjectItemCaseSensitive(s, "hosts");
	if (!h)
		return sd_why(why, "%s: provider.hosts: missing (the hosts file, spotdeck-hosts(5))", file);
	if (!cJSON_IsString(h) || !h->valuestring[0] || strlen(h->valuestring) >= 4096)
		return sd_why(why, "%s: provider.hosts: expected the path of a hosts file", file);
	const cJSON *k = cJSON_GetObjectItemCaseSensitive(s, "host_key_checking");
	if (k && (!cJSON_IsString(k) || (strcmp(k->valuestring, "accept-new") && strcmp(k->valuestring, "yes") &&
	                                 strcmp(k->valuestring, "no"))))
		return sd_why(why, "%s: provider.host_key_checking: expected \"accept-new\", \"yes\" or \"no\", got %s",
		              file, sd_json_describe(k, SD_JSON_AS_TEXT, shown, sizeof shown));
	const cJSON *kh = cJSON_GetObjectItemCaseSensitive(s, "known_hosts");
	if (kh && (!cJSON_IsString(kh) || !kh->valuestring[0] || strlen(kh->valuestring) >= 4096))
		return sd_why(why, "%s: provider.known_hosts: expected a file path", file);
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(s, "connect_timeout");
	if (t && (!cJSON_IsNumber(t) || !(t->valuedouble >= 1 && t->valuedouble <= 300) ||
	          t->valuedouble != floor(t->valuedouble)))
		return sd_why(why, "%s: provider.connect_timeout: expected whole seconds from 1 to 300, got %s", file,
		              sd_json_describe(t, SD_JSON_AS_TEXT, shown, sizeof shown));
	const cJSON *cd = cJSON_GetObjectItemCaseSensitive(s, "cooldown_s");
	if (cd && (!cJSON_IsNumber(cd) || !(cd->valuedouble >= 1 && cd->valuedouble <= SD_SSH_COOLDOWN_MAX_S)))
		return sd_why(why, "%s: provider.cooldown_s: expected seconds from 1 to %.0f, got %s", file,
		              SD_SSH_COOLDOWN_MAX_S, sd_json_describe(cd, SD_JSON_AS_TEXT, shown, sizeof shown));
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(s, "ssh");
	if (p && (!cJSON_IsString(p) || !p->valuestring[0] || strlen(p->valuestring) >= 256))
		return sd_why(why, "%s: provider.ssh: expected the ssh program (a name or a path)", file);
	return 0;
}

/* ---- the catalog: one offer per host ---- */

static void build_catalog(struct ssh_provider *p)
{
	int n = p->hosts.n;
	p->offers = sd_calloc((size_t)n, sizeof *p->offers);
	p->offer_ids = sd_calloc((size_t)n, sizeof *p->offer_ids);
	p->price_sources = sd_calloc((size_t)n, sizeof *p->price_sources);
	p->cat.zones = sd_calloc((size_t)n, sizeof *p->cat.zones);
	for (int i = 0; i < n; i++) {
		const struct sd_host *h = &p->hosts.v[i];
		struct sd_offer *o = &p->offers[i];
		size_t len = strlen(h->name) + 8;
		p->offer_ids[i] = sd_malloc(len);
		snprintf(p->offer_ids[i], len, "ssh/%s", h->name);
		len = strlen(p->hosts.path) + 64;
		p->price_sources[i] = sd_malloc(len);
		if (isnan(h->usd_per_hour))
			snprintf(p->price_sources[i], len, "unknown: %s:%d gives no price", p->hosts.path, h->line);
		else
			snprintf(p->price_sources[i], len, "quoted: %s:%d", p->hosts.path, h->line);
		o->id = p->offer_ids[i];
		o->provider = "ssh";
		o->region = "ssh";
		o->zone = h->name;
		o->gpu = h->gpu;
		o->gpu_count = h->gpu_count;
		o->transient = h->transient != 0;
		o->usd_per_hour = h->usd_per_hour;   /* NAN: unknown (the fleet bills nothing) */
		o->price_source = p->price_sources[i];
		o->images_per_sec = NAN;             /* measured by the run, never assumed */
		o->speed_source = "unknown: measured by the run";
		o->capacity = h->slots;
		o->capacity_source = "the hosts file's slots";
		o->notice_seconds = 0;               /* notices come from the worker's watcher */
		o->billing_unit = SD_BILL_PER_SECOND;
		o->revocation.model = SD_REVOCATION_NONE;
		o->index = i;
		o->zone_index = i;
		p->cat.zones[i] = o->id;
	}
	p->cat.file = p->hosts.path;
	p->cat.name = "ssh hosts";
	p->cat.noffers = n;
	p->cat.offers = p->offers;
	p->cat.nzones = n;
}

/* ---- the operations ---- */

/* Workers that dial the controller themselves (--advertise) must reach
 * it: a loopback address is refused unless every host is this one.
 * Without --advertise their links come through ssh, and any controller
 * address serves. */
static int check_reachable(const struct sd_hosts *hosts, int direct, const char *advertise, char **why)
{
	if (!direct || !advertise || !advertise[0])
		return 0;
	if (!sd_host_is_loopback(advertise, 1))
		return 0;
	for (int i = 0; i < hosts->n; i++)
		if (!sd_host_is_loopback(hosts->v[i].host, 0))
			return sd_why(why, "%s:%d: host %s cannot reach the controller at --advertise %s (loopback): give "
			              "an address the hosts reach, or leave --advertise out to carry the workers' links over "
			              "ssh", hosts->path, hosts->v[i].line, hosts->v[i].name, advertise);
	return 0;
}

/* A host that had lost servers answers ssh again: journaled, and its
 * servers are acquired again through the command table (as an
 * operator's add). */
static void on_host_back(void *ctx, int hi, int wanted, double down_s)
{
	struct ssh_provider *p = ctx;
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "provider", "ssh");
	cJSON_AddStringToObject(ev, "host", p->hosts.v[hi].name);
	cJSON_AddStringToObject(ev, "offer", p->offers[hi].id);
	cJSON_AddNumberToObject(ev, "down_s", down_s);
	cJSON_AddNumberToObject(ev, "acquire", wanted);
	sd_fleet_journal(p->fleet, SD_EV_HOST_BACK, ev);
	char line[128];
	snprintf(line, sizeof line, "add %s", p->offers[hi].id);
	for (int i = 0; i < wanted; i++)
		sd_fleet_command(p->fleet, line);
}

static void ssh_free(struct sd_provider *base);

static int ssh_create(struct sd_provider **out, const struct sd_provider_env *env, char **why)
{
	*out = NULL;
	const cJSON *s = env->settings;
	const cJSON *h = cJSON_GetObjectItemCaseSensitive(s, "hosts");
	if (!cJSON_IsString(h))
		return sd_why(why, "%s: provider.hosts: missing", env->settings_file ? env->settings_file : "job");
	struct ssh_provider *p = sd_calloc(1, sizeof *p);
	p->fleet = env->fleet;
	if (sd_hosts_load(h->valuestring, &p->hosts, why) < 0) {
		free(p);
		return -1;
	}
	struct sd_ssh_hooks hooks = { .ctx = p, .back = on_host_back, .worker_setting = "worker= in the hosts file" };
	if (check_reachable(&p->hosts, env->direct, env->advertise, why) < 0 ||
	    sd_ssh_transport_create(&p->t, env, "ssh", &hooks, why) < 0) {
		ssh_free((struct sd_provider *)(void *)p);
		return -1;
	}
	build_catalog(p);
	for (int i = 0; i < p->hosts.n; i++) {
		const struct sd_host *f = &p->hosts.v[i];
		struct sd_ssh_host th = {
			.name = f->name, .host = f->host, .user = f->user, .port = f->port, .identity = f->identity,
			.worker = f->worker, .comm_host = f->comm_host, .offer = p->offers[i].id, .slots = f->slots,
		};
		sd_ssh_host_add(p->t, &th);
	}
	*out = (struct sd_provider *)(void *)p;
	return 0;
}

static int ssh_acquire(struct sd_provider *base, const char *server, const struct sd_offer *offer, char **why)
{
	struct ssh_provider *p = (struct ssh_provider *)(void *)base;
	int hi = offer->index;
	if (hi < 0 || hi >= p->hosts.n || offer != &p->offers[hi])
		return sd_why(why, "%s: not an offer of the ssh provider", offer->id);
	double now = sd_fleet_now(p->fleet), cool_until = sd_ssh_host_cool_until(p->t, hi);
	if (now < cool_until)
		return sd_why(why, "%s: host %s did not answer; cooling down for %.0f s more", offer->id,
		              p->hosts.v[hi].name, cool_until - now);
	if (sd_ssh_host_live(p->t, hi) >= p->hosts.v[hi].slots)
		return p->hosts.v[hi].slots == 1
		       ? sd_why(why, "%s: host %s's one slot is in use", offer->id, p->hosts.v[hi].name)
		       : sd_why(why, "%s: all %d slots of host %s are in use", offer->id, p->hosts.v[hi].slots,
		                p->hosts.v[hi].name);
	sd_ssh_attach(p->t, server, hi);
	struct sd_provider_event ev = {
		.kind = SD_PROVIDER_RUNNING,
		.server = server,
		.time = now,
		.address = p->hosts.v[hi].name,
	};
	sd_fleet_report(p->fleet, &ev);
	return 0;
}

static const struct sd_catalog *ssh_catalog(const struct sd_provider *base)
{
	const struct ssh_provider *p = (const struct ssh_provider *)(const void *)base;
	return &p->cat;
}

static int ssh_live(const struct sd_provider *base, const struct sd_offer *o)
{
	const struct ssh_provider *p = (const struct ssh_provider *)(const void *)base;
	return sd_ssh_host_live(p->t, o->index);
}

/* The workers' operations are the transport's. */
static struct sd_ssh_transport *transport_of(struct sd_provider *base)
{
	return ((struct ssh_provider *)(void *)base)->t;
}

static int ssh_launch(struct sd_provider *base, const char *server, char *const *worker_argv, char ***argv,
                      char **why)
{
	return sd_ssh_launch(transport_of(base), server, worker_argv, argv, why);
}

static void ssh_signal(struct sd_provider *base, const char *server, int sig)
{
	sd_ssh_signal(transport_of(base), server, sig);
}

static void ssh_lost(struct sd_provider *base, const char *server, int worker_alive)
{
	sd_ssh_lost(transport_of(base), server, worker_alive);
}

static int ssh_link_in_session(const struct sd_provider *base)
{
	return sd_ssh_link_in_session(((const struct ssh_provider *)(const void *)base)->t);
}

static void ssh_release(struct sd_provider *base, const char *server)
{
	sd_ssh_release(transport_of(base), server);
}

static void ssh_close(struct sd_provider *base, sd_provider_closed_cb done, void *arg)
{
	sd_ssh_transport_close(transport_of(base), done, arg);
}

static void ssh_free(struct sd_provider *base)
{
	struct ssh_provider *p = (struct ssh_provider *)(void *)base;
	if (!p)
		return;
	sd_ssh_transport_free(p->t);
	for (int i = 0; i < p->hosts.n && p->offer_ids; i++) {
		free(p->offer_ids[i]);
		free(p->price_sources[i]);
	}
	free(p->offer_ids);
	free(p->price_sources);
	free(p->offers);
	free(p->cat.zones);
	sd_hosts_free(&p->hosts);
	free(p);
}

const struct sd_provider_ops sd_provider_ssh = {
	.name = "ssh",
	.description = "your own hosts over OpenSSH, listed in a hosts file (spotdeck-hosts(5))",
	.emulated = 0,
	.check = ssh_check,
	.path_settings = path_settings,
	.create = ssh_create,
	.acquire = ssh_acquire,
	.release = ssh_release,
	.catalog = ssh_catalog,
	.prices = NULL,
	.live = ssh_live,
	.launch = ssh_launch,
	.signal = ssh_signal,
	.lost = ssh_lost,
	.link_in_session = ssh_link_in_session,
	.close = ssh_close,
	.free = ssh_free,
};
