#!/usr/bin/env bash
# Runs every test, as CI does (.ci/run), in stages, and prints how long each
# took (the whole must stay under 60 minutes on 2 cores, every supported
# torch release included; CI's limit is 90):
#  setup          tools/setup.sh into a fresh virtual environment (build-venv),
#                 which every later stage runs from;
#  wheel          the wheel setup built, repaired as users get it
#                 (tools/build_wheel.sh --repair, into build-dist/): every
#                 other release's environment installs it, and
#                 tools/test_wheel.sh checks it in each release's environment;
#  build, ctest   the Release build (gcc) with warnings as errors, and the C++
#                 suite (GoogleTest through ctest);
#  pytest         the Python suite, which calls torch's partitioner live,
#                 under torch 2.13 (the wheel on this machine's disk), then
#                 under every other supported release, each in its own
#                 environment installed from PyPI in the background
#                 (REMAT_TEST_RELEASES, default all of them), two
#                 releases at a time, one per core (tests marked
#                 one_release under torch 2.13 only, in a process of their
#                 own beside the rest of its suite);
#  python fuzz    the graph importer's fuzz target (tests/fuzz/fuzz_import.py,
#                 Hypothesis, derandomized) for REMAT_PY_FUZZ_EXAMPLES
#                 mutated documents (default 1500, about 40 s), under 2.13;
#  asan *         an AddressSanitizer + UndefinedBehaviorSanitizer build
#                 (clang) of the library, the CLI, the C++ tests and the fuzz
#                 target, compiled while pytest runs: the C++ tests, the CLI over every example graph, and
#                 the fuzz target for REMAT_FUZZ_SECONDS (default 60) from its
#                 seed corpus and dictionary (tests/fuzz);
#  tsan *         a ThreadSanitizer build (clang) of the library, the
#                 concurrency tests and the Python extension, compiled while
#                 the asan tests run: concurrent partitions from C++ threads
#                 and from Python threads.
# The sanitizer builds start from empty build directories every time, so no
# object, cache entry or copied file of an earlier run is reused; they compile
# with -O1 and line tables only, to keep them quick. Every build treats
# warnings as errors. See docs/hardening.md.
#
# Local iteration only (CI sets none of them): REMAT_SKIP_SANITIZERS=1 skips
# the asan and tsan stages; REMAT_TEST_RELEASES="2.15.0" tests only those
# other releases ("" none); CMAKE_BUILD_PARALLEL_LEVEL limits build jobs.
set -euo pipefail
cd "$(dirname "$0")/.."

REMAT_FUZZ_SECONDS=${REMAT_FUZZ_SECONDS:-60}
REMAT_PY_FUZZ_EXAMPLES=${REMAT_PY_FUZZ_EXAMPLES:-1500}
# Each pytest run lists its slowest tests (setup, call and teardown apart),
# so a run that grew shows where.
DURATIONS=25
# A sanitizer finding exits 86 and stops at the first report, so it cannot
# pass for remat's own exit status 1 (a clean error).
export ASAN_OPTIONS=exitcode=86:abort_on_error=0:detect_leaks=1:strict_string_checks=1
export UBSAN_OPTIONS=exitcode=86:print_stacktrace=1:halt_on_error=1
export TSAN_OPTIONS=exitcode=86:halt_on_error=1:second_deadlock_stack=1
SANITIZER_FLAGS=(-G Ninja -DCMAKE_CXX_COMPILER=clang++
                 -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-O1 -gline-tables-only"
                 -DREMAT_WERROR=ON)

