/* src/app/export-cli.c - `spotdeck export` (export-cli.h, spotdeck-export(1)).
 *
 * The checkpoint (engine/checkpoint.h, sections as engine/train.c's
 * sd_trainer_save writes them) is loaded into the model it came from: a
 * built-in model is built by the trainer from the run's job (which knows
 * the dataset's image shape), an ONNX model from the run's copy of its file
 * (RUNDIR/model.onnx, or the job's path) whose SHA-256 must be the one the
 * checkpoint records.  engine/onnx-export.h then writes the ONNX file; the
 * safetensors file is written here from the same tensors. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cJSON.h>
#include <openssl/evp.h>

#include "engine/checkpoint.h"
#include "src/base/errors.h"
#include "engine/model.h"
#include "engine/onnx-export.h"
#include "engine/onnx.h"
#include "engine/train.h"
#include "src/app/export-cli.h"
#include "src/controller/controller.h"
#include "src/proto/job.h"

static int usage_error(const char *msg)
{
	fprintf(stderr, "spotdeck export: %s (usage: spotdeck export RUNDIR [--step N] "
	        "[--onnx OUT.onnx] [--safetensors OUT.safetensors])\n", msg);
	return 2;
}

/* ------------------------------------------------------------ the checkpoint */

/* The checkpoint of step `step` (< 0: the newest that reads back intact, as
 * the controller picks it on resume, src/controller/rundir.c) of run_dir,
 * read into *ck, its path in path. */
static int find_checkpoint(const char *run_dir, long step, struct sd_ckpt *ck, char *path,
                           size_t plen, char **why)
{
	char dir[SD_PATH_MAX + 32];
	snprintf(dir, sizeof dir, "%s/checkpoints", run_dir);
	if (step >= 0) {
		snprintf(path, plen, "%s/ckpt-%ld.sdckpt", dir, step);
		if (access(path, F_OK) < 0)
			return sd_why(why, "%s: no checkpoint of step %ld (the run keeps only its "
			              "newest ones; leave out --step for the latest)", dir, step);
		return sd_ckpt_read(path, ck, why);
	}
	DIR *d = opendir(dir);
	if (!d)
		return sd_why(why, "%s: %s (not a run directory, or a run that saved no checkpoint)",
		              dir, strerror(errno));
	long steps[4096];
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) && n < 4096) {
		long s;
		char tail[16];
		if (sscanf(e->d_name, "ckpt-%ld.sdckp%15s", &s, tail) == 2 && !strcmp(tail, "t"))
			steps[n++] = s;
	}
	closedir(d);
	/* Newest first; a damaged one is passed over, as on resume. */
	char *last_why = NULL;
	for (;;) {
		int best = -1;
		for (int i = 0; i < n; i++)
			if (steps[i] >= 0 && (best < 0 || steps[i] > steps[best]))
				best = i;
		if (best < 0)
			break;
		snprintf(path, plen, "%s/ckpt-%ld.sdckpt", dir, steps[best]);
		steps[best] = -1;
		free(last_why);
		last_why = NULL;
		if (sd_ckpt_read(path, ck, &last_why) == 0)
			return 0;
		fprintf(stderr, "spotdeck export: passing over %s\n", last_why);
	}
	if (last_why) {
		int rc = sd_why(why, "%s: no checkpoint reads back intact (the last: %s)", dir,
		                last_why);
		free(last_why);
		return rc;
	}
	return sd_why(why, "%s: no checkpoint (the run saved none yet)", dir);
}

static int sha256_hex(const uint8_t *bytes, size_t len, char hex[65])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	if (!EVP_Digest(bytes, len, md, &mdlen, EVP_sha256(), NULL) || mdlen != 32)
		return -1;
	for (unsigned int i = 0; i < mdlen; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	return 0;
}

/* The ONNX file the checkpoint's model was trained from: the run's copy,
 * else the path the job named, whichever has the SHA-256 the checkpoint
 * records; *bytes malloc'd, *used the path read. */
