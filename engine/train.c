/* engine/train.c - the training loop's state and checkpoints; see train.h. */
#include "engine/train.h"

#include <cJSON.h>
#include <math.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "engine/checkpoint.h"
#include "src/base/errors.h"
#include "engine/onnx.h"
#include "src/base/rng.h"

#define CKPT_FORMAT "spotdeck-train/1"

void sd_train_config_defaults(struct sd_train_config *c)
{
	memset(c, 0, sizeof *c);
	snprintf(c->model, sizeof c->model, "cnn");
	snprintf(c->dataset, sizeof c->dataset, "fashion-mnist");
	c->epochs = 3;
	c->global_batch = 64;
	c->lr = 0.05f;
	snprintf(c->optimizer, sizeof c->optimizer, "sgd");
	c->momentum = 0.9f;
	/* torch.optim.AdamW's defaults. */
	c->betas[0] = 0.9f;
	c->betas[1] = 0.999f;
	c->eps = 1e-8f;
	c->weight_decay = 5e-4f;
	c->schedule = SD_LR_COSINE;
	c->warmup_steps = 100;
	c->seed = 1;
	c->eval_batch = 1000;
	c->synthetic_samples = 10000;
	c->synthetic_c = 3;
	c->synthetic_h = 32;
	c->synthetic_w = 32;
	snprintf(c->backend, sizeof c->backend, "auto");
	c->device = -1;
	snprintf(c->precision, sizeof c->precision, "fp32");
	snprintf(c->layout, sizeof c->layout, "NCHW");
	snprintf(c->augment, sizeof c->augment, "none");
}

/* cfg's npy reading options, after checking the settings that only npy
 * reads are not given with another dataset. */
static int sd_train_data_options(const struct sd_train_config *cfg,
                                 struct sd_data_options *opt, enum sd_augment *aug, char **why)
{
	memset(opt, 0, sizeof *opt);
	if (sd_augment_parse(cfg->augment, aug) < 0)
		return sd_why(why, "augment: expected none or crop4+flip, got '%s'", cfg->augment);
	if (sd_layout_parse(cfg->layout, &opt->layout) < 0)
		return sd_why(why, "layout: expected NCHW or NHWC, got '%s'", cfg->layout);
	int npy = !strcmp(cfg->dataset, "npy");
	if (!npy && opt->layout != SD_LAYOUT_NCHW)
		return sd_why(why, "layout: only for dataset npy (%s has its own)", cfg->dataset);
	if (!npy && cfg->norm_channels)
		return sd_why(why, "normalize: only for dataset npy (%s has its own constants)",
		              cfg->dataset);
	if (!npy && cfg->classes)
		return sd_why(why, "classes: only for dataset npy (%s has its own)", cfg->dataset);
	int tokens = !strcmp(cfg->dataset, "tokens");
	if (tokens && cfg->block_size <= 0)
		return sd_why(why, "block_size: dataset tokens needs the sequence length (the "
		              "model's time dimension), got %d", cfg->block_size);
	if (!tokens && cfg->block_size)
		return sd_why(why, "block_size: only for dataset tokens (%s holds images)",
		              cfg->dataset);
	if (tokens && *aug != SD_AUGMENT_NONE)
		return sd_why(why, "augment: only for image datasets, not dataset tokens");
	if (cfg->norm_channels < 0 || cfg->norm_channels > SD_DATA_MAX_CHANNELS)
		return sd_why(why, "normalize: %d channels (1 to %d)", cfg->norm_channels,
		              SD_DATA_MAX_CHANNELS);
	opt->norm_channels = cfg->norm_channels;
	for (int i = 0; i < cfg->norm_channels; i++) {
		opt->mean[i] = cfg->norm_mean[i];
		opt->std[i] = cfg->norm_std[i];
	}
	opt->classes = cfg->classes;
	return 0;
}

/* Opens dataset tokens' train.bin and val.bin in cfg->data_dir into tr and
 * va and checks each holds a window of block_size + 1 tokens.  0, or -1
 * with *why naming the file and both closed. */
static int open_token_files(const struct sd_train_config *cfg, struct sd_tokens *tr,
                            struct sd_tokens *va, char **why)
{
	memset(tr, 0, sizeof *tr);
	memset(va, 0, sizeof *va);
	if (!cfg->data_dir[0])
		return sd_why(why, "data_dir: dataset tokens needs the directory of train.bin and "
		              "val.bin");
	char path[SD_PATH_MAX + 16];
	snprintf(path, sizeof path, "%s/train.bin", cfg->data_dir);
	if (sd_tokens_open(tr, path, why) < 0)
		return -1;
	snprintf(path, sizeof path, "%s/val.bin", cfg->data_dir);
	if (sd_tokens_open(va, path, why) < 0 || sd_tokens_check_block(tr, cfg->block_size, why) < 0 ||
	    sd_tokens_check_block(va, cfg->block_size, why) < 0) {
		sd_tokens_close(tr);
		sd_tokens_close(va);
		return -1;
	}
	if (sd_tokens_epoch_windows(tr, cfg->block_size) < (uint64_t)cfg->global_batch) {
		sd_why(why, "global_batch: %d is more than the %llu windows of %d tokens in %s",
		       cfg->global_batch,
		       (unsigned long long)sd_tokens_epoch_windows(tr, cfg->block_size),
		       cfg->block_size, tr->path);
		sd_tokens_close(tr);
		sd_tokens_close(va);
		return -1;
	}
	return 0;
}

/* The language model's fit to the token files: block_size is its sequence
 * length seq (the time dimension of an ONNX export, which is also the rows
 * of its position table used), and every token id of both files is below
 * its vocabulary.  file names the model. */
static int lm_fits(const struct sd_train_config *cfg, const char *file, int seq, int vocab,
                   const struct sd_tokens *tr, const struct sd_tokens *va, char **why)
{
	if (cfg->block_size > seq)
		return sd_why(why, "block_size: %d is more than the %d positions %s holds (its "
		              "position table, the time dimension it was exported with)",
		              cfg->block_size, seq, file);
	if (cfg->block_size != seq)
		return sd_why(why, "block_size: %d, but %s takes sequences of %d tokens (the time "
		              "dimension it was exported with)", cfg->block_size, file, seq);
	if (vocab <= 0)
		return sd_why(why, "%s: no vocabulary (classes) in the model", file);
	if (sd_tokens_check_vocab(tr, (uint32_t)vocab, why) < 0 ||
	    sd_tokens_check_vocab(va, (uint32_t)vocab, why) < 0)
		return -1;
	return 0;
}

int sd_train_check_data(const struct sd_train_config *cfg, char **why)
{
	struct sd_data_options opt;
	enum sd_augment aug;
	if (sd_train_data_options(cfg, &opt, &aug, why) < 0)
		return -1;
	if (!strcmp(cfg->dataset, "tokens")) {
		if (!sd_onnx_is_path(cfg->model))
			return sd_why(why, "model: %s is an image model; dataset tokens needs a "
			              "language model (an ONNX export of a GPT, examples/char-gpt/)",
			              cfg->model);
		struct sd_tokens tr, va;
		if (open_token_files(cfg, &tr, &va, why) < 0)
			return -1;
		sd_tokens_close(&tr);
		sd_tokens_close(&va);
		return 0;
	}
	if (strcmp(cfg->dataset, "npy") != 0)
		return 0;
	struct sd_dataset train, test;
	if (sd_dataset_load_npy(&train, &test, cfg->data_dir, &opt, why) < 0)
		return -1;
	int rc = 0;
	if (train.n < cfg->global_batch)
		rc = sd_why(why, "global_batch: %d is larger than the %d training samples of %s",
		            cfg->global_batch, train.n, train.src->x.path);
	sd_dataset_free(&train);
	sd_dataset_free(&test);
	return rc;
}

/* ---- the device model (engine/backend.h); all no-ops on the CPU ---------- */

