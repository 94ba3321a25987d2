#!/bin/sh
# A worker's ssh session ends while the host stays up, and the worker
# keeps running: two hosts over the ssh
# provider; the sshd processes serving h2's sessions are killed (its
# listening sshd stays).  The local ssh exits with its own 255, the worker
# (in a session of its own on the host) trains on: no failed server, the
# same worker process in later generations with equal checksums.  A drop
# of that server then still reaches the worker on its host (a new ssh
# session, by its pid file): it leaves and the server is released.
# A local worker (`add 1`) is refused: it could not reach the hosts.
# That run gives --advertise (the workers' own, direct, links).  Without it
# (the default) the session carried the worker's controller link (ssh's
# remote forward), so the same kill is a lost link: the server fails, the
# worker on h2 is stopped, and h2 is acquired again and rejoins.
. "${top_srcdir:=$(cd "$(dirname "$0")/../../.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/netns/lib.sh"

netns_setup 2
netns_hosts_file

NETNS_PY_PREFIX="$NETNS_PREFIX" python3 - <<'PY'
import sys, os, json, signal, subprocess, time
sys.path.insert(0, os.path.join(os.environ.get("top_srcdir", "."), "tests"))
from elastic import *
d = os.environ["NETNS_DIR"]

def sessions_of(i):
    """The sshd processes of host i's sessions: every sshd in its namespace
    but the listener (its pid file)."""
    listener = int(open(os.path.join(d, "h%d" % i, "sshd.pid")).read())
    found = []
    for p in subprocess.run(["ip", "netns", "pids", "%s-%d" % (os.environ["NETNS_PY_PREFIX"], i)],
                            capture_output=True, text=True).stdout.split():
        try:
            if int(p) != listener and open("/proc/%s/comm" % p).read().strip() == "sshd":
                found.append(int(p))
        except (OSError, ValueError):
            pass
    return found

def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False

j = job(model="mlp", epochs=100, checkpoint_every=0, log_every=5, comm_timeout=2, workers=0,
        cluster=["ssh/h1", "ssh/h2"])
j["provider"] = {"name": "ssh", "hosts": d + "/hosts", "known_hosts": d + "/known_hosts"}
# A free port on the bed's address, for --listen and --advertise alike.
import socket
probe = socket.socket()
probe.bind((os.environ["NETNS_BRIDGE_ADDR"], 0))
addr = "%s:%d" % probe.getsockname()
probe.close()
r = Run(j, extra=("--listen", addr, "--advertise", addr), timeout=300)
g = r.wait(lambda e: e.get("type") == "generation" and e.get("world_size") == 2, "a generation of 2")
r.wait(lambda e: e.get("type") == "step" and e["world_size"] == 2 and e["step"] >= g["step"] + 10, "10 steps of 2")
victim = [e["server"] for e in r.events if e.get("type") == "acquired" and e["offer"] == "ssh/h2"][0]
wpid = [e["pid"] for e in r.events if e.get("type") == "worker_connected" and e["server"] == victim][-1]

sessions = sessions_of(2)
if not sessions:
    fail("no sshd session process for %s on h2" % victim)
mark = r.mark()
for p in sessions:
    try:
        os.kill(p, signal.SIGKILL)
    except ProcessLookupError:
        pass
t_kill = time.time()
ex = r.wait_since(mark, lambda e: e.get("type") == "server_exit" and e["server"] == victim,
                  "%s's server_exit" % victim, timeout=60)
if ex.get("exit_status") != 255 or "trains on" not in ex.get("note", ""):
    fail("server_exit %s; expected ssh's 255 and a note that the worker trains on" % ex)
# It trains on: 20 more steps of 2 with it, checksums equal, never failed.
s = r.wait(lambda e: e.get("type") == "step" and e["world_size"] == 2, "a step of 2 after the session ended")
s2 = r.wait(lambda e: e.get("type") == "step" and e["world_size"] == 2 and e["step"] >= s["step"] + 20,
            "20 more steps of 2", timeout=60)
cs = r.wait(lambda e: e.get("type") == "checksum" and victim in e.get("checksums", {}), "checksums with %s" % victim,
            timeout=60)
if len(set(cs["checksums"].values())) != 1:
    fail("checksums differ after %s's session ended: %s" % (victim, cs["checksums"]))
bad = [e for e in r.events[mark:] if e.get("server") == victim and
       (e.get("type") in ("worker_lost", "host_unreachable") or e.get("state") in ("failed", "released"))]
if bad:
    fail("%s was given up after its session ended: %s" % (victim, bad[0]))
if not alive(wpid):
    fail("%s's worker (pid %d) is gone although it trains" % (victim, wpid))
