#!/bin/sh
# An ONNX model on three ssh hosts (tests/netns/lib.sh): the file exists
# only where the controller runs.  The bed's hosts share this machine's
# file system, so the file is deleted as soon as the run has started
# (spotdeck read and checked it before renting anything): the workers on
# the hosts can only have the bytes the controller sent over their control
# connections (model_sent, one per host, with the file's SHA-256 and
# size).  They train together (a generation of 3, Gloo host to host) with
# equal parameter checksums.  The model is tests/engine/onnx-gen.h's tiny CNN on
# 1x8x8 synthetic data (no Python or dataset needed).
. "${top_srcdir:=$(cd "$(dirname "$0")/../../.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/netns/lib.sh"

netns_setup 3
netns_hosts_file
mkdir "$NETNS_DIR/controller-only"
"$top_builddir/tests/engine/onnx-gen" "$NETNS_DIR/controller-only/model.onnx" 8 8 10 || fail "onnx-gen"

NETNS_PY_HOSTS="$NETNS_HOSTS" NETNS_PY_PREFIX="$NETNS_PREFIX" python3 - <<'PY'
import sys, os, hashlib, subprocess
sys.path.insert(0, os.path.join(os.environ.get("top_srcdir", "."), "tests"))
from elastic import *
d = os.environ["NETNS_DIR"]
model = d + "/controller-only/model.onnx"
with open(model, "rb") as f:
    b = f.read()
sha, size = hashlib.sha256(b).hexdigest(), len(b)
j = job(model=model, dataset="synthetic", synthetic_c=1, synthetic_h=8, synthetic_w=8,
        synthetic_samples=4096, epochs=100, global_batch=48, log_every=10, checkpoint_every=0,
        comm_timeout=5, min_workers=3, workers=0, cluster=["ssh/h1", "ssh/h2", "ssh/h3"])
j["provider"] = {"name": "ssh", "hosts": d + "/hosts", "known_hosts": d + "/known_hosts"}
r = Run(j, extra=("--listen", os.environ["NETNS_BRIDGE_ADDR"] + ":0"), timeout=300)
r.wait_type("run_start")
os.unlink(model)
g = r.wait(lambda e: e.get("type") == "generation" and e.get("world_size") == 3, "a generation of 3",
           timeout=120)
sent = {e["server"]: e for e in r.events if e.get("type") == "model_sent"}
members = sorted(m["server"] for m in g["members"])
if sorted(sent) != members:
    fail("model_sent to %s, but the generation of 3 is %s" % (sorted(sent), members))
for s, e in sent.items():
    if e["sha256"] != sha or e["bytes"] != size:
        fail("model_sent to %s: %s; expected sha256 %s, %d bytes" % (s, e, sha, size))
# The workers run on the three hosts (their pids' namespaces); their
# links come through ssh.
peers = sorted(subprocess.run(["ip", "netns", "identify", str(e["pid"])], capture_output=True,
                              text=True).stdout.strip() for e in r.events if e.get("type") == "worker_connected")
want = ["%s-%d" % (os.environ["NETNS_PY_PREFIX"], i) for i in (1, 2, 3)]
if peers != want:
    fail("workers run in the namespaces %s, expected the hosts' %s" % (peers, want))
cs = r.wait(lambda e: e.get("type") == "checksum" and e["generation"] == g["generation"], "checksums")
if len(cs["checksums"]) != 3 or len(set(cs["checksums"].values())) != 1:
    fail("checksums differ across the three hosts: %s" % cs["checksums"])
s = r.wait(lambda e: e.get("type") == "step" and e["step"] >= cs["step"] + 50, "50 more steps")
errs = [e for e in r.events if e.get("type") in ("job_error", "protocol_error")]
if errs:
    fail("errors: %s" % errs)
ok("the model (%d bytes, sha256 %s...), deleted on the controller's side after the start, went to %s "
   "(on %s); generation %d of 3 trains with equal checksums (%s at step %d), step %d reached"
   % (size, sha[:16], ", ".join(sorted(sent)), ", ".join(peers), g["generation"],
      list(cs["checksums"].values())[0], cs["step"], s["step"]))
r.command("quit")
r.wait(lambda e: e.get("type") == "checkpoint" and e.get("reason") == "final", "the final checkpoint")
if r.finish() != 1:
    fail("quit before the end did not exit 1")
PY
