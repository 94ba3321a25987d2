# tests/netns/lib.sh - a test bed of network namespaces, each running a real
# OpenSSH sshd, for multi-host tests.  POSIX sh, sourced by a test
# that runs as root:
#
#	. "$top_srcdir/tests/netns/lib.sh"
#	netns_setup 3           # or exits 77 (SKIP) saying why on stderr
#	netns_ssh 198.18.0.11 hostname
#
# What netns_setup N builds (README in this folder has a picture):
#   - a "switch" namespace sd-$$-sw holding a bridge sdbr$$ (STP off);
#   - N "host" namespaces sd-$$-1..N, each with lo up and eth0 (a veth whose
#     other end, h1..hN, is a port of the bridge) addressed NET.(10+i)/24,
#     and a real /usr/sbin/sshd listening on NET.(10+i):22;
#   - in the root namespace one veth, sdr$$, whose peer is a bridge port
#     too, addressed NET.1/24: the address a controller in the root namespace
#     listens on and that workers on the hosts dial.
#   NET is 198.18.K with the first K (0..255, then 198.19.K) whose /24 has no
#   address or route in the root namespace, chosen under an flock(1) on
#   /run/lock/spotdeck-netns.lock, so tests running at the same time (make
#   check -j, other checkouts on the machine) each get their own /24.  With
#   nothing else running, NET is 198.18.0.
#
# Address rule: every address this creates is in 198.18.0.0/15 (RFC 2544's
# benchmarking range) and the host namespaces have no default route, so
# nothing they send can leave the bed; the root namespace gains only the
# connected route of NET.0/24.  No NAT, no ip_forward or bridge-nf sysctl
# change, no host firewall rule.  IPv6 is not configured on any of our
# interfaces (addrgenmode none), so they send no neighbour discovery.
#
# Why the bridge sits in its own namespace and not in the root one: where
# br_netfilter is loaded (it is on the machine this was written on:
# net.bridge.bridge-nf-call-iptables = 1, and on every Docker host), frames
# bridged between two ports go through the root namespace's iptables/nft
# FORWARD chain, which Docker sets to policy DROP, so host-to-host traffic
# would be dropped; the per-bridge nf_call_iptables option can only turn that
# on, not off (the kernel ORs it with the sysctl), and the fixes left would
# be changing a host sysctl or inserting a host firewall rule.  A fresh
# namespace has empty netfilter tables (policy ACCEPT) and its own
# bridge-nf sysctls, so the switch namespace forwards whatever the host's
# policy; the root namespace only sends and receives on sdr$$ (OUTPUT and
# INPUT, never FORWARD).  A host whose INPUT policy drops new connections
# (a ufw "deny incoming" default) still blocks hosts -> root connections;
# the tests of the controller would then fail, not skip.
#
# sshd: its own config, host key and pid file in $NETNS_DIR/hI; root logs in
# with a key only (PermitRootLogin prohibit-password, UsePAM no, StrictModes
# no since the files live in a mktemp -d dir).  It needs the privilege
# separation directory /run/sshd, which Debian's package creates only when
# its own sshd service starts: netns_setup creates it (mode 0755) if missing
# and leaves it.  One client key and a known_hosts file already holding
# every host key are shared by all hosts and by the root namespace.  Each
# host's sessions have a TMPDIR of their own, $NETNS_DIR/hI/tmp (the hosts
# share this machine's file system otherwise).
#
# Exported for tests:
#   NETNS_DIR          the temp dir (keys, configs, logs)
#   NETNS_HOSTS        the host addresses, space separated, host 1 first
#   NETNS_KEY          the client's private key (its .pub is authorised)
#   NETNS_SSH_CONFIG   an ssh_config with the options below (ssh -F)
#   NETNS_BRIDGE_ADDR  NET.1, the root namespace's address on the bed
#   NETNS_PREFIX       sd-$$: host i is namespace $NETNS_PREFIX-i
# Functions:
#   netns_ssh [ssh options] ADDR CMD...  ssh as root with NETNS_KEY,
#       BatchMode=yes, UserKnownHostsFile=$NETNS_DIR/known_hosts,
#       StrictHostKeyChecking=accept-new (the user's ~/.ssh/config unread)
#   netns_exec N CMD...      CMD in host N's namespace (netns_exec 1 ssh -F
#       "$NETNS_SSH_CONFIG" ADDR CMD reaches another host from host 1)
#   netns_addr N             host N's address
#   netns_hosts_file         writes $NETNS_DIR/hosts for the ssh provider:
#       every host as root@ADDR name=hI gpu=cpu market=spot, with
#       NETNS_KEY and $WORKER (tests/lib.sh's spotdeck-worker)
#   netns_link N down|up     cut / restore host N's link (its bridge port)
#   netns_teardown           kills every process left in the namespaces
#       (the sshds by their pid files first), deletes the veths, the
#       namespaces and the bridge, removes NETNS_DIR; idempotent.
# The functions keep their variables "local" (dash, bash and busybox sh
# have it; tests/lib.sh uses it too).
# netns_setup installs "trap netns_teardown EXIT" and "trap 'exit 1' INT
# TERM HUP", so the bed goes also when the test fails or is interrupted; a
# test that sets its own EXIT trap afterwards must call netns_teardown in it
# (tests/lib.sh's tmpdir sets one: call tmpdir before netns_setup).

