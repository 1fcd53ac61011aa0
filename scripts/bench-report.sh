#!/usr/bin/env bash
# The comparative benchmark report (issue 11): installs what is missing
# (apt packages, the node peers), builds dlock and the benchmark binaries
# into build/report (Release), then runs scripts/bench_report.py, which
# starts throwaway servers, measures dlock, each backend's ceiling and the
# peers in alternating slices, then the primitives (semaphores, read-write
# locks, elections) beside theirs, and writes docs/benchmarks.md with its
# charts.
#
#   scripts/bench-report.sh                  about 15 minutes; writes docs/
#   scripts/bench-report.sh --quick --out DIR
#                                            about a minute; writes DIR
#   scripts/bench-report.sh --primitives-only
#                                            about 5 minutes: measures the
#                                            primitives' section alone and
#                                            writes it into docs/ beside the
#                                            other sections' records
#
# Other arguments go to bench_report.py (--rounds, --slice, --warmup).
set -euo pipefail
cd "$(dirname "$0")/.."
build=build/report
scripts/install-deps.sh "$build"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
# Only what the report runs: dlock (its `bench` subcommand), the servers and
# the three benchmarks whose --ceiling mode measures ZooKeeper's,
# PostgreSQL's and etcd's ceilings.
# Its output goes to a log in the build directory, whose tail is shown when
# the build fails.
log="$build/bench-report-build.log"
if ! cmake --build "$build" -j"$(nproc)" --target dlock_cli dlock_bench_servers \
    dlock_zookeeper_bench dlock_postgres_bench dlock_etcd_bench >"$log" 2>&1; then
  echo "bench-report.sh: the build failed; the end of $log:" >&2
  tail -n 40 "$log" >&2
  exit 1
fi
# Debian's python: the peers' packages and matplotlib are installed for it,
# not for another python3 on PATH.
exec /usr/bin/python3 scripts/bench_report.py --build "$build" "$@"
