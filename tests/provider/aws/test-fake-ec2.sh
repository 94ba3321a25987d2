#!/bin/sh
# tests/provider/aws/test-fake-ec2.sh: tests/fake-cloud/ec2.py, the fake EC2 Query API
# the AWS provider is tested against, checked for the behaviours the
# provider relies on (../shared/reference/cloud-apis.md section 2): SigV4
# (the fake's canonical request and key chain on AWS's documented test
# vector, then requests signed by botocore, AWS's own signer and an
# implementation independent of the fake's, POST bodies and GET queries),
# RunInstances pending -> running, ClientToken idempotency (also 6 calls
# at once), DescribeAvailabilityZones, DryRun, vCPU quota and injected capacity
# errors, tag / state filters with paging, a spot interruption seen inside
# (IMDSv2 spot/instance-action) and outside (Server.SpotInstanceTermination)
# and told apart from a user terminate and a crash, spot prices, billing's
# 1-minute minimum, startup scripts run and killed at power-off, injected
# 503s, and a lost answer retried with the same ClientToken.
. "$(dirname "$0")/../../lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
"$PY" -c 'import botocore.auth, botocore.awsrequest, botocore.credentials' 2>/dev/null || {
	echo "SKIP: botocore not importable by $PY" >&2; exit 77; }
tmpdir
mkdir "$T/vm"
cat >"$T/prices.json" <<'EOF'
{"g5.xlarge": {"us-east-1a": 0.4123, "us-east-1b": 0.39, "us-west-2a": 0.5},
 "g4dn.xlarge": {"us-east-1a": 0.2}}
EOF
EC2="$top_srcdir/tests/fake-cloud/ec2.py"
fake_start ec2 "$PY" "$EC2" --regions us-east-1,us-west-2 --azs us-east-1a,us-east-1b,us-west-2a \
	--access-key AKIDFAKE --secret-key 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY' --boot-s 0.5 \
	--prices "$T/prices.json" --run-startup-scripts --vm-log-dir "$T/vm"
"$PY" - "$EC2" "$T" "$FAKE_PORT" "$FAKE_PID" <<'PY' || { echo "--- fake stderr:" >&2; cat "$T/ec2.err" >&2; exit 1; }
import datetime, json, os, re, signal, subprocess, sys, time, urllib.error, urllib.parse, urllib.request
import xml.etree.ElementTree as ET
import botocore.auth
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

EC2, T, PORT, PID = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
B = "http://127.0.0.1:%s" % PORT
KEY, SECRET = "AKIDFAKE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
NS = {"e": "http://ec2.amazonaws.com/doc/2016-11-15/"}
others = []


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    for p in others:
        p.terminate()
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def eq(got, want, what):
    if got != want:
        fail("%s: got %r, want %r" % (what, got, want))


def ok(msg):
    print("ok: " + msg, flush=True)


class Skewed(datetime.datetime):
    skew = datetime.timedelta(0)

    @classmethod
    def utcnow(cls):
        return datetime.datetime.utcnow() + cls.skew


class DTShim:   # botocore.auth calls datetime.datetime.utcnow() for X-Amz-Date
    datetime = Skewed


botocore.auth.datetime = DTShim


def ec2(params, region="us-east-1", key=KEY, secret=SECRET, token=None, base=B, skew=0, raw_auth=None,
        get=False):
    p = dict(params)
    p.setdefault("Version", "2016-11-15")
    url = base + "/"
    body = urllib.parse.urlencode(p)
    if get:   # parameters in the query string: the canonical query is signed
        url = url + "?" + urllib.parse.urlencode(sorted(p.items(), reverse=True), quote_via=urllib.parse.quote)
        body = ""   # (unsorted on the wire: the signer and the fake sort it)
    req = AWSRequest(method="GET" if get else "POST", url=url, data=body,
                     headers={} if get else {"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"})
    Skewed.skew = datetime.timedelta(seconds=skew)
    if key is not None:
        SigV4Auth(Credentials(key, secret, token), "ec2", region).add_auth(req)
    Skewed.skew = datetime.timedelta(0)
    h = dict(req.headers.items())
    if raw_auth is not None:
        h["Authorization"] = raw_auth
    r = urllib.request.Request(url, data=None if get else body.encode(), method="GET" if get else "POST",
                               headers=h)
    try:
        with urllib.request.urlopen(r, timeout=30) as resp:
            st, raw = resp.status, resp.read()
    except urllib.error.HTTPError as e:
        st, raw = e.code, e.read()
    return st, ET.fromstring(raw)


