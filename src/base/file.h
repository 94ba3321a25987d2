/* src/base/file.h - whole files: read with a bound on their size, written
 * so that a crash leaves the old file or the new one, never half of one. */
#ifndef SD_BASE_FILE_H
#define SD_BASE_FILE_H

#include <stddef.h>

/* Reads the whole file at path, at most max_bytes of it, in chunks (a pipe
 * or a file that grows is read the same way; st_size is not trusted).
 * Returns 0 with *buf (malloc'd, caller frees; NUL-terminated after *len
 * bytes), or -1 with *why "PATH: cannot read: REASON" or "PATH: larger
 * than N MiB" (N = max_bytes >> 20) and nothing allocated. */
int sd_read_file(const char *path, size_t max_bytes, char **buf, size_t *len, char **why);

/* Writes len bytes of buf to fd, again after EINTR and short writes.
 * Returns 0, or the errno of the failure (EIO for a write of 0 bytes) with
 * *done (if not NULL) the bytes written before it. */
int sd_write_all(int fd, const void *buf, size_t len, size_t *done);

/* Writes len bytes of data to path atomically: into PATH.tmp.PID, fsync'd,
 * then renamed over path (POSIX rename(2) replaces the target in one step).
 * Returns 0, or -1 with *why naming the temporary file or path and what
 * failed ("write", "fsync", "rename"); the temporary file is removed. */
int sd_write_file_atomic(const char *path, const void *data, size_t len, char **why);

/* Maps the regular file at path read-only and private (pages are read when
 * touched).  Returns 0 with *map (NULL for an empty file) and *len (the
 * caller munmaps a non-empty map), or -1 with *why "PATH: no such file",
 * "PATH: cannot open|stat|map: REASON" or "PATH: not a regular file". */
int sd_map_file(const char *path, void **map, size_t *len, char **why);

#endif
