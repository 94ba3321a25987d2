/* src/provider/cloud-vm.h - what the cloud providers (gce.c, aws.c) share
 * around their VMs: reading their job settings, journaling each HTTP
 * attempt, the run's label that marks every VM of a run, and one VM
 * lifecycle behind a small table of the cloud's API calls
 * (struct sd_cloud_ops).  No cloud API here. */
#ifndef SD_PROVIDER_CLOUD_VM_H
#define SD_PROVIDER_CLOUD_VM_H

#include <cJSON.h>

#include "src/provider/http/http.h"
#include "src/provider/provider.h"
#include "src/provider/ssh/transport.h"

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
	double priced_at;             /* wall time of the last refresh of prices that
	                               * succeeded; 0: prices that do not go stale */
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

/* ---- one VM lifecycle for every cloud ----
 *
 * A cloud provider (gce.c, aws.c) keeps its state in a struct that begins
 * with a struct sd_cloud, and each of its servers in one that begins with
 * a struct sd_cloud_vm; what is the same on every cloud (acquiring into a
 * blocked zone, the wait for sshd, the orphans of an earlier controller
 * and their adoption, a worker that ended or a host ssh cannot reach, the
 * calls passed on to the ssh transport) is done here, and the cloud's API
 * calls are reached through its struct sd_cloud_ops.  struct sd_provider
 * stays opaque: a cloud's create() hands out its own state under that
 * name, so the ops below that take one convert it back. */

/* Where a cloud's VM stands. */
enum sd_cloud_vm_state {
	SD_VM_CREATING,   /* its insert (RunInstances, instances.insert) is in flight */
	SD_VM_WAIT_SSH,   /* the cloud calls it running: its sshd is waited for */
	SD_VM_RUNNING,
	SD_VM_DELETING,
	SD_VM_GONE,
	SD_VM_WAITING,    /* acquired while the start-up list or the orphans question is open */
	SD_VM_HELD,       /* an earlier controller's running VM, kept for a server to adopt */
};

struct sd_cloud;

/* What every cloud's server has; the first member of the cloud's own. */
struct sd_cloud_vm {
	char id[16];                   /* the fleet's server id, "" for an orphan */
	char name[64];                 /* the VM's name (GCE) or Name tag (EC2) */
	int zone;                      /* index in the cloud's zones */
	int host;                      /* the transport's host, -1 before RUNNING */
	enum sd_cloud_vm_state st;
	int released;                  /* the fleet gave it back (or the provider ended it) */
	int reported_end;              /* REVOKED, FAILED or STOCKOUT reported */
	int missing;                   /* backstop passes that did not list it */
	int reviewing;                 /* seen stopped or gone with nothing yet saying why */
	double review_since;           /* ... since then (fleet seconds) */
	int suspect;                   /* its worker ended or its host stopped answering:
	                                * the next list started after it says why */
	int suspect_listing;           /* the list in flight was started after that */
	char suspect_code[24], suspect_msg[300];
	int adopted;                   /* taken over from an earlier controller: billed from then */
	int billed;                    /* BILLED reported */
	double started_at, stopped_at; /* seen running / powered off (epoch s), 0 unknown */
	const char *stop_source;       /* where stopped_at comes from */
	char addr[48], comm_addr[48];  /* SD_VM_HELD: its public (or private) and private address */
	char status[24];               /* SD_VM_HELD: the cloud's word for its state when listed */
	struct sd_cloud *cloud;
	struct sd_cloud_vm *next;
};