def err(root):
    return root.findtext("Errors/Error/Code"), root.findtext("Errors/Error/Message")


def expect_error(params, status, code, what, **kw):
    st, root = ec2(params, **kw)
    eq((st, root.tag, err(root)[0]), (status, "Response", code), what)
    check(re.match(r"[0-9a-f-]{36}\Z", root.findtext("RequestID") or ""), what + ": RequestID")
    return err(root)[1]


def ctl(path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    r = urllib.request.Request(B + "/_control/" + path, data=data, method="POST" if data else "GET")
    with urllib.request.urlopen(r, timeout=30) as resp:
        return json.loads(resp.read())


def item_of(root):
    return root.find(".//e:instancesSet/e:item", NS)


def f(el, path):
    return el.findtext("/".join("e:" + s for s in path.split("/")), namespaces=NS)


def describe(iid):
    st, root = ec2({"Action": "DescribeInstances", "InstanceId.1": iid})
    eq(st, 200, "DescribeInstances " + iid)
    return item_of(root)


def wait_state(iid, states, limit=10):
    end = time.time() + limit
    while True:
        it = describe(iid)
        if f(it, "instanceState/name") in states:
            return it
        if time.time() > end:
            fail("%s stayed %s, wanted %s" % (iid, f(it, "instanceState/name"), states))
        time.sleep(0.1)


def run(az="us-east-1a", itype="g5.xlarge", token=None, tags=(("spotdeck-run", "r1"),), user_data=None, extra=None):
    p = {"Action": "RunInstances", "ImageId": "ami-0123456789abcdef0", "InstanceType": itype,
         "MinCount": "1", "MaxCount": "1", "InstanceMarketOptions.MarketType": "spot",
         "InstanceMarketOptions.SpotOptions.SpotInstanceType": "one-time",
         "InstanceMarketOptions.SpotOptions.InstanceInterruptionBehavior": "terminate",
         "Placement.AvailabilityZone": az, "TagSpecification.1.ResourceType": "instance"}
    for k, (tk, tv) in enumerate(tags, 1):
        p["TagSpecification.1.Tag.%d.Key" % k] = tk
        p["TagSpecification.1.Tag.%d.Value" % k] = tv
    if token:
        p["ClientToken"] = token
    if user_data is not None:
        import base64
        p["UserData"] = base64.b64encode(user_data.encode()).decode()
    p.update(extra or {})
    return ec2(p)


def launch(**kw):
    st, root = run(**kw)
    eq(st, 200, "RunInstances %r" % kw)
    return f(item_of(root), "instanceId")


# ---- SigV4
# The fake's canonical request and HMAC chain on AWS's documented test
# vector (../shared/reference/cloud-apis.md 2.1), before botocore's checks.
import importlib.util
spec = importlib.util.spec_from_file_location("ec2fake", EC2)
fake = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fake)
VH = {"content-type": ["application/x-www-form-urlencoded; charset=utf-8"], "host": ["iam.amazonaws.com"],
      "x-amz-date": ["20150830T123600Z"]}
can = fake.canonical_request("GET", "/?Version=2010-05-08&Action=ListUsers", VH.get,
                             ["content-type", "host", "x-amz-date"], b"")
eq(__import__("hashlib").sha256(can.encode()).hexdigest(),
   "f536975d06c0309214f805bb90ccff089219ecd68b2577efef23edd43b7e1a59", "test vector: canonical request hash")
