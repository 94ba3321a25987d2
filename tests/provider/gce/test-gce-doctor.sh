#!/bin/sh
# tests/provider/gce/test-gce-doctor.sh: `spotdeck doctor --provider gce` (src/app/doctor.c)
# against tests/fake-cloud/gce.py: the whole path a run's first requests
# take (a service-account key, a signed JWT exchanged for a token, calls
# with it through the HTTP client on the loop) and one line per check.
# Checks a healthy project, then each way a run could not start: a key
# readable by others, a key the token endpoint refuses, no GPU quota left,
# no zone able to run the GPU, a missing image; a token from gcloud (and
# gcloud with no login, or none installed); and that a 503 storm is
# ridden out by retries while no request carries the key or the token in
# its URL.
. "$(dirname "$0")/../../lib.sh"
tmpdir
SPOTDECK="$top_builddir/spotdeck"
GCE_FAKE_ARGS="--quota-gpus 4"
. "$top_srcdir/tests/fake-cloud/gce-env.sh"
ssh-keygen -q -N '' -t ed25519 -C doctor-test -f "$T/id" || fail "ssh-keygen"
# job CREDENTIALS [EXTRA]: a job file whose provider is the fake.
job() {
	printf '{"provider": {"name": "gce", "project": "p1", "zones": ["us-central1-a", "europe-west4-a"], "credentials": "%s", "api_root": "%s/compute/v1", "billing_root": "%s/v1", "identity": "%s"%s}}\n' \
		"$1" "$BASE" "$BASE" "$T/id" "${2:-}" >"$T/job.json"
}
control() { "$PY" -c 'import sys, urllib.request; urllib.request.urlopen(urllib.request.Request(sys.argv[1], data=sys.argv[2].encode(), method="POST"))' "$BASE/_control/$1" "$2" || fail "control $1"; }
# doctor WANT_RC: runs it into $T/out, checks the exit status.
doctor() {
	"$SPOTDECK" doctor --provider gce "$T/job.json" >"$T/out" 2>"$T/err"
	rc=$?
	[ "$rc" = "$1" ] || fail "doctor exited $rc, want $1: $(cat "$T/out" "$T/err")"
}
has() { grep -qE "$1" "$T/out" || fail "no line /$1/ in: $(cat "$T/out")"; }

# 1. A healthy project: every check ok, with the fake's own figures.
job "$KEY"
doctor 0
has '^ok +credentials: a token for sd@p1.iam.gserviceaccount.com, 3[0-9]{3} s left$'
has '^ok +project: p1: GPUS_ALL_REGIONS 4 of 4 left$'
has '^ok +zone: us-central1-a: UP, n1-standard-8 with 1 x nvidia-tesla-t4$'
has '^ok +zone: europe-west4-a: UP'
has '^ok +region: us-central1: PREEMPTIBLE_NVIDIA_T4_GPUS [0-9]+ of [0-9]+ left$'
has '^ok +image: projects/deeplearning-platform-release/global/images/family/common-cu124 is common-cu124-v[0-9]+'
# The VM's Spot price from the catalog's N1 core, RAM and T4 SKUs (not the
# OnDemand, custom or workstation ones the fake lists first): 8 vCPUs and
# 30 GiB from machineTypes.get.
has '^ok +prices: us-central1: \$0\.2239/h a Spot n1-standard-8 with 1 x T4 \(8 vCPU x \$0\.006980 \+ 30 GiB x \$0\.000936 \+ 1 T4 x \$0\.140000\)$'
has '^ok +prices: europe-west4: \$0\.2439/h a Spot n1-standard-8 with 1 x T4 \(.* \+ 1 T4 x \$0\.160000\)$'
has "^ok +ssh key: $T/id \\(ssh-ed25519 "
[ "$(grep -c . "$T/out")" = 10 ] || fail "expected 10 lines: $(cat "$T/out")"
ok "a healthy project: 10 checks ok, exit 0"

