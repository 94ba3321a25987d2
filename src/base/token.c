/* src/base/token.c - see token.h. */
#include "config.h"

#include "src/base/token.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/base/errors.h"
#include "src/base/file.h"
#include "src/base/hex.h"

int sd_token_equal(const char *expected, const char *given)
{
	/* Walk expected's length whatever given holds: once given's NUL is
	 * reached the index stops there (arithmetically, not by a branch), so
	 * neither the number of iterations nor the memory touched depends on
	 * where the first difference is or on how long given is. */
	size_t n = strlen(expected);
	volatile unsigned diff = 0;
	size_t j = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char g = (unsigned char)given[j];
		diff |= g ^ (unsigned char)expected[i];
		j += (size_t)(g != 0);
	}
	diff |= (unsigned char)given[j];   /* given must end where expected does */
	return diff == 0;
}

static int sd_token_check(const char *token, size_t n, const char *path, char **why)
{
	if (n < SD_TOKEN_MIN || n > SD_TOKEN_MAX)
		return sd_why(why, "%s: the token must be %d to %d characters, got %zu",
		              path, SD_TOKEN_MIN, SD_TOKEN_MAX, n);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)token[i];
		if (c <= 0x20 || c >= 0x7f)
			return sd_why(why, "%s: the token has a space or a non-printable character "
			              "at position %zu (printable ASCII without spaces only)", path, i + 1);
	}
	return 0;
}

int sd_token_read_file(const char *path, char **token, char **why)
{
	*token = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return sd_why(why, "%s: cannot open the token file: %s", path, strerror(errno));
	/* The first line is all that matters; one byte more than the longest
	 * token plus a CRLF and some trailing blanks tells "too long" apart. */
	char buf[SD_TOKEN_MAX + 64];
	size_t n = 0;
	while (n < sizeof buf) {
		ssize_t got = read(fd, buf + n, sizeof buf - n);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			int err = errno;
			close(fd);
			return sd_why(why, "%s: cannot read the token file: %s", path, strerror(err));
		}
		if (got == 0)
			break;
		n += (size_t)got;
		if (memchr(buf, '\n', n))
			break;
	}
	close(fd);
	char *nl = memchr(buf, '\n', n);
	if (nl)
		n = (size_t)(nl - buf);
	while (n > 0 && (buf[n - 1] == ' ' || buf[n - 1] == '\t' || buf[n - 1] == '\r' ||
	                 buf[n - 1] == '\v' || buf[n - 1] == '\f'))
		n--;
	if (memchr(buf, '\0', n))
		return sd_why(why, "%s: the token has a NUL byte", path);
	if (sd_token_check(buf, n, path, why) < 0)
		return -1;
	char *t = sd_malloc(n + 1);
	memcpy(t, buf, n);
	t[n] = '\0';
	*token = t;
	return 0;
}

/* Fills buf with len random bytes from the kernel; 0 or -1 with errno. */
static int sd_random_bytes(void *buf, size_t len)
{
	unsigned char *p = buf;
	size_t got = 0;
	while (got < len) {
		ssize_t r = getrandom(p + got, len - got, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			break;
		got += (size_t)r;
	}
	if (got == len)
		return 0;
	/* Kernels before 3.17 lack getrandom(). */
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	got = 0;
	while (got < len) {
		ssize_t r = read(fd, p + got, len - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			int err = r < 0 ? errno : EIO;
			close(fd);
			errno = err;
			return -1;
		}
		got += (size_t)r;
	}
	close(fd);
	return 0;
}

int sd_token_create_file(const char *path, char **token, char **why)
{
	*token = NULL;
	unsigned char raw[16];
	if (sd_random_bytes(raw, sizeof raw) < 0)
		return sd_why(why, "%s: cannot get random bytes for a token: %s", path,
		              strerror(errno));
	char *t = sd_hex_encode(raw, sizeof raw);
	size_t plen = strlen(path);
	char *tmp = sd_malloc(plen + sizeof ".XXXXXX");
	memcpy(tmp, path, plen);
	memcpy(tmp + plen, ".XXXXXX", sizeof ".XXXXXX");
	/* mkstemp creates the file with mode 0600 (glibc), and fchmod makes sure
	 * of it whatever the umask. */
	int fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		int err = errno;
		free(tmp);
		free(t);
		return sd_why(why, "%s: cannot create the token file: %s", path, strerror(err));
	}
	size_t n = strlen(t);
	t[n] = '\n';   /* written with its newline, then terminated again */
	int ok = fchmod(fd, 0600) == 0;
	int err = ok ? sd_write_all(fd, t, n + 1, NULL) : errno;
	ok = ok && !err;
	t[n] = '\0';
	if (ok && fsync(fd) < 0) {
		ok = 0;
		err = errno;
	}
	if (close(fd) < 0 && ok) {
		ok = 0;
		err = errno;
	}
	if (ok && rename(tmp, path) < 0) {
		ok = 0;
		err = errno;
	}
	if (!ok) {
		unlink(tmp);
		free(tmp);
		free(t);
		return sd_why(why, "%s: cannot write the token file: %s", path, strerror(err));
	}
	free(tmp);
	*token = t;
	return 0;
}
