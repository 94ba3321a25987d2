/* tests/engine/test-grad-sync.c - what the overlapped gradient all-reduce
 * (engine/grad-sync.h) relies on, for every model and both convolution
 * paths:
 *   - the model's grad-ready hook: every ready_from it reports is one of the
 *     model's ready points, never grows within a pass, ends at 0, and the
 *     gradients it calls final are final: a snapshot taken in the hook of
 *     each newly final range equals, bit for bit, what the whole pass
 *     leaves there (a hook that reported a range before its node's backward
 *     had run would snapshot zeros or partial sums);
 *   - the bucket plan: buckets tile [0, param_count) from the end down,
 *     without gap or overlap, cut only at ready points, each but the last at
 *     least the bucket size, and one bucket for size 0 or a size larger
 *     than the model.
 * The collectives themselves are checked against one all-reduce and the
 * single-process gradient in tests/engine/test-parity.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/grad-sync.h"
#include "tests/check.h"

void openblas_set_num_threads(int num_threads);

struct watch {
	const float *grads;
	float *shadow;          /* snapshots of ranges as they became final */
	size_t np, last;        /* last ready_from reported (np before any) */
	const size_t *points;
	int npoints, calls, bad_point, grew;
};

static void on_ready(void *ctx, size_t ready_from)
{
	struct watch *w = ctx;
	w->calls++;
	int known = 0;
	for (int i = 0; i < w->npoints; i++)
		known |= w->points[i] == ready_from;
	w->bad_point += !known;
	if (ready_from > w->last) {
		w->grew++;
		return;
	}
	memcpy(w->shadow + ready_from, w->grads + ready_from, (w->last - ready_from) * sizeof(float));
	w->last = ready_from;
}

static void check_hook(const char *name, const char *path)
{
	struct sd_model *m;
	char *why = NULL;
	int hw = !strcmp(name, "mlp") || !strcmp(name, "cnn") ? 28 : 32, c = hw == 28 ? 1 : 3;
	int nb = 6;
	if (sd_model_create(&m, name, c, hw, hw, 10, nb, &why) < 0) {
		CHECK(0, "%s: %s", name, why);
		free(why);
		return;
	}
	sd_model_init(m, 7);
	size_t img = (size_t)c * hw * hw, np = sd_model_param_count(m);
	float *x = malloc(nb * img * sizeof(float));
	uint8_t y[6];
	struct sd_rng rng;
	sd_rng_seed(&rng, 11, 0);
	for (size_t i = 0; i < nb * img; i++)
		x[i] = sd_rng_normal(&rng);
	for (int i = 0; i < nb; i++)
		y[i] = (uint8_t)(i * 3 % 10);
	struct watch w = { .grads = sd_model_grads(m), .np = np, .last = np };
	w.shadow = calloc(np, sizeof(float));
	w.points = sd_model_grad_ready_points(m, &w.npoints);
	CHECK(w.npoints > 0 && w.points[w.npoints - 1] == 0, "%s: last ready point is not 0", name);
	for (int i = 1; i < w.npoints; i++)
		CHECK(w.points[i] < w.points[i - 1], "%s: ready points not decreasing at %d", name, i);
	/* Two passes: the hook must start afresh each time. */
	for (int pass = 0; pass < 2; pass++) {
		w.last = np;
		w.calls = 0;
		memset(w.shadow, 0xff, np * sizeof(float));
		sd_model_on_grad_ready(m, on_ready, &w);
		CHECK(sd_model_train_batch(m, x, y, nb, 1.0f / nb, NULL, NULL, &why) == 0, "%s", why);
		sd_model_on_grad_ready(m, NULL, NULL);
		size_t differ = 0;
		for (size_t i = 0; i < np; i++)
			differ += memcmp(&w.shadow[i], &w.grads[i], sizeof(float)) != 0;
		check_report(w.last == 0 && !w.bad_point && !w.grew && differ == 0,
		             "%s (%s convolutions), pass %d: %d hook calls over %d ready points, %zu "
		             "parameters; ends at %zu, %d unknown points, %d increases, %zu gradients "
		             "changed after the hook called them final",
		             name, path, pass + 1, w.calls, w.npoints, np, w.last, w.bad_point, w.grew,
		             differ);
	}
	/* Removed: no more calls. */
	int before = w.calls;
	CHECK(sd_model_train_batch(m, x, y, nb, 1.0f / nb, NULL, NULL, &why) == 0, "%s", why);
	CHECK_INT(w.calls, before);
	free(w.shadow);
	free(x);
	sd_model_destroy(m);
}

