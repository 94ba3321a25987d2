#!/bin/sh
# tests/provider/gce/test-fake-gce.sh: tests/fake-cloud/gce.py, the fake Compute Engine
# the GCE provider is tested against, checked for the behaviours the
# provider relies on (../shared/reference/cloud-apis.md section 1): the
# service-account token flow, insert -> Operation -> RUNNING, requestId
# idempotency, 409 / sync 403 quota / async stockout, label filters with
# paging, preemption seen inside (metadata) and outside (TERMINATED or 404
# plus the compute.instances.preempted operation) and told apart from a
# user delete and a crash, billing's 1-minute minimum, startup scripts run
# and killed at power-off, the billing catalog's pages.  Client: urllib,
# with PyJWT + cryptography for the key and the signed assertion.
. "$(dirname "$0")/../../lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
"$PY" -c 'import jwt, cryptography' 2>/dev/null || {
	echo "SKIP: PyJWT or cryptography not importable by $PY" >&2; exit 77; }
tmpdir
"$PY" - "$top_srcdir/tests/fake-cloud/gce.py" "$T" <<'PY'
import atexit, json, os, subprocess, sys, threading, time, urllib.error, urllib.parse, urllib.request, uuid
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

GCE, T = sys.argv[1], sys.argv[2]
P, SA = "p1", "sd@p1.iam.gserviceaccount.com"
ZA, ZB, ZE = "us-central1-a", "us-central1-b", "europe-west4-a"
fakes = []
# An unexpected exception must not leave a fake (and its "VMs") behind.
atexit.register(lambda: [f.terminate() for f in fakes])


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    for f in fakes:
        f.terminate()
        try:
            print("--- fake stderr:\n" + open(f.errpath).read(), file=sys.stderr)
        except OSError:
            pass
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def eq(got, want, what):
    if got != want:
        fail("%s: got %r, want %r" % (what, got, want))


def ok(msg):
    print("ok: " + msg, flush=True)


key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
pub = os.path.join(T, "sa.pub")
with open(pub, "wb") as f:
    f.write(key.public_key().public_bytes(serialization.Encoding.PEM,
                                          serialization.PublicFormat.SubjectPublicKeyInfo))
prices = os.path.join(T, "prices.json")
with open(prices, "w") as f:
    json.dump({"n1-standard-8+nvidia-tesla-t4": 3.6, "n1-standard-4": 0.04, "nvidia-tesla-v100": 0.74}, f)
os.mkdir(os.path.join(T, "vm"))


def start_fake(*extra, nojwt=False):
    err = os.path.join(T, "fake%d.err" % len(fakes))
    # nojwt: the fake as started by a python without PyJWT
    py = [sys.executable, "-c", "import runpy, sys; sys.modules['jwt'] = None; sys.argv = sys.argv[1:]; "
          "runpy.run_path(sys.argv[0], run_name='__main__')"] if nojwt else [sys.executable]
    p = subprocess.Popen(py + [GCE, "--project", P, "--zones", ",".join([ZA, ZB, ZE]),
                          "--sa-email", SA, "--sa-public-key", pub, "--boot-s", "0.6", "--op-s", "0.3",
                          "--quota-gpus", "4", "--prices", prices] + list(extra),
                         stdout=subprocess.PIPE, stderr=open(err, "w"))
    p.errpath = err
    fakes.append(p)
    line = p.stdout.readline().strip()
    check(line.isdigit(), "gce.py printed no port: %r" % line)
    return "http://127.0.0.1:" + line.decode()


def call(base, method, path, body=None, token=None, headers=None, form=None, timeout=30):
    h = dict(headers or {})
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        h["Content-Type"] = "application/json"
    if form is not None:
        data = urllib.parse.urlencode(form).encode()
        h["Content-Type"] = "application/x-www-form-urlencoded"
    if token:
        h["Authorization"] = "Bearer " + token
    if method == "POST" and data is None:
        data = b""
    req = urllib.request.Request(base + path, data=data, method=method, headers=h)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            raw, st, hd = r.read(), r.status, r.headers
    except urllib.error.HTTPError as e:
        raw, st, hd = e.read(), e.code, e.headers
    try:
        return st, json.loads(raw), hd
    except ValueError:
        return st, raw.decode(), hd


