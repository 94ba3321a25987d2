#!/bin/sh
# AdamW with gradient clipping in an elastic run (mlp, to keep it short): a
# worker added mid-run receives AdamW's two moments with the parameters, so
# from its first step on it computes the same update as the others, and
# every rank's parameter checksum stays equal over the steps that follow
# (a newcomer with zero moments would take a far larger first step and
# differ at once).  Every rank clips by the norm of the summed gradients,
# computed in the same order everywhere, so the checksums stay equal with
# the clip acting.  The run ends with quit, not by waiting for the job.
exec python3 - <<'PY'
import sys, os
sys.path.insert(0, os.path.join(os.environ.get("top_srcdir", "."), "tests"))
from elastic import *
r = Run(job(model="mlp", epochs=2000, checkpoint_every=100000, log_every=1, optimizer="adamw",
            lr=0.002, betas=[0.9, 0.95], weight_decay=0.1, clip_grad_norm=0.5, warmup_steps=10),
        workers=2)
r.wait(lambda e: e.get("type") == "generation" and e.get("world_size") == 2, "generation of 2")
r.wait(lambda e: e.get("type") == "step" and e["step"] >= 30, "step 30")

r.command("add")
new = r.wait_type("acquired")["server"]
g3 = r.wait(lambda e: e.get("type") == "generation" and e.get("world_size") == 3, "generation of 3")
j = r.wait(lambda e: e.get("type") == "worker_joined" and e["server"] == new, "newcomer joined")
# Five steps' checksums of generation 3: those journaled already (the first
# may come before the worker_joined event) and the next ones.  The
# controller journals a step's checksums only when every rank's report of
# that step arrives before another step's, so some steps have none; a
# newcomer without the moments would differ from its first step on, and
# the difference stays, so any later step shows it.
def gen3():
    return sorted((e for e in r.events if e.get("type") == "checksum" and
                   e["generation"] == g3["generation"]), key=lambda e: e["step"])
while len(gen3()) < 5:
    r.wait(lambda e: e.get("type") == "checksum" and e["generation"] == g3["generation"],
           "checksums of generation 3")
seen = gen3()
for cs in seen:
    if new not in cs["checksums"] or len(cs["checksums"]) != 3 or len(set(cs["checksums"].values())) != 1:
        fail("step %d: checksums differ after the newcomer joined: %s" % (cs["step"], cs["checksums"]))
ok("added %s joined at step %d with AdamW's moments; checksums equal at steps %s"
   % (new, j["step"], [c["step"] for c in seen]))
# The journal's step events carry the summed gradients' norm before the clip.
norms = [e["grad_norm"] for e in r.events if e.get("type") == "step" and "grad_norm" in e]
if len(norms) < 5 or min(norms) <= 0:
    fail("step events without a positive grad_norm: %s" % norms[:5])
ok("step events carry grad_norm: %d of them, %.3g to %.3g" % (len(norms), min(norms), max(norms)))
r.command("quit")
r.finish()
PY
