#!/bin/sh
# tests/controller/test-autopilot-live.sh - the live autopilot on the sim market keeps
# a run going with no operator command: three K80 spot servers on the sim
# market at the hazard scale the issue names (30: an hour of the market in
# 2 minutes), the job's "autopilot" with a 10-minute deadline.  The
# revocations come from a trace (spotdeck-catalog(5), TRACE FILES), not
# from the market model's draws: the first three servers go at market
# times 3, 9 and 15 s, and the autopilot's first replacements (s4, s5) at
# 40 and 70 s, so that at least 3 revocations happen whatever the autopilot
# decided in between (it may drop a server before its revocation: with the
# market's own draws, a sanitizer build's slower steps made it drop the
# server the third revocation was due on) and however fast this machine
# trains.  24 epochs of the MLP keep the run going well past 15 s (63 s on an idle
# machine).  The run must
# finish (a "done" event) after at least 3 revocations, with no command by
# the operator; every command it ran says by: autopilot, and each came
# after its "decided" and "pending" events (same action, announced at
# least 4.5 s before: the announcement is there to be read and held),
# whose reason names the action and the planner's figures (P(done by
# deadline) before and after, expected cost), also given as numbers (with
# no server left, a move has no cost or time before it: "-" and null).
# Then the same job with a bad autopilot key stops before any server is
# rented, with one line naming the field.
exec python3 - <<'PY'
import sys, os, json, re, atexit, shutil, tempfile
sys.path.insert(0, os.path.join(os.environ.get("top_srcdir", "."), "tests"))
from elastic import *
cluster = ["gce/us-east1-c/k80/spot", "gce/us-central1-c/k80/spot", "gce/europe-west1-b/k80/spot"]
J = job(model="mlp", epochs=24, workers=0, checkpoint_every=100, log_every=50,
        hazard_scale=30, boot_scale=0.03, notice_scale=0.1, market_seed=250, cluster=cluster,
        autopilot={"deadline": "10m", "every": "20s", "hold": "10s",
                   "allow": ["gce/*/*/spot"], "max_servers": 3})
tmp = tempfile.mkdtemp(prefix="spotdeck-autopilot.")
atexit.register(shutil.rmtree, tmp, True)
trace = os.path.join(tmp, "revocations.jsonl")
with open(trace, "w") as f:
    for t, s in ((3, "s1"), (9, "s2"), (15, "s3"), (40, "s4"), (70, "s5")):
        f.write(json.dumps({"t": t, "event": "revoke", "server": s, "notice": 2}) + "\n")
r = Run(J, timeout=900, extra=["--trace", trace])
done = r.wait(lambda e: e.get("type") in ("done", "error") or
              (e.get("type") == "autopilot" and e.get("what") == "off"), "the run's end", timeout=900)
if done["type"] != "done":
    fail("the run did not finish by itself: %s" % json.dumps(done)[:300])
ev = r.events
revs = [e for e in ev if e["type"] == "revoked" and not e.get("capped")]
if len(revs) < 3:
    fail("%d revocations before the end, expected at least 3 (the trace's revocations were skipped?); the run: %s"
         % (len(revs), "; ".join("%.1f %s %s" % (e["t"], e["type"], e.get("server") or e.get("command") or e.get("action") or "") for e in ev if e["type"] in ("acquired", "revoked", "command", "released", "done") or (e["type"] == "autopilot" and e.get("what") == "decided"))))
cmds = [e for e in ev if e["type"] == "command"]
if not cmds:
    fail("the autopilot ran no command")
for c in cmds:
    if c.get("by") != "autopilot":
        fail("a command not by the autopilot: %s" % json.dumps(c))
    if not c["ok"]:
        fail("the autopilot's command was refused: %s" % json.dumps(c))
    before = [e for e in ev if e["type"] == "autopilot" and e["t"] <= c["t"] and e.get("action") == c["command"]]
    dec = [e for e in before if e["what"] == "decided"]
    pend = [e for e in before if e["what"] == "pending"]
    if not dec or not pend:
        fail("%s ran with no decided/pending autopilot event before it" % c["command"])
    d, p = dec[-1], pend[-1]
    if c["t"] - p["t"] < 4.5:
        fail("%s ran %.1f s after its announcement, expected 5 s" % (c["command"], c["t"] - p["t"]))
    want = c["command"].split()[0] + " "
    if not d["reason"].startswith(want) or "P(done by deadline)" not in d["reason"] or \
       not re.search(r"expected cost (\$[0-9.]+|-) -> \$[0-9.]+", d["reason"]):
        fail("%s: reason without its action or figures: %s" % (c["command"], d["reason"]))
    for k in ("p_before", "p_after", "cost_before", "cost_after", "time_before", "time_after"):
        if d.get(k) is None and k.endswith("_before") and "expected cost - ->" in d["reason"]:
            continue
        if not isinstance(d.get(k), (int, float)):
            fail("%s: decided event without %s: %s" % (c["command"], k, json.dumps(d)))
    if not (0 <= d["p_before"] <= 1 and 0 <= d["p_after"] <= 1 and d["cost_after"] > 0):
        fail("%s: figures out of range: %s" % (c["command"], json.dumps(d)))
if r.finish() != 0:
    fail("the run did not exit 0")
ok("finished with no operator command after %d revocations (at %s s); the autopilot ran %d command(s): %s"
   % (len(revs), ", ".join("%.0f" % e["t"] for e in revs), len(cmds), ", ".join(c["command"] for c in cmds)))

# A misspelt limit stops the run at once, naming the field.
J["autopilot"] = {"deadline": "5m", "max_server": 4}
r = Run(J)
rc = r.p.wait(timeout=60)
err = r.p.stderr.read()
if rc == 0 or "autopilot.max_server" not in err or err.strip().count("\n") > 0:
    fail("a bad autopilot key: exit %d, stderr %r" % (rc, err))
ok("a bad autopilot key: %s" % err.strip())
PY
