/* tests/proto/test-job.c - the job file (src/proto/job.c): defaults, a full file, the
 * exact round trip through JSON (also through the wire encoding), and
 * malformed jobs, each with the message naming the file and the field. */
#include "config.h"

#include "src/proto/job.h"

#include <fcntl.h>
#include <float.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/proto/protocol.h"
#include "tests/check.h"
#include "tests/tmpdir.h"

static void test_defaults(void)
{
	struct sd_job j;
	sd_job_defaults(&j);
	CHECK_STR(j.train.model, "cnn");
	CHECK_STR(j.train.dataset, "fashion-mnist");
	CHECK_STR(j.train.data_dir, "");
	CHECK_INT(j.train.epochs, 3);
	CHECK_INT(j.train.global_batch, 64);
	CHECK(j.train.lr == 0.05f);
	CHECK(j.train.momentum == 0.9f);
	CHECK(j.train.weight_decay == 5e-4f);
	CHECK_INT(j.train.schedule, SD_LR_COSINE);
	CHECK_INT(j.train.warmup_steps, 100);
	CHECK_INT(j.train.seed, 1);
	CHECK_INT(j.train.eval_batch, 1000);
	CHECK_INT(j.workers, 2);
	CHECK_INT(j.min_workers, 1);
	CHECK_INT(j.threads_per_worker, 1);
	CHECK_INT(j.checkpoint_every, 200);
	CHECK_INT(j.keep_checkpoints, 3);
	CHECK(j.comm_timeout_s == 5.0);
	CHECK_INT(j.log_every, 10);
	CHECK_STR(j.notice, "none");
	CHECK_STR(j.provider, "sim");
	CHECK_STR(j.catalog, "");
	CHECK(j.hazard_scale == 1.0);
	CHECK(j.boot_scale == 1.0);
	CHECK_INT(j.market_seed, 1);
	CHECK_INT(j.ncluster, 0);
	CHECK_STR(j.train.layout, "NCHW");
	CHECK_STR(j.train.augment, "none");
	/* A job picks its precision where it runs; the trainer's own default
	 * stays fp32. */
	CHECK_STR(j.train.precision, "auto");
	CHECK_INT(j.train.tf32, 0);
	CHECK_INT(j.train.norm_channels, 0);
	CHECK_INT(j.train.classes, 0);

	/* An empty object is the defaults. */
	struct sd_job p;
	char *why = NULL;
	CHECK_INT(sd_job_parse(&p, "{}", 2, "job.json", &why), 0);
	CHECK(sd_job_equal(&p, &j));
	CHECK_INT(sd_job_parse(&p, "\xef\xbb\xbf { }\n", 8, "job.json", &why), 0);
	CHECK(sd_job_equal(&p, &j));
	CHECK(why == NULL);
}

static const char full_job[] =
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
	"  \"synthetic_samples\": 2048,\n"
	"  \"synthetic_c\": 1,\n"
	"  \"synthetic_h\": 28,\n"
	"  \"synthetic_w\": 28,\n"
	"  \"workers\": 4,\n"
	"  \"min_workers\": 3,\n"
	"  \"threads_per_worker\": 2,\n"
	"  \"checkpoint_every\": 0,\n"
	"  \"keep_checkpoints\": 5,\n"
	"  \"comm_timeout\": 2.5,\n"
	"  \"log_every\": 1,\n"
	"  \"provider\": {\n"
	"    \"name\": \"sim\",\n"
	"    \"catalog\": \"data/catalog-gce.json\",\n"
	"    \"hazard_scale\": 0.30000000000000004,\n"
	"    \"boot_scale\": 0.1,\n"
	"    \"notice_scale\": 2,\n"
	"    \"market_seed\": 42\n"
	"  },\n"
	"  \"cluster\": [\"gce/us-central1-a/v100x1/spot\", \"gce/europe-west4-b/k80x1/spot\"]\n"
	"}\n";

/* The same job as earlier versions wrote it (run directories hold such a
 * job.json, and --resume reads it): the provider's keys at the top level,
 * "provider" a bare name. */
static const char full_job_flat[] =
	"{\"model\": \"resnet20\", \"dataset\": \"cifar10\", \"data_dir\": \"/srv/data/cifar-10\","
	" \"epochs\": 30, \"global_batch\": 256, \"lr\": 0.1, \"momentum\": 0.875,"
	" \"weight_decay\": 1e-4, \"schedule\": \"step\", \"warmup_steps\": 500,"
	" \"seed\": 9007199254740991, \"eval_batch\": 500, \"synthetic_samples\": 2048,"
	" \"synthetic_c\": 1, \"synthetic_h\": 28, \"synthetic_w\": 28, \"workers\": 4,"
	" \"min_workers\": 3, \"threads_per_worker\": 2, \"checkpoint_every\": 0, \"keep_checkpoints\": 5,"
	" \"comm_timeout\": 2.5, \"log_every\": 1, \"provider\": \"sim\","
	" \"catalog\": \"data/catalog-gce.json\", \"hazard_scale\": 0.30000000000000004,"
	" \"boot_scale\": 0.1, \"notice_scale\": 2, \"market_seed\": 42,"
	" \"cluster\": [\"gce/us-central1-a/v100x1/spot\", \"gce/europe-west4-b/k80x1/spot\"]}";

static void check_full(const struct sd_job *j)
{
	CHECK_STR(j->train.model, "resnet20");
	CHECK_STR(j->train.dataset, "cifar10");
	CHECK_STR(j->train.data_dir, "/srv/data/cifar-10");
	CHECK_INT(j->train.epochs, 30);
	CHECK_INT(j->train.global_batch, 256);
	CHECK(j->train.lr == 0.1f);
	CHECK(j->train.momentum == 0.875f);
	CHECK(j->train.weight_decay == 1e-4f);
	CHECK_INT(j->train.schedule, SD_LR_STEP);
	CHECK_INT(j->train.warmup_steps, 500);
	CHECK(j->train.seed == 9007199254740991ull);
	CHECK_INT(j->train.eval_batch, 500);
	CHECK_INT(j->train.synthetic_samples, 2048);
	CHECK_INT(j->train.synthetic_c, 1);
	CHECK_INT(j->train.synthetic_h, 28);
	CHECK_INT(j->train.synthetic_w, 28);
	CHECK_INT(j->workers, 4);
	CHECK_INT(j->min_workers, 3);
	CHECK_INT(j->threads_per_worker, 2);
	CHECK_INT(j->checkpoint_every, 0);
	CHECK_INT(j->keep_checkpoints, 5);
	CHECK(j->comm_timeout_s == 2.5);
	CHECK_INT(j->log_every, 1);
	CHECK_STR(j->provider, "sim");
	CHECK_STR(j->catalog, "data/catalog-gce.json");
	CHECK(j->hazard_scale == 0.30000000000000004);
	CHECK(j->boot_scale == 0.1);
	CHECK(j->notice_scale == 2.0);
	CHECK_INT(j->market_seed, 42);
	CHECK_STR(j->provider_settings, "");
	CHECK_INT(j->ncluster, 2);
	CHECK_STR(j->cluster[0], "gce/us-central1-a/v100x1/spot");
	CHECK_STR(j->cluster[1], "gce/europe-west4-b/k80x1/spot");
}

