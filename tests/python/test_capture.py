"""remat.torch.capture records the joint graphs torch partitions, from
torch.compile with aot_autograd and from aot_function, without changing what
torch compiles."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import warnings

import pytest

torch = pytest.importorskip("torch")
orjson = pytest.importorskip("orjson")

import torch._functorch._aot_autograd.graph_compile as graph_compile  # noqa: E402
import torch._functorch.aot_autograd as aot_autograd_mod  # noqa: E402
import torch._functorch.partitioners as partitioners  # noqa: E402
from functorch.compile import aot_function, make_boxed_func  # noqa: E402
from torch._dynamo.backends.common import aot_autograd  # noqa: E402

import remat  # noqa: E402
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


def test_failed_save_leaves_no_temporary_file(tmp_path):
    """A write that fails half way (a file size limit: EFBIG) removes the
    temporary file and raises a RematIOError naming the path; the old file
    is untouched."""
    import resource
    import signal

    session = _two_captures()
    (tmp_path / "g.json").write_text("old")
    limits = resource.getrlimit(resource.RLIMIT_FSIZE)
    old_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (16, limits[1]))
    try:
        with pytest.raises(remat.RematIOError, match="g.json"):
            session.save(str(tmp_path / "g.json"), index=0)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limits)
        signal.signal(signal.SIGXFSZ, old_handler)
    assert os.listdir(tmp_path) == ["g.json"] and (tmp_path / "g.json").read_text() == "old"


def test_save_follows_a_symlink_to_its_target(tmp_path):
    """As the command line does: the link stays a link, its target gets the graph."""
    session = _two_captures()
    (tmp_path / "target.json").write_text("old")
    (tmp_path / "link.json").symlink_to("target.json")
    assert session.save(str(tmp_path / "link.json"), index=0) == [str(tmp_path / "link.json")]
    assert (tmp_path / "link.json").is_symlink()
    assert orjson.loads((tmp_path / "target.json").read_bytes()) == session.captured[0].export()


def test_save_keeps_the_files_mode(tmp_path):
    session = _two_captures()
    path = tmp_path / "private.json"
    path.write_text("old")
    path.chmod(0o600)
    session.save(str(path), index=1)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert orjson.loads(path.read_bytes()) == session.captured[1].export()


def test_save_writes_into_a_fifo_never_replacing_it(tmp_path):
    session = _two_captures()
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    # A reader that is already there (non-blocking open), drained after the save;
    # the graph is a few KiB, well inside the pipe's buffer.
    rd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        session.save(str(fifo), index=0)
        got = os.read(rd, 1 << 16)
    finally:
        os.close(rd)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert orjson.loads(got) == session.captured[0].export()


def test_save_writes_into_a_character_device_never_replacing_it(tmp_path):
    """What `save("/dev/null")` does, on a private twin of /dev/null (root
    only: making a device node needs the privilege that let the old save
    replace /dev/null)."""
    session = _two_captures()
    dev = tmp_path / "null"
    try:
        os.mknod(dev, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except (PermissionError, OSError) as e:
        pytest.skip(f"cannot make a device node here: {e}")
    session.save(str(dev), index=0)
    assert stat.S_ISCHR(os.lstat(dev).st_mode)
    assert os.listdir(tmp_path) == ["null"]


def test_save_to_an_empty_path_is_a_remat_error_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    session = _two_captures()
    for index in (None, 0):
        with pytest.raises(remat.RematIOError, match="empty"):
            session.save("", index=index)
    assert os.listdir(tmp_path) == []


def test_save_with_an_index_that_picks_no_capture_is_a_remat_error(tmp_path):
    session = _two_captures()
    for index in (2, -1, True, "0", 1.0):
        with pytest.raises(remat.InvalidOptionError, match="captured 2 graphs"):
            session.save(str(tmp_path / "g.json"), index=index)
    assert os.listdir(tmp_path) == []


def test_a_wrapper_bound_inside_the_block_stops_recording_when_it_ends():
    """A backend built inside the block binds the recording wrapper for good:
    after the block it only forwards, and the next session records its calls."""
    def step(backend):
        torch._dynamo.reset()
        f = torch.compile(lambda a: (a.sin() * 3).sum(), backend=backend)
        f(torch.randn(4, requires_grad=True)).backward()

    with rt.capture() as first:
        backend = aot_autograd(fw_compiler=_nop, bw_compiler=_nop,
                               partition_fn=partitioners.min_cut_rematerialization_partition)
        step(backend)
    assert len(first.captured) == 1
    step(backend)
    with rt.capture() as second:
        step(backend)
    assert len(first.captured) == 1 and len(second.captured) == 1


_LEAK_SCRIPT = """
import sys, warnings
warnings.filterwarnings("ignore")
import torch
import remat.torch as rt
assert "torch._dynamo.backends.debugging" not in sys.modules
def step():
    torch._dynamo.reset()
    f = torch.compile(lambda a: (a.sin().cos() * 2).sum(), backend="aot_eager")
    f(torch.randn(4, requires_grad=True)).backward()
with rt.capture() as first:
    step()  # imports torch's aot_eager backend for the first time
inside = len(first.captured)
step()
with rt.capture() as second:
    step()
print(inside, len(first.captured), len(second.captured))
"""


def test_capture_ends_with_its_block_even_if_aot_eager_was_first_imported_inside():
    """A fresh interpreter, so that torch's aot_eager backend (which binds the
    partition function at import) is first imported inside the block."""
    # The remat this process imported comes first: a test that imported a
    # bench module may have put the source tree (no built extension in a
    # clean clone) on sys.path ahead of the installed package.
    here = os.path.dirname(os.path.dirname(remat.__file__))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([here, *sys.path])}
    proc = subprocess.run([sys.executable, "-c", _LEAK_SCRIPT], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["1", "1", "1"]


def test_capture_restores_patches_on_error():
    before = _originals()
    with pytest.raises(ZeroDivisionError):
        with rt.capture():
            1 / 0
    assert _originals() == before
