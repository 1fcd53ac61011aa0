#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz/ with clang (-DDLOCK_FUZZ=ON:
# libFuzzer, ASan, UBSan; into build/fuzz) and runs each for SECONDS (30 by
# default), side by side, starting from a copy of its seed corpus
# (tests/fuzz/corpus/<target>/). A crash, a sanitizer report, a leak, an
# input that takes over 10 s or 2 GB fails the script, and the input is left
# in build/fuzz/findings/<target>/: add it to the seed corpus under a name
# that says what it was, with the fix (every build replays the corpus as the
# test <target>_corpus). A target whose inputs are text of a grammar gets its
# tokens from tests/fuzz/<target without _fuzz>.dict when there is one.
#
#   scripts/fuzz.sh [SECONDS]
#   scripts/fuzz.sh --build-only     build the targets, run none
set -euo pipefail
cd "$(dirname "$0")/.."
build_only=0
if [ "${1:-}" = --build-only ]; then
  build_only=1
  shift
fi
seconds="${1:-30}"
build=build/fuzz
scripts/install-deps.sh
# -O1, as AddressSanitizer's documentation advises; line tables for reports.
cmake -S . -B "$build" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" -DDLOCK_FUZZ=ON >/dev/null
cmake --build "$build" -j"$(nproc)" --target dlock_fuzz_targets
[ "$build_only" -eq 1 ] && exit 0
targets=("$build"/tests/fuzz/*_fuzz)
if [ ! -x "${targets[0]}" ]; then
  echo "fuzz.sh: no fuzz target was built in $build/tests/fuzz" >&2
  exit 1
fi

# One target: its findings directory, its log; 0 when it found nothing.
fuzz_one() {
  local target name work
  target=$(realpath "$1")
  name=$(basename "$target")
  work="$build/findings/$name"
  rm -rf "$work"
  mkdir -p "$work/corpus"
  cp tests/fuzz/corpus/"$name"/* "$work/corpus/"
  local dict=()
  [ -f "tests/fuzz/${name%_fuzz}.dict" ] && dict=(-dict="$PWD/tests/fuzz/${name%_fuzz}.dict")
  (cd "$work" && "$target" -max_total_time="$seconds" -max_len=16384 -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 "${dict[@]}" corpus >log 2>&1)
}

pids=()
for target in "${targets[@]}"; do
  echo "fuzzing $(basename "$target") for ${seconds}s"
  fuzz_one "$target" &
  pids+=($!)
done
failed=0
for i in "${!targets[@]}"; do
  name=$(basename "${targets[$i]}")
  log="$build/findings/$name/log"
  if wait "${pids[$i]}"; then
    echo "$name: nothing found ($(grep -m1 -o 'stat::number_of_executed_units: [0-9]*' "$log" |
      cut -d' ' -f2) inputs run)"
  else
    failed=1
    echo "$name FOUND A PROBLEM; the end of $log:" >&2
    tail -n 60 "$log" >&2
    echo "the input is in $build/findings/$name/ (crash-*, leak-*, oom-*, timeout-*)" >&2
  fi
done
exit "$failed"
