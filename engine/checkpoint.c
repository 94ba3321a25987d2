/* engine/checkpoint.c - the checkpoint container: atomic writer and a reader
 * that verifies every byte of the file before handing anything out.  The
 * layout is in checkpoint.h. */
#include "engine/checkpoint.h"

#include "src/base/errors.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#define SD_CKPT_MAGIC "SDCKPT\0\0"
#define SD_CKPT_HEADER 24
#define SD_CKPT_ENTRY 48
#define SD_CKPT_ALIGN 64
/* A bound on the table so a corrupt count cannot ask for gigabytes; real
 * checkpoints have a handful of sections. */
#define SD_CKPT_MAX_SECTIONS 1024

static void sd_put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void sd_put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t sd_get32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t sd_get64(const unsigned char *p)
{
	return (uint64_t)sd_get32(p) | (uint64_t)sd_get32(p + 4) << 32;
}

/* zlib's crc32_z takes a size_t length, so payloads over 4 GiB need no
 * chunking. */
static uint32_t sd_crc(const void *data, size_t bytes)
{
	return (uint32_t)crc32_z(crc32_z(0, Z_NULL, 0), data, bytes);
}

static uint64_t sd_align(uint64_t x)
{
	return (x + SD_CKPT_ALIGN - 1) & ~(uint64_t)(SD_CKPT_ALIGN - 1);
}

/* Section names end up in error messages and file listings, so keep them
 * to printable ASCII without spaces. */
static int sd_name_ok(const char *name, size_t len)
{
	if (len == 0 || len >= SD_CKPT_NAME_MAX)
		return 0;
	for (size_t i = 0; i < len; i++)
		if (name[i] <= ' ' || name[i] > '~')
			return 0;
	return 1;
}

/* Builds the header and table for sections laid out one after another,
 * each at the next 64-byte boundary.  Returns a malloc'd buffer of
 * SD_CKPT_HEADER + n * SD_CKPT_ENTRY bytes, or NULL with *why set. */
static unsigned char *sd_ckpt_head(const char *path, const struct sd_ckpt_section *sections,
                                   int n, char **why)
{
	size_t head_bytes = SD_CKPT_HEADER + (size_t)n * SD_CKPT_ENTRY;
	unsigned char *head = sd_calloc(1, head_bytes);
	uint64_t pos = sd_align(head_bytes);
	for (int i = 0; i < n; i++) {
		const struct sd_ckpt_section *s = &sections[i];
		size_t len = strnlen(s->name, SD_CKPT_NAME_MAX);
		if (!sd_name_ok(s->name, len)) {
			free(head);
			sd_why(why, "%s: section %d has a bad name (1 to %d printable characters)",
			       path, i, SD_CKPT_NAME_MAX - 1);
			return NULL;
		}
		for (int j = 0; j < i; j++) {
			if (strncmp(sections[j].name, s->name, SD_CKPT_NAME_MAX) == 0) {
				free(head);
				sd_why(why, "%s: section '%s' given twice", path, s->name);
				return NULL;
			}
		}
		if (s->bytes > 0 && !s->data) {
			free(head);
			sd_why(why, "%s: section '%s' has %llu bytes but no data", path, s->name,
			       (unsigned long long)s->bytes);
			return NULL;
		}
		if (s->bytes > SIZE_MAX || s->bytes > UINT64_MAX - SD_CKPT_ALIGN - pos) {
			free(head);
			sd_why(why, "%s: section '%s' too large", path, s->name);
			return NULL;
		}
		unsigned char *e = head + SD_CKPT_HEADER + (size_t)i * SD_CKPT_ENTRY;
		memcpy(e, s->name, len);
		sd_put64(e + 24, pos);
		sd_put64(e + 32, s->bytes);
		sd_put32(e + 40, s->bytes ? sd_crc(s->data, (size_t)s->bytes) : sd_crc("", 0));
		sd_put32(e + 44, 0);
		pos = sd_align(pos + s->bytes);
	}
	memcpy(head, SD_CKPT_MAGIC, 8);
	sd_put32(head + 8, SD_CKPT_VERSION);
	sd_put32(head + 12, (uint32_t)n);
	sd_put32(head + 16, sd_crc(head + SD_CKPT_HEADER, (size_t)n * SD_CKPT_ENTRY));
	sd_put32(head + 20, sd_crc(head + 4, 16));
	return head;
}

