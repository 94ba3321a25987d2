/* engine/backend.c - run-time choice of the compute backend and loading of
 * the CUDA plugin; see backend.h for the order of the checks and
 * backend-plugin.h for why CUDA is a plugin.
 *
 * The driver check talks to libcuda.so.1 directly through dlopen/dlsym with
 * the handful of driver-API functions it needs (cuInit, cuDeviceGetCount,
 * cuDeviceGet, cuDeviceGetName, cuGetErrorString; CUDA Driver API reference,
 * "Initialization" and "Device Management"), so this file needs no CUDA
 * header and builds on hosts without CUDA. */
#include "config.h"

#include "engine/backend.h"
#include "src/base/errors.h"
#include "engine/model-graph.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef SD_CUDA_PLUGIN_BUILD
#define SD_CUDA_PLUGIN_BUILD ""
#endif
#ifndef SD_CUDA_PLUGIN_INSTALLED
#define SD_CUDA_PLUGIN_INSTALLED ""
#endif
#define PLUGIN_FILE "spotdeck-cuda.so"

int sd_backend_request_parse(const char *name, enum sd_backend_request *out)
{
	if (!strcmp(name, "auto"))
		*out = SD_BACKEND_AUTO;
	else if (!strcmp(name, "cpu"))
		*out = SD_BACKEND_WANT_CPU;
	else if (!strcmp(name, "cuda"))
		*out = SD_BACKEND_WANT_CUDA;
	else
		return -1;
	return 0;
}

/* ---- the NVIDIA driver, through dlopen ---------------------------------- */

typedef int (*cu_init_fn)(unsigned flags);
typedef int (*cu_count_fn)(int *count);
typedef int (*cu_get_fn)(int *dev, int ordinal);
typedef int (*cu_name_fn)(char *name, int len, int dev);
typedef int (*cu_errstr_fn)(int err, const char **str);

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static const struct sd_backend_ops *test_ops;

/* Loads the driver and counts devices.  Returns the count (>= 0), or -1 with
 * *why.  names (may be NULL) gets up to max device names. */
static int driver_devices(struct sd_backend_device *names, int max, char **why)
{
	if (test_ops) {
		if (names && max > 0) {
			memset(&names[0], 0, sizeof names[0]);
			snprintf(names[0].name, sizeof names[0].name, "test device");
		}
		return 1;
	}
	/* RTLD_LOCAL: nothing of the driver leaks into our symbol space; the
	 * CUDA runtime inside the plugin opens the same library again. */
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();
		return sd_why(why, "no NVIDIA driver (%s)", e ? e : "libcuda.so.1 not found");
	}
	cu_init_fn cu_init = (cu_init_fn)dlsym(h, "cuInit");
	cu_count_fn cu_count = (cu_count_fn)dlsym(h, "cuDeviceGetCount");
	cu_get_fn cu_get = (cu_get_fn)dlsym(h, "cuDeviceGet");
	cu_name_fn cu_name = (cu_name_fn)dlsym(h, "cuDeviceGetName");
	cu_errstr_fn cu_errstr = (cu_errstr_fn)dlsym(h, "cuGetErrorString");
	if (!cu_init || !cu_count || !cu_get || !cu_name)
		return sd_why(why, "NVIDIA driver libcuda.so.1 lacks cuInit/cuDeviceGetCount "
		              "(driver too old or broken)");
	int rc = cu_init(0);
	if (rc != 0) {
		const char *s = NULL;
		if (cu_errstr)
			cu_errstr(rc, &s);
		return sd_why(why, "NVIDIA driver: cuInit failed: %s (error %d)",
		              s ? s : "unknown error", rc);
	}
	int count = 0;
	rc = cu_count(&count);
	if (rc != 0)
		return sd_why(why, "NVIDIA driver: cuDeviceGetCount failed (error %d)", rc);
	for (int i = 0; names && i < count && i < max; i++) {
		int dev = 0;
		memset(&names[i], 0, sizeof names[i]);
		names[i].index = i;
		if (cu_get(&dev, i) != 0 || cu_name(names[i].name, (int)sizeof names[i].name, dev) != 0)
			snprintf(names[i].name, sizeof names[i].name, "CUDA device %d", i);
	}
	/* The handle stays open: the plugin's runtime will use the driver. */
	return count;
}

