"""KIP-890 across brokers: a partition leader asks the transaction coordinator, another
broker, before the first transactional batch of a transaction (AddPartitionsToTxn v5 from
broker to broker): verify_only for Produce v3-11, the add itself for Produce v12. Three
combined nodes, a raw protocol client (no Java client here)."""

from __future__ import annotations

import uuid

from spool.protocol._generated import (
    AddPartitionsToTxnRequest,
    DescribeTransactionsRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    ListOffsetsRequest,
)
from spool.protocol._generated.add_partitions_to_txn_request import AddPartitionsToTxnTopic
from spool.protocol._generated.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from spool.protocol.errors import Errors
from tests.cluster.test_brokers import RACKS, coordinator, create, partitions_of
from tests.helpers.cluster_proc import COMBINED
from tests.helpers.raw_client import RawClient
from tests.integration.test_transactions_v2 import batch, produce


def ok(resp, what: str):
    """A response whose error_code is 0, else the reason to wait (for ``wait_until``)."""
    return resp if resp.error_code == 0 else f"{what}: error {resp.error_code}"


def test_leaders_verify_and_add_partitions_with_a_remote_coordinator(cluster_factory):
    cluster = cluster_factory(roles=(COMBINED,) * 3, racks=RACKS, proxied=False).start()
    cluster.wait_formed()
    topic = f"tv2-{uuid.uuid4().hex[:6]}"
    create(cluster.bootstrap, topic, 9, 1)
    leaders = cluster.wait_until("leaders", lambda: partitions_of(cluster.bootstrap, topic))
    by_node: dict[int, list[int]] = {}
    for p, (leader, _) in sorted(leaders.items()):
        by_node.setdefault(leader, []).append(p)
    # a transactional id whose coordinator leads none of the partitions we write to
    leader = next(n for n, ps in by_node.items() if len(ps) >= 3)
    txn = next(t for t in (f"tx-{topic}-{i}" for i in range(200))
               if cluster.wait_until("txn coordinator", lambda t=t: coordinator(
                   cluster.nodes[leader].bootstrap, t, 1)) != leader)
    coord = coordinator(cluster.nodes[leader].bootstrap, txn, 1)
    added, stray, implicit = by_node[leader][:3]

    tc = RawClient(cluster.nodes[coord].bootstrap)
    lc = RawClient(cluster.nodes[leader].bootstrap)
    try:
        init = cluster.wait_until("InitProducerId", lambda: ok(tc.request(
            22, 5, InitProducerIdRequest(transactional_id=txn, transaction_timeout_ms=60_000)),
            "InitProducerId"))
        pid, epoch = init.producer_id, init.producer_epoch
        # part 1: the client added `added` only; the leader verifies with the coordinator
        add = tc.request(24, 3, AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=txn, v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[AddPartitionsToTxnTopic(name=topic, partitions=[added])]))
        assert add.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
        assert produce(lc, 9, txn, topic, added, batch(pid, epoch, 0, b"v1")).error_code == 0
        refused = produce(lc, 9, txn, topic, stray, batch(pid, epoch, 0, b"stray"))
        assert refused.error_code == Errors.INVALID_TXN_STATE
        end = tc.request(26, 4, EndTxnRequest(transactional_id=txn, producer_id=pid,
                                              producer_epoch=epoch, committed=True))
        assert end.error_code == 0

        # part 2: Produce v12 on the leader adds the partition at the remote coordinator
        def produced():
            r = produce(lc, 12, txn, topic, implicit, batch(pid, epoch, 0, b"v2"))
            # CONCURRENT_TRANSACTIONS: the last commit's markers are still being written
            return r if r.error_code == 0 else f"Produce v12: error {r.error_code}"

        cluster.wait_until("the implicit add", produced, 30)
        state = tc.request(65, 0, DescribeTransactionsRequest(transactional_ids=[txn])
                           ).transaction_states[0]
        assert (state.transaction_state, [(t.topic, list(t.partitions)) for t in state.topics]) \
            == ("Ongoing", [(topic, [implicit])])
        end = tc.request(26, 5, EndTxnRequest(transactional_id=txn, producer_id=pid,
                                              producer_epoch=epoch, committed=True))
        assert (end.error_code, end.producer_id, end.producer_epoch) == (0, pid, epoch + 1)

        def stable(p: int, want: int):
            """The partition's LSO once it reaches ``want`` (the commit marker replicated)."""
            req = ListOffsetsRequest(replica_id=-1, isolation_level=1, topics=[ListOffsetsTopic(
                name=topic, partitions=[ListOffsetsPartition(partition_index=p, timestamp=-1)])])
            got = lc.request(2, 5, req).topics[0].partitions[0].offset
            return got if got == want else f"LSO of {p}: {got}"

        assert cluster.wait_until("committed", lambda: stable(implicit, 2), 30) == 2
        assert stable(stray, 0) == 0  # the refused batch left nothing open there
    finally:
        tc.close()
        lc.close()
