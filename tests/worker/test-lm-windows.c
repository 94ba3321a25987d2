/* tests/worker/test-lm-windows.c - the windows a language model's steps
 * train on (engine/train.h sd_train_lm_window_start): sample i of step s's
 * global batch is window (seed, epoch floor(s / S), position (s mod S) * B
 * + i) of engine/tokens.h, computed here from sd_tokens_train_start
 * directly, with x and y the file's tokens there and one after; the
 * global batch split over 1, 2 and 3 ranks the way the
 * controller splits it (contiguous slices [offset, offset + count) in rank
 * order, uneven counts), each slice built as a worker builds it
 * (sd_train_lm_batch), gives the same windows in the same order, so an
 * elastic re-split loses and repeats nothing; consecutive steps and
 * epochs take other windows; every window lies inside the file. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/tokens.h"
#include "engine/train.h"
#include "tests/check.h"
#include "tests/tmpdir.h"

#define NTOK 10007
#define T 16
#define B 12
#define SEED 7

int main(void)
{
	char dir[256];
	make_tmpdir(dir, sizeof dir, "sd-lm-windows-XXXXXX");
	uint16_t *ids = malloc(NTOK * sizeof *ids);
	for (int i = 0; i < NTOK; i++)
		ids[i] = (uint16_t)(i * 7 % 251);
	char *path = path_join(dir, "train.bin");
	write_raw(path, ids, NTOK * sizeof *ids);
	struct sd_tokens t;
	char *why = NULL;
	CHECK(sd_tokens_open(&t, path, &why) == 0, "%s", why);
	long S = (long)(sd_tokens_epoch_windows(&t, T) / B);
	CHECK_INT(S, NTOK / T / B);
	/* The controller's splits: contiguous slices in rank order. */
	static const int splits[3][4] = { { 12 }, { 5, 7 }, { 4, 1, 7 } };
	static const int ranks[3] = { 1, 2, 3 };
	long steps[] = { 0, 1, 2, S - 1, S, S + 1, 3 * S + 5 };
	uint64_t prev[B];
	for (size_t k = 0; k < sizeof steps / sizeof steps[0]; k++) {
		long s = steps[k];
		uint64_t ref[B];
		for (int i = 0; i < B; i++) {
			ref[i] = sd_tokens_train_start(&t, T, SEED, (uint64_t)(s / S),
			                               (uint64_t)((s % S) * B + i));
			CHECK(ref[i] + T < t.count, "step %ld sample %d: window at %llu past the file",
			      s, i, (unsigned long long)ref[i]);
		}
		for (int i = 0; i < B; i++)
			CHECK(sd_train_lm_window_start(&t, T, SEED, S, B, s, i) == ref[i],
			      "step %ld sample %d: window start", s, i);
		for (int sp = 0; sp < 3; sp++) {
			/* Each rank's slice as its worker builds it, in its own
			 * buffers, then put side by side in rank order. */
			uint64_t got[B];
			int32_t x[B * T], y[B * T];
			int off = 0;
			for (int r = 0; r < ranks[sp]; r++) {
				int n = splits[sp][r];
				uint64_t *st = malloc((size_t)n * sizeof *st);
				int32_t *rx = malloc((size_t)n * T * sizeof *rx);
				int32_t *ry = malloc((size_t)n * T * sizeof *ry);
				sd_train_lm_batch(&t, T, SEED, S, B, s, off, n, st, rx, ry);
				memcpy(got + off, st, (size_t)n * sizeof *st);
				memcpy(x + off * T, rx, (size_t)n * T * sizeof *rx);
				memcpy(y + off * T, ry, (size_t)n * T * sizeof *ry);
				free(st);
				free(rx);
				free(ry);
				off += n;
			}
			CHECK_INT(off, B);
			for (int i = 0; i < B; i++) {
				CHECK(got[i] == ref[i], "step %ld, %d ranks, sample %d: window %llu, "
				      "expected %llu", s, ranks[sp], i, (unsigned long long)got[i],
				      (unsigned long long)ref[i]);
				int bad = 0;
				for (int j = 0; j < T; j++)
					bad += x[i * T + j] != ids[ref[i] + j] || y[i * T + j] != ids[ref[i] + j + 1];
				CHECK(bad == 0, "step %ld, %d ranks, sample %d: %d of x, y not the file's "
				      "tokens at %llu", s, ranks[sp], i, bad, (unsigned long long)ref[i]);
			}
		}
		if (k > 0) {
			int same = 0;
			for (int i = 0; i < B; i++)
				same += ref[i] == prev[i];
			CHECK(same < B / 2, "step %ld repeats %d of step %ld's windows", s, same,
			      steps[k - 1]);
		}
		memcpy(prev, ref, sizeof prev);
	}
	sd_tokens_close(&t);
	free(path);
	free(ids);
	free(why);
	rm_tree(dir);
	return check_exit("test-lm-windows");
}
