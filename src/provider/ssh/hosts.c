/* src/provider/ssh/hosts.c - see hosts.h.  A line is cut into blank-separated
 * words and each word after the first at its first '='; every value is then
 * checked on its own, then the line against the lines before it.  The
 * first error found ends the load, with everything freed. */
#include "config.h"

#include "src/provider/ssh/hosts.h"

#include <arpa/inet.h>
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/base/errors.h"
#include "src/base/file.h"

#define SD_HOSTS_DEFAULT_PORT 22
#define SD_HOSTS_DEFAULT_WORKER "spotdeck-worker"

/* RFC 1035, 2.3.4: a domain name is at most 255 octets on the wire, 253
 * characters as text. */
#define SD_HOSTNAME_MAX 253
#define SD_HOSTS_NAME_MAX 59   /* "ssh/" + NAME within an offer id's 63 bytes */

/* The keys, in the order values are checked (so the order errors are
 * found in, when a line has several). */
enum sd_hosts_key {
	KEY_NAME, KEY_USER, KEY_PORT, KEY_IDENTITY, KEY_GPU, KEY_GPUS, KEY_MARKET, KEY_PRICE,
	KEY_SLOTS, KEY_WORKER, KEY_COMM_HOST, KEY_COUNT
};

static const char *const sd_hosts_keys[KEY_COUNT] = {
	[KEY_NAME] = "name", [KEY_USER] = "user", [KEY_PORT] = "port",
	[KEY_IDENTITY] = "identity", [KEY_GPU] = "gpu", [KEY_GPUS] = "gpus",
	[KEY_MARKET] = "market", [KEY_PRICE] = "price", [KEY_SLOTS] = "slots",
	[KEY_WORKER] = "worker", [KEY_COMM_HOST] = "comm_host",
};

/* Where the parser is, for messages. */
struct sd_hosts_pos {
	const char *file;
	int line;
	char **why;
};

/* "FILE:LINE: FIELD: MESSAGE" (or "FILE:LINE: MESSAGE" without a field)
 * into *why; returns -1. */