/* fsyncs the directory holding path, so the rename itself is durable. */
static int sd_sync_dir(const char *path, char **why)
{
	const char *slash = strrchr(path, '/');
	char *dir;
	if (!slash)
		dir = strdup(".");
	else if (slash == path)
		dir = strdup("/");
	else
		dir = strndup(path, (size_t)(slash - path));
	if (!dir)
		sd_oom();
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		sd_why(why, "%s: written, but cannot open its directory %s to fsync it: %s",
		       path, dir, strerror(errno));
		free(dir);
		return -1;
	}
	int rc = 0;
	/* Some file systems cannot fsync a directory (EINVAL); there is nothing
	 * more we can do for them and the data itself is already synced. */
	if (fsync(fd) != 0 && errno != EINVAL) {
		rc = sd_why(why, "%s: written, but fsync of directory %s failed: %s", path, dir,
		            strerror(errno));
	}
	close(fd);
	free(dir);
	return rc;
}

int sd_ckpt_write(const char *path, const struct sd_ckpt_section *sections, int n,
                  char **why)
{
	if (!path || !*path)
		return sd_why(why, "checkpoint: no path given");
	if (n < 0 || n > SD_CKPT_MAX_SECTIONS || (n > 0 && !sections))
		return sd_why(why, "%s: %d sections (0 to %d allowed)", path, n,
		              SD_CKPT_MAX_SECTIONS);
	unsigned char *head = sd_ckpt_head(path, sections, n, why);
	if (!head)
		return -1;
	size_t head_bytes = SD_CKPT_HEADER + (size_t)n * SD_CKPT_ENTRY;

	size_t tmp_len = strlen(path) + 32;
	char *tmp = sd_malloc(tmp_len);
	snprintf(tmp, tmp_len, "%s.tmp.%ld", path, (long)getpid());

	FILE *f = fopen(tmp, "wbe");
	if (!f) {
		sd_why(why, "%s: cannot create temporary file %s: %s", path, tmp, strerror(errno));
		free(tmp);
		free(head);
		return -1;
	}

	static const unsigned char zeros[SD_CKPT_ALIGN];
	const char *failed = NULL;
	int err = 0;
	uint64_t pos = head_bytes;
	if (fwrite(head, 1, head_bytes, f) != head_bytes)
		failed = "fwrite";
	for (int i = 0; i < n && !failed; i++) {
		const unsigned char *e = head + SD_CKPT_HEADER + (size_t)i * SD_CKPT_ENTRY;
		uint64_t off = sd_get64(e + 24);
		size_t pad = (size_t)(off - pos);
		if (pad && fwrite(zeros, 1, pad, f) != pad)
			failed = "fwrite";
		else if (sections[i].bytes
		         && fwrite(sections[i].data, 1, (size_t)sections[i].bytes, f)
		            != sections[i].bytes)
			failed = "fwrite";
		pos = off + sections[i].bytes;
	}
	if (failed)
		err = errno;
	if (!failed && fflush(f) != 0) {
		failed = "fflush";
		err = errno;
	}
	if (!failed && fsync(fileno(f)) != 0) {
		failed = "fsync";
		err = errno;
	}
	if (fclose(f) != 0 && !failed) {
		failed = "fclose";
		err = errno;
	}
	if (!failed && rename(tmp, path) != 0) {
		failed = "rename";
		err = errno;
	}
	free(head);
	if (failed) {
		sd_why(why, "%s: %s of %s failed: %s", path, failed, tmp,
		       err ? strerror(err) : "short write");
		unlink(tmp);
		free(tmp);
		return -1;
	}
	free(tmp);
	return sd_sync_dir(path, why);
}

