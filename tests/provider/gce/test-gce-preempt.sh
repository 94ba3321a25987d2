#!/bin/sh
# A preempted GCE VM is told from a crashed one (the gce provider's
# verdict, against tests/fake-cloud/gce.py with a real sshd per VM), even
# though Google does not say when the compute.instances.preempted
# operation appears.  Three servers train; then, at once:
#   - VM a is preempted with a notice its worker hears, and the operation
#     is published only 30 s after the power-off: revoked, settled by the
#     notice, before the operation exists;
#   - VM b is preempted without a notice (the worker never hears it, its
#     ssh session and controller connection just die) and the operation
#     comes 3 s after the power-off, inside provider.preempt_wait_s (8 s
#     here): revoked, settled by the operation, not failed as a dead host;
#   - VM c crashes (TERMINATED, no operation ever): failed (VM_GONE),
#     settled by the timeout, not before preempt_wait_s has passed;
#   - on VM d, still RUNNING, the worker is killed: failed (WORKER_ENDED)
#     at the next list, without waiting preempt_wait_s.
# Each VM is deleted only after its verdict is journaled.
. "$(dirname "$0")/../../lib.sh"
tmpdir
. "$top_srcdir/tests/fake-cloud/gce-vms.sh"
"$PY" - <<'PY'
import sys, os, json, time
sys.path[:0] = [os.path.join(os.environ.get("top_srcdir", "."), d) for d in ("tests", "tests/fake-cloud")]
from elastic import *
from gce_run import T, control, live, provider
from cloud_run import on_vms
import signal

A, B = "gce/us-central1-a/t4/spot", "gce/us-central1-b/t4/spot"
WAIT_S = 8          # provider.preempt_wait_s
NOTICE_S = 3
LATE_A, LATE_B = 30, 3   # the operation after the power-off, seconds
j = job(workers=0, cluster=[A, A, B, B], notice="gce", min_workers=4, epochs=60)
j["provider"] = provider(boot_timeout_s=60, preempt_wait_s=WAIT_S)
r = Run(j)
r.wait(lambda e: e.get("type") == "generation" and e.get("world_size") == 4, "a generation of 4 on GCE VMs")
mp = r.mark()
r.command("pause")
r.wait_since(mp, lambda e: e.get("type") == "command" and e.get("ok") is True, "the pause")
servers = sorted(e["server"] for e in r.events if e.get("type") == "acquired")
vm = {s: [i["name"] for i in control("/_control/state")["instances"] if i["name"].endswith("-" + s)][0]
      for s in servers}
sa, sb, sc, sd = servers
wd = [pid for pid, exe, _ in on_vms({vm[sd]}).get(vm[sd], []) if os.path.basename(exe) == "spotdeck-worker"]
if len(wd) != 1:
    fail("one worker expected on %s's VM, found %s" % (sd, wd))

m = r.mark()
t0 = time.time()
control("/_control/preempt", {"name": vm[sa], "notice_s": NOTICE_S, "op_after_s": LATE_A})
control("/_control/preempt", {"name": vm[sb], "notice_s": NOTICE_S, "op_after_s": LATE_B, "notice": False})
tc = time.time()
control("/_control/crash", {"name": vm[sc]})
os.kill(int(wd[0]), signal.SIGKILL)
off_ab = t0 + NOTICE_S   # a's and b's power-off, at the earliest


def preempted_ops(name):
    return [o for o in control("/_control/state")["operations"]
            if o["operationType"] == "compute.instances.preempted" and o["targetLink"].endswith("/" + name)]


def verdict(s):
    return r.wait_since(m, lambda e: e.get("server") == s and (e.get("type") == "revoked" or
                        (e.get("type") == "error" and e.get("code"))), "the verdict on " + s, timeout=120)


va = verdict(sa)
ops_a = preempted_ops(vm[sa])
if va.get("type") != "revoked" or va.get("settled_by") != "notice":
    fail("%s (a notice, the operation %d s late): %s; expected revoked, settled by the notice" % (sa, LATE_A, va))
if ops_a:
    fail("%s was revoked only once the operation existed (%s): the notice should have settled it" % (sa, ops_a))
nt = [e for e in r.events if e.get("type") == "notice" and e.get("server") == sa]
if not nt or nt[0].get("source") != "gce":
    fail("no notice from %s's worker (source gce) before its verdict: %s" % (sa, nt))