static int model_file(const char *run_dir, const char *job_path, const char *sha,
                      uint8_t **bytes, size_t *len, char *used, size_t ulen, char **why)
{
	char copy[SD_PATH_MAX + 32];
	snprintf(copy, sizeof copy, "%s/%s", run_dir, SD_RUN_MODEL_FILE);
	const char *tries[2] = { copy, job_path };
	char seen[2][160] = { "", "" };
	for (int i = 0; i < 2; i++) {
		char *w = NULL;
		if (access(tries[i], F_OK) < 0) {
			snprintf(seen[i], sizeof seen[i], "missing");
			continue;
		}
		if (sd_onnx_read_file(tries[i], bytes, len, &w) < 0) {
			snprintf(seen[i], sizeof seen[i], "unreadable");
			free(w);
			continue;
		}
		char hex[65];
		if (sha256_hex(*bytes, *len, hex) == 0 && !strcmp(hex, sha)) {
			snprintf(used, ulen, "%s", tries[i]);
			return 0;
		}
		snprintf(seen[i], sizeof seen[i], "SHA-256 %s", hex);
		free(*bytes);
		*bytes = NULL;
	}
	return sd_why(why, "%s: no copy of the model file with SHA-256 %s, which the checkpoint "
	              "records (%s: %s; %s: %s)", run_dir, sha, copy, seen[0], job_path, seen[1]);
}

/* The tensor table as engine/train.c writes it into checkpoints, so a
 * checkpoint of another model is refused rather than misread. */
static int same_table(const struct sd_model *m, const struct sd_ckpt_section *st)
{
	int n;
	const struct sd_tensor_info *ti = sd_model_tensors(m, &n);
	size_t pos = 0;
	for (int i = 0; i < n; i++) {
		char line[256];
		int l = snprintf(line, sizeof line, "%s %d %d %d %d %d %zu %zu\n", ti[i].name,
		                 ti[i].ndim, ti[i].shape[0], ti[i].shape[1], ti[i].shape[2],
		                 ti[i].shape[3], ti[i].offset, ti[i].count);
		if (pos + (size_t)l > st->bytes || memcmp((const char *)st->data + pos, line, (size_t)l))
			return 0;
		pos += (size_t)l;
	}
	return pos == st->bytes;
}

static const struct sd_ckpt_section *section(const struct sd_ckpt *ck, const char *path,
                                             const char *name, uint64_t bytes, char **why)
{
	const struct sd_ckpt_section *s = sd_ckpt_find(ck, name);
	if (!s)
		sd_why(why, "%s: checkpoint has no '%s' section", path, name);
	else if (bytes != (uint64_t)-1 && s->bytes != bytes)
		sd_why(why, "%s: section '%s' holds %llu bytes, the model needs %llu", path, name,
		       (unsigned long long)s->bytes, (unsigned long long)bytes);
	else
		return s;
	return NULL;
}

/* ------------------------------------------------------------ safetensors */

/* The safetensors format (huggingface/safetensors, README "Format"): a u64
 * little-endian header size N, N bytes of JSON {"NAME": {"dtype": "F32",
 * "shape": [...], "data_offsets": [begin, end]}, ..., "__metadata__":
 * {string: string}} padded with spaces to a multiple of 8, then the tensors'
 * little-endian bytes back to back, offsets counted from the end of the
 * header.  Written here with cJSON because no Debian C library reads or
 * writes safetensors (only the Rust crate and the Python package do). */
static char *safetensors_header(const struct sd_export *ex, const char *const *meta,
                                size_t *len)
{
	cJSON *h = cJSON_CreateObject();
	size_t off = 0;
	for (int i = 0; i < ex->ntensors; i++) {
		const struct sd_export_tensor *t = &ex->tensors[i];
		cJSON *e = cJSON_AddObjectToObject(h, t->name);
		cJSON_AddStringToObject(e, "dtype", "F32");
		cJSON *shape = cJSON_AddArrayToObject(e, "shape");
		for (int d = 0; d < t->ndim; d++)
			cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->dims[d]));
		cJSON *offs = cJSON_AddArrayToObject(e, "data_offsets");
		cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off));
		off += t->count * sizeof(float);
		cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off));
	}
	cJSON *md = cJSON_AddObjectToObject(h, "__metadata__");
	for (int i = 0; meta[i]; i += 2)
		cJSON_AddStringToObject(md, meta[i], meta[i + 1]);
	char *text = cJSON_PrintUnformatted(h);
	cJSON_Delete(h);
	if (!text)
		sd_oom();
	size_t n = strlen(text), padded = (n + 7) / 8 * 8;
	char *out = sd_malloc(padded + 1);
	memcpy(out, text, n);
	memset(out + n, ' ', padded - n);
	out[padded] = 0;
	free(text);
	*len = padded;
	return out;
}

