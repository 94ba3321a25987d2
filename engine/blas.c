/* engine/blas.c - see blas.h. */
#include "engine/blas.h"

#include <cblas.h>
#include <limits.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* OpenBLAS extensions (openblas_config.h declares them in newer versions). */
char *openblas_get_corename(void);

const char *sd_blas_kernel(void)
{
	return openblas_get_corename();
}

void sd_blas_select_kernel(char **argv)
{
	const char *keep = getenv("SPOTDECK_BLAS_KERNEL");
	if (getenv("OPENBLAS_CORETYPE") || (keep && !strcmp(keep, "keep")))
		return;
	const char *core = openblas_get_corename();
	/* Only the generic fallbacks are overridden; a kernel OpenBLAS chose
	 * knowingly is kept (unless a test asks for the re-exec). */
	int reselect = keep && !strcmp(keep, "reselect");
	if (!reselect && (!core || (strcmp(core, "Prescott") && strcmp(core, "Core2") &&
	                            strcmp(core, "Nehalem") && strcmp(core, "generic"))))
		return;
	const char *want = NULL;
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
	    __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
		want = "SkylakeX";
	else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
		want = "Haswell";
	if (!want)
		return;
	setenv("OPENBLAS_CORETYPE", want, 1);
	/* Execute the program by its own path, not by the /proc/self/exe link:
	 * the kernel names a process (its comm, what ps, top and pgrep -x see)
	 * after the file name it was executed by, which would be "exe".  A
	 * binary replaced since it started reads "PATH (deleted)": then only the
	 * link still reaches the program that is running. */
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n > 0 && (size_t)n < sizeof self - 1) {
		self[n] = 0;
		if (!strstr(self, " (deleted)"))
			execv(self, argv);
	}
	execv("/proc/self/exe", argv);
	/* exec failed: carry on with the slow kernel rather than not at all. */
	unsetenv("OPENBLAS_CORETYPE");
}

void sd_blas_team_begin(struct sd_blas_team *tm)
{
	tm->threads = omp_get_max_threads();
	tm->blas_saved = 0;
	if (tm->threads > 1 && openblas_get_parallel() == 1) {
		int b = openblas_get_num_threads();
		if (b > 1) {
			openblas_set_num_threads(1);
			tm->blas_saved = b;
		}
	}
}

void sd_blas_team_end(const struct sd_blas_team *tm)
{
	if (tm->blas_saved)
		openblas_set_num_threads(tm->blas_saved);
}