static int sd_hosts_why(const struct sd_hosts_pos *p, const char *field, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int sd_hosts_why(const struct sd_hosts_pos *p, const char *field, const char *fmt, ...)
{
	va_list ap;
	char *msg = NULL;
	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		sd_oom();
	va_end(ap);
	if (field)
		sd_why(p->why, "%s:%d: %s: %s", p->file, p->line, field, msg);
	else
		sd_why(p->why, "%s:%d: %s", p->file, p->line, msg);
	free(msg);
	return -1;
}

static char *sd_hosts_strndup(const char *s, size_t n)
{
	char *d = strndup(s, n);
	if (!d)
		sd_oom();
	return d;
}

static char *sd_hosts_strdup(const char *s)
{
	return sd_hosts_strndup(s, strlen(s));
}

/* ---- numbers ----
 * Prices are read in the "C" locale: the cockpit sets LC_NUMERIC from the
 * environment, and a hosts file written "price=0.95" must mean the same
 * under de_DE.UTF-8 (src/proto/job.c does the same for job files). */

static locale_t sd_hosts_c_locale;
static pthread_once_t sd_hosts_c_locale_once = PTHREAD_ONCE_INIT;

static void sd_hosts_c_locale_init(void)
{
	sd_hosts_c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
}

/* A whole number in lo..hi written in decimal digits only (no sign, no
 * blanks); 0 and *out, or -1. */
static int sd_hosts_parse_int(const char *s, int lo, int hi, int *out)
{
	long v = 0;
	if (!*s)
		return -1;
	for (const char *c = s; *c; c++) {
		if (*c < '0' || *c > '9')
			return -1;
		v = v * 10 + (*c - '0');
		if (v > hi)
			return -1;
	}
	if (v < lo)
		return -1;
	*out = (int)v;
	return 0;
}

/* A positive finite decimal number (digits, '.', an exponent: what people
 * write for a price, not strtod's hex floats, "inf" or "nan"). */
static int sd_hosts_parse_price(const char *s, double *out)
{
	if (strspn(s, "0123456789.eE+-") != strlen(s))
		return -1;
	pthread_once(&sd_hosts_c_locale_once, sd_hosts_c_locale_init);
	if (sd_hosts_c_locale == (locale_t)0)
		sd_oom();
	char *end = NULL;
	double d = strtod_l(s, &end, sd_hosts_c_locale);
	if (end == s || *end != '\0' || !isfinite(d) || !(d > 0))
		return -1;
	*out = d;
	return 0;
}

/* ---- addresses ---- */

static int sd_hosts_is_ipv6(const char *s)
{
	struct in6_addr a;
	return inet_pton(AF_INET6, s, &a) == 1;
}

/* A DNS name or an IPv4 address as ssh takes it: letters, digits, '-', '.'
 * and '_' (found in real names, though RFC 952 forbids it), not starting
 * with '-' (ssh would read an option) or '.'.  0, or -1 with the problem in
 * *problem (a static string). */
static int sd_hosts_check_name(const char *s, const char **problem)
{
	size_t n = strlen(s);
	if (n == 0) {
		*problem = "empty host";
		return -1;
	}
	if (n > SD_HOSTNAME_MAX) {
		*problem = "longer than 253 characters (RFC 1035)";
		return -1;
	}
	if (s[0] == '-' || s[0] == '.') {
		*problem = s[0] == '-' ? "starts with '-'" : "starts with '.'";
		return -1;
	}
	if (strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._") != n) {
		*problem = "is neither a DNS name nor an IP address";
		return -1;
	}
	return 0;
}

/* The form two hosts are compared in: an IP address in its canonical text
 * (2001:DB8:0::1 and 2001:db8::1 are one host), a name in lower case (DNS
 * names are case-insensitive, RFC 4343) without a trailing dot.  Caller
 * frees. */
static char *sd_hosts_canonical(const char *host)
{
	unsigned char a[sizeof(struct in6_addr)];
	char text[INET6_ADDRSTRLEN];
	if (inet_pton(AF_INET6, host, a) == 1 && inet_ntop(AF_INET6, a, text, sizeof text))
		return sd_hosts_strdup(text);
	if (inet_pton(AF_INET, host, a) == 1 && inet_ntop(AF_INET, a, text, sizeof text))
		return sd_hosts_strdup(text);
	char *c = sd_hosts_strdup(host);
	for (char *p = c; *p; p++)
		if (*p >= 'A' && *p <= 'Z')
			*p = (char)(*p - 'A' + 'a');
	size_t n = strlen(c);
	if (n > 1 && c[n - 1] == '.')
		c[n - 1] = '\0';
	return c;
}

/* HOST:PORT as a person writes it ([ADDR]:PORT for IPv6); caller frees. */
static char *sd_hosts_host_port(const char *host, int port)
{
	char *s = NULL;
	if (asprintf(&s, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port) < 0)
		sd_oom();
	return s;
}

/* The first word, [USER@]HOST[:PORT]: *user and *port_text point into
 * `word` (which is cut in place) or are NULL when absent; *host is the
 * address without brackets. */
static int sd_hosts_parse_first(const struct sd_hosts_pos *p, char *word, char **user,
                                char **host, char **port_text)
{
	*user = *port_text = NULL;
	char *at = strrchr(word, '@');
	char *rest = word;
	if (at) {
		*at = '\0';
		*user = word;
		rest = at + 1;
		if (!**user)
			return sd_hosts_why(p, "user", "empty before '@' in \"%s@%s\"", word, rest);
	}
	if (rest[0] == '[') {
		char *close = strchr(rest, ']');
		if (!close)
			return sd_hosts_why(p, "host", "\"%s\" has no closing ']'", rest);
		*close = '\0';
		if (!sd_hosts_is_ipv6(rest + 1))
			return sd_hosts_why(p, "host", "\"%s\" is not an IPv6 address", rest + 1);
		*host = rest + 1;
		if (close[1] == ':')
			*port_text = close + 2;
		else if (close[1] != '\0')
			return sd_hosts_why(p, "host", "\"%s\" after \"[%s]\" (expected :PORT)", close + 1,
			                    rest + 1);
		return 0;
	}
	char *colon = strchr(rest, ':');
	if (colon && strchr(colon + 1, ':'))
		return sd_hosts_why(p, "host", "\"%s\": an IPv6 address goes in brackets, as in "
		                    "[2001:db8::1]:22", rest);
	if (colon) {
		*colon = '\0';
		*port_text = colon + 1;
	}
	const char *problem;
	if (!*rest)
		return sd_hosts_why(p, "host", "empty");
	if (sd_hosts_check_name(rest, &problem) != 0)
		return sd_hosts_why(p, "host", "\"%s\" %s", rest, problem);
	*host = rest;
	return 0;
}

/* ---- one line ---- */

static void sd_host_free(struct sd_host *h)
{
	free(h->name);
	free(h->host);
	free(h->user);
	free(h->identity);
	free(h->gpu);
	free(h->worker);
	free(h->comm_host);
	memset(h, 0, sizeof *h);
}

/* "~/" expanded with $HOME, then checked readable now: the ssh provider
 * would fail on every acquire otherwise, long after the file was loaded. */
static int sd_hosts_identity(const struct sd_hosts_pos *p, const char *value, char **out)
{
	char *path;
	if (strncmp(value, "~/", 2) == 0) {
		const char *home = getenv("HOME");
		if (!home || !*home)
			return sd_hosts_why(p, "identity", "\"%s\" needs $HOME, which is not set", value);
		size_t hl = strlen(home);
		while (hl > 1 && home[hl - 1] == '/')
			hl--;
		if (asprintf(&path, "%.*s/%s", (int)hl, home, value + 2) < 0)
			sd_oom();
	} else {
		path = sd_hosts_strdup(value);
	}
	struct stat st;
	if (access(path, R_OK) != 0) {
		int err = errno;
		sd_hosts_why(p, "identity", "%s: %s", path, strerror(err));
		free(path);
		return -1;
	}
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		sd_hosts_why(p, "identity", "%s: %s", path, strerror(EISDIR));
		free(path);
		return -1;
	}
	*out = path;
	return 0;
}