ok("%s: its worker's notice (source %s) settled it: revoked %.1f s after the preemption, the operation "
   "not yet published" % (sa, nt[0]["source"], time.time() - t0))

vb = verdict(sb)
tb = time.time()
if vb.get("type") != "revoked" or vb.get("settled_by") != "operation":
    fail("%s (no notice, the operation %d s late): %s; expected revoked, settled by the operation" %
         (sb, LATE_B, vb))
if [e for e in r.events if e.get("type") == "notice" and e.get("server") == sb]:
    fail("%s had a notice; the fake was asked to give none" % sb)
if tb < off_ab + LATE_B:
    fail("%s revoked %.1f s after its power-off, before the operation (%d s late) could exist" %
         (sb, tb - off_ab, LATE_B))
ok("%s: no notice, its ssh session and connection died with the VM; the operation published %d s after the "
   "power-off settled it (revoked %.1f s after the power-off)" % (sb, LATE_B, tb - off_ab))

vc = verdict(sc)
tv = time.time()
if vc.get("type") != "error" or vc.get("code") != "VM_GONE" or vc.get("settled_by") != "timeout":
    fail("%s (crashed, no operation): %s; expected an error VM_GONE settled by the timeout" % (sc, vc))
if tv - tc < WAIT_S:
    fail("%s judged a crash %.1f s after it; provider.preempt_wait_s is %d" % (sc, tv - tc, WAIT_S))
ok("%s: no notice, no operation: failed (VM_GONE) %.1f s after the crash, settled by the %d s wait: %s" %
   (sc, tv - tc, WAIT_S, vc["error"]))

vd = verdict(sd)
if vd.get("type") != "error" or vd.get("code") != "WORKER_ENDED" or "settled_by" in vd:
    fail("%s (its worker killed on a running VM): %s; expected an error WORKER_ENDED" % (sd, vd))
if vd["t"] > [e for e in r.events if e is vc][0]["t"]:
    fail("%s's worker crash on a running VM was judged only after the %d s wait" % (sd, WAIT_S))
ok("%s: its worker killed on a VM still RUNNING: failed (WORKER_ENDED) at the next list, before the wait "
   "ended for %s" % (sd, sc))

# Each VM deleted after its verdict: the journal has the verdict before the
# delete call, and the fake received no DELETE of it before then.
for s, v in ((sa, va), (sb, vb), (sc, vc), (sd, vd)):
    iv = r.events.index(v)
    dels = [k for k, e in enumerate(r.events) if e.get("type") == "cloud_call" and
            e.get("call") == "gce instances.delete" and e["url"].endswith("/" + vm[s])]
    if any(k < iv for k in dels):
        fail("%s's VM was deleted before its verdict was journaled" % s)
# live() leaves out TERMINATED VMs (a, b, c are, before any delete): wait
# for the fake's log to hold a DELETE of each.


def deletes():
    return {q["path"].rsplit("/", 1)[1]: q["time"] for q in control("/_control/log")["requests"]
            if q["method"] == "DELETE"}


deadline = time.time() + 30 * SCALE
while set(vm.values()) - set(deletes()):
    if time.time() > deadline:
        fail("VMs not deleted after their verdicts: %s" % sorted(set(vm.values()) - set(deletes())))
    time.sleep(0.2)
dl = deletes()
# The journal's "time" is the wall clock of this machine, as the fake's log.
for s, v in ((sa, va), (sb, vb), (sc, vc), (sd, vd)):
    if vm[s] not in dl or dl[vm[s]] < v["time"]:
        fail("%s's VM: DELETE at %s, its verdict journaled at %.3f" % (s, dl.get(vm[s]), v["time"]))
if dl[vm[sb]] < off_ab + LATE_B or dl[vm[sc]] < tc + WAIT_S:
    fail("DELETEs at %s; b's no earlier than its operation (%.1f), c's no earlier than the wait's end (%.1f)" %
         (dl, off_ab + LATE_B, tc + WAIT_S))
ok("every VM deleted only after its verdict was journaled")
r.command("quit")
r.finish()
if [e for e in r.events if e.get("type") == "error" and e.get("server") in (sa, sb)]:
    fail("errors for the preempted servers: %s" % [e for e in r.events if e.get("type") == "error"
                                                   and e.get("server") in (sa, sb)])
PY
