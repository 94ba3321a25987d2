#!/bin/sh
# 4 local workers train cnn on Fashion-MNIST with the same global batch (64)
# as one worker (min_workers: all 4 from the first step) and reach test
# accuracy >= 0.90 after 3 epochs.
exec python3 - <<'PY'
import sys, os
sys.path.insert(0, os.path.join(os.environ.get("top_srcdir", "."), "tests"))
from elastic import *
r = Run(job(epochs=3, min_workers=4, checkpoint_every=500, log_every=100), workers=4)
g = r.wait(lambda e: e.get("type") == "generation" and e.get("world_size") == 4, "generation of 4")
counts = [m["count"] for m in g["members"]]
if sum(counts) != 64:
    fail("slices %s do not add up to the global batch 64" % counts)
ok("generation %d: 4 workers, slices %s" % (g["generation"], counts))
d = r.wait_type("done")
rc = r.finish()
if rc != 0:
    fail("spotdeck exit status %d" % rc)
if d["steps"] != 2811:
    fail("expected 2811 steps, got %d" % d["steps"])
steps = [e for e in r.events if e["type"] == "step"]
if any(e["world_size"] != 4 for e in steps):
    fail("world size changed during an undisturbed run")
ips = sum(e["images_per_sec"] for e in steps[-10:]) / 10
if d["test_accuracy"] < 0.90:
    fail("test accuracy %.4f < 0.90" % d["test_accuracy"])
ok("4 workers, 3 epochs: test accuracy %.4f, %.0f images/s, %.0f s" % (d["test_accuracy"], ips, d["seconds"]))
PY
