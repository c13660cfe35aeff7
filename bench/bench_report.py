"""The HTML report on big graphs: time, memory and page size of `remat report`
against `remat partition` on the same synthetic graph (bench/synthetic.py).

Contract: for each size, one `remat report GRAPH -o PAGE` and one `remat
partition GRAPH`, each in its own process (wall time and the process's
maximum resident set size from wait4), and the page's size in bytes and per
node. The targets of issue 22 are a 100k-node report in under 10 s and
under 10 MB of HTML; the ratio to a plain partition in the same run says
what the report adds (torch's budget plans, each one more build and
simulation, dominate it). --write-docs writes docs/report.md's table
between its markers.

    python bench/bench_report.py                      # 10^4 and 10^5 nodes, printed
    python bench/bench_report.py --sizes 100000 --write-docs

Uses $REMAT_BUILD_DIR/remat, else `remat` on PATH.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import synthetic  # noqa: E402

DOC = os.path.join(HERE, "..", "docs", "report.md")
BEGIN, END = "<!-- bench_report: begin -->", "<!-- bench_report: end -->"


def remat_command() -> str:
    build = os.environ.get("REMAT_BUILD_DIR")
    exe = os.path.join(build, "remat") if build else shutil.which("remat")
    if not exe or not os.path.exists(exe):
        raise SystemExit("bench_report: no remat command (set REMAT_BUILD_DIR or install remat)")
    return exe


def measure(args: list[str]) -> tuple[float, int]:
    """Wall seconds and maximum resident set size (bytes) of one process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    if proc.returncode != 0:
        raise SystemExit(f"bench_report: {' '.join(args)} failed ({proc.returncode}): {err}")
    return seconds, usage.ru_maxrss * 1024


def row(exe: str, nodes: int, tmp: str) -> dict:
    graph, page = os.path.join(tmp, f"g{nodes}.json"), os.path.join(tmp, f"r{nodes}.html")
    print(f"[bench_report] {nodes} nodes: generating", file=sys.stderr, flush=True)
    synthetic.main(["--nodes", str(nodes), "-o", graph])
    print(f"[bench_report] {nodes} nodes: report and partition", file=sys.stderr, flush=True)
    report_s, report_rss = measure([exe, "report", graph, "-o", page, "--progress", "never"])
    partition_s, partition_rss = measure([exe, "partition", graph, "--progress", "never"])
    size = os.path.getsize(page)
    return {"nodes": nodes, "report_s": report_s, "report_rss": report_rss,
            "partition_s": partition_s, "partition_rss": partition_rss, "html": size}


def table(rows: list[dict]) -> str:
    lines = ["| nodes | report (s) | partition (s) | report / partition | report memory (MiB) "
             "| page (MB) | page bytes per node |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['nodes']} | {r['report_s']:.2f} | {r['partition_s']:.2f} "
                     f"| {r['report_s'] / r['partition_s']:.1f}x | {r['report_rss'] / 2**20:.0f} "
                     f"| {r['html'] / 1e6:.1f} | {r['html'] / r['nodes']:.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[10000, 100000])
    p.add_argument("--write-docs", action="store_true", help=f"update {os.path.relpath(DOC)}")
    a = p.parse_args(argv)
    exe = remat_command()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [row(exe, n, tmp) for n in a.sizes]
    text = table(rows)
    print(text)
    if a.write_docs:
        with open(DOC) as f:
            doc = f.read()
        start, end = doc.index(BEGIN) + len(BEGIN), doc.index(END)
        with open(DOC, "w") as f:
            f.write(doc[:start] + "\n" + text + "\n" + doc[end:])
    big = [r for r in rows if r["nodes"] >= 100000]
    return 0 if all(r["report_s"] < 10 and r["html"] < 10e6 for r in big) else 1


if __name__ == "__main__":
    raise SystemExit(main())
