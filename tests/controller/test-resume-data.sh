#!/bin/sh
# A resume on other data is refused before anything is rented.  A run on
# the user's .npy arrays (built-in mlp, 2 workers) is SIGKILLed after a
# checkpoint, whose meta records each data file's size and SHA-256.
#  - the job's test_x.npy written again with other pixels (same size):
#    --resume exits 1 with one line naming the checkpoint, the file and
#    both SHA-256s (12 hex digits: the checkpoint's and the file's now,
#    computed here by hashlib);
#  - the run's job.json pointed at another directory of other arrays: the
#    same, naming both paths;
#  - the original arrays back: --resume goes on from the checkpoint's step.
exec python3 - <<'PY'
import sys, os, re, signal, subprocess, struct, hashlib, json, shutil, random, tempfile
sys.path.insert(0, os.path.join(os.environ.get("top_srcdir", "."), "tests"))
from elastic import *
import elastic
d = tempfile.mkdtemp(prefix="spotdeck-resume-data.")
elastic._tmpdirs.append(d)

def npy(path, dtype, shape, payload):
    # NumPy's format 1.0: magic, version, header length, a dict padded with
    # spaces and a newline to a multiple of 64 bytes, then the array.
    h = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (dtype, repr(tuple(shape)))
    h += " " * (64 - (10 + len(h) + 1) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() + payload)

def arrays(folder, seed):
    os.makedirs(folder)
    rnd = random.Random(seed)
    for split, n in (("train", 512), ("test", 128)):
        y = [rnd.randrange(4) for _ in range(n)]
        # Each class a brighter quarter of an 8x8 image, plus noise.
        x = bytes(min(255, rnd.randrange(64) + (160 if (p // 16) == y[i] else 0))
                  for i in range(n) for p in range(64))
        npy(os.path.join(folder, split + "_x.npy"), "|u1", (n, 8, 8), x)
        npy(os.path.join(folder, split + "_y.npy"), "<i8", (n,), struct.pack("<%dq" % n, *y))

def sha(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()

data, other = os.path.join(d, "data"), os.path.join(d, "other")
arrays(data, 1)
arrays(other, 2)
# 512 / 32 = 16 steps an epoch: 200 epochs outlast the kill by far.
r = Run(job(model="mlp", dataset="npy", data_dir=data, global_batch=32, epochs=200,
            checkpoint_every=10, log_every=10, eval_batch=128), workers=2, timeout=120)
r.wait(lambda e: e.get("type") == "checkpoint" and e["step"] >= 20, "a checkpoint at step >= 20")
r.kill(signal.SIGKILL)
r.finish()
ckdir = os.path.join(r.run_dir, "checkpoints")
latest = max(int(m.group(1)) for m in (re.fullmatch(r"ckpt-(\d+)\.sdckpt", n) for n in os.listdir(ckdir)) if m)
ckpt = "ckpt-%d.sdckpt" % latest
blob = open(os.path.join(ckdir, ckpt), "rb").read()
for name in ("train_x.npy", "train_y.npy", "test_x.npy", "test_y.npy"):
    if sha(os.path.join(data, name)).encode() not in blob:
        fail("%s does not record %s's SHA-256" % (ckpt, name))

def refused(what, want):
    p = subprocess.run([SPOTDECK, "--headless", "--resume", r.run_dir], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=60 * SCALE)
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    if p.returncode != 1 or len(lines) != 1 or any(w not in lines[0] for w in [ckpt] + want):
        fail("--resume %s: exit status %d, stderr %r (wanted one line naming %s)"
             % (what, p.returncode, p.stderr[-600:], [ckpt] + want))
    if any(json.loads(l).get("type") == "acquired" for l in p.stdout.splitlines() if l.startswith("{")):
        fail("--resume %s rented a server: %s" % (what, p.stdout[-600:]))
    ok("--resume %s refused: %s" % (what, lines[0]))

# 1. test_x.npy written again, same size, other pixels.
tx = os.path.join(data, "test_x.npy")
was = sha(tx)
shutil.copy(tx, tx + ".orig")
shutil.copy(os.path.join(other, "test_x.npy"), tx)
if os.path.getsize(tx) != os.path.getsize(tx + ".orig") or sha(tx) == was:
    fail("the other test_x.npy is not the same size with other contents")
refused("with test_x.npy written again", [tx, was[:12], sha(tx)[:12]])
shutil.copy(tx + ".orig", tx)

# 2. The run's job.json pointed at another directory.
jp = os.path.join(r.run_dir, "job.json")
orig = open(jp).read()
j = json.loads(orig)
j["data_dir"] = other
open(jp, "w").write(json.dumps(j))
refused("with job.json's data_dir at other arrays",
        [os.path.join(data, "train_x.npy"), os.path.join(other, "train_x.npy"),
         sha(os.path.join(data, "train_x.npy"))[:12], sha(os.path.join(other, "train_x.npy"))[:12]])
open(jp, "w").write(orig)

# 3. The data as it was: the resume goes on from the checkpoint.
r2 = Run(None, resume=r.run_dir, extra=("--workers", "1"), timeout=120)
st = r2.wait_type("run_start")
if not st.get("checkpoint", "").endswith(ckpt):
    fail("resume picked %s, expected %s" % (st.get("checkpoint"), ckpt))
jn = r2.wait_type("worker_joined")
if jn["step"] != latest:
    fail("the resumed run's worker joined at step %d, the checkpoint is step %d" % (jn["step"], latest))
r2.wait(lambda e: e.get("type") == "step" and e["step"] > latest, "a step after the checkpoint's")
r2.kill(signal.SIGTERM)
r2.finish()
ok("--resume on the same arrays went on from %s" % ckpt)
PY
