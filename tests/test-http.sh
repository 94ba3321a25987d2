#!/bin/sh
# tests/test-http.sh: the controller's HTTP client (src/provider/http.h)
# against tests/fake-cloud/faults.py, a local server that answers late,
# wrongly or not at all on request; tests/test-http does the checking.
. "$(dirname "$0")/lib.sh"
tmpdir
python3 "$top_srcdir/tests/fake-cloud/faults.py" >"$T/port" 2>"$T/fake.err" &
fake=$!
trap 'kill $fake 2>/dev/null; rm -rf "$T"' EXIT
t=100
while [ ! -s "$T/port" ]; do
	kill -0 $fake 2>/dev/null || fail "faults.py exited: $(cat "$T/fake.err")"
	t=$((t - 1)); [ "$t" -gt 0 ] || fail "faults.py printed no port in 10 s"
	sleep 0.1
done
"$top_builddir/tests/test-http" "http://127.0.0.1:$(head -1 "$T/port")"
