"""Output leaves that are no node pass through both partitioners unchanged.

torch's extraction appends a joint-output leaf that is not an FX node (an int
such as a SymInt specialized while AOTAutograd traced, a float, a bool, None,
a string) to the forward or backward graph's outputs as it is. These tests
build six-node joint graphs whose outputs hold such leaves, partition them
with torch and with remat, and compare node for node (parity.py); the
training test then shows the literal reaching user code under install().
"""

from __future__ import annotations

import pytest
import torch
import torch.fx as fx
from torch._functorch.partitioners import default_partition, min_cut_rematerialization_partition
from torch._subclasses.fake_tensor import FakeTensorMode

import parity

# (forward leaves after the tensor, backward leaves after the gradient)
LEAVES = {
    "int": ([64], []),
    "negative_int_and_float": ([-3, 0.25], []),
    "bool_and_str": ([True, "s"], []),
    # (torch 2.13's min-cut reads `.op` of every backward output that is not
    # None, so a backward int leaf fails there; None is the backward's case.)
    "backward_nones": ([], [None, None]),
    "nested": ([[64, (1.5,)]], [(None,)]),
}


@pytest.fixture(scope="module")
def remat_torch():
    return pytest.importorskip("remat.torch")


def six_node_joint(fwd_extra: list, bwd_extra: list) -> tuple[fx.GraphModule, int]:
    """primals_1, tangents_1 -> sin (fw output), cos (saved), mul (grad)."""
    with FakeTensorMode():
        x = torch.randn(4, 4)
    g = fx.Graph()
    p = g.placeholder("primals_1")
    t = g.placeholder("tangents_1")
    sin = g.call_function(torch.ops.aten.sin.default, (p,))
    cos = g.call_function(torch.ops.aten.cos.default, (p,))
    mul = g.call_function(torch.ops.aten.mul.Tensor, (t, cos))
    for n in (p, t, sin, cos, mul):
        n.meta["val"] = x
    g.output((sin, *fwd_extra, mul, *bwd_extra))
    num_fwd = 1 + len(torch.utils._pytree.tree_leaves(fwd_extra, is_leaf=lambda v: v is None))
    return fx.GraphModule(torch.nn.Module(), g), num_fwd


@pytest.mark.parametrize("partitioner", ["min_cut", "default"])
@pytest.mark.parametrize("case", sorted(LEAVES))
def test_non_node_output_leaves_match_torch(case, partitioner, remat_torch):
    fwd_extra, bwd_extra = LEAVES[case]
    theirs_fn = min_cut_rematerialization_partition if partitioner == "min_cut" else default_partition
    ours_fn = (remat_torch.min_cut_rematerialization_partition if partitioner == "min_cut"
               else remat_torch.default_partition)
    joint, num_fwd = six_node_joint(fwd_extra, bwd_extra)
    expected = theirs_fn(joint, None, num_fwd_outputs=num_fwd)
    joint, num_fwd = six_node_joint(fwd_extra, bwd_extra)
    actual = ours_fn(joint, None, num_fwd_outputs=num_fwd)
    parity.assert_same_partition(expected, actual, num_fwd, f"{case}/{partitioner}")


class ReshapeBySize(torch.nn.Module):
    """The compiled part returns a size that the joint graph holds as 64; the
    caller reshapes with it, as Mixtral's MoE block does."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(64, 8)

    def forward(self, x: torch.Tensor):
        width = x.shape[-1]
        return torch.relu(self.fc(x)), width


def test_specialized_size_reaches_user_code_under_install(remat_torch):
    torch.manual_seed(0)
    model = ReshapeBySize()
    x = torch.randn(5, 64, requires_grad=True)
    torch._dynamo.reset()
    remat_torch.install(fallback=False)
    try:
        with torch._functorch.config.patch(enable_autograd_cache=False):
            y, width = torch.compile(model, backend="aot_eager", dynamic=True)(x)
            (y.sum() + x.reshape(width, -1).sum()).backward()
    finally:
        remat_torch.uninstall()
        torch._dynamo.reset()
    assert width == 64
    assert x.grad is not None and model.fc.weight.grad is not None
