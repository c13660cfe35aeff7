"""Every private torch name remat.torch uses, for every supported release.

Contract:
  * This is the only module of remat that imports torch's private modules
    (torch._functorch, torch._inductor, torch._dynamo, torch._subclasses,
    torch._library, torch._logging, torch._prims, torch._higher_order_ops,
    torch._guards, torch._ops, torch.fx.experimental, torch.nested._internal,
    torch.utils._*). tests/python/test_releases.py fails on any other import.
  * Where releases differ in a private name (moved, renamed, missing, a new
    signature), the difference is handled here, once, by reading the running
    release (_release.running()) or by what the module has; callers see one
    spelling. Behavioral differences of the partitioner itself are not here:
    they are the engine's switches (remat/torch_release.h), chosen by the
    release the drop-in passes (_release.reproduced()).
  * Heavy modules (inductor, dynamo, the partitioner) are imported on first
    use, through the functions below, so `import remat.torch` stays cheap;
    the few names the exporter needs on every node are imported eagerly.
"""

from __future__ import annotations

import functools
import importlib
from typing import Any, Callable, Optional

import torch
import torch.fx as fx
import torch.utils._pytree as pytree  # noqa: F401  (re-exported)
from torch._library.fake_class_registry import FakeScriptObject  # noqa: F401
from torch._ops import HigherOrderOperator, OpOverload, OpOverloadPacket  # noqa: F401
from torch.fx.experimental._backward_state import BackwardState  # noqa: F401
from torch.fx.experimental import symbolic_shapes as _shapes
from torch.nested._internal.nested_int import NestedIntNode  # noqa: F401
from torch.utils._mode_utils import no_dispatch  # noqa: F401
from torch.utils.checkpoint import CheckpointPolicy  # noqa: F401

from . import _release

statically_known_true = _shapes.statically_known_true
statically_known_false = _shapes.statically_known_false


# --- modules, imported on first use ---------------------------------------------

def _module(name: str) -> Callable[[], Any]:
    return functools.cache(lambda: importlib.import_module(name))


functorch_config = _module("torch._functorch.config")
inductor_config = _module("torch._inductor.config")
partitioners = _module("torch._functorch.partitioners")
compile_utils = _module("torch._functorch.compile_utils")
graph_compile = _module("torch._functorch._aot_autograd.graph_compile")
aot_autograd = _module("torch._functorch.aot_autograd")
aot_utils = _module("torch._functorch._aot_autograd.utils")
aot_logging = _module("torch._functorch._aot_autograd.logging_utils")
descriptors = _module("torch._functorch._aot_autograd.descriptors")
activation_offloading = _module("torch._functorch._activation_offloading.activation_offloading")
dynamo_utils = _module("torch._dynamo.utils")
torch_logging = _module("torch._logging")
logging_internal = _module("torch._logging._internal")
fake_tensor = _module("torch._subclasses.fake_tensor")
higher_order_ops = _module("torch._higher_order_ops")
guards = _module("torch._guards")
benchmarking = _module("torch._inductor.runtime.benchmarking")
pattern_matcher = _module("torch._inductor.pattern_matcher")


