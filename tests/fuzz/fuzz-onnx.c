/* tests/fuzz/fuzz-onnx.c - fuzzes the ONNX loader (engine/onnx.c: the
 * protobuf-c decoding, the graph checks and the lowering) and checks what
 * it does with each input:
 *   - refused: one line that starts with the file name;
 *   - accepted: the shape, classes and counts within their bounds, and the
 *     model, built for a batch of 2, runs a training step and an
 *     evaluation without a crash or a sanitizer report.
 *
 * With libFuzzer (after a build, which generates onnx/onnx.pb-c.c; the
 * engine's sources are compiled in, so that they are instrumented):
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -fopenmp -DSD_LIBFUZZER \
 *     -D_GNU_SOURCE -I. tests/fuzz/fuzz-onnx.c src/base/errors.c src/base/rng.c \
 *     engine/blas.c engine/layers.c engine/layers-blocked.c engine/model.c \
 *     engine/onnx.c engine/conv-dnnl.c onnx/onnx.pb-c.c \
 *     -lopenblas -ldnnl -lprotobuf-c -lm -o fuzz-onnx
 *   ./fuzz-onnx CORPUS_DIR      (seed it with a model torch.onnx.export wrote)
 * (20 s of it, 51,000 runs from a PyTorch export, found nothing.)
 * Without it (as `make check` builds it) main() runs the files named on the
 * command line (with --mutate N first: N mutations of each), or, with
 * none, the tiny model of tests/engine/onnx-gen.h and each of its broken forms
 * with deterministic mutations (bit flips, bytes, truncations, inserted
 * protobuf fragments, duplicated and deleted chunks). */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/model.h"
#include "engine/onnx.h"
#include "tests/check.h"
#include "tests/engine/onnx-gen.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static long n_accepted;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char file[] = "fuzz.onnx";
	struct sd_onnx_info info;
	char *why = NULL;
	if (sd_onnx_check(data, size, file, &info, &why) < 0) {
		FUZZ_ASSERT(why != NULL);
		FUZZ_ASSERT(strncmp(why, file, strlen(file)) == 0);
		FUZZ_ASSERT(strchr(why, '\n') == NULL);
		free(why);
		return 0;
	}
	n_accepted++;
	FUZZ_ASSERT(info.c >= 1 && info.h >= 1 && info.w >= 1 && info.classes >= 2);
	FUZZ_ASSERT(info.engine_nodes >= 1 && info.nodes >= info.engine_nodes - 1);
	FUZZ_ASSERT(info.macs >= 0 && isfinite(info.macs));
	struct sd_model *m;
	FUZZ_ASSERT(sd_model_create_onnx(&m, data, size, file, 2, &why) == 0);
	FUZZ_ASSERT(sd_model_param_count(m) == info.params);
	size_t n = (size_t)info.c * info.h * info.w * 2;
	float *x = malloc(n * sizeof(float));
	FUZZ_ASSERT(x != NULL);
	for (size_t i = 0; i < n; i++)
		x[i] = (float)(i % 7) * 0.25f - 0.5f;
	uint8_t labels[2] = { 0, 1 };
	double loss;
	FUZZ_ASSERT(sd_model_train_batch(m, x, labels, 2, 0.5f, &loss, NULL, &why) == 0);
	FUZZ_ASSERT(sd_model_eval_batch(m, x, labels, 2, &loss, NULL, &why) == 0);
	free(x);
	sd_model_destroy(m);
	return 0;
}

#ifndef SD_LIBFUZZER

#define MUTATIONS 5000
/* limits.h's MAX_INPUT (a terminal's line) is not this one. */
#undef MAX_INPUT
#define MAX_INPUT 65536

#define FUZZ_SEED 0x0a11c0ffeeull

/* Protobuf fragments: tags of the ModelProto/GraphProto/NodeProto fields,
 * long and negative varints, lengths that overrun, op names. */
static const char *const tokens[] = {
	"\x08", "\x0a", "\x12", "\x1a", "\x22", "\x3a", "\x42", "\x6a", "\x8a\x01",
	"\xff\xff\xff\xff\x0f", "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", "\x80\x80\x80\x80\x04",
	"\x7f", "\x00", "\x01", "\x02", "\x07", "\x0b", "Conv", "Relu", "Add", "Gemm", "MatMul",
	"Reshape", "Shape", "BatchNormalization", "Softmax", "Identity", "x", "y", "g", "r",
	"\x0a\x01\x78", "\x12\x01\x79",
};

#define NTOKENS (sizeof tokens / sizeof tokens[0])

#include "tests/fuzz/mutate.h"

int main(int argc, char **argv)
{
	char *buf = malloc(MAX_INPUT);
	if (!buf)
		return 99;
	long runs = 0, valid = 0;
	/* --mutate N FILE...: N mutations of each file (models exported by
	 * PyTorch, say, which the repository does not hold). */
	if (argc > 3 && !strcmp(argv[1], "--mutate")) {
		long n = atol(argv[2]);
		for (int f = 3; f < argc; f++) {
			size_t base = 0;
			char *seed = fuzz_read_file(argv[f], &base);
			if (!seed || base > MAX_INPUT) {
				fprintf(stderr, "fuzz-onnx: %s: unreadable or over %d bytes\n", argv[f],
				        MAX_INPUT);
				return 1;
			}
			for (long k = 0; k < n; k++) {
				size_t len = mutate_copy(buf, seed, base);
				LLVMFuzzerTestOneInput((const uint8_t *)buf, len);
				runs++;
			}
			free(seed);
		}
		free(buf);
		printf("fuzz-onnx: %ld mutated inputs (%ld accepted), no crash, invariants held\n",
		       runs, n_accepted);
		return 0;
	}
	if (argc > 1) {
		free(buf);
		return fuzz_run_files("fuzz-onnx", argc, argv);
	}
	for (int brk = 0; brk < GEN_COUNT; brk++) {
		size_t base;
		uint8_t *seed = gen_model_bytes((enum gen_break)brk, &base);
		if (base > MAX_INPUT) {
			free(seed);
			return 99;
		}
		long before = n_accepted;
		LLVMFuzzerTestOneInput(seed, base);
		/* The whole model loads; every broken one is refused. */
		if ((n_accepted != before) != (brk == GEN_OK)) {
			fprintf(stderr, "fuzz-onnx: seed %d %s\n", brk, brk ? "accepted" : "refused");
			return 1;
		}
		valid += brk == GEN_OK;
		for (int k = 0; k < MUTATIONS; k++) {
			size_t len = mutate_copy(buf, (const char *)seed, base);
			LLVMFuzzerTestOneInput((const uint8_t *)buf, len);
			runs++;
		}
		free(seed);
	}
	free(buf);
	printf("fuzz-onnx: %ld mutated inputs (%ld accepted), no crash, invariants held\n", runs,
	       n_accepted - valid);
	return 0;
}

#endif
