#!/bin/sh
# Bad input to spotdeck itself: one error line naming the file (or option)
# and the field, a non-zero exit, no crash, and nothing lost or left behind:
# a refused start leaves no run directory and no worker process, and an
# earlier run's directory is never started over.
#
# The twenty mistakes a newcomer makes most, each answered by one line that
# names what is wrong (where this test, or the one named, checks it):
#   1. a job file named without --job                      (here)
#   2. a run directory named without --resume or attach    (here)
#   3. a mistyped subcommand ("exprot"): the near one named (here)
#   4. a job file saved as UTF-16, with or without a BOM   (here)
#   5. a "~" path in the job, which only a shell expands   (here)
#   6. a directory given as the job file                   (here)
#   7. --run-dir naming a file                             (here)
#   8. --run-dir naming an earlier run's directory         (here)
#   9. --resume of a directory that never held a run       (here)
#      or of a run that finished                           (here)
#  10. a hosts file with CRLF line ends: accepted, its
#      lines read as without the CR                        (here)
#  11. a hosts file's bad port / unreadable identity       (here)
#  12. hosts told to dial a loopback --advertise           (here)
#  13. --advertise of a wildcard address                   (here)
#  14. a number beyond a double, a bad field type          (here)
#  15. an npy dataset whose files do not fit               (here)
#  16. a provider not in this build                        (here)
#  17. local workers beside ssh hosts                      (here)
#  18. export without --onnx/--safetensors, or of a run
#      without checkpoints                                 (here)
#  19. attach to a run that is not running                 (here)
#  20. worker options out of range                         (test-worker-bad-input.sh)
#  21. a relative data_dir, missing, under --detach: refused before the
#      run goes to the background, where nobody would see it, named as
#      resolved against the job file's directory (here)
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
tmpdir
SPOTDECK="$top_builddir/spotdeck"

printf '{"model":"mlp","lr":1e400}' >"$T/huge.json"
expect_error "number beyond a double" "huge\.json: lr: .*got inf \(beyond" \
	$SPOTDECK --headless --job "$T/huge.json" --run-dir "$T/r1"
[ ! -e "$T/r1" ] || fail "a bad job left $T/r1"

# The npy dataset's files are checked before anything starts: a bad array
# file is one line naming it, and no run directory is left.
mkdir "$T/npy"
npy() {   # npy FILE DESCR SHAPE DATA_BYTES [BYTE]: a version 1.0 .npy file of bytes BYTE (0)
	python3 - "$@" <<'PY'
import sys
path, descr, shape, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
fill = int(sys.argv[5]) if len(sys.argv) > 5 else 0
d = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, shape)
d += " " * (63 - (10 + len(d)) % 64) + "\n"
open(path, "wb").write(b"\x93NUMPY\x01\x00" + len(d).to_bytes(2, "little") + d.encode() + bytes([fill]) * n)
PY
}
npy "$T/npy/train_x.npy" '|u1' '80, 1, 4, 4' 1280
npy "$T/npy/train_y.npy" '|u1' '80,' 80
npy "$T/npy/test_x.npy" '|u1' '8, 1, 4, 4' 128
printf '{"model":"mlp","dataset":"npy","data_dir":"%s"}' "$T/npy" >"$T/npyjob.json"
expect_error "an npy file missing" "npyjob\.json: .*/npy/test_y\.npy: no such file$" \
	$SPOTDECK --headless --job "$T/npyjob.json" --run-dir "$T/r1"
npy "$T/npy/test_y.npy" '<f4' '8,' 32
expect_error "npy labels of a float dtype" "test_y\.npy: labels of dtype '<f4': expected integer class ids" \
	$SPOTDECK --headless --job "$T/npyjob.json" --run-dir "$T/r1"
npy "$T/npy/test_y.npy" '|u1' '8,' 7
expect_error "a truncated npy file" "test_y\.npy: truncated: shape \(8,\) of \|u1 needs 8 bytes of data, the file has 7" \
	$SPOTDECK --headless --job "$T/npyjob.json" --run-dir "$T/r1"
npy "$T/npy/test_y.npy" '|u1' '8,' 8
printf '{"model":"mlp","dataset":"npy","data_dir":"%s","normalize":{"mean":[0.5,0.5,0.5],"std":[1,1,1]}}' "$T/npy" >"$T/npyjob.json"
expect_error "npy channels against normalize" "train_x\.npy: 1 channels \(layout NCHW, shape \(80, 1, 4, 4\)\), but normalize gives 3" \
	$SPOTDECK --headless --job "$T/npyjob.json" --run-dir "$T/r1"
printf '{"model":"mlp","layout":"NHWC"}' >"$T/npyjob.json"
expect_error "layout with a built-in dataset" "npyjob\.json: layout: only for dataset npy \(fashion-mnist has its own\)" \
	$SPOTDECK --headless --job "$T/npyjob.json" --run-dir "$T/r1"
