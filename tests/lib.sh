# tests/lib.sh - shared helpers for the shell tests (sourced).
# Tests get top_srcdir and top_builddir from the Makefile's test environment.
: "${top_builddir:=$(cd "$(dirname "$0")/.." && pwd)}"
: "${top_srcdir:=$top_builddir}"
WORKER="$top_builddir/spotdeck-worker"
FMNIST=/usr/share/datasets/fashion-mnist

fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }

# tmpdir: a fresh directory removed when the test exits.
tmpdir() {
	T=$(mktemp -d "${TMPDIR:-/tmp}/spotdeck-test.XXXXXX") || fail "mktemp"
	trap 'rm -rf "$T"' EXIT
}

# fake_start NAME CMD...: starts CMD, a fake server that prints its port on
# its first stdout line (tests/fake-cloud/), in the background; waits for
# the port and sets FAKE_PORT and FAKE_PID.  Call tmpdir first: the EXIT
# trap then kills the fake too.
fake_start() {
	local name="$1" t=100; shift
	"$@" >"$T/$name.port" 2>"$T/$name.err" &
	FAKE_PID=$!
	trap 'kill '"$FAKE_PID"' 2>/dev/null; rm -rf "$T"' EXIT
	while [ ! -s "$T/$name.port" ]; do
		kill -0 "$FAKE_PID" 2>/dev/null || fail "$name exited: $(cat "$T/$name.err")"
		t=$((t - 1)); [ "$t" -gt 0 ] || fail "$name printed no port in 10 s"
		sleep 0.1
	done
	FAKE_PORT=$(head -1 "$T/$name.port")
}

# json_field FILE TYPE FIELD: FIELD of the last JSON line whose type is TYPE.
json_field() {
	python3 - "$1" "$2" "$3" <<'PY'
import json, sys
path, typ, field = sys.argv[1:4]
val = None
for line in open(path):
    line = line.strip()
    if not line.startswith("{"):
        continue
    ev = json.loads(line)
    if ev.get("type") == typ and field in ev:
        val = ev[field]
if val is None:
    sys.exit("no %s event with field %s in %s" % (typ, field, path))
print(val)
PY
}

# expect_error DESC PATTERN CMD...: CMD must exit with status $EXPECT_RC
# (default 1; 2 is a usage error) and one stderr line matching PATTERN
# (extended regex); a crash (signal exit) fails.
expect_error() {
	local desc="$1" pat="$2" want="${EXPECT_RC:-1}"; shift 2
	"$@" >"$T/out" 2>"$T/err"
	local rc=$?
	[ "$rc" -eq "$want" ] || { cat "$T/err" >&2; fail "$desc: exit status $rc, expected $want"; }
	[ "$(wc -l <"$T/err")" -eq 1 ] || { cat "$T/err" >&2; fail "$desc: expected exactly one error line"; }
	grep -Eq -- "$pat" "$T/err" || { cat "$T/err" >&2; fail "$desc: error does not match /$pat/"; }
	ok "$desc: $(cat "$T/err")"
}
