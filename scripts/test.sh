#!/usr/bin/env bash
# Installs what is missing, builds with clang (whose thread-safety analysis
# checks every file as it compiles, cmake/DlockHelpers.cmake), and runs every
# test through ctest. Each test binary starts its own throwaway servers
# (redis-server, ZooKeeper, PostgreSQL, etcd) on free loopback ports in
# temporary directories and stops them.
#
#   scripts/test.sh                      release build, all tests
#   scripts/test.sh --sanitizer address  the same under ASan+UBSan
#   scripts/test.sh --sanitizer thread   the same under TSan (see below)
#   scripts/test.sh --backends "memory;redis"   only those backends, no adapters
#   scripts/test.sh --build-only         install and build, run no test
#   extra arguments after -- go to ctest (e.g. -- -R conformance_redis)
#
# The compiler is clang++ unless CXX names another when the build directory
# is first configured; a GCC build gets the analysis from
# scripts/thread_safety.sh instead, run before the build (not with
# --backends, whose compile_commands.json lacks files).
#
# TSan: Debian's Abseil is not built with TSan, so absl::Mutex is invisible to
# it and every field it guards is reported as a race; use ASan, or an Abseil
# built from source with -fsanitize=thread.
set -euo pipefail
cd "$(dirname "$0")/.."

sanitizer=""
backends=""
build_only=0
ctest_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --sanitizer) sanitizer="$2"; shift 2 ;;
    --backends) backends="$2"; shift 2 ;;
    --build-only) build_only=1; shift ;;
    --) shift; ctest_args=("$@"); break ;;
    *) echo "unknown argument: $1 (see the comment at the top of $0)" >&2; exit 2 ;;
  esac
done

build=build/test${sanitizer:+-$sanitizer}${backends:+-some}
scripts/install-deps.sh "$build"

adapters=ON
[ -n "$backends" ] && adapters=OFF
# Debug info only where a sanitizer's report needs it: it slows the build.
# A report needs file and line, which line tables (-g1) give; -O1 is what
# AddressSanitizer's documentation advises, and builds the library in a third
# of -O2's time (tests build at -O0 either way).
build_type=Release
flags=()
if [ -n "$sanitizer" ]; then
  build_type=RelWithDebInfo
  flags=(-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG")
fi
# The compiler of a build directory is chosen once, when it is configured.
compiler=()
[ -f "$build/CMakeCache.txt" ] || compiler=(-DCMAKE_CXX_COMPILER="${CXX:-clang++}")
cmake -S . -B "$build" "${compiler[@]}" -DCMAKE_BUILD_TYPE="$build_type" -DDLOCK_SANITIZER="$sanitizer" \
  -DDLOCK_BACKENDS="$backends" -DDLOCK_BUILD_ADAPTERS="$adapters" "${flags[@]}" >/dev/null
# Not built by clang: the analysis, before the build so that it fails fast.
# It reads this build's compile_commands.json, which lists every source only
# when every backend and the adapters are configured.
if [ -z "$backends" ] &&
  ! grep -q '^DLOCK_THREAD_SAFETY_IN_COMPILE:INTERNAL=ON' "$build/CMakeCache.txt"; then
  scripts/thread_safety.sh "$build"
fi
cmake --build "$build" -j"$(nproc)"
[ "$build_only" -eq 1 ] && exit 0
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
export ASAN_OPTIONS="detect_leaks=1"
export UBSAN_OPTIONS="print_stacktrace=1 halt_on_error=1"
# A test per core. Most only wait on their servers and timers, but some
# bound how late a watchdog round or a takeover may be, and at two per core
# those bounds measured the 2-core machine's load more than dlock (one such
# failure, PostgreSQL session mode's renewals going one round trip per hold,
# was real and is fixed). Arguments after -- may raise it (.ci/run does for
# its ASan pass).
ctest --test-dir "$build" --output-on-failure -j"$(nproc)" "${ctest_args[@]}"
