/* tests/engine/test-npy.c - the npy dataset (engine/npy.c, engine/data.c): .npy
 * headers of versions 1.0, 2.0 and 3.0, every image and label dtype, both
 * layouts and (n, h, w), normalisation, the exact floats a gather gives,
 * crop4+flip augmentation (deterministic, independent of how a batch is
 * split, moving pixels as data.h says), and malformed files, each refused
 * with its one line naming the file.  Fixtures are written at run time into
 * a scratch directory. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/data.h"
#include "engine/npy.h"
#include "engine/train.h"
#include "tests/check.h"
#include "tests/engine/npy-write.h"
#include "tests/tmpdir.h"

static char dir[512];

/* Writes DIR/NAME as a .npy file. */
static void put(const char *name, int version, const char *descr, const char *shape,
                const void *data, size_t len)
{
	size_t n;
	unsigned char *b = npy_build(version, descr, shape, data, len, &n);
	char *p = path_join(dir, name);
	write_raw(p, b, n);
	free(p);
	free(b);
}

static void put_raw(const char *name, const void *b, size_t n)
{
	char *p = path_join(dir, name);
	write_raw(p, b, n);
	free(p);
}

/* Image (n, c, h, w) element values in 0..255, all distinct within a sample
 * for c * h * w <= 256, different per sample. */
static unsigned pixel(int k, int ch, int y, int x, int c, int h, int w)
{
	(void)c;
	return (unsigned)((k * 37 + (ch * h + y) * w + x) % 256);
}

static struct sd_data_options opts(enum sd_layout layout, int nc, const float *mean,
                                   const float *std)
{
	struct sd_data_options o;
	memset(&o, 0, sizeof o);
	o.layout = layout;
	o.norm_channels = nc;
	for (int i = 0; i < nc; i++) {
		o.mean[i] = mean[i];
		o.std[i] = std[i];
	}
	return o;
}

/* Writes x for split (train/test) with N samples of (C, H, W) in the given
 * layout and dtype ("|u1", "<f2", "<f4"; float values are pixel / 4 so
 * they are exact in half precision), or (n, h, w) when hw3. */
static void put_x(const char *split, int version, const char *descr, enum sd_layout layout,
                  int hw3, int n, int c, int h, int w)
{
	size_t count = (size_t)n * c * h * w, item = descr[2] == '1' ? 1 : descr[2] == '2' ? 2 : 4;
	unsigned char *data = malloc(count * item);
	for (int k = 0; k < n; k++)
		for (int ch = 0; ch < c; ch++)
			for (int y = 0; y < h; y++)
				for (int x = 0; x < w; x++) {
					size_t e = layout == SD_LAYOUT_NCHW
					           ? (((size_t)k * c + ch) * h + y) * w + x
					           : (((size_t)k * h + y) * w + x) * c + ch;
					unsigned v = pixel(k, ch, y, x, c, h, w);
					if (item == 1) {
						data[e] = (unsigned char)v;
					} else if (item == 4) {
						float f = (float)v / 4.0f;
						memcpy(data + 4 * e, &f, 4);
					} else {
						/* v / 4 as binary16: exact for 0..255 / 4. */
						float f = (float)v / 4.0f;
						uint16_t half = 0;
						if (f != 0) {
							int ex;
							float m = frexpf(f, &ex);   /* f = m * 2^ex, m in [0.5, 1) */
							uint16_t mant = (uint16_t)((m * 2 - 1) * 1024);
							half = (uint16_t)((ex - 1 + 15) << 10 | mant);
						}
						data[2 * e] = (unsigned char)(half & 0xff);
						data[2 * e + 1] = (unsigned char)(half >> 8);
					}
				}
	char shape[64], name[32];
	if (hw3)
		snprintf(shape, sizeof shape, "%d, %d, %d", n, h, w);
	else if (layout == SD_LAYOUT_NCHW)
		snprintf(shape, sizeof shape, "%d, %d, %d, %d", n, c, h, w);
	else
		snprintf(shape, sizeof shape, "%d, %d, %d, %d", n, h, w, c);
	snprintf(name, sizeof name, "%s_x.npy", split);
	put(name, version, descr, shape, data, count * item);
	free(data);
}

