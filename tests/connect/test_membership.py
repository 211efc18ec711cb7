"""Connect's group protocol against a real broker: three members join, the leader assigns
with the eager assignor, a member that leaves or stops heartbeating loses its work to
the others; plus ConnectProtocol v0's bytes."""

from __future__ import annotations

import asyncio
import struct
import uuid

from spool.connect.assignor import assign
from spool.connect.connect_protocol import (
    CONFIG_MISMATCH,
    ConnectAssignment,
    WorkerState,
    decode_assignment,
    decode_metadata,
    encode_assignment,
    encode_metadata,
)
from spool.connect.herder import TaskId
from spool.connect.membership import WorkerGroupMember


def test_metadata_bytes_are_kafkas():
    b = encode_metadata(WorkerState("http://h:8083", 7))
    assert b == struct.pack(">hh", 0, 13) + b"http://h:8083" + struct.pack(">q", 7)
    assert decode_metadata(b) == WorkerState("http://h:8083", 7)


def test_assignment_bytes_are_kafkas():
    a = ConnectAssignment(0, "m1", "http://l:1", 42, ["c"], [TaskId("c", 0), TaskId("d", 1)])
    b = encode_assignment(a)
    expect = (struct.pack(">hh", 0, 0) + struct.pack(">h", 2) + b"m1"
              + struct.pack(">h", 10) + b"http://l:1" + struct.pack(">qi", 42, 2)
              + struct.pack(">h", 1) + b"c" + struct.pack(">iii", 2, -1, 0)
              + struct.pack(">h", 1) + b"d" + struct.pack(">ii", 1, 1))
    assert b == expect
    back = decode_assignment(b)
    assert back == a and not back.failed
    assert decode_assignment(encode_assignment(
        ConnectAssignment(CONFIG_MISMATCH, "m", "u", 1))).failed


class Member:
    """A member whose work is 2 connectors x 3 tasks, assigned as a herder's leader would."""

    def __init__(self, bootstrap: str, group: str, n: int) -> None:
        self.url = f"http://w{n}:8083"
        self.assignment: ConnectAssignment | None = None
        self.revokes = 0
        self.m = WorkerGroupMember(
            [bootstrap], group, metadata=lambda: encode_metadata(WorkerState(self.url, 5)),
            on_revoke=self._revoke, on_assign=self._assign, on_assigned=self._assigned,
            session_timeout_ms=6000, heartbeat_interval_ms=500, rebalance_timeout_ms=20000)

    async def _revoke(self) -> None:
        self.revokes += 1
        self.assignment = None

    async def _assign(self, leader: str, members: list[tuple[str, bytes]]) -> dict[str, bytes]:
        urls = {m: decode_metadata(md).url for m, md in members}
        plan = assign(urls, ["c1", "c2"], {"c1": 3, "c2": 3})
        return {m: encode_assignment(ConnectAssignment(0, leader, urls[leader], 5, cs, ts))
                for m, (cs, ts) in plan.items()}

    async def _assigned(self, data: bytes, generation: int) -> None:
        self.assignment = decode_assignment(data)


def _work(members: list[Member]) -> tuple[list[str], list[TaskId]]:
    cs, ts = [], []
    for m in members:
        assert m.assignment is not None
        cs += m.assignment.connectors
        ts += m.assignment.tasks
    return sorted(cs), sorted(ts)


async def _until(pred, timeout: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not pred():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.1)


def _settled(members: list[Member], after: int = -1) -> bool:
    if any(m.assignment is None or m.m._needs_join for m in members):
        return False
    gens = {m.m.generation for m in members}
    return len(gens) == 1 and gens.pop() > after


ALL = (["c1", "c2"], sorted(TaskId(c, n) for c in ("c1", "c2") for n in range(3)))


def test_three_members_share_the_work_and_take_over_from_one_that_dies(broker):
    group = f"connect-test-{uuid.uuid4().hex[:8]}"

    async def main() -> None:
        members = [Member(broker.bootstrap, group, n) for n in range(3)]
        try:
            for m in members:
                m.m.start()
            await _until(lambda: _settled(members), timeout=60)
            assert _work(members) == ALL
            leaders = {m.assignment.leader for m in members}
            assert len(leaders) == 1
            leader = next(m for m in members if m.m.member_id == leaders.pop())
            assert {m.assignment.leader_url for m in members} == {leader.url}
            # 8 units (2 connectors, 6 tasks) over 3 members: 3, 3, 2
            assert sorted(len(m.assignment.connectors) + len(m.assignment.tasks)
                          for m in members) == [2, 3, 3]

            # a clean leave: the two others rebalance at once and share everything
            gen = members[0].m.generation
            gone = members.pop(0)
            await gone.m.stop()
            await _until(lambda: _settled(members, gen), timeout=60)
            assert _work(members) == ALL

            # a member that stops heartbeating (as a killed worker): after the session
            # timeout the last one holds all the work
            gen = members[0].m.generation
            dead = members.pop(0)
            await dead.m.halt()
            await _until(lambda: _settled(members, gen), timeout=60)
            assert _work(members) == ALL
        finally:
            for m in members:
                await m.m.stop()

    asyncio.run(main())


def test_the_group_outlives_a_broker_restart(fresh_broker):
    fresh_broker.start()
    group = f"connect-test-{uuid.uuid4().hex[:8]}"

    async def main() -> None:
        members = [Member(fresh_broker.bootstrap, group, n) for n in range(2)]
        try:
            for m in members:
                m.m.start()
            await _until(lambda: _settled(members))
            await asyncio.to_thread(fresh_broker.kill)
            await asyncio.to_thread(fresh_broker.restart)
            beats = [m.m.heartbeats for m in members]
            # heartbeats fail, the coordinator is found again; whether the group kept its
            # generation or rebalanced, both members heartbeat again and hold all the work
            await _until(lambda: _settled(members) and all(
                m.m.heartbeats > b + 1 for m, b in zip(members, beats, strict=True)),
                         timeout=60)
            assert _work(members) == ALL
        finally:
            for m in members:
                await m.m.stop()

    asyncio.run(main())


def test_a_rejoin_asked_for_during_a_rebalance_is_not_lost(broker):
    """The herder asks for a rebalance when the config topic changes, which can happen
    while the leader computes an assignment: that request must lead to another join."""
    group = f"connect-test-{uuid.uuid4().hex[:8]}"

    async def main() -> None:
        member = Member(broker.bootstrap, group, 0)
        assign = member._assign
        asked = []

        async def assign_and_ask(leader: str, members: list[tuple[str, bytes]]):
            if not asked:  # once: as a connector written while the leader assigns
                asked.append(member.m.generation)
                member.m.request_rejoin()
            return await assign(leader, members)

        member.m.on_assign = assign_and_ask
        try:
            member.m.start()
            await _until(lambda: asked and member.assignment is not None
                         and member.m.generation > asked[0], timeout=60)
            assert _work([member]) == ALL
        finally:
            await member.m.stop()

    asyncio.run(main())