/* to_json -> from_json directly, and through the text a welcome carries. */
static void check_round_trip(const struct sd_job *j, const char *what)
{
	char *why = NULL;
	cJSON *obj = sd_job_to_json(j);
	struct sd_job back;
	int rc = sd_job_from_json(&back, obj, "welcome.job", &why);
	if (rc != 0 || !sd_job_equal(j, &back)) {
		fprintf(stderr, "FAIL: %s: direct round trip: %s\n", what, why ? why : "differs");
		check_failures++;
	}

	cJSON *msg = sd_msg_new(SD_MSG_WELCOME);
	cJSON_AddNumberToObject(msg, "version", SD_PROTO_VERSION);
	cJSON_AddStringToObject(msg, "worker_id", "w1");
	cJSON_AddItemToObject(msg, "job", obj);
	size_t len;
	char *line = sd_msg_encode(msg, &len);
	cJSON_Delete(msg);
	enum sd_msg_type t;
	cJSON *dec = NULL;
	rc = sd_msg_decode(line, len, &t, &dec, &why);
	CHECK_INT(rc, 0);
	if (rc == 0) {
		memset(&back, 0xa5, sizeof back);
		rc = sd_job_from_json(&back, cJSON_GetObjectItemCaseSensitive(dec, "job"),
		                      "welcome.job", &why);
		if (rc != 0 || !sd_job_equal(j, &back)) {
			fprintf(stderr, "FAIL: %s: round trip through %s: %s\n", what, line,
			        why ? why : "differs");
			check_failures++;
		}
	}
	cJSON_Delete(dec);
	free(line);
	free(why);
}

/* The optimizer's keys: read, written only when set (clip_grad_norm), read
 * back the same, and each one matters to sd_job_equal. */
static void test_optimizer(void)
{
	static const char text[] = "{\"optimizer\": \"adamw\", \"betas\": [0.85, 0.95], "
	                           "\"eps\": 1e-6, \"weight_decay\": 0.1, \"clip_grad_norm\": 1.5}";
	struct sd_job j, d;
	char *why = NULL;
	CHECK_INT(sd_job_parse(&j, text, sizeof text - 1, "adamw.json", &why), 0);
	CHECK_STR(j.train.optimizer, "adamw");
	CHECK(j.train.betas[0] == 0.85f && j.train.betas[1] == 0.95f);
	CHECK(j.train.eps == 1e-6f && j.train.weight_decay == 0.1f);
	CHECK(j.train.clip_grad_norm == 1.5f);
	check_round_trip(&j, "adamw job");
	cJSON *obj = sd_job_to_json(&j);
	char *out = cJSON_PrintUnformatted(obj);
	CHECK(strstr(out, "\"optimizer\":\"adamw\"") && strstr(out, "\"betas\":[0.85,0.95]") &&
	      strstr(out, "\"eps\":1e-06") && strstr(out, "\"clip_grad_norm\":1.5"), "%s", out);
	/* SGD's momentum is not written for an AdamW job, which would refuse it. */
	CHECK(!strstr(out, "momentum"), "%s", out);
	free(out);
	cJSON_Delete(obj);

	/* The defaults: SGD, torch's AdamW betas and eps, no clipping, which
	 * is left out of the file written (0 is not a valid clip norm). */
	sd_job_defaults(&d);
	CHECK_STR(d.train.optimizer, "sgd");
	CHECK(d.train.betas[0] == 0.9f && d.train.betas[1] == 0.999f && d.train.eps == 1e-8f);
	CHECK(d.train.clip_grad_norm == 0);
	obj = sd_job_to_json(&d);
	out = cJSON_PrintUnformatted(obj);
	CHECK(!strstr(out, "clip_grad_norm"), "%s", out);
	CHECK(strstr(out, "\"momentum\"") && !strstr(out, "betas") && !strstr(out, "\"eps\""), "%s",
	      out);
	free(out);
	cJSON_Delete(obj);

	struct sd_job k = j;
	k.train.betas[1] = nextafterf(0.95f, 1.0f);
	CHECK(!sd_job_equal(&j, &k));
	check_round_trip(&k, "adamw job, beta2 one ulp off");
	k = j;
	k.train.betas[0] = 0.9f;
	CHECK(!sd_job_equal(&j, &k));
	k = j;
	k.train.clip_grad_norm = 0;
	CHECK(!sd_job_equal(&j, &k));
	check_round_trip(&k, "adamw job without clipping");
	k = j;
	snprintf(k.train.optimizer, sizeof k.train.optimizer, "sgd");
	CHECK(!sd_job_equal(&j, &k));
	free(why);
}

