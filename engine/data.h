/* engine/data.h - datasets and the global-index sharding the elastic trainer
 * relies on.
 *
 * Images reach the model normalised as float32 NCHW: (n, c, h, w), with
 * x = (pixel / 255 - mean) / std per dataset (constants in data.c, with their
 * source).  The built-in datasets hold them so in memory (images); npy keeps
 * its files mapped (src) and converts each sample as it is gathered, so code
 * reads samples through sd_dataset_gather, never ds->images directly.
 * Labels are uint8 class indices.
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
 *   npy: the user's own arrays, NumPy .npy files (engine/npy.h):
 *     train_x.npy, train_y.npy, test_x.npy, test_y.npy.  x is |u1, <f2 or
 *     <f4 of shape (n, c, h, w) for layout NCHW, (n, h, w, c) for NHWC, or
 *     (n, h, w) for one channel; y holds integer class ids (any of npy.h's
 *     integer dtypes) of shape (n,).  The x files are mapped, not read: a
 *     sample is converted to float32 NCHW when it is gathered, as
 *     x = (pixel / 255 - mean[ch]) / std[ch] for |u1 and
 *     x = (value - mean[ch]) / std[ch] for <f2 and <f4 (mean 0, std 1 when
 *     no normalisation is given), so a worker touches only the pages of the
 *     samples it trains on.  Classes: the given count, or the largest label
 *     of both splits + 1.
 */
#ifndef SD_ENGINE_DATA_H
#define SD_ENGINE_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "engine/npy.h"

enum sd_split { SD_SPLIT_TRAIN = 0, SD_SPLIT_TEST = 1 };

/* Channels a per-channel normalisation can name (and an npy image can have
 * when normalised); 16 covers RGB, RGBA and multispectral stacks. */
#define SD_DATA_MAX_CHANNELS 16

/* Labels are bytes, so at most 256 classes. */
#define SD_DATA_MAX_CLASSES 256

enum sd_layout { SD_LAYOUT_NCHW = 0, SD_LAYOUT_NHWC = 1 };

/* Training-set augmentation, applied by sd_dataset_gather_train.
 * SD_AUGMENT_CROP4_FLIP: the usual CIFAR augmentation (He et al. 2016,
 * "Deep Residual Learning", section 4.2): pad the image by 4 pixels of value
 * 0 on every side (0 before normalisation, as torchvision's
 * RandomCrop(padding=4) before Normalize: so the padded value is
 * (0 - mean) / std per channel), take a random h x w crop of the padded
 * image (offsets oy, ox uniform in 0..8), then mirror it left-right with
 * probability 1/2. */
enum sd_augment { SD_AUGMENT_NONE = 0, SD_AUGMENT_CROP4_FLIP = 1 };

/* How to read an npy dataset (sd_dataset_load_npy). */
struct sd_data_options {
	enum sd_layout layout;
	int norm_channels;                  /* 0: no normalisation */
	float mean[SD_DATA_MAX_CHANNELS];   /* per channel, after scaling |u1 by 1/255 */
	float std[SD_DATA_MAX_CHANNELS];    /* > 0 */
	int classes;                        /* 0: largest label of both splits + 1 */
};

/* A dataset whose images stay in a mapped .npy file (npy only). */
struct sd_dataset_source {
	struct sd_npy_file x;
	enum sd_layout layout;
	float mean[SD_DATA_MAX_CHANNELS], std[SD_DATA_MAX_CHANNELS];
	float table[SD_DATA_MAX_CHANNELS][256];   /* |u1: pixel -> normalised value */
	int table_ok;
};

struct sd_dataset {
	char name[32];
	int n;              /* samples */
	int c, h, w;        /* image shape */
	int classes;
	float *images;      /* n * c * h * w floats, owned; NULL when src holds them */
	uint8_t *labels;    /* n bytes, owned */
	struct sd_dataset_source *src;   /* npy: the mapped images, owned; else NULL */
	/* The normalised value of a pixel of value 0 per channel (what
	 * augmentation pads with); 0 for channels beyond SD_DATA_MAX_CHANNELS. */
	float pad[SD_DATA_MAX_CHANNELS];
};

/* "NCHW" / "NHWC" and "none" / "crop4+flip" to their enums; 0 or -1. */
int sd_layout_parse(const char *s, enum sd_layout *out);
int sd_augment_parse(const char *s, enum sd_augment *out);

/* Loads an npy dataset's two splits from dir (train_x.npy, train_y.npy,
 * test_x.npy, test_y.npy): maps the x files, reads and checks the labels.
 * Checks everything that can be known before training: each file's header
 * and size, x/y sample counts, the same image shape in both splits, at
 * least one sample in each, the channel count against opt's normalisation
 * (and at most SD_DATA_MAX_CHANNELS when normalised), labels in
 * [0, classes).  Returns 0, or -1 with *why naming the file and the problem
 * (for a bad label, the index of the first bad sample) and both datasets
 * empty. */
int sd_dataset_load_npy(struct sd_dataset *train, struct sd_dataset *test, const char *dir,
                        const struct sd_data_options *opt, char **why);

/* Fills images with all of ds's samples as float32 NCHW (n * c * h * w
 * floats, which the caller allocates), e.g. to upload a mapped dataset to a
 * device. */
void sd_dataset_materialize(const struct sd_dataset *ds, float *images);

/* Default data directory for a dataset name, or NULL when it has none. */
const char *sd_dataset_default_dir(const char *name);

/* Loads split of dataset name from dir (NULL = the default dir).  Returns 0,
 * or -1 with *why set to a malloc'd one-line message that names the file and
 * the problem (missing, truncated, wrong magic, wrong dimensions, label out
 * of range, gzip error); the caller frees *why.  On error ds holds nothing. */
int sd_dataset_load(struct sd_dataset *ds, const char *name, const char *dir,
                    enum sd_split split, char **why);

/* Checks, without loading them, that dataset name's files are where its
 * workers on this host would read them (dir NULL or "": the default dir):
 * fashion-mnist and mnist: the four IDX files (plain or .gz) with their
 * magic numbers and 28x28 images; cifar10: the six batch files of 10,000
 * records each.  Other datasets (synthetic, npy) pass: they have no such
 * files, or their own check (sd_dataset_load_npy).  Returns 0, or -1 with
 * *why naming the directory or file and the problem, as sd_dataset_load
 * would. */
int sd_dataset_check(const char *name, const char *dir, char **why);

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

/* sd_dataset_gather for training batches, with augmentation: each sample's
 * crop and flip are drawn from (seed, epoch, its global position pos + i)
 * alone (a PCG32 stream of its own: oy, then ox, then the flip bit), so they
 * do not depend on how many workers share the batch or which one gathers
 * it.  SD_AUGMENT_NONE is sd_dataset_gather. */
void sd_dataset_gather_train(const struct sd_dataset *ds, const int32_t *perm, int pos,
                             int count, enum sd_augment aug, uint64_t seed, int epoch,
                             float *images, uint8_t *labels);

#endif
