"""The peak-memory optimizer at scale: `remat partition --peak-budget` on real
joint graphs of ~2k to ~50k nodes (bench/graphs/, made by bench/scale_graphs.py).

Contract: for each stored graph (decompressed to a temporary file), through
the `remat` command ($REMAT_BUILD_DIR/remat, else `remat` on PATH):

* the plain partition (`remat partition G --timings`): its engine seconds
  (the result's "seconds") and its simulated peak;
* the smallest peak exact's search finds (the least reachable only where
  its bound proves it) and a proven lower bound on any valid plan's peak,
  from the error of `--peak-budget 1 --peak-search exact` (run with
  --floor-seconds);
* at --limits limits evenly spread from the plain plan's peak down to that
  smallest peak found: `--peak-search fast`, interleaved with the plain
  partition --repeat times (medians; fast's engine time over plain's is the
  ratio, both from the same run; the same of the whole commands' wall times,
  process start and the graph's reading and writing included, is the
  command ratio), then `--peak-search torch_plans` and
  `--peak-search exact --peak-search-seconds S` once each.

Every command runs in a subprocess under a wall-clock guard (--timeout; exact
gets S more), so a slow case is reported "timed out" and the table goes on.
A limit a search cannot reach is reported "unreachable". The issue's targets
(remat issue 35): fast within 10x a plain partition (aim 5x) at every limit,
within 5% of exact's recompute wherever exact proves optimality, and exact
proving optimality or reporting a gap within 60 s on ~10k nodes.

    python bench/bench_scale.py                  # every stored graph, printed
    python bench/bench_scale.py --write-docs     # also docs/scale.{md,json}
    python bench/bench_scale.py --quick          # the smallest graph, tiny limits and seconds
    python bench/bench_scale.py --from-json docs/scale.json --write-docs
    python bench/bench_scale.py --json a.json ...; ... --json b.json ...
    python bench/bench_scale.py --from-json a.json --from-json b.json --write-docs
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
GRAPH_DIR = os.path.join(HERE, "graphs")
sys.path.insert(0, HERE)

from bench_partition import remat_command  # noqa: E402

TIMED_OUT, UNREACHABLE, FAILED, SKIPPED = "timed out", "unreachable", "failed", "skipped"


# --------------------------------------------------------------------------- graphs


def stored_graphs(directory: str = GRAPH_DIR) -> list[str]:
    """The stored graphs (<family>_<nodes>.json.gz), smallest first."""
    if not os.path.isdir(directory):
        return []
    names = [n for n in os.listdir(directory) if re.fullmatch(r"[a-z0-9]+_\d+\.json\.gz", n)]
    return [os.path.join(directory, n) for n in sorted(names, key=lambda n: (graph_nodes(n), n))]


def graph_name(path: str) -> str:
    return os.path.basename(path).removesuffix(".gz").removesuffix(".json")


def graph_nodes(path: str) -> int:
    return int(graph_name(path).rsplit("_", 1)[1])


def decompress(path: str, folder: str) -> str:
    out = os.path.join(folder, graph_name(path) + ".json")
    with gzip.open(path, "rb") as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return out


# --------------------------------------------------------------------------- the command


def run_remat(exe: str, graph: str, args: list[str], timeout: float, folder: str) -> dict:
    """One `remat partition` run: {"status": "ok", "result": ...}, or a status
    (timed out, unreachable with the error's message, failed) and a message."""
    out = os.path.join(folder, "result.json")
    if os.path.exists(out):
        os.remove(out)
    cmd = [exe, "partition", graph, "--timings", "-o", out, *args]
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"status": TIMED_OUT, "message": f"over {timeout:g} s"}
    wall = time.perf_counter() - start
    message = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else ""
    if proc.returncode == 0:
        with open(out) as f:
            return {"status": "ok", "result": json.load(f), "wall_seconds": wall}
    if "no plan fits" in message:
        return {"status": UNREACHABLE, "message": message}
    return {"status": FAILED, "message": f"exit {proc.returncode}: {message}"}


def parse_floor(message: str) -> tuple[int | None, int | None]:
    """The smallest peak found and the proven lower bound (bytes) an
    unreachable --peak-budget names; None where the message has none."""
    smallest = re.search(r"smallest (?:reachable peak|peak found) is [^(]*\((\d+) bytes\)", message)
    floor = int(smallest.group(1)) if smallest else None
    if "no valid plan has a smaller peak (proven)" in message:
        return floor, floor
    bound = re.search(r"no valid plan has a peak below [^(]*\((\d+) bytes\) \(proven\)", message)
    return floor, int(bound.group(1)) if bound else None


