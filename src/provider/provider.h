/* src/provider/provider.h - what a provider is: a const table of operations
 * (after htop's class tables and tmux's cmd_entry) chosen by name from a
 * registry, and the typed events it reports to the fleet (fleet.h).
 *
 * A provider only gets machines and gives them back: it knows its offers
 * (a catalog), their prices now and its own clock, and tells the fleet what
 * happens to each machine.  Everything else is the fleet's and the same for
 * every provider: server ids ("s1", "s2", ...), the server states, billing
 * from the price at acquisition, journaling, the worker processes it starts
 * on machines that are running, releasing.
 *
 * Acquire is asynchronous: acquire() accepts or refuses the request at once
 * (a bad offer), and the machine's life arrives later as events through
 * sd_fleet_report(), on the loop thread:
 *
 *   PROVISIONED  the provider holds a machine for it (it boots)
 *   RUNNING      it runs: the fleet starts the worker there
 *   NOTICE       it will be taken in `seconds` (GCE: ACPI G2 soft off 30 s
 *                before; AWS: the two-minute interruption notice)
 *   REVOKED      the provider took it (preemption, capacity reclaimed)
 *   FAILED       it could not be had or it broke: code and message
 *   STOCKOUT     no capacity in the zone for the offer, with zone and
 *                reason (GCE's ZONE_RESOURCE_POOL_EXHAUSTED arrives inside
 *                the insert operation, after the request was accepted)
 *   BILLED       after the machine is gone: how long the cloud itself
 *                counts it as running (run_seconds, from the cloud's own
 *                timestamps), which replaces the fleet's estimate from
 *                request to release; accepted for a server already gone,
 *                and while the fleet closes
 *
 * An event may be reported from inside acquire(): a STOCKOUT or FAILED
 * (the simulator knows at once) makes the fleet answer the acquire with
 * the failure; a PROVISIONED or RUNNING is applied once the acquisition
 * is journaled (without its address: such a machine's worker is local).  A provider
 * with its own periodic happenings (a market storm, a price change, a zone
 * closing, a trace's operator command) journals them with sd_fleet_journal
 * and sd_fleet_command.
 *
 * Adding a provider: one file with a `const struct sd_provider_ops`, and
 * one line in registry.c (or sd_provider_register() before the run starts,
 * as tests/provider/provider-script.c does from the test suite alone).  A cloud of
 * Spot VMs reached over ssh is less: its API calls behind a struct
 * sd_cloud_ops, the lifecycle being cloud-vm.h's (gce.c and aws.c are
 * two such). */
#ifndef SD_PROVIDER_PROVIDER_H
#define SD_PROVIDER_PROVIDER_H

#include <cJSON.h>
#include <stddef.h>
#include <uv.h>

#include "src/market/catalog.h"
#include "src/proto/events.h"

/* A provider's own state: opaque here, each provider's create() hands out
 * its own struct (struct sim_provider, struct gce_provider, ...) under
 * this name, and its operations convert it back. */
struct sd_provider;
struct sd_fleet;
struct sd_trace;

/* What a provider is created with.  Pointers are borrowed for the
 * provider's life (the fleet and the caller keep them). */
struct sd_provider_env {
	uv_loop_t *loop;
	struct sd_fleet *fleet;        /* report events here */
	const char *catalog_path;      /* NULL: the provider's default or none */
	double hazard_scale, boot_scale, notice_scale;   /* simulator knobs (spotdeck-job(5)) */
	unsigned long long seed;
	int emulate;                   /* pace workers to their offer's GPU speed */
	const struct sd_trace *trace;  /* a market trace to replay, or NULL */
	const cJSON *settings;         /* the job's provider object, less the keys job.c
	                                * knows: the provider's own settings (never NULL) */
	const char *settings_file;     /* for errors: "job.json" */
	const char *advertise;         /* "HOST:PORT" workers on other hosts dial (the
	                                * fleet fills it in; spotdeck --advertise) */
	/* How workers on other hosts reach the controller (the fleet fills
	 * both in).  direct 1 (spotdeck --advertise given): they dial
	 * advertise themselves.  direct 0 (the default): a provider that
	 * reaches its hosts over ssh carries each worker's link through its
	 * own ssh connection (a remote forward to connect, "HOST:PORT" the
	 * controller listens at as a process on this machine dials it), so
	 * nothing on the hosts needs a route to the controller and the link
	 * is encrypted.  The collectives go host to host either way. */
	int direct;
	const char *connect;
	const char *run_dir;           /* the run's directory (the fleet fills it in): its
	                                * token file names the run to a cloud (gce's label) */
	const char *orphans;           /* spotdeck --orphans (overrides provider.orphans),
	                                * NULL when not given (cloud-vm.h sd_cloud_orphans) */
	int interactive;               /* a cockpit may answer a question (not --headless) */
};

enum sd_provider_event_kind {
	SD_PROVIDER_PROVISIONED,
	SD_PROVIDER_RUNNING,
	SD_PROVIDER_NOTICE,
	SD_PROVIDER_REVOKED,
	SD_PROVIDER_FAILED,
	SD_PROVIDER_STOCKOUT,
	SD_PROVIDER_BILLED,
};

