/* engine/blas.c - see blas.h. */
#include "engine/blas.h"

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
	 * knowingly is kept. */
	if (!core || (strcmp(core, "Prescott") && strcmp(core, "Core2") && strcmp(core, "Nehalem") &&
	              strcmp(core, "generic")))
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
	execv("/proc/self/exe", argv);
	/* exec failed: carry on with the slow kernel rather than not at all. */
	unsetenv("OPENBLAS_CORETYPE");
}
