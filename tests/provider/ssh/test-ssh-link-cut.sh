#!/bin/sh
# Hosts over ssh whose link dies or whose worker freezes: three
# network namespaces with a real sshd each (tests/netns/lib.sh), the workers
# started on them by the ssh provider.  Cutting one host's link mid-training
# (its bridge port down) must not hang the others: the survivors form a
# generation of 2 and train on within 5 s; the host is given up and cooled
# down; once the link is back it is journaled host_back and acquired again,
# its new worker joining with the group's parameters (checksums equal on
# every rank), the old one never training on stale parameters.  The
# victim's server_exit (its session ended after its worker was dropped)
# does not say that the worker trains on.  A worker stopped with
# SIGSTOP on its host is removed within 10 s; after SIGCONT the same holds.
# A host whose sshd dies with the session fails, and its worker, which ran
# on in its own session, is stopped rather than left training.
. "${top_srcdir:=$(cd "$(dirname "$0")/../../.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/netns/lib.sh"

netns_setup 3
netns_hosts_file

NETNS_PY_SWITCH="$NETNS_SWITCH" NETNS_PREFIX="$NETNS_PREFIX" python3 - <<'PY'
import sys, os, signal, subprocess, time, atexit
sys.path.insert(0, os.path.join(os.environ.get("top_srcdir", "."), "tests"))
from elastic import *
d = os.environ["NETNS_DIR"]
switch = os.environ["NETNS_PY_SWITCH"]
stopped = []
def cont():
    for pid in stopped:
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
atexit.register(cont)

def link(i, state):
    subprocess.run(["ip", "-n", switch, "link", "set", "h%d" % i, state], check=True)

j = job(model="mlp", epochs=2000, checkpoint_every=0, log_every=1, comm_timeout=2, workers=0,
        cluster=["ssh/h1", "ssh/h2", "ssh/h3"])
j["provider"] = {"name": "ssh", "hosts": d + "/hosts", "known_hosts": d + "/known_hosts",
                 "connect_timeout": 3, "cooldown_s": 5}
# Direct links (--advertise): the worker's own connection crosses the cut
# link and its ssh session ends later, on its own, so server_exit's note
# about the dropped worker is reached.  The links through the ssh session
# (the default) are cut in tests/provider/ssh/test-ssh-forward.sh.
import socket
probe = socket.socket()
probe.bind((os.environ["NETNS_BRIDGE_ADDR"], 0))
addr = "%s:%d" % probe.getsockname()
probe.close()
r = Run(j, extra=("--listen", addr, "--advertise", addr), timeout=300)
offer = {}
def host_of(server):
    if server not in offer:
        offer.update({e["server"]: e["offer"] for e in r.events if e.get("type") == "acquired"})
    return int(offer[server][-1])

def back_or_refused(victim, what, since):
    """After the fault ends: the victim joins a generation whose checksums
    are equal on every rank, or its server is given up; never both."""
    e = r.wait_since(since, lambda e: (e.get("type") == "generation" and
                                       victim in [m["server"] for m in e.get("members", [])]) or
                     (e.get("type") == "state" and e.get("server") == victim and
                      e.get("state") in ("failed", "released")), "%s back or given up" % victim, timeout=90)
    if e["type"] == "state":
        later = [g for g in r.events[since:] if g.get("type") == "generation" and
                 victim in [m["server"] for m in g.get("members", [])]]
        if later:
            fail("%s was given up (%s) yet is in generation %d" % (victim, e["state"], later[0]["generation"]))
        ex = [x for x in r.events[since:] if x.get("type") in ("server_exit", "worker_lost", "host_unreachable")
              and x.get("server", victim) == victim]
        return "refused (server %s; %s)" % (e["state"], ", ".join(
            "%s %s" % (x["type"], x.get("exit_status", x.get("reason", ""))) for x in ex))
    cs = r.wait(lambda x: x.get("type") == "checksum" and x["generation"] == e["generation"],
                "checksums of generation %d" % e["generation"])
    if len(cs["checksums"]) != e["world_size"] or victim not in cs["checksums"] or \
       len(set(cs["checksums"].values())) != 1:
        fail("checksums differ after %s came back (%s): %s" % (victim, what, cs["checksums"]))
    return "rejoined generation %d, checksums equal (%s)" % (e["generation"], list(cs["checksums"].values())[0])