static void test_full(void)
{
	struct sd_job j;
	char *why = NULL;
	int rc = sd_job_parse(&j, full_job, sizeof full_job - 1, "full.json", &why);
	if (rc != 0)
		fprintf(stderr, "full job: %s\n", why);
	CHECK_INT(rc, 0);
	check_full(&j);
	check_round_trip(&j, "full job");

	/* The serialised form is readable: floats shortest, not 0.100000001. */
	cJSON *obj = sd_job_to_json(&j);
	char *text = cJSON_PrintUnformatted(obj);
	CHECK(strstr(text, "\"lr\":0.1,") != NULL);
	CHECK(strstr(text, "\"weight_decay\":0.0001,") != NULL);
	CHECK(strstr(text, "\"momentum\":0.875,") != NULL);
	CHECK(strstr(text, "\"seed\":9007199254740991,") != NULL);
	CHECK(strstr(text, "\"schedule\":\"step\"") != NULL);
	/* Only the nested form is written: the provider's keys in its object. */
	CHECK(strstr(text, ",\"provider\":{\"name\":\"sim\",\"catalog\":\"data/catalog-gce.json\","
	             "\"hazard_scale\":0.30000000000000004,\"boot_scale\":0.1,\"notice_scale\":2,"
	             "\"market_seed\":42},\"cluster\":") != NULL, "%s", text);
	CHECK(strstr(strstr(text, "\"hazard_scale\"") + 1, "\"hazard_scale\"") == NULL);
	/* ... and parses back as a job file. */
	struct sd_job again;
	CHECK_INT(sd_job_parse(&again, text, strlen(text), "again.json", &why), 0);
	CHECK(sd_job_equal(&j, &again));
	free(text);
	cJSON_Delete(obj);

	struct sd_job d;
	sd_job_defaults(&d);
	check_round_trip(&d, "defaults");

	/* The old flat form is read as the same job. */
	struct sd_job flat;
	rc = sd_job_parse(&flat, full_job_flat, sizeof full_job_flat - 1, "flat.json", &why);
	if (rc != 0)
		fprintf(stderr, "flat job: %s\n", why);
	CHECK_INT(rc, 0);
	check_full(&flat);
	CHECK(sd_job_equal(&flat, &j));

	/* Awkward values set by a program, not read from a file. */
	j.train.lr = nextafterf(0.1f, 1.0f);
	j.train.momentum = 0.0f;
	j.train.weight_decay = FLT_MIN;
	j.train.seed = 0;
	j.market_seed = 1ull << 53;
	j.comm_timeout_s = 1.0 / 3.0;
	j.hazard_scale = 123456.78901234567;
	j.boot_scale = 0;
	j.checkpoint_every = 1000000000;
	j.train.schedule = SD_LR_CONSTANT;
	j.ncluster = SD_JOB_CLUSTER_MAX;
	for (int i = 0; i < SD_JOB_CLUSTER_MAX; i++)
		snprintf(j.cluster[i], sizeof j.cluster[i], "offer-%c-%055d", '0' + i, 0);
	check_round_trip(&j, "awkward values");
	j.ncluster = 0;
	check_round_trip(&j, "no cluster");

	/* "model" as an ONNX file's path, as given, long as the field allows. */
	{
		struct sd_job o;
		const char otext[] = "{\"model\": \"models/my net.onnx\"}";
		CHECK_INT(sd_job_parse(&o, otext, sizeof otext - 1, "job.json", &why), 0);
		CHECK_STR(o.train.model, "models/my net.onnx");
		check_round_trip(&o, "onnx model");
		memset(o.train.model, 'a', sizeof o.train.model - 1);
		memcpy(o.train.model + sizeof o.train.model - 6, ".onnx", 6);
		check_round_trip(&o, "onnx model, longest path");
		CHECK_INT(sd_job_parse(&o, "{\"model\": \"net.onnx.bak\"}", 26, "job.json", &why), -1);
		free(why);
		why = NULL;
		/* From a file: relative to the file's directory, made absolute. */
		char dir[256], sub[300], path[400], want[700];
		make_tmpdir(dir, sizeof dir, "test-job-onnx.XXXXXX");
		snprintf(sub, sizeof sub, "%s/jobs", dir);
		CHECK(mkdir(sub, 0700) == 0);
		snprintf(path, sizeof path, "%s/job.json", sub);
		write_raw(path, otext, sizeof otext - 1);
		char *real = realpath(sub, NULL);
		snprintf(want, sizeof want, "%s/models/my net.onnx", real ? real : "?");
		free(real);
		CHECK_INT(sd_job_load(&o, path, &why), 0);
		CHECK_STR(o.train.model, want);
		const char abs[] = "{\"model\": \"/srv/m.onnx\"}";
		write_raw(path, abs, sizeof abs - 1);
		CHECK_INT(sd_job_load(&o, path, &why), 0);
		CHECK_STR(o.train.model, "/srv/m.onnx");
		/* data_dir likewise: relative to the file's directory, absolute
		 * kept; a built-in model name is no path. */
		const char rel[] = "{\"model\": \"mlp\", \"data_dir\": \"../tokens\"}";
		write_raw(path, rel, sizeof rel - 1);
		CHECK_INT(sd_job_load(&o, path, &why), 0);
		real = realpath(sub, NULL);
		snprintf(want, sizeof want, "%s/../tokens", real ? real : "?");
		free(real);
		CHECK_STR(o.train.data_dir, want);
		CHECK_STR(o.train.model, "mlp");
		const char absd[] = "{\"data_dir\": \"/srv/tokens\"}";
		write_raw(path, absd, sizeof absd - 1);
		CHECK_INT(sd_job_load(&o, path, &why), 0);
		CHECK_STR(o.train.data_dir, "/srv/tokens");
		rm_tree(dir);
	}

	/* With a decimal comma in LC_NUMERIC (a curses UI calls setlocale).
	 * CI installs the locales (Debian package locales-all); where they
	 * are missing this part is reported as a SKIP, not passed silently. */
	const char *comma = setlocale(LC_NUMERIC, "de_DE.UTF-8");
	if (!comma)
		comma = setlocale(LC_NUMERIC, "fr_FR.UTF-8");
	if (comma) {
		CHECK_STR(localeconv()->decimal_point, ",");
		check_round_trip(&j, "awkward values, decimal comma locale");
		setlocale(LC_NUMERIC, "C");
	} else {
		check_skip("round trip under a decimal-comma LC_NUMERIC: neither de_DE.UTF-8 nor "
		           "fr_FR.UTF-8 is installed (Debian package locales-all)");
	}

	/* sd_job_load reads a file and names it in errors. */
	char path[] = "/tmp/sd-test-job.XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	if (fd >= 0) {
		CHECK_INT(write(fd, full_job, sizeof full_job - 1), sizeof full_job - 1);
		close(fd);
		struct sd_job loaded;
		CHECK_INT(sd_job_load(&loaded, path, &why), 0);
		check_full(&loaded);
		fd = open(path, O_WRONLY | O_TRUNC);
		CHECK_INT(write(fd, "{\"epochs\": 0}", 13), 13);
		close(fd);
		CHECK_INT(sd_job_load(&loaded, path, &why), -1);
		CHECK(why && strncmp(why, path, strlen(path)) == 0 &&
		      strstr(why, ": epochs: expected a positive integer, got 0"));
		unlink(path);
		CHECK_INT(sd_job_load(&loaded, path, &why), -1);
		CHECK(why && strncmp(why, path, strlen(path)) == 0 && strstr(why, "No such file"));
	}
	CHECK_INT(sd_job_load(&again, "/", &why), -1);
	CHECK(why && strstr(why, "/: is a directory"));
	free(why);
}

