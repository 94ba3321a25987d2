# tests/tmux-lib.sh - drive a full-screen program inside a private tmux
# server and look at its screen (sourced by the TUI tests; needs tests/lib.sh
# first for fail/ok/tmpdir).  As tmux's own regress/ tests: a server of our
# own at a fixed size, send-keys, capture-pane, grep.
#
#   tmux_start W H CMD...   start CMD (one shell command line, no single
#                           quotes) in a W x H
#                           window; `sh -c 'CMD; echo "[exit $?]"; sleep'`
#                           keeps the pane so the exit and the restored
#                           screen can be checked
#   tmux_send KEY...        tmux send-keys (Enter, Escape, Tab, Up, C-l, ...)
#   tmux_type TEXT          send TEXT literally
#   tmux_capture            print the screen as text
#   tmux_wait TEXT [S]      wait up to S seconds (default 10) for TEXT on screen
#   tmux_wait_gone TEXT [S] wait for TEXT to leave the screen
#   tmux_wait_re REGEX [S]  wait for a screen line matching REGEX (grep -E)
#   tmux_wait_file FILE PATTERN [S]   wait for a line matching PATTERN (grep -E)
#   tmux_expect TEXT        fail unless TEXT is on screen now
#   tmux_refuse TEXT        fail if TEXT is on screen now
#   tmux_resize W H         resize the window (the program gets SIGWINCH)
#   tmux_var FORMAT         a tmux format of the pane (#{alternate_on}, ...)
#   tmux_wait_exit [S]      wait for "[exit N]" and print N
#   tmux_kill               stop the server (also done at exit)
#
# Screens are captured into $T/screen; a failed wait prints the last one.
# Every wait is a safety net, not a speed target: S is multiplied by
# SD_TIMEOUT_SCALE (default 3), so a loaded 2-core machine running the ASan
# build does not fail a test that would pass given the time.  Speed is
# measured by the benchmarks (tests/bench/cockpit-bench).

: "${TMUX_BIN:=tmux}"

tmux_have() {
	command -v "$TMUX_BIN" >/dev/null 2>&1
}

# Each tmux_start gets a server and socket of its own: a server being
# killed can still hold the old socket for a moment.
_tmux_n=0

tm() {
	"$TMUX_BIN" -S "$T/tmux.$_tmux_n.sock" -f "$T/tmux.conf" "$@"
}

tmux_start() {
	local w="$1" h="$2"; shift 2
	cat >"$T/tmux.conf" <<-'EOF'
	set -g default-terminal tmux-256color
	set -g history-limit 0
	set -g status off
	EOF
	tmux_kill
	_tmux_n=$((_tmux_n + 1))
	# The pane's shell reports the exit status and stays to be looked at.
	tm new-session -d -s ui -x "$w" -y "$h" \
		"sh -c '$*; echo \"[exit \$?]\"; sleep 300'" || fail "tmux new-session"
	# A test with an EXIT trap of its own says so (SD_EXIT_TRAP=1; its
	# cleanup calls tmux_kill): replacing it would leave what it cleans up
	# (a fake cloud, a background run) behind.
	[ -n "${SD_EXIT_TRAP:-}" ] || trap 'tmux_kill; rm -rf "$T"' EXIT
}

tmux_send() {
	tm send-keys -t ui "$@"
}

tmux_type() {
	tm send-keys -t ui -l "$1"
}

tmux_capture() {
	tm capture-pane -p -t ui >"$T/screen" 2>/dev/null
	cat "$T/screen"
}

# _tmux_poll COND SECONDS: runs COND every 50 ms until it succeeds, for at
# most SECONDS x SD_TIMEOUT_SCALE.
_tmux_poll() {
	local cond="$1" secs="${2:-10}" i=0 n
	n=$((secs * ${SD_TIMEOUT_SCALE:-3} * 20))
	while [ "$i" -lt "$n" ]; do
		eval "$cond" && return 0
		sleep 0.05
		i=$((i + 1))
	done
	return 1
}

tmux_wait() {
	_tmux_want="$1"
	_tmux_poll 'tmux_capture | grep -qF -- "$_tmux_want"' "${2:-10}" && return 0
	cat "$T/screen" >&2
	fail "timed out waiting for '$1' on screen"
}

tmux_wait_gone() {
	_tmux_want="$1"
	_tmux_poll '! tmux_capture | grep -qF -- "$_tmux_want"' "${2:-10}" && return 0
	cat "$T/screen" >&2
	fail "timed out waiting for '$1' to leave the screen"
}

tmux_wait_re() {
	_tmux_want="$1"
	_tmux_poll 'tmux_capture | grep -qE -- "$_tmux_want"' "${2:-10}" && return 0
	cat "$T/screen" >&2
	fail "timed out waiting for /$1/ on screen"
}

tmux_wait_file() {
	_tmux_file="$1" _tmux_want="$2"
	_tmux_poll '[ -f "$_tmux_file" ] && grep -qE -- "$_tmux_want" "$_tmux_file"' "${3:-10}" && return 0
	[ -f "$1" ] && cat "$1" >&2
	fail "timed out waiting for /$2/ in $1"
}

tmux_expect() {
	tmux_capture | grep -qF -- "$1" && return 0
	cat "$T/screen" >&2
	fail "'$1' is not on screen"
}

tmux_refuse() {
	tmux_capture | grep -qF -- "$1" || return 0
	cat "$T/screen" >&2
	fail "'$1' is on screen"
}

tmux_resize() {
	tm resize-window -t ui -x "$1" -y "$2"
}

tmux_var() {
	tm display-message -p -t ui "$1"
}

tmux_wait_exit() {
	_tmux_poll 'tmux_capture | grep -q "^\[exit [0-9]*\]"' "${1:-10}" || {
		cat "$T/screen" >&2
		fail "timed out waiting for the program to exit"
	}
	sed -n 's/^\[exit \([0-9]*\)\].*/\1/p' "$T/screen" | tail -n 1
}

tmux_kill() {
	[ -S "$T/tmux.$_tmux_n.sock" ] && tm kill-server 2>/dev/null
	return 0
}