npy "$T/npy/train_y.npy" '|u1' '80,' 80 5
printf '{"model":"mlp","dataset":"npy","data_dir":"%s","classes":3}' "$T/npy" >"$T/npyjob.json"
expect_error "npy labels beyond classes" "train_y\.npy: label 5 of sample 0 out of range \(classes 3\)" \
	$SPOTDECK --headless --job "$T/npyjob.json" --run-dir "$T/r1"
[ ! -e "$T/r1" ] || fail "a bad npy dataset left $T/r1"
# spotdeck doctor checks the same files, on a line of its own.
printf '{"dataset":"npy","data_dir":"%s","classes":3,"provider":{"name":"gce","project":"p1","zones":["us-central1-a"],"credentials":"%s/none.json"}}' "$T/npy" "$T" >"$T/npydoc.json"
$SPOTDECK doctor "$T/npydoc.json" >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" -eq 1 ] || fail "doctor on a bad npy dataset: exit status $rc, expected 1"
grep -Eq "^FAIL +data: .*/npy/train_y\.npy: label 5 of sample 0 out of range \(classes 3\)$" "$T/out" ||
	{ cat "$T/out" "$T/err" >&2; fail "doctor: no FAIL data line for the bad label"; }
ok "doctor: $(grep 'data:' "$T/out")"

# An ONNX model is read and checked before anything starts: a broken file
# is one line naming the job file, the ONNX file, the node and what is
# wrong; no run directory, no worker.  tests/engine/onnx-gen writes the files
# (onnx-gen.h's tiny CNN, whole or broken); garbage and a truncated file
# are written here.
GEN="$top_builddir/tests/engine/onnx-gen"
mkdir "$T/onnx"
onnxjob() {   # onnxjob MODEL [DATASET_JSON]: $T/onnx/job.json training MODEL
	printf '{"model":"%s",%s,"workers":2}' "$1" \
		"${2:-\"dataset\":\"synthetic\",\"synthetic_c\":1,\"synthetic_h\":8,\"synthetic_w\":8}" \
		>"$T/onnx/job.json"
}
"$GEN" --break unsupported-op "$T/onnx/softplus.onnx" 8 8 10 || fail "onnx-gen"
onnxjob softplus.onnx
expect_error "an ONNX node of an unsupported op" \
	"^spotdeck: .*/onnx/job\.json: .*/onnx/softplus\.onnx: node relu1 \(Softplus\): op Softplus is not supported; supported ops: Conv, " \
	$SPOTDECK --headless --job "$T/onnx/job.json" --run-dir "$T/r1"
"$GEN" --break dangling "$T/onnx/dangling.onnx" 8 8 10 || fail "onnx-gen"
onnxjob dangling.onnx
expect_error "an ONNX node reading nothing" \
	"job\.json: .*/onnx/dangling\.onnx: node gap \(GlobalAveragePool\): input nowhere is produced by no node" \
	$SPOTDECK --headless --job "$T/onnx/job.json" --run-dir "$T/r1"
printf 'not a model at all' >"$T/onnx/junk.onnx"
onnxjob junk.onnx
expect_error "an ONNX file of garbage" "job\.json: .*/onnx/junk\.onnx: not an ONNX model" \
	$SPOTDECK --headless --job "$T/onnx/job.json" --run-dir "$T/r1"
"$GEN" "$T/onnx/whole.onnx" 8 8 10 || fail "onnx-gen"
head -c 200 "$T/onnx/whole.onnx" >"$T/onnx/cut.onnx"
onnxjob cut.onnx
expect_error "a truncated ONNX file" "job\.json: .*/onnx/cut\.onnx: not an ONNX model \(protobuf decoding failed" \
	$SPOTDECK --headless --job "$T/onnx/job.json" --run-dir "$T/r1"
onnxjob gone.onnx
expect_error "an ONNX file missing" "job\.json: .*/onnx/gone\.onnx: No such file or directory" \
	$SPOTDECK --headless --job "$T/onnx/job.json" --run-dir "$T/r1"
# The model against the data: the built-in shapes, and npy's headers (the
# arrays above: 1x4x4 images, labels up to 5, so 6 classes).
"$GEN" "$T/onnx/c4.onnx" 8 8 4 || fail "onnx-gen"
onnxjob c4.onnx
expect_error "ONNX classes against synthetic data" \
	"job\.json: .*/onnx/c4\.onnx: the model takes 1x8x8 inputs and gives 4 classes; dataset synthetic has 1x8x8 images and 10 classes$" \
	$SPOTDECK --headless --job "$T/onnx/job.json" --run-dir "$T/r1"
onnxjob whole.onnx '"dataset":"fashion-mnist"'
expect_error "an ONNX input against fashion-mnist" \
	"whole\.onnx: the model takes 1x8x8 inputs and gives 10 classes; dataset fashion-mnist has 1x28x28 images and 10 classes$" \
	$SPOTDECK --headless --job "$T/onnx/job.json" --run-dir "$T/r1"
"$GEN" "$T/onnx/npy6.onnx" 4 4 6 || fail "onnx-gen"
onnxjob whole.onnx "\"dataset\":\"npy\",\"data_dir\":\"$T/npy\""
expect_error "an ONNX input against npy arrays" \
	"whole\.onnx: the model takes 1x8x8 inputs and gives 10 classes; dataset npy has 1x4x4 images and 6 classes$" \
	$SPOTDECK --headless --job "$T/onnx/job.json" --run-dir "$T/r1"
