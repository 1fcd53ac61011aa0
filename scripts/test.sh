#!/usr/bin/env bash
# Installs what is missing, runs clang's thread-safety analysis over every
# source (scripts/thread_safety.sh; not with --backends), builds, and runs
# every test through ctest. Each test binary starts its own throwaway servers
# (redis-server, ZooKeeper, PostgreSQL) on free loopback ports in temporary
# directories and stops them.
#
#   scripts/test.sh                      release build, all tests
#   scripts/test.sh --sanitizer address  the same under ASan+UBSan
#   scripts/test.sh --sanitizer thread   the same under TSan (see below)
#   scripts/test.sh --backends "memory;redis"   only those backends, no adapters
#   extra arguments after -- go to ctest (e.g. -- -R conformance_redis)
#
# TSan: Debian's Abseil is not built with TSan, so absl::Mutex is invisible to
# it and every field it guards is reported as a race; use ASan, or an Abseil
# built from source with -fsanitize=thread.
set -euo pipefail
cd "$(dirname "$0")/.."

sanitizer=""
backends=""
ctest_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --sanitizer) sanitizer="$2"; shift 2 ;;
    --backends) backends="$2"; shift 2 ;;
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
# of -O2's time (tests build at -Og either way).
build_type=Release
flags=()
if [ -n "$sanitizer" ]; then
  build_type=RelWithDebInfo
  flags=(-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG")
fi
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE="$build_type" -DDLOCK_SANITIZER="$sanitizer" \
  -DDLOCK_BACKENDS="$backends" -DDLOCK_BUILD_ADAPTERS="$adapters" "${flags[@]}" >/dev/null
# clang's thread-safety analysis, before the build so that it fails fast. It
# reads this build's compile_commands.json, which lists every source only
# when every backend and the adapters are configured.
if [ -z "$backends" ]; then
  scripts/thread_safety.sh "$build"
fi
cmake --build "$build" -j"$(nproc)"
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
