/* tests/provider/provider-script.c - a provider that exists only in the test suite:
 * it registers itself (sd_provider_register, from a constructor) into a
 * copy of spotdeck built from src/main.c and this file (tests/spotdeck-script),
 * so that a run over it goes through the same fleet, journal and cockpit
 * code as `sim` with no change to src/.
 *
 * Its machines are driven by files, so a test decides when things happen:
 *   job file: "provider": {"name": "script", "trigger_dir": DIR,
 *                          "boot_seconds": 0.2, "notice_seconds": 1,
 *                          "stockout_zones": ["us-east1-c"]}
 *   - a machine is PROVISIONED at once and RUNNING boot_seconds later (the
 *     fleet then starts a local spotdeck-worker on it);
 *   - an offer in a zone of stockout_zones is accepted, and boot_seconds
 *     later reported STOCKOUT (as GCE reports it inside the operation);
 *   - when the file DIR/revoke-SERVER appears, the machine gets a NOTICE of
 *     notice_seconds, then is REVOKED.
 * Offers and prices are the catalog's (the run's --catalog). */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/base/errors.h"
#include "src/provider/provider.h"

struct machine {
	char id[16];
	const struct sd_offer *offer;
	double t_start, t_running, t_revoke;   /* provider clock; < 0: not yet */
	int state;                             /* 0 booting, 1 running, 2 noticed, 3 gone */
	int stockout;
	struct machine *next;
};

struct sd_provider {
	struct sd_fleet *fleet;
	struct sd_catalog *cat;
	char trigger_dir[1024];
	double boot_seconds, notice_seconds;
	char stockout_zones[8][64];
	int nstockout;
	uv_timer_t tick;
	struct machine *machines;
};

static int number(const cJSON *s, const char *key, double lo, double hi, double dflt, double *out,
                  const char *file, char **why)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, key);
	if (!v) {
		*out = dflt;
		return 0;
	}
	if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi))
		return sd_why(why, "%s: provider.%s: expected a number in [%g, %g]", file, key, lo, hi);
	*out = v->valuedouble;
	return 0;
}

static int script_check(const cJSON *s, const char *file, char **why)
{
	const cJSON *k;
	cJSON_ArrayForEach(k, s) {
		if (strcmp(k->string, "trigger_dir") && strcmp(k->string, "boot_seconds") &&
		    strcmp(k->string, "notice_seconds") && strcmp(k->string, "stockout_zones"))
			return sd_why(why, "%s: provider.%s: unknown setting of provider 'script'", file, k->string);
	}
	const cJSON *d = cJSON_GetObjectItemCaseSensitive(s, "trigger_dir");
	if (!cJSON_IsString(d) || !d->valuestring[0] || strlen(d->valuestring) >= 1000)
		return sd_why(why, "%s: provider.trigger_dir: expected a directory name", file);
	const cJSON *z = cJSON_GetObjectItemCaseSensitive(s, "stockout_zones");
	if (z && (!cJSON_IsArray(z) || cJSON_GetArraySize(z) > 8))
		return sd_why(why, "%s: provider.stockout_zones: expected at most 8 zone names", file);
	double x;
	if (number(s, "boot_seconds", 0, 600, 0.2, &x, file, why) < 0 ||
	    number(s, "notice_seconds", 0, 600, 1, &x, file, why) < 0)
		return -1;
	return 0;
}

static void report(struct sd_provider *p, enum sd_provider_event_kind kind, struct machine *m)
{
	struct sd_provider_event ev = { .kind = kind, .server = m->id, .time = sd_fleet_now(p->fleet) };
	if (kind == SD_PROVIDER_NOTICE)
		ev.ends_at = m->t_revoke;
	if (kind == SD_PROVIDER_REVOKED)
		ev.launched_at = m->t_start;
	if (kind == SD_PROVIDER_STOCKOUT) {
		ev.zone = m->offer->zone;
		ev.code = "ZONE_RESOURCE_POOL_EXHAUSTED";
		ev.message = "provider script: the zone is listed in stockout_zones";
	}
	sd_fleet_report(p->fleet, &ev);
}

