/* engine/dnnl-call.c - the handles of one oneDNN call (engine/dnnl-call.h). */
#include "engine/dnnl-call.h"

#include <stdint.h>
#include <string.h>

int sd_dnnl_call_begin(struct sd_dnnl_call *c, dnnl_engine_t engine)
{
	memset(c, 0, sizeof *c);
	c->engine = engine;
	return dnnl_stream_create(&c->stream, engine, dnnl_stream_default_flags) == dnnl_success
	       ? 0 : -1;
}

dnnl_memory_t sd_dnnl_mem(struct sd_dnnl_call *c, const dnnl_memory_desc_t *md, const void *ptr)
{
	dnnl_memory_t m = NULL;
	if (c->nmem == SD_DNNL_CALL_MEM ||
	    dnnl_memory_create(&m, md, c->engine, (void *)(uintptr_t)ptr) != dnnl_success) {
		c->failed = 1;
		return NULL;
	}
	c->mem[c->nmem++] = m;
	return m;
}

void sd_dnnl_exec(struct sd_dnnl_call *c, dnnl_primitive_t prim, int nargs,
                  const dnnl_exec_arg_t *args)
{
	if (c->failed)
		return;
	for (int i = 0; i < nargs; i++)
		if (!args[i].memory) {
			c->failed = 1;
			return;
		}
	if (dnnl_primitive_execute(prim, c->stream, nargs, args) != dnnl_success)
		c->failed = 1;
}

int sd_dnnl_call_end(struct sd_dnnl_call *c)
{
	if (dnnl_stream_wait(c->stream) != dnnl_success)
		c->failed = 1;
	for (int i = 0; i < c->nmem; i++)
		dnnl_memory_destroy(c->mem[i]);
	dnnl_stream_destroy(c->stream);
	return c->failed ? -1 : 0;
}
