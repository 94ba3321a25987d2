#!/usr/bin/env python3
"""A fake of the AWS EC2 Query API (version 2016-11-15) and the in-instance
IMDSv2, for spotdeck's AWS provider.  It behaves as
../../shared/reference/cloud-apis.md section 2 documents AWS's API.
Python standard library only (SigV4 is checked with hmac/hashlib).  Binds
127.0.0.1 on an ephemeral port and prints the port on its first stdout
line.

  ec2.py --regions us-east-1,us-west-2 --azs us-east-1a,us-east-1b,us-west-2a
         --access-key AKID --secret-key SECRET [--session-token TOK]
         [--boot-s 1.0] [--quota-vcpus 64] [--prices JSON_PATH]
         [--run-startup-scripts --vm-log-dir DIR]
         [--vm-sshd --vm-ssh-port 2222 --vm-log-dir DIR]

API: POST http://127.0.0.1:PORT/ stands for https://ec2.{region}.amazonaws.com/
for every region of --regions; the region is the one of the SigV4 credential
scope, the Host header whatever the client sent (and signed).  Body
application/x-www-form-urlencoded "Action=...&Version=2016-11-15&..."
(parameters in the query string are taken too, and signed as such).
Answers are XML in xmlns http://ec2.amazonaws.com/doc/2016-11-15/; errors
are <Response><Errors><Error><Code/><Message/></Error></Errors><RequestID/>
</Response> with the status AWS gives the code.

SigV4 (section 2.1): the canonical request is rebuilt from the request as
received (method, path with each segment URI-encoded, the query string
re-encoded and sorted, the headers named in SignedHeaders with values
trimmed and inner spaces collapsed, hex sha256 of the body), then the
string to sign over X-Amz-Date and the scope DATE/REGION/ec2/aws4_request,
then the HMAC chain from "AWS4" + --secret-key.  Refusals:
  401 AuthFailure           no Authorization header; an access key other
                            than --access-key; with --session-token, no
                            or another X-Amz-Security-Token
  400 IncompleteSignature   Authorization not "AWS4-HMAC-SHA256
                            Credential=..., SignedHeaders=..., Signature=..."
                            or a scope not DATE/REGION/ec2/aws4_request;
                            host or x-amz-date (or the security token)
                            not among SignedHeaders; no X-Amz-Date
  400 RequestExpired        X-Amz-Date more than 5 minutes from the clock
                            (the IAM guide's SigV4 rule; EC2's common-errors
                            page words RequestExpired with 15 minutes: the
                            fake is the stricter of the two)
  403 SignatureDoesNotMatch the signature differs (the message carries the
                            canonical request and string to sign the fake
                            expected, as AWS does); also a scope date other
                            than X-Amz-Date's day, or a region not in
                            --regions ("Credential should be scoped to a
                            valid region")
Then: 400 MissingAction without Action, 400 InvalidAction for an action the
fake lacks (CreateFleet among them: not faked yet), 400 MissingParameter
for a required parameter not given.  Version is not checked.  Injected
faults (/_control/fail, /slow) hit only requests that passed SigV4.

Actions:
  RunInstances  ImageId (ami-HEX, else InvalidAMIID.Malformed; every
        well-formed AMI exists), InstanceType (in TYPES below, else
        InvalidParameterValue), MinCount=MaxCount=1 (fake-only limit:
        anything else InvalidParameterValue), ClientToken (optional; the
        same token in the same region returns the same reservation with
        its instance as it is now, nothing created twice; the same token
        with other parameters: IdempotentParameterMismatch),
        InstanceMarketOptions.MarketType=spot (the fake has no on-demand:
        anything else InvalidParameterValue),
        ...SpotOptions.SpotInstanceType=one-time and
        ...SpotOptions.InstanceInterruptionBehavior=terminate (defaults;
        others InvalidParameterValue, fake-only), ...SpotOptions.MaxPrice
        accepted and ignored, UserData (base64, else InvalidParameterValue
        "Invalid BASE64 encoding of user data."), Placement.AvailabilityZone
        (an AZ of --azs in the request's region, else InvalidParameterValue
        "Invalid availability zone: [AZ]"; default: the region's first AZ
        of --azs), TagSpecification.N.ResourceType=instance with
        .Tag.M.Key/.Tag.M.Value.  NetworkInterface.N.SubnetId is NOT
        supported: any SubnetId answers 400 InvalidSubnetID.NotFound (the
        fake has no subnets); other NetworkInterface.*, SecurityGroupId.N,
        IamInstanceProfile.*, MetadataOptions.*, BlockDeviceMapping.* are
        accepted and ignored.  Then, in this order:
          400 VcpuLimitExceeded when the vCPUs of the instances not
              terminated plus the new one pass --quota-vcpus;
          an injected capacity error (/_control/capacity) for the AZ (and
              type): InsufficientInstanceCapacity (500, the status AWS
              sends this server-side code with) "We currently do not have
              sufficient TYPE capacity in the Availability Zone you
              requested (AZ). ...", InsufficientHostCapacity (500), or any
              other code such as MaxSpotInstanceCountExceeded (400).
        Else RunInstancesResponse {requestId, reservationId r-0..., ownerId
        123456789012, groupSet, instancesSet/item{...}}: pending (code 0),
        running (16) --boot-s later, when ipAddress appears.
        privateIpAddress and ipAddress are one address: 127.0.0.1, or the
        next of /_control/addresses, or with --vm-sshd the instance's own
        (below).
  DescribeInstances  InstanceId.N (malformed: InvalidInstanceID.Malformed;
        unknown in this region: InvalidInstanceID.NotFound), Filter.N.Name
        / Filter.N.Value.M (names tag:KEY, tag-key, instance-state-name,
        instance-state-code, availability-zone, instance-type, instance-id,
        instance-lifecycle; values may use * and ?; values of one filter
        OR, filters AND; another name: InvalidParameterValue), MaxResults
        5..1000 (not with InstanceId: InvalidParameterCombination),
        NextToken (opaque; a bad one: InvalidParameterValue).  One
        reservation per instance, in launch order.  Terminated instances
        stay listed until the fake exits (AWS: about an hour).
  TerminateInstances  InstanceId.N -> instancesSet/item{instanceId,
        currentState, previousState}: pending/running -> shutting-down (32)
        at once (power-off: billing, startup script, IMDS and with
        --vm-sshd the instance's sshd and sessions end), then
        terminated (48) --boot-s/2 later, stateReason
        Client.UserInitiatedShutdown "Client.UserInitiatedShutdown: User
        initiated shutdown".  Already shutting-down/terminated: current =
        previous = that state (idempotent).
  DescribeSpotPriceHistory  InstanceType.N, ProductDescription.N (only
        "Linux/UNIX" has prices), AvailabilityZone, StartTime/EndTime
        (ISO 8601), Filter.N (instance-type, availability-zone,
        product-description), MaxResults (1..1000), NextToken ->
        spotPriceHistorySet/item{instanceType, productDescription,
        spotPrice "%.6f", timestamp, availabilityZone} for every --prices
        entry in an AZ of the request's region: per (type, AZ) the price in
        effect at StartTime and every change after it up to EndTime, newest
        first, as AWS returns them.  A price is in effect from when the fake
        started, or from its /_control/price.
  DescribeAvailabilityZones  ZoneName.N (not of the region:
        InvalidParameterValue), Filter.N (zone-name, region-name, state,
        zone-type) -> availabilityZoneInfo/item{zoneName, zoneState
        available, regionName, zoneType, optInStatus, messageSet} for the
        region's AZs of --azs (no zoneId: the fake has no AZ ids).
  DescribeInstanceTypes  InstanceType.N (one not in TYPES: 400
        InvalidInstanceType "The following supplied instance types do not
        exist: [T]") -> instanceTypeSet/item{instanceType, vCpuInfo
        {defaultVCpus}, gpuInfo{gpus/item{name, manufacturer NVIDIA,
        count}}} (every type of TYPES without InstanceType.N; one page).
  DryRun=true on any action: 412 DryRunOperation "Request would have
        succeeded, but DryRun flag is set." after SigV4 and before the
        action's own checks (the fake has no IAM permissions to check);
        RunInstances checks its parameters first (a malformed AMI id,
        an unknown type, a zone not of the region), then answers
        DryRunOperation without making anything or counting quota.
  The state of an instance (instanceState, stateReason):
    pending 0 -> running 16 (--boot-s) ;
    user terminate: shutting-down 32 -> terminated 48, Client.UserInitiatedShutdown ;
    interruption (/_control/interrupt): IMDS spot/instance-action 200 at
      once, the instance still running; notice_s later shutting-down ->
      terminated, Server.SpotInstanceTermination "Server.SpotInstanceTermination:
      Spot instance termination" ;
    crash (/_control/crash): terminated at once, Server.InternalError
      "Server.InternalError: Internal error on launch" (AWS documents this
      reason for launch failures; fake-only use for a dead host).
  The element "reason" (stateTransitionReason) is left empty: the fake
  does not invent AWS's wording there.

Pricing/billing: --prices JSON is {"TYPE": {"AZ": usd_per_hour, ...}, ...},
e.g. {"g5.xlarge": {"us-east-1a": 0.4123}}.  An instance costs the price of
its type in its AZ at launch (0, with a line on stderr, when absent), per
second from running to power-off (shutting-down, or the crash) with a 60 s
minimum (EC2 Linux per-second billing).

In-instance IMDSv2 (fake-only plumbing): each instance has its own listener
on 127.0.0.1 from launch to power-off; the instance XML names it in
<fakeImdsEndpoint>127.0.0.1:PORT</fakeImdsEndpoint> (not in AWS; absent
once off).  Rules as tests/fake-metadata.py's AWS part:
  PUT /latest/api/token with X-aws-ec2-metadata-token-ttl-seconds 1..21600
      -> 200 token (400 without or out of range; 403 with X-Forwarded-For)
  GET /latest/meta-data/{instance-id, instance-type, ami-id, local-ipv4,
      placement/availability-zone, placement/region, instance-life-cycle,
      spot/instance-action, events/recommendations/rebalance} and
      /latest/user-data need X-aws-ec2-metadata-token (401 without, with
      an unknown or an expired one); spot/instance-action is 404 until an
      interruption, then {"action":"terminate","time":"YYYY-MM-DDTHH:MM:SSZ"};
      rebalance 404 until /_control/rebalance, then {"noticeTime": "..."};
      user-data 404 when none was given.
--run-startup-scripts: at running the decoded UserData runs as /bin/bash
FILE in its own process group, cwd and log in --vm-log-dir (ID.log), env
AWS_EC2_METADATA_SERVICE_ENDPOINT=http://127.0.0.1:PORT (the IMDS listener;
the variable the AWS SDKs honour) and SPOTDECK_FAKE_INSTANCE=ID; at
power-off the group gets SIGTERM, SIGKILL 2 s later.  A UserData that is a
cloud-config (first line "#cloud-config") is not run: cloud-init reads it,
it is no script.  The fake kills every group when it exits on SIGTERM/SIGINT
(not on SIGKILL).

--vm-sshd (fake-only plumbing, for the aws provider's end-to-end tests):
each instance gets an address of its own on loopback, 127.X.Y.(10+k) for
the k-th instance launched, X.Y drawn at start (unless /_control/addresses
gave one), as its privateIpAddress and ipAddress, and at running a real
/usr/sbin/sshd of its own there on --vm-ssh-port, as the AMI's sshd: host
key DIR/ssh_host_ed25519_key (made once), authorized keys from a UserData
that is a cloud-config, the top-level list ssh_authorized_keys (what
cloud-init puts in the default user's authorized_keys):
    #cloud-config
    ssh_authorized_keys:
      - ssh-ed25519 AAAA... comment
      - "ssh-ed25519 AAAA... other"
(items plain or quoted with ' or ", up to the next top-level key; the
fake reads only that list, with no YAML library), every key for the user
the fake runs as (the only one the instance's sshd lets in here); and for
every session the environment
AWS_EC2_METADATA_SERVICE_ENDPOINT=http://127.0.0.1:PORT (the instance's
IMDS listener), SPOTDECK_FAKE_INSTANCE=ID and TMPDIR=DIR/ID.tmp.  At
power-off (terminate, an interruption at the end of its notice, crash) the
instance's sshd and every process whose environment holds
SPOTDECK_FAKE_INSTANCE=ID get SIGKILL: the machine is gone at once, as a
powered-off instance is; the fake does the same for every instance when it
exits on SIGTERM/SIGINT.

Service Quotas (JSON 1.1, the same port; a request carrying X-Amz-Target
is one): SigV4 as above with the service "servicequotas" in the scope.
  ServiceQuotasV20190624.GetServiceQuota {"ServiceCode": "ec2",
        "QuotaCode": C} for the three vCPU-based Spot quotas L-3819A6DF (G
        and VT), L-7212CCBC (P), L-34B43A08 (Standard) -> {"Quota":
        {"ServiceCode", "ServiceName", "QuotaArn", "QuotaCode", "QuotaName",
        "Value": --quota-vcpus (fake-only: one vCPU quota for every family,
        the one RunInstances enforces), "Unit": "None", "Adjustable": true,
        "GlobalQuota": false}}; another code or service: 400
        {"__type": "NoSuchResourceException", "message"}; another target:
        400 UnknownOperationException.  Content-Type
        application/x-amz-json-1.1.  Not logged in /_control/log.

Control (no auth, not logged; JSON bodies):
  POST /_control/capacity {"az": AZ, "type": T (optional), "count": N,
       "code": "InsufficientInstanceCapacity"}  next N RunInstances there fail
  POST /_control/quota     {"vcpus": N}
  POST /_control/price     {"type": T, "az": AZ, "usd_per_hour": P}: the
                           Spot price changes now (history and new launches)
  POST /_control/interrupt {"id": I, "notice_s": 120, "notice": true,
       "gone_after_s": null}  "notice": false leaves IMDS
       spot/instance-action 404 (AWS calls the notice best effort: one
       the instance never shows); gone_after_s S: S seconds after the
       power-off (0: with it) the instance leaves DescribeInstances (by
       tag, and InvalidInstanceID.NotFound by id) instead of staying listed
       terminated for the hour AWS documents (fault injection: an
       instance already gone when the controller looks)
  POST /_control/rebalance {"id": I}
  POST /_control/crash     {"id": I}
  POST /_control/fail      {"action": A (optional: any), "status": 503,
       "code": "ServiceUnavailable"|"RequestLimitExceeded"|"InternalError"|
       "Unavailable", "count": N, "after": false}  the next N signed
       requests (for action A) get that error; "after": true performs the
       request and loses its answer (what ClientToken retries are for)
  POST /_control/slow      {"seconds": S, "count": N, "action": A (optional)}
  POST /_control/addresses {"ips": [...]}  privateIpAddress and ipAddress of
       the next instances, one each (default 127.0.0.1; with --vm-sshd
       127.X.Y.(10+k))
  GET  /_control/log       {"requests": [{time, action, region, status,
       code (error code or null), client_token, instance_ids (InstanceId.N),
       auth (bool: Authorization
       present; never the signature, key or token)}]}
  GET  /_control/state     {"instances": [{id, reservation, region, az, type,
       state, code, state_reason, private_ip, public_ip, tags, imds,
       client_token, launch_time}]}
  GET  /_control/billing   {"instances": [{id, az, type, seconds (billed,
       >= 60), run_seconds, running, usd_per_hour, usd (rounded to the cent
       here only)}], "total_usd"} (instances that never ran are not listed)
"""
import argparse, base64, datetime, fnmatch, hashlib, hmac, json, os, re, secrets, signal
import sys, threading, time, urllib.parse, uuid
from http.server import BaseHTTPRequestHandler
from xml.sax.saxutils import escape

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fakevm  # noqa: E402
from fakevm import (Server, billing, kill_all_and_exit, kill_group, kill_marked, later,  # noqa: E402
                    next_vm_ip, run_script, send, start_listener, stop_listener, stop_sshd, vm_net)