/* Whether the environment variable name is set to 0, no or off. */
static int env_off(const char *name)
{
	const char *v = getenv(name);
	return v && (!strcmp(v, "0") || !strcmp(v, "no") || !strcmp(v, "off"));
}

/* Takes a queued failure (sd_trainer_apply) as this call's error. */
static int dev_pending(struct sd_trainer *t, char **why)
{
	if (!t->dev_error)
		return 0;
	sd_why(why, "%s", t->dev_error);
	free(t->dev_error);
	t->dev_error = NULL;
	return -1;
}

static int dev_upload_state(struct sd_trainer *t, char **why)
{
	if (!t->dev)
		return 0;
	const struct sd_backend_ops *o = t->backend.ops;
	if (o->model_upload(t->dev, SD_DEV_PARAMS, sd_model_params(t->model), why) < 0 ||
	    o->model_upload(t->dev, SD_DEV_VELOCITY, t->velocity, why) < 0 ||
	    o->model_upload(t->dev, SD_DEV_BUFFERS, sd_model_buffers(t->model), why) < 0 ||
	    (t->second && o->model_upload(t->dev, SD_DEV_SECOND, t->second, why) < 0))
		return -1;
	return 0;
}

int sd_trainer_sync_host(const struct sd_trainer *t, char **why)
{
	if (!t->dev)
		return 0;
	const struct sd_backend_ops *o = t->backend.ops;
	/* The host blocks are a cache of the device's: filling them does not
	 * change the trainer's state, hence the const. */
	if (o->model_download(t->dev, SD_DEV_PARAMS, sd_model_params(t->model), why) < 0 ||
	    o->model_download(t->dev, SD_DEV_VELOCITY, t->velocity, why) < 0 ||
	    o->model_download(t->dev, SD_DEV_BUFFERS, sd_model_buffers(t->model), why) < 0 ||
	    (t->second && o->model_download(t->dev, SD_DEV_SECOND, t->second, why) < 0))
		return -1;
	return 0;
}

/* Moves the model onto the device t->backend chose, or leaves it on the CPU
 * with the reason when that fails and CUDA was not demanded. */
static int dev_setup(struct sd_trainer *t, int demanded, char **why)
{
	const struct sd_backend_ops *o = t->backend.ops;
	char *err = NULL;
	/* The plugin reads SPOTDECK_CUDA_TF32 when it builds the device model
	 * (engine/cuda/dnn.c cu_env_init); the job's "tf32" sets it for that
	 * call only, unless the environment already says. */
	const char *tf32_env = getenv("SPOTDECK_CUDA_TF32");
	int tf32_set = t->cfg.tf32 && (!tf32_env || !*tf32_env);
	if (tf32_set)
		setenv("SPOTDECK_CUDA_TF32", "1", 1);
	int created = o->model_create(&t->dev, t->model, t->cfg.global_batch, &err);
	if (tf32_set)
		unsetenv("SPOTDECK_CUDA_TF32");
	if (created == 0) {
		if (dev_upload_state(t, &err) == 0) {
			size_t len = strlen(t->backend.reason);
			const char *how = o->model_describe ? o->model_describe(t->dev) : NULL;
			if (how && len + 3 < sizeof t->backend.reason)
				snprintf(t->backend.reason + len, sizeof t->backend.reason - len, "; %s", how);
			return 0;
		}
		o->model_destroy(t->dev);
		t->dev = NULL;
	}
	if (demanded) {
		sd_why(why, "CUDA backend asked for but the model cannot run there: %s", err);
		free(err);
		return -1;
	}
	memset(&t->backend, 0, sizeof t->backend);
	t->backend.kind = SD_BACKEND_CPU;
	snprintf(t->backend.name, sizeof t->backend.name, "cpu");
	snprintf(t->backend.reason, sizeof t->backend.reason, "CUDA device model failed: %s", err);
	free(err);
	return 0;
}

int sd_sha256_hex(const void *bytes, size_t len, char hex[65], char **why)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	if (!EVP_Digest(bytes, len, md, &mdlen, EVP_sha256(), NULL) || mdlen != 32)
		return sd_why(why, "SHA-256 failed (OpenSSL)");
	for (unsigned int i = 0; i < mdlen; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	return 0;
}

/* Whether the ONNX model's input and classes are the dataset's (c, h, w,
 * classes). */
static int onnx_fits(const struct sd_onnx_info *info, const char *path, const char *dataset, int c,
                     int h, int w, int classes, char **why)
{
	if (info->c == c && info->h == h && info->w == w && info->classes == classes)
		return 0;
	return sd_why(why, "%s: the model takes %dx%dx%d inputs and gives %d classes; dataset "
	              "%s has %dx%dx%d images and %d classes", path, info->c, info->h, info->w,
	              info->classes, dataset, c, h, w, classes);
}

/* The sequence length of the ONNX model in bytes[0..len): 0 for an image
 * model (built with room for one sample, then dropped). */
static int onnx_seq_len(const uint8_t *bytes, size_t len, const char *file, int *seq, char **why)
{
	struct sd_model *m = NULL;
	if (sd_model_create_onnx(&m, bytes, len, file, 1, why) < 0)
		return -1;
	*seq = sd_model_seq_len(m);
	sd_model_destroy(m);
	return 0;
}

/* A language model's check against dataset tokens (cfg): seq its sequence
 * length (0: an image model, refused), vocab its classes. */
static int lm_check(const struct sd_train_config *cfg, const struct sd_onnx_info *info, int seq,
                    char **why)
{
	if (seq <= 0)
		return sd_why(why, "%s: an image model (%dx%dx%d inputs); dataset tokens needs a "
		              "language model", cfg->model, info->c, info->h, info->w);
	struct sd_tokens tr, va;
	if (open_token_files(cfg, &tr, &va, why) < 0)
		return -1;
	int rc = lm_fits(cfg, cfg->model, seq, info->classes, &tr, &va, why);
	sd_tokens_close(&tr);
	sd_tokens_close(&va);
	return rc;
}

static int image_fits(const struct sd_train_config *cfg, const struct sd_onnx_info *info,
                      char **why);

int sd_train_check_model(const struct sd_train_config *cfg, const uint8_t *bytes, size_t len,
                         struct sd_onnx_info *out, char **why)
{
	if (out)
		memset(out, 0, sizeof *out);
	if (!sd_onnx_is_path(cfg->model))
		return 0;
	uint8_t *own = NULL;
	if (!bytes) {
		if (sd_onnx_read_file(cfg->model, &own, &len, why) < 0)
			return -1;
		bytes = own;
	}
	struct sd_onnx_info info;
	int rc = sd_onnx_check(bytes, len, cfg->model, &info, why);
	int seq = 0;
	/* Whether it is a language model is known once it is built: always
	 * for tokens, and for an image dataset only when its input does not
	 * fit, to say why. */
	if (rc == 0 && !strcmp(cfg->dataset, "tokens")) {
		rc = onnx_seq_len(bytes, len, cfg->model, &seq, why);
		if (rc == 0)
			rc = lm_check(cfg, &info, seq, why);
		if (rc == 0 && out)
			*out = info;
		free(own);
		return rc;
	}
	if (rc == 0) {
		char *e = NULL;
		if (image_fits(cfg, &info, &e) < 0) {
			rc = -1;
			if (onnx_seq_len(bytes, len, cfg->model, &seq, NULL) == 0 && seq > 0)
				sd_why(why, "%s: a language model (sequences of %d tokens); dataset %s "
				       "holds images (use dataset tokens)", cfg->model, seq, cfg->dataset);
			else
				sd_why(why, "%s", e);
		}
		free(e);
	}
	free(own);
	if (rc < 0)
		return -1;
	if (out)
		*out = info;
	return 0;
}

/* The ONNX image model's input and classes (info) against cfg's image
 * dataset; an unknown dataset is the data check's to name. */