int sd_backend_list_devices(struct sd_backend_device *out, int max, char **why)
{
	pthread_mutex_lock(&lock);
	int n = driver_devices(out, max, why);
	pthread_mutex_unlock(&lock);
	if (n == 0) {
		const char *vis = getenv("CUDA_VISIBLE_DEVICES");
		if (vis)
			sd_why(why, "no CUDA device visible (CUDA_VISIBLE_DEVICES='%s')", vis);
		else
			sd_why(why, "the NVIDIA driver shows no CUDA device");
	}
	return n;
}

/* ---- the plugin --------------------------------------------------------- */

static const struct sd_backend_ops *plugin_ops;
static char *plugin_error;
static char plugin_path[PATH_MAX + 64];

/* Directory of the running program ("" when unknown). */
static void exe_dir(char *dir, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", dir, len - 1);
	dir[n > 0 ? n : 0] = 0;
	char *slash = strrchr(dir, '/');
	if (slash)
		*slash = 0;
	else
		dir[0] = 0;
}

/* Picks the plugin file (see backend.h, step 4); "" when there is none. */
static void find_plugin(char *path, size_t len)
{
	const char *env = getenv("SPOTDECK_CUDA_PLUGIN");
	if (env && *env) {
		snprintf(path, len, "%s", env);
		return;
	}
	char dir[PATH_MAX];
	exe_dir(dir, sizeof dir);
	char cand[PATH_MAX + 64];
	snprintf(cand, sizeof cand, "%s/%s", dir, PLUGIN_FILE);
	const char *tries[] = { cand, SD_CUDA_PLUGIN_BUILD, SD_CUDA_PLUGIN_INSTALLED };
	for (size_t i = 0; i < sizeof tries / sizeof tries[0]; i++)
		if (tries[i][0] && access(tries[i], R_OK) == 0) {
			snprintf(path, len, "%s", tries[i]);
			return;
		}
	path[0] = 0;
}

static const struct sd_backend_ops *load_plugin(char **why)
{
	find_plugin(plugin_path, sizeof plugin_path);
	if (!plugin_path[0]) {
#ifdef SD_HAVE_CUDA_PLUGIN
		sd_why(why, "CUDA backend plugin %s not found (looked next to the program, in %s "
		       "and %s; set SPOTDECK_CUDA_PLUGIN)", PLUGIN_FILE, SD_CUDA_PLUGIN_BUILD,
		       SD_CUDA_PLUGIN_INSTALLED);
#else
		sd_why(why, "this build has no CUDA backend (configure found no nvcc and cuDNN; "
		       "%s not found)", PLUGIN_FILE);
#endif
		return NULL;
	}
	/* RTLD_LOCAL: the plugin's own copies of helpers (sd_why) and the CUDA
	 * libraries stay out of the program's symbol space. */
	void *h = dlopen(plugin_path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();
		sd_why(why, "CUDA backend plugin: %s", e ? e : plugin_path);
		return NULL;
	}
	sd_backend_entry_fn entry;
	*(void **)&entry = dlsym(h, SD_BACKEND_ENTRY);
	if (!entry) {
		sd_why(why, "CUDA backend plugin %s: no %s symbol", plugin_path, SD_BACKEND_ENTRY);
		dlclose(h);
		return NULL;
	}
	const struct sd_backend_ops *ops = entry();
	if (!ops || ops->abi != SD_BACKEND_ABI || ops->model_size != sizeof(struct sd_model) ||
	    ops->node_size != sizeof(struct node)) {
		sd_why(why, "CUDA backend plugin %s is from another build (ABI %u, this program %u); "
		       "rebuild it or point SPOTDECK_CUDA_PLUGIN at the matching one", plugin_path,
		       ops ? ops->abi : 0, SD_BACKEND_ABI);
		dlclose(h);
		return NULL;
	}
	/* Never dlclose'd: CUDA libraries do not survive being unloaded. */
	return ops;
}

