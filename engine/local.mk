# engine/: the training engine library (no controller, sockets or curses here).
noinst_LIBRARIES += engine/libsdengine.a
engine_libsdengine_a_CPPFLAGS = $(AM_CPPFLAGS) $(OPENBLAS_CFLAGS) $(ZLIB_CFLAGS) $(CJSON_CFLAGS) \
	$(DNNL_CFLAGS) $(PROTOBUF_C_CFLAGS) $(CRYPTO_CFLAGS)
engine_libsdengine_a_SOURCES = \
	engine/blas.c engine/blas.h \
	engine/layers.c engine/layers.h engine/layers-blocked.c engine/layers-general.c \
	engine/layers-seq.c engine/layers-seq.h \
	engine/data.c engine/data.h engine/npy.c engine/npy.h engine/tokens.c engine/tokens.h \
	engine/checkpoint.c engine/checkpoint.h engine/checkpoint-data.c engine/checkpoint-data.h \
	engine/model.c engine/model.h engine/model-graph.h engine/model-seq.c \
	engine/optim.c engine/optim.h \
	engine/train.c engine/train.h \
	engine/backend.c engine/backend.h engine/backend-plugin.h \
	engine/engine.h engine/conv-dnnl.h engine/matmul-dnnl.h \
	engine/onnx.c engine/onnx.h engine/onnx-export.c engine/onnx-export.h
# Convolutions and bf16 linear layers through oneDNN where configure found
# it, else stand-ins that support nothing (every convolution then runs
# im2col + OpenBLAS, every linear layer OpenBLAS's float32 sgemm).
if HAVE_DNNL
engine_libsdengine_a_SOURCES += engine/conv-dnnl.c engine/matmul-dnnl.c engine/dnnl-call.c engine/dnnl-call.h
else
engine_libsdengine_a_SOURCES += engine/conv-dnnl-none.c engine/matmul-dnnl-none.c
endif
# Libraries every program linking the engine needs.
SD_ENGINE_LIBS = engine/libsdengine.a $(SD_BASE_LIBS) $(OPENBLAS_LIBS) $(DNNL_LIBS) $(ZLIB_LIBS) $(CJSON_LIBS) \
	$(PROTOBUF_C_LIBS) $(CRYPTO_LIBS) -lm

# The ONNX decoder: protoc-c compiles Debian's ONNX schema ($(ONNX_PROTO),
# libonnx-dev) into the build tree.  The schema declares `package onnx;`
# and lives in a directory onnx/, so the generated files are
# onnx/onnx.pb-c.{c,h} under the build directory (-I$(top_builddir) finds
# them as "onnx/onnx.pb-c.h", ahead of /usr/include/onnx's C++ headers,
# which have other names).  Generated, so never distributed: a tarball
# builds them again from the schema of the system it is built on.
SD_ONNX_GEN = onnx/onnx.pb-c.c onnx/onnx.pb-c.h
nodist_engine_libsdengine_a_SOURCES = $(SD_ONNX_GEN)
BUILT_SOURCES = $(SD_ONNX_GEN)
CLEANFILES += $(SD_ONNX_GEN)
onnx/onnx.pb-c.c: $(ONNX_PROTO)
	$(AM_V_GEN)$(MKDIR_P) onnx && \
	$(PROTOC_C) --c_out=. -I$(ONNX_PROTO_DIR) $(ONNX_PROTO)
# protoc-c writes both files at once; the header comes with the source.
onnx/onnx.pb-c.h: onnx/onnx.pb-c.c
	@test -f $@ || { rm -f onnx/onnx.pb-c.c; $(MAKE) $(AM_MAKEFLAGS) onnx/onnx.pb-c.c; }

include engine/comm.mk
include engine/cuda/local.mk
