/* src/provider/fleet-internal.h - the fleet's private state, shared by
 * fleet.c (states, money, journal, provider events) and launcher.c (the
 * spotdeck-worker processes on running machines).  Not for other layers. */
#ifndef SD_PROVIDER_FLEET_INTERNAL_H
#define SD_PROVIDER_FLEET_INTERNAL_H

#include <cJSON.h>
#include <stdint.h>
#include <uv.h>

#include "src/provider/fleet.h"

struct server {
	char id[16];
	const struct sd_offer *offer;    /* NULL: local */
	enum sd_server_state st;
	double t_request;                /* fleet seconds */
	double t_end;                    /* billing end, < 0 while billed */
	double t_notice;                 /* < 0: no notice */
	double t_notice_end;             /* when the notice runs out */
	int cloud_noticed;               /* its worker reported the cloud's own notice */
	char notice_source[16];          /* that notice's "source" ("gce", "aws"), "" none */
	double usd_per_hour;             /* the offer's price when acquired */
	double cloud_usd;                /* the provider's own statement (BILLED), < 0 none yet */
	int price_estimated;             /* ... and that price was an estimate */
	int unpriced;                    /* the offer has no price (a hosts file
	                                  * without price=): billed as unknown */
	int provider_holds;              /* the provider has it: release() owed */
	int never_held;                  /* refused, no capacity, or (remote) its host
	                                  * never reached: never billed */
	int releasing;                   /* the operator or the run's end asked for it back */
	char replaces[16];               /* a swap: the server to release once this one
	                                  * trains ("" none) */
	/* launcher.c */
	uv_process_t proc;
	int proc_live;                   /* spawned and not yet exited */
	int proc_open, timer_open;       /* handles not yet closed */
	uv_timer_t timer;                /* SIGTERM/SIGKILL escalation */
	int term_sent;
	int remote;                      /* the process is the provider's launch
	                                  * command: signals go through ops->signal */
	int cpu_slot;                    /* local: the --cpu-slot it was given (-1 none) */
	int detached;                    /* remote: its session ended (ssh's 255) while
	                                  * its worker trained; the worker runs on,
	                                  * stopped through ops->signal, and is
	                                  * followed by its controller connection */
	int worker_out;                  /* its worker's controller connection closed
	                                  * (dropped as unresponsive, or lost) and no
	                                  * new one came: the worker is not training */
	uv_pipe_t token_pipe;            /* remote: the token on its stdin */
	int pipe_open;
	uv_write_t token_write;
	char *token_line;
	struct sd_fleet *f;
	struct server *next;
};

/* The server's worker runs: its process here, or on its host after the
 * session that started it ended. */
static inline int fl_worker_live(const struct server *s)
{
	return s->proc_live || s->detached;
}

struct sd_fleet {
	uv_loop_t *loop;
	uint64_t t0_ms;
	const struct sd_provider_ops *ops;   /* NULL: local servers only */
	struct sd_provider *p;
	struct sd_provider_env env;
	double *catalog_prices;          /* a provider without prices(): its catalog's */
	char worker_path[4096], run_dir[4096];
	char connect[300];               /* HOST:PORT local workers dial */
	char advertise[300];             /* HOST:PORT remote workers dial */
	int direct;                      /* --advertise given: they dial it themselves */
	int emulate;
	double grace_seconds;
	struct sd_fleet_hooks hooks;
	void *ctx;
	struct server *servers;          /* newest first; freed by sd_fleet_free */
	struct server *refused;          /* acquires the provider refused at once: out of
	                                  * the list (never held, nothing journaled), freed
	                                  * by sd_fleet_free once their timers closed */
	int next_id;
	double usd_done;                 /* money of servers whose billing stopped */
	int closing;
	void (*closed)(void *arg);     /* sd_fleet_close's done, and its argument */
	void *closed_arg;
	int closing_procs;               /* processes killed by the close, not yet exited */
	int provider_closed;             /* the provider's close is done */
	struct server *acquiring;        /* inside ops->acquire for this one */
	struct sd_provider_event acquire_deferred;   /* PROVISIONED or RUNNING reported
	                                              * inside it, applied after */
	int has_deferred;
	char acquire_error[512];
};

/* fleet.c */
cJSON *fl_server_event_at(const struct sd_fleet *f, const struct server *s, double t);
cJSON *fl_server_event(const struct sd_fleet *f, const struct server *s);
void fl_set_state(struct sd_fleet *f, struct server *s, enum sd_server_state st);
int fl_gone(const struct server *s);
struct server *fl_find(const struct sd_fleet *f, const char *id);
/* Stops billing, sets st (unless gone already), gives the machine back. */
void fl_finish_server(struct sd_fleet *f, struct server *s, enum sd_server_state st);
/* fl_finish_server(RELEASED) and the "released" event. */
void fl_released(struct sd_fleet *f, struct server *s);

/* launcher.c */
void fl_launcher_server_init(struct sd_fleet *f, struct server *s);
/* Starts the worker on s; pace > 0 emulates a slower GPU.  0 or -1, *why. */
int fl_launcher_spawn(struct sd_fleet *f, struct server *s, double pace, char **why);
/* SIGTERM now, SIGKILL after the grace period; 0 if no process runs. */
int fl_launcher_shutdown(struct sd_fleet *f, struct server *s);
/* SIGTERM after the grace period (the worker was told to leave). */
void fl_launcher_terminate_later(struct sd_fleet *f, struct server *s);
/* The server is over: closes its timer once no process runs. */
void fl_launcher_server_done(struct server *s);
/* SIGKILL and close every handle of s (the fleet closes). */
void fl_launcher_close(struct server *s);
/* A process fl_launcher_close killed has exited (the close may be done). */
void fl_close_proc_exited(struct sd_fleet *f);
/* A detached server's worker left its controller connection (it ended,
 * or was dropped): the server ends as if its process had exited. */
void fl_launcher_worker_gone(struct sd_fleet *f, struct server *s);

/* Hands an event with its journal fields (consumed) to the owner:
 * fl_journal for one nobody decides on beyond its type, fl_emit with the
 * typed members filled in. */
void fl_journal(struct sd_fleet *f, enum sd_event_type type, cJSON *fields);
void fl_emit(struct sd_fleet *f, const struct sd_fleet_event *ev, cJSON *fields);

#endif
