"""Owning the log dirs: an exclusive ``.lock`` and ``meta.properties`` (Kafka's).

Each log dir holds, besides the partitions::

    .lock              flock()ed exclusively while a broker uses the dir; holds its pid
    meta.properties    which cluster and node the dir belongs to (Kafka's KRaft v1 file):

        #
        #<date written>
        cluster.id=<cluster id>
        directory.id=<22-char base64url uuid, unique per dir>
        node.id=<node id>
        version=1

``claim_log_dirs(dirs, cluster_id, node_id)`` runs before anything reads a
dir, in this order for every dir: create it if missing, take the lock
(``LOCK_EX | LOCK_NB``; failure names the pid written in the file by the
holder), then check ``meta.properties``:

- present: version must be 1 and cluster.id / node.id must equal the
  configuration; otherwise the broker refuses to start.
- missing, dir empty (``.lock`` and ``lost+found`` aside): the dir is
  formatted (the single-node default: ``make run`` on a fresh ``./data``).
- missing, but the dir is an older Spool's (``__cluster_metadata-0`` or a
  ``recovery-point-offset-checkpoint`` in it): accepted, and
  ``meta.properties`` is written (logged as an upgrade).
- missing, anything else in the dir: refused (it is not a log dir of ours,
  and Spool must not read, rewrite or delete what it holds).

Every failure is a ``LogDirError`` whose message says which dir and why;
the broker prints it and exits non-zero. The locks are released by
``release()`` (or when the process dies, the kernel drops them). A failing
claim writes nothing: every dir is checked before any ``meta.properties`` is.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import fcntl
import logging
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from spool.util.fileio import atomic_write

log = logging.getLogger(__name__)

LOCK_FILE = ".lock"
META_PROPERTIES = "meta.properties"
META_VERSION = 1
_IGNORED_WHEN_EMPTY = frozenset({LOCK_FILE, "lost+found"})
_OLD_SPOOL_MARKERS = ("__cluster_metadata-0", "recovery-point-offset-checkpoint")


class LogDirError(Exception):
    """A log dir cannot be used; the message says which and why."""


@dataclass(frozen=True)
class MetaProperties:
    cluster_id: str
    node_id: int
    directory_id: str
    version: int = META_VERSION

    def encode(self) -> bytes:
        stamp = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime())
        return (
            f"#\n#{stamp}\ncluster.id={self.cluster_id}\ndirectory.id={self.directory_id}\n"
            f"node.id={self.node_id}\nversion={self.version}\n"
        ).encode()


def new_directory_id() -> str:
    """Kafka's Uuid text form: 16 random bytes, base64url without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def _parse(text: str) -> dict[str, str]:
    out = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out


def read_meta_properties(log_dir: Path) -> MetaProperties | None:
    """The dir's ``meta.properties``; None if missing; LogDirError if unreadable."""
    path = log_dir / META_PROPERTIES
    try:
        props = _parse(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as e:
        raise LogDirError(f"cannot read {path}: {e}") from e
    try:
        version = int(props["version"])
        if version != META_VERSION:
            raise LogDirError(f"{path}: version={version}, this broker reads version 1")
        return MetaProperties(props["cluster.id"], int(props["node.id"]),
                              props.get("directory.id", ""), version)
    except KeyError as e:
        raise LogDirError(f"{path}: no {e.args[0]}") from e
    except ValueError as e:
        raise LogDirError(f"{path}: not a valid meta.properties ({e})") from e


class DirLock:
    """An exclusive ``flock`` on ``<dir>/.lock`` (see the module docstring)."""

    def __init__(self, log_dir: Path) -> None:
        self.path = log_dir / LOCK_FILE
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            holder = ""
            with contextlib.suppress(OSError):
                holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
            os.close(fd)
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise LogDirError(f"cannot lock {self.path}: {e.strerror}") from e
            who = f"process {holder}" if holder.isdigit() else "another process"
            raise LogDirError(
                f"log dir {log_dir} is in use by {who} (it holds {self.path}); "
                "stop that broker or choose another log.dirs"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self.fd = fd

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # closing the descriptor drops the flock
            self.fd = -1


class LogDirs:
    """The claimed log dirs: locks held, ``meta.properties`` checked or written."""

    def __init__(self, locks: list[DirLock], meta: dict[Path, MetaProperties]) -> None:
        self.locks = locks
        self.meta = meta

    def release(self) -> None:
        for lock in self.locks:
            lock.release()
        self.locks = []


def _entries(log_dir: Path) -> list[str]:
    return sorted(n for n in os.listdir(log_dir) if n not in _IGNORED_WHEN_EMPTY)


def _inspect(log_dir: Path, cluster_id: str, node_id: int) -> tuple[MetaProperties, str]:
    """The dir's meta.properties and what to do: "ok", "format" or "upgrade" (write it)."""
    meta = read_meta_properties(log_dir)
    path = log_dir / META_PROPERTIES
    if meta is not None:
        if meta.node_id != node_id:
            raise LogDirError(
                f"{path} says node.id={meta.node_id} but this broker is configured with "
                f"node.id={node_id}: the dir belongs to another node"
            )
        if meta.cluster_id != cluster_id:
            raise LogDirError(
                f"{path} says cluster.id={meta.cluster_id} but this broker is configured with "
                f"cluster.id={cluster_id}: the dir belongs to another cluster"
            )
        return meta, "ok"
    entries = _entries(log_dir)
    if entries and not any(m in entries for m in _OLD_SPOOL_MARKERS):
        shown = ", ".join(entries[:5]) + (", ..." if len(entries) > 5 else "")
        raise LogDirError(
            f"log dir {log_dir} is not empty ({shown}) and has no {META_PROPERTIES}: it is "
            "not a log dir of this broker. Use an empty or new directory for log.dirs"
        )
    return MetaProperties(cluster_id, node_id, new_directory_id()), (
        "upgrade" if entries else "format"
    )


def claim_log_dirs(dirs: list[str] | list[Path], cluster_id: str, node_id: int) -> LogDirs:
    """Lock every dir, check every ``meta.properties``, then write the missing ones
    (module docstring). On failure nothing is written, the locks taken so far are
    released and ``LogDirError`` raised."""
    locks: list[DirLock] = []
    try:
        paths = [Path(d) for d in dirs]
        for d in paths:
            try:
                d.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise LogDirError(f"cannot create log dir {d}: {e.strerror}") from e
            if not d.is_dir():
                raise LogDirError(f"log dir {d} is not a directory")
            locks.append(DirLock(d))
        found = {d: _inspect(d, cluster_id, node_id) for d in paths}
        ids = [m.directory_id for m, _ in found.values() if m.directory_id]
        if len(ids) != len(set(ids)):
            raise LogDirError(f"two log dirs share a directory.id: {ids} (a copied dir?)")
        for d, (meta, action) in found.items():
            if action == "ok":
                continue
            atomic_write(d / META_PROPERTIES, meta.encode())
            if action == "upgrade":
                log.warning("%s: a log dir of an older Spool (no %s); wrote one "
                            "(cluster.id=%s, node.id=%d)", d, META_PROPERTIES, cluster_id, node_id)
            else:
                log.info("formatted empty log dir %s (cluster.id=%s, node.id=%d)",
                         d, cluster_id, node_id)
    except BaseException:
        for lock in locks:
            lock.release()
        raise
    return LogDirs(locks, {d: m for d, (m, _) in found.items()})
