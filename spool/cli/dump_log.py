"""``spool dump-log SEGMENT_FILE``: print a segment's batches or an index, offline (Kafka's
DumpLogSegments).

Reads files only (no broker; safe on a copy of a log dir or a stopped
broker's data). ``SEGMENT_FILE`` is a ``.log`` (also ``.log.deleted``,
``.log.cleaned``, ``.log.swap``), a ``.index`` or a ``.timeindex``.

    spool dump-log 00000000000000000000.log [--print-records] [--verify-index] [--json]

For a ``.log``, one line per batch: baseOffset, lastOffset, count,
sequences, producer, leader epoch, transactional/control flags,
deleteHorizonMs (compaction), position, timestamp, size, codec, crc and
whether the CRC is valid. ``--print-records`` adds a ``|`` line per record
(offset, timestamp, key and value sizes, headers, key and payload, or the
transaction marker of a control record). A damaged tail is reported with
its position and the walk stops there.

``--verify-index`` checks the segment's ``.index`` and ``.timeindex``
against the ``.log``: each offset-index entry must point at a batch boundary
whose batch ends at the entry's offset; each time-index entry at a batch
ending at its offset whose maxTimestamp is its timestamp; both strictly
increasing. Indexes are caches (the broker rebuilds bad ones), so a
mismatch means a crash left a stale cache or something wrote the files.

``--json`` prints one JSON object per line (batches, records, index
entries, problems); a record's ``key`` and ``payload`` are strings, or null for
null. ``--encoding text|base64|hex`` (as ``spool consume``'s) says how keys and
payloads are written, in both outputs: UTF-8 text with undecodable bytes
backslash-escaped (the default), or base64 / hex for the exact bytes. Exit status: 0, or 1 if an invalid batch, a damaged
tail or an index mismatch was found; 2 for bad usage.
"""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from spool.cli.encoding import Encoding, encoder
from spool.protocol.errors import KafkaError
from spool.records.batch import HEADER_SIZE, LOG_OVERHEAD, BatchHeader, check_batch
from spool.records.compression import CODEC_NAMES
from spool.records.record import CONTROL_ABORT, CONTROL_COMMIT, ControlRecord, iter_records

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_MARKERS = {CONTROL_ABORT: "ABORT", CONTROL_COMMIT: "COMMIT"}


class Dumper:
    def __init__(self, as_json: bool, encoding: Encoding = Encoding.text) -> None:
        self.as_json = as_json
        self.problems = 0
        self.encode = encoder(encoding)

    def emit(self, text: str, obj: dict[str, Any]) -> None:
        print(json.dumps(obj, ensure_ascii=False) if self.as_json else text)  # as print_json

    def problem(self, text: str, obj: dict[str, Any]) -> None:
        self.problems += 1
        self.emit(text, {"problem": text, **obj})


def _base_of(path: Path) -> int:
    stem = path.name.split(".", 1)[0]
    if not stem.isdigit():
        raise typer.BadParameter(f"{path.name} is not named by a base offset")
    return int(stem)


def walk(data: bytes, out: Dumper | None = None) -> tuple[list[tuple[int, BatchHeader]], int]:
    """(position, header) of every intact batch, and where the walk stopped."""
    found, pos = [], 0
    while pos + HEADER_SIZE <= len(data):
        h = BatchHeader.parse(data, pos)
        if h.magic != 2 or h.batch_length < HEADER_SIZE - LOG_OVERHEAD or pos + h.size > len(data):
            break
        found.append((pos, h))
        pos += h.size
    return found, pos


