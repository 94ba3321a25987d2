#!/usr/bin/env python3
"""A fake of the three clouds' in-VM metadata services, for the worker's
preemption-notice watcher (src/worker/notice-watch.h).  Python standard
library only, and fake-cloud/fakevm.py (shared with the fake clouds).
Binds 127.0.0.1 on an ephemeral port and prints the port on its first
stdout line.

It behaves as the clouds document it (../shared/reference/cloud-apis.md,
sections 1.4, 2.4 and 3):
  GCE    /computeMetadata/v1/instance/{preempted,maintenance-event}: 403
         without "Metadata-Flavor: Google" (and with X-Forwarded-For); an
         ETag header on every answer; ?wait_for_change=true hangs until the
         value changes or timeout_sec passes, and answers at once when
         last_etag is not the current value's ETag.
  AWS    PUT /latest/api/token: 400 without a TTL header of 1..21600 s;
         GETs under /latest/meta-data/ need X-aws-ec2-metadata-token (401
         without, or expired); spot/instance-action and
         events/recommendations/rebalance are 404 until flipped.
         iam/security-credentials/ lists the instance role given with
         --aws-role NAME (404 without one) and iam/security-credentials/NAME
         is its key as EC2 writes it: {"Code": "Success", "LastUpdated",
         "Type": "AWS-HMAC", "AccessKeyId", "SecretAccessKey", "Token",
         "Expiration": now + --aws-role-ttl (21600 s), "...Z"}, the key being
         --aws-role-key AKID:SECRET:TOKEN.
  Azure  /metadata/scheduledevents?api-version=...: 400 without
         "Metadata: true" or api-version; {"DocumentIncarnation","Events"};
         a Preempt event for VM "spotdeck-vm" once flipped (NotBefore 30 s
         ahead, RFC 1123); POST {"StartRequests":[{"EventId"}]} is recorded
         as an acknowledgement and removes the event.
         /metadata/instance/compute/name?format=text is the VM's name.
Control (no headers needed), for the test:
  POST /_control/flip?what=gce-preempted|gce-maintenance|gce-clear|
       aws-action|aws-rebalance|aws-clear|azure-preempt   -> {"time": wall-clock seconds}
       (gce-clear: both GCE values back to FALSE / NONE; aws-clear: both
       AWS documents 404 again)
  GET  /_control/log   -> {"requests": [{time (arrival), method, path,
                            status (None while unanswered)}],
                            "acks": [{time, event_id}]}
"""
import argparse, email.utils, json, os, secrets, sys, threading, time, urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake-cloud"))
from fakevm import send, wait_for_change  # noqa: E402

VM = "spotdeck-vm"
lock = threading.Condition()
state = {
    "gce": {"preempted": "FALSE", "maintenance-event": "NONE"},
    "gce_version": {"preempted": 1, "maintenance-event": 1},
    "aws_tokens": {},            # token -> expiry (monotonic)
    "aws_action": None,
    "aws_rebalance": None,
    "azure_inc": 1,
    "azure_events": [],
}
log = {"requests": [], "acks": []}


