# engine/: the training engine library (no controller, sockets or curses here).
noinst_LIBRARIES += engine/libsdengine.a
engine_libsdengine_a_CPPFLAGS = $(AM_CPPFLAGS) $(OPENBLAS_CFLAGS) $(ZLIB_CFLAGS) $(CJSON_CFLAGS) \
	$(DNNL_CFLAGS)
engine_libsdengine_a_SOURCES = \
	engine/errors.c engine/errors.h \
	engine/rng.c engine/rng.h \
	engine/blas.c engine/blas.h \
	engine/layers.c engine/layers.h engine/layers-blocked.c \
	engine/data.c engine/data.h engine/npy.c engine/npy.h \
	engine/checkpoint.c engine/checkpoint.h \
	engine/model.c engine/model.h engine/model-graph.h \
	engine/optim.c engine/optim.h \
	engine/train.c engine/train.h \
	engine/backend.c engine/backend.h engine/backend-plugin.h \
	engine/engine.h engine/conv-dnnl.h
# Convolutions through oneDNN where configure found it, else a stand-in that
# supports nothing (every convolution then runs im2col + OpenBLAS).
if HAVE_DNNL
engine_libsdengine_a_SOURCES += engine/conv-dnnl.c
else
engine_libsdengine_a_SOURCES += engine/conv-dnnl-none.c
endif
# Libraries every program linking the engine needs.
SD_ENGINE_LIBS = engine/libsdengine.a $(OPENBLAS_LIBS) $(DNNL_LIBS) $(ZLIB_LIBS) $(CJSON_LIBS) -lm

include engine/comm.mk
include engine/cuda/local.mk
