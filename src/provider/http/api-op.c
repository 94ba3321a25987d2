/* src/provider/http/api-op.c - a cloud API operation's timer, clock and
 * place among its client's operations (see api-op.h). */
#include "config.h"
#include "src/provider/http/api-op.h"

#include <stddef.h>

void sd_api_op_init(struct sd_api_op *o, const struct sd_api_op_class *cls)
{
	o->cls = cls;
	o->t0_ns = uv_hrtime();
}

void sd_api_op_start(struct sd_api_op *o, struct sd_http *h)
{
	struct sd_api_op **head = sd_http_ops(h);
	o->http = h;
	uv_timer_init(sd_http_loop(h), &o->timer);
	o->timer.data = o;
	o->started = 1;
	o->next = *head;
	if (*head)
		(*head)->prev = o;
	*head = o;
}

static void on_timer(uv_timer_t *t)
{
	struct sd_api_op *o = t->data;
	o->timing = 0;
	o->again(o);
}

void sd_api_op_wait(struct sd_api_op *o, double seconds, void (*again)(struct sd_api_op *o))
{
	o->timing = 1;
	o->again = again;
	uv_timer_start(&o->timer, on_timer, (uint64_t)(seconds * 1000), 0);
}

double sd_api_op_end(struct sd_api_op *o)
{
	if (o->started) {
		struct sd_api_op **head = sd_http_ops(o->http);
		if (o->prev)
			o->prev->next = o->next;
		else if (*head == o)
			*head = o->next;
		if (o->next)
			o->next->prev = o->prev;
	}
	o->prev = o->next = NULL;
	return (double)(uv_hrtime() - o->t0_ns) / 1e9;
}

static void on_closed(uv_handle_t *h)
{
	struct sd_api_op *o = h->data;
	o->cls->freed(o);
}

void sd_api_op_close(struct sd_api_op *o)
{
	if (o->started)
		uv_close((uv_handle_t *)&o->timer, on_closed);
	else
		o->cls->freed(o);
}

void sd_api_op_cancel_waiting(struct sd_http *h)
{
	for (struct sd_api_op *o = *sd_http_ops(h), *next; o; o = next) {
		next = o->next;
		if (o->timing) {
			uv_timer_stop(&o->timer);
			o->timing = 0;
			o->cls->cancelled(o);
		}
	}
}
