"""This broker's connections to its peers, over the inter-broker listener.

``PeerClients(broker, purpose, timeout_ms=None)``:

- ``for_endpoint(ep)``: the ``spool.net.client.NodeClient`` of the endpoint ``ep``
  (``host``, ``port``: a metadata view's broker endpoint), made at its first use and kept
  (one connection per address; a broker that moved gets a new one). Its client id is
  ``spool-<purpose>-<node id>``; it uses the broker's inter-broker security and
  ``timeout_ms``, or ``request.timeout.ms`` read when the client is made.
- ``close()``: closes them all (the owner's shutdown); a later use makes new ones.

Used by the transaction marker channel, AddPartitionsToTxn verification, the share-group
state persister and the lag metrics' remote high watermarks, each with its own pool:
their requests never wait behind another's. Runs on the broker's event loop.
"""

from __future__ import annotations

from typing import Any

from spool.net.client import NodeClient


class PeerClients:
    """One owner's connections to other brokers (module doc)."""

    def __init__(self, broker: Any, purpose: str, timeout_ms: int | None = None) -> None:
        self.broker = broker
        self.purpose = purpose
        self.timeout_ms = timeout_ms
        self._clients: dict[tuple[str, int], NodeClient] = {}

    def for_endpoint(self, ep: Any) -> NodeClient:
        client = self._clients.get((ep.host, ep.port))
        if client is None:
            broker = self.broker
            timeout = self.timeout_ms
            if timeout is None:
                timeout = broker.config.get_int("request.timeout.ms")
            client = self._clients[(ep.host, ep.port)] = NodeClient(
                ep.host, ep.port, client_id=f"spool-{self.purpose}-{broker.node_id}",
                request_timeout_ms=timeout,
                security=getattr(broker, "inter_broker_security", None))
        return client

    async def close(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for c in clients:
            await c.close()
