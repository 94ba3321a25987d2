# engine/cuda/local.mk: the CUDA backend plugin, spotdeck-cuda.so (cuDNN,
# cuBLAS, NCCL, our kernels).  Built wherever configure found nvcc and cuDNN;
# programs never link it: engine/backend.c dlopen()s it at run time on hosts
# with an NVIDIA driver (engine/backend-plugin.h says why).
#
# A shared object built as an automake "program" with -shared, so no libtool
# is needed; .cu files go through nvcc by the suffix rule below.
EXTRA_DIST += engine/cuda/kernels.cu engine/cuda/kernels-seq.cu
if HAVE_CUDA
cudaplugindir = $(pkglibdir)
cudaplugin_PROGRAMS = engine/cuda/spotdeck-cuda.so
engine_cuda_spotdeck_cuda_so_SOURCES = \
	engine/cuda/plugin.c engine/cuda/exec.c engine/cuda/dnn.c engine/cuda/selftest.c \
	engine/cuda/cuda-internal.h engine/cuda/kernels.cu engine/cuda/kernels-seq.cu src/base/errors.c
# -isystem: the CUDA headers' own warnings are not ours to fix.
engine_cuda_spotdeck_cuda_so_CPPFLAGS = $(AM_CPPFLAGS) -isystem $(CUDA_HOME)/include
engine_cuda_spotdeck_cuda_so_CFLAGS = $(AM_CFLAGS) -fPIC -fvisibility=hidden
# The CUDA runtime is linked statically: one library less to find on a GPU
# host.  cuDNN, cuBLAS and NCCL are found at run time through the library
# path (the rpath only helps on the build host).
engine_cuda_spotdeck_cuda_so_LDFLAGS = $(AM_LDFLAGS) -shared -Wl,-z,defs \
	-Wl,-rpath,$(CUDA_HOME)/lib64
engine_cuda_spotdeck_cuda_so_LDADD = -L$(CUDA_HOME)/lib64 -lcudnn -lcublas \
	$(CUDA_HOME)/lib64/libcudart_static.a -lstdc++ -ldl -lrt -lpthread -lm
if HAVE_NCCL
engine_cuda_spotdeck_cuda_so_SOURCES += engine/comm-nccl.c
engine_cuda_spotdeck_cuda_so_CPPFLAGS += -DHAVE_NCCL
engine_cuda_spotdeck_cuda_so_LDADD += -lnccl
endif
# engine/backend.c looks for the plugin here (build tree) and in pkglibdir.
engine_libsdengine_a_CPPFLAGS += -DSD_HAVE_CUDA_PLUGIN \
	-DSD_CUDA_PLUGIN_BUILD='"$(abs_top_builddir)/engine/cuda/spotdeck-cuda.so"'
endif
engine_libsdengine_a_CPPFLAGS += -DSD_CUDA_PLUGIN_INSTALLED='"$(pkglibdir)/spotdeck-cuda.so"'

# nvcc: C++17, our warnings as errors when configure was asked for them, the
# host side position-independent and hidden like the C files.
SUFFIXES = .cu
NVCC_FLAGS = -std=c++17 -O3 $(CUDA_ARCH_FLAGS) -I$(top_srcdir) -I$(top_builddir) \
	-Xcompiler -fPIC,-fvisibility=hidden $(SD_NVCC_WARN)
.cu.o:
	$(AM_V_GEN)$(NVCC) $(NVCC_FLAGS) -c -o $@ $<
