/* src/app/control.h - the background run's control socket: cockpits and
 * scripts attach to a run through RUNDIR/control.sock (a Unix domain stream
 * socket, mode 0600 in a 0700 run directory; a peer of another uid is
 * refused by SO_PEERCRED).  The messages are src/run/control-proto.h's.
 *
 * The server runs on the run's libuv loop and never blocks it: every
 * client has its own write queue, and a client whose queue grows past
 * SD_CONTROL_QUEUE_MAX (it reads slower than the run talks) is dropped
 * rather than let the run wait or its memory grow.  The view is refreshed
 * and encoded once per SD_CONTROL_STATUS_MS tick for all clients, as the
 * changes since the last tick (src/app/view-codec.h), and only while a
 * cockpit is attached and the view's version moved. */
#ifndef SD_APP_CONTROL_H
#define SD_APP_CONTROL_H

#include <cJSON.h>
#include <uv.h>

#include "ui/view.h"

#define SD_CONTROL_STATUS_MS 200          /* the cockpit's own poll period */
#define SD_CONTROL_QUEUE_MAX (32u << 20)  /* bytes queued to one client; the
                                          * environment's SPOTDECK_CONTROL_QUEUE_MAX
                                          * (bytes, >= 4096) replaces it, for tests */

struct sd_control;

struct sd_control_opts {
	const char *run_dir;       /* the socket is RUN_DIR/control.sock */
	const char *job;           /* the job in a few words, for `spotdeck ls` */
	/* Refreshes the view and returns it (valid until the next call). */
	const struct sd_view *(*view)(void *ctx);
	/* Runs a command line of the command table; 0, or -1 with *why. */
	int (*command)(void *ctx, const char *line, char **why);
	/* The number of attached clients changed (the header shows it). */
	void (*clients_changed)(void *ctx, int clients);
	void *ctx;
};

/* Makes the run directory 0700, binds RUN_DIR/control.sock (mode 0600;
 * a stale socket of a dead run is replaced, a live one refused), listens,
 * and writes the process id to RUN_DIR/spotdeck.pid (removed at the end).  Returns 0, or -1 with *why naming the path and the failure. */
int sd_control_listen(struct sd_control **out, uv_loop_t *loop, const struct sd_control_opts *o,
                      char **why);

/* Sends a journal event (borrowed) to the clients that asked for them. */
void sd_control_event(struct sd_control *s, const cJSON *ev);

/* The run ended: sends every client the last changes and a bye with the
 * exit status and how it ended, then hangs up once each one's queue is
 * written.  Returns at once; sd_control_flushed says when that is done. */
void sd_control_end(struct sd_control *s, int status, const char *ended);
int sd_control_flushed(const struct sd_control *s);

/* Closes the listener and every client, removes the socket; the memory
 * goes once the loop has run the close callbacks.  Safe with NULL. */
void sd_control_close(struct sd_control *s);

#endif
