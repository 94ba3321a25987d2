/* tests/base/test-big-alloc.c - sd_malloc_big / sd_calloc_big
 * (src/base/errors.h), the engine's allocation for its big buffers: a big
 * block starts on a 2 MiB boundary and is rounded up to whole 2 MiB pages,
 * a small one is an ordinary block on the asked boundary, both are
 * writable and released by free(), sd_calloc_big zero-fills even memory
 * that malloc hands back dirty, and, where the kernel has transparent huge
 * pages in "always" or "madvise" mode, /proc/self/smaps shows the big
 * block's mapping advised for them (VmFlags "hg"; its AnonHugePages are
 * printed, not required: they depend on free memory); else that part is
 * skipped. */
#include "config.h"

#include "src/base/errors.h"

#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/check.h"

#define MIB ((size_t)1 << 20)

/* Fills n bytes of p with a pattern and checks it reads back. */
static int writable(unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(i * 131u + 7u);
	for (size_t i = 0; i < n; i++)
		if (p[i] != (unsigned char)(i * 131u + 7u))
			return 0;
	return 1;
}

/* The THP mode of this kernel ("always", "madvise", "never"), or "" when
 * the kernel has no THP. */
static void thp_mode(char *mode, size_t cap)
{
	mode[0] = '\0';
	FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
	if (!f)
		return;
	char line[128];
	if (fgets(line, sizeof line, f)) {
		const char *a = strchr(line, '['), *b = a ? strchr(a, ']') : NULL;
		if (a && b && (size_t)(b - a - 1) < cap) {
			memcpy(mode, a + 1, (size_t)(b - a - 1));
			mode[b - a - 1] = '\0';
		}
	}
	fclose(f);
}

/* From the /proc/self/smaps mapping that holds p: its AnonHugePages (kB)
 * into *kb and whether its VmFlags carry "hg" (madvise(MADV_HUGEPAGE) on
 * it: proc(5)) into *hg.  -1 when smaps cannot be read or no mapping holds
 * p; *kb or *hg stay -1 where the kernel does not print that line. */
static int smaps_of(const void *p, long *kb, int *hg)
{
	*kb = -1;
	*hg = -1;
	FILE *f = fopen("/proc/self/smaps", "r");
	if (!f)
		return -1;
	const uintptr_t a = (uintptr_t)p;
	char line[512];
	int inside = 0, found = 0;
	while (fgets(line, sizeof line, f)) {
		unsigned long lo, hi;
		long v;
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
			if (found)
				break;
			inside = found = a >= lo && a < hi;
		} else if (inside && sscanf(line, "AnonHugePages: %ld kB", &v) == 1) {
			*kb = v;
		} else if (inside && !strncmp(line, "VmFlags:", 8)) {
			*hg = strstr(line + 8, " hg") != NULL;
		}
	}
	fclose(f);
	return found ? 0 : -1;
}

int main(void)
{
	/* Big: 2 MiB boundary whatever the asked alignment, whole 2 MiB pages. */
	const size_t big = 8 * MIB + 4096;
	unsigned char *b = sd_malloc_big(big, 64);
	CHECK(((uintptr_t)b & (SD_BIG_BYTES - 1)) == 0, "big block at %p", (void *)b);
	CHECK(malloc_usable_size(b) >= 10 * MIB, "usable %zu", malloc_usable_size(b));
	CHECK(writable(b, big));

	/* Small: the asked boundary, not rounded up to a huge page. */
	unsigned char *s = sd_malloc_big(1000, 64);
	CHECK(((uintptr_t)s & 63) == 0, "small block at %p", (void *)s);
	CHECK(malloc_usable_size(s) < SD_BIG_BYTES, "usable %zu", malloc_usable_size(s));
	CHECK(writable(s, 1000));
	unsigned char *z = sd_malloc_big(0, 64);
	CHECK(z != NULL);
	free(z);

	/* Zero-filled, also where malloc reuses a block it gave out dirty. */
	for (int round = 0; round < 4; round++) {
		unsigned char *d = malloc(3000);
		CHECK(d != NULL);
		memset(d, 0xab, 3000);
		free(d);
		float *c = sd_calloc_big(750, sizeof(float), 64);
		size_t nonzero = 0;
		for (size_t i = 0; i < 750; i++)
			nonzero += c[i] != 0.0f;
		CHECK_INT(nonzero, 0);
		CHECK(((uintptr_t)c & 63) == 0);
		free(c);
	}
	float *cb = sd_calloc_big(3 * MIB / sizeof(float), sizeof(float), 64);
	CHECK(((uintptr_t)cb & (SD_BIG_BYTES - 1)) == 0);
	CHECK(cb[0] == 0.0f && cb[3 * MIB / sizeof(float) - 1] == 0.0f);
	free(cb);

	/* Huge pages where the kernel has THP for madvised ranges. */
	char mode[32];
	thp_mode(mode, sizeof mode);
	if (strcmp(mode, "always") && strcmp(mode, "madvise")) {
		check_skip("transparent huge pages are \"%s\" here, not always/madvise", mode);
	} else {
		/* The advice is on the block's mapping (VmFlags "hg"), whatever
		 * the kernel could back it with just now; the 2 MiB pages
		 * themselves depend on free memory (compaction), so they are
		 * reported, not required. */
		long kb;
		int hg;
		if (smaps_of(b, &kb, &hg) < 0 || hg < 0)
			check_skip("no VmFlags line for the block in /proc/self/smaps");
		else
			CHECK(hg == 1, "THP %s: the 8 MiB block's mapping is not advised for huge pages",
			      mode);
		printf("THP %s: the touched 8 MiB block has %ld kB AnonHugePages\n", mode, kb);
	}
	free(b);
	free(s);
	return check_exit("test-big-alloc");
}
