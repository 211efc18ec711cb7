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

``claim_log_dirs(dirs, node_id, cluster_id)`` runs before anything reads a
dir, in this order for every dir: create it if missing, take the lock
(``LOCK_EX | LOCK_NB``; failure names the pid written in the file by the
holder), then check ``meta.properties``:

- present: version must be 1 and node.id must equal the configuration, and
  cluster.id too when one is configured (``cluster.id`` set); otherwise the
  broker refuses to start. Without a configured one the broker takes the
  dirs' (as Kafka, where the cluster id lives only in the dirs); all dirs
  must agree.
- missing, with ``require_formatted`` (a node with ``process.roles``, as
  Kafka's KRaft nodes): refused, "No meta.properties found in DIR (have you
  run ``spool storage format`` ...)".
- missing, dir empty (``.lock`` and ``lost+found`` aside): the dir is
  formatted (the single-node default: ``make run`` on a fresh ``./data``)
  with the configured cluster id, else the other dirs', else the default.
- missing, but the dir is an older Spool's (``__cluster_metadata-0`` or a
  ``recovery-point-offset-checkpoint`` in it): accepted, and
  ``meta.properties`` is written (logged as an upgrade).
- missing, anything else in the dir: refused (it is not a log dir of ours,
  and Spool must not read, rewrite or delete what it holds).

All formatted dirs must agree on cluster.id (the message names two dirs that
do not) and carry distinct directory.ids.

``format_log_dirs`` (``spool storage format``) is the same with a given
cluster id, refusing dirs already formatted unless told to ignore them
(Kafka's "Log directory X is already formatted. Use --ignore-formatted ...").

Every failure is a ``LogDirError`` whose message says which dir and why;
the broker prints it and exits non-zero. The locks are released by
``release()`` (or when the process dies, the kernel drops them). A failing
claim writes nothing: every dir is checked before any ``meta.properties`` is.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

from spool.util.fileio import atomic_write
from spool.util.ids import random_uuid

log = logging.getLogger(__name__)

LOCK_FILE = ".lock"
META_PROPERTIES = "meta.properties"
META_VERSION = 1
DEFAULT_CLUSTER_ID = "spool-cluster-0000000"  # the single-node default's
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


new_directory_id = random_uuid  # a directory.id is a random Kafka Uuid


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

    def __init__(self, locks: list[DirLock], meta: dict[Path, MetaProperties],
                 cluster_id: str, written: list[Path]) -> None:
        self.locks = locks
        self.meta = meta
        self.cluster_id = cluster_id  # the dirs' (and so the broker's) cluster id
        self.written = written  # dirs whose meta.properties was written now

    def release(self) -> None:
        for lock in self.locks:
            lock.release()
        self.locks = []


def _entries(log_dir: Path) -> list[str]:
    return sorted(n for n in os.listdir(log_dir) if n not in _IGNORED_WHEN_EMPTY)


def _inspect(log_dir: Path, node_id: int, cluster_id: str | None,
             require_formatted: bool = False) -> MetaProperties | None:
    """The dir's meta.properties, checked; None if it may get one (empty, or an older
    Spool's dir); LogDirError otherwise."""
    meta = read_meta_properties(log_dir)
    path = log_dir / META_PROPERTIES
    if meta is None and require_formatted:
        raise LogDirError(
            f"No {META_PROPERTIES} found in {log_dir} (have you run `spool storage format` to "
            "format the directory?). A node with process.roles set needs every log dir and "
            "metadata.log.dir formatted with the cluster's id."
        )
    if meta is not None:
        if meta.node_id != node_id:
            raise LogDirError(
                f"{path} says node.id={meta.node_id} but this broker is configured with "
                f"node.id={node_id}: the dir belongs to another node"
            )
        if cluster_id is not None and meta.cluster_id != cluster_id:
            raise LogDirError(
                f"{path} says cluster.id={meta.cluster_id} but this broker is configured with "
                f"cluster.id={cluster_id}: the dir belongs to another cluster"
            )
        return meta
    entries = _entries(log_dir)
    if entries and not any(m in entries for m in _OLD_SPOOL_MARKERS):
        shown = ", ".join(entries[:5]) + (", ..." if len(entries) > 5 else "")
        raise LogDirError(
            f"log dir {log_dir} is not empty ({shown}) and has no {META_PROPERTIES}: it is "
            "not a log dir of this broker. Use an empty or new directory for log.dirs"
        )
    return None


def claim_log_dirs(
    dirs: list[str] | list[Path],
    node_id: int,
    cluster_id: str | None = None,
    *,
    new_cluster_id: str = DEFAULT_CLUSTER_ID,
    refuse_formatted: bool = False,
    require_formatted: bool = False,
) -> LogDirs:
    """Lock every dir, check every ``meta.properties``, then write the missing ones
    (module docstring). ``cluster_id`` None (not configured) accepts the dirs' own
    (they must agree); a dir to format gets it, or ``new_cluster_id`` when no dir
    has one. ``require_formatted``: a dir without ``meta.properties`` is refused.
    On failure nothing is written, the locks taken so far are released and
    ``LogDirError`` raised."""
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
        found = {d: _inspect(d, node_id, cluster_id, require_formatted) for d in paths}
        have = {d: m for d, m in found.items() if m is not None}
        if refuse_formatted and have:
            raise LogDirError(f"Log directory {next(iter(have))} is already formatted. Use "
                              "--ignore-formatted to ignore this directory and format the others.")
        first = next(iter(have.items()), None)
        for d, m in have.items():
            if first is not None and m.cluster_id != first[1].cluster_id:
                raise LogDirError(
                    f"{d / META_PROPERTIES} says cluster.id={m.cluster_id} but "
                    f"{first[0] / META_PROPERTIES} says cluster.id={first[1].cluster_id}: the "
                    "log dirs belong to different clusters")
        clusters = sorted({m.cluster_id for m in have.values()})
        ids = [m.directory_id for m in have.values() if m.directory_id]
        if len(ids) != len(set(ids)):
            raise LogDirError(f"two log dirs share a directory.id: {ids} (a copied dir?)")
        effective = cluster_id or (clusters[0] if clusters else new_cluster_id)
        written = []
        for d in paths:
            if found[d] is not None:
                continue
            upgrade = bool(_entries(d))
            meta = found[d] = MetaProperties(effective, node_id, new_directory_id())
            atomic_write(d / META_PROPERTIES, meta.encode())
            written.append(d)
            if upgrade:
                log.warning("%s: a log dir of an older Spool (no %s); wrote one "
                            "(cluster.id=%s, node.id=%d)", os.path.abspath(d), META_PROPERTIES,
                            effective, node_id)
            else:
                log.info("formatted empty log dir %s (cluster.id=%s, node.id=%d)",
                         os.path.abspath(d), effective, node_id)
    except BaseException:
        for lock in locks:
            lock.release()
        raise
    metas = {d: m for d, m in found.items() if m is not None}
    return LogDirs(locks, metas, effective, written)


def format_log_dirs(
    dirs: list[str] | list[Path], node_id: int, cluster_id: str, *, ignore_formatted: bool = False
) -> list[Path]:
    """``spool storage format``: write ``meta.properties`` into every dir that lacks one (empty
    or an older Spool's), refusing dirs already formatted unless ``ignore_formatted``
    (they must then match). Returns the dirs written; the locks are released."""
    claimed = claim_log_dirs(dirs, node_id, cluster_id, new_cluster_id=cluster_id,
                             refuse_formatted=not ignore_formatted)
    claimed.release()
    return claimed.written
