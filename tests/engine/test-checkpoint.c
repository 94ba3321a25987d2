/* tests/engine/test-checkpoint.c - the checkpoint container: round trips, every
 * single-byte corruption and every truncation of a small file, crafted
 * tables with valid CRCs, random mutation, and atomic replacement while a
 * writer is killed mid-write: at known byte offsets (RLIMIT_FSIZE makes the
 * kernel kill the writer with SIGXFSZ when its file would grow past the
 * limit, so each kill lands exactly there, whatever the machine's load), and
 * at random moments.  Files live in a mkdtemp() directory. */
#include "engine/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <zlib.h>

#include "tests/check.h"
#include "tests/tmpdir.h"

static char tmpdir[4096];

/* Little-endian field access, written here independently of checkpoint.c. */
static uint32_t get32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const unsigned char *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

static void put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

/* Recomputes the table CRC (over the count the header claims, as far as the
 * buffer goes) and then the header CRC, so crafted files get past the CRCs
 * and reach the structural checks. */
static void fix_crcs(unsigned char *p, size_t len)
{
	uint64_t n = get32(p + 12);
	uint64_t table = n * 48;
	if (table > len - 24)
		table = len - 24;
	put32(p + 16, (uint32_t)crc32(0, p + 24, (uInt)table));
	put32(p + 20, (uint32_t)crc32(0, p + 4, 16));
}

/* Reads path and expects failure with a message naming it (and phrase). */
static int expect_read_fail(const char *path, const char *phrase, int line)
{
	struct sd_ckpt c;
	char *why = NULL;
	int rc = sd_ckpt_read(path, &c, &why);
	int ok = rc == -1 && why && strstr(why, path) && (!phrase || strstr(why, phrase))
	         && !strchr(why, '\n') && c.blob == NULL && c.sections == NULL;
	if (!ok) {
		fprintf(stderr, "%s:%d: FAIL: read of %s: rc %d, message '%s', expected -1 and '%s'\n",
		        __FILE__, line, path, rc, why ? why : "(null)", phrase ? phrase : path);
		check_failures++;
	}
	if (rc == 0)
		sd_ckpt_free(&c);
	free(why);
	return ok;
}

#define EXPECT_READ_FAIL(path, phrase) expect_read_fail(path, phrase, __LINE__)

static void fill(unsigned char *p, size_t n, unsigned seed)
{
	uint32_t x = seed * 2654435761u + 1;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		p[i] = (unsigned char)x;
	}
}

/* Checks that c holds exactly the sections given, byte for byte. */
static void check_same(const struct sd_ckpt *c, const struct sd_ckpt_section *s, int n)
{
	CHECK_INT(c->nsections, n);
	CHECK_INT(c->version, 1);
	for (int i = 0; i < n && i < c->nsections; i++) {
		const struct sd_ckpt_section *r = sd_ckpt_find(c, s[i].name);
		CHECK(r == &c->sections[i]);
		if (!r)
			continue;
		CHECK(strcmp(r->name, s[i].name) == 0);
		CHECK_INT(r->bytes, s[i].bytes);
		if (r->bytes == s[i].bytes && r->bytes)
			CHECK(memcmp(r->data, s[i].data, r->bytes) == 0);
		/* Payloads are 64-byte aligned in the file and the blob. */
		CHECK(((uintptr_t)r->data & 63) == 0);
	}
}

