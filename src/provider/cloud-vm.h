/* src/provider/cloud-vm.h - what the cloud providers (gce.c, aws.c) share
 * around their VMs: reading their job settings, journaling each HTTP
 * attempt, and the run's label that marks every VM of a run.  No cloud
 * API here. */
#ifndef SD_PROVIDER_CLOUD_VM_H
#define SD_PROVIDER_CLOUD_VM_H

#include <cJSON.h>

#include "src/provider/http.h"
#include "src/provider/provider.h"

/* provider.KEY of settings S, if present, must be a non-empty string of at
 * most 1000 bytes: 0, or -1 with WHY "FILE: provider.KEY: expected ...". */
int sd_setting_check_str(const cJSON *s, const char *key, const char *file, char **why);
/* The same for a number from LO to HI (INTEGER: a whole one). */
int sd_setting_check_num(const cJSON *s, const char *key, double lo, double hi, int integer, const char *file,
			 char **why);
/* provider.KEY's string, or DFLT, copied (NULL when both are absent). */
char *sd_setting_str(const cJSON *s, const char *key, const char *dflt);
/* provider.KEY's number, or DFLT. */
double sd_setting_num(const cJSON *s, const char *key, double dflt);
/* A copy of VAL (NULL for NULL); aborts when memory runs out. */
char *sd_strdup0(const char *val);

/* One HTTP attempt as a cloud_call event of FLEET's journal: provider,
 * call (the request's label), method, url (already redacted by http.h),
 * attempt, status, error, elapsed_s, retry_in_s.  Never a header or body. */
void sd_cloud_journal_attempt(struct sd_fleet *fleet, const char *provider, const struct sd_http_attempt *a);

/* The run's label: 16 random hex digits kept in RUN_DIR/FILE_NAME
 * ("gce-label"), made by the first start of the run and read by every
 * --resume, so that a resumed run knows the VMs an earlier controller of it
 * left.  Without a run directory it is random and *NO_DIR is set (nothing
 * may then be taken for an orphan).  0, or -1 with WHY (a file that is not
 * a label, one that cannot be written, no random bytes). */
int sd_cloud_run_label(const char *run_dir, const char *file_name, char tag[17], int *no_dir, char **why);

/* 1 when URL's host ("http://127.0.0.1:PORT/...") is a loopback address or
 * localhost: the API of a fake cloud on this machine. */
int sd_url_is_loopback(const char *url);

#endif
