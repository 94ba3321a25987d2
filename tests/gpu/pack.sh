#!/usr/bin/env bash
# tests/gpu/pack.sh - builds spotdeck (with its CUDA backend) here and packs
# what tests/gpu/run.sh needs on a GPU host that has none of our packages:
# the programs, the CUDA backend plugin, the GPU check driver and every
# shared library they load that is neither part of the C/C++ runtime
# (glibc, libstdc++, libgcc_s: the host's are used) nor NVIDIA's (driver,
# cuDNN, cuBLAS, NCCL: run.sh finds the host's, e.g. a PyTorch venv's).
#
# usage: tests/gpu/pack.sh [--no-build] [BUILD_DIR [BUNDLE_DIR]]
#   BUILD_DIR   a configured build tree with CUDA found (default: the source
#               tree itself, the README's in-tree build)
#   BUNDLE_DIR  where the bundle goes (default: BUILD_DIR/gpu-bundle, which
#               git ignores; replaced if it exists)
#   --no-build  pack what is built, do not run make
# Layout: bin/ (spotdeck, spotdeck-worker, gpu-check, spotdeck-cuda.so, data/),
# lib/ (libraries), lib/fallback/ (this host's libstdc++ and libgcc_s, which
# run.sh uses only if the GPU host's are too old), MANIFEST.
# Ends with the bundle's size and fails if it is over 50 MiB (the device
# tool carries at most 64 MiB, the repository included).
set -euo pipefail
build=1
if [ "${1:-}" = "--no-build" ]; then
	build=0
	shift
fi
src=$(cd "$(dirname "$0")/../.." && pwd)
bdir=$(cd "${1:-$src}" && pwd)
out=${2:-$bdir/gpu-bundle}
die() { echo "pack.sh: $*" >&2; exit 1; }

[ -f "$bdir/Makefile" ] || die "$bdir is not a configured build tree (run ./configure first)"
if grep -q -- '-fsanitize=address' "$bdir/Makefile"; then
	die "$bdir is a sanitizer build; pack a plain one (./configure --enable-werror)"
fi
if [ "$build" = 1 ]; then
	make -C "$bdir" -j"$(nproc)" all >/dev/null || die "make failed in $bdir"
fi
plugin=$bdir/engine/cuda/spotdeck-cuda.so
[ -f "$plugin" ] || die "no $plugin: configure did not find nvcc, cuDNN and cuBLAS (see its summary)"
for f in spotdeck spotdeck-worker tests/gpu/gpu-check; do
	[ -x "$bdir/$f" ] || die "$bdir/$f is not built"
done

rm -rf "$out"
mkdir -p "$out/bin/data" "$out/lib/fallback"
for f in spotdeck spotdeck-worker tests/gpu/gpu-check; do
	strip --strip-debug -o "$out/bin/$(basename "$f")" "$bdir/$f"
done
strip --strip-debug -o "$out/bin/spotdeck-cuda.so" "$plugin"
cp "$src"/data/*.json "$out/bin/data/"

# Which libraries to bring: everything ldd resolves except the C/C++ runtime
# and NVIDIA's own.
system_lib() {
	case "$1" in
	linux-vdso.so*|ld-linux*|libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|\
	libresolv.so*|libutil.so*|libstdc++.so*|libgcc_s.so*) return 0 ;;
	libcuda.so*|libcudart.so*|libcublas*|libcudnn*|libnccl.so*|libnvrtc*|libnvJitLink*) return 0 ;;
	esac
	return 1
}
missing=""
for f in "$out"/bin/*; do
	[ -f "$f" ] || continue
	while read -r name arrow path _; do
		[ "$arrow" = "=>" ] || continue
		system_lib "$name" && continue
		if [ "$path" = "not" ]; then
			missing="$missing $name (for $(basename "$f"))"
			continue
		fi
		[ -f "$out/lib/$name" ] || cp -L "$path" "$out/lib/$name"
	done < <(ldd "$f")
done
[ -z "$missing" ] || die "libraries not found here:$missing"
for l in libstdc++.so.6 libgcc_s.so.1; do
	# awk reads all of ldconfig's output: an early exit would SIGPIPE it.
	p=$(ldconfig -p | awk -v l="$l" '$1 == l && /x86-64/ && !f { print $NF; f = 1 }')
	if [ -n "$p" ]; then
		cp -L "$p" "$out/lib/fallback/$l"
	fi
done
for f in "$out"/lib/*.so* "$out"/lib/fallback/*; do
	strip --strip-unneeded "$f" 2>/dev/null || true
done

{
	echo "spotdeck GPU bundle, made $(date -u +%Y-%m-%dT%H:%MZ) on $(uname -m)"
	echo "source: $(git -C "$src" describe --always --dirty 2>/dev/null || echo unknown)"
	echo "configure: $(sed -n 's/^  \$ \(.*configure.*\)/\1/p' "$bdir/config.log" | head -1)"
	echo "needs: glibc >= $(objdump -T "$out"/bin/* "$out"/lib/*.so* 2>/dev/null |
		grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1)," \
	     "libstdc++ with GLIBCXX_$(objdump -T "$out"/bin/* "$out"/lib/*.so* 2>/dev/null |
		grep -o 'GLIBCXX_[0-9.]*' | sed 's/GLIBCXX_//' | sort -uV | tail -1)" \
	     "(else lib/fallback/)"
	echo "plugin links: $(readelf -d "$out/bin/spotdeck-cuda.so" | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p' | tr '\n' ' ')"
	echo "files:"
	(cd "$out" && find . -type f -printf '%10s %p\n' | sort -k2)
} > "$out/MANIFEST"

# The largest libraries (OpenBLAS and oneDNN: 36 and 40 MiB, a quarter of
# that compressed) travel gzipped, or the bundle would not fit the device
# tool's 64 MiB; run.sh unpacks them before it runs anything (gzip is in
# every base system).
big=""
for f in "$out"/lib/*.so*; do
	[ "$(stat -c %s "$f")" -gt $((4 * 1048576)) ] || continue
	gzip -9 "$f"
	big="$big $(basename "$f")"
done
[ -z "$big" ] || echo "gzipped (run.sh unpacks them):$big" >> "$out/MANIFEST"

bytes=$(du -sb "$out" | cut -f1)
mib=$(( (bytes + 1048575) / 1048576 ))
echo "pack.sh: $out: $mib MiB ($bytes bytes), $(find "$out" -type f | wc -l) files"
[ "$bytes" -le $((50 * 1048576)) ] || die "bundle is $mib MiB, over the 50 MiB budget"
