"""The share-partition leader's side of KIP-932: Kafka's SharePartitionManager.

``share_manager(broker)`` is the broker's one ``ShareManager`` (made on first use). It
keeps:

- the share sessions (``spool.broker.share_sessions.ShareSessionCache``, at most
  ``group.share.max.share.sessions``); a session that ends (FINAL epoch, its connection
  gone) releases its member's acquired records, and the group's last session here to end
  drops the group's share-partitions (Kafka's onGroupEmpty: an empty group's offsets may be
  reset or deleted through the coordinator; the next fetch reads the state again);
- a ``SharePartition`` (``spool.share.partition``: the pure state machine) per (group,
  topic id, partition) this broker leads, made on first use: its state is read from
  ``broker.share_persister`` at the partition's leader epoch; a start offset of -1 (never
  set) or a key never initialized starts at ``share.auto.offset.reset`` of the group
  (``broker.group_configs``: earliest = log start, latest = high watermark,
  by_duration:<ISO-8601> = the first record at/after now - duration). A start offset the
  log no longer holds (retention) moves up to the log start. The entry is dropped when
  this broker stops leading the partition or its leader epoch changes (read again at the
  new epoch: the persister fences the old leader's writes).

Acquisition (``fetch``): from the share-partition's next offset to acquire, the log is read
as Fetch reads it (``PartitionLog.read``: whole batches of one segment up to the high
watermark, or the LSO under ``share.isolation.level=read_committed``), the batch headers
give the offsets, the share-partition acquires what it may for the member (at most
``max_records``, ``group.share.partition.max.record.locks`` in flight, delivery counts
+1, a lock until now + ``share.record.lock.duration.ms``), and the answer carries the file
region trimmed to the batches holding acquired offsets (sendfile, zero copy) and the
acquired ranges. A fetch that acquires nothing waits (long poll) for an append to the
partition or for records released here (acknowledged RELEASE, a lock expired, a session
closed): ``broker.notify_key(share_key(...))``. A partition in error (unknown, not led
here, refused) does not end the wait: it is answered with the others, at once only when
every partition is in error (Kafka's DelayedShareFetch).

Locks expire on the event loop: one timer per share-partition at its earliest lock
deadline; expired records become AVAILABLE again (or ARCHIVED at
``share.delivery.count.limit``) and waiting fetches wake.

Durability: every change that must survive a restart (acknowledgements, releases, lock
expiries, start offset moves) is written through ``broker.share_persister.write`` before
the acknowledgement is answered, one write at a time per share-partition (in order). A
failed write is the acknowledgement's error; its changes are not forgotten but carried by
the share-partition's next write (an acknowledgement whose changes an earlier write took
waits for that write, and is answered by the one that writes them). An acquisition is not written by itself
(Kafka's choice): it rides along the share-partition's next write (delivery counted), and
a record acquired after the last write comes back from a crash AVAILABLE with its last
written count. The start offset ``share.auto.offset.reset`` chose is written at load.
A write refused as fenced (FENCED_STATE_EPOCH: the group's offsets were reset;
FENCED_LEADER_EPOCH: another leader) drops the share-partition here, as Kafka's
fencedSharePartitionHandler: the next fetch reads the state again. ``forget_group`` does
the same for a group whose state the coordinator reset or deleted; ``describe`` shows a
group's loaded share-partitions (start and end offsets, in-flight ranges).
Everything runs on the event loop; the share-partition is never touched from a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from spool.broker.server import FileRegion
from spool.broker.share_sessions import ShareSession, ShareSessionCache
from spool.cluster.group_config import parse_by_duration
from spool.protocol.errors import Errors, KafkaError
from spool.replica.partition import NotLeader
from spool.share.partition import SharePartition, SharePartitionSummary

log = logging.getLogger("spool.share")

READ_COMMITTED = "read_committed"
# a write refused for these: this state is not the one to serve (Kafka's
# fencedSharePartitionHandler drops the share-partition from its cache)
_FENCED = (Errors.FENCED_STATE_EPOCH, Errors.FENCED_LEADER_EPOCH, Errors.NOT_LEADER_OR_FOLLOWER,
           Errors.GROUP_ID_NOT_FOUND, Errors.UNKNOWN_TOPIC_OR_PARTITION)


@dataclass(frozen=True)
class AckBatch:
    first_offset: int
    last_offset: int
    acknowledge_types: tuple[int, ...]


@dataclass
class PartitionFetch:
    """One partition's part of a ShareFetch answer."""

    topic: str | None = None
    error_code: int = 0
    error_message: str | None = None
    records: Any = b""  # FileRegion or b""
    acquired: list[tuple[int, int, int]] = field(default_factory=list)  # first, last, count
    size: int = 0

    @classmethod
    def error(cls, topic: str | None, e: KafkaError) -> PartitionFetch:
        return cls(topic, e.code, e.message)


