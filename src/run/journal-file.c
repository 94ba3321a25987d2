/* src/run/journal-file.c - see journal-file.h. */
#include "config.h"

#include "src/run/journal-file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/base/errors.h"
#include "src/base/file.h"

int sd_journal_open(const char *path, int torn, int *fd, off_t *size, char **why)
{
	*fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	struct stat st;
	if (*fd < 0 || fstat(*fd, &st) < 0)
		return sd_why(why, "%s: %s", path, strerror(errno));
	*size = st.st_size;
	if (torn && write(*fd, "\n", 1) == 1)
		(*size)++;   /* the killed run's last line stays on its own */
	return 0;
}

int sd_journal_append(int fd, off_t *size, const char *buf, size_t len)
{
	size_t done = 0;
	int err = sd_write_all(fd, buf, len, &done);
	if (err) {
		if (done > 0 && ftruncate(fd, *size) < 0) {
			/* The torn line stays; a reader skips it as it does a crash's. */
		}
		return err;
	}
	*size += (off_t)done;
	return 0;
}
