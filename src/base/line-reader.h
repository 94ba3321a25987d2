/* src/base/line-reader.h - lines out of a byte stream: feed the chunks a
 * socket or a pipe gives, get whole lines, with a bound on a line's length
 * so that a peer that never sends a newline cannot grow the buffer without
 * end.  Every newline-delimited JSON reader uses it (the worker protocol,
 * the control socket, the headless command input). */
#ifndef SD_BASE_LINE_READER_H
#define SD_BASE_LINE_READER_H

#include <stddef.h>

#define SD_LINE_READER_MAX (1u << 20)   /* bytes per line when init is given 0 */

/* Line framer: feed arbitrary byte chunks, get complete lines.
 * Fields: buf holds bytes [head, len) not yet returned as lines; scan is where
 * the search for the next '\n' resumes (bytes [head, scan) hold none), so a
 * long line fed byte by byte is scanned once, not once per byte; max is the
 * longest line allowed, newline included; overflow is set once a line went
 * over max, after which everything fed is dropped; skipping is set by
 * sd_line_reader_skip while the rest of an over-long line is discarded. */
struct sd_line_reader { char *buf; size_t len, cap, max; int overflow, skipping; size_t head, scan; };
/* max_line: the longest line, newline included (0: SD_LINE_READER_MAX). */
void sd_line_reader_init(struct sd_line_reader *r, size_t max_line);
void sd_line_reader_free(struct sd_line_reader *r);
/* Appends bytes; then call sd_line_reader_next repeatedly. */
void sd_line_reader_feed(struct sd_line_reader *r, const char *data, size_t len);
/* Returns 1 and sets *line and *len (pointing into r's buffer, valid until the next
 * feed/next call; the '\n' is not included, a trailing '\r' is stripped, and
 * line[len] is '\0') when a complete line is available; 0 when more bytes are
 * needed; -1 when the pending line exceeds max (then the connection must be
 * closed: *why says "line longer than N bytes"); every later call returns -1
 * too. */
int sd_line_reader_next(struct sd_line_reader *r, const char **line, size_t *len, char **why);
/* For a reader that outlives a bad line (a command input, not a protocol
 * connection): after sd_line_reader_next returned -1, drops the over-long
 * line whole - what is buffered of it and everything fed up to and
 * including its newline - so that the next call returns the line after it.
 * Nothing of the refused line is ever returned, and it costs one -1 only. */
void sd_line_reader_skip(struct sd_line_reader *r);

#endif
