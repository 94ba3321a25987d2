/* src/worker/standalone.h - spotdeck-worker's own runs without a
 * controller (spotdeck-worker(1)):
 *
 * --standalone trains in this process alone and prints JSON lines on stdout:
 *   {"type":"backend", "backend", "device", "reason", "precision",
 *    "precision_reason"}   first: where it computes, in which precision
 *   {"type":"step", "step", "epoch", "loss", "train_accuracy", "lr"}
 *    every log_every steps (0 = never)
 *   {"type":"epoch", "epoch", "train_loss", "test_loss", "test_accuracy",
 *    "images_per_sec", "seconds", "step"}
 *   {"type":"checkpoint", "path", "step"}
 *   {"type":"done", "test_accuracy", "test_loss", "images_per_sec", "steps",
 *    "seconds", "evaluations", "param_checksum", "backend", "device",
 *    "precision", ...}
 *    the done line's figures are the last epoch line's when no step came
 *    after it (one evaluation, counted in "evaluations"), else its own
 * A language model (dataset tokens) has "val_loss" (nats per token) and
 * "perplexity" (exp(val_loss)) in place of test_loss and test_accuracy, and
 * "tokens_per_sec" in place of images_per_sec, and its step lines have no
 * train_accuracy.
 * --list-devices prints {"type":"devices", "count", "devices": [{"index",
 * "name"}], "reason"} (the CUDA devices this process sees).
 * Errors go to stderr as one line "spotdeck-worker: ...". */
#ifndef SD_WORKER_STANDALONE_H
#define SD_WORKER_STANDALONE_H

#include "engine/train.h"

struct sd_standalone_opts {
	const struct sd_train_config *cfg;   /* the job's training settings (borrowed) */
	int threads;                         /* for the done line; the caller set them */
	int log_every;                       /* steps between step lines; 0: none */
	long max_steps;                      /* stop after this many steps in all; 0: the job's */
	long checkpoint_every;               /* steps between checkpoints; 0: only at the end */
	const char *checkpoint_dir;          /* "" none: DIR/ckpt-STEP.sdckpt and latest.sdckpt */
	const char *resume;                  /* "" none: a checkpoint, or a directory's latest */
};

/* Trains as above.  Returns the exit status: 0, or 1 after the error line. */
int sd_standalone_run(const struct sd_standalone_opts *o);

/* --list-devices: prints the devices line; returns 0. */
int sd_worker_list_devices(void);

#endif
