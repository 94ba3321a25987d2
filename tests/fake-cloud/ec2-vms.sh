# tests/fake-cloud/ec2-vms.sh - sourced by the aws provider's end-to-end
# tests (after tests/lib.sh and tmpdir): starts tests/fake-cloud/ec2.py for
# us-east-1 (AZs a, b, c; g4dn.xlarge Spot prices from $T/prices.json) with
# instances that each run a real sshd on a loopback address of their own
# (--vm-sshd, port 2222) letting in the keys of the launch's cloud-config;
# makes the ssh key pair $T/id; exports T, BASE and WORKER for the Python
# part (tests/fake-cloud/aws_run.py) and the controller's key in
# AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, with the instance role off
# (AWS_EC2_METADATA_DISABLED: no request to 169.254.169.254 from a test).
# Exits 77 (SKIP) without /usr/sbin/sshd.
[ -x /usr/sbin/sshd ] || { echo "SKIP: /usr/sbin/sshd not found (Debian package openssh-server)" >&2; exit 77; }
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
AWS_ACCESS_KEY_ID=AKIAFAKETRAIN0TEST1 AWS_SECRET_ACCESS_KEY=tRaInSeCrEt/K7MDENG+bPxRfiCYfakeSECRET
[ -f "$T/prices.json" ] ||
	printf '{"g4dn.xlarge": {"us-east-1a": 0.2104, "us-east-1b": 0.1987, "us-east-1c": 0.2311}}\n' >"$T/prices.json"
fake_start ec2.py "$PY" "$top_srcdir/tests/fake-cloud/ec2.py" --regions us-east-1 \
	--azs us-east-1a,us-east-1b,us-east-1c --access-key "$AWS_ACCESS_KEY_ID" \
	--secret-key "$AWS_SECRET_ACCESS_KEY" --prices "$T/prices.json" --boot-s 0.5 \
	--vm-sshd --vm-ssh-port 2222 --vm-log-dir "$T/vms"
BASE=http://127.0.0.1:$FAKE_PORT
ssh-keygen -q -N '' -t ed25519 -C spotdeck-test -f "$T/id" || fail "ssh-keygen"
AWS_SESSION_TOKEN= AWS_EC2_METADATA_DISABLED=true
export T BASE WORKER AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN AWS_EC2_METADATA_DISABLED
