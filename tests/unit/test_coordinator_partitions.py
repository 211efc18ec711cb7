"""Coordinators move with their partitions: a ``__consumer_offsets`` /
``__transaction_state`` partition loads when this broker becomes its leader (replaying
that partition only, a stale load dropped) and unloads when it stops (parked requests
answered NOT_COORDINATOR, timers stopped); a PREPARE_COMMIT found at load is completed;
replies leave only once the records are replicated (acks=-1).

Driven through the real runtimes over a broker double whose view the test sets and
whose logs are lists of batches."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from spool.broker.config import BrokerConfig
from spool.broker.coordinator_log import CoordinatorLog
from spool.broker.group_runtime import GroupRuntime
from spool.broker.txn_runtime import TransactionRuntime
from spool.coordinator import JoinRequest, OutRecord, Result, partition_for
from spool.coordinator.offsets import CommittedOffset, OffsetStore
from spool.coordinator.transaction import TxnMetadata, TxnState, encode_key, encode_value
from spool.protocol.errors import Errors, KafkaError
from spool.records.batch import BatchHeader
from spool.records.builder import BatchBuilder
from spool.records.record import CONTROL_COMMIT, ControlRecord, iter_records
from spool.util.clock import FakeClock

NODE = 1
OFFSETS = "__consumer_offsets"
TXNS = "__transaction_state"


class Log:
    def __init__(self) -> None:
        self.batches: list[bytes] = []

    def iter_batches(self):
        return iter(list(self.batches))


class Writer:
    def __init__(self, logs: dict) -> None:
        self.logs = logs

    def append(self, topic: str, partition: int, batch: bytearray) -> None:
        self.logs[(topic, partition)].batches.append(bytes(batch))


class View:
    clustered = True

    def __init__(self) -> None:
        self.leaders: dict[tuple[str, int], tuple[int, int]] = {}

    def partition_count(self, name: str) -> int:
        return len([tp for tp in self.leaders if tp[0] == name])

    def partition(self, topic: str, p: int):
        got = self.leaders.get((topic, p))
        return None if got is None else SimpleNamespace(
            leader=got[0], leader_epoch=got[1], partition_index=p)

    def finalized_features(self) -> dict[str, int]:
        return {}  # transaction.version 0: v0 transaction log records


class Gate:
    """``run_blocking`` whose reads wait until the test opens them, one by one."""

    def __init__(self) -> None:
        self.waiting: list[asyncio.Future] = []

    async def run_blocking(self, fn, *args):
        fut = asyncio.get_running_loop().create_future()
        self.waiting.append(fut)
        await fut
        return fn(*args)

    def open(self, i: int = 0) -> None:
        self.waiting.pop(i).set_result(None)


def broker(partitions: int = 2):
    cfg = BrokerConfig.load(overrides=[f"offsets.topic.num.partitions={partitions}",
                                       f"transaction.state.log.num.partitions={partitions}",
                                       "group.initial.rebalance.delay.ms=3000"])
    logs = {(t, p): Log() for t in (OFFSETS, TXNS, "data") for p in range(partitions)}
    gate = Gate()
    view = View()
    for t in (OFFSETS, TXNS, "data"):
        for p in range(partitions):
            view.leaders[(t, p)] = (2, 0)
    b = SimpleNamespace(node_id=NODE, clock=FakeClock(), config=cfg, view=view, groups=None,
                        run_blocking=gate.run_blocking, replica_log=lambda t, p: logs.get((t, p)),
                        storage=SimpleNamespace(logs=SimpleNamespace(get=lambda t, p: logs.get((t, p)))),
                        gate=gate, data=logs)
    return b, Writer(logs)


def lead(b, topic: str, p: int, epoch: int, runtime) -> None:
    b.view.leaders[(topic, p)] = (NODE, epoch)
    runtime.on_leadership(p, True, epoch)


def follow(b, topic: str, p: int, epoch: int, runtime) -> None:
    b.view.leaders[(topic, p)] = (2, epoch)
    runtime.on_leadership(p, False, epoch)


def commit_batch(group: str, topic: str, partition: int, offset: int) -> bytes:
    rec, _, _ = OffsetStore.commit_record(group, topic, partition,
                                          CommittedOffset(offset, -1, "", 1))
    bb = BatchBuilder()
    bb.append(rec.key, rec.value, timestamp=1)
    return bytes(bb.build())


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def group_on(p: int, n: int = 2) -> str:
    return next(g for g in (f"g{i}" for i in range(100)) if partition_for(g, n) == p)


def test_a_partition_loads_only_its_own_groups_and_answers_load_in_progress_meanwhile():
    async def main():
        b, w = broker()
        rt = GroupRuntime(b, w)
        g0, g1 = group_on(0), group_on(1)
        b.data[(OFFSETS, 0)].batches.append(commit_batch(g0, "t", 0, 42))
        b.data[(OFFSETS, 1)].batches.append(commit_batch(g1, "t", 0, 7))
        assert rt.topic.coordinator_error(g0).code == Errors.NOT_COORDINATOR
        lead(b, OFFSETS, 0, 3, rt)
        await settle()
        assert rt.topic.coordinator_error(g0).code == Errors.COORDINATOR_LOAD_IN_PROGRESS
        b.gate.open()
        await settle()
        assert rt.topic.coordinator_error(g0) is None
        assert rt.topic.loaded == {0: 3}
        assert rt.coordinator.offsets.get(g0)[("t", 0)].offset == 42
        assert rt.coordinator.offsets.get(g1) == {}  # partition 1 is another broker's
        assert rt.topic.coordinator_error(g1).code == Errors.NOT_COORDINATOR

    asyncio.run(main())


def test_a_load_overtaken_by_a_leadership_change_is_dropped():
    async def main():
        b, w = broker()
        rt = GroupRuntime(b, w)
        g0 = group_on(0)
        b.data[(OFFSETS, 0)].batches.append(commit_batch(g0, "t", 0, 1))
        lead(b, OFFSETS, 0, 1, rt)
        await settle()
        follow(b, OFFSETS, 0, 2, rt)  # leadership moved away while the first load reads
        lead(b, OFFSETS, 0, 3, rt)  # and came back in a newer epoch
        await settle()
        b.data[(OFFSETS, 0)].batches.append(commit_batch(g0, "t", 0, 5))
        b.gate.open(0)  # the epoch-1 read finishes first: dropped
        await settle()
        assert rt.topic.loaded == {}
        assert rt.coordinator.offsets.get(g0) == {}
        b.gate.open(0)
        await settle()
        assert rt.topic.loaded == {0: 3}
        assert rt.coordinator.offsets.get(g0)[("t", 0)].offset == 5

    asyncio.run(main())


def test_unloading_answers_parked_joins_not_coordinator_and_stops_their_timers():
    async def main():
        b, w = broker()
        rt = GroupRuntime(b, w)
        g0, g1 = group_on(0), group_on(1)
        lead(b, OFFSETS, 0, 1, rt)
        lead(b, OFFSETS, 1, 1, rt)
        await settle()
        b.gate.open()
        b.gate.open()
        await settle()
        got: dict[str, list] = {g0: [], g1: []}
        for g in (g0, g1):
            req = JoinRequest(group_id=g, member_id="", group_instance_id=None,
                              protocol_type="consumer", protocols=[("range", b"")],
                              session_timeout_ms=10_000, rebalance_timeout_ms=60_000,
                              require_known_member_id=False)
            assert rt.execute([g], lambda req=req, g=g: rt.coordinator.join_group(
                req, got[g].append))
        assert got[g0] == [] and got[g1] == []  # parked: the initial rebalance delay
        assert any(len(k) > 1 and k[1] == g0 for k in rt.coordinator.timers._live)
        follow(b, OFFSETS, 0, 2, rt)
        assert [type(v) for v in got[g0]] == [KafkaError]
        assert got[g0][0].code == Errors.NOT_COORDINATOR
        assert got[g1] == []  # the other partition's group waits on
        assert g0 not in rt.coordinator.groups and g1 in rt.coordinator.groups
        assert not any(len(k) > 1 and k[1] == g0 for k in rt.coordinator.timers._live)
        assert rt.topic.coordinator_error(g0).code == Errors.NOT_COORDINATOR

    asyncio.run(main())


def stored_prepare_commit(b, txn: str) -> int:
    """`txn` in PREPARE_COMMIT (producer 1000, epoch 3) over data-0 and data-1, both led here,
    written to its ``__transaction_state`` partition: that partition's index."""
    p = partition_for(txn, 2)
    m = TxnMetadata(txn, 1000, 3, 60_000, TxnState.PREPARE_COMMIT,
                    frozenset({("data", 0), ("data", 1)}), 5, 1)
    bb = BatchBuilder()
    bb.append(encode_key(txn), encode_value(m), timestamp=1)
    b.data[(TXNS, p)].batches.append(bytes(bb.build()))
    b.view.leaders[("data", 0)] = (NODE, 0)
    b.view.leaders[("data", 1)] = (NODE, 0)
    return p


