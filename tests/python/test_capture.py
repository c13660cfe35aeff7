"""remat.torch.capture records the joint graphs torch partitions, from
torch.compile with aot_autograd and from aot_function, without changing what
torch compiles."""

from __future__ import annotations

import os
import warnings

import pytest

torch = pytest.importorskip("torch")
orjson = pytest.importorskip("orjson")

import torch._functorch._aot_autograd.graph_compile as graph_compile  # noqa: E402
import torch._functorch.aot_autograd as aot_autograd_mod  # noqa: E402
import torch._functorch.partitioners as partitioners  # noqa: E402
from functorch.compile import aot_function, make_boxed_func  # noqa: E402
from torch._dynamo.backends.common import aot_autograd  # noqa: E402

import remat.torch as rt  # noqa: E402

warnings.filterwarnings("ignore")


def _nop(gm, _inputs):
    return make_boxed_func(gm)


# The function every compilation hands its partition_fn to: 2.12 on, the one
# below; 2.11, _aot_stage2a_partition (remat.torch._internals patches either).
_CHOKE_POINT = ("_partition_joint_graph_into_fw_bw"
                if hasattr(graph_compile, "_partition_joint_graph_into_fw_bw")
                else "_aot_stage2a_partition")


def _originals():
    return (
        partitioners.min_cut_rematerialization_partition,
        partitioners.default_partition,
        aot_autograd_mod.default_partition,
        getattr(graph_compile, _CHOKE_POINT),
    )


def test_torch_compile_min_cut_is_recorded_and_compiles_unchanged():
    before = _originals()
    torch._dynamo.reset()
    model = torch.nn.Sequential(torch.nn.Linear(6, 12), torch.nn.Tanh(), torch.nn.Linear(12, 3))
    x = torch.randn(5, 6)
    backend = aot_autograd(fw_compiler=_nop, bw_compiler=_nop,
                           partition_fn=partitioners.min_cut_rematerialization_partition)
    compiled = torch.compile(model, backend=backend)
    with rt.capture() as session:
        out = compiled(x)
        out.sum().backward()
    assert _originals() == before  # every patch undone

    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    ref = model(x)
    ref.sum().backward()
    torch.testing.assert_close(out, ref)
    for g, p in zip(grads, model.parameters()):
        torch.testing.assert_close(g, p.grad)

    assert len(session.captured) == 1
    c = session.captured[0]
    assert c.partitioner == "min_cut"
    assert c.num_fwd_outputs == 1
    assert c.static_lifetime_input_indices is not None
    names = [n.name for n in c.joint_module.graph.find_nodes(op="placeholder")]
    assert any(n.startswith("tangents") for n in names)
    assert len(c.joint_inputs) == 2  # (primals, tangents)
    # The copy was taken before partitioning, so it can be partitioned again.
    fw, bw = partitioners.min_cut_rematerialization_partition(
        c.joint_module, c.joint_inputs, num_fwd_outputs=c.num_fwd_outputs,
        static_lifetime_input_indices=c.static_lifetime_input_indices)
    assert any(n.op == "call_function" for n in fw.graph.nodes)


def test_aot_function_default_partition_is_recorded():
    def f(a, b):
        return (a.sin() * b).cos().sum()

    with rt.capture() as session:
        g = aot_function(f, fw_compiler=_nop, bw_compiler=_nop)
        a = torch.randn(4, requires_grad=True)
        out = g(a, torch.randn(4))
        out.backward()
    assert a.grad is not None
    assert [c.partitioner for c in session.captured] == ["default"]
    doc = session.captured[0].export()
    assert doc["format"] == "remat.joint_graph"
    assert any(n["target"] == "aten.sin.default" for n in doc["nodes"])


def test_partition_fn_looked_up_inside_the_block_is_recorded_once():
    # aot_function(partition_fn=partitioners.min_cut...) evaluated inside the
    # block binds the recording wrapper; the split hook must not record again.
    with rt.capture() as session:
        g = aot_function(lambda a: a.exp().sum(), fw_compiler=_nop, bw_compiler=_nop,
                         partition_fn=partitioners.min_cut_rematerialization_partition)
        g(torch.randn(3, requires_grad=True)).backward()
    assert [c.partitioner for c in session.captured] == ["min_cut"]


def test_save_capture_writes_format_v1(tmp_path):
    with rt.capture() as session:
        for fn in (lambda a: a.relu().sum(), lambda a: (a * a).mean()):
            aot_function(fn, fw_compiler=_nop, bw_compiler=_nop)(
                torch.randn(3, requires_grad=True)).backward()
    assert len(session.captured) == 2
    written = rt.save_capture(str(tmp_path / "joint.json"), session)
    assert [os.path.basename(p) for p in written] == ["joint_0.json", "joint_1.json"]
    for path, c in zip(written, session.captured):
        with open(path, "rb") as f:
            doc = orjson.loads(f.read())
        assert doc == c.export()
    one = rt.save_capture(str(tmp_path / "one.json"), session, index=1)
    assert one == [str(tmp_path / "one.json")]
    assert not [p for p in os.listdir(tmp_path) if ".tmp" in p]


def _two_captures():
    with rt.capture() as session:
        for fn in (lambda a: a.relu().sum(), lambda a: (a * a).mean()):
            aot_function(fn, fw_compiler=_nop, bw_compiler=_nop)(
                torch.randn(3, requires_grad=True)).backward()
    return session


def test_save_to_a_directory_creates_it(tmp_path):
    """README's cap.save("graphs/"): a missing directory is created."""
    session = _two_captures()
    written = session.save(str(tmp_path / "graphs") + "/")
    assert [os.path.relpath(p, tmp_path) for p in written] == ["graphs/joint_0.json", "graphs/joint_1.json"]
    assert session.save(str(tmp_path / "graphs"), index=1) == [str(tmp_path / "graphs" / "joint_1.json")]
    assert session.save(str(tmp_path / "new" / "deep" / "one.json"), index=0)[0].endswith("one.json")


def test_save_does_not_write_through_a_planted_symlink(tmp_path):
    """The temporary file's name is not predictable from the pid, and it is
    created exclusively: a symlink planted at the old name is left alone."""
    session = _two_captures()
    victim = tmp_path / "victim"
    victim.write_text("keep")
    (tmp_path / f"g.json.tmp{os.getpid()}").symlink_to(victim)
    session.save(str(tmp_path / "g.json"), index=0)
    assert victim.read_text() == "keep"
    assert orjson.loads((tmp_path / "g.json").read_bytes()) == session.captured[0].export()


def test_failed_save_leaves_no_temporary_file(tmp_path, monkeypatch):
    """A rename that fails removes the temporary file and raises; the old
    file is untouched."""
    session = _two_captures()
    (tmp_path / "g.json").write_text("old")

    def refuse(src, dst):
        raise PermissionError(dst)

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(PermissionError):
        session.save(str(tmp_path / "g.json"), index=0)
    assert os.listdir(tmp_path) == ["g.json"] and (tmp_path / "g.json").read_text() == "old"


def test_capture_restores_patches_on_error():
    before = _originals()
    with pytest.raises(ZeroDivisionError):
        with rt.capture():
            1 / 0
    assert _originals() == before
