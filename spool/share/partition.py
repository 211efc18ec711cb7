"""KIP-932's share-partition: the records of one topic-partition a share group has in flight.

``SharePartition`` is the state machine of Kafka's ``SharePartition`` (core/.../server/share),
pure: no asyncio, no log access, no clock of its own (every call that needs the time takes
``now_ms``). The share-partition leader (``spool.broker.share_manager``) reads the log,
drives this object, persists what ``take_changes()`` returns and arms one timer at
``next_deadline()``. It is not thread-safe: one event loop drives it.

In-flight records, between the share-partition start offset (SPSO, ``start_offset``) and
``end_offset`` (exclusive: one past the last offset ever acquired, Kafka's SPEO + 1), are
kept as contiguous, sorted ranges of equal state (``describe()`` shows them)::

    start_offset (never ACKNOWLEDGED/ARCHIVED: the SPSO moves past those)    end_offset
    v                                                                          v
    [ 40-49 ACQUIRED m1 dc=1 dl=t1 | 50 AVAILABLE dc=1 | 51-99 ACKNOWLEDGED dc=1 ]

Every offset in [start_offset, end_offset) is in exactly one range with one state
(``spool.share.batches``: AVAILABLE 0, ACQUIRED 1, ACKNOWLEDGED 2, ARCHIVED 4) and a
delivery count; an ACQUIRED range also has its member id and lock deadline (ms). Ranges
split where an operation covers part of one and join again when neighbours become equal,
so a fetch of 500-record batches costs a few range objects, never one per record.

Transitions (Kafka's ``RecordState.validateTransition`` and ``InFlightState``):

- AVAILABLE -> ACQUIRED by ``acquire`` (delivery count + 1; a record whose count already
  reached ``max_delivery_count`` is ARCHIVED instead of delivered again);
- ACQUIRED -> ACKNOWLEDGED (ACCEPT), ARCHIVED (REJECT, GAP), AVAILABLE (RELEASE, lock
  expiry in ``expire``, ``release_member``), except that a release of a record whose
  delivery count reached ``max_delivery_count`` (``group.share.delivery.count.limit``)
  ARCHIVES it;
- ACKNOWLEDGED and ARCHIVED are final. The SPSO moves past the longest prefix of final
  offsets; it never goes back (``update_log_start_offset`` only moves it forward).

``acquire(member_id, batches, max_records, now_ms, ...)``: ``batches`` are the log's
record batches the caller read (from ``next_fetch_offset()``: pass it as ``fetch_offset``)
as (base offset, last offset), consecutive as the log holds them, data batches only
(control batches left out). Offsets from ``fetch_offset`` (default: the first batch's
base offset) to the last batch's last offset that no batch covers have no
record (compaction, transaction markers) and are ARCHIVED at once, as are the offsets of
``aborted`` ranges (read_committed: the caller passes the aborted transactions' data
ranges) and nothing at or above ``last_stable_offset`` is touched. It acquires the
AVAILABLE in-flight records the batches cover, then new records past ``end_offset``,
whole batch by whole batch: it stops at a batch boundary once ``max_records``
(``share.fetch.max.fetch.records`` / the request's MaxRecords, the caller passes the
smaller) are acquired, and takes no new record once ``end_offset - start_offset`` reached
``max_in_flight`` (``group.share.partition.max.record.locks``); both are soft limits by at
most one batch, as Kafka's (the first batch is taken whatever ``max_records``). It returns the acquired
ranges (ShareFetch's AcquiredRecords: first offset, last offset, delivery count) with a
lock deadline ``now_ms + lock_duration_ms``. ``can_acquire()`` tells the caller whether a
log read can acquire anything (Kafka's ``canAcquireRecords``).

``acknowledge(member_id, batches)``: ShareAcknowledge's / ShareFetch's AcknowledgementBatches
(first offset, last offset, acknowledge types: one type for the batch, or one per offset;
0 GAP, 1 ACCEPT, 2 RELEASE, 3 REJECT). All or nothing, as Kafka's (it rolls back the whole
request on the first bad batch): the answer is one ``AckResult`` (error code, message) for
the partition. INVALID_REQUEST for malformed batches (first > last, unsorted or
overlapping, a type list of the wrong length, an unknown type) or offsets at or past
``end_offset``; INVALID_RECORD_STATE for an offset not ACQUIRED, or acquired by another
member, or for a batch wholly below ``start_offset`` (no longer in flight: Kafka's "Batch
record not found", so a consumer whose lock expired cannot accept what another has since
accepted); of a batch spanning ``start_offset``, the offsets below it are skipped.

Lock expiry: ``next_deadline()`` is the earliest deadline of an ACQUIRED range (None if
none); ``expire(now_ms)`` releases the ranges whose deadline is <= now_ms.
``release_member(member_id)`` releases a member's acquisitions (share session closed,
member left).

Persisted form (``spool.share.persister``'s ShareState / StateBatch): ``to_state()`` is
(start offset, all in-flight batches); ``take_changes()`` is (start offset, the batches of
the offsets changed since the previous call) or None when nothing changed: what
WriteShareGroupState / ShareUpdate carries (the coordinator combines it);
``changes_not_written(batches)`` puts a failed write's offsets back among the changes. ACQUIRED is
written as AVAILABLE with its delivery count (the delivery in progress counted); AVAILABLE
records never delivered (count 0) are not written: an offset the state does not cover is
AVAILABLE with count 0. ``from_state(start_offset, batches, log_start_offset=,
log_end_offset=, auto_offset_reset=)`` rebuilds it: a start offset of -1 is taken from
``share.auto.offset.reset`` ("earliest": the log start offset, "latest": the high
watermark the caller passes as ``log_end_offset``); a start below the log start offset
moves up to it. ``from_state(*to_state())`` is the same partition with every acquisition
released (same delivery counts).
"""

