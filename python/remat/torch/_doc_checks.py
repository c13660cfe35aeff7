"""Checks on a graph document's strings and numbers before FX sees them.

Contract (docs/format.md "Trust"): FX turns a graph into Python source and
runs it. Node names become local variables, placeholder targets the
parameters of `forward` (a placeholder's first argument their default value,
evaluated when the module is built), kwargs keys keyword arguments,
get_attr targets attribute paths after `self.`, and argument values are
written with repr(). So:
  * `name`, `placeholder_target`, `kwargs_key` and `attribute_path` admit
    only ASCII identifiers that are no keyword and no dunder; a node name or
    placeholder target also shadows nothing the generated code refers to
    (Python's builtins, FX's globals, `self`; `check_parameters`: another
    placeholder's parameter), and a get_attr path walks only
    the stored attributes of the root module (no method, no property, no
    nn.Module bookkeeping).
  * `meta_strings` refuses a string of a node's "meta" or "val" that holds
    `\"\"\"`: FX_GRAPH_SHOW_META=1 writes node meta into the generated source
    inside a triple-quoted string, which that sequence would end.
  * `LiteralBounds` bounds the Python numbers the symbolic-shape functions
    compute (operator.*, math.*, round, torch.sym_*): each value's bit length
    is bounded from the literals of the file and the nodes it reads (other
    nodes' values, tensor sizes among them, count as 64-bit numbers), as is
    the length of each string or sequence; a node that could exceed
    MAX_BITS bits or MAX_LENGTH items is refused, so calling the module does
    a bounded amount of work for every such node.
  * `header` checks a document's "format" and "version" as the command line
    does (src/io/read.cc).
Every refusal is an InvalidGraphError naming the node and the field (a
`format` or `version` error: ParseError, UnsupportedError, as remat::Error's
codes).
"""

from __future__ import annotations

import builtins
import functools
import keyword
import math
import operator
import re
from typing import Any, Optional

import torch
import torch.fx as fx

from ..errors import InvalidGraphError, ParseError, UnsupportedError
from . import _internals

FORMAT_VERSION = 1

# A Python int of this many bits takes microseconds in any operator; a graph
# of sizes needs a few hundred at most (a product of int64 dimensions).
MAX_BITS = 1 << 16
MAX_LENGTH = 1 << 20  # items of a str, list or tuple one node computes

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*").fullmatch


def fail(node: str, field: str, what: str) -> InvalidGraphError:
    return InvalidGraphError(f"node {node!r}: field {field!r}: {what}")


def _shown(s: Any) -> str:
    """A value for an error message: long text is cut (the message stays short)."""
    text = repr(s) if not isinstance(s, int) or s.bit_length() < 256 else f"<{s.bit_length()}-bit int>"
    return text if len(text) <= 80 else text[:77] + "..."


@functools.cache
def _reserved() -> frozenset:
    """What a local variable of FX's generated code must not be called:
    keywords, builtins, the globals FX puts in every module, and `self`."""
    from torch.fx import graph as fx_graph

    custom = getattr(fx_graph, "_custom_builtins", {})
    return frozenset({*keyword.kwlist, *dir(builtins), *custom, "self"})


def identifier(node: str, field: str, s: Any) -> str:
    """An ASCII identifier, no keyword, no dunder (FX writes it into source)."""
    if type(s) is not str or not _IDENTIFIER(s):
        raise fail(node, field, f"{_shown(s)} is not an ASCII identifier")
    if keyword.iskeyword(s):
        raise fail(node, field, f"{s!r} is a Python keyword")
    if s.startswith("__"):
        raise fail(node, field, f"{s!r} starts with '__' (a dunder or a mangled name)")
    return s


def name(index: int, s: Any) -> str:
    """A node's name: a local variable of the generated code."""
    where = s if type(s) is str else f"#{index}"
    identifier(where, "name", s)
    if s in _reserved():
        raise fail(s, "name", f"{s!r} would shadow a name the generated code uses (a builtin, "
                              "FX's globals or self)")
    return s


