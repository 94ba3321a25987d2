#!/bin/sh
# A collective can end on one member and fail on another (a peer dies in
# between).  SD_TEST_FAIL_RANK0_AT_STEP=30 makes rank 0 take step 30's
# completed collective for a failed one, so only rank 1 completes step 30.
# The next generation starts from rank 1's state, step 30: that step is
# part of the run, so it has its step event (from rank 1's report, which the
# controller keeps while rank 0 has not reported the step), and no step of
# the run is missing from the journal.  Without the controller keeping it,
# step 30 had no event (CI, under load: test-elastic-journal's step 287).
exec python3 - <<'PY'
import sys, os
sys.path.insert(0, os.path.join(os.environ.get("top_srcdir", "."), "tests"))
from elastic import *
os.environ["SD_TEST_FAIL_RANK0_AT_STEP"] = "30"
r = Run(job(model="mlp", epochs=20, min_workers=2, checkpoint_every=0, log_every=1), workers=2)
g = r.wait(lambda e: e.get("type") == "generation" and e.get("world_size") == 2, "generation of 2")
# Rank 1 may report first that rank 0 left its group: rank 0's own report
# is the one that names the injected failure.
f = r.wait(lambda e: e.get("type") == "comm_failed" and "SD_TEST_FAIL_RANK0_AT_STEP" in e.get("reason", ""),
           "rank 0's failed step 30")
g2 = r.wait(lambda e: e.get("type") == "generation" and e["generation"] > g["generation"]
            and e.get("world_size") == 2, "the next generation of 2")
j = r.wait(lambda e: e.get("type") == "worker_joined" and e["generation"] == g2["generation"], "a member joined")
if j["step"] != 30:
    fail("generation %d started from step %d, expected 30 (rank 1's state)" % (g2["generation"], j["step"]))
r.wait(lambda e: e.get("type") == "step" and e["step"] >= 60, "step 60")
r.command("quit")
r.wait_type("checkpoint")
r.finish()
steps, top, missing = journaled_steps(r.journal())
if missing:
    fail("no step event for steps %s of 1..%d" % (missing, top))
if steps[30] != [g["generation"]]:
    fail("step 30's events: generations %s, expected once, of generation %d" % (steps[30], g["generation"]))
twice = [s for s, gens in steps.items() if len(gens) > 1]
if twice:
    fail("steps with more than one event: %s" % twice)
ok("step 30, completed by rank 1 only in generation %d, has its event; the next generation started from it; "
   "steps 1..%d each have one event" % (g["generation"], top))
PY