/* The npy dataset's settings: parsed, written back exactly, compared. */
static void test_data_keys(void)
{
	static const char text[] =
		"{\"dataset\": \"npy\", \"data_dir\": \"/srv/arrays\", \"layout\": \"NHWC\","
		" \"normalize\": {\"mean\": [0.4914, 0.4822, 0.4465], \"std\": [0.247, 0.2435, 0.2616]},"
		" \"classes\": 100, \"augment\": \"crop4+flip\"}";
	struct sd_job j, d;
	char *why = NULL;
	int rc = sd_job_parse(&j, text, sizeof text - 1, "npy.json", &why);
	if (rc != 0)
		fprintf(stderr, "npy job: %s\n", why);
	CHECK_INT(rc, 0);
	CHECK_STR(j.train.dataset, "npy");
	CHECK_STR(j.train.layout, "NHWC");
	CHECK_STR(j.train.augment, "crop4+flip");
	CHECK_INT(j.train.classes, 100);
	CHECK_INT(j.train.norm_channels, 3);
	CHECK(j.train.norm_mean[0] == 0.4914f && j.train.norm_mean[1] == 0.4822f &&
	      j.train.norm_mean[2] == 0.4465f);
	CHECK(j.train.norm_std[0] == 0.247f && j.train.norm_std[1] == 0.2435f &&
	      j.train.norm_std[2] == 0.2616f);
	check_round_trip(&j, "npy job");
	cJSON *obj = sd_job_to_json(&j);
	char *out = cJSON_PrintUnformatted(obj);
	CHECK(strstr(out, "\"layout\":\"NHWC\",\"normalize\":{\"mean\":[0.4914,0.4822,0.4465],"
	             "\"std\":[0.247,0.2435,0.2616]},\"classes\":100,\"augment\":\"crop4+flip\"")
	      != NULL, "%s", out);
	free(out);
	cJSON_Delete(obj);

	/* Each setting matters to sd_job_equal. */
	struct sd_job k = j;
	k.train.norm_std[2] = nextafterf(0.2616f, 1.0f);
	CHECK(!sd_job_equal(&j, &k));
	check_round_trip(&k, "npy job, a std one ulp off");
	k = j;
	k.train.norm_channels = 2;
	CHECK(!sd_job_equal(&j, &k));
	k = j;
	k.train.classes = 99;
	CHECK(!sd_job_equal(&j, &k));
	k = j;
	snprintf(k.train.augment, sizeof k.train.augment, "none");
	CHECK(!sd_job_equal(&j, &k));
	k = j;
	snprintf(k.train.precision, sizeof k.train.precision, "bf16");
	CHECK(!sd_job_equal(&j, &k));
	check_round_trip(&k, "bf16 job");
	k = j;
	k.train.tf32 = 1;
	CHECK(!sd_job_equal(&j, &k));
	check_round_trip(&k, "tf32 job");
	k = j;
	snprintf(k.train.layout, sizeof k.train.layout, "NCHW");
	CHECK(!sd_job_equal(&j, &k));
	/* 16 channels of awkward floats. */
	k.train.norm_channels = 16;
	for (int c = 0; c < 16; c++) {
		k.train.norm_mean[c] = nextafterf(0.1f * (float)c, -1.0f);
		k.train.norm_std[c] = c ? 1.0f / (float)(c + 2) : FLT_MIN;
	}
	check_round_trip(&k, "16 channels");

	/* No normalisation is written as null, and null reads as none. */
	sd_job_defaults(&d);
	obj = sd_job_to_json(&d);
	out = cJSON_PrintUnformatted(obj);
	CHECK(strstr(out, "\"normalize\":null") != NULL, "%s", out);
	free(out);
	cJSON_Delete(obj);
	static const char none[] = "{\"normalize\": null}";
	CHECK_INT(sd_job_parse(&k, none, sizeof none - 1, "none.json", &why), 0);
	CHECK(sd_job_equal(&k, &d));
	free(why);
}

struct bad_job {
	const char *text;
	const char *want;   /* a substring of the message */
};