NETNS_LOCK=/run/lock/spotdeck-netns.lock

netns__skip() { echo "SKIP: netns: $*" >&2; exit 77; }
netns__fail() { echo "FAIL: netns: $*" >&2; exit 1; }

# netns__start PID: prints the process's start time (field 22 of
# /proc/PID/stat, clock ticks since boot), or nothing when it is gone.
# A pid plus its start time names one process even after the pid is
# reused: pid_max is often 32768, and a make check wraps it.
netns__start() {
	sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f20
}

# netns__alive PID[:START]: the process exists, is not a zombie and, when
# START is given, is the one that started then (not a reuse of its pid).
netns__alive() {
	local _pid _start _st
	_pid=${1%%:*}
	_start=${1#"$_pid"}; _start=${_start#:}
	_st=$(sed 's/.*) //' "/proc/$_pid/stat" 2>/dev/null) || return 1
	[ -n "$_st" ] || return 1
	[ "${_st%% *}" != Z ] || return 1
	[ -z "$_start" ] || [ "$(echo "$_st" | cut -d' ' -f20)" = "$_start" ]
}

# netns__wait_gone SECONDS PID[:START]...: polls until none is alive.
netns__wait_gone() {
	local _t _any _p
	_t=$(( $1 * 10 )); shift
	while [ "$_t" -gt 0 ]; do
		_any=
		for _p in "$@"; do netns__alive "$_p" && _any=1; done
		[ -z "$_any" ] && return 0
		sleep 0.1; _t=$((_t - 1))
	done
	return 1
}

# netns__free_net: prints the first 198.18.K / 198.19.K whose /24 has no
# address and no route (own or covering, default aside) in this namespace.
netns__free_net() {
	local _a _k _n
	for _a in 18 19; do
		_k=0
		while [ "$_k" -le 255 ]; do
			_n=198.$_a.$_k
			if [ -z "$(ip -4 -o addr show to "$_n.0/24")" ] &&
			   [ -z "$(ip -4 route show table all root "$_n.0/24")" ] &&
			   [ -z "$(ip -4 route show table all match "$_n.0/24" | grep -v '^\(unicast \)\{0,1\}default ')" ]; then
				echo "$_n"; return 0
			fi
			_k=$((_k + 1))
		done
	done
	return 1
}

netns_setup() {
	local _n _c _err _net _d _pam _i _ns _a _p _pids
	_n=${1:-3}
	case $_n in ''|*[!0-9]*) netns__fail "netns_setup: bad host count '$_n'";; esac
	[ "$_n" -ge 1 ] && [ "$_n" -le 200 ] || netns__fail "netns_setup: host count $_n not in 1..200"
	[ "$(id -u)" = 0 ] || netns__skip "not root (network namespaces need CAP_SYS_ADMIN and CAP_NET_ADMIN)"
	PATH=$PATH:/usr/sbin:/sbin
	for _c in ip ssh ssh-keygen flock; do
		command -v "$_c" >/dev/null 2>&1 || netns__skip "$_c not found (packages/debian.txt: iproute2, openssh-client, util-linux)"
	done
	[ -x /usr/sbin/sshd ] || netns__skip "/usr/sbin/sshd not found (Debian package openssh-server)"

	NETNS_PREFIX=sd-$$
	NETNS_SWITCH=$NETNS_PREFIX-sw
	NETNS_BRIDGE=sdbr$$
	NETNS_ROOT_IF=sdr$$
	NETNS__made=
	NETNS_DIR=$(mktemp -d "${TMPDIR:-/tmp}/spotdeck-netns.XXXXXX") || netns__fail "mktemp -d"
	trap netns_teardown EXIT
	trap 'exit 1' INT TERM HUP

	# The switch: can namespaces, veths and bridges be made here at all?
	_err=$(ip netns add "$NETNS_SWITCH" 2>&1) ||
		netns__skip "ip netns add failed (an unprivileged container?): $_err"
	NETNS__made=$NETNS_SWITCH
	_err=$(ip -n "$NETNS_SWITCH" link add "$NETNS_BRIDGE" type bridge stp_state 0 forward_delay 0 2>&1) ||
		netns__skip "cannot create a bridge in a namespace: $_err"
	_err=$(ip link add "$NETNS_ROOT_IF" type veth peer name r0 netns "$NETNS_SWITCH" 2>&1) ||
		netns__skip "cannot create a veth pair: $_err"
	ip link set "$NETNS_ROOT_IF" addrgenmode none 2>/dev/null
	ip -n "$NETNS_SWITCH" link set r0 addrgenmode none 2>/dev/null
	ip -n "$NETNS_SWITCH" link set "$NETNS_BRIDGE" addrgenmode none 2>/dev/null
	ip -n "$NETNS_SWITCH" link set r0 master "$NETNS_BRIDGE" up &&
	ip -n "$NETNS_SWITCH" link set "$NETNS_BRIDGE" up || netns__fail "switch ports"

	# Our /24, claimed by putting NET.1 on sdr$$ while holding the lock.
	mkdir -p "${NETNS_LOCK%/*}"
	_net=$( (
		flock -w 60 9 || { echo "flock $NETNS_LOCK timed out" >&2; exit 1; }
		_m=$(netns__free_net) || { echo "no free /24 in 198.18.0.0/15 in the root namespace" >&2; exit 1; }
		ip addr add "$_m.1/24" dev "$NETNS_ROOT_IF" || exit 1
		echo "$_m"
	) 9>"$NETNS_LOCK") || netns__fail "cannot claim an address range"
	NETNS_NET=$_net
	NETNS_BRIDGE_ADDR=$_net.1
	ip link set "$NETNS_ROOT_IF" up || netns__fail "ip link set $NETNS_ROOT_IF up"

	# Keys: one client key, a host key per host, known_hosts holding them all.
	_d=$NETNS_DIR
	NETNS_KEY=$_d/id_ed25519
	ssh-keygen -q -N '' -t ed25519 -C spotdeck-netns-client -f "$NETNS_KEY" || netns__fail "ssh-keygen (client)"
	cp "$NETNS_KEY.pub" "$_d/authorized_keys"
	: >"$_d/known_hosts"
	NETNS_SSH_CONFIG=$_d/ssh_config
	cat >"$NETNS_SSH_CONFIG" <<EOF
Host *
	User root
	IdentityFile $NETNS_KEY
	IdentitiesOnly yes
	BatchMode yes
	UserKnownHostsFile $_d/known_hosts
	GlobalKnownHostsFile /dev/null
	StrictHostKeyChecking accept-new
	ConnectTimeout 5
	LogLevel ERROR
EOF
	# UsePAM no refuses an account whose password is locked with '!' ("User
	# root not allowed because account is locked"); Debian's root is '*' (no
	# password, not locked) unless someone locked it, and then PAM's account
	# check, which does not look at the '!', lets the key in (checked with a
	# bind-mounted /etc/shadow).
	_pam=no
	case $(getent shadow root 2>/dev/null | cut -d: -f2) in '!'*) _pam=yes;; esac
	[ -d /run/sshd ] || mkdir -m 0755 /run/sshd || netns__fail "mkdir /run/sshd"

	NETNS_HOSTS=
	_i=1
	while [ "$_i" -le "$_n" ]; do
		_ns=$NETNS_PREFIX-$_i
		_a=$_net.$((10 + _i))
		ip netns add "$_ns" || netns__fail "ip netns add $_ns"
		NETNS__made="$NETNS__made $_ns"
		ip link add eth0 netns "$_ns" type veth peer name "h$_i" netns "$NETNS_SWITCH" ||
			netns__fail "veth for $_ns"
		ip -n "$NETNS_SWITCH" link set "h$_i" addrgenmode none 2>/dev/null
		ip -n "$_ns" link set eth0 addrgenmode none 2>/dev/null
		ip -n "$NETNS_SWITCH" link set "h$_i" master "$NETNS_BRIDGE" up &&
		ip -n "$_ns" link set lo up &&
		ip -n "$_ns" addr add "$_a/24" dev eth0 &&
		ip -n "$_ns" link set eth0 up || netns__fail "addressing $_ns"
		mkdir "$_d/h$_i"
		ssh-keygen -q -N '' -t ed25519 -C "$_ns" -f "$_d/h$_i/ssh_host_ed25519_key" || netns__fail "ssh-keygen (host $_i)"
		echo "$_a $(cut -d' ' -f1-2 "$_d/h$_i/ssh_host_ed25519_key.pub")" >>"$_d/known_hosts"
		cat >"$_d/h$_i/sshd_config" <<EOF
