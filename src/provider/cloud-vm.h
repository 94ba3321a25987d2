/* src/provider/cloud-vm.h - what the cloud providers (gce.c, aws.c) share
 * around their VMs: reading their job settings, journaling each HTTP
 * attempt, and the run's label that marks every VM of a run.  No cloud
 * API here. */
#ifndef SD_PROVIDER_CLOUD_VM_H
#define SD_PROVIDER_CLOUD_VM_H

#include <cJSON.h>

#include "src/provider/http.h"
#include "src/provider/provider.h"

/* provider.KEY of settings S, if present, must be a non-empty string of at
 * most 1000 bytes: 0, or -1 with WHY "FILE: provider.KEY: expected ...". */
int sd_setting_check_str(const cJSON *s, const char *key, const char *file, char **why);
/* The same for a number from LO to HI (INTEGER: a whole one). */
int sd_setting_check_num(const cJSON *s, const char *key, double lo, double hi, int integer, const char *file,
			 char **why);
/* provider.KEY's string, or DFLT, copied (NULL when both are absent). */
char *sd_setting_str(const cJSON *s, const char *key, const char *dflt);
/* provider.KEY's number, or DFLT. */
double sd_setting_num(const cJSON *s, const char *key, double dflt);
/* A copy of VAL (NULL for NULL); aborts when memory runs out. */
char *sd_strdup0(const char *val);

/* One HTTP attempt as a cloud_call event of FLEET's journal: provider,
 * call (the request's label), method, url (already redacted by http.h),
 * attempt, status, error, elapsed_s, retry_in_s.  Never a header or body. */
void sd_cloud_journal_attempt(struct sd_fleet *fleet, const char *provider, const struct sd_http_attempt *a);

/* The run's label: 16 random hex digits kept in RUN_DIR/FILE_NAME
 * ("gce-label"), made by the first start of the run and read by every
 * --resume, so that a resumed run knows the VMs an earlier controller of it
 * left.  Without a run directory it is random and *NO_DIR is set (nothing
 * may then be taken for an orphan).  0, or -1 with WHY (a file that is not
 * a label, one that cannot be written, no random bytes). */
int sd_cloud_run_label(const char *run_dir, const char *file_name, char tag[17], int *no_dir, char **why);

/* KEYS (NULL-terminated) are the only settings PROVIDER has: 0, or -1
 * with WHY "FILE: provider.KEY: unknown key for the PROVIDER provider". */
int sd_setting_check_known(const cJSON *s, const char *const *keys, const char *provider, const char *file,
			   char **why);
/* The settings every cloud VM provider takes alike: ssh_user (a user
 * name), ssh_port, connect_timeout, poll_s, boot_timeout_s, block_s,
 * preempt_wait_s (0 to 3600 s), usd_per_hour, orphans ("delete", "keep",
 * "adopt" or "ask") and host_key_checking. */
int sd_cloud_check_vm_settings(const cJSON *s, const char *file, char **why);

/* A provider event about SERVER in ZONE (CODE and MESSAGE may be NULL),
 * now, to FLEET; ADDRESS only with RUNNING. */
void sd_cloud_report(struct sd_fleet *fleet, const char *server, const char *zone, enum sd_provider_event_kind kind,
		     const char *code, const char *message, const char *address);
/* An error event {provider, reason, error} to FLEET: what went wrong
 * (ERROR, NULL: none) and what it means for the run (REASON). */
void sd_cloud_journal_error(struct sd_fleet *fleet, const char *provider, const char *reason, const char *error);
/* The wall clock, seconds since the epoch (the clouds' timestamps). */
double sd_cloud_wall_now(void);

/* What the start-up reconciliation does with a VM of the run's label that
 * no server of this controller owns (provider.orphans, spotdeck --orphans):
 * delete it, keep it (journaled, left alone), adopt it (a server of the
 * resumed run that asks for its zone takes it over instead of making a new
 * VM; what no server takes is deleted), or ask (the acquisitions wait
 * until a cockpit or `orphans adopt|delete|keep` answers). */
enum sd_orphans { SD_ORPHANS_DELETE, SD_ORPHANS_KEEP, SD_ORPHANS_ADOPT, SD_ORPHANS_ASK };
/* "delete", "keep", "adopt", "ask" -> the enum; -1 for anything else. */
int sd_orphans_parse(const char *s);
/* The run's choice: ENV's --orphans, else provider.orphans in S, else ask
 * when a cockpit may answer (env->interactive), delete when not. */
enum sd_orphans sd_cloud_orphans(const struct sd_provider_env *env, const cJSON *s);

/* Where a provider's start-up reconciliation stands: WHAT it does with
 * orphans (the answer replaces "ask"), the list not yet answered, the
 * question open.  Acquisitions wait while either of the last two holds. */
