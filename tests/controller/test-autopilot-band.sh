#!/bin/sh
# tests/controller/test-autopilot-band.sh - the live autopilot's run against the
# planner's band for the same policy ("the run's final cost and
# time are within the planner's p10-p90 band for that policy").
#
# The live run: one K80 spot server on the sim market at hazard 30 (an hour
# of the market in 2 minutes), boots at 0.03, notices at 0.1, the market's
# own revocation draws (seed fixed, no trace: a trace turns them off), the
# job's "autopilot" with a 10-minute deadline, K80 spot offers only and one
# server at most, so that it replaces what the market takes.  Then
# `spotdeck plan --policy autopilot --json` with the same job, catalog,
# cluster, knobs, objective and join (the live controller's: 78.74 s x the
# boot scale), and the job's speed as this machine trained it: the images
# per second of the live run's generations over the catalog's K80 figure
# (--speed-factor), so a slower build (ASan: 3x) plans a slower run.  The
# live run's time (its "done" event) and cost (every server's last "usd")
# must lie within the plan's p10..p90 for the autopilot, widened by 5 % of
# the band's middle on each side for what the speed measurement misses
# (the MLP's start, evaluations between epochs; an estimate).
exec python3 - <<'PY'
import sys, os, json, subprocess, tempfile, shutil, atexit
sys.path.insert(0, os.path.join(os.environ.get("top_srcdir", "."), "tests"))
from elastic import *
top = os.environ.get("top_srcdir", ".")
AP = {"deadline": "10m", "every": "20s", "hold": "10s", "allow": ["gce/*/k80/spot"], "max_servers": 1}
cluster = ["gce/us-east1-c/k80/spot"]
J = job(model="mlp", epochs=20, workers=0, checkpoint_every=100, log_every=50,
        hazard_scale=30, boot_scale=0.03, notice_scale=0.1, market_seed=250, cluster=cluster, autopilot=AP)
r = Run(J, timeout=600)
done = r.wait(lambda e: e.get("type") in ("done", "error") or
              (e.get("type") == "autopilot" and e.get("what") == "off"), "the run's end", timeout=600)
if done["type"] != "done":
    fail("the run did not finish by itself: %s" % json.dumps(done)[:300])
if r.finish() != 0:
    fail("the run did not exit 0")
ev = r.journal()
if os.environ.get("AUTOPILOT_BAND_KEEP"):
    shutil.copy(os.path.join(r.run_dir, "journal.jsonl"), os.environ["AUTOPILOT_BAND_KEEP"])
cat = json.load(open(os.path.join(top, "data", "gce-2019.json")))
ips = {o["id"]: o["images_per_sec"] * o.get("gpu_count", 1) for o in cat["offers"]}
offer, usd, members, pts = {}, {}, {}, {}
for e in ev:
    if e.get("server") and e.get("offer"):
        offer[e["server"]] = e["offer"]
    if e.get("server") and isinstance(e.get("usd"), (int, float)):
        usd[e["server"]] = e["usd"]
    if e["type"] == "generation" and e.get("members"):
        members[e["generation"]] = [m["server"] for m in e["members"]]
    if e["type"] == "checksum":
        pts.setdefault(e["generation"], []).append((e["t"], e["step"]))
# The job's speed: images trained per second of a generation, over what the
# catalog says its servers train (ResNet-32), from each generation's second
# step report (the first follows its join) to its last.
images = capacity = 0.0
for g, p in pts.items():
    if len(p) < 3 or g not in members:
        continue
    dt, steps = p[-1][0] - p[1][0], p[-1][1] - p[1][1]
    images += steps * J["global_batch"]
    capacity += dt * sum(ips[offer[s]] for s in members[g])
if not capacity > 0:
    fail("no generation long enough to measure the job's speed")
factor = images / capacity
live_t = done["t"]
live_usd = sum(usd.values())
revs = [e for e in ev if e["type"] == "revoked" and not e.get("capped")]
jp = os.path.join(r.tmp, "job.json")
out = subprocess.run([SPOTDECK, "plan", "--job", jp, "--policy", "autopilot", "--autopilot", json.dumps(AP),
                      "--gpus", "k80", "--sizes", "1", "--spot", "--zones", "us-east1-c",
                      "--hazard-scale", "30", "--boot-scale", "0.03", "--notice-scale", "0.1",
                      "--join", "%.4f" % (78.74 * 0.03), "--speed-factor", "%.6f" % factor,
                      "--runs", "1000", "--seed", "1", "--json", "--quiet"],
                     capture_output=True, text=True, timeout=300)
if out.returncode != 0:
    fail("spotdeck plan: exit %d: %s" % (out.returncode, out.stderr.strip()))
rows = [c for c in json.loads(out.stdout)["configurations"] if c["policy"] == "autopilot"]
if len(rows) != 1:
    fail("the plan has %d autopilot rows, expected 1" % len(rows))
row = rows[0]
def within(name, v, band):
    lo, hi = band["p10"], band["p90"]
    slack = 0.05 * band["median"]
    if not (lo - slack <= v <= hi + slack):
        fail("the live run's %s %.5g is outside the plan's p10..p90 %.5g..%.5g (+-%.2g); speed factor %.3f, "
             "%d revocation(s) live, %.2f planned a run; the run: %s" %
             (name, v, lo, hi, slack, factor, len(revs), row["revocations_mean"],
              "; ".join("%.1f %s %s" % (e["t"], e["type"], e.get("server") or e.get("command") or "")
                        for e in ev if e["type"] in ("acquired", "revoked", "command", "released", "done"))))
    return "%.4g in %.4g..%.4g" % (v, lo, hi)
a = within("time (s)", live_t, row["time_s"])
b = within("cost (USD)", live_usd, row["cost_usd"])
ok("the live autopilot run (%d revocation(s), speed factor %.2f) within the plan's band: time %s s, cost $%s"
   % (len(revs), factor, a, b))
PY
