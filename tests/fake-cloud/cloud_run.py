"""What the cloud providers' end-to-end tests share (through gce_run.py and
aws_run.py): the fake's control endpoints at $BASE, and the processes a
fake VM runs.  Imported with tests/fake-cloud/ on sys.path."""
import json, os, urllib.request


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