static void test_round_trip(void)
{
	char *path = path_join(tmpdir, "rt.sdckpt");
	static const char meta[] = "{\"model\":\"resnet8\",\"step\":100}";
	size_t big = (1u << 20) + 3;
	unsigned char *params = malloc(4099), *buffers = malloc(big);
	fill(params, 4099, 1);
	fill(buffers, big, 2);
	unsigned char one = 0xa5;
	struct sd_ckpt_section s[5] = {
		{ "meta", meta, sizeof meta },
		{ "tensors", NULL, 0 },
		{ "params", params, 4099 },
		{ "momentum", &one, 1 },
		{ "buffers", buffers, big },
	};
	char *why = NULL;
	CHECK_INT(sd_ckpt_write(path, s, 5, &why), 0);
	if (why)
		fprintf(stderr, "  %s\n", why);

	/* The layout, checked with our own parser against checkpoint.h. */
	size_t len;
	unsigned char *f = read_raw(path, &len);
	CHECK(memcmp(f, "SDCKPT\0\0", 8) == 0);
	CHECK_INT(get32(f + 8), 1);
	CHECK_INT(get32(f + 12), 5);
	CHECK_INT(get32(f + 16), crc32(0, f + 24, 5 * 48));
	CHECK_INT(get32(f + 20), crc32(0, f + 4, 16));
	for (int i = 0; i < 5; i++) {
		const unsigned char *e = f + 24 + 48 * i;
		CHECK(strncmp((const char *)e, s[i].name, 24) == 0);
		CHECK_INT(get64(e + 24) % 64, 0);
		CHECK_INT(get64(e + 32), s[i].bytes);
		CHECK_INT(get32(e + 40), crc32(0, f + get64(e + 24), (uInt)s[i].bytes));
		CHECK_INT(get32(e + 44), 0);
	}
	CHECK_INT(len, get64(f + 24 + 48 * 4 + 24) + big);
	free(f);

	struct sd_ckpt c;
	CHECK_INT(sd_ckpt_read(path, &c, &why), 0);
	if (why)
		fprintf(stderr, "  %s\n", why);
	check_same(&c, s, 5);
	CHECK(sd_ckpt_find(&c, "nope") == NULL);
	CHECK(sd_ckpt_find(&c, "param") == NULL);
	CHECK(sd_ckpt_find(&c, "paramsXXXXXXXXXXXXXXXXXXXXXXXXXXX") == NULL);
	CHECK(sd_ckpt_find(NULL, "meta") == NULL);
	sd_ckpt_free(&c);
	CHECK(c.blob == NULL && c.sections == NULL);
	sd_ckpt_free(&c);   /* twice is harmless */

	/* Overwriting with fewer sections, then none. */
	CHECK_INT(sd_ckpt_write(path, s + 2, 1, &why), 0);
	CHECK_INT(sd_ckpt_read(path, &c, &why), 0);
	check_same(&c, s + 2, 1);
	sd_ckpt_free(&c);
	CHECK_INT(sd_ckpt_write(path, NULL, 0, &why), 0);
	CHECK_INT(sd_ckpt_read(path, &c, &why), 0);
	CHECK_INT(c.nsections, 0);
	CHECK_INT(c.blob_bytes, 24);
	sd_ckpt_free(&c);

	/* A name of the full 23 characters. */
	struct sd_ckpt_section longname = { "abcdefghijklmnopqrstuvw", meta, 5 };
	CHECK_INT(sd_ckpt_write(path, &longname, 1, &why), 0);
	CHECK_INT(sd_ckpt_read(path, &c, &why), 0);
	check_same(&c, &longname, 1);
	sd_ckpt_free(&c);

	/* No temporary file is left behind by a successful write. */
	DIR *d = opendir(tmpdir);
	struct dirent *de;
	int tmps = 0;
	while ((de = readdir(d)))
		tmps += strstr(de->d_name, ".tmp.") != NULL;
	closedir(d);
	CHECK_INT(tmps, 0);

	free(why);
	free(params);
	free(buffers);
	unlink(path);
	free(path);
}

/* The small file every corruption test starts from: padding after "a", an
 * empty section in the middle and an empty one at the end.  Layout: header
 * and table 0..215, padding to 256, a 256..260, padding to 320, bb at 320
 * (empty), ccc 320..389, padding to 448, z at 448 (empty); 448 bytes. */
static unsigned char *small_file(const char *path, size_t *len)
{
	static unsigned char a[5] = { 1, 2, 3, 4, 5 };
	static unsigned char ccc[70];
	fill(ccc, sizeof ccc, 3);
	struct sd_ckpt_section s[4] = {
		{ "a", a, sizeof a },
		{ "bb", NULL, 0 },
		{ "ccc", ccc, sizeof ccc },
		{ "z", NULL, 0 },
	};
	char *why = NULL;
	if (sd_ckpt_write(path, s, 4, &why) != 0) {
		fprintf(stderr, "%s\n", why);
		exit(1);
	}
	struct sd_ckpt c;
	CHECK_INT(sd_ckpt_read(path, &c, &why), 0);
	check_same(&c, s, 4);
	sd_ckpt_free(&c);
	free(why);
	return read_raw(path, len);
}

