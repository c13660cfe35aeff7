"""Every torch config flag the partitioner reads has a home in remat.

Contract: the installed torch's partitioners.py, _activation_checkpointing/ and
_activation_offloading/ are read at test time, and every config flag they read
(torch._functorch.config as `config.X`, inductor's as `inductor_config.X`,
`ind_config.X` or `torch._inductor.config.X`) must appear in COVERAGE below,
so a flag a newer torch adds fails this test until someone decides what remat
does with it. Each entry is either
  * ("parity", test file): the drop-in reads the flag (its name appears in
    python/remat/torch/) and the named test file runs live parity cases with
    it set (its name appears there too); or
  * ("reason", text): why no parity case is needed, stated for the reader.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
DROPIN = HERE.parent.parent / "python" / "remat" / "torch"

PARITY = "parity"
REASON = "reason"

# flag -> (kind, test file or reason)
COVERAGE: dict[str, tuple[str, str]] = {
    # --- the min-cut's ban rules and knobs -----------------------------------
    "cse": (PARITY, "test_parity.py"),
    "recompute_views": (PARITY, "test_parity.py"),
    "aggressive_recomputation": (PARITY, "test_parity.py"),
    "treat_parameters_as_free_to_save": (PARITY, "test_parity.py"),
    "ban_recompute_reductions": (PARITY, "test_parity.py"),
    "ban_recompute_not_in_allowlist": (PARITY, "test_parity.py"),
    "ban_recompute_used_far_apart": (PARITY, "test_parity.py"),
    "ban_recompute_long_fusible_chains": (PARITY, "test_parity.py"),
    "ban_recompute_materialized_backward": (PARITY, "test_parity.py"),
    "max_dist_from_bw": (PARITY, "test_parity.py"),
    "is_non_builtin_to_include": (PARITY, "test_parity.py"),
    "unsafe_allow_optimization_of_collectives": (PARITY, "test_parity.py"),
    # --- memory budgets --------------------------------------------------------
    "activation_memory_budget": (PARITY, "test_budget_parity.py"),
    "activation_memory_budget_solver": (PARITY, "test_budget_parity.py"),
    "activation_memory_budget_runtime_estimator": (PARITY, "test_custom_budget.py"),
    "activation_memory_budget_require_full_coverage": (PARITY, "test_release_budget.py"),
    "visualize_memory_budget_pareto": (PARITY, "test_trace.py"),
    "memory_budget_pareto_dir": (PARITY, "test_trace.py"),
    # --- post-cut rewrites -----------------------------------------------------
    "graphsafe_rng_functionalization": (PARITY, "test_rng_parity.py"),
    "fallback_random": (PARITY, "test_rng_parity.py"),
    "test_configs": (REASON, "read only as test_configs.graphsafe_rng_func_ignores_fallback_random, "
                             "which options_from_torch folds into graphsafe_rng_functionalization "
                             "(tests/python/test_rng_parity.py runs both settings of fallback_random)"),
    "enable_activation_offloading": (PARITY, "test_offload_parity.py"),
    "activation_offload_separate_stream": (PARITY, "test_offload_parity.py"),
    "activation_offload_sink_wait": (PARITY, "test_offload_parity.py"),
    "activation_reload_prefetch": (PARITY, "test_offload_parity.py"),
    "activation_offload_cpu_gpu_bw": (PARITY, "test_offload_parity.py"),
    "cpu_gpu_bw": (REASON, "inductor's flag, read by torch 2.11 only (2.12 on read functorch's "
                           "activation_offload_cpu_gpu_bw) and only for separate-stream offloading, "
                           "which remat refuses under 2.11 (test_offload_parity.py); "
                           "_internals.offload_cpu_gpu_bw passes it on"),
    "post_grad_fusion_options": (PARITY, "test_fp8_quantization.py"),
    "_sync_decision_cross_ranks": (PARITY, "test_sync_decision.py"),
    # --- read by torch for things remat does not decide ------------------------
    "debug_partitioner": (REASON, "torch reads it once at import into partitioners.AOT_PARTITIONER_DEBUG; "
                                  "remat.torch._trace reads that module global where torch does, and "
                                  "tests/python/test_trace.py compares the debug lines with torch's"),
    "torch_compile_graph_format": (REASON, "the file extension of torch's draw_graph debugging helper, "
                                           "which no partitioner path calls (only users, by hand)"),
    "unbacked_symint_fallback": (REASON, "named in a comment of partitioners.py only (the size of an "
                                         "unbacked SymInt); remat's exporter writes torch's fallback size hint"),
    "unsafe_treat_script_objects_as_zero_size": (REASON, "read by torch's _size_of for script objects, "
                                                         "which the corpus has none of (no torchbind class "
                                                         "is registered on CPU builds): the drop-in passes "
                                                         "it on and tests/cpp/test_analyze.cc pins both "
                                                         "settings (an error naming the flag, or 0)"),
}

_PATTERNS = [
    re.compile(r"(?<![\w.])config\.([A-Za-z_]\w*)"),
    re.compile(r"(?<![\w.])(?:inductor_config|ind_config)\.([A-Za-z_]\w*)"),
    re.compile(r"torch\._(?:functorch|inductor)\.config\.([A-Za-z_]\w*)"),
]


def _torch_sources() -> list[Path]:
    import torch._functorch.partitioners as partitioners

    root = Path(partitioners.__file__).parent
    files = [root / "partitioners.py"]
    for folder in ("_activation_checkpointing", "_activation_offloading"):
        files += sorted((root / folder).glob("*.py"))
    return files


def flags_torch_reads() -> dict[str, list[str]]:
    """flag -> the files of the installed torch that read it."""
    found: dict[str, list[str]] = {}
    for path in _torch_sources():
        text = path.read_text()
        for pattern in _PATTERNS:
            for name in pattern.findall(text):
                found.setdefault(name, [])
                if path.name not in found[name]:
                    found[name].append(path.name)
    return found


def test_every_flag_torch_reads_is_covered():
    found = flags_torch_reads()
    assert "activation_memory_budget" in found, "the source scan found nothing: torch moved its files?"
    missing = {name: files for name, files in found.items() if name not in COVERAGE}
    assert not missing, f"torch reads config flags remat has not mapped (add them to COVERAGE): {missing}"


@pytest.mark.parametrize("flag", sorted(name for name, (kind, _) in COVERAGE.items() if kind == PARITY))
def test_parity_flags_are_read_by_the_dropin_and_tested(flag):
    dropin = "".join(p.read_text() for p in DROPIN.glob("*.py"))
    assert flag in dropin, f"{flag}: remat.torch never reads it"
    test_file = COVERAGE[flag][1]
    assert flag in (HERE / test_file).read_text(), f"{flag}: {test_file} has no case with it"


def test_reasons_are_stated():
    for flag, (kind, text) in COVERAGE.items():
        assert kind in (PARITY, REASON), flag
        if kind == REASON:
            assert len(text.split()) >= 8, f"{flag}: say why"