static int image_fits(const struct sd_train_config *cfg, const struct sd_onnx_info *info,
                      char **why)
{
	int c = 0, h = 0, w = 0, classes = 10;
	if (!strcmp(cfg->dataset, "fashion-mnist") || !strcmp(cfg->dataset, "mnist")) {
		c = 1, h = 28, w = 28;
	} else if (!strcmp(cfg->dataset, "cifar10")) {
		c = 3, h = 32, w = 32;
	} else if (!strcmp(cfg->dataset, "synthetic")) {
		c = cfg->synthetic_c, h = cfg->synthetic_h, w = cfg->synthetic_w;
	} else if (!strcmp(cfg->dataset, "npy")) {
		/* The arrays are mapped, not read: this costs their headers and
		 * one pass over the labels, what sd_train_check_data costs. */
		struct sd_data_options opt;
		enum sd_augment aug;
		struct sd_dataset train, test;
		if (sd_train_data_options(cfg, &opt, &aug, why) < 0 ||
		    sd_dataset_load_npy(&train, &test, cfg->data_dir, &opt, why) < 0)
			return -1;
		c = train.c, h = train.h, w = train.w, classes = train.classes;
		sd_dataset_free(&train);
		sd_dataset_free(&test);
	} else {
		return 0;   /* an unknown dataset is the data check's to name */
	}
	return onnx_fits(info, cfg->model, cfg->dataset, c, h, w, classes, why);
}

/* The model of an ONNX file (cfg->model, or the bytes the config carries),
 * checked against the dataset: the same image shape and number of
 * classes. */
static int create_onnx(struct sd_trainer *t, const struct sd_train_config *cfg, int maxb, char **why)
{
	const char *path = cfg->model;
	uint8_t *bytes = NULL;
	const uint8_t *in = cfg->model_bytes;
	size_t len = cfg->model_len;
	struct sd_onnx_info info;
	if (!in) {
		if (sd_onnx_read_file(path, &bytes, &len, why) < 0)
			return -1;
		in = bytes;
	}
	int rc = sd_onnx_check(in, len, path, &info, why);
	if (rc == 0)
		sd_onnx_eval_export_warning(&info, path, t->model_warning, sizeof t->model_warning);
	if (rc == 0 && !t->lm)
		rc = onnx_fits(&info, path, t->cfg.dataset, t->train.c, t->train.h, t->train.w,
		               t->train.classes, why);
	if (rc == 0)
		rc = sd_model_create_onnx(&t->model, in, len, path, maxb, why);
	if (rc == 0 && t->lm) {
		int seq = sd_model_seq_len(t->model);
		if (seq <= 0)
			rc = sd_why(why, "%s: an image model (%dx%dx%d inputs); dataset tokens needs a "
			            "language model", path, info.c, info.h, info.w);
		else
			rc = lm_fits(cfg, path, seq, info.classes, &t->tok_train, &t->tok_val, why);
	}
	if (rc == 0 && sd_sha256_hex(in, len, t->model_sha256, why) < 0)
		rc = -1;
	free(bytes);
	return rc;
}

/* The job's training and test sets into t->train and t->test: .npy
 * files (opt), a synthetic set, or a built-in dataset's files.  0, or -1
 * with *why. */
static int load_datasets(struct sd_trainer *t, const struct sd_train_config *cfg,
                         const struct sd_data_options *opt, char **why)
{
	const char *dir = cfg->data_dir[0] ? cfg->data_dir : NULL;
	int rc;
	if (t->lm) {
		if (!sd_onnx_is_path(cfg->model))
			return sd_why(why, "model: %s is an image model; dataset tokens needs a "
			              "language model (an ONNX export of a GPT, examples/char-gpt/)",
			              cfg->model);
		rc = open_token_files(cfg, &t->tok_train, &t->tok_val, why);
	} else if (!strcmp(cfg->dataset, "npy")) {
		rc = sd_dataset_load_npy(&t->train, &t->test, dir, opt, why);
	} else if (!strcmp(cfg->dataset, "synthetic")) {
		int nt = cfg->synthetic_samples / 5 > 0 ? cfg->synthetic_samples / 5 : 1;
		rc = sd_dataset_synthetic(&t->train, cfg->synthetic_samples, cfg->synthetic_c,
		                          cfg->synthetic_h, cfg->synthetic_w, 10, cfg->seed, why);
		if (rc == 0)
			rc = sd_dataset_synthetic_split(&t->test, SD_SPLIT_TEST, nt, cfg->synthetic_c,
			                                cfg->synthetic_h, cfg->synthetic_w, 10, cfg->seed,
			                                why);
	} else {
		rc = sd_dataset_load(&t->train, cfg->dataset, dir, SD_SPLIT_TRAIN, why);
		if (rc == 0)
			rc = sd_dataset_load(&t->test, cfg->dataset, dir, SD_SPLIT_TEST, why);
	}
	return rc;
}

/* Where a device trainer's batches come from (img: floats per sample),
 * said in t->backend.reason: the whole training set uploaded when the
 * backend can hold it, else gathered on the host. */
static void place_training_set(struct sd_trainer *t, size_t img)
{
	/* The training set on the device, when it fits: a step then uploads
	 * its sample indices instead of its images.  Not with augmentation,
	 * which happens as the host gathers each batch. */
	if (t->dev && t->backend.ops->dataset_upload && !env_off("SPOTDECK_CUDA_DEVICE_DATA") &&
	    t->augment == SD_AUGMENT_NONE) {
		char *err = NULL;
		size_t len = strlen(t->backend.reason);
		/* A mapped (npy) training set is converted to floats for the
		 * upload; the upload synchronises, so the copy goes right after. */
		float *images = t->train.images;
		size_t bytes = (size_t)t->train.n * img * sizeof(float);
		long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
		int up = -1;
		if (!images && pages > 0 && page > 0 && bytes > (size_t)pages / 4 * (size_t)page) {
			/* A mapped set may be larger than memory: it then stays
			 * mapped and batches are gathered from it. */
			sd_why(&err, "the mapped training set is %.0f MiB as floats, over a quarter "
			       "of the host's memory", bytes / 1048576.0);
		} else {
			if (!images) {
				images = sd_malloc(bytes);
				sd_dataset_materialize(&t->train, images);
			}
			up = t->backend.ops->dataset_upload(t->dev, images, t->train.labels, t->train.n,
			                                    &err);
		}
		if (images != t->train.images)
			free(images);
		if (up == 0) {
			t->dev_data = 1;
			if (len + 3 < sizeof t->backend.reason)
				snprintf(t->backend.reason + len, sizeof t->backend.reason - len,
				         "; training set on the device");
		} else {
			if (len + 3 < sizeof t->backend.reason)
				snprintf(t->backend.reason + len, sizeof t->backend.reason - len,
				         "; batches gathered on the host (%s)", err);
		}
		free(err);
	} else if (t->dev && t->augment != SD_AUGMENT_NONE) {
		size_t len = strlen(t->backend.reason);
		if (len + 3 < sizeof t->backend.reason)
			snprintf(t->backend.reason + len, sizeof t->backend.reason - len,
			         "; batches gathered on the host (augment %s)", t->cfg.augment);
	}
}

int sd_train_check_optimizer(const struct sd_train_config *cfg, enum sd_optim_kind *kind,
                             char **why)
{
	enum sd_optim_kind k;
	if (sd_optim_kind_parse(cfg->optimizer, &k) < 0)
		return sd_why(why, "optimizer: expected sgd or adamw, got '%s'", cfg->optimizer);
	/* AdamW's ranges are torch.optim.AdamW's own checks. */
	for (int i = 0; i < 2; i++)
		if (!(cfg->betas[i] >= 0 && cfg->betas[i] < 1))
			return sd_why(why, "betas: beta%d must be in [0, 1), got %g", i + 1,
			              cfg->betas[i]);
	if (!(cfg->eps >= 0))
		return sd_why(why, "eps: must be 0 or more, got %g", cfg->eps);
	if (!(cfg->clip_grad_norm >= 0) || isinf(cfg->clip_grad_norm))
		return sd_why(why, "clip_grad_norm: must be a positive number (0: off), got %g",
		              cfg->clip_grad_norm);
	if (kind)
		*kind = k;
	return 0;
}

