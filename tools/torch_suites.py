#!/usr/bin/env python3
"""Runs torch's own test files twice, with torch's partitioner and with remat's.

For each test file it runs pytest twice in the same Python environment:

  torch mode  the file as it is (torch partitions every graph);
  remat mode  the same file with `remat.torch.install(fallback=False)` applied
              before the file is imported, so every graph torch.compile or
              aot_autograd partitions goes through remat, and a graph remat
              cannot partition fails instead of falling back to torch.

Both runs load a small pytest plugin that this script writes into the output
folder (`-p remat_suite_plugin`). It records every test's outcome, its error
line and, per test, how many graphs were partitioned: in both modes the calls
of aot_autograd's partition step (the one function every compilation passes
its partition function through), in remat mode also the calls of remat's
drop-in partitioner (remat.torch._dropin._partition: min_cut, default and
remat.torch.partition alike) and how many of them raised.

Each test is then put in one class:

  pass_both        passed (or xfailed as expected) in both modes
  fail_both        failed in both: torch-side skew, the file is not of this
                   release (or needs what this machine lacks: a GPU, triton)
  finding          passed with torch, failed with remat: a remat bug until
                   shown otherwise; its error line is reported
  remat_only_pass  failed with torch, passed with remat
  skipped          skipped in both
  mismatch         anything else (skipped in one mode only, not run in one
                   mode: a crash or a timeout that left it out)

Robustness: every pytest run has a wall-clock limit (--timeout); when it is
reached the run's stacks are dumped (faulthandler, SIGUSR1, into runs/*.stacks), its
whole process group is killed, the test that was running is recorded as a
timeout, and the run is restarted without the tests already done (at most
--max-restarts times); a run that dies (a crash in native code) is recorded
and restarted the same way. --test-timeout adds a per-test alarm (SIGALRM)
that fails a test stuck in Python code without killing the run.

Outputs in --out: report.json (everything), report.md (tables and findings),
runs/<file>.<mode>[.<restart>].jsonl (the plugin's records) and .log (pytest's
output). Exit status: 0 no finding; 1 findings, or tests that passed with
torch but did not run with remat; 2 the harness could not run a mode (remat
not importable or refused by install(), pytest missing, a collection-level
crash in remat mode only).

Example (from the repository root):

  nice -n 19 python3 tools/torch_suites.py \\
      --python /work/venvs/torch-2.13.0/bin/python \\
      --remat-path /path/to/unpacked-wheel --pythonpath /path/to/expecttest \\
      --timeout 1800 --test-timeout 300 --out /tmp/suites-2.13 \\
      ~/torch-tests/test/functorch/test_ac_knapsack.py

Torch's test files are not part of torch's wheels; bring them from a torch
source tree of (ideally) the same release. torch.testing._internal is in the
wheels but needs `expecttest` (not a torch dependency): --pythonpath can put a
folder holding it on the path without touching the environment.
See docs/torch_suites.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODES = ("torch", "remat")
GOOD = {"passed", "xfailed"}
BAD = {"failed", "error", "xpassed", "timeout", "crash"}

PLUGIN_NAME = "remat_suite_plugin"

# The plugin both runs load (written to --out/_plugin). Configured through
# environment variables: REMAT_SUITE_MODE (torch|remat), REMAT_SUITE_RECORDS
# (the JSON-lines file it appends to), REMAT_SUITE_DESELECT (a file of node ids
# to leave out, one a line), REMAT_SUITE_TEST_TIMEOUT (seconds, 0: none).
PLUGIN_SOURCE = r'''
"""remat_suite_plugin: written by tools/torch_suites.py; records each test."""
import faulthandler
import functools
import json
import os
import signal
import sys
import time
import traceback

import pytest

_MODE = os.environ.get("REMAT_SUITE_MODE", "torch")
_RECORDS = os.environ["REMAT_SUITE_RECORDS"]
_TEST_TIMEOUT = float(os.environ.get("REMAT_SUITE_TEST_TIMEOUT") or 0)
_out = open(_RECORDS, "a", buffering=1)
_current = ["<collection>"]
_counts = {}
_phase = {}


def _emit(**record):
    _out.write(json.dumps(record, default=str) + "\n")
    _out.flush()


def _bump(key, n=1):
    c = _counts.setdefault(_current[0], {})
    c[key] = c.get(key, 0) + n


def _first_line(text, limit=600):
    for line in str(text).splitlines():
        line = line.strip()
        if line:
            return line[:limit]
    return ""


def _wrap_choke_point():
    """Counts aot_autograd's partition step, the one call every compilation
    makes with its partition function (2.12 on: _partition_joint_graph_into_fw_bw;
    2.11: _aot_stage2a_partition). Pass-through: behaviour is unchanged."""
    import importlib
    try:
        gc = importlib.import_module("torch._functorch._aot_autograd.graph_compile")
    except ImportError:
        return None
    for name in ("_partition_joint_graph_into_fw_bw", "_aot_stage2a_partition"):
        original = getattr(gc, name, None)
        if original is not None:
            break
    else:
        return None

    @functools.wraps(original)
    def counted(*args, **kwargs):
        _bump("aot_partition_calls")
        return original(*args, **kwargs)

    setattr(gc, name, counted)
    return name


def _wrap_remat():
    """Counts remat's drop-in partitioner: every graph remat partitions."""
    from remat.torch import _dropin
    original = _dropin._partition

    @functools.wraps(original)
    def counted(*args, **kwargs):
        _bump("remat_partition_calls")
        try:
            return original(*args, **kwargs)
        except BaseException as e:
            _bump("remat_partition_errors")
            c = _counts[_current[0]]
            c.setdefault("remat_first_error", f"{type(e).__name__}: {_first_line(e)}")
            raise

    _dropin._partition = counted


