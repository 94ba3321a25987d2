# tests/app/local.mk: the spotdeck program (src/app/): subcommands, bad input, the control socket, the cockpit end to end in tmux.
# `spotdeck export`: runs written back out as ONNX and safetensors, loaded
# into PyTorch, scored as the runs scored them.
TESTS += tests/app/test-export.sh
EXTRA_DIST += tests/app/test-export.sh
# The examples a newcomer starts from (examples/) export, check and train.
TESTS += tests/app/test-examples.sh
EXTRA_DIST += tests/app/test-examples.sh
# The char-level GPT example (examples/char-gpt/): its token files hold the
# corpus's bytes, its export passes onnx.checker, its PyTorch reference
# (tests/bench/gpt-torch) trains.
TESTS += tests/app/test-char-gpt-example.sh
EXTRA_DIST += tests/app/test-char-gpt-example.sh examples/char-gpt/prepare.py \
	examples/char-gpt/model.py examples/char-gpt/export.py examples/char-gpt/ops.py
TESTS += tests/app/test-spotdeck-bad-input.sh
EXTRA_DIST += tests/app/test-spotdeck-bad-input.sh
# Over-long command lines on headless stdin.
TESTS += tests/app/test-headless-stdin.sh
EXTRA_DIST += tests/app/test-headless-stdin.sh
# Extra command arguments are refused with the usage.
TESTS += tests/app/test-command-args.sh
EXTRA_DIST += tests/app/test-command-args.sh
TESTS += tests/app/test-plan-cli.sh
EXTRA_DIST += tests/app/test-plan-cli.sh

# The cockpit's what-if rows (src/app/whatif.c, pure) and its dialog.
check_PROGRAMS += tests/app/test-whatif
TESTS += tests/app/test-whatif
tests_app_test_whatif_SOURCES = tests/app/test-whatif.c src/app/whatif.c src/app/whatif.h tests/check.h
tests_app_test_whatif_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS) $(UV_CFLAGS)
tests_app_test_whatif_LDADD = $(SD_MARKET_LIBS) $(SD_ENGINE_LIBS)
# The what-if view end to end in the real cockpit (tmux, real workers).
TESTS += tests/app/test-ui-whatif-e2e.sh
EXTRA_DIST += tests/app/test-ui-whatif-e2e.sh

# workers, a scripted simulated market; screen and journal checked), and the
# cockpit overhead benchmark (run by hand: tests/bench/cockpit-bench).
TESTS += tests/app/test-ui-cockpit.sh
# What the cockpit says servers cost: billed rates, '*', local servers.
TESTS += tests/app/test-ui-billing.sh tests/app/test-ui-provider-script.sh
EXTRA_DIST += tests/app/test-ui-billing.sh tests/app/test-ui-provider-script.sh
# The cockpit asks about an earlier controller's VMs on the fake GCE, and y
# adopts them.
TESTS += tests/app/test-ui-orphans.sh
EXTRA_DIST += tests/app/test-ui-orphans.sh
# The replacement suggested after revocations in two zones, and why.
TESTS += tests/app/test-ui-suggest.sh
EXTRA_DIST += tests/app/test-ui-suggest.sh
# The live autopilot: its announced action, A holding it, and an
# operator's drop it does not undo.
TESTS += tests/app/test-ui-autopilot.sh
EXTRA_DIST += tests/app/test-ui-autopilot.sh
# A journal that cannot be written: the status line says so.
TESTS += tests/app/test-ui-journal-full.sh
EXTRA_DIST += tests/app/test-ui-journal-full.sh
# A crash (SIGSEGV, SIGFPE) gives the terminal back.
TESTS += tests/app/test-ui-crash.sh
EXTRA_DIST += tests/app/test-ui-crash.sh
EXTRA_DIST += tests/app/test-ui-cockpit.sh
# The background run: detach by losing the terminal, attach again,
# two cockpits, the final screen; the control socket from scripts.
TESTS += tests/app/test-ui-attach.sh tests/app/test-control-socket.sh
EXTRA_DIST += tests/app/test-ui-attach.sh tests/app/test-control-socket.sh
# The control socket of a background run: the
# view codec, the message decoder and its fuzz target.
check_PROGRAMS += tests/app/test-view-codec tests/run/test-control-proto
TESTS += tests/app/test-view-codec tests/run/test-control-proto
CONTROL_TEST_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS)

tests_app_test_view_codec_SOURCES = tests/app/test-view-codec.c tests/ui-fixture.c tests/ui-fixture.h \
	tests/check.h
tests_app_test_view_codec_CPPFLAGS = $(CONTROL_TEST_CPPFLAGS)
tests_app_test_view_codec_LDADD = $(SD_APP_LIBS) $(SD_PROTO_LIBS) $(SD_ENGINE_LIBS)

tests_run_test_control_proto_SOURCES = tests/run/test-control-proto.c tests/check.h
tests_run_test_control_proto_CPPFLAGS = $(CONTROL_TEST_CPPFLAGS)
tests_run_test_control_proto_LDADD = $(SD_APP_LIBS) $(SD_PROTO_LIBS) $(SD_ENGINE_LIBS)

# The view model fed by a real controller, fleet and sim provider (no
# worker starts), every figure checked against the catalog file.
check_PROGRAMS += tests/app/test-view-model
TESTS += tests/app/test-view-model
tests_app_test_view_model_SOURCES = tests/app/test-view-model.c tests/check.h tests/tmpdir.h
tests_app_test_view_model_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS) $(UV_CFLAGS) $(NCURSES_CFLAGS)
tests_app_test_view_model_LDADD = $(SD_APP_LIBS) $(SD_CONTROLLER_LIBS) $(SD_PROVIDER_LIBS) $(SD_UI_LIBS) \
	$(SD_PROTO_LIBS) $(SD_MARKET_LIBS) $(SD_ENGINE_LIBS) $(UV_LIBS)

# The revocation pane marks the autopilot's replacements.
TESTS += tests/app/test-ui-autopilot-revocations.sh
EXTRA_DIST += tests/app/test-ui-autopilot-revocations.sh
