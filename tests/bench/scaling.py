"""Throughput of the elastic trainer and of its no-communication ceiling,
measured one way for every bench that compares them (tests/bench/
elastic-bench, tests/bench/ddp-vs-torch): wall-clock time stamps of step
lines as they arrive, over SAMPLES lines GAP steps apart from step WARM on
(defaults 8, 20, 60: warm steps only, and all of them inside the first
epoch of Fashion-MNIST's 60000 images at a global batch up to 256, so no
epoch's end, with its evaluation, falls in the window), never the
trainer's compute-only figure.  WARM, GAP and SAMPLES come from the environment so that a bench
can be checked quickly (e.g. WARM=20 GAP=10 SAMPLES=4)."""
import json, os, select, subprocess, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from elastic import Run, job

WARM = int(os.environ.get("WARM", "60"))
GAP = int(os.environ.get("GAP", "20"))
SAMPLES = int(os.environ.get("SAMPLES", "8"))


def rate(samples, batch):
    """images/s between the first and last (step, seconds) sample."""
    (s0, t0), (s1, t1) = samples[0], samples[-1]
    return (s1 - s0) * batch / (t1 - t0)


def throughput(model, workers, batch, bucket_kib=None):
    """images/s of an elastic run: journal time stamps over SAMPLES step
    events, GAP steps apart, from step WARM on.  bucket_kib: the job's
    gradient bucket (None: the job's default)."""
    last, epoch = WARM + GAP * (SAMPLES - 1), 60000 // batch
    if last >= epoch:
        sys.exit("scaling: steps %d..%d cross the end of the first epoch (step %d at batch %d), whose "
                 "evaluation the standalone ceiling never runs: lower WARM, GAP or SAMPLES" %
                 (WARM, last, epoch, batch))
    extra = {} if bucket_kib is None else {"bucket_kib": bucket_kib}
    r = Run(job(model=model, epochs=3, checkpoint_every=0, log_every=GAP, threads_per_worker=1,
                global_batch=batch, **extra), workers=workers)
    steps = []
    while len(steps) < SAMPLES:
        e = r.wait(lambda e: e.get("type") == "step" and e["step"] >= WARM, "steps")
        steps.append((e["step"], e["time"]))
    r.command("quit")
    r.finish()
    return rate(steps, batch)


def standalone(model, batch, copies):
    """images/s summed over COPIES concurrent one-thread standalone workers,
    measured as throughput() does: wall-clock stamps of step lines (taken
    as each line arrives; the worker flushes every line).  Each copy keeps
    to a CPU of its own when there are enough, as the controller's local
    workers do (the job's pin_workers), so the ceiling is placed like them."""
    worker = os.path.join(os.environ["top_builddir"], "spotdeck-worker")
    cmd = [worker, "--standalone", "--model", model, "--threads", "1", "--batch", str(batch),
           "--max-steps", "100000", "--epochs", "1000", "--log-every", str(GAP)]
    cpus = sorted(os.sched_getaffinity(0))
    pin = (lambda i: {cpus[i]}) if copies <= len(cpus) else (lambda i: None)
    ps = [subprocess.Popen(cmd, stdout=subprocess.PIPE, bufsize=0,
                           preexec_fn=(lambda c=pin(i): c and os.sched_setaffinity(0, c)))
          for i in range(copies)]
    try:
        return sum(rate(s, batch) for s in stamp_steps(ps))
    finally:
        for p in ps:
            p.kill()
            p.wait()


def stamp_steps(ps):
    """(step, arrival time) of SAMPLES step lines of each process, from step
    WARM on."""
    fds = {p.stdout.fileno(): i for i, p in enumerate(ps)}
    pending = [b"" for _ in ps]
    samples = [[] for _ in ps]
    # Raw reads, split here, so every line is stamped when it arrives (a
    # buffered reader could hold a second line until more output comes).
    # A copy with its samples keeps training beside the others.
    while any(len(s) < SAMPLES for s in samples):
        ready, _, _ = select.select(list(fds), [], [], 120)
        if not ready:
            sys.exit("standalone workers printed nothing for 120 s")
        for fd in ready:
            chunk = os.read(fd, 65536)
            t = time.time()
            if not chunk:
                sys.exit("a standalone worker ended early")
            i = fds[fd]
            pending[i] += chunk
            while b"\n" in pending[i]:
                line, pending[i] = pending[i].split(b"\n", 1)
                if line.startswith(b"{") and b'"type":"step"' in line:
                    ev = json.loads(line)
                    if ev["step"] >= WARM and len(samples[i]) < SAMPLES:
                        samples[i].append((ev["step"], t))
    return samples
