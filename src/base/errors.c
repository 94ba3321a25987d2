/* src/base/errors.c - see errors.h. */
#include "src/base/errors.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

int sd_read_file(const char *path, size_t max_bytes, char **buf, size_t *len, char **why)
{
	*buf = NULL;
	*len = 0;
	FILE *f = fopen(path, "rb");
	if (!f)
		return sd_why(why, "%s: cannot read: %s", path, strerror(errno));
	/* One byte past the limit tells the file is too large. */
	const size_t limit = max_bytes + 1;
	size_t cap = 1 << 14, n = 0;
	char *b = sd_malloc(cap + 1);
	while (n < limit) {
		if (n == cap) {
			cap = cap * 2 < limit ? cap * 2 : limit;
			char *grown = realloc(b, cap + 1);
			if (!grown)
				sd_oom();
			b = grown;
		}
		size_t got = fread(b + n, 1, cap - n, f);
		if (got == 0)
			break;
		n += got;
	}
	int err = ferror(f) ? errno : 0;
	fclose(f);
	if (err || n > max_bytes) {
		free(b);
		if (err)
			return sd_why(why, "%s: cannot read: %s", path, strerror(err));
		return sd_why(why, "%s: larger than %zu MiB", path, max_bytes >> 20);
	}
	b[n] = '\0';
	*buf = b;
	*len = n;
	return 0;
}