/* Reads the whole of path into a 64-byte aligned buffer, so section data
 * handed out points at 64-byte aligned memory as it sits in the file. */
static int sd_read_all(const char *path, void **out, size_t *bytes, char **why)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return sd_why(why, "%s: cannot open: %s", path, strerror(errno));
	struct stat st;
	if (fstat(fd, &st) != 0) {
		int e = errno;
		close(fd);
		return sd_why(why, "%s: cannot stat: %s", path, strerror(e));
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return sd_why(why, "%s: not a regular file", path);
	}
	if ((unsigned long long)st.st_size > SIZE_MAX - SD_CKPT_ALIGN) {
		close(fd);
		return sd_why(why, "%s: too large to read", path);
	}
	size_t size = (size_t)st.st_size;
	void *buf = NULL;
	if (posix_memalign(&buf, SD_CKPT_ALIGN, size ? size : 1) != 0)
		sd_oom();
	size_t done = 0;
	while (done < size) {
		ssize_t got = read(fd, (char *)buf + done, size - done);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			int e = errno;
			free(buf);
			close(fd);
			return sd_why(why, "%s: read error: %s", path, strerror(e));
		}
		if (got == 0) {
			free(buf);
			close(fd);
			return sd_why(why, "%s: file shrank while reading (%zu of %zu bytes)", path,
			              done, size);
		}
		done += (size_t)got;
	}
	close(fd);
	*out = buf;
	*bytes = size;
	return 0;
}

/* Checks that [from, to) of the file is zero: padding is covered by no CRC,
 * so this is what makes every byte of the file verified. */
static int sd_check_zero(const char *path, const unsigned char *p, uint64_t from,
                         uint64_t to, char **why)
{
	for (uint64_t i = from; i < to; i++)
		if (p[i] != 0)
			return sd_why(why, "%s: nonzero padding byte at offset %llu (file corrupt)",
			              path, (unsigned long long)i);
	return 0;
}

/* Verifies the loaded file p of size bytes and fills c->sections. */
static int sd_ckpt_parse(const char *path, const unsigned char *p, size_t size,
                         struct sd_ckpt *c, char **why)
{
	if (memcmp(p, SD_CKPT_MAGIC, size < 8 ? size : 8) != 0 || size == 0)
		return sd_why(why, "%s: not a spotdeck checkpoint", path);
	if (size < SD_CKPT_HEADER)
		return sd_why(why, "%s: truncated: %zu bytes, shorter than the %d-byte header",
		              path, size, SD_CKPT_HEADER);
	/* The version comes before the header CRC so that a file from a newer
	 * build, whose header may differ, gets the message that explains it. */
	uint32_t version = sd_get32(p + 8);
	if (version != SD_CKPT_VERSION)
		return sd_why(why, "%s: version %u, this build reads %u", path, version,
		              SD_CKPT_VERSION);
	if (sd_crc(p + 4, 16) != sd_get32(p + 20))
		return sd_why(why, "%s: header CRC mismatch (file corrupt)", path);
	uint32_t n = sd_get32(p + 12);
	if (n > SD_CKPT_MAX_SECTIONS)
		return sd_why(why, "%s: %u sections, at most %d allowed (file corrupt)", path, n,
		              SD_CKPT_MAX_SECTIONS);
	size_t table_end = SD_CKPT_HEADER + (size_t)n * SD_CKPT_ENTRY;
	if (table_end > size)
		return sd_why(why, "%s: truncated: the %u-entry section table needs %zu bytes, "
		              "the file has %zu", path, n, table_end, size);
	if (sd_crc(p + SD_CKPT_HEADER, (size_t)n * SD_CKPT_ENTRY) != sd_get32(p + 16))
		return sd_why(why, "%s: section table CRC mismatch (file corrupt)", path);

