"""KIP-890 on a single node, spoken with a raw protocol client (no Java client here).

Part 2 (transaction version 2): partitions added by Produce v12 itself, EndTxn v5
bumping the epoch at every commit and abort and answering it, a zombie of an older epoch
fenced. Part 1 (verification): a transactional batch for a partition never added to the
transaction is refused (INVALID_TXN_STATE / TRANSACTION_ABORTABLE by version) and leaves
no open transaction holding the partition's last stable offset.
"""

from __future__ import annotations

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from spool.protocol._generated import (
    AddPartitionsToTxnRequest,
    ApiVersionsRequest,
    DescribeProducersRequest,
    DescribeTransactionsRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    ListOffsetsRequest,
    MetadataRequest,
    OffsetFetchRequest,
    ProduceRequest,
    TxnOffsetCommitRequest,
    UpdateFeaturesRequest,
    WriteTxnMarkersRequest,
)
from spool.protocol._generated.add_partitions_to_txn_request import AddPartitionsToTxnTopic
from spool.protocol._generated.describe_producers_request import TopicRequest
from spool.protocol._generated.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from spool.protocol._generated.metadata_request import MetadataRequestTopic
from spool.protocol._generated.produce_request import PartitionProduceData, TopicProduceData
from spool.protocol._generated.txn_offset_commit_request import (
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from spool.protocol._generated.update_features_request import FeatureUpdateKey
from spool.protocol._generated.write_txn_markers_request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
)
from spool.protocol.errors import Errors
from spool.records.builder import BatchBuilder
from spool.records.record import iter_records
from spool.storage.config import LogConfig
from spool.storage.log import PartitionLog
from tests.helpers.broker_proc import BrokerProcess
from tests.helpers.consume import consume_values
from tests.helpers.raw_client import RawClient

READ_COMMITTED = 1


def committed_values(bootstrap: str, topic: str, partitions: int, want: int) -> list[bytes]:
    return consume_values({"bootstrap.servers": bootstrap, "group.id": "tv2-reader",
                           "enable.auto.commit": False, "isolation.level": "read_committed"},
                          topic, partitions, want, wait_s=5.0)


def create(bootstrap: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions)])[topic].result(10)


def init(rc: RawClient, txn_id: str) -> tuple[int, int]:
    resp = rc.request(22, 5, InitProducerIdRequest(transactional_id=txn_id,
                                                   transaction_timeout_ms=60_000))
    assert resp.error_code == 0
    return resp.producer_id, resp.producer_epoch


def batch(pid: int, epoch: int, seq: int, *values: bytes) -> bytes:
    b = BatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                     is_transactional=True)
    for v in values:
        b.append(None, v, timestamp=0)
    return bytes(b.build())


def produce(rc: RawClient, version: int, txn_id: str | None, topic: str, partition: int,
            records: bytes, topic_id=None):
    """One partition's Produce; v13 names the topic by ``topic_id``."""
    data = (TopicProduceData(topic_id=topic_id) if version >= 13 else TopicProduceData(name=topic))
    data.partition_data = [PartitionProduceData(index=partition, records=records)]
    req = ProduceRequest(transactional_id=txn_id, acks=-1, timeout_ms=10_000, topic_data=[data])
    return rc.request(0, version, req).responses[0].partition_responses[0]


def topic_id_of(rc: RawClient, topic: str):
    md = rc.request(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name=topic)],
                                           allow_auto_topic_creation=False))
    return md.topics[0].topic_id


def end(rc: RawClient, txn_id: str, pid: int, epoch: int, commit: bool, version: int = 5):
    return rc.request(26, version, EndTxnRequest(transactional_id=txn_id, producer_id=pid,
                                                 producer_epoch=epoch, committed=commit))


def describe(rc: RawClient, txn_id: str):
    return rc.request(65, 0, DescribeTransactionsRequest(transactional_ids=[txn_id])
                      ).transaction_states[0]


def offsets(rc: RawClient, topic: str, partition: int) -> tuple[int, int]:
    """(last stable offset, high watermark) of the partition."""
    out = []
    for isolation in (READ_COMMITTED, 0):
        req = ListOffsetsRequest(replica_id=-1, isolation_level=isolation, topics=[
            ListOffsetsTopic(name=topic, partitions=[
                ListOffsetsPartition(partition_index=partition, timestamp=-1)])])
        out.append(rc.request(2, 5, req).topics[0].partitions[0].offset)
    return out[0], out[1]


