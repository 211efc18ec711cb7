"""``ReplicaFetcherManager``: the follower side of replication (Kafka's ReplicaFetcherManager and
AbstractFetcherThread), one asyncio task per (leader id, fetcher index).

A partition this broker follows (``Partition`` with ``leader_id`` >= 0 and not this node) is
``add``-ed by the ReplicaManager when the metadata image makes it a follower, and goes to the
fetcher ``(leader_id, index)``, ``index = (crc32(topic) * 31 + partition) % num.replica.fetchers``.
Each fetcher owns one ``NodeClient`` to its leader (address from ``addresses(leader_id)``,
looked up again after a failure) and loops::

    truncating partitions  OffsetForLeaderEpoch v4 (replica_id = this node,
                           current_leader_epoch, leader_epoch = the log's latest epoch)
                           -> truncate (below), until the truncation is complete
    fetching partitions    Fetch v12 (replica_id, replica.fetch.wait.max.ms,
                           replica.fetch.min.bytes, replica.fetch.response.max.bytes,
                           replica.fetch.max.bytes per partition, current_leader_epoch,
                           in an incremental fetch session, KIP-227:
                           spool.replica.fetch_session; a partition left out of an
                           answer has nothing new)
                           -> append the leader's batches as they are (offsets and
                           leader epochs kept), HW = min(leader's HW, LEO), log start
                           follows the leader's, ``on_append(partition)``

Truncation (Kafka's getOffsetTruncationState, KIP-101/KIP-279): with no epoch in the log's
cache the log truncates to its high watermark. Otherwise the leader answers the end of the
follower's latest epoch as it knows it, ``(epoch L, end E)``: E = -1 -> truncate to the HW;
the follower then looks up the end of L in its own cache, ``(epoch F, end Ef)``: F == L ->
truncate to min(E, Ef, LEO), done; F != L (the follower never had L) -> truncate to min(Ef,
LEO) and ask again for what is now the latest epoch. Truncation never goes below the log
start (the log restarts there).

Errors: FENCED_LEADER_EPOCH (this replica's epoch is old), UNKNOWN_LEADER_EPOCH (the leader's
is), NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION and anything else put the partition
off for ``replica.fetch.backoff.ms``; the metadata image then says more (``add`` again with the
new leader or epoch replaces the partition's state). OFFSET_OUT_OF_RANGE: the leader's log
start (ListOffsets EARLIEST) past this log's end -> the log restarts empty at it
(``truncate_fully``); otherwise the partition truncates again by epoch. A connection error or
timeout backs off the whole fetcher.

Concurrency: everything runs on the event loop, appends too (as the leader's produce
appends: the bytes go to the page cache, and the next fetch follows without an executor
round trip), except the rest of the log work (truncation, log start moves, a restart of the
log, a due ``flush.messages`` fsync, and an append while such a job is queued), which runs
in the executor, one job at a time per partition (a new job waits for the previous one,
also across fetchers when the leader changes), the partitions of one response side by side.
An append the log refuses backs the partition off and makes it truncate by epoch again. ``remove`` marks the
partitions gone (a job that has not started does nothing) and returns once no job of theirs
is running. No per-partition task or timer: a fetcher sleeps until its earliest backoff ends
or a partition is added.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any, TypeVar

from spool.net.client import ClientError, NodeClient
from spool.protocol._generated import (
    FetchRequest,
    ListOffsetsRequest,
    OffsetForLeaderEpochRequest,
)
from spool.protocol._generated.fetch_request import FetchPartition
from spool.protocol._generated.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsTopic,
)
from spool.protocol._generated.offset_for_leader_epoch_request import (
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from spool.protocol.errors import Errors
from spool.records.batch import _HEADER, HEADER_SIZE, LOG_OVERHEAD
from spool.replica.fetch_session import FetchSessionHandler
from spool.replica.partition import Partition
from spool.security.client_config import ClientSecurity
from spool.storage.leader_epoch import LeaderEpochCache
from spool.util.aio import wait_event

log = logging.getLogger(__name__)

FETCH_VERSION = 12
OFFSET_FOR_LEADER_EPOCH_VERSION = 4
LIST_OFFSETS_VERSION = 4
EARLIEST_TIMESTAMP = -2
UNDEFINED = -1

Key = tuple[str, int]
_SESSION_ERRORS = frozenset({Errors.FETCH_SESSION_ID_NOT_FOUND,
                             Errors.INVALID_FETCH_SESSION_EPOCH,
                             Errors.FETCH_SESSION_TOPIC_ID_ERROR})


@dataclass(eq=False)
class PartitionFetchState:
    """What one fetcher knows of one partition it fetches (Kafka's PartitionFetchState)."""

    partition: Partition
    leader_epoch: int  # the epoch this state fetches in (the Partition's when added)
    truncating: bool = True
    delayed_until: float = 0.0  # monotonic seconds
    removed: bool = False  # replaced or removed: no job of it may touch the log any more

    @property
    def key(self) -> Key:
        return (self.partition.topic, self.partition.partition)


def whole_batches(records: memoryview) -> memoryview:
    """``records`` up to the end of its last whole batch (a leader may cut the last one)."""
    pos, end = 0, len(records)
    while end - pos >= HEADER_SIZE:
        length = _HEADER.unpack_from(records, pos)[1]
        size = LOG_OVERHEAD + length
        if length < HEADER_SIZE - LOG_OVERHEAD or pos + size > end:
            break
        pos += size
    return records[:pos]


def restarts_log(p: Partition, records: memoryview) -> bool:
    """The log is empty and its start lies inside the leader's first batch (the leader's
    log start moved mid-batch: DeleteRecords)."""
    plog = p.log
    leo = plog.log_end_offset
    fields = _HEADER.unpack_from(records, 0)
    base, last = fields[0], fields[0] + fields[6]  # baseOffset, + lastOffsetDelta
    return leo == plog.log_start_offset and base < leo <= last


def append_as_follower(p: Partition, records: memoryview) -> Any:
    """The executor job of a fetched response. An empty log whose start lies inside the
    leader's first batch (``restarts_log``) restarts at that batch's base first, as Kafka's
    follower does; the log start then follows the leader's again."""
    if restarts_log(p, records):
        plog = p.log
        base = _HEADER.unpack_from(records, 0)[0]
        log.info("%s-%d: the leader's first batch starts at %d, before this empty log (at "
                 "%d): the log restarts at %d", p.topic, p.partition, base,
                 plog.log_end_offset, base)
        plog.truncate_fully(base)
    return p.append_as_follower(records)


def truncation_offset(cache: LeaderEpochCache, leo: int, hw: int, leader_epoch: int,
                      end_offset: int) -> tuple[int, bool]:
    """Where a follower truncates given the leader's OffsetForLeaderEpoch answer
    ``(leader_epoch, end_offset)`` for its latest epoch, and whether truncation is then
    complete (Kafka's getOffsetTruncationState; the module docstring)."""
    if end_offset == UNDEFINED:
        return min(hw, leo), True
    if leader_epoch == UNDEFINED:
        return min(end_offset, leo), True
    f_epoch, f_end = cache.end_offset_for(leader_epoch, leo)
    if f_end == UNDEFINED:  # the follower knows no epoch <= the leader's
        return min(end_offset, leo), True
    if f_epoch != leader_epoch:
        return min(f_end, leo), False
    return min(end_offset, f_end, leo), True


_Answer = TypeVar("_Answer")


def matched_answers(sent: dict[Key, tuple[PartitionFetchState, int]],
                    answers: Iterable[tuple[str, int, _Answer]],
                    ) -> Iterator[tuple[_Answer, PartitionFetchState, int]]:
    """Each (topic, partition, answer) of a response with the state and value it was sent for,
    popped from `sent` (what stays there went unanswered); answers for partitions not sent, or
    removed since, are skipped."""
    for topic, partition, answer in answers:
        entry = sent.pop((topic, partition), None)
        if entry is None or entry[0].removed:
            continue
        yield answer, entry[0], entry[1]


def fetcher_index(topic: str, partition: int, num_fetchers: int) -> int:
    return (zlib.crc32(topic.encode()) * 31 + partition) % num_fetchers


@dataclass
class FetchConfig:
    """The replica.* keys a fetcher uses (Kafka's names; ``from_config`` reads them)."""

    max_bytes: int = 1048576  # replica.fetch.max.bytes (per partition)
    response_max_bytes: int = 10485760  # replica.fetch.response.max.bytes
    wait_max_ms: int = 500  # replica.fetch.wait.max.ms
    min_bytes: int = 1  # replica.fetch.min.bytes
    backoff_ms: int = 1000  # replica.fetch.backoff.ms
    num_fetchers: int = 1  # num.replica.fetchers
    socket_timeout_ms: int = 30000  # replica.socket.timeout.ms

    @classmethod
    def from_config(cls, config: Any) -> FetchConfig:
        g = config.get_int
        return cls(g("replica.fetch.max.bytes"), g("replica.fetch.response.max.bytes"),
                   g("replica.fetch.wait.max.ms"), g("replica.fetch.min.bytes"),
                   g("replica.fetch.backoff.ms"), g("num.replica.fetchers"),
                   g("replica.socket.timeout.ms"))


class ReplicaFetcherManager:
    """Every follower fetch loop of this broker (see the module docstring)."""

    def __init__(self, node_id: int, config: Any,
                 addresses: Callable[[int], tuple[str, int] | None],
                 on_append: Callable[[Partition], None], *,
                 executor: Executor | None = None,
                 security: ClientSecurity | None = None,
                 on_bytes_in: Callable[[str, int], None] | None = None) -> None:
        """``on_bytes_in(topic, n)``: ``n`` bytes of batches appended to a follower of
        ``topic`` (the broker's ReplicationBytesIn metric)."""
        self.node_id = node_id
        self.security = security  # how leaders are reached (inter-broker listener's settings)
        self.config = config if isinstance(config, FetchConfig) else FetchConfig.from_config(config)
        self.addresses = addresses
        self.on_append = on_append
        self.on_bytes_in = on_bytes_in
        self.executor = executor
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self._owner: dict[Key, ReplicaFetcher] = {}
        self._jobs: dict[Key, asyncio.Future] = {}  # the last log job of each partition
        self._reaping: set[asyncio.Future] = set()
        self._closed = False

    def add(self, partitions: Iterable[Partition]) -> None:
        """Fetch these followers from their leaders, truncating first (a new state each:
        a partition already fetched is moved or restarted)."""
        if self._closed:
            return
        for p in partitions:
            if p.leader_id < 0 or p.leader_id == self.node_id:
                continue
            key = (p.topic, p.partition)
            self._detach(key)
            fid = (p.leader_id, fetcher_index(p.topic, p.partition, self.config.num_fetchers))
            fetcher = self.fetchers.get(fid)
            if fetcher is None:
                fetcher = self.fetchers[fid] = ReplicaFetcher(self, *fid)
            fetcher.states[key] = PartitionFetchState(p, p.leader_epoch)
            self._owner[key] = fetcher
            fetcher.wake()
        if any(not f.states for f in self.fetchers.values()):
            task = asyncio.ensure_future(self._stop_idle())  # a leader change emptied one
            self._reaping.add(task)
            task.add_done_callback(self._reaping.discard)

    async def remove(self, partitions: Iterable[Partition]) -> None:
        """Stop fetching these; returns when no log job of theirs is running."""
        keys = [(p.topic, p.partition) for p in partitions]
        for key in keys:
            self._detach(key)
        jobs = [j for k in keys if (j := self._jobs.get(k)) is not None]
        if jobs:
            await asyncio.gather(*(asyncio.shield(j) for j in jobs), return_exceptions=True)
        await self._stop_idle()

    async def _stop_idle(self) -> None:
        """Stop the fetchers left without partitions (Kafka's shutdownIdleFetcherThreads)."""
        idle = [fid for fid, f in self.fetchers.items() if not f.states]
        stopping = [self.fetchers.pop(fid).stop() for fid in idle]
        if stopping:
            await asyncio.gather(*stopping, return_exceptions=True)

    def _detach(self, key: Key) -> None:
        fetcher = self._owner.pop(key, None)
        if fetcher is not None:
            state = fetcher.states.pop(key, None)
            if state is not None:
                state.removed = True

    def fetch_state(self, topic: str, partition: int) -> PartitionFetchState | None:
        fetcher = self._owner.get((topic, partition))
        return None if fetcher is None else fetcher.states.get((topic, partition))

    async def shutdown(self) -> None:
        self._closed = True
        for key in list(self._owner):
            self._detach(key)
        fetchers, self.fetchers = list(self.fetchers.values()), {}
        await asyncio.gather(*(f.stop() for f in fetchers), *self._reaping,
                             return_exceptions=True)
        jobs = list(self._jobs.values())
        if jobs:
            await asyncio.gather(*jobs, return_exceptions=True)

    def job_pending(self, key: Key) -> bool:
        """A log job of the partition is queued or running."""
        job = self._jobs.get(key)
        return job is not None and not job.done()

    async def run_log_job(self, state: PartitionFetchState, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` in the executor after the partition's previous job; None, without
        running it, once ``state`` is removed."""
        key = state.key
        prev = self._jobs.get(key)
        if prev is not None and not prev.done():
            with contextlib.suppress(Exception):
                await asyncio.shield(prev)

        def job() -> Any:
            return None if state.removed else fn()

        fut = asyncio.get_running_loop().run_in_executor(self.executor, job)
        self._jobs[key] = fut
        try:
            return await asyncio.shield(fut)
        finally:
            if self._jobs.get(key) is fut and fut.done():
                del self._jobs[key]


class ReplicaFetcher:
    """One fetch loop: the partitions of one leader with one fetcher index."""

    def __init__(self, manager: ReplicaFetcherManager, leader_id: int, index: int) -> None:
        self.manager = manager
        self.leader_id = leader_id
        self.index = index
        self.states: dict[Key, PartitionFetchState] = {}
        self._wake = asyncio.Event()
        self._client: NodeClient | None = None
        self._session = FetchSessionHandler()  # the fetch session (KIP-227) with the leader
        self._stopping = False
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"replica-fetcher-{leader_id}-{index}")

    def wake(self) -> None:
        self._wake.set()

    async def stop(self) -> None:
        # The flag as well as the cancel: Python 3.11's wait_for swallows a cancellation
        # that lands as the event it waits on is set (a partition detached at shutdown
        # wakes the loop), and the loop went on, holding the broker's exit until SIGKILL.
        self._stopping = True
        self._wake.set()
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        if self._client is not None:
            await self._client.close()

    # -- the loop ----------------------------------------------------------------------

    async def _run(self) -> None:
        while not self._stopping:
            self._wake.clear()
            now = time.monotonic()
            ready = [s for s in self.states.values() if s.delayed_until <= now]
            if not ready:
                later = [s.delayed_until for s in self.states.values()]
                timeout = None if not later else max(0.0, min(later) - now)
                await wait_event(self._wake, timeout)
                continue
            client = self._connect()
            if client is None:
                self._back_off(ready, f"no address for broker {self.leader_id}")
                continue
            try:
                truncating = [s for s in ready if s.truncating]
                if truncating:
                    await self._truncate(client, truncating)
                fetching = [s for s in ready if not s.truncating and not s.removed
                            and s.delayed_until <= time.monotonic()]
                if fetching:
                    await self._fetch(client, fetching)
            except ClientError as e:
                self._back_off(ready, f"broker {self.leader_id}: {e}")
                await self._drop_client()
            except asyncio.CancelledError:
                raise
            except Exception:  # a bug or a storage failure: keep the loop, log it loud
                log.exception("replica fetcher %d-%d failed a round", self.leader_id, self.index)
                self._back_off(ready, "error")
            await asyncio.sleep(0)  # let add/remove run between rounds

    def _back_off(self, states: list[PartitionFetchState], why: str) -> None:
        until = time.monotonic() + self.manager.config.backoff_ms / 1000
        for s in states:
            s.delayed_until = until
        log.info("replica fetcher %d-%d backs off %d partitions: %s", self.leader_id,
                 self.index, len(states), why)

    def _connect(self) -> NodeClient | None:
        addr = self.manager.addresses(self.leader_id)
        if addr is None:
            return None
        c = self._client
        if c is None or (c.host, c.port) != tuple(addr):
            if c is not None:
                asyncio.ensure_future(c.close())
            cfg = self.manager.config
            c = self._client = NodeClient(
                addr[0], addr[1], client_id=f"replica-fetcher-{self.manager.node_id}",
                request_timeout_ms=cfg.socket_timeout_ms + cfg.wait_max_ms,
                # a response may pass its max by one batch (KIP-74): leave room for a big one
                max_response_bytes=max(cfg.response_max_bytes, cfg.max_bytes) + (100 << 20),
                security=self.manager.security)
        return c

    async def _drop_client(self) -> None:
        c, self._client = self._client, None
        if c is not None:
            await c.close()

    # -- truncation --------------------------------------------------------------------

    async def _truncate(self, client: NodeClient, states: list[PartitionFetchState]) -> None:
        no_epoch = [s for s in states if s.partition.log.leader_epochs.latest < 0]
        for s in no_epoch:  # nothing to ask: the high watermark is what is safe (Kafka)
            await self._truncate_to(s, s.partition.log.high_watermark, done=True)
        asking = [s for s in states if s not in no_epoch and not s.removed]
        if not asking:
            return
        by_topic: dict[str, list[OffsetForLeaderPartition]] = {}
        sent: dict[Key, tuple[PartitionFetchState, int]] = {}
        for s in asking:
            epoch = s.partition.log.leader_epochs.latest
            sent[s.key] = (s, epoch)
            by_topic.setdefault(s.partition.topic, []).append(OffsetForLeaderPartition(
                partition=s.partition.partition, current_leader_epoch=s.leader_epoch,
                leader_epoch=epoch))
        req = OffsetForLeaderEpochRequest(replica_id=self.manager.node_id, topics=[
            OffsetForLeaderTopic(topic=t, partitions=ps) for t, ps in by_topic.items()])
        resp = await client.request(req, OFFSET_FOR_LEADER_EPOCH_VERSION)
        answers = ((t.topic, r.partition, r) for t in resp.topics for r in t.partitions)
        for r, s, asked in matched_answers(sent, answers):
            if r.error_code:
                self._partition_error(s, r.error_code, "OffsetForLeaderEpoch")
                continue
            plog = s.partition.log
            target, done = truncation_offset(plog.leader_epochs, plog.log_end_offset,
                                             plog.high_watermark, r.leader_epoch, r.end_offset)
            log.info("%s-%d: leader %d says epoch %d ends at %d (asked %d): truncating "
                     "to %d%s", s.partition.topic, r.partition, self.leader_id, r.leader_epoch,
                     r.end_offset, asked, target, "" if done else ", then asking again")
            await self._truncate_to(s, target, done=done)
        for s, _ in sent.values():  # not answered: ask again later
            if not s.removed:
                self._back_off([s], "no OffsetForLeaderEpoch answer")

    async def _truncate_to(self, s: PartitionFetchState, offset: int, *, done: bool) -> None:
        if offset >= 0:  # (below the log start the log restarts there; at or past its end
            # only epoch entries starting there go: Kafka's truncateTo)
            await self.manager.run_log_job(s, lambda: s.partition.truncate_to(offset))
        if s.removed:
            return
        if done:
            s.truncating = False
        elif s.partition.log.leader_epochs.latest < 0:
            s.truncating = False  # no epoch left to ask about: fetch from here

    # -- fetch -------------------------------------------------------------------------

    async def _fetch(self, client: NodeClient, states: list[PartitionFetchState]) -> None:
        cfg = self.manager.config
        wanted: dict[Key, FetchPartition] = {}
        sent: dict[Key, tuple[PartitionFetchState, int]] = {}
        for s in states:
            plog = s.partition.log
            offset = plog.log_end_offset
            sent[s.key] = (s, offset)
            wanted[s.key] = FetchPartition(
                partition=s.partition.partition, current_leader_epoch=s.leader_epoch,
                fetch_offset=offset, last_fetched_epoch=UNDEFINED,
                log_start_offset=plog.log_start_offset, partition_max_bytes=cfg.max_bytes)
        # KIP-227: only what changed is named; the leader answers only what has news
        session_id, epoch, topics, forgotten = self._session.build(wanted)
        req = FetchRequest(
            replica_id=self.manager.node_id, max_wait_ms=cfg.wait_max_ms,
            min_bytes=cfg.min_bytes, max_bytes=cfg.response_max_bytes, isolation_level=0,
            session_id=session_id, session_epoch=epoch, topics=topics,
            forgotten_topics_data=forgotten, rack_id="")
        try:
            resp = await client.request(req, FETCH_VERSION)
        except BaseException:  # what the leader's session holds is unknown: start a new one
            self._session.reset()
            raise
        if not self._session.handle_response(resp):
            if resp.error_code not in _SESSION_ERRORS:  # (those: a full fetch next round)
                self._back_off(states, f"Fetch error {resp.error_code}")
            return
        appends = []
        answers = ((t.topic, r.partition_index, r) for t in resp.responses for r in t.partitions)
        for r, s, offset in matched_answers(sent, answers):
            if r.error_code == Errors.OFFSET_OUT_OF_RANGE:
                await self._out_of_range(client, s, offset)
            elif r.error_code:
                self._partition_error(s, r.error_code, "Fetch")
            else:
                appends.append((s, self._process(s, offset, r)))
        # appends run on the loop; partitions' executor jobs are independent: side by side
        results = await asyncio.gather(*(c for _, c in appends), return_exceptions=True)
        for (s, _), result in zip(appends, results, strict=True):
            if isinstance(result, asyncio.CancelledError):
                raise result
            if isinstance(result, Exception):  # the log refused it (storage, a bad batch)
                p = s.partition
                log.warning("%s-%d: appending what broker %d sent failed: %r; truncating "
                            "by epoch again", p.topic, p.partition, self.leader_id, result)
                s.truncating = True  # (a batch across our log end: the logs diverge)
                s.delayed_until = time.monotonic() + self.manager.config.backoff_ms / 1000

    async def _process(self, s: PartitionFetchState, offset: int, r: Any) -> None:
        """Append what the leader sent, then follow its HW and log start."""
        if s.removed:  # (removed while the response was read)
            return
        p = s.partition
        plog = p.log
        records = whole_batches(memoryview(r.records)) if r.records else memoryview(b"")
        if len(records) and plog.log_end_offset == offset:
            info = await self._append(s, records)
            if info is None or s.removed:
                return
            if self.manager.on_bytes_in is not None:
                self.manager.on_bytes_in(p.topic, len(records))
        if r.log_start_offset > plog.log_start_offset:
            p.update_high_watermark_from_leader(r.high_watermark)
            start = min(r.log_start_offset, plog.high_watermark)
            if start > plog.log_start_offset:  # DeleteRecords or retention on the leader
                await self.manager.run_log_job(s, lambda: plog.advance_log_start_offset(start))
                if s.removed:
                    return
        hw_before = plog.high_watermark
        p.update_high_watermark_from_leader(r.high_watermark)
        if len(records) or plog.high_watermark != hw_before:
            self.manager.on_append(p)

    async def _append(self, s: PartitionFetchState, records: memoryview) -> Any:
        """Append a response's batches; None if ``s`` was removed. On the event loop, as
        the leader's produce appends (the bytes go to the page cache; no executor round
        trip between a response and the next fetch), unless the partition has a log job
        queued or running or the log restarts first (then an executor job, after the
        others). A due ``flush.messages`` fsync runs in the executor and is awaited: the
        next fetch reports what the flush policy made durable, as before."""
        mgr = self.manager
        p = s.partition
        if mgr.job_pending(s.key) or restarts_log(p, records):
            return await mgr.run_log_job(s, lambda: append_as_follower(p, records))
        if s.removed:
            return None
        info = p.append_as_follower(records, flush=False)
        plog = p.log
        if plog.flush_due():
            await mgr.run_log_job(s, plog.flush)
        return info

    async def _out_of_range(self, client: NodeClient, s: PartitionFetchState,
                            offset: int) -> None:
        """Kafka's handleOutOfRangeError: restart at the leader's log start if our log
        ends before it; otherwise our log reaches past the leader's: truncate by epoch."""
        p = s.partition
        req = ListOffsetsRequest(replica_id=self.manager.node_id, isolation_level=0, topics=[
            ListOffsetsTopic(name=p.topic, partitions=[ListOffsetsPartition(
                partition_index=p.partition, current_leader_epoch=s.leader_epoch,
                timestamp=EARLIEST_TIMESTAMP)])])
        resp = await client.request(req, LIST_OFFSETS_VERSION)
        [r] = [r for t in resp.topics for r in t.partitions]
        if r.error_code:
            self._partition_error(s, r.error_code, "ListOffsets")
            return
        if s.removed:
            return
        if r.offset > p.log.log_end_offset:
            start = r.offset
            log.warning("%s-%d: fetch offset %d is below the leader's log start %d: the log "
                        "restarts there", p.topic, p.partition, offset, start)
            await self.manager.run_log_job(s, lambda: p.log.truncate_fully(start))
        else:
            log.warning("%s-%d: fetch offset %d out of the leader's range (its log start %d): "
                        "truncating by epoch again", p.topic, p.partition, offset, r.offset)
            s.truncating = True
            self._back_off([s], "OFFSET_OUT_OF_RANGE")

    def _partition_error(self, s: PartitionFetchState, code: int, api: str) -> None:
        p = s.partition
        if code == Errors.FENCED_LEADER_EPOCH:
            why = f"epoch {s.leader_epoch} is fenced: waiting for the metadata"
        elif code == Errors.UNKNOWN_LEADER_EPOCH:
            why = f"the leader does not know epoch {s.leader_epoch} yet"
        else:
            why = f"error {code}"
        log.info("%s-%d: %s from broker %d: %s", p.topic, p.partition, api, self.leader_id, why)
        until = time.monotonic() + self.manager.config.backoff_ms / 1000
        s.delayed_until = until
