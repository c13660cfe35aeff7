"""Peak memory of inductor-compiled CPU training steps, measured.

:func:`measured_peak` runs one training step (forward, a sum of the output,
backward) under torch's profiler with ``profile_memory=True`` and replays its
memory events (every allocation and free of the CPU allocator, in time
order): the peak of the running sum, plus the storages the step starts with
(parameters, buffers, inputs), is the step's peak. The same instrument reads
any backend, so the steps of inductor's generated code and of FX code run op
by op are measured alike. Unlike memtrack.py's tracker it also sees what
kernels allocate internally (workspaces), which no storage-level model
counts.

:func:`compile_and_measure` compiles a model with inductor through remat's
installed drop-in and returns the measured peak with the engine's partition
result (its ``memory`` section is the simulation the drop-in chose: under
install(), inductor's model by default).

:data:`SCALED_CASES`: corpus models at sizes where activations weigh (the
corpus's own are a few hundred bytes, below the allocator's noise).
:data:`MORE_CASES`: 22 more corpus models the same way
(bench/bench_inductor_memory.py ``--more``; no test compiles them).
"""

from __future__ import annotations

import contextlib
import dataclasses
import warnings
from typing import Any, Callable, Iterator

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile

import remat
from corpus import models


@dataclasses.dataclass(frozen=True)
class ScaledCase:
    name: str
    make_module: Callable[[], nn.Module]
    make_inputs: Callable[[], tuple[Any, ...]]


def _x(*shape: int) -> Callable[[], tuple[Any, ...]]:
    return models._inputs(lambda: models._randn(*shape, requires_grad=True))


class _Loss(nn.Module):
    """A corpus model whose outputs are a tuple (of which some are not
    floating point), reduced to the one loss a training step needs: the sum
    of every floating-point output."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, *args: Any) -> torch.Tensor:
        outs = self.inner(*args)
        return sum(o.sum() for o in outs if torch.is_floating_point(o))


def _loss(factory: Callable[[], nn.Module]) -> Callable[[], nn.Module]:
    return lambda: _Loss(factory())


# 22 more corpus models (the families SCALED_CASES does not cover; the
# corpus's dynamic-shape, nested-tensor, graph-break and no-op cases left
# out) at a batch where their activations weigh (their widths are the
# corpus's own): measured by bench/bench_inductor_memory.py only (each
# compile costs seconds).
_B = 4096
_WIDE = models._inputs(lambda: models._randn(_B, 8, requires_grad=True))
MORE_CASES = [
    ScaledCase("dropout_mlp", models._seeded(models.DropoutMLP), _WIDE),
    ScaledCase("checkpoint_mlp", models._seeded(models.CheckpointMLP), _WIDE),
    ScaledCase("checkpoint_dropout", models._seeded(lambda: models.CheckpointMLP(dropout=0.25)), _WIDE),
    ScaledCase("sac_save_mm",
               models._seeded(lambda: models.MatmulCheckpoint(models.sac_context(models.policy_save_mm))), _WIDE),
    ScaledCase("checkpoint_transformer_block", models._seeded(models.SdpaInCheckpoint), _x(4, 128, 16)),
    ScaledCase("multi_output", models._seeded(_loss(models.MultiOutput)), _WIDE),
    ScaledCase("input_mutation", models._seeded(models.InputMutation),
               models._inputs(lambda: models._randn(_B, 8, requires_grad=True), lambda: models._randn(_B, 8, seed=7))),
    ScaledCase("buffer_mutation", models._seeded(models.BufferMutation), _WIDE),
    ScaledCase("batchnorm1d_running_stats", models._seeded(models.BatchNorm1dMLP), _WIDE),
    ScaledCase("topk", models._seeded(_loss(models.TopK)), _WIDE),
    ScaledCase("max_min_dim", models._seeded(models.MaxDim), _WIDE),
    ScaledCase("split_chunk", models._seeded(models.SplitChunk), _WIDE),
    ScaledCase("var_mean", models._seeded(models.VarMean), _WIDE),
    ScaledCase("mixed_grad_inputs", models._seeded(models.MixedGradInputs),
               models._inputs(lambda: models._randn(_B, 8, requires_grad=True), lambda: models._randn(_B, 8, seed=3),
                              lambda: models._randn(8, requires_grad=True, seed=4))),
    ScaledCase("mlp_bf16", models._seeded(lambda: models._mlp(64, 3, "gelu").to(torch.bfloat16)),
               models._inputs(lambda: models._randn(512, 64).to(torch.bfloat16).requires_grad_())),
    ScaledCase("rmsnorm_nn", models._seeded(lambda: models.NormMLP(nn.RMSNorm(64), 64)), _x(512, 64)),
    ScaledCase("embedding", models._seeded(models.EmbeddingBag), models._inputs(lambda: models._randint(20, 512, 32))),
    ScaledCase("gru_unrolled", models._seeded(models.UnrolledGRU), _x(6, 1024, 4)),
    ScaledCase("lstm_unrolled", models._seeded(models.UnrolledLSTM), _x(6, 1024, 4)),
    ScaledCase("softmax_logsoftmax", models._seeded(models.Softmaxes), _WIDE),
    ScaledCase("duplicate_work_cse", models._seeded(models.DuplicateWork), _WIDE),
    ScaledCase("view_heavy", models._seeded(models.ViewHeavy), _WIDE),
]


SCALED_CASES = [
    ScaledCase("mlp_gelu_d6", models._seeded(lambda: models._mlp(64, 6, "gelu")), _x(512, 64)),
    ScaledCase("layernorm_gelu_mlp", models._seeded(lambda: models.NormMLP(nn.LayerNorm(64), 64)),
               _x(512, 64)),
    ScaledCase("rmsnorm_gelu_mlp", models._seeded(lambda: models.NormMLP(models.HandRMSNorm(64), 64)),
               _x(512, 64)),
    ScaledCase("residual_mlp", models._seeded(lambda: models.ResidualMLP(64, 4)), _x(512, 64)),
    ScaledCase("transformer_blocks_x2",
               models._seeded(lambda: nn.Sequential(models.TransformerBlock(64), models.TransformerBlock(64))),
               _x(2, 128, 64)),
    ScaledCase("cnn_bn_maxpool", models._seeded(lambda: models.CNNBatchNorm("max")), _x(64, 3, 8, 8)),
    ScaledCase("cnn_bn_avgpool", models._seeded(lambda: models.CNNBatchNorm("avg")), _x(64, 3, 8, 8)),
    ScaledCase("resnet_basic_block", models._seeded(models.BasicResBlock), _x(32, 4, 16, 16)),
    ScaledCase("sdpa_causal", models._seeded(lambda: models.Attention(64, 4, causal=True)), _x(4, 128, 64)),
    ScaledCase("cross_entropy", models._seeded(models.CrossEntropyModel),
               models._inputs(lambda: models._randint(16, 64, 128), lambda: models._randint(16, 64, 128, seed=9))),
]


def _storage_bytes(tensors: list[Any]) -> int:
    seen: dict[int, int] = {}
    for t in tensors:
        if isinstance(t, torch.Tensor):
            s = t.untyped_storage()
            seen[s._cdata] = s.nbytes()
    return sum(seen.values())


def measured_peak(step: Callable[[], None], held: list[Any]) -> int:
    """The peak bytes of `step` (profiler memory events) plus the storages
    of `held`, alive before it starts."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    events = sorted((e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events()
                    if e.name() == "[memory]")
    live = peak = 0
    for _, nbytes in events:
        live += nbytes
        peak = max(peak, live)
    return _storage_bytes(held) + peak