def test_v2_transaction_adds_partitions_by_produce_and_bumps_the_epoch(broker, topic_name):
    create(broker.bootstrap, topic_name)
    txn = f"tv2-{topic_name}"
    rc = RawClient(broker.bootstrap)
    try:
        pid, epoch = init(rc, txn)
        # no AddPartitionsToTxn: Produce v12 adds the partition
        r = produce(rc, 12, txn, topic_name, 0, batch(pid, epoch, 0, b"c1", b"c2"))
        assert r.error_code == 0
        state = describe(rc, txn)
        assert state.transaction_state == "Ongoing"
        assert [(t.topic, list(t.partitions)) for t in state.topics] == [(topic_name, [0])]
        committed = end(rc, txn, pid, epoch, commit=True)
        assert (committed.error_code, committed.producer_id, committed.producer_epoch) == (
            0, pid, epoch + 1)
        # a retry of that EndTxn (the old epoch) is answered as done, with the same identity
        again = end(rc, txn, pid, epoch, commit=True)
        assert (again.error_code, again.producer_id, again.producer_epoch) == (0, pid, epoch + 1)

        # the next transaction runs at the new epoch, its sequences from 0; Produce v13
        # (the topic by id) adds its partition too
        r = produce(rc, 13, txn, topic_name, 0, batch(pid, epoch + 1, 0, b"a1"),
                    topic_id=topic_id_of(rc, topic_name))
        assert r.error_code == 0
        assert describe(rc, txn).transaction_state == "Ongoing"
        aborted = end(rc, txn, pid, epoch + 1, commit=False)
        assert (aborted.error_code, aborted.producer_epoch) == (0, epoch + 2)
        # aborting with nothing added is allowed at TV2 and bumps the epoch again
        empty = end(rc, txn, pid, epoch + 2, commit=False)
        assert (empty.error_code, empty.producer_epoch) == (0, epoch + 3)
        assert describe(rc, txn).producer_epoch == epoch + 3

        # a zombie of an older epoch is fenced, at the coordinator and at the partition
        zombie = produce(rc, 12, txn, topic_name, 0, batch(pid, epoch + 1, 1, b"zombie"))
        assert zombie.error_code == Errors.INVALID_PRODUCER_EPOCH
        assert end(rc, txn, pid, epoch + 1, commit=True).error_code == Errors.PRODUCER_FENCED
        lso, hw = offsets(rc, topic_name, 0)
        assert lso == hw  # nothing left open
    finally:
        rc.close()
    assert committed_values(broker.bootstrap, topic_name, 1, 2) == [b"c1", b"c2"]


def test_a_late_marker_does_not_close_the_next_transaction(broker, topic_name):
    """KIP-890: a transaction version 2 commit writes its markers at the bumped epoch, the
    epoch the producer's next transaction runs at; a late or repeated marker of that
    commit (WriteTxnMarkers v2, transaction_version 2, as the coordinator resends it) is
    INVALID_PRODUCER_EPOCH and leaves the next transaction open."""
    create(broker.bootstrap, topic_name)
    txn = f"late-{topic_name}"
    rc = RawClient(broker.bootstrap)
    try:
        pid, epoch = init(rc, txn)
        assert produce(rc, 12, txn, topic_name, 0, batch(pid, epoch, 0, b"first")).error_code == 0
        assert end(rc, txn, pid, epoch, commit=True).producer_epoch == epoch + 1
        assert produce(rc, 12, txn, topic_name, 0,
                       batch(pid, epoch + 1, 0, b"next")).error_code == 0
        assert offsets(rc, topic_name, 0) == (2, 3)  # "next" (offset 2) is open

        def marker(tv: int):
            return rc.request(27, 2, WriteTxnMarkersRequest(markers=[WritableTxnMarker(
                producer_id=pid, producer_epoch=epoch + 1, transaction_result=False,
                coordinator_epoch=0, transaction_version=tv,
                topics=[WritableTxnMarkerTopic(name=topic_name, partition_indexes=[0])])])
            ).markers[0].topics[0].partitions[0].error_code

        assert marker(2) == Errors.INVALID_PRODUCER_EPOCH
        assert offsets(rc, topic_name, 0) == (2, 3)  # still open: nothing aborted it
        assert end(rc, txn, pid, epoch + 1, commit=True).error_code == 0
    finally:
        rc.close()
    assert committed_values(broker.bootstrap, topic_name, 1, 2) == [b"first", b"next"]


