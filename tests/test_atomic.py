"""pynq_kv.atomic: a failed write leaves the old file, a finished one replaces it."""

from __future__ import annotations

import pytest

from pynq_kv.atomic import atomic_write


def test_replaces_on_success_and_creates_parents(tmp_path):
    target = tmp_path / "a" / "b" / "out.txt"
    with atomic_write(target, "w", encoding="utf-8") as fh:
        fh.write("one\r\ntwo\n")
    assert target.read_bytes() == b"one\r\ntwo\n"  # no newline translation
    with atomic_write(target) as fh:
        fh.write(b"\x00\xff")
    assert target.read_bytes() == b"\x00\xff"
    assert sorted(p.name for p in target.parent.iterdir()) == ["out.txt"]


def test_error_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "out.bin"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError):
        with atomic_write(target) as fh:
            fh.write(b"partial")
            raise RuntimeError("boom")
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.bin"]


def test_refuses_read_modes(tmp_path):
    with pytest.raises(ValueError):
        with atomic_write(tmp_path / "x", "r"):
            pass
