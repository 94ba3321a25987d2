# src/base/: the bottom of the tree, what every layer (engine/ and ui/
# included) may use: one-line errors and the allocation that aborts on
# out-of-memory (errors.h), whole files read and written (file.h), the
# PCG32 generator (rng.h), JSON values checked and shown in messages
# (json.h), lines out of a byte stream (line-reader.h), hex (hex.h), the
# run's token (token.h).  It includes nothing of ours.  Programs link it
# through $(SD_ENGINE_LIBS) or $(SD_UI_LIBS), which end with
# $(SD_BASE_LIBS).
noinst_LIBRARIES += src/base/libsdbase.a
src_base_libsdbase_a_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS)
src_base_libsdbase_a_SOURCES = \
	src/base/errors.c src/base/errors.h \
	src/base/file.c src/base/file.h \
	src/base/rng.c src/base/rng.h \
	src/base/json.c src/base/json.h \
	src/base/line-reader.c src/base/line-reader.h \
	src/base/hex.c src/base/hex.h \
	src/base/token.c src/base/token.h
SD_BASE_LIBS = src/base/libsdbase.a $(CJSON_LIBS)
