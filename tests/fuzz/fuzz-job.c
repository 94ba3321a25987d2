/* tests/fuzz/fuzz-job.c - fuzzes the job-file parser (src/proto/job.c) and checks
 * what it accepts: an accepted job serialises and parses back to the same
 * job (directly and through printed JSON), a refused one gets a one-line
 * message that starts with the file name.
 *
 * Built with -DSD_LIBFUZZER -fsanitize=fuzzer this is a libFuzzer target
 * (see src/proto/local.mk).  Otherwise main() runs a built-in corpus of valid job
 * files, each with 5,000 deterministic random mutations (bit flips, byte
 * replacements, truncations, insertions, duplicated and deleted chunks), so
 * `make check`, and CI's ASan+UBSan build of it, fuzzes on every run. */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/proto/job.h"
#include "tests/check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* Three jobs (~15 KiB each) on the heap, not the fuzzer's stack. */
	struct sd_job *j = malloc(3 * sizeof *j);
	FUZZ_ASSERT(j != NULL);
	char *why = NULL;
	if (sd_job_parse(&j[0], (const char *)data, size, "fuzz.json", &why) != 0) {
		FUZZ_ASSERT(why != NULL);
		FUZZ_ASSERT(strncmp(why, "fuzz.json: ", 11) == 0);
		FUZZ_ASSERT(strchr(why, '\n') == NULL);
		free(why);
		free(j);
		return 0;
	}
	FUZZ_ASSERT(why == NULL);
	FUZZ_ASSERT(j[0].ncluster >= 0 && j[0].ncluster <= SD_JOB_CLUSTER_MAX);
	FUZZ_ASSERT(j[0].train.epochs >= 1 && j[0].train.global_batch >= 1);
	FUZZ_ASSERT(j[0].train.lr > 0 && j[0].train.momentum < 1);
	FUZZ_ASSERT(j[0].log_every >= 1);

	cJSON *obj = sd_job_to_json(&j[0]);
	int rc = sd_job_from_json(&j[1], obj, "round-trip", &why);
	if (rc != 0)
		fprintf(stderr, "fuzz-job: serialised job refused: %s\n", why ? why : "?");
	FUZZ_ASSERT(rc == 0);
	FUZZ_ASSERT(sd_job_equal(&j[0], &j[1]));

	char *text = cJSON_PrintUnformatted(obj);
	FUZZ_ASSERT(text != NULL);
	rc = sd_job_parse(&j[2], text, strlen(text), "printed", &why);
	if (rc != 0)
		fprintf(stderr, "fuzz-job: printed job refused: %s\n%s\n", why ? why : "?", text);
	FUZZ_ASSERT(rc == 0);
	FUZZ_ASSERT(sd_job_equal(&j[0], &j[2]));
	free(text);
	cJSON_Delete(obj);
	free(j);
	return 0;
}

#ifndef SD_LIBFUZZER

/* ---- the built-in driver ---- */

static const char *const corpus[] = {
	"{}",
	"{\n"
	"  \"model\": \"resnet20\",\n"
	"  \"dataset\": \"cifar10\",\n"
	"  \"data_dir\": \"/srv/data/cifar-10\",\n"
	"  \"epochs\": 30,\n"
	"  \"global_batch\": 256,\n"
	"  \"lr\": 0.1,\n"
	"  \"momentum\": 0.875,\n"
	"  \"weight_decay\": 1e-4,\n"
	"  \"schedule\": \"step\",\n"
	"  \"warmup_steps\": 500,\n"
	"  \"seed\": 9007199254740991,\n"
	"  \"eval_batch\": 500,\n"
	"  \"workers\": 4,\n"
	"  \"threads_per_worker\": 2,\n"
	"  \"checkpoint_every\": 0,\n"
	"  \"keep_checkpoints\": 5,\n"
	"  \"comm_timeout\": 2.5,\n"
	"  \"log_every\": 1,\n"
	"  \"provider\": \"sim\",\n"
	"  \"catalog\": \"data/catalog-gce.json\",\n"
	"  \"hazard_scale\": 0.30000000000000004,\n"
	"  \"boot_scale\": 0.1,\n"
	"  \"market_seed\": 42,\n"
	"  \"cluster\": [\"gce/us-central1-a/v100x1/spot\", \"gce/europe-west4-b/k80x1/spot\"]\n"
	"}\n",
	"{\"model\":\"mlp\",\"dataset\":\"synthetic\",\"synthetic_samples\":512,\"synthetic_c\":1,"
	"\"synthetic_h\":8,\"synthetic_w\":8,\"epochs\":1,\"global_batch\":32,\"lr\":0.05,"
	"\"schedule\":\"constant\",\"workers\":0,\"comm_timeout\":0.1,\"boot_scale\":0,"
	"\"hazard_scale\":1e6,\"cluster\":[]}",
	"{\"epochs\":2,\"provider\":{\"name\":\"gce\",\"hazard_scale\":2,\"zone\":\"europe-west4-b\","
	"\"tags\":[\"a\",1.5,null,true,9007199254740993],\"limits\":{\"gpus\":8,\"r\":0.1}},"
	"\"market_seed\":3}",
	"\xef\xbb\xbf{ \"epochs\" : 3 , \"schedule\" : \"cosine\" , \"lr\" : 1e-9 , "
	"\"momentum\" : 0 , \"weight_decay\" : 1 , \"seed\" : 0 }",
	"{\"dataset\":\"npy\",\"data_dir\":\"/data/mine\",\"layout\":\"NHWC\",\"classes\":100,"
	"\"augment\":\"crop4+flip\",\"normalize\":{\"mean\":[0.4914,0.4822,0.4465],"
	"\"std\":[0.247,0.2435,0.2616]}}",
	"{\"optimizer\":\"adamw\",\"betas\":[0.9,0.95],\"eps\":1e-8,\"weight_decay\":0.1,"
	"\"clip_grad_norm\":1.0,\"lr\":0.0006}",
};

