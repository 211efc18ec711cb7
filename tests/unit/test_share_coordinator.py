"""spool.share.coordinator: the share coordinator's state machine over ShareSnapshot and
ShareUpdate records (Kafka's ShareCoordinatorShard): merges, a snapshot every N updates,
fencing, initialize/delete, and replaying the records equals the live state."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from spool.coordinator.records import SHARE_STATE_TYPES, decode
from spool.protocol.errors import Errors, KafkaError
from spool.share.batches import ACKNOWLEDGED, ARCHIVED, AVAILABLE, StateBatch
from spool.share.coordinator import ShareCoordinator, coordinator_key, partition_for
from spool.share.persister import ShareState

TID = uuid.UUID(int=1)
KEY = ("g", TID, 0)


def run(c: ShareCoordinator, op) -> tuple[list, object]:
    """Apply an operation as the runtime does: its records replayed, its answer returned."""
    records, answer = op
    for r in records:
        c.replay(r)
    return records, answer


def kinds(records) -> list[str]:
    return [type(decode(r.key, r.value, SHARE_STATE_TYPES)[0]).__name__ for r in records]


def test_partition_for_is_java_utils_abs_of_hashcode():
    # computed with java: Utils.abs(key.hashCode()) % 50 (negative hash codes among them)
    assert coordinator_key(KEY) == "g:AAAAAAAAAAAAAAAAAAAAAQ:0"
    assert partition_for("g:AAAAAAAAAAAAAAAAAAAAAQ:0", 50) == 23
    assert partition_for("share-group:MkU3OEVBNTcwNTJENDM2Qg:7", 50) == 18
    assert partition_for("gé:AAAAAAAAAAAAAAAAAAAAAg:12", 50) == 33


def test_writes_merge_and_a_snapshot_follows_every_n_updates():
    c = ShareCoordinator(snapshot_every=2)
    recs, err = run(c, c.write(KEY, 0, 0, 0, [StateBatch(0, 9, AVAILABLE, 1)]))
    assert (kinds(recs), err) == (["ShareSnapshotKey"], None)
    got = []
    for i in range(5):
        recs, err = run(c, c.write(KEY, 0, 0, -1, [StateBatch(i, i, ACKNOWLEDGED, 1)]))
        assert err is None
        got += kinds(recs)
    assert got == ["ShareUpdateKey", "ShareUpdateKey", "ShareSnapshotKey",
                   "ShareUpdateKey", "ShareUpdateKey"]
    assert c.states[KEY].snapshot_epoch == 1
    _, state = run(c, c.read(KEY, 0))
    assert state == ShareState(0, 0, 0, (StateBatch(0, 4, ACKNOWLEDGED, 1),
                                         StateBatch(5, 9, AVAILABLE, 1)))
    run(c, c.write(KEY, 0, 0, 3, [StateBatch(8, 9, ARCHIVED, 2)]))
    assert c.states[KEY].batches == (StateBatch(3, 4, ACKNOWLEDGED, 1),
                                     StateBatch(5, 7, AVAILABLE, 1), StateBatch(8, 9, ARCHIVED, 2))


def test_fencing_on_stale_epochs():
    c = ShareCoordinator()
    run(c, c.initialize(KEY, 3, 0))
    assert c.states[KEY].state_epoch == 3
    recs, state = run(c, c.read(KEY, 5))  # a new leader records its epoch
    assert kinds(recs) == ["ShareUpdateKey"] and state.leader_epoch == 5
    assert run(c, c.read(KEY, 5))[0] == []  # the same leader again: nothing to write
    for op, code in ((c.write(KEY, 3, 4, -1, []), Errors.FENCED_LEADER_EPOCH),
                     (c.write(KEY, 2, 5, -1, []), Errors.FENCED_STATE_EPOCH),
                     (c.read(KEY, 4), Errors.FENCED_LEADER_EPOCH),
                     (c.initialize(KEY, 2, 0), Errors.FENCED_STATE_EPOCH)):
        recs, err = op
        assert recs == [] and isinstance(err, KafkaError) and err.code == code
    assert c.read_summary(KEY, -1) == ShareState(3, 0, 5, ())
    assert c.read_summary(KEY, 4).code == Errors.FENCED_LEADER_EPOCH


def test_initialize_starts_over_and_delete_forgets():
    c = ShareCoordinator()
    assert c.read(KEY, 0)[1].code == Errors.UNKNOWN_TOPIC_OR_PARTITION
    run(c, c.write(KEY, 0, 2, 0, [StateBatch(0, 4, ACKNOWLEDGED, 1)]))
    run(c, c.initialize(KEY, 1, 10))  # an offsets reset
    assert c.states[KEY].share_state() == ShareState(1, 10, 2, ())
    recs, err = run(c, c.delete(KEY))
    assert err is None and [r.value for r in recs] == [None, None]
    assert KEY not in c.states
    assert run(c, c.delete(KEY)) == ([], None)


batch = st.builds(lambda f, n, s, k: StateBatch(f, f + n, s, k), st.integers(0, 60),
                  st.integers(0, 8), st.sampled_from([AVAILABLE, ACKNOWLEDGED, ARCHIVED]),
                  st.integers(1, 3))
ops = st.lists(st.one_of(
    st.tuples(st.just("write"), st.integers(0, 2), st.integers(0, 2), st.integers(-1, 30),
              st.lists(batch, max_size=4)),
    st.tuples(st.just("read"), st.integers(0, 3)),
    st.tuples(st.just("init"), st.integers(0, 3), st.integers(-1, 20)),
    st.tuples(st.just("delete"))), max_size=25)


@settings(max_examples=150, deadline=None)
@given(ops, st.integers(1, 4))
def test_replaying_the_log_gives_the_live_state(script, every):
    """Whatever the operations, a coordinator loading the records from the log (a restart,
    a new leader) has the same state as the one that wrote them; snapshots included."""
    live = ShareCoordinator(every)
    log: list = []
    for op in script:
        if op[0] == "write":
            recs, _ = live.write(KEY, op[1], op[2], op[3], op[4])
        elif op[0] == "read":
            recs, _ = live.read(KEY, op[1])
        elif op[0] == "init":
            recs, _ = live.initialize(KEY, op[1], op[2])
        else:
            recs, _ = live.delete(KEY)
        for r in recs:
            live.replay(r)
        log += recs
    loaded = ShareCoordinator(every)
    for r in log:
        loaded.load(r.key, r.value)
    assert loaded.states == live.states
    # and from the last snapshot on (what survives once older records are gone)
    last = max((i for i, r in enumerate(log) if r.key[:2] == b"\x00\x00"), default=None)
    if last is not None and log[last].value is not None:
        tail = ShareCoordinator(every)
        for r in log[last:]:
            tail.load(r.key, r.value)
        s, t = live.states.get(KEY), tail.states.get(KEY)
        assert (s is None) == (t is None)
        if s is not None:
            assert (t.start_offset, t.batches) == (s.start_offset, s.batches)


def test_memory_persister_keeps_the_contract():
    import asyncio

    from spool.share.persister import MemoryPersister

    async def go():
        p = MemoryPersister()
        assert (await p.read("g", TID, 0, 0)).code == Errors.UNKNOWN_TOPIC_OR_PARTITION
        assert await p.initialize("g", TID, 0, 1, -1) is None
        assert await p.write("g", TID, 0, 1, 0, 4, [StateBatch(4, 6, ACKNOWLEDGED, 1)]) is None
        assert await p.read("g", TID, 0, 1) == ShareState(1, 4, 1, (
            StateBatch(4, 6, ACKNOWLEDGED, 1),))
        assert (await p.write("g", TID, 0, 1, 0, -1, [])).code == Errors.FENCED_LEADER_EPOCH
        assert await p.read_summary("g", TID, 0, -1) == (1, 4)
        assert await p.delete("g", TID, 0) is None
        assert (await p.read_summary("g", TID, 0, -1)).code == Errors.UNKNOWN_TOPIC_OR_PARTITION

    asyncio.run(go())
