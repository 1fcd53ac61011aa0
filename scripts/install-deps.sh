#!/usr/bin/env bash
# Installs, on Debian 12, the packages dlock builds and tests with. Asks apt
# only for what is missing; run as root (or through sudo).
#
#   scripts/install-deps.sh               apt packages
#   scripts/install-deps.sh BUILD_DIR     and the benchmarks' node peers
#                                         (npm ci into BUILD_DIR/node_peer)
set -euo pipefail
build_dir="${1:+$(realpath -m "$1")}"
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake pkg-config clang lld clang-format python3
  libabsl-dev libgtest-dev libgmock-dev libbenchmark-dev
  libhiredis-dev libssl-dev openssl redis-server redis-tools
  libzookeeper-mt-dev zookeeper python3-kazoo
  libpq-dev postgresql pgbouncer python3-tooz python3-psycopg2
  etcd-server etcd-client libgrpc++-dev protobuf-compiler-grpc protobuf-compiler
  libprotobuf-dev openssl python3-etcd3 python3-etcd3gw
  python3-redis python3-matplotlib python3-prometheus-client
  libtomlplusplus-dev libcli11-dev nlohmann-json3-dev libcpp-httplib-dev
  zsh groff-base dpkg-dev
  libfaketime tmux curl
  nodejs npm
)

missing=()
for p in "${packages[@]}"; do
  # A node from elsewhere (NodeSource's nodejs bundles npm and conflicts with
  # Debian's npm package) serves as well: ask apt only when the command is
  # missing.
  [ "$p" = nodejs ] && command -v node >/dev/null && continue
  [ "$p" = npm ] && command -v npm >/dev/null && continue
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

# The node peers of dlock_redlock_bench, dlock_etcd_bench and of the
# comparative report (scripts/bench_report.py): the redlock,
# redis-semaphore and etcd3 npm packages and ioredis at the versions
# tests/benchmark/peers/node_peer/package-lock.json pins, installed into the
# build tree (the benchmarks look there). Skipped when that lock file is
# already installed there.
install_node_peer() {
  [ -n "$build_dir" ] || return 0
  local src=tests/benchmark/peers/node_peer dst="$build_dir/node_peer"
  if cmp -s "$src/package-lock.json" "$dst/package-lock.json" &&
    [ -d "$dst/node_modules/redlock" ] && [ -d "$dst/node_modules/ioredis" ] &&
    [ -d "$dst/node_modules/redis-semaphore" ] && [ -d "$dst/node_modules/etcd3" ]; then
    return 0
  fi
  echo "installing the node peers of the benchmarks into $dst"
  mkdir -p "$dst"
  cp "$src/package.json" "$src/package-lock.json" "$dst/"
  (cd "$dst" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
}

if [ ${#missing[@]} -eq 0 ]; then
  install_node_peer
  exit 0
fi

echo "installing: ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
# The tests start their own throwaway servers; keep the packages' service
# scripts from starting system-wide ones during the install.
policy=/usr/sbin/policy-rc.d
made_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
  $sudo chmod +x "$policy"
  made_policy=1
fi
trap '[ $made_policy -eq 1 ] && $sudo rm -f "$policy"' EXIT
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "installed ${#missing[@]} packages"
install_node_peer
