/* src/provider/http/secret-file.h - what the cloud providers' credential code
 * shares: reading a file that holds a secret (a GCE service-account key,
 * ~/.aws/credentials) and the one-line error it reports.
 *
 * A secret file is opened once and checked with fstat on that descriptor,
 * so the mode checked is the mode of the file read (no window to swap the
 * file between check and read).  It is refused, with the file named and
 * the fix, when its group or others may read or write it, as OpenSSH
 * refuses such a private key ("UNPROTECTED PRIVATE KEY FILE"): a secret
 * others may read is no longer a secret.  st_size is not trusted: at most
 * MAX bytes are read, one more to tell a larger file.  Every buffer that held the file's bytes is
 * wiped with OPENSSL_cleanse before it is freed, on every path. */
#ifndef SD_PROVIDER_HTTP_SECRET_FILE_H
#define SD_PROVIDER_HTTP_SECRET_FILE_H

#include <stddef.h>

/* Formats the one-line message into ERR (ERRLEN bytes, when ERR is not
 * NULL and ERRLEN > 0) and returns -1, so that `return sd_errf(...)` ends
 * a failing call. */
int sd_errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* "2026-12-03T06:00:00Z" or with fractional seconds "...:00.25Z": UTC in
 * RFC 3339's form with "Z", as gcloud's token_expiry and IMDS's Expiration
 * write it, as seconds since the epoch; -1 for anything else (another
 * offset, a space for the T, a date or time out of range). */
long long sd_utc_time_parse(const char *s);

/* Reads the secret file PATH, at most MAX bytes, into *BUF (malloc'd,
 * NUL-terminated; *LEN bytes before the NUL).  The caller owns *BUF and
 * must OPENSSL_cleanse it before free.
 *
 * HOLDS completes the mode error "PATH: HOLDS readable by others (mode
 * 0644); chmod 600 PATH" (e.g. "key file is", "holds AWS keys and is");
 * KIND completes the size error "PATH: larger than N KiB, not a KIND".
 *
 * Returns 0; 1 when PATH does not exist (ERR then says "PATH: cannot open:
 * No such file or directory", for a caller to whom that is an error); -1
 * with ERR when it cannot be opened, read or stat'ed, is not a regular
 * file, is open to others or is larger than MAX.  *BUF is NULL unless 0
 * is returned. */
int sd_secret_file_read(const char *path, size_t max, const char *holds, const char *kind, char **buf,
                        size_t *len, char *err, size_t errlen);

/* PATH with a leading "~/" made $HOME's (PATH is freed and a malloc'd
 * copy returned); PATH itself when it has none, HOME is unset, or memory
 * runs out; NULL for NULL. */
char *sd_expand_home(char *path);

/* The OpenSSH public key line ("ssh-ed25519 AAAA... COMMENT") of the key
 * pair whose private half is IDENTITY, from IDENTITY.pub, into *LINE
 * (malloc'd), after checking that IDENTITY exists and is not open to its
 * group or others (ssh itself refuses such a key).  0, or -1 with ERR:
 * "IDENTITY: No such file or directory", "IDENTITY: private key readable
 * by others (mode 0644); chmod 600 IDENTITY", "IDENTITY.pub: cannot read:
 * ...", "IDENTITY.pub: not an OpenSSH public key (ssh-ed25519 AAAA...)". */
int sd_ssh_public_key(const char *identity, char **line, char *err, size_t errlen);

#endif
