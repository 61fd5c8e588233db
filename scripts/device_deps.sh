#!/usr/bin/env bash
# Packs, on this Debian machine, what a GPU machine's image may lack for building lol
# (scripts/device_check.sh): the header-only nlohmann-json and CLI11 with their CMake
# package files, PCRE2's header and static library, and GoogleTest's source (built
# there with that machine's compiler). Writes .devdeps/ (ignored by git); carry it to
# the GPU machine with the working tree. Needs scripts/install_deps.sh's packages.
set -euo pipefail
cd "$(dirname "$0")/.."
D=.devdeps
rm -rf "$D"
mkdir -p "$D/prefix/include" "$D/prefix/lib" "$D/prefix/share/cmake"
cp -r /usr/include/nlohmann /usr/include/CLI /usr/include/pcre2.h "$D/prefix/include/"
cp -r /usr/share/cmake/nlohmann_json /usr/share/cmake/CLI11 "$D/prefix/share/cmake/"
cp /usr/lib/x86_64-linux-gnu/libpcre2-8.a "$D/prefix/lib/"
cp -r /usr/src/googletest "$D/googletest"
du -sh "$D"
