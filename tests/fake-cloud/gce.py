#!/usr/bin/env python3
"""A fake of Google Compute Engine (REST v1), its OAuth2 token endpoint and
the Cloud Billing Catalog, for spotdeck's GCE provider.  It behaves as
../../shared/reference/cloud-apis.md section 1 documents Google's API.
Python standard library only; PyJWT and cryptography are needed only to
verify token assertions (without them the fake still starts and answers
POST /token with 500 and a message saying so).  Binds 127.0.0.1 on an
ephemeral port and prints the port on its first stdout line.

  gce.py --project P --zones us-central1-a,us-central1-b,europe-west4-a
         --sa-email E --sa-public-key PEM_PATH [--token-ttl 3599]
         [--boot-s 1.0] [--op-s 0.5] [--quota-gpus 8] [--prices JSON_PATH]
         [--run-startup-scripts --vm-log-dir DIR]
         [--vm-sshd --vm-ssh-port 2222 --vm-log-dir DIR]

API (base http://127.0.0.1:PORT, standing for https://compute.googleapis.com,
https://oauth2.googleapis.com and https://cloudbilling.googleapis.com):
  POST /token   form grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer
        &assertion=JWT: RS256 checked with --sa-public-key, header kid
        present, iss = --sa-email, aud = http://127.0.0.1:PORT/token, scope
        has .../auth/cloud-platform, exp - iat <= 3600, exp and iat within
        60 s leeway -> {"access_token","expires_in","token_type":"Bearer"};
        else 400 {"error":"invalid_grant"|"invalid_scope"|
        "unsupported_grant_type","error_description"}.
  Every /compute/v1/... request needs "Authorization: Bearer <live token>"
        (401 UNAUTHENTICATED: reason "required" without one, "authError"
        "Invalid Credentials" with an unknown or expired one).
  POST   /compute/v1/projects/P/zones/Z/instances?requestId=UUID   insert
  GET    /compute/v1/projects/P/zones/Z/instances?filter=&maxResults=&pageToken=
  GET    /compute/v1/projects/P/zones/Z/instances/N
  DELETE /compute/v1/projects/P/zones/Z/instances/N?requestId=UUID
  GET    /compute/v1/projects/P/aggregated/instances?filter=
         (every zone of --zones has a key: "instances" or, with none, a
         "warning" {code NO_RESULTS_ON_PAGE} as GCE writes it; one page)
  GET    /compute/v1/projects/P/zones/Z/operations?filter=&maxResults=&pageToken=
  GET    /compute/v1/projects/P/zones/Z/operations/NAME
  POST   /compute/v1/projects/P/zones/Z/operations/NAME/wait   (returns at
         DONE or after 120 s)
  GET    /compute/v1/projects/P   quotas [GPUS_ALL_REGIONS {limit = the
         quota, usage = the GPUs counted against it}]
  GET    /compute/v1/projects/P/zones/Z   status UP
  GET    /compute/v1/projects/P/regions/R   (R a region of --zones) quotas
         PREEMPTIBLE_NVIDIA_<model>_GPUS, limit = the GPU quota, usage the
         region's live GPUs of that type
  GET    /compute/v1/projects/P/zones/Z/machineTypes/M   any M of the form
         FAMILY-{standard,highmem,highcpu,highgpu,megagpu,ultragpu}-N
  GET    /compute/v1/projects/P/zones/Z/acceleratorTypes/A   A in the
         ACCELERATORS table below (every zone has all), with
         maximumCardsPerInstance; else 404
  GET    /compute/v1/projects/ANY/global/images/family/F (name F-v20250101)
         and .../global/images/NAME: READY, diskSizeGb "50", for any image
         project other than P (P has no images of its own: 404)
  GET    /v1/services/6F81-5844-456A/skus?currencyCode=USD&pageToken=
         (Bearer token or key=...; 2 SKUs a page)
  Filters: FIELD = VALUE and FIELD != VALUE (VALUE bare or "quoted"),
  parentheses, AND, OR and juxtaposition (= AND); OR binds tighter than
  AND as in Google's filter grammar (AIP-160).  Instance fields: name,
  status, labels.KEY; operation fields: name, status, operationType,
  targetLink, targetId, user.  Anything else: 400 invalid.

Behaviour:
  insert: 400 invalid/required for a bad name, a missing machineType or
  guestAccelerators, scheduling.provisioningModel other than SPOT, labels
  not an object, a requestId that is not a UUID; 404 notFound for a zone
  not in --zones or another project; the same requestId again returns the
  first Operation (nothing done twice); 409 alreadyExists for a name in use
  in the zone (an insert in flight counts); 403 quotaExceeded "Quota
  'GPUS_ALL_REGIONS' exceeded. Limit: N.0 globally." when the GPUs of the
  instances not TERMINATED plus inserts in flight plus the request pass the
  quota.  Otherwise an Operation PENDING (it has no RUNNING step and the
  instance is 404 until it is DONE); --op-s later it is DONE and
  either carries ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS (httpErrorStatusCode
  503) when a stockout was injected for the zone (no instance), or the
  instance appears PROVISIONING, STAGING at --boot-s/2, RUNNING at --boot-s.
  Instance JSON carries URLs for machineType, zone, acceleratorType as GCE
  does; natIP/networkIP are 127.0.0.1 unless /_control/addresses gave a
  pool, natIP only where the request asked for accessConfigs; timestamps are RFC 3339 with milliseconds and a fixed -07:00
  offset (GCE writes Pacific time).
  delete: Operation (RUNNING at once); the instance is STOPPING at once and gone (404) --op-s
  later; 404 for a missing instance; idempotent by requestId.
  preemption (/_control/preempt): in-VM instance/preempted is TRUE at once;
  after notice_s the VM powers off (STOPPING), a DONE operation
  compute.instances.preempted (name systemevent-..., user "system",
  statusMessage "Instance was preempted.") is recorded (op_after_s after
  the power-off when the control asks it late), and --op-s later
  the instance is TERMINATED (instanceTerminationAction STOP, the default)
  or gone (DELETE).  crash (/_control/crash): TERMINATED at once, no
  operation at all.  A user delete records only its delete operation.
  Nothing on the instance itself (no statusMessage) tells a preemption
  from a crash: only the operation does, as on GCE.
  Billing: from RUNNING (lastStartTimestamp) to power-off (end of notice,
  end of delete, crash), per second with a 60 s minimum.  --prices JSON:
  {"MACHINE+GPU": usd_per_hour} for the whole VM (GPU the accelerator's
  short name, "MACHINE+GPUxN" when acceleratorCount N > 1), or component
  prices {"MACHINE": h, "GPU": h} summed as MACHINE + GPU x count; a VM
  with no price costs 0 (a line on stderr says so).  The catalog has one
  SKU per --prices key in every region of --zones: GPU keys ("nvidia-...")
  as resourceGroup GPU "Nvidia Tesla T4 GPU attached to Spot Preemptible
  VMs running in <region>", machine keys as resourceGroup N1Standard etc.
  "Spot Preemptible <MACHINE> Instance running in <region>", whole-VM
  keys as resourceGroup GPU "<MACHINE> with <GPU> Spot Preemptible VM
  running in <region>" (fake-only: Google has no whole-VM SKUs).  As
  Google prices N1 and most families, "FAMILY-core" and "FAMILY-ram" keys
  (USD per vCPU-hour, per GiB-hour) price a VM as vCPUs x core + memory
  GiB x ram + GPU x count (machineTypes.get's guestCpus and memoryMb), and
  the catalog has them as resourceGroup CPU "Spot Preemptible N1
  Predefined Instance Core running in <region>" and RAM "... Instance Ram
  ..." (usageUnit GiBy.h).  A key "REGION/KEY" prices KEY in REGION only
  (in billing and in the catalog).  Before each Spot SKU the catalog lists
  what a careless reader would take for it: the OnDemand SKU of the same
  thing at 3x the price and, for a GPU, its Virtual Workstation SKU at
  1.5x, as the real catalog has them.

In-VM metadata (fake-only plumbing): each instance gets its own listener on
127.0.0.1 from creation to power-off; the instance JSON names it in the
top-level field "fakeMetadataHost": "127.0.0.1:PORT" (not in GCE; null
once the VM is off).  It serves /computeMetadata/v1/instance/{preempted,maintenance-event,name,zone,
id,attributes/KEY,service-accounts/default/token (a fresh API token)} and
/computeMetadata/v1/project/{project-id,numeric-project-id}: 403 without "Metadata-Flavor: Google" or with
X-Forwarded-For, ETag on every answer, ?wait_for_change=true&last_etag=&
timeout_sec= as tests/fake-metadata.py.  instance/zone is
projects/123456789012/zones/Z (123456789012 is the fake's project number).
--run-startup-scripts: at RUNNING the instance's startup-script metadata
runs as /bin/bash FILE in its own process group, cwd and log in
--vm-log-dir (NAME.log), env GCE_METADATA_HOST=127.0.0.1:PORT and
SPOTDECK_FAKE_INSTANCE=NAME; at power-off the group gets SIGTERM, SIGKILL
2 s later.  The fake kills every group when it exits on SIGTERM/SIGINT
(not on SIGKILL: the groups are sessions of their own and outlive it).

--vm-sshd (fake-only plumbing, for the gce provider's end-to-end tests):
each instance gets an address of its own on loopback, 127.X.Y.(10+k) for
the k-th instance created, X.Y drawn at start (unless /_control/addresses
gave a pool), and at
RUNNING a real /usr/sbin/sshd of its own there on --vm-ssh-port, as a
VM's guest environment runs one: host key DIR/ssh_host_ed25519_key (made
once), authorized keys from the instance's "ssh-keys" metadata (lines
USER:KEY; only the keys for the user the fake runs as, who is the only
one a VM's sshd lets in here), and for every session the environment
GCE_METADATA_HOST=127.0.0.1:PORT (the VM's metadata listener),
SPOTDECK_FAKE_INSTANCE=NAME and TMPDIR=DIR/NAME.tmp.  At power-off (delete,
preemption at the end of its notice, crash) the VM's sshd and every
process whose environment holds SPOTDECK_FAKE_INSTANCE=NAME get SIGKILL:
the machine is gone at once, as a powered-off VM is.

Control (no auth, not logged):
  POST /_control/stockout  {"zone": Z, "count": N}  next N inserts in Z fail
  POST /_control/quota     {"gpus": N}
  POST /_control/preempt   {"name": N, "zone": Z (optional), "notice_s": 30,
       "op_after_s": 0, "notice": true}  op_after_s > 0: the
       compute.instances.preempted operation is recorded that many seconds
       after the power-off instead of at it (Google does not document when
       it appears; a reader must not expect it at the first look), its
       endTime still the power-off; "notice": false leaves the in-VM
       instance/preempted FALSE (fault injection: a notice the VM's
       watcher never hears, so that only the cloud can tell)
  POST /_control/crash     {"name": N, "zone": Z (optional)}
  POST /_control/maintenance {"name": N, "zone": Z (optional), "value":
       "TERMINATE_ON_HOST_MAINTENANCE" (default)}  in-VM
       instance/maintenance-event only; nothing else happens
  POST /_control/fail      {"prefix": "/compute/v1/...", "status": 503,
                            "count": N, "after": false, "retry_after": S,
                            "method": "POST" (optional: that method only)}
       next N requests under prefix get status with GCE's error body
       (503 and others backendError UNAVAILABLE, 500 backendError
       INTERNAL, 429 and 403 rateLimitExceeded); "after": true does the
       request first and loses the answer (what requestId retries are for)
  POST /_control/slow      {"seconds": S, "count": N, "prefix": "/" (optional),
                            "method": "POST" (optional)}  the next N requests
       under prefix (of that method) wait S seconds before the fake
       handles them
  POST /_control/addresses {"ips": ["198.18.0.11", ...]}  natIP/networkIP
       of the next instances, one each
  GET  /_control/log       {"requests": [{time, method, path, query (no
       key/access_token), status, request_id, auth (bool: Authorization
       present, never its value)}]}
  GET  /_control/state     {"instances": [...], "operations": [...]}
  GET  /_control/secrets   {"tokens": [every access token issued]}: for a
       test that greps what spotdeck wrote for them (fake-only)
  GET  /_control/billing   {"instances": [{name, zone, seconds (billed,
       >= 60), run_seconds (exact), running, usd, usd_per_hour,
       price_key}], "total_usd"} (usd rounded to the cent here only;
       instances that never reached RUNNING are not listed)
"""
import argparse, base64, hashlib, json, os, re, secrets, signal, sys
import pwd, threading, time, urllib.parse, uuid
from http.server import BaseHTTPRequestHandler

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fakevm  # noqa: E402
from fakevm import (Server, billing, kill_all_and_exit, kill_group, kill_marked, later,  # noqa: E402
                    next_vm_ip, run_script, send, start_listener, stop_listener, stop_sshd, vm_net,
                    wait_for_change)

