#!/usr/bin/env python3
"""GPU check of the RNG rewrites: real training steps, remat vs torch's partitioner.

Contract: on a machine with a CUDA GPU, trains each model of
tools/capture_rng_graphs.py that draws random numbers inside checkpointed
regions (graph-safe RNG on CUDA, its invoke_subgraph threading, the philox
path) for a few SGD steps, twice from the same seed and weights: once with
torch's own partitioner, once under `remat.torch.install(fallback=False)`
(any graph remat would hand back to torch fails the check instead). The
losses of every step and the final gradients must agree: bit for bit with
the aot_eager backend, to 1e-5 with inductor (whose kernels may reduce in a
different order between two compiles). It also checks that remat partitioned
every graph and that the graph-safe path was taken where it should be.

Exit status 0 when every run agrees, 1 otherwise, 2 without a GPU. Run it
through tools/gpu_check.sh. `--device cpu` runs the same comparison on the
CPU (random ops take the CPU-style path there, so no graph-safe path is
expected): a dry run of the script itself, which tests/python runs so that
the script cannot rot between GPU runs.

  python tools/gpu_check_rng.py [--steps 3] [--only case,...] [--backends aot_eager,inductor]
                                [--device cuda|cpu]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import sys
import traceback
import warnings
from typing import Any, Callable

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "python"))

import torch  # noqa: E402
import torch._functorch.config  # noqa: E402  (torch._functorch does not import it)


def _capture_tool() -> Any:
    spec = importlib.util.spec_from_file_location(
        "capture_rng_graphs", os.path.join(ROOT, "tools", "capture_rng_graphs.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


# case -> (model factory, input shape, torch config patches, expected graph-safe path)
def _cases(tool: Any) -> dict[str, tuple[Callable[[], torch.nn.Module], tuple, dict, bool]]:
    return {
        "ckpt_dropout": (lambda: tool.CheckpointDropout(2), (8, 16), {}, True),
        "attention_dropout": (tool.CheckpointAttention, (2, 8, 16), {}, True),
        "selective_dropout": (lambda: tool.SelectiveDropout(2), (8, 16), {}, True),
        "hop_dropout": (lambda: tool.HopRegions(2), (8, 16), {}, True),
        "graphsafe_off": (lambda: tool.CheckpointDropout(2), (8, 16),
                          {"graphsafe_rng_functionalization": False}, False),
        "philox_dropout": (lambda: tool.CheckpointDropout(2), (8, 16), {"functionalize_rng_ops": True}, False),
    }


class _Watch:
    """Counts remat's partitions and whether their forwards went graph-safe."""

    def __init__(self) -> None:
        self.partitions = 0
        self.graphsafe = 0

    @contextlib.contextmanager
    def installed(self):
        import remat.torch as rt
        from remat.torch import _dropin

        original = _dropin._partition

        def watched(*args: Any, **kwargs: Any):
            p = original(*args, **kwargs)
            self.partitions += 1
            if any(n.name.startswith("graphsafe_run_with_rng_state") for n in p.forward.graph.nodes) or any(
                    n.name.startswith("fwd_rng_state_") for n in p.forward.graph.nodes):
                self.graphsafe += 1
            return p

        _dropin._partition = watched
        rt.install(fallback=False)
        try:
            yield self
        finally:
            rt.uninstall()
            _dropin._partition = original


def _train(make: Callable[[], torch.nn.Module], shape: tuple, backend: str, steps: int,
           device: str) -> tuple[list, list]:
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = make().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    compiled = torch.compile(model, backend=backend)
    x = torch.randn(*shape, device=device, generator=torch.Generator(device).manual_seed(1))
    torch.manual_seed(0)
    if device == "cuda":
        torch.cuda.manual_seed(0)
    losses = []
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = compiled(x).float().pow(2).mean()
        loss.backward()
        losses.append(loss.detach().clone())
        grads = [p.grad.detach().clone() for p in model.parameters()]
        opt.step()
    if device == "cuda":
        torch.cuda.synchronize()
    return losses, grads


def _same(a: list, b: list, exact: bool) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if exact and not torch.equal(x, y):
            return False
        if not exact and not torch.allclose(x, y, rtol=1e-5, atol=1e-6):
            return False
    return True


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--only", default="")
    p.add_argument("--backends", default="aot_eager,inductor")
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    args = p.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("gpu_check_rng: no CUDA GPU; nothing checked")
        return 2
    warnings.filterwarnings("ignore")
    tool = _capture_tool()
    wanted = {s for s in args.only.split(",") if s}
    failures = 0
    where = torch.cuda.get_device_name() if args.device == "cuda" else "the CPU (dry run)"
    print(f"torch {torch.__version__} on {where}")
    for name, (make, shape, config, graphsafe) in _cases(tool).items():
        if wanted and name not in wanted:
            continue
        if args.device == "cpu" and config.get("functionalize_rng_ops"):
            print(f"skip {name}: the philox path needs CUDA (AOTAutograd reads its generator)")
            continue
        for backend in args.backends.split(","):
            label = f"{name} [{backend}]"
            try:
                with torch._functorch.config.patch(config):
                    theirs = _train(make, shape, backend, args.steps, args.device)
                    with _Watch().installed() as watch:
                        ours = _train(make, shape, backend, args.steps, args.device)
            except Exception:
                failures += 1
                print(f"FAIL {label}: an exception\n{traceback.format_exc()}")
                continue
            exact = backend == "aot_eager"
            problems = []
            if not _same(theirs[0], ours[0], exact):
                problems.append(f"losses differ: torch {[float(v) for v in theirs[0]]} "
                                f"remat {[float(v) for v in ours[0]]}")
            if not _same(theirs[1], ours[1], exact):
                worst = max(float((a - b).abs().max()) for a, b in zip(theirs[1], ours[1]))
                problems.append(f"gradients differ (max abs difference {worst:.3g})")
            if watch.partitions == 0:
                problems.append("remat partitioned nothing")
            if graphsafe and args.device == "cuda" and watch.graphsafe == 0:
                problems.append("no forward took the graph-safe RNG path")
            if problems:
                failures += 1
                print(f"FAIL {label}: " + "; ".join(problems))
            else:
                print(f"ok   {label}: {args.steps} steps, {watch.partitions} graph(s) partitioned by remat, "
                      f"{watch.graphsafe} graph-safe, losses {[round(float(v), 6) for v in ours[0]]}")
    print("gpu_check_rng:", "all runs agree" if not failures else f"{failures} run(s) failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
