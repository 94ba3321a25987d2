#!/bin/sh
# A worker that cannot load the job fails alone.  While four workers train
# (the job's data_dir is "WORK/fm", a link to the dataset in a folder of the
# test's), the link is moved away and a fifth server is added:
# its worker reports job_error, its server is marked failed, and the four
# train on in the same generation; twice.  With the link back, a sixth joins.
# A job no worker at all can load still ends the run, with the reason, once
# every worker has failed to load it.
exec python3 - <<'PY'
import sys, os, atexit, shutil
sys.path.insert(0, os.path.join(os.environ.get("top_srcdir", "."), "tests"))
from elastic import *

data = "/usr/share/datasets/fashion-mnist"
if not os.path.isdir(data):
    sys.stderr.write("SKIP: %s missing (Debian package dataset-fashion-mnist)\n" % data)
    sys.exit(77)
work = tempfile.mkdtemp(prefix="spotdeck-badjoiner.")
atexit.register(shutil.rmtree, work, True)
os.chdir(work)
os.symlink(data, "fm")

# Absolute: a relative data_dir is relative to the job file's folder,
# which Run makes itself.
r = Run(job(model="mlp", epochs=2000, checkpoint_every=0, log_every=5, data_dir=os.path.join(work, "fm")),
        workers=4, timeout=240)
g = r.wait(lambda e: e.get("type") == "generation" and e.get("world_size") == 4, "generation of 4")
r.wait(lambda e: e.get("type") == "step" and e["world_size"] == 4, "training")
os.rename("fm", "fm.away")
for attempt in (1, 2):
    r.command("add")
    mark = r.mark()
    bad = r.wait_type("acquired")["server"]
    err = r.wait(lambda e: e.get("type") == "job_error", "job_error", timeout=60)
    if err["server"] != bad or "fm: no such directory" not in err["error"]:
        fail("job_error %s, expected one from %s about fm" % (err, bad))
    r.wait(lambda e: e.get("type") == "state" and e["server"] == bad and e["state"] == "failed",
           "%s marked failed" % bad, timeout=60)
    after = r.wait(lambda e: e.get("type") == "step", "a step after the job_error", timeout=60)
    if after["world_size"] != 4:
        fail("after %s's job_error: a step of %d workers, expected the 4 to go on" % (bad, after["world_size"]))
    if r.p.poll() is not None:
        fail("spotdeck exited after %s's job_error" % bad)
    if any(m["server"] == bad for e in r.events[mark:] if e.get("type") == "generation" for m in e.get("members", [])):
        fail("%s, which could not load the job, was made a member" % bad)
    ok("attempt %d: %s could not load the job (%s...); its server failed; the 4 went on (generation %d, step %d)"
       % (attempt, bad, err["error"][:24], after["generation"], after["step"]))
os.rename("fm.away", "fm")
r.command("add")
good = r.wait_type("acquired")["server"]
g5 = r.wait(lambda e: e.get("type") == "generation" and e.get("world_size") == 5, "generation of 5", timeout=60)
r.wait(lambda e: e.get("type") == "worker_joined" and e["server"] == good, "%s joined" % good)
ok("%s, with the data back, joined generation %d of 5" % (good, g5["generation"]))
r.command("quit")
if r.finish() != 1:
    fail("headless quit should exit 1")

# Nobody can load it: the run still ends, with the reason, after every
# worker failed to load it.  spotdeck reads the files' headers before it
# starts (a missing directory is refused there), so these files have good
# headers and no images: only a worker, loading them, finds that out.
import struct
os.mkdir("nothere")
for split, n in (("train", 600), ("t10k", 100)):
    with open("nothere/%s-images-idx3-ubyte" % split, "wb") as f:
        f.write(struct.pack(">IIII", 0x803, n, 28, 28))
    with open("nothere/%s-labels-idx1-ubyte" % split, "wb") as f:
        f.write(struct.pack(">II", 0x801, n) + bytes(n))
r = Run(job(model="mlp", epochs=1, data_dir=os.path.join(work, "nothere")), workers=3, timeout=120)
try:
    r.p.wait(timeout=120)
except subprocess.TimeoutExpired:
    r.kill()
    fail("a job no worker can load did not end the run")
stderr = r.p.stderr.read()
check_sanitizers(stderr, "spotdeck's stderr")
rc = r.finish()
if "nothere/train-images-idx3-ubyte: truncated" not in stderr:
    fail("stderr does not say why the run ended: %r" % stderr)
errs = sorted(e["server"] for e in r.events if e.get("type") == "job_error")
if rc != 1:
    fail("a job no worker can load: exit status %s, expected 1" % rc)
if errs != ["s1", "s2", "s3"]:
    fail("job_error from %s, expected from each of s1, s2, s3 before the run ends" % errs)
ok("a job nobody can load ends the run (exit 1) once %s failed" % ", ".join(errs))
PY