def spread(high: int, low: int, count: int) -> list[int]:
    """`count` limits from `high` down to `low`, evenly spaced, distinct."""
    if count <= 1 or high <= low:
        return [high]
    return sorted({round(high - (high - low) * i / (count - 1)) for i in range(count)}, reverse=True)


# --------------------------------------------------------------------------- one graph


def _search(outcome: dict) -> dict:
    """What a table row keeps of one peak search."""
    if outcome["status"] != "ok":
        return {"status": outcome["status"], "message": outcome.get("message", "")}
    r = outcome["result"]
    ps = r.get("peak_search") or {}
    return {
        "status": "ok",
        "seconds": r["seconds"],
        "wall_seconds": outcome.get("wall_seconds"),
        "recompute": r["recompute_runtime"],
        "peak": r["memory"]["peak_bytes"],
        "optimal": bool(ps.get("optimal")),
        "bound": ps.get("recompute_lower_bound"),
        "stopped_by": ps.get("stopped_by"),
    }


def fast_against_plain(exe: str, graph: str, limit: int, repeat: int, timeout: float, folder: str) -> dict:
    """fast at `limit` and the plain partition, interleaved `repeat` times:
    medians of both engine times, and of both whole commands' wall times
    (a timed-out or failed fast ends it)."""
    plain, fast, plain_wall, fast_wall, last = [], [], [], [], None
    for _ in range(repeat):
        p = run_remat(exe, graph, [], timeout, folder)
        if p["status"] == "ok":
            plain.append(p["result"]["seconds"])
            plain_wall.append(p["wall_seconds"])
        last = _search(run_remat(exe, graph, ["--peak-budget", str(limit), "--peak-search", "fast"],
                                 timeout, folder))
        if last["status"] != "ok":
            break
        fast.append(last["seconds"])
        fast_wall.append(last["wall_seconds"])
    last["plain_seconds"] = statistics.median(plain) if plain else None
    last["plain_wall_seconds"] = statistics.median(plain_wall) if plain_wall else None
    if fast:
        last["seconds"] = statistics.median(fast)
        last["wall_seconds"] = statistics.median(fast_wall)
    return last


def bench_graph(exe: str, path: str, args: argparse.Namespace) -> dict:
    name = graph_name(path)
    with tempfile.TemporaryDirectory() as folder:
        graph = decompress(path, folder)
        log(f"{name}: plain partition")
        plain = run_remat(exe, graph, [], args.timeout, folder)
        if plain["status"] != "ok":
            return {"graph": name, "nodes": graph_nodes(path), "error": plain.get("message", plain["status"])}
        plain_peak = plain["result"]["memory"]["peak_bytes"]
        log(f"{name}: smallest peak found")
        low = run_remat(exe, graph, ["--peak-budget", "1", "--peak-search", "exact",
                                     "--peak-search-seconds", str(args.floor_seconds)],
                        args.timeout + args.floor_seconds, folder)
        floor, floor_bound = parse_floor(low.get("message", "")) if low["status"] == UNREACHABLE else (None, None)
        rows = []
        for limit in spread(plain_peak, floor if floor is not None else plain_peak, args.limits):
            given_up = args.skip_after_timeout and any(r["fast"]["status"] == TIMED_OUT for r in rows)
            rows.append(bench_limit(exe, graph, name, limit, args, folder, run_fast=not given_up))
    return {"graph": name, "nodes": graph_nodes(path), "plain_peak": plain_peak,
            "plain_seconds": plain["result"]["seconds"],
            "plain_recompute": plain["result"]["recompute_runtime"], "floor": floor,
            "floor_bound": floor_bound, "floor_status": low["status"], "rows": rows}


def bench_limit(exe: str, graph: str, name: str, limit: int, args: argparse.Namespace, folder: str,
                run_fast: bool = True) -> dict:
    budget = ["--peak-budget", str(limit)]
    fast = {"status": SKIPPED, "message": "fast timed out at a larger limit (--skip-after-timeout)"}
    if run_fast:
        log(f"{name} @ {limit}: fast and plain x{args.repeat}")
        fast = fast_against_plain(exe, graph, limit, args.repeat, args.timeout, folder)
    log(f"{name} @ {limit}: torch_plans")
    torch_plans = _search(run_remat(exe, graph, [*budget, "--peak-search", "torch_plans"], args.timeout, folder))
    exact = {"status": "not run", "message": f"graphs over {args.exact_max_nodes} nodes"}
    if graph_nodes_of(name) <= args.exact_max_nodes:
        log(f"{name} @ {limit}: exact, {args.seconds:g} s")
        exact = _search(run_remat(exe, graph, [*budget, "--peak-search", "exact", "--peak-search-seconds",
                                               str(args.seconds)], args.timeout + args.seconds, folder))
    return {"limit": limit, "fast": fast, "torch_plans": torch_plans, "exact": exact,
            "gap_percent": gap_percent(fast, exact)}


