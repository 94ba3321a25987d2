/* tests/test-parity.c - gradients averaged over N workers (each B/N samples
 * of the same global batch, all-reduced with Gloo between N processes) equal
 * the single-process gradient on the same B samples within 1e-5 relative:
 *   norm-wise   ||a - b|| <= 1e-5 ||a||, and
 *   per element |a - b| <= 1e-5 * (max(|a|, |b|) + rms(a)).
 * The rms term is there because float32 sums taken in another order differ
 * by about 1e-7 of the summands' size, not of the result's: an element that
 * nearly cancels to zero has no meaningful relative error of its own.
 * Model cnn (no batch-norm, so per-worker batch statistics cannot differ). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <math.h>

#include "engine/blas.h"
#include "engine/comm.h"
#include "engine/engine.h"

void openblas_set_num_threads(int num_threads);

#define B 64

static struct sd_trainer *make_trainer(void)
{
	struct sd_train_config cfg;
	sd_train_config_defaults(&cfg);
	cfg.global_batch = B;
	char *why = NULL;
	struct sd_trainer *t;
	if (sd_trainer_create(&t, &cfg, &why) < 0) {
		fprintf(stderr, "FAIL: %s\n", why);
		exit(1);
	}
	return t;
}

static int worker(int rank, int world, const char *dir, const char *out)
{
	struct sd_trainer *t = make_trainer();
	struct sd_dir_store st;
	char *why = NULL;
	if (sd_dir_store_init(&st, dir, &why) < 0)
		return fprintf(stderr, "%s\n", why), 1;
	struct sd_comm *c;
	if (sd_comm_create(&c, SD_COMM_GLOO, rank, world, world, &sd_dir_store_ops, &st, 10000, &why) < 0)
		return fprintf(stderr, "rank %d: %s\n", rank, why), 1;
	/* Step 5 of the run, slices as the controller would cut them. */
	int off = B * rank / world, cnt = B * (rank + 1) / world - off;
	if (sd_trainer_local_grad(t, 5, off, cnt, NULL, NULL, &why) < 0)
		return fprintf(stderr, "%s\n", why), 1;
	size_t n = sd_model_param_count(t->model);
	if (sd_comm_allreduce_sum(c, sd_model_grads(t->model), n, &why) < 0)
		return fprintf(stderr, "rank %d: %s\n", rank, why), 1;
	if (rank == 0) {
		FILE *f = fopen(out, "wb");
		if (!f || fwrite(sd_model_grads(t->model), sizeof(float), n, f) != n)
			return 1;
		fclose(f);
	}
	sd_comm_destroy(c);
	sd_dir_store_fini(&st);
	sd_trainer_destroy(t);
	return 0;
}

int main(int argc, char **argv)
{
	/* The same OpenBLAS kernel as the worker runs (engine/blas.h), so the
	 * results checked here are those training gets. */
	sd_blas_select_kernel(argv);
	(void)argc;
	openblas_set_num_threads(1);
	/* Workers are forked before this process runs any OpenMP or OpenBLAS
	 * code: a thread pool does not survive fork() (libgomp deadlocks). */
	char dirs[2][32];
	int failures = 0;
	int worlds[] = { 2, 4 };
	int bad_world[2] = { 0, 0 };
	for (int wi = 0; wi < 2; wi++) {
		int world = worlds[wi];
		snprintf(dirs[wi], sizeof dirs[wi], "/tmp/spotdeck-parity-XXXXXX");
		if (!mkdtemp(dirs[wi]))
			return 1;
		char out[64];
		snprintf(out, sizeof out, "%s/grads", dirs[wi]);
		pid_t pids[8];
		for (int r = 0; r < world; r++) {
			pids[r] = fork();
			if (pids[r] == 0)
				_exit(worker(r, world, dirs[wi], out));
		}
		for (int r = 0; r < world; r++) {
			int st;
			waitpid(pids[r], &st, 0);
			bad_world[wi] |= !WIFEXITED(st) || WEXITSTATUS(st);
		}
	}
	struct sd_trainer *ref = make_trainer();
	char *why = NULL;
	if (sd_trainer_local_grad(ref, 5, 0, B, NULL, NULL, &why) < 0) {
		fprintf(stderr, "FAIL: %s\n", why);
		return 1;
	}
	size_t n = sd_model_param_count(ref->model);
	const float *g = sd_model_grads(ref->model);
	for (int wi = 0; wi < 2; wi++) {
		int world = worlds[wi];
		char *dir = dirs[wi];
		char out[64];
		snprintf(out, sizeof out, "%s/grads", dir);
		int bad = bad_world[wi];
		float *h = malloc(n * sizeof(float));
		FILE *f = fopen(out, "rb");
		if (bad || !f || fread(h, sizeof(float), n, f) != n) {
			printf("FAIL: world %d: a worker failed\n", world);
			failures++;
			free(h);
			if (f)
				fclose(f);
			continue;
		}
		fclose(f);
		double worst = 0, sq = 0, dsq = 0;
		size_t at = 0, over = 0;
		for (size_t i = 0; i < n; i++) {
			sq += (double)g[i] * g[i];
			dsq += ((double)g[i] - h[i]) * ((double)g[i] - h[i]);
		}
		double rms = sqrt(sq / n), normrel = sqrt(dsq) / sqrt(sq);
		for (size_t i = 0; i < n; i++) {
			double a = g[i], b = h[i], d = fabs(a - b);
			double tol = 1e-5 * (fmax(fabs(a), fabs(b)) + rms);
			if (d > tol)
				over++;
			double rel = d / (fmax(fabs(a), fabs(b)) + 1e-12);
			if (d > 1e-8 && rel > worst) {
				worst = rel;
				at = i;
			}
		}
		int bad_norm = normrel > 1e-5;
		printf("%s: world %d: %zu gradients, norm-wise relative difference %.3g, worst element %.3g "
		       "(at %zu, |g| %.3g vs rms %.3g), %zu over tolerance\n",
		       over || bad_norm ? "FAIL" : "ok", world, n, normrel, worst, at, fabs(g[at]), rms, over);
		failures += over > 0 || bad_norm;
		free(h);
		char cmd[64];
		snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", dir);
	}
	sd_trainer_destroy(ref);
	return failures ? 1 : 0;
}