/* The key=value words after the host (up to a '#'), into val by key.
 * 0, or -1 after naming the word that is wrong. */
static int sd_hosts_parse_keys(const struct sd_hosts_pos *p, char **save, const char *val[KEY_COUNT])
{
	for (char *w = strtok_r(NULL, " \t", save); w && w[0] != '#'; w = strtok_r(NULL, " \t", save)) {
		char *eq = strchr(w, '=');
		if (!eq)
			return sd_hosts_why(p, w, "not key=value (after the host, every word is one)");
		if (eq == w)
			return sd_hosts_why(p, w, "no key before '='");
		*eq = '\0';
		int k = 0;
		while (k < KEY_COUNT && strcmp(w, sd_hosts_keys[k]) != 0)
			k++;
		if (k == KEY_COUNT)
			return sd_hosts_why(p, w, "unknown key (known: name, user, port, identity, gpu, "
			                    "gpus, market, price, slots, worker, comm_host)");
		if (val[k])
			return sd_hosts_why(p, w, "given twice");
		if (!eq[1])
			return sd_hosts_why(p, w, "empty value");
		val[k] = eq + 1;
	}
	return 0;
}

/* h->name: name= (NULL: HOST, or HOST:PORT off port 22), which must be
 * printable ASCII of at most SD_HOSTS_NAME_MAX characters.  0, or -1 after
 * saying why. */
static int sd_hosts_set_name(const struct sd_hosts_pos *p, struct sd_host *h, const char *name)
{
	if (name)
		h->name = sd_hosts_strdup(name);
	else if (h->port != SD_HOSTS_DEFAULT_PORT)
		h->name = sd_hosts_host_port(h->host, h->port);
	else
		h->name = sd_hosts_strdup(h->host);
	for (const char *c = h->name; *c; c++)
		if ((unsigned char)*c >= 0x7f)
			/* The offer id ssh/NAME is printable ASCII in a job's
			 * cluster and in commands (control bytes never get here). */
			return sd_hosts_why(p, "name", "\"%.*s\" has a character outside printable ASCII (offer ids are "
			                    "ASCII): give the host an ASCII name=", SD_HOSTS_NAME_MAX, h->name);
	if (strlen(h->name) > SD_HOSTS_NAME_MAX)
		/* Its offer id, "ssh/NAME", names it in a job's cluster and in
		 * commands, which hold 63 bytes. */
		return sd_hosts_why(p, "name", "\"%.40s...\" is longer than %d characters (the offer id ssh/NAME must "
		                    "fit 63): give the host a shorter name=", h->name, SD_HOSTS_NAME_MAX);
	return 0;
}

/* h->comm_host: comm_host= (NULL: the host itself), an IPv6 address with or
 * without brackets (no port here) or a host name.  0, or -1 after saying
 * why. */
static int sd_hosts_set_comm_host(const struct sd_hosts_pos *p, struct sd_host *h, const char *c)
{
	if (!c) {
		h->comm_host = sd_hosts_strdup(h->host);
		return 0;
	}
	size_t cl = strlen(c);
	const char *problem = NULL;
	if (c[0] == '[' && cl > 2 && c[cl - 1] == ']') {
		h->comm_host = sd_hosts_strndup(c + 1, cl - 2);
		if (!sd_hosts_is_ipv6(h->comm_host))
			problem = "is not an IPv6 address";
	} else {
		h->comm_host = sd_hosts_strdup(c);
		if (!sd_hosts_is_ipv6(c))
			sd_hosts_check_name(c, &problem);
	}
	if (problem)
		return sd_hosts_why(p, "comm_host", "\"%s\" %s", c, problem);
	return 0;
}

