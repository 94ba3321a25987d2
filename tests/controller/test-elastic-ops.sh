#!/bin/sh
# Operator commands and membership changes on a live run (mlp, to keep it
# short): a worker added mid-run reports the same parameter checksum as the
# others from its first step; drop; pause (no step while paused, even while a
# worker joins), resume from the step the workers stopped at; checkpoint;
# all workers killed, then one added: training resumes from the last
# checkpoint; quit.
#
# The job is far longer than the test (2000 epochs, about 1.9 million
# steps): the run must still be training when each added worker is ready,
# however long a loaded machine takes to start one (CI once took longer than
# the whole of a 2-epoch run), so the test ends the run with quit, not by
# waiting for it.
exec python3 - <<'PY'
import sys, os, signal, json
sys.path.insert(0, os.path.join(os.environ.get("top_srcdir", "."), "tests"))
from elastic import *
r = Run(job(model="mlp", epochs=2000, checkpoint_every=150, log_every=1), workers=2)
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

# pause / resume.  The pause lasts as long as a worker added while paused
# takes to start and load its data (its worker_ready event), not a fixed
# time; with log_every 1 every step rank 0 reports is journaled.
r.command("pause")
p = r.wait(lambda e: e.get("type") == "generation" and e.get("state") == "paused", "paused generation")
ip = len(r.events) - 1
r.command("add")
late_acq = r.wait_type("acquired")
r.wait(lambda e: e.get("type") == "worker_ready" and e["server"] == late_acq["server"], "worker ready while paused")
r.command("resume")
g = r.wait(lambda e: e.get("type") == "generation" and e.get("world_size") == 3 and "state" not in e,
           "generation of 3 after resume")
ig = len(r.events) - 1
# The three joins and the first step of the resumed generation, in any order.
while True:
    new = [e for e in r.events[ig + 1:] if e.get("generation") == g["generation"]]
    joined = [e for e in new if e.get("type") == "worker_joined"]
    steps = [e for e in new if e.get("type") == "step"]
    if len(joined) == 3 and steps:
        s = steps[0]
        break
    r.wait(lambda e: e.get("type") in ("worker_joined", "step") and e.get("generation") == g["generation"],
           "workers joined and stepping after resume")
# 2 (first, as 1 needs it). The resumed group starts from the state the
#    workers stopped with.
held = set(j["step"] for j in joined)
if len(held) != 1:
    fail("workers joined the resumed generation at different steps: %s" % joined)
held = held.pop()
# 1. Nothing trained while paused: the controller journals every completed
#    step, so a step event between the paused generation and the resumed one
#    is a step taken while paused, unless it is the late report of a step
#    the superseded generation completed before its workers saw the pause
#    (an older generation, and no later than the step the workers held).
during = [e for e in r.events[ip + 1:ig] if e.get("type") == "step" and
          (e["generation"] >= p["generation"] or e["step"] > held)]
if during:
    fail("%d step event(s) while paused, the first: %s" % (len(during), json.dumps(during[0])))
if s["step"] != held + 1:
    fail("first step after resume is %d, the workers held step %d" % (s["step"], held))
# 3. The workers stopped at the pause, and every step they completed is
#    journaled: rank 0 reports each step, and the controller journals the
#    reports of the generation the pause superseded even when they arrive
#    after the paused generation was formed.  So the step the workers hold
#    is the last step journaled before the resumed generation.  Training on
#    while paused, even without reporting, shows here: hundreds of steps
#    while the added worker starts.
before = [e["step"] for e in r.events[:ig] if e.get("type") == "step" and e["generation"] < p["generation"]]
last = max(before)
if held != last:
    fail("last step journaled before the pause %d, the workers resumed from step %d" % (last, held))
if sorted(j["server"] for j in joined) != sorted(m["server"] for m in g["members"]) or \
   late_acq["server"] not in [j["server"] for j in joined]:
    fail("the worker added while paused did not join the resumed generation: %s" % joined)
ok("paused after step %d; nothing stepped while %s started; resumed from step %d, first step %d"
   % (last, late_acq["server"], held, s["step"]))

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
r.command("add")
g = r.wait(lambda e: e.get("type") == "generation" and e.get("world_size") == 1, "generation of 1")
# The newest checkpoint journaled before that generation: a periodic one
# the workers sent just before the kill may be written (and journaled)
# after the operator's, even after the empty generation.
last_ck = [e for e in r.events[:r.events.index(g)] if e.get("type") == "checkpoint"][-1]
if g.get("resume_from") != last_ck["path"]:
    fail("generation resumes from %s, expected %s" % (g.get("resume_from"), last_ck["path"]))
j = r.wait_type("worker_joined")
if j["step"] != last_ck["step"]:
    fail("resumed at step %d, last checkpoint was step %d" % (j["step"], last_ck["step"]))
s = r.wait(lambda e: e.get("type") == "step" and e["generation"] == g["generation"] and e["step"] > j["step"],
           "a step after the resume")
ok("all workers killed; the new worker resumed from %s at step %d and trained on (step %d)"
   % (last_ck["path"], j["step"], s["step"]))

# Enough checkpoints for the pruning check at the end: how many periodic
# ones the run wrote depends on the machine's speed (the newcomer check
# once saw only 150, the operator's and the final one, so nothing had been
# pruned), so operator checkpoints, each after a step of its own, make up
# four before the quit.
def ck_steps():
    return set(e["step"] for e in r.events if e.get("type") == "checkpoint")
while len(ck_steps()) < 4:
    top = max(ck_steps())
    r.wait(lambda e: e.get("type") == "step" and e["step"] > top, "a step after step %d" % top)
    r.command("checkpoint")
    r.wait(lambda e: e.get("type") == "checkpoint" and e["step"] > top, "a checkpoint after step %d" % top)
r.command("quit")
rc = r.finish()
if rc != 1:  # spotdeck(1): 1 after a headless quit
    fail("exit status %d after a headless quit, expected 1" % rc)
final = [e for e in r.events if e.get("type") == "checkpoint" and e.get("reason") == "final"]
if not final or final[-1]["step"] <= j["step"]:
    fail("quit wrote no final checkpoint after the resumed step %d: %s" % (j["step"], final))
ok("quit: final checkpoint at step %d" % final[-1]["step"])

# Old checkpoints are pruned (on the thread pool, after each new one is in
# place): the run directory keeps the job's keep_checkpoints (default 3)
# newest of those the journal reported.
import re
written = sorted(set(e["step"] for e in r.events if e.get("type") == "checkpoint"))
on_disk = sorted(int(m.group(1)) for m in
                 (re.fullmatch(r"ckpt-(\d+)\.sdckpt", n) for n in os.listdir(os.path.join(r.run_dir, "checkpoints")))
                 if m)
if len(written) <= 3 or on_disk != written[-3:]:
    fail("checkpoints on disk %s; the journal reported %s, so expected the newest 3" % (on_disk, written))
ok("%d checkpoints written, the newest 3 kept: %s" % (len(written), on_disk))
PY