def test_a_prepare_commit_found_at_load_is_completed_by_the_new_coordinator():
    async def main():
        b, w = broker()
        groups = GroupRuntime(b, w)
        b.groups = groups
        rt = TransactionRuntime(b, w)
        txn = "tx-a"
        p = stored_prepare_commit(b, txn)
        lead(b, TXNS, p, 4, rt)
        await settle()
        b.gate.open()
        await settle()
        for dp in (0, 1):
            (marker,) = b.data[("data", dp)].batches
            h = BatchHeader.parse(marker)
            assert h.is_control and h.producer_id == 1000
            (rec,) = iter_records(marker)
            assert ControlRecord.decode(rec.key, rec.value).type == CONTROL_COMMIT
        assert rt.coordinator.txns[txn].state == TxnState.COMPLETE_COMMIT
        follow(b, TXNS, p, 5, rt)
        assert txn not in rt.coordinator.txns

    asyncio.run(main())


class SlowWriter:
    """Appends get offsets 0, 1, ...; replication waits until the test settles it."""

    def __init__(self) -> None:
        self.next = 0
        self.pending: dict[int, asyncio.Future] = {}

    def append(self, topic: str, partition: int, batch: bytearray) -> int:
        self.next += 1
        return self.next - 1

    def replicated(self, topic: str, partition: int, offset: int) -> bool:
        return False

    async def wait_replicated(self, topic, partition, offset, timeout_ms) -> None:
        fut = self.pending[offset] = asyncio.get_running_loop().create_future()
        await fut