static void test_corruption(void)
{
	char *path = path_join(tmpdir, "small.sdckpt");
	size_t len;
	unsigned char *good = small_file(path, &len);
	unsigned char *p = malloc(len + 64);
	printf("  small file: %zu bytes\n", len);

	/* Every byte, every single-bit flip and the all-bits flip: CRC-32 and
	 * the zero-padding rule catch each one. */
	static const unsigned char masks[] = { 1, 2, 4, 8, 16, 32, 64, 128, 0xff };
	int tried = 0, caught = 0;
	for (size_t i = 0; i < len; i++) {
		for (size_t m = 0; m < sizeof masks; m++) {
			memcpy(p, good, len);
			p[i] ^= masks[m];
			write_raw(path, p, len);
			tried++;
			if (expect_read_fail(path, NULL, __LINE__))
				caught++;
			else
				fprintf(stderr, "  byte %zu ^ 0x%02x not caught\n", i, masks[m]);
		}
	}
	printf("  byte flips: %d of %d caught\n", caught, tried);

	/* Every truncation, and one byte too many. */
	for (size_t l = 0; l < len; l++) {
		write_raw(path, good, l);
		EXPECT_READ_FAIL(path, NULL);
	}
	memcpy(p, good, len);
	p[len] = 0;
	write_raw(path, p, len + 1);
	EXPECT_READ_FAIL(path, "after the last section");

	/* Wrong magic, and files that are not checkpoints at all. */
	memcpy(p, good, len);
	p[0] = 'X';
	write_raw(path, p, len);
	EXPECT_READ_FAIL(path, "not a spotdeck checkpoint");
	write_raw(path, "hello, world\n", 13);
	EXPECT_READ_FAIL(path, "not a spotdeck checkpoint");
	write_raw(path, "SDC", 3);
	EXPECT_READ_FAIL(path, "truncated");

	/* Version 2, with and without a consistent header CRC. */
	memcpy(p, good, len);
	put32(p + 8, 2);
	write_raw(path, p, len);
	EXPECT_READ_FAIL(path, "version 2, this build reads 1");
	fix_crcs(p, len);
	write_raw(path, p, len);
	EXPECT_READ_FAIL(path, "version 2, this build reads 1");

	/* Crafted tables with valid CRCs. */
	struct {
		size_t at;          /* byte offset of the field */
		int width;          /* 4 or 8 */
		uint64_t value;
		const char *phrase;
	} craft[] = {
		{ 12, 4, 5000, "5000 sections, at most 1024" },
		{ 12, 4, 0xffffffffu, "sections, at most 1024" },
		{ 12, 4, 1000, "truncated: the 1000-entry section table" },
		{ 12, 4, 3, "(file corrupt)" },
		{ 24 + 24, 8, UINT64_MAX - 10, "beyond the end" },          /* a: offset */
		{ 24 + 32, 8, UINT64_MAX, "beyond the end" },               /* a: bytes */
		{ 24 + 32, 8, 1u << 20, "beyond the end" },
		{ 24 + 48 + 24, 8, 0, "at offset 0" },                       /* bb overlaps table */
		{ 24 + 96 + 24, 8, 256, "at offset 256" },                   /* ccc overlaps a */
		{ 24 + 96 + 24, 8, 328, "at offset 328" },                   /* ccc unaligned */
		{ 24 + 96 + 32, 8, 200, "beyond the end" },
		{ 24 + 96 + 32, 8, 69, "CRC mismatch" },
		{ 24 + 44, 4, 1, "reserved" },
		{ 24 + 40, 4, 0, "section 'a' CRC mismatch (file corrupt)" },
	};
	for (size_t k = 0; k < sizeof craft / sizeof craft[0]; k++) {
		memcpy(p, good, len);
		if (craft[k].width == 4)
			put32(p + craft[k].at, (uint32_t)craft[k].value);
		else
			put64(p + craft[k].at, craft[k].value);
		fix_crcs(p, len);
		write_raw(path, p, len);
		EXPECT_READ_FAIL(path, craft[k].phrase);
	}
	/* Names: duplicate, unterminated, with junk after the NUL, empty. */
	memcpy(p, good, len);
	memcpy(p + 24 + 48, "a\0", 2);
	fix_crcs(p, len);
	write_raw(path, p, len);
	EXPECT_READ_FAIL(path, "section 'a' appears twice");
	memcpy(p, good, len);
	memset(p + 24, 'a', 24);
	fix_crcs(p, len);
	write_raw(path, p, len);
	EXPECT_READ_FAIL(path, "bad name");
	memcpy(p, good, len);
	p[24 + 10] = 'q';
	fix_crcs(p, len);
	write_raw(path, p, len);
	EXPECT_READ_FAIL(path, "NUL-padded");
	memcpy(p, good, len);
	p[24] = 0;
	fix_crcs(p, len);
	write_raw(path, p, len);
	EXPECT_READ_FAIL(path, "bad name");
	/* Padding must be zero even where no CRC covers it. */
	memcpy(p, good, len);
	p[230] = 1;
	write_raw(path, p, len);
	EXPECT_READ_FAIL(path, "nonzero padding byte at offset 230");

	/* Random multi-byte mutations of header and table, CRCs fixed up, so
	 * the structural checks see garbage: no crash, and a success must only
	 * ever hand out sections inside the file with matching CRCs. */
	uint32_t x = 12345;
	int ok_reads = 0;
	for (int it = 0; it < 4000; it++) {
		memcpy(p, good, len);
		int flips = 1 + it % 4;
		for (int f = 0; f < flips; f++) {
			x = x * 1103515245u + 12345u;
			size_t at = 8 + (x >> 8) % (24 + 4 * 48 - 8);
			x = x * 1103515245u + 12345u;
			p[at] = (unsigned char)(x >> 16);
		}
		fix_crcs(p, len);
		write_raw(path, p, len);
		struct sd_ckpt c;
		char *why = NULL;
		if (sd_ckpt_read(path, &c, &why) == 0) {
			ok_reads++;
			for (int i = 0; i < c.nsections; i++) {
				const unsigned char *d = c.sections[i].data;
				const unsigned char *b = c.blob;
				CHECK(d >= b && c.sections[i].bytes <= c.blob_bytes
				      && (size_t)(d - b) <= c.blob_bytes - c.sections[i].bytes);
			}
			sd_ckpt_free(&c);
		} else {
			CHECK(why && strstr(why, path));
		}
		free(why);
	}
	printf("  random header/table mutations: %d of 4000 still valid\n", ok_reads);

	free(p);
	free(good);
	unlink(path);
	free(path);
}

