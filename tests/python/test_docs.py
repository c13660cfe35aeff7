"""Contract: the docs that a benchmark writes keep their hand-written part.

``bench/bench_memory.py --write-docs`` writes docs/memory.md as its measured
sections followed by docs/memory_notes.md, the hand-written rest (which
search a limit runs, how the searches stop, the inductor model and its
sweeps). An edit made to memory.md alone is lost at the next write, so the
two must agree: memory.md ends with the notes, byte for byte.
"""

from __future__ import annotations

import pathlib

import pytest

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs"


@pytest.mark.one_release
def test_memory_md_ends_with_the_hand_written_notes():
    memory = (DOCS / "memory.md").read_text(encoding="utf-8")
    notes = (DOCS / "memory_notes.md").read_text(encoding="utf-8")
    assert notes.strip(), "docs/memory_notes.md is empty"
    assert memory.endswith("\n" + notes), (
        "docs/memory.md does not end with docs/memory_notes.md: edit the notes "
        "(bench/bench_memory.py --write-docs appends them) and copy them over memory.md's tail")
