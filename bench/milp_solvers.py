"""Solves MPS files with three MILP solvers and prints the results as JSON.

Contract: `python bench/milp_solvers.py [--seconds S] [--milp-bench EXE]
FILE.mps...` solves each file, one solver after another, single-threaded,
cold (no start solution), relative and absolute gap 1e-9 (exact mode's), a
wall-time limit of S seconds (default 60) each:

* "remat": EXE (bench/cpp/milp_bench.cc: CBC through remat's own Milp, as
  exact mode configures it), when given;
* "cbc": the `cbc` command (Debian's coinor-cbc, CbcSolver's defaults:
  preprocessing and the full set of cut generators), when on PATH;
* "highs": HiGHS through highspy, when this interpreter can import it.

It prints (or writes to -o FILE) one JSON object: {"versions": {...}, "files": [{"file", "rows",
"columns", "<solver>": {"status", "objective", "seconds", "nodes"}}]}, with
status one of optimal / feasible / infeasible / unknown and objective null
without a solution. The seconds are each solver's own solve time (cbc's
"Wallclock seconds", printed to 0.01 s; HiGHS' run; Milp's), not process
start or reading.

bench/bench_memory.py runs it under an interpreter that has highspy
(--highs-python), since highspy is no dependency of remat's environments:

    python -m venv /tmp/highs && /tmp/highs/bin/pip install highspy
    /tmp/highs/bin/python bench/milp_solvers.py --milp-bench build/bench/cpp/remat_milp_bench /tmp/dump/*.mps
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time

GAP = 1e-9


def _size(path: str) -> tuple[int, int]:
    """(rows, columns) of a free-MPS file as Milp::write_mps writes it."""
    rows, cols, section = 0, set(), None
    with open(path) as f:
        for line in f:
            if not line.startswith(" "):
                section = line.split()[0] if line.strip() else section
                continue
            parts = line.split()
            if section == "ROWS" and parts[0] != "N":
                rows += 1
            elif section == "COLUMNS" and "MARKER" not in line:
                cols.add(parts[0])
    return rows, len(cols)


def solve_remat(exe: str, path: str, seconds: float) -> dict:
    r = subprocess.run([exe, path, str(seconds)], capture_output=True, text=True,
                       timeout=seconds * 3 + 60)
    r.check_returncode()
    out = json.loads(r.stdout)
    sol = out["status"] in ("optimal", "feasible")
    return {"status": out["status"], "objective": out["objective"] if sol else None,
            "seconds": out["seconds"], "nodes": out["nodes"]}


def solve_cbc(exe: str, path: str, seconds: float) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".sol") as sol:
        r = subprocess.run([exe, path, "-sec", str(seconds), "-ratioGap", str(GAP), "-allowableGap", str(GAP),
                            "-threads", "0", "-solve", "-solution", sol.name], capture_output=True, text=True,
                           timeout=seconds * 3 + 60)
        log = r.stdout
    m = re.search(r"Result - (.*)", log)
    result = m.group(1).strip() if m else ""
    if result.startswith("Optimal"):
        status = "optimal"
    elif "infeasible" in result.lower() or "Problem is infeasible" in log:
        status = "infeasible"
    elif "Stopped on time" in result:
        status = "feasible" if re.search(r"Objective value:\s+(\S+)", log) else "unknown"
    else:
        status = "unknown"
    obj = re.search(r"Objective value:\s+(\S+)", log)
    nodes = re.search(r"Enumerated nodes:\s+(\d+)", log)
    wall = re.search(r"\(Wallclock seconds\):\s+([\d.]+)", log)
    return {"status": status, "objective": float(obj.group(1)) if obj and status in ("optimal", "feasible") else None,
            "seconds": float(wall.group(1)) if wall else None, "nodes": int(nodes.group(1)) if nodes else None,
            "result": result}


def solve_highs(highspy, path: str, seconds: float) -> dict:
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", float(seconds))
    h.setOptionValue("mip_rel_gap", GAP)
    h.setOptionValue("mip_abs_gap", GAP)
    h.setOptionValue("threads", 1)
    h.readModel(path)
    t = time.perf_counter()
    h.run()
    wall = time.perf_counter() - t
    st = h.getModelStatus()
    info = h.getInfo()
    name = h.modelStatusToString(st).lower()
    has = info.primal_solution_status == 2  # kSolutionStatusFeasible
    if st == highspy.HighsModelStatus.kOptimal:
        status = "optimal"
    elif "infeasible" in name:
        status = "infeasible"
    else:
        status = "feasible" if has else "unknown"
    return {"status": status, "objective": info.objective_function_value if has else None,
            "seconds": wall, "nodes": int(info.mip_node_count)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("files", nargs="+")
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--milp-bench", help="bench/cpp's remat_milp_bench")
    p.add_argument("-o", "--output", help="write the JSON here (default stdout; HiGHS prints its banner there)")
    a = p.parse_args(argv)
    cbc = shutil.which("cbc")
    try:
        import highspy
    except ImportError:
        highspy = None
    versions = {}
    if cbc:
        r = subprocess.run([cbc, "-quit"], capture_output=True, text=True)
        m = re.search(r"Version:\s*(\S+)", r.stdout)
        versions["cbc"] = m.group(1) if m else "?"
    if highspy is not None:
        from importlib.metadata import version
        versions["highs"] = version("highspy")
    out = []
    for path in a.files:
        rows, cols = _size(path)
        row = {"file": path, "rows": rows, "columns": cols}
        if a.milp_bench:
            row["remat"] = solve_remat(a.milp_bench, path, a.seconds)
        if cbc:
            row["cbc"] = solve_cbc(cbc, path, a.seconds)
        if highspy is not None:
            row["highs"] = solve_highs(highspy, path, a.seconds)
        print(f"[milp] {path}: " + ", ".join(f"{k} {row[k]['status']} {row[k]['objective']} {row[k]['seconds']}"
                                             for k in ("remat", "cbc", "highs") if k in row), file=sys.stderr)
        out.append(row)
    doc = {"versions": versions, "files": out}
    if a.output:
        with open(a.output, "w") as f:
            json.dump(doc, f)
    else:
        json.dump(doc, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