/* What a cloud does with its API; every hook is required unless said. */
struct sd_cloud_ops {
	const char *name;              /* the provider's name: "gce" */
	const char *vm_word;           /* "VM", "instance": in messages */
	const char *vms_word;          /* "VMs", "instances" */
	const char *insert_call;       /* the code of a FAILED event when an insert cannot start */
	const char *whole_scope;       /* "a project-wide error": what blocks the whole cloud */
	const char *zone_word;         /* "zone " or "": before a zone's name in a message */
	const char *quota_owner;       /* "its region's": whose quota a zone's block may be */
	const char *delete_verb;       /* "deleted", "terminated" */
	const char *billed_from;       /* what started_at is, in a BILLED event: "lastStartTimestamp" */
	const char *place;             /* "GCE VMs": where workers run, in messages */
	const char *default_ssh_user, *default_identity;   /* provider.ssh_user, provider.identity */
	size_t vm_size;                /* the size of the cloud's server struct */
	/* At close, the orphans a "keep" answer leaves are forgotten (1: the
	 * close deletes only the VMs it knows) or remembered as gone (0: the
	 * close's sweep by label must leave them). */
	int keep_forgets;
	/* How V is named in messages and orphan events (the instance id on
	 * EC2, the VM's name on GCE); "" until the cloud has one. */
	const char *(*ref)(const struct sd_cloud_vm *v);
	/* 1 when the cloud has answered V's insert with a VM it can name. */
	int (*known)(const struct sd_cloud_vm *v);
	/* Optional: V was just acquired (its id and zone set). */
	void (*acquired)(struct sd_cloud *c, struct sd_cloud_vm *v);
	/* Starts V's insert; 0, or -1 with ERR. */
	int (*insert)(struct sd_cloud *c, struct sd_cloud_vm *v, char *err, size_t errlen);
	/* Sends the delete of V's VM: 0, 1 when V has nothing the cloud can
	 * delete yet (its insert's answer will), or -1 with ERR. */
	int (*remove)(struct sd_cloud *c, struct sd_cloud_vm *v, char *err, size_t errlen);
	/* Starts the start-up list of the run's VMs, its end to
	 * sd_cloud_on_reconciled: 0, or -1 with ERR. */
	int (*reconcile)(struct sd_cloud *c, char *err, size_t errlen);
	/* At close: ends what the cloud's API has in flight (the loop may not
	 * run again), then (SWEEP) deletes on a private loop every VM of the
	 * run not known gone. */
	void (*cancel)(struct sd_cloud *c);
	void (*sweep)(struct sd_cloud *c);
	/* Frees the cloud's API client and settings (not the state itself);
	 * called with the transport gone and the HTTP client still open. */
	void (*free_api)(struct sd_cloud *c);
	/* Starts a list of the run's VMs (the backstop's), unless one runs. */
	void (*list)(struct sd_cloud *c);
	/* V takes over held VM H: copies what the cloud keeps of H. */
	void (*adopt)(struct sd_cloud_vm *v, const struct sd_cloud_vm *h);
};

#define SD_CLOUD_MAX_ZONES 32

/* What every cloud provider's state has; the first member of the cloud's. */
struct sd_cloud {
	const struct sd_cloud_ops *ops;
	uv_loop_t *loop;
	struct sd_fleet *fleet;
	struct sd_http *http;
	struct sd_ssh_transport *ssh;  /* the transport (transport.h) */
	double poll_s, boot_timeout_s, block_s;
	double preempt_wait_s;         /* how long an unexplained end is looked at again */
	char *ssh_user, *identity, *worker;   /* the transport's host settings */
	int ssh_port;
	char *zones[SD_CLOUD_MAX_ZONES];
	int nzones;
	double zone_blocked_until[SD_CLOUD_MAX_ZONES];
	double cloud_blocked_until;
	char tag[17];                  /* the run's label */
	int no_run_dir;                /* the label is not kept: nothing is an orphan */
	struct sd_cloud_orphans orph;  /* the start-up list's orphans */
	struct sd_cloud_catalog cc;    /* the offers */
	struct sd_cloud_vm *servers;
	int final_pending;             /* close: deletes not yet answered */
	uv_timer_t backstop;
	int listing;
	int closing;
	sd_provider_closed_cb closed;  /* the close's done, called after the sweep */
	void *closed_arg;
};

/* The server SERVER of C, NULL when none. */
struct sd_cloud_vm *sd_cloud_find(const struct sd_cloud *c, const char *server);
/* ZONE's index in C's zones, -1 when it is not one. */
int sd_cloud_zone_index(const struct sd_cloud *c, const char *zone);
/* Takes V out of C's servers and frees it. */
void sd_cloud_unlink(struct sd_cloud *c, struct sd_cloud_vm *v);
/* A provider event of KIND about V (an end is remembered as reported). */
void sd_cloud_vm_report(struct sd_cloud *c, struct sd_cloud_vm *v, enum sd_provider_event_kind kind,
			const char *code, const char *message);
/* A new server of C (the cloud's vm_size, zeroed) in ZONE, at the head of
 * its servers; ID NULL for an orphan. */
struct sd_cloud_vm *sd_cloud_vm_new(struct sd_cloud *c, const char *id, int zone);
/* V's VM runs at ADDR (COMM_ADDR: the address its peers use, NULL: ADDR):
 * PROVISIONED is reported and the transport waits for its sshd. */
void sd_cloud_boot_done(struct sd_cloud *c, struct sd_cloud_vm *v, const char *addr, const char *comm_addr);
/* The transport's answer to the wait for V's sshd (transport.h's ready
 * callback; ARG is V). */
void sd_cloud_on_ssh_ready(void *arg, int host, int ok, const char *said);
/* The transport cannot reach SERVER's host any more (CTX is the cloud). */
void sd_cloud_on_unreachable(void *ctx, const char *server, const char *message);
/* The start-up list has ended (ARG is the cloud; N listed, ERROR NULL or
 * why it failed): the waiting acquisitions settle unless a question is
 * open. */
void sd_cloud_on_reconciled(void *arg, int n, const char *error);
/* Every waiting acquisition adopts a held VM of its zone (orphans
 * "adopt") or makes its own; the held VMs no server took are deleted or,
 * with "keep", left alone. */
void sd_cloud_settle(struct sd_cloud *c);

/* Deletes V's VM once: nothing while it is gone or being deleted; one
 * never made (waiting) is gone; one inserting is deleted when its insert
 * ends. */