static const struct bad_job bad_jobs[] = {
	{ "{\"epochs\": -3}", "job.json: epochs: expected a positive integer, got -3" },
	{ "{\"epochs\": 0}", "job.json: epochs: expected a positive integer, got 0" },
	{ "{\"epochs\": 2.5}", "job.json: epochs: expected a positive integer, got 2.5" },
	{ "{\"epochs\": \"3\"}", "job.json: epochs: expected a positive integer, got \"3\"" },
	{ "{\"epochs\": 100001}", "job.json: epochs: expected an integer from 1 to 100000, got 100001" },
	{ "{\"epochs\": null}", "job.json: epochs: expected a positive integer, got null" },
	{ "{\"model\": \"vgg\"}",
	  "job.json: model: unknown model 'vgg' (known: mlp, cnn, resnet20, resnet32, or an ONNX "
	  "file's path ending in .onnx)" },
	{ "{\"model\": 3}", "job.json: model: expected a string, got 3" },
	{ "{\"dataset\": \"imagenet\"}",
	  "job.json: dataset: unknown dataset 'imagenet' (known: fashion-mnist, mnist, cifar10, synthetic, npy, tokens)" },
	/* The npy dataset's reading settings and augmentation. */
	{ "{\"layout\": \"HWC\"}", "job.json: layout: unknown layout 'HWC' (known: NCHW, NHWC)" },
	{ "{\"layout\": \"nchw\"}", "job.json: layout: unknown layout 'nchw' (known: NCHW, NHWC)" },
	{ "{\"augment\": \"flip\"}",
	  "job.json: augment: unknown augmentation 'flip' (known: none, crop4+flip)" },
	{ "{\"precision\": \"fp16\"}",
	  "job.json: precision: unknown precision 'fp16' (known: fp32, bf16, auto)" },
	{ "{\"precision\": 16}", "job.json: precision: expected a string, got 16" },
	{ "{\"tf32\": 1}", "job.json: tf32: expected true or false, got 1" },
	{ "{\"tf32\": \"true\"}", "job.json: tf32: expected true or false, got \"true\"" },
	{ "{\"classes\": 257}", "job.json: classes: expected an integer from 0 to 256, got 257" },
	{ "{\"classes\": -1}", "job.json: classes: expected a non-negative integer, got -1" },
	{ "{\"normalize\": [0.5]}",
	  "job.json: normalize: expected {\"mean\": [...], \"std\": [...]} or null, got [0.5]" },
	{ "{\"normalize\": {\"mean\": [0.5]}}", "job.json: normalize.std: missing" },
	{ "{\"normalize\": {\"mean\": [0.5], \"std\": [0.2], \"eps\": 1}}",
	  "job.json: normalize.eps: unknown key (normalize has mean and std)" },
	{ "{\"normalize\": {\"mean\": [0.5, 0.4], \"std\": [0.2]}}",
	  "job.json: normalize: 2 means but 1 stds (one of each per channel)" },
	{ "{\"normalize\": {\"mean\": [0.5], \"std\": [0]}}",
	  "job.json: normalize.std[0]: expected a positive number, got 0" },
	{ "{\"normalize\": {\"mean\": [\"a\"], \"std\": [1]}}",
	  "job.json: normalize.mean[0]: expected a finite number, got \"a\"" },
	{ "{\"normalize\": {\"mean\": [], \"std\": []}}",
	  "job.json: normalize.mean: expected an array of 1 to 16 numbers (one per channel), got []" },
	{ "{\"normalize\": {\"mean\": [0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0], \"std\": [1]}}",
	  "job.json: normalize.mean: expected an array of 1 to 16 numbers (one per channel)" },
	{ "{\"schedule\": \"linear\"}",
	  "job.json: schedule: unknown schedule 'linear' (known: constant, step, cosine)" },
	/* The provider object; its name's shape only (the registry, a layer
	 * above, checks it is known). */
	{ "{\"provider\": \"Sim!\"}",
	  "job.json: provider: expected a provider name ([a-z0-9-], 1 to 15 bytes), got \"Sim!\"" },
	{ "{\"provider\": \"\"}",
	  "job.json: provider: expected a provider name ([a-z0-9-], 1 to 15 bytes), got \"\"" },
	{ "{\"provider\": {\"name\": \"Sim!\"}}",
	  "job.json: provider.name: expected a provider name ([a-z0-9-], 1 to 15 bytes), got \"Sim!\"" },
	{ "{\"provider\": {\"name\": \"abcdefghijklmnop\"}}",
	  "job.json: provider.name: expected a provider name ([a-z0-9-], 1 to 15 bytes), got "
	  "\"abcdefghijklmnop\"" },
	{ "{\"provider\": {\"name\": \"a_b\"}}", "job.json: provider.name: expected a provider name" },
	{ "{\"provider\": {\"name\": \"\"}}", "job.json: provider.name: expected a provider name" },
	{ "{\"provider\": {\"name\": 3}}",
	  "job.json: provider.name: expected a provider name ([a-z0-9-], 1 to 15 bytes), got 3" },
	{ "{\"provider\": {\"name\": null}}", "job.json: provider.name: expected a provider name" },
	{ "{\"provider\": {}}", "job.json: provider.name: missing" },
	{ "{\"provider\": {\"hazard_scale\": 2, \"zone\": \"a\"}}", "job.json: provider.name: missing" },
	{ "{\"provider\": {\"name\": \"sim\", \"name\": \"gce\"}}", "job.json: provider.name: given twice" },
	{ "{\"provider\": 3}",
	  "job.json: provider: expected an object {\"name\": ...} or a provider name, got 3" },
	{ "{\"provider\": [\"sim\"]}",
	  "job.json: provider: expected an object {\"name\": ...} or a provider name, got [\"sim\"]" },
	{ "{\"provider\": \"sim\", \"provider\": {\"name\": \"sim\"}}", "job.json: provider: given twice" },
	{ "{\"provider\": {\"name\": \"sim\", \"hazard_scale\": -1}}",
	  "job.json: provider.hazard_scale: expected a number in (0, 1e+06], got -1" },
	{ "{\"provider\": {\"name\": \"sim\", \"notice_scale\": 0}}",
	  "job.json: provider.notice_scale: expected a number in (0, 1000], got 0" },
	{ "{\"provider\": {\"name\": \"sim\", \"boot_scale\": \"fast\"}}",
	  "job.json: provider.boot_scale: expected a number in [0, 1000], got \"fast\"" },
	{ "{\"provider\": {\"name\": \"sim\", \"market_seed\": 1.5}}",
	  "job.json: provider.market_seed: expected a non-negative integer, got 1.5" },
	{ "{\"provider\": {\"name\": \"sim\", \"catalog\": 7}}",
	  "job.json: provider.catalog: expected a string, got 7" },
	{ "{\"provider\": {\"name\": \"sim\", \"boot_scale\": 1, \"boot_scale\": 1}}",
	  "job.json: provider.boot_scale: given twice" },
	{ "{\"provider\": {\"name\": \"gce\", \"zone\": \"a\", \"zone\": \"b\"}}",
	  "job.json: provider.zone: given twice" },
	/* A typed key in both forms, in either order. */
	{ "{\"hazard_scale\": 2, \"provider\": {\"name\": \"sim\", \"hazard_scale\": 2}}",
	  "job.json: hazard_scale: given both at the top level and in provider" },
	{ "{\"provider\": {\"name\": \"sim\", \"market_seed\": 2}, \"market_seed\": 2}",
	  "job.json: market_seed: given both at the top level and in provider" },
	{ "{\"catalog\": \"\", \"provider\": {\"name\": \"gce\", \"catalog\": \"\"}}",
	  "job.json: catalog: given both at the top level and in provider" },
	{ "{\"hazard_scal\": 2}", "job.json: hazard_scal: unknown key (did you mean 'hazard_scale'?)" },
	{ "{\"name\": \"sim\"}", "job.json: name: unknown key" },
	{ "{\"lr\": 0}", "job.json: lr: expected a number in (0, 100], got 0" },
	{ "{\"lr\": -0.1}", "job.json: lr: expected a number in (0, 100], got -0.1" },
	{ "{\"lr\": 1e-300}", "job.json: lr: expected a number in (0, 100], got 1e-300" },
	{ "{\"lr\": 1e300}", "job.json: lr: expected a number in (0, 100], got 1e+300" },
	{ "{\"momentum\": 1}", "job.json: momentum: expected a number in [0, 1), got 1" },
	{ "{\"momentum\": 0.999999999}", "job.json: momentum: expected a number in [0, 1)" },
	{ "{\"weight_decay\": -1e-4}", "job.json: weight_decay: expected a number in [0, 1]" },
	{ "{\"global_batch\": 1048577}",
	  "job.json: global_batch: expected an integer from 1 to 1048576, got 1048577" },
	{ "{\"workers\": -1}", "job.json: workers: expected a non-negative integer, got -1" },
	{ "{\"workers\": 257}", "job.json: workers: expected an integer from 0 to 256, got 257" },
	{ "{\"threads_per_worker\": 0}", "job.json: threads_per_worker: expected a positive integer" },
	{ "{\"min_workers\": 0}", "job.json: min_workers: expected a positive integer, got 0" },
	{ "{\"min_workers\": 257}", "job.json: min_workers: expected an integer from 1 to 256, got 257" },
	{ "{\"comm_timeout\": 0.05}", "job.json: comm_timeout: expected a number in [0.1, 600], got 0.05" },
	{ "{\"comm_timeout\": 601}", "job.json: comm_timeout: expected a number in [0.1, 600], got 601" },
	{ "{\"comm_timeout\": \"5s\"}", "job.json: comm_timeout: expected a number in [0.1, 600], got \"5s\"" },
	{ "{\"log_every\": 0}", "job.json: log_every: expected a positive integer, got 0" },
	{ "{\"notice\": \"ibm\"}", "job.json: notice: unknown notice watcher 'ibm' (known: none, auto, gce, aws, azure)" },
	{ "{\"notice\": true}", "job.json: notice: expected a string, got true" },
	{ "{\"keep_checkpoints\": 0}", "job.json: keep_checkpoints: expected a positive integer, got 0" },
	{ "{\"checkpoint_every\": -200}", "job.json: checkpoint_every: expected a non-negative integer" },
	{ "{\"seed\": 9007199254740994}",
	  "job.json: seed: expected an integer from 0 to 9007199254740992, got 9007199254740994" },
	{ "{\"hazard_scale\": -1}", "job.json: hazard_scale: expected a number in (0, 1e+06], got -1" },
	{ "{\"provider\": \"sim\", \"boot_scale\": -1}",
	  "job.json: boot_scale: expected a number in [0, 1000], got -1" },
	{ "{\"hazard_scale\": 0}", "job.json: hazard_scale: expected a number in (0, 1e+06], got 0" },
	{ "{\"notice_scale\": 0}", "job.json: notice_scale: expected a number in (0, 1000], got 0" },
	{ "{\"cluster\": \"a\"}", "job.json: cluster: expected an array of offer ids, got \"a\"" },
	{ "{\"cluster\": [\"a\", 3]}", "job.json: cluster[1]: expected an offer id string, got 3" },
	{ "{\"cluster\": [\"\"]}", "job.json: cluster[0]: an offer id is 1 to 63 bytes, got 0" },
	{ "{\"cluster\": [\"a b\"]}", "job.json: cluster[0]: offer id 'a b' has a space" },
	{ "{\"cluster\": [\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"9\"]}",
	  "job.json: cluster: at most 8 offers, got 9" },
	{ "{\"epoch\": 3}", "job.json: epoch: unknown key (did you mean 'epochs'?)" },
	{ "{\"comm_timeout_s\": 3}", "job.json: comm_timeout_s: unknown key (did you mean 'comm_timeout'?)" },
	{ "{\"frobnicate\": 3}", "job.json: frobnicate: unknown key (see spotdeck-job(5))" },
	{ "{\"epochs\": 3, \"epochs\": 4}", "job.json: epochs: given twice" },
	{ "[]", "job.json: expected a JSON object at the top level, got []" },
	{ "\"cnn\"", "job.json: expected a JSON object at the top level, got \"cnn\"" },
	{ "{\n  \"epochs\": 3,\n  \"lr\": 0.1,,\n}\n", "job.json: invalid JSON at line 3, column 14" },
	{ "{\n  \"epochs\": 3\n", "job.json: invalid JSON at line 3, column 1 (the text ends early)" },
	{ "", "job.json: invalid JSON at line 1, column 1 (the text ends early)" },
	{ "{} {}", "job.json: invalid JSON at line 1, column 4" },
	{ "{\"data_dir\": 7}", "job.json: data_dir: expected a string, got 7" },
	/* The optimizer's settings: torch.optim.AdamW's ranges. */
	{ "{\"optimizer\": \"adam\"}",
	  "job.json: optimizer: unknown optimizer 'adam' (known: sgd, adamw)" },
	{ "{\"betas\": [0.9, 1]}", "job.json: betas: expected two numbers in [0, 1), got [0.9,1]" },
	{ "{\"betas\": [-0.1, 0.99]}",
	  "job.json: betas: expected two numbers in [0, 1), got [-0.1,0.99]" },
	{ "{\"betas\": [0.9]}", "job.json: betas: expected two numbers in [0, 1), got [0.9]" },
	{ "{\"betas\": [0.9, 0.99, 0.9]}",
	  "job.json: betas: expected two numbers in [0, 1), got [0.9,0.99,0.9]" },
	{ "{\"betas\": 0.9}", "job.json: betas: expected two numbers in [0, 1), got 0.9" },
	{ "{\"betas\": [0.9, \"x\"]}",
	  "job.json: betas: expected two numbers in [0, 1), got [0.9,\"x\"]" },
	/* 0.99999999 is the float 1. */
	{ "{\"betas\": [0.9, 0.99999999]}",
	  "job.json: betas: expected two numbers in [0, 1), got [0.9,0.99999999]" },
	{ "{\"eps\": -1e-8}", "job.json: eps: expected a number in [0, 1], got -1e-08" },
	/* The other optimizer's settings would be ignored: refused, whichever
	 * key comes first. */
	{ "{\"optimizer\": \"adamw\", \"momentum\": 0.9}",
	  "job.json: momentum: a setting of the sgd optimizer, but \"optimizer\" is \"adamw\"" },
	{ "{\"momentum\": 0.9, \"optimizer\": \"adamw\"}",
	  "job.json: momentum: a setting of the sgd optimizer, but \"optimizer\" is \"adamw\"" },
	{ "{\"eps\": 1e-6}",
	  "job.json: eps: a setting of the adamw optimizer, but \"optimizer\" is \"sgd\"" },
	{ "{\"optimizer\": \"sgd\", \"betas\": [0.9, 0.99]}",
	  "job.json: betas: a setting of the adamw optimizer, but \"optimizer\" is \"sgd\"" },
	{ "{\"clip_grad_norm\": 0}",
	  "job.json: clip_grad_norm: expected a number in (0, 1e+06], got 0" },
	{ "{\"clip_grad_norm\": -1}",
	  "job.json: clip_grad_norm: expected a number in (0, 1e+06], got -1" },
	{ "{\"clip_grad_norm\": \"1\"}",
	  "job.json: clip_grad_norm: expected a number in (0, 1e+06], got \"1\"" },
};

