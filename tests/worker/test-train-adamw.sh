#!/bin/sh
# AdamW with gradient clipping resumes exactly: a checkpoint at step k then
# --resume gives the same losses, bit for bit, and the same final
# parameters as the uninterrupted run, which needs AdamW's two moments and
# its step count (bias correction) back from the checkpoint.  The settings
# must reach the trainer (the run differs from SGD's and from AdamW's
# without clipping), and a checkpoint of the other optimizer is refused in
# one line.
. "$(dirname "$0")/../lib.sh"
tmpdir
run() {
	"$WORKER" --standalone --model cnn --dataset synthetic --batch 32 --threads 2 --seed 7 \
		--warmup 5 --lr 0.002 --log-every 1 "$@"
}
ADAMW="--optimizer adamw --betas 0.9,0.95 --eps 1e-8 --weight-decay 0.1 --clip-grad-norm 0.5"
steps() { grep '"type":"step"' "$1"; }
# must_run NAME OUT LAST FIRST ARGS...: exit 0, step lines FIRST..LAST, a done line.
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

must_run "adamw" "$T/a" 30 1 --max-steps 30 $ADAMW
steps "$T/a" >"$T/sa"

# The settings reach the trainer: SGD, and AdamW without the clip, train
# otherwise (5 steps: the clip at 0.5 acts from the first step on).
must_run "sgd" "$T/s" 5 1 --max-steps 5
must_run "no clip" "$T/n" 5 1 --max-steps 5 --optimizer adamw --betas 0.9,0.95 --weight-decay 0.1
head -5 "$T/sa" >"$T/sa5"
steps "$T/s" >"$T/ss"; steps "$T/n" >"$T/sn"
cmp -s "$T/sa5" "$T/ss" && fail "AdamW gave SGD's losses: the optimizer setting was ignored"
cmp -s "$T/sa5" "$T/sn" && fail "AdamW with clip_grad_norm 0.5 gave the unclipped losses"
ok "AdamW + clipping trains otherwise than SGD and than AdamW unclipped"

# Interrupted at step 13, resumed from the checkpoint directory.
must_run "first part" "$T/d1" 13 1 --max-steps 13 --checkpoint-dir "$T/ck" $ADAMW
[ -f "$T/ck/latest.sdckpt" ] || fail "no latest.sdckpt written"
grep -q adamw_v "$T/ck/latest.sdckpt" || fail "the checkpoint has no adamw_v section"
must_run "resume" "$T/d2" 30 14 --max-steps 30 --resume "$T/ck" $ADAMW
{ steps "$T/d1"; steps "$T/d2"; } >"$T/sd"
cmp -s "$T/sa" "$T/sd" || { diff "$T/sa" "$T/sd" | head; fail "resumed AdamW run differs from the uninterrupted one"; }
sa=$(json_field "$T/a" done param_checksum) || fail "adamw run: no parameter checksum"
sd=$(json_field "$T/d2" done param_checksum) || fail "resume: no parameter checksum"
[ "$sa" = "$sd" ] || fail "final parameter checksum $sa != $sd"
ok "AdamW checkpoint at 13 + resume: steps 1..30 bit-identical, parameter checksum $sa equal"

# A checkpoint of the other optimizer: one line, naming the file and both.
must_run "sgd checkpoint" "$T/e" 3 1 --max-steps 3 --checkpoint-dir "$T/sgd"
run --max-steps 5 --resume "$T/sgd" $ADAMW >"$T/f" 2>"$T/ferr" && fail "an SGD checkpoint resumed an AdamW run"
[ "$(wc -l <"$T/ferr")" -eq 1 ] || { cat "$T/ferr"; fail "the refusal is not one line"; }
grep -q "latest.sdckpt: checkpoint holds the state of optimizer sgd, this run uses adamw" "$T/ferr" ||
	fail "refusal: $(cat "$T/ferr")"
ok "an SGD checkpoint is refused by an AdamW run: $(cat "$T/ferr")"
