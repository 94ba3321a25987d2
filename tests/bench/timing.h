/* tests/bench/timing.h - the clocks the engine benchmarks time with
 * (header only): wall time, this process's CPU time and the whole machine's
 * busy CPU time, all in seconds.  The machine's busy time less ours over a
 * run is what other processes took from the benchmark (a loaded machine). */
#ifndef SD_TESTS_BENCH_TIMING_H
#define SD_TESTS_BENCH_TIMING_H

#include <stdio.h>
#include <time.h>
#include <unistd.h>

/* Monotonic wall-clock seconds. */
static inline double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* CPU seconds this process has used, all its threads. */
static inline double process_cpu_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Busy CPU seconds of the whole machine, from /proc/stat (user nice system
 * irq softirq steal: all but idle and iowait); -1 where /proc is not there. */
static inline double machine_busy_s(void)
{
	FILE *f = fopen("/proc/stat", "r");
	unsigned long long v[8] = { 0 };
	if (!f)
		return -1.0;
	int got = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4],
	                 &v[5], &v[6], &v[7]);
	fclose(f);
	if (got < 8)
		return -1.0;
	return (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / (double)sysconf(_SC_CLK_TCK);
}

#endif
