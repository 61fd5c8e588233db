#!/usr/bin/env bash
# README command 2: install what is missing, build, run the whole test suite, then the
# sanitizer pass (scripts/sanitize.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install_deps.sh
./scripts/build.sh
(cd "${BUILD_DIR:-build}" && ctest --output-on-failure -j "${JOBS:-$(nproc)}" --timeout 900)
# ASan+UBSan build of the LibTorch-free libraries, their tests, short fuzz runs
# (docs/robustness.md "Sanitizers"; ~8 min on 2 cores). LOL_SKIP_SANITIZE=1 skips it.
[ "${LOL_SKIP_SANITIZE:-0}" = 1 ] || ./scripts/sanitize.sh
