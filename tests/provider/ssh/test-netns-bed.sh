#!/bin/sh
# tests/provider/ssh/test-netns-bed.sh - the multi-host test bed of tests/netns/lib.sh:
# three network namespaces with a real sshd each.  Checks that
# ssh from the root namespace lands in the right namespace with the right
# address, that hosts reach each other and a listener of the root namespace
# on the bed's address (how workers reach a controller), that netns_link
# cuts and restores one host alone, and that teardown leaves nothing behind.
# SKIPs (77) where namespaces cannot be made (not root, an unprivileged
# container, no sshd).
. "${top_srcdir:=$(cd "$(dirname "$0")/../../.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/netns/lib.sh"

netns_setup 3

# The addresses, from the rule (198.18.K.1 for the root namespace,
# 198.18.K.(10+i) for host i), not from the library's own netns_addr.
case $NETNS_BRIDGE_ADDR in
198.1[89].*.1) net=${NETNS_BRIDGE_ADDR%.1} ;;
*) fail "NETNS_BRIDGE_ADDR=$NETNS_BRIDGE_ADDR is not a 198.18.0.0/15 .1 address" ;;
esac
[ "$NETNS_HOSTS" = "$net.11 $net.12 $net.13" ] ||
	fail "NETNS_HOSTS='$NETNS_HOSTS', expected '$net.11 $net.12 $net.13'"
ok "bed $net.0/24: root $NETNS_BRIDGE_ADDR, hosts $NETNS_HOSTS"

netns_of() { readlink "/proc/$1/ns/net"; }

# 1. ssh from the root namespace: each host answers from its own namespace
#    with exactly its address, and routes nowhere but its /24.
i=1
for a in $NETNS_HOSTS; do
	got=$(netns_ssh "$a" ip -4 -o addr show eth0) || fail "ssh $a"
	got=$(echo "$got" | awk '{ print $4 }')
	[ "$got" = "$net.$((10 + i))/24" ] || fail "host $i: eth0 has '$got', expected $net.$((10 + i))/24"
	there=$(netns_ssh "$a" readlink /proc/self/ns/net) || fail "ssh $a readlink"
	here=$(netns_exec "$i" readlink /proc/self/ns/net)
	[ -n "$there" ] && [ "$there" = "$here" ] || fail "ssh $a ran in $there, host $i is $here"
	[ "$there" != "$(netns_of $$)" ] || fail "ssh $a ran in the root namespace"
	routes=$(netns_exec "$i" ip -4 route show)
	[ "$routes" = "$net.0/24 dev eth0 proto kernel scope link src $net.$((10 + i)) " ] ||
		[ "$routes" = "$net.0/24 dev eth0 proto kernel scope link src $net.$((10 + i))" ] ||
		fail "host $i routes: '$routes' (only its /24 expected, no default route)"
	ok "host $i: ssh $a runs in namespace $there, eth0 $got, routes only $net.0/24"
	i=$((i + 1))
done

# 2. Host to host: from host 1, host 2's sshd, which sees host 1's address.
h1=$net.11 h2=$net.12 h3=$net.13
conn=$(netns_exec 1 ssh -F "$NETNS_SSH_CONFIG" "$h2" 'echo $SSH_CONNECTION; readlink /proc/self/ns/net') ||
	fail "ssh from host 1 to $h2"
set -- $conn
[ "$1" = "$h1" ] && [ "$3" = "$h2" ] && [ "$4" = 22 ] ||
	fail "host 2's sshd saw the connection as '$1 $2 $3 $4', expected $h1 -> $h2:22"
[ "$5" = "$(netns_exec 2 readlink /proc/self/ns/net)" ] || fail "ssh from host 1 to $h2 ran in $5"
ok "host 1 -> host 2: sshd saw $1 -> $3:$4"

# 3. A listener in the root namespace on the bed's address: host 1 connects
#    and sends a line; the listener reports the peer and the line.
tmp=$NETNS_DIR/listener
mkdir "$tmp"
python3 - "$NETNS_BRIDGE_ADDR" "$tmp" <<'PY' &
import os, socket, sys
addr, d = sys.argv[1], sys.argv[2]
s = socket.socket()
s.bind((addr, 0))
s.listen(1)
s.settimeout(20)
with open(d + "/port.tmp", "w") as f:
    f.write("%d\n" % s.getsockname()[1])