[ ! -e "$T/r1" ] || fail "a bad ONNX model left $T/r1"
# A model of the npy arrays' own shape and classes passes, and spotdeck
# plan reads an ONNX job's FLOPs from its file (it once took the path for
# an unknown built-in model); a broken file is its one line there too.
onnxjob npy6.onnx "\"dataset\":\"npy\",\"data_dir\":\"$T/npy\",\"epochs\":1,\"global_batch\":8"
$SPOTDECK plan --job "$T/onnx/job.json" --runs 10 >"$T/out" 2>"$T/err" ||
	{ cat "$T/err" >&2; fail "plan on a good ONNX job: exit status $?"; }
grep -q "runs per row" "$T/out" || fail "plan on a good ONNX job printed no table"
ok "plan reads an ONNX job: $(head -n 1 "$T/out")"
onnxjob softplus.onnx
EXPECT_RC=1 expect_error "plan on a broken ONNX job" "softplus\.onnx: node relu1 \(Softplus\)" \
	$SPOTDECK plan --job "$T/onnx/job.json" --runs 10
# spotdeck doctor says it on a model line of its own.
printf '{"model":"softplus.onnx","dataset":"synthetic","synthetic_c":1,"synthetic_h":8,"synthetic_w":8,"provider":{"name":"gce","project":"p1","zones":["us-central1-a"],"credentials":"%s/none.json"}}' "$T" >"$T/onnx/doc.json"
$SPOTDECK doctor "$T/onnx/doc.json" >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" -eq 1 ] || fail "doctor on a broken ONNX model: exit status $rc, expected 1"
grep -Eq "^FAIL +model: .*/onnx/softplus\.onnx: node relu1 \(Softplus\): op Softplus is not supported" "$T/out" ||
	{ cat "$T/out" "$T/err" >&2; fail "doctor: no FAIL model line for the Softplus node"; }
ok "doctor: $(grep 'model:' "$T/out" | cut -c1-120)"
sed 's/softplus\.onnx/whole.onnx/' "$T/onnx/doc.json" >"$T/onnx/doc-ok.json"
$SPOTDECK doctor "$T/onnx/doc-ok.json" >"$T/out" 2>"$T/err"
grep -Eq "^ok +model: .*/onnx/whole\.onnx: 5 ONNX nodes, 1x8x8 inputs, 10 classes, " "$T/out" ||
	{ cat "$T/out" "$T/err" >&2; fail "doctor: no ok model line for a good model"; }
ok "doctor: $(grep 'model:' "$T/out")"

# A newcomer's mistakes: a job file saved as UTF-16 (with or without a
# byte-order mark), a "~" path that only a shell would expand, a job file or
# a run directory given without its option.
printf '\377\376{\000"\000m\000"\000:\0001\000}\000' >"$T/u16.json"
expect_error "a job file in UTF-16" "u16\.json: the file is in UTF-16 or UTF-32, not UTF-8: save it as UTF-8" \
	$SPOTDECK --headless --job "$T/u16.json" --run-dir "$T/r1"
printf '{\000"\000m\000"\000' >"$T/u16nobom.json"
expect_error "a job file in UTF-16 without a BOM" "u16nobom\.json: the file is in UTF-16 or UTF-32" \
	$SPOTDECK --headless --job "$T/u16nobom.json" --run-dir "$T/r1"
# spotdeck doctor reads the same job file: the same line, not a bare
# "not one JSON value"; and a byte-order mark that the run accepts passes
# on to the doctor's own checks (here: the provider object is missing).
EXPECT_RC=2 expect_error "doctor on a job file in UTF-16" \
	"^spotdeck doctor: .*u16\.json: the file is in UTF-16 or UTF-32, not UTF-8" $SPOTDECK doctor "$T/u16.json"
printf '{"model": "mlp",}' >"$T/comma.json"
EXPECT_RC=2 expect_error "doctor on a trailing comma" \
	"^spotdeck doctor: .*comma\.json: invalid JSON at line 1, column [0-9]+" $SPOTDECK doctor "$T/comma.json"
printf '\357\273\277{"model":"mlp"}' >"$T/bom.json"
EXPECT_RC=2 expect_error "doctor on a job file with a byte-order mark" \
	"^spotdeck doctor: .*bom\.json: no \"provider\" object$" $SPOTDECK doctor "$T/bom.json"
printf '{"model":"mlp","data_dir":"~/datasets/fmnist"}' >"$T/tilde.json"
expect_error "a ~ path in the job" "tilde\.json: data_dir: '~/datasets/fmnist' starts with '~', which only a shell expands" \
	$SPOTDECK --headless --job "$T/tilde.json" --run-dir "$T/r1"
printf '{"model":"mlp"}' >"$T/plain.json"
EXPECT_RC=2 expect_error "a job file without --job" "unexpected argument '.*plain\.json': a job file comes after --job" \
	$SPOTDECK --headless "$T/plain.json"
