#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang under ASan+UBSan
# (-DDLOCK_FUZZ=ON, in build/fuzz) and runs each for a bounded time from
# its seed corpus (tests/fuzz/<target>_corpus/, with the tokens of
# tests/fuzz/uri.dict or profile.dict; new inputs go to a
# temporary directory, the repository's corpus is left as it is). A crash,
# a sanitizer report, a leak or a failed check stops with the input saved
# as build/fuzz/<target>-crash-*: add it to the target's unit test.
#
#   scripts/fuzz.sh              every target, 30 s each
#   scripts/fuzz.sh 60 uri_fuzz  one target, 60 s
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-30}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(uri_fuzz connect_fuzz profile_fuzz)

build=build/fuzz
scripts/install-deps.sh
# -O1 with line tables, as AddressSanitizer's documentation advises.
cmake -S . -B "$build" -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
  -DDLOCK_FUZZ=ON -DDLOCK_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" --target "${targets[@]}"

export ASAN_OPTIONS="detect_leaks=1"
export UBSAN_OPTIONS="print_stacktrace=1 halt_on_error=1"
for target in "${targets[@]}"; do
  work=$(mktemp -d)
  log="$build/$target.log"
  dict=tests/fuzz/uri.dict
  [ "$target" = profile_fuzz ] && dict=tests/fuzz/profile.dict
  start=$(date +%s)
  if ! "$build/tests/fuzz/$target" -max_total_time="$seconds" -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 -dict="$dict" \
    -artifact_prefix="$build/$target-" \
    "$work" "tests/fuzz/${target}_corpus" >"$log" 2>&1; then
    tail -n 60 "$log"
    echo "$target FAILED; the input is in $build/$target-*" >&2
    rm -rf "$work"
    exit 1
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  echo "$target: $runs runs in $(( $(date +%s) - start ))s ($rate execs/s)," \
    "corpus $(ls "$work" | wc -l) new + $(ls "tests/fuzz/${target}_corpus" | wc -l) seeds"
  rm -rf "$work"
done
