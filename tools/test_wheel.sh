#!/usr/bin/env bash
# Contract: checks a built wheel the way a user meets it:
#
#   bash tools/test_wheel.sh [--torch VERSION]... [--venv DIR]... [WHEEL]
#
#   WHEEL            the wheel (default: the one dist/ holds for python3)
#   --torch VERSION  a fresh virtual environment (outside the source tree)
#                    with exactly this torch, then the wheel; repeatable
#   --venv DIR       an environment that already has a supported torch
#                    (tools/test.sh's per-release ones): the wheel is
#                    installed into it; repeatable
#   default          --torch 2.13.0
#
# In each environment, from an empty folder and with PATH holding only the
# environment's bin/ and grep (no compiler, CMake or source tree in reach):
#   remat --version and remat.__version__ agree with the wheel's version;
#   remat partition runs on its default example and on a shipped one;
#   the metadata names the license and asks for torch only as an extra,
#   and every library the wheel carries comes with its licence text;
#   import remat.torch works, and a short training step under
#   torch.compile with remat.torch.install(fallback=False) gives the same
#   gradients as eager, with remat's partitioner called.
# Exit status 0 only if every check passed in every environment.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

torches=() venvs=() wheel=""
usage() { sed -n '5,12p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case $1 in
    --torch) torches+=("${2:?--torch needs a version}"); shift 2 ;;
    --venv) venvs+=("$(cd "${2:?--venv needs a directory}" && pwd)"); shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "test_wheel: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
    *) wheel=$1; shift ;;
  esac
done
if [ -z "$wheel" ]; then
  tag=$(python3 -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
  wheel=$(ls dist/remat-*-"$tag"-"$tag"-manylinux*.whl 2>/dev/null | tail -n 1)
  [ -n "$wheel" ] || { echo "test_wheel: no wheel for $tag in dist/ (bash tools/build_wheel.sh)" >&2; exit 2; }
fi
wheel=$(cd "$(dirname "$wheel")" && pwd)/$(basename "$wheel")
version=$(basename "$wheel" | cut -d- -f2)
[ ${#torches[@]} -gt 0 ] || [ ${#venvs[@]} -gt 0 ] || torches=(2.13.0)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The one outside command the checks use; nothing else of the system's PATH.
mkdir "$work/bin"
ln -s "$(command -v grep)" "$work/bin/grep"

# The checks, run inside one environment from an empty folder.
check() {
  local venv=$1 dir
  dir=$(mktemp -d "$work/run.XXXX")
  (
    cd "$dir"
    export PATH=$venv/bin:$work/bin VIRTUAL_ENV=$venv
    unset PYTHONPATH
    got=$(remat --version)
    [ "$got" = "remat $version" ] || { echo "remat --version: '$got', wheel $version" >&2; exit 1; }
    got=$(python -c 'import remat; print(remat.__version__)')
    [ "$got" = "$version" ] || { echo "remat.__version__: '$got', wheel $version" >&2; exit 1; }
    remat partition >default.txt
    grep -q "^forward: " default.txt
    remat partition "$venv/share/remat/examples/transformer_block.json" -o result.json >/dev/null
    python - "$root" <<'EOF'
import json, sys

import torch

import remat
import remat.torch as rt

import os
import sysconfig

# From the environment's site-packages, not the source tree's python/ (the
# environment itself may live inside the source tree, as CI's do).
site = os.path.realpath(sysconfig.get_path("platlib"))
here = os.path.realpath(remat.__file__)
assert os.path.commonpath([here, site]) == site, f"remat imported from {here}, not from {site}"
assert not here.startswith(os.path.realpath(os.path.join(sys.argv[1], "python")) + os.sep), here
assert json.load(open("result.json"))["format"] == "remat.partition_result"
# The metadata users rely on: the license, and torch as an extra only.
import importlib.metadata as md

meta = md.metadata("remat")
assert meta.get("License-Expression") == "BSD-3-Clause", meta.get("License-Expression")
torch_reqs = [r for r in meta.get_all("Requires-Dist") if r.startswith("torch")]
assert torch_reqs and all('extra == "torch"' in r for r in torch_reqs), torch_reqs
assert any(f.name == "LICENSE" for f in md.files("remat")), "LICENSE is not in the wheel"
# Every library auditwheel copied in comes with its licence
# (tools/wheel_licenses.py), listed as a License-File.
files = md.files("remat")
libs = [f.name for f in files if f.parts[0] == "remat.libs"]
assert libs, "no remat.libs/ in the wheel"
listing = md.distribution("remat").read_text("licenses/third_party/LIBRARIES") or ""
licence_files = meta.get_all("License-File") or []
for lib in libs:
    line = next((l for l in listing.splitlines() if l.startswith(f"remat.libs/{lib}:")), None)
    assert line, f"{lib}: not in licenses/third_party/LIBRARIES"
    name = line.rsplit("licence ", 1)[1]
    text = md.distribution("remat").read_text(f"licenses/third_party/{name}")
    assert text and "Copyright" in text, f"{lib}: its licence {name} is missing or empty"
    assert f"third_party/{name}" in licence_files, f"{name} is not a License-File of the metadata"
calls = []
original = rt._dropin._partition


def counting(*args, **kwargs):
    calls.append(1)
    return original(*args, **kwargs)


rt._dropin._partition = counting
rt.install(fallback=False)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.LayerNorm(32),
                            torch.nn.Linear(32, 4))
x = torch.randn(8, 16)
model(x).pow(2).sum().backward()
eager = [p.grad.clone() for p in model.parameters()]
model.zero_grad()
# aot_eager_decomp_partition: AOTAutograd's min-cut partitioner, no compiler.
compiled = torch.compile(model, backend="aot_eager_decomp_partition")
compiled(x).pow(2).sum().backward()
assert calls, "remat's partitioner was not called"
for p, g in zip(model.parameters(), eager):
    torch.testing.assert_close(p.grad, g)
print(f"test_wheel: torch {torch.__version__}: {len(calls)} graph(s) partitioned by remat, gradients as eager")
EOF
  )
}

status=0
for t in "${torches[@]}"; do
  venv=$work/venv-$t
  echo "test_wheel: torch $t in a fresh environment"
  python3 -m venv "$venv"
  PIP_CONSTRAINT=/dev/null "$venv/bin/python" -m pip --disable-pip-version-check -q install "torch==$t"
  "$venv/bin/python" -m pip --disable-pip-version-check -q install "$wheel"
  check "$venv" || status=1
  rm -rf "$venv"
done
for venv in "${venvs[@]}"; do
  echo "test_wheel: $venv"
  "$venv/bin/python" -m pip --disable-pip-version-check -q install --force-reinstall --no-deps "$wheel"
  check "$venv" || status=1
done
[ "$status" = 0 ] && echo "test_wheel: $(basename "$wheel"): every check passed"
exit "$status"