/* Labels: sample k gets k % mod, except the last, which gets last (when
 * last >= -128); as DESCR, any integer dtype. */
static void put_y(const char *split, const char *descr, int n, int mod, long long last)
{
	size_t item = (size_t)(descr[2] - '0');
	unsigned char *data = calloc((size_t)n + 1, item);
	for (int k = 0; k < n; k++) {
		long long v = k == n - 1 && last >= -128 ? last : k % mod;
		for (size_t b = 0; b < item; b++)
			data[(size_t)k * item + b] = (unsigned char)((unsigned long long)v >> (8 * b));
	}
	char name[32], shape[16];
	snprintf(name, sizeof name, "%s_y.npy", split);
	snprintf(shape, sizeof shape, "%d,", n);
	put(name, 1, descr, shape, data, (size_t)n * item);
	free(data);
}

/* ---- headers ---- */

static void test_headers(void)
{
	float data[6] = { 1, 2, 3, 4, 5, 6 };
	for (int v = 1; v <= 3; v++) {
		size_t n;
		unsigned char *b = npy_build(v, "<f4", "2, 3", data, sizeof data, &n);
		struct sd_npy_header h;
		char *why = NULL;
		CHECK_INT(sd_npy_parse(b, n, "v.npy", &h, &why), 0);
		CHECK_INT(h.version, v);
		CHECK_INT(h.dtype, SD_NPY_F4);
		CHECK_INT(h.itemsize, 4);
		CHECK_INT(h.ndim, 2);
		CHECK_INT(h.shape[0], 2);
		CHECK_INT(h.shape[1], 3);
		CHECK_INT(h.count, 6);
		CHECK_INT(h.data_offset, 128);   /* as numpy writes it: aligned to 64 bytes */
		CHECK_INT(h.data_bytes, 24);
		CHECK(memcmp(b + h.data_offset, data, sizeof data) == 0);
		free(b);
		free(why);
	}
	/* Other spellings Python's literal syntax allows and numpy has written:
	 * double quotes, another key order, no trailing comma, 2.x's "L". */
	static const struct {
		const char *dict;
		int ndim;
		uint64_t count;
	} ok[] = {
		{ "{\"shape\": (3L, 2L), \"fortran_order\": False, \"descr\": \"|u1\"}", 2, 6 },
		{ "{'descr':'|u1','fortran_order':False,'shape':(6,)}", 1, 6 },
		{ "{'descr': '|u1', 'fortran_order': False, 'shape': (), }", 0, 1 },
		{ "{'descr': '|u1', 'fortran_order': False, 'shape': (1, 2, 3,), }", 3, 6 },
	};
	unsigned char bytes[6] = { 0 };
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		size_t n;
		unsigned char *b = npy_build_raw(1, ok[i].dict, bytes, (size_t)ok[i].count, &n);
		struct sd_npy_header h;
		char *why = NULL;
		int rc = sd_npy_parse(b, n, "ok.npy", &h, &why);
		CHECK_INT(rc, 0);
		if (rc)
			fprintf(stderr, "  %s: %s\n", ok[i].dict, why);
		CHECK_INT(h.ndim, ok[i].ndim);
		CHECK_INT(h.count, ok[i].count);
		free(b);
		free(why);
	}
}

static void test_half(void)
{
	static const struct {
		uint16_t h;
		float f;
	} v[] = {
		{ 0x0000, 0.0f }, { 0x3c00, 1.0f }, { 0xc000, -2.0f }, { 0x3555, 0.333251953125f },
		{ 0x7bff, 65504.0f }, { 0x0400, 6.103515625e-05f }, { 0x0001, 5.9604644775390625e-08f },
		{ 0x03ff, 6.097555160522461e-05f }, { 0x8200, -3.0517578125e-05f },
	};
	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
		CHECK(sd_npy_half_to_float(v[i].h) == v[i].f, " half 0x%04x -> %.10g", v[i].h,
		      (double)sd_npy_half_to_float(v[i].h));
	CHECK(isinf(sd_npy_half_to_float(0x7c00)) && sd_npy_half_to_float(0xfc00) < 0);
	CHECK(isnan(sd_npy_half_to_float(0x7e00)));
	float neg0 = sd_npy_half_to_float(0x8000);
	CHECK(neg0 == 0 && signbit(neg0));
}

