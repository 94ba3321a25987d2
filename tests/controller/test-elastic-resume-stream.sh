#!/bin/sh
# A resumed run sends its latest checkpoint to the first worker in chunks
# paced by the connection: never the whole checkpoint queued at
# once (it was hex-encoded and queued in one loop callback).  A CNN run's
# checkpoint (several MiB, hex doubles it) is streamed: the journal's
# checkpoint_streamed says how many bytes, in how many 256 KiB chunks, and
# the most that waited on the socket, which must stay near the 1 MiB bound;
# the worker then joins at the checkpoint's step, and no worker joins below
# it when the generation re-forms as the second worker arrives (a second
# stream used to restart the copy the first worker was about to load).
exec python3 - <<'PY'
import sys, os, math, re
sys.path.insert(0, os.path.join(os.environ.get("top_srcdir", "."), "tests"))
from elastic import *
r = Run(job(model="cnn", epochs=1, checkpoint_every=20, log_every=10), workers=1)
ck = r.wait(lambda e: e.get("type") == "checkpoint" and e["step"] >= 20, "a checkpoint")
r.command("quit")
r.finish()
cdir = os.path.join(r.run_dir, "checkpoints")
files = sorted((int(m.group(1)), n) for m, n in
               ((re.fullmatch(r"ckpt-(\d+)\.sdckpt", n), n) for n in os.listdir(cdir)) if m)
step, name = files[-1]
size = os.path.getsize(os.path.join(cdir, name))
CHUNK, BOUND = 256 * 1024, 1024 * 1024
if 2 * size < 3 * BOUND:
    fail("the checkpoint is %d bytes: too small to show the pacing (want > 1.5 MiB)" % size)
r2 = Run(None, resume=r.run_dir)
r2.command("add 1")
s = r2.wait_type("checkpoint_streamed")
# The generation's members join together and their worker_joined events
# come in any order: take the one of the server the checkpoint went to.
j = r2.wait_type("worker_joined", server=s["server"])
if s["step"] != step or s["bytes"] != size or s["chunks"] != math.ceil(size / CHUNK):
    fail("checkpoint_streamed %s; expected step %d, %d bytes in %d chunks" % (s, step, size, math.ceil(size / CHUNK)))
# One chunk's message is its hex (2 x 256 KiB) and a little JSON; sending
# stops once 1 MiB waits, so at most that plus one message can wait.
if s["max_queued_bytes"] > BOUND + 2 * CHUNK + 4096:
    fail("%d bytes waited on the socket at once (the hex checkpoint is %d); the bound is 1 MiB + one chunk" %
         (s["max_queued_bytes"], 2 * size))
if j["step"] != step:
    fail("worker_joined %s after streaming step %d to %s" % (j, step, s["server"]))
ok("ckpt-%d (%d bytes) streamed to %s in %d chunks, at most %d bytes waiting (hex total %d); it joined at step %d"
   % (step, size, s["server"], s["chunks"], s["max_queued_bytes"], 2 * size, j["step"]))
# A generation that re-forms while (or after) the checkpoint streams must
# not make a worker start over: no join below the checkpoint's step.
r2.wait(lambda e: e.get("type") == "step", "a step of the resumed run")
low = [e for e in r2.events if e.get("type") == "worker_joined" and e["step"] < step]
if low:
    fail("workers joined below ckpt-%d: %s" % (step, json.dumps(low)))
ok("every join of the resumed run is at step >= %d" % step)
r2.command("quit")
r2.finish()
PY