/* Sets t->precision and its reason, and the layers' process-wide
 * precision: asked (fp32 or bf16, already checked against the CPU), or
 * auto's pick.  bf16 only changes what the CPU's oneDNN convolutions and
 * the linear layers the matmul rule takes (engine/matmul-dnnl.h) read, so
 * an explicit bf16 with neither is said as fp32.  auto takes bf16 only
 * where the model has such convolutions and oneDNN has bf16 kernels: a
 * model of linear layers alone (mlp, a language model) stays fp32 unless
 * bf16 is asked for, as no trajectory of theirs in bf16 was measured
 * against fp32 over a whole run; a model on a CUDA device computes in fp32. */
static void choose_precision(struct sd_trainer *t, enum sd_conv_precision asked, int is_auto)
{
	const size_t rl = sizeof t->precision_reason;
	enum sd_conv_precision p = asked;
	if (!is_auto) {
		/* bf16 where it would change nothing is said as what runs: fp32. */
		const int none = asked == SD_CONV_BF16 && !t->dev &&
		                 sd_model_onednn_convs(t->model) == 0 &&
		                 sd_model_bf16_linears(t->model) == 0;
		if (asked == SD_CONV_BF16 && (t->dev || none))
			p = SD_CONV_FP32;
		snprintf(t->precision_reason, rl, "%s", t->dev && p != asked
		         ? "bf16 asked for, but the CUDA backend computes in fp32"
		         : none ? "bf16 asked for, but no convolution or linear layer of the "
		                  "model runs on oneDNN: it computes in fp32"
		         : "asked for");
	} else if (t->dev) {
		p = SD_CONV_FP32;
		snprintf(t->precision_reason, rl, "auto: the CUDA backend computes in fp32");
	} else if (!sd_conv2d_bf16_available()) {
		p = SD_CONV_FP32;
		snprintf(t->precision_reason, rl, "auto: %s",
		         sd_conv2d_onednn_version()
		         ? "oneDNN has no bf16 kernels on this CPU (no AVX512-BF16 or AMX)"
		         : "this build has no oneDNN");
	} else if (strcmp(sd_conv2d_bf16_isa(), "AMX") != 0) {
		/* oneDNN 2.6's AVX512-BF16 kernels (jit_bf16) are slower than
		 * its fp32 ones: resnet32 at batch 128, 2 threads, on an AMX
		 * Xeon capped with ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16, 335
		 * images/s in bf16 against 549 in fp32 (tests/bench/bf16-vs-torch,
		 * README "bf16 on the CPU").  An explicit bf16 still uses them. */
		p = SD_CONV_FP32;
		snprintf(t->precision_reason, rl, "auto: %s without AMX: oneDNN's bf16 kernels are "
		         "slower than fp32 there (ask for bf16 to use them)", sd_conv2d_bf16_isa());
	} else {
		int convs = sd_model_onednn_convs(t->model);
		int fcs = sd_model_bf16_linears(t->model);
		p = convs > 0 ? SD_CONV_BF16 : SD_CONV_FP32;
		if (convs > 0)
			snprintf(t->precision_reason, rl,
			         "auto: %s (oneDNN %s) for %d convolution%s and %d linear layer%s",
			         sd_conv2d_bf16_isa(), sd_conv2d_onednn_version(), convs,
			         convs == 1 ? "" : "s", fcs, fcs == 1 ? "" : "s");
		else
			snprintf(t->precision_reason, rl,
			         "auto: no convolution of the model runs on oneDNN%s",
			         fcs > 0 ? " (bf16 linear layers only when asked for)" : "");
	}
	t->precision = p;
	sd_conv2d_set_precision(p);
}

/* The job's precision other than auto: fp32 or bf16, bf16 only on the CPU
 * backend of a CPU oneDNN has bf16 kernels for.  0, or -1 with *why. */
static int parse_precision(const struct sd_train_config *cfg, enum sd_conv_precision *prec,
                           char **why)
{
	if (cfg->precision[0] && sd_conv2d_parse_precision(cfg->precision, prec, NULL) < 0)
		return sd_why(why, "precision: expected fp32, bf16 or auto, got '%s'", cfg->precision);
	if (*prec == SD_CONV_BF16 && !strcmp(cfg->backend, "cuda"))
		return sd_why(why, "precision: bf16 runs on the cpu backend only, backend is cuda");
	if (*prec == SD_CONV_BF16 && !sd_conv2d_bf16_available())
		return sd_why(why, "precision: bf16 needs oneDNN with bf16 kernels (a CPU with "
		              "AVX512-BF16 or AMX); %s", sd_conv2d_onednn_version()
		              ? "this CPU has neither" : "this build has no oneDNN");
	return 0;
}

/* The backend the job asks for, and the device model on it when it is a
 * device's.  0, or -1 with *why (the caller destroys t). */
static int choose_backend(struct sd_trainer *t, const struct sd_train_config *cfg, char **why)
{
	enum sd_backend_request req;
	if (sd_backend_request_parse(cfg->backend[0] ? cfg->backend : "auto", &req) < 0)
		return sd_why(why, "backend: expected auto, cpu or cuda, got '%s'", cfg->backend);
	if (sd_backend_choose(&t->backend, req, cfg->device, why) < 0)
		return -1;
	if (t->backend.ops && t->lm) {
		/* The device executors train images only: a language model
		 * stays on the CPU executor and the reason says so, as when a
		 * device model cannot be built. */
		if (t->backend.demanded) {
			return sd_why(why, "CUDA backend asked for but the model cannot run there: the "
			              "CUDA backend has no language-model path (sequences of tokens)");
		}
		memset(&t->backend, 0, sizeof t->backend);
		t->backend.kind = SD_BACKEND_CPU;
		snprintf(t->backend.name, sizeof t->backend.name, "cpu");
		snprintf(t->backend.reason, sizeof t->backend.reason,
		         "CUDA device model failed: the CUDA backend has no language-model path");
	}
	if (t->backend.ops) {
		if (dev_setup(t, t->backend.demanded, why) < 0)
			return -1;
	}
	return 0;
}

/* The staging buffers of a batch, page-locked for a device (straight
 * DMA) where it can give them, else ordinary memory; and where the
 * training set lives (place_training_set). */
static void alloc_batches(struct sd_trainer *t, int maxb, size_t img)
{
	/* Batches go to a device from page-locked memory (straight DMA). */
	if (t->dev) {
		t->xbuf = t->backend.ops->host_alloc((size_t)maxb * img * sizeof(float));
		t->ybuf = t->backend.ops->host_alloc((size_t)maxb);
	}
	place_training_set(t, img);
	if (!t->xbuf || !t->ybuf) {
		if (t->dev) {
			t->backend.ops->host_free(t->xbuf);
			t->backend.ops->host_free(t->ybuf);
		}
		t->xbuf = sd_malloc((size_t)maxb * img * sizeof(float));
		t->ybuf = sd_malloc((size_t)maxb);
		t->pinned = 0;
	} else {
		t->pinned = 1;
	}
}

