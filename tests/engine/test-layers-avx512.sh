#!/bin/sh
# The AVX-512 row kernels of engine/layers.c (im2col, col2im, 2x2 max pool)
# give the same bits as the portable loops (tests/engine/test-layers --avx512).
# Where the CPU has no AVX-512 both are the portable loops, so the test
# reports SKIP (77) with that reason instead of comparing a path with itself.
exec "${top_builddir:-$(dirname "$0")/../..}/tests/engine/test-layers" --avx512
