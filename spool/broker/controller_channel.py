"""``ControllerChannel``: requests from this node to the active controller.

Kafka's ``NodeToControllerChannelManager``: the active controller is the quorum
leader as this node's metadata follower last learnt it (``leader()``), reached
at its ``controller.quorum.voters`` endpoint (the controller listener) through
one connection per controller, made by ``connect(host, port)`` (a
``spool.net.client.NodeClient``: ``await request(message, version,
timeout_ms=...)``, ``await close()``).

``send(api_key, version, request, timeout_s)`` returns the decoded response, or
raises ``ControllerUnavailable`` (a ``ConnectionError``) when no leader is known
or it does not answer in time; it does not retry: callers know what a retry
means for their API (the lifecycle manager beats again, a forwarded admin
request is answered REQUEST_TIMED_OUT / NOT_CONTROLLER as Kafka does). A
connection that failed is dropped and made again at the next request.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

log = logging.getLogger("spool.broker.controller_channel")


class ControllerUnavailable(ConnectionError):
    """No active controller known, or it did not answer."""


class ControllerChannel:
    def __init__(self, voters: Mapping[int, tuple[str, int]], leader: Callable[[], int],
                 connect: Callable[[str, int], Any]) -> None:
        self.voters = dict(voters)
        self.leader = leader
        self._connect = connect
        self._channels: dict[int, Any] = {}

    def controller_id(self) -> int:
        """The active controller's id as last known (-1: none)."""
        leader = self.leader()
        return leader if leader in self.voters else -1

    async def send(self, api_key: int, version: int, request: Any, timeout_s: float) -> Any:
        node = self.controller_id()
        if node < 0:
            raise ControllerUnavailable("no active controller is known yet")
        ch = self._channels.get(node)
        if ch is None:
            ch = self._channels[node] = self._connect(*self.voters[node])
        try:
            return await ch.request(request, version, timeout_ms=int(timeout_s * 1000))
        except (TimeoutError, ConnectionError, OSError) as e:
            self._channels.pop(node, None)
            await ch.close()
            raise ControllerUnavailable(f"controller {node} did not answer: {e}") from e

    async def close(self) -> None:
        channels, self._channels = list(self._channels.values()), {}
        for ch in channels:
            await ch.close()
