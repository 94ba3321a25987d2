#!/bin/sh
# tests/app/test-headless-stdin.sh - over-long command lines on headless stdin
# are refused whole: one error line per refused line,
# nothing of the line runs - not its tail (10 MiB of junk ending in "help"
# or "quit"), not its head (a 600-byte line that a cut at 511 bytes would
# turn into "help") - and the lines after it run as usual.  A 511-byte line
# (512 with its newline, the longest a command may be) still runs.
exec python3 - <<'PY'
import json, os, subprocess, sys, tempfile, threading
sys.path.insert(0, os.path.join(os.environ.get("top_srcdir", "."), "tests"))
from elastic import SPOTDECK, fail, ok, check_sanitizers, _tmpdirs

tmp = tempfile.mkdtemp(prefix="spotdeck-stdin.")
_tmpdirs.append(tmp)
jp = os.path.join(tmp, "job.json")
with open(jp, "w") as f:
    json.dump({"model": "mlp", "workers": 0}, f)

MIB = 1 << 20
CHUNK = 4096            # what spotdeck reads from stdin at a time
data = bytearray()


def junk_then(cmd, size, fill):
    # A line of about `size` junk bytes whose last bytes are `cmd`, placed so
    # that `cmd` starts at a multiple of the read size: the way a reader that
    # starts afresh after each refused chunk would see it as a line alone.
    start = len(data)
    end = -(-(start + size) // CHUNK) * CHUNK
    data.extend(fill * (end - start))
    data.extend(cmd + b"\n")


junk_then(b"help", 10 * MIB, b"x")
junk_then(b"quit", 10 * MIB, b"y")
cut = b"help" + b" " * 595 + b"now"            # 602 bytes: over the limit
data.extend(cut + b"\n")
edge = b"help" + b" " * 507                    # 511 bytes: the longest allowed
data.extend(edge + b"\n")
data.extend(b"quit\n")
refused = 3

p = subprocess.Popen([SPOTDECK, "--headless", "--job", jp, "--run-dir", os.path.join(tmp, "run")],
                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
out = {}


def drain(name, stream):
    out[name] = stream.read()


threads = [threading.Thread(target=drain, args=(n, s)) for n, s in (("out", p.stdout), ("err", p.stderr))]
for t in threads:
    t.start()
broken = False
try:
    p.stdin.write(bytes(data))
    p.stdin.close()
except BrokenPipeError:
    broken = True           # spotdeck stopped reading: it quit early
try:
    rc = p.wait(timeout=120)
except subprocess.TimeoutExpired:
    p.kill()
    fail("spotdeck did not exit after the final quit")
for t in threads:
    t.join()
err = out["err"].decode(errors="replace")
check_sanitizers(err, "spotdeck's stderr")
events = [json.loads(l) for l in out["out"].decode().splitlines() if l.startswith("{")]
cmds = [e["command"] for e in events if e["type"] == "command"]
helps = [e for e in events if e["type"] == "help"]

# (A quit before any worker trained exits with status 1: nothing to save.)
if broken or rc < 0:
    fail("spotdeck stopped before the last line (status %s, stdin %s); commands run: %s"
         % (rc, "closed early" if broken else "read whole", [c[:20] for c in cmds]))
if cmds != [edge.decode(), "quit"]:
    fail("commands run: %s; expected only the 511-byte help line, then quit"
         % [c if len(c) < 40 else c[:12] + "...(%d bytes)" % len(c) for c in cmds])
if len(helps) != 1:
    fail("%d help events; expected 1 (the 511-byte line)" % len(helps))
ok("the refused lines ran nothing (not 'help', not 'quit', not a cut head); "
   "the 511-byte line and the final quit ran (exit status %d)" % rc)

lines = [l for l in err.splitlines() if l.strip()]
want = "spotdeck: stdin: line longer than 512 bytes: refused, none of it run"
if len(lines) != refused or any(l != want for l in lines):
    fail("stderr has %d lines, expected %d times '%s': %s" % (len(lines), refused, want, lines[:5]))
ok("one error line per refused line (%d): %s" % (refused, lines[0]))
PY
