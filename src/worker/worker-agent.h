/* src/worker/worker-agent.h - spotdeck-worker's agent mode: a training process that
 * takes its job and its place in each generation from the controller. */
#ifndef SD_WORKER_WORKER_AGENT_H
#define SD_WORKER_WORKER_AGENT_H

struct sd_agent_opts {
	const char *host;        /* controller address, or a Unix socket's path */
	const char *port;        /* controller TCP port; NULL: host is a Unix
	                          * socket's path (--connect unix:PATH) */
	const char *token;       /* shared secret, sent in the hello */
	const char *server_id;   /* this server's id in the cluster (e.g. "s3") */
	int threads;             /* 0 = the job's threads_per_worker */
	int cpu_slot;            /* >= 0: keep to the CPUs [slot x threads, (slot + 1)
	                          * x threads) of those this process may use, if the
	                          * job's pin_workers is 1 and they exist; -1: none */
	double pace;             /* (0, 1]: run at this fraction of our own speed, to
	                          * emulate a slower GPU (1 = full speed) */
	const char *backend;     /* "auto", "cpu", "cuda" or NULL (engine/backend.h) */
	int device;              /* CUDA device index, -1 = not set */
	const char *notice;      /* --notice: "auto", "gce", "aws", "azure", "none";
	                          * NULL = the job's "notice" (notice-watch.h) */
};

/* Connects, trains until the controller says stop (exit status 0), a notice
 * or SIGTERM makes it leave at a step boundary (0), or a fatal error (1, with
 * one line on stderr).  Blocking; the worker has no event loop. */
int sd_worker_agent_run(const struct sd_agent_opts *o);

#endif