struct sd_cloud_orphans {
	enum sd_orphans what;
	int reconciling;
	int asking;
};
/* 1 when a RUNNING orphan is held for adoption (adopt, ask); holding one
 * with ask opens the question. */
int sd_cloud_orphans_hold(struct sd_cloud_orphans *o);
/* The start-up list has answered: 1 when the provider settles now, 0 when
 * the answer will. */
int sd_cloud_orphans_listed(struct sd_cloud_orphans *o);
/* WHAT ("adopt", "delete", "keep") answers the open question: 1 when the
 * provider settles now, 0 once the list has answered; -1 with *WHY (no
 * question open, another word; VMS names the cloud's VMs in it). */
int sd_cloud_orphans_answer(struct sd_cloud_orphans *o, const char *what, const char *vms, char **why);

/* The orphan event: a VM of the run's label that no server owns, and what
 * is done with it (ACTION: "delete", "keep", "adopt", "ask").  SERVER: the
 * server that adopts it (NULL otherwise). */
void sd_cloud_journal_orphan(struct sd_fleet *fleet, const char *provider, const char *instance, const char *zone,
			     const char *status, const char *action, const char *server);

/* A cloud's offers: one per zone, all of one machine and GPU. */
struct sd_cloud_catalog {
	struct sd_catalog cat;        /* what the provider's catalog() returns */
	struct sd_offer *offers;      /* cat.offers */
	char **ids;                   /* "PROVIDER/ZONE/MODEL/spot" */
	double *prices;               /* what prices() returns: USD an hour, NAN unknown */
	char model[16];               /* the GPU's name in lower case, in offer ids */
	char **regions;               /* per offer, when the spec gives none */
	struct sd_catalog *market;    /* the calibrated market the revocation models come from */
};
/* Offer I of C costs USD an hour from now on (prices() and the offer's
 * own, which servers acquired later take): journals a price event
 * {offer, usd_per_hour} with EXTRA's fields (taken over; NULL: none). */
void sd_cloud_set_price(struct sd_cloud_catalog *c, struct sd_fleet *fleet, int i, double usd, cJSON *extra);
/* What each offer states; strings are not copied (they must outlive C). */
struct sd_cloud_offer_spec {
	const char *provider;         /* "gce" */
	const char *region;           /* every offer's region; NULL: its zone up to the last '-'
	                               * (GCE's us-central1-a is in us-central1) */
	const char *machine_type, *gpu;
	int gpu_count;
	double usd_per_hour;          /* NAN: unknown until prices() says */
	const char *price_source;
	double notice_seconds;
	const char *notice_source, *capacity_source, *billing_source;
	const char *catalog_file, *catalog_name;   /* the cockpit's "real market: ..." */
};
/* Builds C's offers for ZONES (N of them). */
void sd_cloud_catalog_build(struct sd_cloud_catalog *c, const struct sd_cloud_offer_spec *spec, char *const *zones,
			    int n);
void sd_cloud_catalog_free(struct sd_cloud_catalog *c);
/* Gives C's offers the revocation model of the calibrated market catalog
 * at PATH (market-2026.json beside the default gce-2019.json when PATH is
 * that default or NULL): for each offer, the catalog's Spot offer of the
 * same provider and GPU in the same region, else in another region of
 * that provider.  The market pane's P(revoked) then shows the model's
 * estimate, marked as one (the view's p_revoked_modelled), and the
 * replacement suggestion weighs it.  Offers with no match keep none ("-").
 * Returns how many offers got one; -1 with WHY when the catalog cannot be
 * loaded (the offers keep none). */
int sd_cloud_catalog_model(struct sd_cloud_catalog *c, const char *path, char **why);
/* The same, the error journaled (an error event of PROVIDER in FLEET's
 * journal: P(revoked) unknown) rather than returned. */
void sd_cloud_catalog_model_journaled(struct sd_cloud_catalog *c, const char *path, struct sd_fleet *fleet,
				      const char *provider);

/* At close: VMs of the run (NAMES, a JSON array of instance names or ids,
 * taken) that could not be deleted may still run and bill: an error event
 * says so with the run's TAG and how to end them (--resume), also when
 * ERROR (the close could not ask the cloud at all) is not NULL.  Nothing
 * when NAMES is empty and ERROR NULL. */
void sd_cloud_journal_left(struct sd_fleet *fleet, const char *provider, const char *tag, cJSON *names,
			   const char *error);

/* Runs LOOP (a provider's private one, at close) until *PENDING is 0 or
 * SECONDS pass. */
void sd_cloud_run_until(uv_loop_t *loop, const int *pending, double seconds);

/* 1 when URL's host ("http://127.0.0.1:PORT/...") is a loopback address or
 * localhost: the API of a fake cloud on this machine. */
int sd_url_is_loopback(const char *url);

#endif