def assertion(base, signer=key, **over):
    now = int(time.time())
    claims = {"iss": SA, "scope": "https://www.googleapis.com/auth/cloud-platform",
              "aud": base + "/token", "iat": now, "exp": now + 3600}
    claims.update(over)
    return jwt.encode(claims, signer, algorithm="RS256", headers={"kid": "k1"})


def get_token(base, a):
    return call(base, "POST", "/token",
                form={"grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer", "assertion": a})


B = start_fake("--run-startup-scripts", "--vm-log-dir", os.path.join(T, "vm"))
Z = "/compute/v1/projects/%s/zones/" % P
LINK = "https://www.googleapis.com/compute/v1/projects/%s/zones/" % P

# ---- token flow
st, tok, _ = get_token(B, assertion(B))
eq(st, 200, "good JWT")
eq((tok["token_type"], tok["expires_in"]), ("Bearer", 3599), "token answer")
TOK = tok["access_token"]
st, r, _ = get_token(B, assertion(B, signer=other))
eq((st, r.get("error"), r.get("error_description")), (400, "invalid_grant", "Invalid JWT Signature."), "bad signature")
st, r, _ = get_token(B, assertion(B, aud="https://oauth2.googleapis.com/token"))
eq((st, r.get("error")), (400, "invalid_grant"), "wrong aud")
old = int(time.time()) - 5000
st, r, _ = get_token(B, assertion(B, iat=old, exp=old + 3600))
eq((st, r.get("error")), (400, "invalid_grant"), "expired assertion")
st, r, _ = get_token(B, assertion(B, exp=int(time.time()) + 7200))
eq((st, r.get("error")), (400, "invalid_grant"), "assertion living 2 h")
st, r, _ = get_token(B, assertion(B, scope="https://www.googleapis.com/auth/devstorage.read_only"))
eq((st, r.get("error")), (400, "invalid_scope"), "scope without cloud-platform")
st, r, _ = call(B, "GET", Z + ZA + "/instances")
eq((st, r["error"]["errors"][0]["reason"], r["error"]["status"]), (401, "required", "UNAUTHENTICATED"), "no token")
st, r, _ = call(B, "GET", Z + ZA + "/instances", token="ya29.made-up")
eq((st, r["error"]["errors"][0]["reason"]), (401, "authError"), "unknown token")
st, r, _ = call(B, "GET", Z + ZA + "/instances", token=TOK)
eq(st, 200, "list with the token")
check("items" not in r, "empty list has no items key: %r" % r)
B2 = start_fake("--token-ttl", "1")
st, t2, _ = get_token(B2, assertion(B2))
eq(st, 200, "short token")
eq(call(B2, "GET", Z + ZA + "/instances", token=t2["access_token"])[0], 200, "short token while live")
time.sleep(1.3)
st, r, _ = call(B2, "GET", Z + ZA + "/instances", token=t2["access_token"])
eq((st, r["error"]["errors"][0]["reason"], r["error"]["message"]), (401, "authError", "Invalid Credentials"),
   "expired token")
fakes.pop().terminate()
B3 = start_fake(nojwt=True)
st, r, _ = get_token(B3, assertion(B3))
eq((st, r.get("error")), (500, "server_error"), "no PyJWT: assertions refused")
check("PyJWT" in r["error_description"], "no PyJWT: says why: %r" % r)
eq(call(B3, "GET", Z + ZA + "/instances")[0], 401, "no PyJWT: the API still answers")
fakes.pop().terminate()
ok("token flow: good JWT, bad signature/aud/exp/scope refused, 401 without or with a dead token")


def api(method, path, body=None, **kw):
    return call(B, method, path, body, token=TOK, **kw)


