#!/bin/sh
# tests/app/test-ui-provider-script.sh - the cockpit over a provider from the test
# suite alone: tests/spotdeck-script (spotdeck's main with
# tests/provider/provider-script.c) in tmux at 120x40, two K80s and an offer whose
# zone reports a stockout after the request.  The cluster pane shows the
# two training at the catalog's price, without the "~" of an emulated speed
# that the sim provider's servers carry, and the stockout's server failed; a revocation
# (the trigger file) shows the server under notice, then revoked, and the
# other trains on.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/tmux-lib.sh"
. "$top_srcdir/tests/ui-e2e/lib.sh"
SPOTDECK="$top_builddir/tests/spotdeck-script"
[ -x "$SPOTDECK" ] || fail "$SPOTDECK not built"
TRIG="$T/trigger"
mkdir -p "$TRIG"
cat >"$T/job.json" <<-JOB
{"model": "mlp", "epochs": 1000, "workers": 0, "checkpoint_every": 0,
 "provider": {"name": "script", "trigger_dir": "$TRIG", "boot_seconds": 0.3, "notice_seconds": 3,
              "stockout_zones": ["us-east1-c"]},
 "cluster": ["gce/us-west1-b/k80/spot", "gce/us-central1-c/k80/spot", "gce/us-east1-c/k80/spot"]}
JOB

tmux_start 120 40 "env LANG=C.UTF-8 LC_ALL=C.UTF-8 $SPOTDECK --job $T/job.json --run-dir $RUN --worker $top_builddir/spotdeck-worker"
trap cleanup EXIT
trap 'exit 1' INT TERM HUP PIPE
_tmux_poll 'SDPID=$(ps -o pid= --ppid "$(tmux_var "#{pane_pid}")" | tr -d " ") && [ -n "$SDPID" ]' 5 ||
	fail "spotdeck did not start"

row() {
	tmux_capture >/dev/null
	$CHECK pane "$T/screen" "Cluster (" | awk -v s="$1" '$1 == s'
}
for s in s1 s2; do
	tmux_wait_re "^│ $s .*training" 60
done
tmux_wait_re "^│ s3 .*failed" 10
for s in s1 s2; do
	r=$(row $s)
	echo "$r" | grep -q " 0\.26 " || fail "$s's row '$r' lacks the catalog's \$0.26/h"
	echo "$r" | grep -q "~" && fail "$s's row '$r' marks its speed emulated (~); the script provider's are not"
done
grep -q "emulated GPU speed" "$T/screen" && fail "the cluster pane's footer explains an emulated speed nobody has"
ok "cluster pane: s1 and s2 training at \$0.26/h, not emulated; s3 failed (stockout)"

touch "$TRIG/revoke-s1"
tmux_wait_re "^│ s1 .*notice" 20
ok "s1 under notice: $(row s1)"
tmux_wait_re "^│ s1 .*revoked" 20
tmux_wait_re "^│ s2 .*training" 5
ok "s1 revoked, s2 trains on: $(row s2)"
quit_confirmed
exit 0
