#!/usr/bin/env bash
# Installs, on Debian 12, the packages dlock builds and tests with. Asks apt
# only for what is missing; run as root (or through sudo).
set -euo pipefail

packages=(
  build-essential cmake pkg-config clang clang-format python3
  libabsl-dev libgtest-dev libgmock-dev libbenchmark-dev
  libhiredis-dev redis-server redis-tools
  libzookeeper-mt-dev zookeeper python3-kazoo
  libpq-dev postgresql python3-tooz python3-psycopg2
  libtomlplusplus-dev libcli11-dev
  libfaketime
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

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