const struct sd_backend_ops *sd_backend_plugin(char **why)
{
	pthread_mutex_lock(&lock);
	const struct sd_backend_ops *ops = test_ops;
	if (!ops && !plugin_ops && !plugin_error) {
		plugin_ops = load_plugin(&plugin_error);
		if (!plugin_ops && !plugin_error)
			plugin_error = strdup("CUDA backend plugin: cannot load");
	}
	if (!ops)
		ops = plugin_ops;
	if (!ops)
		sd_why(why, "%s", plugin_error);
	pthread_mutex_unlock(&lock);
	return ops;
}

const char *sd_backend_plugin_path(void)
{
	return plugin_path;
}

void sd_backend_set_test_ops(const struct sd_backend_ops *ops)
{
	pthread_mutex_lock(&lock);
	test_ops = ops;
	pthread_mutex_unlock(&lock);
}

/* ---- the choice --------------------------------------------------------- */

static void set_cpu(struct sd_backend_choice *out, const char *fmt, const char *arg)
{
	memset(out, 0, sizeof *out);
	out->kind = SD_BACKEND_CPU;
	snprintf(out->name, sizeof out->name, "cpu");
	snprintf(out->reason, sizeof out->reason, fmt, arg);
}

int sd_backend_choose(struct sd_backend_choice *out, enum sd_backend_request req, int device,
                      char **why)
{
	const char *source = "the backend setting: --backend or the job's \"backend\"";
	if (req == SD_BACKEND_AUTO) {
		const char *env = getenv("SPOTDECK_BACKEND");
		if (env && *env) {
			if (sd_backend_request_parse(env, &req) < 0)
				return sd_why(why, "SPOTDECK_BACKEND: expected auto, cpu or cuda, got '%s'", env);
			source = req == SD_BACKEND_WANT_CPU ? "SPOTDECK_BACKEND=cpu" : "SPOTDECK_BACKEND=cuda";
		}
	}
	if (req == SD_BACKEND_WANT_CPU) {
		set_cpu(out, "CPU asked for (%s)", source);
		return 0;
	}
	int demanded = req == SD_BACKEND_WANT_CUDA;
	char *err = NULL;
	int rc = 0;

	if (device < 0) {
		const char *env = getenv("SPOTDECK_CUDA_DEVICE");
		if (env && *env) {
			char *end;
			long v = strtol(env, &end, 10);
			if (*end || v < 0 || v > 1023)
				return sd_why(why, "SPOTDECK_CUDA_DEVICE: expected a device index, got '%s'", env);
			device = (int)v;
		}
	}
	pthread_mutex_lock(&lock);
	int count = driver_devices(NULL, 0, &err);
	pthread_mutex_unlock(&lock);
	if (count == 0) {
		const char *vis = getenv("CUDA_VISIBLE_DEVICES");
		if (vis)
			sd_why(&err, "no CUDA device visible (CUDA_VISIBLE_DEVICES='%s')", vis);
		else
			sd_why(&err, "the NVIDIA driver shows no CUDA device");
		count = -1;
	} else if (count > 0 && device >= count) {
		sd_why(&err, "CUDA device %d asked for, %d visible", device, count);
		count = -1;
	}
	const struct sd_backend_ops *ops = NULL;
	struct sd_backend_device info;
	memset(&info, 0, sizeof info);
	if (count > 0)
		ops = sd_backend_plugin(&err);
	if (ops && ops->device_open(device < 0 ? 0 : device, &info, &err) < 0)
		ops = NULL;
	if (!ops) {
		if (demanded) {
			rc = sd_why(why, "CUDA backend asked for (%s) but not usable: %s", source,
			            err ? err : "unknown reason");
		} else {
			set_cpu(out, "%s", err ? err : "CUDA not usable");
		}
		free(err);
		return rc;
	}
	free(err);
	memset(out, 0, sizeof *out);
	out->kind = SD_BACKEND_CUDA;
	snprintf(out->name, sizeof out->name, "cuda");
	out->device = info;
	out->ops = ops;
	out->demanded = demanded;
	snprintf(out->reason, sizeof out->reason,
	         "CUDA device %d of %d: %s, compute capability %d.%d, %d SMs, %.0f GiB; %s",
	         info.index, count, info.name, info.cc_major, info.cc_minor, info.multiprocessors,
	         info.memory_gib, ops->versions ? ops->versions() : "");
	return 0;
}
