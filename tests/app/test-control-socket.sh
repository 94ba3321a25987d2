#!/bin/sh
# tests/app/test-control-socket.sh - a background run's control socket
# from scripts: `spotdeck --detach` starts a run and returns; the run
# directory is 0700 and control.sock 0600; `spotdeck ls` lists it; lines
# that are too long, not JSON or of an unknown type get an error and a
# hang-up while the run trains on; a client of another uid is refused (as
# nobody, when run as root); `spotdeck --headless --attach` streams the
# journal and takes commands from stdin; a cockpit whose run is SIGKILLed
# says so and exits 1 with the terminal restored, and `--resume` continues
# from the last checkpoint; `spotdeck kill` ends the run as q y does; a
# client that stops reading is dropped while the run goes on.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/tmux-lib.sh"
. "$top_srcdir/tests/ui-e2e/lib.sh"

cat >"$T/job.json" <<-JOB
{"model": "mlp", "dataset": "fashion-mnist", "epochs": 1000, "global_batch": 64, "workers": 2,
 "checkpoint_every": 20, "log_every": 5}
JOB
daemon_pid() { cat "$RUN/spotdeck.pid" 2>/dev/null; }
cleanup_all() {
	p=$(daemon_pid)
	[ -n "$p" ] && alive "$p" spotdeck && kill -KILL "$p" 2>/dev/null
	cleanup
}
trap cleanup_all EXIT
SD_EXIT_TRAP=1   # tmux_start keeps it (tmux-lib.sh)
trap 'exit 1' INT TERM HUP PIPE
last_step() { json_field "$RUN/journal.jsonl" step step 2>/dev/null || echo 0; }
wait_steps_after() {
	_after=$1
	_tmux_poll '$CHECK "$RUN/journal.jsonl" steps-after "$_after" >/dev/null 2>&1' "${2:-30}" ||
		fail "no step after $1 in the journal"
}

# A client in Python's standard library: sends its argument lines raw and
# prints what comes back, a line each, until the run hangs up.
cat >"$T/client.py" <<-'PY'
import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect(sys.argv[1])
except OSError as e:
    print("connect: %s" % e.strerror)
    sys.exit(3)
s.settimeout(20)
f = s.makefile("rb")
first = json.loads(f.readline())
if first["type"] == "hello":
    print("hello protocol=%s pid=%s" % (first["protocol"], first["pid"]))
else:
    print(first["type"], first.get("error", ""))
try:
    for arg in sys.argv[2:]:
        s.sendall(arg.encode() + b"\n")
except OSError as e:
    print("send: %s" % e.strerror)
for line in f:
    m = json.loads(line)
    print(m["type"], m.get("error", ""))
print("EOF")
PY
client() { (cd "$T" && python3 client.py "$@"); }

# A small queue limit (64 KiB instead of 32 MiB) so that a client that
# stops reading is dropped within a few hundred commands.
SPOTDECK_CONTROL_QUEUE_MAX=65536 $SPOTDECK --detach --job "$T/job.json" --run-dir "$RUN" >"$T/out" 2>"$T/err" ||
	{ cat "$T/err" >&2; fail "--detach"; }
[ "$(cat "$T/out")" = "$RUN" ] || fail "--detach printed '$(cat "$T/out")', not the run directory"
DPID=$(daemon_pid)
[ -n "$DPID" ] && alive "$DPID" spotdeck || fail "no run process after --detach"
[ "$(stat -c %a "$RUN")" = 700 ] || fail "run directory mode $(stat -c %a "$RUN"), not 700"
[ "$(stat -c %a "$RUN/control.sock")" = 600 ] || fail "control.sock mode $(stat -c %a "$RUN/control.sock")"
wait_steps_after 10
_tmux_poll '$CHECK "$RUN/journal.jsonl" world 2 >/dev/null 2>&1' 30 || fail "the 2 workers never trained together"
ok "--detach: run $DPID in the background; $RUN 0700, control.sock 0600"

