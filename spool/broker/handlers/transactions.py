"""Transactions: AddPartitionsToTxn (24) 0-5, AddOffsetsToTxn (25) 0-4, EndTxn (26) 0-5,
TxnOffsetCommit (28) 0-5, DescribeTransactions (65) 0, ListTransactions (66) 0-2.

Versions (Kafka 4.2; KIP-890): AddPartitionsToTxn v0-3 come from producers, v4+ from
partition leaders (``spool.broker.txn_verify``): a batch of transactions, each
``verify_only`` (is the partition in the ongoing transaction? part 1) or an add on
behalf of a transaction version 2 producer (part 2), answered per transaction.
EndTxn v5 ends a transaction version 2 transaction: the epoch is bumped and the
answer carries the producer id and epoch the producer goes on with. TxnOffsetCommit
v5 adds the group's offsets partition to the transaction itself (a transaction
version 2 producer sends no AddOffsetsToTxn); below v5 it is verified. AddOffsetsToTxn
v4, TxnOffsetCommit v4, AddPartitionsToTxn v5 only add TRANSACTION_ABORTABLE to the
errors a client may be sent. Which version a client uses is its choice, from the
``transaction.version`` finalized feature (ApiVersions), as Kafka's clients decide.

Each handler hands the request to ``broker.transactions``
(``spool.broker.txn_runtime``), which appends every record the answer
depends on (transaction state, transactional offsets) before returning, so
the response leaves after the append; a failed append is
COORDINATOR_NOT_AVAILABLE and changes nothing. EndTxn is answered once
PREPARE_COMMIT/PREPARE_ABORT is written (as Kafka): normally after the
markers too, but a marker that fails is retried in the background and the
transaction is complete only when every marker is written. Errors are Kafka's:
INVALID_PRODUCER_ID_MAPPING (unknown id or producer), PRODUCER_FENCED (an
older epoch), CONCURRENT_TRANSACTIONS, INVALID_TXN_STATE,
UNKNOWN_TOPIC_OR_PARTITION with OPERATION_NOT_ATTEMPTED for the rest of the
request, TRANSACTIONAL_ID_NOT_FOUND (DescribeTransactions). The internal topics
an operation appends to are awaited first (created in the executor, never on
the loop: ``spool.broker.internal_topic``).

With an authorizer (``spool.broker.authz``), Kafka's checks and answers, before anything
is done: AddPartitionsToTxn v0-3 WRITE on the transactional id (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition) and WRITE on each topic
(internal topics never: TOPIC_AUTHORIZATION_FAILED for those, OPERATION_NOT_ATTEMPTED for
the rest, nothing added); v4+ (brokers) CLUSTER_ACTION on the cluster (else the top-level
CLUSTER_AUTHORIZATION_FAILED). AddOffsetsToTxn WRITE on the transactional id, then READ
on the group (GROUP_AUTHORIZATION_FAILED); EndTxn WRITE on the transactional id;
TxnOffsetCommit WRITE on the transactional id and READ on the group (that error for
every partition), READ on each topic (TOPIC_AUTHORIZATION_FAILED for its partitions).
DescribeTransactions: DESCRIBE on each id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), the
topics it may not DESCRIBE left out; ListTransactions lists the ids it may DESCRIBE.
"""

from __future__ import annotations

import re

from spool.broker.authz import allowed, allowed_cluster, allowed_names
from spool.broker.broker import INTERNAL_TOPICS
from spool.broker.registry import handles
from spool.coordinator.transaction import TxnState
from spool.protocol._generated import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    EndTxnRequest,
    EndTxnResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)
from spool.protocol._generated.add_partitions_to_txn_response import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnResult,
    AddPartitionsToTxnTopicResult,
)
from spool.protocol._generated.describe_transactions_response import TopicData, TransactionState
from spool.protocol._generated.list_transactions_response import TransactionState as ListedState
from spool.protocol._generated.txn_offset_commit_response import (
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)
from spool.protocol.acl import AclOperation, ResourceType
from spool.protocol.errors import Errors, KafkaError


def _may_write_txn(ctx, transactional_id: str) -> bool:
    return allowed(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)


def _txn_refusal(ctx, req: AddPartitionsToTxnRequest, tps: list) -> dict | None:
    """v0-3's checks: the codes to answer with when refused, else None."""
    if ctx.broker.authorizer is None:
        return None
    if not _may_write_txn(ctx, req.v3_and_below_transactional_id):
        return {tp: Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED for tp in tps}
    named = {t for t, _ in tps if t not in INTERNAL_TOPICS}
    writable = allowed_names(ctx, AclOperation.WRITE, ResourceType.TOPIC, named)
    if all(t in writable for t, _ in tps):
        return None
    return {tp: Errors.OPERATION_NOT_ATTEMPTED if tp[0] in writable
            else Errors.TOPIC_AUTHORIZATION_FAILED for tp in tps}