def test_replies_leave_only_once_replicated_in_append_order_and_a_lost_leadership_is_not_coordinator():
    async def main():
        w = SlowWriter()
        replayed, got = [], []
        log = CoordinatorLog("__consumer_offsets", w, FakeClock(), lambda owner: 0,
                             replayed.append, KafkaError(Errors.COORDINATOR_NOT_AVAILABLE))
        commits = []
        for i in range(3):
            rec = OutRecord("g", b"k%d" % i, b"v")
            commits.append(log.commit(Result(records=[rec], replies=[(got.append, i)])))
        assert all(c.appended for c in commits) and got == [] and replayed == []
        await settle()
        w.pending[1].set_result(None)  # the second is replicated first: it waits its turn
        await settle()
        assert got == [] and replayed == []
        w.pending[0].set_result(None)
        await settle()
        assert got == [0, 1] and [r.key for r in replayed] == [b"k0", b"k1"]
        w.pending[2].set_exception(KafkaError(Errors.NOT_LEADER_OR_FOLLOWER, "moved"))
        await settle()
        assert got[2].code == Errors.NOT_COORDINATOR and len(replayed) == 2  # not replayed
        assert [await c.wait() for c in commits] == [True, True, False]

    asyncio.run(main())


def test_leaderships_seen_while_catching_up_count_only_as_they_ended():
    async def main():
        b, w = broker()
        rt = GroupRuntime(b, w)
        rt.topic.hold()  # a restarted broker replaying the metadata log
        lead(b, OFFSETS, 0, 1, rt)  # led before the restart...
        follow(b, OFFSETS, 0, 2, rt)  # ...and moved away while it was down
        lead(b, OFFSETS, 1, 3, rt)
        await settle()
        assert b.gate.waiting == [] and rt.topic.loading == {}
        rt.topic.release()
        await settle()
        assert rt.topic.loading == {1: 3}
        b.gate.open()
        await settle()
        assert rt.topic.loaded == {1: 3}

    asyncio.run(main())
