"""remat's deliberate differences from torch's partitioner, shown live.

Contract: each test runs torch's own partitioner and remat's drop-in on the
same captured joint graph under the same config, and pins where (and how)
they part on purpose; README.md and docs/torch-releases.md ("Where remat
differs on purpose") list the same differences. The `ilp` solver's is pinned
in test_budget_parity.py.
"""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")
from torch._functorch import partitioners as tp  # noqa: E402

from corpus import captured_graphs, run_partition  # noqa: E402

rt = pytest.importorskip("remat.torch", reason="remat.torch is not importable (engine not built)")

warnings.filterwarnings("ignore")


def test_profile_estimator_times_a_cpu_graph_where_torch_cannot():
    """activation_memory_budget_runtime_estimator="profile": torch benchmarks
    every knapsack item with inductor's GPU benchmarker, so on a CPU graph
    without a GPU it fails (no CUDA build: "Torch not compiled with CUDA
    enabled"; no driver: "Found no NVIDIA driver", or under 2.11 and 2.12
    triton's "0 active drivers"). remat times CPU values
    with the CPU benchmarker and partitions."""
    cap = captured_graphs("mlp_gelu_d3")[0]
    config = dict(activation_memory_budget=0.1,
                  activation_memory_budget_runtime_estimator="profile")
    if not torch.cuda.is_available():
        with pytest.raises((AssertionError, RuntimeError), match="CUDA|NVIDIA|active drivers"):
            run_partition(tp.min_cut_rematerialization_partition, cap, **config)
    fw, bw = run_partition(rt.min_cut_rematerialization_partition, cap, **config)
    assert any(n.op == "output" for n in fw.graph.nodes)
    assert any(n.op == "output" for n in bw.graph.nodes)