@handles(24, 0, 5)
async def add_partitions_to_txn(ctx, req: AddPartitionsToTxnRequest) -> AddPartitionsToTxnResponse:
    if ctx.api_version >= 4:
        return await _add_partitions_batch(ctx, req)
    tps = [(t.name, p) for t in req.v3_and_below_topics for p in t.partitions]
    codes = _txn_refusal(ctx, req, tps)
    if codes is None:
        await ctx.broker.transactions.topic.ensure()
        codes = await ctx.broker.transactions.add_partitions(
            req.v3_and_below_transactional_id, req.v3_and_below_producer_id,
            req.v3_and_below_producer_epoch, tps)
    by_topic: dict[str, list] = {}
    for (topic, p), code in codes.items():
        by_topic.setdefault(topic, []).append(
            AddPartitionsToTxnPartitionResult(partition_index=p, partition_error_code=code))
    return AddPartitionsToTxnResponse(throttle_time_ms=0, results_by_topic_v3_and_below=[
        AddPartitionsToTxnTopicResult(name=t, results_by_partition=r) for t, r in by_topic.items()])


def _by_topic(codes: dict[tuple[str, int], int]) -> list[AddPartitionsToTxnTopicResult]:
    by_topic: dict[str, list] = {}
    for (topic, p), code in codes.items():
        by_topic.setdefault(topic, []).append(
            AddPartitionsToTxnPartitionResult(partition_index=p, partition_error_code=code))
    return [AddPartitionsToTxnTopicResult(name=t, results_by_partition=r)
            for t, r in by_topic.items()]


async def _add_partitions_batch(ctx, req: AddPartitionsToTxnRequest) -> AddPartitionsToTxnResponse:
    """v4+: from a partition leader, a batch of transactions (module doc)."""
    if not allowed_cluster(ctx, AclOperation.CLUSTER_ACTION):
        return AddPartitionsToTxnResponse(throttle_time_ms=0,
                                          error_code=Errors.CLUSTER_AUTHORIZATION_FAILED,
                                          results_by_transaction=[])
    txns = ctx.broker.transactions
    await txns.topic.ensure()
    results = []
    for t in req.transactions:
        tps = [(topic.name, p) for topic in t.topics for p in topic.partitions]
        if t.verify_only:
            err = txns.topic.coordinator_error(t.transactional_id)
            codes = ({tp: err.code for tp in tps} if err is not None else
                     txns.coordinator.verify_partitions(t.transactional_id, t.producer_id,
                                                        t.producer_epoch, tps))
        else:
            codes = await txns.add_partitions(t.transactional_id, t.producer_id,
                                              t.producer_epoch, tps, client_tv=2)
        results.append(AddPartitionsToTxnResult(transactional_id=t.transactional_id,
                                                topic_results=_by_topic(codes)))
    return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=0,
                                      results_by_transaction=results)


@handles(25, 0, 4)
async def add_offsets_to_txn(ctx, req: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse:
    if not _may_write_txn(ctx, req.transactional_id):
        return AddOffsetsToTxnResponse(throttle_time_ms=0,
                                       error_code=Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not allowed(ctx, AclOperation.READ, ResourceType.GROUP, req.group_id):
        return AddOffsetsToTxnResponse(throttle_time_ms=0,
                                       error_code=Errors.GROUP_AUTHORIZATION_FAILED)
    await ctx.broker.transactions.topic.ensure()
    await ctx.broker.groups.topic.ensure()
    try:
        await ctx.broker.transactions.add_offsets(req.transactional_id, req.producer_id,
                                                  req.producer_epoch, req.group_id)
    except KafkaError as e:
        return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=e.code)
    return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=0)


@handles(26, 0, 5)
async def end_txn(ctx, req: EndTxnRequest) -> EndTxnResponse:
    if not _may_write_txn(ctx, req.transactional_id):
        return EndTxnResponse(throttle_time_ms=0,
                              error_code=Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                              producer_id=-1, producer_epoch=-1)
    await ctx.broker.transactions.topic.ensure()
    try:
        pid, epoch = await ctx.broker.transactions.end_txn(
            req.transactional_id, req.producer_id, req.producer_epoch, req.committed,
            tv2=ctx.api_version >= 5)
    except KafkaError as e:
        return EndTxnResponse(throttle_time_ms=0, error_code=e.code)
    return EndTxnResponse(throttle_time_ms=0, error_code=0, producer_id=pid, producer_epoch=epoch)


