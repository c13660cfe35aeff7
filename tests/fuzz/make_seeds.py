"""Writes the fuzz target's seed corpus and dictionary (tests/fuzz/seeds,
tests/fuzz/joint_graph.dict); they are committed, so CI does not run this.

Seeds: every shipped example and test graph in compact JSON, plus prefixes of
the examples (their first nodes and an output returning the last one), which
are small, valid joint graphs that mutate quickly, and tiny.json with a
prefix of itself as a subgraph. Dictionary: every property
name and string constant of schema/joint_graph.v1.schema.json, and the op
targets, dtypes and partitioner tags the examples use.

    python tests/fuzz/make_seeds.py
"""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "fuzz"


def compact(doc: dict) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


def prefix(doc: dict, count: int) -> dict:
    nodes = [n for n in doc["nodes"] if n["op"] != "output"][:count]
    last = nodes[-1]["name"]
    out = {"name": "output", "op": "output", "target": "output", "args": [[{"node": last}, None]]}
    return {**doc, "num_fwd_outputs": 1, "static_lifetime_input_indices": [], "nodes": nodes + [out]}


def schema_strings() -> set[str]:
    found: set[str] = set()

    def walk(o):
        if isinstance(o, dict):
            for k, v in o.items():
                if k == "properties" and isinstance(v, dict):
                    found.update(v)
                elif k == "enum":
                    found.update(x for x in v if isinstance(x, str))
                elif k == "const" and isinstance(v, str):
                    found.add(v)
                walk(v)
        elif isinstance(o, list):
            for x in o:
                walk(x)

    walk(json.loads((ROOT / "schema" / "joint_graph.v1.schema.json").read_text()))
    return found


def main() -> None:
    graphs = sorted((ROOT / "examples").glob("*.json")) + sorted((ROOT / "tests" / "data").glob("*.json"))
    seeds = OUT / "seeds"
    seeds.mkdir(exist_ok=True)
    words = schema_strings()
    for path in graphs:
        doc = json.loads(path.read_text())
        (seeds / f"{path.stem}.json").write_bytes(compact(doc))
        for count in (4, 8, 16):
            if len(doc["nodes"]) > count + 1:
                (seeds / f"{path.stem}_first{count}.json").write_bytes(compact(prefix(doc, count)))
        if path.stem == "tiny":
            # A nested graph module (a higher-order op's body), which the
            # reader checks as a graph of its own.
            body = {"name": "body0", "nodes": prefix(doc, 4)["nodes"]}
            (seeds / "tiny_subgraph.json").write_bytes(compact({**doc, "subgraphs": [body]}))
        for n in doc["nodes"]:
            words.add(n["target"])
            words.update(str(v) for k, v in (n.get("val") or {}).items() if k in ("dtype", "device"))
            words.update(str(v) for k, v in (n.get("meta") or {}).items() if isinstance(v, str))
    tokens = ['":"', '":[', '{"node":"', '":{"kind":"', "null", "true", "false", "-1", "1e308"]
    tokens += [json.dumps(w) for w in sorted(words) if w]
    header = ["# Property names and string constants of the joint graph format, and op",
              "# targets, dtypes and tags from the shipped examples (tests/fuzz/make_seeds.py)."]
    # A libFuzzer dictionary line is a quoted token with \" and \\ escapes,
    # as json.dumps writes an ASCII string.
    (OUT / "joint_graph.dict").write_text("\n".join(header + [json.dumps(t) for t in tokens]) + "\n")

if __name__ == "__main__":
    main()
