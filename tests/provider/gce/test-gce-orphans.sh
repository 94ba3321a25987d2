#!/bin/sh
# Orphans: a controller killed while two Spot VMs train for it
# leaves them running and billed at the fake GCE; `spotdeck --resume` of
# the same run directory finds them by the run's label (kept in the run
# directory's gce-label), journals each as an orphan and deletes it; once
# the resumed run quits no VM is left.  With provider.orphans "keep" they
# are journaled and left alone; a third controller run with --orphans ask
# asks about them, its acquisitions waiting, and "orphans adopt" makes its
# servers take them over.
. "$(dirname "$0")/../../lib.sh"
tmpdir
. "$top_srcdir/tests/fake-cloud/gce-vms.sh"
"$PY" - <<'PY'
import sys, os, json, time, signal
sys.path[:0] = [os.path.join(os.environ.get("top_srcdir", "."), d) for d in ("tests", "tests/fake-cloud")]
from elastic import *
from gce_run import T, control, live, provider

A, B = "gce/us-central1-a/t4/spot", "gce/us-central1-b/t4/spot"
# Long enough (60 epochs) that the run cannot end on its own during the test.
j = job(workers=0, cluster=[A, B], epochs=60)
j["provider"] = provider()

r = Run(j)
r.wait(lambda e: e.get("type") == "generation" and e.get("world_size") == 2, "a generation of 2")
first = live()
if len(first) != 2:
    fail("2 VMs expected while 2 servers train, the fake has %s" % first)
label = control("/_control/state")["instances"][0]["labels"]["spotdeck-run"]
# The first run read the Billing Catalog and cached each region's price.
for o in (A, B):
    r.wait_since(0, lambda e: e.get("type") == "price" and e.get("offer") == o, "the price of " + o)
skus_asked = [q for q in control("/_control/log")["requests"] if q["path"].startswith("/v1/services/")]
if not skus_asked:
    fail("the first run priced its offers without reading the catalog")
r.kill(signal.SIGKILL)
if live() != first:
    fail("the VMs changed after the controller was killed: %s, then %s" % (first, live()))
ok("controller killed while %s train: both still RUNNING (label spotdeck-run=%s)" % (", ".join(first), label))

r2 = Run(None, resume=r.run_dir)
orph = {}
while len(orph) < 2:
    e = r2.wait(lambda e: e.get("type") == "orphan" and e["instance"] not in orph, "orphans of the killed controller")
    orph[e["instance"]] = e
if sorted(orph) != first or any(e["action"] != "delete" or e["status"] != "RUNNING" for e in orph.values()):
    fail("orphans journaled: %s; expected %s, RUNNING, deleted" % (list(orph.values()), first))
deadline = time.time() + 60 * SCALE
while set(first) & set(live()):
    if time.time() > deadline:
        fail("the orphans %s are still there" % sorted(set(first) & set(live())))
    time.sleep(0.2)
ok("the resumed run found both by the run's label, journaled and deleted them")
# The resumed run took the prices from the cache: the same, read no more.
p1 = {e["offer"]: e for e in r.events if e.get("type") == "price"}
p2 = {o: r2.wait_since(0, lambda e: e.get("type") == "price" and e.get("offer") == o, "the price of " + o)
      for o in (A, B)}
again = [q for q in control("/_control/log")["requests"] if q["path"].startswith("/v1/services/")]
if len(again) != len(skus_asked) or any(p2[o]["usd_per_hour"] != p1[o]["usd_per_hour"] or
                                        "cached" not in p2[o]["source"] for o in (A, B)):
    fail("the resumed run's prices %s (catalog pages asked %d, then %d); expected the first run's %s from "
         "the cache" % (list(p2.values()), len(skus_asked), len(again), list(p1.values())))
if not os.path.isfile(os.path.join(os.environ["XDG_CACHE_HOME"], "spotdeck", "gce-prices.json")):
    fail("no prices cache in $XDG_CACHE_HOME/spotdeck")
ok("the first run read %d catalog pages; the resumed one took $%.5f/h from the cache, asking none" %
   (len(skus_asked), p2[A]["usd_per_hour"]))
r2.command("quit")
r2.finish()
deadline = time.time() + 30 * SCALE
while live():
    if time.time() > deadline:
        fail("VMs left after the resumed run quit: %s; its last events: %s" % (live(), [
            e for e in r2.events if e.get("type") in ("error", "state", "released", "done") or
            (e.get("type") == "cloud_call" and "delete" in e["call"])][-12:]))
    time.sleep(0.2)
ok("nothing left at the fake after the resumed run quit")

# provider.orphans "keep": journaled, left alone.
j["provider"]["orphans"] = "keep"
r3 = Run(j)
r3.wait(lambda e: e.get("type") == "generation" and e.get("world_size") == 2, "a generation of 2 (keep)")
kept = live()
r3.kill(signal.SIGKILL)
# The resumed run inserts its own two VMs; one insert is held 3 s at the
# fake before GCE makes the VM, and the run quits while it is held: the
# close cuts off its answer (a delete then finds no such VM), and must
# still delete that VM once GCE has made it.
control("/_control/slow", {"seconds": 3, "count": 1, "method": "POST",
                           "prefix": "/compute/v1/projects/p1/zones/us-central1-"})