XMLNS = "http://ec2.amazonaws.com/doc/2016-11-15/"
OWNER = "123456789012"
# instance types the fake knows: vCPUs, GPU (documentation only)
TYPES = {"g4dn.xlarge": (4, "T4"), "g5.xlarge": (4, "A10G"), "g6.xlarge": (4, "L4"),
         "p3.2xlarge": (8, "V100"), "p4d.24xlarge": (96, "A100x8")}
STATES = {"pending": 0, "running": 16, "shutting-down": 32, "terminated": 48, "stopping": 64, "stopped": 80}
REASONS = {"user": ("Client.UserInitiatedShutdown", "Client.UserInitiatedShutdown: User initiated shutdown"),
           "spot": ("Server.SpotInstanceTermination", "Server.SpotInstanceTermination: Spot instance termination"),
           "crash": ("Server.InternalError", "Server.InternalError: Internal error on launch")}
EMPTY_SHA = hashlib.sha256(b"").hexdigest()
ID_RE = re.compile(r"i-([0-9a-f]{8}|[0-9a-f]{17})\Z")
AUTH_RE = re.compile(r"AWS4-HMAC-SHA256 +Credential=([^,\s]+), *SignedHeaders=([^,\s]+), *Signature=([0-9a-f]{64})\s*\Z")