mkdir "$T/oldrun" && : >"$T/oldrun/journal.jsonl"
EXPECT_RC=2 expect_error "a run directory without attach" "unexpected argument '.*oldrun': a run directory comes after --resume or attach" \
	$SPOTDECK "$T/oldrun"
mkdir "$T/jobdir"
expect_error "a directory given as the job file" "jobdir: is a directory, not a job file" \
	$SPOTDECK --headless --job "$T/jobdir" --run-dir "$T/r1"
EXPECT_RC=2 expect_error "a mistyped subcommand" "^spotdeck: 'exprot' is not a subcommand; did you mean 'spotdeck export'\?" \
	$SPOTDECK exprot "$T/oldrun"
EXPECT_RC=2 expect_error "a mistyped subcommand with its options after it" \
	"^spotdeck: 'expot' is not a subcommand; did you mean 'spotdeck export'\?" \
	$SPOTDECK expot "$T/oldrun" --onnx "$T/out.onnx"
EXPECT_RC=2 expect_error "a mistyped attach with --read-only" \
	"^spotdeck: 'atach' is not a subcommand; did you mean 'spotdeck attach'\?" \
	$SPOTDECK atach --read-only "$T/oldrun"
EXPECT_RC=2 expect_error "a swapped subcommand's letters" "^spotdeck: 'attahc' is not a subcommand; did you mean 'spotdeck attach'\?" \
	$SPOTDECK attahc
EXPECT_RC=2 expect_error "a word near no subcommand" "^spotdeck: unexpected argument 'frobnicate' \(see --help\)$" \
	$SPOTDECK frobnicate
EXPECT_RC=2 expect_error "export with nothing to write" "^spotdeck export: nothing to write: give --onnx OUT\.onnx, --safetensors OUT\.safetensors or both" \
	$SPOTDECK export "$T/oldrun"
mkdir "$T/oldrun/checkpoints"
expect_error "export of a run without checkpoints" "^spotdeck export: .*oldrun/checkpoints: no checkpoint \(the run saved none yet\)$" \
	$SPOTDECK export "$T/oldrun" --onnx "$T/out.onnx"
[ ! -e "$T/out.onnx" ] || fail "export of a run without checkpoints wrote $T/out.onnx"
expect_error "attach to a run that is not running" "^spotdeck: attach .*oldrun: the run is not running and left no final screen .*continue it with: spotdeck --resume .*oldrun$" \
	$SPOTDECK attach "$T/oldrun"
[ ! -e "$T/r1" ] || fail "a newcomer's mistake left $T/r1"

printf '{"model":"mlp","provider":"azure"}' >"$T/azure.json"
expect_error "provider not in this build (job)" "azure\.json: provider\.name: 'azure' is not available in this build \(known: sim, ssh, gce, aws\)" \
	$SPOTDECK --headless --job "$T/azure.json" --run-dir "$T/r2"
expect_error "provider not in this build (option)" "^spotdeck: --provider: 'azure' is not available in this build \(known: sim, ssh, gce, aws\)" \
	$SPOTDECK --headless --provider azure --run-dir "$T/r2"
[ ! -e "$T/r2" ] || fail "an unavailable provider left $T/r2"
# The aws provider's settings: an AZ of another region, an image that is
# not an AMI id, a type without a GPU.
printf '{"model":"mlp","provider":{"name":"aws","region":"us-east-1","zones":["us-west-2a"],"image":"ami-0123456789abcdef0"}}' >"$T/awsz.json"
expect_error "an AZ of another region" \
	"awsz\.json: provider\.zones: \"us-west-2a\" is not an Availability Zone of us-east-1 \(e\.g\. us-east-1a\)" \
	$SPOTDECK --headless --job "$T/awsz.json" --run-dir "$T/r2"
printf '{"model":"mlp","provider":{"name":"aws","region":"us-east-1","zones":["us-east-1a"],"image":"ubuntu-22.04"}}' >"$T/awsi.json"
expect_error "an image that is no AMI id" \
	"awsi\.json: provider\.image: \"ubuntu-22\.04\" is not an AMI id \(ami- and hex digits\)" \
	$SPOTDECK --headless --job "$T/awsi.json" --run-dir "$T/r2"
printf '{"model":"mlp","provider":{"name":"aws","region":"us-east-1","zones":["us-east-1a"],"image":"ami-0123456789abcdef0","instance_type":"m5.large"}}' >"$T/awst.json"
expect_error "an instance type without a GPU" \
	"awst\.json: provider\.instance_type: m5\.large has no GPU spotdeck knows" \
	$SPOTDECK --headless --job "$T/awst.json" --run-dir "$T/r2"
printf '{"model":"mlp","provider":{"name":"aws","region":"us-east-1","zones":["us-east-1a"],"image":"ami-0123456789abcdef0","endpoint":"http://127.0.0.1:"}}' >"$T/awse.json"
expect_error "an endpoint without its port" \
	"awse\.json: provider\.endpoint: \"http://127\.0\.0\.1:\" is not http\(s\)://HOST\[:PORT\] with no path" \
	$SPOTDECK --headless --job "$T/awse.json" --run-dir "$T/r2"
