#!/bin/sh
# tests/app/test-ui-journal-full.sh - the cockpit's side of a journal that
# cannot be written (tests/controller/test-journal-full.sh has the
# headless side): RUNDIR/journal.jsonl is a link to a file on a one-page
# tmpfs; once it is full, the status line says so, naming the journal,
# spotdeck.log (the cockpit's stderr) says it once with ENOSPC, training goes on
# (the step count moves), and q y still quits with status 0.
# The tmpfs needs a mount namespace of our own, as in test-journal-full.sh.
if [ -z "$SD_JOURNAL_FULL_NS" ]; then
	if [ "$(id -u)" = 0 ]; then ns="unshare -m"; else ns="unshare -rm"; fi
	if ! $ns true 2>/dev/null; then
		echo "SKIP: '$ns' fails here (no mount/user namespaces): cannot mount a small tmpfs to fill" >&2
		exit 77
	fi
	SD_JOURNAL_FULL_NS=1 exec $ns sh "$0" "$@"
fi
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/tmux-lib.sh"
. "$top_srcdir/tests/ui-e2e/lib.sh"

mkdir "$T/tiny" "$RUN"
mount -t tmpfs -o size=4k spotdeck-test "$T/tiny" ||
	{ rm -rf "$T"; echo "SKIP: cannot mount a tmpfs in this mount namespace" >&2; exit 77; }
ln -s "$T/tiny/journal.jsonl" "$RUN/journal.jsonl"
cat >"$T/job.json" <<-EOF
{"model": "mlp", "dataset": "fashion-mnist", "epochs": 1000, "global_batch": 64,
 "workers": 1, "checkpoint_every": 0, "log_every": 5}
	EOF
step_now() {
	tmux_capture | sed -n 's/.*step \([0-9][0-9]*\)\/[0-9].*/\1/p' | head -n 1
}
tmux_start 160 40 "env LANG=C.UTF-8 LC_ALL=C.UTF-8 $SPOTDECK --job $T/job.json --run-dir $RUN"
trap 'umount -l "$T/tiny" 2>/dev/null; cleanup' EXIT
trap 'exit 1' INT TERM HUP PIPE
_tmux_poll 'SDPID=$(ps -o pid= --ppid "$(tmux_var "#{pane_pid}")" | tr -d " ") && [ -n "$SDPID" ]' 5 ||
	fail "spotdeck did not start"

# The status line shares its row with the key hints: the error may be cut
# after the path; spotdeck.log has it whole.
tmux_wait "error: cannot write the journal ($RUN/journal.jsonl)" 60
ok "status line: $(grep -o 'error: cannot write the journal[^│]*' "$T/screen" | sed 's/  *a add.*//')"
s0=$(step_now)
_tmux_poll '[ "$(step_now)" -gt "$((s0 + 20))" ] 2>/dev/null' 60 || { cat "$T/screen" >&2; fail "training stopped at step $s0"; }
ok "training goes on: step $s0, then $(step_now)"
n=$(grep -c "$RUN/journal.jsonl: cannot write the journal: No space left on device" "$RUN/spotdeck.log")
[ "$n" = 1 ] || { cat "$RUN/spotdeck.log" >&2; fail "spotdeck.log says it $n times, expected once"; }
ok "spotdeck.log: $(grep "cannot write the journal" "$RUN/spotdeck.log")"

quit_confirmed
exit 0
