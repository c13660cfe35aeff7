"""Drop-in: ``remat.torch.install()`` makes ``torch.compile`` use remat, transparently.

With remat installed, a few corpus models are trained for three SGD steps under
``torch.compile`` (inductor on CPU for two small models, ``aot_eager`` for the
rest, to keep the suite fast); the losses must match the same training with
torch's own partitioner (after ``uninstall()``).  ``uninstall()`` must put back
every partitioner reference torch's compile paths use.

AOTAutograd's cache is disabled while training: a cache hit would skip the
partitioner entirely and make the comparison vacuous.

Skips (via ``pytest.importorskip``) until ``remat.torch`` imports.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest
import torch

from corpus import CASES_BY_NAME, Case
from corpus.capture import loss_of

STEPS = 3
LR = 0.05
LOSS_TOL = {"rtol": 1e-5, "atol": 1e-6}

DROPIN_CASES = [
    ("mlp_gelu_d3", "inductor"),
    ("layernorm_mlp", "inductor"),
    ("cnn_bn_maxpool", "aot_eager"),
    ("transformer_block", "aot_eager"),
    ("checkpoint_dropout", "aot_eager"),
    ("sac_save_mm", "aot_eager"),
    ("cross_entropy", "aot_eager"),
    ("dynamic_mlp", "aot_eager"),
]

# (module, attribute) pairs through which torch's compile paths reach the partitioners.
PARTITIONER_REFERENCES = [
    ("torch._functorch.partitioners", "min_cut_rematerialization_partition"),
    ("torch._functorch.partitioners", "default_partition"),
    ("torch._functorch.aot_autograd", "default_partition"),
    ("functorch.compile", "min_cut_rematerialization_partition"),
    ("functorch.compile", "default_partition"),
    ("torch._inductor.compile_fx", "min_cut_rematerialization_partition"),
    ("torch._dynamo.backends.debugging", "min_cut_rematerialization_partition"),
    ("torch._inductor.config", "custom_partitioner_fn"),
]


@pytest.fixture(scope="session")
def remat_torch():
    return pytest.importorskip(
        "remat.torch", reason="remat.torch is not importable yet (C++ engine / Python adapter not built)"
    )


def _references() -> dict[tuple[str, str], Any]:
    return {(mod, attr): getattr(importlib.import_module(mod), attr) for mod, attr in PARTITIONER_REFERENCES}


def train_losses(case: Case, backend: str) -> list[float]:
    """Three SGD steps of a fresh model under ``torch.compile``; the loss of each step."""
    torch._dynamo.reset()
    model, inputs = case.make_module(), case.make_inputs()
    for input_index, dim in case.options.get("mark_dynamic", ()):
        torch._dynamo.mark_dynamic(inputs[input_index], dim)
    compiled = torch.compile(model, backend=backend, dynamic=case.options.get("dynamic"))
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    losses = []
    with torch._functorch.config.patch(enable_autograd_cache=False):
        for step in range(STEPS):
            torch.manual_seed(100 + step)
            optimizer.zero_grad()
            loss = loss_of(compiled(*inputs))
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    torch._dynamo.reset()
    return losses


def test_install_routes_and_uninstall_restores(remat_torch):
    before = _references()
    remat_torch.install()
    try:
        during = _references()
    finally:
        remat_torch.uninstall()
    after = _references()

    inductor_routed = (
        during[("torch._inductor.compile_fx", "min_cut_rematerialization_partition")]
        is not before[("torch._inductor.compile_fx", "min_cut_rematerialization_partition")]
        or during[("torch._inductor.config", "custom_partitioner_fn")] is not None
    )
    assert inductor_routed, "install() left inductor's partitioner untouched"
    assert (
        during[("torch._dynamo.backends.debugging", "min_cut_rematerialization_partition")]
        is not before[("torch._dynamo.backends.debugging", "min_cut_rematerialization_partition")]
    ), "install() left the aot_eager backend's partitioner untouched"
    not_restored = [f"{mod}.{attr}" for (mod, attr), value in after.items() if value is not before[(mod, attr)]]
    assert not not_restored, f"uninstall() did not restore: {not_restored}"


@pytest.mark.parametrize(
    "case_name,backend", DROPIN_CASES, ids=[f"{name}-{backend}" for name, backend in DROPIN_CASES]
)
def test_training_losses_match_torch(case_name, backend, remat_torch):
    case = CASES_BY_NAME[case_name]
    remat_torch.install()
    try:
        with_remat = train_losses(case, backend)
    finally:
        remat_torch.uninstall()
    reference = train_losses(case, backend)
    assert torch.allclose(torch.tensor(with_remat), torch.tensor(reference), **LOSS_TOL), (
        f"{case_name} on {backend}: losses with remat {with_remat} vs torch {reference}"
    )


def _checkpointed_dropout(x):
    from torch.utils.checkpoint import checkpoint

    return checkpoint(lambda y: torch.nn.functional.dropout(torch.sigmoid(y), 0.5, True), x,
                      use_reentrant=False)


def _inductor_grad(fn) -> tuple[torch.Tensor, torch.Tensor]:
    torch._dynamo.reset()
    x = torch.randn(4, 4, generator=torch.Generator().manual_seed(0), requires_grad=True)
    with torch._functorch.config.patch(enable_autograd_cache=False), \
            torch._inductor.config.patch(fallback_random=True, fx_graph_cache=False):
        torch.manual_seed(7)
        out = torch.compile(fn, backend="inductor")(x)
        out.sum().backward()
    torch._dynamo.reset()
    return out.detach(), x.grad


def test_values_remat_creates_live_in_the_joint_graphs_fake_mode(remat_torch):
    """A checkpointed random op on CPU: the backward replays the saved RNG
    state, a node torch's joint graph lacks. Its meta value must be a fake
    tensor of the joint graph's own mode, or inductor fails to compile the
    backward ("Mixing fake modes NYI") after the partitioner returned, where
    no fallback can help (torch's test_tags_dropout found it)."""
    remat_torch.install(fallback=False)
    try:
        out, grad = _inductor_grad(_checkpointed_dropout)
    finally:
        remat_torch.uninstall()
    ref_out, ref_grad = _inductor_grad(_checkpointed_dropout)
    assert torch.equal(out, ref_out) and torch.equal(grad, ref_grad)
