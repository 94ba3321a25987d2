"""Test harness for the elastic controller: runs `spotdeck --headless` with a
pipe for commands and reads its journal lines as they come."""
import atexit, glob, json, os, queue, random, shutil, signal, socket, subprocess, sys, tempfile, threading, time

BUILD = os.environ.get("top_builddir") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPOTDECK = os.path.join(BUILD, "spotdeck")

# Timeouts here are safety nets against a hang, never speed targets (those
# are in tests/bench/): each is multiplied by SD_TIMEOUT_SCALE (default 3, as
# in tests/tmux-lib.sh), and a run as a whole is given up when spotdeck has
# printed nothing for its `timeout` (scaled), or after four times that in
# all, since a loaded 2-core machine running the ASan build slows a run down
# without stopping its journal.
SCALE = float(os.environ.get("SD_TIMEOUT_SCALE") or 3)


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def ok(msg):
    print("ok: " + msg, flush=True)


_tmpdirs = []
atexit.register(lambda: [shutil.rmtree(d, ignore_errors=True) for d in _tmpdirs])
_runs = []


def _end_runs():
    """At exit (a failed check included), nothing a Run started may outlive
    the test: its workers (by the pids its journal gave, checked to be this
    run's workers) and spotdeck itself get SIGKILL."""
    for r in _runs:
        if r.p.poll() is not None:
            continue
        r._drain()
        for pid in r.pids().values():
            try:
                with open("/proc/%d/cmdline" % pid, "rb") as f:
                    mine = r.run_dir.encode() in f.read()
                if mine:
                    os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        r.kill()
        try:
            r.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


# Registered after the directories' removal, so it runs before it.
atexit.register(_end_runs)
# A test stopped by SIGTERM or SIGHUP (make interrupted, a hang killed)
# cleans up the same way: exit through atexit.
for _sig in (signal.SIGTERM, signal.SIGHUP):
    signal.signal(_sig, lambda signum, frame: sys.exit(128 + signum))

SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")


def check_sanitizers(text, where):
    """In a sanitizer build, a report anywhere fails the test."""
    for mark in SANITIZER_MARKS:
        if mark in text:
            i = text.index(mark)
            fail("%s: %s" % (where, text[max(0, i - 200):i + 800]))


