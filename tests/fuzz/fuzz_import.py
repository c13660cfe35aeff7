"""Fuzz target of remat.torch's graph importer (import_graph, untrusted).

Contract: every document the fuzzer makes from the seed corpus
(tests/fuzz/seeds: small shipped graphs) by replacing, deleting or wrapping
values anywhere in it, with JSON values, hostile strings (code fragments that
would touch a marker file, quotes, newlines, unicode, keywords, dunders,
long text), huge or negative integers, deep nesting and the format's tagged
objects, either imports or raises a remat.RematError; an imported module,
called on zero tensors of its placeholders' shapes, may fail but never
touches the marker file. A failure prints the smallest document Hypothesis
shrank it to and exits 1.

Hypothesis drives it (derandomized: a run of N examples is the same run every
time, so CI is deterministic and takes a fixed amount of work rather than
wall time); tools/test.sh runs it for REMAT_PY_FUZZ_EXAMPLES examples. A
structured generator reaches the importer's checks in a few thousand
examples, where a byte-level coverage-guided fuzzer (atheris) would spend
most of a minute's budget producing text that is not JSON.

    python tests/fuzz/fuzz_import.py [--examples N]
"""

from __future__ import annotations

import argparse
import copy
import json
import keyword
import os
import sys
import tempfile
from pathlib import Path

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import remat
import remat.torch as rt

ROOT = Path(__file__).resolve().parents[2]
MARK = os.path.join(tempfile.mkdtemp(prefix="remat_fuzz_import_"), "touched")
# The small seeds mutate quickly; the whole graphs add the ops they hold.
SEEDS = [json.loads(p.read_text()) for p in sorted((ROOT / "tests" / "fuzz" / "seeds").glob("*.json"))
         if p.stat().st_size < 40_000]

PAYLOADS = [f"__import__('os').system('touch {MARK}')", f"open({MARK!r}, 'w')",
            f'"""+str(open("{MARK}","w"))+"""']
WRAPS = ["{}", "x={}", "x); {}; (x", "x):\n    {}\n    #", "a=1, b={}", "*a, b={}", "\n{}\n",
         "'{}'", '"""{}"""', "# {}", "x\n    {}"]


def _strings() -> st.SearchStrategy:
    return st.one_of(
        st.builds(str.format, st.sampled_from(WRAPS), st.sampled_from(PAYLOADS)),
        st.sampled_from(keyword.kwlist + ["self", "torch", "__class__", "__import__", "forward",
                                          "training", "_modules", "print", "é", "ﬁle", "", " ",
                                          "aten.from_file.default", "aten.save.default",
                                          "higher_order.print", "operator.pow", "os.system",
                                          "inf", "nan", "float32", "cuda:0", "strided",
                                          "channels_last", "x" * 5000]),
        st.text(max_size=20),
    )


def _scalars() -> st.SearchStrategy:
    return st.one_of(
        st.none(), st.booleans(), _strings(),
        st.integers(min_value=-(1 << 70), max_value=1 << 70),
        st.sampled_from([10 ** 12, 1 << 62, -(1 << 63), (1 << 63) - 1, 2 ** 64, 0, -1]),
        st.floats(allow_nan=False, allow_infinity=False),
    )


def _tagged(inner: st.SearchStrategy) -> st.SearchStrategy:
    keys = ["node", "tuple", "dict", "slice", "float", "bits", "dtype", "device", "layout",
            "memory_format", "target", "opaque", "handle", "kind", "expr"]
    return st.one_of(
        st.dictionaries(st.sampled_from(keys), inner, min_size=1, max_size=2),
        st.builds(lambda v: {"dict": {v: 1}}, _strings()),
        st.builds(lambda n: {"node": n}, st.sampled_from(["primals_1", "t", "mm", "output", "nope"])),
    )


def _values() -> st.SearchStrategy:
    return st.recursive(_scalars(), lambda inner: st.one_of(
        st.lists(inner, max_size=3), _tagged(inner),
        st.dictionaries(_strings(), inner, max_size=2)), max_leaves=6)


def _paths(x, out):
    """Every (container, key) of the document's tree."""
    if isinstance(x, dict):
        for k, v in x.items():
            out.append((x, k))
            _paths(v, out)
    elif isinstance(x, list):
        for i, v in enumerate(x):
            out.append((x, i))
            _paths(v, out)
    return out


def _deep(n: int) -> list:
    a: list = []
    for _ in range(n):
        a = [a]
    return a


@st.composite
def documents(draw) -> dict:
    doc = copy.deepcopy(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(doc, [])
        container, key = paths[draw(st.integers(0, len(paths) - 1))]
        action = draw(st.sampled_from(["replace", "replace", "replace", "delete", "wrap", "deep"]))
        if action == "delete":
            if isinstance(container, dict):
                del container[key]
            else:
                container.pop(key)
        elif action == "wrap":
            container[key] = [container[key]] if draw(st.booleans()) else {"tuple": [container[key]]}
        elif action == "deep":
            container[key] = _deep(draw(st.sampled_from([70, 600])))
        else:
            container[key] = draw(_values())
    return doc


def _inputs(gm) -> list:
    """Zeros of each placeholder's (small, known) shape; a 2-vector otherwise."""
    out = []
    for n in gm.graph.find_nodes(op="placeholder"):
        v = n.meta.get("val")
        shape = tuple(v.shape) if isinstance(v, torch.Tensor) else (2,)
        ok = all(isinstance(d, int) for d in shape) and torch.Size(shape).numel() <= 1 << 16
        out.append(torch.zeros(shape if ok else (2,), dtype=v.dtype if ok and isinstance(
            v, torch.Tensor) else torch.float32))
    return out


class Stats:
    examples = imported = refused = 0


def check(doc: dict) -> None:
    Stats.examples += 1
    try:
        gm = rt.import_graph(doc)
    except remat.RematError:
        Stats.refused += 1
    else:
        Stats.imported += 1
        try:
            gm(*_inputs(gm))
        except Exception:  # noqa: BLE001 -- a failing call is fine; an effect is not
            pass
    assert not os.path.exists(MARK), "the document ran code (touched the marker file)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=1500)
    n = parser.parse_args().examples
    run = settings(max_examples=n, derandomize=True, deadline=None, database=None,
                   suppress_health_check=list(HealthCheck))(given(documents())(check))
    try:
        run()
    except Exception as e:  # noqa: BLE001 -- report the shrunk failure, exit 1
        print(f"fuzz_import: FAILED: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(f"fuzz_import: {Stats.examples} examples ({Stats.imported} imported, {Stats.refused} "
          f"refused with a RematError), marker untouched")
    return 0


if __name__ == "__main__":
    sys.exit(main())