try:
    import jwt  # PyJWT, with cryptography for RS256
except ImportError:  # pragma: no cover
    jwt = None

API = "https://www.googleapis.com/compute/v1/"
SCOPE = "https://www.googleapis.com/auth/cloud-platform"
PROJECT_NUMBER = "123456789012"
CATALOG = "/v1/services/6F81-5844-456A/skus"
NAME_RE = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?\Z")
MACHINE_RE = re.compile(r"([a-z][a-z0-9]*)-(standard|highmem|highcpu|highgpu|megagpu|ultragpu)-(\d+)g?\Z")
# acceleratorTypes every zone of the fake has: model (as in quota names
# PREEMPTIBLE_NVIDIA_<model>_GPUS), maximumCardsPerInstance
ACCELERATORS = {"nvidia-tesla-t4": ("T4", 4), "nvidia-tesla-v100": ("V100", 8), "nvidia-tesla-p100": ("P100", 4),
                "nvidia-tesla-p4": ("P4", 4), "nvidia-l4": ("L4", 8), "nvidia-tesla-a100": ("A100", 16),
                "nvidia-a100-80gb": ("A100_80GB", 8), "nvidia-h100-80gb": ("H100_80GB", 8)}

cond = threading.Condition()   # the one lock around all state
S = {
    "tokens": {},        # token -> expiry (time.time())
    "instances": {},     # (zone, name) -> Inst
    "reserved": {},      # (zone, name) -> gpus, inserts in flight
    "ops": {},           # (zone, name) -> op dict
    "op_order": [],      # (zone, name) in creation order
    "request_ids": {},   # requestId -> (zone, op name)
    "stockout": {},      # zone -> count
    "fails": [],
    "slows": [],
    "addresses": [],
    "next_vm_ip": 0,
    "vm_net": vm_net(),  # (X, Y): this fake's VMs are 127.X.Y.(10+k)
    "log": [],
    "billing": [],       # Inst objects that reached RUNNING
    "procs": [],         # every startup-script process started
}
A = None          # parsed arguments
PORT = None
PRICES = {}
PUBKEY = None


def rfc3339(t):
    t -= 7 * 3600
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".%03d-07:00" % (int(t * 1000) % 1000)


def new_id():
    return str(secrets.randbits(63) | (1 << 60))


def region_of(zone):
    return zone.rsplit("-", 1)[0]


def zone_url(zone):
    return API + "projects/%s/zones/%s" % (A.project, zone)


def gce_error(code, message, reason, domain="global", status=None, extra=None):
    e = {"message": message, "domain": domain, "reason": reason}
    if extra:
        e.update(extra)
    body = {"error": {"code": code, "message": message, "errors": [e]}}
    if status:
        body["error"]["status"] = status
    return code, body


