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


def test_durable_fsyncs_the_data_before_the_rename_and_the_folder_after(tmp_path, monkeypatch):
    import os
    import stat

    events = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append("fsync dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "fsync file")
        real_fsync(fd)

    def replace(src, dst):
        events.append("rename")
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    target = tmp_path / "rules.json"
    with atomic_write(target, "w", encoding="utf-8", durable=True) as fh:
        fh.write("{}")
    assert events == ["fsync file", "rename", "fsync dir"]
    assert target.read_text() == "{}"
    events.clear()
    with atomic_write(target, "w", encoding="utf-8") as fh:  # not durable: no fsync
        fh.write("[]")
    assert events == ["rename"]
