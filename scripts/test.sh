#!/usr/bin/env bash
# README command 2 (what CI runs): install what is missing, then
#  1. build the whole project (library, CLI, every test binary) with AddressSanitizer +
#     UndefinedBehaviorSanitizer into build-asan/ (GCC, -DLOL_SANITIZE=ON, Release
#     optimisation; LibTorch and the other system libraries stay uninstrumented) and run
#     the test suite on it, all but the references labelled `long` (CMakeLists.txt): a
#     sanitizer report fails the test that triggers it.
#     Each test binary runs as 6 GoogleTest shards (-DLOL_TEST_SHARDS=6: a sanitized
#     process spends ~2.1 s loading LibTorch before its first test), and the CLI tests
#     but test_robustness's and the Python references start the Release `lol` of the
#     same sources, built first into build/ (-DLOL_TEST_LOL; their time is mostly `lol`
#     start-ups and kernels, 2.5x slower under ASan); docs/robustness.md "Inside CI's
#     budget";
#  2. scripts/sanitize.sh: the clang build of the LibTorch-free code and the src/nn
#     kernels, their tests, and short libFuzzer runs of every parser.
# docs/robustness.md "Sanitizers". The demo (README command 1) uses the normal build in build/.
#
# Environment: LOL_SANITIZE=0 runs the suite on the normal Release build (BUILD_DIR,
# default build/) instead of build-asan/; LOL_SKIP_SANITIZE=1 skips step 2;
# LOL_TEST_SHARDS=0 gives build-asan/ one CTest test per GoogleTest test;
# LOL_LONG_TESTS=1 also runs the 19 references labelled `long`; JOBS.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install_deps.sh
if [ "${LOL_SANITIZE:-1}" = 1 ]; then
  . scripts/sanitizer_env.sh
  lsan_probe "${CXX:-c++}"   # before building: test discovery runs the sanitized binaries
  dir=${ASAN_BUILD_DIR:-build-asan}
  release_dir=${BUILD_DIR:-build}
  case $release_dir in /*) ;; *) release_dir=$PWD/$release_dir ;; esac
  release_lol=$release_dir/lol
  BUILD_TARGETS=lol ./scripts/build.sh
  BUILD_DIR=$dir ./scripts/build.sh -DLOL_SANITIZE=ON -DLOL_BUILD_BENCH=OFF \
    -DLOL_TEST_SHARDS="${LOL_TEST_SHARDS:-6}" -DLOL_TEST_LOL="$release_lol"
else
  dir=${BUILD_DIR:-build}
  ./scripts/build.sh
fi
# The `long` references (CMakeLists.txt) only with LOL_LONG_TESTS=1.
skip_long=(-LE long)
[ "${LOL_LONG_TESTS:-0}" = 1 ] && skip_long=()
(cd "$dir" && ctest --output-on-failure -j "${JOBS:-$(nproc)}" --timeout 900 "${skip_long[@]}")
[ "${LOL_SKIP_SANITIZE:-0}" = 1 ] || ./scripts/sanitize.sh
