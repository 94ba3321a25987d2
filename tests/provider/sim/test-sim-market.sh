#!/bin/sh
# The sim provider on the GCE 2019 catalog with a hazard scale that makes
# revocations happen within a minute: revocations occur, each notice precedes
# its revocation by the (scaled) notice time, training continues, and every
# server's cost recomputed from the journal (price x billed seconds, 1-minute
# minimum) matches what was reported.  That run is quit once it has trained
# past a revocation, not left to finish: at hazard_scale 900 GCE's 24-hour
# cap comes at 96 s of market time and revokes every server still held, so
# a run slower than that (ASan under load) would be left with none and
# wait for the operator.  Then: the same seed and the same
# cluster give the same market journal, to the bit, in two runs.  Those runs
# launch every server at market time 0 and take no operator command, so no
# wall-clock moment (when a command lands, how fast the machine trains)
# enters what the market does: a storm (hazard x20000) revokes or caps all
# eight servers within 5 s of market time, and each run ends after the
# eighth revocation.
exec python3 - <<'PY'
import sys, os, json
sys.path.insert(0, os.path.join(os.environ.get("top_srcdir", "."), "tests"))
from elastic import *
cluster = ["gce/us-east1-c/k80/spot", "gce/us-central1-c/k80/spot",
           "gce/europe-west1-b/k80/spot", "gce/us-west1-b/p100/spot"]
J = job(model="mlp", epochs=2000, workers=0, checkpoint_every=300, log_every=50,
        hazard_scale=900, boot_scale=0.03, notice_scale=0.1, market_seed=11, cluster=cluster)

def run():
    r = Run(J)
    rv = r.wait(lambda e: e.get("type") == "revoked", "a revocation", timeout=120)
    r.command("add gce/us-west1-b/k80/spot")
    # Trained after it: 50 steps past the first step event that follows.
    s0 = r.wait(lambda e: e.get("type") == "step" and e["t"] > rv["t"], "a step after the revocation", timeout=120)
    s = r.wait(lambda e: e.get("type") == "step" and e["step"] >= s0["step"] + 50, "50 steps more", timeout=120)
    r.command("quit")
    if r.finish() != 1:
        fail("quit before the end did not exit 1")
    return r, s

r, quit_at = run()
ev = r.events
rev = [e for e in ev if e["type"] == "revoked"]
notices = {e["server"]: e for e in ev if e["type"] == "notice"}
for e in rev:
    n = notices.get(e["server"])
    if not n:
        fail("%s revoked without a notice" % e["server"])
    gap = e["market_time"] - n["market_time"]
    # 30 s x notice_scale 0.1, or less when the whole lifetime was shorter.
    if abs(gap - n["seconds"]) > 1e-6 or n["seconds"] > 3.0 + 1e-9:
        fail("%s: notice %.3f s before the revocation, announced %.3f s" % (e["server"], gap, n["seconds"]))
ok("%d revocation(s), each exactly its announced notice (<= 3.0 s) after the notice" % len(rev))
first = min(e["t"] for e in rev)
after = [e for e in ev if e["type"] == "step" and e["t"] > first]
if not after:
    fail("no training steps after the first revocation")
ok("training continued: %d step events after the first revocation, quit at step %d" % (len(after), quit_at["step"]))

# Cost: price x max(billed seconds, 60) / 3600 for every server.
price = {}
start = {}
final = {}
for e in ev:
    if e["type"] == "acquired" and e["offer"] != "local":
        price[e["server"]] = e["usd_per_hour"]
        start[e["server"]] = e["market_time"]
    if e.get("server") in price and e["type"] in ("revoked", "released"):
        final[e["server"]] = e
if set(final) != set(price):
    fail("servers without a final revoked/released event: %s" % (set(price) - set(final)))
for s, e in final.items():
    billed = e["market_time"] - start[s]
    want = price[s] * max(billed, 60) / 3600
    if abs(want - e["usd"]) > 1e-6:
        fail("%s: reported $%.6f, journal gives %.2f $/h x %.3f s = $%.6f" % (s, e["usd"], price[s], billed, want))
ok("cost of %d servers recomputed from the journal matches (total $%.5f)" % (len(final), sum(e["usd"] for e in final.values())))

storm = ["gce/us-east1-c/k80/spot", "gce/us-central1-c/k80/spot", "gce/europe-west1-b/k80/spot",
         "gce/us-west1-b/k80/spot", "gce/us-east1-c/p100/spot", "gce/us-central1-c/p100/spot",
         "gce/europe-west1-b/p100/spot", "gce/us-west1-b/p100/spot"]
# boot_scale 1000: the servers stay provisioning, so no worker starts and
# only the market runs.
S = job(model="mlp", workers=0, hazard_scale=20000, boot_scale=1000, notice_scale=0.1,
        market_seed=11, cluster=storm)

def market_trace():
    r = Run(S)
    for _ in storm:
        r.wait(lambda e: e.get("type") == "revoked", "a revocation", timeout=120)
    r.command("quit")
    r.finish()
    return [(e["type"], e.get("server"), e.get("offer"), e.get("market_time"), e.get("capped"),
             e.get("lifetime_s"), e.get("seconds"), e.get("usd"))
            for e in r.events if e["type"] in ("acquired", "notice", "revoked", "stockout")]

a, b = market_trace(), market_trace()
if a != b:
    fail("same seed, same cluster, different market journals:\n%s\n%s" %
         ("\n".join(map(str, a)), "\n".join(map(str, b))))
sampled = [x for x in a if x[0] == "revoked" and not x[4]]
if not sampled:
    fail("the storm revoked no server before its cap: nothing sampled was compared")
ok("same seed and cluster: the same market journal, bit for bit (%d events; %d lifetimes sampled, "
   "%d capped)" % (len(a), len(sampled), len([x for x in a if x[0] == "revoked"]) - len(sampled)))
PY