def ctl(path, body=None):
    st, r, _ = call(B, "POST" if body is not None else "GET", "/_control/" + path, body)
    eq(st, 200, "control " + path)
    return r


def spec(name, zone=ZA, gpus=1, action="DELETE", labels=None, script=None, extra_items=()):
    items = [{"key": "spotdeck-token", "value": "tok-" + name}] + list(extra_items)
    if script:
        items.append({"key": "startup-script", "value": script})
    return {"name": name, "machineType": "zones/%s/machineTypes/n1-standard-8" % zone,
            "guestAccelerators": [{"acceleratorType": "projects/%s/zones/%s/acceleratorTypes/nvidia-tesla-t4" % (P, zone),
                                   "acceleratorCount": gpus}],
            "scheduling": {"provisioningModel": "SPOT", "instanceTerminationAction": action,
                           "onHostMaintenance": "TERMINATE", "automaticRestart": False, "preemptible": True},
            "disks": [{"boot": True, "autoDelete": True, "type": "PERSISTENT", "initializeParams": {
                "sourceImage": "projects/deeplearning-platform-release/global/images/family/x",
                "diskSizeGb": "100"}}],
            "networkInterfaces": [{"network": "global/networks/default",
                                   "accessConfigs": [{"type": "ONE_TO_ONE_NAT", "name": "External NAT"}]}],
            "metadata": {"items": items}, "labels": labels if labels is not None else {"spotdeck-run": "r1"}}


def insert(name, rid=None, **kw):
    return api("POST", Z + "%s/instances?requestId=%s" % (kw.get("zone", ZA), rid or uuid.uuid4()), spec(name, **kw))


def wait_op(zone, op):
    st, r, _ = api("POST", Z + "%s/operations/%s/wait" % (zone, op["name"]))
    eq((st, r["status"]), (200, "DONE"), "wait " + op["name"])
    return r


def wait_status(zone, name, want, limit=10):
    end = time.time() + limit
    while time.time() < end:
        st, r, _ = api("GET", Z + "%s/instances/%s" % (zone, name))
        if (want == 404 and st == 404) or (st == 200 and r["status"] == want):
            return r
        time.sleep(0.05)
    fail("%s never reached %s (last %s %r)" % (name, want, st, r))


# ---- insert, Operation, RUNNING, idempotency, validation
SCRIPT = """#!/bin/bash
echo $$ >"$SPOTDECK_FAKE_INSTANCE.pid"
echo "$SPOTDECK_FAKE_INSTANCE $GCE_METADATA_HOST" >"$SPOTDECK_FAKE_INSTANCE.started"
trap 'echo term >"$SPOTDECK_FAKE_INSTANCE.term"; exit 0' TERM
while :; do sleep 0.1; done
"""
ctl("addresses", {"ips": ["198.18.0.11"]})
rid = str(uuid.uuid4())
st, op, _ = insert("i1", rid, script=SCRIPT)
eq(st, 200, "insert i1")
eq((op["kind"], op["operationType"], op["status"], op["progress"]), ("compute#operation", "insert", "PENDING", 0),
   "insert Operation")
