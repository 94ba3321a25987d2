# tests/control.mk: the control socket of a background run: the
# view codec, the message decoder and its fuzz target.
CONTROL_TESTS = tests/test-view-codec tests/test-control-proto tests/fuzz/fuzz-control
check_PROGRAMS += $(CONTROL_TESTS)
TESTS += $(CONTROL_TESTS)
CONTROL_TEST_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS)

tests_test_view_codec_SOURCES = tests/test-view-codec.c tests/ui-fixture.c tests/ui-fixture.h \
	tests/check.h
tests_test_view_codec_CPPFLAGS = $(CONTROL_TEST_CPPFLAGS)
tests_test_view_codec_LDADD = $(SD_APP_LIBS) $(SD_PROTO_LIBS) $(SD_ENGINE_LIBS)

tests_test_control_proto_SOURCES = tests/test-control-proto.c tests/check.h
tests_test_control_proto_CPPFLAGS = $(CONTROL_TEST_CPPFLAGS)
tests_test_control_proto_LDADD = $(SD_APP_LIBS) $(SD_PROTO_LIBS) $(SD_ENGINE_LIBS)

# Built as a plain program with a main() that replays mutated messages;
# with -DSD_LIBFUZZER -fsanitize=fuzzer it is a libFuzzer target.
tests_fuzz_fuzz_control_SOURCES = tests/fuzz/fuzz-control.c tests/ui-fixture.c \
	tests/ui-fixture.h tests/check.h tests/fuzz/mutate.h
tests_fuzz_fuzz_control_CPPFLAGS = $(CONTROL_TEST_CPPFLAGS)
tests_fuzz_fuzz_control_LDADD = $(SD_APP_LIBS) $(SD_PROTO_LIBS) $(SD_ENGINE_LIBS)

# The view model fed by a real controller, fleet and sim provider (no
# worker starts), every figure checked against the catalog file.
check_PROGRAMS += tests/test-view-model
TESTS += tests/test-view-model
tests_test_view_model_SOURCES = tests/test-view-model.c tests/check.h tests/tmpdir.h
tests_test_view_model_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS) $(UV_CFLAGS) $(NCURSES_CFLAGS)
tests_test_view_model_LDADD = $(SD_APP_LIBS) $(SD_CONTROLLER_LIBS) $(SD_PROVIDER_LIBS) $(SD_UI_LIBS) \
	$(SD_PROTO_LIBS) $(SD_MARKET_LIBS) $(SD_ENGINE_LIBS) $(UV_LIBS)
