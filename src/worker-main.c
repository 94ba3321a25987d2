/* src/worker-main.c - spotdeck-worker: the training process on each server.
 * Its main only parses the options and picks the mode: the agent that
 * trains under a controller (--connect, src/worker/worker-agent.h), or a
 * run of its own (--standalone, --list-devices: src/worker/standalone.h,
 * which says what they print).  Usage errors exit 2. */
#include "config.h"

#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "engine/onnx.h"
#include "src/proto/protocol.h"
#include "src/base/token.h"
#include "src/worker/notice-watch.h"
#include "src/worker/standalone.h"
#include "src/worker/worker-options.h"
#include "src/worker/worker-agent.h"

/* OpenBLAS' own thread-count setter; declared by its cblas.h in newer
 * versions, declared here for the ones that do not. */
void openblas_set_num_threads(int num_threads);

static int die(const char *msg)
{
	fprintf(stderr, "spotdeck-worker: %s\n", msg);
	return 1;
}

static int run_agent(struct sd_worker_opts *o)
{
	char *why = NULL, *token = NULL;
	if (o->token_file[0]) {
		if (sd_token_read_file(o->token_file, &token, &why) < 0) {
			int rc = die(why);
			free(why);
			return rc;
		}
	} else if (getenv("SPOTDECK_TOKEN")) {
		token = strdup(getenv("SPOTDECK_TOKEN"));
	} else {
		return die("agent mode needs --token-file FILE or SPOTDECK_TOKEN");
	}
	if (!o->server_id[0] && gethostname(o->server_id, sizeof o->server_id - 1) < 0)
		strcpy(o->server_id, "worker");
	const char *host = o->connect, *port = NULL;
	if (!strncmp(o->connect, "unix:", 5)) {
		host = o->connect + 5;
	} else {
		char *colon = strrchr(o->connect, ':');
		*colon = 0;
		port = colon + 1;
	}
	struct sd_agent_opts ao = {
		.host = host,
		.port = port,
		.token = token,
		.server_id = o->server_id,
		.threads = o->threads,
		.pace = o->pace > 0 ? o->pace : 1,
		.backend = o->cfg.backend,
		.device = o->cfg.device,
		.notice = o->notice[0] ? o->notice : NULL,
		.cpu_slot = o->cpu_slot,
	};
	int rc = sd_worker_agent_run(&ao);
	free(token);
	return rc;
}

int main(int argc, char **argv)
{
	sd_blas_select_kernel(argv);
	struct sd_worker_opts o;
	if (sd_worker_parse_options(argc, argv, &o) < 0)
		return 2;
	if (o.list_devices)
		return sd_worker_list_devices();
	if (o.onnx_ops) {
		/* The loader's own table (engine/onnx.c), so this never lags it. */
		int n;
		const struct sd_onnx_op *t = sd_onnx_ops(&n);
		for (int i = 0; i < n; i++)
			printf("%-20s %s\n", t[i].op, t[i].lowering);
		return 0;
	}
	if (o.connect[0] && o.standalone) {
		fprintf(stderr, "spotdeck-worker: --standalone and --connect exclude each other\n");
		return 2;
	}
	if (o.connect[0])
		return run_agent(&o);
	if (!o.standalone) {
		fprintf(stderr, "spotdeck-worker: nothing to do: pass --standalone or --connect (see --help)\n");
		return 2;
	}
	if (!o.threads)
		o.threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (o.threads < 1)
		o.threads = 1;
	openblas_set_num_threads(o.threads);
	omp_set_num_threads(o.threads);
	struct sd_standalone_opts so = {
		.cfg = &o.cfg,
		.threads = o.threads,
		.log_every = o.log_every,
		.max_steps = o.max_steps,
		.checkpoint_every = o.checkpoint_every,
		.checkpoint_dir = o.checkpoint_dir,
		.resume = o.resume,
	};
	return sd_standalone_run(&so);
}
