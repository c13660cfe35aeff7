"""TORCH_TRACE + tlparse show remat's partitions as they show torch's.

One subprocess (TORCH_TRACE must be set before torch is imported) compiles a
small MLP with remat installed, AOT_PARTITIONER_DEBUG on and a memory budget
that reaches the knapsack; partitions a graph with no finite cut; and calls
the artifact helpers kept for the rewrites remat does not perform yet.
tlparse (PyPI) then parses the trace; every artifact must come out as its
file, with the payload remat emitted.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
NO_FINITE_CUT = ROOT / "tests" / "data" / "no_finite_cut.json"

SCRIPT = textwrap.dedent(r"""
    import json, sys
    import torch
    import torch._functorch.config as fconfig
    from torch._functorch import partitioners as tp
    import remat, remat.torch as rt
    from remat.torch import _trace

    tp.AOT_PARTITIONER_DEBUG = True
    rt.install(fallback=False)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.Linear(8, 8),
                                torch.nn.GELU(), torch.nn.Linear(8, 4))
    x = torch.randn(4, 8, requires_grad=True)
    with fconfig.patch(activation_memory_budget=0.1):
        torch.compile(model, backend="aot_eager")(x).sum().backward()

    doc = json.load(open(sys.argv[1]))
    try:
        rt.min_cut_rematerialization_partition(rt.import_graph(doc), None,
                                               num_fwd_outputs=doc["num_fwd_outputs"])
    except remat.NoFiniteCutError:
        pass
    gm = torch.fx.symbolic_trace(torch.nn.Linear(2, 2))
    _trace.trace_activation_quantization("before", "fwd", gm)
    # What _ranks' rank group writes when ranks agree.
    from remat.torch import _ranks
    _trace.trace_artifact(_ranks.ARTIFACT_NAME, "string",
                          lambda: "picked_rank_idx=0, saved_nodes of current rank={'mm': 64}")
""")


def test_tlparse_shows_remats_artifacts(tmp_path):
    tlparse = shutil.which("tlparse")
    if tlparse is None:
        pytest.skip("tlparse is not installed (pip install tlparse; tools/setup.sh does)")
    trace_dir, out = tmp_path / "trace", tmp_path / "out"
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "TORCH_TRACE": str(trace_dir)}
    env.pop("REMAT_REPORT_DIR", None)
    proc = subprocess.run([sys.executable, str(script), str(NO_FINITE_CUT)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    logs = list(trace_dir.iterdir())
    assert len(logs) == 1, logs
    proc = subprocess.run([tlparse, str(logs[0]), "-o", str(out), "--no-browser", "--overwrite"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr

    files = {}
    for path in out.rglob("*"):
        if path.is_file():
            stem = path.stem.rsplit("_", 1)[0]  # tlparse appends a sequence number
            files.setdefault(stem, []).append(path)
    for name in ("remat_partition", "min_cut_information", "min_cut_failed_fx_graph",
                 "min_cut_failed_edge_list", "before_activation_quantization_fwd_aten_pass",
                 "aot_joint_graph_sync_decision_cross_ranks"):
        assert name in files, (name, sorted(files))
    if shutil.which("dot"):
        assert "min_cut_failed_svg" in files, sorted(files)

    # The payloads are what remat emitted.
    partition = json.loads(files["remat_partition"][0].read_text())
    assert partition["partitioner"] == "min_cut" and partition["budget_step"] == "knapsack"
    info = json.loads(files["min_cut_information"][0].read_text())
    # 2.13 on adds the budget and the tier sizes (min_cut_information_payload).
    from remat.torch import _release

    if _release.behaves("min_cut_information_payload"):
        assert info["Memory Budget"] == 0.1
    else:
        assert "Memory Budget" not in info and "Knapsack Saved Nodes" in info
    assert set(info["Min Cut Solution Saved Values"]) <= set(partition["decisions"])
    edges = files["min_cut_failed_edge_list"][0].read_text()
    assert "mm_in mm_out {'capacity': inf, 'reason': 'cannot save: non-tensor output'}" in edges
    # tlparse's index links the partition artifacts under the compiled frame.
    index = (out / "index.html").read_text()
    assert "remat_partition" in index
    # torch's local debug file, written where torch writes it (the cwd).
    assert (tmp_path / "min_cut_failed_graph.txt").exists()
