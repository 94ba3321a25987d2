#!/bin/sh
# The transformer kernels against PyTorch 1.13's autograd: layer norm, GELU
# (exact and tanh) and the fused causal attention, forward and backward, on
# the same random inputs (tests/engine/test-layers-seq-dump writes inputs
# and results, tests/engine/layers_seq_torch.py recomputes them with
# torch and states the tolerance).  SKIPs without torch.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || { echo "SKIP: no /usr/bin/python3" >&2; exit 77; }
"$PY" -c 'import torch, numpy' 2>/dev/null ||
	{ echo "SKIP: /usr/bin/python3 cannot import torch and numpy (Debian: python3-torch)" >&2; exit 77; }
tmpdir
"$top_builddir/tests/engine/test-layers-seq-dump" "$T" 2>"$T/dump.err" ||
	fail "test-layers-seq-dump: $(cat "$T/dump.err")"
"$PY" "$top_srcdir/tests/engine/layers_seq_torch.py" "$T" ||
	fail "layer norm, GELU or causal attention differ from PyTorch's"
ok "layer norm, GELU (erf, tanh) and causal attention, forward and backward, as PyTorch's"
