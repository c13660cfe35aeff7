"""Structural comparison of partitioner results, with readable diffs.

Two partition results (forward module, backward module) are *the same* when

* the saved values match: the forward graph's outputs after the first
  ``num_fwd_outputs``, compared by node name, in order;
* the forward and backward graphs match node by node: name, op, target, args
  and kwargs.  Node references are compared by name; constants by value *and*
  type (``1`` is not ``1.0`` is not ``True``; a list is not a tuple); targets
  by their qualified name.  The output node is an ordinary node here, so the
  output structure is compared too.
* remat's modules are not stale: ``gm.code`` is what ``gm.graph`` generates
  (``recompile()`` was called after the last graph edit).

* (:func:`partition_meta_diffs`) every node's ``meta`` matches too: the same
  keys, plain data (numbers, strings, enums, dtypes, ops, containers of them)
  equal, other objects (fake tensors, SymInts, NodeSources, output
  descriptors) of the same type, save the differences the "Node metadata"
  table of docs/torch-releases.md lists, with their reasons, for the running
  release.

:func:`assert_same_partition` raises an ``AssertionError`` whose message names
the first differing node and prints both sides with some context.
"""

from __future__ import annotations

import enum
import functools
import math
import operator
from pathlib import Path
from typing import Any, Sequence

import torch
from torch import fx

CONTEXT_LINES = 3
# The table of node-meta differences remat keeps, in docs/torch-releases.md.
META_BEGIN, META_END = "<!-- meta-differences:begin -->", "<!-- meta-differences:end -->"


# --------------------------------------------------------------------------- normal forms