eq(fake.signature("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "20150830T123600Z", "us-east-1", "iam", can)[1],
   "5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7", "test vector: signature")
st, root = ec2({"Action": "DescribeInstances"})
eq(st, 200, "signed DescribeInstances")
eq(root.tag, "{%s}DescribeInstancesResponse" % NS["e"], "response element and namespace")
eq(len(root.findall("e:reservationSet/e:item", NS)), 0, "no instances yet")
check(f(root, "requestId"), "requestId")
msg = expect_error({"Action": "DescribeInstances"}, 403, "SignatureDoesNotMatch", "wrong secret", secret="nope")
check("The Canonical String for this request should have been" in msg and "Action=DescribeInstances" not in msg
      and "\nhost:127.0.0.1:%s\n" % PORT in msg and "AWS4-HMAC-SHA256\n" in msg,
      "SignatureDoesNotMatch message carries canonical request and string to sign: %r" % msg)
expect_error({"Action": "DescribeInstances"}, 401, "AuthFailure", "unknown key", key="AKIDOTHER")
expect_error({"Action": "DescribeInstances"}, 401, "AuthFailure", "no Authorization", key=None)
expect_error({"Action": "DescribeInstances"}, 400, "RequestExpired", "date 10 min behind", skew=-600)
expect_error({"Action": "DescribeInstances"}, 400, "RequestExpired", "date 10 min ahead", skew=600)
st, root = ec2({"Action": "DescribeInstances"}, skew=-200)
eq(st, 200, "date 200 s off is within 5 min")
expect_error({"Action": "DescribeInstances"}, 400, "IncompleteSignature", "malformed Authorization",
             raw_auth="AWS4-HMAC-SHA256 Credential=AKIDFAKE/20250101/us-east-1/ec2/aws4_request")
expect_error({"Action": "DescribeInstances"}, 403, "SignatureDoesNotMatch", "region not served", region="eu-west-9")
st, root = ec2({"Action": "DescribeInstances"}, region="us-west-2")
eq(st, 200, "second region")
Q = {"Action": "DescribeInstances", "Filter.1.Name": "tag:spotdeck run", "Filter.1.Value.1": "a b/c~d+e*=&%"}
eq(ec2(Q, get=True)[0], 200, "GET with the parameters in a signed query string")
eq(err(ec2(Q, get=True, secret="nope")[1])[0], "SignatureDoesNotMatch", "GET with a wrong secret")
expect_error({"Action": "DescribeSnapshotz"}, 400, "InvalidAction", "unknown action")
expect_error({"Action": "RunInstances", "InstanceType": "g5.xlarge", "MinCount": "1", "MaxCount": "1"},
             400, "MissingParameter", "RunInstances without ImageId")
# the session-token flavour
p = subprocess.Popen([sys.executable, EC2, "--regions", "us-east-1", "--azs", "us-east-1a", "--access-key", KEY,
                      "--secret-key", SECRET, "--session-token", "TOK123"], stdout=subprocess.PIPE)
others.append(p)
B2 = "http://127.0.0.1:" + p.stdout.readline().decode().strip()
eq(ec2({"Action": "DescribeInstances"}, base=B2, token="TOK123")[0], 200, "session token signed")
expect_error({"Action": "DescribeInstances"}, 401, "AuthFailure", "session token missing", base=B2)
expect_error({"Action": "DescribeInstances"}, 401, "AuthFailure", "session token wrong", base=B2, token="TOK999")
p.terminate()
ok("SigV4: botocore-signed requests accepted; wrong secret 403, unknown/missing key 401, skew 400, "
   "malformed 400, session token checked")

# ---- RunInstances
st, root = run(token="tok-a", tags=(("spotdeck-run", "r1"), ("role", "worker")))
eq(st, 200, "RunInstances")
eq(root.tag, "{%s}RunInstancesResponse" % NS["e"], "RunInstancesResponse")
check(re.match(r"r-0[0-9a-f]{16}\Z", f(root, "reservationId") or ""), "reservationId")
eq(f(root, "ownerId"), "123456789012", "ownerId")
it = item_of(root)
IA = f(it, "instanceId")
check(re.match(r"i-0[0-9a-f]{16}\Z", IA), "instance id %r" % IA)
eq((f(it, "instanceState/code"), f(it, "instanceState/name")), ("0", "pending"), "pending at launch")
eq((f(it, "instanceType"), f(it, "placement/availabilityZone"), f(it, "instanceLifecycle"), f(it, "imageId")),
   ("g5.xlarge", "us-east-1a", "spot", "ami-0123456789abcdef0"), "instance fields")
check(re.match(r"sir-[a-z0-9]{8}\Z", f(it, "spotInstanceRequestId") or ""), "spotInstanceRequestId")
eq(f(it, "privateIpAddress"), "127.0.0.1", "privateIpAddress")
check(f(it, "ipAddress") is None, "no public IP while pending")
check(re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\Z", f(it, "launchTime")), "launchTime")
eq({i.findtext("e:key", namespaces=NS): i.findtext("e:value", namespaces=NS)
    for i in it.findall("e:tagSet/e:item", NS)}, {"spotdeck-run": "r1", "role": "worker"}, "tagSet")
check(re.match(r"127\.0\.0\.1:\d+\Z", f(it, "fakeImdsEndpoint") or ""), "fakeImdsEndpoint")
st, root = run(token="tok-a", tags=(("spotdeck-run", "r1"), ("role", "worker")))
eq((st, f(item_of(root), "instanceId")), (200, IA), "same ClientToken: same instance")
eq(sum(1 for i in ctl("state")["instances"] if i["client_token"] == "tok-a"), 1, "one instance for tok-a")
expect_error({"Action": "DescribeInstances", "InstanceId.1": "i-0000000000000000f"},
             400, "InvalidInstanceID.NotFound", "unknown instance id")
st, root = run(token="tok-a", itype="g4dn.xlarge")
eq((st, err(root)[0]), (400, "IdempotentParameterMismatch"), "same ClientToken, other type")
expect_error({"Action": "DescribeInstances", "InstanceId.1": "i-xyz"}, 400, "InvalidInstanceID.Malformed",
             "malformed instance id")
st, root = run(itype="g9.huge")
eq((st, err(root)[0]), (400, "InvalidParameterValue"), "unknown instance type")
st, root = run(az="us-west-2a")
eq((st, err(root)[0]), (400, "InvalidParameterValue"), "AZ of another region")
it = wait_state(IA, ("running",))
eq((f(it, "instanceState/code"), f(it, "ipAddress")), ("16", "127.0.0.1"), "running with ipAddress")
ok("RunInstances: pending -> running with ipAddress, ClientToken idempotent, mismatch, bad type/AZ refused")

# ---- quota, capacity
ctl("quota", {"vcpus": 4})
st, root = run()
eq((st, err(root)[0]), (400, "VcpuLimitExceeded"), "vCPU quota")
check("current vCPU limit of 4 allows" in err(root)[1], "quota message: %r" % err(root)[1])
ctl("quota", {"vcpus": 64})
ctl("capacity", {"az": "us-east-1b", "type": "g5.xlarge", "count": 1, "code": "InsufficientInstanceCapacity"})
st, root = run(az="us-east-1b")
eq((st, err(root)[0]), (500, "InsufficientInstanceCapacity"), "injected capacity error")
check("sufficient g5.xlarge capacity in the Availability Zone you requested (us-east-1b)" in err(root)[1],
      "capacity message: %r" % err(root)[1])
ctl("capacity", {"az": "us-east-1b", "count": 1, "code": "MaxSpotInstanceCountExceeded"})
st, root = run(az="us-east-1b", itype="g4dn.xlarge")
eq((st, err(root)[0]), (400, "MaxSpotInstanceCountExceeded"), "MaxSpotInstanceCountExceeded")
IB = launch(az="us-east-1b")
ok("VcpuLimitExceeded 400, InsufficientInstanceCapacity 500, MaxSpotInstanceCountExceeded 400, then capacity back")

# ---- filters and paging
r2 = [launch(tags=(("spotdeck-run", "r2"),), itype="g4dn.xlarge") for _ in range(6)]
launch(tags=(("spotdeck-run", "r3"),), itype="g4dn.xlarge")


def list_all(params, page=None):
    ids, tok, pages = [], None, 0
    while True:
        p = dict(params, Action="DescribeInstances")
        if page:
            p["MaxResults"] = str(page)
        if tok:
            p["NextToken"] = tok
        st, root = ec2(p)
        eq(st, 200, "DescribeInstances %r" % p)
        pages += 1
        ids += [f(i, "instanceId") for i in root.findall("e:reservationSet/e:item/e:instancesSet/e:item", NS)]
        tok = f(root, "nextToken")
        if not tok:
            return ids, pages


TAG = {"Filter.1.Name": "tag:spotdeck-run", "Filter.1.Value.1": "r2"}
ids, pages = list_all(TAG, page=5)
eq((sorted(ids), pages), (sorted(r2), 2), "tag filter, 5 a page")
st, root = ec2({"Action": "TerminateInstances", "InstanceId.1": r2[0]})
eq(st, 200, "terminate one r2")
LIVE = dict(TAG, **{"Filter.2.Name": "instance-state-name", "Filter.2.Value.1": "pending",
                    "Filter.2.Value.2": "running"})
eq(sorted(list_all(LIVE)[0]), sorted(r2[1:]), "tag + instance-state-name filter")
eq(list_all(dict(TAG, **{"Filter.2.Name": "instance-state-name", "Filter.2.Value.1": "shutting-down",
                         "Filter.2.Value.2": "terminated"}))[0], [r2[0]], "the terminated one still listed")
eq(list_all({"Filter.1.Name": "availability-zone", "Filter.1.Value.1": "us-east-1b"})[0], [IB], "AZ filter")
eq(list_all({})[0][:1], [IA], "launch order")
eq(len(list_all({})[0]), 9, "9 instances in us-east-1")
st, root = ec2({"Action": "DescribeInstances"}, region="us-west-2")
eq(len(root.findall("e:reservationSet/e:item", NS)), 0, "other region sees none")
expect_error({"Action": "DescribeInstances", "MaxResults": "2"}, 400, "InvalidParameterValue", "MaxResults < 5")
expect_error({"Action": "DescribeInstances", "Filter.1.Name": "flavour", "Filter.1.Value.1": "x"},
             400, "InvalidParameterValue", "unknown filter")
ok("DescribeInstances: tag:KEY, instance-state-name, availability-zone filters; paging 5+1; regions apart")

# ---- user terminate
st, root = ec2({"Action": "TerminateInstances", "InstanceId.1": IA})
it = root.find("e:instancesSet/e:item", NS)
eq((st, f(it, "instanceId"), f(it, "currentState/code"), f(it, "currentState/name"), f(it, "previousState/code"),
    f(it, "previousState/name")), (200, IA, "32", "shutting-down", "16", "running"), "TerminateInstances")
it = wait_state(IA, ("terminated",))
eq((f(it, "instanceState/code"), f(it, "stateReason/code"), f(it, "stateReason/message")),
   ("48", "Client.UserInitiatedShutdown", "Client.UserInitiatedShutdown: User initiated shutdown"),
   "user terminate reason")
check(f(it, "ipAddress") is None and f(it, "fakeImdsEndpoint") is None, "no IP / IMDS once terminated")
st, root = ec2({"Action": "TerminateInstances", "InstanceId.1": IA})
it = root.find("e:instancesSet/e:item", NS)
eq((st, f(it, "currentState/code"), f(it, "previousState/code")), (200, "48", "48"), "terminate again")
ok("TerminateInstances: 32/16, then terminated with Client.UserInitiatedShutdown; idempotent")

# ---- interruption, IMDSv2, startup scripts
SCRIPT = """#!/bin/bash
echo "start $SPOTDECK_FAKE_INSTANCE $AWS_EC2_METADATA_SERVICE_ENDPOINT pid $$"
trap 'echo got TERM; exit 0' TERM
while :; do sleep 0.1; done
"""
STUBBORN = "#!/bin/bash\necho \"stubborn $$\"\ntrap '' TERM\nwhile :; do sleep 0.1; done\n"
IC = launch(user_data=SCRIPT, tags=(("spotdeck-run", "r4"),))
ID = launch(user_data=STUBBORN, tags=(("spotdeck-run", "r4"),))
IE = launch(user_data=SCRIPT, tags=(("spotdeck-run", "r4"),))
it = wait_state(IC, ("running",))
IMDS = "http://" + f(it, "fakeImdsEndpoint")
wait_state(ID, ("running",))
wait_state(IE, ("running",))


def log_of(iid, pat, limit=5):
    end = time.time() + limit
    while True:
        try:
            m = re.search(pat, open(os.path.join(T, "vm", iid + ".log")).read())
        except OSError:
            m = None
        if m or time.time() > end:
            return m
        time.sleep(0.1)


m = log_of(IC, r"start (\S+) (\S+) pid (\d+)")
check(m, "startup script of %s did not log its start" % IC)
eq((m.group(1), m.group(2)), (IC, IMDS), "startup script env")
PID_C = int(m.group(3))
PID_D = int(log_of(ID, r"stubborn (\d+)").group(1))
PID_E = int(log_of(IE, r"start \S+ \S+ pid (\d+)").group(1))


def imds(method, path, headers=None):
    r = urllib.request.Request(IMDS + path, method=method, headers=headers or {}, data=b"" if method == "PUT" else None)
    try:
        with urllib.request.urlopen(r, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


ACT = "/latest/meta-data/spot/instance-action"
eq(imds("GET", ACT)[0], 401, "IMDS without token")
eq(imds("PUT", "/latest/api/token")[0], 400, "IMDS token without TTL")
eq(imds("PUT", "/latest/api/token", {"X-aws-ec2-metadata-token-ttl-seconds": "21601"})[0], 400, "TTL > 21600")
st, tok = imds("PUT", "/latest/api/token", {"X-aws-ec2-metadata-token-ttl-seconds": "21600"})
eq(st, 200, "IMDS token")
H = {"X-aws-ec2-metadata-token": tok}
eq(imds("GET", ACT, {"X-aws-ec2-metadata-token": "bogus"})[0], 401, "IMDS with a bogus token")
eq(imds("GET", ACT, H)[0], 404, "no instance-action yet")
eq(imds("GET", "/latest/meta-data/instance-id", H), (200, IC), "IMDS instance-id")
eq(imds("GET", "/latest/meta-data/placement/availability-zone", H), (200, "us-east-1a"), "IMDS AZ")
eq(imds("GET", "/latest/user-data", H), (200, SCRIPT), "IMDS user-data")
st, short = imds("PUT", "/latest/api/token", {"X-aws-ec2-metadata-token-ttl-seconds": "1"})
eq(st, 200, "1 s token")
time.sleep(1.2)
eq(imds("GET", "/latest/meta-data/instance-id", {"X-aws-ec2-metadata-token": short})[0], 401, "expired token")
REB = "/latest/meta-data/events/recommendations/rebalance"
eq(imds("GET", REB, H)[0], 404, "no rebalance yet")
ctl("rebalance", {"id": IC})
st, body = imds("GET", REB, H)
eq(st, 200, "rebalance recommendation")
check(re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\Z", json.loads(body)["noticeTime"]), "noticeTime: %r" % body)
t0 = time.time()
ctl("interrupt", {"id": IC, "notice_s": 1.5})
st, body = imds("GET", ACT, H)
eq(st, 200, "instance-action after the interruption")
act = json.loads(body)
eq(act["action"], "terminate", "instance-action action")
when = datetime.datetime.strptime(act["time"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)
check(abs(when.timestamp() - (t0 + 1.5)) <= 1.5, "instance-action time %s is not now + 1.5 s" % act["time"])
eq(imds("GET", ACT)[0], 401, "instance-action without token still 401")
eq(f(describe(IC), "instanceState/name"), "running", "running during the notice")
ctl("crash", {"id": IE})
st, root = ec2({"Action": "TerminateInstances", "InstanceId.1": ID})
eq(st, 200, "terminate the stubborn one")
it = wait_state(IC, ("terminated",))
check(time.time() - t0 >= 1.4, "terminated before the notice ran out")
eq((f(it, "instanceState/code"), f(it, "stateReason/code"), f(it, "stateReason/message")),
   ("48", "Server.SpotInstanceTermination", "Server.SpotInstanceTermination: Spot instance termination"),
   "interruption reason")
it = describe(IE)
eq((f(it, "instanceState/name"), f(it, "stateReason/code")), ("terminated", "Server.InternalError"), "crash")
eq(f(wait_state(ID, ("terminated",)), "stateReason/code"), "Client.UserInitiatedShutdown", "user terminate")
check(log_of(IC, "got TERM"), "startup script got no SIGTERM at power-off")
check(log_of(IE, "got TERM"), "crashed instance's script got no SIGTERM")


def dead(pid, limit):
    end = time.time() + limit
    while time.time() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


check(dead(PID_C, 3) and dead(PID_E, 3), "startup scripts still alive after power-off")
check(dead(PID_D, 4), "script ignoring SIGTERM not SIGKILLed 2 s later")
ok("interruption: IMDS instance-action 200 (401 without token), terminated with Server.SpotInstanceTermination; "
   "user terminate and crash differ; scripts run with the IMDS env and are killed")

# An interruption without a notice, gone from DescribeInstances at its
# power-off: instance-action stays 404, then NotFound by id and absent by tag.
IG = launch(tags=(("spotdeck-run", "r6"),))
IMDS_C, IMDS = IMDS, "http://" + f(wait_state(IG, ("running",)), "fakeImdsEndpoint")
st, tok_g = imds("PUT", "/latest/api/token", {"X-aws-ec2-metadata-token-ttl-seconds": "60"})
ctl("interrupt", {"id": IG, "notice_s": 0.5, "notice": False, "gone_after_s": 0})
eq(imds("GET", ACT, {"X-aws-ec2-metadata-token": tok_g})[0], 404, "no instance-action with notice false")
IMDS = IMDS_C
end = time.time() + 5
while True:
    st, root = ec2({"Action": "DescribeInstances", "InstanceId.1": IG})
    if st != 200:
        break
    check(time.time() < end and f(item_of(root), "instanceState/name") == "running",
          "listed %s after the power-off" % f(item_of(root), "instanceState/name"))
    time.sleep(0.05)
eq((st, err(root)[0]), (400, "InvalidInstanceID.NotFound"), "gone by id")
st, root = ec2({"Action": "DescribeInstances", "Filter.1.Name": "tag:spotdeck-run", "Filter.1.Value.1": "r6"})
eq((st, root.findall(".//e:instancesSet/e:item", NS)), (200, []), "gone by tag")
ok("interruption with notice false and gone_after_s 0: no instance-action, never listed shut down, NotFound")

# ---- spot prices
st, root = ec2({"Action": "DescribeSpotPriceHistory", "InstanceType.1": "g5.xlarge",
                "ProductDescription.1": "Linux/UNIX", "StartTime": "2026-01-01T00:00:00Z"})
eq(st, 200, "DescribeSpotPriceHistory")
rows = [(f(i, "instanceType"), f(i, "availabilityZone"), f(i, "spotPrice"), f(i, "productDescription"))
        for i in root.findall("e:spotPriceHistorySet/e:item", NS)]
eq(rows, [("g5.xlarge", "us-east-1a", "0.412300", "Linux/UNIX"), ("g5.xlarge", "us-east-1b", "0.390000",
          "Linux/UNIX")], "spot prices us-east-1")
check(all(re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.000Z\Z", f(i, "timestamp"))
          for i in root.findall("e:spotPriceHistorySet/e:item", NS)), "timestamps")
st, root = ec2({"Action": "DescribeSpotPriceHistory", "InstanceType.1": "g5.xlarge"}, region="us-west-2")
eq([f(i, "spotPrice") for i in root.findall("e:spotPriceHistorySet/e:item", NS)], ["0.500000"], "us-west-2")
st, root = ec2({"Action": "DescribeSpotPriceHistory", "AvailabilityZone": "us-east-1a", "MaxResults": "1"})
first = [f(i, "instanceType") for i in root.findall("e:spotPriceHistorySet/e:item", NS)]
st, root = ec2({"Action": "DescribeSpotPriceHistory", "AvailabilityZone": "us-east-1a", "MaxResults": "1",
                "NextToken": f(root, "nextToken")})
eq(first + [f(i, "instanceType") for i in root.findall("e:spotPriceHistorySet/e:item", NS)],
   ["g4dn.xlarge", "g5.xlarge"], "price paging")
eq(f(root, "nextToken"), "", "last page: empty nextToken")
ok("DescribeSpotPriceHistory: prices as given, 6 decimals, per region, paged")

# ---- zones, DryRun
st, root = ec2({"Action": "DescribeAvailabilityZones"})
eq((st, [(f(i, "zoneName"), f(i, "zoneState"), f(i, "regionName"))
         for i in root.findall("e:availabilityZoneInfo/e:item", NS)]),
   (200, [("us-east-1a", "available", "us-east-1"), ("us-east-1b", "available", "us-east-1")]), "zones us-east-1")
st, root = ec2({"Action": "DescribeAvailabilityZones", "Filter.1.Name": "zone-name", "Filter.1.Value.1": "*-2a"},
               region="us-west-2")
eq([f(i, "zoneName") for i in root.findall("e:availabilityZoneInfo/e:item", NS)], ["us-west-2a"], "zones us-west-2")
n0 = len(ctl("state")["instances"])
msg = expect_error({"Action": "RunInstances", "DryRun": "true", "ImageId": "ami-0123456789abcdef0",
                    "InstanceType": "g5.xlarge", "MinCount": "1", "MaxCount": "1",
                    "InstanceMarketOptions.MarketType": "spot"}, 412, "DryRunOperation", "DryRun")
# EC2 checks the request's parameters before the DryRun question.
expect_error({"Action": "RunInstances", "DryRun": "true", "ImageId": "not-an-ami", "InstanceType": "g5.xlarge",
              "MinCount": "1", "MaxCount": "1", "InstanceMarketOptions.MarketType": "spot"}, 400,
             "InvalidAMIID.Malformed", "DryRun with a malformed AMI id")
eq(msg, "Request would have succeeded, but DryRun flag is set.", "DryRun message")
eq(len(ctl("state")["instances"]), n0, "DryRun launched nothing")
ok("DescribeAvailabilityZones per region with filters; DryRun 412 DryRunOperation")

# ---- billing
bill = {b["id"]: b for b in ctl("billing")["instances"]}
b = bill[IA]
eq((b["seconds"], b["usd_per_hour"], b["usd"], b["az"], b["type"]), (60.0, 0.4123, 0.01, "us-east-1a", "g5.xlarge"),
   "billing: 60 s minimum at the AZ's price")
check(0 < b["run_seconds"] < 30 and not b["running"], "run_seconds %r" % b["run_seconds"])
eq((bill[IB]["usd_per_hour"], bill[r2[1]]["usd_per_hour"]), (0.39, 0.2), "prices per AZ and type")
check(bill[IB]["running"], "IB still running")
ok("billing: 60 s minimum, price of the AZ at launch")

# ---- injected failures
ctl("fail", {"action": "DescribeInstances", "status": 503, "code": "ServiceUnavailable", "count": 3})
for k in range(3):
    expect_error({"Action": "DescribeInstances"}, 503, "ServiceUnavailable", "503 storm %d" % k)
eq(ec2({"Action": "DescribeInstances"})[0], 200, "after the storm")
ctl("fail", {"status": 503, "code": "RequestLimitExceeded", "count": 1})
expect_error({"Action": "DescribeSpotPriceHistory"}, 503, "RequestLimitExceeded", "throttled")
ctl("fail", {"action": "RunInstances", "status": 500, "code": "InternalError", "count": 1, "after": True})
n0 = len(ctl("state")["instances"])
st, root = run(token="tok-lost", tags=(("spotdeck-run", "r5"),))
eq((st, err(root)[0]), (500, "InternalError"), "answer lost")
eq(len(ctl("state")["instances"]), n0 + 1, "the lost call launched one")
st, root = run(token="tok-lost", tags=(("spotdeck-run", "r5"),))
eq(st, 200, "retry with the same ClientToken")
eq(len(ctl("state")["instances"]), n0 + 1, "the retry launched nothing more")
eq([i["id"] for i in ctl("state")["instances"] if i["client_token"] == "tok-lost"], [f(item_of(root), "instanceId")],
   "retry returns the lost instance")
import threading
got = []
th = [threading.Thread(target=lambda: got.append(run(token="tok-race", tags=(("spotdeck-run", "r7"),))))
      for _ in range(6)]
[x.start() for x in th]
[x.join() for x in th]
eq(sorted({(st, f(item_of(root), "instanceId") is not None) for st, root in got}), [(200, True)], "6 at once")
eq(len({f(item_of(root), "instanceId") for _, root in got}), 1, "6 concurrent calls, one ClientToken: one id")
eq(sum(1 for i in ctl("state")["instances"] if i["client_token"] == "tok-race"), 1, "one instance for tok-race")
ctl("slow", {"seconds": 0.5, "count": 1})
t0 = time.time()
eq(ec2({"Action": "DescribeInstances"})[0], 200, "slow request")
check(time.time() - t0 >= 0.5, "slow control had no effect")
ok("503 storm, throttling, lost answer + ClientToken retry = one instance, slow")

# ---- log
log = ctl("log")["requests"]
text = json.dumps(log)
check(SECRET not in text and "Signature=" not in text and "AKIDFAKE" not in text
      and not re.search(r"[0-9a-f]{64}", text), "log leaks credentials: %s" % text)
check(any(e["code"] == "SignatureDoesNotMatch" for e in log), "log of the bad signature")
lost = [e for e in log if e["client_token"] == "tok-lost"]
eq([(e["action"], e["region"], e["status"], e["code"], e["auth"]) for e in lost],
   [("RunInstances", "us-east-1", 500, "InternalError", True), ("RunInstances", "us-east-1", 200, None, True)],
   "log of the lost call and its retry")
check(any(e["auth"] is False and e["code"] == "AuthFailure" for e in log), "log of the unsigned call")

# ---- addresses; the fake's exit kills the scripts
ctl("addresses", {"ips": ["198.18.0.11"]})
st, root = run(user_data=SCRIPT, tags=(("spotdeck-run", "r6"),))
it = item_of(root)
IF = f(it, "instanceId")
eq((f(it, "privateIpAddress"), f(it, "ipAddress")), ("198.18.0.11", None), "address from the pool, pending")
it = wait_state(IF, ("running",))
eq((f(it, "privateIpAddress"), f(it, "ipAddress")), ("198.18.0.11", "198.18.0.11"), "address from the pool, running")
IMDS = "http://" + f(it, "fakeImdsEndpoint")
st, tok = imds("PUT", "/latest/api/token", {"X-aws-ec2-metadata-token-ttl-seconds": "60"})
eq(imds("GET", "/latest/meta-data/local-ipv4", {"X-aws-ec2-metadata-token": tok}), (200, "198.18.0.11"), "local-ipv4")
eq(f(describe(launch()), "privateIpAddress"), "127.0.0.1", "pool used up: 127.0.0.1")
PID_F = int(log_of(IF, r"start \S+ \S+ pid (\d+)").group(1))
os.kill(PID, signal.SIGTERM)
check(dead(PID_F, 3), "startup script outlived the fake's SIGTERM")
ok("log without secrets; /_control/addresses; SIGTERM to the fake kills the startup scripts")
PY
