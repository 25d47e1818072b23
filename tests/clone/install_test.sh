#!/usr/bin/env bash
# Install: `cmake --install` into a fresh prefix, and the CPack .deb unpacked into another (no
# chroot needed: dpkg -x puts the package's files under a directory), each with `pentamesh plan`
# and `--version` run from the installed path and the installed configs and corpus present; the
# .deb's Depends (from dpkg-shlibdeps) name the runtime libraries the binary links.
# Usage: install_test.sh BUILD_DIR
set -euo pipefail
build=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

check_prefix() {  # check_prefix PREFIX: the installed tree works
  local p=$1
  [ -x "$p/bin/pentamesh" ] || fail "$p/bin/pentamesh missing"
  for f in share/pentamesh/configs/tiny-dense.toml share/pentamesh/configs/presets/models/llama3-8b.toml \
           share/pentamesh/data/finance_corpus.txt.xz share/pentamesh/data/README.md \
           share/doc/pentamesh/README.md share/doc/pentamesh/COST_MODEL.md; do
    [ -f "$p/$f" ] || fail "$p/$f missing"
  done
  (cd "$work" && "$p/bin/pentamesh" --version) | grep -E '^pentamesh [0-9]+\.[0-9]+\.[0-9]+ \(git ' \
    || fail "--version"
  out=$(cd "$work" && "$p/bin/pentamesh" plan --model llama3-8b --cluster h100-sxm --gpus 64 \
        --train pretrain-4k --top 1) || fail "plan exited non-zero: $out"
  grep -q '^best: ' <<<"$out" || fail "plan printed no best layout: $out"
  echo "$p: $(head -n 1 <<<"$out" | cut -c1-100)"
}

cmake --install "$build" --prefix "$work/prefix" >/dev/null
check_prefix "$work/prefix"

rm -rf "$build/package"
cpack --config "$build/CPackConfig.cmake" >"$work/cpack.log" 2>&1 || { cat "$work/cpack.log"; fail "cpack"; }
deb=$(ls "$build"/package/pentamesh_*.deb)
depends=$(dpkg-deb -f "$deb" Depends)
echo "$(basename "$deb"): Depends: $depends"
for lib in libopenblas libopenmpi libsentencepiece libfmt liblzma openmpi-bin; do
  grep -q "$lib" <<<"$depends" || fail "Depends lacks $lib"
done
dpkg -x "$deb" "$work/deb"
check_prefix "$work/deb/usr"
echo "PASS: installed by cmake --install and from $(basename "$deb")"
