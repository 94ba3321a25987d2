/* src/app/doctor-internal.h - what doctor.c (the command, gce) and
 * doctor-aws.c share: the line format, the job file's provider object and
 * its settings' errors. */
#ifndef SD_APP_DOCTOR_INTERNAL_H
#define SD_APP_DOCTOR_INTERNAL_H

#include <cJSON.h>

#include "src/provider/http/http.h"

/* Prints "LEVEL CHECK: ..." (LEVEL ok, warn or FAIL) to stdout; a FAIL
 * sets *FAILED. */
void sd_doctor_say(int *failed, const char *level, const char *check, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Cuts S (NUL-terminated) at anything that looks like a credential a
 * server echoed back (a bearer token, a JWT assertion, a signature) and at
 * its first line break. */
void sd_doctor_scrub(char *s);

/* The HTTP policy of doctor's requests: 3 attempts of at most 15 s each,
 * so that a server that never answers costs under a minute per check. */
extern const struct sd_http_policy sd_doctor_policy;

/* FILE's "provider" object (owned by *JSON, which the caller deletes), or
 * NULL after a one-line error on stderr. */
const cJSON *sd_doctor_job(const char *file, cJSON **json);

/* -1 after a line on stderr per key of P not in KEYS (NULL-terminated). */
int sd_doctor_known_keys(const cJSON *p, const char *const *keys, const char *provider, const char *file);

/* P's string KEY (malloc'd), DFLT's copy when absent (NULL for none); a
 * key that is not a non-empty string prints an error and sets *BAD. */
char *sd_doctor_opt_str(const cJSON *p, const char *key, const char *dflt, const char *file, int *bad);

/* The aws checks (doctor-aws.c): doctor.h's exit status. */
int sd_doctor_aws(const cJSON *p, const char *file);

#endif
