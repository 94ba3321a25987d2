/* tests/engine/onnx-gen.c - writes tests/engine/onnx-gen.h's tiny model for (1, H, W)
 * inputs and CLASSES classes to a file, for the shell tests
 * (tests/worker/test-onnx-worker.sh, tests/app/test-spotdeck-bad-input.sh, ...).
 *
 *   onnx-gen [--pad N] [--break KIND] OUT.onnx H W CLASSES [PRODUCER]
 *
 * PRODUCER replaces the producer name: another file, the same model.
 * --break writes the model broken one of onnx-gen.h's ways: KIND is
 * unsupported-op (node relu1 is a Softplus), dangling (node gap reads a
 * tensor nothing writes), cycle, huge-init, raw-mismatch, opset7,
 * double-init, two-outputs, two-inputs, dynamic-h or groups.  --pad N
 * makes the producer name N bytes of 'x': the same network in a file of
 * over N bytes, for tests of how a large file travels. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/engine/onnx-gen.h"

static const char *const kinds[GEN_COUNT] = {
	[GEN_OK] = "ok", [GEN_UNSUPPORTED_OP] = "unsupported-op", [GEN_DANGLING] = "dangling",
	[GEN_CYCLE] = "cycle", [GEN_HUGE_INIT] = "huge-init", [GEN_RAW_MISMATCH] = "raw-mismatch",
	[GEN_OPSET7] = "opset7", [GEN_OPSET18] = "opset18", [GEN_DOUBLE_INIT] = "double-init",
	[GEN_TWO_OUTPUTS] = "two-outputs", [GEN_TWO_INPUTS] = "two-inputs",
	[GEN_DYNAMIC_H] = "dynamic-h", [GEN_GROUPS] = "groups",
};

int main(int argc, char **argv)
{
	enum gen_break brk = GEN_OK;
	char *pad = NULL;
	if (argc > 2 && !strcmp(argv[1], "--pad")) {
		long n = atol(argv[2]);
		if (n < 1 || n > (1L << 28)) {
			fprintf(stderr, "onnx-gen: --pad %s: expected 1 to 2^28 bytes\n", argv[2]);
			return 2;
		}
		pad = malloc((size_t)n + 1);
		if (!pad)
			return 1;
		memset(pad, 'x', (size_t)n);
		pad[n] = '\0';
		argc -= 2;
		argv += 2;
	}
	if (argc > 2 && !strcmp(argv[1], "--break")) {
		int k = 0;
		while (k < GEN_COUNT && (!kinds[k] || strcmp(kinds[k], argv[2])))
			k++;
		if (k == GEN_COUNT) {
			fprintf(stderr, "onnx-gen: --break %s: unknown kind\n", argv[2]);
			return 2;
		}
		brk = (enum gen_break)k;
		argc -= 2;
		argv += 2;
	}
	if (argc != 5 && argc != 6) {
		fprintf(stderr, "usage: onnx-gen [--pad N] [--break KIND] OUT.onnx H W CLASSES [PRODUCER]\n");
		return 2;
	}
	int h = atoi(argv[2]), w = atoi(argv[3]), classes = atoi(argv[4]);
	if (h < 1 || w < 1 || classes < 2 || classes > 16) {
		fprintf(stderr, "onnx-gen: bad shape %sx%s or classes %s\n", argv[2], argv[3], argv[4]);
		return 2;
	}
	size_t len;
	uint8_t *b = gen_model_bytes_shape(brk, h, w, classes, pad ? pad : argc == 6 ? argv[5] : NULL,
	                                   &len);
	FILE *f = fopen(argv[1], "wb");
	if (!f || fwrite(b, 1, len, f) != len || fclose(f) != 0) {
		perror(argv[1]);
		return 1;
	}
	free(b);
	free(pad);
	return 0;
}
