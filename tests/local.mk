# tests/: unit, integration, TUI, fuzz and benchmark programs.
# Each area keeps its own fragment.
include tests/engine.mk
include tests/onnx.mk
include tests/data.mk
include tests/train.mk
include tests/market.mk
include tests/planner.mk
include tests/comm.mk
include tests/gpu.mk
include tests/ui.mk
include tests/ui-e2e.mk
include tests/control.mk
include tests/hosts.mk
include tests/http.mk
include tests/gce-auth.mk
include tests/sigv4.mk
include tests/netns.mk
include tests/fake-cloud.mk

# packages/debian.txt covers every program the tests and build scripts run.
TESTS += tests/test-packages.sh
EXTRA_DIST += tests/test-packages.sh

# No #include points up a layer; tests/layers.txt writes the graph once.
TESTS += tests/test-include-layers.sh
EXTRA_DIST += tests/test-include-layers.sh tests/layers.txt

# No function in src/, ui/ or engine/ is over 120 lines, but for those the
# list names with their length and the reason they wait.
TESTS += tests/test-function-length.sh

# spotdeck SUBCOMMAND through its table: --help, each one's usage, the manual.
TESTS += tests/test-subcommands.sh
EXTRA_DIST += tests/test-subcommands.sh
EXTRA_DIST += tests/test-function-length.sh tests/function-length.awk tests/function-length-allow.txt

# Headers shared by the C tests and fuzz targets (tests/check.h: the checks;
# tests/tmpdir.h: scratch files; tests/fuzz/mutate.h: the fuzz drivers).
# The programs here list them in their _SOURCES; this line also ships them
# for those built from src/*/local.mk.
EXTRA_DIST += tests/check.h tests/tmpdir.h tests/fuzz/mutate.h
