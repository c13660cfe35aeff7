#!/usr/bin/env bash
# Runs every test: the C++ suite (GoogleTest through ctest) and the Python
# suite (pytest, which calls torch's own partitioner live for parity).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build
ctest --test-dir build --output-on-failure -j2
python3 -m pytest tests/python -q
