#!/bin/sh
# The end of an ssh run keeps spotdeck answering: one host of the bed, and
# a provider.ssh that wraps ssh so that the removal of the run's files on
# the host (the close's second step) takes 4 s, as on a slow host.  After
# quit, while that removal runs, a command on stdin is still read and
# answered (refused: the run has ended); spotdeck exits only once the
# removal ended (the close waits for its ssh, it does not give up on
# them), with status 1 (a quit before the job's end); the run's directory
# is gone from the host and no ssh of the run outlives it.
. "${top_srcdir:=$(cd "$(dirname "$0")/../../.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/netns/lib.sh"

netns_setup 1
netns_hosts_file
cat >"$NETNS_DIR/slow-ssh" <<EOF
#!/bin/sh
case "\$*" in
*"rm -rf"*) date +%s.%N >"$NETNS_DIR/clean-start.tmp"; mv "$NETNS_DIR/clean-start.tmp" "$NETNS_DIR/clean-start"
    sleep 4; date +%s.%N >"$NETNS_DIR/clean-end.tmp"; mv "$NETNS_DIR/clean-end.tmp" "$NETNS_DIR/clean-end" ;;
esac
exec ssh "\$@"
EOF
chmod 755 "$NETNS_DIR/slow-ssh"

NETNS_PY_PREFIX="$NETNS_PREFIX" python3 - <<'PY'
import sys, os, json, time
sys.path.insert(0, os.path.join(os.environ.get("top_srcdir", "."), "tests"))
from elastic import *
d = os.environ["NETNS_DIR"]

def ssh_of_run():
    """Processes whose command line is an ssh of this run (its known_hosts)."""
    mark = "UserKnownHostsFile=%s/known_hosts" % d
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmd = open("/proc/%s/cmdline" % pid, "rb").read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if mark in cmd:
                found.append((pid, cmd.strip()[:200]))
    return found

j = job(model="mlp", epochs=100, checkpoint_every=0, log_every=5, workers=0, cluster=["ssh/h1"])
j["provider"] = {"name": "ssh", "hosts": d + "/hosts", "known_hosts": d + "/known_hosts", "ssh": d + "/slow-ssh"}
r = Run(j, extra=("--listen", os.environ["NETNS_BRIDGE_ADDR"] + ":0"), timeout=300)
g = r.wait(lambda e: e.get("type") == "generation" and e.get("world_size") == 1, "a generation of 1")
r.wait(lambda e: e.get("type") == "step" and e["step"] >= g["step"] + 5, "5 steps on h1")
r.command("quit")
r.wait(lambda e: e.get("type") == "checkpoint" and e.get("reason") == "final", "the final checkpoint")
start = os.path.join(d, "clean-start")
deadline = time.time() + 30 * SCALE
while not os.path.exists(start) and time.time() < deadline:
    time.sleep(0.05)
if not os.path.exists(start):
    fail("the close never ran ssh to remove the run's files on h1")
t_clean = float(open(start).read())
mark = r.mark()
r.command("drop s1")
ce = r.wait_since(mark, lambda e: e.get("type") == "command" and e.get("command") == "drop s1", "drop s1 answered",
                  timeout=10)
t_answer = time.time()
want = "drop: the run has ended; its machines are being given back"
if ce.get("ok") or ce.get("error") != want:
    fail("drop s1 during the close: %s; expected refused with %r" % (ce, want))
if os.path.exists(os.path.join(d, "clean-end")) or t_answer - t_clean > 3.5:
    fail("drop s1 was answered %.2f s after the removal began, not while it ran (4 s)" % (t_answer - t_clean))
ok("drop s1 answered %.2f s into the 4 s removal of the run's files: %s" % (t_answer - t_clean, ce["error"]))
rc = r.finish()
t_exit = time.time()
if rc != 1:
    fail("quit before the end exited %s, not 1; stderr: %s" % (rc, r.stderr_text[-2000:]))
if not os.path.exists(os.path.join(d, "clean-end")) or t_exit - t_clean < 3.9:
    fail("spotdeck exited %.2f s after the removal began, before it ended (4 s)" % (t_exit - t_clean))
tmp = os.path.join(d, "h1", "tmp")
left = [f for f in os.listdir(tmp) if f.startswith("spotdeck-")]
if left:
    fail("h1 keeps %s in its TMPDIR after the run" % left)
time.sleep(0.5)
if ssh_of_run():
    fail("ssh of the run still run after it ended: %s" % ssh_of_run())
ok("spotdeck exited %.2f s after the removal began (status 1); h1's TMPDIR is clean, no ssh of the run is left"
   % (t_exit - t_clean))
PY
