/* src/base/errors.c - see errors.h. */
#include "src/base/errors.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Called before aborting so a TUI can restore the terminal; set by the program. */
void (*sd_oom_hook)(void);

int sd_why(char **why, const char *fmt, ...)
{
	if (!why)
		return -1;
	va_list ap;
	va_start(ap, fmt);
	char *msg = NULL;
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	va_end(ap);
	free(*why);
	*why = msg;
	return -1;
}

void sd_oom(void)
{
	static const char msg[] = "spotdeck: out of memory\n";
	if (sd_oom_hook)
		sd_oom_hook();
	if (write(2, msg, sizeof msg - 1) < 0) {
		/* Nothing left to report to. */
	}
	abort();
}

void *sd_malloc(size_t bytes)
{
	void *p = malloc(bytes ? bytes : 1);
	if (!p)
		sd_oom();
	return p;
}

void *sd_calloc(size_t count, size_t size)
{
	void *p = calloc(count ? count : 1, size ? size : 1);
	if (!p)
		sd_oom();
	return p;
}

void *sd_malloc_big(size_t bytes, size_t align)
{
	if (!bytes)
		bytes = 1;
	const int big = bytes >= SD_BIG_BYTES;
	if (big) {
		align = SD_BIG_BYTES;
		bytes = (bytes + SD_BIG_BYTES - 1) & ~(SD_BIG_BYTES - 1);
	}
	void *p = NULL;
	if (posix_memalign(&p, align, bytes))
		sd_oom();
	/* Failing (no THP in this kernel: EINVAL) leaves ordinary pages, the
	 * same contents: not an error. */
	if (big)
		(void)madvise(p, bytes, MADV_HUGEPAGE);
	return p;
}

void *sd_calloc_big(size_t count, size_t size, size_t align)
{
	if (size && count > (size_t)-1 / size)
		sd_oom();
	const size_t bytes = count * size;
	void *p = sd_malloc_big(bytes, align);
	memset(p, 0, bytes ? bytes : 1);
	return p;
}