def maybe_module(name: str) -> Optional[Any]:
    """A module that only some releases or builds have, or None."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


# --- the places torch.compile calls a partitioner -------------------------------

# The module whose min_cut_rematerialization_partition inductor's compile_fx
# calls (and nothing else does).
INDUCTOR_PARTITION_HOLDER = "torch._inductor.compile_fx"
# Module attributes that hold torch's partition functions: where install()
# and capture() put theirs.
PARTITION_FN_HOLDERS = (
    ("torch._functorch.partitioners", "min_cut_rematerialization_partition"),
    ("torch._functorch.partitioners", "default_partition"),
    ("torch._functorch.aot_autograd", "default_partition"),
    ("torch._inductor.compile_fx", "min_cut_rematerialization_partition"),
    ("torch._dynamo.backends.debugging", "min_cut_rematerialization_partition"),
    ("functorch.compile", "min_cut_rematerialization_partition"),
    ("functorch.compile", "default_partition"),
)


def patch_partition_call(replace: Callable[[Callable], Callable]) -> Callable[[], None]:
    """Makes every aot_autograd compilation partition with `replace(fn)`
    instead of the partition function `fn` it was configured with, also one
    bound before the patch (a functools.partial, a default argument).
    Returns the function that undoes the patch.

    The one function every compilation passes its partition_fn through:
    2.13 on, `_partition_joint_graph_into_fw_bw(..., aot_config, partition_fn)`;
    2.12, the same function reading `aot_config.partition_fn`; 2.11,
    `_aot_stage2a_partition`, which reads it from aot_config too.
    """
    gc = graph_compile()
    name = ("_partition_joint_graph_into_fw_bw"
            if hasattr(gc, "_partition_joint_graph_into_fw_bw") else "_aot_stage2a_partition")
    original = getattr(gc, name)
    takes_fn = _release.running() >= (2, 13)

    @functools.wraps(original)
    def patched(*args: Any, **kwargs: Any) -> Any:
        if takes_fn:
            *rest, partition_fn = args
            return original(*rest, replace(partition_fn), **kwargs)
        aot_config = args[4]
        saved = aot_config.partition_fn
        aot_config.partition_fn = replace(saved)
        try:
            return original(*args, **kwargs)
        finally:
            aot_config.partition_fn = saved

    setattr(gc, name, patched)
    return lambda: setattr(gc, name, original)


# --- names that moved or appeared between releases --------------------------------

def optimization_hint(x: Any, fallback: Optional[int] = None) -> int:
    """A symbolic size's value for cost estimates, as the running release's
    partitioner takes it: optimization_hint (2.12 on: unbacked symbols get
    the fallback clamped into their value ranges), size_hint before."""
    if hasattr(_shapes, "optimization_hint"):
        return _shapes.optimization_hint(x, fallback=fallback)
    return _shapes.size_hint(x, fallback=fallback)


def is_opaque_value(x: Any) -> bool:
    """Whether torch treats a value as an opaque object (2.14 deprecated
    is_opaque_value, which now warns on every call, for is_custom_class_obj)."""
    from torch._library import opaque_object

    check = getattr(opaque_object, "is_custom_class_obj", None) or opaque_object.is_opaque_value
    return check(x)


def placeholder_expr(sym_node: Any) -> Any:
    """A SymNode's raw expression, as torch 2.14's _get_placeholder_expr
    gives it: the expression it was created with, before ShapeEnv's
    replacements, with unbacked renamings substituted inside it. None for a
    node without one (a constant node)."""
    result = getattr(sym_node, "_expr", None)
    if result is None:
        return None
    shape_env = getattr(sym_node, "shape_env", None)
    if shape_env is not None and shape_env.unbacked_renamings:
        return result.xreplace(shape_env.unbacked_renamings)
    return result


def symbol_bindings(node: fx.Node) -> tuple[Any, Any]:
    """The symbol an FX node binds, (by its replaced expression, by its raw
    one): torch 2.11-2.13's is_symbol_binding_fx_node (a SymInt whose
    expression after ShapeEnv's replacements is a symbol, on a placeholder
    or with free unbacked symbols) and 2.14's (whose raw expression is a
    symbol, on a placeholder or recorded in meta["unbacked_bindings"]).
    Computed here for every release, so a graph carries both answers and
    the engine's switch bind_unreplaced_symbols picks one."""
    import sympy

    val = node.meta.get("val")
    if not isinstance(val, torch.SymInt) or isinstance(val.node, NestedIntNode):
        return None, None
    sym = val.node
    expr = sym.expr
    replaced = expr if isinstance(expr, sympy.Symbol) and (
        node.op == "placeholder" or _shapes.free_unbacked_symbols(expr)) else None
    raw = placeholder_expr(sym)
    unreplaced = None
    if isinstance(raw, sympy.Symbol):
        if node.op == "placeholder":
            unreplaced = raw
        else:
            bindings = _shapes.resolve_unbacked_bindings(sym.shape_env,
                                                         node.meta.get("unbacked_bindings"))
            if bindings and raw in bindings:
                unreplaced = raw
    return replaced, unreplaced


