"""spool.net.client against a real broker: requests, pipelining, timeouts, reconnects.

What a node (or the CLI) relies on when it talks to another node: ApiVersions
and Metadata decode as the broker sent them; fifty requests pipelined on one
connection each get their own answer; a request the broker holds past its
timeout (a long-polling Fetch) raises RequestTimeoutError, fails the request
pipelined behind it, and the next request reconnects; a broker that is down
is a DisconnectedError, and the same client works again once it is back.
"""

from __future__ import annotations

import asyncio
import gc
import socket

import pytest

from spool.net.client import DisconnectedError, NodeClient, NodeClients, RequestTimeoutError
from spool.protocol._generated import (
    ApiVersionsRequest,
    DescribeClusterRequest,
    FetchRequest,
    MetadataRequest,
)
from spool.protocol._generated.fetch_request import FetchPartition, FetchTopic
from spool.protocol._generated.metadata_request import MetadataRequestTopic
from spool.protocol.errors import Errors

pytestmark = pytest.mark.timeout(120)


def run(coro):
    return asyncio.run(coro)


def metadata(*topics: str, create: bool = False) -> MetadataRequest:
    return MetadataRequest(topics=[MetadataRequestTopic(name=t) for t in topics],
                           allow_auto_topic_creation=create)


def test_api_versions_and_metadata_from_a_real_broker(broker):
    async def go():
        client = NodeClient("127.0.0.1", broker.port, client_id="net-test")
        try:
            versions = await client.request(ApiVersionsRequest(
                client_software_name="spool-net", client_software_version="1"), 3)
            md = await client.request(MetadataRequest(topics=None), 12)
        finally:
            await client.close()
        return versions, md

    versions, md = run(go())
    assert versions.error_code == 0
    ranges = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
    assert ranges[18] == (0, 4) and ranges[3][1] >= 12
    assert [(b.node_id, b.host, b.port) for b in md.brokers] == [(0, "127.0.0.1", broker.port)]
    assert md.cluster_id


def test_pipelined_requests_each_get_their_own_answer(broker, topic_name):
    names = [f"{topic_name}-{i}" for i in range(50)]

    async def go():
        client = NodeClient("127.0.0.1", broker.port)
        try:
            await client.connect()
            answers = await asyncio.gather(*(client.request(metadata(n), 12) for n in names))
            return answers, client.connected
        finally:
            await client.close()

    answers, still_connected = run(go())
    assert still_connected
    assert [[(t.name, t.error_code) for t in a.topics] for a in answers] == [
        [(n, Errors.UNKNOWN_TOPIC_OR_PARTITION)] for n in names]


def test_a_timeout_closes_the_connection_and_the_next_request_reconnects(broker, topic_name):
    parked = FetchRequest(replica_id=-1, max_wait_ms=10_000, min_bytes=1, max_bytes=1 << 20,
                          isolation_level=0, topics=[FetchTopic(topic=topic_name, partitions=[
                              FetchPartition(partition=0, fetch_offset=0,
                                             partition_max_bytes=1 << 20)])])

    async def go():
        client = NodeClient("127.0.0.1", broker.port, request_timeout_ms=5_000)
        try:
            created = await client.request(metadata(topic_name, create=True), 12)
            assert created.topics[0].error_code == 0
            # the empty partition parks the fetch for 10 s; the metadata behind it waits
            fetch = asyncio.ensure_future(client.request(parked, 12, timeout_ms=500))
            await asyncio.sleep(0)
            behind = asyncio.ensure_future(client.request(metadata(topic_name), 12))
            results = await asyncio.gather(fetch, behind, return_exceptions=True)
            assert not client.connected
            after = await client.request(metadata(topic_name), 12)
            return results, after
        finally:
            await client.close()

    (fetch_error, behind_error), after = run(go())
    assert isinstance(fetch_error, RequestTimeoutError)
    assert "no response to Fetch v12" in str(fetch_error) and "within 500 ms" in str(fetch_error)
    assert isinstance(behind_error, DisconnectedError)
    assert [(t.name, t.error_code) for t in after.topics] == [(topic_name, 0)]


def test_a_broker_that_is_down_then_back(fresh_broker):
    async def ask(client: NodeClient):
        return await client.request(MetadataRequest(topics=None), 12)

    fresh_broker.start()

    async def go():
        client = NodeClient("127.0.0.1", fresh_broker.port, reconnect_backoff_ms=10)
        try:
            first = await ask(client)
            fresh_broker.kill()
            with pytest.raises(DisconnectedError):
                await ask(client)  # the dropped connection, or the refused reconnect
            with pytest.raises(DisconnectedError, match="cannot connect"):
                await ask(client)
            await asyncio.get_running_loop().run_in_executor(None, fresh_broker.start)
            return first, await ask(client)
        finally:
            await client.close()

    first, again = run(go())
    assert first.brokers[0].port == again.brokers[0].port == fresh_broker.port


