#!/bin/sh
# The controller SIGKILLed mid-run: `spotdeck --headless --resume RUNDIR`
# continues from the latest checkpoint and finishes the job.  A checkpoint
# write interrupted half-way (a stale temporary file) never becomes the latest.
exec python3 - <<'PY'
import sys, os, signal, glob
sys.path.insert(0, os.path.join(os.environ.get("top_srcdir", "."), "tests"))
from elastic import *
# 5 epochs (937 steps each): the kill after the checkpoint at step >= 300
# must land while the run trains, on a machine several times faster too.
EPOCHS = 5
r = Run(job(model="mlp", epochs=EPOCHS, checkpoint_every=100, log_every=50), workers=2)
ck = r.wait(lambda e: e.get("type") == "checkpoint" and e["step"] >= 300, "checkpoint at step >= 300")
r.kill(signal.SIGKILL)
r.finish()
run_dir = r.run_dir
# The newest checkpoint is the newest file the controller renamed into
# place; the kill may land after its rename and before its journal line, so
# the files, not the events, say which one --resume must pick.
import re
on_disk = sorted(int(m.group(1)) for m in
                 (re.fullmatch(r"ckpt-(\d+)\.sdckpt", n) for n in os.listdir(os.path.join(run_dir, "checkpoints")))
                 if m)
seen = max(e["step"] for e in r.events if e.get("type") == "checkpoint")
if not on_disk or on_disk[-1] < seen:
    fail("checkpoints on disk %s, but the journal reported ckpt-%d" % (on_disk, seen))
latest = on_disk[-1]
# What the resumed run goes on from is the journal on disk: events reach
# stdout at once and the disk in batches, so a kill can lose the last lines
# (a late second worker's generation event, once in CI).
first_journal = []
for line in open(os.path.join(run_dir, "journal.jsonl")):
    try:
        first_journal.append(json.loads(line))
    except ValueError:
        pass   # a line the kill tore: the resumed run skips it too
# Workers notice their controller is gone and exit on their own.
# A torn checkpoint write: the newest-looking file is garbage.
with open(os.path.join(run_dir, "checkpoints", "ckpt-999999.sdckpt"), "wb") as f:
    f.write(b"SDCKPT\0\0" + b"\1" * 100)
with open(os.path.join(run_dir, "checkpoints", "ckpt-900.sdckpt.tmp.1234"), "wb") as f:
    f.write(b"half")
# A journal line torn by the kill: the resumed run's first line must not
# be glued to it.
with open(os.path.join(run_dir, "journal.jsonl"), "a") as f:
    f.write('{"type":"step","step":')
r2 = Run(None, resume=run_dir)
st = r2.wait_type("run_start")
if not st.get("resume") or not st.get("checkpoint", "").endswith("ckpt-%d.sdckpt" % latest):
    fail("resume picked %s, expected ckpt-%d (on disk: %s)" % (st.get("checkpoint"), latest, on_disk))
last_t = max(e["t"] for e in r.events)
last_gen = max(e.get("generation", 0) for e in first_journal if e.get("type") == "generation")
if st["t"] < last_t:
    fail("the resumed journal restarts its clock: t=%.3f after t=%.3f" % (st["t"], last_t))
r2.command("add 2")
j = r2.wait_type("worker_joined")
if j["step"] != latest:
    fail("resumed at step %d, expected %d; events: %s" % (j["step"], latest, json.dumps(r2.events[-8:])))
d = r2.wait_type("done")
rc = r2.finish()
if rc != 0:
    fail("exit status %s; stderr: %s" % (rc, r2.p.stderr.read() if r2.p.stderr else ""))
if d["steps"] != 937 * EPOCHS:
    fail("resumed run ended at step %d; done: %s" % (d["steps"], json.dumps(d)))
torn = []
for line in open(os.path.join(run_dir, "journal.jsonl")):
    try:
        json.loads(line)
    except ValueError:
        torn.append(line.strip())
if torn != ['{"type":"step","step":']:
    fail("journal lines that do not parse after the resume: %s" % torn[:3])
ids = lambda run: [int(e["server"][1:]) for e in run.events if e.get("type") == "acquired"]
first_ids = [int(e["server"][1:]) for e in first_journal if e.get("type") == "acquired"]
if min(ids(r2)) <= max(first_ids):
    fail("the resumed run reuses server ids: s%d after s%d" % (min(ids(r2)), max(first_ids)))
gens = [e["generation"] for e in r2.events if e.get("type") == "generation"]
if not gens or gens[0] <= last_gen:
    fail("the resumed run's generations %s do not go on from %d" % (gens[:3], last_gen))
bad = [e for e in r2.events if e.get("type") == "checkpoint_invalid"]
if not bad:
    fail("the corrupt checkpoint was not reported")
ok("controller killed after ckpt-%d (journal had reported ckpt-%d; t and generations go on from %.1f s and %d); --resume continued from it (corrupt newer file rejected: %s) to step %d, accuracy %.4f"
   % (latest, seen, last_t, last_gen, bad[0]["error"], d["steps"], d["test_accuracy"]))
PY
