/* engine/checkpoint-data.h - what a checkpoint records of the data it was
 * trained on, so that a resume on other data is refused instead of going
 * on silently.
 *
 * The user's own data sets are named by a directory whose files can be
 * replaced under the same names (token files written again by prepare.py
 * from another corpus, other .npy arrays), so the directory says nothing:
 * each file is identified by its size in bytes and the SHA-256 of its
 * contents (OpenSSL's libcrypto, as the ONNX model file is, engine/train.h
 * sd_sha256_hex), read in 1 MiB pieces.  Which files:
 *   dataset "tokens": train.bin, val.bin (engine/tokens.h)
 *   dataset "npy":    train_x.npy, train_y.npy, test_x.npy, test_y.npy
 *                     (engine/data.h)
 * The built-in data sets (fashion-mnist, mnist, cifar10: Debian's files of
 * fixed contents; synthetic: a function of the seed) record nothing.
 *
 * In a checkpoint's "meta" record the identity is the key "data": an array
 * of {"file": path as opened, "bytes": size, "sha256": 64 lower-case hex}
 * in the order above; checkpoints without it (written before it existed)
 * are not checked.  Hashing costs one read of the files (about 1 s per
 * GB at the SHA-NI speed of a current x86 server).
 */
#ifndef SD_ENGINE_CHECKPOINT_DATA_H
#define SD_ENGINE_CHECKPOINT_DATA_H

#include <stdint.h>

struct cJSON;   /* <cJSON.h>, kept out of this header's includers */

#define SD_CKPT_DATA_FILES 4

struct sd_ckpt_data_file {
	char path[4200];      /* data_dir "/" name, as the trainer opens it */
	uint64_t bytes;       /* the file's size */
	char sha256[65];      /* its SHA-256, lower-case hex */
};

struct sd_ckpt_data_id {
	int n;                /* files identified, 0 for a built-in dataset */
	struct sd_ckpt_data_file file[SD_CKPT_DATA_FILES];
};

/* The identity of dataset `dataset` in directory dir (see above) into *id
 * (n = 0 for a dataset that records none, or dir NULL / "").  Returns 0,
 * or -1 with *why (caller frees) naming the file that cannot be read. */
int sd_ckpt_data_id(const char *dataset, const char *dir, struct sd_ckpt_data_id *id,
                    char **why);

/* id as the meta record's "data" array (a new item, caller owns). */
struct cJSON *sd_ckpt_data_id_json(const struct sd_ckpt_data_id *id);

/* Checks a checkpoint's "data" array (recorded, from its meta; NULL or not
 * an array: nothing recorded, passes) against the data of this run (now).
 * Returns 0 when every recorded file has the same size and SHA-256 as its
 * counterpart in now, else -1 with *why, one line naming the checkpoint
 * (ckpt), both files and both identities as "N bytes, SHA-256 <12 hex>". */
int sd_ckpt_data_id_check(const struct cJSON *recorded, const struct sd_ckpt_data_id *now,
                          const char *ckpt, char **why);

#endif