(cd "$T" && $SPOTDECK ls) >"$T/ls" || fail "spotdeck ls"
grep -Eq "^run +mlp on fashion-mnist.* [1-9][0-9]*/[0-9]+ +2 +0\.00 +0 +20[0-9-]+T" "$T/ls" ||
	{ cat "$T/ls" >&2; fail "ls: no line for run with step N/M, world 2, \$0.00, 0 clients, started"; }
ok "spotdeck ls: $(sed -n 2p "$T/ls")"

long=$(python3 -c 'print("{\"type\":\"command\",\"id\":1,\"line\":\"" + "x" * 5000 + "\"}")')
client "$RUN/control.sock" "$long" >"$T/c1" || fail "client"
grep -q "^error line longer than 4096 bytes" "$T/c1" && grep -q "^EOF" "$T/c1" || { cat "$T/c1" >&2; fail "over-long line"; }
client "$RUN/control.sock" '{"type":"hello","protocol":1,"want":"info"' >"$T/c2"
grep -q "^error .*JSON" "$T/c2" && grep -q "^EOF" "$T/c2" || { cat "$T/c2" >&2; fail "invalid JSON"; }
client "$RUN/control.sock" '{"type":"launch","protocol":1}' >"$T/c3"
grep -q "^error .*launch" "$T/c3" && grep -q "^EOF" "$T/c3" || { cat "$T/c3" >&2; fail "unknown type"; }
client "$RUN/control.sock" '{"type":"command","id":1,"line":"quit"}' >"$T/c4"
grep -q "^error .*hello" "$T/c4" || { cat "$T/c4" >&2; fail "a command before hello"; }
S=$(last_step)
wait_steps_after "$S"
alive "$DPID" spotdeck || fail "the run died of a bad client"
grep -q '"type":"command"' "$RUN/journal.jsonl" && fail "a bad client's command reached the command table"
ok "bad lines: $(sed -n 2p "$T/c1" | cut -c1-60) / $(sed -n 2p "$T/c2") / $(sed -n 2p "$T/c3"); the run trains on past step $S"

# A client that sends and never reads: every help journals the command list,
# which goes to it as an event; once 64 KiB wait for it, it is dropped, and
# the run goes on.
python3 - "$RUN/control.sock" >"$T/slow" <<-'PY' || fail "slow client"
import json, socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
s.sendall(b'{"type":"hello","protocol":1,"want":"journal","read_only":false}\n')
sent = 0
try:
    for i in range(3000):
        s.sendall(b'{"type":"command","id":%d,"line":"help"}\n' % i)
        sent += 1
except OSError as e:
    pass
time.sleep(1)
s.settimeout(15)   # a run that never hangs up fails the test here
replies = 0
f = s.makefile("rb")
how = "hung up"
try:
    for line in f:
        if line.startswith(b'{"type":"reply"'):
            replies += 1
except ConnectionResetError:
    # Linux resets a unix socket whose peer closes with our lines unread.
    how = "reset the connection"
print("sent %d helps, read %d replies before the run %s" % (sent, replies, how))
PY
grep -q "client pid [0-9]* dropped: it reads too slowly" "$RUN/spotdeck.log" ||
	{ cat "$RUN/spotdeck.log" >&2; fail "the slow client was not dropped"; }
S=$(last_step)
wait_steps_after "$S"
ok "slow client: $(cat "$T/slow"); spotdeck.log: '$(grep -o 'client pid [0-9]* dropped.*' "$RUN/spotdeck.log" | head -n 1)'; steps go on past $S"