/* Parses one line of the file (blanks, a comment or a host) into *h;
 * h->host is NULL when the line holds no host.  `line` is a writable NUL-terminated
 * copy. */
static int sd_hosts_parse_line(const struct sd_hosts_pos *p, char *line, struct sd_host *h)
{
	memset(h, 0, sizeof *h);
	char *save = NULL;
	char *first = strtok_r(line, " \t", &save);
	if (!first || first[0] == '#')
		return 0;

	char *first_user = NULL, *host = NULL, *first_port = NULL;
	if (sd_hosts_parse_first(p, first, &first_user, &host, &first_port) != 0)
		return -1;

	const char *val[KEY_COUNT] = { 0 };
	if (sd_hosts_parse_keys(p, &save, val) != 0)
		return -1;

	if (!val[KEY_GPU])
		return sd_hosts_why(p, "gpu", "missing (required: the GPU label, e.g. gpu=A100-80GB)");
	if (!val[KEY_MARKET])
		return sd_hosts_why(p, "market", "missing (required: market=spot or market=on-demand)");
	if (first_user && val[KEY_USER])
		return sd_hosts_why(p, "user", "given both as \"%s@\" and as user=%s", first_user,
		                    val[KEY_USER]);
	if (first_port && val[KEY_PORT])
		return sd_hosts_why(p, "port", "given both as \":%s\" and as port=%s", first_port,
		                    val[KEY_PORT]);
	const char *user = first_user ? first_user : val[KEY_USER];
	const char *port_text = first_port ? first_port : val[KEY_PORT];

	/* The values, in the order of the keys; each failure returns through
	 * `bad` so that what was copied is freed. */
	h->line = p->line;
	h->port = SD_HOSTS_DEFAULT_PORT;
	h->gpu_count = 1;
	h->slots = 1;
	h->usd_per_hour = NAN;
	h->host = sd_hosts_strdup(host);
	if (user) {
		if (user[0] == '-') {
			sd_hosts_why(p, "user", "\"%s\" starts with '-'", user);
			goto bad;
		}
		h->user = sd_hosts_strdup(user);
	}
	if (port_text && sd_hosts_parse_int(port_text, 1, 65535, &h->port) != 0) {
		sd_hosts_why(p, "port", "\"%s\" is not a port number (1..65535)", port_text);
		goto bad;
	}
	if (sd_hosts_set_name(p, h, val[KEY_NAME]) != 0)
		goto bad;
	if (val[KEY_IDENTITY] && sd_hosts_identity(p, val[KEY_IDENTITY], &h->identity) != 0)
		goto bad;
	h->gpu = sd_hosts_strdup(val[KEY_GPU]);
	if (val[KEY_GPUS] &&
	    sd_hosts_parse_int(val[KEY_GPUS], 1, SD_HOSTS_MAX_GPUS, &h->gpu_count) != 0) {
		sd_hosts_why(p, "gpus", "\"%s\" is not a whole number in 1..%d", val[KEY_GPUS],
		             SD_HOSTS_MAX_GPUS);
		goto bad;
	}
	if (strcmp(val[KEY_MARKET], "spot") == 0) {
		h->transient = 1;
	} else if (strcmp(val[KEY_MARKET], "on-demand") == 0) {
		h->transient = 0;
	} else {
		sd_hosts_why(p, "market", "\"%s\" is neither spot nor on-demand", val[KEY_MARKET]);
		goto bad;
	}
	if (val[KEY_PRICE] && sd_hosts_parse_price(val[KEY_PRICE], &h->usd_per_hour) != 0) {
		sd_hosts_why(p, "price", "\"%s\" is not a positive number (USD per hour, e.g. 0.95)",
		             val[KEY_PRICE]);
		goto bad;
	}
	if (val[KEY_SLOTS] &&
	    sd_hosts_parse_int(val[KEY_SLOTS], 1, SD_HOSTS_MAX_SLOTS, &h->slots) != 0) {
		sd_hosts_why(p, "slots", "\"%s\" is not a whole number in 1..%d", val[KEY_SLOTS],
		             SD_HOSTS_MAX_SLOTS);
		goto bad;
	}
	h->worker = sd_hosts_strdup(val[KEY_WORKER] ? val[KEY_WORKER] : SD_HOSTS_DEFAULT_WORKER);
	if (sd_hosts_set_comm_host(p, h, val[KEY_COMM_HOST]) != 0)
		goto bad;
	return 0;
bad:
	sd_host_free(h);
	return -1;
}

