"""Transaction coordinator: transactional ids as a state machine over ``__transaction_state``.

One record per change, key = transactional id, value = its whole metadata
(Kafka's TransactionLogKey/Value layouts, big-endian)::

    key    version int16 (0) | transactionalId string (int16 length)
    value  version int16 (0) | producerId int64 | producerEpoch int16 |
           transactionTimeoutMs int32 | state int8 |
           partitions int32 count (-1: none) x (topic string | int32 count x int32) |
           lastUpdateTimestampMs int64 | startTimestampMs int64
    value  version int16 (1, flexible: written once transaction.version >= 1, as Kafka) |
           the same fields, strings and arrays compact (uvarint length + 1), each partition
           entry and the value ending in tagged fields; the value's tags:
           0 previousProducerId int64, 1 nextProducerId int64, 2 clientTransactionVersion int16
           (written when not -1, -1, 0)
    a null value (tombstone): the transactional id expired

States (Kafka's ids) and the transitions allowed (target <- previous)::

    EMPTY 0            <- EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT (InitProducerId)
    ONGOING 1          <- EMPTY, ONGOING, COMPLETE_COMMIT, COMPLETE_ABORT (AddPartitions/Offsets)
    PREPARE_COMMIT 2   <- ONGOING (EndTxn commit)
    PREPARE_ABORT 3    <- ONGOING (EndTxn abort, fencing, timeout)
    COMPLETE_COMMIT 4  <- PREPARE_COMMIT (markers written)
    COMPLETE_ABORT 5   <- PREPARE_ABORT
    DEAD 6             (expired, tombstoned)

Transaction version 2 (KIP-890 part 2; a client speaks it through EndTxn v5, and its
partitions come through a broker's AddPartitionsToTxn v4+, as Kafka decides from the
request versions): every EndTxn bumps the epoch (PREPARE_* carries epoch + 1, the markers
too, and the answer names it); a retried EndTxn is told apart by its epoch (current - 1);
aborting an Empty or completed transaction is allowed (a PREPARE_ABORT with no partitions);
at an exhausted epoch (32766) the next producer id is allocated in PREPARE_* and taken in
COMPLETE_* with epoch 0 (``next_producer_id``, ``previous_producer_id``). Kafka's table
(current = the epoch held, retry = held - 1; NONE = answered without a change, EB = epoch
bump, PF = PRODUCER_FENCED, ITS = INVALID_TXN_STATE)::

                    abort           commit
                    retry  current  retry  current
    Empty           PF     EB       PF     ITS
    CompleteAbort   NONE   EB       ITS    ITS
    CompleteCommit  ITS    EB       NONE   ITS

``verify_partitions`` answers a leader's AddPartitionsToTxn verify_only (KIP-890 part 1):
per partition NONE if it is in the ongoing transaction, else TRANSACTION_ABORTABLE;
INVALID_PRODUCER_ID_MAPPING / PRODUCER_FENCED / CONCURRENT_TRANSACTIONS for all.

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
from spool.records.varint import read_uvarint, write_uvarint

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
    # transaction version 2 (module doc); last_epoch is not persisted (Kafka's lastProducerEpoch)
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_tv: int = 0
    last_epoch: int = -1

    def but(self, **kw) -> TxnMetadata:
        return dataclasses.replace(self, **kw)


# ---- records

def _str(s: str) -> bytes:
    b = s.encode("utf-8")
    return struct.pack(">h", len(b)) + b


def encode_key(txn_id: str) -> bytes:
    return struct.pack(">h", 0) + _str(txn_id)


def _ustr(s: str) -> bytes:
    b = s.encode("utf-8")
    return write_uvarint(len(b) + 1) + b


def encode_value(m: TxnMetadata, version: int = 0) -> bytes:
    """The value record at ``version`` 0 or 1 (module doc)."""
    by_topic: dict[str, list[int]] = {}
    for t, p in sorted(m.partitions):
        by_topic.setdefault(t, []).append(p)
    parts = [struct.pack(">hqhib", version, m.producer_id, m.producer_epoch, m.timeout_ms, m.state)]
    if version == 0:
        parts.append(struct.pack(">i", len(by_topic)))
        for t, ps in by_topic.items():
            parts.append(_str(t) + struct.pack(">i", len(ps))
                         + b"".join(struct.pack(">i", p) for p in ps))
        parts.append(struct.pack(">qq", m.last_update_ms, m.start_ms))
        return b"".join(parts)
    parts.append(write_uvarint(len(by_topic) + 1))
    for t, ps in by_topic.items():
        parts.append(_ustr(t) + write_uvarint(len(ps) + 1)
                     + b"".join(struct.pack(">i", p) for p in ps) + b"\x00")
    parts.append(struct.pack(">qq", m.last_update_ms, m.start_ms))
    tags = []
    if m.previous_producer_id != -1:
        tags.append((0, struct.pack(">q", m.previous_producer_id)))
    if m.next_producer_id != -1:
        tags.append((1, struct.pack(">q", m.next_producer_id)))
    if m.client_tv != 0:
        tags.append((2, struct.pack(">h", m.client_tv)))
    parts.append(write_uvarint(len(tags)))
    for tag, data in tags:
        parts.append(write_uvarint(tag) + write_uvarint(len(data)) + data)
    return b"".join(parts)


def decode_key(buf: bytes) -> str:
    version, n = struct.unpack_from(">hh", buf)
    if version != 0 or n < 0 or 4 + n > len(buf):
        raise ValueError("not a transaction log key")
    return buf[4 : 4 + n].decode("utf-8")


def decode_value(txn_id: str, buf: bytes) -> TxnMetadata:
    try:
        version, pid, epoch, timeout, state = struct.unpack_from(">hqhib", buf)
        if version not in (0, 1):
            raise ValueError(f"transaction log value version {version}")
        extra: dict[str, int] = {}
        partitions: set[tuple[str, int]] = set()
        if version == 0:
            pos = _partitions_v0(buf, 17, partitions)
            last_update, start = struct.unpack_from(">qq", buf, pos)
        else:
            pos = _partitions_v1(buf, 17, partitions)
            last_update, start = struct.unpack_from(">qq", buf, pos)
            n, pos = read_uvarint(buf, pos + 16)
            for _ in range(n):
                tag, pos = read_uvarint(buf, pos)
                size, pos = read_uvarint(buf, pos)
                if tag in (0, 1):
                    name = ("previous_producer_id", "next_producer_id")[tag]
                    extra[name] = struct.unpack_from(">q", buf, pos)[0]
                elif tag == 2:
                    extra["client_tv"] = struct.unpack_from(">h", buf, pos)[0]
                pos += size
    except (struct.error, UnicodeDecodeError, KafkaError) as e:
        raise ValueError(f"bad transaction log value: {e}") from e
    return TxnMetadata(txn_id, pid, epoch, timeout, TxnState(state), frozenset(partitions),
                       last_update, start, **extra)


def _partitions_v0(buf: bytes, pos: int, out: set[tuple[str, int]]) -> int:
    (count,) = struct.unpack_from(">i", buf, pos)
    pos += 4
    for _ in range(max(count, 0)):
        (n,) = struct.unpack_from(">h", buf, pos)
        topic = buf[pos + 2 : pos + 2 + n].decode("utf-8")
        pos += 2 + n
        (k,) = struct.unpack_from(">i", buf, pos)
        pos += 4
        out.update((topic, p) for p in struct.unpack_from(f">{k}i", buf, pos))
        pos += 4 * k
    return pos


def _partitions_v1(buf: bytes, pos: int, out: set[tuple[str, int]]) -> int:
    count, pos = read_uvarint(buf, pos)
    for _ in range(max(count - 1, 0)):
        n, pos = read_uvarint(buf, pos)
        topic = bytes(buf[pos : pos + n - 1]).decode("utf-8")
        pos += n - 1
        k, pos = read_uvarint(buf, pos)
        out.update((topic, p) for p in struct.unpack_from(f">{k - 1}i", buf, pos))
        pos += 4 * (k - 1)
        tags, pos = read_uvarint(buf, pos)
        for _ in range(tags):
            _, pos = read_uvarint(buf, pos)
            size, pos = read_uvarint(buf, pos)
            pos += size
    return pos


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
                         now: int, new_pid, *, tv2: bool = False
                         ) -> tuple[TxnMetadata | None, TxnMetadata]:
        """(abort first: the metadata of the open transaction to abort, or None; then the
        metadata to write). ``new_pid()`` allocates a producer id. ``tv2``: the finalized
        transaction.version is 2 (the fencing abort is a version 2 end: ``_fence``)."""
        self.check_timeout(timeout_ms)
        m = self.txns.get(txn_id)
        if m is None:
            return None, TxnMetadata(txn_id, new_pid(), 0, timeout_ms, S.EMPTY, frozenset(), now, -1)
        if m.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            raise KafkaError(Errors.CONCURRENT_TRANSACTIONS, f"{txn_id} is completing")
        if producer_id >= 0 and not self._may_bump(m, producer_id, epoch):
            raise KafkaError(Errors.PRODUCER_FENCED,
                             f"{txn_id}: producer {producer_id}/{epoch} is not the current one")
        if (producer_id >= 0 and m.state in COMPLETE and epoch == m.last_epoch
                and producer_id == m.producer_id and m.last_epoch != m.producer_epoch):
            return None, m  # KIP-360: a retry of the bump that succeeded (Kafka's lastProducerEpoch)
        abort = None
        if m.state == S.ONGOING:  # fence the previous instance: abort with a bumped epoch
            m = abort = self._fence(m, now, tv2)
            if m.producer_epoch >= MAX_EPOCH - 1:
                m = self._bump(m, new_pid)
        else:
            m = self._bump(m, new_pid)
        last = m.producer_epoch - 1 if producer_id >= 0 and abort is None else -1
        return abort, m.but(state=S.EMPTY, partitions=frozenset(), timeout_ms=timeout_ms,
                            last_update_ms=now, start_ms=-1, last_epoch=last)

    @staticmethod
    def _may_bump(m: TxnMetadata, producer_id: int, epoch: int) -> bool:
        """InitProducerId with a producer id and epoch (KIP-360): Kafka's isValidProducerId
        and prepareIncrementProducerEpoch checks (the current producer at its current or last
        epoch, or the previous producer id at an exhausted epoch)."""
        if producer_id == m.producer_id:
            return epoch in (m.producer_epoch, m.last_epoch)
        return producer_id == m.previous_producer_id and epoch >= MAX_EPOCH - 1

    @staticmethod
    def _bump(m: TxnMetadata, new_pid) -> TxnMetadata:
        if m.producer_epoch >= MAX_EPOCH - 1:
            return m.but(producer_id=new_pid(), producer_epoch=0,
                         previous_producer_id=m.producer_id)
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
                       partitions: set[tuple[str, int]], now: int,
                       client_tv: int = 0) -> TxnMetadata | None:
        """The metadata to write, or None when nothing changes. ``client_tv`` 2: added by a
        transaction version 2 producer (through its partition leader)."""
        m = self._current(txn_id, producer_id, epoch)
        if m.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            raise KafkaError(Errors.CONCURRENT_TRANSACTIONS, f"{txn_id} is completing")
        if m.state == S.ONGOING and partitions <= m.partitions:
            return None
        if m.state == S.ONGOING:
            return m.but(partitions=m.partitions | partitions, last_update_ms=now,
                         client_tv=client_tv)
        return m.but(state=S.ONGOING, partitions=frozenset(partitions), last_update_ms=now,
                     start_ms=now, client_tv=client_tv)

    def verify_partitions(self, txn_id: str, producer_id: int, epoch: int,
                          partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """AddPartitionsToTxn verify_only (module doc): an error code per partition."""
        m = self.txns.get(txn_id)
        code = 0
        if m is None or m.producer_id != producer_id:
            code = Errors.INVALID_PRODUCER_ID_MAPPING
        elif m.producer_epoch != epoch:
            code = Errors.PRODUCER_FENCED
        elif m.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            code = Errors.CONCURRENT_TRANSACTIONS
        if code:
            return {tp: code for tp in partitions}
        return {tp: 0 if tp in m.partitions and m.state == S.ONGOING
                else Errors.TRANSACTION_ABORTABLE for tp in partitions}

    # -- EndTxn

    def end_txn(self, txn_id: str, producer_id: int, epoch: int, commit: bool,
                now: int, *, tv2: bool = False, new_pid=None) -> TxnMetadata | None:
        """PREPARE_COMMIT/PREPARE_ABORT to write, or None for a retried EndTxn already done.
        ``tv2``: EndTxn v5+ (module doc; ``new_pid()`` for an exhausted epoch)."""
        if tv2:
            return self._end_txn_v2(txn_id, producer_id, epoch, commit, now, new_pid)
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

    def _end_txn_v2(self, txn_id: str, producer_id: int, epoch: int, commit: bool, now: int,
                    new_pid) -> TxnMetadata | None:
        m = self.txns.get(txn_id)
        retry_overflow = (m is not None and m.previous_producer_id == producer_id
                          and epoch == MAX_EPOCH - 1 and m.producer_epoch == 0)
        if m is None or (m.producer_id != producer_id and not retry_overflow):
            raise KafkaError(Errors.INVALID_PRODUCER_ID_MAPPING,
                             f"{txn_id} is not mapped to producer {producer_id}")
        retry = retry_overflow or m.producer_epoch == epoch + 1
        if m.state in (S.ONGOING, S.EMPTY):
            valid = epoch == m.producer_epoch
        elif m.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            valid = retry
        else:
            valid = retry or epoch == m.producer_epoch
        if not valid:
            raise KafkaError(Errors.PRODUCER_FENCED,
                             f"{txn_id}: epoch {epoch} is not the current {m.producer_epoch}")
        done = S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT
        if m.state == S.ONGOING:
            return self._prepare_v2(m, S.PREPARE_COMMIT if commit else S.PREPARE_ABORT, now,
                                    new_pid, empty=False)
        if m.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            if m.state == (S.PREPARE_COMMIT if commit else S.PREPARE_ABORT):
                raise KafkaError(Errors.CONCURRENT_TRANSACTIONS,
                                 f"{txn_id} is still writing its markers")
        elif m.state == done and retry:
            return None  # a retry of the EndTxn that completed it
        elif not commit and not retry:  # abort with nothing added (Empty or completed)
            return self._prepare_v2(m, S.PREPARE_ABORT, now, new_pid, empty=True)
        raise KafkaError(Errors.INVALID_TXN_STATE,
                         f"{txn_id} is {m.state.kafka_name}; cannot "
                         f"{'commit' if commit else 'abort'}")

    @staticmethod
    def _prepare_v2(m: TxnMetadata, state: TxnState, now: int, new_pid,
                    *, empty: bool) -> TxnMetadata:
        """Kafka's prepareAbortOrCommit for transaction version 2: the epoch bumped (the next
        producer id allocated when it is exhausted)."""
        nxt = new_pid() if m.producer_epoch >= MAX_EPOCH - 1 and new_pid is not None else -1
        return m.but(state=state, producer_epoch=m.producer_epoch + 1,
                     last_epoch=m.producer_epoch, next_producer_id=nxt, client_tv=2,
                     partitions=frozenset() if empty else m.partitions,
                     start_ms=now if empty else m.start_ms, last_update_ms=now)

    @staticmethod
    def answer_v2(m: TxnMetadata) -> tuple[int, int]:
        """The producer id and epoch an EndTxn v5 answers: the next producer id at epoch 0
        when the epoch was exhausted (the client sees 32766 then 0), else the bumped epoch."""
        if m.next_producer_id >= 0 and m.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return m.next_producer_id, 0
        return m.producer_id, m.producer_epoch

    @staticmethod
    def completed(m: TxnMetadata, now: int) -> TxnMetadata:
        state = S.COMPLETE_COMMIT if m.state == S.PREPARE_COMMIT else S.COMPLETE_ABORT
        if m.client_tv >= 2 and m.next_producer_id >= 0:  # Kafka's prepareComplete (TV2)
            return m.but(state=state, producer_id=m.next_producer_id, producer_epoch=0,
                         previous_producer_id=m.producer_id, next_producer_id=-1,
                         last_update_ms=now)
        return m.but(state=state, last_update_ms=now)

    # -- timers

    @staticmethod
    def _fence(m: TxnMetadata, now: int, tv2: bool) -> TxnMetadata:
        """The PREPARE_ABORT that fences the producer of ``m``'s open transaction (Kafka's
        prepareFenceProducerEpoch, then the end as the finalized transaction.version does
        it: at 2 the end bumps once more, as every version 2 end)."""
        if not tv2:
            return m.but(producer_epoch=min(m.producer_epoch + 1, MAX_EPOCH),
                         state=S.PREPARE_ABORT, last_update_ms=now)
        epoch = min(m.producer_epoch + 2, MAX_EPOCH)
        return m.but(producer_epoch=epoch, last_epoch=epoch - 1, state=S.PREPARE_ABORT,
                     client_tv=2, last_update_ms=now)

    def timed_out(self, now: int, *, tv2: bool = False) -> list[TxnMetadata]:
        """Open transactions past their timeout, as PREPARE_ABORT with a bumped epoch
        (the producer that let it time out is fenced; ``_fence``)."""
        out = []
        for m in self.txns.values():
            if m.state == S.ONGOING and m.start_ms + m.timeout_ms <= now:
                if not tv2 and m.producer_epoch >= MAX_EPOCH - 1:
                    out.append(m.but(state=S.PREPARE_ABORT, last_update_ms=now))
                else:
                    out.append(self._fence(m, now, tv2))
        return out

    def expired(self, now: int, expiration_ms: int) -> list[str]:
        """Completed transactional ids unused for ``transactional.id.expiration.ms``."""
        return [t for t, m in self.txns.items()
                if m.state in COMPLETE and now - m.last_update_ms >= expiration_ms]

    def pending_completion(self) -> list[TxnMetadata]:
        """PREPARE_* transactions (after a crash): their markers must be (re)written."""
        return [m for m in self.txns.values() if m.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT)]