from __future__ import annotations

import itertools
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Protocol

from spool.protocol.errors import Errors
from spool.share.batches import ACKNOWLEDGED, ACQUIRED, ARCHIVED, AVAILABLE, StateBatch

__all__ = [
    "ACCEPT", "ACKNOWLEDGED", "ACQUIRED", "ARCHIVED", "AVAILABLE", "GAP", "REJECT", "RELEASE",
    "STATE_NAMES", "AckBatch", "AckResult", "AcquiredRecords", "InFlightRange", "SharePartition",
    "SharePartitionSummary",
]

# AcknowledgeType (ShareAcknowledge / ShareFetch AcknowledgeTypes)
GAP, ACCEPT, RELEASE, REJECT = 0, 1, 2, 3
STATE_NAMES = {AVAILABLE: "AVAILABLE", ACQUIRED: "ACQUIRED", ACKNOWLEDGED: "ACKNOWLEDGED",
               ARCHIVED: "ARCHIVED"}
_FINAL = (ACKNOWLEDGED, ARCHIVED)
_ACK_STATE = {ACCEPT: ACKNOWLEDGED, REJECT: ARCHIVED, GAP: ARCHIVED, RELEASE: AVAILABLE}


@dataclass(frozen=True, slots=True)
class AcquiredRecords:
    first_offset: int
    last_offset: int
    delivery_count: int


class AcknowledgementBatch(Protocol):
    """What ``acknowledge`` reads: the generated AcknowledgementBatch messages fit."""

    @property
    def first_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def acknowledge_types(self) -> Sequence[int]: ...


@dataclass(frozen=True, slots=True)
class AckBatch:
    first_offset: int
    last_offset: int
    acknowledge_types: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class AckResult:
    error_code: int = Errors.NONE
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class InFlightRange:
    first_offset: int
    last_offset: int
    state: int
    delivery_count: int
    member_id: str | None = None     # ACQUIRED only
    deadline_ms: int | None = None   # ACQUIRED only


@dataclass(frozen=True, slots=True)
class SharePartitionSummary:
    """For describe (CLI, DescribeShareGroupOffsets): the SPSO and the in-flight ranges."""

    start_offset: int
    end_offset: int
    in_flight: tuple[InFlightRange, ...]

    def records(self, state: int) -> int:
        return sum(r.last_offset - r.first_offset + 1 for r in self.in_flight if r.state == state)