static void test_bad_jobs(void)
{
	for (size_t i = 0; i < sizeof bad_jobs / sizeof bad_jobs[0]; i++) {
		struct sd_job j;
		sd_job_defaults(&j);
		j.workers = 77;   /* untouched on failure */
		char *why = NULL;
		const char *text = bad_jobs[i].text;
		int rc = sd_job_parse(&j, text, strlen(text), "job.json", &why);
		if (rc != -1 || !why || !strstr(why, bad_jobs[i].want) || strchr(why, '\n')) {
			fprintf(stderr, "FAIL: bad job %zu: %s\n  want: %s\n  got:  %s (rc %d)\n", i,
			        text, bad_jobs[i].want, why ? why : "(null)", rc);
			check_failures++;
		}
		CHECK_INT(j.workers, 77);
		free(why);
	}

	/* Long strings. */
	char *why = NULL;
	struct sd_job j;
	size_t n = SD_PATH_MAX + 64;
	char *text = malloc(n);
	int len = snprintf(text, n, "{\"data_dir\": \"%0*d\"}", SD_PATH_MAX, 0);
	CHECK_INT(sd_job_parse(&j, text, (size_t)len, "job.json", &why), -1);
	CHECK_STR(why, "job.json: data_dir: longer than 4095 bytes");
	len = snprintf(text, n, "{\"data_dir\": \"%0*d\"}", SD_PATH_MAX - 1, 0);
	CHECK_INT(sd_job_parse(&j, text, (size_t)len, "job.json", &why), 0);
	CHECK_INT(strlen(j.train.data_dir), SD_PATH_MAX - 1);
	len = snprintf(text, n, "{\"cluster\": [\"%064d\"]}", 0);
	CHECK_INT(sd_job_parse(&j, text, (size_t)len, "job.json", &why), -1);
	CHECK_STR(why, "job.json: cluster[0]: an offer id is 1 to 63 bytes, got 64");
	/* An unknown key is shown cut short and without control characters. */
	len = snprintf(text, n, "{\"%0100d\\n\": 1}", 0);
	CHECK_INT(sd_job_parse(&j, text, (size_t)len, "job.json", &why), -1);
	CHECK(why && strlen(why) < 120 && strstr(why, "...: unknown key"));
	free(text);

	/* A NUL byte, a default file name, and from_json on a non-object. */
	CHECK_INT(sd_job_parse(&j, "{\n\0}", 4, NULL, &why), -1);
	CHECK_STR(why, "job: invalid JSON at line 2, column 1 (a NUL byte)");
	/* UTF-16 (with its byte-order mark, or without, where every other byte
	 * of ASCII text is NUL) is named, not reported as a NUL byte. */
	CHECK_INT(sd_job_parse(&j, "\xff\xfe{\0}\0", 6, "w.json", &why), -1);
	CHECK_STR(why, "w.json: the file is in UTF-16 or UTF-32, not UTF-8: save it as UTF-8 (iconv -f UTF-16 -t UTF-8)");
	CHECK_INT(sd_job_parse(&j, "{\0}\0", 4, "w.json", &why), -1);
	CHECK(why && strstr(why, "UTF-16"), "%s", why);
	CHECK_INT(sd_job_parse(&j, "\0{\0}", 4, "w.json", &why), -1);
	CHECK(why && strstr(why, "UTF-16"), "%s", why);
	/* A path a shell would have expanded. */
	CHECK_INT(sd_job_parse(&j, "{\"data_dir\": \"~/d\"}", 19, "t.json", &why), -1);
	CHECK_STR(why, "t.json: data_dir: '~/d' starts with '~', which only a shell expands: write the whole path");
	CHECK_INT(sd_job_parse(&j, "{\"data_dir\": \"d/~x\"}", 20, "t.json", &why), 0);
	CHECK_INT(sd_job_from_json(&j, NULL, "welcome.job", &why), -1);
	CHECK_STR(why, "welcome.job: expected a JSON object at the top level, got nothing");
	free(why);
}

