/* src/proto/job.h - the job file: what to train and how to run it on the market
 * (JSON, documented in man/spotdeck-job.5).  The controller reads it, and
 * sends the whole job to every worker in welcome.job (protocol.h).
 */
#ifndef SD_PROTO_JOB_H
#define SD_PROTO_JOB_H

#include <stddef.h>
#include <stdint.h>

#include <cJSON.h>

#include "engine/train.h"

#define SD_JOB_CLUSTER_MAX 8
#define SD_JOB_FILE_MAX (1 << 20)   /* bytes; a job file is a few hundred */

struct sd_job {
	struct sd_train_config train;
	int workers;               /* initial local workers (headless --workers overrides), default 2 */
	int min_workers;           /* a generation trains only with at least this
	                            * many ready workers; fewer and the run waits
	                            * for workers (torchrun's --nnodes MIN), default 1 */
	int threads_per_worker;    /* default 1 */
	long checkpoint_every;     /* steps, default 200; 0 = only on demand */
	int keep_checkpoints;      /* K, default 3 */
	double comm_timeout_s;     /* collective/rendezvous timeout, default 5 */
	int log_every;             /* journal a step event every N steps, default 10 */
	int bucket_kib;            /* gradient bucket for the all-reduce that overlaps
	                            * backward (engine/grad-sync.h), KiB of float32
	                            * gradients, default 1024; 0 = one all-reduce of
	                            * all gradients after backward */
	int pin_workers;           /* 1 (default): workers the controller starts on
	                            * its own host each keep to CPUs of their own
	                            * when they fit; 0: the kernel places them */
	char notice[8];            /* the cloud preemption notice workers watch:
	                            * "none" (default), "auto", "gce", "aws", "azure"
	                            * (src/worker/notice-watch.h; a worker's
	                            * --notice overrides it) */
	/* The job file's "provider" object (older files: the same keys at the
	 * top level, "provider" a bare name; both are read, only the object is
	 * written).  The typed keys are the sim provider's market knobs: */
	char provider[16];         /* "name": 1 to 15 bytes of [a-z0-9-], default "sim";
	                            * only its shape is checked here, the provider
	                            * registry (a layer above) checks it is known */
	char catalog[SD_PATH_MAX]; /* "" = default */
	double hazard_scale, boot_scale;  /* 1.0 */
	double notice_scale;       /* 1.0: notice = catalog notice x this */
	uint64_t market_seed;      /* 1 */
	/* Every other key of the provider object, kept for the provider itself:
	 * one compact JSON object text (cJSON_PrintUnformatted, keys in the
	 * file's order), "" when there are none.  Not checked here: the provider
	 * named checks them when it starts (an unknown key is its error).
	 * sd_job_to_json merges them back into the provider object, after the
	 * typed keys, so a key here must not be "name" or a typed key. */
	char provider_settings[2048];
	char cluster[SD_JOB_CLUSTER_MAX][64]; int ncluster;   /* initial offers to acquire, offer ids, optional */
	/* The "autopilot" object (spotdeck-job(5)) as compact JSON text, "" for
	 * none.  Only its shape (an object) is checked here: the objective's
	 * keys need the market catalog, so the controller parses it with
	 * sd_autopilot_objective_parse when the run starts, and its errors
	 * name the field ("job.json: autopilot.max_servers: ..."). */
	char autopilot[2048];
};

/* Fills j with the defaults (the engine's sd_train_config_defaults for the
 * training settings); unused bytes are zero, so two jobs built the same way
 * compare equal with sd_job_equal. */
void sd_job_defaults(struct sd_job *j);

/* Parses JSON text (a leading UTF-8 byte-order mark is skipped); fields may
 * be omitted (defaults), unknown or repeated keys are errors (in the
 * provider object only the typed keys are checked; see struct sd_job), and
 * so is a provider key given both at the top level and in the provider
 * object.  Returns 0, or
 * -1 with *why, one line "FILE: FIELD: problem", e.g. "job.json: epochs:
 * expected a positive integer, got -3", "job.json: model: unknown model 'vgg'
 * (known: mlp, cnn, resnet20, resnet32)", "job.json: invalid JSON at line 3,
 * column 7".  file_for_errors may be NULL ("job").  j is written only on
 * success. */
int sd_job_parse(struct sd_job *j, const char *text, size_t len, const char *file_for_errors, char **why);
/* Reads and parses the file at path (at most SD_JOB_FILE_MAX bytes); errors
 * name path.  A relative ONNX model path and a relative data_dir are
 * relative to the file's directory and made absolute (realpath of the
 * directory, then the path as written). */
int sd_job_load(struct sd_job *j, const char *path, char **why);

/* Serialises the whole job as a JSON object (caller frees with cJSON_Delete;
 * aborts via sd_oom on OOM).  sd_job_from_json parses it back with the same
 * validation; the round trip is exact, also through cJSON_Print and a parse:
 * the float settings are written as their shortest decimal form, and a
 * double that cJSON would print inexactly is stored as a raw JSON number of
 * 17 significant digits (so are such numbers among the provider's own
 * settings).  Only the provider object form is written: "provider":
 * {"name", catalog, hazard_scale, boot_scale, notice_scale, market_seed,
 * then the keys of provider_settings}. */
cJSON *sd_job_to_json(const struct sd_job *j);
int sd_job_from_json(struct sd_job *j, const cJSON *obj, const char *file_for_errors, char **why);

/* The provider's own settings (j->provider_settings) parsed: a new object
 * the caller deletes with cJSON_Delete, an empty object when there are none;
 * NULL if the text is not a JSON object (only a program that wrote the field
 * itself can make it so). */
cJSON *sd_job_provider_settings(const struct sd_job *j);
/* 1 if a and b hold the same settings (provider_settings compared as text). */
int sd_job_equal(const struct sd_job *a, const struct sd_job *b);

#endif
