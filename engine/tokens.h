/* engine/tokens.h - token data sets for language models: a file of token
 * ids, read mapped, and the windows training and evaluation take from it.
 *
 * Two formats, told apart by the file's first bytes:
 *   llm.c's .bin (github.com/karpathy/llm.c, dev/data/data_common.py,
 *     write_datafile): a header of 256 little-endian int32 values -
 *     [0] magic 20240520, [1] version 1, [2] the token count N - then N
 *     uint16 token ids.  Its uint32 variant (magic 20240801, for vocabularies
 *     over 65,536) is refused with a message saying so.
 *   nanoGPT's train.bin / val.bin (github.com/karpathy/nanoGPT,
 *     data/NAME/prepare.py: np.array(ids, dtype=np.uint16).tofile(path)): no
 *     header, the whole file is uint16 token ids.
 * A file that starts with another magic but whose header count matches its
 * length exactly is taken for an llm.c file with a wrong magic and refused,
 * rather than trained on as 512 ids of header.
 *
 * Windows.  A training sample is a window of block + 1 consecutive tokens:
 * the model reads the first block (x) and is scored on the next token at
 * every position (y = x shifted by one).  Sample `index` of epoch `epoch`
 * starts at a uniform random position drawn from (seed, epoch, index) alone,
 * so the windows of a global batch do not depend on how the batch is split
 * among workers: an elastic re-split loses and repeats nothing.  An epoch is
 * floor(N / block) windows (nanoGPT and llm.c draw windows the same way;
 * the count makes an epoch about one pass over the tokens).  Evaluation
 * takes the fixed windows starting at 0, block, 2*block, ... so every run
 * and every worker count scores the same tokens. */
#ifndef SD_ENGINE_TOKENS_H
#define SD_ENGINE_TOKENS_H

#include <stddef.h>
#include <stdint.h>

/* llm.c's header: 256 int32, magic and version of its uint16 files. */
#define SD_TOKENS_LLMC_HEADER_INTS 256
#define SD_TOKENS_LLMC_MAGIC 20240520
#define SD_TOKENS_LLMC_VERSION 1
/* llm.c's uint32-token files (Llama 3's vocabulary), not read here. */
#define SD_TOKENS_LLMC_MAGIC_U32 20240801

enum sd_tokens_format {
	SD_TOKENS_LLMC = 1,     /* llm.c header + uint16 */
	SD_TOKENS_RAW_U16 = 2,  /* nanoGPT: headerless uint16 */
};

/* A token file mapped read-only; tok[0 .. count) are the ids (the file's
 * little-endian uint16 values; spotdeck runs on little-endian machines). */
struct sd_tokens {
	enum sd_tokens_format format;
	const uint16_t *tok;
	uint64_t count;
	void *map;
	size_t map_len;
	char *path;             /* owned, for messages */
};

/* Opens and maps path and checks its framing.  Returns 0, or -1 with *why
 * (caller frees) one line naming the file: no such file, not a regular
 * file, empty, an odd number of bytes, a header whose count disagrees with
 * the length, a wrong magic or version, uint32 tokens.  On error t holds
 * nothing. */
int sd_tokens_open(struct sd_tokens *t, const char *path, char **why);
void sd_tokens_close(struct sd_tokens *t);

/* Every id below vocab (the model's embedding rows).  Reads the whole file
 * once.  -1 with *why "PATH: token ID at position P is not below the
 * model's vocabulary of V" for the first id that is not. */
int sd_tokens_check_vocab(const struct sd_tokens *t, uint32_t vocab, char **why);

/* The file holds at least one window of block + 1 tokens; block >= 1.
 * -1 with *why "PATH: N tokens, fewer than block_size + 1 = B" otherwise. */
int sd_tokens_check_block(const struct sd_tokens *t, int block, char **why);

/* Training windows per epoch: floor(count / block). */
uint64_t sd_tokens_epoch_windows(const struct sd_tokens *t, int block);

/* The first token of training window `index` of `epoch`: uniform in
 * [0, count - block - 1], a function of (seed, epoch, index) only.
 * Requires sd_tokens_check_block to have passed. */
uint64_t sd_tokens_train_start(const struct sd_tokens *t, int block, uint64_t seed,
                               uint64_t epoch, uint64_t index);

/* Evaluation windows: floor((count - 1) / block), window i starting at
 * i * block, so that its last target token is still in the file. */
uint64_t sd_tokens_eval_windows(const struct sd_tokens *t, int block);

/* The window starting at start: x[j] = tok[start + j], y[j] =
 * tok[start + j + 1] for j < block (int32, as the embedding's Gather and
 * the loss take them).  start + block < count. */
void sd_tokens_window(const struct sd_tokens *t, uint64_t start, int block, int32_t *x,
                      int32_t *y);

#endif