static void test_write_errors(void)
{
	char *why = NULL;
	unsigned char b[4] = { 0 };
	struct sd_ckpt_section s = { "x", b, 4 };

	/* Into a directory that does not exist. */
	char *path = path_join(tmpdir, "no-such-dir/ckpt.sdckpt");
	CHECK_INT(sd_ckpt_write(path, &s, 1, &why), -1);
	CHECK(why && strstr(why, path) && strstr(why, "No such file or directory"));
	if (why)
		printf("  ok: %s\n", why);
	free(path);

	/* Over a directory: the rename fails and the temp file goes away. */
	path = path_join(tmpdir, "a-dir");
	mkdir(path, 0755);
	CHECK_INT(sd_ckpt_write(path, &s, 1, &why), -1);
	CHECK(why && strstr(why, path) && strstr(why, "rename"));
	if (why)
		printf("  ok: %s\n", why);
	DIR *d = opendir(tmpdir);
	struct dirent *de;
	int tmps = 0;
	while ((de = readdir(d)))
		tmps += strstr(de->d_name, ".tmp.") != NULL;
	closedir(d);
	CHECK_INT(tmps, 0);
	/* Reading a directory fails cleanly too. */
	EXPECT_READ_FAIL(path, "not a regular file");
	rmdir(path);
	free(path);

	/* Bad section lists. */
	path = path_join(tmpdir, "bad.sdckpt");
	struct sd_ckpt_section bad[2] = { { "ok", b, 4 }, { "ok", b, 4 } };
	CHECK_INT(sd_ckpt_write(path, bad, 2, &why), -1);
	CHECK(why && strstr(why, path) && strstr(why, "twice"));
	memset(bad[1].name, 'n', sizeof bad[1].name);   /* no NUL */
	CHECK_INT(sd_ckpt_write(path, bad, 2, &why), -1);
	CHECK(why && strstr(why, "bad name"));
	strcpy(bad[1].name, "");
	CHECK_INT(sd_ckpt_write(path, bad, 2, &why), -1);
	strcpy(bad[1].name, "has space");
	CHECK_INT(sd_ckpt_write(path, bad, 2, &why), -1);
	strcpy(bad[1].name, "nodata");
	bad[1].data = NULL;
	CHECK_INT(sd_ckpt_write(path, bad, 2, &why), -1);
	CHECK(why && strstr(why, "no data"));
	CHECK_INT(sd_ckpt_write(path, bad, -1, &why), -1);
	CHECK_INT(sd_ckpt_write(path, bad, 1025, &why), -1);
	CHECK(access(path, F_OK) != 0);

	/* Reading what is not there. */
	EXPECT_READ_FAIL(path, "cannot open");
	free(path);
	free(why);
}