[ ! -e "$T/r2" ] || fail "a bad aws setting left $T/r2"
printf '{"model":"mlp","provider":{"name":"sim","hazard_scale":2,"zones":["us-east1-c"]}}' >"$T/simset.json"
expect_error "a setting sim does not have" \
	"simset\.json: provider\.zones: provider 'sim' has no settings of its own" \
	$SPOTDECK --headless --job "$T/simset.json" --run-dir "$T/r2"
[ ! -e "$T/r2" ] || fail "a bad provider setting left $T/r2"

# The ssh provider: its settings, then its hosts file (spotdeck-hosts(5)),
# refused before anything starts.
printf '{"model":"mlp","workers":0,"provider":{"name":"ssh"}}' >"$T/ssh0.json"
expect_error "ssh without a hosts file" "ssh0\.json: provider\.hosts: missing \(the hosts file, spotdeck-hosts\(5\)\)" \
	$SPOTDECK --headless --job "$T/ssh0.json" --run-dir "$T/r2"
printf '{"model":"mlp","workers":0,"provider":{"name":"ssh","hosts":"h","host_key_checking":"maybe"}}' >"$T/ssh1.json"
expect_error "ssh host_key_checking" "ssh1\.json: provider\.host_key_checking: expected \"accept-new\", \"yes\" or \"no\"" \
	$SPOTDECK --headless --job "$T/ssh1.json" --run-dir "$T/r2"
printf '{"model":"mlp","workers":0,"provider":{"name":"ssh","hosts":"h","cooldown_s":0}}' >"$T/ssh3.json"
expect_error "ssh cooldown_s" "ssh3\.json: provider\.cooldown_s: expected seconds from 1 to 960, got 0$" \
	$SPOTDECK --headless --job "$T/ssh3.json" --run-dir "$T/r2"
printf 'gpu1.example gpu=cpu market=spot\ngpu2.example gpu=cpu market=spot port=70000\n' >"$T/hosts"
printf '{"model":"mlp","workers":0,"provider":{"name":"ssh","hosts":"%s"},"cluster":["ssh/gpu1.example"]}' "$T/hosts" >"$T/ssh2.json"
expect_error "a bad port in the hosts file" "hosts:2: port: \"70000\" is not a port number \(1\.\.65535\)" \
	$SPOTDECK --headless --job "$T/ssh2.json" --run-dir "$T/r2"
# A hosts file written on Windows (CRLF): read as without the CRs, so the
# error is the port's, on line 2, and names no "\r".
printf 'gpu1.example gpu=cpu market=spot\r\ngpu2.example gpu=cpu market=spot port=70000\r\n' >"$T/hosts"
expect_error "a hosts file with CRLF line ends" "hosts:2: port: \"70000\" is not a port number \(1\.\.65535\)$" \
	$SPOTDECK --headless --job "$T/ssh2.json" --run-dir "$T/r2"
printf 'gpu1.example gpu=cpu market=spot identity=%s/no-such-key\n' "$T" >"$T/hosts"
expect_error "an unreadable identity file" "hosts:1: identity: .*no-such-key.*No such file or directory" \
	$SPOTDECK --headless --job "$T/ssh2.json" --run-dir "$T/r2"
# Hosts told to dial a controller on loopback themselves (--advertise
# given: the direct link): refused before anything connects.  Without
# --advertise the workers' links come through ssh, and loopback serves.
printf 'gpu1.example gpu=cpu market=spot\n' >"$T/hosts"
expect_error "hosts but a loopback controller advertised" \
	"hosts:1: host gpu1\.example cannot reach the controller at --advertise 127\.0\.0\.1:7000 \(loopback\): give an address the hosts reach, or leave --advertise out to carry the workers' links over ssh" \
	$SPOTDECK --headless --job "$T/ssh2.json" --run-dir "$T/r2" --advertise 127.0.0.1:7000
expect_error "hosts, a wildcard, loopback advertised" "cannot reach the controller at --advertise 127\.0\.0\.1:7000 \(loopback\)" \
	$SPOTDECK --headless --job "$T/ssh2.json" --run-dir "$T/r2" --listen 0.0.0.0:0 --advertise 127.0.0.1:7000
EXPECT_RC=2 expect_error "a wildcard advertised" "^spotdeck: --advertise: 0\.0\.0\.0 is the wildcard address, which no worker can dial" \
	$SPOTDECK --headless --job "$T/ssh2.json" --run-dir "$T/r2" --listen 0.0.0.0:0 --advertise 0.0.0.0:7000
EXPECT_RC=2 expect_error "an IPv6 wildcard advertised" "^spotdeck: --advertise: :: is the wildcard address, which no worker can dial" \
	$SPOTDECK --headless --job "$T/ssh2.json" --run-dir "$T/r2" --listen '[::]:0' --advertise '[::]:7000'
