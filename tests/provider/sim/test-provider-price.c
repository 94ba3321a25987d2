/* tests/provider/sim/test-provider-price.c - a market price change (a trace's "price"
 * event) moves the sim provider's price now (as the fleet reports it), which new servers are billed
 * at, and leaves the catalog as loaded (documented read-only, and shared
 * with the cockpit and the planner's snapshot).  And an
 * acquire a provider refuses at once (the ssh provider's host cooling down)
 * leaves no server behind: no row, its id used by the next.  And the
 * fleet tells a provider whether a server's worker reported its cloud's
 * notice (sd_fleet_cloud_noticed), and journals what settled a verdict
 * (settled_by). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "src/base/errors.h"
#include "src/provider/fleet.h"
#include "src/provider/provider.h"
#include "src/market/trace.h"
#include "tests/check.h"

#define OFFER "gce/us-west1-b/k80/spot"
#define OTHER "gce/us-east1-c/k80/spot"
#define NEW_PRICE 0.5

static int nprice;
static cJSON *last_revoked;

/* State events whose typed state and server agree with the journaled
 * fields, and those that do not. */
static int nstate_agree, nstate_disagree;

static void on_journal(void *ctx, const struct sd_fleet_event *fe, cJSON *ev)
{
	uv_loop_t *loop = ctx;
	enum sd_event_type type = fe->type;
	if (type == SD_EV_STATE) {
		const cJSON *st = cJSON_GetObjectItemCaseSensitive(ev, "state");
		const cJSON *sv = cJSON_GetObjectItemCaseSensitive(ev, "server");
		if (cJSON_IsString(st) && !strcmp(st->valuestring, sd_server_state_name(fe->state)) &&
		    cJSON_IsString(sv) && fe->server && !strcmp(sv->valuestring, fe->server))
			nstate_agree++;
		else
			nstate_disagree++;
	}
	if (type == SD_EV_PRICE) {
		nprice++;
		uv_stop(loop);
	}
	if (type == SD_EV_REVOKED) {
		cJSON_Delete(last_revoked);
		last_revoked = ev;
		return;
	}
	cJSON_Delete(ev);
}

/* A provider of one offer that refuses the first two acquires at once. */
struct sd_provider {
	struct sd_catalog cat;
	struct sd_offer offer;
	int refusals;
};
static int refuser_create(struct sd_provider **out, const struct sd_provider_env *env, char **why)
{
	(void)env;
	(void)why;
	struct sd_provider *p = calloc(1, sizeof *p);
	p->offer.id = "test/host";
	p->offer.usd_per_hour = 1;
	p->offer.capacity = 1;
	p->cat.file = "refuser";
	p->cat.noffers = 1;
	p->cat.offers = &p->offer;
	p->refusals = 2;
	*out = p;
	return 0;
}
static int refuser_acquire(struct sd_provider *p, const char *server, const struct sd_offer *o, char **why)
{
	(void)o;
	if (p->refusals-- > 0)
		return sd_why(why, "test/host: cooling down for 30 s more");
	return 0;   /* held; it never runs (no event follows) */
}
static void refuser_release(struct sd_provider *p, const char *server) { (void)p, (void)server; }
static const struct sd_catalog *refuser_catalog(const struct sd_provider *p) { return &p->cat; }
static void refuser_close(struct sd_provider *p, sd_provider_closed_cb done, void *arg) { (void)p, done(arg); }
static void refuser_free(struct sd_provider *p) { free(p); }
static const struct sd_provider_ops refuser = {
	.name = "refuser", .description = "refuses twice", .emulated = 0, .create = refuser_create,
	.acquire = refuser_acquire, .release = refuser_release, .catalog = refuser_catalog,
	.close = refuser_close, .free = refuser_free,
};

static void on_closed(void *arg)
{
	++*(int *)arg;
}

static void on_close_walk(uv_handle_t *h, void *arg)
{
	(void)arg;
	if (!uv_is_closing(h))
		uv_close(h, NULL);
}

