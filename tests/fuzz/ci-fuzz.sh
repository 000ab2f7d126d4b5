#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan+UBSan) and fuzzes each for a bounded
# time, starting from the seeds (tests/pcaps/, byte fixtures), the committed
# corpus and the regression inputs. A crash fails the script and leaves the
# input in $build/tests/fuzz/artifacts/<target>/; put it in
# tests/fuzz/regressions/<target>/ once fixed (docs/robustness.md).
# usage: tests/fuzz/ci-fuzz.sh [SECONDS_PER_TARGET [TARGET...]]   (default 60 s, all targets)
#        tests/fuzz/ci-fuzz.sh --build-only [TARGET...]   (.ci/run builds in the background)
#        env FUZZ_BUILD_DIR (default build-fuzz)
set -euo pipefail
cd "$(dirname "$0")/../.."
build_only=0
if [ "${1:-}" = --build-only ]; then build_only=1; shift; set -- 0 "$@"; fi
seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(decode_frame analyzer iwarp file_reader oob dissector_glue)
build=${FUZZ_BUILD_DIR:-build-fuzz}

# Warnings are enforced by the gcc build; clang -Werror would also trip on libibverbs macros.
cmake -S . -B "$build" -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 -DRDMADIAG_FUZZ=ON -DRDMADIAG_WERROR=OFF >/dev/null
cmake --build "$build" -j2 --target "${targets[@]/#/fuzz_}"
[ "$build_only" = 0 ] || exit 0
work="$build/tests/fuzz"
python3 tests/fuzz/make_seeds.py tests/pcaps "$work/seeds"

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
failed=()
for t in "${targets[@]}"; do
  corpus="$work/corpus-$t"      # grows from run to run in the same build directory
  artifacts="$work/artifacts/$t"
  mkdir -p "$corpus" "$artifacts"
  inputs=("$corpus" "$work/seeds/$t")
  for d in "tests/fuzz/corpus/$t" "tests/fuzz/regressions/$t"; do
    [ -d "$d" ] && inputs+=("$d")
  done
  echo "== fuzz_$t: ${seconds} s"
  if "$work/fuzz_$t" -max_total_time="$seconds" -dict=tests/fuzz/rdmadiag.dict -max_len=65536 -timeout=10 \
      -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$artifacts/" "${inputs[@]}" >"$work/fuzz_$t.log" 2>&1; then
    grep -E '^stat::(number_of_executed_units|average_exec_per_sec|new_units_added|peak_rss_mb)' "$work/fuzz_$t.log" || true
    grep -E 'INITED|DONE' "$work/fuzz_$t.log" | tail -n 2
  else
    tail -n 60 "$work/fuzz_$t.log"
    echo "fuzz_$t FAILED: reproducer in $artifacts/ (replay: $work/fuzz_$t FILE)"
    failed+=("$t")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "ci-fuzz: crashes in: ${failed[*]}"
  exit 1
fi
echo "ci-fuzz: ${#targets[@]} targets, ${seconds} s each, no crash"
