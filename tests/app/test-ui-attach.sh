#!/bin/sh
# tests/app/test-ui-attach.sh - the run outlives its terminal: spotdeck
# in tmux starts a background run with a cockpit attached; the tmux server is
# killed (the terminal goes, SIGHUP) at step k: the run's process and its
# workers live on with the same pids, no server is released, the journal's
# steps keep increasing.  `spotdeck attach` in a new tmux shows a step above
# k; a second cockpit attaches (both say "2 attached"); `a` + Enter in one
# adds a server that shows in both; q y in the first ends the run: exit 0, a
# quit checkpoint, every server released, the second cockpit exits too, and
# a later `spotdeck attach` shows the final screen read-only.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/tmux-lib.sh"
. "$top_srcdir/tests/ui-e2e/lib.sh"

cat >"$T/job.json" <<-JOB
{"model": "mlp", "dataset": "fashion-mnist", "epochs": 1000, "global_batch": 64, "workers": 0,
 "checkpoint_every": 0, "log_every": 5, "boot_scale": 0.03, "notice_scale": 0.1,
 "hazard_scale": 0.001, "market_seed": 3,
 "cluster": ["gce/us-east1-c/k80/spot", "gce/us-west1-b/k80/spot"]}
JOB

# The second cockpit: a tmux server of its own beside tmux-lib's.
tm2() { "$TMUX_BIN" -S "$T/second.sock" -f "$T/tmux.conf" "$@"; }
cap2() { tm2 capture-pane -p -t ui >"$T/screen2" 2>/dev/null; cat "$T/screen2"; }
wait2() {
	_want2="$1"
	_tmux_poll 'cap2 | grep -qE -- "$_want2"' "${2:-10}" && return 0
	cat "$T/screen2" >&2
	fail "second cockpit: timed out waiting for /$1/"
}
daemon_pid() { cat "$RUN/spotdeck.pid" 2>/dev/null; }
cleanup_all() {
	tm2 kill-server 2>/dev/null
	p=$(daemon_pid)
	[ -n "$p" ] && alive "$p" spotdeck && kill -KILL "$p" 2>/dev/null
	cleanup
}
trap cleanup_all EXIT
SD_EXIT_TRAP=1   # tmux_start keeps it (tmux-lib.sh)
trap 'exit 1' INT TERM HUP PIPE

tmux_start 120 40 "env LANG=C.UTF-8 LC_ALL=C.UTF-8 $SPOTDECK --job $T/job.json --run-dir $RUN"
tmux_wait "1 attached" 30
tmux_wait_re "^│ s2 .*training" 60
_tmux_poll '[ "$(tmux_capture >/dev/null; $CHECK step "$T/screen" 2>/dev/null)" -gt 20 ] 2>/dev/null' 60 ||
	fail "no step above 20 on screen"
K=$($CHECK step "$T/screen")
DPID=$(daemon_pid)
[ -n "$DPID" ] && alive "$DPID" spotdeck || fail "no live run process in $RUN/spotdeck.pid"
[ "$DPID" != "$(ps -o pid= --ppid "$(tmux_var "#{pane_pid}")" | tr -d ' ')" ] ||
	fail "the run's process is the terminal's own child: not in the background"
PIDS=$($CHECK "$RUN/journal.jsonl" pids)
[ -n "$PIDS" ] || fail "no worker pids in the journal"
ok "cockpit at step $K; run process $DPID, workers $(echo $PIDS)"

# The terminal goes away.
tmux_kill
_tmux_poll '$CHECK "$RUN/journal.jsonl" steps-after $((K + 40)) >/dev/null 2>&1' 30 ||
	fail "the journal's steps stopped after the terminal went (last step $K)"
alive "$DPID" spotdeck || fail "the run's process $DPID died with its terminal"
for p in $PIDS; do
	alive "$p" spotdeck-worker || fail "worker $p died with the terminal"
done
[ "$($CHECK "$RUN/journal.jsonl" pids | tr '\n' ' ')" = "$(echo "$PIDS" | tr '\n' ' ')" ] ||
	fail "the workers changed: $(echo $PIDS) -> $($CHECK "$RUN/journal.jsonl" pids)"
