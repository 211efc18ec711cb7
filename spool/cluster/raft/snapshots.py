"""Metadata snapshots on disk: ``<end offset:020d>-<epoch:010d>.checkpoint`` files.

A snapshot ``(end_offset, epoch)`` holds the metadata image as of every
record below ``end_offset`` of the metadata log, the last of them written in
``epoch``. It lives in the metadata log's own directory, laid out as Kafka
lays it out (``RecordsSnapshotWriter``): RecordBatch v2 batches, offsets
from 0, every ``partitionLeaderEpoch`` the snapshot's epoch::

    control batch   SnapshotHeaderRecord  (control type 3)
    data batches    the image as metadata records (TopicRecord, ...)
    control batch   SnapshotFooterRecord  (control type 4)

File lifecycle (crash-safe by naming, as Kafka's ``Snapshots``)::

    <id>-<random>.checkpoint.part   being written (removed at open: never whole)
    <id>.checkpoint                 frozen: fsynced, renamed, directory fsynced
    <id>.checkpoint.deleted         being deleted (removed at open)

A frozen file is immutable. ``SnapshotReader.read(position, max_bytes)``
serves FetchSnapshot chunks; ``SnapshotReader.batches()`` walks it whole
(CRC-checked) to load it. Blocking throughout: call from an executor.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from spool.cluster.raft.messages import SnapshotId
from spool.protocol._generated import SnapshotFooterRecord, SnapshotHeaderRecord
from spool.protocol.errors import Errors, KafkaError
from spool.protocol.metadata_records import (
    ControlRecordType,
    control_record_type,
    encode_control_record,
)
from spool.records.batch import check_batch, iter_batches
from spool.records.builder import BatchBuilder
from spool.records.record import iter_records
from spool.util.fileio import fsync_dir, write_all

SUFFIX = ".checkpoint"
PARTIAL_SUFFIX = SUFFIX + ".part"
DELETE_SUFFIX = SUFFIX + ".deleted"
_NAME = re.compile(r"^(\d{20})-(\d{10})(?:-\w+)?\.checkpoint(\.part|\.deleted)?$")


def file_name(sid: SnapshotId) -> str:
    return f"{sid.end_offset:020d}-{sid.epoch:010d}{SUFFIX}"


def parse_name(name: str) -> tuple[SnapshotId, str] | None:
    """(id, suffix) of a snapshot file name ('' for a frozen one), else None."""
    m = _NAME.match(name)
    if m is None:
        return None
    if m.group(3) is None and name != file_name(SnapshotId(int(m.group(1)), int(m.group(2)))):
        return None  # a random tail belongs to a partial file only
    return SnapshotId(int(m.group(1)), int(m.group(2))), m.group(3) or ""


def list_snapshots(directory: Path, *, clean: bool = True) -> list[SnapshotId]:
    """The frozen snapshots in ``directory``, sorted; ``clean`` removes the partial
    and deleted ones a crash left behind."""
    found = []
    removed = False
    for name in os.listdir(directory):
        parsed = parse_name(name)
        if parsed is None:
            continue
        sid, suffix = parsed
        if suffix == "":
            found.append(sid)
        elif clean:
            (directory / name).unlink(missing_ok=True)
            removed = True
    if removed:
        fsync_dir(directory)
    return sorted(found)


def delete_snapshot(directory: Path, sid: SnapshotId) -> None:
    """Rename to ``.checkpoint.deleted`` (the commit point), then unlink."""
    live = directory / file_name(sid)
    doomed = directory / (file_name(sid)[: -len(SUFFIX)] + DELETE_SUFFIX)
    try:
        os.rename(live, doomed)
    except FileNotFoundError:
        return
    fsync_dir(directory)
    doomed.unlink(missing_ok=True)


MAX_BATCH_BYTES = 1 << 20  # data batches of a snapshot are cut at about this size


def build_snapshot(values: Iterable[bytes], sid: SnapshotId, *, timestamp: int,
                   max_batch_bytes: int = MAX_BATCH_BYTES) -> bytes:
    """A snapshot file's bytes: header, ``values`` (framed metadata records) in batches
    of about ``max_batch_bytes``, footer; offsets from 0, every batch in ``sid.epoch``."""
    out: list[bytes] = []
    offset = 0

    def control(msg) -> None:
        nonlocal offset
        b = BatchBuilder(offset, is_control=True, partition_leader_epoch=sid.epoch)
        key, value = encode_control_record(msg)
        b.append(key, value, timestamp=timestamp)
        out.append(b.build())
        offset += 1

    control(SnapshotHeaderRecord(version=0, last_contained_log_timestamp=timestamp))
    b = BatchBuilder(offset, partition_leader_epoch=sid.epoch)
    size = 0
    for v in values:
        b.append(None, v, timestamp=timestamp)
        size += len(v)
        if size >= max_batch_bytes:
            out.append(b.build())
            offset += len(b)
            b = BatchBuilder(offset, partition_leader_epoch=sid.epoch)
            size = 0
    if len(b):
        out.append(b.build())
        offset += len(b)
    control(SnapshotFooterRecord(version=0))
    return b"".join(out)


def snapshot_values(data: bytes | bytearray | memoryview) -> list[bytes]:
    """The metadata record values of a snapshot file's bytes, in order. CORRUPT_MESSAGE
    unless it is whole (checked before anything is returned): CRC-valid batches, a
    SnapshotHeader first, a SnapshotFooter last."""
    types = []
    values = []
    end = 0
    for pos, h in iter_batches(data):
        check_batch(data, pos)
        end = pos + h.size
        for rec in iter_records(data, pos):
            if h.is_control:
                types.append(control_record_type(rec.key or b""))
                continue
            if not types or types[0] != ControlRecordType.SNAPSHOT_HEADER:
                raise KafkaError(Errors.CORRUPT_MESSAGE, "snapshot: records before its header")
            values.append(bytes(rec.value or b""))
    if end != len(data) or not types or types[0] != ControlRecordType.SNAPSHOT_HEADER \
            or types[-1] != ControlRecordType.SNAPSHOT_FOOTER:
        raise KafkaError(Errors.CORRUPT_MESSAGE,
                         "snapshot: not whole (header, records, footer, no torn tail)")
    return values


class SnapshotWriter:
    """Writes one snapshot: ``append`` whole batches, then ``freeze`` (or ``abort``)."""

    def __init__(self, directory: Path, sid: SnapshotId) -> None:
        self.directory = Path(directory)
        self.id = sid
        fd, name = tempfile.mkstemp(
            prefix=file_name(sid)[: -len(SUFFIX)] + "-", suffix=PARTIAL_SUFFIX,
            dir=self.directory)
        self._fd: int | None = fd
        self._tmp = Path(name)
        self.size = 0

    def append(self, data: bytes | bytearray | memoryview) -> None:
        if self._fd is None:
            raise ValueError(f"snapshot {self.id} is closed")
        self.size += write_all(self._fd, data)

    def freeze(self) -> Path:
        """fsync, rename to ``<id>.checkpoint``, fsync the directory; returns the path."""
        if self._fd is None:
            raise ValueError(f"snapshot {self.id} is closed")
        try:
            os.fsync(self._fd)
        finally:
            os.close(self._fd)
            self._fd = None
        final = self.directory / file_name(self.id)
        os.replace(self._tmp, final)
        fsync_dir(self.directory)
        return final

    def abort(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._tmp.unlink(missing_ok=True)


class SnapshotReader:
    """A frozen snapshot opened for reading (one descriptor until ``close``)."""

    def __init__(self, directory: Path, sid: SnapshotId) -> None:
        self.id = sid
        self.path = Path(directory) / file_name(sid)
        self._fd = os.open(self.path, os.O_RDONLY)
        self.size = os.fstat(self._fd).st_size

    def read(self, position: int, max_bytes: int) -> bytes:
        """Raw bytes from ``position`` (FetchSnapshot serves the file as bytes)."""
        if position < 0 or position > self.size:
            raise KafkaError(Errors.POSITION_OUT_OF_RANGE,
                             f"position {position} outside snapshot {self.id} of {self.size} bytes")
        return os.pread(self._fd, min(max_bytes, self.size - position), position)

    def batches(self) -> Iterator[bytes]:
        """Every batch, CRC-checked; CORRUPT_MESSAGE for a damaged or torn file."""
        data = self.read(0, self.size)
        end = 0
        for pos, h in iter_batches(data):
            check_batch(data, pos)
            end = pos + h.size
            yield data[pos:end]
        if end != len(data):
            raise KafkaError(Errors.CORRUPT_MESSAGE,
                             f"snapshot {self.id}: torn tail at byte {end} of {len(data)}")

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> SnapshotReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