def placeholder_target(node: str, target: Any) -> str:
    """A placeholder's target: a parameter of the generated forward (how it
    sits beside the other parameters: `check_parameters`)."""
    if target == node:
        return target
    identifier(node, "target", target)
    if target in _reserved():
        raise fail(node, "target", f"{target!r} would shadow a name the generated code uses")
    return target


def check_parameters(graph: fx.Graph) -> None:
    """Before FX generates a module's code: forward's parameters (the
    placeholder targets) are distinct; one that is not its node's name is
    neither the name of another placeholder (whose value the generated code
    copies from its own parameter, which this one would replace) nor a
    global of the code, which it would stand for."""
    placeholders = list(graph.find_nodes(op="placeholder"))
    by_target: dict = {}
    for n in placeholders:
        other = by_target.setdefault(n.target, n.name)
        if other != n.name:
            raise fail(n.name, "target", f"{n.target!r} is also the target of placeholder {other!r}")
    odd = {n.target: n.name for n in placeholders if n.target != n.name}
    if not odd:
        return
    targets = {n.name: n.target for n in placeholders}
    used = set(graph.python_code("self").globals)
    for target, node in odd.items():
        if targets.get(target, target) != target:
            raise fail(node, "target", f"{target!r} is the name of another placeholder")
        if target in used:
            raise fail(node, "target", f"{target!r} is a name the generated code uses")


def kwargs_key(node: str, key: Any) -> str:
    return identifier(node, "kwargs", key)


_MODULE_OWN: Optional[frozenset] = None


def _module_own() -> frozenset:
    """The instance attributes every GraphModule has (training, _modules,
    _graph, meta, ...): its bookkeeping, never a stored value."""
    global _MODULE_OWN
    if _MODULE_OWN is None:
        gm = fx.GraphModule(torch.nn.Module(), fx.Graph())
        _MODULE_OWN = frozenset(vars(gm)) | frozenset(vars(torch.nn.Module()))
    return _MODULE_OWN


def attribute_path(node: str, path: Any, root: Any) -> str:
    """A get_attr target: a dotted path of stored attributes of `root` (its
    parameters, buffers, submodules and plain instance attributes), each an
    identifier; never a method, a property, a class attribute or the
    module's own bookkeeping (`forward`, `training`, `_modules`...). Without
    a root (a graph built for a module made later), the identifiers only."""
    if type(path) is not str:
        raise fail(node, "target", f"get_attr target {_shown(path)} is not an attribute path")
    obj = root
    for part in path.split("."):
        try:
            identifier(node, "target", part)
        except InvalidGraphError:
            raise fail(node, "target", f"get_attr target {_shown(path)} is not an attribute path "
                                       f"(part {_shown(part)})") from None
        obj = _stored(obj, part) if root is not None else None
        if obj is _MISSING:
            raise fail(node, "target", f"get_attr target {path!r}: {part!r} is not a stored "
                                       "attribute of the joint module")
    return path


_MISSING = object()


def _stored(obj: Any, part: str) -> Any:
    if not isinstance(obj, torch.nn.Module):
        return _MISSING
    for table in ("_parameters", "_buffers", "_modules"):
        found = obj.__dict__.get(table, {})
        if part in found:
            return found[part]
    if part in obj.__dict__ and part not in _module_own():
        return obj.__dict__[part]
    return _MISSING


def meta_strings(node: str, nd: dict) -> None:
    """No string of the node's "meta" or "val" holds a triple quote."""
    for field in ("meta", "val"):
        if field in nd and _has_triple_quote(nd[field], 0):
            raise fail(node, field, 'a string holds \'"""\', which FX_GRAPH_SHOW_META would write '
                                    "into the generated source unescaped")


def _has_triple_quote(x: Any, depth: int) -> bool:
    t = type(x)
    if t is str:
        return '"""' in x
    if depth > 64:
        return False  # the decoders refuse such nesting
    if t is dict:
        return any(_has_triple_quote(k, depth + 1) or _has_triple_quote(v, depth + 1)
                   for k, v in x.items())
    if t is list:
        return any(_has_triple_quote(v, depth + 1) for v in x)
    return False


# --- the document's header ---------------------------------------------------------


