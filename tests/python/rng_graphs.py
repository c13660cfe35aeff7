"""Stored joint graphs with CUDA metadata (tests/data/rng), rebuilt as FX modules.

tools/capture_rng_graphs.py captures them (see its docstring for how and
why). Here each document becomes a GraphModule that torch's partitioner can
run on, as AOTAutograd would hand it over:

* nodes, targets, args and kwargs as exported, the graph modules nested in
  the joint module (invoke_subgraph bodies) registered under their names;
* meta["val"] rebuilt as fake tensors of one FakeTensorMode, tensors with
  the same exported storage sharing one fake storage (torch's memory-budget
  path compares storages), generators as the CUDA stand-in of the tool; the
  values are built once per document and shared by every module rebuilt
  from it (as AOTAutograd's joint graph and its copies share them), the
  meta dicts are new each time (partitioners write to them);
* the partitioner's meta keys (recompute, ac_graph_id, partitioner_tag, ...)
  and "tensor_meta".

:func:`partition_context` is the context AOTAutograd partitions in (tracing
context, fake mode, no_grad), plus torch config patches and the CUDA
stand-ins torch's partitioner needs on a CPU-only build.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib.util
import os
import sys
from typing import Any, Iterator, Optional

import orjson
import torch
import torch.fx as fx

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "tests", "data", "rng")


@functools.lru_cache(maxsize=None)
def capture_tool() -> Any:
    spec = importlib.util.spec_from_file_location(
        "capture_rng_graphs", os.path.join(ROOT, "tools", "capture_rng_graphs.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def names() -> list[str]:
    return sorted(f[:-5] for f in os.listdir(DATA) if f.endswith(".json"))


@dataclasses.dataclass
class StoredJoint:
    name: str
    doc: dict
    fake_mode: Any
    values: Any = None  # per graph (None: the joint graph, else a subgraph's name): node name -> val

    @property
    def num_fwd_outputs(self) -> int:
        return int(self.doc["num_fwd_outputs"])

    def partition_kwargs(self) -> dict:
        return {"num_fwd_outputs": self.num_fwd_outputs,
                "static_lifetime_input_indices": list(self.doc.get("static_lifetime_input_indices", []))}

    def fresh(self) -> fx.GraphModule:
        """A new joint module (new nodes, new fake tensors) from the document."""
        if self.values is None:
            self.values = _values(self.doc, self.fake_mode)
        return _build_module(self.doc, self.values)


@functools.lru_cache(maxsize=None)
def load(name: str) -> StoredJoint:
    from torch._subclasses.fake_tensor import FakeTensorMode

    with open(os.path.join(DATA, f"{name}.json"), "rb") as f:
        doc = orjson.loads(f.read())
    return StoredJoint(name, doc, FakeTensorMode(allow_non_fake_inputs=True))


@contextlib.contextmanager
def partition_context(stored: StoredJoint, fallback_random: bool = False, **config: Any) -> Iterator[None]:
    import torch._functorch.config as functorch_config
    from torch._guards import TracingContext

    with contextlib.ExitStack() as stack:
        stack.enter_context(capture_tool().cuda_stand_ins())
        stack.enter_context(functorch_config.patch(config))
        stack.enter_context(torch._inductor.config.patch(fallback_random=fallback_random))
        stack.enter_context(torch._guards.tracing(TracingContext(stored.fake_mode)))
        stack.enter_context(stored.fake_mode)
        stack.enter_context(torch.no_grad())
        yield


def run(partition_fn: Any, stored: StoredJoint, **context: Any) -> tuple[fx.GraphModule, fx.GraphModule]:
    joint = stored.fresh()
    with partition_context(stored, **context):
        return partition_fn(joint, [], **stored.partition_kwargs())


# --------------------------------------------------------------------------- building


def _nbytes(v: dict) -> int:
    shape, stride = v.get("shape", []), v.get("stride")
    itemsize = torch.empty((), dtype=getattr(torch, v["dtype"])).element_size()
    if any(d == 0 for d in shape):
        return 0
    if stride is None:
        n = 1
        for d in shape:
            n *= d
        return n * itemsize
    return (sum((d - 1) * s for d, s in zip(shape, stride)) + 1) * itemsize


class _Values:
    """Builds meta["val"] of one module tree: fake tensors sharing storage by id."""

    def __init__(self, doc: dict, fake_mode: Any) -> None:
        self.fake_mode = fake_mode
        self.nbytes: dict[tuple, int] = {}
        self.bases: dict[tuple, torch.Tensor] = {}
        graphs = [doc["nodes"]] + [s["nodes"] for s in doc.get("subgraphs", [])]
        for nodes in graphs:
            for nd in nodes:
                for t in self._tensors(nd.get("val")):
                    key = (t.get("storage", -1), t.get("device", "cpu"))
                    if key[0] >= 0:
                        self.nbytes[key] = max(self.nbytes.get(key, 0), _nbytes(t))

    @staticmethod
    def _tensors(v: Optional[dict]) -> list[dict]:
        if v is None:
            return []
        if v["kind"] == "tensor":
            return [v]
        if v["kind"] == "sequence":
            return [t for x in v["items"] for t in _Values._tensors(x)]
        return []

    def tensor(self, v: dict) -> torch.Tensor:
        dtype, device = getattr(torch, v["dtype"]), torch.device(v.get("device", "cpu"))
        shape, stride = v.get("shape", []), v.get("stride")
        key = (v.get("storage", -1), v.get("device", "cpu"))
        with self.fake_mode:
            if key[0] < 0 or stride is None:
                return torch.empty(shape, dtype=dtype, device=device)
            base = self.bases.get(key)
            if base is None:
                base = self.bases[key] = torch.empty(self.nbytes[key], dtype=torch.uint8, device=device)
            return torch.empty(0, dtype=dtype, device=device).set_(
                base.untyped_storage(), 0, shape, stride)

    def value(self, v: Optional[dict]) -> Any:
        kind = v["kind"]
        if kind == "tensor":
            return self.tensor(v)
        if kind == "sequence":
            return tuple(self.value(x) for x in v["items"])
        if kind == "generator":
            return capture_tool().StandInCudaGeneratorState(v["device"])
        if kind == "none":
            return None
        raise ValueError(f"rng_graphs: value kind {kind!r} is not rebuilt")


def _values(doc: dict, fake_mode: Any) -> dict:
    """graph (None: the joint graph; else a subgraph's name) -> node name -> val."""
    build = _Values(doc, fake_mode)
    graphs = [(None, doc["nodes"])] + [(s["name"], s["nodes"]) for s in doc.get("subgraphs", [])]
    return {g: {nd["name"]: build.value(nd["val"]) for nd in nodes if "val" in nd} for g, nodes in graphs}


def _meta(nd: dict, vals: dict) -> dict:
    from torch.fx.passes.shape_prop import _extract_tensor_metadata

    from remat.torch._json_to_fx import _partitioner_keys_from_doc

    # The partitioner's keys as the importer reads them; "val" from the
    # document's shared fake values instead of the importer's own.
    meta = _partitioner_keys_from_doc(nd.get("meta") or {})
    if "val" in nd:
        meta["val"] = vals[nd["name"]]
    if nd.get("tensor_meta"):
        val = meta.get("val")
        meta["tensor_meta"] = _extract_tensor_metadata(val) if isinstance(val, torch.Tensor) else None
    return meta


def _graph(nodes: list[dict], vals: dict) -> fx.Graph:
    from remat.torch._json_to_fx import _build_graph

    with capture_tool().cuda_stand_ins():  # the importer's own meta makes generators
        graph = _build_graph(nodes, None, None, match_by_name=False)
    for node, nd in zip(graph.nodes, nodes):
        node.meta = _meta(nd, vals)
    return graph


def _build_module(doc: dict, values: dict) -> fx.GraphModule:
    subs = doc.get("subgraphs", [])
    built: dict[str, fx.GraphModule] = {}
    # Children before parents: each body's module holds its own bodies.
    for s in reversed(subs):
        root = torch.nn.Module()
        for child, mod in built.items():
            parent, _, leaf = child.rpartition(".")
            if parent == s["name"]:
                root.add_module(leaf, mod)
        built[s["name"]] = fx.GraphModule(root, _graph(s["nodes"], values[s["name"]]))
    root = torch.nn.Module()
    for s in subs:  # in named_modules() order, as exported
        if "." not in s["name"]:
            root.add_module(s["name"], built[s["name"]])
    gm = fx.GraphModule(root, _graph(doc["nodes"], values[None]))
    # GraphModule copies only the bodies get_attr nodes name; all of them
    # belong to the joint module, in the exported order.
    gm._modules.clear()
    for s in subs:
        if "." not in s["name"]:
            gm._modules[s["name"]] = built[s["name"]]
    return gm