eq(op["targetLink"], LINK + ZA + "/instances/i1", "targetLink")
check(op["name"].startswith("operation-") and op["selfLink"].endswith("/operations/" + op["name"]), "op name/selfLink")
st, op2, _ = insert("i1", rid, script=SCRIPT)
eq((st, op2.get("name")), (200, op["name"]), "same requestId, same Operation")
eq(api("GET", Z + ZA + "/instances/i1")[0], 404, "no instance before the Operation is DONE")
done = wait_op(ZA, op)
eq((done["progress"], "error" in done, "endTime" in done), (100, False, True), "insert DONE")
inst = wait_status(ZA, "i1", "RUNNING")
eq(inst["networkInterfaces"][0]["accessConfigs"][0]["natIP"], "198.18.0.11", "natIP from the pool")
eq(inst["networkInterfaces"][0]["networkIP"], "198.18.0.11", "networkIP from the pool")
eq(inst["labels"], {"spotdeck-run": "r1"}, "labels")
eq(inst["machineType"], LINK + ZA + "/machineTypes/n1-standard-8", "machineType URL")
eq(inst["id"], op["targetId"], "targetId is the instance id")
check(inst["lastStartTimestamp"] and inst["creationTimestamp"], "timestamps")
check(inst["fakeMetadataHost"].startswith("127.0.0.1:"), "fakeMetadataHost")
st, r, _ = api("GET", Z + ZA + "/instances")
eq([i["name"] for i in r["items"]], ["i1"], "two inserts with one requestId made one instance")
st, r, _ = insert("i1")
eq((st, r["error"]["errors"][0]["reason"]), (409, "alreadyExists"), "name reuse")
st, r, _ = insert("Bad_Name")
eq((st, r["error"]["errors"][0]["reason"]), (400, "invalid"), "bad name")
st, r, _ = insert("x1", zone="us-east9-z")
eq((st, r["error"]["errors"][0]["reason"]), (404, "notFound"), "unknown zone")
bad = spec("x2")
bad["scheduling"]["provisioningModel"] = "STANDARD"
eq(api("POST", Z + ZA + "/instances", bad)[0], 400, "non-Spot scheduling")
ok("insert: PENDING -> DONE -> RUNNING with natIP; requestId idempotent; 409, 400, 404")

# ---- sync quota, async stockout
st, r, _ = insert("big", gpus=4)
e = r["error"]
eq((st, e["message"], e["errors"][0]["reason"], e["errors"][0]["domain"]),
   (403, "Quota 'GPUS_ALL_REGIONS' exceeded. Limit: 4.0 globally.", "quotaExceeded", "usageLimits"), "sync quota")
ctl("quota", {"gpus": 8})
ctl("stockout", {"zone": ZB, "count": 1})
st, op, _ = insert("s1", zone=ZB)
eq((st, op["status"]), (200, "PENDING"), "insert into a stocked-out zone is accepted")
done = wait_op(ZB, op)
eq(done["error"]["errors"][0]["code"], "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", "async stockout")
eq((done["httpErrorStatusCode"], done["httpErrorMessage"]), (503, "SERVICE UNAVAILABLE"), "stockout http fields")
check("projects/%s/zones/%s" % (P, ZB) in done["error"]["errors"][0]["message"], "stockout message names the zone")
eq(api("GET", Z + ZB + "/instances/s1")[0], 404, "no instance after a stockout")
st, op, _ = insert("s2", zone=ZB, labels={"spotdeck-run": "r2"})
eq("error" in wait_op(ZB, op), False, "the next insert in the zone succeeds")
ok("403 GPUS_ALL_REGIONS quota; ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS in the Operation, no instance")

# ---- more instances, label filters, paging
ops = [insert(n, labels=l)[1] for n, l in
       (("i3", {"spotdeck-run": "r1"}), ("i4", {"spotdeck-run": "r1"}), ("i5", {"spotdeck-run": "r2"}))]
for o in ops:
    wait_op(ZA, o)
for n in ("i3", "i4", "i5"):
    wait_status(ZA, n, "RUNNING")
t_i4_running = time.time()
names, token, pages = [], None, 0
while True:
    q = {"filter": "labels.spotdeck-run = r1", "maxResults": "2"}
    if token:
        q["pageToken"] = token
    st, r, _ = api("GET", Z + ZA + "/instances?" + urllib.parse.urlencode(q))
    eq(st, 200, "filtered list")
    pages += 1
    names += [i["name"] for i in r.get("items", [])]
    token = r.get("nextPageToken")
    if not token:
        break