cond = threading.Condition()   # the one lock around all state
S = {
    "instances": {},     # id -> Inst, in launch order
    "tokens": {},        # (region, ClientToken) -> (fingerprint, instance id)
    "capacity": [],
    "fails": [],
    "slows": [],
    "addresses": [],
    "next_vm_ip": 0,
    "vm_net": vm_net(),  # (X, Y): this fake's instances are 127.X.Y.(10+k)
    "log": [],
    "billing": [],       # Inst objects that reached running
    "procs": [],
}
A = None
PRICES = {}
HISTORY = {}   # (type, az) -> [(time, usd_per_hour)], oldest first, once /_control/price changed it
STARTED = time.time()


def iso(t, ms=True):
    s = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t))
    return s + (".%03dZ" % (int(t * 1000) % 1000) if ms else "Z")


def region_azs(region):
    return [z for z in A.azs if z[:-1] == region]


class ApiError(Exception):
    def __init__(self, status, code, message):
        Exception.__init__(self, code)
        self.status, self.code, self.message = status, code, message


def bad(code, message, status=400):
    raise ApiError(status, code, message)


def error_xml(code, message, rid):
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>%s</Code><Message>%s'
            '</Message></Error></Errors><RequestID>%s</RequestID></Response>' % (escape(code), escape(message), rid))


def x(tag, value):
    return "<%s>%s</%s>" % (tag, escape(str(value)), tag)


# ---------------------------------------------------------------- SigV4

def uri_encode(s, keep_slash=False):
    return urllib.parse.quote(s, safe="-_.~" + ("/" if keep_slash else ""))


def hmac256(key, msg):
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def canonical_request(method, raw_path, get_all, names, body):
    """Section 2.1 step 2; get_all(name) gives the header's values."""
    u = urllib.parse.urlsplit(raw_path)
    path = "/".join(uri_encode(urllib.parse.unquote(seg)) for seg in (u.path or "/").split("/"))
    pairs = [(uri_encode(k), uri_encode(v))
             for k, v in urllib.parse.parse_qsl(u.query, keep_blank_values=True)]
    query = "&".join("%s=%s" % kv for kv in sorted(pairs))
    hlines = "".join("%s:%s\n" % (n, ",".join(" ".join(v.split()) for v in get_all(n))) for n in names)
    return "\n".join([method, path, query, hlines, ";".join(names), hashlib.sha256(body).hexdigest()])


def signature(secret, amzdate, region, service, canonical):
    """Section 2.1 steps 3-4: (string to sign, hex signature)."""
    date = amzdate[:8]
    sts = "\n".join(["AWS4-HMAC-SHA256", amzdate, "%s/%s/%s/aws4_request" % (date, region, service),
                     hashlib.sha256(canonical.encode()).hexdigest()])
    k = hmac256(("AWS4" + secret).encode(), date)
    for piece in (region, service, "aws4_request"):
        k = hmac256(k, piece)
    return sts, hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()