def target_key(target: Any) -> str:
    """A stable, comparable name for a node target."""
    if isinstance(target, str):
        return target
    if isinstance(target, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return f"op:{target}"
    if isinstance(target, torch._ops.HigherOrderOperator):
        return f"hop:{target.name()}"
    if target is operator.getitem:
        return "operator.getitem"
    try:
        return f"fn:{fx.node._get_qualified_name(target)}"
    except Exception:
        return f"obj:{type(target).__qualname__}:{target!r}"


def _constant_key(value: Any) -> Any:
    if isinstance(value, float):
        if math.isnan(value):
            return ("float", "nan")
        return ("float", repr(value))  # repr keeps -0.0 and inf distinct and exact
    if value is None or isinstance(value, (bool, int, str, complex)):
        return (type(value).__name__, value)
    if isinstance(value, (torch.dtype, torch.device, torch.layout, torch.memory_format)):
        return (type(value).__name__, str(value))
    if isinstance(value, slice):
        return ("slice", normalize_arg(value.start), normalize_arg(value.stop), normalize_arg(value.step))
    if value is Ellipsis:
        return ("Ellipsis",)
    if isinstance(value, torch.Tensor):
        return ("Tensor", tuple(value.shape), str(value.dtype), repr(value))
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return (type(value).__name__, str(value))
    if isinstance(value, torch._ops.OpOverload | torch._ops.HigherOrderOperator) or callable(value):
        return ("callable", target_key(value))
    return (type(value).__qualname__, repr(value))


def normalize_arg(arg: Any) -> Any:
    """Nested args as hashable tuples: nodes by name, containers typed, constants typed."""
    if isinstance(arg, fx.Node):
        return ("node", arg.name)
    if isinstance(arg, (list, fx.immutable_collections.immutable_list)):
        return ("list", tuple(normalize_arg(a) for a in arg))
    if isinstance(arg, tuple):
        return ("tuple", tuple(normalize_arg(a) for a in arg))
    if isinstance(arg, dict):
        return ("dict", tuple((k, normalize_arg(v)) for k, v in arg.items()))
    return ("const", _constant_key(arg))


def node_key(node: fx.Node) -> tuple:
    return (node.name, node.op, target_key(node.target), normalize_arg(node.args), normalize_arg(node.kwargs))


def output_node(gm: fx.GraphModule) -> fx.Node:
    (out,) = gm.graph.find_nodes(op="output")
    return out


def output_values(gm: fx.GraphModule) -> list[Any]:
    args = output_node(gm).args[0]
    return list(args) if isinstance(args, (list, tuple)) else [args]


def saved_value_names(fw_module: fx.GraphModule, num_fwd_outputs: int) -> list[str]:
    """Names of what the forward hands the backward: its outputs after the real ones."""
    return [v.name if isinstance(v, fx.Node) else repr(v) for v in output_values(fw_module)[num_fwd_outputs:]]


# --------------------------------------------------------------------------- diffs


def _describe(node: fx.Node) -> str:
    text = node.format_node()
    if text is None:
        return f"{node.op} {node.name}"
    if node.op == "output":  # FX prints no name for the output node; it is compared all the same
        return f"{text}    [output node named {node.name!r}]"
    return text


def _window(nodes: Sequence[fx.Node], index: int) -> str:
    lo, hi = max(0, index - CONTEXT_LINES), min(len(nodes), index + CONTEXT_LINES + 1)
    lines = []
    for i in range(lo, hi):
        marker = ">>" if i == index else "  "
        lines.append(f"    {marker} #{i:<3} {_describe(nodes[i])}")
    return "\n".join(lines) if lines else "    (empty)"


def graph_diff(expected: fx.GraphModule, actual: fx.GraphModule, what: str) -> str | None:
    """``None`` if the graphs match node by node, else a description of the first difference."""
    exp_nodes, act_nodes = list(expected.graph.nodes), list(actual.graph.nodes)
    for i in range(max(len(exp_nodes), len(act_nodes))):
        exp = exp_nodes[i] if i < len(exp_nodes) else None
        act = act_nodes[i] if i < len(act_nodes) else None
        if exp is not None and act is not None and node_key(exp) == node_key(act):
            continue
        fields = ""
        if exp is not None and act is not None:
            names = ("name", "op", "target", "args", "kwargs")
            fields = ", ".join(n for n, a, b in zip(names, node_key(exp), node_key(act)) if a != b)
            fields = f" (differs in: {fields})"
        return (
            f"{what} graph differs at node #{i}{fields}; "
            f"torch has {len(exp_nodes)} nodes, remat has {len(act_nodes)}\n"
            f"  torch: {_describe(exp) if exp is not None else '<no node>'}\n"
            f"  remat: {_describe(act) if act is not None else '<no node>'}\n"
            f"  torch context:\n{_window(exp_nodes, min(i, len(exp_nodes) - 1))}\n"
            f"  remat context:\n{_window(act_nodes, min(i, len(act_nodes) - 1))}"
        )
    return None


def saved_values_diff(expected_fw: fx.GraphModule, actual_fw: fx.GraphModule, num_fwd_outputs: int) -> str | None:
    exp = saved_value_names(expected_fw, num_fwd_outputs)
    act = saved_value_names(actual_fw, num_fwd_outputs)
    if exp == act:
        return None
    first = next((i for i, (a, b) in enumerate(zip(exp, act)) if a != b), min(len(exp), len(act)))
    only_torch = [n for n in exp if n not in act]
    only_remat = [n for n in act if n not in exp]
    return (
        f"saved values differ (first at position {first}; torch saves {len(exp)}, remat saves {len(act)})\n"
        f"  torch: {exp}\n  remat: {act}\n"
        f"  only torch: {only_torch}\n  only remat: {only_remat}"
    )


def stale_code_diff(gm: fx.GraphModule, side: str) -> str | None:
    """The module's Python code must be what its graph generates (``recompile()`` was called)."""
    fresh = gm.graph.python_code(root_module="self").src
    if gm.code == fresh:
        return None
    return f"{side} module's code is stale: its graph changed after the last recompile()"


def partition_diffs(
    expected: tuple[fx.GraphModule, fx.GraphModule],
    actual: tuple[fx.GraphModule, fx.GraphModule],
    num_fwd_outputs: int,
) -> list[str]:
    """All top-level differences between two (forward, backward) results; empty if identical."""
    problems = []
    for side, gm in zip(("remat forward", "remat backward"), actual):
        if not isinstance(gm, fx.GraphModule):
            problems.append(f"{side} is {type(gm).__name__}, not an fx.GraphModule")
    if problems:
        return problems
    for diff in (
        stale_code_diff(actual[0], "remat forward"),
        stale_code_diff(actual[1], "remat backward"),
        saved_values_diff(expected[0], actual[0], num_fwd_outputs),
        graph_diff(expected[0], actual[0], "forward"),
        graph_diff(expected[1], actual[1], "backward"),
    ):
        if diff is not None:
            problems.append(diff)
    return problems


# --------------------------------------------------------------------------- node meta


def _meta_leaf_key(value: Any) -> Any:
    """A meta value's normal form: plain data by value, other objects by type."""
    if isinstance(value, (fx.Node,)):
        return ("node", value.name)
    if isinstance(value, type):
        return ("type", f"{value.__module__}.{value.__qualname__}")
    if isinstance(value, enum.Enum):
        return (type(value).__qualname__, value.name)
    if isinstance(value, (torch._ops.OpOverload, torch._ops.OpOverloadPacket, torch._ops.HigherOrderOperator)):
        return ("callable", target_key(value))
    if value is None or isinstance(value, (bool, int, float, str, complex, torch.dtype, torch.device,
                                           torch.layout, torch.memory_format)):
        return _constant_key(value)
    return ("object", f"{type(value).__module__}.{type(value).__qualname__}")


def meta_value_key(value: Any) -> Any:
    """Containers by type and items, plain leaves by value, objects by type
    (a FakeTensor, a SymInt, a NodeSource, an AOTOutput)."""
    if isinstance(value, (list, tuple)) and type(value).__module__ in ("builtins", "torch.fx.immutable_collections"):
        return (type(value).__name__, tuple(meta_value_key(v) for v in value))
    if isinstance(value, dict) and type(value).__module__ in ("builtins", "torch.fx.immutable_collections"):
        return (type(value).__name__, tuple((meta_value_key(k), meta_value_key(v)) for k, v in value.items()))
    return _meta_leaf_key(value)


def _both(a: Any, b: Any) -> str:
    return f"torch {a!r:.300}\n      remat {b!r:.300}"


@functools.lru_cache(maxsize=None)
def listed_meta_differences(release: tuple[int, int]) -> dict[str, set[str]]:
    """The node-meta differences docs/torch-releases.md lists for `release`
    (its "Node metadata" table): key -> the node ops it concerns ("any" for
    all). A row without a reason does not count."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "torch-releases.md").read_text()
    _, rest = text.split(META_BEGIN, 1)
    table, _ = rest.split(META_END, 1)
    listed: dict[str, set[str]] = {}
    for line in table.strip().splitlines()[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[3]:
            raise ValueError(f"docs/torch-releases.md: a node-meta row needs key, releases, nodes and why: {line!r}")
        key, releases, ops, _why = cells
        if _release_matches(releases, release):
            listed.setdefault(key.strip("`"), set()).update(o.strip() for o in ops.split(","))
    return listed


def _release_matches(spec: str, release: tuple[int, int]) -> bool:
    """"all", "2.13", "2.13 on", "2.11-2.12"."""
    def parse(v: str) -> tuple[int, int]:
        major, minor = v.strip().split(".")
        return int(major), int(minor)

    spec = spec.strip()
    if spec == "all":
        return True
    if spec.endswith(" on"):
        return release >= parse(spec[:-3])
    if "-" in spec:
        lo, hi = spec.split("-")
        return parse(lo) <= release <= parse(hi)
    return release == parse(spec)


def node_meta_diffs(expected: fx.GraphModule, actual: fx.GraphModule, what: str,
                    listed: dict[str, set[str]] | None = None) -> list[str]:
    """How the two graphs' node.meta differ, node by node (the graphs match
    node for node already): keys only one side has, and values whose normal
    form (meta_value_key) differs, except the differences `listed`
    (listed_meta_differences) excuses."""
    listed = listed or {}
    out = []
    for exp, act in zip(expected.graph.nodes, actual.graph.nodes):
        problems = []
        for key in sorted(exp.meta.keys() | act.meta.keys()):
            ops = listed.get(key, ())
            if "any" in ops or exp.op in ops:
                continue
            if key not in act.meta:
                problems.append(f"    {key!r}: only torch has it")
            elif key not in exp.meta:
                problems.append(f"    {key!r}: only remat has it")
            elif meta_value_key(exp.meta[key]) != meta_value_key(act.meta[key]):
                problems.append(f"    {key!r} differs:\n      " + _both(exp.meta[key], act.meta[key]))
        if problems:
            out.append(f"{what} node {exp.name!r} ({exp.op}) meta differs:\n" + "\n".join(problems))
    return out


def partition_meta_diffs(
    expected: tuple[fx.GraphModule, fx.GraphModule],
    actual: tuple[fx.GraphModule, fx.GraphModule],
) -> list[str]:
    """node_meta_diffs of both graphs, less what docs/torch-releases.md lists
    for the running release."""
    listed = listed_meta_differences(running_release())
    return (node_meta_diffs(expected[0], actual[0], "forward", listed)
            + node_meta_diffs(expected[1], actual[1], "backward", listed))


def running_release() -> tuple[int, int]:
    major, minor = torch.__version__.split(".")[:2]
    return int(major), int(minor)


def assert_same_partition(
    expected: tuple[fx.GraphModule, fx.GraphModule],
    actual: tuple[fx.GraphModule, fx.GraphModule],
    num_fwd_outputs: int,
    label: str,
) -> None:
    problems = partition_diffs(expected, actual, num_fwd_outputs)
    if problems:
        raise AssertionError(f"{label}: partition mismatch\n" + "\n\n".join(problems))
