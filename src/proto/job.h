/* src/proto/job.h - the job file: what to train and how to run it on the market
 * (JSON, documented in man/spotdeck-job.5).  The controller reads it, and
 * sends the whole job to every worker in welcome.job (protocol.h).
 */
#ifndef SD_JOB_H
#define SD_JOB_H

#include <stddef.h>
#include <stdint.h>

#include <cJSON.h>

#include "engine/train.h"

#define SD_JOB_CLUSTER_MAX 8
#define SD_JOB_FILE_MAX (1 << 20)   /* bytes; a job file is a few hundred */

struct sd_job {
	struct sd_train_config train;
	int workers;               /* initial local workers (headless --workers overrides), default 2 */
	int threads_per_worker;    /* default 1 */
	long checkpoint_every;     /* steps, default 200; 0 = only on demand */
	int keep_checkpoints;      /* K, default 3 */
	double comm_timeout_s;     /* collective/rendezvous timeout, default 5 */
	int log_every;             /* journal a step event every N steps, default 10 */
	/* market knobs for the sim provider (used later): */
	char provider[16];         /* "sim" */
	char catalog[SD_PATH_MAX]; /* "" = default */
	double hazard_scale, boot_scale;  /* 1.0 */
	double notice_scale;       /* 1.0: notice = catalog notice x this */
	uint64_t market_seed;      /* 1 */
	char cluster[SD_JOB_CLUSTER_MAX][64]; int ncluster;   /* initial offers to acquire, offer ids, optional */
};

/* Fills j with the defaults (the engine's sd_train_config_defaults for the
 * training settings); unused bytes are zero, so two jobs built the same way
 * compare equal with sd_job_equal. */
void sd_job_defaults(struct sd_job *j);

/* Parses JSON text (a leading UTF-8 byte-order mark is skipped); fields may
 * be omitted (defaults), unknown or repeated keys are errors.  Returns 0, or
 * -1 with *why, one line "FILE: FIELD: problem", e.g. "job.json: epochs:
 * expected a positive integer, got -3", "job.json: model: unknown model 'vgg'
 * (known: mlp, cnn, resnet20, resnet32)", "job.json: invalid JSON at line 3,
 * column 7".  file_for_errors may be NULL ("job").  j is written only on
 * success. */
int sd_job_parse(struct sd_job *j, const char *text, size_t len, const char *file_for_errors, char **why);
/* Reads and parses the file at path (at most SD_JOB_FILE_MAX bytes); errors
 * name path. */
int sd_job_load(struct sd_job *j, const char *path, char **why);

/* Serialises the whole job as a JSON object (caller frees with cJSON_Delete;
 * aborts via sd_oom on OOM).  sd_job_from_json parses it back with the same
 * validation; the round trip is exact, also through cJSON_Print and a parse:
 * the float settings are written as their shortest decimal form, and a
 * double that cJSON would print inexactly is stored as a raw JSON number of
 * 17 significant digits. */
cJSON *sd_job_to_json(const struct sd_job *j);
int sd_job_from_json(struct sd_job *j, const cJSON *obj, const char *file_for_errors, char **why);

/* 1 if a and b hold the same settings. */
int sd_job_equal(const struct sd_job *a, const struct sd_job *b);

#endif