def graph_nodes_of(name: str) -> int:
    return int(name.rsplit("_", 1)[1])


def gap_percent(fast: dict, exact: dict) -> float | None:
    """fast's recompute above exact's, in percent, where exact proved optimality."""
    if fast["status"] != "ok" or exact["status"] != "ok" or not exact["optimal"]:
        return None
    if exact["recompute"] == 0:
        return 0.0 if fast["recompute"] == 0 else math.inf
    return 100.0 * (fast["recompute"] - exact["recompute"]) / exact["recompute"]


# --------------------------------------------------------------------------- the table


COLUMNS = ("graph", "nodes", "limit (MiB)", "plain (ms)", "fast (ms)", "fast / plain", "fast / plain (command)",
           "fast recompute",
           "fast peak (MiB)", "torch_plans recompute", "exact recompute", "exact optimal", "exact bound",
           "fast over exact")


def _mib(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**20:.3f}"


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.6g}"


def _recompute(s: dict) -> str:
    return _num(s["recompute"]) if s["status"] == "ok" else s["status"]


def table_row(g: dict, r: dict) -> list[str]:
    fast, tp, exact = r["fast"], r["torch_plans"], r["exact"]
    plain_ms = fast.get("plain_seconds") or g.get("plain_seconds")  # the graph's first run where fast was skipped
    fast_ok = fast["status"] == "ok"
    ratio = f"{fast['seconds'] / plain_ms:.1f}x" if fast_ok and plain_ms else "-"
    command = command_ratio(fast)
    gap = r["gap_percent"]
    return [
        g["graph"], f"{g['nodes']:,}", _mib(r["limit"]),
        "-" if plain_ms is None else f"{plain_ms * 1e3:.1f}",
        f"{fast['seconds'] * 1e3:.0f}" if fast_ok else fast["status"], ratio,
        "-" if command is None else f"{command:.1f}x",
        _recompute(fast), _mib(fast["peak"]) if fast_ok else "-",
        _recompute(tp), _recompute(exact),
        ("yes" if exact["optimal"] else f"no ({exact['stopped_by'] or 'gave up'})") if exact["status"] == "ok" else "-",
        _num(exact["bound"]) if exact["status"] == "ok" else "-",
        "-" if gap is None else f"{gap:+.1f}%",
    ]


def command_ratio(fast: dict) -> float | None:
    """fast's whole command over the plain one's (wall time: starting the
    process, reading the graph, partitioning, writing the result), where
    both were timed (runs saved before the column have none)."""
    if fast["status"] != "ok" or not fast.get("wall_seconds") or not fast.get("plain_wall_seconds"):
        return None
    return fast["wall_seconds"] / fast["plain_wall_seconds"]