if [ "$(id -u)" = 0 ] && command -v runuser >/dev/null 2>&1 && id nobody >/dev/null 2>&1; then
	cp "$T/client.py" /tmp/spotdeck-client.$$.py
	chmod 755 "$T"
	runuser -u nobody -- python3 /tmp/spotdeck-client.$$.py "$RUN/control.sock" >"$T/n1"
	grep -q "^connect: Permission denied" "$T/n1" || { cat "$T/n1" >&2; fail "nobody reached the socket"; }
	# Past the file modes (as if they were loosened), the peer check refuses.
	chmod 711 "$RUN"; chmod 666 "$RUN/control.sock"
	runuser -u nobody -- python3 /tmp/spotdeck-client.$$.py "$RUN/control.sock" \
		'{"type":"hello","protocol":1,"want":"cockpit","read_only":false}' >"$T/n2"
	chmod 700 "$RUN"; chmod 600 "$RUN/control.sock"; chmod 700 "$T"
	rm -f /tmp/spotdeck-client.$$.py
	grep -q "^error refused: uid [0-9]* is not the run's owner" "$T/n2" || { cat "$T/n2" >&2; fail "nobody not refused by SO_PEERCRED"; }
	grep -q "^snapshot" "$T/n2" && fail "nobody got a snapshot"
	ok "another uid: $(cat "$T/n1"); with open modes: $(grep ^error "$T/n2")"
else
	echo "note: not root or no runuser/nobody: the other-uid check is skipped" >&2
fi

# Commands piped in at once, before the run's hello has arrived: they go
# after the client's own hello, and the pipe's end detaches with 0.
h0=$(grep -c '"type":"command"' "$RUN/journal.jsonl")
for i in $(seq 200); do echo help; done | $SPOTDECK --headless --attach "$RUN" >"$T/p.out" 2>"$T/p.err" ||
	{ cat "$T/p.err" >&2; fail "200 piped helps: exit status $?"; }
grep -q "lost the run\|refused" "$T/p.err" && { cat "$T/p.err" >&2; fail "200 piped helps: the client was refused"; }
printf 'pause\tx\n' | $SPOTDECK --headless --attach "$RUN" >/dev/null 2>"$T/t.err" || fail "a tab on stdin ended the client"
grep -q "control character 0x09 at byte 6: refused" "$T/t.err" || { cat "$T/t.err" >&2; fail "a tab on stdin not refused by the client"; }
alive "$DPID" spotdeck || fail "the run died"
ok "200 helps piped before the hello: exit 0; a tab refused on the client: $(cat "$T/t.err")"

# Headless attach: journal lines out, commands in, stdin's end detaches.
mkfifo "$T/in"
$SPOTDECK --headless --attach "$RUN" <"$T/in" >"$T/h.out" 2>"$T/h.err" &
HPID=$!
exec 3>"$T/in"
_tmux_poll 'grep -q "\"type\":\"step\"" "$T/h.out"' 20 || fail "headless attach: no step events"
echo "checkpoint" >&3
echo "frobnicate" >&3
_tmux_poll 'grep -q "\"reason\":\"operator\"" "$T/h.out"' 20 || { cat "$T/h.out" >&2; fail "headless attach: no checkpoint after the command"; }
_tmux_poll 'grep -q "frobnicate" "$T/h.err"' 10 || { cat "$T/h.err" >&2; fail "headless attach: an unknown command not refused on stderr"; }
exec 3>&-
wait "$HPID"; rc=$?
[ "$rc" = 0 ] || fail "headless attach: exit status $rc after stdin's end"
alive "$DPID" spotdeck || fail "the run ended with a headless client's detach"
ok "headless attach: $(grep -c '"type":"step"' "$T/h.out") step lines, checkpoint by command, '$(head -n 1 "$T/h.err")'"