def _session_info():
    info = {"mode": _MODE, "python": sys.executable, "argv": sys.argv}
    try:
        import torch
        info["torch"] = torch.__version__
        info["torch_file"] = torch.__file__
    except Exception as e:  # noqa: BLE001 - reported, not fatal here
        info["torch_error"] = f"{type(e).__name__}: {e}"
    return info


_stacks = open(_RECORDS + ".stacks", "a")


def pytest_configure(config):
    # Not stderr: pytest captures it per test, and a killed run loses it.
    faulthandler.enable(file=_stacks)
    if hasattr(signal, "SIGUSR1"):
        # The harness sends SIGUSR1 before killing a run past its limit.
        faulthandler.register(signal.SIGUSR1, file=_stacks, all_threads=True)
    info = _session_info()
    if _MODE == "remat":
        try:
            import remat
            import remat.torch
            remat.torch.install(fallback=False)
            info["remat_file"] = remat.__file__
            info["remat_version"] = remat.version()
            from remat.torch import _release
            info["remat_reproduces"] = _release.reproduced()
            info["remat_installed"] = remat.torch.installed()
            _wrap_remat()
        except BaseException as e:
            info["install_error"] = f"{type(e).__name__}: {e}"
            _emit(event="session", **info)
            raise pytest.UsageError(
                f"remat_suite_plugin: remat could not be installed: {info['install_error']}")
    info["choke_point"] = _wrap_choke_point()
    _emit(event="session", **info)


def pytest_collectreport(report):
    if report.failed:
        _emit(event="collect_error", nodeid=report.nodeid,
              error=_first_line(_crash_message(report)),
              longrepr=str(report.longrepr)[-4000:])


def pytest_collection_modifyitems(session, config, items):
    path = os.environ.get("REMAT_SUITE_DESELECT")
    if path and os.path.exists(path):
        with open(path) as f:
            drop = {line.strip() for line in f if line.strip()}
        keep = [i for i in items if i.nodeid not in drop]
        gone = [i for i in items if i.nodeid in drop]
        if gone:
            config.hook.pytest_deselected(items=gone)
            items[:] = keep


def pytest_collection_finish(session):
    _emit(event="collected", nodeids=[i.nodeid for i in session.items])


def pytest_runtest_logstart(nodeid, location):
    _current[0] = nodeid
    _phase[nodeid] = {"start": time.time()}
    _emit(event="start", nodeid=nodeid)