def test_node_clients_route_by_node_id(broker):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]

    async def go():
        nodes = NodeClients({0: ("127.0.0.1", broker.port), 7: ("127.0.0.1", dead)},
                            connect_timeout_ms=2_000)
        try:
            md = await nodes.request(0, MetadataRequest(topics=None), 12)
            with pytest.raises(DisconnectedError, match="cannot connect"):
                await nodes.request(7, MetadataRequest(topics=None), 12)
            with pytest.raises(KeyError):
                nodes.client(8)
            return md
        finally:
            await nodes.close()

    assert run(go()).brokers[0].port == broker.port


def test_describe_cluster_v2_lists_fenced_brokers_on_request(broker):
    """KIP-1073: v2 with include_fenced_brokers marks each broker; a single node is never
    fenced."""
    async def go():
        client = NodeClient("127.0.0.1", broker.port)
        try:
            return await client.request(DescribeClusterRequest(include_fenced_brokers=True), 2)
        finally:
            await client.close()

    resp = run(go())
    assert resp.error_code == 0
    assert [(b.broker_id, b.port, b.is_fenced) for b in resp.brokers] == [(0, broker.port, False)]


def test_a_cancelled_request_leaves_the_connection_in_step(broker, topic_name):
    """The response to a request whose caller gave up is read and dropped: the request
    behind it still gets its own answer on the same connection."""
    parked = FetchRequest(replica_id=-1, max_wait_ms=1_000, min_bytes=1, max_bytes=1 << 20,
                          isolation_level=0, topics=[FetchTopic(topic=topic_name, partitions=[
                              FetchPartition(partition=0, fetch_offset=0,
                                             partition_max_bytes=1 << 20)])])

    async def go():
        client = NodeClient("127.0.0.1", broker.port)
        try:
            await client.request(metadata(topic_name, create=True), 12)
            fetch = asyncio.ensure_future(client.request(parked, 12))
            await asyncio.sleep(0.1)
            fetch.cancel()
            behind = await client.request(metadata(topic_name), 12)
            return fetch.cancelled(), behind, client.connected
        finally:
            await client.close()

    cancelled, behind, connected = run(go())
    assert cancelled and connected
    assert [(t.name, t.error_code) for t in behind.topics] == [(topic_name, 0)]


async def _serve_once(reply) -> tuple[asyncio.AbstractServer, int]:
    """A peer that answers each request frame with ``reply(frame)``: for what no Spool or
    Kafka broker sends (a wrong correlation id) or what ours cannot be made to send."""
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                size = int.from_bytes(await reader.readexactly(4), "big")
                out = reply(await reader.readexactly(size))
                writer.write(len(out).to_bytes(4, "big") + out)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def test_a_response_with_another_correlation_id_closes_the_connection():
    async def go():
        server, port = await _serve_once(lambda frame: (12345).to_bytes(4, "big") + b"\0" * 8)
        client = NodeClient("127.0.0.1", port)
        try:
            with pytest.raises(DisconnectedError, match="correlation id 12345, expected 1"):
                await client.request(MetadataRequest(topics=None), 12)
            return client.connected
        finally:
            await client.close()
            server.close()

    assert run(go()) is False


def test_api_versions_unsupported_version_is_read_as_v0():
    """Kafka answers an ApiVersions version it does not know with a v0 body (error 35 and
    its ranges), whatever version was asked."""
    from spool.protocol._generated import ApiVersionsResponse
    from spool.protocol._generated.api_versions_response import ApiVersion

    body = ApiVersionsResponse(error_code=Errors.UNSUPPORTED_VERSION, api_keys=[
        ApiVersion(api_key=18, min_version=0, max_version=2)]).to_bytes(0)

    async def go():
        server, port = await _serve_once(lambda frame: frame[4:8] + body)
        client = NodeClient("127.0.0.1", port)
        try:
            return await client.request(ApiVersionsRequest(
                client_software_name="x", client_software_version="1"), 4)
        finally:
            await client.close()
            server.close()

    resp = run(go())
    assert resp.error_code == Errors.UNSUPPORTED_VERSION
    assert [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys] == [(18, 0, 2)]


def test_a_connect_whose_waiter_was_cancelled_fails_quietly_and_the_next_one_starts_afresh(
        broker):
    """A follower cancelled while connecting to a dead leader: the failed attempt leaves no
    'Task exception was never retrieved' behind, and the next request makes a new attempt
    rather than getting the old failure (the leader is back meanwhile)."""
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]

    async def main():
        unhandled = []
        asyncio.get_running_loop().set_exception_handler(lambda loop, ctx: unhandled.append(ctx))
        c = NodeClient("127.0.0.1", dead, reconnect_backoff_ms=0, connect_timeout_ms=2000)
        waiter = asyncio.ensure_future(c.connect())
        await asyncio.sleep(0)
        waiter.cancel()
        attempt = c._connecting
        with pytest.raises(DisconnectedError):
            await attempt  # the attempt itself still runs and fails
        c.port = broker.port  # "back": the same client, now pointed where a broker answers
        got = await c.request(ApiVersionsRequest(client_software_name="t",
                                                 client_software_version="1"), 0)
        assert got.error_code == 0
        await c.close()
        del attempt, waiter
        gc.collect()
        await asyncio.sleep(0)
        assert unhandled == []

    run(main())