def dump_batch(d: Dumper, data: bytes, pos: int, h: BatchHeader, records: bool) -> None:
    try:
        check_batch(data, pos)
        valid = True
    except KafkaError:
        valid = False
    ts_type = "LogAppendTime" if h.is_log_append_time else "CreateTime"
    horizon = h.base_timestamp if h.has_delete_horizon else None
    codec = CODEC_NAMES.get(h.compression, str(h.compression))
    d.emit(
        f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count} "
        f"baseSequence: {h.base_sequence} lastSequence: {h.last_sequence} "
        f"producerId: {h.producer_id} producerEpoch: {h.producer_epoch} "
        f"partitionLeaderEpoch: {h.partition_leader_epoch} "
        f"isTransactional: {str(h.is_transactional).lower()} "
        f"isControl: {str(h.is_control).lower()} "
        f"deleteHorizonMs: {'OptionalLong.empty' if horizon is None else horizon} "
        f"position: {pos} {ts_type}: {h.max_timestamp} size: {h.size} magic: {h.magic} "
        f"compresscodec: {codec} crc: {h.crc} isvalid: {str(valid).lower()}",
        {"type": "batch", "base_offset": h.base_offset, "last_offset": h.last_offset,
         "count": h.records_count, "base_sequence": h.base_sequence,
         "producer_id": h.producer_id, "producer_epoch": h.producer_epoch,
         "partition_leader_epoch": h.partition_leader_epoch,
         "is_transactional": h.is_transactional, "is_control": h.is_control,
         "delete_horizon_ms": horizon, "position": pos, "timestamp_type": ts_type,
         "max_timestamp": h.max_timestamp, "size": h.size, "compression": codec,
         "crc": h.crc, "is_valid": valid},
    )
    if not valid:
        d.problems += 1
        return
    if records:
        try:
            for r in iter_records(data, pos):
                dump_record(d, h, r)
        except KafkaError as e:
            d.problem(f"records of the batch at {pos} do not decode: {e.message}",
                      {"position": pos})


def dump_record(d: Dumper, h: BatchHeader, r: Any) -> None:
    ts_type = "LogAppendTime" if h.is_log_append_time else "CreateTime"
    seq = -1 if h.base_sequence < 0 else h.base_sequence + (r.offset - h.base_offset)
    obj = {"type": "record", "offset": r.offset, "timestamp": r.timestamp,
           "key_size": -1 if r.key is None else len(r.key),
           "value_size": -1 if r.value is None else len(r.value), "sequence": seq,
           "header_keys": [k for k, _ in r.headers]}
    text = (f"| offset: {r.offset} {ts_type}: {r.timestamp} keySize: {obj['key_size']} "
            f"valueSize: {obj['value_size']} sequence: {seq} headerKeys: {obj['header_keys']}")
    if h.is_control:
        try:
            marker = ControlRecord.decode(r.key, r.value)
            name = _MARKERS.get(marker.type, f"type {marker.type}")
            text += f" endTxnMarker: {name} coordinatorEpoch: {marker.coordinator_epoch}"
            obj.update(end_txn_marker=name, coordinator_epoch=marker.coordinator_epoch)
        except KafkaError:
            text += " controlRecord: unreadable"
    else:
        key, payload = d.encode(r.key), d.encode(r.value)
        text += f" key: {'null' if key is None else key} payload: " \
                f"{'null' if payload is None else payload}"
        obj.update(key=key, payload=payload)
    d.emit(text, obj)


def dump_log(d: Dumper, path: Path, records: bool, verify: bool) -> None:
    base = _base_of(path)
    data = path.read_bytes()
    d.emit(f"Dumping {path}\nLog starting offset: {base}",
           {"type": "file", "path": str(path), "base_offset": base})
    batches, end = walk(data)
    for pos, h in batches:
        dump_batch(d, data, pos, h, records)
    if end < len(data):
        d.problem(f"Found {len(data) - end} invalid bytes at the end of {path.name} "
                  f"(position {end})", {"position": end, "bytes": len(data) - end})
    if verify:
        stem = path.name.split(".log", 1)[0]
        for suffix in (".index", ".timeindex"):
            idx = path.with_name(stem + suffix)
            if idx.exists():
                verify_index(d, idx, base, batches)