_NO_DEFAULT = object()  # config_value without a default
_ABSENT = object()  # a default that no flag's value can be
# (config module name, flag) pairs the running release does not have: asked
# again, they skip straight to the default (a config module's flags are
# fixed when torch installs it).
_ABSENT_FLAGS: set[tuple[str, str]] = set()


def config_value(config: Any, name: str, default: Any = _NO_DEFAULT) -> Any:
    """getattr(config, name[, default]) for one of torch's config modules, at
    about half the cost (0.7 against 1.4 µs; a drop-in call reads some 30
    flags, the largest fixed cost on a graph of a few nodes).

    A config flag is never in the module's __dict__ (ConfigModule keeps
    them in its _config), so Python's own attribute lookup always fails
    before it calls the module type's __getattr__, which resolves the
    flag (user overrides, patches, environment, defaults, implications).
    Calling that __getattr__ directly skips only the failed lookup: the
    answer is the same function's. A name it does not know (a flag the
    release lacks, or a plain module attribute) goes through getattr."""
    module = config.__name__
    if (module, name) not in _ABSENT_FLAGS:
        resolve = getattr(type(config), "__getattr__", None)
        if resolve is not None:
            try:
                return resolve(config, name)
            except AttributeError:
                pass
        if not hasattr(config, name):
            _ABSENT_FLAGS.add((module, name))
    if default is _NO_DEFAULT:
        return getattr(config, name)
    return getattr(config, name, default)


def offload_cpu_gpu_bw() -> float:
    """The CPU<->GPU bandwidth activation offloading assumes (GB/s): its own
    flag from 2.12 on, inductor's cpu_gpu_bw in 2.11."""
    bw = config_value(functorch_config(), "activation_offload_cpu_gpu_bw", _ABSENT)
    if bw is _ABSENT:  # 2.11: no such flag
        return float(config_value(inductor_config(), "cpu_gpu_bw"))
    return float(bw)


def graphsafe_rng_device_types() -> list[str]:
    """Device types whose random ops are functionalized graph-safely:
    supports_graphsafe_rng's registry (2.13 on), CUDA alone before."""
    types = getattr(aot_utils(), "_GRAPHSAFE_RNG_DEVICE_TYPES", None)
    return sorted(types) if types is not None else ["cuda"]


def default_generator_state(device: torch.device) -> Any:
    """A fresh state of a device's default generator, as graph-safe RNG
    functionalization stores it (get_default_generator from 2.13 on; the
    CUDA generator before, the only device those releases support)."""
    utils = aot_utils()
    if hasattr(utils, "get_default_generator"):
        return utils.get_default_generator(device).clone_state()
    return utils.get_cuda_generator_meta_val(device.index)


def load_op_namespaces(namespace: str) -> None:
    """Imports the torch module that registers an op namespace's ops, for
    the ones registered on import: the RNG HOPs, activation offloading's
    ao:: ops (2.12 on), dynamo's streams:: ops, inductor's prims:: ops."""
    if namespace == "higher_order":
        importlib.import_module("torch._prims.rng_prims")
    elif namespace == "ao":
        maybe_module("torch._functorch._activation_offloading.offload_ops")
    elif namespace == "streams":
        maybe_module("torch._dynamo.variables.streams")
    elif namespace == "prims":
        # inductor's own prims (prims.fma, prims.inductor_random, ...)
        maybe_module("torch._inductor.inductor_prims")


def is_dispatcher_op(op: Any) -> bool:
    """Whether an OpOverload is registered with the dispatcher: torch.ops
    also reaches TorchScript's interpreter-only operators (aten::save,
    prim::Print, prim::rpc_sync...), which no trace records."""
    schema = op._schema
    try:
        torch._C._dispatch_find_schema_or_throw(schema.name, schema.overload_name)
    except RuntimeError:
        return False
    return True


