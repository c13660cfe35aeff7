"""Runs sync_worker.py's ranks as real processes and hands their results to
the tests (test_sync_multiprocess.py, test_release_sync.py).

Contract:
  * `results(world, tmp_path_factory)` is every rank's results (a list of
    dicts, by rank) of one world of `world` ranks (gloo on 127.0.0.1), run
    once per pytest session and shared by every test that asks.
  * A world never outlives its limits, and its failure says where it was:
      - a rank that fails (its traceback, including a collective that timed
        out after COLLECTIVE_TIMEOUT_S because the ranks fell out of step)
        fails the world at once; the other ranks are killed;
      - when no rank has moved to its next step for STALL_S seconds, or the
        world has run for DEADLINE_S, every rank is killed and the world
        fails naming each rank's last step;
    each rank reports its step (rank<R>.step) before every partition it runs,
    and the ranks still running are asked for their Python stacks, which the
    failure shows too.
    Both limits can be raised by REMAT_SYNC_STALL_S / REMAT_SYNC_DEADLINE_S
    on a slow machine; the collective timeout by REMAT_SYNC_COLLECTIVE_TIMEOUT_S.
  * Ranks are forked from a fork server that imported torch once: importing
    torch in each rank would cost more than the test itself.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import socket
import time
from pathlib import Path

import pytest

COLLECTIVE_TIMEOUT_S = float(os.environ.get("REMAT_SYNC_COLLECTIVE_TIMEOUT_S", "45"))
STALL_S = float(os.environ.get("REMAT_SYNC_STALL_S", "90"))
DEADLINE_S = float(os.environ.get("REMAT_SYNC_DEADLINE_S", "600"))

# What every rank imports, loaded once by the fork server.
PRELOAD = ["torch", "torch.distributed", "functorch.compile", "torch._functorch.partitioners",
           "networkx", "remat.torch", "sync_models", "sync_worker"]

_RESULTS: dict[int, list[dict]] = {}


def results(world: int, tmp_path_factory) -> list[dict]:
    if world not in _RESULTS:
        _RESULTS[world] = run_world(world, tmp_path_factory.mktemp(f"sync{world}"))
    return _RESULTS[world]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _stacks(procs, out: Path) -> str:
    """Where the ranks still running are: each writes its Python threads'
    stacks on SIGUSR1 (sync_worker), innermost frame first."""
    alive = [(r, p) for r, p in enumerate(procs) if p.exitcode is None]
    for _, p in alive:
        try:
            os.kill(p.pid, signal.SIGUSR1)
        except OSError:
            pass
    time.sleep(1.0)
    return "".join(f"\nrank {r} (still running) is at:\n" +
                   "\n".join(_read(out / f"rank{r}.stack").splitlines()[:12])
                   for r, _ in alive)


def _kill(procs) -> None:
    for p in procs:
        if p.is_alive():
            p.kill()
    for p in procs:
        p.join(timeout=10)


def run_world(world: int, out: Path, *, target: str = "run",
              collective_timeout_s: float = COLLECTIVE_TIMEOUT_S, stall_s: float = STALL_S,
              deadline_s: float = DEADLINE_S) -> list[dict]:
    """Runs sync_worker.<target>(rank, world, port, out, collective_timeout_s)
    on every rank; returns each rank's OUT/rank<R>.json."""
    import sync_worker

    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    port = str(_free_port())
    procs = [ctx.Process(target=getattr(sync_worker, target),
                         args=(r, world, port, str(out), collective_timeout_s))
             for r in range(world)]
    for p in procs:
        p.start()
    try:
        _watch(procs, out, stall_s, deadline_s)
    finally:
        _kill(procs)
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(world)]


def _watch(procs, out: Path, stall_s: float, deadline_s: float) -> None:
    """Returns once every rank exited cleanly; fails the test as soon as one
    failed, stalled or the world ran past its deadline."""
    start = last_move = time.monotonic()
    steps = [""] * len(procs)
    while True:
        for r, p in enumerate(procs):
            if p.exitcode not in (None, 0):
                where = _where(procs, out)
                stacks = _stacks(procs, out)
                _kill(procs)
                pytest.fail(f"rank {r} of {len(procs)} failed (exit code {p.exitcode}); the "
                            f"other ranks were stopped. {where}\n{_read(out / f'rank{r}.err')}"
                            f"{stacks}")
        if all(p.exitcode == 0 for p in procs):
            return
        now_steps = [_read(out / f"rank{r}.step") for r in range(len(procs))]
        now = time.monotonic()
        if now_steps != steps:
            steps, last_move = now_steps, now
        if now - last_move > stall_s or now - start > deadline_s:
            why = (f"no rank moved on for {stall_s:.0f} s" if now - last_move > stall_s
                   else f"the world ran past its {deadline_s:.0f} s deadline")
            where = _where(procs, out)
            stacks = _stacks(procs, out)
            _kill(procs)
            pytest.fail(f"{len(procs)} ranks stopped: {why} (ranks waiting on each other: their "
                        f"collectives are out of step). {where}{stacks}")
        time.sleep(0.2)


def _where(procs, out: Path) -> str:
    states = []
    for r, p in enumerate(procs):
        state = "running" if p.exitcode is None else f"exit {p.exitcode}"
        states.append(f"rank {r}: {state} at {_read(out / f'rank{r}.step') or '?'!r}")
    return "Last steps: " + "; ".join(states) + "."