def header(doc: Any, expected: str, required: bool) -> None:
    """"format" and "version" as the command line reads them. `required`:
    a document without them is refused; else (a result's "forward" object)
    they may both be absent."""
    if type(doc) is not dict:
        raise ParseError(f"(document): expected an object, got {type(doc).__name__}")
    if not required and "format" not in doc and "version" not in doc:
        return
    fmt = doc.get("format")
    if fmt is None:
        raise ParseError(f"field 'format': missing (expected \"{expected}\")")
    if fmt != expected:
        hint = " (a partition result: use import_result)" if fmt == "remat.partition_result" else ""
        raise ParseError(f"field 'format': expected \"{expected}\", got {_shown(fmt)}{hint}")
    version = doc.get("version")
    if version is None:
        raise ParseError("field 'version': missing")
    if type(version) is not int or version != FORMAT_VERSION:
        raise UnsupportedError(f"field 'version': unsupported format version {_shown(version)} "
                               f"(this remat reads version {FORMAT_VERSION})")


# --- bounded arithmetic ---------------------------------------------------------------
#
# A bound is a tuple: ("num", bits) for an int or bool (or a value that is
# one only if it is a size: 64 bits), ("float",) for a float, ("str", n) and
# ("seq", n, element bound) for a str, list or tuple of at most n items,
# ("any",) for a value of another node (a tensor, a size, a number: 64 bits
# when it is a number), ("many",) for a node's sequence of unknown length
# (a multi-output op's result), on which no arithmetic is allowed.

_ANY = ("any",)
_MANY = ("many",)
_FLOAT = ("float",)
_BIT = ("num", 1)
_SIZE_BITS = 64
_FLOAT_BITS = 1024  # int() of a finite double is below 2**1024


def _bits(b: tuple) -> int:
    """The bit length of the number `b` stands for (when it is one)."""
    kind = b[0]
    if kind == "num":
        return b[1]
    if kind == "float":
        return _FLOAT_BITS
    return _SIZE_BITS


def _is_seq(b: tuple) -> bool:
    return b[0] in ("str", "seq", "many")


class LiteralBounds:
    """Bounds of the values the symbolic-function nodes compute, node by node."""

    def __init__(self) -> None:
        self.of: dict[str, tuple] = {}
        self._functions = _function_rules()

    def literal(self, x: Any) -> tuple:
        t = type(x)
        if t is bool or t is int:
            return ("num", int(x).bit_length())
        if t is float:
            return _FLOAT
        if t is str:
            return ("str", len(x))
        if t is fx.Node:
            return self.of.get(x.name, _ANY)
        if t is list or t is tuple:
            inner = [self.literal(v) for v in x]
            return ("seq", len(x), _join(inner))
        return _ANY

    def add(self, name: str, target: Any, args: tuple, kwargs: dict) -> None:
        """Records node `name`'s bound; refuses one past MAX_BITS / MAX_LENGTH."""
        rule = self._functions.get(id(target))
        if rule is None:
            self.of[name] = _result_kind(target)
            return
        fn_name, fn = rule
        bounds = [self.literal(a) for a in args]
        kw = {k: self.literal(v) for k, v in kwargs.items()}
        try:
            b = fn(bounds, args, kw)
        except _Unbounded as e:
            raise fail(name, "args", f"{fn_name} {e.args[0]}: a graph file's arithmetic must stay "
                                     f"within {MAX_BITS} bits and {MAX_LENGTH} items") from None
        if b[0] == "num" and b[1] > MAX_BITS:
            raise fail(name, "args", f"{fn_name} of these arguments can make a {b[1]}-bit number "
                                     f"(more than {MAX_BITS} bits): a graph file's arithmetic "
                                     "must stay bounded")
        if b[0] in ("str", "seq") and b[1] > MAX_LENGTH:
            raise fail(name, "args", f"{fn_name} of these arguments can make {b[1]} items (more "
                                     f"than {MAX_LENGTH}): a graph file's arithmetic must stay "
                                     "bounded")
        self.of[name] = b


class _Unbounded(Exception):
    """No finite bound (a sequence of unknown length in arithmetic, ...)."""


