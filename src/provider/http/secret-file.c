/* src/provider/http/secret-file.c - reading a file that holds a secret
 * (secret-file.h). */
#include "config.h"
#include "src/provider/http/secret-file.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int sd_errf(char *err, size_t errlen, const char *fmt, ...)
{
	if (err && errlen > 0) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -1;
}

int sd_secret_file_read(const char *path, size_t max, const char *holds, const char *kind, char **buf,
                        size_t *len, char *err, size_t errlen)
{
	*buf = NULL;
	*len = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		int e = errno;
		sd_errf(err, errlen, "%s: cannot open: %s", path, strerror(e));
		return e == ENOENT ? 1 : -1;
	}
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int e = errno;
		close(fd);
		return sd_errf(err, errlen, "%s: cannot stat: %s", path, strerror(e));
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return sd_errf(err, errlen, "%s: not a regular file", path);
	}
	if (st.st_mode & (S_IRWXG | S_IRWXO)) {
		close(fd);
		return sd_errf(err, errlen, "%s: %s %s by others (mode %04o); chmod 600 %s", path, holds,
		               (st.st_mode & (S_IRGRP | S_IROTH)) ? "readable" : "writable",
		               (unsigned)(st.st_mode & 07777), path);
	}
	char *p = malloc(max + 2);
	if (!p) {
		close(fd);
		return sd_errf(err, errlen, "%s: out of memory", path);
	}
	size_t n = 0;
	while (n <= max) {
		ssize_t r = read(fd, p + n, max + 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;
			close(fd);
			OPENSSL_cleanse(p, n);
			free(p);
			return sd_errf(err, errlen, "%s: cannot read: %s", path, strerror(e));
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	if (n > max) {
		OPENSSL_cleanse(p, n);
		free(p);
		return sd_errf(err, errlen, "%s: larger than %zu KiB, not a %s", path, max >> 10, kind);
	}
	p[n] = '\0';
	*buf = p;
	*len = n;
	return 0;
}

char *sd_expand_home(char *path)
{
	const char *home = getenv("HOME");
	if (!path || strncmp(path, "~/", 2) || !home)
		return path;
	size_t n = strlen(home) + strlen(path);
	char *d = malloc(n);
	if (!d)
		return path;
	snprintf(d, n, "%s/%s", home, path + 2);
	free(path);
	return d;
}

int sd_ssh_public_key(const char *identity, char **line, char *err, size_t errlen)
{
	*line = NULL;
	struct stat st;
	if (stat(identity, &st) < 0)
		return sd_errf(err, errlen, "%s: %s", identity, strerror(errno));
	if (st.st_mode & 077)
		return sd_errf(err, errlen, "%s: private key readable by others (mode %04o); chmod 600 %s", identity,
		               (unsigned)(st.st_mode & 07777), identity);
	char pub[4200], text[16384];
	snprintf(pub, sizeof pub, "%s.pub", identity);
	FILE *f = fopen(pub, "r");
	if (!f)
		return sd_errf(err, errlen, "%s: cannot read: %s", pub, strerror(errno));
	int got = fgets(text, sizeof text, f) != NULL;
	fclose(f);
	text[got ? strcspn(text, "\r\n") : 0] = '\0';
	if (strncmp(text, "ssh-", 4) && strncmp(text, "ecdsa-", 6))
		return sd_errf(err, errlen, "%s: not an OpenSSH public key (ssh-ed25519 AAAA...)", pub);
	*line = strdup(text);
	return *line ? 0 : sd_errf(err, errlen, "out of memory");
}

long long sd_utc_time_parse(const char *s)
{
	struct tm tm;
	memset(&tm, 0, sizeof tm);
	if (!s || strlen(s) < 20 || s[4] != '-' || s[10] != 'T')
		return -1;
	const char *end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!end)
		return -1;
	if (*end == '.') {
		end++;
		if (!isdigit((unsigned char)*end))
			return -1;
		while (isdigit((unsigned char)*end))
			end++;
	}
	if (strcmp(end, "Z") != 0)
		return -1;
	time_t t = timegm(&tm);
	return t == (time_t)-1 ? -1 : (long long)t;
}