/* ---- gathering ---- */

/* The float sd_dataset_gather must give for element (k, ch, y, x). */
static float expect_value(const char *descr, int k, int ch, int y, int x, int c, int h, int w,
                          const struct sd_data_options *o)
{
	unsigned v = pixel(k, ch, y, x, c, h, w);
	float mean = o->norm_channels ? o->mean[ch] : 0.0f, std = o->norm_channels ? o->std[ch] : 1.0f;
	float raw = descr[1] == 'u' ? (float)v / 255.0f : (float)v / 4.0f;
	return (raw - mean) / std;
}

static void check_gather(const struct sd_dataset *ds, const char *descr, const char *what,
                         const struct sd_data_options *o)
{
	int c = ds->c, h = ds->h, w = ds->w;
	size_t sample = (size_t)c * h * w;
	int32_t perm[3] = { ds->n - 1, 0, ds->n / 2 };
	float *x = malloc(3 * sample * sizeof(float));
	uint8_t y[3];
	sd_dataset_gather(ds, perm, 0, 3, x, y);
	int bad = 0;
	for (int i = 0; i < 3; i++)
		for (int ch = 0; ch < c; ch++)
			for (int yy = 0; yy < h; yy++)
				for (int xx = 0; xx < w; xx++) {
					float got = x[(size_t)i * sample + ((size_t)ch * h + yy) * w + xx];
					float want = expect_value(descr, perm[i], ch, yy, xx, c, h, w, o);
					if (got != want && bad++ < 3)
						fprintf(stderr, "  %s: sample %d (%d,%d,%d): %.9g, want %.9g\n",
						        what, perm[i], ch, yy, xx, (double)got, (double)want);
				}
	CHECK(bad == 0, " %s: %d values differ", what, bad);
	/* Materialised: the same floats for every sample. */
	float *all = malloc((size_t)ds->n * sample * sizeof(float));
	sd_dataset_materialize(ds, all);
	for (int i = 0; i < 3; i++)
		CHECK(memcmp(all + (size_t)perm[i] * sample, x + (size_t)i * sample,
		             sample * sizeof(float)) == 0, " %s: materialised sample %d", what, perm[i]);
	free(all);
	free(x);
}

static void test_gather(void)
{
	static const char *const descrs[] = { "|u1", "<f2", "<f4" };
	const float mean[3] = { 0.1f, 0.2f, 0.3f }, std[3] = { 0.5f, 0.25f, 2.0f };
	int version = 1;
	for (int d = 0; d < 3; d++) {
		for (int l = 0; l < 2; l++) {
			enum sd_layout layout = l ? SD_LAYOUT_NHWC : SD_LAYOUT_NCHW;
			char what[64];
			snprintf(what, sizeof what, "%s %s v%d", descrs[d], l ? "NHWC" : "NCHW", version);
			put_x("train", version, descrs[d], layout, 0, 5, 3, 4, 5);
			put_x("test", version, descrs[d], layout, 0, 3, 3, 4, 5);
			version = version % 3 + 1;
			put_y("train", "|u1", 5, 4, -1000);
			put_y("test", "<i8", 3, 3, -1000);
			struct sd_data_options o = opts(layout, 3, mean, std);
			struct sd_dataset tr, te;
			char *why = NULL;
			int rc = sd_dataset_load_npy(&tr, &te, dir, &o, &why);
			CHECK(rc == 0, " %s: %s", what, why ? why : "");
			free(why);
			if (rc)
				continue;
			CHECK_INT(tr.n, 5);
			CHECK_INT(te.n, 3);
			CHECK(tr.c == 3 && tr.h == 4 && tr.w == 5 && te.c == 3 && te.h == 4 && te.w == 5);
			CHECK_INT(tr.classes, 4);
			CHECK_INT(te.classes, 4);
			CHECK(tr.images == NULL && tr.src != NULL, " %s: images are mapped", what);
			CHECK_STR(tr.name, "npy");
			uint8_t y[5];
			sd_dataset_gather(&tr, NULL, 0, 5, NULL, y);
			CHECK(y[0] == 0 && y[1] == 1 && y[2] == 2 && y[3] == 3 && y[4] == 0);
			check_gather(&tr, descrs[d], what, &o);
			check_gather(&te, descrs[d], what, &o);
			sd_dataset_free(&tr);
			sd_dataset_free(&te);
			CHECK(tr.src == NULL && tr.labels == NULL);
		}
	}

	/* (n, h, w): one channel; without normalisation a float is itself. */
	put_x("train", 2, "<f4", SD_LAYOUT_NCHW, 1, 4, 1, 3, 3);
	put_x("test", 3, "<f4", SD_LAYOUT_NCHW, 1, 2, 1, 3, 3);
	put_y("train", "<u2", 4, 2, -1000);
	put_y("test", "<u2", 2, 2, -1000);
	struct sd_data_options o = opts(SD_LAYOUT_NHWC, 0, NULL, NULL);
	struct sd_dataset tr, te;
	char *why = NULL;
	CHECK_INT(sd_dataset_load_npy(&tr, &te, dir, &o, &why), 0);
	CHECK(tr.c == 1 && tr.h == 3 && tr.w == 3);
	check_gather(&tr, "<f4", "(n, h, w) <f4 unnormalised", &o);
	float v[9];   /* one whole sample, 1x3x3 */
	sd_dataset_gather(&tr, NULL, 3, 1, v, NULL);   /* element (3, 0, 0, 0) first */
	CHECK(v[0] == (float)pixel(3, 0, 0, 0, 1, 3, 3) / 4.0f);
	sd_dataset_free(&tr);
	sd_dataset_free(&te);
	free(why);
}

