"""SharePartition (spool.share.partition) against a one-entry-per-offset model (Hypothesis).

A log grows in batches (some offsets missing: compaction, transaction markers; some
batches aborted) and loses its head (retention); members fetch (read_committed or not) from ``next_fetch_offset()`` with any max records,
acknowledge any part of what they hold with any types (and bad requests), let locks
expire, leave; the broker persists ``take_changes()`` through the share coordinator's
combine and restarts from what was persisted. After every step the ranges equal the
model offset by offset and Kafka's invariants hold: every offset in [SPSO, end) has one
state, an ACQUIRED offset has one member and a deadline, ACKNOWLEDGED is never left, a
record is never delivered more than the delivery count limit, the SPSO never
goes back and stops at the first offset not done, and the persisted state is the full
state with acquisitions released.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from spool.protocol.errors import Errors
from spool.share.batches import StateBatch, combine
from spool.share.partition import (
    ACKNOWLEDGED,
    ACQUIRED,
    ARCHIVED,
    AVAILABLE,
    AckBatch,
    SharePartition,
)

MEMBERS = ("m1", "m2", "m3")
LIMIT = 2
MAX_IN_FLIGHT = 40
LOCK_MS = 100
_ACK_STATE = {0: ARCHIVED, 1: ACKNOWLEDGED, 2: AVAILABLE, 3: ARCHIVED}


@dataclass
class Rec:
    state: int
    count: int
    member: str | None = None
    deadline: int | None = None


class SharePartitionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.now = 0
        self.log: list[tuple[int, int, bool]] = []  # (base, last, aborted)
        self.log_end = 0
        self.log_start = 0
        self.sp = SharePartition(0, max_delivery_count=LIMIT, max_in_flight=MAX_IN_FLIGHT,
                                 record_lock_duration_ms=LOCK_MS)
        self.model: dict[int, Rec] = {}
        self.start = 0
        self.end = 0
        self.acknowledged: set[int] = set()
        self.persisted: tuple[StateBatch, ...] = ()
        self.persisted_start = -1

    # ---- the model ----------------------------------------------------------------------

    def _release(self, r: Rec) -> None:
        r.state = AVAILABLE if r.count < LIMIT else ARCHIVED
        r.member = r.deadline = None

    def _advance(self) -> None:
        while self.start < self.end and self.model[self.start].state in (ACKNOWLEDGED, ARCHIVED):
            del self.model[self.start]
            self.start += 1

    def _gap(self, first: int, last: int) -> None:
        for o in range(first, last + 1):
            if o >= self.end:
                self.model[o] = Rec(ARCHIVED, 0)
                self.end = o + 1
            elif self.model[o].state == AVAILABLE:
                self.model[o].state = ARCHIVED

    def _model_acquire(self, member: str, spans: list[tuple[int, int]], fetched_last: int,
                       fetch_offset: int, max_records: int) -> dict[int, int]:
        got: dict[int, int] = {}
        cursor = max(fetch_offset, self.start)
        complete = True
        for first, last in spans:
            if last < self.start:
                continue
            first = max(first, self.start)
            if len(got) >= max_records:
                complete = False
                break
            self._gap(cursor, first - 1)
            new_records = False
            for o in range(first, last + 1):
                if o < self.end:
                    r = self.model[o]
                    if r.state == AVAILABLE:
                        if r.count >= LIMIT:
                            r.state = ARCHIVED
                        else:
                            r.state, r.count = ACQUIRED, r.count + 1
                            r.member, r.deadline = member, self.now + LOCK_MS
                            got[o] = r.count
                else:
                    if not new_records and self.end - self.start >= MAX_IN_FLIGHT:
                        complete = False
                        break
                    new_records = True
                    self.model[o] = Rec(ACQUIRED, 1, member, self.now + LOCK_MS)
                    self.end = o + 1
                    got[o] = 1
            if not complete:
                break
            cursor = max(cursor, last + 1)
        if complete:
            self._gap(cursor, fetched_last)
        self._advance()
        return got

    # ---- rules --------------------------------------------------------------------------

    @rule(sizes=st.lists(st.tuples(st.integers(1, 6), st.integers(0, 2), st.booleans()),
                         min_size=1, max_size=4))
    def produce(self, sizes: list[tuple[int, int, bool]]) -> None:
        for size, skip, aborted in sizes:
            base = self.log_end + skip  # offsets skipped: compacted records, markers
            self.log.append((base, base + size - 1, aborted))
            self.log_end = base + size

    @rule(member=st.sampled_from(MEMBERS), max_records=st.integers(1, 15),
          max_batches=st.integers(1, 5), data=st.data())
    def acquire(self, member: str, max_records: int, max_batches: int,
                data: st.DataObject) -> None:
        fetch_offset = self.sp.next_fetch_offset()
        read = [b for b in self.log if b[1] >= fetch_offset][:max_batches]
        batches = [(b, last) for b, last, _ in read]
        aborted = [(b, last) for b, last, a in read if a]
        # read_committed: the LSO at a batch's base (an open transaction) or none; the
        # batches read may go past it
        lso = data.draw(st.sampled_from([None] + [b for b, _, _ in read]))
        got = self.sp.acquire(member, batches, max_records, self.now, aborted=aborted,
                              fetch_offset=fetch_offset, last_stable_offset=lso)
        if not read:
            assert got == []
            return
        fetched_last = read[-1][1] if lso is None else min(read[-1][1], lso - 1)
        spans = [(b, last) for b, last, a in read if not a and (lso is None or b < lso)]
        expect = self._model_acquire(member, spans, fetched_last, fetch_offset, max_records)
        offsets = {o: a.delivery_count for a in got
                   for o in range(a.first_offset, a.last_offset + 1)}
        assert offsets == expect
        assert all(a.last_offset < b.first_offset for a, b in itertools.pairwise(got))

    @rule(member=st.sampled_from(MEMBERS), data=st.data())
    def acknowledge(self, member: str, data: st.DataObject) -> None:
        held = sorted(o for o, r in self.model.items() if r.member == member)
        if held and data.draw(st.booleans()):
            # a valid request: runs of what the member holds
            picked = sorted(data.draw(st.sets(st.sampled_from(held), min_size=1)))
            batches, run = [], [picked[0]]
            for o in picked[1:]:
                if o == run[-1] + 1:
                    run.append(o)
                else:
                    batches.append(run)
                    run = [o]
            batches.append(run)
            reqs = []
            for run in batches:
                per_offset = data.draw(st.booleans())
                n = len(run) if per_offset else 1
                types = tuple(data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)))
                reqs.append(AckBatch(run[0], run[-1], types))
        else:
            first = data.draw(st.integers(max(self.start - 3, 0), self.end + 2))
            last = data.draw(st.integers(first, first + 5))
            reqs = [AckBatch(first, last, (data.draw(st.integers(0, 3)),))]
        result = self.sp.acknowledge(member, reqs)
        expect = self._model_ack_error(member, reqs)
        assert result.error_code == expect, (result, reqs)
        if expect != Errors.NONE:
            return
        for req in reqs:
            for o in range(max(req.first_offset, self.start), req.last_offset + 1):
                t = req.acknowledge_types[0 if len(req.acknowledge_types) == 1
                                          else o - req.first_offset]
                r = self.model[o]
                if _ACK_STATE[t] == AVAILABLE:
                    self._release(r)
                else:
                    r.state, r.member, r.deadline = _ACK_STATE[t], None, None
                    if r.state == ACKNOWLEDGED:
                        self.acknowledged.add(o)
        self._advance()

    def _model_ack_error(self, member: str, reqs: list[AckBatch]) -> int:
        for req in reqs:
            if req.last_offset < self.start:
                return Errors.INVALID_RECORD_STATE
            if req.last_offset >= self.end:
                return Errors.INVALID_REQUEST
            for o in range(max(req.first_offset, self.start), req.last_offset + 1):
                r = self.model[o]
                if r.state != ACQUIRED or r.member != member:
                    return Errors.INVALID_RECORD_STATE
        return Errors.NONE

    @rule(ms=st.integers(0, 2 * LOCK_MS))
    def time_passes(self, ms: int) -> None:
        self.now += ms
        expect = 0
        for r in self.model.values():
            if r.state == ACQUIRED and r.deadline is not None and r.deadline <= self.now:
                self._release(r)
                expect += 1
        assert self.sp.expire(self.now) == expect
        self._advance()

    @rule(member=st.sampled_from(MEMBERS))
    def member_leaves(self, member: str) -> None:
        expect = 0
        for r in self.model.values():
            if r.state == ACQUIRED and r.member == member:
                self._release(r)
                expect += 1
        assert self.sp.release_member(member) == expect
        self._advance()

    @rule(data=st.data())
    def log_start_moves(self, data: st.DataObject) -> None:
        # retention or DeleteRecords past the SPSO
        new_start = data.draw(st.integers(self.log_start, self.log_end))
        self.log_start = max(self.log_start, new_start)
        self.sp.update_log_start_offset(new_start)
        if new_start <= self.start:
            return
        for o in range(self.start, min(new_start, self.end)):
            del self.model[o]
        self.start = new_start
        self.end = max(self.end, new_start)
        self._advance()

    @rule()
    def persist(self) -> None:
        changes = self.sp.take_changes()
        if changes is not None:
            start, batches = changes
            self.persisted = combine(self.persisted, batches, start)
            self.persisted_start = start
        if self.persisted_start >= 0:
            assert self.persisted_start == self.sp.start_offset
            assert self.persisted == self.sp.to_state()[1]

    @precondition(lambda self: self.persisted_start >= 0)
    @rule()
    def broker_restarts(self) -> None:
        self.persist()
        self.sp = SharePartition.from_state(
            self.persisted_start, self.persisted, log_start_offset=self.log_start,
            log_end_offset=self.log_end, max_delivery_count=LIMIT,
            max_in_flight=MAX_IN_FLIGHT, record_lock_duration_ms=LOCK_MS)
        for r in self.model.values():
            if r.state == ACQUIRED:
                r.state, r.member, r.deadline = AVAILABLE, None, None
        # never-delivered holes past the last persisted batch are not in the state
        while self.end > self.start and self.model[self.end - 1].state == AVAILABLE \
                and self.model[self.end - 1].count == 0:
            del self.model[self.end - 1]
            self.end -= 1
        assert self.sp.take_changes() is None

    # ---- invariants ---------------------------------------------------------------------

    @invariant()
    def matches_the_model(self) -> None:
        sp = self.sp
        assert (sp.start_offset, sp.end_offset) == (self.start, self.end)
        summary = sp.describe()
        expect_offset = self.start
        seen: dict[int, Rec] = {}
        for r in summary.in_flight:
            assert r.first_offset == expect_offset and r.first_offset <= r.last_offset
            expect_offset = r.last_offset + 1
            assert (r.member_id is not None) == (r.state == ACQUIRED)
            assert (r.deadline_ms is not None) == (r.state == ACQUIRED)
            # an acquisition persisted at the limit comes back AVAILABLE at the limit, and is
            # archived instead of delivered again
            assert r.delivery_count <= LIMIT
            for o in range(r.first_offset, r.last_offset + 1):
                seen[o] = Rec(r.state, r.delivery_count, r.member_id, r.deadline_ms)
        assert expect_offset == self.end
        for a, b in itertools.pairwise(summary.in_flight):  # equal neighbours join
            assert (a.state, a.delivery_count, a.member_id, a.deadline_ms) != \
                (b.state, b.delivery_count, b.member_id, b.deadline_ms)
        assert seen == self.model
        if summary.in_flight:
            assert summary.in_flight[0].state not in (ACKNOWLEDGED, ARCHIVED)
        for o in self.acknowledged:
            assert o < self.start or self.model[o].state == ACKNOWLEDGED
        deadlines = [r.deadline for r in self.model.values() if r.state == ACQUIRED]
        assert sp.next_deadline() == (min(deadlines) if deadlines else None)  # type: ignore

    @invariant()
    def persisted_every_other_step(self) -> None:
        # take_changes both after one step and after several (its intervals merged)
        self.steps = getattr(self, "steps", 0) + 1
        if self.steps % 2:
            self.persist()

    @invariant()
    def spso_never_goes_back(self) -> None:
        assert self.sp.start_offset >= getattr(self, "_last_start", 0)
        self._last_start = self.sp.start_offset


SharePartitionMachine.TestCase.settings = settings(max_examples=300, stateful_step_count=50,
                                                   deadline=None)
TestSharePartitionModel = SharePartitionMachine.TestCase