g = r.wait(lambda e: e.get("type") == "generation" and e.get("world_size") == 3, "a generation of 3")
s = r.wait(lambda e: e.get("type") == "step" and e["world_size"] == 3 and e["step"] >= g["step"] + 20,
           "20 steps of 3")

# 1. Cut a link mid-training: rank 1's host (rank 0 streams the state).
gen = [e for e in r.events if e.get("type") == "generation" and e["generation"] == s["generation"]][-1]
victim = [m["server"] for m in gen["members"] if m["rank"] == 1][0]
hi = host_of(victim)
mark = r.mark()
mark0 = mark
link(hi, "down")
t_cut = time.time()
s2 = r.wait(lambda e: e.get("type") == "step" and e["world_size"] == 2, "a step of the 2 others", timeout=60)
took = s2["time"] - t_cut
if took > 5 * SCALE:
    fail("the survivors trained again %.2f s after the cut (at most 5 s)" % took)
if victim in s2.get("members", []) or any(victim in [m["server"] for m in e["members"]] for e in
        r.events[mark:] if e.get("type") == "generation"):
    fail("a generation after the cut still has %s" % victim)
ok("h%d's link cut: the other 2 completed step %d %.2f s later" % (hi, s2["step"], took))
# The link stays down: the victim's ssh session ends (keep-alives, about
# 15 s), the probe cannot get in either, the host is cooled down (5 s here).
f = r.wait_since(mark, lambda e: e.get("type") == "host_unreachable" and e["host"] == "h%d" % hi,
                 "host_unreachable for h%d" % hi, timeout=90)
given_up = [e for e in r.events[mark:] if e.get("type") == "state" and e.get("server") == victim and
            e.get("state") in ("failed", "released")]
if not given_up:
    fail("h%d was journaled unreachable but %s was not given up" % (hi, victim))
ok("h%d unreachable %.1f s after the cut: %s %s, cooldown %g s (%s)" %
   (hi, f["time"] - t_cut, victim, given_up[0]["state"], f["cooldown_s"], f.get("ssh", "")))
# The journal agrees with itself: the victim's ssh session ended after the
# controller had dropped its worker, so that server_exit's note must not say
# the worker trains on.
ex = [e for e in r.events[mark0:] if e.get("type") == "server_exit" and e.get("server") == victim]
dropped = [e for e in r.events[mark0:] if e.get("type") in ("worker_unresponsive", "worker_lost")
           and e.get("server") == victim]
for e in ex:
    if dropped and dropped[0]["t"] <= e["t"] and "trains on" in e.get("note", ""):
        fail("%s's server_exit at %.1f s says %r, but its worker was dropped at %.1f s (%s)"
             % (victim, e["t"], e["note"], dropped[0]["t"], dropped[0]["type"]))
ok("%s: dropped (%s) before its session ended; server_exit notes: %s" %
   (victim, dropped[0]["type"] if dropped else "no drop event", [e.get("note", "") for e in ex]))
mark = r.mark()
link(hi, "up")
t_up = time.time()
# The host answers the next probe: journaled host_back, acquired again as a
# new server, whose worker joins with the group's parameters.
b = r.wait_since(mark, lambda e: e.get("type") == "host_back" and e["host"] == "h%d" % hi,
                 "host_back for h%d" % hi, timeout=90)
if b["acquire"] != 1:
    fail("host_back for h%d acquires %s servers, expected 1" % (hi, b["acquire"]))
a = r.wait_since(mark, lambda e: e.get("type") == "acquired" and e.get("offer") == "ssh/h%d" % hi,
                 "h%d acquired again" % hi, timeout=30)
if a["server"] == victim:
    fail("h%d acquired again under the old id %s" % (hi, victim))
g2 = r.wait_since(mark, lambda e: e.get("type") == "generation" and
                  a["server"] in [m["server"] for m in e.get("members", [])],
                  "%s in a generation" % a["server"], timeout=60)
cs = r.wait(lambda x: x.get("type") == "checksum" and x["generation"] == g2["generation"],
            "checksums of generation %d" % g2["generation"])
if len(cs["checksums"]) != g2["world_size"] or len(set(cs["checksums"].values())) != 1:
    fail("checksums differ after h%d came back: %s" % (hi, cs["checksums"]))
back = [e for e in r.events[mark:] if e.get("type") == "generation" and
        victim in [m["server"] for m in e.get("members", [])]]