/* The provider object: any well-formed name, the provider's own settings
 * kept as text, written back into the object, and the flat form. */
static void test_provider(void)
{
	struct sd_job j, k;
	char *why = NULL;
	static const char *const names[] = { "gce", "ssh", "my-cloud-2", "abcdefghijklmno", "0", "-" };
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		char text[96];
		int len = snprintf(text, sizeof text, "{\"provider\": {\"name\": \"%s\"}}", names[i]);
		CHECK_INT(sd_job_parse(&j, text, (size_t)len, "job.json", &why), 0);
		CHECK_STR(j.provider, names[i]);
		CHECK_STR(j.provider_settings, "");
		len = snprintf(text, sizeof text, "{\"provider\": \"%s\"}", names[i]);
		CHECK_INT(sd_job_parse(&k, text, (size_t)len, "job.json", &why), 0);
		CHECK(sd_job_equal(&j, &k));
		check_round_trip(&j, names[i]);
	}

	/* Other keys are the provider's, kept in the file's order. */
	static const char with_settings[] =
		"{\"epochs\": 2, \"provider\": {\"zone\": \"europe-west4-b\", \"name\": \"gce\",\n"
		"  \"hazard_scale\": 2, \"project\": \"p-1\", \"tags\": [\"a\", 1.5, null, true],\n"
		"  \"limits\": {\"gpus\": 8, \"note\": \"caf\\u00e9\"}, \"ratio\": 0.1, \"huge\": 1e300,\n"
		"  \"big\": 9007199254740993}, \"log_every\": 3}";
	CHECK_INT(sd_job_parse(&j, with_settings, sizeof with_settings - 1, "job.json", &why), 0);
	CHECK_STR(j.provider, "gce");
	CHECK(j.hazard_scale == 2.0);
	CHECK_INT(j.train.epochs, 2);
	CHECK_INT(j.log_every, 3);
	CHECK_STR(j.provider_settings,
	          "{\"zone\":\"europe-west4-b\",\"project\":\"p-1\",\"tags\":[\"a\",1.5,null,true],"
	          "\"limits\":{\"gpus\":8,\"note\":\"caf\xc3\xa9\"},\"ratio\":0.1,\"huge\":1e+300,"
	          "\"big\":9007199254740992}");
	check_round_trip(&j, "provider settings");

	/* The helper gives them parsed, a copy the caller owns. */
	cJSON *set = sd_job_provider_settings(&j);
	CHECK(cJSON_IsObject(set));
	CHECK_INT(cJSON_GetArraySize(set), 7);
	const cJSON *zone = cJSON_GetObjectItemCaseSensitive(set, "zone");
	CHECK(cJSON_IsString(zone) && strcmp(zone->valuestring, "europe-west4-b") == 0);
	const cJSON *gpus = cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(set, "limits"), "gpus");
	CHECK(cJSON_IsNumber(gpus) && gpus->valuedouble == 8);
	CHECK(cJSON_GetObjectItemCaseSensitive(set, "name") == NULL);
	CHECK(cJSON_GetObjectItemCaseSensitive(set, "hazard_scale") == NULL);
	cJSON_Delete(set);
	sd_job_defaults(&k);
	set = sd_job_provider_settings(&k);
	CHECK(cJSON_IsObject(set) && cJSON_GetArraySize(set) == 0);
	cJSON_Delete(set);

	/* Written back into the provider object, after the typed keys. */
	cJSON *obj = sd_job_to_json(&j);
	char *text = cJSON_PrintUnformatted(obj);
	CHECK(strstr(text, "\"provider\":{\"name\":\"gce\",\"catalog\":\"\",\"hazard_scale\":2,"
	             "\"boot_scale\":1,\"notice_scale\":1,\"market_seed\":1,\"zone\":\"europe-west4-b\","
	             "\"project\":\"p-1\",") != NULL, "%s", text);
	CHECK(strstr(text, "\"big\":9007199254740992},\"cluster\":[]}") != NULL, "%s", text);
	CHECK_INT(sd_job_parse(&k, text, strlen(text), "again.json", &why), 0);
	CHECK(sd_job_equal(&j, &k));
	CHECK_STR(k.provider_settings, j.provider_settings);
	free(text);
	cJSON_Delete(obj);

	/* The settings take part in sd_job_equal. */
	k.provider_settings[strlen(k.provider_settings) - 2] = '3';
	CHECK(!sd_job_equal(&j, &k));
	k.provider_settings[0] = '\0';
	CHECK(!sd_job_equal(&j, &k));

	/* The flat keys may sit beside an object that does not repeat them. */
	static const char mixed[] =
		"{\"hazard_scale\": 3, \"provider\": {\"name\": \"sim\", \"boot_scale\": 0.5}, \"market_seed\": 9}";
	CHECK_INT(sd_job_parse(&j, mixed, sizeof mixed - 1, "job.json", &why), 0);
	CHECK(j.hazard_scale == 3.0 && j.boot_scale == 0.5);
	CHECK_INT(j.market_seed, 9);
	CHECK_STR(j.provider_settings, "");

	/* At most 2047 bytes of settings: {"s":"xxx..."} is 8 bytes more than
	 * its x's. */
	size_t n = sizeof j.provider_settings + 64;
	char *big = malloc(n);
	int len = snprintf(big, n, "{\"provider\": {\"name\": \"x\", \"s\": \"%0*d\"}}",
	                   (int)sizeof j.provider_settings - 1 - 8, 0);
	CHECK_INT(sd_job_parse(&j, big, (size_t)len, "job.json", &why), 0);
	CHECK_INT(strlen(j.provider_settings), sizeof j.provider_settings - 1);
	check_round_trip(&j, "settings at the limit");
	len = snprintf(big, n, "{\"provider\": {\"name\": \"x\", \"s\": \"%0*d\"}}",
	               (int)sizeof j.provider_settings - 8, 0);
	CHECK_INT(sd_job_parse(&j, big, (size_t)len, "job.json", &why), -1);
	CHECK_STR(why, "job.json: provider: settings longer than 2047 bytes");
	CHECK_STR(j.provider, "x");   /* untouched */
	free(big);
	free(why);
}

