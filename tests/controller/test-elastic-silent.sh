#!/bin/sh
# A silent worker (SIGSTOP: alive, connection open, answering nothing) is
# found and taken out: the controller journals it as worker_unresponsive,
# the first generation formed after the stop leaves it out, and the other
# three train on.  After SIGCONT it connects again as a new member, receives
# the state by broadcast, and every rank's parameter checksum is equal.
exec python3 - <<'PY'
import sys, os, signal, time, atexit
sys.path.insert(0, os.path.join(os.environ.get("top_srcdir", "."), "tests"))
from elastic import *

stopped = []
def resume_stopped():
    for pid in stopped:
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
atexit.register(resume_stopped)

r = Run(job(model="mlp", epochs=2000, min_workers=3, checkpoint_every=0, log_every=1), workers=4, timeout=240)
g = r.wait(lambda e: e.get("type") == "generation" and e.get("world_size") == 4, "generation of 4")
s = r.wait(lambda e: e.get("type") == "step" and e["world_size"] == 4 and e["step"] >= g["step"] + 30,
           "30 steps of 4 workers")
# The generation that trains now (a loaded machine may have re-formed it).
g = [e for e in r.events if e.get("type") == "generation" and e["generation"] == s["generation"]][-1]
# Rank 0 holds the state that newcomers take and streams checkpoints: the
# hardest member to lose.
victim = [m["server"] for m in g["members"] if m["rank"] == 0][0]
pid = r.pids()[victim]
mark = r.mark()
stopped.append(pid)
os.kill(pid, signal.SIGSTOP)
t_stop = time.time()

u = r.wait(lambda e: e.get("type") == "worker_unresponsive", "worker_unresponsive", timeout=60)
if u["server"] != victim:
    fail("worker_unresponsive names %s, the stopped worker is %s" % (u["server"], victim))
if u["rank"] != 0 or u["generation"] != g["generation"]:
    fail("worker_unresponsive: rank %s of generation %s, expected rank 0 of %d" % (u["rank"], u["generation"], g["generation"]))
if u["silent_s"] < g["timeout_ms"] / 2000.0:
    fail("dropped after %.3f s of silence, under half the timeout (%d ms)" % (u["silent_s"], g["timeout_ms"]))
s = r.wait(lambda e: e.get("type") == "step" and e["world_size"] == 3, "a step of the 3 others", timeout=60)
took = s["time"] - t_stop
gens = [e for e in r.events[mark:] if e.get("type") == "generation"]
if not gens or any(m["server"] == victim for m in gens[0].get("members", [])):
    fail("the first generation after the stop re-admits the stopped worker: %s" % (gens[:1],))
if "recovery_s" not in s or victim not in s.get("lost_servers", []):
    fail("the first step without %s does not report the recovery: %s" % (victim, s))
ok("%s stopped; worker_unresponsive after %.3f s of silence (timeout %d ms); generation %d of 3 "
   "completed step %d %.3f s after the SIGSTOP (recovery_s %.3f)"
   % (victim, u["silent_s"], g["timeout_ms"], s["generation"], s["step"], took, s["recovery_s"]))
r.wait(lambda e: e.get("type") == "step" and e["step"] >= s["step"] + 20, "20 more steps of 3")

# SIGCONT: it was dropped, so it connects again and joins as a new member.
mark = r.mark()
os.kill(pid, signal.SIGCONT)
stopped.remove(pid)
c = r.wait(lambda e: e.get("type") == "worker_connected" and e["server"] == victim, "the stopped worker back", timeout=60)
if not c.get("rejoin"):
    fail("worker_connected for %s does not say it rejoins: %s" % (victim, c))
g4 = r.wait(lambda e: e.get("type") == "generation" and e.get("world_size") == 4, "generation of 4 again")
if victim not in [m["server"] for m in g4["members"]]:
    fail("generation %d of 4 lacks %s" % (g4["generation"], victim))
j = r.wait(lambda e: e.get("type") == "worker_joined" and e["server"] == victim and e["generation"] == g4["generation"],
           "the stopped worker joined")
if j["source_rank"] == [m["rank"] for m in g4["members"] if m["server"] == victim][0]:
    fail("the returning worker's stale state was chosen as the group's")
cs = r.wait(lambda e: e.get("type") == "checksum" and e["generation"] == g4["generation"], "checksums of generation %d" % g4["generation"])
if len(cs["checksums"]) != 4 or victim not in cs["checksums"] or len(set(cs["checksums"].values())) != 1:
    fail("checksums differ after the rejoin: %s" % cs["checksums"])
ok("after SIGCONT %s rejoined generation %d at step %d; checksums equal: %s"
   % (victim, g4["generation"], j["step"], cs["checksums"]))
bad = [e for e in r.events if e.get("type") == "state" and e.get("server") == victim and e.get("state") == "failed"]
if bad:
    fail("the stopped worker's server was marked failed: %s" % bad)
r.command("quit")
ck = r.wait_type("checkpoint")
if ck["reason"] != "final":
    fail("quit's checkpoint says %r, expected 'final'" % ck["reason"])
if r.finish() != 1:
    fail("headless quit should exit 1")
PY
