/* src/worker/worker-options.h - spotdeck-worker's command line
 * (spotdeck-worker(1)): the training settings of a standalone run, and
 * the agent's connection, each bad value one line naming the option. */
#ifndef SD_WORKER_WORKER_OPTIONS_H
#define SD_WORKER_WORKER_OPTIONS_H

#include "engine/train.h"

struct sd_worker_opts {
	struct sd_train_config cfg;
	int standalone;
	int threads;
	int log_every;
	long max_steps;          /* stop after this many steps in total (0 = run all) */
	long checkpoint_every;   /* steps between checkpoints (0 = only at the end) */
	char checkpoint_dir[SD_PATH_MAX];
	char resume[SD_PATH_MAX];
	/* agent mode */
	char connect[256];
	char token_file[SD_PATH_MAX];
	char server_id[64];
	float pace;
	char notice[8];          /* --notice, "" = the job's */
	int cpu_slot;            /* --cpu-slot, -1 = none */
	int list_devices;
	int onnx_ops;            /* --onnx-ops */
};

/* Fills o from the command line (argv[0] the program).  Returns 0, or -1
 * after a one-line error on stderr (the caller exits 2); --help and
 * --version print and exit 0 here. */
int sd_worker_parse_options(int argc, char **argv, struct sd_worker_opts *o);

#endif
