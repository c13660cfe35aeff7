"""torch's FP8 activation quantization, around the engine's rewrite of it.

The engine rewrites the graphs (src/rewrite/quantize.cc); this module holds
what torch's pass does on the Python side of the partitioner.

Contract:
  * `options(config)`: inductor's
    ``post_grad_fusion_options["activation_quantization_aten_pass"]`` as the
    engine's "activation_quantization" option: exactly the keys torch's
    partitioner reads, flags as bools (torch tests their truthiness),
    size_in_mb as a number, dtype strings as given (the engine resolves them
    the way torch's getattr does). None (the pass off) stays None.
  * `size_check(joint_module, threshold)`: the engine's hook for tensors whose
    size is symbolic. It evaluates torch's own `calculate_tensor_size` of the
    joint node's fake value against the configured size_in_mb: with a guard
    (`bool()`, which records the same guard in the ShapeEnv that torch's
    should_quantize records, in the same order), or statically
    (statically_known_true / statically_known_false; None when neither).
  * `finish(result, joint_module, forward)`: the rest of what torch does
    when the pass quantized something (the result's "quantized_values" is
    non-empty): counters["inductor"]
    ["activation_quantization_fwd_aten_pass"] and [..."_bwd_aten_pass"] go up
    by one each; the quantized forward nodes and their joint nodes carry
    meta["saved_for_quantization"] and meta["dequant_type"], as torch leaves
    them; the forward output's meta "desc" and "output_stack_traces" are the
    ones torch's extraction set before the pass (the scales have none; a
    quantized output keeps its value's stack trace).
  * `trace_artifacts(result, joint_module, handles)`: the structured-trace
    artifacts before/after_activation_quantization_fwd/bwd_aten_pass, built
    from the result's "snapshots" and logged through `_trace` (which asks
    the engine for snapshots only while a structured trace listens).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable, Optional

import torch
import torch.fx as fx

import remat

from . import _internals, _release

_FLAGS = ("use_scaling", "exclude_primals", "skip_dynamo_guards", "quantize_dynamic_shape")
_STRINGS = ("quant_type", "allowed_dtypes")
_KEY = 'post_grad_fusion_options["activation_quantization_aten_pass"]'


def options(config: Any) -> Optional[dict]:
    """The engine's "activation_quantization" option for torch's dict (None: off)."""
    if config is None:
        return None
    if not isinstance(config, Mapping):
        raise remat.InvalidOptionError(
            f"torch._inductor.config.{_KEY}: expected a dict or None, got {type(config).__name__}")
    out: dict[str, Any] = {}
    for key in _STRINGS:
        if key in config:
            if not isinstance(config[key], str):
                raise remat.InvalidOptionError(
                    f"torch._inductor.config.{_KEY}[{key!r}]: expected a string such as "
                    f"'torch.bfloat16', got {config[key]!r}")
            out[key] = config[key]
    if "size_in_mb" in config:
        size = config["size_in_mb"]
        if isinstance(size, bool) or not isinstance(size, (int, float)):
            raise remat.InvalidOptionError(
                f"torch._inductor.config.{_KEY}['size_in_mb']: expected a number, got {size!r}")
        out["size_in_mb"] = float(size)
    for key in _FLAGS:
        if key in config:
            out[key] = bool(config[key])
    return out


def size_check(joint_module: fx.GraphModule, threshold: Any) -> Callable[[int, bool], Optional[bool]]:
    """The engine's size_check hook: torch's should_quantize size test, asked of the ShapeEnv.

    `threshold` is size_in_mb as torch reads it (an int stays an int, so the
    guard reads as torch's does).
    """
    calculate_tensor_size = _internals.partitioners().calculate_tensor_size
    statically_known_true = _internals.statically_known_true
    statically_known_false = _internals.statically_known_false
    nodes = list(joint_module.graph.nodes)  # joint ids are positions as exported

    def check(joint_id: int, guard: bool) -> Optional[bool]:
        large = calculate_tensor_size(nodes[joint_id].meta["val"]) >= threshold
        if guard:
            return bool(large)
        if statically_known_true(large):
            return True
        if statically_known_false(large):
            return False
        return None

    return check


def finish(result: dict, joint_module: fx.GraphModule, forward: fx.GraphModule) -> None:
    quantized = result.get("quantized_values") or []
    if not quantized:
        return
    counters = _internals.dynamo_utils().counters
    counters["inductor"]["activation_quantization_fwd_aten_pass"] += 1
    counters["inductor"]["activation_quantization_bwd_aten_pass"] += 1
    _mark(quantized, joint_module, forward)
    _restore_output_meta(forward)


def _mark(quantized: list, joint_module: fx.GraphModule, forward: fx.GraphModule) -> None:
    """torch marks the saved values it quantizes and never unmarks the forward's."""
    joint = {n.name: n for n in joint_module.graph.nodes}
    fw = {n.name: n for n in forward.graph.nodes}
    for name in quantized:
        for node in (joint.get(name), fw.get(name)):
            if node is None:
                continue
            node.meta["saved_for_quantization"] = True
            node.meta["dequant_type"] = node.meta["val"].dtype


def _restore_output_meta(forward: fx.GraphModule) -> None:
    """The forward output's meta as torch's extraction set it, before the pass."""
    (out,) = forward.graph.find_nodes(op="output")
    values = list(out.args[0])
    convert = torch.ops.prims.convert_element_type.default
    scales = [v for v in values if isinstance(v, fx.Node) and v.target is convert
              and v.name.startswith("fp8_scale_pos_")]
    kept = len(values) - len(scales)
    if "desc" in out.meta:
        out.meta["desc"] = out.meta["desc"][:kept]
    if not _release.behaves("output_stack_traces_meta"):
        return
    by_name = {n.name: n for n in forward.graph.nodes}
    before = [v for v in values if not any(v is s for s in scales)]
    traces = []
    for v in before:
        if isinstance(v, fx.Node) and v.name.startswith("fp8_quant_pos_"):
            source = by_name.get(v.name.split("_", 4)[-1])
            v = source if source is not None else v
        traces.append(v.meta.get("stack_trace") if isinstance(v, fx.Node) else None)
    out.meta["output_stack_traces"] = traces


def trace_artifacts(result: dict, joint_module: fx.GraphModule, handles: Optional[list]) -> None:
    """torch's before/after_activation_quantization_{fwd,bwd}_aten_pass
    artifacts, from the graphs the engine kept (result "snapshots", present
    when `_trace.request` asked for them), through `_trace`."""
    snapshots = result.get("snapshots") or []
    if not snapshots or not result.get("quantized_values"):
        return
    from ._json_to_fx import _build_graph, _make_module, created_nodes
    from ._trace import trace_activation_quantization

    forward_made: dict = {}  # the latest forward's created nodes, for backward placeholders
    for snap in snapshots:
        when, _, rest = snap["name"].partition("_activation_quantization_")
        which = rest.split("_", 1)[0]
        graph = _build_graph(snap["nodes"], joint_module, handles, match_by_name=False,
                             made_by=forward_made)
        if which == "fwd":
            forward_made = created_nodes(snap["nodes"], graph)
        trace_activation_quantization(when, which, _make_module(joint_module, graph))


__all__ = ["options", "size_check", "finish", "trace_artifacts"]
