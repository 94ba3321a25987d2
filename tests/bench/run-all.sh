#!/bin/sh
# Runs every benchmark in tests/bench/ from the build tree (make bench).
here=$(cd "$(dirname "$0")" && pwd)
export top_builddir=${top_builddir:-$(pwd)}
for b in "$here"/engine-vs-torch "$here"/elastic-bench "$here"/liveness-bench "$here"/cockpit-bench; do
	echo "== $(basename "$b")"
	"$b" || echo "(exit $?)"
done
for b in "$top_builddir"/tests/bench/bench-*; do
	case "$b" in *bench-sgemm|*.o|*.c) continue;; esac
	[ -x "$b" ] || continue
	echo "== $(basename "$b")"
	"$b" || echo "(exit $?)"
done