def not_found(resource):
    return gce_error(404, "The resource '%s' was not found" % resource, "notFound")


def invalid(message):
    return gce_error(400, message, "invalid")


class ApiError(Exception):
    def __init__(self, answer):
        self.answer = answer


# ---------------------------------------------------------------- filters

TOKEN_RE = re.compile(r'\s*(?:(\()|(\))|(!=|=)|"((?:[^"\\]|\\.)*)"|([^\s()=!"]+))')


def parse_filter(text, fields):
    """Returns a predicate over dicts; raises ApiError(400) on anything
    outside the grammar in the docstring."""
    toks, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = TOKEN_RE.match(text, pos)
        if not m or m.end() == pos:
            raise ApiError(invalid("Invalid value for field 'filter': '%s'. Invalid list filter expression." % text))
        pos = m.end()
        if m.group(1):
            toks.append(("(", None))
        elif m.group(2):
            toks.append((")", None))
        elif m.group(3):
            toks.append(("op", m.group(3)))
        elif m.group(4) is not None:
            toks.append(("str", re.sub(r"\\(.)", r"\1", m.group(4))))
        else:
            w = m.group(5)
            toks.append(("kw", w) if w in ("AND", "OR") else ("word", w))
    i = [0]

    def peek():
        return toks[i[0]] if i[0] < len(toks) else (None, None)

    def bad(why):
        raise ApiError(invalid("Invalid value for field 'filter': '%s'. %s" % (text, why)))

    def term():
        kind, val = peek()
        if kind == "(":
            i[0] += 1
            e = conj()
            if peek()[0] != ")":
                bad("Missing ')'.")
            i[0] += 1
            return e
        if kind != "word":
            bad("Expected a field name.")
        field = val
        if not (field in fields or (field.startswith("labels.") and "labels" in fields)):
            bad("Unsupported field '%s' in the fake." % field)
        i[0] += 1
        kind, op = peek()
        if kind != "op":
            bad("Expected = or !=.")
        i[0] += 1
        kind, value = peek()
        if kind not in ("word", "str"):
            bad("Expected a value.")
        i[0] += 1

        def get(d):
            if field.startswith("labels."):
                return (d.get("labels") or {}).get(field[7:])
            v = d.get(field)
            return None if v is None else str(v)
        if op == "=":
            return lambda d: get(d) == value
        return lambda d: get(d) != value

    def disj():
        parts = [term()]
        while peek() == ("kw", "OR"):
            i[0] += 1
            parts.append(term())
        return lambda d: any(p(d) for p in parts)

    def conj():
        parts = [disj()]
        while True:
            kind, val = peek()
            if (kind, val) == ("kw", "AND"):
                i[0] += 1
                parts.append(disj())
            elif kind in ("(", "word"):
                parts.append(disj())
            else:
                break
        return lambda d: all(p(d) for p in parts)

    if not toks:
        return lambda d: True
    e = conj()
    if i[0] != len(toks):
        bad("Unexpected '%s'." % (peek()[1] or peek()[0]))
    return e


def page(items, q, default=500):
    try:
        n = int(q.get("maxResults", default))
        start = int(base64.urlsafe_b64decode(q["pageToken"].encode()).decode()) if q.get("pageToken") else 0
    except (ValueError, UnicodeDecodeError, base64.binascii.Error):
        raise ApiError(invalid("Invalid value for field 'pageToken' or 'maxResults'."))
    if n < 1 or n > 500:
        raise ApiError(invalid("Invalid value for field 'maxResults': '%s'. Must be in the range [0, 500]." % n))
    chunk = items[start:start + n]
    token = base64.urlsafe_b64encode(str(start + n).encode()).decode() if start + n < len(items) else None
    return chunk, token


# ---------------------------------------------------------------- instances

class Inst:
    def __init__(self, zone, name, body, gpus, ip):
        self.zone, self.name, self.gpus = zone, name, gpus
        self.id = new_id()
        self.status = "PROVISIONING"
        self.created = time.time()
        self.started = None       # RUNNING since (billing start)
        self.stopped = None       # power-off (billing end)
        self.preempted = False
        self.meta = {"preempted": "FALSE", "maintenance-event": "NONE"}
        self.meta_version = {"preempted": 1, "maintenance-event": 1}
        self.proc = None
        self.sshd = None
        self.msrv = None
        self.alive = True         # False once deleted / gone
        sched = dict(body.get("scheduling") or {})
        sched.setdefault("instanceTerminationAction", "STOP")
        self.sched = sched
        mt = body["machineType"].rsplit("/", 1)[-1]
        self.machine = mt
        self.accels = []
        for g in body["guestAccelerators"]:
            self.accels.append((g["acceleratorType"].rsplit("/", 1)[-1], int(g.get("acceleratorCount", 1))))
        self.items = list((body.get("metadata") or {}).get("items") or [])
        self.labels = dict(body.get("labels") or {})
        self.ip = ip
        self.body = body
        self.price, self.price_key = price_of(self.machine, self.accels, region_of(self.zone))

    def link(self):
        return zone_url(self.zone) + "/instances/" + self.name

    def attr(self, key):
        for it in self.items:
            if it.get("key") == key:
                return it.get("value", "")
        return None

    def json(self):
        b, z = self.body, zone_url(self.zone)
        nics = []
        for k, nic in enumerate(b.get("networkInterfaces") or [{}]):
            n = {"kind": "compute#networkInterface",
                 "network": API + "projects/%s/global/networks/%s" % (A.project, (nic.get("network") or "default").rsplit("/", 1)[-1]),
                 "subnetwork": API + "projects/%s/regions/%s/subnetworks/default" % (A.project, self.zone[:-2]),
                 "networkIP": self.ip, "name": "nic%d" % k, "fingerprint": "fakeNic=", "stackType": "IPV4_ONLY"}
            if nic.get("accessConfigs"):
                n["accessConfigs"] = [{"kind": "compute#accessConfig", "type": "ONE_TO_ONE_NAT",
                                       "name": ac.get("name", "External NAT"), "natIP": self.ip,
                                       "networkTier": "PREMIUM"} for ac in nic["accessConfigs"]]
            nics.append(n)
        d = {"kind": "compute#instance", "id": self.id, "creationTimestamp": rfc3339(self.created),
             "name": self.name, "tags": {"fingerprint": "42WmSpB8rSM="},
             "machineType": z + "/machineTypes/" + self.machine, "status": self.status,
             "zone": z, "canIpForward": False, "networkInterfaces": nics,
             "disks": [dict(dk, kind="compute#attachedDisk", index=k, deviceName="persistent-disk-%d" % k)
                       for k, dk in enumerate(b.get("disks") or [])],
             "metadata": {"kind": "compute#metadata", "fingerprint": "fakeMeta=", "items": self.items},
             "serviceAccounts": b.get("serviceAccounts") or [],
             "selfLink": self.link(), "scheduling": self.sched, "cpuPlatform": "Intel Broadwell",
             "labels": self.labels, "labelFingerprint": "fakeLabels=", "startRestricted": False,
             "deletionProtection": False, "fingerprint": "fakeInst=",
             "guestAccelerators": [{"acceleratorType": z + "/acceleratorTypes/" + t, "acceleratorCount": c}
                                   for t, c in self.accels],
             "fakeMetadataHost": "127.0.0.1:%d" % self.msrv.server_address[1] if self.msrv else None}
        if not self.labels:
            del d["labels"]
        if self.started is not None:
            d["lastStartTimestamp"] = rfc3339(self.started)
        if self.stopped is not None:
            d["lastStopTimestamp"] = rfc3339(self.stopped)
        return d


def machine_shape(name):
    """(vCPUs, memoryMb) of a predefined machine type, None for a name
    that is not one."""
    m = MACHINE_RE.match(name)
    if not m:
        return None
    cpus = int(m.group(3))
    return cpus, cpus * {"standard": 3840, "highmem": 6656, "highcpu": 921}.get(m.group(2), 4096)


