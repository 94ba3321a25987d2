/* src/run/journal-file.h - RUNDIR/journal.jsonl on disk: one JSON object a
 * line (the events of src/proto/events.h), appended, never rewritten.
 * Each append is whole lines, written whole or not at all, so a reader
 * (a resume, `spotdeck attach`, a script) only ever meets a torn line
 * where a crash cut the process off; it skips such a line, and a resumed
 * run ends it with a newline so that its own first line stands alone.
 * These are the file's blocking calls: the controller runs appends on the
 * libuv thread pool, one batch at a time. */
#ifndef SD_RUN_JOURNAL_FILE_H
#define SD_RUN_JOURNAL_FILE_H

#include <stddef.h>
#include <sys/types.h>

/* Opens path for appending (created 0644 if missing).  torn: the last line
 * was cut by a crash (a resume found it so), so a newline ends it first.
 * Returns 0 with *fd and *size (the file's length, the newline included),
 * or -1 with *why "PATH: REASON". */
int sd_journal_open(const char *path, int torn, int *fd, off_t *size, char **why);

/* Appends len bytes of buf (whole lines) to the journal open as fd whose
 * length is *size: written whole, or, when a write fails part way, cut
 * back to *size.  Returns 0 (and *size grown by len) or the errno of the
 * failure (EIO for a write of 0 bytes). */
int sd_journal_append(int fd, off_t *size, const char *buf, size_t len);

#endif
