/* tests/tmpdir.h - the C tests' scratch files (header only): a mkdtemp()
 * directory, paths in it, whole files written and read back, and removal of
 * the tree at the end.  Fixtures are written at run time, so no binary files
 * live in the repository.  A helper that cannot do its job prints why and
 * exits 1: the test cannot go on without its fixtures. */
#ifndef SD_TESTS_TMPDIR_H
#define SD_TESTS_TMPDIR_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Creates a fresh directory $TMPDIR/NAME (or /tmp/NAME), NAME ending in
 * XXXXXX, and leaves its path in DIR (CAP bytes). */
static inline void make_tmpdir(char *dir, size_t cap, const char *name)
{
	const char *base = getenv("TMPDIR");
	if (!base || !*base)
		base = "/tmp";
	snprintf(dir, cap, "%s/%s", base, name);
	if (!mkdtemp(dir)) {
		perror(dir);
		exit(1);
	}
}

/* DIR/FILE in a new string (caller frees). */
static inline char *path_join(const char *dir, const char *file)
{
	size_t len = strlen(dir) + strlen(file) + 2;
	char *p = malloc(len);
	snprintf(p, len, "%s/%s", dir, file);
	return p;
}

static inline void write_raw(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
		fprintf(stderr, "%s: cannot write fixture\n", path);
		exit(1);
	}
}

/* The whole file, in a new buffer of *LEN bytes (caller frees). */
static inline unsigned char *read_raw(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		perror(path);
		exit(1);
	}
	fseek(f, 0, SEEK_END);
	*len = (size_t)ftell(f);
	fseek(f, 0, SEEK_SET);
	unsigned char *p = malloc(*len ? *len : 1);
	if (fread(p, 1, *len, f) != *len) {
		perror(path);
		exit(1);
	}
	fclose(f);
	return p;
}

static inline int rm_tree_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* Removes PATH and everything below it, not following links. */
static inline void rm_tree(const char *path)
{
	nftw(path, rm_tree_one, 16, FTW_DEPTH | FTW_PHYS);
}

#endif
