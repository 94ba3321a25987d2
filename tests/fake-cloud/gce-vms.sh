# tests/fake-cloud/gce-vms.sh - sourced by the gce provider's end-to-end
# tests (after tests/lib.sh and tmpdir): starts tests/fake-cloud/gce.py
# with VMs that each run a real sshd on a loopback address of their own
# (--vm-sshd, port 2222; gce-env.sh sets the rest), makes the ssh key pair
# $T/id the provider puts in the VMs' metadata, and exports T, BASE, KEY
# and WORKER for the Python part (tests/fake-cloud/gce_run.py).  Exits 77
# (SKIP) without /usr/sbin/sshd.
[ -x /usr/sbin/sshd ] || { echo "SKIP: /usr/sbin/sshd not found (Debian package openssh-server)" >&2; exit 77; }
GCE_FAKE_ARGS="--boot-s 0.5 --op-s 0.2 --vm-sshd --vm-log-dir $T/vms --vm-ssh-port 2222"
. "$top_srcdir/tests/fake-cloud/gce-env.sh"
ssh-keygen -q -N '' -t ed25519 -C spotdeck-test -f "$T/id" || fail "ssh-keygen"
export T BASE KEY WORKER
