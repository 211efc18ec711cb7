"""Crash-safe file primitives.

``atomic_write(path, data)`` leaves either the old or the new content at
``path`` whatever happens (process crash or power loss): write ``path.tmp``,
fsync it, rename over ``path``, fsync the directory so the rename itself is
durable. ``fsync_dir`` is that last step alone (needed after creating,
renaming or deleting files whose existence must survive a power loss).
"""

from __future__ import annotations

import os
from pathlib import Path

TMP_SUFFIX = ".tmp"


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """fsync a directory so entries created, renamed or removed in it are durable."""
    fd = os.open(os.fspath(path), os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes | bytearray | memoryview, offset: int | None = None) -> int:
    """Write every byte of ``data`` (pwrite at ``offset`` when given); returns the count."""
    if offset is not None:
        done = os.pwrite(fd, data, offset)
        if done == len(data):
            return done
    else:
        done = 0
    view = memoryview(data).cast("B")
    total = len(view)
    while done < total:
        if offset is None:
            n = os.write(fd, view[done:])
        else:
            n = os.pwrite(fd, view[done:], offset + done)
        if n <= 0:  # pragma: no cover - the kernel reports errors as exceptions
            raise OSError(f"short write: {done} of {total} bytes")
        done += n
    return done


def atomic_write(path: str | os.PathLike[str], data: bytes, *, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` atomically (tmp, fsync, rename, fsync dir)."""
    target = Path(path)
    tmp = target.with_name(target.name + TMP_SUFFIX)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(fd, data)
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, target)
    if durable:
        fsync_dir(target.parent)
