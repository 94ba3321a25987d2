#!/bin/sh
# Operator commands and membership changes on a live run (mlp, to keep it
# short): a worker added mid-run reports the same parameter checksum as the
# others from its first step; drop, pause/resume, checkpoint; all workers
# killed, then one added: training resumes from the last checkpoint.
exec python3 - <<'PY'
import sys, os, signal, time
sys.path.insert(0, os.path.join(os.environ.get("top_srcdir", "."), "tests"))
from elastic import *
r = Run(job(model="mlp", epochs=2, checkpoint_every=150, log_every=10), workers=2)
r.wait(lambda e: e.get("type") == "generation" and e.get("world_size") == 2, "generation of 2")
r.wait(lambda e: e.get("type") == "step" and e["step"] >= 50, "step 50")

# add: the newcomer's checksum at its first step equals everyone else's.
r.command("add")
acq = r.wait_type("acquired")
new = acq["server"]
g3 = r.wait(lambda e: e.get("type") == "generation" and e.get("world_size") == 3, "generation of 3")
j = r.wait(lambda e: e.get("type") == "worker_joined" and e["server"] == new, "newcomer joined")
if j["source_rank"] == [m["rank"] for m in g3["members"] if m["server"] == new][0]:
    fail("the newcomer was chosen as the source of the state")
cs = r.wait(lambda e: e.get("type") == "checksum" and e["generation"] == g3["generation"], "checksums of generation 3")
if new not in cs["checksums"] or len(set(cs["checksums"].values())) != 1 or len(cs["checksums"]) != 3:
    fail("checksums differ at the newcomer's first step: %s" % cs["checksums"])
ok("added %s joined at step %d; first-step checksums equal: %s" % (new, j["step"], cs["checksums"]))

# drop: it leaves at a step boundary, the others go on as a generation of 2.
m = r.mark()
r.command("drop " + new)
# The new generation may be journaled before or after the closed connection.
r.wait_since(m, lambda e: e.get("type") == "worker_left" and e["server"] == new, "dropped worker left")
g = r.wait_since(m, lambda e: e.get("type") == "generation" and e.get("world_size") == 2, "generation of 2 after drop")
s0 = r.wait(lambda e: e.get("type") == "step" and e["generation"] == g["generation"], "steps after drop")
ok("dropped %s; generation %d of 2 continues at step %d" % (new, g["generation"], s0["step"]))

# pause / resume
r.command("pause")
p = r.wait(lambda e: e.get("type") == "generation" and e.get("state") == "paused", "paused generation")
time.sleep(1.0)
late = [e for e in r.events[r.events.index(p):] if e.get("type") == "step" and e["generation"] > p["generation"]]
if late:
    fail("steps while paused")
r.command("resume")
g = r.wait(lambda e: e.get("type") == "generation" and e.get("world_size") == 2, "generation after resume")
s = r.wait(lambda e: e.get("type") == "step" and e["generation"] == g["generation"], "step after resume")
ok("pause held, resume continued at step %d" % s["step"])

# checkpoint on demand
r.command("checkpoint")
ck = r.wait(lambda e: e.get("type") == "checkpoint" and e["reason"] == "operator", "operator checkpoint")
if not os.path.exists(ck["path"]):
    fail("checkpoint file %s missing" % ck["path"])
ok("operator checkpoint at step %d: %s (%d bytes)" % (ck["step"], ck["path"], ck["bytes"]))

# every worker killed, then one added: resume from the last checkpoint.
for server, pid in r.pids().items():
    os.kill(pid, signal.SIGKILL)
r.wait(lambda e: e.get("type") == "generation" and e.get("world_size") == 0, "empty generation")
last_ck = [e for e in r.events if e.get("type") == "checkpoint"][-1]
r.command("add")
g = r.wait(lambda e: e.get("type") == "generation" and e.get("world_size") == 1, "generation of 1")
if g.get("resume_from") != last_ck["path"]:
    fail("generation resumes from %s, expected %s" % (g.get("resume_from"), last_ck["path"]))
j = r.wait_type("worker_joined")
if j["step"] != last_ck["step"]:
    fail("resumed at step %d, last checkpoint was step %d" % (j["step"], last_ck["step"]))
ok("all workers killed; the new worker resumed from %s at step %d" % (last_ck["path"], j["step"]))
d = r.wait_type("done")
if r.finish() != 0:
    fail("exit status")
ok("done: %d steps, accuracy %.4f" % (d["steps"], d["test_accuracy"]))
PY
