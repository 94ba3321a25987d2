#!/bin/sh
# tests/provider/gce/test-gce-vm.sh: a Spot VM's life on Compute Engine
# (src/provider/gce/gce-vm.c) against tests/fake-cloud/gce.py; the checks are
# tests/provider/gce/test-gce-vm's.
. "$(dirname "$0")/../../lib.sh"
tmpdir
GCE_FAKE_ARGS="--boot-s 0.3 --op-s 0.2"
. "$top_srcdir/tests/fake-cloud/gce-env.sh"
"$top_builddir/tests/provider/gce/test-gce-vm" "$BASE" "$KEY"
