#!/bin/sh
# tests/app/test-command-args.sh - a command given more arguments than its usage
# names is refused with the usage, not run with the extra ignored
# ("checkpoint extra" used to checkpoint and answer ok), and one given fewer
# too; both are checked by the command table's argument counts, before the
# command runs.  Commands given the right arguments still run.  The
# autopilot command's own usage errors say what it expected: a verb it
# knows, a value for deadline and budget and none for the others, a goal
# before "on", an announced action before "hold", a budget above 0.
# Headless, no workers.
exec python3 - <<'PY'
import json, os, subprocess, sys, tempfile
sys.path.insert(0, os.path.join(os.environ.get("top_srcdir", "."), "tests"))
from elastic import SPOTDECK, fail, ok, check_sanitizers, _tmpdirs

tmp = tempfile.mkdtemp(prefix="spotdeck-cmdargs.")
_tmpdirs.append(tmp)
jp = os.path.join(tmp, "job.json")
with open(jp, "w") as f:
    json.dump({"model": "mlp", "workers": 0}, f)
lines = ["checkpoint extra", "pause now", "drop s1 s2", "swap s1 offer more", "drop", "swap s1",
         "add 1 2", "autopilot", "autopilot fly", "autopilot deadline", "autopilot on 5", "autopilot on",
         "autopilot hold", "autopilot budget -3", "autopilot deadline 2h", "autopilot hold", "autopilot off",
         "help", "pause", "quit"]
p = subprocess.run([SPOTDECK, "--headless", "--job", jp, "--run-dir", os.path.join(tmp, "run")],
                   input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=120)
check_sanitizers(p.stderr, "spotdeck's stderr")
cmds = {e["command"]: e for e in (json.loads(l) for l in p.stdout.splitlines() if l.startswith("{"))
        if e["type"] == "command"}
want = {
    "checkpoint extra": "checkpoint: takes no arguments",
    "pause now": "pause: takes no arguments",
    "drop s1 s2": "drop: too many arguments (usage: drop SERVER)",
    "swap s1 offer more": "swap: too many arguments (usage: swap SERVER OFFER)",
    "drop": "drop: too few arguments (usage: drop SERVER)",
    "swap s1": "swap: too few arguments (usage: swap SERVER OFFER)",
    "add 1 2": "add: too many arguments (usage: add [N|OFFER])",
    "autopilot": "autopilot: too few arguments (usage: autopilot on|off|hold|deadline DURATION|budget USD)",
    "autopilot fly": "autopilot: 'fly': expected on, off, hold, deadline DURATION or budget USD",
    "autopilot deadline": "autopilot deadline: expected a value (usage: autopilot deadline DURATION (6h, 90m, seconds))",
    "autopilot on 5": "autopilot on: takes no value",
    "autopilot on": "autopilot on: no goal yet: give autopilot deadline DURATION or autopilot budget USD, or the job's \"autopilot\"",
    "autopilot hold": "autopilot hold: no action is announced",
}
for line, err in want.items():
    e = cmds.get(line)
    if not e or e["ok"] or e.get("error") != err:
        fail("%r: %s, expected refused with %r" % (line, e, err))
for line in ("help", "pause", "autopilot deadline 2h", "autopilot off"):
    if not cmds.get(line, {}).get("ok"):
        fail("%r: %s, expected it to run" % (line, cmds.get(line)))
bad = cmds.get("autopilot budget -3", {})
if bad.get("ok") or "budget" not in bad.get("error", ""):
    fail("'autopilot budget -3': %s, expected refused naming the budget" % bad)
ok("too many or too few arguments refused with the usage (%d commands); help, pause, autopilot deadline 2h and off ran" % len(want))
PY