# Local workers beside hosts (the default "workers": 2): they could not
# reach the hosts (their collectives listen on loopback).
printf '{"model":"mlp","provider":{"name":"ssh","hosts":"%s"}}' "$T/hosts" >"$T/ssh4.json"
expect_error "local workers beside hosts" \
	"^spotdeck: job: workers: 2: a local worker cannot train with ssh's hosts \(its collectives listen on loopback, which the hosts cannot reach\): set \"workers\": 0" \
	$SPOTDECK --headless --job "$T/ssh4.json" --run-dir "$T/r2" --listen 0.0.0.0:0 --advertise 198.18.0.1:7000
# The same with the links through ssh (no --advertise), the controller on
# loopback: that says nothing of where the hosts are.
expect_error "local workers beside hosts linked through ssh" \
	"^spotdeck: job: workers: 2: a local worker cannot train with ssh's hosts \(its collectives listen on loopback, which the hosts cannot reach\): set \"workers\": 0" \
	$SPOTDECK --headless --job "$T/ssh4.json" --run-dir "$T/r2"
[ ! -e "$T/r2" ] || fail "a bad hosts file left $T/r2"

# An offer the catalog lacks: refused before any server or process starts.
printf '{"model":"mlp","workers":2,"cluster":["local","gce/us-east1-c/k80/spot","gce/nowhere/k80/spot"]}' >"$T/cluster.json"
# The worker program is a wrapper that notes every start in $T/starts
# before it runs the real one: counting spotdeck-worker processes would
# count those of other tests running beside this one.
printf '#!/bin/sh\necho "$$ $*" >>"%s/starts"\nexec "%s" "$@"\n' "$T" "$top_builddir/spotdeck-worker" >"$T/noteworker"
chmod +x "$T/noteworker"
$SPOTDECK --headless --job "$T/cluster.json" --run-dir "$T/r3" --worker "$T/noteworker" >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" -eq 1 ] || fail "unknown cluster offer: exit status $rc"
# The refusal names the provider, the catalog and the offers most like
# the one asked for (same provider, GPU and kind first).
grep -Eq "cluster\.json: cluster\[2\]: \"gce/nowhere/k80/spot\" is not an offer of the sim provider \(.*gce-2019\.json: 24 offers; the most alike: gce/[a-z0-9-]+/k80/spot, gce/[a-z0-9-]+/k80/spot, gce/[a-z0-9-]+/k80/spot\)$" "$T/err" ||
	{ cat "$T/err"; fail "unknown cluster offer: message"; }
! grep -q '"type":"acquired"' "$T/out" || fail "a server was acquired before the cluster was checked"
[ ! -s "$T/out" ] || fail "a run was journaled before the cluster was checked: $(head -c 300 "$T/out")"
[ ! -e "$T/r3" ] || fail "a failed start left $T/r3"
[ ! -e "$T/starts" ] || fail "a failed start started workers: $(cat "$T/starts")"
ok "unknown cluster offer: $(cat "$T/err")"

# A bad catalog fails the controller's create after its libuv handles
# opened; they must close before the memory goes (freed at once, libuv's
# uv__finish_close aborted when spotdeck ran the loop after: exit 134).
printf '{"offers":[]}' >"$T/catalog.json"
expect_error "bad catalog" 'catalog\.json: missing "format"' \
	$SPOTDECK --headless --catalog "$T/catalog.json" --run-dir "$T/r4"
[ ! -e "$T/r4" ] || fail "a bad catalog left $T/r4"

# A directory that holds a run is refused and left byte for byte as it was.
mkdir -p "$T/old/checkpoints"
printf '{"type":"run_start"}\n' >"$T/old/journal.jsonl"
printf '{"model":"cnn"}\n' >"$T/old/job.json"
sum=$(cat "$T/old/journal.jsonl" "$T/old/job.json" | cksum)
expect_error "run directory in use" "--run-dir .*old: holds a run already.*--resume" \
	$SPOTDECK --headless --workers 1 --run-dir "$T/old"
[ "$(cat "$T/old/journal.jsonl" "$T/old/job.json" | cksum)" = "$sum" ] || fail "the earlier run's files changed"
[ "$(ls "$T/old")" = "$(printf 'checkpoints\njob.json\njournal.jsonl')" ] || fail "files added to the earlier run: $(ls "$T/old")"

# --run-dir naming a file.
printf 'not a directory\n' >"$T/afile"
expect_error "--run-dir naming a file" "afile: not a directory" \
	$SPOTDECK --headless --workers 1 --run-dir "$T/afile"
[ "$(cat "$T/afile")" = "not a directory" ] || fail "the file given as --run-dir changed"

# --resume of a directory that holds a job but never held a run.
mkdir -p "$T/notrun"
printf '{"model":"mlp","dataset":"synthetic","workers":0}\n' >"$T/notrun/job.json"
expect_error "--resume of a directory with no journal" "--resume .*notrun: not a spotdeck run directory \(no journal\.jsonl" \
	$SPOTDECK --headless --resume "$T/notrun"
[ "$(ls "$T/notrun")" = "job.json" ] || fail "files added to a directory that is not a run: $(ls "$T/notrun")"