/* Every integer label dtype; classes from the labels of both splits, or
 * given. */
static void test_labels(void)
{
	static const char *const descrs[] = { "|u1", "|i1", "<u2", "<i2", "<u4", "<i4", "<u8", "<i8" };
	put_x("train", 1, "|u1", SD_LAYOUT_NCHW, 1, 9, 1, 2, 2);
	put_x("test", 1, "|u1", SD_LAYOUT_NCHW, 1, 4, 1, 2, 2);
	for (size_t d = 0; d < sizeof descrs / sizeof descrs[0]; d++) {
		put_y("train", descrs[d], 9, 4, 6);   /* 0 1 2 3 0 1 2 3 6 */
		put_y("test", descrs[d], 4, 2, 9);    /* 0 1 0 9: the largest is in test */
		struct sd_data_options o = opts(SD_LAYOUT_NCHW, 0, NULL, NULL);
		struct sd_dataset tr, te;
		char *why = NULL;
		int rc = sd_dataset_load_npy(&tr, &te, dir, &o, &why);
		CHECK(rc == 0, " labels %s: %s", descrs[d], why ? why : "");
		if (rc == 0) {
			CHECK(tr.classes == 10 && te.classes == 10, " %s: classes %d", descrs[d], tr.classes);
			CHECK(tr.labels[8] == 6 && te.labels[3] == 9 && tr.labels[5] == 1);
			sd_dataset_free(&tr);
			sd_dataset_free(&te);
		}
		o.classes = 12;
		CHECK_INT(sd_dataset_load_npy(&tr, &te, dir, &o, &why), 0);
		CHECK_INT(tr.classes, 12);
		sd_dataset_free(&tr);
		sd_dataset_free(&te);
		free(why);
	}
}

/* ---- augmentation ---- */

/* The reference crop + flip (data.h): out[y][x] = in[y + oy - 4][x' + ox - 4]
 * with x' = w - 1 - x when flipped, pad outside. */
static void ref_crop(const float *in, float *out, int c, int h, int w, int oy, int ox, int flip,
                     const float *pad)
{
	for (int ch = 0; ch < c; ch++)
		for (int y = 0; y < h; y++)
			for (int x = 0; x < w; x++) {
				int sy = y + oy - 4, sx = (flip ? w - 1 - x : x) + ox - 4;
				out[((size_t)ch * h + y) * w + x] =
					sy >= 0 && sy < h && sx >= 0 && sx < w ? in[((size_t)ch * h + sy) * w + sx]
					: pad[ch];
			}
}