def verify_sigv4(method, raw_path, headers, body, service="ec2"):
    """Returns the region of the credential scope; raises ApiError."""
    auth = headers.get("Authorization")
    if auth is None:
        bad("AuthFailure", "AWS was not able to validate the provided access credentials", 401)
    m = AUTH_RE.match(auth.strip())
    if not m:
        bad("IncompleteSignature", "Authorization header requires 'Credential', 'SignedHeaders' and 'Signature' "
            "parameters of the AWS4-HMAC-SHA256 algorithm. Authorization=%s" % auth.split(" ")[0])
    cred, signed, sig = m.groups()
    parts = cred.split("/")
    if len(parts) != 5 or parts[3] != service or parts[4] != "aws4_request":
        bad("IncompleteSignature", "Credential should be KEY/DATE/REGION/%s/aws4_request, not '%s'."
            % (service, "/".join(parts[1:])))
    akid, date, region = parts[0], parts[1], parts[2]
    if akid != A.access_key:
        bad("AuthFailure", "AWS was not able to validate the provided access credentials", 401)
    names = signed.split(";")
    if names != sorted(names) or any(n != n.lower() for n in names):
        bad("IncompleteSignature", "SignedHeaders must be lowercase and sorted: '%s'." % signed)
    for need in ("host", "x-amz-date"):
        if need not in names:
            bad("IncompleteSignature", "'%s' must be a 'SignedHeader' in the AWS Authorization." % need.title())
    amzdate = headers.get("X-Amz-Date")
    try:
        t = datetime.datetime.strptime(amzdate or "", "%Y%m%dT%H%M%SZ").replace(tzinfo=datetime.timezone.utc)
    except ValueError:
        bad("IncompleteSignature", "Authorization header requires existence of either a 'X-Amz-Date' or a "
            "'Date' header in the form YYYYMMDD'T'HHMMSS'Z'.")
    if abs(t.timestamp() - time.time()) > 300:
        bad("RequestExpired", "Request has expired.")
    if A.session_token is not None:
        tok = headers.get("X-Amz-Security-Token")
        if tok is None or not hmac.compare_digest(tok, A.session_token):
            bad("AuthFailure", "AWS was not able to validate the provided access credentials", 401)
        if "x-amz-security-token" not in names:
            bad("IncompleteSignature", "'X-Amz-Security-Token' must be a 'SignedHeader' in the AWS Authorization.")
    if date != amzdate[:8]:
        bad("SignatureDoesNotMatch", "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of "
            "date from HTTP: '%s' != '%s', from '%s'." % (date, amzdate[:8], amzdate), 403)
    if region not in A.regions:
        bad("SignatureDoesNotMatch", "Credential should be scoped to a valid region, not '%s'." % region, 403)
    for n in names:
        if headers.get_all(n) is None:
            bad("IncompleteSignature", "Signed header '%s' is not in the request." % n)
    canonical = canonical_request(method, raw_path, headers.get_all, names, body)
    sts, want = signature(A.secret_key, amzdate, region, service, canonical)
    if not hmac.compare_digest(want, sig):
        bad("SignatureDoesNotMatch", "The request signature we calculated does not match the signature you "
            "provided. Check your AWS Secret Access Key and signing method. Consult the service documentation "
            "for details.\n\nThe Canonical String for this request should have been\n'%s'\n\n"
            "The String-to-Sign should have been\n'%s'\n" % (canonical, sts), 403)
    return region


# ---------------------------------------------------------------- instances

class Inst:
    def __init__(self, region, az, itype, image, user_data, tags, ip, token):
        self.id = "i-0" + secrets.token_hex(8)
        self.reservation = "r-0" + secrets.token_hex(8)
        self.sir = "sir-" + "".join(secrets.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(8))
        self.region, self.az, self.type, self.image = region, az, itype, image
        self.user_data, self.tags, self.ip, self.token = user_data, tags, ip, token
        self.vcpus = TYPES[itype][0]
        self.state = "pending"
        self.reason = None            # key of REASONS
        self.launched = time.time()
        self.started = None           # running since (billing start)
        self.stopped = None           # power-off (billing end)
        self.action = None            # spot/instance-action JSON
        self.unlisted = False         # gone from DescribeInstances (NotFound by id)
        self.rebalance = None
        self.imds_tokens = {}         # token -> expiry (monotonic)
        self.proc = None
        self.sshd = None
        self.msrv = None
        price = PRICES.get(itype, {}).get(az)
        if price is None:
            print("ec2.py: no price for %s in %s in --prices; billing it at 0" % (itype, az),
                  file=sys.stderr, flush=True)
        self.price = float(price or 0.0)

    def imds(self):
        return "127.0.0.1:%d" % self.msrv.server_address[1] if self.msrv else None

    def state_xml(self, tag, state=None):
        state = state or self.state
        return "<%s>%s%s</%s>" % (tag, x("code", STATES[state]), x("name", state), tag)

    def xml(self):
        priv_dns = "ip-%s.ec2.internal" % self.ip.replace(".", "-")
        out = [x("instanceId", self.id), x("imageId", self.image), self.state_xml("instanceState"),
               x("privateDnsName", priv_dns if self.state != "terminated" else ""),
               x("dnsName", ""), "<reason/>", x("amiLaunchIndex", 0), "<productCodes/>",
               x("instanceType", self.type), x("launchTime", iso(self.launched)),
               "<placement>%s<groupName/>%s</placement>" % (x("availabilityZone", self.az), x("tenancy", "default")),
               "<monitoring>%s</monitoring>" % x("state", "disabled")]
        if self.state != "terminated":
            out.append(x("privateIpAddress", self.ip))
        if self.state == "running":
            out.append(x("ipAddress", self.ip))
        out += ["<groupSet/>", x("architecture", "x86_64"), x("rootDeviceType", "ebs"),
                x("rootDeviceName", "/dev/sda1"), "<blockDeviceMapping/>", x("instanceLifecycle", "spot"),
                x("spotInstanceRequestId", self.sir), x("virtualizationType", "hvm"),
                x("clientToken", self.token or ""), x("hypervisor", "xen"), x("ebsOptimized", "false"),
                x("enaSupport", "true")]
        if self.tags:
            out.append("<tagSet>%s</tagSet>" % "".join("<item>%s%s</item>" % (x("key", k), x("value", v))
                                                       for k, v in self.tags))
        if self.reason:
            code, msg = REASONS[self.reason]
            out.append("<stateReason>%s%s</stateReason>" % (x("code", code), x("message", msg)))
        if self.msrv:
            out.append(x("fakeImdsEndpoint", self.imds()))
        return "<item>%s</item>" % "".join(out)

    def state_json(self):
        return {"id": self.id, "region": self.region, "az": self.az, "type": self.type, "state": self.state,
                "code": STATES[self.state], "state_reason": REASONS[self.reason][0] if self.reason else None,
                "private_ip": self.ip, "public_ip": self.ip if self.state == "running" else None,
                "tags": dict(self.tags), "imds": self.imds(), "client_token": self.token,
                "launch_time": self.launched, "reservation": self.reservation}


def reservation_xml(inst):
    return ("%s%s<groupSet/><instancesSet>%s</instancesSet>"
            % (x("reservationId", inst.reservation), x("ownerId", OWNER), inst.xml()))


# ---- in-instance IMDSv2

class ImdsHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body="", headers=()):
        send(self, status, body, "text/plain", headers)

    def handle_any(self):
        inst = self.server.inst
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)
        p = urllib.parse.urlsplit(self.path).path
        if p == "/latest/api/token":
            if self.command != "PUT":
                return self.reply(405)
            if self.headers.get("X-Forwarded-For"):
                return self.reply(403)
            ttl = self.headers.get("X-aws-ec2-metadata-token-ttl-seconds")
            if not ttl or not ttl.isdigit() or not 1 <= int(ttl) <= 21600:
                return self.reply(400)
            tok = "AQAE" + secrets.token_urlsafe(40)
            with cond:
                inst.imds_tokens[tok] = time.monotonic() + int(ttl)
            return self.reply(200, tok, [("X-aws-ec2-metadata-token-ttl-seconds", ttl)])
        if self.command != "GET":
            return self.reply(405)
        tok = self.headers.get("X-aws-ec2-metadata-token")
        with cond:
            valid = tok is not None and inst.imds_tokens.get(tok, 0) > time.monotonic()
            action, rebalance = inst.action, inst.rebalance
        if not valid:
            return self.reply(401)
        static = {"instance-id": inst.id, "instance-type": inst.type, "ami-id": inst.image,
                  "local-ipv4": inst.ip, "placement/availability-zone": inst.az,
                  "placement/region": inst.region, "instance-life-cycle": "spot"}
        if p == "/latest/user-data":
            return self.reply(200, inst.user_data.decode("utf-8", "replace")) if inst.user_data else self.reply(404)
        if not p.startswith("/latest/meta-data/"):
            return self.reply(404)
        key = p[len("/latest/meta-data/"):]
        if key in static:
            return self.reply(200, static[key])
        if key == "spot/instance-action":
            return self.reply(200, json.dumps(action, separators=(",", ":"))) if action else self.reply(404)
        if key == "events/recommendations/rebalance":
            return self.reply(200, json.dumps(rebalance, separators=(",", ":"))) if rebalance else self.reply(404)
        self.reply(404)

    do_GET = do_PUT = do_POST = do_DELETE = handle_any