#define NCORPUS (sizeof corpus / sizeof corpus[0])
#define MUTATIONS 5000
#define MAX_INPUT 4096

#define FUZZ_SEED 0x0123456789abcdefull

static const char *const tokens[] = {
	"1e999", "-1", "0", "1", "0.5", "0.99999999", "1e-45", "3.4e38", "3.5e38", "100",
	"100000", "100001", "1048576", "9007199254740992", "9007199254740993", "1e300",
	"null", "true", "\"\"", "[]", "{}", "[\"a\"]", "\\u0000", "\\ud800", "\n",
	"\"model\":", "\"dataset\":", "\"epochs\":", "\"lr\":", "\"momentum\":",
	"\"schedule\":", "\"seed\":", "\"workers\":", "\"comm_timeout\":", "\"cluster\":",
	"\"provider\":", "\"hazard_scale\":", "\"market_seed\":", "\"synthetic_c\":",
	"\"cnn\"", "\"resnet32\"", "\"mnist\"", "\"step\"", "\"gce\"", ",\"x\":1",
	",\"epochs\":2", "\xc3\xa9", "\"name\":", "{\"name\":\"sim\"}", "\"zone\":",
	"1.0000000000000002", "\"normalize\":", "\"mean\":", "\"std\":", "\"layout\":",
	"\"NCHW\"", "\"classes\":", "256", "257", "\"augment\":", "\"crop4+flip\"",
	"\"optimizer\":", "\"adamw\"", "\"betas\":", "[0.9,0.999]", "[1,0]", "\"eps\":",
	"\"clip_grad_norm\":",
};

#define NTOKENS (sizeof tokens / sizeof tokens[0])

#include "tests/fuzz/mutate.h"

int main(void)
{
	char *buf = malloc(MAX_INPUT);
	if (!buf)
		return 99;
	long runs = 0, accepted = 0;
	for (size_t c = 0; c < NCORPUS; c++) {
		size_t base = strlen(corpus[c]);
		/* Unmutated, every job of the corpus is valid. */
		struct sd_job *j = malloc(sizeof *j);
		char *why = NULL;
		if (!j || sd_job_parse(j, corpus[c], base, "corpus", &why) != 0) {
			fprintf(stderr, "fuzz-job: corpus entry %zu refused: %s\n", c, why ? why : "?");
			return 1;
		}
		free(j);
		LLVMFuzzerTestOneInput((const uint8_t *)corpus[c], base);
		for (int m = 0; m < MUTATIONS; m++) {
			size_t len = mutate_copy(buf, corpus[c], base);
			struct sd_job probe;
			char *w = NULL;
			if (sd_job_parse(&probe, buf, len, "fuzz.json", &w) == 0)
				accepted++;
			free(w);
			LLVMFuzzerTestOneInput((const uint8_t *)buf, len);
			runs++;
		}
	}
	free(buf);
	printf("fuzz-job: %ld mutated inputs (%ld accepted), no crash, invariants held\n",
	       runs, accepted);
	return 0;
}

#endif