class _Range:
    __slots__ = ("first", "last", "state", "count", "member", "deadline")

    def __init__(self, first: int, last: int, state: int, count: int,
                 member: str | None = None, deadline: int | None = None) -> None:
        self.first = first
        self.last = last
        self.state = state
        self.count = count
        self.member = member
        self.deadline = deadline

    def same(self, o: _Range) -> bool:
        return (self.state == o.state and self.count == o.count and self.member == o.member
                and self.deadline == o.deadline)

    def __repr__(self) -> str:
        return (f"_Range({self.first}-{self.last} {STATE_NAMES[self.state]} dc={self.count}"
                f" {self.member} {self.deadline})")


_FIRST = attrgetter("first")


class SharePartition:
    """One share-partition's in-flight state (module doc)."""

    def __init__(self, start_offset: int, *, max_delivery_count: int = 5,
                 max_in_flight: int = 2000, record_lock_duration_ms: int = 30000) -> None:
        self.max_delivery_count = max_delivery_count
        self.max_in_flight = max_in_flight
        self.record_lock_duration_ms = record_lock_duration_ms
        self._start = start_offset
        self._end = start_offset
        self._ranges: list[_Range] = []
        self._dirty: list[tuple[int, int]] = []
        self._start_dirty = False
        self._deadline: int | None = None
        self._deadline_known = True

    # ---- reading ------------------------------------------------------------------------

    @property
    def start_offset(self) -> int:
        return self._start

    @property
    def end_offset(self) -> int:
        return self._end

    @property
    def in_flight_records(self) -> int:
        return self._end - self._start

    def next_fetch_offset(self) -> int:
        """Where the caller reads the log from: the first AVAILABLE offset, else end_offset."""
        for r in self._ranges:
            if r.state == AVAILABLE:
                return r.first
        return self._end

    def can_acquire(self) -> bool:
        return self.next_fetch_offset() < self._end or self._end - self._start < self.max_in_flight

    def next_deadline(self) -> int | None:
        if not self._deadline_known:
            deadlines = [r.deadline for r in self._ranges if r.state == ACQUIRED]
            self._deadline = min(deadlines) if deadlines else None  # type: ignore[type-var]
            self._deadline_known = True
        return self._deadline

    def describe(self) -> SharePartitionSummary:
        return SharePartitionSummary(self._start, self._end, tuple(
            InFlightRange(r.first, r.last, r.state, r.count, r.member, r.deadline)
            for r in self._ranges))

    # ---- acquiring ----------------------------------------------------------------------

    def acquire(self, member_id: str, batches: Sequence[tuple[int, int]], max_records: int,
                now_ms: int, *, lock_duration_ms: int | None = None,
                last_stable_offset: int | None = None,
                aborted: Iterable[tuple[int, int]] = (),
                fetch_offset: int | None = None) -> list[AcquiredRecords]:
        """Acquire for ``member_id`` what the fetched ``batches`` cover (module doc)."""
        if max_records <= 0 or not batches:
            return []
        deadline = now_ms + (self.record_lock_duration_ms if lock_duration_ms is None
                             else lock_duration_ms)
        limit = last_stable_offset if last_stable_offset is not None else batches[-1][1] + 1
        fetched_last = min(batches[-1][1], limit - 1)
        spans = _subtract([(b, min(last, limit - 1)) for b, last in batches if b < limit],
                          sorted(aborted))
        out: list[AcquiredRecords] = []
        cursor = max(batches[0][0] if fetch_offset is None else fetch_offset, self._start)
        acquired = 0
        for first, last in spans:
            if last < self._start:
                continue
            first = max(first, self._start)
            if acquired >= max_records:
                break
            if first > cursor:
                self._archive_gap(cursor, first - 1)
            n, complete = self._acquire_span(member_id, first, last, deadline, out)
            acquired += n
            if not complete:
                break
            cursor = max(cursor, last + 1)
        else:
            if fetched_last >= cursor:
                self._archive_gap(cursor, fetched_last)
        self._advance_start()
        return out

    def _acquire_span(self, member: str, first: int, last: int, deadline: int,
                      out: list[AcquiredRecords]) -> tuple[int, bool]:
        """Acquire [first, last]: (records acquired, False if new ones were refused as
        ``max_in_flight`` records are in flight)."""
        n = 0
        if first < self._end:
            top = min(last, self._end - 1)
            pieces = [(max(r.first, first), min(r.last, top), r.count)
                      for r in self._overlapping(first, top) if r.state == AVAILABLE]
            for a, b, count in pieces:
                i, j = self._slice(a, b)
                r = self._ranges[i]
                if count >= self.max_delivery_count:
                    r.state = ARCHIVED
                else:
                    r.state, r.count, r.member, r.deadline = ACQUIRED, count + 1, member, deadline
                    _append(out, a, b, count + 1)
                    n += b - a + 1
                self._dirty.append((a, b))
                self._coalesce(i, j)
            self._deadline_known = False
        if last >= self._end:
            if self._end - self._start >= self.max_in_flight:
                return n, False
            a = self._end
            self._ranges.append(_Range(a, last, ACQUIRED, 1, member, deadline))
            self._end = last + 1
            self._dirty.append((a, last))
            self._coalesce(len(self._ranges) - 1, len(self._ranges) - 1)
            self._deadline_known = False
            _append(out, a, last, 1)
            n += last - a + 1
        return n, True

    def _archive_gap(self, first: int, last: int) -> None:
        """Offsets without a record: AVAILABLE ones in flight and new ones become ARCHIVED."""
        if first < self._end:
            top = min(last, self._end - 1)
            for a, b in [(max(r.first, first), min(r.last, top))
                         for r in self._overlapping(first, top) if r.state == AVAILABLE]:
                i, j = self._slice(a, b)
                self._ranges[i].state = ARCHIVED
                self._dirty.append((a, b))
                self._coalesce(i, j)
        if last >= self._end:
            a = self._end
            self._ranges.append(_Range(a, last, ARCHIVED, 0))
            self._end = last + 1
            self._dirty.append((a, last))
            self._coalesce(len(self._ranges) - 1, len(self._ranges) - 1)

    # ---- acknowledging, releasing -------------------------------------------------------

    def acknowledge(self, member_id: str,
                    batches: Iterable[AcknowledgementBatch]) -> AckResult:
        """Apply all the batches or none (module doc)."""
        runs: list[tuple[int, int, int]] = []
        prev_last = -1
        for batch in batches:
            first, last, types = batch.first_offset, batch.last_offset, batch.acknowledge_types
            if first < 0 or first > last or first <= prev_last:
                return AckResult(Errors.INVALID_REQUEST,
                                 "Acknowledgement batches are not sorted or overlap, or a first "
                                 "offset is above its last offset.")
            prev_last = last
            if not types or (len(types) != 1 and len(types) != last - first + 1):
                return AckResult(Errors.INVALID_REQUEST,
                                 "The acknowledge types do not match the batch's offsets.")
            if any(t not in _ACK_STATE for t in types):
                return AckResult(Errors.INVALID_REQUEST, f"Invalid acknowledge type: {list(types)}")
            if last < self._start:  # no longer in flight (Kafka: not in its cache)
                return AckResult(Errors.INVALID_RECORD_STATE,
                                 "Batch record not found. The request batch offsets are not "
                                 "found in the cache.")
            if last >= self._end:
                return AckResult(Errors.INVALID_REQUEST,
                                 "Batch record not found. The last offset in request is past "
                                 "acquired records.")
            a = max(first, self._start)
            for r in self._overlapping(a, last):
                if r.state != ACQUIRED:
                    return AckResult(Errors.INVALID_RECORD_STATE,
                                     "The batch cannot be acknowledged. The offset is not "
                                     "acquired.")
                if r.member != member_id:
                    return AckResult(Errors.INVALID_RECORD_STATE,
                                     "Member is not the owner of offset")
            if len(types) == 1:
                runs.append((a, last, types[0]))
            else:
                offset = first
                for t, group in itertools.groupby(types):
                    n = sum(1 for _ in group)
                    lo, hi = max(offset, a), offset + n - 1
                    if hi >= lo:
                        runs.append((lo, hi, t))
                    offset += n
        for a, b, t in runs:
            target = _ACK_STATE[t]
            i, j = self._slice(a, b)
            for k in range(i, j + 1):
                r = self._ranges[k]
                if target == AVAILABLE:
                    self._release(r)
                else:
                    r.state, r.member, r.deadline = target, None, None
            self._dirty.append((a, b))
            self._coalesce(i, j)
        if runs:
            self._deadline_known = False
            self._advance_start()
        return AckResult()

    def release_member(self, member_id: str) -> int:
        """Release every record ``member_id`` holds; the number of records released."""
        return self._release_where(lambda r: r.member == member_id)

    def expire(self, now_ms: int) -> int:
        """Release the acquisitions whose lock deadline is <= now_ms; the number released."""
        deadline = self.next_deadline()
        if deadline is None or deadline > now_ms:
            return 0
        return self._release_where(lambda r: r.deadline <= now_ms)  # type: ignore[operator]

    def _release_where(self, pred: object) -> int:
        n = 0
        for r in self._ranges:
            if r.state == ACQUIRED and pred(r):  # type: ignore[operator]
                self._release(r)
                self._dirty.append((r.first, r.last))
                n += r.last - r.first + 1
        if n:
            self._coalesce(0, len(self._ranges) - 1)
            self._deadline_known = False
            self._advance_start()
        return n

    def _release(self, r: _Range) -> None:
        r.state = AVAILABLE if r.count < self.max_delivery_count else ARCHIVED
        r.member = r.deadline = None

    def update_log_start_offset(self, log_start_offset: int) -> None:
        """The log's start moved past the SPSO (retention, DeleteRecords): forget below it."""
        if log_start_offset <= self._start:
            return
        if log_start_offset >= self._end:
            self._ranges.clear()
            self._end = log_start_offset
        else:
            self._split(log_start_offset)
            del self._ranges[:bisect_right(self._ranges, log_start_offset - 1, key=_FIRST)]
        self._start = log_start_offset
        self._start_dirty = True
        self._deadline_known = False
        self._advance_start()

    # ---- persisted form -----------------------------------------------------------------

    def to_state(self) -> tuple[int, tuple[StateBatch, ...]]:
        """(start offset, batches): the whole state as WriteShareGroupState / ShareSnapshot."""
        return self._start, _batches(self._ranges, self._start, self._end - 1)

    def take_changes(self) -> tuple[int, tuple[StateBatch, ...]] | None:
        """(start offset, batches changed since the last call), None if nothing changed."""
        if not self._dirty and not self._start_dirty:
            return None
        out: list[StateBatch] = []
        lo, hi = self._start, self._end - 1
        for a, b in _merge(sorted(self._dirty)):
            a, b = max(a, lo), min(b, hi)
            if a <= b:
                out.extend(_batches(self._overlapping(a, b), a, b))
        self._dirty.clear()
        self._start_dirty = False
        return self._start, tuple(_join(out))

    def changes_not_written(self, batches: Iterable[StateBatch]) -> None:
        """A write of ``take_changes()`` failed: its offsets and the start offset go with the
        next changes (as they are then)."""
        self._dirty.extend((b.first_offset, b.last_offset) for b in batches)
        self._start_dirty = True

    @classmethod
    def from_state(cls, start_offset: int, batches: Iterable[StateBatch], *,
                   log_start_offset: int, log_end_offset: int,
                   auto_offset_reset: str = "latest", max_delivery_count: int = 5,
                   max_in_flight: int = 2000,
                   record_lock_duration_ms: int = 30000) -> SharePartition:
        """Rebuild from the persister's ShareState (module doc)."""
        limits = {"max_delivery_count": max_delivery_count, "max_in_flight": max_in_flight,
                  "record_lock_duration_ms": record_lock_duration_ms}
        if start_offset < 0:
            if auto_offset_reset not in ("earliest", "latest"):
                raise ValueError(f"share.auto.offset.reset {auto_offset_reset!r}")
            sp = cls(log_start_offset if auto_offset_reset == "earliest" else log_end_offset,
                     **limits)
            sp._start_dirty = True
            return sp
        sp = cls(start_offset, **limits)
        cursor = start_offset
        for b in sorted(batches, key=attrgetter("first_offset")):
            first, last = max(b.first_offset, cursor), b.last_offset
            if last < first:
                continue
            if first > cursor:
                sp._ranges.append(_Range(cursor, first - 1, AVAILABLE, 0))
            state = b.delivery_state if b.delivery_state in _FINAL else AVAILABLE
            sp._ranges.append(_Range(first, last, state, b.delivery_count))
            cursor = last + 1
        sp._end = cursor
        sp._coalesce(0, len(sp._ranges) - 1)
        sp._advance_start()
        sp.update_log_start_offset(log_start_offset)
        sp._start_dirty = sp._start != start_offset
        return sp

    # ---- ranges -------------------------------------------------------------------------

    def _find(self, offset: int) -> int:
        return bisect_right(self._ranges, offset, key=_FIRST) - 1

    def _overlapping(self, first: int, last: int) -> list[_Range]:
        i = max(self._find(first), 0)
        rs = self._ranges
        out = []
        while i < len(rs) and rs[i].first <= last:
            out.append(rs[i])
            i += 1
        return out

    def _split(self, offset: int) -> None:
        """Make a range start at ``offset`` (start < offset < end)."""
        if not self._start < offset < self._end:
            return
        i = self._find(offset)
        r = self._ranges[i]
        if r.first != offset:
            self._ranges.insert(i + 1, _Range(offset, r.last, r.state, r.count, r.member,
                                              r.deadline))
            r.last = offset - 1

    def _slice(self, first: int, last: int) -> tuple[int, int]:
        """Indices i..j of the ranges covering exactly [first, last] (split as needed)."""
        self._split(first)
        self._split(last + 1)
        return self._find(first), self._find(last)

    def _coalesce(self, i: int, j: int) -> None:
        rs = self._ranges
        lo, hi = max(i - 1, 0), min(j + 1, len(rs) - 1)
        if hi <= lo:
            return
        out = [rs[lo]]
        for k in range(lo + 1, hi + 1):
            r = rs[k]
            if out[-1].same(r):
                out[-1].last = r.last
            else:
                out.append(r)
        rs[lo:hi + 1] = out

    def _advance_start(self) -> None:
        rs = self._ranges
        k = 0
        while k < len(rs) and rs[k].state in _FINAL:
            k += 1
        if k:
            self._start = rs[k - 1].last + 1
            del rs[:k]
            self._start_dirty = True