void sd_cloud_delete(struct sd_cloud *c, struct sd_cloud_vm *v);
/* V's delete succeeded (ENDED_AT: the cloud's time of it, 0 unknown, from
 * SOURCE): V is gone and billed. */
void sd_cloud_deleted(struct sd_cloud *c, struct sd_cloud_vm *v, double ended_at, const char *source);
/* V's delete failed with MESSAGE while the run goes on: an error event,
 * and the close tries again. */
void sd_cloud_delete_failed(struct sd_cloud *c, struct sd_cloud_vm *v, const char *message);
/* V powered off AT (epoch s, from SOURCE) unless a time is known already. */
void sd_cloud_stopped(struct sd_cloud_vm *v, double at, const char *source);
/* Once V's start and power-off times are both known: the fleet's
 * estimate of its cost is replaced by what the cloud bills (BILLED). */
void sd_cloud_bill(struct sd_cloud *c, struct sd_cloud_vm *v);
/* The verdict on V, whose VM stopped or went: journaled first (KIND
 * REVOKED or FAILED, SETTLED_BY what settled it), and only then is the VM
 * deleted, so that nothing about it is lost if the controller dies in
 * between. */
void sd_cloud_verdict(struct sd_cloud *c, struct sd_cloud_vm *v, enum sd_provider_event_kind kind,
		      const char *settled_by, const char *code, const char *message);
/* V was seen stopped or gone with nothing saying why: 1 once that has
 * lasted provider.preempt_wait_s since it was first seen so (*SINCE: how
 * long), 0 while it is looked at again. */
int sd_cloud_review_due(struct sd_cloud *c, struct sd_cloud_vm *v, double *since);

/* The settings every cloud reads alike (sd_cloud_check_vm_settings),
 * OPS and ENV's loop and fleet, into C; PREEMPT_WAIT_S: the cloud's
 * default for provider.preempt_wait_s. */
void sd_cloud_init(struct sd_cloud *c, const struct sd_cloud_ops *ops, const struct sd_provider_env *env,
		   double preempt_wait_s);
/* Workers that dial the controller themselves (--advertise) must reach
 * it: loopback serves only a fake cloud on this machine (API_LOOPBACK).
 * 0, or -1 with WHY naming FILE.  Without --advertise their links come
 * through the transport's ssh connections. */
int sd_cloud_check_advertise(const struct sd_cloud *c, const struct sd_provider_env *env, int api_loopback,
			     const char *file, char **why);
/* Opens the ssh transport: 0, or -1 with WHY. */
int sd_cloud_open_transport(struct sd_cloud *c, const struct sd_provider_env *env, char **why);
/* Starts the backstop (BACKSTOP every provider.poll_s, its data the
 * cloud's state) and the start-up list of the run's VMs. */
void sd_cloud_start(struct sd_cloud *c, uv_timer_cb backstop);

/* The struct sd_provider_ops members every cloud shares: provider.h
 * documents them. */
int sd_cloud_acquire(struct sd_provider *p, const char *server, const struct sd_offer *offer, char **why);
void sd_cloud_release(struct sd_provider *p, const char *server);
const struct sd_catalog *sd_cloud_catalog(const struct sd_provider *p);
const double *sd_cloud_prices(const struct sd_provider *p);
/* Seconds since the cloud catalog's priced_at (0 when that is 0). */
double sd_cloud_price_age(const struct sd_provider *p);
int sd_cloud_live(const struct sd_provider *p, const struct sd_offer *o);
int sd_cloud_launch(struct sd_provider *p, const char *server, char *const *worker_argv, char ***argv, char **why);
void sd_cloud_signal(struct sd_provider *p, const char *server, int sig);
void sd_cloud_lost(struct sd_provider *p, const char *server, int worker_alive);
int sd_cloud_link_in_session(const struct sd_provider *p);
int sd_cloud_judge(struct sd_provider *p, const char *server);
int sd_cloud_answer_orphans(struct sd_provider *p, const char *what, char **why);
void sd_cloud_close(struct sd_provider *p, sd_provider_closed_cb done, void *arg);
void sd_cloud_free(struct sd_provider *p);
/* Those members, for a cloud's struct sd_provider_ops initializer: a
 * cloud supplies its name, description, check, path_settings and create. */
#define SD_CLOUD_PROVIDER_OPS                                                                       \
	.acquire = sd_cloud_acquire, .release = sd_cloud_release, .catalog = sd_cloud_catalog,        \
	.prices = sd_cloud_prices, .price_age = sd_cloud_price_age, .live = sd_cloud_live,           \
	.launch = sd_cloud_launch,                                                                     \
	.signal = sd_cloud_signal, .lost = sd_cloud_lost, .link_in_session = sd_cloud_link_in_session, \
	.judge = sd_cloud_judge, .answer_orphans = sd_cloud_answer_orphans, .close = sd_cloud_close,   \
	.free = sd_cloud_free

#endif
