#!/bin/sh
# Workers whose hosts cannot reach the controller: their links come through
# the ssh provider's own connections (a remote forward to a Unix socket on
# each host), the default when spotdeck is not given --advertise.  Three
# network namespaces with a real sshd each (tests/netns/lib.sh); an nftables
# table of this test's own, in the root namespace, drops every TCP SYN that
# arrives on the bed's interface, so no host can open a connection to the
# controller's machine (checked first: a host's connect times out).  The
# controller listens on the bed's address, where hosts would dial it.  Three
# hosts train together; each worker was told --connect unix:/tmp/...sock;
# one host's link is cut (the other two train on within 5 s), it is journaled
# unreachable, and after the link is back it is acquired again and rejoins
# with equal checksums; quit ends the run, nothing is left on the hosts and
# no forwarded socket file stays.  Meanwhile a packet socket on every port of
# the bridge (tests/netns/sniff.py) sees ssh and the hosts' collectives, but
# no SYN from a host to the controller's machine, no other traffic between
# them, and neither the worker protocol's JSON nor the run's token in any
# payload.  Last, a host whose sshd refuses forwarding (DisableForwarding)
# fails the run's start with ssh's own words naming the forward's socket.
# SKIPs (77) where the bed or an nftables table cannot be made.
. "${top_srcdir:=$(cd "$(dirname "$0")/../../.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/netns/lib.sh"

netns_setup 3
netns_hosts_file
PATH=$PATH:/usr/sbin:/sbin
command -v nft >/dev/null 2>&1 || netns__skip "nft not found (Debian package nftables)"
NFT_TABLE=sdfwd$$
# Only frames that arrive on the bed's own veth, in a table of our own that
# the trap deletes: nothing else on the machine is filtered.
nft -f - <<EOF || netns__skip "cannot add an nftables table in the root namespace"
table inet $NFT_TABLE {
	chain input {
		type filter hook input priority -10; policy accept;
		iifname "$NETNS_ROOT_IF" tcp flags & (syn | ack) == syn counter drop
	}
}
EOF
trap 'nft delete table inet "$NFT_TABLE" 2>/dev/null; netns_teardown' EXIT

