"""`remat partition --config FLAG=VALUE` means what torch._functorch.config's
FLAG means: on the stored example transformer_block (captured live by
tools/capture_examples.py), the command saves exactly the values torch's
min-cut partitioner saves with that flag set; and the flags --config accepts
are torch's names, each mapped in test_config_coverage.py."""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess

import pytest

torch = pytest.importorskip("torch")

from test_config_coverage import COVERAGE  # noqa: E402

# (--config entries, the same as a torch config patch)
CASES = {
    "recompute_views": {"recompute_views": True},
    "no_ban_reductions": {"ban_recompute_reductions": False},
    "memory_budget": {"activation_memory_budget": 0.5},
    "budget_greedy_views": {"activation_memory_budget": 0.3,
                            "activation_memory_budget_solver": "greedy",
                            "recompute_views": True},
}


def _remat_cli() -> str:
    cli = shutil.which("remat")
    if cli is None:
        pytest.skip("the remat command is not on PATH")
    return cli


def _torch_saved(c, patch: dict) -> list[str]:
    from torch._functorch import config
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    with config.patch(patch):
        fw, _ = min_cut_rematerialization_partition(
            copy.deepcopy(c.joint_module), c.joint_inputs, num_fwd_outputs=c.num_fwd_outputs,
            static_lifetime_input_indices=c.static_lifetime_input_indices, **c.kwargs)
    out = next(iter(fw.graph.find_nodes(op="output")))
    return [n.name for n in out.args[0][c.num_fwd_outputs:]]


def _cli_saved(graph, tmp_path, patch: dict) -> list[str]:
    args = [f"{flag}={value}" for flag, value in patch.items()]
    result = tmp_path / "result.json"
    cmd = [_remat_cli(), "partition", str(graph), "-o", str(result)]
    for a in args:
        cmd += ["--config", a]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    r = json.loads(result.read_text())
    return r["saved_values"] + r["saved_sym_nodes"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_config_flag_saves_what_torch_saves_with_that_flag(captured, tmp_path, name):
    c = captured["transformer_block"]
    graph = tmp_path / "transformer_block.json"
    graph.write_bytes(c.export(as_json=True))
    patch = CASES[name]
    expected = _torch_saved(c, patch)
    assert _cli_saved(graph, tmp_path, patch) == expected
    # The flag matters on this graph: torch's defaults save something else.
    # Except ban_recompute_reductions, which changes nothing on any stored
    # example (the allowlist ban already covers their reductions): that case
    # only pins agreement with torch.
    assert _torch_saved(c, {}) != expected or name == "no_ban_reductions"


# Flags that only some supported releases have, by the release that added
# them: the command accepts them whatever the release (an older one ignores
# them, as its torch has no such flag).
FLAGS_SINCE = {"activation_offload_cpu_gpu_bw": (2, 12),
               "unsafe_treat_script_objects_as_zero_size": (2, 13),
               "activation_memory_budget_require_full_coverage": (2, 15)}
RUNNING = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])


def test_config_flags_are_torchs_names_and_mapped():
    from torch._functorch import config

    proc = subprocess.run([_remat_cli(), "partition", "--config", "nope=1"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2  # a usage error (docs/format.md, Options)
    listed = re.search(r"\(those are: ([^)]*)\)", proc.stderr)
    assert listed, proc.stderr
    names = listed.group(1).split(", ")
    assert "recompute_views" in names and "_sync_decision_cross_ranks" in names
    for name in names:
        if name in FLAGS_SINCE and RUNNING < FLAGS_SINCE[name]:
            assert not hasattr(config, name), f"{name} exists before {FLAGS_SINCE[name]}"
            continue
        assert hasattr(config, name), f"{name} is not a torch._functorch.config flag"
        assert name in COVERAGE, f"{name} is not mapped in test_config_coverage.py"
