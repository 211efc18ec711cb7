"""``RaftDriver``: the asyncio shell around one node's Raft core (Kafka's KafkaRaftClient driver).

The core (``spool.cluster.raft.node.RaftNode``) is sans-I/O; this shell gives
it a clock, the network and the disk:

- **One step at a time.** Every call into the core (poll, handle_request,
  handle_response, append, resign, create_snapshot) runs under one
  ``asyncio.Lock`` in the broker's executor (``run_blocking``): the disk log
  fsyncs inside the step, so the event loop never blocks on it and the core
  never sees two callers. The outputs of a step are handled on the loop, in
  order, before the next step starts.
- **Timers**: a task sleeps until ``node.next_poll_ms`` (woken early when a
  step may have moved it) and polls. ``now_ms`` is the wall clock (Kafka's
  DescribeQuorum timestamps are wall-clock milliseconds).
- **Network out**: ``Send(dst, request)`` goes to the voter's endpoint from
  ``controller.quorum.voters`` through ``spool.net.client.NodeClient`` (two per peer: one
  for Fetch/FetchSnapshot, which a leader may park up to its max wait, one
  for Vote/BeginQuorumEpoch/EndQuorumEpoch, which must not wait behind it);
  the answer goes back to ``handle_response``. A lost request is dropped:
  the core retries on its own timers.
- **Network in**: ``handle_request(src, request)`` (the controller-listener
  handlers call it) returns the core's answer; a Fetch the core parks is
  answered when a later step emits its ``Respond``.
- **Committed records**: an applier task delivers, strictly in log order, to
  every ``RaftListener``: the latest snapshot at start
  (``handle_snapshot``), then committed entries (``handle_commit``) as the
  high watermark advances, leader changes (``handle_leader_change``) at
  their place in that order, and a snapshot the node installed from the
  leader (``handle_snapshot`` again). ``wait_applied(offset)`` waits until
  an entry was delivered.
- **Snapshots**: once ``metadata.log.max.record.bytes.between.snapshots``
  bytes were applied since the last one, or
  ``metadata.log.max.snapshot.interval.ms`` passed with something new, the
  snapshot source (a callable giving the metadata image as record values at
  the applied offset) is written as a snapshot and the log below it goes.

Lifecycle: ``RaftDriver(...)`` -> ``add_listener`` / ``set_snapshot_source``
-> ``await start()`` -> ... -> ``await shutdown()``: a leader first resigns
(EndQuorumEpoch to the others) and waits briefly for a successor, then the
tasks stop, channels close and the log is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from spool.cluster.raft import wire
from spool.cluster.raft.config import RaftConfig
from spool.cluster.raft.messages import (
    FetchRequest,
    FetchSnapshotRequest,
    Request,
    Response,
    SnapshotId,
)
from spool.cluster.raft.node import LEADER, RaftNode
from spool.cluster.raft.outputs import (
    HighWatermarkAdvanced,
    LeaderChanged,
    Respond,
    Send,
    SnapshotInstalled,
)
from spool.cluster.raft.snapshots import build_snapshot, snapshot_values
from spool.cluster.raft.store import LogEntry
from spool.net.client import ClientError, NodeClient
from spool.protocol.errors import Errors, KafkaError
from spool.security.client_config import ClientSecurity
from spool.util.clock import Clock, SystemClock

log = logging.getLogger("spool.raft")

APPLY_CHUNK = 2000  # entries read and delivered per step of the applier


class RaftListener(Protocol):
    """What follows the committed log (``spool.cluster.loader.MetadataLoader`` is one)."""

    def handle_snapshot(self, snapshot_id: SnapshotId, values: list[bytes]) -> None:
        """Reset to the image a snapshot holds: record values of offsets
        [0, snapshot_id.end_offset)."""

    def handle_commit(self, entries: list[LogEntry]) -> None:
        """Committed entries in log order, each delivered once; ``value`` None for the
        quorum's own control entries (LeaderChange)."""

    def handle_leader_change(self, leader_id: int, epoch: int) -> None:
        """A new epoch or leader (``leader_id`` -1: unknown yet)."""


