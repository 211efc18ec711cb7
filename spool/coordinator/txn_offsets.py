"""Transactional offset commits waiting for their transaction's marker.

TxnOffsetCommit appends the offset commit records to the group's
``__consumer_offsets`` partition in a transactional batch (the producer's id
and epoch, no sequence). They are *pending*: OffsetFetch does not see them
until the transaction's COMMIT marker reaches that partition, when they are
replayed into the group coordinator like any commit record; an ABORT drops
them. Pending records are keyed by (producer id, partition): a transaction
may commit offsets of several groups living on different partitions.

Startup replays the same way (``load_batch`` for every transactional or
control batch of ``__consumer_offsets``, in log order), so the live and the
replayed state agree. Not thread-safe: event loop (or startup) only.
"""

from __future__ import annotations

from collections.abc import Callable

from spool.coordinator.schema import OffsetKey, SchemaError, decode_key
from spool.protocol.errors import KafkaError
from spool.records.batch import BatchHeader
from spool.records.record import CONTROL_COMMIT, ControlRecord, iter_records

Apply = Callable[[bytes | None, bytes | None], None]


class PendingTxnOffsets:
    def __init__(self) -> None:
        self._pending: dict[tuple[int, int], list[tuple[bytes | None, bytes | None]]] = {}

    def add(self, producer_id: int, partition: int, key: bytes | None, value: bytes | None) -> None:
        self._pending.setdefault((producer_id, partition), []).append((key, value))

    def complete(self, producer_id: int, partition: int, commit: bool, apply: Apply) -> int:
        """The marker reached ``partition``: apply (commit) or drop (abort) its records."""
        records = self._pending.pop((producer_id, partition), [])
        if commit:
            for key, value in records:
                apply(key, value)
        return len(records)

    def drop_partition(self, partition: int) -> None:
        """Forget what is pending on ``partition`` (another broker coordinates it now)."""
        for key in [k for k in self._pending if k[1] == partition]:
            del self._pending[key]

    def pending_for(self, group: str) -> set[tuple[str, int]]:
        """The (topic, partition) of ``group``'s offsets that wait for a marker (OffsetFetch
        with ``require_stable`` answers them UNSTABLE_OFFSET_COMMIT)."""
        out = set()
        for records in self._pending.values():
            for key, _ in records:
                try:
                    k = decode_key(key) if key is not None else None
                except SchemaError:
                    continue
                if isinstance(k, OffsetKey) and k.group == group:
                    out.add((k.topic, k.partition))
        return out

    def pending_partitions(self, producer_id: int) -> list[int]:
        return sorted(p for pid, p in self._pending if pid == producer_id)

    def load_batch(self, partition: int, h: BatchHeader, batch: bytes, apply: Apply) -> None:
        """Replay one transactional or control batch read back from the log."""
        records = list(iter_records(batch))
        if h.is_control:
            for rec in records[:1]:
                try:
                    ctrl = ControlRecord.decode(rec.key, rec.value)
                except KafkaError:
                    return
                self.complete(h.producer_id, partition, ctrl.type == CONTROL_COMMIT, apply)
            return
        for rec in records:
            self.add(h.producer_id, partition, _b(rec.key), _b(rec.value))


def _b(v) -> bytes | None:
    return None if v is None else bytes(v)