/* ------------------------------------------------------------ the outputs */

/* Writes the pieces to path.tmp and fsyncs it; the rename comes later. */
static int write_tmp(const char *path, const void *const *part, const size_t *plen, int nparts,
                     char **why)
{
	char tmp[SD_PATH_MAX + 8];
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return sd_why(why, "%s: %s", tmp, strerror(errno));
	for (int i = 0; i < nparts; i++) {
		const char *p = part[i];
		size_t left = plen[i];
		while (left) {
			ssize_t w = write(fd, p, left);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				int err = w < 0 ? errno : EIO;
				close(fd);
				unlink(tmp);
				return sd_why(why, "%s: write: %s", tmp, strerror(err));
			}
			p += w;
			left -= (size_t)w;
		}
	}
	if (fsync(fd) < 0 || close(fd) < 0) {
		int err = errno;
		unlink(tmp);
		return sd_why(why, "%s: %s", tmp, strerror(err));
	}
	return 0;
}

/* An output's directory must exist: checked before any work, so a typo
 * costs no export. */
static int check_out_dir(const char *path, char **why)
{
	char copy[SD_PATH_MAX];
	snprintf(copy, sizeof copy, "%s", path);
	const char *dir = dirname(copy);
	struct stat st;
	if (stat(dir, &st) < 0)
		return sd_why(why, "%s: directory %s: %s", path, dir, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return sd_why(why, "%s: %s is not a directory", path, dir);
	return 0;
}

/* The command line: RUNDIR, --step (-1: the newest) and the outputs. */
struct export_args {
	const char *run_dir;
	long step;
	const char *onnx_out, *st_out;
};

/* Parses the command line into *ea.  -1 to go on, or the exit status
 * (0 after --help, 2 after a usage error). */
static int parse_export_args(int argc, char **argv, struct export_args *ea)
{
	static const struct option longopts[] = {
		{ "step", required_argument, NULL, 's' },
		{ "onnx", required_argument, NULL, 'o' },
		{ "safetensors", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	memset(ea, 0, sizeof *ea);
	ea->step = -1;
	optind = 1;
	opterr = 0;
	int ch;
	while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (ch) {
		case 's': {
			char *end;
			errno = 0;
			ea->step = strtol(optarg, &end, 10);
			if (errno || end == optarg || *end || ea->step < 0)
				return usage_error("--step: expected a step number (0 or more)");
			break;
		}
		case 'o':
			ea->onnx_out = optarg;
			break;
		case 't':
			ea->st_out = optarg;
			break;
		case 'h':
			printf("usage: spotdeck export RUNDIR [--step N] [--onnx OUT.onnx] "
			       "[--safetensors OUT.safetensors]\n"
			       "Writes the run's newest checkpoint (or step N's) as ONNX and/or "
			       "safetensors; see spotdeck-export(1).\n");
			return 0;
		default: {
			char msg[160];
			snprintf(msg, sizeof msg, "%.100s: %s", argv[optind - 1],
			         ch == ':' || (optopt && strchr("sot", optopt)) ?
			         "needs an argument" : "unknown option");
			return usage_error(msg);
		}
		}
	}
	if (optind != argc - 1)
		return usage_error(optind >= argc ? "missing RUNDIR" : "one RUNDIR only");
	if (!ea->onnx_out && !ea->st_out)
		return usage_error("nothing to write: give --onnx OUT.onnx, --safetensors "
		                   "OUT.safetensors or both");
	if (ea->onnx_out && ea->st_out && !strcmp(ea->onnx_out, ea->st_out))
		return usage_error("--onnx and --safetensors name the same file");
	ea->run_dir = argv[optind];
	return -1;
}

/* An ONNX job's checkpoint: its model file (found by the SHA-256 the
 * checkpoint records; *bytes is the caller's to free) with the
 * checkpoint's parameters and buffers, into *ex.  0, or -1 with *why. */
static int export_onnx_job(const char *run_dir, struct sd_ckpt *ck, const char *ckpath, const char *model,
                           const cJSON *jsha, uint8_t **bytes, struct sd_export *ex, char **why)
{
	char used[SD_PATH_MAX + 32];
	if (!cJSON_IsString(jsha) || strlen(jsha->valuestring) != 64)
		return sd_why(why, "%s: the checkpoint records no SHA-256 of its model file %s, so "
		              "no copy of it can be trusted", ckpath, model);
	size_t len;
	if (model_file(run_dir, model, jsha->valuestring, bytes, &len, used, sizeof used, why) < 0)
		return -1;
	const struct sd_ckpt_section *sp = section(ck, ckpath, "params", (uint64_t)-1, why);
	const struct sd_ckpt_section *sb = sp ? section(ck, ckpath, "buffers", (uint64_t)-1, why) : NULL;
	if (!sb)
		return -1;
	return sd_onnx_export_file(*bytes, len, used, sp->data, sp->bytes / sizeof(float), sb->data,
	                           sb->bytes / sizeof(float), ex, why);
}

/* A built-in model's checkpoint: the model built for the job's dataset
 * (*tr, the caller's to destroy), the checkpoint's tensors loaded into it,
 * exported into *ex.  0, or -1 with *why. */
static int export_builtin_job(const struct sd_job *job, struct sd_ckpt *ck, const char *ckpath,
                              const char *model, struct sd_trainer **tr, struct sd_export *ex, char **why)
{
	/* The trainer builds the model for the job's dataset, whose image
	 * shape the checkpoint does not record. */
	struct sd_train_config cfg = job->train;
	snprintf(cfg.model, sizeof cfg.model, "%s", model);
	snprintf(cfg.backend, sizeof cfg.backend, "cpu");
	if (sd_trainer_create(tr, &cfg, why) < 0)
		return -1;
	struct sd_model *m = (*tr)->model;
	const struct sd_ckpt_section *st = section(ck, ckpath, "tensors", (uint64_t)-1, why);
	if (!st)
		return -1;
	if (!same_table(m, st))
		return sd_why(why, "%s: tensor table differs from model %s on %s (checkpoint of "
		              "another model?)", ckpath, model, cfg.dataset);
	size_t np = sd_model_param_count(m), nb = sd_model_buffer_count(m);
	const struct sd_ckpt_section *sp = section(ck, ckpath, "params", np * sizeof(float), why);
	const struct sd_ckpt_section *sb = sp ? section(ck, ckpath, "buffers", nb * sizeof(float), why) : NULL;
	if (!sb)
		return -1;
	memcpy(sd_model_params(m), sp->data, sp->bytes);
	memcpy(sd_model_buffers(m), sb->data, sb->bytes);
	return sd_onnx_export_model(m, PACKAGE_VERSION, ex, why);
}

/* Writes OUT.tmp as safetensors: the 8-byte little-endian header length,
 * the header with md's metadata, the tensors; *data_bytes gets the
 * tensors' bytes.  0, or -1 with *why. */
static int write_safetensors(const char *out, const struct sd_export *ex, const char *const *md,
                             size_t *data_bytes, char **why)
{
	size_t hlen;
	char *header = safetensors_header(ex, md, &hlen);
	int np = ex->ntensors + 2;
	const void **part = sd_calloc((size_t)np, sizeof *part);
	size_t *plen = sd_calloc((size_t)np, sizeof *plen);
	uint8_t le[8];
	for (int i = 0; i < 8; i++)
		le[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
	part[0] = le;
	plen[0] = 8;
	part[1] = header;
	plen[1] = hlen;
	*data_bytes = 0;
	for (int i = 0; i < ex->ntensors; i++) {
		part[i + 2] = ex->tensors[i].data;
		plen[i + 2] = ex->tensors[i].count * sizeof(float);
		*data_bytes += plen[i + 2];
	}
	int wr = write_tmp(out, part, plen, np, why);
	free(part);
	free(plen);
	free(header);
	return wr;
}

/* Both outputs written as OUT.tmp: only now does either take its name.
 * 0, or -1 with *why. */
static int rename_outputs(const struct export_args *ea, char **why)
{
	const char *outs[2] = { ea->onnx_out, ea->st_out };
	for (int i = 0; i < 2; i++) {
		if (!outs[i])
			continue;
		char tmp[SD_PATH_MAX + 8];
		snprintf(tmp, sizeof tmp, "%s.tmp", outs[i]);
		if (rename(tmp, outs[i]) < 0) {
			sd_why(why, "%s: rename from %s: %s", outs[i], tmp, strerror(errno));
			unlink(tmp);
			return -1;
		}
	}
	return 0;
}

/* The run directory is one, and the outputs' directories can be written. */
static int check_paths(const struct export_args *ea, char **why)
{
	struct stat rst;
	if (stat(ea->run_dir, &rst) < 0)
		return sd_why(why, "%s: %s", ea->run_dir, errno == ENOENT ? "no such run directory" : strerror(errno));
	if (!S_ISDIR(rst.st_mode))
		return sd_why(why, "%s: not a directory (a run directory is one)", ea->run_dir);
	if ((ea->onnx_out && check_out_dir(ea->onnx_out, why) < 0) ||
	    (ea->st_out && check_out_dir(ea->st_out, why) < 0))
		return -1;
	return 0;
}

int sd_export_main(int argc, char **argv)
{
	struct export_args ea;
	int rc = parse_export_args(argc, argv, &ea);
	if (rc >= 0)
		return rc;
	rc = 1;
	const char *run_dir = ea.run_dir;
	char *why = NULL;
	struct sd_ckpt ck;
	memset(&ck, 0, sizeof ck);
	struct sd_job job;
	struct sd_trainer *tr = NULL;
	struct sd_export ex;
	memset(&ex, 0, sizeof ex);
	cJSON *meta = NULL;
	uint8_t *bytes = NULL;
	char ckpath[SD_PATH_MAX + 300], jobpath[SD_PATH_MAX + 32];
	if (check_paths(&ea, &why) < 0 || find_checkpoint(run_dir, ea.step, &ck, ckpath, sizeof ckpath, &why) < 0)
		goto out;
	snprintf(jobpath, sizeof jobpath, "%s/job.json", run_dir);
	if (sd_job_load(&job, jobpath, &why) < 0)
		goto out;
	const struct sd_ckpt_section *sm = section(&ck, ckpath, "meta", (uint64_t)-1, &why);
	if (!sm)
		goto out;
	meta = cJSON_ParseWithLength(sm->data, sm->bytes);
	const cJSON *jm = cJSON_GetObjectItemCaseSensitive(meta, "model");
	const cJSON *jd = cJSON_GetObjectItemCaseSensitive(meta, "dataset");
	const cJSON *js = cJSON_GetObjectItemCaseSensitive(meta, "step");
	const cJSON *jsha = cJSON_GetObjectItemCaseSensitive(meta, "model_sha256");
	if (!cJSON_IsString(jm) || !cJSON_IsString(jd) || !cJSON_IsNumber(js)) {
		sd_why(&why, "%s: section 'meta' lacks model, dataset or step", ckpath);
		goto out;
	}
	const char *model = jm->valuestring;
	if (sd_onnx_is_path(model) ? export_onnx_job(run_dir, &ck, ckpath, model, jsha, &bytes, &ex, &why) < 0
	                           : export_builtin_job(&job, &ck, ckpath, model, &tr, &ex, &why) < 0)
		goto out;
	char stepbuf[32];
	snprintf(stepbuf, sizeof stepbuf, "%.0f", js->valuedouble);
	if (ea.onnx_out) {
		const void *part[1] = { ex.onnx };
		size_t plen[1] = { ex.onnx_len };
		if (write_tmp(ea.onnx_out, part, plen, 1, &why) < 0)
			goto out;
	}
	size_t data_bytes = 0;
	const char *md[] = { "format", "pt", "model", model, "step", stepbuf, "dataset", jd->valuestring,
	                     "spotdeck_version", PACKAGE_VERSION, NULL };
	if (ea.st_out && write_safetensors(ea.st_out, &ex, md, &data_bytes, &why) < 0) {
		if (ea.onnx_out) {
			char tmp[SD_PATH_MAX + 8];
			snprintf(tmp, sizeof tmp, "%s.tmp", ea.onnx_out);
			unlink(tmp);
		}
		goto out;
	}
	if (rename_outputs(&ea, &why) < 0)
		goto out;
	if (ea.onnx_out)
		printf("%s: %s at step %s, %d tensors, %zu bytes of ONNX\n", ea.onnx_out, model,
		       stepbuf, ex.ntensors, ex.onnx_len);
	if (ea.st_out)
		printf("%s: %s at step %s, %d tensors, %zu bytes of float32\n", ea.st_out, model,
		       stepbuf, ex.ntensors, data_bytes);
	rc = 0;
out:
	if (rc)
		fprintf(stderr, "spotdeck export: %s\n", why ? why : "failed");
	free(why);
	free(bytes);
	cJSON_Delete(meta);
	sd_export_free(&ex);
	sd_trainer_destroy(tr);
	sd_ckpt_free(&ck);
	return rc;
}