static void check_plan(const char *name)
{
	struct sd_model *m;
	char *why = NULL;
	int hw = !strcmp(name, "mlp") || !strcmp(name, "cnn") ? 28 : 32, c = hw == 28 ? 1 : 3;
	if (sd_model_create(&m, name, c, hw, hw, 10, 1, &why) < 0) {
		CHECK(0, "%s: %s", name, why);
		free(why);
		return;
	}
	size_t np = sd_model_param_count(m);
	int npt;
	const size_t *pt = sd_model_grad_ready_points(m, &npt);
	size_t caps[] = { 0, 1, 256, 65536, np, np + 1 };
	for (size_t ci = 0; ci < sizeof caps / sizeof caps[0]; ci++) {
		struct sd_grad_sync *s;
		if (sd_grad_sync_create(&s, m, caps[ci], &why) < 0) {
			CHECK(0, "%s", why);
			continue;
		}
		int nbk = sd_grad_sync_buckets(s), bad = 0;
		size_t expect_end = np, smallest = np;
		for (int k = 0; k < nbk; k++) {
			size_t b, e;
			sd_grad_sync_bucket(s, k, &b, &e);
			int at_point = 0;
			for (int i = 0; i < npt; i++)
				at_point |= pt[i] == b;
			bad += e != expect_end || b >= e || !at_point ||
			       (k < nbk - 1 && caps[ci] > 0 && e - b < caps[ci]);
			if (e - b < smallest)
				smallest = e - b;
			expect_end = b;
		}
		int single = caps[ci] == 0 || caps[ci] > np;
		/* With a 1-float bucket every ready point cuts one. */
		int want = single ? 1 : caps[ci] == 1 ? npt : 0;
		check_report(!bad && expect_end == 0 && (!want || nbk == want),
		             "%s, bucket %zu floats: %d buckets (smallest %zu floats) tile %zu "
		             "gradients; %d bad", name, caps[ci], nbk, smallest, np, bad);
		sd_grad_sync_destroy(s);
	}
	/* A bucket is full once it holds the bucket size: with the size equal
	 * to the distance from the end to the nearest ready point below it,
	 * the first bucket ends exactly there, not at the point after. */
	size_t near = 0;
	for (int i = 0; i < npt; i++)
		if (pt[i] > near && pt[i] < np)
			near = pt[i];
	struct sd_grad_sync *s;
	if (near > 0 && sd_grad_sync_create(&s, m, np - near, &why) == 0) {
		size_t b, e;
		sd_grad_sync_bucket(s, 0, &b, &e);
		check_report(b == near && e == np, "%s, bucket %zu floats: the first bucket is "
		             "[%zu, %zu), want [%zu, %zu)", name, np - near, b, e, near, np);
		sd_grad_sync_destroy(s);
	} else {
		CHECK(0, "%s: no ready point inside the model, or %s", name, why ? why : "?");
		free(why);
	}
	sd_model_destroy(m);
}

int main(void)
{
	openblas_set_num_threads(1);
	const char *models[] = { "mlp", "cnn", "resnet20", "resnet32" };
	enum sd_conv_path paths[] = { SD_CONV_AUTO, SD_CONV_IM2COL };
	for (int p = 0; p < 2; p++) {
		sd_conv2d_set_path(paths[p]);
		for (int i = 0; i < 4; i++)
			check_hook(models[i], sd_conv2d_path_name(paths[p]));
	}
	for (int i = 0; i < 4; i++)
		check_plan(models[i]);
	return check_exit("test-grad-sync");
}
