#!/bin/sh
# tests/app/test-ui-autopilot-revocations.sh - the revocation pane marks the
# autopilot's replacements, on the real spotdeck in tmux at 200x50.  The
# job (tests/ui-e2e/autopilot-revocations-job.json) is the live autopilot
# test's: three K80 spot servers on the sim market at a hazard scale that
# revokes them within seconds, the autopilot keeping a 5-minute deadline.
# Once the journal has an add or swap run by the autopilot after a
# revocation, the revocation pane's row of that revocation shows
# "A OFFER", the offer the autopilot's command named, and there are no
# more marks on screen than adds and swaps the autopilot ran.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/tmux-lib.sh"
. "$top_srcdir/tests/ui-e2e/lib.sh"

jq_py() {
	python3 - "$RUN/journal.jsonl" "$1" <<-'PY'
	import json, sys
	ev = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
	exec(sys.argv[2])
	PY
}

tmux_start 200 50 "env LANG=C.UTF-8 LC_ALL=C.UTF-8 $SPOTDECK --job $E2E/autopilot-revocations-job.json --run-dir $RUN"
trap cleanup EXIT
trap 'exit 1' INT TERM HUP PIPE
_tmux_poll 'SDPID=$(ps -o pid= --ppid "$(tmux_var "#{pane_pid}")" | tr -d " ") && [ -n "$SDPID" ]' 5 ||
	fail "spotdeck did not start"

# An add or swap by the autopilot after a revocation.
_tmux_poll "jq_py '
import sys
rev = [e for e in ev if e[\"type\"] == \"revoked\"]
cmd = [e for e in ev if e[\"type\"] == \"command\" and e.get(\"by\") == \"autopilot\" and e[\"ok\"]
       and e[\"command\"].split()[0] in (\"add\", \"swap\") and rev and e[\"t\"] >= rev[0][\"t\"]]
sys.exit(0 if cmd else 1)'" 120 || fail "no add or swap by the autopilot after a revocation"
offer=$(jq_py '
rev = [e for e in ev if e["type"] == "revoked"]
cmd = [e for e in ev if e["type"] == "command" and e.get("by") == "autopilot" and e["ok"]
       and e["command"].split()[0] in ("add", "swap") and e["t"] >= rev[0]["t"]]
print(cmd[0]["command"].split()[-1])')
tmux_wait "A $offer" 10
server=$(jq_py '
rev = [e for e in ev if e["type"] == "revoked"]
print(rev[0]["server"])')
# The revocation pane's row: server, GPU, life, ..., then the mark.
row=$(grep -oE "s[0-9]+ +K80 [^│]*A $offer" "$T/screen" | head -n 1)
[ "${row%% *}" = "$server" ] || { cat "$T/screen" >&2; fail "the mark is not on $server's row: $row"; }
# No more marks than the autopilot's adds and swaps.
marks=$(grep -oE "A gce/[a-z0-9-]+/[a-z0-9]+/(spot|on-demand)" "$T/screen" | wc -l)
moves=$(jq_py 'print(sum(1 for e in ev if e["type"] == "command" and e.get("by") == "autopilot" and e["ok"] and e["command"].split()[0] in ("add", "swap")))')
[ "$marks" -le "$moves" ] || { cat "$T/screen" >&2; fail "$marks marks for $moves moves by the autopilot"; }
ok "the revocation of $server shows the autopilot's replacement ($marks mark(s), $moves move(s)): $(echo "$row" | tr -s ' ')"
