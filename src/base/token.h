/* src/base/token.h - the secret a run shares with its workers: made at
 * random, kept in a 0600 file of the run directory, read by each worker
 * from its own copy, and compared in constant time so that a peer cannot
 * learn it a byte at a time from how fast a wrong one is refused. */
#ifndef SD_BASE_TOKEN_H
#define SD_BASE_TOKEN_H

/* Constant-time comparison of two NUL-terminated tokens (time depends only on
 * the length of `expected`); returns 1 if equal. */
int sd_token_equal(const char *expected, const char *given);
#define SD_TOKEN_MIN 16
#define SD_TOKEN_MAX 256
/* Reads a token file: first line, trailing whitespace stripped, must be
 * SD_TOKEN_MIN..SD_TOKEN_MAX printable non-space ASCII chars.  Returns 0 and a
 * malloc'd *token, or -1 with *why naming the file. */
int sd_token_read_file(const char *path, char **token, char **why);
/* Writes a fresh random token (32 hex chars from getrandom(), /dev/urandom
 * where that is missing) and a newline to path with mode 0600, atomically
 * (a temporary file renamed over path); returns 0 and the malloc'd *token,
 * or -1 with *why naming the file. */
int sd_token_create_file(const char *path, char **token, char **why);

#endif
