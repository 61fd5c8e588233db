#!/usr/bin/env bash
# Installs the Debian packages lol needs (only those missing). Uses sudo when not root.
set -euo pipefail
PKGS=(build-essential cmake ninja-build pkg-config libtorch-dev libopenblas0-pthread libcli11-dev nlohmann-json3-dev
      libpcre2-dev libicu-dev libgtest-dev libgmock-dev libbenchmark-dev gnuplot-nox libgloo-dev python3
      python3-jinja2  # the oracle of tests/reference/chat_template_reference.py
      clang libclang-rt-dev)  # clang + compiler-rt (ASan, UBSan, libFuzzer): scripts/sanitize.sh
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get install -y --no-install-recommends "${missing[@]}" || {
    $SUDO apt-get update && $SUDO apt-get install -y --no-install-recommends "${missing[@]}"; }
fi
# LibTorch must use OpenBLAS, not the reference BLAS (~20x slower matrix products).
blas=$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 2>/dev/null || true)
case "$blas" in
  *openblas*) ;;
  *) echo "warning: libblas.so.3 -> $blas is not OpenBLAS; run: update-alternatives --config libblas.so.3-x86_64-linux-gnu" >&2 ;;
esac
