"""Atomic file replacement: readers see the old file or the new one, never a partial write.

Snapshots (KVEngine.dump) and the CLI's exports both write through `atomic_write`, so a crash
or a failed write leaves whatever was at the path before untouched.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import IO, Any, Iterator, Optional, Union


@contextlib.contextmanager
def atomic_write(path: Union[str, os.PathLike], mode: str = "wb",
                 encoding: Optional[str] = None, *, durable: bool = False) -> Iterator[IO[Any]]:
    """A file handle whose contents replace `path` when the block ends without an exception.

    The data goes to a hidden temporary file in the same directory (created with the parent
    directories if need be), renamed over `path` at the end; on error it is removed. durable:
    the data and then the rename are fsynced before the block returns, so a power cut after it
    keeps the new file (the host tier's rules file); without it the OS writes back at leisure.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write opens files for writing only ('w' or 'wb'), not {mode!r}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        newline = "" if mode == "w" else None  # text is written as given, no line-end translation
        with os.fdopen(fd, mode, encoding=encoding, newline=newline) as handle:
            yield handle
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, path)
        if durable:
            _fsync_dir(path.parent)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _fsync_dir(folder: Path) -> None:
    """Make a rename in folder durable (the directory entry is data of the directory)."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
