/* src/app/control.h - the background run's control socket, fed with the
 * cockpit's view: the server is src/run/control-server.h's (clients,
 * queues, hello, commands, bye); this side refreshes the view model and
 * encodes it (src/app/view-codec.h), whole for a cockpit that attaches and
 * as the changes since the last broadcast once per SD_CONTROL_STATUS_MS
 * tick, only when the view's version moved. */
#ifndef SD_APP_CONTROL_H
#define SD_APP_CONTROL_H

#include <cJSON.h>
#include <uv.h>

#include "src/run/control-server.h"
#include "ui/view.h"

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

/* sd_control_server_listen with the view of o (see control-server.h).
 * Returns 0, or -1 with *why naming the path and the failure. */
int sd_control_listen(struct sd_control **out, uv_loop_t *loop, const struct sd_control_opts *o,
                      char **why);

/* Sends a journal event (borrowed) to the clients that asked for them. */
void sd_control_event(struct sd_control *s, const cJSON *ev);

/* The run ended: the last changes, a bye, then hang-ups (see
 * sd_control_server_end); sd_control_flushed says when that is done. */
void sd_control_end(struct sd_control *s, int status, const char *ended);
int sd_control_flushed(const struct sd_control *s);

/* Closes the socket and every client (the server's memory goes once the
 * loop has run the close callbacks).  Safe with NULL. */
void sd_control_close(struct sd_control *s);

#endif
