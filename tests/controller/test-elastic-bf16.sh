#!/bin/sh
# The job's "precision" (spotdeck-job(5)) end to end: the default, auto,
# is resolved by each worker and journaled in worker_ready and
# worker_joined with its reason (bf16 for the cnn where oneDNN has bf16
# kernels, fp32 elsewhere; fp32 for the mlp, which has no convolution);
# and a run checkpointed in bf16 resumes in fp32 from the checkpoint's step
# once its job.json says "precision": "fp32", then back in bf16.
exec python3 - <<'PY'
import sys, os, json, signal
sys.path.insert(0, os.path.join(os.environ.get("top_srcdir", "."), "tests"))
from elastic import *

# What auto picks here, as the engine reports it (the standalone worker
# prints the trainer's resolution first).
import subprocess
top_builddir = os.environ.get("top_builddir", ".")
p = subprocess.run([os.path.join(top_builddir, "spotdeck-worker"), "--standalone", "--model", "cnn",
                    "--dataset", "synthetic", "--max-steps", "1", "--threads", "1", "--precision", "auto",
                    "--log-every", "0"], capture_output=True, text=True, timeout=120)
if p.returncode:
    fail("spotdeck-worker --standalone --precision auto: " + p.stderr[-400:])
first = json.loads(p.stdout.splitlines()[0])
want = first.get("precision")
if want not in ("fp32", "bf16") or not first.get("precision_reason", "").startswith("auto: "):
    fail("standalone backend line without a resolved precision: %s" % first)
ok("auto resolves to %s here: %s" % (want, first["precision_reason"]))

def check_joined(r, prec, what):
    j = r.wait_type("worker_joined")
    if j.get("precision") != prec or not j.get("precision_reason"):
        fail("%s: worker_joined says precision %r (%r), expected %s" %
             (what, j.get("precision"), j.get("precision_reason"), prec))
    rd = [e for e in r.events if e.get("type") == "worker_ready"]
    if not rd or rd[-1].get("precision") != prec:
        fail("%s: worker_ready without precision %s: %s" % (what, prec, rd[-1:] if rd else "none"))
    ok("%s: worker_joined precision %s (%s)" % (what, prec, j["precision_reason"]))
    return j

# The mlp has no convolution: auto is fp32 whatever the CPU.
r = Run(job(model="mlp", epochs=1, log_every=50), workers=1)
check_joined(r, "fp32", "mlp, auto")
r.kill(signal.SIGTERM)
r.finish()

# The cnn, auto (the default: the job does not name it), then resumed in
# fp32 and back in the job's auto.
r = Run(job(epochs=2, checkpoint_every=40, log_every=20), workers=1)
check_joined(r, want, "cnn, auto")
r.wait(lambda e: e.get("type") == "checkpoint" and e["step"] >= 40, "checkpoint at step >= 40")
r.kill(signal.SIGKILL)
r.finish()
jp = os.path.join(r.run_dir, "job.json")
saved = json.load(open(jp))
if saved.get("precision") != "auto":
    fail("the run directory's job.json has precision %r, expected the default auto" % saved.get("precision"))
for prec in ("fp32", "auto"):
    saved["precision"] = prec
    json.dump(saved, open(jp, "w"))
    r2 = Run(None, resume=r.run_dir)
    st = r2.wait_type("run_start")
    r2.command("add 1")
    j = check_joined(r2, "fp32" if prec == "fp32" else want, "resumed with precision %s" % prec)
    if j["step"] < 40:
        fail("resumed with precision %s at step %d, before the checkpoint" % (prec, j["step"]))
    s = r2.wait(lambda e: e.get("type") == "step" and e["step"] >= j["step"] + 20, "20 steps")
    if not (s["loss"] < 1.5):
        fail("resumed with precision %s: loss %g, not the trained model's" % (prec, s["loss"]))
    ok("resumed with precision %s at step %d, loss %.3f at step %d" % (prec, j["step"], s["loss"], s["step"]))
    r2.wait(lambda e: e.get("type") == "checkpoint" and e["step"] > j["step"], "a new checkpoint")
    r2.kill(signal.SIGKILL)
    r2.finish()
PY