int sd_trainer_create(struct sd_trainer **out, const struct sd_train_config *cfg, char **why)
{
	*out = NULL;
	if (cfg->global_batch <= 0)
		return sd_why(why, "batch: must be a positive number of samples, got %d", cfg->global_batch);
	if (cfg->epochs <= 0)
		return sd_why(why, "epochs: must be positive, got %d", cfg->epochs);
	if (!(cfg->lr > 0))
		return sd_why(why, "lr: must be positive, got %g", cfg->lr);
	if (cfg->eval_batch <= 0)
		return sd_why(why, "eval batch: must be positive, got %d", cfg->eval_batch);
	enum sd_optim_kind optim;
	if (sd_train_check_optimizer(cfg, &optim, why) < 0)
		return -1;
	/* auto is resolved once the model and its backend are known; until
	 * then the model is built in fp32 (its plans and workspace cover both). */
	const int prec_auto = !strcmp(cfg->precision, "auto");
	enum sd_conv_precision prec = SD_CONV_FP32;
	if (!prec_auto && parse_precision(cfg, &prec, why) < 0)
		return -1;
	sd_conv2d_set_precision(prec);
	struct sd_data_options opt;
	enum sd_augment aug;
	if (sd_train_data_options(cfg, &opt, &aug, why) < 0)
		return -1;
	struct sd_trainer *t = sd_calloc(1, sizeof *t);
	t->cfg = *cfg;
	t->data_id = sd_calloc(1, sizeof *t->data_id);
	t->data_id->n = -1;   /* hashed when a checkpoint needs it */
	t->opt = (struct sd_optim_settings){
		.kind = optim, .momentum = cfg->momentum, .weight_decay = cfg->weight_decay,
		.beta1 = cfg->betas[0], .beta2 = cfg->betas[1], .eps = cfg->eps,
		.clip_grad_norm = cfg->clip_grad_norm,
	};
	t->cfg.model_bytes = NULL;   /* borrowed for this call only */
	t->cfg.model_len = 0;
	t->augment = aug;
	t->lm = !strcmp(cfg->dataset, "tokens");
	if (load_datasets(t, cfg, &opt, why) < 0) {
		sd_trainer_destroy(t);
		return -1;
	}
	if (!t->lm && t->train.n < cfg->global_batch) {
		sd_trainer_destroy(t);
		return sd_why(why, "batch: %d is larger than the %d training samples",
		              cfg->global_batch, t->train.n);
	}
	/* A language model evaluates in chunks of at most global_batch
	 * windows (sd_trainer_eval_range): its activations, T times an
	 * image's per sample, are sized for the training batch alone. */
	int maxb = t->lm || cfg->global_batch > cfg->eval_batch ? cfg->global_batch
	                                                         : cfg->eval_batch;
	if (sd_onnx_is_path(cfg->model)) {
		if (create_onnx(t, cfg, maxb, why) < 0) {
			sd_trainer_destroy(t);
			return -1;
		}
	} else {
		if (sd_model_create(&t->model, cfg->model, t->train.c, t->train.h, t->train.w,
		                    t->train.classes, maxb, why) < 0) {
			sd_trainer_destroy(t);
			return -1;
		}
		sd_model_init(t->model, cfg->seed);
	}
	size_t np = sd_model_param_count(t->model);
	t->velocity = sd_calloc_big(np, sizeof(float), 64);
	if (t->opt.kind == SD_OPTIM_ADAMW)
		t->second = sd_calloc_big(np, sizeof(float), 64);
	if (choose_backend(t, cfg, why) < 0) {
		sd_trainer_destroy(t);
		return -1;
	}
	choose_precision(t, prec, prec_auto);
	t->perm_epoch = -1;
	if (t->lm) {
		t->steps_per_epoch = (long)(sd_tokens_epoch_windows(&t->tok_train, cfg->block_size) /
		                            (uint64_t)cfg->global_batch);
		size_t ids = (size_t)maxb * (size_t)cfg->block_size;
		t->tok_x = sd_malloc(ids * sizeof(int32_t));
		t->tok_y = sd_malloc(ids * sizeof(int32_t));
		t->last_starts = sd_malloc((size_t)maxb * sizeof(uint64_t));
	} else {
		t->perm = sd_malloc((size_t)t->train.n * sizeof(int32_t));
		t->steps_per_epoch = t->train.n / cfg->global_batch;
	}
	t->total_steps = t->steps_per_epoch * cfg->epochs;
	t->lr.kind = cfg->schedule;
	t->lr.base_lr = cfg->lr;
	t->lr.warmup_steps = cfg->warmup_steps;
	t->lr.total_steps = t->total_steps;
	t->lr.step_size = t->steps_per_epoch;   /* step schedule: decay every epoch */
	t->lr.gamma = 0.5f;
	t->lr.min_lr = 0.0f;
	size_t img = (size_t)t->train.c * t->train.h * t->train.w;
	if (t->lm) {
		*out = t;
		return 0;
	}
	alloc_batches(t, maxb, img);
	*out = t;
	return 0;
}

void sd_trainer_destroy(struct sd_trainer *t)
{
	if (!t)
		return;
	sd_dataset_free(&t->train);
	sd_dataset_free(&t->test);
	sd_tokens_close(&t->tok_train);
	sd_tokens_close(&t->tok_val);
	free(t->data_id);
	free(t->tok_x);
	free(t->tok_y);
	free(t->last_starts);
	/* The device model first: it has the host blocks page-locked. */
	if (t->dev)
		t->backend.ops->model_destroy(t->dev);
	if (t->pinned) {
		t->backend.ops->host_free(t->xbuf);
		t->backend.ops->host_free(t->ybuf);
	} else {
		free(t->xbuf);
		free(t->ybuf);
	}
	sd_model_destroy(t->model);
	free(t->velocity);
	free(t->second);
	free(t->perm);
	free(t->dev_error);
	free(t);
}

int sd_trainer_epoch_of(const struct sd_trainer *t, long step)
{
	return (int)(step / t->steps_per_epoch);
}

/* The seed of step `step`'s random draws: splitmix64 (Steele et al. 2014)
 * of the run's seed and the step, so neighbouring steps get unrelated
 * streams. */
