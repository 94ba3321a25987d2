# tests/fuzz/local.mk: fuzz targets (plain programs replaying mutated inputs in make check; libFuzzer targets with -DSD_LIBFUZZER).
# Built as a plain program with a main() that replays mutated models; see
# the file for the libFuzzer build.
check_PROGRAMS += tests/fuzz/fuzz-onnx
TESTS += tests/fuzz/fuzz-onnx
tests_fuzz_fuzz_onnx_SOURCES = tests/fuzz/fuzz-onnx.c tests/engine/onnx-gen.h tests/check.h \
	tests/fuzz/mutate.h
tests_fuzz_fuzz_onnx_CPPFLAGS = $(AM_CPPFLAGS) $(PROTOBUF_C_CFLAGS)
tests_fuzz_fuzz_onnx_LDADD = $(SD_ENGINE_LIBS)

# The .npy header reader's fuzz target: a plain program that replays
# mutated .npy files (see the file for the libFuzzer build).
check_PROGRAMS += tests/fuzz/fuzz-npy
TESTS += tests/fuzz/fuzz-npy
tests_fuzz_fuzz_npy_SOURCES = tests/fuzz/fuzz-npy.c tests/fuzz/mutate.h tests/engine/npy-write.h \
	tests/check.h
tests_fuzz_fuzz_npy_LDADD = $(SD_ENGINE_LIBS)
check_PROGRAMS += tests/fuzz/fuzz-catalog
TESTS += tests/fuzz/fuzz-catalog
# Built as a plain program with a main() that replays mutated catalogs;
# see the file for the libFuzzer build.
tests_fuzz_fuzz_catalog_SOURCES = tests/fuzz/fuzz-catalog.c tests/fuzz/mutate.h
tests_fuzz_fuzz_catalog_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS)
tests_fuzz_fuzz_catalog_LDADD = $(SD_MARKET_LIBS) $(SD_ENGINE_LIBS)

check_PROGRAMS += tests/fuzz/fuzz-theme
TESTS += tests/fuzz/fuzz-theme
# Built as a plain program with a main() that replays mutated themes; see
# the file for the libFuzzer build.
tests_fuzz_fuzz_theme_SOURCES = tests/fuzz/fuzz-theme.c tests/check.h tests/fuzz/mutate.h
tests_fuzz_fuzz_theme_CPPFLAGS = $(UI_TEST_CPPFLAGS)
tests_fuzz_fuzz_theme_LDADD = $(SD_UI_LIBS)

check_PROGRAMS += tests/fuzz/fuzz-control
TESTS += tests/fuzz/fuzz-control
# Built as a plain program with a main() that replays mutated messages;
# with -DSD_LIBFUZZER -fsanitize=fuzzer it is a libFuzzer target.
tests_fuzz_fuzz_control_SOURCES = tests/fuzz/fuzz-control.c tests/ui-fixture.c \
	tests/ui-fixture.h tests/check.h tests/fuzz/mutate.h
tests_fuzz_fuzz_control_CPPFLAGS = $(CONTROL_TEST_CPPFLAGS)
tests_fuzz_fuzz_control_LDADD = $(SD_APP_LIBS) $(SD_PROTO_LIBS) $(SD_ENGINE_LIBS)

check_PROGRAMS += tests/fuzz/fuzz-hosts
TESTS += tests/fuzz/fuzz-hosts

# Built as a plain program with a main() that replays mutated hosts files;
# see the file for the libFuzzer build.
tests_fuzz_fuzz_hosts_SOURCES = tests/fuzz/fuzz-hosts.c tests/check.h tests/fuzz/mutate.h
tests_fuzz_fuzz_hosts_LDADD = $(SD_PROVIDER_LIBS) $(SD_ENGINE_LIBS)
