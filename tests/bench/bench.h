/* tests/bench/bench.h - how every benchmark reports a ratio (header only).
 *
 * Each figure a benchmark compares goes on one line of its own that starts
 * with "ratio: ", so that tests/bench/run-all.sh (make bench) can gather
 * every ratio of every bench into one summary:
 *
 *   ratio: BENCH: WHAT = 1.23x (target <= 2x): ok
 *   ratio: BENCH: WHAT = 0.80x (target >= 1.5x): MISSED
 *   ratio: BENCH: WHAT = 3.10x (no target)
 *
 * WHAT says what is divided by what ("full redraw / peer blit of the same
 * cells").  The shell and Python benchmarks print the same format.  A bench
 * exits 1 when any target is missed (bench_exit), 77 when it cannot run
 * here (the reason on stderr), 0 otherwise. */
#ifndef SD_TESTS_BENCH_H
#define SD_TESTS_BENCH_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int bench_missed;

/* The CPU's model name from /proc/cpuinfo into buf ("unknown" without
 * one): every bench prints it, since figures differ from CPU to CPU. */
static inline void bench_cpu_model(char *buf, size_t len)
{
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[512];
	snprintf(buf, len, "unknown");
	if (!f)
		return;
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, "model name", 10)) {
			const char *v = strchr(line, ':');
			if (v) {
				snprintf(buf, len, "%s", v + 2);
				buf[strcspn(buf, "\n")] = '\0';
			}
			break;
		}
	fclose(f);
}

/* count zeroed floats, 64-byte aligned; exits 1 when memory runs out. */
static inline float *bench_falloc(size_t count)
{
	float *p = aligned_alloc(64, (count * sizeof(float) + 63) / 64 * 64);
	if (!p) {
		fprintf(stderr, "bench: out of memory for %zu floats\n", count);
		exit(1);
	}
	memset(p, 0, count * sizeof(float));
	return p;
}

/* Prints the ratio line; target <= 0 means none.  at_most: the target is an
 * upper bound (ratio <= target), else a lower bound.  Returns 1 if met. */
static inline int bench_ratio(const char *bench, const char *what, double ratio, double target, int at_most)
{
	if (target <= 0) {
		printf("ratio: %s: %s = %.3gx (no target)\n", bench, what, ratio);
		return 1;
	}
	int met = at_most ? ratio <= target : ratio >= target;
	printf("ratio: %s: %s = %.3gx (target %s %gx): %s\n", bench, what, ratio, at_most ? "<=" : ">=",
	       target, met ? "ok" : "MISSED");
	if (!met)
		bench_missed++;
	return met;
}

/* main()'s return value: 1 when a target was missed. */
static inline int bench_exit(void)
{
	fflush(stdout);
	return bench_missed ? 1 : 0;
}

#endif
