# tests/ui-e2e/lib.sh - what the cockpit's end-to-end tests in tmux share
# (sourced after tests/lib.sh and tests/tmux-lib.sh): SKIP (exit 77, reason
# on stderr) without tmux, python3 or the data set; SPOTDECK, E2E (this
# folder), CHECK (its journal checker), a temporary folder T with the run
# directory RUN; and cleanup, which the test traps on EXIT once it has
# started spotdeck in tmux and set SDPID: it ends tmux, gives spotdeck 2 s
# to exit, then kills it, the background run (RUN/spotdeck.pid: SIGTERM,
# 2 s, SIGKILL) and the workers the journal names, and removes T.
tmux_have || { echo "SKIP: tmux not installed (Debian package tmux)" >&2; exit 77; }
command -v python3 >/dev/null 2>&1 || { echo "SKIP: python3 not installed" >&2; exit 77; }
[ -d "$FMNIST" ] || { echo "SKIP: $FMNIST missing (Debian package dataset-fashion-mnist)" >&2; exit 77; }
SPOTDECK="$top_builddir/spotdeck"
[ -x "$SPOTDECK" ] || fail "$SPOTDECK not built"
E2E="$top_srcdir/tests/ui-e2e"
CHECK="python3 $E2E/check.py"
tmpdir
RUN="$T/run"
SDPID=

# quit_confirmed [SECONDS]: q, the confirmation, y; spotdeck must exit with
# status 0 within SECONDS (default 30, scaled like every tmux wait).
quit_confirmed() {
	tmux_send q
	tmux_wait "Quit spotdeck?" 5
	tmux_send y
	_rc=$(tmux_wait_exit "${1:-30}")
	[ "$_rc" = 0 ] || fail "exit status $_rc after q y"
	ok "quit with q y, exit status 0"
}

# alive PID NAME: PID runs a program whose command line holds NAME.
alive() { grep -q "$2" /proc/"$1"/cmdline 2>/dev/null; }
# end_background_run: a background run (the cockpit is its client) outlives
# the terminal on purpose: end it by the pid it wrote (SIGTERM, 2 s, SIGKILL).
end_background_run() {
	_dp=$(cat "$RUN/spotdeck.pid" 2>/dev/null)
	if [ -n "$_dp" ] && alive "$_dp" spotdeck; then
		kill -TERM "$_dp" 2>/dev/null
		_i=0
		while alive "$_dp" spotdeck && [ "$_i" -lt 20 ]; do sleep 0.1; _i=$((_i + 1)); done
		alive "$_dp" spotdeck && kill -KILL "$_dp" 2>/dev/null
	fi
	return 0
}
cleanup() {
	tmux_kill
	if [ -n "$SDPID" ]; then
		_i=0
		while alive "$SDPID" spotdeck && [ "$_i" -lt 20 ]; do sleep 0.1; _i=$((_i + 1)); done
		alive "$SDPID" spotdeck && kill -KILL "$SDPID" 2>/dev/null
	fi
	end_background_run
	for p in $($CHECK "$RUN/journal.jsonl" pids 2>/dev/null); do
		alive "$p" spotdeck-worker && kill -KILL "$p" 2>/dev/null
	done
	rm -rf "$T"
}