static void test_augment(void)
{
	enum { N = 64, C = 2, H = 6, W = 7 };
	const size_t S = (size_t)C * H * W;
	put_x("train", 1, "|u1", SD_LAYOUT_NCHW, 0, N, C, H, W);
	put_x("test", 1, "|u1", SD_LAYOUT_NCHW, 0, 2, C, H, W);
	put_y("train", "|u1", N, 3, -1000);
	put_y("test", "|u1", 2, 3, -1000);
	const float mean[2] = { 0.5f, 0.25f }, std[2] = { 0.5f, 0.5f };
	struct sd_data_options o = opts(SD_LAYOUT_NCHW, 2, mean, std);
	struct sd_dataset tr, te;
	char *why = NULL;
	if (sd_dataset_load_npy(&tr, &te, dir, &o, &why) < 0) {
		CHECK(0, " augment fixture: %s", why);
		free(why);
		return;
	}
	/* Padding is a pixel of 0 before normalisation. */
	const float pad[2] = { (0.0f - 0.5f) / 0.5f, (0.0f - 0.25f) / 0.5f };
	CHECK(tr.pad[0] == pad[0] && tr.pad[1] == pad[1]);
	int32_t id[N], rev[N];
	for (int i = 0; i < N; i++) {
		id[i] = i;
		rev[i] = N - 1 - i;
	}
	float *plain = malloc(N * S * sizeof(float)), *a = malloc(N * S * sizeof(float));
	float *b = malloc(N * S * sizeof(float)), *ref = malloc(S * sizeof(float));
	uint8_t la[N], lb[N];
	sd_dataset_gather(&tr, id, 0, N, plain, la);
	sd_dataset_gather_train(&tr, id, 0, N, SD_AUGMENT_NONE, 11, 2, b, lb);
	CHECK(memcmp(plain, b, N * S * sizeof(float)) == 0, " augment none is a plain gather");
	sd_dataset_gather_train(&tr, id, 0, N, SD_AUGMENT_CROP4_FLIP, 11, 2, a, la);
	/* The same batch in three slices, as three workers would gather it. */
	sd_dataset_gather_train(&tr, id, 0, 10, SD_AUGMENT_CROP4_FLIP, 11, 2, b, lb);
	sd_dataset_gather_train(&tr, id, 10, 31, SD_AUGMENT_CROP4_FLIP, 11, 2, b + 10 * S, lb + 10);
	sd_dataset_gather_train(&tr, id, 41, N - 41, SD_AUGMENT_CROP4_FLIP, 11, 2, b + 41 * S,
	                        lb + 41);
	CHECK(memcmp(a, b, N * S * sizeof(float)) == 0, " slices give the same augmentation");
	CHECK(memcmp(la, lb, N) == 0);
	/* Each sample is exactly one crop + flip of its plain image. */
	int draw[N][3], seen_oy[9] = { 0 }, seen_ox[9] = { 0 }, seen_flip[2] = { 0 }, unmatched = 0;
	for (int i = 0; i < N; i++) {
		int matches = 0;
		for (int oy = 0; oy <= 8; oy++)
			for (int ox = 0; ox <= 8; ox++)
				for (int f = 0; f < 2; f++) {
					ref_crop(plain + i * S, ref, C, H, W, oy, ox, f, pad);
					if (memcmp(ref, a + i * S, S * sizeof(float)) == 0) {
						if (!matches) {
							draw[i][0] = oy;
							draw[i][1] = ox;
							draw[i][2] = f;
						}
						matches++;
					}
				}
		if (matches != 1) {
			unmatched++;
			continue;
		}
		seen_oy[draw[i][0]] = seen_ox[draw[i][1]] = seen_flip[draw[i][2]] = 1;
	}
	CHECK(unmatched == 0, " %d samples are no single crop+flip of their image", unmatched);
	int noy = 0, nox = 0;
	for (int i = 0; i < 9; i++) {
		noy += seen_oy[i];
		nox += seen_ox[i];
	}
	/* 64 uniform draws of 9 offsets miss 4 of them with probability < 1e-9. */
	CHECK(noy >= 6 && nox >= 6 && seen_flip[0] && seen_flip[1],
	      " offsets drawn: %d distinct oy, %d ox, flips %d/%d", noy, nox, seen_flip[0],
	      seen_flip[1]);
	/* The draw belongs to the position, not the sample: reversed order,
	 * position p gets p's crop of sample N-1-p. */
	sd_dataset_gather_train(&tr, rev, 0, N, SD_AUGMENT_CROP4_FLIP, 11, 2, b, lb);
	int moved = 0;
	for (int p = 0; p < N && !unmatched; p++) {
		ref_crop(plain + (size_t)rev[p] * S, ref, C, H, W, draw[p][0], draw[p][1], draw[p][2], pad);
		moved += memcmp(ref, b + p * S, S * sizeof(float)) != 0;
		CHECK(lb[p] == la[rev[p]]);
	}
	CHECK(moved == 0, " %d positions drew another crop under another order", moved);
	/* Another epoch or seed draws otherwise. */
	sd_dataset_gather_train(&tr, id, 0, N, SD_AUGMENT_CROP4_FLIP, 11, 3, b, lb);
	CHECK(memcmp(a, b, N * S * sizeof(float)) != 0, " epoch 3 draws as epoch 2 did");
	sd_dataset_gather_train(&tr, id, 0, N, SD_AUGMENT_CROP4_FLIP, 12, 2, b, lb);
	CHECK(memcmp(a, b, N * S * sizeof(float)) != 0, " seed 12 draws as seed 11 did");
	/* A hand-checked pixel: crop (oy, ox) = (4, 4) without flip is the
	 * image itself; (0, 0) shifts it down-right by 4 with pad on top. */
	ref_crop(plain, ref, C, H, W, 0, 0, 0, pad);
	CHECK(ref[0] == pad[0] && ref[(size_t)4 * W + 4] == plain[0]);
	ref_crop(plain, ref, C, H, W, 4, 4, 1, pad);
	CHECK(ref[0] == plain[W - 1]);
	free(plain);
	free(a);
	free(b);
	free(ref);
	sd_dataset_free(&tr);
	sd_dataset_free(&te);
}