# 2. A key readable by others is refused before anything is sent.
chmod 644 "$KEY"
doctor 1
has "^FAIL +credentials: .*key\.json: key file is readable by others \(mode 0644\)"
chmod 600 "$KEY"
# 3. A key the token endpoint refuses: invalid_grant, said as such.
job "$WRONGKEY"
doctor 1
has '^FAIL +credentials: no token for sd@p1.iam.gserviceaccount.com: HTTP 400: .*invalid_grant'
[ "$(grep -Evc '^ok +ssh key' "$T/out")" = 1 ] || fail "checks ran on without a token: $(cat "$T/out")"
ok "credentials: a key readable by others and a key the cloud refuses each fail the run"

# The VMs' ssh key: a private key others can read, or none, fails the run.
job "$KEY"
chmod 644 "$T/id"
doctor 1
has "^FAIL +ssh key: provider\.identity: $T/id: private key readable by others \\(mode 0644\\); chmod 600 $T/id$"
chmod 600 "$T/id"
job "$KEY" ", \"identity\": \"$T/nokey\""
sed -i 's/"identity": "[^"]*", "identity"/"identity"/' "$T/job.json"
doctor 1
has "^FAIL +ssh key: provider\.identity: $T/nokey: No such file or directory$"
ok "the VMs' ssh key: open to others, or missing, each fail the run"

# 4. No GPU quota left: the project check fails, with what to do.
job "$KEY"
control quota '{"gpus": 0}'
doctor 1
has '^FAIL +project: p1: GPUS_ALL_REGIONS has 0 of 0 left, a server needs 1'
control quota '{"gpus": 4}'
# 5. A GPU no zone offers, and an image that does not exist.
job "$KEY" ', "accelerator": "nvidia-b999", "image": "projects/p1/global/images/nonesuch"'
doctor 1
has '^warn +zone: us-central1-a: GPU nvidia-b999: HTTP 404: '
has '^FAIL +zones: none of the 2 zones can run n1-standard-8 with nvidia-b999$'
has '^FAIL +image: projects/p1/global/images/nonesuch: HTTP 404: '
ok "no quota, no zone for the GPU, no image: each fails with the API's words"

# 6. A 503 storm on the project: retried (GET is idempotent), then ok.
job "$KEY"
control fail '{"prefix": "/compute/v1/projects/p1", "status": 503, "count": 2}'
doctor 0
has '^ok +project: p1'
"$PY" - "$BASE" <<'PY' || fail "the fake's log"
import json, sys, urllib.request
log = json.load(urllib.request.urlopen(sys.argv[1] + "/_control/log"))["requests"]
proj = [r for r in log if r["path"] == "/compute/v1/projects/p1"]
st = [r["status"] for r in proj][-3:]
assert st == [503, 503, 200], "the last 3 project GETs: %r" % st
assert all(r["auth"] for r in log if r["path"].startswith("/compute/")), "a compute call without a token"
for r in log:
    q = json.dumps(r.get("query", ""))
    assert "access_token" not in q and "assertion" not in q, "a credential in a URL: %r" % r
PY
ok "a 503 storm is ridden out by retries; every call carried a token, none in its URL"

# 6b. A 403 rateLimitExceeded (the project's API rate, not a quota) is
# retried like a 429 (a 403 over a quota or a permission is not:
# test-gce-api).
control fail '{"prefix": "/compute/v1/projects/p1/zones/us-central1-a", "status": 403, "count": 2}'
doctor 0
"$PY" - "$BASE" <<'PY' || fail "the fake's log"
import json, sys, urllib.request
log = json.load(urllib.request.urlopen(sys.argv[1] + "/_control/log"))["requests"]
zl = [r["status"] for r in log if r["path"] == "/compute/v1/projects/p1/zones/us-central1-a"][-3:]
assert zl == [403, 403, 200], "the last 3 zone lists: %r" % zl
PY
ok "403 rateLimitExceeded is retried (403, 403, 200)"

