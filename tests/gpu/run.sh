#!/usr/bin/env bash
# tests/gpu/run.sh - the CUDA backend's checks on a GPU host, from a copy of
# the repository and a bundle made by tests/gpu/pack.sh (programs + the
# libraries the host may lack).  Run from the repository root:
#
#     tests/gpu/run.sh BUNDLE
#
# Checks: every layer forward and backward against the CPU reference; 20-step
# loss trajectories of cnn and resnet32 against the CPU (tight for the first
# steps, then against the drift of CPU runs nudged by 1 ulp); determinism (in one
# process and across two); NCCL at world size 1 (and N with N GPUs); an
# elastic run of 2 workers on one GPU with one SIGKILLed; throughput of
# resnet32 (batch 128) and cnn (batch 64) against PyTorch on the same GPU and
# precision; and a model from a file: examples/cifar-resnet18's ResNet-18
# exported to ONNX (by this host's PyTorch), its trajectory on the GPU
# against the CPU executor and its throughput against PyTorch training the
# same network; language models (GPTs exported here): every op's forward
# and backward against the CPU executor, a small char-GPT's trajectory, and
# GPT-2 small's tokens/s against PyTorch in fp32 and TF32.  Prints "N passed, N failed" and exits non-zero on any failure;
# exits 77 with a SKIP line when there is no NVIDIA GPU.  The whole log goes
# to $OUT/gpu-run.log when OUT is set (the device tool's folder), else to
# BUNDLE/gpu-run.log.  Each check has its own time limit; all of them
# together stay under 10 minutes.
#
# Environment: SD_GPU_RUN_FAKE=DIR runs the same script without a GPU against
# a stand-in driver and plugin from DIR (tests/engine/test-gpu-run.sh, make check);
# SD_GPU_QUICK=1 makes the runs short (same checks, fewer steps);
# SD_GPU_ONLY=WORD runs only the checks whose name holds WORD (gpt: the
# language-model section, for a session short of device time);
# SD_PYTHON picks the Python (default python3, the one with torch on the GPU
# host).
set -u
if [ $# -ne 1 ] || [ ! -d "$1" ]; then
	echo "usage: tests/gpu/run.sh BUNDLE   (BUNDLE: the folder tests/gpu/pack.sh made)" >&2
	exit 2
fi
repo=$(cd "$(dirname "$0")/../.." && pwd)
B=$(cd "$1" && pwd)
fake=${SD_GPU_RUN_FAKE:-}
quick=${SD_GPU_QUICK:-0}
only=${SD_GPU_ONLY:-}
py=${SD_PYTHON:-python3}
log=${OUT:-$B}/gpu-run.log
mkdir -p "$(dirname "$log")"
: > "$log"
exec > >(tee -a "$log") 2>&1
teepid=$!
echo "run.sh expects: an NVIDIA GPU with its driver (>= 580 for CUDA 13), cuDNN 9, cuBLAS 13" \
     "and NCCL 2 libraries (system, /usr/local/cuda or a Python venv's nvidia/* wheels)," \
     "glibc >= 2.34, bash, python3 (with torch for the PyTorch peer); no network"
start=$SECONDS
budget=570          # seconds for everything; the device tool allows 600
pass=0; fail=0; skip=0
results=()

note() { echo "run.sh: $*"; }
# Ends the script with status $1 once tee has written everything to the log.
leave() {
	exec 1>&- 2>&-
	wait "$teepid" 2>/dev/null
	exit "$1"
}
finish() {
	echo
	echo "== summary ($((SECONDS - start)) s)"
	for r in "${results[@]}"; do echo "  $r"; done
	[ "$skip" -gt 0 ] && echo "($skip skipped)"
	note "log: $log"
	echo "$pass passed, $fail failed"
	[ "$fail" -eq 0 ] && leave 0
	leave 1
}

for f in bin/spotdeck bin/spotdeck-worker bin/gpu-check bin/spotdeck-cuda.so; do
	[ -e "$B/$f" ] || { note "FAIL: $B/$f missing: not a tests/gpu/pack.sh bundle"; fail=1; finish; }
done
[ -f "$B/MANIFEST" ] && sed -n '1,4p' "$B/MANIFEST"

# ---- the driver and the libraries --------------------------------------------

# Directories holding a file named $1, from the candidates in $cands (first
# match per directory, in order), without descending into /proc and the like.
cands=()
find_lib() {
	local name=$1 d hit
	for d in "${cands[@]}"; do
		[ -d "$d" ] || continue
		hit=$(find "$d" -maxdepth 4 -name "$name" \( -type f -o -type l \) -print -quit 2>/dev/null)
		if [ -n "$hit" ]; then
			dirname "$hit"
			return 0
		fi
	done
	return 1
}
# The dynamic loader's own view (ldconfig cache), if it knows $1.
ld_knows() { ldconfig -p 2>/dev/null | grep -q "^[[:space:]]*$1 "; }

libpath=""
add_dir() { case ":$libpath:" in *":$1:"*) ;; *) libpath=${libpath:+$libpath:}$1 ;; esac; }

