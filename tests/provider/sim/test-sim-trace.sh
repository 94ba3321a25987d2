#!/bin/sh
# Trace replay: a JSON-lines file of timed market events (a revocation with
# its notice, a stockout in a zone, a price change, operator commands) drives
# a deterministic run; then that run's own journal, replayed as a trace,
# gives the same market events at the same market times.
#
# Both runs end with the trace's quit at t = 13, after its last market
# event, and their job is far longer than that: had a run trained to its
# end first, as one on a fast machine (or a replay faster than its
# original) can, the events after that end would be missing from it alone.
exec python3 - <<'PY'
import sys, os, json, atexit, shutil
sys.path.insert(0, os.path.join(os.environ.get("top_srcdir", "."), "tests"))
from elastic import *
cluster = ["gce/us-east1-c/k80/spot", "gce/us-west1-b/k80/spot", "gce/us-central1-c/k80/spot"]
J = job(model="mlp", epochs=50, workers=0, checkpoint_every=500, log_every=50,
        boot_scale=0.03, notice_scale=0.1, market_seed=3, cluster=cluster)
tmp = tempfile.mkdtemp(prefix="spotdeck-trace.")
atexit.register(shutil.rmtree, tmp, True)   # also when a check fails
trace = os.path.join(tmp, "trace.jsonl")
with open(trace, "w") as f:
    f.write("# scripted market\n")
    f.write(json.dumps({"t": 1, "event": "stockout", "zone": "us-east1-c", "seconds": 300}) + "\n")
    f.write(json.dumps({"t": 2, "event": "price", "offer": "gce/us-west1-b/k80/spot", "usd_per_hour": 0.5}) + "\n")
    f.write(json.dumps({"t": 9, "event": "revoke", "server": "s2", "notice": 2}) + "\n")
    f.write(json.dumps({"t": 10, "event": "command", "command": "add gce/us-east1-c/k80/spot"}) + "\n")
    f.write(json.dumps({"t": 11, "event": "command", "command": "add gce/us-west1-b/k80/spot"}) + "\n")
    f.write(json.dumps({"t": 13, "event": "command", "command": "quit"}) + "\n")

def run(trace_file):
    r = Run(J, extra=["--trace", trace_file])
    q = r.wait(lambda e: e.get("type") == "command" and e["command"] == "quit", "the trace's quit")
    if r.finish() != 1:
        fail("quit before the end did not exit 1")
    if any(e["type"] == "done" for e in r.events):
        fail("the run trained to its end before the trace's quit at t = 13")
    return r, q

def market(events):
    out = []
    for e in events:
        if e["type"] in ("notice", "revoked", "stockout", "price", "zone_exhausted") or \
           (e["type"] == "acquired" and e["offer"] != "local"):
            out.append((e["type"], e.get("server"), e.get("offer"), e.get("zone"),
                        round(e["market_time"], 1) if e["type"] in ("notice", "revoked", "price", "zone_exhausted") else None,
                        e.get("usd_per_hour")))
    return out

r, quit = run(trace)
ev = r.events
notice = [e for e in ev if e["type"] == "notice"]
rev = [e for e in ev if e["type"] == "revoked"]
if [e["server"] for e in rev] != ["s2"] or [e["server"] for e in notice] != ["s2"]:
    fail("expected exactly one notice and one revocation, of s2: %s / %s" % (notice, rev))
if abs(rev[0]["market_time"] - 9) > 1e-9 or abs(notice[0]["market_time"] - 7) > 1e-9 or notice[0]["seconds"] != 2:
    fail("s2: notice at %.3f (%.3f s), revoked at %.3f; trace says 7, 2 s, 9" %
         (notice[0]["market_time"], notice[0]["seconds"], rev[0]["market_time"]))
ok("trace revocation: s2 noticed at market time 7.0 (2 s), revoked at 9.0")
so = [e for e in ev if e["type"] == "stockout"]
if len(so) != 1 or so[0]["zone"] != "us-east1-c" or so[0]["reason"] != "ZONE_RESOURCE_POOL_EXHAUSTED":
    fail("expected one stockout in us-east1-c: %s" % so)
acq = [e for e in ev if e["type"] == "acquired" and e["offer"] == "gce/us-west1-b/k80/spot"]
if [a["usd_per_hour"] for a in acq] != [0.2556, 0.5]:
    fail("prices of the us-west1-b K80s: %s, expected 0.2556 then 0.5 after the price change" % [a["usd_per_hour"] for a in acq])
ok("stockout in us-east1-c refused the add; the price change applied to the next server ($0.5/h)")
steps_after = [e for e in ev if e["type"] == "step" and e["t"] > rev[0]["t"]]
if not steps_after:
    fail("training did not continue after the revocation")
ok("training continued after it: %d step events, then the trace's quit at t = %.1f" % (len(steps_after), quit["t"]))

# The journal of that run, replayed, gives the same market.
journal = os.path.join(r.run_dir, "journal.jsonl")
r2, _ = run(journal)
a, b = market(r.events), market(r2.events)
if a != b:
    fail("journal replay differs:\n%s\n%s" % ("\n".join(map(str, a)), "\n".join(map(str, b))))
ok("replaying the run's journal gives the same %d market events" % len(a))
PY