# Each stage's wall time, and the CPU time (user + system) of the processes
# it ran: on a shared machine the wall time says little, the CPU time divided
# by the cores a stage keeps busy is what a dedicated CI machine would take.
timings=""
cpu_file=$(mktemp)
# The ASan build runs in the background while pytest runs: the Python suite
# keeps one core busy, the compiler the other. Its stage waits for it and
# shows its output; a failed or interrupted run stops it.
# The TSan build likewise runs beside the ASan stages.
asan_pid=""
asan_log=$(mktemp)
tsan_pid=""
tsan_log=$(mktemp)
stop_background() {
  local pid
  for pid in $asan_pid $tsan_pid $releases_pid $pair_pid; do
    pkill -P "$pid" 2>/dev/null || true
    kill "$pid" 2>/dev/null || true
  done
  rm -f "$cpu_file" "$asan_log" "$tsan_log"
}
trap stop_background EXIT
children_cpu() {  # sets cpu: CPU seconds of this shell's finished children
  times >"$cpu_file"  # not in a subshell: a subshell's times would not see ours
  cpu=$(awk 'NR == 2 { s = 0; for (i = 1; i <= 2; i++) { split($i, t, "m"); sub("s", "", t[2]); s += t[1] * 60 + t[2] }
                       printf "%d", s }' "$cpu_file")
}
stage() {
  local name=$1 t0=$SECONDS cpu c0
  children_cpu
  c0=$cpu
  shift
  echo "== $name"
  "$@"
  children_cpu
  timings+=$(printf '  %-22s %5ds wall %6ds CPU' "$name" $((SECONDS - t0)) $((cpu - c0)))$'\n'
}

# Every stage runs from build-venv, a virtual environment created afresh,
# isolated from the system interpreter's packages, and populated only by
# tools/setup.sh: a package installed by hand cannot hide a missing install
# step. torch 2.13.0 is the release whose CPU wheel lies on this machine's disk.
VENV=build-venv
setup_environment() {
  REMAT_WERROR=ON bash tools/setup.sh --fresh --venv "$VENV" --torch 2.13.0 --wheel-dir build-wheel
}

# The other supported torch releases, each in an environment of its own
# (build-venv-<release>, from PyPI: CUDA builds that run on the CPU, about
# 550 MB to download and 5.6 GB installed each), holding the wheel the setup
# stage built. They are installed one after another in the background while
# the main stages run (mostly network and disk), and each is deleted once
# its suite has run.
RELEASES=${REMAT_TEST_RELEASES-"2.15.0 2.14.1 2.12.1 2.11.0"}
releases_pid=""
pair_pid=""  # the first suite of a pair (pytest_pair), while it runs
install_releases() {
  local r rc
  for r in $RELEASES; do
    rc=0
    bash tools/setup.sh --fresh --venv "build-venv-$r" --torch "$r" --remat build-dist/remat-*.whl \
      >"build-venv-$r.log" 2>&1 || rc=$?
    echo "$rc" >"build-venv-$r.done"
  done
}
# Waits for one release's environment; its install log on failure.
wait_for_release() {
  local r=$1
  while [ ! -f "build-venv-$r.done" ]; do sleep 2; done
  if [ "$(cat "build-venv-$r.done")" != 0 ]; then
    cat "build-venv-$r.log" >&2
    return 1
  fi
  grep '^setup: done' "build-venv-$r.log"
}
# The Python suite under one release: every parity test against that
# release's own partitioner, live; then the wheel checked there as a user
# meets it. Tests marked one_release (the benchmarks' smoke runs, the
# peak-limited searches' rules and plans) check remat's own tooling or
# search and run under the main release only.
pytest_release() {
  local r=$1 rc=0
  PATH=$PWD/build-venv-$r/bin:$PATH VIRTUAL_ENV=$PWD/build-venv-$r \
    "build-venv-$r/bin/python" -m pytest tests/python -q -p no:cacheprovider --durations="$DURATIONS" \
    -m "not one_release" || rc=$?
  [ "$rc" != 0 ] || bash tools/test_wheel.sh --venv "build-venv-$r" build-dist/remat-*.whl || rc=$?
  rm -rf "build-venv-$r"
  return "$rc"
}
wait_for_releases() {
  local r
  for r in "$@"; do wait_for_release "$r" || return 1; done
}
# Two commands side by side (two_at_once FN_A ARG_A FN_B ARG_B: each a
# function and its one argument), each output shown whole after both ran;
# fails when either does.
two_at_once() {
  local rc_a=0 rc_b=0 log_a log_b
  log_a=$(mktemp)
  log_b=$(mktemp)
  "$1" "$2" >"$log_a" 2>&1 &
  pair_pid=$!
  "$3" "$4" >"$log_b" 2>&1 || rc_b=$?
  wait "$pair_pid" || rc_a=$?
  pair_pid=""
  echo "-- $1 $2"
  cat "$log_a"
  echo "-- $3 $4"
  cat "$log_b"
  rm -f "$log_a" "$log_b"
  [ "$rc_a" = 0 ] && [ "$rc_b" = 0 ]
}
# Two releases' suites side by side.
pytest_pair() { two_at_once pytest_release "$1" pytest_release "$2"; }
repair_wheel() {
  rm -rf build-dist
  bash tools/build_wheel.sh --repair build-wheel/remat-*.whl --out build-dist
}
build_release() {
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DREMAT_WERROR=ON \
    -DREMAT_SANITIZE= -DREMAT_BUILD_FUZZ=OFF -DREMAT_BUILD_PYTHON_MODULE=OFF >/dev/null
  cmake --build build
}

