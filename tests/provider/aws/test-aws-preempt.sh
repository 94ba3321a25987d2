#!/bin/sh
# An interrupted EC2 Spot instance is told from a crashed one (the aws
# provider's verdict, against tests/fake-cloud/ec2.py with a real sshd per
# instance).  Three servers train; then, at once:
#   - instance a is interrupted with the IMDS notice its worker hears, and
#     leaves DescribeInstances at its power-off (the provider never sees its
#     stateReason): revoked, settled by the notice;
#   - instance b is interrupted without a notice (its worker's ssh session
#     and connection just die) and stays listed: revoked, settled by its
#     stateReason Server.SpotInstanceTermination, not failed as a dead host;
#   - instance c is interrupted without a notice and leaves DescribeInstances
#     at its power-off: nothing says why, so it is failed (VM_GONE), settled
#     by the timeout, not before provider.preempt_wait_s (8 s here);
#   - on instance d, still running, the worker is killed: failed
#     (WORKER_ENDED) at the next list, without waiting preempt_wait_s.
# The verdicts come before any TerminateInstances of the instance.
. "$(dirname "$0")/../../lib.sh"
tmpdir
. "$top_srcdir/tests/fake-cloud/ec2-vms.sh"
"$PY" - <<'PY'
import sys, os, json, time
sys.path[:0] = [os.path.join(os.environ.get("top_srcdir", "."), d) for d in ("tests", "tests/fake-cloud")]
from elastic import *
from aws_run import T, control, live, provider
from cloud_run import on_vms
import signal

A, B = ("aws/us-east-1%s/t4/spot" % z for z in "ab")
WAIT_S = 8          # provider.preempt_wait_s
NOTICE_S = 3
j = job(workers=0, cluster=[A, A, B, B], notice="aws", min_workers=4, epochs=60)
j["provider"] = provider(preempt_wait_s=WAIT_S)
r = Run(j)
r.wait(lambda e: e.get("type") == "generation" and e.get("world_size") == 4, "a generation of 4 on EC2")
mp = r.mark()
r.command("pause")
r.wait_since(mp, lambda e: e.get("type") == "command" and e.get("ok") is True, "the pause")
servers = sorted(e["server"] for e in r.events if e.get("type") == "acquired")
iid = {i["tags"]["Name"].rsplit("-", 1)[-1]: i["id"] for i in control("/_control/state")["instances"]}
sa, sb, sc, sd = servers
wd = [pid for pid, exe, _ in on_vms({iid[sd]}).get(iid[sd], []) if os.path.basename(exe) == "spotdeck-worker"]
if len(wd) != 1:
    fail("one worker expected on %s's instance, found %s" % (sd, wd))

m = r.mark()
t0 = time.time()
control("/_control/interrupt", {"id": iid[sa], "notice_s": NOTICE_S, "gone_after_s": 0})
control("/_control/interrupt", {"id": iid[sb], "notice_s": NOTICE_S, "notice": False})
control("/_control/interrupt", {"id": iid[sc], "notice_s": NOTICE_S, "notice": False, "gone_after_s": 0})
os.kill(int(wd[0]), signal.SIGKILL)
off = t0 + NOTICE_S   # the power-off, at the earliest


def verdict(s):
    return r.wait_since(m, lambda e: e.get("server") == s and (e.get("type") == "revoked" or
                        (e.get("type") == "error" and e.get("code"))), "the verdict on " + s, timeout=120)


va = verdict(sa)
if va.get("type") != "revoked" or va.get("settled_by") != "notice":
    fail("%s (a notice, gone from DescribeInstances at once): %s; expected revoked, settled by the notice" % (sa, va))
nt = [e for e in r.events if e.get("type") == "notice" and e.get("server") == sa]
if not nt or nt[0].get("source") != "aws":
    fail("no notice from %s's worker (source aws) before its verdict: %s" % (sa, nt))
ok("%s: gone from DescribeInstances at its power-off; its worker's IMDS notice settled it: revoked" % sa)

vb = verdict(sb)
if vb.get("type") != "revoked" or vb.get("settled_by") != "state_reason" or \
   "Server.SpotInstanceTermination" not in vb.get("detail", ""):
    fail("%s (no notice, listed): %s; expected revoked, settled by Server.SpotInstanceTermination" % (sb, vb))
if [e for e in r.events if e.get("type") == "notice" and e.get("server") == sb]:
    fail("%s had a notice; the fake was asked to give none" % sb)
ok("%s: no notice, its ssh session and connection died with it; its stateReason settled it: %s" %
   (sb, vb["detail"]))

vc = verdict(sc)
tv = time.time()
if vc.get("type") != "error" or vc.get("code") != "VM_GONE" or vc.get("settled_by") != "timeout":
    fail("%s (no notice, gone at once): %s; expected an error VM_GONE settled by the timeout" % (sc, vc))
if tv - off < WAIT_S:
    fail("%s judged %.1f s after its power-off; provider.preempt_wait_s is %d" % (sc, tv - off, WAIT_S))
ok("%s: no notice and gone at once: failed (VM_GONE) %.1f s after its power-off, settled by the %d s wait" %
   (sc, tv - off, WAIT_S))

vd = verdict(sd)
if vd.get("type") != "error" or vd.get("code") != "WORKER_ENDED" or "settled_by" in vd:
    fail("%s (its worker killed on a running instance): %s; expected an error WORKER_ENDED" % (sd, vd))
if vd["t"] > vc["t"]:
    fail("%s's worker crash on a running instance was judged only after the %d s wait" % (sd, WAIT_S))
ok("%s: its worker killed on an instance still running: failed (WORKER_ENDED) at the next list, before the "
   "wait ended for %s" % (sd, sc))

# When the fake received each verdict's TerminateInstances, against when
# the verdict was journaled: the journal's "time" (wall clock, the same
# machine's) of the verdict comes first.
deadline = time.time() + 30 * SCALE
while set(iid[s] for s in servers) & set(live()):
    if time.time() > deadline:
        fail("instances left after their verdicts: %s" % sorted(set(iid.values()) & set(live())))
    time.sleep(0.2)
terms = {}
for q in control("/_control/log")["requests"]:
    if q["action"] == "TerminateInstances":
        for i in q.get("instance_ids") or []:
            terms.setdefault(i, q["time"])
if iid[sd] not in terms:
    fail("%s's running instance was never terminated" % sd)
for s, v in ((sa, va), (sb, vb), (sc, vc), (sd, vd)):
    if iid[s] in terms and terms[iid[s]] < v["time"]:
        fail("%s's instance terminated at %.3f, before its verdict (%.3f)" % (s, terms[iid[s]], v["time"]))
ok("no TerminateInstances before its instance's verdict (%d sent); every instance shut down" % len(terms))
r.command("quit")
r.finish()
if [e for e in r.events if e.get("type") == "error" and e.get("server") in (sa, sb)]:
    fail("errors for the interrupted servers: %s" % [e for e in r.events if e.get("type") == "error"
                                                     and e.get("server") in (sa, sb)])
PY