ok("h2's sessions killed (%d sshd): server_exit 255 (%s); %s's worker (pid %d) trained on to step %d, "
   "checksums equal (%s)" % (len(sessions), ex["note"], victim, wpid, s2["step"], list(cs["checksums"].values())[0]))

# drop still reaches it, through a new session.
mark = r.mark()
t_drop = time.time()
r.command("drop " + victim)
rel = r.wait_since(mark, lambda e: e.get("type") == "state" and e.get("server") == victim and
                   e.get("state") in ("released", "failed"), "%s released" % victim, timeout=60)
if rel["state"] != "released":
    fail("drop %s: the server ended %s, not released" % (victim, rel["state"]))
deadline = time.time() + 20 * SCALE
while alive(wpid) and time.time() < deadline:
    time.sleep(0.2)
if alive(wpid):
    fail("drop %s: its worker (pid %d) still runs on h2" % (victim, wpid))
r.wait(lambda e: e.get("type") == "step" and e["world_size"] == 1, "a step of 1 after the drop")
ok("drop %s: released %.1f s later, its worker gone from h2" % (victim, rel["time"] - t_drop))
# A local worker cannot join the hosts (its collectives listen on
# loopback): `add 1` is refused with the reason, and starts nothing.
mark = r.mark()
r.command("add 1")
ce = r.wait_since(mark, lambda e: e.get("type") == "command" and e.get("command") == "add 1", "the add 1 command")
want = "add local: a local worker cannot train with ssh's hosts (its collectives listen on loopback"
if ce.get("ok") or not ce.get("error", "").startswith(want):
    fail("add 1 in an ssh run: %s; expected refused with %r" % (ce, want))
if [e for e in r.events[mark:] if e.get("type") == "acquired"]:
    fail("the refused add 1 acquired a server")
ok("add 1 refused: %s" % ce["error"])
r.command("quit")
r.wait(lambda e: e.get("type") == "checkpoint" and e.get("reason") == "final", "the final checkpoint")
rc = r.finish()
if rc != 1:
    fail("quit before the end exited %s, not 1; stderr: %s; last events: %s" %
         (rc, r.stderr_text[-2000:], json.dumps(r.events[-3:])))

# Without --advertise: the link went through the killed session.
r = Run(j, extra=("--listen", os.environ["NETNS_BRIDGE_ADDR"] + ":0"), timeout=300)
g = r.wait(lambda e: e.get("type") == "generation" and e.get("world_size") == 2, "a generation of 2 (ssh link)")
r.wait(lambda e: e.get("type") == "step" and e["world_size"] == 2 and e["step"] >= g["step"] + 10, "10 steps of 2")
victim = [e["server"] for e in r.events if e.get("type") == "acquired" and e["offer"] == "ssh/h2"][0]
wpid = [e["pid"] for e in r.events if e.get("type") == "worker_connected" and e["server"] == victim][-1]
mark = r.mark()
for p in sessions_of(2):
    try:
        os.kill(p, signal.SIGKILL)
    except ProcessLookupError:
        pass
ex = r.wait_since(mark, lambda e: e.get("type") == "server_exit" and e["server"] == victim,
                  "%s's server_exit" % victim, timeout=60)
f = r.wait_since(mark, lambda e: e.get("type") == "state" and e.get("server") == victim and e.get("state") == "failed",
                 "%s failed" % victim, timeout=60)
deadline = time.time() + 20 * SCALE
while alive(wpid) and time.time() < deadline:
    time.sleep(0.2)
if alive(wpid):
    fail("%s's worker (pid %d) still runs on h2 after the session that carried its link ended" % (victim, wpid))
a = r.wait_since(mark, lambda e: e.get("type") == "acquired" and e.get("offer") == "ssh/h2", "h2 acquired again",
                 timeout=90)
g2 = r.wait_since(mark, lambda e: e.get("type") == "generation" and e.get("world_size") == 2 and
                  a["server"] in [m["server"] for m in e.get("members", [])], "%s in a generation of 2" % a["server"],
                  timeout=90)
if ex.get("exit_status") != 255 or "trains on" in ex.get("note", ""):
    fail("server_exit %s; expected ssh's 255 and no note that the worker trains on" % ex)
ok("ssh link: h2's sessions killed: server_exit 255 (%s); %s failed, its worker gone; h2 acquired again as %s, "
   "in generation %d of 2" % (ex.get("note"), victim, a["server"], g2["generation"]))
r.command("quit")
r.wait(lambda e: e.get("type") == "checkpoint" and e.get("reason") == "final", "the final checkpoint")
if r.finish() != 1:
    fail("quit before the end (ssh link) did not exit 1")
PY