def price(key, region):
    """--prices' KEY in REGION ("REGION/KEY" first), None when absent."""
    v = PRICES.get("%s/%s" % (region, key), PRICES.get(key))
    return None if v is None else float(v)


def price_of(machine, accels, region):
    if len(accels) == 1:
        g, c = accels[0]
        key = "%s+%s" % (machine, g) + ("x%d" % c if c > 1 else "")
        if price(key, region) is not None:
            return price(key, region), key
    gpus = [price(g, region) for g, _ in accels]
    if price(machine, region) is not None and None not in gpus:
        return price(machine, region) + sum(p * c for p, (_, c) in zip(gpus, accels)), "components"
    fam, shape = machine.split("-")[0], machine_shape(machine)
    core, ram = price(fam + "-core", region), price(fam + "-ram", region)
    if shape and core is not None and ram is not None and None not in gpus:
        return (shape[0] * core + shape[1] / 1024 * ram + sum(p * c for p, (_, c) in zip(gpus, accels)),
                "vcpus+memory+gpus")
    keys = "%s+%s" % (machine, "+".join("%sx%d" % a for a in accels))
    print("gce.py: no price for %s in --prices; billing it at 0" % keys, file=sys.stderr, flush=True)
    return 0.0, None


def live_gpus():
    n = sum(i.gpus for i in S["instances"].values() if i.status != "TERMINATED")
    return n + sum(S["reserved"].values())


def new_op(zone, optype, target_link, target_id, user=None, name=None):
    now = time.time()
    name = name or "operation-%d-%s" % (int(now * 1000), secrets.token_hex(8))
    op = {"kind": "compute#operation", "id": new_id(), "name": name, "zone": zone_url(zone),
          "operationType": optype, "targetLink": target_link, "targetId": target_id,
          "status": "PENDING", "user": user or A.sa_email, "progress": 0,
          "insertTime": rfc3339(now), "startTime": rfc3339(now),
          "selfLink": zone_url(zone) + "/operations/" + name}
    S["ops"][(zone, name)] = op
    S["op_order"].append((zone, name))
    return op


def op_done(op, error=None):
    op["status"] = "DONE"
    op["progress"] = 100
    op["endTime"] = rfc3339(time.time())
    if error:
        op.update(error)
    cond.notify_all()


# ---- in-VM metadata listener, one per instance

class MetaHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    inst = None

    def log_message(self, *args):
        pass

    def reply(self, status, body, ctype="application/text", headers=()):
        send(self, status, body, ctype, headers)

    def do_GET(self):
        inst = self.server.inst
        u = urllib.parse.urlsplit(self.path)
        q = dict(urllib.parse.parse_qsl(u.query))
        if self.headers.get("Metadata-Flavor") != "Google" or self.headers.get("X-Forwarded-For"):
            return self.reply(403, "Missing required header: Metadata-Flavor\n", "text/html")
        p = u.path
        static = {"/computeMetadata/v1/instance/name": inst.name,
                  "/computeMetadata/v1/instance/id": inst.id,
                  "/computeMetadata/v1/instance/zone": "projects/%s/zones/%s" % (PROJECT_NUMBER, inst.zone),
                  "/computeMetadata/v1/project/project-id": A.project,
                  "/computeMetadata/v1/project/numeric-project-id": PROJECT_NUMBER}
        if p.startswith("/computeMetadata/v1/instance/attributes/"):
            v = inst.attr(p[len("/computeMetadata/v1/instance/attributes/"):])
            if v is not None:
                static[p] = v
        if p == "/computeMetadata/v1/instance/service-accounts/default/token":
            # The VM's default service account, as a controller on a VM gets
            # its token; good for the API like one from POST /token.
            tok = "ya29.fake-vm-" + secrets.token_urlsafe(32)
            with cond:
                S["tokens"][tok] = time.time() + A.token_ttl
            return self.reply(200, json.dumps({"access_token": tok, "expires_in": A.token_ttl,
                                               "token_type": "Bearer"}), "application/json")
        if p in static:
            v = static[p]
            return self.reply(200, v, headers=[("ETag", hashlib.md5(v.encode()).hexdigest()[:16]),
                                               ("Metadata-Flavor", "Google")])
        key = p[len("/computeMetadata/v1/instance/"):] if p.startswith("/computeMetadata/v1/instance/") else None
        if key not in inst.meta:
            return self.reply(404, "not found\n", "text/html")

        def etag():
            return hashlib.md5(("%s/%s/%d" % (inst.id, key, inst.meta_version[key])).encode()).hexdigest()[:16]
        with cond:
            wait_for_change(cond, q, etag)
            value, tag = inst.meta[key], etag()
        self.reply(200, value, headers=[("ETag", tag), ("Metadata-Flavor", "Google")])


# ---- lifecycle (all called with cond held)

def boot_step(inst, status):
    with cond:
        if not inst.alive or inst.status in ("STOPPING", "TERMINATED") or inst.stopped is not None:
            return
        inst.status = status
        if status == "RUNNING":
            inst.started = time.time()
            S["billing"].append(inst)
            run_startup(inst)
            start_sshd(inst)
        cond.notify_all()


def run_startup(inst):
    script = inst.attr("startup-script")
    if not A.run_startup_scripts or script is None:
        return
    inst.proc = run_script(A.vm_log_dir, inst.name, ".startup-script", script,
                           {"GCE_METADATA_HOST": "127.0.0.1:%d" % inst.msrv.server_address[1],
                            "SPOTDECK_FAKE_INSTANCE": inst.name}, S["procs"])


def start_sshd(inst):
    if not A.vm_sshd:
        return
    me = pwd.getpwuid(os.getuid()).pw_name
    keys = []
    for line in (inst.attr("ssh-keys") or "").splitlines():
        user, _, k = line.partition(":")
        if user == me and k.strip():
            keys.append(k.strip())
    inst.sshd = fakevm.start_sshd(A.vm_log_dir, inst.name, inst.ip, A.vm_ssh_port, keys,
                                  {"GCE_METADATA_HOST": "127.0.0.1:%d" % inst.msrv.server_address[1],
                                   "SPOTDECK_FAKE_INSTANCE": inst.name}, S["procs"])


def power_off(inst):
    """The VM stops running: billing ends, its processes and its metadata
    listener go."""
    if inst.stopped is None:
        inst.stopped = time.time()
    kill_group(inst.proc)
    stop_sshd(inst.sshd, inst.name)
    inst.sshd = None
    stop_listener(inst)


def insert_done(zone, name, op, doomed, inst_args):
    with cond:
        S["reserved"].pop((zone, name), None)
        if doomed:
            op_done(op, {"error": {"errors": [{
                "code": "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
                "message": "The zone 'projects/%s/zones/%s' does not have enough resources available to "
                           "fulfill the request. '(resource type:compute)'." % (A.project, zone)}]},
                "httpErrorStatusCode": 503, "httpErrorMessage": "SERVICE UNAVAILABLE"})
            return
        inst = Inst(*inst_args)
        inst.id = op["targetId"]
        start_listener(inst, MetaHandler)
        S["instances"][(zone, name)] = inst
        op_done(op)
    later(A.boot_s / 2, boot_step, inst, "STAGING")
    later(A.boot_s, boot_step, inst, "RUNNING")


def remove(inst):
    inst.alive = False
    if S["instances"].get((inst.zone, inst.name)) is inst:
        del S["instances"][(inst.zone, inst.name)]
    cond.notify_all()


def delete_done(inst, op):
    with cond:
        power_off(inst)
        remove(inst)
        op_done(op)
        op["endTime"] = rfc3339(inst.stopped)   # the power-off, not the clean-up after it


