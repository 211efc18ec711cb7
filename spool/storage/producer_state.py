"""Per-partition producer state: idempotence and open transactions (Kafka's ProducerStateManager).

For every producer id that wrote to the partition: its epoch, the last five
batches' ``(first seq, last seq, first offset, last offset)``, the timestamp
of its last batch, the first offset of its open transaction (if any), and the
coordinator epoch of its last transaction marker. ``active_producers()`` is
what DescribeProducers shows of it.

``check(header)`` is the produce-time rule for one batch (raises
``KafkaError``; returns the cached batch of a duplicate)::

    unknown producer         data batch with sequence != 0  -> UNKNOWN_PRODUCER_ID (59)
    epoch < current epoch    any batch, markers included     -> INVALID_PRODUCER_EPOCH (47)
    epoch == current         same (first, last) seq as one of the last 5 -> duplicate
                             (answered with the original offsets, nothing written)
                             first seq != last seq + 1 (mod 2**31)      -> OUT_OF_ORDER_SEQUENCE_NUMBER (45)
    epoch > current          first seq != 0                             -> OUT_OF_ORDER_SEQUENCE_NUMBER
    non-transactional batch while the producer's transaction is open    -> INVALID_TXN_STATE (48)

Transaction verification (KIP-890 part 1, Kafka's VerificationStateEntry): before the
first transactional batch of a producer's transaction reaches a partition, the leader
asks the transaction coordinator whether the partition is in the transaction.
``start_verification(pid, seq, epoch, now)`` opens that check: it returns a new guard
object (kept per producer with the lowest sequence and highest epoch seen while
verifying), or ``ONGOING`` when the producer's transaction at that epoch is already
open here (nothing to ask). ``check(h, guard)`` of a client's batch (``guard`` given:
the produce path; None: an append that needs no check, such as the coordinators' own)
then refuses a transactional data batch of a producer without an open transaction here
unless ``guard`` is the guard still kept for it (INVALID_TXN_STATE), and, while one is
kept, a sequence above its lowest one (OUT_OF_ORDER_SEQUENCE_NUMBER). Appending any
transactional batch of the producer (data or marker) drops its guard, so a verification
answered after the transaction ended (a marker came between) cannot admit a batch: the
guard it carries is no longer the one kept. Guards are memory only, and expire with
``producer.id.expiration.ms`` like idle producers.

Markers (KIP-890, Kafka 4.2): at transaction version 2 the coordinator bumps the epoch
before it writes a transaction's markers, so a valid marker's epoch is strictly above the
producer's here; ``check(h, transaction_version=2)`` refuses one at or below it
(INVALID_PRODUCER_EPOCH: a late or repeated marker that would otherwise close the
producer's next transaction, begun at that same epoch). Below version 2 a marker may
carry the producer's epoch (older than it: INVALID_PRODUCER_EPOCH, as data).

Batches with ``baseSequence = -1`` (the coordinator's transactional offset
commits) and control batches skip the sequence rules. ``update`` applies an
appended batch: a transactional data batch opens the producer's transaction
at its base offset; a COMMIT/ABORT marker closes it, and an ABORT returns
the ``AbortedTxn`` for the segment's ``.txnindex``. The partition's first
unstable offset (LSO) is the smallest open transaction's first offset.

Snapshots: ``<offset:020d>.snapshot`` in the partition directory holds the
state of every offset below ``offset`` (written at every segment roll and at
close of a non-empty log, even with no producer: loading then replays the
log from the newest snapshot, not from its start; the two newest are kept)::

    version int16 (1) | crc uint32 (CRC-32C of what follows) | count int32
    count x ( producerId int64 | epoch int16 | coordinatorEpoch int32 |
              txnFirstOffset int64 (-1: none) | lastTimestamp int64 |
              batches int8 | batches x (firstSeq int32 | lastSeq int32 |
              firstOffset int64 | lastOffset int64) )

Written to ``.tmp`` and renamed; no fsync (a lost or damaged snapshot only
means replaying more of the log, so a snapshot that cannot be written, e.g.
on a full disk, is logged and skipped). Load: the newest intact snapshot at or
below the log end offset (later ones are deleted), then the log from there.

Expiry: a producer without an open transaction whose last batch timestamp
is ``producer.id.expiration.ms`` old is forgotten (``remove_expired``).
Bound: at most ``max_producers`` (``MAX_PRODUCERS``, 4096) producers are
kept per partition, so a flood of fresh producer ids cannot grow memory
without limit between expiry runs: beyond it, the least recently appending
producers without an open transaction are forgotten at once (the dict is
kept in least-recently-updated order). A forgotten producer that writes again
with a sequence other than 0 gets UNKNOWN_PRODUCER_ID, which clients since
KIP-360 answer by bumping their epoch; only its duplicate detection for a
retry older than 4096 other producers' writes is lost. Producers with an
open transaction are never evicted (they are bounded by the transaction
coordinator's producers, and their LSO must hold).
Concurrency: owned by one ``PartitionLog``; called under its lock.
"""

