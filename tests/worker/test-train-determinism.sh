#!/bin/sh
# Same seed and thread count give bit-identical losses; a checkpoint at step k
# then --resume gives the same losses, bit for bit, as the uninterrupted run.
# Every run must exit 0 and print the steps it was asked for: a run that
# crashes prints nothing, and "nothing" must not count as "different".
. "$(dirname "$0")/../lib.sh"
tmpdir
run() { "$WORKER" --standalone --model cnn --threads 2 --seed 7 --log-every 1 "$@"; }
steps() { grep '"type":"step"' "$1"; }
# must_run NAME OUT LAST FIRST ARGS...: the run exits 0 and prints the step
# lines FIRST..LAST, in order, and a done line.
must_run() {
	_name=$1 _out=$2 _n=$3 _first=$4; shift 4
	run "$@" >"$_out" 2>"$T/err"
	_rc=$?
	[ "$_rc" -eq 0 ] || { cat "$T/err" >&2; fail "$_name: exit status $_rc"; }
	_got=$(steps "$_out" | sed -n 's/.*"step":\([0-9]*\).*/\1/p' | tr '\n' ' ')
	[ "$_got" = "$(seq -s ' ' "$_first" "$_n") " ] ||
		fail "$_name: step lines '$_got', expected $_first..$_n"
	grep -q '"type":"done"' "$_out" || fail "$_name: no done line"
}

must_run "run a" "$T/a" 40 1 --max-steps 40
must_run "run b" "$T/b" 40 1 --max-steps 40
steps "$T/a" >"$T/sa"; steps "$T/b" >"$T/sb"
cmp -s "$T/sa" "$T/sb" || { diff "$T/sa" "$T/sb" | head; fail "two runs with the same seed differ"; }
ok "same seed, same threads: 40 identical step losses"

# A different seed must give different losses (the test can fail).
must_run "seed 8" "$T/c" 5 1 --max-steps 5 --seed 8
steps "$T/c" | head -5 >"$T/sc"; head -5 "$T/sa" >"$T/sa5"
cmp -s "$T/sa5" "$T/sc" && fail "seed 8 gave the same losses as seed 7"
ok "seed 8 gives other losses"

# Interrupted at step 17, resumed from the checkpoint directory.
must_run "first half" "$T/d1" 17 1 --max-steps 17 --checkpoint-dir "$T/ck"
[ -f "$T/ck/latest.sdckpt" ] || fail "no latest.sdckpt written"
must_run "resume" "$T/d2" 40 18 --max-steps 40 --resume "$T/ck"
{ steps "$T/d1"; steps "$T/d2"; } >"$T/sd"
cmp -s "$T/sa" "$T/sd" || { diff "$T/sa" "$T/sd" | head; fail "resumed run differs from the uninterrupted one"; }
ok "checkpoint at 17 + resume: steps 1..40 bit-identical"
sa=$(json_field "$T/a" done param_checksum) || fail "run a: no parameter checksum"
sd=$(json_field "$T/d2" done param_checksum) || fail "resume: no parameter checksum"
[ "$sa" = "$sd" ] || fail "final parameter checksum $sa != $sd"
ok "final parameter checksum $sa equal"