static void on_tick(uv_timer_t *t)
{
	struct sd_provider *p = t->data;
	double now = sd_fleet_now(p->fleet);
	for (struct machine *m = p->machines; m; m = m->next) {
		if (m->state == 0 && now >= m->t_running) {
			m->state = m->stockout ? 3 : 1;
			report(p, m->stockout ? SD_PROVIDER_STOCKOUT : SD_PROVIDER_RUNNING, m);
			continue;
		}
		char f[1100];
		snprintf(f, sizeof f, "%s/revoke-%s", p->trigger_dir, m->id);
		if (m->state == 1 && access(f, F_OK) == 0) {
			m->state = 2;
			m->t_revoke = now + p->notice_seconds;
			report(p, SD_PROVIDER_NOTICE, m);
		} else if (m->state == 2 && now >= m->t_revoke) {
			m->state = 3;
			report(p, SD_PROVIDER_REVOKED, m);
		}
	}
}

static int script_create(struct sd_provider **out, const struct sd_provider_env *env, char **why)
{
	struct sd_provider *p = sd_calloc(1, sizeof *p);
	p->fleet = env->fleet;
	const cJSON *s = env->settings;
	snprintf(p->trigger_dir, sizeof p->trigger_dir, "%s",
	         cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(s, "trigger_dir")));
	number(s, "boot_seconds", 0, 600, 0.2, &p->boot_seconds, "", why);
	number(s, "notice_seconds", 0, 600, 1, &p->notice_seconds, "", why);
	const cJSON *z;
	cJSON_ArrayForEach(z, cJSON_GetObjectItemCaseSensitive(s, "stockout_zones"))
		if (cJSON_IsString(z) && p->nstockout < 8)
			snprintf(p->stockout_zones[p->nstockout++], 64, "%s", z->valuestring);
	if (!env->catalog_path || sd_catalog_load(&p->cat, env->catalog_path, why) < 0) {
		if (!env->catalog_path)
			sd_why(why, "provider script: no catalog");
		free(p);
		return -1;
	}
	uv_timer_init(env->loop, &p->tick);
	p->tick.data = p;
	uv_timer_start(&p->tick, on_tick, 50, 50);
	*out = p;
	return 0;
}

static int script_acquire(struct sd_provider *p, const char *server, const struct sd_offer *o, char **why)
{
	(void)why;
	struct machine *m = sd_calloc(1, sizeof *m);
	snprintf(m->id, sizeof m->id, "%s", server);
	m->offer = o;
	m->t_start = sd_fleet_now(p->fleet);
	m->t_running = m->t_start + p->boot_seconds;
	m->t_revoke = -1;
	for (int i = 0; i < p->nstockout; i++)
		m->stockout |= !strcmp(p->stockout_zones[i], o->zone);
	m->next = p->machines;
	p->machines = m;
	if (!m->stockout)
		report(p, SD_PROVIDER_PROVISIONED, m);
	return 0;
}

static void script_release(struct sd_provider *p, const char *server)
{
	for (struct machine *m = p->machines; m; m = m->next)
		if (!strcmp(m->id, server))
			m->state = 3;
}

static const struct sd_catalog *script_catalog(const struct sd_provider *p)
{
	return p->cat;
}

static void script_close(struct sd_provider *p, sd_provider_closed_cb done, void *arg)
{
	uv_close((uv_handle_t *)&p->tick, NULL);
	done(arg);
}

static void script_free(struct sd_provider *p)
{
	while (p->machines) {
		struct machine *m = p->machines;
		p->machines = m->next;
		free(m);
	}
	sd_catalog_free(p->cat);
	free(p);
}

static const struct sd_provider_ops script_ops = {
	.name = "script",
	.description = "the test suite's scripted provider (tests/provider/provider-script.c)",
	.check = script_check,
	.create = script_create,
	.acquire = script_acquire,
	.release = script_release,
	.catalog = script_catalog,
	.close = script_close,
	.free = script_free,
};

__attribute__((constructor)) static void script_register(void)
{
	if (sd_provider_register(&script_ops) < 0)
		abort();
}
