#!/usr/bin/env bash
# The whole test suite (except the lab tests, which boot VMs, and the heavy
# memory test) in an
# AddressSanitizer + UndefinedBehaviorSanitizer build. Any sanitizer report
# fails the test that triggered it. The fuzz targets are in it too, as their
# plain "replay the seeds and regression inputs" executables.
# usage: tests/sanitize.sh [build|test]   (env: SANITIZE_BUILD_DIR, default build-asan; CXX/CC pick the compiler)
#   build: configure and build only (.ci/run does it in the background); test: run the tests only
set -euo pipefail
cd "$(dirname "$0")/.."
build=${SANITIZE_BUILD_DIR:-build-asan}
stage=${1:-all}
case $stage in all|build|test) ;; *) echo "usage: $0 [build|test]" >&2; exit 2 ;; esac
if [ "$stage" != test ]; then
  # (RDMADIAG_SANITIZE compiles the default RelWithDebInfo at -O1 -g1: CMakeLists.txt)
  cmake -S . -B "$build" -DRDMADIAG_SANITIZE=ON -DRDMADIAG_WERROR=ON
  cmake --build "$build" -j2
fi
[ "$stage" != build ] || exit 0
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:check_initialization_order=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# Several times slower under ASan: -j 3 alone is compared with -j 1 (the plain build compares 2, 3 and 4).
export RDMADIAG_JOBS_COMPARE=${RDMADIAG_JOBS_COMPARE:-3}
# The look-ahead comparison's generated captures: 40,000 packets instead of 120,000.
export RDMADIAG_LOOK_AHEAD_PACKETS=${RDMADIAG_LOOK_AHEAD_PACKETS:-40000}
# heavy: the 2 M QP memory test, which the plain build runs (ASan would only slow it and skew its RSS).
ctest --test-dir "$build" --output-on-failure -LE "^(lab|heavy)$" -j2