def iso(t):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def etag(key):
    return "%08x" % (hash((key, state["gce_version"][key])) & 0xffffffff)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body="", ctype="text/plain", headers=()):
        # A watcher that stopped dropped its long-poll: send carries on.
        send(self, status, body, ctype, headers)
        if self.entry is not None:
            with lock:
                self.entry["status"] = status

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def do_GET(self):
        self.route()

    def do_PUT(self):
        self.route()

    def do_POST(self):
        self.route()

    def route(self):
        # Logged as it arrives (a long-poll answers much later), its
        # status filled in when answered (None until then).
        self.entry = None
        if not self.path.startswith("/_control"):
            self.entry = {"time": time.time(), "method": self.command, "path": self.path, "status": None}
            with lock:
                log["requests"].append(self.entry)
        u = urllib.parse.urlsplit(self.path)
        q = dict(urllib.parse.parse_qsl(u.query))
        p = u.path
        if p.startswith("/_control/"):
            return self.control(p, q)
        if p.startswith("/computeMetadata/v1/instance/"):
            return self.gce(p[len("/computeMetadata/v1/instance/"):], q)
        if p.startswith("/latest/"):
            return self.aws(p, q)
        if p.startswith("/metadata/"):
            return self.azure(p, q)
        self.body()
        self.reply(404, "not found\n")

    # ---- control ----
    def control(self, p, q):
        self.body()
        if p == "/_control/log":
            with lock:
                return self.reply(200, json.dumps(log), "application/json")
        if p != "/_control/flip" or self.command != "POST":
            return self.reply(404, "no such control\n")
        what, now = q.get("what"), time.time()
        with lock:
            if what == "gce-preempted":
                state["gce"]["preempted"] = "TRUE"
                state["gce_version"]["preempted"] += 1
            elif what == "gce-clear":
                state["gce"] = {"preempted": "FALSE", "maintenance-event": "NONE"}
                for k in state["gce_version"]:
                    state["gce_version"][k] += 1
            elif what == "gce-maintenance":
                state["gce"]["maintenance-event"] = "TERMINATE_ON_HOST_MAINTENANCE"
                state["gce_version"]["maintenance-event"] += 1
            elif what == "aws-clear":
                state["aws_action"] = state["aws_rebalance"] = None
            elif what == "aws-action":
                state["aws_action"] = {"action": "terminate", "time": iso(now + 120)}
            elif what == "aws-rebalance":
                state["aws_rebalance"] = {"noticeTime": iso(now)}
            elif what == "azure-preempt":
                state["azure_events"].append({
                    "EventId": "602d9444-d2cd-49c7-8624-8643e7171297", "EventStatus": "Scheduled",
                    "EventType": "Preempt", "ResourceType": "VirtualMachine", "Resources": [VM],
                    "NotBefore": email.utils.formatdate(now + 30, usegmt=True),
                    "Description": "", "EventSource": "Platform", "DurationInSeconds": -1})
                state["azure_inc"] += 1
            else:
                return self.reply(400, "unknown flip %r\n" % what)
            lock.notify_all()
        self.reply(200, json.dumps({"time": now}), "application/json")

    # ---- GCE ----
    def gce(self, key, q):
        self.body()
        if self.headers.get("Metadata-Flavor") != "Google" or self.headers.get("X-Forwarded-For"):
            return self.reply(403, "Missing required header: Metadata-Flavor\n", "text/html")
        if key not in state["gce"]:
            return self.reply(404, "not found\n")
        with lock:
            wait_for_change(lock, q, lambda: etag(key))
            value, tag = state["gce"][key], etag(key)
        self.reply(200, value, "application/text", [("ETag", tag), ("Metadata-Flavor", "Google")])

    # ---- AWS IMDSv2 ----
    def aws(self, p, q):
        self.body()
        if p == "/latest/api/token":
            if self.command != "PUT":
                return self.reply(405, "")
            ttl = self.headers.get("X-aws-ec2-metadata-token-ttl-seconds")
            if not ttl or not ttl.isdigit() or not 1 <= int(ttl) <= 21600:
                return self.reply(400, "")
            tok = secrets.token_urlsafe(24)
            with lock:
                state["aws_tokens"][tok] = time.monotonic() + int(ttl)
            return self.reply(200, tok, headers=[("X-aws-ec2-metadata-token-ttl-seconds", ttl)])
        tok = self.headers.get("X-aws-ec2-metadata-token")
        with lock:
            valid = tok in state["aws_tokens"] and state["aws_tokens"][tok] > time.monotonic()
            action, rebalance = state["aws_action"], state["aws_rebalance"]
        if not valid:
            return self.reply(401, "")
        creds = "/latest/meta-data/iam/security-credentials/"
        if p == creds or p == creds[:-1]:
            return self.reply(200, ARGS.aws_role, "text/plain") if ARGS.aws_role else self.reply(404, "")
        if ARGS.aws_role and p == creds + ARGS.aws_role:
            kid, secret, token = ARGS.aws_role_key.split(":", 2)
            now = time.time()
            return self.reply(200, json.dumps({
                "Code": "Success", "LastUpdated": iso(now), "Type": "AWS-HMAC", "AccessKeyId": kid,
                "SecretAccessKey": secret, "Token": token, "Expiration": iso(now + ARGS.aws_role_ttl)},
                indent=2), "text/plain")
        if p == "/latest/meta-data/spot/instance-action":
            return self.reply(200, json.dumps(action), "text/plain") if action else self.reply(404, "")
        if p == "/latest/meta-data/events/recommendations/rebalance":
            return self.reply(200, json.dumps(rebalance), "text/plain") if rebalance else self.reply(404, "")
        self.reply(404, "")

    # ---- Azure ----
    def azure(self, p, q):
        body = self.body()
        if self.headers.get("Metadata") != "true":
            return self.reply(400, json.dumps({"error": "Bad request. Required metadata header not specified"}),
                              "application/json")
        if "api-version" not in q:
            return self.reply(400, json.dumps({"error": "Bad request. api-version was not specified"}),
                              "application/json")
        if p == "/metadata/instance/compute/name" and q.get("format") == "text":
            return self.reply(200, VM)
        if p != "/metadata/scheduledevents":
            return self.reply(404, "")
        if self.command == "POST":
            try:
                ids = [r["EventId"] for r in json.loads(body)["StartRequests"]]
            except (ValueError, KeyError, TypeError):
                return self.reply(400, json.dumps({"error": "bad StartRequests"}), "application/json")
            with lock:
                for i in ids:
                    log["acks"].append({"time": time.time(), "event_id": i})
                state["azure_events"] = [e for e in state["azure_events"] if e["EventId"] not in ids]
                state["azure_inc"] += 1
            return self.reply(200, "")
        with lock:
            doc = {"DocumentIncarnation": state["azure_inc"], "Events": state["azure_events"]}
        self.reply(200, json.dumps(doc), "application/json")


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--aws-role")
    ap.add_argument("--aws-role-key", default="ASIAFAKEROLE0000KEY:fake-secret:fake-token")
    ap.add_argument("--aws-role-ttl", type=int, default=21600)
    ARGS = ap.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    print(srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