# ---- lifecycle

def boot_done(inst):
    with cond:
        if inst.state != "pending":
            return
        inst.state = "running"
        inst.started = time.time()
        S["billing"].append(inst)
        run_startup(inst)
        start_sshd(inst)
        cond.notify_all()


def run_startup(inst):
    if not A.run_startup_scripts or not inst.user_data or cloud_config_keys(inst.user_data) is not None:
        return
    inst.proc = run_script(A.vm_log_dir, inst.id, ".user-data", inst.user_data,
                           {"AWS_EC2_METADATA_SERVICE_ENDPOINT": "http://" + inst.imds(),
                            "SPOTDECK_FAKE_INSTANCE": inst.id}, S["procs"])


KEYS_LINE_RE = re.compile(r"""(ssh_authorized_keys|"ssh_authorized_keys"|'ssh_authorized_keys')\s*:\s*(#.*)?\Z""")


def cloud_config_keys(user_data):
    """The top-level ssh_authorized_keys list of a UserData that is a
    cloud-config (first line #cloud-config), or None when it is none: the
    block list's items "- KEY" (plain, 'single' or "double" quoted) up to
    the next top-level line; nothing else of YAML."""
    lines = user_data.decode("utf-8", "replace").splitlines()
    if not lines or lines[0].rstrip() != "#cloud-config":
        return None
    keys, inside = [], False
    for line in lines[1:]:
        body = line.strip()
        if not body or body.startswith("#") or line.startswith("---"):
            continue
        if not line[0].isspace() and line[0] != "-":   # a top-level key
            inside = KEYS_LINE_RE.match(line.rstrip()) is not None
            continue
        if not inside or not (body.startswith("- ") or body == "-"):
            continue
        item = body[1:].strip()
        if len(item) >= 2 and item[0] == item[-1] == "'":
            item = item[1:-1].replace("''", "'")
        elif len(item) >= 2 and item[0] == item[-1] == '"':
            item = re.sub(r'\\(.)', r"\1", item[1:-1])
        else:
            item = re.split(r"\s#", item, maxsplit=1)[0].strip()
        if item:
            keys.append(item)
    return keys


def start_sshd(inst):
    if not A.vm_sshd:
        return
    inst.sshd = fakevm.start_sshd(A.vm_log_dir, inst.id, inst.ip, A.vm_ssh_port,
                                  cloud_config_keys(inst.user_data) or [],
                                  {"AWS_EC2_METADATA_SERVICE_ENDPOINT": "http://" + inst.imds(),
                                   "SPOTDECK_FAKE_INSTANCE": inst.id}, S["procs"])


def power_off(inst, state, reason):
    """Called with cond held: the instance stops running (billing ends, its
    processes and IMDS go) and enters state."""
    if inst.stopped is None:
        inst.stopped = time.time()
    inst.state, inst.reason = state, reason
    kill_group(inst.proc)
    stop_sshd(inst.sshd, inst.id)
    inst.sshd = None
    stop_listener(inst)
    cond.notify_all()
    if state == "shutting-down":
        later(A.boot_s / 2, finish_termination, inst)


def finish_termination(inst):
    with cond:
        if inst.state == "shutting-down":
            inst.state = "terminated"
            cond.notify_all()


def interrupt_end(inst, gone_after_s=None):
    with cond:
        if inst.state in ("pending", "running"):
            power_off(inst, "shutting-down", "spot")
        if gone_after_s is not None and gone_after_s <= 0:
            inst.unlisted = True   # no DescribeInstances ever shows it shut down
    if gone_after_s is not None and gone_after_s > 0:
        later(gone_after_s, unlist, inst)


def unlist(inst):
    with cond:
        inst.unlisted = True
        cond.notify_all()


# ---------------------------------------------------------------- parameters

def indexed(params, prefix):
    """Values of PREFIX.1, PREFIX.2, ... in index order."""
    out = []
    for k, v in params.items():
        m = re.match(re.escape(prefix) + r"\.(\d+)\Z", k)
        if m:
            out.append((int(m.group(1)), v))
    return [v for _, v in sorted(out)]


def filters(params):
    out = []
    nums = sorted({int(m.group(1)) for m in (re.match(r"Filter\.(\d+)\.Name\Z", k) for k in params) if m})
    for n in nums:
        out.append((params["Filter.%d.Name" % n], indexed(params, "Filter.%d.Value" % n)))
    return out


def need(params, name):
    v = params.get(name)
    if v is None or v == "":
        bad("MissingParameter", "The request must contain the parameter %s" % name)
    return v


def paging(items, params, lo, hi):
    mr = params.get("MaxResults")
    tok = params.get("NextToken")
    try:
        start = int(base64.b64decode(tok.encode(), validate=True).decode().split(":")[1]) if tok else 0
    except (ValueError, IndexError, UnicodeDecodeError, base64.binascii.Error):
        bad("InvalidParameterValue", "Invalid value for parameter NextToken: '%s'" % tok)
    if mr is None:
        n = len(items)
    else:
        if not mr.isdigit() or not lo <= int(mr) <= hi:
            bad("InvalidParameterValue", "Value ( %s ) for parameter maxResults is invalid. Expecting a value "
                "between %d and %d." % (mr, lo, hi))
        n = int(mr)
    chunk = items[start:start + n]
    nxt = base64.b64encode(("fake:%d" % (start + n)).encode()).decode() if start + n < len(items) else None
    return chunk, nxt


# ---------------------------------------------------------------- actions

def run_instances(region, params):
    with cond:   # whole call under the lock: a ClientToken twin sees the first one done
        return _run_instances(region, params)


