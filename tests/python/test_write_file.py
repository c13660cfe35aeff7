"""remat.write_file is the command line's writer (remat::write_file_atomic):
what Python hands it arrives unchanged, and what the system cannot take is
refused rather than written elsewhere.

Contract: the writer's own rules (atomic replace, modes, links, FIFOs,
devices) are pinned in tests/cpp/test_files.cc and, through capture().save,
in test_capture.py; these tests pin the Python side of the binding.
"""

from __future__ import annotations

import os

import pytest

import remat

pytestmark = pytest.mark.one_release


def test_a_path_with_a_nul_is_refused_not_cut_short(tmp_path):
    with pytest.raises(remat.RematIOError, match="NUL"):
        remat.write_file(str(tmp_path / "out.json") + "\0tail", "x")
    assert os.listdir(tmp_path) == []


def test_any_name_the_file_system_takes_arrives_unchanged(tmp_path):
    """Paths cross as bytes: a name that is not UTF-8 (os.fsdecode's surrogates)
    and a pathlib path name the file written."""
    raw = os.fsencode(str(tmp_path)) + b"/graph-\xff.json"
    remat.write_file(os.fsdecode(raw), "a")
    remat.write_file(raw, "b")
    remat.write_file(tmp_path / "plain.json", "\u00e9")
    assert sorted(os.listdir(os.fsencode(str(tmp_path)))) == [b"graph-\xff.json", b"plain.json"]
    assert open(raw, "rb").read() == b"b"
    assert (tmp_path / "plain.json").read_bytes() == "\u00e9".encode()


def test_a_failure_is_a_remat_io_error_and_an_os_error(tmp_path):
    with pytest.raises(remat.RematIOError) as err:
        remat.write_file(tmp_path, b"x")  # a directory is never replaced
    assert isinstance(err.value, OSError) and str(tmp_path) in str(err.value)
    with pytest.raises(remat.RematIOError, match="empty"):
        remat.write_file("", b"x")