def preempt_end(inst, began, op_after_s=0.0):
    with cond:
        if not inst.alive or inst.status in ("TERMINATED", "STOPPING"):
            return   # crashed or deleted during the notice
        power_off(inst)
        inst.status = "STOPPING"
        if op_after_s <= 0:
            preempted_op(inst, began)
    if op_after_s > 0:
        later(op_after_s, preempted_op, inst, began)
    later(A.op_s, preempt_final, inst)


def preempted_op(inst, began):
    """The zone's compute.instances.preempted operation for INST, DONE, its
    endTime the power-off; recorded whatever became of the instance since
    (GCE keeps the operation after the VM is deleted)."""
    with cond:
        op = new_op(inst.zone, "compute.instances.preempted", inst.link(), inst.id, user="system",
                    name="systemevent-%d-%s" % (int(began * 1000), secrets.token_hex(8)))
        op["insertTime"] = op["startTime"] = rfc3339(began)
        op["statusMessage"] = "Instance was preempted."
        op_done(op)
        op["endTime"] = rfc3339(inst.stopped)   # the power-off


def preempt_final(inst):
    with cond:
        if not inst.alive or inst.status != "STOPPING":
            return
        if inst.sched.get("instanceTerminationAction") == "DELETE":
            remove(inst)
        else:
            inst.status = "TERMINATED"
            cond.notify_all()