def share_key(group_id: str, topic: str, partition: int) -> tuple:
    """The wait key of fetches of ``group_id`` on a partition (records released)."""
    return ("share", group_id, topic, partition)


@dataclass
class _Entry:
    group_id: str
    topic: str
    topic_id: UUID
    partition: int
    leader_epoch: int
    sp: SharePartition | None = None
    state_epoch: int = 0
    loading: asyncio.Future | None = None
    timer: asyncio.TimerHandle | None = None
    timer_at: int | None = None
    write_lock: asyncio.Lock = field(default_factory=asyncio.Lock)


def share_manager(broker) -> ShareManager:
    manager = getattr(broker, "share_manager", None)
    if manager is None:
        manager = broker.share_manager = ShareManager(broker)
    return manager


class ShareManager:
    def __init__(self, broker) -> None:
        self.broker = broker
        self.sessions = ShareSessionCache(broker.config.get_int("group.share.max.share.sessions"),
                                          on_close=self._session_closed)
        self.entries: dict[tuple[str, UUID, int], _Entry] = {}
        self._watched: set[int] = set()
        self._tasks: set[asyncio.Task] = set()

    # ---- group settings

    def _group(self, group_id: str, name: str):
        return self.broker.group_configs.get(group_id, name)

    def lock_duration_ms(self, group_id: str) -> int:
        return int(self._group(group_id, "share.record.lock.duration.ms"))

    # ---- membership

    def check_member(self, group_id: str, member_id: str) -> None:
        """UNKNOWN_MEMBER_ID when this broker coordinates ``group_id`` as a share group
        and ``member_id`` is not one of its members; GROUP_ID_NOT_FOUND when it holds a
        group of that id of another type. A group coordinated elsewhere (a cluster) is
        not checked here."""
        groups = getattr(self.broker, "groups", None)
        coordinator = getattr(groups, "coordinator", None)
        group = getattr(coordinator, "groups", {}).get(group_id) if coordinator else None
        if group is None:
            return
        if type(group).__name__ != "ShareGroup":
            raise KafkaError(Errors.GROUP_ID_NOT_FOUND,
                             f"group {group_id} is not a share group")
        members = getattr(group, "members", None)
        if members is not None and member_id not in members:
            raise KafkaError(Errors.UNKNOWN_MEMBER_ID,
                             f"member {member_id} is not a member of share group {group_id}")

    # ---- sessions and connections

    def watch_connection(self, conn) -> None:
        """End the sessions opened on ``conn`` when it goes (once per connection)."""
        if conn is None or id(conn) in self._watched:
            return
        self._watched.add(id(conn))

        def gone(_fut, conn=conn) -> None:
            self._watched.discard(id(conn))
            self.sessions.connection_gone(conn)

        conn.hangup_future().add_done_callback(gone)

    def _session_closed(self, session: ShareSession) -> None:
        self._spawn(self._member_gone(session.group_id, session.member_id))

    async def close_session(self, group_id: str, member_id: str) -> None:
        """FINAL epoch: end the session and release the member's records."""
        session = self.sessions.remove(group_id, member_id, notify=False)
        if session is not None:
            await self._member_gone(group_id, member_id)

    async def _member_gone(self, group_id: str, member_id: str) -> None:
        """A session ended: its member's records are released; when it was the group's last
        session here, the group's share-partitions are dropped (Kafka's onGroupEmpty): the
        next fetch reads their state again, as an offsets reset or delete left it."""
        await self.release_member(group_id, member_id)
        if not self.sessions.members(group_id):
            self.forget_group(group_id)

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def release_member(self, group_id: str, member_id: str) -> None:
        """Every record ``member_id`` holds in ``group_id`` here goes back to AVAILABLE."""
        for entry in [e for e in self.entries.values() if e.group_id == group_id]:
            if entry.sp is None:
                continue
            if entry.sp.release_member(member_id):
                await self._persist(entry)
                self._changed(entry)

    # ---- share-partitions

    def _leader(self, topic: str, topic_id: UUID, partition: int):
        replicas = self.broker.replicas
        part = replicas.leader_partition(topic, partition)  # NotLeader, UNKNOWN_TOPIC_...
        if part.topic_id is not None and part.topic_id != topic_id:
            raise KafkaError(Errors.UNKNOWN_TOPIC_ID)
        return part

    async def _entry(self, group_id: str, topic: str, topic_id: UUID, partition: int) -> _Entry:
        key = (group_id, topic_id, partition)
        try:
            part = self._leader(topic, topic_id, partition)
        except KafkaError:
            if key in self.entries:  # no longer led here: its state goes with the leadership
                self._drop(self.entries[key])
            raise
        entry = self.entries.get(key)
        if entry is not None and entry.leader_epoch != part.leader_epoch:
            self._drop(entry)
            entry = None
        if entry is None:
            entry = _Entry(group_id, topic, topic_id, partition, part.leader_epoch)
            self.entries[key] = entry
        if entry.sp is None:
            if entry.loading is None:
                entry.loading = asyncio.ensure_future(self._load(entry, part))
            try:
                await asyncio.shield(entry.loading)
            except Exception as e:
                if self.entries.get(key) is entry:
                    del self.entries[key]
                if isinstance(e, KafkaError):
                    raise
                log.exception("share-partition %s %s-%d: state not loaded", group_id, topic,
                              partition)
                raise KafkaError(Errors.UNKNOWN_SERVER_ERROR, str(e)) from e
        return entry

    def _drop(self, entry: _Entry) -> None:
        if entry.timer is not None:
            entry.timer.cancel()
        key = (entry.group_id, entry.topic_id, entry.partition)
        if self.entries.get(key) is entry:
            del self.entries[key]
        self.broker.notify_key(share_key(entry.group_id, entry.topic, entry.partition))

    def forget_group(self, group_id: str) -> None:
        """Drop the share-partitions of ``group_id`` held here (its state was reset or
        deleted through the persister): the next fetch reads the state again."""
        for entry in [e for e in self.entries.values() if e.group_id == group_id]:
            self._drop(entry)

    def describe(self, group_id: str) -> dict[tuple[str, int], SharePartitionSummary]:
        """The share-partitions of ``group_id`` this broker leads and has loaded:
        (topic, partition) -> start offset, end offset and in-flight ranges."""
        return {(e.topic, e.partition): e.sp.describe() for e in self.entries.values()
                if e.group_id == group_id and e.sp is not None}

    async def _load(self, entry: _Entry, part) -> None:
        state = await self.broker.share_persister.read(
            entry.group_id, entry.topic_id, entry.partition, entry.leader_epoch)
        if isinstance(state, KafkaError):
            if state.code != Errors.UNKNOWN_TOPIC_OR_PARTITION:
                raise state
            start, batches, state_epoch = -1, (), 0  # never initialized: auto.offset.reset
        else:
            start, batches, state_epoch = state.start_offset, state.batches, state.state_epoch
        plog = part.log
        g = entry.group_id
        reset = str(self._group(g, "share.auto.offset.reset")).strip().lower()
        latest = plog.high_watermark
        if start < 0 and reset.startswith("by_duration:"):  # chosen here, set as "latest"
            latest, reset = self._offset_by_duration(reset.split(":", 1)[1], plog), "latest"
        entry.state_epoch = state_epoch
        entry.sp = SharePartition.from_state(
            start, batches, log_start_offset=plog.log_start_offset, log_end_offset=latest,
            auto_offset_reset="earliest" if reset == "earliest" else "latest",
            max_delivery_count=int(self._group(g, "share.delivery.count.limit")),
            max_in_flight=int(self._group(g, "share.partition.max.record.locks")),
            record_lock_duration_ms=self.lock_duration_ms(g))
        if start < 0:  # the offset share.auto.offset.reset chose is written now: a later
            await self._persist(entry)  # reload must not pick "latest" again

    def _offset_by_duration(self, duration: str, plog) -> int:
        """by_duration:<ISO-8601>: the first record at/after now - duration."""
        ms = parse_by_duration(f"by_duration:{duration}")
        if ms is None:
            return plog.high_watermark
        found = plog.offset_for_timestamp(self.broker.clock.now_ms() - ms,
                                          max_offset=plog.high_watermark)
        return found[0] if found else plog.high_watermark

    # ---- fetch

    async def fetch(self, ctx, group_id: str, member_id: str,
                    parts: list[tuple[UUID, int, str | None]], denied: set[str], *,
                    max_wait_ms: int, min_bytes: int, max_bytes: int, max_records: int,
                    record_limit: bool = False) -> dict[tuple[UUID, int], PartitionFetch]:
        """Acquire records of ``parts`` for the member, waiting up to ``max_wait_ms`` for
        ``min_bytes`` (module doc)."""
        broker = self.broker
        view = broker.view
        out: dict[tuple[UUID, int], PartitionFetch] = {}
        todo: list[tuple[tuple[UUID, int], str]] = []
        for tid, p, name in parts:
            key = (tid, p)
            if name is None:
                out[key] = PartitionFetch(None, Errors.UNKNOWN_TOPIC_ID)
            elif name in denied:
                out[key] = PartitionFetch(name, Errors.TOPIC_AUTHORIZATION_FAILED)
            elif view.partition(name, p) is None:
                out[key] = PartitionFetch(name, Errors.UNKNOWN_TOPIC_OR_PARTITION)
            else:
                todo.append((key, name))
        if not todo:  # every partition in error: answered at once
            return out
        records_left = min(max_records if max_records > 0 else 2**31 - 1,
                           broker.config.get_int("share.fetch.max.fetch.records"))
        bytes_left = max_bytes if max_bytes > 0 else 2**31 - 1
        total = 0
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(max_wait_ms, 0) / 1000.0
        conn = ctx.conn
        keys = [k for (_, p), name in todo
                for k in ((name, p), share_key(group_id, name, p))]
        while True:
            for key, name in todo:
                if key in out or records_left <= 0:
                    continue
                try:
                    entry = await self._entry(group_id, name, key[0], key[1])
                    if conn.gone:  # went while the state loaded: acquire nothing for it
                        break
                    pf = self._acquire(entry, member_id, bytes_left, records_left, record_limit,
                                       first=(total == 0))
                except KafkaError as e:
                    out[key] = PartitionFetch.error(name, e)
                    continue
                if pf.acquired:
                    out[key] = pf
                    total += pf.size
                    bytes_left -= pf.size
                    records_left -= sum(last - first + 1 for first, last, _ in pf.acquired)
            if (conn.gone or total >= max(min_bytes, 1) or records_left <= 0
                    or all(key in out for key, _ in todo)):
                break
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            await broker.wait_for_append(keys, remaining, interrupt=conn.hangup_future())
            if conn.gone:  # acquire nothing more: its session's records are being released
                break
        for key, name in todo:
            out.setdefault(key, PartitionFetch(name))
        return out

    def _acquire(self, entry: _Entry, member_id: str, max_bytes: int, max_records: int,
                 record_limit: bool, first: bool) -> PartitionFetch:
        part = self._leader(entry.topic, entry.topic_id, entry.partition)
        if part.leader_epoch != entry.leader_epoch:
            raise NotLeader(entry.topic, entry.partition, part.leader_id, part.leader_epoch)
        plog = part.log
        sp = entry.sp
        assert sp is not None
        if sp.start_offset < plog.log_start_offset:  # retention removed records
            sp.update_log_start_offset(plog.log_start_offset)
        read_committed = str(self._group(entry.group_id, "share.isolation.level")) == \
            READ_COMMITTED
        limit = plog.last_stable_offset if read_committed else plog.high_watermark
        offset = sp.next_fetch_offset()
        if offset >= limit or (max_bytes <= 0 and not first) or not sp.can_acquire():
            return PartitionFetch(entry.topic)
        sl = plog.read(offset, max(max_bytes, 0), max_offset=limit, min_one_batch=first)
        if sl is None or sl.length == 0:
            return PartitionFetch(entry.topic)
        headers = []  # enough batches for max_records from the fetch offset, no more
        for pos, h in sl.segment.batches(sl.position, sl.position + sl.length):
            headers.append((pos, h))
            if h.last_offset - offset + 1 >= max_records:
                break
        batches = [(h.base_offset, h.last_offset) for _, h in headers if not h.is_control]
        if record_limit:  # v2 RECORD_LIMIT: not one record past max_records (a batch is cut)
            batches = _cut(batches, offset, max_records)
        aborted = _aborted_ranges(headers, plog.aborted_transactions(sl.first_offset, limit)) \
            if read_committed else []
        try:
            fd = sl.dup_fd()
        except OSError as e:  # out of descriptors: acquire nothing, stay up
            log.warning("share fetch %s-%d: no descriptor for the read: %s",
                        entry.topic, entry.partition, e)
            return PartitionFetch(entry.topic)
        acquired = sp.acquire(member_id, batches, max_records, self.broker.clock.now_ms(),
                              lock_duration_ms=self.lock_duration_ms(entry.group_id),
                              aborted=aborted, fetch_offset=offset)
        if not acquired:
            os.close(fd)
            return PartitionFetch(entry.topic)
        self._schedule(entry)
        lo, hi = acquired[0].first_offset, acquired[-1].last_offset
        kept = [(pos, h) for pos, h in headers if h.last_offset >= lo and h.base_offset <= hi]
        start = kept[0][0]
        end = kept[-1][0] + kept[-1][1].size
        return PartitionFetch(entry.topic, records=FileRegion(fd, start, end - start),
                              acquired=[(a.first_offset, a.last_offset, a.delivery_count)
                                        for a in acquired], size=end - start)

    # ---- acknowledge

    async def acknowledge(self, group_id: str, member_id: str, topic: str, topic_id: UUID,
                          partition: int, batches: list[AckBatch]) -> KafkaError | None:
        """Settle the member's records (ACCEPT, RELEASE, REJECT, GAP); persisted before it
        returns None. A share-partition not held here (never fetched from this broker, or
        dropped: leadership moved, the group emptied) is UNKNOWN_TOPIC_OR_PARTITION, as
        Kafka's SharePartitionManager.acknowledge answers: nothing of it is acquired here."""
        if (group_id, topic_id, partition) not in self.entries:
            return KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION,
                              "no share-partition of this group is held here")
        try:
            entry = await self._entry(group_id, topic, topic_id, partition)
            sp = entry.sp
            assert sp is not None
            result = sp.acknowledge(member_id, batches)
        except KafkaError as e:
            return e
        if result.error_code:
            return KafkaError(result.error_code, result.error_message)
        err = await self._persist(entry)
        self._changed(entry)
        return err

    # ---- persistence, timers, wake-ups

    async def _persist(self, entry: _Entry) -> KafkaError | None:
        async with entry.write_lock:
            sp = entry.sp
            if sp is None:
                return None
            changes = sp.take_changes()
            if changes is None:
                return None
            start, batches = changes
            err = await self.broker.share_persister.write(
                entry.group_id, entry.topic_id, entry.partition, entry.state_epoch,
                entry.leader_epoch, start, list(batches))
            if err is not None:
                log.warning("share-partition %s %s-%d: state not written: %s",
                            entry.group_id, entry.topic, entry.partition, err)
                if err.code in _FENCED:  # another leader, or the state was reset: read again
                    self._drop(entry)
                else:  # the next write carries them (and answers whoever waits for it)
                    sp.changes_not_written(batches)
            return err

    def _changed(self, entry: _Entry) -> None:
        self._schedule(entry)
        self.broker.notify_key(share_key(entry.group_id, entry.topic, entry.partition))

    def _schedule(self, entry: _Entry) -> None:
        sp = entry.sp
        at = sp.next_deadline() if sp is not None else None
        if at == entry.timer_at:
            return
        if entry.timer is not None:
            entry.timer.cancel()
            entry.timer = None
        entry.timer_at = at
        if at is None:
            return
        delay = max(0.0, (at - self.broker.clock.now_ms()) / 1000.0)
        entry.timer = asyncio.get_running_loop().call_later(delay, self._expire, entry)

    def _expire(self, entry: _Entry) -> None:
        entry.timer = None
        entry.timer_at = None
        sp = entry.sp
        if sp is None or self.entries.get(
                (entry.group_id, entry.topic_id, entry.partition)) is not entry:
            return
        if sp.expire(self.broker.clock.now_ms()):
            self._spawn(self._persist(entry))
            self.broker.notify_key(share_key(entry.group_id, entry.topic, entry.partition))
        self._schedule(entry)

    async def close(self) -> None:
        for entry in list(self.entries.values()):
            if entry.timer is not None:
                entry.timer.cancel()
        for task in list(self._tasks):
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


def _aborted_ranges(headers, aborted: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The data batches of aborted transactions among ``headers`` (read_committed), as
    (first, last) ranges: a transactional batch of an aborted producer from the
    transaction's first offset up to that producer's abort marker (as a consumer filters)."""
    if not aborted:
        return []
    starts = sorted(aborted, key=lambda a: a[1])
    active: set[int] = set()
    out: list[tuple[int, int]] = []
    i = 0
    for _, h in headers:
        while i < len(starts) and starts[i][1] <= h.last_offset:
            active.add(starts[i][0])
            i += 1
        if h.producer_id not in active:
            continue
        if h.is_control:
            active.discard(h.producer_id)
        elif h.is_transactional:
            out.append((h.base_offset, h.last_offset))
    return out


def _cut(batches: list[tuple[int, int]], offset: int, n: int) -> list[tuple[int, int]]:
    """``batches`` (base, last) up to the ``n``-th offset from ``offset``: the last one cut."""
    out = []
    for base, last in batches:
        top = max(base, offset) + n - 1
        out.append((base, min(last, top)))
        if last >= top:
            break
        n -= last - max(base, offset) + 1
    return out