def _run_instances(region, params):
    image = need(params, "ImageId")
    itype = need(params, "InstanceType")
    need(params, "MinCount")
    need(params, "MaxCount")
    token = params.get("ClientToken") or None
    fp = json.dumps(sorted((k, v) for k, v in params.items() if k not in ("ClientToken", "Version")))
    with cond:
        if token and (region, token) in S["tokens"]:
            old_fp, iid = S["tokens"][(region, token)]
            if old_fp != fp:
                bad("IdempotentParameterMismatch", "Arguments on this idempotent request are inconsistent with "
                    "arguments used in previous request(s).")
            return reservation_xml(S["instances"][iid])
    if not re.match(r"ami-([0-9a-f]{8}|[0-9a-f]{17})\Z", image):
        bad("InvalidAMIID.Malformed", 'Invalid id: "%s" (expecting "ami-...")' % image)
    if itype not in TYPES:
        bad("InvalidParameterValue", "Invalid value '%s' for InstanceType." % itype)
    if params["MinCount"] != "1" or params["MaxCount"] != "1":
        bad("InvalidParameterValue", "The fake launches one instance per call: MinCount=MaxCount=1.")
    if params.get("InstanceMarketOptions.MarketType") != "spot":
        bad("InvalidParameterValue", "The fake takes spot instances only: InstanceMarketOptions.MarketType=spot.")
    if params.get("InstanceMarketOptions.SpotOptions.SpotInstanceType", "one-time") != "one-time":
        bad("InvalidParameterValue", "The fake takes SpotInstanceType one-time only.")
    if params.get("InstanceMarketOptions.SpotOptions.InstanceInterruptionBehavior", "terminate") != "terminate":
        bad("InvalidParameterValue", "The fake takes InstanceInterruptionBehavior terminate only.")
    for k, v in params.items():
        if re.match(r"NetworkInterface\.\d+\.SubnetId\Z", k) or k == "SubnetId":
            bad("InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist" % v)
    user_data = b""
    if "UserData" in params:
        try:
            user_data = base64.b64decode(params["UserData"].encode(), validate=True)
        except (ValueError, base64.binascii.Error):
            bad("InvalidParameterValue", "Invalid BASE64 encoding of user data.")
        if len(params["UserData"]) > 16384:
            bad("InvalidParameterValue", "User data is limited to 16384 bytes")
    azs = region_azs(region)
    az = params.get("Placement.AvailabilityZone") or (azs[0] if azs else None)
    if az not in azs:
        bad("InvalidParameterValue", "Invalid availability zone: [%s]" % az)
    tags = []
    for n in sorted({int(m.group(1)) for m in (re.match(r"TagSpecification\.(\d+)\.ResourceType\Z", k)
                                               for k in params) if m}):
        rt = params["TagSpecification.%d.ResourceType" % n]
        if rt not in ("instance", "volume", "spot-instances-request", "network-interface"):
            bad("InvalidParameterValue", "'%s' is not a valid taggable resource type for this operation." % rt)
        m = 1
        while "TagSpecification.%d.Tag.%d.Key" % (n, m) in params:
            if rt == "instance":
                tags.append((params["TagSpecification.%d.Tag.%d.Key" % (n, m)],
                             params.get("TagSpecification.%d.Tag.%d.Value" % (n, m), "")))
            m += 1
    if params.get("DryRun", "").lower() == "true":
        # Its parameters were checked above, as EC2 checks a request
        # before the DryRun question; nothing is made, no quota counted.
        bad("DryRunOperation", "Request would have succeeded, but DryRun flag is set.", 412)
    vcpus = TYPES[itype][0]
    with cond:
        live = sum(i.vcpus for i in S["instances"].values() if i.state != "terminated")
        if live + vcpus > A.quota_vcpus:
            bad("VcpuLimitExceeded", "You have requested more vCPU capacity than your current vCPU limit of %d "
                "allows for the instance bucket that the specified instance type belongs to. Please visit "
                "http://aws.amazon.com/contact-us/ec2-request to request an adjustment to this limit."
                % A.quota_vcpus)
        for c in S["capacity"]:
            if c["count"] > 0 and c["az"] == az and c.get("type") in (None, itype):
                c["count"] -= 1
                code = c["code"]
                if code == "InsufficientInstanceCapacity":
                    bad(code, "We currently do not have sufficient %s capacity in the Availability Zone you "
                        "requested (%s). Our system will be working on provisioning additional capacity. You can "
                        "currently get %s capacity by not specifying an Availability Zone in your request or "
                        "choosing %s." % (itype, az, itype, ", ".join(z for z in azs if z != az) or az), 500)
                if code == "MaxSpotInstanceCountExceeded":
                    bad(code, "Max spot instance count exceeded")
                bad(code, "Injected %s for %s in %s." % (code, itype, az),
                    500 if code.startswith("Insufficient") else 400)
        ip = S["addresses"].pop(0) if S["addresses"] else "127.0.0.1"
        if A.vm_sshd and ip == "127.0.0.1":
            ip = next_vm_ip(S, A.vm_ssh_port)
        inst = Inst(region, az, itype, image, user_data, tags, ip, token)
        start_listener(inst, ImdsHandler)
        S["instances"][inst.id] = inst
        if token:
            S["tokens"][(region, token)] = (fp, inst.id)
        body = reservation_xml(inst)
    later(A.boot_s, boot_done, inst)
    return body


def lookup(region, ids):
    for i in ids:
        if not ID_RE.match(i):
            bad("InvalidInstanceID.Malformed", 'Invalid id: "%s"' % i)
    missing = [i for i in ids if i not in S["instances"] or S["instances"][i].region != region or
               S["instances"][i].unlisted]
    if len(missing) == 1:
        bad("InvalidInstanceID.NotFound", "The instance ID '%s' does not exist" % missing[0])
    if missing:
        bad("InvalidInstanceID.NotFound", "The instance IDs '%s' do not exist" % ", ".join(missing))
    return [S["instances"][i] for i in ids]


FILTERS = {"instance-state-name": lambda i: [i.state], "instance-state-code": lambda i: [str(STATES[i.state])],
           "availability-zone": lambda i: [i.az], "instance-type": lambda i: [i.type],
           "instance-id": lambda i: [i.id], "instance-lifecycle": lambda i: ["spot"],
           "tag-key": lambda i: [k for k, _ in i.tags]}


def match_filters(inst, fl):
    for name, values in fl:
        if name.startswith("tag:"):
            have = [v for k, v in inst.tags if k == name[4:]]
        else:
            have = FILTERS[name](inst)
        if not any(fnmatch.fnmatchcase(h, v) for h in have for v in values):
            return False
    return True


def describe_instances(region, params):
    ids = indexed(params, "InstanceId")
    fl = filters(params)
    for name, values in fl:
        if not (name.startswith("tag:") or name in FILTERS):
            bad("InvalidParameterValue", "The filter '%s' is invalid" % name)
    if ids and "MaxResults" in params:
        bad("InvalidParameterCombination", "The parameter instancesSet cannot be used with the parameter maxResults")
    with cond:
        insts = lookup(region, ids) if ids else [i for i in S["instances"].values()
                                                 if i.region == region and not i.unlisted]
        insts = [i for i in insts if match_filters(i, fl)]
        chunk, nxt = paging(insts, params, 5, 1000)
        body = "<reservationSet>%s</reservationSet>" % "".join("<item>%s</item>" % reservation_xml(i) for i in chunk)
    if nxt:
        body += x("nextToken", nxt)
    return body


def terminate_instances(region, params):
    ids = indexed(params, "InstanceId")
    if not ids:
        bad("MissingParameter", "The request must contain the parameter InstanceId")
    out = []
    with cond:
        for inst in lookup(region, ids):
            prev = inst.state
            if prev in ("pending", "running"):
                power_off(inst, "shutting-down", "user")
            out.append("<item>%s%s%s</item>" % (x("instanceId", inst.id), inst.state_xml("currentState"),
                                                inst.state_xml("previousState", prev)))
    return "<instancesSet>%s</instancesSet>" % "".join(out)


