#!/bin/sh
# tests/controller/test-journal-full.sh - a journal that cannot be written (a full
# disk) is said loudly, once, and the run goes on:
# RUNDIR/journal.jsonl is a link to a file on a 256 KiB tmpfs, all of it
# but one page taken by a filler file.  When the journal's page is full:
#   stdout has one "error" event naming the journal and ENOSPC, and stderr
#     one line saying so - once, however many events are lost after it;
#   training goes on (steps keep coming on stdout);
# then the filler is removed, and:
#   the journal writes again, first a journal_resumed event counting the
#     events lost (those stdout showed that the journal lacks, one gap),
#     and the run ends done with status 0;
#   every line of the journal is whole JSON (a failed write is cut back,
#     never left torn in the middle).
# A tmpfs needs a mount namespace of our own: `unshare -m` as root,
# `unshare -rm` (a user namespace) otherwise; where neither works, SKIP.
if [ -z "$SD_JOURNAL_FULL_NS" ]; then
	if [ "$(id -u)" = 0 ]; then ns="unshare -m"; else ns="unshare -rm"; fi
	if ! $ns true 2>/dev/null; then
		echo "SKIP: '$ns' fails here (no mount/user namespaces): cannot mount a small tmpfs to fill" >&2
		exit 77
	fi
	SD_JOURNAL_FULL_NS=1 exec $ns sh "$0" "$@"
fi
exec python3 - <<'PY'
import json, os, subprocess, sys
sys.path.insert(0, os.path.join(os.environ.get("top_srcdir", "."), "tests"))
from elastic import *
from elastic import _tmpdirs

r0 = os.path.realpath(os.environ.get("TMPDIR") or "/tmp")
import tempfile
tiny = tempfile.mkdtemp(prefix="spotdeck-tinyfs.", dir=r0)
_tmpdirs.append(tiny)
rc = subprocess.call(["mount", "-t", "tmpfs", "-o", "size=256k", "spotdeck-test", tiny])
if rc != 0:
    print("SKIP: cannot mount a tmpfs in this mount namespace (status %d)" % rc, file=sys.stderr)
    sys.exit(77)
import atexit
atexit.register(lambda: subprocess.call(["umount", "-l", tiny]))
filler = os.path.join(tiny, "filler")
with open(filler, "wb") as f:
    f.write(b"x" * (252 << 10))   # all but one page

base = tempfile.mkdtemp(prefix="spotdeck-journal-full.", dir=r0)
_tmpdirs.append(base)
run_dir = os.path.join(base, "run")
os.mkdir(run_dir)
jpath = os.path.join(run_dir, "journal.jsonl")
os.symlink(os.path.join(tiny, "journal.jsonl"), jpath)   # dangling until spotdeck creates it

# 5 epochs (4685 steps): the run must still be training when the filler
# goes (journal_resumed needs a write after it), on a faster machine too.
# Not more: its ~470 step lines of ~270 bytes must fit in what the filler
# leaves of the 256 KiB tmpfs.
r = Run(job(model="mlp", epochs=5, checkpoint_every=0, log_every=10), workers=1, run_dir=run_dir, timeout=240)
err = r.wait_type("error", path=jpath)
if "No space left on device" not in err.get("error", ""):
    fail("the journal's error event says %r, expected ENOSPC's 'No space left on device'" % err)
ok("journal full: %s" % json.dumps(err))
m = r.mark()
first = r.wait(lambda e: e.get("type") == "step", "a step after the journal failed")
r.wait(lambda e: e.get("type") == "step" and e["step"] >= first["step"] + 30, "more steps after the journal failed")
again = [e for e in r.events[m:] if e.get("type") == "error"]
if again:
    fail("the failure was said again: %s" % json.dumps(again))
ok("training goes on: steps %d to %d on stdout, no second error" % (first["step"], r.events[-1]["step"]))

os.unlink(filler)
res = r.wait_type("journal_resumed")
if res.get("path") != jpath or not res.get("lost"):
    fail("journal_resumed says %s" % json.dumps(res))
ok("the journal writes again: %s" % json.dumps(res))
r.wait_type("done")
rc = r.p.wait(timeout=120 * SCALE)
stderr = r.p.stderr.read()
check_sanitizers(stderr, "spotdeck's stderr")
r.finish()
if rc != 0:
    fail("exit status %d after done" % rc)
said = [l for l in stderr.splitlines() if "cannot write the journal" in l]
if len(said) != 1 or jpath not in said[0]:
    fail("stderr says the failure %d times, expected once naming %s:\n%s" % (len(said), jpath, stderr))
ok("stderr: " + said[0])
errs = [e for e in r.events if e.get("type") == "error"]
if len(errs) != 1:
    fail("%d error events on stdout, expected 1: %s" % (len(errs), json.dumps(errs)))

with open(jpath) as f:
    lines = f.read().split("\n")
if lines[-1] != "":
    fail("the journal does not end in a newline")
evs = []
for i, l in enumerate(lines[:-1]):
    try:
        evs.append(json.loads(l))
    except ValueError:
        fail("journal line %d is not whole JSON: %r" % (i + 1, l[:200]))
types = [e["type"] for e in evs]
if "journal_resumed" not in types or "done" not in types:
    fail("journal types: %s" % types)
if "error" in types:
    fail("the journal holds the error event it could not write")
# The events lost are those stdout showed that the journal lacks: as many
# as journal_resumed counts, one run of consecutive events, and the
# journal_resumed line sits in their place (dated as the first event after
# the gap).  Journal writes are batched on the thread pool, so stdout may
# show an event before its batch fails: the count comes from the files.
key = lambda e: json.dumps(e, sort_keys=True)
shown = [e for e in r.events if e.get("type") not in ("error", "journal_resumed", "_garbage")]
kept = set(key(e) for e in evs)
missing = [i for i, e in enumerate(shown) if key(e) not in kept]
if len(missing) != res["lost"]:
    fail("journal_resumed counts %d lost events; %d events on stdout are not in the journal" %
         (res["lost"], len(missing)))
if missing != list(range(missing[0], missing[0] + len(missing))):
    fail("the events missing from the journal are not one gap: stdout positions %s" % missing)
i = types.index("journal_resumed")
before, after = shown[missing[0] - 1], shown[missing[-1] + 1]
if key(evs[i - 1]) != key(before) or key(evs[i + 1]) != key(after) or evs[i]["t"] != after["t"]:
    fail("journal_resumed is not where the gap is: %s; stdout has %s before the gap and %s after" %
         (json.dumps(evs[i - 1:i + 2]), json.dumps(before), json.dumps(after)))
ok("journal: %d whole lines, one gap of %d events marked by journal_resumed, holds done" % (len(evs), res["lost"]))
PY