/* ---- malformed files ---- */

/* A valid small set: 4 training and 3 test images of 1x2x2, labels 0..2. */
static void good_set(void)
{
	put_x("train", 1, "|u1", SD_LAYOUT_NCHW, 0, 4, 1, 2, 2);
	put_x("test", 1, "|u1", SD_LAYOUT_NCHW, 0, 3, 1, 2, 2);
	put_y("train", "|u1", 4, 3, -1000);
	put_y("test", "|u1", 3, 3, -1000);
}

/* Loads the set and checks the one-line error names FILE and holds WANT. */
static void expect_bad(const char *what, const char *file, const char *want, int classes,
                       int norm)
{
	const float one[3] = { 0, 0, 0 }, std[3] = { 1, 1, 1 };
	struct sd_data_options o = opts(SD_LAYOUT_NCHW, norm, one, std);
	o.classes = classes;
	struct sd_dataset tr, te;
	char *why = NULL;
	int rc = sd_dataset_load_npy(&tr, &te, dir, &o, &why);
	char *path = path_join(dir, file);
	CHECK(rc == -1, " %s: accepted", what);
	if (rc == -1) {
		CHECK(why && strncmp(why, path, strlen(path)) == 0 && why[strlen(path)] == ':' &&
		      strstr(why, want) && !strchr(why, '\n'),
		      " %s: message \"%s\", want \"%s: ...%s...\"", what, why ? why : "(null)", path,
		      want);
		CHECK(tr.n == 0 && tr.src == NULL && te.src == NULL && tr.labels == NULL);
	} else {
		sd_dataset_free(&tr);
		sd_dataset_free(&te);
	}
	free(path);
	free(why);
	good_set();
}

