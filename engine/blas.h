/* engine/blas.h - choosing OpenBLAS's compute kernel.
 *
 * Debian 12's OpenBLAS (0.3.21, DYNAMIC_ARCH) picks its kernels by CPU model
 * and falls back to the SSE3 "Prescott" kernels on models it does not know,
 * such as recent Xeons with AVX-512: sgemm then runs at about a fifth of the
 * machine's speed (measured here: 32 GFLOP/s instead of 152 on 2 cores).
 * OpenBLAS reads the OPENBLAS_CORETYPE environment variable once, when the
 * library loads, so the only way to change the choice is to set it and
 * re-execute the program before any BLAS call.
 */
#ifndef SD_ENGINE_BLAS_H
#define SD_ENGINE_BLAS_H

/* If OpenBLAS chose a generic kernel although the CPU has AVX-512 (or
 * AVX2 + FMA), sets OPENBLAS_CORETYPE to SkylakeX (or Haswell) and execv()s
 * the program again by its resolved path (the /proc/self/exe link's target,
 * so the process keeps its name; the link itself only when the file was
 * replaced), argv unchanged; returns only when nothing needs changing or
 * the re-exec failed.  Leaves the choice alone when OPENBLAS_CORETYPE is
 * already set, or when SPOTDECK_BLAS_KERNEL=keep; SPOTDECK_BLAS_KERNEL=
 * reselect re-executes whatever kernel OpenBLAS chose (for tests of the
 * re-exec on machines whose kernel is already right).  Call first thing in
 * main(). */
void sd_blas_select_kernel(char **argv);

/* The kernel OpenBLAS runs (e.g. "SkylakeX"); static string. */
const char *sd_blas_kernel(void);

/* The OpenMP team of a layer that calls BLAS from its own parallel region
 * (engine/layers.c's "Threads", engine/layers-seq.c): with the pthreads
 * build of OpenBLAS, which has a thread pool of its own, begin limits
 * OpenBLAS to one thread while OpenMP threads run whole matrices, and end
 * restores its count; the OpenMP build runs single-threaded inside a
 * parallel region by itself, so nothing changes then.  threads: OpenMP's
 * count for the layer's parallel regions. */
struct sd_blas_team {
	int threads;      /* omp_get_max_threads() at begin */
	int blas_saved;   /* OpenBLAS thread count to restore, 0 if unchanged */
};
void sd_blas_team_begin(struct sd_blas_team *tm);
void sd_blas_team_end(const struct sd_blas_team *tm);

#endif
