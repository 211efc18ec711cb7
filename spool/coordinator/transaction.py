"""Transaction coordinator: transactional ids as a state machine over ``__transaction_state``.

One record per change, key = transactional id, value = its whole metadata
(Kafka's TransactionLogKey/Value v0 layout, big-endian)::

    key    version int16 (0) | transactionalId string (int16 length)
    value  version int16 (0) | producerId int64 | producerEpoch int16 |
           transactionTimeoutMs int32 | state int8 |
           partitions int32 count (-1: none) x (topic string | int32 count x int32) |
           lastUpdateTimestampMs int64 | startTimestampMs int64
    a null value (tombstone): the transactional id expired

States (Kafka's ids) and the transitions allowed (target <- previous)::

    EMPTY 0            <- EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT (InitProducerId)
    ONGOING 1          <- EMPTY, ONGOING, COMPLETE_COMMIT, COMPLETE_ABORT (AddPartitions/Offsets)
    PREPARE_COMMIT 2   <- ONGOING (EndTxn commit)
    PREPARE_ABORT 3    <- ONGOING (EndTxn abort, fencing, timeout)
    COMPLETE_COMMIT 4  <- PREPARE_COMMIT (markers written)
    COMPLETE_ABORT 5   <- PREPARE_ABORT
    DEAD 6             (expired, tombstoned)

``TransactionCoordinator`` holds the replayed image and validates requests;
it never writes: each operation returns the next ``TxnMetadata`` (or raises
``KafkaError``), the broker's runtime (``spool.broker.txn_runtime``) appends
its record and only then ``replay``s it, so live state == replayed state.
Time and new producer ids come from the caller. Not thread-safe: the runtime calls it from the
event loop only.
"""

from __future__ import annotations

import dataclasses
import struct
from dataclasses import dataclass, field
from enum import IntEnum

from spool.protocol.errors import Errors, KafkaError

MAX_EPOCH = 32767