class Run:
    def __init__(self, job, workers=None, run_dir=None, resume=None, timeout=600, extra=(), program=None):
        self.tmp = tempfile.mkdtemp(prefix="spotdeck-elastic.")
        _tmpdirs.append(self.tmp)
        self.run_dir = resume or run_dir or os.path.join(self.tmp, "run")
        args = [program or SPOTDECK, "--headless"]
        if resume:
            args += ["--resume", resume]
        else:
            jp = os.path.join(self.tmp, "job.json")
            with open(jp, "w") as f:
                json.dump(job, f)
            args += ["--job", jp, "--run-dir", self.run_dir]
            if workers is not None:
                args += ["--workers", str(workers)]
        args += list(extra)
        self.p = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, bufsize=1)
        self.events = []
        self.q = queue.Queue()
        self.stall = timeout * SCALE
        self.last = time.time()
        self.deadline = self.last + 4 * self.stall
        _runs.append(self)
        threading.Thread(target=self._reader, daemon=True).start()

    def _drain(self):
        """Moves the events already read into self.events, without waiting."""
        while True:
            try:
                ev = self.q.get_nowait()
            except queue.Empty:
                return
            if ev is None:
                self.q.put(None)
                return
            self.events.append(ev)

    def _reader(self):
        for line in self.p.stdout:
            line = line.strip()
            if not line:
                continue
            try:
                ev = json.loads(line)
            except ValueError:
                self.q.put({"type": "_garbage", "line": line})
                continue
            self.q.put(ev)
        self.q.put(None)

    def wait(self, pred, what, timeout=None):
        """Returns the first new event for which pred(ev) holds; gives up
        after timeout x SD_TIMEOUT_SCALE seconds (none: only the run's own
        limits)."""
        end = min(self.deadline, time.time() + (timeout * SCALE if timeout else 1e9))
        while True:
            now = time.time()
            left = min(end, self.last + self.stall) - now
            if left <= 0:
                self.kill()
                why = ("no journal event for %.0f s" % (now - self.last) if self.last + self.stall <= now
                       else "%.0f s" % (timeout * SCALE if timeout and end < self.deadline else 4 * self.stall))
                fail("timed out waiting for " + what + " (" + why + "); last events: " +
                     json.dumps(self.events[-5:]))
            try:
                ev = self.q.get(timeout=left)
            except queue.Empty:
                continue
            self.last = time.time()
            if ev is None:
                fail("spotdeck exited (status %s) while waiting for %s; stderr: %s; last: %s" %
                     (self.p.wait(), what, self.p.stderr.read(), json.dumps(self.events[-5:])))
            self.events.append(ev)
            if ev.get("type") == "_garbage":
                fail("non-JSON line on stdout: " + ev["line"])
            if pred(ev):
                return ev

    def mark(self):
        """A position in the events seen so far, for wait_since."""
        return len(self.events)

    def wait_since(self, mark, pred, what, timeout=None):
        """Like wait, but an event already seen after mark counts too, so
        two events may arrive in either order."""
        for ev in self.events[mark:]:
            if pred(ev):
                return ev
        return self.wait(pred, what, timeout)

    def wait_type(self, typ, timeout=None, **fields):
        return self.wait(lambda e: e.get("type") == typ and all(e.get(k) == v for k, v in fields.items()),
                         typ + (" " + json.dumps(fields) if fields else ""), timeout)

    def command(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()

    def finish(self, timeout=120):
        try:
            rc = self.p.wait(timeout=timeout * SCALE)
        except subprocess.TimeoutExpired:
            self.kill()
            fail("spotdeck did not exit")
        while True:
            ev = self.q.get()
            if ev is None:
                break
            self.events.append(ev)
        self.stderr_text = self.p.stderr.read()
        check_sanitizers(self.stderr_text, "spotdeck's stderr")
        for log in glob.glob(os.path.join(self.run_dir, "logs", "*.log")):
            with open(log, errors="replace") as f:
                check_sanitizers(f.read(), log)
        return rc

    def kill(self, sig=signal.SIGKILL):
        try:
            self.p.send_signal(sig)
        except ProcessLookupError:
            pass

    def pids(self):
        """server id -> pid of the live workers."""
        live = {}
        for e in self.events:
            if e.get("type") == "started":
                live[e["server"]] = e["pid"]
            elif e.get("type") == "server_exit":
                live.pop(e["server"], None)
        return live

    def journal(self):
        """The journal on disk, the run's record: its events in order."""
        with open(os.path.join(self.run_dir, "journal.jsonl")) as f:
            return [json.loads(l) for l in f if l.strip()]


def journaled_steps(events):
    """The step events of a journal: {step: [generation of each event]},
    its highest step, and the steps 1..highest that have no event."""
    steps = {}
    for e in events:
        if e["type"] == "step":
            steps.setdefault(e["step"], []).append(e["generation"])
    top = max(steps)
    return steps, top, [s for s in range(1, top + 1) if s not in steps]


def fashion_subset(d, ntrain, ntest=10000):
    """A copy of Fashion-MNIST in D/fashion-mnist with its first NTRAIN
    training images and first NTEST test images (all 10,000 unless told),
    IDX files as the dataset ships them, uncompressed: short runs of a real
    job.  Returns the directory."""
    import gzip, struct
    data = os.path.join(d, "fashion-mnist")
    os.mkdir(data)
    for name, n in (("train-images-idx3-ubyte", ntrain), ("train-labels-idx1-ubyte", ntrain),
                    ("t10k-images-idx3-ubyte", ntest), ("t10k-labels-idx1-ubyte", ntest)):
        with gzip.open(os.path.join("/usr/share/datasets/fashion-mnist", name + ".gz"), "rb") as f:
            raw = f.read()
        magic, count = struct.unpack(">II", raw[:8])
        dims = magic & 0xff
        head = 4 * (dims + 1)
        item = 1
        for k in struct.unpack(">" + "I" * (dims - 1), raw[8:head]):
            item *= k
        if count < n:
            fail("%s holds %d items, fewer than %d" % (name, count, n))
        with open(os.path.join(data, name), "wb") as f:
            f.write(struct.pack(">II", magic, n) + raw[8:head] + raw[head:head + n * item])
    return data


def job(**kw):
    j = {"model": "cnn", "dataset": "fashion-mnist", "epochs": 1, "global_batch": 64,
         "threads_per_worker": 1, "checkpoint_every": 100, "log_every": 10, "comm_timeout": 5}
    j.update(kw)
    return j
