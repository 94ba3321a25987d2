/* src/app/control.c - see control.h. */
#include "config.h"

#include "src/app/control.h"

#include <stdlib.h>

#include "src/app/view-codec.h"
#include "src/base/errors.h"

struct sd_control {
	struct sd_control_server *server;
	struct sd_control_opts o;
	struct sd_view_mark mark;     /* what the last broadcast carried */
	unsigned long last_version;   /* the view's version then */
};

static cJSON *control_view(void *ctx, int changes)
{
	struct sd_control *s = ctx;
	const struct sd_view *v = s->o.view(s->o.ctx);
	if (!changes)
		return sd_view_encode(v, NULL);
	if (v->version == s->last_version && s->mark.valid)
		return NULL;
	s->last_version = v->version;
	cJSON *view = sd_view_encode(v, &s->mark);
	if (view)
		sd_view_mark_set(&s->mark, v);
	return view;
}

static void control_summary(void *ctx, struct sd_control_summary *out)
{
	struct sd_control *s = ctx;
	const struct sd_view *v = s->o.view(s->o.ctx);
	if (!v)
		return;
	out->job = v->job;
	out->step = (long long)v->step;
	out->total_steps = (long long)v->total_steps;
	out->world_size = v->world_size;
	out->usd_spent = v->usd_spent;
}

static int control_command(void *ctx, const char *line, char **why)
{
	struct sd_control *s = ctx;
	return s->o.command(s->o.ctx, line, why);
}

static void control_clients_changed(void *ctx, int clients)
{
	struct sd_control *s = ctx;
	if (s->o.clients_changed)
		s->o.clients_changed(s->o.ctx, clients);
}

int sd_control_listen(struct sd_control **out, uv_loop_t *loop, const struct sd_control_opts *o,
                      char **why)
{
	*out = NULL;
	/* The mark is large (one entry a server): on the heap with the rest. */
	struct sd_control *s = calloc(1, sizeof *s);
	if (!s)
		return sd_why(why, "control socket: out of memory");
	s->o = *o;
	const struct sd_control_server_opts so = {
		.run_dir = o->run_dir, .job = o->job, .view = control_view, .summary = control_summary,
		.command = control_command, .clients_changed = control_clients_changed, .ctx = s,
	};
	if (sd_control_server_listen(&s->server, loop, &so, why) < 0) {
		free(s);
		return -1;
	}
	*out = s;
	return 0;
}

void sd_control_event(struct sd_control *s, const cJSON *ev)
{
	if (s)
		sd_control_server_event(s->server, ev);
}

void sd_control_end(struct sd_control *s, int status, const char *ended)
{
	if (s)
		sd_control_server_end(s->server, status, ended);
}

int sd_control_flushed(const struct sd_control *s)
{
	return !s || sd_control_server_flushed(s->server);
}

void sd_control_close(struct sd_control *s)
{
	if (!s)
		return;
	/* No callback of ours runs after the server's close. */
	sd_control_server_close(s->server);
	free(s);
}
