"""tests/ui-e2e/check.py - what tests/app/test-ui-cockpit.sh asks of the journal
of a real spotdeck run and of a captured screen.

  check.py pane SCREEN TITLE       print the inside of the box whose top edge
                                   starts with "┌ TITLE" (exit 1: no such box)
  check.py step SCREEN             print the step of the header ("step N/M")
  check.py JOURNAL added           "SERVER OFFER" of the last ok "add OFFER"
  check.py JOURNAL walk SERVER     SERVER went provisioning, booting, joining,
                                   training, in that order
  check.py JOURNAL swap OLD        the swap of OLD: its replacement trained
                                   before OLD was released; prints the new id
  check.py JOURNAL revoked SERVER  SERVER was revoked after a notice, the
                                   group re-formed without it with fewer
                                   workers, and steps went on after the
                                   revocation
  check.py JOURNAL released SERVER an ok "drop SERVER", then SERVER released
  check.py JOURNAL steps-after N   a step event with step > N
  check.py JOURNAL world W         the last generation has world_size W
  check.py JOURNAL had-world W     some generation had world_size W
  check.py JOURNAL paused          an ok "pause", then a generation in state
                                   "paused" (the workers hold)
  check.py JOURNAL quit            an ok quit, a checkpoint after it, every
                                   server acquired ends released or revoked
  check.py JOURNAL pids            the worker pids the run started
  check.py JOURNAL commands CMD N  at least N commands CMD journaled (the
                                   shell test's barrier: a command sent
                                   before them is journaled before them)

Exit status 0 when the condition holds (with a line saying what was seen),
1 when it does not yet (with a line saying why), so the shell test can poll.
"""
import json
import sys


def load(path):
    events = []
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                try:
                    events.append(json.loads(line))
                except ValueError:
                    pass        # a line being written
    except FileNotFoundError:
        pass
    return events


def no(msg):
    print(msg)
    sys.exit(1)


def yes(msg):
    print(msg)
    sys.exit(0)


def find(events, start=0, **kw):
    for i in range(start, len(events)):
        e = events[i]
        if all(e.get(k) == v for k, v in kw.items()):
            return i
    return -1


def states(events, server):
    """(index, state) of SERVER's acquisition and state changes, in order."""
    out = []
    for i, e in enumerate(events):
        if e.get("server") != server:
            continue
        if e.get("type") in ("acquired", "state"):
            if not out or out[-1][1] != e.get("state"):
                out.append((i, e.get("state")))
    return out


def screen_pane(screen, title):
    with open(screen, encoding="utf-8", errors="replace") as f:
        lines = f.read().split("\n")
    for r, line in enumerate(lines):
        c = line.find("┌ " + title)
        if c < 0:
            continue
        right = line.find("┐", c)
        if right < 0:
            continue
        body = []
        for below in lines[r + 1:]:
            if len(below) <= c or below[c] == "└":
                break
            body.append(below[c + 1:right])
        return [line[c + 1:right]] + body
    return None