if back:
    fail("%s, given up, came back into generation %d" % (victim, back[0]["generation"]))
ok("h%d's link back: host_back after %.1f s down, acquired again as %s, in generation %d of %d %.1f s "
   "after the link came up, checksums equal (%s)" % (hi, b["down_s"], a["server"], g2["generation"],
   g2["world_size"], g2["time"] - t_up, list(cs["checksums"].values())[0]))

# 2. Freeze a worker on its host.
s = r.wait(lambda e: e.get("type") == "step" and e["world_size"] >= 2, "a step")
gen = [e for e in r.events if e.get("type") == "generation" and e["generation"] == s["generation"]][-1]
victim = [m["server"] for m in gen["members"] if m["rank"] == gen["world_size"] - 1][0]
pid = [e["pid"] for e in r.events if e.get("type") == "worker_connected" and e["server"] == victim][-1]
mark = r.mark()
stopped.append(pid)
os.kill(pid, signal.SIGSTOP)
t_stop = time.time()
u = r.wait(lambda e: e.get("type") in ("worker_unresponsive", "worker_lost") and e.get("server") == victim,
           "%s removed" % victim, timeout=60)
s3 = r.wait(lambda e: e.get("type") == "step" and e["world_size"] == gen["world_size"] - 1,
            "a step without %s" % victim, timeout=60)
if u["time"] - t_stop > 10 * SCALE:
    fail("%s (SIGSTOP on h%d) removed %.2f s after the stop (at most 10 s)" % (victim, host_of(victim), u["time"] - t_stop))
ok("SIGSTOP %s on h%d: %s after %.2f s, training went on at step %d" %
   (victim, host_of(victim), u["type"], u["time"] - t_stop, s3["step"]))
mark = r.mark()
os.kill(pid, signal.SIGCONT)
stopped.remove(pid)
ok("SIGCONT %s: %s" % (victim, back_or_refused(victim, "SIGSTOP", mark)))

# 3. A host whose sshd goes away with the session: the worker's ssh exits
#    255, the probe cannot get in, the server fails, and its worker (which
#    runs on, in a session of its own) is stopped by the controller rather
#    than left training unbilled; it may not come back as that server.
s = r.wait(lambda e: e.get("type") == "step", "a step")
gen = [e for e in r.events if e.get("type") == "generation" and e["generation"] == s["generation"]][-1]
victim = [m["server"] for m in gen["members"] if m["rank"] == gen["world_size"] - 1][0]
hi = host_of(victim)
ns = "%s-%d" % (os.environ["NETNS_PREFIX"], hi)
wpid = [e["pid"] for e in r.events if e.get("type") == "worker_connected" and e["server"] == victim][-1]
mark = r.mark()
for p in subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split():
    try:
        if open("/proc/%s/comm" % p).read().strip() == "sshd":
            os.kill(int(p), signal.SIGKILL)
    except (OSError, ValueError):
        pass
f = r.wait(lambda e: e.get("type") == "state" and e.get("server") == victim and e.get("state") == "failed",
           "%s failed" % victim, timeout=60)
u = r.wait_since(mark, lambda e: e.get("type") == "host_unreachable" and e["host"] == "h%d" % hi,
                 "host_unreachable for h%d" % hi, timeout=60)
r.wait_since(mark, lambda e: e.get("type") == "generation" and
             victim not in [m["server"] for m in e.get("members", [])], "a generation without %s" % victim, timeout=60)
deadline = time.time() + 30 * SCALE
while time.time() < deadline:
    try:
        os.kill(wpid, 0)
    except ProcessLookupError:
        break
    time.sleep(0.2)
else:
    fail("%s's worker (pid %d on h%d) still runs %.0f s after its server failed" % (victim, wpid, hi, 30 * SCALE))
r.wait(lambda e: e.get("type") == "step" and e["step"] >= s["step"] + 10, "10 more steps")
back = [e for e in r.events[mark:] if e.get("type") == "generation" and
        victim in [m["server"] for m in e.get("members", [])]]
if back:
    fail("%s's worker came back into generation %d after its server failed" % (victim, back[0]["generation"]))
ok("h%d's sshd gone: %s failed, host_unreachable (%s), its worker stopped, training went on" %
   (hi, victim, u.get("ssh", "")))
r.command("quit")
r.wait_type("checkpoint")
if r.finish() != 1:
    fail("quit before the end did not exit 1")
PY
