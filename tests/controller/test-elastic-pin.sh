#!/bin/sh
# Local workers keep to CPUs of their own (the job's pin_workers, the
# worker's --cpu-slot): with pin_workers 1 and as many CPUs as workers, each
# of 2 one-thread workers is allowed exactly one CPU and not the other's,
# and so are the threads it started (OpenMP's, the all-reduce's, Gloo's);
# with pin_workers 0 they keep the controller's whole set; 4 workers under a
# controller that may use 2 CPUs go two to a CPU.  SKIP when this
# process may use fewer than 2 CPUs.
#
# min_workers makes the run wait for all its workers (on a loaded machine
# the first one ready once ran a whole 1-epoch job alone before the other
# could join), and the runs, far longer than the test, end with quit.
exec python3 - <<'PY'
import sys, os
sys.path.insert(0, os.path.join(os.environ.get("top_srcdir", "."), "tests"))
from elastic import *

# Over Gloo, whose threads are what pinning must reach: two workers on one
# host would otherwise reduce in shared memory, in the calling thread, and
# start no communication threads for this test to check.
os.environ["SPOTDECK_COMM"] = "gloo"
allowed = sorted(os.sched_getaffinity(0))
if len(allowed) < 2:
    print("SKIP: test-elastic-pin: this process may use %d CPU(s), 2 are needed" % len(allowed))
    sys.exit(77)


def masks(pid):
    """The CPUs of every thread of pid (from /proc)."""
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            out[int(tid)] = frozenset(os.sched_getaffinity(int(tid)))
        except ProcessLookupError:
            pass   # a thread that ended meanwhile
    return out


for pin in (1, 0):
    r = Run(job(model="mlp", epochs=20, min_workers=2, log_every=1, pin_workers=pin), workers=2)
    # A step of the two together: the all-reduce's and Gloo's threads exist
    # (a worker alone, while the other still starts, has neither).
    two = r.wait(lambda e: e.get("type") == "step" and e.get("world_size") == 2, "a step of 2 workers")
    r.wait(lambda e: e.get("type") == "step" and e["step"] >= two["step"] + 2, "two more steps")
    pids = r.pids()
    per_worker = {s: masks(p) for s, p in pids.items()}
    r.command("quit")
    r.finish()
    if len(per_worker) != 2:
        fail("pin_workers %d: %d live workers, expected 2" % (pin, len(per_worker)))
    sets = {}
    for s, threads in per_worker.items():
        distinct = set(threads.values())
        if len(threads) < 3:
            fail("pin_workers %d: %s has %d threads, expected the trainer's and its helpers'" % (pin, s, len(threads)))
        if pin:
            # Threads started before the pin (heartbeat, notice watcher)
            # may keep the whole set; the main thread and the compute and
            # communication threads after it must not.
            main = threads[pids[s]]
            if len(main) != 1:
                fail("pin_workers 1: %s's main thread may use CPUs %s, expected one" % (s, sorted(main)))
            narrow = [t for t, m in threads.items() if m == main]
            if len(narrow) < 3:
                fail("pin_workers 1: only %d of %s's %d threads keep to CPU %s" % (len(narrow), s, len(threads), sorted(main)))
            sets[s] = main
        else:
            for t, m in threads.items():
                if m != frozenset(allowed):
                    fail("pin_workers 0: %s thread %d may use CPUs %s, expected all of %s" % (s, t, sorted(m), allowed))
    if pin:
        a, b = sets.values()
        if a & b:
            fail("pin_workers 1: both workers on CPU %s" % sorted(a & b))
        ok("pin_workers 1: s1 on CPU %s, s2 on CPU %s, each with its compute and communication threads"
           % (sorted(sets["s1"]), sorted(sets["s2"])))
    else:
        ok("pin_workers 0: every thread of both workers may use CPUs %s" % allowed)

# More local workers than CPUs: 4 one-thread workers under a controller
# that may use 2 CPUs go round the slots, two on each CPU, rather than two
# pinned and two free to crowd them.
two_cpus = allowed[:2]
os.sched_setaffinity(0, two_cpus)   # inherited by the controller and its workers
r = Run(job(model="mlp", epochs=20, min_workers=4, log_every=1), workers=4)
four = r.wait(lambda e: e.get("type") == "step" and e.get("world_size") == 4, "a step of 4 workers")
r.wait(lambda e: e.get("type") == "step" and e["step"] >= four["step"] + 2, "two more steps")
pids = r.pids()
mains = {s: frozenset(os.sched_getaffinity(p)) for s, p in pids.items()}
r.command("quit")
r.finish()
os.sched_setaffinity(0, allowed)
per_cpu = {c: sorted(s for s, m in mains.items() if m == frozenset([c])) for c in two_cpus}
if len(mains) != 4 or any(len(v) != 2 for v in per_cpu.values()):
    fail("4 workers on 2 CPUs: main threads on %s; expected two on each of CPUs %s" %
         ({s: sorted(m) for s, m in mains.items()}, two_cpus))
ok("4 workers on 2 CPUs: %s" % ", ".join("CPU %d: %s" % (c, " ".join(v)) for c, v in per_cpu.items()))
PY
