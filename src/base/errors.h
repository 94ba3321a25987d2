/* src/base/errors.h - one-line error messages handed back to callers, and
 * the allocation that reports out-of-memory instead of returning NULL.
 * Functions that can fail take a `char **why`; on failure they store a
 * malloc'd message there (caller frees) and return a negative value. */
#ifndef SD_BASE_ERRORS_H
#define SD_BASE_ERRORS_H

#include <stddef.h>

/* Formats a message into *why (if why is not NULL; an existing message is
 * freed first) and returns -1, so `return sd_why(why, "...", ...);` works. */
int sd_why(char **why, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prints "spotdeck: MESSAGE" to stderr and aborts; for out-of-memory only. */
void sd_oom(void) __attribute__((noreturn));

/* malloc/calloc that call sd_oom() instead of returning NULL. */
void *sd_malloc(size_t bytes);
void *sd_calloc(size_t count, size_t size);

#endif