def read_entries(path: Path) -> list[tuple[int, int]]:
    entry = _TIME_ENTRY if path.name.split(".")[1].startswith("timeindex") else _OFFSET_ENTRY
    data = path.read_bytes()
    n = len(data) // entry.size
    out = [entry.unpack_from(data, i * entry.size) for i in range(n)]
    while out and out[-1] == (0, 0):  # preallocated tail of an active segment's index
        out.pop()
    return out


def verify_index(d: Dumper, idx: Path, base: int, batches: list[tuple[int, BatchHeader]]) -> None:
    by_pos = {pos: h for pos, h in batches}
    by_last = {h.last_offset: h for _, h in batches}
    time_index = ".timeindex" in idx.name
    prev: tuple[int, int] | None = None
    entries = read_entries(idx)
    for a, b in entries:
        if time_index:
            ts, offset = a, base + b
            h = by_last.get(offset)
            ok = h is not None and h.max_timestamp == ts
            what = f"timestamp {ts} -> offset {offset}"
        else:
            offset, pos = base + a, b
            h = by_pos.get(pos)
            ok = h is not None and h.last_offset == offset
            what = f"offset {offset} -> position {pos}"
        if prev is not None and (a, b) <= prev:
            ok = False
        prev = (a, b)
        if not ok:
            d.problem(f"Index mismatch in {idx.name}: {what} matches no batch",
                      {"index": idx.name, "entry": [a, b]})
    d.emit(f"Verified {idx.name}: {len(entries)} entries",
           {"type": "index", "index": idx.name, "entries": len(entries)})


def dump_index(d: Dumper, path: Path, verify: bool) -> None:
    base = _base_of(path)
    time_index = ".timeindex" in path.name
    d.emit(f"Dumping {path}", {"type": "file", "path": str(path), "base_offset": base})
    for a, b in read_entries(path):
        if time_index:
            d.emit(f"timestamp: {a} offset: {base + b}",
                   {"type": "entry", "timestamp": a, "offset": base + b})
        else:
            d.emit(f"offset: {base + a} position: {b}",
                   {"type": "entry", "offset": base + a, "position": b})
    if verify:
        log_path = path.with_name(path.name.split(".", 1)[0] + ".log")
        if not log_path.exists():
            d.problem(f"{log_path.name} is missing: cannot verify", {"path": str(log_path)})
            return
        batches, _ = walk(log_path.read_bytes())
        verify_index(d, path, base, batches)


def dump_log_command(
    segment_file: Annotated[Path, typer.Argument(help="A .log, .index or .timeindex file.")],
    print_records: Annotated[
        bool, typer.Option("--print-records", help="Print every record of every batch.")
    ] = False,
    verify_index_: Annotated[
        bool, typer.Option("--verify-index", help="Check the indexes against the .log.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
    encoding: Annotated[
        Encoding, typer.Option("--encoding", "-e",
                               help="Keys and payloads as text (default), base64 or hex.")
    ] = Encoding.text,
) -> None:
    """Print a segment file's batches (and records) or an index, offline (DumpLogSegments)."""
    if not segment_file.is_file():
        typer.echo(f"spool: no such file {segment_file}", err=True)
        raise typer.Exit(2)
    d = Dumper(as_json, encoding)
    try:
        if ".log" in segment_file.name:
            dump_log(d, segment_file, print_records, verify_index_)
        elif ".index" in segment_file.name or ".timeindex" in segment_file.name:
            dump_index(d, segment_file, verify_index_)
        else:
            typer.echo(f"spool: {segment_file.name} is not a .log, .index or .timeindex file",
                       err=True)
            raise typer.Exit(2)
    except BrokenPipeError:
        sys.stderr.close()
        raise typer.Exit(0) from None
    except typer.BadParameter as e:
        typer.echo(f"spool: {e}", err=True)
        raise typer.Exit(2) from None
    if d.problems:
        raise typer.Exit(1)