from __future__ import annotations

import functools
import logging
import os
import struct
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from crc32c import crc32c

from spool.protocol.errors import Errors, KafkaError
from spool.records.batch import NO_SEQUENCE, BatchHeader
from spool.records.record import CONTROL_ABORT
from spool.storage.txn_index import AbortedTxn

log = logging.getLogger(__name__)

MAX_CACHED_BATCHES = 5
SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
KEEP_SNAPSHOTS = 2
MAX_PRODUCERS = 4096

_HEAD = struct.Struct(">hIi")
_ENTRY = struct.Struct(">qhiqqb")
_BATCH = struct.Struct(">iiqq")


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int = -1
    coordinator_epoch: int = -1
    txn_first_offset: int = -1  # -1: no open transaction
    last_timestamp: int = -1
    # (first seq, last seq, first offset, last offset), oldest first
    batches: deque = field(default_factory=lambda: deque(maxlen=MAX_CACHED_BATCHES))


class ActiveProducer(NamedTuple):
    """One producer's state as DescribeProducers (61) shows it (Kafka's ProducerState)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int  # of its last data batch; -1: none kept (a new epoch, markers only)
    last_timestamp: int
    coordinator_epoch: int  # of its last transaction marker; -1: none
    current_txn_start_offset: int  # first offset of its open transaction; -1: none


class VerificationEntry:
    """A verification under way for one producer (Kafka's VerificationStateEntry)."""

    __slots__ = ("guard", "lowest_sequence", "epoch", "timestamp")

    def __init__(self, sequence: int, epoch: int, timestamp: int) -> None:
        self.guard = object()
        self.lowest_sequence = sequence
        self.epoch = epoch
        self.timestamp = timestamp

    def update(self, sequence: int, epoch: int) -> None:
        if epoch == self.epoch and sequence < self.lowest_sequence:
            self.lowest_sequence = sequence
        if epoch > self.epoch:
            self.epoch, self.lowest_sequence = epoch, sequence


ONGOING = object()  # start_verification: the transaction is open here, nothing to verify


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (last_seq == 0x7FFFFFFF and next_seq == 0)


def snapshot_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


class ProducerStateManager:
    """The producer state of one partition (see the module docstring)."""

    def __init__(self, directory: Path, max_producers: int = MAX_PRODUCERS) -> None:
        self.dir = directory
        self.max_producers = max_producers
        # least recently updated first: update() moves a producer to the end
        self.producers: dict[int, ProducerEntry] = {}
        self._open: dict[int, int] = {}  # producer id -> first offset of its open transaction
        self._known: set[int] | None = None  # snapshot offsets on disk (None: not listed yet)
        self.verifying: dict[int, VerificationEntry] = {}  # producer id -> its verification

    # -- transaction verification (module doc) -------------------------------------

    def start_verification(self, producer_id: int, sequence: int, epoch: int,
                           now_ms: int) -> object:
        """The guard of a verification to run for the producer's first transactional batch
        here, or ``ONGOING`` when its transaction at ``epoch`` is already open."""
        e = self.producers.get(producer_id)
        if e is not None and e.txn_first_offset >= 0 and e.epoch == epoch:
            return ONGOING
        v = self.verifying.get(producer_id)
        if v is None:
            v = self.verifying[producer_id] = VerificationEntry(sequence, epoch, now_ms)
        else:
            v.update(sequence, epoch)
        return v.guard

    def _check_verified(self, h: BatchHeader, e: ProducerEntry | None, guard: object) -> None:
        v = self.verifying.get(h.producer_id)
        if v is not None and h.base_sequence > v.lowest_sequence:
            raise KafkaError(Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
                             f"sequence {h.base_sequence} for producer {h.producer_id} is above "
                             f"{v.lowest_sequence}, the lowest one being verified")
        if not h.is_transactional or h.is_control:
            return
        if e is not None and e.txn_first_offset >= 0:
            return
        if v is None or v.guard is not guard:
            raise KafkaError(Errors.INVALID_TXN_STATE,
                             "Record was not part of an ongoing transaction")

    # -- produce-time checks -------------------------------------------------------

    def check(self, h: BatchHeader, guard: object | None = None,
              transaction_version: int = 0) -> tuple[int, int] | None:
        """Validate one batch to be appended; (first, last offset) of a duplicate, else None.
        ``guard``: a client's batch, checked against its transaction's verification (module
        doc); None: no such check. ``transaction_version`` 2: a marker of a transaction
        version 2 transaction, whose epoch must be above the producer's (module doc)."""
        e = self.producers.get(h.producer_id)
        if (transaction_version >= 2 and h.is_control and e is not None
                and h.producer_epoch <= e.epoch):
            raise KafkaError(Errors.INVALID_PRODUCER_EPOCH,
                             f"transaction version 2 marker epoch {h.producer_epoch} of producer "
                             f"{h.producer_id} is not above {e.epoch}: a late or repeated marker")
        seq = h.base_sequence
        if guard is not None and e is not None and h.producer_epoch == e.epoch:
            for first_seq, lseq, first_off, last_off in e.batches:  # a retried duplicate
                if first_seq == seq and lseq == h.last_sequence:
                    return first_off, last_off
        if guard is not None:
            self._check_verified(h, e, guard)
        if e is None:
            if not h.is_control and seq not in (0, NO_SEQUENCE):
                raise KafkaError(Errors.UNKNOWN_PRODUCER_ID,
                                 f"producer {h.producer_id} is unknown and sent sequence {seq}")
            return None
        if h.producer_epoch < e.epoch:
            raise KafkaError(Errors.INVALID_PRODUCER_EPOCH,
                             f"epoch {h.producer_epoch} of producer {h.producer_id} is older "
                             f"than {e.epoch}")
        if h.is_control or seq == NO_SEQUENCE:
            return None
        if h.producer_epoch == e.epoch:
            last_seq = h.last_sequence
            for first_seq, lseq, first_off, last_off in e.batches:
                if first_seq == seq and lseq == last_seq:
                    return first_off, last_off
            if not e.batches:
                if seq != 0:
                    raise KafkaError(Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                     f"sequence {seq} for producer {h.producer_id}, expected 0")
            elif not _in_sequence(e.batches[-1][1], seq):
                raise KafkaError(Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                 f"sequence {seq} for producer {h.producer_id}, expected "
                                 f"{(e.batches[-1][1] + 1) & 0x7FFFFFFF}")
        elif seq != 0:
            raise KafkaError(Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
                             f"sequence {seq} for the new epoch {h.producer_epoch}, expected 0")
        if not h.is_transactional and e.txn_first_offset >= 0:
            raise KafkaError(Errors.INVALID_TXN_STATE,
                             f"producer {h.producer_id} wrote outside its open transaction")
        return None

    # -- state changes -------------------------------------------------------------

    def update(self, h: BatchHeader, control_type: int | None = None,
               coordinator_epoch: int = -1) -> AbortedTxn | None:
        """Apply an appended batch (``h`` carries its final offsets); ``control_type`` and
        ``coordinator_epoch`` are those of a control batch's marker (the producer keeps the
        epoch of the coordinator that wrote its last marker, as Kafka's does). Returns the
        aborted transaction an ABORT closes."""
        pid = h.producer_id
        if h.is_transactional:  # an open transaction or a marker: the verification is over
            self.verifying.pop(pid, None)
        e = self.producers.pop(pid, None)
        if e is None:
            e = ProducerEntry(pid)
        self.producers[pid] = e
        if len(self.producers) > self.max_producers:
            self._evict_idle(keep=pid)
        if h.producer_epoch > e.epoch:
            e.epoch = h.producer_epoch
            e.batches.clear()
        e.last_timestamp = max(e.last_timestamp, h.max_timestamp)
        if h.is_control:
            if coordinator_epoch >= 0:
                e.coordinator_epoch = coordinator_epoch
            return self._complete_txn(e, h, control_type)
        if h.base_sequence != NO_SEQUENCE:
            e.batches.append((h.base_sequence, h.last_sequence, h.base_offset, h.last_offset))
        if h.is_transactional and e.txn_first_offset < 0:
            e.txn_first_offset = h.base_offset
            self._open[pid] = h.base_offset
        return None

    def _complete_txn(self, e: ProducerEntry, h: BatchHeader, ctype: int | None) -> AbortedTxn | None:
        first = e.txn_first_offset
        e.txn_first_offset = -1
        self._open.pop(e.producer_id, None)
        if first < 0 or ctype != CONTROL_ABORT:
            return None
        lso = self.first_unstable_offset()
        return AbortedTxn(e.producer_id, first, h.base_offset,
                          h.base_offset + 1 if lso is None else lso)

    def active_producers(self) -> list[ActiveProducer]:
        """Every producer kept, by producer id, as DescribeProducers reports it."""
        return [ActiveProducer(pid, e.epoch, e.batches[-1][1] if e.batches else NO_SEQUENCE,
                               e.last_timestamp, e.coordinator_epoch, e.txn_first_offset)
                for pid, e in sorted(self.producers.items())]

    def first_unstable_offset(self) -> int | None:
        return min(self._open.values()) if self._open else None

    def open_transactions(self) -> dict[int, int]:
        """producer id -> first offset of its open transaction."""
        return dict(self._open)

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers idle for ``expiration_ms`` with no open transaction."""
        doomed = [pid for pid, e in self.producers.items()
                  if e.txn_first_offset < 0 and now_ms - e.last_timestamp >= expiration_ms]
        for pid in doomed:
            del self.producers[pid]
        for pid in [p for p, v in self.verifying.items() if now_ms - v.timestamp >= expiration_ms]:
            del self.verifying[pid]
        return len(doomed)

    def _evict_idle(self, keep: int) -> None:
        """Forget the least recently updated producers without an open transaction until
        at most ``max_producers`` remain (or only transactional ones are left)."""
        excess = len(self.producers) - self.max_producers
        doomed = []
        for pid, e in self.producers.items():
            if excess <= 0:
                break
            if e.txn_first_offset < 0 and pid != keep:
                doomed.append(pid)
                excess -= 1
        for pid in doomed:
            del self.producers[pid]

    def clear(self) -> None:
        self.producers.clear()
        self._open.clear()
        self.verifying.clear()

    # -- snapshots -----------------------------------------------------------------

    def snapshot_offsets(self) -> list[int]:
        out = []
        for name in os.listdir(self.dir):
            if name.endswith(SNAPSHOT_SUFFIX) and name[: -len(SNAPSHOT_SUFFIX)].isdigit():
                out.append(int(name[: -len(SNAPSHOT_SUFFIX)]))
        return sorted(out)

    def encode(self) -> bytes:
        parts = []
        for e in self.producers.values():
            parts.append(_ENTRY.pack(e.producer_id, e.epoch, e.coordinator_epoch,
                                     e.txn_first_offset, e.last_timestamp, len(e.batches)))
            parts.extend(_BATCH.pack(*b) for b in e.batches)
        body = struct.pack(">i", len(self.producers)) + b"".join(parts)
        return struct.pack(">hI", SNAPSHOT_VERSION, crc32c(body)) + body

    def decode(self, data: bytes) -> None:
        """Replace the state with a snapshot's; ValueError if it is damaged."""
        if len(data) < _HEAD.size:
            raise ValueError("snapshot too short")
        version, crc = struct.unpack_from(">hI", data)
        if version != SNAPSHOT_VERSION or crc32c(data[6:]) != crc:
            raise ValueError("bad snapshot version or CRC")
        (count,) = struct.unpack_from(">i", data, 6)
        pos = 10
        producers: dict[int, ProducerEntry] = {}
        try:
            for _ in range(count):
                pid, epoch, cepoch, txn_first, ts, nb = _ENTRY.unpack_from(data, pos)
                pos += _ENTRY.size
                e = ProducerEntry(pid, epoch, cepoch, txn_first, ts)
                for _ in range(nb):
                    e.batches.append(_BATCH.unpack_from(data, pos))
                    pos += _BATCH.size
                producers[pid] = e
        except struct.error as exc:
            raise ValueError("truncated snapshot") from exc
        self.producers = producers
        self._open = {p: e.txn_first_offset for p, e in producers.items() if e.txn_first_offset >= 0}

    def take_snapshot(self, offset: int, *, even_empty: bool = False) -> None:
        """Write ``<offset>.snapshot`` (state of the offsets below it); keep the newest two."""
        writer = self.snapshot_writer(offset, even_empty=even_empty)
        if writer is not None:
            writer()

    def snapshot_writer(self, offset: int, *, even_empty: bool = False) -> Callable[[], None] | None:
        """The state now, encoded; the returned job writes it as ``take_snapshot`` would
        (on another thread if the caller likes). None when there is nothing to write:
        no producer and no snapshot yet, unless ``even_empty`` (an empty snapshot still
        spares the next load a replay of the log from its start, as in Kafka)."""
        if self._known is None:
            self._known = set(self.snapshot_offsets())
        if not self.producers and not self._known and not even_empty:
            return None
        if self._known and offset <= max(self._known) and not self.producers:
            return None  # nothing newer to say
        return functools.partial(self._write_snapshot, offset, self.encode())

    def _write_snapshot(self, offset: int, data: bytes) -> None:
        path = self.dir / snapshot_name(offset)
        tmp = path.with_name(path.name + ".tmp")
        try:
            tmp.write_bytes(data)
            os.replace(tmp, path)
        except OSError as e:  # a missing snapshot only means replaying more of the log
            log.warning("%s: producer state snapshot at %d not written: %s", self.dir, offset, e)
            tmp.unlink(missing_ok=True)
            return
        known = self._known if self._known is not None else set(self.snapshot_offsets())
        known.add(offset)
        for old in sorted(known)[:-KEEP_SNAPSHOTS]:
            (self.dir / snapshot_name(old)).unlink(missing_ok=True)
            known.discard(old)
        self._known = known

    def load_snapshot(self, log_end_offset: int) -> int | None:
        """Load the newest intact snapshot at or below the log end; returns its offset."""
        self.clear()
        offsets = self.snapshot_offsets()
        self._known = set(offsets)
        for off in reversed(offsets):
            path = self.dir / snapshot_name(off)
            if off > log_end_offset:
                path.unlink(missing_ok=True)
                self._known.discard(off)
                continue
            try:
                self.decode(path.read_bytes())
            except (OSError, ValueError):
                path.unlink(missing_ok=True)
                self._known.discard(off)
                continue
            return off
        return None
