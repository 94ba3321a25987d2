/* src/base/line-reader.c - see line-reader.h. */
#include "config.h"

#include "src/base/line-reader.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/errors.h"

void sd_line_reader_init(struct sd_line_reader *r, size_t max_line)
{
	memset(r, 0, sizeof *r);
	r->max = max_line ? max_line : SD_LINE_READER_MAX;
}

void sd_line_reader_free(struct sd_line_reader *r)
{
	free(r->buf);
	size_t max = r->max;
	memset(r, 0, sizeof *r);
	r->max = max;
}

void sd_line_reader_feed(struct sd_line_reader *r, const char *data, size_t len)
{
	if (r->skipping && len > 0) {
		/* The rest of a refused line: gone up to its newline. */
		const char *nl = memchr(data, '\n', len);
		if (!nl)
			return;
		r->skipping = 0;
		len -= (size_t)(nl + 1 - data);
		data = nl + 1;
	}
	if (r->overflow || len == 0)
		return;
	/* Drop the lines already returned before growing, so the buffer holds at
	 * most one pending line plus what the caller feeds between calls. */
	if (r->head > 0) {
		memmove(r->buf, r->buf + r->head, r->len - r->head);
		r->len -= r->head;
		r->scan -= r->head;
		r->head = 0;
	}
	if (len > SIZE_MAX - r->len - 1)
		sd_oom();
	size_t need = r->len + len + 1;   /* + 1: room to NUL-terminate a line */
	if (need > r->cap) {
		size_t cap = r->cap ? r->cap : 4096;
		while (cap < need)
			cap = cap > SIZE_MAX / 2 ? need : cap * 2;
		char *buf = realloc(r->buf, cap);
		if (!buf)
			sd_oom();
		r->buf = buf;
		r->cap = cap;
	}
	memcpy(r->buf + r->len, data, len);
	r->len += len;
}

int sd_line_reader_next(struct sd_line_reader *r, const char **line, size_t *len, char **why)
{
	if (r->overflow)
		return sd_why(why, "line longer than %zu bytes", r->max);
	if (r->scan < r->head)
		r->scan = r->head;
	char *nl = r->scan < r->len ? memchr(r->buf + r->scan, '\n', r->len - r->scan) : NULL;
	if (!nl) {
		r->scan = r->len;
		/* No newline yet: max or more pending bytes can only end as a line of
		 * more than max bytes with its newline. */
		if (r->len - r->head >= r->max) {
			r->overflow = 1;
			return sd_why(why, "line longer than %zu bytes", r->max);
		}
		return 0;
	}
	size_t start = r->head;
	size_t end = (size_t)(nl - r->buf);   /* index of the '\n' */
	if (end - start + 1 > r->max) {
		r->overflow = 1;
		return sd_why(why, "line longer than %zu bytes", r->max);
	}
	r->head = end + 1;
	r->scan = r->head;
	if (end > start && r->buf[end - 1] == '\r')
		end--;
	r->buf[end] = '\0';
	*line = r->buf + start;
	*len = end - start;
	return 1;
}

void sd_line_reader_skip(struct sd_line_reader *r)
{
	if (!r->overflow)
		return;
	r->overflow = 0;
	/* The over-long line starts at head; if its newline is buffered, the
	 * bytes after it are the next lines. */
	char *nl = r->head < r->len ? memchr(r->buf + r->head, '\n', r->len - r->head) : NULL;
	if (nl) {
		r->head = (size_t)(nl + 1 - r->buf);
	} else {
		r->head = r->len;
		r->skipping = 1;
	}
	r->scan = r->head;
}