RunBlocking = Callable[..., Awaitable[Any]]


class RaftDriver:
    """One node's Raft core driven over asyncio (module doc)."""

    def __init__(self, node_id: int, voters: Mapping[int, tuple[str, int]], log_store,
                 quorum_state, config: RaftConfig, run_blocking: RunBlocking, *,
                 clock: Clock | None = None, rng: random.Random | None = None,
                 snapshot_max_bytes: int = 20 * 1024 * 1024,
                 snapshot_max_interval_ms: int = 3_600_000,
                 security: ClientSecurity | None = None) -> None:
        self.node_id = node_id
        self.security = security  # how the other voters are reached (controller listener)
        self.voters = dict(voters)
        self.log = log_store
        self.quorum_state = quorum_state
        self.config = config
        self._run_blocking = run_blocking
        self.clock = clock or SystemClock()
        self._rng = rng or random.Random()
        self.snapshot_max_bytes = snapshot_max_bytes
        self.snapshot_max_interval_ms = snapshot_max_interval_ms
        self.node: RaftNode | None = None
        self._lock = asyncio.Lock()
        self._listeners: list[RaftListener] = []
        self._snapshot_source: Callable[[], Sequence[bytes]] | None = None
        self._channels: dict[tuple[int, str], NodeClient] = {}
        self._unreachable: set[int] = set()  # nodes whose last request failed to connect/answer
        self._parked: dict[int, tuple[Request, asyncio.Future]] = {}
        self._tasks: set[asyncio.Task] = set()
        self._timer_wake = asyncio.Event()
        self._apply_wake = asyncio.Event()
        self._events: list[tuple] = []  # ("hw", offset) | ("leader", id, epoch) | ("snapshot", sid)
        self._applied = 0  # next offset to deliver
        self._applied_waiters: list[tuple[int, asyncio.Future]] = []
        self._bytes_since_snapshot = 0
        self._last_snapshot_ms = 0
        self._stopping = False
        self._closed = False
        self.leader_id = -1
        self.epoch = 0
        self.high_watermark = 0

    # ---- setup

    def add_listener(self, listener: RaftListener) -> None:
        """Before ``start``: ``listener`` gets the snapshot, then every committed entry."""
        self._listeners.append(listener)

    def set_snapshot_source(self, source: Callable[[], Sequence[bytes]]) -> None:
        """``source()`` gives the image at the applied offset as metadata record values."""
        self._snapshot_source = source

    def now_ms(self) -> int:
        return self.clock.now_ms()

    def reachable(self, node_id: int) -> bool:
        """False while this node's last request to ``node_id`` failed (no connection, no
        answer in time): a killed leader is known unreachable as soon as the Fetch parked
        on it is cut, before any election says who leads next."""
        return node_id not in self._unreachable

    async def start(self) -> None:
        now = self.now_ms()
        self.node = await self._run_blocking(
            RaftNode, self.node_id, self.voters.keys(), self.log, self.quorum_state,
            self.config, self._rng, now)
        self.epoch, self.leader_id = self.node.epoch, self.node.leader_id
        self._last_snapshot_ms = now
        sid = self.log.latest_snapshot_id
        if sid is not None:
            self._events.append(("snapshot", sid))
        else:
            self._applied = self.log.log_start_offset
        log.info("raft node %d: epoch %d, leader %d, role %s, log [%d, %d), voters %s",
                 self.node_id, self.node.epoch, self.node.leader_id, self.node.role,
                 self.log.log_start_offset, self.log.end_offset, sorted(self.voters))
        self._spawn(self._timer_loop())
        self._spawn(self._apply_loop())
        self._apply_wake.set()
        await self._step(lambda now: (None, self.node.poll(now)))

    def _spawn(self, coro) -> asyncio.Task:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None and not self._stopping:
            log.error("raft node %d: task failed", self.node_id, exc_info=task.exception())

    # ---- state

    @property
    def is_leader(self) -> bool:
        return self.node is not None and self.node.role == LEADER

    @property
    def role(self) -> str:
        return self.node.role if self.node is not None else "starting"

    @property
    def applied_offset(self) -> int:
        """Every entry below it was delivered to the listeners."""
        return self._applied

    def endpoint(self, node_id: int) -> tuple[str, int] | None:
        return self.voters.get(node_id)

    # ---- stepping the core

    async def _step(self, fn: Callable[[int], tuple[Any, list]]) -> Any:
        """Run ``fn(now_ms) -> (value, outputs)`` in the executor under the lock; handle the
        outputs; return the value."""
        async with self._lock:
            if self.node is None or self._closed:
                raise KafkaError(Errors.NOT_CONTROLLER, "the quorum is not running")
            value, outputs = await self._run_blocking(fn, self.now_ms())
            self._handle_outputs(outputs)
        self._timer_wake.set()
        return value

    def _handle_outputs(self, outputs: list) -> None:
        node = self.node
        for out in outputs:
            if isinstance(out, Send):
                if not self._stopping or not isinstance(out.request, FetchRequest):
                    self._spawn(self._send(out.dst, out.request))
            elif isinstance(out, Respond):
                parked = self._parked.get(id(out.request))
                if parked is not None and not parked[1].done():
                    parked[1].set_result(out.response)
            elif isinstance(out, HighWatermarkAdvanced):
                self.high_watermark = out.high_watermark
                self._events.append(("hw", out.high_watermark))
                self._apply_wake.set()
            elif isinstance(out, LeaderChanged):
                if (out.leader_id, out.epoch) != (self.leader_id, self.epoch):
                    log.info("raft node %d: epoch %d, leader %d (%s)", self.node_id, out.epoch,
                             out.leader_id, node.role)
                self.leader_id, self.epoch = out.leader_id, out.epoch
                self._events.append(("leader", out.leader_id, out.epoch))
                self._apply_wake.set()
            elif isinstance(out, SnapshotInstalled):
                log.info("raft node %d: installed snapshot %s from the leader", self.node_id,
                         out.snapshot_id)
                self._events.append(("snapshot", out.snapshot_id))
                self._apply_wake.set()

    async def _timer_loop(self) -> None:
        while not self._stopping:
            delay = max(0, self.node.next_poll_ms - self.now_ms()) / 1000.0
            if delay > 0:
                await _wait_event(self._timer_wake, min(delay, 1.0))
                self._timer_wake.clear()
                if self.node.next_poll_ms > self.now_ms():
                    continue
            try:
                await self._step(lambda now: (None, self.node.poll(now)))
            except Exception:  # noqa: BLE001 - logged; the loop must keep the node alive
                log.exception("raft node %d: poll failed", self.node_id)
                await asyncio.sleep(0.1)

    # ---- network

    def _channel(self, dst: int, lane: str) -> NodeClient | None:
        ch = self._channels.get((dst, lane))
        if ch is None:
            addr = self.voters.get(dst)
            if addr is None:
                return None
            ch = NodeClient(addr[0], addr[1], client_id=f"spool-raft-{self.node_id}",
                            connect_timeout_ms=self.config.request_timeout_ms,
                            request_timeout_ms=self.config.request_timeout_ms,
                            reconnect_backoff_ms=self.config.retry_backoff_ms,
                            security=self.security)
            self._channels[(dst, lane)] = ch
        return ch

    async def _send(self, dst: int, request: Request) -> None:
        lane = "fetch" if isinstance(request, (FetchRequest, FetchSnapshotRequest)) else "quorum"
        ch = self._channel(dst, lane)
        if ch is None:
            return
        _api_key, version, msg = wire.to_wire(request)
        timeout_ms = self.config.request_timeout_ms
        if isinstance(request, FetchRequest):
            timeout_ms += request.max_wait_ms
        try:
            raw = await ch.request(msg, version, timeout_ms=timeout_ms)
        except (ClientError, OSError) as e:
            log.debug("raft node %d: %s to %d: %s", self.node_id, type(request).__name__, dst, e)
            self._unreachable.add(dst)
            return
        self._unreachable.discard(dst)
        if self._stopping:
            return
        response = wire.response_from_wire(request, raw)
        await self._step(lambda now: (None, self.node.handle_response(dst, request, response,
                                                                       now)))

    async def handle_request(self, src: int, request: Request) -> Response:
        """Answer a request from node ``src`` (waits while the core parks a Fetch)."""
        fut = asyncio.get_running_loop().create_future()
        key = id(request)
        self._parked[key] = (request, fut)
        try:
            resp = await self._step(lambda now: self.node.handle_request(src, request, now))
            if resp is not None:
                return resp
            return await fut
        finally:
            self._parked.pop(key, None)

    # ---- the leader's side

    async def append(self, values: Sequence[bytes]) -> int:
        """Append as leader (one batch); returns its last offset. NOT_CONTROLLER elsewhere."""
        def step(now: int):
            try:
                last = self.node.append(values, now)
            except KafkaError as e:
                if e.code == Errors.NOT_LEADER_OR_FOLLOWER:
                    raise KafkaError(Errors.NOT_CONTROLLER,
                                     f"node {self.node_id} is not the active controller") from e
                raise
            return last, self.node.poll(now)
        return await self._step(step)

    async def wait_applied(self, offset: int, epoch: int | None = None) -> None:
        """Wait until the entry at ``offset`` was delivered to the listeners. With ``epoch``:
        NOT_CONTROLLER as soon as the epoch moves past it first or this node stops leading it
        (a leader cut off from the quorum resigns after check-quorum; the entry may be lost)."""
        if self._applied > offset:
            return
        fut = asyncio.get_running_loop().create_future()
        self._applied_waiters.append((offset, fut))
        if epoch is None:
            await fut
            return
        while not fut.done():
            if self.epoch != epoch or not self.is_leader or self._stopping:
                fut.cancel()
                raise KafkaError(Errors.NOT_CONTROLLER,
                                 f"leadership moved (epoch {self.epoch}) before offset "
                                 f"{offset} committed")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.05):
                    await asyncio.shield(fut)
        fut.result()

    async def resign(self) -> None:
        await self._step(lambda now: (self.node.resign(now), self.node.poll(now)))

    async def describe_quorum(self):
        """(high watermark, voters, observers) from the leader's state; NOT_LEADER_OR_FOLLOWER
        elsewhere."""
        return await self._step(lambda now: (
            (self.node.high_watermark, *self.node.describe_quorum()), []))

    # ---- applying committed entries

    async def _apply_loop(self) -> None:
        while not self._stopping:
            await _wait_event(self._apply_wake, 1.0)  # (a time-based snapshot needs no event)
            self._apply_wake.clear()
            try:
                while self._events and not self._stopping:
                    event = self._events.pop(0)
                    await self._apply_event(event)
                await self._maybe_snapshot()
            except Exception:  # noqa: BLE001 - logged; delivery resumes at the next event
                log.exception("raft node %d: applying committed entries failed", self.node_id)
                await asyncio.sleep(0.1)
                self._apply_wake.set()

    async def _apply_event(self, event: tuple) -> None:
        kind = event[0]
        if kind == "leader":
            for lst in self._listeners:
                lst.handle_leader_change(event[1], event[2])
        elif kind == "snapshot":
            sid = event[1]
            values = await self._step(lambda now: (self._read_snapshot(sid), []))
            if values is None:
                return
            for lst in self._listeners:
                lst.handle_snapshot(sid, values)
            self._applied = sid.end_offset
            self._bytes_since_snapshot = 0
            self._wake_applied()
        else:
            hw = event[1]
            while self._applied < hw and not self._stopping:
                entries = await self._step(lambda now: (self._read_entries(hw), []))
                if not entries:
                    break
                for lst in self._listeners:
                    lst.handle_commit(entries)
                self._applied = entries[-1].offset + 1
                self._bytes_since_snapshot += sum(len(e.value or b"") for e in entries)
                self._wake_applied()

    def _read_snapshot(self, sid: SnapshotId) -> list[bytes] | None:
        chunks, position = [], 0
        while True:
            got = self.log.read_snapshot(sid, position, 1 << 24)
            if got is None:
                log.warning("raft node %d: snapshot %s is gone", self.node_id, sid)
                return None
            chunk, size = got
            chunks.append(chunk)
            position += len(chunk)
            if position >= size or not chunk:
                break
        return snapshot_values(b"".join(chunks))

    def _read_entries(self, hw: int) -> list[LogEntry]:
        if self._applied < self.log.log_start_offset:
            return []  # a snapshot was installed meanwhile: its event comes next
        return list(itertools.islice(self.log.entries(self._applied, hw), APPLY_CHUNK))

    def _wake_applied(self) -> None:
        keep = []
        for offset, fut in self._applied_waiters:
            if fut.done():
                continue
            if offset < self._applied:
                fut.set_result(None)
            else:
                keep.append((offset, fut))
        self._applied_waiters = keep

    async def _maybe_snapshot(self) -> None:
        if self._snapshot_source is None or self._bytes_since_snapshot == 0:
            return
        now = self.now_ms()
        interval = self.snapshot_max_interval_ms  # 0: no time-based snapshot (Kafka's rule)
        due_by_time = interval > 0 and now - self._last_snapshot_ms >= interval
        if self._bytes_since_snapshot < self.snapshot_max_bytes and not due_by_time:
            return
        end = self._applied
        if end <= self.log.log_start_offset:
            return
        values = list(self._snapshot_source())

        def step(now: int):
            sid = SnapshotId(end, self.log.epoch_at(end - 1))
            data = build_snapshot(values, sid, timestamp=now)
            return self.node.create_snapshot(end, data), self.node.poll(now)

        sid = await self._step(step)
        self._bytes_since_snapshot = 0
        self._last_snapshot_ms = now
        log.info("raft node %d: snapshot %s written (%d records); log now starts at %d",
                 self.node_id, sid, len(values), self.log.log_start_offset)

    # ---- shutdown

    async def shutdown(self, resign_timeout_s: float = 2.0) -> None:
        """Controlled shutdown: a leader resigns and waits (briefly) for a successor."""
        if self.node is not None and self.is_leader and len(self.voters) > 1:
            try:
                await self.resign()
                deadline = self.now_ms() + resign_timeout_s * 1000
                epoch = self.epoch
                while self.now_ms() < deadline and self.epoch == epoch:
                    await asyncio.sleep(0.02)
                log.info("raft node %d: resigned epoch %d; epoch now %d, leader %d",
                         self.node_id, epoch, self.epoch, self.leader_id)
            except Exception:  # noqa: BLE001 - shutting down anyway
                log.exception("raft node %d: resigning failed", self.node_id)
        self._stopping = True
        self._timer_wake.set()
        self._apply_wake.set()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
        gone = KafkaError(Errors.NOT_CONTROLLER, f"node {self.node_id} is shutting down")
        for _, fut in self._parked.values():
            if not fut.done():
                fut.set_exception(gone)
        for _, fut in self._applied_waiters:
            if not fut.done():
                fut.cancel()
        await asyncio.gather(*(ch.close() for ch in self._channels.values()),
                             return_exceptions=True)
        async with self._lock:
            self._closed = True
            await self._run_blocking(self.log.close)


async def _wait_event(event: asyncio.Event, timeout_s: float) -> None:
    """Until ``event`` is set or ``timeout_s`` passed. (``asyncio.timeout``, not ``wait_for``:
    Python 3.11's ``wait_for`` loses a cancellation that races the event, and a loop that
    lost its cancellation never ends.)"""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout_s):
            await event.wait()
