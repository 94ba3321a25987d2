#!/bin/sh
# tests/provider/http/test-http.sh: the controller's HTTP client (src/provider/http/http.h)
# against tests/fake-cloud/faults.py, a local server that answers late,
# wrongly or not at all on request; tests/provider/http/test-http does the checking.
. "$(dirname "$0")/../../lib.sh"
tmpdir
fake_start faults.py python3 "$top_srcdir/tests/fake-cloud/faults.py"
"$top_builddir/tests/provider/http/test-http" "http://127.0.0.1:$FAKE_PORT"
