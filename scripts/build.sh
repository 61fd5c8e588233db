#!/usr/bin/env bash
# Configures and builds lol in Release into ./build (override with BUILD_DIR); everything
# (CLI, tests, benchmarks) unless BUILD_TARGETS names targets (e.g. BUILD_TARGETS=lol).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
# Ninja for new build directories: with the Makefile generator, the precompiled header's
# per-source flags live in one flags.make per target, so adding any .cpp to lol_torch
# rewrites it and recompiles the whole library (~25 min on 2 cores); Ninja only rebuilds
# commands that changed. An existing directory keeps the generator it was made with.
GEN=()
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ] && command -v ninja >/dev/null; then GEN=(-G Ninja); fi
cmake -S . -B "$BUILD_DIR" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
targets=()
for t in ${BUILD_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$BUILD_DIR" -j "$JOBS" "${targets[@]}"