# --resume of a run that finished: refused at once, naming the step it was
# done at and how to get the model out (it used to start workers that had no
# step left to take and waited for ever).
printf '{"model":"mlp","dataset":"synthetic","synthetic_samples":256,"synthetic_c":1,"synthetic_h":8,"synthetic_w":8,"epochs":1,"global_batch":64,"workers":1}\n' >"$T/tiny.json"
timeout $((20 * ${SD_TIMEOUT_SCALE:-3})) $SPOTDECK --headless --job "$T/tiny.json" --run-dir "$T/finished" </dev/null >"$T/out" 2>"$T/err" ||
	{ cat "$T/err" >&2; fail "the tiny run to resume did not finish"; }
grep -q '"type":"done".*"steps":4,' "$T/finished/journal.jsonl" || fail "the tiny run has no done event at step 4"
sum=$(cat "$T/finished/journal.jsonl" | cksum)
expect_error "--resume of a finished run" \
	"^spotdeck: --resume .*finished: the run finished \(done at step 4, test accuracy 0\.[0-9]{4}\): nothing is left to train; spotdeck export .*finished --onnx OUT\.onnx gets the model out$" \
	timeout $((10 * ${SD_TIMEOUT_SCALE:-3})) $SPOTDECK --headless --resume "$T/finished"
[ "$(cat "$T/finished/journal.jsonl" | cksum)" = "$sum" ] || fail "the refused resume wrote to the finished run's journal"

# --resume of a run whose kept listening address (listen.json) is bad:
# refused, naming the file and field; the run's files stay as they were.
mkdir -p "$T/kept/checkpoints"
printf '{"type":"run_start"}\n' >"$T/kept/journal.jsonl"
printf '{"model":"mlp","dataset":"synthetic","workers":0}\n' >"$T/kept/job.json"
printf '{"listen_addr": "198.18.0.1", "listen_port": 70000}\n' >"$T/kept/listen.json"
sum=$(cat "$T/kept/journal.jsonl" "$T/kept/job.json" "$T/kept/listen.json" | cksum)
expect_error "--resume with a bad listen.json" "kept/listen\.json: listen_port: expected a port from 0 to 65535" \
	$SPOTDECK --headless --resume "$T/kept"
[ "$(cat "$T/kept/journal.jsonl" "$T/kept/job.json" "$T/kept/listen.json" | cksum)" = "$sum" ] ||
	fail "the refused resume changed the run's files"

EXPECT_RC=2 expect_error "bad --workers" "--workers: expected an integer" \
	$SPOTDECK --headless --workers many
EXPECT_RC=2 expect_error "bad --alert" "--alert: expected bell, flash or none, got 'loud'" \
	$SPOTDECK --alert loud
EXPECT_RC=2 expect_error "bad --orphans" "--orphans: expected adopt, delete, keep or ask, got 'maybe'" \
	$SPOTDECK --headless --orphans maybe
printf '{"model":"mlp","workers":0,"provider":{"name":"gce","project":"p1","zones":["us-central1-a"],"orphans":"maybe"}}' \
	>"$T/orphans.json"
expect_error "bad provider.orphans" "orphans\.json: provider\.orphans: expected \"delete\", \"keep\", \"adopt\" or \"ask\"" \
	$SPOTDECK --headless --job "$T/orphans.json" --run-dir "$T/r7"
[ ! -e "$T/r7" ] || fail "the refused start left $T/r7"
EXPECT_RC=2 expect_error "--resume with --run-dir" "--resume takes the job" \
	$SPOTDECK --headless --resume "$T/old" --run-dir "$T/x"

# A worker program that cannot start: the run ends with the worker's own
# last words instead of waiting forever, and leaves no directory.
printf '#!/bin/sh\necho "worker: cannot load libfoo.so.1" >&2\nexit 3\n' >"$T/badworker"
chmod +x "$T/badworker"
expect_error "worker that cannot start" \
	"every worker exited before connecting; the last, s[0-9]+, with status 3: worker: cannot load libfoo\.so\.1" \
	timeout $((60 * ${SD_TIMEOUT_SCALE:-3})) $SPOTDECK --headless --workers 2 --worker "$T/badworker" --run-dir "$T/r6"
[ ! -e "$T/r6" ] || fail "a run that never trained left $T/r6"

# A worker that cannot be started at all (the ssh provider's ssh program
# missing): the same end, naming the last server and why, once every
# server of the job has been tried; nothing reaches the hosts (no ssh runs).
printf 'root@127.0.0.1 name=h1 gpu=cpu market=spot worker=/bin/true\nroot@127.0.0.2 name=h2 gpu=cpu market=spot worker=/bin/true\n' >"$T/hosts"
printf '{"model":"mlp","workers":0,"cluster":["ssh/h1","ssh/h2"],"provider":{"name":"ssh","hosts":"%s/hosts","ssh":"%s/no-such-ssh"}}' \
	"$T" "$T" >"$T/nossh.json"
expect_error "ssh program missing" \
	"no worker could be started; the last, s2: $T/no-such-ssh: cannot start: no such file or directory" \
	timeout $((60 * ${SD_TIMEOUT_SCALE:-3})) $SPOTDECK --headless --job "$T/nossh.json" --run-dir "$T/r7"
[ ! -e "$T/r7" ] || fail "a run that never trained left $T/r7"