# 7. "credentials": "gcloud": the token of the person logged in with
# gcloud, from `gcloud config config-helper --format=json`.  The stand-in
# gcloud does what gcloud does for a login: it exchanges its credential (a
# signed JWT here) at the token endpoint, and prints the token with its
# expiry in config-helper's shape.  It records its arguments and whether
# anything came on its stdin (nothing may: it is /dev/null).
cat >"$T/gcloud" <<EOF
#!/bin/sh
printf '%s\n' "\$*" >"$T/gcloud.args"
[ -n "\$(head -c1)" ] && echo "stdin not empty" >>"$T/gcloud.args"
exec "$PY" - "$T/sa.pem" "$BASE/token" <<'PYG'
import json, sys, time, urllib.parse, urllib.request
import jwt
pem, uri = sys.argv[1:3]
now = int(time.time())
a = jwt.encode({"iss": "sd@p1.iam.gserviceaccount.com", "aud": uri, "iat": now, "exp": now + 3600,
                "scope": "https://www.googleapis.com/auth/cloud-platform"}, open(pem).read(),
               algorithm="RS256", headers={"kid": "k1"})
body = urllib.parse.urlencode({"grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer",
                               "assertion": a}).encode()
t = json.load(urllib.request.urlopen(uri, body))
print(json.dumps({"configuration": {"active_configuration": "default", "properties": {"core": {
                      "account": "me@example.com", "project": "p1"}}},
                  "credential": {"access_token": t["access_token"],
                                 "token_expiry": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                               time.gmtime(now + t["expires_in"]))},
                  "sentinels": {}}, indent=2))
PYG
EOF
chmod 755 "$T/gcloud"
job gcloud ", \"gcloud\": \"$T/gcloud\""
doctor 0
has '^ok +credentials: a token for me@example.com, 3[0-9]{3} s left$'
has '^ok +project: p1: GPUS_ALL_REGIONS 4 of 4 left$'
[ "$(cat "$T/gcloud.args")" = "config config-helper --format=json" ] ||
	fail "gcloud ran with: $(cat "$T/gcloud.args")"
ok "credentials gcloud: the token from gcloud config config-helper, for the account it names"
# gcloud with no login: its own last words; gcloud not installed: said so.
printf '#!/bin/sh\necho "WARNING: some notice" >&2\necho "ERROR: (gcloud.config.config-helper) You do not currently have an active account selected." >&2\nexit 1\n' >"$T/gcloud"
doctor 1
has "^FAIL +credentials: no token from gcloud: $T/gcloud config config-helper: exit status 1: ERROR: \(gcloud\.config\.config-helper\) You do not currently have an active account selected\.$"
[ "$(grep -Evc '^ok +ssh key' "$T/out")" = 1 ] || fail "checks ran on without a token: $(cat "$T/out")"
job gcloud ", \"gcloud\": \"$T/no-such-gcloud\""
doctor 1
has "^FAIL +credentials: no token from gcloud: $T/no-such-gcloud: not found \(install the Google Cloud CLI"
ok "gcloud without a login, and no gcloud at all: one FAIL line each, with gcloud's words"

# 8. Job values that would go into URLs, and a zone listed twice, are
# job-file errors (exit 2) naming the field, before anything is sent.
printf '{"provider": {"name": "gce", "project": "p1/../p2", "zones": ["us-central1-a"], "credentials": "%s", "api_root": "%s/compute/v1"}}\n' "$KEY" "$BASE" >"$T/job.json"
doctor 2
grep -q 'provider.project: "p1/../p2" is not a project id' "$T/err" || fail "bad project: $(cat "$T/err")"
job "$KEY" ', "machine_type": "n1-standard-8?x=1#"'
doctor 2
grep -q 'provider.machine_type or accelerator: not a resource name' "$T/err" || fail "bad type: $(cat "$T/err")"
printf '{"provider": {"name": "gce", "project": "p1", "zones": ["us-central1-a", "us-central1-a"], "credentials": "%s"}}\n' "$KEY" >"$T/job.json"
doctor 2
grep -q 'provider.zones: us-central1-a is listed twice' "$T/err" || fail "twice: $(cat "$T/err")"
ok "a project or type that would change the URL, a zone listed twice: job-file errors, exit 2"
