#!/bin/sh
# With log_every 1 the journal has a step event for every completed step,
# including the steps that complete while a join, a leave (drop) and a
# kill are handled, and every step a worker_joined starts from; the
# checkpoint taken when SIGHUP stops the run says "final".
exec python3 - <<'PY'
import sys, os, signal
sys.path.insert(0, os.path.join(os.environ.get("top_srcdir", "."), "tests"))
from elastic import *

r = Run(job(model="mlp", epochs=2000, checkpoint_every=0, log_every=1), workers=3, timeout=240)
g = r.wait(lambda e: e.get("type") == "generation" and e.get("world_size") == 3, "generation of 3")

def steps_of(gen, n):
    return r.wait(lambda e: e.get("type") == "step" and e["generation"] >= gen["generation"] and e["step"] >= gen["step"] + n,
                  "%d steps of generation %d" % (n, gen["generation"]))

steps_of(g, 20)
r.command("add")                                    # a join
g = r.wait(lambda e: e.get("type") == "generation" and e.get("world_size") == 4, "generation of 4")
steps_of(g, 20)
leaver = [m["server"] for m in g["members"] if m["rank"] == 2][0]
r.command("drop " + leaver)                         # a leave at a step boundary
g = r.wait(lambda e: e.get("type") == "generation" and e.get("world_size") == 3, "generation of 3 after the drop")
steps_of(g, 20)
victim = [m["server"] for m in g["members"] if m["rank"] == 1][0]
os.kill(r.pids()[victim], signal.SIGKILL)           # a kill mid-step
g = r.wait(lambda e: e.get("type") == "generation" and e.get("world_size") == 2, "generation of 2 after the kill")
steps_of(g, 20)
r.command("add")                                    # and a join again
g = r.wait(lambda e: e.get("type") == "generation" and e.get("world_size") == 3, "generation of 3 after the add")
steps_of(g, 20)
r.kill(signal.SIGHUP)
ck = r.wait_type("checkpoint")
if ck["reason"] != "final":
    fail("the checkpoint taken on SIGHUP says %r, expected 'final'" % ck["reason"])
r.finish()

# The journal on disk is the run's record.
events = r.journal()
steps, top, missing = journaled_steps(events)
if missing:
    gens = [(e["generation"], e["step"], e["reason"]) for e in events if e["type"] == "generation"]
    fail("no step event for steps %s of 1..%d; generations (number, step, reason): %s" % (missing, top, gens))
for e in events:
    if e["type"] == "worker_joined" and e["step"] > 0 and e["step"] not in steps:
        fail("%s joined generation %d at step %d, which has no step event" % (e["server"], e["generation"], e["step"]))
if ck["step"] > top or ck["step"] not in steps:
    fail("final checkpoint at step %d, last journaled step %d" % (ck["step"], top))
# The killed worker's exit: ended by SIGKILL, so it has no exit status.
ex = [e for e in events if e["type"] == "server_exit" and e["server"] == victim]
if len(ex) != 1 or ex[0].get("signal") != signal.SIGKILL or ex[0].get("exit_status", 0) is not None:
    fail("server_exit of %s (SIGKILLed): %s, expected signal 9 and exit_status null" % (victim, ex))
ok("steps 1..%d all journaled across %d generations (join, drop, kill, join); SIGHUP's checkpoint at step %d says %s"
   % (top, len([e for e in events if e["type"] == "generation"]), ck["step"], ck["reason"]))
PY
