/* tests/engine/test-parity.c - gradients averaged over N workers (each B/N samples
 * of the same global batch, all-reduced with Gloo between N processes) equal
 * the single-process gradient on the same B samples within 1e-5 relative:
 *   norm-wise   ||a - b|| <= 1e-5 ||a||, and
 *   per element |a - b| <= 1e-5 * (max(|a|, |b|) + rms(a)).
 * The rms term is there because float32 sums taken in another order differ
 * by about 1e-7 of the summands' size, not of the result's: an element that
 * nearly cancels to zero has no meaningful relative error of its own.
 * Model cnn (no batch-norm, so per-worker batch statistics cannot differ).
 *
 * The same through the elastic worker's overlapped all-reduce
 * (engine/grad-sync.h), at world 3 with a bucket of 256 floats (every ready
 * point cuts one: 4 collectives in backward's order) and at world 2 with the
 * default bucket: the gradients meet the same tolerance, every rank ends
 * with the same bits, and the 3 extra floats carried with the last bucket
 * arrive as the exact sums of what the ranks put there. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <math.h>

#include "engine/blas.h"
#include "engine/comm.h"
#include "engine/engine.h"
#include "engine/grad-sync.h"

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

/* The extras rank r sends with the last bucket: small integers and halves,
 * exact in float, so their sums are too. */
static void extras_of(int rank, float e[3])
{
	e[0] = (float)(rank + 1);
	e[1] = (float)(10 * rank);
	e[2] = 0.5f * (float)rank;
}

/* bucket < 0: one sd_comm_allreduce_sum of the whole gradient; else
 * sd_grad_sync with that many floats a bucket, started before backward as
 * the worker does, and every rank writes its result (out.RANK). */
static int worker(int rank, int world, long bucket, const char *dir, const char *out)
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
	size_t n = sd_model_param_count(t->model);
	struct sd_grad_sync *gs = NULL;
	float extra[3];
	extras_of(rank, extra);
	if (bucket >= 0) {
		if (sd_grad_sync_create(&gs, t->model, (size_t)bucket, &why) < 0)
			return fprintf(stderr, "rank %d: %s\n", rank, why), 1;
		sd_grad_sync_begin(gs, c);
	}
	if (sd_trainer_local_grad(t, 5, off, cnt, NULL, NULL, &why) < 0)
		return fprintf(stderr, "%s\n", why), 1;
	int rc = gs ? sd_grad_sync_finish(gs, extra, 3, &why)
	            : sd_comm_allreduce_sum(c, sd_model_grads(t->model), n, &why);
	if (rc < 0)
		return fprintf(stderr, "rank %d: %s\n", rank, why), 1;
	if (rank == 0 || gs) {
		char path[80];
		snprintf(path, sizeof path, "%s.%d", out, rank);
		FILE *f = fopen(path, "wb");
		if (!f || fwrite(sd_model_grads(t->model), sizeof(float), n, f) != n ||
		    fwrite(extra, sizeof(float), 3, f) != 3)
			return 1;
		fclose(f);
	}
	sd_grad_sync_destroy(gs);
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
	enum { NCFG = 4 };
	const int worlds[NCFG] = { 2, 4, 3, 2 };
	const long buckets[NCFG] = { -1, -1, 256, SD_GRAD_SYNC_DEFAULT_FLOATS };
	char dirs[NCFG][32];
	int failures = 0;
	int bad_world[NCFG] = { 0 };
	for (int wi = 0; wi < NCFG; wi++) {
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
				_exit(worker(r, world, buckets[wi], dirs[wi], out));
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
	for (int wi = 0; wi < NCFG; wi++) {
		int world = worlds[wi];
		char *dir = dirs[wi];
		char how[64];
		if (buckets[wi] < 0)
			snprintf(how, sizeof how, "one all-reduce");
		else
			snprintf(how, sizeof how, "buckets of %ld floats", buckets[wi]);
		char out[80];
		snprintf(out, sizeof out, "%s/grads.0", dir);
		int bad = bad_world[wi];
		float *h = malloc((n + 3) * sizeof(float));
		FILE *f = fopen(out, "rb");
		if (bad || !f || fread(h, sizeof(float), n + 3, f) != n + 3) {
			printf("FAIL: world %d, %s: a worker failed\n", world, how);
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
		printf("%s: world %d, %s: %zu gradients, norm-wise relative difference %.3g, worst element "
		       "%.3g (at %zu, |g| %.3g vs rms %.3g), %zu over tolerance\n",
		       over || bad_norm ? "FAIL" : "ok", world, how, n, normrel, worst, at, fabs(g[at]), rms,
		       over);
		failures += over > 0 || bad_norm;
		if (buckets[wi] >= 0) {
			/* Every rank's bits equal rank 0's, extras included; the
			 * extras are the exact sums. */
			float want[3] = { 0, 0, 0 }, e[3];
			size_t differ = 0;
			for (int r = 0; r < world; r++) {
				extras_of(r, e);
				for (int k = 0; k < 3; k++)
					want[k] += e[k];
				if (r == 0)
					continue;
				snprintf(out, sizeof out, "%s/grads.%d", dir, r);
				float *o = malloc((n + 3) * sizeof(float));
				f = fopen(out, "rb");
				if (!f || fread(o, sizeof(float), n + 3, f) != n + 3)
					differ += n + 3;
				else
					differ += memcmp(o, h, (n + 3) * sizeof(float)) != 0;
				if (f)
					fclose(f);
				free(o);
			}
			int exact = h[n] == want[0] && h[n + 1] == want[1] && h[n + 2] == want[2];
			printf("%s: world %d, %s: ranks 1..%d %s rank 0's bits; extras %g %g %g, expected %g %g %g\n",
			       differ || !exact ? "FAIL" : "ok", world, how, world - 1,
			       differ ? "differ from" : "equal", h[n], h[n + 1], h[n + 2], want[0], want[1],
			       want[2]);
			failures += differ > 0 || !exact;
		}
		free(h);
		char cmd[64];
		snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", dir);
	}
	sd_trainer_destroy(ref);
	return failures ? 1 : 0;
}
