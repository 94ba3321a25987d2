"""What the cloud providers' end-to-end tests share (through gce_run.py and
aws_run.py): the fake's control endpoints at $BASE, and the processes a
fake VM runs.  Imported with tests/fake-cloud/ on sys.path."""
import json, os, re, subprocess, urllib.request


def control(path, body=None):
    """GET (or POST BODY as JSON to) the fake's PATH; its JSON answer."""
    req = urllib.request.Request(os.environ["BASE"] + path,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 method="POST" if body is not None else "GET")
    with urllib.request.urlopen(req, timeout=30) as f:
        return json.loads(f.read() or b"{}")


def on_vms(names):
    """{VM name or id: [(pid, exe, SPOTDECK_COMM_HOST)]} of every process
    whose environment says it runs on one of NAMES (SPOTDECK_FAKE_INSTANCE,
    which the fake VMs' sshds set)."""
    found = {}
    for pid in os.listdir("/proc"):
        try:
            env = dict(kv.split(b"=", 1) for kv in open("/proc/%s/environ" % pid, "rb").read().split(b"\0") if b"=" in kv)
            exe = os.readlink("/proc/%s/exe" % pid)
        except (OSError, ValueError):
            continue
        vm = env.get(b"SPOTDECK_FAKE_INSTANCE", b"").decode()
        if vm in names:
            found.setdefault(vm, []).append((pid, exe, env.get(b"SPOTDECK_COMM_HOST", b"").decode()))
    return found


def link_problems(names, port):
    """How the workers on the VMs NAMES reach the controller listening on
    PORT: [] when each was told --connect unix:/tmp/spotdeck-TAG-SERVER-N.sock
    (the provider's ssh forward) and every TCP connection to PORT belongs to
    an ssh process; else one line per thing found otherwise.  The fake VMs
    share this machine's loopback with the controller, so no firewall rule
    could tell a worker's direct connection from ssh's: their sockets do."""
    bad = []
    workers = [pid for ps in on_vms(set(names)).values() for pid, exe, _ in ps
               if os.path.basename(exe) == "spotdeck-worker"]
    if not workers:
        bad.append("no worker runs on the VMs %s" % sorted(names))
    for pid in workers:
        try:
            argv = open("/proc/%s/cmdline" % pid, "rb").read().decode().split("\0")
        except OSError:
            continue
        c = argv[argv.index("--connect") + 1] if "--connect" in argv else None
        if not c or not re.fullmatch(r"unix:/tmp/spotdeck-[0-9a-f]{16}-s[0-9]+-[0-9]+\.sock", c):
            bad.append("worker %s was told --connect %s" % (pid, c))
    out = subprocess.run(["ss", "-Htnp", "state", "established", "( dport = :%d )" % port],
                         capture_output=True, text=True).stdout
    users = re.findall(r'users:\(\("([^"]+)"', out)
    if len(users) < len(workers) or set(users) != {"ssh"}:
        bad.append("connections to the controller's port %d held by %s, expected only ssh (at least %d)" %
                   (port, users, len(workers)))
    return bad