eq((sorted(names), pages), (["i1", "i3", "i4"], 2), "labels filter over two pages")
f = "(labels.spotdeck-run = r1) AND ((status = RUNNING) OR (status = STAGING))"
st, r, _ = api("GET", Z + ZA + "/instances?" + urllib.parse.urlencode({"filter": f}))
eq(sorted(i["name"] for i in r["items"]), ["i1", "i3", "i4"], "SkyPilot's filter form")
st, r, _ = api("GET", Z + ZA + "/instances?" + urllib.parse.urlencode({"filter": "labels.spotdeck-run = nope"}))
eq((st, "items" in r), (200, False), "no match, no items")
st, r, _ = api("GET", Z + ZA + "/instances?" + urllib.parse.urlencode({"filter": "cpuPlatform = x"}))
eq((st, r["error"]["errors"][0]["reason"]), (400, "invalid"), "unsupported filter")
st, r, _ = api("GET", "/compute/v1/projects/%s/aggregated/instances?%s" % (P, urllib.parse.urlencode(
    {"filter": "labels.spotdeck-run = r2"})))
eq(sorted(i["name"] for i in r["items"]["zones/" + ZA]["instances"]), ["i5"], "aggregated zone a")
eq([i["name"] for i in r["items"]["zones/" + ZB]["instances"]], ["s2"], "aggregated zone b")
eq(r["items"]["zones/" + ZE]["warning"]["code"], "NO_RESULTS_ON_PAGE", "aggregated empty zone")
ok("label filters (simple, SkyPilot's), paging, aggregated list")

# ---- in-VM metadata, startup script, preemption
host = inst["fakeMetadataHost"]
MD = "http://%s/computeMetadata/v1/instance/" % host
G = {"Metadata-Flavor": "Google"}
vm = os.path.join(T, "vm")
end = time.time() + 5
while not os.path.exists(os.path.join(vm, "i1.started")) and time.time() < end:
    time.sleep(0.05)
check(os.path.exists(os.path.join(vm, "i1.started")), "startup script of i1 did not run")
eq(open(os.path.join(vm, "i1.started")).read().split(), ["i1", host], "startup script's environment")
pid = int(open(os.path.join(vm, "i1.pid")).read())
st, v, hd = call(MD[:-1], "GET", "/preempted", headers=G)
eq((st, v), (200, "FALSE"), "preempted before")
etag = hd["ETag"]
check(etag, "ETag")
eq(call(MD[:-1], "GET", "/preempted")[0], 403, "no Metadata-Flavor")
eq(call(MD[:-1], "GET", "/preempted", headers=dict(G, **{"X-Forwarded-For": "1.2.3.4"}))[0], 403, "X-Forwarded-For")
eq(call(MD[:-1], "GET", "/attributes/spotdeck-token", headers=G)[:2], (200, "tok-i1"), "attribute")
eq(call(MD[:-1], "GET", "/name", headers=G)[:2], (200, "i1"), "instance/name")
eq(call(MD[:-1], "GET", "/zone", headers=G)[:2], (200, "projects/123456789012/zones/" + ZA), "instance/zone")
st, v, hd = call(MD[:-1], "GET", "/maintenance-event", headers=G)
eq(v, "NONE", "maintenance-event")
ctl("maintenance", {"name": "i1"})
st, v, _ = call(MD[:-1], "GET", "/maintenance-event?wait_for_change=true&timeout_sec=5&last_etag=" + hd["ETag"],
                headers=G)
eq(v, "TERMINATE_ON_HOST_MAINTENANCE", "maintenance-event after the control")
got = {}


def poll():
    t0 = time.time()
    st, v, _ = call(MD[:-1], "GET", "/preempted?wait_for_change=true&timeout_sec=20&last_etag=" + etag, headers=G)
    got.update(st=st, v=v, t=time.time() - t0)


