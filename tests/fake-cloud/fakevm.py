"""What the fake clouds (tests/fake-cloud/gce.py, tests/fake-cloud/ec2.py)
and the fake in-VM metadata services (tests/fake-metadata.py) share: the
machinery of a fake VM and of a fake HTTP endpoint, none of it particular
to one cloud.  Python standard library only; imported by those scripts from
this folder (they run as scripts, not as a package).

  send(handler, status, data, ctype, headers)   writes one answer with
      Content-Type and Content-Length; a client that hung up (broken pipe,
      reset) only closes the connection.
  Server        the fakes' API server: threaded, daemon threads, a listen
      backlog of 256.
  later(delay, fn, *args)   fn(*args) on a daemon timer thread.
  billing(insts, row)   /_control/billing: per second from inst.started to
      inst.stopped (or now), 60 s minimum, at inst.price USD an hour;
      {"instances": [row(inst, billed_s, run_s, usd)], "total_usd"}, the
      total rounded to the cent.
  wait_for_change(cond, q, etag)   GCE metadata ?wait_for_change=true
      (with cond held): returns at once without it; else waits on cond
      until etag() differs from last_etag (or, without last_etag, from its
      value on entry) or timeout_sec (default 60, at most 300) passes.
  start_listener(inst, handler) / stop_listener(inst)   a VM's own
      metadata listener on 127.0.0.1, an ephemeral port, in inst.msrv
      (its handler reads the VM as self.server.inst); stopping shuts it
      down on a thread of its own and sets inst.msrv to None.
  run_script(d, stem, suffix, script, env, procs)   writes script (str or
      bytes) to d/STEM+SUFFIX and runs it as /bin/bash FILE in its own
      process group (a session), cwd d, stdin /dev/null, stdout and stderr
      appended to d/STEM.log, env os.environ plus env; the process is
      appended to procs, reaped by a thread, and returned.
  kill_group(proc)   power-off: SIGTERM to the process group, SIGKILL 2 s
      later (nothing if the process has already exited).
  kill_all_and_exit(cond, procs)   on the fake's SIGTERM/SIGINT: SIGKILL
      to every group still running, then exit 0 at once.

A VM with an sshd of its own (the fakes' --vm-sshd):
  vm_net()   (X, Y), drawn at random: a fake's VMs live in 127.X.Y.0/24,
      so that fakes running side by side (make check -j2) do not share
      addresses; a fake keeps it in S["vm_net"] beside a counter
      S["next_vm_ip"] = 0.
  next_vm_ip(S, port)   the next VM's loopback address 127.X.Y.(10+k)
      from S["vm_net"] and S["next_vm_ip"] (advanced); one whose port is
      taken is skipped.
  start_sshd(d, name, ip, port, keys, env, procs)   a real /usr/sbin/sshd
      -D of the VM's own on ip:port, in its own session, log d/NAME.sshd.log:
      host key d/ssh_host_ed25519_key (made once), authorized keys (the
      list keys, written to d/NAME.authorized_keys) for the user the fake
      runs as, the only one an unprivileged sshd can let in (as root:
      root, by key only; UsePAM from sshd_pam()), and SetEnv for every
      session: env (in its order) then TMPDIR=d/NAME.tmp and
      HOME=d/NAME.home (made here).
      The process is appended to procs, reaped by a thread, and
      returned.
  sshd_pam()   "yes" when the fake runs as root and root's password is
      locked ("!" in /etc/shadow: sshd without PAM refuses a locked
      account even by key), else "no".
  kill_marked(name)   SIGKILL to every process whose environment holds
      SPOTDECK_FAKE_INSTANCE=NAME (what the VM's sshd sessions started;
      they are sessions of their own, out of sshd's process group).
  stop_sshd(proc, name)   power-off of a VM with an sshd (proc; nothing
      if None): SIGKILL to sshd's group and every process below it (the
      per-connection sshds set up sessions of their own), then
      kill_marked(name); first the Unix sockets those sshds listen on
      (the ssh provider's forwards, made in this machine's /tmp, which a
      real VM's /tmp would take with it) are removed.
  descendants(pid)   the pids of every process below pid, from /proc.
"""
import os, secrets, signal, socket, subprocess, threading, time
from http.server import ThreadingHTTPServer


def send(handler, status, data, ctype, headers=()):
    if isinstance(data, str):
        data = data.encode()
    try:
        handler.send_response(status)
        handler.send_header("Content-Type", ctype)
        handler.send_header("Content-Length", str(len(data)))
        for k, v in headers:
            handler.send_header(k, v)
        handler.end_headers()
        handler.wfile.write(data)
    except (BrokenPipeError, ConnectionResetError):
        handler.close_connection = True


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256


def later(delay, fn, *args):
    t = threading.Timer(delay, fn, args)
    t.daemon = True
    t.start()


def billing(insts, row):
    now, out, total = time.time(), [], 0.0
    for i in insts:
        run = (i.stopped or now) - i.started
        billed = max(60.0, run)
        usd = billed * i.price / 3600.0
        total += usd
        out.append(row(i, billed, run, usd))
    return {"instances": out, "total_usd": round(total, 2)}


def wait_for_change(cond, q, etag):
    if q.get("wait_for_change") != "true":
        return
    end = time.monotonic() + min(float(q.get("timeout_sec", 60)), 300)
    # Without last_etag, wait for the next change; with one, answer at
    # once if the value has moved on since.
    last, start = q.get("last_etag"), etag()
    while True:
        cur = etag()
        if (last is not None and cur != last) or (last is None and cur != start):
            break
        left = end - time.monotonic()
        if left <= 0:
            break
        cond.wait(left)