# ---------------------------------------------------------------- HTTP

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body, headers=()):
        with cond:   # bodies are live state (an Operation a timer may be changing)
            data = json.dumps(body, indent=1).encode() + b"\n"
        send(self, status, data, "application/json; charset=UTF-8", headers)

    def handle_any(self):
        u = urllib.parse.urlsplit(self.path)
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        q = dict(urllib.parse.parse_qsl(u.query, keep_blank_values=True))
        if u.path.startswith("/_control/"):
            try:
                return self.reply(*self.control(u.path, raw))
            except (ValueError, KeyError, TypeError) as e:
                return self.reply(400, {"error": "bad control request: %r" % e})
        entry = {"time": time.time(), "method": self.command, "path": u.path,
                 "query": {k: v for k, v in q.items() if k not in ("key", "access_token")},
                 "status": None, "request_id": q.get("requestId"),
                 "auth": self.headers.get("Authorization") is not None}
        with cond:
            S["log"].append(entry)
            fault = slow = None
            for f in S["fails"]:
                if u.path.startswith(f["prefix"]) and f["count"] > 0 and f["method"] in (None, self.command):
                    f["count"] -= 1
                    fault = dict(f)
                    break
            for s in S["slows"]:
                if u.path.startswith(s.get("prefix", "/")) and s["count"] > 0 and \
                        s.get("method") in (None, self.command):
                    s["count"] -= 1
                    slow = s["seconds"]
                    break
        if slow:
            time.sleep(slow)
        if fault and not fault.get("after"):
            status, body, headers = self.fault_answer(fault)
        else:
            headers = ()
            try:
                status, body = self.route(u.path, q, raw)
            except ApiError as e:
                status, body = e.answer
            if fault:
                status, body, headers = self.fault_answer(fault)
        with cond:
            entry["status"] = status
        self.reply(status, body, headers)

    do_GET = do_POST = do_DELETE = do_PUT = do_PATCH = handle_any

    @staticmethod
    def fault_answer(f):
        st = f["status"]
        if st == 429:
            code, body = gce_error(429, "Rate Limit Exceeded", "rateLimitExceeded", status="RESOURCE_EXHAUSTED")
        elif st == 403:
            code, body = gce_error(403, "Rate Limit Exceeded", "rateLimitExceeded", domain="usageLimits",
                                   status="PERMISSION_DENIED")
        elif st == 500:
            code, body = gce_error(500, "Internal error. Please try again or contact Google Support. "
                                   "(Code: 'fake-%s')" % secrets.token_hex(6), "backendError", status="INTERNAL")
        else:
            code, body = gce_error(st, "The service is currently unavailable.", "backendError",
                                   status="UNAVAILABLE")
        headers = [("Retry-After", str(f["retry_after"]))] if f.get("retry_after") is not None else []
        return code, body, headers

    # ---- control
    def control(self, p, raw):
        c = json.loads(raw) if raw else {}
        with cond:
            if p == "/_control/log":
                return 200, {"requests": list(S["log"])}
            if p == "/_control/state":
                return 200, {"instances": [i.json() for i in S["instances"].values()],
                             "operations": [S["ops"][k] for k in S["op_order"]],
                             "tokens": len(S["tokens"])}
            if p == "/_control/secrets":
                return 200, {"tokens": list(S["tokens"])}
            if p == "/_control/billing":
                return 200, billing(S["billing"], lambda i, billed, run, usd: {
                    "name": i.name, "zone": i.zone, "seconds": billed, "run_seconds": run,
                    "running": i.stopped is None, "usd": round(usd, 2),
                    "usd_per_hour": i.price, "price_key": i.price_key})
            if p == "/_control/stockout":
                if c["zone"] not in A.zones:
                    return 400, {"error": "unknown zone %s" % c["zone"]}
                S["stockout"][c["zone"]] = int(c.get("count", 1))
                return 200, {"ok": True}
            if p == "/_control/quota":
                A.quota_gpus = int(c["gpus"])
                return 200, {"ok": True}
            if p == "/_control/addresses":
                S["addresses"].extend(c["ips"])
                return 200, {"ok": True}
            if p == "/_control/fail":
                S["fails"].append({"prefix": c["prefix"], "status": int(c.get("status", 503)),
                                   "count": int(c.get("count", 1)), "after": bool(c.get("after")),
                                   "retry_after": c.get("retry_after"), "method": c.get("method")})
                return 200, {"ok": True}
            if p == "/_control/slow":
                S["slows"].append({"seconds": float(c["seconds"]), "count": int(c.get("count", 1)),
                                   "prefix": c.get("prefix", "/"), "method": c.get("method")})
                return 200, {"ok": True}
            if p == "/_control/maintenance":
                found = [i for (z, n), i in S["instances"].items() if n == c["name"] and c.get("zone", z) == z]
                if not found:
                    return 404, {"error": "no instance %s" % c["name"]}
                found[0].meta["maintenance-event"] = c.get("value", "TERMINATE_ON_HOST_MAINTENANCE")
                found[0].meta_version["maintenance-event"] += 1
                cond.notify_all()
                return 200, {"ok": True, "time": time.time()}
            if p in ("/_control/preempt", "/_control/crash"):
                found = [i for (z, n), i in S["instances"].items()
                         if n == c["name"] and c.get("zone", z) == z]
                if not found:
                    return 404, {"error": "no instance %s" % c["name"]}
                inst = found[0]
                if inst.status in ("TERMINATED", "STOPPING"):
                    return 409, {"error": "instance %s is %s" % (inst.name, inst.status)}
                if p == "/_control/crash":
                    power_off(inst)
                    inst.status = "TERMINATED"
                    cond.notify_all()
                    return 200, {"ok": True, "time": inst.stopped}
                began = time.time()
                inst.preempted = True
                if c.get("notice", True):
                    inst.meta["preempted"] = "TRUE"
                    inst.meta_version["preempted"] += 1
                cond.notify_all()
                later(float(c.get("notice_s", 30)), preempt_end, inst, began, float(c.get("op_after_s", 0)))
                return 200, {"ok": True, "time": began}
        return 404, {"error": "no such control %s" % p}

    # ---- API
    def route(self, path, q, raw):
        if path == "/token":
            if self.command != "POST":
                return 405, {"error": "invalid_request", "error_description": "POST only"}
            return self.token(raw)
        if path == CATALOG:
            if not q.get("key"):
                self.auth()
            return self.skus(q)
        parts = path.split("/")
        if parts[:4] != ["", "compute", "v1", "projects"] or len(parts) < 5:
            return 404, {"error": {"code": 404, "message": "Not Found: %s" % path}}
        self.auth()
        if len(parts) >= 8 and parts[5:7] == ["global", "images"] and self.command == "GET":
            return self.image(parts[4], parts[7:])    # public images live in other projects
        if parts[4] != A.project:
            return not_found("projects/%s" % parts[4])
        rest = parts[5:]
        if self.command == "GET" and not rest:
            return self.project()
        if self.command == "GET" and len(rest) == 2 and rest[0] == "regions":
            return self.region(rest[1])
        if rest == ["aggregated", "instances"] and self.command == "GET":
            return self.aggregated(q)
        if len(rest) < 2 or rest[0] != "zones":
            return not_found("/".join(parts[3:]))
        zone = rest[1]
        if zone not in A.zones:
            return not_found("projects/%s/zones/%s" % (A.project, zone))
        rest = rest[2:]
        cmd = self.command
        if not rest and cmd == "GET":
            return 200, {"kind": "compute#zone", "id": str(2000 + A.zones.index(zone)), "name": zone,
                         "description": zone, "status": "UP",
                         "region": API + "projects/%s/regions/%s" % (A.project, region_of(zone)),
                         "selfLink": zone_url(zone), "availableCpuPlatforms": ["Intel Broadwell"]}
        if len(rest) == 2 and rest[0] == "machineTypes" and cmd == "GET":
            return self.machine_type(zone, rest[1])
        if len(rest) == 2 and rest[0] == "acceleratorTypes" and cmd == "GET":
            a = ACCELERATORS.get(rest[1])
            if not a:
                return not_found("projects/%s/zones/%s/acceleratorTypes/%s" % (A.project, zone, rest[1]))
            return 200, {"kind": "compute#acceleratorType", "id": str(10000 + sorted(ACCELERATORS).index(rest[1])),
                         "name": rest[1], "description": "NVIDIA " + a[0].replace("_", " "),
                         "zone": zone_url(zone), "maximumCardsPerInstance": a[1],
                         "selfLink": zone_url(zone) + "/acceleratorTypes/" + rest[1]}
        if rest == ["instances"] and cmd == "POST":
            return self.insert(zone, q, raw)
        if rest == ["instances"] and cmd == "GET":
            return self.list_instances(zone, q)
        if len(rest) == 2 and rest[0] == "instances" and cmd == "GET":
            with cond:
                i = S["instances"].get((zone, rest[1]))
                if i:
                    return 200, i.json()
            return not_found("projects/%s/zones/%s/instances/%s" % (A.project, zone, rest[1]))
        if len(rest) == 2 and rest[0] == "instances" and cmd == "DELETE":
            return self.delete(zone, rest[1], q)
        if rest == ["operations"] and cmd == "GET":
            return self.list_ops(zone, q)
        if len(rest) == 2 and rest[0] == "operations" and cmd == "GET":
            with cond:
                op = S["ops"].get((zone, rest[1]))
                if op:
                    return 200, op
            return not_found("projects/%s/zones/%s/operations/%s" % (A.project, zone, rest[1]))
        if len(rest) == 3 and rest[0] == "operations" and rest[2] == "wait" and cmd == "POST":
            end = time.monotonic() + 120
            with cond:
                op = S["ops"].get((zone, rest[1]))
                if not op:
                    return not_found("projects/%s/zones/%s/operations/%s" % (A.project, zone, rest[1]))
                while op["status"] != "DONE" and time.monotonic() < end:
                    cond.wait(end - time.monotonic())
                return 200, op
        return 404, {"error": {"code": 404, "message": "Not Found: %s %s" % (cmd, path)}}

    def auth(self):
        h = self.headers.get("Authorization") or ""
        if not h.startswith("Bearer ") or not h[7:].strip():
            raise ApiError(gce_error(
                401, "Request is missing required authentication credential. Expected OAuth 2 access token, "
                "login cookie or other valid authentication credential. See "
                "https://developers.google.com/identity/sign-in/web/devconsole-project.",
                "required", status="UNAUTHENTICATED",
                extra={"location": "Authorization", "locationType": "header"}))
        with cond:
            exp = S["tokens"].get(h[7:].strip())
        if exp is None or exp <= time.time():
            raise ApiError(gce_error(401, "Invalid Credentials", "authError", status="UNAUTHENTICATED",
                                     extra={"location": "Authorization", "locationType": "header"}))

    def token(self, raw):
        f = dict(urllib.parse.parse_qsl(raw.decode("utf-8", "replace")))
        if f.get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer":
            return 400, {"error": "unsupported_grant_type",
                         "error_description": "Invalid grant_type: %s" % f.get("grant_type", "")}
        a = f.get("assertion")
        if not a:
            return 400, {"error": "invalid_request", "error_description": "Missing required parameter: assertion"}
        if jwt is None or PUBKEY is None:
            print("gce.py: cannot verify a JWT: PyJWT/cryptography not importable by %s" % sys.executable,
                  file=sys.stderr, flush=True)
            return 500, {"error": "server_error", "error_description":
                         "fake gce.py cannot verify assertions: PyJWT/cryptography missing for %s" % sys.executable}

        def grant(desc, err="invalid_grant"):
            return 400, {"error": err, "error_description": desc}
        try:
            h = jwt.get_unverified_header(a)
        except jwt.PyJWTError:
            return grant("Invalid JWT Signature.")
        if h.get("alg") != "RS256" or not h.get("kid"):
            return grant("Invalid JWT Signature.")
        aud = "http://127.0.0.1:%d/token" % PORT
        try:
            c = jwt.decode(a, PUBKEY, algorithms=["RS256"], options={
                "verify_aud": False, "verify_exp": False, "verify_iat": False, "verify_nbf": False,
                "require": ["iss", "aud", "iat", "exp"]})
        except jwt.InvalidSignatureError:
            return grant("Invalid JWT Signature.")
        except jwt.PyJWTError as e:
            return grant("Invalid JWT: %s" % e)
        now = time.time()
        try:
            iat, exp = float(c["iat"]), float(c["exp"])
        except (TypeError, ValueError):
            return grant("Invalid JWT: iat and exp must be numbers.")
        if exp - iat > 3600 or exp < now - 60 or iat > now + 60 or exp <= iat:
            return grant("Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable "
                         "timeframe. Check your iat and exp values in the JWT claim.")
        if c.get("aud") != aud:
            return grant("Invalid JWT: Failed audience check. The right audience is %s" % aud)
        if c.get("iss") != A.sa_email:
            return grant("Invalid grant: account not found")
        if SCOPE not in str(c.get("scope", "")).split():
            return grant("Invalid OAuth scope or ID token audience provided.", "invalid_scope")
        tok = "ya29.fake-" + secrets.token_urlsafe(32)
        with cond:
            S["tokens"][tok] = now + A.token_ttl
        return 200, {"access_token": tok, "expires_in": A.token_ttl, "token_type": "Bearer"}

    def insert(self, zone, q, raw):
        rid = q.get("requestId")
        if rid is not None:
            try:
                if uuid.UUID(rid).int == 0:
                    raise ValueError
            except ValueError:
                return invalid("Invalid value for field 'requestId': '%s'. Must be a UUID." % rid)
        try:
            b = json.loads(raw)
            if not isinstance(b, dict):
                raise ValueError
        except ValueError:
            return gce_error(400, "Invalid JSON payload received.", "parseError")
        with cond:
            if rid in S["request_ids"]:
                return 200, S["ops"][S["request_ids"][rid]]
        name = b.get("name")
        if not name:
            return gce_error(400, "Required field 'resource.name' not specified", "required")
        if not isinstance(name, str) or not NAME_RE.match(name):
            return invalid("Invalid value for field 'resource.name': '%s'. Must be a match of regex "
                           "'(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?|[1-9][0-9]{0,19})'" % name)
        mt = b.get("machineType")
        if not mt:
            return gce_error(400, "Required field 'resource.machineType' not specified", "required")
        m = re.search(r"zones/([^/]+)/machineTypes/[a-z0-9-]+\Z", str(mt))
        if not m or m.group(1) != zone:
            return invalid("Invalid value for field 'resource.machineType': '%s'. Machine type must be "
                           "zones/%s/machineTypes/NAME." % (mt, zone))
        ga = b.get("guestAccelerators")
        if not ga or not isinstance(ga, list):
            return gce_error(400, "Required field 'resource.guestAccelerators' not specified "
                             "(the fake wants N1 + GPU)", "required")
        gpus = 0
        for k, g in enumerate(ga):
            at = g.get("acceleratorType") if isinstance(g, dict) else None
            m = re.search(r"zones/([^/]+)/acceleratorTypes/[a-z0-9-]+\Z", str(at))
            cnt = g.get("acceleratorCount", 1) if isinstance(g, dict) else 0
            if not m or m.group(1) != zone or not isinstance(cnt, int) or cnt < 1:
                return invalid("Invalid value for field 'resource.guestAccelerators[%d]': '%s'." % (k, json.dumps(g)))
            gpus += cnt
        sc = b.get("scheduling")
        if not isinstance(sc, dict) or sc.get("provisioningModel") != "SPOT":
            return invalid("Invalid value for field 'resource.scheduling.provisioningModel': '%s'. "
                           "The fake takes Spot VMs only." % (sc or {}).get("provisioningModel", ""))
        if sc.get("instanceTerminationAction", "STOP") not in ("STOP", "DELETE"):
            return invalid("Invalid value for field 'resource.scheduling.instanceTerminationAction': '%s'."
                           % sc.get("instanceTerminationAction"))
        if sc.get("onHostMaintenance", "TERMINATE") != "TERMINATE":
            return gce_error(400, "Instances with guest accelerators do not support live migration.", "badRequest")
        if "labels" in b and not isinstance(b["labels"], dict):
            return invalid("Invalid value for field 'resource.labels'.")
        md = b.get("metadata")
        if md is not None and not (isinstance(md, dict) and isinstance(md.get("items", []), list)):
            return invalid("Invalid value for field 'resource.metadata'.")
        with cond:
            if rid in S["request_ids"]:
                return 200, S["ops"][S["request_ids"][rid]]
            if (zone, name) in S["instances"] or (zone, name) in S["reserved"]:
                return gce_error(409, "The resource 'projects/%s/zones/%s/instances/%s' already exists"
                                 % (A.project, zone, name), "alreadyExists")
            if live_gpus() + gpus > A.quota_gpus:
                return gce_error(403, "Quota 'GPUS_ALL_REGIONS' exceeded. Limit: %.1f globally." % A.quota_gpus,
                                 "quotaExceeded", domain="usageLimits")
            doomed = S["stockout"].get(zone, 0) > 0
            if doomed:
                S["stockout"][zone] -= 1
            S["reserved"][(zone, name)] = 0 if doomed else gpus
            ip = S["addresses"].pop(0) if S["addresses"] and not doomed else "127.0.0.1"
            if A.vm_sshd and not doomed and ip == "127.0.0.1":
                ip = next_vm_ip(S, A.vm_ssh_port)
            target_id = new_id()
            op = new_op(zone, "insert", zone_url(zone) + "/instances/" + name, target_id)
            if rid:
                S["request_ids"][rid] = (zone, op["name"])
        later(A.op_s, insert_done, zone, name, op, doomed, (zone, name, b, gpus, ip))
        return 200, op

    def delete(self, zone, name, q):
        rid = q.get("requestId")
        if rid is not None:
            try:
                uuid.UUID(rid)
            except ValueError:
                return invalid("Invalid value for field 'requestId': '%s'. Must be a UUID." % rid)
        with cond:
            if rid in S["request_ids"]:
                return 200, S["ops"][S["request_ids"][rid]]
            inst = S["instances"].get((zone, name))
            if not inst:
                return not_found("projects/%s/zones/%s/instances/%s" % (A.project, zone, name))
            op = new_op(zone, "delete", inst.link(), inst.id)
            if rid:
                S["request_ids"][rid] = (zone, op["name"])
            if inst.status != "TERMINATED":
                inst.status = "STOPPING"
            op["status"] = "RUNNING"
            cond.notify_all()
        later(A.op_s, delete_done, inst, op)
        return 200, op

    def list_instances(self, zone, q):
        pred = parse_filter(q.get("filter", ""), ("name", "status", "labels"))
        with cond:
            items = [i.json() for (z, _), i in sorted(S["instances"].items()) if z == zone]
        items = [i for i in items if pred(i)]
        chunk, token = page(items, q)
        out = {"kind": "compute#instanceList", "id": "projects/%s/zones/%s/instances" % (A.project, zone),
               "selfLink": zone_url(zone) + "/instances"}
        if chunk:
            out["items"] = chunk
        if token:
            out["nextPageToken"] = token
        return 200, out

    def aggregated(self, q):
        pred = parse_filter(q.get("filter", ""), ("name", "status", "labels"))
        items = {}
        with cond:
            for zone in A.zones:
                xs = [i.json() for (z, _), i in sorted(S["instances"].items()) if z == zone]
                xs = [i for i in xs if pred(i)]
                scope = "zones/" + zone
                if xs:
                    items[scope] = {"instances": xs}
                else:
                    items[scope] = {"warning": {"code": "NO_RESULTS_ON_PAGE",
                                                "message": "There are no results for scope '%s' on this page." % scope,
                                                "data": [{"key": "scope", "value": scope}]}}
        return 200, {"kind": "compute#instanceAggregatedList", "id": "projects/%s/aggregated/instances" % A.project,
                     "items": items, "selfLink": API + "projects/%s/aggregated/instances" % A.project}

    def list_ops(self, zone, q):
        pred = parse_filter(q.get("filter", ""), ("name", "status", "operationType", "targetLink", "targetId", "user"))
        with cond:
            ops = [dict(S["ops"][k]) for k in S["op_order"] if k[0] == zone]
        ops = [o for o in ops if pred(o)]
        chunk, token = page(ops, q)
        out = {"kind": "compute#operationList", "id": "projects/%s/zones/%s/operations" % (A.project, zone),
               "selfLink": zone_url(zone) + "/operations"}
        if chunk:
            out["items"] = chunk
        if token:
            out["nextPageToken"] = token
        return 200, out

    def project(self):
        with cond:
            used = live_gpus()
        return 200, {"kind": "compute#project", "id": PROJECT_NUMBER, "name": A.project,
                     "creationTimestamp": rfc3339(0), "quotas": [
                         {"metric": "GPUS_ALL_REGIONS", "limit": float(A.quota_gpus), "usage": float(used)},
                         {"metric": "NETWORKS", "limit": 15.0, "usage": 1.0}],
                     "selfLink": API + "projects/" + A.project, "defaultNetworkTier": "PREMIUM"}

    def region(self, region):
        zones = [z for z in A.zones if region_of(z) == region]
        if not zones:
            return not_found("projects/%s/regions/%s" % (A.project, region))
        quotas = []
        with cond:
            for acc, (model, _) in sorted(ACCELERATORS.items()):
                used = sum(c for i in S["instances"].values() if region_of(i.zone) == region
                           and i.status != "TERMINATED" for t, c in i.accels if t == acc)
                quotas.append({"metric": "PREEMPTIBLE_NVIDIA_%s_GPUS" % model,
                               "limit": float(A.quota_gpus), "usage": float(used)})
        return 200, {"kind": "compute#region", "id": str(1000 + sorted({region_of(z) for z in A.zones}).index(region)),
                     "name": region, "description": region, "status": "UP",
                     "zones": [zone_url(z) for z in zones], "quotas": quotas,
                     "selfLink": API + "projects/%s/regions/%s" % (A.project, region)}

    def machine_type(self, zone, name):
        shape = machine_shape(name)
        if not shape:
            return not_found("projects/%s/zones/%s/machineTypes/%s" % (A.project, zone, name))
        cpus, per = shape[0], shape[1] // shape[0]
        return 200, {"kind": "compute#machineType", "id": str(abs(hash(name)) % 10 ** 10), "name": name,
                     "description": "%d vCPUs" % cpus, "guestCpus": cpus, "memoryMb": cpus * per,
                     "maximumPersistentDisks": 128, "maximumPersistentDisksSizeGb": "263168",
                     "zone": zone, "selfLink": zone_url(zone) + "/machineTypes/" + name, "isSharedCpu": False}

    def image(self, project, rest):
        family = rest[1] if rest[0] == "family" and len(rest) == 2 else None
        # The project itself has no images of its own (none were made in
        # the fake); public image projects have every family and name.
        if project == A.project or (not family and len(rest) != 1):
            return not_found("projects/%s/global/images/%s" % (project, "/".join(rest)))
        name = family + "-v20250101" if family else rest[0]
        return 200, {"kind": "compute#image", "id": str(abs(hash(name)) % 10 ** 12), "name": name,
                     "family": family or name, "status": "READY", "diskSizeGb": "50",
                     "archiveSizeBytes": "21474836480", "creationTimestamp": rfc3339(0),
                     "selfLink": API + "projects/%s/global/images/%s" % (project, name)}

    def skus(self, q):
        regions = sorted({z.rsplit("-", 1)[0] for z in A.zones})
        where = {"us": "Americas", "europe": "EMEA", "asia": "APAC"}
        skus = []
        def sku(key, r, desc, group, usage, p, unit="h"):
            sku_id = hashlib.sha1(("%s/%s/%s" % (key, r, desc)).encode()).hexdigest()[:12].upper()
            sku_id = "-".join(sku_id[k:k + 4] for k in (0, 4, 8))
            units = int(p)
            skus.append({
                "name": "services/6F81-5844-456A/skus/" + sku_id, "skuId": sku_id, "description": desc,
                "category": {"serviceDisplayName": "Compute Engine", "resourceFamily": "Compute",
                             "resourceGroup": group, "usageType": usage},
                "serviceRegions": [r],
                "pricingInfo": [{"summary": "", "pricingExpression": {
                    "usageUnit": unit, "displayQuantity": 1,
                    "usageUnitDescription": "gibibyte hour" if unit == "GiBy.h" else "hour",
                    "baseUnit": "By.s" if unit == "GiBy.h" else "s",
                    "baseUnitDescription": "byte second" if unit == "GiBy.h" else "second",
                    "baseUnitConversionFactor": 3865470566400 if unit == "GiBy.h" else 3600,
                    "tieredRates": [{"startUsageAmount": 0, "unitPrice": {
                        "currencyCode": q.get("currencyCode", "USD"), "units": str(units),
                        "nanos": int(round((p - units) * 1e9))}}]},
                    "currencyConversionRate": 1, "effectiveTime": rfc3339(time.time())}],
                "serviceProviderName": "Google", "geoTaxonomy": {"type": "REGIONAL", "regions": [r]}})

        for key in sorted(k for k in PRICES if "/" not in k):
            for r in regions:
                p = price(key, r)
                place = where.get(r.split("-")[0], r)
                fam = key.split("-")[0].upper()
                if "+" in key:
                    m, g = key.split("+", 1)
                    sku(key, r, "%s with %s VM running in %s" % (m, g, place), "GPU", "OnDemand", 3 * p)
                    sku(key, r, "%s with %s Spot Preemptible VM running in %s" % (m, g, place), "GPU",
                        "Preemptible", p)
                elif key.startswith("nvidia-"):
                    nice = " ".join(w.capitalize() if not w[-1].isdigit() else w.upper() for w in key.split("-"))
                    sku(key, r, "%s GPU running in %s" % (nice, place), "GPU", "OnDemand", 3 * p)
                    sku(key, r, "%s Virtual Workstation GPU attached to Spot Preemptible VMs running in %s" %
                        (nice, place), "GPU", "Preemptible", 1.5 * p)
                    sku(key, r, "%s GPU attached to Spot Preemptible VMs running in %s" % (nice, place), "GPU",
                        "Preemptible", p)
                elif key.endswith("-core") or key.endswith("-ram"):
                    what, group, unit = ("Core", "CPU", "h") if key.endswith("-core") else ("Ram", "RAM", "GiBy.h")
                    sku(key, r, "%s Predefined Instance %s running in %s" % (fam, what, place), group, "OnDemand",
                        3 * p, unit)
                    sku(key, r, "Spot Preemptible %s Custom Instance %s running in %s" % (fam, what, place), group,
                        "Preemptible", 1.05 * p, unit)
                    sku(key, r, "Spot Preemptible %s Predefined Instance %s running in %s" % (fam, what, place),
                        group, "Preemptible", p, unit)
                else:
                    group = fam + "Standard" if "standard" in key else fam
                    sku(key, r, "%s Instance running in %s" % (key, place), group, "OnDemand", 3 * p)
                    sku(key, r, "Spot Preemptible %s Instance running in %s" % (key, place), group,
                        "Preemptible", p)
        try:
            start = int(q.get("pageToken") or 0)
        except ValueError:
            return 400, {"error": {"code": 400, "message": "Invalid page token.", "status": "INVALID_ARGUMENT"}}
        out = {"skus": skus[start:start + 2], "nextPageToken": str(start + 2) if start + 2 < len(skus) else ""}
        return 200, out