th = threading.Thread(target=poll)
th.start()
time.sleep(0.3)
r = ctl("preempt", {"name": "i1", "notice_s": 1.5})
t_pre = r["time"]
th.join(10)
eq((got.get("st"), got.get("v")), (200, "TRUE"), "wait_for_change sees the preemption")
check(got["t"] < 1.3, "long-poll answered at the flip, not at the power-off (%.2f s)" % got["t"])
eq(api("GET", Z + ZA + "/instances/i1")[1]["status"], "RUNNING", "running during the notice")
check(not os.path.exists(os.path.join(vm, "i1.term")), "script untouched during the notice")
wait_status(ZA, "i1", 404)
check(time.time() - t_pre >= 1.5, "gone only after the notice")
check(os.path.exists(os.path.join(vm, "i1.term")), "startup script got SIGTERM at power-off")
time.sleep(0.3)
try:
    os.kill(pid, 0)
    fail("startup script %d still alive after power-off" % pid)
except ProcessLookupError:
    pass
pf = 'operationType="compute.instances.preempted" AND targetLink="%s"'
st, r, _ = api("GET", Z + ZA + "/operations?" + urllib.parse.urlencode({"filter": pf % (LINK + ZA + "/instances/i1")}))
eq(len(r.get("items", [])), 1, "one preempted op for i1")
o = r["items"][0]
eq((o["status"], o["user"], o["statusMessage"]), ("DONE", "system", "Instance was preempted."), "preempted op")
# instanceTerminationAction STOP: TERMINATED, not gone
st, op, _ = insert("i6", action="STOP")
wait_op(ZA, op)
wait_status(ZA, "i6", "RUNNING")
ctl("preempt", {"name": "i6", "notice_s": 1})
r = wait_status(ZA, "i6", "TERMINATED")
check("lastStopTimestamp" in r, "lastStopTimestamp")
st, r, _ = api("GET", Z + ZA + "/operations?" + urllib.parse.urlencode({"filter": pf % (LINK + ZA + "/instances/i6")}))
eq(len(r.get("items", [])), 1, "preempted op for i6")
# The operation published late (op_after_s after the power-off) and no
# notice inside: TERMINATED with no operation yet, then one whose endTime
# is still the power-off.
st, op, _ = insert("i7", action="STOP")
wait_op(ZA, op)
r = wait_status(ZA, "i7", "RUNNING")
mh = r["fakeMetadataHost"]
ctl("preempt", {"name": "i7", "notice_s": 0.3, "op_after_s": 1.5, "notice": False})
eq(call("http://%s/computeMetadata/v1/instance" % mh, "GET", "/preempted", headers=G)[:2], (200, "FALSE"),
   "no notice inside with notice false")
r = wait_status(ZA, "i7", "TERMINATED")
t_off = time.time()
flt = urllib.parse.urlencode({"filter": pf % (LINK + ZA + "/instances/i7")})
eq("items" in api("GET", Z + ZA + "/operations?" + flt)[1], False, "no preempted op at the power-off when late")
while "items" not in api("GET", Z + ZA + "/operations?" + flt)[1]:
    check(time.time() - t_off < 5, "the late preempted op never came")
    time.sleep(0.05)
o = api("GET", Z + ZA + "/operations?" + flt)[1]["items"][0]
eq(o["endTime"], r["lastStopTimestamp"], "the late op's endTime is the power-off")
ok("preemption: metadata TRUE at once (403 without the header), script killed, 404 / TERMINATED + preempted op; "
   "op_after_s publishes it late, notice false keeps the VM's flag FALSE")

# ---- user delete, crash: no preempted op
while time.time() - t_i4_running < 2:
    time.sleep(0.05)
drid = str(uuid.uuid4())
st, op, _ = api("DELETE", Z + ZA + "/instances/i4?requestId=" + drid)
eq((st, op["operationType"]), (200, "delete"), "delete")
eq(api("GET", Z + ZA + "/instances/i4")[1]["status"], "STOPPING", "STOPPING while deleting")
eq(api("DELETE", Z + ZA + "/instances/i4?requestId=" + drid)[1]["name"], op["name"], "delete idempotent")
wait_op(ZA, op)
eq(api("GET", Z + ZA + "/instances/i4")[0], 404, "deleted")
eq(api("DELETE", Z + ZA + "/instances/i4?requestId=" + str(uuid.uuid4()))[0], 404, "delete a missing instance")
st, r, _ = api("GET", Z + ZA + "/operations?" + urllib.parse.urlencode({"filter": pf % (LINK + ZA + "/instances/i4")}))
eq((st, "items" in r), (200, False), "no preempted op after a user delete")
ctl("crash", {"name": "i5"})
eq(api("GET", Z + ZA + "/instances/i5")[1]["status"], "TERMINATED", "crash")
st, r, _ = api("GET", Z + ZA + "/operations?" + urllib.parse.urlencode({"filter": pf % (LINK + ZA + "/instances/i5")}))
eq("items" in r, False, "no preempted op after a crash")
st, r, _ = api("GET", Z + ZA + "/operations?" + urllib.parse.urlencode(
    {"filter": 'operationType = "delete"'}))
