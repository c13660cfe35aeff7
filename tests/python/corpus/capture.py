"""Capture joint graphs from the model zoo and replay torch's partitioner on them.

Capture
-------
Each case is compiled with ``torch.compile(model, backend=aot_autograd(...,
partition_fn=recorder))`` and run forward+backward once.  AOTAutograd calls
``recorder(joint_module, joint_inputs, num_fwd_outputs=...,
static_lifetime_input_indices=...)`` once per joint graph (graph breaks give
several).  The recorder

* deep-copies the joint module *before* anything touches it (torch's
  partitioner mutates its argument: DCE, CSE swaps the graph, recompute-tag
  cleanup rewrites ``node.meta``).  ``copy.deepcopy(GraphModule)`` keeps node
  names, order, targets and args, and shallow-copies every ``node.meta`` dict:
  ``meta["val"]`` is the *same* FakeTensor / SymInt object, still owned by the
  compile's FakeTensorMode and ShapeEnv, which is exactly what a faithful
  replay needs (a deep copy of the FakeTensors would detach them from their
  mode and shape env);
* remembers the ambient context: the active ``TracingContext`` and the
  ``FakeTensorMode`` (``detect_fake_mode(joint_inputs)``);
* calls torch's real ``min_cut_rematerialization_partition`` so compilation
  continues, and keeps deep copies of what it returned (AOTAutograd edits the
  returned modules afterwards), so tests can check that a replay reproduces the
  compile-time result.

Replay
------
When AOTAutograd calls the partition function, three things are in force and
a direct call must reproduce them (:func:`replay_context`):

1. ``torch._guards.tracing(ctx)`` with the compile's ``TracingContext``.
   ``Graph.eliminate_dead_code`` consults it: with a TracingContext, random ops
   are impure only if ``torch._inductor.config.fallback_random`` (so unused
   ``rand``/``native_dropout`` results are removed); without one they are always
   impure and survive DCE.  It also carries the fake mode for
   ``detect_fake_mode()``.
2. The ``FakeTensorMode`` entered as a dispatch mode.  ``functionalize_rng_ops``
   calls ``detect_fake_mode()`` and fakeifies ``torch.get_rng_state()`` for the
   ``rng_state`` placeholders/outputs.
3. ``torch.no_grad()`` (``_aot_stage2a_partition`` partitions under it).

Plus the partitioner's configuration: ``torch._functorch.config`` and the
inductor flags it reads (``fallback_random``).  The recorder snapshots the
functorch config; replay re-applies any key that differs now.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import warnings
from typing import Any, Callable, Iterator

import torch
import torch._functorch.config as functorch_config
from torch import fx
from torch._dynamo.backends.common import aot_autograd
from torch._functorch.partitioners import min_cut_rematerialization_partition

from .models import CASES_BY_NAME, Case

PartitionFn = Callable[..., tuple[fx.GraphModule, fx.GraphModule]]


@dataclasses.dataclass
class CapturedGraph:
    """One joint graph as AOTAutograd handed it to the partition function."""

    case: str
    index: int
    joint_module: fx.GraphModule  # pristine; never pass it to a partitioner, use fresh_joint()
    joint_inputs: Any
    num_fwd_outputs: int
    static_lifetime_input_indices: list[int] | None
    tracing_context: Any
    fake_mode: Any
    functorch_config: dict[str, Any]
    inductor_fallback_random: bool
    compile_time_fw: fx.GraphModule
    compile_time_bw: fx.GraphModule

    @property
    def label(self) -> str:
        return f"{self.case}[graph {self.index}]"

    def fresh_joint(self) -> fx.GraphModule:
        """An independent copy of the joint module (meta values shared, as in compile)."""
        return copy_graph_module(self.joint_module)

    def partition_kwargs(self) -> dict[str, Any]:
        indices = self.static_lifetime_input_indices
        return {
            "num_fwd_outputs": self.num_fwd_outputs,
            "static_lifetime_input_indices": None if indices is None else list(indices),
        }


def copy_graph_module(gm: fx.GraphModule) -> fx.GraphModule:
    """Deep-copy ``gm`` outside any fake mode; node.meta values stay shared.

    ``Graph.__deepcopy__`` recreates the output node with ``graph.output()``,
    which names it ``output`` even when the original was ``output_1`` (torch's
    ``functionalize_rng_ops`` replaces the forward's output node); restore it.
    """
    with torch._subclasses.fake_tensor.unset_fake_temporarily(), warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # pytree LeafSpec deprecation, from copyreg
        new = copy.deepcopy(gm)
    (old_out,) = gm.graph.find_nodes(op="output")
    (new_out,) = new.graph.find_nodes(op="output")
    if new_out.name != old_out.name:
        new_out._rename(old_out.name)
        assert new_out.name == old_out.name, (new_out.name, old_out.name)
    return new


# --------------------------------------------------------------------------- replay


def _functorch_config_overrides(snapshot: dict[str, Any]) -> dict[str, Any]:
    now = functorch_config.get_config_copy()
    overrides = {}
    for key, value in snapshot.items():
        try:
            differs = now.get(key) != value
        except Exception:  # pragma: no cover - incomparable values
            differs = now.get(key) is not value
        if differs:
            overrides[key] = value
    return overrides


@contextlib.contextmanager
def replay_context(cap: CapturedGraph, **config_patches: Any) -> Iterator[None]:
    """The context AOTAutograd partitions in (see module docstring), plus config patches."""
    overrides = {**_functorch_config_overrides(cap.functorch_config), **config_patches}
    with contextlib.ExitStack() as stack:
        stack.enter_context(functorch_config.patch(overrides))
        stack.enter_context(torch._inductor.config.patch(fallback_random=cap.inductor_fallback_random))
        stack.enter_context(torch._guards.tracing(cap.tracing_context))
        stack.enter_context(cap.fake_mode)
        stack.enter_context(torch.no_grad())
        yield


def run_partition(
    partition_fn: PartitionFn, cap: CapturedGraph, **config_patches: Any
) -> tuple[fx.GraphModule, fx.GraphModule]:
    """Call ``partition_fn`` on a fresh copy of the joint graph, as AOTAutograd would."""
    joint = cap.fresh_joint()
    with replay_context(cap, **config_patches):
        return partition_fn(joint, cap.joint_inputs, **cap.partition_kwargs())


# --------------------------------------------------------------------------- capture


def _decompositions(case: Case) -> Any:
    if case.options.get("decompositions") == "inductor":
        from torch._inductor.decomposition import select_decomp_table

        return select_decomp_table()
    return None


def _nop_compiler(gm: fx.GraphModule, example_inputs: Any) -> Callable:
    from functorch.compile import make_boxed_func

    return make_boxed_func(gm.forward)


def make_backend(case: Case, partition_fn: PartitionFn) -> Any:
    """An aot_autograd backend with identity compilers and the given partition function."""
    return aot_autograd(
        fw_compiler=_nop_compiler,
        bw_compiler=_nop_compiler,
        partition_fn=partition_fn,
        decompositions=_decompositions(case),
        keep_inference_input_mutations=True,
    )


def compile_case(case: Case, model: torch.nn.Module, backend: Any, inputs: tuple[Any, ...]) -> Callable:
    """``torch.compile`` the model with the case's options (dynamic, mark_dynamic)."""
    torch._dynamo.reset()
    for input_index, dim in case.options.get("mark_dynamic", ()):
        torch._dynamo.mark_dynamic(inputs[input_index], dim)
    return torch.compile(model, backend=backend, dynamic=case.options.get("dynamic"))


def loss_of(output: Any) -> torch.Tensor:
    """A scalar from every differentiable floating-point tensor in ``output``."""
    leaves = [t for t in torch.utils._pytree.tree_leaves(output) if isinstance(t, torch.Tensor)]
    terms = [t.float().sum() for t in leaves if t.is_floating_point() and t.requires_grad]
    assert terms, "case produced no differentiable output"
    total = terms[0]
    for term in terms[1:]:
        total = total + term
    return total


def _make_recorder(case: Case, sink: list[CapturedGraph]) -> PartitionFn:
    def recorder(joint_module: fx.GraphModule, joint_inputs: Any, **kwargs: Any):
        pristine = copy_graph_module(joint_module)
        ctx = torch._guards.TracingContext.try_get()
        fake_mode = torch._guards.detect_fake_mode(joint_inputs)
        assert ctx is not None and fake_mode is not None, "partition_fn called outside a compile"
        fw, bw = min_cut_rematerialization_partition(joint_module, joint_inputs, **kwargs)
        sink.append(
            CapturedGraph(
                case=case.name,
                index=len(sink),
                joint_module=pristine,
                joint_inputs=joint_inputs,
                num_fwd_outputs=kwargs["num_fwd_outputs"],
                static_lifetime_input_indices=kwargs.get("static_lifetime_input_indices"),
                tracing_context=ctx,
                fake_mode=fake_mode,
                functorch_config=functorch_config.get_config_copy(),
                inductor_fallback_random=torch._inductor.config.fallback_random,
                compile_time_fw=copy_graph_module(fw),
                compile_time_bw=copy_graph_module(bw),
            )
        )
        return fw, bw

    return recorder


def capture_case(case: Case) -> list[CapturedGraph]:
    """Compile and run ``case`` once (forward + backward), recording every joint graph."""
    graphs: list[CapturedGraph] = []
    model = case.make_module()
    inputs = case.make_inputs()
    compiled = compile_case(case, model, make_backend(case, _make_recorder(case, graphs)), inputs)
    torch.manual_seed(0)
    loss_of(compiled(*inputs)).backward()
    torch._dynamo.reset()
    assert graphs, f"{case.name}: no joint graph was captured"
    return graphs


@functools.lru_cache(maxsize=None)
def captured_graphs(case_name: str) -> tuple[CapturedGraph, ...]:
    """Session-wide cache: each case is compiled at most once per test process."""
    return tuple(capture_case(CASES_BY_NAME[case_name]))


def dynamic_joint(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> tuple[fx.GraphModule, dict]:
    """The joint graph torch.compile(dynamic=True) hands the partitioner for
    `fn(x).backward()` (symbolic sizes and their arithmetic nodes), with the
    partition call's keyword arguments; the compile itself runs torch's
    default_partition. Live, not deep-copied: for tests of the drop-in's
    fixed costs on one small graph."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.partitioners import default_partition

    box: dict = {}

    def record(gm, inputs, **kwargs):
        box["joint"] = (gm, kwargs)
        return default_partition(gm, inputs, **kwargs)

    torch._dynamo.reset()
    backend = aot_autograd(fw_compiler=lambda g, _: make_boxed_func(g.forward), partition_fn=record)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.compile(fn, backend=backend, dynamic=True)(x).backward()
    torch._dynamo.reset()
    return box["joint"]