static void test_bad(void)
{
	unsigned char px[16] = { 0 };
	size_t n;
	unsigned char *b;
	good_set();
	{
		struct sd_data_options o = opts(SD_LAYOUT_NCHW, 0, NULL, NULL);
		struct sd_dataset tr, te;
		char *why = NULL;
		CHECK_INT(sd_dataset_load_npy(&tr, &te, dir, &o, &why), 0);
		sd_dataset_free(&tr);
		sd_dataset_free(&te);
		free(why);
	}

	char *p = path_join(dir, "test_y.npy");
	unlink(p);
	free(p);
	expect_bad("missing file", "test_y.npy", "no such file", 0, 0);

	static const char zip[] = "PK\x03\x04 this is a zip";
	put_raw("train_x.npy", zip, sizeof zip - 1);
	expect_bad("wrong magic", "train_x.npy", "wrong magic: not a .npy file", 0, 0);

	b = npy_build(1, "|u1", "4, 1, 2, 2", px, 16, &n);
	b[6] = 4;
	put_raw("train_x.npy", b, n);
	free(b);
	expect_bad("version 4.0", "train_x.npy", "unsupported .npy format version 4.0", 0, 0);

	b = npy_build(1, "|u1", "4, 1, 2, 2", px, 16, &n);
	b[8] = 0xff;
	b[9] = 0xff;
	put_raw("train_x.npy", b, n);
	free(b);
	expect_bad("header length beyond the file", "train_x.npy",
	           "header length 65535 runs past the end of the file", 0, 0);

	b = npy_build_raw(2, "['descr', '|u1']", px, 16, &n);
	put_raw("train_x.npy", b, n);
	free(b);
	expect_bad("header not a dict", "train_x.npy", "header: not a dict", 0, 0);

	b = npy_build_raw(3, "{'descr': '|u1', 'shape': (4, 1, 2, 2), }", px, 16, &n);
	put_raw("train_x.npy", b, n);
	free(b);
	expect_bad("missing key", "train_x.npy", "header: missing key 'fortran_order'", 0, 0);

	b = npy_build_raw(1, "{'descr': '|u1', 'fortran_order': False, 'shape': (4, 1, 2, 2), "
	                  "'extra': 1}", px, 16, &n);
	put_raw("train_x.npy", b, n);
	free(b);
	expect_bad("unknown key", "train_x.npy", "header: unknown key 'extra'", 0, 0);

	put("train_x.npy", 1, "|u1", "4, 1, 2, two", px, 16);
	expect_bad("bad shape literal", "train_x.npy", "header: bad shape literal '(4, 1, 2, two)", 0, 0);
	put("train_x.npy", 1, "|u1", "16", px, 16);
	expect_bad("shape (16) is no tuple", "train_x.npy", "header: bad shape literal '(16), }", 0, 0);
	put("train_x.npy", 1, "|u1", "-4, 1, 2, 2", px, 16);
	expect_bad("negative dimension", "train_x.npy", "header: bad shape literal", 0, 0);

	put("train_x.npy", 1, "<f8", "4, 1, 2, 2", px, 16);
	expect_bad("unsupported dtype", "train_x.npy", "unsupported dtype '<f8'", 0, 0);
	put("train_x.npy", 1, ">f4", "4, 1, 2, 2", px, 16);
	expect_bad("big-endian", "train_x.npy", "dtype '>f4' is big-endian; convert it with "
	           "arr.astype('<f4')", 0, 0);
	put("train_x.npy", 1, "<i4", "4, 1, 1, 1", px, 16);
	expect_bad("integer images", "train_x.npy", "images of dtype '<i4': expected |u1", 0, 0);

	b = npy_build_raw(1, "{'descr': '|u1', 'fortran_order': True, 'shape': (4, 1, 2, 2), }",
	                  px, 16, &n);
	put_raw("train_x.npy", b, n);
	free(b);
	expect_bad("Fortran order", "train_x.npy", "Fortran order (column-major) data is not read", 0, 0);

	put("train_x.npy", 1, "|u1", "4, 1, 2, 2", px, 15);
	expect_bad("truncated", "train_x.npy",
	           "truncated: shape (4, 1, 2, 2) of |u1 needs 16 bytes of data, the file has 15", 0, 0);
	b = npy_build(1, "|u1", "4, 1, 2, 2", px, 16, &n);
	unsigned char *longer = malloc(n + 1);
	memcpy(longer, b, n);
	longer[n] = 0;
	put_raw("train_x.npy", longer, n + 1);
	free(b);
	free(longer);
	expect_bad("trailing bytes", "train_x.npy", "1 bytes after the 16 bytes of data", 0, 0);
	put_raw("train_x.npy", "", 0);
	expect_bad("empty file", "train_x.npy", "truncated: 0 bytes", 0, 0);

	put("train_x.npy", 1, "|u1", "4, 4", px, 16);
	expect_bad("two dimensions", "train_x.npy", "shape (4, 4): expected (n, c, h, w) for layout "
	           "NCHW or (n, h, w)", 0, 0);
	put("train_x.npy", 1, "|u1", "0, 1, 2, 2", px, 0);
	expect_bad("zero samples", "train_x.npy", "no samples (shape (0, 1, 2, 2))", 0, 0);

	put_y("train", "|u1", 3, 3, -1000);
	expect_bad("x/y count mismatch", "train_y.npy", "3 labels, but", 0, 0);
	put("train_y.npy", 1, "<f4", "4,", px, 16);
	expect_bad("float labels", "train_y.npy", "labels of dtype '<f4': expected integer class ids",
	           0, 0);
	put("train_y.npy", 1, "|u1", "2, 2", px, 4);
	expect_bad("labels not 1-D", "train_y.npy", "shape (2, 2): expected (n,)", 0, 0);

	put_x("test", 1, "|u1", SD_LAYOUT_NCHW, 0, 3, 1, 3, 2);
	expect_bad("train/test shape mismatch", "test_x.npy", "images of 1x3x2 (c x h x w), but", 0, 0);

	expect_bad("normalize length", "train_x.npy", "1 channels (layout NCHW, shape (4, 1, 2, 2)), "
	           "but normalize gives 3 mean/std values", 0, 3);

	put_y("test", "<i4", 3, 3, 3);   /* 0 1 3 with classes 3 */
	expect_bad("label out of range", "test_y.npy", "label 3 of sample 2 out of range (classes 3)",
	           3, 0);
	put_y("train", "<i2", 4, 3, -1);
	expect_bad("negative label", "train_y.npy", "label of sample 3 is negative", 0, 0);
	put_y("train", "<u8", 4, 3, 256);
	expect_bad("label beyond a byte", "train_y.npy", "label 256 of sample 3 beyond 256 classes", 0,
	           0);
	put_y("train", "|u1", 4, 1, -1000);
	put_y("test", "|u1", 3, 1, -1000);
	expect_bad("one class", "train_x.npy", "every label is 0: a classifier needs at least 2", 0, 0);
}