def parse_time(s, name):
    try:
        return datetime.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
    except ValueError:
        bad("InvalidParameterValue", "Invalid value '%s' for %s." % (s, name))


def describe_spot_price_history(region, params):
    types = indexed(params, "InstanceType")
    descs = indexed(params, "ProductDescription")
    az_want = params.get("AvailabilityZone")
    for k in ("StartTime", "EndTime"):
        if k in params:
            parse_time(params[k], k)
    start = parse_time(params["StartTime"], "StartTime") if "StartTime" in params else None
    end = parse_time(params["EndTime"], "EndTime") if "EndTime" in params else None
    fl = filters(params)
    getters = {"instance-type": lambda it: it[0], "availability-zone": lambda it: it[1],
               "product-description": lambda it: "Linux/UNIX"}
    for name, _ in fl:
        if name not in getters and name not in ("spot-price", "timestamp"):
            bad("InvalidParameterValue", "The filter '%s' is invalid" % name)
    rows = []
    for t in sorted(PRICES):
        for az in sorted(PRICES[t]):
            if az not in region_azs(region) or (types and t not in types) or (az_want and az != az_want):
                continue
            if descs and "Linux/UNIX" not in descs:
                continue
            if not all(any(fnmatch.fnmatchcase(getters[n]((t, az)), v) for v in vals)
                       for n, vals in fl if n in getters):
                continue
            hist = HISTORY.get((t, az)) or [(STARTED, float(PRICES[t][az]))]
            keep = [h for h in hist if (end is None or h[0] <= end) and (start is None or h[0] > start)]
            before = [h for h in hist if start is not None and h[0] <= start and (end is None or h[0] <= end)]
            for stamp, price in sorted(keep + before[-1:], reverse=True):
                rows.append((t, az, price, stamp))
    chunk, nxt = paging(rows, params, 1, 1000)
    items = "".join("<item>%s%s%s%s%s</item>" % (x("instanceType", t), x("productDescription", "Linux/UNIX"),
                                                 x("spotPrice", "%.6f" % p), x("timestamp", iso(int(stamp))),
                                                 x("availabilityZone", az)) for t, az, p, stamp in chunk)
    body = "<spotPriceHistorySet>%s</spotPriceHistorySet>" % items
    body += x("nextToken", nxt or "")
    return body


def describe_availability_zones(region, params):
    names = indexed(params, "ZoneName")
    fl = filters(params)
    getters = {"zone-name": lambda z: z, "region-name": lambda z: region, "state": lambda z: "available",
               "zone-type": lambda z: "availability-zone"}
    for name, _ in fl:
        if name not in getters:
            bad("InvalidParameterValue", "The filter '%s' is invalid" % name)
    zones = region_azs(region)
    for n in names:
        if n not in zones:
            bad("InvalidParameterValue", "Invalid availability zone: [%s]" % n)
    items = []
    for z in zones:
        if names and z not in names:
            continue
        if not all(any(fnmatch.fnmatchcase(getters[n](z), v) for v in vals) for n, vals in fl):
            continue
        items.append("<item>%s%s%s%s%s<messageSet/></item>" % (
            x("zoneName", z), x("zoneState", "available"), x("regionName", region),
            x("zoneType", "availability-zone"), x("optInStatus", "opt-in-not-required")))
    return "<availabilityZoneInfo>%s</availabilityZoneInfo>" % "".join(items)


def describe_instance_types(region, params):
    names = indexed(params, "InstanceType")
    for n in names:
        if n not in TYPES:
            bad("InvalidInstanceType", "The following supplied instance types do not exist: [%s]" % n)
    items = []
    for t, (vcpus, gpu) in TYPES.items():
        if names and t not in names:
            continue
        model, _, count = gpu.partition("x")
        items.append("<item>%s<vCpuInfo>%s</vCpuInfo><gpuInfo><gpus><item>%s%s%s</item></gpus></gpuInfo></item>" % (
            x("instanceType", t), x("defaultVCpus", str(vcpus)), x("name", model),
            x("manufacturer", "NVIDIA"), x("count", count or "1")))
    return "<instanceTypeSet>%s</instanceTypeSet>" % "".join(items)


SPOT_QUOTAS = {"L-3819A6DF": "All G and VT Spot Instance Requests", "L-7212CCBC": "All P Spot Instance Requests",
               "L-34B43A08": "All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests"}


def service_quotas(handler, target, raw):
    """A Service Quotas JSON 1.1 request: (status, JSON text)."""
    try:
        region = verify_sigv4(handler.command, handler.path, handler.headers, raw, "servicequotas")
    except ApiError as e:
        return e.status, json.dumps({"__type": e.code, "message": e.message})
    def err(typ, msg):
        return 400, json.dumps({"__type": typ, "message": msg})
    if target != "ServiceQuotasV20190624.GetServiceQuota":
        return err("UnknownOperationException", "Unknown operation %s" % target)
    try:
        q = json.loads(raw or b"{}")
    except ValueError:
        return err("SerializationException", "Start of structure or map found where not expected.")
    code = q.get("QuotaCode")
    if q.get("ServiceCode") != "ec2" or code not in SPOT_QUOTAS:
        return err("NoSuchResourceException", "The request failed because the specified resource does not exist.")
    return 200, json.dumps({"Quota": {
        "ServiceCode": "ec2", "ServiceName": "Amazon Elastic Compute Cloud (Amazon EC2)",
        "QuotaArn": "arn:aws:servicequotas:%s:%s:ec2/%s" % (region, OWNER, code), "QuotaCode": code,
        "QuotaName": SPOT_QUOTAS[code], "Value": float(A.quota_vcpus), "Unit": "None", "Adjustable": True,
        "GlobalQuota": False}})


ACTIONS = {"RunInstances": run_instances, "DescribeInstanceTypes": describe_instance_types, "DescribeInstances": describe_instances,
           "TerminateInstances": terminate_instances, "DescribeSpotPriceHistory": describe_spot_price_history,
           "DescribeAvailabilityZones": describe_availability_zones}
FAULTS = {"RequestLimitExceeded": "Request limit exceeded.",
          "ServiceUnavailable": "The service is unavailable. Please try again shortly.",
          "Unavailable": "The server is overloaded and can't handle the request.",
          "InternalError": "An internal error has occurred"}


