#!/bin/sh
# Orphans: a controller killed while two Spot instances train
# for it leaves them running and billed at the fake EC2; `spotdeck --resume`
# of the same run directory finds them by the run's tag (spotdeck-run, its
# value kept in the run directory's aws-label), journals each as an orphan
# and terminates it; once the resumed run quits no instance is left.  With
# provider.orphans "keep" they are journaled and left alone, even by the
# sweep of the run's tag at close; a third controller run with --orphans
# adopt takes them over for its servers.  A launch whose answers are all lost
# (the server fails) has its instance found by name and terminated mid-run.
. "$(dirname "$0")/../../lib.sh"
tmpdir
. "$top_srcdir/tests/fake-cloud/ec2-vms.sh"
"$PY" - <<'PY'
import sys, os, json, time, signal
sys.path[:0] = [os.path.join(os.environ.get("top_srcdir", "."), d) for d in ("tests", "tests/fake-cloud")]
from elastic import *
from aws_run import T, control, live, provider

A, B = "aws/us-east-1a/t4/spot", "aws/us-east-1b/t4/spot"
# Long enough (60 epochs) that the run cannot end on its own during the test.
j = job(workers=0, cluster=[A, B], epochs=60)
j["provider"] = provider(price_poll_s=1)

r = Run(j)
r.wait(lambda e: e.get("type") == "generation" and e.get("world_size") == 2, "a generation of 2")
# Spot prices: each AZ's at start, then asked again every price_poll_s; a
# change at EC2 is journaled with the price it replaces.
start = {o: r.wait_since(0, lambda e: e.get("type") == "price" and e.get("offer") == o, "the price of " + o)
         for o in (A, B)}
if (start[A]["usd_per_hour"], start[B]["usd_per_hour"]) != (0.2104, 0.1987) or "was" in start[A]:
    fail("prices at start %s; expected us-east-1a 0.2104, us-east-1b 0.1987 (ec2-vms.sh)" % list(start.values()))
m, asked = r.mark(), time.time()
control("/_control/price", {"type": "g4dn.xlarge", "az": "us-east-1a", "usd_per_hour": 0.25})
ch = r.wait_since(m, lambda e: e.get("type") == "price", "the new price of us-east-1a", timeout=20)
if ch["offer"] != A or ch["usd_per_hour"] != 0.25 or ch.get("was") != 0.2104:
    fail("price event %s; expected %s at 0.25, was 0.2104" % (ch, A))
ok("Spot prices at start (us-east-1a $%.4f, us-east-1b $%.4f), and a change at EC2 journaled %.1f s later: %s" %
   (start[A]["usd_per_hour"], start[B]["usd_per_hour"], ch["time"] - asked, ch))
first = live()
if len(first) != 2:
    fail("2 instances expected while 2 servers train, the fake has %s" % first)
label = control("/_control/state")["instances"][0]["tags"]["spotdeck-run"]
if open(os.path.join(r.run_dir, "aws-label")).read().strip() != label:
    fail("the run directory's aws-label is not the instances' tag %s" % label)
r.kill(signal.SIGKILL)
if live() != first:
    fail("the instances changed after the controller was killed: %s, then %s" % (first, live()))
ok("controller killed while %s train: both still running (tag spotdeck-run=%s)" % (", ".join(first), label))

r2 = Run(None, resume=r.run_dir)
orph = {}
while len(orph) < 2:
    e = r2.wait(lambda e: e.get("type") == "orphan" and e["instance"] not in orph, "orphans of the killed controller")
    orph[e["instance"]] = e
if sorted(orph) != first or any(e["action"] != "delete" or e["status"] != "running" for e in orph.values()):
    fail("orphans journaled: %s; expected %s, running, terminated" % (list(orph.values()), first))
deadline = time.time() + 60 * SCALE
while set(first) & set(live()):
    if time.time() > deadline:
        fail("the orphans %s are still there" % sorted(set(first) & set(live())))
    time.sleep(0.2)
ok("the resumed run found both by the run's tag, journaled and terminated them")

# A launch whose every answer is lost (503s after the fact, retries spent):
# the server fails, but EC2 made the instance.  The backstop finds it by
# its Name tag and terminates it during the run, not at its end.
# (5: every attempt the HTTP client makes, http.h's default.)
control("/_control/fail", {"action": "RunInstances", "status": 503, "code": "ServiceUnavailable", "count": 5,
                           "after": True})
m = r2.mark()
r2.command("add " + B)
acq = r2.wait_since(m, lambda e: e.get("type") == "acquired" and e.get("offer") == B, "the add in us-east-1b")
r2.wait_since(m, lambda e: e.get("type") == "state" and e.get("server") == acq["server"] and
              e.get("state") == "failed", acq["server"] + " failed: its launch's answers all lost")
lost = r2.wait_since(m, lambda e: e.get("type") == "error" and e.get("server") == acq["server"] and
                     "answers were lost" in e.get("reason", ""), "the lost launch's instance found")
