"""Numerics: programs partitioned by remat compute what eager PyTorch computes.

Every corpus case is compiled with ``torch.compile`` and an ``aot_autograd``
backend whose forward/backward compilers are the identity (the FX graphs run
as-is) and whose partition function is remat's
``min_cut_rematerialization_partition``.  One forward + backward on real
tensors must reproduce:

* deterministic cases: eager autograd (outputs, parameter and input gradients,
  buffers and inputs after in-place updates);
* cases that draw random numbers (dropout, also inside checkpoint regions where
  the backward recomputes it): the same program partitioned by torch's own
  partitioner, with the same seed.  Eager consumes the RNG differently, but two
  partitions of one joint graph must agree, and the recomputed dropout mask in
  the backward must equal the forward's.

Skips (via ``pytest.importorskip``) until ``remat.torch`` imports.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest
import torch
from torch._functorch.partitioners import min_cut_rematerialization_partition

from corpus import CASES, Case
from corpus.capture import compile_case, loss_of, make_backend

SEED = 1234
EAGER_TOL = {"rtol": 1e-4, "atol": 1e-5}
PARTITIONER_TOL = {"rtol": 1e-5, "atol": 1e-6}


@pytest.fixture(scope="session")
def remat_torch():
    return pytest.importorskip(
        "remat.torch", reason="remat.torch is not importable yet (C++ engine / Python adapter not built)"
    )


def _dense(t: torch.Tensor | None) -> torch.Tensor | None:
    """A jagged nested tensor as its packed values: two of them made apart carry
    different nested ints (j1 vs j2) in their shapes, but equal values and
    offsets mean equal tensors."""
    if t is None or not t.is_nested:
        return t
    return torch.cat([t.values().flatten(), t.offsets().to(t.dtype)])


def _tensor_state(model: torch.nn.Module, inputs: tuple[Any, ...], output: Any) -> dict[str, torch.Tensor | None]:
    """Everything a training step produces: outputs, grads, buffers, (mutated) inputs."""
    state: dict[str, torch.Tensor | None] = {}
    leaves = torch.utils._pytree.tree_leaves(output)
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, torch.Tensor):
            state[f"output[{i}]"] = _dense(leaf.detach().clone())
    for name, param in model.named_parameters():
        state[f"grad({name})"] = None if param.grad is None else param.grad.clone()
    for name, buf in model.named_buffers():
        state[f"buffer({name})"] = buf.detach().clone()
    for i, arg in enumerate(inputs):
        if isinstance(arg, torch.Tensor):
            state[f"input[{i}]"] = _dense(arg.detach().clone())
            state[f"grad(input[{i}])"] = None if arg.grad is None else _dense(arg.grad.clone())
    return state


def run_step(case: Case, partition_fn: Callable | None) -> dict[str, torch.Tensor | None]:
    """One forward+backward of a fresh model: eager if ``partition_fn`` is None, else compiled."""
    model, inputs = case.make_module(), case.make_inputs()
    fn: Callable = model
    if partition_fn is not None:
        fn = compile_case(case, model, make_backend(case, partition_fn), inputs)
    torch.manual_seed(SEED)
    output = fn(*inputs)
    loss_of(output).backward()
    if partition_fn is not None:
        torch._dynamo.reset()
    return _tensor_state(model, inputs, output)


def assert_states_close(expected: dict, actual: dict, tol: dict, label: str) -> None:
    assert expected.keys() == actual.keys(), f"{label}: different state keys"
    problems = []
    for key, exp in expected.items():
        act = actual[key]
        if exp is None or act is None:
            if (exp is None) != (act is None):
                problems.append(f"{key}: expected {'None' if exp is None else 'a tensor'}, got "
                                f"{'None' if act is None else 'a tensor'}")
            continue
        if exp.shape != act.shape or exp.dtype != act.dtype:
            problems.append(f"{key}: {tuple(act.shape)}/{act.dtype} vs expected {tuple(exp.shape)}/{exp.dtype}")
        elif not torch.allclose(act.double(), exp.double(), **tol, equal_nan=True):
            err = (act.double() - exp.double()).abs().max().item()
            problems.append(f"{key}: max abs error {err:.3g}")
    assert not problems, f"{label}: " + "; ".join(problems)


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_remat_partition_numerics(case, remat_torch):
    actual = run_step(case, remat_torch.min_cut_rematerialization_partition)
    if case.random:
        expected = run_step(case, min_cut_rematerialization_partition)
        assert_states_close(expected, actual, PARTITIONER_TOL, f"{case.name} (vs torch's partitioner)")
    else:
        expected = run_step(case, None)
        assert_states_close(expected, actual, EAGER_TOL, f"{case.name} (vs eager)")