static int count_tmps(const char *prefix)
{
	DIR *d = opendir(tmpdir);
	struct dirent *de;
	int n = 0;
	while ((de = readdir(d)))
		n += strncmp(de->d_name, prefix, strlen(prefix)) == 0;
	closedir(d);
	return n;
}

static void test_atomic(void)
{
	char *path = path_join(tmpdir, "atomic.sdckpt");
	char *why = NULL;
	size_t big = 16u << 20;
	unsigned char *payload = malloc(big);
	fill(payload, big, 9);
	struct sd_ckpt_section v1[2] = { { "meta", "v1", 2 }, { "params", payload, 1000 } };
	struct sd_ckpt_section v2[2] = { { "meta", "v2", 2 }, { "params", payload, big } };
	CHECK_INT(sd_ckpt_write(path, v1, 2, &why), 0);

	/* A leftover temp file of a killed writer, garbage and a prefix of a
	 * real checkpoint, does not affect reading or writing PATH. */
	size_t stale_len = strlen(path) + 32;
	char *stale = malloc(stale_len);
	snprintf(stale, stale_len, "%s.tmp.99999999", path);
	size_t len;
	unsigned char *bytes = read_raw(path, &len);
	write_raw(stale, bytes, len / 2);
	free(bytes);
	struct sd_ckpt c;
	CHECK_INT(sd_ckpt_read(path, &c, &why), 0);
	check_same(&c, v1, 2);
	sd_ckpt_free(&c);
	/* Also one with our own pid, as after a pid is reused. */
	char *own = malloc(stale_len);
	snprintf(own, stale_len, "%s.tmp.%ld", path, (long)getpid());
	write_raw(own, "junk", 4);
	CHECK_INT(sd_ckpt_write(path, v2, 2, &why), 0);
	CHECK(access(own, F_OK) != 0);
	CHECK_INT(sd_ckpt_read(path, &c, &why), 0);
	check_same(&c, v2, 2);
	sd_ckpt_free(&c);
	CHECK(access(stale, F_OK) == 0);
	unlink(stale);

	char *base = strrchr(path, '/') + 1;
	char prefix[256];
	snprintf(prefix, sizeof prefix, "%s.tmp.", base);

	/* Writers killed at known byte offsets of the new file: each leaves a
	 * torn temp file of at most that size, and PATH is still the complete
	 * v1.  The size of v2's file tells the offsets worth trying. */
	char *probe = path_join(tmpdir, "probe.sdckpt");
	CHECK_INT(sd_ckpt_write(probe, v2, 2, &why), 0);
	struct stat pst;
	CHECK_INT(stat(probe, &pst), 0);
	unlink(probe);
	free(probe);
	const off_t full = pst.st_size;
	const off_t kill_at[6] = { 0, 1, 24, 4096, full / 2, full - 1 };
	CHECK_INT(sd_ckpt_write(path, v1, 2, &why), 0);
	int torn = 0;
	for (int k = 0; k < 6; k++) {
		fflush(NULL);
		pid_t pid = fork();
		if (pid == 0) {
			struct rlimit fsz = { (rlim_t)kill_at[k], (rlim_t)kill_at[k] }, core = { 0, 0 };
			setrlimit(RLIMIT_CORE, &core);
			signal(SIGXFSZ, SIG_DFL);
			setrlimit(RLIMIT_FSIZE, &fsz);
			char *w = NULL;
			_exit(sd_ckpt_write(path, v2, 2, &w) == 0 ? 0 : 1);
		}
		int status = 0;
		waitpid(pid, &status, 0);
		CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGXFSZ,
		      "writer limited to %lld bytes: status 0x%x, not killed by SIGXFSZ", (long long)kill_at[k], status);
		/* The killed writer's temp file: there, and cut at the limit. */
		DIR *d = opendir(tmpdir);
		struct dirent *de;
		int tmps = 0;
		while ((de = readdir(d))) {
			if (strncmp(de->d_name, prefix, strlen(prefix)) != 0)
				continue;
			char *t = path_join(tmpdir, de->d_name);
			struct stat tst;
			if (stat(t, &tst) == 0 && tst.st_size <= kill_at[k])
				tmps++;
			unlink(t);
			free(t);
		}
		closedir(d);
		CHECK_INT(tmps, 1);
		torn += tmps == 1;
		CHECK_INT(sd_ckpt_read(path, &c, &why), 0);
		check_same(&c, v1, 2);
		sd_ckpt_free(&c);
	}
	printf("  writers killed at bytes 0, 1, 24, 4096, %lld and %lld of %lld: %d torn temp files, "
	       "PATH the complete old version each time\n", (long long)(full / 2), (long long)(full - 1),
	       (long long)full, torn);

	/* Writers killed at random moments: PATH is always one complete
	 * version (which one depends on the moment; nothing is timed here). */
	CHECK_INT(sd_ckpt_write(path, v1, 2, &why), 0);
	int torn_tmp = 0, got_v1 = 0, got_v2 = 0;
	/* Kill delays in ms from "before it starts" to "not killed at all"
	 * (odd iterations write v2, so the last one must have landed). */
	static const int delay_ms[8] = { 0, 1, 2, 4, 8, 16, 32, 2000 };
	for (int it = 0; it < 8; it++) {
		fflush(NULL);
		pid_t pid = fork();
		if (pid == 0) {
			char *w = NULL;
			_exit(sd_ckpt_write(path, it % 2 ? v2 : v1, 2, &w) == 0 ? 0 : 1);
		}
		int status;
		if (delay_ms[it] >= 1000) {
			waitpid(pid, &status, 0);
			CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		} else {
			struct timespec ts = { 0, delay_ms[it] * 1000000L };
			nanosleep(&ts, NULL);
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
		}
		torn_tmp += count_tmps(prefix) > 0;
		CHECK_INT(sd_ckpt_read(path, &c, &why), 0);
		const struct sd_ckpt_section *m = sd_ckpt_find(&c, "meta");
		CHECK(m && m->bytes == 2);
		if (m && m->bytes == 2 && memcmp(m->data, "v1", 2) == 0) {
			got_v1++;
			check_same(&c, v1, 2);
		} else if (m && m->bytes == 2 && memcmp(m->data, "v2", 2) == 0) {
			got_v2++;
			check_same(&c, v2, 2);
		} else {
			CHECK(!"meta is neither v1 nor v2");
		}
		sd_ckpt_free(&c);
		/* Clean up what the killed writer left, as a restart would. */
		DIR *d = opendir(tmpdir);
		struct dirent *de;
		while ((de = readdir(d))) {
			if (strncmp(de->d_name, prefix, strlen(prefix)) == 0) {
				char *t = path_join(tmpdir, de->d_name);
				unlink(t);
				free(t);
			}
		}
		closedir(d);
	}
	printf("  writers killed at random moments: %d left a temp file; PATH read as v1 %d, v2 %d times\n",
	       torn_tmp, got_v1, got_v2);
	CHECK_INT(got_v1 + got_v2, 8);
	/* The last writer was not killed, so its version is what PATH holds. */
	CHECK(got_v2 >= 1);

	free(own);
	free(stale);
	free(payload);
	free(why);
	unlink(path);
	free(path);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	make_tmpdir(tmpdir, sizeof tmpdir, "sd-test-ckpt.XXXXXX");
	printf("round trip\n");
	test_round_trip();
	printf("corruption\n");
	test_corruption();
	printf("write errors\n");
	test_write_errors();
	printf("atomic replacement\n");
	test_atomic();
	rm_tree(tmpdir);
	return check_exit("test-checkpoint");
}