def start_listener(inst, handler):
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    srv.daemon_threads = True
    srv.inst = inst
    inst.msrv = srv
    threading.Thread(target=srv.serve_forever, daemon=True).start()


def stop_listener(inst):
    srv, inst.msrv = inst.msrv, None
    if srv:
        def down():
            srv.shutdown()
            srv.server_close()
        threading.Thread(target=down, daemon=True).start()


def run_script(d, stem, suffix, script, env, procs):
    path = os.path.join(d, stem + suffix)
    with open(path, "wb" if isinstance(script, bytes) else "w") as f:
        f.write(script)
    log = open(os.path.join(d, stem + ".log"), "ab")
    proc = subprocess.Popen(["/bin/bash", path], cwd=d, env=dict(os.environ, **env), stdin=subprocess.DEVNULL,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    log.close()
    procs.append(proc)
    threading.Thread(target=proc.wait, daemon=True).start()
    return proc


def kill_group(proc):
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return

    def hard():
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    later(2.0, hard)


def kill_all_and_exit(cond, procs):
    with cond:
        procs = list(procs)
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    os._exit(0)


def vm_net():
    return (secrets.randbelow(254) + 1, secrets.randbelow(256))


def next_vm_ip(S, port):
    while True:
        S["next_vm_ip"] += 1
        k = S["next_vm_ip"]
        ip = "127.%d.%d.%d" % (S["vm_net"][0], S["vm_net"][1], 9 + k)
        probe = socket.socket()
        try:
            probe.bind((ip, port))
            return ip
        except OSError:
            continue
        finally:
            probe.close()


def sshd_pam():
    if os.getuid() != 0:
        return "no"
    try:
        import spwd
        return "yes" if spwd.getspnam("root").sp_pwdp.startswith("!") else "no"
    except (ImportError, KeyError, PermissionError):
        return "no"


def start_sshd(d, name, ip, port, keys, env, procs):
    key = os.path.join(d, "ssh_host_ed25519_key")
    if not os.path.exists(key):
        subprocess.run(["ssh-keygen", "-q", "-N", "", "-t", "ed25519", "-f", key], check=True)
    stem = os.path.join(d, name)
    with open(stem + ".authorized_keys", "w") as f:
        f.write("".join(k + "\n" for k in keys))
    os.makedirs(stem + ".tmp", exist_ok=True)
    # HOME: a session's shell reads the VM's own, empty, rc files, not the
    # login user's (root's ~/.bashrc on a CI machine ran pyenv init, and a
    # login killed mid-rehash left a lock every later login waited 60 s for).
    os.makedirs(stem + ".home", exist_ok=True)
    if os.getuid() == 0 and not os.path.isdir("/run/sshd"):
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    env = dict(env, TMPDIR=stem + ".tmp", HOME=stem + ".home")
    with open(stem + ".sshd_config", "w") as f:
        f.write("\n".join([
            "ListenAddress %s:%d" % (ip, port), "AddressFamily inet", "HostKey " + key,
            "PidFile none", "AuthorizedKeysFile %s.authorized_keys" % stem,
            "PermitRootLogin prohibit-password", "PubkeyAuthentication yes", "PasswordAuthentication no",
            "KbdInteractiveAuthentication no", "UsePAM " + sshd_pam(), "StrictModes no", "UseDNS no",
            "PrintMotd no", "PrintLastLog no", "MaxStartups 100:30:200", "MaxSessions 64",
            "SetEnv " + " ".join("%s=%s" % kv for kv in env.items()), ""]))
    log = open(stem + ".sshd.log", "ab")
    proc = subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f", stem + ".sshd_config"],
                            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    log.close()
    procs.append(proc)
    threading.Thread(target=proc.wait, daemon=True).start()
    return proc


def kill_marked(name):
    mark = ("SPOTDECK_FAKE_INSTANCE=%s" % name).encode()
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open("/proc/%s/environ" % pid, "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if mark in env:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass


def descendants(pid):
    """Every process below pid (children, theirs, ...), from /proc."""
    kids = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        for k in kids.get(todo.pop(), []):
            out.append(k)
            todo.append(k)
    return out


def unlink_listening(pids):
    """Removes the files of the Unix sockets under /tmp/spotdeck- that the
    processes PIDS hold (by inode, /proc/net/unix against their fds)."""
    paths = {}
    try:
        with open("/proc/net/unix") as f:
            for line in f.read().splitlines()[1:]:
                col = line.split()
                if len(col) >= 8 and col[7].startswith("/tmp/spotdeck-"):
                    paths[col[6]] = col[7]
    except OSError:
        return
    for pid in pids:
        try:
            fds = os.listdir("/proc/%d/fd" % pid)
        except OSError:
            continue
        for fd in fds:
            try:
                link = os.readlink("/proc/%d/fd/%s" % (pid, fd))
            except OSError:
                continue
            if link.startswith("socket:[") and link[8:-1] in paths:
                try:
                    os.unlink(paths.pop(link[8:-1]))
                except OSError:
                    pass


def stop_sshd(proc, name):
    if proc is None:
        return
    # sshd's per-connection processes start sessions of their own (setsid):
    # not in its group, and without the instance's mark (that is in the
    # sessions' environment only).  Killed by descent, so that every TCP
    # connection to the VM ends as a powered-off machine's do.
    below = descendants(proc.pid)
    unlink_listening([proc.pid] + list(below))
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    for k in below:
        try:
            os.kill(k, signal.SIGKILL)
        except OSError:
            pass
    kill_marked(name)