if [ -n "$fake" ]; then
	note "SELF-TEST without a GPU: stand-in driver and plugin from $fake (not a GPU result)"
	add_dir "$fake"
	export SPOTDECK_CUDA_PLUGIN=$fake/spotdeck-cuda.so
else
	# The driver: libcuda.so.1 where the loader or a driver mount has it.
	cands=(/usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu /usr/lib64
	       /usr/lib /lib/x86_64-linux-gnu /usr/lib/wsl/lib)
	if ! ld_knows libcuda.so.1; then
		d=$(find_lib libcuda.so.1) || {
			echo "SKIP: no NVIDIA GPU here: no driver library libcuda.so.1" \
			     "(ldconfig, /usr/local/nvidia, /usr/lib*)"
			leave 77
		}
		add_dir "$d"
	fi
	if command -v nvidia-smi >/dev/null 2>&1; then
		nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.sm,clocks.max.sm \
		           --format=csv,noheader 2>&1 | sed 's/^/  gpu: /'
	fi
	# cuDNN, cuBLAS, NCCL (and NVRTC, which cuDNN may load): the system's,
	# /usr/local/cuda's, or any Python environment's NVIDIA wheels.
	cands=(/usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib)
	for p in "$py" python3 /usr/bin/python3 /opt/*/.venv/bin/python3 /opt/*/bin/python3; do
		command -v "$p" >/dev/null 2>&1 || continue
		while read -r sp; do
			[ -d "$sp/nvidia" ] && cands+=("$sp/nvidia")
			[ -d "$sp/torch/lib" ] && cands+=("$sp/torch/lib")
		done < <("$p" -c 'import site, sys
for p in site.getsitepackages() + [site.getusersitepackages()] + sys.path: print(p)' 2>/dev/null)
	done
	cands+=(/usr/lib/x86_64-linux-gnu /usr/lib64 /opt /usr/local)
	for lib in libcudnn.so.9 libcublas.so.13 libcublasLt.so.13 libnccl.so.2 \
	           libnvrtc.so.13 libnvJitLink.so.13; do
		if d=$(find_lib "$lib"); then
			add_dir "$d"
			note "$lib: $d"
		elif ld_knows "$lib"; then
			note "$lib: known to the loader"
		else
			case $lib in
			libnvrtc*|libnvJitLink*) note "$lib: not found (optional: some cuDNN engines need it)" ;;
			*) note "FAIL: $lib not found (looked in ${cands[*]})"; fail=$((fail + 1))
			   results+=("FAIL libraries: $lib not found") ;;
			esac
		fi
	done
	[ "$fail" -eq 0 ] || finish
	export SPOTDECK_CUDA_PLUGIN=$B/bin/spotdeck-cuda.so