def main(argv):
    if argv[1] == "pane":
        got = screen_pane(argv[2], argv[3])
        if got is None:
            no("no box titled '%s' on the screen" % argv[3])
        print("\n".join(got))
        return
    if argv[1] == "step":
        import re
        with open(argv[2], encoding="utf-8", errors="replace") as f:
            m = re.search(r"\bstep (\d+)/\d+", f.read())
        if not m:
            no("no 'step N/M' on the screen")
        yes(m.group(1))

    ev = load(argv[1])
    what = argv[2]
    arg = argv[3] if len(argv) > 3 else None

    if what == "added":
        for i in range(len(ev) - 1, -1, -1):
            e = ev[i]
            if e.get("type") == "command" and e.get("command", "").startswith("add ") and e.get("ok"):
                offer = e["command"][4:]
                for j in range(i - 1, -1, -1):
                    if ev[j].get("type") == "acquired" and ev[j].get("offer") == offer:
                        yes("%s %s" % (ev[j]["server"], offer))
                no("'add %s' journaled without an acquired event before it" % offer)
        no("no successful add command in the journal")

    if what == "walk":
        st = [s for _, s in states(ev, arg)]
        want = ["provisioning", "booting", "joining", "training"]
        it = iter(st)
        if all(w in it for w in want):
            yes("%s: %s" % (arg, " -> ".join(st)))
        no("%s states so far: %s" % (arg, " -> ".join(st) or "none"))

    if what == "swap":
        i = find(ev, type="swap", server=arg)
        if i < 0:
            no("no swap event for %s" % arg)
        new = ev[i]["replacement"]
        t = find(ev, i, type="state", server=new, state="training")
        if t < 0:
            no("replacement %s of %s not training yet" % (new, arg))
        r = find(ev, i, type="released", server=arg)
        if r < 0:
            no("%s not released yet (replacement %s trains)" % (arg, new))
        if r < t:
            no("%s was released before its replacement %s trained" % (arg, new))
        yes(new)

    if what == "revoked":
        n = find(ev, type="notice", server=arg)
        r = find(ev, type="revoked", server=arg)
        if r < 0:
            no("no revoked event for %s" % arg)
        if n < 0 or n > r:
            no("%s revoked without a notice before it" % arg)
        # The last generation with the server in it, and the first after
        # the notice without it.
        before = None
        after = None
        for i, e in enumerate(ev):
            if e.get("type") != "generation":
                continue
            members = [m.get("server") for m in e.get("members", [])]
            if arg in members:
                before = e
            elif i > n and before is not None and after is None:
                after = e
        if before is None:
            no("%s was never in a generation" % arg)
        if after is None:
            no("no generation without %s after its notice" % arg)
        if not after.get("world_size", 0) < before.get("world_size", 0):
            no("generation %d has %d workers, not fewer than the %d of generation %d"
               % (after["generation"], after["world_size"], before["world_size"], before["generation"]))
        steps = [e["step"] for e in ev[r:] if e.get("type") == "step"]
        if not steps or max(steps) <= after.get("step", 0):
            no("no step after the revocation of %s yet" % arg)
        yes("%s (%s, %s) revoked at t=%.1f after a %gs notice; generation %d -> %d, %d -> %d workers "
            "at step %d; steps after the revocation up to %d"
            % (arg, ev[r].get("zone"), ev[r].get("gpu"), ev[r].get("market_time", -1),
               ev[r].get("notice_s", -1), before["generation"], after["generation"],
               before["world_size"], after["world_size"], after.get("step", -1), max(steps)))

    if what == "released":
        c = find(ev, type="command", command="drop " + arg)
        if c < 0:
            no("no 'drop %s' command in the journal" % arg)
        if not ev[c].get("ok"):
            no("'drop %s' refused: %s" % (arg, ev[c].get("error")))
        r = find(ev, type="released", server=arg)
        if r < 0:
            no("%s not released yet" % arg)
        yes("%s released at t=%.2f" % (arg, ev[r].get("t", -1)))

    if what == "steps-after":
        steps = [e["step"] for e in ev if e.get("type") == "step"]
        if steps and max(steps) > int(arg):
            yes(str(max(steps)))
        no("no step after %s in the journal" % arg)

    if what == "world":
        gens = [e for e in ev if e.get("type") == "generation"]
        if gens and gens[-1].get("world_size") == int(arg):
            yes("generation %d, %s workers" % (gens[-1]["generation"], arg))
        no("last generation: %s" % (gens[-1] if gens else "none"))

    if what == "had-world":
        gens = [e for e in ev if e.get("type") == "generation" and e.get("world_size") == int(arg)
                and e.get("members")]
        if gens:
            yes("generation %d, %s workers" % (gens[0]["generation"], arg))
        no("no generation of %s workers yet" % arg)

    if what == "paused":
        c = find(ev, type="command", command="pause", ok=True)
        if c < 0:
            no("no ok 'pause' command in the journal")
        g = find(ev, c, type="generation", state="paused")
        if g < 0:
            no("no paused generation after the pause command")
        yes("paused at step %s (generation %s)" % (ev[g].get("step"), ev[g].get("generation")))

    if what == "quit":
        q = find(ev, type="command", command="quit")
        if q < 0 or not ev[q].get("ok"):
            no("no ok quit command in the journal")
        k = find(ev, q, type="checkpoint")
        if k < 0:
            no("no checkpoint after quit")
        servers = []
        for e in ev:
            if e.get("type") == "acquired" and e["server"] not in servers:
                servers.append(e["server"])
        ended = {e["server"]: e["type"] for e in ev if e.get("type") in ("released", "revoked")}
        left = [s for s in servers if s not in ended]
        if left:
            no("servers neither released nor revoked: %s" % " ".join(left))
        yes("quit ok; checkpoint at step %s (%s); %d servers all ended (%s)"
            % (ev[k].get("step"), ev[k].get("reason"), len(servers),
               ", ".join("%s %s" % (s, ended[s]) for s in servers)))

    if what == "commands":
        n = sum(1 for e in ev if e.get("type") == "command" and e.get("command") == arg)
        if n >= int(argv[4]):
            yes("%d '%s' commands" % (n, arg))
        no("%d '%s' commands, waiting for %s" % (n, arg, argv[4]))

    if what == "pids":
        print(" ".join(str(e["pid"]) for e in ev if e.get("type") == "started" and "pid" in e))
        return

    no("check.py: unknown check '%s'" % what)


if __name__ == "__main__":
    main(sys.argv)