def _append(out: list[AcquiredRecords], first: int, last: int, count: int) -> None:
    if out and out[-1].last_offset + 1 == first and out[-1].delivery_count == count:
        out[-1] = AcquiredRecords(out[-1].first_offset, last, count)
    else:
        out.append(AcquiredRecords(first, last, count))


def _subtract(spans: list[tuple[int, int]],
              holes: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``spans`` (sorted) without the offsets of ``holes`` (sorted)."""
    if not holes:
        return spans
    out = []
    for first, last in spans:
        for h0, h1 in holes:
            if h1 < first or h0 > last:
                continue
            if h0 > first:
                out.append((first, h0 - 1))
            first = h1 + 1
            if first > last:
                break
        if first <= last:
            out.append((first, last))
    return out


def _merge(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in intervals:
        if out and a <= out[-1][1] + 1:
            if b > out[-1][1]:
                out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def _batches(ranges: Iterable[_Range], lo: int, hi: int) -> tuple[StateBatch, ...]:
    """The persisted form of ``ranges`` clipped to [lo, hi]: ACQUIRED as AVAILABLE,
    never-delivered AVAILABLE left out."""
    out = []
    for r in ranges:
        a, b = max(r.first, lo), min(r.last, hi)
        if a > b or (r.state == AVAILABLE and r.count == 0):
            continue
        state = AVAILABLE if r.state == ACQUIRED else r.state
        out.append(StateBatch(a, b, state, r.count))
    return tuple(_join(out))


def _join(batches: list[StateBatch]) -> list[StateBatch]:
    out: list[StateBatch] = []
    for s in batches:
        p = out[-1] if out else None
        if (p is not None and p.last_offset + 1 == s.first_offset
                and p.delivery_state == s.delivery_state
                and p.delivery_count == s.delivery_count):
            out[-1] = StateBatch(p.first_offset, s.last_offset, s.delivery_state,
                                 s.delivery_count)
        else:
            out.append(s)
    return out