/* The "autopilot" object is kept as its compact text for the controller
 * (which parses it with the catalog), written back as the object, compared
 * by sd_job_equal; anything but an object (or null: none) is refused. */
static void test_autopilot(void)
{
	struct sd_job j, back;
	char *why = NULL;
	const char *text = "{\"autopilot\": {\"deadline\": \"6h\", \"max_servers\": 4,\n \"allow\": [\"gce/*/k80/spot\"]}}";
	CHECK_INT(sd_job_parse(&j, text, strlen(text), "job.json", &why), 0);
	CHECK_STR(j.autopilot, "{\"deadline\":\"6h\",\"max_servers\":4,\"allow\":[\"gce/*/k80/spot\"]}");
	cJSON *obj = sd_job_to_json(&j);
	const cJSON *ap = cJSON_GetObjectItemCaseSensitive(obj, "autopilot");
	CHECK_INT(cJSON_IsObject(ap), 1);
	CHECK_INT(cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(ap, "max_servers")) == 4, 1);
	CHECK_INT(sd_job_from_json(&back, obj, "journal", &why), 0);
	CHECK_INT(sd_job_equal(&j, &back), 1);
	back.autopilot[0] = 0;
	CHECK_INT(sd_job_equal(&j, &back), 0);
	cJSON_Delete(obj);
	/* None: absent from the JSON written. */
	sd_job_defaults(&j);
	obj = sd_job_to_json(&j);
	CHECK_INT(cJSON_HasObjectItem(obj, "autopilot"), 0);
	cJSON_Delete(obj);
	text = "{\"autopilot\": null}";
	CHECK_INT(sd_job_parse(&j, text, strlen(text), "job.json", &why), 0);
	CHECK_STR(j.autopilot, "");
	text = "{\"autopilot\": \"6h\"}";
	CHECK_INT(sd_job_parse(&j, text, strlen(text), "job.json", &why), -1);
	CHECK_STR(why, "job.json: autopilot: expected an object, got \"6h\"");
	free(why);
	why = NULL;
}

int main(void)
{
	test_autopilot();
	test_data_keys();
	test_defaults();
	test_full();
	test_optimizer();
	test_bad_jobs();
	test_provider();
	return check_exit("test-job");
}
