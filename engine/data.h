/* engine/data.h - datasets and the global-index sharding the elastic trainer
 * relies on.
 *
 * Images are stored already normalised as float32 NCHW: (n, c, h, w), with
 * x = (pixel / 255 - mean) / std per dataset (constants in data.c, with their
 * source).  Labels are uint8 class indices.
 *
 * Supported datasets and files:
 *   fashion-mnist, mnist: IDX format, gzip-compressed (LeCun et al.,
 *     yann.lecun.com/exdb/mnist): train-images-idx3-ubyte.gz,
 *     train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz,
 *     t10k-labels-idx1-ubyte.gz.  Uncompressed files (without .gz) are read
 *     too.  Default dir for fashion-mnist: /usr/share/datasets/fashion-mnist
 *     (Debian package dataset-fashion-mnist).
 *   cifar10: the "binary version" (cs.toronto.edu/~kriz/cifar.html):
 *     data_batch_1.bin .. data_batch_5.bin, test_batch.bin, records of
 *     1 label byte + 3072 pixel bytes (R, G, B planes of 32x32).
 *   synthetic: random data of a given shape, made from the seed; no files.
 */
#ifndef SD_ENGINE_DATA_H
#define SD_ENGINE_DATA_H

#include <stddef.h>
#include <stdint.h>

enum sd_split { SD_SPLIT_TRAIN = 0, SD_SPLIT_TEST = 1 };

struct sd_dataset {
	char name[32];
	int n;              /* samples */
	int c, h, w;        /* image shape */
	int classes;
	float *images;      /* n * c * h * w floats, owned */
	uint8_t *labels;    /* n bytes, owned */
};

/* Default data directory for a dataset name, or NULL when it has none. */
const char *sd_dataset_default_dir(const char *name);

/* Loads split of dataset name from dir (NULL = the default dir).  Returns 0,
 * or -1 with *why set to a malloc'd one-line message that names the file and
 * the problem (missing, truncated, wrong magic, wrong dimensions, label out
 * of range, gzip error); the caller frees *why.  On error ds holds nothing. */
int sd_dataset_load(struct sd_dataset *ds, const char *name, const char *dir,
                    enum sd_split split, char **why);

/* Synthetic dataset: n samples of shape (c, h, w), classes classes, drawn
 * from seed.  Labels are uniform; each class has its own mean image, so the
 * data is learnable.  Returns 0 or -1 (*why) on a bad shape. */
int sd_dataset_synthetic(struct sd_dataset *ds, int n, int c, int h, int w,
                         int classes, uint64_t seed, char **why);
/* The same data set's split: both splits share the class means (drawn from
 * seed), the test split draws its own labels and noise, so a model that
 * learns the training split is measured on the same classes.  The training
 * split is what sd_dataset_synthetic gives. */
int sd_dataset_synthetic_split(struct sd_dataset *ds, enum sd_split split, int n, int c, int h,
                               int w, int classes, uint64_t seed, char **why);

void sd_dataset_free(struct sd_dataset *ds);

/* The order in which epoch visits the training set: perm[i] is the sample at
 * global position i.  A Fisher-Yates shuffle seeded by (seed, epoch), so any
 * worker can compute it and a step's samples depend only on (seed, epoch,
 * position), never on how many workers there are.  perm: n entries. */
void sd_epoch_permutation(int32_t *perm, int n, uint64_t seed, int epoch);

/* Copies the samples perm[pos .. pos+count-1] into images (count, c, h, w)
 * and labels (count).  perm NULL means the identity order (e.g. the test
 * set); images or labels NULL skips that copy. */
void sd_dataset_gather(const struct sd_dataset *ds, const int32_t *perm, int pos,
                       int count, float *images, uint8_t *labels);

#endif
