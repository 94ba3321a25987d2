/* tests/engine/test-onnx-bad.c - the ONNX loader (engine/onnx.c) on a tiny valid
 * model and on broken ones (tests/engine/onnx-gen.h writes them with protobuf-c):
 * the valid one loads with the shape, classes, multiply-adds and weights
 * it has, and computes its logits; each broken one is refused with ONE
 * line that names the file and the problem (and the node, where there is
 * one). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/model.h"
#include "engine/onnx.h"
#include "tests/check.h"
#include "tests/engine/onnx-gen.h"
#include "tests/tmpdir.h"

static char dir[256];

/* Loads path (through sd_onnx_read_file, as the trainer does) and expects
 * a refusal whose one line holds the path and every one of want[]. */
static void expect_refusal(const char *name, const uint8_t *b, size_t n, const char *const *want)
{
	char path[512];
	snprintf(path, sizeof path, "%s/%s.onnx", dir, name);
	write_raw(path, b, n);
	uint8_t *bytes;
	size_t len;
	char *why = NULL;
	struct sd_onnx_info info;
	int rc = sd_onnx_read_file(path, &bytes, &len, &why);
	if (rc == 0) {
		rc = sd_onnx_check(bytes, len, path, &info, &why);
		free(bytes);
	}
	CHECK(rc == -1, "%s: accepted", name);
	CHECK(why != NULL, "%s: no message", name);
	if (!why)
		return;
	printf("%-14s %s\n", name, why);
	CHECK(strchr(why, '\n') == NULL, "%s: more than one line: %s", name, why);
	CHECK(strncmp(why, path, strlen(path)) == 0, "%s: does not start with the file: %s", name,
	      why);
	for (int i = 0; want[i]; i++)
		CHECK(strstr(why, want[i]) != NULL, "%s: no \"%s\" in: %s", name, want[i], why);
	free(why);
}

#define WANT(...) ((const char *const[]){ __VA_ARGS__, NULL })

static void test_valid(void)
{
	size_t len;
	uint8_t *b = gen_model_bytes(GEN_OK, &len);
	struct sd_onnx_info info;
	char *why = NULL;
	CHECK(sd_onnx_check(b, len, "tiny.onnx", &info, &why) == 0, "%s", why ? why : "");
	free(why);
	why = NULL;
	CHECK_INT(info.c, 1);
	CHECK_INT(info.h, 4);
	CHECK_INT(info.w, 4);
	CHECK_INT(info.classes, 3);
	/* conv: 2 filters x 9 taps x 16 pixels; gemm: 2 x 3. */
	CHECK(info.macs == 2 * 9 * 16 + 2 * 3, "macs %g", info.macs);
	CHECK_INT(info.params, 18 + 2 + 6 + 3);
	CHECK_INT(info.buffers, 0);
	CHECK_INT(info.nodes, 5);
	CHECK_INT(info.engine_nodes, 4);   /* Flatten lowers to nothing */
	int nops;
	const struct sd_onnx_op *ops = sd_onnx_ops(&nops);
	for (int i = 0; i < nops; i++) {
		int want = !strcmp(ops[i].op, "Conv") || !strcmp(ops[i].op, "Relu") ||
		           !strcmp(ops[i].op, "GlobalAveragePool") || !strcmp(ops[i].op, "Flatten") ||
		           !strcmp(ops[i].op, "Gemm");
		CHECK_INT(info.op_count[i], want);
	}

	/* The logits of one input, against the same arithmetic written out:
	 * x = 1 everywhere, so each conv output pixel sums the taps inside
	 * the image. */
	struct sd_model *m;
	CHECK(sd_model_create_onnx(&m, b, len, "tiny.onnx", 2, &why) == 0, "%s", why ? why : "");
	free(why);
	free(b);
	if (!m)
		return;
	CHECK_STR(sd_model_name(m), "tiny.onnx");
	float x[16];
	for (int i = 0; i < 16; i++)
		x[i] = 1;
	double w1[18], b1[2] = { 0, 0.01 }, w2[6], b2[3] = { 0, 0.01, 0.02 };
	for (int i = 0; i < 18; i++)
		w1[i] = 0.1f * (float)(i + 1);
	for (int i = 0; i < 6; i++)
		w2[i] = 0.2f * (float)(i + 1) - 0.5f;
	double g[2];
	for (int k = 0; k < 2; k++) {
		double sum = 0;
		for (int y = 0; y < 4; y++)
			for (int xx = 0; xx < 4; xx++) {
				double v = b1[k];
				for (int r = 0; r < 3; r++)
					for (int s = 0; s < 3; s++) {
						int iy = y + r - 1, ix = xx + s - 1;
						if (iy >= 0 && iy < 4 && ix >= 0 && ix < 4)
							v += w1[k * 9 + r * 3 + s];
					}
				sum += v > 0 ? v : 0;
			}
		g[k] = sum / 16;
	}
	double logits[3], mx = -1e30, z = 0;
	for (int o = 0; o < 3; o++) {
		logits[o] = b2[o] + w2[o * 2] * g[0] + w2[o * 2 + 1] * g[1];
		mx = fmax(mx, logits[o]);
	}
	for (int o = 0; o < 3; o++)
		z += exp(logits[o] - mx);
	uint8_t label = 2;
	double loss;
	CHECK(sd_model_eval_batch(m, x, &label, 1, &loss, NULL, &why) == 0);
	double want = -(logits[2] - mx - log(z));
	CHECK(fabs(loss - want) < 1e-5 * fabs(want), "loss %.9g, want %.9g", loss, want);
	sd_model_destroy(m);
}

