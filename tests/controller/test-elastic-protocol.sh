#!/bin/sh
# A wrong token (another one, or the real one with a character more, one
# less or its last changed) is rejected and journaled; an over-long line, invalid JSON,
# an unknown type or a wrong version closes that connection with a reason and
# disturbs nothing else (training goes on).  The run (min_workers: both
# train from the start) is far longer than the test and ends with quit.
exec python3 - <<'PY'
import sys, os, socket, json, time
sys.path.insert(0, os.path.join(os.environ.get("top_srcdir", "."), "tests"))
from elastic import *
r = Run(job(model="mlp", epochs=20, min_workers=2, checkpoint_every=0, log_every=10), workers=2)
port = r.wait_type("run_start")["port"]
g = r.wait(lambda e: e.get("type") == "generation" and e.get("world_size") == 2, "generation of 2")
r.wait(lambda e: e.get("type") == "step" and e["generation"] == g["generation"], "training")
token = open(os.path.join(r.run_dir, "token")).read().strip()

def attempt(payload, event, reason_part, welcome_ok=False):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(payload)
    s.settimeout(10)
    data = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    except (socket.timeout, ConnectionResetError):
        pass
    s.close()
    replies = [json.loads(l) for l in data.decode().splitlines() if l.strip()]
    if not welcome_ok and any(m.get("type") == "welcome" for m in replies):
        fail("the controller welcomed a peer that should get %s (%s)" % (event, reason_part))
    e = r.wait(lambda e: e.get("type") == event, event)
    if reason_part not in e["reason"]:
        fail("%s: reason %r lacks %r" % (event, e["reason"], reason_part))
    if not replies or replies[-1].get("type") != "error":
        fail("no error message sent back for %s (got %r)" % (reason_part, data[:100]))
    ok("%s: %s" % (event, e["reason"]))

hello = {"type": "hello", "version": 4, "token": "x" * 32, "server_id": "intruder", "pid": 1}
attempt((json.dumps(hello) + "\n").encode(), "auth_failed", "wrong token")
# The run's real token with one character more, or one less, or its last
# one changed: a compare that stops at either string's end would let these in.
for bad, what in ((token + "0", "one extra character"), (token[:-1], "one character short"),
                  (token[:-1] + ("0" if token[-1] != "0" else "1"), "last character changed")):
    attempt((json.dumps(dict(hello, token=bad, server_id="near-miss")) + "\n").encode(), "auth_failed",
            "wrong token")
    ok("the run's token with %s is refused" % what)
attempt(b"{\"type\": \"hello\", " + b" " * (1 << 20) + b"\n", "protocol_error", "longer than")
attempt(b"{not json\n", "protocol_error", "invalid JSON")
attempt(b"{\"type\": \"launch_missiles\"}\n", "protocol_error", "unknown message type")
hello2 = dict(hello, version=5, token=token, server_id="future")
attempt((json.dumps(hello2) + "\n").encode(), "protocol_error", "version")
# A worker of version 2 (one all-reduce after backward, no buckets) cannot
# train with this build's, nor one of version 3 (it would open an ONNX
# model's path, which is the controller's, instead of asking for its bytes).
for past in (2, 3):
    hello1 = dict(hello, version=past, token=token, server_id="past%d" % past)
    attempt((json.dumps(hello1) + "\n").encode(), "protocol_error", "version")
# An authenticated peer that then sends an unknown type.
good = dict(hello, token=token, server_id="rogue")
attempt((json.dumps(good) + "\n" + json.dumps({"type": "bogus"}) + "\n").encode(), "protocol_error", "unknown message type",
        welcome_ok=True)
# An authenticated peer asking for a model file this run does not have
# (its model is a built-in one) gets nothing but a refusal.
good = dict(hello, token=token, server_id="model-thief")
attempt((json.dumps(good) + "\n" + json.dumps({"type": "model_get", "sha256": "ab" * 32}) + "\n").encode(),
        "protocol_error", "is not this run's model", welcome_ok=True)
# Nothing else was disturbed: same generation, training continues.
before = r.events[-1]["t"]
s = r.wait(lambda e: e.get("type") == "step" and e["t"] > before, "a later step")
if s["world_size"] != 2 or s["generation"] != g["generation"]:
    fail("generation %d of %d workers after the attacks, expected generation %d of 2"
         % (s["generation"], s["world_size"], g["generation"]))
s2 = r.wait(lambda e: e.get("type") == "step" and e["step"] >= s["step"] + 50, "50 more steps")
if s2["world_size"] != 2 or s2["generation"] != g["generation"]:
    fail("step %d: generation %d of %d workers, expected generation %d of 2"
         % (s2["step"], s2["generation"], s2["world_size"], g["generation"]))
r.command("quit")
ck = r.wait_type("checkpoint")
# A headless quit exits 1 (spotdeck(1)): the job did not finish.
if r.finish() != 1:
    fail("exit status after quit")
ok("training unaffected: generation %d of 2 went on to step %d; quit saved ckpt-%d"
   % (g["generation"], s2["step"], ck["step"]))
PY
