# tests/: unit, integration, TUI, fuzz and benchmark programs, in the
# folders of the layers they test (tests/layers.txt): tests/engine/ for
# engine/, tests/provider/gce/ for src/provider/gce/, and so on; each
# folder keeps its own local.mk.  What they share stays here: check.h,
# tmpdir.h, lib.sh, tmux-lib.sh, the fixtures and the fakes.
include tests/base/local.mk
include tests/engine/local.mk
include tests/ui/local.mk
include tests/proto/local.mk
include tests/market/local.mk
include tests/worker/local.mk
include tests/provider/local.mk
include tests/provider/sim/local.mk
include tests/provider/ssh/local.mk
include tests/provider/http/local.mk
include tests/provider/gce/local.mk
include tests/provider/aws/local.mk
include tests/run/local.mk
include tests/controller/local.mk
include tests/app/local.mk
include tests/bench/local.mk
include tests/fuzz/local.mk
include tests/gpu/local.mk

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
TESTS += tests/app/test-subcommands.sh
EXTRA_DIST += tests/app/test-subcommands.sh
EXTRA_DIST += tests/test-function-length.sh tests/function-length.awk tests/function-length-allow.txt

# Headers shared by the C tests and fuzz targets (tests/check.h: the checks;
# tests/tmpdir.h: scratch files; tests/fuzz/mutate.h: the fuzz drivers).
# The programs here list them in their _SOURCES; this line also ships them
# for those built from src/*/local.mk.
EXTRA_DIST += tests/check.h tests/tmpdir.h tests/fuzz/mutate.h

EXTRA_DIST += tests/lib.sh
EXTRA_DIST += tests/elastic.py
EXTRA_DIST += tests/fake-metadata.py
# A provider from the test suite alone: spotdeck's own main with
# tests/provider/provider-script.c linked in, which registers the "script" provider;
# test-provider-script.sh runs a headless job over it with a revocation.
check_PROGRAMS += tests/spotdeck-script
tests_spotdeck_script_SOURCES = src/main.c tests/provider/provider-script.c
tests_spotdeck_script_CPPFLAGS = $(AM_CPPFLAGS) $(UV_CFLAGS) $(CJSON_CFLAGS)
tests_spotdeck_script_LDADD = $(spotdeck_LDADD)
EXTRA_DIST += tests/tmux-lib.sh

EXTRA_DIST += tests/ui-e2e/lib.sh tests/ui-e2e/billing-job.json tests/ui-e2e/billing-trace.jsonl
EXTRA_DIST += tests/ui-e2e/suggest-job.json tests/ui-e2e/suggest-trace.jsonl
EXTRA_DIST += tests/ui-e2e/autopilot-job.json
EXTRA_DIST += tests/ui-e2e/check.py tests/ui-e2e/cockpit-job.json tests/ui-e2e/cockpit-trace.jsonl
EXTRA_DIST += tests/fake-cloud/faults.py

EXTRA_DIST += tests/netns/lib.sh tests/netns/README
EXTRA_DIST += tests/netns/sniff.py
EXTRA_DIST += tests/fake-cloud/gce.py tests/fake-cloud/fakevm.py
EXTRA_DIST += tests/fake-cloud/gce-env.sh
EXTRA_DIST += tests/fake-cloud/gce-vms.sh tests/fake-cloud/gce_run.py
EXTRA_DIST += tests/fake-cloud/ec2.py
EXTRA_DIST += tests/fake-cloud/ec2-vms.sh tests/fake-cloud/aws_run.py tests/fake-cloud/cloud_run.py
EXTRA_DIST += tests/ui-e2e/autopilot-revocations-job.json
