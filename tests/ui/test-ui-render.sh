#!/bin/sh
# tests/ui/test-ui-render.sh - the cockpit end to end in a real terminal (tmux)
# at 120x40 and 80x24, on the fixture run of tests/ui/test-ui-render: the panes
# and their numbers, numbers moving, the picker sending "add OFFER", drop
# and swap with their dialogs, pause/resume, a refused command on the status
# line, a revocation with its suggestion accepted by one key, help, themes,
# resize and the too-small screen, quit with confirmation restoring the
# terminal, SIGTERM, a crash (emergency restore), a bad theme, no terminal,
# the ASCII fallback and NO_COLOR.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/tmux-lib.sh"

tmux_have || { echo "SKIP: tmux not installed (Debian package tmux)" >&2; exit 77; }
DRIVER="$top_builddir/tests/ui/test-ui-render"
[ -x "$DRIVER" ] || fail "$DRIVER not built"
tmpdir
THEMES="$top_srcdir/themes"
FIRST=$("$DRIVER" --first-offer) || fail "driver --first-offer"
UTF8="env LANG=C.UTF-8 LC_ALL=C.UTF-8"
RUN="$DRIVER --commands $T/cmds --log $T/log --theme-dir $THEMES --tick 300"

step_now() {
	tmux_capture | sed -n 's/.*step \([0-9][0-9]*\)\/23400.*/\1/p' | head -n 1
}

# quit_and_check: q, confirm, exit 0 with the terminal given back.
quit_and_check() {
	tmux_send q
	tmux_wait "Quit spotdeck?"
	tmux_send y
	rc=$(tmux_wait_exit 10)
	[ "$rc" = 0 ] || fail "exit status $rc after q y"
	tail -n 1 "$T/cmds" | grep -qx quit || fail "no quit command recorded"
	[ "$(tmux_var '#{alternate_on}')" = 0 ] || fail "still on the alternate screen after quit"
	[ "$(tmux_var '#{cursor_flag}')" = 1 ] || fail "cursor still hidden after quit"
	tmux_expect "test-ui-render: done"
	tmux_expect "loop closed clean"
	tmux_refuse "Cluster ("
	ok "$1: q y exits 0, terminal restored, loop closed clean"
}

# ---- 120x40, UTF-8 ----
: >"$T/cmds"
tmux_start 120 40 "$UTF8 $RUN --fail checkpoint"
tmux_wait "Cluster (4 servers"
for t in "Market (9 offers)" "Training" "Revocations (3)" "SIMULATED market" \
	"cnn on fashion-mnist, batch 256" "epoch 3/10" "hazard x30, boot x0.1, seed 42" \
	"$FIRST" "gce/us-central1-c/p100x1/ondemand" "us-central1-c" "notice " \
	"~ emulated GPU speed" "ResNet-32 img/s, * estimated price" "0.81*" "by GPU" "by zone" \
	"s90" "s92" "revocation" "a add" "? help" "q quit"; do
	tmux_expect "$t"
done
tmux_capture | grep -qE 'K80 +spot +training +[0-9]+ +~[0-9]+ ' || fail "the emulated K80's speed has no '~'"
tmux_capture | grep -q '[▁▂▃▄▅▆▇█]' || fail "no UTF-8 sparkline or bars"
[ "$(tmux_var '#{alternate_on}')" = 1 ] || fail "cockpit not on the alternate screen"
ok "120x40: panes, titles, fixture figures, sparklines, labels for simulated and emulated"

s0=$(step_now)
[ -n "$s0" ] || fail "no step on screen"
_tmux_poll '[ "$(step_now)" != "$s0" ]' 10 || fail "step stays at $s0: numbers do not move"
ok "numbers move (step $s0 -> $(step_now))"

# How fast a keypress reaches the screen is tests/bench/cockpit-bench's
# figure (against its 50 ms target); here only that it does.
tmux_send '?'
tmux_wait "Help: spotdeck cockpit"
tmux_expect "swap the selected server"
tmux_expect "emulated GPU speed"
tmux_send x
tmux_wait_gone "Help: spotdeck cockpit"
ok "? shows the help from the key table; any key closes it"

tmux_send a
tmux_wait "Add a server"
tmux_send Enter
tmux_wait_file "$T/cmds" "^add $FIRST\$"
tmux_wait_gone "Add a server"
tmux_wait_re "s5 .*training"
ok "a + Enter sent 'add $FIRST'; the new server s5 walked to training"

tmux_send j d
tmux_wait "Drop s2"
tmux_send y
tmux_wait_file "$T/cmds" "^drop s2\$"
tmux_wait_re "s2 .*released"
ok "j d y sent 'drop s2' and s2 shows released"

tmux_send k s
tmux_wait "Swap s1"
tmux_send Down Enter
tmux_wait_file "$T/cmds" "^swap s1 "
ok "k s + Enter sent '$(grep '^swap' "$T/cmds")'"

# The swap released s1: d on its row says so and opens no dialog.
tmux_send d
tmux_wait "s1 is released already: nothing to drop"
tmux_refuse "Drop s1"
tmux_send s
tmux_wait "s1 is released: nothing to swap"
tmux_refuse "Swap s1"
grep -q "^drop s1" "$T/cmds" && fail "d on released s1 sent a drop"
ok "d and s on the released s1 only say so"

tmux_send p
tmux_wait_file "$T/cmds" "^pause\$"
tmux_wait "PAUSED"
tmux_wait "p resume"
tmux_send p
tmux_wait_file "$T/cmds" "^resume\$"
tmux_wait_gone "PAUSED"
ok "p sends pause, then resume (from view->paused)"

