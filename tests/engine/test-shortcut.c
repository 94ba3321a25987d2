/* tests/engine/test-shortcut.c - the option-A shortcut of the channel-
 * blocked ResNets (sd_shortcut_forward, sd_shortcut_backward and
 * sd_shortcut_backward_set, engine/layers-blocked.c) against its definition
 * (layers.h), written out here element by element in the same layout, bit
 * for bit: the fast blk 8 and 16 paths move whole pixels of channels with
 * lane permutations, and must give exactly the copies, +0 paddings and
 * single float additions of the definition.
 *
 * Shapes: resnet32's two (16 -> 32 channels 32x32 -> 16x16 and 32 -> 64
 * 16x16 -> 8x8, stride 2, padding 8 and 16 channels) with n not a multiple
 * of the 3 threads, and odd ones: padding 0, 4, 12, 16, 24 (shifts by whole
 * blocks and by parts of one), strides 1, 2 and 3, input rows and columns
 * beyond the last sampled one, blk 1 (the general loops).  The data hold
 * -0 and NaNs with payloads: a copy keeps their bits, +0 + -0 is +0.
 * sd_shortcut_backward_set is given a db full of other values (it must
 * write every element). */
#include "engine/layers.h"
#include "src/base/rng.h"
#include "tests/check.h"

#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct sd_rng rng;

/* Offset of (i, ch, y, x) of an (., c, h, w) tensor in layout blk. */
static size_t at(int i, int ch, int y, int x, int c, int h, int w, int blk)
{
	return (((size_t)i * (c / blk) + ch / blk) * h * w + (size_t)y * w + x) * blk + ch % blk;
}

static float *falloc(size_t n)
{
	float *p = malloc((n ? n : 1) * sizeof(float));
	if (!p) {
		perror("malloc");
		exit(99);
	}
	return p;
}

/* Normal values, with about one in 16 a -0 and, where nan is set, one in 64
 * a NaN whose payload is its index (so a wrong source shows).  db gets no
 * NaNs: which payload a sum of two NaNs keeps depends on the order the
 * compiler gives the operands, in the definition as in the kernel. */
static void fill(float *p, size_t n, int nan_too)
{
	for (size_t k = 0; k < n; k++) {
		const uint32_t u = sd_rng_u32(&rng);
		if (nan_too && u % 64 == 0) {
			const uint32_t nan = 0x7fc00000u | (uint32_t)(k & 0x3fffff);
			memcpy(&p[k], &nan, sizeof nan);
		} else if (u % 16 == 1) {
			p[k] = -0.0f;
		} else {
			p[k] = (float)sd_rng_normal(&rng);
		}
	}
}

/* 1 when got and want have the same bits; else names the first element
 * that differs. */
static int same_bits(const char *name, const char *what, const float *got, const float *want,
                     size_t n)
{
	for (size_t k = 0; k < n; k++) {
		uint32_t g, w;
		memcpy(&g, &got[k], sizeof g);
		memcpy(&w, &want[k], sizeof w);
		if (g != w) {
			fprintf(stderr, "%s: %s[%zu] is %08x (%g), the definition gives %08x (%g)\n", name,
			        what, k, g, got[k], w, want[k]);
			return 0;
		}
	}
	return 1;
}

static void test_shortcut(int n, int c, int h, int w, int cb, int hb, int wb, int s, int blk)
{
	char name[128];
	snprintf(name, sizeof(name), "shortcut n%d %dx%dx%d -> %dx%dx%d s%d blk%d", n, cb, hb, wb, c,
	         h, w, s, blk);
	const int pad = (c - cb) / 2;
	const size_t nb = (size_t)n * cb * hb * wb, nr = (size_t)n * c * h * w;
	float *b = falloc(nb), *r = falloc(nr), *rr = falloc(nr), *dr = falloc(nr);
	float *db = falloc(nb), *rdb = falloc(nb), *dbs = falloc(nb), *rdbs = falloc(nb);
	fill(b, nb, 1);
	fill(dr, nr, 1);
	fill(db, nb, 0);
	fill(dbs, nb, 1);
	memcpy(rdb, db, nb * sizeof(float));
	memset(rdbs, 0, nb * sizeof(float));
	for (int i = 0; i < n; i++)
		for (int ch = 0; ch < c; ch++)
			for (int y = 0; y < h; y++)
				for (int x = 0; x < w; x++) {
					const int bc = ch - pad;
					rr[at(i, ch, y, x, c, h, w, blk)] =
						bc >= 0 && bc < cb ? b[at(i, bc, y * s, x * s, cb, hb, wb, blk)]
						: 0.0f;
				}
	for (int i = 0; i < n; i++)
		for (int bc = 0; bc < cb; bc++)
			for (int y = 0; y < h; y++)
				for (int x = 0; x < w; x++) {
					const size_t q = at(i, bc, y * s, x * s, cb, hb, wb, blk);
					const float g = dr[at(i, bc + pad, y, x, c, h, w, blk)];
					rdb[q] += g;
					rdbs[q] += g;
				}
	fill(r, nr, 1);
	sd_shortcut_forward(r, b, n, c, h, w, cb, hb, wb, s, blk);
	int ok = same_bits(name, "r", r, rr, nr);
	sd_shortcut_backward(db, dr, n, c, h, w, cb, hb, wb, s, blk);
	ok &= same_bits(name, "db +=", db, rdb, nb);
	sd_shortcut_backward_set(dbs, dr, n, c, h, w, cb, hb, wb, s, blk);
	ok &= same_bits(name, "db =", dbs, rdbs, nb);
	check_report(ok, "%s: r, db += and db = bit for bit", name);
	free(b), free(r), free(rr), free(dr), free(db), free(rdb), free(dbs), free(rdbs);
}

int main(void)
{
	sd_rng_seed(&rng, 40, 0);
	/* 3 threads: the tasks (sample, channel block) do not split evenly. */
	omp_set_num_threads(3);
	const int blks[] = { 16, 8 };
	for (int k = 0; k < 2; k++) {
		const int blk = blks[k];
		/* resnet32's two, above SD_LAYERS_OMP_MIN (threaded) */
		test_shortcut(5, 32, 16, 16, 16, 32, 32, 2, blk);
		test_shortcut(9, 64, 8, 8, 32, 16, 16, 2, blk);
		/* padding 0: stride 2, and the identity */
		test_shortcut(2, 16, 4, 4, 16, 8, 8, 2, blk);
		test_shortcut(3, 32, 5, 7, 32, 5, 7, 1, blk);
		/* padding 16 (whole blocks of 16), stride 1 */
		test_shortcut(2, 48, 3, 3, 16, 3, 3, 1, blk);
		/* padding 8, input (h - 1) s + 1 rows and columns */
		test_shortcut(3, 48, 3, 5, 32, 5, 9, 2, blk);
		/* padding 24, input rows and columns past the last sampled */
		test_shortcut(2, 64, 3, 3, 16, 7, 6, 2, blk);
		/* stride 3 */
		test_shortcut(1, 32, 2, 3, 16, 6, 9, 3, blk);
	}
	/* blk 8 only: padding 4 and 12, half a block */
	test_shortcut(3, 24, 4, 4, 16, 8, 8, 2, 8);
	test_shortcut(2, 40, 3, 3, 16, 6, 6, 2, 8);
	test_shortcut(2, 32, 4, 4, 8, 8, 8, 2, 8);
	/* blk 1 (NCHW): the general loops */
	test_shortcut(3, 32, 4, 4, 16, 8, 8, 2, 1);
	return check_exit("test-shortcut");
}
