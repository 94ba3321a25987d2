#!/bin/sh
# tests/app/test-ui-crash.sh - a crash gives the terminal back: the
# real spotdeck's cockpit in tmux (the client of the background
# run, the first process with the run's command line) gets SIGSEGV, then
# SIGFPE in a second run; each time spotdeck dies of that signal and leaves the pane
# usable: the alternate screen off, the cursor visible, and the terminal
# modes it started with (stty: echo and icanon on, as before curses).
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/tmux-lib.sh"
. "$top_srcdir/tests/ui-e2e/lib.sh"

# crash_run SIG N: spotdeck in tmux until its cockpit is up, then kill -SIG;
# N names the run directory.
crash_run() {
	sig="$1"
	RUN="$T/run$2"
	# The pane's script: spotdeck, then the terminal modes it left behind.
	cat >"$T/pane.sh" <<-EOF
	env LANG=C.UTF-8 LC_ALL=C.UTF-8 $SPOTDECK --job $E2E/cockpit-job.json --run-dir $RUN
	rc=\$?
	echo "[modes \$(stty -a | tr -s ' ;' '\n\n' | grep -x -e echo -e -echo -e icanon -e -icanon | sort | tr '\n' ' ')]"
	exit \$rc
	EOF
	tmux_start 120 40 "sh $T/pane.sh"
	trap cleanup EXIT
	trap 'exit 1' INT TERM HUP PIPE
	# spotdeck (env execs it): the one process whose command line is this run's.
	_tmux_poll 'SDPID=$(pgrep -f "^$SPOTDECK --job .* --run-dir $RUN\$" | head -n 1) && [ -n "$SDPID" ]' 10 ||
		fail "spotdeck did not start"
	tmux_wait "Cluster (" 30
	[ "$(tmux_var '#{alternate_on}')" = 1 ] || fail "the cockpit is not on the alternate screen"
	[ "$(tmux_var '#{cursor_flag}')" = 0 ] || fail "the cockpit shows the cursor"
	kill -"$sig" "$SDPID" || fail "cannot send SIG$sig to spotdeck ($SDPID)"
	rc=$(tmux_wait_exit 30)
	[ "$rc" != 0 ] || fail "spotdeck exited 0 after SIG$sig"
	[ "$(tmux_var '#{alternate_on}')" = 0 ] || fail "SIG$sig: the alternate screen is still on"
	[ "$(tmux_var '#{cursor_flag}')" = 1 ] || fail "SIG$sig: the cursor is still hidden"
	modes=$(tmux_capture | sed -n 's/^\[modes \(.*\)\]$/\1/p' | tail -n 1)
	[ "$modes" = "echo icanon " ] || { cat "$T/screen" >&2; fail "SIG$sig: terminal modes '$modes', expected 'echo icanon '"; }
	ok "SIG$sig: exit status $rc; alternate screen off, cursor on, modes '$modes'"
	cleanup_run
}

# cleanup_run: the run's workers and tmux go, T stays for the next run.
cleanup_run() {
	tmux_kill
	end_background_run
	for p in $($CHECK "$RUN/journal.jsonl" pids 2>/dev/null); do
		alive "$p" spotdeck-worker && kill -KILL "$p" 2>/dev/null
	done
	SDPID=
}

crash_run SEGV 1
crash_run FPE 2
exit 0