/* sd_train_check_data: what spotdeck runs before it starts anything. */
static void test_check_data(void)
{
	good_set();
	struct sd_train_config cfg;
	sd_train_config_defaults(&cfg);
	char *why = NULL;
	snprintf(cfg.layout, sizeof cfg.layout, "NHWC");
	CHECK_INT(sd_train_check_data(&cfg, &why), -1);
	CHECK(why && strstr(why, "layout: only for dataset npy (fashion-mnist has its own)"), " %s", why);
	sd_train_config_defaults(&cfg);
	cfg.norm_channels = 1;
	cfg.norm_std[0] = 1;
	CHECK_INT(sd_train_check_data(&cfg, &why), -1);
	CHECK(why && strstr(why, "normalize: only for dataset npy"), " %s", why);
	sd_train_config_defaults(&cfg);
	snprintf(cfg.dataset, sizeof cfg.dataset, "npy");
	snprintf(cfg.data_dir, sizeof cfg.data_dir, "%s", dir);
	CHECK_INT(sd_train_check_data(&cfg, &why), -1);
	CHECK(why && strstr(why, "global_batch: 64 is larger than the 4 training samples"), " %s", why);
	cfg.global_batch = 4;
	CHECK_INT(sd_train_check_data(&cfg, &why), 0);
	cfg.classes = 1;
	CHECK_INT(sd_train_check_data(&cfg, &why), -1);
	CHECK(why && strstr(why, "classes: 1 (a classifier has 2 to 256"), " %s", why);
	cfg.classes = 3;
	CHECK_INT(sd_train_check_data(&cfg, &why), 0);
		snprintf(cfg.data_dir, sizeof cfg.data_dir, "%s/nowhere", dir);
	CHECK_INT(sd_train_check_data(&cfg, &why), -1);
	CHECK(why && strstr(why, "/nowhere: no such directory"), " %s", why);
	free(why);
}

int main(void)
{
	make_tmpdir(dir, sizeof dir, "sd-test-npy.XXXXXX");
	test_headers();
	test_half();
	test_gather();
	test_labels();
	test_augment();
	test_bad();
	test_check_data();
	rm_tree(dir);
	return check_exit("test-npy");
}
