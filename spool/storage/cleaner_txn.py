"""What the cleaner needs to know about producers and transactions, from the log itself.

Kafka reads aborted transactions from each segment's ``.txnindex`` and the
last batch of every active producer from the producer state manager. Spool
writes neither yet, so ``scan_producers`` derives both from one walk of the
batch headers of the whole log (control batches are decoded: one record
each)::

    transactional data batch of producer P   opens P's transaction at its base
                                             offset (if none is open)
    ABORT marker of P                        closes it: AbortedTxn(P, first, marker)
    COMMIT marker of P                       closes it
    any batch of P                           P's last batch; a data batch also
                                             sets P's last data offset

A producer whose last batch is older than ``producer.id.expiration.ms``
(Kafka's default, one day, by batch timestamps) is no longer active.

``TxnCleaningState`` is Kafka's CleanedTransactionMetadata: fed every batch
of one cleaning pass in offset order, it says which transactional batches
belong to aborted transactions (their records go) and which markers have
no data of their transaction left in the log (they may go once their
delete horizon has passed). Not thread-safe; one per cleaning.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from spool.protocol.errors import KafkaError
from spool.records.batch import BatchHeader
from spool.records.record import CONTROL_ABORT, CONTROL_COMMIT, ControlRecord, iter_records
from spool.storage.segment import LogSegment

PRODUCER_ID_EXPIRATION_MS = 86_400_000


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset


@dataclass(frozen=True, slots=True)
class LastBatch:
    last_data_offset: int | None  # None: the producer's only batches left are markers
    producer_epoch: int
    max_timestamp: int


def control_type(data: bytes | memoryview, pos: int = 0) -> int | None:
    """The control record type of the control batch at ``pos`` (None: an empty batch)."""
    return control_marker(data, pos)[0]


def control_marker(data: bytes | memoryview, pos: int = 0) -> tuple[int | None, int]:
    """(control record type, coordinator epoch) of the control batch at ``pos``: (None, -1)
    for an empty batch, (-1, -1) for one whose record does not decode."""
    for rec in iter_records(data, pos):
        try:
            marker = ControlRecord.decode(rec.key, rec.value)
        except KafkaError:
            return -1, -1
        return marker.type, marker.coordinator_epoch
    return None, -1


def scan_producers(
    segments: Sequence[LogSegment], now_ms: int
) -> tuple[list[AbortedTxn], dict[int, LastBatch]]:
    """Aborted transactions (by first offset) and the last batch of each active producer."""
    open_txns: dict[int, int] = {}
    aborted: list[AbortedTxn] = []
    last: dict[int, LastBatch] = {}
    for seg in segments:
        for pos, h in seg.batches():
            pid = h.producer_id
            if pid < 0:
                continue
            if h.is_control:
                ctype = control_type(seg.pread(h.size, pos))
                first = open_txns.pop(pid, None)
                if ctype == CONTROL_ABORT and first is not None:
                    aborted.append(AbortedTxn(pid, first, h.last_offset))
                prev = last.get(pid)
                last[pid] = LastBatch(prev.last_data_offset if prev else None, h.producer_epoch,
                                      h.max_timestamp)
                continue
            if h.is_transactional:
                open_txns.setdefault(pid, h.base_offset)
            last[pid] = LastBatch(h.last_offset, h.producer_epoch, h.max_timestamp)
    aborted.sort(key=lambda t: t.first_offset)
    active = {
        pid: lb for pid, lb in last.items()
        if lb.max_timestamp < 0 or now_ms - lb.max_timestamp <= PRODUCER_ID_EXPIRATION_MS
    }
    return aborted, active


def is_last_batch_of_producer(h: BatchHeader, last: dict[int, LastBatch]) -> bool:
    """Kafka's rule: keep the batch holding an active producer's last sequence, or its
    last marker when no data is left (it carries the producer epoch for fencing)."""
    lb = last.get(h.producer_id) if h.producer_id >= 0 else None
    if lb is None:
        return False
    if lb.last_data_offset is not None:
        return h.last_offset == lb.last_data_offset
    return h.is_control and h.producer_epoch == lb.producer_epoch


class TxnCleaningState:
    """Kafka's CleanedTransactionMetadata (see the module docstring)."""

    def __init__(self, aborted: Sequence[AbortedTxn]) -> None:
        self._pending = deque(aborted)
        self._ongoing_aborted: dict[int, int | None] = {}  # pid -> last batch seen of it
        self._ongoing_committed: set[int] = set()

    def _consume_up_to(self, offset: int) -> None:
        while self._pending and self._pending[0].first_offset <= offset:
            txn = self._pending.popleft()
            self._ongoing_aborted[txn.producer_id] = None

    def on_batch_read(self, h: BatchHeader) -> bool:
        """A data batch: True if it belongs to an aborted transaction (drop its records)."""
        self._consume_up_to(h.last_offset)
        if not h.is_transactional:
            return False
        if h.producer_id in self._ongoing_aborted:
            self._ongoing_aborted[h.producer_id] = h.last_offset
            return True
        self._ongoing_committed.add(h.producer_id)
        return False

    def on_control_batch_read(self, h: BatchHeader, ctype: int | None) -> bool:
        """A control batch: True if no data of its transaction is left (it may go)."""
        self._consume_up_to(h.last_offset)
        if ctype is None:
            return True  # emptied by an earlier cleaning
        pid = h.producer_id
        if ctype == CONTROL_ABORT:
            if pid in self._ongoing_aborted:
                return self._ongoing_aborted.pop(pid) is None
            return True
        if ctype == CONTROL_COMMIT:
            if pid in self._ongoing_committed:
                self._ongoing_committed.discard(pid)
                return False
            return True
        return False
