"""A partition replica's log read offline from its segment files, as ``spool dump-log`` reads
them (``spool.cli.dump_log.walk``): no broker involved, so what a broker serves cannot hide
what its disk holds.

``replica_batches(data_dir, topic, partition)`` gives every intact batch of the
replica, in offset order across its ``.log`` segments, as (header, bytes);
``read_replica(source, data_dir, topic, partitions, upto)`` turns them into a
``history.Read`` (each partition's records below ``upto[p]``, control
records left out); ``diverging(dirs, topic, partition, upto)`` compares the
replicas' batches byte for byte below ``upto`` (a batch that straddles
``upto`` counts whole: followers copy the leader's batches as they are) and
returns what differs, empty when every replica holds the same bytes.
``checkpointed_high_watermark(data_dir, topic, partition)`` reads Kafka's
``replication-offset-checkpoint`` of the log dir (None when absent).
"""

from __future__ import annotations

from pathlib import Path

from spool.cli.dump_log import walk
from spool.records.batch import BatchHeader
from spool.records.record import iter_records
from spool.storage.checkpoint import read_checkpoint
from tests.helpers.history import Consumed, Read

REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"


def partition_dir(data_dir: Path, topic: str, partition: int) -> Path:
    return Path(data_dir) / f"{topic}-{partition}"


def replica_batches(data_dir: Path, topic: str, partition: int) -> list[tuple[BatchHeader, bytes]]:
    """Every intact batch of the replica's segments, in offset order (a segment's damaged or
    unwritten tail ends its walk)."""
    d = partition_dir(data_dir, topic, partition)
    segs = sorted(d.glob("*.log"), key=lambda p: int(p.name.split(".", 1)[0]))
    out: list[tuple[BatchHeader, bytes]] = []
    for seg in segs:
        data = seg.read_bytes()
        found, _ = walk(data)
        out.extend((h, data[pos:pos + h.size]) for pos, h in found)
    return out


def log_end_offset(data_dir: Path, topic: str, partition: int) -> int:
    bs = replica_batches(data_dir, topic, partition)
    return bs[-1][0].next_offset if bs else 0


def read_replica(source: str, data_dir: Path, topic: str, partitions: list[int],
                 upto: dict[int, int]) -> Read:
    read = Read(source)
    for p in partitions:
        read.ends[(topic, p)] = upto[p]
        for h, data in replica_batches(data_dir, topic, p):
            if h.base_offset >= upto[p] or h.is_control:
                continue
            for r in iter_records(data, 0):
                if r.offset < upto[p]:
                    read.records.append(Consumed(topic, p, r.offset, r.key, r.value))
    return read


def diverging(dirs: dict[int, Path], topic: str, partition: int, upto: int) -> list[str]:
    """What differs between the replicas (node -> data dir) below offset ``upto``."""
    below = {n: [(h, b) for h, b in replica_batches(d, topic, partition) if h.base_offset < upto]
             for n, d in dirs.items()}
    bad = []
    for n, bs in below.items():
        end = bs[-1][0].next_offset if bs else 0
        if end < upto:
            bad.append(f"{topic}-{partition} on node {n}: its log ends at {end}, below {upto}")
    ref_node = max(below, key=lambda n: len(below[n]))
    ref = below[ref_node]
    for n, bs in below.items():
        if n == ref_node:
            continue
        for i, (h, b) in enumerate(bs):
            if i >= len(ref):
                bad.append(f"{topic}-{partition}: node {n} has a batch at {h.base_offset} that "
                           f"node {ref_node} lacks")
                break
            rh, rb = ref[i]
            if b != rb:
                bad.append(f"{topic}-{partition}: batch #{i} differs: node {n} has offsets "
                           f"{h.base_offset}..{h.last_offset} epoch {h.partition_leader_epoch} "
                           f"crc {h.crc}, node {ref_node} {rh.base_offset}..{rh.last_offset} "
                           f"epoch {rh.partition_leader_epoch} crc {rh.crc}")
                break
    return bad


def checkpointed_high_watermark(data_dir: Path, topic: str, partition: int) -> int | None:
    path = Path(data_dir) / REPLICATION_OFFSET_CHECKPOINT
    if not path.exists():
        return None
    for tp, off in read_checkpoint(path).items():
        if tuple(tp) == (topic, partition):
            return off
    return None
