/* src/provider/http/api-op.h - a cloud API operation that takes several
 * requests and waits between them: a VM's insert polled until it runs, a
 * delete until the cloud says it is done.  What every cloud's operation
 * has is here: its poll timer, how long it has taken, and its place among
 * the operations not yet ended of the HTTP client it runs on, so that a
 * closing provider ends those that wait between two requests (the loop
 * may not run again; those inside a request end with sd_http_close).  A
 * cloud's own operation struct begins with a struct sd_api_op. */
#ifndef SD_PROVIDER_HTTP_API_OP_H
#define SD_PROVIDER_HTTP_API_OP_H

#include <stdint.h>
#include <uv.h>

#include "src/provider/http/http.h"

struct sd_api_op;

/* What the cloud does with its operation O. */
struct sd_api_op_class {
	/* O waited between two requests when its client was cancelled: ends
	 * it now, its callback told so (it calls sd_api_op_end). */
	void (*cancelled)(struct sd_api_op *o);
	/* O's timer is closed: frees what O holds and O itself. */
	void (*freed)(struct sd_api_op *o);
};

struct sd_api_op {
	const struct sd_api_op_class *cls;
	struct sd_http *http;
	uv_timer_t timer;
	uint64_t t0_ns;               /* uv_hrtime() at sd_api_op_init */
	int timing;                   /* between two requests: the timer runs */
	int started;                  /* linked, its timer open */
	void (*again)(struct sd_api_op *o);   /* what the timer runs (sd_api_op_wait) */
	struct sd_api_op *prev, *next;
};

/* O (zeroed by its maker) of class CLS starts its clock. */
void sd_api_op_init(struct sd_api_op *o, const struct sd_api_op_class *cls);
/* O runs on H: its timer opens on H's loop and it joins H's operations. */
void sd_api_op_start(struct sd_api_op *o, struct sd_http *h);
/* After SECONDS, AGAIN(O) (the next request). */
void sd_api_op_wait(struct sd_api_op *o, double seconds, void (*again)(struct sd_api_op *o));
/* O ends: it leaves its client's operations; returns the seconds since
 * sd_api_op_init.  The cloud then runs its callback and sd_api_op_close. */
double sd_api_op_end(struct sd_api_op *o);
/* Closes O's timer (O is freed by its class afterwards); an O never
 * started is freed now. */
void sd_api_op_close(struct sd_api_op *o);
/* Ends every operation on H that waits between two requests (its class's
 * cancelled).  Before H is closed. */
void sd_api_op_cancel_waiting(struct sd_http *h);

#endif
