#!/usr/bin/env bash
# Installs the build tree into a scratch prefix, builds examples/cpp against
# it with find_package(remat), and runs it on a shipped example.
set -euo pipefail
build_dir=$1; source_dir=$2
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
cmake -S "$source_dir/examples/cpp" -B "$work/build" -G Ninja \
      -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/build" >/dev/null
out=$("$work/build/partition_example" "$source_dir/examples/mlp.json")
echo "$out"
[ -n "$out" ] || { echo "no saved values printed" >&2; exit 1; }
test -f "$work/prefix/share/remat/examples/mlp.json"