int main(void)
{
	const char *top = getenv("top_srcdir") ? getenv("top_srcdir") : ".";
	char catalog[4096];
	snprintf(catalog, sizeof catalog, "%s/data/gce-2019.json", top);
	static const char trace_text[] = "{\"t\": 0, \"event\": \"price\", \"offer\": \"" OFFER "\", "
	                                 "\"usd_per_hour\": 0.5}\n";
	struct sd_trace trace;
	char *why = NULL;
	if (sd_trace_parse(&trace, trace_text, strlen(trace_text), "test-trace", &why) < 0) {
		fprintf(stderr, "FAIL: trace: %s\n", why);
		return 1;
	}
	uv_loop_t loop;
	uv_loop_init(&loop);
	struct sd_fleet_config cfg = {
		.provider = &sd_provider_sim,
		.env = { .catalog_path = catalog, .hazard_scale = 1, .boot_scale = 1, .notice_scale = 1,
		         .seed = 1, .trace = &trace },
		.worker_path = "/bin/false", .connect = "127.0.0.1:1", .run_dir = "/nonexistent",
	};
	struct sd_fleet_hooks hooks = { .journal = on_journal };
	struct sd_fleet *p;
	if (sd_fleet_create(&p, &loop, &cfg, &hooks, &loop, &why) < 0) {
		fprintf(stderr, "FAIL: fleet: %s\n", why);
		return 1;
	}
	const struct sd_catalog *cat = sd_fleet_catalog(p);
	const struct sd_offer *o = sd_catalog_find(cat, OFFER), *other = sd_catalog_find(cat, OTHER);
	CHECK(o && other, "the catalog has " OFFER " and " OTHER);
	if (!o || !other)
		return check_exit("test-provider-price");
	double loaded = o->usd_per_hour, other_loaded = other->usd_per_hour;
	CHECK(loaded != NEW_PRICE, "the catalog's price %g must differ from the trace's", loaded);
	CHECK(sd_fleet_offer_usd_per_hour(p, o) == loaded, "before the change: %g, want the catalog's %g",
	      sd_fleet_offer_usd_per_hour(p, o), loaded);

	uv_run(&loop, UV_RUN_DEFAULT);   /* until the trace's price event */
	CHECK_INT(nprice, 1);
	check_report(o->usd_per_hour == loaded, "catalog offer %s keeps its loaded price %g (now %g)", OFFER, loaded,
	             o->usd_per_hour);
	check_report(sd_fleet_offer_usd_per_hour(p, o) == NEW_PRICE, "the market's price of %s is now %g (want %g)",
	             OFFER, sd_fleet_offer_usd_per_hour(p, o), NEW_PRICE);
	check_report(sd_fleet_prices(p)[o->index] == NEW_PRICE && sd_fleet_prices(p)[other->index] == other_loaded,
	             "sd_fleet_prices: %g for %s, %g (unchanged) for %s", sd_fleet_prices(p)[o->index], OFFER,
	             sd_fleet_prices(p)[other->index], OTHER);
	struct sd_offer stranger = *o;
	CHECK(isnan(sd_fleet_offer_usd_per_hour(p, &stranger)), "an offer outside the catalog has no price");

	/* A server acquired now is billed at the market's price. */
	char id[16];
	int rc = sd_fleet_acquire(p, OFFER, id, sizeof id, &why);
	CHECK(rc == 0, "acquire: %s", rc < 0 ? why : "");
	struct sd_server_info si[4];
	int n = sd_fleet_list(p, si, 4);
	check_report(n == 1 && si[0].usd_per_hour == NEW_PRICE, "%s is billed at %g/h (want the price now, %g)",
	             n ? si[0].id : "?", n ? si[0].usd_per_hour : -1, NEW_PRICE);
	CHECK(o->usd_per_hour == loaded);

	int closed = 0;
	sd_fleet_close(p, on_closed, &closed);
	CHECK(closed == 1, "the fleet's close said it was done %d times (want 1)", closed);
	uv_walk(&loop, on_close_walk, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	sd_fleet_free(p);
	CHECK_INT(uv_loop_close(&loop), 0);
	sd_trace_free(&trace);

	/* Refused at once, twice: nothing listed; then s1 for the accepted one. */
	uv_loop_init(&loop);
	struct sd_fleet_config rcfg = {
		.provider = &refuser, .worker_path = "/bin/false", .connect = "127.0.0.1:1",
		.run_dir = "/nonexistent",
	};
	if (sd_fleet_create(&p, &loop, &rcfg, &hooks, &loop, &why) < 0) {
		fprintf(stderr, "FAIL: fleet: %s\n", why);
		return 1;
	}
	for (int i = 0; i < 2; i++) {
		free(why);
		why = NULL;
		CHECK(sd_fleet_acquire(p, "test/host", id, sizeof id, &why) < 0 && why && strstr(why, "cooling down"),
		      "refused acquire %d: %s", i + 1, why ? why : "(accepted)");
		CHECK_INT(sd_fleet_list(p, si, 4), 0);
	}
	free(why);
	why = NULL;
	CHECK(sd_fleet_acquire(p, "test/host", id, sizeof id, &why) == 0, "acquire: %s", why ? why : "");
	n = sd_fleet_list(p, si, 4);
	check_report(n == 1 && !strcmp(si[0].id, "s1") && !strcmp(id, "s1"),
	             "after 2 refused acquires: %d server(s) listed, the accepted one %s (want 1, s1)", n, id);

	/* The worker's cloud notice, as the provider asks for it. */
	const char *src = "unset";
	CHECK(!sd_fleet_cloud_noticed(p, "s1", &src) && !strcmp(src, ""), "no notice yet: source '%s'", src);
	cJSON *fields = cJSON_CreateObject();
	cJSON_AddStringToObject(fields, "source", "gce");
	cJSON_AddStringToObject(fields, "event", "preempted");
	CHECK_INT(sd_fleet_cloud_notice(p, "s1", 30, fields), 1);
	CHECK_INT(sd_fleet_cloud_notice(p, "s1", 30, fields), 0);   /* already under notice: the caller journals */
	cJSON_Delete(fields);
	CHECK(sd_fleet_cloud_noticed(p, "s1", &src) == 1 && !strcmp(src, "gce"), "s1 noticed, source '%s'", src);
	CHECK(sd_fleet_cloud_noticed(p, "s9", &src) == 0 && !strcmp(src, ""), "an unknown server: source '%s'", src);
	CHECK_INT(sd_fleet_cloud_noticed(p, "s1", NULL), 1);
	/* The verdict names what settled it. */
	struct sd_provider_event rv = { .kind = SD_PROVIDER_REVOKED, .server = "s1", .time = sd_fleet_now(p),
		                        .settled_by = "notice", .message = "VM x is TERMINATED" };
	sd_fleet_report(p, &rv);
	const char *sb = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(last_revoked, "settled_by"));
	const char *dt = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(last_revoked, "detail"));
	check_report(sb && !strcmp(sb, "notice") && dt && !strcmp(dt, "VM x is TERMINATED"),
	             "the revoked event's settled_by '%s', detail '%s' (want notice, the message)", sb ? sb : "(none)",
	             dt ? dt : "(none)");
	n = sd_fleet_list(p, si, 4);
	CHECK(n == 1 && si[0].state == SD_SERVER_REVOKED, "s1 is %s after the verdict",
	      n ? sd_server_state_name(si[0].state) : "?");
	cJSON_Delete(last_revoked);
	last_revoked = NULL;
	/* Every state change reached the owner typed, as the journal says it
	 * (requested .. revoked at least). */
	CHECK(nstate_agree >= 2 && nstate_disagree == 0, "state events: %d typed as journaled, %d not",
	      nstate_agree, nstate_disagree);
	closed = 0;
	sd_fleet_close(p, on_closed, &closed);
	CHECK(closed == 1, "the fleet's close said it was done %d times (want 1)", closed);
	uv_walk(&loop, on_close_walk, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	sd_fleet_free(p);
	CHECK_INT(uv_loop_close(&loop), 0);
	return check_exit("test-provider-price");
}
