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
means for their API (the lifecycle manager beats again). A connection that
failed is dropped and made again at the next request.

``send_until(api_key, version, request, timeout_s)`` is Kafka's
``NodeToControllerChannelManager`` for forwarded requests: while no controller
is known or the one known does not answer (a controller just killed, before
the election names the next), it tries again, backing off from 50 ms to
500 ms, until ``timeout_s`` is spent; then ``ControllerUnavailable``. A
request whose connection died after it was sent may have been carried out:
the retry then gets the controller's answer to a second attempt (a CreateTopics
answered TOPIC_ALREADY_EXISTS), as with Kafka.
"""

from __future__ import annotations

import asyncio
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
        self._unreachable: set[int] = set()  # controllers whose last request failed

    def reachable(self, node_id: int) -> bool:
        """False while the last request sent to controller ``node_id`` failed."""
        return node_id not in self._unreachable

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
            response = await ch.request(request, version, timeout_ms=int(timeout_s * 1000))
        except (TimeoutError, ConnectionError, OSError) as e:
            self._unreachable.add(node)
            self._channels.pop(node, None)
            await ch.close()
            raise ControllerUnavailable(f"controller {node} did not answer: {e}") from e
        self._unreachable.discard(node)
        return response

    async def send_until(self, api_key: int, version: int, request: Any,
                         timeout_s: float) -> Any:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        backoff = 0.05
        while True:
            left = deadline - loop.time()
            try:
                return await self.send(api_key, version, request, max(left, 0.001))
            except ControllerUnavailable as e:
                left = deadline - loop.time()
                if left <= backoff:
                    raise
                log.debug("api %d to the controller: %s; again in %.0f ms", api_key, e,
                          backoff * 1000)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 0.5)

    async def close(self) -> None:
        channels, self._channels = list(self._channels.values()), {}
        for ch in channels:
            await ch.close()
