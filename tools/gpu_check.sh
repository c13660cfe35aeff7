#!/usr/bin/env bash
# Runs every GPU check (tools/gpu_check_*.py) on a machine with a CUDA GPU.
#
# Contract: each check is a Python script that exits 0 when everything it
# compares agrees, 1 when something differs, 2 when there is no GPU. This
# script runs them all (even after a failure), prints each one's output, and
# exits 0 only if all passed; 2 when no CUDA GPU is visible. It needs the
# remat package importable (pip install . or PYTHONPATH=python with a built
# extension). Checks are not part of CI (no GPU there): run this where the
# `device` tool lends a GPU, and report what it printed. They check the torch
# release installed on that machine (a session cannot carry the 5 GB
# environments of the others there): its version is printed first.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  echo "gpu_check: no CUDA GPU visible to torch; nothing checked"
  exit 2
fi
# The checks compare remat with the torch installed here, as that release's
# partitioner (remat.torch reproduces the running release): say which.
"$PY" -c "import torch, remat.torch as rt; from remat.torch import _release
print(f'gpu_check: torch {torch.__version__}, remat reproduces torch {_release.reproduced()}')" || {
  echo "gpu_check: remat does not support this torch release (see docs/torch-releases.md)"
  exit 1
}
status=0
for check in tools/gpu_check_*.py; do
  echo "=== $check"
  "$PY" "$check" "$@"
  rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "=== $check failed (exit $rc)"
    status=1
  fi
done
exit $status
