#!/bin/sh
# The bf16 convolutions on AVX512-BF16 alone, the kernels a CPU without AMX
# (AMD Zen 4, Intel Cooper Lake) gets: oneDNN's ONEDNN_MAX_CPU_ISA caps the
# ISA it dispatches to, so on this machine's AMX the whole of
# tests/engine/test-conv-bf16 (every shape within the bf16 bound, the kept
# inputs, the swapped weight gradient not taken, the training band) runs
# on the jit_bf16:avx512_core_bf16 kernels, whose layouts differ from
# AMX's; then tests/engine/test-resume-bf16 (resumes across precisions,
# and auto choosing fp32 without AMX).  SKIP (77) where the CPU has no
# AVX512-BF16 (test-conv-bf16 itself skips where oneDNN has no bf16
# kernels at all).
grep -qw avx512_bf16 /proc/cpuinfo || {
	echo "SKIP: this CPU has no AVX512-BF16 (flags in /proc/cpuinfo)" >&2
	exit 77
}
ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16 DNNL_MAX_CPU_ISA=AVX512_CORE_BF16
export ONEDNN_MAX_CPU_ISA DNNL_MAX_CPU_ISA
b="${top_builddir:-$(dirname "$0")/../..}/tests/engine"
"$b/test-conv-bf16" --expect-isa AVX512-BF16 || exit 1
# And there, auto picks fp32 (oneDNN's AVX512-BF16 kernels are slower than
# its fp32 ones), while an explicit bf16 trains and resumes in bf16.
exec "$b/test-resume-bf16"