class TxnState(IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6

    @property
    def kafka_name(self) -> str:
        return {0: "Empty", 1: "Ongoing", 2: "PrepareCommit", 3: "PrepareAbort",
                4: "CompleteCommit", 5: "CompleteAbort", 6: "Dead"}[self.value]


S = TxnState
COMPLETE = (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)


@dataclass(frozen=True)
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = S.EMPTY
    partitions: frozenset[tuple[str, int]] = field(default_factory=frozenset)
    last_update_ms: int = -1
    start_ms: int = -1

    def but(self, **kw) -> TxnMetadata:
        return dataclasses.replace(self, **kw)


# ---- records

def _str(s: str) -> bytes:
    b = s.encode("utf-8")
    return struct.pack(">h", len(b)) + b


def encode_key(txn_id: str) -> bytes:
    return struct.pack(">h", 0) + _str(txn_id)


def encode_value(m: TxnMetadata) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for t, p in sorted(m.partitions):
        by_topic.setdefault(t, []).append(p)
    parts = [struct.pack(">hqhib", 0, m.producer_id, m.producer_epoch, m.timeout_ms, m.state)]
    parts.append(struct.pack(">i", len(by_topic)))
    for t, ps in by_topic.items():
        parts.append(_str(t) + struct.pack(">i", len(ps)) + b"".join(struct.pack(">i", p) for p in ps))
    parts.append(struct.pack(">qq", m.last_update_ms, m.start_ms))
    return b"".join(parts)


def decode_key(buf: bytes) -> str:
    version, n = struct.unpack_from(">hh", buf)
    if version != 0 or n < 0 or 4 + n > len(buf):
        raise ValueError("not a transaction log key")
    return buf[4 : 4 + n].decode("utf-8")


def decode_value(txn_id: str, buf: bytes) -> TxnMetadata:
    try:
        _, pid, epoch, timeout, state = struct.unpack_from(">hqhib", buf)
        pos = 17
        (count,) = struct.unpack_from(">i", buf, pos)
        pos += 4
        partitions = set()
        for _ in range(max(count, 0)):
            (n,) = struct.unpack_from(">h", buf, pos)
            topic = buf[pos + 2 : pos + 2 + n].decode("utf-8")
            pos += 2 + n
            (k,) = struct.unpack_from(">i", buf, pos)
            pos += 4
            for p in struct.unpack_from(f">{k}i", buf, pos):
                partitions.add((topic, p))
            pos += 4 * k
        last_update, start = struct.unpack_from(">qq", buf, pos)
    except (struct.error, UnicodeDecodeError) as e:
        raise ValueError(f"bad transaction log value: {e}") from e
    return TxnMetadata(txn_id, pid, epoch, timeout, TxnState(state), frozenset(partitions),
                       last_update, start)


# ---- the state machine

class TransactionCoordinator:
    def __init__(self, max_timeout_ms: int = 900_000) -> None:
        self.max_timeout_ms = max_timeout_ms
        self.txns: dict[str, TxnMetadata] = {}

    def replay(self, txn_id: str, m: TxnMetadata | None) -> None:
        if m is None or m.state == S.DEAD:
            self.txns.pop(txn_id, None)
        else:
            self.txns[txn_id] = m

    def load(self, key: bytes | None, value: bytes | None) -> None:
        if key is None:
            return
        try:
            txn_id = decode_key(key)
            self.replay(txn_id, None if value is None else decode_value(txn_id, value))
        except ValueError:
            return

    # -- InitProducerId

    def check_timeout(self, timeout_ms: int) -> None:
        if timeout_ms <= 0 or timeout_ms > self.max_timeout_ms:
            raise KafkaError(Errors.INVALID_TRANSACTION_TIMEOUT,
                             f"transaction.timeout.ms {timeout_ms} not in (0, "
                             f"transaction.max.timeout.ms={self.max_timeout_ms}]")

    def init_producer_id(self, txn_id: str, timeout_ms: int, producer_id: int, epoch: int,
                         now: int, new_pid) -> tuple[TxnMetadata | None, TxnMetadata]:
        """(abort first: the metadata of the open transaction to abort, or None; then the
        metadata to write). ``new_pid()`` allocates a producer id."""
        self.check_timeout(timeout_ms)
        m = self.txns.get(txn_id)
        if m is None:
            return None, TxnMetadata(txn_id, new_pid(), 0, timeout_ms, S.EMPTY, frozenset(), now, -1)
        if m.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            raise KafkaError(Errors.CONCURRENT_TRANSACTIONS, f"{txn_id} is completing")
        if producer_id >= 0 and (producer_id != m.producer_id or epoch != m.producer_epoch):
            raise KafkaError(Errors.PRODUCER_FENCED,
                             f"{txn_id}: producer {producer_id}/{epoch} is not the current one")
        abort = None
        if m.state == S.ONGOING:  # fence the previous instance: abort with a bumped epoch
            m = abort = m.but(producer_epoch=min(m.producer_epoch + 1, MAX_EPOCH),
                              state=S.PREPARE_ABORT, last_update_ms=now)
            if m.producer_epoch >= MAX_EPOCH - 1:
                m = self._bump(m, new_pid)
        else:
            m = self._bump(m, new_pid)
        return abort, m.but(state=S.EMPTY, partitions=frozenset(), timeout_ms=timeout_ms,
                            last_update_ms=now, start_ms=-1)

    @staticmethod
    def _bump(m: TxnMetadata, new_pid) -> TxnMetadata:
        if m.producer_epoch >= MAX_EPOCH - 1:
            return m.but(producer_id=new_pid(), producer_epoch=0)
        return m.but(producer_epoch=m.producer_epoch + 1)

    # -- AddPartitionsToTxn / AddOffsetsToTxn

    def _current(self, txn_id: str, producer_id: int, epoch: int) -> TxnMetadata:
        m = self.txns.get(txn_id)
        if m is None or m.producer_id != producer_id:
            raise KafkaError(Errors.INVALID_PRODUCER_ID_MAPPING,
                             f"{txn_id} is not mapped to producer {producer_id}")
        if m.producer_epoch != epoch:
            raise KafkaError(Errors.PRODUCER_FENCED,
                             f"{txn_id}: epoch {epoch} is not the current {m.producer_epoch}")
        return m

    def add_partitions(self, txn_id: str, producer_id: int, epoch: int,
                       partitions: set[tuple[str, int]], now: int) -> TxnMetadata | None:
        """The metadata to write, or None when nothing changes."""
        m = self._current(txn_id, producer_id, epoch)
        if m.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            raise KafkaError(Errors.CONCURRENT_TRANSACTIONS, f"{txn_id} is completing")
        if m.state == S.ONGOING and partitions <= m.partitions:
            return None
        if m.state == S.ONGOING:
            return m.but(partitions=m.partitions | partitions, last_update_ms=now)
        return m.but(state=S.ONGOING, partitions=frozenset(partitions), last_update_ms=now,
                     start_ms=now)

    # -- EndTxn

    def end_txn(self, txn_id: str, producer_id: int, epoch: int, commit: bool,
                now: int) -> TxnMetadata | None:
        """PREPARE_COMMIT/PREPARE_ABORT to write, or None for a retried EndTxn already done."""
        m = self._current(txn_id, producer_id, epoch)
        if m.state == S.ONGOING:
            return m.but(state=S.PREPARE_COMMIT if commit else S.PREPARE_ABORT, last_update_ms=now)
        if m.state == (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT):
            return None  # a retry of the EndTxn that completed it
        if m.state == (S.PREPARE_COMMIT if commit else S.PREPARE_ABORT):
            raise KafkaError(Errors.CONCURRENT_TRANSACTIONS,
                             f"{txn_id} is still writing its markers")  # a retry: come back later
        if m.state == S.EMPTY and not commit:
            return None  # nothing was added: aborting nothing is fine
        raise KafkaError(Errors.INVALID_TXN_STATE,
                         f"{txn_id} is {m.state.kafka_name}; cannot "
                         f"{'commit' if commit else 'abort'}")

    @staticmethod
    def completed(m: TxnMetadata, now: int) -> TxnMetadata:
        state = S.COMPLETE_COMMIT if m.state == S.PREPARE_COMMIT else S.COMPLETE_ABORT
        return m.but(state=state, last_update_ms=now)

    # -- timers

    def timed_out(self, now: int) -> list[TxnMetadata]:
        """Open transactions past their timeout, as PREPARE_ABORT with a bumped epoch
        (the producer that let it time out is fenced)."""
        out = []
        for m in self.txns.values():
            if m.state == S.ONGOING and m.start_ms + m.timeout_ms <= now:
                if m.producer_epoch < MAX_EPOCH - 1:
                    m = m.but(producer_epoch=m.producer_epoch + 1)
                out.append(m.but(state=S.PREPARE_ABORT, last_update_ms=now))
        return out

    def expired(self, now: int, expiration_ms: int) -> list[str]:
        """Completed transactional ids unused for ``transactional.id.expiration.ms``."""
        return [t for t, m in self.txns.items()
                if m.state in COMPLETE and now - m.last_update_ms >= expiration_ms]

    def pending_completion(self) -> list[TxnMetadata]:
        """PREPARE_* transactions (after a crash): their markers must be (re)written."""
        return [m for m in self.txns.values() if m.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT)]