n_log = len(control("/_control/log")["requests"])
r4 = Run(None, resume=r3.run_dir)
seen = set()
while len(seen) < 2:
    e = r4.wait(lambda e: e.get("type") == "orphan" and e["instance"] not in seen, "orphans (keep)")
    if e["action"] != "keep":
        fail("orphans \"keep\" but %s" % e)
    seen.add(e["instance"])
def held():
    return [q for q in control("/_control/log")["requests"][n_log:] if q["method"] == "POST"
            and q["path"].endswith("/instances") and q["status"] is None]
deadline = time.time() + 30 * SCALE
while not held():
    if time.time() > deadline:
        fail("no insert of the resumed run reached the fake")
    time.sleep(0.05)
r4.command("quit")
r4.finish()
# Until the held insert has made its VM and answered.
while held():
    time.sleep(0.1)
time.sleep(0.5)
# The resumed run has ended (its own VMs deleted at close): the kept ones
# are still there, only they, and it never asked to delete them.
if set(live()) != set(kept):
    fail("orphans \"keep\": live after the resumed run quit %s, expected exactly the kept %s" % (live(), kept))
asked = [e["url"] for e in r4.events if e.get("type") == "cloud_call" and "delete" in e["call"] and
         any(k in e["url"] for k in kept)]
if asked:
    fail("orphans \"keep\" but the resumed run sent %s" % asked)
ok("with orphans \"keep\" both were journaled and left running; the VM of an insert cut off by the quit "
   "was deleted once GCE had made it")

# --orphans ask (the cockpit's default; here headless, answered by command):
# a third controller of the same run finds the kept VMs, asks, and its
# acquisitions wait; "orphans adopt" makes its servers take them over.
inserts = lambda: [q for q in control("/_control/log")["requests"]
                   if q["method"] == "POST" and q["path"].endswith("/instances")]
before = len(inserts())
r5 = Run(None, resume=r3.run_dir, extra=["--orphans", "ask"])
asked = {}
while len(asked) < 2:
    e = r5.wait(lambda e: e.get("type") == "orphan" and e["instance"] not in asked, "orphans (ask)")
    asked[e["instance"]] = e
if sorted(asked) != kept or any(e["action"] != "ask" for e in asked.values()):
    fail("orphans asked about: %s; expected %s with action ask" % (list(asked.values()), kept))
r5.command("orphans adopt")
adopted = {}
while len(adopted) < 2:
    e = r5.wait(lambda e: e.get("type") == "orphan" and e["action"] != "ask" and e["instance"] not in adopted,
                "the answer's orphan events")
    adopted[e["instance"]] = e
if sorted(adopted) != kept or any(e["action"] != "adopt" or not e.get("server") for e in adopted.values()):
    fail("after \"orphans adopt\": %s" % list(adopted.values()))
r5.wait(lambda e: e.get("type") == "generation" and e.get("world_size") == 2, "a generation of 2 on the adopted VMs")
if len(inserts()) != before or live() != kept:
    fail("adopting made VMs: %d inserts (before: %d), live %s (kept: %s)" % (len(inserts()), before, live(), kept))
servers = sorted(e["server"] for e in adopted.values())
members = r5.wait_since(0, lambda e: e.get("type") == "generation" and e.get("world_size") == 2, "")["members"]
if sorted(m["server"] if isinstance(m, dict) else m for m in members) != servers:
    fail("the generation of 2 is %s; the adopting servers are %s" % (members, servers))
ok("orphans ask: both asked about, nothing made while asking; \"orphans adopt\": %s took over %s, no insert, "
   "a generation of 2" % (", ".join(servers), ", ".join(kept)))
e = r5.command("orphans delete")
again = r5.wait(lambda e: e.get("type") == "command" and e["command"] == "orphans delete", "the second answer")
if again["ok"] or "no question" not in again.get("error", ""):
    fail("a second answer was taken: %s" % again)
r5.command("quit")
r5.finish()
deadline = time.time() + 30 * SCALE
while live():
    if time.time() > deadline:
        fail("VMs left after the adopting run quit: %s" % live())
    time.sleep(0.2)
# Each adopted VM is billed in this run from its adoption: less than the
# fake bills it (from its first RUNNING, under the killed controller).
bill = {b["name"]: b for b in control("/_control/billing")["instances"]}
for n, e in adopted.items():
    b = r5.wait_since(0, lambda x: x.get("type") == "billed" and x.get("server") == e["server"], "billed " + n)
    if not (0 < b["run_s"] < bill[n]["run_seconds"]) or "its adoption" not in b["source"]:
        fail("%s billed %s; the fake ran it %.2f s" % (n, b, bill[n]["run_seconds"]))
ok("the adopting run deleted them at its end and billed each from its adoption (%s)" %
   ", ".join("%.1f of %.1f s" % (r5.wait_since(0, lambda x: x.get("type") == "billed" and
                                                x.get("server") == e["server"], "")["run_s"],
                                 bill[n]["run_seconds"]) for n, e in adopted.items()))
PY