def shutdown_vms(*_):
    if A.vm_sshd:
        for inst in list(S["instances"].values()):
            kill_marked(inst.name)
    kill_all_and_exit(cond, S["procs"])


def main():
    global A, PORT, PRICES, PUBKEY
    ap = argparse.ArgumentParser(description="fake GCE for spotdeck's tests")
    ap.add_argument("--project", required=True)
    ap.add_argument("--zones", required=True, type=lambda s: [z for z in s.split(",") if z])
    ap.add_argument("--sa-email", required=True)
    ap.add_argument("--sa-public-key", required=True)
    ap.add_argument("--token-ttl", type=int, default=3599)
    ap.add_argument("--boot-s", type=float, default=1.0)
    ap.add_argument("--op-s", type=float, default=0.5)
    ap.add_argument("--quota-gpus", type=int, default=8)
    ap.add_argument("--prices")
    ap.add_argument("--run-startup-scripts", action="store_true")
    ap.add_argument("--vm-log-dir")
    ap.add_argument("--vm-sshd", action="store_true")
    ap.add_argument("--vm-ssh-port", type=int, default=2222)
    A = ap.parse_args()
    if A.run_startup_scripts and not A.vm_log_dir:
        ap.error("--run-startup-scripts needs --vm-log-dir")
    if A.vm_sshd and not A.vm_log_dir:
        ap.error("--vm-sshd needs --vm-log-dir")
    if A.vm_log_dir:
        os.makedirs(A.vm_log_dir, exist_ok=True)
    if A.prices:
        with open(A.prices) as f:
            PRICES = json.load(f)
    with open(A.sa_public_key, "rb") as f:
        pem = f.read()
    if jwt is not None:
        try:
            from cryptography.hazmat.primitives.serialization import load_pem_public_key
            PUBKEY = load_pem_public_key(pem)
        except ImportError:
            PUBKEY = None
    if PUBKEY is None:
        print("gce.py: PyJWT/cryptography missing for %s: POST /token will refuse every assertion"
              % sys.executable, file=sys.stderr, flush=True)
    signal.signal(signal.SIGTERM, shutdown_vms)
    signal.signal(signal.SIGINT, shutdown_vms)
    srv = Server(("127.0.0.1", 0), Handler)
    PORT = srv.server_address[1]
    print(PORT, flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
