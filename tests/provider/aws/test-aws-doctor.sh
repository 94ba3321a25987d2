#!/bin/sh
# tests/provider/aws/test-aws-doctor.sh: `spotdeck doctor --provider aws`
# (src/app/doctor-aws.c) against tests/fake-cloud/ec2.py, which checks
# every SigV4 signature the way EC2 does: the key and the zones, a Spot
# launch with DryRun, the Spot prices; then a wrong secret, a zone the
# region lacks, a malformed image id, and a 503 storm ridden out by
# retries, with no secret in what doctor printed or the fake logged; and
# the key from a profile of ~/.aws/credentials, refused when others can
# read the file.
. "$(dirname "$0")/../../lib.sh"
tmpdir
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
SPOTDECK="$top_builddir/spotdeck"
KEY_ID=AKIAFAKEDOCTOR7TEST SECRET=wJalrXUtnFEMI/K7MDENG+doctorSECRETKEY
printf '{"g4dn.xlarge": {"us-east-1a": 0.2104, "us-east-1b": 0.1987}}\n' >"$T/prices.json"
fake_start ec2.py "$PY" "$top_srcdir/tests/fake-cloud/ec2.py" --regions us-east-1 \
	--azs us-east-1a,us-east-1b --access-key "$KEY_ID" --secret-key "$SECRET" --prices "$T/prices.json"
BASE=http://127.0.0.1:$FAKE_PORT
# The key pair a run would put in its instances' cloud-config.
ssh-keygen -q -N '' -t ed25519 -C doctor-test -f "$T/id" || fail "ssh-keygen"
# with_key: the job names it (every job below, unless it names one).
with_key() {
	grep -q '"identity"' "$T/job.json" ||
		sed -i "s|\"name\": \"aws\", |\"name\": \"aws\", \"identity\": \"$T/id\", |" "$T/job.json"
}
# job ZONES [IMAGE]: a job file whose provider is the fake.
job() {
	printf '{"provider": {"name": "aws", "region": "us-east-1", "zones": %s, "image": "%s", "endpoint": "%s", "quotas_endpoint": "%s"}}\n' \
		"$1" "${2:-ami-0123456789abcdef0}" "$BASE" "$BASE" >"$T/job.json"
}
control() { "$PY" -c 'import sys, urllib.request; urllib.request.urlopen(urllib.request.Request(sys.argv[1], data=sys.argv[2].encode(), method="POST"))' "$BASE/_control/$1" "$2" || fail "control $1"; }
# doctor WANT_RC [SECRET]: runs it into $T/out, checks the exit status.
doctor() {
	with_key
	AWS_ACCESS_KEY_ID=$KEY_ID AWS_SECRET_ACCESS_KEY=${2:-$SECRET} AWS_SESSION_TOKEN= \
		"$SPOTDECK" doctor --provider aws "$T/job.json" >"$T/out" 2>"$T/err"
	rc=$?
	[ "$rc" = "$1" ] || fail "doctor exited $rc, want $1: $(cat "$T/out" "$T/err")"
	! grep -q "$SECRET" "$T/out" "$T/err" || fail "the secret key in doctor's output"
}
has() { grep -qE "$1" "$T/out" || fail "no line /$1/ in: $(cat "$T/out")"; }

# 1. Healthy: every check ok, with the fake's own figures.
job '["us-east-1a", "us-east-1b"]'
doctor 0
has '^ok +credentials: key AKIA\.\.\.TEST \(from the environment\) accepted in us-east-1$'
has '^ok +zone: us-east-1a is available$'
has '^ok +zone: us-east-1b is available$'
has '^ok +launch: a Spot g4dn\.xlarge from ami-0123456789abcdef0 in us-east-1a would be allowed \(DryRun\)$'
has '^ok +prices: us-east-1a: \$0\.2104/h for a Spot g4dn\.xlarge'
has '^ok +prices: us-east-1b: \$0\.1987/h for a Spot g4dn\.xlarge'
has '^ok +quota: All G and VT Spot Instance Requests \(L-3819A6DF\) allows 64 vCPUs in us-east-1; a Spot g4dn\.xlarge takes 4$'
has "^ok +ssh key: $T/id \\(ssh-ed25519 AAAAC3NzaC1l\\.\\.\\.\\)\$"
[ "$(grep -c . "$T/out")" = 8 ] || fail "expected 8 lines: $(cat "$T/out")"
ok "a healthy account: 8 checks ok (the ssh key among them), exit 0"

