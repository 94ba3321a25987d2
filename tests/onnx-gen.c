/* tests/onnx-gen.c - writes tests/onnx-gen.h's tiny model for (1, H, W)
 * inputs and CLASSES classes to a file, for tests/test-onnx-worker.sh.
 *
 *   onnx-gen OUT.onnx H W CLASSES [PRODUCER]
 *
 * PRODUCER replaces the producer name: another file, the same model. */
#include <stdio.h>
#include <stdlib.h>

#include "tests/onnx-gen.h"

int main(int argc, char **argv)
{
	if (argc != 5 && argc != 6) {
		fprintf(stderr, "usage: onnx-gen OUT.onnx H W CLASSES [PRODUCER]\n");
		return 2;
	}
	int h = atoi(argv[2]), w = atoi(argv[3]), classes = atoi(argv[4]);
	if (h < 1 || w < 1 || classes < 2 || classes > 16) {
		fprintf(stderr, "onnx-gen: bad shape %sx%s or classes %s\n", argv[2], argv[3], argv[4]);
		return 2;
	}
	size_t len;
	uint8_t *b = gen_model_bytes_shape(GEN_OK, h, w, classes, argc == 6 ? argv[5] : NULL,
	                                   &len);
	FILE *f = fopen(argv[1], "wb");
	if (!f || fwrite(b, 1, len, f) != len || fclose(f) != 0) {
		perror(argv[1]);
		return 1;
	}
	free(b);
	return 0;
}