# A job the workers cannot load (its data directory is missing): the same.
printf '{"model":"mlp","data_dir":"%s/nodata"}' "$T" >"$T/nodata.json"
expect_error "job data directory missing" "nodata: no such directory.*data_dir in the job file" \
	timeout $((60 * ${SD_TIMEOUT_SCALE:-3})) $SPOTDECK --headless --job "$T/nodata.json" --run-dir "$T/r7"
[ ! -e "$T/r7" ] || fail "a job that never loaded left $T/r7"
# The same, relative, under --detach: said before the run would go to the
# background, with the job's field, and nothing is started.
mkdir "$T/cwd"
printf '{"model":"mlp","dataset":"fashion-mnist","data_dir":"fmnist"}' >"$T/cwd/rel.json"
# (Not in a subshell: a fail there would end only the subshell.)
cd "$T/cwd"
expect_error "a relative data_dir missing under --detach" \
	"^spotdeck: rel\.json: data_dir: /.*/cwd/fmnist: no such directory \(install the Debian package dataset-fashion-mnist" \
	timeout $((60 * ${SD_TIMEOUT_SCALE:-3})) $SPOTDECK --detach --job rel.json --run-dir r8
cd - >/dev/null
[ ! -e "$T/cwd/r8" ] || fail "a detached start refused for its data left $T/cwd/r8"

# One controller per run directory: --resume while the run is live is refused.
printf '{"model":"mlp","epochs":2000,"checkpoint_every":50}' >"$T/long.json"
mkfifo "$T/ctl"
$SPOTDECK --headless --job "$T/long.json" --workers 1 --run-dir "$T/live" <"$T/ctl" >"$T/live.out" 2>&1 &
live=$!
# A failed check below must not leave the live run (and its worker) behind.
trap 'kill -KILL $live 2>/dev/null; tmux_kill 2>/dev/null; rm -rf "$T"' EXIT
SD_EXIT_TRAP=1   # tmux_start keeps it (tmux-lib.sh)
exec 7>"$T/ctl"
i=0
until grep -q '"type":"checkpoint"' "$T/live.out" 2>/dev/null; do
	i=$((i + 1)); [ $i -lt $((600 * ${SD_TIMEOUT_SCALE:-3})) ] || { kill $live; fail "the live run wrote no checkpoint"; }
	sleep 0.1
done
lines=$(wc -l <"$T/live/journal.jsonl")
expect_error "--resume of a live run" "live: in use by another spotdeck \(pid $live\)" \
	$SPOTDECK --headless --resume "$T/live"
kill -0 $live || fail "the live run died"
grep -q '"resume":true' "$T/live/journal.jsonl" && fail "the refused resume wrote to the live journal"
[ "$(wc -l <"$T/live/journal.jsonl")" -ge "$lines" ] || fail "the live journal shrank"
# SIGTERM: journaled as a signal (not as a typed command), then the quit
# path: a checkpoint, the workers stopped, the servers released.
kill -TERM $live
wait $live
rc=$?
exec 7>&-
python3 - "$T/live/journal.jsonl" <<'PY' || fail "SIGTERM was not journaled and handled as a quit"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
i = next(i for i, e in enumerate(ev) if e["type"] == "signal" and e["signal"] == "SIGTERM")
assert not any(e["type"] == "command" and e.get("command") == "quit" for e in ev), "a quit command"
assert any(e["type"] == "checkpoint" for e in ev[i:]), "no checkpoint after the signal"
assert any(e["type"] == "released" for e in ev[i:]), "no server released after the signal"
PY
# The quit path's status: 1, because the job was not done (spotdeck(1),
# "quit"); a death by the signal itself would be 143, a crash 134 or 139.
[ "$rc" -eq 1 ] || { tail -5 "$T/live.out" >&2; fail "SIGTERM: exit status $rc, expected 1 (quit before the job was done)"; }
ok "the live run went on; SIGTERM journaled as a signal, checkpointed and released, exit status 1"

# The same refusal from the cockpit: said on the terminal once curses has
# given it back (the cockpit sends stderr to a log), and no run directory.
. "$top_srcdir/tests/tmux-lib.sh"
if tmux_have; then
	tmux_start 100 30 "env LANG=C.UTF-8 $SPOTDECK --job $T/cluster.json --run-dir $T/r5"
	rc=$(tmux_wait_exit 20)
	[ "$rc" = 1 ] || { cat "$T/screen" >&2; fail "cockpit, unknown cluster offer: exit status $rc"; }
	tmux_expect "cluster[2]: \"gce/nowhere/k80/spot\" is not an offer"
	[ "$(tmux_var '#{alternate_on}')" = 0 ] || fail "cockpit left the alternate screen on"
	[ ! -e "$T/r5" ] || fail "the cockpit's failed start left $T/r5"
	ok "cockpit, unknown cluster offer: the error is on the restored terminal, exit 1, no run directory"
else
	# Everything above passed; this part could not run: say so as a SKIP.
	echo "SKIP: the cockpit case: tmux not installed (Debian package tmux)" >&2
	exit 77
fi