struct sd_provider_event {
	enum sd_provider_event_kind kind;
	const char *server;            /* the fleet's id, as given to acquire() */
	double time;                   /* the provider's clock (sd_fleet_now), seconds;
	                                * the journal's market_time */
	/* RUNNING: */
	const char *address;           /* where the worker runs; NULL: a local process
	                                * the fleet starts itself */
	double pace;                   /* emulated speed, fraction of full; 0: full */
	/* NOTICE: */
	double ends_at;                /* when the machine goes (provider clock) */
	int batch_size;                /* machines noticed together (0: one) */
	/* NOTICE, REVOKED: */
	int capped;                    /* a lifetime cap (GCE's 24 h), not the market */
	/* REVOKED: */
	double launched_at;            /* when the machine started, for lifetime_s */
	/* REVOKED, FAILED of a machine found stopped or gone: what told the
	 * provider why ("notice": the worker's cloud notice the run received;
	 * "operation": GCE's compute.instances.preempted; "state_reason":
	 * EC2's stateReason; "timeout": nothing said it was a preemption
	 * within the provider's preempt_wait_s), journaled as "settled_by";
	 * NULL: not such a verdict.  REVOKED's message, when given, is
	 * journaled as its "detail". */
	const char *settled_by;
	/* FAILED, STOCKOUT: */
	const char *code;              /* "ZONE_RESOURCE_POOL_EXHAUSTED", "INVALID_OFFER", ... */
	const char *message;           /* one line for a person */
	const char *zone;              /* STOCKOUT */
	/* BILLED: */
	double run_seconds;            /* billable time before the offer's minimum */
	const char *billing_source;    /* where it comes from, for the journal */
};

/* A provider's close has finished (struct sd_provider_ops.close). */
typedef void (*sd_provider_closed_cb)(void *arg);

struct sd_provider_ops {
	const char *name;              /* "sim"; the job file's provider.name */
	const char *description;       /* one line for --help and errors */
	/* Its machines are emulated (local processes paced to the offer's
	 * GPU when env->emulate): the cockpit labels them so.  0: real. */
	int emulated;
	/* Checks the provider's own settings (env->settings) before anything
	 * starts; NULL: it has none, and any key is an error the fleet names.
	 * Returns 0, or -1 with *why "FILE: provider.KEY: problem". */
	int (*check)(const cJSON *settings, const char *file, char **why);
	/* Its settings that name files (NULL-terminated; NULL: none): a
	 * relative one is made absolute, against the directory spotdeck starts
	 * in, before the job is saved in the run directory, so that --resume
	 * from another directory finds the same files. */
	const char *const *path_settings;
	/* Returns 0 with *out, or -1 with *why (names the file for a bad
	 * catalog).  Nothing is left open on failure. */
	int (*create)(struct sd_provider **out, const struct sd_provider_env *env, char **why);
	/* Asks for a machine of offer (an offer of catalog()) for fleet server
	 * id `server`.  0: accepted, events follow; -1 with *why: refused at once
	 * (no event is reported for it). */
	int (*acquire)(struct sd_provider *p, const char *server, const struct sd_offer *offer,
	               char **why);
	/* The fleet gives the machine back (released by the operator or the end
	 * of the run, or its worker failed); called at most once per accepted
	 * acquire, never for a server the provider itself reported REVOKED,
	 * FAILED or STOCKOUT.  No event about it follows. */
	void (*release)(struct sd_provider *p, const char *server);
	/* The offers, read-only, valid while p lives; NULL: none. */
	const struct sd_catalog *(*catalog)(const struct sd_provider *p);
	/* USD/hour now per catalog offer (by sd_offer.index), changing only on
	 * the loop thread; NULL: the catalog's prices. */
	const double *(*prices)(const struct sd_provider *p);
	/* Seconds since prices() was last confirmed by the market (a refresh
	 * that succeeded), growing while refreshes fail; 0 for prices that do
	 * not go stale (the catalog's, a quoted one, a cloud's monthly price
	 * sheet).  May be NULL: 0. */
	double (*price_age)(const struct sd_provider *p);
	/* Machines of offer o held now (-1: unknown). May be NULL. */
	int (*live)(const struct sd_provider *p, const struct sd_offer *o);
	/* Machines whose worker runs on another host (NULL: the fleet runs
	 * the worker here).  launch: the local command that starts the worker
	 * there, given the command the fleet would run here (worker_argv,
	 * NULL-terminated; its argv[0] is this host's worker, the rest its
	 * options, with the address workers on other hosts dial).  Returns 0
	 * with *argv (NULL-terminated, malloc'd with its strings: sd_argv_free)
	 * or -1 with *why.  The fleet runs it with the run's token and a newline
	 * on its stdin and treats it as the worker process: it must last as long
	 * as the worker and exit with its status (255: the connection to the
	 * host was lost).  signal: sends sig (SIGTERM, SIGKILL) to the worker
	 * there; it is how the fleet stops one.  lost: the launch command
	 * exited with 255 while the fleet did not stop it, or a worker whose
	 * session had ended left its controller connection: the provider may
	 * probe the host and journal.  worker_alive: its worker still trains
	 * (the fleet keeps the server: the provider reports it FAILED if the
	 * host cannot be reached); 0: the fleet gives the server back next,
	 * and the provider stops whatever the session left there. */
	int (*launch)(struct sd_provider *p, const char *server, char *const *worker_argv, char ***argv,
	              char **why);
	void (*signal)(struct sd_provider *p, const char *server, int sig);
	void (*lost)(struct sd_provider *p, const char *server, int worker_alive);
	/* 1 when each worker's controller link goes through its launch
	 * command's own connection (ssh's remote forward, without spotdeck
	 * --advertise): a lost session is then a lost link, and the fleet
	 * never keeps a server for a worker that would train on.  0, or
	 * NULL: the link is the worker's own. */
	int (*link_in_session)(const struct sd_provider *p);
	/* SERVER's worker ended (its process, or its controller connection
	 * after its session had ended) while the server was neither released
	 * nor under notice.  Returns 1 when the provider will itself report
	 * REVOKED or FAILED for the server once it has looked (a cloud VM
	 * preempted without a notice its worker heard looks just like a
	 * crashed worker from here: only the cloud can tell, gce.c and aws.c);
	 * the fleet then keeps the server as it is until that report.  0, or
	 * NULL: the fleet fails the server now. */
	int (*judge)(struct sd_provider *p, const char *server);
	/* The answer to the provider's question about an earlier controller's
	 * VMs (provider.orphans "ask"): WHAT is "adopt", "delete" or "keep".
	 * 0, or -1 with *why (no question is open, or WHAT is none of those).
	 * NULL: the provider never asks. */
	int (*answer_orphans)(struct sd_provider *p, const char *what, char **why);
	/* Starts the provider's end without blocking the loop: stops its
	 * timers, ends what is in flight, and gives back what needs it (ssh:
	 * the run's files on each host, then its shared connections, each
	 * ssh killed once its grace period is over; a cloud: then its VMs).
	 * DONE(ARG) is called exactly once, when every child process the
	 * provider started has exited: from the loop, or from inside close
	 * when nothing is left to wait for.  The caller keeps the loop running
	 * until then (the cockpit draws, the control socket answers), and
	 * then until the handles' close callbacks ran, before free.  No event
	 * is reported after close. */
	void (*close)(struct sd_provider *p, sd_provider_closed_cb done, void *arg);
	void (*free)(struct sd_provider *p);
};