def _train_step(fn: Callable, model: nn.Module, inputs: tuple[Any, ...]) -> Callable[[], None]:
    def step() -> None:
        out = fn(*inputs)
        (out.sum() if out.dim() else out).backward()
    return step


@contextlib.contextmanager
def _fresh_compiles() -> Iterator[None]:
    """No cached artifacts: every compile partitions (remat must see it)."""
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    with inductor_config.patch(fx_graph_cache=False), \
            functorch_config.patch(enable_autograd_cache=False):
        torch._dynamo.reset()
        try:
            yield
        finally:
            torch._dynamo.reset()


@dataclasses.dataclass
class CompiledStep:
    """One model's inductor-compiled step: its measured peak, the engine's
    result for the graph inductor compiled, and the (forward, backward)
    modules the drop-in handed to inductor."""

    measured: int
    result: dict
    forward: Any
    backward: Any
    num_fwd_outputs: int


def compile_and_measure(case: ScaledCase, rt: Any, monkeypatch: Any, steps: int = 3) -> CompiledStep:
    """Compiles `case` with inductor under rt.install() (no caches), runs
    `steps` training steps and measures the last."""
    import torch._inductor.compile_fx as compile_fx

    results: list[dict] = []
    pairs: list[tuple[Any, Any, int]] = []
    engine = remat.partition

    def spy(*args: Any, **kwargs: Any):
        result = engine(*args, **kwargs)
        results.append(result)
        return result

    monkeypatch.setattr(remat, "partition", spy)
    model, inputs = case.make_module(), case.make_inputs()
    held = list(model.parameters()) + list(model.buffers()) + list(inputs)
    with _fresh_compiles(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rt.install(fallback=False)
        try:
            installed = compile_fx.min_cut_rematerialization_partition

            def keep_pair(*args: Any, **kwargs: Any):
                fw, bw = installed(*args, **kwargs)
                pairs.append((fw, bw, kwargs["num_fwd_outputs"]))
                return fw, bw

            monkeypatch.setattr(compile_fx, "min_cut_rematerialization_partition", keep_pair)
            fn = torch.compile(model, backend="inductor")
            peak = 0
            for _ in range(steps):
                for p in model.parameters():
                    p.grad = None  # the step allocates its gradients, as the simulation does
                peak = measured_peak(_train_step(fn, model, inputs), held)
        finally:
            monkeypatch.setattr(compile_fx, "min_cut_rematerialization_partition", installed)
            rt.uninstall()
    assert len(results) == 1 and len(pairs) == 1, \
        f"{case.name}: expected one partitioned graph, got {len(results)}"
    fw, bw, num_fwd_outputs = pairs[0]
    return CompiledStep(peak, results[0], fw, bw, num_fwd_outputs)
