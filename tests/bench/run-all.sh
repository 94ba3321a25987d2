#!/bin/sh
# Runs every benchmark in tests/bench/ from the build tree (make bench),
# reports each one's exit status, then every "ratio:" line of them all
# (tests/bench/bench.h), and exits 1 when a benchmark missed its target or
# failed.  A benchmark that cannot run here (exit 77: no PyTorch, no data
# set) is reported as skipped with its reason, and does not fail the run.
# BENCHES="bench-ui elastic-bench" runs only those.
here=$(cd "$(dirname "$0")" && pwd)
export top_builddir=${top_builddir:-$(pwd)}
export top_srcdir=${top_srcdir:-$(cd "$here/../.." && pwd)}
out=$(mktemp -d "${TMPDIR:-/tmp}/bench.XXXXXX") || exit 1
trap 'rm -rf "$out"' EXIT

list=
for b in "$here"/engine-vs-torch "$here"/bf16-vs-torch "$here"/gpt-vs-torch "$here"/gpt-vs-llmc "$here"/onnx-vs-builtin "$here"/elastic-bench "$here"/ddp-vs-torch "$here"/liveness-bench "$here"/cockpit-bench "$here"/cloud-cockpit-bench "$here"/attach-bench \
	"$top_builddir"/tests/bench/autopilot-bench \
	"$top_builddir"/tests/bench/bench-*; do
	case "$b" in *bench-sgemm|*.o|*.c|*.h) continue;; esac   # bench-sgemm is engine-vs-torch's tool
	[ -x "$b" ] || continue
	n=$(basename "$b")
	if [ -n "${BENCHES:-}" ]; then
		case " $BENCHES " in *" $n "*) ;; *) continue;; esac
	fi
	list="$list $b"
done

failed=0 skipped=0 passed=0
: >"$out/status"
for b in $list; do
	n=$(basename "$b")
	echo "== $n"
	# Shown as it runs (some take minutes) and kept for the summary.
	{ "$b"; echo $? >"$out/$n.rc"; } 2>&1 | tee "$out/$n.out"
	rc=$(cat "$out/$n.rc")
	case $rc in
	0) verdict="ok"; passed=$((passed + 1)) ;;
	77) verdict="skipped: $(grep 'SKIP' "$out/$n.out" | tail -n 1)"; skipped=$((skipped + 1)) ;;
	1) verdict="FAILED: a target was missed or a run failed"; failed=$((failed + 1)) ;;
	*) verdict="FAILED: exit status $rc"; failed=$((failed + 1)) ;;
	esac
	printf '%-16s exit %3d  %s\n' "$n" "$rc" "$verdict" >>"$out/status"
	echo
done

echo "== summary (the machine's load shows in every figure: re-run on a quiet one before trusting a miss)"
cat "$out/status"
echo "every ratio:"
for b in $list; do
	grep -h '^ratio: ' "$out/$(basename "$b").out"
done | sed 's/^ratio: /  /'
echo "$passed benchmarks met their targets, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