os.rename(d + "/port.tmp", d + "/port")
c, peer = s.accept()
c.settimeout(20)
data = b""
while not data.endswith(b"\n"):
    chunk = c.recv(100)
    if not chunk:
        break
    data += chunk
with open(d + "/got", "w") as f:
    f.write("%s %s" % (peer[0], data.decode()))
PY
listener=$!
t=100
until [ -s "$tmp/port" ]; do
	t=$((t - 1)); [ "$t" -gt 0 ] || fail "the root namespace's listener did not start"
	kill -0 "$listener" 2>/dev/null || fail "the root namespace's listener exited"
	sleep 0.1
done
port=$(cat "$tmp/port")
token="from-host-1-$$"
netns_exec 1 python3 -c '
import socket, sys
c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10)
c.sendall(sys.argv[3].encode() + b"\n")
c.close()' "$NETNS_BRIDGE_ADDR" "$port" "$token" || fail "host 1 cannot connect to $NETNS_BRIDGE_ADDR:$port"
wait "$listener" || fail "the root namespace's listener failed"
got=$(cat "$tmp/got")
[ "$got" = "$h1 $token" ] || fail "the listener on $NETNS_BRIDGE_ADDR:$port got '$got', expected '$h1 $token'"
ok "host 1 -> root $NETNS_BRIDGE_ADDR:$port: peer $h1, line received"

# 4. netns_link 2 down cuts host 2 alone; up restores it.
netns_link 2 down
if netns_ssh -o ConnectTimeout=2 "$h2" true 2>/dev/null; then
	fail "host 2 still answers ssh with its link down"
fi
netns_ssh -o ConnectTimeout=5 "$h3" true || fail "host 3 lost with host 2's link down"
netns_exec 1 ssh -F "$NETNS_SSH_CONFIG" -o ConnectTimeout=2 "$h2" true 2>/dev/null &&
	fail "host 1 still reaches host 2 with host 2's link down"
ok "link 2 down: host 2 unreachable from root and host 1, host 3 reachable"
netns_link 2 up
t=50
until netns_ssh -o ConnectTimeout=2 "$h2" true 2>/dev/null; do
	t=$((t - 1)); [ "$t" -gt 0 ] || fail "host 2 unreachable 10 s after its link came up"
	sleep 0.2
done
ok "link 2 up: host 2 answers again"

# 5. Teardown leaves no namespace, device, sshd or file of ours.
prefix=$NETNS_PREFIX dir=$NETNS_DIR rootif=sdr$$ bridge=sdbr$$
pids=$(cat "$dir"/h*/sshd.pid)
[ "$(echo $pids | wc -w)" = 3 ] || fail "expected 3 sshd pids, got '$pids'"
# Each pid with its start time: pid_max is often 32768 and a make check
# wraps it, so a bare pid may name another process after the teardown.
started=
for p in $pids; do
	st=$(netns__start "$p")
	[ -n "$st" ] || fail "sshd $p not running before teardown"
	started="$started $p:$st"
done
ip link show "$rootif" >/dev/null 2>&1 || fail "$rootif missing before teardown"
netns_teardown
left=$(ip netns list | grep "^$prefix-")
[ -z "$left" ] || fail "namespaces left after teardown: $left"
ip link show "$rootif" >/dev/null 2>&1 && fail "veth $rootif left after teardown"
left=$(ip -o link show | grep -E "^[0-9]+: ($rootif|$bridge)[@:]|link-netns $prefix-")
[ -z "$left" ] || fail "devices left after teardown: $left"
for p in $started; do
	# netns__alive: neither a zombie nor a later process with the same pid.
	netns__alive "$p" && fail "sshd ${p%%:*} (started at tick ${p#*:}) still running after teardown"
done
[ ! -e "$dir" ] || fail "$dir left after teardown"
ok "teardown: no namespace, veth, bridge, sshd or temp dir left"