# Every example and test graph through every command. A crash, a sanitizer
# report or an internal error fails; so does a clean refusal (exit status 1)
# where none is expected: the shipped examples all partition, while a Pareto
# sweep may find no trade-off and tests/data holds a graph with no finite cut.
cli_over_examples() {
  local out rc graph args
  out=$(mktemp -d)
  for graph in examples/*.json tests/data/*.json; do
    for args in "info $graph" "partition $graph -o $out/r.json" \
                "partition $graph --partitioner default -o $out/d.json" \
                "partition $graph --memory-budget 0.5 --cut-side source -v" \
                "pareto $graph -o $out/p.svg --csv $out/p.csv --json $out/p.json" \
                "report $graph -o $out/r.html --json $out/rr.json"; do
      rc=0
      # shellcheck disable=SC2086  # args is a word list
      build-asan/remat $args >"$out/stdout" 2>"$out/stderr" || rc=$?
      if [ "$rc" -gt 1 ] || grep -q "internal error" "$out/stderr" ||
         { [ "$rc" -ne 0 ] && [[ $graph == examples/* && $args != pareto* ]]; }; then
        echo "remat $args: exit status $rc" >&2
        cat "$out/stderr" >&2
        return 1
      fi
    done
  done
  rm -rf "$out"
}

# A fresh corpus from the committed seeds each run; a finding prints the
# whole report and leaves the input in build-asan/fuzz-artifacts/.
fuzz() {
  local corpus rc=0
  corpus=$(mktemp -d)
  mkdir -p build-asan/fuzz-artifacts
  build-asan/remat_fuzz -dict=tests/fuzz/joint_graph.dict -max_total_time="$REMAT_FUZZ_SECONDS" \
    -max_len=8192 -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix=build-asan/fuzz-artifacts/ "$corpus" tests/fuzz/seeds \
    >build-asan/fuzz.log 2>&1 || rc=$?
  rm -rf "$corpus"
  if [ "$rc" -ne 0 ]; then
    cat build-asan/fuzz.log >&2
    ls -l build-asan/fuzz-artifacts >&2
    return 1
  fi
  grep -E '^stat::(number_of_executed_units|average_exec_per_sec|new_units_added)' build-asan/fuzz.log
}

build_asan() {
  rm -rf build-asan
  cmake -S . -B build-asan "${SANITIZER_FLAGS[@]}" -DREMAT_SANITIZE=address,undefined \
    -DREMAT_BUILD_FUZZ=ON >/dev/null
  cmake --build build-asan --target remat_cli remat_tests remat_fuzz
}

build_tsan() {
  rm -rf build-tsan
  cmake -S . -B build-tsan "${SANITIZER_FLAGS[@]}" -DREMAT_SANITIZE=thread \
    -DREMAT_BUILD_PYTHON_MODULE=ON "-DPython_EXECUTABLE=$(python3 -c 'import sys; print(sys.executable)')" \
    >/dev/null
  cmake --build build-tsan --target remat_concurrency_tests remat_python_package
}

# The extension built with TSan, imported by an interpreter that links TSan's
# runtime (tests/sanitizer/python_main.cc: preloading the runtime into
# python3 crashes). CPython itself is not instrumented; the engine is. The
# import must find that extension, not an installed one, or the run proves
# nothing.
# The launcher is not the environment's python, so it does not see the
# environment's packages by itself: its site-packages go on the path after
# the TSan build's package.
tsan_python() {
  local path
  path=build-tsan/python:$(python3 -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
  PYTHONPATH=$path build-tsan/remat_sanitized_python -c '
import os, sys, remat._remat as m
here = os.path.abspath(m.__file__)
sys.exit(0 if here.startswith(os.path.abspath("build-tsan/python") + os.sep)
         else "not the TSan extension: " + here)'
  PYTHONPATH=$path build-tsan/remat_sanitized_python -m pytest \
    tests/python/test_threads.py -q -s -p no:cacheprovider  # -s: a report must reach the log
}

# Waits for the asan or tsan build started in the background ($1) and shows
# its output; its pid is cleared so stop_background leaves it be.
wait_for_build() {
  local pid_var=$1_pid log_var=$1_log rc=0
  wait "${!pid_var}" || rc=$?
  printf -v "$pid_var" '%s' ""
  cat "${!log_var}"
  return "$rc"
}

stage "setup" setup_environment
stage "wheel" repair_wheel
rm -rf build-venv-*
install_releases &
releases_pid=$!
export VIRTUAL_ENV=$PWD/$VENV PATH=$PWD/$VENV/bin:$PATH
hash -r
# A test that skips because a package or command is missing fails instead
# (tests/python/conftest.py): what CI needs, setup.sh must install.
export REMAT_STRICT_SKIPS=1
stage "build" build_release
stage "ctest" ctest --test-dir build --output-on-failure -j2
sanitizers=1
if [ "${REMAT_SKIP_SANITIZERS:-0}" = 1 ]; then
  sanitizers=0
else
  build_asan >"$asan_log" 2>&1 &
  asan_pid=$!
fi
# The main release's suite as two processes, the tests every release runs
# beside those only this one runs (one_release: remat's own searches, about
# half the CPU), with the asan build on the same two cores (at b617af2 both
# took about 1300 s: the stage is bound by its total CPU, docs/hardening.md).
pytest_main() { python3 -m pytest tests/python -q -p no:cacheprovider --durations="$DURATIONS" -m "$1"; }
stage "pytest (asan build beside it)" two_at_once pytest_main "not one_release" pytest_main one_release
stage "python fuzz (importer)" python3 tests/fuzz/fuzz_import.py --examples "$REMAT_PY_FUZZ_EXAMPLES"
stage "wheel check torch 2.13.0" bash tools/test_wheel.sh --venv "$VENV" build-dist/remat-*.whl
# Two releases at a time: each suite is one single-threaded pytest process
# (about 10 minutes of CPU), so a pair keeps both cores busy and halves the
# stages' wall time.
# shellcheck disable=SC2086  # RELEASES is a word list
set -- $RELEASES
while [ $# -gt 0 ]; do
  if [ $# -ge 2 ]; then
    stage "torch $1, $2 install (rest)" wait_for_releases "$1" "$2"
    stage "pytest torch $1 + $2" pytest_pair "$1" "$2"
    shift 2
  else
    stage "torch $1 install (rest)" wait_for_release "$1"
    stage "pytest torch $1" pytest_release "$1"
    shift
  fi
done
if [ "$sanitizers" = 0 ]; then
  echo "== sanitizer stages SKIPPED (REMAT_SKIP_SANITIZERS=1): not a CI run"
else
  stage "asan build (rest)" wait_for_build asan
  # The TSan build beside the ASan stages: the C++ tests and the fuzzer
  # each keep one core busy.
  build_tsan >"$tsan_log" 2>&1 &
  tsan_pid=$!
  # One process for the whole suite: ctest's process per test would pay the
  # sanitizer start-up for each of several hundred tests.
  stage "asan C++ tests (tsan build beside them)" timeout 900 build-asan/remat_tests --gtest_brief=1
  stage "asan CLI examples" cli_over_examples
  stage "asan fuzz" fuzz
  stage "tsan build (rest)" wait_for_build tsan
  stage "tsan C++ threads" timeout 600 build-tsan/remat_concurrency_tests --gtest_brief=1
  stage "tsan Python threads" tsan_python
fi
printf 'test.sh: all passed in %ds\n%s' $((SECONDS)) "$timings"
