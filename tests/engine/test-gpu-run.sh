#!/bin/sh
# tests/gpu/pack.sh and tests/gpu/run.sh on a host without a GPU.
#   1. pack.sh bundles the build (under its 50 MiB budget, no library
#      missing, nothing NVIDIA's or glibc's inside);
#   2. run.sh on that bundle, here: exit 77 and one "SKIP: no NVIDIA GPU"
#      line, quickly, with its log where OUT says;
#   3. run.sh against a stand-in driver and plugin that compute on the CPU
#      (tests/gpu/fake/), in quick mode: every check runs its real code path
#      (gpu-check's subcommands, the elastic run with a SIGKILLed worker, the
#      throughput comparison) and passes, and the summary is "N passed, 0
#      failed".  This checks the scripts, the bundle and the device
#      plumbing, not a GPU; the language-model section runs gpu-check's
#      gpt-* commands against a second CPU copy of tiny GPTs where this
#      host's python has torch.
. "$top_srcdir/tests/lib.sh"
tmpdir
if grep -q -- '-fsanitize=address' "$top_builddir/Makefile"; then
	echo "SKIP: sanitizer build: pack.sh bundles plain builds only (the plain build runs this)" >&2
	exit 77
fi
if [ ! -f "$top_builddir/engine/cuda/spotdeck-cuda.so" ]; then
	echo "SKIP: built without CUDA (configure found no nvcc and cuDNN): no plugin to bundle" >&2
	exit 77
fi

"$top_srcdir/tests/gpu/pack.sh" --no-build "$top_builddir" "$T/bundle" > "$T/pack" 2>&1 ||
	{ cat "$T/pack"; fail "pack.sh failed"; }
grep -Eq '^pack.sh: .*: [0-9]+ MiB' "$T/pack" || fail "pack.sh did not say the bundle's size"
for f in bin/spotdeck bin/spotdeck-worker bin/gpu-check bin/spotdeck-cuda.so \
         lib/libopenblas.so.0 lib/libcjson.so.1 lib/libuv.so.1 MANIFEST; do
	[ -e "$T/bundle/$f" ] || [ -e "$T/bundle/$f.gz" ] || fail "bundle lacks $f"
done
# The gzipped libraries, unpacked as run.sh does, for the ldd check below.
mkdir -p "$T/unz"
for g in "$T"/bundle/lib/*.gz; do
	[ -e "$g" ] || continue
	gzip -dc "$g" > "$T/unz/$(basename "$g" .gz)" || fail "cannot unpack $g"
done
for f in "$T"/bundle/lib/*.so*; do
	case $(basename "$f" .gz) in
	libc.so*|libm.so*|libstdc++*|libgcc_s*|libcud*|libcublas*|libnccl*)
		fail "bundle carries $(basename "$f"), which the GPU host provides" ;;
	esac
done
# Every library a bundled program needs resolves from the bundle or is one
# the host provides (C/C++ runtime, NVIDIA's).
for f in "$T"/bundle/bin/*; do
	[ -f "$f" ] || continue
	LD_LIBRARY_PATH=$T/unz:$T/bundle/lib ldd "$f" | grep 'not found' | grep -Ev 'libcu|libnccl' &&
		fail "$(basename "$f") needs a library the bundle lacks"
done
ok "pack.sh: $(tail -1 "$T/pack")"

if ldconfig -p | grep -q 'libcuda.so.1 '; then
	ok "this host has an NVIDIA driver: run.sh's no-GPU SKIP is not checked"
else
	OUT=$T/out1 "$top_srcdir/tests/gpu/run.sh" "$T/bundle" > "$T/run1" 2>&1
	rc=$?
	[ "$rc" -eq 77 ] || { cat "$T/run1"; fail "run.sh without a GPU: exit $rc, expected 77"; }
	grep -q '^SKIP: no NVIDIA GPU' "$T/run1" || { cat "$T/run1"; fail "no SKIP line"; }
	grep -q '^run.sh expects: ' "$T/run1" || fail "run.sh did not say what it expects"
	grep -q '^SKIP: no NVIDIA GPU' "$T/out1/gpu-run.log" || fail "no log in \$OUT"
	ok "run.sh without a GPU: $(grep '^SKIP' "$T/run1")"
fi

py=python3
/usr/bin/python3 -c 'import torch' 2>/dev/null && py=/usr/bin/python3
OUT=$T/out2 SD_GPU_RUN_FAKE=$top_builddir/tests/gpu/fake SD_GPU_QUICK=1 SD_PYTHON=$py \
	"$top_srcdir/tests/gpu/run.sh" "$T/bundle" > "$T/run2" 2>&1
rc=$?
[ "$rc" -eq 0 ] || { cat "$T/run2"; fail "run.sh with the stand-in: exit $rc"; }
last=$(tail -1 "$T/run2")
echo "$last" | grep -Eq '^[0-9]+ passed, 0 failed$' || { cat "$T/run2"; fail "last line: $last"; }
n=$(echo "$last" | cut -d' ' -f1)
# probe, layers, 3 trajectories (one with AdamW), 3 determinism checks, elastic; throughput
# too where this host's python has torch (else it SKIPs, saying so).
[ "$n" -ge 8 ] || { cat "$T/run2"; fail "only $n checks passed"; }
grep -Eq '^  (ok  |SKIP) throughput' "$T/run2" || { cat "$T/run2"; fail "no throughput result"; }
grep -q 'SELF-TEST without a GPU' "$T/run2" || fail "the self-test is not labelled as one"
# The language-model section (GPTs exported by this host's torch, gpu-check's
# gpt-* commands against a second CPU copy): every check of it ran and passed.
if [ "$py" = /usr/bin/python3 ]; then
	for c in 'gpt ops: erf GELU, fused' 'gpt ops: tanh GELU, unfused' 'trajectory: char-GPT' \
	         'throughput: a tiny GPT.*TF32'; do
		grep -Eq "^  ok   $c" "$T/run2" || { cat "$T/run2"; fail "no passed check '$c'"; }
	done
fi
grep -q 'on cuda (NVIDIA FK100 (fake 0))' "$T/run2" || { cat "$T/run2"; fail "elastic workers not on the device"; }
cmp -s "$T/run2" "$T/out2/gpu-run.log" || fail "the log differs from the output"
sed -n '/== summary/,$p' "$T/run2"
ok "run.sh with a stand-in GPU: $last"