def test_a_batch_for_a_partition_never_added_is_refused(broker, topic_name):
    """KIP-890 part 1: the hanging transaction it prevents (a transactional batch the
    coordinator does not know of would hold the LSO forever: no marker would close it)."""
    create(broker.bootstrap, topic_name, partitions=2)
    txn = f"hang-{topic_name}"
    rc = RawClient(broker.bootstrap)
    try:
        pid, epoch = init(rc, txn)
        add = rc.request(24, 3, AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=txn, v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[AddPartitionsToTxnTopic(name=topic_name, partitions=[0])]))
        assert add.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
        assert produce(rc, 9, txn, topic_name, 0, batch(pid, epoch, 0, b"in")).error_code == 0
        # partition 1 was never added: refused, with each version's code
        stray = produce(rc, 9, txn, topic_name, 1, batch(pid, epoch, 0, b"stray"))
        assert stray.error_code == Errors.INVALID_TXN_STATE
        assert produce(rc, 11, txn, topic_name, 1, batch(pid, epoch, 0, b"stray")).error_code == (
            Errors.TRANSACTION_ABORTABLE)
        # without a transactional id nothing can be verified: refused too
        assert produce(rc, 9, None, topic_name, 1, batch(pid, epoch, 0, b"stray")).error_code == (
            Errors.INVALID_TXN_STATE)
        # nothing was appended and no transaction holds partition 1's LSO
        assert offsets(rc, topic_name, 1) == (0, 0)
        producers = rc.request(61, 0, DescribeProducersRequest(topics=[
            TopicRequest(name=topic_name, partition_indexes=[1])]))
        assert producers.topics[0].partitions[0].active_producers == []
        assert end(rc, txn, pid, epoch, commit=True, version=4).error_code == 0
        lso, hw = offsets(rc, topic_name, 0)
        assert lso == hw == 2  # the record and the commit marker
    finally:
        rc.close()
    assert committed_values(broker.bootstrap, topic_name, 2, 1) == [b"in"]