def symbolic_method_operators() -> tuple:
    """The Python functions torch's symbolic shapes call on SymInt / SymFloat
    / SymBool values (sym_node.METHOD_TO_OPERATOR): the ones FX graphs of
    dynamic shapes hold as call_function targets."""
    from torch.fx.experimental.sym_node import METHOD_TO_OPERATOR

    return tuple(set(METHOD_TO_OPERATOR.values()))


@functools.cache
def stream_sync_ops() -> tuple:
    """The stream synchronization ops torch 2.14's extraction looks for in a
    control_deps subgraph (_aot_autograd.streams._SYNC_OPS, 2.12 on; none
    before, where no extraction asks)."""
    streams = maybe_module("torch._functorch._aot_autograd.streams")
    return tuple(getattr(streams, "_SYNC_OPS", ())) if streams is not None else ()


def compile_sync_group() -> Any:
    """Dynamo's compile-sync process group, on which torch 2.15's
    _sync_decision_cross_ranks talks (a gloo group of all ranks beside the
    default one, made on first use and cached by torch, so torch's own
    partitioner and AOTAutogradCache find the same one): what
    torch._dynamo.distributed.get_compile_sync_pg() returns, None without an
    initialized torch.distributed. Releases before 2.15 have no such group:
    an UnsupportedError then (torch's own sync talks on the default group)."""
    distributed = maybe_module("torch._dynamo.distributed")
    get = getattr(distributed, "get_compile_sync_pg", None) if distributed else None
    if get is None:
        import remat

        raise remat.UnsupportedError(
            f"remat: torch 2.15's cross-rank decision sync talks on dynamo's compile-sync "
            f"process group (torch._dynamo.distributed.get_compile_sync_pg), which torch "
            f"{torch.__version__} does not have")
    return get()


def no_python_dispatcher() -> Any:
    """A context without the Python dispatcher (torch.compile enables it
    while it compiles). A gloo collective made with it on enqueues its work
    holding the GIL, while gloo's worker thread may be freeing the previous
    work under the queue's lock and need the GIL for it: both threads wait
    for ever. Without it the binding releases the GIL first."""
    from torch._dispatch.python import no_python_dispatcher as disabled

    return disabled()


def object_collective_device(group: Any = None) -> str:
    """The device torch.distributed's object collectives use on `group`
    (None: the default group): the partitioner's sync puts its all_reduce
    tensor there."""
    from torch.distributed import distributed_c10d

    return distributed_c10d._get_object_coll_device(group)


def stable_target_str(target: Any) -> str:
    """A node target as torch 2.14's `_stable_target_str` prints it, in every
    release: FX's qualified name of a callable (the same in every process),
    str() of anything else or of a callable FX cannot name."""
    from torch.fx.node import _get_qualified_name

    if callable(target):
        try:
            return _get_qualified_name(target)
        except Exception:
            return str(target)
    return str(target)


def cse_as_partitioner(gm: fx.GraphModule, num_fwd_outputs: int) -> fx.Graph:
    """fx_graph_cse of gm's graph as the running release's
    min_cut_rematerialization_partition calls it: from 2.14 on, keyed by
    whether the backward needs a node, so a forward-only value never merges
    with one the backward needs."""
    cse = compile_utils().fx_graph_cse
    if _release.running() < (2, 14):
        return cse(gm.graph)
    _, bwd_outputs, _, _ = partitioners()._extract_fwd_bwd_outputs(
        gm, num_fwd_outputs=num_fwd_outputs)
    needed: set = set()
    stack = [o for o in bwd_outputs if o is not None and o.op != "output"]
    while stack:
        node = stack.pop()
        if node not in needed:
            needed.add(node)
            stack.extend(node.all_input_nodes)
    return cse(gm.graph, extra_node_key=lambda node: node in needed)


def has_storage(t: torch.Tensor) -> bool:
    return torch._C._has_storage(t)


def tracing_context_active() -> bool:
    return guards().TracingContext.try_get() is not None


def detect_fake_mode(values: list) -> Any:
    return guards().detect_fake_mode(values)


def is_graph_module(x: Any) -> bool:
    return isinstance(x, fx.GraphModule)