/* ---- the file ---- */

void sd_hosts_free(struct sd_hosts *h)
{
	if (!h)
		return;
	for (int i = 0; i < h->n; i++)
		sd_host_free(&h->v[i]);
	free(h->v);
	free(h->path);
	memset(h, 0, sizeof *h);
}

int sd_hosts_parse(const char *text, size_t len, const char *path, struct sd_hosts *out,
                   char **why)
{
	memset(out, 0, sizeof *out);
	struct sd_hosts_pos p = { .file = path, .line = 0, .why = why };
	struct sd_hosts h = { 0 };
	char **canon = NULL;      /* sd_hosts_canonical of each v[i].host */
	int cap = 0, ncanon = 0, rc = -1;
	char *line = sd_malloc(SD_HOSTS_MAX_LINE + 1);
	size_t pos = 0;

	if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0)
		pos = 3;   /* a UTF-8 byte-order mark, as some editors write */
	while (pos < len) {
		const char *nl = memchr(text + pos, '\n', len - pos);
		size_t n = nl ? (size_t)(nl - (text + pos)) : len - pos;
		const char *s = text + pos;
		pos += n + (nl ? 1 : 0);
		p.line++;
		if (n > 0 && s[n - 1] == '\r')
			n--;   /* CRLF, as files from Windows editors end lines */
		if (n > SD_HOSTS_MAX_LINE) {
			sd_hosts_why(&p, NULL, "line longer than %d bytes", SD_HOSTS_MAX_LINE);
			goto out;
		}
		for (size_t i = 0; i < n; i++) {
			unsigned char c = (unsigned char)s[i];
			if ((c < 0x20 && c != '\t') || c == 0x7f) {
				sd_hosts_why(&p, NULL, "control character 0x%02x in column %zu", c, i + 1);
				goto out;
			}
		}
		memcpy(line, s, n);
		line[n] = '\0';

		struct sd_host one;
		if (sd_hosts_parse_line(&p, line, &one) != 0)
			goto out;
		if (!one.host)
			continue;
		if (h.n == SD_HOSTS_MAX) {
			sd_host_free(&one);
			sd_why(why, "%s: more than %d hosts", path, SD_HOSTS_MAX);
			goto out;
		}

		/* Against the lines before: one machine (host and port) once,
		 * one name once. */
		char *c = sd_hosts_canonical(one.host);
		int dup = 0;
		for (int i = 0; i < h.n && !dup; i++) {
			if (h.v[i].port == one.port && strcmp(canon[i], c) == 0) {
				char *hp = sd_hosts_host_port(one.host, one.port);
				dup = sd_hosts_why(&p, "host", "%s is already on line %d", hp, h.v[i].line);
				free(hp);
			}
		}
		for (int i = 0; i < h.n && !dup; i++) {
			if (strcmp(h.v[i].name, one.name) == 0)
				dup = sd_hosts_why(&p, "name", "\"%s\" already names the host on line %d",
				                   one.name, h.v[i].line);
		}
		if (dup) {
			free(c);
			sd_host_free(&one);
			goto out;
		}
		if (h.n == cap) {
			cap = cap ? cap * 2 : 16;
			struct sd_host *v = realloc(h.v, (size_t)cap * sizeof *v);
			char **cv = realloc(canon, (size_t)cap * sizeof *cv);
			if (!v || !cv)
				sd_oom();
			h.v = v;
			canon = cv;
		}
		canon[ncanon++] = c;
		h.v[h.n++] = one;
	}
	if (h.n == 0) {
		sd_why(why, "%s: no hosts (every line is blank or a comment)", path);
		goto out;
	}
	h.path = sd_hosts_strdup(path);
	*out = h;
	memset(&h, 0, sizeof h);
	rc = 0;
out:
	for (int i = 0; i < ncanon; i++)
		free(canon[i]);
	free(canon);
	free(line);
	sd_hosts_free(&h);
	return rc;
}

int sd_hosts_load(const char *path, struct sd_hosts *out, char **why)
{
	memset(out, 0, sizeof *out);
	char *buf;
	size_t n;
	if (sd_read_file(path, SD_HOSTS_MAX_BYTES, &buf, &n, why) < 0)
		return -1;
	int rc = sd_hosts_parse(buf, n, path, out, why);
	free(buf);
	return rc;
}
