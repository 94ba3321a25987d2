/* src/run/control-server.h - the background run's control socket: cockpits
 * and scripts attach to a run through RUNDIR/control.sock (a Unix domain
 * stream socket, mode 0600 in a 0700 run directory; a peer of another uid
 * is refused by SO_PEERCRED).  The messages are src/run/control-proto.h's.
 *
 * The server runs on the run's libuv loop and never blocks it: every
 * client has its own write queue, and a client whose queue grows past
 * SD_CONTROL_QUEUE_MAX (it reads slower than the run talks) is dropped
 * rather than let the run wait or its memory grow.  Once per
 * SD_CONTROL_STATUS_MS tick, and only while a cockpit is attached, it asks
 * the program for what changed in the view and sends that to every
 * cockpit.  The view itself is the program's (src/app/control.h encodes
 * the cockpit's, src/app/view-codec.h): here it is a JSON object passed
 * through, so the run layer needs nothing of the cockpit. */
#ifndef SD_RUN_CONTROL_SERVER_H
#define SD_RUN_CONTROL_SERVER_H

#include <cJSON.h>
#include <uv.h>

#define SD_CONTROL_STATUS_MS 200          /* the cockpit's own poll period */
#define SD_CONTROL_QUEUE_MAX (32u << 20)  /* bytes queued to one client; the
                                          * environment's SPOTDECK_CONTROL_QUEUE_MAX
                                          * (bytes, >= 4096) replaces it, for tests */

struct sd_control_server;

/* What a hello tells a client about the run before any view. */
struct sd_control_summary {
	const char *job;           /* the job in a few words; NULL or "": the opts' job */
	long long step, total_steps;
	int world_size;
	double usd_spent;
};

struct sd_control_server_opts {
	const char *run_dir;       /* the socket is RUN_DIR/control.sock */
	const char *job;           /* the job in a few words, for `spotdeck ls` */
	/* The view as a new JSON object (the server deletes it): the whole of
	 * it when changes is 0; when 1, what changed since the last call with
	 * 1 (the whole view the first time), or NULL when nothing did.  NULL
	 * also when out of memory (nothing is sent). */
	cJSON *(*view)(void *ctx, int changes);
	/* Fills *out for a hello (strings valid until the next call). */
	void (*summary)(void *ctx, struct sd_control_summary *out);
	/* Runs a command line of the command table; 0, or -1 with *why. */
	int (*command)(void *ctx, const char *line, char **why);
	/* The number of attached clients changed (the header shows it). */
	void (*clients_changed)(void *ctx, int clients);
	void *ctx;
};

/* Makes the run directory 0700, binds RUN_DIR/control.sock (mode 0600;
 * a stale socket of a dead run is replaced, a live one refused), listens,
 * and writes the process id to RUN_DIR/spotdeck.pid (removed at the end).
 * Returns 0, or -1 with *why naming the path and the failure. */
int sd_control_server_listen(struct sd_control_server **out, uv_loop_t *loop,
                             const struct sd_control_server_opts *o, char **why);

/* Sends a journal event (borrowed) to the clients that asked for them. */
void sd_control_server_event(struct sd_control_server *s, const cJSON *ev);

/* The run ended: sends every client the last changes and a bye with the
 * exit status and how it ended, writes the final view to
 * RUN_DIR/view-final.json (for a cockpit that attaches later), then hangs
 * up once each one's queue is written.  Returns at once;
 * sd_control_server_flushed says when that is done. */
void sd_control_server_end(struct sd_control_server *s, int status, const char *ended);
int sd_control_server_flushed(const struct sd_control_server *s);

/* Closes the listener and every client, removes the socket; the memory
 * goes once the loop has run the close callbacks.  No callback of the
 * opts runs after it.  Safe with NULL. */
void sd_control_server_close(struct sd_control_server *s);

#endif