/* The registry: providers by name.  sd_provider_sim is built in. */
extern const struct sd_provider_ops sd_provider_sim;
extern const struct sd_provider_ops sd_provider_ssh;
extern const struct sd_provider_ops sd_provider_gce;
extern const struct sd_provider_ops sd_provider_aws;
/* Frees a NULL-terminated argv and its strings (launch's); NULL is fine. */
void sd_argv_free(char **argv);
/* 1 when HOST, or the host of "HOST:PORT" (split at the last colon; an
 * IPv6 host unbracketed), is loopback: 127.0.0.0/8, ::1 or localhost. */
int sd_host_is_loopback(const char *host_or_host_port, int has_port);
/* Adds ops (borrowed for the program's life) before any fleet is created;
 * -1 if the name is taken or the registry is full (16). */
int sd_provider_register(const struct sd_provider_ops *ops);
/* The provider named, or NULL. */
const struct sd_provider_ops *sd_provider_find(const char *name);
/* Checks a provider's own settings (ops->check, or: none allowed).  0, or
 * -1 with *why "FILE: provider.KEY: problem". */
int sd_provider_check_settings(const struct sd_provider_ops *ops, const cJSON *settings,
                               const char *file, char **why);
/* "sim, script" into buf (len bytes); returns buf. */
const char *sd_provider_names(char *buf, size_t len);

/* For providers: report an event (see above); journal a provider-level
 * event (ev owned by the fleet); run an operator command line (a trace's);
 * the fleet's clock, seconds since it was created (uv_now based). */
void sd_fleet_report(struct sd_fleet *f, const struct sd_provider_event *ev);
void sd_fleet_journal(struct sd_fleet *f, enum sd_event_type type, cJSON *ev);
void sd_fleet_command(struct sd_fleet *f, const char *line);
double sd_fleet_now(const struct sd_fleet *f);

/* Whether the worker on SERVER reported its cloud's own preemption notice
 * (sd_fleet_cloud_notice, journaled or not because the server was already
 * under notice) during this run: 1, else 0 (also for an unknown server).
 * A cloud provider asks this when it finds the server's VM stopped or gone
 * and must tell a preemption from a crash: a notice the run received
 * settles it as a revocation (GCE's compute.instances.preempted operation
 * may appear later, and an EC2 instance may already be gone from
 * DescribeInstances).  With SOURCE non-NULL, *SOURCE is the notice's
 * "source" field ("gce", "aws"; "" when it had none), valid while the
 * fleet lives. */
int sd_fleet_cloud_noticed(const struct sd_fleet *f, const char *server, const char **source);

#endif
