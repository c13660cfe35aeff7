"""Synthetic joint graphs of any size, in remat's JSON format v1.

Contract: `residual_mlp(layers)` returns a valid joint forward+backward graph
shaped like what AOTAutograd produces for a residual MLP stack
(x_i = x_{i-1} + relu(x_{i-1} @ w_i)), with the matching backward. About nine
nodes per layer, so 110k layers make a 10^6-node graph. It needs no torch, so
the CLI and the C++ engine can be measured on graphs far larger than torch
could trace in reasonable time. `batch` (--batch) sets the activations'
rows: at the default 32 the weights and their gradients set the peak; at a
few thousand the activations do, so a peak limit has a range to search.

    python bench/synthetic.py --nodes 1000000 -o /tmp/joint_1m.json
"""

from __future__ import annotations

import argparse
import sys

import orjson

BATCH, DIM = 32, 64


def _tensor(shape, storage):
    stride, acc = [], 1
    for d in reversed(shape):
        stride.append(acc)
        acc *= d
    return {"kind": "tensor", "dtype": "float32", "shape": list(shape),
            "stride": stride[::-1], "device": "cpu", "storage": storage}


class _Builder:
    def __init__(self):
        self.nodes = []
        self.storage = 0

    def placeholder(self, name, shape):
        self.storage += 1
        self.nodes.append({"name": name, "op": "placeholder", "target": name,
                           "val": _tensor(shape, self.storage), "tensor_meta": True})
        return name

    def call(self, name, target, args, shape, alias_of=None):
        if alias_of is None:
            self.storage += 1
        storage = self.storage if alias_of is None else alias_of
        self.nodes.append({"name": name, "op": "call_function", "target": target,
                           "args": args, "val": _tensor(shape, storage), "tensor_meta": True})
        return name


def _ref(name):
    return {"node": name}


def residual_mlp(layers: int, batch: int = BATCH) -> dict:
    b = _Builder()
    x = b.placeholder("primals_1", (batch, DIM))
    weights = [b.placeholder(f"primals_{i + 2}", (DIM, DIM)) for i in range(layers)]
    tangent = b.placeholder("tangents_1", (batch, DIM))

    # Forward: x_i = x_{i-1} + relu(x_{i-1} @ w_i).
    xs, hs = [x], []
    for i, w in enumerate(weights):
        mm = b.call(f"mm_{i}", "aten.mm.default", [_ref(xs[-1]), _ref(w)], (batch, DIM))
        h = b.call(f"relu_{i}", "aten.relu.default", [_ref(mm)], (batch, DIM))
        xs.append(b.call(f"add_{i}", "aten.add.Tensor", [_ref(xs[-1]), _ref(h)], (batch, DIM)))
        hs.append(h)

    # Backward, last layer first.
    grad = tangent
    weight_grads = [None] * layers
    for i in reversed(range(layers)):
        gr = b.call(f"threshold_backward_{i}", "aten.threshold_backward.default",
                    [_ref(grad), _ref(hs[i]), 0], (batch, DIM))
        xt = b.call(f"t_x_{i}", "aten.t.default", [_ref(xs[i])], (DIM, batch))
        weight_grads[i] = b.call(f"mm_w_{i}", "aten.mm.default", [_ref(xt), _ref(gr)], (DIM, DIM))
        wt = b.call(f"t_w_{i}", "aten.t.default", [_ref(weights[i])], (DIM, DIM))
        gx = b.call(f"mm_x_{i}", "aten.mm.default", [_ref(gr), _ref(wt)], (batch, DIM))
        grad = b.call(f"add_grad_{i}", "aten.add.Tensor", [_ref(grad), _ref(gx)], (batch, DIM))

    outputs = [_ref(xs[-1]), _ref(grad)] + [_ref(g) for g in weight_grads]
    b.nodes.append({"name": "output", "op": "output", "target": "output", "args": [outputs]})
    return {"format": "remat.joint_graph", "version": 1, "num_fwd_outputs": 1,
            "static_lifetime_input_indices": list(range(1, layers + 1)), "nodes": b.nodes}


def layers_for_nodes(nodes: int) -> int:
    # 3 placeholders-ish + 9 nodes per layer + output.
    return max(1, (nodes - 3) // 10)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=10000, help="approximate node count")
    p.add_argument("-o", "--output", required=True, help="where to write the joint graph")
    p.add_argument("--batch", type=int, default=BATCH, help="activation rows (default %(default)s)")
    a = p.parse_args(argv)
    doc = residual_mlp(layers_for_nodes(a.nodes), a.batch)
    with open(a.output, "wb") as f:
        f.write(orjson.dumps(doc))
    print(f"wrote {len(doc['nodes'])} nodes to {a.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
