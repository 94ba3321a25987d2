#!/bin/sh
# A worker that re-executes itself to pick OpenBLAS's kernel (engine/blas.h)
# keeps its name: /proc/PID/comm is "spotdeck-worker", not "exe" (what
# ps, top, pgrep -x and the cockpit's process lookups see), its argv[0] is
# the one it was started with, and the re-exec did happen (its environment
# holds the OPENBLAS_CORETYPE it set).  SPOTDECK_BLAS_KERNEL=reselect forces
# the re-exec whatever kernel OpenBLAS chose on this machine.
. "$(dirname "$0")/../lib.sh"
tmpdir
grep -qw avx2 /proc/cpuinfo || { echo "SKIP: no AVX2 on this CPU: the worker never re-executes itself" >&2; exit 77; }
# Started through a symbolic link with a name of its own, so argv[0] and
# the executed path differ.
ln -s "$(cd "$(dirname "$WORKER")" && pwd)/spotdeck-worker" "$T/wk"
env -u OPENBLAS_CORETYPE SPOTDECK_BLAS_KERNEL=reselect "$T/wk" --standalone --threads 1 --model mlp \
	--dataset synthetic --epochs 100000 >"$T/out" 2>"$T/err" &
pid=$!
trap 'kill -9 $pid 2>/dev/null; rm -rf "$T"' EXIT
i=0
until tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -q '^OPENBLAS_CORETYPE='; do
	kill -0 "$pid" 2>/dev/null || fail "the worker exited: $(cat "$T/err")"
	i=$((i + 1))
	[ "$i" -lt $((100 * ${SD_TIMEOUT_SCALE:-3})) ] || fail "no OPENBLAS_CORETYPE in the worker's environment after $((i / 10)) s: it did not re-execute itself"
	sleep 0.1
done
comm=$(cat "/proc/$pid/comm")
argv0=$(tr '\0' '\n' <"/proc/$pid/cmdline" | head -1)
kernel=$(tr '\0' '\n' <"/proc/$pid/environ" | sed -n 's/^OPENBLAS_CORETYPE=//p')
[ "$comm" = spotdeck-worker ] || fail "the re-executed worker's /proc/$pid/comm is '$comm', expected spotdeck-worker"
[ "$argv0" = "$T/wk" ] || fail "the re-executed worker's argv[0] is '$argv0', expected $T/wk"
pgrep -x spotdeck-worker | grep -qx "$pid" || fail "pgrep -x spotdeck-worker does not list $pid"
ok "re-executed with OPENBLAS_CORETYPE=$kernel: comm '$comm', argv[0] kept ($argv0), pgrep -x finds pid $pid"