# The rule holds: a host dialling the controller's machine gets no answer
# at all (without the rule, a closed port answers at once with a reset).
said=$(netns_exec 1 python3 -c '
import socket, sys
try:
    socket.create_connection((sys.argv[1], 9), timeout=2)
    print("connected")
except socket.timeout:
    print("timeout")
except OSError as e:
    print("error: %s" % e)
' "$NETNS_BRIDGE_ADDR")
[ "$said" = timeout ] || fail "host 1 dialling $NETNS_BRIDGE_ADDR:9 through the drop rule: $said, expected a timeout"
# What the probe's SYNs left on the rule's counter: the run must add none.
NFT_BASE=$(nft list table inet "$NFT_TABLE" | sed -n 's/.*counter packets \([0-9]*\).*/\1/p')
[ "${NFT_BASE:-0}" -gt 0 ] || fail "the drop rule counted no packet of host 1's probe"
ok "host 1 cannot connect to $NETNS_BRIDGE_ADDR (its SYN is dropped: $said; the rule counted $NFT_BASE)"

NETNS_PY_SWITCH="$NETNS_SWITCH" NETNS_PY_PREFIX="$NETNS_PREFIX" NFT_TABLE="$NFT_TABLE" NFT_BASE="$NFT_BASE" python3 - <<'PY'
import sys, os, json, re, signal, subprocess, time, glob
top = os.environ.get("top_srcdir", ".")
sys.path.insert(0, os.path.join(top, "tests"))
from elastic import *
d = os.environ["NETNS_DIR"]
switch, prefix = os.environ["NETNS_PY_SWITCH"], os.environ["NETNS_PY_PREFIX"]
bridge = os.environ["NETNS_BRIDGE_ADDR"]
run_dir = os.path.join(d, "run")
cap = os.path.join(d, "capture.json")
sniffer = subprocess.Popen(["ip", "netns", "exec", switch, sys.executable, os.path.join(top, "tests/netns/sniff.py"),
                            bridge, cap, os.path.join(run_dir, "token")])
def stop_sniffer():
    if sniffer.poll() is None:
        sniffer.send_signal(signal.SIGTERM)
        sniffer.wait(timeout=30)
import atexit
atexit.register(stop_sniffer)
t = time.time() + 20
while not os.path.exists(cap + ".ready"):
    if sniffer.poll() is not None or time.time() > t:
        fail("the packet capture in %s did not start (exit %s)" % (switch, sniffer.poll()))
    time.sleep(0.05)

def link(i, state):
    subprocess.run(["ip", "-n", switch, "link", "set", "h%d" % i, state], check=True)

j = job(model="mlp", epochs=2000, checkpoint_every=0, log_every=1, comm_timeout=2, workers=0,
        cluster=["ssh/h1", "ssh/h2", "ssh/h3"])
j["provider"] = {"name": "ssh", "hosts": d + "/hosts", "known_hosts": d + "/known_hosts",
                 "connect_timeout": 3, "cooldown_s": 5}
r = Run(j, run_dir=run_dir, extra=("--listen", bridge + ":0"), timeout=300)
g = r.wait(lambda e: e.get("type") == "generation" and e.get("world_size") == 3, "a generation of 3", timeout=90)
s = r.wait(lambda e: e.get("type") == "step" and e["world_size"] == 3 and e["step"] >= g["step"] + 20,
           "20 steps of 3")
st = [e for e in r.events if e.get("type") == "run_start"][0]
if st.get("controller_link") != "ssh":
    fail("run_start says controller_link %r, expected \"ssh\" (no --advertise given)" % st.get("controller_link"))
offer = {e["server"]: e["offer"] for e in r.events if e.get("type") == "acquired"}
socks = []
for e in r.events:
    if e.get("type") != "worker_connected":
        continue
    argv = open("/proc/%d/cmdline" % e["pid"], "rb").read().decode().split("\0")
    c = argv[argv.index("--connect") + 1]
    if not re.fullmatch(r"unix:/tmp/spotdeck-[0-9a-f]{16}-%s-[0-9]+\.sock" % e["server"], c):
        fail("%s's worker was told --connect %s, expected unix:/tmp/spotdeck-TAG-%s-N.sock" % (e["server"], c, e["server"]))
    socks.append(c[5:])
    if e["peer"].rsplit(":", 1)[0] != bridge:
        fail("%s connected from %s, not through ssh from %s" % (e["server"], e["peer"], bridge))
ok("3 hosts train at step %d, each worker linked through its ssh forward (%s)" % (s["step"], socks[0]))

# A link cut: the forward dies with the host's ssh connection, which is the
# worker's lost link; the others go on, the host comes back later.
gen = [e for e in r.events if e.get("type") == "generation" and e["generation"] == s["generation"]][-1]
victim = [m["server"] for m in gen["members"] if m["rank"] == 1][0]
hi = int(offer[victim][-1])
mark = r.mark()
link(hi, "down")
t_cut = time.time()
s2 = r.wait(lambda e: e.get("type") == "step" and e["world_size"] == 2, "a step of the 2 others", timeout=60)
if s2["time"] - t_cut > 5 * SCALE:
    fail("the survivors trained again %.2f s after the cut (at most 5 s)" % (s2["time"] - t_cut))
f = r.wait_since(mark, lambda e: e.get("type") == "host_unreachable" and e["host"] == "h%d" % hi,
                 "host_unreachable for h%d" % hi, timeout=90)
ok("h%d's link cut: the others trained on %.2f s later; h%d unreachable after %.1f s" %
   (hi, s2["time"] - t_cut, hi, f["time"] - t_cut))
mark = r.mark()
link(hi, "up")
a = r.wait_since(mark, lambda e: e.get("type") == "acquired" and e.get("offer") == "ssh/h%d" % hi,
                 "h%d acquired again" % hi, timeout=90)
g2 = r.wait_since(mark, lambda e: e.get("type") == "generation" and e.get("world_size") == 3 and
                  a["server"] in [m["server"] for m in e.get("members", [])], "%s in a generation of 3" % a["server"],
                  timeout=90)
cs = r.wait(lambda x: x.get("type") == "checksum" and x["generation"] == g2["generation"],
            "checksums of generation %d" % g2["generation"])
if len(cs["checksums"]) != 3 or len(set(cs["checksums"].values())) != 1:
    fail("checksums differ after h%d came back: %s" % (hi, cs["checksums"]))
pid = [e["pid"] for e in r.events if e.get("type") == "worker_connected" and e["server"] == a["server"]][-1]
argv = open("/proc/%d/cmdline" % pid, "rb").read().decode().split("\0")
socks.append(argv[argv.index("--connect") + 1][5:])
ok("h%d back: %s rejoined generation %d of 3 through a new forward, checksums equal" %
   (hi, a["server"], g2["generation"]))
r.wait(lambda e: e.get("type") == "step" and e["step"] >= g2["step"] + 10, "10 steps after the rejoin")

r.command("quit")
r.wait_type("checkpoint")
rc = r.finish()
if rc != 1:
    fail("quit before the end: exit status %s, expected 1" % rc)
left = []
for i in (1, 2, 3):
    for p in subprocess.run(["ip", "netns", "pids", "%s-%d" % (prefix, i)], capture_output=True,
                            text=True).stdout.split():
        try:
            comm = open("/proc/%s/comm" % p).read().strip()
        except OSError:
            continue
        if comm != "sshd":
            left.append("h%d: %s (%s)" % (i, p, comm))
if left:
    fail("processes left on the hosts after quit: %s" % left)
stale = [p for p in socks if os.path.exists(p)]
if stale:
    fail("forwarded sockets left after quit: %s" % stale)
ok("quit: exit status 1 (before the end), nothing left on the hosts, %d forwarded sockets removed" % len(socks))

stop_sniffer()
c = json.load(open(cap))
nft = subprocess.run(["nft", "list", "table", "inet", os.environ["NFT_TABLE"]], capture_output=True, text=True).stdout
m = re.search(r"counter packets (\d+)", nft)
dropped = (int(m.group(1)) if m else -1) - int(os.environ["NFT_BASE"])
if c["ssh"] == 0 or c["host_to_host"] == 0 or not c["token_seen"] or c["drops"] != 0:
    fail("the capture saw too little to judge: %s (token read: %s)" % (c, c["token_seen"]))
if c["to_root_syn"] or c["root_other"] or c["found"] or dropped != 0:
    fail("worker traffic in the clear on the bridge: %d SYNs from hosts to %s, %d other frames between them (%s), "
         "payloads holding %s; the drop rule counted %d during the run" % (c["to_root_syn"], bridge, c["root_other"],
         c["root_other_ports"], c["found"], dropped))
ok("on the bridge: %d frames (%d dropped by the kernel), %d ssh, %d host to host (collectives); no SYN from a host "
   "to %s, nothing but ssh between them, no protocol JSON or token in any payload; the drop rule counted %d "
   "during the run" %
   (c["frames"], c["drops"], c["ssh"], c["host_to_host"], bridge, dropped))
PY

# A host whose sshd allows no forwarding: the launch fails at once, and the
# run's one error line is ssh's, naming the socket it could not make.
echo "DisableForwarding yes" >>"$NETNS_DIR/h3/sshd_config"
old=$(cat "$NETNS_DIR/h3/sshd.pid")
kill "$old"
i=0
while [ -e "/proc/$old" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
rm -f "$NETNS_DIR/h3/sshd.pid"
netns_exec 3 /usr/sbin/sshd -f "$NETNS_DIR/h3/sshd_config" -E "$NETNS_DIR/h3/sshd.log" || fail "sshd on h3 did not start again"
i=0
until netns_ssh -o ConnectTimeout=2 "$(netns_addr 3)" true 2>/dev/null; do
	i=$((i + 1)); [ $i -lt 50 ] || fail "sshd on h3 does not answer after its restart"; sleep 0.1
done
printf '{"model":"mlp","epochs":1,"workers":0,"provider":{"name":"ssh","hosts":"%s","known_hosts":"%s"},"cluster":["ssh/h3"]}' \
	"$NETNS_DIR/hosts" "$NETNS_DIR/known_hosts" >"$NETNS_DIR/noforward.json"
"$top_builddir/spotdeck" --headless --job "$NETNS_DIR/noforward.json" --run-dir "$NETNS_DIR/run-noforward" \
	</dev/null >"$NETNS_DIR/noforward.out" 2>"$NETNS_DIR/noforward.err"
rc=$?
[ "$rc" -eq 1 ] && grep -q "with status 255: Error: remote port forwarding failed for listen path /tmp/spotdeck-[0-9a-f]*-s1-1\.sock$" \
	"$NETNS_DIR/noforward.err" || { cat "$NETNS_DIR/noforward.err" >&2; fail "a host refusing the forward: exit $rc"; }
ok "a host refusing the forward: $(cat "$NETNS_DIR/noforward.err")"