def markdown(graphs: list[dict]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for g in graphs:
        if "error" in g:
            lines.append(f"| {g['graph']} | {g['nodes']:,} | plain partition failed: {g['error']} |")
            continue
        lines += ["| " + " | ".join(table_row(g, r)) + " |" for r in g["rows"]]
    return "\n".join(lines)


def floors(graphs: list[dict]) -> str:
    lines = ["| graph | nodes | plain peak (MiB) | plain recompute | smallest peak found (MiB) | "
             "no plan below (MiB, proven) |", "|---|---|---|---|---|---|"]
    for g in graphs:
        if "error" not in g:
            floor = _mib(g["floor"]) if g["floor"] is not None else g["floor_status"]
            lines.append(f"| {g['graph']} | {g['nodes']:,} | {_mib(g['plain_peak'])} | {_num(g['plain_recompute'])} "
                         f"| {floor} | {_mib(g['floor_bound'])} |")
    return "\n".join(lines)


def targets(graphs: list[dict]) -> str:
    """The issue's three targets, counted over the table's rows."""
    rows = [r for g in graphs for r in g.get("rows", [])]
    timed = [r["fast"]["seconds"] / r["fast"]["plain_seconds"] for r in rows
             if r["fast"]["status"] == "ok" and r["fast"].get("plain_seconds")]
    commands = [c for c in (command_ratio(r["fast"]) for r in rows) if c is not None]
    gaps = [r["gap_percent"] for r in rows if r["gap_percent"] is not None]
    big = [(g["graph"], r["exact"]) for g in graphs if 8000 <= g["nodes"] <= 12000 for r in g.get("rows", [])]
    both = [r for r in rows if r["fast"]["status"] == r["exact"]["status"] == "ok" and not r["exact"]["optimal"]]
    # A bound of 0 proves nothing; the issue asks for an answer within 60 s.
    answered = sum(1 for _, e in big if e["status"] == "ok" and (e["optimal"] or (e["bound"] or 0) > 0)
                   and e["seconds"] <= 60)
    missed = {status: sum(r["fast"]["status"] == status for r in rows) for status in (TIMED_OUT, FAILED, SKIPPED)}
    return "\n".join([
        f"- fast within 10x a plain partition: {sum(t <= 10 for t in timed)} of {len(rows)} limits "
        f"(within 5x: {sum(t <= 5 for t in timed)}"
        + "".join(f"; fast {status} at {n}" for status, n in missed.items() if n) + ")",
        f"- the same, whole commands (what a `remat partition` user waits for: the process, reading the "
        f"graph, writing the result): {sum(c <= 10 for c in commands)} of {len(commands)} limits "
        f"(within 2x: {sum(c <= 2 for c in commands)})",
        f"- fast within 5% of a proven optimum: {sum(g <= 5 for g in gaps)} of {len(gaps)} limits where exact "
        f"proved one",
        f"- where exact proved nothing: fast's recompute at most the plan exact found at "
        f"{sum(r['fast']['recompute'] <= r['exact']['recompute'] for r in both)} of {len(both)} limits "
        f"where both returned a plan",
        f"- fast beaten by its own plan from another limit (that plan fits this limit with less "
        f"recompute): {', '.join(beaten(graphs)) or 'nowhere'}",
        f"- exact proved optimality or a recompute bound above 0 within 60 s on the ~10k-node graphs: {answered} of "
        f"{len(big)} limits",
    ])


def built(exe: str) -> str:
    """When the command was built (its file's time, kept by the pinned copy, UTC)."""
    return datetime.datetime.fromtimestamp(os.stat(exe).st_mtime, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M")


def beaten(graphs: list[dict]) -> list[str]:
    """`graph @ limit MiB` wherever fast returned more recompute than a plan
    it returned at another limit whose peak fits this one."""
    out = []
    for g in graphs:
        plans = [(r["limit"], r["fast"]) for r in g.get("rows", []) if r["fast"]["status"] == "ok"]
        for limit, fast in plans:
            if any(f["peak"] <= limit and f["recompute"] < fast["recompute"] for _, f in plans):
                out.append(f"{g['graph']} @ {_mib(limit)} MiB")
    return out


def machine() -> dict:
    model = platform.processor() or "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            found = re.search(r"^model name\s*:\s*(.+)$", f.read(), re.M)
            model = found.group(1).strip() if found else model
    except OSError:
        pass
    return {"nproc": os.cpu_count(), "cpu": model}


def doc(data: dict) -> str:
    m, s = data["machine"], data["settings"]
    note = f"\n{data['note']}\n" if data.get("note") else ""
    built_at = f" (built {data['remat_built']} UTC)" if data.get("remat_built") else ""
    skip = (",\nand fast skipped at a graph's smaller limits once it timed out at a\nlarger one"
            " (--skip-after-timeout)" if s.get("skip_after_timeout") else "")
    return f"""# The peak-memory optimizer at scale

`remat partition --peak-budget` on real joint graphs of ~2k to ~50k nodes
(remat issue 35): deep stacks of corpus blocks (transformer, U-Net, MoE,
ResNet; bench/graphs/, how they are made in bench/scale_graphs.py),
against the plain partition of the same graph in the same run.
{note}
Made by `python bench/bench_scale.py --write-docs` (bench/bench_scale.py says
what each column measures) on {m['nproc']} CPUs ({m['cpu']}), remat command
{data['remat']}{built_at}, with --repeat {s['repeat']}, --limits {s['limits']},
--seconds {s['seconds']:g} (exact's time limit), --timeout {s['timeout']:g}
(the wall-clock guard of every command; exact gets its seconds more),
--floor-seconds {s['floor_seconds']:g}, exact on graphs of at most
{s['exact_max_nodes']:,} nodes{skip}. Times are the engine's own ("seconds"
of `--timings`); fast / plain is the ratio of their medians; "(command)" is
the ratio of the whole commands' median wall times (the process, reading the
graph, writing the result: what a `remat partition` user waits for).

## Targets

{targets(data['graphs'])}

## The range searched

{floors(data['graphs'])}

## At each limit

{markdown(data['graphs'])}

"fast over exact": fast's estimated recompute above exact's, where exact
proved its plan optimal. "exact bound": the recompute no plan that fits
can go below (proven). To regenerate: `python bench/scale_graphs.py --write`
(the graphs), then the command above.
"""


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="a smoke run: the smallest graph, 2 limits, --seconds 0.5, --timeout 20, --repeat 1")
    ap.add_argument("--graph", action="append", help="a stored graph (.json.gz) to bench instead of all")
    ap.add_argument("--max-nodes", type=int, default=None, help="skip graphs of more nodes")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--limits", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=60.0, help="exact's --peak-search-seconds")
    ap.add_argument("--floor-seconds", type=float, default=10.0,
                    help="--peak-search-seconds of the smallest-reachable-peak query")
    ap.add_argument("--timeout", type=float, default=300.0, help="wall-clock guard of each command (s)")
    ap.add_argument("--skip-after-timeout", action="store_true",
                    help="once fast times out on a graph, skip it at that graph's smaller limits")
    ap.add_argument("--exact-max-nodes", type=int, default=10**9, help="run exact only on graphs this small")
    ap.add_argument("--note", default="", help="a paragraph for docs/scale.md (e.g. which commit)")
    ap.add_argument("--write-docs", action="store_true", help="write docs/scale.md and docs/scale.json")
    ap.add_argument("--json", help="also save the raw rows here, graph by graph")
    ap.add_argument("--from-json", action="append",
                    help="render saved rows (--json, docs/scale.json) instead of running; given more than "
                         "once, the runs' graphs in one table (the first run's settings)")
    args = ap.parse_args(argv)
    if args.quick:
        args.repeat, args.limits, args.seconds, args.floor_seconds = 1, 2, 0.5, 0.5
        args.timeout = min(args.timeout, 20.0)
    if args.from_json:
        runs = []
        for path in args.from_json:
            with open(path) as f:
                runs.append(json.load(f))
        data = {**runs[0], "graphs": [g for run in runs for g in run["graphs"]]}
        data["note"] = args.note or data.get("note", "")
    else:
        exe = remat_command()
        if exe is None:
            log("no remat command (set REMAT_BUILD_DIR or install remat)")
            return 1
        with tempfile.TemporaryDirectory() as pin:
            data = run_all(exe, pinned(exe, pin), args)
    print(floors(data["graphs"]) + "\n\n" + markdown(data["graphs"]) + "\n\n" + targets(data["graphs"]))
    if args.write_docs:
        write(os.path.join(ROOT, "docs", "scale.json"), json.dumps(data, indent=1) + "\n")
        write(os.path.join(ROOT, "docs", "scale.md"), doc(data))
    return 0


def pinned(exe: str, folder: str) -> str:
    """A copy of the command that the run uses throughout: a build folder
    relinked mid-run (by someone else) would otherwise mix two builds."""
    copy = os.path.join(folder, os.path.basename(exe))
    shutil.copy2(exe, copy)
    return copy


def run_all(exe: str, pinned_exe: str, args: argparse.Namespace) -> dict:
    """Every graph, timed with `pinned_exe`; `exe` is what the rows name."""
    paths = args.graph or stored_graphs()
    if args.max_nodes is not None:
        paths = [p for p in paths if graph_nodes(p) <= args.max_nodes]
    if args.quick:
        paths = paths[:1]
    settings = {k: getattr(args, k) for k in ("repeat", "limits", "seconds", "floor_seconds", "timeout",
                                               "exact_max_nodes", "skip_after_timeout")}
    data = {"machine": machine(), "remat": exe, "remat_built": built(pinned_exe), "note": args.note,
            "settings": settings, "graphs": []}
    for p in paths:
        data["graphs"].append(bench_graph(pinned_exe, p, args))
        for path in saved_json(args):  # graph by graph, so a long run is never lost
            write(path, json.dumps(data, indent=1) + "\n")
    return data


def saved_json(args: argparse.Namespace) -> list[str]:
    return ([args.json] if args.json else []) + ([os.path.join(ROOT, "docs", "scale.json")] if args.write_docs else [])


def write(path: str, text: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main())
