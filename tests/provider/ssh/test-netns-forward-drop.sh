#!/bin/sh
# tests/provider/ssh/test-netns-forward-drop.sh - the test bed works on a Docker-like
# machine: br_netfilter loaded and the FORWARD chain's policy
# DROP, which drops frames bridged between two ports of a bridge in that
# namespace.  The machine is simulated by a namespace of our own (its own
# netfilter tables and bridge-nf sysctls), in which
#   1. a control: two namespaces on a bridge of the simulated machine cannot
#      reach each other (so the policy does bite here), and
#   2. test-netns-bed.sh passes, run as if that namespace were the root one
#      (tests/netns/lib.sh keeps its bridge in a namespace of its own).
# SKIPs where namespaces cannot be made, without nft, or where br_netfilter
# is not loaded (bridged frames never meet FORWARD there).
. "${top_srcdir:=$(cd "$(dirname "$0")/../../.." && pwd)}/tests/lib.sh"
export top_srcdir top_builddir

skip() { echo "SKIP: $*" >&2; exit 77; }
[ "$(id -u)" = 0 ] || skip "not root (network namespaces)"
PATH=$PATH:/usr/sbin:/sbin
for c in ip nft python3; do
	command -v "$c" >/dev/null 2>&1 || skip "$c not found (packages/debian.txt: iproute2, nftables)"
done
sim=sd-$$-machine a=sd-$$-ca b=sd-$$-cb
made=
cleanup() {
	# TERM first: a test-netns-bed.sh still running in $sim then tears its
	# own bed down (its trap), before anything left is killed.
	pids=
	for ns in $made; do pids="$pids $(ip netns pids "$ns" 2>/dev/null)"; done
	if [ -n "${pids# }" ]; then
		kill -TERM $pids 2>/dev/null
		t=100
		while [ "$t" -gt 0 ] && kill -0 $pids 2>/dev/null; do sleep 0.1; t=$((t - 1)); done
		kill -KILL $pids 2>/dev/null
	fi
	for ns in $made; do ip netns del "$ns" 2>/dev/null; done
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
err=$(ip netns add "$sim" 2>&1) || skip "ip netns add failed (an unprivileged container?): $err"
made=$sim
in_sim() { ip netns exec "$sim" "$@"; }
[ "$(in_sim cat /proc/sys/net/bridge/bridge-nf-call-iptables 2>/dev/null)" = 1 ] ||
	skip "br_netfilter not loaded (or bridge-nf-call-iptables off): bridged frames never meet FORWARD here"
in_sim nft add table ip filter &&
in_sim nft add chain ip filter forward '{ type filter hook forward priority 0; policy drop; }' ||
	fail "nft: cannot set the simulated machine's FORWARD policy"

# 1. The control: a bridge in the simulated machine's own namespace.
ip netns add "$a" && made="$made $a" && ip netns add "$b" && made="$made $b" || fail "ip netns add"
in_sim ip link add ctlbr type bridge stp_state 0 &&
in_sim ip link set ctlbr up &&
ip link add eth0 netns "$a" type veth peer name pa netns "$sim" &&
ip link add eth0 netns "$b" type veth peer name pb netns "$sim" &&
in_sim ip link set pa master ctlbr up && in_sim ip link set pb master ctlbr up &&
ip -n "$a" addr add 198.18.0.21/24 dev eth0 && ip -n "$a" link set eth0 up &&
ip -n "$b" addr add 198.18.0.22/24 dev eth0 && ip -n "$b" link set eth0 up || fail "control bridge"
# Nothing listens on the port: a reachable peer answers with a reset
# ("refused"), a dropped SYN times out.
probe() {
	ip netns exec "$a" python3 -c '
import socket
try:
    socket.create_connection(("198.18.0.22", 9), timeout=3)
    print("connected")
except ConnectionRefusedError:
    print("refused")
except OSError as e:
    print("dropped: %s" % e)'
}
got=$(probe)
case $got in dropped*) ;; *) fail "control: with FORWARD policy drop, a bridged peer answered ($got)";; esac
in_sim nft flush chain ip filter forward && in_sim nft chain ip filter forward '{ policy accept; }' || fail "nft accept"
got=$(probe)
[ "$got" = refused ] || fail "control: with FORWARD policy accept, the bridged peer did not answer ($got)"
in_sim nft chain ip filter forward '{ policy drop; }' || fail "nft drop"
ok "control: a bridge in the machine's namespace forwards only while FORWARD accepts"
in_sim ip link del pa; in_sim ip link del pb; in_sim ip link del ctlbr

# 2. The bed, with that namespace as its root one and FORWARD dropping.
in_sim sh "$top_srcdir/tests/provider/ssh/test-netns-bed.sh" || fail "the test bed failed under FORWARD policy drop"
[ "$(in_sim nft list chain ip filter forward | grep -c 'policy drop')" = 1 ] ||
	fail "the FORWARD policy changed while the bed ran"
ok "the bed works on a machine whose FORWARD policy drops bridged frames"
