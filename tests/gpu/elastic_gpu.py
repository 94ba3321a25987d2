"""tests/gpu/run.sh's elastic check: 2 workers train `cnn` on the GPU (both
on device 0, so their collectives go through Gloo: NCCL refuses two ranks on
one GPU), one is SIGKILLed mid-run, the survivor forms a new generation and
finishes.  Uses tests/elastic.py's harness on the bundle's spotdeck.

Environment: top_builddir (the bundle's bin/, holding spotdeck and
spotdeck-worker), SD_CHILD_LD_LIBRARY_PATH (the library path for spotdeck
and its workers; this Python process keeps its own), SD_EXPECT_BACKEND
("cuda"; "cpu" in run.sh's self-test without a GPU), SD_STEPS (steps of the
run, default 2000), SD_BATCH (its global batch, default 64)."""
import os
import signal
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from elastic import Run, fail, ok  # noqa: E402

if os.environ.get("SD_CHILD_LD_LIBRARY_PATH"):
    os.environ["LD_LIBRARY_PATH"] = os.environ["SD_CHILD_LD_LIBRARY_PATH"]
expect = os.environ.get("SD_EXPECT_BACKEND", "cuda")
steps = int(os.environ.get("SD_STEPS", "2000"))
batch = int(os.environ.get("SD_BATCH", "64"))
# Long enough that the kill lands mid-run however fast the GPU is: epochs of
# at most 50 steps over a small synthetic set (each epoch ends with an
# evaluation, as a real run's), a few checkpoints.
per_epoch = min(steps, 50)
epochs = max(1, steps // per_epoch)
steps = per_epoch * epochs
kill_at = min(30, steps // 4)
job = {"model": "cnn", "dataset": "synthetic", "synthetic_samples": per_epoch * batch,
       "synthetic_c": 1, "synthetic_h": 28, "synthetic_w": 28, "epochs": epochs,
       "global_batch": batch, "threads_per_worker": 2, "checkpoint_every": max(1, steps // 4),
       "log_every": 5, "comm_timeout": 10, "warmup_steps": 10}
r = Run(job, workers=2, timeout=240)
ready = [r.wait_type("worker_ready"), r.wait_type("worker_ready")]
for e in ready:
    if e.get("backend") != expect:
        fail("%s trains on %s, not %s: %s" % (e["server"], e.get("backend"), expect,
                                             e.get("backend_reason")))
    ok("%s on %s%s: %s" % (e["server"], e["backend"],
                           " (" + e["device"] + ")" if e.get("device") else "",
                           e.get("backend_reason", "")))
r.wait(lambda e: e.get("type") == "generation" and e.get("world_size") == 2, "generation of 2")
r.wait(lambda e: e.get("type") == "step" and e["step"] >= kill_at, "some steps")
victim, pid = sorted(r.pids().items())[0]
os.kill(pid, signal.SIGKILL)
lost = r.wait(lambda e: e.get("type") == "worker_lost" and e["server"] == victim, "worker_lost")
gen = r.wait(lambda e: e.get("type") == "generation" and e.get("world_size") == 1,
             "generation of 1")
rec = r.wait(lambda e: e.get("type") == "step" and "recovery_s" in e, "recovery step")
if rec["steps_lost"] > 1:
    fail("%d steps lost" % rec["steps_lost"])
d = r.wait_type("done")
rc = r.finish()
if rc != 0:
    fail("spotdeck exit status %d" % rc)
if d["steps"] != steps:
    fail("expected %d steps, got %d" % (steps, d["steps"]))
# Every rank applies the same all-reduced gradients: the parameters agree.
sums = [e for e in r.events if e.get("type") == "checksum"]
if not sums:
    fail("no checksum events")
for e in sums:
    if len(set(e["checksums"].values())) != 1:
        fail("ranks disagree at step %d: %s" % (e["step"], e["checksums"]))
losses = [e["loss"] for e in r.events if e.get("type") == "step" and "loss" in e]
if not losses or any(not (x == x) or x > 1e6 for x in losses):
    fail("bad losses: %s" % losses[-5:])
ok("killed %s at step %d; generation %d of 1, recovery %.3f s, %d step(s) lost, %d steps done, "
   "last loss %.4f, ranks' parameters equal at %d checks" % (
       victim, lost["step"], gen["generation"], rec["recovery_s"], rec["steps_lost"], d["steps"],
       losses[-1], len(sums)))
