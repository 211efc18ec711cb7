"""A worker's membership in its Connect cluster: the classic group protocol over spool.net.

``WorkerGroupMember(bootstrap, group_id, ...)`` is Kafka's WorkerGroupMember +
WorkerCoordinator for the eager protocol: protocol type ``connect``, one protocol
``default`` whose metadata is ``connect_protocol.encode_metadata`` (this worker's URL
and config offset). It speaks FindCoordinator v3, JoinGroup v5, SyncGroup v3, Heartbeat
v3 and LeaveGroup v3 through ``spool.net.client.NodeClient`` (``security`` a
``ClientSecurity`` for TLS/SASL clusters).

``run()`` (a task on the herder's loop) loops until ``stop()``:

1. find the coordinator (FindCoordinator through each bootstrap address in turn);
2. when a (re)join is needed: ``await on_revoke()`` if something was assigned (eager:
   the herder stops everything first), JoinGroup (MEMBER_ID_REQUIRED answered by
   joining again with the id given), then, as the leader, ``await on_assign(leader_id,
   [(member_id, metadata)])`` -> ``{member_id: assignment bytes}`` sent in SyncGroup;
   the answer's bytes go to ``await on_assigned(assignment, generation)``;
3. meanwhile, a second task heartbeats every ``heartbeat_interval_ms`` whenever this
   member has a generation and is not joining (so also while the herder revokes or
   applies an assignment): REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION or
   UNKNOWN_MEMBER_ID (this one also forgets the member id) mean join again;
   NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE or a failed heartbeat mean find the
   coordinator again, keeping the generation and what is assigned (the group outlives
   its coordinator's move). A refused join backs off ``retry_backoff_ms``.

``request_rejoin()`` (any time, on the loop) makes the next step a join: how the herder
starts a rebalance when connectors or task counts change. A member not heard from for
``session_timeout_ms`` is dropped by the coordinator, which rebalances the others: that
is how a dead worker's work moves. ``stop()`` ends the loop, revokes, and sends
LeaveGroup so the others rebalance at once.

Members' ids are the coordinator's; ``member_id``, ``generation`` and ``leader_id`` are
this member's view after its last successful join.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from spool.connect.connect_protocol import CONNECT_PROTOCOL_TYPE, EAGER
from spool.net.client import ClientError, NodeClient
from spool.protocol._generated.find_coordinator_request import FindCoordinatorRequest
from spool.protocol._generated.heartbeat_request import HeartbeatRequest
from spool.protocol._generated.join_group_request import (
    JoinGroupRequest,
    JoinGroupRequestProtocol,
)
from spool.protocol._generated.leave_group_request import LeaveGroupRequest, MemberIdentity
from spool.protocol._generated.sync_group_request import (
    SyncGroupRequest,
    SyncGroupRequestAssignment,
)
from spool.protocol.errors import error_name

log = logging.getLogger("spool.connect.membership")

NONE, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR = 0, 14, 15, 16
ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS, MEMBER_ID_REQUIRED = 22, 25, 27, 79
_COORDINATOR_ERRORS = {COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR}


class _Retry(Exception):
    """Back off, then go round the loop again (the coordinator is to be found again when
    ``lost``)."""

    def __init__(self, why: str, lost: bool = False) -> None:
        super().__init__(why)
        self.lost = lost


class WorkerGroupMember:
    """This worker's membership (module doc). Runs on one event loop."""

    def __init__(self, bootstrap: list[str], group_id: str, *,
                 metadata: Callable[[], bytes],
                 on_revoke: Callable[[], Awaitable[None]],
                 on_assign: Callable[[str, list[tuple[str, bytes]]], Awaitable[dict[str, bytes]]],
                 on_assigned: Callable[[bytes, int], Awaitable[None]],
                 session_timeout_ms: int = 10000, rebalance_timeout_ms: int = 60000,
                 heartbeat_interval_ms: int = 3000, retry_backoff_ms: int = 100,
                 client_id: str = "spool-connect", security: Any = None) -> None:
        self.bootstrap = [_split(b) for b in bootstrap]
        self.group_id = group_id
        self.metadata = metadata
        self.on_revoke = on_revoke
        self.on_assign = on_assign
        self.on_assigned = on_assigned
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.client_id = client_id
        self.security = security
        self.member_id = ""
        self.generation = -1
        self.leader_id: str | None = None
        self.heartbeats = 0  # answered without error
        self._coordinator: NodeClient | None = None
        self._needs_join = True
        self._assigned = False
        self._stopping = False
        self._joining = False
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None

    # ---- control

    def start(self) -> asyncio.Task:
        self._task = asyncio.ensure_future(self.run())
        return self._task

    def request_rejoin(self) -> None:
        self._needs_join = True
        self._wake.set()

    @property
    def is_leader(self) -> bool:
        return (not self._needs_join and not self._joining
                and self.leader_id == self.member_id != "")

    async def halt(self) -> None:
        """End the loops as a killed process would: no revoke, no LeaveGroup (tests)."""
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        await self._close()

    async def stop(self, leave: bool = True) -> None:
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        if self._assigned:
            self._assigned = False
            await self.on_revoke()
        if leave and self.member_id and self._coordinator is not None:
            with contextlib.suppress(ClientError, OSError, TimeoutError):
                await self._coordinator.request(LeaveGroupRequest(
                    group_id=self.group_id, members=[MemberIdentity(
                        member_id=self.member_id, reason="the worker is stopping")]), 3,
                    timeout_ms=5000)
        await self._close()

    async def _close(self) -> None:
        if self._coordinator is not None:
            c, self._coordinator = self._coordinator, None
            await c.close()

    # ---- the loop

    async def run(self) -> None:
        beats = asyncio.ensure_future(self._heartbeats())
        failures = 0  # in a row: the backoff doubles up to 1 s, the log says it once
        try:
            while not self._stopping:
                try:
                    if self._coordinator is None:
                        self._coordinator = await self._find_coordinator()
                    if self._needs_join:
                        await self._join()
                    else:
                        await self._wake.wait()
                        self._wake.clear()  # rejoin asked, coordinator lost, or stopping
                    failures = 0
                except asyncio.CancelledError:
                    raise
                except (_Retry, ClientError, OSError, TimeoutError) as e:
                    (log.info if failures == 0 else log.debug)("group %s: %s", self.group_id, e)
                    if not isinstance(e, _Retry) or e.lost:
                        await self._close()
                    failures += 1
                    await asyncio.sleep(min(1.0, self.retry_backoff_ms / 1000
                                            * 2 ** min(failures - 1, 10)))
                except Exception:  # noqa: BLE001 - a callback failed: log it, join again
                    log.exception("group %s: rebalance failed; joining again", self.group_id)
                    self._needs_join = True
                    await asyncio.sleep(max(1.0, self.retry_backoff_ms / 1000))
        finally:
            beats.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await beats

    async def _find_coordinator(self) -> NodeClient:
        last: Exception | None = None
        for host, port in self.bootstrap:
            c = NodeClient(host, port, client_id=self.client_id, security=self.security)
            try:
                r = await c.request(FindCoordinatorRequest(key=self.group_id, key_type=0), 3,
                                    timeout_ms=10000)
            except (ClientError, OSError, TimeoutError) as e:
                last = e
                continue
            finally:
                await c.close()
            if r.error_code != NONE:
                raise _Retry(f"FindCoordinator: {error_name(r.error_code)}")
            return NodeClient(r.host, r.port, client_id=self.client_id, security=self.security,
                              request_timeout_ms=self.rebalance_timeout_ms + 10000)
        raise _Retry(f"no bootstrap server answered FindCoordinator ({last})")

    async def _join(self) -> None:
        assert self._coordinator is not None
        if self._assigned:
            self._assigned = False
            await self.on_revoke()
        self._joining = True
        self._needs_join = False  # a request_rejoin() from here on asks for another join
        try:
            r = await self._coordinator.request(JoinGroupRequest(
                group_id=self.group_id, session_timeout_ms=self.session_timeout_ms,
                rebalance_timeout_ms=self.rebalance_timeout_ms, member_id=self.member_id,
                protocol_type=CONNECT_PROTOCOL_TYPE,
                protocols=[JoinGroupRequestProtocol(name=EAGER, metadata=self.metadata())]), 5,
                timeout_ms=self.rebalance_timeout_ms + 10000)
            if r.error_code == MEMBER_ID_REQUIRED:
                self.member_id = r.member_id
                self._needs_join = True
                return
            self._check(r.error_code, "JoinGroup")
            self.generation, self.member_id, self.leader_id = (
                r.generation_id, r.member_id, r.leader)
            assignments: dict[str, bytes] = {}
            if r.leader == r.member_id:
                members = [(m.member_id, bytes(m.metadata)) for m in r.members]
                assignments = await self.on_assign(r.member_id, members)
            s = await self._coordinator.request(SyncGroupRequest(
                group_id=self.group_id, generation_id=self.generation, member_id=self.member_id,
                assignments=[SyncGroupRequestAssignment(member_id=m, assignment=a)
                             for m, a in assignments.items()]), 3,
                timeout_ms=self.rebalance_timeout_ms + 10000)
            self._check(s.error_code, "SyncGroup")
        except BaseException:
            self._needs_join = True
            raise
        finally:
            self._joining = False
        self._assigned = True
        log.info("group %s: joined generation %d as %s (leader %s)", self.group_id,
                 self.generation, self.member_id, self.leader_id)
        await self.on_assigned(bytes(s.assignment), self.generation)

    async def _heartbeats(self) -> None:
        """Heartbeat every interval while a member of a generation and not joining (also
        while the herder revokes or applies an assignment)."""
        while not self._stopping:  # not only cancelled: 3.11's wait_for may drop that
            await asyncio.sleep(self.heartbeat_interval_ms / 1000)
            c = self._coordinator
            if (c is None or self._joining or self._stopping or self.generation < 0
                    or not self.member_id):
                continue
            try:
                r = await c.request(HeartbeatRequest(
                    group_id=self.group_id, generation_id=self.generation,
                    member_id=self.member_id), 3, timeout_ms=max(self.session_timeout_ms, 5000))
            except (ClientError, OSError, TimeoutError) as e:
                log.info("group %s: heartbeat failed (%s); finding the coordinator again",
                         self.group_id, e)
                await self._lost(c)
                continue
            if r.error_code == NONE:
                self.heartbeats += 1
                continue
            if self._joining or self._needs_join:
                continue
            if r.error_code in _COORDINATOR_ERRORS:  # it moved: the membership did not
                log.info("group %s: heartbeat: %s; finding the coordinator again",
                         self.group_id, error_name(r.error_code))
                await self._lost(c)
                continue
            log.info("group %s: heartbeat: %s; rejoining", self.group_id,
                     error_name(r.error_code))
            if r.error_code == UNKNOWN_MEMBER_ID:
                self.member_id = ""
            self.request_rejoin()

    async def _lost(self, c: NodeClient) -> None:
        """Forget coordinator ``c``; the loop finds it again (and keeps the generation)."""
        if self._coordinator is c:
            self._coordinator = None
            self._wake.set()
            await c.close()

    def _check(self, code: int, what: str) -> None:
        if code == NONE:
            return
        if code in _COORDINATOR_ERRORS:
            raise _Retry(f"{what}: {error_name(code)}", lost=True)
        self._needs_join = True
        if code == UNKNOWN_MEMBER_ID:
            self.member_id = ""
        if code in (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS):
            raise _Retry(f"{what}: {error_name(code)}")
        raise _Retry(f"{what}: {error_name(code)}")


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.strip().rpartition(":")
    return host.strip("[]"), int(port)
