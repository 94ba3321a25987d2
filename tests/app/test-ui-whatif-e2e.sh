#!/bin/sh
# tests/app/test-ui-whatif-e2e.sh - the cockpit's what-if view end to end in
# tmux: real workers train an MLP on two simulated K80s (s1 in us-east1-c,
# s2 in us-west1-b; a trace with no revocation keeps the market still), and
#   the header shows what the spot servers saved against on-demand;
#   w plans the remaining work: the running cluster's row ("now: 2x K80
#     spot") and the market's rows appear, with speeds measured in this run;
#   Enter on the running cluster's row switches nothing;
#   the "2x K80 spot" row (spread over us-central1-c and us-west1-b) keeps
#     s2, adds a K80 in us-central1-c and drops s1: Enter shows it, y sends
#     exactly those commands (journal), and the new server trains;
#   q + y quits.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/tmux-lib.sh"
. "$top_srcdir/tests/ui-e2e/lib.sh"

# A trace whose only event is far away: the market revokes nothing.
printf '{"t": 100000, "event": "stockout", "zone": "asia-east1-c", "seconds": 1}\n' >"$T/still.jsonl"
tmux_start 120 40 "env LANG=C.UTF-8 LC_ALL=C.UTF-8 $SPOTDECK --job $E2E/cockpit-job.json --run-dir $RUN --trace $T/still.jsonl"
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
_tmux_poll 'SDPID=$(ps -o pid= --ppid "$(tmux_var "#{pane_pid}")" | tr -d " ") && [ -n "$SDPID" ]' 5 ||
	fail "spotdeck did not start"

tmux_wait "Cluster (" 20
tmux_wait_re "^│ s1 .*training" 30
tmux_wait_re "^│ s2 .*training" 30
tmux_wait_re "saved \\\$[0-9.]+ vs on-demand" 30
ok "header: $(grep -oE 'saved [^ ]+ vs on-demand' "$T/screen")"
# Let the run measure its speed.
tmux_wait_re " ~[0-9][0-9.]*k? img/s" 20

tmux_send w
tmux_wait "What if: the remaining work" 5
tmux_wait "now: 2x K80 spot" 60
tmux_expect "measured in this run"
tmux_expect "2x K80 spot"
tmux_expect "8x V100 on-demand"
ok "w: $(grep -c 'spot\|on-demand' "$T/screen") rows; $(grep -oE 'simulated: [^│]*' "$T/screen" | head -n 1)"

# Rows in screen order: where are the running cluster and "2x K80 spot"?
# The labels start under the heading "cluster"; rows follow it.
row_of() {
	python3 - "$T/screen" "$1" <<'PY'
import sys
lines = open(sys.argv[1], encoding="utf-8").read().split("\n")
head = next(i for i, l in enumerate(lines) if " cluster " in l and " p90 " in l)
col = lines[head].index("cluster")
for n, l in enumerate(lines[head + 1:], 1):
    label = l[col:col + 24].strip()
    if not label:
        break
    if label == sys.argv[2]:
        print(n)
        break
PY
}
tmux_capture >/dev/null
now=$(row_of "now: 2x K80 spot")
two=$(row_of "2x K80 spot")
[ -n "$now" ] && [ -n "$two" ] || { cat "$T/screen" >&2; fail "rows not found (now=$now, 2x=$two)"; }

# Enter on the running cluster: nothing to do.
tmux_send g
i=1
while [ "$i" -lt "$now" ]; do tmux_send j; i=$((i + 1)); done
tmux_wait "no change" 5
tmux_send Enter
tmux_wait "that is the cluster running now" 5
ok "Enter on the running cluster's row switches nothing"

tmux_send g
i=1
while [ "$i" -lt "$two" ]; do tmux_send j; i=$((i + 1)); done
tmux_wait "add 1: 1 x gce/us-central1-c/k80/spot; drop s1" 5
tmux_send Enter
tmux_wait "Switch to 2x K80 spot" 5
tmux_send y
tmux_wait_gone "Switch to 2x K80 spot" 5
tmux_wait_file "$RUN/journal.jsonl" '"command":"drop s1"' 10
python3 - "$RUN/journal.jsonl" <<'PY' || fail "journal"
import json, sys
cmds = [e for e in map(json.loads, open(sys.argv[1])) if e.get("type") == "command"]
got = [(e["command"], e["ok"]) for e in cmds]
want = [("plan", True), ("add gce/us-central1-c/k80/spot", True), ("drop s1", True)]
assert [c for c, _ in got if c != "plan"] == [c for c, _ in want[1:]], got
assert all(ok for c, ok in got if c != "plan"), got
print("ok: journal: " + ", ".join(c for c, _ in got if c != "plan"))
PY
tmux_wait_re "^│ s3 +us-central1-c .*training" 60
ok "s3 (us-central1-c) trains; s2 kept"
tmux_expect "s2   us-west1-b"

quit_confirmed 60
