"""Finding records by time: ListOffsets by timestamp and by max timestamp (KIP-734).

``offset_for_timestamp`` returns the first record, in offset order, whose
timestamp is >= the target (Kafka's semantics; producer timestamps need not
increase). The search:

    1. skip segments whose newest timestamp is below the target
    2. in the first other segment, the time index gives the last entry with a
       timestamp strictly below the target: every record up to its offset is
       older, so the scan may start at the batch holding that offset
       (offset index floor lookup)
    3. walk batch headers; for a batch whose maxTimestamp reaches the target,
       decode its records (decompressing if needed) and take the first one

Reads only: no lock (works on the caller's snapshot of segments).
"""

from __future__ import annotations

from collections.abc import Sequence

from spool.records.record import iter_records
from spool.storage.segment import LogSegment


def offset_for_timestamp(
    segments: Sequence[LogSegment], timestamp: int, log_start: int, limit: int
) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record in [log_start, limit) with ts >= ``timestamp``."""
    for seg in segments:
        if seg.largest_timestamp() < timestamp:
            continue
        _, off = seg.time_index.lookup(timestamp, strict=True)
        found = seg.translate_offset(max(off, log_start))
        pos = found[0] if found else seg.size
        for p, h in seg.batches(pos):
            if h.base_offset >= limit:
                return None
            if h.max_timestamp < timestamp or h.last_offset < log_start:
                continue
            for rec in iter_records(seg.pread(h.size, p)):
                if rec.offset >= limit:
                    return None
                if rec.timestamp >= timestamp and rec.offset >= log_start:
                    return rec.offset, rec.timestamp
    return None


def max_timestamp_offset(segments: Sequence[LogSegment]) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record carrying the largest timestamp."""
    best = None
    for seg in segments:
        if seg.size and seg.largest_timestamp() >= 0:
            if best is None or seg.max_timestamp > best.max_timestamp:
                best = seg
    if best is None:
        return None
    found = best.translate_offset(best.offset_of_max_timestamp)
    if found is None:
        return None
    p, h = found
    for rec in iter_records(best.pread(h.size, p)):
        if rec.timestamp == best.max_timestamp:
            return rec.offset, rec.timestamp
    return h.last_offset, h.max_timestamp
