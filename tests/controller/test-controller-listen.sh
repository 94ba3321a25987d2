#!/bin/sh
# --listen and --advertise: the controller binds the address
# given (not just 127.0.0.1), on the port given or an ephemeral one; this
# host's workers dial it (loopback for a wildcard), run_start journals both
# addresses, and bad values or a taken port give one-line errors.  Only
# loopback addresses are used (127.0.0.0/8 is all loopback on Linux).
exec python3 - <<'PY'
import sys, os, socket, subprocess
sys.path.insert(0, os.path.join(os.environ.get("top_srcdir", "."), "tests"))
from elastic import *

def connects(host, port):
    s = socket.socket()
    s.settimeout(5)
    try:
        s.connect((host, port))
        return True
    except OSError:
        return False
    finally:
        s.close()

def free_port(host):
    s = socket.socket()
    s.bind((host, 0))
    p = s.getsockname()[1]
    s.close()
    return p

# A specific address and port: only that address accepts; the local worker
# dials it and joins.
port = free_port("127.0.0.2")
r = Run(job(epochs=1), workers=1, extra=("--listen", "127.0.0.2:%d" % port))
st = r.wait_type("run_start")
if st["port"] != port or st["connect"] != "127.0.0.2:%d" % port or st["advertise"] != st["connect"]:
    fail("run_start %s; expected port %d, connect and advertise 127.0.0.2:%d" % (
        {k: st.get(k) for k in ("port", "connect", "advertise")}, port, port))
r.wait_type("worker_joined")
if not connects("127.0.0.2", port):
    fail("nothing accepts on 127.0.0.2:%d" % port)
if connects("127.0.0.1", port):
    fail("127.0.0.1:%d accepts although the controller listens on 127.0.0.2 only" % port)
r.command("quit")
r.finish()
ok("--listen 127.0.0.2:%d: bound there only, the worker joined through it" % port)

# A wildcard: every local address accepts, this host's workers dial
# loopback, and workers elsewhere are told the advertised name.
r = Run(job(epochs=1), workers=1, extra=("--listen", "0.0.0.0:0", "--advertise", "trainer.example:4711"))
st = r.wait_type("run_start")
port = st["port"]
if port <= 0 or st["connect"] != "127.0.0.1:%d" % port or st["advertise"] != "trainer.example:4711":
    fail("run_start %s for --listen 0.0.0.0:0 --advertise trainer.example:4711" %
         {k: st.get(k) for k in ("port", "connect", "advertise")})
r.wait_type("worker_joined")
if not connects("127.0.0.3", port):
    fail("127.0.0.3:%d refused although the controller listens on 0.0.0.0" % port)
r.command("quit")
r.finish()
ok("--listen 0.0.0.0:0: port %d on every address, local workers dial 127.0.0.1, advertised trainer.example:4711" % port)

# Bad values: exit 2 and one line naming the option; a taken port: exit 1.
def refused(args, status, want):
    p = subprocess.run([SPOTDECK, "--headless", "--workers", "1"] + args, stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=60)
    err = p.stderr.strip()
    if p.returncode != status or err != want:
        fail("%s: exit %d, stderr %r; expected exit %d and %r" % (" ".join(args), p.returncode, err, status, want))
LE = ("spotdeck: --listen: expected ADDRESS:PORT with a numeric IPv4 or [IPv6] address "
      "and a port from 0 to 65535, got '%s'")
AE = ("spotdeck: --advertise: expected HOST:PORT (a name, an IPv4 address or [IPv6]) "
      "and a port from 1 to 65535, got '%s'")
for bad in ("localhost:5000", "127.0.0.1:65536", "127.0.0.1", "::1:5000", "127.0.0.1:-1", "[::1:5000"):
    refused(["--listen", bad], 2, LE % bad)
for bad in (":5000", "trainer:0", "trainer", "fe80::1:5000", "trainer:5x", "trainer .example:5000",
            "-oProxyCommand=x:22", "user@trainer:22", "[fe80::1%eth0]:22", "[]:22"):
    refused(["--advertise", bad], 2, AE % bad)
held = socket.socket()
held.bind(("127.0.0.1", 0))
held.listen(1)
hp = held.getsockname()[1]
refused(["--listen", "127.0.0.1:%d" % hp], 1,
        "spotdeck: controller: cannot listen on 127.0.0.1:%d: address already in use" % hp)
held.close()
ok("bad --listen/--advertise values and a taken port are refused with one line each")
PY
