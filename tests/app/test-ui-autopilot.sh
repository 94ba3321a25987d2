#!/bin/sh
# tests/app/test-ui-autopilot.sh - the operator stays in charge of the live
# autopilot, on the real spotdeck in tmux at 160x40.  The job
# (tests/ui-e2e/autopilot-job.json) trains 1000 epochs on two K80 spot
# servers with a 3-minute deadline it cannot meet, and lets the autopilot
# use one offer only, so the one move it can make is to add a server of
# that offer:
#   the header shows "autopilot: deadline HH:MM, P(on time) P" and the
#     status line the announced action, "autopilot: add OFFER in N s - A to
#     hold";
#   A holds it: the journal says "held", the status line drops it, and no
#     add by the autopilot runs (checked 8 s later, past the 5 s it had);
#   the operator drops a server (d, y): the autopilot decides again then,
#     and at its planned looks after the hold is over (every: 20 s), and
#     it announces and adds nothing: it never undoes the operator's drop.  Without that rule (the policy's manual_cap) it
#     announces and runs the add again, as it did before the drop.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/tmux-lib.sh"
. "$top_srcdir/tests/ui-e2e/lib.sh"

# jq_py CODE: runs CODE with `ev` (the journal's events); prints what it prints.
jq_py() {
	python3 - "$RUN/journal.jsonl" "$1" <<-'PY'
	import json, sys
	ev = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
	exec(sys.argv[2])
	PY
}

tmux_start 160 40 "env LANG=C.UTF-8 LC_ALL=C.UTF-8 $SPOTDECK --job $E2E/autopilot-job.json --run-dir $RUN"
trap cleanup EXIT
trap 'exit 1' INT TERM HUP PIPE
_tmux_poll 'SDPID=$(ps -o pid= --ppid "$(tmux_var "#{pane_pid}")" | tr -d " ") && [ -n "$SDPID" ]' 5 ||
	fail "spotdeck did not start"

# The announced action, on the status line, and the goal in the header.
tmux_wait_re "autopilot: add gce/us-west1-b/k80/spot in [0-9] s - A to hold" 40
tmux_expect_re() { grep -qE "$1" "$T/screen" || { cat "$T/screen" >&2; fail "not on screen: $1"; }; }
tmux_expect_re "autopilot: deadline [0-2][0-9]:[0-5][0-9], P\\(on time\\) [01]\\.[0-9]{2}"
ok "announced: $(grep -oE 'autopilot: add [^ ]+ in [0-9] s - A to hold' "$T/screen" | head -n 1); header: $(grep -oE 'autopilot: deadline [0-9:]+, P\(on time\) [0-9.]+' "$T/screen" | head -n 1)"

# A holds it.
tmux_send A
tmux_wait_file "$RUN/journal.jsonl" '"type":"autopilot".*"what":"held"' 10
tmux_wait_gone "A to hold" 5
sleep 8
n=$(jq_py 'print(sum(1 for e in ev if e["type"] == "command" and e.get("by") == "autopilot"))')
[ "$n" = 0 ] || fail "the held add ran: $n command(s) by the autopilot"
hold_t=$(jq_py 'print([e["t"] for e in ev if e["type"] == "autopilot" and e["what"] == "held"][0])')
ok "A held it (journal: held at ${hold_t} s); 8 s later no command by the autopilot ran"

# The operator drops the first server.
tmux_send g
tmux_send d
tmux_wait_re "Drop s[0-9]+ \\(" 5
tmux_send y
tmux_wait_file "$RUN/journal.jsonl" '"command":"drop s' 10
drop_t=$(jq_py 'print([e["t"] for e in ev if e["type"] == "command" and e["command"].startswith("drop")][0])')
# Two of its planned looks (every: 20 s) after the hold is over: without
# the drop's rule the first of them announces the add again.  A "nothing"
# it already journaled is not journaled again, so the wait is on time.
_tmux_poll "jq_py 'import sys; sys.exit(0 if ev[-1][\"t\"] > $hold_t + 48 else 1)'" 90 ||
	fail "the run did not reach $hold_t + 48 s"
got=$(jq_py "print(' | '.join('%s %s' % (e['what'], e.get('action', '')) for e in ev if e['type'] == 'autopilot' and e['t'] > $drop_t))")
n=$(jq_py 'print(sum(1 for e in ev if e["type"] == "command" and e.get("by") == "autopilot"))')
[ "$n" = 0 ] || fail "the autopilot ran a command after the operator's drop: $got"
echo "$got" | grep -q "pending" && fail "the autopilot announced a move after the operator's drop: $got"
ok "after the operator's drop (at ${drop_t} s) the autopilot decided again and added nothing: $got"

quit_confirmed
exit 0