fi
# pack.sh gzips the largest libraries (OpenBLAS, oneDNN) to fit the device
# tool's 64 MiB: unpack them beside the others when the bundle is writable,
# else into a temporary folder put first on the path.
libdir=$B/lib
unz=$B/lib
if [ ! -w "$B/lib" ]; then
	unz=$(mktemp -d "${TMPDIR:-/tmp}/spotdeck-lib.XXXXXX")
	libdir=$unz:$B/lib
fi
for g in "$B"/lib/*.so*.gz; do
	[ -e "$g" ] || continue
	n=$(basename "$g" .gz)
	[ -f "$unz/$n" ] && [ "$unz/$n" -nt "$g" ] && continue
	if ! gzip -dc "$g" > "$unz/$n.part" || ! mv "$unz/$n.part" "$unz/$n"; then
		note "FAIL: cannot unpack $g into $unz"
		fail=1; results+=("FAIL libraries: cannot unpack $n")
		finish
	fi
done
# The host's own library path last: a driver found only through it stays found.
child_ld=$libdir${libpath:+:$libpath}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# Our programs load with the bundle's libraries first; if the host's C++
# runtime is older than the one they were built with, use the bundle's.
if ! out=$(LD_LIBRARY_PATH=$child_ld "$B/bin/spotdeck-worker" --version 2>&1); then
	if LD_LIBRARY_PATH=$B/lib/fallback:$child_ld "$B/bin/spotdeck-worker" --version >/dev/null 2>&1; then
		note "this host's libstdc++ is too old ($out); using the bundle's"
		child_ld=$B/lib/fallback:$child_ld
	else
		note "FAIL: the bundle's programs do not load here: $out"
		fail=1; results+=("FAIL load: $out")
		finish
	fi
fi
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)}
unset SPOTDECK_BACKEND SPOTDECK_CUDA_DEVICE SPOTDECK_CUDA_CONV_ALGO SPOTDECK_CUDA_TF32 SPOTDECK_CUDA_GRAPHS
sd() { LD_LIBRARY_PATH=$child_ld "$@"; }

# ---- checks ----------------------------------------------------------------

tmp=$(mktemp -d "${TMPDIR:-/tmp}/spotdeck-gpu.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# check NAME LIMIT_S CMD...: runs CMD with a time limit; exit 0 passes, 77
# skips, anything else fails.  Never starts a check the budget cannot hold.
check() {
	local name=$1 limit=$2 rc t0=$SECONDS
	shift 2
	# SD_GPU_ONLY=WORD: only the probe and the checks whose name holds WORD
	# (any case), e.g. SD_GPU_ONLY=gpt for the language-model section alone.
	if [ -n "$only" ] && [ "${name#probe}" = "$name" ] && [[ "${name,,}" != *"${only,,}"* ]]; then
		return
	fi
	local left=$((budget - (SECONDS - start)))
	echo
	echo "== $name"
	if [ "$left" -lt 20 ]; then
		echo "not run: $left s of the time budget left"
		fail=$((fail + 1)); results+=("FAIL $name (no time left)")
		return
	fi
	[ "$limit" -gt "$left" ] && limit=$left
	# timeout runs programs, not functions: a function goes through bash
	# (the functions and variables it uses are exported below).
	if [ "$(type -t "$1")" = function ]; then
		timeout -k 10 "$limit" bash -c '"$@"' check "$@"
	else
		timeout -k 10 "$limit" "$@"
	fi
	rc=$?
	case $rc in
	0) pass=$((pass + 1)); results+=("ok   $name ($((SECONDS - t0)) s)") ;;
	77) skip=$((skip + 1)); results+=("SKIP $name") ;;
	124|137) fail=$((fail + 1)); results+=("FAIL $name (over its $limit s limit)") ;;
	*) fail=$((fail + 1)); results+=("FAIL $name (exit $rc)") ;;
	esac
}

if [ "$quick" = 1 ]; then
	steps=2; tsteps=3; models="cnn resnet20"; esteps=16; qbatch=8; export SD_BATCH=32
else
	steps=20; tsteps=200; models="cnn resnet32"; esteps=2000; qbatch=
fi

export B child_ld tmp repo steps tsteps esteps fake py qbatch
export -f sd
check "probe: device, libraries, plugin" 60 sd "$B/bin/gpu-check" probe
if [ "${results[0]:-}" != "${results[0]#SKIP}" ]; then
	echo "SKIP: no usable CUDA device (see the probe's line above)"
	leave 77
fi
check "layers: forward and backward against the CPU" 120 sd "$B/bin/gpu-check" layers
for m in $models; do
	check "trajectory: $m, $steps steps, GPU against CPU" 150 sd "$B/bin/gpu-check" trajectory "$m" "$steps" $qbatch
done
# AdamW after clip_grad_norm: the update and the norm are the CPU's bits
# (the layers check), so the trajectory drifts only as SGD's does.
check "trajectory: cnn with AdamW + clip_grad_norm, $steps steps, GPU against CPU" 150 \
	sd env SD_GPU_CHECK_ADAMW=1 "$B/bin/gpu-check" trajectory cnn "$steps" $qbatch
for m in $models; do
	check "determinism: $m twice in one process" 90 sd "$B/bin/gpu-check" determinism "$m" "$steps" $qbatch
done
m=${models##* }
across() {
	sd "$B/bin/gpu-check" losses "$m" "$steps" $qbatch > "$tmp/a" &&
	sd "$B/bin/gpu-check" losses "$m" "$steps" $qbatch > "$tmp/b" || return 1
	cat "$tmp/a"
	if cmp -s "$tmp/a" "$tmp/b"; then
		echo "two processes: the same losses and checksum  ok"
	else
		echo "two processes differ:"; cat "$tmp/b"; return 1
	fi
}
export m
export -f across
check "determinism: $m in two processes" 120 across
if [ -n "$fake" ]; then
	check "nccl" 5 sh -c 'echo "stand-in plugin has no NCCL"; exit 77'
else
	check "nccl: all-reduce, broadcast, barrier; peer loss with N GPUs" 120 sd "$B/bin/gpu-check" nccl
fi
elastic() {
	top_builddir=$B/bin SD_CHILD_LD_LIBRARY_PATH=$child_ld SD_STEPS=$esteps \
	SD_EXPECT_BACKEND=cuda "$py" "$repo/tests/gpu/elastic_gpu.py"
}
export -f elastic
check "elastic: 2 workers on one GPU, one SIGKILLed" 240 elastic

# Throughput: spotdeck and PyTorch, the same model, batch, precision and data
# path, on this GPU; the ratio must be >= 1.0 in both the default setting
# (algorithms by heuristics) and the measured one (cudnnFind / benchmark).
peer_dev=cuda
[ -n "$fake" ] && peer_dev=cpu
have_torch=0
"$py" -c 'import torch' 2>/dev/null && have_torch=1
# throughput MODEL BATCH [PEER KEY]: spotdeck's MODEL (a built-in name or an
# ONNX file) against torch_peer.py's PEER (default MODEL; $peer_args are
# passed on), results kept under KEY (default MODEL).
throughput() {
	local model=$1 batch=$2 peer=${3:-$1} key=${4:-$1}
	sd "$B/bin/gpu-check" throughput "$model" "$batch" "$tsteps" > "$tmp/sd-$key" || return 1
	SPOTDECK_CUDA_CONV_ALGO=find sd "$B/bin/gpu-check" throughput "$model" "$batch" "$tsteps" \
		> "$tmp/sdf-$key" || return 1
	cat "$tmp/sd-$key" "$tmp/sdf-$key"
	if [ "$have_torch" = 1 ]; then
		# shellcheck disable=SC2086  # peer_args: words on purpose
		"$py" "$repo/tests/gpu/torch_peer.py" --model "$peer" ${peer_args:-} --batch "$batch" \
			--steps "$tsteps" --warmup "$((tsteps < 20 ? 1 : 20))" --device "$peer_dev" \
			> "$tmp/pt-$key" || return 1
		if [ "$quick" = 1 ]; then
			cp "$tmp/pt-$key" "$tmp/ptb-$key"   # the same code path, once
		else
			# shellcheck disable=SC2086
			"$py" "$repo/tests/gpu/torch_peer.py" --model "$peer" ${peer_args:-} --batch "$batch" \
				--steps "$tsteps" --device "$peer_dev" --benchmark > "$tmp/ptb-$key" || return 1
		fi
		cat "$tmp/pt-$key" "$tmp/ptb-$key"
	fi
	local cmp
	cmp=$(cat <<'PY'
import json, sys
tmp, model, fake, have_torch = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4] == "1"
sd = json.load(open(tmp + "/sd-" + model))
sdf = json.load(open(tmp + "/sdf-" + model))
print("%s batch %d on %s (%s)" % (model, sd["batch"], sd["device"], sd["how"]))
print("  spotdeck, cuDNN heuristics  %9.0f images/s  %7.3f ms/step" % (sd["images_per_sec"], sd["ms_per_step"]))
print("  spotdeck, cuDNN measured    %9.0f images/s  %7.3f ms/step" % (sdf["images_per_sec"], sdf["ms_per_step"]))
gf = sd["images_per_sec"] * sd["flops_per_image"] / 1e12
if not have_torch:
    # No PyTorch: the GPU's float32 peak as the yardstick (H100/H200 SXM
    # datasheet: 67 TFLOP/s FP32 without tensor cores).
    print("  no PyTorch here: %.2f TFLOP/s achieved = %.1f%% of the H200's 67 TFLOP/s FP32 peak"
          % (gf, 100 * gf / 67))
    sys.exit(77)
pt = json.load(open(tmp + "/pt-" + model))
ptb = json.load(open(tmp + "/ptb-" + model))
print("  %s default       %9.0f images/s  %7.3f ms/step" % (pt["engine"], pt["images_per_sec"], pt["ms_per_step"]))
print("  %s cudnn.benchmark %7.0f images/s  %7.3f ms/step" % (pt["engine"], ptb["images_per_sec"], ptb["ms_per_step"]))
r1 = sd["images_per_sec"] / pt["images_per_sec"]
r2 = sdf["images_per_sec"] / ptb["images_per_sec"]
print("  ratio spotdeck / pytorch: %.2fx (heuristics vs default), %.2fx (measured vs benchmark); "
      "%.2f TFLOP/s" % (r1, r2, gf))
if fake:
    print("  (self-test: both ran on the CPU; the ratio is not a result)")
    sys.exit(0)
sys.exit(0 if r1 >= 1.0 and r2 >= 1.0 else 1)
PY
)
	"$py" -c "$cmp" "$tmp" "$key" "$([ -n "$fake" ] && echo 1 || echo 0)" "$have_torch"
}
export peer_dev have_torch quick
export -f throughput
if [ "$quick" = 1 ]; then
	check "throughput: cnn batch 8 against PyTorch" 200 throughput cnn 8
else
	# Steps enough for about a second of each engine's time (tsteps is
	# exported: the check runs in a child shell).
	tsteps=300
	check "throughput: resnet32 batch 128 against PyTorch (fp32)" 200 throughput resnet32 128
	tsteps=1000
	check "throughput: cnn batch 64 against PyTorch (fp32)" 150 throughput cnn 64
fi

# A model from a file: examples/cifar-resnet18's ResNet-18, exported to ONNX
# here (the example script, with this host's PyTorch; a handful of samples,
# since only its model.onnx is used), trained on the GPU against the CPU
# executor on the same synthetic 3x32x32 batches, then its throughput against
# PyTorch training the same network (torch_peer.py --model resnet18).
if [ "$quick" = 1 ]; then
	r18_width=8; r18_batch=8; r18_steps=2; r18_tbatch=8; r18_tsteps=3
else
	r18_width=64; r18_batch=32; r18_steps=5; r18_tbatch=128; r18_tsteps=100
fi
export_r18() {
	if [ "$have_torch" != 1 ]; then
		echo "no PyTorch in $py: the ONNX file cannot be made"
		return 77
	fi
	"$py" "$repo/examples/cifar-resnet18/export.py" --out "$tmp/r18" --width "$r18_width" \
		--train-samples 64 --test-samples 16 --epochs 1 > "$tmp/r18.log" 2>&1 ||
		{ cat "$tmp/r18.log"; return 1; }
	tail -n 1 "$tmp/r18.log"
}
export r18_width
export -f export_r18
check "onnx: examples/cifar-resnet18 exported (width $r18_width)" 120 export_r18
if [ -n "$fake" ]; then
	# The stand-in plugin (tests/gpu/fake/hostdev.h) rebuilds the built-in
	# models by name; it cannot run a graph from a file.
	check "onnx on the device" 5 sh -c 'echo "stand-in plugin runs built-in models only"; exit 77'
elif [ -f "$tmp/r18/model.onnx" ]; then
	check "trajectory: ONNX ResNet-18, $r18_steps steps at batch $r18_batch, GPU against CPU" 240 \
		sd "$B/bin/gpu-check" trajectory "$tmp/r18/model.onnx" "$r18_steps" "$r18_batch"
	tsteps=$r18_tsteps
	peer_args="--width $r18_width"
	export peer_args
	check "throughput: ONNX ResNet-18 batch $r18_tbatch against PyTorch (fp32)" 200 \
		throughput "$tmp/r18/model.onnx" "$r18_tbatch" resnet18 onnx-resnet18
fi
# Language models: GPTs of examples/char-gpt's model.py exported to
# ONNX here (tests/gpu/gpt_peer.py, this host's PyTorch).  (a) every op forward
# and backward: one step on the GPU against the CPU executor, the loss and
# every parameter's gradient, with the fused graph (attention, GELU nodes) and
# the unfused one (SPOTDECK_FUSE=off: BMM, scale, mask, softmax, the GELU
# chains), exact and tanh GELU, with gpt_peer.py's Extra ops after the final
# LayerNorm (trained per-channel and scalar constants, Pow, Sqrt); (b) the small char-GPT (char-gpt's 4 heads,
# 128 channels, block 64, vocabulary 256; 2 layers) 20 SGD steps against the
# CPU's trajectory; (c) GPT-2 small (12 layers, 12 heads, 768 channels, block
# 1024, vocabulary 50,257, random tokens, batch 8) tokens/s against PyTorch
# training the same model on this GPU, strict fp32 then TF32.
if [ "$quick" = 1 ]; then
	gpt_small="--layers 2 --heads 2 --embd 32 --block 16 --vocab 64"
	gpt_char="--layers 1 --heads 4 --embd 128 --block 64 --vocab 256"
	gpt_steps=3; gpt2="--layers 2 --heads 12 --embd 768 --block 1024 --vocab 50257"
	gpt2_batch=2; gpt2_steps=2
else
	gpt_small="--layers 2 --heads 4 --embd 64 --block 32 --vocab 96"
	gpt_char="--layers 2 --heads 4 --embd 128 --block 64 --vocab 256"
	gpt_steps=20; gpt2="--layers 12 --heads 12 --embd 768 --block 1024 --vocab 50257"
	gpt2_batch=8; gpt2_steps=10
fi
gpt2_name="GPT-2 small"
if [ -n "$fake" ]; then
	# Self-test: the stand-in plugin has no language-model entry points, so
	# gpu-check's gpt-* commands run their "device" side on a second CPU copy
	# of the model (SD_GPU_CHECK_HOST_GPT=1), and "GPT-2 small" is tiny.
	export SD_GPU_CHECK_HOST_GPT=1
	gpt2="--layers 1 --heads 2 --embd 32 --block 32 --vocab 128"
	gpt2_name="a tiny GPT (self-test, not GPT-2 small)"
fi
export_gpt() {
	if [ "$have_torch" != 1 ]; then
		echo "no PyTorch in $py: the ONNX files cannot be made"
		return 77
	fi
	# shellcheck disable=SC2086  # the size options: words on purpose
	"$py" "$repo/tests/gpu/gpt_peer.py" export --out "$tmp/gpt-erf.onnx" $gpt_small --gelu erf --extra &&
	"$py" "$repo/tests/gpu/gpt_peer.py" export --out "$tmp/gpt-tanh.onnx" $gpt_small --gelu tanh --extra &&
	"$py" "$repo/tests/gpu/gpt_peer.py" export --out "$tmp/gpt-char.onnx" $gpt_char &&
	"$py" "$repo/tests/gpu/gpt_peer.py" export --out "$tmp/gpt2.onnx" $gpt2 --gelu tanh
}
gpt_throughput() {
	local tf=$1 flag=
	[ "$tf" = tf32 ] && flag=--tf32
	sd env SPOTDECK_CUDA_TF32=$([ "$tf" = tf32 ] && echo 1 || echo 0) "$B/bin/gpu-check" \
		gpt-throughput "$tmp/gpt2.onnx" "$gpt2_batch" "$gpt2_steps" > "$tmp/sd-gpt2-$tf" ||
		{ cat "$tmp/sd-gpt2-$tf"; return 1; }
	cat "$tmp/sd-gpt2-$tf"
	# shellcheck disable=SC2086
	"$py" "$repo/tests/gpu/gpt_peer.py" bench $gpt2 --gelu tanh --batch "$gpt2_batch" \
		--steps "$gpt2_steps" --device "$peer_dev" $flag > "$tmp/pt-gpt2-$tf" || return 1
	cat "$tmp/pt-gpt2-$tf"
	"$py" - "$tmp/sd-gpt2-$tf" "$tmp/pt-gpt2-$tf" "$tf" "$gpt2_name" \
		"$([ -n "$fake" ] && echo 1 || echo 0)" <<'PY'
import json, sys
sd, pt = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
r = sd["tokens_per_sec"] / pt["tokens_per_sec"]
print("%s batch %d block %d on %s, %s: spotdeck %.0f tokens/s (%.1f ms/step, %s), "
      "%s %.0f tokens/s (%.1f ms/step): ratio %.2fx"
      % (sys.argv[4], sd["batch"], sd["block"], sd["device"], sys.argv[3], sd["tokens_per_sec"],
         sd["ms_per_step"], sd["how"], pt["engine"], pt["tokens_per_sec"], pt["ms_per_step"], r))
if sys.argv[5] == "1":
    print("  (self-test: both ran on the CPU; the ratio is not a result)")
    sys.exit(0)
sys.exit(0 if r >= 1.0 else 1)
PY
}
export gpt_small gpt_char gpt2 gpt2_batch gpt2_steps gpt2_name
export -f export_gpt gpt_throughput
check "gpt: GPTs exported to ONNX (small, char-GPT, $gpt2_name)" 150 export_gpt
if [ -f "$tmp/gpt2.onnx" ]; then
	for g in erf tanh; do
		check "gpt ops: $g GELU, fused graph, one step GPU against CPU" 60 \
			sd "$B/bin/gpu-check" gpt-grad "$tmp/gpt-$g.onnx" 4
		check "gpt ops: $g GELU, unfused graph, one step GPU against CPU" 60 \
			sd env SPOTDECK_FUSE=off "$B/bin/gpu-check" gpt-grad "$tmp/gpt-$g.onnx" 4
	done
	check "trajectory: char-GPT, $gpt_steps SGD steps at batch 8, GPU against CPU" 120 \
		sd "$B/bin/gpu-check" gpt-trajectory "$tmp/gpt-char.onnx" "$gpt_steps" 8
	check "throughput: $gpt2_name batch $gpt2_batch against PyTorch (fp32)" 150 gpt_throughput fp32
	check "throughput: $gpt2_name batch $gpt2_batch against PyTorch (TF32)" 120 gpt_throughput tf32
fi
finish
