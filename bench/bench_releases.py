"""remat vs each supported torch release's own partitioner: bench_partition.py
run once per release, in that release's environment, one table per release.

Contract: for each `--venv RELEASE=PYTHON`, runs `PYTHON bench/bench_partition.py
--rows-json ...` with the arguments after `--` (default: every case, 3 remat
runs and 1 torch run per case, no scaling runs), then writes
docs/performance_releases.md (with --write-docs; what follows the NOTES
marker in it is kept) or prints it: per release,
every row's torch time, remat's end-to-end drop-in time and the speedup, and
whether the graphs are identical. Speedups are ratios measured in the same
process. Exits 1 when a row of any release is slower end to end than that
release's partitioner or gives different graphs (rows marked deliberate
excepted, as in bench_partition.py).

    python bench/bench_releases.py --venv 2.15=/work/venvs/torch-2.15.0/bin/python \\
        --venv 2.14=... [--pythonpath build/python] [--keep DIR] [--write-docs] [-- --only transformer_4]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DOC = os.path.join(HERE, "..", "docs", "performance_releases.md")
DEFAULT_ARGS = ["--repeat", "3", "--torch-repeat", "1", "--scaling"]
NOTES = "<!-- notes: kept by bench_releases.py -->"


def run_release(python: str, args: list[str], pythonpath: str | None) -> dict:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = os.path.abspath(pythonpath) + os.pathsep + env.get("PYTHONPATH", "")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "rows.json")
        proc = subprocess.run([python, os.path.join(HERE, "bench_partition.py"),
                               "--rows-json", out, *args], env=env)
        if not os.path.exists(out):
            raise SystemExit(f"bench_releases: {python} wrote no rows (exit {proc.returncode})")
        with open(out) as f:
            return json.load(f)


def faster_and_same(row: dict) -> bool:
    """A row passes when the drop-in is faster and gives the same graphs (or
    differs deliberately), or when remat refuses the graph as documented
    (install() then runs that release's own partitioner: torch's time)."""
    if "refused" in row:
        return True
    return row["e2e"] < row["torch"] and (row["identical"] or row.get("deliberate", False))


def table(result: dict) -> str:
    lines = ["| graph | nodes | torch (s) | remat end-to-end (s) | speedup | identical |",
             "|---|---|---|---|---|---|"]
    for r in result["rows"]:
        if "refused" in r:
            lines.append(f"| {r['graph']} | {r['nodes']} | {r['torch']:.4f} | refused: torch's "
                         f"partitioner runs (docs/torch-releases.md) | - | - |")
            continue
        same = "yes" if r["identical"] else "no (deliberate)" if r.get("deliberate") else "NO"
        lines.append(f"| {r['graph']} | {r['nodes']} | {r['torch']:.4f} | {r['e2e']:.4f} "
                     f"| {r['torch'] / r['e2e']:.1f}x | {same} |")
    return "\n".join(lines)


def summary(results: dict[str, dict]) -> str:
    lines = ["| release | torch | rows | slowest speedup end to end | every row faster and identical |",
             "|---|---|---|---|---|"]
    for release, res in results.items():
        rows = [r for r in res["rows"] if "refused" not in r]
        worst = min(rows, key=lambda r: r["torch"] / r["e2e"])
        ok = all(faster_and_same(r) for r in rows)
        refused = len(res["rows"]) - len(rows)
        lines.append(f"| {release} | {res['torch']} | {len(rows)}{f' (+{refused} refused)' if refused else ''} "
                     f"| {worst['torch'] / worst['e2e']:.1f}x ({worst['graph']}) | {'yes' if ok else 'NO'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    extra = DEFAULT_ARGS
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1:]
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--venv", action="append", required=True, metavar="RELEASE=PYTHON",
                   help="a release and its environment's python (repeatable)")
    p.add_argument("--pythonpath", help="put this remat package first (e.g. build/python)")
    p.add_argument("--write-docs", action="store_true", help=f"write {os.path.relpath(DOC)}")
    p.add_argument("--keep", metavar="DIR",
                   help="keep each release's rows in DIR/RELEASE.json and reuse them on a rerun "
                        "(a full run takes about 20 minutes per release; an interrupted one "
                        "resumes at the first release not yet kept)")
    a = p.parse_args(argv)
    results = {}
    for item in a.venv:
        release, _, python = item.partition("=")
        if not python:
            p.error(f"--venv {item}: expected RELEASE=PYTHON")
        kept = os.path.join(a.keep, f"{release}.json") if a.keep else None
        if kept and os.path.exists(kept):
            print(f"[bench_releases] torch {release}: reusing {kept}", file=sys.stderr, flush=True)
            with open(kept) as f:
                results[release] = json.load(f)
            continue
        print(f"[bench_releases] torch {release}: {python}", file=sys.stderr, flush=True)
        results[release] = run_release(python, extra, a.pythonpath)
        if kept:
            os.makedirs(a.keep, exist_ok=True)
            with open(kept + ".tmp", "w") as f:
                json.dump(results[release], f)
            os.replace(kept + ".tmp", kept)
    text = ("# Performance per torch release\n\n"
            "Generated by `python bench/bench_releases.py --write-docs` on this project's 2-core "
            "machine: `bench/bench_partition.py " + " ".join(extra) + "` under each supported "
            "release, in that release's own environment. *torch* is that release's "
            "`min_cut_rematerialization_partition` (or `default_partition`); *remat end-to-end* "
            "is the drop-in reproducing that release (FX in, FX out); medians; speedups are "
            "ratios measured in the same process. *identical* compares the forward and backward "
            "graphs node by node.\n\n" + summary(results) + "\n")
    for release, res in results.items():
        text += f"\n## torch {res['torch']}\n\n" + table(res) + "\n"
    print(text)
    if a.write_docs:
        # Notes written by hand below the marker (rechecks, what the run does
        # not cover) outlive a rerun.
        notes = ""
        if os.path.exists(DOC):
            with open(DOC) as f:
                old = f.read()
            if NOTES in old:
                notes = "\n" + old[old.index(NOTES):]
        with open(DOC, "w") as f:
            f.write(text + notes)
    ok = all(faster_and_same(r) for res in results.values() for r in res["rows"])
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
