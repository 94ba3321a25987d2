/* engine/cuda/plugin.c - the CUDA backend plugin's ops table (see
 * engine/backend-plugin.h) and the device-level functions: devices, library
 * versions, page-locked host memory.
 *
 * The CUDA runtime is linked statically into the plugin (libcudart_static),
 * so the only CUDA libraries it needs on a host are the driver (libcuda.so.1)
 * and cuDNN 9, cuBLAS 13 and NCCL 2, found through the usual library path.
 */
#include "config.h"

#include "engine/backend-plugin.h"
#include "engine/comm-backend.h"
#include "engine/cuda/cuda-internal.h"
#include "src/base/errors.h"
#include "engine/model-graph.h"

#include <stdio.h>
#include <string.h>

#ifdef HAVE_NCCL
#include <nccl.h>
#endif

void *cu_host_alloc(size_t bytes)
{
	void *p = NULL;
	if (cudaMallocHost(&p, bytes ? bytes : 1) != cudaSuccess) {
		(void)cudaGetLastError();
		return NULL;
	}
	return p;
}

void cu_host_free(void *p)
{
	if (p)
		cudaFreeHost(p);
}

static const char *versions(void)
{
	static char buf[256];
	int rt = 0, drv = 0;
	cudaRuntimeGetVersion(&rt);
	cudaDriverGetVersion(&drv);
	size_t dnn = cudnnGetVersion();
	int bmaj = 0, bmin = 0, bpat = 0;
	cublasGetProperty(MAJOR_VERSION, &bmaj);
	cublasGetProperty(MINOR_VERSION, &bmin);
	cublasGetProperty(PATCH_LEVEL, &bpat);
	int len = snprintf(buf, sizeof buf,
	                   "CUDA runtime %d.%d (static), driver %d.%d, cuDNN %zu.%zu.%zu (built with "
	                   "%d.%d.%d), cuBLAS %d.%d.%d",
	                   rt / 1000, rt % 1000 / 10, drv / 1000, drv % 1000 / 10, dnn / 10000,
	                   dnn % 10000 / 100, dnn % 100, CUDNN_MAJOR, CUDNN_MINOR, CUDNN_PATCHLEVEL,
	                   bmaj, bmin, bpat);
#ifdef HAVE_NCCL
	int nv = 0;
	if (ncclGetVersion(&nv) == ncclSuccess && len > 0 && (size_t)len < sizeof buf)
		snprintf(buf + len, sizeof buf - (size_t)len, ", NCCL %d.%d.%d", nv / 10000,
		         nv % 10000 / 100, nv % 100);
#else
	if (len > 0 && (size_t)len < sizeof buf)
		snprintf(buf + len, sizeof buf - (size_t)len, ", no NCCL");
#endif
	(void)cudaGetLastError();
	return buf;
}

static int device_count(int *count, char **why)
{
	*count = 0;
	CU_TRY(cudaGetDeviceCount(count));
	return 0;
}

static int device_open(int index, struct sd_backend_device *info, char **why)
{
	memset(info, 0, sizeof *info);
	int count = 0;
	CU_TRY(cudaGetDeviceCount(&count));
	if (index < 0 || index >= count)
		return sd_why(why, "CUDA device %d asked for, %d visible", index, count);
	CU_TRY(cudaSetDevice(index));
	struct cudaDeviceProp p;
	CU_TRY(cudaGetDeviceProperties(&p, index));
	/* Creating the context now makes a busy or broken device fail here,
	 * where the trainer can still choose the CPU, not in the first step. */
	CU_TRY(cudaFree(NULL));
	info->index = index;
	snprintf(info->name, sizeof info->name, "%.63s", p.name);
	const unsigned char *u = (const unsigned char *)p.uuid.bytes;
	snprintf(info->uuid, sizeof info->uuid,
	         "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
	         u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12],
	         u[13], u[14], u[15]);
	info->memory_gib = (double)p.totalGlobalMem / (1024.0 * 1024.0 * 1024.0);
	info->cc_major = p.major;
	info->cc_minor = p.minor;
	info->multiprocessors = p.multiProcessorCount;
	return 0;
}

static const struct sd_backend_ops cuda_ops = {
	.abi = SD_BACKEND_ABI,
	.model_size = sizeof(struct sd_model),
	.node_size = sizeof(struct node),
	.name = "cuda",
	.versions = versions,
	.device_count = device_count,
	.device_open = device_open,
	.model_create = cu_model_create,
	.model_destroy = cu_model_destroy,
	.model_upload = cu_model_upload,
	.model_download = cu_model_download,
	.model_block = cu_model_block,
	.train_batch = cu_train_batch,
	.dataset_upload = cu_dataset_upload,
	.train_indexed = cu_train_indexed,
	.eval_batch = cu_eval_batch,
	.sgd_step = cu_sgd_step,
	.adamw_step = cu_adamw_step,
	.grad_sumsq = cu_grad_sumsq,
	.grad_scale = cu_grad_scale,
	.model_describe = cu_model_describe,
	.host_alloc = cu_host_alloc,
	.host_free = cu_host_free,
#ifdef HAVE_NCCL
	.nccl = &sd_comm_nccl_ops,
#endif
	.layers = &cu_layer_ops,
	.train_tokens = cu_train_tokens,
	.eval_tokens = cu_eval_tokens,
};

/* The plugin's one exported symbol (SD_BACKEND_ENTRY). */
__attribute__((visibility("default"))) const struct sd_backend_ops *sd_backend_plugin_entry(void);

const struct sd_backend_ops *sd_backend_plugin_entry(void)
{
	return &cuda_ops;
}