static uint64_t step_seed(uint64_t seed, long step)
{
	uint64_t z = seed ^ (0x9e3779b97f4a7c15ULL * ((uint64_t)step + 1));
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

uint64_t sd_train_lm_window_start(const struct sd_tokens *train, int block, uint64_t seed,
                                  long steps_per_epoch, int global_batch, long step, int index)
{
	uint64_t epoch = (uint64_t)(step / steps_per_epoch);
	uint64_t pos = (uint64_t)(step % steps_per_epoch) * (uint64_t)global_batch + (uint64_t)index;
	return sd_tokens_train_start(train, block, seed, epoch, pos);
}

void sd_train_lm_batch(const struct sd_tokens *train, int block, uint64_t seed,
                       long steps_per_epoch, int global_batch, long step, int offset, int count,
                       uint64_t *starts, int32_t *x, int32_t *y)
{
	for (int i = 0; i < count; i++) {
		starts[i] = sd_train_lm_window_start(train, block, seed, steps_per_epoch, global_batch,
		                                     step, offset + i);
		sd_tokens_window(train, starts[i], block, x + (size_t)i * block, y + (size_t)i * block);
	}
}

/* sd_trainer_local_grad of a language model (train.h). */
static int lm_local_grad(struct sd_trainer *t, long step, int offset, int count,
                         double *loss_sum, int *correct, char **why)
{
	int T = t->cfg.block_size;
	sd_train_lm_batch(&t->tok_train, T, t->cfg.seed, t->steps_per_epoch, t->cfg.global_batch,
	                  step, offset, count, t->last_starts, t->tok_x, t->tok_y);
	t->last_samples = NULL;
	t->last_count = count;
	t->last_step = step;
	sd_model_set_noise(t->model, step_seed(t->cfg.seed, step), (uint64_t)offset);
	double sum = 0;
	if (sd_model_train_tokens(t->model, t->tok_x, t->tok_y, count,
	                          1.0f / ((float)t->cfg.global_batch * (float)T), &sum, why) < 0)
		return -1;
	if (loss_sum)
		*loss_sum = sum / T;
	if (correct)
		*correct = 0;
	return 0;
}

int sd_trainer_local_grad(struct sd_trainer *t, long step, int offset, int count,
                          double *loss_sum, int *correct, char **why)
{
	if (offset < 0 || count < 0 || offset + count > t->cfg.global_batch)
		return sd_why(why, "slice [%d, %d) outside the global batch of %d",
		              offset, offset + count, t->cfg.global_batch);
	if (t->lm)
		return lm_local_grad(t, step, offset, count, loss_sum, correct, why);
	int epoch = sd_trainer_epoch_of(t, step);
	if (epoch != t->perm_epoch) {
		sd_epoch_permutation(t->perm, t->train.n, t->cfg.seed, epoch);
		t->perm_epoch = epoch;
	}
	int pos = (int)(step % t->steps_per_epoch) * t->cfg.global_batch + offset;
	t->last_samples = t->perm + pos;
	t->last_count = count;
	t->last_step = step;
	if (t->dev) {
		if (dev_pending(t, why) < 0)
			return -1;
		double l = 0;
		int c = 0;
		float scale = 1.0f / (float)t->cfg.global_batch;
		int rc;
		if (t->dev_data) {
			rc = t->backend.ops->train_indexed(t->dev, t->perm + pos, count, scale, &l, &c, why);
		} else {
			sd_dataset_gather_train(&t->train, t->perm, pos, count, t->augment,
			                        t->cfg.seed, epoch, t->xbuf, t->ybuf);
			rc = t->backend.ops->train_batch(t->dev, t->xbuf, t->ybuf, count, scale, &l, &c,
			                                 why);
		}
		if (rc < 0)
			return -1;
		if (loss_sum)
			*loss_sum = l;
		if (correct)
			*correct = c;
		return 0;
	}
	sd_dataset_gather_train(&t->train, t->perm, pos, count, t->augment, t->cfg.seed, epoch,
	                        t->xbuf, t->ybuf);
	/* Dropout's masks: a function of (run seed, step, the sample's place
	 * in the global batch), so a replayed or resumed step, or the same
	 * step split over another number of workers, draws the same masks. */
	sd_model_set_noise(t->model, step_seed(t->cfg.seed, step), (uint64_t)offset);
	return sd_model_train_batch(t->model, t->xbuf, t->ybuf, count,
	                            1.0f / (float)t->cfg.global_batch, loss_sum, correct, why);
}

/* clip_grad_norm_ on the device's gradient block. */
static int dev_clip(struct sd_trainer *t, char **why)
{
	const struct sd_backend_ops *o = t->backend.ops;
	double sumsq = 0;
	if (o->grad_sumsq(t->dev, &sumsq, why) < 0)
		return -1;
	t->last_grad_norm = sqrt(sumsq);
	float coef = sd_clip_coef(sumsq, t->opt.clip_grad_norm);
	return coef == 1.0f ? 0 : o->grad_scale(t->dev, coef, why);
}

/* The update on the device, queued. */
static int dev_apply(struct sd_trainer *t, float lr, char **why)
{
	const struct sd_backend_ops *o = t->backend.ops;
	const struct sd_optim_settings *s = &t->opt;
	if (s->clip_grad_norm > 0 && dev_clip(t, why) < 0)
		return -1;
	if (s->kind == SD_OPTIM_ADAMW) {
		/* AdamW's step count after this update, as sd_optim_step's:
		 * the run's steps so far plus this one (train.h). */
		struct sd_adamw_scalars k;
		sd_adamw_scalars(&k, lr, s->beta1, s->beta2, s->eps, s->weight_decay, t->step + 1);
		return o->adamw_step(t->dev, &k, why);
	}
	return o->sgd_step(t->dev, lr, s->momentum, s->weight_decay, why);
}

void sd_trainer_apply(struct sd_trainer *t)
{
	float lr = sd_lr_at(&t->lr, t->step);
	if (t->dev) {
		char *err = NULL;
		if (!t->dev_error && dev_apply(t, lr, &err) < 0)
			t->dev_error = err;
		else
			free(err);
		t->step++;
		return;
	}
	t->last_grad_norm = sd_optim_step(&t->opt, sd_model_params(t->model), t->velocity, t->second,
	                                  sd_model_grads(t->model), sd_model_param_count(t->model),
	                                  lr, t->step);
	t->step++;
}

int sd_trainer_eval_batch(struct sd_trainer *t, const float *x, const uint8_t *labels, int n,
                          double *loss_sum, int *correct, char **why)
{
	if (!t->dev)
		return sd_model_eval_batch(t->model, x, labels, n, loss_sum, correct, why);
	if (dev_pending(t, why) < 0)
		return -1;
	double l = 0;
	int c = 0;
	if (t->backend.ops->eval_batch(t->dev, x, labels, n, &l, &c, why) < 0)
		return -1;
	if (loss_sum)
		*loss_sum = l;
	if (correct)
		*correct = c;
	return 0;
}

int sd_trainer_comm_begin(struct sd_trainer *t, enum sd_state_part part, int on_device,
                          struct sd_state_view *v, char **why)
{
	memset(v, 0, sizeof *v);
	v->param_count = sd_model_param_count(t->model);
	v->buffer_count = sd_model_buffer_count(t->model);
	if (on_device && !t->dev)
		return sd_why(why, "collective on device memory, but the model runs on the CPU");
	if (dev_pending(t, why) < 0)
		return -1;
	const struct sd_backend_ops *o = t->backend.ops;
	if (on_device) {
		v->grads = o->model_block(t->dev, SD_DEV_GRADS);
		v->params = o->model_block(t->dev, SD_DEV_PARAMS);
		v->velocity = o->model_block(t->dev, SD_DEV_VELOCITY);
		v->buffers = o->model_block(t->dev, SD_DEV_BUFFERS);
		if (t->second) {
			v->second = o->model_block(t->dev, SD_DEV_SECOND);
			if (!v->second)
				return sd_why(why, "AdamW's second moment: no room on the device");
		}
		return 0;
	}
	v->grads = sd_model_grads(t->model);
	v->grad_tail = SD_MODEL_GRAD_TAIL;
	v->params = sd_model_params(t->model);
	v->velocity = t->velocity;
	v->second = t->second;
	v->buffers = sd_model_buffers(t->model);
	if (!t->dev)
		return 0;
	if (part & SD_STATE_GRADS && o->model_download(t->dev, SD_DEV_GRADS, v->grads, why) < 0)
		return -1;
	if (part & SD_STATE_MODEL && sd_trainer_sync_host(t, why) < 0)
		return -1;
	return 0;
}

int sd_trainer_comm_end(struct sd_trainer *t, enum sd_state_part part, int on_device, char **why)
{
	if (on_device || !t->dev)
		return 0;
	const struct sd_backend_ops *o = t->backend.ops;
	if (part & SD_STATE_GRADS &&
	    o->model_upload(t->dev, SD_DEV_GRADS, sd_model_grads(t->model), why) < 0)
		return -1;
	if (part & SD_STATE_MODEL && dev_upload_state(t, why) < 0)
		return -1;
	return 0;
}

const char *sd_trainer_nccl_device(const struct sd_trainer *t)
{
	if (!t->dev || !t->backend.ops->nccl || !t->backend.device.uuid[0])
		return NULL;
	return t->backend.device.uuid;
}

int sd_trainer_step(struct sd_trainer *t, double *mean_loss, double *train_accuracy, char **why)
{
	double loss;
	int correct;
	if (sd_trainer_local_grad(t, t->step, 0, t->cfg.global_batch, &loss, &correct, why) < 0)
		return -1;
	sd_trainer_apply(t);
	if (mean_loss)
		*mean_loss = loss / t->cfg.global_batch;
	if (train_accuracy)
		*train_accuracy = (double)correct / t->cfg.global_batch;
	return 0;
}

long sd_trainer_eval_count(const struct sd_trainer *t)
{
	if (!t->lm)
		return t->test.n;
	uint64_t n = sd_tokens_eval_windows(&t->tok_val, t->cfg.block_size);
	return n < SD_TRAIN_LM_EVAL_WINDOWS ? (long)n : SD_TRAIN_LM_EVAL_WINDOWS;
}

int sd_trainer_eval_range(struct sd_trainer *t, long lo, long hi, double *loss_sum,
                          long *correct, char **why)
{
	int T = t->cfg.block_size;
	int chunk = t->cfg.eval_batch;
	if (t->lm && chunk > t->cfg.global_batch)
		chunk = t->cfg.global_batch;
	double total = 0;
	long right = 0;
	for (long pos = lo; pos < hi; pos += chunk) {
		int nb = hi - pos < chunk ? (int)(hi - pos) : chunk;
		double l = 0;
		int c = 0;
		if (t->lm) {
			/* Evaluation window i starts at i * T (engine/tokens.h). */
			for (int i = 0; i < nb; i++)
				sd_tokens_window(&t->tok_val, (uint64_t)(pos + i) * (uint64_t)T, T,
				                 t->tok_x + (size_t)i * T, t->tok_y + (size_t)i * T);
			if (sd_model_eval_tokens(t->model, t->tok_x, t->tok_y, nb, &l, why) < 0)
				return -1;
			l /= T;
		} else {
			/* Through the staging buffer (eval_batch samples fit it): the
			 * test set may be a mapped file converted as it is gathered. */
			sd_dataset_gather(&t->test, NULL, (int)pos, nb, t->xbuf, t->ybuf);
			if (sd_trainer_eval_batch(t, t->xbuf, t->ybuf, nb, &l, &c, why) < 0)
				return -1;
		}
		total += l;
		right += c;
	}
	if (loss_sum)
		*loss_sum = total;
	if (correct)
		*correct = right;
	return 0;
}

int sd_trainer_evaluate(struct sd_trainer *t, double *loss, double *accuracy, char **why)
{
	if (t->lm) {
		long n = sd_trainer_eval_count(t);
		double sum;
		if (sd_trainer_eval_range(t, 0, n, &sum, NULL, why) < 0)
			return -1;
		if (loss)
			*loss = sum / n;
		if (accuracy)
			*accuracy = -1;
		return 0;
	}
	double total = 0;
	long right = 0;
	for (int pos = 0; pos < t->test.n; pos += t->cfg.eval_batch) {
		int nb = t->test.n - pos < t->cfg.eval_batch ? t->test.n - pos : t->cfg.eval_batch;
		double l;
		int c;
		/* Through the staging buffer (eval_batch samples fit it): the test
		 * set may be a mapped file that is converted as it is gathered. */
		sd_dataset_gather(&t->test, NULL, pos, nb, t->xbuf, t->ybuf);
		if (sd_trainer_eval_batch(t, t->xbuf, t->ybuf, nb, &l, &c, why) < 0)
			return -1;
		total += l;
		right += c;
	}
	if (loss)
		*loss = total / t->test.n;
	if (accuracy)
		*accuracy = (double)right / t->test.n;
	return 0;
}

uint32_t sd_trainer_param_checksum(const struct sd_trainer *t)
{
	if (t->dev) {
		char *err = NULL;
		if (t->backend.ops->model_download(t->dev, SD_DEV_PARAMS, sd_model_params(t->model),
		                                   &err) < 0) {
			/* Kept for the next call that can report it (see train.h). */
			struct sd_trainer *w = (struct sd_trainer *)t;
			if (!w->dev_error)
				w->dev_error = err;
			else
				free(err);
			return 0;
		}
	}
	const float *p = sd_model_params(t->model);
	size_t bytes = sd_model_param_count(t->model) * sizeof(float);
	uLong crc = crc32(0L, Z_NULL, 0);
	/* zlib's length argument is 32-bit; feed large buffers in pieces. */
	for (size_t off = 0; off < bytes; off += 1u << 30) {
		size_t len = bytes - off < (1u << 30) ? bytes - off : (1u << 30);
		crc = crc32(crc, (const Bytef *)p + off, (uInt)len);
	}
	return (uint32_t)crc;
}

/* The tensor table as text, one "name ndim d0 d1 d2 d3 offset count" line per
 * tensor; a checkpoint from another model differs here. */
static char *tensor_table(const struct sd_model *m)
{
	int n;
	const struct sd_tensor_info *ti = sd_model_tensors(m, &n);
	size_t cap = (size_t)n * 128 + 1, len = 0;
	char *s = sd_malloc(cap);
	s[0] = 0;
	for (int i = 0; i < n; i++)
		len += (size_t)snprintf(s + len, cap - len, "%s %d %d %d %d %d %zu %zu\n",
		                        ti[i].name, ti[i].ndim, ti[i].shape[0], ti[i].shape[1],
		                        ti[i].shape[2], ti[i].shape[3], ti[i].offset, ti[i].count);
	return s;
}

/* The identity of the run's data files into t->data_id, hashed once, on
 * the first checkpoint saved or loaded: a worker that never checkpoints
 * never reads its data twice.  The pointer's target is a cache, so a
 * const trainer may fill it. */
static int trainer_data_id(const struct sd_trainer *t, char **why)
{
	if (t->data_id->n >= 0)
		return 0;
	if (sd_ckpt_data_id(t->cfg.dataset, t->cfg.data_dir, t->data_id, why) < 0) {
		t->data_id->n = -1;
		return -1;
	}
	return 0;
}

int sd_trainer_save(const struct sd_trainer *t, const char *path, char **why)
{
	/* One file format whatever the backend: the device's state comes back
	 * to the host blocks and is written by the code below, so a checkpoint
	 * written on a GPU resumes on a CPU and back. */
	if (sd_trainer_sync_host(t, why) < 0 || trainer_data_id(t, why) < 0)
		return -1;
	cJSON *meta = cJSON_CreateObject();
	cJSON_AddStringToObject(meta, "format", CKPT_FORMAT);
	cJSON_AddStringToObject(meta, "model", t->cfg.model);
	cJSON_AddStringToObject(meta, "dataset", t->cfg.dataset);
	/* A key readers before it ignore, so the format stays the same. */
	if (t->model_sha256[0])
		cJSON_AddStringToObject(meta, "model_sha256", t->model_sha256);
	if (t->data_id->n > 0)
		cJSON_AddItemToObject(meta, "data", sd_ckpt_data_id_json(t->data_id));
	cJSON_AddNumberToObject(meta, "param_count", (double)sd_model_param_count(t->model));
	cJSON_AddNumberToObject(meta, "buffer_count", (double)sd_model_buffer_count(t->model));
	cJSON_AddNumberToObject(meta, "global_batch", t->cfg.global_batch);
	cJSON_AddNumberToObject(meta, "step", (double)t->step);
	cJSON_AddNumberToObject(meta, "epoch", t->steps_per_epoch ? (double)(t->step / t->steps_per_epoch) : 0);
	/* The data cursor: the next global sample position within the epoch. */
	cJSON_AddNumberToObject(meta, "data_cursor",
	                        (double)((t->step % t->steps_per_epoch) * t->cfg.global_batch));
	/* RNG state: shuffles are a pure function of (seed, epoch), so the seed is
	 * the whole random state of a run; stored as a string to keep 64 bits. */
	char seed[32];
	snprintf(seed, sizeof seed, "%llu", (unsigned long long)t->cfg.seed);
	cJSON_AddStringToObject(meta, "seed", seed);
	/* SGD's checkpoints stay as they were (no "optimizer": SGD), so
	 * older readers still load them. */
	if (t->opt.kind == SD_OPTIM_ADAMW) {
		cJSON_AddStringToObject(meta, "optimizer", "adamw");
		cJSON_AddNumberToObject(meta, "adamw_step", (double)t->step);
	}
	char *meta_text = cJSON_PrintUnformatted(meta);
	cJSON_Delete(meta);
	if (!meta_text)
		sd_oom();
	char *table = tensor_table(t->model);
	struct sd_model *m = t->model;
	struct sd_ckpt_section sec[6];
	memset(sec, 0, sizeof sec);
	snprintf(sec[0].name, sizeof sec[0].name, "meta");
	sec[0].data = meta_text;
	sec[0].bytes = strlen(meta_text);
	snprintf(sec[1].name, sizeof sec[1].name, "tensors");
	sec[1].data = table;
	sec[1].bytes = strlen(table);
	snprintf(sec[2].name, sizeof sec[2].name, "params");
	sec[2].data = sd_model_params(m);
	sec[2].bytes = sd_model_param_count(m) * sizeof(float);
	snprintf(sec[3].name, sizeof sec[3].name, "%s",
	         t->opt.kind == SD_OPTIM_ADAMW ? "adamw_m" : "momentum");
	sec[3].data = t->velocity;
	sec[3].bytes = sd_model_param_count(m) * sizeof(float);
	snprintf(sec[4].name, sizeof sec[4].name, "buffers");
	sec[4].data = sd_model_buffers(m);
	sec[4].bytes = sd_model_buffer_count(m) * sizeof(float);
	int nsec = 5;
	if (t->second) {
		snprintf(sec[5].name, sizeof sec[5].name, "adamw_v");
		sec[5].data = t->second;
		sec[5].bytes = sd_model_param_count(m) * sizeof(float);
		nsec = 6;
	}
	int rc = sd_ckpt_write(path, sec, nsec, why);
	free(meta_text);
	free(table);
	return rc;
}

static const struct sd_ckpt_section *need(const struct sd_ckpt *c, const char *path,
                                          const char *name, uint64_t bytes, char **why)
{
	const struct sd_ckpt_section *s = sd_ckpt_find(c, name);
	if (!s) {
		sd_why(why, "%s: checkpoint has no '%s' section", path, name);
		return NULL;
	}
	if (bytes != (uint64_t)-1 && s->bytes != bytes) {
		sd_why(why, "%s: section '%s' holds %llu bytes, this model needs %llu "
		       "(checkpoint from another model?)", path, name,
		       (unsigned long long)s->bytes, (unsigned long long)bytes);
		return NULL;
	}
	return s;
}

int sd_trainer_load(struct sd_trainer *t, const char *path, char **why)
{
	struct sd_ckpt c;
	if (sd_ckpt_read(path, &c, why) < 0)
		return -1;
	int rc = -1;
	cJSON *meta = NULL;
	char *table = NULL;
	const struct sd_ckpt_section *sm = need(&c, path, "meta", (uint64_t)-1, why);
	if (!sm)
		goto out;
	meta = cJSON_ParseWithLength(sm->data, sm->bytes);
	const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(meta, "format");
	const cJSON *model = cJSON_GetObjectItemCaseSensitive(meta, "model");
	const cJSON *dataset = cJSON_GetObjectItemCaseSensitive(meta, "dataset");
	const cJSON *gb = cJSON_GetObjectItemCaseSensitive(meta, "global_batch");
	const cJSON *step = cJSON_GetObjectItemCaseSensitive(meta, "step");
	if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, CKPT_FORMAT) ||
	    !cJSON_IsString(model) || !cJSON_IsString(dataset) ||
	    !cJSON_IsNumber(gb) || !cJSON_IsNumber(step) || step->valuedouble < 0) {
		sd_why(why, "%s: section 'meta' is not a %s record", path, CKPT_FORMAT);
		goto out;
	}
	if (strcmp(model->valuestring, t->cfg.model)) {
		sd_why(why, "%s: checkpoint is of model '%s', this run trains '%s'",
		       path, model->valuestring, t->cfg.model);
		goto out;
	}
	/* The same ONNX file as when the checkpoint was written: a file
	 * exported again under the same path is another model. */
	const cJSON *sha = cJSON_GetObjectItemCaseSensitive(meta, "model_sha256");
	const char *was = cJSON_IsString(sha) ? sha->valuestring : "";
	if (strcmp(was, t->model_sha256)) {
		sd_why(why, "%s: checkpoint is of model file %s (SHA-256 %.12s), this run's %s has "
		       "SHA-256 %.12s", path, model->valuestring, *was ? was : "(none)", t->cfg.model,
		       t->model_sha256[0] ? t->model_sha256 : "(none)");
		goto out;
	}
	if (strcmp(dataset->valuestring, t->cfg.dataset)) {
		sd_why(why, "%s: checkpoint was trained on '%s', this run uses '%s'",
		       path, dataset->valuestring, t->cfg.dataset);
		goto out;
	}
	/* The same data files: token or .npy files written again under the
	 * same names are other data (engine/checkpoint-data.h). */
	const cJSON *data = cJSON_GetObjectItemCaseSensitive(meta, "data");
	if (data && (trainer_data_id(t, why) < 0 || sd_ckpt_data_id_check(data, t->data_id, path, why) < 0))
		goto out;
	if (gb->valueint != t->cfg.global_batch) {
		sd_why(why, "%s: checkpoint has global batch %d, this run %d (the data cursor "
		       "would not match)", path, gb->valueint, t->cfg.global_batch);
		goto out;
	}
	table = tensor_table(t->model);
	const struct sd_ckpt_section *st = need(&c, path, "tensors", (uint64_t)-1, why);
	if (!st)
		goto out;
	if (st->bytes != strlen(table) || memcmp(st->data, table, st->bytes)) {
		sd_why(why, "%s: tensor table differs from model '%s' (checkpoint from another model)",
		       path, t->cfg.model);
		goto out;
	}
	/* The optimizer's state is only of use to the same optimizer. */
	const cJSON *opt = cJSON_GetObjectItemCaseSensitive(meta, "optimizer");
	const char *opt_was = cJSON_IsString(opt) ? opt->valuestring : "sgd";
	const char *opt_now = t->opt.kind == SD_OPTIM_ADAMW ? "adamw" : "sgd";
	if (strcmp(opt_was, opt_now)) {
		sd_why(why, "%s: checkpoint holds the state of optimizer %s, this run uses %s",
		       path, opt_was, opt_now);
		goto out;
	}
	if (t->opt.kind == SD_OPTIM_ADAMW) {
		const cJSON *as = cJSON_GetObjectItemCaseSensitive(meta, "adamw_step");
		if (!cJSON_IsNumber(as) || as->valuedouble != step->valuedouble) {
			sd_why(why, "%s: AdamW's step count is not the checkpoint's step %.0f",
			       path, step->valuedouble);
			goto out;
		}
	}
	size_t np = sd_model_param_count(t->model), nb = sd_model_buffer_count(t->model);
	const char *first = t->opt.kind == SD_OPTIM_ADAMW ? "adamw_m" : "momentum";
	const struct sd_ckpt_section *sp = need(&c, path, "params", np * sizeof(float), why);
	const struct sd_ckpt_section *sv = sp ? need(&c, path, first, np * sizeof(float), why) : NULL;
	const struct sd_ckpt_section *s2 = sv;
	if (sv && t->second)
		s2 = need(&c, path, "adamw_v", np * sizeof(float), why);
	const struct sd_ckpt_section *sb = s2 ? need(&c, path, "buffers", nb * sizeof(float), why) : NULL;
	if (!sb)
		goto out;
	memcpy(sd_model_params(t->model), sp->data, sp->bytes);
	memcpy(t->velocity, sv->data, sv->bytes);
	if (t->second)
		memcpy(t->second, s2->data, s2->bytes);
	memcpy(sd_model_buffers(t->model), sb->data, sb->bytes);
	if (dev_upload_state(t, why) < 0)
		goto out;
	t->step = (long)step->valuedouble;
	/* The shuffle seed is the run's random state: adopt the checkpoint's. */
	const cJSON *seed = cJSON_GetObjectItemCaseSensitive(meta, "seed");
	if (cJSON_IsString(seed))
		t->cfg.seed = strtoull(seed->valuestring, NULL, 10);
	t->perm_epoch = -1;
	rc = 0;
out:
	cJSON_Delete(meta);
	free(table);
	sd_ckpt_free(&c);
	return rc;
}
