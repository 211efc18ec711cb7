"""What the compatibility tier sends and what it expects back, shared by every client's tests.

Records are keyed, carry headers and explicit CreateTime timestamps, and are
compressible (so a client that compresses really shrinks the batch). Checks
are what a user would look at: every record comes back once, byte for byte,
each partition in send order with contiguous offsets, keys partitioned the
Java way (murmur2), and the broker stored the batches in the codec the client
chose.
"""

from __future__ import annotations

import re
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from spool.records import CODEC_IDS, iter_batches
from tests.helpers.murmur2 import partition_for

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
CREATE_TIME, LOG_APPEND_TIME = 0, 1


@dataclass(frozen=True)
class Sent:
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int


@dataclass(frozen=True)
class Got:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int
    timestamp_type: int

    def as_sent(self) -> Sent:
        return Sent(self.key, self.value, self.headers, self.timestamp)


def now_ms() -> int:
    return int(time.time() * 1000)


def make_records(tag: str, n: int, base_ts: int | None = None, keys: int = 37) -> list[Sent]:
    """``n`` keyed records over ``keys`` distinct keys, timestamps ``base_ts + i``."""
    base = now_ms() - 60_000 if base_ts is None else base_ts
    out = []
    for i in range(n):
        out.append(Sent(
            key=f"{tag}-key-{i % keys}".encode(),
            value=(f"{tag} record {i} " + "payload " * (i % 23)).encode(),
            headers=(("seq", str(i).encode()), ("tag", tag.encode()), ("empty", b""),
                     ("bin\u00e9", bytes([i % 256, 0, 255]))),
            timestamp=base + i,
        ))
    return out


def expected_by_partition(sent: list[Sent], partitions: int) -> dict[int, list[Sent]]:
    by: dict[int, list[Sent]] = defaultdict(list)
    for s in sent:
        assert s.key is not None
        by[partition_for(s.key, partitions)].append(s)
    return by


def check_roundtrip(sent: list[Sent], got: list[Got], partitions: int,
                    first_offsets: dict[int, int] | None = None) -> None:
    """Every record back exactly once, on its murmur2 partition, in send order, contiguous offsets."""
    assert len(got) == len(sent), f"sent {len(sent)} records, consumed {len(got)}"
    want = expected_by_partition(sent, partitions)
    have: dict[int, list[Got]] = defaultdict(list)
    for g in got:
        have[g.partition].append(g)
    assert sorted(have) == sorted(want), "records landed on unexpected partitions"
    for p, records in have.items():
        first = (first_offsets or {}).get(p, 0)
        offsets = [g.offset for g in records]
        assert offsets == list(range(first, first + len(records))), (
            f"partition {p}: offsets are not contiguous from {first}: {offsets[:10]}..."
        )
        for i, (g, s) in enumerate(zip(records, want[p], strict=True)):
            assert g.as_sent() == s, f"partition {p} position {i} (offset {g.offset}): {g} != {s}"
            assert g.timestamp_type == CREATE_TIME, f"offset {g.offset}: timestamp type {g.timestamp_type}"


def partition_dirs(data_dir: Path, topic: str) -> list[Path]:
    pat = re.compile(re.escape(topic) + r"-\d+")
    return sorted(d for d in Path(data_dir).iterdir() if d.is_dir() and pat.fullmatch(d.name))


def stored_batches(data_dir: Path, topic: str):
    """Headers of every batch the broker wrote for ``topic`` (all partitions, all segments)."""
    dirs = partition_dirs(data_dir, topic)
    assert dirs, f"no partition directory for {topic} under {data_dir}"
    out = []
    for d in dirs:
        for seg in sorted(d.glob("*.log")):
            out.extend(h for _, h in iter_batches(seg.read_bytes()))
    return out


def check_stored_codec(data_dir: Path, topic: str, codec: str) -> None:
    """The broker kept the batches as the client compressed them.

    Clients send a batch uncompressed when compressing does not shrink it (a
    lone small record), so a few plain batches are fine; most records must be
    in batches of the chosen codec and no other codec may appear.
    """
    batches = stored_batches(data_dir, topic)
    assert batches, f"no batches stored for {topic}"
    want = CODEC_IDS[codec]
    codecs = {h.compression for h in batches}
    total = sum(h.records_count for h in batches)
    in_codec = sum(h.records_count for h in batches if h.compression == want)
    assert codecs <= {0, want} and in_codec * 2 > total, (
        f"asked the client for {codec} (id {want}); the broker stored {in_codec} of {total} "
        f"records in batches of that codec, codec ids seen {sorted(codecs)}"
    )