class _TestTimeout(Exception):
    pass


def _alarm(signum, frame):
    raise _TestTimeout(f"remat_suite_plugin: test exceeded --test-timeout {_TEST_TIMEOUT:g} s")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    armed = _TEST_TIMEOUT > 0 and hasattr(signal, "setitimer")
    if armed:
        previous = signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, _TEST_TIMEOUT)
    try:
        yield
    finally:
        if armed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)


def _crash_message(report):
    lr = report.longrepr
    crash = getattr(lr, "reprcrash", None)
    if crash is not None and getattr(crash, "message", None):
        return crash.message
    if isinstance(lr, tuple) and len(lr) == 3:  # skip: (path, line, reason)
        return lr[2]
    text = str(lr) if lr is not None else ""
    lines = [l for l in text.splitlines() if l.strip()]
    for l in lines:
        if l.startswith("E "):
            return l[1:].strip()
    return lines[-1] if lines else ""


def pytest_runtest_logreport(report):
    st = _phase.setdefault(report.nodeid, {})
    outcome = report.outcome
    if hasattr(report, "wasxfail"):
        outcome = "xfailed" if report.skipped else "xpassed"
    st[report.when] = outcome
    if report.failed or (report.skipped and "error" not in st):
        msg = _first_line(_crash_message(report))
        if report.failed and "error" not in st:
            st["error"] = msg
            st["error_text"] = str(_crash_message(report))[:8000]
            st["error_phase"] = report.when
            if "_TestTimeout" in str(report.longrepr) or "exceeded --test-timeout" in msg:
                st["timeout"] = True
        elif report.skipped:
            st.setdefault("skip_reason", msg)
    if report.when == "teardown":
        _finish(report.nodeid)


def _finish(nodeid):
    st = _phase.pop(nodeid, {})
    setup, call, teardown = st.get("setup"), st.get("call"), st.get("teardown")
    if st.get("timeout"):
        outcome = "timeout"
    elif setup == "failed":
        outcome = "error"
    elif setup in ("skipped", "xfailed"):
        outcome = setup
    elif call in ("failed", "xpassed", "xfailed", "skipped"):
        outcome = call
    elif teardown == "failed":
        outcome = "error"
    else:
        outcome = call or setup or "passed"
    rec = {"event": "result", "nodeid": nodeid, "outcome": outcome,
           "duration": round(time.time() - st.get("start", time.time()), 3)}
    for key in ("error", "error_text", "error_phase", "skip_reason"):
        if key in st:
            rec[key] = st[key]
    rec.update(_counts.pop(nodeid, {}))
    _emit(**rec)
    _current[0] = "<between tests>"


def pytest_sessionfinish(session, exitstatus):
    leftover = {k: v for k, v in _counts.items() if v}
    _emit(event="finish", exitstatus=int(exitstatus), outside_tests=leftover)