# 1b. A new account's Spot vCPU quota (0, or below one instance): FAIL with
# the quota's name and code; a p3.2xlarge is counted against the P quota.
control quota '{"vcpus": 2}'
doctor 1
has '^FAIL +quota: All G and VT Spot Instance Requests \(L-3819A6DF\) allows 2 vCPUs in us-east-1, a Spot g4dn\.xlarge takes 4: ask for more in the Service Quotas console$'
control quota '{"vcpus": 8}'
printf '{"provider": {"name": "aws", "region": "us-east-1", "zones": ["us-east-1a"], "instance_type": "p3.2xlarge", "image": "ami-0123456789abcdef0", "endpoint": "%s", "quotas_endpoint": "%s"}}\n' \
	"$BASE" "$BASE" >"$T/job.json"
doctor 0
has '^ok +quota: All P Spot Instance Requests \(L-7212CCBC\) allows 8 vCPUs in us-east-1; a Spot p3\.2xlarge takes 8$'
control quota '{"vcpus": 64}'
ok "the Spot vCPU quota: 2 vCPUs for a 4-vCPU g4dn fails; the P quota for a p3"

# 1c. EC2 at an endpoint of the job's and no quotas_endpoint: the quota is
# not checked, rather than asked of Amazon's own Service Quotas host.
printf '{"provider": {"name": "aws", "region": "us-east-1", "zones": ["us-east-1a"], "image": "ami-0123456789abcdef0", "endpoint": "%s"}}\n' \
	"$BASE" >"$T/job.json"
doctor 0
has "^warn +quota: not checked: provider\\.endpoint sends EC2 to $BASE and no provider\\.quotas_endpoint says where Service Quotas is\$"
! grep -q '^ok +quota' "$T/out" || fail "a quota checked without quotas_endpoint: $(cat "$T/out")"
ok "EC2 at the job's endpoint without quotas_endpoint: the quota not checked, said so"

# 2. A wrong secret: EC2's SignatureDoesNotMatch, and nothing else runs.
doctor 1 "not-the-secret"
has '^FAIL +credentials: key AKIA\.\.\.TEST in us-east-1: SignatureDoesNotMatch: '
[ "$(grep -Evc "^ok +ssh key:" "$T/out")" = 1 ] || fail "checks ran on with a refused key: $(cat "$T/out")"
# 3. A zone the region lacks warns; a malformed image fails the launch.
job '["us-east-1a", "us-east-9z"]' not-an-ami
doctor 1
has '^warn +zone: us-east-9z is not a zone of us-east-1$'
has '^FAIL +image: not-an-ami: InvalidAMIID\.Malformed: '
ok "a refused key, a zone the region lacks, a malformed image: each said, exit 1"

# 4. A 503 storm on the first call: retried, then ok; the fake logged no secret.
job '["us-east-1a"]'
control fail '{"action": "DescribeAvailabilityZones", "status": 503, "code": "ServiceUnavailable", "count": 2}'
doctor 0
"$PY" - "$BASE" "$SECRET" <<'PY' || fail "the fake's log"
import json, sys, urllib.request
raw = urllib.request.urlopen(sys.argv[1] + "/_control/log").read().decode()
assert sys.argv[2] not in raw, "the secret key in the fake's log"
log = json.loads(raw)["requests"]
st = [r["status"] for r in log if r["action"] == "DescribeAvailabilityZones"][-3:]
assert st == [503, 503, 200], "the last 3 DescribeAvailabilityZones: %r" % st
assert all(r["auth"] for r in log), "a request without a signature"
PY
ok "a 503 storm is retried (503, 503, 200); no secret printed or logged"

# 5. The key from ~/.aws/credentials, the job's profile; no AWS_* variable.
mkdir -p "$T/home/.aws"
printf '[default]\naws_access_key_id = AKIANOTTHISONE000\naws_secret_access_key = wrong\n[work]\naws_access_key_id = %s\naws_secret_access_key = %s\n' \
	"$KEY_ID" "$SECRET" >"$T/home/.aws/credentials"
chmod 600 "$T/home/.aws/credentials"
printf '{"provider": {"name": "aws", "region": "us-east-1", "zones": ["us-east-1a"], "profile": "work", "image": "ami-0123456789abcdef0", "endpoint": "%s", "quotas_endpoint": "%s"}}\n' \
	"$BASE" "$BASE" >"$T/job.json"