int main(void)
{
	make_tmpdir(dir, sizeof dir, "test-onnx-bad.XXXXXX");
	test_valid();

	size_t len;
	uint8_t *ok = gen_model_bytes(GEN_OK, &len);
	expect_refusal("truncated", ok, len * 2 / 3, WANT("not an ONNX model", "truncated"));
	expect_refusal("empty", ok, 0, WANT("empty file"));
	const uint8_t junk[] = "\x89PNG\r\n\x1a\n\0\0\0\rIHDR this is a picture, not a model";
	expect_refusal("garbage", junk, sizeof junk, WANT("not an ONNX model"));
	free(ok);

	const struct {
		enum gen_break brk;
		const char *name;
		const char *const *want;
	} cases[] = {
		{ GEN_UNSUPPORTED_OP, "unsupported-op",
		  WANT("node relu1 (Softplus)", "op Softplus is not supported", "supported ops: Conv,",
		       "Gemm") },
		{ GEN_DANGLING, "dangling", WANT("node gap (GlobalAveragePool)", "nowhere",
		                                 "dangling") },
		{ GEN_CYCLE, "cycle", WANT("node relu1 (Relu)", "input g", "produced by node gap",
		                           "cycle") },
		{ GEN_HUGE_INIT, "huge-init", WANT("initializer w2", "claim more than") },
		{ GEN_RAW_MISMATCH, "raw-short", WANT("initializer w2", "6 elements", "raw_data",
		                                      "20 bytes") },
		{ GEN_OPSET7, "opset7", WANT("opset 7", "13 to 17") },
		{ GEN_OPSET18, "opset18", WANT("opset 18", "13 to 17") },
		{ GEN_DOUBLE_INIT, "float64", WANT("initializer w1", "float64", "float32 only") },
		{ GEN_TWO_OUTPUTS, "two-outputs", WANT("2 graph outputs") },
		{ GEN_TWO_INPUTS, "two-inputs", WANT("two data inputs (x and x2)") },
		{ GEN_DYNAMIC_H, "dynamic-h", WANT("input x: dimension 2 is not a fixed size") },
		{ GEN_GROUPS, "groups", WANT("node conv1 (Conv)", "group 2", "does not divide",
		                             "1 channels") },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		uint8_t *b = gen_model_bytes(cases[i].brk, &len);
		expect_refusal(cases[i].name, b, len, cases[i].want);
		free(b);
	}
	rm_tree(dir);
	return check_exit("test-onnx-bad");
}
