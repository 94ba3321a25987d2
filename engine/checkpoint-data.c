/* engine/checkpoint-data.c - the identity of a run's data files (sizes and
 * SHA-256s) for checkpoints; see checkpoint-data.h. */
#include "config.h"

#include "engine/checkpoint-data.h"

#include "src/base/errors.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cJSON.h>
#include <openssl/evp.h>

/* The files of each dataset that records an identity, in the order the
 * "data" array lists them. */
static const char *const tokens_files[] = {"train.bin", "val.bin", NULL};
static const char *const npy_files[] = {"train_x.npy", "train_y.npy", "test_x.npy", "test_y.npy", NULL};

/* The size and SHA-256 of the file at f->path. */
static int hash_file(struct sd_ckpt_data_file *f, char **why)
{
	FILE *fp = fopen(f->path, "rb");
	if (!fp)
		return sd_why(why, "%s: %s", f->path, strerror(errno));
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	if (!ctx || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL)) {
		EVP_MD_CTX_free(ctx);
		fclose(fp);
		return sd_why(why, "%s: SHA-256 failed (OpenSSL)", f->path);
	}
	enum { PIECE = 1 << 20 };
	unsigned char *buf = sd_malloc(PIECE);
	int rc = 0;
	size_t n;
	f->bytes = 0;
	while ((n = fread(buf, 1, PIECE, fp)) > 0) {
		f->bytes += n;
		if (!EVP_DigestUpdate(ctx, buf, n)) {
			rc = sd_why(why, "%s: SHA-256 failed (OpenSSL)", f->path);
			break;
		}
	}
	if (rc == 0 && ferror(fp))
		rc = sd_why(why, "%s: %s", f->path, strerror(errno));
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	if (rc == 0 && (!EVP_DigestFinal_ex(ctx, md, &mdlen) || mdlen != 32))
		rc = sd_why(why, "%s: SHA-256 failed (OpenSSL)", f->path);
	if (rc == 0)
		for (unsigned int i = 0; i < mdlen; i++)
			snprintf(f->sha256 + 2 * i, 3, "%02x", md[i]);
	free(buf);
	EVP_MD_CTX_free(ctx);
	fclose(fp);
	return rc;
}

int sd_ckpt_data_id(const char *dataset, const char *dir, struct sd_ckpt_data_id *id, char **why)
{
	memset(id, 0, sizeof *id);
	const char *const *names = !strcmp(dataset, "tokens") ? tokens_files
	                           : !strcmp(dataset, "npy") ? npy_files : NULL;
	if (!names || !dir || !*dir)
		return 0;
	for (int i = 0; names[i]; i++) {
		struct sd_ckpt_data_file *f = &id->file[id->n++];
		snprintf(f->path, sizeof f->path, "%s/%s", dir, names[i]);
		if (hash_file(f, why) < 0) {
			id->n = 0;
			return -1;
		}
	}
	return 0;
}

cJSON *sd_ckpt_data_id_json(const struct sd_ckpt_data_id *id)
{
	cJSON *a = cJSON_CreateArray();
	for (int i = 0; i < id->n; i++) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "file", id->file[i].path);
		cJSON_AddNumberToObject(o, "bytes", (double)id->file[i].bytes);
		cJSON_AddStringToObject(o, "sha256", id->file[i].sha256);
		cJSON_AddItemToArray(a, o);
	}
	if (!a)
		sd_oom();
	return a;
}

/* The file name after the last '/'. */
static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

int sd_ckpt_data_id_check(const cJSON *recorded, const struct sd_ckpt_data_id *now, const char *ckpt,
                          char **why)
{
	if (!cJSON_IsArray(recorded))
		return 0;
	const cJSON *o;
	cJSON_ArrayForEach(o, recorded) {
		const cJSON *file = cJSON_GetObjectItemCaseSensitive(o, "file");
		const cJSON *bytes = cJSON_GetObjectItemCaseSensitive(o, "bytes");
		const cJSON *sha = cJSON_GetObjectItemCaseSensitive(o, "sha256");
		if (!cJSON_IsString(file) || !cJSON_IsNumber(bytes) || !cJSON_IsString(sha))
			return sd_why(why, "%s: the data record of its meta section is not "
			              "{file, bytes, sha256}", ckpt);
		/* The same file name of this run's data: the directory may have
		 * moved (a copied run), the contents may not. */
		const struct sd_ckpt_data_file *f = NULL;
		for (int i = 0; i < now->n && !f; i++)
			if (!strcmp(base_name(now->file[i].path), base_name(file->valuestring)))
				f = &now->file[i];
		if (!f)
			return sd_why(why, "%s: checkpoint was trained on %s (%.0f bytes, SHA-256 %.12s); "
			              "this run's data has no %s", ckpt, file->valuestring,
			              bytes->valuedouble, sha->valuestring, base_name(file->valuestring));
		if ((double)f->bytes != bytes->valuedouble || strcasecmp(f->sha256, sha->valuestring))
			return sd_why(why, "%s: checkpoint was trained on %s (%.0f bytes, SHA-256 %.12s), "
			              "this run's %s is other data (%llu bytes, SHA-256 %.12s)", ckpt,
			              file->valuestring, bytes->valuedouble, sha->valuestring, f->path,
			              (unsigned long long)f->bytes, f->sha256);
	}
	return 0;
}
