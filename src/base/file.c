/* src/base/file.c - see file.h. */
#include "config.h"

#include "src/base/file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/base/errors.h"

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

int sd_write_all(int fd, const void *buf, size_t len, size_t *done)
{
	size_t off = 0;
	int err = 0;
	while (off < len) {
		ssize_t n = write(fd, (const char *)buf + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			err = n < 0 ? errno : EIO;
			break;
		}
		off += (size_t)n;
	}
	if (done)
		*done = off;
	return err;
}

int sd_write_file_atomic(const char *path, const void *data, size_t len, char **why)
{
	char tmp[PATH_MAX + 96];
	snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return sd_why(why, "%s: %s", tmp, strerror(errno));
	int err = sd_write_all(fd, data, len, NULL);
	if (err) {
		close(fd);
		unlink(tmp);
		return sd_why(why, "%s: write: %s", tmp, strerror(err));
	}
	if (fsync(fd) < 0 || close(fd) < 0) {
		unlink(tmp);
		return sd_why(why, "%s: fsync: %s", tmp, strerror(errno));
	}
	if (rename(tmp, path) < 0) {
		unlink(tmp);
		return sd_why(why, "%s: rename: %s", path, strerror(errno));
	}
	return 0;
}

int sd_map_file(const char *path, void **map, size_t *len, char **why)
{
	*map = NULL;
	*len = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return sd_why(why, "%s: no such file", path);
		return sd_why(why, "%s: cannot open: %s", path, strerror(errno));
	}
	struct stat st;
	if (fstat(fd, &st) != 0) {
		int e = errno;
		close(fd);
		return sd_why(why, "%s: cannot stat: %s", path, strerror(e));
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return sd_why(why, "%s: not a regular file", path);
	}
	size_t n = (size_t)st.st_size;
	if (n > 0) {
		void *m = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
		if (m == MAP_FAILED) {
			int e = errno;
			close(fd);
			return sd_why(why, "%s: cannot map: %s", path, strerror(e));
		}
		*map = m;
	}
	close(fd);
	*len = n;
	return 0;
}
