#!/bin/sh
# Issue 40's resnet32 accuracy soak (make soak, not make check: about 15
# minutes on 2 quiet cores): tests/bench/soak-accuracy trains resnet32 on
# Fashion-MNIST padded to 32x32, 3 epochs, seed 1, batch 128, on the oneDNN
# path once in fp32 and once in bf16, and fails when the two final test
# accuracies are more than 0.5 point apart.  SKIPs (77) where oneDNN has no
# bf16 kernels or the data set is missing (soak-accuracy says which).
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
tmpdir
"$top_builddir/tests/bench/soak-accuracy" --model resnet32 --epochs 3 --threads 2 \
	--precision both --margin 0.5 >"$T/soak.out" 2>"$T/soak.err"
rc=$?
cat "$T/soak.out"
[ $rc -eq 77 ] && { cat "$T/soak.err" >&2; exit 77; }
[ $rc -eq 0 ] || { cat "$T/soak.err" >&2; fail "resnet32 bf16 against fp32: $(tail -n 1 "$T/soak.out")"; }
for p in fp32 bf16; do
	grep -q "\"precision\": \"$p\", .*\"epoch\": 3," "$T/soak.out" || fail "no epoch-3 line in $p"
done
ok "$(tail -n 1 "$T/soak.out" | sed 's/^# //')"