	c->sections = sd_calloc(n ? n : 1, sizeof *c->sections);
	c->nsections = (int)n;
	c->version = version;
	/* Sections must follow each other in table order, each at a 64-byte
	 * boundary, with zero padding between them and nothing after the last:
	 * the layout the writer produces, and the only one in which no byte of
	 * the file escapes a check. */
	uint64_t pos = table_end;
	for (uint32_t i = 0; i < n; i++) {
		const unsigned char *e = p + SD_CKPT_HEADER + (size_t)i * SD_CKPT_ENTRY;
		struct sd_ckpt_section *s = &c->sections[i];
		size_t len = strnlen((const char *)e, SD_CKPT_NAME_MAX);
		if (!sd_name_ok((const char *)e, len))
			return sd_why(why, "%s: section %u has a bad name (file corrupt)", path, i);
		memcpy(s->name, e, len);
		for (size_t k = len; k < SD_CKPT_NAME_MAX; k++)
			if (e[k] != 0)
				return sd_why(why, "%s: section '%s' name is not NUL-padded (file corrupt)",
				              path, s->name);
		for (uint32_t j = 0; j < i; j++)
			if (strcmp(c->sections[j].name, s->name) == 0)
				return sd_why(why, "%s: section '%s' appears twice (file corrupt)", path,
				              s->name);
		uint64_t off = sd_get64(e + 24);
		uint64_t bytes = sd_get64(e + 32);
		if (off > size || bytes > size - off)
			return sd_why(why, "%s: section '%s' (offset %llu, %llu bytes) lies beyond the "
			              "end of the file (%zu bytes; truncated or corrupt)", path, s->name,
			              (unsigned long long)off, (unsigned long long)bytes, size);
		if (off % SD_CKPT_ALIGN != 0 || off < pos || off - pos >= SD_CKPT_ALIGN)
			return sd_why(why, "%s: section '%s' at offset %llu, expected %llu (file corrupt)",
			              path, s->name, (unsigned long long)off,
			              (unsigned long long)sd_align(pos));
		if (sd_get32(e + 44) != 0)
			return sd_why(why, "%s: section '%s' reserved field not zero (file corrupt)",
			              path, s->name);
		if (sd_check_zero(path, p, pos, off, why) < 0)
			return -1;
		if (sd_crc(p + off, (size_t)bytes) != sd_get32(e + 40))
			return sd_why(why, "%s: section '%s' CRC mismatch (file corrupt)", path, s->name);
		s->data = p + off;
		s->bytes = bytes;
		pos = off + bytes;
	}
	if (pos != size)
		return sd_why(why, "%s: %llu unexpected bytes after the last section (file corrupt)",
		              path, (unsigned long long)(size - pos));
	return 0;
}

int sd_ckpt_read(const char *path, struct sd_ckpt *out, char **why)
{
	memset(out, 0, sizeof *out);
	if (!path || !*path)
		return sd_why(why, "checkpoint: no path given");
	void *blob = NULL;
	size_t size = 0;
	if (sd_read_all(path, &blob, &size, why) < 0)
		return -1;
	out->blob = blob;
	out->blob_bytes = size;
	if (sd_ckpt_parse(path, blob, size, out, why) < 0) {
		sd_ckpt_free(out);
		return -1;
	}
	return 0;
}

const struct sd_ckpt_section *sd_ckpt_find(const struct sd_ckpt *c, const char *name)
{
	if (!c || !name)
		return NULL;
	for (int i = 0; i < c->nsections; i++)
		if (strncmp(c->sections[i].name, name, SD_CKPT_NAME_MAX) == 0)
			return &c->sections[i];
	return NULL;
}

void sd_ckpt_free(struct sd_ckpt *c)
{
	if (!c)
		return;
	free(c->sections);
	free(c->blob);
	memset(c, 0, sizeof *c);
}