eq([o["targetLink"].rsplit("/", 1)[1] for o in r["items"]], ["i4"], "plain operationType filter")
ok("user delete (idempotent, 404 after) and crash leave no preempted op")

# ---- billing
b = {i["name"]: i for i in ctl("billing")["instances"]}
i4 = b["i4"]
eq((i4["seconds"], i4["usd"], i4["running"]), (60.0, 0.06, False), "i4 billed the 1-minute minimum")
check(2 <= i4["run_seconds"] < 10, "i4 ran about 2 s (%r)" % i4["run_seconds"])
eq(b["i5"]["running"], False, "crash stops billing")
eq(b["i3"]["running"], True, "i3 still billed")
ok("billing: ~2 s of running bills 60 s, $0.06 at $3.60/h")

# ---- injected faults; "after" loses the answer, the requestId retry finds the op
ctl("fail", {"prefix": Z + ZB + "/instances", "status": 503, "count": 1})
st, r, _ = api("GET", Z + ZB + "/instances")
eq((st, r["error"]["errors"][0]["reason"]), (503, "backendError"), "injected 503")
eq(api("GET", Z + ZB + "/instances")[0], 200, "storm over")
ctl("fail", {"prefix": Z + ZB + "/instances", "status": 503, "count": 1, "after": True})
rid = str(uuid.uuid4())
eq(insert("s3", rid, zone=ZB)[0], 503, "answer lost")
st, op, _ = insert("s3", rid, zone=ZB)
eq(st, 200, "retry with the same requestId")
wait_op(ZB, op)
st, r, _ = api("GET", Z + ZB + "/instances?filter=name+%3D+s3")
eq(len(r["items"]), 1, "one s3 after a lost answer and a retry")
ok("5xx storm in the GCE error shape; lost answer + requestId retry makes one instance")

# ---- billing catalog
skus, token, pages = [], "", 0
eq(call(B, "GET", "/v1/services/6F81-5844-456A/skus?currencyCode=USD")[0], 401, "catalog without credentials")
while True:
    st, r, _ = api("GET", "/v1/services/6F81-5844-456A/skus?currencyCode=USD&pageToken=" + token)
    eq(st, 200, "skus page")
    check(len(r["skus"]) <= 2, "page size 2")
    skus += r["skus"]
    pages += 1
    token = r.get("nextPageToken", "")
    if not token:
        break
# Per key and region: the Spot SKU, after an OnDemand one at 3x (and, for
# a GPU, a Virtual Workstation one at 1.5x) that a careless reader takes.
eq((len(skus), pages), (14, 7), "(2 + 2 + 3) SKUs x 2 regions over 7 pages")
spot = [s for s in skus if s["category"]["usageType"] == "Preemptible" and "Workstation" not in s["description"]]
eq(len(spot), 6, "3 Spot prices x 2 regions")
t4 = [s for s in spot if s["serviceRegions"] == ["us-central1"] and "nvidia-tesla-t4" in s["description"]]
eq(len(t4), 1, "T4 VM SKU in us-central1")
pe = t4[0]["pricingInfo"][0]["pricingExpression"]
eq((pe["usageUnit"], pe["tieredRates"][0]["unitPrice"]), ("h", {"currencyCode": "USD", "units": "3", "nanos": 600000000}),
   "unit price 3.6")
