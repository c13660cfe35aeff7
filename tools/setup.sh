#!/usr/bin/env bash
# Contract: installs everything remat and every stage of tools/test.sh need
# on a fresh Debian machine, into one Python virtual environment, then remat
# itself (the C++ library, the `remat` command and the Python package) into
# that environment. Safe to run again: it installs only what is missing.
#
#   bash tools/setup.sh [--venv DIR] [--fresh] [--torch VERSION] [--remat WHEEL]
#                       [--wheel-dir DIR] [--debian-only]
#
#   --venv DIR       the environment (default .venv), created when missing;
#                    an existing one, yours included, is used as it is
#   --fresh          delete DIR first and create it isolated from the system
#                    interpreter's packages: only this script populates it
#                    (tools/test.sh's environments)
#   --torch VERSION  install exactly this torch release
#   --remat WHEEL    install remat from this wheel instead of building it
#   --wheel-dir DIR  keep the wheel it builds there (tools/test.sh installs
#                    it into one environment per torch release)
#   --debian-only    install the Debian packages only (tools/build_wheel.sh)
#
# Which torch: --torch when given; otherwise a supported torch the
# environment already has is kept (a new default .venv sees the system
# interpreter's torch, when that one is supported); otherwise the newest
# supported release is installed. The supported range is pyproject.toml's
# `torch` extra; every other Python requirement comes from pyproject.toml too
# (tools/requirements.py), so setup and the package build cannot drift.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=.venv fresh=0 torch_version="" remat_wheel="" wheel_dir="" debian_only=0
usage() { sed -n '6,20p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case $1 in
    --venv) venv=${2:?--venv needs a directory}; shift 2 ;;
    --fresh) fresh=1; shift ;;
    --torch) torch_version=${2:?--torch needs a version}; shift 2 ;;
    --remat) remat_wheel=${2:?--remat needs a wheel file}; shift 2 ;;
    --wheel-dir) wheel_dir=${2:?--wheel-dir needs a directory}; shift 2 ;;
    --debian-only) debian_only=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "setup: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done

# C++ dependencies, from Debian (coinor-libcbc-dev: the MILP solver of
# src/optimize/); graphviz draws the cut in reports, chromium
# is the headless browser the report's test runs in, clang and its runtimes
# (sanitizers, libFuzzer) are for the hardening builds of tools/test.sh;
# python3-venv creates the environment (Debian's python3 lacks venv without it).
pkgs="libsimdjson-dev libfmt-dev libcli11-dev nettle-dev coinor-libcbc-dev libgtest-dev libgmock-dev libbenchmark-dev liblemon-dev libboost-graph-dev graphviz chromium clang libclang-rt-dev"
python3 -c 'import venv, ensurepip' 2>/dev/null || pkgs="$pkgs python3-venv"
missing=""
for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  echo "setup: installing Debian packages:$missing"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
fi
[ "$debian_only" = 0 ] || exit 0

# The environment. A new default one may see the system interpreter's
# packages, so that a supported torch there (several GB) is not installed a
# second time; --fresh never does.
if [ "$fresh" = 1 ]; then rm -rf "$venv"; fi
if [ ! -x "$venv/bin/python" ]; then
  site=""
  if [ "$fresh" = 0 ] && python3 tools/requirements.py torch-ok; then site="--system-site-packages"; fi
  echo "setup: creating the virtual environment $venv ${site:+(seeing the system interpreter packages)}"
  python3 -m venv $site "$venv"
fi
py="$venv/bin/python"
pip() { "$py" -m pip --disable-pip-version-check -q "$@"; }

# torch. pip's configuration on some machines caps torch below the newest
# supported release (a constraints file); the torch install alone lifts it.
if [ -n "$torch_version" ]; then
  want="torch==$torch_version"
elif "$py" tools/requirements.py torch-ok; then
  want=""
else
  want=$("$py" tools/requirements.py torch)
fi
if [ -n "$want" ]; then
  echo "setup: installing $want"
  PIP_CONSTRAINT=/dev/null pip install "$want"
fi

# The build's requirements (the ThreadSanitizer stage builds the extension
# with CMake against this environment) and the tests': pyproject.toml's.
mapfile -t reqs < <("$py" tools/requirements.py build; "$py" tools/requirements.py test)
pip install "${reqs[@]}"

if [ -n "$remat_wheel" ]; then
  echo "setup: installing remat from $remat_wheel"
  pip install --force-reinstall --no-deps "$remat_wheel"
  pip install "$remat_wheel"  # its own dependencies, when missing
else
  echo "setup: building and installing remat"
  # A wheel first, then that wheel installed: the same file can go into
  # other environments (--wheel-dir). REMAT_WERROR=ON (tools/test.sh) builds
  # the extension with warnings as errors.
  out=${wheel_dir:-$(mktemp -d)}
  mkdir -p "$out"
  rm -f "$out"/remat-*.whl
  pip wheel --no-deps -w "$out" ${REMAT_WERROR:+--config-settings=cmake.define.REMAT_WERROR=$REMAT_WERROR} .
  pip install --force-reinstall --no-deps "$out"/remat-*.whl
  pip install "$out"/remat-*.whl  # its own dependencies, when missing
  [ -n "$wheel_dir" ] || rm -rf "$out"
fi
echo "setup: done in $venv ($("$venv/bin/remat" --version), torch $("$py" -c 'import torch; print(torch.__version__)'))"
echo "setup: activate it with: . $venv/bin/activate"
