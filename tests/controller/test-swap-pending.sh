#!/bin/sh
# tests/controller/test-swap-pending.sh - a swap whose replacement ends before it
# trains (dropped, revoked, failed) frees its slot and says so: 20 swaps
# whose replacement is dropped while it boots, then a swap that is still
# taken.  Before, such a swap kept its slot until a join that never came,
# and after 16 of them every swap was refused ("16 swaps already pending").
# Sim market, boots slowed so that no replacement trains; no workers.
exec python3 - <<'PY'
import sys, os
sys.path.insert(0, os.path.join(os.environ.get("top_srcdir", "."), "tests"))
from elastic import *
J = job(model="mlp", workers=0, boot_scale=1000, hazard_scale=0.001, market_seed=3,
        cluster=["gce/us-west1-b/k80/on-demand"])
r = Run(J)
r.wait(lambda e: e.get("type") == "acquired" and e.get("server") == "s1", "s1 acquired")
def swap(n):
    """Sends a swap; returns its replacement's id (the swap event is
    journaled before the command's own event)."""
    r.command("swap s1 gce/us-west1-b/k80/on-demand")
    sw = r.wait(lambda e: e.get("type") == "command" and e["command"].startswith("swap"), "swap %d answered" % n)
    if not sw["ok"]:
        fail("swap %d refused: %s" % (n, sw.get("error")))
    return [e for e in r.events if e["type"] == "swap"][-1]["replacement"]

for i in range(1, 21):
    new = swap(i)
    r.command("drop " + new)
    f = r.wait(lambda e: e.get("type") in ("swap_failed", "command") and
               (e["type"] == "swap_failed" or e["command"] == "drop " + new), "drop of " + new)
    if f["type"] == "command":
        if not f["ok"]:
            fail("drop %s refused: %s" % (new, f.get("error")))
        f = [e for e in r.events if e["type"] == "swap_failed"]
        f = f[-1] if f else None
    if not f or f["server"] != "s1" or f["replacement"] != new or "released" not in f["reason"]:
        fail("swap %d: swap_failed %s, expected s1 / %s / released" % (i, f, new))
ok("20 swaps whose replacement was dropped while it booted: each journaled swap_failed")
ok("a 21st swap is taken (replacement %s)" % swap(21))
r.command("quit")
r.finish()
PY
