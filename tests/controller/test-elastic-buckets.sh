#!/bin/sh
# Which collectives and gradient bucket a generation uses, from each member's
# worker_joined event: two local workers share a host, so they reduce over
# shared memory, and with one compute thread each in one bucket after
# backward (bucket_kib 0); with two threads each, or over Gloo
# (SPOTDECK_COMM=gloo in the workers' environment), in the job's buckets.
# A run of each trains on: a plan that breaks training shows as no step.
exec python3 - <<'PY'
import sys, os
sys.path.insert(0, os.path.join(os.environ.get("top_srcdir", "."), "tests"))
from elastic import *

def joins(threads, env_comm, bucket_kib):
    if env_comm:
        os.environ["SPOTDECK_COMM"] = env_comm
    else:
        os.environ.pop("SPOTDECK_COMM", None)
    r = Run(job(model="mlp", epochs=2000, min_workers=2, checkpoint_every=0, log_every=1,
                threads_per_worker=threads, bucket_kib=bucket_kib), workers=2)
    g = r.wait(lambda e: e.get("type") == "generation" and e.get("world_size") == 2, "generation of 2")
    r.wait(lambda e: e.get("type") == "step" and e["generation"] == g["generation"] and e["step"] >= 5,
           "step 5 of generation %d" % g["generation"])
    # Both members' joins (the second may come after rank 0's first steps).
    joined = lambda: {e["rank"]: e for e in r.events
                      if e.get("type") == "worker_joined" and e["generation"] == g["generation"]}
    while len(joined()) < 2:
        r.wait(lambda e: e.get("type") == "worker_joined", "both members' worker_joined")
    js = [joined()[k] for k in (0, 1)]
    r.command("quit")
    r.finish()
    return [(j["comm"], j.get("bucket_kib")) for j in js]

# Shared memory needs /dev/shm with room for two ranks' segment (4 MiB a
# rank, engine/comm-shm.c); without it the one-host cases fall back to Gloo.
try:
    st = os.statvfs("/dev/shm")
    shm = st.f_bavail * st.f_frsize >= 16 << 20 and os.access("/dev/shm", os.W_OK)
except OSError:
    shm = False
if not shm:
    print("# no writable /dev/shm with 16 MiB free: the one-host cases expect gloo and the job's buckets")
one_host = (lambda threads, kib: ("shm", 0 if threads <= 1 else kib)) if shm else (lambda threads, kib: ("gloo", kib))
cases = [(1, None, 1024, one_host(1, 1024)), (2, None, 1024, one_host(2, 1024)), (1, "gloo", 256, ("gloo", 256))]
for threads, env_comm, kib, want in cases:
    got = joins(threads, env_comm, kib)
    if got != [want, want]:
        fail("threads_per_worker %d, bucket_kib %d%s: ranks joined with (comm, bucket_kib) %s, expected %s twice"
             % (threads, kib, ", SPOTDECK_COMM=" + env_comm if env_comm else "", got, want))
ok("one host: %s; SPOTDECK_COMM=gloo: the job's 256 KiB buckets; each run trained past step 5"
   % ("shm, one bucket at 1 thread, the job's 1024 KiB at 2" if shm else "gloo (no /dev/shm), the job's buckets"))
PY