made = [i for i in control("/_control/state")["instances"] if i["id"] == lost.get("instance")]
if len(made) != 1 or made[0]["tags"].get("Name", "").rsplit("-", 1)[-1] != acq["server"]:
    fail("the lost launch's instance: journal %s, fake %s" % (lost, made))
deadline = time.time() + 30 * SCALE
while lost["instance"] in live():
    if time.time() > deadline:
        fail("the lost launch's instance %s still runs" % lost["instance"])
    time.sleep(0.2)
ok("a launch whose answers were all lost: %s failed, its instance %s found by name and terminated mid-run"
   % (acq["server"], lost["instance"]))
r2.command("quit")
r2.finish()
deadline = time.time() + 30 * SCALE
while live():
    if time.time() > deadline:
        fail("instances left after the resumed run quit: %s; its last events: %s" % (live(), [
            e for e in r2.events if e.get("type") in ("error", "state", "released", "done") or
            (e.get("type") == "cloud_call" and "Terminate" in e["call"])][-12:]))
    time.sleep(0.2)
ok("nothing left at the fake after the resumed run quit")

# provider.orphans "keep": journaled, left alone.
j["provider"]["orphans"] = "keep"
r3 = Run(j)
r3.wait(lambda e: e.get("type") == "generation" and e.get("world_size") == 2, "a generation of 2 (keep)")
kept = live()
r3.kill(signal.SIGKILL)
# The resumed run launches its own two instances; one RunInstances is
# held 3 s at the fake before EC2 makes the instance, and the run quits
# while it is held: the close cuts off its answer, and must still find
# that instance (by its Name, once EC2 has made it) and terminate it.
control("/_control/slow", {"seconds": 3, "count": 1, "action": "RunInstances"})
n_log = len(control("/_control/log")["requests"])
r4 = Run(None, resume=r3.run_dir)
seen = set()
while len(seen) < 2:
    e = r4.wait(lambda e: e.get("type") == "orphan" and e["instance"] not in seen, "orphans (keep)")
    if e["action"] != "keep":
        fail("orphans \"keep\" but %s" % e)
    seen.add(e["instance"])
def held():
    return [q for q in control("/_control/log")["requests"][n_log:] if q["action"] == "RunInstances"
            and q["status"] is None]
deadline = time.time() + 30 * SCALE
while not held():
    if time.time() > deadline:
        fail("no RunInstances of the resumed run reached the fake")
    time.sleep(0.05)
r4.command("quit")
r4.finish()
# Until the held RunInstances has made its instance and answered.
while held():
    time.sleep(0.1)
time.sleep(0.5)
# The resumed run has ended (its own instances terminated at close, and
# any other of the run's tag): the kept ones are still there, and only
# they.
if set(live()) != set(kept):
    fail("orphans \"keep\": live after the resumed run quit %s, expected exactly the kept %s; its last events: %s"
         % (live(), kept, [e for e in r4.events if e.get("type") in ("error", "released", "left") or
                           (e.get("type") == "cloud_call" and "Instances" in e["call"])][-12:]))
ok("with orphans \"keep\" both were journaled and left running; the instance of a launch cut off by the "
   "quit was found by its name and terminated")

# --orphans adopt: a third controller of the same run finds the kept
# instances and its servers take them over, launching nothing.
made = len(control("/_control/state")["instances"])
r5 = Run(None, resume=r3.run_dir, extra=["--orphans", "adopt"])
adopted = {}
while len(adopted) < 2:
    e = r5.wait(lambda e: e.get("type") == "orphan" and e["instance"] not in adopted, "orphans (adopt)")
    adopted[e["instance"]] = e
if sorted(adopted) != kept or any(e["action"] != "adopt" or not e.get("server") for e in adopted.values()):
    fail("orphans \"adopt\": %s; expected %s adopted by servers" % (list(adopted.values()), kept))
g = r5.wait(lambda e: e.get("type") == "generation" and e.get("world_size") == 2, "a generation of 2 (adopt)")
servers = sorted(e["server"] for e in adopted.values())
if sorted(m["server"] for m in g["members"]) != servers:
    fail("the generation of 2 is %s; the adopting servers are %s" % (g["members"], servers))
if len(control("/_control/state")["instances"]) != made or live() != kept:
    fail("adopting launched instances: %d at the fake (before: %d), live %s" %
         (len(control("/_control/state")["instances"]), made, live()))
r5.command("quit")
r5.finish()
deadline = time.time() + 30 * SCALE
while live():
    if time.time() > deadline:
        fail("instances left after the adopting run quit: %s" % live())
    time.sleep(0.2)
bill = {b["id"]: b for b in control("/_control/billing")["instances"]}
for n, e in adopted.items():
    b = r5.wait_since(0, lambda x: x.get("type") == "billed" and x.get("server") == e["server"], "billed " + n)
    if not (0 < b["run_s"] < bill[n]["run_seconds"]) or "its adoption" not in b["source"]:
        fail("%s billed %s; the fake ran it %.2f s" % (n, b, bill[n]["run_seconds"]))
ok("orphans \"adopt\": %s took over %s (a generation of 2, nothing launched), terminated them at the end "
   "and billed each from its adoption" % (", ".join(servers), ", ".join(kept)))
PY