ListenAddress $_a:22
AddressFamily inet
HostKey $_d/h$_i/ssh_host_ed25519_key
PidFile $_d/h$_i/sshd.pid
AuthorizedKeysFile $_d/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM $_pam
StrictModes no
UseDNS no
PrintMotd no
PrintLastLog no
MaxStartups 100:30:200
MaxSessions 64
Subsystem sftp internal-sftp
SetEnv TMPDIR=$_d/h$_i/tmp HOME=$_d/h$_i/home SPOTDECK_COMM_HOST_ID=netns-h$_i
EOF
		# SPOTDECK_COMM_HOST_ID: the test hosts share this machine's
		# kernel and /dev/shm, so their workers would choose the
		# shared-memory backend; separate hosts do not, so each test host
		# gets an identity of its own and its workers' collectives go
		# over Gloo, across the veths, as between real hosts.
		# HOME: a session's shell reads the test host's own, empty, rc
		# files, not the login user's: root's ~/.bashrc on a CI machine
		# ran pyenv init, and a login killed mid-rehash left a lock that
		# made every later login wait 60 s for it.
		mkdir "$_d/h$_i/tmp" "$_d/h$_i/home"
		# sshd listens, then daemonises; the pid file follows shortly.
		ip netns exec "$_ns" /usr/sbin/sshd -f "$_d/h$_i/sshd_config" -E "$_d/h$_i/sshd.log" ||
			{ cat "$_d/h$_i/sshd.log" >&2; netns__fail "sshd in $_ns did not start"; }
		NETNS_HOSTS="${NETNS_HOSTS:+$NETNS_HOSTS }$_a"
		_i=$((_i + 1))
	done

	# Ready when each sshd runs a command for us: all hosts polled at once
	# (an ssh login costs about 0.3 s of CPU), 10 s each at most.
	_i=1 _pids=
	for _a in $NETNS_HOSTS; do
		(
			_t=100
			until [ -s "$_d/h$_i/sshd.pid" ] &&
			      netns_ssh -o ConnectTimeout=2 "$_a" true 2>"$_d/h$_i/ssh-probe.err"; do
				_t=$((_t - 1))
				[ "$_t" -gt 0 ] || { cat "$_d/h$_i/ssh-probe.err" >&2; tail -5 "$_d/h$_i/sshd.log" >&2; exit 1; }
				sleep 0.1
			done
		) &
		_pids="$_pids $!"
		_i=$((_i + 1))
	done
	_i=1
	for _p in $_pids; do
		wait "$_p" || netns__fail "sshd on $(netns_addr "$_i") does not run commands for our key"
		_i=$((_i + 1))
	done
	export NETNS_DIR NETNS_HOSTS NETNS_KEY NETNS_SSH_CONFIG NETNS_BRIDGE_ADDR NETNS_PREFIX
}

