#!/bin/sh
# The worker's end of the model transfer (protocol.h: model_get,
# model_chunk), against a fake controller: the job names an ONNX path that
# does not exist on the worker's host, and the welcome names the file's
# SHA-256 and size.  Sent whole, in 3 chunks, the bytes are built into the
# model (the worker says ready); a chunk with one byte changed, a chunk
# lost, or bytes of another hash than the welcome's are refused with one
# line - on the worker's stderr and as its fatal log to the controller -
# and the worker exits 1 without ever saying ready.
. "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}/tests/lib.sh"
tmpdir
"$top_builddir/tests/engine/onnx-gen" "$T/model.onnx" 8 8 10 || fail "onnx-gen"
WORKER="$WORKER" MODEL="$T/model.onnx" python3 - <<'PY'
import hashlib, json, os, socket, subprocess, sys
worker, model = os.environ["WORKER"], os.environ["MODEL"]
data = open(model, "rb").read()
sha = hashlib.sha256(data).hexdigest()
token = "t" * 32
job = {"model": "/nonexistent/on/this/host/model.onnx", "dataset": "synthetic", "synthetic_c": 1,
       "synthetic_h": 8, "synthetic_w": 8, "synthetic_samples": 256, "global_batch": 32, "epochs": 1}

def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)

def session(what, chunks, welcome_sha=sha):
    """One worker against a fake controller that sends chunks [(offset,
    bytes, sha)] on model_get; returns (messages from the worker, its exit
    status, its stderr)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    p = subprocess.Popen([worker, "--connect", "127.0.0.1:%d" % port, "--server-id", "w-" + what,
                          "--threads", "1"], env=dict(os.environ, SPOTDECK_TOKEN=token),
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    srv.settimeout(60)
    c, _ = srv.accept()
    c.settimeout(60)
    f = c.makefile("rwb")
    def send(m):
        f.write((json.dumps(m) + "\n").encode())
        f.flush()
    got = []
    for line in f:
        m = json.loads(line)
        got.append(m)
        if m["type"] == "hello":
            send({"type": "welcome", "version": m["version"], "worker_id": "w", "job": job,
                  "heartbeat_ms": 1000, "model_sha256": welcome_sha, "model_bytes": len(data)})
        elif m["type"] == "model_get":
            if m["sha256"] != welcome_sha:
                fail("%s: model_get for %s, the welcome named %s" % (what, m["sha256"], welcome_sha))
            for off, b, s in chunks:
                send({"type": "model_chunk", "sha256": s, "offset": off, "total": len(data), "data": b.hex()})
        elif m["type"] in ("ready", "log"):
            break
    c.close()
    srv.close()
    try:
        rc = p.wait(timeout=60) if got[-1]["type"] == "log" else (p.kill(), p.wait())[1]
    except subprocess.TimeoutExpired:
        p.kill()
        fail("%s: the worker did not exit" % what)
    return got, rc, p.stderr.read()

third = (len(data) + 2) // 3
whole = [(i, data[i:i + third], sha) for i in range(0, len(data), third)]
got, rc, err = session("whole", whole)
types = [m["type"] for m in got]
if types[:2] != ["hello", "model_get"] or types[-1] != "ready":
    fail("whole file: the worker said %s; stderr %s" % (types, err))
print("ok: %d bytes in %d chunks built into the model; the worker said %s" % (len(data), len(whole), types))

flipped = bytearray(data[third:2 * third])
flipped[7] ^= 0x01
bad_sha = hashlib.sha256(data[:third] + bytes(flipped) + data[2 * third:]).hexdigest()
cases = [
    ("one byte changed", [whole[0], (third, bytes(flipped), sha), whole[2]], sha,
     "model: the %d bytes received have SHA-256 %s, the welcome named %s (corrupted in transit)"
     % (len(data), bad_sha, sha)),
    ("a chunk lost", [whole[0], whole[2]], sha,
     "model_chunk: offset %d, expected %d (a chunk lost or out of order)" % (2 * third, third)),
    # The welcome and the chunks name another hash than the bytes have.
    ("another hash in the welcome", [(o, b, "ab" * 32) for o, b, _ in whole], "ab" * 32,
     "model: the %d bytes received have SHA-256 %s, the welcome named %s (corrupted in transit)"
     % (len(data), sha, "ab" * 32)),
    # A chunk that names another model than the welcome's.
    ("a chunk of another model", [whole[0], (third, whole[1][1], "cd" * 32)], sha,
     "model_chunk: for model cdcdcdcdcdcdcdcd..., the welcome named %s..." % sha[:16]),
]
for what, chunks, wsha, want in cases:
    got, rc, err = session(what.replace(" ", "-"), chunks, wsha)
    logs = [m for m in got if m["type"] == "log"]
    if any(m["type"] == "ready" for m in got):
        fail("%s: the worker said ready" % what)
    if not logs or logs[-1]["level"] != "fatal" or logs[-1]["message"] != want:
        fail("%s: fatal log %s, expected %r" % (what, logs, want))
    lines = err.strip().splitlines()
    if rc != 1 or not lines or not lines[-1].endswith(want):
        fail("%s: exit %s, stderr %r" % (what, rc, err))
    print("ok: %s refused: %s" % (what, lines[-1]))
PY
