#!/bin/sh
# An ONNX model that only the controller can read trains on two workers:
# the file is deleted as soon as the run has started (spotdeck read and
# checked it before), so the workers' only copy is the bytes the
# controller sent them (model_sent, one per worker, with the file's SHA-256
# and size), and both hold the very same parameters (equal checksums).  A
# run quit mid-way resumes only with the same file: another file at the
# same path (the model exported again) is refused before anything starts,
# with one line naming the checkpoint, the file and both SHA-256s; the
# same bytes again train on from the checkpoint.  (The run is far longer
# than the test, which quits it: the tiny model trains 1000 to 5000
# steps/s, so 20000 epochs of 128 steps last minutes at the least.)  The model is tests/engine/onnx-gen.h's tiny
# CNN on 1x8x8 synthetic data (no Python or dataset needed), its file
# padded to 1.5 MB (a long producer name) so that it travels in 6 chunks of
# 256 KiB, paced as the checkpoint stream is: at most 1 MiB and one chunk's
# message wait on a socket.
exec python3 - <<'PY'
import sys, os, hashlib, subprocess, tempfile
sys.path.insert(0, os.path.join(os.environ.get("top_srcdir", "."), "tests"))
from elastic import *
GEN = os.path.join(BUILD, "tests", "engine", "onnx-gen")
d = tempfile.mkdtemp(prefix="spotdeck-onnx.")
import elastic
elastic._tmpdirs.append(d)   # removed at exit, as the runs' own
model = os.path.join(d, "model.onnx")

import math
CHUNK, BOUND = 256 * 1024, 1 << 20

def gen(pad=1500000):
    subprocess.run([GEN, "--pad", str(pad), model, "8", "8", "10"], check=True)
    with open(model, "rb") as f:
        b = f.read()
    return hashlib.sha256(b).hexdigest(), len(b)

sha, size = gen()
j = job(model=model, dataset="synthetic", synthetic_c=1, synthetic_h=8, synthetic_w=8,
        synthetic_samples=4096, epochs=20000, global_batch=32, log_every=5, checkpoint_every=200,
        min_workers=2, lr=0.05)
r = Run(j, workers=2)
r.wait_type("run_start")
os.unlink(model)   # read and checked already: from now on only the controller has it
sent = {}
while len(sent) < 2:
    e = r.wait_type("model_sent")
    sent[e["server"]] = e
for s, e in sent.items():
    if e["sha256"] != sha or e["bytes"] != size or e["chunks"] != math.ceil(size / CHUNK):
        fail("model_sent to %s: %s; expected sha256 %s, %d bytes in %d chunks" %
             (s, e, sha, size, math.ceil(size / CHUNK)))
    if e["max_queued_bytes"] > BOUND + 2 * CHUNK + 4096:
        fail("model_sent to %s: %d bytes waited at once; the bound is 1 MiB + one chunk" %
             (s, e["max_queued_bytes"]))
ok("the model's %d bytes went to %s in %d chunks (at most %d bytes waiting; sha256 %s...)" %
   (size, ", ".join(sorted(sent)), e["chunks"], max(x["max_queued_bytes"] for x in sent.values()), sha[:16]))
g = r.wait(lambda e: e.get("type") == "generation" and e.get("world_size") == 2, "generation of 2")
seen = 0
while seen < 3:
    cs = r.wait(lambda e: e.get("type") == "checksum" and e["generation"] == g["generation"], "checksums")
    vals = cs["checksums"]
    if len(vals) != 2 or len(set(vals.values())) != 1:
        fail("step %d: checksums differ across the two workers: %s" % (cs["step"], vals))
    seen += 1
ok("step %d: both workers hold parameters %s" % (cs["step"], list(vals.values())[0]))
errs = [e for e in r.events if e.get("type") in ("job_error", "protocol_error")]
if errs:
    fail("errors while the model travelled: %s" % errs)
r.wait(lambda e: e.get("type") == "checkpoint" and e["step"] >= 200, "checkpoint at step >= 200")
r.command("quit")
final = r.wait_type("checkpoint", reason="final")
r.finish()
run_dir = r.run_dir

# Another file at the same path: the model exported again.
other, _ = gen(1500001)   # the same network, one byte more of producer name
if other == sha:
    fail("onnx-gen wrote the same bytes with another producer")
p = subprocess.run([SPOTDECK, "--headless", "--resume", run_dir], stdin=subprocess.DEVNULL,
                   capture_output=True, text=True, timeout=120 * SCALE)
lines = p.stderr.strip().splitlines()
want = "has SHA-256 %s" % other[:12]
if p.returncode != 1 or len(lines) != 1 or ("(SHA-256 %s), " % sha[:12]) not in lines[0] or \
        not lines[0].endswith(want) or "model.onnx" not in lines[0] or "ckpt-" not in lines[0]:
    fail("resume with another model file: exit %d, stderr %r" % (p.returncode, p.stderr))
if any('"type":"acquired"' in l or '"type":"started"' in l for l in p.stdout.splitlines()):
    fail("the refused resume started servers: %s" % p.stdout)
ok("resume with another file refused: %s" % lines[0])

# The same bytes again: the run trains on from its final checkpoint.
again, _ = gen()
if again != sha:
    fail("onnx-gen is not deterministic: %s then %s" % (sha, again))
r2 = Run(None, resume=run_dir)
r2.wait_type("run_start")
os.unlink(model)
st = r2.wait(lambda e: e.get("type") == "step" and e["step"] > final["step"] + 20, "steps after the resume")
errs = [e for e in r2.events if e.get("type") in ("job_error", "protocol_error")]
if errs or len([e for e in r2.events if e.get("type") == "model_sent"]) != 2:
    fail("resumed run: errors %s, model_sent %s" % (errs, [e for e in r2.events if e.get("type") == "model_sent"]))
r2.command("quit")
r2.wait_type("checkpoint", reason="final")
r2.finish()
ok("resumed with the same file from step %d, trained on to step %d" % (final["step"], st["step"]))
PY