netns_ssh() { ssh -F "$NETNS_SSH_CONFIG" "$@"; }

netns_addr() { echo "$NETNS_NET.$((10 + $1))"; }

netns_hosts_file() {
	local _a _i=0
	: >"$NETNS_DIR/hosts"
	for _a in $NETNS_HOSTS; do
		_i=$((_i + 1))
		echo "root@$_a name=h$_i gpu=cpu market=spot identity=$NETNS_KEY worker=$WORKER" >>"$NETNS_DIR/hosts"
	done
}

netns_exec() {
	local _ns
	_ns=$NETNS_PREFIX-$1; shift
	ip netns exec "$_ns" "$@"
}

netns_link() {
	case $2 in up|down) ;; *) netns__fail "netns_link $1 $2: up or down";; esac
	ip -n "$NETNS_SWITCH" link set "h$1" "$2"
}

netns_teardown() {
	local _pids _f _ns _p _st _live
	[ -n "${NETNS_DIR:-}" ] || return 0
	# The sshds by pid, then anything else still running in our namespaces
	# (sessions, workers started over ssh): a namespace whose processes live
	# on outlives "ip netns del" and keeps its veths.
	_pids=
	for _f in "$NETNS_DIR"/h*/sshd.pid; do
		# A pid file may outlive its sshd: only a live sshd is ours.
		_p=$(cat "$_f" 2>/dev/null)
		[ -n "$_p" ] && [ "$(cat "/proc/$_p/comm" 2>/dev/null)" = sshd ] && _pids="$_pids $_p"
	done
	for _ns in $NETNS__made; do
		_pids="$_pids $(ip netns pids "$_ns" 2>/dev/null)"
	done
	# Each pid pinned to its start time now, so neither the wait nor the
	# KILL below can mistake a later process that reused the pid for ours.
	_live=
	for _p in $_pids; do
		_st=$(netns__start "$_p")
		[ -n "$_st" ] && _live="$_live $_p:$_st"
	done
	if [ -n "$_live" ]; then
		for _p in $_live; do kill -TERM "${_p%%:*}" 2>/dev/null; done
		# shellcheck disable=SC2086
		if ! netns__wait_gone 5 $_live; then
			for _p in $_live; do
				netns__alive "$_p" && kill -KILL "${_p%%:*}" 2>/dev/null
			done
			# shellcheck disable=SC2086
			netns__wait_gone 5 $_live
		fi
	fi
	# Devices deleted one by one, so all are gone when this returns (a
	# deleted namespace frees its devices later, asynchronously).
	ip link del "$NETNS_ROOT_IF" 2>/dev/null
	ip -n "$NETNS_SWITCH" link del "$NETNS_BRIDGE" 2>/dev/null
	for _ns in $NETNS__made; do
		ip -n "$_ns" link del eth0 2>/dev/null
		ip netns del "$_ns" 2>/dev/null
	done
	rm -rf "$NETNS_DIR"
	NETNS_DIR= NETNS__made=
}
