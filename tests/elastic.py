"""Test harness for the elastic controller: runs `spotdeck --headless` with a
pipe for commands and reads its journal lines as they come."""
import atexit, glob, json, os, queue, random, shutil, signal, socket, subprocess, sys, tempfile, threading, time

BUILD = os.environ.get("top_builddir") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPOTDECK = os.path.join(BUILD, "spotdeck")


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def ok(msg):
    print("ok: " + msg, flush=True)


_tmpdirs = []
atexit.register(lambda: [shutil.rmtree(d, ignore_errors=True) for d in _tmpdirs])

SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")


def check_sanitizers(text, where):
    """In a sanitizer build, a report anywhere fails the test."""
    for mark in SANITIZER_MARKS:
        if mark in text:
            i = text.index(mark)
            fail("%s: %s" % (where, text[max(0, i - 200):i + 800]))


class Run:
    def __init__(self, job, workers=None, run_dir=None, resume=None, timeout=600, extra=()):
        self.tmp = tempfile.mkdtemp(prefix="spotdeck-elastic.")
        _tmpdirs.append(self.tmp)
        self.run_dir = resume or run_dir or os.path.join(self.tmp, "run")
        args = [SPOTDECK, "--headless"]
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
        self.deadline = time.time() + timeout
        threading.Thread(target=self._reader, daemon=True).start()
        # A test that fails (sys.exit) must not leave the run training.
        atexit.register(self._reap)

    def _reap(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()

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
        """Returns the first new event for which pred(ev) holds."""
        end = min(self.deadline, time.time() + (timeout or 1e9))
        while True:
            left = end - time.time()
            if left <= 0:
                self.kill()
                fail("timed out waiting for " + what + "; last events: " +
                     json.dumps(self.events[-5:]))
            try:
                ev = self.q.get(timeout=left)
            except queue.Empty:
                continue
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
            rc = self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            fail("spotdeck did not exit")
        while True:
            ev = self.q.get()
            if ev is None:
                break
            self.events.append(ev)
        check_sanitizers(self.p.stderr.read(), "spotdeck's stderr")
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


def job(**kw):
    j = {"model": "cnn", "dataset": "fashion-mnist", "epochs": 1, "global_batch": 64,
         "threads_per_worker": 1, "checkpoint_every": 100, "log_every": 10, "comm_timeout": 5}
    j.update(kw)
    return j