# A cockpit attached when the run is SIGKILLed: it says so, exits 1, and the
# terminal is back (no alternate screen).
tmux_start 100 30 "env LANG=C.UTF-8 LC_ALL=C.UTF-8 $SPOTDECK attach $RUN"
tmux_wait "1 attached" 10
CK=$(json_field "$RUN/journal.jsonl" checkpoint step)
kill -KILL "$DPID"
rc=$(tmux_wait_exit 10)
[ "$rc" = 1 ] || fail "cockpit: exit status $rc after its run was killed"
tmux_expect "lost the run"
tmux_expect "spotdeck --resume"
[ "$(tmux_var '#{alternate_on}')" = 0 ] || fail "the terminal is still on the alternate screen"
tmux_kill
ok "run killed under a cockpit: '$(grep -o 'lost the run.*' "$T/screen" | cut -c1-60)', exit 1, terminal restored"

for p in $($CHECK "$RUN/journal.jsonl" pids); do
	alive "$p" spotdeck-worker && kill -KILL "$p" 2>/dev/null
done
$SPOTDECK --detach --resume "$RUN" >/dev/null 2>"$T/err" || { cat "$T/err" >&2; fail "--detach --resume"; }
# Three starts of one new directory at once: one runs; the others are
# refused, and none removes the directory the winner made.
for i in 1 2 3; do $SPOTDECK --detach --job "$T/job.json" --run-dir "$T/race" >/dev/null 2>"$T/race.$i" & done
wait
n=0; for i in 1 2 3; do [ -s "$T/race.$i" ] && grep -q "goes on in the background" "$T/race.$i" && n=$((n + 1)); done
[ "$n" = 1 ] || { cat "$T/race."* >&2; fail "$n of 3 racing starts of one directory succeeded, expected 1"; }
[ -S "$T/race/control.sock" ] && [ -f "$T/race/journal.jsonl" ] || { ls -la "$T/race" >&2; fail "the racing starts lost the winner's directory"; }
$SPOTDECK kill "$T/race" >/dev/null || fail "the race's winner cannot be ended"
ok "3 starts of one directory at once: one runs, its directory intact; the others: $(grep -hv 'goes on' "$T/race."* | head -n 1)"
DPID=$(daemon_pid)
_tmux_poll 'grep -q "\"resumed_from\"\|\"type\":\"resume\"" "$RUN/journal.jsonl"' 30 || true
wait_steps_after "$CK" 60
python3 - "$RUN/journal.jsonl" "$CK" <<-'PY' || fail "resume"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
starts = [i for i, e in enumerate(ev) if e.get("type") == "run_start"]
if len(starts) < 2:
    sys.exit("one run_start only: not resumed")
first = [e for e in ev[starts[-1]:] if e.get("type") == "step"]
if not first or first[0]["step"] <= int(sys.argv[2]):
    sys.exit("resumed run's first step %s is not past checkpoint %s" % (first[0]["step"] if first else None, sys.argv[2]))
print("ok: resumed after checkpoint %s: first step %d" % (sys.argv[2], first[0]["step"]))
PY
# The kill may come while a generation forms (the second worker joining):
# the controller then asks the new rank 0 for the final checkpoint.
(cd "$T" && $SPOTDECK kill run) >"$T/kill" 2>&1 || { cat "$T/kill" >&2; fail "spotdeck kill"; }
grep -q "ended: quit" "$T/kill" || { cat "$T/kill" >&2; fail "kill did not report the quit"; }
_tmux_poll '! alive "$DPID" spotdeck' 10 || fail "the run outlived spotdeck kill"
json_field "$RUN/journal.jsonl" checkpoint reason | grep -q final || {
	# What the resumed run did from the kill on, for the reader.
	awk '/"type":"command".*"quit"/ { on = 1 } on && !/"type":"step"/' "$RUN/journal.jsonl" | cut -c1-300 | tail -n 30 >&2
	tail -n 20 "$RUN/spotdeck.log" >&2
	fail "no final checkpoint after kill"
}
ok "spotdeck kill: $(cat "$T/kill")"
# The run's own diagnostics (a sanitizer build's reports land there too).
if grep -E "Sanitizer|runtime error" "$RUN/spotdeck.log" >&2; then
	fail "spotdeck.log has sanitizer reports"
fi
exit 0
