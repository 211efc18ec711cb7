"""Client quotas leave replication alone: a follower's Fetch (replica id >= 0, in the
request body before v15, in replica_state from v15) is neither capped, counted against
consumer_byte_rate nor throttled, while a consumer's Fetch from the same client id is
(Kafka: followers are governed by replication quotas, never by client quotas). Found by
mutation: with every Fetch treated as a consumer's every existing test passed (none has
a client quota on a broker that replicates)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from spool.broker.throttling import ClientQuotas
from spool.protocol._generated import FetchRequest, FetchResponse
from spool.protocol._generated.fetch_request import ReplicaState
from spool.security.principal import ANONYMOUS

CONFIG = {"quota.window.num": 11, "quota.window.size.seconds": 1,
          "controller.quota.window.num": 11, "controller.quota.window.size.seconds": 1}


class Conn:
    muted_until = 0.0
    closed = gone = False

    def __init__(self) -> None:
        self.throttled: list[int] = []

    def throttle(self, ms: int) -> None:
        self.throttled.append(ms)


def fetch(version: int, replica_id: int) -> tuple[list, FetchResponse, Conn, FetchRequest]:
    quotas = ClientQuotas(SimpleNamespace(get_int=CONFIG.__getitem__))
    quotas.quotas = {(("client-id", None),): {"consumer_byte_rate": 1.0}}  # 1 B/s for all
    if version >= 15:
        request = FetchRequest(replica_state=ReplicaState(replica_id=replica_id,
                                                          replica_epoch=-1),
                               max_bytes=1_000_000, topics=[])
    else:
        request = FetchRequest(replica_id=replica_id, max_bytes=1_000_000, topics=[])
    seen: list = []

    async def handler(ctx, req):
        seen.append(req.max_bytes)
        return FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=[])

    conn = Conn()
    ctx = SimpleNamespace(principal=ANONYMOUS, client_id="c", api_version=version, conn=conn)
    spec = SimpleNamespace(api_key=1, fn=handler)
    response = asyncio.run(quotas.run(spec, ctx, request, 100))
    return seen, response, conn, request


@pytest.mark.parametrize("version", [12, 16])
def test_a_followers_fetch_is_not_under_client_quotas(version):
    seen, response, conn, _ = fetch(version, replica_id=2)
    assert seen == [1_000_000]  # max_bytes not capped
    assert response.throttle_time_ms == 0 and conn.throttled == []


@pytest.mark.parametrize("version", [12, 16])
def test_a_consumers_fetch_is(version):
    seen, response, conn, _ = fetch(version, replica_id=-1)
    assert seen[0] < 1_000_000  # capped to what one quota window allows
    assert response.throttle_time_ms > 0 and conn.throttled == [response.throttle_time_ms]
