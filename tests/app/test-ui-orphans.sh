#!/bin/sh
# tests/app/test-ui-orphans.sh - the cockpit asks about an earlier controller's
# VMs: a headless controller of a run on the fake GCE is killed
# while two Spot VMs train for it; the same run resumed in the cockpit (in
# tmux, 120x40; the cockpit's default is provider.orphans "ask") opens a
# dialog naming both VMs and makes nothing while it waits; y adopts them:
# the resumed run's two servers train on those VMs, no VM is inserted, and
# after q y none is left at the fake.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/tmux-lib.sh"
. "$top_srcdir/tests/ui-e2e/lib.sh"
. "$top_srcdir/tests/fake-cloud/gce-vms.sh"
export RUN
# The fake goes last: the VMs' sshds (and the workers on them) with it.
trap 'cleanup_all' EXIT
SD_EXIT_TRAP=1   # tmux_start keeps it (tmux-lib.sh)
trap 'exit 1' INT TERM HUP PIPE
cleanup_all() {
	tmux_kill
	[ -n "$SDPID" ] && alive "$SDPID" spotdeck && kill -KILL "$SDPID" 2>/dev/null
	kill "$FAKE_PID" 2>/dev/null
	wait "$FAKE_PID" 2>/dev/null
	cleanup
}

# The fake's insert requests and live VMs, for the checks below.
fake() {
	"$PY" - "$1" <<'PY'
import sys, os
sys.path[:0] = [os.path.join(os.environ.get("top_srcdir", "."), d) for d in ("tests", "tests/fake-cloud")]
from gce_run import control, live
if sys.argv[1] == "inserts":
    print(len([q for q in control("/_control/log")["requests"]
               if q["method"] == "POST" and q["path"].endswith("/instances")]))
else:
    print(" ".join(live()))
PY
}

"$PY" - <<'PY' || fail "the first controller"
import sys, os, signal
sys.path[:0] = [os.path.join(os.environ.get("top_srcdir", "."), d) for d in ("tests", "tests/fake-cloud")]
from elastic import *
from gce_run import provider
j = job(workers=0, cluster=["gce/us-central1-a/t4/spot", "gce/us-central1-b/t4/spot"], epochs=60)
j["provider"] = provider()
r = Run(j, run_dir=os.environ["RUN"])
r.wait(lambda e: e.get("type") == "generation" and e.get("world_size") == 2, "a generation of 2")
r.kill(signal.SIGKILL)
PY
first=$(fake live)
inserts=$(fake inserts)
[ "$(echo "$first" | wc -w)" = 2 ] && [ "$inserts" = 2 ] ||
	fail "after the first controller: live VMs '$first', $inserts inserts; expected 2 and 2"
ok "the first controller was killed while $first trained"

tmux_start 120 40 "env LANG=C.UTF-8 LC_ALL=C.UTF-8 $SPOTDECK --foreground --resume $RUN"
_tmux_poll 'SDPID=$(ps -o pid= --ppid "$(tmux_var "#{pane_pid}")" | tr -d " ") && [ -n "$SDPID" ]' 5 ||
	fail "spotdeck did not start"
tmux_wait "VMs of an earlier controller" 30
for vm in $first; do
	tmux_wait "$vm" 10
done
tmux_wait "y adopt  n delete" 5
[ "$(fake inserts)" = 2 ] || fail "the resumed run inserted VMs while asking: $(fake inserts) inserts"
# Esc leaves the question open: the run waits for y or n.
tmux_send Escape
tmux_wait "the run waits for an answer" 5
tmux_capture >/dev/null
grep -q "y adopt  n delete" "$T/screen" || fail "Esc closed the question"
ok "the cockpit asked about $first, Esc kept the question, nothing was inserted"

tmux_send y
tmux_wait_re "^│ s3 .*training" 90
tmux_wait_re "^│ s4 .*training" 30
[ "$(fake inserts)" = 2 ] && [ "$(fake live)" = "$first" ] ||
	fail "adopting made VMs: $(fake inserts) inserts, live '$(fake live)' (first: '$first')"
for vm in $first; do
	grep -q "\"type\":\"orphan\".*\"instance\":\"$vm\".*\"action\":\"adopt\",\"server\":\"s[34]\"" \
		"$RUN/journal.jsonl" || fail "no adopt event for $vm in the journal"
done
ok "y: s3 and s4 train on the adopted $first, no VM inserted"

quit_confirmed 60
[ -z "$(fake live)" ] || fail "VMs left after quit: $(fake live)"
ok "nothing left at the fake after q y"
exit 0
