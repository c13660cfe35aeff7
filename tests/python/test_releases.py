"""Which torch release remat reproduces, chosen once at the front door.

Contract pinned here: the drop-in reproduces the running torch's release
(remat.torch._release); outside the supported range it refuses (install()
warns once and leaves torch in charge; fallback=False and the partition
functions raise UnsupportedError naming the range) unless the user opts in;
the exporter records torch_version and the command line partitions a graph
as its recorded release unless --torch says otherwise; one module imports
torch's private modules; docs/torch-releases.md is the engine's switch table
and every switch's parity test exists.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
rt = pytest.importorskip("remat.torch", reason="remat.torch is not importable (engine not built)")

import remat  # noqa: E402
from remat.torch import _release  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _running() -> str:
    major, minor = torch.__version__.split("+")[0].split(".")[:2]
    return f"{major}.{minor}"


@pytest.fixture
def unsupported(monkeypatch):
    """The running torch pretends to be 2.16 (newer than the range)."""
    monkeypatch.setattr(_release, "_running", lambda: ((2, 16), False))
    monkeypatch.setattr(_release, "_choice", None)
    monkeypatch.setattr(rt._dropin, "_warned_unsupported", False)
    yield
    rt.uninstall()


def _mlp():
    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(8, 8)

        def forward(self, x):
            return self.a(x).relu().sum()

    return MLP(), torch.randn(4, 8, requires_grad=True)


# --- the running release -----------------------------------------------------------

def test_the_drop_in_reproduces_the_running_release():
    assert _release.supported()
    assert _release.reproduced() == _running()
    assert rt.options_from_torch()["torch_release"] == _running()


def test_the_engine_reports_the_range_and_every_switch():
    r = remat.torch_releases()
    assert (r["oldest"], r["newest"]) == ("2.11", "2.15")
    names = [s[0] for s in r["switches"]]
    assert len(names) == len(set(names)) and names
    assert _release.supported_range() == "torch 2.11 to 2.15"


def test_python_switches_follow_the_reproduced_release(monkeypatch):
    monkeypatch.setattr(_release, "_choice", "2.11")
    assert not _release.behaves("output_stack_traces_meta")
    monkeypatch.setattr(_release, "_choice", "2.12")
    assert _release.behaves("output_stack_traces_meta")
    with pytest.raises(KeyError):
        _release.behaves("no_such_switch")


@pytest.mark.parametrize("text,parsed", [
    ("2.15.0+cu132", (2, 15, False)), ("2.11.0", (2, 11, False)),
    ("2.16.0.dev20261101+cpu", (2, 16, True)), ("2.15.0rc1", (2, 15, True)),
    ("nonsense", None)])
def test_versions_parse_as_the_engine_reads_them(text, parsed):
    assert remat._ext().parse_torch_version(text) == parsed


# --- outside the range ---------------------------------------------------------------

def test_install_outside_the_range_warns_once_and_leaves_torch(unsupported):
    with pytest.warns(UserWarning, match=r"torch 2\.11 to 2\.15"):
        rt.install()
    assert not rt.installed()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rt.install()  # the second call says nothing more
    assert not rt.installed()


def test_install_without_fallback_outside_the_range_raises(unsupported):
    with pytest.raises(remat.UnsupportedError, match=r"torch 2\.11 to 2\.15"):
        rt.install(fallback=False)
    assert not rt.installed()


def test_the_partition_functions_refuse_outside_the_range(unsupported):
    model, x = _mlp()
    seen = []

    def partition_fn(gm, inputs, **kwargs):
        try:
            return rt.min_cut_rematerialization_partition(gm, inputs, **kwargs)
        except remat.UnsupportedError as e:
            seen.append(str(e))
            raise

    from functorch.compile import aot_module

    with pytest.raises(remat.UnsupportedError):
        aot_module(model, fw_compiler=lambda g, _: g, partition_fn=partition_fn)(x)
    assert seen and "torch 2.11 to 2.15" in seen[0] and "set_torch_release" in seen[0]


def test_the_opt_in_runs_the_nearest_release(unsupported):
    rt.set_torch_release("nearest")
    assert _release.reproduced() == "2.15"
    rt.install(fallback=False)
    assert rt.installed()
    model, x = _mlp()
    torch.compile(model, backend="aot_eager")(x).backward()  # partitions as 2.15
    rt.uninstall()
    rt.set_torch_release("2.12")
    assert _release.reproduced() == "2.12"
    with pytest.raises(remat.InvalidOptionError, match="2.16"):
        rt.set_torch_release("2.16")
    rt.set_torch_release(None)
    with pytest.raises(remat.UnsupportedError):
        _release.reproduced()


def test_the_engine_refuses_an_unsupported_release_by_name():
    doc = (ROOT / "examples" / "mlp.json").read_bytes()
    for release in ("2.10", "2.16", "2.15.0rc1"):
        with pytest.raises(remat.UnsupportedError, match=r"torch 2\.11 to 2\.15"):
            remat.partition(doc, {"torch_release": release})


# --- graphs record their release -------------------------------------------------------

def _captured_doc() -> dict:
    model, x = _mlp()
    with rt.capture() as cap:
        torch.compile(model, backend="aot_eager")(x).backward()
    return cap.captured[0].export()


def test_the_exporter_records_the_running_torch():
    assert _captured_doc()["torch_version"] == torch.__version__


def _cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    exe = shutil.which("remat")
    if exe is None:
        pytest.skip("the remat command is not on PATH")
    return subprocess.run([exe, *args], input=stdin, capture_output=True)


def test_the_command_line_partitions_as_the_recorded_release(tmp_path):
    doc = _captured_doc()
    path = tmp_path / "g.json"
    path.write_text(json.dumps(doc))
    info = _cli("info", str(path))
    assert info.returncode == 0 and f"captured under: torch {torch.__version__}" in info.stdout.decode()
    recorded = _cli("partition", str(path))
    assert recorded.returncode == 0 and f"as torch {_running()}'s" in recorded.stdout.decode()
    doc["torch_version"] = "2.16.0.dev20261101"
    path.write_text(json.dumps(doc))
    refused = _cli("partition", str(path))
    assert refused.returncode == 1
    assert b"torch_version" in refused.stderr and b"torch 2.11 to 2.15" in refused.stderr
    chosen = _cli("partition", str(path), "--torch", "2.12", "-o", str(tmp_path / "r.json"))
    assert chosen.returncode == 0, chosen.stderr
    assert "as torch 2.12's" in chosen.stdout.decode()
    bad = _cli("partition", str(path), "--torch", "2.99")
    assert bad.returncode == 2 and b"--torch 2.99" in bad.stderr  # a usage error


# --- one home for torch's private names, one table for the switches ------------------

_PRIVATE = re.compile(r"^torch\.(_|fx\.experimental|utils\._|utils\.checkpoint|nested\._)")


def _private_imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if _PRIVATE.match(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.module and _PRIVATE.match(node.module):
            found.append(node.module)
        elif isinstance(node, ast.Attribute):
            # torch._ops.X, torch._C.Y, torch._guards.Z written out in code
            chain = []
            cur = node
            while isinstance(cur, ast.Attribute):
                chain.append(cur.attr)
                cur = cur.value
            if (isinstance(cur, ast.Name) and cur.id == "torch" and chain[-1].startswith("_")
                    and not chain[-1].startswith("__")):
                found.append("torch." + ".".join(reversed(chain)))
    return found


def test_only_internals_imports_torch_private_modules():
    offenders = {}
    for path in (ROOT / "python" / "remat").rglob("*.py"):
        if path.name == "_internals.py":
            continue
        found = _private_imports(path)
        if found:
            offenders[str(path.relative_to(ROOT))] = found
    assert not offenders, offenders


def test_the_document_lists_every_switch():
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "torch_releases_doc.py"), "--check"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_every_switch_has_its_parity_test():
    missing = []
    for name, _since, _where, _what, test in remat.torch_releases()["switches"]:
        file, function = test.split("::")
        path = ROOT / file
        if not path.exists() or not re.search(rf"^def {re.escape(function)}\b",
                                              path.read_text(), re.M):
            missing.append(f"{name}: {test}")
    assert not missing, "\n".join(missing)
