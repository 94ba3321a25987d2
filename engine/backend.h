/* engine/backend.h - where the engine computes: the CPU or a CUDA device,
 * chosen at run time.
 *
 * The CPU backend (OpenBLAS, engine/layers.c) is always there.  The CUDA
 * backend (cuDNN, cuBLAS, NCCL; engine/cuda/) is a plugin, spotdeck-cuda.so,
 * built where configure found nvcc and cuDNN, and loaded only when this host
 * has an NVIDIA driver with a visible device (see engine/backend-plugin.h for
 * why it is a plugin).  The choice, in order:
 *
 *   1. the request: "cpu" stops here; "cuda" makes every failure below an
 *      error instead of a fall-back; "auto" (the default) takes the
 *      environment variable SPOTDECK_BACKEND (auto, cpu or cuda) if set;
 *   2. the NVIDIA driver: libcuda.so.1 must load and cuInit() succeed;
 *   3. a visible device: cuDeviceGetCount() > 0 (CUDA_VISIBLE_DEVICES
 *      selects which); the device index is the request's, else the
 *      environment variable SPOTDECK_CUDA_DEVICE, else 0;
 *   4. the plugin: $SPOTDECK_CUDA_PLUGIN if set, else spotdeck-cuda.so next to
 *      the program, in the build tree, or in the installed pkglibdir; it must
 *      load (its cuDNN, cuBLAS and NCCL libraries must be found) and open the
 *      device;
 *   5. (in sd_trainer_create) the model: the device copy must build.
 * The first step that fails gives the CPU, with that step's reason.
 */
#ifndef SD_ENGINE_BACKEND_H
#define SD_ENGINE_BACKEND_H

#include <stddef.h>

#include "engine/backend-plugin.h"

enum sd_backend_kind { SD_BACKEND_CPU = 0, SD_BACKEND_CUDA = 1 };

/* What the caller asks for: "auto", "cpu" or "cuda". */
enum sd_backend_request { SD_BACKEND_AUTO = 0, SD_BACKEND_WANT_CPU, SD_BACKEND_WANT_CUDA };

/* Parses "auto", "cpu" or "cuda"; returns 0, or -1 for anything else. */
int sd_backend_request_parse(const char *name, enum sd_backend_request *out);

/* The outcome of sd_backend_choose. */
struct sd_backend_choice {
	enum sd_backend_kind kind;
	char name[8];                    /* "cpu" or "cuda" */
	struct sd_backend_device device; /* CUDA only; name "" on the CPU */
	char reason[320];                /* one line: why this backend, e.g.
	                                  * "no NVIDIA driver (libcuda.so.1: cannot
	                                  * open shared object file...)" or
	                                  * "CUDA device 0 of 1, NVIDIA H200, ..." */
	const struct sd_backend_ops *ops;   /* CUDA: the plugin's table; CPU: NULL */
	int demanded;                    /* CUDA was demanded: no fall-back later */
};

/* Chooses as described above; device < 0 means "not set".  Returns 0 with
 * *out filled (kind CPU with the reason when CUDA is not usable and was not
 * demanded), or -1 with *why when the request is malformed (a bad
 * SPOTDECK_BACKEND value) or demanded CUDA cannot be used. */
int sd_backend_choose(struct sd_backend_choice *out, enum sd_backend_request req, int device,
                      char **why);

/* Lists the CUDA devices the driver shows this process, without loading the
 * plugin (no CUDA libraries besides the driver's): fills up to max entries
 * (index and name only) and returns their number, 0 with *why saying why
 * there are none (no driver, no device), or -1 with *why on a driver error.
 * This is what a provider needs to offer one server per visible GPU. */
int sd_backend_list_devices(struct sd_backend_device *out, int max, char **why);

/* Loads the CUDA plugin (step 4 above, without steps 1 to 3) and returns its
 * ops table, or NULL with *why.  Loaded once per process and never unloaded;
 * later calls return the same table or the same error.  For the comm layer
 * (NCCL) and for tests that check the plugin loads on a host without a GPU. */
const struct sd_backend_ops *sd_backend_plugin(char **why);

/* Path the plugin was (or would be) loaded from, "" before any attempt. */
const char *sd_backend_plugin_path(void);

/* Tests only: makes sd_backend_plugin() return ops (and the driver and
 * device checks pass as if one device were visible) until called with NULL.
 * tests/engine/test-backend.c uses it to run the trainer's device paths over a
 * host-memory stand-in. */
void sd_backend_set_test_ops(const struct sd_backend_ops *ops);

#endif
