/* engine/dnnl-call.h - the handles of one oneDNN call, private to engine/
 * and built only with oneDNN (engine/dnnl-call.c): conv-dnnl.c and
 * matmul-dnnl.c wrap the caller's buffers in memory objects for the call
 * (sd_dnnl_mem), run primitives on one stream (sd_dnnl_exec) and free it
 * all together (sd_dnnl_call_end).  A failure anywhere marks the call
 * failed and the later steps do nothing; sd_dnnl_call_end says so. */
#ifndef SD_ENGINE_DNNL_CALL_H
#define SD_ENGINE_DNNL_CALL_H

#include <oneapi/dnnl/dnnl.h>

/* Memory objects one call may make.  A convolution backward with every
 * tensor reordered takes up to 36: eight reorders (dy twice, x, w, dw, dx,
 * and x^T and dy^T when the weight gradient is swapped) of two handles,
 * three with a scratchpad, and the two convolutions of four or five.  With
 * 16 every such backward ran out, failed and quietly fell back to im2col;
 * sd_dnnl_mem refuses rather than overflows. */
#define SD_DNNL_CALL_MEM 40

struct sd_dnnl_call {
	dnnl_engine_t engine;     /* not owned */
	dnnl_stream_t stream;
	dnnl_memory_t mem[SD_DNNL_CALL_MEM];
	int nmem;
	int failed;
};

/* Starts a call on engine (a CPU engine): 0, or -1 when no stream could be
 * made (nothing to end then). */
int sd_dnnl_call_begin(struct sd_dnnl_call *c, dnnl_engine_t engine);
/* A memory object of layout md over ptr (not owned, not copied), freed by
 * sd_dnnl_call_end; NULL (and the call failed) when out of handles or when
 * oneDNN refuses. */
dnnl_memory_t sd_dnnl_mem(struct sd_dnnl_call *c, const dnnl_memory_desc_t *md, const void *ptr);
/* Queues prim with its nargs arguments on the call's stream; does nothing
 * on a call already failed or when an argument's memory is NULL (which
 * fails it). */
void sd_dnnl_exec(struct sd_dnnl_call *c, dnnl_primitive_t prim, int nargs,
                  const dnnl_exec_arg_t *args);
/* Waits for the stream, frees the memory objects and the stream: 0, or -1
 * when any step of the call failed (outputs then undefined). */
int sd_dnnl_call_end(struct sd_dnnl_call *c);

#endif
