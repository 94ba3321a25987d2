#!/bin/sh
# spotdeck-worker --standalone evaluates once per evaluation point: a run
# that stops at --max-steps (or on an epoch's last step) evaluates there
# for its epoch line, and the done line reuses those figures instead of
# evaluating the same parameters again (which doubled the end of a short
# language-model run).  The done line's "evaluations" counts them: one per
# epoch line, with the done line's figures the last epoch line's.
# Built-in mlp on the synthetic set (10000 samples, 156 steps of 64 an epoch).
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
tmpdir
run() {
	_out=$1; shift
	"$WORKER" --standalone --model mlp --dataset synthetic --threads 1 --log-every 0 "$@" \
		>"$T/$_out" 2>"$T/$_out.err"
	_rc=$?
	[ $_rc -eq 0 ] || { cat "$T/$_out.err" >&2; fail "$_out: exit status $_rc"; }
}
run mid --max-steps 3
run epoch --epochs 1
run two --epochs 2 --max-steps 160
python3 - "$T" <<'PY' || exit 1
import json, sys
for name, epochs in (("mid", 1), ("epoch", 1), ("two", 2)):
    ev = [json.loads(l) for l in open("%s/%s" % (sys.argv[1], name)) if l.startswith("{")]
    ep = [e for e in ev if e["type"] == "epoch"]
    done = [e for e in ev if e["type"] == "done"]
    if len(ep) != epochs or len(done) != 1:
        sys.exit("FAIL: %s: %d epoch lines and %d done lines, expected %d and 1" % (name, len(ep), len(done), epochs))
    d = done[0]
    if d.get("evaluations") != epochs:
        sys.exit("FAIL: %s: %r evaluations for %d epoch line(s): the end was evaluated twice" % (name, d.get("evaluations"), epochs))
    if (d["test_loss"], d["test_accuracy"]) != (ep[-1]["test_loss"], ep[-1]["test_accuracy"]):
        sys.exit("FAIL: %s: done's figures %r / %r are not the last epoch line's %r / %r"
                 % (name, d["test_loss"], d["test_accuracy"], ep[-1]["test_loss"], ep[-1]["test_accuracy"]))
    print("ok: %s: %d epoch line(s), %d evaluation(s), done test_loss %.4f" % (name, len(ep), d["evaluations"], d["test_loss"]))
PY