for s in skus:
    check(("Spot Preemptible" in s["description"]) == (s["category"]["usageType"] == "Preemptible"),
          "description " + s["description"])
    eq(s["category"]["resourceFamily"], "Compute", "category")
od = [s for s in skus if s["serviceRegions"] == ["us-central1"] and s["category"]["usageType"] == "OnDemand"
      and "nvidia-tesla-t4" in s["description"]]
eq(od[0]["pricingInfo"][0]["pricingExpression"]["tieredRates"][0]["unitPrice"]["units"], "10", "OnDemand at 3x")
v100 = [s for s in spot if s["description"].startswith("Nvidia Tesla V100 GPU")]
eq((len(v100), v100[0]["category"]["resourceGroup"]), (2, "GPU"), "GPU SKU")
ok("catalog: 14 SKUs over 7 pages, 6 of them Spot, units + nanos")

# ---- what spotdeck doctor reads: project, zone, machine type, GPU, region, image
PR = "/compute/v1/projects/%s" % P
st, r, _ = api("GET", PR)
eq((st, r["quotas"][0]["metric"], r["quotas"][0]["limit"]), (200, "GPUS_ALL_REGIONS", 8.0), "projects.get quota")
live = r["quotas"][0]["usage"]
check(live >= 3, "GPUS_ALL_REGIONS usage counts the live GPUs (%r)" % live)
eq(api("GET", Z + ZE)[1]["status"], "UP", "zones.get")
eq(api("GET", Z + ZA + "/machineTypes/n1-standard-8")[1]["guestCpus"], 8, "machineTypes.get")
eq(api("GET", Z + ZA + "/machineTypes/bogus")[0], 404, "unknown machine type")
eq(api("GET", Z + ZA + "/acceleratorTypes/nvidia-tesla-t4")[1]["maximumCardsPerInstance"], 4, "acceleratorTypes.get")
eq(api("GET", Z + ZA + "/acceleratorTypes/nvidia-bogus")[0], 404, "unknown GPU")
st, r, _ = api("GET", PR + "/regions/us-central1")
t4q = [x for x in r["quotas"] if x["metric"] == "PREEMPTIBLE_NVIDIA_T4_GPUS"]
eq((st, len(t4q)), (200, 1), "regions.get T4 quota")
check(t4q[0]["usage"] >= 3, "region usage counts its live T4s")
eq(api("GET", PR + "/regions/asia-east1")[0], 404, "region outside --zones")
st, r, _ = api("GET", "/compute/v1/projects/deeplearning-platform-release/global/images/family/common-cu124")
eq((st, r["status"], r["diskSizeGb"]), (200, "READY", "50"), "images.get from a family")
ok("projects/zones/regions/machineTypes/acceleratorTypes/images answer as doctor reads them")

# ---- the VM's own token from its metadata server works for the API
st, i3 = api("GET", Z + ZA + "/instances/i3")[:2]
st, r, _ = call("http://" + i3["fakeMetadataHost"], "GET",
                "/computeMetadata/v1/instance/service-accounts/default/token", headers=G)
eq((st, r["token_type"]), (200, "Bearer"), "metadata token")
eq(call(B, "GET", Z + ZA + "/instances/i3", token=r["access_token"])[0], 200, "metadata token is good for the API")
ok("in-VM service-account token")

# ---- request log
log = ctl("log")["requests"]
check(not any("Authorization" in json.dumps(e) or TOK in json.dumps(e) for e in log), "log leaks the token")
ins = [e for e in log if e["method"] == "POST" and e["path"].endswith("/instances") and e["status"] == 200]
check(ins and all(e["request_id"] and e["auth"] for e in ins), "inserts logged with requestId and auth")
check(any(e["auth"] is False and e["status"] == 401 for e in log), "unauthenticated request logged")
ok("request log: requestId and auth presence, no secrets")

fakes[0].terminate()
fakes[0].wait(5)
PY
