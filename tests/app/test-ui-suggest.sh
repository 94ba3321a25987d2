#!/bin/sh
# tests/app/test-ui-suggest.sh - the replacement the cockpit suggests after a
# revocation, on the real spotdeck in tmux: a local worker
# and two transient K80s train, in us-east1-c and europe-west1-b; the
# scripted market (tests/ui-e2e/suggest-trace.jsonl) revokes the first,
# then 6 s later the second.  After each revocation the status line
# suggests an offer in neither zone that revoked (the cheapest per image,
# a P100, sells in both), and says why: the cheapest $/Mimg, with the zone
# it passed over and how long ago that zone revoked.  Before the fix the
# second suggestion went back to us-east1-c, revoked 6 s earlier, and no
# reason was given (SkyPilot #10021).
#
# A suggestion stays on the status line until the next revocation replaces
# it, so the first one shows for only the 6 s between the two: a loaded
# machine (four tests at once on 2 cores) missed it.  So the test runs
# spotdeck twice, and each check reads a suggestion nothing replaces: run
# 1's trace is the first revocation alone, run 2's the whole trace.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/tmux-lib.sh"
. "$top_srcdir/tests/ui-e2e/lib.sh"

# zone_of SERVER: the zone the journal's acquired event gives SERVER.
zone_of() {
	python3 - "$RUN/journal.jsonl" "$1" <<-'PY'
	import json, sys
	for l in open(sys.argv[1]):
	    e = json.loads(l) if l.startswith("{") else {}
	    if e.get("type") == "acquired" and e.get("server") == sys.argv[2]:
	        print(e.get("zone", "")); break
	PY
}

# An age as sd_replacement_explain writes it: 45s, 2m05s, 1h02m.
AGE='([0-9]+s|[0-9]+m[0-9]{2}s|[0-9]+h[0-9]{2}m)'

# suggestion SERVER: waits for "r: replace SERVER with OFFER (WHY)" on the
# status line; sets OFFER, SZONE (the offer's zone) and WHY.
suggestion() {
	tmux_wait_re "r: replace $1 with [^ ]+" 20
	line=$(grep -oE "r: replace $1 with [^ ]+( \([^)]*\)?)?" "$T/screen" | head -n 1)
	OFFER=$(echo "$line" | sed -E 's/^r: replace [^ ]+ with ([^ ]+).*/\1/')
	SZONE=$(echo "$OFFER" | cut -d/ -f2)
	WHY=$(echo "$line" | sed -nE 's/^[^(]*\((.*)\)?$/\1/p' | sed 's/)$//')
}

# start_run TRACE: spotdeck on the job and TRACE in a fresh run directory;
# waits until s3 is acquired and sets A and B, the zones of s2 and s3.
start_run() {
	tmux_start 160 40 "env LANG=C.UTF-8 LC_ALL=C.UTF-8 $SPOTDECK --job $E2E/suggest-job.json --run-dir $RUN --trace $1"
	trap cleanup EXIT   # in place of tmux_start's own
	_tmux_poll 'SDPID=$(ps -o pid= --ppid "$(tmux_var "#{pane_pid}")" | tr -d " ") && [ -n "$SDPID" ]' 5 ||
		fail "spotdeck did not start"
	tmux_wait_file "$RUN/journal.jsonl" '"type":"acquired".*"server":"s3"' 20
	A=$(zone_of s2) B=$(zone_of s3)
	[ -n "$A" ] && [ -n "$B" ] && [ "$A" != "$B" ] || fail "s2, s3 zones '$A', '$B': expected two zones"
}
trap 'exit 1' INT TERM HUP PIPE

# Run 1, the first revocation alone: zone A.
grep -v '"server": "s3"' "$E2E/suggest-trace.jsonl" >"$T/first.jsonl"
grep -q '"server": "s2"' "$T/first.jsonl" || fail "no revocation of s2 in $E2E/suggest-trace.jsonl"
! grep -q '"s3"' "$T/first.jsonl" || fail "cannot take s3's revocation out of $E2E/suggest-trace.jsonl"
start_run "$T/first.jsonl"
tmux_wait_file "$RUN/journal.jsonl" '"type":"revoked".*"server":"s2"' 30
suggestion s2
[ "$SZONE" != "$A" ] || fail "after $A revoked s2, the suggestion $OFFER is in $A ($WHY)"
echo "$WHY" | grep -qE "^cheapest \\\$/Mimg; $A revoked $AGE ago$" ||
	fail "after $A revoked s2: reason '$WHY', expected 'cheapest \$/Mimg; $A revoked <age> ago'"
ok "$A revoked s2: r: replace s2 with $OFFER ($WHY)"
quit_confirmed

# Run 2, the whole trace: zone A, then zone B 6 s later.  Neither zone is
# suggested.
RUN="$T/run2"
start_run "$E2E/suggest-trace.jsonl"
tmux_wait_file "$RUN/journal.jsonl" '"type":"revoked".*"server":"s2"' 30
tmux_wait_file "$RUN/journal.jsonl" '"type":"revoked".*"server":"s3"' 30
suggestion s3
[ "$SZONE" != "$A" ] && [ "$SZONE" != "$B" ] ||
	fail "after $A then $B revoked, the suggestion $OFFER is in $SZONE ($WHY)"
echo "$WHY" | grep -qE "^cheapest \\\$/Mimg; ($A|$B) revoked $AGE ago$" ||
	fail "after $B revoked s3: reason '$WHY', expected 'cheapest \$/Mimg; $A or $B revoked <age> ago'"
ok "then $B revoked s3: r: replace s3 with $OFFER ($WHY): neither $A nor $B"

quit_confirmed
exit 0