def test_finalized_transaction_version_2_writes_flexible_records_that_survive_a_restart(
        tmp_path):
    """With ``transaction.version`` upgraded to 2 (UpdateFeatures) ApiVersions finalizes it,
    which is what makes a Kafka client speak transaction version 2; the coordinator writes
    Kafka's flexible transaction log records (value version 1), and a restart replays them:
    the epoch EndTxn v5 bumped is still the producer's. TxnOffsetCommit v5 adds the group's
    offsets partition itself (no AddOffsetsToTxn)."""
    b = BrokerProcess(tmp_path / "data", {"transaction.state.log.num.partitions": "1",
                                          "offsets.topic.num.partitions": "1"}).start()
    topic, txn, group = "tv2-restart", "tv2-restart-txn", "tv2-restart-group"
    try:
        rc = RawClient(b.bootstrap)
        try:
            up = rc.request(57, 1, UpdateFeaturesRequest(timeout_ms=10_000, validate_only=False,
                                                        feature_updates=[FeatureUpdateKey(
                                                            feature="transaction.version",
                                                            max_version_level=2,
                                                            upgrade_type=1)]))
            assert up.error_code == 0
            api = rc.request(18, 3, ApiVersionsRequest(client_software_name="raw",
                                                       client_software_version="0"))
            assert {(f.name, f.max_version_level) for f in api.finalized_features} >= {
                ("transaction.version", 2)}
            create(b.bootstrap, topic)
            pid, epoch = init(rc, txn)
            assert produce(rc, 12, txn, topic, 0, batch(pid, epoch, 0, b"r1")).error_code == 0
            commit = rc.request(28, 5, TxnOffsetCommitRequest(
                transactional_id=txn, group_id=group, producer_id=pid, producer_epoch=epoch,
                generation_id=-1, member_id="", group_instance_id=None, topics=[
                    TxnOffsetCommitRequestTopic(name=topic, partitions=[
                        TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=1,
                                                        committed_leader_epoch=-1,
                                                        committed_metadata="")])]))
            assert commit.topics[0].partitions[0].error_code == 0
            assert {t.topic for t in describe(rc, txn).topics} == {topic, "__consumer_offsets"}
            done = end(rc, txn, pid, epoch, commit=True)
            assert (done.error_code, done.producer_epoch) == (0, epoch + 1)
        finally:
            rc.close()
        b.stop()
        values = [r.value for batch_ in PartitionLog(
            tmp_path / "data" / "__transaction_state-0", LogConfig()).iter_batches()
            for r in iter_records(batch_)]
        assert values and {bytes(v[:2]) for v in values} == {b"\x00\x01"}
        b.start()
        rc = RawClient(b.bootstrap)
        try:
            state = describe(rc, txn)
            assert (state.transaction_state, state.producer_id, state.producer_epoch) == (
                "CompleteCommit", pid, epoch + 1)
            fetched = rc.request(9, 7, OffsetFetchRequest(group_id=group, require_stable=True,
                                                          topics=None))
            assert [(t.name, p.committed_offset) for t in fetched.topics
                    for p in t.partitions] == [(topic, 1)]
            # the next transaction goes on at the bumped epoch
            assert produce(rc, 12, txn, topic, 0, batch(pid, epoch + 1, 0, b"r2")).error_code == 0
            assert end(rc, txn, pid, epoch + 1, commit=True).producer_epoch == epoch + 2
        finally:
            rc.close()
    finally:
        b.stop()


def test_confluent_kafka_transactions_with_transaction_version_2_finalized(tmp_path):
    """librdkafka (2.16) keeps the first transaction protocol when transaction.version 2 is
    finalized; its transactions still commit and abort (verified partitions, flexible
    transaction log records, the coordinator's aborts at version 2)."""
    b = BrokerProcess(tmp_path / "data", {"transaction.state.log.num.partitions": "1",
                                          "offsets.topic.num.partitions": "1"}).start()
    try:
        rc = RawClient(b.bootstrap)
        try:
            assert rc.request(57, 1, UpdateFeaturesRequest(
                timeout_ms=10_000, validate_only=False, feature_updates=[FeatureUpdateKey(
                    feature="transaction.version", max_version_level=2, upgrade_type=1)])
                ).error_code == 0
        finally:
            rc.close()
        create(b.bootstrap, "eos", partitions=2)
        p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "rdk-tv2",
                      "linger.ms": 0})
        p.init_transactions(15)
        for i, commit in enumerate((True, False, True)):
            p.begin_transaction()
            for part in (0, 1):
                p.produce("eos", value=b"%d-%d" % (i, part), partition=part)
            if commit:
                p.commit_transaction(15)
            else:
                p.abort_transaction(15)
        assert sorted(committed_values(b.bootstrap, "eos", 2, 4)) == [
            b"0-0", b"0-1", b"2-0", b"2-1"]
    finally:
        b.stop()


def test_init_producer_id_v6_refuses_two_phase_commit(broker, topic_name):
    """KIP-939 (InitProducerId v6): Spool has no two-phase commit, so a producer asking for
    it is refused as Kafka refuses it with transaction.two.phase.commit.enable off, instead
    of getting an identity that would not keep its prepared transactions."""
    rc = RawClient(broker.bootstrap)
    txn = f"2pc-{topic_name}"
    try:
        def init6(**kw):
            r = rc.request(22, 6, InitProducerIdRequest(
                transactional_id=txn, transaction_timeout_ms=60_000, producer_id=-1,
                producer_epoch=-1, **kw))
            return r.error_code, r.producer_id, r.producer_epoch

        assert init6(enable2_pc=True) == (Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1, -1)
        assert init6(keep_prepared_txn=True) == (Errors.UNSUPPORTED_VERSION, -1, -1)
        code, pid, epoch = init6()
        assert (code, epoch) == (0, 0) and pid >= 0  # the refusals created nothing
    finally:
        rc.close()