grep -q '"type":"released"' "$RUN/journal.jsonl" && fail "a server was released when the terminal went"
grep -q '"type":"signal"' "$RUN/journal.jsonl" && fail "the run got a signal when the terminal went"
K2=$(json_field "$RUN/journal.jsonl" step step)
ok "terminal gone: run $DPID and workers live on, nothing released, journal at step $K2"

# Attach again: a step above the terminal's last one, quickly.
t0=$(date +%s%N)
tmux_start 120 40 "env LANG=C.UTF-8 LC_ALL=C.UTF-8 $SPOTDECK attach $RUN"
_tmux_poll '[ "$(tmux_capture >/dev/null; $CHECK step "$T/screen" 2>/dev/null)" -gt "$K" ] 2>/dev/null' 2 ||
	fail "attach: no step above $K on screen within 2 s (x SD_TIMEOUT_SCALE)"
t1=$(date +%s%N)
ok "attached: step $($CHECK step "$T/screen") > $K on screen after $(( (t1 - t0) / 1000000 )) ms"

# A second cockpit: both say so.
tm2 new-session -d -s ui -x 120 -y 40 \
	"sh -c 'env LANG=C.UTF-8 LC_ALL=C.UTF-8 $SPOTDECK attach $RUN; echo \"[exit \$?]\"; sleep 300'" ||
	fail "second tmux"
wait2 "2 attached" 10
tmux_wait "2 attached" 5
ok "two cockpits attached, both say '2 attached'"

# a + Enter in the first: the new server in both within a second.
tmux_send a
tmux_wait "Add a server" 5
tmux_send Enter
tmux_wait_re "^│ s3 " 1
wait2 "^│ s3 " 1
ok "a + Enter in one cockpit: s3 shows in both"

# q y in the first ends the run; the second hears it and leaves.
tmux_send q
tmux_wait "Quit spotdeck?" 5
tmux_expect "x detaches"
tmux_send y
rc=$(tmux_wait_exit 60)
[ "$rc" = 0 ] || fail "exit status $rc after q y"
_tmux_poll 'cap2 | grep -q "^\[exit [0-9]*\]"' 10 || fail "the second cockpit did not leave at the run's end"
grep -q "the run ended: quit" "$T/screen2" || { cat "$T/screen2" >&2; fail "the second cockpit did not say the run ended"; }
_tmux_poll '! alive "$DPID" spotdeck' 10 || fail "the run's process $DPID outlived its quit"
python3 - "$RUN/journal.jsonl" <<-'PY' || fail "journal after the quit"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
ck = [e for e in ev if e.get("type") == "checkpoint" and e.get("reason") == "final"]
if not ck:
    sys.exit("no checkpoint with reason final (the quit's)")
acq = {e["server"] for e in ev if e.get("type") == "acquired"}
rel = {e["server"] for e in ev if e.get("type") == "released"}
if not acq or acq - rel:
    sys.exit("servers acquired %s, not released: %s" % (sorted(acq), sorted(acq - rel)))
print("ok: final checkpoint at step %d; %d servers acquired, all released" % (ck[-1]["step"], len(acq)))
PY
[ -e "$RUN/control.sock" ] && fail "control.sock outlived the run"
[ -f "$RUN/view-final.json" ] || fail "no view-final.json"

# The ended run attached later: its final screen, read-only, with its end.
tmux_start 120 40 "env LANG=C.UTF-8 LC_ALL=C.UTF-8 $SPOTDECK attach $RUN"
tmux_wait "read-only" 10
tmux_wait "ENDED: quit" 5
tmux_wait_re "^│ s3 " 5
tmux_send c
tmux_wait "the run has ended" 5
tmux_send q
rc=$(tmux_wait_exit 10)
[ "$rc" = 0 ] || fail "exit status $rc leaving the final screen"
ok "the ended run's final screen: read-only, ENDED: quit, commands refused, q leaves with 0"
# The run's own diagnostics (a sanitizer build's reports land there too).
if grep -E "Sanitizer|runtime error" "$RUN/spotdeck.log" >&2; then
	fail "spotdeck.log has sanitizer reports"
fi
exit 0
