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

/* The engine's big per-model buffers (activations and their gradients, the
 * workspace, parameters, gradients, optimizer state, convolution keeps):
 * `bytes` (0 taken as 1) on an `align`-byte boundary (a power of two, at
 * least sizeof(void *)), released with free(); sd_oom() on out-of-memory.
 * From SD_BIG_BYTES up, the block starts on an SD_BIG_BYTES boundary, its
 * size is rounded up to a multiple of it, and the range is marked
 * madvise(MADV_HUGEPAGE), so that a kernel with transparent huge pages in
 * "always" or "madvise" mode backs it with 2 MiB pages when first touched.
 * Why: one step streams hundreds of MB of 4-8 MB tensors that miss the
 * caches; in 4 KiB pages an 8 MB tensor spans 2048 pages, more than the
 * TLB holds, so every stream through it walks the page tables, while 2 MiB
 * pages cover it with 4 entries (the kernel's
 * Documentation/admin-guide/mm/transhuge.rst: huge pages cut TLB misses
 * and make each miss's walk shorter).  The madvise failing (no THP in this
 * kernel, EINVAL) is not an error: the block is then ordinary memory.
 * Smaller blocks are plain posix_memalign(align). */
#define SD_BIG_BYTES ((size_t)2 << 20)   /* x86-64's 2 MiB huge page */
void *sd_malloc_big(size_t bytes, size_t align);
/* sd_malloc_big, zero-filled. */
void *sd_calloc_big(size_t count, size_t size, size_t align);

#endif