'''


# --- running one file in one mode -------------------------------------------------

def _read_records(path: Path) -> list[dict]:
    out = []
    if not path.exists():
        return out
    for line in path.read_text(errors="replace").splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            out.append({"event": "garbled", "text": line[:200]})
    return out


def _kill_group(proc: subprocess.Popen, grace: float = 3.0) -> None:
    """Dumps the run's stacks (SIGUSR1, to the plugin's .stacks file), then kills its process group."""
    try:
        os.killpg(proc.pid, signal.SIGUSR1)
        time.sleep(grace)
    except (ProcessLookupError, PermissionError):
        pass
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def _run_once(args, test_file: Path, mode: str, stem: str, part: int, plugin_dir: Path,
              deselect: set[str], runs_dir: Path) -> dict:
    suffix = f".{part}" if part else ""
    records_path = runs_dir / f"{stem}.{mode}{suffix}.jsonl"
    log_path = runs_dir / f"{stem}.{mode}{suffix}.log"
    records_path.unlink(missing_ok=True)
    deselect_path = runs_dir / f"{stem}.{mode}{suffix}.deselect"
    if deselect:
        deselect_path.write_text("".join(n + "\n" for n in sorted(deselect)))
    scratch = Path(tempfile.mkdtemp(prefix=f"torch_suites_{stem}_{mode}_"))

    env = dict(os.environ)
    paths = [str(plugin_dir)]
    if mode == "remat" and args.remat_path:
        paths.append(str(Path(args.remat_path).resolve()))
    paths += [str(Path(p).resolve()) for p in args.pythonpath]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env.update({
        "PYTHONPATH": os.pathsep.join(paths),
        "PYTHONDONTWRITEBYTECODE": "1",
        "REMAT_SUITE_MODE": mode,
        "REMAT_SUITE_RECORDS": str(records_path),
        "REMAT_SUITE_TEST_TIMEOUT": str(args.test_timeout or 0),
        # A cache shared between the modes would hand remat mode the graphs
        # torch partitioned (AOTAutograd and FX graph caches skip the
        # partitioner): every run gets its own, deleted afterwards.
        "TORCHINDUCTOR_CACHE_DIR": str(scratch / "inductor"),
        "TRITON_CACHE_DIR": str(scratch / "triton"),
        "TMPDIR": str(scratch),
    })
    if deselect:
        env["REMAT_SUITE_DESELECT"] = str(deselect_path)
    else:
        env.pop("REMAT_SUITE_DESELECT", None)

    cmd = [args.python, "-m", "pytest", "-p", PLUGIN_NAME, "-p", "no:cacheprovider",
           "--rootdir", str(test_file.parent), "-o", "addopts=", "-o", "python_files=test_*.py",
           "-q", "--tb=short", "-rN", test_file.name]
    if args.k:
        cmd += ["-k", args.k]
    cmd += args.pytest_arg
    started = time.time()
    timed_out = False
    with open(log_path, "w") as log:
        log.write("$ " + " ".join(shlex.quote(c) for c in cmd) + "\n")
        log.write(f"# cwd {test_file.parent}; mode {mode}; PYTHONPATH {env['PYTHONPATH']}\n")
        log.flush()
        proc = subprocess.Popen(cmd, cwd=test_file.parent, env=env, stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            rc = proc.wait(timeout=args.timeout if args.timeout > 0 else None)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
            rc = proc.wait()
    shutil.rmtree(scratch, ignore_errors=True)
    return {"records": _read_records(records_path), "rc": rc, "timed_out": timed_out,
            "seconds": round(time.time() - started, 1), "log": str(log_path),
            "records_file": str(records_path)}


def run_mode(args, test_file: Path, mode: str, stem: str, plugin_dir: Path, runs_dir: Path) -> dict:
    """All of one file's tests in one mode, restarting past a run killed at its limit."""
    results: dict[str, dict] = {}
    collected: list[str] = []
    runs, session, collect_errors, outside = [], None, [], {}
    done: set[str] = set()
    for part in range(args.max_restarts + 1):
        run = _run_once(args, test_file, mode, stem, part, plugin_dir, done, runs_dir)
        started, finished, run_session = None, False, False
        for rec in run["records"]:
            ev = rec.get("event")
            if ev == "session":
                run_session = True
                session = session or rec
            elif ev == "collected" and not collected:
                collected = rec["nodeids"]
            elif ev == "collect_error":
                collect_errors.append(rec)
                # A file or class that fails to import stands for its tests:
                # one entry with outcome "error", compared like a test.
                if rec.get("nodeid"):
                    results.setdefault(rec["nodeid"], {
                        "nodeid": rec["nodeid"], "outcome": "error", "collect_error": True,
                        "error": rec.get("error")})
            elif ev == "start":
                started = rec["nodeid"]
            elif ev == "result":
                results[rec["nodeid"]] = rec
                started = None
            elif ev == "finish":
                finished = True
                for k, v in rec.get("outside_tests", {}).items():
                    outside[k] = v
        # A run that started but never reached the end of its session died
        # (a crash in native code, the OOM killer): like a run past its
        # limit, its running test is recorded and the rest run again.
        run["crashed"] = run_session and not finished and not run["timed_out"]
        runs.append({k: run[k] for k in ("rc", "timed_out", "crashed", "seconds", "log",
                                         "records_file")})
        if not (run["timed_out"] or run["crashed"]):
            break
        if started is not None:
            if run["timed_out"]:
                results[started] = {
                    "nodeid": started, "outcome": "timeout",
                    "error": f"the run reached --timeout {args.timeout:g} s in this test "
                             f"(killed; stacks in {Path(run['records_file']).name}.stacks)"}
            else:
                results[started] = {
                    "nodeid": started, "outcome": "crash",
                    "error": f"the pytest process died in this test (exit status {run['rc']}; "
                             f"see {Path(run['log']).name})"}
        done = set(results)
        if not set(collected) - done:
            break
    return {"mode": mode, "session": session, "collected": collected, "results": results,
            "collect_errors": collect_errors, "outside_tests": outside, "runs": runs}


# --- comparing the modes -------------------------------------------------------

def _kind(outcome: str | None) -> str:
    if outcome is None:
        return "missing"
    if outcome in GOOD:
        return "good"
    if outcome in BAD:
        return "bad"
    if outcome == "skipped":
        return "skipped"
    return "other"


def _norm_error(text: str | None) -> str:
    """An error message with what differs between two runs of the same
    failure blanked: addresses, FX's eval_with_key counters, whitespace."""
    text = re.sub(r"0x[0-9a-fA-F]+", "0x?", text or "")
    text = re.sub(r"<eval_with_key>\.\d+", "<eval_with_key>.?", text)
    return " ".join(text.split())


def classify(torch_run: dict, remat_run: dict, single: str | None = None) -> dict:
    names = list(dict.fromkeys(
        torch_run["collected"] + remat_run["collected"]
        + list(torch_run["results"]) + list(remat_run["results"])))
    tests = []
    for n in names:
        t, r = torch_run["results"].get(n), remat_run["results"].get(n)
        to, ro = (t or {}).get("outcome"), (r or {}).get("outcome")
        kt, kr = _kind(to), _kind(ro)
        if single:
            cls = f"{single}_only"
        elif kt == "good" and kr == "good":
            cls = "pass_both"
        elif kt == "bad" and kr == "bad":
            cls = "fail_both"
        elif kt == "good" and kr == "bad":
            cls = "finding"
        elif kt == "bad" and kr == "good":
            cls = "remat_only_pass"
        elif kt == "skipped" and kr == "skipped":
            cls = "skipped"
        else:
            cls = "mismatch"
        entry = {"test": n, "class": cls, "torch": to, "remat": ro,
                 "torch_error": (t or {}).get("error"), "remat_error": (r or {}).get("error"),
                 "aot_partitions_torch": (t or {}).get("aot_partition_calls", 0),
                 "aot_partitions_remat": (r or {}).get("aot_partition_calls", 0),
                 "remat_partitions": (r or {}).get("remat_partition_calls", 0),
                 "remat_partition_errors": (r or {}).get("remat_partition_errors", 0)}
        if (r or {}).get("remat_first_error"):
            entry["remat_first_error"] = r["remat_first_error"]
        if cls == "fail_both":
            # The same failure in both modes is torch-side skew; a different
            # one (another exception, another graph in an expected-output
            # diff) may hide a remat difference behind the skew.
            entry["same_error"] = (_norm_error((t or {}).get("error_text") or entry["torch_error"])
                                   == _norm_error((r or {}).get("error_text") or entry["remat_error"]))
            if not entry["same_error"]:
                entry["torch_error_text"] = (t or {}).get("error_text")
                entry["remat_error_text"] = (r or {}).get("error_text")
        if cls == "skipped" or (kt == "skipped" or kr == "skipped"):
            entry["skip_reason"] = (t or {}).get("skip_reason") or (r or {}).get("skip_reason")
        tests.append(entry)
    return {"tests": tests}


def summarize(tests: list[dict]) -> dict:
    s = {c: 0 for c in ("pass_both", "fail_both", "finding", "remat_only_pass", "skipped", "mismatch")}
    for t in tests:
        s[t["class"]] = s.get(t["class"], 0) + 1
    s["tests"] = len(tests)
    s["ran"] = sum(1 for t in tests if _kind(t["torch"]) in ("good", "bad")
                   or _kind(t["remat"]) in ("good", "bad"))
    s["fail_both_other_error"] = sum(1 for t in tests if t["class"] == "fail_both"
                                     and not t.get("same_error", True))
    s["tests_partitioned_by_remat"] = sum(1 for t in tests if t["remat_partitions"])
    s["graphs_partitioned_by_remat"] = sum(t["remat_partitions"] for t in tests)
    s["remat_partition_errors"] = sum(t["remat_partition_errors"] for t in tests)
    s["graphs_partitioned_torch_mode"] = sum(t["aot_partitions_torch"] for t in tests)
    s["unverified"] = sum(1 for t in tests if _kind(t["torch"]) == "good"
                          and _kind(t["remat"]) == "missing")
    return s


# --- reports -----------------------------------------------------------------------

def _md_cell(text) -> str:
    return str(text if text is not None else "").replace("|", "\\|").replace("\n", " ")[:400]


def write_markdown(report: dict, path: Path) -> None:
    lines = ["# torch test files with torch's and remat's partitioner", ""]
    env = report["environment"]
    lines += [f"- python: `{env['python']}`", f"- torch: {env.get('torch')}",
              f"- remat: {env.get('remat_file')} (version {env.get('remat_version')}, "
              f"reproduces torch {env.get('remat_reproduces')})",
              f"- started: {report['started']}, {report['seconds']:.0f} s", ""]
    lines += ["| file | tests | ran | pass both | torch-side (fail both; of which another error "
              "under remat) | findings | remat-only pass | skipped | mismatch | tests partitioned by "
              "remat | graphs partitioned by remat (torch mode: aot partitions) |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for f in report["files"]:
        s = f["summary"]
        lines.append(f"| {f['name']} | {s['tests']} | {s['ran']} | {s['pass_both']} "
                     f"| {s['fail_both']} ({s['fail_both_other_error']}) "
                     f"| **{s['finding']}** | {s['remat_only_pass']} | {s['skipped']} | {s['mismatch']} "
                     f"| {s['tests_partitioned_by_remat']} | {s['graphs_partitioned_by_remat']} "
                     f"({s['graphs_partitioned_torch_mode']}) |")
    lines.append("")
    for f in report["files"]:
        problems = f.get("problems", [])
        interesting = [t for t in f["tests"] if t["class"] in ("finding", "remat_only_pass", "mismatch")]
        other_err = [t for t in f["tests"] if t["class"] == "fail_both" and not t.get("same_error", True)]
        if not (problems or interesting or other_err or any(f["collect_errors"].values())):
            continue
        lines += [f"## {f['name']}", ""]
        for p in problems:
            lines.append(f"- **problem**: {p}")
        for mode, errs in f["collect_errors"].items():
            for e in errs[:5]:
                lines.append(f"- collection error ({mode}): `{_md_cell(e.get('nodeid'))}`: {_md_cell(e.get('error'))}")
        if problems or any(f["collect_errors"].values()):
            lines.append("")
        if interesting:
            lines += ["| class | test | torch | remat | error (remat mode) | remat partitions (errors) |",
                      "|---|---|---|---|---|---|"]
            for t in interesting:
                err = t.get("remat_error") or t.get("torch_error") or t.get("skip_reason")
                if t.get("remat_first_error") and t["remat_first_error"] not in (err or ""):
                    err = f"{err} [remat raised: {t['remat_first_error']}]"
                lines.append(f"| {t['class']} | `{_md_cell(t['test'])}` | {t['torch']} | {t['remat']} "
                             f"| {_md_cell(err)} | {t['remat_partitions']} ({t['remat_partition_errors']}) |")
            lines.append("")
        if other_err:
            lines += ["Failing in both modes, but not with the same error (details in report.json):", "",
                      "| test | torch error | remat error |", "|---|---|---|"]
            for t in other_err:
                lines.append(f"| `{_md_cell(t['test'])}` | {_md_cell(t['torch_error'])} | {_md_cell(t['remat_error'])} |")
            lines.append("")
    path.write_text("\n".join(lines) + "\n")


PLUGIN_RUN_HINT = "see the run's log"


def _problems(file_name: str, modes: dict) -> tuple[list[str], bool]:
    """Mode-level failures: a run that could not start, remat not installed."""
    problems, fatal = [], False
    for mode, run in modes.items():
        sess = run["session"]
        last = run["runs"][-1]
        if sess is None:
            problems.append(f"{mode} mode: the plugin never started (pytest rc {last['rc']}; {last['log']})")
            fatal = True
        elif sess.get("install_error"):
            problems.append(f"{mode} mode: remat could not be installed: {sess['install_error']}")
            fatal = True
        if any(r["timed_out"] for r in run["runs"]):
            problems.append(f"{mode} mode: {sum(r['timed_out'] for r in run['runs'])} run(s) killed at "
                            f"--timeout; restarted without the tests done")
        if any(r.get("crashed") for r in run["runs"]):
            problems.append(f"{mode} mode: {sum(bool(r.get('crashed')) for r in run['runs'])} run(s) "
                            f"died before their end; restarted without the tests done")
        if last["rc"] not in (0, 1, 5) and not last["timed_out"] and not last.get("crashed") \
                and not (last["rc"] == 2 and run["collect_errors"]):
            problems.append(f"{mode} mode: pytest exited {last['rc']} ({last['log']})")
    if "torch" in modes and "remat" in modes:
        if modes["remat"]["collect_errors"] and not modes["torch"]["collect_errors"]:
            problems.append("collection fails in remat mode only")
            fatal = True
    return problems, fatal


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="torch_suites.py",
        description="Run torch's own test files (pytest) with torch's partitioner and with remat's "
                    "(remat.torch.install(fallback=False)), and report per test: pass in both, fail in "
                    "both (torch-side skew), pass with torch but fail with remat (a finding), and how "
                    "many graphs remat partitioned.",
        epilog="Exit status: 0 no finding; 1 findings or tests not run in remat mode that passed with "
               "torch; 2 a mode could not run (remat not installable, pytest missing, collection "
               "failing in remat mode only). Details: docs/torch_suites.md.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("files", nargs="+", type=Path, help="torch test files (test_*.py), run one at a time")
    ap.add_argument("--python", default=sys.executable,
                    help="the interpreter of the environment under test (has torch and pytest)")
    ap.add_argument("--remat-path", metavar="DIR",
                    help="folder put first on PYTHONPATH in remat mode only (an unpacked remat wheel); "
                         "without it, remat must be importable in that environment")
    ap.add_argument("--pythonpath", metavar="DIR", action="append", default=[],
                    help="folder added to PYTHONPATH in both modes (e.g. one holding expecttest); repeatable")
    ap.add_argument("-k", metavar="EXPR", help="pytest -k expression, the same in both modes")
    ap.add_argument("--pytest-arg", metavar="ARG", action="append", default=[],
                    help="extra pytest argument for both modes, e.g. --pytest-arg=--deselect=ID; repeatable")
    ap.add_argument("--timeout", type=float, default=3600,
                    help="wall-clock limit in seconds of one pytest run (one file, one mode); 0: none")
    ap.add_argument("--test-timeout", type=float, default=0,
                    help="per-test limit in seconds (SIGALRM inside the run; fails the test, the run goes "
                         "on); 0: none")
    ap.add_argument("--max-restarts", type=int, default=2,
                    help="restarts of a run killed at --timeout, without the tests already done")
    ap.add_argument("--modes", default="torch,remat",
                    help="modes to run, comma-separated (torch,remat); a single mode gives outcomes only")
    ap.add_argument("--out", type=Path, default=Path("torch_suites_out"),
                    help="output folder: report.json, report.md, runs/")
    ap.add_argument("--label", default="", help="free text recorded in the report (e.g. the remat commit)")
    args = ap.parse_args(argv)

    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not modes or any(m not in MODES for m in modes):
        ap.error(f"--modes takes a comma-separated subset of {','.join(MODES)}")
    files = []
    for f in args.files:
        f = f.resolve()
        if not f.is_file():
            ap.error(f"no such test file: {f}")
        files.append(f)
    if shutil.which(args.python) is None and not Path(args.python).exists():
        ap.error(f"no such interpreter: {args.python}")

    out = args.out.resolve()
    runs_dir = out / "runs"
    plugin_dir = out / "_plugin"
    runs_dir.mkdir(parents=True, exist_ok=True)
    plugin_dir.mkdir(parents=True, exist_ok=True)
    (plugin_dir / f"{PLUGIN_NAME}.py").write_text(PLUGIN_SOURCE)

    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    t0 = time.time()
    report = {"started": started, "label": args.label, "argv": sys.argv, "files": [],
              "environment": {"python": args.python, "remat_path": args.remat_path,
                              "pythonpath": args.pythonpath, "k": args.k,
                              "timeout": args.timeout, "test_timeout": args.test_timeout}}
    any_fatal = False
    stems: dict[str, int] = {}
    for f in files:
        stem = f.stem
        if stem in stems:
            stems[stem] += 1
            stem = f"{stem}_{stems[stem]}"
        else:
            stems[stem] = 0
        print(f"== {f}", flush=True)
        per_mode = {}
        for mode in modes:
            per_mode[mode] = run_mode(args, f, mode, stem, plugin_dir, runs_dir)
            r = per_mode[mode]
            counts: dict[str, int] = {}
            for rec in r["results"].values():
                counts[rec["outcome"]] = counts.get(rec["outcome"], 0) + 1
            secs = sum(x["seconds"] for x in r["runs"])
            print(f"   {mode:5s}: {len(r['results'])} tests {dict(sorted(counts.items()))} "
                  f"in {secs:.0f} s", flush=True)
            sess = r["session"] or {}
            for key in ("torch", "remat_file", "remat_version", "remat_reproduces"):
                if key in sess:
                    report["environment"].setdefault(key, sess[key])
        torch_run = per_mode.get("torch") or {"collected": [], "results": {}}
        remat_run = per_mode.get("remat") or {"collected": [], "results": {}}
        cmp = classify(torch_run, remat_run, single=modes[0] if len(modes) == 1 else None)
        problems, fatal = _problems(f.name, per_mode)
        any_fatal |= fatal
        entry = {"name": f.name, "path": str(f), "summary": summarize(cmp["tests"]),
                 "problems": problems, "tests": cmp["tests"],
                 "collect_errors": {m: per_mode[m]["collect_errors"] for m in per_mode},
                 "outside_tests": {m: per_mode[m]["outside_tests"] for m in per_mode},
                 "runs": {m: per_mode[m]["runs"] for m in per_mode},
                 "sessions": {m: per_mode[m]["session"] for m in per_mode}}
        report["files"].append(entry)
        s = entry["summary"]
        print(f"   pass both {s['pass_both']}, fail both {s['fail_both']}, FINDINGS {s['finding']}, "
              f"remat-only pass {s['remat_only_pass']}, skipped {s['skipped']}, mismatch {s['mismatch']}; "
              f"remat partitioned {s['graphs_partitioned_by_remat']} graphs in "
              f"{s['tests_partitioned_by_remat']} tests", flush=True)
        for p in problems:
            print(f"   problem: {p}", flush=True)
        for t in cmp["tests"]:
            if t["class"] == "finding":
                print(f"   FINDING {t['test']}: {t['remat_error']}", flush=True)
    report["seconds"] = time.time() - t0
    totals = summarize([t for f in report["files"] for t in f["tests"]])
    report["summary"] = totals
    (out / "report.json").write_text(json.dumps(report, indent=1, default=str) + "\n")
    write_markdown(report, out / "report.md")
    print(f"report: {out / 'report.md'} and report.json; findings: {totals['finding']}", flush=True)
    if any_fatal:
        return 2
    if "remat" in modes and "torch" in modes and (totals["finding"] or totals["unverified"]):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
