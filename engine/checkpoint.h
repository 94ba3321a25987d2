/* engine/checkpoint.h - the checkpoint container file.
 *
 * Layout (all integers little-endian):
 *   header   : magic "SDCKPT\0\0" (8 bytes), u32 version (SD_CKPT_VERSION),
 *              u32 section count, u32 CRC-32 of the section table, u32 CRC-32
 *              of the 16 bytes before it (file offsets 4..19); 24 bytes
 *   table    : per section: char name[24] (NUL-padded), u64 offset from file
 *              start, u64 bytes, u32 CRC-32 of the payload, u32 reserved (0);
 *              48 bytes each
 *   payloads : each section's bytes, 64-byte aligned, in table order, each at
 *              the first 64-byte boundary after the previous one (or after
 *              the table), zero padding between, nothing after the last
 * CRC-32 is zlib's crc32() (ISO-HDLC polynomial).  The reader insists on
 * exactly this layout, so every byte of the file is checked by a CRC or as
 * zero padding.
 *
 * Writing goes to PATH.tmp.PID, fsync()s it, rename()s it over PATH and
 * fsync()s the directory, so PATH is always either the old or the new
 * complete file, never a torn one.
 *
 * The container knows nothing about models: the model layer stores sections
 * such as "meta", "tensors", "params", "momentum" (SGD) or "adamw_m" and
 * "adamw_v" (AdamW), "buffers" and checks that
 * they match the model it is loading into.
 */
#ifndef SD_ENGINE_CHECKPOINT_H
#define SD_ENGINE_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#define SD_CKPT_VERSION 1u
#define SD_CKPT_NAME_MAX 24

struct sd_ckpt_section {
	char name[SD_CKPT_NAME_MAX];   /* NUL-terminated, 1 to 23 printable ASCII
	                                * chars without spaces, unique */
	const void *data;              /* payload; on read points into sd_ckpt.blob */
	uint64_t bytes;
};

struct sd_ckpt {
	uint32_t version;
	int nsections;
	struct sd_ckpt_section *sections;   /* owned */
	void *blob;                         /* whole file, owned */
	size_t blob_bytes;
};

/* Writes the sections atomically to path (see above).  Returns 0 or -1 with
 * *why (malloc'd, caller frees) naming the path and the failing call. */
int sd_ckpt_write(const char *path, const struct sd_ckpt_section *sections, int n,
                  char **why);

/* Reads and verifies path: magic, version, table CRC, every section's bounds
 * and CRC.  Returns 0 with *out filled (free with sd_ckpt_free; section data
 * is 64-byte aligned in memory), or -1 with *out zeroed and *why naming the
 * path and the problem, e.g.
 * "run/ckpt-100.sdckpt: section 'params' CRC mismatch (file corrupt)". */
int sd_ckpt_read(const char *path, struct sd_ckpt *out, char **why);

/* The section called name, or NULL. */
const struct sd_ckpt_section *sd_ckpt_find(const struct sd_ckpt *c, const char *name);

void sd_ckpt_free(struct sd_ckpt *c);

#endif
