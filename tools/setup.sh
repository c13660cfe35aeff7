#!/usr/bin/env bash
# Installs everything remat needs on a fresh Debian machine, then remat itself
# (the C++ library, the `remat` command and the Python package).
# Safe to run again: it installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

# C++ dependencies, from Debian; graphviz draws the cut in reports, chromium
# is the headless browser the report's test runs in, clang and its runtimes
# (sanitizers, libFuzzer) are for the hardening builds of tools/test.sh.
pkgs="libsimdjson-dev libfmt-dev libcli11-dev libssl-dev libgtest-dev libgmock-dev libbenchmark-dev liblemon-dev libboost-graph-dev graphviz chromium clang libclang-rt-dev"
missing=""
for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  echo "setup: installing Debian packages:$missing"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
fi

# Python side: torch 2.13 (the CPU wheel on disk), build and test tools.
python3 -m pip install -q --disable-pip-version-check "torch==2.13.0"
# tlparse reads TORCH_TRACE logs (the trace test); websocket-client drives
# Chromium's DevTools protocol (the report test).
python3 -m pip install -q --disable-pip-version-check cmake ninja pytest scipy networkx orjson numpy jsonschema \
  tlparse websocket-client
echo "setup: building and installing remat"
# REMAT_WERROR=ON (tools/test.sh) builds the extension with warnings as errors.
python3 -m pip install -q --disable-pip-version-check \
  ${REMAT_WERROR:+--config-settings=cmake.define.REMAT_WERROR=$REMAT_WERROR} .
echo "setup: done ($(remat --version))"
