#!/bin/sh
# The job's min_workers: with 1 of min 2 workers ready the run trains
# nobody (a generation of 0 whose state says 1 ready, no step); a second
# worker added makes a generation of 2, and every step is of 2; one of the
# 2 dropped, the run waits again rather than go on with 1; a worker added,
# training resumes from the step it stopped at.
exec python3 - <<'PY'
import sys, os, time
sys.path.insert(0, os.path.join(os.environ.get("top_srcdir", "."), "tests"))
from elastic import *

r = Run(job(model="mlp", epochs=20, min_workers=2, checkpoint_every=0, log_every=1), workers=1)
r.wait(lambda e: e.get("type") == "worker_ready", "the first worker ready")
g = r.wait(lambda e: e.get("type") == "generation", "a generation after it was ready")
if g["world_size"] != 0 or g.get("state") != "waiting for workers (1 ready, min_workers 2)":
    fail("1 of min_workers 2 ready: generation %s; expected world_size 0, waiting with 1 ready" % g)
# Long enough for a worker alone to have run hundreds of mlp steps.
time.sleep(2 * SCALE)
r.command("add")
acq = r.wait_type("acquired")
g2 = r.wait(lambda e: e.get("type") == "generation" and e.get("world_size") == 2, "a generation of 2")
r.wait(lambda e: e.get("type") == "step" and e["step"] >= g2["step"] + 20, "20 steps of 2")
alone = [e for e in r.events if e.get("type") == "step" and e["world_size"] != 2]
if alone or g2["step"] != 0:
    fail("steps before the generation of 2 (it starts at step %d): %s" % (g2["step"], alone[:3]))
ok("1 of min_workers 2 ready: %s; the run trained nobody until %s was added; generation %d of 2 "
   "from step 0" % (g["state"], acq["server"], g2["generation"]))

m = r.mark()
r.command("drop " + acq["server"])
gw = r.wait_since(m, lambda e: e.get("type") == "generation" and e["generation"] > g2["generation"],
                  "the generation after the drop")
if gw["world_size"] != 0 or "1 ready, min_workers 2" not in gw.get("state", ""):
    fail("after a drop to 1 of min 2: generation %s; expected world_size 0, waiting" % gw)
r.wait_since(m, lambda e: e.get("type") == "worker_left", "the dropped worker left")
time.sleep(1 * SCALE)
r.command("add")
g3 = r.wait(lambda e: e.get("type") == "generation" and e.get("world_size") == 2, "a generation of 2 again")
steps = [e for e in r.events[m:] if e.get("type") == "step"]
if any(e["world_size"] != 2 for e in steps):
    fail("steps of %s workers after the drop" % sorted(set(e["world_size"] for e in steps)))
s3 = r.wait(lambda e: e.get("type") == "step" and e["generation"] == g3["generation"], "a step of the new generation")
if g3["step"] != gw["step"] or s3["step"] != gw["step"] + 1:
    fail("the run stopped at step %d and went on from %d (first step %d)" % (gw["step"], g3["step"], s3["step"]))
ok("dropped to 1 of min 2 at step %d: waited (%s); a worker added, generation %d of 2 went on with step %d"
   % (gw["step"], gw["state"], g3["generation"], s3["step"]))
r.command("quit")
r.finish()
PY
