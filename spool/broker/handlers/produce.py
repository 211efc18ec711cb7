"""Produce (0): validate each partition's batch, append it, answer per partition.

Advertised from v0 (old librdkafka stops compressing otherwise) but served
from v3: a v0-2 request gets UNSUPPORTED_VERSION for every partition, as
Kafka 4 does. Bad records never drop the connection: each partition gets
its own error code (CORRUPT_MESSAGE, INVALID_RECORD, MESSAGE_TOO_LARGE,
UNSUPPORTED_FOR_MESSAGE_FORMAT, INVALID_TIMESTAMP...). A batch refused for some
of its records (a null key on a compacted topic, a timestamp out of range:
``spool.storage.record_checks``) names them in ``record_errors`` (KIP-467, v8+), so a
client fails those and sends the others again. As Kafka: lastOffsetDelta
must be recordsCount - 1, and an uncompressed batch must hold exactly
recordsCount records (INVALID_RECORD); a compressed batch is counted when it
claims more records than it has bytes, or when it is inflated anyway (a
compacted topic's key check, where a mismatch is CORRUPT_MESSAGE). acks=0 gets no
response at all; when any partition of it failed, the connection is closed instead (as
Kafka: the producer learns something went wrong and refreshes its metadata). A storage
failure (a full disk) is KAFKA_STORAGE_ERROR for that partition; the connection stays
and a later produce succeeds once space returns. When ``flush.messages`` is reached the
fsync runs in the executor, not on the event loop, and the answer waits for it.

The append goes through the partition's leader (``broker.replicas``,
``spool.replica``): acks=all with an ISR smaller than the topic's
``min.insync.replicas`` is NOT_ENOUGH_REPLICAS, nothing appended (acks=0 and
acks=1 ignore the setting, as in Kafka); acks=all then answers once every ISR
member has the batch (the high watermark passed it): a delayed produce bounded
by the request's ``timeout_ms`` (REQUEST_TIMED_OUT), NOT_LEADER_OR_FOLLOWER if
leadership moves meanwhile, NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank
below ``min.insync.replicas``. On a single node the ISR is the leader alone and
the high watermark follows each append: acks=all answers at once.

Transactional batches (KIP-890, ``transactional_verification``): before the first
batch of a producer's transaction is appended to a partition, the transaction
coordinator is asked (``spool.broker.txn_verify``) whether the partition is in the
transaction (v3-11, when ``transaction.partition.verification.enable``), or the
partition is added to it (v12+: a transaction version 2 producer sends no
AddPartitionsToTxn; always). A partition that is not in it is refused, nothing
appended: INVALID_TXN_STATE (v3-10) or TRANSACTION_ABORTABLE (v11+), so no batch
the coordinator does not know of can hang open and hold the LSO. The
coordinator's other answers map as Kafka's do: PRODUCER_FENCED is
INVALID_PRODUCER_EPOCH; a coordinator that cannot be asked (NETWORK_EXCEPTION,
COORDINATOR_LOAD_IN_PROGRESS / NOT_AVAILABLE, NOT_COORDINATOR) is
NOT_ENOUGH_REPLICAS (retriable, and no metadata refresh), as is
CONCURRENT_TRANSACTIONS below v12; at v12+ CONCURRENT_TRANSACTIONS is retried
every ``add.partitions.to.txn.retry.backoff.ms`` for up to
``add.partitions.to.txn.retry.backoff.max.ms`` and then answered as it is. The
append then checks the verification's guard (``spool.storage.producer_state``): a
marker written meanwhile voids it.

v13 names topics by ID (KIP-516), in the request and the response: an ID the broker's view
does not know is UNKNOWN_TOPIC_ID for each of its partitions, nothing appended, and so is a
partition whose replica belongs to another topic of the same name (deleted and created again
while the request waited for its transaction's coordinator), as Kafka's
getPartitionOrException answers a topic ID that does not match the one on disk.

With an authorizer (``spool.broker.authz``; without one the request pays one attribute
test), checked first, as Kafka's ``handleProduceRequest``: a request carrying a
transactional batch needs WRITE on its transactional id (none, or refused: every
partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED, nothing appended); each topic needs
WRITE, else TOPIC_AUTHORIZATION_FAILED for its partitions, also for a topic that does not
exist (its existence is not disclosed), and its batches are neither verified with the
transaction coordinator nor appended. acks=0 closes the connection on a refusal too.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid

from spool.broker.authz import allowed, allowed_names
from spool.broker.registry import handles
from spool.broker.server import CloseConnection
from spool.protocol._generated import ProduceRequest, ProduceResponse
from spool.protocol._generated.produce_response import (
    BatchIndexAndErrorMessage,
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionProduceResponse,
    TopicProduceResponse,
)
from spool.protocol.acl import AclOperation, ResourceType
from spool.protocol.errors import Errors, KafkaError, error_name
from spool.records.batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    TRANSACTIONAL_MASK,
    BatchHeader,
    validate_batch,
)
from spool.records.record import check_record_count
from spool.replica.partition import NotLeader
from spool.storage.producer_state import ONGOING
from spool.storage.record_checks import RecordErrors, check_records, needs_record_checks

log = logging.getLogger("spool.produce")

MIN_SERVED_VERSION = 3


_NO_LEADER = LeaderIdAndEpoch()  # the answers that name no leader share it (never mutated)
_NO_RECORD_ERRORS = ()  # likewise; an answer naming failed records gets its own list


def append_topic(
    broker, topic: str, partition_data: list, now_ms: int, acks: int, pending: list,
    appended: list, guards: dict, refused: dict, topic_id: uuid.UUID | None = None,
) -> tuple[list[PartitionProduceResponse], bool]:
    """Validate and append each partition's batch of one topic, in one pass: (the answers,
    whether one is NOT_LEADER_OR_FOLLOWER). A partition in ``refused`` (its transaction's
    verification) is answered with that error. A due ``flush.messages`` fsync is left to the
    caller: each appended partition goes into ``appended`` as (topic, answer, log)
    (``flush_due_partitions``). An acks=-1 batch not yet replicated goes into ``pending`` as
    (topic, answer, last offset): the caller waits for it (``wait_replicated``). With
    ``topic_id`` (v13) a replica of another topic ID is UNKNOWN_TOPIC_ID."""
    replicas = broker.replicas
    leader_partition = replicas.leader_partition
    append_as_leader = replicas.append_as_leader
    stats = None  # BrokerTopicMetrics (spool.broker.metrics), once a partition is found
    out = []
    not_leader = False
    for p in partition_data:
        index = p.index
        if refused and (topic, index) in refused:
            code, message = refused[(topic, index)]
            out.append(PartitionProduceResponse(index, code, -1, -1, -1, _NO_RECORD_ERRORS,
                                                message, _NO_LEADER))
            continue
        records = p.records
        resp = PartitionProduceResponse(index, 0, -1, -1, -1, _NO_RECORD_ERRORS, None, _NO_LEADER)
        out.append(resp)
        counted = None
        try:
            part = leader_partition(topic, index)
            if stats is None:
                stats = broker.metrics.topic(topic)
            counted = stats
            stats.total_produce_requests += 1
            if topic_id is not None and part.topic_id is not None and part.topic_id != topic_id:
                raise KafkaError(Errors.UNKNOWN_TOPIC_ID,
                                 f"{topic}-{index} is not of topic id {topic_id}")
            if records is None or len(records) == 0:
                raise KafkaError(Errors.INVALID_RECORD, "produce request without records")
            plog = part.log
            cfg = plog.config
            header = validate_batch(records, 0, max_size=cfg.max_message_bytes)
            if header.batch_length + LOG_OVERHEAD != len(records):
                raise KafkaError(Errors.INVALID_RECORD,
                                 "a produce request must carry exactly one record batch per "
                                 "partition")
            check_record_count(records, 0, header)
            if header.producer_id >= 0 and header.base_sequence < 0:
                raise KafkaError(Errors.INVALID_RECORD, "a batch with a producer id needs a sequence")
            if needs_record_checks(cfg, header, now_ms):  # keys, timestamps: most topics skip it
                check_records(records, cfg, now_ms, f"{topic}-{index}")
            append_time = now_ms if cfg.uses_log_append_time else None
            info = append_as_leader(part, records, acks=acks, now_ms=now_ms,
                                    log_append_time_ms=append_time, flush=False,
                                    verification_guard=guards.get((topic, index)) if guards
                                    else None)
        except NotLeader as e:
            resp.error_code = e.code
            resp.error_message = e.message
            resp.current_leader = LeaderIdAndEpoch(leader_id=e.leader, leader_epoch=e.leader_epoch)
            not_leader = True
            continue
        except RecordErrors as e:
            _refused_records(resp, e, part.log.log_start_offset)
            stats.failed_produce_requests += 1
            continue
        except KafkaError as e:
            resp.error_code = e.code
            resp.error_message = e.message
            if counted is not None:
                _count_failure(counted, e.code, records)
            continue
        except OSError as e:  # storage failed (a full disk): this partition's error only
            log.warning("produce to %s-%d failed: %s", topic, index, e)
            resp.error_code = Errors.KAFKA_STORAGE_ERROR
            resp.error_message = str(e)
            continue
        stats.messages_in += info.num_records
        stats.bytes_in += info.size
        resp.base_offset = info.first_offset
        if append_time is not None:
            resp.log_append_time_ms = append_time
        resp.log_start_offset = plog.log_start_offset
        if acks == -1:  # a single node: done at once (the ISR is this broker)
            done, code = part.replication_status(info.last_offset + 1)
            if not done:
                pending.append((topic, resp, info.last_offset))
            elif code:
                resp.error_code = code
                continue
        appended.append((topic, resp, plog))
    return out, not_leader


# Not counted as failed produce requests (Kafka's appendToLocalLog: these are expected;
# the metric is for a broker failing to handle a produce)
_EXPECTED_PRODUCE_ERRORS = frozenset({
    Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.NOT_LEADER_OR_FOLLOWER, Errors.MESSAGE_TOO_LARGE,
    Errors.RECORD_LIST_TOO_LARGE, Errors.CORRUPT_MESSAGE, Errors.KAFKA_STORAGE_ERROR})


def _count_failure(stats, code: int, records) -> None:
    if code == Errors.MESSAGE_TOO_LARGE:  # Kafka's BytesRejectedPerSec
        stats.bytes_rejected += len(records) if records is not None else 0
    elif code not in _EXPECTED_PRODUCE_ERRORS:
        stats.failed_produce_requests += 1


def _refused_records(resp: PartitionProduceResponse, e: RecordErrors, log_start: int) -> None:
    """KIP-467: the batch is refused, and the answer names each failed record (v8+)."""
    resp.error_code = e.code
    resp.error_message = e.message
    resp.log_start_offset = log_start
    resp.record_errors = [BatchIndexAndErrorMessage(batch_index=r.batch_index,
                                                    batch_index_error_message=r.message)
                          for r in e.errors]


async def wait_replicated(broker, pending: list, timeout_ms: int) -> None:
    """The delayed produce: each pending partition answers once replicated, or with the
    error that ended its wait (module doc)."""
    async def one(topic: str, resp: PartitionProduceResponse, last_offset: int) -> None:
        try:
            await broker.replicas.wait_replicated(topic, resp.index, last_offset, timeout_ms)
        except KafkaError as e:
            resp.error_code = e.code
            resp.error_message = e.message

    if len(pending) == 1:
        await one(*pending[0])
    else:
        await asyncio.gather(*(one(*p) for p in pending))


async def flush_due_partitions(broker, appended: list) -> None:
    """``flush.messages`` reached: fsync in the executor (not on the event loop); the
    answer waits for it, and a failed fsync is KAFKA_STORAGE_ERROR for the partition.
    ``appended``: (topic, answer, the log appended to)."""
    for topic, part, appended_to in appended:
        if not appended_to.flush_due():
            continue
        try:
            plog = broker.get_log(topic, part.index)
        except KafkaError:  # deleted meanwhile: nothing left to flush
            continue
        if not plog.flush_due():
            continue
        try:
            await broker.run_blocking(plog.flush)
        except OSError as e:
            log.warning("flush of %s-%d failed: %s", topic, part.index, e)
            part.error_code = Errors.KAFKA_STORAGE_ERROR
            part.error_message = f"flush failed: {e}"


TOPIC_IDS_VERSION = 13  # KIP-516: topics by ID


def _unknown_topic_id(p) -> PartitionProduceResponse:
    return PartitionProduceResponse(index=p.index, error_code=Errors.UNKNOWN_TOPIC_ID,
                                    base_offset=-1, log_append_time_ms=-1, log_start_offset=-1)


@handles(0, 0, 13)
async def produce(ctx, req: ProduceRequest) -> ProduceResponse | None:
    broker = ctx.broker
    version = ctx.api_version
    now_ms = broker.clock.now_ms()
    by_id = version >= TOPIC_IDS_VERSION
    if by_id:  # each topic's name, once: None for an unknown ID
        name_of = broker.view.topic_name
        names = {id(t): name_of(t.topic_id) for t in req.topic_data}
        topic_name = lambda t: names[id(t)]  # noqa: E731
    else:
        topic_name = None
    denied: set[str] = set()
    if broker.authorizer is not None and version >= MIN_SERVED_VERSION:
        if _has_transactional_records(req) and (
                req.transactional_id is None or not allowed(
                    ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id)):
            return _refuse_all(ctx, req, Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, topic_name)
        named = {topic_name(t) if by_id else t.name for t in req.topic_data} - {None}
        denied = named - allowed_names(ctx, AclOperation.WRITE, ResourceType.TOPIC, named)
        if denied:  # not verified with the coordinator either
            plain = topic_name or (lambda t: t.name)
            topic_name = lambda t: None if plain(t) in denied else plain(t)  # noqa: E731
    refused, guards = {}, {}
    if version >= MIN_SERVED_VERSION and req.acks in (0, 1, -1):
        refused, guards = await transactional_verification(broker, req, version, now_ms,
                                                           topic_name)
    topics = []
    appended: list = []
    pending: list = []
    any_not_leader = False
    for t in req.topic_data:
        name = names[id(t)] if by_id else t.name
        if by_id and name is None:
            topics.append(TopicProduceResponse(topic_id=t.topic_id, partition_responses=[
                _unknown_topic_id(p) for p in t.partition_data]))
            continue
        if denied and name in denied:  # (refused before anything else is looked at)
            topics.append(TopicProduceResponse(
                name=name, topic_id=t.topic_id, partition_responses=[
                    _refused_partition(p, Errors.TOPIC_AUTHORIZATION_FAILED)
                    for p in t.partition_data]))
            continue
        if version < MIN_SERVED_VERSION:
            parts = [PartitionProduceResponse(index=p.index, error_code=Errors.UNSUPPORTED_VERSION)
                     for p in t.partition_data]
        elif req.acks not in (0, 1, -1):
            parts = [PartitionProduceResponse(index=p.index,
                                              error_code=Errors.INVALID_REQUIRED_ACKS)
                     for p in t.partition_data]
        else:
            parts, not_leader = append_topic(broker, name, t.partition_data, now_ms, req.acks,
                                             pending, appended, guards, refused,
                                             t.topic_id if by_id else None)
            any_not_leader = any_not_leader or not_leader
        topics.append(TopicProduceResponse(name=name, topic_id=t.topic_id,
                                           partition_responses=parts))
    if pending:  # parked: the request's frame is not needed any more (see _release_records)
        _release_records(req)
    await flush_due_partitions(broker, appended)
    if pending:  # the delayed produce: RequestMetrics' remote time
        waited = time.perf_counter()
        await wait_replicated(broker, pending, req.timeout_ms)
        ctx.timer.remote_s += time.perf_counter() - waited
    if req.acks == 0:
        _close_if_failed(ctx, topics)
        return None
    return ProduceResponse(responses=topics, throttle_time_ms=0,
                           node_endpoints=_leader_endpoints(ctx, topics)
                           if version >= 10 and any_not_leader else [])


def _release_records(req: ProduceRequest) -> None:
    """Drop the request's views of its frame once every batch is appended, so a delayed
    produce (acks=-1, parked until the followers have the batches) does not hold its
    ~1 MB frame: with hundreds parked, every new frame was fresh memory (page faults in
    the receive, ~10% of an RF=3 leader's CPU) instead of the one just freed."""
    for t in req.topic_data:
        for p in t.partition_data:
            p.records = None


def _has_transactional_records(req: ProduceRequest) -> bool:
    """Whether any partition's batch is transactional (Kafka's
    ``RequestUtils.hasTransactionalRecords``), from the attributes byte alone."""
    return any(p.records is not None and len(p.records) >= HEADER_SIZE
               and p.records[_ATTRIBUTES_LOW] & TRANSACTIONAL_MASK
               for t in req.topic_data for p in t.partition_data)


def _refused_partition(p, code: int) -> PartitionProduceResponse:
    return PartitionProduceResponse(index=p.index, error_code=code, base_offset=-1,
                                    log_append_time_ms=-1, log_start_offset=-1)


def _refuse_all(ctx, req: ProduceRequest, code: int, topic_name) -> ProduceResponse | None:
    """Every partition refused with ``code``, nothing appended (Kafka's error response);
    acks=0 closes the connection instead."""
    topics = [TopicProduceResponse(name=topic_name(t) if topic_name else t.name,
                                   topic_id=t.topic_id,
                                   partition_responses=[_refused_partition(p, code)
                                                        for p in t.partition_data])
              for t in req.topic_data]
    if req.acks == 0:
        _close_if_failed(ctx, topics)
    return ProduceResponse(responses=topics, throttle_time_ms=0)


def _close_if_failed(ctx, topics) -> None:
    """acks=0 gets no answer, so a failure closes the connection: the producer then
    refreshes its metadata (Kafka's ``KafkaApis.handleProduceRequest``)."""
    failed = [f"{t.name}-{p.index}: {error_name(p.error_code)}"
              for t in topics for p in t.partition_responses if p.error_code]
    if failed:
        raise CloseConnection(f"produce with acks=0 (correlation id "
                              f"{ctx.header.correlation_id}) failed: {', '.join(failed)}")


def _leader_endpoints(ctx, topics) -> list[NodeEndpoint]:
    """KIP-951: the endpoints of the leaders named in NOT_LEADER_OR_FOLLOWER answers."""
    leaders = {p.current_leader.leader_id for t in topics for p in t.partition_responses
               if p.error_code == Errors.NOT_LEADER_OR_FOLLOWER}
    view = ctx.broker.view
    listener = ctx.listener_name
    return [NodeEndpoint(node_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
            for b in (view.broker(n, listener) for n in sorted(leaders) if n >= 0) if b]


# ---- KIP-890: transactional batches (module doc)

_ATTRIBUTES_LOW = 22  # the low byte of a batch's attributes (int16 at offset 21)
_RETRIABLE_VERIFICATION = frozenset({Errors.NETWORK_EXCEPTION, Errors.COORDINATOR_LOAD_IN_PROGRESS,
                                     Errors.COORDINATOR_NOT_AVAILABLE, Errors.NOT_COORDINATOR})


def _transactional_batches(broker, req: ProduceRequest, now_ms: int, topic_name):
    """(topic, partition) -> (producer id, epoch, guard) for each partition whose batch is
    transactional and led here; the guard is ONGOING when no verification is needed or
    none can be made (no transactional id: the append admits only an open transaction)."""
    found = {}
    for t in req.topic_data:
        name = topic_name(t)
        if not name:
            continue  # an unknown topic (id): nothing is appended to it
        for p in t.partition_data:
            records = p.records
            if records is None or len(records) < HEADER_SIZE or not (
                    records[_ATTRIBUTES_LOW] & TRANSACTIONAL_MASK):
                continue  # the common case, without parsing the header
            h = BatchHeader.parse(records)
            if not h.is_transactional or h.is_control or h.producer_id < 0:
                continue
            try:
                plog = broker.replicas.leader_partition(name, p.index).log
            except (NotLeader, KafkaError):
                continue  # append_topic answers it
            guard = ONGOING if req.transactional_id is None else (
                plog.start_transaction_verification(h.producer_id, h.base_sequence,
                                                    h.producer_epoch, now_ms))
            found[(name, p.index)] = (h.producer_id, h.producer_epoch, guard)
    return found


async def transactional_verification(broker, req: ProduceRequest, version: int, now_ms: int,
                                     topic_name=None) -> tuple[dict, dict]:
    """Verify (v3-11) or add (v12+) the partitions whose transactional batch starts the
    producer's transaction here: (refused: (topic name, p) -> (code, message), guards to
    append with: (topic name, p) -> guard). ``topic_name(topic_data)``: the topic's name
    (v13 names topics by id), by default its ``name``."""
    add = version >= 12
    if not (add or broker.config.get_bool("transaction.partition.verification.enable")):
        return {}, {}
    found = _transactional_batches(broker, req, now_ms, topic_name or (lambda t: t.name))
    if not found:
        return {}, {}
    guards = {tp: guard for tp, (_, _, guard) in found.items()}
    producers = {(pid, epoch) for pid, epoch, _ in found.values()}
    if len(producers) > 1:
        msg = "Transactional records contained more than one producer ID"
        return {tp: (Errors.INVALID_PRODUCER_ID_MAPPING, msg) for tp in found}, guards
    ((pid, epoch),) = producers
    todo = [tp for tp, (_, _, guard) in found.items() if guard is not ONGOING]
    if not todo:
        return {}, guards
    codes = await _ask_coordinator(broker, req.transactional_id, pid, epoch, todo, add)
    refused = {}
    for tp, code in codes.items():
        if code:
            refused[tp] = _verification_error(code, version)
    return refused, guards


async def _ask_coordinator(broker, txn_id: str, pid: int, epoch: int, todo: list,
                           add: bool) -> dict:
    """The coordinator's codes; for an add, CONCURRENT_TRANSACTIONS is retried (Kafka: the
    produce is costly to retry, and an EndTxn's markers commonly cause it)."""
    verifier = broker.transactions.verifier
    codes = await verifier.add_or_verify(txn_id, pid, epoch, todo, verify_only=not add)
    if not add:
        return codes
    cfg = broker.config
    backoff = cfg.get_int("add.partitions.to.txn.retry.backoff.ms")
    deadline = broker.clock.now_ms() + min(cfg.get_int("add.partitions.to.txn.retry.backoff.max.ms"),
                                           cfg.get_int("request.timeout.ms"))
    while (any(c == Errors.CONCURRENT_TRANSACTIONS for c in codes.values())
           and broker.clock.now_ms() < deadline):
        await asyncio.sleep(backoff / 1000.0)
        codes = await verifier.add_or_verify(txn_id, pid, epoch, todo, verify_only=False)
    return codes


def _verification_error(code: int, version: int) -> tuple[int, str | None]:
    """A coordinator's code as the producer of ``version`` is answered (module doc)."""
    if code == Errors.PRODUCER_FENCED:
        return Errors.INVALID_PRODUCER_EPOCH, None
    if code == Errors.TRANSACTION_ABORTABLE and version <= 10:
        code = Errors.INVALID_TXN_STATE
    if code == Errors.INVALID_TXN_STATE:
        return code, "Partition was not added to the transaction"
    if code in _RETRIABLE_VERIFICATION or (code == Errors.CONCURRENT_TRANSACTIONS and version < 12):
        return Errors.NOT_ENOUGH_REPLICAS, (
            "Unable to verify the partition has been added to the transaction. "
            f"Underlying error: {error_name(code)}")
    return code, None