tmux_send c
tmux_wait "checkpoint refused by the test driver"
ok "a refused command shows its reason on the status line"

tmux_send t
tmux_wait "theme high-contrast"
tmux_send t
tmux_wait "theme light"
ok "t cycles the themes from the theme directory"

tmux_refuse "stray stderr"
grep -q "stray stderr line for 'pause'" "$T/log" || fail "stderr did not go to the log"
ok "stderr written during the run went to the log, not the screen"

tmux_resize 70 20
tmux_wait "terminal too small: 70x20"
tmux_refuse "Cluster ("
tmux_resize 120 40
tmux_wait "Cluster ("
tmux_wait_gone "terminal too small"
tmux_expect "Market (9 offers)"
tmux_expect "Revocations (3)"
ok "resize: too small below 80x24, full redraw after"

tmux_send q
tmux_wait "Quit spotdeck?"
tmux_send n
tmux_wait_gone "Quit spotdeck?"
quit_and_check "120x40"

# ---- 80x24: a revocation, its suggestion accepted with r ----
# The revocation comes when the script sends SIGUSR1, after the screen
# before it has been checked (a timer would race those checks).
: >"$T/cmds"
rm -f "$T/pid"
tmux_start 80 24 "$UTF8 $RUN --bell 2 --pid $T/pid"
tmux_wait "Cluster ("
for t in "Market (9 offers)" "Training" "Revocations (3)" "SIMULATED market" "epoch 3/10" "a add"; do
	tmux_expect "$t"
done
tmux_refuse "r: replace s3 with"
w=$(tmux_capture | LC_ALL=C.UTF-8 wc -L)
[ "$w" -le 80 ] || fail "a line $w columns wide at 80x24"
ok "80x24: all panes and titles"
kill -USR1 "$(cat "$T/pid")" || fail "cannot signal the driver"
tmux_wait "r: replace s3 with"
tmux_wait "Revocations (4)"
tmux_wait_re "s3 .*revoked"
tmux_send r
tmux_wait_file "$T/cmds" "^add $FIRST\$"
ok "revocation: logged, suggestion on the status line, r sent 'add $FIRST'"
tmux_send '?'
tmux_wait "Help: spotdeck cockpit"
tmux_expect "In dialogs"
# Every key of the key table, the last ones included (a left column longer
# than the window goes on in the right one), and the symbols.
tmux_expect "^L"
tmux_expect "what if"
tmux_expect "theme"
tmux_send Escape
tmux_wait_gone "Help: spotdeck cockpit"
ok "80x24: help fits (two columns), no key left out"
tmux_resize 79 24
tmux_wait "terminal too small: 79x24"
tmux_resize 80 24
tmux_wait_gone "terminal too small"
tmux_wait "Cluster ("
quit_and_check "80x24"

# ---- ASCII fallback (C locale), then SIGTERM ----
: >"$T/cmds"
rm -f "$T/pid"
tmux_start 120 40 "env LANG=C LC_ALL=C $RUN --pid $T/pid"
tmux_wait "Cluster ("
tmux_expect "^ revocation"
tmux_capture | LC_ALL=C grep -q '[^ -~]' && fail "non-ASCII output under the C locale"
tmux_capture | grep -q '#' || fail "no ASCII bars"
ok "C locale: ASCII frames, bars and markers only"
kill -TERM "$(cat "$T/pid")"
rc=$(tmux_wait_exit 10)
[ "$rc" = 0 ] || fail "exit status $rc after SIGTERM"
[ "$(tmux_var '#{alternate_on}')" = 0 ] || fail "alternate screen left on after SIGTERM"
ok "SIGTERM: clean exit, terminal restored"

# ---- NO_COLOR: the mono theme ----
tmux_start 100 30 "env NO_COLOR=1 $UTF8 $RUN"
tmux_wait "Cluster ("
grep -q "theme mono" "$T/log" || fail "NO_COLOR did not select the mono theme"
quit_and_check "NO_COLOR"

# ---- a crash: the fatal-signal handler restores the terminal ----
# SIGUSR2 makes the driver abort() once the cockpit is on the alternate
# screen, so there is a terminal to restore.
rm -f "$T/pid"
tmux_start 100 30 "$UTF8 $RUN --pid $T/pid"
tmux_wait "Cluster ("
[ "$(tmux_var '#{alternate_on}')" = 1 ] || fail "cockpit not on the alternate screen before the crash"
kill -USR2 "$(cat "$T/pid")" || fail "cannot signal the driver"
rc=$(tmux_wait_exit 10)
[ "$rc" = 134 ] || fail "exit status $rc after abort(), expected 134"
[ "$(tmux_var '#{alternate_on}')" = 0 ] || fail "alternate screen left on after a crash"
[ "$(tmux_var '#{cursor_flag}')" = 1 ] || fail "cursor hidden after a crash"
ok "abort(): sd_cockpit_emergency_restore left a usable terminal"

# ---- a bad theme: an error naming file, line and key; curses never starts ----
printf 'ok = green\nbogus = red\n' >"$T/bad.theme"
tmux_start 100 30 "$UTF8 $RUN --theme $T/bad.theme"
rc=$(tmux_wait_exit 10)
[ "$rc" = 1 ] || fail "exit status $rc with a bad theme"
tmux_expect "bad.theme:2: unknown key 'bogus'"
ok "bad theme: $(grep -o "bad.theme:2: unknown key 'bogus'" "$T/screen")"

# ---- not a terminal ----
EXPECT_RC=1 expect_error "stdout not a terminal" "not a terminal" "$DRIVER" --log "$T/log"
exit 0
