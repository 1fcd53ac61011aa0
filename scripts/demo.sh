#!/usr/bin/env bash
# The quick-start demo: installs what is missing, builds, starts a throwaway
# redis-server and has worker processes contend for one lock.
#   scripts/demo.sh [workers] [rounds]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build/demo -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDLOCK_BUILD_TESTS=OFF >/dev/null
cmake --build build/demo -j"$(nproc)" --target dlock_demo >/dev/null
exec build/demo/integration/dlock_demo "${1:-4}" "${2:-100}"