@handles(28, 0, 5)
async def txn_offset_commit(ctx, req: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
    broker = ctx.broker
    v = ctx.api_version
    offsets, codes = [], {}
    refusal = readable = None
    if broker.authorizer is not None:
        if not _may_write_txn(ctx, req.transactional_id):
            refusal = Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        elif not allowed(ctx, AclOperation.READ, ResourceType.GROUP, req.group_id):
            refusal = Errors.GROUP_AUTHORIZATION_FAILED
        else:
            readable = allowed_names(ctx, AclOperation.READ, ResourceType.TOPIC,
                                     {t.name for t in req.topics})
    for t in req.topics:
        for p in t.partitions:
            if refusal is not None:
                codes[(t.name, p.partition_index)] = refusal
            elif readable is not None and t.name not in readable:
                codes[(t.name, p.partition_index)] = Errors.TOPIC_AUTHORIZATION_FAILED
            elif 0 <= p.partition_index < broker.partition_count(t.name):
                offsets.append((t.name, p.partition_index, p.committed_offset,
                                p.committed_leader_epoch if v >= 2 else -1, p.committed_metadata))
            else:
                codes[(t.name, p.partition_index)] = Errors.UNKNOWN_TOPIC_OR_PARTITION
    if offsets:
        # v5 may be the transaction's first touch of __consumer_offsets (no AddOffsetsToTxn)
        await broker.transactions.topic.ensure()
        await broker.groups.topic.ensure()
        code = await broker.transactions.txn_offset_commit(
            req.transactional_id, req.group_id, req.producer_id, req.producer_epoch,
            req.generation_id if v >= 3 else -1, req.member_id if v >= 3 else "",
            req.group_instance_id if v >= 3 else None, offsets, version=v)
        for topic, p, *_ in offsets:
            codes[(topic, p)] = code
    by_topic: dict[str, list] = {}
    for (topic, p), code in codes.items():
        by_topic.setdefault(topic, []).append(TxnOffsetCommitResponsePartition(partition_index=p,
                                                                               error_code=code))
    return TxnOffsetCommitResponse(throttle_time_ms=0, topics=[
        TxnOffsetCommitResponseTopic(name=t, partitions=ps) for t, ps in by_topic.items()])


@handles(65, 0, 0)
async def describe_transactions(ctx, req: DescribeTransactionsRequest) -> DescribeTransactionsResponse:
    txns = ctx.broker.transactions.coordinator.txns
    checked = ctx.broker.authorizer is not None
    out = []
    for txn_id in req.transactional_ids:
        if checked and not allowed(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                                   txn_id):
            out.append(TransactionState(
                error_code=Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, transactional_id=txn_id,
                transaction_state="", transaction_timeout_ms=0, transaction_start_time_ms=-1,
                producer_id=-1, producer_epoch=-1, topics=[]))
            continue
        m = txns.get(txn_id)
        if m is None:
            out.append(TransactionState(error_code=Errors.TRANSACTIONAL_ID_NOT_FOUND,
                                        transactional_id=txn_id, transaction_state="",
                                        transaction_timeout_ms=0, transaction_start_time_ms=-1,
                                        producer_id=-1, producer_epoch=-1, topics=[]))
            continue
        by_topic: dict[str, list[int]] = {}
        for t, p in sorted(m.partitions):
            by_topic.setdefault(t, []).append(p)
        if checked:  # only the topics it may describe
            seen = allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, by_topic)
            by_topic = {t: ps for t, ps in by_topic.items() if t in seen}
        out.append(TransactionState(
            error_code=0, transactional_id=txn_id, transaction_state=m.state.kafka_name,
            transaction_timeout_ms=m.timeout_ms, transaction_start_time_ms=m.start_ms,
            producer_id=m.producer_id, producer_epoch=m.producer_epoch,
            topics=[TopicData(topic=t, partitions=ps) for t, ps in by_topic.items()]))
    return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=out)


@handles(66, 0, 2)
async def list_transactions(ctx, req: ListTransactionsRequest) -> ListTransactionsResponse:
    """Transactions this broker coordinates, filtered by state, producer id, duration (v1+,
    Ongoing ones running at least that long) and transactional id pattern (v2+, KIP-1152: a
    regular expression the whole id must match; empty or null: no filter; one that does not
    compile: INVALID_REGULAR_EXPRESSION)."""
    pattern = None
    if ctx.api_version >= 2 and req.transactional_id_pattern:
        try:
            pattern = re.compile(req.transactional_id_pattern)
        except re.error:
            return ListTransactionsResponse(throttle_time_ms=0,
                                            error_code=Errors.INVALID_REGULAR_EXPRESSION,
                                            unknown_state_filters=[], transaction_states=[])
    txns = ctx.broker.transactions.coordinator.txns
    states = set(req.state_filters or [])
    known = {s.kafka_name for s in TxnState}
    unknown = sorted(states - known)
    pids = set(req.producer_id_filters or [])
    now = ctx.broker.clock.now_ms()
    duration = req.duration_filter if ctx.api_version >= 1 else -1
    out = []
    checked = ctx.broker.authorizer is not None
    for txn_id, m in sorted(txns.items()):
        if checked and not allowed(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                                   txn_id):
            continue
        if states and m.state.kafka_name not in states:
            continue
        if pids and m.producer_id not in pids:
            continue
        if pattern is not None and pattern.fullmatch(txn_id) is None:
            continue
        if duration is not None and duration >= 0 and (
                m.state != TxnState.ONGOING or now - m.start_ms < duration):
            continue
        out.append(ListedState(transactional_id=txn_id, producer_id=m.producer_id,
                               transaction_state=m.state.kafka_name))
    return ListTransactionsResponse(throttle_time_ms=0, error_code=0,
                                    unknown_state_filters=unknown, transaction_states=out)
