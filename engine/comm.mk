# engine/comm.mk: collectives (Gloo shim, NCCL) - rules for engine/comm-*.
#
# The collectives live in their own library because the Gloo backend is C++:
# programs that use it link $(SD_COMM_LIBS), which brings libstdc++ along, so
# the rest of the engine and its programs stay plain C.  Without Gloo or NCCL
# the library still builds (world size 1 works; other sizes report that the
# backend is missing).
noinst_LIBRARIES += engine/libsdcomm.a
engine_libsdcomm_a_CPPFLAGS = $(AM_CPPFLAGS)
engine_libsdcomm_a_SOURCES = engine/comm.c engine/comm.h engine/comm-backend.h engine/comm-shm.c \
	engine/grad-sync.c engine/grad-sync.h
SD_COMM_LIBS = engine/libsdcomm.a -lpthread
# Programs linking $(SD_COMM_LIBS) also put this in their _LDFLAGS.
SD_COMM_LINK_FLAGS =

if HAVE_GLOO
engine_libsdcomm_a_SOURCES += engine/comm-gloo.cc
SD_COMM_LIBS += $(GLOO_LIBS) -lstdc++ -lpthread
endif

# NCCL sits behind the same API but is built into the CUDA backend plugin
# (engine/cuda/local.mk): comm.c finds its ops there at run time, so no
# program links NCCL or the CUDA runtime.
