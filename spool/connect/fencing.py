"""KIP-618 zombie fencing: Kafka's ``Admin.fenceProducers`` over spool.net.

``transactional_ids(group_id, connector, task_count) -> list[str]``: the transactional
ids of a connector's exactly-once source tasks 0..task_count-1,
``<group.id>-<connector>-<task>`` (what ``source_task`` gives its producers).

``await fence_producers(bootstrap, transactional_ids, *, security=None, client_id=...,
timeout_s=30.0)``: for each id (concurrently), FindCoordinator v3 (key type 1,
TRANSACTION) through the bootstrap addresses in turn, then InitProducerId v4 with that
transactional id and no producer id to its transaction coordinator, as Kafka's
``FenceProducersHandler`` does: the coordinator bumps the id's epoch and aborts a
transaction left open, so any producer still holding the old epoch is fenced (its next
send, ``AddPartitionsToTxn`` or ``EndTxn`` fails with PRODUCER_FENCED). NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS (find the coordinator again) and
CONCURRENT_TRANSACTIONS are retried with a backoff until ``timeout_s``; another error, or
the timeout, raises ``FencingError`` naming the id.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from spool.net.client import ClientError, NodeClient
from spool.protocol._generated.find_coordinator_request import FindCoordinatorRequest
from spool.protocol._generated.init_producer_id_request import InitProducerIdRequest
from spool.protocol.errors import error_name

TRANSACTION_KEY_TYPE = 1
NONE, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR = 0, 14, 15, 16
CONCURRENT_TRANSACTIONS = 51
_RETRIABLE = {COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR,
              CONCURRENT_TRANSACTIONS}
# The transaction timeout InitProducerId asks for: it only matters to the (empty)
# transaction state the fencing leaves behind, which never expires while empty.
FENCING_TRANSACTION_TIMEOUT_MS = 60000


class FencingError(Exception):
    """A transactional id could not be fenced."""


def transactional_ids(group_id: str, connector: str, task_count: int) -> list[str]:
    return [f"{group_id}-{connector}-{task}" for task in range(task_count)]


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.strip().rpartition(":")
    return host.strip("[]"), int(port)


async def fence_producers(bootstrap: list[str], ids: list[str], *, security: Any = None,
                          client_id: str = "spool-connect-fencing",
                          timeout_s: float = 30.0) -> None:
    """Fence every id in ``ids`` (module doc)."""
    servers = [_split(b) for b in bootstrap]
    deadline = time.monotonic() + timeout_s
    await asyncio.gather(*(_fence_one(servers, i, security, client_id, deadline)
                           for i in ids))


async def _fence_one(servers: list[tuple[str, int]], txn_id: str, security: Any,
                     client_id: str, deadline: float) -> None:
    why = "no attempt"
    backoff = 0.05
    while time.monotonic() < deadline:
        try:
            code, why = await _attempt(servers, txn_id, security, client_id)
        except (ClientError, OSError, TimeoutError) as e:
            code, why = COORDINATOR_NOT_AVAILABLE, f"{type(e).__name__}: {e}"
        if code == NONE:
            return
        if code not in _RETRIABLE:
            raise FencingError(f"fencing transactional id {txn_id} failed: {why}")
        await asyncio.sleep(backoff)
        backoff = min(1.0, backoff * 2)
    raise FencingError(f"fencing transactional id {txn_id} timed out: {why}")


async def _attempt(servers: list[tuple[str, int]], txn_id: str, security: Any,
                   client_id: str) -> tuple[int, str]:
    coordinator: tuple[str, int] | None = None
    last = "no bootstrap server answered FindCoordinator"
    for host, port in servers:
        c = NodeClient(host, port, client_id=client_id, security=security)
        try:
            r = await c.request(FindCoordinatorRequest(key=txn_id,
                                                       key_type=TRANSACTION_KEY_TYPE), 3,
                                timeout_ms=10000)
        except (ClientError, OSError, TimeoutError) as e:
            last = f"{type(e).__name__}: {e}"
            continue
        finally:
            await c.close()
        if r.error_code != NONE:
            return r.error_code, f"FindCoordinator: {error_name(r.error_code)}"
        coordinator = (r.host, r.port)
        break
    if coordinator is None:
        return COORDINATOR_NOT_AVAILABLE, last
    c = NodeClient(*coordinator, client_id=client_id, security=security)
    try:
        r = await c.request(InitProducerIdRequest(
            transactional_id=txn_id, transaction_timeout_ms=FENCING_TRANSACTION_TIMEOUT_MS,
            producer_id=-1, producer_epoch=-1), 4, timeout_ms=30000)
    finally:
        await c.close()
    return r.error_code, f"InitProducerId: {error_name(r.error_code)}"