def _join(bounds: list) -> tuple:
    """A bound covering every bound of `bounds` (the items of a sequence)."""
    if not bounds:
        return ("num", 0)
    kinds = {b[0] for b in bounds}
    if kinds == {"float"}:
        return _FLOAT
    if kinds <= {"num", "float", "any"}:
        return ("num", max(_bits(b) for b in bounds))
    if kinds == {"str"}:
        return ("str", max(b[1] for b in bounds))
    return _MANY  # mixed or nested: no arithmetic on it


def _result_kind(target: Any) -> tuple:
    """What another call's value can be: an op with a list or several
    returns, or a higher-order op, makes a sequence of unknown length; an op
    with one tensor or scalar return, a packet or a function this process
    exported, a number of at most 64 bits or a tensor."""
    if isinstance(target, _internals.OpOverload):
        returns = target._schema.returns
        if len(returns) == 1 and str(returns[0].type) in (
                "Tensor", "int", "SymInt", "float", "SymFloat", "bool", "SymBool", "Scalar",
                "Tensor?", "Device", "ScalarType", "Layout", "MemoryFormat"):
            return _ANY
        return _MANY if returns else _ANY
    if isinstance(target, _internals.HigherOrderOperator):
        return _MANY  # a tuple of outputs
    # A packet (aten.rand: a factory) or a function this process exported.
    return _ANY


def _value_bits(b: tuple, x: Any) -> int:
    """The largest magnitude's bit length an int operand can have: its own
    when it is a literal int, else its bound's."""
    if type(x) is int or type(x) is bool:
        return abs(int(x)).bit_length()
    if _is_seq(b):
        raise _Unbounded("on a sequence")
    return _bits(b)


def _max_value(b: tuple, x: Any) -> int:
    """An upper bound of |x| as an int (for repetition counts and shifts)."""
    if type(x) is int or type(x) is bool:
        return abs(int(x))
    return 1 << _bits(b) if not _is_seq(b) else 1 << MAX_BITS


def _numeric(bounds: list, grow: int) -> tuple:
    if any(b[0] == "many" for b in bounds):
        raise _Unbounded("on a sequence of unknown length")
    if all(b[0] == "float" for b in bounds if b[0] != "num") and any(b[0] == "float" for b in bounds):
        return _FLOAT
    return ("num", max((_bits(b) for b in bounds), default=0) + grow)


def _add(bounds, args, kw) -> tuple:
    a, b = bounds[0], bounds[1]
    if a[0] in ("str", "seq") and b[0] == a[0]:
        return (a[0], a[1] + b[1], *([_join([a[2], b[2]])] if a[0] == "seq" else []))
    if a[0] == "many" or b[0] == "many":
        raise _Unbounded("on a sequence of unknown length")
    if _is_seq(a) or _is_seq(b):
        return _MANY  # a tensor or a number with a sequence: not a longer literal
    return _numeric([a, b], 1)


def _mul(bounds, args, kw) -> tuple:
    a, b = bounds[0], bounds[1]
    for seq, (n, x) in ((a, (b, args[1])), (b, (a, args[0]))):
        if seq[0] in ("str", "seq"):
            if _is_seq(n):
                raise _Unbounded("of two sequences")
            count = _max_value(n, x)
            return (seq[0], seq[1] * count, *seq[2:])
    if a[0] == "many" or b[0] == "many":
        raise _Unbounded("on a sequence of unknown length")
    if a[0] == "float" or b[0] == "float":
        return _FLOAT
    return ("num", _bits(a) + _bits(b))


def _pow(bounds, args, kw) -> tuple:
    a, b = bounds[0], bounds[1]
    if _is_seq(a) or _is_seq(b):
        raise _Unbounded("on a sequence")
    if a[0] == "float" or b[0] == "float":
        return _FLOAT  # a float result: overflow raises at once
    if type(args[1]) in (int, bool) and args[1] < 0:
        return _FLOAT
    return ("num", max(_bits(a), 1) * _max_value(b, args[1]))


