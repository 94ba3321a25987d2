/* tests/gpu/fake/fake-libcuda.c - a stand-in for NVIDIA's driver library
 * (libcuda.so.1) with the five functions engine/backend.c asks of it, so
 * tests/engine/test-gpu-run.sh can run tests/gpu/run.sh on a host without a GPU.
 * It shows SD_FAKE_GPUS devices (default 1) named "NVIDIA FK100 (fake N)".  Nothing but
 * that test puts it on the library path. */
#include <stdio.h>
#include <stdlib.h>

int cuInit(unsigned flags);
int cuDeviceGetCount(int *count);
int cuDeviceGet(int *dev, int ordinal);
int cuDeviceGetName(char *name, int len, int dev);
int cuGetErrorString(int err, const char **str);

int cuInit(unsigned flags)
{
	(void)flags;
	return 0;
}

int cuDeviceGetCount(int *count)
{
	const char *n = getenv("SD_FAKE_GPUS");
	*count = n ? atoi(n) : 1;
	return 0;
}

int cuDeviceGet(int *dev, int ordinal)
{
	*dev = ordinal;
	return 0;
}

int cuDeviceGetName(char *name, int len, int dev)
{
	snprintf(name, (size_t)len, "NVIDIA FK100 (fake %d)", dev);
	return 0;
}

int cuGetErrorString(int err, const char **str)
{
	(void)err;
	*str = "fake driver error";
	return 0;
}
