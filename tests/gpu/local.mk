# tests/gpu/local.mk: the GPU checks' driver and the stand-in CUDA driver and plugin.
# The GPU checks' driver (tests/gpu/run.sh runs its subcommands).  Built by
# `make` everywhere so CI compiles it; without a GPU it exits 77.
noinst_PROGRAMS += tests/gpu/gpu-check
tests_gpu_gpu_check_SOURCES = tests/gpu/gpu-check.c
tests_gpu_gpu_check_CPPFLAGS = $(AM_CPPFLAGS) $(OPENBLAS_CFLAGS)
tests_gpu_gpu_check_LDADD = $(SD_COMM_LIBS) $(SD_ENGINE_LIBS)
nodist_EXTRA_tests_gpu_gpu_check_SOURCES = dummy.cxx
EXTRA_DIST += tests/gpu/run.sh tests/gpu/pack.sh tests/gpu/torch_peer.py tests/gpu/gpt_peer.py

EXTRA_DIST += tests/gpu/elastic_gpu.py
check_PROGRAMS += tests/gpu/fake/libcuda.so.1 tests/gpu/fake/spotdeck-cuda.so
tests_gpu_fake_libcuda_so_1_SOURCES = tests/gpu/fake/fake-libcuda.c
tests_gpu_fake_libcuda_so_1_CFLAGS = $(AM_CFLAGS) -fPIC
tests_gpu_fake_libcuda_so_1_LDFLAGS = $(AM_LDFLAGS) -shared -Wl,-soname,libcuda.so.1
tests_gpu_fake_spotdeck_cuda_so_SOURCES = tests/gpu/fake/fake-plugin.c tests/gpu/fake/hostdev.h src/base/errors.c \
	src/base/rng.c engine/blas.c engine/layers.c engine/model.c engine/model-seq.c \
	engine/layers-seq.c engine/optim.c
tests_gpu_fake_spotdeck_cuda_so_CPPFLAGS = $(AM_CPPFLAGS) $(OPENBLAS_CFLAGS)
tests_gpu_fake_spotdeck_cuda_so_CFLAGS = $(AM_CFLAGS) -fPIC -fvisibility=hidden
tests_gpu_fake_spotdeck_cuda_so_LDFLAGS = $(AM_LDFLAGS) -shared
tests_gpu_fake_spotdeck_cuda_so_LDADD = $(OPENBLAS_LIBS) -lm
# The engine's layers need their blocked kernels and the convolution path the
# engine itself was built with, so the stand-in rounds as the CPU trainer does.
tests_gpu_fake_spotdeck_cuda_so_SOURCES += engine/layers-blocked.c engine/layers-general.c
if HAVE_DNNL
tests_gpu_fake_spotdeck_cuda_so_SOURCES += engine/conv-dnnl.c engine/matmul-dnnl.c engine/dnnl-call.c
tests_gpu_fake_spotdeck_cuda_so_CPPFLAGS += $(DNNL_CFLAGS)
tests_gpu_fake_spotdeck_cuda_so_LDADD += $(DNNL_LIBS)
else
tests_gpu_fake_spotdeck_cuda_so_SOURCES += engine/conv-dnnl-none.c engine/matmul-dnnl-none.c
endif