def _lshift(bounds, args, kw) -> tuple:
    a, b = bounds[0], bounds[1]
    if _is_seq(a) or _is_seq(b):
        raise _Unbounded("on a sequence")
    return ("num", _bits(a) + _max_value(b, args[1]))


def _shrink(bounds, args, kw) -> tuple:
    """An operator whose result is no longer than its longest operand
    (floordiv, mod, rshift, and_, ..., sym_max, sym_min)."""
    return _numeric(bounds, 0)


def _ite(bounds, args, kw) -> tuple:
    """sym_ite(condition, a, b): a or b."""
    return _numeric(bounds[1:], 0)


def _unary(bounds, args, kw) -> tuple:
    return _numeric(bounds[:1], 1)


def _to_float(bounds, args, kw) -> tuple:
    if bounds and _is_seq(bounds[0]):
        raise _Unbounded("on a sequence")
    return _FLOAT


def _to_int(bounds, args, kw) -> tuple:
    """floor, ceil, trunc, sym_int, round(x): an int of the operand's size
    (a float's: up to 1024 bits); round(x, n) scales by 10**-n."""
    x = bounds[0]
    if _is_seq(x):
        raise _Unbounded("on a sequence")
    if len(args) < 2 and "ndigits" not in kw:
        return ("num", _bits(x))
    if x[0] == "float":
        return _FLOAT  # rounding a float to any number of digits is quick
    digits, raw = (bounds[1], args[1]) if len(args) > 1 else (kw["ndigits"], None)
    scale = _max_value(digits, raw)
    if scale > MAX_BITS:
        raise _Unbounded(f"to {scale} digits")
    return ("num", _bits(x) + 4 * scale)


def _compare(bounds, args, kw) -> tuple:
    return _BIT


def _getitem(bounds, args, kw) -> tuple:
    seq = bounds[0]
    if isinstance(args[1], slice):
        return seq if seq[0] in ("str", "seq") else _MANY
    if seq[0] == "seq":
        return seq[2]
    if seq[0] == "str":
        return ("str", 1)
    return _ANY  # an item of an op's outputs: a tensor or a size


def _sym_sum(bounds, args, kw) -> tuple:
    items = bounds[0]
    if items[0] != "seq":
        raise _Unbounded("on a sequence of unknown length")
    return _numeric([items[2]], max(items[1], 1).bit_length())


@functools.cache
def _function_rules() -> dict[int, tuple[str, Any]]:
    """id(function) -> (its name, its bound rule) for every symbolic-shape
    function an untrusted file may call (_targets._symbolic_functions)."""
    rules: dict[str, Any] = {
        "add": _add, "sub": _add, "mul": _mul, "pow": _pow, "lshift": _lshift,
        "floordiv": _shrink, "mod": _shrink, "rshift": _shrink, "and_": _shrink,
        "or_": _shrink, "xor": _shrink, "truediv": _to_float, "neg": _unary, "pos": _unary,
        "abs": _unary, "invert": _unary, "eq": _compare, "ne": _compare, "lt": _compare,
        "le": _compare, "gt": _compare, "ge": _compare, "not_": _compare, "truth": _compare,
        "getitem": _getitem,
    }
    out: dict[int, tuple[str, Any]] = {}
    for attr, rule in rules.items():
        f = getattr(operator, attr, None)
        if f is not None:
            out[id(f)] = (f"operator.{attr}", rule)
    for attr in ("floor", "ceil", "trunc"):
        out[id(getattr(math, attr))] = (f"math.{attr}", _to_int)
    out[id(round)] = ("round", _to_int)
    torch_rules = {"sym_float": _to_float, "sym_int": _to_int, "sym_max": _shrink,
                   "sym_min": _shrink, "sym_not": _compare, "sym_ite": _ite, "sym_sum": _sym_sum}
    for attr in dir(torch):
        if attr.startswith("_sym_"):  # _sym_sqrt, _sym_cos, ...: float functions
            torch_rules.setdefault(attr, _to_float)
    for attr, rule in torch_rules.items():
        f = getattr(torch, attr, None)
        if f is not None:
            out[id(f)] = (f"torch.{attr}", rule)
    return out