# bare_doctor WANT_RC SECRETS [VAR=VALUE...]: doctor with no AWS_* variable
# but those given (IMDS disabled unless given), the output free of SECRETS
# (an extended regular expression).
bare_doctor() {
	_want=$1 _secrets=$2; shift 2
	with_key
	env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_SESSION_TOKEN -u AWS_PROFILE \
		-u AWS_SHARED_CREDENTIALS_FILE -u AWS_CONFIG_FILE AWS_EC2_METADATA_DISABLED=true "$@" \
		"$SPOTDECK" doctor --provider aws "$T/job.json" >"$T/out" 2>"$T/err"
	rc=$?
	[ "$rc" = "$_want" ] || fail "doctor exited $rc, want $_want: $(cat "$T/out" "$T/err")"
	! grep -qE "$_secrets" "$T/out" "$T/err" || fail "a secret in doctor's output"
}
profile_doctor() { bare_doctor "$1" "$SECRET" HOME="$T/home"; }
profile_doctor 0
has "^ok +credentials: key AKIA\.\.\.TEST \(from $T/home/\.aws/credentials \[work\]\) accepted in us-east-1\$"
chmod 644 "$T/home/.aws/credentials"
profile_doctor 1
has "^FAIL +credentials: $T/home/\.aws/credentials: holds AWS keys and is readable by others \(mode 0644\); chmod 600 "
ok "the job's profile from ~/.aws/credentials; the file refused once others can read it"

# 6. No key in the job, the environment or ~/.aws: the instance role's
# temporary key from IMDSv2 (tests/fake-metadata.py), against a fake EC2
# that takes only that key with its session token.  Then no metadata
# service (a closed port: not on EC2), and IMDS disabled.
kill "$FAKE_PID" 2>/dev/null
ROLE_ID=ASIAFAKEROLE00TEST ROLE_SECRET=roleSECRET/K7MDENG+instanceKEY ROLE_TOKEN=IQoJb3JpZ2luX2VjEFAKEsessionTOKEN
fake_start ec2-role.py "$PY" "$top_srcdir/tests/fake-cloud/ec2.py" --regions us-east-1 --azs us-east-1a \
	--access-key "$ROLE_ID" --secret-key "$ROLE_SECRET" --session-token "$ROLE_TOKEN" --prices "$T/prices.json"
EC2_PID=$FAKE_PID BASE=http://127.0.0.1:$FAKE_PORT
fake_start imds "$PY" "$top_srcdir/tests/fake-metadata.py" --aws-role spotdeck-run \
	--aws-role-key "$ROLE_ID:$ROLE_SECRET:$ROLE_TOKEN"
IMDS=http://127.0.0.1:$FAKE_PORT
trap 'kill "$EC2_PID" "$FAKE_PID" 2>/dev/null; rm -rf "$T"' EXIT
job '["us-east-1a"]'
mkdir -p "$T/empty"
# role_doctor WANT_RC [VAR=VALUE...]: doctor with no key anywhere but IMDS.
role_doctor() {
	_w=$1; shift
	bare_doctor "$_w" "$ROLE_SECRET|$ROLE_TOKEN" HOME="$T/empty" AWS_EC2_METADATA_DISABLED=false \
		AWS_EC2_METADATA_SERVICE_ENDPOINT="$IMDS" AWS_METADATA_SERVICE_TIMEOUT=10 "$@"
}
role_doctor 0
has '^ok +credentials: key ASIA\.\.\.TEST \(from the instance role spotdeck-run \(IMDS\)\) accepted in us-east-1$'
has '^ok +launch: a Spot g4dn\.xlarge from ami-0123456789abcdef0 in us-east-1a would be allowed \(DryRun\)$'
"$PY" - "$IMDS" <<'PY' || fail "the metadata service's log"
import json, sys, urllib.request
log = json.load(urllib.request.urlopen(sys.argv[1] + "/_control/log"))["requests"]
got = [(r["method"], r["path"], r["status"]) for r in log]
want = [("PUT", "/latest/api/token", 200),
        ("GET", "/latest/meta-data/iam/security-credentials/", 200),
        ("GET", "/latest/meta-data/iam/security-credentials/spotdeck-run", 200)]
assert got == want, "IMDS saw %r, want %r (one key for every call)" % (got, want)
PY
ok "the instance role's key from IMDSv2 (token, role, key; once), signed with its session token"
role_doctor 1 AWS_EC2_METADATA_SERVICE_ENDPOINT=http://127.0.0.1:1
has "^FAIL +credentials: no AWS credentials: .*; and no instance role: http://127\.0\.0\.1:1/latest/api/token: "
[ "$(grep -Evc "^ok +ssh key:" "$T/out")" = 1 ] || fail "checks ran on without a key: $(cat "$T/out")"
role_doctor 1 AWS_EC2_METADATA_DISABLED=true
has "^FAIL +credentials: no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or write them in $T/empty/\.aws/credentials\$"
ok "no metadata service, and IMDS disabled: one FAIL line each"
