"""Errors reach users clearly: from Python as RematError subclasses, from the
CLI as a message on stderr with a non-zero exit, never a crash and never a
half-written output file."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

import remat

HERE = os.path.dirname(os.path.abspath(__file__))
NO_FINITE_CUT = os.path.join(HERE, "..", "data", "no_finite_cut.json")


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def test_no_finite_cut_explains_the_conflict_from_python():
    with pytest.raises(remat.NoFiniteCutError) as info:
        remat.partition(_read(NO_FINITE_CUT))
    err = info.value
    assert isinstance(err, remat.RematError)
    # The infinite path, node by node, with the reason for each constraint.
    for text in ("mm:", "cannot recompute: not in recomputable allowlist",
                 "cannot save: non-tensor output", "mul:", "depends on mm",
                 "must be computed in backward: required for gradient",
                 "source -> mm_in -> mm_out -> mul_in -> sink"):
        assert text in str(err)
        assert text in err.explanation
    assert err.dot.split("{")[0].strip() in ("digraph", "strict digraph")
    assert '"mm_in" -> "mm_out"' in err.dot


def _remat_cli():
    exe = shutil.which("remat")
    if exe is None:
        pytest.fail("the remat command is not on PATH (pip install . installs it)")
    return exe


def test_no_finite_cut_from_the_cli(tmp_path):
    out = tmp_path / "result.json"
    dot = tmp_path / "cut.dot"
    proc = subprocess.run([_remat_cli(), "partition", NO_FINITE_CUT, "-o", str(out),
                           "--dot", str(dot)], capture_output=True, text=True)
    assert proc.returncode != 0
    assert "cannot save: non-tensor output" in proc.stderr
    assert "depends on mm" in proc.stderr
    assert proc.stderr.count("Nodes involved in the conflict") == 1
    assert not out.exists()  # nothing half-written
    assert "digraph" in dot.read_text().split("{")[0]


@pytest.mark.parametrize("mutate, needle", [
    (lambda d: d["nodes"][3]["args"].__setitem__(1, {"node": "nowhere"}), "nowhere"),
    (lambda d: d["nodes"].pop(), "output"),
    (lambda d: d.__setitem__("version", 7), "version"),
    (lambda d: d["nodes"][2].__setitem__("op", "call_method"), "call_method"),
])
def test_malformed_graphs_name_the_problem(tmp_path, mutate, needle):
    doc = json.loads(_read(NO_FINITE_CUT))
    mutate(doc)
    with pytest.raises(remat.RematError) as info:
        remat.partition(json.dumps(doc))
    assert needle in str(info.value)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    proc = subprocess.run([_remat_cli(), "partition", str(path)], capture_output=True, text=True)
    assert proc.returncode != 0
    assert needle in proc.stderr
    assert "Traceback" not in proc.stderr


def test_truncated_json_is_a_parse_error():
    with pytest.raises(remat.ParseError):
        remat.partition(_read(NO_FINITE_CUT)[:100])