# ---------------------------------------------------------------- HTTP

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, data, ctype):
        send(self, status, data, ctype)

    def handle_any(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        u = urllib.parse.urlsplit(self.path)
        if u.path.startswith("/_control/"):
            try:
                st, body = self.control(u.path, raw)
            except (ValueError, KeyError, TypeError, AttributeError) as e:
                st, body = 400, {"error": "bad control request: %r" % e}
            return self.reply(st, json.dumps(body, indent=1) + "\n", "application/json")
        target = self.headers.get("X-Amz-Target")
        if target:
            st, body = service_quotas(self, target, raw)
            return self.reply(st, body, "application/x-amz-json-1.1")
        rid = str(uuid.uuid4())
        entry = {"time": time.time(), "action": None, "region": None, "status": None, "code": None,
                 "client_token": None, "auth": self.headers.get("Authorization") is not None}
        with cond:
            S["log"].append(entry)
        try:
            params = dict(urllib.parse.parse_qsl(u.query, keep_blank_values=True))
            ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
            if raw and ctype in ("application/x-www-form-urlencoded", ""):
                params.update(urllib.parse.parse_qsl(raw.decode("utf-8", "replace"), keep_blank_values=True))
            with cond:
                entry["action"] = params.get("Action")
                entry["client_token"] = params.get("ClientToken")
                entry["instance_ids"] = indexed(params, "InstanceId")
            if self.command not in ("POST", "GET"):
                bad("InvalidAction", "The HTTP method %s is not supported by the fake." % self.command)
            region = verify_sigv4(self.command, self.path, self.headers, raw)
            with cond:
                entry["region"] = region
            action = params.get("Action")
            if not action:
                bad("MissingAction", "The request must contain the parameter Action")
            if action not in ACTIONS:
                bad("InvalidAction", "The action %s is not valid for this web service." % action)
            with cond:
                fault = slow = None
                for f in S["fails"]:
                    if f["count"] > 0 and f.get("action") in (None, action):
                        f["count"] -= 1
                        fault = dict(f)
                        break
                for s in S["slows"]:
                    if s["count"] > 0 and s.get("action") in (None, action):
                        s["count"] -= 1
                        slow = s["seconds"]
                        break
            if slow:
                time.sleep(slow)
            if params.get("DryRun", "").lower() == "true" and action != "RunInstances":
                bad("DryRunOperation", "Request would have succeeded, but DryRun flag is set.", 412)
            if fault and fault.get("after"):
                try:
                    ACTIONS[action](region, params)
                except ApiError:
                    pass
            if fault:
                bad(fault["code"], FAULTS.get(fault["code"], "Injected %s." % fault["code"]), fault["status"])
            body = ACTIONS[action](region, params)
            status = 200
            data = ('<?xml version="1.0" encoding="UTF-8"?>\n<%sResponse xmlns="%s">%s%s</%sResponse>'
                    % (action, XMLNS, x("requestId", rid), body, action))
        except ApiError as e:
            status, data = e.status, error_xml(e.code, e.message, rid)
            with cond:
                entry["code"] = e.code
        with cond:
            entry["status"] = status
        self.reply(status, data, "text/xml;charset=UTF-8")

    do_GET = do_POST = do_PUT = do_DELETE = handle_any

    # ---- control
    def control(self, p, raw):
        c = json.loads(raw) if raw else {}
        with cond:
            if p == "/_control/log":
                return 200, {"requests": [dict(e) for e in S["log"]]}
            if p == "/_control/state":
                return 200, {"instances": [i.state_json() for i in S["instances"].values()]}
            if p == "/_control/billing":
                return 200, billing(S["billing"], lambda i, billed, run, usd: {
                    "id": i.id, "az": i.az, "type": i.type, "seconds": billed, "run_seconds": run,
                    "running": i.stopped is None, "usd_per_hour": i.price, "usd": round(usd, 2)})
            if p == "/_control/capacity":
                if c["az"] not in A.azs:
                    return 400, {"error": "unknown az %s" % c["az"]}
                S["capacity"].append({"az": c["az"], "type": c.get("type"), "count": int(c.get("count", 1)),
                                      "code": c.get("code", "InsufficientInstanceCapacity")})
                return 200, {"ok": True}
            if p == "/_control/price":
                t, az, usd = c["type"], c["az"], float(c["usd_per_hour"])
                if az not in A.azs or not usd > 0:
                    return 400, {"error": "unknown az %s or a price not > 0" % az}
                old = PRICES.setdefault(t, {}).get(az)
                hist = HISTORY.setdefault((t, az), [(STARTED, float(old))] if old is not None else [])
                hist.append((time.time(), usd))
                PRICES[t][az] = usd
                return 200, {"ok": True}
            if p == "/_control/quota":
                A.quota_vcpus = int(c["vcpus"])
                return 200, {"ok": True}
            if p == "/_control/addresses":
                S["addresses"].extend(c["ips"])
                return 200, {"ok": True}
            if p == "/_control/fail":
                S["fails"].append({"action": c.get("action"), "status": int(c.get("status", 503)),
                                   "code": c.get("code", "ServiceUnavailable"), "count": int(c.get("count", 1)),
                                   "after": bool(c.get("after"))})
                return 200, {"ok": True}
            if p == "/_control/slow":
                S["slows"].append({"seconds": float(c["seconds"]), "count": int(c.get("count", 1)),
                                   "action": c.get("action")})
                return 200, {"ok": True}
            if p in ("/_control/interrupt", "/_control/rebalance", "/_control/crash"):
                inst = S["instances"].get(c["id"])
                if not inst:
                    return 404, {"error": "no instance %s" % c["id"]}
                if inst.state not in ("pending", "running"):
                    return 409, {"error": "instance %s is %s" % (inst.id, inst.state)}
                now = time.time()
                if p == "/_control/crash":
                    power_off(inst, "terminated", "crash")
                elif p == "/_control/rebalance":
                    inst.rebalance = {"noticeTime": iso(now, ms=False)}
                else:
                    notice = float(c.get("notice_s", 120))
                    if c.get("notice", True):
                        inst.action = {"action": "terminate", "time": iso(now + notice, ms=False)}
                    gone = c.get("gone_after_s")
                    later(notice, interrupt_end, inst, None if gone is None else float(gone))
                cond.notify_all()
                return 200, {"ok": True, "time": now}
        return 404, {"error": "no such control %s" % p}


def shutdown_vms(*_):
    if A.vm_sshd:
        for inst in list(S["instances"].values()):
            kill_marked(inst.id)
    kill_all_and_exit(cond, S["procs"])


def main():
    global A, PRICES
    csv = lambda s: [z for z in s.split(",") if z]
    ap = argparse.ArgumentParser(description="fake EC2 for spotdeck's tests")
    ap.add_argument("--regions", required=True, type=csv)
    ap.add_argument("--azs", required=True, type=csv)
    ap.add_argument("--access-key", required=True)
    ap.add_argument("--secret-key", required=True)
    ap.add_argument("--session-token")
    ap.add_argument("--boot-s", type=float, default=1.0)
    ap.add_argument("--quota-vcpus", type=int, default=64)
    ap.add_argument("--prices")
    ap.add_argument("--run-startup-scripts", action="store_true")
    ap.add_argument("--vm-log-dir")
    ap.add_argument("--vm-sshd", action="store_true")
    ap.add_argument("--vm-ssh-port", type=int, default=2222)
    A = ap.parse_args()
    for z in A.azs:
        if z[:-1] not in A.regions:
            ap.error("AZ %s is in no region of --regions" % z)
    if A.run_startup_scripts and not A.vm_log_dir:
        ap.error("--run-startup-scripts needs --vm-log-dir")
    if A.vm_sshd and not A.vm_log_dir:
        ap.error("--vm-sshd needs --vm-log-dir")
    if A.vm_log_dir:
        os.makedirs(A.vm_log_dir, exist_ok=True)
    if A.prices:
        with open(A.prices) as f:
            PRICES = json.load(f)
    signal.signal(signal.SIGTERM, shutdown_vms)
    signal.signal(signal.SIGINT, shutdown_vms)
    srv = Server(("127.0.0.1", 0), Handler)
    print(srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
