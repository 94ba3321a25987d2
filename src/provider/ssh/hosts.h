/* src/provider/ssh/hosts.h - the hosts file of the ssh provider: the servers a
 * person already has (spot VMs launched by hand, a lab's GPU boxes), one per
 * line, each of which becomes an offer (man/spotdeck-hosts.5 is the user's
 * description of the format).
 *
 * The format follows the host lists people already write: an MPI or Horovod
 * hostfile ("HOST slots=N", one host a line, '#' comments) and ssh_config
 * (user, port, identity file).  A line is
 *
 *   [USER@]HOST[:PORT] key=value ...
 *
 * with HOST a DNS name, an IPv4 address or an IPv6 address in brackets
 * ([2001:db8::1]:2222, as ssh(1) and RFC 3986 write one with a port), and
 * the keys name, user, port, identity, gpu, gpus, market, price, slots,
 * worker, comm_host.  gpu= and market= are required.  A word that starts
 * with '#' begins a comment that runs to the end of the line; blank lines
 * are skipped.  Words are split at blanks (space, tab) and at the first '=',
 * nothing else: there is no quoting, so no value can hold a blank.
 *
 * Limits: the file at most SD_HOSTS_MAX_BYTES, a line at most
 * SD_HOSTS_MAX_LINE bytes (its newline not counted), at most SD_HOSTS_MAX
 * hosts.  Numbers are read in the "C" locale whatever LC_NUMERIC the
 * program chose (the cockpit calls setlocale), so a price is 0.95, never
 * 0,95. */
#ifndef SD_PROVIDER_SSH_HOSTS_H
#define SD_PROVIDER_SSH_HOSTS_H

#include <stddef.h>

#define SD_HOSTS_MAX 1024
#define SD_HOSTS_MAX_LINE 4096
#define SD_HOSTS_MAX_BYTES (1u << 20)
#define SD_HOSTS_MAX_SLOTS 64
#define SD_HOSTS_MAX_GPUS 1024

/* One host.  Every string is owned by the struct sd_hosts it sits in. */
struct sd_host {
	char *name;       /* unique label shown in the cockpit and journal; default: host (with :port if not 22) */
	char *host;       /* DNS name or IP address ssh connects to (an IPv6 address without brackets) */
	char *user;       /* NULL: ssh's default (its config / the local user) */
	int port;         /* 1..65535, default 22 */
	char *identity;   /* private key file, "~/" expanded with $HOME; NULL: ssh's default */
	char *gpu;        /* GPU label, e.g. "A100-80GB", "cpu" (required) */
	int gpu_count;    /* >= 1 (at most SD_HOSTS_MAX_GPUS), default 1 */
	int transient;    /* 1: spot/preemptible, 0: on-demand (required: market=spot|on-demand) */
	double usd_per_hour; /* > 0, or NAN when the file does not say (unknown, never 0) */
	int slots;        /* workers this host runs at once, 1..64, default 1 */
	char *worker;     /* spotdeck-worker's path on the host; default "spotdeck-worker" (the remote PATH) */
	char *comm_host;  /* address the other hosts reach this one at for collectives; default: host */
	int line;         /* line in the file, for messages (the first line is 1) */
};

/* A loaded hosts file: v[0..n-1] in the order of the file. */
struct sd_hosts {
	char *path;       /* as given */
	int n;
	struct sd_host *v;
};

/* Reads the hosts file at `path` (at most SD_HOSTS_MAX_BYTES) into *out.
 * Returns 0, or -1 with *why (caller frees) one line
 *   "FILE:LINE: FIELD: problem"   for a line, e.g.
 *       hosts:3: port: "0" is not a port number (1..65535)
 *   "FILE:LINE: problem"          for a line as a whole (too long, a
 *                                 control character in it)
 *   "FILE: problem"               for the file as a whole: cannot read,
 *                                 larger than 1 MiB, no host in it, more
 *                                 than SD_HOSTS_MAX hosts.
 * Refused: a missing gpu= or market=, an unknown key, a word after the host
 * without '=', a key given twice, an empty value, a user or port given both
 * in the first word and as a key, a bad port, price (not a positive finite
 * number), gpus or slots, a market other than spot and on-demand, a host
 * (host+port) or a name that an earlier line already has (the message names
 * that line), an identity file this process cannot read (access(R_OK) now,
 * with the file and strerror; "~/" needs $HOME), a host or user that starts
 * with '-' (ssh would take it for an option).
 * On failure *out is left empty (n = 0, no pointers): nothing is allocated,
 * and sd_hosts_free on it is harmless.  Out of memory aborts (sd_oom). */
int sd_hosts_load(const char *path, struct sd_hosts *out, char **why);

/* Parses the text of a hosts file (`len` bytes, need not be NUL-terminated),
 * with `path` as the file name in messages and in out->path; what
 * sd_hosts_load does once it has read the file, with the same errors (but
 * for "cannot read" and "larger than"), so tests and the fuzz target need no
 * files. */
int sd_hosts_parse(const char *text, size_t len, const char *path, struct sd_hosts *out,
                   char **why);

/* Frees what *h owns and empties it; h may be NULL. */
void sd_hosts_free(struct sd_hosts *h);

#endif
